//! Telling stdin's format by its first bytes, since it has no name to go by: Parquet,
//! Arrow IPC (file and stream), CSV with a header row that names a known column, and
//! JSON lines, each also gzip- or zstd-compressed. Anything else stops the run before
//! an output is opened.
//!
//! The bytes read to tell are pushed back: every reader of stdin takes them first
//! ([`stdin`]), so nothing is read twice and nothing is lost. Stdin is one stream a
//! process, so the bytes pushed back are too.

use std::io::{self, Cursor, Read};

use parking_lot::Mutex;

use crate::client::decompress::decompressed;
use crate::client::format::Format;

/// Bytes read from stdin to tell its format, which its reader takes first.
static PUSHED_BACK: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// At most this much of stdin is read to tell its format: a CSV header longer than this
/// is not told (give `--input-format csv`).
const MOST_BYTES: usize = 1 << 20;

/// Why stdin's format cannot be told.
#[derive(Debug, thiserror::Error)]
pub enum SniffError {
    /// Reading stdin failed.
    #[error("cannot read stdin: {0}")]
    Read(#[source] io::Error),
    /// Stdin holds none of the formats the client reads.
    #[error(
        "stdin is none of the formats this client reads (JSON lines of problems, CSV with a header row \
         naming its columns, an Arrow IPC stream): it starts with {start}; give --input-format FORMAT"
    )]
    Unknown {
        /// Its first bytes, quoted.
        start: String,
    },
}

/// Stdin, the bytes read to tell its format first.
pub(crate) fn stdin() -> Box<dyn Read + Send> {
    let head = std::mem::take(&mut *PUSHED_BACK.lock());
    Box::new(Cursor::new(head).chain(io::stdin()))
}

/// Reads enough of stdin to tell its format, and pushes it back. `columns` are the names
/// a CSV header may hold (the contract's, and the tables' own names given by `--column`).
pub(crate) fn stdin_format(columns: &[&str]) -> Result<Format, SniffError> {
    let mut head = std::mem::take(&mut *PUSHED_BACK.lock());
    let told = tell(&mut io::stdin(), &mut head, columns);
    *PUSHED_BACK.lock() = head;
    told
}

/// Reads from `source` into `head` until its format can be told (a whole first line of
/// text, or the source's end), and tells it.
fn tell(source: &mut impl Read, head: &mut Vec<u8>, columns: &[&str]) -> Result<Format, SniffError> {
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let ended = head.len() >= MOST_BYTES
            || match source.read(&mut chunk) {
                Ok(0) => true,
                Ok(n) => {
                    head.extend_from_slice(&chunk[..n]);
                    false
                }
                Err(err) if err.kind() == io::ErrorKind::Interrupted => false,
                Err(err) => return Err(SniffError::Read(err)),
            };
        if let Some(told) = format_of(head, ended, columns) {
            return told;
        }
    }
}

/// The format `head` (stdin's first bytes) starts, `None` when more must be read to tell;
/// `ended` when no more will come.
fn format_of(head: &[u8], ended: bool, columns: &[&str]) -> Option<Result<Format, SniffError>> {
    // Through gzip and zstd: what the first bytes decompress to (a decoder stops with an
    // error where the bytes read so far end, after what it could decompress).
    let mut plain = Vec::new();
    if let Ok((mut reader, _)) = decompressed(Box::new(Cursor::new(head.to_vec()))) {
        let _ = reader.by_ref().take(MOST_BYTES as u64).read_to_end(&mut plain);
    }
    let text = plain.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&plain);
    let first_line = memchr::memchr(b'\n', text).map(|end| &text[..end]);
    if text.starts_with(b"PAR1") {
        return Some(Ok(Format::Parquet));
    }
    if text.starts_with(b"ARROW1") {
        return Some(Ok(Format::Arrow));
    }
    if text.starts_with(&[0xff, 0xff, 0xff, 0xff]) {
        return Some(Ok(Format::Arrows));
    }
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        // Empty: no problem in it, as JSON lines have always read it.
        None if ended => return Some(Ok(Format::Jsonl)),
        Some(b'{') => return Some(Ok(Format::Jsonl)),
        _ => {}
    }
    let line = match first_line {
        Some(line) => line,
        None if ended || plain.len() >= MOST_BYTES => text,
        None => return None,
    };
    if is_csv_header(line, columns) {
        return Some(Ok(Format::Csv));
    }
    let shown: String = String::from_utf8_lossy(&text[..text.len().min(40)]).into_owned();
    let start = match text.len() > 40 {
        true => format!("{shown:?}…"),
        false => format!("{shown:?}"),
    };
    Some(Err(SniffError::Unknown { start }))
}

/// True when `line` is a CSV header naming one of `columns`.
fn is_csv_header(line: &[u8], columns: &[&str]) -> bool {
    let Ok(line) = std::str::from_utf8(line) else { return false };
    line.trim_end_matches('\r')
        .split(',')
        .map(|name| name.trim().trim_matches('"'))
        .any(|name| columns.contains(&name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const COLUMNS: &[&str] = &["id", "num", "stones", "n", "piles", "pile_size"];

    fn told(bytes: &[u8]) -> Result<Format, String> {
        let mut head = Vec::new();
        tell(&mut Cursor::new(bytes.to_vec()), &mut head, COLUMNS).map_err(|err| err.to_string())
    }

    #[test]
    fn each_format_is_told_by_its_first_bytes() {
        assert_eq!(told(b"{\"stoneGameIv\":{\"n\":5}}\n"), Ok(Format::Jsonl));
        assert_eq!(told(b"  \n{\"id\":\"a\"}"), Ok(Format::Jsonl));
        assert_eq!(told(b""), Ok(Format::Jsonl));
        assert_eq!(told(b"id,n\na,5\n"), Ok(Format::Csv));
        assert_eq!(told(b"\xef\xbb\xbf\"label\",\"pile_size\"\r\nx,5\r\n"), Ok(Format::Csv));
        assert_eq!(told(b"id,n"), Ok(Format::Csv), "a header alone");
        assert_eq!(told(b"PAR1\x15\x04"), Ok(Format::Parquet));
        assert_eq!(told(b"ARROW1\0\0"), Ok(Format::Arrow));
        assert_eq!(told(b"\xff\xff\xff\xff\x10\0\0\0"), Ok(Format::Arrows));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"id,stones\na,\"[1,2]\"\n").unwrap();
        assert_eq!(told(&gz.finish().unwrap()), Ok(Format::Csv));
        let zst = zstd::encode_all(Cursor::new(b"{\"id\":\"z\"}\n".to_vec()), 1).unwrap();
        assert_eq!(told(&zst), Ok(Format::Jsonl));
    }

    #[test]
    fn anything_else_is_refused_with_how_it_starts() {
        assert_eq!(
            told(b"hello world\nmore\n"),
            Err("stdin is none of the formats this client reads (JSON lines of problems, CSV with a header \
                 row naming its columns, an Arrow IPC stream): it starts with \"hello world\\nmore\\n\"; \
                 give --input-format FORMAT"
                .into())
        );
        assert!(told(b"label,size\nx,5\n").is_err(), "no known column");
        assert!(told(&[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]).unwrap_err().contains("\"\\u{7f}ELF"));
    }

    #[test]
    fn the_bytes_read_to_tell_are_read_again_first() {
        let mut source = Cursor::new(b"id,n\na,5\n".repeat(10_000));
        let mut head = Vec::new();
        assert_eq!(tell(&mut source, &mut head, COLUMNS).unwrap(), Format::Csv);
        let mut again = Vec::new();
        Cursor::new(head).chain(source).read_to_end(&mut again).unwrap();
        assert_eq!(again, b"id,n\na,5\n".repeat(10_000));
    }
}

//! Reading problem files line by line, whatever their size or compression.
//!
//! Compression is recognised by its magic bytes rather than the file name, so that a
//! compressed stdin works too. A line is held in memory up to a limit and skipped past
//! it, so one absurd line costs at most the limit, never its own length. A binary file
//! given by mistake is refused at once rather than reported line by line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Size of the read buffers, before and after decompression.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// At most this much of the input's first read is checked for binary data.
const SNIFF_BYTES: usize = 64 * 1024;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Why the input cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file cannot be opened.
    #[error("cannot open {path}")]
    Open {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The input holds binary data: a NUL byte, which no JSON text contains.
    #[error("{path}: not JSON lines (byte 0x00 at line {line}{hint})")]
    Binary {
        /// The path given (`-` for stdin).
        path: PathBuf,
        /// The line of the first NUL byte.
        line: u64,
        /// What the file may be instead, when its first bytes tell.
        hint: &'static str,
    },
    /// Reading (or decompressing) failed part-way.
    #[error("cannot read input after line {line}")]
    Read {
        /// The last line read completely.
        line: u64,
        /// The underlying error.
        source: io::Error,
    },
}

/// Where the input comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSource {
    /// Standard input (`-` on the command line).
    Stdin,
    /// A file, possibly gzip- or zstd-compressed.
    File(PathBuf),
}

impl InputSource {
    /// `-` is stdin, anything else a path.
    pub fn parse(arg: &str) -> Self {
        if arg == "-" {
            InputSource::Stdin
        } else {
            InputSource::File(PathBuf::from(arg))
        }
    }
}

/// One line of input, as [`ProblemReader::next_line`] returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    /// The line's bytes (without the newline) are in the caller's buffer.
    Text {
        /// 1-based line number.
        number: u64,
    },
    /// The line was longer than the limit and was skipped; the buffer is empty.
    TooLong {
        /// 1-based line number.
        number: u64,
        /// Its length in bytes.
        len: u64,
    },
}

/// Counts the raw (possibly compressed) bytes taken from the source, for progress.
#[derive(Debug)]
struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Reads a newline-delimited problem file: plain, gzip or zstd; file or stdin.
pub struct ProblemReader {
    inner: Box<dyn BufRead + Send>,
    raw_bytes: Arc<AtomicU64>,
    raw_len: Option<u64>,
    line_number: u64,
    max_line_bytes: usize,
}

impl std::fmt::Debug for ProblemReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProblemReader")
            .field("raw_len", &self.raw_len)
            .field("line_number", &self.line_number)
            .finish_non_exhaustive()
    }
}

impl ProblemReader {
    /// Opens `source`; lines longer than `max_line_bytes` will be reported as too long.
    /// A source that holds binary data is refused.
    pub fn open(source: &InputSource, max_line_bytes: usize) -> Result<Self, InputError> {
        let (mut reader, path) = match source {
            InputSource::Stdin => {
                let reader = Self::from_reader(Box::new(io::stdin()), None, max_line_bytes)
                    .map_err(|source| InputError::Open { path: "-".into(), source })?;
                (reader, Path::new("-"))
            }
            InputSource::File(path) => (Self::open_file(path, max_line_bytes)?, path.as_path()),
        };
        reader.refuse_binary(path)?;
        Ok(reader)
    }

    /// Fails when the first block of (decompressed) input holds a NUL byte: JSON text
    /// never does, even inside strings, and binary data (an executable, an image, an
    /// archive this reader does not unpack, UTF-16 text) nearly always does within its
    /// first kilobytes. git and grep tell binary files by the same test. Without it, such
    /// a file would give hundreds of error lines, each true and none useful.
    fn refuse_binary(&mut self, path: &Path) -> Result<(), InputError> {
        let block = loop {
            match self.inner.fill_buf() {
                Ok(block) => break block,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(InputError::Read { line: 0, source }),
            }
        };
        let Some(at) = memchr::memchr(0, block) else { return Ok(()) };
        let line = 1 + memchr::memchr_iter(b'\n', &block[..at]).count() as u64;
        let hint = match block {
            [0xff, 0xfe, ..] | [0xfe, 0xff, ..] => ": UTF-16 text; convert it to UTF-8",
            _ => "",
        };
        Err(InputError::Binary { path: path.to_owned(), line, hint })
    }

    fn open_file(path: &Path, max_line_bytes: usize) -> Result<Self, InputError> {
        let open_error = |source| InputError::Open { path: path.to_owned(), source };
        let file = File::open(path).map_err(open_error)?;
        let len = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
        Self::from_reader(Box::new(file), len, max_line_bytes).map_err(open_error)
    }

    /// Wraps any byte source; `raw_len` is its total size when known (for the ETA).
    pub fn from_reader(
        source: Box<dyn Read + Send>,
        raw_len: Option<u64>,
        max_line_bytes: usize,
    ) -> io::Result<Self> {
        let raw_bytes = Arc::new(AtomicU64::new(0));
        let mut counted = CountingReader { inner: source, count: Arc::clone(&raw_bytes) };
        // The first read is kept whole (up to a block) rather than cut at the magic bytes,
        // so that the check for binary data sees a block of plain input.
        let mut head = vec![0u8; SNIFF_BYTES];
        let head_len = read_at_least(&mut counted, &mut head, ZSTD_MAGIC.len())?;
        head.truncate(head_len);
        let head = head.as_slice();
        let raw = BufReader::with_capacity(READ_BUFFER_BYTES, io::Cursor::new(head.to_vec()).chain(counted));
        let inner: Box<dyn BufRead + Send> = if head.starts_with(GZIP_MAGIC) {
            // Multi-member, so that concatenated (pigz, bgzip) files read whole.
            Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, flate2::bufread::MultiGzDecoder::new(raw)))
        } else if head.starts_with(ZSTD_MAGIC) {
            Box::new(BufReader::with_capacity(
                READ_BUFFER_BYTES,
                zstd::stream::read::Decoder::with_buffer(raw)?,
            ))
        } else {
            Box::new(raw)
        };
        Ok(ProblemReader { inner, raw_bytes, raw_len, line_number: 0, max_line_bytes })
    }

    /// Total size of the raw source in bytes, when it is a regular file.
    pub fn raw_len(&self) -> Option<u64> {
        self.raw_len
    }

    /// A live count of the raw (compressed) bytes read so far.
    pub fn raw_bytes_read(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.raw_bytes)
    }

    /// Reads the next line into `buf` (cleared first, newline and any `\r` removed).
    /// `None` at the end of the input; a last line without a newline still counts.
    pub fn next_line(&mut self, buf: &mut Vec<u8>) -> Result<Option<Line>, InputError> {
        buf.clear();
        let mut len = 0u64;
        let mut too_long = false;
        loop {
            let chunk = match self.inner.fill_buf() {
                Ok(chunk) => chunk,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => return Err(InputError::Read { line: self.line_number, source }),
            };
            if chunk.is_empty() {
                if len == 0 {
                    return Ok(None);
                }
                break;
            }
            let (take, found) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i, true),
                None => (chunk.len(), false),
            };
            len += take as u64;
            if !too_long && len > self.max_line_bytes as u64 {
                too_long = true;
                buf.clear();
                buf.shrink_to(READ_BUFFER_BYTES);
            }
            if !too_long {
                reserve_within(buf, take, self.max_line_bytes);
                buf.extend_from_slice(&chunk[..take]);
            }
            self.inner.consume(take + usize::from(found));
            if found {
                // An empty line still counts: `len` is only a "did we read anything" flag.
                len += 1;
                break;
            }
        }
        self.line_number += 1;
        let number = self.line_number;
        if too_long {
            return Ok(Some(Line::TooLong { number, len: len.saturating_sub(1) }));
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        Ok(Some(Line::Text { number }))
    }
}

/// True for a line with nothing but JSON whitespace: such lines are skipped, as JSON
/// Lines readers do, so that a trailing empty line is not an error.
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// Makes room in `buf` for `extra` more bytes; `buf.len() + extra` is within `limit`.
/// Up to the read buffer's size a line grows as `Vec` does. Past it, the room is taken up
/// to the limit in one step: the kernel backs memory only as it is written, so a line
/// then costs its own length (at most the limit) instead of the next power of two, and
/// never an old and a new copy side by side, as growing by doubling does.
fn reserve_within(buf: &mut Vec<u8>, extra: usize, limit: usize) {
    let needed = buf.len() + extra;
    if needed <= buf.capacity() {
        return;
    }
    let target = match needed > READ_BUFFER_BYTES {
        true => limit,
        false => (buf.capacity() * 2).clamp(needed, READ_BUFFER_BYTES.min(limit).max(needed)),
    };
    buf.reserve_exact(target - buf.len());
}

/// Reads into `buf` until it holds at least `min` bytes or the source ends, without
/// waiting for more than that (stdin may be a person typing); returns the bytes read.
fn read_at_least(reader: &mut impl Read, buf: &mut [u8], min: usize) -> io::Result<usize> {
    let mut filled = 0;
    while filled < min {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn reader(bytes: Vec<u8>, max_line_bytes: usize) -> ProblemReader {
        ProblemReader::from_reader(Box::new(Cursor::new(bytes)), None, max_line_bytes).unwrap()
    }

    fn lines(mut reader: ProblemReader) -> Vec<(Line, String)> {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        while let Some(line) = reader.next_line(&mut buf).unwrap() {
            out.push((line, String::from_utf8(buf.clone()).unwrap()));
        }
        out
    }

    #[test]
    fn numbers_lines_and_strips_line_endings() {
        let got = lines(reader(b"a\r\n\nbc\nlast".to_vec(), 100));
        let text = |number, s: &str| (Line::Text { number }, s.to_owned());
        assert_eq!(got, vec![text(1, "a"), text(2, ""), text(3, "bc"), text(4, "last")]);
    }

    #[test]
    fn long_lines_are_skipped_not_buffered() {
        let got = lines(reader(b"ok\n0123456789\nok2\n".to_vec(), 5));
        assert_eq!(got[1], (Line::TooLong { number: 2, len: 10 }, String::new()));
        assert_eq!(got[2], (Line::Text { number: 3 }, "ok2".to_owned()));
    }

    /// Gives at most 100 bytes a read, as a pipe may.
    struct Trickle(Cursor<Vec<u8>>);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(100);
            self.0.read(&mut buf[..n])
        }
    }

    #[test]
    fn a_line_never_takes_more_room_than_the_limit() {
        let limit = 5_000;
        let mut text = vec![b'x'; 4_900];
        text.push(b'\n');
        text.extend(vec![b'y'; 20_000]);
        text.push(b'\n');
        let source = Box::new(Trickle(Cursor::new(text)));
        let mut reader = ProblemReader::from_reader(source, None, limit).unwrap();
        let mut buf = Vec::new();
        assert_eq!(reader.next_line(&mut buf).unwrap(), Some(Line::Text { number: 1 }));
        assert_eq!(buf.len(), 4_900);
        assert!(buf.capacity() <= limit, "{}", buf.capacity());
        assert_eq!(reader.next_line(&mut buf).unwrap(), Some(Line::TooLong { number: 2, len: 20_000 }));
        assert!(buf.capacity() <= limit, "{}", buf.capacity());
    }

    #[test]
    fn binary_data_is_refused_with_where_it_starts() {
        let refused = |bytes: &[u8]| {
            let mut reader = reader(bytes.to_vec(), 100);
            reader.refuse_binary(Path::new("in")).map_err(|err| err.to_string())
        };
        assert_eq!(refused(b"{}\n{}\n"), Ok(()));
        assert_eq!(
            refused(b"\x7fELF\x02\x01\x01\0\0"),
            Err("in: not JSON lines (byte 0x00 at line 1)".into())
        );
        assert_eq!(refused(b"{}\n{}\n\0"), Err("in: not JSON lines (byte 0x00 at line 3)".into()));
        assert_eq!(
            refused(b"\xff\xfe{\0}\0"),
            Err("in: not JSON lines (byte 0x00 at line 1: UTF-16 text; convert it to UTF-8)".into())
        );
    }

    #[test]
    fn gzip_and_zstd_are_read_transparently() {
        let text = b"{\"a\":1}\n{\"b\":2}\n".to_vec();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let zst = zstd::encode_all(Cursor::new(&text), 1).unwrap();
        let plain = lines(reader(text, 100));
        assert_eq!(plain.len(), 2);
        assert_eq!(lines(reader(gz, 100)), plain);
        assert_eq!(lines(reader(zst, 100)), plain);
    }
}

//! Picking up an interrupted run from its partial output.
//!
//! Output is written strictly in input order, so its complete lines answer exactly the
//! same number of leading input lines. A killed run may leave half a line at the end;
//! that half is cut off and its input line solved again.

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::path::Path;

/// Marks an error line as the writer formats it; cannot occur inside a JSON string,
/// where every quote is escaped.
const ERROR_MARK: &[u8] = b",\"error\":{\"code\":";

/// What an existing output already holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumePoint {
    /// Complete lines: the input lines to skip.
    pub lines: u64,
    /// Of which carry an `error`.
    pub errors: u64,
    /// Bytes of a partial last line that were cut off.
    pub truncated: u64,
}

/// Counts the complete lines of the output at `path` and cuts off a partial last line.
/// A missing file is an empty output.
pub fn prepare_output(path: &Path) -> io::Result<ResumePoint> {
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(ResumePoint::default()),
        Err(err) => return Err(err),
    };
    let finder = memchr::memmem::Finder::new(ERROR_MARK);
    let mut point = ResumePoint::default();
    let mut buf = vec![0u8; 1 << 20];
    // `buf[..carried]` is the start of an unfinished line, read earlier; `offset` is the
    // file offset of `buf[0]`.
    let mut carried = 0;
    let mut offset = 0u64;
    let mut complete_end = 0u64;
    let mut line_has_error = false;
    loop {
        let n = match file.read(&mut buf[carried..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        let filled = carried + n;
        let mut line_start = 0;
        for end in memchr::memchr_iter(b'\n', &buf[carried..filled]).map(|i| carried + i) {
            point.lines += 1;
            point.errors += u64::from(line_has_error || finder.find(&buf[line_start..end]).is_some());
            line_has_error = false;
            line_start = end + 1;
        }
        if line_start > 0 {
            complete_end = offset + line_start as u64;
        }
        // An unfinished line longer than half the buffer is scanned now and only the tail
        // that could hold the start of the mark is kept.
        let unfinished = &buf[line_start..filled];
        let mut drop_to = line_start;
        if unfinished.len() > buf.len() / 2 {
            line_has_error |= finder.find(unfinished).is_some();
            drop_to = filled - (ERROR_MARK.len() - 1);
        }
        buf.copy_within(drop_to..filled, 0);
        offset += drop_to as u64;
        carried = filled - drop_to;
    }
    let len = file.metadata()?.len();
    point.truncated = len - complete_end;
    if point.truncated > 0 {
        file.set_len(complete_end)?;
    }
    Ok(point)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared(content: &[u8]) -> (ResumePoint, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, content).unwrap();
        let point = prepare_output(&path).unwrap();
        (point, std::fs::read(&path).unwrap())
    }

    #[test]
    fn a_partial_last_line_is_cut_off() {
        let content = b"{\"id\":\"1\",\"aliceWins\":true,\"winner\":\"ALICE\"}\n\
            {\"id\":\"2\",\"error\":{\"code\":\"INVALID_ARGUMENT\",\"message\":\"x\"}}\n{\"id\":\"3\",\"ali";
        let (point, left) = prepared(content);
        assert_eq!(point, ResumePoint { lines: 2, errors: 1, truncated: 14 });
        assert_eq!(left, content[..content.len() - 14]);
    }

    #[test]
    fn complete_and_missing_outputs() {
        let (point, _) = prepared(b"a\nb\n");
        assert_eq!(point, ResumePoint { lines: 2, errors: 0, truncated: 0 });
        let (point, left) = prepared(b"no newline");
        assert_eq!((point.lines, point.truncated, left.len()), (0, 10, 0));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(prepare_output(&dir.path().join("none")).unwrap(), ResumePoint::default());
    }

    #[test]
    fn lines_longer_than_the_buffer() {
        let mut content = vec![b'x'; 3 << 20];
        content.push(b'\n');
        content.extend_from_slice(ERROR_MARK);
        content.extend_from_slice(&vec![b'y'; 5 << 20]);
        content.push(b'\n');
        content.extend_from_slice(&vec![b'y'; 5 << 20]);
        content.extend_from_slice(ERROR_MARK);
        content.extend_from_slice(b"\nz");
        let (point, left) = prepared(&content);
        assert_eq!(point, ResumePoint { lines: 3, errors: 2, truncated: 1 });
        assert_eq!(left.len(), content.len() - 1);
    }
}

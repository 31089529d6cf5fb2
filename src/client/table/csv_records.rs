//! A CSV file's records bounded in length, as JSON lines are: arrow-csv holds a record
//! whole, and then copies it into its batch, so one 1 GB line made the client 2 GB
//! resident. [`BoundedRecords`] sits between the file's bytes and arrow-csv and holds at
//! most `limit` bytes of a record: a longer one is read past, never held, and reaches
//! arrow-csv as a record of empty cells, its row noted for the row's `LINE_TOO_LONG`
//! error ([`TooLongRows`]); the run goes on. A record ends at a newline outside quotes
//! (RFC 4180's `"` quoting, a `""` inside a quoted cell being two quotes in a row), so a
//! quoted cell's own newlines are part of it, as arrow-csv reads them.

use std::collections::VecDeque;
use std::io::{self, BufRead, Read};
use std::sync::Arc;

use parking_lot::Mutex;

/// A record of a row that was longer than the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLongRow {
    /// The row's index among the data rows, from 0 (the header is not one).
    pub row: u64,
    /// Its length in bytes, without its line ending.
    pub len: u64,
}

/// The rows read past so far, oldest first; shared between the reader and whoever
/// answers the rows.
#[derive(Debug, Clone, Default)]
pub struct TooLongRows(Arc<Mutex<VecDeque<TooLongRow>>>);

impl TooLongRows {
    /// The rows before `end` read past, taken out.
    pub fn take_before(&self, end: u64) -> Vec<TooLongRow> {
        let mut rows = self.0.lock();
        let count = rows.iter().take_while(|row| row.row < end).count();
        rows.drain(..count).collect()
    }
}

/// Bytes handed out at a time, at most, besides one record.
const CHUNK: usize = 64 * 1024;

/// A CSV byte stream whose records are at most `limit` bytes; see the module.
pub struct BoundedRecords<R> {
    inner: R,
    limit: usize,
    /// What stands for a record read past: as many empty cells as the header has.
    placeholder: Vec<u8>,
    /// Whole records ready (`..ready`), then the start of the one being read.
    out: Vec<u8>,
    /// What of `out[..ready]` was handed out.
    at: usize,
    ready: usize,
    in_quotes: bool,
    /// Records ended so far (the header is record 0).
    records: u64,
    /// The length so far of a record being read past.
    skipping: Option<u64>,
    too_long: TooLongRows,
}

impl<R: BufRead> BoundedRecords<R> {
    /// `inner`'s records, each at most `limit` bytes; one read past stands as `fields`
    /// empty cells, and its row goes into `too_long`.
    pub fn new(inner: R, limit: usize, fields: usize, too_long: TooLongRows) -> Self {
        // An empty quoted cell, then the others empty: one record of `fields` cells.
        let mut placeholder = b"\"\"".to_vec();
        placeholder.extend(std::iter::repeat_n(b',', fields.saturating_sub(1)));
        placeholder.push(b'\n');
        BoundedRecords {
            inner,
            limit,
            placeholder,
            out: Vec::new(),
            at: 0,
            ready: 0,
            in_quotes: false,
            records: 0,
            skipping: None,
            too_long,
        }
    }

    /// Ends the record being read: kept whole, or, read past, its placeholder and note.
    fn end_record(&mut self, ended_by_newline: bool) {
        if let Some(len) = self.skipping.take() {
            let len = len - u64::from(ended_by_newline);
            self.out.extend_from_slice(&self.placeholder);
            // The header is never read past (`fill`).
            self.too_long.0.lock().push_back(TooLongRow { row: self.records - 1, len });
        }
        self.ready = self.out.len();
        self.records += 1;
    }

    /// Reads records until [`CHUNK`] bytes of them are ready or the input ends.
    fn fill(&mut self) -> io::Result<()> {
        self.out.drain(..self.ready);
        (self.at, self.ready) = (0, 0);
        while self.ready < CHUNK {
            let bytes = self.inner.fill_buf()?;
            if bytes.is_empty() {
                // A last record without a newline.
                if self.skipping.is_some() || self.out.len() > self.ready {
                    self.end_record(false);
                }
                return Ok(());
            }
            let end = record_end(bytes, &mut self.in_quotes);
            let piece = &bytes[..end.unwrap_or(bytes.len())];
            let held = self.out.len() - self.ready;
            match &mut self.skipping {
                Some(len) => *len += piece.len() as u64,
                None if held + piece.len() > self.limit => {
                    if self.records == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("the CSV header is longer than the limit of {} bytes", self.limit),
                        ));
                    }
                    self.skipping = Some((held + piece.len()) as u64);
                    self.out.truncate(self.ready);
                }
                None => self.out.extend_from_slice(piece),
            }
            let consumed = piece.len();
            self.inner.consume(consumed);
            if end.is_some() {
                self.end_record(true);
            }
        }
        Ok(())
    }
}

/// Where the record that `bytes` continue ends (the index after its newline), or `None`
/// when it goes on past them; `in_quotes` says whether a quoted cell is open, before and
/// after.
fn record_end(bytes: &[u8], in_quotes: &mut bool) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = memchr::memchr2(b'"', b'\n', &bytes[from..]) {
        let at = from + found;
        match bytes[at] {
            b'"' => *in_quotes = !*in_quotes,
            _ if !*in_quotes => return Some(at + 1),
            _ => {}
        }
        from = at + 1;
    }
    None
}

impl<R: BufRead> Read for BoundedRecords<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for BoundedRecords<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at == self.ready {
            self.fill()?;
        }
        Ok(&self.out[self.at..self.ready])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.ready);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `csv` through a reader of records at most `limit` bytes, read in reads of at most
    /// `step` bytes from below; what comes out, and the rows read past.
    fn bounded(csv: &[u8], limit: usize, step: usize) -> (String, Vec<TooLongRow>) {
        let too_long = TooLongRows::default();
        let inner = io::BufReader::with_capacity(step, csv);
        let mut records = BoundedRecords::new(inner, limit, 3, too_long.clone());
        let mut out = String::new();
        records.read_to_string(&mut out).unwrap();
        (out, too_long.take_before(u64::MAX))
    }

    #[test]
    fn a_record_past_the_limit_is_read_past_and_noted_and_the_others_pass() {
        let long = "x".repeat(100);
        let csv = format!("id,n,num\na,1,\n{long},2,\nc,3,\n\"q\nuo\"\"ted\",4,\nd,{long}");
        for step in [1, 7, 4096] {
            let (out, rows) = bounded(csv.as_bytes(), 20, step);
            assert_eq!(out, "id,n,num\na,1,\n\"\",,\nc,3,\n\"q\nuo\"\"ted\",4,\n\"\",,\n", "{step}");
            assert_eq!(rows, [TooLongRow { row: 1, len: 103 }, TooLongRow { row: 4, len: 102 }], "{step}");
        }
        // A quoted newline is inside its record: the record is one, and too long.
        let (out, rows) = bounded(format!("id,n,num\n\"{long}\n{long}\",1,\n").as_bytes(), 50, 16);
        assert_eq!(out, "id,n,num\n\"\",,\n");
        assert_eq!(rows, [TooLongRow { row: 0, len: 206 }]);
    }

    #[test]
    fn a_record_never_holds_more_than_the_limit() {
        let too_long = TooLongRows::default();
        let line = vec![b'7'; 10 << 20];
        let csv = [b"n\n".as_slice(), &line, b"\n8\n"].concat();
        let mut records = BoundedRecords::new(io::BufReader::new(&csv[..]), 4096, 1, too_long.clone());
        let mut out = Vec::new();
        loop {
            let available = records.fill_buf().unwrap().len();
            if available == 0 {
                break;
            }
            assert!(records.out.capacity() <= 2 * CHUNK + 2 * 4096, "{}", records.out.capacity());
            out.extend_from_slice(&records.out[records.at..records.ready]);
            records.consume(available);
        }
        assert_eq!(out, b"n\n\"\"\n8\n");
        assert_eq!(too_long.take_before(1), [TooLongRow { row: 0, len: 10 << 20 }]);
        assert_eq!(too_long.take_before(u64::MAX), []);
    }

    #[test]
    fn a_header_past_the_limit_is_an_error() {
        let inner = io::BufReader::new(&b"aaaaaaaaaaaa,b\n1,2\n"[..]);
        let mut records = BoundedRecords::new(inner, 8, 2, TooLongRows::default());
        let err = records.fill_buf().unwrap_err();
        assert_eq!(err.to_string(), "the CSV header is longer than the limit of 8 bytes");
    }
}

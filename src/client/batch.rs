//! Turning input lines into batches ready for the wire.
//!
//! A batch is encoded to protobuf once, on the reading thread, and kept as bytes until
//! its answer has been written: resending after a server failure then costs no work, and
//! the memory a batch holds is known exactly. Lines that are not problems never reach the
//! server; their error solutions wait in the batch at their place.

use arrow_array::ArrayRef;
use prost::bytes::{Bytes, BytesMut};
use prost::Message;

use std::num::NonZeroUsize;

use crate::client::fingerprint::Checkpoint;
use crate::client::problem_json::{line_error_solution, parse_problem, LineError};
use crate::codec;
use crate::pb;

/// A batch on its way: what goes on the wire (`P`: an encoded `SolveBatchStreamRequest`, or
/// a table's record batch) and what is needed to put its answers back in place.
#[derive(Debug, Clone)]
pub struct Batch<P = Bytes> {
    /// Position in the run, from 0; output is written in this order.
    pub seq: u64,
    /// Encoded `SolveBatchStreamRequest` of the lines that are problems (empty when none are),
    /// or the rows of a table.
    pub payload: P,
    /// How many problems `payload` holds.
    pub problems: usize,
    /// Input lines (or table rows) covered by this batch.
    pub lines: usize,
    /// Solutions the client made itself, with their index among `lines`, ascending: of
    /// lines that are not problems (not in `payload`), or of table rows whose cells did
    /// not parse (in `payload`, their answers then ignored).
    pub rejected: Vec<(usize, pb::Solution)>,
    /// Where the input stood after the batch's last line: the progress bar's position and
    /// the resume checkpoint once the batch is written.
    pub end: InputMark,
    /// Budget bytes this batch holds until it is written.
    pub cost: usize,
    /// The input columns written beside a table's answers (`--keep`), as read: not sent.
    pub kept: Vec<ArrayRef>,
}

/// A point in the input, taken when a batch closes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputMark {
    /// Raw (possibly compressed) input bytes read.
    pub raw_offset: u64,
    /// The fingerprint of every line answered up to here.
    pub checkpoint: Checkpoint,
}

/// Collects lines until a batch is full by count or by size.
#[derive(Debug)]
pub struct BatchBuilder {
    max_problems: usize,
    max_bytes: usize,
    winner_only: bool,
    payload: BytesMut,
    problems: usize,
    lines: usize,
    rejected: Vec<(usize, pb::Solution)>,
    next_seq: u64,
}

impl BatchBuilder {
    /// A builder closing batches at `max_problems` lines or `max_bytes` of payload; with
    /// `winner_only`, every batch asks for the winner only.
    pub fn new(max_problems: NonZeroUsize, max_bytes: NonZeroUsize, winner_only: bool) -> Self {
        BatchBuilder {
            max_problems: max_problems.get(),
            max_bytes: max_bytes.get(),
            winner_only,
            payload: BytesMut::new(),
            problems: 0,
            lines: 0,
            rejected: Vec::new(),
            next_seq: 0,
        }
    }

    /// Adds the next input line, 1-based line `number`; true when the batch is now full.
    pub fn push_line(&mut self, line: &[u8], number: u64) -> bool {
        match parse_problem(line, number) {
            Ok(problem) => self.add_problem(&problem),
            Err((id, err)) => self.rejected.push((self.lines, line_error_solution(id, err))),
        }
        self.next_line()
    }

    /// Adds a line that is not a problem, as its error solution; true when the batch is full.
    pub fn push_rejected(&mut self, id: String, err: LineError) -> bool {
        self.rejected.push((self.lines, line_error_solution(id, err)));
        self.next_line()
    }

    fn add_problem(&mut self, problem: &pb::Problem) {
        // The same bytes prost writes for `SolveBatchStreamRequest { problems, .. }`,
        // without collecting the problems first.
        if self.payload.capacity() - self.payload.len() < 4096 {
            self.payload.reserve(self.max_bytes.clamp(4096, 1 << 20));
        }
        codec::encode_problem_element(problem, &mut self.payload);
        self.problems += 1;
    }

    fn next_line(&mut self) -> bool {
        self.lines += 1;
        self.lines >= self.max_problems || self.payload.len() >= self.max_bytes
    }

    /// Closes the current batch, if it holds any line; `end` is where the input stands.
    pub fn close(&mut self, end: InputMark) -> Option<Batch> {
        if self.lines == 0 {
            return None;
        }
        if self.winner_only && self.problems > 0 {
            // Field 2 (`winner_only = true`): protobuf fields may come in any order, and
            // appending keeps the problems written straight into the payload.
            prost::encoding::encode_key(2, prost::encoding::WireType::Varint, &mut self.payload);
            prost::encoding::encode_varint(1, &mut self.payload);
        }
        let payload = self.payload.split().freeze();
        let rejected = std::mem::take(&mut self.rejected);
        let rejected_bytes: usize = rejected.iter().map(|(_, s)| s.encoded_len() + 32).sum();
        let batch = Batch {
            seq: self.next_seq,
            cost: payload.len() + rejected_bytes + 64,
            payload,
            problems: self.problems,
            lines: self.lines,
            rejected,
            end,
            kept: Vec::new(),
        };
        self.next_seq += 1;
        self.problems = 0;
        self.lines = 0;
        Some(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder(max_problems: usize, winner_only: bool) -> BatchBuilder {
        BatchBuilder::new(NonZeroUsize::new(max_problems).unwrap(), NonZeroUsize::MAX, winner_only)
    }

    fn at(raw_offset: u64) -> InputMark {
        InputMark { raw_offset, ..InputMark::default() }
    }

    #[test]
    fn payload_decodes_as_a_problem_batch() {
        let mut builder = builder(3, false);
        let p = |n: u64| format!(r#"{{"stoneGameIv":{{"n":{n}}}}}"#);
        assert!(!builder.push_line(p(1).as_bytes(), 1));
        assert!(!builder.push_line(b"{", 2));
        assert!(builder.push_line(p(3).as_bytes(), 3));
        let batch = builder.close(at(42)).unwrap();
        assert_eq!((batch.seq, batch.lines, batch.problems, batch.end.raw_offset), (0, 3, 2, 42));
        assert_eq!(batch.rejected.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [1]);
        let decoded = pb::SolveBatchStreamRequest::decode(batch.payload).unwrap();
        assert_eq!(decoded.problems.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(), ["1", "3"]);
        assert!(!decoded.winner_only);
        assert!(builder.close(at(0)).is_none());
        assert!(!builder.push_line(p(4).as_bytes(), 4));
        assert_eq!(builder.close(at(0)).map(|b| b.seq), Some(1));
    }

    #[test]
    fn winner_only_is_set_on_every_batch_with_problems() {
        let mut builder = builder(1, true);
        for n in 1..=2 {
            assert!(builder.push_line(format!(r#"{{"stoneGameIv":{{"n":{n}}}}}"#).as_bytes(), n));
            let decoded = pb::SolveBatchStreamRequest::decode(builder.close(at(0)).unwrap().payload).unwrap();
            assert!(decoded.winner_only);
            assert_eq!(decoded.problems.len(), 1);
        }
        builder.push_line(b"{", 3);
        assert!(builder.close(at(0)).unwrap().payload.is_empty(), "no problems, nothing to send");
    }
}

//! Writing solutions as JSON lines, in input order.
//!
//! Answers come back from several servers and retries in any order; [`SolutionWriter`]
//! holds the early ones until the batches before them are written. It never holds more
//! than the in-flight budget allows, because the budget is only returned once a batch is
//! written.
//!
//! Lines are the protobuf JSON mapping as pbjson writes it from the schema; default fields
//! are emitted too, so every line says `aliceWins` and `winner`.

use std::collections::BTreeMap;
use std::io::{self, Write};

use prost::bytes::Bytes;
use prost::Message;

use tonic::Code;

use crate::client::batch::{Batch, InputMark};
use crate::client::input::InputError;
use crate::codec::FastDecode;
use crate::convert;
use crate::pb;

/// Why the output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Writing failed (disk full, closed pipe, ...).
    #[error("cannot write output")]
    Io(#[from] io::Error),
    /// A server answered with something that is not the batch that was sent.
    #[error("server answered batch {seq} with {got} solutions for {expected} problems")]
    Mismatch {
        /// The batch's position.
        seq: u64,
        /// Problems sent.
        expected: usize,
        /// Solutions received.
        got: usize,
    },
    /// A table could not be written (or a closed pipe, deep inside).
    #[error("cannot write output")]
    Table(#[source] arrow_schema::ArrowError),
    /// A server answer is not a valid `SolveBatchStreamResponse`.
    #[error("server answer to batch {seq} does not decode: {source}")]
    Decode {
        /// The batch's position.
        seq: u64,
        /// The decoder's complaint.
        source: prost::DecodeError,
    },
}

/// A batch with its answer: an encoded `SolveBatchStreamResponse` (empty when no line of
/// it was a problem), or a table of solutions.
#[derive(Debug)]
pub struct Answered<P = Bytes> {
    /// The batch that was sent.
    pub batch: Batch<P>,
    /// The server's answer.
    pub solutions: P,
}

/// What the writing thread receives.
#[derive(Debug)]
pub enum ToWriter<P = Bytes> {
    /// A batch and its answer (empty for a batch of rejected lines only).
    Answered(Answered<P>),
    /// The input ended after this many batches; if reading failed, the run fails once
    /// they are written.
    InputEnd {
        /// Batches read in all.
        batches: u64,
        /// Why reading stopped before the end of the input.
        failed: Option<InputError>,
    },
    /// The run is abandoned: write what came before, flush, stop.
    Stop,
}

/// What one written batch contributed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Lines written.
    pub lines: u64,
    /// Of which carry an `error`.
    pub errors: u64,
    /// Where the input stood after the batch.
    pub end: InputMark,
    /// Budget the batch held.
    pub cost: usize,
}

/// Puts answered batches back in `seq` order, holding back those that arrive early.
#[derive(Debug)]
pub struct InOrder<P = Bytes> {
    next_seq: u64,
    early: BTreeMap<u64, Answered<P>>,
}

impl<P> Default for InOrder<P> {
    fn default() -> Self {
        InOrder { next_seq: 0, early: BTreeMap::new() }
    }
}

impl<P> InOrder<P> {
    /// Batches handed on so far.
    pub fn batches_written(&self) -> u64 {
        self.next_seq
    }

    /// Takes an answered batch and hands every batch that is now next in line to `write`.
    /// A batch that was already handed on (a duplicate answer) is ignored.
    pub fn accept<E>(
        &mut self,
        answered: Answered<P>,
        mut write: impl FnMut(Answered<P>) -> Result<(), E>,
    ) -> Result<(), E> {
        let seq = answered.batch.seq;
        if seq < self.next_seq {
            return Ok(());
        }
        self.early.entry(seq).or_insert(answered);
        while let Some(next) = self.early.remove(&self.next_seq) {
            self.next_seq += 1;
            write(next)?;
        }
        Ok(())
    }
}

/// Writes answered batches as JSON lines.
#[derive(Debug)]
pub struct SolutionWriter<W: Write> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write> SolutionWriter<W> {
    /// A writer to `out`.
    pub fn new(out: W) -> Self {
        SolutionWriter { out, line: Vec::with_capacity(1 << 16) }
    }

    /// Writes one batch's lines, in order.
    pub fn write_batch(&mut self, answered: Answered) -> Result<Written, OutputError> {
        let (batch, solutions) = decode_answer(answered)?;
        let mut errors = 0;
        self.line.clear();
        let mut written = Ok(());
        each_solution(&batch, &solutions, |solution| {
            errors += u64::from(solution.error.is_some());
            write_solution_json(&mut self.line, solution);
            if self.line.len() >= 1 << 16 && written.is_ok() {
                written = self.out.write_all(&self.line);
                self.line.clear();
            }
        });
        written?;
        self.out.write_all(&self.line)?;
        Ok(Written { lines: batch.lines as u64, errors, end: batch.end, cost: batch.cost })
    }

    /// Flushes what was written to the output.
    pub fn flush(&mut self) -> Result<(), OutputError> {
        Ok(self.out.flush()?)
    }

    #[cfg(test)]
    fn into_inner(self) -> W {
        self.out
    }
}

/// Decodes a batch's encoded `SolveBatchStreamResponse`, checking that it answers every
/// problem of the batch.
pub fn decode_answer(answered: Answered) -> Result<(Batch, Vec<pb::Solution>), OutputError> {
    let Answered { batch, solutions } = answered;
    let seq = batch.seq;
    // The codec's decoder, which sizes the vector exactly; prost for what it leaves.
    let decoded = match pb::SolveBatchStreamResponse::decode_fast(&solutions) {
        Some(decoded) => decoded,
        None => pb::SolveBatchStreamResponse::decode(solutions)
            .map_err(|source| OutputError::Decode { seq, source })?,
    };
    if decoded.solutions.len() != batch.problems {
        return Err(OutputError::Mismatch { seq, expected: batch.problems, got: decoded.solutions.len() });
    }
    Ok((batch, decoded.solutions))
}

/// Hands `f` every line's solution of `batch` in order: the server's `solved`, with the
/// client's own for the lines that were not problems in their places.
pub fn each_solution(batch: &Batch, solved: &[pb::Solution], mut f: impl FnMut(&pb::Solution)) {
    let mut solved = solved.iter();
    let mut rejected = batch.rejected.iter().peekable();
    for index in 0..batch.lines {
        let solution = match rejected.next_if(|(at, _)| *at == index) {
            Some((_, solution)) => solution,
            None => solved.next().expect("lines = problems + rejected"),
        };
        f(solution);
    }
}

/// Appends `solution` as one line of protobuf JSON, newline included.
///
/// A solution that cannot be written (an enum value from a newer server that this client
/// has no name for) becomes an error line for that problem, so the output keeps its place.
pub fn write_solution_json(out: &mut Vec<u8>, solution: &pb::Solution) {
    let start = out.len();
    if let Err(err) = serde_json::to_writer(&mut *out, solution) {
        out.truncate(start);
        let unwritable = pb::Solution {
            id: solution.id.clone(),
            error: Some(Box::new(convert::wire_error(
                Code::Unknown,
                "UNWRITABLE_ANSWER",
                None,
                Default::default(),
                format!("cannot write the server's answer as JSON: {err}"),
            ))),
            ..Default::default()
        };
        // Every field of this one has a name: it cannot fail.
        let _ = serde_json::to_writer(&mut *out, &unwritable);
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(solution: &pb::Solution) -> String {
        let mut out = Vec::new();
        write_solution_json(&mut out, solution);
        String::from_utf8(out).unwrap()
    }

    fn samples() -> Vec<pb::Solution> {
        use pb::r#move::Game as G;
        let won = |game| pb::Solution {
            id: "a\"\\\n\u{1}é".into(),
            alice_wins: true,
            winner: pb::Winner::Alice.into(),
            winning_move: Some(pb::Move { game: Some(game) }),
            error: None,
            nim_value: None,
        };
        vec![
            pb::Solution { id: "b".into(), winner: pb::Winner::Bob.into(), ..Default::default() },
            pb::Solution {
                id: "c".into(),
                alice_wins: true,
                winner: pb::Winner::Alice.into(),
                ..Default::default()
            },
            won(G::SumGame(pb::SumGameMove { index: u64::MAX, digit: 0 })),
            won(G::StoneGameIx(pb::StoneGameIxMove { index: 7 })),
            won(G::StoneGameIv(pb::StoneGameIvMove { take: 4 })),
            pb::Solution {
                id: "e".into(),
                error: Some(Box::new(pb::SolutionError {
                    code: pb::solution_error::Code::OutOfRange.into(),
                    message: "n \"big\"".into(),
                    reason: "PILE_ABOVE_LIMIT".into(),
                    field: "problem.stone_game_iv.n".into(),
                    metadata: [("limit".to_owned(), "9".to_owned())].into(),
                })),
                ..Default::default()
            },
        ]
    }

    #[test]
    fn json_is_the_protobuf_mapping() {
        for solution in samples() {
            let line = json(&solution);
            assert!(line.ends_with('\n') && !line[..line.len() - 1].contains('\n'), "{line}");
            let parsed: pb::Solution = serde_json::from_str(&line).unwrap();
            assert_eq!(parsed, solution, "{line}");
        }
    }

    #[test]
    fn answered_lines_always_say_who_wins() {
        assert_eq!(json(&samples()[0]), "{\"id\":\"b\",\"aliceWins\":false,\"winner\":\"WINNER_BOB\"}\n");
        assert_eq!(
            json(&samples()[5]),
            "{\"id\":\"e\",\"aliceWins\":false,\"winner\":\"WINNER_UNSPECIFIED\",\
             \"error\":{\"code\":\"CODE_OUT_OF_RANGE\",\"message\":\"n \\\"big\\\"\",\
             \"reason\":\"PILE_ABOVE_LIMIT\",\"field\":\"problem.stone_game_iv.n\",\"metadata\":{\"limit\":\"9\"}}}\n"
        );
    }

    #[test]
    fn an_answer_this_client_cannot_name_keeps_its_place_as_an_error() {
        let newer = pb::Solution { id: "f".into(), winner: 9, ..Default::default() };
        let parsed: pb::Solution = serde_json::from_str(&json(&newer)).unwrap();
        assert_eq!(parsed.id, "f");
        assert_eq!(parsed.error.map(|e| e.code), Some(pb::solution_error::Code::Unknown as i32));
    }

    fn batch(seq: u64, problems: usize, rejected: Vec<(usize, pb::Solution)>) -> Batch {
        Batch {
            seq,
            payload: Bytes::new(),
            problems,
            lines: problems + rejected.len(),
            rejected,
            end: InputMark { raw_offset: seq * 10, ..InputMark::default() },
            cost: 1,
            kept: Vec::new(),
        }
    }

    fn answer(ids: &[&str]) -> Bytes {
        let solutions =
            ids.iter().map(|id| pb::Solution { id: (*id).into(), ..Default::default() }).collect();
        pb::SolveBatchStreamResponse { solutions }.encode_to_vec().into()
    }

    #[test]
    fn batches_are_written_in_order_with_rejected_lines_in_place() {
        let mut writer = SolutionWriter::new(Vec::new());
        let mut order = InOrder::default();
        let bad = pb::Solution { id: "bad".into(), error: Some(Box::default()), ..Default::default() };
        let mut written = Vec::new();
        let first = Answered { batch: batch(0, 2, vec![(1, bad)]), solutions: answer(&["1", "3"]) };
        let second = Answered { batch: batch(1, 1, vec![]), solutions: answer(&["4"]) };
        let mut write = |answered| writer.write_batch(answered).map(|w| written.push(w));
        order.accept(second, &mut write).unwrap();
        order.accept(first, &mut write).unwrap();
        let dup = Answered { batch: batch(1, 1, vec![]), solutions: answer(&["4"]) };
        order.accept(dup, &mut write).unwrap();
        assert_eq!(order.batches_written(), 2);
        assert_eq!(written.iter().map(|w| (w.lines, w.errors)).collect::<Vec<_>>(), [(3, 1), (1, 0)]);
        let out = String::from_utf8(writer.into_inner()).unwrap();
        let ids: Vec<String> =
            out.lines().map(|l| serde_json::from_str::<pb::Solution>(l).unwrap().id).collect();
        assert_eq!(ids, ["1", "bad", "3", "4"]);
    }

    #[test]
    fn a_short_answer_is_an_error() {
        let mut writer = SolutionWriter::new(Vec::new());
        let answered = Answered { batch: batch(0, 2, vec![]), solutions: answer(&["1"]) };
        let err = writer.write_batch(answered).unwrap_err();
        assert!(matches!(err, OutputError::Mismatch { seq: 0, expected: 2, got: 1 }));
    }
}

//! An answer is checked against its batch before any of it is handed on: one solution a
//! problem, in order, each with its problem's id (both may be empty). A server that fails
//! this (a bug, a duplicated or swapped response, a proxy that mixes up streams) has
//! answered something other than what was asked, and is not asked again.
//!
//! The check runs on the connection's task, where a wrong answer can still go back to
//! the queue for another server, and before the writing thread decodes it. It walks only
//! keys and lengths, comparing each solution's id bytes with its problem's in the batch's
//! own encoded request, so it allocates nothing; an encoding the walk leaves aside
//! (groups) is decoded by prost instead, whose reading is the one the writer will use.
//! The walk is the codec's ([`crate::codec`]).

use prost::Message;

use crate::client::batch::Batch;
use crate::codec::{WireError, WireField, WireFields, WireValue};
use crate::pb;

/// How an answer fails its batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WrongAnswer {
    /// Not one solution a problem.
    #[error("{got} solutions for the {expected} problems of batch {seq}")]
    Count {
        /// The batch's position in the run.
        seq: u64,
        /// Problems sent.
        expected: usize,
        /// Solutions received.
        got: usize,
    },
    /// A solution whose id is not its problem's.
    #[error("solution {index} of batch {seq} has id {got:?}; its problem's is {expected:?}")]
    Id {
        /// The batch's position in the run.
        seq: u64,
        /// The solution's position in the batch, from 0.
        index: usize,
        /// The problem's id.
        expected: String,
        /// The solution's id.
        got: String,
    },
    /// Bytes that are not a `SolveBatchStreamResponse`.
    #[error("the answer to batch {seq} does not decode: {reason}")]
    Malformed {
        /// The batch's position in the run.
        seq: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// An answer arrived with no batch waiting for one.
    #[error("an answer with no batch waiting for one")]
    Unrequested,
    /// A table of solutions that is not its batch's (other rows, ids or columns), or not
    /// a table at all.
    #[error("the answer to batch {seq}: {reason}")]
    Table {
        /// The batch's position in the run.
        seq: u64,
        /// What is wrong with it.
        reason: String,
    },
}

/// Checks `answer`, an encoded `SolveBatchStreamResponse`, against `batch`.
pub(crate) fn check(batch: &Batch, answer: &[u8]) -> Result<(), WrongAnswer> {
    let (mut expected, mut got) = (Ids(&batch.payload), Ids(answer));
    let mut index = 0;
    loop {
        match (expected.next(), got.next()) {
            (None, None) => return Ok(()),
            (Some(Ok(problem)), Some(Ok(solution))) if problem == solution => index += 1,
            (Some(Ok(_)), Some(Ok(_))) | (None, Some(Ok(_))) | (Some(Ok(_)), None) => {
                return mismatch(batch, answer, index);
            }
            (_, Some(Err(WireError::Malformed(reason)))) => {
                return Err(WrongAnswer::Malformed { seq: batch.seq, reason: reason.into() });
            }
            // Left to prost (the request is this client's own, and never needs it).
            (Some(Err(_)), _) | (_, Some(Err(WireError::Group))) => return check_decoded(batch, answer),
        }
    }
}

/// The error for an answer whose `index`-th id (or count) differs: the counts when they
/// differ (a missing or extra solution), else that id.
fn mismatch(batch: &Batch, answer: &[u8], index: usize) -> Result<(), WrongAnswer> {
    let seq = batch.seq;
    let Ok(got) = Ids(answer).try_fold(0, |count, id| id.map(|_| count + 1)) else {
        return check_decoded(batch, answer);
    };
    if got != batch.problems {
        return Err(WrongAnswer::Count { seq, expected: batch.problems, got });
    }
    let id = |bytes: &[u8]| {
        Ids(bytes).nth(index).and_then(Result::ok).map(|id| String::from_utf8_lossy(id).into_owned())
    };
    let (expected, got) = (id(&batch.payload).unwrap_or_default(), id(answer).unwrap_or_default());
    Err(WrongAnswer::Id { seq, index, expected, got })
}

/// [`check`] by prost's decoding, for what the walk leaves aside.
fn check_decoded(batch: &Batch, answer: &[u8]) -> Result<(), WrongAnswer> {
    let seq = batch.seq;
    let malformed = |err: prost::DecodeError| WrongAnswer::Malformed { seq, reason: err.to_string() };
    let solutions = pb::SolveBatchStreamResponse::decode(answer).map_err(malformed)?.solutions;
    let problems = pb::SolveBatchStreamRequest::decode(batch.payload.clone())
        .map(|request| request.problems)
        .unwrap_or_default();
    if solutions.len() != problems.len() {
        return Err(WrongAnswer::Count { seq, expected: problems.len(), got: solutions.len() });
    }
    match problems.iter().zip(&solutions).position(|(problem, solution)| problem.id != solution.id) {
        None => Ok(()),
        Some(index) => Err(WrongAnswer::Id {
            seq,
            index,
            expected: problems[index].id.clone(),
            got: solutions[index].id.clone(),
        }),
    }
}

/// The ids of the messages in field 1 of a batch message (problems or solutions), as
/// prost reads them: each message's last field 1, or empty.
struct Ids<'a>(&'a [u8]);

impl<'a> Iterator for Ids<'a> {
    type Item = Result<&'a [u8], WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut fields = WireFields(self.0);
        let found = loop {
            match fields.next() {
                Ok(None) => break None,
                Ok(Some(WireField { number: 1, value: WireValue::Len(message), .. })) => {
                    break Some(id(message))
                }
                Ok(Some(WireField { number: 1, .. })) => {
                    break Some(Err(WireError::Malformed("field 1 is not a message")))
                }
                Ok(Some(_)) => {}
                Err(err) => break Some(Err(err)),
            }
        };
        // After an error the walk ends: nothing further can be read in place.
        self.0 = match found {
            Some(Ok(_)) => fields.0,
            _ => &[],
        };
        found
    }
}

/// The id of one problem or solution: its last length-delimited field 1.
fn id(message: &[u8]) -> Result<&[u8], WireError> {
    let mut fields = WireFields(message);
    let mut id: &[u8] = &[];
    while let Some(field) = fields.next()? {
        match field {
            WireField { number: 1, value: WireValue::Len(value), .. } => id = value,
            WireField { number: 1, .. } => return Err(WireError::Malformed("an id that is not a string")),
            _ => {}
        }
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroUsize;

    use prost::bytes::Bytes;

    use super::*;
    use crate::client::batch::{BatchBuilder, InputMark};

    /// A batch of `ids` (the empty one as a line without an id, which gets its number).
    fn batch(ids: &[&str]) -> Batch {
        let mut builder = BatchBuilder::new(NonZeroUsize::new(1000).unwrap(), NonZeroUsize::MAX, false);
        for (number, id) in ids.iter().enumerate() {
            builder.push_line(
                format!(r#"{{"id":"{id}","stoneGameIv":{{"n":3}}}}"#).as_bytes(),
                number as u64 + 1,
            );
        }
        builder.close(InputMark::default()).unwrap()
    }

    fn answer(ids: &[&str]) -> Bytes {
        let solutions = ids
            .iter()
            .map(|id| pb::Solution {
                id: (*id).into(),
                alice_wins: true,
                winner: pb::Winner::Alice.into(),
                winning_move: Some(pb::Move {
                    game: Some(pb::r#move::Game::StoneGameIv(pb::StoneGameIvMove { take: 1 })),
                }),
                ..Default::default()
            })
            .collect();
        pb::SolveBatchStreamResponse { solutions }.encode_to_vec().into()
    }

    #[test]
    fn the_right_ids_in_order_pass() {
        assert_eq!(check(&batch(&["a", "b", "c"]), &answer(&["a", "b", "c"])), Ok(()));
        // A line without an id is sent with its number, and must come back with it.
        assert_eq!(check(&batch(&["a", ""]), &answer(&["a", "2"])), Ok(()));
        assert!(check(&batch(&["a", ""]), &answer(&["a", ""])).is_err());
    }

    #[test]
    fn wrong_swapped_missing_and_extra_solutions_fail() {
        let batch = batch(&["a", "b", "c"]);
        let id = |index, expected: &str, got: &str| WrongAnswer::Id {
            seq: 0,
            index,
            expected: expected.into(),
            got: got.into(),
        };
        assert_eq!(check(&batch, &answer(&["a", "x", "c"])), Err(id(1, "b", "x")));
        assert_eq!(check(&batch, &answer(&["b", "a", "c"])), Err(id(0, "a", "b")));
        let count = |got| WrongAnswer::Count { seq: 0, expected: 3, got };
        assert_eq!(check(&batch, &answer(&["a", "c"])), Err(count(2)));
        assert_eq!(check(&batch, &answer(&["a", "b"])), Err(count(2)));
        assert_eq!(check(&batch, &answer(&["a", "b", "c", "d"])), Err(count(4)));
        assert_eq!(check(&batch, &answer(&[])), Err(count(0)));
        assert_eq!(
            check(&batch, &answer(&["a", "b", "c"])[..10]),
            Err(WrongAnswer::Malformed { seq: 0, reason: "a field runs past the end".into() })
        );
        assert_eq!(
            WrongAnswer::Id { seq: 4, index: 0, expected: "401".into(), got: "301".into() }.to_string(),
            r#"solution 0 of batch 4 has id "301"; its problem's is "401""#
        );
    }

    #[test]
    fn ids_are_read_as_prost_reads_them() {
        let batch = batch(&["a", "b"]);
        // Unknown fields anywhere, an id given twice (the last counts), the id last.
        let mut bytes = Vec::new();
        let solution = |fields: &[u8]| {
            let mut field = vec![0x0a, fields.len() as u8];
            field.extend_from_slice(fields);
            field
        };
        bytes.extend([0x78, 0x05]); // field 15, a varint
        bytes.extend(solution(&[0x0a, 1, b'z', 0x10, 1, 0x0a, 1, b'a']));
        bytes.extend([0x7d, 0, 0, 0, 0]); // field 15, fixed32
        bytes.extend(solution(&[0x18, 1, 0x0a, 1, b'b']));
        assert_eq!(pb::SolveBatchStreamResponse::decode(&bytes[..]).unwrap().solutions.len(), 2);
        assert_eq!(check(&batch, &bytes), Ok(()));
        // A group, which the walk leaves to prost: still checked.
        let mut grouped = bytes.clone();
        grouped.extend([0x7b, 0x7c]); // field 15, start and end group
        assert_eq!(check(&batch, &grouped), Ok(()));
        let mut wrong = answer(&["a", "c"]).to_vec();
        wrong.extend([0x7b, 0x7c]);
        assert!(matches!(check(&batch, &wrong), Err(WrongAnswer::Id { index: 1, .. })));
        // An id that is a varint: prost refuses the message.
        assert!(matches!(check(&batch, &solution(&[0x08, 1])), Err(WrongAnswer::Malformed { .. })));
    }
}

//! The buffers a kernel writes a run of answers into: `alice_wins` and its validity as
//! bits, each answer column's values beside its validity, and the few errors by position.
//! Each is written once, in row order, and handed to Arrow as it is (`Buffer::from_vec`);
//! a row a kernel leaves to the row path is a placeholder, set in place afterwards.

use std::sync::Arc;

use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::{new_null_array, ArrayRef, ArrowPrimitiveType, BooleanArray, PrimitiveArray};
use arrow_buffer::{BooleanBuffer, Buffer, ScalarBuffer};
use arrow_schema::DataType;

use super::super::output::{nulls, ErrorColumns};
use super::super::{AnswerColumn, Games};
use crate::games::{GameKind, Outcome, Player};
use crate::problem::ProblemError;

/// Bits written in order, 64 rows a word, and set in place later.
#[derive(Debug, Default)]
pub(super) struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    fn with_capacity(rows: usize) -> Self {
        Bits { words: Vec::with_capacity(rows.div_ceil(64)), len: 0 }
    }

    /// Appends one bit.
    #[inline]
    fn push(&mut self, bit: bool) {
        let at = self.len % 64;
        if at == 0 {
            self.words.push(0);
        }
        if let Some(word) = self.words.last_mut() {
            *word |= u64::from(bit) << at;
        }
        self.len += 1;
    }

    /// Appends `rows` ≤ 64 bits, bit `i` of `word` the `i`-th; the bits so far are a
    /// multiple of 64 (a kernel writes whole words until its last).
    #[inline]
    fn push_word(&mut self, word: u64, rows: usize) {
        debug_assert!(rows <= 64 && self.len.is_multiple_of(64));
        self.words.push(word);
        self.len += rows;
    }

    fn set(&mut self, at: usize, bit: bool) {
        let (word, shift) = (at / 64, at % 64);
        self.words[word] = self.words[word] & !(1 << shift) | u64::from(bit) << shift;
    }

    fn finish(self) -> BooleanBuffer {
        BooleanBuffer::new(Buffer::from_vec(self.words), 0, self.len)
    }
}

/// A nullable answer column's values (0 under a null, as the row path writes them) and
/// validity.
#[derive(Debug)]
pub(super) struct Column<T> {
    pub(super) values: Vec<T>,
    pub(super) valid: Bits,
}

impl<T: arrow_buffer::ArrowNativeType> Column<T> {
    fn with_capacity(rows: usize) -> Self {
        Column { values: Vec::with_capacity(rows), valid: Bits::with_capacity(rows) }
    }

    /// Appends up to 64 values, with their validity as a word.
    #[inline]
    pub(super) fn push_word(&mut self, values: &[T], valid: u64) {
        self.values.extend_from_slice(values);
        self.valid.push_word(valid, values.len());
    }

    #[inline]
    fn push(&mut self, value: Option<T>) {
        self.values.push(value.unwrap_or_default());
        self.valid.push(value.is_some());
    }

    fn set(&mut self, at: usize, value: Option<T>) {
        self.values[at] = value.unwrap_or_default();
        self.valid.set(at, value.is_some());
    }

    fn finish<P: ArrowPrimitiveType<Native = T>>(self) -> ArrayRef {
        let nulls = nulls(self.valid.finish());
        Arc::new(PrimitiveArray::<P>::new(ScalarBuffer::from(self.values), nulls))
    }
}

/// An answer column's values, by its type.
#[derive(Debug)]
enum Values {
    U64(Column<u64>),
    U32(Column<u32>),
}

/// Where an answer column's value is in an outcome of the run's game.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The move's value at this place of [`crate::games::Move::values`].
    Move(usize),
    NimValue,
}

impl Source {
    #[inline]
    fn value(self, outcome: &Outcome) -> Option<u64> {
        match self {
            Source::Move(place) => outcome.winning_move.map(|game_move| game_move.values().1[place]),
            Source::NimValue => outcome.nim_value.map(u64::from),
        }
    }
}

/// One game's run of answers, in the columns of a table of `games` solutions: the
/// columns its game fills are written, the others are null.
#[derive(Debug)]
pub(crate) struct Answers {
    alice: Bits,
    solved: Bits,
    /// Every answer column of the table, in order: with its values when the run's game
    /// fills it.
    columns: Vec<(AnswerColumn, Option<(Source, Values)>)>,
    /// The rows answered with an error, by position, ascending within what was written
    /// in one go (sorted once, at the end).
    errors: Vec<(usize, ProblemError)>,
}

impl Answers {
    /// Empty answers of `kind` (`None`: rows without a game, all errors) in the columns of
    /// `games`, with room for `rows`.
    pub(super) fn new(kind: Option<GameKind>, games: Games, rows: usize) -> Self {
        let columns = AnswerColumn::of(games)
            .map(|column| {
                let source = kind.and_then(|kind| match column {
                    AnswerColumn::Move(field) => {
                        kind.move_fields().iter().position(|&f| f == field).map(Source::Move)
                    }
                    AnswerColumn::NimValue => kind.has_nim_value().then_some(Source::NimValue),
                });
                let values = |source| match column.data_type() {
                    DataType::UInt32 => (source, Values::U32(Column::with_capacity(rows))),
                    _ => (source, Values::U64(Column::with_capacity(rows))),
                };
                (column, source.map(values))
            })
            .collect();
        Answers {
            alice: Bits::with_capacity(rows),
            solved: Bits::with_capacity(rows),
            columns,
            errors: Vec::new(),
        }
    }

    /// The rows written so far.
    pub(super) fn len(&self) -> usize {
        self.alice.len
    }

    /// The errors written so far, by position.
    pub(super) fn errors(&self) -> &[(usize, ProblemError)] {
        &self.errors
    }

    /// Appends up to 64 rows' winners (bit set: Alice) and which of them were solved;
    /// their answer columns are appended with [`Answers::u64s`].
    #[inline]
    pub(super) fn push_word(&mut self, alice: u64, solved: u64, rows: usize) {
        self.alice.push_word(alice, rows);
        self.solved.push_word(solved, rows);
    }

    /// The `uint64` answer column `column`, when the run's game fills it.
    pub(super) fn u64s(&mut self, column: AnswerColumn) -> Option<&mut Column<u64>> {
        self.columns.iter_mut().find(|(c, _)| *c == column).and_then(|(_, values)| match values {
            Some((_, Values::U64(values))) => Some(values),
            _ => None,
        })
    }

    /// Appends one row's answer: its outcome, its error, or (`None`) a placeholder the row
    /// path's answer replaces ([`Answers::set`]).
    #[inline]
    pub(super) fn push(&mut self, answer: Option<Result<Outcome, ProblemError>>) {
        let outcome = answer.as_ref().and_then(|answer| answer.as_ref().ok());
        self.alice.push(outcome.is_some_and(|outcome| outcome.winner == Player::Alice));
        self.solved.push(outcome.is_some());
        for (_, values) in &mut self.columns {
            match values {
                None => {}
                Some((source, Values::U64(values))) => values.push(outcome.and_then(|o| source.value(o))),
                // A `uint32` column's values come from `uint32` fields.
                Some((source, Values::U32(values))) => {
                    values.push(outcome.and_then(|o| source.value(o)).map(|value| value as u32))
                }
            }
        }
        if let Some(Err(err)) = answer {
            self.errors.push((self.alice.len - 1, err));
        }
    }

    /// Replaces the placeholder at `at` by the row path's answer.
    pub(super) fn set(&mut self, at: usize, answer: Result<Outcome, ProblemError>) {
        let outcome = answer.as_ref().ok();
        self.alice.set(at, outcome.is_some_and(|outcome| outcome.winner == Player::Alice));
        self.solved.set(at, outcome.is_some());
        for (_, values) in &mut self.columns {
            match values {
                None => {}
                Some((source, Values::U64(values))) => values.set(at, outcome.and_then(|o| source.value(o))),
                Some((source, Values::U32(values))) => {
                    values.set(at, outcome.and_then(|o| source.value(o)).map(|value| value as u32))
                }
            }
        }
        if let Err(err) = answer {
            self.errors.push((at, err));
        }
    }

    /// The columns from `alice_wins` to `error_message`, in table order.
    pub(super) fn finish(mut self) -> Vec<ArrayRef> {
        let rows = self.len();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.columns.len() + 3);
        let solved = nulls(self.solved.finish());
        columns.push(Arc::new(BooleanArray::new(self.alice.finish(), solved)));
        for (column, values) in self.columns {
            columns.push(match values {
                None => new_null_array(&column.data_type(), rows),
                Some((_, Values::U64(values))) => values.finish::<UInt64Type>(),
                Some((_, Values::U32(values))) => values.finish::<UInt32Type>(),
            });
        }
        self.errors.sort_by_key(|(at, _)| *at);
        let mut errors = ErrorColumns::default();
        let mut next = 0;
        for (at, err) in &self.errors {
            errors.append_solved(at - next);
            errors.append(Some(err));
            next = at + 1;
        }
        errors.append_solved(rows - next);
        columns.extend(errors.finish());
        columns
    }
}

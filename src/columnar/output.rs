//! A table of solutions, written: one row a result, in the columns of
//! [`output_schema`](super::output_schema).

use std::fmt::Write;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, Field};

use super::{fills, output_schema, Games, MOVE_DIGIT, MOVE_INDEX, MOVE_PILE, MOVE_TAKE, NIM_VALUE};
use crate::convert::ProblemError;
use crate::games::{Move, Outcome, Player};

/// Builds the table of solutions of one batch, a result at a time.
#[derive(Debug)]
pub struct SolutionsBuilder {
    games: Games,
    alice_wins: BooleanBuilder,
    /// The answer columns that `games` fill, the others `None`.
    move_index: Option<UInt64Builder>,
    move_digit: Option<UInt32Builder>,
    move_pile: Option<UInt64Builder>,
    move_take: Option<UInt64Builder>,
    nim_value: Option<UInt32Builder>,
    error_reason: StringBuilder,
    error_message: StringBuilder,
}

impl SolutionsBuilder {
    /// An empty table of `games` solutions, with room for `rows`.
    pub fn new(games: Games, rows: usize) -> Self {
        let u64s = |name| fills(games, name).then(|| UInt64Builder::with_capacity(rows));
        let u32s = |name| fills(games, name).then(|| UInt32Builder::with_capacity(rows));
        SolutionsBuilder {
            games,
            alice_wins: BooleanBuilder::with_capacity(rows),
            move_index: u64s(MOVE_INDEX),
            move_digit: u32s(MOVE_DIGIT),
            move_pile: u64s(MOVE_PILE),
            move_take: u64s(MOVE_TAKE),
            nim_value: u32s(NIM_VALUE),
            // Solved rows leave these null, so no value bytes are reserved.
            error_reason: StringBuilder::with_capacity(rows, 0),
            error_message: StringBuilder::with_capacity(rows, 0),
        }
    }

    /// Appends one problem's result as the next row.
    pub fn append(&mut self, result: &Result<Outcome, ProblemError>) {
        let (outcome, error) = match result {
            Ok(outcome) => (Some(outcome), None),
            Err(err) => (None, Some(err)),
        };
        self.alice_wins.append_option(outcome.map(|outcome| outcome.winner == Player::Alice));
        let (mut index, mut digit, mut pile, mut take) = (None, None, None, None);
        match outcome.and_then(|outcome| outcome.winning_move) {
            Some(Move::SumGame { index: i, digit: d }) => (index, digit) = (Some(i), Some(u32::from(d))),
            Some(Move::StoneGameIx { index: i }) => index = Some(i),
            Some(Move::StoneGameIv { take: t }) => take = Some(t),
            Some(Move::NimSquare(m)) => (pile, take) = (Some(m.pile), Some(m.take)),
            None => {}
        }
        append(&mut self.move_index, index);
        append(&mut self.move_digit, digit);
        append(&mut self.move_pile, pile);
        append(&mut self.move_take, take);
        append(&mut self.nim_value, outcome.and_then(|outcome| outcome.nim_value));
        match error {
            None => {
                self.error_reason.append_null();
                self.error_message.append_null();
            }
            Some(err) => {
                self.error_reason.append_value(err.reason());
                // Written into the column's buffer, not through a String of its own.
                let _ = write!(self.error_message, "{err}");
                self.error_message.append_value("");
            }
        }
    }

    /// The table, with `id` (the problems' id column and its field) first when given.
    pub fn finish(mut self, id: Option<(&Field, ArrayRef)>) -> Result<RecordBatch, ArrowError> {
        let schema = output_schema(self.games, id.as_ref().map(|(field, _)| *field));
        let mut columns: Vec<ArrayRef> = id.map(|(_, array)| array).into_iter().collect();
        columns.push(Arc::new(self.alice_wins.finish()));
        columns.extend(self.move_index.as_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        columns.extend(self.move_digit.as_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        columns.extend(self.move_pile.as_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        columns.extend(self.move_take.as_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        columns.extend(self.nim_value.as_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
        columns.push(Arc::new(self.error_reason.finish()));
        columns.push(Arc::new(self.error_message.finish()));
        RecordBatch::try_new(Arc::new(schema), columns)
    }
}

/// Appends `value` (or a null) to a column the table has.
#[inline]
fn append<T: arrow_array::ArrowPrimitiveType>(
    builder: &mut Option<arrow_array::builder::PrimitiveBuilder<T>>,
    value: Option<T::Native>,
) {
    if let Some(builder) = builder {
        builder.append_option(value);
    }
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{UInt32Type, UInt64Type};
    use arrow_array::{Array, Int64Array};
    use arrow_schema::DataType;

    use super::*;
    use crate::games::nim_square::NimSquareMove;
    use crate::games::{GameKind, SolveError};

    #[test]
    fn each_result_fills_its_own_columns_and_errors_leave_the_answer_null() {
        let results = [
            Ok(Outcome::alice(Some(Move::SumGame { index: 2, digit: 9 }))),
            Ok(Outcome::alice(Some(Move::StoneGameIx { index: 4 }))),
            Ok(Outcome::alice(Some(Move::StoneGameIv { take: 16 }))),
            Ok(Outcome {
                winner: Player::Alice,
                winning_move: Some(Move::NimSquare(NimSquareMove { pile: 1, take: 4 })),
                nim_value: Some(3),
            }),
            Ok(Outcome::BOB),
            Err(ProblemError::from(SolveError::OddLength { len: 3 })),
        ];
        let mut builder = SolutionsBuilder::new(Games::Mixed, results.len());
        for result in &results {
            builder.append(result);
        }
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..6));
        let id = Field::new("id", DataType::Int64, false);
        let batch = builder.finish(Some((&id, ids.clone()))).unwrap();
        assert_eq!(batch.schema().as_ref(), &output_schema(Games::Mixed, Some(&id)));
        assert_eq!(batch.column(0), &ids);
        let u64s = |name| {
            batch.column_by_name(name).unwrap().as_primitive::<UInt64Type>().iter().collect::<Vec<_>>()
        };
        let u32s = |name| {
            batch.column_by_name(name).unwrap().as_primitive::<UInt32Type>().iter().collect::<Vec<_>>()
        };
        let alice: Vec<_> = batch.column_by_name("alice_wins").unwrap().as_boolean().iter().collect();
        assert_eq!(alice, [Some(true), Some(true), Some(true), Some(true), Some(false), None]);
        assert_eq!(u64s("move_index"), [Some(2), Some(4), None, None, None, None]);
        assert_eq!(u32s("move_digit"), [Some(9), None, None, None, None, None]);
        assert_eq!(u64s("move_pile"), [None, None, None, Some(1), None, None]);
        assert_eq!(u64s("move_take"), [None, None, Some(16), Some(4), None, None]);
        assert_eq!(u32s("nim_value"), [None, None, None, Some(3), None, None]);
        let strings =
            |name| batch.column_by_name(name).unwrap().as_string::<i32>().iter().collect::<Vec<_>>();
        assert_eq!(strings("error_reason"), [None, None, None, None, None, Some("ODD_LENGTH")]);
        let message = "sum game: length 3 is odd; the string must split into two equal halves";
        assert_eq!(strings("error_message"), [None, None, None, None, None, Some(message)]);
    }

    #[test]
    fn one_games_table_has_only_its_columns_and_may_be_empty() {
        let batch = SolutionsBuilder::new(Games::One(GameKind::StoneGameIv), 0).finish(None).unwrap();
        assert_eq!(batch.schema().as_ref(), &output_schema(Games::One(GameKind::StoneGameIv), None));
        assert_eq!(batch.num_rows(), 0);
        assert!(batch.columns().iter().all(|column| column.is_empty()));
    }
}

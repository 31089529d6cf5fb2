//! A table of solutions, written: one row a result, in the columns of
//! [`output_schema`](super::output_schema).

use std::fmt::Write;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, BooleanArray, DictionaryArray, Int8Array, PrimitiveArray, RecordBatch,
    StringArray,
};
use arrow_buffer::{BooleanBuffer, BooleanBufferBuilder, Buffer, NullBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field};

use super::{output_schema, AnswerColumn, Games};
use crate::games::{GameKind, MoveValues, Outcome, Player, MOST_MOVE_FIELDS};
use crate::problem::ProblemError;

/// The table of solutions of one batch's `results`, one row a result, with `id` (the
/// problems' id column and its field) first when given and each row's `game`
/// ([`game_column`]): [`Solutions`] given every result at once.
pub fn solutions(
    games: Games,
    results: &[Result<Outcome, ProblemError>],
    id: Option<(&Field, ArrayRef)>,
    game: ArrayRef,
) -> Result<RecordBatch, ArrowError> {
    let mut table = Solutions::new(games, results.len());
    table.append(results);
    table.finish(id, game)
}

/// The `game` column of rows whose games are `kinds` (`None`: no game, or several): each
/// game's label, as descriptors name it, as a key into a dictionary of every game's label
/// (the same in every batch).
pub fn game_column(kinds: impl IntoIterator<Item = Option<GameKind>>) -> ArrayRef {
    let keys: Int8Array = kinds.into_iter().map(|kind| kind.map(game_key)).collect();
    Arc::new(DictionaryArray::new(keys, game_labels()))
}

/// The `game` column of `rows` rows of `kind`: its key repeated, written at once.
pub fn one_game_column(kind: GameKind, rows: usize) -> ArrayRef {
    let keys = Int8Array::new(vec![game_key(kind); rows].into(), None);
    Arc::new(DictionaryArray::new(keys, game_labels()))
}

/// A game's key in the `game` column: its place in [`GameKind::ALL`].
fn game_key(kind: GameKind) -> i8 {
    const { assert!(GameKind::ALL.len() <= i8::MAX as usize, "a game's key is an i8") };
    kind.index() as i8
}

/// The values of every `game` column: the games' labels, made once, so that every batch
/// of an exchange has the same dictionary (sent once in an Arrow IPC stream).
fn game_labels() -> ArrayRef {
    static LABELS: std::sync::OnceLock<ArrayRef> = std::sync::OnceLock::new();
    let labels =
        LABELS.get_or_init(|| Arc::new(StringArray::from_iter_values(GameKind::ALL.map(GameKind::label))));
    Arc::clone(labels)
}

/// A table of solutions being built from a batch's results, a run of results at a time,
/// so that a door can solve a large batch in runs that stay in the cache.
/// `alice_wins` and its validity are packed 64 rows at a time straight from the results;
/// the answer columns are written by [`AnswerColumns`], and the error columns a run of
/// solved rows at a time.
#[derive(Debug)]
pub struct Solutions {
    games: Games,
    alice_wins: BooleanBufferBuilder,
    solved: BooleanBufferBuilder,
    answers: AnswerColumns,
    errors: ErrorColumns,
}

impl Solutions {
    /// An empty table of `games` solutions, with room for `rows`.
    pub fn new(games: Games, rows: usize) -> Self {
        Solutions {
            games,
            alice_wins: BooleanBufferBuilder::new(rows),
            solved: BooleanBufferBuilder::new(rows),
            answers: AnswerColumns::new(games, rows),
            errors: ErrorColumns::default(),
        }
    }

    /// Appends a row for each of `results`, in order. Runs of a multiple of 64 rows
    /// append the packed columns a word at a time.
    pub fn append(&mut self, results: &[Result<Outcome, ProblemError>]) {
        let outcome = |row: usize| results[row].as_ref().ok();
        let alice_wins = BooleanBuffer::collect_bool(results.len(), |row| {
            outcome(row).is_some_and(|outcome| outcome.winner == Player::Alice)
        });
        self.alice_wins.append_buffer(&alice_wins);
        self.solved.append_buffer(&BooleanBuffer::collect_bool(results.len(), |row| results[row].is_ok()));
        for result in results {
            let outcome = result.as_ref().ok();
            self.answers.append(
                outcome.and_then(|outcome| outcome.winning_move).map(|m| m.values()),
                outcome.and_then(|outcome| outcome.nim_value),
            );
            self.errors.append(result.as_ref().err());
        }
    }

    /// The table of the rows appended, with `id` first when given and then `game` (as
    /// many rows each).
    pub fn finish(
        mut self,
        id: Option<(&Field, ArrayRef)>,
        game: ArrayRef,
    ) -> Result<RecordBatch, ArrowError> {
        let schema = output_schema(self.games, id.as_ref().map(|(field, _)| *field));
        let mut columns: Vec<ArrayRef> = id.map(|(_, array)| array).into_iter().collect();
        columns.push(game);
        let solved = nulls(self.solved.finish());
        columns.push(Arc::new(BooleanArray::new(self.alice_wins.finish(), solved)));
        columns.extend(self.answers.finish());
        columns.extend(self.errors.finish());
        RecordBatch::try_new(Arc::new(schema), columns)
    }
}

/// The validity `valid` gives, none when every row is valid.
pub(super) fn nulls(valid: BooleanBuffer) -> Option<NullBuffer> {
    let nulls = NullBuffer::new(valid);
    (nulls.null_count() > 0).then_some(nulls)
}

/// A nullable column being built: its values (the default under a null row) in a plain
/// vector, and which rows are valid packed 64 rows a word as they come, put into Arrow's
/// buffers once, when the column is finished.
#[derive(Debug)]
struct Nullable<T> {
    values: Vec<T>,
    /// Bit `i` of word `w`: row `64 w + i` is valid.
    valid: Vec<u64>,
}

impl<T: arrow_buffer::ArrowNativeType> Nullable<T> {
    fn with_capacity(rows: usize) -> Self {
        Nullable { values: Vec::with_capacity(rows), valid: Vec::with_capacity(rows.div_ceil(64)) }
    }

    /// Appends up to 64 rows, `value(row)` each: its value and whether it is valid. The
    /// rows appended so far are a multiple of 64.
    #[inline]
    fn push_word(&mut self, rows: usize, mut value: impl FnMut(usize) -> (T, bool)) {
        debug_assert!(rows <= 64 && self.values.len().is_multiple_of(64));
        let mut word = 0;
        for row in 0..rows {
            let (value, valid) = value(row);
            self.values.push(value);
            word |= u64::from(valid) << row;
        }
        self.valid.push(word);
    }

    /// The column built so far; empty again afterwards.
    fn finish_primitive<P: ArrowPrimitiveType<Native = T>>(&mut self) -> PrimitiveArray<P> {
        let words = Buffer::from_vec(std::mem::take(&mut self.valid));
        let nulls = nulls(BooleanBuffer::new(words, 0, self.values.len()));
        PrimitiveArray::new(ScalarBuffer::from(std::mem::take(&mut self.values)), nulls)
    }
}

/// `error_reason` and `error_message`: null on every row but the few errors, so the
/// nulls are appended a run at a time.
#[derive(Debug, Default)]
pub(super) struct ErrorColumns {
    reason: StringBuilder,
    message: StringBuilder,
    /// Rows appended since the last error, not yet in the builders.
    solved: usize,
}

impl ErrorColumns {
    /// Appends `rows` solved rows.
    pub(super) fn append_solved(&mut self, rows: usize) {
        self.solved += rows;
    }

    #[inline]
    pub(super) fn append(&mut self, error: Option<&ProblemError>) {
        let Some(err) = error else {
            self.solved += 1;
            return;
        };
        self.flush();
        self.reason.append_value(err.reason());
        // Written into the column's buffer, not through a String of its own.
        let _ = write!(self.message, "{err}");
        self.message.append_value("");
    }

    fn flush(&mut self) {
        self.reason.append_nulls(self.solved);
        self.message.append_nulls(self.solved);
        self.solved = 0;
    }

    /// The two columns, in table order; empty again afterwards.
    pub(super) fn finish(&mut self) -> [ArrayRef; 2] {
        self.flush();
        [Arc::new(self.reason.finish()), Arc::new(self.message.finish())]
    }
}

/// The answer columns ([`AnswerColumn::of`]) of a table being built, a row at a time:
/// what the server's tables of solutions and the client's tables of answers both write.
/// Rows are kept 64 at a time and then written a column at a time: in a column the
/// same source is read for every row (no branch on the row's game), and its
/// validity is packed a word at once.
#[derive(Debug)]
pub struct AnswerColumns {
    columns: Vec<(Source, Values)>,
    /// The rows not yet written, fewer than 64.
    pending: Vec<Row>,
}

/// Where a column's value comes from in a row.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The move's value at this place in the row's [`Row::values`], by the row's
    /// [`Row::slot`]; [`Row::ABSENT`] for a game without the field and for a row without a
    /// move.
    Move([u8; Row::SLOTS]),
    NimValue,
}

/// A row as the answer columns read it, each column's value found without a branch on
/// the row's game: in mixed batches the game changes from row to row, and a branch on it
/// a column was mispredicted about every other row.
#[derive(Debug, Clone, Copy)]
struct Row {
    /// The move's game ([`GameKind::index`]), or [`Row::NO_MOVE`].
    slot: usize,
    /// The move's values, then a 0 at [`Row::ABSENT`].
    values: [u64; MOST_MOVE_FIELDS + 1],
    nim_value: Option<u32>,
}

impl Row {
    /// A slot for each game, then one for a row without a move.
    const SLOTS: usize = GameKind::ALL.len() + 1;
    const NO_MOVE: usize = GameKind::ALL.len();
    /// Where a field no game's move has is read: always 0, and the column is null there.
    const ABSENT: u8 = MOST_MOVE_FIELDS as u8;

    #[inline]
    fn new(game_move: Option<(GameKind, MoveValues)>, nim_value: Option<u32>) -> Self {
        let (slot, moved) =
            game_move.map_or((Row::NO_MOVE, [0; MOST_MOVE_FIELDS]), |(kind, values)| (kind.index(), values));
        let mut values = [0; MOST_MOVE_FIELDS + 1];
        values[..MOST_MOVE_FIELDS].copy_from_slice(&moved);
        Row { slot, values, nim_value }
    }
}

impl Source {
    fn of(column: AnswerColumn) -> Self {
        match column {
            AnswerColumn::Move(field) => {
                let mut at = [Row::ABSENT; Row::SLOTS];
                for kind in GameKind::ALL {
                    if let Some(place) = kind.move_fields().iter().position(|&f| f == field) {
                        at[kind.index()] = place as u8;
                    }
                }
                Source::Move(at)
            }
            AnswerColumn::NimValue => Source::NimValue,
        }
    }

    /// The column's value in `row` and whether it is valid (the row's game fills the
    /// column); 0 when it is not.
    #[inline]
    fn value(self, row: &Row) -> (u64, bool) {
        match self {
            Source::Move(at) => {
                let at = at[row.slot];
                (row.values[usize::from(at)], at != Row::ABSENT)
            }
            Source::NimValue => (u64::from(row.nim_value.unwrap_or(0)), row.nim_value.is_some()),
        }
    }
}

/// The values of a `uint64` or a `uint32` column.
#[derive(Debug)]
enum Values {
    U64(Nullable<u64>),
    U32(Nullable<u32>),
}

impl AnswerColumns {
    /// Rows written to the columns at a time: a word of validity.
    const CHUNK: usize = 64;

    /// Empty columns of the answers `games` fill, with room for `rows`.
    pub fn new(games: Games, rows: usize) -> Self {
        let values = |column: AnswerColumn| match column.data_type() {
            DataType::UInt32 => Values::U32(Nullable::with_capacity(rows)),
            _ => Values::U64(Nullable::with_capacity(rows)),
        };
        let columns = AnswerColumn::of(games).map(|column| (Source::of(column), values(column))).collect();
        AnswerColumns { columns, pending: Vec::with_capacity(Self::CHUNK) }
    }

    /// Appends a row: the move's game and values ([`crate::games::Move::values`]), if
    /// there is a move, and the nim value; a column the row's game does not fill is null.
    #[inline]
    pub fn append(&mut self, game_move: Option<(GameKind, MoveValues)>, nim_value: Option<u32>) {
        self.pending.push(Row::new(game_move, nim_value));
        if self.pending.len() == Self::CHUNK {
            self.write_pending();
        }
    }

    /// Writes the pending rows to every column.
    fn write_pending(&mut self) {
        let rows = &self.pending;
        for (source, values) in &mut self.columns {
            let source = *source;
            match values {
                Values::U64(values) => values.push_word(rows.len(), |row| source.value(&rows[row])),
                // A `uint32` column's values come from `uint32` fields.
                Values::U32(values) => values.push_word(rows.len(), |row| {
                    let (value, valid) = source.value(&rows[row]);
                    (value as u32, valid)
                }),
            }
        }
        self.pending.clear();
    }

    /// The columns built so far, in table order; the columns are empty again.
    pub fn finish(&mut self) -> impl Iterator<Item = ArrayRef> + '_ {
        if !self.pending.is_empty() {
            self.write_pending();
        }
        self.columns.iter_mut().map(|(_, values)| match values {
            Values::U64(values) => Arc::new(values.finish_primitive::<UInt64Type>()) as ArrayRef,
            Values::U32(values) => Arc::new(values.finish_primitive::<UInt32Type>()) as ArrayRef,
        })
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
    use crate::games::{stone_game_iv, stone_game_ix, sum_game, Move, MoveField, SolveError};

    #[test]
    fn each_result_fills_its_own_columns_and_errors_leave_the_answer_null() {
        let results = [
            Ok(Outcome::alice(Some(Move::SumGame(sum_game::SumGameMove { index: 2, digit: 9 })))),
            Ok(Outcome::alice(Some(Move::StoneGameIx(stone_game_ix::StoneGameIxMove { index: 4 })))),
            Ok(Outcome::alice(Some(Move::StoneGameIv(stone_game_iv::StoneGameIvMove { take: 16 })))),
            Ok(Outcome {
                winner: Player::Alice,
                winning_move: Some(Move::NimSquare(NimSquareMove { pile: 1, take: 4 })),
                nim_value: Some(3),
            }),
            Ok(Outcome::BOB),
            Err(ProblemError::from(SolveError::OddLength { len: 3 })),
        ];
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..6));
        let id = Field::new("id", DataType::Int64, false);
        let kinds = [GameKind::SumGame, GameKind::StoneGameIx, GameKind::StoneGameIv, GameKind::NimSquare];
        let kinds = kinds.map(Some).into_iter().chain([Some(GameKind::StoneGameIv), None]);
        let batch = solutions(Games::Mixed, &results, Some((&id, ids.clone())), game_column(kinds)).unwrap();
        assert_eq!(batch.schema().as_ref(), &output_schema(Games::Mixed, Some(&id)));
        assert_eq!(batch.column(0), &ids);
        let games = arrow_cast::cast(batch.column_by_name("game").unwrap(), &DataType::Utf8).unwrap();
        let games: Vec<_> = games.as_string::<i32>().iter().collect();
        let labels = ["sum_game", "stone_game_ix", "stone_game_iv", "nim_square", "stone_game_iv"];
        assert_eq!(games, labels.map(Some).into_iter().chain([None]).collect::<Vec<_>>());
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

    /// Rows across several 64-row words, the last one partial, and a writer used for a
    /// second table after `finish`: every value and null where a row at a time puts it.
    #[test]
    fn answers_across_words_and_tables_land_in_their_rows() {
        let result = |row: u64| match row % 7 {
            0 => Ok(Outcome::alice(Some(Move::SumGame(sum_game::SumGameMove {
                index: row,
                digit: (row % 10) as u8,
            })))),
            1 => {
                Ok(Outcome::alice(Some(Move::StoneGameIx(stone_game_ix::StoneGameIxMove { index: row + 1 }))))
            }
            2 => Ok(Outcome::alice(Some(Move::StoneGameIv(stone_game_iv::StoneGameIvMove {
                take: row * row,
            })))),
            3 => Ok(Outcome {
                winner: Player::Alice,
                winning_move: Some(Move::NimSquare(NimSquareMove { pile: row / 2, take: 1 })),
                nim_value: Some(row as u32),
            }),
            4 => Ok(Outcome::BOB),
            5 if row.is_multiple_of(3) => Err(ProblemError::from(SolveError::OddLength { len: 3 })),
            _ => Ok(Outcome { winner: Player::Bob, winning_move: None, nim_value: Some(0) }),
        };
        let mut answers = AnswerColumns::new(Games::Mixed, 0);
        for rows in [200_u64, 64, 1, 130] {
            let results: Vec<_> = (0..rows).map(result).collect();
            let expected = |row: usize, field: MoveField| {
                let outcome = results[row].as_ref().ok()?;
                let (kind, values) = outcome.winning_move?.values();
                kind.move_fields().iter().position(|&f| f == field).map(|at| values[at])
            };
            for result in &results {
                let outcome = result.as_ref().ok();
                answers.append(
                    outcome.and_then(|outcome| outcome.winning_move).map(|m| m.values()),
                    outcome.and_then(|outcome| outcome.nim_value),
                );
            }
            let columns: Vec<ArrayRef> = answers.finish().collect();
            let batch =
                solutions(Games::Mixed, &results, None, game_column((0..rows).map(|_| None))).unwrap();
            for (at, column) in AnswerColumn::of(Games::Mixed).enumerate() {
                let written = batch.column_by_name(column.name()).unwrap();
                assert_eq!(written, &columns[at], "{}: the same from both writers", column.name());
                let written = arrow_cast::cast(written, &DataType::UInt64).unwrap();
                let written: Vec<Option<u64>> = written.as_primitive::<UInt64Type>().iter().collect();
                let wanted: Vec<Option<u64>> = (0..results.len())
                    .map(|row| match column {
                        AnswerColumn::Move(field) => expected(row, field),
                        AnswerColumn::NimValue => {
                            results[row].as_ref().ok().and_then(|outcome| outcome.nim_value).map(u64::from)
                        }
                    })
                    .collect();
                assert_eq!(written, wanted, "{} of {rows} rows", column.name());
            }
            let alice: Vec<_> = batch.column_by_name("alice_wins").unwrap().as_boolean().iter().collect();
            let wanted: Vec<_> = results.iter().map(|r| r.as_ref().ok().map(Outcome::alice_wins)).collect();
            assert_eq!(alice, wanted);
        }
    }

    #[test]
    fn one_games_table_has_only_its_columns_and_may_be_empty() {
        let batch =
            solutions(Games::One(GameKind::StoneGameIv), &[], None, game_column(std::iter::empty())).unwrap();
        assert_eq!(batch.schema().as_ref(), &output_schema(Games::One(GameKind::StoneGameIv), None));
        assert_eq!(batch.num_rows(), 0);
        assert!(batch.columns().iter().all(|column| column.is_empty()));
    }
}

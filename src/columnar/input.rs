//! A table of problems, read: one [`Problem`] a row from a [`RecordBatch`]'s game columns.
//!
//! The columns are checked once a batch (present, of an accepted type, named once); a
//! batch that fails that check has no problems at all ([`ColumnError`]). Each row is then
//! read on its own: a null input, a null in a list, a negative integer, a number that is
//! no count or (in `mixed`) a row with no game or several is that row's [`ProblemError`],
//! and the other rows are answered. Sliced arrays are read through their offsets. A row's
//! problem borrows the columns ([`BatchProblems`]); nothing is copied but the inputs the
//! solver takes ownership of ([`problems`]), list items of another integer type than
//! uint64, and numbers held as floats, decimals or text (each converted once a batch, by
//! the rule of [`super::numbers`]).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, FixedSizeListArray, LargeStringArray, RecordBatch, StringArray, StringViewArray,
};
use arrow_buffer::NullBuffer;
use std::borrow::Cow;

use arrow_schema::{DataType, FieldRef};

use super::numbers::Converted;
use super::{accepted_types, cast_fix, spread_bits, Games, ID};
use crate::convert::ProblemError;
use crate::games::{GameKind, GameRef, InputRef, InputShape};
use crate::solver::{Problem, ProblemRef};

/// Why a batch's columns cannot be read as problems at all; the exchange fails with
/// `INVALID_ARGUMENT` and this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnError {
    /// A one-game batch without its game's input column.
    #[error("no column {column:?}: a {game} batch holds its problems there", game = game.label())]
    Missing {
        /// The game the descriptor names.
        game: GameKind,
        /// The column it needs.
        column: &'static str,
    },
    /// A `mixed` batch without any game's input column.
    #[error("no game column: a mixed batch needs at least one of {}", GameKind::ALL.map(GameKind::input).join(", "))]
    NoGameColumn,
    /// A game column of a type this server does not read.
    #[error("column {column:?} is {found}; expected {expected}; {fix}")]
    WrongType {
        /// The column's name.
        column: &'static str,
        /// Its type.
        found: DataType,
        /// What is accepted, in words.
        expected: &'static str,
        /// The cast that makes it readable, in pandas, Polars and Spark terms.
        fix: String,
    },
    /// A column the server reads appears more than once.
    #[error("column {column:?} appears {count} times; keep one")]
    Duplicate {
        /// The column's name.
        column: &'static str,
        /// How often it appears.
        count: usize,
    },
}

/// The problems of `batch`, one a row in order, read from the input columns that `games`
/// names (other columns are ignored).
pub fn problems(batch: &RecordBatch, games: Games) -> Result<Vec<Problem>, ColumnError> {
    let mut problems = Vec::with_capacity(batch.num_rows());
    problems_into(batch, games, &mut problems)?;
    Ok(problems)
}

/// [`problems`] appended to `into`: a vector kept from batch to batch, for one.
pub fn problems_into(
    batch: &RecordBatch,
    games: Games,
    into: &mut impl Extend<Problem>,
) -> Result<(), ColumnError> {
    let problems = BatchProblems::of(batch, games)?;
    into.extend((0..batch.num_rows()).map(|row| problems.get(row).map(GameRef::to_owned)));
    Ok(())
}

/// A batch's problems where they lie: its game columns found and checked once, then each
/// row's problem read on its own, borrowing them.
pub struct BatchProblems<'a> {
    /// The game columns the batch has: the one game's, or in `mixed` each present.
    inputs: Vec<Input<'a>>,
    /// In `mixed`, a byte a row: bit `i` is set when the row's input in `inputs[i]` is
    /// not null. Empty for one game.
    present: Vec<u8>,
}

impl<'a> BatchProblems<'a> {
    /// The input columns of `batch` that `games` names, checked (other columns are
    /// ignored).
    pub fn of(batch: &'a RecordBatch, games: Games) -> Result<Self, ColumnError> {
        match games {
            Games::One(game) => {
                let input =
                    Input::find(batch, game)?.ok_or(ColumnError::Missing { game, column: game.input() })?;
                Ok(BatchProblems { inputs: vec![input], present: Vec::new() })
            }
            Games::Mixed => {
                let mut inputs = Vec::with_capacity(GameKind::ALL.len());
                for game in GameKind::ALL {
                    inputs.extend(Input::find(batch, game)?);
                }
                if inputs.is_empty() {
                    return Err(ColumnError::NoGameColumn);
                }
                let present = present(&inputs, batch.num_rows());
                Ok(BatchProblems { inputs, present })
            }
        }
    }

    /// The problem in `row` (within the batch), or why it has none.
    #[inline]
    pub fn get(&self, row: usize) -> ProblemRef<'_> {
        match self.present.is_empty() {
            true => self.inputs[0].problem(row),
            false => self.mixed_problem(row),
        }
    }

    /// The batch's `game` column: the one game's on every row, or in `mixed` the game
    /// whose input is the row's one input that is not null (null for none or several),
    /// from the byte a row that [`BatchProblems::get`] reads.
    pub fn game_column(&self, rows: usize) -> ArrayRef {
        super::game_column((0..rows).map(|row| self.game(row)))
    }

    /// The game of `row`: the one game's, or in `mixed` the game whose input is the row's
    /// one input that is not null (`None` for none or several).
    #[inline]
    pub fn game(&self, row: usize) -> Option<GameKind> {
        match self.present.is_empty() {
            true => Some(self.inputs[0].game),
            false => {
                let present = self.present[row];
                (present.count_ones() == 1).then(|| self.inputs[present.trailing_zeros() as usize].game)
            }
        }
    }

    /// The row's problem in a `mixed` batch: the one game whose input is not null.
    #[inline]
    fn mixed_problem(&self, row: usize) -> ProblemRef<'_> {
        let present = self.present[row];
        match present.count_ones() {
            1 => self.inputs[present.trailing_zeros() as usize].problem(row),
            0 => Err(ProblemError::MissingGame),
            _ => {
                let set = self.inputs.iter().enumerate().filter(|(i, _)| present >> i & 1 == 1);
                Err(ProblemError::SeveralGames { games: set.map(|(_, input)| input.game).collect() })
            }
        }
    }
}

/// The batch's `id` column and its field, if it has one; any type is echoed back.
pub fn id_column(batch: &RecordBatch) -> Result<Option<(FieldRef, ArrayRef)>, ColumnError> {
    Ok(column(batch, ID)?.map(|index| (batch.schema().fields()[index].clone(), batch.column(index).clone())))
}

/// The index of the one column named `name`, if any.
fn column(batch: &RecordBatch, name: &'static str) -> Result<Option<usize>, ColumnError> {
    let schema = batch.schema_ref();
    let mut found = schema.fields().iter().enumerate().filter(|(_, field)| field.name() == name);
    let first = found.next().map(|(index, _)| index);
    match found.count() {
        0 => Ok(first),
        more => Err(ColumnError::Duplicate { column: name, count: more + 1 }),
    }
}

/// A byte a row of `rows`, bit `i` set where `inputs[i]` is not null: a row's game is then
/// found with one load, not a null check a game column. A column's validity is spread a
/// bitmap's byte at a time; a dictionary's strings, whose nulls are also their values',
/// are checked row by row.
fn present(inputs: &[Input<'_>], rows: usize) -> Vec<u8> {
    const _: () = assert!(GameKind::ALL.len() <= 8, "a bit a game column");
    let mut present = vec![0u8; rows];
    let mut spread = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let nulls = match &input.column {
            Column::Strings(strings @ Strings { keys: Some(_), .. }) => {
                for (row, byte) in present.iter_mut().enumerate() {
                    *byte |= u8::from(strings.get(row).is_some()) << i;
                }
                continue;
            }
            Column::Strings(Strings { keys: None, values }) => values.nulls(),
            Column::Integers(integers) => integers.nulls,
            Column::Numbers(numbers) => numbers.nulls(),
            Column::Lists(lists) => lists.nulls,
        };
        match nulls {
            None => present.iter_mut().for_each(|byte| *byte |= 1 << i),
            Some(nulls) => {
                spread.clear();
                spread_bits(nulls.inner(), &mut spread);
                for (byte, &valid) in present.iter_mut().zip(&spread) {
                    *byte |= valid << i;
                }
            }
        }
    }
    present
}

/// One game's input column, its type checked against the game's input shape.
struct Input<'a> {
    game: GameKind,
    column: Column<'a>,
}

/// An input column by its shape ([`InputShape`]).
enum Column<'a> {
    /// A text input (Sum Game's `num`).
    Strings(Strings<'a>),
    /// An integer input (Stone Game IV's `n`).
    Integers(Integers<'a>),
    /// An integer input held as floats, decimals or text, read once for the batch.
    Numbers(Converted),
    /// A list of integers (Stone Game IX's `stones`, Nim Square's `piles`).
    Lists(Lists<'a>),
}

impl<'a> Input<'a> {
    /// The input column of `game` in `batch`, if there is one.
    fn find(batch: &'a RecordBatch, game: GameKind) -> Result<Option<Input<'a>>, ColumnError> {
        let Some(index) = column(batch, game.input())? else { return Ok(None) };
        let array = batch.column(index).as_ref();
        let column = match game.input_shape() {
            InputShape::Text => Strings::of(array).map(Column::Strings),
            InputShape::Integer => Integers::of(array)
                .map(Column::Integers)
                .or_else(|| Converted::of(array, 0..array.len()).map(Column::Numbers)),
            InputShape::Integers => Lists::of(array).map(Column::Lists),
        };
        let wrong_type = || ColumnError::WrongType {
            column: game.input(),
            found: array.data_type().clone(),
            expected: accepted_types(game),
            fix: cast_fix(game, game.input()),
        };
        column.map(|column| Some(Input { game, column })).ok_or_else(wrong_type)
    }

    /// The problem in `row`, or why it has none.
    #[inline]
    fn problem(&self, row: usize) -> ProblemRef<'_> {
        let game = self.game;
        let null = || ProblemError::NullInput { game, index: None };
        let input = match &self.column {
            Column::Strings(strings) => strings.get(row).map(InputRef::Text).ok_or_else(null)?,
            Column::Integers(integers) => match integers.is_null(row) {
                true => return Err(null()),
                false => integers
                    .values
                    .get(row)
                    .map(InputRef::Integer)
                    .map_err(|value| ProblemError::NegativeValue { game, value, index: None })?,
            },
            Column::Numbers(numbers) => match numbers.is_null(row) {
                true => return Err(null()),
                false => numbers.get(row).map(InputRef::Integer).map_err(|fault| fault.error(game, None))?,
            },
            Column::Lists(lists) => {
                if lists.nulls.is_some_and(|nulls| nulls.is_null(row)) {
                    return Err(null());
                }
                InputRef::Integers(lists.values(game, row)?)
            }
        };
        // `find` read the column by the game's own shape, which `with_input_ref` takes.
        Ok(game.with_input_ref(input).expect("an input of the game's shape"))
    }
}

/// A string column: utf8, large_utf8, utf8_view, or a dictionary of one of them.
struct Strings<'a> {
    /// A dictionary's keys: indices into `values`.
    keys: Option<Integers<'a>>,
    values: StringValues<'a>,
}

/// The string arrays a `num` column may hold.
enum StringValues<'a> {
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
}

impl<'a> StringValues<'a> {
    fn of(array: &'a dyn Array) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Utf8 => StringValues::Utf8(array.as_string()),
            DataType::LargeUtf8 => StringValues::LargeUtf8(array.as_string()),
            DataType::Utf8View => StringValues::Utf8View(array.as_string_view()),
            _ => return None,
        })
    }

    fn nulls(&self) -> Option<&'a NullBuffer> {
        match *self {
            StringValues::Utf8(array) => array.nulls(),
            StringValues::LargeUtf8(array) => array.nulls(),
            StringValues::Utf8View(array) => array.nulls(),
        }
    }

    fn len(&self) -> usize {
        match self {
            StringValues::Utf8(array) => array.len(),
            StringValues::LargeUtf8(array) => array.len(),
            StringValues::Utf8View(array) => array.len(),
        }
    }

    fn get(&self, index: usize) -> Option<&'a str> {
        match self {
            StringValues::Utf8(array) => array.is_valid(index).then(|| array.value(index)),
            StringValues::LargeUtf8(array) => array.is_valid(index).then(|| array.value(index)),
            StringValues::Utf8View(array) => array.is_valid(index).then(|| array.value(index)),
        }
    }
}

impl<'a> Strings<'a> {
    fn of(array: &'a dyn Array) -> Option<Self> {
        if let Some(dictionary) = array.as_any_dictionary_opt() {
            let keys = Integers::of(dictionary.keys())?;
            return Some(Strings {
                keys: Some(keys),
                values: StringValues::of(dictionary.values().as_ref())?,
            });
        }
        Some(Strings { keys: None, values: StringValues::of(array)? })
    }

    /// The string in `row`; `None` when it is null.
    fn get(&self, row: usize) -> Option<&'a str> {
        match &self.keys {
            None => self.values.get(row),
            Some(keys) if keys.is_null(row) => None,
            // A valid array's keys are within its values (its dictionary may be empty
            // when every key is null).
            Some(keys) => {
                let key = usize::try_from(keys.values.get(row).ok()?).ok()?;
                (key < self.values.len()).then(|| self.values.get(key))?
            }
        }
    }
}

/// Integers of any width, as a slice of their native type.
#[derive(Clone, Copy)]
enum IntegerValues<'a> {
    Int8(&'a [i8]),
    Int16(&'a [i16]),
    Int32(&'a [i32]),
    Int64(&'a [i64]),
    UInt8(&'a [u8]),
    UInt16(&'a [u16]),
    UInt32(&'a [u32]),
    UInt64(&'a [u64]),
}

/// Calls `$f` on the slice inside an [`IntegerValues`], whatever its type.
macro_rules! with_slice {
    ($values:expr, $slice:ident => $f:expr) => {
        match $values {
            IntegerValues::Int8($slice) => $f,
            IntegerValues::Int16($slice) => $f,
            IntegerValues::Int32($slice) => $f,
            IntegerValues::Int64($slice) => $f,
            IntegerValues::UInt8($slice) => $f,
            IntegerValues::UInt16($slice) => $f,
            IntegerValues::UInt32($slice) => $f,
            IntegerValues::UInt64($slice) => $f,
        }
    };
}

/// A value as a count: itself, or the negative value it is.
#[inline]
fn count<T: Into<i128>>(value: T) -> Result<u64, i64> {
    let value = value.into();
    // Every integer type fits i128, and a negative one fits i64.
    u64::try_from(value).map_err(|_| value as i64)
}

impl<'a> IntegerValues<'a> {
    fn of(array: &'a dyn Array) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Int8 => IntegerValues::Int8(array.as_primitive::<Int8Type>().values()),
            DataType::Int16 => IntegerValues::Int16(array.as_primitive::<Int16Type>().values()),
            DataType::Int32 => IntegerValues::Int32(array.as_primitive::<Int32Type>().values()),
            DataType::Int64 => IntegerValues::Int64(array.as_primitive::<Int64Type>().values()),
            DataType::UInt8 => IntegerValues::UInt8(array.as_primitive::<UInt8Type>().values()),
            DataType::UInt16 => IntegerValues::UInt16(array.as_primitive::<UInt16Type>().values()),
            DataType::UInt32 => IntegerValues::UInt32(array.as_primitive::<UInt32Type>().values()),
            DataType::UInt64 => IntegerValues::UInt64(array.as_primitive::<UInt64Type>().values()),
            _ => return None,
        })
    }

    /// The value at `index` as a count, or the negative value it is.
    #[inline]
    fn get(self, index: usize) -> Result<u64, i64> {
        with_slice!(self, values => count(values[index]))
    }

    /// The values in `range` as counts, borrowed when they are uint64; a negative value
    /// (which [`IntegerValues::first_negative`] finds) becomes 0.
    fn counts(self, range: std::ops::Range<usize>) -> Cow<'a, [u64]> {
        if let IntegerValues::UInt64(values) = self {
            return Cow::Borrowed(&values[range]);
        }
        with_slice!(self, values => Cow::Owned(values[range].iter().map(|&value| count(value).unwrap_or(0)).collect()))
    }

    /// The first negative value in `range`: its position in the range and its value.
    fn first_negative(self, range: std::ops::Range<usize>) -> Option<(usize, i64)> {
        match self {
            IntegerValues::Int8(_)
            | IntegerValues::Int16(_)
            | IntegerValues::Int32(_)
            | IntegerValues::Int64(_) => {
                with_slice!(self, values => values[range]
                    .iter()
                    .enumerate()
                    .find_map(|(i, &value)| count(value).err().map(|value| (i, value))))
            }
            _ => None,
        }
    }
}

/// An integer column with its nulls.
struct Integers<'a> {
    nulls: Option<&'a NullBuffer>,
    values: IntegerValues<'a>,
}

impl<'a> Integers<'a> {
    fn of(array: &'a dyn Array) -> Option<Self> {
        Some(Integers { nulls: array.nulls(), values: IntegerValues::of(array)? })
    }

    fn is_null(&self, index: usize) -> bool {
        self.nulls.is_some_and(|nulls| nulls.is_null(index))
    }
}

/// Where each row's list lies in the values.
enum Offsets<'a> {
    List(&'a [i32]),
    LargeList(&'a [i64]),
    FixedSizeList(usize),
}

impl Offsets<'_> {
    /// Where the list in `row` starts in the items; `row` = the array's length gives
    /// where the last ends.
    #[inline]
    fn start(&self, row: usize) -> usize {
        // Offsets a valid array holds are never negative.
        match *self {
            Offsets::List(offsets) => offsets[row] as usize,
            Offsets::LargeList(offsets) => offsets[row] as usize,
            Offsets::FixedSizeList(size) => row * size,
        }
    }
}

/// A list-of-numbers column: list, large_list or fixed_size_list.
struct Lists<'a> {
    nulls: Option<&'a NullBuffer>,
    offsets: Offsets<'a>,
    items: Items<'a>,
}

/// A list column's items, as counts over the items the rows span (a slice of a large
/// array converts no more).
enum Items<'a> {
    /// Integers: the values themselves when they are uint64, else converted once for the
    /// batch, from the item at `first` on; a negative one's row is found from `values`.
    Integers { values: Integers<'a>, counts: Cow<'a, [u64]>, first: usize },
    /// Floats, decimals or text, read once for the batch.
    Numbers(Converted),
}

impl<'a> Lists<'a> {
    fn of(array: &'a dyn Array) -> Option<Self> {
        let (offsets, values) = match array.data_type() {
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                (Offsets::List(list.value_offsets()), list.values())
            }
            DataType::LargeList(_) => {
                let list = array.as_list::<i64>();
                (Offsets::LargeList(list.value_offsets()), list.values())
            }
            DataType::FixedSizeList(_, size) => {
                let list: &FixedSizeListArray = array.as_fixed_size_list();
                (Offsets::FixedSizeList(usize::try_from(*size).ok()?), list.values())
            }
            _ => return None,
        };
        let span = offsets.start(0)..offsets.start(array.len());
        let items = match Integers::of(values.as_ref()) {
            Some(values) => {
                Items::Integers { counts: values.values.counts(span.clone()), first: span.start, values }
            }
            None => Items::Numbers(Converted::of(values.as_ref(), span)?),
        };
        Some(Lists { nulls: array.nulls(), offsets, items })
    }

    /// The values of the list in `row` (not null) as counts, or the row's error.
    fn values(&self, game: GameKind, row: usize) -> Result<&[u64], ProblemError> {
        let range = self.offsets.start(row)..self.offsets.start(row + 1);
        let (values, counts, first) = match &self.items {
            Items::Integers { values, counts, first } => (values, counts, *first),
            Items::Numbers(numbers) => {
                // The first null, NaN or value that is no count, whichever comes first.
                return match numbers.first_gap(range.clone()) {
                    None => Ok(numbers.counts(range)),
                    Some((index, None)) => Err(ProblemError::NullInput { game, index: Some(index as u64) }),
                    Some((index, Some(fault))) => Err(fault.error(game, Some(index as u64))),
                };
            }
        };
        if let Some(nulls) = values.nulls.filter(|nulls| nulls.null_count() > 0) {
            // The first null or negative value, whichever comes first, is the row's error.
            for (index, i) in range.clone().enumerate() {
                let index = Some(index as u64);
                if nulls.is_null(i) {
                    return Err(ProblemError::NullInput { game, index });
                }
                if let Err(value) = values.values.get(i) {
                    return Err(ProblemError::NegativeValue { game, value, index });
                }
            }
        } else if let Some((index, value)) = values.values.first_negative(range.clone()) {
            // No null items: only a value's sign is left to check, once.
            return Err(ProblemError::NegativeValue { game, value, index: Some(index as u64) });
        }
        Ok(&counts[range.start - first..range.end - first])
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::builder::{ListBuilder, StringDictionaryBuilder, UInt64Builder};
    use arrow_array::types::{Float32Type, Float64Type, Int16Type};
    use arrow_array::{
        Decimal128Array, FixedSizeListArray, Float64Array, Int32Array, Int64Array, Int8Array, LargeListArray,
        ListArray, UInt32Array, UInt64Array,
    };
    use arrow_schema::Field;

    use super::*;
    use crate::games::Game;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    fn read(columns: Vec<(&str, ArrayRef)>, games: Games) -> Result<Vec<Problem>, ColumnError> {
        problems(&batch(columns), games)
    }

    const IV: Games = Games::One(GameKind::StoneGameIv);
    const IX: Games = Games::One(GameKind::StoneGameIx);

    #[test]
    fn every_string_type_reads_the_same_sum_games() {
        let values = [Some("25??"), None, Some("?")];
        let expected = vec![
            Ok(Game::SumGame("25??".into())),
            Err(ProblemError::NullInput { game: GameKind::SumGame, index: None }),
            Ok(Game::SumGame("?".into())),
        ];
        let mut dictionary = StringDictionaryBuilder::<Int16Type>::new();
        dictionary.extend(values);
        let columns: [ArrayRef; 4] = [
            Arc::new(StringArray::from(values.to_vec())),
            Arc::new(LargeStringArray::from(values.to_vec())),
            Arc::new(StringViewArray::from(values.to_vec())),
            Arc::new(dictionary.finish()),
        ];
        let mut nulls = StringDictionaryBuilder::<Int16Type>::new();
        nulls.append_nulls(2);
        let null = Err(ProblemError::NullInput { game: GameKind::SumGame, index: None });
        assert_eq!(
            read(vec![("num", Arc::new(nulls.finish()))], Games::One(GameKind::SumGame)).unwrap(),
            [null.clone(), null]
        );
        for column in columns {
            let games = Games::One(GameKind::SumGame);
            assert_eq!(
                read(vec![("num", column.clone())], games).unwrap(),
                expected,
                "{}",
                column.data_type()
            );
            let sliced = column.slice(1, 2);
            assert_eq!(read(vec![("num", sliced)], games).unwrap(), expected[1..], "{}", column.data_type());
        }
    }

    #[test]
    fn every_integer_type_reads_a_pile_and_a_negative_one_is_that_rows_error() {
        let expected = vec![
            Ok(Game::StoneGameIv(7)),
            Err(ProblemError::NullInput { game: GameKind::StoneGameIv, index: None }),
            Err(ProblemError::NegativeValue { game: GameKind::StoneGameIv, value: -3, index: None }),
        ];
        let columns: [ArrayRef; 3] = [
            Arc::new(Int8Array::from(vec![Some(7), None, Some(-3)])),
            Arc::new(Int32Array::from(vec![Some(7), None, Some(-3)])),
            Arc::new(Int64Array::from(vec![Some(7), None, Some(-3)])),
        ];
        for column in columns {
            assert_eq!(read(vec![("n", column)], IV).unwrap(), expected);
        }
        let unsigned: ArrayRef = Arc::new(UInt64Array::from(vec![Some(1), Some(u64::MAX), None]));
        assert_eq!(
            read(vec![("n", unsigned.slice(1, 1))], IV).unwrap(),
            vec![Ok(Game::StoneGameIv(u64::MAX))]
        );
        let small: ArrayRef = Arc::new(UInt32Array::from(vec![4]));
        assert_eq!(read(vec![("n", small)], IV).unwrap(), vec![Ok(Game::StoneGameIv(4))]);
    }

    #[test]
    fn every_list_type_reads_stones_and_sliced_lists_read_their_own_rows() {
        let rows = vec![
            Some(vec![Some(1i64), Some(2)]),
            None,
            Some(vec![Some(3), Some(-4)]),
            Some(vec![None, Some(-1)]),
        ];
        let expected = vec![
            Ok(Game::StoneGameIx(vec![1, 2])),
            Err(ProblemError::NullInput { game: GameKind::StoneGameIx, index: None }),
            Err(ProblemError::NegativeValue { game: GameKind::StoneGameIx, value: -4, index: Some(1) }),
            Err(ProblemError::NullInput { game: GameKind::StoneGameIx, index: Some(0) }),
        ];
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(rows.clone());
        let large = LargeListArray::from_iter_primitive::<Int64Type, _, _>(rows.clone());
        let fixed = FixedSizeListArray::from_iter_primitive::<Int64Type, _, _>(rows, 2);
        for column in [Arc::new(list) as ArrayRef, Arc::new(large), Arc::new(fixed)] {
            assert_eq!(
                read(vec![("stones", column.clone())], IX).unwrap(),
                expected,
                "{}",
                column.data_type()
            );
            let sliced = column.slice(2, 2);
            assert_eq!(read(vec![("stones", sliced)], IX).unwrap(), expected[2..], "{}", column.data_type());
        }
        // Without null items: a negative one is found in the converted items' row alone.
        let rows = vec![Some(vec![Some(5i32), Some(6)]), Some(vec![Some(7), Some(-8)]), Some(vec![Some(9)])];
        let expected = vec![
            Ok(Game::StoneGameIx(vec![5, 6])),
            Err(ProblemError::NegativeValue { game: GameKind::StoneGameIx, value: -8, index: Some(1) }),
            Ok(Game::StoneGameIx(vec![9])),
        ];
        let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(rows));
        assert_eq!(read(vec![("stones", list.clone())], IX).unwrap(), expected);
        for (start, len) in [(0, 1), (1, 2), (2, 1), (3, 0)] {
            let sliced = list.slice(start, len);
            let read = read(vec![("stones", sliced)], IX).unwrap();
            assert_eq!(read, expected[start..start + len], "rows {start}..{}", start + len);
        }
        let mut piles = ListBuilder::new(UInt64Builder::new());
        piles.append_value([Some(u64::MAX), Some(0)]);
        let piles: ArrayRef = Arc::new(piles.finish());
        let games = Games::One(GameKind::NimSquare);
        assert_eq!(
            read(vec![("piles", piles)], games).unwrap(),
            vec![Ok(Game::NimSquare(vec![u64::MAX, 0]))]
        );
    }

    #[test]
    fn a_mixed_row_is_the_game_that_is_set_and_a_nan_is_no_game_as_a_null_is() {
        let num: ArrayRef = Arc::new(StringArray::from(vec![Some("11"), None, None, Some("?")]));
        let n: ArrayRef = Arc::new(UInt64Array::from(vec![None, Some(5), None, Some(4)]));
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN, 5.0, f64::NAN, 4.0]));
        for n in [n, floats] {
            let problems =
                read(vec![("id", num.clone()), ("num", num.clone()), ("n", n)], Games::Mixed).unwrap();
            assert_eq!(
                problems,
                vec![
                    Ok(Game::SumGame("11".into())),
                    Ok(Game::StoneGameIv(5)),
                    Err(ProblemError::MissingGame),
                    Err(ProblemError::SeveralGames { games: vec![GameKind::SumGame, GameKind::StoneGameIv] }),
                ]
            );
        }
    }

    #[test]
    fn a_batch_without_its_column_or_of_a_wrong_type_is_refused_whole() {
        let text: ArrayRef = Arc::new(StringArray::from(vec!["5"]));
        let message = |columns, games| read(columns, games).unwrap_err().to_string();
        let dates: ArrayRef = Arc::new(arrow_array::Date32Array::from(vec![5]));
        assert_eq!(
            message(vec![("n", dates)], IV),
            "column \"n\" is Date32; expected whole numbers: an integer type (uint64), or a float, decimal or \
             string type holding them; cast it first: in pandas df[\"n\"] = df[\"n\"].astype(\"UInt64\"); in \
             Polars df = df.with_columns(pl.col(\"n\").cast(pl.UInt64)); in Spark df = df.withColumn(\"n\", \
             F.col(\"n\").cast(\"decimal(20,0)\"))"
        );
        assert_eq!(
            message(vec![("num", text.clone())], IV),
            r#"no column "n": a stone_game_iv batch holds its problems there"#
        );
        assert_eq!(
            message(vec![("id", text.clone())], Games::Mixed),
            "no game column: a mixed batch needs at least one of num, stones, n, piles"
        );
        assert_eq!(
            message(vec![("stones", text.clone())], Games::Mixed),
            "column \"stones\" is Utf8; expected a list of whole numbers (list, large_list or fixed_size_list of \
             uint64, or of a float, decimal or string type holding them); cast it first: in pandas \
             df[\"stones\"] = df[\"stones\"].map(lambda v: None if v is None else [int(x) for x in v]); in \
             Polars df = df.with_columns(pl.col(\"stones\").cast(pl.List(pl.UInt64))); in Spark df = \
             df.withColumn(\"stones\", F.col(\"stones\").cast(\"array<decimal(20,0)>\"))"
        );
        let n: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
        assert_eq!(message(vec![("n", n.clone()), ("n", n)], IV), r#"column "n" appears 2 times; keep one"#);
        let numbers: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
        assert!(message(vec![("num", numbers)], Games::Mixed).starts_with(
            "column \"num\" is UInt64; expected a string type (utf8, large_utf8, utf8_view, or a dictionary of \
             them); cast it first: in pandas df[\"num\"] = df[\"num\"].astype(\"string\")"
        ));
    }

    /// What [`super::super::accepts`] says of a type is what the reader does with it.
    #[test]
    fn the_type_test_and_the_reader_agree_on_every_type() {
        let item = |ty: DataType| Arc::new(Field::new_list_field(ty, true));
        let scalars = [
            DataType::Int8,
            DataType::UInt64,
            DataType::Float16,
            DataType::Float32,
            DataType::Float64,
            DataType::Decimal32(9, 0),
            DataType::Decimal64(18, 2),
            DataType::Decimal128(20, 0),
            DataType::Decimal256(76, -2),
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Utf8View,
            DataType::Boolean,
            DataType::Date32,
            DataType::Timestamp(arrow_schema::TimeUnit::Second, None),
            DataType::Binary,
            DataType::Null,
            DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)),
            DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Int64)),
        ];
        let mut types = scalars.to_vec();
        for scalar in &scalars {
            types.push(DataType::List(item(scalar.clone())));
            types.push(DataType::LargeList(item(scalar.clone())));
            types.push(DataType::FixedSizeList(item(scalar.clone()), 2));
        }
        for kind in GameKind::ALL {
            for ty in &types {
                let column = arrow_array::new_empty_array(ty);
                let batch = batch(vec![(kind.input(), column)]);
                let read = Input::find(&batch, kind).is_ok();
                assert_eq!(super::super::accepts(kind, ty), read, "{} as {ty}", kind.input());
            }
        }
    }

    #[test]
    fn floats_decimals_and_text_are_counts_when_whole_and_nan_is_no_value() {
        let iv = |value: u64| Ok(Game::StoneGameIv(value));
        let not = |value: &str| {
            Err(ProblemError::NotUint64 { game: GameKind::StoneGameIv, value: value.into(), index: None })
        };
        let null = Err(ProblemError::NullInput { game: GameKind::StoneGameIv, index: None });
        let floats: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(7.0),
            None,
            Some(f64::NAN),
            Some(7.5),
            Some(-3.0),
            Some(f64::INFINITY),
            Some(1e20),
            Some(9_007_199_254_740_994.0),
        ]));
        let expected = vec![
            iv(7),
            null.clone(),
            null.clone(),
            not("7.5"),
            Err(ProblemError::NegativeValue { game: GameKind::StoneGameIv, value: -3, index: None }),
            not("inf"),
            not("1e20"),
            iv(9_007_199_254_740_994),
        ];
        assert_eq!(read(vec![("n", floats.clone())], IV).unwrap(), expected);
        assert_eq!(read(vec![("n", floats.slice(3, 3))], IV).unwrap(), expected[3..6]);
        let decimals: ArrayRef = Arc::new(
            Decimal128Array::from(vec![
                Some(18_446_744_073_709_551_615),
                None,
                Some(18_446_744_073_709_551_616),
            ])
            .with_precision_and_scale(20, 0)
            .unwrap(),
        );
        assert_eq!(
            read(vec![("n", decimals)], IV).unwrap(),
            [iv(u64::MAX), null.clone(), not("18446744073709551616")]
        );
        let texts: ArrayRef = Arc::new(StringArray::from(vec![Some("1e3"), Some("nan"), Some("x")]));
        assert_eq!(read(vec![("n", texts)], IV).unwrap(), [iv(1000), null, not("\"x\"")]);
    }

    #[test]
    fn list_items_of_floats_and_decimals_are_read_by_the_same_rule() {
        let rows = vec![
            Some(vec![Some(1.0), Some(2.0)]),
            Some(vec![Some(3.0), Some(f64::NAN)]),
            Some(vec![Some(4.0), Some(0.5), None]),
            None,
            Some(vec![Some(-2.0)]),
            Some(vec![]),
        ];
        let game = GameKind::StoneGameIx;
        let expected = vec![
            Ok(Game::StoneGameIx(vec![1, 2])),
            Err(ProblemError::NullInput { game, index: Some(1) }),
            Err(ProblemError::NotUint64 { game, value: "0.5".into(), index: Some(1) }),
            Err(ProblemError::NullInput { game, index: None }),
            Err(ProblemError::NegativeValue { game, value: -2, index: Some(0) }),
            Ok(Game::StoneGameIx(vec![])),
        ];
        let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(rows.clone()));
        assert_eq!(read(vec![("stones", list.clone())], IX).unwrap(), expected);
        for (start, len) in [(0, 2), (1, 3), (2, 4), (5, 1)] {
            let sliced = list.slice(start, len);
            assert_eq!(read(vec![("stones", sliced)], IX).unwrap(), expected[start..start + len]);
        }
        let large: ArrayRef =
            Arc::new(LargeListArray::from_iter_primitive::<Float32Type, _, _>(vec![Some(vec![
                Some(5.0f32),
                Some(6.0),
            ])]));
        assert_eq!(read(vec![("stones", large)], IX).unwrap(), vec![Ok(Game::StoneGameIx(vec![5, 6]))]);
        let items = Decimal128Array::from(vec![18_446_744_073_709_551_615, 3])
            .with_precision_and_scale(20, 0)
            .unwrap();
        let item = Arc::new(Field::new_list_field(items.data_type().clone(), true));
        let piles: ArrayRef = Arc::new(ListArray::new(
            item,
            arrow_buffer::OffsetBuffer::from_lengths([2]),
            Arc::new(items),
            None,
        ));
        assert_eq!(
            read(vec![("piles", piles)], Games::One(GameKind::NimSquare)).unwrap(),
            vec![Ok(Game::NimSquare(vec![u64::MAX, 3]))]
        );
    }

    /// A float, as writers hold numbers: whole or not, in range or not, NaN, or null.
    fn writers_float() -> impl proptest::strategy::Strategy<Value = Option<f64>> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..1 << 20).prop_map(|v| Some(v as f64)),
            any::<u64>().prop_map(|v| Some(v as f64)),
            any::<f64>().prop_map(Some),
            Just(Some(f64::NAN)),
            Just(Some(-2.0)),
            Just(Some(0.5)),
            Just(None),
        ]
    }

    /// One value's problem, read on its own: the reference the batch's conversion is
    /// held to.
    fn one_float(value: Option<f64>, index: Option<u64>) -> Result<u64, ProblemError> {
        let game = if index.is_some() { GameKind::StoneGameIx } else { GameKind::StoneGameIv };
        match value.map(crate::columnar::float_count) {
            None | Some(Ok(None)) => Err(ProblemError::NullInput { game, index }),
            Some(Ok(Some(count))) => Ok(count),
            Some(Err(crate::columnar::NotACount::Negative(value))) => {
                Err(ProblemError::NegativeValue { game, value, index })
            }
            Some(Err(crate::columnar::NotACount::NotUint64)) => {
                Err(ProblemError::NotUint64 { game, value: format!("{:?}", value.unwrap()), index })
            }
        }
    }

    proptest::proptest! {
        /// A float column, whole or sliced, reads as each value read on its own; so does a
        /// list column of floats, each row's first gap its error.
        #[test]
        fn a_float_column_reads_as_its_values_one_by_one(
            values in proptest::collection::vec(writers_float(), 0..40),
            lists in proptest::collection::vec(proptest::option::of(proptest::collection::vec(writers_float(), 0..4)), 0..12),
            cut in 0usize..40,
        ) {
            let n: ArrayRef = Arc::new(Float64Array::from(values.clone()));
            let cut = cut.min(values.len());
            let expected: Vec<_> = values.iter().map(|&value| one_float(value, None).map(Game::StoneGameIv)).collect();
            proptest::prop_assert_eq!(read(vec![("n", n.clone())], IV).unwrap(), expected.clone());
            proptest::prop_assert_eq!(read(vec![("n", n.slice(cut, values.len() - cut))], IV).unwrap(), expected[cut..].to_vec());

            let stones: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(lists.clone()));
            let expected: Vec<_> = lists.iter().map(|row| match row {
                None => Err(ProblemError::NullInput { game: GameKind::StoneGameIx, index: None }),
                Some(items) => items
                    .iter()
                    .enumerate()
                    .map(|(index, &item)| one_float(item, Some(index as u64)))
                    .collect::<Result<Vec<u64>, _>>()
                    .map(Game::StoneGameIx),
            }).collect();
            let cut = cut.min(lists.len());
            proptest::prop_assert_eq!(read(vec![("stones", stones.clone())], IX).unwrap(), expected.clone());
            proptest::prop_assert_eq!(read(vec![("stones", stones.slice(cut, lists.len() - cut))], IX).unwrap(), expected[cut..].to_vec());
        }
    }

    #[test]
    fn the_id_column_is_found_whatever_its_type() {
        let ids: ArrayRef = Arc::new(Int64Array::from(vec![9]));
        let n: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
        let with = batch(vec![("n", n.clone()), ("id", ids.clone())]);
        let (field, array) = id_column(&with).unwrap().unwrap();
        assert_eq!((field.as_ref(), &array), (&Field::new("id", DataType::Int64, false), &ids));
        assert!(id_column(&batch(vec![("n", n)])).unwrap().is_none());
    }
}

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
use crate::games::{GameKind, GameRef, MakeGameRef};
use crate::problem::{Problem, ProblemError, ProblemRef};

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
            Column::Strings(strings @ Strings { keys: Some(_), .. }, _) => {
                for (row, byte) in present.iter_mut().enumerate() {
                    *byte |= u8::from(strings.get(row).is_some()) << i;
                }
                continue;
            }
            Column::Strings(Strings { keys: None, values }, _) => values.nulls(),
            Column::Integers(integers, _) => integers.nulls,
            Column::Numbers(numbers, _) => numbers.nulls(),
            Column::Lists(lists, _) => lists.nulls,
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

/// An input column by its shape ([`InputShape`]), with its game's constructor for an
/// input of that shape ([`GameKind::make_ref`]): found by the game's shape, it makes the
/// game without a shape left to mismatch.
enum Column<'a> {
    /// A text input (Sum Game's `num`).
    Strings(Strings<'a>, for<'b> fn(&'b str) -> GameRef<'b>),
    /// An integer input (Stone Game IV's `n`).
    Integers(Integers<'a>, fn(u64) -> GameRef<'static>),
    /// An integer input held as floats, decimals or text, read once for the batch.
    Numbers(Converted, fn(u64) -> GameRef<'static>),
    /// A list of integers (Stone Game IX's `stones`, Nim Square's `piles`).
    Lists(Lists<'a>, for<'b> fn(&'b [u64]) -> GameRef<'b>),
}

impl<'a> Input<'a> {
    /// The input column of `game` in `batch`, if there is one.
    fn find(batch: &'a RecordBatch, game: GameKind) -> Result<Option<Input<'a>>, ColumnError> {
        let Some(index) = column(batch, game.input())? else { return Ok(None) };
        let array = batch.column(index).as_ref();
        let column = match game.make_ref() {
            MakeGameRef::Text(make) => Strings::of(array).map(|strings| Column::Strings(strings, make)),
            MakeGameRef::Integer(make) => {
                Integers::of(array).map(|integers| Column::Integers(integers, make)).or_else(|| {
                    Converted::of(array, 0..array.len()).map(|numbers| Column::Numbers(numbers, make))
                })
            }
            MakeGameRef::Integers(make) => Lists::of(array).map(|lists| Column::Lists(lists, make)),
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
        let game_ref = match self.column {
            Column::Strings(ref strings, make) => strings.get(row).map(make).ok_or_else(null)?,
            Column::Integers(ref integers, make) => match integers.is_null(row) {
                true => return Err(null()),
                false => integers
                    .values
                    .get(row)
                    .map(|n| make(n).shorten())
                    .map_err(|value| ProblemError::NegativeValue { game, value, index: None })?,
            },
            Column::Numbers(ref numbers, make) => match numbers.is_null(row) {
                true => return Err(null()),
                false => {
                    numbers.get(row).map(|n| make(n).shorten()).map_err(|fault| fault.error(game, None))?
                }
            },
            Column::Lists(ref lists, make) => {
                if lists.nulls.is_some_and(|nulls| nulls.is_null(row)) {
                    return Err(null());
                }
                make(lists.values(game, row)?)
            }
        };
        Ok(game_ref)
    }
}

/// A string column: utf8, large_utf8, utf8_view, or a dictionary of one of them.
pub(super) struct Strings<'a> {
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
    /// `array` read as strings; `None` for another type.
    pub(super) fn of(array: &'a dyn Array) -> Option<Self> {
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
    #[inline]
    pub(super) fn get(&self, row: usize) -> Option<&'a str> {
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
pub(super) enum Offsets<'a> {
    List(&'a [i32]),
    LargeList(&'a [i64]),
    FixedSizeList(usize),
}

impl<'a> Offsets<'a> {
    /// Where `array`'s lists lie in its items, and the items; `None` for an array of no
    /// list type (list, large_list or fixed_size_list).
    pub(super) fn of(array: &'a dyn Array) -> Option<(Self, &'a ArrayRef)> {
        Some(match array.data_type() {
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
        })
    }

    /// Where the list in `row` starts in the items; `row` = the array's length gives
    /// where the last ends.
    #[inline]
    pub(super) fn start(&self, row: usize) -> usize {
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
        let (offsets, values) = Offsets::of(array)?;
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
pub(super) mod tests;

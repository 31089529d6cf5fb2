//! Sum Game a column at a time: the string column's bytes scanned in one pass, each row's
//! slice of them tallied (the halves' digit sums and `?` counts) where it lies, and its
//! answer or error written straight into the answer columns. A dictionary's strings are
//! each solved once and gathered by key. A null is left to the row path.

use arrow_array::cast::AsArray;
use arrow_array::{Array, LargeStringArray, StringArray, StringViewArray};
use arrow_schema::DataType;

use super::answers::Answers;
use super::counts::Counts;
use crate::convert::ProblemError;
use crate::games::{sum_game, Outcome, SolveError};

/// A batch's strings, by their type.
pub(super) enum Kernel<'a> {
    Utf8(&'a StringArray, bool),
    LargeUtf8(&'a LargeStringArray, bool),
    Utf8View(&'a StringViewArray, bool),
    /// A dictionary: each of its strings' answer, and the rows' keys.
    Dictionary(Vec<Option<Result<Outcome, SolveError>>>, Counts),
}

impl<'a> Kernel<'a> {
    /// The kernel of `array`'s strings; `None` for another type.
    pub(super) fn of(array: &'a dyn Array, winner_only: bool) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Utf8 => Kernel::Utf8(array.as_string(), winner_only),
            DataType::LargeUtf8 => Kernel::LargeUtf8(array.as_string(), winner_only),
            DataType::Utf8View => Kernel::Utf8View(array.as_string_view(), winner_only),
            DataType::Dictionary(..) => {
                let dictionary = array.as_any_dictionary_opt()?;
                // A null string is a null row, which the row path names.
                let answer = |num: Option<&str>| num.map(|num| solve(num, winner_only));
                let values = dictionary.values();
                let answers = match values.data_type() {
                    DataType::Utf8 => values.as_string::<i32>().iter().map(answer).collect(),
                    DataType::LargeUtf8 => values.as_string::<i64>().iter().map(answer).collect(),
                    DataType::Utf8View => values.as_string_view().iter().map(answer).collect(),
                    _ => return None,
                };
                let keys = Counts::of(dictionary.keys())?;
                Kernel::Dictionary(answers, keys)
            }
            _ => return None,
        })
    }

    /// Answers `rows`, appending to `answers`; the positions left to the row path are
    /// appended to `fallback`.
    pub(super) fn answer(
        &self,
        rows: impl Iterator<Item = usize>,
        answers: &mut Answers,
        fallback: &mut Vec<usize>,
    ) {
        let mut write = |answer: Option<Result<Outcome, ProblemError>>| {
            if answer.is_none() {
                fallback.push(answers.len());
            }
            answers.push(answer);
        };
        match self {
            Kernel::Utf8(array, winner_only) => rows
                .for_each(|row| write(array.is_valid(row).then(|| answer(array.value(row), *winner_only)))),
            Kernel::LargeUtf8(array, winner_only) => rows
                .for_each(|row| write(array.is_valid(row).then(|| answer(array.value(row), *winner_only)))),
            Kernel::Utf8View(array, winner_only) => rows
                .for_each(|row| write(array.is_valid(row).then(|| answer(array.value(row), *winner_only)))),
            Kernel::Dictionary(solved, keys) => rows.for_each(|row| {
                let solved = keys.get(row).and_then(|key| solved.get(usize::try_from(key).ok()?)?.as_ref());
                write(solved.map(|solved| solved.clone().map_err(ProblemError::from)))
            }),
        }
    }
}

/// The answer of one string, as the row path gives it.
#[inline]
fn answer(num: &str, winner_only: bool) -> Result<Outcome, ProblemError> {
    solve(num, winner_only).map_err(ProblemError::from)
}

#[inline]
fn solve(num: &str, winner_only: bool) -> Result<Outcome, SolveError> {
    let outcome = sum_game::solve(num)?;
    Ok(if winner_only { outcome.without_move() } else { outcome })
}

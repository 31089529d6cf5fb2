//! The kernel every game has: its input column read once by its shape (strings where they
//! lie, as the row path reads them; counts and lists of counts as [`Counts`] and [`Lists`]
//! read them), and its solver called on each row's input as it lies there, with no
//! problem or solution built a row.
//! A gap (a null, a list with one), or a problem its table must grow for first, is left
//! to the row path, which names the error or grows the table.

use arrow_array::Array;

use super::super::input::Strings;
use super::answers::Answers;
use super::counts::{Counts, Lists};
use crate::games::{GameRef, MakeGameRef, Outcome, SolveError, Tables};
use crate::problem::ProblemError;

/// A game's input column, read by its shape, and how a row's input makes the game.
enum Column<'a> {
    Text(Strings<'a>, for<'b> fn(&'b str) -> GameRef<'b>),
    Integer(Counts, fn(u64) -> GameRef<'static>),
    Integers(Lists<'a>, for<'b> fn(&'b [u64]) -> GameRef<'b>),
}

/// A batch's input column of one game, and the tables it is answered from.
pub(super) struct Kernel<'a> {
    column: Column<'a>,
    tables: &'a Tables,
    winner_only: bool,
}

impl<'a> Kernel<'a> {
    /// The kernel of the game `make` makes over `array`; `None` when the column is of no
    /// type its shape reads (the row path then answers every row).
    pub(super) fn of(
        array: &'a dyn Array,
        make: MakeGameRef,
        tables: &'a Tables,
        winner_only: bool,
    ) -> Option<Self> {
        let column = match make {
            MakeGameRef::Text(make) => Column::Text(Strings::of(array)?, make),
            MakeGameRef::Integer(make) => Column::Integer(Counts::of(array)?, make),
            MakeGameRef::Integers(make) => Column::Integers(Lists::of(array)?, make),
        };
        Some(Kernel { column, tables, winner_only })
    }

    /// The game in `row`, when its input is there whole.
    #[inline]
    fn game(&self, row: usize) -> Option<GameRef<'_>> {
        match &self.column {
            Column::Text(texts, make) => texts.get(row).map(*make),
            Column::Integer(counts, make) => counts.get(row).map(|n| make(n).shorten()),
            Column::Integers(lists, make) => lists.get(row).map(*make),
        }
    }

    /// The game's answer, as the row path gives it; `None` when its table must grow first.
    #[inline]
    fn answer(&self, game: GameRef<'_>) -> Option<Result<Outcome, SolveError>> {
        if game.needs_extension(self.tables).is_some() {
            return None;
        }
        Some(match self.winner_only {
            true => game.winner(self.tables),
            false => game.solve(self.tables),
        })
    }

    /// Answers `rows`, appending to `answers`; the positions left to the row path are
    /// appended to `fallback`.
    pub(super) fn answer_rows(
        &self,
        rows: impl Iterator<Item = usize>,
        answers: &mut Answers,
        fallback: &mut Vec<usize>,
    ) {
        for row in rows {
            match self.game(row).and_then(|game| self.answer(game)) {
                Some(answer) => answers.push(Some(answer.map_err(ProblemError::from))),
                None => {
                    fallback.push(answers.len());
                    answers.push(None);
                }
            }
        }
    }
}

//! Nim Square a column at a time: under one read of the table, each list's Grundy values
//! gathered and XORed, and Alice's move searched for where she wins, written straight
//! into the answer columns. A list with a gap, or a pile the table does not cover yet (it
//! grows on the row path) or beyond its limit, is left to the row path.

use super::answers::Answers;
use super::counts::Lists;
use crate::games::nim_square;
use crate::games::Outcome;

/// A batch's positions and the table they are answered from.
pub(super) struct Kernel<'a> {
    pub(super) piles: Lists<'a>,
    /// [`crate::games::nim_square::GrundyTable::values`].
    pub(super) values: &'a [u16],
    pub(super) winner_only: bool,
}

impl Kernel<'_> {
    /// Answers `rows`, appending to `answers`; the positions left to the row path are
    /// appended to `fallback`.
    pub(super) fn answer(
        &self,
        rows: impl Iterator<Item = usize>,
        answers: &mut Answers,
        fallback: &mut Vec<usize>,
    ) {
        let covered = self.values.len() as u64;
        for row in rows {
            match self.piles.get(row).filter(|piles| piles.iter().all(|&n| n < covered)) {
                Some(piles) => {
                    let outcome = nim_square::outcome(self.values, piles, self.winner_only);
                    answers.push(Some(Ok(Outcome::from(outcome))));
                }
                None => {
                    fallback.push(answers.len());
                    answers.push(None);
                }
            }
        }
    }
}

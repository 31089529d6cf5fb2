//! Stone Game IX a column at a time: each list's residues counted in one pass over the
//! list column's values, where they lie when they are `uint64`, and its answer written
//! straight into the answer columns. A list with a gap is left to the row path.

use super::answers::Answers;
use super::counts::Lists;
use crate::games::stone_game_ix;

/// A batch's stones.
pub(super) struct Kernel<'a> {
    pub(super) stones: Lists<'a>,
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
        for row in rows {
            match self.stones.get(row) {
                Some(stones) => {
                    let outcome = stone_game_ix::solve(stones);
                    let outcome = if self.winner_only { outcome.without_move() } else { outcome };
                    answers.push(Some(Ok(outcome)));
                }
                None => {
                    fallback.push(answers.len());
                    answers.push(None);
                }
            }
        }
    }
}

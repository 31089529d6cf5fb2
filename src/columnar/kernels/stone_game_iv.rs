//! Stone Game IV a column at a time: each pile's winner and move gathered from the table
//! of small piles' moves (Alice's smallest winning k, 0 where Bob wins), 64 rows a word,
//! straight into `alice_wins`, its validity and `move_take`. A gap, or a pile the table
//! does not reach (beyond it, the list of P-positions is searched), is left to the row
//! path.

use super::super::AnswerColumn;
use super::answers::Answers;
use super::counts::Counts;
use crate::games::MoveField;

/// A batch's piles and the table they are answered from.
pub(super) struct Kernel<'a> {
    pub(super) piles: Counts,
    /// [`crate::games::StoneGameIvTable::small_moves`].
    pub(super) moves: &'a [u16],
    pub(super) winner_only: bool,
}

impl Kernel<'_> {
    /// Answers `rows`, appending to `answers`; the positions left to the row path are
    /// appended to `fallback`.
    pub(super) fn answer(
        &self,
        mut rows: impl Iterator<Item = usize>,
        answers: &mut Answers,
        fallback: &mut Vec<usize>,
    ) {
        let (mut takes, mut roots) = ([0u64; 64], [0u16; 64]);
        loop {
            let at = answers.len();
            let (mut alice, mut solved, mut count) = (0u64, 0u64, 0);
            for (i, row) in rows.by_ref().take(64).enumerate() {
                let root = match self.piles.get(row).and_then(|n| self.moves.get(usize::try_from(n).ok()?)) {
                    Some(&root) => {
                        solved |= 1 << i;
                        root
                    }
                    None => {
                        fallback.push(at + i);
                        0
                    }
                };
                roots[i] = root;
                alice |= u64::from(root != 0) << i;
                count = i + 1;
            }
            if count == 0 {
                return;
            }
            answers.push_word(alice, solved, count);
            if let Some(take) = answers.u64s(AnswerColumn::Move(MoveField::TAKE)) {
                // Under a null, 0, as the row path writes it; no move at all for winner_only.
                let (moves, valid) = match self.winner_only {
                    true => (0, 0),
                    false => (u64::MAX, alice),
                };
                for (take, &root) in takes.iter_mut().zip(&roots[..count]) {
                    *take = (u64::from(root) * u64::from(root)) & moves;
                }
                take.push_word(&takes[..count], valid);
            }
            if count < 64 {
                return;
            }
        }
    }
}

//! Nim Square: several Stone Game IV piles; a move takes a non-zero square number of
//! stones from one pile, and the player who cannot move loses.
//!
//! A position is a sum of one-pile games, so by Sprague–Grundy it is lost for the player
//! to move exactly when the XOR of its piles' Grundy values is 0, where a pile's value
//! g(n) is the smallest value missing among g(n − k²), k² ≤ n. The values are what costs:
//! every pile's value needs every smaller pile's, ⅔·n^1.5 (pile, move) pairs in all, so
//! they are computed once, for every pile up to the largest asked, into a table shared by
//! every call, grown on demand by the segmented [`sieve`] and saved and restored whole.
//! A problem is then table reads: an XOR for the winner, and for Alice's move a walk over
//! the first pile's squares that reaches the value making the XOR 0.
//!
//! The table's concurrency is the Stone Game IV table's: one thread extends it at a time
//! and publishes each finished segment, so a call inside the known range never waits,
//! and one waiting for a pile the running extension will reach wakes once it is covered.

#[doc(hidden)]
pub mod baseline;
mod file;
mod game;
pub mod sieve;

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use self::sieve::{plain_mex, Sieve, SEGMENT};
use super::grower::Grower;
use super::{GameKind, Player, SolveError};

pub use self::file::GrundyTableFile;
pub use self::game::NimSquare;
pub use self::sieve::grundy_values_below;

/// The default largest pile answered.
pub const DEFAULT_LIMIT: u64 = 10_000_000;

/// The largest limit a table takes: below 2^32 a pile has at most 65,535 moves, so its
/// value (at most the number of its moves) fits a `u16`.
pub const MAX_LIMIT: u64 = u32::MAX as u64;

/// An extension grows the table by at least this fraction of what it covers (then rounds
/// up to whole segments), so that piles asked in increasing order cost a logarithmic
/// number of extensions, each no more than a fraction of the work already done.
const GROWTH_DIVISOR: u64 = 8;

/// Alice's winning first move: take `take` stones from pile number `pile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NimSquareMove {
    /// The index of the pile in the problem, from 0.
    pub pile: u64,
    /// The square number of stones to take from it.
    pub take: u64,
}

/// The result of optimal play in a Nim Square position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NimSquareOutcome {
    /// Who wins: Bob exactly when `nim_value` is 0.
    pub winner: Player,
    /// The XOR of the piles' Grundy values: the position's value as a sum of games.
    pub nim_value: u32,
    /// When Alice wins and a move was asked for: the first pile with a winning move, and
    /// the smallest winning square on it.
    pub winning_move: Option<NimSquareMove>,
}

/// A saved table of Grundy values fails a check before being trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidGrundyTable {
    /// The table claims to cover piles beyond [`MAX_LIMIT`].
    #[error("covered range {covered} exceeds 2^32")]
    TooLarge {
        /// The claimed end of the covered range.
        covered: u64,
    },
    /// Not one value a covered pile.
    #[error("{len} values for a covered range of {covered}")]
    WrongLength {
        /// The claimed end of the covered range.
        covered: u64,
        /// The number of values given.
        len: u64,
    },
    /// A value larger than the pile's number of moves, which no pile can have.
    #[error("pile {pile} has value {value}, more than its number of moves")]
    Implausible {
        /// The pile.
        pile: u64,
        /// Its value in the table.
        value: u16,
    },
    /// A checked pile's value is not the smallest value missing among its moves'.
    #[error("pile {pile} has value {value}, not the smallest missing among its moves'")]
    Wrong {
        /// The pile.
        pile: u64,
        /// Its value in the table.
        value: u16,
    },
}

/// Piles below this are all checked by [`check_grundy_values`]: a few milliseconds.
const CHECK_PREFIX: u64 = 1 << 14;

/// Piles above the prefix checked by [`check_grundy_values`], spread over the range:
/// √n reads each, 10^7 at 10^8.
const CHECK_SAMPLES: u64 = 1024;

/// Checks that `values` can be the Grundy values of the piles below `covered`.
///
/// Verified: the length; that no value exceeds its pile's number of moves, ⌊√n⌋ (every
/// pile); that every pile below 2^14 is the mex of its moves' values in the table (which,
/// from g(0) = 0 up, makes that prefix exactly right); and the same for 1,024 piles spread
/// over the rest by a fixed formula. Not verified: the piles between the samples, so an
/// isolated wrong value elsewhere passes; a truncated, shifted, byte-swapped or foreign
/// table does not (nearly every sample would disagree), and the file layer's checksum
/// covers damage in storage.
pub fn check_grundy_values(covered: u64, values: &[u16]) -> Result<(), InvalidGrundyTable> {
    if covered > 1 << 32 {
        return Err(InvalidGrundyTable::TooLarge { covered });
    }
    if values.len() as u64 != covered {
        return Err(InvalidGrundyTable::WrongLength { covered, len: values.len() as u64 });
    }
    let mut root = 0u64;
    for (pile, &value) in (0u64..).zip(values) {
        while (root + 1) * (root + 1) <= pile {
            root += 1;
        }
        if u64::from(value) > root {
            return Err(InvalidGrundyTable::Implausible { pile, value });
        }
    }
    let prefix = covered.min(CHECK_PREFIX);
    let spread = covered - prefix;
    let count = CHECK_SAMPLES.min(spread);
    let samples = (0..count).map(|i| {
        // One pile in each of `count` equal slices, at an offset that varies from slice
        // to slice (a multiplicative hash), so that no stride of the table escapes them.
        prefix + i * spread / count + (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % (spread / count)
    });
    for pile in (0..prefix).chain(samples) {
        let value = values[pile as usize];
        if plain_mex(values, &[], pile as usize) != value {
            return Err(InvalidGrundyTable::Wrong { pile, value });
        }
    }
    Ok(())
}

/// A shared, growing table of the Grundy values of every pile below `covered`.
#[derive(Debug)]
pub struct GrundyTable {
    limit: u64,
    /// g(n) for every n below `covered`. Readers hold the lock for their problem's reads;
    /// the extender holds a read lock while computing a segment and the write lock only
    /// to append it.
    values: RwLock<Vec<u16>>,
    /// Every pile below this has its value; stored under `values`' write lock, after the
    /// append.
    covered: AtomicU64,
    /// Who extends the table; waiters sleep on it.
    grower: Grower,
    /// The computation's buffers, kept between extensions; only the extender locks it.
    sieve: Mutex<Sieve>,
}

impl GrundyTable {
    /// An empty table answering piles up to `limit` (at most [`MAX_LIMIT`]).
    pub fn new(limit: u64) -> Self {
        GrundyTable {
            limit: limit.min(MAX_LIMIT),
            values: RwLock::new(Vec::new()),
            covered: AtomicU64::new(0),
            grower: Grower::default(),
            sieve: Mutex::new(Sieve::new()),
        }
    }

    /// The largest pile this table answers.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Every pile below this already has its value.
    pub fn covered(&self) -> u64 {
        self.covered.load(Ordering::Acquire)
    }

    /// True when answering a pile of `n` first needs the table to grow (a slow, blocking
    /// call).
    pub fn needs_extension(&self, n: u64) -> bool {
        n <= self.limit && n >= self.covered()
    }

    /// Grows the table to cover `n`, and by at least an eighth of what it covers; blocks.
    /// One thread extends at a time; others wait for it and wake as soon as their `n` is
    /// covered. A caller whose `n` lies beyond the running extension's target waits for
    /// it to end and then extends further itself.
    pub fn extend_to(&self, n: u64) -> Result<(), SolveError> {
        self.check_limit(n)?;
        self.grower.grow_to(n, || self.covered(), |n| self.run_extension(n));
        Ok(())
    }

    /// Computes whole segments until `n` and the growth target are covered (never beyond
    /// the limit), publishing each one. The caller holds the extension role.
    fn run_extension(&self, n: u64) {
        let mut sieve = self.sieve.lock();
        let covered = self.covered();
        let end = (n + 1).max(covered + covered / GROWTH_DIVISOR).min(self.limit + 1);
        self.values.write().reserve_exact((end - covered) as usize);
        let mut found = Vec::new();
        while self.covered() < end {
            let lo = self.covered();
            let hi = (lo + SEGMENT).min(self.limit + 1);
            sieve.compute(&self.values.read(), hi, &mut found);
            let mut values = self.values.write();
            values.extend_from_slice(&found);
            // Under the lock, so that a snapshot never sees values beyond `covered`.
            self.covered.store(hi, Ordering::Release);
            drop(values);
            self.grower.published();
        }
    }

    /// The Grundy value of a pile of `n`, growing the table first if needed (blocking).
    pub fn value(&self, n: u64) -> Result<u16, SolveError> {
        self.extend_to(n)?;
        Ok(self.values.read()[n as usize])
    }

    /// Solves the position `piles` (Alice to move), growing the table first if needed
    /// (blocking). With `winner_only`, no move is searched for.
    ///
    /// Alice's move is on the first pile that has one, the smallest winning square there.
    /// A pile whose value has the XOR's highest bit always has one (every smaller value
    /// is one move away); a pile before it may too, through a larger value, and is
    /// searched over all its squares, ⌊√n⌋ reads: up to a few µs a pile at 10^7.
    pub fn solve(&self, piles: &[u64], winner_only: bool) -> Result<NimSquareOutcome, SolveError> {
        if let Some(&n) = piles.iter().find(|&&n| n > self.limit) {
            return Err(SolveError::OutOfRange { game: GameKind::NimSquare, n, limit: self.limit });
        }
        self.extend_to(piles.iter().copied().max().unwrap_or(0))?;
        Ok(outcome(&self.values.read(), piles, winner_only))
    }

    /// The values of every pile covered so far, read-locked while held: a column kernel
    /// answers a whole batch's positions under one lock ([`outcome`]).
    pub fn values(&self) -> impl std::ops::Deref<Target = Vec<u16>> + '_ {
        self.values.read()
    }

    /// The covered range and a copy of the values below it, for saving.
    pub fn snapshot(&self) -> (u64, Vec<u16>) {
        let values = self.values.read();
        // Read under the lock: `covered` moves only under the write lock.
        (self.covered(), values.clone())
    }

    /// Replaces the table's contents by `values`, the Grundy values of the piles below
    /// `covered` (e.g. loaded from disk), after [`check_grundy_values`]. Keeps the
    /// current contents when they already cover more; values beyond the limit are
    /// dropped. Waits for a running extension to end.
    pub fn restore(&self, covered: u64, mut values: Vec<u16>) -> Result<(), InvalidGrundyTable> {
        check_grundy_values(covered, &values)?;
        let covered = covered.min(self.limit + 1);
        values.truncate(covered as usize);
        self.grower.between_extensions(|| {
            if covered > self.covered() {
                // The sieve's largest value must come from the new values, not the old.
                self.sieve.lock().forget();
                let mut current = self.values.write();
                *current = values;
                self.covered.store(covered, Ordering::Release);
            }
        });
        Ok(())
    }

    fn check_limit(&self, n: u64) -> Result<(), SolveError> {
        if n > self.limit {
            return Err(SolveError::OutOfRange { game: GameKind::NimSquare, n, limit: self.limit });
        }
        Ok(())
    }
}

/// The outcome of the position `piles`, every one of them covered by `values` (the
/// table's [`GrundyTable::values`]); with `winner_only`, no move is searched for.
#[inline]
pub fn outcome(values: &[u16], piles: &[u64], winner_only: bool) -> NimSquareOutcome {
    let value = |n: u64| values[n as usize];
    let nim_value = piles.iter().fold(0, |xor, &n| xor ^ value(n));
    if nim_value == 0 {
        return NimSquareOutcome { winner: Player::Bob, nim_value: 0, winning_move: None };
    }
    let winning_move = if winner_only {
        None
    } else {
        let found = (0u64..).zip(piles).find_map(|(pile, &n)| {
            let target = value(n) ^ nim_value;
            smallest_take_to(values, n, target).map(|take| NimSquareMove { pile, take })
        });
        debug_assert!(found.is_some(), "nim value {nim_value} without a winning move");
        found
    };
    NimSquareOutcome { winner: Player::Alice, nim_value: u32::from(nim_value), winning_move }
}

/// The smallest k² with g(n − k²) = `target`, if any, where `values` covers n.
fn smallest_take_to(values: &[u16], n: u64, target: u16) -> Option<u64> {
    let n = n as usize;
    (1..=n.isqrt()).map(|k| k * k).find(|&square| values[n - square] == target).map(|square| square as u64)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::LazyLock;

    use parking_lot::Mutex;
    use proptest::prelude::*;

    use super::*;

    /// Checked against the plain programme in a few seconds of a debug build; the
    /// release benchmark compares the two to 10^7.
    const CHECKED: u64 = 200_000;

    static TABLE: LazyLock<GrundyTable> = LazyLock::new(|| {
        let table = GrundyTable::new(CHECKED - 1);
        table.extend_to(CHECKED - 1).unwrap();
        table
    });

    /// Positions the exhaustive search has decided, shared by every case.
    static MEMO: LazyLock<Mutex<HashMap<Vec<u64>, bool>>> = LazyLock::new(Mutex::default);

    /// Whether the player to move wins the multi-pile game `piles`, by minimax over
    /// every move, memoised on the sorted non-empty piles: the rules, no theory.
    fn mover_wins(piles: &[u64], memo: &mut HashMap<Vec<u64>, bool>) -> bool {
        let mut key: Vec<u64> = piles.iter().copied().filter(|&n| n > 0).collect();
        key.sort_unstable();
        if let Some(&known) = memo.get(&key) {
            return known;
        }
        let wins = (0..key.len()).any(|i| {
            (1..).map(|k| k * k).take_while(|&square| square <= key[i]).any(|square| {
                let mut after = key.clone();
                after[i] -= square;
                !mover_wins(&after, memo)
            })
        });
        memo.insert(key, wins);
        wins
    }

    fn after(piles: &[u64], pile: usize, take: u64) -> Vec<u64> {
        let mut after = piles.to_vec();
        after[pile] -= take;
        after
    }

    #[test]
    fn the_table_agrees_with_the_plain_programme() {
        assert_eq!(TABLE.snapshot(), (CHECKED, baseline::grundy_values_below(CHECKED)));
        assert_eq!(grundy_values_below(CHECKED), TABLE.snapshot().1);
    }

    #[test]
    fn small_values_match_the_definition() {
        let table = GrundyTable::new(100);
        let first: Vec<u16> = (0..12).map(|n| table.value(n).unwrap()).collect();
        assert_eq!(first, [0, 1, 0, 1, 2, 0, 1, 0, 1, 2, 0, 1]);
    }

    #[test]
    fn a_three_pile_position_is_pinned() {
        let piles = [123_456, 150_000, 199_999];
        assert_eq!(piles.map(|n| TABLE.value(n).unwrap()), [68, 81, 33]);
        // 68 ^ 81 ^ 33 = 52. Piles 0 and 1 would need a move up to 112 and 101 and have
        // none; pile 2 goes down to 33 ^ 52 = 21, by 120².
        assert_eq!(
            TABLE.solve(&piles, false).unwrap(),
            NimSquareOutcome {
                winner: Player::Alice,
                nim_value: 52,
                winning_move: Some(NimSquareMove { pile: 2, take: 14_400 }),
            }
        );
        assert_eq!(TABLE.value(199_999 - 14_400).unwrap(), 21);
        assert_eq!(
            TABLE.solve(&piles, true).unwrap(),
            NimSquareOutcome { winner: Player::Alice, nim_value: 52, winning_move: None }
        );
    }

    #[test]
    fn no_piles_and_empty_piles_are_lost_for_alice() {
        let table = GrundyTable::new(100);
        let bob = NimSquareOutcome { winner: Player::Bob, nim_value: 0, winning_move: None };
        assert_eq!(table.solve(&[], false).unwrap(), bob);
        assert_eq!(table.solve(&[0, 0, 0], false).unwrap(), bob);
        assert_eq!(table.solve(&[2, 2], false).unwrap(), bob);
    }

    #[test]
    fn piles_beyond_the_limit_are_out_of_range() {
        let table = GrundyTable::new(1000);
        assert_eq!(
            table.solve(&[5, 1001, 2000], false),
            Err(SolveError::OutOfRange { game: GameKind::NimSquare, n: 1001, limit: 1000 })
        );
        assert_eq!(
            table.value(1001),
            Err(SolveError::OutOfRange { game: GameKind::NimSquare, n: 1001, limit: 1000 })
        );
        assert_eq!(
            table.extend_to(u64::MAX),
            Err(SolveError::OutOfRange { game: GameKind::NimSquare, n: u64::MAX, limit: 1000 })
        );
        assert_eq!(table.covered(), 0);
        assert!(!table.needs_extension(1001));
        assert!(table.needs_extension(1000));
        assert_eq!(GrundyTable::new(u64::MAX).limit(), MAX_LIMIT);
    }

    #[test]
    fn growing_in_steps_gives_the_values_of_one_go() {
        let table = GrundyTable::new(CHECKED - 1);
        for n in [0, 1, 7, 1000, 8191, 8192, 8193, 70_000, 100_000, CHECKED - 1] {
            table.extend_to(n).unwrap();
            assert!(table.covered() > n);
            assert!(!table.needs_extension(n));
        }
        assert_eq!(table.snapshot(), TABLE.snapshot());
    }

    #[test]
    fn growth_is_geometric() {
        let table = GrundyTable::new(CHECKED - 1);
        table.extend_to(100_000).unwrap();
        let first = table.covered();
        table.extend_to(first).unwrap();
        assert!(table.covered() >= first + first / GROWTH_DIVISOR);
    }

    #[test]
    fn snapshot_and_restore_round_trip() {
        let (covered, values) = TABLE.snapshot();
        let table = GrundyTable::new(CHECKED - 1);
        table.restore(covered, values.clone()).unwrap();
        assert_eq!(table.snapshot(), (covered, values.clone()));
        // A smaller table keeps what it covers; a larger one is cut at the limit.
        table.restore(1000, values[..1000].to_vec()).unwrap();
        assert_eq!(table.covered(), covered);
        let small = GrundyTable::new(999);
        small.restore(covered, values.clone()).unwrap();
        assert_eq!(small.snapshot(), (1000, values[..1000].to_vec()));
        // A restored table grows from where the restored values end.
        let grown = GrundyTable::new(CHECKED - 1);
        grown.restore(100_000, values[..100_000].to_vec()).unwrap();
        grown.extend_to(CHECKED - 1).unwrap();
        assert_eq!(grown.snapshot().1, values);
    }

    #[test]
    fn restore_refuses_corrupt_values() {
        let (covered, values) = TABLE.snapshot();
        let table = GrundyTable::new(CHECKED - 1);
        assert_eq!(
            table.restore(covered + 1, values.clone()),
            Err(InvalidGrundyTable::WrongLength { covered: covered + 1, len: covered })
        );
        assert_eq!(
            table.restore(1 << 33, Vec::new()),
            Err(InvalidGrundyTable::TooLarge { covered: 1 << 33 })
        );
        let mut implausible = values.clone();
        implausible[3] = 2;
        assert_eq!(
            table.restore(covered, implausible),
            Err(InvalidGrundyTable::Implausible { pile: 3, value: 2 })
        );
        let mut early = values.clone();
        early[100] ^= 1;
        assert!(matches!(
            table.restore(covered, early),
            Err(InvalidGrundyTable::Wrong { pile: 100, .. }
                | InvalidGrundyTable::Implausible { pile: 100, .. })
        ));
        // Shifted by one pile: every sample disagrees, the first one fails.
        let mut shifted = values.clone();
        shifted.insert(CHECK_PREFIX as usize, 0);
        shifted.pop();
        assert!(matches!(table.restore(covered, shifted), Err(InvalidGrundyTable::Wrong { .. })));
        // Stone Game IV's outcomes (0 or 1) are plausible values, but wrong ones.
        let outcomes: Vec<u16> = values.iter().map(|&value| u16::from(value != 0)).collect();
        assert!(matches!(table.restore(covered, outcomes), Err(InvalidGrundyTable::Wrong { .. })));
        assert_eq!(table.covered(), 0);
    }

    proptest! {
        /// Winner, nim value and move against the exhaustive search of the whole game:
        /// the move is legal, leaves a position lost for Bob, and no earlier pile and no
        /// smaller square on its pile does.
        #[test]
        fn matches_exhaustive_search(
            piles in proptest::collection::vec(0u64..30, 0..5),
            winner_only in any::<bool>(),
        ) {
            let table = GrundyTable::new(100);
            let memo = &mut *MEMO.lock();
            let outcome = table.solve(&piles, winner_only).unwrap();
            let alice = mover_wins(&piles, memo);
            prop_assert_eq!(outcome.winner == Player::Alice, alice);
            prop_assert_eq!(outcome.nim_value != 0, alice);
            let xor = piles.iter().fold(0, |xor, &n| xor ^ u32::from(TABLE.value(n).unwrap()));
            prop_assert_eq!(outcome.nim_value, xor);
            let mut wins = |pile: usize, take: u64| !mover_wins(&after(&piles, pile, take), memo);
            match outcome.winning_move {
                None => prop_assert!(!alice || winner_only),
                Some(NimSquareMove { pile, take }) => {
                    prop_assert!(alice && !winner_only);
                    let pile = pile as usize;
                    prop_assert!(pile < piles.len() && take > 0 && take <= piles[pile]);
                    prop_assert_eq!(take.isqrt() * take.isqrt(), take);
                    prop_assert!(wins(pile, take));
                    for (earlier, &n) in piles.iter().enumerate().take(pile) {
                        let squares = (1..=n.isqrt()).map(|k| k * k);
                        prop_assert!(!squares.into_iter().any(|square| wins(earlier, square)));
                    }
                    prop_assert!(!(1..take.isqrt()).any(|k| wins(pile, k * k)));
                }
            }
        }

        /// Large piles: the move is legal and leaves a nim value of 0.
        #[test]
        fn the_move_zeroes_the_nim_value(piles in proptest::collection::vec(0u64..CHECKED, 1..8)) {
            let outcome = TABLE.solve(&piles, false).unwrap();
            if let Some(NimSquareMove { pile, take }) = outcome.winning_move {
                let after = after(&piles, pile as usize, take);
                prop_assert_eq!(TABLE.solve(&after, true).unwrap().nim_value, 0);
            } else {
                prop_assert_eq!(outcome.nim_value, 0);
            }
        }
    }
}

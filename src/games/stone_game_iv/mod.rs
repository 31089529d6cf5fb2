//! Stone Game IV (LeetCode 1510) for every n up to a configured limit (10^9 by default,
//! at most [`MAX_LIMIT`]).
//!
//! A pile is lost for the player to move (a P-position) iff no square move leads to a
//! P-position. P-positions are sparse (1,727,524 below 10^9), so the table keeps only
//! their sorted list (`u64`s), grows it on demand with the segmented [`sieve`], and
//! answers whether a pile is one through an index of the list (`index.rs`). Alice's
//! move, the smallest winning square, is read from a table below 2^21
//! (`small_moves.rs`) and searched for above, k upwards, through the same index. The
//! method and its measurements are in `docs/stone-game-iv.md`.
//!
//! The table is shared by every request. One thread extends it at a time and publishes
//! each finished segment, so a request inside the known range never waits, and one
//! waiting for a pile the running extension will reach wakes as soon as it is covered.

#[doc(hidden)]
pub mod baseline;
mod classes;
mod file;
mod gallop;
mod game;
mod index;
mod lows;
pub mod sieve;
mod small_moves;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use parking_lot::{Mutex, RwLock};

use self::classes::{chunk_of, RareList, ALL_ROOTS, COMMON_ROOTS, EVEN_ROOTS, MODULUS};
use self::gallop::{first_at_least, last_at_most};
use self::index::PositionIndex;
use self::sieve::{isqrt, Sieve, SEGMENT};
use self::small_moves::{smallest_winning_roots, SMALL_MOVES_END, SMALL_MOVES_MIN, SMALL_MOVES_SIZES};
use super::grower::Grower;
use super::{GameKind, Move, Outcome, Player, SolveError};

pub use self::file::{InvalidIvTable, IvTableFile};
pub use self::game::{StoneGameIv, StoneGameIvMove};
pub use self::sieve::losing_positions_below;

/// The default largest n answered.
pub const DEFAULT_LIMIT: u64 = 1_000_000_000;

/// The largest limit a table accepts: 10^11, ten times the largest table measured
/// (10^10, `examples/iv_cold.rs`; figures in `docs/stone-game-iv.md`). The sieve's time
/// grows about 16 times a decade, and at this size its memory is estimated near 1.6 GiB:
/// some 43 million P-positions (8.6 million below 10^10, five times more a decade), as
/// the list (0.35 GB) and the sieve's `u32` copy (0.17 GB), and the index's 24 bytes
/// per 2,048 numbers (1.17 GB).
pub const MAX_LIMIT: u64 = 100_000_000_000;

/// A table limit above [`MAX_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stone game iv limit {limit} is above the maximum {max}", max = MAX_LIMIT)]
pub struct LimitTooLarge {
    /// The limit asked for.
    pub limit: u64,
}

/// A list of P-positions fails a check before being trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidLosingList {
    /// The list claims to cover numbers beyond the largest table ([`MAX_LIMIT`]).
    #[error("covered range {covered} exceeds the largest table ({})", MAX_LIMIT + 1)]
    TooLarge {
        /// The claimed end of the covered range.
        covered: u64,
    },
    /// Not sorted strictly upwards at this index.
    #[error("not strictly increasing at index {index}")]
    NotIncreasing {
        /// Index of the first element not above its predecessor.
        index: usize,
    },
    /// A P-position at or beyond the covered range.
    #[error("P-position {value} is not below the covered range {covered}")]
    BeyondCovered {
        /// The offending element.
        value: u64,
        /// The claimed end of the covered range.
        covered: u64,
    },
    /// The list disagrees with a fresh computation of its first numbers.
    #[error("disagrees with the definition below {checked}")]
    Wrong {
        /// The end of the prefix that was recomputed.
        checked: u64,
    },
}

/// How much of a list [`check_losing_list`] recomputes: a few milliseconds, enough to
/// catch a list written by a different (buggy) program that still looks well-formed.
const SPOT_CHECK: u64 = 1 << 20;

/// Checks that `losing` can be the P-positions below `covered`: sorted, in range, and
/// equal to the definition on its first 2^20 numbers.
pub fn check_losing_list(covered: u64, losing: &[u64]) -> Result<(), InvalidLosingList> {
    if covered > MAX_LIMIT + 1 {
        return Err(InvalidLosingList::TooLarge { covered });
    }
    if let Some(index) = losing.windows(2).position(|pair| pair[0] >= pair[1]) {
        return Err(InvalidLosingList::NotIncreasing { index: index + 1 });
    }
    if let Some(&value) = losing.last().filter(|&&last| last >= covered) {
        return Err(InvalidLosingList::BeyondCovered { value, covered });
    }
    let checked = covered.min(SPOT_CHECK);
    let prefix = &losing[..first_at_least(losing, 0, checked)];
    if prefix != losing_positions_below(checked) {
        return Err(InvalidLosingList::Wrong { checked });
    }
    Ok(())
}

/// The P-positions below the covered range, with what answers questions about them.
#[derive(Debug, Default)]
struct Positions {
    /// Sorted.
    list: Vec<u64>,
    index: PositionIndex,
    /// The largest P-position ≡ 1 or 3 (mod 5), if any. Above it every P-position is
    /// ≡ 0, 2 or 4 (the last is below 10^7).
    last_odd_residue: Option<u64>,
    /// The P-positions outside the common classes mod 1625: 909 of the 1.38 million
    /// between 10^8 and 10^9, so that a move's search tests the few in its range for
    /// n − p being a square instead of asking the index about the k's that lead there.
    rare: RareList,
}

impl Positions {
    /// `list`, every P-position below `covered`.
    fn new(list: Vec<u64>, covered: u64) -> Self {
        let index = PositionIndex::of(&list, covered);
        let last_odd_residue = list.iter().rev().copied().find(|p| p % 5 % 2 == 1);
        let mut rare = RareList::default();
        rare.extend(&list);
        Positions { list, index, last_odd_residue, rare }
    }

    /// Appends `found`, which extends the list to every P-position below `covered`.
    fn extend(&mut self, found: &[u64], covered: u64) {
        self.list.extend_from_slice(found);
        if let Some(&p) = found.iter().rev().find(|p| *p % 5 % 2 == 1) {
            self.last_odd_residue = Some(p);
        }
        self.rare.extend(found);
        self.index.extend(&self.list, covered);
    }

    /// Whether `n`, below the covered range, is a P-position.
    fn contains(&self, n: u64) -> bool {
        self.index.contains(&self.list, n)
    }

    /// The smallest k² with n − k² a P-position, if any; `n` is below the covered range.
    /// The same move as [`smallest_winning_take`], which walks the list instead (tests;
    /// `stone_game_iv_warm_large` measures both).
    ///
    /// k walks upwards, 125 at a time. In each such chunk the rare P-positions in its
    /// range are tested for n − p being a square, and the index is asked only about the
    /// k's that leave n − k² in a [`COMMON`](classes::COMMON) class mod 1625: 29 k's in
    /// 125 on average, against 75 that leave 0, 2 or 4 mod 5. Where the rare ones are
    /// dense (low ranges: ≡ 4 is common below 10^8, ≡ 1 and 3 below 10^7), the index is
    /// asked about every k that can hit instead: those that leave 0, 2 or 4 while n − k²
    /// is above the last P-position ≡ 1 or 3, and all below.
    fn smallest_winning_take(&self, n: u64) -> Option<u64> {
        // k ≤ this leaves n − k² above the last P-position ≡ 1, 3.
        let even_up_to = match self.last_odd_residue {
            Some(last) if n > last => isqrt(n - last - 1),
            Some(_) => 0,
            None => isqrt(n),
        };
        let (common, even, all) = (COMMON_ROOTS.of(n), EVEN_ROOTS.of(n), ALL_ROOTS.of(n));
        let rare = self.rare.values();
        // The rare P-positions below n − (first k of the chunk)²: rare[..rare_end].
        let mut rare_end = self.rare.count_below(n);
        let top = isqrt(n);
        let mut first = 0;
        while first <= top {
            let last = (first + MODULUS - 1).min(top);
            let lowest = n - last * last;
            let every_hit = if last <= even_up_to { even } else { all };
            let common = common[chunk_of(first)];
            // The rare ones in range, nearest first, tested for a square (the first is
            // the smallest k), unless there are more than this: a test costs about a
            // third of a question to the index.
            let most = 3 * (every_hit.count_ones() - common.count_ones()) as usize;
            let (mut at, mut scanned) = (rare_end, None);
            while at > 0 && rare[at - 1] >= lowest && rare_end - at < most {
                let p = rare[at - 1];
                if is_square(n - p) {
                    scanned = Some(isqrt(n - p));
                    break;
                }
                at -= 1;
            }
            let dense = scanned.is_none() && at > 0 && rare[at - 1] >= lowest;
            let asked = if dense { every_hit } else { common };
            // The k's of the chunk up to a scanned hit's, and never k = 0.
            let asked_up_to = scanned.map_or(last, |k| k - 1);
            let up_to = (1u128 << (asked_up_to + 1 - first)) - 1;
            let mut asked = asked & up_to & !u128::from(first == 0);
            while asked != 0 {
                let k = first + u64::from(asked.trailing_zeros());
                if self.contains(n - k * k) {
                    return Some(k * k);
                }
                asked &= asked - 1;
            }
            if let Some(k) = scanned {
                return Some(k * k);
            }
            rare_end = match lowest.checked_sub(1) {
                Some(below) if dense => last_at_most(rare, at, below),
                _ => at,
            };
            first += MODULUS;
        }
        None
    }
}

/// A shared, growing table of Stone Game IV P-positions.
#[derive(Debug)]
pub struct StoneGameIvTable {
    limit: u64,
    /// The P-positions below `covered`. Readers hold the lock for one answer
    /// (microseconds at most); the extender holds a read lock while sieving a segment
    /// and the write lock only to append to it (at worst a reallocation, a millisecond or
    /// two at 10^9, now and then).
    losing: RwLock<Positions>,
    /// Every n below this is classified; stored under `losing`'s write lock, after the
    /// append.
    covered: AtomicU64,
    /// Who extends the table; waiters sleep on it.
    grower: Grower,
    /// The sieve's cursors, kept between extensions; only the extender locks it.
    sieve: Mutex<Sieve>,
    /// Alice's smallest winning k for every pile below its length (0: Bob wins), so that
    /// a small pile's move is one load (`small_moves.rs`): one table a size built so far
    /// (2^16, 2^17, ..., 2^21, each at most the limit), kept until the table is dropped,
    /// so that a reader takes no lock (whose counter every reader would write, on one
    /// cache line, once a problem), only which table is current.
    small_moves: [OnceLock<Box<[u16]>>; SMALL_MOVES_SIZES],
    /// 1 + the index in `small_moves` of the current table; 0 for none.
    small_moves_current: AtomicUsize,
    /// The length of the current table.
    small_moves_end: AtomicU64,
    /// Held by the one caller that (re)builds `small_moves`; others wait for it.
    small_moves_builder: Mutex<()>,
}

impl StoneGameIvTable {
    /// An empty table answering n up to `limit`, or up to [`MAX_LIMIT`] for a larger
    /// one ([`Self::try_new`] refuses it instead).
    pub fn new(limit: u64) -> Self {
        StoneGameIvTable {
            limit: limit.min(MAX_LIMIT),
            losing: RwLock::new(Positions::default()),
            covered: AtomicU64::new(0),
            grower: Grower::default(),
            sieve: Mutex::new(Sieve::new()),
            small_moves: Default::default(),
            small_moves_current: AtomicUsize::new(0),
            small_moves_end: AtomicU64::new(0),
            small_moves_builder: Mutex::new(()),
        }
    }

    /// An empty table answering n up to `limit`, which must not exceed [`MAX_LIMIT`].
    pub fn try_new(limit: u64) -> Result<Self, LimitTooLarge> {
        match limit {
            0..=MAX_LIMIT => Ok(Self::new(limit)),
            _ => Err(LimitTooLarge { limit }),
        }
    }

    /// The largest n this table answers.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Every n below this is already classified.
    pub fn covered(&self) -> u64 {
        self.covered.load(Ordering::Acquire)
    }

    /// True when answering `n` first needs the table to grow (a slow, blocking call): the
    /// list of P-positions, or below 2^21 Alice's move table.
    pub fn needs_extension(&self, n: u64) -> bool {
        n <= self.limit && (n >= self.covered() || self.needs_small_moves(n))
    }

    /// Whether the move table must grow before `n` is answered without blocking: for a
    /// pile beyond the table, whether the table is still short of its full size.
    fn needs_small_moves(&self, n: u64) -> bool {
        n.min(SMALL_MOVES_END - 1) >= self.small_moves_end.load(Ordering::Acquire)
    }

    /// Grows the table to cover `n`; blocks. One thread extends at a time; others wait
    /// for it and wake as soon as their `n` is covered. A caller whose `n` lies beyond the
    /// running extension's target waits for it to end and then extends further itself, so
    /// that no caller waits for work only a later caller needs. The small-pile move table
    /// grows with it (to its full size for a pile beyond it), so that afterwards every
    /// pile up to `n` is answered without blocking.
    pub fn extend_to(&self, n: u64) -> Result<(), SolveError> {
        self.check_limit(n)?;
        // The list first: a caller waiting for a small pile while a long extension runs
        // then builds the move table itself, as soon as the list covers it.
        self.extend_list_to(n);
        if self.needs_small_moves(n) {
            self.grow_small_moves(n.min(SMALL_MOVES_END - 1));
        }
        Ok(())
    }

    /// [`Self::extend_to`], skipped for a pile below the move table's end: the list
    /// covers it already (the table is built only once the list does, and the list never
    /// shrinks), and a table a restore clears meanwhile leaves the list to answer. The
    /// skip is one atomic load where `extend_to` is a call per problem
    /// (`examples/solve_rate.rs`; docs/performance.md).
    fn extend_to_unless_small(&self, n: u64) -> Result<(), SolveError> {
        match n < self.small_moves_end.load(Ordering::Acquire) {
            true => Ok(()),
            false => self.extend_to(n),
        }
    }

    /// Rebuilds the small-pile move table to the next power of two above `n` (at least
    /// 2^16, at most 2^21 and the limit), from scratch: at most twice the largest build.
    /// `n` ≤ the limit.
    fn grow_small_moves(&self, n: u64) {
        let end = (n + 1).max(SMALL_MOVES_MIN).next_power_of_two().min(SMALL_MOVES_END).min(self.limit + 1);
        self.extend_list_to(end - 1);
        let _builder = self.small_moves_builder.lock();
        if self.needs_small_moves(n) {
            // One size a slot: a table of `end` entries is the same whenever it is built.
            let size = end.next_power_of_two().max(SMALL_MOVES_MIN);
            let slot = (size.trailing_zeros() - SMALL_MOVES_MIN.trailing_zeros()) as usize;
            self.small_moves[slot].get_or_init(|| smallest_winning_roots(&self.losing.read().list, end));
            self.small_moves_current.store(slot + 1, Ordering::Release);
            self.small_moves_end.store(end, Ordering::Release);
        }
    }

    /// The current move table of small piles: Alice's smallest winning k for each pile
    /// below its length, 0 where Bob wins (empty before the first is built). What a column
    /// kernel gathers from, a pile a load, where [`Self::solve`] answers one pile.
    pub fn small_moves(&self) -> &[u16] {
        match self.small_moves_current.load(Ordering::Acquire) {
            0 => &[],
            current => self.small_moves[current - 1].get().map_or(&[], |moves| moves),
        }
    }

    /// Grows the list of P-positions to cover `n` ≤ the limit.
    fn extend_list_to(&self, n: u64) {
        self.grower.grow_to(n, || self.covered(), |n| self.run_extension(n));
    }

    /// Sieves whole segments until `n` is covered (never beyond the limit), publishing
    /// each one. The caller holds the extension role.
    fn run_extension(&self, n: u64) {
        let mut sieve = self.sieve.lock();
        let end = self.limit + 1;
        let mut found = Vec::new();
        while self.covered() <= n {
            let lo = self.covered();
            let hi = (lo + SEGMENT).min(end);
            found.clear();
            sieve.classify(&self.losing.read().list, lo, hi, &mut found);
            let mut losing = self.losing.write();
            losing.extend(&found, hi);
            // Under the lock, so that a snapshot never sees entries beyond `covered`.
            self.covered.store(hi, Ordering::Release);
            drop(losing);
            self.grower.published();
        }
    }

    /// Solves a pile of `n`, growing the table first if needed (blocking).
    ///
    /// When Alice wins, her move takes the smallest square k² that leaves a P-position:
    /// deterministic. Below 2^21 it is read from a table built on first need (tens of
    /// milliseconds, once); above, it is searched for, k upwards (microseconds near
    /// 10^9). [`Self::winner`] is the outcome alone, one question to the index.
    pub fn solve(&self, n: u64) -> Result<Outcome, SolveError> {
        self.extend_to_unless_small(n)?;
        if let Some(&root) = self.small_moves().get(n as usize) {
            return Ok(match u64::from(root) {
                0 => Outcome::BOB,
                k => Outcome::alice(Some(Move::StoneGameIv(StoneGameIvMove { take: k * k }))),
            });
        }
        let losing = self.losing.read();
        if losing.contains(n) {
            return Ok(Outcome::BOB);
        }
        let take = losing.smallest_winning_take(n);
        debug_assert!(take.is_some() || n == 0, "a winning n = {n} without a winning move");
        Ok(Outcome::alice(take.map(|take| Move::StoneGameIv(StoneGameIvMove { take }))))
    }

    /// Reads the small-pile move table at `piles` ahead of solving them. The table is
    /// 2-4 MiB and random piles miss the cache: loads issued back to back overlap, where
    /// the solver's, one a problem between other work, wait one at a time.
    pub fn preload_moves(&self, piles: impl Iterator<Item = u64>) {
        let moves = self.small_moves();
        let loaded = piles
            .filter_map(|n| moves.get(usize::try_from(n).ok()?))
            .fold(0u16, |sum, &k| sum.wrapping_add(k));
        std::hint::black_box(loaded);
    }

    /// Who wins a pile of `n`, without a move: one question to the index once the table
    /// covers `n` (grown first if needed, blocking).
    pub fn winner(&self, n: u64) -> Result<Player, SolveError> {
        self.extend_to_unless_small(n)?;
        if let Some(&root) = self.small_moves().get(n as usize) {
            return Ok(if root == 0 { Player::Bob } else { Player::Alice });
        }
        let losing = self.losing.read().contains(n);
        Ok(if losing { Player::Bob } else { Player::Alice })
    }

    /// The covered range and a copy of the P-positions below it, for saving.
    pub fn snapshot(&self) -> (u64, Vec<u64>) {
        let losing = self.losing.read();
        // Read under the lock: `covered` moves only under the write lock.
        (self.covered(), losing.list.clone())
    }

    /// Replaces the table's contents by `losing`, the P-positions below `covered` (e.g.
    /// loaded from disk), after [`check_losing_list`]. Keeps the current contents when
    /// they already cover more; anything beyond the limit is dropped. Waits for a
    /// running extension to end.
    pub fn restore(&self, covered: u64, mut losing: Vec<u64>) -> Result<(), InvalidLosingList> {
        check_losing_list(covered, &losing)?;
        let covered = covered.min(self.limit + 1);
        losing.truncate(first_at_least(&losing, 0, covered));
        self.grower.between_extensions(|| {
            if covered > self.covered() {
                // The sieve's cursors no longer match: it resyncs on its next segment; the
                // move table is made current again on next need, once the new list covers
                // it (a table built before holds the same moves: they follow from the game).
                let _builder = self.small_moves_builder.lock();
                self.small_moves_end.store(0, Ordering::Release);
                self.small_moves_current.store(0, Ordering::Release);
                let mut current = self.losing.write();
                *current = Positions::new(losing, covered);
                self.covered.store(covered, Ordering::Release);
            }
        });
        Ok(())
    }

    fn check_limit(&self, n: u64) -> Result<(), SolveError> {
        if n > self.limit {
            return Err(SolveError::OutOfRange { game: GameKind::StoneGameIv, n, limit: self.limit });
        }
        Ok(())
    }
}

/// P-positions within this distance below n are tested directly by
/// [`smallest_winning_take`]; beyond it the walk over k is cheaper (2^18 to 2^24 measure
/// alike near 10^9, `iv_cold`).
const NEAR: u64 = 1 << 21;

/// The smallest k² with n − k² in `losing` (the P-positions below n, sorted), if any,
/// from the list alone: the reference the table's indexed search is tested and
/// benchmarked against (`stone_game_iv_warm_large`).
///
/// First the P-positions p just below n, nearest first, each tested for n − p being a
/// square: independent tests on a contiguous run. The first square found is the
/// smallest, since n − p grows as p falls. Past `NEAR`, where P-positions outnumber the
/// k's, k walks upwards and the list pointer downwards together, about k steps.
#[doc(hidden)]
pub fn smallest_winning_take(losing: &[u64], n: u64) -> Option<u64> {
    smallest_winning_take_near(losing, n, NEAR)
}

fn smallest_winning_take_near(losing: &[u64], n: u64, near: u64) -> Option<u64> {
    let far = first_at_least(losing, 0, n.saturating_sub(near));
    for group in losing[far..].rchunks(8) {
        // Bit i set when n − group[i] is a square; the highest bit is the nearest p.
        let squares =
            group.iter().enumerate().fold(0u32, |bits, (i, &p)| bits | u32::from(is_square(n - p)) << i);
        if squares != 0 {
            return Some(n - group[31 - squares.leading_zeros() as usize]);
        }
    }
    // Invariant: losing[..above] are the P-positions ≤ the current target n − k².
    let mut above = far;
    for k in (isqrt(near) + 1..).take_while(|&k| k * k <= n) {
        let target = n - k * k;
        above = last_at_most(losing, above, target);
        if above > 0 && losing[above - 1] == target {
            return Some(k * k);
        }
    }
    None
}

/// Whether `d` (below 2^52) is a perfect square: the f64 root of a square is exact, and
/// that of a non-square is at least 2^-27 away from an integer.
fn is_square(d: u64) -> bool {
    let root = (d as f64).sqrt() as u64;
    root * root == d
}

#[cfg(test)]
mod tests;

//! The segmented sieve that grows the sorted list of Stone Game IV P-positions.
//!
//! Every known P-position p marks p + k² winning for every k; an unmarked number is a
//! P-position. The range is cut into segments of [`SEGMENT`] numbers, one byte a number,
//! and two workers mark a segment one L1-sized block at a time, each k from a cursor
//! into the sorted list, so no search is made per (block, k). Past the first 512 k's,
//! the k's ≢ 0 (mod 5) mark from sparse lists that leave out the pairs landing on
//! numbers ≡ 1, 3 (mod 5), which are nearly all winning; the few such numbers left
//! unmarked are tested against the left-out pairs one by one, so the result stays exact.
//! The method, and why it is exact, is in `docs/stone-game-iv.md`; each constant below
//! names what decided it (`examples/iv_cold.rs --baseline`, `benches/stone_game_iv.rs`).
//!
//! The marking loop reads the list as low 32-bit halves (`Lows`) and adds k² − lo
//! modulo 2^32: exact for a P-position landing in the segment, and for the groups past
//! a run's end as long as P-positions lie less than `MAX_GAP` apart, which every
//! segment checks. The same loop thus serves piles above 2^32.

use std::sync::{Mutex, PoisonError};

use super::gallop::first_at_least;
use super::lows::Lows;

/// Numbers classified per segment: 2^18, the unit the table publishes and the two
/// workers split (one thread spawn a segment).
pub const SEGMENT: u64 = 1 << 18;

const LEN: usize = SEGMENT as usize;

/// Numbers marked per block: 2^15, so that a worker's stores into the block (32 KiB)
/// stay in this machine's 48 KiB L1.
const BLOCK: u64 = 1 << 15;

/// How many k's ahead a worker prefetches the list at their cursors (3 and 4 measure
/// alike in `iv_cold`; 8 and 16 slightly worse).
const PREFETCH_AHEAD: usize = 3;

/// Chunks of consecutive k's a segment is cut into, taken in turn by whichever worker is
/// free.
const CHUNKS: usize = 16;

/// P-positions marked per step: one check of the step's last p, then plain stores. 16:
/// 12 and 8 cost 4% and 6% more CPU to 10^9 (`iv_cold`).
const GROUP: usize = 16;

/// The widest gap between consecutive P-positions (of each list the sieve marks from)
/// for which the marking loop's sums modulo 2^32 are exact: a group of [`GROUP`] p's
/// that starts less than a gap past the segment's end then ends below 2^32 past its
/// start. P-positions near 10^10 lie thousands apart, not hundreds of millions.
pub(super) const MAX_GAP: u64 = ((1 << 32) - SEGMENT) / (GROUP as u64 + 1);

/// Every k up to this marks from the whole list: k² < SEGMENT reaches from a segment into
/// the next, and [`finish_segment`] makes those marks from the P-positions it finds.
const FULL_MIN: u64 = 1 << 9;

/// The largest k's mark from the whole list while their runs start among the first
/// `FULL_MARKS` · √lo P-positions: a number ≡ 1, 3 (mod 5) then gets about this many
/// marks from them, so few survive to be tested one by one. 24: 16, 18, 30 and 32 were
/// slower to 10^9 in interleaved `iv_cold` runs.
const FULL_MARKS: f64 = 24.0;

/// Which list a k marks from: `None` for the whole list, else an index into the sparse
/// lists (see [`keeps`]). Only k in (`FULL_MIN`, `sparse_up_to`] with k ≢ 0 (mod 5)
/// mark from a sparse list.
fn sparse_list(k: u64, sparse_up_to: u64) -> Option<usize> {
    match k % 5 {
        _ if k <= FULL_MIN || k > sparse_up_to => None,
        1 | 4 => Some(0),
        2 | 3 => Some(1),
        _ => None,
    }
}

/// Whether P-position `p` is in sparse list `list`: list 0, for k² ≡ 1 (mod 5), keeps
/// p ≡ 1, 3, 4 and drops p ≡ 0, 2; list 1, for k² ≡ 4, keeps p ≡ 0, 1, 3 and drops
/// p ≡ 2, 4. Every dropped pair marks a number ≡ 1 or 3.
fn keeps(list: usize, p: u64) -> bool {
    matches!((list, p % 5), (0, 1 | 3 | 4) | (1, 0 | 1 | 3))
}

/// The lists the k's of a segment mark from.
#[derive(Clone, Copy)]
struct Lists<'a> {
    full: &'a Lows,
    sparse: [&'a Lows; 2],
    sparse_up_to: u64,
}

impl<'a> Lists<'a> {
    fn of(&self, k: u64) -> &'a Lows {
        sparse_list(k, self.sparse_up_to).map_or(self.full, |list| self.sparse[list])
    }
}

/// One byte a number of the segment, non-zero when marked winning. Indices are masked to
/// the size, which drops the bounds checks from the hot loop without `unsafe`.
type Marks = Box<[u8; LEN]>;

fn set(marks: &mut [u8; LEN], at: usize) {
    marks[at & (LEN - 1)] = 1;
}

/// Asks for the two cache lines of the list from `at` on.
fn prefetch(losing: &[u32], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(from) = losing.get(at..) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let line = from.as_ptr().cast::<i8>();
        // SAFETY: SSE is part of x86_64, and a prefetch never faults, whatever the
        // address. The only `unsafe` of the sieve: no safe prefetch exists, and a plain
        // load would stall the loop it is meant to feed; it cuts CPU time by a quarter
        // (`iv_cold`).
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(line);
            _mm_prefetch::<_MM_HINT_T0>(line.wrapping_add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (losing, at);
}

/// Marks p + k² in [lo, hi) for every known P-position p < lo and every k of one chunk,
/// k = `first_k`, `first_k` + 1, ..., one cursor each: for each k, the index in the list
/// of the first p whose mark p + k² is not made yet. `groups` holds, for each k, the
/// groups it marked a block in the previous segment, rounded; this call updates it.
/// `starts` is scratch space, reused from chunk to chunk.
fn mark_chunk(
    lists: Lists,
    (lo, hi): (u64, u64),
    first_k: u64,
    cursors: &mut [usize],
    groups: &mut [u32],
    starts: &mut Vec<usize>,
    marks: &mut [u8; LEN],
) {
    starts.clear();
    starts.extend_from_slice(cursors);
    let mut block_lo = lo;
    while block_lo < hi {
        let block_hi = block_lo + BLOCK;
        if block_hi < hi {
            mark_block(lists, lo, hi, block_hi, first_k, cursors, groups, marks);
        } else {
            finish_runs(lists, lo, hi, first_k, cursors, starts, marks);
        }
        block_lo = block_hi;
    }
    let blocks = (hi - lo).div_ceil(BLOCK) as usize * GROUP;
    for ((group, &cursor), &start) in groups.iter_mut().zip(&*cursors).zip(&*starts) {
        *group = ((cursor - start + blocks / 2) / blocks).try_into().unwrap_or(u32::MAX);
    }
}

/// Marks one block short of the segment's end: for each k of the chunk with
/// k² < `block_hi` that marks from the whole list, as many groups of p's from the cursor
/// on as the k marked a block in the previous segment. The count is not where the k's run
/// in this block ends, but it is the same for long stretches of k's, so the loop's exit is
/// predicted; checking for the run's end instead cost a mispredicted branch a
/// (block, k). Stores past the block still land in the segment (each group is checked
/// against its end), the cursors that fall behind catch up in the last block, and the
/// last block marks the rest exactly.
#[allow(clippy::too_many_arguments)]
fn mark_block(
    lists: Lists,
    lo: u64,
    hi: u64,
    block_hi: u64,
    first_k: u64,
    cursors: &mut [usize],
    groups: &[u32],
    marks: &mut [u8; LEN],
) {
    let limit = (hi - lo) as u32;
    for_each_k(lists, lo, block_hi, first_k, cursors, false, |list, i, offset, at| {
        mark_groups(list, at, offset, limit, groups[i] as usize, marks)
    });
}

/// Marks the segment's last block: for each k of the chunk, every p from the cursor on
/// that lands below `hi`, a group at a time while the group's last p does; then the few
/// left, counted without branches, by storing the GROUP p's that end the run (some a
/// second time, which is harmless) when they all belong to the k's run in this segment
/// (from `starts`, the cursors at the segment's start). One at a time, the few left cost
/// a mispredicted exit a k.
fn finish_runs(
    lists: Lists,
    lo: u64,
    hi: u64,
    first_k: u64,
    cursors: &mut [usize],
    starts: &[usize],
    marks: &mut [u8; LEN],
) {
    let limit = (hi - lo) as u32;
    for_each_k(lists, lo, hi, first_k, cursors, true, |list, i, offset, at| {
        let at = mark_groups(list, at, offset, limit, usize::MAX, marks);
        // The list is sorted and the group's sums are exact (`MAX_GAP`), so the p's
        // below `limit` are a prefix.
        let left = list
            .get(at..at + GROUP)
            .map(|group| group.iter().map(|&p| usize::from(p.wrapping_add(offset) < limit)).sum::<usize>());
        match left {
            Some(left) if at + left >= starts[i] + GROUP => {
                for &p in &list[at + left - GROUP..at + left] {
                    set(marks, p.wrapping_add(offset) as usize);
                }
                at + left
            }
            _ => {
                let mut at = at;
                while let Some(&p) = list.get(at).filter(|&&p| p.wrapping_add(offset) < limit) {
                    set(marks, p.wrapping_add(offset) as usize);
                    at += 1;
                }
                at
            }
        }
    });
}

/// Runs `mark(list, i, offset, cursor)` for each k = `first_k` + i of the chunk with
/// k² < `end`, where `list` is the list k marks from, prefetching the lists at the
/// cursors of the k's visited a few visits ahead, and stores the cursor it returns.
/// Unless `every_k`, the k's that mark from a sparse list are left out: their runs are
/// short (under half the list's P-positions, and under 3% for k² ≡ 1), so the segment's
/// last block marks them whole, one visit a segment instead of one a block (faster to
/// 10^9 in `iv_cold`); the visits then step over them rather than test each.
/// `offset` is k² − `lo` modulo 2^32, and the list holds p modulo 2^32: for p at or past
/// the cursor, p + k² − lo lies in [0, 2^32) while the groups stay within `MAX_GAP`, so
/// the wrapping sum p + offset is exact.
#[inline(always)]
fn for_each_k<'a>(
    lists: Lists<'a>,
    lo: u64,
    end: u64,
    first_k: u64,
    cursors: &mut [usize],
    every_k: bool,
    mut mark: impl FnMut(&'a [u32], usize, u32, usize) -> usize,
) {
    let count = (isqrt(end - 1) + 1).saturating_sub(first_k).min(cursors.len() as u64) as usize;
    // The first i at or after `i` to visit: the k's that mark from the whole list are
    // those up to FULL_MIN, the multiples of 5, and those above `sparse_up_to`.
    let visited_from = |i: usize| -> usize {
        let k = first_k + i as u64;
        if every_k || k <= FULL_MIN || k > lists.sparse_up_to || k.is_multiple_of(5) {
            return i;
        }
        (k.next_multiple_of(5).min(lists.sparse_up_to + 1) - first_k) as usize
    };
    let mut i = visited_from(0);
    let mut ahead = i;
    for _ in 0..PREFETCH_AHEAD {
        ahead = visited_from(ahead + 1);
    }
    while i < count {
        if let Some(&cursor) = cursors.get(ahead) {
            prefetch(lists.of(first_k + ahead as u64).lows(), cursor);
        }
        let k = first_k + i as u64;
        let offset = (k * k).wrapping_sub(lo) as u32;
        cursors[i] = mark(lists.of(k).lows(), i, offset, cursors[i]);
        i = visited_from(i + 1);
        ahead = visited_from(ahead + 1);
    }
}

/// Marks up to `max_groups` whole groups of p's from `at` on, each whose last p lands
/// below `limit` (the segment's end, relative to its start); returns where it stopped.
#[inline(always)]
fn mark_groups(
    list: &[u32],
    mut at: usize,
    offset: u32,
    limit: u32,
    max_groups: usize,
    marks: &mut [u8; LEN],
) -> usize {
    for _ in 0..max_groups {
        let Some(group) = list.get(at..at + GROUP) else { break };
        if group[GROUP - 1].wrapping_add(offset) >= limit {
            break;
        }
        for &p in group {
            set(marks, p.wrapping_add(offset) as usize);
        }
        at += GROUP;
    }
    at
}

/// The state of a sieve between segments: per-k cursors and two segments of marks.
#[derive(Debug)]
pub struct Sieve {
    /// The cursor of k at index k − 1, for every k with k² below the last segment's end.
    cursors: Vec<usize>,
    /// At index k − 1, the groups of p's k marked a block in the last segment, rounded
    /// (0 after a resync: the last block then marks everything).
    groups: Vec<u32>,
    /// One segment of marks per worker.
    marks: [Marks; 2],
    /// The start of the next segment the cursors are valid for; `None` forces a resync.
    next: Option<u64>,
    /// The P-positions below `next`, the copy the workers read.
    full: Lows,
    /// The P-positions below `next` that [`keeps`] puts in each sparse list.
    sparse: [Lows; 2],
    /// The largest k that may mark from a sparse list ([`sparse_list`]); it never falls
    /// between resyncs.
    sparse_up_to: u64,
    /// [`FULL_MARKS`], but settable by tests.
    full_marks: f64,
}

impl Default for Sieve {
    fn default() -> Self {
        Sieve::new()
    }
}

impl Sieve {
    /// A sieve with no state; the first segment (from any start) resyncs it.
    pub fn new() -> Self {
        let zeroed = || vec![0; LEN].try_into().expect("LEN bytes");
        Sieve {
            cursors: Vec::new(),
            groups: Vec::new(),
            marks: [zeroed(), zeroed()],
            next: None,
            full: Lows::default(),
            sparse: [Lows::default(), Lows::default()],
            sparse_up_to: 0,
            full_marks: FULL_MARKS,
        }
    }

    /// Classifies [lo, hi) and appends its P-positions to `found`, in order.
    ///
    /// `losing` must hold exactly the P-positions below `lo`, sorted, and
    /// `hi − lo ≤ SEGMENT`. Successive calls on consecutive ranges with the same, growing
    /// list reuse the cursors and the sieve's copy of the list; any other call resyncs
    /// them first.
    ///
    /// # Panics
    /// On a bad segment, and if P-positions lie `MAX_GAP` or more apart (none do to
    /// 10^10; the marks would then not be exact).
    pub fn classify(&mut self, losing: &[u64], lo: u64, hi: u64, found: &mut Vec<u64>) {
        assert!(lo < hi && hi - lo <= SEGMENT, "bad segment [{lo}, {hi})");
        let max_k = isqrt(hi - 1);
        let sparse_up_to = sparse_up_to(losing, lo, self.full_marks);
        let resume = self.next == Some(lo) && self.full.len() == losing.len();
        // The k's whose cursors are searched for anew, in the list each marks from.
        let searched = if resume {
            // A new k has k² ≥ the previous end = lo, so every p + k² ≥ lo: from p = 0.
            self.cursors.resize(max_k as usize, 0);
            self.groups.resize(max_k as usize, 0);
            // The k's that move from the whole list to a sparse one.
            let moved = self.sparse_up_to.max(FULL_MIN) + 1;
            self.sparse_up_to = sparse_up_to.max(self.sparse_up_to);
            moved..=self.sparse_up_to
        } else {
            // A list that did not come from this sieve (loaded from disk, or after a panic
            // left the cursors half-updated): the copies again, and every cursor.
            self.full = Lows::from_sorted(losing.iter().copied());
            self.sparse =
                [0, 1].map(|list| Lows::from_sorted(losing.iter().copied().filter(|&p| keeps(list, p))));
            self.sparse_up_to = sparse_up_to;
            self.cursors = vec![0; max_k as usize];
            self.groups = vec![0; max_k as usize];
            1..=max_k
        };
        let widest = self.sparse.iter().map(Lows::max_gap).fold(self.full.max_gap(), u64::max);
        assert!(widest < MAX_GAP, "P-positions {widest} apart: the marks modulo 2^32 would not be exact");
        let lists =
            Lists { full: &self.full, sparse: self.sparse.each_ref(), sparse_up_to: self.sparse_up_to };
        for k in searched {
            self.cursors[k as usize - 1] = lists.of(k).first_at_least(0, lo.saturating_sub(k * k));
            self.groups[k as usize - 1] = 0;
        }
        // A panic below leaves the cursors half-updated: the next call resyncs.
        self.next = None;
        // The P-positions found in the previous segment are past every cursor, but for
        // k² < SEGMENT some of them land below lo (finish_segment marked those): skip them.
        for (cursor, k) in self.cursors.iter_mut().zip(1..=isqrt(SEGMENT - 1)) {
            *cursor = first_at_least(losing, *cursor, lo.saturating_sub(k * k));
        }
        let chunk_len = (max_k as usize).div_ceil(CHUNKS).max(1);
        // The heaviest chunks (large k: the list is densest at small p) go first.
        let chunks = self.cursors.chunks_mut(chunk_len).zip(self.groups.chunks_mut(chunk_len));
        let queue = Mutex::new(chunks.enumerate().rev());
        let work = |marks: &mut Marks| {
            marks.fill(0);
            let mut starts = Vec::with_capacity(chunk_len);
            loop {
                // Not `while let`: that would hold the lock while marking.
                let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
                let Some((index, (cursors, groups))) = next else { break };
                let first_k = (index * chunk_len) as u64 + 1;
                mark_chunk(lists, (lo, hi), first_k, cursors, groups, &mut starts, marks);
            }
        };
        let [mine, theirs] = &mut self.marks;
        // A scoped thread, not rayon::join: inside the rayon pool, the waiting half could
        // steal a solve job that waits for this very extension (a deadlock), and a pool
        // busy with batches would run both halves one after the other. One spawn per
        // segment costs ~20 µs against milliseconds of marking.
        std::thread::scope(|scope| {
            scope.spawn(|| work(theirs));
            work(mine);
        });
        let first = found.len();
        finish_segment(mine, theirs, lists, lo, (hi - lo) as usize, found);
        for &p in &found[first..] {
            self.full.push(p);
            for (list, sparse) in self.sparse.iter_mut().enumerate() {
                if keeps(list, p) {
                    sparse.push(p);
                }
            }
        }
        self.next = Some(hi);
    }
}

/// Walks the segment in order: an unmarked number is a P-position, unless a pair the
/// sparse lists left out marks it ([`marked_by_dropped_pair`]), and a P-position then
/// marks the numbers a square above it inside the segment.
fn finish_segment(
    marks: &mut [u8; LEN],
    other: &[u8; LEN],
    lists: Lists,
    lo: u64,
    len: usize,
    found: &mut Vec<u64>,
) {
    const ALL_MARKED: u64 = u64::from_ne_bytes([1; 8]);
    let mut at = 0;
    while at < len {
        // Most numbers are winning (over 99% past 10^6): skip them 8 at a time.
        let word = |bytes: &[u8; LEN]| u64::from_ne_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        if at + 8 <= len && word(marks) | word(other) == ALL_MARKED {
            at += 8;
            continue;
        }
        let n = lo + at as u64;
        if marks[at] | other[at] == 0 && !marked_by_dropped_pair(lists, n) {
            found.push(n);
            for target in (1..).map(|k| at + k * k).take_while(|&target| target < len) {
                set(marks, target);
            }
        }
        at += 1;
    }
}

/// The largest k that may mark from a sparse list in the segment from `lo`: the k's
/// above it have runs that start among the first `full_marks` · √lo P-positions, the
/// densest part of the list, and mark from the whole list. A number n ≡ 1, 3 (mod 5)
/// then gets about `full_marks` marks from them (those runs hold that many P-positions a
/// √lo of k's, k ≢ 0 has k² ≡ 1 or 4, and n − k² falls on a residue that holds 46% or
/// 51% of the P-positions). 0 while the list is shorter: every k marks from it.
fn sparse_up_to(losing: &[u64], lo: u64, full_marks: f64) -> u64 {
    let among = (full_marks * (lo as f64).sqrt()).ceil() as usize;
    losing.get(among).map_or(0, |&p| isqrt(lo - p))
}

/// Whether a pair the sparse lists leave out marks `n`: a P-position p and a k in
/// (`FULL_MIN`, `sparse_up_to`], k ≢ 0 (mod 5), with p + k² = n; only n ≡ 1, 3 (mod 5)
/// can be marked so. Those numbers are nearly all winning (the last P-position among
/// them is below 10^7), and the few that no k marked are tested here. k descends, so
/// n − k² starts low in the list, where P-positions are dense and a winning n soon meets
/// one, and each test gallops up from the previous one's place.
fn marked_by_dropped_pair(lists: Lists, n: u64) -> bool {
    if !matches!(n % 5, 1 | 3) {
        return false;
    }
    let mut at = 0;
    (FULL_MIN + 1..=lists.sparse_up_to.min(isqrt(n))).rev().filter(|k| k % 5 != 0).any(|k| {
        let x = n - k * k;
        at = lists.full.first_at_least(at, x);
        at < lists.full.len() && lists.full.value(at) == x
    })
}

/// ⌊√n⌋, exact for every u64.
pub(super) fn isqrt(n: u64) -> u64 {
    let mut root = (n as f64).sqrt() as u64;
    while root.checked_mul(root).is_none_or(|square| square > n) {
        root -= 1;
    }
    while (root + 1).checked_mul(root + 1).is_some_and(|square| square <= n) {
        root += 1;
    }
    root
}

/// Every P-position below `end`, computed from scratch.
pub fn losing_positions_below(end: u64) -> Vec<u64> {
    let mut sieve = Sieve::new();
    losing_positions_by(end, SEGMENT, |losing, lo, hi, found| sieve.classify(losing, lo, hi, found))
}

/// Every P-position below `end`, from `classify(losing, lo, hi, found)` called on
/// consecutive ranges of `segment` numbers (this sieve's or the frozen baseline's).
pub(super) fn losing_positions_by<P: Copy>(
    end: u64,
    segment: u64,
    classify: impl FnMut(&[P], u64, u64, &mut Vec<P>),
) -> Vec<P> {
    extend_losing(Vec::new(), 0, end, segment, classify)
}

/// `losing`, the P-positions below `lo`, extended to those below `end` as
/// [`losing_positions_by`] does.
fn extend_losing<P: Copy>(
    mut losing: Vec<P>,
    mut lo: u64,
    end: u64,
    segment: u64,
    mut classify: impl FnMut(&[P], u64, u64, &mut Vec<P>),
) -> Vec<P> {
    let mut found = Vec::new();
    while lo < end {
        let hi = (lo + segment).min(end);
        found.clear();
        classify(&losing, lo, hi, &mut found);
        losing.extend_from_slice(&found);
        lo = hi;
    }
    losing
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::games::exhaustive::stone_game_iv_wins_below;
    use crate::games::stone_game_iv::baseline;

    /// The plain definition over every n, as the list of P-positions.
    fn dense_losing_below(end: usize) -> Vec<u64> {
        let wins = stone_game_iv_wins_below(end);
        (0..end).filter(|&n| !wins[n]).map(|n| n as u64).collect()
    }

    /// The frozen baseline's list, as `u64`s.
    fn baseline_below(end: u64) -> Vec<u64> {
        baseline::losing_positions_below(end).into_iter().map(u64::from).collect()
    }

    #[test]
    fn equals_the_dense_definition_up_to_a_million() {
        assert_eq!(losing_positions_below(1_000_001), dense_losing_below(1_000_001));
    }

    #[test]
    fn counts_below_ten_to_the_five_match_the_dense_definition() {
        let dense = dense_losing_below(100_000).len();
        assert_eq!(losing_positions_below(100_000).len(), dense);
        // The count recorded in the README, checked here against the plain definition.
        assert_eq!(dense, 2_781);
    }

    #[test]
    fn counts_below_ten_to_the_seven() {
        let losing = losing_positions_below(10_000_001);
        // 69,489 is the count of P-positions n < 10^7; 10^7 itself is winning.
        assert_eq!(losing.partition_point(|&p| p < 10_000_000), 69_489);
        assert_eq!(losing.len(), 69_489);
    }

    #[test]
    fn resuming_from_any_split_gives_the_same_list() {
        let end = 3 * SEGMENT + 12_345;
        let whole = losing_positions_below(end);
        for split in [1, 777, SEGMENT - 1, SEGMENT, SEGMENT + 5, 2 * SEGMENT + 99] {
            // A fresh sieve must resync its cursors from the list alone.
            let mut sieve = Sieve::new();
            let classify =
                |losing: &[u64], lo, hi, found: &mut Vec<u64>| sieve.classify(losing, lo, hi, found);
            let losing = extend_losing(losing_positions_below(split), split, end, SEGMENT / 3, classify);
            assert_eq!(losing, whole, "split at {split}");
        }
    }

    /// The P-positions below `end` from a sieve whose full-list k's reach `full_marks`.
    fn losing_below_with(end: u64, full_marks: f64) -> Vec<u64> {
        let mut sieve = Sieve { full_marks, ..Sieve::new() };
        losing_positions_by(end, SEGMENT, |losing, lo, hi, found| sieve.classify(losing, lo, hi, found))
    }

    #[test]
    fn every_pair_a_sparse_list_drops_marks_a_number_congruent_to_1_or_3_mod_5() {
        for k in [FULL_MIN + 1, FULL_MIN + 2, FULL_MIN + 3, FULL_MIN + 4, FULL_MIN + 5] {
            let list = sparse_list(k, u64::MAX);
            assert_eq!(list.is_none(), k % 5 == 0, "k = {k}");
            for p in 0..5u64 {
                let target = (p + k * k) % 5;
                let kept = list.is_none_or(|list| keeps(list, p));
                assert!(kept || matches!(target, 1 | 3), "k = {k}, p ≡ {p} drops a mark on ≡ {target}");
            }
        }
        // The k's up to FULL_MIN and above `sparse_up_to` mark from the whole list.
        assert_eq!(sparse_list(FULL_MIN, u64::MAX), None);
        assert_eq!(sparse_list(FULL_MIN + 7, FULL_MIN + 6), None);
    }

    #[test]
    fn equals_the_baseline_sieve_to_ten_to_the_seven() {
        // 44 P-positions ≡ 1, 3 (mod 5) lie below 10^7, each tested pair by pair.
        let losing = losing_positions_below(10_000_000);
        assert_eq!(losing, baseline_below(10_000_000));
        assert_eq!(losing.iter().filter(|&&p| matches!(p % 5, 1 | 3)).count(), 44);
    }

    #[test]
    fn few_full_marks_leave_many_numbers_to_test_and_change_nothing() {
        // With one full mark a number, sparse lists start at a few hundred thousand and
        // thousands of numbers ≡ 1, 3 survive the marks to be tested one by one.
        let end = 4_000_000;
        let expected = baseline_below(end);
        for full_marks in [0.5, 1.0, 3.0] {
            assert_eq!(losing_below_with(end, full_marks), expected, "full_marks {full_marks}");
        }
        // And with none at all: every k marks from the whole list.
        assert_eq!(losing_below_with(end, 1e9), expected);
    }

    #[test]
    fn resuming_with_sparse_lists_rebuilds_them_from_the_list() {
        let end = 3_000_000;
        let whole = losing_below_with(end, 1.0);
        for split in [SEGMENT * 5, SEGMENT * 7 + 99, 2_222_222] {
            let mut sieve = Sieve { full_marks: 1.0, ..Sieve::new() };
            let classify =
                |losing: &[u64], lo, hi, found: &mut Vec<u64>| sieve.classify(losing, lo, hi, found);
            let losing = extend_losing(losing_below_with(split, 1.0), split, end, SEGMENT, classify);
            assert!(sieve.sparse_up_to > FULL_MIN, "the sparse lists are in use");
            assert_eq!(losing, whole, "split at {split}");
        }
    }

    /// Classifies [lo, lo + len) the plain way, against any sorted list `below` (the
    /// P-positions below lo, or a made-up list): each p marks p + k² in the window, k from
    /// ⌈√(lo − p)⌉ up, then the window is walked in order.
    fn classify_plainly(below: &[u64], lo: u64, len: u64) -> Vec<u64> {
        let mut wins = vec![false; len as usize];
        for &p in below {
            let first = isqrt(lo - p - 1) + 1;
            for square in (first..).map(|k| k * k).take_while(|&square| p + square < lo + len) {
                wins[(p + square - lo) as usize] = true;
            }
        }
        let mut found = Vec::new();
        for at in 0..len {
            if !wins[at as usize] {
                found.push(lo + at);
                for square in (1..).map(|k| k * k).take_while(|&square| at + square < len) {
                    wins[(at + square) as usize] = true;
                }
            }
        }
        found
    }

    /// A made-up sorted list below `lo` (> 2^32) that gives every kind of k work above
    /// 2^32: the P-positions below 10^5, sparse values up to 2^27 (the runs of the k's
    /// with k² ≈ lo), values ≡ 1 (mod 5, so in both sparse lists) every 2^27, and a dense
    /// cluster just below `lo`, where k² > 2^32 would wrap p + k² − lo past 2^32.
    fn made_up_list_below(lo: u64) -> Vec<u64> {
        let mut state = 0x5EED_u64;
        let mut random = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            state >> 33
        };
        let mut list = losing_positions_below(100_000);
        list.extend((0..20_000).map(|_| 100_000 + random() % (1 << 27)));
        list.extend((1..lo >> 27).map(|i| (i << 27) / 5 * 5 + 1));
        list.extend((0..3000).map(|_| lo - 1 - random() % (1 << 20)));
        list.sort_unstable();
        list.dedup();
        list
    }

    /// The sieve's P-positions in [lo, end) from `below`, a fresh sieve (a resync) then
    /// segment by segment, whose full-list k's reach `full_marks`.
    fn sieved_window(below: &[u64], lo: u64, end: u64, full_marks: f64) -> (Vec<u64>, Sieve) {
        let mut sieve = Sieve { full_marks, ..Sieve::new() };
        let classify = |losing: &[u64], lo, hi, found: &mut Vec<u64>| sieve.classify(losing, lo, hi, found);
        let sieved = extend_losing(below.to_vec(), lo, end, SEGMENT, classify);
        (sieved[below.len()..].to_vec(), sieve)
    }

    #[test]
    fn windows_above_2_to_the_32_match_the_plain_marks_from_a_resync() {
        for lo in [(1u64 << 32) + 12_345, (1 << 32) + (1 << 27) + 7] {
            let below = made_up_list_below(lo);
            // Every k from the whole list, over three segments.
            let end = lo + 2 * SEGMENT + 999;
            let plain = classify_plainly(&below, lo, end - lo);
            assert!(plain.len() > 100, "P-positions in the window: {}", plain.len());
            assert_eq!(sieved_window(&below, lo, end, 1e9).0, plain, "lo = {lo}");
            // Few full marks, so that the short list still puts k's in the sparse lists;
            // most numbers ≡ 1, 3 are then tested pair by pair: a short window.
            let end = lo + 300;
            let (sieved, sieve) = sieved_window(&below, lo, end, 0.1);
            assert!(sieve.sparse_up_to > FULL_MIN, "the sparse lists are in use");
            assert_eq!(sieved, classify_plainly(&below, lo, end - lo), "lo = {lo}");
        }
    }

    #[test]
    #[should_panic(expected = "apart")]
    fn p_positions_too_far_apart_for_exact_marks_are_refused() {
        let below = [0, 2, 5, MAX_GAP + 5];
        Sieve::new().classify(&below, MAX_GAP + 10, MAX_GAP + 100, &mut Vec::new());
    }

    proptest! {
        #[test]
        fn isqrt_is_the_floor_root(n in any::<u64>()) {
            let root = isqrt(n);
            prop_assert!(root * root <= n && (root + 1).checked_mul(root + 1).is_none_or(|sq| sq > n));
        }
    }
}

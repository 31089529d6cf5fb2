//! The segmented sieve that grows the sorted list of Stone Game IV P-positions.
//!
//! n is winning iff some P-position p has n − p = k², so every known p "marks" p + k²
//! for every k. P-positions are sparse (1,727,524 below 10^9), so the work is the number
//! of (p, k) pairs, 4.0·10^10 up to 10^9, one byte store each, less those dropped below.
//! The range is cut into segments of [`SEGMENT`] numbers, one byte a number, and each
//! worker marks a segment one L1-sized block at a time.
//!
//! ## Numbers ≡ 1, 3 (mod 5)
//!
//! Below 10^9 the P-positions fall by residue mod 5 as 797,384 / 8 / 889,636 / 36 /
//! 40,460 (≡ 0 / 1 / 2 / 3 / 4): the 44 that are ≡ 1 or 3 all lie below 10^7. Yet those
//! numbers took most of the work: on [10^9 − 2^20, 10^9) each gets 72 marks, 63% of all
//! marks there. So the k's ≢ 0 (mod 5) between `FULL_MIN` and `sparse_up_to` mark from
//! a sparse list (`keeps`: p ≡ 1, 3, 4 for k² ≡ 1, p ≡ 0, 1, 3 for k² ≡ 4) that drops
//! exactly the pairs landing on ≡ 1, 3; every other k marks from the whole list. The
//! largest k's are the ones kept whole: their runs are the densest, the start of the list,
//! and they hold the first `FULL_MARKS` · √lo P-positions, so a number ≡ 1, 3 still gets
//! about that many marks, and `finish_segment` tests the few left unmarked against the
//! dropped pairs one by one (`marked_by_dropped_pair`). Whatever the residues do past
//! 10^9, the result is exact: a dropped pair is only ever skipped in the marks, never in
//! the test.
//!
//! Measured (release build, shared 2-core machine):
//! - Which k's to keep whole, on that last 2^20 with the 10^9 list (a scratch program):
//!   the marks a number ≡ 1, 3 gets from them against the share left unmarked. The top
//!   2,513 k's: 10.7 marks, 1.5·10^-3; the top 4,513: 16.9, 9.3·10^-5; k ≤ 8,000: 14.6,
//!   4.3·10^-4; every 4th k: 18.8, 6.2·10^-5. The survivors fall like e^(−marks/2), not
//!   e^(−marks) (the marks bunch), alike whichever k's give them; the top k's give them
//!   with the fewest k's, so the fewest visits.
//! - A survivor costs ~700 tests of ~30 ns (a gallop in the whole list), ~20 µs, on the
//!   one thread that finishes the segment. Sieving to 10^9 (counts to 9.4·10^8),
//!   `FULL_MARKS` 16: 1.94·10^10 marks, 108,329 survivors, 62 M tests, 5.92 s wall; 24:
//!   2.22·10^10, 5,708, 4.1 M, 4.84 s; 32: 2.56·10^10, 267, 0.2 M, 5.01 s; every k
//!   whole: 3.66·10^10 marks, 5.97 s. Interleaved `iv_cold` runs, 3 each, medians: 18:
//!   5.53 s wall, 9.48 s CPU; 24: 4.92 s, 9.02 s; 30: 5.27 s, 9.54 s.
//! - The sparse lists' k's mark a segment in one visit, in its last block (the stores
//!   then reach the whole 256 KiB segment, in L2), instead of one visit a block:
//!   4.84 → 4.72 s. Blocks of 2^16 to 2^18 for every k, or prefetching 4 or 8 lines
//!   instead of 2: within the noise (4.9–5.4 s).
//! - Result, `iv_cold --baseline --runs 3 1000000000`, medians: wall 8.90 s baseline,
//!   4.89 s (0.55×); CPU 16.90 s, 8.97 s (0.53×); the sieve just before this change
//!   gave 0.69× in the same sitting. A mark now costs ~1.6 cycles of CPU, not ~1.2: the
//!   runs are shorter, so the list's first load and the visit weigh more per mark.
//! - Left alone: numbers ≡ 4. Their P-positions thin out (2.3% of those near 10^9) but
//!   number 40,460 below it, and each would be tested against ~25,000 dropped k's
//!   (~0.75 ms): about 30 s.
//!
//! For one block and one k, the p's that mark it form a contiguous run of the sorted
//! list, and the run for the next block starts where this one ended; a cursor per k
//! remembers that spot, so no search is needed per (block, k). The first load at each
//! cursor is what the sieve waited on (half of its samples under `perf`): the list
//! (7 MB at 10^9) is streamed once a block and is no longer cached when the next block
//! comes back to it, so the cursors a few k's ahead are prefetched. The k's of a segment
//! are cut into `CHUNKS` runs of consecutive k's, taken largest k first by whichever of
//! two workers (the caller and a scoped thread) is free, each into its own marks; the
//! segment is then finished in order, reading both marks, since a P-position found inside
//! it marks later numbers of the same segment.
//!
//! Every block but a segment's last marks a fixed number of groups per k (what the k
//! marked a block in the previous segment), not up to the end of the k's run in the
//! block: near 10^9 a (block, k) visit stores ~49 marks (kernel below), and the exit of a
//! loop that looks for the run's end was mispredicted about once a visit. Stores that
//! land past the block (or cursors that fall behind) cost an L1 miss now and then; the
//! last block marks every run exactly up to the segment's end, so the marks do not depend
//! on the counts.
//!
//! Until issue 11's second round the k's were split by parity, each worker with its own
//! cursors, and the two marks were OR-ed before the finish. Consecutive k's instead keep
//! each worker on its own part of the list (the runs of nearby k's overlap for small k),
//! balance the two on the fly (a worker preempted by another process no longer holds up
//! the segment), and drop the OR pass; which of the three gains most was not separated.
//! Trying sweeps over the whole segment for large k only (k ≥ 1,024 or ≥ 8,192, to
//! save the per-(block, k) cursor work: ~41 stores a visit at 10^9) measured 4–13% more
//! CPU at 3·10^8 (single runs, machine shared) than 2^15 blocks for every k, so every k keeps the L1 blocks.
//!
//! Measured side by side with the pre-issue-11 sieve (`stone_game_iv::baseline`) on
//! the 2^25 numbers above 9.6·10^8 (a scratch loop over the saved 10^9 list), CPU time,
//! medians of 5, for the parity split: 0.64×; with the prefetch, blocks of 2^15..2^18
//! alike (0.70–0.75×); without it, blocks of 2^15 0.83× and 2^16 1.24×. Bytes beat bits,
//! as measured before issue 11 (bitsets 10% slower at 10^8). Whole runs to 10^9, the
//! baseline, the parity split and this sieve interleaved in one run, medians of 3, both
//! cores free: wall 8.69 s, 8.19 s (0.94×), 6.96 s (0.80×; 0.85× the parity split); CPU
//! 16.58 s, 15.53 s, 13.19 s. The baseline's time varies most from run to run (9 to 14 s
//! wall in one `iv_cold --baseline` run), so its ratio does too: 0.52× and 0.81× wall in
//! two such runs minutes apart; issue 11's goal of ≤ 0.6× is not reliably met.
//!
//! Issue 11's third round measured with a scratch example (not kept): "kernel" marks the
//! 128 segments from 9.6·10^8 with the saved 10^9 list on one thread (1.58·10^9 marks, the
//! variants interleaved, ns a mark, medians of 3); "whole" runs
//! `losing_positions_below(10^9)` with two workers (CPU s, the variants interleaved,
//! medians of 3). The machine was shared throughout (other builds running, wall times from
//! 6 to 17 s for the same code), so only figures from one run compare, and CPU time is the
//! steadier one. Kept, whole: the fixed counts 14.75 → 12.62 s (kernel 0.371 → 0.332 ns,
//! and 0.404 → 0.374 in another run); the last block's leftover p's as one group ending the
//! run 11.90 → 11.49 s; groups of 16 instead of 8 11.91 → 11.25 s (12: 11.75 s; another run
//! 11.62 → 11.23 s). Where the time goes (kernel, fixed counts without the run-end check,
//! same run): no stores at all 0.18–0.21 ns against 0.33–0.38 with them, the stores sent to
//! a 4 KiB area instead 0.24–0.25; so stores into the block take about half, and a visit
//! costs ~5–6 ns besides its marks (before the fixed counts, k descending, blocks of 2^14
//! 0.51 ns, 2^15 0.36–0.39, 2^16 0.32–0.33, 2^17 0.36, 2^18 0.33). Tried and not kept:
//! unchecked stores (`get_unchecked_mut`, no index mask) 11.62 → 11.12 s whole, but a
//! caller passing an unsorted list to this safe API could then write out of bounds; the
//! descending order of k 11.62 → 11.52 s whole (noise); counts smoothed over windows of 16
//! to 2,048 k's, 11.3–11.9 s against 11.8–12.2 s (noise); `CHUNKS` of 32 or 64, same CPU;
//! prefetching every line of the fixed run 3 or 6 k's ahead, 12.25–12.47 s against
//! 11.94–12.28 s; with the fixed counts (kernel), blocks of 2^14 0.348 ns (the old code at
//! 2^15: 0.371) and 2^16 0.411 (old at 2^16: 0.348), where 2^15 gave 0.339 (old: 0.358);
//! prefetchnta instead of prefetcht0 0.410 vs 0.438 ns and 0.379 vs 0.371 (noise); the
//! run's end found by a branchless binary search over 128 p's, 0.546 vs 0.372 ns, still
//! 0.53–0.60 vs 0.39–0.45 when done 1 to 8 k's ahead. Before the fixed counts, in a first
//! kernel that left k < 512 idle (1.6% of the k's; approximate): two k's interleaved in one
//! loop 0.379 vs 0.356 ns; blocks taken in serpentine order of k 0.385 vs 0.366; one visit
//! per segment into a bitset of the segment (32 KiB) 0.489 vs 0.358; prefetching 4 lines
//! instead of 2, or 6 or 10 k's ahead instead of 3, within ±4%.
//!
//! `iv_cold --baseline --runs 3 1000000000` after these changes: wall 9.23 s baseline,
//! 6.45 s current (0.70×); CPU 17.23 s, 11.42 s (0.66×); its third current run lost a core
//! to another process (11.36 s wall). The goal of ≤ 0.6× wall is still not met.
//! Also tried after the round: the finish pass's in-segment marks (~150,000 scattered
//! stores a segment near 10^9, on one thread) into a 32 KiB bitset instead of the 256 KiB
//! byte marks, `iv_cold --runs 1 1000000000` alternately three times: wall 6.17, 6.64,
//! 6.66 s against 6.11, 6.15, 6.76 s, CPU alike: no gain, not kept.

use std::sync::{Mutex, PoisonError};

use super::gallop::first_at_least;

/// Numbers classified per segment: 2^18, the unit the table publishes and the two
/// workers split (one thread spawn a segment).
pub const SEGMENT: u64 = 1 << 18;

const LEN: usize = SEGMENT as usize;

/// Numbers marked per block: 2^15, so that a worker's stores into the block (32 KiB)
/// stay in this machine's 48 KiB L1.
const BLOCK: u64 = 1 << 15;

/// How many k's ahead a worker prefetches the list at their cursors (3 and 4 measure
/// alike; 8 and 16 slightly worse).
const PREFETCH_AHEAD: usize = 3;

/// Chunks of consecutive k's a segment is cut into, taken in turn by whichever worker is
/// free.
const CHUNKS: usize = 16;

/// P-positions marked per step: one check of the step's last p, then plain stores. 16,
/// since the counts are fixed (12 and 8 cost 4% and 6% more CPU: "whole" runs above).
const GROUP: usize = 16;

/// Every k up to this marks from the whole list: k² < SEGMENT reaches from a segment into
/// the next, and [`finish_segment`] makes those marks from the P-positions it finds.
const FULL_MIN: u64 = 1 << 9;

/// The largest k's mark from the whole list while their runs start among the first
/// `FULL_MARKS` · √lo P-positions: a number ≡ 1, 3 (mod 5) then gets about this many
/// marks from them, so few survive to be tested one by one.
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
fn keeps(list: usize, p: u32) -> bool {
    matches!((list, p % 5), (0, 1 | 3 | 4) | (1, 0 | 1 | 3))
}

/// The lists the k's of a segment mark from.
#[derive(Clone, Copy)]
struct Lists<'a> {
    full: &'a [u32],
    sparse: [&'a [u32]; 2],
    sparse_up_to: u64,
}

impl<'a> Lists<'a> {
    fn of(&self, k: u64) -> &'a [u32] {
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
        // load would stall the loop it is meant to feed; it cuts CPU time by a quarter.
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
/// predicted; checking for the run's end instead cost a mispredicted branch a (block, k). Stores past the block still
/// land in the segment (each group is checked against its end), the cursors that fall
/// behind catch up in the last block, and the last block marks the rest exactly.
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
        // The list is sorted and p + k² < 2^32, so the p's below `limit` are a prefix.
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
/// cursors a few k's ahead, and stores the cursor it returns. Unless `every_k`, the k's
/// that mark from a sparse list are left out: their runs are short (under half the
/// list's P-positions, and under 3% for k² ≡ 1), so the segment's last block marks them
/// whole, one visit a segment instead of one a block (4.84 → 4.72 s to 10^9, module doc).
/// `offset` is k² − `lo` as a wrapping u32: for p at or past the cursor, p + k² − lo lies
/// in [0, 2^32), so the wrapping sum p + offset is exact.
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
    for i in 0..count {
        let k = first_k + i as u64;
        if !every_k && sparse_list(k, lists.sparse_up_to).is_some() {
            continue;
        }
        if let Some(&ahead) = cursors.get(i + PREFETCH_AHEAD) {
            prefetch(lists.of(k + PREFETCH_AHEAD as u64), ahead);
        }
        let offset = (k * k).wrapping_sub(lo) as u32;
        cursors[i] = mark(lists.of(k), i, offset, cursors[i]);
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
    /// The P-positions below `next` that [`keeps`] puts in each sparse list.
    sparse: [Vec<u32>; 2],
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
            sparse: [Vec::new(), Vec::new()],
            sparse_up_to: 0,
            full_marks: FULL_MARKS,
        }
    }

    /// Classifies [lo, hi) and appends its P-positions to `found`, in order.
    ///
    /// `losing` must hold exactly the P-positions below `lo`, sorted, and
    /// `hi − lo ≤ SEGMENT`, `hi ≤ 2^32`. Successive calls on consecutive ranges with the
    /// same, growing list reuse the cursors; any other call resyncs them first.
    pub fn classify(&mut self, losing: &[u32], lo: u64, hi: u64, found: &mut Vec<u32>) {
        assert!(lo < hi && hi - lo <= SEGMENT && hi <= 1 << 32, "bad segment [{lo}, {hi})");
        let max_k = isqrt(hi - 1);
        let sparse_up_to = sparse_up_to(losing, lo, self.full_marks);
        // The k's whose cursors are searched for anew, in the list each marks from.
        let searched = if self.next == Some(lo) {
            // A new k has k² ≥ the previous end = lo, so every p + k² ≥ lo: from p = 0.
            self.cursors.resize(max_k as usize, 0);
            self.groups.resize(max_k as usize, 0);
            // The k's that move from the whole list to a sparse one.
            let moved = self.sparse_up_to.max(FULL_MIN) + 1;
            self.sparse_up_to = sparse_up_to.max(self.sparse_up_to);
            moved..=self.sparse_up_to
        } else {
            // A list that did not come from this sieve (loaded from disk, or after a panic
            // left the cursors half-updated): the sparse lists again, and every cursor.
            self.sparse = [0, 1].map(|list| losing.iter().copied().filter(|&p| keeps(list, p)).collect());
            self.sparse_up_to = sparse_up_to;
            self.cursors = vec![0; max_k as usize];
            self.groups = vec![0; max_k as usize];
            1..=max_k
        };
        let sparse = self.sparse.each_ref().map(Vec::as_slice);
        let lists = Lists { full: losing, sparse, sparse_up_to: self.sparse_up_to };
        for k in searched {
            self.cursors[k as usize - 1] = first_at_least(lists.of(k), 0, lo.saturating_sub(k * k));
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
        for (list, sparse) in self.sparse.iter_mut().enumerate() {
            sparse.extend(found[first..].iter().filter(|&&p| keeps(list, p)));
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
    found: &mut Vec<u32>,
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
            found.push(n as u32);
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
fn sparse_up_to(losing: &[u32], lo: u64, full_marks: f64) -> u64 {
    let among = (full_marks * (lo as f64).sqrt()).ceil() as usize;
    losing.get(among).map_or(0, |&p| isqrt(lo - u64::from(p)))
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
        at = first_at_least(lists.full, at, x);
        lists.full.get(at).is_some_and(|&p| u64::from(p) == x)
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

/// Every P-position below `end` (at most 2^32), computed from scratch.
pub fn losing_positions_below(end: u64) -> Vec<u32> {
    let mut sieve = Sieve::new();
    losing_positions_by(end, SEGMENT, |losing, lo, hi, found| sieve.classify(losing, lo, hi, found))
}

/// Every P-position below `end`, from `classify(losing, lo, hi, found)` called on
/// consecutive ranges of `segment` numbers (this sieve's or the frozen baseline's).
pub(super) fn losing_positions_by(
    end: u64,
    segment: u64,
    classify: impl FnMut(&[u32], u64, u64, &mut Vec<u32>),
) -> Vec<u32> {
    extend_losing(Vec::new(), 0, end, segment, classify)
}

/// `losing`, the P-positions below `lo`, extended to those below `end` as
/// [`losing_positions_by`] does.
fn extend_losing(
    mut losing: Vec<u32>,
    mut lo: u64,
    end: u64,
    segment: u64,
    mut classify: impl FnMut(&[u32], u64, u64, &mut Vec<u32>),
) -> Vec<u32> {
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
    fn dense_losing_below(end: usize) -> Vec<u32> {
        let wins = stone_game_iv_wins_below(end);
        (0..end).filter(|&n| !wins[n]).map(|n| n as u32).collect()
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
                |losing: &[u32], lo, hi, found: &mut Vec<u32>| sieve.classify(losing, lo, hi, found);
            let losing = extend_losing(losing_positions_below(split), split, end, SEGMENT / 3, classify);
            assert_eq!(losing, whole, "split at {split}");
        }
    }

    /// The P-positions below `end` from a sieve whose full-list k's reach `full_marks`.
    fn losing_below_with(end: u64, full_marks: f64) -> Vec<u32> {
        let mut sieve = Sieve { full_marks, ..Sieve::new() };
        losing_positions_by(end, SEGMENT, |losing, lo, hi, found| sieve.classify(losing, lo, hi, found))
    }

    #[test]
    fn every_pair_a_sparse_list_drops_marks_a_number_congruent_to_1_or_3_mod_5() {
        for k in [FULL_MIN + 1, FULL_MIN + 2, FULL_MIN + 3, FULL_MIN + 4, FULL_MIN + 5] {
            let list = sparse_list(k, u64::MAX);
            assert_eq!(list.is_none(), k % 5 == 0, "k = {k}");
            for p in 0..5u32 {
                let target = (u64::from(p) + k * k) % 5;
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
        assert_eq!(losing, baseline::losing_positions_below(10_000_000));
        assert_eq!(losing.iter().filter(|&&p| matches!(p % 5, 1 | 3)).count(), 44);
    }

    #[test]
    fn few_full_marks_leave_many_numbers_to_test_and_change_nothing() {
        // With one full mark a number, sparse lists start at a few hundred thousand and
        // thousands of numbers ≡ 1, 3 survive the marks to be tested one by one.
        let end = 4_000_000;
        let expected = baseline::losing_positions_below(end);
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
                |losing: &[u32], lo, hi, found: &mut Vec<u32>| sieve.classify(losing, lo, hi, found);
            let losing = extend_losing(losing_below_with(split, 1.0), split, end, SEGMENT, classify);
            assert!(sieve.sparse_up_to > FULL_MIN, "the sparse lists are in use");
            assert_eq!(losing, whole, "split at {split}");
        }
    }

    proptest! {
        #[test]
        fn isqrt_is_the_floor_root(n in any::<u64>()) {
            let root = isqrt(n);
            prop_assert!(root * root <= n && (root + 1).checked_mul(root + 1).is_none_or(|sq| sq > n));
        }
    }
}

//! The segmented sieve that grows the sorted list of Stone Game IV P-positions.
//!
//! n is winning iff some P-position p has n − p = k², so every known p "marks" p + k²
//! for every k. P-positions are sparse (1,727,524 below 10^9), so the work is the number
//! of (p, k) pairs, 4.0·10^10 up to 10^9, one byte store each. The range is cut into
//! segments of [`SEGMENT`] numbers, one byte a number, and each worker marks a segment
//! one L1-sized block at a time.
//!
//! For one block and one k, the p's that mark it form a contiguous run of the sorted
//! list, and the run for the next block starts where this one ended; a cursor per k
//! remembers that spot, so no search is needed per (block, k). The first load at each
//! cursor is what the sieve waited on (half of its samples under `perf`): the list
//! (7 MB at 10^9) is streamed once a block and is no longer cached when the next block
//! comes back to it, so the cursors a few k's ahead are prefetched. The k's are split
//! between two workers by parity (even/odd k mark nearly equal counts), each with its
//! own marks and cursors, the odd ones on a scoped thread; the two are OR-ed and the
//! segment is then finished in order, since a P-position found inside it marks later
//! numbers of the same segment.
//!
//! Measured side by side with the pre-issue-11 sieve (`stone_game_iv::baseline`) on
//! the 2^25 numbers above 9.6·10^8 (a scratch loop over the saved 10^9 list), CPU time,
//! medians of 5: this sieve 0.64×; with the prefetch, blocks of 2^15..2^18 alike
//! (0.70–0.75×); without it, blocks of 2^15 0.83× and 2^16 1.24×. Bytes beat bits, as
//! measured before issue 11 (bitsets 10% slower at 10^8). Whole runs, both sieves in one
//! run: `cargo run --release --example iv_cold -- --baseline` (10^9, medians of 3:
//! 0.63× CPU, 0.67× wall).

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

/// P-positions marked per step: one check of the step's last p, then plain stores.
const GROUP: usize = 8;

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

/// The k's of one parity: their cursors and the marks they make.
#[derive(Debug)]
struct Worker {
    /// 1 or 2: this worker handles k = first_k, first_k + 2, ...
    first_k: u64,
    /// For the i-th k of this worker, the index in the list of the first p whose mark
    /// p + k² is not made yet.
    cursors: Vec<usize>,
    marks: Marks,
}

impl Worker {
    fn new(first_k: u64) -> Self {
        Worker { first_k, cursors: Vec::new(), marks: vec![0; LEN].try_into().expect("LEN bytes") }
    }

    fn ks(&self, max_k: u64) -> impl Iterator<Item = u64> {
        (self.first_k..=max_k).step_by(2)
    }

    /// Recomputes every cursor by binary search, for a list that did not come from this
    /// sieve (loaded from disk, or after a panic left the cursors half-updated).
    fn resync(&mut self, losing: &[u32], lo: u64, max_k: u64) {
        self.cursors = self.ks(max_k).map(|k| first_at_least(losing, 0, lo.saturating_sub(k * k))).collect();
    }

    /// Marks p + k² in [lo, hi) for every known P-position p < lo and every k of this
    /// worker with k² < hi.
    fn mark(&mut self, losing: &[u32], lo: u64, hi: u64) {
        self.marks.fill(0);
        // The P-positions found in the previous segment are past every cursor, but for
        // k² < SEGMENT some of them land below lo (finish_segment marked those): skip them.
        let small = self.ks(isqrt(SEGMENT - 1)).take(self.cursors.len());
        for (cursor, k) in self.cursors.iter_mut().zip(small) {
            *cursor = first_at_least(losing, *cursor, lo.saturating_sub(k * k));
        }
        let mut block_lo = lo;
        while block_lo < hi {
            let block_hi = (block_lo + BLOCK).min(hi);
            self.mark_block(losing, lo, hi, block_hi);
            block_lo = block_hi;
        }
    }

    /// Marks up to `block_hi` in the segment [lo, hi): for each k, every group of p's
    /// from the cursor on that lands whole below `block_hi`. A group straddling the end
    /// is left to the next block (its stores still land inside the segment), and the last
    /// block finishes the runs one p at a time, up to `hi`.
    fn mark_block(&mut self, losing: &[u32], lo: u64, hi: u64, block_hi: u64) {
        let limit = (block_hi - lo) as u32;
        for (i, k) in self.ks(isqrt(block_hi - 1)).enumerate() {
            if i == self.cursors.len() {
                // k² ≥ this block's start ≥ lo, so every p + k² ≥ lo.
                self.cursors.push(0);
            }
            if let Some(&ahead) = self.cursors.get(i + PREFETCH_AHEAD) {
                prefetch(losing, ahead);
            }
            // p + k² − lo for p at or past the cursor lies in [0, hi − lo): the wrapping
            // u32 sum is exact, and one below `limit` lands before `block_hi`.
            let offset = (k * k).wrapping_sub(lo) as u32;
            let mut at = self.cursors[i];
            while let Some(group) = losing.get(at..at + GROUP) {
                if group[GROUP - 1].wrapping_add(offset) >= limit {
                    break;
                }
                for &p in group {
                    set(&mut self.marks, p.wrapping_add(offset) as usize);
                }
                at += GROUP;
            }
            if block_hi == hi {
                while let Some(&p) = losing.get(at).filter(|&&p| p.wrapping_add(offset) < limit) {
                    set(&mut self.marks, p.wrapping_add(offset) as usize);
                    at += 1;
                }
            }
            self.cursors[i] = at;
        }
    }
}

/// The state of a sieve between segments: per-k cursors and two segments of marks.
#[derive(Debug)]
pub struct Sieve {
    even: Worker,
    odd: Worker,
    /// The start of the next segment the cursors are valid for; `None` forces a resync.
    next: Option<u64>,
}

impl Default for Sieve {
    fn default() -> Self {
        Sieve::new()
    }
}

impl Sieve {
    /// A sieve with no state; the first segment (from any start) resyncs it.
    pub fn new() -> Self {
        Sieve { even: Worker::new(2), odd: Worker::new(1), next: None }
    }

    /// Classifies [lo, hi) and appends its P-positions to `found`, in order.
    ///
    /// `losing` must hold exactly the P-positions below `lo`, sorted, and
    /// `hi − lo ≤ SEGMENT`, `hi ≤ 2^32`. Successive calls on consecutive ranges with the
    /// same, growing list reuse the cursors; any other call resyncs them first.
    pub fn classify(&mut self, losing: &[u32], lo: u64, hi: u64, found: &mut Vec<u32>) {
        assert!(lo < hi && hi - lo <= SEGMENT && hi <= 1 << 32, "bad segment [{lo}, {hi})");
        if self.next != Some(lo) {
            let max_k = isqrt(hi - 1);
            self.even.resync(losing, lo, max_k);
            self.odd.resync(losing, lo, max_k);
        }
        // A panic below leaves the cursors half-updated: the next call resyncs.
        self.next = None;
        let (even, odd) = (&mut self.even, &mut self.odd);
        // A scoped thread, not rayon::join: inside the rayon pool, the waiting half could
        // steal a solve job that waits for this very extension (a deadlock), and a pool
        // busy with batches would run both halves one after the other. One spawn per
        // segment costs ~20 µs against milliseconds of marking.
        std::thread::scope(|scope| {
            scope.spawn(|| odd.mark(losing, lo, hi));
            even.mark(losing, lo, hi);
        });
        let marks = &mut self.even.marks;
        for (mark, other) in marks.iter_mut().zip(self.odd.marks.iter()) {
            *mark |= other;
        }
        finish_segment(marks, lo, (hi - lo) as usize, found);
        self.next = Some(hi);
    }
}

/// Walks the segment in order: an unmarked number is a P-position, which then marks
/// the numbers a square above it inside the segment.
fn finish_segment(marks: &mut [u8; LEN], lo: u64, len: usize, found: &mut Vec<u32>) {
    const ALL_MARKED: u64 = u64::from_ne_bytes([1; 8]);
    let mut at = 0;
    while at < len {
        // Most numbers are winning (over 99% past 10^6): skip them 8 at a time.
        if at + 8 <= len && u64::from_ne_bytes(marks[at..at + 8].try_into().expect("8 bytes")) == ALL_MARKED {
            at += 8;
            continue;
        }
        if marks[at] == 0 {
            found.push((lo + at as u64) as u32);
            for target in (1..).map(|k| at + k * k).take_while(|&target| target < len) {
                set(marks, target);
            }
        }
        at += 1;
    }
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
    let mut losing = Vec::new();
    let mut found = Vec::new();
    let mut lo = 0;
    while lo < end {
        let hi = (lo + SEGMENT).min(end);
        found.clear();
        sieve.classify(&losing, lo, hi, &mut found);
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
        let whole = losing_positions_below(3 * SEGMENT + 12_345);
        for split in [1, 777, SEGMENT - 1, SEGMENT, SEGMENT + 5, 2 * SEGMENT + 99] {
            // A fresh sieve must resync its cursors from the list alone.
            let mut losing = losing_positions_below(split);
            let (mut sieve, mut found, mut lo) = (Sieve::new(), Vec::new(), split);
            while lo < 3 * SEGMENT + 12_345 {
                let hi = (lo + SEGMENT / 3).min(3 * SEGMENT + 12_345);
                found.clear();
                sieve.classify(&losing, lo, hi, &mut found);
                losing.extend_from_slice(&found);
                lo = hi;
            }
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

//! Today's sieve and move walk, frozen as the baseline that `benches/stone_game_iv.rs`
//! and `examples/iv_cold.rs` run side by side with the current ones in one process.
//!
//! Not part of the API: a copy of the first segmented sieve (256 KiB byte segments, one
//! plain store loop, a per-(segment, k) gallop, a walk over k for the move), kept only to
//! measure against. Its P-positions are `u32`s: it stops at 2^32.

use super::gallop::{first_at_least, last_at_most};
use super::sieve::{isqrt, losing_positions_by};

/// Numbers classified per segment: 2^18, so that each worker's marks (256 KiB) sit in
/// this machine's 1 MiB L2 next to the list they stream.
const SEGMENT: u64 = 1 << 18;

const LEN: usize = SEGMENT as usize;

/// One byte a number of the segment, non-zero when marked winning. Indices are masked to
/// the size, which drops the bounds checks from the hot loop without `unsafe`.
type Marks = Box<[u8; LEN]>;

fn set(marks: &mut [u8; LEN], at: usize) {
    marks[at & (LEN - 1)] = 1;
}

/// The k's of one parity: their cursors and the marks they make.
#[derive(Debug)]
struct Worker {
    /// 1 or 2: this worker handles k = first_k, first_k + 2, ...
    first_k: u64,
    /// For the i-th k of this worker, the index in the list of the first p that may
    /// still mark a later segment.
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
    fn mark(&mut self, losing: &[u32], lo: u64, hi: u64, max_k: u64) {
        self.marks.fill(0);
        for (i, k) in self.ks(max_k).enumerate() {
            if i == self.cursors.len() {
                // k² ≥ the previous segment's end = lo, so every p ≥ lo − k² = 0.
                self.cursors.push(0);
            }
            let square = k * k;
            // Only when k² < the segment size can the run start after the cursor.
            let start = first_at_least(losing, self.cursors[i], lo.saturating_sub(square));
            let end =
                if hi - square >= lo { losing.len() } else { first_at_least(losing, start, hi - square) };
            // p + k² − lo lies in [0, hi − lo), so the wrapping u32 sum is exact.
            let offset = square.wrapping_sub(lo) as u32;
            for &p in &losing[start..end] {
                set(&mut self.marks, p.wrapping_add(offset) as usize);
            }
            self.cursors[i] = end;
        }
    }
}

/// The state of a sieve between segments: per-k cursors and two segments of marks.
#[derive(Debug)]
struct Sieve {
    even: Worker,
    odd: Worker,
    /// The start of the next segment the cursors are valid for; `None` forces a resync.
    next: Option<u64>,
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
        let max_k = isqrt(hi - 1);
        if self.next != Some(lo) {
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
            scope.spawn(|| odd.mark(losing, lo, hi, max_k));
            even.mark(losing, lo, hi, max_k);
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

/// Every P-position below `end` (at most 2^32), computed from scratch.
pub fn losing_positions_below(end: u64) -> Vec<u32> {
    let mut sieve = Sieve::new();
    losing_positions_by(end, SEGMENT, |losing, lo, hi, found| sieve.classify(losing, lo, hi, found))
}

/// The smallest k² with n − k² in `losing` (the P-positions below n, sorted), if any, by
/// walking k upwards and the list downwards together: about k steps.
pub fn smallest_winning_take<P: Copy + Into<u64>>(losing: &[P], n: u64) -> Option<u64> {
    let mut above = losing.len();
    for k in (1..).take_while(|&k| k * k <= n) {
        let target = n - k * k;
        above = last_at_most(losing, above, target);
        if above > 0 && losing[above - 1].into() == target {
            return Some(k * k);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_current_sieve_and_walk() {
        let losing: Vec<u64> = losing_positions_below(3_000_000).into_iter().map(u64::from).collect();
        assert_eq!(losing, super::super::losing_positions_below(3_000_000));
        for n in (2_000_000..2_000_500).chain([3, 4, 2_999_999]) {
            let below = &losing[..losing.partition_point(|&p| p < n)];
            assert_eq!(
                smallest_winning_take(below, n),
                super::super::smallest_winning_take(below, n),
                "n = {n}"
            );
        }
    }
}

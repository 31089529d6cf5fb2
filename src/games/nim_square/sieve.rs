//! The segmented computation of the Grundy values, the table's way of growing.
//!
//! g(n) = mex { g(n − k²) : 1 ≤ k, k² ≤ n } needs every move of every pile: the largest
//! values below a pile's own have only a few moves each (below 10^7 a value occurs once
//! in 140 to 2,000 piles, against √n ≈ 3,162 moves), so no subset of the k's
//! predicts the mex, and the work stays the plain programme's ⅔·n^1.5 (pile, k) pairs.
//! What changes is what a pair costs. The plain programme reads g(n − k²) for one n and
//! every k, one random load each across the whole table (20 MB at 10^7); here the piles
//! are cut into segments of [`SEGMENT`], and for one k the sources of a run of
//! consecutive piles are consecutive too, so a pair is one streamed load and one byte
//! store:
//!
//! 1. Far moves, whose source n − k² lies below the segment, in parallel: each of two
//!    workers takes half the segment's piles, in blocks whose rows (one byte a value, one
//!    row a pile) fit in L1; for every k it stores a 1 at `row[g(n − k²)]` for every pile
//!    of the block, prefetching the sources of the k a few ahead (they come from the
//!    whole table), then packs each row into a bitset.
//! 2. Near moves, whose source lies in the segment, one pile after another (each needs
//!    the values just found): set their bits, and the first clear bit is g(n).
//!
//! Exact: every (pile, k) pair is visited once, far or near, and sets exactly its
//! value's bit. The bitset holds every value up to the largest one below the segment
//! plus one; a far source cannot exceed that, and a pile whose bits all come out set
//! (a value that grew past it inside the segment) is computed again the plain way.

/// Piles computed per segment: the unit the table publishes and the two workers split.
/// The near moves, done on one thread, average ⅔·√(`SEGMENT`) a pile (60 at 2^13),
/// against √n far moves split over two.
pub const SEGMENT: u64 = 1 << 13;

/// Bytes of one worker's block of rows: 32 KiB, so that the stores stay in this
/// machine's 48 KiB L1 (64 KiB measured slower).
const BLOCK_BYTES: usize = 1 << 15;

/// How many k's ahead a worker prefetches the sources (2 and 8 measure alike).
const PREFETCH_AHEAD: usize = 4;

/// Segments ending below this pile are computed on the calling thread alone: their far
/// moves are few (at most 256 a pile), and small tables spawn no thread.
const PARALLEL_FROM: u64 = 1 << 16;

/// One worker's block of rows. Indices are masked to the size, which drops the bounds
/// checks from the hot loop without `unsafe`.
type Block = Box<[u8; BLOCK_BYTES]>;

fn new_block() -> Block {
    vec![0; BLOCK_BYTES].try_into().expect("BLOCK_BYTES bytes")
}

/// The computation's buffers and what it knows of the values so far, kept between
/// segments.
#[derive(Debug)]
pub struct Sieve {
    blocks: [Block; 2],
    /// For each pile of the segment, `words` words: the set of values among its moves.
    seen: Vec<u64>,
    /// The largest value among the first `max_upto` piles.
    max_value: u16,
    max_upto: usize,
}

impl Default for Sieve {
    fn default() -> Self {
        Self::new()
    }
}

impl Sieve {
    /// A sieve with nothing computed yet.
    pub fn new() -> Self {
        Sieve { blocks: [new_block(), new_block()], seen: Vec::new(), max_value: 0, max_upto: 0 }
    }

    /// Sets `found` to the Grundy values of the piles in [lo, hi), where `values` holds
    /// those below lo = `values.len()`, and hi ≤ 2^32. The table passes [`SEGMENT`]
    /// piles at a time; longer ranges are exact too, with more work on one thread.
    pub fn compute(&mut self, values: &[u16], hi: u64, found: &mut Vec<u16>) {
        let lo = values.len();
        assert!(lo as u64 <= hi && hi <= 1 << 32, "bad segment [{lo}, {hi})");
        let hi = hi as usize;
        self.track_max(values);
        found.clear();
        // Room for every value a far move can bring (at most the largest so far) and one
        // above: a new largest value is then found in the bits.
        let words = (usize::from(self.max_value) + 1) / 64 + 1;
        let row = words * 64;
        if row > BLOCK_BYTES {
            // Values above 32,000: unreachable below 2^32 in practice, exact anyway.
            for n in lo..hi {
                let mex = plain_mex(values, found, n);
                found.push(mex);
            }
            return;
        }
        self.seen.clear();
        self.seen.resize((hi - lo) * words, 0);
        let far = Far { values, lo, words };
        let [block, other] = &mut self.blocks;
        if hi - lo >= 2 && (hi as u64) >= PARALLEL_FROM {
            let mid = lo + (hi - lo) / 2;
            let (mine, theirs) = self.seen.split_at_mut((mid - lo) * words);
            // A scoped thread, not rayon::join: inside the rayon pool, the waiting half
            // could steal a solve job that waits for this very extension (a deadlock),
            // and a pool busy with batches would run both halves one after the other.
            std::thread::scope(|scope| {
                scope.spawn(|| far.mark(mid, hi, other, theirs));
                far.mark(lo, mid, block, mine);
            });
        } else {
            far.mark(lo, hi, block, &mut self.seen);
        }
        for (i, bits) in self.seen.chunks_exact_mut(words).enumerate() {
            // The near moves: k² ≤ i, sources in this segment.
            for k in 1..=i.isqrt() {
                let value = usize::from(found[i - k * k]);
                if let Some(word) = bits.get_mut(value / 64) {
                    *word |= 1 << (value % 64);
                }
            }
            let mex = bits
                .iter()
                .position(|&word| word != u64::MAX)
                .map(|at| at * 64 + bits[at].trailing_ones() as usize);
            found.push(match mex {
                Some(mex) => mex as u16,
                None => plain_mex(values, found, lo + i),
            });
        }
    }

    /// Forgets what it knows of the values, for a table whose values were replaced.
    pub fn forget(&mut self) {
        self.max_upto = 0;
        self.max_value = 0;
    }

    /// Brings `max_value` up to date with `values`, which extend those of the last
    /// segment (or are new, after [`Sieve::forget`]).
    fn track_max(&mut self, values: &[u16]) {
        if self.max_upto > values.len() {
            self.max_upto = 0;
            self.max_value = 0;
        }
        self.max_value = values[self.max_upto..].iter().copied().fold(self.max_value, u16::max);
        self.max_upto = values.len();
    }
}

/// g(n) straight from the definition, reading n − k² from `values` below `values.len()`
/// and from `found` above.
pub(super) fn plain_mex(values: &[u16], found: &[u16], n: usize) -> u16 {
    let lo = values.len();
    let moves = n.isqrt();
    // The mex of `moves` values is at most `moves`: larger values cannot matter.
    let mut seen = vec![false; moves + 1];
    for k in 1..=moves {
        let m = n - k * k;
        let value = usize::from(if m < lo { values[m] } else { found[m - lo] });
        if let Some(slot) = seen.get_mut(value) {
            *slot = true;
        }
    }
    seen.iter().position(|&seen| !seen).expect("more slots than moves") as u16
}

/// The far moves of one segment: sources below `lo`.
struct Far<'a> {
    values: &'a [u16],
    lo: usize,
    words: usize,
}

impl Far<'_> {
    /// Sets, for every pile n in [a, b) and every k with n − k² < lo, bit g(n − k²) of
    /// n's bitset in `bits` (`words` words a pile, from pile a on), block by block.
    fn mark(&self, a: usize, b: usize, block: &mut [u8; BLOCK_BYTES], bits: &mut [u64]) {
        let (lo, words) = (self.lo, self.words);
        let row = words * 64;
        let rows = BLOCK_BYTES / row;
        for s in (a..b).step_by(rows) {
            let e = (s + rows).min(b);
            block[..(e - s) * row].fill(0);
            for k in 1..=(e - 1).isqrt() {
                let square = k * k;
                self.prefetch(s, e, k + PREFETCH_AHEAD);
                // Piles of the block whose move k lands below the segment and not below 0.
                let (from, to) = (s.max(square), e.min(lo + square));
                if from >= to {
                    continue;
                }
                let mut at = (from - s) * row;
                // Four piles a step: 8-15% less CPU than one (docs/nim-square.md).
                let (fours, rest) = self.values[from - square..to - square].as_chunks::<4>();
                for four in fours {
                    for (j, &value) in four.iter().enumerate() {
                        block[(at + j * row + usize::from(value)) & (BLOCK_BYTES - 1)] = 1;
                    }
                    at += 4 * row;
                }
                for &value in rest {
                    block[(at + usize::from(value)) & (BLOCK_BYTES - 1)] = 1;
                    at += row;
                }
            }
            let out = &mut bits[(s - a) * words..(e - a) * words];
            for (bytes, word) in block[..(e - s) * row].chunks_exact(64).zip(out) {
                *word = pack(bytes);
            }
        }
    }

    /// Asks for the sources of move k of the piles [s, e), when they all lie below lo.
    fn prefetch(&self, s: usize, e: usize, k: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(sources) = s.checked_sub(k * k).and_then(|from| self.values.get(from..from + (e - s))) {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            for line in sources.chunks(32) {
                // SAFETY: SSE is part of x86_64, and a prefetch never faults, whatever the
                // address. No safe prefetch exists, and the sources come from all over the
                // table: without it a pair costs 1.6 ns, with it 1.0 (docs/nim-square.md).
                unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast::<i8>()) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (s, e, k);
    }
}

/// The 64 bytes (each 0 or 1) as the bits of one word, byte i to bit i.
fn pack(bytes: &[u8]) -> u64 {
    bytes.chunks_exact(8).enumerate().fold(0, |word, (j, eight)| {
        let eight = u64::from_le_bytes(eight.try_into().expect("8 bytes"));
        // Byte i's low bit lands at bit 56 + i of the product, and no two collide.
        word | ((eight.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * j))
    })
}

/// The Grundy value of every pile below `end` (at most 2^32), computed from scratch.
pub fn grundy_values_below(end: u64) -> Vec<u16> {
    let mut sieve = Sieve::new();
    let mut values = Vec::with_capacity(end as usize);
    let mut found = Vec::new();
    while (values.len() as u64) < end {
        let hi = (values.len() as u64 + SEGMENT).min(end);
        sieve.compute(&values, hi, &mut found);
        values.extend_from_slice(&found);
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::nim_square::baseline;

    #[test]
    fn pack_puts_byte_i_at_bit_i() {
        for pattern in 0..=u8::MAX {
            let mut bytes = [0u8; 64];
            for (i, byte) in bytes.iter_mut().enumerate() {
                *byte = (pattern >> (i % 8)) & 1;
            }
            let word = pack(&bytes);
            for (i, byte) in bytes.iter().enumerate() {
                assert_eq!((word >> i) & 1, u64::from(*byte), "pattern {pattern:#010b}, bit {i}");
            }
        }
    }

    #[test]
    fn a_value_beyond_the_bitset_is_computed_the_plain_way() {
        // From an empty table the bitset holds 64 values; the piles below 10^5 reach 95.
        let mut found = Vec::new();
        Sieve::new().compute(&[], 100_000, &mut found);
        assert!(found.iter().any(|&value| value >= 64));
        assert_eq!(found, baseline::grundy_values_below(100_000));
    }

    #[test]
    fn plain_mex_is_the_definition() {
        let values = baseline::grundy_values_below(2000);
        for n in 0..2000 {
            assert_eq!(plain_mex(&values[..n.min(1000)], &values[n.min(1000)..n], n), values[n]);
        }
    }
}

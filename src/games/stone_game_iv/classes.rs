//! Residue classes mod 5^3·13 of the P-positions, which the winning-move search uses to
//! skip most k's.
//!
//! Above 10^7 every P-position is ≡ 0, 2 or 4 (mod 5), and above 10^8 mostly ≡ 0 or 2.
//! They cluster further mod 125 and, jointly with that, mod 13 (mod 13 alone unevenly,
//! with no class empty): between 9·10^8 and 10^9 they lie in 380 of the 1,625 classes
//! mod 1625, and those 380 hold more of them the larger n is (99.85% between 10^8 and
//! 2·10^8, all but 25 of 608,392 between 9·10^9 and 10^10; `docs/stone-game-iv.md`).
//! The search asks the index only about the k's that leave n − k² in one of those
//! ([`COMMON`]) classes, and tests the rare P-positions of the other classes, kept in a
//! [`RareList`], for n − p being a square. Where the rare ones are dense it asks about
//! every k that leaves a class mod 125 that can hold one ([`EVEN_ROOTS`], [`ALL_ROOTS`]).

use std::sync::LazyLock;

/// k walks in chunks of this many; [`EVEN_ROOTS`] and [`ALL_ROOTS`] are classes mod it.
pub(super) const MODULUS: u64 = 125;

/// The modulus of [`COMMON`]: 5^3·13.
pub(super) const FINE: u64 = MODULUS * CHUNKS as u64;

/// Chunks of [`MODULUS`] k's in [`FINE`].
const CHUNKS: usize = 13;

/// The 380 classes mod [`FINE`] that hold a P-position between 9·10^8 and 10^9 (all
/// ≡ 0, 2 or 4 mod 5), as bits; printed by `examples/iv_classes.rs` from a table file.
pub(super) const COMMON: [u64; FINE.div_ceil(64) as usize] = [
    0x5a54_0080_0252_94a5,
    0xb480_0110_8421_014a,
    0x6942_0220_004a_4294,
    0xd280_0440_1084_2529,
    0xa501_0884_0108_0a52,
    0x4a10_1000_0210_14a5,
    0x9420_2210_8420_2943,
    0x2a42_4400_0840_5296,
    0x5084_a800_1080_252d,
    0xa901_5000_2108_4218,
    0x4212_a400_4200_94b4,
    0x852c_4000_8401_0869,
    0x484a_1081_0800_10c2,
    0x0035_210a_1004_2185,
    0x0828_4214_2008_4308,
    0x1054_a028_4000_8614,
    0x0189_0850_8021_0c2a,
    0x0350_1425_0102_1840,
    0x0224_214a_4084_3081,
    0x0540_5284_0508_6110,
    0x0884_0529_0a50_c200,
    0x1109_0a50_10a1_8442,
    0x6200_04a4_2943_0880,
    0x4404_2848_5286_9000,
    0x8800_1090_850c_2210,
    0x0000_0000_0058_5000,
];

/// Whether `p` lies in a [`COMMON`] class.
pub(super) fn is_common(p: u64) -> bool {
    let class = p % FINE;
    COMMON[(class / 64) as usize] >> (class % 64) & 1 == 1
}

/// For each n mod 125, the k's mod 125 that leave n − k² in one of a set of classes mod
/// 125, as bits.
pub(super) struct Roots([u128; MODULUS as usize]);

impl Roots {
    const fn leaving(classes: u128) -> Self {
        let mut roots = [0; MODULUS as usize];
        let mut n = 0;
        while n < MODULUS {
            let mut k = 0;
            while k < MODULUS {
                if classes >> ((n + MODULUS * MODULUS - k * k) % MODULUS) & 1 == 1 {
                    roots[n as usize] |= 1 << k;
                }
                k += 1;
            }
            n += 1;
        }
        Roots(roots)
    }

    /// The k's mod 125 that leave n − k² in one of the classes.
    pub(super) fn of(&self, n: u64) -> u128 {
        self.0[(n % MODULUS) as usize]
    }
}

/// The classes ≡ 0, 2 or 4 (mod 5): every P-position above the last ≡ 1 or 3 lies in
/// one.
const EVEN: u128 = {
    let (mut classes, mut class) = (0, 0);
    while class < MODULUS {
        if class % 5 % 2 == 0 {
            classes |= 1 << class;
        }
        class += 1;
    }
    classes
};

pub(super) static EVEN_ROOTS: Roots = Roots::leaving(EVEN);
pub(super) static ALL_ROOTS: Roots = Roots::leaving((1 << MODULUS) - 1);

/// For each n mod [`FINE`] and each chunk of 125 k's mod [`FINE`], the k's of the chunk
/// (bit i: its first + i) that leave n − k² in a [`COMMON`] class.
pub(super) struct CommonRoots(Box<[[u128; CHUNKS]]>);

impl CommonRoots {
    fn new() -> Self {
        let roots = (0..FINE)
            .map(|n| {
                let mut chunks = [0; CHUNKS];
                for k in (0..FINE).filter(|k| is_common((n + FINE * FINE - k * k) % FINE)) {
                    chunks[(k / MODULUS) as usize] |= 1 << (k % MODULUS);
                }
                chunks
            })
            .collect();
        CommonRoots(roots)
    }

    /// n's roots, chunk by chunk: the chunk of k's from `first` (a multiple of 125) is
    /// at `(first / 125) % 13`.
    pub(super) fn of(&self, n: u64) -> &[u128; CHUNKS] {
        &self.0[(n % FINE) as usize]
    }
}

/// 338 KB, built on the first search.
pub(super) static COMMON_ROOTS: LazyLock<CommonRoots> = LazyLock::new(CommonRoots::new);

/// The chunk of [`CommonRoots::of`] that holds the k's from `first`.
pub(super) fn chunk_of(first: u64) -> usize {
    (first / MODULUS % CHUNKS as u64) as usize
}

/// Bucket width of [`RareList`]'s index: 2^16 numbers.
const BUCKET_BITS: u32 = 16;

/// The P-positions outside the [`COMMON`] classes, sorted, with where each 2^16 numbers
/// start in them, so that finding the first at or above a pile is a few probes instead
/// of a binary search over them all (0.6 MB of starts at 10^10).
#[derive(Debug, Default)]
pub(super) struct RareList {
    values: Vec<u64>,
    /// At b, the number of values below b·2^16; up to the last value's bucket.
    starts: Vec<u32>,
}

impl RareList {
    /// Appends the rare ones of `found`, all above those kept so far.
    pub(super) fn extend(&mut self, found: &[u64]) {
        for &p in found.iter().filter(|&&p| !is_common(p)) {
            let bucket = (p >> BUCKET_BITS) as usize;
            let count = u32::try_from(self.values.len()).expect("fewer than 2^32 P-positions");
            while self.starts.len() <= bucket {
                self.starts.push(count);
            }
            self.values.push(p);
        }
    }

    /// The values, sorted.
    pub(super) fn values(&self) -> &[u64] {
        &self.values
    }

    /// How many values are below `n`.
    pub(super) fn count_below(&self, n: u64) -> usize {
        let bucket = usize::try_from(n >> BUCKET_BITS).unwrap_or(usize::MAX);
        let Some(&start) = self.starts.get(bucket) else {
            return self.values.len();
        };
        let start = start as usize;
        let end = self.starts.get(bucket + 1).map_or(self.values.len(), |&end| end as usize);
        start + self.values[start..end].partition_point(|&p| p < n)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_common_classes_are_380_classes_that_leave_0_2_or_4_mod_5() {
        let common: Vec<u64> = (0..FINE).filter(|&p| is_common(p)).collect();
        assert_eq!(common.len(), 380);
        assert!(common.iter().all(|class| class % 5 % 2 == 0), "{common:?}");
        assert!((FINE..2 * FINE).all(|p| is_common(p) == is_common(p - FINE)));
    }

    #[test]
    fn the_root_tables_are_the_ks_that_leave_their_classes() {
        let leaving =
            |n: u64, k: u64, classes: &dyn Fn(u64) -> bool| classes((n + FINE - k * k % FINE) % FINE);
        for n in 0..2 * FINE {
            let mask = |first: u64, classes: &dyn Fn(u64) -> bool| {
                (0..MODULUS).filter(|&i| leaving(n, first + i, classes)).fold(0u128, |mask, i| mask | 1 << i)
            };
            for first in (0..2 * FINE).step_by(MODULUS as usize) {
                assert_eq!(
                    COMMON_ROOTS.of(n)[chunk_of(first)],
                    mask(first, &is_common),
                    "n = {n}, first = {first}"
                );
            }
            assert_eq!(EVEN_ROOTS.of(n), mask(0, &|c| c % 5 % 2 == 0), "n = {n}");
            assert_eq!(ALL_ROOTS.of(n), mask(0, &|_| true), "n = {n}");
        }
    }

    proptest! {
        #[test]
        fn count_below_is_the_partition_point_of_the_rare_ones_grown_in_steps(
            set in proptest::collection::btree_set(
                prop_oneof![0u64..300_000, (1u64 << 32) - 200_000..(1 << 32) + 200_000],
                0..400,
            ),
            cuts in proptest::collection::vec(0usize..400, 0..4),
            probes in proptest::collection::vec(prop_oneof![0u64..300_000, (1u64 << 32) - 300_000..(1 << 32) + 300_000], 50),
        ) {
            let all: Vec<u64> = set.into_iter().collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut.min(all.len())).chain([all.len()]).collect();
            cuts.sort_unstable();
            let (mut list, mut from) = (RareList::default(), 0);
            for cut in cuts {
                list.extend(&all[from..cut]);
                from = cut;
            }
            let rare: Vec<u64> = all.iter().copied().filter(|&p| !is_common(p)).collect();
            prop_assert_eq!(list.values(), &rare[..]);
            for n in probes.into_iter().chain([0, u64::MAX]) {
                prop_assert_eq!(list.count_below(n), rare.partition_point(|&p| p < n), "n = {}", n);
            }
        }
    }
}

//! Residue classes mod 5^3 of the P-positions, which the winning-move search uses to
//! skip most k's.
//!
//! Above 10^7 every P-position is ≡ 0, 2 or 4 (mod 5), and above 10^8 mostly ≡ 0 or 2;
//! mod 125 the clustering goes further: 35 classes of 125 hold 97% of the P-positions
//! between 10^8 and 10^9, and 56 classes hold none there (`docs/stone-game-iv.md`; mod
//! 625 and 3125 gain almost nothing more). The search asks the index only about the k's
//! that leave n − k² in one of those 35 ([`COMMON`]) classes, and tests the rare
//! P-positions of the other classes, kept in a [`RareList`], for n − p being a square.

/// P-positions cluster in residue classes mod 5^3 (`docs/stone-game-iv.md`).
pub(super) const MODULUS: u64 = 125;

/// The 35 classes mod 125 that hold 97% of the P-positions between 10^8 and 10^9 (all
/// ≡ 0 or 2 mod 5); classes are the bits.
pub(super) const COMMON: u128 = 0x0508_4010_8421_294a_5284_2108_4252_94a5;

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

/// For each n mod 125, the k's mod 125 (upwards) that leave n − k² in one of a set of
/// classes.
pub(super) struct Roots {
    counts: [u8; MODULUS as usize],
    roots: [[u8; MODULUS as usize]; MODULUS as usize],
}

impl Roots {
    const fn leaving(classes: u128) -> Self {
        let mut table =
            Roots { counts: [0; MODULUS as usize], roots: [[0; MODULUS as usize]; MODULUS as usize] };
        let mut n = 0;
        while n < MODULUS {
            let mut k = 0;
            while k < MODULUS {
                if classes >> ((n + MODULUS * MODULUS - k * k) % MODULUS) & 1 == 1 {
                    let count = table.counts[n as usize];
                    table.roots[n as usize][count as usize] = k as u8;
                    table.counts[n as usize] = count + 1;
                }
                k += 1;
            }
            n += 1;
        }
        table
    }

    /// The k's mod 125, upwards, that leave n − k² in one of the classes.
    pub(super) fn of(&self, n: u64) -> &[u8] {
        let n = (n % MODULUS) as usize;
        &self.roots[n][..usize::from(self.counts[n])]
    }
}

pub(super) static COMMON_ROOTS: Roots = Roots::leaving(COMMON);
pub(super) static EVEN_ROOTS: Roots = Roots::leaving(EVEN);
pub(super) static ALL_ROOTS: Roots = Roots::leaving((1 << MODULUS) - 1);

/// Whether `p` lies in a [`COMMON`] class mod 125.
pub(super) fn is_common(p: u64) -> bool {
    COMMON >> (p % MODULUS) & 1 == 1
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
    fn the_root_tables_are_the_ks_that_leave_their_classes() {
        let common = [
            0, 2, 5, 7, 10, 12, 15, 17, 20, 22, 25, 30, 35, 40, 45, 50, 55, 57, 60, 62, 65, 67, 70, 72, 75,
            77, 80, 85, 90, 95, 100, 110, 115, 120, 122,
        ];
        assert_eq!((0..MODULUS).filter(|&p| is_common(p)).collect::<Vec<_>>(), common);
        for n in 0..2 * MODULUS {
            let roots = |classes: &dyn Fn(u64) -> bool| -> Vec<u8> {
                (0..MODULUS)
                    .filter(|k| classes((n + MODULUS * MODULUS - k * k) % MODULUS))
                    .map(|k| k as u8)
                    .collect()
            };
            assert_eq!(COMMON_ROOTS.of(n), roots(&|c| common.contains(&c)), "n = {n}");
            assert_eq!(EVEN_ROOTS.of(n), roots(&|c| c % 5 % 2 == 0), "n = {n}");
            assert_eq!(ALL_ROOTS.of(n), roots(&|_| true), "n = {n}");
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

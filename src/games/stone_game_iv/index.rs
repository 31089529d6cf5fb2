//! Membership in the sorted list of P-positions in O(1): the winning-move search asks
//! whether n − k² is a P-position for hundreds of k's a pile, and a search in the list
//! each time (or a walk down it) was most of a move's cost near 10^9
//! (`benches/stone_game_iv.rs`, `stone_game_iv_warm_large`).
//!
//! The numbers are cut into blocks of 2^11; a block keeps a 64-bit mask of which of its
//! 32-number runs hold a P-position, and beside it the index of its first P-position.
//! Near 10^9 about one run in nineteen holds one, so most questions end at the mask; the
//! rest scan the one or two P-positions of the run in the list. 16 bytes a block:
//! 7.8 MB at 10^9, 78 MB at 10^10. Runs of 64 let twice as many questions reach the list
//! (a cache miss each), and runs of 16 double the mask's memory for no gain
//! (`docs/performance.md`).

/// Numbers per block: 2^11.
const BLOCK_BITS: u32 = 11;

/// Numbers per run, a bit of the block's mask: 2^5.
const RUN_BITS: u32 = 5;

/// The index of a sorted list of P-positions below `covered`.
#[derive(Debug, Default, Clone)]
pub(super) struct PositionIndex {
    blocks: Vec<Block>,
    /// The list is indexed below this.
    covered: u64,
}

/// One block of numbers, b·2^BLOCK_BITS and up: its mask and where its P-positions
/// start, side by side so that one cache line holds both.
#[derive(Debug, Default, Clone, Copy)]
struct Block {
    /// Bit j set when the j-th run of the block holds a P-position.
    runs: u64,
    /// The index in the list of the block's first P-position.
    start: u32,
}

impl PositionIndex {
    /// The index of `losing`, every P-position below `covered`.
    pub(super) fn of(losing: &[u64], covered: u64) -> Self {
        let mut index = PositionIndex::default();
        index.extend(losing, covered);
        index
    }

    /// Indexes `losing`, which extends the list indexed so far to every P-position below
    /// `covered`: the blocks from the last, partly covered one on.
    pub(super) fn extend(&mut self, losing: &[u64], covered: u64) {
        let first_block = self.covered >> BLOCK_BITS;
        self.blocks.truncate(first_block as usize);
        let mut at = losing.partition_point(|&p| p < first_block << BLOCK_BITS);
        for block in first_block..covered.div_ceil(1 << BLOCK_BITS) {
            let end = (block + 1) << BLOCK_BITS;
            let start = u32::try_from(at).expect("fewer than 2^32 P-positions");
            let mut runs = 0;
            while let Some(&p) = losing.get(at).filter(|&&p| p < end) {
                runs |= 1 << ((p >> RUN_BITS) & 63);
                at += 1;
            }
            self.blocks.push(Block { runs, start });
        }
        self.covered = covered;
    }

    /// Whether `n` (below the covered range) is in `losing`, the list indexed.
    #[inline]
    pub(super) fn contains(&self, losing: &[u64], n: u64) -> bool {
        debug_assert!(n < self.covered, "{n} is not indexed");
        let block = (n >> BLOCK_BITS) as usize;
        let Block { runs, start } = self.blocks[block];
        let run = (n >> RUN_BITS) & 63;
        if runs >> run & 1 == 0 {
            return false;
        }
        // Each occupied run below holds at least one P-position: start past them.
        let mut at = start as usize + (runs & ((1 << run) - 1)).count_ones() as usize;
        while let Some(&p) = losing.get(at) {
            if p >= n {
                return p == n;
            }
            at += 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        // Each case indexes 2^21 blocks: a few milliseconds in a release build.
        #![proptest_config(ProptestConfig::with_cases(32))]

        #[test]
        fn contains_is_membership_in_the_list_grown_in_steps(
            set in proptest::collection::btree_set(
                prop_oneof![0u64..20_000, (1u64 << 32) - 9000..(1 << 32) + 9000],
                0..400,
            ),
            steps in proptest::collection::vec(1u64..9000, 1..6),
        ) {
            let all: Vec<u64> = set.into_iter().collect();
            let end = (1u64 << 32) + 9000;
            let mut index = PositionIndex::default();
            let mut covered = 0;
            // Grown in uneven steps (partial blocks rebuilt), then once to the end.
            for step in steps.into_iter().chain([end]) {
                covered = (covered + step).min(end);
                let losing = &all[..all.partition_point(|&p| p < covered)];
                index.extend(losing, covered);
                for n in (0..covered.min(20_000)).chain(covered.saturating_sub(20_000)..covered) {
                    prop_assert_eq!(index.contains(losing, n), losing.binary_search(&n).is_ok(), "n = {}", n);
                }
            }
        }
    }
}

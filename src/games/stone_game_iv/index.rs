//! Membership in the sorted list of P-positions in O(1): the winning-move search asks
//! whether n − k² is a P-position for hundreds of k's a pile, and a search in the list
//! each time (or a walk down it) was most of a move's cost near 10^9
//! (`benches/stone_game_iv.rs`, `stone_game_iv_warm_large`).
//!
//! The numbers are cut into blocks of 2^11, and a question takes two steps:
//! - a bit for each 32-number run, set when the run holds a P-position: one `u64` a
//!   block. Near 10^9 one run in 26 is occupied, so most questions end here, and the
//!   words a search reads (those below its pile) stay in the core's L2 cache;
//! - for a set bit, the block's record: the offsets of its first P-positions, so that the
//!   answer is one more load and a comparison, not a read of the list. Near 10^9 a block
//!   holds 2.5 on average and one in 70 more than six; a record with more (a quarter of
//!   them near 10^8) says where the rest start in the list.
//!
//! 24 bytes a block: 11.7 MB at 10^9, 117 MB at 10^10. The mask beside the list's start
//! in one 16-byte record, with the list read for a set bit, made a move slower, and the
//! records alone, without the masks, slower still (figures in `docs/performance.md`).

/// Numbers per block: 2^11.
const BLOCK_BITS: u32 = 11;

/// A number's offset in its block.
fn offset_in_block(n: u64) -> u16 {
    (n & ((1 << BLOCK_BITS) - 1)) as u16
}

/// Numbers per run, a bit of a block's word: 2^5.
const RUN_BITS: u32 = 5;

/// Offsets a record holds.
const SLOTS: usize = 6;

/// An unused slot: above every offset.
const EMPTY: u16 = u16::MAX;

/// The last slot of a block with more than [`SLOTS`] P-positions: the rest are in the
/// list from the record's `rest` on. Above every offset, below [`EMPTY`].
const MORE: u16 = 1 << 15;

/// The index of a sorted list of P-positions below `covered`.
#[derive(Debug, Default, Clone)]
pub(super) struct PositionIndex {
    /// Bit j of word b set when the j-th 32-number run of block b holds a P-position.
    runs: Vec<u64>,
    blocks: Vec<Block>,
    /// The list is indexed below this.
    covered: u64,
}

/// One block of numbers, b·2^BLOCK_BITS and up. Aligned so that one cache line holds
/// the whole record.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
struct Block {
    /// The offsets in the block of its first P-positions, upwards, then [`EMPTY`]; or,
    /// when it holds more than [`SLOTS`], the first `SLOTS - 1` and [`MORE`].
    offsets: [u16; SLOTS],
    /// With [`MORE`]: the index in the list of the first P-position not in `offsets`.
    rest: u32,
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
        self.runs.truncate(first_block as usize);
        let mut at = losing.partition_point(|&p| p < first_block << BLOCK_BITS);
        for block in first_block..covered.div_ceil(1 << BLOCK_BITS) {
            let end = (block + 1) << BLOCK_BITS;
            let count = losing[at..].iter().take_while(|&&p| p < end).count();
            let in_block = &losing[at..at + count];
            self.runs.push(in_block.iter().fold(0, |runs, &p| runs | 1 << ((p >> RUN_BITS) & 63)));
            let mut record = Block { offsets: [EMPTY; SLOTS], rest: 0 };
            let held = if count > SLOTS { SLOTS - 1 } else { count };
            for (slot, &p) in record.offsets.iter_mut().zip(&in_block[..held]) {
                *slot = offset_in_block(p);
            }
            if count > SLOTS {
                record.offsets[SLOTS - 1] = MORE;
                record.rest = u32::try_from(at + held).expect("fewer than 2^32 P-positions");
            }
            self.blocks.push(record);
            at += count;
        }
        self.covered = covered;
    }

    /// Whether `n` (below the covered range) is in `losing`, the list indexed.
    #[inline]
    pub(super) fn contains(&self, losing: &[u64], n: u64) -> bool {
        debug_assert!(n < self.covered, "{n} is not indexed");
        let block = (n >> BLOCK_BITS) as usize;
        if self.runs[block] >> ((n >> RUN_BITS) & 63) & 1 == 0 {
            return false;
        }
        let Block { offsets, rest } = self.blocks[block];
        let offset = offset_in_block(n);
        // No branch per slot, so that the compiler compares all six at once.
        let found = offsets.iter().fold(false, |found, &slot| found | (slot == offset));
        if found || offsets[SLOTS - 1] != MORE || offset < offsets[SLOTS - 2] {
            return found;
        }
        let at = super::gallop::first_at_least(losing, rest as usize, n);
        losing.get(at) == Some(&n)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn contains_is_membership_for_every_count_a_record_can_hold_and_past_it() {
        // Block c holds c P-positions, the first at offset 0 and the last at 2047 (one
        // alone at 2047 in block 1), so that full records, records of six and of seven or
        // more, and both ends of a block are all asked about.
        let mut losing = Vec::new();
        for count in 0..=9u64 {
            let base = count << BLOCK_BITS;
            let offsets = (0..count).map(|i| if i + 1 == count { 2047 } else { i * 37 });
            losing.extend(offsets.map(|offset| base + offset));
        }
        let covered = 10 << BLOCK_BITS;
        let index = PositionIndex::of(&losing, covered);
        for n in 0..covered {
            assert_eq!(index.contains(&losing, n), losing.binary_search(&n).is_ok(), "n = {n}");
        }
    }

    proptest! {
        // Each case indexes 2^21 blocks in up to six steps: about a second in a debug
        // build, so few cases.
        #![proptest_config(ProptestConfig::with_cases(16))]

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

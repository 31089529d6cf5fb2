//! Alice's move for every small pile, read from a table instead of searched for.
//!
//! Bulk runs are mostly small piles, and below 2^21 the smallest winning k still
//! averages 131 to 173, so a search costs about a microsecond where a load costs a few
//! nanoseconds. The table of the smallest winning k per n (a `u16`: k ≤ 65,535 for every
//! n < 2^32) is built once by marking p + k² for every P-position p, k upwards, keeping
//! the first k that reaches each n. It stops at [`SMALL_MOVES_END`], where building it
//! still takes tens of milliseconds and it still fits the L2 cache
//! (`stone_game_iv_cold/first_move_below_2^20` in `benches/stone_game_iv.rs`).

/// The table covers piles below this: 2^21 (4 MiB of `u16`).
pub(super) const SMALL_MOVES_END: u64 = 1 << 21;

/// The smallest table built: 2^16 (128 KiB, well under a millisecond).
pub(super) const SMALL_MOVES_MIN: u64 = 1 << 16;

/// How many sizes of table there are, doubling from the smallest to the largest.
pub(super) const SMALL_MOVES_SIZES: usize =
    (SMALL_MOVES_END.trailing_zeros() - SMALL_MOVES_MIN.trailing_zeros() + 1) as usize;

/// For every n below `end`, the smallest k with n − k² in `losing`, or 0 when there is
/// none (n is a P-position). `losing` holds at least every P-position below `end`,
/// sorted; `end` ≤ 2^32.
pub(super) fn smallest_winning_roots(losing: &[u64], end: u64) -> Box<[u16]> {
    let mut roots = vec![0u16; end as usize].into_boxed_slice();
    let below = &losing[..losing.partition_point(|&p| p < end)];
    for k in (1u64..).take_while(|&k| k * k < end) {
        // k < 2^16 since k² < end ≤ 2^32.
        let root = k as u16;
        for &p in below {
            let Some(slot) = roots.get_mut((p + k * k) as usize) else { break };
            if *slot == 0 {
                *slot = root;
            }
        }
    }
    roots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::stone_game_iv::{losing_positions_below, smallest_winning_take};

    #[test]
    fn every_root_below_2_to_the_18_is_the_searched_smallest_take() {
        let end = 1 << 18;
        let losing = losing_positions_below(end);
        let roots = smallest_winning_roots(&losing, end);
        for n in 0..end {
            let below = &losing[..losing.partition_point(|&p| p < n)];
            let searched =
                if losing.binary_search(&n).is_ok() { None } else { smallest_winning_take(below, n) };
            let root = u64::from(roots[n as usize]);
            assert_eq!((root != 0).then_some(root * root), searched, "n = {n}");
        }
    }
}

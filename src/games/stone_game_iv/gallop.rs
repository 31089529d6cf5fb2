//! Galloping searches in the sorted list of P-positions.
//!
//! Both the sieve's cursors and the winning-move walk look for a position close to one
//! they already know, so they probe 1, 2, 4, ... elements away before a binary search:
//! O(log distance) instead of O(log length). Generic over the element, since the table
//! keeps P-positions as `u64` and the sieve its own copy as low 32-bit halves.

/// The index of the first element ≥ `bound` at or after `from`, by galloping: cheap when
/// the answer is near `from`, as it is for cursors.
pub(super) fn first_at_least<T: Copy + Into<u64>>(sorted: &[T], from: usize, bound: u64) -> usize {
    let below = |i: usize| sorted[i].into() < bound;
    if from >= sorted.len() || !below(from) {
        return from;
    }
    // Invariant: sorted[known_below] < bound.
    let (mut known_below, mut step) = (from, 1);
    loop {
        let probe = known_below + step;
        if probe >= sorted.len() || !below(probe) {
            let end = probe.min(sorted.len());
            return known_below + 1 + sorted[known_below + 1..end].partition_point(|&p| p.into() < bound);
        }
        known_below = probe;
        step *= 2;
    }
}

/// The number of elements ≤ `bound` in `sorted[..end]`, galloping down from `end`.
pub(super) fn last_at_most<T: Copy + Into<u64>>(sorted: &[T], mut end: usize, bound: u64) -> usize {
    let above = |i: usize| sorted[i].into() > bound;
    // Between two consecutive squares lie a few P-positions: step over them one by one,
    // and gallop only when the gap is wide.
    for _ in 0..8 {
        if end == 0 || !above(end - 1) {
            return end;
        }
        end -= 1;
    }
    if end == 0 || !above(end - 1) {
        return end;
    }
    // Invariant: sorted[known_above] > bound.
    let (mut known_above, mut step) = (end - 1, 1);
    loop {
        if step > known_above || !above(known_above - step) {
            let start = known_above.saturating_sub(step);
            return start + sorted[start..known_above].partition_point(|&p| p.into() <= bound);
        }
        known_above -= step;
        step *= 2;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn both_agree_with_partition_point(
            mut sorted in proptest::collection::vec(0u32..1000, 0..200),
            at in 0usize..220,
            bound in 0u64..1100,
        ) {
            sorted.sort_unstable();
            let at = at.min(sorted.len());
            let first = at + sorted[at..].partition_point(|&p| u64::from(p) < bound);
            prop_assert_eq!(first_at_least(&sorted, at, bound), first);
            let last = sorted[..at].partition_point(|&p| u64::from(p) <= bound);
            prop_assert_eq!(last_at_most(&sorted, at, bound), last);
        }
    }
}

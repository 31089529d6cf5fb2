//! The sieve's own copy of a list of P-positions: each as its low 32 bits, plus where
//! each 2^32 range of values starts in the list.
//!
//! The sieve's marking loop adds k² − lo to a P-position modulo 2^32, which is exact for
//! every p that lands in the segment, so it reads `u32`s: half the bytes of the table's
//! `u64`s streamed per mark, and the same loop below and above 2^32. Searches that need
//! whole values (the cursors' resync, the test of a dropped pair) take the range's high
//! half from the starts.

use super::gallop;

/// A strictly increasing list of `u64`, kept as low halves and range starts.
#[derive(Debug, Default, Clone)]
pub(super) struct Lows {
    lows: Vec<u32>,
    /// At index h − 1, the index of the first value ≥ h·2^32, for h = 1, 2, ...
    range_starts: Vec<usize>,
    last: Option<u64>,
    /// The widest gap between consecutive values, counting the first value's distance
    /// from −1; see [`Lows::max_gap`].
    max_gap: u64,
}

impl Lows {
    /// The list of `values`, which must be strictly increasing.
    pub(super) fn from_sorted(values: impl IntoIterator<Item = u64>) -> Self {
        let mut lows = Lows::default();
        for p in values {
            lows.push(p);
        }
        lows
    }

    /// Appends `p`, which must be above every value in the list.
    pub(super) fn push(&mut self, p: u64) {
        let gap = match self.last {
            Some(last) => {
                assert!(p > last, "{p} appended after {last}");
                p - last
            }
            None => p + 1,
        };
        self.max_gap = self.max_gap.max(gap);
        let high = (p >> 32) as usize;
        while self.range_starts.len() < high {
            self.range_starts.push(self.lows.len());
        }
        self.lows.push(p as u32);
        self.last = Some(p);
    }

    pub(super) fn len(&self) -> usize {
        self.lows.len()
    }

    /// The low halves, in order.
    pub(super) fn lows(&self) -> &[u32] {
        &self.lows
    }

    /// The widest gap between consecutive values (the first counted from −1). A run of
    /// `g` consecutive values starting less than `w` past some point spans less than
    /// `w + g · max_gap`: what keeps the marking loop's wrapped sums below 2^32.
    pub(super) fn max_gap(&self) -> u64 {
        self.max_gap
    }

    /// The value at index `i`.
    pub(super) fn value(&self, i: usize) -> u64 {
        let high = self.range_starts.partition_point(|&start| start <= i) as u64;
        high << 32 | u64::from(self.lows[i])
    }

    /// The index of the first value ≥ `bound` at or after `from`, galloping from `from`
    /// inside the 2^32 range that holds `bound`.
    pub(super) fn first_at_least(&self, from: usize, bound: u64) -> usize {
        let high = (bound >> 32) as usize;
        let len = self.lows.len();
        let start = match high {
            0 => 0,
            _ => self.range_starts.get(high - 1).copied().unwrap_or(len),
        };
        // Values from `end` on are in higher ranges: all ≥ bound.
        let end = self.range_starts.get(high).copied().unwrap_or(len);
        if from >= end {
            return from;
        }
        // Values before `start` are in lower ranges: all < bound.
        gallop::first_at_least(&self.lows[..end], from.max(start), bound & u64::from(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn values_and_searches_match_the_u64_list(
            mut values in proptest::collection::btree_set(
                prop_oneof![0u64..1000, (1u64 << 32) - 500..(1 << 32) + 500, (3u64 << 32)..(3 << 32) + 100],
                0..120,
            ).prop_map(|set| set.into_iter().collect::<Vec<_>>()),
            from in 0usize..130,
            bound in prop_oneof![0u64..1100, (1u64 << 32) - 600..(1 << 32) + 600, (2u64 << 32)..(4 << 32)],
        ) {
            values.dedup();
            let lows = Lows::from_sorted(values.iter().copied());
            prop_assert_eq!(lows.len(), values.len());
            for (i, &p) in values.iter().enumerate() {
                prop_assert_eq!(lows.value(i), p);
            }
            let from = from.min(values.len());
            let expected = from + values[from..].partition_point(|&p| p < bound);
            prop_assert_eq!(lows.first_at_least(from, bound), expected);
            let widest = values.iter().scan(None, |last: &mut Option<u64>, &p| {
                let gap = last.map_or(p + 1, |last| p - last);
                *last = Some(p);
                Some(gap)
            }).max().unwrap_or(0);
            prop_assert_eq!(lows.max_gap(), widest);
        }
    }
}

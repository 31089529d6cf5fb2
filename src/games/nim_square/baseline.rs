//! The plain dynamic programme for the Grundy values, frozen as the baseline that
//! `examples/grundy_cold.rs` and `benches/nim_square.rs` run side by side with the
//! segmented computation, and that the tests hold it to.
//!
//! Not part of the API: kept only to measure and test against.

/// The Grundy value of every pile below `end`: for every n, the values of n − k² for
/// every k ≥ 1 with k² ≤ n, then the smallest value missing among them.
///
/// `end` is at most 2^32, so that every value (at most ⌊√n⌋, one per move) fits a `u16`.
pub fn grundy_values_below(end: u64) -> Vec<u16> {
    assert!(end <= 1 << 32, "grundy values below {end}: beyond 2^32");
    let end = end as usize;
    let mut values = vec![0u16; end];
    // seen[v] == n when value v occurs among n's moves: no clearing between piles.
    let mut seen = vec![usize::MAX; (end as u64).isqrt() as usize + 2];
    for n in 1..end {
        let mut k = 1;
        while k * k <= n {
            seen[usize::from(values[n - k * k])] = n;
            k += 1;
        }
        let mex = seen.iter().position(|&at| at != n).expect("more slots than moves");
        values[n] = mex as u16;
    }
    values
}

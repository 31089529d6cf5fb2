//! Stone Game IV: the segmented sieve against the seeds' O(n·√n) dynamic programme,
//! both from cold, to n = 10^7; and answering from a warm table.
//!
//! `cargo bench --bench stone_game_iv`. The 10^8 and 10^9 cold runs take too long for
//! criterion's repetitions: `cargo run --release --example iv_cold` times them, one
//! process each, with peak memory.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use gamesolver::games::stone_game_iv::losing_positions_below;
use gamesolver::games::StoneGameIvTable;

/// The seeds' dynamic programme (a dense table, first losing move found wins), as the
/// number of P-positions below `end` so that both sides return the same figure.
fn seeds_dp_losing_count(end: usize) -> usize {
    let mut wins = vec![false; end];
    for n in 1..end {
        let mut k = 1;
        while k * k <= n {
            if !wins[n - k * k] {
                wins[n] = true;
                break;
            }
            k += 1;
        }
    }
    wins.iter().filter(|&&win| !win).count()
}

fn cold(c: &mut Criterion) {
    let mut group = c.benchmark_group("stone_game_iv_cold");
    // The DP takes seconds an iteration at 10^7: the fewest samples criterion allows.
    group.sample_size(10);
    for end in [1_000_000usize, 10_000_000] {
        assert_eq!(losing_positions_below(end as u64).len(), seeds_dp_losing_count(end));
        group.bench_with_input(BenchmarkId::new("sieve", end), &end, |b, &end| {
            b.iter(|| losing_positions_below(end as u64).len())
        });
        group.bench_with_input(BenchmarkId::new("seeds_dp", end), &end, |b, &end| {
            b.iter(|| seeds_dp_losing_count(end))
        });
    }
    group.finish();
}

fn warm(c: &mut Criterion) {
    let table = StoneGameIvTable::new(10_000_000);
    table.extend_to(10_000_000).unwrap();
    let mut group = c.benchmark_group("stone_game_iv_warm");
    // A winning pile (binary search plus the smallest-winning-move walk) and a losing one.
    for n in [9_999_999u64, 9_999_932] {
        group.bench_with_input(BenchmarkId::new("solve", n), &n, |b, &n| b.iter(|| table.solve(n).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, cold, warm);
criterion_main!(benches);

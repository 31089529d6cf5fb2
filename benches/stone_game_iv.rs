//! Stone Game IV: the segmented sieve against the first one (`stone_game_iv::baseline`)
//! and the seeds' O(n·√n) dynamic programme, all from cold, to n = 10^7; and answering
//! from a warm table, small piles and large ones.
//!
//! `cargo bench --bench stone_game_iv`. The 10^8 to 10^10 cold runs take too long for
//! criterion's repetitions: `cargo run --release --example iv_cold -- --baseline` times
//! them, old and new alternately, one process each, with peak memory. The large-pile
//! warm bench uses a 10^8 table (one second to build) and random piles in its top
//! tenth; `iv_cold --moves` measures the same near 10^9 and beyond.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use gamesolver::games::stone_game_iv::{baseline, losing_positions_below, smallest_winning_take};
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
        group.bench_with_input(BenchmarkId::new("baseline_sieve", end), &end, |b, &end| {
            b.iter(|| baseline::losing_positions_below(end as u64).len())
        });
        group.bench_with_input(BenchmarkId::new("seeds_dp", end), &end, |b, &end| {
            b.iter(|| seeds_dp_losing_count(end))
        });
    }
    // A fresh table's first small-pile move: the list to 2^20 and the move table below
    // 2^20 (`small_moves.rs`), which a bulk run with piles up to 10^6 waits for once.
    group.bench_function("first_move_below_2^20", |b| {
        b.iter(|| StoneGameIvTable::new(1 << 20).solve((1 << 20) - 1).unwrap())
    });
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

/// 1,000 pseudo-random piles in [9·10^7, 10^8) (SplitMix64, fixed from run to run).
fn large_piles() -> Vec<u64> {
    let mut state = 0u64;
    (0..1000)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = (state ^ (state >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            90_000_000 + (z ^ (z >> 31)) % 10_000_000
        })
        .collect()
}

/// Warm answers for large piles, 1,000 an iteration: the full solve (the indexed search
/// for the move), the outcome alone, and the move alone from the list by the list walk
/// (`smallest_winning_take`) and by the first walk (`baseline`).
fn warm_large(c: &mut Criterion) {
    const END: u64 = 100_000_000;
    let table = StoneGameIvTable::new(END - 1);
    table.extend_to(END - 1).unwrap();
    let (_, losing) = table.snapshot();
    let piles = large_piles();
    // The winning piles with the P-positions below each, for the move-only cases.
    let winning: Vec<(u64, usize)> = piles
        .iter()
        .map(|&n| (n, losing.partition_point(|&p| p < n)))
        .filter(|&(n, below)| losing.get(below).is_none_or(|&p| p != n))
        .collect();
    let mut group = c.benchmark_group("stone_game_iv_warm_large");
    group.bench_function("solve_1000", |b| {
        b.iter(|| piles.iter().filter(|&&n| table.solve(n).unwrap().alice_wins()).count())
    });
    group.bench_function("winner_1000", |b| {
        b.iter(|| {
            piles.iter().filter(|&&n| table.winner(n).unwrap() == gamesolver::games::Player::Alice).count()
        })
    });
    group.bench_function("list_walk_move_1000", |b| {
        b.iter(|| {
            winning.iter().map(|&(n, below)| smallest_winning_take(&losing[..below], n).unwrap()).sum::<u64>()
        })
    });
    group.bench_function("baseline_move_1000", |b| {
        b.iter(|| {
            winning
                .iter()
                .map(|&(n, below)| baseline::smallest_winning_take(&losing[..below], n).unwrap())
                .sum::<u64>()
        })
    });
    group.finish();
}

criterion_group!(benches, cold, warm, warm_large);
criterion_main!(benches);

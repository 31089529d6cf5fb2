//! Criterion benches of the solver core: the large-input throughput of Sum Game and Stone
//! Game IX, the per-problem cost of small problems, and the seeds' reference solutions
//! ported as they are written, compiled alongside for comparison.
//!
//! Goals (issue 5): Sum Game on 10^7 characters at ≥ 2 GB/s; Stone Game IX on 10^6 stones
//! at ≥ 1 G stones/s. `cargo bench --bench solvers`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gamesolver::games::{stone_game_iv, stone_game_ix, sum_game, Game, Tables};

/// Deterministic inputs without pulling a generator's API into the bench (splitmix64).
struct Inputs(u64);

impl Inputs {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A Sum Game string of `len` characters, about one in eleven a '?'.
    fn sum_game(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| match self.next() % 11 {
                10 => '?',
                d => char::from(b'0' + d as u8),
            })
            .collect()
    }

    /// `len` stone values spread over the whole `u64` range.
    fn stones(&mut self, len: usize) -> Vec<u64> {
        (0..len).map(|_| self.next()).collect()
    }
}

/// The seeds' C++ solution of Sum Game (000_*.txt), `substr` copies and `int` arithmetic
/// included, so that the comparison is with what the seed actually does.
fn seed_sum_game(num: &str) -> bool {
    let n = num.len() as i32;
    let get = |s: String| -> (i32, i32) {
        let (mut nn, mut qq) = (0i32, 0i32);
        for ch in s.bytes() {
            if ch == b'?' {
                qq += 1;
            } else {
                nn += i32::from(ch - b'0');
            }
        }
        (nn, qq)
    };
    let (n0, q0) = get(num[..(n / 2) as usize].to_string());
    let (n1, q1) = get(num[(n / 2) as usize..].to_string());
    (q0 + q1) % 2 == 1 || (n0 - n1 != (q1 - q0) * 9 / 2)
}

/// The seeds' official Python solution of Stone Game IX (002_*.txt).
fn seed_stone_game_ix(stones: &[u64]) -> bool {
    let (mut cnt0, mut cnt1, mut cnt2) = (0i64, 0i64, 0i64);
    for &val in stones {
        match val % 3 {
            0 => cnt0 += 1,
            1 => cnt1 += 1,
            _ => cnt2 += 1,
        }
    }
    if cnt0 % 2 == 0 {
        return cnt1 >= 1 && cnt2 >= 1;
    }
    cnt1 - cnt2 > 2 || cnt2 - cnt1 > 2
}

fn sum_game_large(c: &mut Criterion) {
    const LEN: usize = 10_000_000;
    let num = Inputs(1927).sum_game(LEN);
    let mut group = c.benchmark_group("sum_game_1e7");
    group.throughput(Throughput::Bytes(LEN as u64));
    group.bench_function("solve", |b| b.iter(|| sum_game::solve(black_box(&num))));
    group.bench_function("seed_cpp", |b| b.iter(|| seed_sum_game(black_box(&num))));
    group.finish();
}

fn stone_game_ix_large(c: &mut Criterion) {
    const LEN: usize = 1_000_000;
    let stones = Inputs(2029).stones(LEN);
    let mut group = c.benchmark_group("stone_game_ix_1e6");
    group.throughput(Throughput::Elements(LEN as u64));
    group.bench_function("solve", |b| b.iter(|| stone_game_ix::solve(black_box(&stones))));
    group.bench_function("seed_python", |b| b.iter(|| seed_stone_game_ix(black_box(&stones))));
    group.finish();
}

/// The fixed cost of one small problem: what a unary `Solve` spends in the solver.
fn small_problems(c: &mut Criterion) {
    let mut inputs = Inputs(1510);
    let mut group = c.benchmark_group("small_problem");
    for len in [8, 64] {
        let num = inputs.sum_game(len);
        group.bench_with_input(BenchmarkId::new("sum_game", len), &num, |b, num| {
            b.iter(|| sum_game::solve(black_box(num)))
        });
        group.bench_with_input(BenchmarkId::new("sum_game_seed_cpp", len), &num, |b, num| {
            b.iter(|| seed_sum_game(black_box(num)))
        });
    }
    for len in [5, 64] {
        let stones = inputs.stones(len);
        group.bench_with_input(BenchmarkId::new("stone_game_ix", len), &stones, |b, stones| {
            b.iter(|| stone_game_ix::solve(black_box(stones)))
        });
        group.bench_with_input(BenchmarkId::new("stone_game_ix_seed_python", len), &stones, |b, stones| {
            b.iter(|| seed_stone_game_ix(black_box(stones)))
        });
    }
    group.finish();

    // A mixed batch as the service sees it: dispatch on the game, Stone Game IV from a
    // table that already covers its piles.
    let table = Tables::new(stone_game_iv::DEFAULT_LIMIT, 1_000);
    let problems: Vec<Game> = (0..999)
        .map(|i| {
            let size = 1 + inputs.next() as usize % 8;
            match i % 3 {
                0 => Game::SumGame(inputs.sum_game(2 * size)),
                1 => Game::StoneGameIx(inputs.stones(size)),
                _ => Game::StoneGameIv(1 + inputs.next() % 100_000),
            }
        })
        .collect();
    for problem in &problems {
        problem.solve(&table).expect("valid problem");
    }
    let mut group = c.benchmark_group("small_problem_batch");
    group.throughput(Throughput::Elements(problems.len() as u64));
    group.bench_function("mixed_999", |b| {
        b.iter(|| black_box(&problems).iter().map(|p| p.solve(&table).is_ok() as usize).sum::<usize>())
    });
    group.finish();
}

criterion_group!(benches, sum_game_large, stone_game_ix_large, small_problems);
criterion_main!(benches);

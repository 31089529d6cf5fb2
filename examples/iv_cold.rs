//! Stone Game IV at sizes criterion cannot repeat: cold table growth, and warm moves for
//! large piles against small ones.
//!
//! `cargo run --release --example iv_cold -- [--baseline] [--runs R] [--save PATH] [N...]`
//! grows the table to each N (default 10^7, 10^8, 10^9) from cold, each in a fresh
//! process so that one run's memory does not hide the next, and prints a markdown row:
//! wall time, CPU time, peak memory (taken before anything else is allocated), the
//! P-positions (by residue mod 5), and warm answers on random piles in the top tenth
//! below N. With `--baseline`, each N is sieved R times (default 3) by the frozen first
//! sieve (`stone_game_iv::baseline`, below 2^32 only) and by the current one,
//! alternately, so that both see the same machine load; medians and ratios follow. With
//! `--save PATH`, the table is then written to PATH (untimed in the row) and read back,
//! and the file's size and both times are printed.
//!
//! `cargo run --release --example iv_cold -- --moves PATH [--runs R] N` measures
//! winning moves: 200,000 random piles in [0.9·N, N) against 200,000 up to 10^6,
//! through `StoneGameIvTable::solve` (and `winner`) on a warm table loaded from PATH (or
//! grown and saved there first), R rounds interleaved (default 5), medians. The list walk
//! (`stone_game_iv::smallest_winning_take`) runs in the same rounds as the reference.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use gamesolver::games::stone_game_iv::IvTableFile;
use gamesolver::games::stone_game_iv::{baseline, smallest_winning_take};
use gamesolver::games::{stone_game_iv, Move, Player, StoneGameIvTable};
use gamesolver::tables::TableFile;
use measure::median;

#[path = "common/measure.rs"]
mod measure;

const CHILD_N: &str = "IV_COLD_N";
const CHILD_SIEVE: &str = "IV_COLD_SIEVE";
const CHILD_SAVE: &str = "IV_COLD_SAVE";

/// Which sieve a child runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Variant {
    /// The frozen first sieve, `stone_game_iv::baseline`.
    Baseline,
    /// The current sieve, grown through the table as the server does.
    Current,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Current => "current",
        }
    }
}

fn usage(err: impl std::fmt::Display) -> ! {
    panic!("usage: iv_cold [--baseline] [--runs R] [--save PATH] [N...] | iv_cold --moves PATH [--runs R] N: {err}")
}

fn main() {
    if let Ok(n) = std::env::var(CHILD_N) {
        let variant = match std::env::var(CHILD_SIEVE).as_deref() {
            Ok("baseline") => Variant::Baseline,
            _ => Variant::Current,
        };
        child(n.parse().expect("a pile count"), variant, std::env::var_os(CHILD_SAVE).map(PathBuf::from));
        return;
    }
    let (mut ends, mut with_baseline, mut runs, mut save, mut moves) = (Vec::new(), false, None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--baseline" => with_baseline = true,
            "--runs" => {
                runs = Some(args.next().and_then(|r| r.parse().ok()).unwrap_or_else(|| usage("--runs R")))
            }
            "--save" => save = Some(PathBuf::from(args.next().unwrap_or_else(|| usage("--save PATH")))),
            "--moves" => moves = Some(PathBuf::from(args.next().unwrap_or_else(|| usage("--moves PATH")))),
            n => ends.push(n.parse::<u64>().unwrap_or_else(|err| usage(err))),
        }
    }
    if let Some(path) = moves {
        let &[end] = ends.as_slice() else { usage("--moves takes one N") };
        warm_moves(&path, end, runs.unwrap_or(5));
        return;
    }
    if ends.is_empty() {
        ends = vec![10_000_000, 100_000_000, 1_000_000_000];
    }
    let variants: &[Variant] =
        if with_baseline { &[Variant::Baseline, Variant::Current] } else { &[Variant::Current] };
    let runs = if with_baseline { runs.unwrap_or(3) } else { runs.unwrap_or(1) };
    println!(
        "| n | sieve | wall s | CPU s | peak RSS MiB | P-positions < n | by residue mod 5 | (p, k) pairs | solve µs | solve µs, list walk | winner µs | mean k |"
    );
    println!("|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|");
    let mut summary = Vec::new();
    for end in ends {
        let mut times: Vec<Vec<(f64, f64)>> = vec![Vec::new(); variants.len()];
        for _ in 0..runs {
            for (i, &variant) in variants.iter().enumerate() {
                let row = run_child(end, variant, save.as_deref());
                print!("{row}");
                // The wall and CPU columns, for the medians.
                let cells: Vec<&str> = row.lines().next().unwrap_or("").split('|').map(str::trim).collect();
                times[i].push((cells[3].parse().unwrap_or(f64::NAN), cells[4].parse().unwrap_or(f64::NAN)));
            }
        }
        if with_baseline {
            let wall = |i: usize| median(times[i].iter().map(|t| t.0).collect());
            let cpu = |i: usize| median(times[i].iter().map(|t| t.1).collect());
            summary.push(format!(
                "| {end:.0e} | {runs} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                wall(0),
                wall(1),
                wall(1) / wall(0),
                cpu(0),
                cpu(1),
                cpu(1) / cpu(0)
            ));
        }
    }
    if with_baseline {
        println!();
        println!("| n | runs each | baseline wall s | current wall s | ratio | baseline CPU s | current CPU s | ratio |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
        for line in summary {
            println!("{line}");
        }
    }
}

fn run_child(end: u64, variant: Variant, save: Option<&Path>) -> String {
    let exe = std::env::current_exe().expect("own path");
    let mut command = Command::new(exe);
    command.env(CHILD_N, end.to_string()).env(CHILD_SIEVE, variant.name());
    if let Some(path) = save {
        command.env(CHILD_SAVE, path);
    }
    let output = command.output().expect("child run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Classifies every pile below `end` from cold with `variant`, then answers warm piles.
fn child(end: u64, variant: Variant, save: Option<PathBuf>) {
    let table = StoneGameIvTable::try_new(end - 1).expect("a limit the table takes");
    let (started, before) = (Instant::now(), measure::usage());
    let baseline_list = match variant {
        Variant::Baseline => Some(baseline::losing_positions_below(end)),
        Variant::Current => {
            table.extend_to(end - 1).expect("within the limit");
            None
        }
    };
    let (wall, after) = (started.elapsed().as_secs_f64(), measure::usage());
    if let Some(losing) = baseline_list {
        // Outside the timing: the restore's spot check is not the baseline's work.
        table.restore(end, losing.into_iter().map(u64::from).collect()).expect("a valid list");
    }
    report(&table, end, variant, wall, after.cpu_seconds - before.cpu_seconds, after.peak_rss_mib);
    if let Some(path) = save {
        save_and_load(&table, &path);
    }
}

fn report(table: &StoneGameIvTable, end: u64, variant: Variant, wall: f64, cpu: f64, rss: f64) {
    let (covered, losing) = table.snapshot();
    assert_eq!(covered, end);
    // The pairs of a P-position p and a square k² with p + k² < end: the baseline's marks;
    // the current sieve makes about 60% of them (the residues mod 5, `sieve.rs`).
    let marks: u64 = losing.iter().map(|&p| (((end - 1 - p) as f64).sqrt()) as u64).sum();
    let mut residues = [0usize; 5];
    for &p in &losing {
        residues[(p % 5) as usize] += 1;
    }
    let residues = residues.map(|count| count.to_string()).join(" / ");
    let warm = warm_solves(table, &losing, end);
    println!(
        "| {end:.0e} | {} | {wall:.2} | {cpu:.2} | {rss:.1} | {} | {residues} | {marks:.2e} | {:.2} | {:.2} | {:.3} | {:.0} |",
        variant.name(),
        losing.len(),
        warm.solve_micros,
        warm.list_walk_micros,
        warm.winner_micros,
        warm.mean_k
    );
}

/// Writes the table to `path`, reads it back, and prints the size and both times.
fn save_and_load(table: &StoneGameIvTable, path: &Path) {
    let (covered, losing) = table.snapshot();
    let file = IvTableFile { covered, losing };
    let started = Instant::now();
    file.save(path).expect("saved");
    let saved = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let loaded = IvTableFile::load(path).expect("loaded");
    let load = started.elapsed().as_secs_f64();
    assert_eq!(loaded, file);
    let bytes = std::fs::metadata(path).expect("the file").len();
    println!(
        "table file {}: {bytes} bytes, saved in {saved:.3} s, loaded and checked in {load:.3} s",
        path.display()
    );
}

/// SplitMix64 piles in [lo, hi): fixed from run to run, no dependency.
fn random_piles(seed: u64, count: usize, lo: u64, hi: u64) -> Vec<u64> {
    let mut state = seed;
    (0..count)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = (state ^ (state >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            lo + (z ^ (z >> 31)) % (hi - lo)
        })
        .collect()
}

struct Warm {
    solve_micros: f64,
    list_walk_micros: f64,
    winner_micros: f64,
    mean_k: f64,
}

/// Mean time per answer on pseudo-random piles in the top tenth below `end`: `solve`
/// (outcome and move), the list walk for the move, and the outcome alone; and the mean
/// k of the winning moves.
fn warm_solves(table: &StoneGameIvTable, losing: &[u64], end: u64) -> Warm {
    const SOLVES: usize = 20_000;
    let piles = random_piles(end, SOLVES, end - end / 10, end);
    let (mut sum_k, mut wins) = (0.0, 0.0);
    let started = Instant::now();
    for &n in &piles {
        if let Some(Move::StoneGameIv(stone_game_iv::StoneGameIvMove { take })) =
            table.solve(n).expect("covered").winning_move
        {
            sum_k += (take as f64).sqrt();
            wins += 1.0;
        }
    }
    let solve_micros = started.elapsed().as_secs_f64() * 1e6 / SOLVES as f64;
    let list_walk_micros = list_walk_micros(losing, &piles);
    let started = Instant::now();
    for &n in &piles {
        std::hint::black_box(table.winner(n).expect("covered"));
    }
    let winner_micros = started.elapsed().as_secs_f64() * 1e6 / SOLVES as f64;
    Warm { solve_micros, list_walk_micros, winner_micros, mean_k: sum_k / wins }
}

/// µs a pile for the outcome and move from the list alone: a binary search, then the
/// list walk for a winning pile.
fn list_walk_micros(losing: &[u64], piles: &[u64]) -> f64 {
    let started = Instant::now();
    let mut takes = 0;
    for &n in piles {
        let below = losing.partition_point(|&p| p < n);
        if losing.get(below) != Some(&n) {
            takes += smallest_winning_take(&losing[..below], n).unwrap_or(0);
        }
    }
    std::hint::black_box(takes);
    started.elapsed().as_secs_f64() * 1e6 / piles.len() as f64
}

/// µs a pile through `solve` (outcome and move) or `winner`.
fn table_micros(table: &StoneGameIvTable, piles: &[u64], with_moves: bool) -> f64 {
    let started = Instant::now();
    for &n in piles {
        if with_moves {
            std::hint::black_box(table.solve(n).expect("covered"));
        } else {
            std::hint::black_box(table.winner(n).expect("covered") == Player::Alice);
        }
    }
    started.elapsed().as_secs_f64() * 1e6 / piles.len() as f64
}

/// The warm-move measurement of `--moves`: see the module doc.
fn warm_moves(path: &Path, end: u64, rounds: usize) {
    const PILES: usize = 200_000;
    let table = StoneGameIvTable::try_new(end).expect("a limit the table takes");
    match IvTableFile::load(path) {
        Ok(file) if file.covered > end => {
            table.restore(file.covered, file.losing).expect("a valid list");
            println!("table loaded from {}", path.display());
        }
        _ => {
            let started = Instant::now();
            table.extend_to(end).expect("within the limit");
            println!("table grown to {end} in {:.2} s", started.elapsed().as_secs_f64());
            let (covered, losing) = table.snapshot();
            IvTableFile { covered, losing }.save(path).expect("saved");
        }
    }
    // Both grow the move table below 2^21 and cover every pile: nothing blocks below.
    table.extend_to(end).expect("within the limit");
    let (_, losing) = table.snapshot();
    let small = random_piles(1, PILES, 0, 1_000_001);
    let large = random_piles(2, PILES, end - end / 10, end);
    let mut rows: Vec<[f64; 5]> = Vec::new();
    for _ in 0..rounds {
        rows.push([
            table_micros(&table, &small, true),
            table_micros(&table, &large, true),
            list_walk_micros(&losing, &large),
            table_micros(&table, &small, false),
            table_micros(&table, &large, false),
        ]);
    }
    let medians: Vec<f64> = (0..5).map(|i| median(rows.iter().map(|row| row[i]).collect())).collect();
    println!("{PILES} piles each, {rounds} rounds interleaved, medians, µs a pile:");
    println!("| piles | solve | solve, list walk | winner |");
    println!("|---|---:|---:|---:|");
    println!("| up to 10^6 | {:.3} | – | {:.3} |", medians[0], medians[3]);
    println!(
        "| [{:.1e}, {end:.1e}) | {:.3} | {:.3} | {:.3} |",
        end - end / 10,
        medians[1],
        medians[2],
        medians[4]
    );
    println!(
        "rate ratio large/small: solve {:.3} (list walk {:.3}), winner {:.3}",
        medians[0] / medians[1],
        medians[0] / medians[2],
        medians[3] / medians[4]
    );
}

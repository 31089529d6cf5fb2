//! Cold Stone Game IV table growth to 10^7, 10^8 and 10^9: wall time, CPU time and peak
//! memory, each in a fresh process so that one run's memory does not hide the next; then
//! warm answers on random piles in the top tenth below n.
//!
//! `cargo run --release --example iv_cold [-- [--baseline] [--runs R] N...]` prints a
//! markdown table. With `--baseline`, each n is sieved R times (default 3) by the frozen
//! pre-issue-11 sieve and by the current one, alternately, so that both see the same
//! machine load; the medians and their ratio follow the rows. Criterion
//! (`benches/stone_game_iv.rs`) is too slow for these sizes.

use std::process::Command;
use std::time::Instant;

use gamesolver::games::stone_game_iv::baseline;
use gamesolver::games::{Move, StoneGameIvTable};

const CHILD_N: &str = "IV_COLD_N";
const CHILD_SIEVE: &str = "IV_COLD_SIEVE";

/// Which sieve a child runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Variant {
    /// The frozen pre-issue-11 sieve, `stone_game_iv::baseline`.
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

fn main() {
    if let Ok(n) = std::env::var(CHILD_N) {
        let variant = match std::env::var(CHILD_SIEVE).as_deref() {
            Ok("baseline") => Variant::Baseline,
            _ => Variant::Current,
        };
        child(n.parse().expect("a pile count"), variant);
        return;
    }
    let (mut ends, mut with_baseline, mut runs) = (Vec::new(), false, 3usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--baseline" => with_baseline = true,
            "--runs" => runs = args.next().and_then(|r| r.parse().ok()).expect("--runs R"),
            n => ends.push(
                n.parse::<u64>()
                    .unwrap_or_else(|err| panic!("usage: iv_cold [--baseline] [--runs R] [N...]: {err}")),
            ),
        }
    }
    if ends.is_empty() {
        ends = vec![10_000_000, 100_000_000, 1_000_000_000];
    }
    let variants: &[Variant] =
        if with_baseline { &[Variant::Baseline, Variant::Current] } else { &[Variant::Current] };
    let runs = if with_baseline { runs } else { 1 };
    println!(
        "| n | sieve | wall s | CPU s | peak RSS MiB | P-positions < n | (p, k) pairs | solve µs | solve µs, old walk | winner µs | mean k |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut summary = Vec::new();
    for end in ends {
        let mut times: Vec<Vec<(f64, f64)>> = vec![Vec::new(); variants.len()];
        for _ in 0..runs {
            for (i, &variant) in variants.iter().enumerate() {
                let row = run_child(end, variant);
                print!("{row}");
                // The wall and CPU columns, for the medians.
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
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

fn run_child(end: u64, variant: Variant) -> String {
    let exe = std::env::current_exe().expect("own path");
    let output = Command::new(exe)
        .env(CHILD_N, end.to_string())
        .env(CHILD_SIEVE, variant.name())
        .output()
        .expect("child run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Classifies every pile below `end` from cold with `variant`, then answers warm piles.
fn child(end: u64, variant: Variant) {
    let table = StoneGameIvTable::new(end - 1);
    let (started, cpu_before) = (Instant::now(), cpu_seconds());
    let baseline_list = match variant {
        Variant::Baseline => Some(baseline::losing_positions_below(end)),
        Variant::Current => {
            table.extend_to(end - 1).expect("within the limit");
            None
        }
    };
    let (wall, cpu_after) = (started.elapsed().as_secs_f64(), cpu_seconds());
    if let Some(losing) = baseline_list {
        // Outside the timing: the restore's spot check is not the baseline's work.
        table.restore(end, losing).expect("a valid list");
    }
    report(&table, end, variant, wall, cpu_after.zip(cpu_before));
}

fn report(table: &StoneGameIvTable, end: u64, variant: Variant, wall: f64, cpu: Option<(f64, f64)>) {
    let (covered, losing) = table.snapshot();
    assert_eq!(covered, end);
    // The pairs of a P-position p and a square k² with p + k² < end: the baseline's marks;
    // the current sieve makes about 60% of them (the residues mod 5 in `sieve.rs`).
    let marks: u64 = losing.iter().map(|&p| (((end - 1 - u64::from(p)) as f64).sqrt()) as u64).sum();
    let cpu = cpu.map_or("n/a".into(), |(after, before)| format!("{:.2}", after - before));
    let rss = peak_rss_mib().map_or("n/a".into(), |mib| format!("{mib:.1}"));
    let warm = warm_solves(table, &losing, end);
    println!(
        "| {end:.0e} | {} | {wall:.2} | {cpu} | {rss} | {} | {marks:.2e} | {:.2} | {:.2} | {:.3} | {:.0} |",
        variant.name(),
        losing.len(),
        warm.solve_micros,
        warm.old_walk_micros,
        warm.winner_micros,
        warm.mean_k
    );
}

struct Warm {
    solve_micros: f64,
    old_walk_micros: f64,
    winner_micros: f64,
    mean_k: f64,
}

/// Mean time per answer on pseudo-random piles in the top tenth below `end`: `solve`
/// (outcome and move), the same with the pre-issue-11 walk for the move, and the outcome
/// alone; and the mean k of the winning moves.
fn warm_solves(table: &StoneGameIvTable, losing: &[u32], end: u64) -> Warm {
    const SOLVES: u64 = 20_000;
    let piles: Vec<u64> = {
        let mut state = end;
        (0..SOLVES)
            .map(|_| {
                // SplitMix64: fixed piles from run to run, no dependency.
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = (state ^ (state >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                end - 1 - (z ^ (z >> 31)) % (end / 10)
            })
            .collect()
    };
    let (mut sum_k, mut wins) = (0.0, 0.0);
    let started = Instant::now();
    for &n in &piles {
        if let Some(Move::StoneGameIv { take }) = table.solve(n).expect("covered").winning_move {
            sum_k += (take as f64).sqrt();
            wins += 1.0;
        }
    }
    let solve_micros = started.elapsed().as_secs_f64() * 1e6 / SOLVES as f64;
    let started = Instant::now();
    let mut takes = 0;
    for &n in &piles {
        let below = losing.partition_point(|&p| u64::from(p) < n);
        if losing.get(below).is_none_or(|&p| u64::from(p) != n) {
            takes += baseline::smallest_winning_take(&losing[..below], n).unwrap_or(0);
        }
    }
    std::hint::black_box(takes);
    let old_walk_micros = started.elapsed().as_secs_f64() * 1e6 / SOLVES as f64;
    let started = Instant::now();
    for &n in &piles {
        std::hint::black_box(table.winner(n).expect("covered"));
    }
    let winner_micros = started.elapsed().as_secs_f64() * 1e6 / SOLVES as f64;
    Warm { solve_micros, old_walk_micros, winner_micros, mean_k: sum_k / wins }
}

/// This process's user + system CPU time (Linux), from /proc/self/stat.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(ticks / 100.0)
}

/// Peak resident memory (Linux), from VmHWM.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

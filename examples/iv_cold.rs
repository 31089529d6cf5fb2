//! Cold Stone Game IV table growth to 10^7, 10^8 and 10^9: wall time, CPU time and peak
//! memory, each in a fresh process so that one run's memory does not hide the next.
//!
//! `cargo run --release --example iv_cold [-- N...]` prints a markdown table. Criterion
//! (`benches/stone_game_iv.rs`) is too slow for these sizes: one 10^9 run is ~16 s.

use std::process::Command;
use std::time::Instant;

use gamesolver::games::{Move, StoneGameIvTable};

const CHILD: &str = "IV_COLD_N";

fn main() {
    if let Ok(n) = std::env::var(CHILD) {
        child(n.parse().expect("a pile count"));
        return;
    }
    let ends: Vec<u64> = match std::env::args().skip(1).map(|arg| arg.parse()).collect() {
        Ok(ends) if !Vec::is_empty(&ends) => ends,
        Ok(_) => vec![10_000_000, 100_000_000, 1_000_000_000],
        Err(err) => panic!("usage: iv_cold [N...]: {err}"),
    };
    println!(
        "| n | wall s | CPU s | peak RSS MiB | P-positions < n | (p, k) marks | warm solve µs | mean k |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for end in ends {
        let exe = std::env::current_exe().expect("own path");
        let output = Command::new(exe).env(CHILD, end.to_string()).output().expect("child run");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        print!("{}", String::from_utf8_lossy(&output.stdout));
    }
}

/// Grows a fresh table (as the server does) to classify every pile below `end`.
fn child(end: u64) {
    let (wall, cpu) = (Instant::now(), cpu_seconds());
    let table = StoneGameIvTable::new(end - 1);
    table.extend_to(end - 1).expect("within the limit");
    let (wall, cpu) =
        (wall.elapsed().as_secs_f64(), cpu_seconds().zip(cpu).map(|(after, before)| after - before));
    let (covered, losing) = table.snapshot();
    assert_eq!(covered, end);
    // The sieve's work: one mark per P-position p and square k² with p + k² < end.
    let marks: u64 = losing.iter().map(|&p| (((end - 1 - u64::from(p)) as f64).sqrt()) as u64).sum();
    let cpu = cpu.map_or("n/a".into(), |cpu| format!("{cpu:.2}"));
    let rss = peak_rss_mib().map_or("n/a".into(), |mib| format!("{mib:.1}"));
    let (solve_micros, mean_k) = warm_solves(&table, end);
    println!(
        "| {end:.0e} | {wall:.2} | {cpu} | {rss} | {} | {marks:.2e} | {solve_micros:.2} | {mean_k:.0} |",
        losing.len()
    );
}

/// Mean time of `solve` on pseudo-random piles in the top 1% below `end`, and the mean k
/// of the winning moves found: the outcome is a binary search, the move a walk over k.
fn warm_solves(table: &StoneGameIvTable, end: u64) -> (f64, f64) {
    const SOLVES: u64 = 20_000;
    let mut state = end;
    let (mut sum_k, mut wins) = (0.0, 0.0);
    let started = Instant::now();
    for _ in 0..SOLVES {
        // SplitMix64: fixed piles from run to run, no dependency.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = (state ^ (state >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let n = end - 1 - (z ^ (z >> 31)) % (end / 100);
        if let Some(Move::StoneGameIv { take }) = table.solve(n).expect("covered").winning_move {
            sum_k += (take as f64).sqrt();
            wins += 1.0;
        }
    }
    (started.elapsed().as_secs_f64() * 1e6 / SOLVES as f64, sum_k / wins)
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

//! Cold Nim Square table growth: wall time, CPU time and peak memory of the Grundy values
//! of every pile below n, each in a fresh process so that one run's memory does not hide
//! the next.
//!
//! `cargo run --release --example grundy_cold [-- [--baseline] [--runs R] N...]` prints a
//! markdown table. With `--baseline`, each n is computed R times (default 3) by the plain
//! programme (`nim_square::baseline`) and by the table, alternately, so that both see the
//! same machine load; the medians and their ratio follow the rows, after a check that
//! both computed the same values. Criterion (`benches/nim_square.rs`) is too slow past
//! 10^6.

use std::process::Command;
use std::time::Instant;

use gamesolver::games::nim_square::{baseline, GrundyTable};
use measure::{median, usage};

#[path = "common/measure.rs"]
mod measure;

const CHILD_N: &str = "GRUNDY_COLD_N";
const CHILD_VARIANT: &str = "GRUNDY_COLD_VARIANT";

/// Which computation a child runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Variant {
    /// The plain programme, one thread.
    Baseline,
    /// The table, grown in one extension as the server does (two workers).
    Table,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::Table => "table",
        }
    }
}

/// One child's figures.
struct Row {
    wall: f64,
    cpu: f64,
    text: String,
    /// A hash of the values, to compare the variants.
    digest: u64,
}

fn main() {
    if let Ok(n) = std::env::var(CHILD_N) {
        let variant = match std::env::var(CHILD_VARIANT).as_deref() {
            Ok("baseline") => Variant::Baseline,
            _ => Variant::Table,
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
                n.parse::<f64>()
                    .map(|n| n as u64)
                    .unwrap_or_else(|err| panic!("usage: grundy_cold [--baseline] [--runs R] [N...]: {err}")),
            ),
        }
    }
    if ends.is_empty() {
        ends = vec![1_000_000, 10_000_000];
    }
    let variants: &[Variant] =
        if with_baseline { &[Variant::Baseline, Variant::Table] } else { &[Variant::Table] };
    let runs = if with_baseline { runs } else { 1 };
    println!("| n | computed by | wall s | CPU s | peak RSS MiB | largest value |");
    println!("|---:|---|---:|---:|---:|---:|");
    let mut summary = Vec::new();
    for end in ends {
        let mut rows: Vec<Vec<Row>> = variants.iter().map(|_| Vec::new()).collect();
        for _ in 0..runs {
            for (i, &variant) in variants.iter().enumerate() {
                let row = run_child(end, variant);
                print!("{}", row.text);
                rows[i].push(row);
            }
        }
        let digests: Vec<u64> = rows.iter().flatten().map(|row| row.digest).collect();
        assert!(
            digests.windows(2).all(|pair| pair[0] == pair[1]),
            "the values differ between runs at n = {end}"
        );
        if with_baseline {
            let wall = |i: usize| median(rows[i].iter().map(|row| row.wall).collect());
            let cpu = |i: usize| median(rows[i].iter().map(|row| row.cpu).collect());
            summary.push(format!(
                "| {end:.0e} | {runs} | {:.2} | {:.2} | {:.3} | {:.2} | {:.2} | {:.3} |",
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
        println!("Both computed the same values.");
        println!();
        println!("| n | runs each | baseline wall s | table wall s | ratio | baseline CPU s | table CPU s | ratio |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
        for line in summary {
            println!("{line}");
        }
    }
}

fn run_child(end: u64, variant: Variant) -> Row {
    let exe = std::env::current_exe().expect("own path");
    let output = Command::new(exe)
        .env(CHILD_N, end.to_string())
        .env(CHILD_VARIANT, variant.name())
        .output()
        .expect("child run");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    // The row, then the digest on a line of its own.
    let (text, digest) = text.rsplit_once("digest ").expect("a digest line");
    let cells: Vec<&str> = text.split('|').map(str::trim).collect();
    Row {
        wall: cells[3].parse().unwrap_or(f64::NAN),
        cpu: cells[4].parse().unwrap_or(f64::NAN),
        text: text.to_owned(),
        digest: digest.trim().parse().expect("a digest"),
    }
}

/// Computes the value of every pile below `end` from cold with `variant`.
fn child(end: u64, variant: Variant) {
    let (started, cpu_before) = (Instant::now(), usage());
    let (wall, cpu_after, values) = match variant {
        Variant::Baseline => {
            let values = baseline::grundy_values_below(end);
            (started.elapsed().as_secs_f64(), usage(), values)
        }
        Variant::Table => {
            let table = GrundyTable::new(end - 1);
            table.extend_to(end - 1).expect("within the limit");
            // Measured before the snapshot, whose copy is not the table's memory.
            (started.elapsed().as_secs_f64(), usage(), table.snapshot().1)
        }
    };
    assert_eq!(values.len() as u64, end);
    let largest = values.iter().max().copied().unwrap_or(0);
    let bytes: Vec<u8> = values.iter().flat_map(|value| value.to_le_bytes()).collect();
    println!(
        "| {end:.0e} | {} | {wall:.2} | {:.2} | {:.1} | {largest} |",
        variant.name(),
        cpu_after.cpu_seconds - cpu_before.cpu_seconds,
        cpu_after.peak_rss_mib
    );
    println!("digest {}", xxhash_rust::xxh3::xxh3_64(&bytes));
}

//! The solver's own rate on a table of problems, in process: the limit a door can reach.
//!
//! `cargo run --profile dist --example solve_rate -- FILE.parquet [--rounds R] [--winner-only]`
//! reads the table's game columns (as the Flight door reads them: `columnar::problems`),
//! then hands them to the fan-out (`Solver::solve_batch`, on rayon over every core, in
//! slices of 65,536 rows, as a client sends them) R times (default 3) after one warm-up
//! pass that grows the tables, and prints the median problems/s of the timed passes.
//! Only the fan-out's calls are timed (not reading the file, nor the copy of each slice
//! a door would decode): what is left is the solving a door feeds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gamesolver::columnar::{self, Games};
use gamesolver::games::{nim_square, stone_game_iv, Tables};
use gamesolver::solver::{Problem, Solver, SolverConfig};
use measure::median;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

#[path = "common/measure.rs"]
#[allow(dead_code)] // `usage` is the cold-start examples'
mod measure;

/// Rows a slice takes, as `gamesolver_client.flight` sends them.
const SLICE_ROWS: usize = 65_536;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: solve_rate FILE.parquet [--rounds R] [--winner-only]")?;
    let (mut rounds, mut winner_only) = (3usize, false);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => rounds = args.next().ok_or("--rounds needs a number")?.parse()?,
            "--winner-only" => winner_only = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path)?)?
        .with_batch_size(SLICE_ROWS)
        .build()?;
    let mut slices: Vec<Vec<Problem>> = Vec::new();
    for batch in reader {
        slices.push(columnar::problems(&batch?, Games::Mixed)?);
    }
    let rows: usize = slices.iter().map(Vec::len).sum();
    let tables = Arc::new(Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT));
    let solver = Solver::new(tables, SolverConfig::default());
    let runtime = tokio::runtime::Runtime::new()?;
    let mut rates = Vec::new();
    for round in 0..=rounds {
        let mut solving = Duration::ZERO;
        for slice in &slices {
            // The copy a door makes when it decodes is its own cost, not the solver's.
            let problems = slice.iter().cloned().map(|problem| ((), problem)).collect();
            let started = Instant::now();
            let solved =
                runtime.block_on(solver.solve_batch(problems, winner_only, |(), result| result.is_ok()))?;
            solving += started.elapsed();
            std::hint::black_box(solved);
        }
        let rate = rows as f64 / solving.as_secs_f64();
        if round > 0 {
            rates.push(rate);
        }
    }
    println!("{rows} problems, in-process fan-out: {:.0} problems/s (median of {rounds})", median(rates));
    Ok(())
}

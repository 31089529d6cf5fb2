//! The solver's own rate on a table of problems, in process: the limit a door can reach.
//!
//! `cargo run --profile dist --example solve_rate -- FILE.parquet [--rounds R] [--winner-only]`
//! reads the table's game columns (as the Flight door reads them: `columnar::problems`),
//! then hands them to the fan-out (`Solver::solve_batch`, on rayon over every core, in
//! slices of 65,536 rows, as a client sends them) R times (default 3) after one warm-up
//! pass that grows the tables, and prints the median problems/s of the timed passes.
//! Only the fan-out's calls are timed (not reading the file, nor the copy of each slice
//! a door would decode): what is left is the solving a door feeds.
//!
//! `solve_rate FILE.parquet --kernels` times instead the Flight door's answer of each
//! slice without its transport: the column kernels from the slice's columns to its table
//! of solutions (`columnar::kernels::solve_columns`), on one thread.
//!
//! `solve_rate FILE.parquet --floor OUT.parquet` times instead what the bulk client's
//! Parquet run does without its server: read the table (all its columns) in batches of
//! the client's default `--batch-rows`, take each batch's problems where they lie (as the
//! Flight door reads its small ones: `columnar::BatchProblems`), solve them through the
//! fan-out (`Solver::solve_borrowed`), build the answer columns and write them as `solve`
//! writes Parquet, one batch after another. It prints
//! the wall and CPU time and the peak RSS of the whole process (the client's allocator,
//! tables grown on demand as the client's are): the floor under
//! `gamesolver-client solve FILE.parquet -o OUT.parquet`, compared by CPU time since the
//! client runs those steps at once on every core.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gamesolver::client::{parquet_properties, SolveConfig};
use gamesolver::columnar::{self, kernels, Descriptor, Games};
use gamesolver::games::{nim_square, stone_game_iv, GameKind, Tables};
use gamesolver::problem::Problem;
use gamesolver::solver::{Solver, SolverConfig};
use measure::{median, usage};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

#[path = "common/measure.rs"]
mod measure;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Rows a slice takes, as `gamesolver_client.flight` sends them.
const SLICE_ROWS: usize = 65_536;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    gamesolver::allocator::without_huge_pages();
    let mut args = std::env::args().skip(1);
    let usage_line =
        "usage: solve_rate FILE.parquet [--rounds R] [--winner-only] [--kernels] [--floor OUT.parquet]";
    let path = args.next().ok_or(usage_line)?;
    let (mut rounds, mut winner_only, mut floor, mut kernels) = (3usize, false, None, false);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => rounds = args.next().ok_or("--rounds needs a number")?.parse()?,
            "--winner-only" => winner_only = true,
            "--kernels" => kernels = true,
            "--floor" => floor = Some(args.next().ok_or("--floor needs an output file")?),
            other => return Err(format!("unknown argument {other}\n{usage_line}").into()),
        }
    }
    let tables = Arc::new(Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT));
    let solver = Solver::new(Arc::clone(&tables), SolverConfig::default());
    let runtime = tokio::runtime::Runtime::new()?;
    if let Some(out) = floor {
        return read_solve_write(&path, &out, &solver, &runtime, winner_only);
    }
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path)?)?
        .with_batch_size(SLICE_ROWS)
        .build()?;
    if kernels {
        return kernel_rate(reader.collect::<Result<_, _>>()?, &tables, rounds, winner_only);
    }
    let mut slices: Vec<Vec<Problem>> = Vec::new();
    for batch in reader {
        slices.push(columnar::problems(&batch?, Games::Mixed)?);
    }
    let rows: usize = slices.iter().map(Vec::len).sum();
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

/// The `--kernels` mode: each slice answered by the column kernels, R timed rounds after
/// one that grows the tables.
fn kernel_rate(
    slices: Vec<arrow_array::RecordBatch>,
    tables: &Tables,
    rounds: usize,
    winner_only: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let rows: usize = slices.iter().map(|slice| slice.num_rows()).sum();
    // One game's table is answered as that game's exchange, as the client sends it.
    let present: Vec<GameKind> = match slices.first() {
        Some(slice) => {
            GameKind::ALL.into_iter().filter(|kind| slice.column_by_name(kind.input()).is_some()).collect()
        }
        None => Vec::new(),
    };
    let games = match present[..] {
        [kind] => Games::One(kind),
        _ => Games::Mixed,
    };
    let descriptor = Descriptor { games, winner_only };
    let mut rates = Vec::new();
    for round in 0..=rounds {
        let started = Instant::now();
        for slice in &slices {
            std::hint::black_box(kernels::solve_columns(slice, descriptor, tables)?);
        }
        if round > 0 {
            rates.push(rows as f64 / started.elapsed().as_secs_f64());
        }
    }
    println!("{rows} problems, in-process kernels: {:.0} problems/s (median of {rounds})", median(rates));
    Ok(())
}

/// The `--floor` mode: `path` read, solved and written to `out` in process, one batch after
/// another, timed whole.
fn read_solve_write(
    path: &str,
    out: &str,
    solver: &Solver,
    runtime: &tokio::runtime::Runtime,
    winner_only: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let started = Instant::now();
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path)?)?
        .with_batch_size(SolveConfig::default().batch_rows.get())
        .build()?;
    let mut writer = None;
    let mut rows = 0;
    let mut results = Vec::new();
    for batch in reader {
        let batch = batch?;
        rows += batch.num_rows();
        let problems = columnar::BatchProblems::of(&batch, Games::Mixed)?;
        let game = problems.game_column(batch.num_rows());
        let problems: Vec<_> = (0..batch.num_rows()).map(|row| problems.get(row)).collect();
        runtime.block_on(solver.solve_borrowed(&problems, winner_only, &mut results));
        let id = columnar::id_column(&batch)?;
        let answers = columnar::solutions(
            Games::Mixed,
            &results,
            id.as_ref().map(|(field, column)| (field.as_ref(), Arc::clone(column))),
            game,
        )?;
        let writer = match &mut writer {
            Some(writer) => writer,
            None => writer.insert(ArrowWriter::try_new(
                std::fs::File::create(out)?,
                answers.schema(),
                Some(parquet_properties(SolveConfig::default().row_group_rows.get())),
            )?),
        };
        writer.write(&answers)?;
    }
    if let Some(writer) = writer {
        writer.close()?;
    }
    let wall = started.elapsed().as_secs_f64();
    let used = usage();
    println!(
        "{rows} problems read, solved and written in process: {wall:.2} s wall, {:.2} s CPU, peak RSS {:.1} MiB",
        used.cpu_seconds, used.peak_rss_mib
    );
    Ok(())
}

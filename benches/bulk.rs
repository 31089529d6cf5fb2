//! The bulk path's cost per problem, one stage at a time, on batches of 4096 problems as
//! the bulk client sends them (issue 11):
//! - `client_parse/*`: input JSON lines → encoded `SolveBatchStreamRequest`, the reading
//!   thread's work (`BatchBuilder::push_line`), in MB/s of input;
//! - `server/*`: what the server does with a decoded batch: `decode` the request,
//!   (`decode_prost`: with prost's generated decoder instead of `src/codec/`),
//!   `solve` it (`service::grpc::solve_batch`: convert, fan out, solve, build the solutions),
//!   `encode` the response (`encode_prost`: with prost's encoder), and `all` three in a
//!   row;
//! - `columnar/*`: what the Flight door does with a decoded batch of 65,536 rows, `mixed`
//!   (`gen`'s default mix, as a table) or `stone_game_iv` (`--mix iv=1 --iv-n 0..1000000`,
//!   as `bench/flight.py` sends): read its `problems` (`columnar::problems`), and write the
//!   `solutions` of its results (`columnar::solutions`).
//!
//! Shapes: `small` is `gen --seed 3` with its defaults, `mixed` adds
//! `--sum-len 2..40 --ix-len 1..30 --ix-value 1..10000 --iv-n 0..1000000`, and
//! `real_world` is that mix written the way other tools write JSON (numbers as JSON
//! numbers, half the keys in snake_case; the server sees the same as `mixed`).
//! `cargo bench --bench bulk`.

use std::hint::black_box;
use std::num::NonZeroUsize;
use std::sync::Arc;

use arrow_array::RecordBatch;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use gamesolver::client::format::Format;
use gamesolver::client::gen::{self, GenConfig, Sizes};
use gamesolver::client::{BatchBuilder, InputMark};
use gamesolver::codec::{FastDecode, FastEncode};
use gamesolver::columnar::{self, kernels, Descriptor, Games};
use gamesolver::games::{GameKind, InputRef, Tables};
use gamesolver::pb;
use gamesolver::solver::{Solver, SolverConfig};
use prost::Message;

const BATCH: usize = 4096;

fn gen_lines(config: GenConfig) -> Vec<String> {
    let mut out = Vec::new();
    gen::generate(&GenConfig { count: BATCH as u64, seed: 3, ..config }, &mut out).unwrap();
    String::from_utf8(out).unwrap().lines().map(str::to_owned).collect()
}

fn mixed_config() -> GenConfig {
    let sizes = [("sum-len", 2..=40), ("ix-len", 1..=30), ("ix-value", 1..=10_000), ("iv-n", 0..=1_000_000)]
        .into_iter()
        .try_fold(Sizes::default(), |sizes, (flag, range)| sizes.with(flag, range))
        .expect("every flag is a game's");
    GenConfig { sizes, ..GenConfig::default() }
}

/// `problem` as other tools write it: numbers as numbers, snake_case keys on odd lines.
fn real_world_line(number: usize, problem: &pb::Problem) -> String {
    let snake = number % 2 == 1;
    let key = |camel: &'static str, snake_case: &'static str| if snake { snake_case } else { camel };
    let (kind, input) = gamesolver::convert::wire_input(problem.game.as_ref().unwrap());
    let numbers = |values: &[u64]| values.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let value = match input {
        InputRef::Text(text) => format!(r#""{text}""#),
        InputRef::Integer(n) => n.to_string(),
        InputRef::Integers(values) => format!("[{}]", numbers(values)),
    };
    let game = format!(r#""{}":{{"{}":{value}}}"#, key(kind.json_field(), kind.label()), kind.input());
    format!(r#"{{"id":"b{number}",{game}}}"#)
}

/// The shapes, as input lines.
fn shapes() -> Vec<(&'static str, Vec<String>)> {
    let small = gen_lines(GenConfig::default());
    let mixed = gen_lines(mixed_config());
    let real_world = mixed
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let problem: pb::Problem = serde_json::from_str(line).unwrap();
            real_world_line(i + 1, &problem)
        })
        .collect();
    vec![("small", small), ("mixed", mixed), ("real_world", real_world)]
}

/// The encoded `SolveBatchStreamRequest` the client sends for `lines`.
fn encoded_batch(lines: &[String]) -> prost::bytes::Bytes {
    let mut builder = BatchBuilder::new(NonZeroUsize::MAX, NonZeroUsize::MAX, false);
    for (i, line) in lines.iter().enumerate() {
        assert!(!builder.push_line(line.as_bytes(), i as u64 + 1), "a batch never fills");
    }
    let batch = builder.close(InputMark::default()).unwrap();
    assert_eq!(batch.problems, lines.len(), "every line is a problem");
    batch.payload
}

fn client_parse(c: &mut Criterion) {
    let mut group = c.benchmark_group("client_parse");
    for (name, lines) in shapes() {
        group.throughput(Throughput::Bytes(lines.iter().map(|l| l.len() as u64 + 1).sum()));
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| encoded_batch(black_box(&lines)))
        });
    }
    group.finish();
}

fn server(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let solver = Solver::new(Arc::new(Tables::new(1_000_000_000, 1_000)), SolverConfig::default());
    // Both batch shapes differ only in how their JSON was written: the server sees two.
    let batches: Vec<_> = shapes()
        .into_iter()
        .filter(|(name, _)| *name != "real_world")
        .map(|(n, l)| (n, encoded_batch(&l)))
        .collect();
    // What the server's codec does (src/codec/), and prost alone for comparison.
    let decode = |bytes: &prost::bytes::Bytes| pb::SolveBatchStreamRequest::decode_fast(bytes).unwrap();
    let decode_prost =
        |bytes: &prost::bytes::Bytes| pb::SolveBatchStreamRequest::decode(bytes.clone()).unwrap();
    let solve = |request: pb::SolveBatchStreamRequest| {
        runtime
            .block_on(gamesolver::service::grpc::solve_batch(&solver, request.problems, request.winner_only))
            .unwrap()
    };
    let encode = |solutions: Vec<pb::Solution>| {
        // The server's encoder keeps its buffer from one message to the next.
        let mut out = Vec::with_capacity(64 * BATCH);
        pb::SolveBatchStreamResponse { solutions }.encode_fast(&mut out);
        out
    };
    let encode_prost =
        |solutions: Vec<pb::Solution>| pb::SolveBatchStreamResponse { solutions }.encode_to_vec();
    // Grows the Stone Game IV table to the largest pile first, as a warm server has it.
    for (_, bytes) in &batches {
        solve(decode(bytes));
    }

    let mut group = c.benchmark_group("server");
    group.throughput(Throughput::Elements(BATCH as u64));
    for (name, bytes) in &batches {
        let request = decode(bytes);
        let solutions = solve(request.clone());
        group.bench_function(BenchmarkId::new("decode", name), |b| b.iter(|| decode(black_box(bytes))));
        group.bench_function(BenchmarkId::new("decode_prost", name), |b| {
            b.iter(|| decode_prost(black_box(bytes)))
        });
        group.bench_function(BenchmarkId::new("solve", name), |b| {
            b.iter_batched(|| request.clone(), solve, criterion::BatchSize::LargeInput)
        });
        group.bench_function(BenchmarkId::new("encode", name), |b| {
            b.iter_batched(|| solutions.clone(), encode, criterion::BatchSize::LargeInput)
        });
        group.bench_function(BenchmarkId::new("encode_prost", name), |b| {
            b.iter_batched(|| solutions.clone(), encode_prost, criterion::BatchSize::LargeInput)
        });
        group.bench_function(BenchmarkId::new("all", name), |b| {
            b.iter(|| encode(solve(decode(black_box(bytes)))))
        });
    }
    group.finish();
}

/// Rows of a Flight batch, as the bulk client sends them.
const TABLE_BATCH: usize = 1 << 16;

/// A table batch of `gen`'s problems under `config`, read back as one record batch.
fn table_batch(config: &GenConfig) -> RecordBatch {
    let file = tempfile::NamedTempFile::new().unwrap();
    gen::generate_table(config, Format::Arrows, Box::new(file.reopen().unwrap())).unwrap();
    let reader = arrow_ipc::reader::StreamReader::try_new(file.reopen().unwrap(), None).unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap()
}

fn columnar(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let solver = Solver::new(Arc::new(Tables::new(1_000_000_000, 1_000)), SolverConfig::default());
    let config = GenConfig { count: TABLE_BATCH as u64, seed: 5, ..GenConfig::default() };
    let iv = GenConfig {
        mix: "iv=1".parse().unwrap(),
        sizes: Sizes::default().with("iv-n", 0..=1_000_000).unwrap(),
        ..config.clone()
    };
    // Tables of the server's default limits, grown by the first answers.
    let tables = Tables::default();
    let shapes = [("mixed", Games::Mixed, config), ("stone_game_iv", Games::One(GameKind::StoneGameIv), iv)];

    let mut group = c.benchmark_group("columnar");
    group.throughput(Throughput::Elements(TABLE_BATCH as u64));
    for (name, games, config) in shapes {
        let batch = table_batch(&config);
        assert_eq!(batch.num_rows(), TABLE_BATCH, "one batch holds the whole table");
        let problems = || columnar::problems(&batch, games).unwrap();
        let tagged = problems().into_iter().map(|problem| ((), problem)).collect();
        let results = runtime.block_on(solver.solve_batch(tagged, false, |(), result| result)).unwrap();
        group.bench_function(BenchmarkId::new("problems", name), |b| b.iter(problems));
        let game = columnar::BatchProblems::of(&batch, games).unwrap().game_column(batch.num_rows());
        group.bench_function(BenchmarkId::new("solutions", name), |b| {
            b.iter(|| columnar::solutions(games, black_box(&results), None, Arc::clone(&game)).unwrap())
        });
        // The door's answer of a whole batch without its transport: by the column kernels,
        // and by the row path they are held to (each row's problem, solved, then the columns).
        let descriptor = Descriptor { games, winner_only: false };
        let answered = kernels::solve_columns(&batch, descriptor, &tables).unwrap();
        assert_eq!(answered, kernels::solve_rows(&batch, descriptor, &tables).unwrap());
        group.bench_function(BenchmarkId::new("kernels", name), |b| {
            b.iter(|| kernels::solve_columns(black_box(&batch), descriptor, &tables).unwrap())
        });
        group.bench_function(BenchmarkId::new("rows", name), |b| {
            b.iter(|| kernels::solve_rows(black_box(&batch), descriptor, &tables).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, client_parse, server, columnar);
criterion_main!(benches);

//! Writes the seed inputs of the fuzz targets into `fuzz/corpus/<target>/`, from
//! real inputs: the lines of `examples/problems.jsonl`, those problems encoded as
//! requests, answers of every kind, and table files written by the library.
//!
//! `cargo run --example seed_corpus` from `fuzz/` (stable is enough). The committed
//! corpora are these seeds plus what fuzzing found, minimised with `cargo fuzz cmin`.

use std::fs;
use std::path::{Path, PathBuf};

use gamesolver::client::parse_problem;
use gamesolver::games::stone_game_iv::losing_positions_below;
use gamesolver::games::stone_game_iv::IvTableFile;
use gamesolver::tables::TableFile;
use gamesolver::pb;
use prost::Message;

fn main() -> std::io::Result<()> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"));
    let examples = fs::read(fuzz.join("../examples/problems.jsonl"))?;
    let lines: Vec<&[u8]> = examples.split(|&b| b == b'\n').filter(|line| !line.is_empty()).collect();

    let mut line_seeds: Vec<Vec<u8>> = lines.iter().map(|line| line.to_vec()).collect();
    line_seeds.push(b"\xef\xbb\xbf{\"id\":\"bom\",\"sumGame\":{\"num\":\"?3\"}}".to_vec());
    line_seeds.push(br#"{"id":"g"}"#.to_vec());
    line_seeds.push(br#"{"stoneGameIx":{"stones":[1,"2"]}}"#.to_vec());
    line_seeds.push(br#"{"id":"x","sumGame":{"num":"1"},"extra":1}"#.to_vec());
    write_seeds(&fuzz.join("corpus/line_parser"), "example", &line_seeds)?;

    let problems: Vec<pb::Problem> =
        lines.iter().enumerate().filter_map(|(i, line)| parse_problem(line, i as u64 + 1).ok()).collect();
    let mut requests: Vec<Vec<u8>> = problems
        .iter()
        .map(|problem| {
            pb::SolveRequest { problem: Some(problem.clone()), winner_only: false }.encode_to_vec()
        })
        .collect();
    let batches = [
        pb::SolveBatchRequest { problems: problems.clone(), winner_only: false }.encode_to_vec(),
        pb::SolveBatchRequest { problems, winner_only: true }.encode_to_vec(),
    ];
    requests.extend(batches.iter().cloned());
    let edge_cases = [
        pb::Problem { id: "no-game".into(), game: None },
        iv("above-fuzz-limit", 1_000_001),
        iv("above-default-limit", 1_000_000_001),
        iv("at-fuzz-limit", 1_000_000),
        iv("u64-max", u64::MAX),
        // Longer than one 896-byte block of the Sum Game tally.
        sum("two-blocks", &"9?01".repeat(500)),
        sum("bad-in-second-block", &format!("{}x?", "1".repeat(1000))),
        sum("odd", "1?3"),
        sum("non-ascii", "1é"),
    ];
    for problem in edge_cases {
        requests.push(pb::SolveRequest { problem: Some(problem), winner_only: false }.encode_to_vec());
    }
    requests.push(pb::SolveRequest { problem: None, winner_only: true }.encode_to_vec());
    write_seeds(&fuzz.join("corpus/solve_request"), "request", &requests)?;

    // The batch decoder reads requests and responses: one of each kind of answer.
    use pb::r#move::Game as M;
    let answer = |id: &str, game: Option<M>, error: Option<pb::SolutionError>| pb::Solution {
        id: id.into(),
        alice_wins: game.is_some(),
        winner: if game.is_some() { pb::Winner::Alice } else { pb::Winner::Bob } as i32,
        nim_value: matches!(game, Some(M::NimSquare(_))).then_some(52),
        winning_move: game.map(|game| pb::Move { game: Some(game) }),
        error: error.map(Box::new),
    };
    let error = pb::SolutionError {
        code: pb::solution_error::Code::InvalidArgument as i32,
        reason: "ODD_LENGTH".into(),
        metadata: [("length".to_owned(), "3".to_owned())].into(),
        ..Default::default()
    };
    let solutions = vec![
        answer("s", Some(M::SumGame(pb::SumGameMove { index: 3, digit: 9 })), None),
        answer("x", Some(M::StoneGameIx(pb::StoneGameIxMove { index: 1 })), None),
        answer("v", Some(M::StoneGameIv(pb::StoneGameIvMove { take: 961 })), None),
        answer("n", Some(M::NimSquare(pb::NimSquareMove { pile: 2, take: 14_400 })), None),
        answer("b", None, None),
        answer("e", None, Some(error)),
    ];
    let mut batch_seeds = batches.to_vec();
    batch_seeds.push(pb::SolveBatchResponse { solutions }.encode_to_vec());
    write_seeds(&fuzz.join("corpus/batch_decode"), "batch", &batch_seeds)?;

    // 0 and 1 cover nothing or one pile; 2^20 + 1000 is past the loader's spot check.
    // The target's first byte: 1 fixes the checksum up before loading, 0 keeps it as is.
    let tables: Vec<Vec<u8>> = [0, 1, 100, 1000, 4000, (1 << 20) + 1000]
        .into_iter()
        .map(|covered| IvTableFile { covered, losing: losing_positions_below(covered) }.encode())
        .flat_map(|file| [[&[1], file.as_slice()].concat(), [&[0], file.as_slice()].concat()])
        .collect();
    write_seeds(&fuzz.join("corpus/iv_table_file"), "table", &tables)?;
    columnar::write(&fuzz.join("corpus/columnar"))
}

fn iv(id: &str, n: u64) -> pb::Problem {
    pb::Problem { id: id.into(), game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n })) }
}

fn sum(id: &str, num: &str) -> pb::Problem {
    pb::Problem { id: id.into(), game: Some(pb::problem::Game::SumGame(pb::SumGame { num: num.into() })) }
}

fn write_seeds(dir: &Path, prefix: &str, seeds: &[Vec<u8>]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    for (i, seed) in seeds.iter().enumerate() {
        let path: PathBuf = dir.join(format!("seed-{prefix}-{i:02}"));
        fs::write(path, seed)?;
    }
    println!("{}: {} seeds", dir.display(), seeds.len());
    Ok(())
}

/// The `columnar` target's seeds: IPC messages as an exchange sends them (first byte 0),
/// arrow's writer's with and without compression and dictionaries and each attack the
/// reader refuses, and tables of every input format (first bytes 1 to 4), well-formed and
/// hostile.
mod columnar {
    use std::path::Path;
    use std::sync::Arc;

    use arrow_array::builder::{ListBuilder, StringDictionaryBuilder, UInt64Builder};
    use arrow_array::types::Int32Type;
    use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
    use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};
    use arrow_ipc::CompressionType;
    use arrow_schema::{DataType, Field, Schema};
    use gamesolver::columnar::ipc::{schema_message, RawBatch};

    /// A table of problems: ids, `num` as a dictionary, `stones` lists, `n`.
    fn problems() -> RecordBatch {
        let mut num = StringDictionaryBuilder::<Int32Type>::new();
        num.extend([Some("25??"), None, None, Some("11")]);
        let mut stones = ListBuilder::new(UInt64Builder::new());
        stones.append_null();
        stones.append_value([Some(5), Some(1), Some(2)]);
        stones.append_null();
        stones.append_null();
        RecordBatch::try_from_iter([
            ("id", Arc::new(StringArray::from(vec!["a", "b", "c", "d"])) as ArrayRef),
            ("num", Arc::new(num.finish()) as ArrayRef),
            ("stones", Arc::new(stones.finish()) as ArrayRef),
            ("n", Arc::new(UInt64Array::from(vec![None, None, Some(7), None])) as ArrayRef),
        ])
        .unwrap()
    }

    /// Messages framed as the target reads them: a `u32` length before each header and body.
    fn framed(messages: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let mut out = vec![0];
        for (header, body) in messages {
            out.extend((header.len() as u32).to_le_bytes());
            out.extend(header);
            out.extend((body.len() as u32).to_le_bytes());
            out.extend(body);
        }
        out
    }

    /// The messages arrow's writer makes of `batch`: schema, dictionaries, batch.
    fn written(batch: &RecordBatch, compression: Option<CompressionType>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let options = IpcWriteOptions::default().try_with_compression(compression).unwrap();
        let generator = IpcDataGenerator::default();
        let mut tracker = DictionaryTracker::new(false);
        let schema = generator.schema_to_bytes_with_dictionary_tracker(batch.schema_ref(), &mut tracker, &options);
        let (dictionaries, data) =
            generator.encode(batch, &mut tracker, &options, &mut IpcWriteContext::default()).unwrap();
        std::iter::once(schema).chain(dictionaries).chain([data]).map(|m| (m.ipc_message, m.arrow_data)).collect()
    }

    fn n_batch(values: (i64, i64), compression: Option<CompressionType>) -> RawBatch {
        RawBatch { rows: 1, nodes: vec![(1, 0)], buffers: vec![(0, 0), values], compression, ..RawBatch::default() }
    }

    pub fn write(dir: &Path) -> std::io::Result<()> {
        let batch = problems();
        let mut seeds: Vec<Vec<u8>> = [None, Some(CompressionType::LZ4_FRAME), Some(CompressionType::ZSTD)]
            .into_iter()
            .map(|compression| framed(&written(&batch, compression)))
            .collect();
        let n_schema = schema_message(&Schema::new(vec![Field::new("n", DataType::UInt64, true)]));
        let item = Arc::new(Field::new("item", DataType::Int8, true));
        let stones = Schema::new(vec![Field::new("stones", DataType::FixedSizeList(item, 0), true)]);
        let mut claim = (1i64 << 62).to_le_bytes().to_vec();
        claim.extend([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82, 0]);
        let rows = 1i64 << 40;
        let huge = RawBatch { rows, nodes: vec![(rows, 0), (0, 0)], buffers: vec![(0, 0); 3], ..RawBatch::default() };
        // The attacks, named: bench/soak.py sends them to a release server.
        let attacks: Vec<(&str, Vec<u8>, RawBatch, Vec<u8>)> = vec![
            ("lz4-claim", n_schema.clone(), n_batch((0, 16), Some(CompressionType::LZ4_FRAME)), claim.clone()),
            ("zstd-claim", n_schema.clone(), n_batch((0, 16), Some(CompressionType::ZSTD)), claim),
            ("rows", schema_message(&stones), huge, vec![]),
            ("offset", n_schema.clone(), n_batch((1 << 62, 8), None), vec![0; 8]),
            ("negative-length", n_schema.clone(), n_batch((0, -8), None), vec![0; 8]),
            ("short-body", n_schema.clone(), n_batch((0, 64), None), vec![0; 16]),
        ];
        for (name, schema, raw, body) in attacks {
            let seed = framed(&[(schema, vec![]), (raw.header(body.len() as i64), body)]);
            std::fs::create_dir_all(dir)?;
            std::fs::write(dir.join(format!("attack-{name}")), seed)?;
        }
        // A dictionary and deltas after it.
        let mut schema = written(&batch, None);
        let dictionary = schema.remove(1);
        let mut delta = dictionary.clone();
        let delta_header = RawBatch {
            rows: 2,
            nodes: vec![(2, 0)],
            buffers: vec![(0, 0), (0, 16), (16, 6)],
            dictionary: Some((0, true)),
            ..RawBatch::default()
        };
        delta.0 = delta_header.header(24);
        delta.1 = vec![0, 0, 0, 0, 4, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0, b'2', b'5', b'?', b'?', b'1', b'1', 0, 0];
        let deltas = framed(&[schema[0].clone(), dictionary, delta.clone(), delta.clone(), delta, schema[1].clone()]);
        std::fs::write(dir.join("attack-deltas"), deltas)?;

        // Tables: a file of each format, and the stream and file attacks.
        let mut parquet = vec![1];
        let mut writer = parquet::arrow::ArrowWriter::try_new(&mut parquet, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        seeds.push(parquet);
        for compression in [None, Some(CompressionType::LZ4_FRAME)] {
            let options = IpcWriteOptions::default().try_with_compression(compression).unwrap();
            let mut file = vec![2];
            let mut writer =
                arrow_ipc::writer::FileWriter::try_new_with_options(&mut file, &batch.schema(), options.clone()).unwrap();
            writer.write(&batch).unwrap();
            writer.finish().unwrap();
            drop(writer);
            seeds.push(file);
            let mut stream = vec![3];
            let mut writer =
                arrow_ipc::writer::StreamWriter::try_new_with_options(&mut stream, &batch.schema(), options).unwrap();
            writer.write(&batch).unwrap();
            writer.finish().unwrap();
            drop(writer);
            seeds.push(stream);
        }
        seeds.push(b"\x04id,n,stones\na,5,\"[1,2]\"\nb,,\nc,-1,\"[]\"\n".to_vec());
        super::write_seeds(dir, "columnar", &seeds)
    }
}

//! `gamesolver-client` with tables: Parquet, Arrow IPC and CSV in and out through the
//! Flight door of real servers, every answer compared with the JSON-lines path's for the
//! same problems; servers lost or lying mid-run; resumes after a kill.

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::{ListBuilder, UInt64Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{
    Array, ArrayRef, Date32Array, Decimal128Array, FixedSizeBinaryArray, Float64Array, Int64Array,
    LargeStringArray, ListArray, RecordBatch, StringArray, UInt64Array,
};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_flight::decode::FlightRecordBatchStream;
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_server::{FlightService, FlightServiceServer};
use arrow_flight::{
    Action, ActionType, Criteria, Empty, FlightData, FlightDescriptor, FlightInfo, HandshakeRequest,
    HandshakeResponse, PollInfo, PutResult, SchemaResult, Ticket,
};
use arrow_schema::{DataType, Field, Schema};
use common::{client, path_str, without_table_growth, ServerProcess, CLIENT};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use gamesolver::columnar::{self, Descriptor, Games};
use gamesolver::pb;
use tonic::{Request, Response, Status, Streaming};

/// Every game, so that every answer column is filled.
const MIX: &str = "sum=1,ix=1,iv=1,nim=1";

/// The formats a table can be in, by extension.
const TABLES: [&str; 4] = ["parquet", "arrow", "arrows", "csv"];

/// Upper bound on any wait for the client to act; only reached when a bound is broken.
const PATIENCE: Duration = Duration::from_secs(60);

/// Generates `count` problems of `seed` into `path`, in the format of its extension.
fn gen(path: &Path, count: u64, seed: u64) {
    let (count, seed) = (count.to_string(), seed.to_string());
    let (status, stderr) =
        client(&["gen", "--count", &count, "--seed", &seed, "--mix", MIX, "-o", path_str(path)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
}

/// Runs `solve` with `args` and checks its exit code; returns stderr.
fn solve(args: &[&str], code: i32) -> String {
    let mut all = vec!["solve"];
    all.extend_from_slice(args);
    let (status, stderr) = client(&all);
    assert_eq!(status.code(), Some(code), "solve {args:?}: {stderr}");
    without_table_growth(&stderr)
}

/// One answer, as every output format holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    id: String,
    alice_wins: Option<bool>,
    index: Option<u64>,
    digit: Option<u64>,
    pile: Option<u64>,
    take: Option<u64>,
    nim_value: Option<u64>,
    reason: Option<String>,
}

impl From<&pb::Solution> for Answer {
    fn from(solution: &pb::Solution) -> Self {
        use pb::r#move::Game as M;
        let (mut index, mut digit, mut pile, mut take) = (None, None, None, None);
        match solution.winning_move.as_ref().and_then(|m| m.game.as_ref()) {
            Some(M::SumGame(m)) => (index, digit) = (Some(m.index), Some(u64::from(m.digit))),
            Some(M::StoneGameIx(m)) => index = Some(m.index),
            Some(M::StoneGameIv(m)) => take = Some(m.take),
            Some(M::NimSquare(m)) => (pile, take) = (Some(m.pile), Some(m.take)),
            None => {}
        }
        Answer {
            id: solution.id.clone(),
            alice_wins: solution.error.is_none().then_some(solution.alice_wins),
            index,
            digit,
            pile,
            take,
            nim_value: solution.nim_value.map(u64::from),
            reason: solution.error.as_ref().map(|e| e.reason.clone()),
        }
    }
}

/// The solutions of a JSON-lines output.
fn solutions(path: &Path) -> Vec<pb::Solution> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))).collect()
}

/// The record batches of a table output of `format`.
fn batches(path: &Path, format: &str) -> Vec<RecordBatch> {
    let file = std::fs::File::open(path).unwrap();
    match format {
        "parquet" => parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(Result::unwrap)
            .collect(),
        "arrow" => arrow_ipc::reader::FileReader::try_new(file, None).unwrap().map(Result::unwrap).collect(),
        "arrows" => {
            arrow_ipc::reader::StreamReader::try_new(file, None).unwrap().map(Result::unwrap).collect()
        }
        "csv" => {
            let mut head = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(&file), &mut head).unwrap();
            let fields: Vec<Field> =
                head.trim_end().split(',').map(|name| Field::new(name, DataType::Utf8, true)).collect();
            let file = std::fs::File::open(path).unwrap();
            arrow_csv::ReaderBuilder::new(Arc::new(Schema::new(fields)))
                .with_header(true)
                .build(file)
                .unwrap()
                .map(Result::unwrap)
                .collect()
        }
        other => panic!("not a table format: {other}"),
    }
}

/// Row `row` of `column` as text, `None` when null.
fn text(column: Option<&ArrayRef>, row: usize) -> Option<String> {
    let column = column?;
    if column.is_null(row) {
        return None;
    }
    let formatter = ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default()).unwrap();
    Some(formatter.value(row).to_string())
}

/// The answers of an output of `format` (`jsonl` or a table format).
fn answers(path: &Path, format: &str) -> Vec<Answer> {
    if format == "jsonl" {
        return solutions(path).iter().map(Answer::from).collect();
    }
    let mut answers = Vec::new();
    for batch in batches(path, format) {
        let column = |name: &str| batch.column_by_name(name);
        let number = |name: &str, row| text(column(name), row).map(|v| v.parse::<u64>().unwrap());
        for row in 0..batch.num_rows() {
            answers.push(Answer {
                id: text(Some(batch.column(0)), row).unwrap_or_default(),
                alice_wins: text(column("alice_wins"), row).map(|v| v == "true"),
                index: number("move_index", row),
                digit: number("move_digit", row),
                pile: number("move_pile", row),
                take: number("move_take", row),
                nim_value: number("nim_value", row),
                reason: text(column("error_reason"), row),
            });
        }
    }
    answers
}

/// The column names of a table output.
fn columns(path: &Path, format: &str) -> Vec<String> {
    batches(path, format)[0].schema().fields().iter().map(|f| f.name().clone()).collect()
}

#[test]
fn every_format_in_and_out_answers_as_the_json_lines_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    gen(&path("p.jsonl"), 2_000, 11);
    for format in TABLES {
        gen(&path(&format!("p.{format}")), 2_000, 11);
    }
    solve(&[path_str(&path("p.jsonl")), "-o", path_str(&path("ref.jsonl")), "--quiet"], 0);
    let reference = answers(&path("ref.jsonl"), "jsonl");
    let reference_lines = std::fs::read(path("ref.jsonl")).unwrap();
    assert_eq!(reference.len(), 2_000);
    assert!(reference.iter().all(|a| a.reason.is_none()));

    for input in std::iter::once("jsonl").chain(TABLES) {
        for output in std::iter::once("jsonl").chain(TABLES) {
            if (input, output) == ("jsonl", "jsonl") {
                continue;
            }
            let out = path(&format!("{input}-to.{output}"));
            let stderr = solve(&[path_str(&path(&format!("p.{input}"))), "-o", path_str(&out)], 0);
            assert!(stderr.starts_with("2000 problems, 0 errors"), "{input} to {output}: {stderr}");
            assert_eq!(answers(&out, output), reference, "{input} to {output}");
            if output == "jsonl" {
                // The same problems give the same lines, byte for byte.
                assert!(std::fs::read(&out).unwrap() == reference_lines, "{input} to jsonl");
            } else {
                // The contract's table of mixed solutions, the id first; a table's own
                // columns beside them (--keep all, the default), a JSON-lines input having none.
                let id = Field::new("id", DataType::Utf8, true);
                let expected = columnar::output_schema(Games::Mixed, Some(&id));
                let mut names: Vec<&str> = expected.fields().iter().map(|f| f.name().as_str()).collect();
                if input != "jsonl" {
                    names.splice(1..1, ["num", "stones", "n", "piles"]);
                }
                assert_eq!(columns(&out, output), names, "{input} to {output}");
            }
        }
    }
}

/// Runs the client with `args`, its stdout captured.
fn stdout_of(args: &[&str]) -> Vec<u8> {
    let out = Command::new(CLIENT).args(args).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

#[test]
fn stdout_gets_the_input_format_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, parquet) = (dir.path().join("p.csv"), dir.path().join("p.parquet"));
    gen(&csv, 50, 2);
    gen(&parquet, 50, 2);
    let text = String::from_utf8(stdout_of(&["solve", "-q", path_str(&csv)])).unwrap();
    assert!(text.starts_with("id,num,stones,n,piles,game,alice_wins,move_index,move_digit,move_pile,move_take,nim_value,error_reason,error_message\ng1,"), "{text}");
    assert_eq!(text.lines().count(), 51);
    let bytes = stdout_of(&["solve", "-q", path_str(&parquet)]);
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
    let lines = stdout_of(&["solve", "-q", path_str(&parquet), "--output-format", "jsonl"]);
    assert!(lines.starts_with(b"{\"id\":\"g1\",\"aliceWins\":"));
    // `-o -` is stdout too, and a name's extension yields to the flag.
    let lines = stdout_of(&["solve", "-q", path_str(&parquet), "-o", "-", "--output-format", "csv"]);
    assert!(lines.starts_with(b"id,num,stones,n,piles,game,alice_wins,"));
    // An input named without its format's extension is read as the flag says.
    let renamed = dir.path().join("problems.dat");
    std::fs::copy(&parquet, &renamed).unwrap();
    let lines = stdout_of(&[
        "solve",
        "-q",
        path_str(&renamed),
        "--input-format",
        "parquet",
        "--output-format",
        "jsonl",
    ]);
    assert!(lines.starts_with(b"{\"id\":\"g1\""));
    let (status, stderr) = client(&["solve", "-q", path_str(&renamed)]);
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr
            .ends_with("not JSON lines (byte 0x00 at line 1: a Parquet file; give --input-format parquet)\n"),
        "{stderr}"
    );
}

#[test]
fn winner_only_tables_have_no_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("p.arrow"), dir.path().join("out.parquet"));
    gen(&input, 500, 3);
    solve(&[path_str(&input), "-o", path_str(&output), "--winner-only"], 0);
    let got = answers(&output, "parquet");
    assert_eq!(got.len(), 500);
    assert!(got
        .iter()
        .all(|a| a.alice_wins.is_some() && (a.index, a.digit, a.pile, a.take) == (None, None, None, None)));
    assert!(got.iter().any(|a| a.alice_wins == Some(true)));
}

/// Writes `batch` to `path` as an Arrow IPC stream.
fn write_arrows(path: &Path, batch: &RecordBatch) {
    let mut writer =
        arrow_ipc::writer::StreamWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema_ref())
            .unwrap();
    writer.write(batch).unwrap();
    writer.finish().unwrap();
}

/// Writes `batch` to `path` as Parquet.
fn write_parquet(path: &Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
}

fn table(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> =
        columns.iter().map(|(name, a)| Field::new(*name, a.data_type().clone(), true)).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.into_iter().map(|(_, a)| a).collect())
        .unwrap()
}

#[test]
fn renamed_columns_are_read_and_ids_of_any_type_come_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let piles: Vec<i32> = vec![1, 2, 4, 7, 17, 0];
    let rows = piles.len();
    // The Stone Game IV answers of these piles, through JSON lines.
    let lines: String = piles
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{{\"id\":\"{i}\",\"stoneGameIv\":{{\"n\":{n}}}}}\n"))
        .collect();
    std::fs::write(dir.path().join("iv.jsonl"), lines).unwrap();
    solve(&[path_str(&dir.path().join("iv.jsonl")), "-o", path_str(&dir.path().join("iv.out.jsonl"))], 0);
    let expected = answers(&dir.path().join("iv.out.jsonl"), "jsonl");

    let ids: Vec<(&str, ArrayRef)> = vec![
        ("int64", Arc::new(Int64Array::from_iter_values((0..rows as i64).map(|i| i * 1000 - 7)))),
        ("large_utf8", Arc::new(LargeStringArray::from_iter_values((0..rows).map(|i| format!("é{i}"))))),
        ("date32", Arc::new(Date32Array::from_iter_values(0..rows as i32))),
        (
            "fixed_binary",
            Arc::new(FixedSizeBinaryArray::try_from_iter((0..rows as u32).map(|i| i.to_be_bytes())).unwrap()),
        ),
    ];
    for (kind, ids) in ids {
        let input = dir.path().join(format!("{kind}.arrows"));
        let pile_size: ArrayRef = Arc::new(arrow_array::Int32Array::from(piles.clone()));
        let extra: ArrayRef = Arc::new(StringArray::from_iter_values((0..rows).map(|_| "not read")));
        write_arrows(
            &input,
            &table(vec![("extra", extra), ("key", Arc::clone(&ids)), ("pile_size", pile_size)]),
        );
        let output = dir.path().join(format!("{kind}.out.arrows"));
        let args = ["--column", "n=pile_size", "--column", "id=key"];
        solve(&[&[path_str(&input), "-o", path_str(&output)][..], &args].concat(), 0);
        let out = &batches(&output, "arrows")[0];
        let names: Vec<_> = out.schema().fields().iter().map(|f| f.name().clone()).collect();
        // Every column kept beside the answers (--keep all), the id first.
        let kept =
            ["key", "extra", "pile_size", "game", "alice_wins", "move_take", "error_reason", "error_message"];
        assert_eq!(names, kept, "{kind}");
        assert_eq!(out.column(0).as_ref(), ids.as_ref(), "{kind}: the ids come back as they were");
        let got: Vec<Answer> = answers(&output, "arrows")
            .into_iter()
            .enumerate()
            .map(|(i, answer)| Answer { id: i.to_string(), ..answer })
            .collect();
        assert_eq!(got, expected, "{kind}");
        // As JSON lines, an id is as Arrow displays it.
        let lines_out = dir.path().join(format!("{kind}.out.jsonl"));
        solve(&[&[path_str(&input), "-o", path_str(&lines_out)][..], &args].concat(), 0);
        let first = &solutions(&lines_out)[1];
        let shown = text(Some(&ids), 1).unwrap();
        assert_eq!(first.id, shown, "{kind}");
    }

    // Without an id, the row numbers (from 0) are sent and written, as `row`.
    let input = dir.path().join("no-id.parquet");
    let n: ArrayRef = Arc::new(UInt64Array::from_iter_values(piles.iter().map(|&n| n as u64)));
    write_parquet(&input, &table(vec![("n", n)]));
    let output = dir.path().join("no-id.out.parquet");
    solve(&[path_str(&input), "-o", path_str(&output)], 0);
    let out = &batches(&output, "parquet")[0];
    assert_eq!(out.schema().field(0).name(), "row");
    assert_eq!(out.column(0).as_primitive::<UInt64Type>().values().as_ref(), [0, 1, 2, 3, 4, 5]);
    assert_eq!(answers(&output, "parquet"), expected);
    let lines_out = dir.path().join("no-id.out.jsonl");
    solve(&[path_str(&input), "-o", path_str(&lines_out)], 0);
    let ids: Vec<String> = solutions(&lines_out).into_iter().map(|s| s.id).collect();
    assert_eq!(ids, ["0", "1", "2", "3", "4", "5"]);
}

#[test]
fn a_row_with_no_game_or_two_is_that_rows_error() {
    let dir = tempfile::tempdir().unwrap();
    let num: ArrayRef = Arc::new(StringArray::from(vec![Some("12??"), None, None, None, Some("11")]));
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![None, Some(7), None, None, Some(3)]));
    let mut stones = ListBuilder::new(UInt64Builder::new());
    for row in 0..5 {
        match row {
            2 => {
                stones.values().append_slice(&[1, 2]);
                stones.append(true);
            }
            _ => stones.append_null(),
        }
    }
    let ids: ArrayRef = Arc::new(StringArray::from(vec!["sum", "iv", "ix", "none", "two"]));
    let input = dir.path().join("mixed.parquet");
    write_parquet(
        &input,
        &table(vec![("id", ids), ("num", num), ("n", n), ("stones", Arc::new(stones.finish()))]),
    );
    let output = dir.path().join("mixed.out.parquet");
    let stderr = solve(&[path_str(&input), "-o", path_str(&output)], 1);
    assert!(stderr.starts_with("5 problems, 2 errors"), "{stderr}");
    let got = answers(&output, "parquet");
    let reasons: Vec<_> = got.iter().map(|a| a.reason.as_deref()).collect();
    assert_eq!(reasons, [None, None, None, Some("NO_GAME"), Some("SEVERAL_GAMES")]);
    assert_eq!(got[0].alice_wins, Some(true));
    assert_eq!((got[0].index, got[0].digit), (Some(2), Some(9)));
    assert_eq!(
        columns(&output, "parquet")[6..11],
        ["move_index", "move_digit", "move_pile", "move_take", "nim_value"]
    );
    // As JSON lines, a table's row error has the code its reason always has.
    let lines = dir.path().join("mixed.out.jsonl");
    solve(&[path_str(&input), "-o", path_str(&lines)], 1);
    let codes: Vec<i32> = solutions(&lines)[3..].iter().map(|s| s.error.as_ref().unwrap().code).collect();
    assert_eq!(codes, [pb::solution_error::Code::InvalidArgument as i32; 2]);
}

/// A CSV line longer than `--max-message-bytes` is that row's `LINE_TOO_LONG` error, as a
/// JSON line is, read past rather than held (its reader holds at most the limit of it:
/// `csv_records`'s unit tests), and the rows around it are answered.
#[test]
fn a_csv_line_past_the_limit_is_its_rows_error_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("long.csv");
    let long = "7".repeat(3 << 20);
    std::fs::write(&input, format!("id,num,n\na,,5\nb,{long},\nc,\"1\n1\",\nd,,7\n")).unwrap();
    let limit = (1 << 20).to_string();
    let output = dir.path().join("long.out.jsonl");
    let stderr = solve(&[path_str(&input), "-o", path_str(&output), "--max-message-bytes", &limit], 1);
    assert!(stderr.starts_with("4 problems, 2 errors"), "{stderr}");
    let got = solutions(&output);
    let ids: Vec<_> = got.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["a", "1", "c", "d"]);
    let error = got[1].error.as_ref().unwrap();
    assert_eq!(error.reason, "LINE_TOO_LONG");
    assert_eq!(
        error.message,
        format!("row 1: {} bytes is more than the limit of 1048576 bytes", 3 + (3 << 20))
    );
    assert_eq!(error.metadata["row"], "1");
    assert_eq!(error.metadata["length"], (3 + (3 << 20)).to_string());
    assert_eq!(got[2].error.as_ref().unwrap().reason, "INVALID_CHARACTER");
    assert!(got[0].error.is_none() && got[3].error.is_none());
}

/// A list column of `rows`, each item as `item` makes it (of the type `item_type`).
fn list_of(rows: &[Option<&[u64]>], item_type: DataType, item: impl Fn(&[u64]) -> ArrayRef) -> ArrayRef {
    let items: Vec<u64> = rows.iter().flatten().flat_map(|row| row.iter().copied()).collect();
    let lengths = rows.iter().map(|row| row.map_or(0, <[u64]>::len));
    let nulls = arrow_buffer::NullBuffer::from(rows.iter().map(Option::is_some).collect::<Vec<_>>());
    let field = Arc::new(Field::new_list_field(item_type, true));
    Arc::new(ListArray::new(
        field,
        arrow_buffer::OffsetBuffer::from_lengths(lengths),
        item(&items),
        Some(nulls),
    ))
}

/// Decimals of precision 20 and scale 0, as Spark reads and writes a uint64.
fn decimals(values: impl IntoIterator<Item = Option<u64>>) -> Decimal128Array {
    Decimal128Array::from_iter(values.into_iter().map(|v| v.map(i128::from)))
        .with_precision_and_scale(20, 0)
        .unwrap()
}

#[test]
fn tables_as_pandas_and_spark_write_them_answer_as_the_json_lines_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    // One game a row; the large values are exact as floats (2^60, 2^63), as pandas holds
    // them, and beyond int64 where Spark's decimals hold them.
    std::fs::write(
        path("p.jsonl"),
        "{\"id\":\"a\",\"stoneGameIv\":{\"n\":7}}\n\
         {\"id\":\"b\",\"stoneGameIx\":{\"stones\":[1,2,3]}}\n\
         {\"id\":\"c\",\"nimSquare\":{\"piles\":[4,9]}}\n\
         {\"id\":\"d\",\"sumGame\":{\"num\":\"25??\"}}\n\
         {\"id\":\"e\",\"stoneGameIv\":{\"n\":\"1152921504606846976\"}}\n\
         {\"id\":\"f\",\"stoneGameIx\":{\"stones\":[\"9223372036854775808\",5]}}\n",
    )
    .unwrap();
    solve(&[path_str(&path("p.jsonl")), "-o", path_str(&path("ref.jsonl")), "--quiet"], 1);
    let reference = answers(&path("ref.jsonl"), "jsonl");
    let reasons: Vec<_> = reference.iter().map(|a| a.reason.as_deref()).collect();
    assert_eq!(reasons, [None, None, None, None, Some("PILE_ABOVE_LIMIT"), None]);

    let ids: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "d", "e", "f"]));
    let num: ArrayRef = Arc::new(StringArray::from(vec![None, None, None, Some("25??"), None, None]));
    let n = [Some(7), None, None, None, Some(1 << 60), None];
    let stones: [Option<&[u64]>; 6] = [None, Some(&[1, 2, 3]), None, None, None, Some(&[1 << 63, 5])];
    let piles: [Option<&[u64]>; 6] = [None, None, Some(&[4, 9]), None, None, None];
    let floats =
        |items: &[u64]| Arc::new(Float64Array::from_iter_values(items.iter().map(|&v| v as f64))) as ArrayRef;
    let spark = |items: &[u64]| Arc::new(decimals(items.iter().map(|&v| Some(v)))) as ArrayRef;
    // pandas: `n` as float64 with NaN where the row is another game, lists of floats.
    let pandas = table(vec![
        ("id", ids.clone()),
        ("num", num.clone()),
        ("n", Arc::new(Float64Array::from_iter_values(n.iter().map(|v| v.map_or(f64::NAN, |v| v as f64))))),
        ("stones", list_of(&stones, DataType::Float64, floats)),
        ("piles", list_of(&piles, DataType::Float64, floats)),
    ]);
    write_parquet(&path("pandas.parquet"), &pandas);
    // Spark: uint64 as decimal(20,0), nulls where the row is another game.
    let decimal = DataType::Decimal128(20, 0);
    let spark_table = table(vec![
        ("id", ids),
        ("num", num),
        ("n", Arc::new(decimals(n))),
        ("stones", list_of(&stones, decimal.clone(), spark)),
        ("piles", list_of(&piles, decimal, spark)),
    ]);
    write_parquet(&path("spark.parquet"), &spark_table);
    // pandas' CSV: `7.0` and an exponent where a float column holds an integer, numpy's
    // arrays as it prints them, NaN as an empty cell or as `NaN`.
    std::fs::write(
        path("pandas.csv"),
        "id,num,stones,piles,n\n\
         a,,,,7.0\n\
         b,,[1 2 3],,NaN\n\
         c,,,\"[4, 9]\",\n\
         d,25??,,,\n\
         e,,,,1.152921504606846976e+18\n\
         f,,[9223372036854775808 5],,\n",
    )
    .unwrap();
    for input in ["pandas.parquet", "spark.parquet", "pandas.csv"] {
        let out = path(&format!("{input}.jsonl"));
        let stderr = solve(&[path_str(&path(input)), "-o", path_str(&out)], 1);
        assert!(stderr.starts_with("6 problems, 1 error,"), "{input}: {stderr}");
        assert_eq!(answers(&out, "jsonl"), reference, "{input}");
    }
}

#[test]
fn a_number_that_is_no_count_is_its_rows_error_naming_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("floats.parquet");
    let n: ArrayRef = Arc::new(Float64Array::from(vec![7.5, f64::INFINITY, -3.0, 1e20, 4.0]));
    write_parquet(&input, &table(vec![("n", n)]));
    let output = dir.path().join("floats.jsonl");
    solve(&[path_str(&input), "-o", path_str(&output)], 1);
    let errors: Vec<_> =
        solutions(&output).into_iter().map(|s| s.error.map(|e| (e.reason, e.message))).collect();
    let not = |value: &str| {
        Some((
            "NOT_UINT64".to_owned(),
            format!(
                "stone game iv: n = {value} is not a uint64 (a whole number from 0 to 18446744073709551615)"
            ),
        ))
    };
    let negative = Some(("NEGATIVE_VALUE".to_owned(), "stone game iv: n = -3 is negative".to_owned()));
    assert_eq!(errors, [not("7.5"), not("inf"), negative, not("1e20"), None]);
}

#[test]
fn csv_list_cells_parse_and_a_bad_cell_is_its_rows_error() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cells.csv");
    std::fs::write(
        &input,
        "id,stones,piles,n\n\
         a,\"[1, 2, 3]\",,\n\
         b,,[],\n\
         c,,,\n\
         d,\"[1,x]\",,\n\
         e,,,-3\n\
         f,,\"[4,9]\",\n",
    )
    .unwrap();
    let output = dir.path().join("cells.out.csv");
    let stderr = solve(&[path_str(&input), "-o", path_str(&output)], 1);
    assert!(stderr.starts_with("6 problems, 3 errors"), "{stderr}");
    let got = answers(&output, "csv");
    let ids: Vec<_> = got.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c", "d", "e", "f"]);
    let reasons: Vec<_> = got.iter().map(|a| a.reason.as_deref()).collect();
    assert_eq!(reasons, [None, None, Some("NO_GAME"), Some("INVALID_CELL"), Some("INVALID_CELL"), None]);
    // No piles: Bob wins, the nim value is 0.
    assert_eq!((got[1].alice_wins, got[1].nim_value), (Some(false), Some(0)));
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(text.contains("d,\"[1,x]\",,,,,,,,,,INVALID_CELL,\"row 3: column \"\"stones\"\": \"\"[1,x]\"\" is not a list of uint64 such as [1,2,3]\"\n"), "{text}");
    assert!(
        text.contains("e,,,-3,,,,,,,,INVALID_CELL,\"row 4: column \"\"n\"\": \"\"-3\"\" is not a uint64\"\n"),
        "{text}"
    );
    // As JSON lines, a bad cell's error is whole: code, field, metadata.
    let lines = dir.path().join("cells.out.jsonl");
    solve(&[path_str(&input), "-o", path_str(&lines)], 1);
    let bad = &solutions(&lines)[3];
    let error = bad.error.as_ref().unwrap();
    assert_eq!(error.code, pb::solution_error::Code::InvalidArgument as i32);
    assert_eq!(error.field, "problem.stone_game_ix.stones");
    assert_eq!(error.metadata.get("row").map(String::as_str), Some("3"));
}

#[test]
fn what_cannot_be_read_as_problems_exits_two_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("t.csv");
    std::fs::write(&input, "key,size\na,5\n").unwrap();
    let output = dir.path().join("out.parquet");
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(2));
    assert_eq!(
        stderr,
        format!(
            "gamesolver-client: {} has none of the game columns num, stones, n, piles (rename yours with --column n=COLUMN); its columns: key, size\n",
            input.display()
        )
    );
    assert!(!output.exists());
    let (status, stderr) =
        client(&["solve", path_str(&input), "--column", "n=pile", "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr.ends_with("has no column \"pile\" (--column n=pile); its columns: key, size\n"),
        "{stderr}"
    );
    // A date column is no pile size: the message names the cast in the writers' terms.
    let parquet = dir.path().join("t.parquet");
    let n: ArrayRef = Arc::new(arrow_array::Date32Array::from(vec![1]));
    write_parquet(&parquet, &table(vec![("n", n)]));
    let (status, stderr) = client(&["solve", path_str(&parquet), "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(2));
    assert_eq!(
        stderr,
        "gamesolver-client: column \"n\" (n) is Date32; expected whole numbers: an integer type (uint64), or a \
         float, decimal or string type holding them; cast it first: in pandas df[\"n\"] = \
         df[\"n\"].astype(\"UInt64\"); in Polars df = df.with_columns(pl.col(\"n\").cast(pl.UInt64)); in Spark \
         df = df.withColumn(\"n\", F.col(\"n\").cast(\"decimal(20,0)\"))\n"
    );
    let lines = dir.path().join("p.jsonl");
    std::fs::write(&lines, "{\"stoneGameIv\":{\"n\":1}}\n").unwrap();
    let (status, stderr) = client(&["solve", path_str(&lines), "--column", "n=size"]);
    assert_eq!(status.code(), Some(2));
    assert_eq!(
        stderr,
        "gamesolver-client: --column applies to Parquet, Arrow and CSV inputs; this input is JSON lines\n"
    );
    let (status, stderr) = client(&["solve", "-", "--input-format", "parquet"]);
    assert_eq!(status.code(), Some(2));
    assert_eq!(stderr, "gamesolver-client: a Parquet input must be a file: it cannot be read from stdin\n");
}

#[test]
fn several_servers_keep_the_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let (input, lines) = (dir.path().join("p.parquet"), dir.path().join("p.jsonl"));
    gen(&input, 5_000, 21);
    gen(&lines, 5_000, 21);
    solve(&[path_str(&lines), "-o", path_str(&dir.path().join("ref.jsonl"))], 0);
    let (a, b) = (ServerProcess::start("127.0.0.1:0", &[]), ServerProcess::start("127.0.0.1:0", &[]));
    let output = dir.path().join("out.parquet");
    let args = [
        path_str(&input),
        "-o",
        path_str(&output),
        "--batch-rows",
        "100",
        "--server",
        &a.url(),
        "--server",
        &b.url(),
    ];
    solve(&args, 0);
    assert_eq!(answers(&output, "parquet"), answers(&dir.path().join("ref.jsonl"), "jsonl"));
}

/// The bytes of a CSV file up to the line after `fraction` of it.
fn cut(text: &[u8], fraction: f64) -> usize {
    let at = (text.len() as f64 * fraction) as usize;
    at + text[at..].iter().position(|&b| b == b'\n').unwrap() + 1
}

/// Starts `solve -` of `format` with `args`, fed the first `half` bytes of `text` (stdin
/// left open, so that the run cannot finish).
fn start_fed(
    format: &str,
    args: &[&str],
    text: &[u8],
    half: usize,
) -> (std::process::Child, std::process::ChildStdin) {
    let mut run = Command::new(CLIENT)
        .args(["solve", "-", "--input-format", format, "--quiet"])
        .args(args)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = run.stdin.take().unwrap();
    stdin.write_all(&text[..half]).unwrap();
    stdin.flush().unwrap();
    (run, stdin)
}

#[test]
fn a_server_lost_mid_run_hands_its_batches_to_the_other() {
    let dir = tempfile::tempdir().unwrap();
    let (input, lines) = (dir.path().join("p.csv"), dir.path().join("p.jsonl"));
    gen(&input, 6_000, 31);
    gen(&lines, 6_000, 31);
    solve(&[path_str(&lines), "-o", path_str(&dir.path().join("ref.jsonl"))], 0);
    let (a, b) = (ServerProcess::start("127.0.0.1:0", &[]), ServerProcess::start("127.0.0.1:0", &[]));
    let text = std::fs::read(&input).unwrap();
    let output = dir.path().join("out.arrow");
    let (mut run, mut stdin) = start_fed(
        "csv",
        &["-o", path_str(&output), "--batch-rows", "200", "--server", &a.url(), "--server", &b.url()],
        &text,
        cut(&text, 0.5),
    );
    // One server dies for good, with batches of the first half most likely in flight.
    a.kill();
    stdin.write_all(&text[cut(&text, 0.5)..]).unwrap();
    drop(stdin);
    assert_eq!(run.wait().unwrap().code(), Some(0));
    assert_eq!(answers(&output, "arrow"), answers(&dir.path().join("ref.jsonl"), "jsonl"));
}

/// How a fake Flight server lies.
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// One row short.
    Short,
    /// The right columns, but the ids in another order.
    OtherIds,
}

/// A Flight server that answers every batch wrongly, in its own way.
#[derive(Clone)]
struct Liar(Lie);

type Stream<T> = BoxStream<'static, Result<T, Status>>;

impl Liar {
    fn answer(&self, descriptor: Descriptor, batch: RecordBatch) -> RecordBatch {
        let ids = batch.column(0);
        let id = Field::new("id", ids.data_type().clone(), true);
        let schema = Arc::new(columnar::output_schema(descriptor.games, Some(&id)));
        let rows = match self.0 {
            Lie::Short => batch.num_rows() - 1,
            Lie::OtherIds => batch.num_rows(),
        };
        let ids = match self.0 {
            Lie::Short => ids.slice(0, rows),
            Lie::OtherIds => {
                let reversed = UInt64Array::from_iter_values((0..rows as u64).rev());
                arrow_select::take::take(ids.as_ref(), &reversed, None).unwrap()
            }
        };
        let mut columns = vec![ids];
        columns.extend(schema.fields()[1..].iter().map(|f| arrow_array::new_null_array(f.data_type(), rows)));
        RecordBatch::try_new(schema, columns).unwrap()
    }
}

#[tonic::async_trait]
impl FlightService for Liar {
    type HandshakeStream = Stream<HandshakeResponse>;
    type ListFlightsStream = Stream<FlightInfo>;
    type DoGetStream = Stream<FlightData>;
    type DoPutStream = Stream<PutResult>;
    type DoExchangeStream = Stream<FlightData>;
    type DoActionStream = Stream<arrow_flight::Result>;
    type ListActionsStream = Stream<ActionType>;

    async fn handshake(
        &self,
        _: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn list_flights(&self, _: Request<Criteria>) -> Result<Response<Self::ListFlightsStream>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn get_flight_info(&self, _: Request<FlightDescriptor>) -> Result<Response<FlightInfo>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn poll_flight_info(&self, _: Request<FlightDescriptor>) -> Result<Response<PollInfo>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn get_schema(&self, _: Request<FlightDescriptor>) -> Result<Response<SchemaResult>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn do_get(&self, _: Request<Ticket>) -> Result<Response<Self::DoGetStream>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn do_put(&self, _: Request<Streaming<FlightData>>) -> Result<Response<Self::DoPutStream>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn do_action(&self, _: Request<Action>) -> Result<Response<Self::DoActionStream>, Status> {
        Err(Status::unimplemented("no"))
    }
    async fn list_actions(&self, _: Request<Empty>) -> Result<Response<Self::ListActionsStream>, Status> {
        Err(Status::unimplemented("no"))
    }

    async fn do_exchange(
        &self,
        request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        let mut data = request.into_inner().peekable();
        let first = std::pin::Pin::new(&mut data).peek().await.cloned();
        let path =
            first.and_then(|f| f.ok()).and_then(|f| f.flight_descriptor).map(|d| d.path).unwrap_or_default();
        let descriptor = Descriptor::parse(&path).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let liar = self.clone();
        let batches = FlightRecordBatchStream::new_from_flight_data(data.map_err(Into::into))
            .map_ok(move |batch| liar.answer(descriptor, batch));
        // Dictionaries sent as they are (the `game` column), as the server sends them.
        let answers = FlightDataEncoderBuilder::new()
            .with_max_flight_data_size(usize::MAX)
            .with_dictionary_handling(arrow_flight::encode::DictionaryHandling::Resend)
            .build(batches);
        Ok(Response::new(answers.map_err(|e| Status::internal(e.to_string())).boxed()))
    }
}

/// Serves `liar` on a loopback port; returns its URL.
async fn serve_liar(liar: Liar) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(FlightServiceServer::new(liar))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    url
}

/// Runs the client off the runtime that serves the liars.
async fn client_async(args: Vec<String>) -> (ExitStatus, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        client(&args)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_server_gets_no_row_written_and_its_batches_go_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let (input, lines) = (dir.path().join("p.arrows"), dir.path().join("p.jsonl"));
    gen(&input, 1_000, 41);
    gen(&lines, 1_000, 41);
    solve(&[path_str(&lines), "-o", path_str(&dir.path().join("ref.jsonl"))], 0);
    let reference = answers(&dir.path().join("ref.jsonl"), "jsonl");
    for (lie, says) in [
        (Lie::Short, "answered 99 rows for 100 problems"),
        (Lie::OtherIds, "its ids are not the request's (first at row 0 of the batch)"),
    ] {
        let liar = serve_liar(Liar(lie)).await;
        let output = dir.path().join(format!("{lie:?}.jsonl"));
        let args = |servers: &[&str], batch_rows: &str| {
            let mut args: Vec<String> =
                ["solve", path_str(&input), "-o", path_str(&output), "--batch-rows", batch_rows]
                    .map(String::from)
                    .into();
            for server in servers {
                args.extend(["--server".to_owned(), server.to_string()]);
            }
            args
        };
        // Alone, it ends the run, and nothing it said is written.
        let (status, stderr) = client_async(args(&[&liar], "100")).await;
        assert_eq!(status.code(), Some(2), "{lie:?}: {stderr}");
        // Which batch is caught first depends on which connection asked first.
        let (head, tail) = (
            format!("gamesolver-client: server {liar} answered wrongly: the answer to batch "),
            format!(": {says}\n"),
        );
        let seq = stderr.strip_prefix(&head).and_then(|rest| rest.strip_suffix(&tail));
        assert!(seq.is_some_and(|seq| seq.parse::<u64>().is_ok()), "{lie:?}: {stderr}");
        assert_eq!(std::fs::read(&output).unwrap(), b"", "{lie:?}");
        // Beside an honest server, its batches are answered there. A hundred batches, one
        // in flight a connection, so that the honest server cannot answer them all before
        // the liar's connection takes one.
        let honest = ServerProcess::start("127.0.0.1:0", &[]);
        let mut both = args(&[&liar, &honest.url()], "10");
        both.extend(["--window".to_owned(), "1".to_owned()]);
        let (status, stderr) = client_async(both).await;
        assert_eq!(status.code(), Some(0), "{lie:?}: {stderr}");
        assert!(stderr.contains("giving up on server, the others go on"), "{lie:?}: {stderr}");
        assert_eq!(answers(&output, "jsonl"), reference, "{lie:?}");
    }
}

/// The checkpointed rows of `output`'s sidecar, 0 while it has none.
fn checkpointed(output: &Path) -> u64 {
    let mut sidecar = output.as_os_str().to_owned();
    sidecar.push(".resume");
    let Ok(text) = std::fs::read(PathBuf::from(sidecar)) else { return 0 };
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(&text) else { return 0 };
    value["checkpoint"]["lines"].as_u64().unwrap_or(0)
}

#[test]
fn resume_after_a_kill_ends_as_an_uninterrupted_run() {
    let dir = tempfile::tempdir().unwrap();
    let options = ["--batch-rows", "200", "--batch-size", "200", "--row-group-rows", "1024"];
    for (from, format) in
        [("csv", "parquet"), ("csv", "arrow"), ("csv", "csv"), ("csv", "jsonl"), ("jsonl", "parquet")]
    {
        let input = dir.path().join(format!("p.{from}"));
        gen(&input, 6_000, 51);
        let text = std::fs::read(&input).unwrap();
        let complete = dir.path().join(format!("complete.{format}"));
        solve(&[&[path_str(&input), "-o", path_str(&complete)][..], &options].concat(), 0);
        let complete = std::fs::read(&complete).unwrap();

        let output = dir.path().join(format!("out.{format}"));
        let (mut run, stdin) =
            start_fed(from, &[&["-o", path_str(&output)][..], &options].concat(), &text, cut(&text, 0.6));
        // Killed once some rows are checkpointed: whatever follows them is solved again.
        let started = std::time::Instant::now();
        while checkpointed(&output) == 0 {
            assert!(run.try_wait().unwrap().is_none(), "{format}: the client exited early");
            assert!(started.elapsed() < PATIENCE, "{format}: no checkpoint");
            std::thread::sleep(Duration::from_millis(20));
        }
        run.kill().unwrap(); // SIGKILL: no handler, no flush, no footer
        run.wait().unwrap();
        drop(stdin);
        assert!(std::fs::read(&output).unwrap() != complete, "{format}: the run was cut");

        let stderr =
            solve(&[&[path_str(&input), "-o", path_str(&output), "--resume"][..], &options].concat(), 0);
        assert!(stderr.contains("(resumed after"), "{format}: {stderr}");
        assert!(
            std::fs::read(&output).unwrap() == complete,
            "{format}: the resumed output differs from a whole run"
        );
        assert!(!dir.path().join(format!("out.{format}.partial")).exists(), "{format}");

        // Resuming a complete output has nothing left to do.
        let stderr =
            solve(&[&[path_str(&input), "-o", path_str(&output), "--resume"][..], &options].concat(), 0);
        assert!(stderr.starts_with("0 problems"), "{format}: {stderr}");
        assert!(std::fs::read(&output).unwrap() == complete, "{format}");
    }
}

#[test]
fn ctrl_c_mid_run_leaves_an_output_that_resumes_to_the_whole_run() {
    let dir = tempfile::tempdir().unwrap();
    let options = ["--batch-rows", "200", "--batch-size", "200", "--row-group-rows", "1024"];
    let input = dir.path().join("p.csv");
    gen(&input, 6_000, 52);
    let text = std::fs::read(&input).unwrap();
    let complete = dir.path().join("complete.parquet");
    solve(&[&[path_str(&input), "-o", path_str(&complete)][..], &options].concat(), 0);

    // Without --server: the batches are in the embedded server's exchange when it stops.
    let output = dir.path().join("out.parquet");
    let (run, stdin) =
        start_fed("csv", &[&["-o", path_str(&output)][..], &options].concat(), &text, cut(&text, 0.6));
    let started = std::time::Instant::now();
    while checkpointed(&output) == 0 {
        assert!(started.elapsed() < PATIENCE, "no checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill").args(["-s", "INT", &run.id().to_string()]).status().unwrap();
    assert!(status.success());
    // stdin stays open: a reader blocked on it must not keep the client alive.
    let result = run.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(result.status.code(), Some(2));

    let stderr = solve(&[&[path_str(&input), "-o", path_str(&output), "--resume"][..], &options].concat(), 0);
    assert!(stderr.contains("(resumed after"), "{stderr}");
    assert!(
        std::fs::read(&output).unwrap() == std::fs::read(&complete).unwrap(),
        "the resumed output differs from a whole run"
    );
}

#[test]
fn resume_refuses_an_output_it_cannot_prove_is_this_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, output) = (dir.path().join("a.csv"), dir.path().join("b.csv"), dir.path().join("out.parquet"));
    gen(&a, 500, 1);
    gen(&b, 500, 2);
    solve(&[path_str(&a), "-o", path_str(&output)], 0);
    let before = std::fs::read(&output).unwrap();
    let refused = |args: &[&str]| {
        let (status, stderr) =
            client(&[&["solve", path_str(&b), "-o", path_str(&output), "--resume"][..], args].concat());
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(std::fs::read(&output).unwrap() == before, "the output is untouched");
        stderr
    };
    assert_eq!(
        refused(&[]),
        format!(
            "gamesolver-client: {} answers {}, not this input: its first 500 rows differ\n",
            output.display(),
            a.display()
        )
    );
    let (status, stderr) =
        client(&["solve", path_str(&a), "-o", path_str(&output), "--resume", "--winner-only"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("was written with no --winner-only, this run has --winner-only"), "{stderr}");
    let (status, stderr) =
        client(&["solve", path_str(&a), "-o", path_str(&output), "--resume", "--column", "id=id"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("was written with no --column, this run has --column id=id"), "{stderr}");
    let (status, stderr) =
        client(&["solve", path_str(&a), "-o", path_str(&output), "--resume", "--output-format", "arrow"]);
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr.contains("was written with Parquet out of CSV, this run has Arrow IPC file out of CSV"),
        "{stderr}"
    );
    // A JSON lines run over a table run's output: its sidecar names the table's formats.
    let lines = dir.path().join("problems.jsonl");
    std::fs::write(&lines, "{\"stoneGameIv\":{\"n\":\"7\"}}\n").unwrap();
    let (status, stderr) =
        client(&["solve", path_str(&lines), "-o", path_str(&output), "--resume", "--output-format", "jsonl"]);
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr.contains("was written with Parquet out of CSV, this run has JSON lines out of JSON lines"),
        "{stderr}"
    );
    // A file this client did not write.
    std::fs::remove_file(dir.path().join("out.parquet.resume")).unwrap();
    let (status, stderr) = client(&["solve", path_str(&a), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("has no") && stderr.contains("refusing to append to it"), "{stderr}");
}

/// An IPC stream's bytes of `messages` (each header and body), framed as arrow's writer
/// frames them: continuation marker, padded length, header, body; then the end marker.
fn ipc_stream(messages: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (header, body) in messages {
        let padded = header.len().next_multiple_of(8);
        out.extend([0xff; 4]);
        out.extend((padded as i32).to_le_bytes());
        out.extend(header);
        out.resize(out.len() + padded - header.len(), 0);
        out.extend(body);
    }
    out.extend([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
    out
}

/// Malformed and hostile Arrow tables, as files and streams: each is exit 2 with one
/// message naming what is wrong, never a panic, an abort (an LZ4 claim of 2^62 bytes) or
/// a hang (an offset of 2^62 panicked the reading thread and left the run waiting), and
/// a row count no buffer bounds is refused rather than cut into gigabytes of pieces.
#[test]
fn a_malformed_arrow_table_is_exit_two_with_one_message() {
    use arrow_ipc::CompressionType;
    use gamesolver::columnar::ipc::{schema_message, RawBatch};
    let dir = tempfile::tempdir().unwrap();
    let n_schema = Schema::new(vec![Field::new("n", DataType::UInt64, true)]);
    let item = Arc::new(Field::new("item", DataType::Int8, true));
    let stones_schema = Schema::new(vec![Field::new("stones", DataType::FixedSizeList(item, 0), true)]);
    let n = |values: (i64, i64), compression: Option<CompressionType>| RawBatch {
        rows: 1,
        nodes: vec![(1, 0)],
        buffers: vec![(0, 0), values],
        compression,
        ..RawBatch::default()
    };
    let mut lz4 = (1i64 << 62).to_le_bytes().to_vec();
    lz4.extend([0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, 0x82, 0]);
    let rows = 1i64 << 40;
    let huge =
        RawBatch { rows, nodes: vec![(rows, 0), (0, 0)], buffers: vec![(0, 0); 3], ..RawBatch::default() };
    let cases: Vec<(&str, Schema, RawBatch, Vec<u8>, String)> = vec![
        (
            "offset",
            n_schema.clone(),
            n((1 << 62, 8), None),
            vec![0; 8],
            "buffer 1 (values of field \"n\") at offset 4611686018427387904, 8 bytes, lies outside the 8-byte body".into(),
        ),
        (
            "lz4",
            n_schema.clone(),
            n((0, 16), Some(CompressionType::LZ4_FRAME)),
            lz4,
            "the message's compressed buffers claim 4611686018427387904 bytes inflated (the largest, buffer 1 of \
             field \"n\", 4611686018427387904), above the limit of 1073741824 bytes"
                .into(),
        ),
        (
            "rows",
            stones_schema,
            huge,
            vec![],
            format!("the record batch claims {rows} rows, above the limit of 134217728 rows (one per 8 bytes of the message limit)"),
        ),
    ];
    for (name, schema, raw, body, message) in cases {
        let path = dir.path().join(format!("{name}.arrows"));
        let header = raw.header(body.len() as i64);
        std::fs::write(&path, ipc_stream(&[(schema_message(&schema), vec![]), (header, body)])).unwrap();
        let output = dir.path().join(format!("{name}.out.arrows"));
        let (status, stderr) = client(&["solve", path_str(&path), "-o", path_str(&output)]);
        assert_eq!(status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(
            stderr,
            format!("gamesolver-client: cannot read {} after row 0: {message}\n", path.display()),
            "{name}"
        );
    }
    // A file written by arrow's writer, LZ4-compressed, whose one buffer's claim is then
    // made 2^62: its 100 values' 800 bytes are the only such prefix in it.
    let path = dir.path().join("lz4.arrow");
    let values: ArrayRef = Arc::new(UInt64Array::from_iter_values((0..100).map(|i| i * 7919 % 1000)));
    let batch = table(vec![("n", values)]);
    let options = arrow_ipc::writer::IpcWriteOptions::default()
        .try_with_compression(Some(CompressionType::LZ4_FRAME))
        .unwrap();
    let mut bytes = Vec::new();
    let mut writer =
        arrow_ipc::writer::FileWriter::try_new_with_options(&mut bytes, &batch.schema(), options).unwrap();
    writer.write(&batch).unwrap();
    writer.finish().unwrap();
    drop(writer);
    let claim = 800i64.to_le_bytes();
    let at: Vec<usize> = (0..bytes.len() - 8).filter(|&i| bytes[i..i + 8] == claim).collect();
    assert_eq!(at.len(), 1, "one prefix of 800 bytes");
    bytes[at[0]..at[0] + 8].copy_from_slice(&(1i64 << 62).to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let (status, stderr) =
        client(&["solve", path_str(&path), "-o", path_str(&dir.path().join("lz4.out.arrow"))]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "gamesolver-client: cannot read {} after row 0: the message's compressed buffers claim 4611686018427387904 \
             bytes inflated (the largest, buffer 1 of field \"n\", 4611686018427387904), above the limit of 1073741824 bytes\n",
            path.display()
        )
    );
}

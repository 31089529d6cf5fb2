//! `gamesolver-client` over datasets as data tools write them: directories of parts with
//! Hive partition folders, in and out, resumed part by part; input columns kept beside
//! the answers; stdin told by its content; the exit policy; the embedded server's table
//! cache.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use arrow_array::cast::AsArray;
use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::common::{path_str, without_table_growth, CLIENT};

/// Runs the client with `args`, `stdin` on its standard input, the table cache in
/// `cache`.
fn run(args: &[&str], stdin: &[u8], cache: &Path) -> Output {
    let mut child = Command::new(CLIENT)
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A client that stops reading early closes the pipe: that is its business.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

/// Runs `solve` with `args` and checks its exit code; returns stderr, but for the lines
/// of a table's growth.
fn solve(args: &[&str], code: i32, cache: &Path) -> String {
    let out = run(&[&["solve"][..], args].concat(), b"", cache);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "solve {args:?}: {stderr}");
    without_table_growth(&stderr)
}

fn gen(path: &Path, count: u64, seed: u64, cache: &Path) {
    let (count, seed) = (count.to_string(), seed.to_string());
    let args =
        ["gen", "--count", &count, "--seed", &seed, "--mix", "sum=1,ix=1,iv=1,nim=1", "-o", path_str(path)];
    let out = run(&args, b"", cache);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

fn parquet(path: &Path) -> RecordBatch {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let schema = reader.schema().clone();
    let batches: Vec<RecordBatch> = reader.build().unwrap().map(Result::unwrap).collect();
    arrow_select::concat::concat_batches(&schema, &batches).unwrap()
}

fn names(batch: &RecordBatch) -> Vec<String> {
    batch.schema().fields().iter().map(|field| field.name().clone()).collect()
}

/// Every file below `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            match path.is_dir() {
                true => walk(&path, root, out),
                false => out.push(path.strip_prefix(root).unwrap().display().to_string()),
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// A directory as Spark writes a table partitioned by `year`: two parts, `_SUCCESS` and
/// checksum files.
fn spark_dir(root: &Path, cache: &Path) -> [PathBuf; 2] {
    let parts = [
        root.join("year=2023/part-00000-c0.snappy.parquet"),
        root.join("year=2024/part-00001-c0.snappy.parquet"),
    ];
    for (seed, part) in parts.iter().enumerate() {
        std::fs::create_dir_all(part.parent().unwrap()).unwrap();
        gen(part, 300 + 100 * seed as u64, seed as u64 + 1, cache);
        std::fs::write(
            part.with_file_name(format!(".{}.crc", part.file_name().unwrap().to_str().unwrap())),
            b"crc",
        )
        .unwrap();
    }
    std::fs::write(root.join("_SUCCESS"), b"").unwrap();
    parts
}

#[test]
fn a_spark_directory_comes_back_as_a_directory_of_the_same_parts_with_their_rows() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let input = dir.path().join("problems");
    let parts = spark_dir(&input, cache.path());
    let out = dir.path().join("answers/");
    let stderr = solve(&[path_str(&input), "-o", path_str(&out)], 0, cache.path());
    assert!(stderr.starts_with("700 problems, 0 errors, "), "{stderr}");
    assert_eq!(
        files(&out),
        [
            "year=2023/.part-00000-c0.snappy.parquet.resume",
            "year=2023/part-00000-c0.snappy.parquet",
            "year=2024/.part-00001-c0.snappy.parquet.resume",
            "year=2024/part-00001-c0.snappy.parquet",
        ],
        "one part a part, under its name and folder; the sidecars hidden"
    );
    for (part, year) in parts.iter().zip(["2023", "2024"]) {
        let written = parquet(&out.join(format!("year={year}")).join(part.file_name().unwrap()));
        // The part's own rows, in its order, its columns and its folder's kept.
        let alone = dir.path().join(format!("{year}.parquet"));
        solve(&[path_str(part), "-o", path_str(&alone)], 0, cache.path());
        let alone = parquet(&alone);
        assert_eq!(written.num_rows(), alone.num_rows());
        let alone_names = names(&alone);
        let expected: Vec<&str> = ["id", "num", "stones", "n", "piles", "year"]
            .into_iter()
            .chain(alone_names[5..].iter().map(String::as_str))
            .collect();
        assert_eq!(names(&written), expected);
        for name in names(&alone) {
            assert_eq!(written.column_by_name(&name), alone.column_by_name(&name), "{year}: {name}");
        }
        let years = written.column_by_name("year").unwrap().as_string::<i32>();
        assert!(years.iter().all(|value| value == Some(year)), "{year}");
    }
}

#[test]
fn resume_over_parts_skips_a_complete_part_and_continues_a_cut_off_one() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let input = dir.path().join("problems");
    let parts = spark_dir(&input, cache.path());
    let options = ["--row-group-rows", "64", "--batch-rows", "64"];
    let whole = dir.path().join("whole");
    solve(&[&[path_str(&input), "-o", path_str(&whole)][..], &options].concat(), 0, cache.path());

    // The second part cut off: an output of its first 128 rows, as a run stopped there
    // leaves one (the rows of a shorter input are the same rows).
    let full = std::fs::read(&parts[1]).unwrap();
    let batch = parquet(&parts[1]);
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&parts[1]).unwrap(), batch.schema(), None)
            .unwrap();
    writer.write(&batch.slice(0, 128)).unwrap();
    writer.close().unwrap();
    let out = dir.path().join("out");
    solve(&[&[path_str(&input), "-o", path_str(&out)][..], &options].concat(), 0, cache.path());
    std::fs::write(&parts[1], full).unwrap();

    let stderr = solve(
        &[&[path_str(&input), "-o", path_str(&out), "--resume"][..], &options].concat(),
        0,
        cache.path(),
    );
    // 300 rows of the complete part and 128 of the cut-off one were there; 272 are new.
    assert!(stderr.starts_with("272 problems, 0 errors, "), "{stderr}");
    assert!(stderr.ends_with("(resumed after 428 lines, 0 with errors)\n"), "{stderr}");
    assert_eq!(files(&out), files(&whole));
    for file in files(&whole).iter().filter(|name| !name.contains("/.")) {
        assert!(std::fs::read(out.join(file)).unwrap() == std::fs::read(whole.join(file)).unwrap(), "{file}");
    }
}

#[test]
fn what_a_run_over_several_inputs_cannot_do_exits_two_before_anything_is_written() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let input = dir.path().join("problems");
    spark_dir(&input, cache.path());
    let stderr = solve(&[path_str(&input)], 2, cache.path());
    assert_eq!(
        stderr,
        "gamesolver-client: several inputs (a directory, a glob or several paths) are written one part a \
         part into a directory: give -o DIR/\n"
    );
    let file = dir.path().join("answers.parquet");
    let stderr = solve(&[path_str(&input), "-o", path_str(&file)], 2, cache.path());
    assert!(stderr.contains("answers.parquet is not a directory; several inputs"), "{stderr}");
    std::fs::write(input.join("year=2024/notes.csv"), "n\n5\n").unwrap();
    let out = dir.path().join("out/");
    let stderr = solve(&[path_str(&input), "-o", path_str(&out)], 2, cache.path());
    assert!(stderr.contains("the parts of a run are of one format: "), "{stderr}");
    assert!(
        stderr.contains("notes.csv is CSV; pick one with a glob (such as 'DIR/**/*.parquet')"),
        "{stderr}"
    );
    // A glob picks one format.
    let glob = format!("{}/*/*.parquet", input.display());
    let stderr = solve(&[&glob, "-o", path_str(&out), "-q"], 0, cache.path());
    assert_eq!(stderr, "");
    let inside = input.join("answers/");
    let stderr = solve(
        &[&glob, path_str(&input.join("year=2024/notes.csv")), "-o", path_str(&inside)],
        2,
        cache.path(),
    );
    assert!(stderr.contains("the parts of a run are of one format"), "{stderr}");
    let stderr =
        solve(&[path_str(&input), "--input-format", "parquet", "-o", path_str(&inside)], 2, cache.path());
    assert!(stderr.contains("is inside the input"), "{stderr}");
    assert!(!inside.exists(), "nothing written");
}

/// `key,label,pile_size` rows of Stone Game IV.
fn labelled(path: &Path, names: [&str; 3]) {
    let columns: Vec<(&str, ArrayRef)> = vec![
        (names[0], std::sync::Arc::new(StringArray::from(vec!["a", "b", "c"]))),
        (names[1], std::sync::Arc::new(StringArray::from(vec!["red", "green", "blue"]))),
        (names[2], std::sync::Arc::new(UInt64Array::from(vec![1, 2, 7]))),
    ];
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), batch.schema(), None)
            .unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

#[test]
fn kept_columns_come_beside_the_answers_and_a_clash_is_refused_by_name() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let input = dir.path().join("labelled.parquet");
    labelled(&input, ["id", "label", "n"]);
    let out = dir.path().join("out.parquet");
    solve(&[path_str(&input), "-o", path_str(&out)], 0, cache.path());
    let all = parquet(&out);
    assert_eq!(
        names(&all),
        ["id", "label", "n", "game", "alice_wins", "move_take", "error_reason", "error_message"]
    );
    assert_eq!(all.column_by_name("label").unwrap().as_string::<i32>().value(2), "blue");
    let games = arrow_cast::cast(all.column_by_name("game").unwrap(), &arrow_schema::DataType::Utf8).unwrap();
    assert_eq!(games.as_string::<i32>().value(0), "stone_game_iv");
    solve(&[path_str(&input), "-o", path_str(&out), "--keep", "label"], 0, cache.path());
    assert_eq!(names(&parquet(&out))[..3], ["id", "label", "game"]);
    solve(&[path_str(&input), "-o", path_str(&out), "--keep", "none"], 0, cache.path());
    assert_eq!(names(&parquet(&out))[..3], ["id", "game", "alice_wins"]);

    let missing = dir.path().join("missing.parquet");
    let stderr = solve(&[path_str(&input), "-o", path_str(&missing), "--keep", "colour"], 2, cache.path());
    assert_eq!(
        stderr,
        format!(
            "gamesolver-client: --keep colour: {} has no column \"colour\"; its columns: id, label, n\n",
            input.display()
        )
    );
    let clashing = dir.path().join("clash.parquet");
    labelled(&clashing, ["id", "alice_wins", "n"]);
    let stderr = solve(&[path_str(&clashing), "-o", path_str(&missing)], 2, cache.path());
    assert_eq!(
        stderr,
        format!(
            "gamesolver-client: --keep: column \"alice_wins\" of {} has the name of an answer column; rename it in \
             the input, or keep the others with --keep COLUMN,... (or --keep none)\n",
            clashing.display()
        )
    );
    let lines = dir.path().join("out.jsonl");
    let stderr = solve(&[path_str(&input), "-o", path_str(&lines), "--keep", "label"], 2, cache.path());
    assert!(
        stderr.starts_with("gamesolver-client: --keep label: a JSON-lines output is one Solution a line"),
        "{stderr}"
    );
    assert!(!missing.exists() && !lines.exists(), "nothing written");
}

/// The bytes of each column chunk of the Parquet file at `path`, by row group and leaf,
/// with its row groups' rows.
fn chunks(path: &Path) -> (Vec<i64>, Vec<Vec<Vec<u8>>>) {
    let bytes = std::fs::read(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let groups = reader.metadata().row_groups();
    let rows = groups.iter().map(|group| group.num_rows()).collect();
    let chunk = |chunk: &parquet::file::metadata::ColumnChunkMetaData| {
        let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset()) as usize;
        bytes[start..start + chunk.compressed_size() as usize].to_vec()
    };
    (rows, groups.iter().map(|group| group.columns().iter().map(chunk).collect()).collect())
}

#[test]
fn kept_columns_of_a_parquet_input_are_its_chunks_copied_in_its_row_groups() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let generated = dir.path().join("gen.parquet");
    gen(&generated, 5_000, 21, cache.path());
    // Row groups as another writer cuts them: uneven, one shorter than a page's batch.
    let rows = parquet(&generated);
    let input = dir.path().join("in.parquet");
    let mut writer =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&input).unwrap(), rows.schema(), None)
            .unwrap();
    for (at, len) in [(0, 1_200), (1_200, 3_000), (4_200, 790), (4_990, 10)] {
        writer.write(&rows.slice(at, len)).unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();

    let (all, none) = (dir.path().join("all.parquet"), dir.path().join("none.parquet"));
    solve(&[path_str(&input), "-o", path_str(&all), "--keep", "all"], 0, cache.path());
    solve(&[path_str(&input), "-o", path_str(&none), "--keep", "none"], 0, cache.path());
    let (kept, answers) = (parquet(&all), parquet(&none));
    for name in names(&rows) {
        assert_eq!(kept.column_by_name(&name).unwrap(), rows.column_by_name(&name).unwrap(), "{name}");
    }
    for name in names(&answers) {
        assert_eq!(kept.column_by_name(&name).unwrap(), answers.column_by_name(&name).unwrap(), "{name}");
    }
    let ((input_groups, input_chunks), (output_groups, output_chunks)) = (chunks(&input), chunks(&all));
    assert_eq!(output_groups, input_groups, "the output's row groups are the input's");
    let kept_leaves = input_chunks[0].len() - 1; // every column of the input but its id
    for (group, (input, output)) in input_chunks.iter().zip(&output_chunks).enumerate() {
        assert_eq!(output[1..1 + kept_leaves], input[1..], "row group {group}: the kept chunks' bytes");
    }
}

#[test]
fn csv_on_stdin_is_solved_and_garbage_exits_two_with_nothing_written() {
    let cache = tempfile::tempdir().unwrap();
    let out = run(&["solve", "-", "-q"], b"id,n,label\na,1,x\nb,2,y\n", cache.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text,
        "id,n,label,game,alice_wins,move_take,error_reason,error_message\n\
         a,1,x,stone_game_iv,true,1,,\n\
         b,2,y,stone_game_iv,false,,,\n"
    );
    let out = run(&["solve", "-"], b"hello world\nthis is not a table\n", cache.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing written");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gamesolver-client: stdin is none of the formats this client reads (JSON lines of problems, CSV with a \
         header row naming its columns, an Arrow IPC stream): it starts with \"hello world\\nthis is not a table\\n\"; \
         give --input-format FORMAT\n"
    );
}

#[test]
fn max_errors_lets_a_run_with_that_many_error_rows_exit_zero() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let input = dir.path().join("p.jsonl");
    std::fs::write(&input, "{\"stoneGameIv\":{\"n\":7}}\n{\"id\":\"bad\"}\n{\"stoneGameIv\":{\"n\":2}}\n")
        .unwrap();
    let out = dir.path().join("out.jsonl");
    let stderr = solve(&[path_str(&input), "-o", path_str(&out)], 1, cache.path());
    assert!(stderr.starts_with("3 problems, 1 error, "), "{stderr}");
    solve(&[path_str(&input), "-o", path_str(&out), "--max-errors", "1"], 0, cache.path());
    solve(&[path_str(&input), "-o", path_str(&out), "--max-errors", "34%"], 0, cache.path());
    solve(&[path_str(&input), "-o", path_str(&out), "--max-errors", "33%"], 1, cache.path());
    let stderr = solve(&[path_str(&input), "-o", path_str(&out), "--max-errors", "ten"], 2, cache.path());
    assert!(
        stderr.contains("\"ten\": expected a count of rows (10) or a percentage of them (0.5%)"),
        "{stderr}"
    );
    std::fs::write(&input, "{\"stoneGameIv\":{\"n\":7}}\n").unwrap();
    let stderr = solve(&[path_str(&input), "-o", path_str(&out)], 0, cache.path());
    assert!(stderr.starts_with("1 problem, 0 errors, "), "{stderr}");
}

#[test]
fn the_table_cache_is_loaded_by_the_next_run_rebuilt_when_damaged_and_off_when_asked() {
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let input = dir.path().join("p.jsonl");
    std::fs::write(&input, "{\"stoneGameIv\":{\"n\":200000}}\n{\"nimSquare\":{\"piles\":[3000]}}\n").unwrap();
    let out = dir.path().join("out.jsonl");
    let logged = |args: &[&str]| {
        let output = Command::new(CLIENT)
            .args([&["solve", path_str(&input), "-o", path_str(&out), "-q"][..], args].concat())
            .env("XDG_CACHE_HOME", cache.path())
            .env("RUST_LOG", "gamesolver::server::tables=info,gamesolver::tables=info")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0));
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let tables = cache.path().join("gamesolver");
    let first = logged(&[]);
    assert!(first.contains("no stone game iv table yet; it will be computed and saved"), "{first}");
    assert!(first.contains("stone game iv table saved"), "{first}");
    assert_eq!(files(&tables), ["grundy.table", "iv.table"]);
    let answers = std::fs::read(&out).unwrap();

    let second = logged(&[]);
    assert!(second.contains("stone game iv table loaded"), "{second}");
    assert!(second.contains("nim square table loaded"), "{second}");
    assert!(!second.contains("saved"), "nothing grew: {second}");
    assert!(std::fs::read(&out).unwrap() == answers);

    // A damaged file: a warning, the table rebuilt and saved whole again.
    let mut bytes = std::fs::read(tables.join("iv.table")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(tables.join("iv.table"), &bytes).unwrap();
    let damaged = logged(&[]);
    assert!(damaged.contains("WARN"), "{damaged}");
    assert!(damaged.contains("ignoring stone game iv table: "), "{damaged}");
    assert!(damaged.contains("checksum mismatch; recomputing"), "{damaged}");
    assert!(damaged.contains("stone game iv table saved"), "{damaged}");
    assert!(std::fs::read(&out).unwrap() == answers);
    assert!(logged(&[]).contains("stone game iv table loaded"));

    // Elsewhere, or nowhere.
    let elsewhere = dir.path().join("tables");
    logged(&["--table-cache", path_str(&elsewhere)]);
    assert_eq!(files(&elsewhere), ["grundy.table", "iv.table"]);
    let (none, nowhere) = (tempfile::tempdir().unwrap(), dir.path().join("never"));
    let output = Command::new(CLIENT)
        .args(["solve", path_str(&input), "-o", path_str(&out), "-q", "--no-table-cache"])
        .env("XDG_CACHE_HOME", none.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(files(none.path()).is_empty(), "--no-table-cache writes nothing");
    let output = Command::new(CLIENT)
        .args(["solve", path_str(&input), "-o", path_str(&out), "-q", "--no-table-cache"])
        .args(["--table-cache", path_str(&nowhere)])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "the flags contradict each other");
    assert!(!nowhere.exists());
    // A table the cache's limit cannot hold is not kept, said once.
    let small = dir.path().join("small");
    let limited = logged(&["--table-cache", path_str(&small), "--table-cache-max-bytes", "100"]);
    assert_eq!(
        limited
            .matches("is larger than the table cache keeps (100, --table-cache-max-bytes); not kept")
            .count(),
        2,
        "{limited}"
    );
    assert!(files(&small).is_empty());
}

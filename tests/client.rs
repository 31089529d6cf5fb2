//! `gamesolver-client` end to end: real binaries, real servers on ephemeral ports, every
//! answer checked against the solver core.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use common::{assert_all_correct, client, generate, path_str, ServerProcess, CLIENT};
use gamesolver::pb;

use crate::common;

#[test]
fn a_generated_file_round_trips_through_the_embedded_server() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    generate(&input, 30_000, 1);
    let (status, stderr) =
        client(&["solve", path_str(&input), "-o", path_str(&output), "--batch-size", "500"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("30000 problems, 0 errors"), "summary: {stderr}");
    assert_all_correct(&input, &output);
}

#[test]
fn compressed_inputs_and_stdout_give_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    generate(&input, 2_000, 2);
    let plain = std::fs::read(&input).unwrap();
    let gz = dir.path().join("in.jsonl.gz");
    let mut encoder = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), Default::default());
    encoder.write_all(&plain).unwrap();
    encoder.finish().unwrap();
    let zst = dir.path().join("in.jsonl.zst");
    std::fs::write(&zst, zstd::encode_all(plain.as_slice(), 3).unwrap()).unwrap();

    let stdout_of = |path: &Path| {
        let out = Command::new(CLIENT).args(["solve", "--quiet", path_str(path)]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stderr.is_empty(), "--quiet prints nothing: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let answers = stdout_of(&input);
    let output = dir.path().join("out.jsonl");
    std::fs::write(&output, &answers).unwrap();
    assert_all_correct(&input, &output);
    assert_eq!(stdout_of(&gz), answers);
    assert_eq!(stdout_of(&zst), answers);
}

#[test]
fn bad_lines_keep_their_place_and_exit_one() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    let mut lines: Vec<String> = Vec::new();
    for i in 0..3000 {
        lines.push(match i % 500 {
            7 => "{not json".to_owned(),
            8 => String::new(),
            9 => format!(r#"{{"id":"nogame{i}"}}"#),
            10 => format!(r#"{{"id":"badchar{i}","sumGame":{{"num":"1x"}}}}"#),
            11 => format!(r#"{{"id":"unknown{i}","sumGame":{{"num":"12"}},"chess":1}}"#),
            12 => r#"{"sum_game":{"num":"?5"}}"#.to_owned(),
            _ => format!(r#"{{"id":"p{i}","stoneGameIv":{{"n":{}}}}}"#, i % 97),
        });
    }
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let (status, stderr) =
        client(&["solve", path_str(&input), "-o", path_str(&output), "--batch-size", "64"]);
    assert_eq!(status.code(), Some(1), "{stderr}");

    let output = std::fs::read_to_string(&output).unwrap();
    let solutions: Vec<pb::Solution> = output.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Blank lines are skipped; every other line keeps its place.
    let kept: Vec<usize> = (0..lines.len()).filter(|i| i % 500 != 8).collect();
    assert_eq!(solutions.len(), kept.len());
    let invalid = pb::solution_error::Code::InvalidArgument as i32;
    for (&i, solution) in kept.iter().zip(&solutions) {
        let code = solution.error.as_ref().map(|e| e.code);
        let (id, want) = match i % 500 {
            7 => ((i + 1).to_string(), Some(invalid)),
            9 => (format!("nogame{i}"), Some(invalid)),
            10 => (format!("badchar{i}"), Some(invalid)),
            11 => (format!("unknown{i}"), Some(invalid)),
            // No id: the line number, blank lines counted.
            12 => ((i + 1).to_string(), None),
            _ => (format!("p{i}"), None),
        };
        assert_eq!((&solution.id, code), (&id, want), "line {}: {}", i + 1, lines[i]);
    }
}

#[test]
fn the_embedded_server_takes_the_servers_table_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    std::fs::write(
        &input,
        "{\"id\":\"iv\",\"stoneGameIv\":{\"n\":1500}}\n{\"id\":\"nim\",\"nimSquare\":{\"piles\":[5,1500]}}\n",
    )
    .unwrap();
    let messages = |output: &Path| -> Vec<String> {
        let output = std::fs::read_to_string(output).unwrap();
        output
            .lines()
            .map(|line| serde_json::from_str::<pb::Solution>(line).unwrap().error.unwrap().message)
            .collect()
    };

    // Below the piles, each is refused with the flag that raises its limit.
    let (status, stderr) = client(&[
        "solve",
        "--quiet",
        path_str(&input),
        "-o",
        path_str(&output),
        "--iv-max-n",
        "1000",
        "--grundy-max-n",
        "1000",
    ]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        messages(&output),
        [
            "stone game iv: n = 1500 is beyond the limit 1000 of this server (raise it with --iv-max-n, at most 100000000000)",
            "nim square: n = 1500 is beyond the limit 1000 of this server (raise it with --grundy-max-n, at most 4294967295)",
        ]
    );

    // Raised above them, both are answered, and the tables are saved to the files named.
    let (iv_table, grundy_table) = (dir.path().join("iv.table"), dir.path().join("grundy.table"));
    std::fs::remove_file(&output).unwrap();
    let (status, stderr) = client(&[
        "solve",
        "--quiet",
        path_str(&input),
        "-o",
        path_str(&output),
        "--iv-max-n",
        "2000",
        "--grundy-max-n",
        "2000",
        "--iv-table",
        path_str(&iv_table),
        "--grundy-table",
        path_str(&grundy_table),
    ]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_all_correct(&input, &output);
    assert!(iv_table.is_file() && grundy_table.is_file(), "the embedded server saved its tables");

    // A remote server's tables are its own.
    let (status, stderr) =
        client(&["solve", path_str(&input), "--server", "http://127.0.0.1:1", "--iv-max-n", "2000"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: the argument '--server <URL>' cannot be used with '--iv-max-n <N>'\n"),
        "{stderr}"
    );
}

/// Feeds a generated file to `solve -` on `servers` in two halves and runs `between` in
/// between, while the client has (most likely) batches of the first half in flight; the
/// second half can only be answered after `between`. Returns the input and output paths.
fn solve_in_two_halves(
    dir: &Path,
    seed: u64,
    servers: &[String],
    between: impl FnOnce(),
) -> (PathBuf, PathBuf, ExitStatus) {
    let (input, output) = (dir.join("in.jsonl"), dir.join("out.jsonl"));
    generate(&input, 60_000, seed);
    let text = std::fs::read(&input).unwrap();
    let half = text.len() / 2 + text[text.len() / 2..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut run = Command::new(CLIENT);
    run.args(["solve", "-", "-o", path_str(&output), "--quiet", "--batch-size", "256"]);
    for url in servers {
        run.args(["--server", url]);
    }
    let mut run = run.stdin(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut stdin = run.stdin.take().unwrap();
    stdin.write_all(&text[..half]).unwrap();
    stdin.flush().unwrap();
    between();
    stdin.write_all(&text[half..]).unwrap();
    drop(stdin);
    let status = run.wait().unwrap();
    (input, output, status)
}

#[test]
fn several_servers_share_the_load_and_one_dying_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (ServerProcess::start("127.0.0.1:0", &[]), ServerProcess::start("127.0.0.1:0", &[]));
    let servers = [a.url(), b.url()];
    let (input, output, status) = solve_in_two_halves(dir.path(), 3, &servers, || {
        // One server dies for good.
        a.kill();
    });
    assert_eq!(status.code(), Some(0));
    assert_all_correct(&input, &output);
}

#[test]
fn a_server_killed_and_restarted_mid_run_still_yields_everything_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let server = ServerProcess::start("127.0.0.1:0", &[]);
    let url = server.url();
    let mut restarted = None;
    let (input, output, status) = solve_in_two_halves(dir.path(), 4, &[url], || {
        let addr = server.kill();
        restarted = Some(ServerProcess::start(&addr.to_string(), &[]));
    });
    assert_eq!(status.code(), Some(0));
    drop(restarted);
    assert_all_correct(&input, &output);
}

/// Starts `solve - -o OUTPUT` fed with the first half of `input` (stdin left open, so
/// the run cannot finish) and waits until answers are on disk.
fn start_half_run(input: &Path, output: &Path) -> (std::process::Child, std::process::ChildStdin) {
    let text = std::fs::read(input).unwrap();
    let mut run = Command::new(CLIENT)
        .args(["solve", "-", "-o", path_str(output), "--quiet"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = run.stdin.take().unwrap();
    stdin.write_all(&text[..text.len() / 2]).unwrap();
    stdin.flush().unwrap();
    // Answers on disk mean the run (and its Ctrl-C handler) is up.
    for _ in 0..1500 {
        if std::fs::metadata(output).map_or(0, |m| m.len()) > 0 {
            return (run, stdin);
        }
        assert!(run.try_wait().unwrap().is_none(), "client exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no answers within 30 s");
}

#[test]
fn resume_completes_an_output_cut_by_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output, complete) =
        (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"), dir.path().join("complete.jsonl"));
    generate(&input, 60_000, 5);
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&complete)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let complete = std::fs::read(&complete).unwrap();

    let (mut run, stdin) = start_half_run(&input, &output);
    run.kill().unwrap(); // SIGKILL: no handler, no flush
    run.wait().unwrap();
    drop(stdin);
    // A killed writer may leave half a line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&output)
        .unwrap()
        .write_all(b"{\"id\":\"g3\",\"ali")
        .unwrap();

    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("resumed after"), "{stderr}");
    assert!(std::fs::read(&output).unwrap() == complete, "resumed output differs from a complete run");

    // Resuming a complete output has nothing left to do.
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.starts_with("0 problems"), "{stderr}");
    assert!(std::fs::read(&output).unwrap() == complete);
}

#[test]
fn resume_refuses_an_output_of_another_input() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, output) =
        (dir.path().join("a.jsonl"), dir.path().join("b.jsonl"), dir.path().join("out.jsonl"));
    generate(&a, 1_000, 1);
    generate(&b, 1_000, 2);
    let (status, stderr) = client(&["solve", path_str(&a), "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let before = std::fs::read(&output).unwrap();

    let (status, stderr) = client(&["solve", path_str(&b), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    let want = format!(
        "gamesolver-client: {} answers {}, not this input: the first 1000 answered lines (up to input line 1000) differ\n",
        output.display(),
        a.display()
    );
    assert_eq!(stderr, want);
    assert!(std::fs::read(&output).unwrap() == before, "the output is untouched");

    // The options that shape the output are part of what it is.
    let (status, stderr) =
        client(&["solve", path_str(&a), "-o", path_str(&output), "--resume", "--winner-only"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("was written with no --winner-only, this run has --winner-only"), "{stderr}");

    // Lines written after the last checkpoint (a crash within the first second) are
    // checked by the id of the last one: here the sidecar of an empty run, then lines of a.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let (status, stderr) = client(&["solve", path_str(&empty), "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    std::fs::write(&output, &before).unwrap();
    let c = dir.path().join("c.jsonl");
    std::fs::write(&c, "{\"id\":\"c1\",\"stoneGameIv\":{\"n\":1}}\n".repeat(1_001)).unwrap();
    let (status, stderr) = client(&["solve", path_str(&c), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("line 1000 of")
            && stderr.contains("answers id \"g1000\" but input line 1000 has id \"c1\""),
        "{stderr}"
    );
}

#[test]
fn resume_refuses_a_file_it_did_not_write() {
    let dir = tempfile::tempdir().unwrap();
    let (input, notes) = (dir.path().join("in.jsonl"), dir.path().join("notes.txt"));
    generate(&input, 100, 1);
    std::fs::write(&notes, "shopping list\nmilk\nhalf a li").unwrap();
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&notes), "--resume"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has no") && stderr.contains("notes.txt.resume beside it"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "shopping list\nmilk\nhalf a li");
}

#[test]
fn a_cut_off_gzip_input_is_answered_to_its_last_whole_line_then_exits_two() {
    let dir = tempfile::tempdir().unwrap();
    let (input, gz, output) =
        (dir.path().join("in.jsonl"), dir.path().join("in.jsonl.gz"), dir.path().join("out.jsonl"));
    generate(&input, 50_000, 8);
    let text = std::fs::read(&input).unwrap();
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), Default::default());
    encoder.write_all(&text).unwrap();
    let whole = encoder.finish().unwrap();
    std::fs::write(&gz, &whole[..whole.len() * 3 / 5]).unwrap();

    let (status, stderr) = client(&["solve", path_str(&gz), "-o", path_str(&output), "--batch-size", "1000"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("WARN") && !stderr.contains("writer"), "{stderr}");
    let read: usize = stderr
        .strip_prefix("gamesolver-client: cannot read input after line ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(read > 1_000, "{stderr}");
    // Every line read is answered, right up to the cut.
    let prefix = dir.path().join("prefix.jsonl");
    let cut = text.iter().enumerate().filter(|(_, &b)| b == b'\n').nth(read - 1).unwrap().0 + 1;
    std::fs::write(&prefix, &text[..cut]).unwrap();
    assert_all_correct(&prefix, &output);

    // The whole file finishes the job.
    std::fs::write(&gz, &whole).unwrap();
    assert_resume_completes(&gz, &input, &output);
}

#[test]
fn a_closed_output_pipe_is_a_quiet_exit() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    generate(&input, 30_000, 9);
    for args in [vec!["solve", path_str(&input)], vec!["gen", "--count", "300000"]] {
        let mut run =
            Command::new(CLIENT).args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        // `| head -2`: two lines are read, then the pipe closes, long before the end.
        let mut lines = std::io::BufReader::new(run.stdout.take().unwrap());
        for _ in 0..2 {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
            assert!(line.ends_with('\n'), "{args:?}: {line}");
        }
        drop(lines);
        let result = run.wait_with_output().unwrap();
        assert_eq!(result.status.code(), Some(0), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&result.stderr), "", "{args:?}");
    }
}

#[test]
fn os_errors_are_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    generate(&input, 10, 1);
    let missing = dir.path().join("missing.jsonl");
    let in_missing_dir = dir.path().join("no/such/dir/out.jsonl");
    let cases = [
        (vec!["solve", path_str(&missing)], format!("cannot open {}", missing.display()), "os error 2"),
        (
            vec!["solve", path_str(&input), "-o", path_str(&in_missing_dir)],
            format!("cannot write {}.resume", in_missing_dir.display()),
            "os error 2",
        ),
        (
            vec!["solve", path_str(&input), "-o", path_str(dir.path())],
            format!("cannot open output {}", dir.path().display()),
            "os error 21",
        ),
    ];
    for (args, what, os_error) in cases {
        let (status, stderr) = client(&args);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with(&format!("gamesolver-client: {what}: ")), "{args:?}: {stderr}");
        assert_eq!(stderr.matches(os_error).count(), 1, "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn sizes_of_zero_are_refused_by_the_flag_parser() {
    for flag in ["--connections", "--batch-size", "--batch-bytes", "--window", "--in-flight-bytes"] {
        let (status, stderr) = client(&["solve", "-", flag, "0"]);
        assert_eq!(status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(&format!("invalid value '0' for '{flag} ")), "{flag}: {stderr}");
    }
}

#[test]
fn dash_is_stdout_for_solve_and_gen() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], stdin: Stdio| {
        let out = Command::new(CLIENT).args(args).current_dir(dir.path()).stdin(stdin).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let problems = run(&["gen", "--count", "50", "-o", "-"], Stdio::null());
    assert_eq!(problems.iter().filter(|&&b| b == b'\n').count(), 50);
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, &problems).unwrap();
    let solutions = run(&["solve", "--quiet", path_str(&input), "-o", "-"], Stdio::null());
    let output = dir.path().join("out.jsonl");
    std::fs::write(&output, &solutions).unwrap();
    assert_all_correct(&input, &output);
    assert!(!dir.path().join("-").exists(), "no file named -");
}

#[test]
fn blank_lines_are_skipped_and_later_ids_stay_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    std::fs::write(&input, "\n{\"stoneGameIv\":{\"n\":1}}\n \t\r\n{\"id\":\"x\",\"stoneGameIv\":{\"n\":2}}\n\n{\"stoneGameIv\":{\"n\":4}}\n\n")
        .unwrap();
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let ids: Vec<String> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<pb::Solution>(l).unwrap().id)
        .collect();
    assert_eq!(ids, ["2", "x", "6"]);
}

#[test]
fn winner_only_answers_carry_no_move() {
    let dir = tempfile::tempdir().unwrap();
    let (input, full, winners) =
        (dir.path().join("in.jsonl"), dir.path().join("full.jsonl"), dir.path().join("winners.jsonl"));
    generate(&input, 3_000, 10);
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&full)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&winners), "--winner-only"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let read = |path: &Path| -> Vec<pb::Solution> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let (full, winners) = (read(&full), read(&winners));
    assert_eq!(full.len(), winners.len());
    assert!(full.iter().any(|s| s.winning_move.is_some()), "the full answers have moves");
    for (full, winner) in full.iter().zip(&winners) {
        assert_eq!(winner, &pb::Solution { winning_move: None, ..full.clone() });
    }
}

#[test]
fn ctrl_c_stops_with_a_clean_resumable_output() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    generate(&input, 60_000, 7);
    let (run, stdin) = start_half_run(&input, &output);
    let status = Command::new("kill").args(["-s", "INT", &run.id().to_string()]).status().unwrap();
    assert!(status.success());
    // stdin stays open: a reader blocked on it must not keep the client alive.
    let result = run.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(result.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&result.stderr).contains("--resume"), "{:?}", result.stderr);
    let partial = std::fs::read_to_string(&output).unwrap();
    assert!(partial.ends_with('\n'), "the writer flushed whole lines only");

    assert_resume_completes(&input, &input, &output);
}

/// `solve SOURCE -o OUTPUT --resume` exits 0 with every line of `input` answered.
fn assert_resume_completes(source: &Path, input: &Path, output: &Path) {
    let (status, stderr) = client(&["solve", path_str(source), "-o", path_str(output), "--resume"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_all_correct(input, output);
}

#[test]
fn fatal_errors_exit_two_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    generate(&input, 100, 6);

    let (status, stderr) = client(&["solve", path_str(&dir.path().join("missing.jsonl"))]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("cannot open") && stderr.contains("missing.jsonl"), "{stderr}");

    let (status, stderr) = client(&["solve", path_str(&input), "--resume"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("--resume needs an output file"), "{stderr}");

    let before = std::fs::read(&input).unwrap();
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&input)]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("is the input file"), "{stderr}");
    assert!(std::fs::read(&input).unwrap() == before, "the input is untouched");

    // An output longer than the input is not this input's output.
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let head = dir.path().join("head.jsonl");
    let text = std::fs::read_to_string(&input).unwrap();
    std::fs::write(&head, text.lines().take(60).map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let (status, stderr) = client(&["solve", path_str(&head), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("has 100 lines but the input only 60"), "{stderr}");

    // Any scheme but http:// and https:// is refused, never downgraded.
    let (status, stderr) = client(&["solve", path_str(&input), "--server", "ftp://127.0.0.1:1"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("unsupported scheme \"ftp\": use https:// (TLS) or http://"), "{stderr}");
}

/// Feeds half of a generated file to `solve -` on a server of its own, with `extra`
/// flags; once answers are on disk (the server has been reached), kills the server, runs
/// `after` with its address, then feeds the rest. Returns the input and output paths, the
/// client's exit status and its stderr.
fn solve_past_a_killed_server(
    dir: &Path,
    seed: u64,
    extra: &[&str],
    after: impl FnOnce(std::net::SocketAddr) -> Option<ServerProcess>,
) -> (PathBuf, PathBuf, ExitStatus, String) {
    let (input, output) = (dir.join("in.jsonl"), dir.join("out.jsonl"));
    generate(&input, 60_000, seed);
    let text = std::fs::read(&input).unwrap();
    let half = text.len() / 2 + text[text.len() / 2..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let server = ServerProcess::start("127.0.0.1:0", &[]);
    let mut run = Command::new(CLIENT)
        .args(["solve", "-", "-o", path_str(&output), "--quiet", "--batch-size", "256", "--server"])
        .arg(server.url())
        .args(extra)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = run.stdin.take().unwrap();
    stdin.write_all(&text[..half]).unwrap();
    stdin.flush().unwrap();
    for _ in 0..1500 {
        if std::fs::metadata(&output).map_or(0, |m| m.len()) > 0 {
            break;
        }
        assert!(run.try_wait().unwrap().is_none(), "client exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let restarted = after(server.kill());
    // The client may have given up already: then the rest has no reader.
    let _ = stdin.write_all(&text[half..]);
    drop(stdin);
    let ended = run.wait_with_output().unwrap();
    drop(restarted);
    (input, output, ended.status, String::from_utf8_lossy(&ended.stderr).into_owned())
}

/// A server reached once and then lost is a fault to ride out: it is retried for
/// `--retry-for`, however short `--connect-deadline` is.
#[test]
fn a_server_lost_mid_run_is_retried_past_the_connect_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--connect-deadline", "0.5", "--retry-for", "60"];
    let (input, output, status, stderr) = solve_past_a_killed_server(dir.path(), 7, &flags, |addr| {
        // Down for four times the connect deadline.
        std::thread::sleep(Duration::from_secs(2));
        Some(ServerProcess::start(&addr.to_string(), &[]))
    });
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_all_correct(&input, &output);
}

/// A server reached and then lost for good is given up on after `--retry-for`: an
/// unfinished run, not a wrong request, so exit 1 with the server and its last error named.
#[test]
fn a_server_lost_for_good_is_given_up_on_after_retry_for_with_exit_one() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--retry-for", "0.5"];
    let mut url = String::new();
    let (_, _, status, stderr) = solve_past_a_killed_server(dir.path(), 6, &flags, |addr| {
        url = format!("http://{addr}");
        None
    });
    assert_eq!(status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with(&format!("gamesolver-client: server {url} failed for ")), "{stderr}");
    assert!(last.contains(" without answering (last error: cannot connect: "), "{stderr}");
}

/// What the system's resolver says of `host`, as the client quotes it.
fn resolver_says(host: &str) -> String {
    use std::net::ToSocketAddrs;
    let err = (host, 1).to_socket_addrs().expect_err("the host does not resolve").to_string();
    err.strip_prefix("failed to lookup address information: ").unwrap_or(&err).to_owned()
}

/// A run that never reached any server was asked wrongly: it stops at the connect
/// deadline (not after --retry-for) with exit 2 and one line naming each server and why,
/// for JSON lines (gRPC) and tables (Flight) alike.
#[test]
fn servers_never_reached_stop_the_run_at_the_connect_deadline_with_exit_two() {
    let dir = tempfile::tempdir().unwrap();
    let (lines, table) = (dir.path().join("in.jsonl"), dir.path().join("in.csv"));
    generate(&lines, 100, 6);
    std::fs::write(&table, "id,n\na,5\nb,7\n").unwrap();
    let refused = "http://127.0.0.1:1";
    let unknown = "http://nonexistent.invalid:1";
    let dns = format!("cannot resolve nonexistent.invalid (DNS: {})", resolver_says("nonexistent.invalid"));
    for input in [&lines, &table] {
        let output = dir.path().join("out");
        let solve = |servers: &[&str]| {
            let mut args = vec!["solve", path_str(input), "-o", path_str(&output), "--quiet"];
            // Far beyond the deadline: a run that waited for it would show.
            args.extend(["--connect-deadline", "1", "--retry-for", "600"]);
            for server in servers {
                args.extend(["--server", server]);
            }
            client(&args)
        };
        let (status, stderr) = solve(&[refused]);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "gamesolver-client: cannot reach server {refused} within 1.0s (--connect-deadline): connection refused\n"
            )
        );
        let (status, stderr) = solve(&[unknown]);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "gamesolver-client: cannot reach server {unknown} within 1.0s (--connect-deadline): {dns}\n"
            )
        );
        let (status, stderr) = solve(&[unknown, refused]);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr,
            format!(
                "gamesolver-client: cannot reach any server within 1.0s (--connect-deadline): \
                 {unknown}: {dns}; {refused}: connection refused\n"
            )
        );
    }
}

/// Every client flag can come from `GAMESOLVER_CLIENT_<FLAG>`; the command line wins.
#[test]
fn flags_come_from_gamesolver_client_variables_too() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    generate(&input, 10, 6);
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let output =
            Command::new(CLIENT).args(args).envs(env.iter().copied()).stdin(Stdio::null()).output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned(), output.stdout)
    };
    let solve = ["solve", path_str(&input), "--server", "http://127.0.0.1:1"];
    let (code, stderr, _) = run(&[("GAMESOLVER_CLIENT_CONNECT_DEADLINE", "0.5")], &solve);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "gamesolver-client: cannot reach server http://127.0.0.1:1 within 500.0ms (--connect-deadline): connection refused\n"
    );

    let gen = |env: &[(&str, &str)], args: &[&str]| {
        let (code, stderr, stdout) = run(env, &[&["gen", "--count", "20"], args].concat());
        assert_eq!(code, Some(0), "{stderr}");
        stdout
    };
    let seeded = gen(&[], &["--seed", "9", "--mix", "iv=1"]);
    assert_ne!(seeded, gen(&[], &[]));
    assert_eq!(gen(&[("GAMESOLVER_CLIENT_SEED", "9"), ("GAMESOLVER_CLIENT_MIX", "iv=1")], &[]), seeded);
    assert_eq!(gen(&[("GAMESOLVER_CLIENT_SEED", "3")], &["--seed", "9", "--mix", "iv=1"]), seeded);
}

#[test]
fn gen_is_deterministic_and_reproducible_from_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let out = |seed: &str| -> PathBuf {
        let path = dir.path().join(format!("gen{seed}.jsonl"));
        let status = Command::new(CLIENT)
            .args([
                "gen",
                "--count",
                "1000",
                "--seed",
                seed,
                "--mix",
                "sum=1,ix=1,iv=1",
                "-o",
                path_str(&path),
            ])
            .status()
            .unwrap();
        assert!(status.success());
        path
    };
    let (first, again, other) = (out("9"), out("9"), out("10"));
    let read = |p: &PathBuf| std::fs::read(p).unwrap();
    assert_eq!(read(&first), read(&again));
    assert_ne!(read(&first), read(&other));
    assert_eq!(read(&first).iter().filter(|&&b| b == b'\n').count(), 1000);
}

/// mimalloc asks for 2 MiB pages, which made the bulk client's peak RSS 95–129 MB on
/// issue 11's real-world shape; the client turns them off for its whole process.
#[cfg(target_os = "linux")]
#[test]
fn the_client_runs_without_transparent_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl");
    let mut run = Command::new(CLIENT)
        .args(["solve", "-", "-o", path_str(&output), "--quiet"])
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The flag is set first thing in main; the client then waits for input.
    let status = format!("/proc/{}/status", run.id());
    let thp = || {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        text.lines().find_map(|line| line.strip_prefix("THP_enabled:").map(|v| v.trim().to_owned()))
    };
    let mut seen = thp();
    for _ in 0..100 {
        if seen.as_deref() == Some("0") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        seen = thp();
    }
    drop(run.stdin.take());
    assert!(run.wait().unwrap().success());
    assert_eq!(seen.as_deref(), Some("0"), "THP_enabled in {status}");
}

/// A device or a pipe as the output gets no sidecar (nothing there can be resumed), and
/// `--resume` refuses it.
#[test]
fn an_output_that_is_not_a_regular_file_gets_no_sidecar() {
    let dir = tempfile::tempdir().unwrap();
    let (input, fifo, copy) =
        (dir.path().join("in.jsonl"), dir.path().join("out.fifo"), dir.path().join("copy.jsonl"));
    generate(&input, 3_000, 41);
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // Drains the pipe into a file, as `tee` would.
    let drain = {
        let (fifo, copy) = (fifo.clone(), copy.clone());
        std::thread::spawn(move || std::fs::write(copy, std::fs::read(fifo).unwrap()).unwrap())
    };
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&fifo), "--quiet"]);
    drain.join().unwrap();
    assert!(status.success(), "{stderr}");
    assert_all_correct(&input, &copy);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(!names.iter().any(|name| name.to_string_lossy().ends_with(".resume")), "{names:?}");

    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&fifo), "--resume"]);
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr.contains(&format!("--resume needs a regular output file; {} is not one", fifo.display())),
        "{stderr}"
    );
}

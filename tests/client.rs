//! `gamesolver-client` end to end: real binaries, real servers on ephemeral ports, every
//! answer checked against the solver core.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use common::{assert_all_correct, generate, ServerProcess};
use gamesolver::pb;

mod common;

const CLIENT: &str = env!("CARGO_BIN_EXE_gamesolver-client");

/// Runs the client to completion.
fn client(args: &[&str]) -> (ExitStatus, String) {
    let output =
        Command::new(CLIENT).args(args).stdin(Stdio::null()).output().expect("run gamesolver-client");
    (output.status, String::from_utf8_lossy(&output.stderr).into_owned())
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

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
    assert_eq!(solutions.len(), lines.len());
    let invalid = pb::solution_error::Code::InvalidArgument as i32;
    for (i, solution) in solutions.iter().enumerate() {
        let code = solution.error.as_ref().map(|e| e.code);
        let (id, want) = match i % 500 {
            7 | 8 => ((i + 1).to_string(), Some(invalid)),
            9 => (format!("nogame{i}"), Some(invalid)),
            10 => (format!("badchar{i}"), Some(invalid)),
            11 => (format!("unknown{i}"), Some(invalid)),
            12 => ((i + 1).to_string(), None),
            _ => (format!("p{i}"), None),
        };
        assert_eq!((&solution.id, code), (&id, want), "line {}: {}", i + 1, lines[i]);
    }
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

#[test]
fn resume_completes_a_cut_off_output() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    generate(&input, 10_000, 5);
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output)]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let complete = std::fs::read(&output).unwrap();

    // Cut mid-line, as a killed run leaves it.
    let cut = (complete.len() * 2 / 5..).find(|&at| complete[at - 1] != b'\n').unwrap();
    std::fs::write(&output, &complete[..cut]).unwrap();
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
fn ctrl_c_stops_with_a_clean_resumable_output() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    generate(&input, 60_000, 7);
    let text = std::fs::read(&input).unwrap();
    let mut run = Command::new(CLIENT)
        .args(["solve", "-", "-o", path_str(&output), "--quiet"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = run.stdin.take().unwrap();
    stdin.write_all(&text[..text.len() / 2]).unwrap();
    stdin.flush().unwrap();
    // Answers on disk mean the run (and its Ctrl-C handler) is up.
    while std::fs::metadata(&output).map_or(0, |m| m.len()) == 0 {
        assert!(run.try_wait().unwrap().is_none(), "client exited early");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill").args(["-s", "INT", &run.id().to_string()]).status().unwrap();
    assert!(status.success());
    // stdin stays open: a reader blocked on it must not keep the client alive.
    let result = run.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(result.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&result.stderr).contains("--resume"), "{:?}", result.stderr);
    let partial = std::fs::read_to_string(&output).unwrap();
    assert!(partial.ends_with('\n'), "the writer flushed whole lines only");

    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert_all_correct(&input, &output);
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

    // A port that nobody listens on: the server is given up on after --retry-for.
    let dead = ServerProcess::start("127.0.0.1:0", &[]).kill();
    let url = format!("http://{dead}");
    let (status, stderr) =
        client(&["solve", path_str(&input), "-o", path_str(&output), "--server", &url, "--retry-for", "0.5"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains(&dead.to_string()), "{stderr}");

    // An output longer than the input is not this input's output.
    std::fs::write(&output, "{}\n".repeat(101)).unwrap();
    let (status, stderr) = client(&["solve", path_str(&input), "-o", path_str(&output), "--resume"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("more lines") || stderr.contains("only 100"), "{stderr}");
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

//! What `gamesolver-client` tells a person who got something wrong: one line that names
//! the fault and the fix, the exit code, and nothing repeated. Each text here is the one
//! `docs/bulk-client.md` shows.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::TestServer;
use gamesolver::server::{ServerConfig, TlsSettings};
use production::{write_ca, write_leaf, TestCa};

use crate::common;
use crate::production;

const CLIENT: &str = env!("CARGO_BIN_EXE_gamesolver-client");

/// Runs the client with `args` and no stdin.
fn client(args: &[&str]) -> Output {
    Command::new(CLIENT).args(args).stdin(Stdio::null()).output().expect("run gamesolver-client")
}

/// Runs the client off the runtime that serves, so that the server can answer.
async fn client_async(args: Vec<String>) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(CLIENT).args(&args).stdin(Stdio::null()).output().unwrap()
    })
    .await
    .unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned(), started.elapsed())
}

/// Fails unless docs/bulk-client.md shows `message`, in backquotes, as it is.
fn assert_documented(message: &str) {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/bulk-client.md")).unwrap();
    assert!(docs.contains(&format!("`{message}`")), "docs/bulk-client.md does not show `{message}`");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn path_str(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

/// A TLS server (certificate from a private CA, `ca.pem` in `dir`) on 127.0.0.1:0.
async fn tls_server(dir: &Path) -> TestServer {
    let ca = TestCa::new("test ca");
    write_ca(dir, "ca", &ca);
    write_leaf(dir, "server", &ca.server("server"));
    let settings = TlsSettings { cert: dir.join("server.pem"), key: dir.join("server.key"), client_ca: None };
    TestServer::start(ServerConfig { tls: settings.into(), ..ServerConfig::default() }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_url_to_a_tls_server_says_use_https_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = tls_server(dir.path()).await;
    std::fs::write(dir.path().join("in.jsonl"), "{\"stoneGameIv\":{\"n\":5}}\n").unwrap();
    let addr = server.addr;
    for url in [addr.to_string(), format!("http://{addr}")] {
        let args = ["solve", "--quiet", &path_str(&dir.path().join("in.jsonl")), "--server", &url];
        let (code, stderr, took) = client_async(args.map(String::from).to_vec()).await;
        assert_eq!(code, Some(2), "{stderr}");
        assert_eq!(
            stderr,
            format!("gamesolver-client: server http://{addr} speaks TLS: use --server https://{addr}\n")
        );
        // Not retried for --retry-for (60 s).
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
    assert_documented(
        "gamesolver-client: server http://HOST:PORT speaks TLS: use --server https://HOST:PORT",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_failure_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = tls_server(dir.path()).await;
    std::fs::write(dir.path().join("in.jsonl"), "{\"stoneGameIv\":{\"n\":5}}\n").unwrap();
    let url = format!("https://{}", server.addr);
    let input = path_str(&dir.path().join("in.jsonl"));
    // Four connections, each failing its handshake: still one line.
    let args = ["solve", "--quiet", &input, "--server", &url, "--connections", "4"];
    let (code, stderr, _) = client_async(args.map(String::from).to_vec()).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("gamesolver-client: server {url} failed its TLS handshake: ")),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("(UnknownIssuer): give the CA certificate that signed it with --ca-cert PEM\n"),
        "{stderr}"
    );
    assert_documented(
        "gamesolver-client: server https://HOST:PORT failed its TLS handshake: its certificate is not signed by a \
         CA this client trusts (UnknownIssuer): give the CA certificate that signed it with --ca-cert PEM",
    );
}

#[test]
fn a_missing_tls_file_is_named_with_its_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = path_str(&dir.path().join("in.jsonl"));
    std::fs::write(&input, "{\"stoneGameIv\":{\"n\":5}}\n").unwrap();
    let missing = path_str(&dir.path().join("missing.pem"));
    for flags in [vec!["--ca-cert", &missing], vec!["--client-cert", &missing, "--client-key", &missing]] {
        let mut args = vec!["solve", &input, "--server", "https://127.0.0.1:1"];
        args.extend(&flags);
        let output = client(&args);
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(
            text(&output.stderr),
            format!(
                "gamesolver-client: cannot read {} {missing}: No such file or directory (os error 2)\n",
                flags[0]
            )
        );
    }
    assert_documented(
        "gamesolver-client: cannot read --ca-cert PATH: No such file or directory (os error 2)",
    );
}

#[test]
fn bad_lines_are_explained_in_a_persons_words() {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.jsonl"), dir.path().join("out.jsonl"));
    let lines = [
        r#"{"id":"ok","stoneGameIv":{"n":5}}"#,
        "hello",
        r#"{"id":"cut","sumGame":{"num":"12"#,
        r#"{"stoneGameIv":{"n":18446744073709551616}}"#,
        r#"{"stoneGameIv":{"n":-5}}"#,
    ];
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let run = client(&["solve", "--quiet", &path_str(&input), "-o", &path_str(&output)]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    let messages: Vec<String> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|line| {
            let solution: serde_json::Value = serde_json::from_str(line).unwrap();
            solution["error"]["message"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    assert_eq!(
        messages,
        [
            "",
            r#"line 2: not a problem: expected a JSON object such as {"stoneGameIv":{"n":5}}, found "hello""#,
            "line 3: not a problem: unexpected end of the line (truncated JSON?)",
            "line 4: not a problem: stoneGameIv.n: 18446744073709551616 is not a uint64 at column 41",
            "line 5: not a problem: stoneGameIv.n: -5 is not a uint64 at column 23",
        ]
    );
    for message in &messages[1..] {
        assert_documented(message);
    }
}

#[test]
fn readme_shows_what_examples_errors_jsonl_gets() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    // The ```json block after README's `solve examples/errors.jsonl` line.
    let after = &readme[readme.find("solve examples/errors.jsonl").expect("README runs errors.jsonl")..];
    let block = &after[after.find("```json\n").unwrap() + "```json\n".len()..];
    let shown = &block[..block.find("```").unwrap()];
    let run = client(&["solve", "--quiet", &format!("{root}/examples/errors.jsonl")]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert_eq!(text(&run.stdout), shown, "README's answers to examples/errors.jsonl are stale");
}

#[test]
fn a_binary_file_is_refused_before_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl");
    let elf = dir.path().join("program");
    let mut bytes = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    bytes.extend((0..100_000u32).map(|i| (i % 251) as u8));
    std::fs::write(&elf, &bytes).unwrap();
    let mut inputs = vec![path_str(&elf)];
    if Path::new("/bin/ls").exists() {
        inputs.push("/bin/ls".to_owned());
    }
    for input in inputs {
        let run = client(&["solve", &input, "-o", &path_str(&output)]);
        assert_eq!(run.status.code(), Some(2), "{input}");
        assert_eq!(
            text(&run.stderr),
            format!("gamesolver-client: {input}: not JSON lines (byte 0x00 at line 1)\n")
        );
        assert!(!output.exists(), "nothing written");
    }
    assert_documented("gamesolver-client: /bin/ls: not JSON lines (byte 0x00 at line 1)");
}

#[test]
fn help_says_what_the_client_is() {
    let help = client(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    let help = text(&help.stdout);
    assert!(
        help.starts_with(
            "Bulk client of gamesolver: solves problem files (JSON lines, Parquet, Arrow, CSV) through gamesolver servers"
        ),
        "{help}"
    );
    assert!(!help.contains("server for three"), "{help}");
    for command in ["solve", "gen", "completions", "man"] {
        assert!(help.contains(&format!("  {command} ")), "{command}: {help}");
    }
}

#[test]
fn completions_and_man_pages_are_generated() {
    for (shell, mark) in [
        ("bash", "complete -F _gamesolver__client"),
        ("zsh", "#compdef gamesolver-client"),
        ("fish", "complete -c gamesolver-client"),
    ] {
        let run = client(&["completions", shell]);
        assert_eq!(run.status.code(), Some(0), "{shell}");
        let script = text(&run.stdout);
        assert!(script.contains(mark) && script.contains("max-message-bytes"), "{shell}: {script}");
    }
    let run = client(&["completions", "tcsh"]);
    assert_eq!(run.status.code(), Some(2), "an unknown shell is a usage error");

    let page = client(&["man"]);
    assert_eq!(page.status.code(), Some(0));
    let page = text(&page.stdout);
    assert!(page.contains(".TH gamesolver-client 1"), "{page}");
    assert!(
        page.contains("gamesolver\\-client \\- Bulk client of gamesolver: solves problem files (JSON lines, Parquet, Arrow, CSV)"),
        "{page}"
    );

    // A directory that does not exist yet, parents and all.
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("share/man/man1");
    let run = client(&["man", "--out-dir", &path_str(&dir)]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    for name in ["gamesolver-client.1", "gamesolver-client-solve.1", "gamesolver-client-gen.1"] {
        let page = std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(page.starts_with(".ie \\n(.g .ds Aq"), "{name}: {page}");
    }
    // A path under a file cannot be made: exit 2, with the reason.
    let blocked = scratch.path().join("share/man/man1/gamesolver-client.1/sub");
    let run = client(&["man", "--out-dir", &path_str(&blocked)]);
    assert_eq!(run.status.code(), Some(2));
    assert_eq!(
        text(&run.stderr),
        format!("gamesolver-client: cannot create {}: Not a directory (os error 20)\n", blocked.display())
    );
}

#[test]
fn readmes_install_lines_work_in_a_fresh_home() {
    // README's lines after `cargo install --path .`, as written, with the built binaries
    // on PATH and an empty HOME: no directory they write into exists yet.
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let after = &readme[readme.find("\ncargo install --path .\n").expect("README's install lines")..];
    let lines: Vec<&str> = after.lines().skip(2).take_while(|line| !line.starts_with("```")).collect();
    assert!(lines.len() >= 4 && lines.iter().all(|line| !line.is_empty()), "{lines:?}");
    let home = tempfile::tempdir().unwrap();
    let bin = Path::new(CLIENT).parent().unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    for line in &lines {
        let run = Command::new("sh")
            .args(["-c", line])
            .env("HOME", home.path())
            .env("PATH", &path)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(0), "{line}: {}", text(&run.stderr));
    }
    let share = home.path().join(".local/share");
    for file in [
        "bash-completion/completions/gamesolver-client",
        "bash-completion/completions/gamesolver-server",
        "man/man1/gamesolver-client.1",
        "man/man1/gamesolver-server.1",
    ] {
        assert!(share.join(file).metadata().is_ok_and(|meta| meta.len() > 0), "{file}");
    }
}

/// Peak resident memory of process `pid` so far, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("VmHWM in /proc/PID/status");
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn an_over_long_line_costs_at_most_the_limit() {
    const LIMIT: usize = 16 << 20;
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.jsonl");
    let mut child = Command::new(CLIENT)
        .args(["solve", "-", "--quiet", "-o", &path_str(&output), "--batch-size", "1"])
        .args(["--max-message-bytes", &LIMIT.to_string(), "--server", "http://127.0.0.1:1"])
        // Nothing listens there; the run must outlast the measurement.
        .args(["--connect-deadline", "600"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // A short line first: the reader is then running, and this is what it costs at rest.
    stdin.write_all(b"{\"id\":\"x\"}\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = peak_rss(child.id());
    // When the writes return, the client has read all but a pipe's worth of 96 MiB: far
    // past the limit, so whatever the line costs is in the peak.
    let chunk = vec![b'7'; 1 << 20];
    for _ in 0..96 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin.write_all(b"\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let grown = peak_rss(child.id()) - before;
    drop(stdin);
    let _ = child.kill();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let _ = child.wait();
    let stderr: Vec<String> = stderr.lines().map_while(Result::ok).collect();
    // The limit, plus the read buffer and the line's first MiB as they fill; growing by
    // doubling would take twice the limit.
    assert!(grown < LIMIT as u64 * 3 / 2, "grew {grown} bytes on a 96 MiB line; stderr: {stderr:?}");
}

//! The `gamesolver-server` binary: start-up line, serving, SIGTERM/SIGINT, SIGHUP's
//! certificate reload, and the Stone Game IV table file's start-up checks.

use crate::common;

use crate::production;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{solve, ServerProcess};
use gamesolver::games::stone_game_iv::IvTableFile;
use gamesolver::games::{Game, Tables};
use gamesolver::pb::{self, game_solver_service_client::GameSolverServiceClient};
use gamesolver::tables::TableFile;
use production::{client_tls, self_signed_ca_leaf, write_leaf, TestCa};

#[tokio::test]
async fn prints_its_address_serves_and_exits_zero_on_sigterm() {
    let mut server = ServerProcess::start("127.0.0.1:0", &[]);
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();
    let problem =
        pb::Problem { id: "p".into(), game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n: 2 })) };
    let answer = solve(&mut client, problem).await.unwrap();
    assert_eq!(answer.winner, pb::Winner::Bob as i32);
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

#[tokio::test]
async fn exits_zero_on_sigint() {
    let mut server = ServerProcess::start("127.0.0.1:0", &[]);
    server.signal("INT");
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

#[test]
fn a_bad_flag_is_a_clear_error() {
    let output =
        Command::new(env!("CARGO_BIN_EXE_gamesolver-server")).args(["--listen", "nowhere"]).output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--listen"));
}

#[tokio::test]
async fn the_purge_delay_is_ours_unless_the_operator_sets_mimallocs() {
    let ours = "purge_delay_ms=100 under_pressure_ms=10";
    for (set, expected) in [(None, ours), (Some("250"), "purge_delay_ms=250")] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"));
        command.args(["--listen", "127.0.0.1:0"]).env("RUST_LOG", "gamesolver::allocator=debug");
        match set {
            Some(delay) => command.env("MIMALLOC_PURGE_DELAY", delay),
            None => command.env_remove("MIMALLOC_PURGE_DELAY"),
        };
        let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert!(line.starts_with("listening on "), "{line}");
        let mut server = ServerProcess { child, addr: "127.0.0.1:1".parse().unwrap() };
        server.signal("TERM");
        assert_eq!(server.wait_exit().await.code(), Some(0));
        let mut log = String::new();
        std::io::Read::read_to_string(&mut server.child.stderr.take().unwrap(), &mut log).unwrap();
        let lines: Vec<&str> = log.lines().filter(|line| line.contains("purge_delay_ms=")).collect();
        assert_eq!(lines.len(), 1, "{log}");
        assert!(lines[0].ends_with(expected), "{set:?}: {}", lines[0]);
    }
}

#[tokio::test]
async fn request_memory_under_pressure_shortens_the_purge_delay_until_it_is_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    // A budget of 1 MiB is under pressure above 128 KiB held: one request of 300 KB.
    let budget = ["--max-request-bytes-in-flight", "1048576"];
    let (mut server, addr) = start_logging_with(&budget, &log, "info,gamesolver::allocator=debug");
    let mut client = GameSolverServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let num = "0".repeat(300_000);
    let large =
        pb::Problem { id: "large".into(), game: Some(pb::problem::Game::SumGame(pb::SumGame { num })) };
    assert_eq!(solve(&mut client, large).await.unwrap().winner, pb::Winner::Bob as i32);
    let pressed = "request memory pressure changed purge_delay_ms=10 pressed=true";
    let relaxed = "request memory pressure changed purge_delay_ms=100 pressed=false";
    let text = logged(&log, relaxed, 1).await;
    assert_eq!(text.matches(pressed).count(), 1, "{text}");
    assert!(text.find(pressed) < text.find(relaxed), "{text}");
    // A small request is no pressure.
    assert_eq!(solve(&mut client, iv(2)).await.unwrap().winner, pb::Winner::Bob as i32);
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("request memory pressure changed").count(), 2, "{text}");
}

/// Starts the binary with `flags`, its stderr in `log`; returns it and its address.
fn start_logging(flags: &[&str], log: &Path) -> (ServerProcess, std::net::SocketAddr) {
    start_logging_with(flags, log, "info")
}

/// [`start_logging`] with `RUST_LOG` set to `filter`.
fn start_logging_with(flags: &[&str], log: &Path, filter: &str) -> (ServerProcess, std::net::SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0"])
        .args(flags)
        .env("RUST_LOG", filter)
        .env_remove("MIMALLOC_PURGE_DELAY")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").expect("the start-up line").parse().unwrap();
    (ServerProcess { child, addr }, addr)
}

/// Waits (at most 10 s) until the log has `count` lines containing `text`.
async fn logged(log: &Path, text: &str, count: usize) -> String {
    for _ in 0..200 {
        let contents = std::fs::read_to_string(log).unwrap();
        if contents.matches(text).count() >= count {
            return contents;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{text:?} not logged {count} times:\n{}", std::fs::read_to_string(log).unwrap());
}

async fn tls_solve(addr: std::net::SocketAddr, ca: &TestCa) -> Result<pb::Solution, String> {
    let channel = tonic::transport::Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .tls_config(client_tls(ca, None))
        .unwrap()
        .connect()
        .await
        .map_err(|err| format!("{err:?}"))?;
    solve(&mut GameSolverServiceClient::new(channel), iv(2)).await.map_err(|status| status.to_string())
}

fn iv(n: u64) -> pb::Problem {
    pb::Problem { id: n.to_string(), game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n })) }
}

#[tokio::test]
async fn sighup_reloads_the_certificates_and_a_bad_file_keeps_the_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (TestCa::new("old ca"), TestCa::new("new ca"));
    let (cert, key) = write_leaf(dir.path(), "server", &old_ca.server("old server"));
    let log = dir.path().join("server.log");
    let flags =
        ["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap(), "--iv-precompute", "0"];
    let (mut server, addr) = start_logging(&flags, &log);
    assert!(logged(&log, "TLS certificates loaded", 1).await.contains("CN=old server"));
    assert!(tls_solve(addr, &old_ca).await.is_ok());

    // A half-written certificate: the reload fails, is logged, and the old one serves on.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\n").unwrap();
    server.signal("HUP");
    logged(&log, "TLS reload failed, keeping the previous certificates", 1).await;
    assert!(tls_solve(addr, &old_ca).await.is_ok());

    // A certificate that loads but that clients would refuse: refused with its reason, and
    // the old one serves on.
    write_leaf(dir.path(), "server", &self_signed_ca_leaf("localhost"));
    server.signal("HUP");
    logged(&log, "keeping the previous certificates: ", 2).await;
    let refusal = format!(
        "SIGHUP: TLS reload failed, keeping the previous certificates: {}: clients would refuse this \
         certificate: it is a CA certificate",
        cert.display()
    );
    logged(&log, &refusal, 1).await;
    assert!(tls_solve(addr, &old_ca).await.is_ok());

    write_leaf(dir.path(), "server", &new_ca.server("new server"));
    server.signal("HUP");
    assert!(logged(&log, "SIGHUP: TLS certificates reloaded", 1).await.contains("CN=new server"));
    assert_eq!(tls_solve(addr, &new_ca).await.unwrap().winner, pb::Winner::Bob as i32);
    assert!(tls_solve(addr, &old_ca).await.is_err(), "the old certificate is still served");
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

/// A SIGHUP never ends a server without TLS files: it says there is nothing to reload,
/// the call in flight goes on, and new calls are answered.
#[tokio::test]
async fn sighup_without_tls_files_is_logged_and_ends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let (mut server, addr) = start_logging(&[], &log);
    let mut client = GameSolverServiceClient::connect(format!("http://{addr}")).await.unwrap();
    let (requests, stream) = tokio::sync::mpsc::channel(4);
    let request = |n| pb::SolveStreamRequest { problem: Some(iv(n)), winner_only: false };
    requests.send(request(2)).await.unwrap();
    let mut answers =
        client.solve_stream(tokio_stream::wrappers::ReceiverStream::new(stream)).await.unwrap().into_inner();
    let answer = answers.message().await.unwrap().and_then(|a| a.solution).unwrap();
    assert_eq!(answer.id, "2");

    server.signal("HUP");
    logged(&log, "SIGHUP: nothing to reload (no TLS files; flags and tables are read at start-up)", 1).await;
    assert!(server.child.try_wait().unwrap().is_none(), "the server ended on SIGHUP");
    requests.send(request(3)).await.unwrap();
    let answer = answers.message().await.unwrap().and_then(|a| a.solution).unwrap();
    assert_eq!((answer.id.as_str(), answer.winner), ("3", pb::Winner::Alice as i32));
    drop(requests);
    assert!(answers.message().await.unwrap().is_none());
    assert_eq!(solve(&mut client, iv(2)).await.unwrap().winner, pb::Winner::Bob as i32);
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

/// A SIGHUP that reaches the server before any of its code runs is not its end, and one
/// later is handled: the test blocks SIGHUP in the child and sends it one before `exec`,
/// so that it is pending when the server's first instruction runs, the moment a SIGHUP
/// racing a start would otherwise kill it. The server drops it and unblocks SIGHUP, then
/// answers, and a second SIGHUP is the usual "nothing to reload". (A SIGHUP sent the
/// moment `exec` returns killed 29 of 30 servers of a debug build when only `main`
/// ignored it: the loader and the runtime's set-up come first.)
#[tokio::test]
async fn a_sighup_before_the_server_runs_any_code_ends_nothing_and_a_later_one_is_handled() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut command = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"));
    command
        .args(["--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
    // SAFETY: between fork and exec, only async-signal-safe calls on this process's mask.
    unsafe {
        command.pre_exec(|| {
            let mut hangup: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut hangup);
            libc::sigaddset(&mut hangup, libc::SIGHUP);
            libc::sigprocmask(libc::SIG_BLOCK, &hangup, std::ptr::null_mut());
            libc::raise(libc::SIGHUP);
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr: std::net::SocketAddr =
        line.trim().strip_prefix("listening on ").expect("the start-up line").parse().unwrap();
    let mut server = ServerProcess { child, addr };
    let mut client = GameSolverServiceClient::connect(format!("http://{addr}")).await.unwrap();
    assert_eq!(solve(&mut client, iv(2)).await.unwrap().winner, pb::Winner::Bob as i32);
    server.signal("HUP");
    logged(&log, "SIGHUP: nothing to reload", 1).await;
    assert!(server.child.try_wait().unwrap().is_none(), "the server ended on SIGHUP");
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    let logs = std::fs::read_to_string(&log).unwrap();
    assert_eq!(logs.matches("SIGHUP: nothing to reload").count(), 1, "the pending one was dropped:\n{logs}");
}

#[test]
fn a_certificate_clients_would_refuse_stops_the_start_and_check_config() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = write_leaf(dir.path(), "server", &self_signed_ca_leaf("localhost"));
    let expected = format!(
        "gamesolver-server: cannot load the TLS files: {}: clients would refuse this certificate: it is a CA \
         certificate (basicConstraints CA:TRUE, as openssl req -x509 makes by default), which clients refuse \
         as a server's own (CaUsedAsEndEntity); make one with `gamesolver-server dev-cert --out-dir DIR` (a \
         CA, and a server certificate it signs for localhost, 127.0.0.1 and ::1; --host NAME adds a name), \
         or, self-signed, with `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days \
         365 -subj /CN=HOST -addext subjectAltName=DNS:HOST -addext basicConstraints=critical,CA:FALSE \
         -keyout server.key -out server.pem` (clients then trust it with --ca-cert server.pem)\n",
        cert.display()
    );
    for (extra, code) in [(Some("--check-config"), 2), (None, 1)] {
        let output = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
            .args([
                "--listen",
                "127.0.0.1:0",
                "--tls-cert",
                cert.to_str().unwrap(),
                "--tls-key",
                key.to_str().unwrap(),
            ])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(code), "{extra:?}");
        assert_eq!(problems(&output.stderr), expected, "{extra:?}");
        assert!(output.stdout.is_empty(), "{extra:?}: nothing bound, nothing printed");
    }
}

#[test]
fn completions_and_man_pages_are_generated_and_man_makes_its_directory() {
    let server =
        |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_gamesolver-server")).args(args).output().unwrap();
    let run = server(&["completions", "bash"]);
    assert_eq!(run.status.code(), Some(0));
    let script = String::from_utf8_lossy(&run.stdout);
    assert!(
        script.contains("gamesolver-server") && script.contains("--iv-max-n") && script.contains("dev-cert"),
        "{script}"
    );
    let page = server(&["man"]);
    assert_eq!(page.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&page.stdout).contains(".TH gamesolver-server 1"));

    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("share/man/man1");
    let run = server(&["man", "--out-dir", out_dir.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    for name in ["gamesolver-server.1", "gamesolver-server-dev-cert.1"] {
        assert!(out_dir.join(name).is_file(), "{name}");
    }
}

#[test]
fn an_iv_table_in_a_missing_directory_is_an_error_at_start_up() {
    let output = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0", "--iv-table", "/missing/dir/iv.table"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        problems(&output.stderr),
        "gamesolver-server: stone game iv table: /missing/dir/iv.table: the directory does not exist\n"
    );
}

#[test]
fn a_file_that_is_not_a_table_is_refused_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "my notes, not a table\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0", "--iv-precompute", "1000", "--iv-table", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let expected = format!(
        "gamesolver-server: stone game iv table: {}: not a stone game iv table (bad magic); refusing to overwrite it\n",
        path.display()
    );
    assert_eq!(problems(&output.stderr), expected);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "my notes, not a table\n");
}

/// A link at the table path is not followed, even to a good table: the start is refused
/// and the file it points to is left alone.
#[cfg(unix)]
#[test]
fn a_table_path_that_is_a_link_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (path, target) = (dir.path().join("iv.table"), dir.path().join("elsewhere.table"));
    let table =
        IvTableFile { covered: 1000, losing: gamesolver::games::stone_game_iv::losing_positions_below(1000) };
    table.save(&target).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0", "--iv-precompute", "5000", "--iv-table", path.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A server that followed the link would serve on: a bounded wait, then a kill.
    let exited = (0..300).find_map(|_| {
        let status = server.try_wait().unwrap();
        if status.is_none() {
            std::thread::sleep(Duration::from_millis(100));
        }
        status
    });
    let _ = server.kill();
    let output = server.wait_with_output().unwrap();
    assert_eq!(exited.and_then(|status| status.code()), Some(1), "the server started on a linked table");
    let expected = format!(
        "gamesolver-server: stone game iv table: {}: a symbolic link; refusing to follow it\n",
        path.display()
    );
    assert_eq!(problems(&output.stderr), expected);
    assert_eq!(IvTableFile::load(&target).unwrap(), table);
}

/// `--peer-header` without `--trusted-proxy` is refused at start-up, and by
/// `--check-config`: believed from anyone, the header would let a client name itself
/// anyone.
#[test]
fn a_peer_header_without_trusted_proxies_is_refused() {
    let expected = "gamesolver-server: --peer-header x-real-ip needs --trusted-proxy CIDR, the addresses of the \
                    proxies that set it: from any other address the header would let a client name itself anyone\n";
    for (check, code) in [(false, 1), (true, 2)] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"));
        command.args(["--listen", "127.0.0.1:0", "--peer-header", "x-real-ip"]);
        if check {
            command.arg("--check-config");
        }
        let output = command.output().unwrap();
        assert_eq!(output.status.code(), Some(code));
        assert_eq!(problems(&output.stderr), expected);
    }
    let output = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--check-config", "--peer-header", "x-real-ip", "--trusted-proxy", "10.0.0.0/8,192.0.2.7"])
        .output()
        .unwrap();
    assert_eq!(
        (output.status.code(), String::from_utf8_lossy(&output.stdout).as_ref()),
        (Some(0), "config ok\n")
    );
}

/// A table whose directory takes no new file could never be saved: `--check-config`
/// says so (exit 2) rather than "config ok", for either table, and start-up refuses it.
#[test]
fn a_table_in_a_directory_that_takes_no_file_is_refused() {
    // sysfs takes no new file, not even from root.
    for (flag, game) in [("--iv-table", "stone game iv"), ("--grundy-table", "nim square")] {
        let output = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
            .args(["--check-config", flag, "/sys/gamesolver.table"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        let expected = format!(
            "gamesolver-server: {game} table: /sys/gamesolver.table: cannot create a file in its directory, so the table could never be saved: "
        );
        assert!(stderr.starts_with(&expected), "{stderr}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0", "--iv-table", "/sys/gamesolver.table"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
}

/// The lines of `stderr` that are not INFO log lines (start-up facts such as the
/// open-file limit): what reports a problem, which must be said once.
fn problems(stderr: &[u8]) -> String {
    let stderr = String::from_utf8_lossy(stderr);
    stderr.lines().filter(|line| !line.contains(" INFO ")).map(|line| format!("{line}\n")).collect()
}

/// Answers for `piles` from the server at `url`, compared with the solver core's.
async fn assert_answers(url: String, piles: &[u64]) {
    let mut client = GameSolverServiceClient::connect(url).await.unwrap();
    let table = Tables::new(1_000_000, 1_000);
    for &n in piles {
        let answer = solve(&mut client, iv(n)).await.unwrap();
        let expected = Game::StoneGameIv(n).solve(&table).unwrap();
        assert_eq!(answer.alice_wins, expected.alice_wins(), "n = {n}");
    }
}

#[tokio::test]
async fn the_iv_table_file_survives_a_restart_and_a_corrupt_one_is_recomputed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iv.table");
    let path_arg = path.to_str().unwrap();
    let flags = ["--iv-table", path_arg, "--iv-precompute", "300000"];

    let mut server = ServerProcess::start("127.0.0.1:0", &flags);
    for _ in 0..300 {
        if IvTableFile::load(&path).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    let saved = IvTableFile::load(&path).expect("a valid table file");
    assert!(saved.covered >= 300_000);

    // Corruption that changes answers: a P-position p moved to p + 1, so that a table
    // trusted as it is would say Alice wins at p and loses at p + 1. First as a disk
    // would do it (the checksum no longer matches), then as a buggy writer would (a
    // valid checksum, a wrong list).
    let index = saved.losing.iter().position(|&p| p > 100_000).unwrap();
    let p = saved.losing[index];
    assert!(saved.losing[index + 1] > p + 1);
    let mut shifted = saved.clone();
    shifted.losing[index] = p + 1;
    let mut disk_error = saved.encode();
    disk_error[..shifted.encode().len() - 4].copy_from_slice(&shifted.encode()[..shifted.encode().len() - 4]);
    for corrupt in [disk_error, shifted.encode()] {
        std::fs::write(&path, &corrupt).unwrap();
        let mut server = ServerProcess::start("127.0.0.1:0", &flags);
        assert_answers(server.url(), &[p, p + 1, 299_999, 2]).await;
        server.signal("TERM");
        assert_eq!(server.wait_exit().await.code(), Some(0));
        assert_eq!(IvTableFile::load(&path).unwrap().losing[index], p, "the file was rewritten whole");
    }
}

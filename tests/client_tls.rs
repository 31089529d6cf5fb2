//! `gamesolver-client` over TLS and mutual TLS: certificates made at run time (rcgen), the
//! real server in this process, the client binary.

use std::path::Path;
use std::process::{Command, Stdio};

use common::{assert_all_correct, generate, TestServer, CLIENT};
use gamesolver::server::{ServerConfig, TlsSettings};
use production::{write_ca, write_leaf, TestCa};

mod common;
mod production;

/// Serves the solver with TLS from `dir` (`server.pem`, `server.key`, and `ca.pem` as the
/// client CA when `mutual`) on 127.0.0.1:0: the real server. Returns it and its https URL.
async fn serve_tls(dir: &Path, mutual: bool) -> (TestServer, String) {
    let settings = TlsSettings {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        client_ca: mutual.then(|| dir.join("ca.pem")),
    };
    let server = TestServer::start(ServerConfig { tls: settings.into(), ..ServerConfig::default() }).await;
    let url = format!("https://{}", server.addr);
    (server, url)
}

/// Runs `solve in.jsonl -o out.jsonl --server URL` with `extra` flags, off the runtime
/// that serves; returns (exit code, stderr).
async fn solve(dir: &Path, url: &str, extra: &[String]) -> (Option<i32>, String) {
    let mut command = Command::new(CLIENT);
    command.arg("solve").arg(dir.join("in.jsonl")).arg("-o").arg(dir.join("out.jsonl"));
    command.args(["--quiet", "--retry-for", "1", "--server", url]).args(extra).stdin(Stdio::null());
    let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// `--flag DIR/file` as two arguments.
fn flag(name: &str, dir: &Path, file: &str) -> [String; 2] {
    [name.to_owned(), dir.join(file).to_str().unwrap().to_owned()]
}

/// The PKI of one test: a CA with a server and a client certificate, and another CA with
/// a client certificate of its own.
fn pki(dir: &Path) {
    let (ca, other) = (TestCa::new("test ca"), TestCa::new("another ca"));
    write_ca(dir, "ca", &ca);
    write_leaf(dir, "server", &ca.server("server"));
    write_leaf(dir, "client", &ca.client("client"));
    write_leaf(dir, "stranger", &other.client("stranger"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_is_served_to_a_client_that_trusts_the_ca_and_refused_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    pki(dir);
    generate(&dir.join("in.jsonl"), 2_000, 21);
    let (_server, url) = serve_tls(dir, false).await;

    let (code, stderr) = solve(dir, &url, &flag("--ca-cert", dir, "ca.pem")).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_all_correct(&dir.join("in.jsonl"), &dir.join("out.jsonl"));

    // The system's roots do not know this CA: fatal at once, not retried (a retry would
    // end in "failed for ... without answering").
    let (code, stderr) = solve(dir, &url, &[]).await;
    assert_eq!(code, Some(2), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("gamesolver-client: server {url} failed its TLS handshake: ")),
        "{stderr}"
    );
    assert!(last.contains("invalid peer certificate: UnknownIssuer"), "{stderr}");
    assert!(!stderr.contains("retrying"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_serves_only_a_client_with_a_certificate_from_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    pki(dir);
    generate(&dir.join("in.jsonl"), 2_000, 22);
    let (_server, url) = serve_tls(dir, true).await;
    let trust = flag("--ca-cert", dir, "ca.pem");
    let with = |stem: &str| {
        let mut flags = trust.to_vec();
        flags.extend(flag("--client-cert", dir, &format!("{stem}.pem")));
        flags.extend(flag("--client-key", dir, &format!("{stem}.key")));
        flags
    };

    let (code, stderr) = solve(dir, &url, &with("client")).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_all_correct(&dir.join("in.jsonl"), &dir.join("out.jsonl"));

    for (flags, why) in [(trust.to_vec(), "no certificate"), (with("stranger"), "another CA's certificate")] {
        let _ = std::fs::remove_file(dir.join("out.jsonl"));
        let (code, stderr) = solve(dir, &url, &flags).await;
        let last = stderr.lines().last().unwrap_or_default();
        // With TLS 1.3 the server refuses a client certificate after the client's side of
        // the handshake. When the client reads the server's alert, it stops at once
        // (no retry brings a certificate the server trusts); when the server's close
        // reaches it first (a broken pipe, a closed connection), the alert is never seen,
        // and the server is retried like any closed connection until --retry-for (1 s
        // here). Which comes first is the network's timing; both refuse every answer.
        let alert = format!("gamesolver-client: server {url} failed its TLS handshake: ");
        let closed = format!("gamesolver-client: server {url} failed for ");
        match code {
            Some(2) => {
                assert!(last.starts_with(&alert) && last.contains("received fatal alert"), "{why}: {stderr}")
            }
            Some(1) => assert!(last.starts_with(&closed), "{why}: {stderr}"),
            other => panic!("{why}: exit {other:?}: {stderr}"),
        }
        let answered = std::fs::read_to_string(dir.join("out.jsonl")).unwrap_or_default();
        assert_eq!(answered, "", "{why}: no problem is answered");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_goes_through_flight_over_mutual_tls() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    pki(dir);
    generate(&dir.join("in.jsonl"), 2_000, 23);
    let gen = Command::new(CLIENT)
        .args(["gen", "--count", "2000", "--seed", "23", "-o"])
        .arg(dir.join("in.parquet"))
        .status()
        .unwrap();
    assert!(gen.success());
    let (_server, url) = serve_tls(dir, true).await;
    let mut flags = flag("--ca-cert", dir, "ca.pem").to_vec();
    flags.extend(flag("--client-cert", dir, "client.pem"));
    flags.extend(flag("--client-key", dir, "client.key"));
    let (code, stderr) = solve(dir, &url, &flags).await;
    assert_eq!(code, Some(0), "{stderr}");
    // The same problems as a Parquet table, written as JSON lines: the same lines.
    flags.extend(["-o".to_owned(), dir.join("table.jsonl").to_str().unwrap().to_owned()]);
    let mut command = Command::new(CLIENT);
    command.arg("solve").arg(dir.join("in.parquet")).args(["--quiet", "--server", &url]).args(&flags);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(std::fs::read(dir.join("table.jsonl")).unwrap() == std::fs::read(dir.join("out.jsonl")).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_flags_need_an_https_server_and_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    pki(dir);
    generate(&dir.join("in.jsonl"), 10, 23);

    let (code, stderr) = solve(dir, "http://127.0.0.1:1", &flag("--ca-cert", dir, "ca.pem")).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr,
        "gamesolver-client: --ca-cert, --client-cert and --client-key apply to https:// servers, and none is given\n"
    );

    let (code, stderr) = solve(dir, "https://127.0.0.1:1", &flag("--client-cert", dir, "client.pem")).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--client-key"), "{stderr}");

    let (code, stderr) = solve(dir, "https://127.0.0.1:1", &flag("--ca-cert", dir, "missing.pem")).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.starts_with("gamesolver-client: cannot read --ca-cert "), "{stderr}");
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
}

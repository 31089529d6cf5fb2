//! `gamesolver-client` over TLS and mutual TLS: certificates made at run time (rcgen), the
//! real server in this process, the client binary.

use std::path::Path;
use std::process::{Command, Stdio};

use common::{assert_all_correct, generate, ServerProcess, TestServer, CLIENT};
use gamesolver::server::{ServerConfig, TlsSettings};
use production::{bare_tls_server, self_signed_ca_leaf, write_ca, write_leaf, Leaf, TestCa};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::common;
use crate::production;

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
    // end in "failed for ... without answering"), and the flag that fixes it named.
    assert_eq!(
        refused(dir, &url, &[]).await,
        format!(
            "gamesolver-client: server {url} failed its TLS handshake: its certificate is not signed by a CA \
             this client trusts (UnknownIssuer): give the CA certificate that signed it with --ca-cert PEM\n"
        )
    );
}

/// Runs the client against `url`, whose certificate it must refuse: exit 2 at once, not
/// retried. Returns its stderr.
async fn refused(dir: &Path, url: &str, extra: &[String]) -> String {
    let (code, stderr) = solve(dir, url, extra).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert!(!stderr.contains("retrying"), "{stderr}");
    stderr
}

/// The time in `text` after `prefix`, up to the next space, as RFC 3339.
fn time_after(text: &str, prefix: &str) -> OffsetDateTime {
    let at = text.find(prefix).unwrap_or_else(|| panic!("{prefix:?} not in {text}")) + prefix.len();
    let end = text[at..].find(' ').map_or(text.len(), |end| at + end);
    OffsetDateTime::parse(&text[at..end], &Rfc3339).unwrap_or_else(|err| panic!("{err}: {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_host_names_the_urls_host_and_the_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let ca = TestCa::new("test ca");
    write_ca(dir, "ca", &ca);
    write_leaf(dir, "server", &ca.server_for("elsewhere", &["solver.example", "10.1.2.3"]));
    generate(&dir.join("in.jsonl"), 10, 24);
    let (_server, url) = serve_tls(dir, false).await;
    assert_eq!(
        refused(dir, &url, &flag("--ca-cert", dir, "ca.pem")).await,
        format!(
            "gamesolver-client: server {url} failed its TLS handshake: its certificate is not valid for \
             127.0.0.1, the host in the URL; it names solver.example, 10.1.2.3 (NotValidForName): use a host \
             it names in --server, or a certificate whose subjectAltName names 127.0.0.1\n"
        )
    );
}

/// Serves `leaf` with a bare TLS server (the real one refuses to load such a
/// certificate) and runs the client against it, trusting `ca_pem`; returns its stderr
/// and the time span the run took, as the machine's clock read it.
async fn refused_by_a_bare_server(
    leaf: &Leaf,
    ca_pem: &str,
) -> (String, String, OffsetDateTime, OffsetDateTime) {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::write(dir.join("trusted.pem"), ca_pem).unwrap();
    generate(&dir.join("in.jsonl"), 10, 25);
    let (addr, _server) = bare_tls_server(leaf).await;
    let url = format!("https://{addr}");
    let before = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    let stderr = refused(dir, &url, &flag("--ca-cert", dir, "trusted.pem")).await;
    let after = OffsetDateTime::now_utc();
    (stderr, url, before, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_or_not_yet_valid_certificate_names_its_dates_and_the_clock() {
    let ca = TestCa::new("test ca");
    let expired = ca.server_valid("expired", (2020, 1, 1), (2021, 1, 1));
    let (stderr, url, before, after) = refused_by_a_bare_server(&expired, &ca.pem()).await;
    let clock = time_after(&stderr, "this machine's clock says ");
    assert!(before <= clock && clock <= after, "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "gamesolver-client: server {url} failed its TLS handshake: its certificate expired at \
             2021-01-01T00:00:00Z, and this machine's clock says {} (Expired): renew the certificate, or set \
             the clock right if it is wrong\n",
            clock.format(&Rfc3339).unwrap()
        )
    );

    let early = ca.server_valid("early", (2100, 1, 1), (2101, 1, 1));
    let (stderr, url, before, after) = refused_by_a_bare_server(&early, &ca.pem()).await;
    let clock = time_after(&stderr, "this machine's clock says ");
    assert!(before <= clock && clock <= after, "{stderr}");
    assert_eq!(
        stderr,
        format!(
            "gamesolver-client: server {url} failed its TLS handshake: its certificate is valid only from \
             2100-01-01T00:00:00Z, and this machine's clock says {} (NotValidYet): check the clocks of this \
             machine and of the one that made it\n",
            clock.format(&Rfc3339).unwrap()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_certificate_as_the_servers_own_says_how_to_make_a_proper_one() {
    // What `openssl req -x509` makes by default, trusted as its own CA.
    let leaf = self_signed_ca_leaf("localhost");
    let (stderr, url, _, _) = refused_by_a_bare_server(&leaf, &leaf.cert).await;
    assert_eq!(
        stderr,
        format!(
            "gamesolver-client: server {url} failed its TLS handshake: its certificate is a CA certificate \
             (basicConstraints CA:TRUE, as openssl req -x509 makes by default) used as the server's own, which \
             TLS clients refuse (CaUsedAsEndEntity): make a server certificate signed by a CA, with \
             basicConstraints CA:FALSE and a subjectAltName for each host clients use (gamesolver-server \
             dev-cert --out-dir DIR writes one and its CA), and give that CA with --ca-cert PEM\n"
        )
    );
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
            Some(2) => assert!(
                last.starts_with(&alert)
                    && last.contains("give one that its --tls-client-ca signed with --client-cert PEM and --client-key PEM (received fatal alert: "),
                "{why}: {stderr}"
            ),
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

const SERVER: &str = env!("CARGO_BIN_EXE_gamesolver-server");

/// Runs `gamesolver-server dev-cert` with `args`; returns (exit code, stdout, stderr).
fn dev_cert(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(SERVER).arg("dev-cert").args(args).stdin(Stdio::null()).output().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dev_cert_writes_what_its_printed_command_lines_serve_with_mutual_tls() {
    let scratch = tempfile::tempdir().unwrap();
    // A directory that does not exist yet, parents and all.
    let dir = scratch.path().join("certs/dev");
    let dir_str = dir.to_str().unwrap();
    let (code, stdout, stderr) = dev_cert(&["--out-dir", dir_str, "--host", "solver.example"]);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert!(
        lines[0].starts_with(&format!(
            "wrote a CA (ca.pem, ca.key), a server certificate for localhost, 127.0.0.1, ::1, solver.example \
             (server.pem, server.key) and a client certificate (client.pem, client.key) to {dir_str}, valid until "
        )),
        "{stdout}"
    );
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    assert_eq!(
        lines[1],
        format!(
            "gamesolver-server --listen 127.0.0.1:50051 --tls-cert {} --tls-key {} --tls-client-ca {}",
            path("server.pem"),
            path("server.key"),
            path("ca.pem")
        )
    );
    assert_eq!(
        lines[2],
        format!(
            "gamesolver-client solve examples/problems.jsonl --server https://127.0.0.1:50051 --ca-cert {} \
             --client-cert {} --client-key {}",
            path("ca.pem"),
            path("client.pem"),
            path("client.key")
        )
    );
    #[cfg(unix)]
    for key in ["ca.key", "server.key", "client.key"] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join(key)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{key}");
    }

    // The two lines as printed, on a free port: the server takes the files at start-up
    // (its own certificate check included), and the client reaches it with mutual TLS.
    let words = |line: &str| shlex::split(line).unwrap();
    let server_line = words(lines[1]);
    assert_eq!(server_line[..3], ["gamesolver-server", "--listen", "127.0.0.1:50051"]);
    let flags: Vec<&str> = server_line[3..].iter().map(String::as_str).collect();
    let server = ServerProcess::start("127.0.0.1:0", &flags);
    let root = env!("CARGO_MANIFEST_DIR");
    let client_line: Vec<String> = words(lines[2])
        .into_iter()
        .skip(1)
        .map(|word| match word.as_str() {
            "examples/problems.jsonl" => format!("{root}/examples/problems.jsonl"),
            "https://127.0.0.1:50051" => format!("https://{}", server.addr),
            _ => word,
        })
        .collect();
    let out = scratch.path().join("out.jsonl");
    let run = tokio::task::spawn_blocking({
        let out = out.clone();
        move || {
            Command::new(CLIENT)
                .args(&client_line)
                .args(["--quiet", "-o"])
                .arg(out)
                .stdin(Stdio::null())
                .output()
        }
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    assert_all_correct(std::path::Path::new(&format!("{root}/examples/problems.jsonl")), &out);
    drop(server);

    // A second run leaves the first's files alone unless told.
    let before = std::fs::read(dir.join("ca.pem")).unwrap();
    let (code, stdout, stderr) = dev_cert(&["--out-dir", dir_str]);
    assert_eq!((code, stdout.as_str()), (Some(1), ""));
    assert_eq!(
        stderr,
        format!(
            "gamesolver-server: ca.pem, ca.key, server.pem, server.key, client.pem, client.key already in \
             {dir_str}: --force overwrites them\n"
        )
    );
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), before);
    let (code, _, stderr) = dev_cert(&["--out-dir", dir_str, "--force"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_ne!(std::fs::read(dir.join("ca.pem")).unwrap(), before, "a new CA");
}

//! `gamesolver-client` over TLS and mutual TLS: certificates made at run time (rcgen), a
//! TLS server in this process (tonic's `ServerTlsConfig`), the client binary.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::{assert_all_correct, generate};
use gamesolver::games::{stone_game_iv, StoneGameIvTable};
use gamesolver::pb::game_solver_service_server::GameSolverServiceServer;
use gamesolver::service::{GameSolverService, Solver, SolverConfig};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

mod common;

const CLIENT: &str = env!("CARGO_BIN_EXE_gamesolver-client");

/// A certificate authority that writes its certificate and the ones it signs as PEM files.
struct Authority {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Authority {
    fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Authority { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (IP addresses become IP SANs): (certificate, key) PEM.
    fn sign(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|&n| n.to_owned()).collect();
        let cert = CertificateParams::new(names).unwrap().signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes a certificate for `names` as `{stem}.pem` and `{stem}.key` in `dir`.
    fn write(&self, dir: &Path, stem: &str, names: &[&str]) {
        let (cert, key) = self.sign(names);
        std::fs::write(dir.join(format!("{stem}.pem")), cert).unwrap();
        std::fs::write(dir.join(format!("{stem}.key")), key).unwrap();
    }
}

/// Serves the solver over TLS on 127.0.0.1:0 with `tls`; returns the https URL.
async fn serve_tls(tls: ServerTlsConfig) -> String {
    let table = Arc::new(StoneGameIvTable::new(stone_game_iv::DEFAULT_LIMIT));
    let service = GameSolverService::new(Arc::new(Solver::new(table, SolverConfig::default())));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let server = Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(GameSolverServiceServer::new(service))
        .serve_with_incoming(TcpListenerStream::new(listener));
    // Ends with the test's runtime.
    tokio::spawn(server);
    url
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
fn pki(dir: &Path) -> (Authority, Authority) {
    let (ca, other) = (Authority::new(), Authority::new());
    std::fs::write(dir.join("ca.pem"), ca.cert_pem()).unwrap();
    ca.write(dir, "server", &["127.0.0.1", "localhost"]);
    ca.write(dir, "client", &["client"]);
    other.write(dir, "stranger", &["stranger"]);
    (ca, other)
}

fn server_identity(dir: &Path) -> Identity {
    Identity::from_pem(
        std::fs::read(dir.join("server.pem")).unwrap(),
        std::fs::read(dir.join("server.key")).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_is_served_to_a_client_that_trusts_the_ca_and_refused_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    pki(dir);
    generate(&dir.join("in.jsonl"), 2_000, 21);
    let url = serve_tls(ServerTlsConfig::new().identity(server_identity(dir))).await;

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
    let ca = Certificate::from_pem(std::fs::read(dir.join("ca.pem")).unwrap());
    let url = serve_tls(ServerTlsConfig::new().identity(server_identity(dir)).client_ca_root(ca)).await;
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
        let (code, stderr) = solve(dir, &url, &flags).await;
        assert_eq!(code, Some(2), "{why}: {stderr}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with(&format!("gamesolver-client: server {url} failed for ")), "{why}: {stderr}");
    }
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

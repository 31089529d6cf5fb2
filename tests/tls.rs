//! TLS and mutual TLS on the gRPC port, and replacing certificates while serving.

use crate::common;
use crate::production;

use std::path::Path;
use std::sync::Arc;

use common::TestServer;
use gamesolver::pb::{self, game_solver_service_client::GameSolverServiceClient};
use gamesolver::server::{ReloadableTls, ServerConfig, TlsSettings};
use production::{client_tls, metrics_listen, settled, write_ca, write_leaf, Leaf, TestCa};
use tonic::transport::{Channel, ClientTlsConfig};

fn problem() -> pb::SolveRequest {
    let game = pb::problem::Game::StoneGameIv(pb::StoneGameIv { n: 2 });
    pb::SolveRequest { problem: Some(pb::Problem { id: "p".into(), game: Some(game) }), winner_only: false }
}

/// Starts a server with the TLS files in `dir` (`server.pem`, `server.key`, and
/// `client-ca.pem` when `mutual`), plus a metrics endpoint.
async fn start(dir: &Path, mutual: bool) -> (TestServer, Arc<ReloadableTls>, std::net::SocketAddr) {
    let settings = TlsSettings {
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        client_ca: mutual.then(|| dir.join("client-ca.pem")),
    };
    let mut config = ServerConfig { tls: settings.into(), ..ServerConfig::default() };
    config.observability.metrics_listen = Some(metrics_listen());
    let server = TestServer::start(config).await;
    let (tls, metrics) = (server.tls.clone().expect("serving TLS"), server.metrics_addr());
    (server, tls, metrics)
}

/// One `Solve` over a fresh TLS connection; the error says where it failed.
async fn solve_over(server: &TestServer, tls: ClientTlsConfig) -> Result<pb::Solution, String> {
    let channel = Channel::from_shared(format!("https://{}", server.addr))
        .unwrap()
        .tls_config(tls)
        .map_err(|err| format!("config: {err}"))?
        .connect()
        .await
        .map_err(|err| format!("connect: {err:?}"))?;
    solve_on(channel).await
}

async fn solve_on(channel: Channel) -> Result<pb::Solution, String> {
    let response =
        GameSolverServiceClient::new(channel).solve(problem()).await.map_err(|s| format!("call: {s}"))?;
    Ok(response.into_inner().solution.expect("a solution"))
}

async fn handshake_failures(metrics: std::net::SocketAddr, expected: f64) -> f64 {
    settled(metrics, "gamesolver_tls_handshake_failures_total", expected).await.unwrap()
}

#[tokio::test]
async fn a_client_trusting_the_ca_is_served_and_others_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, stranger) = (TestCa::new("test ca"), TestCa::new("stranger ca"));
    write_leaf(dir.path(), "server", &ca.server("server"));
    let (server, _, metrics) = start(dir.path(), false).await;

    let answer = solve_over(&server, client_tls(&ca, None)).await.unwrap();
    assert_eq!(answer.winner, pb::Winner::Bob as i32);
    // Health is on the same port under the same rules.
    let channel = Channel::from_shared(format!("https://{}", server.addr))
        .unwrap()
        .tls_config(client_tls(&ca, None))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let health = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest { service: String::new() })
        .await
        .unwrap();
    assert_eq!(
        health.into_inner().status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
    assert_eq!(handshake_failures(metrics, 0.0).await, 0.0);

    let refused = solve_over(&server, client_tls(&stranger, None)).await.unwrap_err();
    assert!(refused.starts_with("connect: "), "{refused}");
    assert_eq!(handshake_failures(metrics, 1.0).await, 1.0);

    // Plaintext HTTP/2 to a TLS port: the server reads a ClientHello that is not one.
    let plaintext = Channel::from_shared(server.url()).unwrap().connect().await;
    let refused = match plaintext {
        Err(err) => format!("connect: {err}"),
        Ok(channel) => solve_on(channel).await.unwrap_err(),
    };
    assert!(refused.starts_with("connect: ") || refused.starts_with("call: "), "{refused}");
    assert_eq!(handshake_failures(metrics, 2.0).await, 2.0);
}

#[tokio::test]
async fn mutual_tls_requires_a_client_certificate_from_the_client_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, clients, stranger) =
        (TestCa::new("test ca"), TestCa::new("client ca"), TestCa::new("stranger ca"));
    write_leaf(dir.path(), "server", &ca.server("server"));
    write_ca(dir.path(), "client-ca", &clients);
    let (server, _, metrics) = start(dir.path(), true).await;

    let member: Leaf = clients.client("member");
    assert_eq!(solve_over(&server, client_tls(&ca, Some(&member))).await.unwrap().id, "p");
    assert_eq!(handshake_failures(metrics, 0.0).await, 0.0);

    // TLS 1.3 clients finish their side before the server checks the certificate, so the
    // refusal may surface on the first call rather than at connect.
    let anonymous = solve_over(&server, client_tls(&ca, None)).await;
    assert!(anonymous.is_err(), "a client without a certificate was served");
    assert_eq!(handshake_failures(metrics, 1.0).await, 1.0);

    let outsider = stranger.client("outsider");
    let foreign = solve_over(&server, client_tls(&ca, Some(&outsider))).await;
    assert!(foreign.is_err(), "a client with another CA's certificate was served");
    assert_eq!(handshake_failures(metrics, 2.0).await, 2.0);
}

#[tokio::test]
async fn a_reload_serves_new_connections_with_the_new_certificate_and_a_bad_one_keeps_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (TestCa::new("old ca"), TestCa::new("new ca"));
    write_leaf(dir.path(), "server", &old_ca.server("old server"));
    let (server, tls, _) = start(dir.path(), false).await;

    let before = Channel::from_shared(format!("https://{}", server.addr))
        .unwrap()
        .tls_config(client_tls(&old_ca, None))
        .unwrap()
        .connect()
        .await
        .unwrap();
    assert!(solve_over(&server, client_tls(&new_ca, None)).await.is_err());

    // A half-written file: the reload fails and the old certificate stays.
    std::fs::write(dir.path().join("server.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    let err = tls.reload().unwrap_err().to_string();
    assert!(err.starts_with(&format!("{}: ", dir.path().join("server.pem").display())), "{err}");
    assert!(solve_over(&server, client_tls(&old_ca, None)).await.is_ok());

    write_leaf(dir.path(), "server", &new_ca.server("new server"));
    let loaded = tls.reload().unwrap();
    assert_eq!(loaded.cert.subject, "CN=new server");
    assert!(solve_over(&server, client_tls(&new_ca, None)).await.is_ok());
    assert!(solve_over(&server, client_tls(&old_ca, None)).await.is_err());
    // A connection made before the reload keeps its session.
    assert!(solve_on(before).await.is_ok());
}

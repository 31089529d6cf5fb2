//! The server's bounds against hostile or careless clients: each refuses with the code and
//! message the README promises, and another client is served meanwhile.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{limits, served, solve, stream_request, sum, TestServer};
use gamesolver::pb;
use gamesolver::seconds::{Seconds, Timeout};
use gamesolver::server::ServerConfig;
use gamesolver::solver::SolverConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// The bytes every HTTP/2 client sends first.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty SETTINGS frame.
const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];
/// A PING frame with an 8-byte payload.
const PING: &[u8] = &[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];

/// Upper bound on any wait for the server to act; only reached when a bound is broken.
const PATIENCE: Duration = Duration::from_secs(20);

/// Reads from `socket` until the server closes it (end-of-file or reset), within `PATIENCE`.
async fn closed_by_server(socket: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(PATIENCE, async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the server kept the connection open");
}

/// Opens a `SolveStream` call and has one answer back, so the call is surely in flight.
async fn open_stream(
    client: &mut common::Client,
) -> (mpsc::Sender<pb::SolveStreamRequest>, tonic::Streaming<pb::SolveStreamResponse>) {
    let (send, requests) = mpsc::channel(4);
    let mut answers = client.solve_stream(ReceiverStream::new(requests)).await.unwrap().into_inner();
    send.send(stream_request(sum("first", "11"))).await.unwrap();
    assert!(answers.message().await.unwrap().is_some());
    (send, answers)
}

#[tokio::test]
async fn beyond_a_clients_connection_share_a_connection_is_closed_and_other_clients_are_served() {
    let config = limits(|limits| limits.max_connections = 2);
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    assert!(solve(&mut client, sum("a", "11")).await.is_ok());
    let silent = TcpStream::connect(server.addr).await.unwrap();
    // This client holds the whole cap: its third connection is closed at once.
    let mut third = TcpStream::connect(server.addr).await.unwrap();
    // The server may have closed it before these are written.
    let _ = third.write_all(PREFACE).await;
    let _ = third.write_all(SETTINGS).await;
    closed_by_server(&mut third).await;
    // The connection already open is served meanwhile, and so is another client, within
    // its fair share: the silent connection, idle longest, makes way for it.
    assert!(solve(&mut client, sum("b", "11")).await.is_ok());
    let mut other = server.client_from([127, 0, 0, 2]).await;
    assert!(solve(&mut other, sum("c", "11")).await.is_ok());
    drop(silent);
}

#[tokio::test]
async fn a_connection_without_a_preface_is_closed_after_the_handshake_timeout() {
    let config = limits(|limits| limits.handshake_timeout = Seconds(Duration::from_millis(200)));
    let server = TestServer::start(config).await;
    let mut silent = TcpStream::connect(server.addr).await.unwrap();
    // Bytes that could still be the preface, then silence: within the handshake timeout
    // neither HTTP/2 nor HTTP/1.1 has begun.
    let mut garbage = TcpStream::connect(server.addr).await.unwrap();
    garbage.write_all(b"PRI * HTTP/2.0").await.unwrap();
    served(&server).await;
    closed_by_server(&mut silent).await;
    closed_by_server(&mut garbage).await;
    served(&server).await;
}

#[tokio::test]
async fn a_connection_that_only_answers_pings_is_closed_when_idle() {
    let config = limits(|limits| limits.connection_idle_timeout = Timeout(Some(Duration::from_millis(300))));
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    let mut pinger = TcpStream::connect(server.addr).await.unwrap();
    pinger.write_all(PREFACE).await.unwrap();
    pinger.write_all(SETTINGS).await.unwrap();
    let pings = async {
        for _ in 0..400 {
            if pinger.write_all(PING).await.is_err() {
                return;
            }
            let mut buf = [0u8; 4096];
            match tokio::time::timeout(Duration::from_millis(50), pinger.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => return,
                Ok(Ok(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
                Err(_) => {}
            }
        }
        panic!("the server kept a PING-only connection open");
    };
    tokio::time::timeout(PATIENCE, pings).await.expect("closed within the patience");
    // The client's own idle connection was closed too; its channel reconnects.
    let after = solve(&mut client, sum("after", "11")).await;
    assert!(after.is_ok(), "{after:?}");
}

#[tokio::test]
async fn beyond_max_calls_a_call_is_refused_at_once_but_health_is_answered() {
    let config = limits(|limits| limits.max_calls = 2);
    let server = TestServer::start(config).await;
    let mut first = server.client_from([127, 0, 0, 2]).await;
    let mut second = server.client_from([127, 0, 0, 3]).await;
    let held = [open_stream(&mut first).await, open_stream(&mut second).await];
    // Two clients hold a call each, the limit: a third client's call is refused, as it
    // would hold more than its fair share (2 / 3) of the limit.
    let mut third = server.client().await;
    let status = solve(&mut third, sum("x", "11")).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "server overloaded: 2 calls in flight, its limit; retry later");
    let mut health = HealthClient::new(server.channel().await);
    let serving = health.check(HealthCheckRequest { service: String::new() }).await.unwrap();
    assert_eq!(serving.into_inner().status, 1, "SERVING");
    // The calls in flight are still served, and a slot frees when one ends.
    let [(send, mut answers), other] = held;
    send.send(stream_request(sum("second", "11"))).await.unwrap();
    assert_eq!(answers.message().await.unwrap().unwrap().solution.unwrap().id, "second");
    drop(send);
    assert!(answers.message().await.unwrap().is_none());
    assert!(solve(&mut third, sum("x", "11")).await.is_ok());
    drop(other);
}

#[tokio::test]
async fn beyond_max_calls_per_connection_a_call_is_refused_and_other_connections_are_served() {
    let config = limits(|limits| limits.max_calls_per_connection = 1);
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    let _held = open_stream(&mut client).await;
    let status = solve(&mut client, sum("x", "11")).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        status.message(),
        "too many calls in flight on this connection (limit 1); retry later or open another connection"
    );
    served(&server).await;
}

#[tokio::test]
async fn a_stream_that_sends_nothing_ends_with_deadline_exceeded() {
    let solver = SolverConfig {
        stream_idle_timeout: Timeout(Some(Duration::from_millis(200))),
        ..SolverConfig::default()
    };
    let server = TestServer::start(ServerConfig { solver, ..ServerConfig::default() }).await;
    let expected =
        "stream idle: the client sent nothing for 200ms while the server had nothing left to answer";
    let mut client = server.client().await;

    // Silent after one answered request.
    let (_send, mut answers) = open_stream(&mut client).await;
    let status = tokio::time::timeout(PATIENCE, answers.message()).await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), expected);

    // Silent from the start.
    let (_send, requests) = mpsc::channel::<pb::SolveBatchStreamRequest>(1);
    let status = async {
        let mut answers = client.solve_batch_stream(ReceiverStream::new(requests)).await?.into_inner();
        answers.message().await
    };
    let status = tokio::time::timeout(PATIENCE, status).await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), expected);
    served(&server).await;
}

#[tokio::test]
async fn a_compression_bomb_is_refused_and_the_budget_bounds_inflated_bytes() {
    use tonic::codec::CompressionEncoding::Gzip;
    // Inflates past the message limit (64 MiB): refused while inflating.
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await.send_compressed(Gzip);
    let bomb = sum("bomb", &"1".repeat(80 << 20));
    let status = solve(&mut client, bomb).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "request message inflates to more than the limit of 67108864 bytes");
    served(&server).await;

    let config = limits(|limits| limits.max_request_bytes_in_flight = 4 << 20);
    let server = TestServer::start(config).await;
    let mut client = server.client().await.send_compressed(Gzip);

    // Inflates past what one client may hold (the whole 4 MiB budget here): refused too.
    let status = solve(&mut client, sum("big", &"1".repeat(8 << 20))).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(
        status.message(),
        "request message inflates past the 4194304 bytes of request memory one client may hold"
    );
    // The same message uncompressed waits for the whole budget and is answered.
    let mut plain = server.client().await;
    assert!(solve(&mut plain, sum("big", &"1".repeat(8 << 20))).await.is_ok());
    assert!(solve(&mut client, sum("small", "25??")).await.is_ok());
}

/// A message takes the request memory it decodes to, not its bytes: a stone or a pile
/// below 128 is one byte on the wire and 8 decoded. One whose decoded size is past what a
/// client may hold (here the whole budget) is refused before it is decoded; one within
/// it is answered.
#[tokio::test]
async fn a_message_is_charged_what_it_decodes_to_not_its_bytes() {
    let config = limits(|limits| {
        limits.max_request_bytes_in_flight = 16 << 20;
        limits.max_message_bytes = 4 << 20;
    });
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    // 3 MB on the wire, 6 MB counted as bytes and a copy, 24 MB decoded.
    let small = vec![1u64; 3_000_000];
    let nim = |id: &str, piles: Vec<u64>| pb::Problem {
        id: id.into(),
        game: Some(pb::problem::Game::NimSquare(pb::NimSquare { piles })),
    };
    let refused = |decoded: usize| {
        format!("request message decodes to {decoded} bytes, past the 16777216 bytes of request memory one client may hold")
    };
    let one = std::mem::size_of::<pb::Problem>() + "big".len() + 8 * 3_000_000;
    for problem in [common::ix("big", &small), nim("big", small.clone())] {
        let status = solve(&mut client, problem).await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert_eq!(status.message(), refused(one));
    }
    // The same stones in three problems of a batch.
    let problems = (0..3).map(|i| common::ix(&format!("b{i}"), &small[..1_000_000])).collect();
    let batch = pb::SolveBatchRequest { problems, winner_only: true };
    let status = client.solve_batch(batch).await.unwrap_err();
    assert_eq!(status.message(), refused(3 * (std::mem::size_of::<pb::Problem>() + 2 + 8_000_000)));
    // A million stones, 9 MB with their bytes, fit; so does a bystander.
    let answer = solve(&mut client, common::ix("fits", &small[..1_000_000])).await.unwrap();
    assert_eq!(answer.id, "fits");
    served(&server).await;
}

#[test]
fn sigterm_with_only_idle_peers_exits_at_once_and_says_no_call_was_dropped() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0", "--shutdown-timeout", "60", "--iv-precompute", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line)
        .unwrap();
    let addr = line.trim().strip_prefix("listening on ").unwrap().to_owned();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // One peer that never sends its preface, one that made a call and is now idle.
    let _silent = std::net::TcpStream::connect(&addr).unwrap();
    let _client = runtime.block_on(async {
        let mut client =
            pb::game_solver_service_client::GameSolverServiceClient::connect(format!("http://{addr}"))
                .await
                .unwrap();
        solve(&mut client, sum("a", "11")).await.unwrap();
        client
    });
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-s", "TERM", &pid]).status().unwrap().success());
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > PATIENCE {
            let _ = child.kill();
            panic!("the server waited on idle peers (its grace is 60 s)");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    let mut log = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut log).unwrap();
    assert!(log.contains("calls_in_flight=0"), "{log}");
    assert!(!log.contains("dropping the calls still in flight"), "{log}");
}

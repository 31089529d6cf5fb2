//! `/metrics`: every series the README lists, with exact values after real calls.

use crate::common;
use crate::production;

use std::sync::Arc;

use common::{limits, TestServer};
use futures::StreamExt;
use gamesolver::games::GameKind;
use gamesolver::pb::{self, problem::Game};
use gamesolver::server::ServerConfig;
use production::{metrics_listen, scrape, series, settled};
use prost::Message;
use tonic::Code;

const SERVICE: &str = "gamesolver.v1.GameSolverService";

fn sum(num: &str) -> pb::Problem {
    pb::Problem { id: num.into(), game: Some(Game::SumGame(pb::SumGame { num: num.into() })) }
}

fn iv(n: u64) -> pb::Problem {
    pb::Problem { id: n.to_string(), game: Some(Game::StoneGameIv(pb::StoneGameIv { n })) }
}

fn ix(stones: &[u64]) -> pb::Problem {
    pb::Problem {
        id: "ix".into(),
        game: Some(Game::StoneGameIx(pb::StoneGameIx { stones: stones.to_vec() })),
    }
}

/// The bytes a message takes on the wire: the 5-byte gRPC frame header and the message.
fn framed(message: &impl Message) -> f64 {
    (5 + message.encoded_len()) as f64
}

fn calls(method: &str, code: &str) -> String {
    format!("gamesolver_calls_total{{service=\"{SERVICE}\",method=\"{method}\",code=\"{code}\"}}")
}

async fn start(config: ServerConfig) -> (TestServer, std::net::SocketAddr) {
    let mut config = config;
    config.observability.metrics_listen = Some(metrics_listen());
    let server = TestServer::start(config).await;
    let addr = server.metrics_addr();
    (server, addr)
}

#[tokio::test]
async fn calls_problems_bytes_and_the_table_are_counted_exactly() {
    let mut config = ServerConfig::default();
    config.tables.get_mut(GameKind::StoneGameIv).unwrap().max_n = 1_000_000;
    let (server, metrics) = start(config).await;
    let table = Arc::clone(&server.tables.iv);
    let grundy = Arc::clone(&server.tables.grundy);
    let mut client = server.client().await;

    let solved = pb::SolveRequest { problem: Some(sum("25??")), winner_only: false };
    let invalid = pb::SolveRequest { problem: Some(sum("2a")), winner_only: false };
    client.solve(solved.clone()).await.unwrap();
    assert_eq!(client.solve(invalid.clone()).await.unwrap_err().code(), Code::InvalidArgument);
    let no_game = pb::Problem { id: "none".into(), game: None };
    let batch = vec![sum("11"), iv(7), no_game, iv(2_000_000)];
    let solutions =
        client.solve_batch(pb::SolveBatchRequest { problems: batch, winner_only: false }).await.unwrap();
    assert_eq!(solutions.into_inner().solutions.len(), 4);
    let stream = futures::stream::iter(
        [ix(&[1, 2]), ix(&[3])].map(|p| pb::SolveStreamRequest { problem: Some(p), winner_only: false }),
    );
    let answers: Vec<_> = client.solve_stream(stream).await.unwrap().into_inner().collect().await;
    assert_eq!(answers.len(), 2);
    let batches = futures::stream::iter([pb::SolveBatchStreamRequest {
        problems: vec![iv(5), iv(6)],
        winner_only: true,
    }]);
    let answers: Vec<_> = client.solve_batch_stream(batches).await.unwrap().into_inner().collect().await;
    assert!(answers.iter().all(Result::is_ok));

    // A path no service has: counted, but under "unknown", so clients cannot grow the labels.
    let mut grpc = tonic::client::Grpc::new(server.channel().await);
    grpc.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/gamesolver.v1.GameSolverService/NoSuchMethod");
    let codec = tonic_prost::ProstCodec::<pb::SolveRequest, pb::SolveResponse>::default();
    let unknown = grpc.unary(tonic::Request::new(solved.clone()), path, codec).await.unwrap_err();
    assert_eq!(unknown.code(), Code::Unimplemented);

    let text = scrape(metrics).await;
    let value = |name: &str| series(&text, name);
    assert_eq!(value(&calls("Solve", "OK")), Some(1.0), "{text}");
    assert_eq!(value(&calls("Solve", "INVALID_ARGUMENT")), Some(1.0));
    assert_eq!(value(&calls("SolveBatch", "OK")), Some(1.0));
    assert_eq!(value(&calls("SolveStream", "OK")), Some(1.0));
    assert_eq!(value(&calls("SolveBatchStream", "OK")), Some(1.0));
    assert_eq!(
        value("gamesolver_calls_total{service=\"unknown\",method=\"unknown\",code=\"UNIMPLEMENTED\"}"),
        Some(1.0)
    );

    let problems = |game: &str, outcome: &str| {
        value(&format!("gamesolver_problems_total{{game=\"{game}\",outcome=\"{outcome}\"}}"))
    };
    assert_eq!(problems("sum_game", "solved"), Some(2.0));
    assert_eq!(problems("sum_game", "INVALID_CHARACTER"), Some(1.0));
    assert_eq!(problems("stone_game_iv", "solved"), Some(3.0));
    assert_eq!(problems("stone_game_iv", "PILE_ABOVE_LIMIT"), Some(1.0));
    assert_eq!(problems("none", "NO_GAME"), Some(1.0));
    assert_eq!(problems("stone_game_ix", "solved"), Some(2.0));

    let method = |name: &str, rpc: &str| format!("{name}{{service=\"{SERVICE}\",method=\"{rpc}\"}}");
    assert_eq!(
        value(&method("gamesolver_received_bytes_total", "Solve")),
        Some(framed(&solved) + framed(&invalid))
    );
    assert_eq!(value(&method("gamesolver_call_duration_seconds_count", "Solve")), Some(2.0));
    assert_eq!(value(&method("gamesolver_calls_in_flight", "Solve")), Some(0.0));
    assert_eq!(value(&method("gamesolver_calls_in_flight", "SolveStream")), Some(0.0));

    assert_eq!(value("gamesolver_table_covered{game=\"stone_game_iv\"}"), Some(table.covered() as f64));
    assert_eq!(
        value("gamesolver_table_extension_seconds_count{game=\"stone_game_iv\",cause=\"request\"}"),
        Some(1.0)
    );
    assert_eq!(value("gamesolver_table_covered{game=\"nim_square\"}"), Some(grundy.covered() as f64));
    // No Nim Square call asked for more than its table held.
    assert_eq!(
        value("gamesolver_table_extension_seconds_count{game=\"nim_square\",cause=\"request\"}"),
        None
    );
    assert_eq!(value("gamesolver_connections_total"), Some(2.0));
    assert_eq!(value("gamesolver_connections_open"), Some(2.0));
    let build = format!("gamesolver_build_info{{version=\"{}\"}}", env!("CARGO_PKG_VERSION"));
    assert_eq!(value(&build), Some(1.0));
    assert!(text.ends_with("# EOF\n"));
}

#[tokio::test]
async fn a_code_sent_in_the_trailers_and_a_cancelled_stream_are_counted() {
    let (server, metrics) = start(limits(|limits| limits.max_message_bytes = 1024)).await;
    let mut client = server.client().await;

    // Over the message limit: in the headers for a unary call, in the trailers of a stream.
    let big = pb::SolveRequest { problem: Some(sum(&"1".repeat(2000))), winner_only: false };
    assert_eq!(client.solve(big.clone()).await.unwrap_err().code(), Code::ResourceExhausted);
    let stream = futures::stream::iter([pb::SolveStreamRequest { problem: big.problem, winner_only: false }]);
    let mut answers = client.solve_stream(stream).await.unwrap().into_inner();
    assert_eq!(answers.next().await.unwrap().unwrap_err().code(), Code::ResourceExhausted);

    // A stream the client walks away from after one answer.
    let (requests, receiver) = tokio::sync::mpsc::channel(1);
    let request = pb::SolveStreamRequest { problem: Some(sum("12")), winner_only: false };
    requests.send(request).await.unwrap();
    let mut answers = client
        .solve_stream(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await
        .unwrap()
        .into_inner();
    assert!(answers.message().await.unwrap().is_some());
    drop(answers);
    drop(requests);

    assert_eq!(settled(metrics, &calls("SolveStream", "CANCELLED"), 1.0).await, Some(1.0));
    let text = scrape(metrics).await;
    assert_eq!(series(&text, &calls("Solve", "RESOURCE_EXHAUSTED")), Some(1.0), "{text}");
    assert_eq!(series(&text, &calls("SolveStream", "RESOURCE_EXHAUSTED")), Some(1.0));
    let in_flight = format!("gamesolver_calls_in_flight{{service=\"{SERVICE}\",method=\"SolveStream\"}}");
    assert_eq!(series(&text, &in_flight), Some(0.0));
}

#[tokio::test]
async fn only_metrics_is_served_on_the_metrics_port() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_server, metrics) = start(ServerConfig::default()).await;
    let mut stream = tokio::net::TcpStream::connect(metrics).await.unwrap();
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.0 404"), "{response}");
}

/// Opens a unary `Solve` on `h2` whose message announces 60 MiB and sends its first
/// byte: the call stays before its response headers until the message is complete.
fn begun_solve(
    h2: &mut h2::client::SendRequest<bytes::Bytes>,
    addr: std::net::SocketAddr,
) -> h2::SendStream<bytes::Bytes> {
    let request = http::Request::post(format!("http://{addr}/{SERVICE}/Solve"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (_response, mut body) = h2.send_request(request, false).unwrap();
    let mut message = vec![0u8];
    message.extend_from_slice(&(60u32 << 20).to_be_bytes());
    message.push(0x0a);
    body.send_data(message.into(), false).unwrap();
    body
}

#[tokio::test]
async fn a_call_reset_before_its_response_headers_is_counted_cancelled_and_leaves_the_gauge() {
    // A 4 MiB request budget, which one begun 60 MiB message holds whole, and no idle
    // timeout to end the stalled calls.
    let mut config = limits(|limits| limits.max_request_bytes_in_flight = 4 << 20);
    config.solver.stream_idle_timeout = gamesolver::seconds::Timeout(None);
    let (server, metrics) = start(config).await;
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let method = |name: &str| format!("{name}{{service=\"{SERVICE}\",method=\"Solve\"}}");
    let (in_flight, received) =
        (method("gamesolver_calls_in_flight"), method("gamesolver_received_bytes_total"));

    // The first call takes the whole budget once its 6 bytes are read; the second, read
    // after it, waits for room in the layer below the metrics, with no response headers
    // and without reading its body, which would see the reset and answer it.
    let mut holder = begun_solve(&mut h2, server.addr);
    assert_eq!(settled(metrics, &received, 6.0).await, Some(6.0));
    let mut waiter = begun_solve(&mut h2, server.addr);
    assert_eq!(settled(metrics, &received, 12.0).await, Some(12.0));
    assert_eq!(series(&scrape(metrics).await, &in_flight), Some(2.0));

    // hyper drops the waiting call's future at its reset: counted once, as CANCELLED.
    waiter.send_reset(h2::Reason::CANCEL);
    assert_eq!(settled(metrics, &calls("Solve", "CANCELLED"), 1.0).await, Some(1.0));
    let text = scrape(metrics).await;
    assert_eq!(series(&text, &in_flight), Some(1.0), "{text}");
    assert_eq!(series(&text, &method("gamesolver_call_duration_seconds_count")), Some(1.0), "{text}");

    holder.send_reset(h2::Reason::CANCEL);
    assert_eq!(settled(metrics, &in_flight, 0.0).await, Some(0.0));
    let text = scrape(metrics).await;
    assert_eq!(series(&text, &method("gamesolver_call_duration_seconds_count")), Some(2.0), "{text}");
}

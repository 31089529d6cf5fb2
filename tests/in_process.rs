//! Connections opened in the server's own process (`Server::in_process`, the bulk
//! client's embedded server): past the socket they are connections like any other, under
//! the same accept loop, preface check, per-client bounds and metrics.

use std::time::Duration;

use gamesolver::pb::game_solver_service_client::GameSolverServiceClient;
use gamesolver::server::{InProcess, Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::common::{self, iv};
use crate::production::{metrics_listen, scrape, series};

/// A server on 127.0.0.1:0 with its in-process handle, and what stops it.
async fn start(mut config: ServerConfig) -> (Server, InProcess, oneshot::Sender<()>, oneshot::Receiver<()>) {
    config.listen = ServerConfig::ephemeral().listen;
    let mut server = Server::bind(config).await.expect("the test server starts");
    let in_process = server.in_process();
    let (stop, stopped) = oneshot::channel();
    (server, in_process, stop, stopped)
}

fn run(server: Server, stopped: oneshot::Receiver<()>) -> JoinHandle<()> {
    tokio::spawn(async move {
        server
            .run(async move {
                let _ = stopped.await;
            })
            .await
            .expect("the server runs")
    })
}

/// A channel whose one connection is a pipe from `in_process`; the URL is never dialled.
/// The HTTP/2 handshake fails when the server has closed the pipe first.
async fn try_channel(in_process: &InProcess) -> Result<Channel, tonic::transport::Error> {
    let in_process = in_process.clone();
    let connector = tower::service_fn(move |_: http::Uri| {
        let in_process = in_process.clone();
        async move { in_process.connect().await.map(hyper_util::rt::TokioIo::new) }
    });
    tonic::transport::Endpoint::from_static("http://in-process.invalid")
        .connect_with_connector(connector)
        .await
}

async fn channel(in_process: &InProcess) -> Channel {
    try_channel(in_process).await.expect("an in-process connection")
}

/// The HTTP/2 client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Opens a pipe, writes `first` on it and checks that the server closes it before its
/// handshake deadline without writing a byte; returns how the write went (`BrokenPipe`
/// when the server had already dropped its end).
async fn closed_without_a_byte(in_process: &InProcess, first: &[u8]) -> std::io::Result<()> {
    let mut pipe = in_process.connect().await.unwrap();
    let written = pipe.write_all(first).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), pipe.read_to_end(&mut answer)).await;
    assert_eq!(read.expect("closed before the handshake deadline").unwrap(), 0, "{answer:?}");
    written
}

/// Solves one problem over a new pipe: the error, if the server closed the pipe (at
/// once, as it closes a refused TCP connection), whether at the HTTP/2 handshake or at the
/// call, which is the race of who writes first.
async fn solve_over_a_new_pipe(in_process: &InProcess) -> Result<(), String> {
    let channel = try_channel(in_process).await.map_err(|err| format!("handshake: {err:?}"))?;
    let mut client = GameSolverServiceClient::new(channel);
    match common::solve(&mut client, iv("piped", 5)).await {
        Ok(solution) => {
            assert_eq!(solution.id, "piped");
            Ok(())
        }
        Err(status) => Err(format!("call: {status:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_over_a_pipe_is_answered_and_counted_as_a_connection() {
    let mut config = ServerConfig::default();
    config.observability.metrics_listen = Some(metrics_listen());
    let (server, in_process, stop, stopped) = start(config).await;
    let metrics = server.metrics_addr().unwrap();
    let task = run(server, stopped);

    let mut client = GameSolverServiceClient::new(channel(&in_process).await);
    let solution = common::solve(&mut client, iv("piped", 7)).await.unwrap();
    assert_eq!(solution.id, "piped");
    assert!(!solution.alice_wins, "7 is a losing position of Stone Game IV");
    let scraped = scrape(metrics).await;
    assert_eq!(series(&scraped, "gamesolver_connections_total"), Some(1.0));

    stop.send(()).unwrap();
    task.await.unwrap();
    // Once the server has stopped, a pipe is refused with the reason.
    let err = in_process.connect().await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_eq!(err.to_string(), "the server has stopped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipe_counts_as_the_loopback_client_under_its_connection_share() {
    let config = common::limits(|limits| limits.max_connections_per_peer = Some(1));
    let (server, in_process, stop, stopped) = start(config).await;
    let addr = server.local_addr();
    let task = run(server, stopped);

    // 127.0.0.1 holds its one connection over TCP...
    let mut tcp = GameSolverServiceClient::new(common::channel_from(addr, [127, 0, 0, 1]).await);
    common::solve(&mut tcp, iv("tcp", 5)).await.unwrap();
    // A pipe, the same client, is closed at once, before the server writes a byte. (Seen
    // through a tonic channel, the same refusal ends the handshake or the call in one of
    // several errors, by the race of who writes first.)
    // The write may or may not find the pipe still open.
    let _ = closed_without_a_byte(&in_process, PREFACE).await;
    // ...while another client is not.
    let mut other = GameSolverServiceClient::new(common::channel_from(addr, [127, 0, 0, 2]).await);
    common::solve(&mut other, iv("other", 5)).await.unwrap();
    // Once 127.0.0.1's TCP connection is gone, its pipe is admitted.
    drop(tcp);
    let mut answered = false;
    for _ in 0..50 {
        if solve_over_a_new_pipe(&in_process).await.is_ok() {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answered, "a pipe is admitted once its client's share is free");

    stop.send(()).unwrap();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipe_that_does_not_open_with_the_preface_is_closed() {
    let (server, in_process, stop, stopped) = start(ServerConfig::default()).await;
    let task = run(server, stopped);

    // Admitted, so the write reaches the server, which reads it before closing.
    closed_without_a_byte(&in_process, b"INVALID CONNECTION PREFACE\r\n\r\n").await.unwrap();

    stop.send(()).unwrap();
    task.await.unwrap();
}

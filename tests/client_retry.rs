//! The client's failure handling, made deterministic: in-process servers that break their
//! `SolveBatchStream` calls on purpose, at a known batch, with more batches in flight.

use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{assert_all_correct, generate};
use futures::Stream;
use gamesolver::client::{self, ClientError, InputSource, SolveConfig};
use gamesolver::games::{nim_square, stone_game_iv, Tables};
use gamesolver::pb;
use gamesolver::pb::game_solver_service_server::{GameSolverService, GameSolverServiceServer};
use gamesolver::solver::{Solver, SolverConfig};
use tokio::net::TcpListener;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Code, Request, Response, Status, Streaming};

use crate::common;

/// Answers `answered` batches of each of its first `broken_calls` calls, then fails the
/// call with `code`, or with `Code::Ok` goes silent (a black hole: the call and the
/// connection stay open, keepalive pings are answered, no answer comes); later calls are
/// answered in full.
struct Flaky {
    solver: Arc<Solver>,
    calls: Arc<AtomicUsize>,
    broken_calls: usize,
    answered: usize,
    code: Code,
}

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl GameSolverService for Flaky {
    async fn solve(&self, _: Request<pb::SolveRequest>) -> Result<Response<pb::SolveResponse>, Status> {
        Err(Status::unimplemented("flaky test server"))
    }

    async fn solve_batch(
        &self,
        _: Request<pb::SolveBatchRequest>,
    ) -> Result<Response<pb::SolveBatchResponse>, Status> {
        Err(Status::unimplemented("flaky test server"))
    }

    type SolveStreamStream = Answers<pb::SolveStreamResponse>;

    async fn solve_stream(
        &self,
        _: Request<Streaming<pb::SolveStreamRequest>>,
    ) -> Result<Response<Self::SolveStreamStream>, Status> {
        Err(Status::unimplemented("flaky test server"))
    }

    type SolveBatchStreamStream = Answers<pb::SolveBatchStreamResponse>;

    async fn solve_batch_stream(
        &self,
        request: Request<Streaming<pb::SolveBatchStreamRequest>>,
    ) -> Result<Response<Self::SolveBatchStreamStream>, Status> {
        let broken = self.calls.fetch_add(1, Ordering::SeqCst) < self.broken_calls;
        let (solver, answered, code) = (Arc::clone(&self.solver), self.answered, self.code);
        let (answers, stream) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut batches = request.into_inner();
            let mut count = 0;
            while let Ok(Some(batch)) = batches.message().await {
                if broken && count == answered && code == Code::Ok {
                    // The task, and with it the call, lives on without a word.
                    std::future::pending::<()>().await;
                }
                if broken && count == answered {
                    // The client has its window full by now: those batches die with the call.
                    let _ = answers.send(Err(Status::new(code, "flaky test server breaks the call"))).await;
                    return;
                }
                let solutions =
                    gamesolver::service::grpc::solve_batch(&solver, batch.problems, batch.winner_only)
                        .await
                        .expect("solve");
                if answers.send(Ok(pb::SolveBatchStreamResponse { solutions })).await.is_err() {
                    return;
                }
                count += 1;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(stream))))
    }
}

/// Serves `flaky` on 127.0.0.1:0; returns its URL.
async fn serve(broken_calls: usize, answered: usize, code: Code) -> String {
    serve_counting(broken_calls, answered, code).await.0
}

/// As [`serve`], with the count of `SolveBatchStream` calls opened on it.
async fn serve_counting(broken_calls: usize, answered: usize, code: Code) -> (String, Arc<AtomicUsize>) {
    let table = Arc::new(Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT));
    let calls = Arc::new(AtomicUsize::new(0));
    let flaky = Flaky {
        solver: Arc::new(Solver::new(table, SolverConfig::default())),
        calls: Arc::clone(&calls),
        broken_calls,
        answered,
        code,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(GameSolverServiceServer::new(flaky))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (url, calls)
}

fn config(dir: &std::path::Path, servers: Vec<String>) -> SolveConfig {
    SolveConfig {
        input: InputSource::File(dir.join("in.jsonl")),
        output: Some(dir.join("out.jsonl")),
        servers,
        batch_problems: NonZeroUsize::new(100).unwrap(),
        // One call at a time per server, so that "the first calls break" means what it says.
        connections: NonZeroUsize::new(1).unwrap(),
        window: NonZeroUsize::new(8).unwrap(),
        retry_for: Duration::from_secs(30),
        ..SolveConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_batches_are_resent_after_broken_calls() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 5_000, 11);
    // Three calls in a row break after 3 answers, each with up to 8 batches in flight.
    let url = serve(3, 3, Code::Unavailable).await;
    let summary = client::solve(config(dir.path(), vec![url])).await.unwrap();
    assert_eq!((summary.problems, summary.errors), (5_000, 0));
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_shedding_load_is_retried_not_given_up_on() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 3_000, 14);
    // RESOURCE_EXHAUSTED is how the server sheds load ("retry later").
    let url = serve(2, 2, Code::ResourceExhausted).await;
    let summary = client::solve(config(dir.path(), vec![url])).await.unwrap();
    assert_eq!((summary.problems, summary.errors), (3_000, 0));
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_breaking_calls_shares_the_load_with_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 5_000, 12);
    let (bad, good) = (serve(usize::MAX, 1, Code::Internal).await, serve(0, 0, Code::Ok).await);
    let summary = client::solve(config(dir.path(), vec![bad, good])).await.unwrap();
    assert_eq!(summary.problems, 5_000);
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_error_is_fatal_and_leaves_a_resumable_prefix() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 5_000, 13);
    let url = serve(1, 5, Code::Unimplemented).await;
    let err = client::solve(config(dir.path(), vec![url.clone()])).await.unwrap_err();
    assert!(matches!(err, ClientError::Connection(_)), "{err}");
    assert!(err.to_string().contains("rejected"), "{err}");
    let written = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(written.lines().count(), 500, "the 5 answered batches of 100 are kept");

    // The same server answers the next call in full: resuming finishes the job.
    let summary = client::solve(SolveConfig { resume: true, ..config(dir.path(), vec![url]) }).await.unwrap();
    assert_eq!((summary.resumed, summary.problems), (500, 4_500));
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

/// A server that stops answering while keeping its connection healthy is given up on after
/// `--retry-for` without an answer, as a failing one is; keepalive alone would never see it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_is_given_up_on_and_leaves_a_resumable_prefix() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 5_000, 16);
    let url = serve(1, 5, Code::Ok).await;
    let silent = SolveConfig { retry_for: Duration::from_secs(1), ..config(dir.path(), vec![url.clone()]) };
    // Only a guard against a hang, far above the 1 s being tested.
    let err = tokio::time::timeout(Duration::from_secs(120), client::solve(silent))
        .await
        .expect("the client waits for a silent server for ever")
        .unwrap_err();
    assert!(matches!(err, ClientError::Connection(client::ConnectionError::Unreachable { .. })), "{err}");
    assert!(err.to_string().contains("no answer for 1.0s with batches in flight"), "{err}");
    let written = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(written.lines().count(), 500, "the 5 answered batches of 100 are kept");

    let summary = client::solve(SolveConfig { resume: true, ..config(dir.path(), vec![url]) }).await.unwrap();
    assert_eq!((summary.resumed, summary.problems), (500, 4_500));
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_server_gets_as_many_calls_as_connections() {
    let dir = tempfile::tempdir().unwrap();
    // 200 batches, at most 2 in flight a call: every call gets batches to carry.
    generate(&dir.path().join("in.jsonl"), 20_000, 15);
    let ((one, one_calls), (two, two_calls)) =
        (serve_counting(0, 0, Code::Ok).await, serve_counting(0, 0, Code::Ok).await);
    let (connections, window) = (NonZeroUsize::new(3).unwrap(), NonZeroUsize::new(2).unwrap());
    let config = SolveConfig { connections, window, ..config(dir.path(), vec![one, two]) };
    let summary = client::solve(config).await.unwrap();
    assert_eq!((summary.problems, summary.errors), (20_000, 0));
    assert_eq!((one_calls.load(Ordering::SeqCst), two_calls.load(Ordering::SeqCst)), (3, 3));
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

/// Accepts `SolveBatchStream` calls and never answers them, not even with the response
/// headers; its connections stay healthy (hyper answers the client's keepalive pings).
struct Mute;

#[tonic::async_trait]
impl GameSolverService for Mute {
    async fn solve(&self, _: Request<pb::SolveRequest>) -> Result<Response<pb::SolveResponse>, Status> {
        std::future::pending().await
    }

    async fn solve_batch(
        &self,
        _: Request<pb::SolveBatchRequest>,
    ) -> Result<Response<pb::SolveBatchResponse>, Status> {
        std::future::pending().await
    }

    type SolveStreamStream = Answers<pb::SolveStreamResponse>;

    async fn solve_stream(
        &self,
        _: Request<Streaming<pb::SolveStreamRequest>>,
    ) -> Result<Response<Self::SolveStreamStream>, Status> {
        std::future::pending().await
    }

    type SolveBatchStreamStream = Answers<pb::SolveBatchStreamResponse>;

    async fn solve_batch_stream(
        &self,
        _: Request<Streaming<pb::SolveBatchStreamRequest>>,
    ) -> Result<Response<Self::SolveBatchStreamStream>, Status> {
        std::future::pending().await
    }
}

/// Runs the client binary on `dir/in.jsonl` with `--retry-for 2` against `url`; returns
/// its exit code and stderr. Only a guard against a hang bounds its time, far above the
/// 2 s being tested.
async fn client_retrying_for_2s(dir: &std::path::Path, url: &str) -> (Option<i32>, String) {
    let input = dir.join("in.jsonl").display().to_string();
    let output = dir.join("out.jsonl").display().to_string();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gamesolver-client"))
        .args(["solve", &input, "-o", &output, "--quiet", "--retry-for", "2", "--server", url])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..1200 {
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            return (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the client still waits after 120 s, with --retry-for 2");
}

/// Exit 1 with the message of a server given up on for silence, and nothing written.
fn assert_given_up_for_silence(url: &str, (code, stderr): (Option<i32>, String), dir: &std::path::Path) {
    assert_eq!(code, Some(1), "{stderr}");
    let prefix = format!("gamesolver-client: server {url} failed for ");
    assert!(stderr.starts_with(&prefix), "{stderr}");
    assert!(
        stderr.ends_with(" without answering (last error: no answer for 2.0s with batches in flight)\n"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(dir.join("out.jsonl")).unwrap(), "");
}

/// A server that takes the call and never opens it is given up on after `--retry-for`:
/// the wait for the call's response headers is a wait for an answer like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_opens_the_call_is_given_up_on_after_retry_for() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 500, 17);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(GameSolverServiceServer::new(Mute))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let ended = client_retrying_for_2s(dir.path(), &url).await;
    assert_given_up_for_silence(&url, ended, dir.path());
}

/// A peer that accepts TCP connections and never says a word (no HTTP/2 settings, no
/// answer to pings) is given up on after `--retry-for` too, not when keepalive notices.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_speaks_is_given_up_on_after_retry_for() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 500, 18);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        // Bounded: a client retrying makes a few connections.
        while held.len() < 64 {
            let Ok((socket, _)) = listener.accept().await else { return };
            held.push(socket);
        }
    });
    let ended = client_retrying_for_2s(dir.path(), &url).await;
    assert_given_up_for_silence(&url, ended, dir.path());
}

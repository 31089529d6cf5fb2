//! The bulk client against servers that answer wrongly: every answer is checked against
//! its batch, a wrong one is never written, and its batch goes to another server or, with
//! none left, the run ends with exit 2 naming the server and what was wrong.

use std::pin::Pin;
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::{assert_all_correct, expected_line, generate};
use futures::Stream;
use gamesolver::games::{nim_square, stone_game_iv, Tables};
use gamesolver::pb;
use gamesolver::pb::game_solver_service_server::{GameSolverService, GameSolverServiceServer};
use gamesolver::solver::{Solver, SolverConfig};
use tokio::net::TcpListener;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use crate::common;

const CLIENT: &str = env!("CARGO_BIN_EXE_gamesolver-client");

/// What a lying server does to the answer of one batch.
#[derive(Debug, Clone, Copy)]
enum Lie {
    /// Every id replaced.
    WrongIds,
    /// The first two solutions in each other's place.
    Swapped,
    /// The middle solution left out.
    Missing,
    /// One solution more.
    Extra,
    /// The answer sent twice.
    Duplicated,
}

/// Answers every batch correctly but the `at`-th of each call (from 0), which it answers
/// with `lie`.
struct Liar {
    solver: Arc<Solver>,
    lie: Lie,
    at: usize,
}

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

#[tonic::async_trait]
impl GameSolverService for Liar {
    async fn solve(&self, _: Request<pb::SolveRequest>) -> Result<Response<pb::SolveResponse>, Status> {
        Err(Status::unimplemented("lying test server"))
    }

    async fn solve_batch(
        &self,
        _: Request<pb::SolveBatchRequest>,
    ) -> Result<Response<pb::SolveBatchResponse>, Status> {
        Err(Status::unimplemented("lying test server"))
    }

    type SolveStreamStream = Answers<pb::SolveStreamResponse>;

    async fn solve_stream(
        &self,
        _: Request<Streaming<pb::SolveStreamRequest>>,
    ) -> Result<Response<Self::SolveStreamStream>, Status> {
        Err(Status::unimplemented("lying test server"))
    }

    type SolveBatchStreamStream = Answers<pb::SolveBatchStreamResponse>;

    async fn solve_batch_stream(
        &self,
        request: Request<Streaming<pb::SolveBatchStreamRequest>>,
    ) -> Result<Response<Self::SolveBatchStreamStream>, Status> {
        let (solver, lie, at) = (Arc::clone(&self.solver), self.lie, self.at);
        let (answers, stream) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut batches = request.into_inner();
            let mut count = 0;
            while let Ok(Some(batch)) = batches.message().await {
                let mut solutions =
                    gamesolver::service::grpc::solve_batch(&solver, batch.problems, batch.winner_only)
                        .await
                        .expect("solve");
                let mut copies = 1;
                if count == at {
                    match lie {
                        Lie::WrongIds => solutions.iter_mut().for_each(|s| s.id = format!("x{}", s.id)),
                        Lie::Swapped => solutions.swap(0, 1),
                        Lie::Missing => drop(solutions.remove(solutions.len() / 2)),
                        Lie::Extra => solutions.push(solutions[0].clone()),
                        Lie::Duplicated => copies = 2,
                    }
                }
                for _ in 0..copies {
                    let answer = pb::SolveBatchStreamResponse { solutions: solutions.clone() };
                    if answers.send(Ok(answer)).await.is_err() {
                        return;
                    }
                }
                count += 1;
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(stream))))
    }
}

/// Serves `service` on 127.0.0.1:0; returns its URL.
async fn serve<S: GameSolverService>(service: S) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(GameSolverServiceServer::new(service))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    url
}

fn solver() -> Arc<Solver> {
    let tables = Arc::new(Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT));
    Arc::new(Solver::new(tables, SolverConfig::default()))
}

/// Runs the client binary on `dir/in.jsonl` into `dir/out.jsonl`, off the runtime that
/// serves: batches of 100, one connection a server; returns the exit code and stderr.
async fn client(dir: &std::path::Path, servers: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["solve".to_owned(), dir.join("in.jsonl").display().to_string()];
    args.extend(
        ["-o", "out.jsonl", "--batch-size", "100", "--connections", "1", "--window", "4", "--quiet"]
            .map(String::from),
    );
    for server in servers {
        args.extend(["--server".to_owned(), (*server).to_owned()]);
    }
    let dir = dir.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(CLIENT).args(&args).current_dir(dir).stdin(Stdio::null()).output().unwrap()
    })
    .await
    .unwrap();
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Every line of the output is the right answer to its input line, and there are `count`.
fn assert_correct_prefix(dir: &std::path::Path, count: usize) {
    let table = Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT);
    let input = std::fs::read_to_string(dir.join("in.jsonl")).unwrap();
    let output = std::fs::read_to_string(dir.join("out.jsonl")).unwrap();
    assert_eq!(output.lines().count(), count, "lines written");
    for (i, (input_line, output_line)) in input.lines().zip(output.lines()).enumerate() {
        let got: pb::Solution = serde_json::from_str(output_line).unwrap();
        assert_eq!(got, expected_line(input_line, i as u64 + 1, &table), "line {}", i + 1);
    }
}

/// Lies in the answer to batch 3 (lines 301-400) of 10, alone: exit 2, the message, and
/// the 300 lines before it, right.
async fn alone(lie: Lie, what: &str, written: usize) {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 1_000, 21);
    let url = serve(Liar { solver: solver(), lie, at: 3 }).await;
    let (code, stderr) = client(dir.path(), &[&url]).await;
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr, format!("gamesolver-client: server {url} answered wrongly: {what}\n"));
    assert_correct_prefix(dir.path(), written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_ids_end_the_run_and_are_not_written() {
    alone(Lie::WrongIds, r#"solution 0 of batch 3 has id "xg301"; its problem's is "g301""#, 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swapped_ids_end_the_run_and_are_not_written() {
    alone(Lie::Swapped, r#"solution 0 of batch 3 has id "g302"; its problem's is "g301""#, 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_solution_ends_the_run_and_is_not_written() {
    alone(Lie::Missing, "99 solutions for the 100 problems of batch 3", 300).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extra_solution_ends_the_run_and_is_not_written() {
    alone(Lie::Extra, "101 solutions for the 100 problems of batch 3", 300).await;
}

/// With one connection, the copy is next in line for batch 4: it must not be taken for
/// its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicated_answer_is_not_taken_for_the_next_batchs() {
    alone(Lie::Duplicated, r#"solution 0 of batch 4 has id "g301"; its problem's is "g401""#, 400).await;
}

/// With another server, the batch answered wrongly goes there, the liar is asked nothing
/// more, and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_answer_goes_to_another_server() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 3_000, 22);
    let liar = serve(Liar { solver: solver(), lie: Lie::Swapped, at: 0 }).await;
    let honest = serve(Liar { solver: solver(), lie: Lie::Swapped, at: usize::MAX }).await;
    let (code, stderr) = client(dir.path(), &[&liar, &honest]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("giving up on server, the others go on: server {liar} answered wrongly: ")),
        "{stderr}"
    );
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

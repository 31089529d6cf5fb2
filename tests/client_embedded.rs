//! The client library's embedded server: started through the `EmbeddedStarter` its caller
//! hands it (here, as in the binary, a `gamesolver::server::Server` on 127.0.0.1:0, reached
//! over its port or through a pipe in memory, and a table run through its Flight exchange
//! without a connection), stopped at the end of the run, and its failures reported.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{assert_all_correct, generate};
use gamesolver::client::format::Format;
use gamesolver::client::gen::{generate_table, GenConfig};
use gamesolver::client::{
    self, BoxError, ClientError, EmbeddedServer, EmbeddedStarter, Exchange, InputSource, Pipe, SolveConfig,
};
use gamesolver::seconds::Seconds;
use gamesolver::server::{Server, ServerConfig};

use crate::common;

/// How a run reaches the embedded server of [`real_server`].
#[derive(Clone)]
enum Reach {
    /// Over its loopback port.
    Port,
    /// Through a pipe in memory, as the binary's JSON-lines runs do.
    Pipe,
    /// As the binary's runs do: a table run through the server's Flight exchange in this
    /// process, any other through a pipe, whose connections are counted here.
    Exchange(Arc<AtomicUsize>),
}

/// What the binary hands the library: the real server on a loopback port, reached as
/// `reach` says. Reached otherwise than by its port, its URL names a port where nothing
/// listens, so that a run that goes anywhere else fails.
fn real_server(reach: Reach) -> EmbeddedStarter {
    EmbeddedStarter::new(move || {
        let reach = reach.clone();
        async move {
            let config =
                ServerConfig { shutdown_grace: Seconds(Duration::from_secs(1)), ..ServerConfig::ephemeral() };
            let mut server = Server::bind(config).await?;
            let (piped, exchanging) = match reach {
                Reach::Port => {
                    let url = format!("http://{}", server.local_addr());
                    return Ok(EmbeddedServer::spawn(url, |shutdown| server.run(shutdown)));
                }
                Reach::Pipe => (Arc::default(), false),
                Reach::Exchange(piped) => (piped, true),
            };
            let in_process = server.in_process();
            let exchange = {
                let in_process = in_process.clone();
                Exchange::new(move |descriptor, batches| in_process.exchange(descriptor, batches))
            };
            let pipe = Pipe::new(move || {
                piped.fetch_add(1, Ordering::SeqCst);
                let in_process = in_process.clone();
                async move { in_process.connect().await }
            });
            let url = "http://127.0.0.1:1".to_owned();
            let embedded = EmbeddedServer::spawn(url, |shutdown| server.run(shutdown)).with_pipe(pipe);
            Ok(if exchanging { embedded.with_exchange(exchange) } else { embedded })
        }
    })
}

fn config(dir: &std::path::Path, embedded: Option<EmbeddedStarter>) -> SolveConfig {
    SolveConfig {
        input: InputSource::File(dir.join("in.jsonl")),
        output: Some(dir.join("out.jsonl")),
        embedded,
        retry_for: Duration::from_secs(5),
        ..SolveConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_servers_solves_through_the_server_its_caller_starts() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 5_000, 31);
    let summary = client::solve(config(dir.path(), Some(real_server(Reach::Port)))).await.unwrap();
    assert_eq!((summary.problems, summary.errors), (5_000, 0));
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reaches_its_embedded_server_through_the_pipe_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 5_000, 34);
    let summary = client::solve(config(dir.path(), Some(real_server(Reach::Pipe)))).await.unwrap();
    assert_eq!((summary.problems, summary.errors), (5_000, 0));
    assert_all_correct(&dir.path().join("in.jsonl"), &dir.path().join("out.jsonl"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_columnar_run_is_solved_by_the_embedded_servers_exchange_without_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    // The same problems as JSON lines and as Parquet.
    generate(&path("in.jsonl"), 5_000, 35);
    let gen = GenConfig { count: 5_000, seed: 35, ..GenConfig::default() };
    let parquet = Box::new(std::fs::File::create(path("in.parquet")).unwrap());
    generate_table(&gen, Format::Parquet, parquet).unwrap();
    let piped = Arc::new(AtomicUsize::new(0));

    let columnar = SolveConfig {
        input: InputSource::File(path("in.parquet")),
        output: Some(path("from-parquet.jsonl")),
        ..config(dir.path(), Some(real_server(Reach::Exchange(Arc::clone(&piped)))))
    };
    let summary = client::solve(columnar).await.unwrap();
    assert_eq!((summary.problems, summary.errors), (5_000, 0));
    assert_all_correct(&path("in.jsonl"), &path("from-parquet.jsonl"));
    assert_eq!(piped.load(Ordering::SeqCst), 0, "a columnar run opens no connection");

    // A JSON-lines run has no exchange: it goes through the pipe, to the same answers.
    let lines = config(dir.path(), Some(real_server(Reach::Exchange(Arc::clone(&piped)))));
    client::solve(lines).await.unwrap();
    assert!(piped.load(Ordering::SeqCst) > 0, "a JSON-lines run connects through the pipe");
    let (from_lines, from_parquet) =
        (std::fs::read(path("out.jsonl")).unwrap(), std::fs::read(path("from-parquet.jsonl")).unwrap());
    assert!(from_lines == from_parquet, "the same lines, byte for byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_and_no_starter_is_an_error_before_any_output() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 10, 32);
    let err = client::solve(config(dir.path(), None)).await.unwrap_err();
    assert!(matches!(err, ClientError::NoServer), "{err:?}");
    assert_eq!(err.to_string(), "no server to send the problems to (give --server URL)");
    assert!(!dir.path().join("out.jsonl").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starter_that_fails_and_a_server_that_dies_end_the_run_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    generate(&dir.path().join("in.jsonl"), 10, 33);

    let cannot_start =
        EmbeddedStarter::new(|| async { Err::<EmbeddedServer, BoxError>("no port left".into()) });
    let err = client::solve(config(dir.path(), Some(cannot_start))).await.unwrap_err();
    assert_eq!(err.to_string(), "embedded server: no port left");

    // A server that dies at once, on a port where nothing answers: the run ends with its
    // reason, not with a connection's, and the server is still asked to stop.
    let stopped = Arc::new(AtomicBool::new(false));
    let dies = {
        let stopped = Arc::clone(&stopped);
        EmbeddedStarter::new(move || {
            let stopped = Arc::clone(&stopped);
            async move {
                Ok(EmbeddedServer {
                    url: "http://127.0.0.1:1".to_owned(),
                    pipe: None,
                    exchange: None,
                    growth: None,
                    stop: Box::new(move || stopped.store(true, Ordering::SeqCst)),
                    ended: Box::pin(async { Err::<(), BoxError>("table file is corrupt".into()) }),
                })
            }
        })
    };
    let err = client::solve(config(dir.path(), Some(dies))).await.unwrap_err();
    assert_eq!(err.to_string(), "embedded server: table file is corrupt");
    assert!(stopped.load(Ordering::SeqCst), "stop is called at the end of the run");
}

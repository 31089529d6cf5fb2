//! The one test that needs a process of its own: it installs the process's global
//! tracing subscriber (to read what the library logs) and holds every thread of rayon's
//! global pool, which would capture and stall the servers of every other test sharing
//! the binary (`tests/main.rs`).

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::{limits, served, sum, TestServer};
use gamesolver::pb;
use gamesolver::seconds::Timeout;
use gamesolver::server::ServerConfig;
use gamesolver::solver::SolverConfig;
use tonic::Code;

/// Upper bound on any wait for the server to act; only reached when a bound is broken.
const PATIENCE: Duration = Duration::from_secs(20);

/// What the library logged, from the first test that asked for it.
fn captured_logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    Arc::clone(LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&logs);
        tracing_subscriber::fmt()
            .with_env_filter("gamesolver=debug")
            .with_ansi(false)
            .with_writer(move || LogSink(Arc::clone(&sink)))
            .init();
        logs
    }))
}

struct LogSink(Arc<Mutex<Vec<u8>>>);

impl Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_server_deadline_skips_the_work_it_has_not_started() {
    let logs = captured_logs();
    let solver = SolverConfig { inline_work: 0, ..SolverConfig::default() };
    let config = ServerConfig {
        solver,
        ..limits(|limits| limits.request_timeout = Timeout(Some(Duration::from_millis(100))))
    };
    let server = TestServer::start(config).await;
    let mut client = server.client().await;

    // Every solver thread is busy, so the batch's job waits in the pool's queue.
    let threads = rayon::current_num_threads();
    let (busy, all_busy) = std::sync::mpsc::channel();
    let release = Arc::new(std::sync::Barrier::new(threads + 1));
    for _ in 0..threads {
        let (busy, release) = (busy.clone(), Arc::clone(&release));
        rayon::spawn(move || {
            busy.send(()).unwrap();
            release.wait();
        });
    }
    for _ in 0..threads {
        all_busy.recv_timeout(PATIENCE).unwrap();
    }
    let problems = (0..1000).map(|i| sum(&i.to_string(), "25??")).collect();
    let status =
        client.solve_batch(pb::SolveBatchRequest { problems, winner_only: false }).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    tokio::task::spawn_blocking(move || release.wait()).await.unwrap();

    // The job then starts, sees its caller gone, and solves nothing.
    let skipped = async {
        loop {
            if String::from_utf8_lossy(&logs.lock().unwrap())
                .contains("pool job skipped: its caller has gone")
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(PATIENCE, skipped).await.expect("the skip is logged");
    served(&server).await;
}

/// The panic hook of `gamesolver::server::log_panics` logs a panic as one ERROR line, at
/// most one each interval, however many come (2,000 panicking calls once wrote 508 KB of
/// stderr); the default hook is back at the end, for the other test's failures.
#[test]
fn panics_are_logged_one_line_an_interval_not_each() {
    let logs = captured_logs();
    gamesolver::server::log_panics();
    for i in 0..2_000 {
        let caught = std::panic::catch_unwind(|| panic!("panic {i} on purpose"));
        assert!(caught.is_err());
    }
    let _ = std::panic::take_hook();
    let text = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    let lines: Vec<&str> = text.lines().filter(|line| line.contains("on purpose")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("ERROR"), "{}", lines[0]);
    assert!(lines[0].contains("panic: panic 0 on purpose"), "{}", lines[0]);
    assert!(lines[0].contains("panics_not_logged=0"), "{}", lines[0]);
    assert!(lines[0].contains("tests/process_wide.rs"), "the location: {}", lines[0]);
}

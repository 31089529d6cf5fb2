//! Shared by the integration tests: real servers on ephemeral loopback ports (in-process
//! and as the binary), datasets, and checking answers against the solver core.
#![allow(dead_code)] // `tests/process_wide.rs` uses a part of this module

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use gamesolver::client::gen::{self, GenConfig};
use gamesolver::convert;
use gamesolver::games::{nim_square, stone_game_iv, StoneGameIvTable, Tables};
use gamesolver::pb;

use gamesolver::pb::game_solver_service_client::GameSolverServiceClient;
use gamesolver::server::{self, ServerConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// A Sum Game problem.
pub fn sum(id: &str, num: &str) -> pb::Problem {
    pb::Problem { id: id.into(), game: Some(pb::problem::Game::SumGame(pb::SumGame { num: num.into() })) }
}

/// A Stone Game IX problem.
pub fn ix(id: &str, stones: &[u64]) -> pb::Problem {
    let game = pb::problem::Game::StoneGameIx(pb::StoneGameIx { stones: stones.to_vec() });
    pb::Problem { id: id.into(), game: Some(game) }
}

/// A Stone Game IV problem.
pub fn iv(id: &str, n: u64) -> pb::Problem {
    pb::Problem { id: id.into(), game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n })) }
}

/// One `SolveStream` request for `problem`, moves included.
pub fn stream_request(problem: pb::Problem) -> pb::SolveStreamRequest {
    pb::SolveStreamRequest { problem: Some(problem), winner_only: false }
}

/// A client of the solver service.
pub type Client = GameSolverServiceClient<Channel>;

/// Calls `Solve` on one problem and unwraps the response's solution.
pub async fn solve(client: &mut Client, problem: pb::Problem) -> Result<pb::Solution, tonic::Status> {
    let request = pb::SolveRequest { problem: Some(problem), winner_only: false };
    Ok(client.solve(request).await?.into_inner().solution.expect("a response has its solution"))
}

/// The default configuration with its limits changed by `change`.
pub fn limits(change: impl FnOnce(&mut gamesolver::server::config::LimitsConfig)) -> ServerConfig {
    let mut config = ServerConfig::default();
    change(&mut config.limits);
    config
}

/// A running in-process server; dropping it without `stop` aborts nothing, the runtime does.
pub struct TestServer {
    pub addr: SocketAddr,
    /// The metrics port, when the config asked for one.
    pub metrics: Option<SocketAddr>,
    /// The TLS files in use, when serving TLS.
    pub tls: Option<std::sync::Arc<server::ReloadableTls>>,
    /// The Stone Game IV table the server answers from.
    pub iv_table: std::sync::Arc<StoneGameIvTable>,
    /// Every table the server answers from.
    pub tables: std::sync::Arc<Tables>,
    stop: Option<oneshot::Sender<()>>,
    pub task: JoinHandle<Result<(), server::ServeError>>,
}

impl TestServer {
    /// Binds and runs a server on 127.0.0.1:0 (whatever `config.listen` says) with `config`.
    pub async fn start(config: ServerConfig) -> TestServer {
        let config = ServerConfig { listen: ServerConfig::ephemeral().listen, ..config };
        let server = server::Server::bind(config).await.expect("the test server starts");
        let (addr, metrics, tls, tables) =
            (server.local_addr(), server.metrics_addr(), server.tls(), server.tables());
        let iv_table = std::sync::Arc::clone(&tables.iv);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        TestServer { addr, metrics, tls, iv_table, tables, stop: Some(stop), task }
    }

    /// The metrics port's address; panics if the server has none.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics.expect("the test server has a metrics port")
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url()).unwrap().connect().await.expect("connect to test server")
    }

    /// A channel whose connections come from `ip` (any 127.0.0.0/8 address on
    /// loopback), so that the server counts them as another client.
    pub async fn channel_from(&self, ip: [u8; 4]) -> Channel {
        channel_from(self.addr, ip).await
    }

    /// A client whose connection comes from `ip`; see [`TestServer::channel_from`].
    pub async fn client_from(&self, ip: [u8; 4]) -> Client {
        GameSolverServiceClient::new(self.channel_from(ip).await)
    }

    pub async fn client(&self) -> Client {
        GameSolverServiceClient::new(self.channel().await)
            .max_decoding_message_size(usize::MAX)
            .max_encoding_message_size(usize::MAX)
    }

    /// Asks the server to shut down (as SIGTERM does in the binary).
    pub fn trigger_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A channel to the server at `addr` whose connections come from `ip` (any 127.0.0.0/8
/// address on loopback), so that the server counts them as another client.
pub async fn channel_from(addr: SocketAddr, ip: [u8; 4]) -> Channel {
    let connector = tower::service_fn(move |_: http::Uri| async move {
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((ip, 0)))?;
        let stream = socket.connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
    });
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_with_connector(connector)
        .await
        .expect("connect to the server from another address")
}

/// A `gamesolver-server` process, killed when dropped.
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts the server on `addr` (port 0 for any) with `extra` flags and waits for its
    /// start-up line.
    pub fn start(addr: &str, extra: &[&str]) -> ServerProcess {
        // The port of a server killed a moment ago may take a few tries to bind again.
        for _ in 0..50 {
            let mut child = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
                .args(["--listen", addr])
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn gamesolver-server");
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
            if let Some(bound) = line.trim().strip_prefix("listening on ") {
                return ServerProcess { child, addr: bound.parse().unwrap() };
            }
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("gamesolver-server did not start on {addr}");
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL: no graceful anything, as in a crash.
    pub fn kill(mut self) -> SocketAddr {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.addr
    }

    /// Sends a signal by name (`TERM`, `INT`).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill").args(["-s", name, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits up to 30 s for the exit without blocking the runtime (a client's connection
    /// must still answer the server's GOAWAY).
    pub async fn wait_exit(&mut self) -> ExitStatus {
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("server did not exit within 30 s");
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The client binary.
pub const CLIENT: &str = env!("CARGO_BIN_EXE_gamesolver-client");

/// Runs the client to completion; returns its status and stderr.
pub fn client(args: &[&str]) -> (ExitStatus, String) {
    let output =
        Command::new(CLIENT).args(args).stdin(Stdio::null()).output().expect("run gamesolver-client");
    (output.status, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// The client's stderr without the lines that say a table is growing and when it is built:
/// whether they come depends on how soon the client looks (every 200 ms), so a test of
/// what else it says reads past them.
pub fn without_table_growth(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|line| {
            !line.starts_with("gamesolver-client: building the ")
                && !line.starts_with("gamesolver-client: built the ")
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// A path as a command-line argument.
pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Writes `count` generated problems to `path`.
pub fn generate(path: &Path, count: u64, seed: u64) {
    let config = GenConfig { count, seed, ..GenConfig::default() };
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    gen::generate(&config, &mut file).unwrap();
}

/// The answer the solver core gives to `problem`, as the wire would carry it.
pub fn expected(problem: &pb::Problem, table: &Tables) -> pb::Solution {
    let (id, game) = convert::problem(problem.clone());
    let result = game.and_then(|game| game.solve(table).map_err(Into::into));
    convert::solution(id, result)
}

/// What the output line for `input_line` (1-based `number`) must be: a missing id is the
/// line number.
pub fn expected_line(input_line: &str, number: u64, table: &Tables) -> pb::Solution {
    let mut problem: pb::Problem = serde_json::from_str(input_line).unwrap();
    if problem.id.is_empty() {
        problem.id = number.to_string();
    }
    expected(&problem, table)
}

/// Checks every output line against the solver core, in order.
pub fn assert_all_correct(input: &Path, output: &Path) {
    let table = Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT);
    let input = std::fs::read_to_string(input).unwrap();
    let output = std::fs::read_to_string(output).unwrap();
    assert!(output.ends_with('\n'), "output ends in a partial line");
    let (inputs, outputs): (Vec<_>, Vec<_>) = (input.lines().collect(), output.lines().collect());
    assert_eq!(outputs.len(), inputs.len(), "one output line per input line");
    for (i, (input_line, output_line)) in inputs.iter().zip(&outputs).enumerate() {
        let got: pb::Solution = serde_json::from_str(output_line)
            .unwrap_or_else(|err| panic!("output line {} is not a Solution ({err}): {output_line}", i + 1));
        assert_eq!(got, expected_line(input_line, i as u64 + 1, &table), "line {}: {input_line}", i + 1);
    }
}

/// Checks that `server` answers a new client.
pub async fn served(server: &TestServer) {
    let mut client = server.client().await;
    let answer = solve(&mut client, sum("bystander", "25??")).await.unwrap();
    assert_eq!(answer.id, "bystander");
}

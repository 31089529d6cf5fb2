//! A real server on an ephemeral loopback port, for the integration tests.
#![allow(dead_code)] // each test binary uses its own part of this module

use std::net::SocketAddr;

use gamesolver::pb::game_solver_client::GameSolverClient;
use gamesolver::server::{self, ServerConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

/// A running in-process server; dropping it without `stop` aborts nothing, the runtime does.
pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    pub task: JoinHandle<Result<(), server::ServeError>>,
}

impl TestServer {
    /// Starts `serve` on 127.0.0.1:0 with `config`.
    pub async fn start(config: ServerConfig) -> TestServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server::serve(listener, config, async move {
            let _ = stopped.await;
        }));
        TestServer { addr, stop: Some(stop), task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub async fn channel(&self) -> Channel {
        Channel::from_shared(self.url()).unwrap().connect().await.expect("connect to test server")
    }

    pub async fn client(&self) -> GameSolverClient<Channel> {
        GameSolverClient::new(self.channel().await)
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

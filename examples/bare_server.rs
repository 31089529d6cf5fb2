//! The solver service on a plain `tonic::transport::Server`, with none of the production
//! layers: no limits, request-memory budget, metrics, status rewriting, admission, idle
//! closing or TLS. It mounts the same services (the solver, health, reflection, which
//! ghz needs to find the methods), so that routing is alike. It exists to be measured beside `gamesolver-server` (`bench/floor.sh`),
//! so that the docs can say what the production layers cost a call; never deploy it.
//!
//! `cargo run --release --example bare_server [-- ADDR]` (default `127.0.0.1:0`) prints
//! `listening on ADDR` once it serves, as the real server does, and serves the solver and
//! the standard health service until it is killed. It uses the same allocator, runtime and
//! solver defaults as `gamesolver-server`.

use std::sync::Arc;

use gamesolver::games::{nim_square, stone_game_iv, Tables};
use gamesolver::pb::game_solver_service_server::{GameSolverServiceServer, SERVICE_NAME};
use gamesolver::service::GameSolverService;
use gamesolver::solver::{Solver, SolverConfig};
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let listener = TcpListener::bind(&addr).await?;
    let tables = Arc::new(Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT));
    let solver = Arc::new(Solver::new(tables, SolverConfig::default()));
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status(SERVICE_NAME, ServingStatus::Serving).await;
    reporter.set_service_status("", ServingStatus::Serving).await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(gamesolver::pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    println!("listening on {}", listener.local_addr()?);
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(reflection)
        .add_service(GameSolverServiceServer::new(GameSolverService::new(solver)))
        // As the real server's accept loop does: small answers go out at once.
        .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true)))
        .await?;
    Ok(())
}

//! Assembles and runs the gRPC server: the solver service, health, reflection, limits,
//! TLS, metrics, connection ageing and the Stone Game IV table's lifecycle.
//!
//! [`serve`] takes already-bound listeners and a shutdown future, so that tests bind
//! `127.0.0.1:0` and the binary binds its flag; both get the same server.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::codec::CompressionEncoding;
use tonic_health::ServingStatus;

use crate::games::StoneGameIvTable;
use crate::iv_table_file::IvTableFileError;
use crate::pb;
use crate::pb::game_solver_service_server::GameSolverServiceServer;
use crate::service::{GameSolverService, Solver, SolverConfig};

mod accept;
mod connection_state;
mod connections;
mod grpc_codes;
mod iv_table;
mod limits;
mod log_limit;
pub mod metrics;
pub mod tls;
mod transport;

pub use accept::raise_open_file_limit;
pub use log_limit::LogRateLimit;
pub use metrics::Metrics;
pub use tls::{ReloadableTls, TlsSettings};

pub use crate::codec::DEFAULT_MAX_MESSAGE_BYTES;

/// The service name that health checks and reflection report (the generated constant).
pub use crate::pb::game_solver_service_server::SERVICE_NAME;

/// Everything `serve` needs besides the listener.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest encoded request or response message.
    pub max_message_bytes: usize,
    /// After shutdown is asked for, in-flight calls get this long before being dropped.
    pub shutdown_grace: Duration,
    /// HTTP/2 streams (calls) allowed at once on one connection.
    pub max_concurrent_streams: u32,
    /// Upper bound on any call's duration (`DEADLINE_EXCEEDED` when it runs out); a
    /// client's shorter `grpc-timeout` wins.
    pub request_timeout: Option<Duration>,
    /// Fan-out tuning.
    pub solver: SolverConfig,
    /// The shared Stone Game IV table.
    pub iv_table: Arc<StoneGameIvTable>,
    /// Stone Game IV piles classified at start-up, in the background while serving.
    /// None by default: a request grows the table as far as it needs (10^7 in 0.08 s,
    /// README "Stone Game IV at scale"), and a background sieve would take two cores from
    /// every embedded server and test server (2·10^7 took 17 s in a debug build).
    pub iv_precompute: u64,
    /// The Stone Game IV table's file: loaded before serving, saved after the precompute
    /// and at shutdown when the table has grown.
    pub iv_table_file: Option<PathBuf>,
    /// TLS on the gRPC port (mutual with a client CA); the caller keeps a handle to
    /// reload it. `None` serves plaintext HTTP/2.
    pub tls: Option<Arc<ReloadableTls>>,
    /// Where to serve `/metrics` (plaintext HTTP/1.1); `None` serves no endpoint.
    pub metrics_listener: Option<Arc<std::net::TcpListener>>,
    /// A connection this old is sent a GOAWAY: its calls finish, new ones go to a new
    /// connection (and so, behind a balancer, perhaps to another replica).
    pub max_connection_age: Option<Duration>,
    /// After `max_connection_age`, a connection still open this much later is closed,
    /// calls and all. Without an age, it counts from the connection's start.
    pub max_connection_age_grace: Option<Duration>,
    /// HTTP/2 receive window of one stream, in bytes; `None` keeps hyper's default (1 MiB).
    pub http2_stream_window: Option<u32>,
    /// HTTP/2 receive window of one connection, in bytes; `None` keeps hyper's default.
    pub http2_connection_window: Option<u32>,
    /// Compress responses (gzip or zstd) for clients that accept it. Off by default:
    /// grpc-go clients (ghz among them) offer gzip on every call, and compressing small
    /// solutions cost a third of the unary throughput (21.0k → 13.6k calls/s).
    pub compress_responses: bool,
    /// Connections open or handshaking at once; beyond it the kernel's backlog holds new
    /// ones until a slot frees.
    pub max_connections: usize,
    /// A new connection must finish its TLS handshake (if any) and send the HTTP/2
    /// preface within this long, or it is closed.
    pub handshake_timeout: Duration,
    /// A connection with no call in flight for this long is closed (gRPC's
    /// `MAX_CONNECTION_IDLE`); `None` keeps it open.
    pub connection_idle_timeout: Option<Duration>,
    /// Calls in flight on the whole server (health checks aside); beyond it a call is
    /// refused with `RESOURCE_EXHAUSTED`.
    pub max_calls: usize,
    /// Calls in flight on one connection (health checks aside); beyond it a call is
    /// refused with `RESOURCE_EXHAUSTED`.
    pub max_calls_per_connection: usize,
    /// Bytes of request messages (inflated) that all calls together may hold.
    pub max_request_bytes_in_flight: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            shutdown_grace: Duration::from_secs(30),
            max_concurrent_streams: 1024,
            request_timeout: None,
            solver: SolverConfig::default(),
            iv_table: Arc::new(StoneGameIvTable::new(crate::games::stone_game_iv::DEFAULT_LIMIT)),
            iv_precompute: 0,
            iv_table_file: None,
            tls: None,
            metrics_listener: None,
            max_connection_age: None,
            max_connection_age_grace: None,
            http2_stream_window: None,
            http2_connection_window: None,
            compress_responses: false,
            max_connections: 4096,
            handshake_timeout: Duration::from_secs(10),
            connection_idle_timeout: Some(Duration::from_secs(300)),
            max_calls: 4096,
            max_calls_per_connection: 1024,
            max_request_bytes_in_flight: 256 * 1024 * 1024,
        }
    }
}

/// What stops the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The HTTP/2 transport failed.
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The reflection service could not be built from the descriptor sets.
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The Stone Game IV table file cannot be used (see `IvTableStore::open`). Not a
    /// `source`: the message already carries it, and `{:#}` would print it twice.
    #[error("stone game iv table: {0}")]
    IvTable(IvTableFileError),
    /// The metrics listener could not be handed to the runtime.
    #[error("metrics listener: {0}")]
    MetricsListener(std::io::Error),
}

/// Serves on `listener` until `shutdown` resolves, then drains in-flight calls for at
/// most `config.shutdown_grace`. The Stone Game IV table file is read before the first
/// call is served and written after the last.
pub async fn serve(
    listener: TcpListener,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let metrics = Metrics::new(Arc::clone(&config.iv_table));
    let iv_table = iv_table::IvTableLifecycle::open(
        Arc::clone(&config.iv_table),
        config.iv_table_file.clone(),
        metrics.clone(),
    )
    .await
    .map_err(ServeError::IvTable)?;
    let metrics_listener = match &config.metrics_listener {
        None => None,
        Some(listener) => Some(
            listener
                .try_clone()
                .and_then(|listener| {
                    listener.set_nonblocking(true)?;
                    TcpListener::from_std(listener)
                })
                .map_err(ServeError::MetricsListener)?,
        ),
    };

    let solver = Arc::new(
        Solver::new(Arc::clone(&config.iv_table), config.solver.clone()).with_metrics(metrics.clone()),
    );
    let mut solver_service = GameSolverServiceServer::new(GameSolverService::new(solver))
        .max_decoding_message_size(config.max_message_bytes)
        .max_encoding_message_size(config.max_message_bytes)
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd);
    if config.compress_responses {
        solver_service = solver_service
            .send_compressed(CompressionEncoding::Zstd)
            .send_compressed(CompressionEncoding::Gzip);
    }

    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_service_status(SERVICE_NAME, ServingStatus::Serving).await;
    health.set_service_status("", ServingStatus::Serving).await;

    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            // google.rpc.ErrorInfo and BadRequest, so that grpcurl and other reflection
            // clients can print an error's details.
            .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection().build_v1()?;
    let reflection_v1alpha = reflection().build_v1alpha()?;

    let calls = Arc::new(limits::CallCount::default());
    let stopping = CancellationToken::new();
    if let Some(listener) = metrics_listener {
        tokio::spawn(metrics::serve_metrics(listener, metrics.clone(), stopping.clone()));
    }
    iv_table.precompute_in_background(config.iv_precompute);
    let trigger = stopping.clone();
    let reporter = health.clone();
    let in_flight = Arc::clone(&calls);
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!(
            calls_in_flight = in_flight.get(),
            "shutting down: no new connections; closing idle ones; draining in-flight calls"
        );
        reporter.set_service_status(SERVICE_NAME, ServingStatus::NotServing).await;
        reporter.set_service_status("", ServingStatus::NotServing).await;
        trigger.cancel();
    });

    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(config.max_concurrent_streams)
        .initial_stream_window_size(config.http2_stream_window)
        .initial_connection_window_size(config.http2_connection_window)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)));
    if let Some(age) = config.max_connection_age {
        builder = builder.max_connection_age(age);
    }
    // Outermost first: the metrics see the limits' refusals and the codes as rewritten by
    // GrpcCodesLayer.
    let router = builder
        .layer(metrics::CallMetricsLayer { metrics: metrics.clone() })
        .layer(limits::CallLimitsLayer::new(
            limits::CallLimits {
                max_calls: config.max_calls,
                max_calls_per_connection: config.max_calls_per_connection,
                max_request_bytes_in_flight: config.max_request_bytes_in_flight,
                max_message_bytes: config.max_message_bytes,
                stream_idle_timeout: config.solver.stream_idle_timeout,
            },
            Arc::clone(&calls),
        ))
        .layer(grpc_codes::GrpcCodesLayer { request_timeout: config.request_timeout })
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(solver_service);
    let forced_close_after =
        config.max_connection_age_grace.map(|grace| config.max_connection_age.unwrap_or_default() + grace);
    tracing::info!(
        addr = %listener.local_addr().map_or_else(|err| err.to_string(), |addr| addr.to_string()),
        tls = config.tls.is_some(),
        "serving"
    );
    let connection_limits = accept::ConnectionLimits {
        max_connections: config.max_connections,
        handshake_timeout: config.handshake_timeout,
        idle_timeout: config.connection_idle_timeout,
    };
    let accept = connections::Accept { tls: config.tls.clone(), forced_close_after, metrics };
    let incoming = accept::Incoming::new(listener, connection_limits, stopping.clone(), accept);
    let server = router.serve_with_incoming_shutdown(incoming, stopping.clone().cancelled_owned());

    // The server future ends once every connection has closed, which each does as soon
    // as it has no call in flight; the grace only bounds calls that do not finish.
    let grace = config.shutdown_grace;
    tokio::select! {
        result = server => result?,
        () = async { stopping.cancelled().await; tokio::time::sleep(grace).await } => {
            match calls.get() {
                0 => tracing::info!(?grace, "shutdown grace period over; closing connections that did not drain"),
                dropped => tracing::warn!(?grace, dropped, "shutdown grace period over; dropping the calls still in flight"),
            }
        }
    }
    iv_table.save().await;
    Ok(())
}

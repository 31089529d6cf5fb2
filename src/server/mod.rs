//! The whole gRPC server as one type: the solver service and its Arrow Flight door,
//! health, reflection, limits, TLS, metrics, connection ageing, the Connect protocol's
//! HTTP/JSON calls for curl (off with `--no-connect`), gRPC-Web for browsers (behind
//! `--grpc-web`) and the lifecycle of the table games' tables.
//!
//! [`Server::bind`] does everything that can fail (TLS files, the table files, the
//! ports), so that a server that has bound has started; [`Server::run`] serves until
//! its shutdown future resolves, then drains. The binary, the bulk client's embedded
//! server and the tests all go through these two steps.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use futures::stream::BoxStream;
use futures::Stream;
use tokio::io::DuplexStream;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::codec::CompressionEncoding;
use tonic::Status;
use tonic_health::ServingStatus;
use tower::util::option_layer;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::columnar::Descriptor;
use crate::games::Tables;
use crate::pb;
use crate::pb::game_solver_service_server::GameSolverServiceServer;
use crate::service::connect::ConnectLayer;
use crate::service::{FlightServer, FlightSolverService, GameSolverService};
use crate::solver::Solver;
use metrics::Metrics as ServerMetrics;
use tables::TableLifecycle;

pub mod config;
mod connection;
pub mod dev_cert;
mod grpc_codes;
mod grpc_web;
mod limits;
mod log_limit;
pub mod metrics;
mod metrics_endpoint;
mod panics;
mod process_metrics;
mod tables;
pub mod tls;
mod traces;

pub use log_limit::LogRateLimit;
pub use metrics::Metrics;
pub use panics::log_panics;
pub use tables::TableError;
pub use tls::{ReloadableTls, TlsSettings};
pub use traces::{Traces, TracesError};

pub use config::ServerConfig;

/// The service name that health checks and reflection report (the generated constant).
pub use crate::pb::game_solver_service_server::SERVICE_NAME;

/// What stops the server from starting or serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A port could not be bound.
    #[error("cannot listen on {addr}{what}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Which port (empty for the gRPC port).
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The TLS files cannot be used. Not a `source`, as for the table files: `{:#}`
    /// would print the reason twice.
    #[error("cannot load the TLS files: {0}")]
    Tls(tls::TlsError),
    /// The HTTP/2 transport failed.
    #[error("transport: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The reflection service could not be built from the descriptor sets.
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// A table file cannot be used (see `TableStore::open`). Not a `source`: the
    /// message already carries it, and `{:#}` would print it twice.
    #[error("{0}")]
    Table(TableError),
    /// `--peer-header` and `--trusted-proxy` do not come together.
    #[error(transparent)]
    Proxies(#[from] config::ProxyConfigError),
    /// A `--grpc-web-origin` is not an origin.
    #[error("--grpc-web-origin {origin}: {reason}")]
    GrpcWebOrigin {
        /// The origin as given.
        origin: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A server that has bound its ports and loaded its files, ready to [`run`](Server::run).
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    tls: Option<Arc<ReloadableTls>>,
    tables: Arc<Tables>,
    /// One a table game, in the order of `GameKind::ALL`.
    table_lifecycles: Vec<TableLifecycle>,
    metrics: ServerMetrics,
    /// CORS for gRPC-Web's origins, with `--grpc-web`.
    cors: Option<CorsLayer>,
    /// Where [`InProcess`] handles send their connections, once one was asked for.
    in_process: Option<mpsc::Receiver<DuplexStream>>,
    /// One solver behind every door: the same tables, pool and problem counts.
    solver: Arc<Solver>,
    /// The Flight door over it, one for the server: its clones (the listener's service,
    /// [`InProcess`] handles) share its spare batch vectors, which are bounded server-wide.
    flight: FlightSolverService,
}

/// Opens connections to a [`Server`] from the same process, over an in-memory pipe
/// instead of a socket: for the bulk client's embedded server, whose every byte would
/// otherwise cross the kernel's loopback TCP twice. A connection opened here is one
/// like any other past the socket (the same connection bounds, handshake deadline,
/// preface check, HTTP/2 settings, layers and limits), counted as the loopback client
/// 127.0.0.1, and plaintext whatever the TLS settings, since it never leaves the
/// process. Cheap to clone.
#[derive(Debug, Clone)]
pub struct InProcess {
    connections: mpsc::Sender<DuplexStream>,
    flight: FlightSolverService,
}

impl InProcess {
    /// Bytes a pipe holds each way before the writer waits for the reader: room for
    /// several HTTP/2 frames (16 KiB each) per wake-up.
    const PIPE_BYTES: usize = 256 << 10;

    /// Opens a connection; `ConnectionRefused` once the server has stopped.
    pub async fn connect(&self) -> std::io::Result<DuplexStream> {
        let (ours, theirs) = tokio::io::duplex(Self::PIPE_BYTES);
        match self.connections.send(theirs).await {
            Ok(()) => Ok(ours),
            Err(_) => {
                Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "the server has stopped"))
            }
        }
    }

    /// A Flight exchange without a connection: `batches` answered as `DoExchange` answers
    /// them, by the same solver ([`FlightSolverService::exchange_in_process`]).
    pub fn exchange(
        &self,
        descriptor: Descriptor,
        batches: impl Stream<Item = RecordBatch> + Send + 'static,
    ) -> BoxStream<'static, Result<RecordBatch, Status>> {
        self.flight.exchange_in_process(descriptor, batches)
    }
}

impl Server {
    /// Step 1: everything that can fail before serving, in the order a person fixes
    /// them: the proxy flags, the gRPC-Web origins, the TLS files, the table file (loaded
    /// now, so that the first call is answered from it), then the ports. Nothing is
    /// served yet; the open-file limit is raised and `--max-connections` fitted under it
    /// first.
    pub async fn bind(mut config: ServerConfig) -> Result<Server, ServeError> {
        connection::open_files::fit_connections(&mut config);
        config.limits.check_proxies()?;
        let cors = Self::cors(&config.http2)?;
        let tls = match config.tls.settings() {
            Some(settings) => {
                let (tls, loaded) = ReloadableTls::load(settings).map_err(ServeError::Tls)?;
                tls.log_loaded(&loaded, "TLS certificates loaded");
                Some(Arc::new(tls))
            }
            None => None,
        };
        let tables = Arc::new(config.tables.tables());
        let metrics = ServerMetrics::new(Arc::clone(&tables));
        let table_lifecycles =
            TableLifecycle::open_all(&tables, &config.tables, &metrics).await.map_err(ServeError::Table)?;
        let bind = |addr: SocketAddr, what: &'static str| async move {
            TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, what, source })
        };
        let solver = Arc::new(
            Solver::new(Arc::clone(&tables), config.solver.clone()).with_observer(Arc::new(metrics.clone())),
        );
        let flight = FlightSolverService::new(Arc::clone(&solver), config.limits.max_message_bytes);
        let listener = bind(config.listen, "").await?;
        let metrics_listener = match config.observability.metrics_listen {
            Some(addr) => Some(bind(addr, " for metrics").await?),
            None => None,
        };
        Ok(Server {
            config,
            listener,
            metrics_listener,
            tls,
            tables,
            table_lifecycles,
            metrics,
            cors,
            in_process: None,
            solver,
            flight,
        })
    }

    /// A handle that opens connections to this server from the same process; every
    /// handle feeds the same queue of connections, which the accept loop takes as it takes
    /// the listener's.
    pub fn in_process(&mut self) -> InProcess {
        // A connection waits here only until the accept loop's next turn.
        const QUEUED: usize = 16;
        let (connections, queue) = mpsc::channel(QUEUED);
        // A second call replaces the first's queue: its handles then see a stopped server.
        self.in_process = Some(queue);
        InProcess { connections, flight: self.flight.clone() }
    }

    /// The address the gRPC port is bound to (the port picked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    /// The address of the metrics port, when there is one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener.as_ref().map(|listener| listener.local_addr().expect("bound"))
    }

    /// The TLS configuration in use, to reload on SIGHUP.
    pub fn tls(&self) -> Option<Arc<ReloadableTls>> {
        self.tls.clone()
    }

    /// The tables the server answers the table-driven games from.
    pub fn tables(&self) -> Arc<Tables> {
        Arc::clone(&self.tables)
    }

    /// Step 2: serves until `shutdown` resolves, then drains in-flight calls for at
    /// most the shutdown grace, and saves the table if it grew.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
        let Server {
            config,
            listener,
            metrics_listener,
            tls,
            tables: _,
            table_lifecycles,
            metrics,
            cors,
            in_process,
            solver,
            flight,
        } = self;
        let calls = limits::CallCount::new(&config);
        let stopping = CancellationToken::new();
        let health = Self::health().await;
        // Outermost first. With --grpc-web, CORS answers a browser's preflight before
        // anything else (it is no call: neither counted nor limited) and adds its grant to
        // every answer, refusals included, so that the page can read their status; then
        // GrpcWebOnlyLayer turns a gRPC-Web call into a plain gRPC one, and ConnectLayer a
        // Connect call, so that the call span, the metrics, the limits (framing, inflation,
        // the memory budget) and the codes see it as any other call (tests/grpc_web.rs and
        // tests/connect.rs check their metrics); a Connect JSON message is decoded by the
        // limits, charged to the request budget, once whole and inflated. The metrics see the
        // limits' refusals and the codes as rewritten by GrpcCodesLayer. Without
        // --otlp-endpoint there is no call span layer at all.
        let grpc_web = config.http2.grpc_web.then_some(grpc_web::GrpcWebOnlyLayer);
        let max_message_bytes = config.limits.max_message_bytes;
        let connect = (!config.http2.no_connect)
            .then(|| ConnectLayer::new(max_message_bytes, config.http2.compress_responses));
        let call_spans = config.observability.otlp_endpoint.as_ref().map(|_| traces::CallSpanLayer);
        let router = Self::transport(&config)
            .layer(option_layer(cors))
            .layer(option_layer(grpc_web))
            .layer(option_layer(connect))
            .layer(option_layer(call_spans))
            .layer(metrics::CallMetricsLayer { metrics: metrics.clone() })
            .layer(limits::CallLimitsLayer::new(&config, calls.clone()))
            .layer(grpc_codes::GrpcCodesLayer { request_timeout: config.limits.request_timeout.0 })
            .add_service(health.1)
            .add_service(Self::reflection().build_v1()?)
            .add_service(Self::reflection().build_v1alpha()?)
            .add_service(Self::solver_service(&config, solver))
            .add_service(Self::flight_service(&config, flight));

        if let Some(listener) = metrics_listener {
            let limits = config.observability.endpoint_limits(config.limits.grouping());
            tokio::spawn(metrics::serve_metrics(listener, metrics.clone(), limits, stopping.clone()));
        }
        for lifecycle in &table_lifecycles {
            lifecycle.precompute_in_background(&config.tables);
        }
        tokio::spawn(Self::stop_on(shutdown, health.0, calls.clone(), stopping.clone()));

        tracing::info!(addr = %listener.local_addr().map_or_else(|e| e.to_string(), |a| a.to_string()), tls = tls.is_some(), connect = !config.http2.no_connect, grpc_web = config.http2.grpc_web, "serving");
        let incoming = Self::incoming(&config, listener, in_process, tls, metrics, stopping.clone());
        let server = router.serve_with_incoming_shutdown(incoming, stopping.clone().cancelled_owned());

        // The server future ends once every connection has closed, which each does as soon
        // as it has no call in flight; the grace only bounds calls that do not finish.
        let grace = config.shutdown_grace.0;
        tokio::select! {
            result = server => result?,
            () = async { stopping.cancelled().await; tokio::time::sleep(grace).await } => {
                match calls.get() {
                    0 => tracing::info!(?grace, "shutdown grace period over; closing connections that did not drain"),
                    dropped => tracing::warn!(?grace, dropped, "shutdown grace period over; dropping the calls still in flight"),
                }
            }
        }
        futures::future::join_all(table_lifecycles.into_iter().map(TableLifecycle::save)).await;
        Ok(())
    }

    /// The health service, every service `SERVING`.
    async fn health() -> (
        tonic_health::server::HealthReporter,
        tonic_health::pb::health_server::HealthServer<impl tonic_health::pb::health_server::Health>,
    ) {
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter.set_service_status(SERVICE_NAME, ServingStatus::Serving).await;
        reporter.set_service_status("", ServingStatus::Serving).await;
        (reporter, service)
    }

    /// Reflection over the solver's, health's and the rich-error types' descriptors.
    fn reflection() -> tonic_reflection::server::Builder<'static> {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            // google.rpc.ErrorInfo and BadRequest, so that grpcurl and other reflection
            // clients can print an error's details.
            .register_encoded_file_descriptor_set(tonic_types::pb::FILE_DESCRIPTOR_SET)
    }

    /// The solver service, with the message and compression settings.
    fn solver_service(
        config: &ServerConfig,
        solver: Arc<Solver>,
    ) -> GameSolverServiceServer<GameSolverService> {
        let max = config.limits.max_message_bytes;
        let service = GameSolverServiceServer::new(GameSolverService::new(solver))
            .max_decoding_message_size(max)
            .max_encoding_message_size(max)
            .accept_compressed(CompressionEncoding::Gzip)
            .accept_compressed(CompressionEncoding::Zstd);
        match config.http2.compress_responses {
            true => {
                service.send_compressed(CompressionEncoding::Zstd).send_compressed(CompressionEncoding::Gzip)
            }
            false => service,
        }
    }

    /// The Arrow Flight door over the same solver, with the same message and compression
    /// settings.
    fn flight_service(config: &ServerConfig, flight: FlightSolverService) -> FlightServer {
        FlightServer::new(flight, config.limits.max_message_bytes, config.http2.compress_responses)
    }

    /// CORS for browsers, with `--grpc-web`: the listed origins may make gRPC-Web calls
    /// and Connect calls (POST, and Connect's GET form) and read their status and details;
    /// `None` without `--grpc-web`.
    fn cors(http2: &config::Http2Config) -> Result<Option<CorsLayer>, ServeError> {
        if !http2.grpc_web {
            return Ok(None);
        }
        let origins = http2.grpc_web_origin.iter().map(|origin| {
            config::parse_origin(origin)
                .and_then(|origin| http::HeaderValue::try_from(origin).map_err(|err| err.to_string()))
                .map_err(|reason| ServeError::GrpcWebOrigin { origin: origin.clone(), reason })
        });
        let names = |names: &[&'static str]| {
            names.iter().copied().map(http::HeaderName::from_static).collect::<Vec<_>>()
        };
        let cors = CorsLayer::new()
            .allow_origin(AllowOrigin::list(origins.collect::<Result<Vec<_>, _>>()?))
            .allow_methods([http::Method::POST, http::Method::GET, http::Method::OPTIONS])
            // What gRPC-Web clients send (grpc-web's and Connect's), then what Connect
            // clients send to the Connect door (the headers of @connectrpc/cors's list and
            // of the protocol's compression); the compression headers for clients that
            // compress, as the server accepts gzip and zstd.
            .allow_headers(names(&[
                "content-type",
                "x-grpc-web",
                "x-user-agent",
                "grpc-timeout",
                "grpc-encoding",
                "grpc-accept-encoding",
                "connect-protocol-version",
                "connect-timeout-ms",
                "content-encoding",
                "accept-encoding",
                "connect-content-encoding",
                "connect-accept-encoding",
            ]))
            .expose_headers(names(&["grpc-status", "grpc-message", "grpc-status-details-bin"]));
        Ok(Some(cors))
    }

    /// tonic's HTTP/2 settings, and HTTP/1.1 for the Connect door and gRPC-Web.
    fn transport(config: &ServerConfig) -> tonic::transport::Server {
        let http2 = &config.http2;
        let builder = tonic::transport::Server::builder()
            .accept_http1(http2.accepts_http1())
            .max_concurrent_streams(http2.max_concurrent_streams)
            .initial_stream_window_size(http2.http2_stream_window)
            .initial_connection_window_size(http2.http2_connection_window)
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(10)));
        match http2.max_connection_age.0 {
            Some(age) => builder.max_connection_age(age),
            None => builder,
        }
    }

    /// The stream of connections: the accept loop's bounds, TLS, and the forced close
    /// after the connection age's grace.
    fn incoming(
        config: &ServerConfig,
        listener: TcpListener,
        in_process: Option<mpsc::Receiver<DuplexStream>>,
        tls: Option<Arc<ReloadableTls>>,
        metrics: ServerMetrics,
        stopping: CancellationToken,
    ) -> connection::accept::Incoming<connection::socket::Accept> {
        let http2 = &config.http2;
        let forced_close_after = http2
            .max_connection_age_grace
            .0
            .map(|grace| http2.max_connection_age.0.unwrap_or_default() + grace);
        let limits = connection::accept::ConnectionLimits {
            max_connections: config.limits.max_connections,
            max_connections_per_peer: config.limits.max_connections_per_peer,
            grouping: config.limits.grouping(),
            idle_under_pressure: config.limits.idle_under_pressure.0,
            handshake_timeout: config.limits.handshake_timeout.0,
            idle_timeout: config.limits.connection_idle_timeout.0,
            accept_http1: http2.accepts_http1(),
        };
        let handshake = connection::socket::Accept { tls, forced_close_after, metrics };
        connection::accept::Incoming::new(listener, in_process, limits, stopping, handshake)
    }

    /// Waits for `shutdown`, then reports NOT_SERVING and tells the connections to close.
    async fn stop_on(
        shutdown: impl Future<Output = ()>,
        health: tonic_health::server::HealthReporter,
        calls: limits::CallCount,
        stopping: CancellationToken,
    ) {
        shutdown.await;
        tracing::info!(
            calls_in_flight = calls.get(),
            "shutting down: no new connections; closing idle ones; draining in-flight calls"
        );
        health.set_service_status(SERVICE_NAME, ServingStatus::NotServing).await;
        health.set_service_status("", ServingStatus::NotServing).await;
        stopping.cancel();
    }
}

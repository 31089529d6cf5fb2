//! `gamesolver-server`: parses flags, sets up logging, and runs [`gamesolver::server::serve`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use gamesolver::games::StoneGameIvTable;
use gamesolver::server::tls::LoadedTls;
use gamesolver::server::{self, ReloadableTls, ServerConfig, TlsSettings};
use gamesolver::service::SolverConfig;

/// gRPC server solving Sum Game, Stone Game IX and Stone Game IV exactly.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Largest gRPC message accepted or sent, in bytes.
    #[arg(long, default_value_t = ServerConfig::default().max_message_bytes)]
    max_message_bytes: usize,
    /// Seconds that in-flight calls get to finish after SIGINT/SIGTERM.
    #[arg(long, default_value_t = ServerConfig::default().shutdown_grace.as_secs_f64())]
    shutdown_timeout: f64,
    /// Upper bound in seconds on any call (a client's shorter deadline wins); 0 is none.
    #[arg(long)]
    request_timeout: Option<f64>,
    /// Concurrent calls allowed on one HTTP/2 connection.
    #[arg(long, default_value_t = ServerConfig::default().max_concurrent_streams)]
    max_concurrent_streams: u32,
    /// Largest Stone Game IV pile answered (OUT_OF_RANGE beyond it).
    #[arg(long, default_value_t = ServerConfig::default().iv_table.limit())]
    iv_max_n: u64,
    /// Stone Game IV piles classified at start-up, in the background while serving.
    #[arg(long, default_value_t = ServerConfig::default().iv_precompute)]
    iv_precompute: u64,
    /// Stone Game IV table file: loaded at start (recomputed if damaged; refused if its
    /// directory is missing or it is not a table), saved after the start-up precompute
    /// and at shutdown when the table has grown.
    #[arg(long)]
    iv_table: Option<PathBuf>,
    /// HTTP/2 receive window of one stream, in bytes (default: hyper's, 1 MiB).
    #[arg(long)]
    http2_stream_window: Option<u32>,
    /// HTTP/2 receive window of one connection, in bytes (default: hyper's).
    #[arg(long)]
    http2_connection_window: Option<u32>,
    /// Compress responses for clients that accept gzip or zstd (requests are always
    /// accepted compressed).
    #[arg(long)]
    compress_responses: bool,
    /// Problems whose input is at most this many bytes/stones are solved inline.
    #[arg(long, default_value_t = SolverConfig::default().inline_work)]
    inline_work: usize,
    /// Bytes of decoded problems one streaming call may have in flight before the server
    /// stops reading from it (HTTP/2 flow control then holds the client back).
    #[arg(long, default_value_t = SolverConfig::default().stream_in_flight_bytes)]
    stream_in_flight_bytes: usize,
    /// Async worker threads (gRPC I/O, small problems); default: one per core.
    #[arg(long)]
    worker_threads: Option<std::num::NonZeroUsize>,
    /// Solver pool threads (large problems and batches); default: one per core.
    #[arg(long)]
    solver_threads: Option<std::num::NonZeroUsize>,
    /// PEM certificate chain: serve TLS (with --tls-key); SIGHUP rereads the files.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// PEM CA certificates: require client certificates signed by them (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    tls_client_ca: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics (plaintext; off by default).
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Seconds after which a connection is sent a GOAWAY (its calls finish; the client
    /// reconnects, perhaps to another replica); default: never.
    #[arg(long)]
    max_connection_age: Option<f64>,
    /// Seconds after --max-connection-age that a connection is closed, calls and all.
    #[arg(long)]
    max_connection_age_grace: Option<f64>,
    /// Log lines as text for people or as JSON objects for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Connections open at once; beyond it new ones wait in the kernel's backlog.
    #[arg(long, default_value_t = ServerConfig::default().max_connections)]
    max_connections: usize,
    /// Seconds a new connection has to finish its handshake and send the HTTP/2 preface.
    #[arg(long, default_value_t = ServerConfig::default().handshake_timeout.as_secs_f64())]
    handshake_timeout: f64,
    /// Seconds without a call in flight after which a connection is closed; 0 is never.
    #[arg(long, default_value_t = seconds_or_zero(ServerConfig::default().connection_idle_timeout))]
    connection_idle_timeout: f64,
    /// Calls in flight on the server (health checks aside); beyond: RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = ServerConfig::default().max_calls)]
    max_calls: usize,
    /// Calls in flight on one connection (health checks aside); beyond: RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = ServerConfig::default().max_calls_per_connection)]
    max_calls_per_connection: usize,
    /// Bytes of (inflated) request messages all calls together may hold.
    #[arg(long, default_value_t = ServerConfig::default().max_request_bytes_in_flight)]
    max_request_bytes_in_flight: usize,
    /// Seconds a stream may send nothing while the server has nothing left to answer
    /// before it ends with DEADLINE_EXCEEDED; 0 is never.
    #[arg(long, default_value_t = seconds_or_zero(SolverConfig::default().stream_idle_timeout))]
    stream_idle_timeout: f64,
}

/// How log lines are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// One human-readable line an event.
    Text,
    /// One JSON object a line.
    Json,
}

/// A timeout flag's value: `None` is 0.
fn seconds_or_zero(timeout: Option<Duration>) -> f64 {
    timeout.map_or(0.0, |t| t.as_secs_f64())
}

/// mimalloc instead of glibc malloc: the server allocates and frees a buffer per message.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args = Args::parse();
    let format = args.log_format;
    init_logging(format);
    gamesolver::allocator::return_freed_memory();
    let result = build_runtime(&args).and_then(|runtime| {
        let result = runtime.block_on(run(args));
        // A table extension still running on the blocking pool must not hold the exit.
        runtime.shutdown_timeout(Duration::from_secs(1));
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Once: as a JSON event for collectors, as a plain line for people.
        Err(err) if format == LogFormat::Json => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("gamesolver-server: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging(format: LogFormat) {
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::prelude::*;
    let env_filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    // Lines a peer can cause (h2's and hyper's) are rate-limited per call site.
    let filter = env_filter.and(server::LogRateLimit::default());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            let logs = logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
            tracing_subscriber::registry().with(logs.with_filter(filter)).init();
        }
        LogFormat::Json => {
            let logs = logs.json().flatten_event(true).with_current_span(false);
            tracing_subscriber::registry().with(logs.with_filter(filter)).init();
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let seconds = |s: f64, flag: &str| {
        Duration::try_from_secs_f64(s)
            .with_context(|| format!("--{flag} must be a non-negative number of seconds"))
    };
    // An absent or zero duration is none.
    let optional = |s: Option<f64>, flag: &str| -> anyhow::Result<Option<Duration>> {
        Ok(s.map(|s| seconds(s, flag)).transpose()?.filter(|d| !d.is_zero()))
    };
    let tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => {
            let settings = TlsSettings { cert, key, client_ca: args.tls_client_ca };
            let (tls, loaded) = ReloadableTls::load(settings).context("cannot load the TLS files")?;
            log_loaded(&tls, &loaded, "TLS certificates loaded");
            Some(Arc::new(tls))
        }
        _ => None,
    };
    let metrics_listener = match args.metrics_listen {
        Some(addr) => Some(Arc::new(
            std::net::TcpListener::bind(addr)
                .with_context(|| format!("cannot listen on {addr} for metrics"))?,
        )),
        None => None,
    };
    // A flag whose 0 means none.
    let zero_is_none = |s: f64, flag: &str| seconds(s, flag).map(|d| (!d.is_zero()).then_some(d));
    let config = ServerConfig {
        max_message_bytes: args.max_message_bytes,
        shutdown_grace: seconds(args.shutdown_timeout, "shutdown-timeout")?,
        max_concurrent_streams: args.max_concurrent_streams,
        request_timeout: optional(args.request_timeout, "request-timeout")?,
        solver: SolverConfig {
            inline_work: args.inline_work,
            stream_in_flight_bytes: args.stream_in_flight_bytes,
            stream_idle_timeout: zero_is_none(args.stream_idle_timeout, "stream-idle-timeout")?,
            ..SolverConfig::default()
        },
        iv_table: Arc::new(StoneGameIvTable::new(args.iv_max_n)),
        iv_precompute: args.iv_precompute,
        iv_table_file: args.iv_table,
        http2_stream_window: args.http2_stream_window,
        http2_connection_window: args.http2_connection_window,
        compress_responses: args.compress_responses,
        tls: tls.clone(),
        metrics_listener: metrics_listener.clone(),
        max_connection_age: optional(args.max_connection_age, "max-connection-age")?,
        max_connection_age_grace: optional(args.max_connection_age_grace, "max-connection-age-grace")?,
        max_connections: args.max_connections,
        handshake_timeout: seconds(args.handshake_timeout, "handshake-timeout")?,
        connection_idle_timeout: zero_is_none(args.connection_idle_timeout, "connection-idle-timeout")?,
        max_calls: args.max_calls,
        max_calls_per_connection: args.max_calls_per_connection,
        max_request_bytes_in_flight: args.max_request_bytes_in_flight,
    };
    match server::raise_open_file_limit() {
        Ok(limit) => tracing::info!(limit, "open-file limit"),
        Err(err) => tracing::warn!(%err, "cannot raise the open-file limit"),
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let shutdown = shutdown_signal()?;
    if let Some(tls) = tls {
        reload_on_sighup(tls)?;
    }
    let addr = listener.local_addr()?;
    // The lines on stdout, for scripts that start the server on port 0.
    println!("listening on {addr}");
    if let Some(metrics) = &metrics_listener {
        println!("metrics on {}", metrics.local_addr()?);
    }
    server::serve(listener, config, shutdown).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Logs what a TLS load read: the server certificate and any client CAs.
fn log_loaded(tls: &ReloadableTls, loaded: &LoadedTls, message: &str) {
    let settings = tls.settings();
    tracing::info!(
        cert = %settings.cert.display(),
        key = %settings.key.display(),
        certificate = %loaded.cert,
        "{message}"
    );
    for ca in &loaded.client_cas {
        let client_ca = settings.client_ca.as_deref().unwrap_or(std::path::Path::new("")).display();
        tracing::info!(%client_ca, certificate = %ca, "client CA loaded: client certificates are required");
    }
}

/// On each SIGHUP, rereads the TLS files; a failure is logged and the old ones stay.
fn reload_on_sighup(tls: Arc<ReloadableTls>) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut hangups = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match tls.reload() {
                    Ok(loaded) => log_loaded(&tls, &loaded, "SIGHUP: TLS certificates reloaded"),
                    Err(err) => {
                        tracing::error!("SIGHUP: TLS reload failed, keeping the previous certificates: {err}")
                    }
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = tls;
    Ok(())
}

/// The tokio runtime and rayon's global pool, sized by the flags.
fn build_runtime(args: &Args) -> anyhow::Result<tokio::runtime::Runtime> {
    if let Some(threads) = args.solver_threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads.get())
            .thread_name(|i| format!("solver-{i}"))
            .build_global()
            .context("building the solver pool")?;
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = args.worker_threads {
        runtime.worker_threads(threads.get());
    }
    runtime.enable_all().build().context("building the async runtime")
}

/// Installs the SIGINT/SIGTERM handlers now (before the address is printed, so that a
/// script's early signal is not lost) and returns a future that resolves on the first.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => tracing::info!("SIGINT received"),
                _ = terminate.recv() => tracing::info!("SIGTERM received"),
            }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

//! `gamesolver-server`: parses flags, sets up logging, and runs [`gamesolver::server::serve`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use gamesolver::games::{stone_game_iv, StoneGameIvTable};
use gamesolver::iv_table_file::{self, IvTableStore};
use gamesolver::server::{self, ServerConfig};
use gamesolver::service::SolverConfig;

/// gRPC server solving Sum Game, Stone Game IX and Stone Game IV exactly.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: SocketAddr,
    /// Largest gRPC message accepted or sent, in bytes.
    #[arg(long, default_value_t = server::DEFAULT_MAX_MESSAGE_BYTES)]
    max_message_bytes: usize,
    /// Seconds that in-flight calls get to finish after SIGINT/SIGTERM.
    #[arg(long, default_value_t = 30.0)]
    shutdown_timeout: f64,
    /// Upper bound in seconds on any call (a client's shorter deadline wins); 0 is none.
    #[arg(long, default_value_t = 0.0)]
    request_timeout: f64,
    /// Concurrent calls allowed on one HTTP/2 connection.
    #[arg(long, default_value_t = 1024)]
    max_concurrent_streams: u32,
    /// Largest Stone Game IV pile answered (OUT_OF_RANGE beyond it).
    #[arg(long, default_value_t = stone_game_iv::DEFAULT_LIMIT)]
    iv_max_n: u64,
    /// Stone Game IV piles classified at start-up, in the background while serving.
    #[arg(long, default_value_t = DEFAULT_IV_PRECOMPUTE)]
    iv_precompute: u64,
    /// Stone Game IV table file: loaded at start (recomputed if missing or corrupt),
    /// saved after the start-up precompute and at shutdown when the table has grown.
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

/// A timeout flag's value: `None` is 0.
fn seconds_or_zero(timeout: Option<Duration>) -> f64 {
    timeout.map_or(0.0, |t| t.as_secs_f64())
}

/// mimalloc instead of glibc malloc: the server allocates and frees a buffer per message.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc v3's `mimalloc.h` (libmimalloc-sys exports no
/// constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory goes back to the OS after this many milliseconds (mimalloc v2's default;
/// v3's is 1,000): 48 parallel 60 MB requests peaked at 580 MB with v3's (`bench/soak.sh`).
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// Hands freed memory back to the OS each second. mimalloc purges freed segments only
/// when some thread allocates again, so after a spike an idle server kept its peak RSS
/// (a refused 1 GiB gzip bomb: 212 MB, and 212 MB after); `bench/soak.sh` measures it.
fn return_freed_memory() {
    // SAFETY: sets one of mimalloc's option values; any thread may, at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    let spawned = std::thread::Builder::new().name("mimalloc-purge".into()).spawn(|| loop {
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: mi_collect only walks mimalloc's own structures; any thread may call it.
        unsafe { libmimalloc_sys::mi_collect(false) };
    });
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start the memory purge thread");
    }
}

/// 2·10^7 piles take 0.26 s on two idle cores; requests for larger piles grow the
/// table on demand anyway (all of 10^9 in about 16 s).
const DEFAULT_IV_PRECOMPUTE: u64 = 20_000_000;

fn main() -> ExitCode {
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::prelude::*;
    let env_filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    // Lines a peer can cause (h2's and hyper's) are rate-limited per call site.
    let filter = env_filter.and(server::LogRateLimit::default());
    let format = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    tracing_subscriber::registry().with(format.with_filter(filter)).init();
    let args = Args::parse();
    return_freed_memory();
    let result = build_runtime(&args).and_then(|runtime| {
        let result = runtime.block_on(run(args));
        // A table extension still running on the blocking pool must not hold the exit.
        runtime.shutdown_timeout(Duration::from_secs(1));
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            eprintln!("gamesolver-server: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let seconds = |s: f64, flag: &str| {
        Duration::try_from_secs_f64(s)
            .with_context(|| format!("--{flag} must be a non-negative number of seconds"))
    };
    let request_timeout = seconds(args.request_timeout, "request-timeout")?;
    let optional = |s: f64, flag: &str| seconds(s, flag).map(|d| (!d.is_zero()).then_some(d));
    let config = ServerConfig {
        max_message_bytes: args.max_message_bytes,
        shutdown_grace: seconds(args.shutdown_timeout, "shutdown-timeout")?,
        max_concurrent_streams: args.max_concurrent_streams,
        request_timeout: (!request_timeout.is_zero()).then_some(request_timeout),
        solver: SolverConfig {
            inline_work: args.inline_work,
            stream_in_flight_bytes: args.stream_in_flight_bytes,
            stream_idle_timeout: optional(args.stream_idle_timeout, "stream-idle-timeout")?,
            ..SolverConfig::default()
        },
        iv_table: Arc::new(StoneGameIvTable::new(args.iv_max_n)),
        http2_stream_window: args.http2_stream_window,
        http2_connection_window: args.http2_connection_window,
        compress_responses: args.compress_responses,
        max_connections: args.max_connections,
        handshake_timeout: seconds(args.handshake_timeout, "handshake-timeout")?,
        connection_idle_timeout: optional(args.connection_idle_timeout, "connection-idle-timeout")?,
        max_calls: args.max_calls,
        max_calls_per_connection: args.max_calls_per_connection,
        max_request_bytes_in_flight: args.max_request_bytes_in_flight,
    };
    match server::raise_open_file_limit() {
        Ok(limit) => tracing::info!(limit, "open-file limit"),
        Err(err) => tracing::warn!(%err, "cannot raise the open-file limit"),
    }
    let iv_store = args.iv_table.map(|path| Arc::new(IvTableStore::new(path)));
    if let Some(store) = &iv_store {
        let (store, table) = (Arc::clone(store), Arc::clone(&config.iv_table));
        tokio::task::spawn_blocking(move || store.load_or_report(&table)).await?;
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let shutdown = shutdown_signal()?;
    let addr = listener.local_addr()?;
    iv_table_file::precompute_in_background(
        Arc::clone(&config.iv_table),
        args.iv_precompute,
        iv_store.clone(),
    );
    // The one line on stdout, for scripts that start the server on port 0.
    println!("listening on {addr}");
    tracing::info!(%addr, "gamesolver-server ready");
    let iv_table = Arc::clone(&config.iv_table);
    server::serve(listener, config, shutdown).await?;
    if let Some(store) = iv_store {
        tokio::task::spawn_blocking(move || store.save_or_report(&iv_table)).await?;
    }
    tracing::info!("stopped");
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

//! `gamesolver-server`: parses flags, sets up logging, and runs [`gamesolver::server::Server`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use gamesolver::games::GameKind;
use gamesolver::server::dev_cert::{self, DevCertRequest};
use gamesolver::server::{self, ReloadableTls, ServerConfig, Traces};

/// gRPC and Arrow Flight server solving {games} exactly.
///
/// Every flag can also be set in the environment as `GAMESOLVER_<FLAG>` (upper case, `-`
/// as `_`, for example GAMESOLVER_MAX_CALLS=2048); a flag on the command line wins.
/// Without a command it serves; the commands are tools beside it, and take none of the
/// serving flags.
#[derive(Debug, Parser)]
#[command(name = "gamesolver-server", version, about, long_about, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    config: ServerConfig,
    /// Log lines as text for people or as JSON objects for log collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, help_heading = "Observability")]
    log_format: LogFormat,
    /// Async worker threads (gRPC I/O, small problems); default: one per core.
    #[arg(long, help_heading = "Solving")]
    worker_threads: Option<std::num::NonZeroUsize>,
    /// Solver pool threads (large problems and batches); default: one per core.
    #[arg(long, help_heading = "Solving")]
    solver_threads: Option<std::num::NonZeroUsize>,
    /// Check the flags and the files they name (TLS files, the table file's directory),
    /// bind nothing, print `config ok` and exit 0; or print the problem and exit 2.
    #[arg(long)]
    check_config: bool,
}

/// The tools beside serving.
#[derive(Debug, Subcommand)]
enum Command {
    /// Writes a CA, a server certificate (localhost, 127.0.0.1, ::1 and each --host) and
    /// a client certificate for trying TLS and mutual TLS locally, and prints the command
    /// lines that use them.
    DevCert {
        /// The directory to write ca.pem, ca.key, server.pem, server.key, client.pem and
        /// client.key into; created if missing.
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// Another name for the server certificate (a DNS name or an IP address);
        /// repeat for more.
        #[arg(long = "host", value_name = "NAME")]
        hosts: Vec<String>,
        /// Overwrite the files of an earlier run.
        #[arg(long)]
        force: bool,
    },
    /// Writes the completion script for SHELL to stdout.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Writes the manual page (roff) to stdout, or every page to --out-dir.
    Man {
        /// Write gamesolver-server.1 and one page a command into this directory (created
        /// if missing).
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// How log lines are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// One human-readable line an event.
    Text,
    /// One JSON object a line.
    Json,
}

/// mimalloc instead of glibc malloc: the server allocates and frees a buffer per message.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The command line: [`Args`], every serving flag readable from the environment.
fn command() -> clap::Command {
    // The games are named from the registry, where the doc comment says {games}; its
    // first paragraph is the short help too.
    let command = Args::command();
    let long_about = command.get_long_about().map(ToString::to_string).unwrap_or_default();
    let long_about = long_about.replace("{games}", &GameKind::titles());
    let about = long_about.split("\n\n").next().unwrap_or_default().to_owned();
    server::config::with_env(command.about(about).long_about(long_about))
}

fn main() -> ExitCode {
    #[cfg(all(unix, not(target_os = "linux")))]
    ignore_hangups_until_handled();
    let matches = command().get_matches();
    let mut args = Args::from_arg_matches(&matches).unwrap_or_else(|err| err.exit());
    if let Some(command) = args.command.take() {
        return match tool(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("gamesolver-server: {err:#}");
                ExitCode::FAILURE
            }
        };
    }
    if args.check_config {
        return check_config(&args.config);
    }
    let format = args.log_format;
    let result = build_runtime(&args).and_then(|runtime| {
        let traces = start_traces(&runtime, &args.config.observability)?;
        init_logging(format, traces.as_ref());
        // A panic a peer can cause is logged rate-limited, not written whole to stderr.
        server::log_panics();
        gamesolver::allocator::return_freed_memory();
        let result = runtime.block_on(run(args));
        // The spans still batched go out while the runtime still carries the exporter.
        if let Some(traces) = traces {
            traces.shutdown();
        }
        // A table extension still running on the blocking pool must not hold the exit.
        runtime.shutdown_timeout(Duration::from_secs(1));
        result
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // Once: as a JSON event for collectors, as a plain line for people.
        Err(err) if format == LogFormat::Json => {
            // Start-up may have failed before logging was set up.
            init_logging(format, None);
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("gamesolver-server: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one of the tools beside serving.
fn tool(tool: Command) -> anyhow::Result<()> {
    match tool {
        Command::DevCert { out_dir, hosts, force } => dev_cert(&DevCertRequest { out_dir, hosts, force }),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "gamesolver-server", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { out_dir: Some(dir) } => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command(), &dir)
                .with_context(|| format!("cannot write the manual pages to {}", dir.display()))
        }
        Command::Man { out_dir: None } => clap_mangen::Man::new(command())
            .render(&mut std::io::stdout().lock())
            .context("cannot write the manual page"),
    }
}

/// `dev-cert`: writes the files, then says what they are and the two command lines that
/// use them (mutual TLS on 127.0.0.1:50051).
fn dev_cert(request: &DevCertRequest) -> anyhow::Result<()> {
    let files = dev_cert::write(request)?;
    let quote = |path: &Path| {
        let path = path.to_string_lossy();
        shlex::try_quote(&path).map(|quoted| quoted.into_owned()).unwrap_or_else(|_| path.into_owned())
    };
    println!(
        "wrote a CA (ca.pem, ca.key), a server certificate for {} (server.pem, server.key) and a client \
         certificate (client.pem, client.key) to {}, valid until {}",
        files.names.join(", "),
        quote(&request.out_dir),
        files.not_after
    );
    println!(
        "gamesolver-server --listen 127.0.0.1:50051 --tls-cert {} --tls-key {} --tls-client-ca {}",
        quote(&files.server_cert),
        quote(&files.server_key),
        quote(&files.ca_cert)
    );
    println!(
        "gamesolver-client solve examples/problems.jsonl --server https://127.0.0.1:50051 --ca-cert {} \
         --client-cert {} --client-key {}",
        quote(&files.ca_cert),
        quote(&files.client_cert),
        quote(&files.client_key)
    );
    Ok(())
}

/// Logs to stderr and, with `traces`, exports spans; does nothing when logging is set up
/// already.
fn init_logging(format: LogFormat, traces: Option<&Traces>) {
    use tracing_subscriber::filter::FilterExt;
    use tracing_subscriber::prelude::*;
    let env_filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    // Lines a peer can cause (h2's and hyper's) are rate-limited per call site.
    let filter = env_filter.and(server::LogRateLimit::default());
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => {
            logs.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).with_filter(filter).boxed()
        }
        // The span list carries the call's trace_id.
        LogFormat::Json => logs
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(true)
            .with_filter(filter)
            .boxed(),
    };
    let subscriber = tracing_subscriber::registry().with(logs);
    // Not `.with(traces.map(..))`: an absent (`None`) layer declares an interest in every
    // call site, which makes every disabled span of h2 and hyper (several a call) a real
    // one in the registry, at a cost every call paid (docs/performance.md).
    let _ = match traces {
        Some(traces) => subscriber.with(traces.layer()).try_init(),
        None => subscriber.try_init(),
    };
}

/// With `--otlp-endpoint`, the trace exporter, on `runtime`, which carries its connection.
fn start_traces(
    runtime: &tokio::runtime::Runtime,
    config: &server::config::ObservabilityConfig,
) -> anyhow::Result<Option<Traces>> {
    let Some(endpoint) = &config.otlp_endpoint else { return Ok(None) };
    let _runtime = runtime.enter();
    Ok(Some(Traces::start(endpoint, &config.otlp_service_name)?))
}

/// `--check-config`: loads what start-up would load, binds nothing.
fn check_config(config: &ServerConfig) -> ExitCode {
    match server::config::check(config) {
        Ok(()) => {
            println!("config ok");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("gamesolver-server: {err}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    // Signal handlers first, so that a script's early signal is not lost, and so that a
    // SIGHUP while the tables load does not end the process (its default action).
    let shutdown = shutdown_signal()?;
    let hangups = hangup_signal()?;
    let server = server::Server::bind(args.config).await?;
    reload_on_sighup(hangups, server.tls());
    // The lines on stdout, for scripts that start the server on port 0: printed only
    // once start-up can no longer fail.
    println!("listening on {}", server.local_addr());
    if let Some(metrics) = server.metrics_addr() {
        println!("metrics on {metrics}");
    }
    server.run(shutdown).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Makes SIGHUP harmless from before `main`, as the C runtime starts the program (an
/// `.init_array` constructor, which runs before the Rust runtime's set-up and `main`), so
/// that a SIGHUP in the milliseconds before the runtime and its handler exist (a
/// `systemctl reload` racing a start) does not end the process, its default action;
/// [`hangup_signal`] then installs the handler that reloads. Only the dynamic loader runs
/// before it (a millisecond or two for a debug build, whose relocations it applies).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static IGNORE_HANGUPS_AT_START: extern "C" fn() = ignore_hangups_until_handled;

/// Ignores SIGHUP, which also drops one already pending, then unblocks it: a SIGHUP
/// blocked by whoever started the process would otherwise never reach the reload
/// handler. Elsewhere than Linux it is the first thing `main` does.
#[cfg(unix)]
extern "C" fn ignore_hangups_until_handled() {
    // SAFETY: SIG_IGN installs no handler code, only a disposition; the mask is this
    // thread's, the only one yet, whose mask every later thread inherits.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        let mut hangup: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut hangup);
        libc::sigaddset(&mut hangup, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &hangup, std::ptr::null_mut());
    }
}

/// The SIGHUP handler, installed now: from here on a SIGHUP reloads.
#[cfg(unix)]
fn hangup_signal() -> anyhow::Result<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{signal, SignalKind};
    signal(SignalKind::hangup()).context("installing the SIGHUP handler")
}

#[cfg(not(unix))]
fn hangup_signal() -> anyhow::Result<()> {
    Ok(())
}

/// On each SIGHUP, rereads the TLS files (a failure is logged and the old ones stay), or
/// says that there is nothing to reload. The flags and the table files are read at
/// start-up only: a table file is the server's own copy of a table it holds whole in
/// memory, so rereading it could only go back.
#[cfg(unix)]
fn reload_on_sighup(mut hangups: tokio::signal::unix::Signal, tls: Option<Arc<ReloadableTls>>) {
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            let Some(tls) = &tls else {
                tracing::info!(
                    "SIGHUP: nothing to reload (no TLS files; flags and tables are read at start-up)"
                );
                continue;
            };
            match tls.reload() {
                Ok(loaded) => tls.log_loaded(&loaded, "SIGHUP: TLS certificates reloaded"),
                Err(err) => {
                    tracing::error!("SIGHUP: TLS reload failed, keeping the previous certificates: {err}")
                }
            }
        }
    });
}

#[cfg(not(unix))]
fn reload_on_sighup((): (), _tls: Option<Arc<ReloadableTls>>) {}

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

//! `gamesolver-client`: parses flags, sets up logging, and runs [`gamesolver::client`].

use std::io::{ErrorKind, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use gamesolver::client::format::Format;
use gamesolver::client::gen::{self, GenConfig};
use gamesolver::client::{
    self, ClientError, ConnectionError, EmbeddedServer, EmbeddedStarter, Exchange, Growing, Growth, Pipe,
    SolveConfig,
};
use gamesolver::flag_env;
use gamesolver::games::table::Table;
use gamesolver::seconds::Seconds;
use gamesolver::server::config::{TableCacheFlags, TablesConfig};
use gamesolver::server::{Server, ServerConfig};

/// Bulk client of gamesolver: solves problem files (JSON lines, Parquet, Arrow, CSV)
/// through gamesolver servers
///
/// Without --server it starts a server in its own process. Answers come out in input
/// order, one per problem, with nothing lost; `solve --resume` continues an interrupted
/// run. Also writes random problem files (`gen`), shell completions and manual pages.
#[derive(Debug, Parser)]
#[command(name = "gamesolver-client", version)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Solves every problem of INPUT; writes one solution per problem, in input order.
    Solve(Box<SolveArgs>),
    /// Writes a deterministic random problem file.
    Gen(GenArgs),
    /// Writes the completion script for SHELL to stdout.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Writes the manual page (roff) to stdout, or every page to --out-dir.
    Man {
        /// Write gamesolver-client.1 and one page a subcommand into this directory (created
        /// if missing).
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
    },
}

/// `solve`'s flags: the library's own, and the embedded server's tables.
#[derive(Debug, clap::Args)]
struct SolveArgs {
    #[command(flatten)]
    config: SolveConfig,
    /// The embedded server's tables: the server's own flags.
    #[command(flatten, next_help_heading = EMBEDDED_SERVER)]
    tables: TablesConfig,
    /// Where the embedded server keeps its tables across runs.
    #[command(flatten, next_help_heading = EMBEDDED_SERVER)]
    cache: TableCacheFlags,
}

/// The help heading of the server flags that `solve` passes to its embedded server.
const EMBEDDED_SERVER: &str = "Embedded server (without --server)";

/// The command line: [`Args`], every subcommand's flags also read from
/// `GAMESOLVER_CLIENT_<FLAG>`, and the embedded server's flags refused beside `--server`
/// (a remote server's tables are its own).
fn command() -> clap::Command {
    let command = Args::command().mut_subcommands(|sub| flag_env::with_env(sub, client::ENV_PREFIX));
    command.mut_subcommand("solve", |solve| {
        let embedded: Vec<clap::Id> = solve
            .get_arguments()
            .filter(|arg| arg.get_help_heading() == Some(EMBEDDED_SERVER))
            .map(|arg| arg.get_id().clone())
            .collect();
        embedded.into_iter().fold(solve, |solve, id| solve.mut_arg(id, |arg| arg.conflicts_with("servers")))
    })
}

/// `gen`'s flags: the library's, and where the problems go.
#[derive(Debug, clap::Args)]
struct GenArgs {
    #[command(flatten)]
    config: GenConfig,
    /// Output file (`-` or none: stdout), in the format of its extension (.jsonl,
    /// .parquet, .arrow, .arrows, .csv); JSON lines when it has none.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The output's format, whatever its name says.
    #[arg(long, value_enum, value_name = "FORMAT")]
    output_format: Option<Format>,
}

/// `-o -` is stdout, as `-` is stdin for the input.
fn output_file(output: Option<PathBuf>) -> Option<PathBuf> {
    output.filter(|path| path.as_os_str() != "-")
}

/// True when the error is only that the reader of the output went away (`| head`).
fn output_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        matches!(cause.downcast_ref::<ClientError>(), Some(ClientError::OutputClosed))
            || cause.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
    })
}

/// True when every server was given up on after `--retry-for` without an answer: the run
/// is unfinished rather than wrongly asked for, so it exits 1, as a run with unsolved
/// lines does, and `--resume` completes it once a server answers again.
fn servers_gave_up(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<ClientError>(),
            Some(ClientError::Connection(ConnectionError::Unreachable { .. }))
        )
    })
}

/// mimalloc instead of glibc malloc: less CPU on the bulk path (`bench/client.sh`; see `allocator`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    gamesolver::allocator::without_huge_pages();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let args = Args::from_arg_matches(&command().get_matches()).unwrap_or_else(|err| err.exit());
    let result = match args.command {
        Command::Solve(args) => solve(*args),
        Command::Gen(args) => generate(args).map(|()| ExitCode::SUCCESS),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut command(), "gamesolver-client", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { out_dir } => man(out_dir).map(|()| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|err| {
        // As Unix filters do (ripgrep among them): a closed pipe is the reader's choice,
        // not a failure worth a message.
        if output_closed(&err) {
            return ExitCode::SUCCESS;
        }
        eprintln!("gamesolver-client: {err:#}");
        ExitCode::from(if servers_gave_up(&err) { 1 } else { 2 })
    })
}

fn solve(args: SolveArgs) -> anyhow::Result<ExitCode> {
    let SolveArgs { config, tables, cache } = args;
    let (quiet, max_errors) = (config.quiet, config.max_errors);
    let config = SolveConfig {
        embedded: Some(EmbeddedStarter::new(move || start_embedded_server(tables.clone(), cache.clone()))),
        ..config
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let interrupt = async {
        // Without a handler, Ctrl-C would kill the run with up to a buffer of answers unwritten.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let result = runtime.block_on(client::solve_until(config, interrupt));
    // A reader blocked on a silent stdin must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(100));
    let summary = result?;
    if !quiet {
        eprintln!("{summary}");
    }
    Ok(if summary.within(max_errors) { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The server a run without `--server` starts in this process, on a loopback port, with
/// the tables the flags set, kept in the table cache across runs.
async fn start_embedded_server(
    tables: TablesConfig,
    cache: TableCacheFlags,
) -> Result<EmbeddedServer, client::BoxError> {
    let tables = tables.with_cache(tokio::task::spawn_blocking(move || cache.open()).await?);
    // The client closes its calls before it stops the server, so a short grace only
    // matters for a call dropped mid-way.
    let config =
        ServerConfig { shutdown_grace: Seconds(Duration::from_secs(1)), tables, ..ServerConfig::ephemeral() };
    let mut server = Server::bind(config).await?;
    let growth = {
        let tables = server.tables();
        Growth::new(move || {
            let each = tables.each().into_iter();
            let growing = |table: Arc<dyn Table>| {
                Some(Growing { game: table.game(), covered: table.covered(), target: table.growing_to()? })
            };
            each.filter_map(growing).collect()
        })
    };
    let url = format!("http://{}", server.local_addr());
    // The run's connections go through pipes in memory: the loopback TCP they took
    // before was a sixth of a Parquet run's CPU. A columnar run goes without a connection
    // at all: its batches are solved by the server's Flight exchange in this process,
    // without the IPC and HTTP/2 between (docs/performance.md).
    let in_process = server.in_process();
    let exchange = {
        let in_process = in_process.clone();
        Exchange::new(move |descriptor, batches| in_process.exchange(descriptor, batches))
    };
    let pipe = Pipe::new(move || {
        let in_process = in_process.clone();
        async move { in_process.connect().await }
    });
    Ok(EmbeddedServer::spawn(url, |shutdown| server.run(shutdown))
        .with_pipe(pipe)
        .with_exchange(exchange)
        .with_growth(growth))
}

/// The manual pages, from the same definitions as `--help`.
fn man(out_dir: Option<PathBuf>) -> anyhow::Result<()> {
    match out_dir {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command(), &dir)
                .with_context(|| format!("cannot write the manual pages to {}", dir.display()))
        }
        None => clap_mangen::Man::new(command())
            .render(&mut std::io::stdout().lock())
            .context("cannot write the manual page"),
    }
}

fn generate(args: GenArgs) -> anyhow::Result<()> {
    let GenArgs { config, output, output_format } = args;
    let output = output_file(output);
    let format = Format::of_output(output_format, output.as_deref(), Format::Jsonl);
    let out: Box<dyn std::io::Write + Send> = match &output {
        Some(path) => {
            let file =
                std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            Box::new(std::io::BufWriter::with_capacity(1 << 20, file))
        }
        None if format.is_binary() && std::io::stdout().is_terminal() => {
            anyhow::bail!(
                "refusing to write {format} to a terminal: give -o FILE, or --output-format jsonl or csv"
            )
        }
        None => Box::new(std::io::BufWriter::with_capacity(1 << 20, std::io::stdout())),
    };
    match format {
        Format::Jsonl => gen::generate(&config, &mut { out }).context("cannot write the problems"),
        table => gen::generate_table(&config, table, out).context("cannot write the problems"),
    }
}

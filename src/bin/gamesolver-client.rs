//! `gamesolver-client`: parses flags, sets up logging, and runs [`gamesolver::client`].

use std::io::{ErrorKind, IsTerminal};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use gamesolver::client::format::Format;
use gamesolver::client::gen::{self, GenConfig, Mix, SizeRange};
use gamesolver::client::{
    self, ClientError, ColumnMap, ConnectionError, EmbeddedServer, EmbeddedStarter, InputSource, Rename,
    SolveConfig, TlsFiles,
};
use gamesolver::seconds::Seconds;
use gamesolver::server::config::TablesConfig;
use gamesolver::server::{Server, ServerConfig};
use tonic::codec::CompressionEncoding;

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
    Solve(SolveArgs),
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

/// Each flag's default is the library's, read here once.
fn defaults() -> SolveConfig {
    SolveConfig::default()
}

#[derive(Debug, clap::Args)]
struct SolveArgs {
    /// Problem file (`-` for stdin): JSON lines, one `Problem` a line (.gz and .zst read as
    /// such), or a table of problems: Parquet (.parquet), Arrow IPC (.arrow, .feather;
    /// .arrows for the stream format) or CSV (.csv), its columns named as the contract's
    /// (num, stones, n, piles, and an optional id).
    input: String,
    /// Output file (`-` or none: stdout), in the format of its extension, or else the
    /// input's. Parquet and Arrow are not written to a terminal.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The input's format, whatever its name says (JSON lines when its name has no known
    /// extension).
    #[arg(long, value_enum, value_name = "FORMAT")]
    input_format: Option<Format>,
    /// The output's format, whatever its name says.
    #[arg(long, value_enum, value_name = "FORMAT")]
    output_format: Option<Format>,
    /// A table's own column for a contract column (id, num, stones, n, piles):
    /// `n=pile_size` reads Stone Game IV's n from pile_size; a renamed id is written back
    /// under its own name. Repeatable.
    #[arg(long = "column", value_name = "CONTRACT=COLUMN")]
    columns: Vec<Rename>,
    /// Server URL: `https://host:port` (TLS), `http://host:port` or `host:port` (plaintext);
    /// repeat to spread the load. Without one, a server is started in this process (its
    /// tables set by the embedded server's flags).
    #[arg(long = "server", value_name = "URL")]
    servers: Vec<String>,
    /// Continue an interrupted run from the answers already in OUTPUT, once its sidecar
    /// (OUTPUT.resume) proves they answer this input.
    #[arg(long)]
    resume: bool,
    /// Ask for the winner only: answers have no `winningMove` (faster on long games).
    #[arg(long)]
    winner_only: bool,
    /// PEM file of one more CA to trust for https:// servers (the system's are trusted too).
    #[arg(long, value_name = "PEM")]
    ca_cert: Option<PathBuf>,
    /// PEM certificate to present to https:// servers that require one (mutual TLS).
    #[arg(long, value_name = "PEM", requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, value_name = "PEM", requires = "client_cert")]
    client_key: Option<PathBuf>,
    /// Seconds a server may keep failing, or stay silent (connecting, or with batches in
    /// flight), without answering before it is given up on (exit 1; --resume completes
    /// the output).
    #[arg(long, default_value_t = defaults().retry_for.as_secs_f64(), value_name = "SECONDS")]
    retry_for: f64,
    /// Problems per batch of JSON lines, at most.
    #[arg(long, default_value_t = defaults().batch_problems)]
    batch_size: NonZeroUsize,
    /// Rows per batch of a table, at most (fewer when its rows are long: a batch stays
    /// within half of --max-message-bytes).
    #[arg(long, default_value_t = defaults().batch_rows)]
    batch_rows: NonZeroUsize,
    /// Rows per row group of a Parquet output (a resumed run keeps the whole row groups
    /// written before it stopped).
    #[arg(long, default_value_t = defaults().row_group_rows)]
    row_group_rows: NonZeroUsize,
    /// Encoded bytes per batch, about.
    #[arg(long, default_value_t = defaults().batch_bytes)]
    batch_bytes: NonZeroUsize,
    /// Connections per server, each with one streaming call.
    #[arg(long, default_value_t = defaults().connections)]
    connections: NonZeroUsize,
    /// Batches in flight per connection.
    #[arg(long, default_value_t = defaults().window)]
    window: NonZeroUsize,
    /// Bytes of batches read but not yet written, at most (bounds memory).
    #[arg(long, default_value_t = defaults().in_flight_bytes)]
    in_flight_bytes: NonZeroUsize,
    /// Largest gRPC message; longer input lines become error lines.
    #[arg(long, default_value_t = defaults().max_message_bytes)]
    max_message_bytes: usize,
    /// Compression of gRPC messages.
    #[arg(long, value_enum, default_value_t = Compression::from(defaults().compression))]
    compression: Compression,
    /// No progress bar and no summary.
    #[arg(short, long)]
    quiet: bool,
    /// The embedded server's tables: the server's own flags.
    #[command(flatten, next_help_heading = EMBEDDED_SERVER)]
    tables: TablesConfig,
}

/// The help heading of the server flags that `solve` passes to its embedded server.
const EMBEDDED_SERVER: &str = "Embedded server (without --server)";

/// The command line: [`Args`], with the embedded server's flags refused beside `--server`
/// (a remote server's tables are its own).
fn command() -> clap::Command {
    Args::command().mut_subcommand("solve", |solve| {
        let embedded: Vec<clap::Id> = solve
            .get_arguments()
            .filter(|arg| arg.get_help_heading() == Some(EMBEDDED_SERVER))
            .map(|arg| arg.get_id().clone())
            .collect();
        embedded.into_iter().fold(solve, |solve, id| solve.mut_arg(id, |arg| arg.conflicts_with("servers")))
    })
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

impl From<Option<CompressionEncoding>> for Compression {
    fn from(encoding: Option<CompressionEncoding>) -> Self {
        match encoding {
            Some(CompressionEncoding::Gzip) => Compression::Gzip,
            Some(CompressionEncoding::Zstd) => Compression::Zstd,
            // tonic may learn more encodings; this client offers only these.
            _ => Compression::None,
        }
    }
}

impl From<Compression> for Option<CompressionEncoding> {
    fn from(compression: Compression) -> Self {
        match compression {
            Compression::None => None,
            Compression::Gzip => Some(CompressionEncoding::Gzip),
            Compression::Zstd => Some(CompressionEncoding::Zstd),
        }
    }
}

#[derive(Debug, clap::Args)]
struct GenArgs {
    /// Problems to write.
    #[arg(long)]
    count: u64,
    /// Seed; the same seed writes the same file.
    #[arg(long, default_value_t = GenConfig::default().seed)]
    seed: u64,
    /// Relative weights of the games.
    #[arg(long, default_value_t = GenConfig::default().mix)]
    mix: Mix,
    /// Sum Game string length, `N` or `MIN..MAX` (inclusive; odd lengths round down).
    #[arg(long, default_value_t = GenConfig::default().sum_len)]
    sum_len: SizeRange,
    /// Stone Game IX number of stones, `N` or `MIN..MAX`.
    #[arg(long, default_value_t = GenConfig::default().ix_len)]
    ix_len: SizeRange,
    /// Stone Game IX stone values, `N` or `MIN..MAX`.
    #[arg(long, default_value_t = GenConfig::default().ix_value)]
    ix_value: SizeRange,
    /// Stone Game IV pile sizes, `N` or `MIN..MAX`.
    #[arg(long, default_value_t = GenConfig::default().iv_n)]
    iv_n: SizeRange,
    /// Nim Square number of piles, `N` or `MIN..MAX`.
    #[arg(long, default_value_t = GenConfig::default().nim_piles)]
    nim_piles: SizeRange,
    /// Nim Square pile sizes, `N` or `MIN..MAX`.
    #[arg(long, default_value_t = GenConfig::default().nim_n)]
    nim_n: SizeRange,
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
        Command::Solve(args) => solve(args),
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
    let retry_for = Duration::try_from_secs_f64(args.retry_for)
        .context("--retry-for must be a non-negative number of seconds")?;
    let config = SolveConfig {
        input: InputSource::parse(&args.input),
        output: output_file(args.output),
        input_format: args.input_format,
        output_format: args.output_format,
        columns: ColumnMap::new(args.columns)?,
        servers: args.servers,
        embedded: Some(EmbeddedStarter::new(move || start_embedded_server(args.tables.clone()))),
        resume: args.resume,
        winner_only: args.winner_only,
        tls: TlsFiles { ca_cert: args.ca_cert, client_cert: args.client_cert, client_key: args.client_key },
        retry_for,
        batch_problems: args.batch_size,
        batch_rows: args.batch_rows,
        row_group_rows: args.row_group_rows,
        batch_bytes: args.batch_bytes,
        connections: args.connections,
        window: args.window,
        in_flight_bytes: args.in_flight_bytes,
        max_message_bytes: args.max_message_bytes,
        compression: args.compression.into(),
        progress: !args.quiet && std::io::stderr().is_terminal(),
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
    if !args.quiet {
        eprintln!("{summary}");
    }
    Ok(if summary.has_errors() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// The server a run without `--server` starts in this process, on a loopback port, with
/// the tables the flags set.
async fn start_embedded_server(tables: TablesConfig) -> Result<EmbeddedServer, client::BoxError> {
    // The client closes its calls before it stops the server, so a short grace only
    // matters for a call dropped mid-way.
    let config =
        ServerConfig { shutdown_grace: Seconds(Duration::from_secs(1)), tables, ..ServerConfig::ephemeral() };
    let server = Server::bind(config).await?;
    let url = format!("http://{}", server.local_addr());
    Ok(EmbeddedServer::spawn(url, |shutdown| server.run(shutdown)))
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
    let config = GenConfig {
        count: args.count,
        seed: args.seed,
        mix: args.mix,
        sum_len: args.sum_len,
        ix_len: args.ix_len,
        ix_value: args.ix_value,
        iv_n: args.iv_n,
        nim_piles: args.nim_piles,
        nim_n: args.nim_n,
    };
    let output = output_file(args.output);
    let format = Format::of_output(args.output_format, output.as_deref(), Format::Jsonl);
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

//! `gamesolver-client`: parses flags, sets up logging, and runs [`gamesolver::client`].

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use gamesolver::client::gen::{self, GenConfig, Mix, SizeRange};
use gamesolver::client::input::InputSource;
use gamesolver::client::{self, SolveConfig};
use tonic::codec::CompressionEncoding;

/// Bulk client of gamesolver: solves problem files through the gRPC server.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Solves every line of INPUT; writes one solution line per input line, in order.
    Solve(SolveArgs),
    /// Writes a deterministic random problem file.
    Gen(GenArgs),
}

#[derive(Debug, clap::Args)]
struct SolveArgs {
    /// Problem file, one JSON `Problem` per line (`-` for stdin; .gz and .zst read as such).
    input: String,
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Server URL (`http://host:port` or `host:port`); repeat to spread the load.
    /// Without one, a server is started in this process.
    #[arg(long = "server", value_name = "URL")]
    servers: Vec<String>,
    /// Continue an interrupted run from the complete lines already in OUTPUT.
    #[arg(long)]
    resume: bool,
    /// Seconds a server may keep failing without answering before it is given up on.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    retry_for: f64,
    /// Problems per batch, at most.
    #[arg(long, default_value_t = SolveConfig::new(InputSource::Stdin).batch_problems)]
    batch_size: usize,
    /// Encoded bytes per batch, about.
    #[arg(long, default_value_t = SolveConfig::new(InputSource::Stdin).batch_bytes)]
    batch_bytes: usize,
    /// Batches in flight per server.
    #[arg(long, default_value_t = SolveConfig::new(InputSource::Stdin).window)]
    window: usize,
    /// Bytes of batches read but not yet written, at most (bounds memory).
    #[arg(long, default_value_t = SolveConfig::new(InputSource::Stdin).in_flight_bytes)]
    in_flight_bytes: usize,
    /// Largest gRPC message; longer input lines become error lines.
    #[arg(long, default_value_t = SolveConfig::new(InputSource::Stdin).max_message_bytes)]
    max_message_bytes: usize,
    /// Compression of gRPC messages.
    #[arg(long, value_enum, default_value_t = Compression::None)]
    compression: Compression,
    /// No progress bar and no summary.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

#[derive(Debug, clap::Args)]
struct GenArgs {
    /// Problems to write.
    #[arg(long)]
    count: u64,
    /// Seed; the same seed writes the same file.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Relative weights of the games.
    #[arg(long, default_value = "sum=4,ix=4,iv=2")]
    mix: Mix,
    /// Sum Game string length, `N` or `MIN..MAX` (inclusive; odd lengths round down).
    #[arg(long, default_value = "2..16")]
    sum_len: SizeRange,
    /// Stone Game IX number of stones, `N` or `MIN..MAX`.
    #[arg(long, default_value = "1..12")]
    ix_len: SizeRange,
    /// Stone Game IX stone values, `N` or `MIN..MAX`.
    #[arg(long, default_value = "1..1000")]
    ix_value: SizeRange,
    /// Stone Game IV pile sizes, `N` or `MIN..MAX`.
    #[arg(long, default_value = "0..1000")]
    iv_n: SizeRange,
    /// Output file (default: stdout).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let result = match Args::parse().command {
        Command::Solve(args) => solve(args),
        Command::Gen(args) => generate(args).map(|()| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|err| {
        eprintln!("gamesolver-client: {err:#}");
        ExitCode::from(2)
    })
}

fn solve(args: SolveArgs) -> anyhow::Result<ExitCode> {
    let retry_for = Duration::try_from_secs_f64(args.retry_for)
        .context("--retry-for must be a non-negative number of seconds")?;
    let config = SolveConfig {
        output: args.output,
        servers: args.servers,
        resume: args.resume,
        retry_for,
        batch_problems: args.batch_size,
        batch_bytes: args.batch_bytes,
        window: args.window,
        in_flight_bytes: args.in_flight_bytes,
        max_message_bytes: args.max_message_bytes,
        compression: match args.compression {
            Compression::None => None,
            Compression::Gzip => Some(CompressionEncoding::Gzip),
            Compression::Zstd => Some(CompressionEncoding::Zstd),
        },
        progress: !args.quiet && std::io::stderr().is_terminal(),
        ..SolveConfig::new(InputSource::parse(&args.input))
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

fn generate(args: GenArgs) -> anyhow::Result<()> {
    let config = GenConfig {
        count: args.count,
        seed: args.seed,
        mix: args.mix,
        sum_len: args.sum_len,
        ix_len: args.ix_len,
        ix_value: args.ix_value,
        iv_n: args.iv_n,
    };
    match &args.output {
        Some(path) => {
            let file =
                std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            gen::generate(&config, &mut std::io::BufWriter::with_capacity(1 << 20, file))
        }
        None => {
            gen::generate(&config, &mut std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock()))
        }
    }
    .context("cannot write the problems")
}

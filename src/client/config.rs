//! What a `solve` run is asked: [`SolveConfig`], the flags of `gamesolver-client solve`
//! (each field's doc is its help text), defined once here and flattened by the binary.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use tonic::codec::CompressionEncoding;

use crate::client::connection::TlsFiles;
use crate::client::embedded::EmbeddedStarter;
use crate::client::format::Format;
use crate::client::input::InputSource;
use crate::client::parts::Part;
use crate::client::progress::MaxErrors;
use crate::client::table::columns::Rename;
use crate::client::table::keep::Keep;
use crate::seconds::Seconds;

/// Everything a `solve` run needs: the flags of `gamesolver-client solve` (each field's
/// doc is its help text; its default is [`SolveConfig::default`]'s), and the embedded
/// server, which its caller supplies.
#[derive(Debug, Clone, clap::Args)]
pub struct SolveConfig {
    /// Problem file (`-` for stdin, its format told by its first bytes): JSON lines, one
    /// `Problem` a line (.gz and .zst read as such), or a table of problems: Parquet
    /// (.parquet), Arrow IPC (.arrow, .feather; .arrows for the stream format) or CSV
    /// (.csv), its columns named as the contract's (num, stones, n, piles, and an optional
    /// id). A directory of parts (as Spark, DuckDB, Polars write one) or a quoted glob is
    /// read part by part, sorted by path, into -o DIR/.
    #[arg(value_name = "INPUT")]
    pub input: InputSource,
    /// More inputs, read after INPUT in the order given. A run over several inputs (or a
    /// directory, or a quoted glob) writes one output a part into -o DIR/.
    #[arg(value_name = "INPUT")]
    pub more_inputs: Vec<InputSource>,
    /// Output file (`-` or none: stdout), in the format of its extension, or else the
    /// input's. Parquet and Arrow are not written to a terminal.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// The input's format, whatever its name says (JSON lines when its name has no known
    /// extension).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub input_format: Option<Format>,
    /// The output's format, whatever its name says.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub output_format: Option<Format>,
    /// A table's own column for a contract column (id, num, stones, n, piles):
    /// `n=pile_size` reads Stone Game IV's n from pile_size; a renamed id is written back
    /// under its own name. Repeatable.
    #[arg(long = "column", value_name = "CONTRACT=COLUMN")]
    pub columns: Vec<Rename>,
    /// Server URL: `https://host:port` (TLS), `http://host:port` or `host:port` (plaintext);
    /// repeat to spread the load. Without one, a server is started in this process (its
    /// tables set by the embedded server's flags).
    #[arg(long = "server", value_name = "URL")]
    pub servers: Vec<String>,
    /// Starts a server in this process when `servers` is empty; `None` makes an empty
    /// `servers` an error.
    #[arg(skip)]
    pub embedded: Option<EmbeddedStarter>,
    /// Set for each part of a run over several inputs (a directory, a glob, several
    /// paths): its Hive partition columns, and its sidecar hidden from readers of the
    /// output directory.
    #[arg(skip)]
    pub part: Option<Part>,
    /// Continue an interrupted run from the answers already in OUTPUT, once its sidecar
    /// (OUTPUT.resume) proves they answer this input.
    #[arg(long)]
    pub resume: bool,
    /// Ask for the winner only: answers have no `winningMove` (faster on long games).
    #[arg(long)]
    pub winner_only: bool,
    /// TLS files for `https://` servers.
    #[command(flatten)]
    pub tls: TlsFiles,
    /// Seconds a server may keep failing, or stay silent (connecting, or with batches in
    /// flight), without answering before it is given up on (exit 1; --resume completes
    /// the output), once it has been reached.
    #[arg(long, value_name = "SECONDS", value_parser = seconds,
          default_value = Seconds(SolveConfig::default().retry_for).to_string())]
    pub retry_for: Duration,
    /// Seconds servers are tried before a first connection to one is made: a run that
    /// reaches none stops (exit 2), naming each and why (refused, no route, DNS, TLS).
    /// --retry-for applies once a server is reached.
    #[arg(long, value_name = "SECONDS", value_parser = seconds,
          default_value = Seconds(SolveConfig::default().connect_deadline).to_string())]
    pub connect_deadline: Duration,
    /// Problems per batch of JSON lines, at most.
    #[arg(long = "batch-size", default_value_t = SolveConfig::default().batch_problems)]
    pub batch_problems: NonZeroUsize,
    /// Rows per batch of a table, at most (fewer when its rows are long: a batch stays
    /// within half of --max-message-bytes).
    #[arg(long, default_value_t = SolveConfig::default().batch_rows)]
    pub batch_rows: NonZeroUsize,
    /// Rows per row group of a Parquet output (a resumed run keeps the whole row groups
    /// written before it stopped). Out of a Parquet input with columns kept (--keep), the
    /// output's row groups are the input's instead, its kept columns copied as they are.
    #[arg(long, default_value_t = SolveConfig::default().row_group_rows)]
    pub row_group_rows: NonZeroUsize,
    /// Encoded bytes per batch, about.
    #[arg(long, default_value_t = SolveConfig::default().batch_bytes)]
    pub batch_bytes: NonZeroUsize,
    /// Connections per server, each with one streaming call.
    #[arg(long, default_value_t = SolveConfig::default().connections)]
    pub connections: NonZeroUsize,
    /// Batches in flight per connection.
    #[arg(long, default_value_t = SolveConfig::default().window)]
    pub window: NonZeroUsize,
    /// Bytes of batches read but not yet written, at most (bounds memory).
    #[arg(long, default_value_t = SolveConfig::default().in_flight_bytes)]
    pub in_flight_bytes: NonZeroUsize,
    /// Largest gRPC message; longer input lines become error lines.
    #[arg(long, default_value_t = SolveConfig::default().max_message_bytes)]
    pub max_message_bytes: usize,
    /// Compression of gRPC messages.
    #[arg(long, value_enum, default_value_t = SolveConfig::default().compression)]
    pub compression: Compression,
    /// Error rows the run may have and still exit 0: a count (10) or a percentage of the
    /// rows (0.5%), resumed rows included. Beyond it, or by default at any error, it exits 1.
    #[arg(long, value_name = "N|P%", default_value_t = SolveConfig::default().max_errors)]
    pub max_errors: MaxErrors,
    /// Input columns written beside the answers in a table output: `all`, `none`, or
    /// COLUMN,... (a Hive partition column too). A name the answer uses itself is refused.
    #[arg(long, value_name = "all|none|COLUMN,...", default_value_t = SolveConfig::default().keep)]
    pub keep: Keep,
    /// No progress bar and no summary.
    #[arg(short, long)]
    pub quiet: bool,
}

/// A `SECONDS` flag as a duration.
fn seconds(text: &str) -> Result<Duration, String> {
    text.parse::<Seconds>().map(|Seconds(duration)| duration)
}

/// Compression of gRPC messages, both ways.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Compression {
    /// Uncompressed: the fastest over loopback and fast links.
    #[default]
    None,
    /// gzip.
    Gzip,
    /// zstd: smaller and cheaper than gzip, for remote servers.
    Zstd,
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

impl Default for SolveConfig {
    /// Stdin to stdout; the caller supplies the servers or the embedded server.
    fn default() -> Self {
        let nonzero = |n: usize| NonZeroUsize::new(n).expect("a positive default");
        SolveConfig {
            input: InputSource::Stdin,
            more_inputs: Vec::new(),
            output: None,
            input_format: None,
            output_format: None,
            columns: Vec::new(),
            servers: Vec::new(),
            embedded: None,
            part: None,
            resume: false,
            winner_only: false,
            tls: TlsFiles::default(),
            retry_for: Duration::from_secs(60),
            // Long enough for a server started beside the client to come up; short enough
            // that a wrong address is told at once.
            connect_deadline: Duration::from_secs(5),
            // A batch's decoded problems and answers stay in the L2 cache; 16 batches in
            // flight are 1 MiB a connection. Chosen with bench/client.sh (docs/performance.md).
            batch_problems: nonzero(1024),
            batch_bytes: nonzero(64 * 1024),
            // A table's batch travels as Arrow buffers and is solved across the server's
            // cores, so it is cheap to send and worth making large; but each batch is
            // copied a few times on its way through the server, and twice as many rows
            // cost a fifth more peak memory (docs/performance.md, "Tables in the bulk
            // client"). A multiple of the Parquet writer's batch keeps its pieces whole.
            batch_rows: nonzero(16 * 1024),
            row_group_rows: nonzero(crate::client::table::write::ROW_GROUP_ROWS),
            // Two calls: a server solves a call's small batches on the one task that
            // reads the call, so one call keeps one of its cores busy; with two the last
            // batches drain on two (bench/client.sh decides; docs/performance.md).
            connections: nonzero(2),
            window: nonzero(16),
            in_flight_bytes: nonzero(16 << 20),
            max_message_bytes: crate::codec::DEFAULT_MAX_MESSAGE_BYTES,
            compression: Compression::None,
            max_errors: MaxErrors::default(),
            // As a UDF in DuckDB, Polars or Spark answers beside the row it was given
            // (docs/bulk-client.md, "Kept columns").
            keep: Keep::All,
            quiet: false,
        }
    }
}

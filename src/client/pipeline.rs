//! The `solve` run: reader thread → work queue → one connection per server → writer thread.
//!
//! Parsing and formatting run on two plain threads, so that they overlap with each other
//! and with the network (and, with the embedded server, with solving). One byte budget,
//! taken when a batch is read and given back when it is written, bounds everything in
//! between, which is what keeps memory flat on inputs of any size. What is read, sent and
//! written depends on the formats (`plan`); the run around them is the same.

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, IsTerminal};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use arrow_schema::ArrowError;
use tokio::task::{JoinHandle, JoinSet};
use tonic::codec::CompressionEncoding;

use crate::client::budget::Budget;
use crate::client::connection::{self, ConnectionConfig, ConnectionError, Door, Server, TlsFiles};
use crate::client::embedded::{BoxError, EmbeddedStarter, Running};
use crate::client::format::Format;
use crate::client::input::{InputError, InputSource};
use crate::client::output::{OutputError, ToWriter};
use crate::client::plan::{self, Plan};
use crate::client::progress::{Progress, Summary};
use crate::client::queue::WorkQueue;
use crate::client::resume::ResumeError;
use crate::client::sink::write_answers;
use crate::client::table::columns::{ColumnMap, ColumnsError, Rename};
use crate::seconds::Seconds;

/// After the run stops, connections get this long to hand the answers already in flight
/// to the writer (so that an interrupted output loses no finished work); a server that
/// stopped answering must not hold the exit longer.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Everything a `solve` run needs: the flags of `gamesolver-client solve` (each field's
/// doc is its help text; its default is [`SolveConfig::default`]'s), and the embedded
/// server, which its caller supplies.
#[derive(Debug, Clone, clap::Args)]
pub struct SolveConfig {
    /// Problem file (`-` for stdin): JSON lines, one `Problem` a line (.gz and .zst read as
    /// such), or a table of problems: Parquet (.parquet), Arrow IPC (.arrow, .feather;
    /// .arrows for the stream format) or CSV (.csv), its columns named as the contract's
    /// (num, stones, n, piles, and an optional id).
    #[arg(value_name = "INPUT")]
    pub input: InputSource,
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
    /// written before it stopped).
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
            output: None,
            input_format: None,
            output_format: None,
            columns: Vec::new(),
            servers: Vec::new(),
            embedded: None,
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
            quiet: false,
        }
    }
}

/// Why a run stopped before the output was complete.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The input could not be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The output could not be written, or a server answered nonsense.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The reader of the output went away (`| head`): as Unix filters do, the binary
    /// then exits quietly.
    #[error("the output was closed before the run ended")]
    OutputClosed,
    /// The output file could not be opened.
    #[error("cannot open output {path}")]
    OpenOutput {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The output cannot be resumed, or its sidecar cannot be written.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// `--resume` needs an output file to resume from.
    #[error("--resume needs an output file (-o FILE)")]
    ResumeNeedsOutput,
    /// `--resume` was given an output that is not a regular file (a device, a pipe).
    #[error("--resume needs a regular output file; {path} is not one")]
    ResumeNeedsRegularFile {
        /// The output given.
        path: PathBuf,
    },
    /// TLS files were given, but no server would use them.
    #[error("--ca-cert, --client-cert and --client-key apply to https:// servers, and none is given")]
    TlsWithoutHttps,
    /// Every server failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// None of several servers was ever reached, each for its reason.
    #[error("cannot reach any server within {deadline:.1?} (--connect-deadline): {}", unreached_list(.servers))]
    NoServerReached {
        /// How long they were tried.
        deadline: Duration,
        /// Each server's URL and why it was not reached, in the order given.
        servers: Vec<(String, String)>,
    },
    /// The embedded server could not start or failed.
    #[error("embedded server: {0}")]
    EmbeddedServer(BoxError),
    /// No server address was given, and the caller supplied no embedded server.
    #[error("no server to send the problems to (give --server URL)")]
    NoServer,
    /// The table's columns cannot be read as problems.
    #[error(transparent)]
    Columns(#[from] ColumnsError),
    /// A binary output (Parquet, Arrow) would go to a terminal.
    #[error("refusing to write {0} to a terminal: give -o FILE, or --output-format jsonl or csv")]
    BinaryToTerminal(Format),
    /// The output file is the input file: writing would destroy the input.
    #[error("the output {0} is the input file")]
    OutputIsInput(PathBuf),
    /// Stopped on request; the output holds a prefix of the answers.
    #[error("interrupted; the output holds the answers written so far: rerun with --resume to continue")]
    Interrupted,
    /// The run was abandoned part-way (a thread stopped).
    #[error("run abandoned: {0}")]
    Aborted(String),
}

/// `URL: reason; URL: reason`.
fn unreached_list(servers: &[(String, String)]) -> String {
    let each: Vec<String> = servers.iter().map(|(url, reason)| format!("{url}: {reason}")).collect();
    each.join("; ")
}

impl ClientError {
    /// An output error, with a closed pipe told apart.
    pub(crate) fn writing(err: OutputError) -> Self {
        let closed = std::iter::successors(Some(&err as &dyn std::error::Error), |err| err.source()).any(
            |err| err.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe),
        ) || matches!(&err, OutputError::Table(ArrowError::IoError(_, io)) if io.kind() == io::ErrorKind::BrokenPipe);
        match closed {
            true => ClientError::OutputClosed,
            false => ClientError::Output(err),
        }
    }

    /// An error of a table writer.
    pub(crate) fn table_output(err: ArrowError) -> Self {
        ClientError::writing(OutputError::Table(err))
    }

    /// An error of a table reader outside of a read (its schema).
    pub(crate) fn table_input(err: ArrowError) -> Self {
        ClientError::Aborted(format!("reading the table: {err}"))
    }
}

/// Solves every line of `config.input` into `config.output`, in order.
pub async fn solve(config: SolveConfig) -> Result<Summary, ClientError> {
    solve_until(config, std::future::pending()).await
}

/// [`solve`], stopped early when `interrupt` resolves (Ctrl-C in the binary): the output
/// then ends after the last batch written, ready for `--resume`.
pub async fn solve_until(
    config: SolveConfig,
    interrupt: impl Future<Output = ()>,
) -> Result<Summary, ClientError> {
    // `-o -` is stdout, as `-` is stdin for the input.
    let output = config.output.clone().filter(|path| path.as_os_str() != "-");
    let config = SolveConfig { output, ..config };
    let renames = ColumnMap::new(config.columns.iter().cloned())?;
    let servers = Servers::check(&config)?;
    let path = match &config.input {
        InputSource::File(path) => Some(path.as_path()),
        InputSource::Stdin => None,
    };
    let input = Format::of_input(config.input_format, path);
    let output = Format::of_output(config.output_format, config.output.as_deref(), input);
    match input {
        Format::Jsonl => {
            let plan = plan::lines(&config, output)?;
            Run::start(config, servers, plan).await?.complete(interrupt).await
        }
        table => {
            let plan = plan::table(&config, &renames, table, output)?;
            Run::start(config, servers, plan).await?.complete(interrupt).await
        }
    }
}

/// The servers of a run, checked before anything is opened.
struct Servers {
    servers: Vec<Server>,
    tls: tonic::transport::ClientTlsConfig,
}

impl Servers {
    /// Checks the paths and servers: nothing is opened or written unless they pass.
    fn check(config: &SolveConfig) -> Result<Servers, ClientError> {
        if let (InputSource::File(input), Some(output)) = (&config.input, &config.output) {
            if same_file(input, output) {
                return Err(ClientError::OutputIsInput(output.clone()));
            }
        }
        let tls = config.tls.load()?;
        let servers =
            config.servers.iter().map(|url| Server::parse(url, &tls)).collect::<Result<Vec<_>, _>>()?;
        if config.tls.any() && !servers.iter().any(Server::is_tls) {
            return Err(ClientError::TlsWithoutHttps);
        }
        if servers.is_empty() && config.embedded.is_none() {
            return Err(ClientError::NoServer);
        }
        Ok(Servers { servers, tls })
    }
}

/// A `solve` run between its start and its shutdown.
struct Run<D: Door> {
    started: Instant,
    resumed: u64,
    resumed_errors: u64,
    budget: Arc<Budget>,
    queue: Arc<WorkQueue<D::Payload>>,
    reader: JoinHandle<()>,
    writer: JoinHandle<Result<(u64, u64), ClientError>>,
    /// Kept to stop the writer: it must not end merely because the other senders are gone.
    to_writer: mpsc::Sender<ToWriter<D::Payload>>,
    connections: Connections,
    /// Of `connections`, by server.
    servers: OpenConnections,
    /// The servers given up on without being reached.
    unreached: Unreached,
    /// The servers, to ask whether any was reached.
    reachable: Vec<Server>,
    embedded: Option<Running>,
}

/// Why [`Run::run`] returned.
enum Ended {
    /// The writer finished: every answer is written, or the run failed there.
    Written(Result<(u64, u64), ClientError>),
    /// The run must stop while the writer is still at work.
    Stopped(ClientError),
}

impl<D: Door> Run<D> {
    /// Starts a run whose input and output `plan` opened (a resume checked): the embedded
    /// server if there is no `--server`, then the reading and writing threads and the
    /// connections. Nothing was written before every check passed.
    async fn start(config: SolveConfig, servers: Servers, plan: Plan<D>) -> Result<Run<D>, ClientError> {
        let started = Instant::now();
        let Servers { servers, tls } = servers;
        let embedded = match (&config.embedded, servers.is_empty()) {
            (Some(starter), true) => Some(starter.start().await.map_err(ClientError::EmbeddedServer)?),
            _ => None,
        };
        let servers = match &embedded {
            Some(embedded) => vec![Server::parse(&embedded.url, &tls)?],
            None => servers,
        };

        let Plan { read, sink, door, progress_total, resumed } = plan;
        let budget = Arc::new(Budget::new(config.in_flight_bytes.get()));
        let queue = Arc::new(WorkQueue::new());
        let (to_writer, inbox) = mpsc::channel();
        // A bar only for a person watching.
        let progress = Progress::new(!config.quiet && io::stderr().is_terminal(), progress_total);
        let reader = {
            let (budget, queue, to_writer) = (Arc::clone(&budget), Arc::clone(&queue), to_writer.clone());
            tokio::task::spawn_blocking(move || read(&budget, &queue, &to_writer))
        };
        let writer = {
            let (budget, queue) = (Arc::clone(&budget), Arc::clone(&queue));
            tokio::task::spawn_blocking(move || write_answers(sink, &inbox, &budget, &queue, progress))
        };
        let (connections, open) = connect(&servers, &config, Arc::new(door), &queue, &to_writer);
        let unreached = Unreached::new(&servers);
        let reachable = servers.clone();
        Ok(Run {
            started,
            resumed: resumed.0,
            resumed_errors: resumed.1,
            budget,
            queue,
            reader,
            writer,
            to_writer,
            connections,
            servers: open,
            unreached,
            reachable,
            embedded,
        })
    }

    /// Runs to the end (or to `interrupt`) and shuts down.
    async fn complete(mut self, interrupt: impl Future<Output = ()>) -> Result<Summary, ClientError> {
        let ended = self.run(interrupt).await;
        self.shutdown(ended).await
    }

    /// Waits for the first of: the writer finishing (the normal end), the embedded server
    /// failing, `interrupt`, or the last server being given up on. A server given up on
    /// while others remain is logged once: its batches went back to the queue. When none
    /// remains, its error is the run's, and is not logged (the caller reports it once);
    /// when none was ever reached, the run's error names each with its reason.
    async fn run(&mut self, interrupt: impl Future<Output = ()>) -> Ended {
        tokio::pin!(interrupt);
        let mut failure = None;
        let mut unreached = std::mem::take(&mut self.unreached);
        loop {
            tokio::select! {
                written = &mut self.writer => return Ended::Written(joined(written)),
                why = embedded_failure(&mut self.embedded) => {
                    return Ended::Stopped(ClientError::EmbeddedServer(why));
                }
                () = &mut interrupt => return Ended::Stopped(ClientError::Interrupted),
                Some(ended) = self.connections.join_next(), if !self.connections.is_empty() => {
                    match self.servers.ended(ended) {
                        Some(ClientError::Connection(ConnectionError::NotReached { url, deadline, reason })) => {
                            // Worth a warning only while another server carries the run;
                            // otherwise the run's one message names it.
                            if self.reachable.iter().any(Server::reached) && !self.connections.is_empty() {
                                let err = ConnectionError::NotReached { url: url.clone(), deadline, reason: reason.clone() };
                                tracing::warn!(server = %url, "giving up on server, the others go on: {err}");
                            }
                            unreached.add(&url, deadline, reason)
                        }
                        Some(why) => failure = Some(why),
                        None => {}
                    }
                    if self.connections.is_empty() && !self.queue.is_finished() {
                        // A server that failed otherwise (answered wrongly, refused the call,
                        // gave up after --retry-for) says more than one never reached.
                        let why = failure.take().or_else(|| unreached.into_error());
                        return Ended::Stopped(why.unwrap_or_else(|| ClientError::Aborted("no server left".into())));
                    }
                }
            }
        }
    }

    /// Stops in dependency order, so that every answer that reached this process is
    /// written and the output ends on a whole line that `--resume` can continue from.
    async fn shutdown(mut self, ended: Ended) -> Result<Summary, ClientError> {
        // 1. Nothing new: the reader stops at its next batch, and each connection
        //    half-closes its call once the batches in its window are answered.
        self.budget.close();
        self.queue.finish();
        // 2. The connections hand what is in flight to the writer, within DRAIN_GRACE;
        //    whatever is still open then is dropped.
        let drained = tokio::time::timeout(DRAIN_GRACE, async {
            while let Some(ended) = self.connections.join_next().await {
                // The run's outcome is decided: a late failure is only worth a debug line.
                if let Some(why) = self.servers.ended(ended) {
                    tracing::debug!("while stopping: {why}");
                }
            }
        })
        .await;
        if drained.is_err() {
            self.connections.shutdown().await;
        }
        // 3. The writer, if still at work, writes what it holds in order, flushes, saves
        //    the checkpoint and returns. It waits on nothing but the output itself.
        let written = match ended {
            Ended::Written(written) => written,
            Ended::Stopped(why) => {
                let _ = self.to_writer.send(ToWriter::Stop);
                let _ = (&mut self.writer).await;
                Err(why)
            }
        };
        // 4. After a complete run the reader has ended; after a failure it may be blocked
        //    on a silent stdin, and is left to the runtime's shutdown.
        if written.is_ok() {
            let _ = self.reader.await;
        }
        // 5. The embedded server last, once no call is open on it.
        if let Some(embedded) = self.embedded {
            embedded.stop().await;
        }
        let (problems, errors) = written?;
        Ok(Summary {
            problems,
            errors,
            resumed: self.resumed,
            resumed_errors: self.resumed_errors,
            elapsed: self.started.elapsed(),
        })
    }
}

type Connections = JoinSet<(String, Result<(), ConnectionError>)>;

/// Starts `config.connections` connection tasks per server through `door`, each with its URL.
fn connect<D: Door>(
    servers: &[Server],
    config: &SolveConfig,
    door: Arc<D>,
    queue: &Arc<WorkQueue<D::Payload>>,
    to_writer: &mpsc::Sender<ToWriter<D::Payload>>,
) -> (Connections, OpenConnections) {
    let connection_config = ConnectionConfig {
        window: config.window.get(),
        retry_for: config.retry_for,
        connect_deadline: config.connect_deadline,
        max_message_bytes: config.max_message_bytes,
        compression: config.compression.into(),
    };
    let mut connections = JoinSet::new();
    let mut open = OpenConnections::default();
    for server in servers.iter().flat_map(|server| std::iter::repeat_n(server, config.connections.get())) {
        let url = server.url().to_owned();
        open.opened(&url);
        let run = connection::run(
            server.clone(),
            Arc::clone(&door),
            Arc::clone(queue),
            to_writer.clone(),
            connection_config.clone(),
        );
        connections.spawn(async move { (url, run.await) });
    }
    (connections, open)
}

/// Which servers of a run were given up on without ever being reached, and why, in the
/// order the run was given them.
#[derive(Debug, Default)]
struct Unreached {
    deadline: Duration,
    servers: Vec<(String, Option<String>)>,
}

impl Unreached {
    fn new(servers: &[Server]) -> Self {
        Unreached {
            deadline: Duration::ZERO,
            servers: servers.iter().map(|s| (s.url().to_owned(), None)).collect(),
        }
    }

    /// Notes why `url` was not reached within `deadline` (its first connection's reason).
    fn add(&mut self, url: &str, deadline: Duration, reason: String) {
        self.deadline = deadline;
        if let Some((_, known @ None)) = self.servers.iter_mut().find(|(known, _)| known == url) {
            *known = Some(reason);
        }
    }

    /// One server's own error, or every server's in one.
    fn into_error(self) -> Option<ClientError> {
        let deadline = self.deadline;
        let mut servers: Vec<(String, String)> =
            self.servers.into_iter().filter_map(|(url, reason)| Some((url, reason?))).collect();
        match servers.len() {
            0 => None,
            1 => servers
                .pop()
                .map(|(url, reason)| ConnectionError::NotReached { url, deadline, reason }.into()),
            _ => Some(ClientError::NoServerReached { deadline, servers }),
        }
    }
}

/// Resolves with why the embedded server stopped by itself; never without one.
async fn embedded_failure(embedded: &mut Option<Running>) -> BoxError {
    match embedded {
        Some(embedded) => embedded.failure().await,
        None => std::future::pending().await,
    }
}

/// The connections still open to each server, to tell a server given up on while others
/// go on (worth a warning) from the last one (whose error ends the run).
#[derive(Debug, Default)]
struct OpenConnections(HashMap<String, usize>);

impl OpenConnections {
    fn opened(&mut self, url: &str) {
        *self.0.entry(url.to_owned()).or_default() += 1;
    }

    /// Notes that a connection task ended; returns its failure, if it failed. The last
    /// connection of a server to fail while another server is still open logs a warning.
    fn ended(
        &mut self,
        ended: Result<(String, Result<(), ConnectionError>), tokio::task::JoinError>,
    ) -> Option<ClientError> {
        let (url, result) = match ended {
            Ok(ended) => ended,
            Err(panicked) => return Some(ClientError::Aborted(format!("connection task: {panicked}"))),
        };
        if let Some(open) = self.0.get_mut(&url) {
            *open -= 1;
            if *open == 0 {
                self.0.remove(&url);
            }
        }
        let err = result.err()?;
        // A server never reached is the run's to report (`Run::run`).
        let unreached = matches!(err, ConnectionError::NotReached { .. });
        if !unreached && !self.0.is_empty() && !self.0.contains_key(&url) {
            tracing::warn!(server = %url, "giving up on server, the others go on: {err}");
        }
        Some(ClientError::Connection(err))
    }
}

fn joined<T>(result: Result<Result<T, ClientError>, tokio::task::JoinError>) -> Result<T, ClientError> {
    result.map_err(|err| ClientError::Aborted(format!("writer thread: {err}")))?
}

/// True when both paths name the same existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

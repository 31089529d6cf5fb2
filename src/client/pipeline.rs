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
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tokio::task::{JoinHandle, JoinSet};

use crate::client::budget::Budget;
use crate::client::config::SolveConfig;
use crate::client::connection::{self, ConnectionConfig, ConnectionError, Door, Server};
use crate::client::embedded::{BoxError, Growth, Running};
use crate::client::error::ClientError;
use crate::client::format::Format;
use crate::client::input::InputSource;
use crate::client::output::ToWriter;
use crate::client::parts::{self, PartInput};
use crate::client::plan::{self, Plan};
use crate::client::progress::{Progress, Summary};
use crate::client::queue::WorkQueue;
use crate::client::sink::write_answers;
use crate::client::sniff;
use crate::client::table::columns::ColumnMap;
use crate::client::table::keep;
use crate::columnar::{self, Games};

/// After the run stops, connections get this long to hand the answers already in flight
/// to the writer (so that an interrupted output loses no finished work); a server that
/// stopped answering must not hold the exit longer.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

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
    match parts::expand(&config.input, &config.more_inputs)? {
        None => solve_one(config, &renames, servers, interrupt).await,
        Some(parts) => solve_parts(config, &renames, servers, parts, interrupt).await,
    }
}

/// A run of one input, a file or stdin.
async fn solve_one(
    config: SolveConfig,
    renames: &ColumnMap,
    servers: Servers,
    interrupt: impl Future<Output = ()>,
) -> Result<Summary, ClientError> {
    let started = Instant::now();
    let path = match &config.input {
        InputSource::File(path) => Some(path.as_path()),
        InputSource::Stdin => None,
    };
    let input = match (config.input_format, &config.input) {
        // Stdin has no name to tell its format by: its first bytes tell it.
        (None, InputSource::Stdin) => {
            let contract = columnar::input_schema(Games::Mixed);
            let mut names: Vec<String> = contract.fields().iter().map(|f| f.name().clone()).collect();
            names.extend(contract.fields().iter().map(|f| renames.column(f.name()).to_owned()));
            let sniffed = tokio::task::spawn_blocking(move || {
                sniff::stdin_format(&names.iter().map(String::as_str).collect::<Vec<_>>())
            });
            sniffed.await.map_err(|err| ClientError::Aborted(format!("reading stdin: {err}")))??
        }
        _ => Format::of_input(config.input_format, path),
    };
    let output = Format::of_output(config.output_format, config.output.as_deref(), input);
    keep::check_formats(&config.keep, input, output)?;
    let mut started_servers = StartedServers::start(&config, servers).await?;
    let growth = started_servers.growth();
    // A bar only for a person watching.
    let progress = |total: Option<u64>| {
        Progress::new(!config.quiet && io::stderr().is_terminal(), total).watching(growth, config.quiet)
    };
    let summary = started_servers.solve(&config, renames, (input, output), progress, interrupt).await;
    started_servers.stop().await;
    Ok(Summary { elapsed: started.elapsed(), ..summary? })
}

/// A run over several inputs (a directory, a glob, several paths): one run a part, in
/// order, each into its own output in the output directory, through one embedded server
/// and one progress bar; the summary adds them up.
async fn solve_parts(
    config: SolveConfig,
    renames: &ColumnMap,
    servers: Servers,
    parts: Vec<PartInput>,
    interrupt: impl Future<Output = ()>,
) -> Result<Summary, ClientError> {
    let started = Instant::now();
    let input = parts::format_of(&parts, config.input_format)?;
    let output = Format::of_output(config.output_format, None, input);
    keep::check_formats(&config.keep, input, output)?;
    let dir = parts::output_dir(config.output.as_deref())?;
    let inputs: Vec<InputSource> =
        std::iter::once(config.input.clone()).chain(config.more_inputs.iter().cloned()).collect();
    let outputs = parts::outputs(&parts, &inputs, &dir, input, output)?;
    let totals: Vec<Option<u64>> =
        parts.iter().map(|part| parts::progress_total(&part.path, input)).collect();
    let total = totals.iter().copied().sum::<Option<u64>>();
    let mut started_servers = StartedServers::start(&config, servers).await?;
    let progress = Progress::new(!config.quiet && io::stderr().is_terminal(), total)
        .watching(started_servers.growth(), config.quiet);
    tokio::pin!(interrupt);
    let (mut summary, mut offset) = (Summary::default(), 0);
    let mut result = Ok(());
    for ((part, path), part_total) in parts.iter().zip(&outputs).zip(&totals) {
        let part_config = SolveConfig {
            input: InputSource::File(part.path.clone()),
            more_inputs: Vec::new(),
            output: Some(path.clone()),
            input_format: Some(input),
            output_format: Some(output),
            part: Some(part.part.clone()),
            ..config.clone()
        };
        let progress = |_| progress.part(offset, summary.problems);
        let done = async {
            if same_file(&part.path, path) {
                return Err(ClientError::OutputIsInput(path.clone()));
            }
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|source| ClientError::OpenOutput { path: parent.to_owned(), source })?;
            }
            let formats = (input, output);
            started_servers.solve(&part_config, renames, formats, progress, interrupt.as_mut()).await
        };
        match done.await {
            Ok(done) => summary.add(&done),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
        offset += part_total.unwrap_or(0);
    }
    progress.finish();
    started_servers.stop().await;
    result?;
    Ok(Summary { elapsed: started.elapsed(), ..summary })
}

/// The servers a run's batches go to, the embedded one started if the run has none:
/// started once for a run over several inputs, whose parts all go to it.
struct StartedServers {
    servers: Vec<Server>,
    embedded: Option<Running>,
}

impl StartedServers {
    /// Starts the embedded server if there is no `--server`.
    async fn start(config: &SolveConfig, servers: Servers) -> Result<StartedServers, ClientError> {
        let Servers { servers, tls } = servers;
        let embedded = match (&config.embedded, servers.is_empty()) {
            (Some(starter), true) => Some(starter.start().await.map_err(ClientError::EmbeddedServer)?),
            _ => None,
        };
        let Some(running) = &embedded else { return Ok(StartedServers { servers, embedded }) };
        match Server::parse(&running.url, &tls) {
            Ok(server) => {
                let servers = vec![server.through(running.pipe.clone(), running.exchange.clone())];
                Ok(StartedServers { servers, embedded })
            }
            Err(err) => {
                StartedServers { servers: Vec::new(), embedded }.stop().await;
                Err(err.into())
            }
        }
    }

    /// What the embedded server says of its growing tables.
    fn growth(&self) -> Option<Growth> {
        self.embedded.as_ref().and_then(|embedded| embedded.growth.clone())
    }

    /// Opens what `config` reads and writes (`formats`: the input's and the output's) and
    /// runs it to its end (or to `interrupt`), shown by the progress `progress` makes from
    /// the input's size.
    async fn solve(
        &mut self,
        config: &SolveConfig,
        renames: &ColumnMap,
        formats: (Format, Format),
        progress: impl FnOnce(Option<u64>) -> Progress,
        interrupt: impl Future<Output = ()>,
    ) -> Result<Summary, ClientError> {
        match formats {
            (Format::Jsonl, output) => {
                let plan = plan::lines(config, output)?;
                let progress = progress(plan.progress_total);
                self.run(config, plan, progress, interrupt).await
            }
            (table, output) => {
                let plan = plan::table(config, renames, table, output)?;
                let progress = progress(plan.progress_total);
                self.run(config, plan, progress, interrupt).await
            }
        }
    }

    /// Runs `plan` to its end (or to `interrupt`).
    async fn run<D: Door>(
        &mut self,
        config: &SolveConfig,
        plan: Plan<D>,
        progress: Progress,
        interrupt: impl Future<Output = ()>,
    ) -> Result<Summary, ClientError> {
        let run = Run::start(config, &self.servers, plan, self.embedded.take(), progress);
        let (summary, embedded) = run.complete(interrupt).await;
        self.embedded = embedded;
        summary
    }

    /// Stops the embedded server, last, once no call is open on it.
    async fn stop(self) {
        if let Some(embedded) = self.embedded {
            embedded.stop().await;
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
    /// The reading thread, until it ends.
    reader: Option<JoinHandle<()>>,
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
    /// Starts a run whose input and output `plan` opened (a resume checked) on `servers`
    /// (the `embedded` one among them, if any): the reading and writing threads and the
    /// connections. Nothing was written before every check passed.
    fn start(
        config: &SolveConfig,
        servers: &[Server],
        plan: Plan<D>,
        embedded: Option<Running>,
        progress: Progress,
    ) -> Run<D> {
        let started = Instant::now();
        let Plan { read, sink, door, progress_total: _, resumed } = plan;
        let budget = Arc::new(Budget::new(config.in_flight_bytes.get()));
        let queue = Arc::new(WorkQueue::new());
        let (to_writer, inbox) = mpsc::channel();
        let reader = {
            let (budget, queue, to_writer) = (Arc::clone(&budget), Arc::clone(&queue), to_writer.clone());
            tokio::task::spawn_blocking(move || read(&budget, &queue, &to_writer))
        };
        let writer = {
            let (budget, queue) = (Arc::clone(&budget), Arc::clone(&queue));
            tokio::task::spawn_blocking(move || write_answers(sink, &inbox, &budget, &queue, progress))
        };
        let (connections, open) = connect(servers, config, Arc::new(door), &queue, &to_writer);
        let unreached = Unreached::new(servers);
        let reachable = servers.to_vec();
        Run {
            started,
            resumed: resumed.0,
            resumed_errors: resumed.1,
            budget,
            queue,
            reader: Some(reader),
            writer,
            to_writer,
            connections,
            servers: open,
            unreached,
            reachable,
            embedded,
        }
    }

    /// Runs to the end (or to `interrupt`) and shuts down; hands back the embedded
    /// server, which its caller stops.
    async fn complete(
        mut self,
        interrupt: impl Future<Output = ()>,
    ) -> (Result<Summary, ClientError>, Option<Running>) {
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
                // A reading thread that panicked sends nothing more: without this the
                // writer would wait for the rest of the input for ever.
                Err(panicked) = reader_ended(&mut self.reader) => {
                    return Ended::Stopped(ClientError::Aborted(format!("reader thread: {panicked}")));
                }
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
    async fn shutdown(mut self, ended: Ended) -> (Result<Summary, ClientError>, Option<Running>) {
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
        if let Some(reader) = self.reader.take().filter(|_| written.is_ok()) {
            let _ = reader.await;
        }
        // 5. The embedded server is its caller's to stop, once no call is open on it: a
        //    run over several inputs goes on with it.
        let summary = written.map(|(problems, errors)| Summary {
            problems,
            errors,
            resumed: self.resumed,
            resumed_errors: self.resumed_errors,
            elapsed: self.started.elapsed(),
        });
        (summary, self.embedded)
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

/// The end of the reading thread, once (then never again).
async fn reader_ended(reader: &mut Option<JoinHandle<()>>) -> Result<(), tokio::task::JoinError> {
    let Some(handle) = reader else { return std::future::pending().await };
    let ended = handle.await;
    *reader = None;
    ended
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading thread that panics is an end the run sees (once), not a silence it waits
    /// on; one that finishes is seen once and then never again.
    #[tokio::test]
    async fn a_reading_thread_that_panics_ends_and_one_that_finishes_is_seen_once() {
        let mut reader = Some(tokio::task::spawn_blocking(|| panic!("a reader's bug")));
        let ended = reader_ended(&mut reader).await;
        assert!(ended.unwrap_err().is_panic());
        assert!(reader.is_none());
        let mut reader = Some(tokio::task::spawn_blocking(|| ()));
        assert!(reader_ended(&mut reader).await.is_ok());
        let again = futures::FutureExt::now_or_never(reader_ended(&mut reader));
        assert!(again.is_none(), "a finished reader is not seen again");
    }
}

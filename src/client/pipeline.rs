//! The `solve` run: reader thread → work queue → one connection per server → writer thread.
//!
//! Parsing and formatting run on two plain threads, so that they overlap with each other
//! and with the network (and, with the embedded server, with solving). One byte budget,
//! taken when a batch is read and given back when it is written, bounds everything in
//! between, which is what keeps memory flat on inputs of any size.

use std::fs::OpenOptions;
use std::future::Future;
use std::io::{self, BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use prost::bytes::Bytes;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;
use tonic::codec::CompressionEncoding;

use crate::client::batch::{Batch, BatchBuilder, LineError};
use crate::client::budget::Budget;
use crate::client::connection::{self, ConnectionConfig, ConnectionError, Server};
use crate::client::input::{InputError, InputSource, Line, ProblemReader};
use crate::client::output::{Answered, OutputError, SolutionWriter, ToWriter};
use crate::client::progress::{Progress, Summary};
use crate::client::queue::WorkQueue;
use crate::client::resume::{self, ResumePoint};
use crate::server::{self, ServerConfig};

/// Everything a `solve` run needs.
#[derive(Debug, Clone)]
pub struct SolveConfig {
    /// Problems to read.
    pub input: InputSource,
    /// Where solutions go; `None` is stdout.
    pub output: Option<PathBuf>,
    /// Servers to spread the load over; empty starts an embedded server.
    pub servers: Vec<String>,
    /// Continue from the complete lines already in `output`.
    pub resume: bool,
    /// How long a server may fail without answering before it is given up on.
    pub retry_for: Duration,
    /// Lines per batch, at most.
    pub batch_problems: usize,
    /// Encoded bytes per batch, about (a batch closes once it reaches this).
    pub batch_bytes: usize,
    /// Batches in flight per server.
    pub window: usize,
    /// Bytes of batches read and not yet written, at most (the memory bound).
    pub in_flight_bytes: usize,
    /// Largest message sent or received; longer input lines become error lines.
    pub max_message_bytes: usize,
    /// Compression of gRPC messages.
    pub compression: Option<CompressionEncoding>,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

impl SolveConfig {
    /// Defaults for everything but the input.
    pub fn new(input: InputSource) -> Self {
        SolveConfig {
            input,
            output: None,
            servers: Vec::new(),
            resume: false,
            retry_for: Duration::from_secs(60),
            batch_problems: 4096,
            batch_bytes: 256 * 1024,
            window: 8,
            in_flight_bytes: 16 << 20,
            max_message_bytes: server::DEFAULT_MAX_MESSAGE_BYTES,
            compression: None,
            progress: false,
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
    /// The output file could not be opened.
    #[error("cannot open output {path}: {source}")]
    OpenOutput {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The existing output could not be prepared for resuming.
    #[error("cannot resume from {path}: {source}")]
    Resume {
        /// The output path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// `--resume` needs an output file to resume from.
    #[error("--resume needs an output file (-o)")]
    ResumeNeedsOutput,
    /// The output to resume has more lines than the input: they do not belong together.
    #[error("the output has {output_lines} lines but the input only {input_lines}: not this input's output")]
    OutputLongerThanInput {
        /// Complete lines in the output.
        output_lines: u64,
        /// Lines in the input.
        input_lines: u64,
    },
    /// Every server failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The embedded server could not start or failed.
    #[error("embedded server: {0}")]
    EmbeddedServer(String),
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
    let started = Instant::now();
    if let (InputSource::File(input), Some(output)) = (&config.input, &config.output) {
        if same_file(input, output) {
            return Err(ClientError::OutputIsInput(output.clone()));
        }
    }
    let (out, resumed) = open_output(&config)?;
    let mut reader = ProblemReader::open(&config.input, config.max_message_bytes)?;
    if resumed.lines > 0 {
        let skipped = reader.skip_lines(resumed.lines)?;
        if skipped < resumed.lines {
            return Err(ClientError::OutputLongerThanInput {
                output_lines: resumed.lines,
                input_lines: skipped,
            });
        }
    }
    let servers = config.servers.iter().map(|url| Server::parse(url)).collect::<Result<Vec<_>, _>>()?;
    let mut embedded = if servers.is_empty() { Some(EmbeddedServer::start().await?) } else { None };
    // Without the embedded server, a receiver that never resolves.
    let (_never, never) = oneshot::channel();
    let mut embedded_failed = embedded.as_mut().and_then(|e| e.failed.take()).unwrap_or(never);
    let servers = match &embedded {
        Some(embedded) => vec![Server::parse(&embedded.url)?],
        None => servers,
    };

    let budget = Arc::new(Budget::new(config.in_flight_bytes));
    let queue = Arc::new(WorkQueue::new());
    let (to_writer, inbox) = mpsc::channel();
    let progress = Progress::new(config.progress, reader.raw_len());
    let builder = BatchBuilder::new(config.batch_problems, config.batch_bytes);
    let limit = config.max_message_bytes;

    let reader_thread = {
        let (budget, queue, to_writer) = (Arc::clone(&budget), Arc::clone(&queue), to_writer.clone());
        tokio::task::spawn_blocking(move || read_batches(reader, builder, limit, &budget, &queue, &to_writer))
    };
    let mut writer_thread = {
        let (budget, queue) = (Arc::clone(&budget), Arc::clone(&queue));
        tokio::task::spawn_blocking(move || write_answers(out, &inbox, &budget, &queue, progress))
    };
    let connection_config = ConnectionConfig {
        window: config.window,
        retry_for: config.retry_for,
        max_message_bytes: config.max_message_bytes,
        compression: config.compression,
    };
    let mut connections = JoinSet::new();
    for server in servers {
        let url = server.url().to_owned();
        let run = connection::run(server, Arc::clone(&queue), to_writer.clone(), connection_config.clone());
        connections.spawn(async move { (url, run.await) });
    }
    // Kept, so that the writer ends on `Stop` after what is queued, and not whenever the
    // other senders happen to have gone.
    let stop_writer = to_writer;

    tokio::pin!(interrupt);
    let mut failure = None;
    let mut writer_done = false;
    let written = loop {
        tokio::select! {
            written = &mut writer_thread => {
                writer_done = true;
                break joined(written);
            }
            Ok(why) = &mut embedded_failed => break Err(ClientError::EmbeddedServer(why)),
            () = &mut interrupt => break Err(ClientError::Interrupted),
            Some(ended) = connections.join_next(), if !connections.is_empty() => {
                record_failure(ended, &mut failure);
                if connections.is_empty() && !queue.is_finished() {
                    break Err(failure.take().unwrap_or_else(|| ClientError::Aborted("no server left".into())));
                }
            }
        }
    };
    // Stops the reader (at its next batch) and the connections, which first drain their
    // calls: answers already in flight still reach the writer.
    budget.close();
    queue.finish();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(ended) = connections.join_next().await {
            record_failure(ended, &mut failure);
        }
    })
    .await;
    if !writer_done {
        // Abandoned: the writer writes what it has and flushes, so that `--resume` can
        // carry on from there.
        let _ = stop_writer.send(ToWriter::Stop);
        let _ = tokio::time::timeout(Duration::from_secs(10), &mut writer_thread).await;
    } else if written.is_ok() {
        let _ = reader_thread.await;
    }
    stop_embedded(embedded).await;
    let (problems, errors) = written?;
    Ok(Summary {
        problems,
        errors,
        resumed: resumed.lines,
        resumed_errors: resumed.errors,
        elapsed: started.elapsed(),
    })
}

/// Notes why a connection task ended, if it failed.
fn record_failure(
    ended: Result<(String, Result<(), ConnectionError>), tokio::task::JoinError>,
    failure: &mut Option<ClientError>,
) {
    match ended {
        Ok((_, Ok(()))) => {}
        Ok((url, Err(err))) => {
            tracing::warn!(server = %url, "giving up on server: {err}");
            *failure = Some(ClientError::Connection(err));
        }
        Err(panicked) => *failure = Some(ClientError::Aborted(format!("connection task: {panicked}"))),
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

/// Opens the output: stdout, a fresh file, or an existing one to append to after the
/// complete lines it holds.
fn open_output(config: &SolveConfig) -> Result<(Box<dyn Write + Send>, ResumePoint), ClientError> {
    const OUTPUT_BUFFER: usize = 1 << 20;
    let Some(path) = &config.output else {
        if config.resume {
            return Err(ClientError::ResumeNeedsOutput);
        }
        return Ok((Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, io::stdout())), ResumePoint::default()));
    };
    let resumed = if config.resume {
        resume::prepare_output(path).map_err(|source| ClientError::Resume { path: path.clone(), source })?
    } else {
        ResumePoint::default()
    };
    let file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(config.resume)
        .truncate(!config.resume)
        .open(path)
        .map_err(|source| ClientError::OpenOutput { path: path.clone(), source })?;
    Ok((Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, file)), resumed))
}

/// The reading thread: lines → batches → queue (or, for batches without a single problem,
/// straight to the writer).
fn read_batches(
    mut reader: ProblemReader,
    mut builder: BatchBuilder,
    max_line_bytes: usize,
    budget: &Budget,
    queue: &WorkQueue,
    writer: &mpsc::Sender<ToWriter>,
) {
    let raw_bytes = reader.raw_bytes_read();
    let mut batches = 0u64;
    let mut dispatch = |mut batch: Batch| -> bool {
        let Ok(cost) = budget.acquire(batch.cost) else { return false };
        batch.cost = cost;
        batches += 1;
        if batch.problems == 0 {
            writer.send(ToWriter::Answered(Answered { batch, solutions: Bytes::new() })).is_ok()
        } else {
            queue.push(batch);
            true
        }
    };
    let mut line = Vec::new();
    loop {
        let read = reader.next_line(&mut line);
        let offset = raw_bytes.load(Ordering::Relaxed);
        let full = match read {
            Ok(Some(Line::Text { number })) => builder.push_line(&line, number, offset),
            Ok(Some(Line::TooLong { number, len })) => {
                let err = LineError::TooLong { line: number, len, limit: max_line_bytes };
                builder.push_rejected(number.to_string(), err, offset)
            }
            Ok(None) => break,
            Err(err) => {
                let _ = writer.send(ToWriter::InputFailed(err));
                return;
            }
        };
        if let Some(batch) = full {
            if !dispatch(batch) {
                return;
            }
        }
    }
    if let Some(batch) = builder.finish(raw_bytes.load(Ordering::Relaxed)) {
        if !dispatch(batch) {
            return;
        }
    }
    let _ = writer.send(ToWriter::InputEnd { batches });
}

/// The writing thread: answers → reorder → output; returns (lines, error lines).
fn write_answers(
    out: Box<dyn Write + Send>,
    inbox: &mpsc::Receiver<ToWriter>,
    budget: &Budget,
    queue: &WorkQueue,
    mut progress: Progress,
) -> Result<(u64, u64), ClientError> {
    let mut writer = SolutionWriter::new(out);
    let (mut lines, mut errors) = (0u64, 0u64);
    let mut total = None;
    let result = loop {
        if total == Some(writer.batches_written()) {
            break Ok(());
        }
        match inbox.recv() {
            Ok(ToWriter::Answered(answered)) => {
                let accepted = writer.accept(answered, |written| {
                    budget.release(written.cost);
                    lines += written.lines;
                    errors += written.errors;
                    progress.advance(written.lines, written.input_offset);
                });
                if let Err(err) = accepted {
                    break Err(err.into());
                }
            }
            Ok(ToWriter::InputEnd { batches }) => total = Some(batches),
            Ok(ToWriter::InputFailed(err)) => break Err(err.into()),
            Ok(ToWriter::Stop) => break Err(ClientError::Aborted("stopped".into())),
            Err(mpsc::RecvError) => break Err(ClientError::Aborted("every sender stopped".into())),
        }
    };
    // The connections may now close their calls.
    queue.finish();
    progress.finish();
    // Flushed on failure too: whatever was written is a valid prefix to resume from.
    let flushed = writer.finish();
    result?;
    flushed?;
    Ok((lines, errors))
}

/// A server in this process, on a loopback port, for runs without `--server`.
struct EmbeddedServer {
    url: String,
    stop: CancellationToken,
    task: JoinHandle<Result<(), server::ServeError>>,
    /// Says why, if the server stops by itself.
    failed: Option<oneshot::Receiver<String>>,
}

impl EmbeddedServer {
    async fn start() -> Result<Self, ClientError> {
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|err| ClientError::EmbeddedServer(format!("cannot bind a loopback port: {err}")))?;
        let addr = listener
            .local_addr()
            .map_err(|err| ClientError::EmbeddedServer(format!("no local address: {err}")))?;
        let stop = CancellationToken::new();
        let config = ServerConfig { shutdown_grace: Duration::from_secs(1), ..ServerConfig::default() };
        let (report, failed) = oneshot::channel();
        let serve = server::serve(listener, config, stop.clone().cancelled_owned());
        let task = tokio::spawn(async move {
            let result = serve.await;
            if let Err(err) = &result {
                let _ = report.send(err.to_string());
            }
            result
        });
        Ok(EmbeddedServer { url: format!("http://{addr}"), stop, task, failed: Some(failed) })
    }
}

async fn stop_embedded(embedded: Option<EmbeddedServer>) {
    let Some(embedded) = embedded else { return };
    embedded.stop.cancel();
    match tokio::time::timeout(Duration::from_secs(2), embedded.task).await {
        Ok(Ok(Err(err))) => tracing::warn!("embedded server: {err}"),
        Ok(Err(err)) => tracing::warn!("embedded server task: {err}"),
        Ok(Ok(Ok(()))) | Err(_) => {}
    }
}

//! The writing thread: answers put back in input order, written to the output, and
//! checkpointed in its sidecar.
//!
//! Every output is a [`Sink`]: JSON lines of a JSON-lines input ([`LinesSink`]), or a
//! table writer fed with the rows of each answer ([`TableSink`]), whatever the input. A
//! checkpoint is saved only for rows that a resumed run can get back (see
//! `table::resume`), at most once a second, and once more at the end, whether the run
//! completed or not.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use arrow_array::{Array, RecordBatch};
use arrow_schema::SchemaRef;
use prost::bytes::Bytes;

use crate::client::batch::Batch;
use crate::client::budget::Budget;
use crate::client::error::ClientError;
use crate::client::fingerprint::Checkpoint;
use crate::client::input::InputError;
use crate::client::output::{
    decode_answer, each_solution, Answered, InOrder, OutputError, SolutionWriter, ToWriter, Written,
};
use crate::client::progress::Progress;
use crate::client::queue::WorkQueue;
use crate::client::resume::Sidecar;
use crate::client::table::answers::{output_rows, SolutionRows};
use crate::client::table::resume::{self as table_resume, OpenedOutput, TableSidecar};
use crate::client::table::write::TableWriter;
use crate::columnar::ERROR_REASON;
use crate::{convert, pb};
use prost::Message;

/// How long the writing thread waits for an answer before it looks whether a checkpoint
/// is due.
const IDLE_CHECKPOINT: Duration = Duration::from_millis(250);

/// Where the writing thread puts each batch, in order.
pub(crate) trait Sink<P>: Send {
    /// Writes the next batch.
    fn write(&mut self, answered: Answered<P>) -> Result<Written, ClientError>;

    /// Saves a checkpoint of what is written, if one is due (or `now`).
    fn checkpoint(&mut self, now: bool) -> Result<(), ClientError>;

    /// Ends the output (a Parquet footer, an Arrow IPC index) and saves the last
    /// checkpoint; `complete` when every batch of the input was written.
    fn finish(&mut self, complete: bool) -> Result<(), ClientError>;
}

/// The writing thread: answers → reorder → output, with a checkpoint now and then;
/// returns (lines, error lines).
pub(crate) fn write_answers<P>(
    mut sink: Box<dyn Sink<P>>,
    inbox: &mpsc::Receiver<ToWriter<P>>,
    budget: &Budget,
    queue: &WorkQueue<P>,
    mut progress: Progress,
) -> Result<(u64, u64), ClientError> {
    let mut order = InOrder::default();
    let (mut lines, mut errors) = (0u64, 0u64);
    let mut total = None;
    let mut input_failed = None;
    let result = loop {
        if total == Some(order.batches_written()) {
            break input_failed.take().map_or(Ok(()), |err: InputError| Err(err.into()));
        }
        match inbox.recv_timeout(IDLE_CHECKPOINT) {
            // A run waiting on its input or a slow server still saves what it wrote.
            Err(mpsc::RecvTimeoutError::Timeout) => {
                progress.tick();
                if let Err(err) = sink.checkpoint(false) {
                    break Err(err);
                }
            }
            Ok(ToWriter::Answered(answered)) => {
                let accepted = order.accept(answered, |next| {
                    let written = sink.write(next)?;
                    budget.release(written.cost);
                    lines += written.lines;
                    errors += written.errors;
                    progress.advance(written.lines, written.end.raw_offset);
                    Ok::<(), ClientError>(())
                });
                if let Err(err) = accepted.and_then(|()| sink.checkpoint(false)) {
                    break Err(err);
                }
            }
            Ok(ToWriter::InputEnd { batches, failed }) => {
                total = Some(batches);
                input_failed = failed;
            }
            Ok(ToWriter::Stop) => break Err(ClientError::Aborted("stopped".into())),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(ClientError::Aborted("every sender stopped".into()));
            }
        }
    };
    // The connections may now close their calls.
    queue.finish();
    progress.finish();
    // On failure too: whatever was written is a prefix to resume from, and the last
    // checkpoint then covers all of it.
    let finished = sink.finish(result.is_ok());
    result?;
    finished?;
    Ok((lines, errors))
}

/// JSON lines of a JSON-lines input's answers, with its sidecar (when the output is a
/// regular file).
pub(crate) struct LinesSink {
    writer: SolutionWriter<Box<dyn Write + Send>>,
    sidecar: Option<Sidecar>,
    last: Option<Checkpoint>,
}

impl LinesSink {
    /// Writes to `out`, checkpointing in `sidecar`.
    pub(crate) fn new(out: Box<dyn Write + Send>, sidecar: Option<Sidecar>) -> Self {
        LinesSink { writer: SolutionWriter::new(out), sidecar, last: None }
    }
}

impl Sink<Bytes> for LinesSink {
    fn write(&mut self, answered: Answered) -> Result<Written, ClientError> {
        let written = self.writer.write_batch(answered).map_err(ClientError::writing)?;
        self.last = Some(written.end.checkpoint);
        Ok(written)
    }

    fn checkpoint(&mut self, now: bool) -> Result<(), ClientError> {
        match (&mut self.sidecar, self.last) {
            (Some(sidecar), Some(at)) if now || sidecar.due() => {
                // The output must hold every line a checkpoint counts.
                self.writer.flush().map_err(ClientError::writing)?;
                Ok(sidecar.save(at)?)
            }
            _ if now => self.writer.flush().map_err(ClientError::writing),
            _ => Ok(()),
        }
    }

    fn finish(&mut self, _complete: bool) -> Result<(), ClientError> {
        self.checkpoint(true)
    }
}

/// The rows written up to the end of a batch, with the input's checkpoint there.
#[derive(Debug, Clone, Copy)]
struct Mark {
    rows: u64,
    errors: u64,
    checkpoint: Checkpoint,
}

/// Turns an answered batch into output rows, and the client's own errors among them.
type ToRows<P> = Box<
    dyn FnMut(Answered<P>) -> Result<(Batch<()>, RecordBatch, Vec<(usize, pb::Solution)>), ClientError>
        + Send,
>;

/// A table writer (any output format) fed with each answer's rows.
pub(crate) struct TableSink<P> {
    writer: TableWriter,
    to_rows: ToRows<P>,
    /// The output file, and what the sidecar knows of it; `None` for stdout or a device.
    file: Option<TableFile>,
    /// Rows and errors in the output so far, resumed ones included.
    rows: u64,
    errors: u64,
}

/// The sidecar side of a [`TableSink`].
struct TableFile {
    output: PathBuf,
    sidecar: TableSidecar,
    /// The file being written, beside the output.
    target: String,
    /// The file the sidecar named when the run started, removed once it names `target`.
    stale: Option<PathBuf>,
    /// Rows the writer's own count does not hold (a text output appended to).
    held: u64,
    /// Batch ends not yet checkpointed, oldest first.
    marks: VecDeque<Mark>,
    /// The newest batch end.
    last: Mark,
}

/// Where a [`TableSink`] writes: a file with its sidecar, or stdout (or a device), which
/// has none.
pub(crate) enum TableOutput {
    /// The output file, opened fresh or resumed.
    File(PathBuf, Box<OpenedOutput>),
    /// Anything else.
    Plain(Box<TableWriter>),
}

impl<P: Send + 'static> TableSink<P> {
    fn with(output: TableOutput, to_rows: ToRows<P>) -> Self {
        let (writer, file) = match output {
            TableOutput::Plain(writer) => (*writer, None),
            TableOutput::File(output, opened) => {
                let OpenedOutput { writer, sidecar, target, stale, resumed, held } = *opened;
                let (rows, errors, checkpoint) = resumed.unwrap_or_default();
                let last = Mark { rows, errors, checkpoint };
                (
                    writer,
                    Some(TableFile { output, sidecar, target, stale, held, marks: VecDeque::new(), last }),
                )
            }
        };
        let (rows, errors) = file.as_ref().map_or((0, 0), |file| (file.last.rows, file.last.errors));
        TableSink { writer, to_rows, file, rows, errors }
    }
}

impl TableSink<Bytes> {
    /// The rows of a JSON-lines input's answers, in `schema` (id as text, then the answers
    /// of every game), written to `output`.
    pub(crate) fn lines(output: TableOutput, schema: SchemaRef) -> Self {
        let mut rows = SolutionRows::new(schema);
        let to_rows: ToRows<Bytes> = Box::new(move |answered: Answered| {
            let (batch, solutions) = decode_answer(answered).map_err(ClientError::writing)?;
            // Each problem's game, from the request: an answer names it only by its move.
            let request = pb::SolveBatchStreamRequest::decode(batch.payload.clone())
                .map_err(|source| ClientError::writing(OutputError::Decode { seq: batch.seq, source }))?;
            let mut games = request.problems.iter().map(convert::game_kind);
            let mut rejected = batch.rejected.iter().map(|(at, _)| *at).peekable();
            let mut line = 0;
            each_solution(&batch, &solutions, |solution| {
                let game = match rejected.next_if_eq(&line) {
                    Some(_) => None,
                    None => games.next().flatten(),
                };
                line += 1;
                rows.push(solution, game)
            });
            let table = rows.finish().map_err(ClientError::table_output)?;
            Ok((without_payload(batch), table, Vec::new()))
        });
        TableSink::with(output, to_rows)
    }
}

impl TableSink<RecordBatch> {
    /// The rows of a table input's answers, in `schema` (the id as sent, the kept
    /// columns, then the answers), written to `output`.
    pub(crate) fn table(output: TableOutput, schema: SchemaRef) -> Self {
        let to_rows: ToRows<RecordBatch> = Box::new(move |answered: Answered<RecordBatch>| {
            let Answered { mut batch, solutions } = answered;
            let rows = output_rows(&schema, &batch.payload, &batch.kept, &solutions)
                .map_err(ClientError::table_output)?;
            let overrides = std::mem::take(&mut batch.rejected);
            Ok((without_payload(batch), rows, overrides))
        });
        TableSink::with(output, to_rows)
    }
}

/// A batch's place and costs, its payload dropped.
fn without_payload<P>(batch: Batch<P>) -> Batch<()> {
    let Batch { seq, payload: _, problems, lines, rejected, end, cost, kept: _ } = batch;
    Batch { seq, payload: (), problems, lines, rejected, end, cost, kept: Vec::new() }
}

/// Rows of `rows` that are errors, the client's own `overrides` included.
fn errors_in(rows: &RecordBatch, overrides: &[(usize, pb::Solution)]) -> u64 {
    let Some(reasons) = rows.column_by_name(ERROR_REASON) else { return overrides.len() as u64 };
    let solved = reasons.null_count() as u64;
    let overridden = overrides.iter().filter(|(row, _)| reasons.is_null(*row)).count() as u64;
    rows.num_rows() as u64 - solved + overridden
}

impl<P: Send + 'static> Sink<P> for TableSink<P> {
    fn write(&mut self, answered: Answered<P>) -> Result<Written, ClientError> {
        let (batch, rows, overrides) = (self.to_rows)(answered)?;
        let errors = errors_in(&rows, &overrides);
        self.writer.write(&rows, &overrides).map_err(ClientError::table_output)?;
        self.rows += rows.num_rows() as u64;
        self.errors += errors;
        if let Some(file) = &mut self.file {
            file.last = Mark { rows: self.rows, errors: self.errors, checkpoint: batch.end.checkpoint };
            file.marks.push_back(file.last);
        }
        Ok(Written { lines: batch.lines as u64, errors, end: batch.end, cost: batch.cost })
    }

    fn checkpoint(&mut self, now: bool) -> Result<(), ClientError> {
        let Some(file) = &mut self.file else {
            if now {
                self.writer.durable().map_err(ClientError::table_output)?;
            }
            return Ok(());
        };
        if !now && !file.sidecar.due() {
            return Ok(());
        }
        let durable = self.writer.durable().map_err(ClientError::table_output)?;
        let rows = durable.rows + file.held;
        let mut newest = None;
        while file.marks.front().is_some_and(|mark| mark.rows <= rows) {
            newest = file.marks.pop_front();
        }
        if let Some(mark) = newest {
            file.save(mark, durable.recovery, false)?;
        }
        Ok(())
    }

    fn finish(&mut self, complete: bool) -> Result<(), ClientError> {
        let durable = self.writer.finish().map_err(ClientError::table_output)?;
        let Some(file) = &mut self.file else { return Ok(()) };
        file.marks.clear();
        let last = file.last;
        file.save(last, durable.recovery.clone(), complete)?;
        if complete && table_resume::finish_rename(&file.output, &file.target)? {
            file.target = table_resume::output_name(&file.output);
            file.save(last, durable.recovery, complete)?;
        }
        Ok(())
    }
}

impl TableFile {
    /// Saves `mark`, whose rows `recovery` gets back from the file being written; the
    /// file the sidecar named before goes, now that it is named no more.
    fn save(
        &mut self,
        mark: Mark,
        recovery: crate::client::table::write::Recovery,
        complete: bool,
    ) -> Result<(), ClientError> {
        table_resume::save(
            &mut self.sidecar,
            &self.target,
            mark.checkpoint,
            mark.errors,
            recovery,
            complete,
        )?;
        if let Some(stale) = self.stale.take() {
            if stale != self.output.with_file_name(&self.target) && stale != self.output {
                let _ = std::fs::remove_file(stale);
            }
        }
        Ok(())
    }
}

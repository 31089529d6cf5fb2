//! What a run reads and writes, for each kind of input: the input and the output opened
//! (a resumed output proven to be this input's first), the reading thread's work, the
//! writing end ([`Sink`]) and the door the batches go through.
//!
//! JSON lines go to the servers as protobuf through `SolveBatchStream` ([`Grpc`]); a
//! table goes as Arrow record batches through Flight `DoExchange` ([`Flight`]). Either
//! can be written as any output format.

use std::fs::OpenOptions;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};

use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef};
use prost::bytes::Bytes;

use crate::client::batch::{Batch, BatchBuilder, InputMark};
use crate::client::budget::Budget;
use crate::client::config::SolveConfig;
use crate::client::connection::{Door, Grpc};
use crate::client::error::ClientError;
use crate::client::fingerprint::{Checkpoint, Fingerprint};
use crate::client::flight::Flight;
use crate::client::format::Format;
use crate::client::input::{is_blank, InputError, InputSource, Line, ProblemReader};
use crate::client::output::{Answered, ToWriter};
use crate::client::problem_json::{line_error_solution, LineError};
use crate::client::queue::WorkQueue;
use crate::client::resume::{self, OutputOptions, ResumeError, Resumed, Sidecar};
use crate::client::sink::{LinesSink, Sink, TableOutput, TableSink};
use crate::client::table::columns::{output_schema, ColumnMap, ColumnsError, InputColumns};
use crate::client::table::copy::CopyPlan;
use crate::client::table::csv::parse_cells;
use crate::client::table::csv_records::TooLongRow;
use crate::client::table::fingerprint::TableFingerprint;
use crate::client::table::keep::{Keep, KeptColumns};
use crate::client::table::read::{batch_bytes, TableReader, TableSource};
use crate::client::table::resume::{self as table_resume, OutputSpec, Saved, TableOptions};
use crate::client::table::write::{parquet_properties, TableWriter, ROW_GROUP_ROWS};
use crate::columnar::{self, Games, ID};

/// Bytes of output buffered before they are written.
const OUTPUT_BUFFER: usize = 1 << 20;

/// What the budget counts for each row of a table batch's answer, on top of the request:
/// the answer's columns as Arrow holds them (its numbers, and three strings: the game and
/// the error's two), a byte for the flag and the validity bits, rounded up to 16.
const ANSWER_ROW_BYTES: usize = (columnar::answer_row_bytes(3) + 1).next_multiple_of(16);

/// The reading thread's work, given the budget, the queue and the writer's inbox.
pub(crate) type ReadFn<P> = Box<dyn FnOnce(&Budget, &WorkQueue<P>, &mpsc::Sender<ToWriter<P>>) + Send>;

/// Everything a run of one kind of input needs besides the servers.
pub(crate) struct Plan<D: Door> {
    /// Reads the input into batches (on a thread of its own).
    pub read: ReadFn<D::Payload>,
    /// Writes the answers.
    pub sink: Box<dyn Sink<D::Payload>>,
    /// How the batches travel.
    pub door: D,
    /// The input's size for the progress bar, in the unit its marks count.
    pub progress_total: Option<u64>,
    /// Lines (rows) already in a resumed output, and their errors.
    pub resumed: (u64, u64),
}

/// The input's name for sidecars and messages.
fn input_name(input: &InputSource) -> String {
    match input {
        InputSource::Stdin => "-".to_owned(),
        InputSource::File(path) => path.display().to_string(),
    }
}

/// Refuses to write a binary format to a terminal.
fn refuse_terminal(format: Format) -> Result<(), ClientError> {
    if format.is_binary() && io::stdout().is_terminal() {
        return Err(ClientError::BinaryToTerminal(format));
    }
    Ok(())
}

/// True unless `path` exists and is not a regular file (a device, a pipe): a path that
/// does not exist yet becomes a regular file.
fn is_regular(path: &Path) -> bool {
    !std::fs::metadata(path).is_ok_and(|meta| !meta.is_file())
}

/// A run of a JSON-lines input: lines parsed and encoded as protobuf on the reading
/// thread, written as JSON lines (or as a table of `output` format).
pub(crate) fn lines(config: &SolveConfig, output: Format) -> Result<Plan<Grpc>, ClientError> {
    if !config.columns.is_empty() {
        return Err(ColumnsError::NotATable.into());
    }
    let mut reader = ProblemReader::open(&config.input, config.max_message_bytes)?;
    let progress_total = reader.raw_len();
    let (sink, fingerprint, resumed): (Box<dyn Sink<Bytes>>, _, _) = match output {
        Format::Jsonl => {
            let (out, sidecar, resumed) = open_lines_output(config, &mut reader)?;
            // Without a sidecar no checkpoint is ever saved: the input is not hashed.
            let fingerprint = sidecar.is_some().then_some(resumed.fingerprint);
            (Box::new(LinesSink::new(out, sidecar)), fingerprint, (resumed.point.lines, resumed.point.errors))
        }
        table => {
            let schema = output_schema(Games::Mixed, Field::new(ID, DataType::Utf8, true));
            let options =
                table_options(config, ColumnMap::default(), Format::Jsonl, table, config.max_message_bytes);
            let mut skipped = None;
            let (out, resumed) = open_table_output(config, options, &schema, None, |path, saved| {
                let checkpoint = saved.checkpoint();
                let skip = resume::skip_lines(path, checkpoint, saved.input(), checkpoint.lines, &mut reader);
                let skip = skip.map_err(|err| match err {
                    ResumeError::InputShorter { output, output_lines, input_lines } => {
                        ResumeError::FewerRows { output, output_rows: output_lines, input_rows: input_lines }
                    }
                    err => err,
                })?;
                let now = skip.fingerprint.checkpoint();
                skipped = Some(skip.fingerprint);
                Ok(Skipped::Rows(now))
            })?;
            let fingerprint = match &out {
                TableOutput::File(..) => Some(skipped.unwrap_or_default()),
                TableOutput::Plain(_) => None,
            };
            (Box::new(TableSink::lines(out, schema)), fingerprint, resumed)
        }
    };
    let builder = BatchBuilder::new(config.batch_problems, config.batch_bytes, config.winner_only);
    let reading = Reading { builder, fingerprint, max_line_bytes: config.max_message_bytes };
    let read: ReadFn<Bytes> =
        Box::new(move |budget, queue, to_writer| reading.run(reader, budget, queue, to_writer));
    Ok(Plan { read, sink, door: Grpc, progress_total, resumed })
}

/// A run of a table input (`input` format), its columns renamed by `renames`: the needed
/// columns read in batches, sent as they are through Flight, written in the `output` format.
pub(crate) fn table(
    config: &SolveConfig,
    renames: &ColumnMap,
    input: Format,
    output: Format,
) -> Result<Plan<Flight>, ClientError> {
    let source = TableSource::open(&config.input, input)?;
    let name = input_name(&config.input);
    let columns =
        InputColumns::resolve(source.schema(), renames, &name, input == Format::Csv, config.winner_only)?;
    let mut kept = kept_columns(config, &columns, source.schema(), &name, output)?;
    let schema = with_kept(columns.output_schema(), &kept);
    let copy = copy_plan(&source, &mut kept, &schema, output);
    let mut projection: Vec<usize> = columns.projection().iter().copied().chain(kept.projection()).collect();
    projection.sort_unstable();
    projection.dedup();
    let read_schema = source.schema().project(&projection).map_err(ClientError::table_input)?;
    let max = config.max_message_bytes;
    // A CSV line is bounded as a JSON line is: by the largest message the client sends.
    let mut reader = source.reader(&projection, config.batch_rows.get(), max / 2, max)?;
    let options = table_options(config, renames.clone(), input, output, 0);
    let mut fingerprint = TableFingerprint::new(&read_schema);
    let (out, resumed) = open_table_output(config, options, &schema, copy.as_ref(), |_, saved| {
        reader.skip(saved.checkpoint().lines, |batch| fingerprint.add(batch))?;
        let now = fingerprint.checkpoint();
        match saved.complete() && now == saved.checkpoint() && reader.at_end()? {
            true => Ok(Skipped::Complete),
            false => Ok(Skipped::Rows(now)),
        }
    })?;
    let fingerprint = matches!(out, TableOutput::File(..)).then_some(fingerprint);
    let rows_schema = copy.as_ref().map_or(schema, |plan| Arc::clone(plan.rows_schema()));
    let sink = Box::new(TableSink::table(out, rows_schema));
    let door = Flight::new(columns.descriptor(), columns.request_schema().field(0));
    let progress_total = reader.total();
    let reading = TableReading {
        columns,
        kept,
        projection,
        fingerprint,
        csv: input == Format::Csv,
        max_line_bytes: max,
    };
    let read: ReadFn<RecordBatch> =
        Box::new(move |budget, queue, to_writer| reading.run(reader, budget, queue, to_writer));
    Ok(Plan { read, sink, door, progress_total, resumed })
}

/// Reads a whole table of problems from `input` as `solve` reads it, without solving:
/// its columns resolved, its batches bounded (`batch_rows`, `batch_bytes`), each turned
/// into its request (CSV cells parsed) and each row into its problem. The rows read, or
/// the error `solve` would stop at. What the `columnar` fuzz target drives.
pub fn read_table_problems(
    input: &InputSource,
    format: Format,
    batch_rows: usize,
    batch_bytes: usize,
) -> Result<u64, ClientError> {
    let source = TableSource::open(input, format)?;
    let columns =
        InputColumns::resolve(source.schema(), &ColumnMap::default(), "input", format == Format::Csv, false)?;
    // As `solve` bounds them: a batch's bytes at half the largest message, a CSV record at it.
    let max_line_bytes = batch_bytes.saturating_mul(2);
    let projection = columns.projection().to_vec();
    let mut reader = source.reader(&projection, batch_rows, batch_bytes, max_line_bytes)?;
    let games = columns.descriptor().games;
    let csv = format == Format::Csv;
    let kept = KeptColumns::default();
    let reading = TableReading { columns, kept, projection, fingerprint: None, csv, max_line_bytes };
    while let Some(batch) = reader.next_batch()? {
        let first_row = reader.rows() - batch.num_rows() as u64;
        let too_long = reader.too_long_rows(reader.rows());
        let (request, _) = reading.request(&batch, first_row, too_long).map_err(ClientError::table_input)?;
        let problems = crate::columnar::BatchProblems::of(&request, games).map_err(|err| {
            ClientError::table_input(arrow_schema::ArrowError::InvalidArgumentError(err.to_string()))
        })?;
        for row in 0..request.num_rows() {
            let _ = problems.get(row);
        }
    }
    Ok(reader.rows())
}

/// The input columns of a table (`schema`, `input`) that its output keeps beside the
/// answers: none in a JSON-lines output, which has no place for them.
fn kept_columns(
    config: &SolveConfig,
    columns: &InputColumns,
    schema: &Schema,
    input: &str,
    output: Format,
) -> Result<KeptColumns, ClientError> {
    if output == Format::Jsonl {
        return Ok(KeptColumns::default());
    }
    // Every answer column of the contract, whatever this table's games, and the id's
    // place: a part of a directory keeps the same names as its siblings.
    let answers = columnar::output_schema(Games::Mixed, None);
    let mut taken: Vec<&str> = answers.fields().iter().map(|field| field.name().as_str()).collect();
    taken.push(columns.output_schema().field(0).name());
    let partition = config.part.as_ref().map_or(&[][..], |part| &part.partition[..]);
    let id = columns.id();
    Ok(KeptColumns::resolve(&config.keep, schema, partition, id, &taken, input, config.batch_rows.get())?)
}

/// How a Parquet output copies the kept columns of a Parquet input (`source`) into
/// `schema` (the output's): `None` for other formats, or when the file's chunks cannot
/// be copied as they are (they are then encoded, as before). `kept` is marked copied.
fn copy_plan(
    source: &TableSource,
    kept: &mut KeptColumns,
    schema: &SchemaRef,
    output: Format,
) -> Option<CopyPlan> {
    let in_table = kept.in_table();
    if output != Format::Parquet || in_table.is_empty() {
        return None;
    }
    let copy = source.copy_source()?;
    // The kept columns follow the id (`with_kept`).
    let copied: Vec<(usize, usize)> = in_table.iter().map(|(at, index)| (1 + at, *index)).collect();
    match CopyPlan::new(copy, source.schema(), schema, &copied, &parquet_properties(ROW_GROUP_ROWS)) {
        Ok(plan) => {
            kept.mark_copied();
            Some(plan)
        }
        Err(why) => {
            tracing::debug!("kept columns encoded, not copied: {why}");
            None
        }
    }
}

/// `output` (the id, then the answers) with the kept columns after the id.
fn with_kept(output: &SchemaRef, kept: &KeptColumns) -> SchemaRef {
    if kept.is_empty() {
        return Arc::clone(output);
    }
    let fields = output.fields();
    let all: Vec<FieldRef> = fields[..1].iter().chain(kept.fields()).chain(&fields[1..]).cloned().collect();
    Arc::new(Schema::new(all))
}

fn table_options(
    config: &SolveConfig,
    columns: ColumnMap,
    input: Format,
    output: Format,
    max_message_bytes: usize,
) -> TableOptions {
    TableOptions {
        input_format: input,
        output_format: output,
        winner_only: config.winner_only,
        columns,
        max_message_bytes,
        keep: match output {
            Format::Jsonl => Keep::None.to_string(),
            _ => config.keep.to_string(),
        },
        row_group_rows: match output {
            Format::Parquet => config.row_group_rows.get(),
            _ => 0,
        },
    }
}

/// The input rows a resumed output answers, read past.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skipped {
    /// Their fingerprint.
    Rows(Checkpoint),
    /// All of the input, which the output answers completely.
    Complete,
}

/// Opens a table output of `schema`: stdout, a device, a fresh file, or (`--resume`) a file
/// proven to be this input's, whose rows are got back; `skip` then reads the input past
/// the rows it answers and returns their fingerprint. Returns the output and the rows
/// (and errors) it already holds.
fn open_table_output(
    config: &SolveConfig,
    options: TableOptions,
    schema: &SchemaRef,
    copy: Option<&CopyPlan>,
    skip: impl FnOnce(&Path, &Saved) -> Result<Skipped, ResumeError>,
) -> Result<(TableOutput, (u64, u64)), ClientError> {
    let format = options.output_format;
    let rows = config.row_group_rows.get();
    let writer = |out: Box<dyn Write + Send>| {
        TableWriter::open(copy, format, out, schema, 0, rows).map_err(ClientError::table_output)
    };
    let Some(path) = &config.output else {
        if config.resume {
            return Err(ClientError::ResumeNeedsOutput);
        }
        refuse_terminal(format)?;
        let out = writer(Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, io::stdout())))?;
        return Ok((TableOutput::Plain(Box::new(out)), (0, 0)));
    };
    if !is_regular(path) {
        if config.resume {
            return Err(ClientError::ResumeNeedsRegularFile { path: path.clone() });
        }
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|source| ClientError::OpenOutput { path: path.clone(), source })?;
        let out = writer(Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, file)))?;
        return Ok((TableOutput::Plain(Box::new(out)), (0, 0)));
    }
    let sidecar = resume::sidecar_for(path, config.part.is_some());
    let spec = OutputSpec { path, sidecar, input: input_name(&config.input), options, schema, copy };
    if config.resume {
        if let Some(saved) = table_resume::saved(path, &spec.sidecar, &spec.options)? {
            let resumed = (saved.checkpoint().lines, saved.errors());
            match skip(path, &saved)? {
                // Nothing is left to answer: the output stays as it is.
                Skipped::Complete => {
                    return Ok((TableOutput::Plain(Box::new(writer(Box::new(io::sink()))?)), resumed))
                }
                Skipped::Rows(now) => table_resume::check_input(path, &saved, now)?,
            }
            return Ok((
                TableOutput::File(path.clone(), Box::new(table_resume::reopen(&spec, saved)?)),
                resumed,
            ));
        }
    }
    Ok((TableOutput::File(path.clone(), Box::new(table_resume::create(&spec)?)), (0, 0)))
}

type LinesOutput = (Box<dyn Write + Send>, Option<Sidecar>, Resumed);

/// Opens the output: stdout, a fresh file, or (`--resume`) an existing one, proven to be
/// this input's, to append to; `reader` is then past the lines it answers. A regular file
/// output gets its sidecar before any line is written; stdout, a device (`-o /dev/null`)
/// or a pipe gets none, since nothing there can be resumed (and `/dev/null.resume` is
/// no place for a file).
fn open_lines_output(config: &SolveConfig, reader: &mut ProblemReader) -> Result<LinesOutput, ClientError> {
    let Some(path) = &config.output else {
        if config.resume {
            return Err(ClientError::ResumeNeedsOutput);
        }
        let stdout = Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, io::stdout()));
        return Ok((stdout, None, Resumed::default()));
    };
    let regular = is_regular(path);
    if config.resume && !regular {
        return Err(ClientError::ResumeNeedsRegularFile { path: path.clone() });
    }
    let options =
        OutputOptions { winner_only: config.winner_only, max_message_bytes: config.max_message_bytes };
    let sidecar = resume::sidecar_for(path, config.part.is_some());
    let resumed =
        if config.resume { resume::resume(path, &sidecar, options, reader)? } else { Resumed::default() };
    let sidecar = match regular {
        true => Some(Sidecar::create(
            &sidecar,
            input_name(&config.input),
            options,
            resumed.fingerprint.checkpoint(),
        )?),
        false => None,
    };
    let file = OpenOptions::new()
        .create(regular)
        .write(true)
        .append(config.resume)
        .truncate(regular && !config.resume)
        .open(path)
        .map_err(|source| ClientError::OpenOutput { path: path.clone(), source })?;
    Ok((Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, file)), sidecar, resumed))
}

/// The reading thread: lines → batches → queue (or, for batches without a single problem,
/// straight to the writer).
struct Reading {
    builder: BatchBuilder,
    /// Of the lines read so far, resumed ones included; `None` when there is no sidecar
    /// to save it in.
    fingerprint: Option<Fingerprint>,
    max_line_bytes: usize,
}

impl Reading {
    /// Adds a line read to the fingerprint, if one is kept.
    fn fingerprint(&mut self, read: Line, line: &[u8]) {
        if let Some(fingerprint) = &mut self.fingerprint {
            fingerprint.add(read, line);
        }
    }

    fn run(
        mut self,
        mut reader: ProblemReader,
        budget: &Budget,
        queue: &WorkQueue,
        writer: &mpsc::Sender<ToWriter>,
    ) {
        let raw_bytes = reader.raw_bytes_read();
        let mark = |fingerprint: &Option<Fingerprint>| InputMark {
            raw_offset: raw_bytes.load(Ordering::Relaxed),
            checkpoint: fingerprint.as_ref().map(Fingerprint::checkpoint).unwrap_or_default(),
        };
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
        let failed = loop {
            let full = match reader.next_line(&mut line) {
                Ok(Some(Line::Text { .. })) if is_blank(&line) => continue,
                Ok(Some(read @ Line::Text { number })) => {
                    self.fingerprint(read, &line);
                    self.builder.push_line(&line, number)
                }
                Ok(Some(read @ Line::TooLong { number, len })) => {
                    self.fingerprint(read, &line);
                    let err = LineError::TooLong { line: number, len, limit: self.max_line_bytes };
                    self.builder.push_rejected(number.to_string(), err)
                }
                Ok(None) => break None,
                Err(err) => break Some(err),
            };
            if full {
                let batch = self.builder.close(mark(&self.fingerprint)).expect("a full batch has lines");
                if !dispatch(batch) {
                    return;
                }
            }
        };
        // What was read is answered even when reading failed (a cut-off .gz): the output
        // then ends at the last good line, ready for `--resume` from a whole file.
        if let Some(batch) = self.builder.close(mark(&self.fingerprint)) {
            if !dispatch(batch) {
                return;
            }
        }
        let _ = writer.send(ToWriter::InputEnd { batches, failed });
    }
}

/// The reading thread of a table: batches of rows → requests → queue.
struct TableReading {
    columns: InputColumns,
    /// What goes beside the answers, from the batches read with `projection`.
    kept: KeptColumns,
    projection: Vec<usize>,
    /// Of the rows read so far, resumed ones included; `None` when there is no sidecar
    /// to save it in.
    fingerprint: Option<TableFingerprint>,
    /// The cells are text, parsed here.
    csv: bool,
    /// A CSV record past this was read past (`--max-message-bytes`).
    max_line_bytes: usize,
}

impl TableReading {
    /// The request of `batch` (rows from `first_row`), and the rows whose cells did not
    /// parse, or which were too long to read (`too_long`, CSV: each answered with its
    /// `LINE_TOO_LONG` error, whatever its empty cells would say).
    fn request(
        &self,
        batch: &RecordBatch,
        first_row: u64,
        too_long: Vec<TooLongRow>,
    ) -> Result<(RecordBatch, Vec<(usize, crate::pb::Solution)>), arrow_schema::ArrowError> {
        match self.csv {
            true => {
                let (parsed, mut rejected) = parse_cells(&self.columns, batch, first_row)?;
                for row in too_long {
                    let Some(at) = row.row.checked_sub(first_row).map(|at| at as usize) else { continue };
                    let err =
                        LineError::RowTooLong { row: row.row, len: row.len, limit: self.max_line_bytes };
                    let solution = line_error_solution(row.row.to_string(), err);
                    rejected.retain(|(index, _)| *index != at);
                    rejected.push((at, solution));
                }
                rejected.sort_by_key(|(at, _)| *at);
                Ok((self.columns.request(&parsed, first_row)?, rejected))
            }
            false => Ok((self.columns.request(batch, first_row)?, Vec::new())),
        }
    }

    fn run(
        mut self,
        mut reader: TableReader,
        budget: &Budget,
        queue: &WorkQueue<RecordBatch>,
        writer: &mpsc::Sender<ToWriter<RecordBatch>>,
    ) {
        let mut batches = 0u64;
        let failed = loop {
            let batch = match reader.next_batch() {
                Ok(Some(batch)) => batch,
                Ok(None) => break None,
                Err(err) => break Some(err),
            };
            let rows = batch.num_rows();
            let first_row = reader.rows() - rows as u64;
            if let Some(fingerprint) = &mut self.fingerprint {
                fingerprint.add(&batch);
            }
            let too_long = reader.too_long_rows(first_row + rows as u64);
            let (request, rejected) = match self.request(&batch, first_row, too_long) {
                Ok(request) => request,
                Err(err) => {
                    break Some(InputError::ReadTable {
                        path: reader.path().to_owned(),
                        rows: first_row,
                        source: err.into(),
                    });
                }
            };
            let checkpoint = self.fingerprint.as_ref().map(TableFingerprint::checkpoint).unwrap_or_default();
            let kept = self.kept.of(&batch, &self.projection);
            let kept_bytes: usize =
                kept.iter().map(|array| array.to_data().get_slice_memory_size().unwrap_or(0)).sum();
            let cost = batch_bytes(&request) + kept_bytes + rows * ANSWER_ROW_BYTES;
            let Ok(cost) = budget.acquire(cost) else { return };
            let end = InputMark { raw_offset: reader.position(), checkpoint };
            queue.push(Batch {
                seq: batches,
                payload: request,
                problems: rows,
                lines: rows,
                rejected,
                end,
                cost,
                kept,
            });
            batches += 1;
        };
        let _ = writer.send(ToWriter::InputEnd { batches, failed });
    }
}

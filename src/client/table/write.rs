//! Writing a table (of solutions, or of problems for `gen`) as it comes, in any output
//! format, and reading back what a cut-off run wrote.
//!
//! Parquet is written a row group at a time, so memory stays flat; its rows are fed to
//! the encoder in pieces that start on multiples of its write batch, so that the file's
//! bytes depend on the rows alone, not on how the answers were cut into batches: a run
//! resumed from a read-back copy writes the same file as a run never stopped.
//!
//! A Parquet or Arrow IPC file has its index at its end, so a run cut off before it wrote
//! its end is read back rather than appended to: an Arrow IPC file is read as the stream
//! it holds, a Parquet file through the footer of its row groups that the run saved with
//! its last checkpoint ([`Recovery::Footer`]). Text outputs (CSV, JSON lines) are cut at
//! the checkpoint's byte and appended to.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::{FileWriter, StreamWriter};
use arrow_schema::{ArrowError, SchemaRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::metadata::{
    FileMetaData, ParquetMetaData, ParquetMetaDataReader, ParquetMetaDataWriter, RowGroupMetaData,
};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use serde::{Deserialize, Serialize};

use super::aligned::{from_parquet, write_aligned, WRITE_BATCH_ROWS};
use super::answers::{override_rows, write_json_lines};
use super::copy::{CopyPlan, CopyingWriter};
use super::csv;
use crate::client::format::Format;
use crate::columnar;
use crate::pb;

/// Rows of a Parquet row group, by default: large enough for readers to scan well, small
/// enough that the group being encoded stays a few megabytes.
pub const ROW_GROUP_ROWS: usize = 1 << 17;

/// The magic that starts an Arrow IPC file; zeros pad it to the stream it holds.
const IPC_FILE_MAGIC: &[u8] = b"ARROW1";

/// The length and magic that end a Parquet file, after its footer.
const PARQUET_TAIL: usize = 8;

/// A writer that counts the bytes through it, for the byte a text output's checkpoint
/// points at.
struct Counted {
    inner: Box<dyn Write + Send>,
    /// Shared with the [`TableWriter`], since the CSV writer does not lend its inner one.
    bytes: Arc<AtomicU64>,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// How `solve` writes Parquet: row groups of `row_group_rows`, Snappy pages, no dictionary
/// for the ids. Public for the benchmark that times the data path without a server
/// (`examples/solve_rate.rs --floor`).
pub fn parquet_properties(row_group_rows: usize) -> WriterProperties {
    WriterProperties::builder()
        .set_max_row_group_row_count(Some(row_group_rows.max(1)))
        .set_write_batch_size(WRITE_BATCH_ROWS)
        .set_compression(Compression::SNAPPY)
        // Ids are mostly distinct: a dictionary of them only costs hashing every one
        // before the writer gives it up for plain pages.
        .set_column_dictionary_enabled(ColumnPath::from(columnar::ID), false)
        .build()
}

/// How a resumed run gets back the rows an output holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind", deny_unknown_fields)]
pub enum Recovery {
    /// Text: the first `bytes` bytes of the output hold the rows; it is cut there and
    /// appended to.
    Bytes {
        /// The end of the last row counted.
        bytes: u64,
    },
    /// Arrow IPC: the rows are read back from the record batches of the stream the
    /// output holds.
    Batches,
    /// Parquet: the rows are read back through this footer (hex) of the row groups
    /// written so far.
    Footer {
        /// The footer's Thrift bytes, in hex.
        footer: String,
    },
}

/// What of an output is on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durable {
    /// Rows that a resumed run gets back.
    pub rows: u64,
    /// How.
    pub recovery: Recovery,
}

enum Inner {
    Parquet {
        writer: ArrowWriter<Counted>,
        /// Rows of fewer than a write batch, waiting for the rest of theirs.
        carry: Option<RecordBatch>,
    },
    /// Parquet whose kept columns are copied from a Parquet input.
    Copying(Box<CopyingWriter<Counted>>),
    Arrow(FileWriter<Counted>),
    Arrows(StreamWriter<Counted>),
    Csv(arrow_csv::Writer<Counted>),
    Jsonl {
        out: Counted,
        lines: Vec<u8>,
    },
}

/// A table written in one of the output formats.
pub struct TableWriter {
    schema: SchemaRef,
    inner: Inner,
    /// Rows handed to `write`.
    rows: u64,
    /// Bytes that were in the output before this writer (a resumed text output).
    start: u64,
    /// Bytes written since.
    written: Arc<AtomicU64>,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter").field("rows", &self.rows).finish_non_exhaustive()
    }
}

impl TableWriter {
    /// A writer of `schema`'s rows in `format` to `out`, which already holds `start`
    /// bytes of a text output being resumed (whose header is then not written again);
    /// Parquet row groups of `row_group_rows`.
    pub fn new(
        format: Format,
        out: Box<dyn Write + Send>,
        schema: &SchemaRef,
        start: u64,
        row_group_rows: usize,
    ) -> Result<Self, ArrowError> {
        let written = Arc::new(AtomicU64::new(0));
        let out = Counted { inner: out, bytes: Arc::clone(&written) };
        let inner = match format {
            Format::Parquet => {
                let props = parquet_properties(row_group_rows);
                let writer =
                    ArrowWriter::try_new(out, Arc::clone(schema), Some(props)).map_err(from_parquet)?;
                Inner::Parquet { writer, carry: None }
            }
            Format::Arrow => Inner::Arrow(FileWriter::try_new(out, schema)?),
            Format::Arrows => Inner::Arrows(StreamWriter::try_new(out, schema)?),
            Format::Csv => Inner::Csv(arrow_csv::WriterBuilder::new().with_header(start == 0).build(out)),
            Format::Jsonl => Inner::Jsonl { out, lines: Vec::with_capacity(1 << 16) },
        };
        Ok(TableWriter { schema: Arc::clone(schema), inner, rows: 0, start, written })
    }

    /// The writer of an output: [`TableWriter::copying`] when `copy` plans kept columns
    /// copied from a Parquet input, else [`TableWriter::new`] (the same arguments).
    pub fn open(
        copy: Option<&CopyPlan>,
        format: Format,
        out: Box<dyn Write + Send>,
        schema: &SchemaRef,
        start: u64,
        row_group_rows: usize,
    ) -> Result<Self, ArrowError> {
        match copy {
            Some(plan) => TableWriter::copying(out, plan),
            None => TableWriter::new(format, out, schema, start, row_group_rows),
        }
    }

    /// A Parquet writer of `plan`'s output to `out`, its kept columns copied from the
    /// input, its row groups the input's.
    pub fn copying(out: Box<dyn Write + Send>, plan: &CopyPlan) -> Result<Self, ArrowError> {
        let written = Arc::new(AtomicU64::new(0));
        let out = Counted { inner: out, bytes: Arc::clone(&written) };
        let writer = CopyingWriter::new(out, plan, parquet_properties(ROW_GROUP_ROWS))?;
        let inner = Inner::Copying(Box::new(writer));
        Ok(TableWriter { schema: Arc::clone(plan.rows_schema()), inner, rows: 0, start: 0, written })
    }

    /// Writes `rows`; the rows of `overrides` (by index) are those errors instead.
    pub fn write(
        &mut self,
        rows: &RecordBatch,
        overrides: &[(usize, pb::Solution)],
    ) -> Result<(), ArrowError> {
        self.rows += rows.num_rows() as u64;
        if let Inner::Jsonl { out, lines } = &mut self.inner {
            lines.clear();
            write_json_lines(lines, rows, overrides)?;
            return Ok(out.write_all(lines)?);
        }
        let rows = match overrides.is_empty() {
            true => rows.clone(),
            false => override_rows(rows, overrides)?,
        };
        match &mut self.inner {
            Inner::Parquet { writer, carry } => {
                write_aligned(carry, &self.schema, rows, |piece| writer.write(piece).map_err(from_parquet))
            }
            Inner::Copying(writer) => writer.write(&rows),
            Inner::Arrow(writer) => writer.write(&rows),
            Inner::Arrows(writer) => writer.write(&rows),
            Inner::Csv(writer) => writer.write(&csv::writable(&rows)?),
            Inner::Jsonl { .. } => unreachable!("written above"),
        }
    }

    /// Flushes, and says which rows a resumed run would get back.
    pub fn durable(&mut self) -> Result<Durable, ArrowError> {
        match &mut self.inner {
            Inner::Parquet { writer, .. } => {
                // Not `flush`, which would close the row group being written.
                writer.sync()?;
                let groups = writer.flushed_row_groups();
                let rows = groups.iter().map(|group| group.num_rows().max(0) as u64).sum();
                Ok(Durable { rows, recovery: Recovery::Footer { footer: footer(groups)? } })
            }
            Inner::Copying(writer) => {
                writer.sync()?;
                let groups = writer.flushed_row_groups();
                let rows = groups.iter().map(|group| group.num_rows().max(0) as u64).sum();
                Ok(Durable { rows, recovery: Recovery::Footer { footer: footer(groups)? } })
            }
            Inner::Arrow(writer) => {
                writer.flush()?;
                Ok(Durable { rows: self.rows, recovery: Recovery::Batches })
            }
            Inner::Arrows(writer) => {
                writer.flush()?;
                Ok(Durable { rows: self.rows, recovery: Recovery::Batches })
            }
            // The CSV writer flushes after every batch.
            Inner::Csv(_) => Ok(self.text_durable()),
            Inner::Jsonl { out, .. } => {
                out.flush()?;
                Ok(self.text_durable())
            }
        }
    }

    fn text_durable(&self) -> Durable {
        let bytes = self.start + self.written.load(Ordering::Relaxed);
        Durable { rows: self.rows, recovery: Recovery::Bytes { bytes } }
    }

    /// Writes the end of the output (a Parquet footer, the index of an Arrow IPC file)
    /// and flushes; nothing may be written after.
    pub fn finish(&mut self) -> Result<Durable, ArrowError> {
        match &mut self.inner {
            Inner::Parquet { writer, carry } => {
                if let Some(rest) = carry.take() {
                    writer.write(&rest).map_err(from_parquet)?;
                }
                let metadata = writer.finish().map_err(from_parquet)?;
                writer.sync()?;
                let footer = footer(metadata.row_groups())?;
                Ok(Durable { rows: self.rows, recovery: Recovery::Footer { footer } })
            }
            Inner::Copying(writer) => {
                let metadata = writer.finish()?;
                let footer = footer(metadata.row_groups())?;
                Ok(Durable { rows: self.rows, recovery: Recovery::Footer { footer } })
            }
            Inner::Arrow(writer) => {
                writer.finish()?;
                writer.get_mut().flush()?;
                Ok(Durable { rows: self.rows, recovery: Recovery::Batches })
            }
            Inner::Arrows(writer) => {
                writer.finish()?;
                writer.get_mut().flush()?;
                Ok(Durable { rows: self.rows, recovery: Recovery::Batches })
            }
            Inner::Csv(_) | Inner::Jsonl { .. } => self.durable(),
        }
    }
}

/// The footer of a Parquet file of `groups`, without the length and magic after it, in hex.
fn footer(groups: &[RowGroupMetaData]) -> Result<String, ArrowError> {
    let Some(first) = groups.first() else { return Ok(String::new()) };
    let rows = groups.iter().map(RowGroupMetaData::num_rows).sum();
    let file = FileMetaData::new(1, rows, None, None, first.schema_descr_ptr(), None);
    let metadata = ParquetMetaData::new(file, groups.to_vec());
    let mut bytes = Vec::new();
    ParquetMetaDataWriter::new(&mut bytes, &metadata).finish().map_err(from_parquet)?;
    bytes.truncate(bytes.len().saturating_sub(PARQUET_TAIL));
    Ok(hex::encode(bytes))
}

/// Why the rows of a cut-off output cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadBackError {
    /// The file cannot be opened or read.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The file (or the saved footer) is not what the run wrote.
    #[error(transparent)]
    Format(#[from] ArrowError),
    /// The file holds fewer rows than the checkpoint counted.
    #[error("holds {found} rows where its sidecar counted {expected}")]
    Short {
        /// Rows found.
        found: u64,
        /// Rows counted.
        expected: u64,
    },
}

/// Reads the first `rows` rows of the `format` output at `path` (of `schema`) back, as
/// `recovery` says, into `each`, in batches as they were written; only the fields
/// `written` when given (a Parquet output whose other columns are copied from its input).
pub fn read_back(
    format: Format,
    path: &Path,
    schema: &SchemaRef,
    written: Option<&[usize]>,
    recovery: &Recovery,
    rows: u64,
    mut each: impl FnMut(RecordBatch) -> Result<(), ArrowError>,
) -> Result<(), ReadBackError> {
    if rows == 0 {
        return Ok(());
    }
    let file = File::open(path)?;
    let mut batches: Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>>> = match (format, recovery) {
        (Format::Parquet, Recovery::Footer { footer }) => {
            let bytes = hex::decode(footer).map_err(|err| ArrowError::ParseError(err.to_string()))?;
            let metadata = ParquetMetaDataReader::decode_metadata(&bytes).map_err(from_parquet)?;
            let options = ArrowReaderOptions::new().with_schema(Arc::clone(schema));
            let metadata = ArrowReaderMetadata::try_new(Arc::new(metadata), options).map_err(from_parquet)?;
            let mask = match written {
                Some(fields) => ProjectionMask::roots(metadata.parquet_schema(), fields.iter().copied()),
                None => ProjectionMask::all(),
            };
            let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata)
                .with_projection(mask)
                .with_batch_size(ROW_GROUP_ROWS)
                .with_limit(rows as usize)
                .build()
                .map_err(from_parquet)?;
            Box::new(reader)
        }
        (Format::Arrow | Format::Arrows, Recovery::Batches) => {
            let mut reader = BufReader::new(file);
            if format == Format::Arrow {
                skip_file_head(&mut reader)?;
            }
            let reader: Box<dyn Read> = Box::new(reader);
            Box::new(StreamReader::try_new(reader, None)?)
        }
        _ => {
            return Err(
                ArrowError::InvalidArgumentError(format!("a {format} output is not read back")).into()
            );
        }
    };
    let schema = match written {
        Some(fields) => Arc::new(schema.project(fields)?),
        None => Arc::clone(schema),
    };
    let mut read = 0;
    while read < rows {
        let Some(batch) = batches.next() else { break };
        let batch = batch?;
        let take = (rows - read).min(batch.num_rows() as u64) as usize;
        read += take as u64;
        let batch = match take < batch.num_rows() {
            true => batch.slice(0, take),
            false => batch,
        };
        each(RecordBatch::try_new(Arc::clone(&schema), batch.columns().to_vec())?)?;
    }
    if read < rows {
        return Err(ReadBackError::Short { found: read, expected: rows });
    }
    Ok(())
}

/// Reads past an Arrow IPC file's magic and the zeros that align the stream after it.
fn skip_file_head(reader: &mut BufReader<File>) -> Result<(), ReadBackError> {
    let mut magic = [0u8; IPC_FILE_MAGIC.len()];
    reader.read_exact(&mut magic)?;
    if magic != IPC_FILE_MAGIC {
        return Err(ArrowError::IpcError("not an Arrow IPC file".into()).into());
    }
    loop {
        let head = reader.fill_buf()?;
        let zeros = head.iter().take_while(|&&byte| byte == 0).count();
        let done = zeros < head.len() || head.is_empty();
        reader.consume(zeros);
        if done {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, StringArray, UInt64Array};
    use arrow_schema::{DataType, Field, Schema};

    fn table(rows: u64) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("id", DataType::UInt64, false),
            Field::new("text", DataType::Utf8, true),
        ]);
        let ids = UInt64Array::from_iter_values(0..rows);
        let text =
            StringArray::from_iter((0..rows).map(|i| (i % 7 != 0).then(|| format!("t{}", i * 31 % 1000))));
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ids) as ArrayRef, Arc::new(text)]).unwrap()
    }

    /// Writes `batch` cut at `cuts` into a `format` file at `path`; returns its last
    /// durable point before the end and the one at the end.
    fn write(format: Format, path: &Path, batch: &RecordBatch, cuts: &[usize]) -> Vec<Durable> {
        let file = Box::new(io::BufWriter::new(File::create(path).unwrap()));
        let mut writer = TableWriter::new(format, file, &batch.schema(), 0, ROW_GROUP_ROWS).unwrap();
        let mut at = 0;
        let mut points = Vec::new();
        for &cut in cuts.iter().chain(std::iter::once(&batch.num_rows())) {
            writer.write(&batch.slice(at, cut - at), &[]).unwrap();
            points.push(writer.durable().unwrap());
            at = cut;
        }
        points.push(writer.finish().unwrap());
        points
    }

    #[test]
    fn parquet_bytes_do_not_depend_on_how_the_rows_were_cut() {
        let dir = tempfile::tempdir().unwrap();
        let batch = table(300_000);
        let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
        write(Format::Parquet, &a, &batch, &[]);
        write(Format::Parquet, &b, &batch, &[1, 1000, 1500, 150_000, 150_777, 299_999]);
        assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(), "the two files differ");
    }

    #[test]
    fn a_cut_off_output_is_read_back_to_its_last_durable_row() {
        let dir = tempfile::tempdir().unwrap();
        let batch = table(300_000);
        for format in [Format::Parquet, Format::Arrow, Format::Arrows] {
            let path = dir.path().join(format!("out.{}", format.name()));
            let points = write(format, &path, &batch, &[100_000, 200_000, 280_000]);
            // What a kill after the third batch leaves: the file as it then was.
            let third = &points[2];
            if format == Format::Parquet {
                assert_eq!(third.rows, 2 * ROW_GROUP_ROWS as u64, "whole row groups only");
            } else {
                assert_eq!(third.rows, 280_000);
            }
            let mut back = Vec::new();
            read_back(format, &path, &batch.schema(), None, &third.recovery, third.rows, |b| {
                back.push(b);
                Ok(())
            })
            .unwrap();
            let back = arrow_select::concat::concat_batches(&batch.schema(), &back).unwrap();
            assert_eq!(back, batch.slice(0, third.rows as usize), "{format}");
            let err =
                read_back(format, &path, &batch.schema(), None, &points[4].recovery, 400_000, |_| Ok(()))
                    .unwrap_err();
            assert_eq!(err.to_string(), "holds 300000 rows where its sidecar counted 400000", "{format}");
        }
    }

    #[test]
    fn text_outputs_count_their_bytes_and_resume_without_a_second_header() {
        let dir = tempfile::tempdir().unwrap();
        let batch = table(100);
        let path = dir.path().join("out.csv");
        let points = write(Format::Csv, &path, &batch, &[40]);
        let Recovery::Bytes { bytes } = points[0].recovery else { panic!() };
        let whole = std::fs::read(&path).unwrap();
        let text = String::from_utf8(whole.clone()).unwrap();
        assert_eq!(text.lines().count(), 101);
        assert_eq!(&text[..bytes as usize].lines().count(), &41);
        // Resumed: cut at the checkpoint, append the rest without a header.
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(bytes).unwrap();
        let mut file = file;
        std::io::Seek::seek(&mut file, std::io::SeekFrom::End(0)).unwrap();
        let mut writer =
            TableWriter::new(Format::Csv, Box::new(file), &batch.schema(), bytes, ROW_GROUP_ROWS).unwrap();
        writer.write(&batch.slice(40, 60), &[]).unwrap();
        let end = writer.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), whole);
        assert_eq!(end.recovery, Recovery::Bytes { bytes: whole.len() as u64 });
    }
}

//! Reading a table of problems in bounded batches: Parquet, Arrow IPC (file or stream) or
//! CSV, only the columns the contract needs (and the ones `--keep` writes beside the
//! answers).
//!
//! A table is opened in two steps: its schema first, so that the columns can be resolved
//! ([`InputColumns`](super::columns::InputColumns)) before any row is read, then a reader
//! of just those columns. Every batch has at most `--batch-rows` rows and about half of
//! `--max-message-bytes`, so that a request and its answer fit a message; for Parquet the
//! rows a batch holds are sized from the file's own column sizes, so that a batch of long
//! rows is never built whole.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use std::collections::HashSet;

use arrow_array::{make_array, ArrayRef, RecordBatch};
use arrow_data::transform::MutableArrayData;
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::copy::CopySource;
use super::csv_records::{BoundedRecords, TooLongRow, TooLongRows};
use super::ipc_input::{IpcFile, IpcStream};
use crate::client::embedded::BoxError;
use crate::client::format::Format;
use crate::client::input::{InputError, InputSource};

/// A UTF-8 byte order mark, which spreadsheets put before a CSV's header.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// A table whose schema is known and whose rows are not read yet.
pub struct TableSource {
    path: PathBuf,
    format: Format,
    schema: SchemaRef,
    opened: Opened,
}

impl std::fmt::Debug for TableSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableSource")
            .field("path", &self.path)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

enum Opened {
    /// The reader's builder, and a handle of the file beside it for copying its chunks.
    Parquet(ParquetRecordBatchReaderBuilder<File>, File),
    /// Opened again with the projection, once it is known.
    Arrow,
    Arrows(IpcStream<Box<dyn BufRead + Send>>, Arc<AtomicU64>, Option<u64>),
    Csv(Box<dyn BufRead + Send>, Arc<AtomicU64>, Option<u64>),
}

impl TableSource {
    /// Opens `source` as a table of `format` and reads its schema.
    pub fn open(source: &InputSource, format: Format) -> Result<TableSource, InputError> {
        let path = match source {
            InputSource::Stdin if format.needs_file() => return Err(InputError::NeedsFile(format)),
            InputSource::Stdin => PathBuf::from("-"),
            InputSource::File(path) => path.clone(),
        };
        let fail = |source: BoxError| InputError::OpenTable { path: path.clone(), format, source };
        let (schema, opened) = match format {
            Format::Parquet => {
                let file = open_file(&path)?;
                let copy =
                    file.try_clone().map_err(|source| InputError::Open { path: path.clone(), source })?;
                let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| fail(e.into()))?;
                (Arc::clone(builder.schema()), Opened::Parquet(builder, copy))
            }
            Format::Arrow => {
                let reader = IpcFile::open(open_file(&path)?).map_err(fail)?;
                (reader.schema(), Opened::Arrow)
            }
            Format::Arrows => {
                let (bytes, raw, len) = open_bytes(source, &path)?;
                let reader = IpcStream::open(bytes).map_err(fail)?;
                (reader.schema(), Opened::Arrows(reader, raw, len))
            }
            Format::Csv => {
                let (mut bytes, raw, len) = open_bytes(source, &path)?;
                let head = bytes.fill_buf().map_err(|e| fail(e.into()))?;
                let bom = if head.starts_with(BOM) { BOM.len() } else { 0 };
                let (header, _) = arrow_csv::reader::Format::default()
                    .with_header(true)
                    .infer_schema(&head[bom..], Some(0))
                    .map_err(|e| fail(e.into()))?;
                bytes.consume(bom);
                // CSV has no types: every cell is text until `csv::parse_cells` reads it.
                let fields: Vec<Field> =
                    header.fields().iter().map(|f| Field::new(f.name(), DataType::Utf8, true)).collect();
                (Arc::new(Schema::new(fields)), Opened::Csv(bytes, raw, len))
            }
            Format::Jsonl => unreachable!("JSON lines are read by ProblemReader"),
        };
        Ok(TableSource { path, format, schema, opened })
    }

    /// The table's columns, as the file holds them (CSV: all text).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// A Parquet table's file and metadata, from which an output may copy column chunks;
    /// `None` for another format, or when the file cannot be opened again.
    pub fn copy_source(&self) -> Option<CopySource> {
        let Opened::Parquet(builder, file) = &self.opened else { return None };
        let file = file.try_clone().ok()?;
        CopySource::new(file, Arc::clone(builder.metadata())).ok()
    }

    /// A reader of the table's columns `projection` (ascending: the contract's columns'
    /// and the kept ones'), `batch_rows` rows a batch at most and about `batch_bytes` at
    /// most; a CSV record longer than `max_line_bytes` is read past, its row noted in
    /// [`TableReader::too_long_rows`].
    pub fn reader(
        self,
        projection: &[usize],
        batch_rows: usize,
        batch_bytes: usize,
        max_line_bytes: usize,
    ) -> Result<TableReader, InputError> {
        let projection = projection.to_vec();
        let (path, format) = (self.path, self.format);
        let fail = |source: BoxError| InputError::OpenTable { path: path.clone(), format, source };
        let too_long = TooLongRows::default();
        let (batches, position, total): (Batches, Position, Option<u64>) = match self.opened {
            Opened::Parquet(builder, _) => {
                let total = builder.metadata().file_metadata().num_rows().max(0) as u64;
                let rows = parquet_batch_rows(&builder, &projection, batch_rows, batch_bytes);
                let mask = ProjectionMask::roots(builder.parquet_schema(), projection.iter().copied());
                let reader = builder
                    .with_projection(mask)
                    .with_batch_size(rows)
                    .build()
                    .map_err(|e| fail(e.into()))?;
                (Box::new(reader.map(|batch| batch.map_err(BoxError::from))), Position::Rows, Some(total))
            }
            Opened::Arrow => {
                let reader = IpcFile::open(open_file(&path)?)
                    .and_then(|file| file.project(projection))
                    .map_err(fail)?;
                let total = reader.num_batches() as u64;
                (Box::new(reader), Position::Batches(0), Some(total))
            }
            Opened::Arrows(reader, raw, len) => {
                (Box::new(reader.project(projection).map_err(fail)?), Position::Bytes(raw), len)
            }
            Opened::Csv(bytes, raw, len) => {
                let fields = self.schema.fields().len();
                let bytes = BoundedRecords::new(bytes, max_line_bytes, fields, too_long.clone());
                let reader = arrow_csv::ReaderBuilder::new(self.schema)
                    .with_header(true)
                    .with_batch_size(batch_rows)
                    .with_projection(projection)
                    .build_buffered(bytes)
                    .map_err(|e| fail(e.into()))?;
                (Box::new(reader.map(|batch| batch.map_err(BoxError::from))), Position::Bytes(raw), len)
            }
        };
        Ok(TableReader {
            path,
            too_long,
            batches,
            position,
            total,
            rows: 0,
            pending: VecDeque::new(),
            batch_rows,
            batch_bytes,
        })
    }
}

/// Rows a Parquet batch holds: `batch_rows`, fewer when the projected columns' sizes say
/// that many rows would pass `batch_bytes`.
fn parquet_batch_rows(
    builder: &ParquetRecordBatchReaderBuilder<File>,
    projection: &[usize],
    batch_rows: usize,
    batch_bytes: usize,
) -> usize {
    let schema = builder.parquet_schema();
    let (mut rows, mut bytes) = (0u64, 0u64);
    for group in builder.metadata().row_groups() {
        rows += group.num_rows().max(0) as u64;
        for (leaf, column) in group.columns().iter().enumerate() {
            if projection.contains(&schema.get_column_root_idx(leaf)) {
                bytes += column.uncompressed_size().max(0) as u64;
            }
        }
    }
    let per_row = (bytes / rows.max(1)).max(1);
    batch_rows.min((batch_bytes as u64 / per_row).max(1) as usize)
}

fn open_file(path: &Path) -> Result<File, InputError> {
    File::open(path).map_err(|source| InputError::Open { path: path.to_owned(), source })
}

/// The bytes of a file or stdin (decompressed when gzip or zstd), the live count of the
/// raw bytes read, and the file's size.
#[allow(clippy::type_complexity)]
fn open_bytes(
    source: &InputSource,
    path: &Path,
) -> Result<(Box<dyn BufRead + Send>, Arc<AtomicU64>, Option<u64>), InputError> {
    let (raw, len): (Box<dyn Read + Send>, _) = match source {
        InputSource::Stdin => (crate::client::sniff::stdin(), None),
        InputSource::File(path) => {
            let file = open_file(path)?;
            let len = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
            (Box::new(file), len)
        }
    };
    let (bytes, count) = crate::client::decompress::decompressed(raw)
        .map_err(|source| InputError::Open { path: path.to_owned(), source })?;
    Ok((Box::new(BufReader::new(bytes)), count, len))
}

type Batches = Box<dyn Iterator<Item = Result<RecordBatch, BoxError>> + Send>;

/// What the progress bar counts for a table.
enum Position {
    /// Rows, out of the file's own count (Parquet).
    Rows,
    /// Record batches, out of the file's index (Arrow IPC file).
    Batches(u64),
    /// Raw bytes, out of the file's size (a stream, CSV).
    Bytes(Arc<AtomicU64>),
}

/// The batches of a table's projected columns, bounded in rows and bytes.
pub struct TableReader {
    path: PathBuf,
    /// CSV rows read past for their length.
    too_long: TooLongRows,
    batches: Batches,
    position: Position,
    total: Option<u64>,
    rows: u64,
    /// Pieces of a batch read and cut, not yet handed out.
    pending: VecDeque<RecordBatch>,
    batch_rows: usize,
    batch_bytes: usize,
}

impl std::fmt::Debug for TableReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableReader")
            .field("path", &self.path)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl TableReader {
    /// The next batch, `None` at the end of the table.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, InputError> {
        if let Some(batch) = self.pending.pop_front() {
            self.rows += batch.num_rows() as u64;
            return Ok(Some(batch));
        }
        let batch = loop {
            match self.batches.next() {
                None => return Ok(None),
                Some(Err(err)) => {
                    return Err(InputError::ReadTable {
                        path: self.path.clone(),
                        rows: self.rows,
                        source: err,
                    });
                }
                Some(Ok(batch)) if batch.num_rows() == 0 => continue,
                Some(Ok(batch)) => break batch,
            }
        };
        if let Position::Batches(read) = &mut self.position {
            *read += 1;
        }
        let batch = compacted(batch);
        // A batch an IPC file holds may be of any size.
        let bytes = batch_bytes(&batch);
        let pieces =
            (batch.num_rows().div_ceil(self.batch_rows)).max(bytes.div_ceil(self.batch_bytes.max(1))).max(1);
        let rows = batch.num_rows().div_ceil(pieces);
        let mut at = 0;
        while at < batch.num_rows() {
            let len = rows.min(batch.num_rows() - at);
            self.pending.push_back(batch.slice(at, len));
            at += len;
        }
        self.next_batch()
    }

    /// The table's path, or `-`, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when no row is left; the next batch is read to know.
    pub fn at_end(&mut self) -> Result<bool, InputError> {
        match self.next_batch()? {
            None => Ok(true),
            Some(batch) => {
                self.rows -= batch.num_rows() as u64;
                self.pending.push_front(batch);
                Ok(false)
            }
        }
    }

    /// The rows before `end` that were too long to read (CSV), taken out: each stands in
    /// its batch as a row of empty cells and is answered with its `LINE_TOO_LONG` error.
    pub fn too_long_rows(&self, end: u64) -> Vec<TooLongRow> {
        self.too_long.take_before(end)
    }

    /// Rows handed out so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// How far the reading is, in the unit of [`TableReader::total`].
    pub fn position(&self) -> u64 {
        match &self.position {
            Position::Rows => self.rows,
            Position::Batches(read) => *read,
            Position::Bytes(raw) => raw.load(Ordering::Relaxed),
        }
    }

    /// Where the reading ends, when known: rows (Parquet), batches (Arrow IPC file) or
    /// bytes (a stream or CSV file).
    pub fn total(&self) -> Option<u64> {
        self.total
    }

    /// Reads `rows` rows, handing each batch to `seen`; a batch that goes past `rows` is
    /// cut there, and its rest is the next batch. Returns the rows read, fewer when the
    /// table ends first.
    pub fn skip(&mut self, rows: u64, mut seen: impl FnMut(&RecordBatch)) -> Result<u64, InputError> {
        let mut skipped = 0;
        while skipped < rows {
            let Some(batch) = self.next_batch()? else { break };
            let wanted = (rows - skipped).min(batch.num_rows() as u64) as usize;
            if wanted < batch.num_rows() {
                self.pending.push_front(batch.slice(wanted, batch.num_rows() - wanted));
                self.rows -= (batch.num_rows() - wanted) as u64;
            }
            let taken = batch.slice(0, wanted);
            seen(&taken);
            skipped += wanted as u64;
        }
        Ok(skipped)
    }
}

/// The bytes a batch's rows span in its buffers, children and null bitmaps included:
/// what it holds in flight, whether its buffers are its own or shared (the pieces of a
/// batch cut by [`TableReader`] add up to the whole). Counting each column's buffers
/// whole instead (`get_array_memory_size`) counted an IPC message's one buffer once a
/// column, several times the batch, and the in-flight budget then let one batch through
/// at a time (docs/performance.md).
pub fn batch_bytes(batch: &RecordBatch) -> usize {
    let column =
        |array: &ArrayRef| array.to_data().get_slice_memory_size().unwrap_or(array.get_array_memory_size());
    batch.columns().iter().map(column).sum()
}

/// The bytes of the allocations a batch's buffers keep alive, each allocation once.
fn held_bytes(batch: &RecordBatch) -> usize {
    fn walk(data: &ArrayData, seen: &mut HashSet<usize>, held: &mut usize) {
        let nulls = data.nulls().map(|nulls| nulls.buffer());
        for buffer in data.buffers().iter().chain(nulls) {
            if seen.insert(buffer.data_ptr().as_ptr() as usize) {
                *held += buffer.capacity();
            }
        }
        for child in data.child_data() {
            walk(child, seen, held);
        }
    }
    let (mut seen, mut held) = (HashSet::new(), 0);
    for column in batch.columns() {
        walk(&column.to_data(), &mut seen, &mut held);
    }
    held
}

/// `batch`, its columns copied into buffers of their own when the buffers it shares hold
/// more than twice what its rows span: an IPC message is one buffer under every column,
/// so the columns a projection left out stay alive with it, unseen by [`batch_bytes`].
fn compacted(batch: RecordBatch) -> RecordBatch {
    if held_bytes(&batch) <= 2 * batch_bytes(&batch) {
        return batch;
    }
    let copy = |array: &ArrayRef| {
        let data = array.to_data();
        let mut copy = MutableArrayData::new(vec![&data], false, data.len());
        copy.try_extend(0, 0, data.len()).map(|()| make_array(copy.freeze()))
    };
    let columns: Result<Vec<_>, _> = batch.columns().iter().map(copy).collect();
    // A column that cannot be copied (its offsets would overflow) is kept as read.
    columns.and_then(|columns| RecordBatch::try_new(batch.schema(), columns)).unwrap_or(batch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::table::columns::{ColumnMap, InputColumns};
    use arrow_array::cast::AsArray;
    use arrow_array::types::UInt64Type;
    use arrow_array::{ArrayRef, StringArray, UInt64Array};
    use arrow_ipc::reader::FileReader;

    fn table(rows: u64) -> RecordBatch {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("junk", DataType::Utf8, true),
            Field::new("n", DataType::UInt64, true),
        ]);
        let ids = StringArray::from_iter_values((0..rows).map(|i| format!("r{i}")));
        let junk = StringArray::from_iter_values((0..rows).map(|_| "x".repeat(100)));
        let n = UInt64Array::from_iter_values(0..rows);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ids) as ArrayRef, Arc::new(junk), Arc::new(n)])
            .unwrap()
    }

    fn written(dir: &Path, format: Format, batch: &RecordBatch) -> PathBuf {
        let path = dir.join(format!("t.{}", format.name()));
        let file = File::create(&path).unwrap();
        match format {
            Format::Parquet => {
                let props = parquet::file::properties::WriterProperties::builder()
                    .set_max_row_group_row_count(Some(300))
                    .build();
                let mut writer =
                    parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
                writer.write(batch).unwrap();
                writer.close().unwrap();
            }
            Format::Arrow => {
                let mut writer = arrow_ipc::writer::FileWriter::try_new(file, batch.schema_ref()).unwrap();
                writer.write(&batch.slice(0, 10)).unwrap();
                writer.write(&batch.slice(10, batch.num_rows() - 10)).unwrap();
                writer.finish().unwrap();
            }
            Format::Arrows => {
                let mut writer = arrow_ipc::writer::StreamWriter::try_new(file, batch.schema_ref()).unwrap();
                writer.write(batch).unwrap();
                writer.finish().unwrap();
            }
            Format::Csv => {
                let mut writer = arrow_csv::Writer::new(file);
                writer.write(batch).unwrap();
            }
            Format::Jsonl => unreachable!(),
        }
        path
    }

    #[test]
    fn every_format_reads_the_projected_columns_in_bounded_batches() {
        let dir = tempfile::tempdir().unwrap();
        let batch = table(1000);
        for format in [Format::Parquet, Format::Arrow, Format::Arrows, Format::Csv] {
            let path = written(dir.path(), format, &batch);
            let source = TableSource::open(&InputSource::File(path), format).unwrap();
            let columns = InputColumns::resolve(
                source.schema(),
                &ColumnMap::default(),
                "t",
                format == Format::Csv,
                false,
            )
            .unwrap();
            assert_eq!(columns.projection(), [0, 2]);
            let mut reader = source.reader(columns.projection(), 256, 1 << 20, 1 << 20).unwrap();
            let mut ids = Vec::new();
            let mut sizes = Vec::new();
            while let Some(batch) = reader.next_batch().unwrap() {
                assert_eq!(batch.num_columns(), 2, "{format}");
                sizes.push(batch.num_rows());
                ids.extend(batch.column(0).as_string::<i32>().iter().map(|id| id.unwrap().to_owned()));
            }
            assert_eq!(ids, (0..1000).map(|i| format!("r{i}")).collect::<Vec<_>>(), "{format}");
            assert!(sizes.iter().all(|&rows| rows <= 256), "{format}: {sizes:?}");
            assert_eq!(reader.rows(), 1000);
        }
    }

    #[test]
    fn wide_rows_make_smaller_batches() {
        let dir = tempfile::tempdir().unwrap();
        let batch = table(1000);
        for format in [Format::Parquet, Format::Arrows] {
            let path = written(dir.path(), format, &batch);
            let source = TableSource::open(&InputSource::File(path), format).unwrap();
            let renames = ColumnMap::new(["id=junk".parse().unwrap()]).unwrap();
            let columns = InputColumns::resolve(source.schema(), &renames, "t", false, false).unwrap();
            let mut reader = source.reader(columns.projection(), 1000, 20_000, 1 << 20).unwrap();
            let mut batches = 0;
            while let Some(batch) = reader.next_batch().unwrap() {
                assert!(batch.num_rows() < 1000, "{format}");
                batches += 1;
            }
            assert!(batches >= 5, "{format}: {batches}");
        }
    }

    /// An IPC message is one buffer under every column: a batch read from it costs the
    /// bytes its rows span, once, and the pieces it is cut into add up to it (and to no
    /// more than one offset a string column beyond).
    #[test]
    fn a_batch_costs_the_bytes_its_rows_span_once_however_its_buffers_are_shared() {
        let dir = tempfile::tempdir().unwrap();
        let batch = table(1000);
        let path = written(dir.path(), Format::Arrow, &batch);
        let mut reader = FileReader::try_new_buffered(File::open(path).unwrap(), None).unwrap();
        reader.next().unwrap().unwrap();
        let read = reader.next().unwrap().unwrap();
        assert_eq!(read.num_rows(), 990);
        // ids, 100-byte strings and integers: about 112 bytes a row, plus offsets.
        let spans = batch_bytes(&read);
        assert!((990 * 112..990 * 130).contains(&spans), "{spans}");
        assert!(read.get_array_memory_size() > 2 * spans, "each column counted the whole message");
        assert!(held_bytes(&read) < 2 * spans, "{} held", held_bytes(&read));
        let pieces = [read.slice(0, 300), read.slice(300, 690)];
        // Each piece counts one more offset a string column.
        let sum: usize = pieces.iter().map(batch_bytes).sum();
        assert!((spans..=spans + 2 * 4).contains(&sum), "{sum} against {spans}");
    }

    /// Columns a projection leaves out of an IPC message are not kept alive by the batch
    /// read from it: it is copied into buffers of its own.
    #[test]
    fn a_projected_ipc_batch_does_not_hold_the_columns_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let batch = table(1000);
        let path = written(dir.path(), Format::Arrow, &batch);
        let file = File::open(path).unwrap();
        let projected =
            FileReader::try_new_buffered(file, Some(vec![0, 2])).unwrap().nth(1).unwrap().unwrap();
        assert!(held_bytes(&projected) > 2 * batch_bytes(&projected), "the message is shared");
        let kept = compacted(projected.clone());
        assert_eq!(kept, projected);
        assert!(held_bytes(&kept) <= 2 * batch_bytes(&kept), "{} held", held_bytes(&kept));
        // One that holds no more than it spans is handed on as it is.
        let own = table(10);
        assert!(compacted(own.clone()).column(1).to_data().buffers()[1]
            .ptr_eq(&own.column(1).to_data().buffers()[1]));
    }

    #[test]
    fn skipping_cuts_a_batch_and_goes_on_from_its_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = written(dir.path(), Format::Parquet, &table(1000));
        let source = TableSource::open(&InputSource::File(path), Format::Parquet).unwrap();
        let columns =
            InputColumns::resolve(source.schema(), &ColumnMap::default(), "t", false, false).unwrap();
        let mut reader = source.reader(columns.projection(), 100, 1 << 20, 1 << 20).unwrap();
        let mut seen = 0;
        assert_eq!(reader.skip(250, |batch| seen += batch.num_rows()).unwrap(), 250);
        assert_eq!((seen, reader.rows()), (250, 250));
        let next = reader.next_batch().unwrap().unwrap();
        assert_eq!(next.column(1).as_primitive::<UInt64Type>().value(0), 250);
        assert_eq!(next.num_rows(), 50);
        assert_eq!(reader.skip(10_000, |_| {}).unwrap(), 700);
    }

    #[test]
    fn stdin_cannot_hold_a_parquet_file_and_a_bom_is_not_a_column_name() {
        let err = TableSource::open(&InputSource::Stdin, Format::Parquet).unwrap_err();
        assert_eq!(err.to_string(), "a Parquet input must be a file: it cannot be read from stdin");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bom.csv");
        std::fs::write(&path, b"\xef\xbb\xbfid,n\na,5\n").unwrap();
        let source = TableSource::open(&InputSource::File(path), Format::Csv).unwrap();
        assert_eq!(source.schema().field(0).name(), "id");
        let err =
            TableSource::open(&InputSource::File(dir.path().join("bom.csv")), Format::Parquet).unwrap_err();
        assert!(err.to_string().starts_with("cannot read"), "{err}");
    }
}

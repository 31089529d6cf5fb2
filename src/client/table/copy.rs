//! Kept columns of a Parquet input written into a Parquet output as the column chunks the
//! input holds, byte for byte, rather than decoded and encoded again (`--keep` with
//! Parquet in and out).
//!
//! Encoding is what a kept column costs: with every column kept, a run would otherwise
//! write its whole input again through the Parquet encoder. A column chunk can be copied
//! when the output's row group holds the same rows as the input's, so the output's row
//! groups are the input's, one for one: the answer columns (and the id, and the Hive
//! partition columns, which the file does not hold) are encoded for the rows of each
//! input row group, and the kept columns' chunks of that group are spliced in beside them
//! (`SerializedRowGroupWriter::append_column`). The output's Parquet schema takes each
//! copied column's type from the input as it is, so that its chunks read as they did.
//!
//! Every chunk's place is checked against the file before the run starts (its offsets and
//! length inside the file's data), and copying is planned only when the whole plan holds:
//! otherwise the kept columns are encoded as before. The file is read by position
//! (`pread`), on a handle of its own beside the reader's, which seeks.
//!
//! A run cut off in the middle of an input row group (a stop, a failed read) has no chunk
//! to copy for the rows it holds: at the end, that group's kept columns are read from the
//! input for those rows and encoded, so that the output holds every row it counts.

use std::fs::File;
use std::io::{self, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{ArrowError, Schema, SchemaRef};
use bytes::Bytes;

use super::aligned::{from_parquet, write_aligned};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnWriter, ArrowRowGroupWriterFactory, ArrowWriterOptions,
};
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter, ProjectionMask};
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData, RowGroupMetaData};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{SchemaDescriptor, Type};

/// A Parquet file's header and trailer: the magic before the first chunk, the footer's
/// length and the magic after the last.
const PARQUET_MAGIC: u64 = 4;
const PARQUET_TAIL: u64 = 8;

/// Rows of the batches in which a cut-off group's kept columns are read back.
const READ_BACK_ROWS: usize = 1 << 16;

/// A file read by position, so that any number of readers share its handle without a
/// seek between them.
#[derive(Debug, Clone)]
struct Positional {
    file: Arc<File>,
    len: u64,
}

impl Length for Positional {
    fn len(&self) -> u64 {
        self.len
    }
}

/// The bytes of a [`Positional`] file from one offset to its end.
struct PositionalRead {
    file: Arc<File>,
    at: u64,
    end: u64,
}

impl Read for PositionalRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.end.saturating_sub(self.at);
        let len = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if len == 0 {
            return Ok(0);
        }
        let read = self.file.read_at(&mut buf[..len], self.at)?;
        self.at += read as u64;
        Ok(read)
    }
}

impl ChunkReader for Positional {
    type T = PositionalRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<PositionalRead> {
        if start > self.len {
            return Err(ParquetError::EOF(format!("offset {start} is past the file's {} bytes", self.len)));
        }
        Ok(PositionalRead { file: Arc::clone(&self.file), at: start, end: self.len })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let end = start.checked_add(length as u64).filter(|end| *end <= self.len).ok_or_else(|| {
            ParquetError::EOF(format!("{length} bytes at {start} are past the file's {} bytes", self.len))
        })?;
        let mut bytes = vec![0; (end - start) as usize];
        self.file.read_exact_at(&mut bytes, start)?;
        Ok(bytes.into())
    }
}

/// A Parquet input whose column chunks may be copied: its own handle, and the metadata
/// its reader read.
#[derive(Debug)]
pub struct CopySource {
    file: Positional,
    metadata: Arc<ParquetMetaData>,
}

impl CopySource {
    /// `file` (a handle of the input beside its reader's) and the `metadata` read from it.
    pub fn new(file: File, metadata: Arc<ParquetMetaData>) -> io::Result<CopySource> {
        let len = file.metadata()?.len();
        Ok(CopySource { file: Positional { file: Arc::new(file), len }, metadata })
    }
}

/// Which of an output's columns are copied from a Parquet input, checked against it.
#[derive(Debug, Clone)]
pub struct CopyPlan {
    source: Arc<CopySource>,
    /// For each field of the output's schema, the input's column it is copied from.
    copied: Vec<Option<usize>>,
    /// The output's Parquet schema: the copied columns' types as the input has them.
    parquet: Arc<SchemaDescriptor>,
    /// The fields that are written, not copied.
    written: Vec<usize>,
    /// What the writer is handed: the output's schema without the copied fields.
    rows: SchemaRef,
    /// The output's schema.
    output: SchemaRef,
}

/// The leaves of `schema`'s root field `root`, in order.
fn leaves_of(schema: &SchemaDescriptor, root: usize) -> Vec<usize> {
    (0..schema.num_columns()).filter(|leaf| schema.get_column_root_idx(*leaf) == root).collect()
}

/// Checks a chunk's place: its bytes (from the dictionary page, if any) inside the file's
/// data, between the leading magic and the footer.
fn check_chunk(chunk: &ColumnChunkMetaData, file_len: u64) -> Result<(), String> {
    let data = chunk.data_page_offset();
    let start = chunk.dictionary_page_offset().unwrap_or(data);
    let len = chunk.compressed_size();
    let path = chunk.column_path();
    let (Ok(start), Ok(data), Ok(len)) = (u64::try_from(start), u64::try_from(data), u64::try_from(len))
    else {
        return Err(format!("column {path}: a negative offset or length"));
    };
    let end = start.checked_add(len).ok_or_else(|| format!("column {path}: its end overflows"))?;
    let limit = file_len.saturating_sub(PARQUET_TAIL);
    if start < PARQUET_MAGIC || len == 0 || end > limit || data < start || data >= end {
        return Err(format!(
            "column {path}: {len} bytes at {start} (data at {data}) are not inside the file's data \
             ({PARQUET_MAGIC}..{limit})"
        ));
    }
    Ok(())
}

impl CopyPlan {
    /// Plans copying `copied` (pairs of a field of `output`, the output's schema, and the
    /// column of `input`, the input's schema, it keeps) from `source`. Why not, when a
    /// chunk's place, a type or a name does not hold; the columns are then encoded.
    pub fn new(
        source: CopySource,
        input: &Schema,
        output: &SchemaRef,
        copied: &[(usize, usize)],
        properties: &WriterProperties,
    ) -> Result<CopyPlan, String> {
        let schema = source.metadata.file_metadata().schema_descr();
        let roots = schema.root_schema().get_fields();
        if roots.len() != input.fields().len() {
            return Err(format!("{} Parquet columns for {} Arrow fields", roots.len(), input.fields().len()));
        }
        let mut by_field = vec![None; output.fields().len()];
        for &(field, root) in copied {
            let (Some(slot), Some(kept)) = (by_field.get_mut(field), input.fields().get(root)) else {
                return Err(format!("field {field} or column {root} is out of range"));
            };
            if slot.is_some() || copied.iter().filter(|(_, other)| *other == root).count() > 1 {
                return Err(format!("column {:?} is kept twice", kept.name()));
            }
            if output.field(field) != kept.as_ref() || roots[root].name() != kept.name() {
                return Err(format!("column {:?} is not the input's field", kept.name()));
            }
            *slot = Some(root);
        }
        for group in source.metadata.row_groups() {
            if group.num_rows() < 0 {
                return Err(format!("a row group of {} rows", group.num_rows()));
            }
            for &(_, root) in copied {
                for leaf in leaves_of(schema, root) {
                    check_chunk(group.column(leaf), source.file.len)?;
                }
            }
        }
        let converted = ArrowSchemaConverter::new().convert(output).map_err(|err| err.to_string())?;
        let mut fields = converted.root_schema().get_fields().to_vec();
        for (field, root) in by_field.iter().enumerate() {
            if let Some(root) = root {
                fields[field] = Arc::clone(&roots[*root]);
            }
        }
        let root = Type::group_type_builder(converted.root_schema().name())
            .with_fields(fields)
            .build()
            .map_err(|err| err.to_string())?;
        let parquet = Arc::new(SchemaDescriptor::new(Arc::new(root)));
        let written: Vec<usize> = (0..by_field.len()).filter(|field| by_field[*field].is_none()).collect();
        let rows = Arc::new(output.project(&written).map_err(|err| err.to_string())?);
        let output = Arc::clone(output);
        let plan = CopyPlan { source: Arc::new(source), copied: by_field, parquet, written, rows, output };
        // The writer's column writers are made from the two schemas together: made once
        // here, a mismatch between them refuses the plan rather than the run.
        CopyingWriter::new(io::sink(), &plan, properties.clone()).map_err(|err| err.to_string())?;
        Ok(plan)
    }

    /// The output's fields that are written (not copied), by index.
    pub fn written(&self) -> &[usize] {
        &self.written
    }

    /// The rows the writer is handed: the output's schema without the copied fields.
    pub fn rows_schema(&self) -> &SchemaRef {
        &self.rows
    }
}

/// A Parquet writer whose row groups are the input's, with the copied columns' chunks
/// spliced in (see the module's documentation).
pub struct CopyingWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    plan: CopyPlan,
    /// For each output field, its leaves in the output's Parquet schema.
    leaves: Vec<Range<usize>>,
    /// The input's row group being filled.
    group: usize,
    /// Rows of it written so far.
    filled: usize,
    /// The column writers of the group being filled, one a leaf of the output.
    writers: Vec<ArrowColumnWriter>,
    /// Rows of fewer than a write batch, waiting for the rest of theirs.
    carry: Option<RecordBatch>,
}

impl<W: Write + Send> CopyingWriter<W> {
    /// A writer of `output`'s rows to `out`, copying `plan`'s columns.
    pub fn new(
        out: W,
        plan: &CopyPlan,
        properties: WriterProperties,
    ) -> Result<CopyingWriter<W>, ArrowError> {
        let output = &plan.output;
        let options = ArrowWriterOptions::new()
            .with_properties(properties)
            .with_parquet_schema(SchemaDescriptor::new(plan.parquet.root_schema_ptr()));
        let writer =
            ArrowWriter::try_new_with_options(out, Arc::clone(output), options).map_err(from_parquet)?;
        let (file, factory) = writer.into_serialized_writer().map_err(from_parquet)?;
        let leaves = (0..output.fields().len())
            .map(|field| {
                let leaves = leaves_of(&plan.parquet, field);
                leaves.first().map_or(0..0, |first| *first..first + leaves.len())
            })
            .collect();
        let writers = factory.create_column_writers(0).map_err(from_parquet)?;
        if writers.len() != plan.parquet.num_columns() {
            return Err(ArrowError::SchemaError(format!(
                "{} column writers for {} Parquet columns",
                writers.len(),
                plan.parquet.num_columns()
            )));
        }
        let mut writer = CopyingWriter {
            file,
            factory,
            plan: plan.clone(),
            leaves,
            group: 0,
            filled: 0,
            writers,
            carry: None,
        };
        writer.skip_empty_groups();
        Ok(writer)
    }

    fn groups(&self) -> &[RowGroupMetaData] {
        self.plan.source.metadata.row_groups()
    }

    /// Moves past input row groups without rows: they have nothing to write.
    fn skip_empty_groups(&mut self) {
        while self.groups().get(self.group).is_some_and(|group| group.num_rows() == 0) {
            self.group += 1;
        }
    }

    /// Writes `rows` (of the plan's rows schema), closing each input row group as its
    /// rows are all written.
    pub fn write(&mut self, rows: &RecordBatch) -> Result<(), ArrowError> {
        let mut at = 0;
        while at < rows.num_rows() {
            let Some(group) = self.groups().get(self.group) else {
                return Err(ArrowError::InvalidArgumentError(format!(
                    "more rows than the input's {} row groups hold",
                    self.groups().len()
                )));
            };
            let group_rows = group.num_rows() as usize;
            let take = (group_rows - self.filled).min(rows.num_rows() - at);
            let (plan, leaves, writers) = (&self.plan, &self.leaves, &mut self.writers);
            write_aligned(&mut self.carry, &plan.rows, rows.slice(at, take), |piece| {
                encode(plan, leaves, writers, piece)
            })?;
            self.filled += take;
            at += take;
            if self.filled == group_rows {
                self.close_group(false)?;
            }
        }
        Ok(())
    }

    /// Closes the group being filled: its written columns' chunks, then (in the output's
    /// order) its copied ones, spliced from the input; or, when `cut` (the group is not
    /// whole), the copied columns read for its rows and encoded.
    fn close_group(&mut self, cut: bool) -> Result<(), ArrowError> {
        if let Some(rest) = self.carry.take() {
            encode(&self.plan, &self.leaves, &mut self.writers, &rest)?;
        }
        if cut {
            self.encode_copied()?;
        }
        let next = self.file.flushed_row_groups().len() + 1;
        let writers = std::mem::replace(
            &mut self.writers,
            self.factory.create_column_writers(next).map_err(from_parquet)?,
        );
        let source = &self.plan.source;
        let group = &source.metadata.row_groups()[self.group];
        let input_schema = source.metadata.file_metadata().schema_descr();
        let mut row_group = self.file.next_row_group().map_err(from_parquet)?;
        let mut writers = writers.into_iter();
        for (field, copied) in self.plan.copied.iter().enumerate() {
            let leaves = self.leaves[field].len();
            match copied {
                Some(root) if !cut => {
                    for leaf in leaves_of(input_schema, *root) {
                        writers.next();
                        let chunk = group.column(leaf);
                        let close = ColumnCloseResult {
                            bytes_written: chunk.compressed_size() as u64,
                            rows_written: group.num_rows() as u64,
                            metadata: chunk.clone(),
                            bloom_filter: None,
                            column_index: None,
                            offset_index: None,
                        };
                        row_group.append_column(&source.file, close).map_err(from_parquet)?;
                    }
                }
                _ => {
                    for writer in writers.by_ref().take(leaves) {
                        let chunk = writer.close().map_err(from_parquet)?;
                        chunk.append_to_row_group(&mut row_group).map_err(from_parquet)?;
                    }
                }
            }
        }
        row_group.close().map_err(from_parquet)?;
        self.group += 1;
        self.filled = 0;
        self.skip_empty_groups();
        Ok(())
    }

    /// Encodes the copied columns of the first `filled` rows of the group being filled,
    /// read from the input.
    fn encode_copied(&mut self) -> Result<(), ArrowError> {
        let source = &self.plan.source;
        let mut roots: Vec<usize> = self.plan.copied.iter().flatten().copied().collect();
        roots.sort_unstable();
        let metadata = ArrowReaderMetadata::try_new(Arc::clone(&source.metadata), ArrowReaderOptions::new())
            .map_err(from_parquet)?;
        let mask = ProjectionMask::roots(metadata.parquet_schema(), roots.iter().copied());
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(source.file.clone(), metadata)
            .with_row_groups(vec![self.group])
            .with_projection(mask)
            .with_limit(self.filled)
            .with_batch_size(READ_BACK_ROWS)
            .build()
            .map_err(from_parquet)?;
        for batch in reader {
            let batch = batch?;
            for (field, root) in self.plan.copied.iter().enumerate() {
                let Some(root) = root else { continue };
                let column = batch.column(roots.binary_search(root).expect("a copied root is read"));
                let writers = &mut self.writers[self.leaves[field].clone()];
                let leaves = compute_leaves(self.plan.output.field(field), column).map_err(from_parquet)?;
                for (writer, leaf) in writers.iter_mut().zip(&leaves) {
                    writer.write(leaf).map_err(from_parquet)?;
                }
            }
        }
        Ok(())
    }

    /// Row groups on disk so far.
    pub fn flushed_row_groups(&self) -> &[RowGroupMetaData] {
        self.file.flushed_row_groups()
    }

    /// Flushes what is written to the output, without closing the group being filled.
    pub fn sync(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// Closes the group being filled (its copied columns encoded when it is cut short)
    /// and writes the footer.
    pub fn finish(&mut self) -> Result<ParquetMetaData, ArrowError> {
        if self.filled > 0 || self.carry.is_some() {
            self.close_group(true)?;
        }
        let metadata = self.file.finish().map_err(from_parquet)?;
        self.file.flush()?;
        Ok(metadata)
    }
}

/// Encodes `rows` (the plan's written fields) into the column writers of their leaves.
fn encode(
    plan: &CopyPlan,
    leaves: &[Range<usize>],
    writers: &mut [ArrowColumnWriter],
    rows: &RecordBatch,
) -> Result<(), ArrowError> {
    for (column, &field) in rows.columns().iter().zip(&plan.written) {
        let arrays = compute_leaves(plan.output.field(field), column).map_err(from_parquet)?;
        for (writer, leaf) in writers[leaves[field].clone()].iter_mut().zip(&arrays) {
            writer.write(leaf).map_err(from_parquet)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use arrow_array::builder::{ListBuilder, UInt64Builder};
    use arrow_array::{ArrayRef, BooleanArray, StringArray, UInt64Array};
    use arrow_schema::{DataType, Field};

    use super::*;
    use crate::client::format::Format;
    use crate::client::input::InputSource;
    use crate::client::table::read::TableSource;
    use crate::client::table::write::{parquet_properties, read_back, Recovery, TableWriter, ROW_GROUP_ROWS};

    /// Row groups of the input: uneven, one shorter than a write batch (the empty one is
    /// not written).
    const GROUPS: [usize; 4] = [1_500, 0, 2_300, 7];
    const ROWS: usize = 1_500 + 2_300 + 7;

    /// An input of `id, label, piles, n`, its row groups [`GROUPS`].
    fn input(path: &Path) -> RecordBatch {
        let ids = UInt64Array::from_iter_values(0..ROWS as u64);
        let labels =
            StringArray::from_iter((0..ROWS).map(|i| (i % 7 != 0).then(|| format!("row {}", i % 97))));
        let mut piles = ListBuilder::new(UInt64Builder::new());
        for i in 0..ROWS as u64 {
            piles.values().append_slice(&[i, i * 3 % 11, 5][..(i % 4) as usize]);
            piles.append(i % 5 != 0);
        }
        let n = UInt64Array::from_iter((0..ROWS as u64).map(|i| (i % 3 != 0).then_some(i * 7)));
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("id", Arc::new(ids)),
            ("label", Arc::new(labels)),
            ("piles", Arc::new(piles.finish())),
            ("n", Arc::new(n)),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let mut writer = ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), None).unwrap();
        let mut at = 0;
        for rows in GROUPS {
            writer.write(&batch.slice(at, rows)).unwrap();
            writer.flush().unwrap();
            at += rows;
        }
        writer.close().unwrap();
        batch
    }

    /// The output's schema: the id, `label` and `piles` kept, an answer.
    fn output(input: &Schema) -> SchemaRef {
        let fields = vec![
            input.field(0).clone(),
            input.field(1).clone(),
            input.field(2).clone(),
            Field::new("alice_wins", DataType::Boolean, true),
        ];
        Arc::new(Schema::new(fields))
    }

    fn plan(path: &Path) -> Result<CopyPlan, String> {
        let source = TableSource::open(&InputSource::File(path.to_owned()), Format::Parquet).unwrap();
        let output = output(source.schema());
        let properties = parquet_properties(ROW_GROUP_ROWS);
        CopyPlan::new(source.copy_source().unwrap(), source.schema(), &output, &[(1, 1), (2, 2)], &properties)
    }

    /// The rows the writer is handed for `rows` of the input: the id and an answer.
    fn answers(plan: &CopyPlan, input: &RecordBatch, rows: Range<usize>) -> RecordBatch {
        let ids = input.column(0).slice(rows.start, rows.len());
        let wins = BooleanArray::from_iter((rows).map(|i| Some(i % 3 == 0)));
        RecordBatch::try_new(Arc::clone(plan.rows_schema()), vec![ids, Arc::new(wins)]).unwrap()
    }

    /// Writes `rows` of the input's answers to `writer` in batches of 333 rows.
    fn write(writer: &mut TableWriter, plan: &CopyPlan, input: &RecordBatch, rows: Range<usize>) {
        let mut at = rows.start;
        while at < rows.end {
            let end = (at + 333).min(rows.end);
            writer.write(&answers(plan, input, at..end), &[]).unwrap();
            at = end;
        }
    }

    fn read(path: &Path) -> (RecordBatch, Arc<ParquetMetaData>) {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
        let (schema, metadata) = (Arc::clone(builder.schema()), Arc::clone(builder.metadata()));
        let batches: Vec<RecordBatch> = builder.build().unwrap().map(Result::unwrap).collect();
        (arrow_select::concat::concat_batches(&schema, &batches).unwrap(), metadata)
    }

    /// The bytes of column `leaf`'s chunk in row group `group` of the file at `path`.
    fn chunk_bytes(path: &Path, metadata: &ParquetMetaData, group: usize, leaf: usize) -> Vec<u8> {
        let chunk = metadata.row_group(group).column(leaf);
        let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset()) as usize;
        std::fs::read(path).unwrap()[start..start + chunk.compressed_size() as usize].to_vec()
    }

    #[test]
    fn the_kept_columns_are_the_inputs_chunks_in_its_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        let (input_path, output_path) = (dir.path().join("in.parquet"), dir.path().join("out.parquet"));
        let rows = input(&input_path);
        let plan = plan(&input_path).unwrap();
        assert_eq!(plan.written(), [0, 3]);
        let mut writer = TableWriter::copying(Box::new(File::create(&output_path).unwrap()), &plan).unwrap();
        write(&mut writer, &plan, &rows, 0..ROWS);
        assert_eq!(writer.finish().unwrap().rows, ROWS as u64);

        let (written, metadata) = read(&output_path);
        let (_, input_metadata) = read(&input_path);
        let groups: Vec<i64> = metadata.row_groups().iter().map(RowGroupMetaData::num_rows).collect();
        assert_eq!(groups, [1_500, 2_300, 7], "the input's row groups");
        assert_eq!(input_metadata.num_row_groups(), 3, "an empty group is not written");
        for name in ["id", "label", "piles"] {
            assert_eq!(written.column_by_name(name).unwrap(), rows.column_by_name(name).unwrap(), "{name}");
        }
        let wins = written.column_by_name("alice_wins").unwrap();
        assert_eq!(wins, answers(&plan, &rows, 0..ROWS).column(1));
        for (group, input_group) in [(0, 0), (1, 1), (2, 2)] {
            for leaf in [1, 2] {
                assert_eq!(
                    chunk_bytes(&output_path, &metadata, group, leaf),
                    chunk_bytes(&input_path, &input_metadata, input_group, leaf),
                    "group {group}, column {leaf}: copied byte for byte"
                );
            }
        }
    }

    #[test]
    fn a_run_cut_off_inside_a_row_group_keeps_every_row_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let (input_path, output_path) = (dir.path().join("in.parquet"), dir.path().join("out.parquet"));
        let rows = input(&input_path);
        let plan = plan(&input_path).unwrap();
        let mut writer = TableWriter::copying(Box::new(File::create(&output_path).unwrap()), &plan).unwrap();
        write(&mut writer, &plan, &rows, 0..2_000);
        assert_eq!(writer.durable().unwrap().rows, 1_500, "whole groups only");
        writer.finish().unwrap();
        let (written, metadata) = read(&output_path);
        let groups: Vec<i64> = metadata.row_groups().iter().map(RowGroupMetaData::num_rows).collect();
        assert_eq!(groups, [1_500, 500]);
        for name in ["id", "label", "piles"] {
            assert_eq!(
                written.column_by_name(name).unwrap(),
                &rows.column_by_name(name).unwrap().slice(0, 2_000)
            );
        }
    }

    #[test]
    fn a_resumed_output_is_the_file_of_a_run_never_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let input_path = dir.path().join("in.parquet");
        let rows = input(&input_path);
        let plan = plan(&input_path).unwrap();
        let whole = dir.path().join("whole.parquet");
        let mut writer = TableWriter::copying(Box::new(File::create(&whole).unwrap()), &plan).unwrap();
        write(&mut writer, &plan, &rows, 0..ROWS);
        writer.finish().unwrap();

        // Cut off after 3,900 rows: the first group and most of the second are written,
        // the first group is durable, the rest is lost with the process.
        let cut = dir.path().join("cut.parquet");
        let mut writer = TableWriter::copying(Box::new(File::create(&cut).unwrap()), &plan).unwrap();
        write(&mut writer, &plan, &rows, 0..3_700);
        let durable = writer.durable().unwrap();
        assert_eq!(durable.rows, 1_500);
        assert!(matches!(durable.recovery, Recovery::Footer { .. }));
        drop(writer);

        let resumed = dir.path().join("resumed.parquet");
        let mut writer = TableWriter::copying(Box::new(File::create(&resumed).unwrap()), &plan).unwrap();
        let output = Arc::clone(&plan.output);
        read_back(Format::Parquet, &cut, &output, Some(plan.written()), &durable.recovery, 1_500, |batch| {
            writer.write(&batch, &[])
        })
        .unwrap();
        write(&mut writer, &plan, &rows, 1_500..ROWS);
        writer.finish().unwrap();
        assert!(std::fs::read(&resumed).unwrap() == std::fs::read(&whole).unwrap(), "the same bytes");
    }

    #[test]
    fn a_chunk_outside_the_file_or_a_column_kept_twice_is_not_copied() {
        let dir = tempfile::tempdir().unwrap();
        let input_path = dir.path().join("in.parquet");
        input(&input_path);
        let source = TableSource::open(&InputSource::File(input_path.clone()), Format::Parquet).unwrap();
        let output = output(source.schema());
        let properties = parquet_properties(ROW_GROUP_ROWS);
        let twice = CopyPlan::new(
            source.copy_source().unwrap(),
            source.schema(),
            &output,
            &[(1, 1), (2, 1)],
            &properties,
        );
        assert_eq!(twice.unwrap_err(), "column \"label\" is kept twice");
        // The file cut short after its metadata was read: its chunks' places no longer hold.
        let len = std::fs::metadata(&input_path).unwrap().len();
        File::options().write(true).open(&input_path).unwrap().set_len(len / 2).unwrap();
        let err = CopyPlan::new(
            source.copy_source().unwrap(),
            source.schema(),
            &output,
            &[(1, 1), (2, 2)],
            &properties,
        )
        .unwrap_err();
        assert!(err.contains("are not inside the file's data"), "{err}");
    }
}

//! The fingerprint of a table's rows read so far: what lets `--resume` prove that an
//! output answers this table.
//!
//! It hashes values, not files or batches: each column feeds one xxh3 stream with its
//! valid values and the lengths of its runs of valid and null rows, so the same rows give
//! the same fingerprint however they are cut into batches (another `--batch-rows`, another
//! row-group layout). Values are hashed in bulk where Arrow lays them out flat (integers,
//! the bytes of strings, list items), which keeps it off the per-row path.

use arrow_array::cast::AsArray;
use arrow_array::types::{ByteArrayType, GenericBinaryType, GenericStringType};
use arrow_array::{Array, ArrayRef, OffsetSizeTrait, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Schema};
use xxhash_rust::xxh3::Xxh3;

use crate::client::fingerprint::Checkpoint;

/// The running fingerprint of a table's rows.
#[derive(Clone)]
pub struct TableFingerprint {
    /// The columns' names and types.
    schema: u64,
    columns: Vec<ColumnHash>,
    rows: u64,
}

impl std::fmt::Debug for TableFingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFingerprint").field("rows", &self.rows).finish_non_exhaustive()
    }
}

impl TableFingerprint {
    /// The fingerprint of no rows of a table of `schema` (the columns as read).
    pub fn new(schema: &Schema) -> Self {
        let mut hasher = Xxh3::new();
        for field in schema.fields() {
            hasher.update(format!("{}:{}\0", field.name(), field.data_type()).as_bytes());
        }
        TableFingerprint {
            schema: hasher.digest(),
            columns: schema.fields().iter().map(|_| ColumnHash::default()).collect(),
            rows: 0,
        }
    }

    /// Adds the rows of `batch`, whose columns are those of the schema given to `new`.
    pub fn add(&mut self, batch: &RecordBatch) {
        for (hash, column) in self.columns.iter_mut().zip(batch.columns()) {
            hash.add(column.as_ref());
        }
        self.rows += batch.num_rows() as u64;
    }

    /// Where the table stands now; `lines` and `input_line` both count rows.
    pub fn checkpoint(&self) -> Checkpoint {
        let mut hasher = Xxh3::new();
        hasher.update(&self.rows.to_le_bytes());
        hasher.update(&self.schema.to_le_bytes());
        for column in &self.columns {
            hasher.update(&column.digest().to_le_bytes());
        }
        Checkpoint { lines: self.rows, input_line: self.rows, hash: hasher.digest() }
    }
}

/// One column's streams: its runs, the lengths of its valid values (strings, lists) and
/// the values themselves, each a stream of its own so that where a batch ends cannot
/// change what follows what.
#[derive(Clone, Default)]
struct ColumnHash {
    runs: Xxh3,
    lengths: Xxh3,
    hasher: Xxh3,
    /// The run being read: valid or null, and its length so far. A run is hashed when the
    /// next one starts, which keeps the stream the same wherever the batches are cut.
    valid: bool,
    run: u64,
    /// The items of a list column.
    items: Option<Box<ColumnHash>>,
    /// Lengths or formatted values waiting to be hashed together.
    scratch: Vec<u8>,
    text: String,
}

impl ColumnHash {
    fn digest(&self) -> u64 {
        let mut hasher = self.runs.clone();
        hasher.update(&[u8::from(self.valid)]);
        hasher.update(&self.run.to_le_bytes());
        hasher.update(&self.lengths.digest().to_le_bytes());
        hasher.update(&self.hasher.digest().to_le_bytes());
        if let Some(items) = &self.items {
            hasher.update(&items.digest().to_le_bytes());
        }
        hasher.digest()
    }

    /// Extends the current run by `len` rows, valid or not.
    fn run(&mut self, valid: bool, len: u64) {
        if len == 0 {
            return;
        }
        if valid != self.valid && self.run > 0 {
            self.runs.update(&[u8::from(self.valid)]);
            self.runs.update(&self.run.to_le_bytes());
            self.run = 0;
        }
        self.valid = valid;
        self.run += len;
    }

    fn add(&mut self, array: &dyn Array) {
        let len = array.len();
        match array.logical_nulls() {
            None => {
                self.run(true, len as u64);
                self.values(array, 0, len);
            }
            Some(nulls) => {
                let mut at = 0;
                for (start, end) in nulls.valid_slices() {
                    self.run(false, (start - at) as u64);
                    self.run(true, (end - start) as u64);
                    self.values(array, start, end);
                    at = end;
                }
                self.run(false, (len - at) as u64);
            }
        }
    }

    /// Hashes the values of rows `start..end`, all valid.
    fn values(&mut self, array: &dyn Array, start: usize, end: usize) {
        let ty = array.data_type();
        match ty {
            DataType::Utf8 => self.byte_array::<GenericStringType<i32>>(array, start, end),
            DataType::LargeUtf8 => self.byte_array::<GenericStringType<i64>>(array, start, end),
            DataType::Binary => self.byte_array::<GenericBinaryType<i32>>(array, start, end),
            DataType::LargeBinary => self.byte_array::<GenericBinaryType<i64>>(array, start, end),
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                self.list(list.value_offsets(), list.values(), start, end);
            }
            DataType::LargeList(_) => {
                let list = array.as_list::<i64>();
                self.list(list.value_offsets(), list.values(), start, end);
            }
            DataType::FixedSizeList(_, size) => {
                let size = *size as usize;
                let list = array.as_fixed_size_list();
                let items = list.values().slice((list.offset() + start) * size, (end - start) * size);
                self.items.get_or_insert_with(Box::default).add(items.as_ref());
            }
            ty if ty.is_primitive() => {
                let width = ty.primitive_width().expect("a primitive type has a width");
                let data = array.to_data();
                let offset = data.offset();
                let bytes = &data.buffers()[0].as_slice()[(offset + start) * width..(offset + end) * width];
                self.hasher.update(bytes);
            }
            _ => self.formatted(array, start, end),
        }
    }

    fn byte_array<T: ByteArrayType>(&mut self, array: &dyn Array, start: usize, end: usize) {
        let array = array.as_bytes::<T>();
        self.bytes(array.value_offsets(), array.values(), start, end);
    }

    /// Strings or bytes: each value's length, then all their bytes at once.
    fn bytes<O: OffsetSizeTrait>(&mut self, offsets: &[O], values: &[u8], start: usize, end: usize) {
        self.lengths(offsets, start, end);
        self.hasher.update(&values[offsets[start].as_usize()..offsets[end].as_usize()]);
    }

    /// Lists: each list's length, then the items (with their own runs).
    fn list<O: OffsetSizeTrait>(&mut self, offsets: &[O], items: &ArrayRef, start: usize, end: usize) {
        self.lengths(offsets, start, end);
        let (first, last) = (offsets[start].as_usize(), offsets[end].as_usize());
        let items = items.slice(first, last - first);
        self.items.get_or_insert_with(Box::default).add(items.as_ref());
    }

    fn lengths<O: OffsetSizeTrait>(&mut self, offsets: &[O], start: usize, end: usize) {
        self.scratch.clear();
        for pair in offsets[start..=end].windows(2) {
            self.scratch.extend_from_slice(&((pair[1] - pair[0]).as_usize() as u64).to_le_bytes());
            if self.scratch.len() >= 1 << 12 {
                self.lengths.update(&self.scratch);
                self.scratch.clear();
            }
        }
        self.lengths.update(&self.scratch);
    }

    /// Any other type (an id of a date, a decimal, a struct, a view...): as Arrow displays
    /// each value, length first.
    fn formatted(&mut self, array: &dyn Array, start: usize, end: usize) {
        match array.data_type() {
            DataType::Boolean => {
                let bits = array.as_boolean();
                self.scratch.clear();
                self.scratch.extend((start..end).map(|row| u8::from(bits.value(row))));
                self.hasher.update(&self.scratch);
                return;
            }
            DataType::Dictionary(..) => {
                // As its values: a dictionary and its hydrated copy are the same rows.
                if let Ok(values) =
                    arrow_cast::cast(&array.slice(start, end - start), value_type(array.data_type()))
                {
                    return self.values(values.as_ref(), 0, end - start);
                }
            }
            _ => {}
        }
        let Ok(formatter) = ArrayFormatter::try_new(array, &FormatOptions::default()) else {
            // A type Arrow cannot display still counts its rows.
            self.hasher.update(&((end - start) as u64).to_le_bytes());
            return;
        };
        for row in start..end {
            self.text.clear();
            let _ = formatter.value(row).write(&mut self.text);
            self.lengths.update(&(self.text.len() as u64).to_le_bytes());
            self.hasher.update(self.text.as_bytes());
        }
    }
}

fn value_type(ty: &DataType) -> &DataType {
    match ty {
        DataType::Dictionary(_, values) => values,
        ty => ty,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int64Type;
    use arrow_array::{Int32Array, ListArray, StringArray, UInt64Array};
    use arrow_schema::Field;
    use std::sync::Arc;

    fn table() -> RecordBatch {
        let ids = StringArray::from(vec![Some("a"), None, Some("ccc"), Some(""), None, Some("f")]);
        let n = UInt64Array::from(vec![None, Some(2), None, Some(4), Some(5), None]);
        let stones = ListArray::from_iter_primitive::<Int64Type, _, _>([
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![]),
            Some(vec![Some(3), None]),
            None,
            Some(vec![Some(6)]),
        ]);
        let when = Int32Array::from(vec![1, 2, 3, 4, 5, 6]);
        let when = arrow_cast::cast(&when, &DataType::Date32).unwrap();
        let schema = Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("n", DataType::UInt64, true),
            Field::new("stones", stones.data_type().clone(), true),
            Field::new("when", DataType::Date32, true),
        ]);
        RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ids), Arc::new(n), Arc::new(stones), when])
            .unwrap()
    }

    fn fingerprint(batches: &[RecordBatch]) -> Checkpoint {
        let mut fingerprint = TableFingerprint::new(batches[0].schema_ref());
        for batch in batches {
            fingerprint.add(batch);
        }
        fingerprint.checkpoint()
    }

    #[test]
    fn the_same_rows_cut_anywhere_give_the_same_fingerprint() {
        let table = table();
        let whole = fingerprint(std::slice::from_ref(&table));
        assert_eq!(whole.lines, 6);
        for cut in 1..6 {
            let parts = [table.slice(0, cut), table.slice(cut, 6 - cut)];
            assert_eq!(fingerprint(&parts), whole, "cut at {cut}");
        }
        let thirds = [table.slice(0, 1), table.slice(1, 4), table.slice(5, 1)];
        assert_eq!(fingerprint(&thirds), whole);
    }

    #[test]
    fn any_change_of_a_value_or_a_null_changes_it() {
        let table = table();
        let whole = fingerprint(std::slice::from_ref(&table));
        assert_ne!(fingerprint(&[table.slice(0, 5)]).hash, whole.hash);
        for column in 0..table.num_columns() {
            // The same column with its rows rotated by one.
            let rotated = arrow_select::concat::concat(&[
                table.column(column).slice(1, 5).as_ref(),
                table.column(column).slice(0, 1).as_ref(),
            ])
            .unwrap();
            let mut columns = table.columns().to_vec();
            columns[column] = rotated;
            let changed = RecordBatch::try_new(table.schema(), columns).unwrap();
            assert_ne!(fingerprint(&[changed]).hash, whole.hash, "column {column}");
        }
        let renamed = Schema::new(vec![Field::new("x", DataType::UInt64, true)]);
        let n = table.column(1).clone();
        let other = RecordBatch::try_new(Arc::new(renamed), vec![n.clone()]).unwrap();
        let same = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("n", DataType::UInt64, true)])),
            vec![n],
        )
        .unwrap();
        assert_ne!(fingerprint(&[other]).hash, fingerprint(&[same]).hash);
    }
}

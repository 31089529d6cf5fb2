//! The fingerprint of a table's rows read so far: what lets `--resume` prove that an
//! output answers this table.
//!
//! It hashes values, not files or batches: each column feeds xxh3 streams with which rows
//! are null, the lengths of its values and the valid values themselves, so the same rows
//! give the same fingerprint however they are cut into batches (another `--batch-rows`,
//! another row-group layout, a copy from another writer). Values are hashed a batch at a
//! time where Arrow lays them out flat (integers, the bytes of strings, list items).

use arrow_array::cast::AsArray;
use arrow_array::types::{ByteArrayType, GenericBinaryType, GenericStringType};
use arrow_array::{Array, ArrayRef, OffsetSizeTrait, RecordBatch};
use arrow_buffer::{ArrowNativeType, ToByteSlice};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Schema};
use xxhash_rust::xxh3::Xxh3;

use crate::client::fingerprint::Checkpoint;
use crate::columnar::spread_bits;

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

/// One column's streams: which rows are null, the lengths of its values (strings, lists)
/// and the values themselves, each a stream of its own, fed a batch at a time, so that
/// where a batch ends cannot change what follows what. A null row counts as a zero byte
/// in the first, a length 0 in the second and nothing (or zeros) in the third, whatever
/// bytes Arrow keeps under it.
#[derive(Clone, Default)]
struct ColumnHash {
    validity: Xxh3,
    lengths: Xxh3,
    values: Xxh3,
    /// The items of a list column.
    items: Option<Box<ColumnHash>>,
    /// Bytes waiting to be hashed together.
    scratch: Vec<u8>,
    /// Lengths waiting to be hashed together, each stored little-endian.
    words: Vec<u64>,
    /// The batch's rows being added: 1 for a valid row, 0 for a null one.
    rows: Vec<u8>,
    text: String,
}

impl ColumnHash {
    fn digest(&self) -> u64 {
        let mut hasher = Xxh3::new();
        for stream in [&self.validity, &self.lengths, &self.values] {
            hasher.update(&stream.digest().to_le_bytes());
        }
        if let Some(items) = &self.items {
            hasher.update(&items.digest().to_le_bytes());
        }
        hasher.digest()
    }

    fn add(&mut self, array: &dyn Array) {
        let nulls = array.logical_nulls();
        // One byte a row, read below as often as a bitmap would be probed.
        let mut rows = std::mem::take(&mut self.rows);
        rows.clear();
        match &nulls {
            None => rows.resize(array.len(), 1),
            Some(nulls) => spread_bits(nulls.inner(), &mut rows),
        }
        self.validity.update(&rows);
        self.add_rows(array, nulls.is_none(), &rows);
        self.rows = rows;
    }

    /// `add`, given each row's validity byte in `rows`.
    fn add_rows(&mut self, array: &dyn Array, no_nulls: bool, rows: &[u8]) {
        let valid = |row: usize| rows[row] != 0;
        match array.data_type() {
            DataType::Utf8 => self.byte_array::<GenericStringType<i32>>(array, rows),
            DataType::LargeUtf8 => self.byte_array::<GenericStringType<i64>>(array, rows),
            DataType::Binary => self.byte_array::<GenericBinaryType<i32>>(array, rows),
            DataType::LargeBinary => self.byte_array::<GenericBinaryType<i64>>(array, rows),
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                self.list(list.value_offsets(), list.values(), rows);
            }
            DataType::LargeList(_) => {
                let list = array.as_list::<i64>();
                self.list(list.value_offsets(), list.values(), rows);
            }
            DataType::FixedSizeList(_, size) => {
                let size = *size as usize;
                let list = array.as_fixed_size_list();
                let items = list.values().slice(list.offset() * size, list.len() * size);
                self.items.get_or_insert_with(Box::default).add(items.as_ref());
            }
            ty if ty.is_primitive() => {
                let width = ty.primitive_width().expect("a primitive type has a width");
                let data = array.to_data();
                let (start, end) = (data.offset() * width, (data.offset() + data.len()) * width);
                let bytes = &data.buffers()[0].as_slice()[start..end];
                if no_nulls {
                    self.values.update(bytes);
                    return;
                }
                self.scratch.clear();
                self.scratch.extend_from_slice(bytes);
                zero_nulls(&mut self.scratch, width, rows);
                self.values.update(&self.scratch);
            }
            _ => self.formatted(array, valid),
        }
    }

    fn byte_array<T: ByteArrayType>(&mut self, array: &dyn Array, rows: &[u8]) {
        let valid = |row: usize| rows[row] != 0;
        let array = array.as_bytes::<T>();
        let (offsets, values) = (array.value_offsets(), array.values());
        if self.lengths_of(offsets, rows) {
            self.values.update(&values[offsets[0].as_usize()..offsets[offsets.len() - 1].as_usize()]);
            return;
        }
        for (row, pair) in offsets.windows(2).enumerate() {
            if valid(row) {
                self.values.update(&values[pair[0].as_usize()..pair[1].as_usize()]);
            }
        }
    }

    fn list<O: OffsetSizeTrait>(&mut self, offsets: &[O], items: &ArrayRef, rows: &[u8]) {
        let valid = |row: usize| rows[row] != 0;
        let whole = self.lengths_of(offsets, rows);
        let items_hash = self.items.get_or_insert_with(Box::default);
        if whole {
            let (first, last) = (offsets[0].as_usize(), offsets[offsets.len() - 1].as_usize());
            items_hash.add(items.slice(first, last - first).as_ref());
            return;
        }
        // Null lists that span items, which writers seldom make: the valid ones alone.
        for (row, pair) in offsets.windows(2).enumerate() {
            if valid(row) {
                let (first, last) = (pair[0].as_usize(), pair[1].as_usize());
                items_hash.add(items.slice(first, last - first).as_ref());
            }
        }
    }

    /// Hashes each row's length (0 for a null row), as a little-endian `u64`; true when no
    /// null row spans anything, so that the whole range holds the valid rows' values and
    /// nothing else.
    fn lengths_of<O: OffsetSizeTrait>(&mut self, offsets: &[O], rows: &[u8]) -> bool {
        let (starts, ends) = (&offsets[..offsets.len() - 1], &offsets[1..]);
        let mut kept = 0;
        self.words.clear();
        self.words.extend(starts.iter().zip(ends).zip(rows).map(|((&start, &end), &valid)| {
            let len = (end - start).as_usize() as u64 * u64::from(valid);
            kept += len;
            len.to_le()
        }));
        self.lengths.update(self.words.to_byte_slice());
        kept == (offsets[offsets.len() - 1] - offsets[0]).as_usize() as u64
    }

    /// Any other type (an id of a date, a decimal, a struct, a view...): as Arrow displays
    /// each value, length first.
    fn formatted(&mut self, array: &dyn Array, valid: impl Fn(usize) -> bool) {
        if let DataType::Boolean = array.data_type() {
            let bits = array.as_boolean();
            self.scratch.clear();
            self.scratch.extend((0..array.len()).map(|row| u8::from(valid(row) && bits.value(row))));
            self.values.update(&self.scratch);
            return;
        }
        if let DataType::Dictionary(_, values) = array.data_type() {
            // As its values: a dictionary and its hydrated copy are the same rows.
            if let Ok(values) = arrow_cast::cast(array, values) {
                return self.formatted(values.as_ref(), valid);
            }
        }
        let Ok(formatter) = ArrayFormatter::try_new(array, &FormatOptions::default()) else {
            // A type Arrow cannot display still counts its rows, in `validity`.
            return;
        };
        for row in (0..array.len()).filter(|&row| valid(row)) {
            self.text.clear();
            let _ = formatter.value(row).write(&mut self.text);
            self.lengths.update(&(self.text.len() as u64).to_le_bytes());
            self.values.update(self.text.as_bytes());
        }
    }
}

/// Zeroes the values (of `width` bytes each, one a row) of the rows that `rows` marks
/// null, without a branch a row; the common widths get a loop of their own.
fn zero_nulls(values: &mut [u8], width: usize, rows: &[u8]) {
    #[inline(always)]
    fn masked(values: &mut [u8], width: usize, rows: &[u8]) {
        for (value, &valid) in values.chunks_exact_mut(width).zip(rows) {
            let keep = 0u8.wrapping_sub(valid);
            value.iter_mut().for_each(|byte| *byte &= keep);
        }
    }
    match width {
        8 => masked(values, 8, rows),
        4 => masked(values, 4, rows),
        width => masked(values, width, rows),
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
    fn a_resume_file_of_an_earlier_version_still_proves_its_rows() {
        // The digest a resume file holds must not change with how it is computed: this
        // is what the fingerprint gave for `table()` before its loops were last reworked.
        assert_eq!(fingerprint(&[table()]).hash, 10_380_959_445_888_597_387);
    }

    #[test]
    fn what_lies_under_a_null_does_not_count() {
        use arrow_buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
        let nulls = Some(NullBuffer::from(vec![true, false, true]));
        let of = |columns: Vec<ArrayRef>| {
            let fields: Vec<Field> = columns
                .iter()
                .enumerate()
                .map(|(i, c)| Field::new(format!("c{i}"), c.data_type().clone(), true))
                .collect();
            fingerprint(&[RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()])
        };
        let item = Arc::new(Field::new_list_field(DataType::Int64, true));
        let garbage: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::new(ScalarBuffer::from(vec![1, 99, 3]), nulls.clone())),
            Arc::new(StringArray::new(
                OffsetBuffer::new(vec![0, 1, 3, 4].into()),
                b"abcd".into(),
                nulls.clone(),
            )),
            Arc::new(ListArray::new(
                Arc::clone(&item),
                OffsetBuffer::new(vec![0, 1, 3, 4].into()),
                Arc::new(arrow_array::Int64Array::from(vec![1, 7, 7, 4])),
                nulls.clone(),
            )),
        ];
        let clean: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(vec![Some(1), None, Some(3)])),
            Arc::new(StringArray::from(vec![Some("a"), None, Some("d")])),
            Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>([
                Some(vec![Some(1)]),
                None,
                Some(vec![Some(4)]),
            ])),
        ];
        for (garbage, clean) in garbage.into_iter().zip(clean) {
            let ty = format!("{}", clean.data_type());
            assert_eq!(of(vec![garbage]), of(vec![clean]), "{ty}");
        }
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

    /// 300 rows of every layout the loops treat apart (nulls in strings, lists, 8-byte
    /// and 4-byte values; none in others), sliced at row 7 so that no bitmap starts on a
    /// byte: a run of 64 rows and the rest both go through them.
    fn long_table() -> RecordBatch {
        let rows = 307;
        let null = |row: usize, every: usize| row % every == 3;
        let ids = StringArray::from_iter((0..rows).map(|r| (!null(r, 5)).then(|| format!("row{r}"))));
        let plain = StringArray::from_iter_values((0..rows).map(|r| "x".repeat(r % 4)));
        let n = UInt64Array::from_iter((0..rows).map(|r| (!null(r, 3)).then_some(r as u64 * 977)));
        let small = Int32Array::from_iter((0..rows).map(|r| (!null(r, 7)).then_some(r as i32 - 150)));
        let stones =
            ListArray::from_iter_primitive::<Int64Type, _, _>((0..rows).map(|r| {
                (!null(r, 4)).then(|| (0..r % 5).map(|i| Some((r * i) as i64)).collect::<Vec<_>>())
            }));
        let schema = Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("plain", DataType::Utf8, false),
            Field::new("n", DataType::UInt64, true),
            Field::new("small", DataType::Int32, true),
            Field::new("stones", stones.data_type().clone(), true),
        ]);
        let columns: Vec<ArrayRef> =
            vec![Arc::new(ids), Arc::new(plain), Arc::new(n), Arc::new(small), Arc::new(stones)];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap().slice(7, 300)
    }

    #[test]
    fn a_longer_table_of_an_earlier_version_still_proves_its_rows() {
        // As `a_resume_file_of_an_earlier_version...`, through the loops' runs of 64 rows
        // too: what the fingerprint gave before they were last reworked, whole and cut.
        let table = long_table();
        let whole = fingerprint(std::slice::from_ref(&table));
        assert_eq!(whole.hash, 11_387_627_144_967_914_733);
        for cut in [1, 63, 64, 65, 130, 299] {
            assert_eq!(
                fingerprint(&[table.slice(0, cut), table.slice(cut, 300 - cut)]),
                whole,
                "cut at {cut}"
            );
        }
    }
}

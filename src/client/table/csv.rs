//! CSV cells: CSV has no types, so every cell is read as text and the game columns are
//! parsed here, a cell's fault being that row's error (`INVALID_CELL`), not the file's.
//!
//! A number is read by the rule every door reads numbers by ([`crate::columnar::text_count`]):
//! `7`, and `7.0` or `1e3` (as pandas writes a column with a missing value) when the digits
//! make a whole number; `nan` is no value, as an empty cell is. A list (`stones`, `piles`)
//! is written as JSON and Python write one (`[1, 2, 3]`) or as numpy prints an array
//! (`[1 2 3]`), `[]` for none. An empty cell is null, so an empty Sum Game string cannot be
//! told apart from no Sum Game: give empty strings in JSON lines or Parquet.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder, UInt64Builder};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use tonic::Code;

use super::columns::InputColumns;
use crate::columnar;
use crate::convert;
use crate::games::InputShape;
use crate::pb;

/// The error reason of a CSV cell that is not its game's input.
pub const INVALID_CELL: &str = "INVALID_CELL";

/// Parses `cell` as a list of counts into `values`, cleared first; `None` when it is not
/// one. JSON and Python write `[1, 2, 3]`; numpy's arrays, as pandas writes a column of
/// them, `[1 2 3]` (long ones across lines); a list of numpy scalars `[np.uint64(1)]`.
pub fn parse_list(cell: &str, values: &mut Vec<u64>) -> Option<()> {
    values.clear();
    let inner = cell.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut push = |item: &str| {
        values.push(parse_integer(numpy_scalar(item.trim()))?);
        Some(())
    };
    match inner.contains(',') {
        true => inner.split(',').try_for_each(&mut push),
        false => inner.split_whitespace().try_for_each(&mut push),
    }
}

/// The number inside a numpy scalar's repr (`np.uint64(7)` -> `7`), or `item` itself.
fn numpy_scalar(item: &str) -> &str {
    let inner = item.strip_prefix("np.").or_else(|| item.strip_prefix("numpy."));
    let inner = inner.and_then(|inner| inner.split_once('(')).and_then(|(name, rest)| {
        name.bytes().all(|byte| byte.is_ascii_alphanumeric()).then(|| rest.strip_suffix(')')).flatten()
    });
    inner.unwrap_or(item)
}

/// A cell holding one count, by the rule every door reads numbers by
/// ([`columnar::text_count`]: `7`, `7.0`, `1e3`); `Some(None)` for `nan`, no value.
fn parse_count(cell: &str) -> Option<Option<u64>> {
    columnar::text_count(cell).ok()
}

/// A list item: a count, `nan` not among them.
fn parse_integer(item: &str) -> Option<u64> {
    parse_count(item).flatten()
}

/// Appends `values` as a list cell: `[1,2,3]`.
pub fn write_list(out: &mut String, values: impl IntoIterator<Item = u64>) {
    out.push('[');
    let mut buffer = itoa::Buffer::new();
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(buffer.format(value));
    }
    out.push(']');
}

/// Parses the game cells of `batch` (a CSV table's columns, projected, all text) into the
/// canonical types; a cell that does not parse is null, and its row gets the error
/// solution returned with its index in the batch. Row `first_row` is the batch's first.
pub fn parse_cells(
    columns: &InputColumns,
    batch: &RecordBatch,
    first_row: u64,
) -> Result<(RecordBatch, Vec<(usize, pb::Solution)>), ArrowError> {
    let schema = batch.schema();
    let mut errors: BTreeMap<usize, pb::Solution> = BTreeMap::new();
    let ids = match columns.id() {
        Some(id) => Some(batch.column(schema.index_of(id)?).as_string::<i32>().clone()),
        None => None,
    };
    let id_of = |row: usize| match &ids {
        Some(ids) if ids.is_valid(row) => ids.value(row).to_owned(),
        _ => (first_row + row as u64).to_string(),
    };
    let mut fields = schema.fields().to_vec();
    let mut arrays = batch.columns().to_vec();
    let mut scratch = Vec::new();
    for (kind, name) in columns.games() {
        let index = schema.index_of(name)?;
        let cells = batch.column(index).as_string::<i32>();
        let mut fail = |row: usize, expected: &str| {
            let quoted = columnar::quoted(cells.value(row));
            let absolute = first_row + row as u64;
            let message = format!("row {absolute}: column {name:?}: {quoted} is not {expected}");
            let metadata = BTreeMap::from([
                ("row".to_owned(), absolute.to_string()),
                ("column".to_owned(), name.clone()),
            ]);
            let error = convert::wire_error(
                Code::InvalidArgument,
                INVALID_CELL,
                Some(kind.input_path()),
                metadata,
                message,
            );
            errors.entry(row).or_insert_with(|| pb::Solution {
                id: id_of(row),
                error: Some(Box::new(error)),
                ..Default::default()
            });
        };
        let parsed: ArrayRef = match kind.input_shape() {
            InputShape::Text => continue,
            InputShape::Integer => {
                let mut out = UInt64Builder::with_capacity(cells.len());
                for (row, cell) in cells.iter().enumerate() {
                    match cell.map(parse_count) {
                        None | Some(Some(None)) => out.append_null(),
                        Some(Some(Some(n))) => out.append_value(n),
                        Some(None) => {
                            fail(row, "a uint64");
                            out.append_null();
                        }
                    }
                }
                Arc::new(out.finish())
            }
            InputShape::Integers => {
                let item = Field::new_list_field(DataType::UInt64, false);
                let mut out = ListBuilder::with_capacity(UInt64Builder::new(), cells.len()).with_field(item);
                for (row, cell) in cells.iter().enumerate() {
                    match cell.map(|cell| parse_list(cell, &mut scratch)) {
                        None => out.append_null(),
                        Some(Some(())) => {
                            out.values().append_slice(&scratch);
                            out.append(true);
                        }
                        Some(None) => {
                            fail(row, "a list of uint64 such as [1,2,3]");
                            out.append_null();
                        }
                    }
                }
                Arc::new(out.finish())
            }
        };
        fields[index] = Arc::new(Field::new(name, parsed.data_type().clone(), true));
        arrays[index] = parsed;
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?;
    Ok((batch, errors.into_iter().collect()))
}

/// `batch` with every column CSV cannot hold as it is turned into text: a list of
/// integers as a list cell (`[1,2,3]`), anything else nested as Arrow displays it.
pub fn writable(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    if !batch.columns().iter().any(|column| column.data_type().is_nested()) {
        return Ok(batch.clone());
    }
    let mut fields = Vec::with_capacity(batch.num_columns());
    let mut arrays = Vec::with_capacity(batch.num_columns());
    for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
        if !column.data_type().is_nested() {
            fields.push(Arc::clone(field));
            arrays.push(Arc::clone(column));
            continue;
        }
        fields.push(Arc::new(Field::new(field.name(), DataType::Utf8, true)));
        arrays.push(Arc::new(as_text(column.as_ref())?) as ArrayRef);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
}

/// A nested column as text cells.
fn as_text(column: &dyn Array) -> Result<StringArray, ArrowError> {
    let mut out = StringBuilder::with_capacity(column.len(), column.len() * 8);
    let mut cell = String::new();
    if let Some(lists) = integer_lists(column) {
        for (row, values) in lists.into_iter().enumerate() {
            match values {
                Some(values) if column.is_valid(row) => {
                    cell.clear();
                    write_list(&mut cell, values);
                    out.append_value(&cell);
                }
                _ => out.append_null(),
            }
        }
        return Ok(out.finish());
    }
    let formatter = ArrayFormatter::try_new(column, &FormatOptions::default())?;
    for row in 0..column.len() {
        if column.is_null(row) {
            out.append_null();
            continue;
        }
        cell.clear();
        formatter.value(row).write(&mut cell)?;
        out.append_value(&cell);
    }
    Ok(out.finish())
}

/// The rows of a list of non-negative integers (of any width), when `column` is one.
#[allow(clippy::type_complexity)]
fn integer_lists(column: &dyn Array) -> Option<Vec<Option<Vec<u64>>>> {
    let list = column.as_list_opt::<i32>()?;
    let values = list.values();
    let as_u64: Vec<Option<u64>> = integers_as_u64(values.as_ref())?;
    let offsets = list.value_offsets();
    let rows = (0..list.len())
        .map(|row| {
            let range = offsets[row] as usize..offsets[row + 1] as usize;
            list.is_valid(row).then(|| as_u64[range].iter().copied().collect::<Option<Vec<u64>>>()).flatten()
        })
        .collect();
    Some(rows)
}

/// Every value of an integer column as a `u64`, `None` for nulls and negatives; `None`
/// when the column is not integers.
fn integers_as_u64(values: &dyn Array) -> Option<Vec<Option<u64>>> {
    macro_rules! convert {
        ($($ty:ty),*) => {
            $(if let Some(array) = values.as_primitive_opt::<$ty>() {
                return Some(array.iter().map(|v| v.and_then(|v| u64::try_from(v).ok())).collect());
            })*
        };
    }
    convert!(UInt64Type, UInt32Type, UInt16Type, UInt8Type, Int64Type, Int32Type, Int16Type, Int8Type);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::table::columns::ColumnMap;
    use arrow_array::ListArray;

    #[test]
    fn list_cells_parse_as_pandas_and_json_write_them() {
        let mut values = Vec::new();
        for (cell, expected) in [
            ("[1,2,3]", Some(vec![1, 2, 3])),
            ("[1, 2, 3]", Some(vec![1, 2, 3])),
            (" [ 7 ] ", Some(vec![7])),
            ("[]", Some(vec![])),
            ("[18446744073709551615]", Some(vec![u64::MAX])),
            ("1,2", None),
            ("[1,,2]", None),
            ("[-1]", None),
            ("[+1]", None),
            ("[1.5]", None),
            ("[18446744073709551616]", None),
            // numpy's arrays, as pandas writes them: spaces, padding, lines, floats.
            ("[5211324 4434315 2201843]", Some(vec![5_211_324, 4_434_315, 2_201_843])),
            ("[ 5 10 15]", Some(vec![5, 10, 15])),
            ("[1 2\n 3]", Some(vec![1, 2, 3])),
            ("[1. 2. 3.]", Some(vec![1, 2, 3])),
            ("[1.0, 2.0, 1e3]", Some(vec![1, 2, 1000])),
            ("[ ]", Some(vec![])),
            ("[np.uint64(7), np.int64(8), np.float64(9.0)]", Some(vec![7, 8, 9])),
            ("[1 2, 3]", None),
            ("[1, 2,]", None),
            ("[nan]", None),
            ("[1 ... 3]", None),
            ("[np.uint64(7]", None),
            ("[np.uint64(-7)]", None),
        ] {
            assert_eq!(parse_list(cell, &mut values).map(|()| values.clone()), expected, "{cell}");
        }
        let mut out = String::new();
        write_list(&mut out, [1, 22, 333]);
        assert_eq!(out, "[1,22,333]");
        assert!(parse_list(&out, &mut values).is_some());
    }

    #[test]
    fn bad_cells_are_their_rows_errors_and_the_rest_is_parsed() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Utf8, true),
            Field::new("n", DataType::Utf8, true),
            Field::new("stones", DataType::Utf8, true),
        ]);
        let columns = InputColumns::resolve(&schema, &ColumnMap::default(), "t.csv", true, false).unwrap();
        let text = |cells: [Option<&str>; 4]| Arc::new(StringArray::from(cells.to_vec())) as ArrayRef;
        let batch = RecordBatch::try_new(
            Arc::new(schema),
            vec![
                text([Some("a"), Some("b"), None, Some("d")]),
                text([Some("5.0"), Some("nan"), Some("x5"), Some(" 7 ")]),
                text([None, Some("[1 2]"), Some("[3]"), Some("[x]")]),
            ],
        )
        .unwrap();
        let (parsed, errors) = parse_cells(&columns, &batch, 10).unwrap();
        let n: Vec<_> = parsed.column(1).as_primitive::<UInt64Type>().iter().collect();
        assert_eq!(n, [Some(5), None, None, Some(7)]);
        let stones = parsed.column(2).as_list::<i32>();
        assert_eq!(stones.value(1).as_primitive::<UInt64Type>().values().as_ref(), [1, 2]);
        assert!(stones.is_null(3));
        let rows: Vec<_> = errors.iter().map(|(row, solution)| (*row, solution.id.clone())).collect();
        assert_eq!(rows, [(2, "12".to_owned()), (3, "d".to_owned())]);
        let fractions = RecordBatch::try_new(
            batch.schema(),
            vec![
                text([None, None, None, None]),
                text([Some("7.5"), Some("1e20"), Some("-3"), Some("inf")]),
                text([None; 4]),
            ],
        )
        .unwrap();
        let (_, faults) = parse_cells(&columns, &fractions, 0).unwrap();
        let messages: Vec<_> =
            faults.iter().map(|(_, solution)| solution.error.as_ref().unwrap().message.clone()).collect();
        assert_eq!(
            messages,
            [
                "row 0: column \"n\": \"7.5\" is not a uint64",
                "row 1: column \"n\": \"1e20\" is not a uint64",
                "row 2: column \"n\": \"-3\" is not a uint64",
                "row 3: column \"n\": \"inf\" is not a uint64",
            ]
        );
        let error = errors[0].1.error.as_ref().unwrap();
        assert_eq!(error.reason, INVALID_CELL);
        assert_eq!(error.message, "row 12: column \"n\": \"x5\" is not a uint64");
        assert_eq!(error.field, "problem.stone_game_iv.n");
        assert_eq!(
            errors[1].1.error.as_ref().unwrap().message,
            "row 13: column \"stones\": \"[x]\" is not a list of uint64 such as [1,2,3]"
        );
    }

    #[test]
    fn lists_become_list_cells_for_csv() {
        let lists = ListArray::from_iter_primitive::<Int64Type, _, _>([
            Some(vec![Some(1), Some(2)]),
            None,
            Some(vec![]),
        ]);
        let schema = Schema::new(vec![Field::new("piles", lists.data_type().clone(), true)]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(lists)]).unwrap();
        let text = writable(&batch).unwrap();
        let cells: Vec<_> = text.column(0).as_string::<i32>().iter().collect();
        assert_eq!(cells, [Some("[1,2]"), None, Some("[]")]);
    }
}

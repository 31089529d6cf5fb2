//! Input columns written beside the answers (`--keep`), as a UDF in DuckDB, Polars or
//! Spark adds its result to the row it was given rather than returning the result alone.
//!
//! The kept columns are resolved once, from the table's schema and its Hive partition
//! columns, before anything is read: a column that is not there, or whose name an answer
//! column has, stops the run with its name. Each batch's kept columns are then the read
//! batch's own arrays, handed to the writer beside the request (no row is copied), and a
//! partition column is one array of its value, sliced to each batch's length.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, FieldRef, Schema};

use crate::client::format::Format;

/// Which input columns go beside the answers (`--keep`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// Every column of the table, its Hive partition columns included (the id is written
    /// first already).
    All,
    /// None: the id and the answers only.
    None,
    /// These columns, in this order.
    Columns(Vec<String>),
}

impl FromStr for Keep {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "all" => Ok(Keep::All),
            "none" => Ok(Keep::None),
            list => {
                let names: Vec<String> = list.split(',').map(|name| name.trim().to_owned()).collect();
                if names.iter().any(String::is_empty) {
                    return Err(format!("{list:?}: expected all, none, or column names separated by commas"));
                }
                Ok(Keep::Columns(names))
            }
        }
    }
}

impl fmt::Display for Keep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Keep::All => f.write_str("all"),
            Keep::None => f.write_str("none"),
            Keep::Columns(names) => f.write_str(&names.join(",")),
        }
    }
}

/// Why `--keep` cannot be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeepError {
    /// A named column that the table does not have.
    #[error("--keep {column}: {input} has no column {column:?}; its columns: {have}")]
    Missing {
        /// The column named.
        column: String,
        /// The input.
        input: String,
        /// The table's columns and partition columns, for the message.
        have: String,
    },
    /// A kept column whose name an answer column has.
    #[error(
        "--keep: column {column:?} of {input} has the name of an answer column; rename it in the input, \
         or keep the others with --keep COLUMN,... (or --keep none)"
    )]
    Clash {
        /// The column.
        column: String,
        /// The input.
        input: String,
    },
    /// A column kept where there are no columns to keep or to write.
    #[error("--keep {keep}: {why}")]
    NoColumns {
        /// The flag's value.
        keep: Keep,
        /// Why.
        why: &'static str,
    },
}

/// Where a kept column's values come from.
#[derive(Debug, Clone)]
enum Source {
    /// The table's column at this index of its schema.
    Table(usize),
    /// The table's column at this index, which the writer copies from the input file
    /// itself ([`super::copy`]): read only for the fingerprint, not handed on.
    Copied(usize),
    /// A Hive partition column: one value for every row, as a column of `rows` rows that
    /// each batch takes a slice of.
    Partition(ArrayRef),
}

/// The kept columns of one table, resolved.
#[derive(Debug, Clone, Default)]
pub struct KeptColumns {
    columns: Vec<(Source, FieldRef)>,
}

/// Checks `keep` against formats without columns to keep: a JSON-lines input has none,
/// and a JSON-lines output is one `Solution` a line, with no place for them. `--keep all`
/// (the default) then keeps nothing; naming columns is refused.
pub fn check_formats(keep: &Keep, input: Format, output: Format) -> Result<(), KeepError> {
    let why = match (input, output) {
        _ if !matches!(keep, Keep::Columns(_)) => return Ok(()),
        (Format::Jsonl, _) => "a JSON-lines input has no columns; --keep applies to tables",
        (_, Format::Jsonl) => {
            "a JSON-lines output is one Solution a line, with no columns beside it; write a table \
             (Parquet, Arrow, CSV) to keep columns"
        }
        _ => return Ok(()),
    };
    Err(KeepError::NoColumns { keep: keep.clone(), why })
}

impl KeptColumns {
    /// Resolves `keep` over `schema` (the table `input`'s columns, as its file holds them)
    /// and `partition` (its Hive `key=value` folders, outermost first); `id` is the
    /// table's id column (written first already, so never kept), `answers` the names the
    /// output has besides, which no kept column may take. A partition column that the
    /// file holds too is the file's. `batch_rows` sizes a partition column's array.
    pub fn resolve(
        keep: &Keep,
        schema: &Schema,
        partition: &[(String, Option<String>)],
        id: Option<&str>,
        answers: &[&str],
        input: &str,
        batch_rows: usize,
    ) -> Result<KeptColumns, KeepError> {
        let in_file = |name: &str| schema.fields().iter().position(|field| field.name() == name);
        let partition_value = |name: &str| {
            partition.iter().find(|(key, _)| key == name && in_file(key).is_none()).map(|(_, value)| value)
        };
        let names: Vec<String> = match keep {
            Keep::None => Vec::new(),
            Keep::All => {
                let file = schema.fields().iter().map(|field| field.name().clone());
                let folders =
                    partition.iter().map(|(key, _)| key.clone()).filter(|key| in_file(key).is_none());
                file.chain(folders).filter(|name| Some(name.as_str()) != id).collect()
            }
            Keep::Columns(names) => names.iter().filter(|name| Some(name.as_str()) != id).cloned().collect(),
        };
        let mut columns = Vec::with_capacity(names.len());
        for name in names {
            if answers.contains(&name.as_str()) {
                return Err(KeepError::Clash { column: name, input: input.to_owned() });
            }
            let source = match (in_file(&name), partition_value(&name)) {
                (Some(index), _) => (Source::Table(index), Arc::new(schema.field(index).clone())),
                (None, Some(value)) => {
                    let values = StringArray::from(vec![value.as_deref(); batch_rows]);
                    (Source::Partition(Arc::new(values)), Arc::new(Field::new(&name, DataType::Utf8, true)))
                }
                (None, None) => {
                    let mut have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                    have.extend(partition.iter().map(|(key, _)| key.as_str()));
                    let have = if have.is_empty() { "none".to_owned() } else { have.join(", ") };
                    return Err(KeepError::Missing { column: name, input: input.to_owned(), have });
                }
            };
            columns.push(source);
        }
        Ok(KeptColumns { columns })
    }

    /// Nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The table's columns that must be read for the kept ones.
    pub fn projection(&self) -> impl Iterator<Item = usize> + '_ {
        self.columns.iter().filter_map(|(source, _)| match source {
            Source::Table(index) | Source::Copied(index) => Some(*index),
            Source::Partition(_) => None,
        })
    }

    /// The kept columns that the table holds, as pairs of their place among the kept
    /// ones and their index in the table's schema.
    pub fn in_table(&self) -> Vec<(usize, usize)> {
        let table = |(at, (source, _)): (usize, &(Source, FieldRef))| match source {
            Source::Table(index) => Some((at, *index)),
            Source::Copied(_) | Source::Partition(_) => None,
        };
        self.columns.iter().enumerate().filter_map(table).collect()
    }

    /// From now on the table's kept columns are copied by the writer, not handed to it.
    pub fn mark_copied(&mut self) {
        for (source, _) in &mut self.columns {
            if let Source::Table(index) = source {
                *source = Source::Copied(*index);
            }
        }
    }

    /// The kept columns' fields, in output order.
    pub fn fields(&self) -> impl Iterator<Item = &FieldRef> {
        self.columns.iter().map(|(_, field)| field)
    }

    /// The kept columns of `batch` that the writer is handed, read with `projection` (the
    /// table's columns read, ascending): the batch's own arrays (not the copied ones), and
    /// the partition columns' sliced to its rows.
    pub fn of(&self, batch: &RecordBatch, projection: &[usize]) -> Vec<ArrayRef> {
        let rows = batch.num_rows();
        self.columns
            .iter()
            .filter(|(source, _)| !matches!(source, Source::Copied(_)))
            .map(|(source, _)| match source {
                Source::Table(index) | Source::Copied(index) => {
                    let at = projection.binary_search(index).expect("a kept column is read");
                    Arc::clone(batch.column(at))
                }
                Source::Partition(values) if rows <= values.len() => values.slice(0, rows),
                // A batch longer than the batches asked for (an IPC file's own batch is cut
                // to them before it gets here): the value repeated anew.
                Source::Partition(values) => {
                    let value =
                        values.as_any().downcast_ref::<StringArray>().and_then(|v| v.iter().next()).flatten();
                    Arc::new(StringArray::from(vec![value; rows]))
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::UInt64Array;

    fn schema(names: &[&str]) -> Schema {
        Schema::new(names.iter().map(|name| Field::new(*name, DataType::UInt64, true)).collect::<Vec<_>>())
    }

    const ANSWERS: &[&str] = &["game", "alice_wins", "error_reason", "row"];

    #[test]
    fn the_flag_reads_all_none_or_a_list() {
        assert_eq!("all".parse(), Ok(Keep::All));
        assert_eq!("none".parse(), Ok(Keep::None));
        assert_eq!("a, b".parse(), Ok(Keep::Columns(vec!["a".into(), "b".into()])));
        assert_eq!(
            "a,,b".parse::<Keep>().unwrap_err(),
            "\"a,,b\": expected all, none, or column names separated by commas"
        );
        assert_eq!(Keep::Columns(vec!["a".into(), "b".into()]).to_string(), "a,b");
    }

    #[test]
    fn all_keeps_every_column_but_the_id_then_the_partition_columns() {
        let table = schema(&["id", "label", "n", "year"]);
        let partition = [("year".to_owned(), Some("1999".to_owned())), ("month".to_owned(), None)];
        let kept = KeptColumns::resolve(&Keep::All, &table, &partition, Some("id"), ANSWERS, "t", 4).unwrap();
        let names: Vec<_> = kept.fields().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["label", "n", "year", "month"], "the file's year, not the folder's");
        assert_eq!(kept.projection().collect::<Vec<_>>(), [1, 2, 3]);
        let columns: Vec<ArrayRef> =
            (0..4).map(|i| Arc::new(UInt64Array::from(vec![i; 3])) as ArrayRef).collect();
        let batch = RecordBatch::try_new(Arc::new(table.clone()), columns).unwrap();
        let arrays = kept.of(&batch, &[0, 1, 2, 3]);
        assert_eq!(arrays.len(), 4);
        assert!(Arc::ptr_eq(&arrays[0], batch.column(1)), "the batch's own array");
        assert_eq!(arrays[3].as_string::<i32>().iter().collect::<Vec<_>>(), [None; 3], "Hive's null");
        let none =
            KeptColumns::resolve(&Keep::None, &table, &partition, Some("id"), ANSWERS, "t", 4).unwrap();
        assert!(none.is_empty());
    }

    #[test]
    fn a_missing_column_or_a_name_an_answer_has_is_refused_by_name() {
        let keep = |names: &[&str], table: &[&str]| {
            let keep = Keep::Columns(names.iter().map(|n| n.to_string()).collect());
            let partition = [("year".to_owned(), Some("1999".to_owned()))];
            KeptColumns::resolve(&keep, &schema(table), &partition, None, ANSWERS, "in.parquet", 4)
                .map(|kept| kept.fields().count())
                .map_err(|err| err.to_string())
        };
        assert_eq!(keep(&["label", "year"], &["label", "n"]), Ok(2));
        assert_eq!(
            keep(&["lable"], &["label", "n"]),
            Err("--keep lable: in.parquet has no column \"lable\"; its columns: label, n, year".into())
        );
        let clash = "--keep: column \"game\" of in.parquet has the name of an answer column; rename it in \
                     the input, or keep the others with --keep COLUMN,... (or --keep none)";
        assert_eq!(keep(&["game"], &["game", "n"]), Err(clash.into()));
        let all = KeptColumns::resolve(&Keep::All, &schema(&["row", "n"]), &[], None, ANSWERS, "t", 4);
        assert_eq!(all.unwrap_err(), KeepError::Clash { column: "row".into(), input: "t".into() });
    }

    #[test]
    fn json_lines_have_no_columns_to_keep() {
        let named = Keep::Columns(vec!["label".into()]);
        assert_eq!(check_formats(&Keep::All, Format::Jsonl, Format::Parquet), Ok(()));
        assert_eq!(check_formats(&Keep::All, Format::Parquet, Format::Jsonl), Ok(()));
        assert_eq!(check_formats(&named, Format::Csv, Format::Parquet), Ok(()));
        assert_eq!(
            check_formats(&named, Format::Parquet, Format::Jsonl).unwrap_err().to_string(),
            "--keep label: a JSON-lines output is one Solution a line, with no columns beside it; write a \
             table (Parquet, Arrow, CSV) to keep columns"
        );
        assert_eq!(
            check_formats(&named, Format::Jsonl, Format::Csv).unwrap_err().to_string(),
            "--keep label: a JSON-lines input has no columns; --keep applies to tables"
        );
    }
}

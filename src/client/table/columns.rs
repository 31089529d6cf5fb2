//! Which columns of a table hold what: the contract's names (`id`, `num`, `stones`, `n`,
//! `piles`), each renamable with `--column CONTRACT=COLUMN`.
//!
//! A table's columns are resolved once, from its schema, before anything is sent: a
//! renamed column that is missing, a table without any game column, or a game column of
//! a type no server reads are errors of the run, not of each row. What a row holds is the
//! server's to judge (a null game, two games, a negative pile: that row's error).

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Schema, SchemaRef};
use serde::{Deserialize, Serialize};

use crate::columnar::{self, Descriptor, Games};
use crate::games::GameKind;

/// The output's column of row numbers, for a table without an `id` column.
pub const ROW: &str = "row";

/// Why a table's columns cannot be read as problems.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnsError {
    /// A `--column` flag that is not `CONTRACT=COLUMN`.
    #[error("--column {0:?}: expected CONTRACT=COLUMN, such as n=pile_size")]
    Syntax(String),
    /// A `--column` flag that names no column of the contract.
    #[error("--column {name}=...: {name:?} is not a column of the contract; expected one of {}", contract_names().join(", "))]
    NotInContract {
        /// The name given.
        name: String,
    },
    /// A contract column renamed twice, or two renamed to the same column.
    #[error("--column {0}: each column is named once")]
    Repeated(String),
    /// `--column` given for JSON lines, which has no columns.
    #[error("--column applies to Parquet, Arrow and CSV inputs; this input is JSON lines")]
    NotATable,
    /// A renamed column that the table does not have.
    #[error("{input} has no column {column:?} (--column {contract}={column}); its columns: {have}")]
    Missing {
        /// The input.
        input: String,
        /// The contract's name.
        contract: String,
        /// The column named.
        column: String,
        /// The table's columns, for the message.
        have: String,
    },
    /// A table without any game column.
    #[error(
        "{input} has none of the game columns num, stones, n, piles (rename yours with --column n=COLUMN); \
         its columns: {have}"
    )]
    NoGame {
        /// The input.
        input: String,
        /// The table's columns.
        have: String,
    },
    /// A column name the table holds twice.
    #[error("{input} has two columns named {column:?}")]
    Ambiguous {
        /// The input.
        input: String,
        /// The name.
        column: String,
    },
    /// A game column of a type no server reads.
    #[error("column {column:?} ({contract}) is {found}; expected {expected}; {fix}")]
    WrongType {
        /// The table's name for it.
        column: String,
        /// The contract's name.
        contract: &'static str,
        /// Its type.
        found: DataType,
        /// What is accepted.
        expected: &'static str,
        /// The cast that makes it readable, in pandas, Polars and Spark terms.
        fix: String,
    },
    /// An id column whose type holds a dictionary below its top level.
    #[error("column {column:?} (id) is {found}: a dictionary inside an id is not supported")]
    NestedDictionary {
        /// The table's name for it.
        column: String,
        /// Its type.
        found: DataType,
    },
}

/// The contract's input column names: `id`, then each game's.
fn contract_names() -> Vec<&'static str> {
    std::iter::once(columnar::ID).chain(GameKind::ALL.map(GameKind::input)).collect()
}

/// One `--column CONTRACT=COLUMN` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rename {
    /// The contract's name: `id`, `num`, `stones`, `n` or `piles`.
    pub contract: String,
    /// The table's name for it.
    pub column: String,
}

impl FromStr for Rename {
    type Err = ColumnsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (contract, column) = s.split_once('=').ok_or_else(|| ColumnsError::Syntax(s.to_owned()))?;
        if column.is_empty() {
            return Err(ColumnsError::Syntax(s.to_owned()));
        }
        if !contract_names().contains(&contract) {
            return Err(ColumnsError::NotInContract { name: contract.to_owned() });
        }
        Ok(Rename { contract: contract.to_owned(), column: column.to_owned() })
    }
}

/// The table's name for each contract column that `--column` renames.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnMap(BTreeMap<String, String>);

impl ColumnMap {
    /// The renames of `flags`; each contract column and each table column is named once.
    pub fn new(flags: impl IntoIterator<Item = Rename>) -> Result<Self, ColumnsError> {
        let mut map = BTreeMap::new();
        for Rename { contract, column } in flags {
            if map.values().any(|taken| *taken == column) {
                return Err(ColumnsError::Repeated(format!("{contract}={column}")));
            }
            if map.insert(contract.clone(), column.clone()).is_some() {
                return Err(ColumnsError::Repeated(format!("{contract}={column}")));
            }
        }
        Ok(ColumnMap(map))
    }

    /// True when nothing is renamed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The renames as flags: `--column n=size --column id=key`.
    pub fn flags(&self) -> String {
        self.0
            .iter()
            .map(|(contract, column)| format!("--column {contract}={column}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The table's name for the contract column `contract`.
    pub fn column<'a>(&'a self, contract: &'a str) -> &'a str {
        self.0.get(contract).map_or(contract, String::as_str)
    }
}

/// A table's columns, resolved: where each contract column is, what is sent, what is written.
#[derive(Debug, Clone)]
pub struct InputColumns {
    /// The table's id column, if it has one.
    id: Option<String>,
    /// The games with a column, in [`GameKind::ALL`]'s order, with the table's name for it.
    games: Vec<(GameKind, String)>,
    /// The table's columns to read, ascending.
    projection: Vec<usize>,
    /// What each request batch holds: `id`, then the game columns under the contract's names.
    request: SchemaRef,
    /// What the output holds: the id (the table's name, or `row`), then the answers.
    output: SchemaRef,
    descriptor: Descriptor,
}

/// True when a column of `ty` can hold `kind`'s problems, as the server reads them
/// ([`columnar::accepts`]); an all-null column always can.
fn accepts(kind: GameKind, ty: &DataType) -> bool {
    matches!(ty, DataType::Null) || columnar::accepts(kind, ty)
}

/// True when `ty` holds a dictionary anywhere.
fn has_dictionary(ty: &DataType) -> bool {
    match ty {
        DataType::Dictionary(..) => true,
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => has_dictionary(f.data_type()),
        DataType::Struct(fields) => fields.iter().any(|f| has_dictionary(f.data_type())),
        DataType::Union(fields, _) => fields.iter().any(|(_, f)| has_dictionary(f.data_type())),
        DataType::RunEndEncoded(_, values) => has_dictionary(values.data_type()),
        _ => false,
    }
}

/// The type a column is sent as: a dictionary as its values (Flight sends it so, and the
/// echo is checked against what was sent), an all-null game column as the game's type.
fn sent_type(ty: &DataType, kind: Option<GameKind>) -> DataType {
    match (ty, kind) {
        (DataType::Dictionary(_, values), _) => values.as_ref().clone(),
        (DataType::Null, Some(kind)) => columnar::input_type(kind),
        (ty, _) => ty.clone(),
    }
}

impl InputColumns {
    /// Resolves `schema`'s columns (of the table `input`) through `renames`. A CSV table
    /// (`csv`) holds only strings, which [`super::csv`] parses into the canonical types.
    pub fn resolve(
        schema: &Schema,
        renames: &ColumnMap,
        input: &str,
        csv: bool,
        winner_only: bool,
    ) -> Result<InputColumns, ColumnsError> {
        let have = || match schema.fields().is_empty() {
            true => "none".to_owned(),
            false => schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>().join(", "),
        };
        let find = |contract: &str| -> Result<Option<usize>, ColumnsError> {
            let column = renames.column(contract);
            let mut found = schema.fields().iter().enumerate().filter(|(_, f)| f.name() == column);
            let first = found.next().map(|(index, _)| index);
            if found.next().is_some() {
                return Err(ColumnsError::Ambiguous { input: input.to_owned(), column: column.to_owned() });
            }
            if first.is_none() && column != contract {
                return Err(ColumnsError::Missing {
                    input: input.to_owned(),
                    contract: contract.to_owned(),
                    column: column.to_owned(),
                    have: have(),
                });
            }
            Ok(first)
        };

        let id = find(columnar::ID)?;
        let mut games = Vec::new();
        let mut projection: Vec<usize> = id.into_iter().collect();
        let mut request = vec![];
        for kind in GameKind::ALL {
            let Some(index) = find(kind.input())? else { continue };
            let field = schema.field(index);
            let ty = match csv {
                true => columnar::input_type(kind),
                false if accepts(kind, field.data_type()) => sent_type(field.data_type(), Some(kind)),
                false => {
                    return Err(ColumnsError::WrongType {
                        column: field.name().clone(),
                        contract: kind.input(),
                        found: field.data_type().clone(),
                        expected: columnar::accepted_types(kind),
                        fix: columnar::cast_fix(kind, field.name()),
                    });
                }
            };
            request.push(Field::new(kind.input(), ty, true));
            games.push((kind, field.name().clone()));
            projection.push(index);
        }
        if games.is_empty() {
            return Err(ColumnsError::NoGame { input: input.to_owned(), have: have() });
        }
        projection.sort_unstable();

        let id_field = match id {
            Some(index) => {
                let field = schema.field(index);
                if has_dictionary(field.data_type()) && !matches!(field.data_type(), DataType::Dictionary(..))
                {
                    return Err(ColumnsError::NestedDictionary {
                        column: field.name().clone(),
                        found: field.data_type().clone(),
                    });
                }
                Field::new(field.name(), sent_type(field.data_type(), None), true)
            }
            None => Field::new(ROW, DataType::UInt64, false),
        };
        request.insert(0, Field::new(columnar::ID, id_field.data_type().clone(), id_field.is_nullable()));
        let kinds: Vec<GameKind> = games.iter().map(|(kind, _)| *kind).collect();
        let games_solved = match kinds.as_slice() {
            [one] => Games::One(*one),
            _ => Games::Mixed,
        };
        let output = output_schema(games_solved, id_field);
        Ok(InputColumns {
            id: id.map(|index| schema.field(index).name().clone()),
            games,
            projection,
            request: Arc::new(Schema::new(request)),
            output,
            descriptor: Descriptor { games: games_solved, winner_only },
        })
    }

    /// The table's columns to read, ascending.
    pub fn projection(&self) -> &[usize] {
        &self.projection
    }

    /// The games with a column, with the table's name for each.
    pub fn games(&self) -> &[(GameKind, String)] {
        &self.games
    }

    /// The table's name for its id column, if it has one.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The schema of every request batch.
    pub fn request_schema(&self) -> &SchemaRef {
        &self.request
    }

    /// The schema of the output table.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.output
    }

    /// What each exchange solves.
    pub fn descriptor(&self) -> Descriptor {
        self.descriptor
    }

    /// The request for `batch` (the table's columns, projected, with the CSV cells already
    /// parsed), whose first row is row `first_row` of the table (from 0): the id column,
    /// or the row numbers when the table has none, then the game columns.
    pub fn request(&self, batch: &RecordBatch, first_row: u64) -> Result<RecordBatch, ArrowError> {
        let schema = batch.schema_ref();
        let column =
            |name: &str| -> Result<&ArrayRef, ArrowError> { Ok(batch.column(schema.index_of(name)?)) };
        let mut columns = Vec::with_capacity(self.request.fields().len());
        columns.push(match &self.id {
            Some(id) => cast_to(column(id)?, self.request.field(0).data_type())?,
            None => {
                let rows = first_row..first_row + batch.num_rows() as u64;
                Arc::new(UInt64Array::from_iter_values(rows)) as ArrayRef
            }
        });
        for ((_, name), field) in self.games.iter().zip(&self.request.fields()[1..]) {
            columns.push(cast_to(column(name)?, field.data_type())?);
        }
        RecordBatch::try_new(Arc::clone(&self.request), columns)
    }
}

/// `array` as `ty`: itself when it already is, else cast (a dictionary to its values, an
/// all-null column to its game's type).
fn cast_to(array: &ArrayRef, ty: &DataType) -> Result<ArrayRef, ArrowError> {
    match array.data_type() == ty {
        true => Ok(Arc::clone(array)),
        false => arrow_cast::cast(array, ty),
    }
}

/// The output table's schema: `id` (the column written first) then the answers of `games`.
pub fn output_schema(games: Games, id: Field) -> SchemaRef {
    let answers = columnar::output_schema(games, None);
    let fields: Vec<FieldRef> =
        std::iter::once(Arc::new(id)).chain(answers.fields().iter().cloned()).collect();
    Arc::new(Schema::new(fields))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int64Type;
    use arrow_array::{Int32Array, ListArray, StringArray};

    fn renames(flags: &[&str]) -> ColumnMap {
        ColumnMap::new(flags.iter().map(|flag| flag.parse::<Rename>().unwrap())).unwrap()
    }

    fn schema(fields: &[(&str, DataType)]) -> Schema {
        Schema::new(fields.iter().map(|(name, ty)| Field::new(*name, ty.clone(), true)).collect::<Vec<_>>())
    }

    #[test]
    fn renames_parse_and_are_checked() {
        assert_eq!("n=pile_size".parse::<Rename>().unwrap().column, "pile_size");
        assert_eq!(
            "size=n".parse::<Rename>().unwrap_err().to_string(),
            "--column size=...: \"size\" is not a column of the contract; expected one of id, num, stones, n, piles"
        );
        assert!(matches!("n".parse::<Rename>(), Err(ColumnsError::Syntax(_))));
        assert!(matches!("n=".parse::<Rename>(), Err(ColumnsError::Syntax(_))));
        let twice = ["n=a", "n=b"].map(|f| f.parse::<Rename>().unwrap());
        assert!(matches!(ColumnMap::new(twice), Err(ColumnsError::Repeated(_))));
        let same = ["n=a", "num=a"].map(|f| f.parse::<Rename>().unwrap());
        assert!(matches!(ColumnMap::new(same), Err(ColumnsError::Repeated(_))));
    }

    #[test]
    fn a_table_of_one_game_asks_for_that_game_and_keeps_its_id_name() {
        let table =
            schema(&[("key", DataType::Int32), ("extra", DataType::Utf8), ("pile_size", DataType::Int64)]);
        let columns =
            InputColumns::resolve(&table, &renames(&["n=pile_size", "id=key"]), "t", false, true).unwrap();
        assert_eq!(columns.projection(), [0, 2]);
        assert_eq!(
            columns.descriptor(),
            Descriptor { games: Games::One(GameKind::StoneGameIv), winner_only: true }
        );
        let names = |schema: &SchemaRef| schema.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>();
        assert_eq!(names(columns.request_schema()), ["id", "n"]);
        assert_eq!(
            names(columns.output_schema()),
            ["key", "game", "alice_wins", "move_take", "error_reason", "error_message"]
        );
        assert_eq!(columns.output_schema().field(0).data_type(), &DataType::Int32);
        assert_eq!(columns.request_schema().field(1).data_type(), &DataType::Int64);
    }

    #[test]
    fn without_an_id_the_row_numbers_are_sent_and_written() {
        let table = schema(&[("num", DataType::Utf8), ("stones", DataType::new_list(DataType::Int64, true))]);
        let columns = InputColumns::resolve(&table, &ColumnMap::default(), "t", false, false).unwrap();
        assert_eq!(columns.descriptor().games, Games::Mixed);
        assert_eq!(columns.output_schema().field(0).name(), ROW);
        let stones = ListArray::from_iter_primitive::<Int64Type, _, _>([Some(vec![Some(1)]), None]);
        let batch = RecordBatch::try_new(
            Arc::new(table),
            vec![Arc::new(StringArray::from(vec![None, Some("12")])), Arc::new(stones)],
        )
        .unwrap();
        let request = columns.request(&batch, 40).unwrap();
        let ids = request.column(0).as_any().downcast_ref::<UInt64Array>().unwrap();
        assert_eq!(ids.values().as_ref(), [40, 41]);
        assert_eq!(request.schema().field(2).name(), "stones");
    }

    #[test]
    fn a_dictionary_id_is_sent_as_its_values() {
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let table = schema(&[("id", dict.clone()), ("n", DataType::UInt64)]);
        let columns = InputColumns::resolve(&table, &ColumnMap::default(), "t", false, false).unwrap();
        assert_eq!(columns.request_schema().field(0).data_type(), &DataType::Utf8);
        let keys = Int32Array::from(vec![0, 0]);
        let values = Arc::new(StringArray::from(vec!["a"]));
        let ids = arrow_array::DictionaryArray::try_new(keys, values).unwrap();
        let batch = RecordBatch::try_new(
            Arc::new(table),
            vec![Arc::new(ids), Arc::new(UInt64Array::from(vec![1, 2]))],
        )
        .unwrap();
        let request = columns.request(&batch, 0).unwrap();
        assert_eq!(request.column(0).as_ref(), &StringArray::from(vec!["a", "a"]) as &dyn arrow_array::Array);
    }

    #[test]
    fn what_cannot_be_read_is_refused_before_anything_is_sent() {
        let resolve = |table: &Schema, flags: &[&str]| {
            InputColumns::resolve(table, &renames(flags), "in.parquet", false, false).unwrap_err().to_string()
        };
        let table = schema(&[("a", DataType::Utf8), ("size", DataType::Date32)]);
        assert_eq!(
            resolve(&table, &["n=size"]),
            "column \"size\" (n) is Date32; expected whole numbers: an integer type (uint64), or a float, \
             decimal or string type holding them; cast it first: in pandas df[\"size\"] = \
             df[\"size\"].astype(\"UInt64\"); in Polars df = df.with_columns(pl.col(\"size\").cast(pl.UInt64)); \
             in Spark df = df.withColumn(\"size\", F.col(\"size\").cast(\"decimal(20,0)\"))"
        );
        let table = schema(&[("a", DataType::Utf8), ("n", DataType::Float64)]);
        assert_eq!(
            resolve(&table, &["n=size"]),
            "in.parquet has no column \"size\" (--column n=size); its columns: a, n"
        );
        let table = schema(&[("a", DataType::Utf8)]);
        assert_eq!(
            resolve(&table, &[]),
            "in.parquet has none of the game columns num, stones, n, piles (rename yours with --column n=COLUMN); its columns: a"
        );
        let table = schema(&[("n", DataType::UInt64), ("n", DataType::UInt64)]);
        assert_eq!(resolve(&table, &[]), "in.parquet has two columns named \"n\"");
        let table = schema(&[("stones", DataType::new_list(DataType::Boolean, true))]);
        assert!(resolve(&table, &[]).starts_with("column \"stones\" (stones) is List("));
    }

    #[test]
    fn numbers_as_writers_keep_them_are_sent_as_they_are() {
        let decimal = DataType::Decimal128(20, 0);
        let table = schema(&[
            ("n", DataType::Float64),
            ("stones", DataType::new_list(decimal.clone(), true)),
            ("piles", DataType::new_list(DataType::Float32, true)),
        ]);
        let columns = InputColumns::resolve(&table, &ColumnMap::default(), "t", false, false).unwrap();
        let types: Vec<_> = columns.request_schema().fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(
            types[1..],
            [table.field(1).data_type().clone(), DataType::Float64, table.field(2).data_type().clone()]
        );
    }

    #[test]
    fn csv_columns_are_parsed_into_the_canonical_types() {
        let table = schema(&[("id", DataType::Utf8), ("n", DataType::Utf8), ("piles", DataType::Utf8)]);
        let columns = InputColumns::resolve(&table, &ColumnMap::default(), "t.csv", true, false).unwrap();
        let types: Vec<_> = columns.request_schema().fields().iter().map(|f| f.data_type().clone()).collect();
        assert_eq!(types, [DataType::Utf8, DataType::UInt64, columnar::input_type(GameKind::NimSquare)]);
    }
}

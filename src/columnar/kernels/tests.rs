//! The kernels held to the row path: random batches of every accepted input type, with
//! nulls, gaps, slices and piles beyond the tables, answered byte for byte alike.

use std::sync::{Arc, OnceLock};

use arrow_array::types::{Float64Type, Int32Type, Int64Type, UInt64Type};
use arrow_array::{
    ArrayRef, Decimal128Array, FixedSizeListArray, Float64Array, Int32Array, Int64Array, Int8Array,
    LargeListArray, LargeStringArray, ListArray, RecordBatch, StringArray, StringViewArray, UInt32Array,
    UInt64Array,
};
use proptest::prelude::*;

use super::super::input::tests::every_string_type;
use super::*;

/// Tables shared by every case, so that some batches find them cold and some warm: small
/// limits, so that piles beyond them are errors.
fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables::new(3_000_000, 50_000))
}

/// The batch's answers as an Arrow IPC stream: equal bytes are equal answers, the values
/// under nulls included.
fn ipc(batch: &RecordBatch) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut writer = arrow_ipc::writer::StreamWriter::try_new(&mut bytes, batch.schema_ref()).unwrap();
    writer.write(batch).unwrap();
    writer.finish().unwrap();
    drop(writer);
    bytes
}

/// The kernels answer `columns` as the row path does, for `games` with and without moves:
/// the kernel each game declares, and the rows kernel every game has.
fn check(columns: Vec<(&str, ArrayRef)>, games: Games) -> Result<(), TestCaseError> {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    for winner_only in [false, true] {
        let descriptor = Descriptor { games, winner_only };
        let rows = solve_rows(&batch, descriptor, tables());
        let declared = solve_columns(&batch, descriptor, tables());
        let generic = solve_columns_with(&batch, descriptor, tables(), |_| ColumnKernel::Rows);
        for kernels in [declared, generic] {
            match (&rows, kernels) {
                (Ok(rows), Ok(kernels)) => {
                    prop_assert_eq!(&kernels, rows);
                    prop_assert!(ipc(&kernels) == ipc(rows), "the same bytes, winner_only {}", winner_only);
                }
                (rows, kernels) => {
                    let kernels = kernels.err();
                    prop_assert_eq!(rows.as_ref().err(), kernels.as_ref())
                }
            }
        }
    }
    Ok(())
}

/// A count as writers hold them: small, across the tables' reach, beyond their limits,
/// negative, or null.
fn count() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![
        6 => (0i64..3_000).prop_map(Some),
        3 => (0i64..1 << 21).prop_map(Some),
        1 => (0i64..3_500_000).prop_map(Some),
        1 => (-3i64..0).prop_map(Some),
        1 => Just(None),
    ]
}

/// `values` as a column of the type `ty` picks: every integer width, floats (a half
/// where `odd`), decimals and strings.
fn number_column(values: &[Option<i64>], ty: u8, odd: bool) -> ArrayRef {
    let unsigned = |v: i64| u64::try_from(v).unwrap_or(u64::MAX - 1);
    match ty % 8 {
        0 => Arc::new(UInt64Array::from_iter(values.iter().map(|v| v.map(unsigned)))),
        1 => Arc::new(Int64Array::from(values.to_vec())),
        2 => Arc::new(Int32Array::from_iter(values.iter().map(|v| v.map(|v| v as i32)))),
        3 => Arc::new(UInt32Array::from_iter(values.iter().map(|v| v.map(|v| unsigned(v) as u32)))),
        4 => Arc::new(Int8Array::from_iter(values.iter().map(|v| v.map(|v| v as i8)))),
        5 => Arc::new(Float64Array::from_iter(
            values.iter().map(|v| v.map(|v| v as f64 + if odd && v % 5 == 1 { 0.5 } else { 0.0 })),
        )),
        6 => Arc::new(
            Decimal128Array::from_iter(values.iter().map(|v| v.map(i128::from)))
                .with_precision_and_scale(20, 0)
                .unwrap(),
        ),
        _ => Arc::new(StringArray::from_iter(values.iter().map(|v| v.map(|v| v.to_string())))),
    }
}

/// `lists` as a list column of the kind and item type `ty` picks.
fn list_column(lists: &[Option<Vec<Option<i64>>>], ty: u8) -> ArrayRef {
    let unsigned = |v: i64| u64::try_from(v).unwrap_or(u64::MAX - 1);
    match ty % 5 {
        0 => Arc::new(ListArray::from_iter_primitive::<UInt64Type, _, _>(
            lists.iter().map(|l| l.as_ref().map(|l| l.iter().map(|v| v.map(unsigned)).collect::<Vec<_>>())),
        )),
        1 => Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(
            lists
                .iter()
                .map(|l| l.as_ref().map(|l| l.iter().map(|v| v.map(|v| v as i32)).collect::<Vec<_>>())),
        )),
        2 => Arc::new(LargeListArray::from_iter_primitive::<Int64Type, _, _>(lists.to_vec())),
        3 => Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(
            lists
                .iter()
                .map(|l| l.as_ref().map(|l| l.iter().map(|v| v.map(|v| v as f64)).collect::<Vec<_>>())),
        )),
        _ => {
            // Every list of one length: the first's (missing items null).
            let size = lists.iter().flatten().next().map_or(2, Vec::len);
            let fixed = lists.iter().map(|l| {
                l.as_ref().map(|l| (0..size).map(|i| l.get(i).copied().flatten()).collect::<Vec<_>>())
            });
            Arc::new(FixedSizeListArray::from_iter_primitive::<Int64Type, _, _>(fixed, size as i32))
        }
    }
}

/// A cut of `column`: rows `start..` as far as `len` goes.
fn cut(column: &ArrayRef, start: usize, len: usize) -> ArrayRef {
    let start = start.min(column.len());
    column.slice(start, len.min(column.len() - start))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn stone_game_iv_columns_answer_as_the_rows_do(
        values in proptest::collection::vec(count(), 0..300),
        ty in 0u8..8,
        odd: bool,
        (start, len) in (0usize..40, 0usize..400),
        with_id: bool,
    ) {
        let n = cut(&number_column(&values, ty, odd), start, len);
        let mut columns = vec![("n", n.clone())];
        if with_id {
            columns.insert(0, ("id", Arc::new(Int64Array::from_iter_values(0..n.len() as i64)) as ArrayRef));
        }
        check(columns, Games::One(GameKind::StoneGameIv))?;
    }

    #[test]
    fn nim_square_columns_answer_as_the_rows_do(
        lists in proptest::collection::vec(
            proptest::option::weighted(0.9, proptest::collection::vec(
                prop_oneof![8 => (0i64..60_000).prop_map(Some), 1 => (0i64..100).prop_map(Some), 1 => count()], 0..6)),
            0..120),
        ty in 0u8..5,
        (start, len) in (0usize..20, 0usize..200),
    ) {
        let piles = cut(&list_column(&lists, ty), start, len);
        check(vec![("piles", piles)], Games::One(GameKind::NimSquare))?;
    }
}

/// A Sum Game string: digits and `?`, now and then odd, or with a character that is
/// neither.
fn sum_game() -> impl Strategy<Value = Option<String>> {
    proptest::option::weighted(0.9, "[0-9?]{0,12}|[0-9?]{0,4}[a ]?[0-9?]{0,4}")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn stone_game_ix_and_sum_game_columns_answer_as_the_rows_do(
        lists in proptest::collection::vec(
            proptest::option::weighted(0.9, proptest::collection::vec(
                prop_oneof![8 => any::<u32>().prop_map(|v| Some(i64::from(v))), 1 => count()], 0..6)),
            0..120),
        strings in proptest::collection::vec(sum_game(), 0..120),
        ty in 0u8..5,
        (start, len) in (0usize..20, 0usize..200),
    ) {
        let stones = cut(&list_column(&lists, ty), start, len);
        check(vec![("stones", stones)], Games::One(GameKind::StoneGameIx))?;
        let num: ArrayRef = match ty % 3 {
            0 => Arc::new(StringArray::from(strings.clone())),
            1 => Arc::new(LargeStringArray::from(strings.clone())),
            _ => Arc::new(StringViewArray::from(strings.clone())),
        };
        check(vec![("num", cut(&num, start, len))], Games::One(GameKind::SumGame))?;
    }

    /// Mixed batches: each row's game the one input that is not null (none or several
    /// is that row's error), answered in runs a game and put back in order.
    #[test]
    fn mixed_columns_answer_as_the_rows_do(
        rows in proptest::collection::vec((0u8..6, count(), sum_game(),
            proptest::collection::vec(prop_oneof![(0i64..60_000).prop_map(Some), count()], 0..4)), 0..200),
        ty in 0u8..8,
        (start, len) in (0usize..20, 0usize..250),
        present in 1u8..16,
    ) {
        // Row i's game: `rows[i].0` (4: none, 5: two of them).
        let has = |row: &(u8, _, _, _), game: u8| row.0 == game || (row.0 == 5 && game < 2);
        let n: Vec<Option<i64>> = rows.iter().map(|r| if has(r, 2) { r.1.or(Some(1)) } else { None }).collect();
        let num: Vec<Option<String>> =
            rows.iter().map(|r| if has(r, 0) { r.2.clone().or(Some("1?".into())) } else { None }).collect();
        let lists = |game| -> Vec<Option<Vec<Option<i64>>>> {
            rows.iter().map(|r| has(r, game).then(|| r.3.clone())).collect()
        };
        let mut columns = vec![("id", Arc::new(Int64Array::from_iter_values(0..rows.len() as i64)) as ArrayRef)];
        let all: [(&str, ArrayRef); 4] = [
            ("num", Arc::new(StringArray::from(num))),
            ("stones", list_column(&lists(1), ty)),
            ("n", number_column(&n, ty, false)),
            ("piles", list_column(&lists(3), ty)),
        ];
        // Some of the four columns, each cut the same.
        for (at, (name, column)) in all.into_iter().enumerate() {
            if present >> at & 1 == 1 {
                columns.push((name, column));
            }
        }
        let columns = columns.into_iter().map(|(name, column)| (name, cut(&column, start, len))).collect();
        check(columns, Games::Mixed)?;
    }
}

#[test]
fn a_dictionary_and_every_string_type_answer_sum_games_as_the_rows_do() {
    let values = [Some("25??"), None, Some("?"), Some("12a4"), Some(""), Some("9?"), Some("5023")];
    for column in every_string_type(&values) {
        for (start, len) in [(0, 7), (1, 5), (3, 0)] {
            check(vec![("num", column.slice(start, len))], Games::One(GameKind::SumGame)).unwrap();
        }
    }
}

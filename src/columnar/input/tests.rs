//! The reading of every accepted column type, held to the rows it should make.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringDictionaryBuilder, UInt64Builder};
use arrow_array::types::{Float32Type, Float64Type, Int16Type};
use arrow_array::{
    Decimal128Array, FixedSizeListArray, Float64Array, Int32Array, Int64Array, Int8Array, LargeListArray,
    ListArray, UInt32Array, UInt64Array,
};
use arrow_schema::Field;

use super::*;
use crate::games::Game;

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).unwrap()
}

fn read(columns: Vec<(&str, ArrayRef)>, games: Games) -> Result<Vec<Problem>, ColumnError> {
    problems(&batch(columns), games)
}

const IV: Games = Games::One(GameKind::StoneGameIv);
const IX: Games = Games::One(GameKind::StoneGameIx);

/// `values` as a column of each string type a `num` column may be: utf8, large_utf8,
/// utf8_view and a dictionary.
pub(in crate::columnar) fn every_string_type(values: &[Option<&str>]) -> [ArrayRef; 4] {
    let mut dictionary = StringDictionaryBuilder::<Int16Type>::new();
    dictionary.extend(values.iter().copied());
    [
        Arc::new(StringArray::from(values.to_vec())),
        Arc::new(LargeStringArray::from(values.to_vec())),
        Arc::new(StringViewArray::from(values.to_vec())),
        Arc::new(dictionary.finish()),
    ]
}

#[test]
fn every_string_type_reads_the_same_sum_games() {
    let values = [Some("25??"), None, Some("?")];
    let expected = vec![
        Ok(Game::SumGame("25??".into())),
        Err(ProblemError::NullInput { game: GameKind::SumGame, index: None }),
        Ok(Game::SumGame("?".into())),
    ];
    let columns = every_string_type(&values);
    let mut nulls = StringDictionaryBuilder::<Int16Type>::new();
    nulls.append_nulls(2);
    let null = Err(ProblemError::NullInput { game: GameKind::SumGame, index: None });
    assert_eq!(
        read(vec![("num", Arc::new(nulls.finish()))], Games::One(GameKind::SumGame)).unwrap(),
        [null.clone(), null]
    );
    for column in columns {
        let games = Games::One(GameKind::SumGame);
        assert_eq!(read(vec![("num", column.clone())], games).unwrap(), expected, "{}", column.data_type());
        let sliced = column.slice(1, 2);
        assert_eq!(read(vec![("num", sliced)], games).unwrap(), expected[1..], "{}", column.data_type());
    }
}

#[test]
fn every_integer_type_reads_a_pile_and_a_negative_one_is_that_rows_error() {
    let expected = vec![
        Ok(Game::StoneGameIv(7)),
        Err(ProblemError::NullInput { game: GameKind::StoneGameIv, index: None }),
        Err(ProblemError::NegativeValue { game: GameKind::StoneGameIv, value: -3, index: None }),
    ];
    let columns: [ArrayRef; 3] = [
        Arc::new(Int8Array::from(vec![Some(7), None, Some(-3)])),
        Arc::new(Int32Array::from(vec![Some(7), None, Some(-3)])),
        Arc::new(Int64Array::from(vec![Some(7), None, Some(-3)])),
    ];
    for column in columns {
        assert_eq!(read(vec![("n", column)], IV).unwrap(), expected);
    }
    let unsigned: ArrayRef = Arc::new(UInt64Array::from(vec![Some(1), Some(u64::MAX), None]));
    assert_eq!(read(vec![("n", unsigned.slice(1, 1))], IV).unwrap(), vec![Ok(Game::StoneGameIv(u64::MAX))]);
    let small: ArrayRef = Arc::new(UInt32Array::from(vec![4]));
    assert_eq!(read(vec![("n", small)], IV).unwrap(), vec![Ok(Game::StoneGameIv(4))]);
}

#[test]
fn every_list_type_reads_stones_and_sliced_lists_read_their_own_rows() {
    let rows = vec![
        Some(vec![Some(1i64), Some(2)]),
        None,
        Some(vec![Some(3), Some(-4)]),
        Some(vec![None, Some(-1)]),
    ];
    let expected = vec![
        Ok(Game::StoneGameIx(vec![1, 2])),
        Err(ProblemError::NullInput { game: GameKind::StoneGameIx, index: None }),
        Err(ProblemError::NegativeValue { game: GameKind::StoneGameIx, value: -4, index: Some(1) }),
        Err(ProblemError::NullInput { game: GameKind::StoneGameIx, index: Some(0) }),
    ];
    let list = ListArray::from_iter_primitive::<Int64Type, _, _>(rows.clone());
    let large = LargeListArray::from_iter_primitive::<Int64Type, _, _>(rows.clone());
    let fixed = FixedSizeListArray::from_iter_primitive::<Int64Type, _, _>(rows, 2);
    for column in [Arc::new(list) as ArrayRef, Arc::new(large), Arc::new(fixed)] {
        assert_eq!(read(vec![("stones", column.clone())], IX).unwrap(), expected, "{}", column.data_type());
        let sliced = column.slice(2, 2);
        assert_eq!(read(vec![("stones", sliced)], IX).unwrap(), expected[2..], "{}", column.data_type());
    }
    // Without null items: a negative one is found in the converted items' row alone.
    let rows = vec![Some(vec![Some(5i32), Some(6)]), Some(vec![Some(7), Some(-8)]), Some(vec![Some(9)])];
    let expected = vec![
        Ok(Game::StoneGameIx(vec![5, 6])),
        Err(ProblemError::NegativeValue { game: GameKind::StoneGameIx, value: -8, index: Some(1) }),
        Ok(Game::StoneGameIx(vec![9])),
    ];
    let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(rows));
    assert_eq!(read(vec![("stones", list.clone())], IX).unwrap(), expected);
    for (start, len) in [(0, 1), (1, 2), (2, 1), (3, 0)] {
        let sliced = list.slice(start, len);
        let read = read(vec![("stones", sliced)], IX).unwrap();
        assert_eq!(read, expected[start..start + len], "rows {start}..{}", start + len);
    }
    let mut piles = ListBuilder::new(UInt64Builder::new());
    piles.append_value([Some(u64::MAX), Some(0)]);
    let piles: ArrayRef = Arc::new(piles.finish());
    let games = Games::One(GameKind::NimSquare);
    assert_eq!(read(vec![("piles", piles)], games).unwrap(), vec![Ok(Game::NimSquare(vec![u64::MAX, 0]))]);
}

#[test]
fn a_mixed_row_is_the_game_that_is_set_and_a_nan_is_no_game_as_a_null_is() {
    let num: ArrayRef = Arc::new(StringArray::from(vec![Some("11"), None, None, Some("?")]));
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![None, Some(5), None, Some(4)]));
    let floats: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN, 5.0, f64::NAN, 4.0]));
    for n in [n, floats] {
        let problems = read(vec![("id", num.clone()), ("num", num.clone()), ("n", n)], Games::Mixed).unwrap();
        assert_eq!(
            problems,
            vec![
                Ok(Game::SumGame("11".into())),
                Ok(Game::StoneGameIv(5)),
                Err(ProblemError::MissingGame),
                Err(ProblemError::SeveralGames { games: vec![GameKind::SumGame, GameKind::StoneGameIv] }),
            ]
        );
    }
}

#[test]
fn a_batch_without_its_column_or_of_a_wrong_type_is_refused_whole() {
    let text: ArrayRef = Arc::new(StringArray::from(vec!["5"]));
    let message = |columns, games| read(columns, games).unwrap_err().to_string();
    let dates: ArrayRef = Arc::new(arrow_array::Date32Array::from(vec![5]));
    assert_eq!(
        message(vec![("n", dates)], IV),
        "column \"n\" is Date32; expected whole numbers: an integer type (uint64), or a float, decimal or \
         string type holding them; cast it first: in pandas df[\"n\"] = df[\"n\"].astype(\"UInt64\"); in \
         Polars df = df.with_columns(pl.col(\"n\").cast(pl.UInt64)); in Spark df = df.withColumn(\"n\", \
         F.col(\"n\").cast(\"decimal(20,0)\"))"
    );
    assert_eq!(
        message(vec![("num", text.clone())], IV),
        r#"no column "n": a stone_game_iv batch holds its problems there"#
    );
    assert_eq!(
        message(vec![("id", text.clone())], Games::Mixed),
        "no game column: a mixed batch needs at least one of num, stones, n, piles"
    );
    assert_eq!(
        message(vec![("stones", text.clone())], Games::Mixed),
        "column \"stones\" is Utf8; expected a list of whole numbers (list, large_list or fixed_size_list of \
         uint64, or of a float, decimal or string type holding them); cast it first: in pandas \
         df[\"stones\"] = df[\"stones\"].map(lambda v: None if v is None else [int(x) for x in v]); in \
         Polars df = df.with_columns(pl.col(\"stones\").cast(pl.List(pl.UInt64))); in Spark df = \
         df.withColumn(\"stones\", F.col(\"stones\").cast(\"array<decimal(20,0)>\"))"
    );
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
    assert_eq!(message(vec![("n", n.clone()), ("n", n)], IV), r#"column "n" appears 2 times; keep one"#);
    let numbers: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
    assert!(message(vec![("num", numbers)], Games::Mixed).starts_with(
        "column \"num\" is UInt64; expected a string type (utf8, large_utf8, utf8_view, or a dictionary of \
         them); cast it first: in pandas df[\"num\"] = df[\"num\"].astype(\"string\")"
    ));
}

/// What [`super::super::accepts`] says of a type is what the reader does with it.
#[test]
fn the_type_test_and_the_reader_agree_on_every_type() {
    let item = |ty: DataType| Arc::new(Field::new_list_field(ty, true));
    let scalars = [
        DataType::Int8,
        DataType::UInt64,
        DataType::Float16,
        DataType::Float32,
        DataType::Float64,
        DataType::Decimal32(9, 0),
        DataType::Decimal64(18, 2),
        DataType::Decimal128(20, 0),
        DataType::Decimal256(76, -2),
        DataType::Utf8,
        DataType::LargeUtf8,
        DataType::Utf8View,
        DataType::Boolean,
        DataType::Date32,
        DataType::Timestamp(arrow_schema::TimeUnit::Second, None),
        DataType::Binary,
        DataType::Null,
        DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8)),
        DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Int64)),
    ];
    let mut types = scalars.to_vec();
    for scalar in &scalars {
        types.push(DataType::List(item(scalar.clone())));
        types.push(DataType::LargeList(item(scalar.clone())));
        types.push(DataType::FixedSizeList(item(scalar.clone()), 2));
    }
    for kind in GameKind::ALL {
        for ty in &types {
            let column = arrow_array::new_empty_array(ty);
            let batch = batch(vec![(kind.input(), column)]);
            let read = Input::find(&batch, kind).is_ok();
            assert_eq!(super::super::accepts(kind, ty), read, "{} as {ty}", kind.input());
        }
    }
}

#[test]
fn floats_decimals_and_text_are_counts_when_whole_and_nan_is_no_value() {
    let iv = |value: u64| Ok(Game::StoneGameIv(value));
    let not = |value: &str| {
        Err(ProblemError::NotUint64 { game: GameKind::StoneGameIv, value: value.into(), index: None })
    };
    let null = Err(ProblemError::NullInput { game: GameKind::StoneGameIv, index: None });
    let floats: ArrayRef = Arc::new(Float64Array::from(vec![
        Some(7.0),
        None,
        Some(f64::NAN),
        Some(7.5),
        Some(-3.0),
        Some(f64::INFINITY),
        Some(1e20),
        Some(9_007_199_254_740_994.0),
    ]));
    let expected = vec![
        iv(7),
        null.clone(),
        null.clone(),
        not("7.5"),
        Err(ProblemError::NegativeValue { game: GameKind::StoneGameIv, value: -3, index: None }),
        not("inf"),
        not("1e20"),
        iv(9_007_199_254_740_994),
    ];
    assert_eq!(read(vec![("n", floats.clone())], IV).unwrap(), expected);
    assert_eq!(read(vec![("n", floats.slice(3, 3))], IV).unwrap(), expected[3..6]);
    let decimals: ArrayRef = Arc::new(
        Decimal128Array::from(vec![Some(18_446_744_073_709_551_615), None, Some(18_446_744_073_709_551_616)])
            .with_precision_and_scale(20, 0)
            .unwrap(),
    );
    assert_eq!(
        read(vec![("n", decimals)], IV).unwrap(),
        [iv(u64::MAX), null.clone(), not("18446744073709551616")]
    );
    let texts: ArrayRef = Arc::new(StringArray::from(vec![Some("1e3"), Some("nan"), Some("x")]));
    assert_eq!(read(vec![("n", texts)], IV).unwrap(), [iv(1000), null, not("\"x\"")]);
}

#[test]
fn list_items_of_floats_and_decimals_are_read_by_the_same_rule() {
    let rows = vec![
        Some(vec![Some(1.0), Some(2.0)]),
        Some(vec![Some(3.0), Some(f64::NAN)]),
        Some(vec![Some(4.0), Some(0.5), None]),
        None,
        Some(vec![Some(-2.0)]),
        Some(vec![]),
    ];
    let game = GameKind::StoneGameIx;
    let expected = vec![
        Ok(Game::StoneGameIx(vec![1, 2])),
        Err(ProblemError::NullInput { game, index: Some(1) }),
        Err(ProblemError::NotUint64 { game, value: "0.5".into(), index: Some(1) }),
        Err(ProblemError::NullInput { game, index: None }),
        Err(ProblemError::NegativeValue { game, value: -2, index: Some(0) }),
        Ok(Game::StoneGameIx(vec![])),
    ];
    let list: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(rows.clone()));
    assert_eq!(read(vec![("stones", list.clone())], IX).unwrap(), expected);
    for (start, len) in [(0, 2), (1, 3), (2, 4), (5, 1)] {
        let sliced = list.slice(start, len);
        assert_eq!(read(vec![("stones", sliced)], IX).unwrap(), expected[start..start + len]);
    }
    let large: ArrayRef =
        Arc::new(LargeListArray::from_iter_primitive::<Float32Type, _, _>(vec![Some(vec![
            Some(5.0f32),
            Some(6.0),
        ])]));
    assert_eq!(read(vec![("stones", large)], IX).unwrap(), vec![Ok(Game::StoneGameIx(vec![5, 6]))]);
    let items =
        Decimal128Array::from(vec![18_446_744_073_709_551_615, 3]).with_precision_and_scale(20, 0).unwrap();
    let item = Arc::new(Field::new_list_field(items.data_type().clone(), true));
    let piles: ArrayRef =
        Arc::new(ListArray::new(item, arrow_buffer::OffsetBuffer::from_lengths([2]), Arc::new(items), None));
    assert_eq!(
        read(vec![("piles", piles)], Games::One(GameKind::NimSquare)).unwrap(),
        vec![Ok(Game::NimSquare(vec![u64::MAX, 3]))]
    );
}

/// A float, as writers hold numbers: whole or not, in range or not, NaN, or null.
fn writers_float() -> impl proptest::strategy::Strategy<Value = Option<f64>> {
    use proptest::prelude::*;
    prop_oneof![
        (0u64..1 << 20).prop_map(|v| Some(v as f64)),
        any::<u64>().prop_map(|v| Some(v as f64)),
        any::<f64>().prop_map(Some),
        Just(Some(f64::NAN)),
        Just(Some(-2.0)),
        Just(Some(0.5)),
        Just(None),
    ]
}

/// One value's problem, read on its own: the reference the batch's conversion is
/// held to.
fn one_float(value: Option<f64>, index: Option<u64>) -> Result<u64, ProblemError> {
    let game = if index.is_some() { GameKind::StoneGameIx } else { GameKind::StoneGameIv };
    match value.map(crate::columnar::float_count) {
        None | Some(Ok(None)) => Err(ProblemError::NullInput { game, index }),
        Some(Ok(Some(count))) => Ok(count),
        Some(Err(crate::columnar::NotACount::Negative(value))) => {
            Err(ProblemError::NegativeValue { game, value, index })
        }
        Some(Err(crate::columnar::NotACount::NotUint64)) => {
            Err(ProblemError::NotUint64 { game, value: format!("{:?}", value.unwrap()), index })
        }
    }
}

proptest::proptest! {
    /// A float column, whole or sliced, reads as each value read on its own; so does a
    /// list column of floats, each row's first gap its error.
    #[test]
    fn a_float_column_reads_as_its_values_one_by_one(
        values in proptest::collection::vec(writers_float(), 0..40),
        lists in proptest::collection::vec(proptest::option::of(proptest::collection::vec(writers_float(), 0..4)), 0..12),
        cut in 0usize..40,
    ) {
        let n: ArrayRef = Arc::new(Float64Array::from(values.clone()));
        let cut = cut.min(values.len());
        let expected: Vec<_> = values.iter().map(|&value| one_float(value, None).map(Game::StoneGameIv)).collect();
        proptest::prop_assert_eq!(read(vec![("n", n.clone())], IV).unwrap(), expected.clone());
        proptest::prop_assert_eq!(read(vec![("n", n.slice(cut, values.len() - cut))], IV).unwrap(), expected[cut..].to_vec());

        let stones: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(lists.clone()));
        let expected: Vec<_> = lists.iter().map(|row| match row {
            None => Err(ProblemError::NullInput { game: GameKind::StoneGameIx, index: None }),
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(index, &item)| one_float(item, Some(index as u64)))
                .collect::<Result<Vec<u64>, _>>()
                .map(Game::StoneGameIx),
        }).collect();
        let cut = cut.min(lists.len());
        proptest::prop_assert_eq!(read(vec![("stones", stones.clone())], IX).unwrap(), expected.clone());
        proptest::prop_assert_eq!(read(vec![("stones", stones.slice(cut, lists.len() - cut))], IX).unwrap(), expected[cut..].to_vec());
    }
}

#[test]
fn the_id_column_is_found_whatever_its_type() {
    let ids: ArrayRef = Arc::new(Int64Array::from(vec![9]));
    let n: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
    let with = batch(vec![("n", n.clone()), ("id", ids.clone())]);
    let (field, array) = id_column(&with).unwrap().unwrap();
    assert_eq!((field.as_ref(), &array), (&Field::new("id", DataType::Int64, false), &ids));
    assert!(id_column(&batch(vec![("n", n)])).unwrap().is_none());
}

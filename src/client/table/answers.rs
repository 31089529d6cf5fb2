//! Answers as tables: checking a server's table of solutions against the request it
//! answers, and moving solutions between the two shapes the client writes (a table's
//! columns, JSON lines of `Solution`).
//!
//! The columns are those of the contract ([`crate::columnar`]). A table carries an
//! error's reason and message only, so a JSON line written from one has the `code` that
//! reason always has, and no `field` or `metadata`.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, StringBuilder};
use arrow_array::cast::AsArray;
use arrow_array::types::{UInt32Type, UInt64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, PrimitiveArray, RecordBatch, StringArray};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{ArrowError, DataType, Schema, SchemaRef};
use tonic::Code;

use super::csv::INVALID_CELL;
use crate::client::output::write_solution_json;
use crate::columnar::{
    AnswerColumn, AnswerColumns, Games, ALICE_WINS, ERROR_MESSAGE, ERROR_REASON, GAME, ID,
};
use crate::convert;
use crate::games::{GameKind, MoveValues};
use crate::pb;
use crate::problem::Reason;

/// Why an answer cannot be the answer to its request.
pub fn check(request: &RecordBatch, answer: &RecordBatch, expected: &Schema) -> Result<(), String> {
    if answer.num_rows() != request.num_rows() {
        return Err(format!("answered {} rows for {} problems", answer.num_rows(), request.num_rows()));
    }
    for field in expected.fields() {
        let Some(column) = answer.column_by_name(field.name()) else {
            return Err(format!("its answer has no column {:?}", field.name()));
        };
        if column.data_type() != field.data_type() {
            return Err(format!(
                "its column {:?} is {}, not {}",
                field.name(),
                column.data_type(),
                field.data_type()
            ));
        }
    }
    let (sent, echoed) =
        (request.column(0).to_data(), answer.column_by_name(ID).expect("checked above").to_data());
    // The same buffers hold the same ids: an answer from the embedded server's exchange
    // echoes the very column it was sent, and is not compared value by value.
    if !sent.ptr_eq(&echoed) && sent != echoed {
        let row = (0..sent.len()).find(|&row| sent.slice(row, 1) != echoed.slice(row, 1));
        return Err(format!(
            "its ids are not the request's (first at row {} of the batch)",
            row.unwrap_or(0)
        ));
    }
    Ok(())
}

/// The output rows of a checked `answer` to `request`: the id as sent (under the output's
/// name for it), the `kept` input columns, then the answer columns of `output`; no row is
/// copied.
pub fn output_rows(
    output: &SchemaRef,
    request: &RecordBatch,
    kept: &[ArrayRef],
    answer: &RecordBatch,
) -> Result<RecordBatch, ArrowError> {
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(output.fields().len());
    columns.push(Arc::clone(request.column(0)));
    columns.extend(kept.iter().cloned());
    for field in &output.fields()[1 + kept.len()..] {
        let column = answer
            .column_by_name(field.name())
            .ok_or_else(|| ArrowError::SchemaError(format!("no column {:?} in the answer", field.name())))?;
        columns.push(Arc::clone(column));
    }
    RecordBatch::try_new(Arc::clone(output), columns)
}

/// `rows` (an output table) with the rows of `overrides` (by index, ascending) holding
/// those errors instead of their answers; the id, the kept columns and the game stay.
pub fn override_rows(
    rows: &RecordBatch,
    overrides: &[(usize, pb::Solution)],
) -> Result<RecordBatch, ArrowError> {
    let schema = rows.schema();
    let mut columns = rows.columns().to_vec();
    let mut mask = vec![false; rows.num_rows()];
    for (row, _) in overrides {
        mask[*row] = true;
    }
    let mask = BooleanArray::from(mask);
    let mut errors = overrides.iter().peekable();
    let (mut reasons, mut messages) = (StringBuilder::new(), StringBuilder::new());
    let reason_at = schema.index_of(ERROR_REASON)?;
    let message_at = schema.index_of(ERROR_MESSAGE)?;
    let (old_reasons, old_messages) =
        (columns[reason_at].as_string::<i32>(), columns[message_at].as_string::<i32>());
    for row in 0..rows.num_rows() {
        match errors.next_if(|(at, _)| *at == row).and_then(|(_, solution)| solution.error.as_deref()) {
            Some(error) => {
                reasons.append_value(&error.reason);
                messages.append_value(&error.message);
            }
            None => {
                reasons.append_option(old_reasons.is_valid(row).then(|| old_reasons.value(row)));
                messages.append_option(old_messages.is_valid(row).then(|| old_messages.value(row)));
            }
        }
    }
    let (reasons, messages): (ArrayRef, ArrayRef) = (Arc::new(reasons.finish()), Arc::new(messages.finish()));
    let answer = |name: &str| name == ALICE_WINS || AnswerColumn::of(Games::Mixed).any(|c| c.name() == name);
    for (at, column) in columns.iter_mut().enumerate().skip(1) {
        *column = match at {
            at if at == reason_at => Arc::clone(&reasons),
            at if at == message_at => Arc::clone(&messages),
            at if answer(schema.field(at).name()) => arrow_select::nullif::nullif(column.as_ref(), &mask)?,
            _ => continue,
        };
    }
    RecordBatch::try_new(schema, columns)
}

/// The gRPC code and the field that an error `reason` comes with, by the same rows as
/// the server's ([`Reason`]; the field of an input's error from the row's game), or
/// `UNKNOWN` and none for a reason this client does not know (a newer server's).
fn fault_of(reason: &str, game: Option<GameKind>) -> (Code, Option<&'static str>) {
    match Reason::parse(reason) {
        Some(known) => (known.code(), known.field(game)),
        None if reason == INVALID_CELL => (Code::InvalidArgument, None),
        None => (Code::Unknown, None),
    }
}

/// Writes the rows of `rows` (an output table: id first, then the answer columns) as JSON
/// lines of `Solution`; a row in `overrides` is written as that solution instead.
pub fn write_json_lines(
    out: &mut Vec<u8>,
    rows: &RecordBatch,
    overrides: &[(usize, pb::Solution)],
) -> Result<(), ArrowError> {
    let ids = Ids::new(rows.column(0).as_ref())?;
    let column = |name: &str| rows.column_by_name(name);
    let alice_wins = column(ALICE_WINS).map(|c| c.as_boolean().clone());
    let answers = AnswerReader::new(rows);
    // The game column is a dictionary: read as text, once a batch.
    let strings = |name| -> Result<_, ArrowError> {
        let column = column(name).map(|c| arrow_cast::cast(c, &DataType::Utf8)).transpose()?;
        Ok(column.map(|c| c.as_string::<i32>().clone()))
    };
    let (reasons, messages, games) = (strings(ERROR_REASON)?, strings(ERROR_MESSAGE)?, strings(GAME)?);
    let mut overrides = overrides.iter().peekable();
    let mut id = String::new();
    for row in 0..rows.num_rows() {
        if let Some((_, solution)) = overrides.next_if(|(at, _)| *at == row) {
            write_solution_json(out, solution);
            continue;
        }
        id.clear();
        ids.write(row, &mut id)?;
        fn text(array: &Option<StringArray>, row: usize) -> Option<&str> {
            array.as_ref().and_then(|a| a.is_valid(row).then(|| a.value(row)))
        }
        let wins = alice_wins.as_ref().and_then(|a| a.is_valid(row).then(|| a.value(row)));
        let error = text(&reasons, row).map(|reason| {
            let message = text(&messages, row).unwrap_or_default().to_owned();
            let (code, field) = fault_of(reason, text(&games, row).and_then(GameKind::from_label));
            Box::new(convert::wire_error(code, reason, field, BTreeMap::new(), message))
        });
        let winner = match wins {
            Some(true) => pb::Winner::Alice,
            Some(false) => pb::Winner::Bob,
            None => pb::Winner::Unspecified,
        };
        let solution = pb::Solution {
            id: std::mem::take(&mut id),
            alice_wins: wins == Some(true),
            winner: winner.into(),
            winning_move: answers
                .game_move(row)
                .map(|(kind, values)| pb::Move { game: Some(convert::wire_move(kind, values)) }),
            error,
            nim_value: answers.nim_value(row).map(|value| value as u32),
        };
        write_solution_json(out, &solution);
        id = solution.id;
    }
    Ok(())
}

/// A table's answer columns ([`AnswerColumn`]), read a row at a time.
struct AnswerReader {
    /// The columns the table has, each as `uint64`.
    columns: Vec<(AnswerColumn, PrimitiveArray<UInt64Type>)>,
}

impl AnswerReader {
    fn new(rows: &RecordBatch) -> Self {
        let columns = AnswerColumn::of(Games::Mixed)
            .filter_map(|column| {
                let array = rows.column_by_name(column.name())?;
                let values = match array.as_primitive_opt::<UInt32Type>() {
                    Some(narrow) => narrow.unary(u64::from),
                    None => array.as_primitive_opt::<UInt64Type>()?.clone(),
                };
                Some((column, values))
            })
            .collect();
        AnswerReader { columns }
    }

    fn value(&self, row: usize, of: AnswerColumn) -> Option<u64> {
        let (_, values) = self.columns.iter().find(|(column, _)| *column == of)?;
        values.is_valid(row).then(|| values.value(row))
    }

    /// Row `row`'s move: the game whose move fills exactly the move columns that are not
    /// null (no two games' moves fill the same ones), with their values.
    fn game_move(&self, row: usize) -> Option<(GameKind, MoveValues)> {
        let filled = |kind: GameKind| {
            self.columns.iter().all(|(column, values)| match column {
                AnswerColumn::Move(_) => column.filled_by(kind) == values.is_valid(row),
                AnswerColumn::NimValue => true,
            })
        };
        let kind = GameKind::ALL.into_iter().find(|&kind| filled(kind))?;
        let mut values = MoveValues::default();
        for (at, &field) in kind.move_fields().iter().enumerate() {
            values[at] = self.value(row, AnswerColumn::Move(field))?;
        }
        Some((kind, values))
    }

    fn nim_value(&self, row: usize) -> Option<u64> {
        self.value(row, AnswerColumn::NimValue)
    }
}

/// An id column, as the strings a JSON line's `id` holds.
enum Ids<'a> {
    Text(StringArray),
    Numbers(PrimitiveArray<UInt64Type>),
    Other(&'a dyn Array, ArrayFormatter<'a>),
}

impl<'a> Ids<'a> {
    fn new(column: &'a dyn Array) -> Result<Self, ArrowError> {
        if let Some(text) = column.as_string_opt::<i32>() {
            return Ok(Ids::Text(text.clone()));
        }
        if let Some(numbers) = column.as_primitive_opt::<UInt64Type>() {
            return Ok(Ids::Numbers(numbers.clone()));
        }
        Ok(Ids::Other(column, ArrayFormatter::try_new(column, &FormatOptions::default())?))
    }

    /// Appends row `row`'s id to `out`; a null id is empty, as a line without one.
    fn write(&self, row: usize, out: &mut String) -> Result<(), ArrowError> {
        match self {
            Ids::Text(text) if text.is_valid(row) => out.push_str(text.value(row)),
            Ids::Numbers(numbers) if numbers.is_valid(row) => {
                out.push_str(itoa::Buffer::new().format(numbers.value(row)));
            }
            Ids::Other(column, formatter) if column.is_valid(row) => formatter.value(row).write(out)?,
            _ => {}
        }
        Ok(())
    }
}

/// Collects `Solution`s (a JSON-lines input's answers) into a table of the output's
/// columns: `id` as text, then the answers of every game.
#[derive(Debug)]
pub struct SolutionRows {
    schema: SchemaRef,
    id: StringBuilder,
    game: Vec<Option<GameKind>>,
    alice_wins: BooleanBuilder,
    answers: AnswerColumns,
    reason: StringBuilder,
    message: StringBuilder,
}

impl SolutionRows {
    /// An empty table of `schema`, the output schema of a JSON-lines input.
    pub fn new(schema: SchemaRef) -> Self {
        SolutionRows {
            schema,
            id: StringBuilder::new(),
            game: Vec::new(),
            alice_wins: BooleanBuilder::new(),
            answers: AnswerColumns::new(Games::Mixed, 0),
            reason: StringBuilder::new(),
            message: StringBuilder::new(),
        }
    }

    /// Appends `solution`, the answer to a problem of `game` (none for a line that is
    /// not a problem), as the next row.
    pub fn push(&mut self, solution: &pb::Solution, game: Option<GameKind>) {
        self.id.append_value(&solution.id);
        self.game.push(game);
        self.alice_wins.append_option(solution.error.is_none().then_some(solution.alice_wins));
        let game_move =
            solution.winning_move.as_ref().and_then(|m| m.game.as_ref()).map(convert::move_values);
        self.answers.append(game_move, solution.nim_value);
        self.reason.append_option(solution.error.as_ref().map(|e| &e.reason));
        self.message.append_option(solution.error.as_ref().map(|e| &e.message));
    }

    /// The rows pushed so far, as a table; the builder is empty again.
    pub fn finish(&mut self) -> Result<RecordBatch, ArrowError> {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.id.finish()),
            crate::columnar::game_column(self.game.drain(..)),
            Arc::new(self.alice_wins.finish()),
        ];
        columns.extend(self.answers.finish());
        columns.push(Arc::new(self.reason.finish()));
        columns.push(Arc::new(self.message.finish()));
        RecordBatch::try_new(Arc::clone(&self.schema), columns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::table::columns::output_schema;
    use crate::columnar::Games;
    use arrow_array::{Int32Array, UInt64Array};
    use arrow_schema::Field;

    fn samples() -> Vec<pb::Solution> {
        use pb::r#move::Game as M;
        let won = |id: &str, game| pb::Solution {
            id: id.into(),
            alice_wins: true,
            winner: pb::Winner::Alice.into(),
            winning_move: Some(pb::Move { game: Some(game) }),
            ..Default::default()
        };
        vec![
            won("s", M::SumGame(pb::SumGameMove { index: 3, digit: 9 })),
            won("x", M::StoneGameIx(pb::StoneGameIxMove { index: 0 })),
            won("v", M::StoneGameIv(pb::StoneGameIvMove { take: 4 })),
            pb::Solution {
                nim_value: Some(5),
                ..won("m", M::NimSquare(pb::NimSquareMove { pile: 1, take: 9 }))
            },
            pb::Solution {
                id: "b".into(),
                winner: pb::Winner::Bob.into(),
                nim_value: Some(0),
                ..Default::default()
            },
            pb::Solution {
                id: "w".into(),
                alice_wins: true,
                winner: pb::Winner::Alice.into(),
                ..Default::default()
            },
            pb::Solution {
                id: "e".into(),
                error: Some(Box::new(convert::wire_error(
                    Code::OutOfRange,
                    "PILE_ABOVE_LIMIT",
                    None,
                    BTreeMap::new(),
                    "too big".into(),
                ))),
                ..Default::default()
            },
        ]
    }

    #[test]
    fn solutions_go_to_a_table_and_back_to_the_same_json_lines() {
        let schema = output_schema(Games::Mixed, Field::new(ID, DataType::Utf8, true));
        let mut rows = SolutionRows::new(Arc::clone(&schema));
        let mut direct = Vec::new();
        for solution in samples() {
            let game = solution
                .winning_move
                .as_ref()
                .and_then(|m| m.game.as_ref())
                .map(|m| convert::move_values(m).0);
            rows.push(&solution, game);
            write_solution_json(&mut direct, &solution);
        }
        let table = rows.finish().unwrap();
        assert_eq!(table.num_rows(), 7);
        let games = arrow_cast::cast(table.column_by_name("game").unwrap(), &DataType::Utf8).unwrap();
        let games: Vec<_> = games.as_string::<i32>().iter().collect();
        assert_eq!(
            games[..4],
            [Some("sum_game"), Some("stone_game_ix"), Some("stone_game_iv"), Some("nim_square")]
        );
        assert_eq!(games[4..], [None, None, None]);
        let mut through = Vec::new();
        write_json_lines(&mut through, &table, &[]).unwrap();
        assert_eq!(String::from_utf8(through).unwrap(), String::from_utf8(direct).unwrap());
        assert_eq!(rows.finish().unwrap().num_rows(), 0, "finish empties the builder");
    }

    fn request(ids: ArrayRef) -> RecordBatch {
        let n = Arc::new(UInt64Array::from_iter_values(0..ids.len() as u64));
        let schema = Schema::new(vec![
            Field::new(ID, ids.data_type().clone(), true),
            Field::new("n", DataType::UInt64, true),
        ]);
        RecordBatch::try_new(Arc::new(schema), vec![ids, n]).unwrap()
    }

    fn answer(ids: ArrayRef, rows: usize) -> RecordBatch {
        let expected = crate::columnar::output_schema(
            Games::One(GameKind::StoneGameIv),
            Some(&Field::new(ID, ids.data_type().clone(), true)),
        );
        let columns: Vec<ArrayRef> = vec![
            ids,
            crate::columnar::game_column(vec![Some(GameKind::StoneGameIv); rows]),
            Arc::new(BooleanArray::from(vec![Some(true); rows])),
            Arc::new(UInt64Array::from(vec![Some(1); rows])),
            Arc::new(StringArray::from(vec![None::<&str>; rows])),
            Arc::new(StringArray::from(vec![None::<&str>; rows])),
        ];
        RecordBatch::try_new(Arc::new(expected), columns).unwrap()
    }

    #[test]
    fn an_answer_is_checked_for_its_rows_columns_and_ids() {
        let ids: ArrayRef = Arc::new(Int32Array::from(vec![7, 8, 9]));
        let expected = crate::columnar::output_schema(
            Games::One(GameKind::StoneGameIv),
            Some(&Field::new(ID, DataType::Int32, true)),
        );
        let sent = request(Arc::clone(&ids));
        assert_eq!(check(&sent, &answer(Arc::clone(&ids), 3), &expected), Ok(()));
        let short = answer(Arc::new(Int32Array::from(vec![7, 8])), 2);
        assert_eq!(check(&sent, &short, &expected).unwrap_err(), "answered 2 rows for 3 problems");
        let other = answer(Arc::new(Int32Array::from(vec![7, 0, 9])), 3);
        assert_eq!(
            check(&sent, &other, &expected).unwrap_err(),
            "its ids are not the request's (first at row 1 of the batch)"
        );
        let retyped = answer(Arc::new(UInt64Array::from(vec![7, 8, 9])), 3);
        assert_eq!(check(&sent, &retyped, &expected).unwrap_err(), "its column \"id\" is UInt64, not Int32");
        let missing = answer(ids, 3).project(&[0, 1, 2, 4, 5]).unwrap();
        assert_eq!(check(&sent, &missing, &expected).unwrap_err(), "its answer has no column \"move_take\"");
    }

    #[test]
    fn overridden_rows_are_their_errors() {
        let ids: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let output =
            output_schema(Games::One(GameKind::StoneGameIv), Field::new("key", DataType::Utf8, true));
        let bad = pb::Solution {
            id: "b".into(),
            error: Some(Box::new(convert::wire_error(
                Code::InvalidArgument,
                INVALID_CELL,
                None,
                BTreeMap::new(),
                "bad".into(),
            ))),
            ..Default::default()
        };
        let rows = output_rows(&output, &request(Arc::clone(&ids)), &[], &answer(ids, 3)).unwrap();
        let rows = override_rows(&rows, &[(1, bad)]).unwrap();
        assert_eq!(rows.schema().field(0).name(), "key");
        let games = arrow_cast::cast(rows.column(1), &DataType::Utf8).unwrap();
        let games: Vec<_> = games.as_string::<i32>().iter().collect();
        assert_eq!(games, [Some("stone_game_iv"); 3], "the row's game stays");
        let wins: Vec<_> = rows.column(2).as_boolean().iter().collect();
        assert_eq!(wins, [Some(true), None, Some(true)]);
        let reasons: Vec<_> = rows.column(4).as_string::<i32>().iter().collect();
        assert_eq!(reasons, [None, Some(INVALID_CELL), None]);
        let mut json = Vec::new();
        write_json_lines(&mut json, &rows, &[]).unwrap();
        let lines: Vec<pb::Solution> =
            String::from_utf8(json).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines[1].error.as_ref().unwrap().code, pb::solution_error::Code::InvalidArgument as i32);
        assert_eq!(
            lines[2].winning_move.as_ref().unwrap().game,
            Some(pb::r#move::Game::StoneGameIv(pb::StoneGameIvMove { take: 1 }))
        );
    }

    #[test]
    fn every_reason_has_its_code_and_its_field() {
        let iv = Some(GameKind::StoneGameIv);
        assert_eq!(fault_of("PILE_ABOVE_LIMIT", iv), (Code::OutOfRange, Some("problem.stone_game_iv.n")));
        assert_eq!(fault_of("NO_GAME", None), (Code::InvalidArgument, Some("problem.game")));
        assert_eq!(fault_of("SERVER_STOPPING", iv), (Code::Unavailable, None));
        assert_eq!(fault_of("SEVERAL_GAMES", None), (Code::InvalidArgument, Some("problem.game")));
        assert_eq!(fault_of("NEGATIVE_VALUE", iv), (Code::InvalidArgument, Some("problem.stone_game_iv.n")));
        assert_eq!(fault_of("NOT_UINT64", None), (Code::InvalidArgument, None));
        assert_eq!(fault_of(INVALID_CELL, iv), (Code::InvalidArgument, None));
        assert_eq!(fault_of("FROM_THE_FUTURE", iv), (Code::Unknown, None));
    }
}

//! The decoder: solver requests and batches of solutions read in one pass over their
//! bytes, every vector sized exactly; anything unusual is left to prost (`None`).

use prost::Message;

use super::wire::{
    move_game_field, problem_game_field, Fields, LEN_1, LEN_4, LEN_5, VARINT_1, VARINT_2, VARINT_3, VARINT_6,
};
use crate::convert;
use crate::games::{GameKind, Input, InputShape, MoveValues};
use crate::pb;

/// `SolveBatchRequest` and `SolveBatchStreamRequest`: `repeated Problem problems = 1;
/// bool winner_only = 2;`.
pub(super) fn problems(bytes: &[u8]) -> Option<(Vec<pb::Problem>, bool)> {
    let mut problems = Vec::with_capacity(count_messages(bytes)?);
    let mut winner_only = false;
    let mut fields = Fields(bytes);
    while let Some(key) = fields.key() {
        match key {
            LEN_1 => problems.push(problem(fields.len_delimited()?)?),
            // prost keeps the last of a scalar given twice, as this does.
            VARINT_2 => winner_only = fields.varint()? != 0,
            _ => return None,
        }
    }
    Some((problems, winner_only))
}

/// `SolveRequest` and `SolveStreamRequest`: `Problem problem = 1; bool winner_only = 2;`.
pub(super) fn one_problem(bytes: &[u8]) -> Option<(Option<pb::Problem>, bool)> {
    let (mut problems, winner_only) = problems(bytes)?;
    // prost merges a message given twice into the first: left to it.
    if problems.len() > 1 {
        return None;
    }
    Some((problems.pop(), winner_only))
}

/// `SolveBatchResponse` and `SolveBatchStreamResponse`: `repeated Solution solutions = 1;`.
pub(super) fn solutions(bytes: &[u8]) -> Option<Vec<pb::Solution>> {
    let mut solutions = Vec::with_capacity(count_messages(bytes)?);
    let mut fields = Fields(bytes);
    while let Some(key) = fields.key() {
        match key {
            LEN_1 => solutions.push(solution(fields.len_delimited()?)?),
            _ => return None,
        }
    }
    Some(solutions)
}

/// How many field-1 messages `bytes` holds at its top level; `None` if it holds anything
/// but those and varints.
fn count_messages(bytes: &[u8]) -> Option<usize> {
    let mut count = 0;
    let mut fields = Fields(bytes);
    while let Some(key) = fields.key() {
        match key & 7 {
            0 => drop(fields.varint()?),
            2 => {
                fields.len_delimited()?;
                count += usize::from(key == LEN_1);
            }
            _ => return None,
        }
    }
    Some(count)
}

/// `Problem`: `string id = 1; oneof game { SumGame sum_game = 2; ... }`, each game at
/// [`problem_game_field`] and its message one field numbered 1, of the game's
/// [`GameKind::input_shape`].
fn problem(bytes: &[u8]) -> Option<pb::Problem> {
    let mut problem = pb::Problem::default();
    let mut fields = Fields(bytes);
    while let Some(key) = fields.key() {
        if key & 7 != 2 {
            return None;
        }
        let value = fields.len_delimited()?;
        if key == LEN_1 {
            problem.id = string(value)?;
            continue;
        }
        // prost merges a game given twice into the first: left to it.
        if problem.game.is_some() {
            return None;
        }
        let at = usize::from(key >> 3).checked_sub(problem_game_field(GameKind::ALL[0]))?;
        let kind = *GameKind::ALL.get(at)?;
        let input = match kind.input_shape() {
            InputShape::Text => Input::Text(only_string(value)?),
            InputShape::Integer => Input::Integer(only_varint(value)?),
            InputShape::Integers => Input::Integers(only_packed(value)?),
        };
        problem.game = Some(kind.with_input(input)?.into());
    }
    Some(problem)
}

/// `Solution`: `string id = 1; bool alice_wins = 2; Winner winner = 3; Move winning_move
/// = 4; SolutionError error = 5; optional uint32 nim_value = 6;`. An error is decoded by prost: it is rare, and its map
/// is not worth a second reader.
fn solution(bytes: &[u8]) -> Option<pb::Solution> {
    let mut solution = pb::Solution::default();
    let mut fields = Fields(bytes);
    while let Some(key) = fields.key() {
        match key {
            LEN_1 => solution.id = string(fields.len_delimited()?)?,
            VARINT_2 => solution.alice_wins = fields.varint()? != 0,
            // prost reads an enum as the low 32 bits of the varint.
            VARINT_3 => solution.winner = fields.varint()? as i32,
            LEN_4 if solution.winning_move.is_none() => {
                solution.winning_move = Some(winning_move(fields.len_delimited()?)?);
            }
            LEN_5 if solution.error.is_none() => {
                solution.error = Some(Box::new(pb::SolutionError::decode(fields.len_delimited()?).ok()?));
            }
            // prost reads a uint32 as the low 32 bits of the varint.
            VARINT_6 => solution.nim_value = Some(fields.varint()? as u32),
            _ => return None,
        }
    }
    Some(solution)
}

/// `Move`: `oneof game { SumGameMove sum_game = 1; ... }`, each game at
/// [`move_game_field`] and its message the game's [`GameKind::move_fields`], numbered
/// from 1, each an integer.
fn winning_move(bytes: &[u8]) -> Option<pb::Move> {
    let mut fields = Fields(bytes);
    let game = match fields.key() {
        None => None,
        Some(key) if key & 7 == 2 => {
            let at = usize::from(key >> 3).checked_sub(move_game_field(GameKind::ALL[0]))?;
            let kind = *GameKind::ALL.get(at)?;
            Some(convert::wire_move(kind, move_fields(kind, fields.len_delimited()?)?))
        }
        Some(_) => return None,
    };
    fields.0.is_empty().then_some(pb::Move { game })
}

/// The values of a move message of `kind`: its fields, numbered from 1, each an integer.
/// prost reads a `uint32` as the low 32 bits of the varint, as [`convert::wire_move`]
/// keeps them.
fn move_fields(kind: GameKind, bytes: &[u8]) -> Option<MoveValues> {
    let mut values = MoveValues::default();
    let mut fields = Fields(bytes);
    while let Some(key) = fields.key() {
        let number = usize::from(key >> 3);
        if key & 7 != 0 || number == 0 || number > kind.move_fields().len() {
            return None;
        }
        // prost keeps the last of a scalar given twice, as this does.
        values[number - 1] = fields.varint()?;
    }
    Some(values)
}

/// A message of at most one field, keyed `key` and read by `read`; an empty one is the
/// field's default.
fn only_field<'a, T: Default>(
    bytes: &'a [u8],
    key: u8,
    read: impl FnOnce(&mut Fields<'a>) -> Option<T>,
) -> Option<T> {
    let mut fields = Fields(bytes);
    let value = match fields.key() {
        None => T::default(),
        Some(found) if found == key => read(&mut fields)?,
        Some(_) => return None,
    };
    fields.0.is_empty().then_some(value)
}

/// A message of one string field numbered 1, or empty.
fn only_string(bytes: &[u8]) -> Option<String> {
    only_field(bytes, LEN_1, |fields| string(fields.len_delimited()?))
}

/// A message of one packed repeated integer field numbered 1, or empty.
fn only_packed(bytes: &[u8]) -> Option<Vec<u64>> {
    only_field(bytes, LEN_1, |fields| packed(fields.len_delimited()?))
}

/// A message of one integer field numbered 1, or empty.
fn only_varint(bytes: &[u8]) -> Option<u64> {
    only_field(bytes, VARINT_1, Fields::varint)
}

fn string(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().map(str::to_owned)
}

/// Packed varints, in a vector of exactly their number (one ends at each byte below 0x80).
fn packed(bytes: &[u8]) -> Option<Vec<u64>> {
    let mut values = Vec::with_capacity(bytes.iter().filter(|&&byte| byte < 0x80).count());
    let mut fields = Fields(bytes);
    while !fields.0.is_empty() {
        values.push(fields.varint()?);
    }
    Some(values)
}

//! The encoder: problems (by the bulk client) and batches of solutions (by the server)
//! written as exactly prost's bytes, each message sized once.

use prost::bytes::BytesMut;
use prost::encoding::encoded_len_varint;
use prost::Message;

use super::wire::{
    len_key, move_game_field, problem_game_field, varint_key, LEN_1, LEN_4, LEN_5, VARINT_1, VARINT_2,
    VARINT_3, VARINT_6,
};
use crate::convert;
use crate::games::InputRef;
use crate::pb;

/// Appends `problem` to `out` as one element of a batch request's `problems` (field 1,
/// length-delimited): the bytes prost writes for it, sized once rather than once per
/// level of nesting, and written into place (`cargo bench --bench bulk`, `client_parse`).
pub fn encode_problem_element(problem: &pb::Problem, out: &mut BytesMut) {
    let game = problem.game.as_ref().map(convert::wire_input);
    // A oneof's message is always written once set, even when empty.
    let packed: usize = match game {
        Some((_, InputRef::Integers(values))) => values.iter().map(|&value| encoded_len_varint(value)).sum(),
        _ => 0,
    };
    let game_len = game.map(|(_, input)| match input {
        InputRef::Text(text) => string_field_len(text),
        InputRef::Integers(_) if packed == 0 => 0,
        InputRef::Integers(_) => len_field_len(packed),
        InputRef::Integer(n) => varint_field_len(n),
    });
    let len = string_field_len(&problem.id) + game_len.map_or(0, len_field_len);

    let start = out.len();
    out.resize(start + len_field_len(len), 0);
    let mut w = Writer { buf: &mut out[start..], at: 0 };
    w.byte(LEN_1);
    w.varint(len as u64);
    if !problem.id.is_empty() {
        w.string(LEN_1, &problem.id);
    }
    let (Some((kind, input)), Some(game_len)) = (game, game_len) else { return };
    w.byte(len_key(problem_game_field(kind)));
    w.varint(game_len as u64);
    match input {
        InputRef::Text(text) if !text.is_empty() => w.string(LEN_1, text),
        InputRef::Integers(values) if packed > 0 => {
            w.byte(LEN_1);
            w.varint(packed as u64);
            for &value in values {
                w.varint(value);
            }
        }
        InputRef::Integer(n) if n > 0 => {
            w.byte(VARINT_1);
            w.varint(n);
        }
        _ => {}
    }
    debug_assert_eq!(w.at, w.buf.len(), "the sizes above match what was written");
}

/// Appends `solutions` as a batch response's field 1: prost's bytes, with each
/// solution sized once (prost sizes a nested message again at every level above it).
pub(super) fn encode_solutions(solutions: &[pb::Solution], out: &mut Vec<u8>) {
    let (uint, message) = (varint_field_len, len_field_len);
    for solution in solutions {
        // A move's game and values, and the length of the game's move message.
        let game_move = solution.winning_move.as_ref().and_then(|m| m.game.as_ref()).map(|game| {
            let (kind, values) = convert::move_values(game);
            // The values past the game's fields are 0, which proto3 leaves out.
            let len: usize = values.iter().map(|&value| uint(value)).sum();
            (kind, values, len)
        });
        // An enum is an int32: a negative one is sign-extended to 10 bytes.
        let winner = solution.winner as u64;
        // A move without a game is an empty message.
        let move_len =
            solution.winning_move.as_ref().map(|_| game_move.map_or(0, |(_, _, len)| message(len)));
        let error_len = solution.error.as_ref().map(|error| error.encoded_len());
        let nim_value_len = solution.nim_value.map_or(0, |value| 1 + encoded_len_varint(value.into()));
        let len = string_field_len(&solution.id)
            + 2 * usize::from(solution.alice_wins)
            + uint(winner)
            + move_len.map_or(0, message)
            + error_len.map_or(0, message)
            + nim_value_len;

        // Everything but the error is written into place; the error (rare) by prost.
        let start = out.len();
        out.resize(start + message(len) - error_len.map_or(0, message) - nim_value_len, 0);
        let mut w = Writer { buf: &mut out[start..], at: 0 };
        w.byte(LEN_1);
        w.varint(len as u64);
        if !solution.id.is_empty() {
            w.string(LEN_1, &solution.id);
        }
        if solution.alice_wins {
            w.byte(VARINT_2);
            w.byte(1);
        }
        if winner != 0 {
            w.byte(VARINT_3);
            w.varint(winner);
        }
        if let Some(move_len) = move_len {
            w.byte(LEN_4);
            w.varint(move_len as u64);
            if let Some((kind, values, len)) = game_move {
                w.byte(len_key(move_game_field(kind)));
                w.varint(len as u64);
                for (at, &value) in values.iter().enumerate() {
                    if value != 0 {
                        w.byte(varint_key(at + 1));
                        w.varint(value);
                    }
                }
            }
        }
        debug_assert_eq!(w.at, w.buf.len(), "the sizes above match what was written");
        if let (Some(error), Some(len)) = (&solution.error, error_len) {
            out.push(LEN_5);
            prost::encoding::encode_varint(len as u64, out);
            error.encode_raw(out);
        }
        if let Some(value) = solution.nim_value {
            // Optional: written when set, 0 included.
            out.push(VARINT_6);
            prost::encoding::encode_varint(value.into(), out);
        }
    }
}

/// The bytes of a length-delimited field of `len` bytes with a one-byte key.
fn len_field_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

/// The bytes of a string field with a one-byte key: none for "", which proto3 leaves out.
fn string_field_len(value: &str) -> usize {
    if value.is_empty() {
        0
    } else {
        len_field_len(value.len())
    }
}

/// The bytes of an integer field with a one-byte key: none for 0, which proto3 leaves out.
fn varint_field_len(value: u64) -> usize {
    if value == 0 {
        0
    } else {
        1 + encoded_len_varint(value)
    }
}

/// Writes into a buffer sized beforehand.
struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn byte(&mut self, byte: u8) {
        self.buf[self.at] = byte;
        self.at += 1;
    }

    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte(value as u8 | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    fn string(&mut self, key: u8, value: &str) {
        self.byte(key);
        self.varint(value.len() as u64);
        self.buf[self.at..self.at + value.len()].copy_from_slice(value.as_bytes());
        self.at += value.len();
    }
}

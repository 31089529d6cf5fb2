//! The service's gRPC codec: prost's, except that problems (alone or in batches: the bulk
//! of all traffic) and batches of solutions are read by a decoder written for their few
//! fields, and written (solutions by the server, problems by the bulk client) by an
//! encoder that writes exactly prost's bytes. `decoded_request_bytes` says what a
//! request decodes to without decoding it, for the request budget.
//!
//! prost's generated decoder goes through a generic dispatch for every field and grows
//! each Stone Game IX `stones` vector from empty; this one walks the bytes once and sizes
//! every vector exactly (`cargo bench --bench bulk`, `server/decode`). It takes only the
//! encoding every protobuf library writes: one-byte keys of known fields, a game or a
//! move at most once, packed repeated integers. Anything else (an unknown field, a field
//! given twice, unpacked integers, a bad varint or string) makes it give up, and the
//! message is decoded by prost instead, so the outcome, value or error, is always
//! prost's. The tests below and the `batch_decode` fuzz target check exactly that.

use std::marker::PhantomData;

use prost::bytes::{Buf, BufMut, BytesMut};
use prost::encoding::encoded_len_varint;
use prost::Message;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;
use tonic_prost::{ProstDecoder, ProstEncoder};

use crate::convert;
use crate::games::{GameKind, Input, InputRef, InputShape, MoveValues};
use crate::pb;

/// Default limit of one gRPC message, each way, for the server and the bulk client: room
/// for a 10^7-character Sum Game (or 8·10^6 stones) with headroom.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The generated service's and client's codec (`build.rs` names it).
#[derive(Debug, Clone, Copy)]
pub struct GrpcCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for GrpcCodec<T, U> {
    fn default() -> Self {
        GrpcCodec(PhantomData)
    }
}

impl<T, U> Codec for GrpcCodec<T, U>
where
    T: FastEncode + Send + 'static,
    U: FastDecode + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = BatchEncoder<T>;
    type Decoder = BatchDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        BatchEncoder { prost: ProstEncoder::default(), scratch: Vec::new() }
    }

    fn decoder(&mut self) -> Self::Decoder {
        BatchDecoder(ProstDecoder::default())
    }
}

/// Encodes with [`FastEncode`] when it can, with prost otherwise.
#[derive(Debug, Clone)]
pub struct BatchEncoder<T> {
    prost: ProstEncoder<T>,
    /// One message's bytes, kept for the next message of the call (up to
    /// [`SCRATCH_KEPT_BYTES`]).
    scratch: Vec<u8>,
}

impl<T: FastEncode> Encoder for BatchEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        self.scratch.clear();
        if !item.encode_fast(&mut self.scratch) {
            return self.prost.encode(item, buf);
        }
        buf.put_slice(&self.scratch);
        // A call keeps its encoder: one large answer must not pin its size for the rest
        // of a long stream.
        if self.scratch.capacity() > SCRATCH_KEPT_BYTES {
            self.scratch = Vec::new();
        }
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.prost.buffer_settings()
    }
}

/// The most scratch space an encoder keeps between messages: a bulk client's batch of
/// 1,024 answers is about 40 KiB.
const SCRATCH_KEPT_BYTES: usize = 1 << 20;

/// A message with an optional fast encoder.
pub trait FastEncode: Message {
    /// Appends the message's bytes, exactly as prost writes them, to `out` and says so;
    /// or leaves `out` alone and returns false, for prost to encode it.
    fn encode_fast(&self, _out: &mut Vec<u8>) -> bool {
        false
    }
}

impl FastEncode for pb::SolveRequest {}
impl FastEncode for pb::SolveResponse {}
impl FastEncode for pb::SolveStreamRequest {}
impl FastEncode for pb::SolveStreamResponse {}
impl FastEncode for pb::SolveBatchRequest {}
impl FastEncode for pb::SolveBatchStreamRequest {}

impl FastEncode for pb::SolveBatchResponse {
    fn encode_fast(&self, out: &mut Vec<u8>) -> bool {
        encode_solutions(&self.solutions, out);
        true
    }
}

impl FastEncode for pb::SolveBatchStreamResponse {
    fn encode_fast(&self, out: &mut Vec<u8>) -> bool {
        encode_solutions(&self.solutions, out);
        true
    }
}

/// Decodes with [`FastDecode`] when it can, with prost otherwise.
#[derive(Debug, Clone)]
pub struct BatchDecoder<U>(ProstDecoder<U>);

impl<U: FastDecode> Decoder for BatchDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        match take_fast(buf) {
            Some(message) => Ok(Some(message)),
            None => self.0.decode(buf),
        }
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

/// The message in `buf` if [`FastDecode`] takes it, consumed; else `None`, with `buf`
/// untouched.
fn take_fast<U: FastDecode>(buf: &mut impl Buf) -> Option<U> {
    let len = buf.remaining();
    // A message is one contiguous buffer once tonic has it (`DecodeBuf` over a
    // `BytesMut`); the check only keeps this correct if that ever changes.
    if buf.chunk().len() != len {
        return None;
    }
    let message = U::decode_fast(buf.chunk())?;
    buf.advance(len);
    Some(message)
}

/// A message with an optional fast decoder.
pub trait FastDecode: Message + Default {
    /// The message in `bytes`, or `None` to leave it to prost. When it is `Some`, it is
    /// what `Message::decode(bytes)` gives.
    fn decode_fast(_bytes: &[u8]) -> Option<Self> {
        None
    }
}

impl FastDecode for pb::SolveRequest {
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        let (problem, winner_only) = one_problem(bytes)?;
        Some(pb::SolveRequest { problem, winner_only })
    }
}

impl FastDecode for pb::SolveResponse {}

impl FastDecode for pb::SolveStreamRequest {
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        let (problem, winner_only) = one_problem(bytes)?;
        Some(pb::SolveStreamRequest { problem, winner_only })
    }
}

impl FastDecode for pb::SolveStreamResponse {}

impl FastDecode for pb::SolveBatchRequest {
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        let (problems, winner_only) = problems(bytes)?;
        Some(pb::SolveBatchRequest { problems, winner_only })
    }
}

impl FastDecode for pb::SolveBatchStreamRequest {
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        let (problems, winner_only) = problems(bytes)?;
        Some(pb::SolveBatchStreamRequest { problems, winner_only })
    }
}

impl FastDecode for pb::SolveBatchResponse {
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        Some(pb::SolveBatchResponse { solutions: solutions(bytes)? })
    }
}

impl FastDecode for pb::SolveBatchStreamResponse {
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        Some(pb::SolveBatchStreamResponse { solutions: solutions(bytes)? })
    }
}

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
fn encode_solutions(solutions: &[pb::Solution], out: &mut Vec<u8>) {
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

/// The field number of `kind`'s game in a `Problem`'s `oneof` (after `id`).
const fn problem_game_field(kind: GameKind) -> usize {
    kind.index() + 2
}

/// The field number of `kind`'s move in a `Move`'s `oneof`.
const fn move_game_field(kind: GameKind) -> usize {
    kind.index() + 1
}

/// The one-byte key of length-delimited field `number` (at most 15).
const fn len_key(number: usize) -> u8 {
    (number as u8) << 3 | 2
}

/// The one-byte key of varint field `number` (at most 15).
const fn varint_key(number: usize) -> u8 {
    (number as u8) << 3
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

/// Keys: a field number and wire type in one byte (`number << 3 | type`).
const VARINT_1: u8 = 1 << 3;
const LEN_1: u8 = 1 << 3 | 2;
const VARINT_2: u8 = 2 << 3;
const VARINT_3: u8 = 3 << 3;
const LEN_4: u8 = 4 << 3 | 2;
const LEN_5: u8 = 5 << 3 | 2;
const VARINT_6: u8 = 6 << 3;

/// `SolveBatchRequest` and `SolveBatchStreamRequest`: `repeated Problem problems = 1;
/// bool winner_only = 2;`.
fn problems(bytes: &[u8]) -> Option<(Vec<pb::Problem>, bool)> {
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
fn one_problem(bytes: &[u8]) -> Option<(Option<pb::Problem>, bool)> {
    let (mut problems, winner_only) = problems(bytes)?;
    // prost merges a message given twice into the first: left to it.
    if problems.len() > 1 {
        return None;
    }
    Some((problems.pop(), winner_only))
}

/// `SolveBatchResponse` and `SolveBatchStreamResponse`: `repeated Solution solutions = 1;`.
fn solutions(bytes: &[u8]) -> Option<Vec<pb::Solution>> {
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

/// The fields of a message, front to back.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    /// The next key, if there is one.
    fn key(&mut self) -> Option<u8> {
        let (&key, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(key)
    }

    /// A varint, as prost reads it: at most 10 bytes, the tenth 0 or 1.
    #[inline]
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0;
        for (i, &byte) in self.0.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                self.0 = &self.0[i + 1..];
                return (i < 9 || byte < 2).then_some(value);
            }
        }
        None
    }

    /// A length and that many bytes.
    fn len_delimited(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        let value = self.0.get(..len)?;
        self.0 = &self.0[len..];
        Some(value)
    }
}

/// What a solver request (each of the four carries its problems in field 1) holds once
/// decoded, in bytes: what [`crate::convert::problem_bytes`] counts for each problem (its
/// struct, its id, a Sum Game's characters, 8 bytes a stone or pile), read from the wire
/// without decoding. The vectors count twice in a message the fast decoder leaves to
/// prost, which grows them by doubling (for a request of `one_problem`, a second problem
/// too: prost merges it into the first); the walk stops where prost would stop.
pub(crate) fn decoded_request_bytes(message: &[u8], one_problem: bool) -> usize {
    let mut size = DecodedSize { usual: true, ..DecodedSize::default() };
    let mut fields = WireFields(message);
    let mut problems = 0;
    loop {
        match fields.next() {
            Ok(None) => break,
            Ok(Some(field)) => {
                size.usual &= field.short_key;
                match (field.number, field.value) {
                    (1, WireValue::Len(problem)) => {
                        problems += 1;
                        size.vectors += std::mem::size_of::<pb::Problem>();
                        if !size.problem(problem) {
                            break;
                        }
                    }
                    (2, WireValue::Varint) => {}
                    _ => size.usual = false,
                }
            }
            Err(_) => {
                size.usual = false;
                break;
            }
        }
    }
    if one_problem && problems > 1 {
        size.usual = false;
    }
    let slack = if size.usual { 0 } else { size.vectors };
    size.strings + size.vectors + slack
}

/// What [`decoded_request_bytes`] adds up.
#[derive(Debug, Default)]
struct DecodedSize {
    /// Ids and Sum Games: prost allocates them exactly.
    strings: usize,
    /// The problems' structs, stones and piles: prost grows these.
    vectors: usize,
    /// Whether the fast decoder takes the message, which sizes the vectors exactly.
    usual: bool,
}

impl DecodedSize {
    /// Adds a `Problem`'s input; false where prost would stop.
    fn problem(&mut self, bytes: &[u8]) -> bool {
        let mut fields = WireFields(bytes);
        let mut games = 0;
        loop {
            let field = match fields.next() {
                Ok(Some(field)) => field,
                Ok(None) => break,
                Err(_) => return false,
            };
            self.usual &= field.short_key;
            let WireValue::Len(value) = field.value else {
                self.usual = false;
                continue;
            };
            games += usize::from(field.number != 1);
            let shape = usize::try_from(field.number)
                .ok()
                .and_then(|number| number.checked_sub(problem_game_field(GameKind::ALL[0])))
                .and_then(|at| GameKind::ALL.get(at))
                .map(|kind| kind.input_shape());
            let complete = match (field.number, shape) {
                (1, _) => {
                    self.strings += value.len();
                    true
                }
                (_, Some(InputShape::Text)) => self.game(value, |size, field| match field {
                    WireValue::Len(num) => size.strings += num.len(),
                    _ => size.usual = false,
                }),
                (_, Some(InputShape::Integers)) => self.game(value, |size, field| match field {
                    // One varint ends at each byte below 0x80.
                    WireValue::Len(packed) => {
                        size.vectors += 8 * packed.iter().filter(|&&byte| byte < 0x80).count();
                    }
                    _ => {
                        size.vectors += 8;
                        size.usual = false;
                    }
                }),
                (_, Some(InputShape::Integer)) => self.game(value, |_, _| {}),
                (_, None) => {
                    self.usual = false;
                    true
                }
            };
            if !complete {
                return false;
            }
        }
        // The fast decoder takes a game once; prost merges a second into the first.
        self.usual &= games <= 1;
        true
    }

    /// Adds a game message's field 1 with `add`; the fast decoder takes that field alone,
    /// once. False where prost would stop.
    fn game(&mut self, bytes: &[u8], add: impl Fn(&mut Self, WireValue<'_>)) -> bool {
        let mut fields = WireFields(bytes);
        let mut count = 0;
        loop {
            match fields.next() {
                Ok(Some(field)) => {
                    count += 1;
                    self.usual &= field.short_key && field.number == 1;
                    if field.number == 1 {
                        add(self, field.value);
                    }
                }
                Ok(None) => break,
                Err(_) => return false,
            }
        }
        self.usual &= count <= 1;
        true
    }
}

/// A field of any message, as prost reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WireField<'a> {
    /// The field's number.
    pub(crate) number: u64,
    /// Its value.
    pub(crate) value: WireValue<'a>,
    /// Whether its key took one byte, as every key this codec's decoder takes does.
    pub(crate) short_key: bool,
}

/// A field's value: the bytes of a length-delimited one, the kind of any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireValue<'a> {
    /// A varint.
    Varint,
    /// 8 or 4 bytes.
    Fixed,
    /// Length-delimited: a string, bytes, a message or packed scalars.
    Len(&'a [u8]),
}

/// Why a walk over a message's fields stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WireError {
    /// Bytes prost refuses too.
    Malformed(&'static str),
    /// A group, which prost skips and this walk does not follow.
    Group,
}

/// The fields of any message, front to back: keys of any length and every wire type but
/// groups, as prost reads them.
pub(crate) struct WireFields<'a>(pub(crate) &'a [u8]);

impl<'a> WireFields<'a> {
    /// The next field; `None` at the end.
    #[inline]
    pub(crate) fn next(&mut self) -> Result<Option<WireField<'a>>, WireError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let before = self.0.len();
        let key = self.varint()?;
        let short_key = before - self.0.len() == 1;
        let number = key >> 3;
        if number == 0 || key > u64::from(u32::MAX) {
            return Err(WireError::Malformed("invalid field key"));
        }
        let value = match key & 7 {
            0 => self.varint().map(|_| WireValue::Varint)?,
            1 => self.skip(8).map(|()| WireValue::Fixed)?,
            2 => {
                let len =
                    usize::try_from(self.varint()?).map_err(|_| WireError::Malformed("length overflow"))?;
                let value = self.0.get(..len).ok_or(WireError::Malformed("a field runs past the end"))?;
                self.0 = &self.0[len..];
                WireValue::Len(value)
            }
            5 => self.skip(4).map(|()| WireValue::Fixed)?,
            3 | 4 => return Err(WireError::Group),
            _ => return Err(WireError::Malformed("invalid wire type")),
        };
        Ok(Some(WireField { number, value, short_key }))
    }

    /// A varint as prost reads it: at most 10 bytes, the tenth 0 or 1.
    #[inline]
    fn varint(&mut self) -> Result<u64, WireError> {
        // Keys, lengths and flags: almost every varint of a batch is one byte.
        if let Some((&byte, rest)) = self.0.split_first() {
            if byte < 0x80 {
                self.0 = rest;
                return Ok(u64::from(byte));
            }
        }
        let mut fields = Fields(self.0);
        let value = fields.varint().ok_or(WireError::Malformed("invalid varint"))?;
        self.0 = fields.0;
        Ok(value)
    }

    fn skip(&mut self, len: usize) -> Result<(), WireError> {
        self.0 = self.0.get(len..).ok_or(WireError::Malformed("a field runs past the end"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::problem::Game as G;
    use proptest::prelude::*;

    const LEN_3: u8 = 3 << 3 | 2;

    /// Any input of `shape`.
    fn input(shape: InputShape) -> BoxedStrategy<Input> {
        match shape {
            InputShape::Text => ".{0,12}".prop_map(Input::Text).boxed(),
            InputShape::Integer => any::<u64>().prop_map(Input::Integer).boxed(),
            InputShape::Integers => {
                proptest::collection::vec(any::<u64>(), 0..20).prop_map(Input::Integers).boxed()
            }
        }
    }

    /// Any game's problem, or none.
    fn game() -> impl Strategy<Value = Option<G>> {
        let game = proptest::sample::select(GameKind::ALL.to_vec()).prop_flat_map(|kind| {
            input(kind.input_shape())
                .prop_map(move |input| G::from(kind.with_input(input).expect("its shape")))
        });
        proptest::option::weighted(0.8, game)
    }

    fn problem() -> impl Strategy<Value = pb::Problem> {
        (".{0,8}", game()).prop_map(|(id, game)| pb::Problem { id, game })
    }

    /// Any game's move with any values (a `uint32` field's kept to its low 32 bits), a
    /// move without a game, or none.
    fn winning_move() -> impl Strategy<Value = Option<pb::Move>> {
        let values = any::<MoveValues>();
        let game =
            (proptest::sample::select(GameKind::ALL.to_vec()), values).prop_map(|(kind, mut values)| {
                values[kind.move_fields().len()..].fill(0);
                convert::wire_move(kind, values)
            });
        proptest::option::of(proptest::option::weighted(0.8, game).prop_map(|game| pb::Move { game }))
    }

    fn error() -> impl Strategy<Value = Option<Box<pb::SolutionError>>> {
        proptest::option::of(
            (any::<i32>(), ".{0,8}", proptest::collection::btree_map(".{0,4}", ".{0,4}", 0..3)).prop_map(
                |(code, message, metadata)| {
                    Box::new(pb::SolutionError { code, message, metadata, ..Default::default() })
                },
            ),
        )
    }

    fn solution() -> impl Strategy<Value = pb::Solution> {
        (".{0,8}", any::<bool>(), any::<i32>(), winning_move(), error(), proptest::option::of(any::<u32>()))
            .prop_map(|(id, alice_wins, winner, winning_move, error, nim_value)| pb::Solution {
                id,
                alice_wins,
                winner,
                winning_move,
                error,
                nim_value,
            })
    }

    /// `bytes` decoded both ways: when the fast decoder answers, prost must agree.
    fn check<M: FastDecode + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<M> {
        let fast = M::decode_fast(bytes);
        if let Some(fast) = &fast {
            assert_eq!(&M::decode(bytes).expect("prost decodes what the fast decoder does"), fast);
        }
        fast
    }

    /// `bytes` as each request, decoded both ways; what prost decodes holds at most what
    /// [`decoded_request_bytes`] says, and exactly that when the fast decoder takes it.
    fn check_requests(bytes: &[u8]) {
        let counted =
            |problems: &[pb::Problem]| problems.iter().map(crate::convert::problem_bytes).sum::<usize>();
        let fast = check::<pb::SolveBatchStreamRequest>(bytes);
        if let Ok(decoded) = pb::SolveBatchStreamRequest::decode(bytes) {
            let counted = counted(&decoded.problems);
            match fast {
                Some(_) => assert_eq!(decoded_request_bytes(bytes, false), counted),
                None => assert!(decoded_request_bytes(bytes, false) >= counted),
            }
        }
        let fast = check::<pb::SolveRequest>(bytes);
        check::<pb::SolveStreamRequest>(bytes);
        if let Ok(decoded) = pb::SolveRequest::decode(bytes) {
            let counted = counted(decoded.problem.as_slice());
            match fast {
                Some(_) => assert_eq!(decoded_request_bytes(bytes, true), counted),
                None => assert!(decoded_request_bytes(bytes, true) >= counted),
            }
        }
    }

    #[test]
    fn a_stone_or_a_pile_is_charged_8_bytes_decoded_whatever_its_wire_size() {
        let problem = |game| pb::Problem { id: "s".into(), game: Some(game) };
        let base = std::mem::size_of::<pb::Problem>() + 1;
        for stones in [vec![1; 1000], vec![u64::MAX; 1000]] {
            let ix = problem(G::StoneGameIx(pb::StoneGameIx { stones: stones.clone() }));
            let nim = problem(G::NimSquare(pb::NimSquare { piles: stones }));
            for problem in [ix, nim] {
                let bytes = pb::SolveRequest { problem: Some(problem), winner_only: false }.encode_to_vec();
                assert_eq!(decoded_request_bytes(&bytes, true), base + 8000);
                // Two problems in a one-problem request: prost merges them, growing the
                // vectors by doubling, which count twice.
                let twice = [bytes.clone(), bytes].concat();
                assert_eq!(decoded_request_bytes(&twice, true), 2 + 2 * 2 * (base - 1 + 8000));
                assert_eq!(decoded_request_bytes(&twice, false), 2 * (base + 8000));
            }
        }
        // Unpacked stones, which prost takes and grows: twice.
        let unpacked = [LEN_1, 9, LEN_1, 1, b's', LEN_3, 4, VARINT_1, 7, VARINT_1, 9];
        assert_eq!(decoded_request_bytes(&unpacked, false), 1 + 2 * (base - 1 + 16));
    }

    proptest! {
        #[test]
        fn requests_prost_writes_decode_fast_and_alike(
            problems in proptest::collection::vec(problem(), 0..20),
            winner_only: bool,
        ) {
            let request = pb::SolveBatchStreamRequest { problems: problems.clone(), winner_only };
            let bytes = request.encode_to_vec();
            prop_assert_eq!(check::<pb::SolveBatchStreamRequest>(&bytes), Some(request));
            let request = pb::SolveBatchRequest { problems: problems.clone(), winner_only };
            prop_assert_eq!(check::<pb::SolveBatchRequest>(&bytes), Some(request));
            // What they decode to, read from the wire: what a stream's admission counts.
            let counted: usize = problems.iter().map(crate::convert::problem_bytes).sum();
            prop_assert_eq!(decoded_request_bytes(&bytes, false), counted);
            let problem = problems.into_iter().next();
            let request = pb::SolveRequest { problem: problem.clone(), winner_only };
            let bytes = request.encode_to_vec();
            prop_assert_eq!(check::<pb::SolveRequest>(&bytes), Some(request));
            let request = pb::SolveStreamRequest { problem: problem.clone(), winner_only };
            prop_assert_eq!(check::<pb::SolveStreamRequest>(&bytes), Some(request));
            prop_assert_eq!(decoded_request_bytes(&bytes, true), problem.as_ref().map_or(0, crate::convert::problem_bytes));
        }

        #[test]
        fn responses_prost_writes_decode_fast_and_alike(solutions in proptest::collection::vec(solution(), 0..20)) {
            let response = pb::SolveBatchStreamResponse { solutions: solutions.clone() };
            let bytes = response.encode_to_vec();
            prop_assert_eq!(check::<pb::SolveBatchStreamResponse>(&bytes), Some(response));
            prop_assert_eq!(check::<pb::SolveBatchResponse>(&bytes), Some(pb::SolveBatchResponse { solutions }));
        }

        #[test]
        fn damaged_messages_decode_as_prost_decodes_them(
            problems in proptest::collection::vec(problem(), 1..6),
            solutions in proptest::collection::vec(solution(), 1..6),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            for mut bytes in [
                pb::SolveBatchStreamRequest { problems, winner_only: true }.encode_to_vec(),
                pb::SolveBatchStreamResponse { solutions }.encode_to_vec(),
            ] {
                for (at, byte) in &edits {
                    let at = at.index(bytes.len());
                    bytes[at] = *byte;
                }
                check_requests(&bytes);
                check::<pb::SolveBatchStreamResponse>(&bytes);
                let cut = &bytes[..cut.index(bytes.len())];
                check_requests(cut);
                check::<pb::SolveBatchStreamResponse>(cut);
            }
        }

        #[test]
        fn any_bytes_decode_as_prost_decodes_them(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            check_requests(&bytes);
            check::<pb::SolveBatchStreamResponse>(&bytes);
        }
    }

    proptest! {
        #[test]
        fn problems_are_encoded_as_prost_encodes_them(problems in proptest::collection::vec(problem(), 0..20)) {
            let mut out = BytesMut::new();
            for problem in &problems {
                encode_problem_element(problem, &mut out);
            }
            let expected = pb::SolveBatchStreamRequest { problems, winner_only: false }.encode_to_vec();
            prop_assert_eq!(out.as_ref(), expected.as_slice());
        }
    }

    proptest! {
        #[test]
        fn solutions_are_encoded_as_prost_encodes_them(solutions in proptest::collection::vec(solution(), 0..20)) {
            let response = pb::SolveBatchStreamResponse { solutions };
            let mut out = vec![7];
            prop_assert!(response.encode_fast(&mut out));
            let expected = response.encode_to_vec();
            prop_assert_eq!(&out[1..], expected.as_slice());
        }
    }

    #[test]
    fn defaults_are_left_out_as_prost_leaves_them_out() {
        let problems = [
            pb::Problem::default(),
            pb::Problem { id: String::new(), game: Some(G::SumGame(pb::SumGame::default())) },
            pb::Problem { id: "a".into(), game: Some(G::StoneGameIx(pb::StoneGameIx::default())) },
            pb::Problem { id: "b".into(), game: Some(G::StoneGameIv(pb::StoneGameIv { n: 0 })) },
            pb::Problem {
                id: "c".into(),
                game: Some(G::StoneGameIx(pb::StoneGameIx { stones: vec![0, u64::MAX] })),
            },
        ];
        for problem in problems {
            let mut out = BytesMut::new();
            encode_problem_element(&problem, &mut out);
            let expected =
                pb::SolveBatchStreamRequest { problems: vec![problem], winner_only: false }.encode_to_vec();
            assert_eq!(out.as_ref(), expected.as_slice());
        }
    }

    #[test]
    fn what_prost_must_decide_is_left_to_it() {
        let decodes_fast = |bytes: &[u8]| pb::SolveBatchStreamRequest::decode_fast(bytes).is_some();
        // An unknown field, skipped by prost.
        assert!(!decodes_fast(&[0x18, 1]));
        // A game given twice: prost merges the second into the first.
        assert!(!decodes_fast(&[LEN_1, 8, LEN_3, 2, LEN_1, 0, LEN_3, 2, LEN_1, 0]));
        // Unpacked stones, which prost takes too.
        assert!(!decodes_fast(&[LEN_1, 4, LEN_3, 2, VARINT_1, 7]));
        // An 11-byte varint and a tenth byte above 1, which prost refuses.
        assert!(!decodes_fast(&[VARINT_2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0]));
        assert!(!decodes_fast(&[VARINT_2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 2]));
        // A length past the end, and an id that is not UTF-8.
        assert!(!decodes_fast(&[LEN_1, 9, LEN_1, 0]));
        assert!(!decodes_fast(&[LEN_1, 3, LEN_1, 1, 0xff]));
        // What every library writes, with the tenth varint byte at its largest.
        assert!(decodes_fast(&[VARINT_2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]));
        assert!(decodes_fast(&[LEN_1, 5, LEN_1, 1, b'a', LEN_4, 0]));
        assert!(decodes_fast(&[LEN_1, 7, LEN_1, 1, b'a', LEN_4, 2, VARINT_1, 5]));
    }

    #[test]
    fn a_message_left_to_prost_is_not_consumed() {
        let mut buf: &[u8] = &[0x18, 1, VARINT_2, 1];
        assert_eq!(take_fast::<pb::SolveBatchStreamRequest>(&mut buf), None);
        assert_eq!(buf.len(), 4);
        let mut buf: &[u8] = &[VARINT_2, 1];
        let request = take_fast::<pb::SolveBatchStreamRequest>(&mut buf);
        assert_eq!(request, Some(pb::SolveBatchStreamRequest { problems: vec![], winner_only: true }));
        assert!(buf.is_empty());
    }
}

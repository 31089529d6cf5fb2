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
//! prost's. The tests (`tests.rs`) and the `batch_decode` fuzz target check exactly that.
//!
//! # Layout
//! This file is tonic's side: the codec, its encoder and decoder, and which messages take
//! the fast path (`FastEncode`, `FastDecode`). `encode` writes problems and solutions,
//! `decode` reads them, `decoded_size` says what a request decodes to, and `wire` holds
//! what they share: the keys and field numbers of the contract, and the field walks.
//! `flight` is the Flight door's `DoExchange` codec, whose answers' bodies are copied
//! into the frame in their pieces.

use std::marker::PhantomData;

use prost::bytes::{Buf, BufMut};
use prost::Message;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::Status;
use tonic_prost::{ProstDecoder, ProstEncoder};

use crate::pb;
use decode::{one_problem, problems, solutions};
use encode::encode_solutions;

mod decode;
mod decoded_size;
mod encode;
mod flight;
mod wire;

pub(crate) use decoded_size::decoded_request_bytes;
pub use encode::encode_problem_element;
pub use flight::{encoded_len as flight_message_len, FlightCodec};
pub(crate) use wire::{WireError, WireField, WireFields, WireValue};

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

#[cfg(test)]
mod tests;

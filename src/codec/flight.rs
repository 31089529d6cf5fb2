//! The Flight door's codec for `DoExchange`: requests are `FlightData` read by prost, and
//! answers are [`FlightMessage`]s, written as prost writes a `FlightData` of the same
//! header and body, but with the body's pieces (the answer arrays' own buffers) copied
//! straight into tonic's frame. Through prost the body was copied twice before the socket:
//! into one `Bytes` by the IPC encoder, then into the frame (docs/performance.md).

use prost::bytes::BufMut;
use prost::encoding::{encode_key, encode_varint, encoded_len_varint, key_len, WireType};
use tonic::codec::{BufferSettings, Codec, EncodeBuf, Encoder};
use tonic::Status;
use tonic_prost::ProstDecoder;

use arrow_flight::FlightData;

use crate::columnar::FlightMessage;

/// `FlightData.data_header`'s field number.
const DATA_HEADER: u32 = 2;
/// `FlightData.data_body`'s field number.
const DATA_BODY: u32 = 1000;

/// `DoExchange`'s codec on the server: [`FlightMessage`]s out, `FlightData` in.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlightCodec;

impl Codec for FlightCodec {
    type Encode = FlightMessage;
    type Decode = FlightData;
    type Encoder = FlightMessageEncoder;
    type Decoder = ProstDecoder<FlightData>;

    fn encoder(&mut self) -> Self::Encoder {
        FlightMessageEncoder
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstDecoder::new(BufferSettings::default())
    }
}

/// Writes a [`FlightMessage`] as the `FlightData` it stands for.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlightMessageEncoder;

impl Encoder for FlightMessageEncoder {
    type Item = FlightMessage;
    type Error = Status;

    fn encode(&mut self, item: FlightMessage, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        write_message(&item, dst);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}

/// Writes `message` to `dst` as prost writes its `FlightData`: fields in field-number
/// order, empty ones left out.
fn write_message(message: &FlightMessage, dst: &mut impl BufMut) {
    if !message.header.is_empty() {
        encode_key(DATA_HEADER, WireType::LengthDelimited, dst);
        encode_varint(message.header.len() as u64, dst);
        dst.put_slice(&message.header);
    }
    if message.body_len > 0 {
        encode_key(DATA_BODY, WireType::LengthDelimited, dst);
        encode_varint(message.body_len as u64, dst);
        for piece in &message.body {
            dst.put_slice(piece.as_slice());
        }
    }
}

/// The bytes `message` takes encoded, as prost's `encoded_len` of its `FlightData`.
pub fn encoded_len(message: &FlightMessage) -> usize {
    let field = |number: u32, len: usize| match len {
        0 => 0,
        len => key_len(number) + encoded_len_varint(len as u64) + len,
    };
    field(DATA_HEADER, message.header.len()) + field(DATA_BODY, message.body_len)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BooleanArray, RecordBatch, StringArray, UInt64Array};
    use prost::Message;

    use super::*;
    use crate::columnar::BatchEncoder;

    /// The bytes the encoder writes of `message` (tonic's `EncodeBuf` is tonic's to make).
    fn encoded(message: &FlightMessage) -> Vec<u8> {
        let mut buf = Vec::new();
        write_message(message, &mut buf);
        buf
    }

    #[test]
    fn a_message_is_written_as_prost_writes_its_flight_data() {
        let n: ArrayRef = Arc::new(UInt64Array::from(vec![Some(7), None, Some(1 << 40)]));
        let wins: ArrayRef = Arc::new(BooleanArray::from(vec![true, false, true]));
        let nulls: ArrayRef = Arc::new(StringArray::new_null(3));
        let batch = RecordBatch::try_from_iter([("n", n), ("alice_wins", wins), ("error", nulls)]).unwrap();
        let mut encoder = BatchEncoder::default();
        let empty = FlightMessage::default();
        for message in encoder.messages(&batch).unwrap().into_iter().chain([empty]) {
            let data = message.clone().into_flight_data();
            assert_eq!(encoded_len(&message), data.encoded_len());
            assert_eq!(encoded(&message), data.encode_to_vec());
        }
    }
}

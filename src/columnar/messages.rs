//! Record batches as Flight messages, as both ends of an exchange send them: one record
//! batch message a batch, never split, after a schema message (first, and again whenever
//! the schema changes) and any dictionaries.
//!
//! arrow-flight's own encoder splits batches to fit a message size and copies every
//! batch's buffers into one body; here a batch must stay one message (each answers one
//! request), and a message's body is the list of the batch's own buffers and their
//! padding ([`FlightMessage`]), as arrow-ipc's `StreamEncoder` lays them out, so that the
//! server's codec copies them once, straight into the gRPC frame (`codec::flight`).

use arrow_array::RecordBatch;
use arrow_buffer::Buffer;
use arrow_flight::FlightData;
use arrow_ipc::writer::StreamEncoder;
use arrow_schema::{ArrowError, SchemaRef};
use bytes::Bytes;

/// One Flight message of an exchange's answers: its IPC header (the flatbuffer, as
/// `FlightData.data_header`) and its body as the buffers that make it up, in order
/// (`FlightData.data_body` once concatenated); no descriptor and no app metadata.
#[derive(Debug, Clone, Default)]
pub struct FlightMessage {
    /// The IPC message's flatbuffer.
    pub header: Bytes,
    /// The body's pieces: the arrays' buffers where they lie, and their padding.
    pub body: Vec<Buffer>,
    /// The body's length: the pieces' lengths added up.
    pub body_len: usize,
}

impl FlightMessage {
    /// The message as one `FlightData`, its body copied into one buffer (none when it is
    /// one piece or none).
    pub fn into_flight_data(self) -> FlightData {
        let data_body = match self.body.as_slice() {
            [] => Bytes::new(),
            [one] => Bytes::from(one.clone()),
            pieces => {
                let mut body = Vec::with_capacity(self.body_len);
                for piece in pieces {
                    body.extend_from_slice(piece.as_slice());
                }
                Bytes::from(body)
            }
        };
        FlightData { data_header: self.header, data_body, ..FlightData::default() }
    }
}

/// Encodes a stream's batches, one after another.
#[derive(Default)]
pub struct BatchEncoder {
    /// The IPC stream of the current schema: a new one when the schema changes, whose
    /// first batch brings the schema message (and its dictionaries) again.
    stream: Option<(SchemaRef, StreamEncoder)>,
}

impl std::fmt::Debug for BatchEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchEncoder")
            .field("schema", &self.stream.as_ref().map(|(schema, _)| schema))
            .finish()
    }
}

impl BatchEncoder {
    /// The messages that carry `batch`: a schema message when its schema is not the
    /// previous batch's, its dictionaries, and one record batch message, last.
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<Vec<FlightData>, ArrowError> {
        Ok(self.messages(batch)?.into_iter().map(FlightMessage::into_flight_data).collect())
    }

    /// [`BatchEncoder::encode`]'s messages with their bodies in pieces, nothing copied.
    pub fn messages(&mut self, batch: &RecordBatch) -> Result<Vec<FlightMessage>, ArrowError> {
        let schema = batch.schema();
        let stream = match &mut self.stream {
            Some((known, stream)) if *known == schema => stream,
            slot => &mut slot.insert((schema.clone(), StreamEncoder::try_new(&schema)?)).1,
        };
        split_stream(stream.encode(batch)?)
    }
}

/// The IPC stream's pieces as `StreamEncoder` writes them, a message at a time: an 8-byte
/// prefix (the continuation marker and the metadata's padded length), the flatbuffer as
/// one piece, its padding, then the body's pieces (`bodyLength` bytes). The flatbuffer is
/// taken as its own piece rather than cut from the padded metadata, whose zero padding
/// cannot be told from the flatbuffer's own zeros; a writer that laid the stream out
/// otherwise is an error, never a wrong message (the tests hold the messages to
/// arrow's `IpcDataGenerator`'s, byte for byte).
fn split_stream(pieces: Vec<Buffer>) -> Result<Vec<FlightMessage>, ArrowError> {
    let framing = |what: &str| ArrowError::IpcError(format!("unexpected IPC stream framing: {what}"));
    // An empty buffer (a column's values when every row is null) is written as a piece.
    let mut pieces = pieces.into_iter().filter(|piece| !piece.is_empty());
    let mut messages = Vec::with_capacity(2);
    while let Some(prefix) = pieces.next() {
        let Some((&[0xFF, 0xFF, 0xFF, 0xFF], len)) = prefix.as_slice().split_first_chunk::<4>() else {
            return Err(framing("no continuation marker"));
        };
        let metadata = len.try_into().map(i32::from_le_bytes).map_err(|_| framing("a short prefix"))?;
        let metadata = usize::try_from(metadata).map_err(|_| framing("a negative metadata length"))?;
        let header = pieces.next().ok_or_else(|| framing("no metadata"))?;
        let mut taken = header.len();
        while taken < metadata {
            taken += pieces.next().ok_or_else(|| framing("short metadata"))?.len();
        }
        if taken != metadata || header.is_empty() {
            return Err(framing("metadata pieces that do not add up"));
        }
        let body_len = arrow_ipc::root_as_message(header.as_slice())
            .map_err(|err| framing(&err.to_string()))?
            .bodyLength();
        let body_len = usize::try_from(body_len).map_err(|_| framing("a negative body length"))?;
        let mut body = Vec::new();
        let mut taken = 0;
        while taken < body_len {
            let piece = pieces.next().ok_or_else(|| framing("a short body"))?;
            taken += piece.len();
            body.push(piece);
        }
        if taken != body_len {
            return Err(framing("body pieces that do not add up"));
        }
        messages.push(FlightMessage { header: Bytes::from(header), body, body_len });
    }
    Ok(messages)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, StringArray, UInt64Array};
    use arrow_flight::decode::{DecodedPayload, FlightDataDecoder};
    use futures::TryStreamExt;

    use super::*;

    fn batch(name: &str, rows: u64) -> RecordBatch {
        let column: ArrayRef = Arc::new(UInt64Array::from_iter_values(0..rows));
        RecordBatch::try_from_iter([(name, column)]).unwrap()
    }

    #[tokio::test]
    async fn batches_decode_as_sent_each_in_one_message_and_the_schema_again_when_it_changes() {
        let ids: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        let sliced = RecordBatch::try_from_iter([("id", ids)]).unwrap().slice(1, 2);
        let sent = [batch("n", 100_000), batch("n", 3), batch("n", 0), batch("m", 2), sliced];
        let mut encoder = BatchEncoder::default();
        let mut messages = Vec::new();
        let mut counts = Vec::new();
        for batch in &sent {
            let encoded = encoder.encode(batch).unwrap();
            counts.push(encoded.len());
            messages.extend(encoded);
        }
        assert_eq!(counts, [2, 1, 1, 2, 2]);
        let decoded: Vec<RecordBatch> =
            FlightDataDecoder::new(futures::stream::iter(messages.into_iter().map(Ok)))
                .try_filter_map(|data| async move {
                    Ok(match data.payload {
                        DecodedPayload::RecordBatch(batch) => Some(batch),
                        _ => None,
                    })
                })
                .try_collect()
                .await
                .unwrap();
        assert_eq!(decoded, sent);
    }
}

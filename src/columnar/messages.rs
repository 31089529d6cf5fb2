//! Record batches as Flight messages, as both ends of an exchange send them: one record
//! batch message a batch, never split, after a schema message (first, and again whenever
//! the schema changes) and any dictionaries.
//!
//! arrow-flight's own encoder splits batches to fit a message size and starts every
//! batch's body from an empty buffer; here a batch must stay one message (each answers
//! one request), and the body's buffer is sized from the batch before (the IPC context's
//! reserved scratch), so that a body is allocated once instead of grown by doubling.

use arrow_array::RecordBatch;
use arrow_flight::FlightData;
use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};
use arrow_schema::{ArrowError, SchemaRef};

/// Encodes a stream's batches, one after another.
pub struct BatchEncoder {
    generator: IpcDataGenerator,
    dictionaries: DictionaryTracker,
    options: IpcWriteOptions,
    context: IpcWriteContext,
    schema: Option<SchemaRef>,
}

impl Default for BatchEncoder {
    fn default() -> Self {
        let mut context = IpcWriteContext::default();
        context.set_reserve_scratch(true);
        BatchEncoder {
            generator: IpcDataGenerator::default(),
            dictionaries: DictionaryTracker::new(false),
            options: IpcWriteOptions::default(),
            context,
            schema: None,
        }
    }
}

impl std::fmt::Debug for BatchEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchEncoder").field("schema", &self.schema).finish_non_exhaustive()
    }
}

impl BatchEncoder {
    /// The messages that carry `batch`: a schema message when its schema is not the
    /// previous batch's, its dictionaries, and one record batch message, last.
    pub fn encode(&mut self, batch: &RecordBatch) -> Result<Vec<FlightData>, ArrowError> {
        let mut messages = Vec::with_capacity(2);
        if self.schema.as_deref() != Some(batch.schema_ref().as_ref()) {
            self.dictionaries.clear();
            let schema = self.generator.schema_to_bytes_with_dictionary_tracker(
                batch.schema_ref(),
                &mut self.dictionaries,
                &self.options,
            );
            messages.push(FlightData::from(schema));
            self.schema = Some(batch.schema());
        }
        let (dictionaries, data) =
            self.generator.encode(batch, &mut self.dictionaries, &self.options, &mut self.context)?;
        messages.extend(dictionaries.into_iter().map(FlightData::from));
        messages.push(FlightData::from(data));
        Ok(messages)
    }
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

//! Messages written field by field, whatever their values: what arrow's writer never
//! makes, for the tests and the fuzz seeds.

use arrow_ipc::{BodyCompressionMethod, CompressionType, FieldNode, MessageHeader, MetadataVersion};
use arrow_schema::Schema;

/// A record batch or dictionary message written field by field, whatever its values, as
/// a broken or hostile writer might: for the tests and the fuzz seeds that need messages
/// arrow's writer never makes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawBatch {
    /// The row count (a dictionary's value count).
    pub rows: i64,
    /// Each field node's length and null count.
    pub nodes: Vec<(i64, i64)>,
    /// Each buffer's offset and length in the body.
    pub buffers: Vec<(i64, i64)>,
    /// The view columns' counts of data buffers.
    pub variadic: Vec<i64>,
    /// The body's compression: LZ4 frame or zstd.
    pub compression: Option<CompressionType>,
    /// Written as a dictionary of this id (and delta or not) rather than a record batch.
    pub dictionary: Option<(i64, bool)>,
}

impl RawBatch {
    /// The message's flatbuffer, declaring a body of `body_length` bytes.
    pub fn header(&self, body_length: i64) -> Vec<u8> {
        let mut fbb = flatbuffers::FlatBufferBuilder::new();
        let nodes: Vec<FieldNode> =
            self.nodes.iter().map(|&(len, nulls)| FieldNode::new(len, nulls)).collect();
        let buffers: Vec<arrow_ipc::Buffer> =
            self.buffers.iter().map(|&(offset, len)| arrow_ipc::Buffer::new(offset, len)).collect();
        let nodes = fbb.create_vector(&nodes);
        let buffers = fbb.create_vector(&buffers);
        let variadic = (!self.variadic.is_empty()).then(|| fbb.create_vector(&self.variadic));
        let compression = self.compression.map(|codec| {
            let mut compression = arrow_ipc::BodyCompressionBuilder::new(&mut fbb);
            compression.add_codec(codec);
            compression.add_method(BodyCompressionMethod::BUFFER);
            compression.finish()
        });
        let mut batch = arrow_ipc::RecordBatchBuilder::new(&mut fbb);
        batch.add_length(self.rows);
        batch.add_nodes(nodes);
        batch.add_buffers(buffers);
        if let Some(variadic) = variadic {
            batch.add_variadicBufferCounts(variadic);
        }
        if let Some(compression) = compression {
            batch.add_compression(compression);
        }
        let batch = batch.finish();
        let (kind, header) = match self.dictionary {
            None => (MessageHeader::RecordBatch, batch.as_union_value()),
            Some((id, delta)) => {
                let mut dictionary = arrow_ipc::DictionaryBatchBuilder::new(&mut fbb);
                dictionary.add_id(id);
                dictionary.add_data(batch);
                dictionary.add_isDelta(delta);
                (MessageHeader::DictionaryBatch, dictionary.finish().as_union_value())
            }
        };
        let mut message = arrow_ipc::MessageBuilder::new(&mut fbb);
        message.add_version(MetadataVersion::V5);
        message.add_header_type(kind);
        message.add_header(header);
        message.add_bodyLength(body_length);
        let message = message.finish();
        fbb.finish(message, None);
        fbb.finished_data().to_vec()
    }
}

/// The schema message of `schema`, as arrow's writer makes it (dictionary ids assigned).
pub fn schema_message(schema: &Schema) -> Vec<u8> {
    let generator = arrow_ipc::writer::IpcDataGenerator::default();
    let mut tracker = arrow_ipc::writer::DictionaryTracker::new(false);
    let options = arrow_ipc::writer::IpcWriteOptions::default();
    generator.schema_to_bytes_with_dictionary_tracker(schema, &mut tracker, &options).ipc_message
}

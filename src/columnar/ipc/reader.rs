//! A stream's reader: its schema and dictionaries, and the checks every message passes
//! (its flatbuffer, kind, version, body, rows and dictionaries) before arrow-ipc decodes it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::Buffer;
use arrow_ipc::reader::RecordBatchDecoder;
use arrow_ipc::{Endianness, MessageHeader, MetadataVersion};
use arrow_schema::{Field, Schema, SchemaRef};

use super::error::{missing, IpcError};
use super::layout::{dictionary_ids, dictionary_value_type, shape_of, Shape};
use super::limits::IpcLimits;
use super::walk::Walk;

/// What decoding a checked message takes, for the caller to charge before it is decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Claim {
    /// Bytes the decoded message holds: its body (which its arrays share), the copies
    /// arrow-ipc makes of the buffers not aligned for their type where they lie, and what
    /// its compressed buffers claim inflated; for a delta dictionary, the dictionary it is
    /// appended to too (they are concatenated into a new one).
    pub bytes: usize,
    /// A record batch's rows (0 for any other message), for what the caller sizes by them.
    pub rows: usize,
    /// What a dictionary holds once it is read, for as long as the stream keeps it (0 for
    /// any other message).
    pub held: usize,
}

/// A message read.
#[derive(Debug)]
pub enum Decoded {
    /// A schema: the batches after it are read with it, and the dictionaries before it are
    /// gone.
    Schema(SchemaRef),
    /// A dictionary, now held for the batches that follow.
    Dictionary,
    /// A record batch of the schema (projected, when the reader projects).
    Batch(RecordBatch),
}

/// A stream's reader: its schema and dictionaries, and the checks every message passes.
#[derive(Debug)]
pub struct IpcReader {
    limits: IpcLimits,
    schema: Option<KnownSchema>,
    projection: Option<Vec<usize>>,
    dictionaries: HashMap<i64, ArrayRef>,
    /// What each dictionary held claimed.
    dictionary_claims: HashMap<i64, usize>,
}

/// A schema as the reader keeps it, with what its batches must hold.
#[derive(Debug)]
struct KnownSchema {
    schema: SchemaRef,
    /// Field nodes and buffers (view types' variadic buffers aside) a batch holds, and
    /// its view columns (a variadic buffer count each).
    shape: Shape,
    /// The dictionaries the projected columns read; `None`: every dictionary.
    dictionaries_read: Option<HashSet<i64>>,
}

impl IpcReader {
    /// A reader of a stream whose first message is its schema.
    pub fn new(limits: IpcLimits) -> Self {
        IpcReader {
            limits,
            schema: None,
            projection: None,
            dictionaries: HashMap::new(),
            dictionary_claims: HashMap::new(),
        }
    }

    /// Reads only the columns at `projection` of every batch, and only their
    /// dictionaries; set before any dictionary is read.
    pub fn set_projection(&mut self, projection: Vec<usize>) -> Result<(), IpcError> {
        self.projection = Some(projection);
        if let Some(known) = &self.schema {
            let schema = Arc::clone(&known.schema);
            self.set_schema(Arc::unwrap_or_clone(schema))?;
        }
        Ok(())
    }

    /// The limits in force.
    pub fn limits(&self) -> IpcLimits {
        self.limits
    }

    /// The schema of the stream, once read (whole, not projected).
    pub fn schema(&self) -> Option<&SchemaRef> {
        self.schema.as_ref().map(|read| &read.schema)
    }

    /// The bytes the dictionaries held now claimed.
    pub fn dictionary_bytes(&self) -> usize {
        self.dictionary_claims.values().sum()
    }

    /// Takes `schema` as the stream's (a file's, from its footer), as a schema message
    /// would.
    pub fn set_schema(&mut self, schema: Schema) -> Result<SchemaRef, IpcError> {
        let schema = Arc::new(schema);
        let mut shape = Shape::default();
        for field in schema.fields() {
            shape_of(field.data_type(), &mut shape);
        }
        let dictionaries_read = match &self.projection {
            None => None,
            Some(projection) => {
                let mut ids = HashSet::new();
                for &index in projection {
                    let field = schema.fields().get(index).ok_or_else(|| {
                        IpcError::Unsupported(format!(
                            "column {index} is projected, but the schema has {} columns",
                            schema.fields().len()
                        ))
                    })?;
                    dictionary_ids(field, &mut ids);
                }
                Some(ids)
            }
        };
        self.dictionaries.clear();
        self.dictionary_claims.clear();
        self.schema = Some(KnownSchema { schema: Arc::clone(&schema), shape, dictionaries_read });
        Ok(schema)
    }

    /// The body a message's `header` declares, checked against the limit before any of it
    /// is read.
    pub fn declared_body(&self, header: &[u8]) -> Result<usize, IpcError> {
        let declared = parse(header)?.bodyLength();
        let limit = self.limits.message_bytes;
        match usize::try_from(declared) {
            Ok(body) if body <= limit => Ok(body),
            Ok(body) => Err(IpcError::BodyTooLarge { body: body as u64, limit }),
            Err(_) => Err(IpcError::Body { declared, carried: 0 }),
        }
    }

    /// Checks the message of `header` (its flatbuffer, without a length prefix) and
    /// `body`, and says what decoding it takes; nothing is decoded or held.
    pub fn check(&self, header: &[u8], body: &[u8]) -> Result<Claim, IpcError> {
        let message = parse(header)?;
        self.check_message(&message, body).map(|(claim, _)| claim)
    }

    /// Reads the message of `header` and `body`: checks it as [`IpcReader::check`] does,
    /// then decodes it with arrow-ipc, which copies only the buffers not aligned for their
    /// type where they lie (as [`Claim::bytes`] counts them; a body a gRPC message carries
    /// lies wherever its frame put it). Checked and read, `body` must be the same bytes at
    /// the same address, so that the claim is what decoding takes.
    pub fn read(&mut self, header: &[u8], body: Buffer) -> Result<Decoded, IpcError> {
        let message = parse(header)?;
        let (claim, skip) = self.check_message(&message, &body)?;
        let version = message.version();
        match message.header_type() {
            MessageHeader::Schema => {
                let schema = message.header_as_schema().ok_or_else(|| missing("schema"))?;
                let schema = arrow_ipc::convert::try_fb_to_schema(schema)?;
                Ok(Decoded::Schema(self.set_schema(schema)?))
            }
            MessageHeader::DictionaryBatch => {
                let dictionary =
                    message.header_as_dictionary_batch().ok_or_else(|| missing("dictionary batch"))?;
                if skip {
                    return Ok(Decoded::Dictionary);
                }
                let Some(read) = &self.schema else { return Err(before_schema()) };
                arrow_ipc::reader::read_dictionary(
                    &body,
                    dictionary,
                    &read.schema,
                    &mut self.dictionaries,
                    &version,
                )?;
                self.dictionary_claims.insert(dictionary.id(), claim.held);
                Ok(Decoded::Dictionary)
            }
            MessageHeader::RecordBatch => {
                let batch = message.header_as_record_batch().ok_or_else(|| missing("record batch"))?;
                let Some(read) = &self.schema else { return Err(before_schema()) };
                let batch = RecordBatchDecoder::try_new(
                    &body,
                    batch,
                    Arc::clone(&read.schema),
                    &self.dictionaries,
                    &version,
                )?
                .with_projection(self.projection.as_deref())
                .with_require_alignment(false)
                .read_record_batch()?;
                Ok(Decoded::Batch(batch))
            }
            // `check_message` takes no other kind.
            other => Err(unsupported_kind(other)),
        }
    }

    /// Every check of one message; also whether it is a dictionary no column read needs
    /// (it is then not decoded).
    fn check_message(
        &self,
        message: &arrow_ipc::Message<'_>,
        body: &[u8],
    ) -> Result<(Claim, bool), IpcError> {
        let version = message.version();
        if version < MetadataVersion::V4 || version > MetadataVersion::V5 {
            return Err(IpcError::Unsupported(format!(
                "IPC metadata version {} is not read: only V4 and V5 (Arrow 0.15 and later)",
                version.0
            )));
        }
        let declared = message.bodyLength();
        if usize::try_from(declared).ok() != Some(body.len()) {
            return Err(IpcError::Body { declared, carried: body.len() });
        }
        if body.len() > self.limits.message_bytes {
            return Err(IpcError::BodyTooLarge { body: body.len() as u64, limit: self.limits.message_bytes });
        }
        match message.header_type() {
            MessageHeader::Schema => {
                let schema = message.header_as_schema().ok_or_else(|| missing("schema"))?;
                if schema.endianness() != Endianness::Little {
                    return Err(IpcError::Unsupported("big-endian IPC data is not read".into()));
                }
                Ok((Claim::default(), false))
            }
            MessageHeader::RecordBatch => {
                let batch = message.header_as_record_batch().ok_or_else(|| missing("record batch"))?;
                let Some(read) = &self.schema else { return Err(before_schema()) };
                let rows = batch.length();
                let limit = self.limits.rows;
                let rows = usize::try_from(rows)
                    .ok()
                    .filter(|&rows| rows <= limit)
                    .ok_or(IpcError::TooManyRows { rows, limit })?;
                let fields: Vec<&Field> = read.schema.fields().iter().map(AsRef::as_ref).collect();
                let mut walk = Walk::new(
                    "record batch",
                    &batch,
                    body,
                    read.shape,
                    &self.limits,
                    version == MetadataVersion::V4,
                )?;
                for field in &fields {
                    walk.field(field, field.name(), Some(rows))?;
                }
                let bytes = walk.finish()?;
                Ok((Claim { bytes, rows, held: 0 }, false))
            }
            MessageHeader::DictionaryBatch => {
                let dictionary =
                    message.header_as_dictionary_batch().ok_or_else(|| missing("dictionary batch"))?;
                let Some(read) = &self.schema else { return Err(before_schema()) };
                let id = dictionary.id();
                let value_type = dictionary_value_type(&read.schema, id).ok_or_else(|| {
                    IpcError::Dictionary { id, reason: "no field of the schema has it".into() }
                })?;
                if read.dictionaries_read.as_ref().is_some_and(|read| !read.contains(&id)) {
                    return Ok((Claim::default(), true));
                }
                let delta = dictionary.isDelta();
                let base = self.dictionary_claims.get(&id).copied();
                if delta && base.is_none() {
                    return Err(IpcError::Dictionary {
                        id,
                        reason: "a delta came before the dictionary".into(),
                    });
                }
                let data = dictionary.data().ok_or_else(|| missing("dictionary data"))?;
                let field = Field::new(format!("dictionary {id}"), value_type.clone(), true);
                let rows = data.length();
                let limit = self.limits.node_length();
                let rows = usize::try_from(rows).ok().filter(|&rows| rows <= limit).ok_or_else(|| {
                    IpcError::Node {
                        field: field.name().clone(),
                        reason: format!("{rows} values, above the limit of {limit}"),
                    }
                })?;
                let mut shape = Shape::default();
                shape_of(&value_type, &mut shape);
                let mut walk = Walk::new(
                    "dictionary",
                    &data,
                    body,
                    shape,
                    &self.limits,
                    version == MetadataVersion::V4,
                )?;
                walk.field(&field, field.name(), Some(rows))?;
                let values = walk.finish()?;
                // A delta is concatenated onto its dictionary: the new whole is held after,
                // and while it is made, the old one and the delta's values are held too.
                let held = values.saturating_add(base.unwrap_or(0));
                let bytes = values.saturating_add(if delta { held } else { 0 });
                let count = self.dictionary_claims.len() + usize::from(base.is_none());
                let total = self.dictionary_bytes() - base.unwrap_or(0) + held;
                if count > self.limits.dictionaries || total > self.limits.dictionary_bytes {
                    return Err(IpcError::Dictionaries {
                        id,
                        count,
                        bytes: total,
                        max_count: self.limits.dictionaries,
                        max_bytes: self.limits.dictionary_bytes,
                    });
                }
                Ok((Claim { bytes, rows: 0, held }, false))
            }
            other => Err(unsupported_kind(other)),
        }
    }
}

/// The verified flatbuffer of a message.
fn parse(header: &[u8]) -> Result<arrow_ipc::Message<'_>, IpcError> {
    arrow_ipc::root_as_message(header)
        .map_err(|err| IpcError::Flatbuffer { what: "message", reason: err.to_string() })
}

fn before_schema() -> IpcError {
    IpcError::OutOfOrder("a record batch or dictionary came before any schema")
}

fn unsupported_kind(kind: MessageHeader) -> IpcError {
    IpcError::Unsupported(format!(
        "IPC message of kind {} is not read: only schemas, dictionaries and record batches",
        kind.variant_name().unwrap_or("unknown")
    ))
}

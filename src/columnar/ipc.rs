//! Arrow IPC messages read without believing them: every length, count and offset a
//! message carries is checked against the bytes that carry it and against the limits
//! before arrow-ipc decodes anything, so that a malformed or hostile message is an
//! [`IpcError`], never a panic, an abort or an allocation it chose.
//!
//! The Flight door and the bulk client's Arrow readers (`.arrow` files, `.arrows`
//! streams) read through the same [`IpcReader`]: the message's flatbuffer is verified
//! (`arrow_ipc::root_as_message`), then, for a record batch or a dictionary:
//! - the message kind, its metadata version, byte order and compression;
//! - `bodyLength` against the body actually carried, and the body against the limit;
//! - the row count against the limit derived from `--max-message-bytes` (a column of a
//!   type without buffers, `null` or `fixed_size_list<_, 0>`, has nothing else to bound
//!   it), and every field node's length and null count;
//! - the number of field nodes, buffers and variadic buffer counts against the schema's
//!   field tree;
//! - every buffer's offset and length: non-negative, without overflow, within the body;
//! - every buffer long enough for its node's length and type (validity bits, offsets,
//!   views, values);
//! - in a compressed batch (LZ4 frame or zstd), each buffer's 8-byte uncompressed length,
//!   a claim: their sum is bounded by the message limit, and it is part of the
//!   [`Claim`] the caller charges to its budget before [`IpcReader::read`] inflates it;
//! - dictionaries: their id in the schema, and the dictionaries a stream holds bounded in
//!   number and bytes, delta dictionaries included.
//!
//! Only then is the message decoded, by arrow-ipc's own decoder
//! (`RecordBatchDecoder`, `read_dictionary`), which validates the values themselves
//! (offsets within their values, UTF-8, dictionary keys).
//!
//! Where arrow-ipc 60 trusts what it is given (and the checks here stand in for it):
//! a buffer's offset and length are sliced unchecked (a panic,
//! <https://github.com/apache/arrow-rs/issues/541>); an LZ4 buffer's claimed length is
//! reserved before a byte is inflated (an abort on 2^62,
//! <https://github.com/apache/arrow-rs/pull/10959>); a file footer's block lengths are
//! zero-filled before they are read (<https://github.com/apache/arrow-rs/issues/10921>);
//! and a record batch's row count is believed when no buffer contradicts it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_ipc::reader::RecordBatchDecoder;
use arrow_ipc::{
    BodyCompressionMethod, CompressionType, Endianness, FieldNode, MessageHeader, MetadataVersion,
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef, UnionMode};

/// The most dictionaries one stream may hold at once. A table of problems has at most a
/// few (an `id`, a `num` of strings); a client's table file may have more, but only the
/// dictionaries of the columns read are decoded.
pub const MAX_DICTIONARIES: usize = 64;

/// The least an answer's row takes in an answer message: the offsets of its
/// `error_reason` and `error_message` (4 bytes each), whether or not it is an error. A
/// batch of more rows than `--max-message-bytes` / 8 could never be answered in one
/// message, so it is refused before anything is sized by its rows.
pub const ANSWER_ROW_FLOOR: usize = 8;

/// The length prefix of a compressed buffer that says the bytes after it are not
/// compressed.
const NOT_COMPRESSED: i64 = -1;

/// The length prefix of each buffer of a compressed batch.
const PREFIX: usize = 8;

/// What a stream's messages may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpcLimits {
    /// The most one message may take: its body, and what its buffers claim inflated.
    pub message_bytes: usize,
    /// The most rows a record batch may have.
    pub rows: usize,
    /// The most dictionaries a stream holds at once.
    pub dictionaries: usize,
    /// The most bytes (as their messages claimed them) a stream's dictionaries hold
    /// together.
    pub dictionary_bytes: usize,
}

impl IpcLimits {
    /// The limits of a stream whose messages are at most `max_message_bytes`: rows at most
    /// one an [`ANSWER_ROW_FLOOR`] of them, and dictionaries of at most as many bytes
    /// together, [`MAX_DICTIONARIES`] at most.
    pub fn new(max_message_bytes: usize) -> Self {
        IpcLimits {
            message_bytes: max_message_bytes,
            rows: max_message_bytes / ANSWER_ROW_FLOOR,
            dictionaries: MAX_DICTIONARIES,
            dictionary_bytes: max_message_bytes,
        }
    }

    /// The most elements a node below the top may have: a bit each in a message's bytes,
    /// the densest any type with a buffer is; a type without buffers is bounded here.
    fn node_length(&self) -> usize {
        self.message_bytes.saturating_mul(8)
    }
}

/// Why a message is not read. The over-limit kinds ([`IpcError::is_over_limit`]) are the
/// caller's `RESOURCE_EXHAUSTED`; the rest, a malformed message, `INVALID_ARGUMENT`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpcError {
    /// The header is not a valid flatbuffer of an IPC message (or file footer).
    #[error("the IPC {what} is not a valid flatbuffer: {reason}")]
    Flatbuffer {
        /// A message or a footer.
        what: &'static str,
        /// The verifier's words.
        reason: String,
    },
    /// Framing outside the flatbuffer: a message's length prefix, a file's magic,
    /// footer or block.
    #[error("{0}")]
    Framing(String),
    /// A message this reader does not take (a tensor, an old metadata version, big-endian
    /// data, an unknown compression).
    #[error("{0}")]
    Unsupported(String),
    /// A record batch or dictionary before any schema, or a second schema in a file.
    #[error("{0}")]
    OutOfOrder(&'static str),
    /// The body's length is not the one the message declares.
    #[error("the message declares a body of {declared} bytes but carries {carried}")]
    Body {
        /// `bodyLength`.
        declared: i64,
        /// The bytes that came with it.
        carried: usize,
    },
    /// The body is larger than a message may be.
    #[error("the message body is {body} bytes, above the limit of {limit} bytes")]
    BodyTooLarge {
        /// Its length.
        body: u64,
        /// The limit.
        limit: usize,
    },
    /// A record batch of more rows than may be read.
    #[error("the record batch claims {rows} rows, above the limit of {limit} rows (one per {ANSWER_ROW_FLOOR} bytes of the message limit)")]
    TooManyRows {
        /// Its row count.
        rows: i64,
        /// The limit.
        limit: usize,
    },
    /// More or fewer field nodes, buffers or variadic buffer counts than the schema needs.
    #[error("the {what} has {found} {items}; its schema needs {expected}")]
    Count {
        /// A record batch or a dictionary.
        what: &'static str,
        /// Field nodes, buffers, variadic buffer counts.
        items: &'static str,
        /// In the message.
        found: usize,
        /// By the schema.
        expected: usize,
    },
    /// A field node whose length or null count cannot be.
    #[error("field {field:?}: {reason}")]
    Node {
        /// The field's path (`stones.item`).
        field: String,
        /// What is wrong, with the values.
        reason: String,
    },
    /// A buffer outside the body.
    #[error("buffer {index} ({role} of field {field:?}) at offset {offset}, {length} bytes, lies outside the {body}-byte body")]
    OutsideBody {
        /// The buffer's index in the message.
        index: usize,
        /// What the buffer holds: validity, offsets, values...
        role: &'static str,
        /// The field's path.
        field: String,
        /// As the message says.
        offset: i64,
        /// As the message says.
        length: i64,
        /// The body's length.
        body: usize,
    },
    /// A buffer shorter than its node's length and type need.
    #[error("buffer {index} ({role} of field {field:?}) holds {holds} bytes; {length} values need {needs}")]
    ShortBuffer {
        /// The buffer's index in the message.
        index: usize,
        /// What the buffer holds.
        role: &'static str,
        /// The field's path.
        field: String,
        /// Its bytes (uncompressed, as claimed).
        holds: u64,
        /// The node's length.
        length: usize,
        /// The bytes they need.
        needs: u128,
    },
    /// A compressed buffer's length prefix that cannot be.
    #[error("buffer {index} ({role} of field {field:?}) is compressed but {reason}")]
    Compressed {
        /// The buffer's index in the message.
        index: usize,
        /// What the buffer holds.
        role: &'static str,
        /// The field's path.
        field: String,
        /// What is wrong, with the values.
        reason: String,
    },
    /// Compressed buffers claiming more inflated bytes than a message may take.
    #[error("the message's compressed buffers claim {claimed} bytes inflated (the largest, buffer {index} of field {field:?}, {largest}), above the limit of {limit} bytes")]
    Inflated {
        /// The sum of the claims.
        claimed: u128,
        /// The largest claim's buffer.
        index: usize,
        /// Its field's path.
        field: String,
        /// The largest claim.
        largest: i64,
        /// The limit.
        limit: usize,
    },
    /// A dictionary whose id the schema does not have, or a delta without a dictionary.
    #[error("dictionary {id}: {reason}")]
    Dictionary {
        /// The dictionary's id.
        id: i64,
        /// What is wrong.
        reason: String,
    },
    /// More dictionaries, or more dictionary bytes, than a stream may hold.
    #[error("dictionary {id} would make the stream hold {count} dictionaries of {bytes} bytes, above the limit of {max_count} dictionaries of {max_bytes} bytes")]
    Dictionaries {
        /// The dictionary's id.
        id: i64,
        /// Dictionaries held with it.
        count: usize,
        /// Their bytes with it.
        bytes: usize,
        /// The most dictionaries.
        max_count: usize,
        /// The most bytes.
        max_bytes: usize,
    },
    /// arrow-ipc refused the checked message (its values: offsets, UTF-8, keys).
    #[error("{0}")]
    Decode(String),
}

impl IpcError {
    /// True when the message is refused for its size rather than its form.
    pub fn is_over_limit(&self) -> bool {
        match self {
            IpcError::BodyTooLarge { .. }
            | IpcError::TooManyRows { .. }
            | IpcError::Inflated { .. }
            | IpcError::Dictionaries { .. } => true,
            IpcError::Flatbuffer { .. }
            | IpcError::Framing(_)
            | IpcError::Unsupported(_)
            | IpcError::OutOfOrder(_)
            | IpcError::Body { .. }
            | IpcError::Count { .. }
            | IpcError::Node { .. }
            | IpcError::OutsideBody { .. }
            | IpcError::ShortBuffer { .. }
            | IpcError::Compressed { .. }
            | IpcError::Dictionary { .. }
            | IpcError::Decode(_) => false,
        }
    }
}

impl From<ArrowError> for IpcError {
    fn from(err: ArrowError) -> Self {
        IpcError::Decode(err.to_string())
    }
}

/// What decoding a checked message takes, for the caller to charge before it is decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Claim {
    /// Bytes the decoded message holds: its body (which its arrays share, or an aligned
    /// copy of it), the copies arrow-ipc makes of misaligned buffers, and what its
    /// compressed buffers claim inflated; for a delta dictionary, the dictionary it is
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

/// The counts a schema's field tree fixes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Shape {
    nodes: usize,
    buffers: usize,
    views: usize,
    /// Unions, which have a validity buffer more in metadata V4.
    unions: usize,
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
    /// then decodes it with arrow-ipc. The body is copied once when it is not 64-byte
    /// aligned, as arrow-flight's decoder does, so that no buffer is copied on its own.
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
                let body = aligned(body);
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
                let body = aligned(body);
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
                let bytes = walk.finish()?.saturating_add(copied(body));
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
                // and while it is made, the old one and the delta's values are held too (and
                // the body the values were copied from, when it was not aligned).
                let held = values.saturating_add(base.unwrap_or(0));
                let bytes = values.saturating_add(copied(body)).saturating_add(if delta { held } else { 0 });
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

fn missing(what: &str) -> IpcError {
    IpcError::Framing(format!("the message's header holds no {what}"))
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

/// The bytes [`aligned`] copies of `body`: all of them when it is not 64-byte aligned.
fn copied(body: &[u8]) -> usize {
    match (body.as_ptr() as usize).is_multiple_of(64) {
        true => 0,
        false => body.len(),
    }
}

/// `body` as one 64-byte aligned buffer: itself when it is, else a copy (charged in the
/// message's [`Claim`]).
fn aligned(body: Buffer) -> Buffer {
    if (body.as_ptr() as usize).is_multiple_of(64) {
        return body;
    }
    let mut copy = MutableBuffer::with_capacity(body.len());
    copy.extend_from_slice(body.as_slice());
    copy.into()
}

/// How arrow-ipc lays out a node of a type: its buffers and its children. The one match
/// over the types: [`shape_of`] counts from it and [`Walk`] checks by it.
enum Layout<'a> {
    /// No buffer of its own: null.
    Empty,
    /// Validity and a bit a value: boolean.
    Bits,
    /// Validity and fixed-width values (a primitive type) or keys (a dictionary's), the
    /// type's width.
    Fixed(&'static str, &'a DataType),
    /// Validity and values of a width from the schema.
    FixedSizeBinary(i32),
    /// Validity, offsets of this width, values.
    Bytes(usize),
    /// Validity, views, then as many data buffers as the message's variadic count says.
    Views,
    /// Validity, offsets of this width, then the child.
    List(&'a Field, usize),
    /// Validity, offsets and sizes of this width, then the child.
    ListView(&'a Field, usize),
    /// Validity, then the child, of the size from the schema a value.
    FixedSizeList(&'a Field, i32),
    /// Validity, then each child.
    Struct(&'a arrow_schema::Fields),
    /// (A validity in V4,) type ids, offsets when dense, then each child.
    Union(&'a arrow_schema::UnionFields, UnionMode),
    /// No buffer: its run ends and values children.
    RunEnd(&'a Field, &'a Field),
}

fn layout(data_type: &DataType) -> Layout<'_> {
    match data_type {
        DataType::Null => Layout::Empty,
        DataType::Boolean => Layout::Bits,
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Timestamp(_, _)
        | DataType::Date32
        | DataType::Date64
        | DataType::Time32(_)
        | DataType::Time64(_)
        | DataType::Duration(_)
        | DataType::Interval(_)
        | DataType::Decimal32(_, _)
        | DataType::Decimal64(_, _)
        | DataType::Decimal128(_, _)
        | DataType::Decimal256(_, _) => Layout::Fixed("values", data_type),
        DataType::Dictionary(key, _) => Layout::Fixed("keys", key),
        DataType::FixedSizeBinary(width) => Layout::FixedSizeBinary(*width),
        DataType::Binary | DataType::Utf8 => Layout::Bytes(4),
        DataType::LargeBinary | DataType::LargeUtf8 => Layout::Bytes(8),
        DataType::BinaryView | DataType::Utf8View => Layout::Views,
        DataType::List(child) | DataType::Map(child, _) => Layout::List(child, 4),
        DataType::LargeList(child) => Layout::List(child, 8),
        DataType::ListView(child) => Layout::ListView(child, 4),
        DataType::LargeListView(child) => Layout::ListView(child, 8),
        DataType::FixedSizeList(child, size) => Layout::FixedSizeList(child, *size),
        DataType::Struct(fields) => Layout::Struct(fields),
        DataType::Union(fields, mode) => Layout::Union(fields, *mode),
        DataType::RunEndEncoded(run_ends, values) => Layout::RunEnd(run_ends, values),
    }
}

/// Adds the nodes and buffers a batch holds for `data_type` to `shape`, as arrow-ipc
/// reads them.
fn shape_of(data_type: &DataType, shape: &mut Shape) {
    shape.nodes += 1;
    let (buffers, children): (usize, Vec<&Field>) = match layout(data_type) {
        Layout::Empty => (0, vec![]),
        Layout::Bits | Layout::Fixed(_, _) | Layout::FixedSizeBinary(_) => (2, vec![]),
        Layout::Bytes(_) => (3, vec![]),
        Layout::Views => {
            shape.views += 1;
            (2, vec![])
        }
        Layout::List(child, _) => (2, vec![child]),
        Layout::ListView(child, _) => (3, vec![child]),
        Layout::FixedSizeList(child, _) => (1, vec![child]),
        Layout::Struct(fields) => (1, fields.iter().map(AsRef::as_ref).collect()),
        Layout::Union(fields, mode) => {
            shape.unions += 1;
            let buffers = match mode {
                UnionMode::Dense => 2,
                UnionMode::Sparse => 1,
            };
            (buffers, fields.iter().map(|(_, f)| f.as_ref()).collect())
        }
        Layout::RunEnd(run_ends, values) => (0, vec![run_ends, values]),
    };
    shape.buffers += buffers;
    for child in children {
        shape_of(child.data_type(), shape);
    }
}

/// The ids of the dictionaries `field`'s column reads, nested ones too.
fn dictionary_ids(field: &Field, ids: &mut HashSet<i64>) {
    #[expect(deprecated, reason = "arrow-ipc 60 still keys dictionaries by the field's dict_id")]
    if let Some(id) = field.dict_id() {
        ids.insert(id);
    }
    for child in child_fields(field.data_type()) {
        dictionary_ids(child, ids);
    }
}

/// The fields inside `data_type`, a dictionary's values' included.
fn child_fields(data_type: &DataType) -> Vec<&Field> {
    if let DataType::Dictionary(_, values) = data_type {
        return child_fields(values);
    }
    match layout(data_type) {
        Layout::List(child, _) | Layout::ListView(child, _) | Layout::FixedSizeList(child, _) => vec![child],
        Layout::Struct(fields) => fields.iter().map(AsRef::as_ref).collect(),
        Layout::Union(fields, _) => fields.iter().map(|(_, f)| f.as_ref()).collect(),
        Layout::RunEnd(run_ends, values) => vec![run_ends, values],
        Layout::Empty
        | Layout::Bits
        | Layout::Fixed(_, _)
        | Layout::FixedSizeBinary(_)
        | Layout::Bytes(_)
        | Layout::Views => vec![],
    }
}

/// The value type of dictionary `id`: the first field of the schema with that id, as
/// arrow-ipc looks it up.
fn dictionary_value_type(schema: &Schema, id: i64) -> Option<DataType> {
    fn find(field: &Field, id: i64) -> Option<DataType> {
        #[expect(deprecated, reason = "arrow-ipc 60 still keys dictionaries by the field's dict_id")]
        let own = field.dict_id();
        if own == Some(id) {
            if let DataType::Dictionary(_, values) = field.data_type() {
                return Some(values.as_ref().clone());
            }
        }
        child_fields(field.data_type()).into_iter().find_map(|child| find(child, id))
    }
    schema.fields().iter().find_map(|field| find(field, id))
}

/// How long a node must be, as its parent says.
#[derive(Debug, Clone, Copy)]
enum Length {
    /// A column (the batch's rows), a struct's or a sparse union's child.
    Exactly(usize),
    /// A fixed-size list's child: the list's length times its size, at least.
    AtLeast(u128),
    /// Anything its own buffers allow.
    Any,
}

/// The walk of one message's field nodes and buffers along a schema's field tree, in the
/// order arrow-ipc reads them.
struct Walk<'a> {
    what: &'static str,
    nodes: flatbuffers::Vector<'a, FieldNode>,
    buffers: flatbuffers::Vector<'a, arrow_ipc::Buffer>,
    variadic: Option<flatbuffers::Vector<'a, i64>>,
    next_node: usize,
    next_buffer: usize,
    next_variadic: usize,
    body: &'a [u8],
    compressed: bool,
    /// Metadata V4: a union has a validity buffer (which arrow-ipc skips).
    v4: bool,
    limits: &'a IpcLimits,
    /// Bytes of the misaligned buffers arrow-ipc copies.
    copied: u128,
    /// What the compressed buffers claim inflated.
    inflated: u128,
    /// The largest claim: its buffer, field and value.
    largest: Option<(usize, String, i64)>,
}

impl<'a> Walk<'a> {
    /// Checks the message's counts against `shape` and its compression, ready to walk.
    fn new(
        what: &'static str,
        batch: &arrow_ipc::RecordBatch<'a>,
        body: &'a [u8],
        shape: Shape,
        limits: &'a IpcLimits,
        v4: bool,
    ) -> Result<Self, IpcError> {
        let nodes = batch.nodes().ok_or_else(|| missing("field nodes"))?;
        let buffers = batch.buffers().ok_or_else(|| missing("buffers"))?;
        let variadic = batch.variadicBufferCounts();
        let count = |items, found, expected| IpcError::Count { what, items, found, expected };
        if nodes.len() != shape.nodes {
            return Err(count("field nodes", nodes.len(), shape.nodes));
        }
        let views = variadic.map_or(0, |counts| counts.len());
        if views != shape.views {
            return Err(count("variadic buffer counts", views, shape.views));
        }
        let mut expected = shape.buffers as u128 + if v4 { shape.unions as u128 } else { 0 };
        for view in variadic.iter().flat_map(|counts| counts.iter()) {
            // A negative count makes no buffer count the message can match.
            expected += u128::try_from(view).unwrap_or(u128::MAX / 2);
        }
        if expected != buffers.len() as u128 {
            let expected = usize::try_from(expected).unwrap_or(usize::MAX);
            return Err(count("buffers", buffers.len(), expected));
        }
        let compressed = match batch.compression() {
            None => false,
            Some(compression) => {
                if compression.method() != BodyCompressionMethod::BUFFER {
                    return Err(IpcError::Unsupported(format!(
                        "IPC body compression method {} is not read: only BUFFER",
                        compression.method().0
                    )));
                }
                match compression.codec() {
                    CompressionType::LZ4_FRAME | CompressionType::ZSTD => true,
                    other => {
                        return Err(IpcError::Unsupported(format!(
                            "IPC compression codec {} is not read: only LZ4_FRAME and ZSTD",
                            other.0
                        )))
                    }
                }
            }
        };
        Ok(Walk {
            what,
            nodes,
            buffers,
            variadic,
            next_node: 0,
            next_buffer: 0,
            next_variadic: 0,
            body,
            compressed,
            v4,
            limits,
            copied: 0,
            inflated: 0,
            largest: None,
        })
    }

    /// Checks `field`'s node and buffers, then its children's.
    fn field(&mut self, field: &Field, path: &str, length: Option<usize>) -> Result<(), IpcError> {
        let expected = length.map_or(Length::Any, Length::Exactly);
        self.node_and_buffers(field.data_type(), path, expected)
    }

    fn node_and_buffers(
        &mut self,
        data_type: &DataType,
        path: &str,
        expected: Length,
    ) -> Result<(), IpcError> {
        let (len, nulls) = self.node(path, expected)?;
        let n = len as u128;
        let offsets = |width: u128| if len == 0 { 0 } else { (n + 1) * width };
        match layout(data_type) {
            Layout::Empty => {}
            Layout::Bits => {
                self.validity(path, len, nulls)?;
                self.buffer(path, "values", len, n.div_ceil(8), 1)?;
            }
            Layout::Fixed(role, of) => {
                let width = self.width(path, of)?;
                self.validity(path, len, nulls)?;
                self.buffer(path, role, len, n * width as u128, width.min(16))?;
            }
            Layout::FixedSizeBinary(width) => {
                let width = self.size(path, "byte width", width)?;
                self.validity(path, len, nulls)?;
                self.buffer(path, "values", len, n * width, 1)?;
            }
            Layout::Bytes(width) => {
                self.validity(path, len, nulls)?;
                self.buffer(path, "offsets", len, offsets(width as u128), width)?;
                self.buffer(path, "values", len, 0, 1)?;
            }
            Layout::Views => {
                let data = self.variadic_count(path)?;
                self.validity(path, len, nulls)?;
                self.buffer(path, "views", len, n * 16, 16)?;
                for _ in 0..data {
                    self.buffer(path, "view data", len, 0, 1)?;
                }
            }
            Layout::List(child, width) => {
                self.validity(path, len, nulls)?;
                self.buffer(path, "offsets", len, offsets(width as u128), width)?;
                self.child(child, path, Length::Any)?;
            }
            Layout::ListView(child, width) => {
                self.validity(path, len, nulls)?;
                self.buffer(path, "offsets", len, n * width as u128, width)?;
                self.buffer(path, "sizes", len, n * width as u128, width)?;
                self.child(child, path, Length::Any)?;
            }
            Layout::FixedSizeList(child, size) => {
                let size = self.size(path, "list size", size)?;
                self.validity(path, len, nulls)?;
                self.child(child, path, Length::AtLeast(n * size))?;
            }
            Layout::Struct(fields) => {
                self.validity(path, len, nulls)?;
                for child in fields {
                    self.child(child, path, Length::Exactly(len))?;
                }
            }
            Layout::Union(fields, mode) => {
                if self.v4 {
                    self.buffer(path, "validity", len, 0, 1)?;
                }
                self.buffer(path, "type ids", len, n, 1)?;
                let children = match mode {
                    UnionMode::Dense => {
                        self.buffer(path, "offsets", len, n * 4, 4)?;
                        Length::Any
                    }
                    UnionMode::Sparse => Length::Exactly(len),
                };
                for (_, child) in fields.iter() {
                    self.child(child, path, children)?;
                }
            }
            Layout::RunEnd(run_ends, values) => {
                self.child(run_ends, path, Length::Any)?;
                self.child(values, path, Length::Any)?;
            }
        }
        Ok(())
    }

    fn child(&mut self, child: &Field, parent: &str, expected: Length) -> Result<(), IpcError> {
        let path = format!("{parent}.{}", child.name());
        self.node_and_buffers(child.data_type(), &path, expected)
    }

    /// The next field node's length and null count, checked.
    fn node(&mut self, path: &str, expected: Length) -> Result<(usize, usize), IpcError> {
        let wrong = |reason: String| IpcError::Node { field: path.to_owned(), reason };
        if self.next_node >= self.nodes.len() {
            let expected = self.nodes.len() + 1;
            return Err(IpcError::Count {
                what: self.what,
                items: "field nodes",
                found: self.nodes.len(),
                expected,
            });
        }
        let node = self.nodes.get(self.next_node);
        self.next_node += 1;
        let (length, null_count) = (node.length(), node.null_count());
        let limit = self.limits.node_length();
        let len = usize::try_from(length)
            .ok()
            .filter(|&len| len <= limit)
            .ok_or_else(|| wrong(format!("length {length}, outside 0..={limit}")))?;
        let nulls = usize::try_from(null_count)
            .ok()
            .filter(|&nulls| nulls <= len)
            .ok_or_else(|| wrong(format!("null count {null_count}, outside 0..={len}")))?;
        match expected {
            Length::Exactly(rows) if len != rows => {
                Err(wrong(format!("length {len}, but its parent has {rows}")))
            }
            Length::AtLeast(least) if (len as u128) < least => {
                Err(wrong(format!("length {len}, but its fixed-size list needs {least}")))
            }
            Length::Exactly(_) | Length::AtLeast(_) | Length::Any => Ok((len, nulls)),
        }
    }

    /// The bytes a value of a fixed-width type takes.
    fn width(&self, path: &str, data_type: &DataType) -> Result<usize, IpcError> {
        data_type.primitive_width().ok_or_else(|| IpcError::Node {
            field: path.to_owned(),
            reason: format!("{data_type} has no fixed width"),
        })
    }

    /// A width or size from the schema, which may be negative.
    fn size(&self, path: &str, what: &str, size: i32) -> Result<u128, IpcError> {
        u128::try_from(size)
            .map_err(|_| IpcError::Node { field: path.to_owned(), reason: format!("{what} {size}") })
    }

    /// The next view column's count of data buffers (checked against the message's
    /// buffers in [`Walk::new`]).
    fn variadic_count(&mut self, path: &str) -> Result<usize, IpcError> {
        let count = self
            .variadic
            .filter(|counts| self.next_variadic < counts.len())
            .map(|counts| counts.get(self.next_variadic));
        self.next_variadic += 1;
        count.and_then(|count| usize::try_from(count).ok()).ok_or_else(|| IpcError::Node {
            field: path.to_owned(),
            reason: "no valid variadic buffer count".into(),
        })
    }

    /// The validity buffer: a bit a value, when the node has nulls (arrow-ipc ignores it
    /// otherwise).
    fn validity(&mut self, path: &str, len: usize, nulls: usize) -> Result<(), IpcError> {
        let needs = if nulls > 0 { (len as u128).div_ceil(8) } else { 0 };
        self.buffer(path, "validity", len, needs, 1)
    }

    /// The next buffer: within the body, its length prefix checked when compressed, and
    /// at least `needs` bytes once inflated.
    fn buffer(
        &mut self,
        path: &str,
        role: &'static str,
        len: usize,
        needs: u128,
        align: usize,
    ) -> Result<(), IpcError> {
        let index = self.next_buffer;
        if index >= self.buffers.len() {
            let found = self.buffers.len();
            return Err(IpcError::Count { what: self.what, items: "buffers", found, expected: found + 1 });
        }
        self.next_buffer += 1;
        let buffer = self.buffers.get(index);
        let (offset, length) = (buffer.offset(), buffer.length());
        let outside = || IpcError::OutsideBody {
            index,
            role,
            field: path.to_owned(),
            offset,
            length,
            body: self.body.len(),
        };
        let start = usize::try_from(offset).map_err(|_| outside())?;
        let size = usize::try_from(length).map_err(|_| outside())?;
        let end = start.checked_add(size).filter(|&end| end <= self.body.len()).ok_or_else(outside)?;
        let holds = match self.compressed {
            false => {
                self.copy_if_misaligned(start, size, align);
                size as u64
            }
            true if size == 0 => 0,
            true => {
                let compressed =
                    |reason: String| IpcError::Compressed { index, role, field: path.to_owned(), reason };
                let prefix = self
                    .body
                    .get(start..end)
                    .and_then(|bytes| bytes.first_chunk::<PREFIX>())
                    .ok_or_else(|| {
                        compressed(format!("is {size} bytes, shorter than its {PREFIX}-byte length prefix"))
                    })?;
                match i64::from_le_bytes(*prefix) {
                    0 => 0,
                    NOT_COMPRESSED => {
                        self.copy_if_misaligned(start + PREFIX, size - PREFIX, align);
                        (size - PREFIX) as u64
                    }
                    claim if claim > 0 => {
                        self.inflated += claim as u128;
                        if self.largest.as_ref().is_none_or(|(_, _, largest)| claim > *largest) {
                            self.largest = Some((index, path.to_owned(), claim));
                        }
                        claim as u64
                    }
                    claim => return Err(compressed(format!("claims an uncompressed length of {claim}"))),
                }
            }
        };
        if (holds as u128) < needs {
            return Err(IpcError::ShortBuffer {
                index,
                role,
                field: path.to_owned(),
                holds,
                length: len,
                needs,
            });
        }
        Ok(())
    }

    /// Counts a buffer arrow-ipc copies because it is not aligned for its type (the body
    /// itself is 64-byte aligned before it is decoded).
    fn copy_if_misaligned(&mut self, start: usize, size: usize, align: usize) {
        if size > 0 && !start.is_multiple_of(align.max(1)) {
            self.copied += size as u128;
        }
    }

    /// Checks that every node and buffer was read and the claims are within the limit;
    /// the bytes decoding takes.
    fn finish(self) -> Result<usize, IpcError> {
        let count = |items, found, expected| IpcError::Count { what: self.what, items, found, expected };
        if self.next_node != self.nodes.len() {
            return Err(count("field nodes", self.nodes.len(), self.next_node));
        }
        if self.next_buffer != self.buffers.len() {
            return Err(count("buffers", self.buffers.len(), self.next_buffer));
        }
        let limit = self.limits.message_bytes;
        if self.inflated > limit as u128 {
            let (index, field, largest) = self.largest.unwrap_or_default();
            return Err(IpcError::Inflated { claimed: self.inflated, index, field, largest, limit });
        }
        let bytes = self.body.len() as u128 + self.copied + self.inflated;
        Ok(usize::try_from(bytes).unwrap_or(usize::MAX))
    }
}

/// The magic at the start of an IPC file (padded to 8 bytes) and at its end.
const FILE_MAGIC: &[u8; 6] = b"ARROW1";

/// The continuation marker before an encapsulated message's length.
const CONTINUATION: [u8; 4] = [0xff; 4];

/// Bytes at the end of an IPC file: the footer's length, then the magic.
pub const FILE_TAIL: usize = 10;

/// Bytes at the start of an IPC file: the magic, padded.
pub const FILE_HEAD: usize = 8;

/// Where one message lies in an IPC file, checked to lie between its head and its footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Where its metadata (continuation marker, length, flatbuffer) starts.
    pub offset: u64,
    /// Its metadata's bytes.
    pub metadata: usize,
    /// Its body's bytes.
    pub body: usize,
}

/// An IPC file's footer: its schema and where its messages lie.
#[derive(Debug)]
pub struct FileFooter {
    /// The file's schema.
    pub schema: Schema,
    /// Its dictionaries' messages.
    pub dictionaries: Vec<Block>,
    /// Its record batches' messages.
    pub batches: Vec<Block>,
}

impl FileFooter {
    /// The footer's length, from a file's `head` (its first [`FILE_HEAD`] bytes) and `tail`
    /// (its last [`FILE_TAIL`]), checked to fit a file of `file_len` bytes and the limit.
    pub fn length(head: &[u8], tail: &[u8], file_len: u64, limits: &IpcLimits) -> Result<usize, IpcError> {
        let framing = |what: String| IpcError::Framing(what);
        if file_len < (FILE_HEAD + FILE_TAIL) as u64 || !head.starts_with(FILE_MAGIC) {
            return Err(framing("not an Arrow IPC file: it does not start with ARROW1".into()));
        }
        let (length, magic) =
            tail.split_first_chunk::<4>().ok_or_else(|| framing("a file shorter than its tail".into()))?;
        if magic != FILE_MAGIC {
            return Err(framing("not a whole Arrow IPC file: it does not end with ARROW1".into()));
        }
        let length = i32::from_le_bytes(*length);
        let room = file_len - (FILE_HEAD + FILE_TAIL) as u64;
        match usize::try_from(length) {
            Ok(footer) if footer as u64 <= room && footer <= limits.message_bytes => Ok(footer),
            _ => Err(framing(format!(
                "the file's footer claims {length} bytes; the file has room for {room}, and the limit is {}",
                limits.message_bytes
            ))),
        }
    }

    /// Reads the footer's flatbuffer, of a file whose footer starts at `footer_start`:
    /// every block must lie between the file's head and its footer, and no message may
    /// be larger than the limit.
    pub fn parse(footer: &[u8], footer_start: u64, limits: &IpcLimits) -> Result<FileFooter, IpcError> {
        let fb = arrow_ipc::root_as_footer(footer)
            .map_err(|err| IpcError::Flatbuffer { what: "file footer", reason: err.to_string() })?;
        let schema =
            fb.schema().ok_or_else(|| IpcError::Framing("the file's footer holds no schema".into()))?;
        if schema.endianness() != Endianness::Little {
            return Err(IpcError::Unsupported("big-endian IPC data is not read".into()));
        }
        let schema = arrow_ipc::convert::try_fb_to_schema(schema)?;
        let blocks =
            |blocks: Option<flatbuffers::Vector<'_, arrow_ipc::Block>>| -> Result<Vec<Block>, IpcError> {
                blocks
                    .iter()
                    .flat_map(|blocks| blocks.iter())
                    .map(|block| Self::block(block, footer_start, limits))
                    .collect()
            };
        Ok(FileFooter {
            schema,
            dictionaries: blocks(fb.dictionaries())?,
            batches: blocks(fb.recordBatches())?,
        })
    }

    fn block(block: &arrow_ipc::Block, footer_start: u64, limits: &IpcLimits) -> Result<Block, IpcError> {
        let (offset, metadata, body) = (block.offset(), block.metaDataLength(), block.bodyLength());
        let wrong = || {
            IpcError::Framing(format!(
                "a block of the file's footer at offset {offset} ({metadata} bytes of metadata, {body} of body) \
                 does not lie between the file's head and its footer at {footer_start}"
            ))
        };
        let start =
            u64::try_from(offset).ok().filter(|&start| start >= FILE_HEAD as u64).ok_or_else(wrong)?;
        let meta = u64::try_from(metadata).map_err(|_| wrong())?;
        let length = u64::try_from(body).map_err(|_| wrong())?;
        let end = start.checked_add(meta).and_then(|end| end.checked_add(length)).ok_or_else(wrong)?;
        if end > footer_start {
            return Err(wrong());
        }
        let limit = limits.message_bytes;
        if length > limit as u64 || meta > limit as u64 {
            return Err(IpcError::BodyTooLarge { body: length.max(meta), limit });
        }
        Ok(Block { offset: start, metadata: meta as usize, body: length as usize })
    }
}

/// The flatbuffer of an encapsulated message's `metadata`: after its continuation marker
/// (absent in the old format) and its length, which must fit.
pub fn encapsulated(metadata: &[u8]) -> Result<&[u8], IpcError> {
    let rest = metadata.strip_prefix(&CONTINUATION).unwrap_or(metadata);
    let (length, rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| IpcError::Framing("a message's metadata is shorter than its length".into()))?;
    let length = i32::from_le_bytes(*length);
    usize::try_from(length).ok().and_then(|length| rest.get(..length)).ok_or_else(|| {
        IpcError::Framing(format!(
            "a message's metadata claims {length} bytes, but {} follow its length",
            rest.len()
        ))
    })
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, FixedSizeListArray, StringArray, UInt64Array};
    use arrow_ipc::writer::{DictionaryTracker, IpcDataGenerator, IpcWriteContext, IpcWriteOptions};

    const LIMIT: usize = 1 << 20;

    /// `bytes` in a 64-byte aligned buffer, as a body that is not copied.
    fn aligned_body(bytes: &[u8]) -> Buffer {
        let mut body = MutableBuffer::with_capacity(bytes.len());
        body.extend_from_slice(bytes);
        body.into()
    }

    fn stones_schema(size: i32) -> Schema {
        let item = Arc::new(Field::new("item", DataType::Int8, true));
        Schema::new(vec![Field::new("stones", DataType::FixedSizeList(item, size), true)])
    }

    fn n_schema() -> Schema {
        Schema::new(vec![Field::new("n", DataType::UInt64, true)])
    }

    /// A reader that has read `schema`'s message.
    fn reader(schema: &Schema) -> IpcReader {
        let mut reader = IpcReader::new(IpcLimits::new(LIMIT));
        let decoded = reader.read(&schema_message(schema), Buffer::from(Vec::<u8>::new())).unwrap();
        assert!(matches!(decoded, Decoded::Schema(_)));
        reader
    }

    /// The messages arrow's writer makes of `batch`: its dictionaries', then its own.
    fn written(batch: &RecordBatch, options: &IpcWriteOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
        let generator = IpcDataGenerator::default();
        let mut tracker = DictionaryTracker::new(false);
        let _ = generator.schema_to_bytes_with_dictionary_tracker(batch.schema_ref(), &mut tracker, options);
        let (dictionaries, data) =
            generator.encode(batch, &mut tracker, options, &mut IpcWriteContext::default()).unwrap();
        dictionaries.into_iter().chain([data]).map(|m| (m.ipc_message, m.arrow_data)).collect()
    }

    fn read_all(
        reader: &mut IpcReader,
        messages: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<Option<RecordBatch>, IpcError> {
        let mut last = None;
        for (header, body) in messages {
            reader.check(&header, &body)?;
            if let Decoded::Batch(batch) = reader.read(&header, Buffer::from(body))? {
                last = Some(batch);
            }
        }
        Ok(last)
    }

    #[test]
    fn what_arrows_writer_makes_is_read_back_with_or_without_compression() {
        let mut dictionary =
            arrow_array::builder::StringDictionaryBuilder::<arrow_array::types::Int32Type>::new();
        dictionary.extend([Some("25??"), None, Some("11")]);
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(StringArray::from(vec![Some("a"), None, Some("c")])) as ArrayRef),
            ("num", Arc::new(dictionary.finish()) as ArrayRef),
            ("n", Arc::new(UInt64Array::from(vec![Some(1), Some(2), None])) as ArrayRef),
        ])
        .unwrap();
        for compression in [None, Some(CompressionType::LZ4_FRAME), Some(CompressionType::ZSTD)] {
            let options = IpcWriteOptions::default().try_with_compression(compression).unwrap();
            let mut reader = reader(&batch.schema());
            let read = read_all(&mut reader, written(&batch, &options)).unwrap();
            assert_eq!(read.as_ref(), Some(&batch), "{compression:?}");
            assert!(reader.dictionary_bytes() > 0);
        }
    }

    #[test]
    fn a_row_count_no_buffer_bounds_is_held_to_the_limit() {
        let mut reader = reader(&stones_schema(0));
        let rows = 1i64 << 40;
        let raw = RawBatch {
            rows,
            nodes: vec![(rows, 0), (0, 0)],
            buffers: vec![(0, 0), (0, 0), (0, 0)],
            ..RawBatch::default()
        };
        let err = reader.check(&raw.header(0), &[]).unwrap_err();
        assert!(err.is_over_limit());
        assert_eq!(
            err.to_string(),
            format!("the record batch claims {rows} rows, above the limit of {} rows (one per 8 bytes of the message limit)", LIMIT / 8)
        );
        // Within the limit it is read, and claims its rows.
        let rows = 1000;
        let raw = RawBatch { rows, nodes: vec![(rows, 0), (0, 0)], ..raw };
        assert_eq!(reader.check(&raw.header(0), &[]).unwrap(), Claim { bytes: 0, rows: 1000, held: 0 });
        let Decoded::Batch(batch) = reader.read(&raw.header(0), Buffer::from(Vec::<u8>::new())).unwrap()
        else {
            panic!("a batch")
        };
        assert_eq!(batch.num_rows(), 1000);
        assert_eq!(batch.column(0).as_any().downcast_ref::<FixedSizeListArray>().unwrap().value_length(), 0);
    }

    #[test]
    fn every_buffer_is_checked_against_the_body_and_its_node() {
        let mut reader = reader(&n_schema());
        let body = vec![0u8; 64];
        let ok =
            RawBatch { rows: 8, nodes: vec![(8, 0)], buffers: vec![(0, 0), (0, 64)], ..RawBatch::default() };
        assert_eq!(
            reader.check(&ok.header(64), &aligned_body(&body)).unwrap(),
            Claim { bytes: 64, rows: 8, held: 0 }
        );
        let cases: Vec<(RawBatch, i64, &str)> = vec![
            (RawBatch { buffers: vec![(0, 0), (1 << 62, 64)], ..ok.clone() }, 64,
             "buffer 1 (values of field \"n\") at offset 4611686018427387904, 64 bytes, lies outside the 64-byte body"),
            (RawBatch { buffers: vec![(0, 0), (0, -8)], ..ok.clone() }, 64,
             "buffer 1 (values of field \"n\") at offset 0, -8 bytes, lies outside the 64-byte body"),
            (RawBatch { buffers: vec![(0, 0), (8, i64::MAX)], ..ok.clone() }, 64,
             "buffer 1 (values of field \"n\") at offset 8, 9223372036854775807 bytes, lies outside the 64-byte body"),
            (RawBatch { buffers: vec![(0, 0), (0, 56)], ..ok.clone() }, 64,
             "buffer 1 (values of field \"n\") holds 56 bytes; 8 values need 64"),
            (RawBatch { nodes: vec![(8, 1)], ..ok.clone() }, 64,
             "buffer 0 (validity of field \"n\") holds 0 bytes; 8 values need 1"),
            (RawBatch { nodes: vec![(8, 9)], ..ok.clone() }, 64, "field \"n\": null count 9, outside 0..=8"),
            (RawBatch { nodes: vec![(7, 0)], ..ok.clone() }, 64, "field \"n\": length 7, but its parent has 8"),
            (RawBatch { nodes: vec![(8, 0), (8, 0)], ..ok.clone() }, 64, "the record batch has 2 field nodes; its schema needs 1"),
            (RawBatch { buffers: vec![(0, 64)], ..ok.clone() }, 64, "the record batch has 1 buffers; its schema needs 2"),
            (ok.clone(), 128, "the message declares a body of 128 bytes but carries 64"),
            (RawBatch { rows: -1, ..ok.clone() }, 64, "the record batch claims -1 rows, above the limit of 131072 rows (one per 8 bytes of the message limit)"),
        ];
        for (raw, declared, message) in cases {
            let err = reader.check(&raw.header(declared), &body).unwrap_err();
            assert_eq!(err.to_string(), message);
            // Reading checks the same, and never panics.
            assert_eq!(reader.read(&raw.header(declared), Buffer::from(body.clone())).unwrap_err(), err);
        }
        let err = reader.check(b"not a flatbuffer", &[]).unwrap_err();
        assert!(err.to_string().starts_with("the IPC message is not a valid flatbuffer: "), "{err}");
    }

    #[test]
    fn a_compressed_buffers_claim_is_bounded_and_charged_before_it_is_inflated() {
        let mut reader = reader(&n_schema());
        let mut body = vec![0u8; 16];
        body[..8].copy_from_slice(&(1i64 << 62).to_le_bytes());
        let raw = RawBatch {
            rows: 1,
            nodes: vec![(1, 0)],
            buffers: vec![(0, 0), (0, 16)],
            compression: Some(CompressionType::LZ4_FRAME),
            ..RawBatch::default()
        };
        let err = reader.check(&raw.header(16), &body).unwrap_err();
        assert!(err.is_over_limit());
        assert_eq!(
            err.to_string(),
            "the message's compressed buffers claim 4611686018427387904 bytes inflated (the largest, buffer 1 \
             of field \"n\", 4611686018427387904), above the limit of 1048576 bytes"
        );
        assert_eq!(reader.read(&raw.header(16), Buffer::from(body.clone())).unwrap_err(), err);
        // A claim within the limit is the claim: a lie is arrow-ipc's error, after it.
        body[..8].copy_from_slice(&4096i64.to_le_bytes());
        assert_eq!(
            reader.check(&raw.header(16), &aligned_body(&body)).unwrap(),
            Claim { bytes: 16 + 4096, rows: 1, held: 0 }
        );
        assert!(matches!(reader.read(&raw.header(16), Buffer::from(body.clone())), Err(IpcError::Decode(_))));
        body[..8].copy_from_slice(&(-2i64).to_le_bytes());
        assert_eq!(
            reader.check(&raw.header(16), &body).unwrap_err().to_string(),
            "buffer 1 (values of field \"n\") is compressed but claims an uncompressed length of -2"
        );
        let short = RawBatch { buffers: vec![(0, 0), (0, 4)], ..raw };
        assert_eq!(
            reader.check(&short.header(16), &body).unwrap_err().to_string(),
            "buffer 1 (values of field \"n\") is compressed but is 4 bytes, shorter than its 8-byte length prefix"
        );
    }

    #[test]
    fn dictionaries_are_bounded_in_number_and_bytes_deltas_included() {
        let field = |i: usize| {
            #[expect(deprecated, reason = "arrow-ipc 60 keys dictionaries by dict_id")]
            let field = Field::new_dict(
                format!("d{i}"),
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
                i as i64,
                false,
            );
            field
        };
        let schema = Schema::new((0..MAX_DICTIONARIES + 1).map(field).collect::<Vec<_>>());
        let mut reader = reader(&schema);
        // One value of 4,096 bytes a dictionary: offsets (8 bytes), then the value.
        let mut body = vec![0u8; 8 + 4096];
        body[4..8].copy_from_slice(&4096i32.to_le_bytes());
        let dictionary = |id: i64, delta: bool| RawBatch {
            rows: 1,
            nodes: vec![(1, 0)],
            buffers: vec![(0, 0), (0, 8), (8, 4096)],
            dictionary: Some((id, delta)),
            ..RawBatch::default()
        };
        for id in 0..MAX_DICTIONARIES as i64 {
            reader.read(&dictionary(id, false).header(body.len() as i64), aligned_body(&body)).unwrap();
        }
        assert_eq!(reader.dictionary_bytes(), MAX_DICTIONARIES * body.len());
        let err =
            reader.check(&dictionary(64, false).header(body.len() as i64), &aligned_body(&body)).unwrap_err();
        assert!(err.is_over_limit());
        assert_eq!(
            err.to_string(),
            format!("dictionary 64 would make the stream hold 65 dictionaries of {} bytes, above the limit of 64 dictionaries of 1048576 bytes", 65 * body.len())
        );
        // Deltas grow their dictionary until the bytes run out.
        let mut deltas = 0;
        let err = loop {
            match reader.read(&dictionary(0, true).header(body.len() as i64), aligned_body(&body)) {
                Ok(_) => deltas += 1,
                Err(err) => break err,
            }
        };
        assert!(matches!(err, IpcError::Dictionaries { .. }), "{err}");
        assert!(reader.dictionary_bytes() <= LIMIT, "{}", reader.dictionary_bytes());
        assert_eq!(deltas, LIMIT / body.len() - MAX_DICTIONARIES);
        let unknown = reader
            .check(&dictionary(1000, false).header(body.len() as i64), &aligned_body(&body))
            .unwrap_err();
        assert_eq!(unknown.to_string(), "dictionary 1000: no field of the schema has it");
    }

    #[test]
    fn a_batch_before_its_schema_is_refused() {
        let reader = IpcReader::new(IpcLimits::new(LIMIT));
        let raw =
            RawBatch { rows: 0, nodes: vec![(0, 0)], buffers: vec![(0, 0), (0, 0)], ..RawBatch::default() };
        assert_eq!(
            reader.check(&raw.header(0), &[]).unwrap_err().to_string(),
            "a record batch or dictionary came before any schema"
        );
    }
}

//! Why a message is not read: the malformed kinds and the over-limit ones.

use arrow_schema::ArrowError;

use super::limits::ANSWER_ROW_FLOOR;

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

/// A message whose header lacks `what`.
pub(super) fn missing(what: &str) -> IpcError {
    IpcError::Framing(format!("the message's header holds no {what}"))
}

//! What a stream's messages may take: the limits every check is held to.

/// The most dictionaries one stream may hold at once. A table of problems has at most a
/// few (an `id`, a `num` of strings); a client's table file may have more, but only the
/// dictionaries of the columns read are decoded.
pub const MAX_DICTIONARIES: usize = 64;

/// The least an answer's row takes in an answer message: the offsets of its
/// `error_reason` and `error_message` (4 bytes each), whether or not it is an error. A
/// batch of more rows than `--max-message-bytes` / 8 could never be answered in one
/// message, so it is refused before anything is sized by its rows.
pub const ANSWER_ROW_FLOOR: usize = 8;

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
    pub(super) fn node_length(&self) -> usize {
        self.message_bytes.saturating_mul(8)
    }
}

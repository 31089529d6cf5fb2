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
//!
//! # Layout
//! `reader` is the stream's reader and each message's checks (its kind, version, body,
//! rows and dictionaries); `walk` follows a batch's field nodes and buffers through the
//! schema's field tree, by each type's `layout`; `limits` and `error` are what they are
//! held to and what they refuse with; `file` reads an IPC file's framing (its footer and
//! blocks, each message's metadata); `raw_batch` writes the messages arrow's writer never
//! makes, for the tests and the fuzz seeds.

mod error;
mod file;
mod layout;
mod limits;
mod raw_batch;
mod reader;
mod walk;

pub use error::IpcError;
pub use file::{encapsulated, Block, FileFooter, FILE_HEAD, FILE_TAIL};
pub use limits::{IpcLimits, ANSWER_ROW_FLOOR, MAX_DICTIONARIES};
pub use raw_batch::{schema_message, RawBatch};
pub use reader::{Claim, Decoded, IpcReader};

#[cfg(test)]
mod tests;

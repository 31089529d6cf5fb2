//! An IPC file's framing: its head, its footer and the blocks it lists, and each
//! encapsulated message's metadata, checked before a byte they claim is read.

use arrow_ipc::Endianness;
use arrow_schema::Schema;

use super::error::IpcError;
use super::limits::IpcLimits;

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

//! The walk of a record batch's (or a dictionary's) field nodes and buffers through the
//! schema's field tree: every count, length, offset and compressed claim checked against
//! the body, the node and the limits.

use arrow_ipc::{BodyCompressionMethod, CompressionType, FieldNode};
use arrow_schema::{DataType, Field, UnionMode};

use super::error::{missing, IpcError};
use super::layout::{layout, Layout, Shape};
use super::limits::IpcLimits;

/// The length prefix of a compressed buffer that says the bytes after it are not
/// compressed.
const NOT_COMPRESSED: i64 = -1;

/// The length prefix of each buffer of a compressed batch.
const PREFIX: usize = 8;

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
pub(super) struct Walk<'a> {
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
    pub(super) fn new(
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
    pub(super) fn field(&mut self, field: &Field, path: &str, length: Option<usize>) -> Result<(), IpcError> {
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

    /// Counts a buffer arrow-ipc copies because it is not aligned for its type where it
    /// lies: at `start` of the body as it is decoded, at whatever address that is.
    fn copy_if_misaligned(&mut self, start: usize, size: usize, align: usize) {
        let address = (self.body.as_ptr() as usize).wrapping_add(start);
        if size > 0 && !address.is_multiple_of(align.max(1)) {
            self.copied += size as u128;
        }
    }

    /// Checks that every node and buffer was read and the claims are within the limit;
    /// the bytes decoding takes.
    pub(super) fn finish(self) -> Result<usize, IpcError> {
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

//! Arrow IPC tables read through [`IpcReader`], the reader the Flight door uses: a file
//! (`.arrow`, its footer first) or a stream (`.arrows`, from a file or stdin). Every
//! message is framed here with its lengths checked before a byte of it is read into
//! memory, and checked whole by the reader before arrow-ipc decodes it, so that a
//! malformed table is an error naming what is wrong, never a panic, an abort or an
//! allocation it chose.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};

use arrow_array::RecordBatch;
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_schema::SchemaRef;

use crate::client::embedded::BoxError;
use crate::columnar::ipc::{self, Block, Decoded, FileFooter, IpcError, IpcLimits, IpcReader};

/// The most one message of an input table may take decoded (its body and what it
/// inflates to). A table file's batch may be much larger than a request (the reader cuts
/// it into requests), so this is not `--max-message-bytes`; it bounds what one message
/// of a malformed or hostile file can make the client allocate, and its rows (one per
/// [`ipc::ANSWER_ROW_FLOOR`] bytes).
pub const TABLE_MESSAGE_BYTES: usize = 1 << 30;

/// The limits every input table is read within.
fn limits() -> IpcLimits {
    IpcLimits::new(TABLE_MESSAGE_BYTES)
}

/// Bytes read at a time into a body whose length is a claim: a body is never reserved
/// whole before its bytes arrive, so a length no bytes back costs one such chunk.
const BODY_CHUNK: usize = 8 << 20;

/// Reads `len` bytes into a 64-byte aligned buffer, growing as they arrive.
fn read_body(input: &mut impl Read, len: usize) -> io::Result<Buffer> {
    let mut body = MutableBuffer::with_capacity(len.min(BODY_CHUNK));
    let mut filled = 0;
    while filled < len {
        let more = (len - filled).min(filled.max(BODY_CHUNK));
        body.resize(filled + more, 0);
        input.read_exact(&mut body.as_slice_mut()[filled..])?;
        filled += more;
    }
    Ok(body.into())
}

/// An error of a table's bytes: a read that ended early names where.
fn short(err: io::Error, what: &str) -> BoxError {
    match err.kind() {
        io::ErrorKind::UnexpectedEof => Box::new(IpcError::Framing(format!("the table ends inside {what}"))),
        _ => Box::new(err),
    }
}

/// An Arrow IPC file: its footer read and checked, then its blocks one by one.
pub struct IpcFile {
    file: BufReader<File>,
    reader: IpcReader,
    footer: FileFooter,
    /// The next record batch block.
    next: usize,
}

impl IpcFile {
    /// Opens `file`: reads and checks its footer and takes its schema; no dictionary or
    /// batch is read yet.
    pub fn open(file: File) -> Result<IpcFile, BoxError> {
        let len = file.metadata()?.len();
        let mut file = BufReader::new(file);
        let limits = limits();
        let mut head = [0u8; ipc::FILE_HEAD];
        let mut tail = [0u8; ipc::FILE_TAIL];
        if len >= (ipc::FILE_HEAD + ipc::FILE_TAIL) as u64 {
            file.read_exact(&mut head)?;
            file.seek(SeekFrom::End(-(ipc::FILE_TAIL as i64)))?;
            file.read_exact(&mut tail)?;
        }
        let footer_len = FileFooter::length(&head, &tail, len, &limits)?;
        let footer_start = len - (ipc::FILE_TAIL + footer_len) as u64;
        file.seek(SeekFrom::Start(footer_start))?;
        let mut bytes = vec![0u8; footer_len];
        file.read_exact(&mut bytes)?;
        let footer = FileFooter::parse(&bytes, footer_start, &limits)?;
        let mut reader = IpcReader::new(limits);
        reader.set_schema(footer.schema.clone())?;
        Ok(IpcFile { file, reader, footer, next: 0 })
    }

    /// The file's schema.
    pub fn schema(&self) -> SchemaRef {
        self.reader.schema().cloned().unwrap_or_else(|| SchemaRef::new(self.footer.schema.clone()))
    }

    /// The record batches the footer lists.
    pub fn num_batches(&self) -> usize {
        self.footer.batches.len()
    }

    /// Reads only the columns at `projection`, and their dictionaries, which are read now.
    pub fn project(mut self, projection: Vec<usize>) -> Result<IpcFile, BoxError> {
        self.reader.set_projection(projection)?;
        for block in self.footer.dictionaries.clone() {
            match self.read_block(block)? {
                Decoded::Dictionary => {}
                Decoded::Schema(_) | Decoded::Batch(_) => {
                    return Err(Box::new(IpcError::Framing("a dictionary block holds no dictionary".into())));
                }
            }
        }
        Ok(self)
    }

    fn read_block(&mut self, block: Block) -> Result<Decoded, BoxError> {
        self.file.seek(SeekFrom::Start(block.offset))?;
        let mut metadata = vec![0u8; block.metadata];
        self.file.read_exact(&mut metadata).map_err(|err| short(err, "a message's metadata"))?;
        let header = ipc::encapsulated(&metadata)?;
        let body = read_body(&mut self.file, block.body).map_err(|err| short(err, "a message's body"))?;
        Ok(self.reader.read(header, body)?)
    }
}

impl Iterator for IpcFile {
    type Item = Result<RecordBatch, BoxError>;

    fn next(&mut self) -> Option<Self::Item> {
        let block = *self.footer.batches.get(self.next)?;
        self.next += 1;
        let read = match self.read_block(block) {
            Ok(Decoded::Batch(batch)) => Ok(batch),
            Ok(Decoded::Schema(_) | Decoded::Dictionary) => {
                Err(IpcError::Framing("a record batch block holds no record batch".into()).into())
            }
            Err(err) => Err(err),
        };
        if read.is_err() {
            // Nothing after a broken block is read.
            self.next = self.footer.batches.len();
        }
        Some(read)
    }
}

/// An Arrow IPC stream: its schema first, then dictionaries and record batches.
pub struct IpcStream<R> {
    input: R,
    reader: IpcReader,
    done: bool,
}

impl<R: Read> IpcStream<R> {
    /// Opens a stream on `input` and reads its first message, its schema.
    pub fn open(input: R) -> Result<IpcStream<R>, BoxError> {
        let mut stream = IpcStream { input, reader: IpcReader::new(limits()), done: false };
        match stream.next_message()? {
            Some(Decoded::Schema(_)) => Ok(stream),
            Some(Decoded::Dictionary | Decoded::Batch(_)) => {
                Err(Box::new(IpcError::OutOfOrder("a record batch or dictionary came before any schema")))
            }
            None => Err(Box::new(IpcError::Framing("the stream is empty: it has no schema".into()))),
        }
    }

    /// The stream's schema.
    pub fn schema(&self) -> SchemaRef {
        self.reader.schema().cloned().unwrap_or_else(|| SchemaRef::new(arrow_schema::Schema::empty()))
    }

    /// Reads only the columns at `projection`, and their dictionaries.
    pub fn project(mut self, projection: Vec<usize>) -> Result<IpcStream<R>, BoxError> {
        self.reader.set_projection(projection)?;
        Ok(self)
    }

    /// The next message read, `None` at the end of the stream (its end marker, or the end
    /// of its bytes between two messages).
    fn next_message(&mut self) -> Result<Option<Decoded>, BoxError> {
        let mut word = [0u8; 4];
        // Read to its end rather than exactly: no byte is the end between two messages, a
        // few are a stream cut inside one.
        let mut first = Vec::with_capacity(4);
        (&mut self.input).take(4).read_to_end(&mut first)?;
        match first.len() {
            0 => return Ok(None),
            4 => word.copy_from_slice(&first),
            _ => return Err(short(io::ErrorKind::UnexpectedEof.into(), "a message's length")),
        }
        if word == [0xff; 4] {
            self.input.read_exact(&mut word).map_err(|err| short(err, "a message's length"))?;
        }
        let length = i32::from_le_bytes(word);
        let limit = self.reader.limits().message_bytes;
        let length = match usize::try_from(length) {
            Ok(0) => return Ok(None),
            Ok(length) if length <= limit => length,
            _ => {
                return Err(Box::new(IpcError::Framing(format!(
                    "a message's metadata claims {length} bytes; the limit is {limit}"
                ))))
            }
        };
        let mut header = Vec::new();
        (&mut self.input).take(length as u64).read_to_end(&mut header)?;
        if header.len() < length {
            return Err(short(io::ErrorKind::UnexpectedEof.into(), "a message's metadata"));
        }
        let body = self.reader.declared_body(&header)?;
        let body = read_body(&mut self.input, body).map_err(|err| short(err, "a message's body"))?;
        Ok(Some(self.reader.read(&header, body)?))
    }
}

impl<R: Read> Iterator for IpcStream<R> {
    type Item = Result<RecordBatch, BoxError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.next_message() {
                Ok(Some(Decoded::Batch(batch))) => return Some(Ok(batch)),
                Ok(Some(Decoded::Dictionary)) => {}
                Ok(Some(Decoded::Schema(_))) => {
                    self.done = true;
                    return Some(Err(Box::new(IpcError::OutOfOrder("a second schema in the stream"))));
                }
                Ok(None) => self.done = true,
                Err(err) => {
                    // Nothing after a broken message is read.
                    self.done = true;
                    return Some(Err(err));
                }
            }
        }
        None
    }
}

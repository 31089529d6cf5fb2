//! A source's bytes as they were written: gzip and zstd recognised by their magic bytes
//! rather than a file name (so that a compressed stdin works too), and the raw bytes
//! taken from the source counted for progress. The line reader, the table readers and
//! stdin's sniffing all read through it.

use std::io::{self, BufRead, BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Size of the read buffers, before and after decompression.
pub(crate) const READ_BUFFER_BYTES: usize = 1 << 20;

/// At most this much of the input's first read is checked for binary data.
const SNIFF_BYTES: usize = 64 * 1024;

const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Counts the raw (possibly compressed) bytes taken from the source, for progress.
#[derive(Debug)]
struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The bytes of `source`, decompressed when they start with gzip's or zstd's magic bytes,
/// and a live count of the raw (compressed) bytes taken from it.
pub(crate) fn decompressed(
    source: Box<dyn Read + Send>,
) -> io::Result<(Box<dyn BufRead + Send>, Arc<AtomicU64>)> {
    let raw_bytes = Arc::new(AtomicU64::new(0));
    let mut counted = CountingReader { inner: source, count: Arc::clone(&raw_bytes) };
    // The first read is kept whole (up to a block) rather than cut at the magic bytes,
    // so that the check for binary data sees a block of plain input.
    let mut head = vec![0u8; SNIFF_BYTES];
    let head_len = read_at_least(&mut counted, &mut head, ZSTD_MAGIC.len())?;
    head.truncate(head_len);
    let head = head.as_slice();
    let raw = BufReader::with_capacity(READ_BUFFER_BYTES, io::Cursor::new(head.to_vec()).chain(counted));
    let inner: Box<dyn BufRead + Send> = if head.starts_with(GZIP_MAGIC) {
        // Multi-member, so that concatenated (pigz, bgzip) files read whole.
        Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, flate2::bufread::MultiGzDecoder::new(raw)))
    } else if head.starts_with(ZSTD_MAGIC) {
        Box::new(BufReader::with_capacity(READ_BUFFER_BYTES, zstd::stream::read::Decoder::with_buffer(raw)?))
    } else {
        Box::new(raw)
    };
    Ok((inner, raw_bytes))
}

/// Reads into `buf` until it holds at least `min` bytes or the source ends, without
/// waiting for more than that (stdin may be a person typing); returns the bytes read.
fn read_at_least(reader: &mut impl Read, buf: &mut [u8], min: usize) -> io::Result<usize> {
    let mut filled = 0;
    while filled < min {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(filled)
}

//! The Stone Game IV table on disk, so that a restarted server answers at once.
//!
//! The file is the sorted list of P-positions with a header and a CRC-32. A file that
//! is truncated, corrupt, of another format or whose list fails
//! [`check_losing_list`] is rejected as a whole: the caller recomputes rather than
//! answer from a table it cannot trust. A link at the table's path is refused, and a save
//! is atomic and writes through no link (`table_file`).
//! [`IvTableStore`] binds a file to the live table for the server: load once, save when
//! the table has grown.
//!
//! Layout, little-endian: magic `GSIVLOSE` (8 bytes), version (u32), reserved (u32, = 0),
//! covered (u64: every n below it is classified), count (u64), then
//! - version 2, written: the payload's length in bytes (u64), then count LEB128 varints,
//!   the first P-position and then each one's distance from the previous minus 1 (gaps
//!   near 10^10 take two bytes: 3.4 MB at 10^9, 17 MB at 10^10, where `u64`s would take
//!   8 bytes each). Only the minimal encoding of a varint is read, so a list has one file.
//! - version 1, still read: count × u32 P-positions (a table below 2^32).
//!
//! and the CRC-32 of everything before it (u32).

use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::games::stone_game_iv::{check_losing_list, InvalidLosingList};
use crate::games::StoneGameIvTable;
use crate::table_file;

const MAGIC: [u8; 8] = *b"GSIVLOSE";
/// The version written.
const VERSION: u32 = 2;
/// The version of `u32` P-positions, still read.
const VERSION_U32: u32 = 1;
/// The header of version 1, the common part of both.
const HEADER_BYTES: usize = 32;
/// The header of version 2: the common part and the payload's length.
const HEADER_V2_BYTES: usize = HEADER_BYTES + 8;
const CRC_BYTES: usize = 4;

/// A saved table: the P-positions below `covered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IvTableFile {
    /// Every n below this is classified.
    pub covered: u64,
    /// The P-positions below `covered`, strictly increasing.
    pub losing: Vec<u64>,
}

/// Why a table file was not saved or not trusted.
#[derive(Debug, thiserror::Error)]
pub enum IvTableFileError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Not a table file (or not this format's).
    #[error("{path}: not a stone game iv table (bad magic); refusing to overwrite it")]
    BadMagic {
        /// The file.
        path: PathBuf,
    },
    /// The file's directory does not exist, so the table could never be saved.
    #[error("{path}: the directory does not exist")]
    NoDirectory {
        /// The file.
        path: PathBuf,
    },
    /// Nothing can be created in the file's directory (read-only, or not the server's),
    /// so the table could never be saved.
    #[error("{path}: cannot create a file in its directory, so the table could never be saved: {source}")]
    NotWritable {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The path is a symbolic link: whatever it points to is not the server's to read
    /// or to replace.
    #[error("{path}: a symbolic link; refusing to follow it")]
    Link {
        /// The file.
        path: PathBuf,
    },
    /// A table file of a version this build does not read: written by a newer build, so
    /// refused rather than overwritten.
    #[error(
        "{path}: table format version {version}, which this build does not read (a newer build's?); \
         refusing to overwrite it (remove it to recompute)"
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u32,
    },
    /// The header's reserved word is not 0: written by a newer build that gave it a
    /// meaning this one does not know, so refused rather than overwritten.
    #[error(
        "{path}: reserved header word {flags:#x}, expected 0 (a newer format?); \
         refusing to overwrite it (remove it to recompute)"
    )]
    UnsupportedFlags {
        /// The file.
        path: PathBuf,
        /// The word found.
        flags: u32,
    },
    /// The size does not match the header's count: truncated or padded.
    #[error("{path}: {found} bytes, expected {expected}")]
    BadLength {
        /// The file.
        path: PathBuf,
        /// The size the header implies.
        expected: u64,
        /// The actual size.
        found: u64,
    },
    /// The content does not match its checksum.
    #[error("{path}: checksum mismatch")]
    BadChecksum {
        /// The file.
        path: PathBuf,
    },
    /// The payload is not the header's count of minimal varints, each P-position
    /// below 2^64, and nothing else.
    #[error("{path}: P-position {index} is not encoded as a minimal varint")]
    BadEncoding {
        /// The file.
        path: PathBuf,
        /// The index of the first P-position that fails (the count, for bytes left over).
        index: u64,
    },
    /// Well-formed, but the list is not the P-positions it claims to be.
    #[error("{path}: {source}")]
    BadList {
        /// The file.
        path: PathBuf,
        /// What is wrong with the list.
        source: InvalidLosingList,
    },
}

impl IvTableFile {
    /// Reads and verifies `path`: magic, version, length, checksum, then the list. A
    /// symbolic link at `path` is refused, not followed.
    pub fn load(path: &Path) -> Result<Self, IvTableFileError> {
        let bytes = table_file::read(path).map_err(|source| match table_file::is_link(&source, path) {
            true => IvTableFileError::Link { path: path.into() },
            false => IvTableFileError::Io { path: path.into(), source },
        })?;
        Self::decode(&bytes, path)
    }

    /// Writes the table to `path` atomically: a temporary file created exclusively beside
    /// it, flushed to disk, then renamed over it.
    pub fn save(&self, path: &Path) -> Result<(), IvTableFileError> {
        table_file::write_atomically(path, &self.encode())
            .map_err(|source| IvTableFileError::Io { path: path.into(), source })
    }

    /// The file's bytes, in the current version. `losing` must be strictly increasing
    /// (as [`check_losing_list`] checks).
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_V2_BYTES + 2 * self.losing.len() + CRC_BYTES);
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&self.covered.to_le_bytes());
        bytes.extend_from_slice(&(self.losing.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes());
        let mut next = 0;
        for &p in &self.losing {
            push_varint(&mut bytes, p - next);
            next = p + 1;
        }
        let payload = (bytes.len() - HEADER_V2_BYTES) as u64;
        bytes[HEADER_BYTES..HEADER_V2_BYTES].copy_from_slice(&payload.to_le_bytes());
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Parses and verifies the bytes of a table file; `path` only names it in errors.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Self, IvTableFileError> {
        let path = path.to_path_buf();
        if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
            // Empty, or cut inside the magic: a damaged table, not someone else's file.
            let expected = (HEADER_BYTES + CRC_BYTES) as u64;
            return Err(IvTableFileError::BadLength { path, expected, found: bytes.len() as u64 });
        }
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(IvTableFileError::BadMagic { path });
        }
        if bytes.len() < HEADER_BYTES + CRC_BYTES {
            let expected = (HEADER_BYTES + CRC_BYTES) as u64;
            return Err(IvTableFileError::BadLength { path, expected, found: bytes.len() as u64 });
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let version = u32_at(8);
        if version != VERSION && version != VERSION_U32 {
            return Err(IvTableFileError::UnsupportedVersion { path, version });
        }
        let flags = u32_at(12);
        if flags != 0 {
            return Err(IvTableFileError::UnsupportedFlags { path, flags });
        }
        let (covered, count) = (u64_at(16), u64_at(24));
        let (header, payload) = match version {
            VERSION_U32 => (HEADER_BYTES, count.saturating_mul(4)),
            _ if bytes.len() < HEADER_V2_BYTES + CRC_BYTES => {
                let expected = (HEADER_V2_BYTES + CRC_BYTES) as u64;
                return Err(IvTableFileError::BadLength { path, expected, found: bytes.len() as u64 });
            }
            _ => (HEADER_V2_BYTES, u64_at(HEADER_BYTES)),
        };
        let expected = payload.saturating_add((header + CRC_BYTES) as u64);
        if expected != bytes.len() as u64 {
            return Err(IvTableFileError::BadLength { path, expected, found: bytes.len() as u64 });
        }
        let (content, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
        if crc32fast::hash(content) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(IvTableFileError::BadChecksum { path });
        }
        let losing = match version {
            VERSION_U32 => content[header..]
                .chunks_exact(4)
                .map(|p| u64::from(u32::from_le_bytes(p.try_into().expect("4 bytes"))))
                .collect(),
            _ => decode_gaps(&content[header..], count)
                .map_err(|index| IvTableFileError::BadEncoding { path: path.clone(), index })?,
        };
        check_losing_list(covered, &losing).map_err(|source| IvTableFileError::BadList { path, source })?;
        Ok(IvTableFile { covered, losing })
    }
}

/// Appends `value` as a LEB128 varint: 7 bits a byte, low first, the high bit set on
/// every byte but the last.
fn push_varint(bytes: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        bytes.push(value as u8 | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
}

/// The `count` P-positions of a version 2 payload, or the index of the first that is
/// not a minimal varint, overflows, or runs past the end (`count` for bytes left over).
fn decode_gaps(payload: &[u8], count: u64) -> Result<Vec<u64>, u64> {
    // Each takes at least a byte: a count beyond the payload fails below, unallocated.
    let mut losing = Vec::with_capacity(count.min(payload.len() as u64) as usize);
    let (mut at, mut next) = (0, 0u64);
    for index in 0..count {
        let (mut gap, mut shift) = (0u64, 0);
        loop {
            let Some(&byte) = payload.get(at) else { return Err(index) };
            at += 1;
            let bits = u64::from(byte & 0x7F);
            // The tenth byte holds bit 63 alone; a last byte of 0 (after the first) is
            // an overlong encoding.
            if shift == 63 && bits > 1 || byte == 0 && shift > 0 {
                return Err(index);
            }
            gap |= bits << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err(index);
            }
        }
        let p = next.checked_add(gap).ok_or(index)?;
        losing.push(p);
        next = p.checked_add(1).ok_or(index)?;
    }
    if at != payload.len() {
        return Err(count);
    }
    Ok(losing)
}

/// A table file bound to a live table: loads it once, then saves whenever the table has
/// grown since the last load or save. Saves are serialised, so the file only grows.
#[derive(Debug)]
pub struct IvTableStore {
    path: PathBuf,
    /// The `covered` of what the file holds (as far as this process knows).
    saved: Mutex<u64>,
}

impl IvTableStore {
    /// A store for the file at `path`; nothing is read yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        IvTableStore { path: path.into(), saved: Mutex::new(0) }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the file into `table` and returns the range it covers; on any error the
    /// table is left as it was.
    pub fn load_into(&self, table: &StoneGameIvTable) -> Result<u64, IvTableFileError> {
        let mut saved = self.saved.lock();
        let file = IvTableFile::load(&self.path)?;
        table
            .restore(file.covered, file.losing)
            .map_err(|source| IvTableFileError::BadList { path: self.path.clone(), source })?;
        *saved = file.covered;
        Ok(file.covered)
    }

    /// Saves `table` if it covers more than the file; returns the range saved, if any.
    pub fn save_if_grown(&self, table: &StoneGameIvTable) -> Result<Option<u64>, IvTableFileError> {
        let mut saved = self.saved.lock();
        if table.covered() <= *saved {
            return Ok(None);
        }
        let (covered, losing) = table.snapshot();
        IvTableFile { covered, losing }.save(&self.path)?;
        *saved = covered;
        Ok(Some(covered))
    }
}

/// What [`IvTableStore::open`] found.
#[derive(Debug)]
pub enum Opened {
    /// The table was loaded; every n below this is classified.
    Loaded(u64),
    /// No file yet: the table is computed and the file written.
    Missing,
    /// A table file that cannot be trusted (truncated, corrupt, another version, a wrong
    /// list): it is recomputed and overwritten.
    Untrusted(IvTableFileError),
}

impl IvTableStore {
    /// Loads the file into `table` at start-up. Refuses (so that the server does not
    /// start) a path whose directory does not exist or takes no new file, a file that
    /// cannot be read, a
    /// symbolic link, a file that is not a table at all (wrong magic: it is someone
    /// else's, and saving would overwrite it) and a table of a newer format (a newer
    /// build's, as in a rollback); a damaged table is only reported, to be recomputed.
    pub fn open(&self, table: &StoneGameIvTable) -> Result<Opened, IvTableFileError> {
        table_file::remove_stale_temporaries(&self.path);
        let opened = self.load(table)?;
        table_file::check_writable(&self.path)
            .map_err(|source| IvTableFileError::NotWritable { path: self.path.clone(), source })?;
        Ok(opened)
    }

    /// [`IvTableStore::open`]'s reading of the file.
    fn load(&self, table: &StoneGameIvTable) -> Result<Opened, IvTableFileError> {
        match self.load_into(table) {
            Ok(covered) => Ok(Opened::Loaded(covered)),
            Err(IvTableFileError::Io { path, source }) if source.kind() == io::ErrorKind::NotFound => {
                match table_file::directory_exists(&path) {
                    true => Ok(Opened::Missing),
                    false => Err(IvTableFileError::NoDirectory { path }),
                }
            }
            Err(
                err @ (IvTableFileError::Io { .. }
                | IvTableFileError::BadMagic { .. }
                | IvTableFileError::Link { .. }
                | IvTableFileError::NotWritable { .. }
                | IvTableFileError::UnsupportedVersion { .. }
                | IvTableFileError::UnsupportedFlags { .. }),
            ) => Err(err),
            Err(
                err @ (IvTableFileError::BadLength { .. }
                | IvTableFileError::BadChecksum { .. }
                | IvTableFileError::BadEncoding { .. }
                | IvTableFileError::BadList { .. }
                | IvTableFileError::NoDirectory { .. }),
            ) => Ok(Opened::Untrusted(err)),
        }
    }

    /// Saves `table` if it has grown, logging the outcome; a failed save is not fatal.
    pub fn save_or_report(&self, table: &StoneGameIvTable) {
        match self.save_if_grown(table) {
            Ok(Some(covered)) => {
                tracing::info!(path = %self.path.display(), covered, "stone game iv table saved")
            }
            Ok(None) => {}
            Err(err) => tracing::warn!("cannot save stone game iv table: {err}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::games::stone_game_iv::losing_positions_below;

    fn decode(bytes: &[u8]) -> Result<IvTableFile, IvTableFileError> {
        IvTableFile::decode(bytes, Path::new("iv.table"))
    }

    fn table() -> IvTableFile {
        IvTableFile { covered: 1_200_000, losing: losing_positions_below(1_200_000) }
    }

    #[test]
    fn round_trips_through_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iv.table");
        table().save(&path).unwrap();
        assert_eq!(IvTableFile::load(&path).unwrap(), table());
        // Saving again replaces the file and leaves no temporary behind.
        IvTableFile { covered: 10, losing: losing_positions_below(10) }.save(&path).unwrap();
        assert_eq!(IvTableFile::load(&path).unwrap().covered, 10);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let err = IvTableFile::load(Path::new("/nonexistent/iv.table")).unwrap_err();
        assert!(matches!(err, IvTableFileError::Io { .. }));
        assert!(err.to_string().starts_with("/nonexistent/iv.table: "), "{err}");
    }

    #[test]
    fn every_truncation_is_rejected() {
        let bytes = table().encode();
        for len in [0, 7, 8, 20, HEADER_BYTES, HEADER_BYTES + 4, bytes.len() / 2, bytes.len() - 1] {
            // Cut anywhere, even inside the magic, it is a damaged table (recomputed),
            // not someone else's file (refused).
            let err = decode(&bytes[..len]).unwrap_err();
            assert!(matches!(err, IvTableFileError::BadLength { .. }), "len {len}: {err}");
        }
        let mut padded = bytes.clone();
        padded.push(0);
        assert!(matches!(decode(&padded), Err(IvTableFileError::BadLength { .. })));
    }

    #[test]
    fn an_empty_file_is_recomputed_and_saves_left_by_dead_processes_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iv.table");
        fs::write(&path, b"").unwrap();
        let stale = [dir.path().join("iv.table.tmp4000000.0"), dir.path().join("iv.table.tmp12.3")];
        let kept = [dir.path().join("iv.table.tmpx.1"), dir.path().join("other.table.tmp12.3")];
        for file in stale.iter().chain(&kept) {
            fs::write(file, b"partial").unwrap();
        }
        let table = StoneGameIvTable::new(1000);
        assert!(matches!(
            IvTableStore::new(&path).open(&table),
            Ok(Opened::Untrusted(IvTableFileError::BadLength { .. }))
        ));
        assert!(stale.iter().all(|file| !file.exists()), "stale saves removed");
        assert!(kept.iter().all(|file| file.exists()), "nothing else touched");
    }

    #[test]
    fn a_flipped_bit_anywhere_is_rejected() {
        let bytes = table().encode();
        for at in (0..bytes.len()).step_by(997).chain([8, 16, 24, bytes.len() - 1]) {
            let mut corrupt = bytes.clone();
            corrupt[at] ^= 0x10;
            assert!(decode(&corrupt).is_err(), "flip at {at} accepted");
        }
        let mut corrupt = bytes;
        corrupt[HEADER_BYTES + 40] ^= 1;
        assert!(matches!(decode(&corrupt), Err(IvTableFileError::BadChecksum { .. })));
    }

    #[test]
    fn wrong_magic_and_version_are_rejected() {
        let mut bytes = table().encode();
        bytes[0] = b'X';
        assert!(matches!(decode(&bytes), Err(IvTableFileError::BadMagic { .. })));
        let mut bytes = table().encode();
        bytes[8] = 3;
        assert!(matches!(decode(&bytes), Err(IvTableFileError::UnsupportedVersion { version: 3, .. })));
    }

    /// A file in version 1: `u32` P-positions, no payload length.
    fn encode_v1(file: &IvTableFile) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION_U32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&file.covered.to_le_bytes());
        bytes.extend_from_slice(&(file.losing.len() as u64).to_le_bytes());
        for &p in &file.losing {
            bytes.extend_from_slice(&u32::try_from(p).unwrap().to_le_bytes());
        }
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    #[test]
    fn a_version_1_file_still_loads_and_is_saved_again_in_version_2() {
        let v1 = encode_v1(&table());
        assert_eq!(v1.len(), HEADER_BYTES + 4 * table().losing.len() + CRC_BYTES);
        let loaded = decode(&v1).unwrap();
        assert_eq!(loaded, table());
        let v2 = loaded.encode();
        assert_eq!(u32::from_le_bytes(v2[8..12].try_into().unwrap()), VERSION);
        // Gaps below 2^14 take two bytes, against four for a u32.
        assert!(v2.len() < v1.len() * 55 / 100, "{} bytes against {}", v2.len(), v1.len());
        assert_eq!(decode(&v2).unwrap(), table());
        // A version 1 file is checked as strictly as ever.
        let mut truncated = v1.clone();
        truncated.truncate(v1.len() - 4);
        assert!(matches!(decode(&truncated), Err(IvTableFileError::BadLength { .. })));
        let mut unsorted = table();
        unsorted.losing.swap(5, 6);
        assert!(matches!(decode(&encode_v1(&unsorted)), Err(IvTableFileError::BadList { .. })));
    }

    #[test]
    fn positions_above_2_to_the_32_round_trip_and_stay_unchecked_above_the_spot_check() {
        // Made-up positions beyond the 2^20 the load recomputes: only form is checked.
        let mut losing = losing_positions_below(1 << 20);
        losing.extend([1 << 20 | 1, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, 7_777_777_777, 9_999_999_999]);
        let file = IvTableFile { covered: 10_000_000_000, losing };
        let bytes = file.encode();
        assert_eq!(decode(&bytes).unwrap(), file);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iv.table");
        file.save(&path).unwrap();
        assert_eq!(IvTableFile::load(&path).unwrap(), file);
        // Beyond the largest table: refused.
        let too_large = IvTableFile { covered: crate::games::stone_game_iv::MAX_LIMIT + 2, ..file };
        assert!(matches!(decode(&too_large.encode()), Err(IvTableFileError::BadList { .. })));
    }

    /// `payload` as a version 2 file of `count` P-positions below `covered`, with a
    /// valid checksum.
    fn v2_with_payload(covered: u64, count: u64, payload: &[u8]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&VERSION.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&covered.to_le_bytes());
        bytes.extend_from_slice(&count.to_le_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        bytes.extend_from_slice(payload);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    #[test]
    fn only_minimal_varints_that_fill_the_payload_are_read() {
        // 0, 2, 5 as 0 then gaps minus one: 1, 2.
        let good = v2_with_payload(6, 3, &[0, 1, 2]);
        assert_eq!(decode(&good).unwrap(), IvTableFile { covered: 6, losing: vec![0, 2, 5] });
        assert_eq!(IvTableFile { covered: 6, losing: vec![0, 2, 5] }.encode(), good);
        let bad_encoding = |bytes: &[u8]| match decode(bytes) {
            Err(IvTableFileError::BadEncoding { index, .. }) => Some(index),
            _ => None,
        };
        // 1 written in two bytes: overlong.
        assert_eq!(bad_encoding(&v2_with_payload(6, 3, &[0, 0x81, 0x00, 2])), Some(1));
        // A varint cut short, a count the payload does not hold, bytes left over.
        assert_eq!(bad_encoding(&v2_with_payload(6, 3, &[0, 1, 0x82])), Some(2));
        assert_eq!(bad_encoding(&v2_with_payload(6, u64::MAX, &[0, 1, 2])), Some(3));
        assert_eq!(bad_encoding(&v2_with_payload(6, 2, &[0, 1, 2])), Some(2));
        // Eleven bytes, and ten whose last holds more than bit 63.
        assert_eq!(bad_encoding(&v2_with_payload(6, 1, &[0xFF; 11])), Some(0));
        let mut over = vec![0xFF; 9];
        over.push(0x02);
        assert_eq!(bad_encoding(&v2_with_payload(6, 1, &over)), Some(0));
        // The largest gap that fits, then one more P-position: past 2^64.
        let mut max = vec![0xFF; 9];
        max.push(0x01);
        assert_eq!(bad_encoding(&v2_with_payload(6, 1, &max)), Some(0));
        let err = decode(&v2_with_payload(6, 3, &[0, 1, 0x82])).unwrap_err();
        assert_eq!(err.to_string(), "iv.table: P-position 2 is not encoded as a minimal varint");
    }

    #[test]
    fn a_non_zero_reserved_word_is_refused_even_with_a_good_checksum() {
        let mut bytes = table().encode();
        bytes[12] = 1;
        let content = bytes.len() - CRC_BYTES;
        let crc = crc32fast::hash(&bytes[..content]);
        bytes[content..].copy_from_slice(&crc.to_le_bytes());
        let err = decode(&bytes).unwrap_err();
        assert!(matches!(err, IvTableFileError::UnsupportedFlags { flags: 1, .. }), "{err}");
        assert!(err.to_string().contains("reserved header word 0x1, expected 0 (a newer format?)"), "{err}");
    }

    #[test]
    fn a_well_formed_file_with_a_wrong_list_is_rejected() {
        let mut wrong = table();
        wrong.losing.retain(|&p| p != 5);
        assert!(matches!(decode(&wrong.encode()), Err(IvTableFileError::BadList { .. })));
        let mut beyond = table();
        beyond.covered = 1000;
        assert!(matches!(decode(&beyond.encode()), Err(IvTableFileError::BadList { .. })));
    }

    #[test]
    fn a_store_saves_only_when_the_table_grew_and_restores_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = IvTableStore::new(dir.path().join("iv.table"));
        let table = StoneGameIvTable::new(10_000_000);
        assert!(matches!(store.load_into(&table), Err(IvTableFileError::Io { .. })));
        assert_eq!(store.save_if_grown(&table).unwrap(), None);
        table.extend_to(1_000_000).unwrap();
        let covered = table.covered();
        assert_eq!(store.save_if_grown(&table).unwrap(), Some(covered));
        assert_eq!(store.save_if_grown(&table).unwrap(), None);

        let restarted = StoneGameIvTable::new(10_000_000);
        assert_eq!(IvTableStore::new(store.path()).load_into(&restarted).unwrap(), covered);
        assert_eq!(restarted.snapshot(), table.snapshot());

        fs::write(store.path(), b"GSIVLOSE garbage").unwrap();
        let after_corruption = StoneGameIvTable::new(10_000_000);
        assert!(IvTableStore::new(store.path()).load_into(&after_corruption).is_err());
        assert_eq!(after_corruption.covered(), 0);
    }

    #[test]
    fn open_refuses_what_it_could_never_save_or_would_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let table = StoneGameIvTable::new(10_000);
        let open = |path: PathBuf| IvTableStore::new(path).open(&table);
        assert!(matches!(
            open(dir.path().join("no/such/dir/iv.table")),
            Err(IvTableFileError::NoDirectory { .. })
        ));
        assert!(matches!(open(dir.path().join("iv.table")), Ok(Opened::Missing)));
        let notes = dir.path().join("notes.txt");
        fs::write(&notes, "notes").unwrap();
        assert!(matches!(open(notes), Err(IvTableFileError::BadMagic { .. })));
        let damaged = dir.path().join("damaged.table");
        let mut bytes = table_of(1000).encode();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&damaged, bytes).unwrap();
        assert!(matches!(open(damaged), Ok(Opened::Untrusted(IvTableFileError::BadChecksum { .. }))));
        assert_eq!(table.covered(), 0);
    }

    #[test]
    fn a_directory_where_nothing_can_be_created_is_refused() {
        // sysfs takes no new file, not even from root.
        let path = Path::new("/sys/gamesolver-iv.table");
        let err = IvTableStore::new(path).open(&StoneGameIvTable::new(1000)).unwrap_err();
        assert!(matches!(err, IvTableFileError::NotWritable { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("/sys/gamesolver-iv.table: cannot create a file in its directory, so the table could never be saved: "),
            "{err}"
        );
    }

    #[test]
    fn a_newer_format_is_refused_and_kept_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let table = StoneGameIvTable::new(10_000);
        for (at, value) in [(8, 3u8), (12, 1)] {
            // A valid checksum: written that way, not damaged.
            let mut bytes = table_of(1000).encode();
            bytes[at] = value;
            let content = bytes.len() - CRC_BYTES;
            let crc = crc32fast::hash(&bytes[..content]);
            bytes[content..].copy_from_slice(&crc.to_le_bytes());
            let path = dir.path().join(format!("newer-{at}.table"));
            fs::write(&path, &bytes).unwrap();
            let err = IvTableStore::new(&path).open(&table).unwrap_err();
            assert!(
                matches!(
                    err,
                    IvTableFileError::UnsupportedVersion { version: 3, .. }
                        | IvTableFileError::UnsupportedFlags { flags: 1, .. }
                ),
                "{err}"
            );
            assert!(err.to_string().ends_with("refusing to overwrite it (remove it to recompute)"), "{err}");
            assert_eq!(fs::read(&path).unwrap(), bytes);
        }
        assert_eq!(table.covered(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_at_the_table_path_is_refused_even_to_a_good_table() {
        let dir = tempfile::tempdir().unwrap();
        let (path, target) = (dir.path().join("iv.table"), dir.path().join("elsewhere.table"));
        table_of(1000).save(&target).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let table = StoneGameIvTable::new(10_000);
        let err = IvTableStore::new(&path).open(&table).unwrap_err();
        assert_eq!(err.to_string(), format!("{}: a symbolic link; refusing to follow it", path.display()));
        assert_eq!(table.covered(), 0);
        assert_eq!(IvTableFile::load(&target).unwrap(), table_of(1000));
    }

    fn table_of(covered: u64) -> IvTableFile {
        IvTableFile { covered, losing: losing_positions_below(covered) }
    }
}

//! The tables on disk, the same for every table game, so that a restarted server answers
//! at once: one file format frame, one verified load, one atomic save, one store that
//! binds a file to its live table.
//!
//! Every table file is, little-endian: the game's magic (8 bytes), version (u32),
//! reserved (u32, = 0), covered (u64: every pile below it is in the table), the game's
//! body ([`TableCodec`], in the game's folder), and the CRC-32 of everything before it
//! (u32). A file is checked as a whole before anything of it is used:
//! - another magic: someone else's file, refused (saving would overwrite it);
//! - a version the game does not read, or a reserved word that is not 0: a newer build's
//!   (as in a rollback), refused and kept;
//! - a length the header does not imply, a checksum that does not match, a body the game
//!   does not accept: damaged, reported, and the table recomputed and saved over it.
//!
//! A link at the table's path is refused, and a save is atomic and writes through no
//! link (`disk.rs`).

mod disk;
mod store;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};

pub use crate::games::table::TableCodec;
use crate::games::GameKind;
pub use store::{bind, bind_cached, Opened, StoredTable, TableStore};

/// The header every table file starts with: magic, version, reserved word, covered.
const HEADER_BYTES: usize = 24;
/// The CRC-32 at the end.
const CRC_BYTES: usize = 4;

/// Why a table file was not saved or not trusted.
#[derive(Debug, thiserror::Error)]
pub enum TableFileError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Not a table file of this game.
    #[error("{path}: not a {} table (bad magic); refusing to overwrite it", game.name())]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The game whose table was expected.
        game: GameKind,
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
    /// The size does not match the header: truncated or padded.
    #[error("{path}: {found} bytes, expected {expected}")]
    BadLength {
        /// The file.
        path: PathBuf,
        /// The size the header implies (the least size, for a file too short to tell).
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
    /// Larger than the most a table cache keeps: not read.
    #[error("{path}: {bytes} bytes, more than the table cache keeps ({limit}, --table-cache-max-bytes)")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
        /// The cache's limit.
        limit: u64,
    },
    /// Well-formed, but not the table it claims to be (the game's codec says why).
    #[error("{path}: {source}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with the body.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl TableFileError {
    /// True for a file that is damaged, to be recomputed and overwritten; false for one
    /// that start-up refuses (someone else's, a newer build's, unreadable, unsavable).
    pub fn is_damage(&self) -> bool {
        match self {
            TableFileError::BadLength { .. }
            | TableFileError::BadChecksum { .. }
            | TableFileError::TooLarge { .. }
            | TableFileError::Invalid { .. } => true,
            TableFileError::Io { .. }
            | TableFileError::BadMagic { .. }
            | TableFileError::NoDirectory { .. }
            | TableFileError::NotWritable { .. }
            | TableFileError::Link { .. }
            | TableFileError::UnsupportedVersion { .. }
            | TableFileError::UnsupportedFlags { .. } => false,
        }
    }
}

/// A table's contents as a file: every [`TableCodec`] framed, checked, read and saved
/// the same way.
pub trait TableFile: TableCodec {
    /// The file's bytes, in the current version.
    fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_BYTES + CRC_BYTES);
        bytes.extend_from_slice(&Self::MAGIC);
        bytes.extend_from_slice(&Self::VERSION.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        bytes.extend_from_slice(&self.covered().to_le_bytes());
        self.encode_body(&mut bytes);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Parses and verifies the bytes of a table file; `path` only names it in errors.
    fn decode(bytes: &[u8], path: &Path) -> Result<Self, TableFileError> {
        let path = path.to_path_buf();
        let found = bytes.len() as u64;
        let least = (HEADER_BYTES + CRC_BYTES) as u64;
        let magic = Self::MAGIC;
        if bytes.len() < magic.len() && magic.starts_with(bytes) {
            // Empty, or cut inside the magic: a damaged table, not someone else's file.
            return Err(TableFileError::BadLength { path, expected: least, found });
        }
        if bytes.len() < magic.len() || bytes[..magic.len()] != magic {
            return Err(TableFileError::BadMagic { path, game: Self::GAME });
        }
        if found < least {
            return Err(TableFileError::BadLength { path, expected: least, found });
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if !Self::READS.contains(&version) {
            return Err(TableFileError::UnsupportedVersion { path, version });
        }
        let flags = u32_at(12);
        if flags != 0 {
            return Err(TableFileError::UnsupportedFlags { path, flags });
        }
        let covered = u64::from_le_bytes(bytes[16..HEADER_BYTES].try_into().expect("8 bytes"));
        let expected = Self::file_len(version, covered, &bytes[HEADER_BYTES..]).unwrap_or_else(|least| least);
        if expected != found {
            return Err(TableFileError::BadLength { path, expected, found });
        }
        let (content, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
        if crc32fast::hash(content) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(TableFileError::BadChecksum { path });
        }
        Self::decode_body(version, covered, &content[HEADER_BYTES..])
            .map_err(|source| TableFileError::Invalid { path, source: source.into() })
    }

    /// Reads and verifies `path`. A symbolic link at `path` is refused, not followed.
    fn load(path: &Path) -> Result<Self, TableFileError> {
        let bytes = disk::read(path).map_err(|source| match disk::is_link(&source, path) {
            true => TableFileError::Link { path: path.into() },
            false => TableFileError::Io { path: path.into(), source },
        })?;
        Self::decode(&bytes, path)
    }

    /// Writes the table to `path` atomically: a temporary file created exclusively beside
    /// it, flushed to disk, then renamed over it.
    fn save(&self, path: &Path) -> Result<(), TableFileError> {
        disk::write_atomically(path, &self.encode())
            .map_err(|source| TableFileError::Io { path: path.into(), source })
    }
}

impl<C: TableCodec> TableFile for C {}

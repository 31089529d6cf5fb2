//! The Nim Square Grundy table on disk, so that a restarted server answers at once: the
//! same atomic save and verified load as the Stone Game IV table ([`crate::iv_table_file`]).
//!
//! Layout, little-endian: magic `GSNIMGRU` (8 bytes), version (u32, = 1), reserved (u32,
//! = 0), covered (u64: every pile below it has its value), covered × u16 values, then
//! the CRC-32 of everything before it (u32). A file that fails any check, or whose
//! values fail [`check_grundy_values`], is recomputed; a file with another magic is
//! someone else's and refused.

use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::games::nim_square::{check_grundy_values, InvalidGrundyTable};
use crate::games::GrundyTable;
use crate::table_file;

const MAGIC: [u8; 8] = *b"GSNIMGRU";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 24;
const CRC_BYTES: usize = 4;

/// Why a Grundy table file was not saved or not trusted.
#[derive(Debug, thiserror::Error)]
pub enum GrundyTableFileError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// Not a Grundy table file.
    #[error("{path}: not a nim square table (bad magic); refusing to overwrite it")]
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
    /// A table of a version this build does not read, or with a reserved word set:
    /// written by a newer build, so refused rather than overwritten.
    #[error(
        "{path}: table format version {version} (reserved word {reserved:#x}), which this build does not read \
         (a newer build's?); refusing to overwrite it (remove it to recompute)"
    )]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// The version found.
        version: u32,
        /// The reserved word found.
        reserved: u32,
    },
    /// Truncated, padded, or failing its checksum.
    #[error("{path}: {what}")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Well-formed, but the values are not the Grundy values they claim to be.
    #[error("{path}: {source}")]
    BadValues {
        /// The file.
        path: PathBuf,
        /// What is wrong with them.
        source: InvalidGrundyTable,
    },
}

/// The file's bytes for the values of the piles below `covered`.
pub fn encode(covered: u64, values: &[u16]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + 2 * values.len() + CRC_BYTES);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&covered.to_le_bytes());
    values.iter().for_each(|value| bytes.extend_from_slice(&value.to_le_bytes()));
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

/// Parses and verifies a file's bytes into (covered, values); `path` names it in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<(u64, Vec<u16>), GrundyTableFileError> {
    let damaged = |what: String| GrundyTableFileError::Damaged { path: path.into(), what };
    if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
        // Empty, or cut inside the magic: a damaged table, not someone else's file.
        return Err(damaged(format!("{} bytes, shorter than the header", bytes.len())));
    }
    if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
        return Err(GrundyTableFileError::BadMagic { path: path.into() });
    }
    if bytes.len() < HEADER_BYTES + CRC_BYTES {
        return Err(damaged(format!("{} bytes, shorter than the header", bytes.len())));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let reserved = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
    if (version, reserved) != (VERSION, 0) {
        return Err(GrundyTableFileError::NewerFormat { path: path.into(), version, reserved });
    }
    let covered = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
    let expected = covered.saturating_mul(2).saturating_add((HEADER_BYTES + CRC_BYTES) as u64);
    if expected != bytes.len() as u64 {
        return Err(damaged(format!("{} bytes, expected {expected}", bytes.len())));
    }
    let (content, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
    if crc32fast::hash(content) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(damaged("checksum mismatch".into()));
    }
    let values: Vec<u16> =
        content[HEADER_BYTES..].chunks_exact(2).map(|v| u16::from_le_bytes([v[0], v[1]])).collect();
    check_grundy_values(covered, &values)
        .map_err(|source| GrundyTableFileError::BadValues { path: path.into(), source })?;
    Ok((covered, values))
}

/// What [`GrundyTableStore::open`] found.
#[derive(Debug)]
pub enum GrundyOpened {
    /// The table was loaded; every pile below this has its value.
    Loaded(u64),
    /// No file yet: the table is computed and the file written.
    Missing,
    /// A damaged file: recomputed and overwritten.
    Untrusted(GrundyTableFileError),
}

/// A table file bound to the live table: loaded once, saved whenever the table has grown.
#[derive(Debug)]
pub struct GrundyTableStore {
    path: PathBuf,
    /// The `covered` of what the file holds (as far as this process knows).
    saved: Mutex<u64>,
}

impl GrundyTableStore {
    /// A store for the file at `path`; nothing is read yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        GrundyTableStore { path: path.into(), saved: Mutex::new(0) }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the file into `table` at start-up. Refuses a path whose directory does not
    /// exist or takes no new file, a file that cannot be read, a symbolic link, one that is not a Grundy table
    /// and one of a newer format; a damaged table is only reported, to be recomputed.
    pub fn open(&self, table: &GrundyTable) -> Result<GrundyOpened, GrundyTableFileError> {
        table_file::remove_stale_temporaries(&self.path);
        let opened = self.load(table)?;
        table_file::check_writable(&self.path)
            .map_err(|source| GrundyTableFileError::NotWritable { path: self.path.clone(), source })?;
        Ok(opened)
    }

    /// [`GrundyTableStore::open`]'s reading of the file.
    fn load(&self, table: &GrundyTable) -> Result<GrundyOpened, GrundyTableFileError> {
        let io = |source| GrundyTableFileError::Io { path: self.path.clone(), source };
        let bytes = match table_file::read(&self.path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                return match table_file::directory_exists(&self.path) {
                    true => Ok(GrundyOpened::Missing),
                    false => Err(GrundyTableFileError::NoDirectory { path: self.path.clone() }),
                };
            }
            Err(err) if table_file::is_link(&err, &self.path) => {
                return Err(GrundyTableFileError::Link { path: self.path.clone() })
            }
            Err(err) => return Err(io(err)),
        };
        let mut saved = self.saved.lock();
        let restored = decode(&bytes, &self.path).and_then(|(covered, values)| {
            table
                .restore(covered, values)
                .map(|()| covered)
                .map_err(|source| GrundyTableFileError::BadValues { path: self.path.clone(), source })
        });
        match restored {
            Ok(covered) => {
                *saved = covered;
                Ok(GrundyOpened::Loaded(covered))
            }
            Err(err @ (GrundyTableFileError::BadMagic { .. } | GrundyTableFileError::NewerFormat { .. })) => {
                Err(err)
            }
            Err(err) => Ok(GrundyOpened::Untrusted(err)),
        }
    }

    /// Saves `table` if it covers more than the file; returns the range saved, if any.
    pub fn save_if_grown(&self, table: &GrundyTable) -> Result<Option<u64>, GrundyTableFileError> {
        let mut saved = self.saved.lock();
        if table.covered() <= *saved {
            return Ok(None);
        }
        let (covered, values) = table.snapshot();
        table_file::write_atomically(&self.path, &encode(covered, &values))
            .map_err(|source| GrundyTableFileError::Io { path: self.path.clone(), source })?;
        *saved = covered;
        Ok(Some(covered))
    }

    /// Saves `table` if it has grown, logging the outcome; a failed save is not fatal.
    pub fn save_or_report(&self, table: &GrundyTable) {
        match self.save_if_grown(table) {
            Ok(Some(covered)) => {
                tracing::info!(path = %self.path.display(), covered, "nim square table saved")
            }
            Ok(None) => {}
            Err(err) => tracing::warn!("cannot save nim square table: {err}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_saved_table_loads_back_and_damage_is_recomputed_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grundy.table");
        let table = GrundyTable::new(10_000);
        table.extend_to(5_000).unwrap();
        let store = GrundyTableStore::new(&path);
        assert!(matches!(store.open(&table).unwrap(), GrundyOpened::Missing));
        assert_eq!(store.save_if_grown(&table).unwrap(), Some(table.covered()));
        assert_eq!(store.save_if_grown(&table).unwrap(), None, "nothing new to save");

        let fresh = GrundyTable::new(10_000);
        assert!(
            matches!(GrundyTableStore::new(&path).open(&fresh).unwrap(), GrundyOpened::Loaded(c) if c == table.covered())
        );
        assert_eq!(fresh.snapshot(), table.snapshot());

        // Every truncation and a flipped bit are refused before anything is loaded.
        let bytes = fs::read(&path).unwrap();
        for len in [0, 7, 8, 27, bytes.len() - 1] {
            assert!(
                matches!(decode(&bytes[..len], &path), Err(GrundyTableFileError::Damaged { .. })),
                "{len} bytes"
            );
        }
        let mut flipped = bytes.clone();
        flipped[HEADER_BYTES + 10] ^= 1;
        assert!(matches!(decode(&flipped, &path), Err(GrundyTableFileError::Damaged { .. })));
        // A wrong value with a good checksum fails the values' check.
        let (covered, mut values) = table.snapshot();
        values[1] = 7;
        assert!(matches!(
            decode(&encode(covered, &values), &path),
            Err(GrundyTableFileError::BadValues { .. })
        ));
    }

    #[test]
    fn another_files_magic_is_refused_and_a_missing_directory_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-a-table");
        fs::write(&path, b"hello, world, this is not a table").unwrap();
        let table = GrundyTable::new(100);
        assert!(matches!(
            GrundyTableStore::new(&path).open(&table),
            Err(GrundyTableFileError::BadMagic { .. })
        ));
        let nowhere = dir.path().join("missing").join("grundy.table");
        assert!(matches!(
            GrundyTableStore::new(nowhere).open(&table),
            Err(GrundyTableFileError::NoDirectory { .. })
        ));
    }

    #[test]
    fn a_newer_format_is_refused_and_kept_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grundy.table");
        let mut bytes = encode(3, &[0, 1, 0]);
        bytes[8] = 2;
        let content = bytes.len() - CRC_BYTES;
        let crc = crc32fast::hash(&bytes[..content]);
        bytes[content..].copy_from_slice(&crc.to_le_bytes());
        fs::write(&path, &bytes).unwrap();
        let err = GrundyTableStore::new(&path).open(&GrundyTable::new(100)).unwrap_err();
        assert!(matches!(err, GrundyTableFileError::NewerFormat { version: 2, reserved: 0, .. }), "{err}");
        assert_eq!(fs::read(&path).unwrap(), bytes);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_at_the_table_path_is_refused_even_to_a_good_table() {
        let dir = tempfile::tempdir().unwrap();
        let (path, target) = (dir.path().join("grundy.table"), dir.path().join("elsewhere.table"));
        let grown = GrundyTable::new(1_000);
        grown.extend_to(500).unwrap();
        GrundyTableStore::new(&target).save_if_grown(&grown).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let table = GrundyTable::new(1_000);
        let err = GrundyTableStore::new(&path).open(&table).unwrap_err();
        assert_eq!(err.to_string(), format!("{}: a symbolic link; refusing to follow it", path.display()));
        assert_eq!(table.covered(), 0);
    }
}

//! A table file bound to its live table: loaded once at start-up, saved whenever the
//! table has grown since. Saves are serialised, so the file only grows; and a save does
//! not replace a file that covers as much already, so that of two processes sharing it
//! (two runs of the client over its table cache) the smaller table does not undo the
//! larger's save.

use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use super::{disk, TableFile, TableFileError};
use crate::games::table::{Table, TableCodec, TableGame};

/// What [`TableStore::open`] found.
#[derive(Debug)]
pub enum Opened {
    /// The table was loaded; every pile below this is in it.
    Loaded(u64),
    /// No file yet: the table is computed and the file written.
    Missing,
    /// A table file that cannot be trusted (truncated, corrupt, a wrong body): it is
    /// recomputed and overwritten.
    Untrusted(TableFileError),
}

/// The file of one table game's table.
#[derive(Debug)]
pub struct TableStore<T> {
    path: PathBuf,
    /// The `covered` of what the file holds (as far as this process knows).
    saved: Mutex<u64>,
    /// The most bytes the file may take (a cache's limit): a larger table is not saved,
    /// and a larger file not read.
    max_bytes: Option<u64>,
    /// A table too large to keep has been said so in the log.
    said_too_large: AtomicBool,
    /// The file as opening found it (size, time written), to tell a file another
    /// process saved since from the one this process read (or found damaged).
    seen: Mutex<Option<(u64, std::time::SystemTime)>>,
    table: PhantomData<fn(&T)>,
}

impl<T: TableGame> TableStore<T> {
    /// A store for the file at `path`; nothing is read yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        TableStore {
            path: path.into(),
            saved: Mutex::new(0),
            max_bytes: None,
            said_too_large: AtomicBool::new(false),
            seen: Mutex::new(None),
            table: PhantomData,
        }
    }

    /// A store that neither reads nor saves a file of more than `max_bytes`.
    pub fn with_limit(self, max_bytes: u64) -> Self {
        TableStore { max_bytes: Some(max_bytes), ..self }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the file into `table` and returns the range it covers; on any error the
    /// table is left as it was.
    pub fn load_into(&self, table: &T) -> Result<u64, TableFileError> {
        let mut saved = self.saved.lock();
        if let Some(limit) = self.max_bytes {
            let bytes = std::fs::symlink_metadata(&self.path).map_or(0, |meta| meta.len());
            if bytes > limit {
                return Err(TableFileError::TooLarge { path: self.path.clone(), bytes, limit });
            }
        }
        let file = T::Saved::load(&self.path)?;
        let covered = file.covered();
        table
            .restore(file)
            .map_err(|source| TableFileError::Invalid { path: self.path.clone(), source: source.into() })?;
        *saved = covered;
        Ok(covered)
    }

    /// Saves `table` if it covers more than the file; returns the range saved, if any.
    pub fn save_if_grown(&self, table: &T) -> Result<Option<u64>, TableFileError> {
        let mut saved = self.saved.lock();
        if table.covered() <= *saved {
            return Ok(None);
        }
        let file = table.saved();
        let covered = file.covered();
        // Another process (a run sharing the cache) saved a table covering as much since
        // this one opened the file: replacing it would only lose work. The file opening
        // read, or found damaged, is replaced.
        let changed = disk::stamp(&self.path).is_some_and(|now| Some(now) != *self.seen.lock());
        if changed && disk::covered_on_disk(&self.path, &T::Saved::MAGIC).is_some_and(|on| on >= covered) {
            *saved = covered;
            return Ok(None);
        }
        let bytes = file.encode();
        if let Some(limit) = self.max_bytes.filter(|&limit| bytes.len() as u64 > limit) {
            if !self.said_too_large.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    path = %self.path.display(),
                    "the {} table ({} bytes) is larger than the table cache keeps ({limit}, \
                     --table-cache-max-bytes); not kept",
                    table.game().name(),
                    bytes.len()
                );
            }
            return Ok(None);
        }
        disk::write_atomically(&self.path, &bytes)
            .map_err(|source| TableFileError::Io { path: self.path.clone(), source })?;
        *saved = covered;
        Ok(Some(covered))
    }

    /// Loads the file into `table` at start-up. Refuses (so that the server does not
    /// start) a path whose directory does not exist or takes no new file, a file that
    /// cannot be read, a symbolic link, a file that is not this game's table (it is
    /// someone else's, and saving would overwrite it) and a table of a newer format (a
    /// newer build's, as in a rollback); a damaged table is only reported, to be
    /// recomputed.
    pub fn open(&self, table: &T) -> Result<Opened, TableFileError> {
        disk::remove_stale_temporaries(&self.path);
        *self.seen.lock() = disk::stamp(&self.path);
        let opened = match self.load_into(table) {
            Ok(covered) => Opened::Loaded(covered),
            Err(TableFileError::Io { path, source }) if source.kind() == io::ErrorKind::NotFound => {
                match disk::directory_exists(&path) {
                    true => Opened::Missing,
                    false => return Err(TableFileError::NoDirectory { path }),
                }
            }
            Err(err) if err.is_damage() => Opened::Untrusted(err),
            Err(err) => return Err(err),
        };
        disk::check_writable(&self.path)
            .map_err(|source| TableFileError::NotWritable { path: self.path.clone(), source })?;
        Ok(opened)
    }

    /// Saves `table` if it has grown, logging the outcome; a failed save is not fatal.
    pub fn save_or_report(&self, table: &T) {
        let game = table.game().name();
        match self.save_if_grown(table) {
            Ok(Some(covered)) => tracing::info!(path = %self.path.display(), covered, "{game} table saved"),
            Ok(None) => {}
            Err(err) => tracing::warn!("cannot save {game} table: {err}"),
        }
    }
}

/// A table and its file, whatever the game: what the server's lifecycle holds.
pub trait StoredTable: Send + Sync + std::fmt::Debug {
    /// The live table.
    fn table(&self) -> Arc<dyn Table>;
    /// The file.
    fn path(&self) -> &Path;
    /// [`TableStore::open`].
    fn open(&self) -> Result<Opened, TableFileError>;
    /// [`TableStore::save_or_report`].
    fn save_or_report(&self);
    /// True for a file in a table cache, which may be unusable without stopping anything.
    fn cached(&self) -> bool;
}

/// The table `table` bound to the file at `path`.
pub fn bind<T: TableGame>(table: Arc<T>, path: PathBuf) -> Arc<dyn StoredTable> {
    Arc::new(Bound { store: TableStore::new(path), table })
}

/// The table `table` bound to the file at `path` in a table cache, which reads and keeps
/// no file of more than `max_bytes`.
pub fn bind_cached<T: TableGame>(table: Arc<T>, path: PathBuf, max_bytes: u64) -> Arc<dyn StoredTable> {
    Arc::new(Bound { store: TableStore::new(path).with_limit(max_bytes), table })
}

/// [`bind`]'s binding.
#[derive(Debug)]
struct Bound<T: TableGame> {
    store: TableStore<T>,
    table: Arc<T>,
}

impl<T: TableGame> StoredTable for Bound<T> {
    fn table(&self) -> Arc<dyn Table> {
        Arc::clone(&self.table) as Arc<dyn Table>
    }
    fn path(&self) -> &Path {
        self.store.path()
    }
    fn open(&self) -> Result<Opened, TableFileError> {
        self.store.open(&self.table)
    }
    fn save_or_report(&self) {
        self.store.save_or_report(&self.table);
    }
    fn cached(&self) -> bool {
        self.store.max_bytes.is_some()
    }
}

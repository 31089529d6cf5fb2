//! A table file bound to its live table: loaded once at start-up, saved whenever the
//! table has grown since. Saves are serialised, so the file only grows.

use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    table: PhantomData<fn(&T)>,
}

impl<T: TableGame> TableStore<T> {
    /// A store for the file at `path`; nothing is read yet.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        TableStore { path: path.into(), saved: Mutex::new(0), table: PhantomData }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Loads the file into `table` and returns the range it covers; on any error the
    /// table is left as it was.
    pub fn load_into(&self, table: &T) -> Result<u64, TableFileError> {
        let mut saved = self.saved.lock();
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
        file.save(&self.path)?;
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
}

/// The table `table` bound to the file at `path`.
pub fn bind<T: TableGame>(table: Arc<T>, path: PathBuf) -> Arc<dyn StoredTable> {
    Arc::new(Bound { store: TableStore::new(path), table })
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
}

//! The tables' life in a server, the same for each table-driven game: loaded from its
//! file before serving, extended in the background while serving if asked, saved when
//! it has grown.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::metrics::Metrics;
use crate::games::{GameKind, GrundyTable, StoneGameIvTable};
use crate::grundy_table_file::{GrundyOpened, GrundyTableFileError, GrundyTableStore};
use crate::iv_table_file::{IvTableFileError, IvTableStore, Opened};

/// What the lifecycle asks of a table and its file.
pub(crate) trait SavedTable: Send + Sync + 'static {
    /// The file bound to the table.
    type Store: Send + Sync + 'static;
    /// Why the file cannot be used.
    type Error: std::fmt::Display + Send + 'static;
    /// The game the table answers.
    const GAME: GameKind;

    /// A store for the file at `path`.
    fn store(path: PathBuf) -> Self::Store;
    /// The store's file.
    fn path(store: &Self::Store) -> &Path;
    /// Loads the file: `Ok(Some(covered))` loaded, `Ok(None)` missing, `Err` refused,
    /// with a damaged file reported by `Ok(Err(..))` inside (recomputed).
    fn open(store: &Self::Store, table: &Self) -> Result<Result<Option<u64>, Self::Error>, Self::Error>;
    /// Saves the table if it has grown, logging the outcome.
    fn save_or_report(store: &Self::Store, table: &Self);
    /// The largest pile the table answers.
    fn limit(&self) -> u64;
    /// Whether pile `n` is beyond what the table covers.
    fn needs_extension(&self, n: u64) -> bool;
    /// Grows the table to cover `n`; true when it did.
    fn extend(&self, n: u64) -> bool;
    /// Piles below this are covered.
    fn covered(&self) -> u64;
}

impl SavedTable for StoneGameIvTable {
    type Store = IvTableStore;
    type Error = IvTableFileError;
    const GAME: GameKind = GameKind::StoneGameIv;

    fn store(path: PathBuf) -> IvTableStore {
        IvTableStore::new(path)
    }
    fn path(store: &IvTableStore) -> &Path {
        store.path()
    }
    fn open(
        store: &IvTableStore,
        table: &Self,
    ) -> Result<Result<Option<u64>, IvTableFileError>, IvTableFileError> {
        Ok(match store.open(table)? {
            Opened::Loaded(covered) => Ok(Some(covered)),
            Opened::Missing => Ok(None),
            Opened::Untrusted(err) => Err(err),
        })
    }
    fn save_or_report(store: &IvTableStore, table: &Self) {
        store.save_or_report(table);
    }
    fn limit(&self) -> u64 {
        StoneGameIvTable::limit(self)
    }
    fn needs_extension(&self, n: u64) -> bool {
        StoneGameIvTable::needs_extension(self, n)
    }
    fn extend(&self, n: u64) -> bool {
        self.extend_to(n).is_ok()
    }
    fn covered(&self) -> u64 {
        StoneGameIvTable::covered(self)
    }
}

impl SavedTable for GrundyTable {
    type Store = GrundyTableStore;
    type Error = GrundyTableFileError;
    const GAME: GameKind = GameKind::NimSquare;

    fn store(path: PathBuf) -> GrundyTableStore {
        GrundyTableStore::new(path)
    }
    fn path(store: &GrundyTableStore) -> &Path {
        store.path()
    }
    fn open(
        store: &GrundyTableStore,
        table: &Self,
    ) -> Result<Result<Option<u64>, GrundyTableFileError>, GrundyTableFileError> {
        Ok(match store.open(table)? {
            GrundyOpened::Loaded(covered) => Ok(Some(covered)),
            GrundyOpened::Missing => Ok(None),
            GrundyOpened::Untrusted(err) => Err(err),
        })
    }
    fn save_or_report(store: &GrundyTableStore, table: &Self) {
        store.save_or_report(table);
    }
    fn limit(&self) -> u64 {
        GrundyTable::limit(self)
    }
    fn needs_extension(&self, n: u64) -> bool {
        GrundyTable::needs_extension(self, n)
    }
    fn extend(&self, n: u64) -> bool {
        self.extend_to(n).is_ok()
    }
    fn covered(&self) -> u64 {
        GrundyTable::covered(self)
    }
}

/// A table and, with its file flag, the file that keeps it across restarts.
#[derive(Debug)]
pub(crate) struct TableLifecycle<T: SavedTable> {
    table: Arc<T>,
    store: Option<Arc<T::Store>>,
    metrics: Metrics,
}

impl<T: SavedTable + std::fmt::Debug> TableLifecycle<T>
where
    T::Store: std::fmt::Debug,
{
    /// Step 1, before serving: loads the file into the table. A file that cannot be used
    /// at all stops the start; a damaged one is recomputed.
    pub(crate) async fn open(
        table: Arc<T>,
        file: Option<PathBuf>,
        metrics: Metrics,
    ) -> Result<Self, T::Error> {
        let store = file.map(|path| Arc::new(T::store(path)));
        if let Some(store) = &store {
            let (opening, into) = (Arc::clone(store), Arc::clone(&table));
            let opened = tokio::task::spawn_blocking(move || T::open(&opening, &into))
                .await
                .unwrap_or_else(|panicked| std::panic::resume_unwind(panicked.into_panic()))?;
            let (path, game) = (T::path(store).display(), T::GAME.name());
            match opened {
                Ok(Some(covered)) => tracing::info!(%path, covered, "{game} table loaded"),
                Ok(None) => tracing::info!(%path, "no {game} table yet; it will be computed and saved"),
                Err(err) => tracing::warn!("ignoring {game} table: {err}; recomputing"),
            }
        }
        Ok(TableLifecycle { table, store, metrics })
    }

    /// Step 2, while serving: covers piles below `n` on a thread of its own, then saves.
    /// Requests inside the range covered so far are answered meanwhile, and larger ones
    /// wait for (then continue) this extension. A plain thread, not the blocking pool, so
    /// that it never delays the runtime's shutdown.
    pub(crate) fn precompute_in_background(&self, n: u64) {
        let n = n.min(self.table.limit() + 1);
        if n == 0 || !self.table.needs_extension(n - 1) {
            return;
        }
        let (table, store, metrics) = (Arc::clone(&self.table), self.store.clone(), self.metrics.clone());
        let name = format!("{}-precompute", T::GAME.label());
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let started = Instant::now();
            if table.extend(n - 1) {
                let seconds = started.elapsed().as_secs_f64();
                metrics.observe_extension(T::GAME, "precompute", seconds);
                tracing::info!(covered = table.covered(), seconds, "{} table precomputed", T::GAME.name());
            }
            if let Some(store) = store {
                T::save_or_report(&store, &table);
            }
        });
        if let Err(err) = spawned {
            tracing::warn!("no {} precompute: {err}", T::GAME.name());
        }
    }

    /// Step 3, after serving: saves the table if requests grew it.
    pub(crate) async fn save(self) {
        if let Some(store) = self.store {
            let table = self.table;
            let _ = tokio::task::spawn_blocking(move || T::save_or_report(&store, &table)).await;
        }
    }
}

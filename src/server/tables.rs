//! The tables' life in a server, the same for each table game: loaded from its file
//! before serving, extended in the background while serving if asked, saved when it has
//! grown. Nothing here names a game: the games' tables come from [`Tables`], their flags
//! from [`TablesConfig`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::config::TablesConfig;
use super::metrics::Metrics;
use crate::games::table::{Table, TableGame};
use crate::games::{GameKind, TableVisitor, Tables};
use crate::tables::{Opened, StoredTable, TableFileError};

/// A table file that start-up cannot use: which game's, and why.
#[derive(Debug, thiserror::Error)]
#[error("{} table: {error}", game.name())]
pub struct TableError {
    /// The game whose table it is.
    pub game: GameKind,
    /// Why the file cannot be used. Not a `source`: the message already carries it, and
    /// `{:#}` would print it twice.
    pub error: TableFileError,
}

/// Every table bound to the file its flag names, if any.
pub(crate) fn files(
    tables: &Tables,
    config: &TablesConfig,
) -> Vec<(Arc<dyn Table>, Option<Arc<dyn StoredTable>>)> {
    struct Files<'a>(&'a TablesConfig, Vec<(Arc<dyn Table>, Option<Arc<dyn StoredTable>>)>);
    impl TableVisitor for Files<'_> {
        fn visit<T: TableGame>(&mut self, table: &Arc<T>) {
            let file: Option<PathBuf> = self.0.get(table.game()).and_then(|config| config.file.clone());
            let stored = file.map(|path| crate::tables::bind(Arc::clone(table), path));
            self.1.push((Arc::clone(table) as Arc<dyn Table>, stored));
        }
    }
    let mut files = Files(config, Vec::new());
    tables.visit(&mut files);
    files.1
}

/// Opens every table file of `config` into fresh tables of its limits, as start-up
/// would, and keeps nothing: what `--check-config` asks.
pub(crate) fn check(config: &TablesConfig) -> Result<(), TableError> {
    let tables = config.tables();
    for (table, stored) in files(&tables, config) {
        if let Some(stored) = stored {
            stored.open().map_err(|error| TableError { game: table.game(), error })?;
        }
    }
    Ok(())
}

/// A table and, with its file flag, the file that keeps it across restarts.
#[derive(Debug)]
pub(crate) struct TableLifecycle {
    table: Arc<dyn Table>,
    store: Option<Arc<dyn StoredTable>>,
    metrics: Metrics,
}

impl TableLifecycle {
    /// Step 1, before serving: loads every table's file into its table. A file that
    /// cannot be used at all stops the start; a damaged one is recomputed.
    pub(crate) async fn open_all(
        tables: &Tables,
        config: &TablesConfig,
        metrics: &Metrics,
    ) -> Result<Vec<TableLifecycle>, TableError> {
        let mut opened = Vec::new();
        for (table, store) in files(tables, config) {
            opened.push(TableLifecycle::open(table, store, metrics.clone()).await?);
        }
        Ok(opened)
    }

    /// [`TableLifecycle::open_all`] for one table.
    async fn open(
        table: Arc<dyn Table>,
        store: Option<Arc<dyn StoredTable>>,
        metrics: Metrics,
    ) -> Result<Self, TableError> {
        let game = table.game();
        if let Some(store) = &store {
            let opening = Arc::clone(store);
            let opened = tokio::task::spawn_blocking(move || opening.open())
                .await
                .unwrap_or_else(|panicked| std::panic::resume_unwind(panicked.into_panic()))
                .map_err(|error| TableError { game, error })?;
            let (path, name) = (store.path().display(), game.name());
            match opened {
                Opened::Loaded(covered) => tracing::info!(%path, covered, "{name} table loaded"),
                Opened::Missing => {
                    tracing::info!(%path, "no {name} table yet; it will be computed and saved")
                }
                Opened::Untrusted(err) => tracing::warn!("ignoring {name} table: {err}; recomputing"),
            }
        }
        Ok(TableLifecycle { table, store, metrics })
    }

    /// Step 2, while serving: covers piles below the game's `--NAME-precompute` on a
    /// thread of its own, then saves. Requests inside the range covered so far are
    /// answered meanwhile, and larger ones wait for (then continue) this extension. A
    /// plain thread, not the blocking pool, so that it never delays the runtime's
    /// shutdown.
    pub(crate) fn precompute_in_background(&self, config: &TablesConfig) {
        let game = self.table.game();
        let precompute = config.get(game).map_or(0, |table| table.precompute);
        let n = precompute.min(self.table.limit() + 1);
        if n == 0 || !self.table.needs_extension(n - 1) {
            return;
        }
        let (table, store, metrics) = (Arc::clone(&self.table), self.store.clone(), self.metrics.clone());
        let name = format!("{}-precompute", game.label());
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let started = Instant::now();
            if table.extend_to(n - 1).is_ok() {
                let seconds = started.elapsed().as_secs_f64();
                metrics.observe_extension(game, "precompute", seconds);
                tracing::info!(covered = table.covered(), seconds, "{} table precomputed", game.name());
            }
            if let Some(store) = store {
                store.save_or_report();
            }
        });
        if let Err(err) = spawned {
            tracing::warn!("no {} precompute: {err}", game.name());
        }
    }

    /// Step 3, after serving: saves the table if requests grew it.
    pub(crate) async fn save(self) {
        if let Some(store) = self.store {
            let _ = tokio::task::spawn_blocking(move || store.save_or_report()).await;
        }
    }
}

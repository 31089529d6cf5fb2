//! The Stone Game IV table's life in a server: loaded from its file before serving,
//! extended in the background while serving, saved when it has grown.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crate::games::StoneGameIvTable;
use crate::iv_table_file::{IvTableFileError, IvTableStore, Opened};

use super::metrics::Metrics;

/// The table and, with `--iv-table`, the file that keeps it across restarts.
#[derive(Debug)]
pub(crate) struct IvTableLifecycle {
    table: Arc<StoneGameIvTable>,
    store: Option<Arc<IvTableStore>>,
    metrics: Metrics,
}

impl IvTableLifecycle {
    /// Step 1, before serving: loads the file into the table. A file that cannot be used
    /// at all (see [`IvTableStore::open`]) stops the start; a damaged one is recomputed.
    pub(crate) async fn open(
        table: Arc<StoneGameIvTable>,
        file: Option<PathBuf>,
        metrics: Metrics,
    ) -> Result<Self, IvTableFileError> {
        let store = file.map(|path| Arc::new(IvTableStore::new(path)));
        if let Some(store) = &store {
            let (opening, into) = (Arc::clone(store), Arc::clone(&table));
            let opened = tokio::task::spawn_blocking(move || opening.open(&into))
                .await
                .unwrap_or_else(|panicked| std::panic::resume_unwind(panicked.into_panic()))?;
            let path = store.path().display();
            match opened {
                Opened::Loaded(covered) => tracing::info!(%path, covered, "stone game iv table loaded"),
                Opened::Missing => {
                    tracing::info!(%path, "no stone game iv table yet; it will be computed and saved")
                }
                Opened::Untrusted(err) => tracing::warn!("ignoring stone game iv table: {err}; recomputing"),
            }
        }
        Ok(IvTableLifecycle { table, store, metrics })
    }

    /// Step 2, while serving: classifies piles below `n` on a thread of its own, then
    /// saves. Requests inside the range covered so far are answered meanwhile, and larger
    /// ones wait for (then continue) this extension. A plain thread, not the blocking
    /// pool, so that it never delays the runtime's shutdown.
    pub(crate) fn precompute_in_background(&self, n: u64) {
        let n = n.min(self.table.limit() + 1);
        if n == 0 || !self.table.needs_extension(n - 1) {
            return;
        }
        let (table, store, metrics) = (Arc::clone(&self.table), self.store.clone(), self.metrics.clone());
        let spawned = std::thread::Builder::new().name("iv-precompute".into()).spawn(move || {
            let started = Instant::now();
            if table.extend_to(n - 1).is_ok() {
                let seconds = started.elapsed().as_secs_f64();
                metrics.observe_iv_extension("precompute", seconds);
                tracing::info!(covered = table.covered(), seconds, "stone game iv precomputed");
            }
            if let Some(store) = store {
                store.save_or_report(&table);
            }
        });
        if let Err(err) = spawned {
            tracing::warn!("no stone game iv precompute: {err}");
        }
    }

    /// Step 3, after serving: saves the table if requests grew it.
    pub(crate) async fn save(self) {
        if let Some(store) = self.store {
            let table = self.table;
            let _ = tokio::task::spawn_blocking(move || store.save_or_report(&table)).await;
        }
    }
}

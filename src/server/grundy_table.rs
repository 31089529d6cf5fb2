//! The Nim Square table's life in a server, as the Stone Game IV table's
//! ([`super::iv_table`]): loaded from its file before serving, precomputed in the
//! background if asked, saved when it has grown.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::metrics::Metrics;
use crate::games::GrundyTable;
use crate::grundy_table_file::{GrundyOpened, GrundyTableFileError, GrundyTableStore};

/// The table and, with `--grundy-table`, the file that keeps it across restarts.
#[derive(Debug)]
pub(crate) struct GrundyTableLifecycle {
    table: Arc<GrundyTable>,
    store: Option<Arc<GrundyTableStore>>,
    metrics: Metrics,
}

impl GrundyTableLifecycle {
    /// Before serving: loads the file into the table. A file that cannot be used at all
    /// stops the start; a damaged one is recomputed.
    pub(crate) async fn open(
        table: Arc<GrundyTable>,
        file: Option<PathBuf>,
        metrics: Metrics,
    ) -> Result<Self, GrundyTableFileError> {
        let store = file.map(|path| Arc::new(GrundyTableStore::new(path)));
        if let Some(store) = &store {
            let (opening, into) = (Arc::clone(store), Arc::clone(&table));
            let opened = tokio::task::spawn_blocking(move || opening.open(&into))
                .await
                .unwrap_or_else(|panicked| std::panic::resume_unwind(panicked.into_panic()))?;
            let path = store.path().display();
            match opened {
                GrundyOpened::Loaded(covered) => tracing::info!(%path, covered, "nim square table loaded"),
                GrundyOpened::Missing => {
                    tracing::info!(%path, "no nim square table yet; it will be computed and saved")
                }
                GrundyOpened::Untrusted(err) => {
                    tracing::warn!("ignoring nim square table: {err}; recomputing")
                }
            }
        }
        Ok(GrundyTableLifecycle { table, store, metrics })
    }

    /// While serving: computes the values of the piles below `n` on a thread of its own,
    /// then saves; requests are answered meanwhile.
    pub(crate) fn precompute_in_background(&self, n: u64) {
        let n = n.min(self.table.limit() + 1);
        if n == 0 || !self.table.needs_extension(n - 1) {
            return;
        }
        let (table, store, metrics) = (Arc::clone(&self.table), self.store.clone(), self.metrics.clone());
        let spawned = std::thread::Builder::new().name("grundy-precompute".into()).spawn(move || {
            let started = Instant::now();
            if table.extend_to(n - 1).is_ok() {
                let seconds = started.elapsed().as_secs_f64();
                metrics.observe_grundy_extension("precompute", seconds);
                tracing::info!(covered = table.covered(), seconds, "nim square table precomputed");
            }
            if let Some(store) = store {
                store.save_or_report(&table);
            }
        });
        if let Err(err) = spawned {
            tracing::warn!("no nim square precompute: {err}");
        }
    }

    /// After serving: saves the table if requests grew it.
    pub(crate) async fn save(self) {
        if let Some(store) = self.store {
            let table = self.table;
            let _ = tokio::task::spawn_blocking(move || store.save_or_report(&table)).await;
        }
    }
}

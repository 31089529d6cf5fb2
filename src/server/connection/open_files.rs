//! The open-file limit, which every connection, file and log stream takes from. At start
//! the soft limit is raised to the hard one, and the connection bound is fitted under
//! it, less what the rest of the server needs, so that a flood of connections meets the
//! accept loop's fair shares ([`super::admission`]) instead of `accept` failing with
//! `EMFILE`, which turns everyone away alike.

use super::accept::hard_slots;
use crate::server::ServerConfig;

/// Descriptors kept for everything but the connections of the gRPC port and the metrics
/// port: stdio, the listeners, the runtime's own, the table and TLS files, `/proc` reads
/// for the process metrics, the OTLP exporter's connection; a few dozen at most.
const KEPT: u64 = 64;

/// Raises the soft open-file limit to the hard one and returns the soft limit then; `None`
/// where there is no such limit.
fn raise() -> Option<u64> {
    #[cfg(unix)]
    {
        match rlimit::increase_nofile_limit(u64::MAX) {
            Ok(soft) => Some(soft),
            Err(err) => {
                tracing::warn!(%err, "cannot raise the open-file limit");
                rlimit::getrlimit(rlimit::Resource::NOFILE).ok().map(|(soft, _)| soft)
            }
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The largest connection bound whose hard slots fit in `open_files` less `kept`
/// (at least one).
fn connections_that_fit(open_files: u64, kept: u64) -> usize {
    let usable = usize::try_from(open_files.saturating_sub(kept)).unwrap_or(usize::MAX);
    // hard_slots is about 9/8 of the bound: start there, then settle on the largest.
    let mut bound = (usable / 9).saturating_mul(8).max(1);
    while bound > 1 && hard_slots(bound) > usable {
        bound -= 1;
    }
    while hard_slots(bound + 1) <= usable {
        bound += 1;
    }
    bound
}

/// Raises the open-file limit, lowers `--max-connections` to what it leaves room for
/// (with a warning), and logs the bound.
pub(crate) fn fit_connections(config: &mut ServerConfig) {
    let Some(open_files) = raise() else { return };
    let observability = &config.observability;
    let metrics = match observability.metrics_listen {
        Some(_) => u64::try_from(observability.metrics_max_connections).unwrap_or(u64::MAX).saturating_add(1),
        None => 0,
    };
    let kept = KEPT.saturating_add(metrics);
    let fits = connections_that_fit(open_files, kept);
    let limits = &mut config.limits;
    if limits.max_connections > fits {
        tracing::warn!(
            asked = limits.max_connections,
            max_connections = fits,
            open_files,
            "--max-connections lowered to fit the open-file limit; raise the hard limit (ulimit -Hn, LimitNOFILE) for more"
        );
        limits.max_connections = fits;
    }
    tracing::info!(
        open_files,
        kept,
        max_connections = limits.max_connections,
        "connection bound set within the open-file limit"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_largest_whose_hard_slots_fit() {
        for open_files in 0..3000u64 {
            let bound = connections_that_fit(open_files, KEPT);
            let usable = usize::try_from(open_files.saturating_sub(KEPT)).unwrap();
            assert!(bound >= 1);
            assert!(bound == 1 || hard_slots(bound) <= usable, "{open_files}: {bound}");
            assert!(hard_slots(bound + 1) > usable, "{open_files}: {bound} is not the largest");
        }
        // `ulimit -n 1024`, the usual default: 854 connections and 106 closing.
        assert_eq!(connections_that_fit(1024, KEPT), 854);
        // No limit to speak of (RLIM_INFINITY).
        assert!(connections_that_fit(u64::MAX, KEPT) > 1 << 32);
    }
}

//! mimalloc, both binaries' global allocator, and its settings.
//!
//! glibc malloc was the bulk client's largest cost after parsing (malloc, free,
//! consolidation; docs/performance.md), the server allocates and frees a buffer per
//! message, and mimalloc is faster at both. It holds more memory than glibc, so each
//! binary bounds that its own way: the server purges freed memory within milliseconds
//! (memory spikes come from clients), the client turns huge pages off (its memory is
//! bounded by its in-flight budget, and purging every few milliseconds cost it CPU;
//! docs/performance.md has the figures).

use std::time::Duration;

/// `mi_option_purge_delay` in mimalloc v3's `mimalloc.h` (libmimalloc-sys exports no
/// constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory goes back to the OS after this many milliseconds (mimalloc v2's default;
/// v3's is 1,000): with v3's, a burst of large parallel requests held several times the
/// memory (`bench/soak.sh`; docs/performance.md).
const PURGE_DELAY_MS: std::ffi::c_long = 10;

/// The variable mimalloc reads its purge delay from (milliseconds).
const PURGE_DELAY_VAR: &str = "MIMALLOC_PURGE_DELAY";

/// Hands freed memory back to the OS within 10 ms (or the delay an operator set in
/// `MIMALLOC_PURGE_DELAY`), and on a thread of its own each second. mimalloc purges
/// freed segments only when some thread allocates again, so after a spike (a refused
/// gzip bomb, for one) an idle server kept its peak RSS; `bench/soak.sh` measures it.
/// Call first thing in `main`.
pub fn return_freed_memory() {
    if let Some(delay) = purge_delay_to_set(std::env::var_os(PURGE_DELAY_VAR).as_deref()) {
        // SAFETY: sets one of mimalloc's option values; any thread may, at any time.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, delay) };
    }
    // SAFETY: reads one of mimalloc's option values; any thread may, at any time.
    let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    tracing::debug!(purge_delay_ms = delay, "freed memory goes back to the OS after the purge delay");
    c_allocations_return_at_once();
    let spawned = std::thread::Builder::new().name("mimalloc-purge".into()).spawn(|| loop {
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: mi_collect only walks mimalloc's own structures; any thread may call it.
        unsafe { libmimalloc_sys::mi_collect(false) };
    });
    if let Err(err) = spawned {
        tracing::warn!(%err, "cannot start the memory purge thread");
    }
}

/// The purge delay to set, given the operator's `MIMALLOC_PURGE_DELAY`: none when it is
/// set (mimalloc has read it already), since a longer delay is the operator's trade: a
/// server for columnar bulk jobs answers faster (its batches' buffers are reused instead
/// of faulted in again), and a burst of large requests holds more memory meanwhile
/// (docs/operations.md).
fn purge_delay_to_set(operator: Option<&std::ffi::OsStr>) -> Option<std::ffi::c_long> {
    match operator {
        Some(_) => None,
        None => Some(PURGE_DELAY_MS),
    }
}

/// C libraries allocate with glibc's malloc, not the Rust allocator: libzstd's windows
/// (up to 16 MiB a request) among them. glibc maps a block that large and unmaps it when
/// freed, but then raises its threshold to the freed size, so the next windows come from
/// per-thread arenas, which keep them: after a burst of zstd requests the server stayed
/// well above its idle size (`bench/soak.sh`). A fixed threshold keeps every block of
/// 1 MiB or more mapped on its own and returned on free.
fn c_allocations_return_at_once() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets a malloc parameter, under glibc's own arena locks, so
        // other threads may allocate meanwhile.
        let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
        if set != 1 {
            tracing::debug!("mallopt(M_MMAP_THRESHOLD) refused; glibc keeps its dynamic threshold");
        }
    }
}

/// Keeps transparent huge pages out of this process: mimalloc asks for them on its
/// arenas, and 2 MiB pages nearly doubled the bulk client's peak RSS (`bench/client.sh`;
/// the figures are in docs/performance.md).
pub fn without_huge_pages() {
    // mimalloc's own switch (`allow_thp`) is read before `main`; this is the same prctl.
    #[cfg(target_os = "linux")]
    if let Err(err) = nix::sys::prctl::set_thp_disable(true) {
        tracing::debug!(%err, "transparent huge pages stay on");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operators_purge_delay_is_kept_and_otherwise_ours_is_set() {
        assert_eq!(purge_delay_to_set(None), Some(PURGE_DELAY_MS));
        assert_eq!(purge_delay_to_set(Some("100".as_ref())), None);
    }
}

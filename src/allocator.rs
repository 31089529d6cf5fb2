//! mimalloc, both binaries' global allocator, and its settings.
//!
//! glibc malloc was the bulk client's largest cost after parsing (malloc, free,
//! consolidation; docs/performance.md), the server allocates and frees a buffer per
//! message, and mimalloc is faster at both. It holds more memory than glibc, so each
//! binary bounds that its own way: the server purges freed memory within 100 ms, and
//! within 10 ms while its request memory is under pressure (memory spikes come from
//! clients), the client turns huge pages off (its memory is
//! bounded by its in-flight budget, and purging every few milliseconds cost it CPU;
//! docs/performance.md has the figures).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `mi_option_purge_delay` in mimalloc v3's `mimalloc.h` (libmimalloc-sys exports no
/// constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory goes back to the OS after this many milliseconds while the server's
/// request memory is under pressure ([`request_memory_pressure`]): a burst of large
/// requests held several times the memory with a longer delay (`bench/soak.sh`;
/// docs/performance.md).
const PRESSED_PURGE_DELAY_MS: std::ffi::c_long = 10;
/// ... and after this many otherwise: long enough for a stream of batches to reuse the
/// last batch's buffers instead of faulting fresh pages in for each (`bench/flight.py`).
const RELAXED_PURGE_DELAY_MS: std::ffi::c_long = 100;
/// The variable mimalloc reads its purge delay from (milliseconds).
const PURGE_DELAY_VAR: &str = "MIMALLOC_PURGE_DELAY";
/// Set when the purge delay is ours to change with the pressure (the server's, and no
/// operator's `MIMALLOC_PURGE_DELAY`).
static FOLLOWS_PRESSURE: AtomicBool = AtomicBool::new(false);

/// Hands freed memory back to the OS after 100 ms, or after 10 ms while the server's
/// request memory is under pressure (or after the delay an operator set in
/// `MIMALLOC_PURGE_DELAY`, always), and on a thread of its own each second. mimalloc
/// purges freed segments only when some thread allocates again, so after a spike (a
/// refused gzip bomb, for one) an idle server kept its peak RSS; `bench/soak.sh` measures
/// it. Call first thing in `main`.
pub fn return_freed_memory() {
    let operator = std::env::var_os(PURGE_DELAY_VAR);
    if let Some(delay) = purge_delay_to_set(operator.as_deref(), false) {
        set_purge_delay(delay);
        FOLLOWS_PRESSURE.store(true, Ordering::Relaxed);
    }
    // SAFETY: reads one of mimalloc's option values; any thread may, at any time.
    let delay = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
    match FOLLOWS_PRESSURE.load(Ordering::Relaxed) {
        true => tracing::debug!(
            purge_delay_ms = delay,
            under_pressure_ms = PRESSED_PURGE_DELAY_MS,
            "freed memory goes back to the OS after the purge delay"
        ),
        false => {
            tracing::debug!(purge_delay_ms = delay, "freed memory goes back to the OS after the purge delay")
        }
    }
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

/// Tells the allocator whether the server's request memory is under pressure (the
/// request-byte budget's pressure marks): memory freed from now on goes back to the OS
/// after the short delay while it is, the long one otherwise. Does nothing unless
/// [`return_freed_memory`] made the delay ours (not in the bulk client, whose embedded
/// server shares its allocator, nor under an operator's `MIMALLOC_PURGE_DELAY`).
pub fn request_memory_pressure(pressed: bool) {
    if !FOLLOWS_PRESSURE.load(Ordering::Relaxed) {
        return;
    }
    if let Some(delay) = purge_delay_to_set(None, pressed) {
        set_purge_delay(delay);
        tracing::debug!(purge_delay_ms = delay, pressed, "request memory pressure changed");
    }
}

/// Sets mimalloc's purge delay; it reads the option whenever it schedules a purge.
fn set_purge_delay(delay: std::ffi::c_long) {
    // SAFETY: sets one of mimalloc's option values; any thread may, at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, delay) };
}

/// The purge delay to set, given the operator's `MIMALLOC_PURGE_DELAY` and the pressure:
/// none when the operator set one (mimalloc has read it already), since a longer delay is
/// the operator's trade: a server for columnar bulk jobs answers faster (its batches'
/// buffers are reused instead of faulted in again), and a burst of large requests holds
/// more memory meanwhile (docs/operations.md).
fn purge_delay_to_set(operator: Option<&std::ffi::OsStr>, pressed: bool) -> Option<std::ffi::c_long> {
    match (operator, pressed) {
        (Some(_), _) => None,
        (None, true) => Some(PRESSED_PURGE_DELAY_MS),
        (None, false) => Some(RELAXED_PURGE_DELAY_MS),
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
        assert_eq!(purge_delay_to_set(None, false), Some(RELAXED_PURGE_DELAY_MS));
        assert_eq!(purge_delay_to_set(None, true), Some(PRESSED_PURGE_DELAY_MS));
        assert_eq!(purge_delay_to_set(Some("100".as_ref()), false), None);
        assert_eq!(purge_delay_to_set(Some("100".as_ref()), true), None);
    }
}

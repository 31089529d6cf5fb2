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

/// Hands freed memory back to the OS within 10 ms, and on a thread of its
/// own each second. mimalloc purges freed segments only when some thread allocates
/// again, so after a spike (a refused gzip bomb, for one) an idle server kept its peak
/// RSS; `bench/soak.sh` measures it. Call first thing in `main`.
pub fn return_freed_memory() {
    // SAFETY: sets one of mimalloc's option values; any thread may, at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
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

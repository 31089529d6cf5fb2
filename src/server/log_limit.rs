//! Rate limits on log lines a peer can cause: a per-site limiter for this crate's own
//! warnings, and a `tracing` filter for dependencies' (h2's and hyper's) call sites.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Says whether a line may be logged now: at most one an interval, counting the rest.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    interval: Duration,
    next: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
}

impl LogLimiter {
    /// At most one line each `interval`.
    pub(crate) fn new(interval: Duration) -> Self {
        LogLimiter { interval, next: Mutex::new(None), suppressed: AtomicU64::new(0) }
    }

    /// `Some(lines suppressed since the last one)` when a line may be logged now.
    pub(crate) fn allow(&self) -> Option<u64> {
        let now = Instant::now();
        let mut next = self.next.lock();
        if next.is_some_and(|next| now < next) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *next = Some(now + self.interval);
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
}

/// A `tracing` filter that lets through at most `burst` events a `window` from each call
/// site outside this crate. h2 and hyper log a WARN for each connection that a peer gets
/// closed (a rapid-reset attack gave 14,000 lines in 15 s); this caps what a peer can
/// write to the log without hiding the first occurrences.
#[derive(Debug)]
pub struct LogRateLimit {
    burst: u32,
    window: Duration,
    seen: Mutex<HashMap<tracing::callsite::Identifier, (Instant, u32)>>,
}

impl LogRateLimit {
    /// At most `burst` events per `window` from each call site of a dependency.
    pub fn new(burst: u32, window: Duration) -> Self {
        LogRateLimit { burst, window, seen: Mutex::new(HashMap::new()) }
    }
}

impl Default for LogRateLimit {
    fn default() -> Self {
        LogRateLimit::new(10, Duration::from_secs(60))
    }
}

impl<S> tracing_subscriber::layer::Filter<S> for LogRateLimit {
    fn enabled(&self, meta: &tracing::Metadata<'_>, _: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        if !meta.is_event() || meta.target().starts_with(env!("CARGO_CRATE_NAME")) {
            return true;
        }
        let now = Instant::now();
        let mut seen = self.seen.lock();
        let (start, count) = seen.entry(meta.callsite()).or_insert((now, 0));
        if now.duration_since(*start) >= self.window {
            *start = now;
            *count = 0;
        }
        *count += 1;
        *count <= self.burst
    }

    fn callsite_enabled(&self, meta: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        match meta.is_event() && !meta.target().starts_with(env!("CARGO_CRATE_NAME")) {
            true => tracing::subscriber::Interest::sometimes(),
            false => tracing::subscriber::Interest::always(),
        }
    }
}

//! Rate limits on log lines a peer can cause: a `tracing` filter for dependencies' (h2's
//! and hyper's) call sites. This crate's own warnings use [`crate::log_limiter`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

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

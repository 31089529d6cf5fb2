//! [`LogLimiter`]: at most one log line an interval from one site, the rest counted. The
//! server's warnings a peer can cause and the bulk client's retry warnings about a server
//! both go through it.

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
        self.allow_at(Instant::now())
    }

    /// [`Self::allow`] at `now`.
    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut next = self.next.lock();
        if next.is_some_and(|next| now < next) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *next = Some(now + self.interval);
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_goes_out_each_interval_with_the_count_held_back() {
        let limiter = LogLimiter::new(Duration::from_secs(5));
        let start = Instant::now();
        let at = |seconds: f64| start + Duration::from_secs_f64(seconds);
        assert_eq!(limiter.allow_at(at(0.0)), Some(0));
        assert_eq!(limiter.allow_at(at(0.1)), None);
        assert_eq!(limiter.allow_at(at(2.0)), None);
        assert_eq!(limiter.allow_at(at(4.9)), None);
        assert_eq!(limiter.allow_at(at(5.0)), Some(3));
        assert_eq!(limiter.allow_at(at(6.0)), None);
        assert_eq!(limiter.allow_at(at(20.0)), Some(1));
        assert_eq!(limiter.allow_at(at(30.0)), Some(0));
    }
}

//! One extender at a time for a table that grows on demand (Stone Game IV's P-positions,
//! Nim Square's Grundy values), its waiters woken on every published segment.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};

/// [`Grower::target`]'s word when no extension runs.
const NO_TARGET: u64 = u64::MAX;

/// Who extends a growing table, and the signal its waiters sleep on.
#[derive(Debug)]
pub(crate) struct Grower {
    /// Whether an extension runs.
    running: Mutex<bool>,
    /// Signalled on every published segment and when an extension ends.
    progressed: Condvar,
    /// The pile the running extension covers, [`NO_TARGET`] when none runs: for a
    /// progress display, read without the lock.
    target: AtomicU64,
}

impl Default for Grower {
    fn default() -> Self {
        Grower { running: Mutex::default(), progressed: Condvar::new(), target: AtomicU64::new(NO_TARGET) }
    }
}

/// Ends an extension when dropped, even by a panic, so that waiters can take over.
struct Running<'a>(&'a Grower);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.target.store(NO_TARGET, Ordering::Relaxed);
        *self.0.running.lock() = false;
        self.0.progressed.notify_all();
    }
}

impl Grower {
    /// Returns once `covered()` is above `n`. One caller at a time runs `extend(n)`,
    /// which publishes segments until `n` is covered; the others wait and wake on each
    /// published segment, and one whose `n` lies beyond the running extension's target
    /// extends further itself once it ends, so that no caller waits for work only a
    /// later caller needs.
    pub(crate) fn grow_to(&self, n: u64, covered: impl Fn() -> u64, mut extend: impl FnMut(u64)) {
        loop {
            if n < covered() {
                return;
            }
            let mut running = self.running.lock();
            if n < covered() {
                return;
            }
            if *running {
                self.progressed.wait(&mut running);
                continue;
            }
            *running = true;
            self.target.store(n, Ordering::Relaxed);
            drop(running);
            let _running = Running(self);
            extend(n);
        }
    }

    /// The pile the running extension covers, while one runs.
    pub(crate) fn target(&self) -> Option<u64> {
        Some(self.target.load(Ordering::Relaxed)).filter(|&n| n != NO_TARGET)
    }

    /// Whether an extension runs now.
    #[cfg(test)]
    pub(crate) fn is_running(&self) -> bool {
        *self.running.lock()
    }

    /// Wakes the waiters once a segment is published (its end stored as covered).
    pub(crate) fn published(&self) {
        // Taking the lock orders this wake-up after any waiter's check of `covered`.
        drop(self.running.lock());
        self.progressed.notify_all();
    }

    /// Runs `replace` once no extension runs, with none starting meanwhile, then wakes
    /// the waiters: for replacing a table's contents (a table file loaded).
    pub(crate) fn between_extensions<R>(&self, replace: impl FnOnce() -> R) -> R {
        let mut running = self.running.lock();
        while *running {
            self.progressed.wait(&mut running);
        }
        let result = replace();
        drop(running);
        self.progressed.notify_all();
        result
    }
}

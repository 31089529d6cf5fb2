//! The memory bound of a run: bytes of batches read but not yet written.
//!
//! The reading thread takes from the budget before it hands a batch on, and the writing
//! thread gives it back once the batch's answers are on disk. Everything in between (the
//! work queue, the in-flight windows, resends, the reorder buffer) is therefore bounded by
//! one number, whatever the servers do. Both sides are plain threads, hence a condvar.

use parking_lot::{Condvar, Mutex};

/// A counting semaphore over bytes, for threads.
#[derive(Debug)]
pub struct Budget {
    capacity: usize,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    available: usize,
    closed: bool,
}

/// The budget was closed: the run is being abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("run abandoned")]
pub struct Closed;

impl Budget {
    /// A budget of `capacity` bytes (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Budget {
            capacity,
            state: Mutex::new(State { available: capacity, closed: false }),
            changed: Condvar::new(),
        }
    }

    /// Blocks until `amount` bytes are free and takes them; returns what was taken, which is
    /// capped at the capacity so that one huge batch can still go (alone).
    pub fn acquire(&self, amount: usize) -> Result<usize, Closed> {
        let amount = amount.min(self.capacity);
        let mut state = self.state.lock();
        loop {
            if state.closed {
                return Err(Closed);
            }
            if state.available >= amount {
                state.available -= amount;
                return Ok(amount);
            }
            self.changed.wait(&mut state);
        }
    }

    /// Gives back `amount` bytes taken by [`Budget::acquire`].
    pub fn release(&self, amount: usize) {
        let mut state = self.state.lock();
        state.available = (state.available + amount).min(self.capacity);
        drop(state);
        self.changed.notify_all();
    }

    /// Wakes every waiter with [`Closed`], now and from then on.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn oversized_requests_are_capped_and_release_unblocks() {
        let budget = Arc::new(Budget::new(10));
        assert_eq!(budget.acquire(25), Ok(10));
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || budget.acquire(4))
        };
        budget.release(10);
        assert_eq!(waiter.join().unwrap(), Ok(4));
    }

    #[test]
    fn close_wakes_waiters() {
        let budget = Arc::new(Budget::new(1));
        budget.acquire(1).unwrap();
        let waiter = {
            let budget = Arc::clone(&budget);
            std::thread::spawn(move || budget.acquire(1))
        };
        budget.close();
        assert_eq!(waiter.join().unwrap(), Err(Closed));
    }
}

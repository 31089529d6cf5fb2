//! The memory bound of a run: bytes of batches read but not yet written.
//!
//! The reading thread takes from the budget before it hands a batch on, and the writing
//! thread gives it back once the batch's answers are on disk. Everything in between (the
//! work queue, the in-flight windows, resends, the reorder buffer) is therefore bounded by
//! one number, whatever the servers do. Both sides are plain threads: they block on
//! tokio's semaphore (runtime-free) rather than on a semaphore of our own.

use tokio::sync::Semaphore;

/// A counting semaphore over bytes, for threads.
#[derive(Debug)]
pub struct Budget {
    capacity: usize,
    bytes: Semaphore,
}

/// The budget was closed: the run is being abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("run abandoned")]
pub struct Closed;

impl Budget {
    /// A budget of `capacity` bytes (at least 1, at most 4 GiB).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, u32::MAX as usize);
        Budget { capacity, bytes: Semaphore::new(capacity) }
    }

    /// Blocks until `amount` bytes are free and takes them; returns what was taken, which is
    /// capped at the capacity so that one huge batch can still go (alone).
    pub fn acquire(&self, amount: usize) -> Result<usize, Closed> {
        let amount = amount.min(self.capacity);
        // `capacity` fits a u32, so `amount` does too.
        let permit =
            futures::executor::block_on(self.bytes.acquire_many(amount as u32)).map_err(|_| Closed)?;
        // Given back by `release`, from another thread, once the batch is written.
        permit.forget();
        Ok(amount)
    }

    /// Gives back `amount` bytes taken by [`Budget::acquire`].
    pub fn release(&self, amount: usize) {
        self.bytes.add_permits(amount);
    }

    /// Wakes every waiter with [`Closed`], now and from then on.
    pub fn close(&self) {
        self.bytes.close();
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

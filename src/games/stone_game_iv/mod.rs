//! Stone Game IV (LeetCode 1510) for every n up to a configured limit.
//!
//! A pile is lost for the player to move (a P-position) iff no square move leads to a
//! P-position. P-positions are sparse, so the table keeps only their sorted list and
//! grows it on demand; a query inside the known range is a binary search.
//!
//! PLACEHOLDER: the extension below is the plain definition, O(n·√n·log n); issue #4
//! replaces it with the segmented sieve.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use super::{Move, Outcome, SolveError};

/// The default largest n answered.
pub const DEFAULT_LIMIT: u64 = 1_000_000_000;

/// A shared, growing table of Stone Game IV P-positions.
#[derive(Debug)]
pub struct StoneGameIvTable {
    limit: u64,
    /// Sorted P-positions below `covered`.
    losing: RwLock<Vec<u32>>,
    /// Every n below this is classified.
    covered: AtomicU64,
    /// Held by the one thread that extends the table.
    extension: Mutex<()>,
}

impl StoneGameIvTable {
    /// An empty table answering n up to `limit` (at most `u32::MAX`).
    pub fn new(limit: u64) -> Self {
        StoneGameIvTable {
            limit: limit.min(u64::from(u32::MAX)),
            losing: RwLock::new(Vec::new()),
            covered: AtomicU64::new(0),
            extension: Mutex::new(()),
        }
    }

    /// The largest n this table answers.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Every n below this is already classified.
    pub fn covered(&self) -> u64 {
        self.covered.load(Ordering::Acquire)
    }

    /// True when answering `n` first needs the table to grow (a slow, blocking call).
    pub fn needs_extension(&self, n: u64) -> bool {
        n >= self.covered() && n <= self.limit
    }

    /// Grows the table to cover `n`; blocks. Concurrent callers share one extension.
    pub fn extend_to(&self, n: u64) -> Result<(), SolveError> {
        self.check_limit(n)?;
        let _only_extender = self.extension.lock();
        let start = self.covered();
        if n < start {
            return Ok(());
        }
        let mut losing = self.losing.read().clone();
        for m in start..=n {
            let is_losing = (1u64..)
                .map(|k| k * k)
                .take_while(|&sq| sq <= m)
                .all(|sq| losing.binary_search(&((m - sq) as u32)).is_err());
            if is_losing {
                losing.push(m as u32);
            }
        }
        *self.losing.write() = losing;
        self.covered.store(n + 1, Ordering::Release);
        Ok(())
    }

    /// Solves a pile of `n`, growing the table first if needed (blocking).
    pub fn solve(&self, n: u64) -> Result<Outcome, SolveError> {
        self.extend_to(n)?;
        let losing = self.losing.read();
        let is_losing = |m: u64| losing.binary_search(&(m as u32)).is_ok();
        if is_losing(n) {
            return Ok(Outcome::BOB);
        }
        let take = (1u64..).map(|k| k * k).take_while(|&sq| sq <= n).find(|&sq| is_losing(n - sq));
        Ok(Outcome::alice(take.map(|take| Move::StoneGameIv { take })))
    }

    fn check_limit(&self, n: u64) -> Result<(), SolveError> {
        if n > self.limit {
            return Err(SolveError::OutOfRange { n, limit: self.limit });
        }
        Ok(())
    }
}

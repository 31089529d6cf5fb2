//! The bridge from async handlers to CPU-bound work.
//!
//! Solving runs on rayon's pool so that tokio's workers keep serving I/O. A job whose
//! caller has gone (deadline, cancelled stream) is skipped before it starts, a running
//! job can ask [`Caller::is_gone`] to stop early, and a panic in a solver becomes an
//! error for that caller alone.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use tokio::sync::oneshot;
use tracing::Instrument;

/// Why a pool job produced no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The job panicked; the message is the panic's payload when it was a string.
    #[error("solver panicked: {0}")]
    Panicked(String),
    /// The pool dropped the job without running it (it is shutting down).
    #[error("solver pool is shutting down")]
    Gone,
}

/// Tells a running job whether its caller still waits for the result, so that a long
/// job (a large batch) can stop early once nobody will read it.
pub struct Caller<'a> {
    gone: &'a (dyn Fn() -> bool + Sync),
}

impl Caller<'_> {
    /// True once the caller has dropped its future (deadline, cancelled call).
    pub fn is_gone(&self) -> bool {
        (self.gone)()
    }
}

/// Runs `job` on rayon's global pool and waits for it without blocking the runtime.
pub async fn run<T, F>(job: F) -> Result<T, PoolError>
where
    T: Send + 'static,
    F: FnOnce(&Caller<'_>) -> T + Send + 'static,
{
    // The hand-off as a span: a trace shows the time a job waited for and ran on the pool.
    // At debug level, so that without traces the default filter turns it off at its call
    // site and it costs nothing.
    let span = tracing::debug_span!("pool", queued_us = tracing::field::Empty);
    let handed_off = (!span.is_disabled()).then(Instant::now);
    let job_span = span.clone();
    let (reply, result) = oneshot::channel();
    rayon::spawn(move || {
        let _entered = job_span.enter();
        if let Some(handed_off) = handed_off {
            // An i64, which OpenTelemetry exports as a number (a u64 becomes a string).
            job_span.record("queued_us", handed_off.elapsed().as_micros() as i64);
        }
        if reply.is_closed() {
            tracing::debug!("pool job skipped: its caller has gone");
            return;
        }
        let gone = || reply.is_closed();
        let outcome = catch_unwind(AssertUnwindSafe(|| job(&Caller { gone: &gone })));
        let _ = reply.send(outcome.map_err(panic_message));
    });
    result.instrument(span).await.map_err(|_| PoolError::Gone)?
}

/// Runs a job that may block for long (waits on locks, long table growth) on tokio's
/// blocking pool, with the same error handling as [`run`].
pub async fn run_blocking<T, F>(job: F) -> Result<T, PoolError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    tokio::task::spawn_blocking(move || catch_unwind(AssertUnwindSafe(job)).map_err(panic_message))
        .await
        .map_err(|_| PoolError::Gone)?
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> PoolError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned());
    PoolError::Panicked(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_value() {
        assert_eq!(run(|_| 6 * 7).await, Ok(42));
        assert_eq!(run_blocking(|| 6 * 7).await, Ok(42));
    }

    #[tokio::test]
    async fn a_panic_becomes_an_error() {
        let err = run(|_| -> u32 { panic!("boom") }).await.unwrap_err();
        assert_eq!(err, PoolError::Panicked("boom".into()));
        let err = run_blocking(|| -> u32 { panic!("{}", "bang") }).await.unwrap_err();
        assert_eq!(err, PoolError::Panicked("bang".into()));
    }

    #[tokio::test]
    async fn a_job_sees_its_caller_leave() {
        let (started, wait_started) = oneshot::channel();
        let (saw, seen) = std::sync::mpsc::channel();
        let job = run(move |caller| {
            let _ = started.send(());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while !caller.is_gone() && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            let _ = saw.send(caller.is_gone());
        });
        let job = tokio::spawn(job);
        wait_started.await.unwrap();
        job.abort();
        let seen = tokio::task::spawn_blocking(move || seen.recv().unwrap()).await.unwrap();
        assert!(seen, "the job should see that its caller is gone");
    }
}

//! A panic is a bug, and one a peer can trigger at will must cost neither the process nor
//! its log: [`log_panics`] replaces the default panic hook, which writes every panic to
//! stderr unbounded (2,000 panicking calls wrote 508 KB), with one ERROR line through the
//! log limiter; the call that panicked ends with [`PANICKED`] (`grpc_codes.rs` catches it).

use std::sync::OnceLock;
use std::time::Duration;

use tonic::Status;

use crate::echo;
use crate::log_limiter::LogLimiter;

/// At most one panic is logged each interval; the line says how many were not.
const PANIC_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The message of a call that panicked: fixed, so that nothing of the panic (a path, an
/// index, a peer's bytes) reaches the caller.
pub(crate) const PANICKED: &str = "internal error: the server failed on this call (a bug; it was logged)";

/// The status of a call that panicked.
pub(crate) fn panicked() -> Status {
    Status::internal(PANICKED)
}

/// Replaces the panic hook with one that logs a panic as an ERROR line, at most one each
/// 10 s, with the count of those held back; with `RUST_BACKTRACE` set,
/// the line carries the backtrace. Call it once logging is set up: the line goes through
/// `tracing`.
pub fn log_panics() {
    static LIMITER: OnceLock<LogLimiter> = OnceLock::new();
    let limiter = LIMITER.get_or_init(|| LogLimiter::new(PANIC_LOG_INTERVAL));
    std::panic::set_hook(Box::new(move |info| {
        let Some(held_back) = limiter.allow() else { return };
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a payload that is not text)");
        let location = info.location().map(ToString::to_string).unwrap_or_default();
        let backtrace = std::backtrace::Backtrace::capture();
        // A panic's message may quote what a peer sent.
        let message = echo::message(message);
        // The backtrace is a field after the others, so that the first line carries the
        // message, the location and the count whether or not a backtrace follows.
        match backtrace.status() {
            std::backtrace::BacktraceStatus::Captured => tracing::error!(
                %location,
                panics_not_logged = held_back,
                backtrace = %format_args!("\n{backtrace}"),
                "panic: {message}"
            ),
            _ => tracing::error!(%location, panics_not_logged = held_back, "panic: {message}"),
        }
    }));
}

//! What one connection shares between the accept loop, its byte stream and the call
//! layer: its calls in flight, from which idling and shutdown closing are decided.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use tonic::transport::server::TcpConnectInfo;

/// How long a connection whose last call just ended stays open during shutdown, so that
/// hyper flushes that call's answer before the connection's input ends; hyper's own
/// graceful close (GOAWAY, then a PING round trip) usually closes it sooner.
const SHUTDOWN_LINGER: Duration = Duration::from_millis(250);

/// What one connection shares with the call layer: its calls in flight.
#[derive(Debug)]
pub(crate) struct ConnectionState {
    /// Every call in flight, health checks included: what keeps a connection from idling.
    calls: AtomicUsize,
    /// Calls other than health checks: what keeps a connection open during shutdown.
    work_calls: AtomicUsize,
    /// Milliseconds since `born` when `calls` last fell to zero.
    idle_since_ms: AtomicU64,
    /// One more than the milliseconds since `born` when `work_calls` last fell to zero;
    /// zero if the connection never had work.
    work_ended_ms: AtomicU64,
    born: Instant,
    /// The connection's reader, woken when it may have to close.
    pub(crate) reader: AtomicWaker,
}

impl ConnectionState {
    pub(crate) fn new() -> Self {
        ConnectionState {
            calls: AtomicUsize::new(0),
            work_calls: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            work_ended_ms: AtomicU64::new(0),
            born: Instant::now(),
            reader: AtomicWaker::new(),
        }
    }

    /// Counts a call that has started; `work` is false for health checks.
    pub(crate) fn call_started(&self, work: bool) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if work {
            self.work_calls.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Counts a call that has ended (its response sent or abandoned).
    pub(crate) fn call_ended(&self, work: bool) {
        let now = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX - 1);
        if work && self.work_calls.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.work_ended_ms.store(now + 1, Ordering::SeqCst);
            self.reader.wake();
        }
        if self.calls.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle_since_ms.store(now, Ordering::SeqCst);
            self.reader.wake();
        }
    }

    /// Calls in flight on this connection.
    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Calls in flight on this connection, health checks aside.
    pub(crate) fn work_calls(&self) -> usize {
        self.work_calls.load(Ordering::SeqCst)
    }

    /// When the connection counts as idle for too long, if it has no call in flight.
    pub(crate) fn idle_deadline(&self, idle_timeout: Duration) -> Option<Instant> {
        (self.calls() == 0).then(|| {
            let since = Duration::from_millis(self.idle_since_ms.load(Ordering::SeqCst));
            self.born + since + idle_timeout
        })
    }

    /// When a shutting-down connection with no work in flight closes: at once if it never
    /// had any, else after [`SHUTDOWN_LINGER`].
    pub(crate) fn shutdown_deadline(&self) -> Option<Instant> {
        (self.work_calls() == 0).then(|| match self.work_ended_ms.load(Ordering::SeqCst) {
            0 => self.born,
            ended => self.born + Duration::from_millis(ended - 1) + SHUTDOWN_LINGER,
        })
    }
}

/// What requests on a connection carry as their `connect_info` extension.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionInfo {
    /// The peer's and our TCP address (under TLS too).
    pub(crate) tcp: TcpConnectInfo,
    pub(crate) state: Arc<ConnectionState>,
}

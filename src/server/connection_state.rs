//! What one connection shares between the accept loop, its byte stream and the call
//! layer: its calls in flight, from which idling and shutdown closing are decided.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use parking_lot::Mutex;
use tokio::sync::OwnedSemaphorePermit;
use tonic::transport::server::TcpConnectInfo;

use super::admission::{FairShare, Share};

/// How long a connection whose last call just ended stays open during shutdown, so that
/// hyper flushes that call's answer before the connection's input ends; hyper's own
/// graceful close (GOAWAY, then a PING round trip) usually closes it sooner.
const SHUTDOWN_LINGER: Duration = Duration::from_millis(250);

/// A connection's place under the connection cap: a hard slot (at most the cap and its
/// reserve exist) and its peer's share; both are given back when the connection closes.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) _hard: OwnedSemaphorePermit,
    pub(crate) _share: Share,
}

/// Whether the server is near its connection cap, when connections without a call close
/// after `idle` instead of the idle timeout, oldest-idle first in effect (they reach it
/// first).
#[derive(Debug)]
pub(crate) struct Pressure {
    connections: Arc<FairShare>,
    /// Above this many connections the server is under pressure.
    threshold: usize,
    idle: Duration,
    /// Connections to wake when pressure begins, so that the idle ones notice.
    open: Mutex<Vec<Weak<ConnectionState>>>,
}

impl Pressure {
    /// Pressure above 7/8 of `connections`' limit, closing connections idle for `idle`.
    pub(crate) fn new(connections: Arc<FairShare>, idle: Duration) -> Arc<Self> {
        let threshold = connections.policy().limit / 8 * 7;
        Arc::new(Pressure { connections, threshold, idle, open: Mutex::default() })
    }

    /// True while the server holds more connections than the threshold.
    pub(crate) fn on(&self) -> bool {
        self.connections.total() > self.threshold
    }

    /// Registers a new connection's state; under pressure, wakes every open connection
    /// so that those idle for long enough close now.
    pub(crate) fn register(&self, state: &Arc<ConnectionState>) {
        let mut open = self.open.lock();
        open.retain(|state| state.strong_count() > 0);
        open.push(Arc::downgrade(state));
        if self.on() {
            open.iter().filter_map(Weak::upgrade).for_each(|state| state.reader.wake());
        }
    }
}

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

    /// When the connection counts as idle for too long, if it has no call in flight:
    /// after `idle_timeout`, or sooner while the server is under `pressure`.
    pub(crate) fn idle_deadline(
        &self,
        idle_timeout: Option<Duration>,
        pressure: &Pressure,
    ) -> Option<Instant> {
        let timeout = match pressure.on() {
            true => Some(idle_timeout.map_or(pressure.idle, |timeout| timeout.min(pressure.idle))),
            false => idle_timeout,
        }?;
        (self.calls() == 0).then(|| {
            let since = Duration::from_millis(self.idle_since_ms.load(Ordering::SeqCst));
            self.born + since + timeout
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

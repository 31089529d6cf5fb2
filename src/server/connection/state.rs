//! What one connection shares between the accept loop, its byte stream and the call
//! layer: its calls in flight, from which idling and shutdown closing are decided, and
//! whether it must close to make room for another client ([`super::admission`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use parking_lot::Mutex;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpConnectInfo;

use super::admission::{FairShare, Holder, Share};

/// How long a connection whose last call just ended stays open during shutdown, so that
/// hyper flushes that call's answer before the connection's input ends; hyper's own
/// graceful close (GOAWAY, then a PING round trip) usually closes it sooner.
const SHUTDOWN_LINGER: Duration = Duration::from_millis(250);

/// How long a call ended to make room for another client may take to end: its end is
/// a HEADERS frame that hyper sends only once the call's pending data has gone, which a
/// client that stops reading never lets happen. Past this, its connection is closed,
/// so that a call taken out of the books is gone within a bound.
const PREEMPTED_CALL_GRACE: Duration = Duration::from_secs(1);

/// A connection's place under the connection cap: a hard slot (at most
/// [`super::accept::hard_slots`] exist) and its client's share; both are given back when
/// the connection closes.
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
    /// Calls ended to make room for another client that are still open.
    preempted_calls: AtomicUsize,
    /// One more than the milliseconds since `born` when `preempted_calls` rose from zero.
    preempted_since_ms: AtomicU64,
    /// Cancelled when the connection's share is taken back: it closes at once.
    evicted: CancellationToken,
    /// The connection's reader, woken when it may have to close.
    pub(crate) reader: AtomicWaker,
}

impl ConnectionState {
    /// The state of a connection accepted now.
    pub(crate) fn new() -> Self {
        ConnectionState {
            calls: AtomicUsize::new(0),
            work_calls: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            work_ended_ms: AtomicU64::new(0),
            born: Instant::now(),
            preempted_calls: AtomicUsize::new(0),
            preempted_since_ms: AtomicU64::new(0),
            evicted: CancellationToken::new(),
            reader: AtomicWaker::new(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
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
        let now = self.now_ms();
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

    /// Counts a call ended to make room for another client, until it is gone.
    pub(crate) fn call_preempted(&self) {
        if self.preempted_calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.preempted_since_ms.store(self.now_ms() + 1, Ordering::SeqCst);
        }
        self.reader.wake();
    }

    /// A call counted by [`ConnectionState::call_preempted`] is gone.
    pub(crate) fn preempted_call_gone(&self) {
        if self.preempted_calls.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.preempted_since_ms.store(0, Ordering::SeqCst);
        }
    }

    /// When the connection closes because a call ended to make room is still open: after
    /// [`PREEMPTED_CALL_GRACE`].
    pub(crate) fn preempted_deadline(&self) -> Option<Instant> {
        match self.preempted_since_ms.load(Ordering::SeqCst) {
            0 => None,
            since => Some(self.born + Duration::from_millis(since - 1) + PREEMPTED_CALL_GRACE),
        }
    }

    /// True once the connection's share was taken back: it must close now.
    pub(crate) fn evicted(&self) -> bool {
        self.evicted.is_cancelled()
    }

    /// Resolves once the connection's share is taken back.
    pub(crate) async fn until_evicted(&self) {
        self.evicted.cancelled().await;
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

impl Holder for ConnectionState {
    /// Idle connections first, the longest idle first (a connection still in its
    /// handshake is idle since it was accepted); then the one with the fewest calls.
    fn precedence(&self) -> (usize, Instant) {
        let idle_since = Duration::from_millis(self.idle_since_ms.load(Ordering::SeqCst));
        (self.calls(), self.born + idle_since)
    }

    /// Closes the connection: a GOAWAY and the end of its input, calls and all, or the
    /// end of its handshake.
    fn revoke(&self) {
        self.evicted.cancel();
        self.reader.wake();
    }
}

/// What requests on a connection carry as their `connect_info` extension.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionInfo {
    /// The peer's and our TCP address (under TLS too).
    pub(crate) tcp: TcpConnectInfo,
    pub(crate) state: Arc<ConnectionState>,
}

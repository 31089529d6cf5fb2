//! The plaintext HTTP/1.1 `/metrics` endpoint, bounded like the gRPC port, so that a
//! flood on it cannot use up the file descriptors the gRPC port shares:
//! - at most `max_connections` are open; a newcomer beyond that is admitted by closing a
//!   connection with no request in progress: one of the client (an IPv4 address or an
//!   IPv6 prefix, as for the gRPC port's fair shares) holding the most
//!   connections, the one waiting longest. A flood thus evicts itself, and a scraper that
//!   has just connected is served. Only when every connection is answering a request does
//!   the loop stop accepting (the kernel's backlog holds newcomers, as on the gRPC port);
//! - a request's headers must arrive within `header_read_timeout` of its first byte (of
//!   the connection's start, for the first request), or the connection is closed;
//! - a keep-alive connection with no request for `idle_timeout` is closed, and so is one
//!   whose answer the peer has not taken within `idle_timeout`.
//!
//! hyper's own `header_read_timeout` is not used: it starts as soon as a connection waits
//! for a request, so it would also close every keep-alive connection idle for that long.
//! Requests other than `GET` or `HEAD` of `/metrics` are refused without reading their
//! bodies (hyper drains what is buffered and closes), and a request head is at most
//! [`MAX_HEAD_BYTES`]. `accept` errors such as `EMFILE` back off from 10 ms to 1 s, with
//! one warning every 10 s at most.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::connection::admission::{Client, Grouping};
use crate::log_limiter::LogLimiter;

/// Largest request head (request line and headers) hyper buffers; its minimum is 8 KiB.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// First and longest pause after an `accept` error that is not the peer's.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// At most one accept-error warning this often.
const ACCEPT_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// What the endpoint answers scrapes with.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Bounds on the endpoint's connections; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct EndpointLimits {
    /// Connections open at once.
    pub(crate) max_connections: usize,
    /// Time from a request's first byte to the end of its headers.
    pub(crate) header_read_timeout: Duration,
    /// Time a connection may wait with no request in progress.
    pub(crate) idle_timeout: Duration,
    /// Which addresses are one client, when choosing whose connection to close.
    pub(crate) grouping: Grouping,
}

impl Default for EndpointLimits {
    fn default() -> Self {
        // A handful of Prometheus servers each keep one connection alive; 64 leaves room
        // for curl and probes. Scrapes every 15 to 60 s fit in the idle timeout.
        EndpointLimits {
            max_connections: 64,
            header_read_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            grouping: Grouping::default(),
        }
    }
}

/// Serves `GET /metrics` (and `HEAD`) on `listener` with the text `encode` makes, within
/// `limits`, until `stop` is cancelled; open connections close then too.
pub(crate) async fn serve(
    listener: TcpListener,
    limits: EndpointLimits,
    encode: Arc<dyn Fn() -> String + Send + Sync>,
    stop: CancellationToken,
) {
    let table = Arc::new(Table::new(limits.max_connections));
    let mut next_backoff = ACCEPT_BACKOFF.0;
    let accept_errors = LogLimiter::new(ACCEPT_WARNING_INTERVAL);
    loop {
        // Step 1: wait until a newcomer can be admitted.
        tokio::select! {
            () = table.admissible() => {}
            () = stop.cancelled() => return,
        }
        // Step 2: accept, pausing after errors that are not the peer's.
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    use io::ErrorKind as K;
                    if matches!(err.kind(), K::ConnectionAborted | K::ConnectionReset | K::Interrupted) {
                        continue;
                    }
                    let pause = next_backoff;
                    next_backoff = (pause * 2).min(ACCEPT_BACKOFF.1);
                    if let Some(suppressed) = accept_errors.allow() {
                        tracing::warn!(%err, ?pause, suppressed, "metrics endpoint: accept failed; pausing (open files: raise `ulimit -n`)");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(pause) => continue,
                        () = stop.cancelled() => return,
                    }
                }
            },
            () = stop.cancelled() => return,
        };
        next_backoff = ACCEPT_BACKOFF.0;
        // Step 3: make room for it, or close it at once if every connection became busy
        // in the meantime.
        let Some(slot) = table.admit(limits.grouping.client(peer.ip())) else {
            tracing::debug!(%peer, "metrics endpoint: every connection busy; closing a newcomer");
            continue;
        };
        // Step 4: serve it in its own task until it ends, times out, is evicted or stops.
        tokio::spawn(serve_connection(tcp, slot, limits.clone(), Arc::clone(&encode), stop.clone()));
    }
}

/// The open connections, for the cap and for choosing whom to evict.
#[derive(Debug)]
struct Table {
    max_connections: usize,
    open: Mutex<Open>,
    /// Woken when a connection closes or finishes a request: a slot may be free.
    changed: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Open {
    next_id: u64,
    connections: HashMap<u64, Entry>,
}

#[derive(Debug)]
struct Entry {
    peer: Client,
    activity: Arc<Activity>,
    evict: CancellationToken,
}

impl Table {
    fn new(max_connections: usize) -> Self {
        Table { max_connections: max_connections.max(1), open: Mutex::default(), changed: Arc::default() }
    }

    /// Resolves once a newcomer can be admitted: below the cap, or some connection idle.
    async fn admissible(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let open = self.open.lock();
                if open.connections.len() < self.max_connections
                    || open.connections.values().any(|entry| !entry.activity.busy())
                {
                    return;
                }
            }
            changed.await;
        }
    }

    /// A slot for a newcomer from `peer`, evicting a connection if at the cap; `None` if
    /// every connection is answering a request.
    fn admit(self: &Arc<Self>, peer: Client) -> Option<Slot> {
        let mut open = self.open.lock();
        if open.connections.len() >= self.max_connections {
            let victim = victim(&open.connections)?;
            if let Some(entry) = open.connections.remove(&victim) {
                tracing::debug!(peer = ?entry.peer, "metrics endpoint: at the connection cap; closing an idle connection");
                entry.evict.cancel();
            }
        }
        let id = open.next_id;
        open.next_id += 1;
        let activity = Arc::new(Activity::new(Arc::clone(&self.changed)));
        let evict = CancellationToken::new();
        open.connections.insert(id, Entry { peer, activity: Arc::clone(&activity), evict: evict.clone() });
        Some(Slot { table: Arc::clone(self), id, activity, evict })
    }
}

/// The connection to close for a newcomer: among those with no request in progress, one of
/// the peer with the most connections, the one that has waited longest (the oldest on a
/// tie).
fn victim(connections: &HashMap<u64, Entry>) -> Option<u64> {
    let mut per_peer: HashMap<Client, usize> = HashMap::new();
    for entry in connections.values() {
        *per_peer.entry(entry.peer).or_default() += 1;
    }
    connections
        .iter()
        .filter_map(|(&id, entry)| entry.activity.waiting_since().map(|since| (id, entry.peer, since)))
        .min_by_key(|&(id, peer, since)| (std::cmp::Reverse(per_peer[&peer]), since, id))
        .map(|(id, _, _)| id)
}

/// One connection's place in the table, given back when its task ends.
struct Slot {
    table: Arc<Table>,
    id: u64,
    activity: Arc<Activity>,
    evict: CancellationToken,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.table.open.lock().connections.remove(&self.id);
        self.table.changed.notify_waiters();
    }
}

/// Where a connection is between requests, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the first byte of a request.
    Idle,
    /// A request's head has begun (or the connection is new) and is not complete.
    ReadingHead,
    /// A request is being answered.
    Answering,
}

/// A connection's phase, shared by its byte stream, its service and the table.
#[derive(Debug)]
struct Activity {
    state: Mutex<ActivityState>,
    /// Woken when the phase changes, so that the connection's deadline is recomputed.
    phase_changed: Notify,
    /// The table's: woken when the connection finishes a request.
    slot_freed: Arc<Notify>,
}

#[derive(Debug)]
struct ActivityState {
    phase: Phase,
    since: Instant,
    /// Bytes came while answering: the next request has begun.
    read_while_answering: bool,
}

impl Activity {
    fn new(slot_freed: Arc<Notify>) -> Self {
        let state =
            ActivityState { phase: Phase::ReadingHead, since: Instant::now(), read_while_answering: false };
        Activity { state: Mutex::new(state), phase_changed: Notify::new(), slot_freed }
    }

    fn set(&self, state: &mut ActivityState, phase: Phase) {
        state.phase = phase;
        state.since = Instant::now();
        self.phase_changed.notify_one();
    }

    /// Bytes have arrived from the peer.
    fn bytes_read(&self) {
        let mut state = self.state.lock();
        match state.phase {
            Phase::Idle => self.set(&mut state, Phase::ReadingHead),
            Phase::Answering => state.read_while_answering = true,
            Phase::ReadingHead => {}
        }
    }

    /// A request's head is complete and the service answers it.
    fn answering(&self) {
        let mut state = self.state.lock();
        state.read_while_answering = false;
        self.set(&mut state, Phase::Answering);
    }

    /// The answer has been handed to hyper (its body dropped).
    fn answered(&self) {
        let mut state = self.state.lock();
        let next = match state.read_while_answering {
            true => Phase::ReadingHead,
            false => Phase::Idle,
        };
        self.set(&mut state, next);
        drop(state);
        self.slot_freed.notify_waiters();
    }

    fn busy(&self) -> bool {
        self.state.lock().phase == Phase::Answering
    }

    /// Since when the connection has had no request in progress, if it has none.
    fn waiting_since(&self) -> Option<Instant> {
        let state = self.state.lock();
        (state.phase != Phase::Answering).then_some(state.since)
    }

    /// When the connection must close unless its phase changes first.
    fn deadline(&self, limits: &EndpointLimits) -> Instant {
        let state = self.state.lock();
        state.since
            + match state.phase {
                Phase::ReadingHead => limits.header_read_timeout,
                Phase::Idle | Phase::Answering => limits.idle_timeout,
            }
    }
}

/// Runs one connection until it ends, misses its deadline, is evicted, or `stop`.
async fn serve_connection(
    tcp: TcpStream,
    slot: Slot,
    limits: EndpointLimits,
    encode: Arc<dyn Fn() -> String + Send + Sync>,
    stop: CancellationToken,
) {
    let _ = tcp.set_nodelay(true);
    let activity = Arc::clone(&slot.activity);
    let io = Watched { io: tcp, activity: Arc::clone(&activity) };
    let service = {
        let activity = Arc::clone(&activity);
        hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            activity.answering();
            std::future::ready(Ok::<_, Infallible>(answer(&request, &encode, &activity)))
        })
    };
    let connection = hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .header_read_timeout(None)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(connection);
    loop {
        let deadline = tokio::time::Instant::from_std(activity.deadline(&limits));
        tokio::select! {
            result = &mut connection => {
                if let Err(err) = result {
                    tracing::debug!("metrics endpoint: {err}");
                }
                return;
            }
            () = activity.phase_changed.notified() => {}
            () = tokio::time::sleep_until(deadline) => {
                if activity.deadline(&limits) <= Instant::now() {
                    tracing::debug!("metrics endpoint: connection timed out");
                    return;
                }
            }
            () = slot.evict.cancelled() => return,
            () = stop.cancelled() => return,
        }
    }
}

/// The response to one request; `activity` learns when it has been handed over.
fn answer(
    request: &Request<hyper::body::Incoming>,
    encode: &Arc<dyn Fn() -> String + Send + Sync>,
    activity: &Arc<Activity>,
) -> Response<Answer> {
    let (status, body, content_type) = match (request.method(), request.uri().path()) {
        (&Method::GET | &Method::HEAD, "/metrics") => (StatusCode::OK, Bytes::from(encode()), CONTENT_TYPE),
        (_, "/metrics") => {
            (StatusCode::METHOD_NOT_ALLOWED, Bytes::from_static(b"GET or HEAD only\n"), "text/plain")
        }
        _ => (StatusCode::NOT_FOUND, Bytes::from_static(b"only /metrics here\n"), "text/plain"),
    };
    let mut response = Response::new(Answer { body: Full::new(body), activity: Arc::clone(activity) });
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(content_type));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(http::header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
    }
    response
}

/// A response body that tells its connection's [`Activity`] when hyper is done with it.
struct Answer {
    body: Full<Bytes>,
    activity: Arc<Activity>,
}

impl Drop for Answer {
    fn drop(&mut self) {
        self.activity.answered();
    }
}

impl http_body::Body for Answer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's byte stream, which tells its [`Activity`] when bytes arrive.
struct Watched {
    io: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.bytes_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(peer: [u8; 4], phase: Phase, since: Instant) -> Entry {
        let activity = Arc::new(Activity::new(Arc::default()));
        {
            let mut state = activity.state.lock();
            state.phase = phase;
            state.since = since;
        }
        let peer = Grouping::default().client(std::net::IpAddr::from(peer));
        Entry { peer, activity, evict: CancellationToken::new() }
    }

    #[test]
    fn the_victim_is_the_longest_waiting_connection_of_the_heaviest_peer() {
        let t0 = Instant::now();
        let later = |ms| t0 + Duration::from_millis(ms);
        let connections = HashMap::from([
            // A light peer's connection, idle longest: kept, its peer holds one.
            (0, entry([10, 0, 0, 1], Phase::Idle, t0)),
            // The heavy peer: one answering (never evicted), two waiting.
            (1, entry([10, 0, 0, 2], Phase::Answering, t0)),
            (2, entry([10, 0, 0, 2], Phase::ReadingHead, later(20))),
            (3, entry([10, 0, 0, 2], Phase::Idle, later(10))),
        ]);
        assert_eq!(victim(&connections), Some(3));
    }

    #[test]
    fn no_victim_while_every_connection_is_answering() {
        let now = Instant::now();
        let connections = HashMap::from([
            (0, entry([10, 0, 0, 1], Phase::Answering, now)),
            (1, entry([10, 0, 0, 2], Phase::Answering, now)),
        ]);
        assert_eq!(victim(&connections), None);
    }
}

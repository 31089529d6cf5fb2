//! The accept loop, as the stream of connections tonic serves.
//!
//! Every resource a peer can hold before it makes a call is bounded here:
//! - at most `max_connections` are open or handshaking; beyond that the loop stops
//!   accepting and the kernel's backlog holds newcomers (never an unbounded queue);
//! - a connection must finish its handshake (TLS, if any) and send the 24-byte HTTP/2
//!   preface within `handshake_timeout`; handshakes run in their own tasks, so a silent
//!   peer never holds up the next accept;
//! - a connection with no call in flight for `idle_timeout` is closed (gRPC's
//!   `MAX_CONNECTION_IDLE`); PINGs do not count as calls;
//! - once shutdown begins, a connection closes as soon as it has no call in flight.
//!
//! Closing writes a GOAWAY naming the last stream the peer opened (as gRPC servers do for
//! `MAX_CONNECTION_IDLE`, so that a call the client sends meanwhile is retried on a new
//! connection), then ends the connection's input (read returns end-of-file): hyper
//! flushes what it has written and closes, with no cooperation from the peer.
//! `accept` errors such as `EMFILE` back off from 10 ms to 1 s instead of spinning.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use futures::Stream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, PollSemaphore, WaitForCancellationFutureOwned};
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::limits::LogLimiter;

/// The bytes every HTTP/2 client sends first (RFC 9113, section 3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// First and longest pause after an `accept` error that is not the peer's.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// How long a connection whose last call just ended stays open during shutdown, so that
/// hyper flushes that call's answer before the connection's input ends; hyper's own
/// graceful close (GOAWAY, then a PING round trip) usually closes it sooner.
const SHUTDOWN_LINGER: Duration = Duration::from_millis(250);

/// Connections accepted in one poll before the loop lets other tasks run.
const ACCEPTS_PER_POLL: usize = 64;

/// Bounds on connections; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionLimits {
    pub(crate) max_connections: usize,
    pub(crate) handshake_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
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
    reader: AtomicWaker,
}

impl ConnectionState {
    fn new() -> Self {
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
    fn idle_deadline(&self, idle_timeout: Duration) -> Option<Instant> {
        (self.calls() == 0).then(|| {
            let since = Duration::from_millis(self.idle_since_ms.load(Ordering::SeqCst));
            self.born + since + idle_timeout
        })
    }

    /// When a shutting-down connection with no work in flight closes: at once if it never
    /// had any, else after [`SHUTDOWN_LINGER`].
    fn shutdown_deadline(&self) -> Option<Instant> {
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

/// A connection that has sent its preface: `IO` plus the preface to replay, the slot it
/// holds under the connection cap, and what closes it.
pub(crate) struct Connection<IO> {
    io: IO,
    preface: &'static [u8],
    info: ConnectionInfo,
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
    shutting_down: bool,
    idle_timeout: Option<Duration>,
    idle: Pin<Box<Sleep>>,
    /// Frame boundaries of what the server wrote and read, and the last stream the peer
    /// opened: what a GOAWAY needs.
    sent: FrameCursor,
    received: FrameCursor,
    last_stream: u32,
    /// Once closing: the GOAWAY frame and how much of it is written.
    goaway: Option<([u8; GOAWAY_LEN], usize)>,
    closed: bool,
    _slot: OwnedSemaphorePermit,
}

/// Length of a GOAWAY frame without debug data.
const GOAWAY_LEN: usize = 17;

/// Follows HTTP/2 frame boundaries in one direction of a connection.
#[derive(Debug, Default)]
struct FrameCursor {
    header: [u8; 9],
    have: usize,
    body_left: usize,
}

impl FrameCursor {
    /// Takes in `bytes`; `on_header(type, stream id)` sees each complete frame header.
    fn feed(&mut self, mut bytes: &[u8], mut on_header: impl FnMut(u8, u32)) {
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(bytes.len());
                self.body_left -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (self.header.len() - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == self.header.len() {
                let h = self.header;
                self.have = 0;
                self.body_left = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
                on_header(h[3], u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff);
            }
        }
    }

    fn at_boundary(&self) -> bool {
        self.have == 0 && self.body_left == 0
    }
}

impl<IO: AsyncWrite + Unpin> Connection<IO> {
    /// Writes a GOAWAY naming the last stream the peer opened, so that its calls sent
    /// meanwhile are retried elsewhere rather than lost; skipped when the server is in
    /// the middle of writing a frame (the peer is not reading, then).
    fn poll_goaway(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.goaway.is_none() {
            if !self.sent.at_boundary() {
                return Poll::Ready(());
            }
            let mut frame = [0u8; GOAWAY_LEN];
            frame[2] = 8; // payload length
            frame[3] = 7; // type GOAWAY
            frame[9..13].copy_from_slice(&self.last_stream.to_be_bytes());
            self.goaway = Some((frame, 0));
        }
        let Some((frame, written)) = &mut self.goaway else { return Poll::Ready(()) };
        while *written < GOAWAY_LEN {
            match Pin::new(&mut self.io).poll_write(cx, &frame[*written..]) {
                Poll::Ready(Ok(0) | Err(_)) => *written = GOAWAY_LEN,
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(())
    }
}

impl<IO> Connection<IO> {
    /// True once the connection must close: idle for too long, or shutting down with no
    /// work in flight. Registers the task to be woken when that may change.
    fn must_close(&mut self, cx: &mut Context<'_>) -> bool {
        let state = &self.info.state;
        state.reader.register(cx.waker());
        if !self.shutting_down {
            self.shutting_down = self.closing.as_mut().poll(cx).is_ready();
        }
        let shutdown = self.shutting_down.then(|| state.shutdown_deadline()).flatten();
        let idle = self.idle_timeout.and_then(|timeout| state.idle_deadline(timeout));
        let Some(deadline) = shutdown.into_iter().chain(idle).min() else {
            return false;
        };
        if deadline <= Instant::now() {
            return true;
        }
        let deadline = tokio::time::Instant::from_std(deadline);
        if self.idle.deadline() != deadline {
            self.idle.as_mut().reset(deadline);
        }
        self.idle.as_mut().poll(cx).is_ready()
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Connection<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.closed || this.must_close(cx) {
            this.closed = true;
            // End of input once the GOAWAY is out: hyper flushes what it has and closes.
            return this.poll_goaway(cx).map(Ok);
        }
        if !this.preface.is_empty() {
            let n = this.preface.len().min(buf.remaining());
            buf.put_slice(&this.preface[..n]);
            this.preface = &this.preface[n..];
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let result = Pin::new(&mut this.io).poll_read(cx, buf);
        let last_stream = &mut this.last_stream;
        this.received.feed(&buf.filled()[before..], |kind, stream| {
            if kind == 1 {
                *last_stream = (*last_stream).max(stream); // HEADERS opening a stream
            }
        });
        result
    }
}

impl<IO: AsyncWrite + Unpin> Connection<IO> {
    /// Finishes a GOAWAY begun, before anything else is written.
    fn poll_pending_goaway(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &self.goaway {
            Some((_, written)) if *written < GOAWAY_LEN => self.poll_goaway(cx),
            _ => Poll::Ready(()),
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Connection<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending_goaway(cx));
        let written = std::task::ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
        this.sent.feed(&buf[..written], |_, _| {});
        Poll::Ready(Ok(written))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending_goaway(cx));
        let written = std::task::ready!(Pin::new(&mut this.io).poll_write_vectored(cx, bufs))?;
        let mut left = written;
        for buf in bufs {
            let n = left.min(buf.len());
            this.sent.feed(&buf[..n], |_, _| {});
            left -= n;
            if left == 0 {
                break;
            }
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_pending_goaway(cx));
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<IO> Connected for Connection<IO> {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

/// Makes the connection's byte stream from an accepted socket: the identity for
/// plaintext, a TLS handshake otherwise. It runs under the handshake deadline.
pub(crate) trait Handshake: Send + Sync + 'static {
    /// The byte stream HTTP/2 runs over.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Handshakes `tcp`.
    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

/// The stream of connections that have completed their handshake and preface.
pub(crate) struct Incoming<H: Handshake> {
    listener: TcpListener,
    limits: ConnectionLimits,
    handshake: Arc<H>,
    closing: CancellationToken,
    slots: PollSemaphore,
    /// A slot taken while `accept` had nothing to give.
    slot: Option<OwnedSemaphorePermit>,
    handshakes: JoinSet<Option<Connection<H::Io>>>,
    backoff: Option<Pin<Box<Sleep>>>,
    next_backoff: Duration,
    accept_errors: LogLimiter,
}

impl<H: Handshake> Incoming<H> {
    /// Accepts on `listener` within `limits`; connections close early once `closing`
    /// is cancelled.
    pub(crate) fn new(
        listener: TcpListener,
        limits: ConnectionLimits,
        closing: CancellationToken,
        handshake: H,
    ) -> Self {
        let slots = PollSemaphore::new(Arc::new(Semaphore::new(limits.max_connections.max(1))));
        Incoming {
            listener,
            limits,
            handshake: Arc::new(handshake),
            closing,
            slots,
            slot: None,
            handshakes: JoinSet::new(),
            backoff: None,
            next_backoff: ACCEPT_BACKOFF.0,
            accept_errors: LogLimiter::new(Duration::from_secs(10)),
        }
    }

    fn start_handshake(&mut self, tcp: TcpStream, peer: SocketAddr, slot: OwnedSemaphorePermit) {
        let tcp_info = TcpConnectInfo { local_addr: tcp.local_addr().ok(), remote_addr: Some(peer) };
        let _ = tcp.set_nodelay(true);
        let handshake = Arc::clone(&self.handshake);
        let limits = self.limits.clone();
        let closing = self.closing.clone();
        self.handshakes.spawn(async move {
            let opened = async {
                let mut io = handshake.handshake(tcp).await?;
                let mut preface = [0u8; PREFACE.len()];
                io.read_exact(&mut preface).await?;
                match &preface == PREFACE {
                    true => Ok(io),
                    false => Err(io::Error::new(io::ErrorKind::InvalidData, "not an HTTP/2 preface")),
                }
            };
            let io = match tokio::time::timeout(limits.handshake_timeout, opened).await {
                Ok(Ok(io)) => io,
                Ok(Err(err)) => {
                    tracing::debug!(%peer, %err, "connection closed before its HTTP/2 preface");
                    return None;
                }
                Err(_) => {
                    tracing::debug!(%peer, timeout = ?limits.handshake_timeout, "no HTTP/2 preface in time");
                    return None;
                }
            };
            Some(Connection {
                io,
                preface: PREFACE,
                info: ConnectionInfo { tcp: tcp_info, state: Arc::new(ConnectionState::new()) },
                closing: Box::pin(closing.cancelled_owned()),
                shutting_down: false,
                idle_timeout: limits.idle_timeout,
                idle: Box::pin(tokio::time::sleep(Duration::ZERO)),
                sent: FrameCursor::default(),
                received: FrameCursor::default(),
                last_stream: 0,
                goaway: None,
                closed: false,
                _slot: slot,
            })
        });
    }

    /// Handles an `accept` error: the peer's own (it reset before we took it) is
    /// skipped; anything else (out of file descriptors, memory) pauses accepting.
    fn accept_failed(&mut self, err: io::Error) {
        use io::ErrorKind as K;
        if matches!(err.kind(), K::ConnectionAborted | K::ConnectionReset | K::Interrupted | K::WouldBlock) {
            return;
        }
        let pause = self.next_backoff;
        self.next_backoff = (pause * 2).min(ACCEPT_BACKOFF.1);
        self.backoff = Some(Box::pin(tokio::time::sleep(pause)));
        if let Some(suppressed) = self.accept_errors.allow() {
            tracing::warn!(%err, ?pause, suppressed, "accept failed; pausing (open files: raise `ulimit -n`)");
        }
    }
}

impl<H: Handshake> Stream for Incoming<H> {
    type Item = Result<Connection<H::Io>, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        for _ in 0..ACCEPTS_PER_POLL {
            while let Poll::Ready(Some(done)) = this.handshakes.poll_join_next(cx) {
                if let Ok(Some(connection)) = done {
                    return Poll::Ready(Some(Ok(connection)));
                }
            }
            if let Some(backoff) = &mut this.backoff {
                if backoff.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.backoff = None;
            }
            let slot = match this.slot.take() {
                Some(slot) => slot,
                None => match this.slots.poll_acquire(cx) {
                    Poll::Ready(Some(slot)) => slot,
                    // The semaphore is never closed.
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                },
            };
            match this.listener.poll_accept(cx) {
                Poll::Ready(Ok((tcp, peer))) => {
                    this.next_backoff = ACCEPT_BACKOFF.0;
                    this.start_handshake(tcp, peer, slot);
                }
                Poll::Ready(Err(err)) => this.accept_failed(err),
                Poll::Pending => {
                    this.slot = Some(slot);
                    return Poll::Pending;
                }
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Raises this process's open-file soft limit to its hard limit, so that the connection
/// cap, not the default 1,024 descriptors, is what bounds connections. Returns the new
/// soft limit.
pub fn raise_open_file_limit() -> io::Result<u64> {
    #[cfg(unix)]
    {
        rlimit::increase_nofile_limit(u64::MAX)
    }
    #[cfg(not(unix))]
    {
        Ok(0)
    }
}

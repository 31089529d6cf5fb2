//! The accept loop, as the stream of connections tonic serves: the listener's, and the
//! pipes opened in this process (`Server::in_process`), each counted as the client
//! 127.0.0.1 and bounded as any other.
//!
//! Every resource a peer can hold before it makes a call is bounded here:
//! - at most `max_connections` are open or handshaking, shared fairly among clients
//!   ([`super::admission`]): at the bound, a client within its fair share is admitted by
//!   closing a connection of the client holding the most (its idlest), and anyone else's
//!   new connection is closed at once. So the loop always accepts, and a newcomer (a
//!   liveness probe) never waits in the kernel's backlog behind a flood. It stops only
//!   when connections taken back are still closing beyond an eighth more than the bound
//!   ([`hard_slots`]), which is what the open-file limit is sized for;
//! - a connection must finish its handshake (TLS, if any) and send the 24-byte HTTP/2
//!   preface within `handshake_timeout`; handshakes run in their own tasks, so a silent
//!   peer never holds up the next accept. With `accept_http1` (the Connect door, on by
//!   default, and gRPC-Web), a connection whose first bytes leave the preface is taken as
//!   HTTP/1.1 instead when they open a request line (a known method and a space), under
//!   the same deadline, cap and idle timeout (hyper's header-read timeout then bounds the
//!   rest of each request head); without it (`--no-connect` and no `--grpc-web`), or when
//!   they are neither, such a connection is closed at once, with an orderly end of stream
//!   rather than a reset;
//! - a connection with no call in flight for `idle_timeout` is closed (gRPC's
//!   `MAX_CONNECTION_IDLE`); PINGs do not count as calls;
//! - once shutdown begins, a connection closes as soon as it has no call in flight.
//!
//! How a connection is closed (a GOAWAY, then end of input) is [`super::transport`]'s.
//! `accept` errors such as `EMFILE` back off from 10 ms to 1 s instead of spinning; the
//! connection bound is fitted under the open-file limit ([`super::open_files`]) so that
//! they are rare.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, PollSemaphore};
use tonic::transport::server::TcpConnectInfo;

use super::admission::{FairShare, Grouping, Holder, SharePolicy};
use super::state::{ConnectionInfo, ConnectionState, Pressure, Slot};
use super::transport::{Opening, Transport, PREFACE};
use crate::log_limiter::LogLimiter;

/// First and longest pause after an `accept` error that is not the peer's.
const ACCEPT_BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// How much of a refused connection's input is read and dropped before it is closed,
/// in bytes and in time: enough for a request head sent to the wrong port (see
/// [`close_refused`]).
const REFUSED_DRAIN: (usize, Duration) = (16 * 1024, Duration::from_secs(1));

/// Connections accepted in one poll before the loop lets other tasks run.
const ACCEPTS_PER_POLL: usize = 64;

/// Connections the accept loop lets be open at once for a bound of `max_connections`:
/// an eighth more (at least one), for connections taken back that are still closing.
pub(crate) fn hard_slots(max_connections: usize) -> usize {
    max_connections.saturating_add((max_connections / 8).max(1))
}

/// Bounds on connections; see the module docs.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionLimits {
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_peer: Option<usize>,
    /// Which addresses are one client.
    pub(crate) grouping: Grouping,
    pub(crate) idle_under_pressure: Duration,
    pub(crate) handshake_timeout: Duration,
    pub(crate) idle_timeout: Option<Duration>,
    /// Take connections that do not open with the HTTP/2 preface as HTTP/1.1 (the Connect
    /// door and gRPC-Web).
    pub(crate) accept_http1: bool,
}

/// A connection as the loop accepts it.
pub(crate) enum Accepted {
    /// From the listener.
    Tcp(TcpStream),
    /// The server's end of a pipe that a caller in this process opened
    /// ([`crate::server::InProcess`]).
    InProcess(DuplexStream),
}

/// The peer an in-process connection counts as, under the per-client limits: the loopback
/// client that the same caller would be over TCP.
pub(crate) const IN_PROCESS_PEER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// Makes the connection's byte stream from an accepted socket: the identity for
/// plaintext, a TLS handshake otherwise. It runs under the handshake deadline.
pub(crate) trait Handshake: Send + Sync + 'static {
    /// The byte stream HTTP/2 runs over.
    type Io: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Handshakes `socket`.
    fn handshake(&self, socket: Accepted) -> impl Future<Output = io::Result<Self::Io>> + Send;
}

/// The stream of connections that have completed their handshake and preface.
pub(crate) struct Incoming<H: Handshake> {
    listener: TcpListener,
    /// Connections opened in this process, admitted as the listener's are.
    in_process: Option<mpsc::Receiver<DuplexStream>>,
    limits: ConnectionLimits,
    handshake: Arc<H>,
    closing: CancellationToken,
    /// Hard slots ([`hard_slots`]); beyond them, the kernel's backlog.
    slots: PollSemaphore,
    /// A slot taken while `accept` had nothing to give.
    slot: Option<OwnedSemaphorePermit>,
    /// Connections shared fairly among peers.
    shares: Arc<FairShare>,
    pressure: Arc<Pressure>,
    refusals: LogLimiter,
    evictions: LogLimiter,
    handshakes: JoinSet<Option<Transport<H::Io>>>,
    backoff: Option<Pin<Box<Sleep>>>,
    next_backoff: Duration,
    accept_errors: LogLimiter,
}

impl<H: Handshake> Incoming<H> {
    /// Accepts on `listener` and from `in_process` within `limits`; connections close
    /// early once `closing` is cancelled.
    pub(crate) fn new(
        listener: TcpListener,
        in_process: Option<mpsc::Receiver<DuplexStream>>,
        limits: ConnectionLimits,
        closing: CancellationToken,
        handshake: H,
    ) -> Self {
        let policy =
            SharePolicy::new(limits.max_connections, limits.max_connections_per_peer, limits.grouping);
        let slots = PollSemaphore::new(Arc::new(Semaphore::new(hard_slots(policy.limit))));
        let shares = FairShare::new(policy);
        let pressure = Pressure::new(Arc::clone(&shares), limits.idle_under_pressure);
        Incoming {
            listener,
            in_process,
            limits,
            handshake: Arc::new(handshake),
            closing,
            slots,
            slot: None,
            shares,
            pressure,
            refusals: LogLimiter::new(Duration::from_secs(10)),
            evictions: LogLimiter::new(Duration::from_secs(10)),
            handshakes: JoinSet::new(),
            backoff: None,
            next_backoff: ACCEPT_BACKOFF.0,
            accept_errors: LogLimiter::new(Duration::from_secs(10)),
        }
    }

    /// Admits a connection under its client's fair share (closing one of the heaviest
    /// client's if need be), or closes it at once.
    fn admit(&mut self, socket: Accepted, peer: SocketAddr, hard: OwnedSemaphorePermit) {
        let state = Arc::new(ConnectionState::new());
        match self.shares.try_take(peer.ip(), 1, Arc::clone(&state) as Arc<dyn Holder>) {
            Ok(share) => {
                if share.took_back() > 0 {
                    if let Some(suppressed) = self.evictions.allow() {
                        tracing::info!(%peer, suppressed, "at the connection bound: closed a connection of the client holding the most, for a client within its fair share");
                    }
                }
                self.start_handshake(socket, peer, state, Slot { _hard: hard, _share: share });
            }
            Err(refusal) => {
                if let Some(suppressed) = self.refusals.allow() {
                    tracing::info!(%peer, ?refusal, suppressed, "connection refused: its client holds its share of connections");
                }
            }
        }
    }

    fn start_handshake(
        &mut self,
        socket: Accepted,
        peer: SocketAddr,
        state: Arc<ConnectionState>,
        slot: Slot,
    ) {
        let local_addr = match &socket {
            Accepted::Tcp(tcp) => {
                let _ = tcp.set_nodelay(true);
                tcp.local_addr().ok()
            }
            Accepted::InProcess(_) => None,
        };
        let tcp_info = TcpConnectInfo { local_addr, remote_addr: Some(peer) };
        let handshake = Arc::clone(&self.handshake);
        let limits = self.limits.clone();
        let closing = self.closing.clone();
        let pressure = Arc::clone(&self.pressure);
        self.handshakes.spawn(async move {
            let opened = async {
                let mut io = handshake.handshake(socket).await?;
                match read_opening(&mut io, limits.accept_http1).await {
                    Ok(opening) => Ok((io, opening)),
                    Err(err) => {
                        if err.kind() == io::ErrorKind::InvalidData {
                            close_refused(&mut io).await;
                        }
                        Err(err)
                    }
                }
            };
            let opened = tokio::select! {
                opened = tokio::time::timeout(limits.handshake_timeout, opened) => opened,
                () = state.until_evicted() => {
                    tracing::debug!(%peer, "connection closed in its handshake, for a client within its fair share");
                    return None;
                }
            };
            let (io, opening) = match opened {
                Ok(Ok(opened)) => opened,
                Ok(Err(err)) => {
                    tracing::debug!(%peer, %err, "connection closed before its HTTP/2 preface");
                    return None;
                }
                Err(_) => {
                    tracing::debug!(%peer, timeout = ?limits.handshake_timeout, "no HTTP/2 preface in time");
                    return None;
                }
            };
            pressure.register(&state);
            let info = ConnectionInfo { tcp: tcp_info, state };
            Some(Transport::new(
                io,
                opening,
                info,
                closing.cancelled_owned(),
                limits.idle_timeout,
                pressure,
                slot,
            ))
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
    type Item = Result<Transport<H::Io>, Infallible>;

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
            if let Some(in_process) = &mut this.in_process {
                match in_process.poll_recv(cx) {
                    Poll::Ready(Some(pipe)) => {
                        this.admit(Accepted::InProcess(pipe), IN_PROCESS_PEER, slot);
                        continue;
                    }
                    // Every `InProcess` handle is gone: no more will come.
                    Poll::Ready(None) => this.in_process = None,
                    Poll::Pending => {}
                }
            }
            match this.listener.poll_accept(cx) {
                Poll::Ready(Ok((tcp, peer))) => {
                    this.next_backoff = ACCEPT_BACKOFF.0;
                    this.admit(Accepted::Tcp(tcp), peer, slot);
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

/// The methods an HTTP/1.1 request may open with here. A connection whose first bytes
/// leave the HTTP/2 preface is taken as HTTP/1.1 only when they start with one of them and
/// a space, so that other bytes (a TLS hello on the plaintext port, h2spec's invalid
/// preface) are refused as an invalid preface, unanswered, rather than by hyper's `400`.
const HTTP1_METHODS: [&[u8]; 9] =
    [b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"CONNECT", b"OPTIONS", b"TRACE", b"PATCH"];

/// Reads a connection's first bytes: the HTTP/2 preface in full, or, with `accept_http1`,
/// as much as it takes to see that they are not the preface (an HTTP/1.1 request's
/// method differs within its first two bytes) and that they start a request line: a
/// method and a space. Reading stops there, so a short request is never waited on for
/// bytes it will not send.
async fn read_opening(io: &mut (impl AsyncRead + Unpin), accept_http1: bool) -> io::Result<Opening> {
    let mut read = [0u8; PREFACE.len()];
    let mut have = 0;
    while have < read.len() {
        let n = io.read(&mut read[have..]).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        have += n;
        if read[..have] == PREFACE[..have] {
            continue;
        }
        if !accept_http1 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not an HTTP/2 preface"));
        }
        match http1_method(&read[..have]) {
            Some(true) => return Ok(Opening::Http1(Bytes::copy_from_slice(&read[..have]))),
            Some(false) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "neither HTTP/2 nor HTTP/1.1"))
            }
            None => {}
        }
    }
    match read == *PREFACE {
        true => Ok(Opening::Http2),
        false => Err(io::Error::new(io::ErrorKind::InvalidData, "neither HTTP/2 nor HTTP/1.1")),
    }
}

/// Whether `start` opens an HTTP/1.1 request line (a known method, then a space);
/// `None` while it could still.
fn http1_method(start: &[u8]) -> Option<bool> {
    let mut could_be = false;
    for method in HTTP1_METHODS {
        match start.get(..=method.len()) {
            Some(line) if line[..method.len()] == *method && line[method.len()] == b' ' => return Some(true),
            Some(_) => {}
            None => could_be |= method.starts_with(start) || start.starts_with(method),
        }
    }
    (!could_be).then_some(false)
}

/// Closes a connection whose opening was refused with an orderly end of stream (after
/// TLS's close_notify, if any), not a reset: a socket dropped with input unread makes the
/// kernel send an RST, which the peer reads as "connection reset" rather than the close
/// RFC 9113 (section 3.4) asks for (`tests/transport_frames.rs` checks it). So the write
/// side is shut first and what the peer still sends is read and dropped, within
/// [`REFUSED_DRAIN`]; a peer that sends more, or for longer, is reset as before, and holds
/// its slot no longer than a slow handshake could (the handshake deadline bounds this too).
async fn close_refused(io: &mut (impl AsyncRead + AsyncWrite + Unpin)) {
    let drain = async {
        io.shutdown().await?;
        let mut sink = [0u8; 1024];
        let mut left = REFUSED_DRAIN.0;
        while left > 0 {
            match io.read(&mut sink).await? {
                0 => break,
                n => left = left.saturating_sub(n),
            }
        }
        Ok::<_, io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSED_DRAIN.1, drain).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_preface_is_http2_and_a_request_that_leaves_it_is_http1_when_allowed() {
        let mut preface = &PREFACE[..];
        assert!(matches!(read_opening(&mut preface, false).await, Ok(Opening::Http2)));
        // 'P' could still be the preface: reading goes on, and all that was read is kept.
        let mut post = (&b"P"[..]).chain(&b"OST /x HTTP/1.1\r\n"[..]);
        match read_opening(&mut post, true).await {
            Ok(Opening::Http1(start)) => assert_eq!(&start[..], b"POST /x HTTP/1.1\r\n"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn http1_is_a_known_method_and_a_space_and_anything_else_is_refused() {
        for request in [&b"GET / HTTP/1.1\r\n"[..], b"PATCH /x HTTP/1.1\r\n", b"OPTIONS * HTTP/1.1\r\n"] {
            assert!(matches!(read_opening(&mut &request[..], true).await, Ok(Opening::Http1(_))));
        }
        // A method cut short is waited on; one that is not a method is refused.
        let err = read_opening(&mut &b"DELE"[..], true).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        for garbage in
            [&b"INVALID CONNECTION PREFACE\r\n\r\n"[..], b"\x16\x03\x01\x02\x00", b"GETX / HTTP/1.1"]
        {
            let err = read_opening(&mut &garbage[..], true).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{garbage:?}");
        }
    }

    #[tokio::test]
    async fn without_http1_a_request_or_a_short_preface_is_refused() {
        let err = read_opening(&mut &b"OPTIONS / HTTP/1.1\r\n"[..], false).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let err = read_opening(&mut &PREFACE[..10], true).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}

//! The HTTP/2 bytes this server reads and writes itself, under hyper.
//!
//! gRPC servers close a connection that has had no call for a while with a GOAWAY
//! (`MAX_CONNECTION_IDLE`, gRPC proposal A9, "Server-side Connection Management").
//! hyper's HTTP/2 server has keep-alive PINGs but no idle close and no way to send a
//! GOAWAY from outside the connection, and tonic's `Server` builder offers no
//! `max_connection_idle` (the gap other tonic users report too, for example
//! <https://github.com/0xMiden/node/issues/2273>). So each connection's byte stream
//! is wrapped here: the preface,
//! already read by the accept loop to check it, is replayed; frame headers are followed
//! in both directions (to know the last stream opened, and never to write in the middle
//! of a frame); and closing writes a 17-byte GOAWAY (RFC 9113, section 6.8), then ends
//! the input so that hyper flushes and closes with no cooperation from the peer.
//!
//! The frame layout this relies on (a 9-byte header: 24-bit length, type, flags,
//! 31-bit stream id) is fixed by RFC 9113; `tests/transport_frames.rs` checks against
//! the h2 crate hyper uses that the GOAWAY written here is one a peer decodes, so an
//! upgrade that changes what hyper writes or reads shows up there.
//!
//! A connection may speak HTTP/1.1 instead, for the Connect door or gRPC-Web
//! ([`Opening::Http1`]): its
//! first bytes are replayed the same way, but there are no frames to follow and no
//! GOAWAY to write; closing only ends the input, and hyper closes an HTTP/1.1
//! connection whose input ends between requests.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;
use tokio_util::sync::WaitForCancellationFutureOwned;
use tonic::transport::server::Connected;

use super::state::{ConnectionInfo, Pressure, Slot};

/// The bytes every HTTP/2 client sends first (RFC 9113, section 3.4).
pub(crate) const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a connection speaks, as its first bytes told the accept loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// HTTP/2: frames are followed and closing writes a GOAWAY.
    Http2,
    /// HTTP/1.1 (the Connect door, gRPC-Web and CORS from browsers): closing only ends
    /// the input.
    Http1,
}

/// What the accept loop read of a connection before handing it on.
#[derive(Debug)]
pub(crate) enum Opening {
    /// The HTTP/2 preface, in full.
    Http2,
    /// The first bytes of an HTTP/1.1 request, up to where they left the preface.
    Http1(Bytes),
}

/// A connection whose first bytes have been read: `IO` plus those bytes to replay, the
/// slot it holds under the connection cap, and what closes it.
pub(crate) struct Transport<IO> {
    io: IO,
    mode: Mode,
    /// What the accept loop read and hyper has yet to: the preface, or the start of an
    /// HTTP/1.1 request.
    replay: Bytes,
    info: ConnectionInfo,
    closing: Pin<Box<WaitForCancellationFutureOwned>>,
    shutting_down: bool,
    idle_timeout: Option<Duration>,
    pressure: Arc<Pressure>,
    idle: Pin<Box<Sleep>>,
    /// Frame boundaries of what the server wrote and read, and the last stream the peer
    /// opened: what a GOAWAY needs.
    sent: FrameCursor,
    received: FrameCursor,
    last_stream: u32,
    /// Once closing: the GOAWAY frame and how much of it is written.
    goaway: Option<([u8; GOAWAY_LEN], usize)>,
    closed: bool,
    _slot: Slot,
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

impl<IO> Transport<IO> {
    /// Wraps `io`, whose `opening` has been read, holding `slot` until it closes: it
    /// closes once `closing` fires and its work is done, or after `idle_timeout` with no
    /// call.
    pub(crate) fn new(
        io: IO,
        opening: Opening,
        info: ConnectionInfo,
        closing: WaitForCancellationFutureOwned,
        idle_timeout: Option<Duration>,
        pressure: Arc<Pressure>,
        slot: Slot,
    ) -> Self {
        let (mode, replay) = match opening {
            Opening::Http2 => (Mode::Http2, Bytes::from_static(PREFACE)),
            Opening::Http1(start) => (Mode::Http1, start),
        };
        Transport {
            io,
            mode,
            replay,
            info,
            closing: Box::pin(closing),
            shutting_down: false,
            idle_timeout,
            pressure,
            idle: Box::pin(tokio::time::sleep(Duration::ZERO)),
            sent: FrameCursor::default(),
            received: FrameCursor::default(),
            last_stream: 0,
            goaway: None,
            closed: false,
            _slot: slot,
        }
    }
}

impl<IO: AsyncWrite + Unpin> Transport<IO> {
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

impl<IO> Transport<IO> {
    /// True once the connection must close: taken back for another client, idle for too
    /// long, holding a call ended for another client that its client does not let end,
    /// or shutting down with no work in flight. Registers the task to be woken when that
    /// may change.
    fn must_close(&mut self, cx: &mut Context<'_>) -> bool {
        let state = &self.info.state;
        state.reader.register(cx.waker());
        if state.evicted() {
            return true;
        }
        if !self.shutting_down {
            self.shutting_down = self.closing.as_mut().poll(cx).is_ready();
        }
        let shutdown = self.shutting_down.then(|| state.shutdown_deadline()).flatten();
        let idle = state.idle_deadline(self.idle_timeout, &self.pressure);
        let preempted = state.preempted_deadline();
        let Some(deadline) = shutdown.into_iter().chain(idle).chain(preempted).min() else {
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

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Transport<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.closed || this.must_close(cx) {
            this.closed = true;
            // End of input once the GOAWAY (HTTP/2 only) is out: hyper flushes what it
            // has and closes.
            return match this.mode {
                Mode::Http2 => this.poll_goaway(cx).map(Ok),
                Mode::Http1 => Poll::Ready(Ok(())),
            };
        }
        if this.replay.has_remaining() {
            let n = this.replay.len().min(buf.remaining());
            buf.put_slice(&this.replay[..n]);
            this.replay.advance(n);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let result = Pin::new(&mut this.io).poll_read(cx, buf);
        if this.mode == Mode::Http1 {
            return result;
        }
        let last_stream = &mut this.last_stream;
        this.received.feed(&buf.filled()[before..], |kind, stream| {
            if kind == 1 {
                *last_stream = (*last_stream).max(stream); // HEADERS opening a stream
            }
        });
        result
    }
}

impl<IO: AsyncWrite + Unpin> Transport<IO> {
    /// Finishes a GOAWAY begun, before anything else is written.
    fn poll_pending_goaway(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &self.goaway {
            Some((_, written)) if *written < GOAWAY_LEN => self.poll_goaway(cx),
            _ => Poll::Ready(()),
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Transport<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        std::task::ready!(this.poll_pending_goaway(cx));
        let written = std::task::ready!(Pin::new(&mut this.io).poll_write(cx, buf))?;
        if this.mode == Mode::Http2 {
            this.sent.feed(&buf[..written], |_, _| {});
        }
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
        if this.mode == Mode::Http1 {
            return Poll::Ready(Ok(written));
        }
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

impl<IO> Connected for Transport<IO> {
    type ConnectInfo = ConnectionInfo;

    fn connect_info(&self) -> ConnectionInfo {
        self.info.clone()
    }
}

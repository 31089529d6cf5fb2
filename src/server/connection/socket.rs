//! The byte stream of a connection (a TCP socket, or an in-process pipe from
//! `Server::in_process`): TLS-terminated when configured (a pipe never is), counted in the
//! metrics, and closed by force once it outlives `max_connection_age +
//! max_connection_age_grace`. [`Accept`] makes it from an accepted socket, as the
//! accept loop's handshake (`accept.rs`, which bounds its time and adds the
//! connection's idle and shutdown rules on top).
//!
//! The forced close lives here because tonic 0.14.9 does not send the GOAWAY at
//! `max_connection_age` when a grace is also set (it sleeps age + grace, then drops the
//! connection): so tonic gets only the age, which it honours with a GOAWAY, and the
//! grace is enforced on the socket.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use super::accept::{Accepted, Handshake};
use crate::server::metrics::{ConnectionGuard, Metrics};
use crate::server::tls::ReloadableTls;

/// One accepted connection, plaintext or TLS.
pub(crate) struct TlsSocket {
    io: Io,
    /// When it fires the connection fails its next read or write, and hyper drops it.
    forced_close: Option<Pin<Box<Sleep>>>,
    _open: ConnectionGuard,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// In this process, never on the network: plaintext, whatever the TLS settings.
    InProcess(DuplexStream),
}

impl TlsSocket {
    /// Fails with `TimedOut` once the forced-close deadline has passed.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let Some(deadline) = &mut self.forced_close else { return Ok(()) };
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection closed: max connection age and its grace are over",
            )),
            Poll::Pending => Ok(()),
        }
    }
}

impl AsyncRead for TlsSocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check_deadline(cx)?;
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Io::Tls(io) => Pin::new(io).poll_read(cx, buf),
            Io::InProcess(io) => Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for TlsSocket {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check_deadline(cx)?;
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Io::Tls(io) => Pin::new(io).poll_write(cx, buf),
            Io::InProcess(io) => Pin::new(io).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_flush(cx),
            Io::Tls(io) => Pin::new(io).poll_flush(cx),
            Io::InProcess(io) => Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Io::Tls(io) => Pin::new(io).poll_shutdown(cx),
            Io::InProcess(io) => Pin::new(io).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.check_deadline(cx)?;
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Io::Tls(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Io::InProcess(io) => Pin::new(io).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(io) => io.is_write_vectored(),
            Io::Tls(io) => io.is_write_vectored(),
            Io::InProcess(io) => io.is_write_vectored(),
        }
    }
}

/// Makes a [`TlsSocket`] from each accepted socket.
#[derive(Debug, Clone)]
pub(crate) struct Accept {
    /// TLS-terminate every connection with this acceptor.
    pub(crate) tls: Option<Arc<ReloadableTls>>,
    /// Drop a connection this long after it was accepted.
    pub(crate) forced_close_after: Option<Duration>,
    /// Counts connections and failed handshakes.
    pub(crate) metrics: Metrics,
}

impl Handshake for Accept {
    type Io = TlsSocket;

    /// Runs the TLS handshake, if any; the accept loop bounds its time.
    async fn handshake(&self, socket: Accepted) -> io::Result<TlsSocket> {
        let forced_close = self.forced_close_after.map(|after| Box::pin(tokio::time::sleep(after)));
        let io = match (socket, &self.tls) {
            (Accepted::InProcess(pipe), _) => Io::InProcess(pipe),
            (Accepted::Tcp(tcp), None) => Io::Plain(tcp),
            (Accepted::Tcp(tcp), Some(tls)) => {
                // Dropped before it ends (the accept loop's deadline), it counts as failed.
                let mut failed = HandshakeFailure { metrics: Some(&self.metrics) };
                let stream = tls.accept(tcp).await?;
                failed.disarm();
                Io::Tls(Box::new(stream))
            }
        };
        Ok(TlsSocket { io, forced_close, _open: self.metrics.connection_opened() })
    }
}

/// Counts a failed TLS handshake when dropped armed: on an error or on the deadline.
struct HandshakeFailure<'a> {
    metrics: Option<&'a Metrics>,
}

impl HandshakeFailure<'_> {
    fn disarm(&mut self) {
        self.metrics = None;
    }
}

impl Drop for HandshakeFailure<'_> {
    fn drop(&mut self) {
        if let Some(metrics) = self.metrics {
            metrics.tls_handshake_failed();
        }
    }
}

//! The connections tonic serves: accepted here, TLS-terminated when configured, and
//! closed by force once they outlive `max_connection_age + max_connection_age_grace`.
//!
//! STAND-IN: [`incoming`] is a minimal accept loop until the hardened one (connection
//! cap, accept-error backoff, handshake and idle deadlines; issue 10's
//! `src/server/incoming.rs`) lands; swap the loop, keep [`Connection`] and the TLS step.
//!
//! The forced close lives here because tonic 0.14.9 does not send the GOAWAY at
//! `max_connection_age` when a grace is also set (it sleeps age + grace, then drops the
//! connection): so tonic gets only the age, which it honours with a GOAWAY, and the
//! grace is enforced on the socket.

use std::future::Future as _;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Sleep;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

use super::metrics::{ConnectionGuard, Metrics};
use super::tls::ReloadableTls;

/// How long a client gets to complete its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections accepted but not yet taken by tonic.
const BACKLOG: usize = 64;

/// One accepted connection, plaintext or TLS.
pub(crate) struct Connection {
    io: Io,
    info: TcpConnectInfo,
    /// When it fires the connection fails its next read or write, and hyper drops it.
    forced_close: Option<Pin<Box<Sleep>>>,
    _open: ConnectionGuard,
}

enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Connection {
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

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.check_deadline(cx)?;
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Io::Tls(io) => Pin::new(io).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.check_deadline(cx)?;
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Io::Tls(io) => Pin::new(io).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_flush(cx),
            Io::Tls(io) => Pin::new(io).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            Io::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Io::Tls(io) => Pin::new(io).poll_shutdown(cx),
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
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(io) => io.is_write_vectored(),
            Io::Tls(io) => io.is_write_vectored(),
        }
    }
}

/// What the accept loop needs besides the listener.
#[derive(Debug, Clone)]
pub(crate) struct AcceptConfig {
    /// TLS-terminate every connection with this acceptor.
    pub(crate) tls: Option<Arc<ReloadableTls>>,
    /// Drop a connection this long after it was accepted.
    pub(crate) forced_close_after: Option<Duration>,
    /// Counts connections and failed handshakes.
    pub(crate) metrics: Metrics,
}

/// Accepts on `listener` until the returned stream is dropped (tonic drops it when
/// shutdown begins, which closes the listening socket). Handshakes run concurrently,
/// so a slow client never holds up the next accept.
pub(crate) fn incoming(
    listener: TcpListener,
    config: AcceptConfig,
) -> ReceiverStream<io::Result<Connection>> {
    let (sender, receiver) = mpsc::channel(BACKLOG);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = sender.closed() => return,
            };
            let (tcp, remote) = match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of descriptors, most likely: give the process a moment.
                    tracing::warn!("accept failed: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let (sender, config) = (sender.clone(), config.clone());
            tokio::spawn(async move {
                if let Some(connection) = establish(tcp, remote, &config).await {
                    let _ = sender.send(Ok(connection)).await;
                }
            });
        }
    });
    ReceiverStream::new(receiver)
}

/// Sets the socket up and runs the TLS handshake; `None` when the handshake fails.
async fn establish(tcp: TcpStream, remote: SocketAddr, config: &AcceptConfig) -> Option<Connection> {
    let info = TcpConnectInfo { local_addr: tcp.local_addr().ok(), remote_addr: Some(remote) };
    // Small responses go out at once, as tonic's own TcpIncoming is told to.
    let _ = tcp.set_nodelay(true);
    let forced_close = config.forced_close_after.map(|after| Box::pin(tokio::time::sleep(after)));
    let io = match &config.tls {
        None => Io::Plain(tcp),
        Some(tls) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(tcp)).await {
            Ok(Ok(stream)) => Io::Tls(Box::new(stream)),
            Ok(Err(err)) => {
                tracing::debug!(%remote, "TLS handshake failed: {err}");
                config.metrics.tls_handshake_failed();
                return None;
            }
            Err(_) => {
                tracing::debug!(%remote, "TLS handshake timed out after {HANDSHAKE_TIMEOUT:?}");
                config.metrics.tls_handshake_failed();
                return None;
            }
        },
    };
    Some(Connection { io, info, forced_close, _open: config.metrics.connection_opened() })
}

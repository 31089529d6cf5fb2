//! A server: its address and TLS settings, how a connection reaches it (a socket or the
//! embedded server's pipe), and what all its connections learn of it together: reached,
//! distrusted, warned about.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use super::error::{error_chain, ConnectionError};
use crate::client::answer_check::WrongAnswer;
use crate::client::embedded::{Exchange, Pipe};
use crate::log_limiter::LogLimiter;

/// At most one warning about a failing server this often (the next one counts the
/// failures held back): a server down for a minute is one fact, not seventy lines.
const WARN_EVERY: Duration = Duration::from_secs(5);

/// sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

/// How long [`Server::speaks_tls`] waits to connect, and then for the server's first bytes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A parsed server address; its clones (one a connection) share what is known of it.
#[derive(Debug, Clone)]
pub struct Server {
    url: String,
    endpoint: Endpoint,
    /// Connects through this instead of a socket to `url` (the embedded server's pipe).
    pipe: Option<Pipe>,
    /// Solves a columnar run's batches without a connection (the embedded server's).
    exchange: Option<Exchange>,
    known: Arc<Known>,
}

/// What the connections to one server learn of it together.
#[derive(Debug)]
struct Known {
    /// Why it is not asked again, once it answered wrongly.
    distrust: Distrust,
    /// Set once any connection to it is made: from then on a failure is a fault to
    /// retry for `--retry-for`, no longer a sign of a wrong address.
    reached: AtomicBool,
    /// Its retry warnings, one every [`WARN_EVERY`] across its connections.
    warnings: LogLimiter,
}

impl Default for Known {
    fn default() -> Self {
        Known {
            distrust: Distrust::default(),
            reached: AtomicBool::default(),
            warnings: LogLimiter::new(WARN_EVERY),
        }
    }
}

/// Set when any connection to a server finds a wrong answer: from then on none of its
/// connections sends it a batch.
#[derive(Debug, Default)]
struct Distrust {
    /// The first wrong answer found, which every connection reports.
    why: OnceLock<WrongAnswer>,
    /// Cancelled once `why` is set.
    set: CancellationToken,
}

impl Server {
    /// Parses `url`: `https://` connects with `tls`, `http://` in plaintext, and a bare
    /// `host:port` means `http://host:port` (as before TLS existed); any other scheme is an
    /// error rather than a silent downgrade.
    pub fn parse(url: &str, tls: &ClientTlsConfig) -> Result<Self, ConnectionError> {
        let invalid = |reason: String| ConnectionError::InvalidUrl { url: url.to_owned(), reason };
        let (full, secure) = match url.split_once("://") {
            None => (format!("http://{url}"), false),
            Some(("http", _)) => (url.to_owned(), false),
            Some(("https", _)) => (url.to_owned(), true),
            Some((scheme, _)) => {
                return Err(invalid(format!("unsupported scheme {scheme:?}: use https:// (TLS) or http://")));
            }
        };
        let mut endpoint = Endpoint::from_shared(full.clone()).map_err(|err| invalid(err.to_string()))?;
        if secure {
            endpoint = endpoint.tls_config(tls.clone()).map_err(|err| invalid(error_chain(&err)))?;
        }
        let endpoint = endpoint
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            // Room for a full window of answers, so that the server never waits on us.
            .initial_stream_window_size(8 << 20)
            .initial_connection_window_size(16 << 20);
        Ok(Server { url: full, endpoint, pipe: None, exchange: None, known: Arc::default() })
    }

    /// The same server, reached through `pipe` (when given) rather than a socket, and
    /// solving a columnar run's batches through `exchange` (when given) without a
    /// connection.
    pub(crate) fn through(self, pipe: Option<Pipe>, exchange: Option<Exchange>) -> Self {
        Server { pipe, exchange, ..self }
    }

    /// Its exchange without a connection, when it is in this process.
    pub(crate) fn exchange(&self) -> Option<&Exchange> {
        self.exchange.as_ref()
    }

    /// Opens a channel to the server: its HTTP/2 handshake (and TLS's) over a socket, or
    /// over its pipe.
    pub(crate) async fn connect(&self) -> Result<Channel, tonic::transport::Error> {
        let Some(pipe) = &self.pipe else { return self.endpoint.connect().await };
        let pipe = pipe.clone();
        let connector = tower::service_fn(move |_: http::Uri| {
            let opened = pipe.connect();
            async move { opened.await.map(hyper_util::rt::TokioIo::new) }
        });
        self.endpoint.connect_with_connector(connector).await
    }

    /// The URL, normalised.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// True for an `https://` server.
    pub fn is_tls(&self) -> bool {
        self.url.starts_with("https://")
    }

    /// The host of the URL, without an IPv6 address's brackets.
    pub(super) fn host(&self) -> &str {
        self.endpoint.uri().host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']')
    }

    /// Marks the server as answering wrongly, for every connection to it.
    pub(super) fn distrust(&self, wrong: WrongAnswer) {
        let _ = self.known.distrust.why.set(wrong);
        self.known.distrust.set.cancel();
    }

    /// Resolves once the server has answered wrongly on any connection.
    pub(super) async fn distrusted(&self) {
        self.known.distrust.set.cancelled().await
    }

    /// The first wrong answer the server gave, once it gave one.
    pub(super) fn wrong_answer(&self) -> Option<&WrongAnswer> {
        self.known.distrust.why.get()
    }

    /// Records that a connection to the server was made.
    pub(super) fn mark_reached(&self) {
        self.known.reached.store(true, Ordering::Relaxed);
    }

    /// True once any connection to the server has been made.
    pub(crate) fn reached(&self) -> bool {
        self.known.reached.load(Ordering::Relaxed)
    }

    /// Logs a retry warning, unless one about this server went out less than
    /// [`WARN_EVERY`] ago.
    pub(super) fn warn(&self, message: impl FnOnce() -> String) {
        match self.known.warnings.allow() {
            None => {}
            Some(0) => tracing::warn!(server = %self.url, "{}", message()),
            Some(held) => {
                tracing::warn!(server = %self.url, "{} ({held} more failures since the last warning)", message())
            }
        }
    }

    /// True when the plaintext server at `url` answers the HTTP/2 preface with a TLS record
    /// (an alert, `0x15 0x03 ..`): it expects a TLS handshake. A plaintext HTTP/2 server
    /// answers with a SETTINGS frame, whose first length byte is never above `0x00` for the
    /// settings that exist, so the two cannot be confused. h2 only reports such an answer as
    /// "frame with invalid size", which looks like any broken peer and would be retried.
    pub(super) async fn speaks_tls(&self) -> bool {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Some(port) = self.endpoint.uri().port_u16() else { return false };
        let host = self.host();
        let probe = async {
            let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
            stream.write_all(H2_PREFACE).await.ok()?;
            let mut head = [0u8; 2];
            stream.read_exact(&mut head).await.ok()?;
            Some(matches!(head, [0x14..=0x17, 0x03]))
        };
        matches!(tokio::time::timeout(PROBE_TIMEOUT, probe).await, Ok(Some(true)))
    }
}

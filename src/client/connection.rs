//! One server: a `SolveBatchStream` call fed from the shared queue, kept alive across
//! failures.
//!
//! Batches travel as the bytes encoded on the reading thread (a pass-through codec), and
//! answers come back as bytes decoded on the writing thread: the async workers only move
//! frames, which leaves the CPU to parsing, solving and formatting. A batch stays in the
//! connection's window until its answer, checked against it ([`answer_check`]), is handed
//! to the writer; when the call fails, every batch of the window goes back to the queue,
//! so that each is answered exactly once, by whichever server gets it next. A server that
//! answers wrongly is not asked again, on any of its connections.
//!
//! [`answer_check`]: crate::client::answer_check

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt, TryStreamExt};
use prost::bytes::{Buf, BufMut, Bytes};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::codec::{BufferSettings, Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tonic::{Code, Status};

use crate::client::answer_check::{self, WrongAnswer};
use crate::client::batch::Batch;
use crate::client::embedded::{Exchange, Pipe};
use crate::client::output::{Answered, ToWriter};
use crate::client::queue::WorkQueue;
use crate::client::tls_failure;
use crate::log_limiter::LogLimiter;
use crate::pb;

/// The bulk RPC's method name; its HTTP/2 path is `/{SERVICE_NAME}/{SOLVE_BATCH_STREAM}`.
const SOLVE_BATCH_STREAM: &str = "SolveBatchStream";

/// First wait after a failure; doubled after each failure in a row, up to the maximum.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The shortest silence (with batches in flight, or while connecting) that counts as a
/// failure, so that `--retry-for 0` (give up at the first failure) does not turn every
/// answer or handshake slower than an instant into one.
const MIN_SILENCE: Duration = Duration::from_secs(1);

/// At most one warning about a failing server this often (the next one counts the
/// failures held back): a server down for a minute is one fact, not seventy lines.
const WARN_EVERY: Duration = Duration::from_secs(5);

/// How one server is talked to.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Batches sent and not yet answered, at most.
    pub window: usize,
    /// How long failures may go on without a single answer before giving up, once the
    /// server has been reached.
    pub retry_for: Duration,
    /// How long a server that was never reached is tried before it is given up on.
    pub connect_deadline: Duration,
    /// Largest message sent or received.
    pub max_message_bytes: usize,
    /// Compression of messages, both ways.
    pub compression: Option<CompressionEncoding>,
}

/// Why a server was given up on.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The URL is not one tonic can connect to.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The server refused the call in a way that retrying cannot fix.
    #[error("server {url} rejected the stream: {code:?}: {message}")]
    Rejected {
        /// The server.
        url: String,
        /// The gRPC code.
        code: Code,
        /// The server's message.
        message: String,
    },
    /// The TLS handshake failed in a way that retrying cannot fix (an untrusted or
    /// mismatched server certificate, or a client certificate the server refused); the
    /// reason names the flag or the certificate that fixes it.
    #[error("server {url} failed its TLS handshake: {reason}")]
    Certificate {
        /// The server.
        url: String,
        /// What the TLS layer said.
        reason: String,
    },
    /// A plaintext (`http://`) URL names a server that speaks TLS.
    #[error("server {url} speaks TLS: use --server {https}")]
    SpeaksTls {
        /// The URL given, normalised.
        url: String,
        /// The same server with `https://`.
        https: String,
    },
    /// No connection to the server was ever made, within the connect deadline: a wrong
    /// address more likely than a fault to ride out.
    #[error("cannot reach server {url} within {deadline:.1?} (--connect-deadline): {reason}")]
    NotReached {
        /// The server.
        url: String,
        /// How long it was tried.
        deadline: Duration,
        /// Why the last attempt failed: refused, no route, DNS, TLS.
        reason: String,
    },
    /// No answer came for the whole retry period.
    #[error("server {url} failed for {elapsed:.1?} without answering (last error: {last})")]
    Unreachable {
        /// The server.
        url: String,
        /// How long it was tried.
        elapsed: Duration,
        /// The last failure.
        last: String,
    },
    /// The server answered something other than what was asked: its batches go to the
    /// other servers, and it is not asked again.
    #[error("server {url} answered wrongly: {what}")]
    WrongAnswer {
        /// The server.
        url: String,
        /// The first wrong answer found.
        what: WrongAnswer,
    },
    /// A TLS file given on the command line cannot be read.
    #[error("cannot read {flag} {path}")]
    TlsFile {
        /// The flag that named it.
        flag: &'static str,
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The TLS settings do not fit together.
    #[error("{0}")]
    Tls(String),
}

/// TLS for `https://` servers, as PEM files; the system's roots are always trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct TlsFiles {
    /// PEM file of one more CA to trust for https:// servers (the system's are trusted too).
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// PEM certificate to present to https:// servers that require one (mutual TLS).
    #[arg(long, value_name = "PEM", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, value_name = "PEM", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
}

impl TlsFiles {
    /// True when any file is given.
    pub fn any(&self) -> bool {
        self.ca_cert.is_some() || self.client_cert.is_some() || self.client_key.is_some()
    }

    /// Reads the files into the TLS settings of every `https://` connection.
    pub fn load(&self) -> Result<ClientTlsConfig, ConnectionError> {
        let read = |flag, path: &PathBuf| {
            std::fs::read(path).map_err(|source| ConnectionError::TlsFile {
                flag,
                path: path.clone(),
                source,
            })
        };
        let mut config = ClientTlsConfig::new().with_native_roots();
        if let Some(path) = &self.ca_cert {
            config = config.ca_certificate(Certificate::from_pem(read("--ca-cert", path)?));
        }
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                let identity = Identity::from_pem(read("--client-cert", cert)?, read("--client-key", key)?);
                config = config.identity(identity);
            }
            (None, None) => {}
            _ => return Err(ConnectionError::Tls("--client-cert and --client-key go together".into())),
        }
        Ok(config)
    }
}

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
    fn host(&self) -> &str {
        self.endpoint.uri().host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']')
    }

    /// Marks the server as answering wrongly, for every connection to it.
    fn distrust(&self, wrong: WrongAnswer) -> Failure {
        let _ = self.known.distrust.why.set(wrong);
        self.known.distrust.set.cancel();
        Failure::Distrusted
    }

    /// Resolves once the server has answered wrongly on any connection.
    async fn distrusted(&self) {
        self.known.distrust.set.cancelled().await
    }

    /// True once any connection to the server has been made.
    pub(crate) fn reached(&self) -> bool {
        self.known.reached.load(Ordering::Relaxed)
    }

    /// Logs a retry warning, unless one about this server went out less than
    /// [`WARN_EVERY`] ago.
    fn warn(&self, message: impl FnOnce() -> String) {
        match self.known.warnings.allow() {
            None => {}
            Some(0) => tracing::warn!(server = %self.url, "{}", message()),
            Some(held) => {
                tracing::warn!(server = %self.url, "{} ({held} more failures since the last warning)", message())
            }
        }
    }
}

/// Why one attempt ended.
pub(crate) enum Failure {
    Connect(tonic::transport::Error),
    Status(Status),
    EndedEarly,
    /// Batches were outstanding and nothing came back for the whole retry period: a
    /// black hole, which keepalive would only notice later, or never.
    Silent(Duration),
    /// The TLS or HTTP/2 handshake did not complete within the retry period.
    NoConnection(Duration),
    WriterGone,
    /// The server answered wrongly, on this connection or another one.
    Distrusted,
    /// An answer that does not decode as one (the door says why).
    Malformed(String),
}

/// What a connection sends and how: the gRPC bulk call ([`Grpc`]) or a Flight exchange
/// (`flight::Flight`). The connection around it (the window, retries, hand-backs) is the same.
pub(crate) trait Door: Send + Sync + 'static {
    /// A batch as it goes on the wire, kept until its answer is written; also the answer's type.
    type Payload: Clone + Send + Sync + 'static;
    /// What a call is opened on: a channel to the server, or what stands for one.
    type Link: Send + 'static;

    /// Connects to `server`.
    fn link<'a>(&'a self, server: &'a Server) -> BoxFuture<'a, Result<Self::Link, tonic::transport::Error>>;

    /// Opens one call on `link`, whose requests come from `requests`; its answers come
    /// in request order.
    fn open(
        &self,
        link: Self::Link,
        config: &ConnectionConfig,
        requests: tokio::sync::mpsc::Receiver<Self::Payload>,
    ) -> BoxFuture<'static, Result<Answers<Self::Payload>, Failure>>;

    /// Why `answer` cannot be the answer to `batch`, when it cannot.
    fn check(&self, batch: &Batch<Self::Payload>, answer: &Self::Payload) -> Result<(), WrongAnswer>;
}

/// The answers of one call, in order.
pub(crate) type Answers<P> = BoxStream<'static, Result<P, Failure>>;

/// The gRPC door: `SolveBatchStream`, each batch sent as the bytes the reading thread
/// encoded; each answer's ids are checked against them ([`answer_check`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Grpc;

impl Door for Grpc {
    type Payload = Bytes;
    type Link = Channel;

    fn link<'a>(&'a self, server: &'a Server) -> BoxFuture<'a, Result<Channel, tonic::transport::Error>> {
        server.connect().boxed()
    }

    fn open(
        &self,
        channel: Channel,
        config: &ConnectionConfig,
        requests: tokio::sync::mpsc::Receiver<Bytes>,
    ) -> BoxFuture<'static, Result<Answers<Bytes>, Failure>> {
        let mut grpc = tonic::client::Grpc::new(channel)
            .max_decoding_message_size(config.max_message_bytes)
            .max_encoding_message_size(config.max_message_bytes);
        if let Some(encoding) = config.compression {
            grpc = grpc.send_compressed(encoding).accept_compressed(encoding);
        }
        async move {
            grpc.ready().await.map_err(Failure::Connect)?;
            let path = format!("/{}/{SOLVE_BATCH_STREAM}", pb::game_solver_service_server::SERVICE_NAME);
            let path = tonic::codegen::http::uri::PathAndQuery::try_from(path).expect("a valid path");
            let call = grpc.streaming(tonic::Request::new(ReceiverStream::new(requests)), path, PassThrough);
            let answers = call.await.map_err(Failure::Status)?.into_inner();
            Ok(answers.map_err(Failure::Status).boxed())
        }
        .boxed()
    }

    fn check(&self, batch: &Batch<Bytes>, answer: &Bytes) -> Result<(), WrongAnswer> {
        answer_check::check(batch, answer)
    }
}

impl Failure {
    fn describe(&self, server: &Server) -> String {
        match self {
            Failure::Connect(err) => format!("cannot connect: {}", error_chain(err)),
            Failure::Status(status) => {
                // A transport failure (a TLS alert, a reset) is only named in the sources.
                let mut text = format!("{:?}: {}", status.code(), status.message());
                if let Some(source) = std::error::Error::source(status) {
                    text.push_str(": ");
                    text.push_str(&error_chain(source));
                }
                text
            }
            Failure::EndedEarly => "server ended the stream with batches unanswered".to_owned(),
            Failure::Silent(waited) => format!("no answer for {waited:.1?} with batches in flight"),
            Failure::NoConnection(waited) => format!("no connection within {waited:.1?}"),
            Failure::WriterGone => "output writer stopped".to_owned(),
            Failure::Distrusted => {
                server.known.distrust.why.get().map(ToString::to_string).unwrap_or_default()
            }
            Failure::Malformed(reason) => reason.clone(),
        }
    }

    /// Why a server that was never reached could not be, in the terms a user checks an
    /// address by: refused, no route, its name (DNS), TLS.
    fn unreached(&self, server: &Server) -> String {
        let Failure::Connect(err) = self else { return self.describe(server) };
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(err) = cause {
            // hyper-util's resolver names its failure so (its type is private); the
            // resolver's own words follow, without std's prefix.
            if err.to_string() == "dns error" {
                let deepest = std::iter::successors(Some(err), |err| err.source()).last();
                let detail = deepest.map(ToString::to_string).unwrap_or_default();
                let detail = detail.strip_prefix("failed to lookup address information: ").unwrap_or(&detail);
                return format!("cannot resolve {} (DNS: {detail})", server.host());
            }
            if let Some(tls) = rustls_error(err) {
                return format!("TLS handshake failed: {tls}");
            }
            let kind = err.downcast_ref::<std::io::Error>().map(std::io::Error::kind);
            let reason = match kind {
                Some(std::io::ErrorKind::ConnectionRefused) => Some("connection refused"),
                Some(std::io::ErrorKind::HostUnreachable) => Some("no route to host"),
                Some(std::io::ErrorKind::NetworkUnreachable) => Some("network unreachable"),
                Some(std::io::ErrorKind::TimedOut) => Some("connection timed out"),
                _ => None,
            };
            if let Some(reason) = reason {
                return reason.to_owned();
            }
            cause = err.source();
        }
        self.describe(server)
    }

    /// A TLS failure with its fix, for a server reached as `host`, when it is one that
    /// `tls_failure` knows.
    fn explain(&self, host: &str) -> Option<String> {
        match self {
            Failure::Connect(err) => tls_failure::explain(err, host),
            Failure::Status(status) => tls_failure::explain(status, host),
            _ => None,
        }
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        // Some layers repeat their cause in their own message.
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Codes that say the call itself is wrong; resending the same batches cannot help.
///
/// `RESOURCE_EXHAUSTED` is not one of them: the server sheds load with it ("server
/// overloaded ...; retry later": too many calls, or its request memory in use), which
/// backing off fixes. A batch above the server's message limit gets it too and then
/// fails until `--retry-for` runs out, with the server's message as the last error.
fn is_permanent(code: Code) -> bool {
    matches!(
        code,
        Code::Unimplemented
            | Code::InvalidArgument
            | Code::Unauthenticated
            | Code::PermissionDenied
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::NotFound
    )
}

/// A TLS failure that no retry can fix: the server's certificate is not trusted or not
/// for this name, or the server refused ours. rustls's error sits inside an `io::Error`
/// somewhere in the chain, where `source()` does not reach (`get_ref` does).
///
/// With TLS 1.3 the server refuses a client certificate with an alert after the client's
/// side of the handshake, so the refusal fails the call, not the connection; by then h2
/// has copied the I/O error into a new one that keeps only its kind and text, so
/// rustls's text for a received alert is all there is to recognise.
fn is_certificate_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    use tokio_rustls::rustls::Error as Tls;
    let mut cause = Some(err);
    while let Some(err) = cause {
        let io = err.downcast_ref::<std::io::Error>();
        if let Some(tls) = rustls_error(err) {
            return matches!(
                tls,
                Tls::InvalidCertificate(_) | Tls::NoCertificatesPresented | Tls::AlertReceived(_)
            );
        }
        if io.is_some_and(|io| {
            io.kind() == std::io::ErrorKind::InvalidData
                && io.to_string().starts_with("received fatal alert: ")
        }) {
            return true;
        }
        cause = err.source();
    }
    false
}

/// rustls's error, when `err` is one or an `io::Error` that holds one (where `source()`
/// does not reach).
fn rustls_error<'e>(err: &'e (dyn std::error::Error + 'static)) -> Option<&'e tokio_rustls::rustls::Error> {
    use tokio_rustls::rustls::Error as Tls;
    let inner = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
    err.downcast_ref::<Tls>().or_else(|| inner.and_then(|inner| inner.downcast_ref::<Tls>()))
}

/// The HTTP/2 client preface and an empty SETTINGS frame: what a plaintext connection
/// sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

/// How long [`speaks_tls`] waits to connect, and then for the server's first bytes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// True when the plaintext server at `url` answers the HTTP/2 preface with a TLS record
/// (an alert, `0x15 0x03 ..`): it expects a TLS handshake. A plaintext HTTP/2 server
/// answers with a SETTINGS frame, whose first length byte is never above `0x00` for the
/// settings that exist, so the two cannot be confused. h2 only reports such an answer as
/// "frame with invalid size", which looks like any broken peer and would be retried.
async fn speaks_tls(server: &Server) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Some(port) = server.endpoint.uri().port_u16() else { return false };
    let host = server.host();
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        stream.write_all(H2_PREFACE).await.ok()?;
        let mut head = [0u8; 2];
        stream.read_exact(&mut head).await.ok()?;
        Some(matches!(head, [0x14..=0x17, 0x03]))
    };
    matches!(tokio::time::timeout(PROBE_TIMEOUT, probe).await, Ok(Some(true)))
}

/// The error to give up with at once, when `failure` is one that no retry can fix.
fn fatal(server: &Server, failure: &Failure) -> Option<ConnectionError> {
    if let (Failure::Distrusted, Some(what)) = (failure, server.known.distrust.why.get()) {
        return Some(ConnectionError::WrongAnswer { url: server.url.clone(), what: what.clone() });
    }
    if let Failure::Status(status) = failure {
        if is_permanent(status.code()) {
            return Some(ConnectionError::Rejected {
                url: server.url.clone(),
                code: status.code(),
                message: status.message().to_owned(),
            });
        }
    }
    // With TLS 1.3 the server's refusal of our certificate fails the call, not the
    // connection: both are searched.
    let certificate = match failure {
        Failure::Connect(err) => is_certificate_failure(err),
        Failure::Status(status) => is_certificate_failure(status),
        _ => false,
    };
    certificate.then(|| ConnectionError::Certificate {
        url: server.url.clone(),
        reason: failure.explain(server.host()).unwrap_or_else(|| failure.describe(server)),
    })
}

/// Feeds `server` from `queue` until the queue is finished; answers go to `writer`.
/// Reconnects with backoff after failures. Until a connection to the server has been made
/// (by any connection of this run), it is given up on after the connect deadline, counted
/// from the start: a server never reached is most likely a wrong address. Once reached, it
/// is given up on after `retry_for` without an answer, counted from the last answer (or
/// the first batch sent after it, or the start of a connection that never completes), so
/// that a server that goes silent at any step is given up on as promptly as one that fails.
pub(crate) async fn run<D: Door>(
    server: Server,
    door: Arc<D>,
    queue: Arc<WorkQueue<D::Payload>>,
    writer: mpsc::Sender<ToWriter<D::Payload>>,
    config: ConnectionConfig,
) -> Result<(), ConnectionError> {
    let started = Instant::now();
    let mut window = VecDeque::new();
    let mut failing_since: Option<Instant> = None;
    let mut backoff = FIRST_BACKOFF;
    // Until the server has answered once, a failure on a plaintext URL may mean that the
    // server speaks TLS: checked once, on the first failure.
    let mut checked_for_tls = server.is_tls();
    loop {
        let mut answered = false;
        let mut waiting_since = None;
        // A server not reached yet gets what is left of the deadline to complete a connection.
        let connect_within = match server.reached() {
            true => config.retry_for.max(MIN_SILENCE),
            false => config.connect_deadline.saturating_sub(started.elapsed()).max(MIN_SILENCE),
        };
        let attempt = attempt(
            &server,
            &*door,
            &queue,
            &writer,
            &config,
            connect_within,
            &mut window,
            &mut answered,
            &mut waiting_since,
        )
        .await;
        // Whatever was sent and not answered goes to whichever connection is free first.
        let unanswered = window.len();
        queue.resend(window.drain(..));
        let failure = match attempt {
            Ok(()) => return Ok(()),
            // The writer stops first when the run ends early (a read error, a closed
            // output): not this server's failure, nothing to report.
            Err(Failure::WriterGone) => return Ok(()),
            Err(failure) => failure,
        };
        if let Some(fatal) = fatal(&server, &failure) {
            return Err(fatal);
        }
        if answered {
            failing_since = None;
            backoff = FIRST_BACKOFF;
            checked_for_tls = true;
        }
        if !checked_for_tls {
            checked_for_tls = true;
            if speaks_tls(&server).await {
                let https = format!("https://{}", server.url.trim_start_matches("http://"));
                return Err(ConnectionError::SpeaksTls { url: server.url.clone(), https });
            }
        }
        let pause = match server.reached() {
            false => {
                let left = config.connect_deadline.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(ConnectionError::NotReached {
                        url: server.url.clone(),
                        deadline: config.connect_deadline,
                        reason: failure.unreached(&server),
                    });
                }
                // Not worth a warning yet: if it stays so, the run ends with one message.
                tracing::debug!(server = %server.url, "{}; retrying in {backoff:?}", failure.describe(&server));
                backoff.min(left)
            }
            true => {
                let since = *failing_since.get_or_insert_with(|| waiting_since.unwrap_or_else(Instant::now));
                if since.elapsed() >= config.retry_for {
                    return Err(ConnectionError::Unreachable {
                        url: server.url.clone(),
                        elapsed: since.elapsed(),
                        last: failure.describe(&server),
                    });
                }
                let handed_back = match unanswered {
                    0 => String::new(),
                    n => format!("; {n} unanswered batches handed back"),
                };
                server
                    .warn(|| format!("{}{handed_back}; retrying in {backoff:?}", failure.describe(&server)));
                backoff
            }
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = queue.finished() => return Ok(()),
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection (made within `connect_within`) and one call; `window` holds the batches
/// sent and not yet answered, and
/// `waiting_since` when the oldest wait on the server began (the connection, the last
/// answer, or the send into an empty window). Every such wait ends after the silence the
/// retry period allows, whatever the server does meanwhile: a server can keep its
/// connection alive (answer pings) and still never complete a handshake, never open the
/// call or never answer on it.
#[allow(clippy::too_many_arguments)]
async fn attempt<D: Door>(
    server: &Server,
    door: &D,
    queue: &WorkQueue<D::Payload>,
    writer: &mpsc::Sender<ToWriter<D::Payload>>,
    config: &ConnectionConfig,
    connect_within: Duration,
    window: &mut VecDeque<Batch<D::Payload>>,
    answered: &mut bool,
    waiting_since: &mut Option<Instant>,
) -> Result<(), Failure> {
    let silence = config.retry_for.max(MIN_SILENCE);
    let connecting = Instant::now();
    *waiting_since = Some(connecting);
    // connect_timeout bounds only the TCP connect: the TLS and HTTP/2 handshakes are
    // bounded here.
    let connect = async { door.link(server).await.map_err(Failure::Connect) };
    let link = tokio::select! {
        () = server.distrusted() => return Err(Failure::Distrusted),
        connected = tokio::time::timeout(connect_within, connect) => {
            connected.map_err(|_| Failure::NoConnection(connect_within))??
        }
        () = queue.finished() => return Ok(()),
    };
    // Connected: an idle connection waits for work, not for the server.
    *waiting_since = None;
    server.known.reached.store(true, Ordering::Relaxed);

    // The first batch goes before the call opens, so that an idle connection holds no call.
    let first = tokio::select! {
        biased;
        () = server.distrusted() => return Err(Failure::Distrusted),
        first = queue.next() => first,
    };
    let Some(first) = first else { return Ok(()) };
    let capacity = config.window.max(1);
    let (sender, requests) = tokio::sync::mpsc::channel::<D::Payload>(capacity);
    let mut sender = Some(sender);
    send(&sender, &first);
    window.push_back(first);
    let sent = Instant::now();
    *waiting_since = Some(sent);
    // The call opens with the server's response headers, which a server may never send.
    let opened = tokio::select! {
        biased;
        () = server.distrusted() => return Err(Failure::Distrusted),
        opened = tokio::time::timeout_at(tokio::time::Instant::from_std(sent + silence), door.open(link, config, requests)) => {
            opened.map_err(|_| Failure::Silent(silence))?
        }
    };
    let mut answers = opened?;

    loop {
        let silent_until = waiting_since.map(|since| tokio::time::Instant::from_std(since + silence));
        tokio::select! {
            biased;
            () = server.distrusted() => return Err(Failure::Distrusted),
            answer = answers.next() => match answer {
                Some(Ok(solutions)) => {
                    let Some(batch) = window.pop_front() else {
                        return Err(server.distrust(WrongAnswer::Unrequested));
                    };
                    // Checked before it leaves the window: a wrong answer's batch is resent.
                    if let Err(wrong) = door.check(&batch, &solutions) {
                        window.push_front(batch);
                        return Err(server.distrust(wrong));
                    }
                    *answered = true;
                    *waiting_since = (!window.is_empty()).then(Instant::now);
                    writer
                        .send(ToWriter::Answered(Answered { batch, solutions }))
                        .map_err(|_| Failure::WriterGone)?;
                }
                None if sender.is_none() && window.is_empty() => return Ok(()),
                None => return Err(Failure::EndedEarly),
                Some(Err(Failure::Malformed(reason))) => {
                    let seq = window.front().map_or(0, |batch| batch.seq);
                    return Err(server.distrust(WrongAnswer::Table { seq, reason }));
                }
                Some(Err(failure)) => return Err(failure),
            },
            next = queue.next(), if sender.is_some() && window.len() < capacity => match next {
                Some(batch) => {
                    send(&sender, &batch);
                    window.push_back(batch);
                    waiting_since.get_or_insert_with(Instant::now);
                }
                // The run is complete: half-close, and the server ends the call.
                None => sender = None,
            },
            () = tokio::time::sleep_until(silent_until.unwrap_or_else(tokio::time::Instant::now)), if silent_until.is_some() => {
                return Err(Failure::Silent(silence));
            }
        }
    }
}

/// Queues `batch` on the call. The channel holds at most the window, which has room, so
/// this cannot block; if the call is gone, the error surfaces on the answer side.
fn send<P: Clone>(sender: &Option<tokio::sync::mpsc::Sender<P>>, batch: &Batch<P>) {
    if let Some(sender) = sender {
        let _ = sender.try_send(batch.payload.clone());
    }
}

/// A codec that sends bytes already encoded and hands back the raw answer bytes.
#[derive(Debug, Clone, Copy, Default)]
struct PassThrough;

impl Codec for PassThrough {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = PassThrough;
    type Decoder = PassThrough;

    fn encoder(&mut self) -> Self::Encoder {
        PassThrough
    }

    fn decoder(&mut self) -> Self::Decoder {
        PassThrough
    }
}

impl Encoder for PassThrough {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(256 * 1024, 1 << 20)
    }
}

impl Decoder for PassThrough {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(256 * 1024, 1 << 20)
    }
}

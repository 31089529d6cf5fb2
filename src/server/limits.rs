//! Load shedding and the server-wide request memory budget, as one tower layer over
//! every service.
//!
//! - A call beyond `max_calls` in flight on the server, or beyond `max_calls_per_connection`
//!   on its connection, is refused at once with `RESOURCE_EXHAUSTED`: a server at its
//!   limit answers "no" in microseconds rather than queueing work it cannot do.
//!   `grpc.health.v1.Health` is exempt, so that a loaded server still answers its probes;
//!   health calls are cheap, and at most `--max-concurrent-streams` a connection.
//! - Request messages are admitted against one budget of bytes shared by all calls
//!   (`max_request_bytes_in_flight`): a message's bytes are taken from it when its 5-byte
//!   gRPC header arrives, before any of its payload is read (HTTP/2 flow control holds
//!   the client back meanwhile), and given back when the call reads its next message or
//!   ends. A call thus holds at most one message of the budget; the problems a streaming
//!   call has already decoded are bounded by its own per-stream budget on top.
//! - Compressed messages are inflated here, not by tonic, so that the inflated bytes are
//!   counted as they grow: a message whose inflated size exceeds the message limit, or that
//!   would need more of the budget than is free, is refused with `RESOURCE_EXHAUSTED`
//!   instead of waiting (a message that waits while holding part of the budget could
//!   deadlock with another doing the same).
//! - A call whose first message, or the rest of a message it has begun, does not come
//!   within `stream_idle_timeout` ends with `DEADLINE_EXCEEDED`.
//!
//! The layer also counts calls per connection (for the idle-connection timeout and for
//! shutdown, see [`super::incoming`]) and on the whole server (to say at shutdown how many
//! calls were dropped).

use std::collections::HashMap;
use std::future::Future;
use std::io::Read;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::{BoxFuture, Either};
use http_body::Frame;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::body::Body;
use tonic::Status;
use tower::{Layer, Service};

use super::incoming::{ConnectionInfo, ConnectionState};
use crate::service::stream_idle_status;

/// The budget counts memory in these units, so that a `u32` of permits spans terabytes.
const BUDGET_UNIT: usize = 1024;

/// Copies of a request message the server holds at once: the bytes tonic buffers and
/// the message decoded from them. The budget charges each message this many times.
const MESSAGE_COPIES: u32 = 2;

/// Length of the gRPC message header: a compressed flag and a big-endian `u32` length.
const GRPC_HEADER: usize = 5;

/// Requests to this service are neither limited nor counted as work.
const EXEMPT_PREFIX: &str = "/grpc.health.v1.Health/";

/// Limits the layer enforces.
#[derive(Debug, Clone)]
pub(crate) struct CallLimits {
    pub(crate) max_calls: usize,
    pub(crate) max_calls_per_connection: usize,
    pub(crate) max_request_bytes_in_flight: usize,
    pub(crate) max_message_bytes: usize,
    pub(crate) stream_idle_timeout: Option<Duration>,
}

/// Calls in flight on the whole server, health checks aside.
#[derive(Debug, Default)]
pub(crate) struct CallCount(AtomicUsize);

impl CallCount {
    /// Calls in flight now.
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// The layer; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct CallLimitsLayer {
    limits: Arc<CallLimits>,
    calls: Arc<CallCount>,
    budget: Arc<Semaphore>,
    budget_units: u32,
}

impl CallLimitsLayer {
    /// A layer enforcing `limits` and counting calls in `calls`.
    pub(crate) fn new(limits: CallLimits, calls: Arc<CallCount>) -> Self {
        let budget_units = units(limits.max_request_bytes_in_flight).max(1);
        CallLimitsLayer {
            limits: Arc::new(limits),
            calls,
            budget: Arc::new(Semaphore::new(budget_units as usize)),
            budget_units,
        }
    }
}

/// Budget units that `bytes` take, rounded up.
fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(BUDGET_UNIT).min(Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX)
}

impl<S> Layer<S> for CallLimitsLayer {
    type Service = CallLimitsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallLimitsService { inner, layer: self.clone() }
    }
}

/// The service [`CallLimitsLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct CallLimitsService<S> {
    inner: S,
    layer: CallLimitsLayer,
}

/// One call's place in the counts, given back when the call's response ends or is dropped.
struct CallGuard {
    calls: Option<Arc<CallCount>>,
    connection: Option<Arc<ConnectionState>>,
    /// The budget held for the call's latest request message.
    held: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let work = self.calls.is_some();
        if let Some(calls) = &self.calls {
            calls.0.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(connection) = &self.connection {
            connection.call_ended(work);
        }
        self.held.lock().take();
    }
}

impl<S> CallLimitsService<S> {
    /// Counts the call in, or says why it is refused.
    fn admit(&self, connection: Option<&Arc<ConnectionState>>, work: bool) -> Result<CallGuard, Status> {
        let limits = &self.layer.limits;
        let mut guard = CallGuard { calls: None, connection: None, held: Arc::default() };
        if work {
            let calls = &self.layer.calls;
            if calls.0.fetch_add(1, Ordering::SeqCst) >= limits.max_calls {
                calls.0.fetch_sub(1, Ordering::SeqCst);
                return Err(Status::resource_exhausted(format!(
                    "server overloaded: {} calls in flight, its limit; retry later",
                    limits.max_calls
                )));
            }
            guard.calls = Some(Arc::clone(calls));
        }
        if let Some(connection) = connection {
            connection.call_started(work);
            guard.connection = Some(Arc::clone(connection));
            if work && connection.work_calls() > limits.max_calls_per_connection {
                return Err(Status::resource_exhausted(format!(
                    "too many calls in flight on this connection (limit {}); retry later or open another connection",
                    limits.max_calls_per_connection
                )));
            }
        }
        Ok(guard)
    }
}

impl<S> Service<http::Request<Body>> for CallLimitsService<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Either<
        futures::future::Ready<Result<Self::Response, Self::Error>>,
        BoxFuture<'static, Result<Self::Response, Self::Error>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let work = !request.uri().path().starts_with(EXEMPT_PREFIX);
        let connection = request.extensions().get::<ConnectionInfo>().cloned();
        if let Some(connection) = &connection {
            // What tonic's `Request::remote_addr` reads.
            request.extensions_mut().insert(connection.tcp.clone());
        }
        let guard = match self.admit(connection.as_ref().map(|c| &c.state), work) {
            Ok(guard) => guard,
            Err(status) => {
                if let Some(peer) = connection.and_then(|c| c.tcp.remote_addr) {
                    tracing::debug!(%peer, message = status.message(), "call refused");
                }
                return Either::Left(futures::future::ready(Ok(status.into_http())));
            }
        };
        if work {
            let request_body = std::mem::take(request.body_mut());
            let encoding = request.headers_mut().remove("grpc-encoding");
            let budget = Budgeted {
                inner: request_body,
                inflate: encoding.as_ref().and_then(|e| Inflate::from_header(e.as_bytes())),
                unknown_encoding: encoding.filter(|e| Inflate::from_header(e.as_bytes()).is_none()),
                buf: BytesMut::new(),
                phase: Phase::Header,
                messages: 0,
                held: Arc::clone(&guard.held),
                budget: Arc::clone(&self.layer.budget),
                budget_units: self.layer.budget_units,
                limits: Arc::clone(&self.layer.limits),
                idle: None,
            };
            if let Some(unknown) = budget.unknown_encoding.clone() {
                // tonic answers UNIMPLEMENTED for an encoding it does not accept.
                request.headers_mut().insert("grpc-encoding", unknown);
            }
            *request.body_mut() = Body::new(budget);
        }
        let response = self.inner.call(request);
        Either::Right(Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| Body::new(Guarded { inner: body, _guard: guard })))
        }))
    }
}

/// A response body that holds its call's place in the counts until it is done.
struct Guarded {
    inner: Body,
    _guard: CallGuard,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A compression a request may use.
#[derive(Debug, Clone, Copy)]
enum Inflate {
    Gzip,
    Zstd,
}

impl Inflate {
    fn from_header(value: &[u8]) -> Option<Inflate> {
        match value {
            b"gzip" => Some(Inflate::Gzip),
            b"zstd" => Some(Inflate::Zstd),
            _ => None,
        }
    }

    /// Inflates `input` into an uncompressed gRPC frame of at most `limit` bytes of
    /// message, taking budget for the output as it grows (never waiting for it).
    fn inflate(
        self,
        input: &[u8],
        limit: usize,
        held: &mut OwnedSemaphorePermit,
        budget: &Arc<Semaphore>,
        budget_units: u32,
    ) -> Result<Vec<u8>, Status> {
        let mut reader: Box<dyn Read> = match self {
            Inflate::Gzip => Box::new(flate2::read::GzDecoder::new(input)),
            Inflate::Zstd => Box::new(
                zstd::stream::read::Decoder::with_buffer(input)
                    .map_err(|err| Status::internal(format!("cannot inflate the request: {err}")))?,
            ),
        };
        // The output is the whole gRPC frame, header first, so tonic gets it without a copy.
        let mut out = vec![0u8; GRPC_HEADER];
        let most = GRPC_HEADER + limit.saturating_add(1);
        let mut capacity = (input.len() * 4).clamp(4096, most);
        // The input is already paid for; the output is on top of it while both exist.
        let input_units = held.num_permits() as u32;
        loop {
            let wanted = input_units.saturating_add(units(capacity).saturating_mul(MESSAGE_COPIES));
            if wanted > budget_units {
                return Err(Status::resource_exhausted(format!(
                    "request message inflates past the server's budget of {} bytes for requests in flight",
                    budget_units as usize * BUDGET_UNIT
                )));
            }
            if wanted > held.num_permits() as u32 {
                let more = Arc::clone(budget).try_acquire_many_owned(wanted - held.num_permits() as u32);
                held.merge(more.map_err(|_| {
                    Status::resource_exhausted(
                        "server overloaded: its memory for request messages is in use; retry later",
                    )
                })?);
            }
            out.reserve_exact(capacity - out.len());
            let len = out.len();
            let read = (&mut reader)
                .take((capacity - len) as u64)
                .read_to_end(&mut out)
                .map_err(|err| Status::internal(format!("cannot inflate the request: {err}")))?;
            if out.len() - GRPC_HEADER > limit {
                return Err(Status::resource_exhausted(format!(
                    "request message inflates to more than the limit of {limit} bytes"
                )));
            }
            if read < capacity - len {
                let inflated = u32::try_from(out.len() - GRPC_HEADER).unwrap_or(u32::MAX);
                out[1..GRPC_HEADER].copy_from_slice(&inflated.to_be_bytes());
                return Ok(out);
            }
            capacity = capacity.saturating_mul(2).min(most);
        }
    }
}

/// Where a request body is between gRPC messages.
enum Phase {
    /// Reading a 5-byte message header.
    Header,
    /// Waiting for the budget a message of `len` bytes needs.
    Admitting { compressed: bool, len: usize, admit: BoxFuture<'static, Option<OwnedSemaphorePermit>> },
    /// Passing on the rest of an uncompressed message.
    Passing { left: usize },
    /// Collecting a compressed message of `len` bytes, to inflate it whole.
    Collecting { len: usize },
    /// Inflating a compressed message on the blocking pool.
    Inflating(tokio::task::JoinHandle<(Result<Vec<u8>, Status>, OwnedSemaphorePermit)>),
}

/// A request body whose messages are admitted against the server-wide budget and whose
/// compressed messages are inflated (tonic then sees uncompressed ones).
struct Budgeted {
    inner: Body,
    inflate: Option<Inflate>,
    unknown_encoding: Option<http::HeaderValue>,
    buf: BytesMut,
    phase: Phase,
    messages: u64,
    held: Arc<Mutex<Option<OwnedSemaphorePermit>>>,
    budget: Arc<Semaphore>,
    budget_units: u32,
    limits: Arc<CallLimits>,
    idle: Option<Pin<Box<Sleep>>>,
}

impl Budgeted {
    /// True while the call owes the server bytes it should be sending: its first message,
    /// or the rest of a message it has begun.
    fn owes_bytes(&self) -> bool {
        self.messages == 0 || !matches!(self.phase, Phase::Header) || !self.buf.is_empty()
    }

    /// Moves the body on with what is buffered; `Some` is a frame for tonic.
    fn step(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Status>>> {
        loop {
            match &mut self.phase {
                Phase::Header => {
                    if self.buf.len() < GRPC_HEADER {
                        return Poll::Ready(None);
                    }
                    let compressed = self.buf[0] == 1;
                    let len =
                        u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
                    if len > self.limits.max_message_bytes {
                        // tonic refuses it from its header, before reading any of it.
                        self.phase = Phase::Passing { left: GRPC_HEADER };
                        continue;
                    }
                    // The previous message's bytes are the call's to free now.
                    self.held.lock().take();
                    let wanted =
                        units(len + GRPC_HEADER).saturating_mul(MESSAGE_COPIES).min(self.budget_units);
                    let budget = Arc::clone(&self.budget);
                    let admit = Box::pin(async move { budget.acquire_many_owned(wanted).await.ok() });
                    self.phase = Phase::Admitting { compressed, len, admit };
                }
                Phase::Admitting { compressed, len, admit } => {
                    let Poll::Ready(permit) = admit.as_mut().poll(cx) else {
                        return Poll::Pending;
                    };
                    *self.held.lock() = permit;
                    self.phase = match (*compressed, self.inflate) {
                        (true, Some(_)) => Phase::Collecting { len: *len },
                        // Uncompressed, or compressed without a known encoding, which
                        // tonic refuses.
                        _ => Phase::Passing { left: *len + GRPC_HEADER },
                    };
                }
                Phase::Passing { left } => {
                    if self.buf.is_empty() {
                        return Poll::Ready(None);
                    }
                    let take = (*left).min(self.buf.len());
                    *left -= take;
                    if *left == 0 {
                        self.phase = Phase::Header;
                        self.messages += 1;
                    }
                    return Poll::Ready(Some(Ok(self.buf.split_to(take).freeze())));
                }
                Phase::Collecting { len } => {
                    let len = *len;
                    if self.buf.len() < GRPC_HEADER + len {
                        return Poll::Ready(None);
                    }
                    let message = self.buf.split_to(GRPC_HEADER + len).freeze();
                    let (Some(inflate), Some(mut held)) = (self.inflate, self.held.lock().take()) else {
                        return Poll::Ready(Some(Err(Status::internal(
                            "inflating without an encoding or budget",
                        ))));
                    };
                    let (budget, units, limit) =
                        (Arc::clone(&self.budget), self.budget_units, self.limits.max_message_bytes);
                    // Inflating 60 MB takes a tenth of a second: off the async workers.
                    let job = tokio::task::spawn_blocking(move || {
                        let inflated =
                            inflate.inflate(&message[GRPC_HEADER..], limit, &mut held, &budget, units);
                        (inflated, held)
                    });
                    self.phase = Phase::Inflating(job);
                }
                Phase::Inflating(job) => {
                    let Poll::Ready(done) = Pin::new(job).poll(cx) else {
                        return Poll::Pending;
                    };
                    self.phase = Phase::Header;
                    self.messages += 1;
                    let inflated = match done {
                        Ok((inflated, held)) => {
                            *self.held.lock() = Some(held);
                            inflated
                        }
                        Err(err) => Err(Status::internal(format!("inflating the request failed: {err}"))),
                    };
                    return Poll::Ready(Some(inflated.map(Bytes::from)));
                }
            }
        }
    }

    /// Ends a call that owes bytes and has sent none for the stream idle timeout.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<Status> {
        let Some(timeout) = self.limits.stream_idle_timeout else {
            return Poll::Pending;
        };
        if !self.owes_bytes() {
            self.idle = None;
            return Poll::Pending;
        }
        let idle = self.idle.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match idle.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(stream_idle_status(timeout)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl http_body::Body for Budgeted {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        loop {
            match this.step(cx) {
                Poll::Ready(Some(result)) => return Poll::Ready(Some(result.map(Frame::data))),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {}
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(mut data) => {
                        this.idle = None;
                        this.buf.put(&mut data);
                    }
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                Poll::Ready(Some(Err(status))) => return Poll::Ready(Some(Err(status))),
                Poll::Ready(None) => {
                    // A truncated message: tonic reports the unexpected end.
                    return Poll::Ready(
                        (!this.buf.is_empty()).then(|| Ok(Frame::data(this.buf.split().freeze()))),
                    );
                }
                Poll::Pending => {
                    return match this.poll_idle(cx) {
                        Poll::Ready(status) => Poll::Ready(Some(Err(status))),
                        Poll::Pending => Poll::Pending,
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.buf.is_empty() && matches!(self.phase, Phase::Header) && self.inner.is_end_stream()
    }
}

/// Says whether a line may be logged now: at most one an interval, counting the rest.
#[derive(Debug)]
pub(crate) struct LogLimiter {
    interval: Duration,
    next: Mutex<Option<Instant>>,
    suppressed: AtomicU64,
}

impl LogLimiter {
    /// At most one line each `interval`.
    pub(crate) fn new(interval: Duration) -> Self {
        LogLimiter { interval, next: Mutex::new(None), suppressed: AtomicU64::new(0) }
    }

    /// `Some(lines suppressed since the last one)` when a line may be logged now.
    pub(crate) fn allow(&self) -> Option<u64> {
        let now = Instant::now();
        let mut next = self.next.lock();
        if next.is_some_and(|next| now < next) {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *next = Some(now + self.interval);
        Some(self.suppressed.swap(0, Ordering::Relaxed))
    }
}

/// A `tracing` filter that lets through at most `burst` events a `window` from each call
/// site outside this crate. h2 and hyper log a WARN for each connection that a peer gets
/// closed (a rapid-reset attack gave 14,000 lines in 15 s); this caps what a peer can
/// write to the log without hiding the first occurrences.
#[derive(Debug)]
pub struct LogRateLimit {
    burst: u32,
    window: Duration,
    seen: Mutex<HashMap<tracing::callsite::Identifier, (Instant, u32)>>,
}

impl LogRateLimit {
    /// At most `burst` events per `window` from each call site of a dependency.
    pub fn new(burst: u32, window: Duration) -> Self {
        LogRateLimit { burst, window, seen: Mutex::new(HashMap::new()) }
    }
}

impl Default for LogRateLimit {
    fn default() -> Self {
        LogRateLimit::new(10, Duration::from_secs(60))
    }
}

impl<S> tracing_subscriber::layer::Filter<S> for LogRateLimit {
    fn enabled(&self, meta: &tracing::Metadata<'_>, _: &tracing_subscriber::layer::Context<'_, S>) -> bool {
        if !meta.is_event() || meta.target().starts_with(env!("CARGO_CRATE_NAME")) {
            return true;
        }
        let now = Instant::now();
        let mut seen = self.seen.lock();
        let (start, count) = seen.entry(meta.callsite()).or_insert((now, 0));
        if now.duration_since(*start) >= self.window {
            *start = now;
            *count = 0;
        }
        *count += 1;
        *count <= self.burst
    }

    fn callsite_enabled(&self, meta: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        match meta.is_event() && !meta.target().starts_with(env!("CARGO_CRATE_NAME")) {
            true => tracing::subscriber::Interest::sometimes(),
            false => tracing::subscriber::Interest::always(),
        }
    }
}

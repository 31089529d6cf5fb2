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

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::{BoxFuture, Either};
use http_body::Frame;
use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::body::Body;
use tonic::Status;
use tower::{Layer, Service};

use super::connection_state::{ConnectionInfo, ConnectionState};
use budget::Budgeted;
use inflate::Inflate;

mod budget;
mod inflate;

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
            let inflate = encoding.as_ref().and_then(|e| Inflate::from_header(e.as_bytes()));
            if let Some(unknown) = encoding.filter(|_| inflate.is_none()) {
                // tonic answers UNIMPLEMENTED for an encoding it does not accept.
                request.headers_mut().insert("grpc-encoding", unknown);
            }
            let budget = Budgeted::new(
                request_body,
                inflate,
                Arc::clone(&guard.held),
                Arc::clone(&self.layer.budget),
                self.layer.budget_units,
                Arc::clone(&self.layer.limits),
            );
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

//! Load shedding and the request memory budget, as one tower layer over every service.
//!
//! Calls and request bytes are fair shares among clients (remote IP addresses, or the
//! address a `--trusted-proxy` names in `--peer-header`), by the rule in
//! [`super::connection::admission`]: at the server-wide limit a client within its fair share still
//! gets in, and the client holding the most gives way, so no number of heavy clients can
//! take the server from the others (`docs/operations.md`, Limits).
//! - A call beyond the limits is refused at once with `RESOURCE_EXHAUSTED`: a server at
//!   its limit answers "no" in microseconds rather than queueing work it cannot do.
//!   `grpc.health.v1.Health` is exempt, so that a loaded server still answers its probes;
//!   health calls are cheap, and at most `--max-concurrent-streams` a connection.
//! - A call whose share (of calls, or of request bytes) is taken back for a client within
//!   its own ends at once with `RESOURCE_EXHAUSTED` ([`PREEMPTED`]), before its response
//!   or between two of its messages; if its client leaves that end unread, its
//!   connection closes ([`super::connection::state`]).
//! - A request message's bytes are taken from the budget when its first payload bytes
//!   arrive, not on its 5-byte header alone (a header is a claim, not a cost), and given
//!   back when the call reads its next message or ends ([`budget`]). A message waits for
//!   its bytes holding nothing, so waiters never deadlock, and a waiter never stands in
//!   front of another peer's small message.
//! - Compressed messages are inflated here, not by tonic, so that the inflated bytes are
//!   counted as they grow ([`inflate`]).
//! - A solver request is read whole here, then charged what it decodes to (8 bytes a
//!   stone or pile, a struct a problem), which can be many times its bytes, before
//!   tonic decodes it; one that cannot have that much is refused undecoded.
//! - A Connect call's JSON message is decoded into protobuf here, once whole and
//!   inflated, on the blocking pool (one a core, in the inflations' slots): charged first
//!   what it may decode to, read from its text, then its protobuf's bytes, and refused
//!   undecoded when the client may not hold that much; the protobuf is then charged as
//!   any solver request.
//! - A call whose first message, or the rest of a message it has begun, does not come
//!   within `stream_idle_timeout` ends with `DEADLINE_EXCEEDED`.
//!
//! The layer also counts calls per connection, for the idle-connection timeout and for
//! shutdown ([`super::connection::state`]).

use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::{BoxFuture, Either};
use futures::task::AtomicWaker;
use http_body::Frame;
use parking_lot::Mutex;
use tonic::body::Body;
use tonic::Status;
use tower::{Layer, Service};

use super::connection::admission::{FairShare, Holder, PressureMarks, Refusal, Share, SharePolicy};
use super::connection::state::{ConnectionInfo, ConnectionState};
use crate::service::connect::JsonBody;
use crate::service::memory::CallMemory;
use budget::Budgeted;
use inflate::Inflate;

mod budget;
mod inflate;

/// The budget counts memory in these units.
const BUDGET_UNIT: usize = 1024;

/// Copies of a request message the server holds at once: the bytes tonic buffers and
/// the message decoded from them. The budget charges a message this many times its
/// bytes while they arrive; a solver request, once read, is charged its bytes and what
/// it decodes to instead ([`budget`]).
const MESSAGE_COPIES: usize = 2;

/// Length of the gRPC message header: a compressed flag and a big-endian `u32` length.
const GRPC_HEADER: usize = 5;

/// Requests to this service are neither limited nor counted as work.
const EXEMPT_PREFIX: &str = "/grpc.health.v1.Health/";

/// What a call's request messages are, for charging them by what they decode to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Requests {
    /// `Solve`, `SolveStream`: a problem a message.
    OneProblem,
    /// `SolveBatch`, `SolveBatchStream`: problems.
    Problems,
    /// Any other service's: charged by their bytes alone.
    Other,
}

impl Requests {
    /// The requests of the method at `path`.
    fn of(path: &str) -> Requests {
        let method = path
            .strip_prefix('/')
            .and_then(|path| path.strip_prefix(crate::pb::game_solver_service_server::SERVICE_NAME))
            .and_then(|path| path.strip_prefix('/'));
        match method {
            Some("Solve" | "SolveStream") => Requests::OneProblem,
            Some("SolveBatch" | "SolveBatchStream") => Requests::Problems,
            _ => Requests::Other,
        }
    }
}

/// The message of a call ended to make room for a client within its fair share.
const PREEMPTED: &str =
    "server overloaded: this call made way for a client under its fair share; retry later";

/// Limits the layer enforces.
#[derive(Debug, Clone)]
pub(crate) struct CallLimits {
    pub(crate) max_calls_per_connection: usize,
    pub(crate) max_message_bytes: usize,
    pub(crate) stream_idle_timeout: Option<Duration>,
    /// The request header that names the peer, set by a trusted proxy.
    pub(crate) peer_header: Option<http::HeaderName>,
    /// The proxies whose `peer_header` is believed.
    pub(crate) trusted_proxies: Vec<ipnet::IpNet>,
}

impl From<&super::ServerConfig> for CallLimits {
    fn from(config: &super::ServerConfig) -> Self {
        let limits = &config.limits;
        CallLimits {
            max_calls_per_connection: limits.max_calls_per_connection,
            max_message_bytes: limits.max_message_bytes,
            stream_idle_timeout: config.solver.stream_idle_timeout.0,
            peer_header: limits.peer_header.clone(),
            trusted_proxies: limits.trusted_proxy.clone(),
        }
    }
}

/// Calls in flight, shared fairly among peers (health checks aside).
#[derive(Debug, Clone)]
pub(crate) struct CallCount(Arc<FairShare>);

impl CallCount {
    /// Calls shared by `config`'s limits.
    pub(crate) fn new(config: &super::ServerConfig) -> Self {
        let limits = &config.limits;
        let policy = SharePolicy::new(limits.max_calls, limits.max_calls_per_peer, limits.grouping());
        CallCount(FairShare::new(policy))
    }

    /// Calls in flight now.
    pub(crate) fn get(&self) -> usize {
        self.0.total()
    }
}

/// The layer; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct CallLimitsLayer {
    limits: Arc<CallLimits>,
    calls: CallCount,
    budget: Arc<FairShare>,
}

impl CallLimitsLayer {
    /// A layer enforcing `config`'s limits, counting calls in `calls`.
    pub(crate) fn new(config: &super::ServerConfig, calls: CallCount) -> Self {
        let limits = &config.limits;
        let policy = SharePolicy::new(
            units(limits.max_request_bytes_in_flight),
            limits.max_request_bytes_per_peer.map(units),
            limits.grouping(),
        );
        let budget = FairShare::with_pressure_marks(policy, pressure_marks(policy.limit));
        CallLimitsLayer { limits: Arc::new(CallLimits::from(config)), calls, budget }
    }
}

/// The request-byte budget is under pressure above an eighth of its limit, and no longer
/// at a sixteenth: a burst of large requests (inflated, decoded) passes that at once,
/// where a stream of batches holds one message a call. Under pressure, freed memory goes
/// back to the OS sooner ([`crate::allocator::request_memory_pressure`]).
fn pressure_marks(limit: usize) -> PressureMarks {
    PressureMarks {
        high: limit / 8,
        low: limit / 16,
        on_change: Arc::new(crate::allocator::request_memory_pressure),
    }
}

/// Budget units that `bytes` take, rounded up.
fn units(bytes: usize) -> usize {
    bytes.div_ceil(BUDGET_UNIT).max(1)
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

/// A call as its shares' holder: ended when one of them is taken back for another
/// client.
#[derive(Debug)]
struct CallHandle {
    started: Instant,
    preempted: AtomicBool,
    /// The task to wake when the call is ended: its response future, then its body.
    waker: AtomicWaker,
    connection: Option<Arc<ConnectionState>>,
}

impl CallHandle {
    fn new(connection: Option<Arc<ConnectionState>>) -> Self {
        CallHandle {
            started: Instant::now(),
            preempted: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            connection,
        }
    }

    fn is_preempted(&self) -> bool {
        self.preempted.load(Ordering::SeqCst)
    }

    /// Ready once the call must end to make room for another client.
    fn poll_preempted(&self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.is_preempted() {
            self.waker.register(cx.waker());
        }
        match self.is_preempted() {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }
}

impl Holder for CallHandle {
    /// The longest-running call first: a call held open on purpose is among the oldest,
    /// while a call doing work is usually short.
    fn precedence(&self) -> (usize, Instant) {
        (0, self.started)
    }

    fn revoke(&self) {
        if !self.preempted.swap(true, Ordering::SeqCst) {
            if let Some(connection) = &self.connection {
                connection.call_preempted();
            }
            self.waker.wake();
        }
    }
}

/// One call's place in the counts, given back when the call's response ends or is dropped.
struct CallGuard {
    call: Option<Share>,
    /// What ends the call when a share of it is taken back; health checks have none.
    handle: Option<Arc<CallHandle>>,
    connection: Option<Arc<ConnectionState>>,
    /// The budget held for the call's latest request message.
    held: Arc<Mutex<Option<Share>>>,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(connection) = &self.connection {
            connection.call_ended(self.call.is_some());
            if self.handle.as_ref().is_some_and(|handle| handle.is_preempted()) {
                connection.preempted_call_gone();
            }
        }
        self.held.lock().take();
    }
}

/// The peer a request counts against: on a connection from a trusted proxy, the address
/// it put in the peer header (the last, for a list); else the connection's remote address.
/// A header from anyone else is ignored: believed, it would let a client name itself
/// anyone.
fn peer_of(
    request: &http::Request<Body>,
    connection: Option<&ConnectionInfo>,
    limits: &CallLimits,
) -> IpAddr {
    // An IPv4 client of a dual-stack socket arrives as ::ffff:a.b.c.d.
    let remote = connection.and_then(|c| c.tcp.remote_addr).map(|addr| addr.ip().to_canonical());
    let from_proxy = remote.is_some_and(|ip| limits.trusted_proxies.iter().any(|net| net.contains(&ip)));
    let named =
        limits.peer_header.as_ref().filter(|_| from_proxy).and_then(|name| request.headers().get(name));
    named
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(',').next_back())
        .and_then(|value| value.trim().parse::<IpAddr>().ok())
        .map(|ip| ip.to_canonical())
        .or(remote)
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

impl<S> CallLimitsService<S> {
    /// Counts the call in, or says why it is refused.
    fn admit(
        &self,
        peer: IpAddr,
        connection: Option<&Arc<ConnectionState>>,
        work: bool,
    ) -> Result<CallGuard, Status> {
        let limits = &self.layer.limits;
        let mut guard = CallGuard { call: None, handle: None, connection: None, held: Arc::default() };
        if work {
            let calls = &self.layer.calls.0;
            let handle = Arc::new(CallHandle::new(connection.cloned()));
            guard.call =
                Some(calls.try_take(peer, 1, Arc::clone(&handle) as Arc<dyn Holder>).map_err(|refusal| {
                    Status::resource_exhausted(match refusal {
                        Refusal::PeerCap => format!(
                            "too many calls in flight from this client (limit {} a client); retry later",
                            calls.policy().per_client
                        ),
                        Refusal::Full { total } => {
                            format!("server overloaded: {total} calls in flight, its limit; retry later")
                        }
                    })
                })?);
            guard.handle = Some(handle);
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
        let peer = peer_of(&request, connection.as_ref(), &self.layer.limits);
        let guard = match self.admit(peer, connection.as_ref().map(|c| &c.state), work) {
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
            let holder: Arc<dyn Holder> = guard.handle.clone().expect("a work call has a handle");
            let json = JsonBody::take(&mut request);
            let messages = budget::Messages { inflate, requests: Requests::of(request.uri().path()), json };
            let budget = Budgeted::new(
                request_body,
                messages,
                peer,
                Arc::clone(&holder),
                Arc::clone(&guard.held),
                Arc::clone(&self.layer.budget),
                Arc::clone(&self.layer.limits),
            );
            *request.body_mut() = Body::new(budget);
            let memory = budget::CallMemoryShare {
                peer,
                holder: Arc::clone(&holder),
                held: Arc::clone(&guard.held),
                budget: Arc::clone(&self.layer.budget),
                limits: Arc::clone(&self.layer.limits),
            };
            request.extensions_mut().insert(CallMemory(Arc::new(memory)));
        }
        let response = self.inner.call(request);
        let handle = guard.handle.clone();
        Either::Right(Box::pin(async move {
            let response = match handle {
                Some(handle) => tokio::select! {
                    biased;
                    response = response => response?,
                    () = std::future::poll_fn(|cx| handle.poll_preempted(cx)) => {
                        return Ok(Status::resource_exhausted(PREEMPTED).into_http());
                    }
                },
                None => response.await?,
            };
            Ok(response.map(|body| Body::new(Guarded { inner: body, guard, ended: false })))
        }))
    }
}

/// A response body that holds its call's place in the counts until it is done, and ends
/// the call with [`PREEMPTED`] when that place is taken back.
struct Guarded {
    inner: Body,
    guard: CallGuard,
    /// Its trailers (or the end) have been passed on.
    ended: bool,
}

impl http_body::Body for Guarded {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        if this.guard.handle.as_ref().is_some_and(|handle| handle.poll_preempted(cx).is_ready()) {
            this.ended = true;
            let mut trailers = http::HeaderMap::new();
            // A fixed ASCII message always makes valid headers.
            let _ = Status::resource_exhausted(PREEMPTED).add_header(&mut trailers);
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        let frame = std::task::ready!(Pin::new(&mut this.inner).poll_frame(cx));
        this.ended = match &frame {
            Some(Ok(frame)) => frame.is_trailers(),
            Some(Err(_)) | None => true,
        };
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

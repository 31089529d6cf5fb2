//! Prometheus metrics: what the server counts, the tower layer that counts calls, and the
//! plaintext `/metrics` endpoint on its own port.
//!
//! Calls are counted in a layer around every service (health and reflection included), so
//! a call's code is the one the client sees: tonic puts `grpc-status` in the response
//! headers when a call fails before its first message (trailers-only) and in the trailers
//! otherwise, so the layer reads both. A response body dropped before its end is a call
//! the client cancelled. Method labels come from the services' descriptor sets, and a
//! path outside them is counted as `unknown`, so a client cannot grow the label space.
//!
//! Problems are tallied per batch (or per rayon task) and added to the shared counters
//! once, so that a million small problems a second do not contend on one atomic. A
//! method's series are looked up in their families once, at its first call, and kept
//! (`MethodMetrics`): a call then costs one map lookup by path, not one a series.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::{Frame, SizeHint};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use prost::Message;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::body::Body;
use tower::{Layer, Service};

use super::metrics_endpoint::{self, EndpointLimits};
use super::process_metrics;
use crate::games::table::Table;
use crate::games::{GameKind, Tables};
use crate::pb;
use crate::solver::SolveObserver;

/// Labels of one RPC (also the names a call's trace span carries).
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct MethodLabels {
    pub(super) service: &'static str,
    pub(super) method: &'static str,
}

/// Labels of one finished call.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    service: &'static str,
    method: &'static str,
    code: &'static str,
}

/// Labels of one answered problem: its game and `solved` or its error's reason.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProblemLabels {
    game: &'static str,
    outcome: &'static str,
}

/// Labels of a table game's series.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GameLabels {
    game: &'static str,
}

/// Labels of one table extension: the game and what asked for it.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExtensionLabels {
    game: &'static str,
    cause: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Every metric of one server; cheap to clone.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: HistogramFamily<MethodLabels>,
    in_flight: Family<MethodLabels, Gauge>,
    received: Family<MethodLabels, Counter>,
    problems: Family<ProblemLabels, Counter>,
    /// Each known method's series, by path; `unknown` for any other path.
    methods: MethodMap<&'static str, Arc<MethodMetrics>>,
    unknown: Arc<MethodMetrics>,
    connections: Counter,
    connections_open: Gauge,
    tls_handshake_failures: Counter,
    /// One a table game, in the order of `GameKind::ALL`; read at each scrape.
    tables: Vec<Arc<dyn Table>>,
    table_covered: Family<GameLabels, Gauge>,
    table_extensions: HistogramFamily<ExtensionLabels>,
}

/// What became of the trace spans this process made (`super::traces`). Process-wide: the
/// trace pipeline starts before the server (and its metrics) and outlives it. All zero
/// without `--otlp-endpoint`.
pub(crate) struct SpanCounts {
    /// Spans ended, each handed to the batch processor.
    pub(crate) ended: Counter,
    /// Spans a collector accepted.
    pub(crate) exported: Counter,
    /// Spans in exports that failed (a dead or refusing collector, a timeout): lost.
    pub(crate) lost: Counter,
}

/// The process's [`SpanCounts`]. Spans dropped at a full queue are neither exported nor
/// lost in an export: `ended - exported - lost` beyond the queue's size
/// (`OTEL_BSP_MAX_QUEUE_SIZE`) counts them.
pub(crate) static SPANS: LazyLock<SpanCounts> = LazyLock::new(|| SpanCounts {
    ended: Counter::default(),
    exported: Counter::default(),
    lost: Counter::default(),
});

/// Call latencies from 100 µs to about 100 s, a bucket every factor of 4.
fn call_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 4.0, 11))
}

/// Table extensions from 1 ms to about 1000 s.
fn extension_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 4.0, 11))
}

impl Metrics {
    /// A fresh set of metrics; the table's coverage is read at each scrape.
    pub fn new(tables: Arc<Tables>) -> Self {
        // The process metrics keep their standard, unprefixed names.
        let mut root = Registry::default();
        process_metrics::register(&mut root);
        let registry = root.sub_registry_with_prefix("gamesolver");
        let inner = Inner {
            calls: Family::default(),
            durations: Family::new_with_constructor(call_buckets),
            in_flight: Family::default(),
            received: Family::default(),
            problems: Family::default(),
            methods: known_methods()
                .iter()
                .map(|(path, labels)| (path.as_str(), Arc::new(MethodMetrics::new(*labels))))
                .collect(),
            unknown: Arc::new(MethodMetrics::new(UNKNOWN_METHOD)),
            connections: Counter::default(),
            connections_open: Gauge::default(),
            tls_handshake_failures: Counter::default(),
            tables: tables.each(),
            table_covered: Family::default(),
            table_extensions: Family::new_with_constructor(extension_buckets),
            registry: Registry::default(),
        };
        registry.register("calls", "Finished gRPC calls by method and status code", inner.calls.clone());
        registry.register_with_unit(
            "call_duration",
            "Time from a call's request headers to the end of its response",
            Unit::Seconds,
            inner.durations.clone(),
        );
        registry.register("calls_in_flight", "gRPC calls (HTTP/2 streams) open now", inner.in_flight.clone());
        registry.register_with_unit(
            "received",
            "Request body bytes received (gRPC frames, as compressed on the wire)",
            Unit::Bytes,
            inner.received.clone(),
        );
        registry.register(
            "problems",
            "Problems answered, by game and outcome (solved, or the error's reason)",
            inner.problems.clone(),
        );
        registry.register(
            "connections",
            "Connections accepted (after the TLS handshake)",
            inner.connections.clone(),
        );
        registry.register("connections_open", "Connections open now", inner.connections_open.clone());
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that failed or timed out",
            inner.tls_handshake_failures.clone(),
        );
        registry.register(
            "table_covered",
            "Piles below this are in the game's table",
            inner.table_covered.clone(),
        );
        registry.register_with_unit(
            "table_extension",
            "Time a caller spent growing a game's table (or waiting for the growth it needed), by what asked",
            Unit::Seconds,
            inner.table_extensions.clone(),
        );
        let spans = &SPANS;
        registry.register(
            "trace_spans_ended",
            "Trace spans ended (all zero without --otlp-endpoint)",
            spans.ended.clone(),
        );
        registry.register(
            "trace_spans_exported",
            "Trace spans an OTLP collector accepted",
            spans.exported.clone(),
        );
        registry.register("trace_spans_lost", "Trace spans in OTLP exports that failed", spans.lost.clone());
        registry.register(
            "build",
            "The running build",
            Info::new(BuildLabels { version: env!("CARGO_PKG_VERSION") }),
        );
        Metrics { inner: Arc::new(Inner { registry: root, ..inner }) }
    }

    /// The metrics in the OpenMetrics text format, as Prometheus scrapes them.
    pub fn encode(&self) -> String {
        for table in &self.inner.tables {
            let labels = GameLabels { game: table.game().label() };
            self.inner
                .table_covered
                .get_or_create(&labels)
                .set(i64::try_from(table.covered()).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.inner.registry);
        text
    }

    /// Records one extension of `game`'s table of `seconds`, by what asked for it.
    pub(crate) fn observe_extension(&self, game: GameKind, cause: &'static str, seconds: f64) {
        self.inner
            .table_extensions
            .get_or_create(&ExtensionLabels { game: game.label(), cause })
            .observe(seconds);
    }

    /// The series of the method at `path`.
    fn method(&self, path: &str) -> Arc<MethodMetrics> {
        Arc::clone(self.inner.methods.get(path).unwrap_or(&self.inner.unknown))
    }

    /// Counts an accepted connection and keeps it counted as open until the guard drops.
    pub(crate) fn connection_opened(&self) -> ConnectionGuard {
        self.inner.connections.inc();
        self.inner.connections_open.inc();
        ConnectionGuard(self.clone())
    }

    /// Counts a TLS handshake that failed or timed out.
    pub(crate) fn tls_handshake_failed(&self) {
        self.inner.tls_handshake_failures.inc();
    }
}

/// Keeps one connection in `gamesolver_connections_open`.
#[derive(Debug)]
pub(crate) struct ConnectionGuard(Metrics);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.inner.connections_open.dec();
    }
}

/// One method's call series, taken from their families at its first call (so that a
/// method never called has no series, as before) and kept.
#[derive(Debug)]
struct MethodMetrics {
    labels: MethodLabels,
    series: OnceLock<MethodSeries>,
    /// `calls` by code, in the order of `tonic::Code`'s numbers.
    calls: [OnceLock<Counter>; CODES],
}

/// The series of one method that every call touches.
#[derive(Debug)]
struct MethodSeries {
    in_flight: Gauge,
    received: Counter,
    durations: Histogram,
}

/// The gRPC codes, `OK` (0) to `UNAUTHENTICATED` (16).
const CODES: usize = 17;

impl MethodMetrics {
    fn new(labels: MethodLabels) -> Self {
        MethodMetrics { labels, series: OnceLock::new(), calls: std::array::from_fn(|_| OnceLock::new()) }
    }

    fn series(&self, inner: &Inner) -> &MethodSeries {
        self.series.get_or_init(|| MethodSeries {
            in_flight: inner.in_flight.get_or_create(&self.labels).clone(),
            received: inner.received.get_or_create(&self.labels).clone(),
            durations: inner.durations.get_or_create(&self.labels).clone(),
        })
    }

    fn calls(&self, inner: &Inner, code: tonic::Code) -> &Counter {
        let index = usize::try_from(code as i32).map_or(tonic::Code::Unknown as usize, |i| i.min(CODES - 1));
        self.calls[index].get_or_init(|| {
            let MethodLabels { service, method } = self.labels;
            inner.calls.get_or_create(&CallLabels { service, method, code: code_label(code) }).clone()
        })
    }
}

impl SolveObserver for Metrics {
    fn problems_answered(&self, counts: &[(&'static str, &'static str, u64)]) {
        for &(game, outcome, count) in counts {
            self.inner.problems.get_or_create(&ProblemLabels { game, outcome }).inc_by(count);
        }
    }

    fn table_extended(&self, game: GameKind, cause: &'static str, seconds: f64) {
        self.observe_extension(game, cause, seconds);
    }
}

/// The RPC at `path`, or `unknown` for a path outside this server's services.
pub(super) fn method_of(path: &str) -> MethodLabels {
    *known_methods().get(path).unwrap_or(&UNKNOWN_METHOD)
}

/// A map by method path, looked up twice a call. Its keys are this server's own
/// methods, fixed at start, so a caller's path is only ever looked up in it: foldhash
/// rather than SipHash, which cost a call about 300 instructions a lookup
/// (docs/performance.md, "The unary guard, counted").
type MethodMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// The RPCs this server knows, by path, from the descriptor sets of its services and
/// Flight's list of methods; built once a process (the names are leaked once, to be
/// `'static` labels).
fn known_methods() -> &'static MethodMap<String, MethodLabels> {
    static KNOWN: OnceLock<MethodMap<String, MethodLabels>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let sets = [
            pb::FILE_DESCRIPTOR_SET,
            tonic_health::pb::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
            tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
        ];
        let mut known = MethodMap::default();
        for set in sets {
            // The sets are compiled in; one that does not decode contributes nothing.
            let Ok(set) = prost_types::FileDescriptorSet::decode(set) else { continue };
            for file in set.file {
                for service in &file.service {
                    let full = format!("{}.{}", file.package(), service.name());
                    let service_label: &'static str = full.leak();
                    for method in &service.method {
                        let path = format!("/{service_label}/{}", method.name());
                        let method: &'static str = method.name().to_owned().leak();
                        known.insert(path, MethodLabels { service: service_label, method });
                    }
                }
            }
        }
        // Flight's methods by name: arrow-flight ships no descriptor set.
        let flight = crate::service::flight::SERVICE_NAME;
        for method in crate::service::flight::METHODS {
            known.insert(format!("/{flight}/{method}"), MethodLabels { service: flight, method });
        }
        known
    })
}

const UNKNOWN_METHOD: MethodLabels = MethodLabels { service: "unknown", method: "unknown" };

/// Counts every call: its code, duration, bytes received, and calls in flight.
#[derive(Debug, Clone)]
pub(crate) struct CallMetricsLayer {
    pub(crate) metrics: Metrics,
}

impl<S> Layer<S> for CallMetricsLayer {
    type Service = CallMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallMetrics { inner, metrics: self.metrics.clone() }
    }
}

/// The service [`CallMetricsLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct CallMetrics<S> {
    inner: S,
    metrics: Metrics,
}

impl<S> Service<http::Request<Body>> for CallMetrics<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let call = CallRecord::start(self.metrics.clone(), self.metrics.method(request.uri().path()));
        let received = call.method.series(&self.metrics.inner).received.clone();
        let request = request.map(|body| Body::new(CountedBody { inner: body, received }));
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(ObservedBody::wrap(response, call))
        })
    }
}

/// One call from its request headers until its code is known; counted as in flight
/// meanwhile, and as `CANCELLED` if dropped before: a call whose response future is
/// dropped before it has headers (the client reset the stream, the connection went) is
/// never wrapped in an `ObservedBody`, so the record ends itself.
#[derive(Debug)]
struct CallRecord {
    metrics: Metrics,
    method: Arc<MethodMetrics>,
    started: Instant,
    /// Set once the call is counted, so that it is counted once.
    done: bool,
}

impl CallRecord {
    fn start(metrics: Metrics, method: Arc<MethodMetrics>) -> Self {
        method.series(&metrics.inner).in_flight.inc();
        CallRecord { metrics, method, started: Instant::now(), done: false }
    }

    /// Counts the call with `code` and takes it out of the calls in flight, once.
    fn end(&mut self, code: tonic::Code) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let inner = &self.metrics.inner;
        self.method.calls(inner, code).inc();
        let series = self.method.series(inner);
        series.durations.observe(self.started.elapsed().as_secs_f64());
        series.in_flight.dec();
    }
}

impl CallEnd for CallRecord {
    fn finish(mut self, code: tonic::Code) {
        self.end(code);
    }
}

impl Drop for CallRecord {
    fn drop(&mut self) {
        self.end(tonic::Code::Cancelled);
    }
}

/// The code of a `grpc-status` value (`UNKNOWN` for a value that is not a number).
fn code_of(value: &http::HeaderValue) -> tonic::Code {
    let number = value.to_str().ok().and_then(|v| v.parse::<i32>().ok()).unwrap_or(2);
    tonic::Code::from_i32(number)
}

/// The name of a code, as the metrics label it.
fn code_label(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Ok => "OK",
        tonic::Code::Cancelled => "CANCELLED",
        tonic::Code::Unknown => "UNKNOWN",
        tonic::Code::InvalidArgument => "INVALID_ARGUMENT",
        tonic::Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        tonic::Code::NotFound => "NOT_FOUND",
        tonic::Code::AlreadyExists => "ALREADY_EXISTS",
        tonic::Code::PermissionDenied => "PERMISSION_DENIED",
        tonic::Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        tonic::Code::FailedPrecondition => "FAILED_PRECONDITION",
        tonic::Code::Aborted => "ABORTED",
        tonic::Code::OutOfRange => "OUT_OF_RANGE",
        tonic::Code::Unimplemented => "UNIMPLEMENTED",
        tonic::Code::Internal => "INTERNAL",
        tonic::Code::Unavailable => "UNAVAILABLE",
        tonic::Code::DataLoss => "DATA_LOSS",
        tonic::Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A request body that counts its data bytes as they arrive.
pub(super) struct CountedBody {
    pub(super) inner: Body,
    pub(super) received: Counter,
}

impl http_body::Body for CountedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                self.received.inc_by(data.len() as u64);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What learns a call's code once its response ends: its metrics, its trace span.
pub(super) trait CallEnd: Send + Unpin + 'static {
    /// The call ended with `code`.
    fn finish(self, code: tonic::Code);
}

/// A response body that finishes its call's record at the trailers (or the end).
pub(super) struct ObservedBody<E: CallEnd> {
    inner: Body,
    call: Option<E>,
    /// The code from the headers of a trailers-only response.
    code: Option<tonic::Code>,
}

impl<E: CallEnd> ObservedBody<E> {
    /// `response` with a body that tells `call` its code at the end.
    pub(super) fn wrap(response: http::Response<Body>, call: E) -> http::Response<Body> {
        let code = response.headers().get("grpc-status").map(code_of);
        response.map(|body| Body::new(ObservedBody { inner: body, call: Some(call), code }))
    }

    fn finish(&mut self, code: tonic::Code) {
        if let Some(call) = self.call.take() {
            call.finish(code);
        }
    }
}

impl<E: CallEnd> http_body::Body for ObservedBody<E> {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(status) = frame.trailers_ref().and_then(|t| t.get("grpc-status")) {
                    self.finish(code_of(status));
                }
            }
            Poll::Ready(Some(Err(status))) => self.finish(status.code()),
            Poll::Ready(None) => {
                let code = self.code.unwrap_or(tonic::Code::Unknown);
                self.finish(code);
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<E: CallEnd> Drop for ObservedBody<E> {
    fn drop(&mut self) {
        // hyper may drop an empty trailers-only body unpolled; anything else that ends
        // here was cut off: the client cancelled or the connection went.
        let code = self.code.unwrap_or(tonic::Code::Cancelled);
        self.finish(code);
    }
}

/// Serves `GET /metrics` on `listener` (HTTP/1.1, plaintext) within `limits` until `stop`
/// is cancelled.
pub(crate) async fn serve_metrics(
    listener: TcpListener,
    metrics: Metrics,
    limits: EndpointLimits,
    stop: CancellationToken,
) {
    metrics_endpoint::serve(listener, limits, Arc::new(move || metrics.encode()), stop).await;
}

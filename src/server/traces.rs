//! OpenTelemetry traces, off unless `--otlp-endpoint` is given.
//!
//! Spans are plain `tracing` spans: the service and the pool open theirs (`pool`,
//! `table.extend`) without knowing about OpenTelemetry, and [`Traces::layer`], a
//! layer of the process's subscriber, turns them into OpenTelemetry spans sent to an OTLP
//! collector over gRPC. [`CallSpanLayer`] opens one span a call, continuing the trace of
//! the caller's W3C `traceparent`, and records the call's code, request bytes and trace
//! id, so that log lines written during the call carry the trace id.
//!
//! With the flag off neither layer exists, and the spans inside the service are at debug
//! level, which the default log filter turns off at their call sites.
//!
//! The SDK's batch processor drops spans quietly (a full queue, an export that failed at
//! a dead collector) and says so only in its own logs, so the pipeline is wrapped to count
//! what became of every span in [`metrics::SPANS`], which `/metrics` serves.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body::{Frame, SizeHint};
use opentelemetry::propagation::Extractor;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter, SpanProcessor,
};
use opentelemetry_sdk::Resource;
use prometheus_client::metrics::counter::Counter;
use tonic::body::Body;
use tower::{Layer, Service};
use tracing::field::Empty;
use tracing::{Instrument, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::metrics::{self, CallEnd, CountedBody, ObservedBody, SPANS};

/// The batch processor, counting each span it is handed.
#[derive(Debug)]
struct CountedProcessor<P>(P);

impl<P: SpanProcessor> SpanProcessor for CountedProcessor<P> {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &opentelemetry::Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        SPANS.ended.inc();
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// The OTLP exporter, counting the spans of each export by its outcome.
#[derive(Debug)]
struct CountedExporter<E>(E);

impl<E: SpanExporter> SpanExporter for CountedExporter<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len() as u64;
        let result = self.0.export(batch).await;
        match &result {
            Ok(()) => SPANS.exported.inc_by(spans),
            Err(_) => SPANS.lost.inc_by(spans),
        };
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    /// The OTLP exporter could not be built (a malformed endpoint, for one).
    #[error("otlp exporter for {endpoint}: {source}")]
    Exporter {
        /// The endpoint asked for.
        endpoint: http::Uri,
        /// The exporter's error.
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// The process's trace pipeline: spans batched and exported to one OTLP endpoint.
#[derive(Debug)]
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Starts exporting to `endpoint` (OTLP over gRPC) as `service_name`, and makes the
    /// W3C trace context the process's propagator. Must be called within a tokio
    /// runtime, which carries the exporter's connection until [`Traces::shutdown`].
    ///
    /// The batch settings come from the standard `OTEL_BSP_*` environment variables.
    pub fn start(endpoint: &http::Uri, service_name: &str) -> Result<Traces, TracesError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.to_string())
            .build()
            .map_err(|source| TracesError::Exporter { endpoint: endpoint.clone(), source })?;
        let resource =
            opentelemetry_sdk::Resource::builder_empty().with_service_name(service_name.to_owned()).build();
        let batches = BatchSpanProcessor::builder(CountedExporter(exporter)).build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(CountedProcessor(batches))
            .with_resource(resource)
            .build();
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        Ok(Traces { provider })
    }

    /// The subscriber layer that exports this crate's spans. Other crates' spans (h2's,
    /// hyper's, the exporter's own connection) stay out of the traces.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        use tracing_subscriber::Layer as _;
        let tracer = self.provider.tracer(env!("CARGO_PKG_NAME"));
        let ours = |meta: &tracing::Metadata<'_>| {
            meta.target().starts_with(env!("CARGO_CRATE_NAME"))
                && (meta.is_span() || *meta.level() <= tracing::Level::INFO)
        };
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            // The pool's span is entered on both sides of the hand-off at once, which
            // inactivity tracking would count twice.
            .with_tracked_inactivity(false)
            .with_filter(tracing_subscriber::filter::filter_fn(ours))
    }

    /// Exports the spans still batched and stops; waits for the export, so the
    /// runtime must still run.
    pub fn shutdown(self) {
        if let Err(err) = self.provider.shutdown() {
            tracing::warn!(%err, "flushing the traces failed");
        }
    }
}

/// Opens a span for every call; the outermost layer, so that the span covers the limits'
/// refusals too.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSpanLayer;

impl<S> Layer<S> for CallSpanLayer {
    type Service = CallSpan<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallSpan { inner }
    }
}

/// The service [`CallSpanLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct CallSpan<S> {
    inner: S,
}

impl<S> Service<http::Request<Body>> for CallSpan<S>
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
        let method = metrics::method_of(request.uri().path());
        // Attribute names from OpenTelemetry's RPC conventions; `problems` is recorded
        // by the service where it knows the count (as an i64: a u64 would be exported as
        // a string).
        let span = tracing::info_span!(
            "call",
            otel.name = format_args!("{}/{}", method.service, method.method),
            otel.kind = "server",
            otel.status_code = Empty,
            rpc.system = "grpc",
            rpc.service = method.service,
            rpc.method = method.method,
            rpc.grpc.status_code = Empty,
            problems = Empty,
            request_bytes = Empty,
            trace_id = Empty,
        );
        let caller = opentelemetry::global::get_text_map_propagator(|propagator| {
            propagator.extract(&HeaderExtractor(request.headers()))
        });
        // Fails only without the OpenTelemetry layer, when there is nothing to continue.
        let _ = span.set_parent(caller);
        let trace_id = span.context().span().span_context().trace_id();
        if trace_id != opentelemetry::trace::TraceId::INVALID {
            span.record("trace_id", tracing::field::display(trace_id));
        }
        let received = Counter::default();
        let request = request.map(|body| Body::new(CountedBody { inner: body, received: received.clone() }));
        let response = span.in_scope(|| self.inner.call(request));
        Box::pin(async move {
            let response = response.instrument(span.clone()).await?;
            let end = CallSpanEnd { span: span.clone(), received };
            Ok(ObservedBody::wrap(response, end).map(|body| Body::new(InSpan { inner: body, span })))
        })
    }
}

/// Records a call's code and request bytes on its span.
struct CallSpanEnd {
    span: Span,
    received: Counter,
}

impl CallEnd for CallSpanEnd {
    fn finish(self, code: tonic::Code) {
        self.span.record("rpc.grpc.status_code", code as i32);
        // As an i64: tracing-opentelemetry exports a u64 (or usize) as a string.
        self.span.record("request_bytes", i64::try_from(self.received.get()).unwrap_or(i64::MAX));
        // The server errors of OpenTelemetry's gRPC conventions; the rest are the
        // caller's doing and leave the span's status unset.
        use tonic::Code::*;
        if matches!(code, Unknown | DeadlineExceeded | Unimplemented | Internal | Unavailable | DataLoss) {
            self.span.record("otel.status_code", "ERROR");
        }
    }
}

/// A response body polled within its call's span: a streaming call solves while its
/// response is read, so the pool's spans of a stream are children of the call's.
struct InSpan {
    inner: Body,
    span: Span,
}

impl http_body::Body for InSpan {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        Pin::new(&mut this.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Request headers as the propagator reads them.
struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|value| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

//! OpenTelemetry traces (`--otlp-endpoint`): the server binary exports to an OTLP
//! collector stand-in run here, continuing the caller's `traceparent`. A binary, not an
//! in-process server: the tracer provider and the subscriber are global to a process.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{iv, ServerProcess};
use gamesolver::pb;
use gamesolver::pb::game_solver_service_client::GameSolverServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::Span;
use tokio_util::sync::CancellationToken;

/// An OTLP trace collector that keeps every span it is sent, with its resource's
/// `service.name`.
#[derive(Debug, Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<(String, Span)>>>,
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut kept = self.spans.lock().unwrap();
        for resource_spans in request.into_inner().resource_spans {
            let attributes = resource_spans.resource.map(|r| r.attributes).unwrap_or_default();
            let service = attribute(&attributes, "service.name").and_then(as_string).unwrap_or_default();
            for span in resource_spans.scope_spans.into_iter().flat_map(|scope| scope.spans) {
                kept.push((service.clone(), span));
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

impl Collector {
    /// Serves on an ephemeral port until `stop`; returns the collector's URL.
    async fn serve(&self, stop: CancellationToken) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(self.clone()))
            .serve_with_incoming_shutdown(incoming, stop.cancelled_owned());
        tokio::spawn(server);
        url
    }

    /// Waits (at most 20 s) until the spans of trace `trace_id` include every one of
    /// `names`; returns them.
    async fn trace(&self, trace_id: &[u8], names: &[&str]) -> Vec<(String, Span)> {
        for _ in 0..400 {
            let spans: Vec<_> = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, span)| span.trace_id == trace_id)
                .cloned()
                .collect();
            if names.iter().all(|name| spans.iter().any(|(_, span)| span.name == *name)) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let seen: Vec<_> = self.spans.lock().unwrap().iter().map(|(_, s)| s.name.clone()).collect();
        panic!("trace {} lacks one of {names:?}; spans received: {seen:?}", hex(trace_id));
    }
}

fn attribute<'a>(
    attributes: &'a [opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<&'a Value> {
    attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()
}

fn as_string(value: &Value) -> Option<String> {
    match value {
        Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn as_int(value: &Value) -> Option<i64> {
    match value {
        Value::IntValue(i) => Some(*i),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The span named `name`.
fn named<'a>(spans: &'a [(String, Span)], name: &str) -> &'a Span {
    &spans.iter().find(|(_, span)| span.name == name).unwrap().1
}

/// Starts the binary exporting to `collector`, its text log in `log`, every problem
/// solved on the pool (`--inline-work 0`), batches exported after `delay`.
fn start_server(collector: &str, delay: Duration, log: &Path) -> ServerProcess {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0", "--inline-work", "0", "--otlp-endpoint", collector])
        .env("OTEL_BSP_SCHEDULE_DELAY", delay.as_millis().to_string())
        .env("RUST_LOG", "info,gamesolver=debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on ").expect("the start-up line").parse().unwrap();
    ServerProcess { child, addr }
}

/// `request` carrying a W3C `traceparent` of `trace_id` and the caller's span `span_id`.
fn traced<T>(message: T, trace_id: &[u8; 16], span_id: &[u8; 8]) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let traceparent = format!("00-{}-{}-01", hex(trace_id), hex(span_id));
    request.metadata_mut().insert("traceparent", traceparent.parse().unwrap());
    request
}

const SOLVE: &str = "gamesolver.v1.GameSolverService/Solve";
const SOLVE_BATCH: &str = "gamesolver.v1.GameSolverService/SolveBatch";

#[tokio::test]
async fn a_call_continues_the_callers_trace_with_its_pool_and_table_spans() {
    let stop = CancellationToken::new();
    let collector = Collector::default();
    let url = collector.serve(stop.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut server = start_server(&url, Duration::from_millis(100), &log);
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();

    // A pile beyond the fresh table: the call extends it, then solves on the pool.
    let (trace_id, caller_span) = ([0x4b; 16], [0x2c; 8]);
    let request = pb::SolveRequest { problem: Some(iv("p", 50_000)), winner_only: false };
    client.solve(traced(request, &trace_id, &caller_span)).await.unwrap();
    let spans = collector.trace(&trace_id, &[SOLVE, "table.extend", "pool"]).await;

    let call = named(&spans, SOLVE);
    assert_eq!(call.parent_span_id, caller_span, "the call continues the caller's span");
    assert_eq!(call.kind, SpanKind::Server as i32);
    let rpc_method = attribute(&call.attributes, "rpc.method").and_then(as_string);
    assert_eq!(rpc_method.as_deref(), Some("Solve"));
    assert_eq!(attribute(&call.attributes, "rpc.grpc.status_code").and_then(as_int), Some(0));
    assert_eq!(attribute(&call.attributes, "problems").and_then(as_int), Some(1));
    let request_bytes = attribute(&call.attributes, "request_bytes").and_then(as_int);
    assert!(request_bytes > Some(5), "request bytes {request_bytes:?}");
    for child in ["table.extend", "pool"] {
        assert_eq!(named(&spans, child).parent_span_id, call.span_id, "{child} is a child of the call");
    }
    assert!(attribute(&named(&spans, "pool").attributes, "queued_us").and_then(as_int).is_some());
    assert!(spans.iter().all(|(service, _)| service == "gamesolver"));

    // A log line written during a call names the call's trace.
    let trace_id = [0x7e; 16];
    let batch = pb::SolveBatchRequest { problems: vec![iv("a", 3), iv("b", 4)], winner_only: false };
    client.solve_batch(traced(batch, &trace_id, &caller_span)).await.unwrap();
    let spans = collector.trace(&trace_id, &[SOLVE_BATCH]).await;
    let call = named(&spans, SOLVE_BATCH);
    assert_eq!(attribute(&call.attributes, "problems").and_then(as_int), Some(2));
    let logged = std::fs::read_to_string(&log).unwrap();
    let line = logged.lines().find(|line| line.contains("SolveBatch")).expect("the SolveBatch line");
    assert!(line.contains(&format!("trace_id={}", hex(&trace_id))), "{line}");

    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    stop.cancel();
}

#[tokio::test]
async fn spans_still_batched_at_sigterm_are_exported_before_the_exit() {
    let stop = CancellationToken::new();
    let collector = Collector::default();
    let url = collector.serve(stop.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    // A batch delay longer than the test: only the flush at exit can send the spans.
    let mut server = start_server(&url, Duration::from_secs(600), &dir.path().join("server.log"));
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();
    let trace_id = [0x1d; 16];
    let request = pb::SolveRequest { problem: Some(iv("p", 7)), winner_only: false };
    client.solve(traced(request, &trace_id, &[0x3a; 8])).await.unwrap();
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    collector.trace(&trace_id, &[SOLVE, "pool"]).await;
    stop.cancel();
}

#[tokio::test]
async fn a_call_without_traceparent_starts_a_trace_of_its_own() {
    let stop = CancellationToken::new();
    let collector = Collector::default();
    let url = collector.serve(stop.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_server(&url, Duration::from_millis(100), &dir.path().join("server.log"));
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();
    let request = pb::SolveRequest { problem: Some(iv("p", 7)), winner_only: false };
    client.solve(request).await.unwrap();
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    let spans = collector.spans.lock().unwrap().clone();
    let (_, call) = spans.iter().find(|(_, span)| span.name == SOLVE).expect("the call's span");
    assert!(call.parent_span_id.is_empty(), "a root span");
    assert!(call.trace_id.iter().any(|&b| b != 0));
}

#[tokio::test]
async fn a_connect_call_is_traced_as_the_grpc_call_it_stands_for() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stop = CancellationToken::new();
    let collector = Collector::default();
    let url = collector.serve(stop.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_server(&url, Duration::from_millis(100), &dir.path().join("server.log"));
    // curl's request over HTTP/1.1, with the caller's traceparent; a bad problem.
    let (trace_id, caller_span) = ([0x5c; 16], [0x1e; 8]);
    let body = r#"{"problem":{"sumGame":{"num":"123"}}}"#;
    let request = format!(
        "POST /{SOLVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         traceparent: 00-{}-{}-01\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        hex(&trace_id),
        hex(&caller_span),
        body.len()
    );
    let mut socket = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(20), socket.read_to_string(&mut answer)).await.unwrap().unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    let spans = collector.trace(&trace_id, &[SOLVE]).await;
    let call = named(&spans, SOLVE);
    assert_eq!(call.parent_span_id, caller_span, "the call continues the caller's span");
    let rpc_method = attribute(&call.attributes, "rpc.method").and_then(as_string);
    assert_eq!(rpc_method.as_deref(), Some("Solve"));
    // INVALID_ARGUMENT, as over gRPC.
    assert_eq!(attribute(&call.attributes, "rpc.grpc.status_code").and_then(as_int), Some(3));
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    stop.cancel();
}

/// Starts the binary exporting to `collector` (batches every 100 ms) with a metrics port;
/// returns it and the metrics address.
fn start_server_with_metrics(collector: &str) -> (ServerProcess, std::net::SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"))
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--inline-work", "0"])
        .args(["--otlp-endpoint", collector])
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut address = |prefix: &str| {
        let line = lines.next().expect("a start-up line").unwrap();
        line.strip_prefix(prefix).unwrap_or_else(|| panic!("{line:?} after {prefix:?}")).parse().unwrap()
    };
    let addr = address("listening on ");
    let metrics = address("metrics on ");
    (ServerProcess { child, addr }, metrics)
}

/// The value of the counter `name` on the metrics port.
fn counter(metrics: std::net::SocketAddr, name: &str) -> u64 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(metrics).unwrap();
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let line = text
        .lines()
        .find(|line| line.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("{name} in {text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Polls `metrics` until `done` holds of the span counters (ended, exported, lost), for
/// at most 30 s, and returns them.
async fn span_counts(metrics: std::net::SocketAddr, done: impl Fn(u64, u64, u64) -> bool) -> (u64, u64, u64) {
    let read = || {
        let name = |what: &str| counter(metrics, &format!("gamesolver_trace_spans_{what}_total"));
        (name("ended"), name("exported"), name("lost"))
    };
    for _ in 0..150 {
        let (ended, exported, lost) = read();
        if done(ended, exported, lost) {
            return (ended, exported, lost);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    read()
}

#[tokio::test]
async fn spans_lost_at_a_dead_collector_are_counted_in_the_metrics() {
    // Nothing listens on port 1: every export fails.
    let (mut server, metrics) = start_server_with_metrics("http://127.0.0.1:1");
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();
    for id in ["a", "b", "c"] {
        let request = pb::SolveRequest { problem: Some(iv(id, 7)), winner_only: false };
        client.solve(request).await.unwrap();
    }
    // Each call makes its own span and a `pool` span.
    let (ended, exported, lost) = span_counts(metrics, |_, _, lost| lost >= 6).await;
    assert!(lost >= 6, "lost {lost}");
    assert_eq!(exported, 0);
    assert!(ended >= lost, "ended {ended}, lost {lost}");
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

#[tokio::test]
async fn spans_a_collector_takes_are_counted_as_exported() {
    let stop = CancellationToken::new();
    let collector = Collector::default();
    let url = collector.serve(stop.clone()).await;
    let (mut server, metrics) = start_server_with_metrics(&url);
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();
    let request = pb::SolveRequest { problem: Some(iv("p", 7)), winner_only: false };
    client.solve(request).await.unwrap();
    let (ended, exported, lost) = span_counts(metrics, |_, exported, _| exported >= 2).await;
    assert!(exported >= 2, "exported {exported}");
    assert_eq!(lost, 0);
    assert!(ended >= exported, "ended {ended}, exported {exported}");
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    stop.cancel();
}

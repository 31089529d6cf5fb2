//! An OTLP/gRPC trace collector that counts the spans it is sent and drops them: the
//! other end of `gamesolver-server --otlp-endpoint` for `bench/otel-ab.sh`, which
//! measures what traces cost the server. Prints `listening on ADDR`; on SIGTERM or
//! Ctrl-C prints the span count and exits.
//!
//! `cargo run --example otlp_sink [ADDR]` (default 127.0.0.1:0).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

#[derive(Debug, Default)]
struct Sink {
    spans: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let request = request.into_inner();
        let spans: usize =
            request.resource_spans.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
        self.spans.fetch_add(spans as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on {}", listener.local_addr()?);
    let sink = Sink::default();
    let spans = Arc::clone(&sink.spans);
    let stop = async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM");
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(sink))
        .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), stop)
        .await?;
    println!("spans {}", spans.load(Ordering::Relaxed));
    Ok(())
}

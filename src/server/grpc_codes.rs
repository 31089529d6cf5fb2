//! The codes the server sends, as the caller should read them, for every service:
//! - the server's own `--request-timeout`, or the call's `grpc-timeout` when shorter, ends
//!   a call with `DEADLINE_EXCEEDED` (tonic's timeout answers `CANCELLED`, "Timeout
//!   expired"). tonic's own timeout sits outside every layer, where a Connect call (which
//!   carries `Connect-Timeout-Ms`) has no `grpc-timeout` yet: the Connect door's
//!   translation adds one, and it is enforced here;
//! - a request the caller got wrong is the caller's fault ([`caller_fault`]): a message
//!   above `--max-message-bytes` is `RESOURCE_EXHAUSTED` (tonic says `OUT_OF_RANGE`), one
//!   that does not decode (protobuf, or a gRPC-Web body) `INVALID_ARGUMENT` (tonic says
//!   `INTERNAL`, which would count as a server error and let any client fire the
//!   server-error alert). The status is rewritten where it is sent: in the headers of a
//!   call that failed before its answer began, and in the trailers of one that had begun
//!   (a stream, whose decode errors come through its request stream: Flight's
//!   `FlightData`, decoded by tonic's own prost codec, included);
//! - a panic anywhere in a call, in the service's future or while its response body is
//!   polled, ends that call with `INTERNAL` and the fixed message [`PANICKED`] in its
//!   `grpc-status`, never a reset stream, and the metrics count it so; the panic itself is
//!   logged, rate-limited, by the hook of [`super::panics`].
//!
//! The layer sits between tonic's transport and the services, inside the metrics, the
//! limits and the Connect translation, so that each sees the code as sent; a call whose
//! deadline passes is dropped, so the solver skips the work it had not started.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::FutureExt;
use http_body::Frame;
use tonic::body::Body;
use tonic::{Code, Status};

use super::panics::{panicked, PANICKED};
use crate::convert::{caller_fault, may_be_caller_fault};
use tower::{Layer, Service};

/// Wraps every service with the request timeout, the status rewrites and the panic catch.
#[derive(Debug, Clone)]
pub(crate) struct GrpcCodesLayer {
    /// The server's upper bound on a call, up to its response headers (for a unary call,
    /// its whole answer).
    pub(crate) request_timeout: Option<Duration>,
}

impl<S> Layer<S> for GrpcCodesLayer {
    type Service = GrpcCodes<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcCodes { inner, request_timeout: self.request_timeout }
    }
}

/// The service [`GrpcCodesLayer`] makes.
#[derive(Debug, Clone)]
pub(crate) struct GrpcCodes<S> {
    inner: S,
    request_timeout: Option<Duration>,
}

impl<S, B> Service<http::Request<B>> for GrpcCodes<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let client = grpc_timeout(request.headers());
        let Ok(response) = catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) else {
            return Box::pin(futures::future::ready(Ok(panicked().into_http())));
        };
        let timeout = match (self.request_timeout, client) {
            (Some(server), Some(client)) if client < server => Some(Deadline::Client(client)),
            (Some(server), _) => Some(Deadline::Server(server)),
            (None, client) => client.map(Deadline::Client),
        };
        let response = AssertUnwindSafe(response).catch_unwind();
        Box::pin(async move {
            let response = match timeout {
                None => response.await,
                Some(deadline) => match tokio::time::timeout(deadline.duration(), response).await {
                    Ok(response) => response,
                    Err(_) => return Ok(Status::deadline_exceeded(deadline.expired()).into_http()),
                },
            };
            match response {
                Ok(response) => Ok(caller_faults(response?).map(|body| Body::new(SentBody::new(body)))),
                Err(_panic) => Ok(panicked().into_http()),
            }
        })
    }
}

/// Whose deadline bounds a call.
#[derive(Debug, Clone, Copy)]
enum Deadline {
    /// `--request-timeout`.
    Server(Duration),
    /// The call's `grpc-timeout`.
    Client(Duration),
}

impl Deadline {
    fn duration(self) -> Duration {
        match self {
            Deadline::Server(d) | Deadline::Client(d) => d,
        }
    }

    fn expired(self) -> String {
        match self {
            Deadline::Server(d) => format!("the server's request timeout of {d:?} expired"),
            Deadline::Client(d) => format!("the call's deadline of {d:?} expired"),
        }
    }
}

/// The headers every call's path reads, as names made once: a name given as text is
/// parsed on every lookup (about 160 instructions each).
const GRPC_TIMEOUT: http::HeaderName = http::HeaderName::from_static("grpc-timeout");
const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// A call's `grpc-timeout` (gRPC's HTTP/2 protocol: at most 8 digits and a unit); `None`
/// when absent or malformed, as tonic reads it.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get(&GRPC_TIMEOUT)?.as_bytes();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

/// A trailers-only response (a call that failed before its answer began) with its
/// status as [`caller_fault`] has it.
fn caller_faults(mut response: http::Response<Body>) -> http::Response<Body> {
    rewrite(response.headers_mut());
    response
}

/// Whether `headers` carry a status that [`caller_fault`] may rewrite
/// ([`may_be_caller_fault`]), read from `grpc-status` alone: every call's trailers come
/// here, and parsing the whole status (its message decoded, its headers copied) cost each
/// call about 1,500 instructions (docs/performance.md, "The unary guard, counted").
fn may_rewrite(headers: &http::HeaderMap) -> bool {
    let Some(code) = headers.get(&GRPC_STATUS) else { return false };
    let code = std::str::from_utf8(code.as_bytes()).ok().and_then(|code| code.parse::<i32>().ok());
    code.map(Code::from_i32).is_some_and(may_be_caller_fault)
}

/// Rewrites the status in `headers` (a trailers-only response's headers, or trailers) as
/// [`caller_fault`] has it; other headers and statuses stay as they are.
fn rewrite(headers: &mut http::HeaderMap) {
    if !may_rewrite(headers) {
        return;
    }
    let Some(status) = Status::from_header_map(headers) else { return };
    let code = status.code();
    let rewritten = caller_fault(status);
    if rewritten.code() != code {
        // add_header only fails on a message that cannot be a header; these are ASCII,
        // or came from one.
        let _ = rewritten.add_header(headers);
    }
}

/// A response body whose trailers carry the status as [`rewrite`] has it, and which ends
/// with [`PANICKED`] if polling it panics.
struct SentBody {
    /// `None` once it panicked, or ended.
    inner: Option<Body>,
}

impl SentBody {
    fn new(inner: Body) -> Self {
        SentBody { inner: Some(inner) }
    }

    /// The trailers of a call that panicked.
    fn panicked() -> Frame<Bytes> {
        let mut trailers = http::HeaderMap::new();
        // A fixed ASCII message always makes valid headers.
        let _ = Status::internal(PANICKED).add_header(&mut trailers);
        Frame::trailers(trailers)
    }
}

impl http_body::Body for SentBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        let polled = catch_unwind(AssertUnwindSafe(|| Pin::new(inner).poll_frame(cx)));
        match polled {
            Ok(Poll::Ready(Some(Ok(frame)))) => {
                let frame = match frame.into_trailers() {
                    Ok(mut trailers) => {
                        rewrite(&mut trailers);
                        Frame::trailers(trailers)
                    }
                    Err(frame) => frame,
                };
                Poll::Ready(Some(Ok(frame)))
            }
            Ok(Poll::Ready(None)) => {
                self.inner = None;
                Poll::Ready(None)
            }
            Ok(other) => other,
            Err(_panic) => {
                // What is left of the body may be broken: it goes, and a panic of its own
                // while it goes is caught too.
                let broken = self.inner.take();
                let _ = catch_unwind(AssertUnwindSafe(move || drop(broken)));
                Poll::Ready(Some(Ok(Self::panicked())))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(http_body::Body::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.as_ref().map(http_body::Body::size_hint).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt;
    use http_body_util::BodyExt;
    use tonic::{Code, Request, Response, Streaming};

    use super::*;
    use crate::pb;
    use crate::pb::game_solver_service_client::GameSolverServiceClient;
    use crate::pb::game_solver_service_server::{GameSolverService, GameSolverServiceServer};
    use crate::server::metrics::{CallMetricsLayer, Metrics};

    type Answers<T> = futures::stream::BoxStream<'static, Result<T, Status>>;

    /// A solver service that panics on purpose: `Solve` in its handler, `SolveBatchStream`
    /// in its answer stream after one answer; `SolveStream` answers each request it
    /// decodes and ends with the status of one it cannot.
    struct Panics;

    #[tonic::async_trait]
    impl GameSolverService for Panics {
        async fn solve(&self, _: Request<pb::SolveRequest>) -> Result<Response<pb::SolveResponse>, Status> {
            panic!("Solve panics on purpose")
        }

        async fn solve_batch(
            &self,
            _: Request<pb::SolveBatchRequest>,
        ) -> Result<Response<pb::SolveBatchResponse>, Status> {
            Ok(Response::new(pb::SolveBatchResponse::default()))
        }

        type SolveStreamStream = Answers<pb::SolveStreamResponse>;

        async fn solve_stream(
            &self,
            request: Request<Streaming<pb::SolveStreamRequest>>,
        ) -> Result<Response<Self::SolveStreamStream>, Status> {
            let answers =
                request.into_inner().map(|request| request.map(|_| pb::SolveStreamResponse::default()));
            Ok(Response::new(Box::pin(answers)))
        }

        type SolveBatchStreamStream = Answers<pb::SolveBatchStreamResponse>;

        async fn solve_batch_stream(
            &self,
            _: Request<Streaming<pb::SolveBatchStreamRequest>>,
        ) -> Result<Response<Self::SolveBatchStreamStream>, Status> {
            let first = futures::stream::iter([Ok(pb::SolveBatchStreamResponse::default())]);
            // Pending once, so that the first answer is sent on its own before the panic.
            let mut waited = false;
            let then = futures::stream::poll_fn(move |cx| -> Poll<Option<_>> {
                if !std::mem::replace(&mut waited, true) {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                panic!("the stream panics on purpose")
            });
            Ok(Response::new(Box::pin(first.chain(then))))
        }
    }

    /// [`Panics`] behind the metrics and this layer, as the server stacks them, on a
    /// loopback port; its metrics, its address and the task serving it.
    async fn serve_panics() -> (Metrics, std::net::SocketAddr, tokio::task::JoinHandle<()>) {
        let metrics = Metrics::new(Arc::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let router = tonic::transport::Server::builder()
            .layer(CallMetricsLayer { metrics: metrics.clone() })
            .layer(GrpcCodesLayer { request_timeout: None })
            .add_service(GameSolverServiceServer::new(Panics));
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
        let task = tokio::spawn(async move { router.serve_with_incoming(incoming).await.unwrap() });
        (metrics, addr, task)
    }

    /// The value of the `calls_total` series of `method` and `code`, 0 if absent.
    fn calls(metrics: &Metrics, method: &str, code: &str) -> String {
        let series = format!(
            "gamesolver_calls_total{{service=\"gamesolver.v1.GameSolverService\",method=\"{method}\",code=\"{code}\"}} "
        );
        let text = metrics.encode();
        text.lines().find_map(|line| line.strip_prefix(&series)).unwrap_or("0").to_owned()
    }

    #[tokio::test]
    async fn a_panic_in_a_handler_or_an_answer_stream_is_that_calls_internal_and_counted_so() {
        let (metrics, addr, task) = serve_panics().await;
        let mut client = GameSolverServiceClient::connect(format!("http://{addr}")).await.unwrap();
        let status = client.solve(pb::SolveRequest::default()).await.unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::Internal, PANICKED));

        let requests = futures::stream::iter([pb::SolveBatchStreamRequest::default()]);
        let mut answers = client.solve_batch_stream(requests).await.unwrap().into_inner();
        assert_eq!(answers.next().await.unwrap().unwrap(), pb::SolveBatchStreamResponse::default());
        let status = answers.next().await.unwrap().unwrap_err();
        assert_eq!((status.code(), status.message()), (Code::Internal, PANICKED), "trailers, not a reset");
        assert!(answers.next().await.is_none());

        // The connection lived through both: another call on it is answered.
        client.solve_batch(pb::SolveBatchRequest::default()).await.unwrap();
        assert_eq!(calls(&metrics, "Solve", "INTERNAL"), "1");
        assert_eq!(calls(&metrics, "SolveBatchStream", "INTERNAL"), "1");
        assert_eq!(calls(&metrics, "SolveBatchStream", "CANCELLED"), "0");
        task.abort();
    }

    #[tokio::test]
    async fn a_request_that_does_not_decode_is_invalid_argument_in_headers_and_trailers() {
        let (metrics, addr, task) = serve_panics().await;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        // A problem whose id (field 1 of Problem, field 1 of the request) is not UTF-8.
        let bad = bytes::Bytes::from_static(&[0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe]);
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let path = http::uri::PathAndQuery::from_static("/gamesolver.v1.GameSolverService/SolveBatch");
        let status = grpc
            .unary(Request::new(bad.clone()), path, RawCodec::<pb::SolveBatchResponse>::new())
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.message(),
            "the request message does not decode: Problem.id: SolveBatchRequest.problems: invalid string value: \
             data is not UTF-8 encoded"
        );
        grpc.ready().await.unwrap();
        let path = http::uri::PathAndQuery::from_static("/gamesolver.v1.GameSolverService/SolveStream");
        let good = bytes::Bytes::new();
        let requests = futures::stream::iter([good, bad]);
        let mut answers = grpc
            .streaming(Request::new(requests), path, RawCodec::<pb::SolveStreamResponse>::new())
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answers.message().await.unwrap(), Some(pb::SolveStreamResponse::default()));
        let status = answers.message().await.unwrap_err();
        assert_eq!(
            (status.code(), status.message()),
            (
                Code::InvalidArgument,
                "the request message does not decode: Problem.id: SolveStreamRequest.problem: invalid string value: \
                 data is not UTF-8 encoded"
            )
        );
        assert_eq!(calls(&metrics, "SolveBatch", "INVALID_ARGUMENT"), "1");
        assert_eq!(calls(&metrics, "SolveStream", "INVALID_ARGUMENT"), "1");
        assert_eq!(calls(&metrics, "SolveStream", "INTERNAL"), "0");
        task.abort();
    }

    /// Sends a request's bytes as they are, and decodes answers of type `U` with prost.
    #[derive(Debug)]
    struct RawCodec<U>(std::marker::PhantomData<U>);

    impl<U> RawCodec<U> {
        fn new() -> Self {
            RawCodec(std::marker::PhantomData)
        }
    }

    impl<U: prost::Message + Default + Send + 'static> tonic::codec::Codec for RawCodec<U> {
        type Encode = bytes::Bytes;
        type Decode = U;
        type Encoder = RawEncoder;
        type Decoder = tonic_prost::ProstDecoder<U>;

        fn encoder(&mut self) -> RawEncoder {
            RawEncoder
        }

        fn decoder(&mut self) -> Self::Decoder {
            tonic_prost::ProstDecoder::default()
        }
    }

    /// Writes a message's bytes as given.
    #[derive(Debug)]
    struct RawEncoder;

    impl tonic::codec::Encoder for RawEncoder {
        type Item = bytes::Bytes;
        type Error = Status;

        fn encode(
            &mut self,
            item: bytes::Bytes,
            buf: &mut tonic::codec::EncodeBuf<'_>,
        ) -> Result<(), Status> {
            bytes::BufMut::put_slice(buf, &item);
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_panic_while_making_the_call_or_reading_its_body_is_internal() {
        use tower::ServiceExt;
        let layer = GrpcCodesLayer { request_timeout: None };
        let calling = layer.layer(tower::service_fn(|_: http::Request<Body>| -> futures::future::Ready<Result<http::Response<Body>, std::convert::Infallible>> {
            panic!("call panics on purpose")
        }));
        let response = calling.oneshot(http::Request::new(Body::empty())).await.unwrap();
        assert_eq!(
            Status::from_header_map(response.headers()).map(|s| (s.code(), s.message().to_owned())),
            Some((Code::Internal, PANICKED.to_owned()))
        );

        let body = http_body_util::StreamBody::new(
            futures::stream::iter([Ok::<_, Status>(Frame::data(Bytes::from_static(b"\0\0\0\0\0")))]).chain(
                futures::stream::poll_fn(|_| -> Poll<Option<Result<Frame<Bytes>, Status>>> {
                    panic!("body panics on purpose")
                }),
            ),
        );
        let body = std::sync::Mutex::new(Some(Body::new(body)));
        let reading = layer.layer(tower::service_fn(move |_: http::Request<Body>| {
            let body = body.lock().unwrap().take().unwrap();
            futures::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(body)))
        }));
        let response = reading.oneshot(http::Request::new(Body::empty())).await.unwrap();
        let collected = response.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned().unwrap();
        assert_eq!(collected.to_bytes(), Bytes::from_static(b"\0\0\0\0\0"));
        let status = Status::from_header_map(&trailers).unwrap();
        assert_eq!((status.code(), status.message()), (Code::Internal, PANICKED));
    }

    #[test]
    fn only_the_statuses_caller_fault_rewrites_are_parsed_and_rewritten() {
        let trailers = |code: Code, message: &str| {
            let mut headers = http::HeaderMap::new();
            Status::new(code, message).add_header(&mut headers).unwrap();
            headers
        };
        let decode = "failed to decode Protobuf message: invalid wire type";
        for code in [Code::OutOfRange, Code::Internal] {
            assert!(may_rewrite(&trailers(code, "")), "{code:?}");
        }
        let mut internal = trailers(Code::Internal, decode);
        rewrite(&mut internal);
        let status = Status::from_header_map(&internal).unwrap();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(status.message(), "the request message does not decode: invalid wire type");
        for code in [Code::Ok, Code::InvalidArgument, Code::Unavailable] {
            let mut headers = trailers(code, decode);
            let before = headers.clone();
            assert!(!may_rewrite(&headers), "{code:?}");
            rewrite(&mut headers);
            assert_eq!(headers, before, "{code:?} stays as it is");
        }
        for bad in ["", "x", "99999999999", "13 "] {
            let mut headers = http::HeaderMap::new();
            headers.insert("grpc-status", http::HeaderValue::from_str(bad).unwrap());
            assert!(!may_rewrite(&headers), "{bad:?}");
        }
        assert!(!may_rewrite(&http::HeaderMap::new()));
    }

    #[test]
    fn grpc_timeouts_parse_as_the_protocol_writes_them() {
        let parse = |value: &'static str| {
            let mut headers = http::HeaderMap::new();
            headers.insert("grpc-timeout", http::HeaderValue::from_static(value));
            grpc_timeout(&headers)
        };
        assert_eq!(parse("1500m"), Some(Duration::from_millis(1500)));
        assert_eq!(parse("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["m", "123456789m", "10x", "1.5S", ""] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}

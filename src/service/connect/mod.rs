//! The Connect door: the Connect protocol's unary calls (`Solve`, `SolveBatch`), JSON or
//! binary protobuf over plain HTTP/1.1 or HTTP/2, so that `curl` gets answers.
//!
//! A Connect call is translated, not served apart, so that it is counted, limited, timed
//! out and solved exactly as the gRPC call it stands for. [`ConnectLayer`], outside the
//! server's call span, metrics and limits, turns the request into that gRPC call: its
//! body framed as one gRPC message (announced from its `Content-Length` and streamed
//! through, or gathered up to `--max-message-bytes` when the length is not given),
//! `Content-Encoding` as `grpc-encoding`, `Connect-Timeout-Ms` as `grpc-timeout`. The
//! limits then see the message size, inflate a compressed body under the memory budget and
//! count the call against its client, the metrics count it under its method and code.
//! A JSON body stays JSON until the limits have it whole (and inflated): they decode it
//! with `JsonBody::transcode`, in the protobuf JSON mapping (pbjson, as the bulk client
//! and grpcurl speak it), into the protobuf the service reads, charging the request
//! budget what the decoding may take (`decoded_json_bytes`) before it takes it, off the
//! async workers. On the way back the gRPC answer, its message or
//! its `grpc-status`, `grpc-message` and `grpc-status-details-bin`, becomes a Connect
//! answer: the message in the request's encoding, or Connect's JSON error body with the
//! same AIP-193 details (`ErrorInfo`, `BadRequest`) and the HTTP status Connect gives the
//! code.
//!
//! What the door answers itself, before there is a call (so the call metrics do not see
//! it): a path that is not one of its procedures (404, `unimplemented`), another HTTP
//! method (405), a content type other than Connect's unary `application/json` and
//! `application/proto` (415), and a bad `Connect-Protocol-Version`, `Connect-Timeout-Ms`
//! or GET query (400, `invalid_argument`). `Connect-Protocol-Version: 1` is accepted and
//! not required, as Connect servers do by default: curl users do not send it. `GET`
//! (`?encoding=json&message=...`, optionally `base64=1`, `compression`, `connect=v1`) is
//! served for the procedures the contract marks `NO_SIDE_EFFECTS` (`Solve`). Responses are
//! compressed (gzip or zstd, as `Accept-Encoding` allows) only with
//! `--compress-responses`, as gRPC's are. gRPC and gRPC-Web requests pass through
//! untouched, and so does any request neither to a Connect procedure nor in a Connect
//! content type.
//!
//! # Layout
//! This file is the door: the layer, and which requests it takes. Below it, a file a job:
//! - `call`: a request's head read (or refused), and the gRPC request it stands for;
//! - `get`: a GET's query; `procedure`: the RPCs served, and which may be a GET;
//! - `encoding`: content types and response compression;
//! - `framing`: a body as one gRPC message, and the message read back out of the answer;
//! - `json`: the protobuf JSON mapping both ways, and the decoded-size bound the budget charges;
//! - `reply`: the gRPC answer as a Connect answer;
//! - `errors`: a code's Connect name and HTTP status, and the JSON error body;
//! - `refusal`: what the door answers itself, before there is a call.

use std::task::{Context, Poll};

use futures::future::{BoxFuture, Either};
use http::header::{self, HeaderValue};
use tonic::body::Body;
use tower::{Layer, Service};

use call::{ConnectCall, Settings};
use procedure::Procedure;

mod call;
mod encoding;
mod errors;
mod framing;
mod get;
mod json;
mod procedure;
mod refusal;
mod reply;

pub(crate) use json::JsonBody;

/// Turns Connect unary calls into gRPC calls and their answers back; see the module docs.
#[derive(Debug, Clone)]
pub struct ConnectLayer {
    settings: Settings,
}

impl ConnectLayer {
    /// A layer whose request bodies are refused above `max_message_bytes` (the server's
    /// `--max-message-bytes`) and whose responses are compressed when `compress_responses`.
    pub fn new(max_message_bytes: usize, compress_responses: bool) -> Self {
        ConnectLayer { settings: Settings { max_message_bytes, compress_responses } }
    }
}

impl<S> Layer<S> for ConnectLayer {
    type Service = Connect<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Connect { inner, settings: self.settings }
    }
}

/// The service [`ConnectLayer`] makes.
#[derive(Debug, Clone)]
pub struct Connect<S> {
    inner: S,
    settings: Settings,
}

impl<S> Service<http::Request<Body>> for Connect<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, BoxFuture<'static, Result<Self::Response, Self::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if !is_connect(&request) {
            return Either::Left(self.inner.call(request));
        }
        let (parts, body) = request.into_parts();
        let call = match ConnectCall::read(&parts, self.settings) {
            Ok(call) => call,
            Err(refusal) => return Either::Right(Box::pin(futures::future::ready(Ok(refusal.response())))),
        };
        let (request, reply) = call.into_grpc(parts, body);
        let response = self.inner.call(request);
        Either::Right(Box::pin(async move { Ok(reply.answer(response.await?).await) }))
    }
}

/// True for a request the door answers: one to its procedures that is not gRPC (or
/// gRPC-Web), or one in a Connect content type (to say that its path is no procedure).
/// Anything else is left to gRPC, as without the door.
fn is_connect(request: &http::Request<Body>) -> bool {
    let content_type = request.headers().get(header::CONTENT_TYPE).map(HeaderValue::as_bytes);
    if content_type.is_some_and(|ct| ct.starts_with(b"application/grpc")) {
        return false;
    }
    let essence = content_type.map(|ct| ct.split(|&b| b == b';').next().unwrap_or_default().trim_ascii());
    let connect_type = essence.is_some_and(|essence| {
        [
            &b"application/json"[..],
            b"application/proto",
            b"application/connect+json",
            b"application/connect+proto",
        ]
        .iter()
        .any(|known| essence.eq_ignore_ascii_case(known))
    });
    connect_type || Procedure::at(request.uri().path()).is_some()
}

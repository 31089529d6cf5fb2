//! Makes two of tonic's statuses the ones grpc-go and grpc-java send for the same event,
//! so that callers in any language can branch on the code:
//! - the server's own `--request-timeout` ends a call with `DEADLINE_EXCEEDED` (tonic's
//!   timeout answers `CANCELLED`, "Timeout expired");
//! - a request message above `--max-message-bytes` is `RESOURCE_EXHAUSTED` (tonic's
//!   decoder says `OUT_OF_RANGE`; grpc-go and grpc-java say `RESOURCE_EXHAUSTED`).
//!
//! The layer sits between tonic's transport and the services; a call whose deadline
//! passes is dropped, so the solver skips the work it had not started.

use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use tonic::body::Body;
use tonic::{Code, Status};

use crate::convert::over_limit_is_exhausted;
use tower::{Layer, Service};

/// Wraps every service with the request timeout and the status rewrite.
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

impl<S, Req> Service<Req> for GrpcCodes<S>
where
    S: Service<Req, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let response = self.inner.call(request);
        let timeout = self.request_timeout;
        Box::pin(async move {
            let response = match timeout {
                None => response.await?,
                Some(timeout) => match tokio::time::timeout(timeout, response).await {
                    Ok(response) => response?,
                    Err(_) => {
                        let message = format!("the server's request timeout of {timeout:?} expired");
                        return Ok(Status::deadline_exceeded(message).into_http());
                    }
                },
            };
            Ok(resource_exhausted_for_large_messages(response))
        })
    }
}

/// Rewrites tonic's `OUT_OF_RANGE` for an over-limit request into `RESOURCE_EXHAUSTED`,
/// keeping its message. Only a trailers-only response (a unary call that failed before
/// its handler ran) carries it in the headers; streaming calls see the decode error in
/// their request stream, where the service maps it with [`over_limit_is_exhausted`].
fn resource_exhausted_for_large_messages(mut response: http::Response<Body>) -> http::Response<Body> {
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    let rewritten = over_limit_is_exhausted(status);
    if rewritten.code() == Code::ResourceExhausted {
        // add_header only fails on a message that cannot be a header; ours came from one.
        let _ = rewritten.add_header(response.headers_mut());
    }
    response
}

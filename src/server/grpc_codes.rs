//! Makes two of tonic's statuses the ones grpc-go and grpc-java send for the same event,
//! so that callers in any language can branch on the code:
//! - the server's own `--request-timeout`, or the call's `grpc-timeout` when shorter, ends
//!   a call with `DEADLINE_EXCEEDED` (tonic's timeout answers `CANCELLED`, "Timeout
//!   expired"). tonic's own timeout sits outside every layer, where a Connect call (which
//!   carries `Connect-Timeout-Ms`) has no `grpc-timeout` yet: the Connect door's
//!   translation adds one, and it is enforced here;
//! - a request message above `--max-message-bytes` is `RESOURCE_EXHAUSTED` (tonic's
//!   decoder says `OUT_OF_RANGE`; grpc-go and grpc-java say `RESOURCE_EXHAUSTED`);
//! - a gRPC-Web request body tonic-web cannot read (`grpc-web-text` that is not base64) is
//!   `INVALID_ARGUMENT`, the client's fault: tonic-web says `INTERNAL`, which would count
//!   as a server error and let any client fire the server-error alert.
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

impl<S, B> Service<http::Request<B>> for GrpcCodes<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let client = grpc_timeout(request.headers());
        let response = self.inner.call(request);
        let timeout = match (self.request_timeout, client) {
            (Some(server), Some(client)) if client < server => Some(Deadline::Client(client)),
            (Some(server), _) => Some(Deadline::Server(server)),
            (None, client) => client.map(Deadline::Client),
        };
        Box::pin(async move {
            let response = match timeout {
                None => response.await?,
                Some(deadline) => match tokio::time::timeout(deadline.duration(), response).await {
                    Ok(response) => response?,
                    Err(_) => return Ok(Status::deadline_exceeded(deadline.expired()).into_http()),
                },
            };
            Ok(client_faults(response))
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

/// A call's `grpc-timeout` (gRPC's HTTP/2 protocol: at most 8 digits and a unit); `None`
/// when absent or malformed, as tonic reads it.
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.as_bytes();
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

/// Rewrites the statuses of a request the client got wrong: tonic's `OUT_OF_RANGE` for an
/// over-limit message into `RESOURCE_EXHAUSTED`, and tonic-web's `INTERNAL` for a body it
/// cannot read into `INVALID_ARGUMENT`, keeping their messages. Only a trailers-only
/// response (a unary call that failed before its handler ran) carries them in the
/// headers; streaming calls see the decode error in their request stream, where the
/// service maps it with [`over_limit_is_exhausted`].
fn client_faults(mut response: http::Response<Body>) -> http::Response<Body> {
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    let rewritten = match over_limit_is_exhausted(status) {
        status if status.code() == Code::Internal && status.message().starts_with(TONIC_WEB_DECODE) => {
            Status::invalid_argument(format!(
                "malformed gRPC-Web request: {}",
                &status.message()[TONIC_WEB_DECODE.len()..]
            ))
        }
        status => status,
    };
    if matches!(rewritten.code(), Code::ResourceExhausted | Code::InvalidArgument) {
        // add_header only fails on a message that cannot be a header; ours came from one.
        let _ = rewritten.add_header(response.headers_mut());
    }
    response
}

/// What tonic-web's errors start with; in a request's status, every one is about a body
/// it could not read (its response errors never reach this layer).
const TONIC_WEB_DECODE: &str = "tonic-web: ";

#[cfg(test)]
mod tests {
    use super::*;

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

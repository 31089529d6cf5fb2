//! A Connect call read from its request head, and the gRPC request it stands for: the
//! body framed as one gRPC message, `Content-Encoding` as `grpc-encoding`,
//! `Connect-Timeout-Ms` as `grpc-timeout`, a JSON message marked for the limits to decode.

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Method;
use http_body::Body as _;
use http_body_util::Full;
use tonic::body::Body;

use super::encoding::{Compression, Encoding};
use super::errors::GRPC_ACCEPT_ENCODING;
use super::framing::Framed;
use super::get::GetQuery;
use super::json::JsonBody;
use super::procedure::Procedure;
use super::refusal::Refusal;
use super::reply::Reply;
use crate::echo;

const CONNECT_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("connect-protocol-version");
const CONNECT_TIMEOUT_MS: HeaderName = HeaderName::from_static("connect-timeout-ms");
const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// What the door is set to: the message limit and whether responses are compressed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    pub(super) max_message_bytes: usize,
    pub(super) compress_responses: bool,
}

/// A Connect call read from its request head: what the gRPC call needs and how to answer.
pub(super) struct ConnectCall {
    procedure: Procedure,
    encoding: Encoding,
    /// The body's compression (`Content-Encoding`, or a GET's `compression`), unless none.
    compression: Option<HeaderValue>,
    timeout: Option<Duration>,
    /// A GET's message, from its query; a POST's comes in its body.
    message: Option<Bytes>,
    /// `--max-message-bytes`.
    limit: usize,
    reply: Reply,
}

impl ConnectCall {
    /// Reads a Connect unary request's head, or says why it is not one the door serves.
    pub(super) fn read(parts: &http::request::Parts, settings: Settings) -> Result<ConnectCall, Refusal> {
        let path = parts.uri.path();
        let procedure = Procedure::at(path).ok_or_else(|| Refusal::not_found(path))?;
        let headers = &parts.headers;
        let timeout = connect_timeout(headers)?;
        let (encoding, compression, message) = match parts.method {
            Method::POST => {
                check_protocol_version(headers.get(CONNECT_PROTOCOL_VERSION).map(HeaderValue::as_bytes))?;
                let content_type = headers.get(header::CONTENT_TYPE);
                let encoding = content_type
                    .and_then(|ct| ct.to_str().ok())
                    .and_then(Encoding::of_content_type)
                    .ok_or_else(|| Refusal::media_type(content_type))?;
                let compression =
                    headers.get(header::CONTENT_ENCODING).filter(|e| e.as_bytes() != b"identity");
                (encoding, compression.cloned(), None)
            }
            Method::GET if procedure.allows_get() => {
                let query = GetQuery::parse(parts.uri.query().unwrap_or_default())?;
                (query.encoding, query.compression, Some(query.message))
            }
            _ => return Err(Refusal::method(procedure, &parts.method)),
        };
        let response_compression =
            settings.compress_responses.then(|| Compression::accepted(headers)).flatten();
        let reply = Reply { procedure, encoding, compression: response_compression };
        let limit = settings.max_message_bytes;
        Ok(ConnectCall { procedure, encoding, compression, timeout, message, limit, reply })
    }

    /// The gRPC request this call stands for, and what turns its answer back.
    pub(super) fn into_grpc(
        self,
        mut parts: http::request::Parts,
        body: Body,
    ) -> (http::Request<Body>, Reply) {
        let framed = Framed { inner: body, compressed: self.compression.is_some(), limit: self.limit };
        let body = match self.message {
            Some(message) => {
                let len = message.len();
                Framed { inner: Body::new(Full::new(message)), ..framed }.announced(len)
            }
            None => match framed.inner.size_hint().exact() {
                Some(len) => framed.announced(usize::try_from(len).unwrap_or(usize::MAX)),
                None => framed.gathered(),
            },
        };
        parts.method = Method::POST;
        let headers = &mut parts.headers;
        for name in [
            header::CONTENT_TYPE,
            header::CONTENT_LENGTH,
            header::CONTENT_ENCODING,
            header::ACCEPT_ENCODING,
            CONNECT_PROTOCOL_VERSION,
            CONNECT_TIMEOUT_MS,
            GRPC_ENCODING,
            GRPC_ACCEPT_ENCODING,
            GRPC_TIMEOUT,
        ] {
            headers.remove(name);
        }
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
        if let Some(compression) = self.compression {
            headers.insert(GRPC_ENCODING, compression);
        }
        if let Some(timeout) = self.timeout {
            headers.insert(GRPC_TIMEOUT, grpc_timeout(timeout));
        }
        if self.encoding == Encoding::Json {
            parts.extensions.insert(JsonBody(self.procedure));
        }
        (http::Request::from_parts(parts, Body::new(body)), self.reply)
    }
}

/// `Connect-Timeout-Ms`: at most ten digits, as Connect allows.
fn connect_timeout(headers: &HeaderMap) -> Result<Option<Duration>, Refusal> {
    let Some(value) = headers.get(CONNECT_TIMEOUT_MS) else { return Ok(None) };
    let digits = value.as_bytes();
    match (1..=10).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) {
        true => {
            Ok(Some(Duration::from_millis(std::str::from_utf8(digits).unwrap_or("0").parse().unwrap_or(0))))
        }
        false => Err(Refusal::bad_request(format!(
            "connect-timeout-ms must be a number of milliseconds of at most 10 digits: got {}",
            echo::quoted(&String::from_utf8_lossy(digits))
        ))),
    }
}

/// A `grpc-timeout` value for `timeout`: milliseconds while they fit gRPC's eight digits,
/// then whole seconds (rounded up).
fn grpc_timeout(timeout: Duration) -> HeaderValue {
    let millis = timeout.as_millis();
    let value = match millis < 100_000_000 {
        true => format!("{millis}m"),
        false => format!("{}S", timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0)),
    };
    HeaderValue::try_from(value).unwrap_or(HeaderValue::from_static("99999999S"))
}

/// `Connect-Protocol-Version` (or a GET's `connect`): optional, and `1` when present.
fn check_protocol_version(version: Option<&[u8]>) -> Result<(), Refusal> {
    match version {
        None | Some(b"1") => Ok(()),
        Some(other) => Err(Refusal::bad_request(format!(
            "connect-protocol-version must be \"1\": got {}",
            echo::quoted(&String::from_utf8_lossy(other))
        ))),
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use tonic::Code;

    use super::*;

    #[test]
    fn a_long_path_or_header_is_quoted_cut() {
        let path = format!("/{}", "p".repeat(10_000));
        assert_eq!(
            Refusal::not_found(&path).message,
            format!(
                "no procedure at /{}…: Connect serves /gamesolver.v1.GameSolverService/Solve and \
             /gamesolver.v1.GameSolverService/SolveBatch",
                "p".repeat(99)
            )
        );
        let version = "2".repeat(10_000);
        assert_eq!(
            check_protocol_version(Some(version.as_bytes())).unwrap_err().message,
            format!("connect-protocol-version must be \"1\": got \"{}…\"", "2".repeat(100))
        );
    }

    #[test]
    fn timeouts_translate_to_grpc() {
        assert_eq!(grpc_timeout(Duration::from_millis(1500)), "1500m");
        assert_eq!(grpc_timeout(Duration::from_millis(9_999_999_999)), "10000000S");
        let mut headers = HeaderMap::new();
        headers.insert(CONNECT_TIMEOUT_MS, HeaderValue::from_static("250"));
        assert_eq!(connect_timeout(&headers).unwrap(), Some(Duration::from_millis(250)));
        for bad in ["", "-1", "1.5", "12345678901"] {
            headers.insert(CONNECT_TIMEOUT_MS, HeaderValue::from_static(bad));
            let refusal = connect_timeout(&headers).unwrap_err();
            assert_eq!(
                (refusal.status, refusal.code),
                (StatusCode::BAD_REQUEST, Code::InvalidArgument),
                "{bad}"
            );
        }
    }
}

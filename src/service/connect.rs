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

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use futures::future::{BoxFuture, Either};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use http_body::{Body as _, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use prost::Message;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::body::Body;
use tonic::{Code, Status};
use tower::{Layer, Service};

use crate::convert;
use crate::echo;
use crate::pb;
use crate::pb::game_solver_service_server::SERVICE_NAME;

/// Length of a gRPC message header: the compressed flag and a big-endian `u32` length.
const GRPC_HEADER: usize = 5;

const CONNECT_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("connect-protocol-version");
const CONNECT_TIMEOUT_MS: HeaderName = HeaderName::from_static("connect-timeout-ms");
const GRPC_ENCODING: HeaderName = HeaderName::from_static("grpc-encoding");
const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");
const ACCEPT_POST: HeaderName = HeaderName::from_static("accept-post");

/// The unary RPCs the door serves, each a Connect procedure at its gRPC path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Procedure {
    Solve,
    SolveBatch,
}

impl Procedure {
    const ALL: [Procedure; 2] = [Procedure::Solve, Procedure::SolveBatch];

    /// The RPC's name in the contract.
    fn name(self) -> &'static str {
        match self {
            Procedure::Solve => "Solve",
            Procedure::SolveBatch => "SolveBatch",
        }
    }

    /// The procedure at an HTTP path (`/gamesolver.v1.GameSolverService/Solve`).
    fn at(path: &str) -> Option<Procedure> {
        let method = path.strip_prefix('/')?.strip_prefix(SERVICE_NAME)?.strip_prefix('/')?;
        Procedure::ALL.into_iter().find(|procedure| procedure.name() == method)
    }

    /// True when the contract marks the RPC `NO_SIDE_EFFECTS`, which lets Connect
    /// clients send it as a GET.
    fn allows_get(self) -> bool {
        static IDEMPOTENT: OnceLock<Vec<String>> = OnceLock::new();
        IDEMPOTENT
            .get_or_init(|| side_effect_free_methods(pb::FILE_DESCRIPTOR_SET))
            .iter()
            .any(|m| m == self.name())
    }

    /// A protobuf response message as JSON.
    fn response_to_json(self, proto: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Procedure::Solve => proto_to_json::<pb::SolveResponse>(proto),
            Procedure::SolveBatch => proto_to_json::<pb::SolveBatchResponse>(proto),
        }
    }
}

/// The methods of `SERVICE_NAME` that an encoded descriptor set marks `NO_SIDE_EFFECTS`.
fn side_effect_free_methods(descriptor_set: &[u8]) -> Vec<String> {
    use prost_types::method_options::IdempotencyLevel;
    let Ok(set) = prost_types::FileDescriptorSet::decode(descriptor_set) else { return Vec::new() };
    set.file
        .iter()
        .flat_map(|file| file.service.iter().map(move |service| (file.package(), service)))
        .filter(|(package, service)| format!("{package}.{}", service.name()) == SERVICE_NAME)
        .flat_map(|(_, service)| &service.method)
        .filter(|method| {
            method.options.as_ref().is_some_and(|o| o.idempotency_level() == IdempotencyLevel::NoSideEffects)
        })
        .map(|method| method.name().to_owned())
        .collect()
}

/// Decodes a JSON request in the protobuf JSON mapping. Only a body that fails is read a
/// second time, for the path of the field to blame.
fn json_message<T: DeserializeOwned>(json: &[u8]) -> Result<T, Status> {
    serde_json::from_slice::<T>(json).map_err(|err| {
        let reason = json_reason::<T>(json, err);
        // serde quotes an unknown field or a string it did not expect whole.
        convert::invalid_json(format!("invalid JSON request: {}", echo::message(&reason)))
    })
}

/// Why `json` is not a `T`, with the path of the field at fault in front.
fn json_reason<T: DeserializeOwned>(json: &[u8], err: serde_json::Error) -> String {
    if json.trim_ascii().is_empty() {
        return "the body is empty; send one JSON object".to_owned();
    }
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let err = match serde_path_to_error::deserialize::<_, T>(&mut deserializer) {
        Ok(_) => return deserializer.end().err().unwrap_or(err).to_string(),
        // Where a cut-off body stops says nothing about what was cut.
        Err(err) if err.inner().is_eof() => return err.into_inner().to_string(),
        Err(err) => err,
    };
    // `?` stands for a key still being read: the path up to it is what helps.
    let path = err.path().to_string();
    let path = path.split_once(".?").map_or(path.as_str(), |(known, _)| known);
    match path {
        "." | "" | "?" => err.inner().to_string(),
        _ => format!("{path}: {}", err.inner()),
    }
}

/// Decodes a protobuf response message and writes it in the protobuf JSON mapping.
fn proto_to_json<T: Message + Default + Serialize>(proto: &[u8]) -> Result<Vec<u8>, String> {
    let message = T::decode(proto).map_err(|err| format!("the response does not decode: {err}"))?;
    serde_json::to_vec(&message).map_err(|err| format!("the response does not encode as JSON: {err}"))
}

/// How a Connect message is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Json,
    Proto,
}

impl Encoding {
    /// The encoding of a unary request's `Content-Type` (Connect's unary types only).
    fn of_content_type(value: &str) -> Option<Encoding> {
        let (essence, parameters) = value.split_once(';').unwrap_or((value, ""));
        match essence.trim().to_ascii_lowercase().as_str() {
            "application/json" => {
                let charset = parameters.trim().to_ascii_lowercase().replace(' ', "");
                matches!(charset.as_str(), "" | "charset=utf-8" | "charset=utf8").then_some(Encoding::Json)
            }
            "application/proto" if parameters.trim().is_empty() => Some(Encoding::Proto),
            _ => None,
        }
    }

    /// The encoding a GET names in its `encoding` parameter.
    fn of_query(value: &str) -> Option<Encoding> {
        match value {
            "json" => Some(Encoding::Json),
            "proto" => Some(Encoding::Proto),
            _ => None,
        }
    }

    fn content_type(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Encoding::Json => "application/json",
            Encoding::Proto => "application/proto",
        })
    }
}

/// A compression for a response body, as `Accept-Encoding` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    Gzip,
    Zstd,
}

impl Compression {
    /// The first compression the client accepts that the server offers, in the client's
    /// order; `q=0` refuses one.
    fn accepted(headers: &HeaderMap) -> Option<Compression> {
        let accepted = headers.get_all(header::ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok());
        accepted.flat_map(|value| value.split(',')).find_map(|item| {
            let mut parts = item.split(';').map(str::trim);
            let name = parts.next()?.to_ascii_lowercase();
            let refused =
                parts.any(|p| p.strip_prefix("q=").and_then(|q| q.parse::<f32>().ok()) == Some(0.0));
            match (name.as_str(), refused) {
                ("gzip", false) => Some(Compression::Gzip),
                ("zstd", false) => Some(Compression::Zstd),
                _ => None,
            }
        })
    }

    fn name(self) -> HeaderValue {
        HeaderValue::from_static(match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        })
    }

    fn compress(self, body: &[u8]) -> std::io::Result<Vec<u8>> {
        use std::io::Write;
        match self {
            Compression::Gzip => {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(body)?;
                encoder.finish()
            }
            Compression::Zstd => zstd::bulk::compress(body, zstd::DEFAULT_COMPRESSION_LEVEL),
        }
    }
}

/// Turns Connect unary calls into gRPC calls and their answers back; see the module docs.
#[derive(Debug, Clone)]
pub struct ConnectLayer {
    settings: Settings,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    max_message_bytes: usize,
    compress_responses: bool,
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

/// A Connect call read from its request head: what the gRPC call needs and how to answer.
struct ConnectCall {
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
    fn read(parts: &http::request::Parts, settings: Settings) -> Result<ConnectCall, Refusal> {
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
    fn into_grpc(self, mut parts: http::request::Parts, body: Body) -> (http::Request<Body>, Reply) {
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

/// The query of a Connect GET: `encoding`, `message`, and optionally `base64=1`,
/// `compression` and `connect=v1`.
#[derive(Debug)]
struct GetQuery {
    encoding: Encoding,
    compression: Option<HeaderValue>,
    message: Bytes,
}

impl GetQuery {
    fn parse(query: &str) -> Result<GetQuery, Refusal> {
        let (mut encoding, mut message, mut base64, mut compression, mut version) =
            (None, None, false, None, None);
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = query_decode(value);
            match key {
                "encoding" => encoding = Some(value),
                "message" => message = Some(value),
                "base64" => base64 = value == b"1",
                "compression" => compression = Some(value),
                "connect" => version = Some(value),
                _ => {}
            }
        }
        let bad = Refusal::bad_request;
        if let Some(version) = version {
            if version != b"v1" {
                return Err(bad(format!(
                    "connect must be \"v1\": got {}",
                    echo::quoted(&String::from_utf8_lossy(&version))
                )));
            }
        }
        let encoding = encoding
            .as_deref()
            .and_then(|e| std::str::from_utf8(e).ok())
            .and_then(Encoding::of_query)
            .ok_or_else(|| bad("a Connect GET needs encoding=json or encoding=proto".to_owned()))?;
        let message = message.ok_or_else(|| bad("a Connect GET needs its message parameter".to_owned()))?;
        let message = match base64 {
            true => {
                let trimmed =
                    message.strip_suffix(b"==").or_else(|| message.strip_suffix(b"=")).unwrap_or(&message);
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(trimmed)
                    .map_err(|err| bad(format!("message is not URL-safe base64: {err}")))?
            }
            false => message,
        };
        let compression = compression
            .filter(|c| c != b"identity")
            .map(|c| HeaderValue::from_bytes(&c).map_err(|_| bad("compression is not a token".to_owned())))
            .transpose()?;
        Ok(GetQuery { encoding, compression, message: Bytes::from(message) })
    }
}

/// A query value, percent-decoded, with `+` as a space (as browsers' `URLSearchParams`
/// and Connect's clients read it).
fn query_decode(value: &str) -> Vec<u8> {
    let spaced = value.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced).collect()
}

/// The parts of a [`FramedBody`] before its state is known.
struct Framed {
    inner: Body,
    compressed: bool,
    /// `--max-message-bytes`: a longer body is announced and never read.
    limit: usize,
}

impl Framed {
    /// A body of `len` bytes: the header goes first, then the bytes as they come.
    fn announced(self, len: usize) -> FramedBody {
        FramedBody { framed: self, state: FrameState::Announce { len } }
    }

    /// A body of unknown length: gathered up to the limit, then sent whole.
    fn gathered(self) -> FramedBody {
        FramedBody { framed: self, state: FrameState::Gathering(BytesMut::new()) }
    }
}

/// A Connect request body as one gRPC message; see the module docs.
struct FramedBody {
    framed: Framed,
    state: FrameState,
}

enum FrameState {
    Announce { len: usize },
    Passing,
    Gathering(BytesMut),
    Done,
}

impl FramedBody {
    fn header(&self, len: usize) -> [u8; GRPC_HEADER] {
        let len = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
        [u8::from(self.framed.compressed), len[0], len[1], len[2], len[3]]
    }
}

impl http_body::Body for FramedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let limit = this.framed.limit;
        loop {
            match &mut this.state {
                FrameState::Announce { len } => {
                    let len = *len;
                    // A body above the limit is never read: the limits and tonic refuse the
                    // message from its header, as they do a gRPC one.
                    this.state = match len > limit {
                        true => FrameState::Done,
                        false => FrameState::Passing,
                    };
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::copy_from_slice(&this.header(len))))));
                }
                FrameState::Passing => {
                    return match std::task::ready!(Pin::new(&mut this.framed.inner).poll_frame(cx)) {
                        Some(Ok(frame)) => match frame.into_data() {
                            Ok(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
                            // HTTP trailers on a request carry nothing for a unary call.
                            Err(_) => continue,
                        },
                        Some(Err(status)) => Poll::Ready(Some(Err(status))),
                        None => {
                            this.state = FrameState::Done;
                            Poll::Ready(None)
                        }
                    };
                }
                FrameState::Gathering(bytes) => {
                    let done = match std::task::ready!(Pin::new(&mut this.framed.inner).poll_frame(cx)) {
                        Some(Ok(frame)) => {
                            if let Ok(mut data) = frame.into_data() {
                                bytes.put(&mut data);
                            }
                            bytes.len() > limit
                        }
                        Some(Err(status)) => return Poll::Ready(Some(Err(status))),
                        None => true,
                    };
                    if !done {
                        continue;
                    }
                    let bytes = std::mem::take(bytes);
                    let header = this.header(bytes.len());
                    this.state = FrameState::Done;
                    // Above the limit only the header goes on, and the limits refuse it.
                    let message = match bytes.len() > limit {
                        true => Bytes::new(),
                        false => bytes.freeze(),
                    };
                    let mut frame = BytesMut::with_capacity(GRPC_HEADER + message.len());
                    frame.put_slice(&header);
                    frame.put(message);
                    return Poll::Ready(Some(Ok(Frame::data(frame.freeze()))));
                }
                FrameState::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, FrameState::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.state {
            FrameState::Announce { len } if *len <= self.framed.limit => {
                SizeHint::with_exact((GRPC_HEADER + len) as u64)
            }
            _ => SizeHint::default(),
        }
    }
}

/// What turns the gRPC answer of a Connect call back into a Connect answer.
struct Reply {
    procedure: Procedure,
    encoding: Encoding,
    compression: Option<Compression>,
}

impl Reply {
    /// The Connect response for `response`, read whole (a unary answer is one message).
    async fn answer(self, response: http::Response<Body>) -> http::Response<Body> {
        let (parts, body) = response.into_parts();
        let collected = match body.collect().await {
            Ok(collected) => collected,
            Err(status) => return error_response(&status),
        };
        let status = Status::from_header_map(&parts.headers)
            .or_else(|| collected.trailers().and_then(Status::from_header_map))
            .unwrap_or_else(|| Status::unknown("the call ended without a status"));
        if status.code() != Code::Ok {
            return error_response(&status);
        }
        let data = collected.to_bytes();
        let message = match grpc_message(&data) {
            Ok(message) => message,
            Err(what) => return error_response(&Status::internal(what)),
        };
        let body = match self.encoding {
            Encoding::Proto => message.to_vec(),
            Encoding::Json => match self.procedure.response_to_json(message) {
                Ok(json) => json,
                Err(what) => return error_response(&Status::internal(what)),
            },
        };
        let mut response = http::Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, self.encoding.content_type());
        let body = match self.compression.map(|c| (c, c.compress(&body))) {
            Some((compression, Ok(compressed))) => {
                response = response.header(header::CONTENT_ENCODING, compression.name());
                compressed
            }
            _ => body,
        };
        response
            .body(Body::new(Full::new(Bytes::from(body))))
            .unwrap_or_else(|_| error_response(&Status::internal("the response could not be built")))
    }
}

/// The one uncompressed message of a unary gRPC response body.
fn grpc_message(data: &Bytes) -> Result<&[u8], String> {
    let Some(header) = data.get(..GRPC_HEADER) else {
        return Err("the call answered OK without a message".to_owned());
    };
    if header[0] != 0 {
        return Err("the answer came compressed, which the door did not ask for".to_owned());
    }
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    data.get(GRPC_HEADER..GRPC_HEADER + len).ok_or_else(|| "the answer's message is cut short".to_owned())
}

/// Connect's name of a gRPC code.
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "canceled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// The HTTP status Connect gives a code (its protocol's table).
fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => StatusCode::BAD_REQUEST,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
    }
}

/// Connect's JSON error body.
#[derive(Debug, Serialize)]
struct ErrorBody<'a> {
    code: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    message: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    details: Vec<ErrorDetail>,
}

/// One detail: the message's type name, its protobuf bytes (standard base64, unpadded,
/// as Connect writes them) and, for the types this server sends, its JSON form.
#[derive(Debug, Serialize)]
struct ErrorDetail {
    #[serde(rename = "type")]
    type_name: String,
    value: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    debug: Option<DebugJson>,
}

/// The protobuf JSON form of the detail types this server sends, fields in their order.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum DebugJson {
    ErrorInfo {
        reason: String,
        domain: String,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        metadata: BTreeMap<String, String>,
    },
    BadRequest {
        #[serde(rename = "fieldViolations")]
        field_violations: Vec<FieldViolationJson>,
    },
}

#[derive(Debug, Serialize)]
struct FieldViolationJson {
    field: String,
    description: String,
}

/// The details of a status, from its `google.rpc.Status` bytes.
fn error_details(status: &Status) -> Vec<ErrorDetail> {
    let Ok(rpc_status) = tonic_types::pb::Status::decode(status.details()) else { return Vec::new() };
    rpc_status
        .details
        .into_iter()
        .map(|any| {
            let type_name = any.type_url.rsplit('/').next().unwrap_or_default().to_owned();
            let debug = debug_json(&type_name, &any.value);
            let value = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&any.value);
            ErrorDetail { type_name, value, debug }
        })
        .collect()
}

/// The JSON form of a detail of a type this server sends (`ErrorInfo`, `BadRequest`),
/// for people reading the error; `None` for others.
fn debug_json(type_name: &str, value: &[u8]) -> Option<DebugJson> {
    match type_name {
        "google.rpc.ErrorInfo" => {
            let info = tonic_types::pb::ErrorInfo::decode(value).ok()?;
            let metadata = info.metadata.into_iter().collect();
            Some(DebugJson::ErrorInfo { reason: info.reason, domain: info.domain, metadata })
        }
        "google.rpc.BadRequest" => {
            let request = tonic_types::pb::BadRequest::decode(value).ok()?;
            let field_violations = request
                .field_violations
                .into_iter()
                .map(|v| FieldViolationJson { field: v.field, description: v.description })
                .collect();
            Some(DebugJson::BadRequest { field_violations })
        }
        _ => None,
    }
}

/// The Connect error response for a gRPC status.
fn error_response(status: &Status) -> http::Response<Body> {
    let body = ErrorBody {
        code: code_name(status.code()),
        message: status.message(),
        details: error_details(status),
    };
    let mut response = json_response(http_status(status.code()), &body);
    // The encodings a request may use, when it used another.
    if let Some(accepted) = status.metadata().get(GRPC_ACCEPT_ENCODING.as_str()) {
        if let Ok(value) = HeaderValue::from_bytes(accepted.as_bytes()) {
            response.headers_mut().insert(header::ACCEPT_ENCODING, value);
        }
    }
    response
}

fn json_response(status: StatusCode, body: &ErrorBody<'_>) -> http::Response<Body> {
    // An ErrorBody is strings and JSON values: it always serializes.
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = http::Response::new(Body::new(Full::new(Bytes::from(bytes))));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, Encoding::Json.content_type());
    response
}

/// A request the door answers itself, before there is a call.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    code: Code,
    message: String,
    header: Option<(HeaderName, HeaderValue)>,
}

impl Refusal {
    fn not_found(path: &str) -> Refusal {
        let shown = echo::bounded(path);
        let streaming = ["SolveStream", "SolveBatchStream"].iter().any(|m| {
            path.strip_prefix('/').and_then(|p| p.strip_prefix(SERVICE_NAME)) == Some(&format!("/{m}"))
        });
        let served = Procedure::ALL.map(|p| format!("/{SERVICE_NAME}/{}", p.name())).join(" and ");
        let message = match streaming {
            true => format!("{shown} is a streaming RPC: call it over gRPC; Connect serves {served}"),
            false => format!("no procedure at {shown}: Connect serves {served}"),
        };
        Refusal { status: StatusCode::NOT_FOUND, code: Code::Unimplemented, message, header: None }
    }

    fn method(procedure: Procedure, method: &Method) -> Refusal {
        let allowed = match procedure.allows_get() {
            true => "GET, POST",
            false => "POST",
        };
        Refusal {
            status: StatusCode::METHOD_NOT_ALLOWED,
            code: Code::Unimplemented,
            message: format!("{} takes {allowed}, not {method}", procedure.name()),
            header: Some((header::ALLOW, HeaderValue::from_static(allowed))),
        }
    }

    fn media_type(content_type: Option<&HeaderValue>) -> Refusal {
        let given = content_type.map_or_else(
            || "none".to_owned(),
            |ct| echo::bounded(&String::from_utf8_lossy(ct.as_bytes())).into_owned(),
        );
        Refusal {
            status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
            code: Code::InvalidArgument,
            message: format!(
                "content-type {given} is not a Connect unary request: send Content-Type: application/json (or application/proto)"
            ),
            header: Some((ACCEPT_POST, HeaderValue::from_static("application/json, application/proto"))),
        }
    }

    fn bad_request(message: String) -> Refusal {
        Refusal { status: StatusCode::BAD_REQUEST, code: Code::InvalidArgument, message, header: None }
    }

    fn response(self) -> http::Response<Body> {
        let body = ErrorBody { code: code_name(self.code), message: &self.message, details: Vec::new() };
        let mut response = json_response(self.status, &body);
        if let Some((name, value)) = self.header {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

/// A translated request whose message is JSON: set only by [`ConnectLayer`], so a peer
/// cannot ask for it, and taken by the limits, which decode the message into the protobuf
/// the service reads ([`JsonBody::transcode`]) once it is whole and inflated, charging
/// the request budget what the decoding takes before it takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct JsonBody(Procedure);

impl JsonBody {
    /// The mark of a Connect JSON request, taken off it; `None` for any other request.
    pub(crate) fn take(request: &mut http::Request<Body>) -> Option<JsonBody> {
        request.extensions_mut().remove::<JsonBody>()
    }

    /// The JSON message `json` as the uncompressed gRPC frame of its protobuf, for the
    /// service. `charge(held, decoded)` is asked for the bytes held at each step before
    /// they are taken, with `decoded` what the message may hold decoded
    /// ([`decoded_json_bytes`]): the JSON and that, before a byte of it is decoded; then,
    /// the JSON dropped, that and the protobuf frame, before it is written. A refusal ends
    /// it there. A protobuf message above `max` bytes is refused as tonic refuses one
    /// from a gRPC client. This is CPU work for a large body (60 MiB of JSON takes a
    /// second on one core): call it off the async workers.
    pub(crate) fn transcode(
        self,
        json: Bytes,
        max: usize,
        charge: &mut dyn FnMut(usize, usize) -> Result<(), Status>,
    ) -> Result<Vec<u8>, Status> {
        let decoded = decoded_json_bytes(&json);
        charge(json.len() + decoded, decoded)?;
        match self.0 {
            Procedure::Solve => json_to_frame::<pb::SolveRequest>(json, decoded, max, charge),
            Procedure::SolveBatch => json_to_frame::<pb::SolveBatchRequest>(json, decoded, max, charge),
        }
    }
}

/// Decodes a JSON request, drops the JSON, and encodes the message as one uncompressed
/// gRPC frame, charging the frame (beside the `decoded` message) before it is written.
fn json_to_frame<T: Message + DeserializeOwned>(
    json: Bytes,
    decoded: usize,
    max: usize,
    charge: &mut dyn FnMut(usize, usize) -> Result<(), Status>,
) -> Result<Vec<u8>, Status> {
    let message = json_message::<T>(&json)?;
    // The message owns its strings: the JSON is no longer needed.
    drop(json);
    let len = message.encoded_len();
    if len > max {
        // What tonic says of a protobuf message above the limit, as the limits rewrite it.
        return Err(Status::resource_exhausted(format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: {max} bytes"
        )));
    }
    charge(decoded + GRPC_HEADER + len, decoded)?;
    let mut framed = Vec::with_capacity(GRPC_HEADER + len);
    framed.push(0);
    // Within `max`, which is below 4 GiB (a gRPC header's length is 32 bits).
    framed.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    message
        .encode(&mut framed)
        .map_err(|err| Status::internal(format!("cannot encode the request: {err}")))?;
    Ok(framed)
}

/// What a JSON request in the protobuf JSON mapping may hold once decoded, in bytes, read
/// from its text without decoding it: an upper bound of what serde and pbjson allocate
/// for it, so that it can be charged to the request budget before they do. Each string
/// its length (twice when it has escapes, which serde_json unescapes through a scratch
/// buffer), each object in an array a problem's struct in a vector that grows by
/// doubling, each other value in an array 8 bytes in one (a stone or a pile), and each
/// array the room an integer list starts with. The objects outside arrays (the request,
/// a problem's game) sit inside their parent's struct. The text is not validated: the
/// decoding that follows stops at the first fault, having allocated no more than its
/// part of the bound. Nesting deeper than serde_json's limit ends the count there.
pub(crate) fn decoded_json_bytes(json: &[u8]) -> usize {
    /// A problem's slot in its batch's vector: the struct, twice for the doubling.
    const OBJECT_IN_ARRAY: usize = 2 * std::mem::size_of::<pb::Problem>();
    /// An integer's slot in its list, twice for the doubling.
    const VALUE_IN_ARRAY: usize = 2 * std::mem::size_of::<u64>();
    /// The room an integer list starts with (`json_number::NumberVec`).
    const ARRAY: usize = 16 * std::mem::size_of::<u64>();
    /// serde_json refuses deeper nesting (its recursion limit is 128).
    const DEPTH: usize = 256;
    let mut arrays = [false; DEPTH];
    let mut depth = 0;
    let mut bytes = 0usize;
    let mut at = 0;
    while let Some(&byte) = json.get(at) {
        let in_array = depth > 0 && arrays[depth - 1];
        at += 1;
        match byte {
            b'"' => {
                let start = at;
                let mut escaped = false;
                let mut end = json.len();
                while let Some(&b) = json.get(at) {
                    at += 1;
                    match b {
                        b'\\' => {
                            escaped = true;
                            at += 1;
                        }
                        b'"' => {
                            end = at - 1;
                            break;
                        }
                        _ => {}
                    }
                }
                let len = end.saturating_sub(start);
                bytes += if escaped { 2 * len } else { len };
                bytes += if in_array { VALUE_IN_ARRAY } else { 0 };
            }
            b'{' | b'[' => {
                if depth == DEPTH {
                    break;
                }
                arrays[depth] = byte == b'[';
                depth += 1;
                bytes += match (byte, in_array) {
                    (b'{', true) => OBJECT_IN_ARRAY,
                    (b'{', false) => 0,
                    (_, true) => VALUE_IN_ARRAY + ARRAY,
                    (_, false) => ARRAY,
                };
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b' ' | b'\t' | b'\n' | b'\r' | b':' | b',' => {}
            // A number or a literal (`true`, `null`): one value, to its end.
            _ => {
                while json.get(at).is_some_and(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b)) {
                    at += 1;
                }
                bytes += if in_array { VALUE_IN_ARRAY } else { 0 };
            }
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_procedures_are_the_contracts_unary_rpcs_and_solve_may_be_a_get() {
        let set = prost_types::FileDescriptorSet::decode(pb::FILE_DESCRIPTOR_SET).unwrap();
        let service =
            set.file.iter().flat_map(|f| &f.service).find(|s| s.name() == "GameSolverService").unwrap();
        let unary: Vec<_> = service
            .method
            .iter()
            .filter(|m| !m.client_streaming() && !m.server_streaming())
            .map(|m| m.name().to_owned())
            .collect();
        assert_eq!(unary, Procedure::ALL.map(|p| p.name().to_owned()));
        assert!(Procedure::Solve.allows_get());
        assert!(!Procedure::SolveBatch.allows_get());
        assert_eq!(Procedure::at("/gamesolver.v1.GameSolverService/Solve"), Some(Procedure::Solve));
        assert_eq!(Procedure::at("/gamesolver.v1.GameSolverService/SolveStream"), None);
        assert_eq!(Procedure::at("/gamesolver.v1.GameSolverServiceX/Solve"), None);
    }

    #[test]
    fn content_types_and_encodings() {
        assert_eq!(Encoding::of_content_type("application/json"), Some(Encoding::Json));
        assert_eq!(Encoding::of_content_type("Application/JSON; charset=UTF-8"), Some(Encoding::Json));
        assert_eq!(Encoding::of_content_type("application/json;charset=latin1"), None);
        assert_eq!(Encoding::of_content_type("application/proto"), Some(Encoding::Proto));
        assert_eq!(Encoding::of_content_type("application/connect+json"), None);
        assert_eq!(Encoding::of_content_type("application/x-www-form-urlencoded"), None);
        let accept = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
            Compression::accepted(&headers)
        };
        assert_eq!(accept("deflate, gzip, br, zstd"), Some(Compression::Gzip));
        assert_eq!(accept("br, zstd;q=0.5, gzip"), Some(Compression::Zstd));
        assert_eq!(accept("gzip;q=0, identity"), None);
    }

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

    #[test]
    fn get_queries_decode_percent_and_base64() {
        let query = GetQuery::parse("connect=v1&encoding=json&message=%7B%22problem%22%3A%7B%7D%7D").unwrap();
        assert_eq!((query.encoding, &query.message[..]), (Encoding::Json, &br#"{"problem":{}}"#[..]));
        let query = GetQuery::parse("encoding=proto&base64=1&message=CgA").unwrap();
        assert_eq!(&query.message[..], [10, 0]);
        let query = GetQuery::parse("encoding=proto&base64=1&message=CgA%3D").unwrap();
        assert_eq!(&query.message[..], [10, 0]);
        assert!(GetQuery::parse("message=x").unwrap_err().message.contains("encoding=json"));
        assert!(GetQuery::parse("encoding=json").unwrap_err().message.contains("message parameter"));
        assert!(GetQuery::parse("connect=v2&encoding=json&message=x")
            .unwrap_err()
            .message
            .contains("\"v1\""));
    }

    /// `json` transcoded as a `procedure`'s request under `max`, and what was charged.
    fn transcode(procedure: Procedure, json: &[u8], max: usize) -> (Result<Vec<u8>, Status>, Vec<usize>) {
        let mut charged = Vec::new();
        let result = JsonBody(procedure).transcode(Bytes::copy_from_slice(json), max, &mut |held, _| {
            charged.push(held);
            Ok(())
        });
        (result, charged)
    }

    #[test]
    fn a_bad_json_request_names_the_field_at_fault() {
        let message = |json: &[u8]| transcode(Procedure::Solve, json, 1 << 20).0.unwrap_err();
        let status = message(br#"{"problem":{"stoneGameIv":{"n":-5}}}"#);
        assert_eq!(status.code(), Code::InvalidArgument);
        assert_eq!(
            status.message(),
            "invalid JSON request: problem.stoneGameIv.n: -5 is not a uint64 at line 1 column 34"
        );
        let status = message(b" ");
        assert_eq!(status.message(), "invalid JSON request: the body is empty; send one JSON object");
        let status = message(br#"{"problem":{}} x"#);
        assert_eq!(status.message(), "invalid JSON request: trailing characters at line 1 column 16");
    }

    #[test]
    fn a_json_request_becomes_one_protobuf_frame_charged_before_it_is_decoded_and_written() {
        let json = br#"{"problem":{"sumGame":{"num":"25??"}}}"#;
        let (frame, charged) = transcode(Procedure::Solve, json, 1 << 20);
        let frame = frame.unwrap();
        let request = pb::SolveRequest::decode(&frame[GRPC_HEADER..]).unwrap();
        assert_eq!(frame[..GRPC_HEADER], [0, 0, 0, 0, u8::try_from(frame.len() - GRPC_HEADER).unwrap()]);
        assert_eq!(
            request.problem.unwrap().game,
            Some(pb::problem::Game::SumGame(pb::SumGame { num: "25??".into() }))
        );
        // The JSON and its strings' bytes (the keys' too), then those and the frame.
        let strings = "problem".len() + "sumGame".len() + "num".len() + "25??".len();
        assert_eq!(charged, [json.len() + strings, strings + frame.len()]);

        // A refusal from the budget ends it before anything is decoded.
        let mut asked = 0;
        let json = Bytes::from_static(br#"{"problems":[{}]}"#);
        let refused = JsonBody(Procedure::SolveBatch).transcode(json, 1 << 20, &mut |_, _| {
            asked += 1;
            Err(Status::resource_exhausted("no room"))
        });
        assert_eq!((refused.unwrap_err().message(), asked), ("no room", 1));

        // A protobuf above the message limit is refused as tonic refuses one.
        let (refused, charged) =
            transcode(Procedure::SolveBatch, br#"{"problems":[{"stoneGameIv":{"n":1e19}}]}"#, 12);
        let status = refused.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(
            status.message(),
            "Error, decoded message length too large: found 15 bytes, the limit is: 12 bytes"
        );
        assert_eq!(charged.len(), 1);
    }

    #[test]
    fn what_a_json_request_decodes_to_is_bounded_from_its_text() {
        let problem = std::mem::size_of::<pb::Problem>();
        // A batch of objects: a problem's slot each, twice; its keys' bytes.
        let batch = br#"{"problems":[{},{},{}]}"#;
        assert_eq!(decoded_json_bytes(batch), "problems".len() + 128 + 3 * 2 * problem);
        // A list of integers: its room to start with, and 16 bytes an integer.
        let stones = br#"{"problem":{"stoneGameIx":{"stones":[1,2,"3",4e0]}}}"#;
        assert_eq!(decoded_json_bytes(stones), 7 + 11 + 6 + 128 + 4 * 16 + 1);
        // A string with an escape, twice (serde_json's scratch copy).
        assert_eq!(decoded_json_bytes(br#"{"id":"a\"b"}"#), 2 + 2 * 4);
        // Nesting past serde_json's limit ends the count.
        let deep = "[".repeat(100_000);
        assert_eq!(decoded_json_bytes(deep.as_bytes()), 128 + 255 * (128 + 16));

        // The bound holds what the decoded message holds, for every game's problems.
        let json = br#"{"problems":[{"id":"a","sumGame":{"num":"25??"}},{"stoneGameIx":{"stones":[1,2,3]}},
            {"stoneGameIv":{"n":"7"}},{"nimSquare":{"piles":[4,5]}},{}]}"#;
        let request: pb::SolveBatchRequest = serde_json::from_slice(json).unwrap();
        let held: usize = request.problems.iter().map(convert::problem_bytes).sum();
        assert!(decoded_json_bytes(json) >= held + request.problems.capacity() * problem);
    }

    #[test]
    fn an_error_carries_its_details_as_connect_writes_them() {
        let err = convert::ProblemError::from(crate::games::SolveError::OddLength { len: 3 });
        let status = Status::from(err);
        let body = ErrorBody {
            code: code_name(status.code()),
            message: status.message(),
            details: error_details(&status),
        };
        let json: serde_json::Value = serde_json::to_value(&body).unwrap();
        assert_eq!(json["code"], "invalid_argument");
        assert_eq!(json["details"][0]["type"], "google.rpc.ErrorInfo");
        assert_eq!(
            json["details"][0]["debug"],
            serde_json::json!({"reason": "ODD_LENGTH", "domain": "gamesolver.v1", "metadata": {"length": "3"}})
        );
        assert_eq!(json["details"][1]["type"], "google.rpc.BadRequest");
        assert_eq!(json["details"][1]["debug"]["fieldViolations"][0]["field"], "problem.sum_game.num");
        let value = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(json["details"][0]["value"].as_str().unwrap())
            .unwrap();
        assert_eq!(tonic_types::pb::ErrorInfo::decode(&value[..]).unwrap().reason, "ODD_LENGTH");
        assert_eq!(http_status(Code::OutOfRange), StatusCode::BAD_REQUEST);
        assert_eq!(http_status(Code::Cancelled).as_u16(), 499);
    }
}

//! The way back: a Connect call's gRPC answer, its message or its status, as a Connect
//! answer in the request's encoding (compressed when the server compresses responses).

use bytes::Bytes;
use http::header;
use http::StatusCode;
use http_body_util::{BodyExt, Full};
use tonic::body::Body;
use tonic::{Code, Status};

use super::encoding::{Compression, Encoding};
use super::errors::error_response;
use super::framing::grpc_message;
use super::json::response_to_json;
use super::procedure::Procedure;

/// What turns the gRPC answer of a Connect call back into a Connect answer.
pub(super) struct Reply {
    pub(super) procedure: Procedure,
    pub(super) encoding: Encoding,
    pub(super) compression: Option<Compression>,
}

impl Reply {
    /// The Connect response for `response`, read whole (a unary answer is one message).
    pub(super) async fn answer(self, response: http::Response<Body>) -> http::Response<Body> {
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
            Encoding::Json => match response_to_json(self.procedure, message) {
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

//! Connect's errors: a gRPC code's name and HTTP status in the Connect protocol, and its
//! JSON error body with the status's AIP-193 details (`ErrorInfo`, `BadRequest`).

use std::collections::BTreeMap;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::StatusCode;
use http_body_util::Full;
use prost::Message;
use serde::Serialize;
use tonic::body::Body;
use tonic::{Code, Status};

use super::encoding::Encoding;

/// The encodings a request may use, which a status carries when the request used another.
pub(super) const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");

/// Connect's name of a gRPC code.
pub(super) fn code_name(code: Code) -> &'static str {
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
pub(super) fn http_status(code: Code) -> StatusCode {
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
pub(super) struct ErrorBody<'a> {
    pub(super) code: &'static str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub(super) message: &'a str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) details: Vec<ErrorDetail>,
}

/// One detail: the message's type name, its protobuf bytes (standard base64, unpadded,
/// as Connect writes them) and, for the types this server sends, its JSON form.
#[derive(Debug, Serialize)]
pub(super) struct ErrorDetail {
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
pub(super) fn error_response(status: &Status) -> http::Response<Body> {
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

pub(super) fn json_response(status: StatusCode, body: &ErrorBody<'_>) -> http::Response<Body> {
    // An ErrorBody is strings and JSON values: it always serializes.
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = http::Response::new(Body::new(Full::new(Bytes::from(bytes))));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, Encoding::Json.content_type());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_carries_its_details_as_connect_writes_them() {
        let err = crate::problem::ProblemError::from(crate::games::SolveError::OddLength { len: 3 });
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

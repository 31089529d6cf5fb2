//! What the Connect door answers itself, before there is a call (so the call metrics do not
//! see it): no procedure at the path, another method, another content type, a bad header.

use http::header::{self, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use tonic::body::Body;
use tonic::Code;

use super::errors::{code_name, json_response, ErrorBody};
use super::procedure::Procedure;
use crate::echo;
use crate::pb::game_solver_service_server::SERVICE_NAME;

const ACCEPT_POST: HeaderName = HeaderName::from_static("accept-post");

/// A request the door answers itself, before there is a call.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) status: StatusCode,
    pub(super) code: Code,
    pub(super) message: String,
    header: Option<(HeaderName, HeaderValue)>,
}

impl Refusal {
    pub(super) fn not_found(path: &str) -> Refusal {
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

    pub(super) fn method(procedure: Procedure, method: &Method) -> Refusal {
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

    pub(super) fn media_type(content_type: Option<&HeaderValue>) -> Refusal {
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

    pub(super) fn bad_request(message: String) -> Refusal {
        Refusal { status: StatusCode::BAD_REQUEST, code: Code::InvalidArgument, message, header: None }
    }

    pub(super) fn response(self) -> http::Response<Body> {
        let body = ErrorBody { code: code_name(self.code), message: &self.message, details: Vec::new() };
        let mut response = json_response(self.status, &body);
        if let Some((name, value)) = self.header {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

//! gRPC-Web (`--grpc-web`): tonic-web's translation, given only the requests that are
//! gRPC-Web's.
//!
//! tonic-web answers every other HTTP/1.1 request itself, with a bare 400, so in front of
//! the whole stack it would shut the Connect door over HTTP/1.1 (browsers' and curl's
//! plain `http://` calls) whenever gRPC-Web is on. Here a request in one of gRPC-Web's
//! content types (the four tonic-web recognises) goes through the translation, and any
//! other request goes on untouched, as it does without `--grpc-web`.

use std::task::{Context, Poll};

use futures::future::Either;
use http::header::CONTENT_TYPE;
use tonic::body::Body;
use tonic_web::{GrpcWebLayer, GrpcWebService};
use tower::{Layer, Service};

/// The content types tonic-web translates.
const GRPC_WEB_CONTENT_TYPES: [&str; 4] = [
    "application/grpc-web",
    "application/grpc-web+proto",
    "application/grpc-web-text",
    "application/grpc-web-text+proto",
];

/// Puts [`GrpcWebOnly`] around a service.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GrpcWebOnlyLayer;

impl<S: Clone> Layer<S> for GrpcWebOnlyLayer {
    type Service = GrpcWebOnly<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcWebOnly { grpc_web: GrpcWebLayer::new().layer(inner.clone()), inner }
    }
}

/// Sends gRPC-Web requests through tonic-web's translation and the rest straight on.
#[derive(Debug, Clone)]
pub(crate) struct GrpcWebOnly<S> {
    grpc_web: GrpcWebService<S>,
    inner: S,
}

impl<S> Service<http::Request<Body>> for GrpcWebOnly<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Either<tonic_web::ResponseFuture<S::Future>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        match Service::<http::Request<Body>>::poll_ready(&mut self.grpc_web, cx)? {
            Poll::Ready(()) => self.inner.poll_ready(cx),
            Poll::Pending => Poll::Pending,
        }
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let content_type = request.headers().get(CONTENT_TYPE).and_then(|value| value.to_str().ok());
        match content_type.is_some_and(|content_type| GRPC_WEB_CONTENT_TYPES.contains(&content_type)) {
            true => Either::Left(self.grpc_web.call(request)),
            false => Either::Right(self.inner.call(request)),
        }
    }
}

//! Why one attempt ended, said for the log and for the user, and which failures no retry
//! can fix.

use std::time::Duration;

use tonic::{Code, Status};

use super::error::{error_chain, ConnectionError};
use super::server::Server;
use crate::client::tls_failure;

/// Why one attempt ended.
pub(crate) enum Failure {
    Connect(tonic::transport::Error),
    Status(Status),
    EndedEarly,
    /// Batches were outstanding and nothing came back for the whole retry period: a
    /// black hole, which keepalive would only notice later, or never.
    Silent(Duration),
    /// The TLS or HTTP/2 handshake did not complete within the retry period.
    NoConnection(Duration),
    WriterGone,
    /// The server answered wrongly, on this connection or another one.
    Distrusted,
    /// An answer that does not decode as one (the door says why).
    Malformed(String),
}

impl Failure {
    pub(super) fn describe(&self, server: &Server) -> String {
        match self {
            Failure::Connect(err) => format!("cannot connect: {}", error_chain(err)),
            Failure::Status(status) => {
                // A transport failure (a TLS alert, a reset) is only named in the sources.
                let mut text = format!("{:?}: {}", status.code(), status.message());
                if let Some(source) = std::error::Error::source(status) {
                    text.push_str(": ");
                    text.push_str(&error_chain(source));
                }
                text
            }
            Failure::EndedEarly => "server ended the stream with batches unanswered".to_owned(),
            Failure::Silent(waited) => format!("no answer for {waited:.1?} with batches in flight"),
            Failure::NoConnection(waited) => format!("no connection within {waited:.1?}"),
            Failure::WriterGone => "output writer stopped".to_owned(),
            Failure::Distrusted => server.wrong_answer().map(ToString::to_string).unwrap_or_default(),
            Failure::Malformed(reason) => reason.clone(),
        }
    }

    /// Why a server that was never reached could not be, in the terms a user checks an
    /// address by: refused, no route, its name (DNS), TLS.
    pub(super) fn unreached(&self, server: &Server) -> String {
        let Failure::Connect(err) = self else { return self.describe(server) };
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(err) = cause {
            // hyper-util's resolver names its failure so (its type is private); the
            // resolver's own words follow, without std's prefix.
            if err.to_string() == "dns error" {
                let deepest = std::iter::successors(Some(err), |err| err.source()).last();
                let detail = deepest.map(ToString::to_string).unwrap_or_default();
                let detail = detail.strip_prefix("failed to lookup address information: ").unwrap_or(&detail);
                return format!("cannot resolve {} (DNS: {detail})", server.host());
            }
            if let Some(tls) = rustls_error(err) {
                return format!("TLS handshake failed: {tls}");
            }
            let kind = err.downcast_ref::<std::io::Error>().map(std::io::Error::kind);
            let reason = match kind {
                Some(std::io::ErrorKind::ConnectionRefused) => Some("connection refused"),
                Some(std::io::ErrorKind::HostUnreachable) => Some("no route to host"),
                Some(std::io::ErrorKind::NetworkUnreachable) => Some("network unreachable"),
                Some(std::io::ErrorKind::TimedOut) => Some("connection timed out"),
                _ => None,
            };
            if let Some(reason) = reason {
                return reason.to_owned();
            }
            cause = err.source();
        }
        self.describe(server)
    }

    /// A TLS failure with its fix, for a server reached as `host`, when it is one that
    /// `tls_failure` knows.
    pub(super) fn explain(&self, host: &str) -> Option<String> {
        match self {
            Failure::Connect(err) => tls_failure::explain(err, host),
            Failure::Status(status) => tls_failure::explain(status, host),
            _ => None,
        }
    }
}

/// Codes that say the call itself is wrong; resending the same batches cannot help.
///
/// `RESOURCE_EXHAUSTED` is not one of them: the server sheds load with it ("server
/// overloaded ...; retry later": too many calls, or its request memory in use), which
/// backing off fixes. A batch above the server's message limit gets it too and then
/// fails until `--retry-for` runs out, with the server's message as the last error.
fn is_permanent(code: Code) -> bool {
    matches!(
        code,
        Code::Unimplemented
            | Code::InvalidArgument
            | Code::Unauthenticated
            | Code::PermissionDenied
            | Code::FailedPrecondition
            | Code::OutOfRange
            | Code::NotFound
    )
}

/// A TLS failure that no retry can fix: the server's certificate is not trusted or not
/// for this name, or the server refused ours. rustls's error sits inside an `io::Error`
/// somewhere in the chain, where `source()` does not reach (`get_ref` does).
///
/// With TLS 1.3 the server refuses a client certificate with an alert after the client's
/// side of the handshake, so the refusal fails the call, not the connection; by then h2
/// has copied the I/O error into a new one that keeps only its kind and text, so
/// rustls's text for a received alert is all there is to recognise.
fn is_certificate_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    use tokio_rustls::rustls::Error as Tls;
    let mut cause = Some(err);
    while let Some(err) = cause {
        let io = err.downcast_ref::<std::io::Error>();
        if let Some(tls) = rustls_error(err) {
            return matches!(
                tls,
                Tls::InvalidCertificate(_) | Tls::NoCertificatesPresented | Tls::AlertReceived(_)
            );
        }
        if io.is_some_and(|io| {
            io.kind() == std::io::ErrorKind::InvalidData
                && io.to_string().starts_with("received fatal alert: ")
        }) {
            return true;
        }
        cause = err.source();
    }
    false
}

/// rustls's error, when `err` is one or an `io::Error` that holds one (where `source()`
/// does not reach).
fn rustls_error<'e>(err: &'e (dyn std::error::Error + 'static)) -> Option<&'e tokio_rustls::rustls::Error> {
    use tokio_rustls::rustls::Error as Tls;
    let inner = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
    err.downcast_ref::<Tls>().or_else(|| inner.and_then(|inner| inner.downcast_ref::<Tls>()))
}

/// The error to give up with at once, when `failure` is one that no retry can fix.
pub(super) fn fatal(server: &Server, failure: &Failure) -> Option<ConnectionError> {
    if let (Failure::Distrusted, Some(what)) = (failure, server.wrong_answer()) {
        return Some(ConnectionError::WrongAnswer { url: server.url().to_owned(), what: what.clone() });
    }
    if let Failure::Status(status) = failure {
        if is_permanent(status.code()) {
            return Some(ConnectionError::Rejected {
                url: server.url().to_owned(),
                code: status.code(),
                message: status.message().to_owned(),
            });
        }
    }
    // With TLS 1.3 the server's refusal of our certificate fails the call, not the
    // connection: both are searched.
    let certificate = match failure {
        Failure::Connect(err) => is_certificate_failure(err),
        Failure::Status(status) => is_certificate_failure(status),
        _ => false,
    };
    certificate.then(|| ConnectionError::Certificate {
        url: server.url().to_owned(),
        reason: failure.explain(server.host()).unwrap_or_else(|| failure.describe(server)),
    })
}

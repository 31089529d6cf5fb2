//! Why a server was given up on, in the terms a user fixes it by.

use std::path::PathBuf;
use std::time::Duration;

use tonic::Code;

use crate::client::answer_check::WrongAnswer;

/// Why a server was given up on.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The URL is not one tonic can connect to.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given.
        url: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The server refused the call in a way that retrying cannot fix.
    #[error("server {url} rejected the stream: {code:?}: {message}")]
    Rejected {
        /// The server.
        url: String,
        /// The gRPC code.
        code: Code,
        /// The server's message.
        message: String,
    },
    /// The TLS handshake failed in a way that retrying cannot fix (an untrusted or
    /// mismatched server certificate, or a client certificate the server refused); the
    /// reason names the flag or the certificate that fixes it.
    #[error("server {url} failed its TLS handshake: {reason}")]
    Certificate {
        /// The server.
        url: String,
        /// What the TLS layer said.
        reason: String,
    },
    /// A plaintext (`http://`) URL names a server that speaks TLS.
    #[error("server {url} speaks TLS: use --server {https}")]
    SpeaksTls {
        /// The URL given, normalised.
        url: String,
        /// The same server with `https://`.
        https: String,
    },
    /// No connection to the server was ever made, within the connect deadline: a wrong
    /// address more likely than a fault to ride out.
    #[error("cannot reach server {url} within {deadline:.1?} (--connect-deadline): {reason}")]
    NotReached {
        /// The server.
        url: String,
        /// How long it was tried.
        deadline: Duration,
        /// Why the last attempt failed: refused, no route, DNS, TLS.
        reason: String,
    },
    /// No answer came for the whole retry period.
    #[error("server {url} failed for {elapsed:.1?} without answering (last error: {last})")]
    Unreachable {
        /// The server.
        url: String,
        /// How long it was tried.
        elapsed: Duration,
        /// The last failure.
        last: String,
    },
    /// The server answered something other than what was asked: its batches go to the
    /// other servers, and it is not asked again.
    #[error("server {url} answered wrongly: {what}")]
    WrongAnswer {
        /// The server.
        url: String,
        /// The first wrong answer found.
        what: WrongAnswer,
    },
    /// A TLS file given on the command line cannot be read.
    #[error("cannot read {flag} {path}")]
    TlsFile {
        /// The flag that named it.
        flag: &'static str,
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The TLS settings do not fit together.
    #[error("{0}")]
    Tls(String),
}

/// An error and its causes, each once, in one line.
pub(super) fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        // Some layers repeat their cause in their own message.
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

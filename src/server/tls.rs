//! TLS for the gRPC port, with certificates that can be replaced while serving.
//!
//! tonic's own `Server::tls_config` fixes the certificate for the server's lifetime, so
//! the handshake happens here instead: [`ReloadableTls`] holds the current rustls
//! configuration behind an atomic swap, every new connection takes the one current at
//! its handshake, and [`ReloadableTls::reload`] rereads the files. A reload that fails
//! leaves the running configuration alone, so a half-copied certificate never takes the
//! service down. Every load also refuses a certificate that clients would refuse at the
//! handshake (a CA certificate as the server's own, no subjectAltName, a validity that
//! does not hold now), with the reason and how to make a good one: served, it would only
//! fail every handshake. The crypto provider is ring's, as tonic's `tls-ring` feature
//! uses, so the process carries one provider.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::rustls::{self, server::WebPkiClientVerifier, RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use x509_parser::time::ASN1Time;

/// Where the server's certificate chain, its key and (for mutual TLS) the client CA live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// PEM CA certificates; when set, clients must present a certificate they signed.
    pub client_ca: Option<PathBuf>,
}

/// Why a TLS configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file holds no PEM item of the kind wanted, or a malformed one.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        what: String,
    },
    /// rustls refused the combination (a key that does not match the certificate, say).
    #[error("{path}: {source}")]
    Rustls {
        /// The file at fault (the key for a mismatch).
        path: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// The certificate loads, but TLS clients would refuse it; the message says how to
    /// make one they accept.
    #[error("{path}: clients would refuse this certificate: {}; {MAKE_ONE}", faults.join("; "))]
    Refused {
        /// The certificate file.
        path: PathBuf,
        /// Each reason, in words.
        faults: Vec<String>,
    },
    /// The client CA file could not make a verifier.
    #[error("{path}: {source}")]
    ClientCa {
        /// The client CA file.
        path: PathBuf,
        /// The verifier's reason.
        source: rustls::server::VerifierBuilderError,
    },
}

/// What a load read, for the log: one line per certificate that matters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedTls {
    /// The server's leaf certificate.
    pub cert: CertificateSummary,
    /// The client CA certificates, when mutual TLS is on.
    pub client_cas: Vec<CertificateSummary>,
}

/// Subject, serial and expiry of one certificate, as an operator checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateSummary {
    /// The subject's distinguished name.
    pub subject: String,
    /// The serial number in hex.
    pub serial: String,
    /// The end of validity (RFC 2822).
    pub not_after: String,
}

impl CertificateSummary {
    fn of(der: &CertificateDer<'_>) -> Self {
        match x509_parser::parse_x509_certificate(der) {
            Ok((_, cert)) => CertificateSummary {
                subject: cert.subject().to_string(),
                serial: cert.raw_serial_as_string(),
                not_after: cert.validity().not_after.to_rfc2822().unwrap_or_else(|err| err),
            },
            // rustls parses again when it uses the certificate and reports it then.
            Err(err) => CertificateSummary {
                subject: format!("unparsable certificate: {err}"),
                serial: String::new(),
                not_after: String::new(),
            },
        }
    }
}

impl fmt::Display for CertificateSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "subject \"{}\", serial {}, expires {}", self.subject, self.serial, self.not_after)
    }
}

/// The TLS acceptor of the gRPC port: the current configuration, swapped whole on reload.
pub struct ReloadableTls {
    settings: TlsSettings,
    current: ArcSwap<ServerConfig>,
}

impl fmt::Debug for ReloadableTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadableTls").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl ReloadableTls {
    /// Loads the files named by `settings`; the server cannot start without them.
    pub fn load(settings: TlsSettings) -> Result<(Self, LoadedTls), TlsError> {
        let (config, loaded) = build(&settings)?;
        Ok((ReloadableTls { settings, current: ArcSwap::from_pointee(config) }, loaded))
    }

    /// The files this acceptor reads.
    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// Rereads the files; on success new handshakes use them, on failure nothing changes.
    /// Connections already open keep the certificate they were made with.
    pub fn reload(&self) -> Result<LoadedTls, TlsError> {
        let (config, loaded) = build(&self.settings)?;
        self.current.store(Arc::new(config));
        Ok(loaded)
    }

    /// Logs what a load read: the server certificate and any client CAs.
    pub fn log_loaded(&self, loaded: &LoadedTls, message: &str) {
        let settings = &self.settings;
        tracing::info!(
            cert = %settings.cert.display(),
            key = %settings.key.display(),
            certificate = %loaded.cert,
            "{message}"
        );
        for ca in &loaded.client_cas {
            let client_ca = settings.client_ca.as_deref().unwrap_or(std::path::Path::new("")).display();
            tracing::info!(%client_ca, certificate = %ca, "client CA loaded: client certificates are required");
        }
    }

    /// Runs the server side of a TLS handshake on `io` with the current configuration.
    pub async fn accept<IO>(&self, io: IO) -> io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        tokio_rustls::TlsAcceptor::from(self.current.load_full()).accept(io).await
    }
}

/// A rustls server configuration from the files: ALPN `h2`, then `http/1.1` (the Connect
/// door and gRPC-Web; a server with both off closes such a connection at its first
/// bytes, as over plaintext), client certificates required when a client CA is given.
fn build(settings: &TlsSettings) -> Result<(ServerConfig, LoadedTls), TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs = read_certificates(&settings.cert)?;
    check_leaf(&settings.cert, &certs[0], ASN1Time::now())?;
    let key = read_key(&settings.key)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|source| TlsError::Rustls { path: settings.cert.clone(), source })?;
    let (builder, client_cas) = match &settings.client_ca {
        None => (builder.with_no_client_auth(), Vec::new()),
        Some(path) => {
            let cas = read_certificates(path)?;
            let mut roots = RootCertStore::empty();
            for ca in &cas {
                roots.add(ca.clone()).map_err(|source| TlsError::Rustls { path: path.clone(), source })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|source| TlsError::ClientCa { path: path.clone(), source })?;
            (builder.with_client_cert_verifier(verifier), cas.iter().map(CertificateSummary::of).collect())
        }
    };
    let leaf = CertificateSummary::of(&certs[0]);
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|source| TlsError::Rustls { path: settings.key.clone(), source })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((config, LoadedTls { cert: leaf, client_cas }))
}

/// How to make a server certificate that TLS clients accept, as a refusal says it.
const MAKE_ONE: &str = "make one with `gamesolver-server dev-cert --out-dir DIR` (a CA, and a \
                        server certificate it signs for localhost, 127.0.0.1 and ::1; --host NAME \
                        adds a name), or, self-signed, with `openssl req -x509 -newkey ec -pkeyopt \
                        ec_paramgen_curve:P-256 -nodes -days 365 -subj /CN=HOST -addext \
                        subjectAltName=DNS:HOST -addext basicConstraints=critical,CA:FALSE -keyout \
                        server.key -out server.pem` (clients then trust it with --ca-cert server.pem)";

/// The faults of the server's own certificate (`leaf`, from `path`) that make rustls and
/// other TLS clients refuse it at the handshake: a CA certificate as the end entity
/// (`CaUsedAsEndEntity`), no subjectAltName (clients match the host against it alone), and
/// a validity that does not hold now. A certificate x509-parser cannot read is left to
/// rustls to refuse.
fn check_leaf(path: &Path, leaf: &CertificateDer<'_>, now: ASN1Time) -> Result<(), TlsError> {
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf) else { return Ok(()) };
    let mut faults = Vec::new();
    if cert.basic_constraints().ok().flatten().is_some_and(|constraints| constraints.value.ca) {
        faults.push(
            "it is a CA certificate (basicConstraints CA:TRUE, as openssl req -x509 makes by default), \
             which clients refuse as a server's own (CaUsedAsEndEntity)"
                .to_owned(),
        );
    }
    let names =
        cert.subject_alternative_name().ok().flatten().map_or(0, |names| names.value.general_names.len());
    if names == 0 {
        faults.push(
            "it has no subjectAltName, where clients look for the host they connect to (the subject's CN \
             is not read)"
                .to_owned(),
        );
    }
    let validity = cert.validity();
    if now < validity.not_before {
        faults.push(format!(
            "it is valid only from {}, and this machine's clock says {}",
            date(validity.not_before),
            date(now)
        ));
    } else if now > validity.not_after {
        faults.push(format!(
            "it expired at {}, and this machine's clock says {}",
            date(validity.not_after),
            date(now)
        ));
    }
    match faults.is_empty() {
        true => Ok(()),
        false => Err(TlsError::Refused { path: path.into(), faults }),
    }
}

/// A certificate time as RFC 3339, in UTC.
fn date(time: ASN1Time) -> String {
    time.to_datetime()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|err| err.to_string())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.into(), source })
}

/// Every certificate in a PEM file; at least one.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let pem_error = |what: String| TlsError::Pem { path: path.into(), what };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| pem_error(format!("bad PEM: {err}")))?;
    if certs.is_empty() {
        return Err(pem_error("no CERTIFICATE in the file".into()));
    }
    Ok(certs)
}

/// The first private key in a PEM file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let bytes = read(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|err| TlsError::Pem {
        path: path.into(),
        what: match err {
            rustls_pki_types::pem::Error::NoItemsFound => "no PRIVATE KEY in the file".into(),
            err => format!("bad PEM: {err}"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert_path, key_path) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        std::fs::write(&cert_path, cert.cert.pem()).unwrap();
        std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    #[test]
    fn loads_a_pair_and_names_its_subject() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "server");
        let (_, loaded) = ReloadableTls::load(TlsSettings { cert, key, client_ca: None }).unwrap();
        assert_eq!(loaded.cert.subject, "CN=rcgen self signed cert");
        assert!(loaded.client_cas.is_empty());
    }

    #[test]
    fn each_bad_file_is_named_in_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "a");
        let (_, other_key) = write_pair(dir.path(), "b");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let load = |cert: &Path, key: &Path| {
            let settings = TlsSettings { cert: cert.into(), key: key.into(), client_ca: None };
            ReloadableTls::load(settings).unwrap_err().to_string()
        };
        let missing = dir.path().join("missing.pem");
        assert!(load(&missing, &key).starts_with(&format!("{}: ", missing.display())));
        assert_eq!(load(&empty, &key), format!("{}: no CERTIFICATE in the file", empty.display()));
        assert_eq!(load(&cert, &empty), format!("{}: no PRIVATE KEY in the file", empty.display()));
        assert_eq!(load(&cert, &cert), format!("{}: no PRIVATE KEY in the file", cert.display()));
        assert!(load(&cert, &other_key).starts_with(&format!("{}: ", other_key.display())));
    }

    /// Writes a self-signed certificate made from `params`, and its key.
    fn write_made(dir: &Path, name: &str, params: rcgen::CertificateParams) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let (cert_path, key_path) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    fn params(names: &[&str]) -> rcgen::CertificateParams {
        rcgen::CertificateParams::new(names.iter().map(|name| name.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn refusal(cert: PathBuf, key: PathBuf) -> String {
        ReloadableTls::load(TlsSettings { cert, key, client_ca: None }).unwrap_err().to_string()
    }

    #[test]
    fn a_certificate_clients_would_refuse_is_refused_with_the_reason_and_how_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        let refused = |cert: &Path, faults: &str| {
            format!("{}: clients would refuse this certificate: {faults}; {MAKE_ONE}", cert.display())
        };

        let mut ca = params(&["localhost"]);
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let (cert, key) = write_made(dir, "ca", ca);
        assert_eq!(
            refusal(cert.clone(), key),
            refused(
                &cert,
                "it is a CA certificate (basicConstraints CA:TRUE, as openssl req -x509 makes by default), \
                 which clients refuse as a server's own (CaUsedAsEndEntity)"
            )
        );

        let (cert, key) = write_made(dir, "nameless", params(&[]));
        assert_eq!(
            refusal(cert.clone(), key),
            refused(
                &cert,
                "it has no subjectAltName, where clients look for the host they connect to (the subject's CN \
                 is not read)"
            )
        );

        // A validity that does not hold at the time of the check: checked at 2022-06-01.
        let at = |path: &Path| {
            let now = ASN1Time::from_timestamp(1_654_041_600).unwrap();
            check_leaf(path, &read_certificates(path).unwrap()[0], now).unwrap_err().to_string()
        };
        let mut expired = params(&["localhost"]);
        (expired.not_before, expired.not_after) =
            (rcgen::date_time_ymd(2020, 1, 1), rcgen::date_time_ymd(2021, 1, 1));
        let (cert, _) = write_made(dir, "expired", expired);
        assert_eq!(
            at(&cert),
            refused(
                &cert,
                "it expired at 2021-01-01T00:00:00Z, and this machine's clock says 2022-06-01T00:00:00Z"
            )
        );
        let mut early = params(&["localhost"]);
        (early.not_before, early.not_after) =
            (rcgen::date_time_ymd(2023, 1, 1), rcgen::date_time_ymd(2024, 1, 1));
        let (cert, _) = write_made(dir, "early", early);
        assert_eq!(
            at(&cert),
            refused(
                &cert,
                "it is valid only from 2023-01-01T00:00:00Z, and this machine's clock says 2022-06-01T00:00:00Z"
            )
        );
        // And at start-up, by the real clock.
        let mut expired = params(&["localhost"]);
        (expired.not_before, expired.not_after) =
            (rcgen::date_time_ymd(2020, 1, 1), rcgen::date_time_ymd(2021, 1, 1));
        let (cert, key) = write_made(dir, "expired", expired);
        assert!(refusal(cert, key)
            .contains(": it expired at 2021-01-01T00:00:00Z, and this machine's clock says "));

        // What `openssl req -x509` makes without -addext: both faults, one line.
        let mut openssl_default = params(&[]);
        openssl_default.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let (cert, key) = write_made(dir, "openssl", openssl_default);
        let message = refusal(cert.clone(), key);
        assert!(message.contains("(CaUsedAsEndEntity); it has no subjectAltName"), "{message}");
    }

    #[test]
    fn a_failed_reload_keeps_the_running_configuration() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = write_pair(dir.path(), "server");
        let (tls, _) =
            ReloadableTls::load(TlsSettings { cert: cert.clone(), key: key.clone(), client_ca: None })
                .unwrap();
        let before = tls.current.load_full();
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\ngarbage\n").unwrap();
        assert!(tls.reload().is_err());
        assert!(Arc::ptr_eq(&before, &tls.current.load_full()));
        // A certificate clients would refuse, with its own key: refused, the old one kept.
        let mut ca = params(&["localhost"]);
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let (ca_cert, ca_key) = write_made(dir.path(), "ca", ca);
        std::fs::copy(ca_cert, &cert).unwrap();
        std::fs::copy(ca_key, &key).unwrap();
        assert!(matches!(tls.reload(), Err(TlsError::Refused { .. })));
        assert!(Arc::ptr_eq(&before, &tls.current.load_full()));
    }
}

//! What a failed TLS handshake means, said in the terms of the flag or the certificate
//! that fixes it: rustls names the fault (`UnknownIssuer`, `CaUsedAsEndEntity`), not what
//! to do about it.

use std::error::Error;

use time::format_description::well_known::Rfc3339;
use tokio_rustls::rustls::pki_types::UnixTime;
use tokio_rustls::rustls::{AlertDescription, CertificateError, Error as Tls};

/// How to make a server certificate clients accept, for the faults a new one fixes.
const MAKE_ONE: &str = "make a server certificate signed by a CA, with basicConstraints \
                        CA:FALSE and a subjectAltName for each host clients use \
                        (gamesolver-server dev-cert --out-dir DIR writes one and its CA)";

/// The rustls error somewhere in `err`'s chain. It sits inside an `io::Error`, where
/// `source()` does not reach (`get_ref` does).
pub(crate) fn rustls_error<'a>(err: &'a (dyn Error + 'static)) -> Option<&'a Tls> {
    let mut cause = Some(err);
    while let Some(err) = cause {
        if let Some(tls) = err.downcast_ref::<Tls>() {
            return Some(tls);
        }
        let inner = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
        if let Some(tls) = inner.and_then(|inner| inner.downcast_ref::<Tls>()) {
            return Some(tls);
        }
        cause = err.source();
    }
    None
}

/// The fault in `err`'s chain and its fix, for a server reached as `host`; `None` when
/// the chain holds no TLS failure this knows.
pub(crate) fn explain(err: &(dyn Error + 'static), host: &str) -> Option<String> {
    match rustls_error(err) {
        Some(Tls::InvalidCertificate(fault)) => certificate(fault, host),
        Some(Tls::AlertReceived(alert)) => Some(alert_received(*alert)),
        Some(_) => None,
        None => alert_in_text(err).map(alert_received),
    }
}

/// The alert of a refusal that reached the call rather than the handshake (TLS 1.3):
/// h2 keeps only the text of the I/O error that carried rustls's.
fn alert_in_text(err: &(dyn Error + 'static)) -> Option<AlertDescription> {
    use AlertDescription as A;
    let known = [
        A::CertificateRequired,
        A::UnknownCA,
        A::BadCertificate,
        A::DecryptError,
        A::CertificateUnknown,
        A::AccessDenied,
        A::CertificateExpired,
    ];
    let mut cause = Some(err);
    while let Some(err) = cause {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            let text = io.to_string();
            if let Some(name) = text.strip_prefix("received fatal alert: ") {
                return known.into_iter().find(|alert| format!("{alert:?}") == name);
            }
        }
        cause = err.source();
    }
    None
}

/// The server's certificate was refused for `fault`.
fn certificate(fault: &CertificateError, host: &str) -> Option<String> {
    use CertificateError as C;
    Some(match fault {
        C::UnknownIssuer => "its certificate is not signed by a CA this client trusts (UnknownIssuer): \
                             give the CA certificate that signed it with --ca-cert PEM"
            .to_owned(),
        // A trusted CA of the issuer's name, with another key: a CA made again, or one of
        // the system's that shares the name (Debian's snakeoil certificate is CN=<host>).
        C::BadSignature | C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => format!(
            "its certificate is not signed by the CA of that name this client trusts ({}: another \
             CA of the same name?): give the CA certificate that signed it with --ca-cert PEM",
            match fault {
                C::BadSignature => "BadSignature",
                _ => "UnsupportedSignatureAlgorithmForPublicKey",
            }
        ),
        C::NotValidForNameContext { expected, presented } => {
            not_for_host(&expected.to_str(), Some(presented))
        }
        C::NotValidForName => not_for_host(host, None),
        C::ExpiredContext { time, not_after } => format!(
            "its certificate expired at {}, and this machine's clock says {} (Expired): renew the \
             certificate, or set the clock right if it is wrong",
            date(*not_after),
            date(*time)
        ),
        C::Expired => "its certificate has expired by this machine's clock (Expired): renew the \
                       certificate, or set the clock right if it is wrong"
            .to_owned(),
        C::NotValidYetContext { time, not_before } => format!(
            "its certificate is valid only from {}, and this machine's clock says {} (NotValidYet): \
             check the clocks of this machine and of the one that made it",
            date(*not_before),
            date(*time)
        ),
        C::NotValidYet => "its certificate is not valid yet by this machine's clock (NotValidYet): \
                           check the clocks of this machine and of the one that made it"
            .to_owned(),
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => format!(
            "its certificate is not for TLS servers (InvalidPurpose: its extendedKeyUsage lacks \
             serverAuth): {MAKE_ONE}"
        ),
        C::Other(other) => match other.0.downcast_ref::<webpki::Error>()? {
            webpki::Error::CaUsedAsEndEntity => format!(
                "its certificate is a CA certificate (basicConstraints CA:TRUE, as openssl req \
                 -x509 makes by default) used as the server's own, which TLS clients refuse \
                 (CaUsedAsEndEntity): {MAKE_ONE}, and give that CA with --ca-cert PEM"
            ),
            _ => return None,
        },
        _ => return None,
    })
}

/// The certificate does not name `host`; `presented` are the names it holds, when rustls
/// gives them.
fn not_for_host(host: &str, presented: Option<&[String]>) -> String {
    let holds = match presented {
        Some([]) => "; it names no host at all (no subjectAltName)".to_owned(),
        Some(names) => {
            let names: Vec<&str> = names.iter().map(|name| presented_name(name)).collect();
            format!("; it names {}", names.join(", "))
        }
        None => String::new(),
    };
    format!(
        "its certificate is not valid for {host}, the host in the URL{holds} (NotValidForName): use \
         a host it names in --server, or a certificate whose subjectAltName names {host}"
    )
}

/// A name as webpki lists it (`DnsName("localhost")`, `IpAddress(127.0.0.1)`), bare.
fn presented_name(name: &str) -> &str {
    let inner =
        ["DnsName(\"", "IpAddress("].iter().find_map(|prefix| name.strip_prefix(prefix)?.strip_suffix(')'));
    inner.map_or(name, |inner| inner.trim_end_matches('"'))
}

/// The server refused the handshake with `alert` after this client's side of it: mostly
/// a refusal of the client's certificate.
fn alert_received(alert: AlertDescription) -> String {
    use AlertDescription as A;
    let fix = match alert {
        A::CertificateRequired => {
            "the server requires a client certificate: give one that its --tls-client-ca signed with \
             --client-cert PEM and --client-key PEM"
        }
        A::UnknownCA | A::BadCertificate | A::DecryptError | A::CertificateUnknown | A::AccessDenied => {
            "the server refused this client's certificate: give one that its --tls-client-ca signed \
             with --client-cert PEM and --client-key PEM"
        }
        A::CertificateExpired => "the server refused this client's certificate as expired: renew it",
        _ => "the server ended the handshake",
    };
    format!("{fix} (received fatal alert: {alert:?})")
}

/// A certificate time, as RFC 3339 in UTC.
fn date(time: UnixTime) -> String {
    i64::try_from(time.as_secs())
        .ok()
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok())
        .and_then(|at| at.format(&Rfc3339).ok())
        .unwrap_or_else(|| format!("{} s after 1970", time.as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presented_names_are_bare() {
        assert_eq!(presented_name("DnsName(\"localhost\")"), "localhost");
        assert_eq!(presented_name("IpAddress(127.0.0.1)"), "127.0.0.1");
        assert_eq!(presented_name("IpAddress(::1)"), "::1");
        assert_eq!(presented_name("DirectoryName"), "DirectoryName");
    }

    #[test]
    fn dates_are_rfc_3339() {
        assert_eq!(
            date(UnixTime::since_unix_epoch(std::time::Duration::from_secs(0))),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            date(UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_600_000_000))),
            "2020-09-13T12:26:40Z"
        );
    }

    #[test]
    fn an_alert_names_the_client_certificate_flags() {
        let text = alert_received(AlertDescription::CertificateRequired);
        assert!(
            text.contains("--client-cert PEM")
                && text.ends_with("(received fatal alert: CertificateRequired)")
        );
    }
}

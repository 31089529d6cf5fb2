//! `gamesolver-server dev-cert`: a CA, a server certificate and a client certificate, for
//! trying TLS and mutual TLS on one machine without a PKI.
//!
//! The server certificate is what clients accept and what the server's own start-up
//! check wants (see `tls.rs`): signed by the CA, `CA:FALSE`, with a subjectAltName for
//! each name clients use (`localhost`, `127.0.0.1`, `::1` and each `--host`), for TLS
//! servers only; the client certificate is for TLS clients only. All three are valid
//! from a day before they are made (a clock a little behind still takes them) for a
//! year. The keys are ECDSA P-256, written readable by their owner only.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The names every server certificate holds: what a client on the same machine uses.
pub const LOCAL_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// How long the certificates are valid, from the day before they are made.
const VALIDITY_DAYS: i64 = 366;

/// What `dev-cert` is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevCertRequest {
    /// The directory to write into (created with its parents if missing).
    pub out_dir: PathBuf,
    /// Names the server certificate holds besides [`LOCAL_NAMES`]: DNS names or IP
    /// addresses.
    pub hosts: Vec<String>,
    /// Overwrite files that exist already.
    pub force: bool,
}

/// What `dev-cert` wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevCertFiles {
    /// The CA's certificate: `--tls-client-ca` for the server, `--ca-cert` for clients.
    pub ca_cert: PathBuf,
    /// The CA's key, to sign more certificates.
    pub ca_key: PathBuf,
    /// The server's certificate: `--tls-cert`.
    pub server_cert: PathBuf,
    /// The server's key: `--tls-key`.
    pub server_key: PathBuf,
    /// The client's certificate: the client's `--client-cert`.
    pub client_cert: PathBuf,
    /// The client's key: the client's `--client-key`.
    pub client_key: PathBuf,
    /// The names the server certificate holds.
    pub names: Vec<String>,
    /// The end of the certificates' validity, RFC 3339.
    pub not_after: String,
}

/// Why `dev-cert` wrote nothing (or, for a write error, not everything).
#[derive(Debug, thiserror::Error)]
pub enum DevCertError {
    /// A `--host` is neither a DNS name nor an IP address.
    #[error("--host {0:?} is neither a DNS name nor an IP address")]
    Host(String),
    /// Files of an earlier run are in the way.
    #[error("{} already in {}: --force overwrites them", .files.join(", "), .dir.display())]
    Exists {
        /// The directory.
        dir: PathBuf,
        /// The files found.
        files: Vec<String>,
    },
    /// The directory cannot be created.
    #[error("cannot create {}: {source}", .dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file cannot be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// rcgen could not make a key or a certificate.
    #[error("cannot make the certificates: {0}")]
    Make(#[from] rcgen::Error),
}

/// Makes the CA, the server and the client certificate and writes them (`ca.pem`,
/// `ca.key`, `server.pem`, `server.key`, `client.pem`, `client.key`) into the request's
/// directory; nothing is written if any is there already, unless `force`.
pub fn write(request: &DevCertRequest) -> Result<DevCertFiles, DevCertError> {
    let mut names: Vec<String> = LOCAL_NAMES.map(str::to_owned).into();
    for host in &request.hosts {
        check_host(host)?;
        if !names.contains(host) {
            names.push(host.clone());
        }
    }
    let dir = &request.out_dir;
    let path = |name: &str| dir.join(name);
    let files = DevCertFiles {
        ca_cert: path("ca.pem"),
        ca_key: path("ca.key"),
        server_cert: path("server.pem"),
        server_key: path("server.key"),
        client_cert: path("client.pem"),
        client_key: path("client.key"),
        names,
        not_after: String::new(),
    };
    let all = [
        &files.ca_cert,
        &files.ca_key,
        &files.server_cert,
        &files.server_key,
        &files.client_cert,
        &files.client_key,
    ];
    let existing: Vec<String> = all
        .iter()
        .filter(|path| path.exists())
        .filter_map(|path| Some(path.file_name()?.to_string_lossy().into_owned()))
        .collect();
    if !existing.is_empty() && !request.force {
        return Err(DevCertError::Exists { dir: dir.clone(), files: existing });
    }

    let made = Made::new(&files.names)?;
    std::fs::create_dir_all(dir).map_err(|source| DevCertError::CreateDir { dir: dir.clone(), source })?;
    write_file(&files.ca_cert, &made.ca_cert, false)?;
    write_file(&files.ca_key, &made.ca_key, true)?;
    write_file(&files.server_cert, &made.server_cert, false)?;
    write_file(&files.server_key, &made.server_key, true)?;
    write_file(&files.client_cert, &made.client_cert, false)?;
    write_file(&files.client_key, &made.client_key, true)?;
    Ok(DevCertFiles { not_after: made.not_after, ..files })
}

/// Refuses what is not a DNS name or an IP address (a URL, a name with a port).
fn check_host(host: &str) -> Result<(), DevCertError> {
    let valid = host.parse::<IpAddr>().is_ok() || rustls_pki_types::DnsName::try_from(host).is_ok();
    valid.then_some(()).ok_or_else(|| DevCertError::Host(host.to_owned()))
}

/// The three certificates and their keys, in PEM.
struct Made {
    ca_cert: String,
    ca_key: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
    not_after: String,
}

impl Made {
    fn new(names: &[String]) -> Result<Made, DevCertError> {
        let now = time::OffsetDateTime::now_utc();
        let (not_before, not_after) =
            (now - time::Duration::days(1), now + time::Duration::days(VALIDITY_DAYS));
        let params = |common_name: &str, is_ca: IsCa| {
            let mut params = CertificateParams::default();
            params.distinguished_name.push(DnType::CommonName, common_name);
            (params.not_before, params.not_after, params.is_ca) = (not_before, not_after, is_ca);
            params
        };

        let mut ca = params("gamesolver dev CA", IsCa::Ca(BasicConstraints::Constrained(0)));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate()?;
        let ca_key_pem = ca_key.serialize_pem();
        let ca = CertifiedIssuer::self_signed(ca, ca_key)?;

        let mut server = params("gamesolver dev server", IsCa::ExplicitNoCa);
        server.subject_alt_names = names.iter().map(|name| san(name)).collect::<Result<_, _>>()?;
        server.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate()?;
        let server_cert = server.signed_by(&server_key, &ca)?;

        let mut client = params("gamesolver dev client", IsCa::ExplicitNoCa);
        client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_key = KeyPair::generate()?;
        let client_cert = client.signed_by(&client_key, &ca)?;

        Ok(Made {
            ca_cert: ca.pem(),
            ca_key: ca_key_pem,
            server_cert: server_cert.pem(),
            server_key: server_key.serialize_pem(),
            client_cert: client_cert.pem(),
            client_key: client_key.serialize_pem(),
            not_after: not_after
                .replace_nanosecond(0)
                .ok()
                .and_then(|at| at.format(&time::format_description::well_known::Rfc3339).ok())
                .unwrap_or_default(),
        })
    }
}

/// A subjectAltName entry: an IP address, or else a DNS name.
fn san(name: &str) -> Result<SanType, rcgen::Error> {
    Ok(match name.parse::<IpAddr>() {
        Ok(ip) => SanType::IpAddress(ip),
        Err(_) => SanType::DnsName(name.try_into()?),
    })
}

/// Writes `contents` to `path`, replacing it; a key readable by its owner only.
fn write_file(path: &Path, contents: &str, secret: bool) -> Result<(), DevCertError> {
    let error = |source| DevCertError::Write { path: path.to_owned(), source };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        // A key of an earlier run keeps its mode when overwritten: set it.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(error)?;
        }
    }
    #[cfg(not(unix))]
    let _ = secret;
    let mut file = options.open(path).map_err(error)?;
    file.write_all(contents.as_bytes()).map_err(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_a_dns_name_or_an_ip_address() {
        for good in ["example.test", "solver-1", "10.0.0.5", "fe80::1"] {
            assert!(check_host(good).is_ok(), "{good}");
        }
        for bad in ["https://example.test", "example.test:50051", "two words", ""] {
            assert_eq!(
                check_host(bad).unwrap_err().to_string(),
                format!("--host {bad:?} is neither a DNS name nor an IP address")
            );
        }
    }
}

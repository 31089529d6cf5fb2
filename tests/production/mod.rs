//! Shared by the production-feature tests: certificates made at run time (a CA and the
//! leaves it signs) and scraping `/metrics`.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};

/// A certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, in PEM.
pub struct Leaf {
    pub cert: String,
    pub key: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        TestCa { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `localhost` and 127.0.0.1.
    pub fn server(&self, name: &str) -> Leaf {
        self.leaf(name, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate.
    pub fn client(&self, name: &str) -> Leaf {
        self.leaf(name, ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A server certificate for `hosts` only.
    pub fn server_for(&self, name: &str, hosts: &[&str]) -> Leaf {
        self.sign(Self::params(name, hosts, ExtendedKeyUsagePurpose::ServerAuth))
    }

    /// A server certificate for `localhost` and 127.0.0.1, valid from `not_before` to
    /// `not_after` (year, month, day).
    pub fn server_valid(&self, name: &str, not_before: (i32, u8, u8), not_after: (i32, u8, u8)) -> Leaf {
        let mut params = Self::params(name, &["localhost", "127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
        params.not_before = rcgen::date_time_ymd(not_before.0, not_before.1, not_before.2);
        params.not_after = rcgen::date_time_ymd(not_after.0, not_after.1, not_after.2);
        self.sign(params)
    }

    fn leaf(&self, name: &str, usage: ExtendedKeyUsagePurpose) -> Leaf {
        self.sign(Self::params(name, &["localhost", "127.0.0.1"], usage))
    }

    fn params(name: &str, hosts: &[&str], usage: ExtendedKeyUsagePurpose) -> CertificateParams {
        let mut params =
            CertificateParams::new(hosts.iter().map(|host| host.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![usage];
        params
    }

    fn sign(&self, params: CertificateParams) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf { cert: cert.pem(), key: key.serialize_pem() }
    }
}

/// A self-signed CA certificate (CA:TRUE) for `localhost` and 127.0.0.1, as `openssl req
/// -x509` makes one by default (with a subjectAltName added), and its key.
pub fn self_signed_ca_leaf(name: &str) -> Leaf {
    let mut params = TestCa::params(name, &["localhost", "127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Leaf { cert: cert.pem(), key: key.serialize_pem() }
}

/// A TLS server on 127.0.0.1 that presents `leaf` and serves nothing: for certificates the
/// real server refuses to load, so that a client's verdict on them can be seen. Stops
/// when the handle is dropped.
pub async fn bare_tls_server(leaf: &Leaf) -> (std::net::SocketAddr, AbortOnDrop) {
    use rustls_pki_types::pem::PemObject;
    use tokio_rustls::rustls;
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(leaf.cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(leaf.key.as_bytes()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // The client refuses the certificate: the handshake fails, and that is all.
            let _ = acceptor.accept(stream).await;
        }
    });
    (addr, AbortOnDrop(task))
}

/// Aborts its task when dropped.
pub struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Writes `leaf` to `dir/NAME.pem` and `dir/NAME.key`; returns both paths.
pub fn write_leaf(dir: &Path, name: &str, leaf: &Leaf) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join(format!("{name}.pem")), dir.join(format!("{name}.key")));
    std::fs::write(&cert, &leaf.cert).unwrap();
    std::fs::write(&key, &leaf.key).unwrap();
    (cert, key)
}

/// Writes the CA's certificate to `dir/NAME.pem`.
pub fn write_ca(dir: &Path, name: &str, ca: &TestCa) -> PathBuf {
    let path = dir.join(format!("{name}.pem"));
    std::fs::write(&path, ca.pem()).unwrap();
    path
}

/// A tonic TLS config trusting `ca`, presenting `identity` if given.
pub fn client_tls(ca: &TestCa, identity: Option<&Leaf>) -> tonic::transport::ClientTlsConfig {
    let config = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca.pem()))
        .domain_name("localhost");
    match identity {
        Some(leaf) => config.identity(tonic::transport::Identity::from_pem(&leaf.cert, &leaf.key)),
        None => config,
    }
}

/// GETs `/metrics` from `addr` (HTTP/1.0, so the server closes when done) and returns
/// the body.
pub async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect to /metrics");
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// The value of the series written exactly as `series` (name and labels), if present.
pub fn series(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A loopback listener for the metrics endpoint, and its address.
pub fn metrics_listen() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The value of `name` once it equals `expected`, or its last value after 5 s: for
/// counters the server updates just after the client has seen the outcome (a refused
/// handshake, a cancelled call).
pub async fn settled(addr: std::net::SocketAddr, name: &str, expected: f64) -> Option<f64> {
    let mut value = None;
    for _ in 0..100 {
        value = series(&scrape(addr).await, name);
        if value == Some(expected) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    value
}

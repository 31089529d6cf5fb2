//! How servers are talked to: the connection's settings, and the TLS files of every
//! `https://` server.

use std::path::PathBuf;
use std::time::Duration;

use tonic::codec::CompressionEncoding;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use super::error::ConnectionError;

/// How one server is talked to.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// Batches sent and not yet answered, at most.
    pub window: usize,
    /// How long failures may go on without a single answer before giving up, once the
    /// server has been reached.
    pub retry_for: Duration,
    /// How long a server that was never reached is tried before it is given up on.
    pub connect_deadline: Duration,
    /// Largest message sent or received.
    pub max_message_bytes: usize,
    /// Compression of messages, both ways.
    pub compression: Option<CompressionEncoding>,
}

/// TLS for `https://` servers, as PEM files; the system's roots are always trusted.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct TlsFiles {
    /// PEM file of one more CA to trust for https:// servers (the system's are trusted too).
    #[arg(long, value_name = "PEM")]
    pub ca_cert: Option<PathBuf>,
    /// PEM certificate to present to https:// servers that require one (mutual TLS).
    #[arg(long, value_name = "PEM", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, value_name = "PEM", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
}

impl TlsFiles {
    /// True when any file is given.
    pub fn any(&self) -> bool {
        self.ca_cert.is_some() || self.client_cert.is_some() || self.client_key.is_some()
    }

    /// Reads the files into the TLS settings of every `https://` connection.
    pub fn load(&self) -> Result<ClientTlsConfig, ConnectionError> {
        let read = |flag, path: &PathBuf| {
            std::fs::read(path).map_err(|source| ConnectionError::TlsFile {
                flag,
                path: path.clone(),
                source,
            })
        };
        let mut config = ClientTlsConfig::new().with_native_roots();
        if let Some(path) = &self.ca_cert {
            config = config.ca_certificate(Certificate::from_pem(read("--ca-cert", path)?));
        }
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                let identity = Identity::from_pem(read("--client-cert", cert)?, read("--client-key", key)?);
                config = config.identity(identity);
            }
            (None, None) => {}
            _ => return Err(ConnectionError::Tls("--client-cert and --client-key go together".into())),
        }
        Ok(config)
    }
}

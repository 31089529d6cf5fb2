//! The server's configuration, in groups that the binary's flag parser flattens: each
//! flag, its default and its doc are written once, here. Defaults live in each group's
//! `Default`, and clap reads them from there.
//!
//! Every flag can also come from the environment as `GAMESOLVER_<FLAG>` (upper case,
//! `-` as `_`); [`with_env`] adds the variables to a command built from these groups.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use super::tables::{TableCache, TableCacheFlags, TableConfig, TablesConfig};
pub use crate::seconds::{Seconds, Timeout};
use crate::solver::SolverConfig;

/// Everything a [`super::Server`] needs.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerConfig {
    /// Address to listen on; port 0 picks a free port (the bound address is printed).
    #[arg(long, default_value_t = ServerConfig::default().listen)]
    pub listen: SocketAddr,
    /// Seconds that in-flight calls get to finish after SIGINT/SIGTERM.
    #[arg(long = "shutdown-timeout", value_name = "SECONDS", default_value_t = ServerConfig::default().shutdown_grace)]
    pub shutdown_grace: Seconds,
    /// Bounds on what clients may hold.
    #[command(flatten, next_help_heading = "Limits")]
    pub limits: LimitsConfig,
    /// HTTP/2 and gRPC transport settings.
    #[command(flatten, next_help_heading = "HTTP/2")]
    pub http2: Http2Config,
    /// TLS on the gRPC port.
    #[command(flatten, next_help_heading = "TLS")]
    pub tls: TlsConfig,
    /// The table games' tables: three flags a game.
    #[command(flatten, next_help_heading = "Tables")]
    pub tables: TablesConfig,
    /// Metrics.
    #[command(flatten, next_help_heading = "Observability")]
    pub observability: ObservabilityConfig,
    /// How work is spread.
    #[command(flatten, next_help_heading = "Solving")]
    pub solver: SolverConfig,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 50051)),
            shutdown_grace: Seconds(Duration::from_secs(30)),
            limits: LimitsConfig::default(),
            http2: Http2Config::default(),
            tls: TlsConfig::default(),
            tables: TablesConfig::default(),
            observability: ObservabilityConfig::default(),
            solver: SolverConfig::default(),
        }
    }
}

impl ServerConfig {
    /// The default configuration listening on `127.0.0.1:0`: what tests and the
    /// embedded server start from.
    pub fn ephemeral() -> Self {
        ServerConfig { listen: SocketAddr::from(([127, 0, 0, 1], 0)), ..ServerConfig::default() }
    }
}

/// Bounds on connections, calls and request memory; `docs/operations.md` lists what a
/// client sees at each.
#[derive(Debug, Clone, clap::Args)]
pub struct LimitsConfig {
    /// Largest gRPC message accepted or sent, in bytes.
    #[arg(long, default_value_t = LimitsConfig::default().max_message_bytes)]
    pub max_message_bytes: usize,
    /// Connections open or handshaking at once, shared fairly among clients. Near it,
    /// connections without a call for --idle-under-pressure are closed; at it, a client
    /// within its fair share gets in by closing the idlest connection of the client
    /// holding the most, and others' new connections are closed at once. Lowered to fit
    /// the open-file limit.
    #[arg(long, default_value_t = LimitsConfig::default().max_connections)]
    pub max_connections: usize,
    /// Connections one client may hold; beyond it, closed at once. Default: no cap
    /// besides the fair share at --max-connections.
    #[arg(long)]
    pub max_connections_per_peer: Option<usize>,
    /// Seconds without a call after which a connection is closed while the server holds
    /// more than 7/8 of --max-connections.
    #[arg(long, value_name = "SECONDS", default_value_t = LimitsConfig::default().idle_under_pressure)]
    pub idle_under_pressure: Seconds,
    /// Seconds a new connection has to finish its handshake and send the HTTP/2 preface.
    #[arg(long, value_name = "SECONDS", default_value_t = LimitsConfig::default().handshake_timeout)]
    pub handshake_timeout: Seconds,
    /// Seconds without a call in flight after which a connection is closed; 0 is never.
    #[arg(long, value_name = "SECONDS", default_value_t = LimitsConfig::default().connection_idle_timeout)]
    pub connection_idle_timeout: Timeout,
    /// Calls in flight on the server (health checks aside); beyond: RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = LimitsConfig::default().max_calls)]
    pub max_calls: usize,
    /// Calls in flight from one client (health checks aside); beyond: RESOURCE_EXHAUSTED.
    /// Default: no cap besides the fair share at --max-calls.
    #[arg(long)]
    pub max_calls_per_peer: Option<usize>,
    /// Calls in flight on one connection (health checks aside); beyond: RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = LimitsConfig::default().max_calls_per_connection)]
    pub max_calls_per_connection: usize,
    /// Bytes of (inflated) request messages all calls together may hold.
    #[arg(long, default_value_t = LimitsConfig::default().max_request_bytes_in_flight)]
    pub max_request_bytes_in_flight: usize,
    /// Bytes of (inflated) request messages one client's calls may hold together.
    /// Default: no cap besides the fair share at --max-request-bytes-in-flight.
    #[arg(long)]
    pub max_request_bytes_per_peer: Option<usize>,
    /// Leading bits of an IPv6 address that make one client for the fair shares (64: a
    /// /64, what one host is usually given; 128: each address apart). An IPv4 address
    /// is always one client.
    #[arg(long, value_name = "BITS", default_value_t = LimitsConfig::default().peer_ipv6_prefix,
          value_parser = clap::value_parser!(u8).range(1..=128))]
    pub peer_ipv6_prefix: u8,
    /// Request header naming the client's address for the per-client limits (for
    /// example x-real-ip), set by a proxy in front that overwrites it; believed only on
    /// connections from --trusted-proxy, which it needs.
    #[arg(long)]
    pub peer_header: Option<http::HeaderName>,
    /// Addresses of the proxies whose --peer-header is believed, as networks in CIDR
    /// notation or single addresses (10.0.0.0/8, 192.0.2.7, 2001:db8::/32); repeat the
    /// flag or separate with commas. From any other address the header is ignored.
    #[arg(long, value_name = "CIDR", value_delimiter = ',', value_parser = parse_proxy)]
    pub trusted_proxy: Vec<ipnet::IpNet>,
    /// Upper bound in seconds on any call (a client's shorter deadline wins); 0 is none.
    #[arg(long, value_name = "SECONDS", default_value_t = LimitsConfig::default().request_timeout)]
    pub request_timeout: Timeout,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_message_bytes: crate::codec::DEFAULT_MAX_MESSAGE_BYTES,
            max_connections: 4096,
            max_connections_per_peer: None,
            idle_under_pressure: Seconds(Duration::from_secs(5)),
            handshake_timeout: Seconds(Duration::from_secs(10)),
            connection_idle_timeout: Timeout(Some(Duration::from_secs(300))),
            max_calls: 4096,
            max_calls_per_peer: None,
            max_calls_per_connection: 1024,
            max_request_bytes_in_flight: 256 * 1024 * 1024,
            max_request_bytes_per_peer: None,
            peer_ipv6_prefix: super::connection::admission::Grouping::default().ipv6_prefix,
            peer_header: None,
            trusted_proxy: Vec::new(),
            request_timeout: Timeout(None),
        }
    }
}

impl LimitsConfig {
    /// Checks that `--peer-header` and `--trusted-proxy` come together: a header believed
    /// from anyone would let any client name itself anyone, and so take as many shares
    /// as it likes or use up another client's.
    pub fn check_proxies(&self) -> Result<(), ProxyConfigError> {
        match (&self.peer_header, self.trusted_proxy.is_empty()) {
            (Some(header), true) => Err(ProxyConfigError::HeaderWithoutProxies(header.to_string())),
            (None, false) => Err(ProxyConfigError::ProxiesWithoutHeader),
            _ => Ok(()),
        }
    }

    /// Which addresses the fair shares count as one client.
    pub(crate) fn grouping(&self) -> super::connection::admission::Grouping {
        super::connection::admission::Grouping { ipv6_prefix: self.peer_ipv6_prefix }
    }
}

/// `--peer-header` and `--trusted-proxy` given without each other.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyConfigError {
    /// A header with no proxy to believe it from.
    #[error(
        "--peer-header {0} needs --trusted-proxy CIDR, the addresses of the proxies that set it: \
         from any other address the header would let a client name itself anyone"
    )]
    HeaderWithoutProxies(String),
    /// Proxies with no header to read.
    #[error("--trusted-proxy needs --peer-header NAME, the header those proxies set")]
    ProxiesWithoutHeader,
}

/// A `--trusted-proxy` value: a network in CIDR notation, or a single address.
fn parse_proxy(value: &str) -> Result<ipnet::IpNet, String> {
    let value = value.trim();
    value
        .parse::<ipnet::IpNet>()
        .or_else(|_| value.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("{value:?} is not an address or a network in CIDR notation (10.0.0.0/8)"))
}

/// HTTP/2 and gRPC transport settings.
#[derive(Debug, Clone, clap::Args)]
pub struct Http2Config {
    /// Concurrent calls allowed on one HTTP/2 connection.
    #[arg(long, default_value_t = Http2Config::default().max_concurrent_streams)]
    pub max_concurrent_streams: u32,
    /// HTTP/2 receive window of one stream, in bytes (default: hyper's, 1 MiB).
    #[arg(long)]
    pub http2_stream_window: Option<u32>,
    /// HTTP/2 receive window of one connection, in bytes (default: hyper's).
    #[arg(long)]
    pub http2_connection_window: Option<u32>,
    /// Seconds after which a connection is sent a GOAWAY (its calls finish; the client
    /// reconnects, perhaps to another replica); 0 is never.
    #[arg(long, value_name = "SECONDS", default_value_t = Http2Config::default().max_connection_age)]
    pub max_connection_age: Timeout,
    /// Seconds after --max-connection-age that a connection is closed, calls and all;
    /// 0 is never.
    #[arg(long, value_name = "SECONDS", default_value_t = Http2Config::default().max_connection_age_grace)]
    pub max_connection_age_grace: Timeout,
    /// Compress responses for clients that accept gzip or zstd (requests are always
    /// accepted compressed). Off by default: grpc-go clients offer gzip on every call,
    /// and compressing small solutions costs more than it saves (docs/performance.md).
    #[arg(long)]
    pub compress_responses: bool,
    /// Also serve gRPC-Web on this port, for browsers: unary calls (Solve, SolveBatch)
    /// over HTTP/1.1 or HTTP/2, with CORS for the --grpc-web-origin list (for gRPC-Web
    /// and Connect calls).
    #[arg(long)]
    pub grpc_web: bool,
    /// Origin whose pages may call through gRPC-Web or Connect, as a browser sends it
    /// (for example `https://app.example.com`, no path); repeat the flag, or separate with
    /// commas, for more. Other origins get no CORS grant.
    #[arg(long = "grpc-web-origin", requires = "grpc_web", value_delimiter = ',', value_parser = parse_origin)]
    pub grpc_web_origin: Vec<String>,
    /// Serve gRPC only: no Connect protocol (unary Solve and SolveBatch as HTTP/JSON, for
    /// curl) on this port, and HTTP/1.1 connections closed unanswered unless --grpc-web.
    #[arg(long)]
    pub no_connect: bool,
}

impl Http2Config {
    /// True when a connection may speak HTTP/1.1: for the Connect door or gRPC-Web.
    pub(crate) fn accepts_http1(&self) -> bool {
        !self.no_connect || self.grpc_web
    }
}

/// Checks an origin as CORS compares it: `scheme://host[:port]`, exactly as a browser
/// sends it in `Origin`, so a trailing slash or a path would never match.
pub(crate) fn parse_origin(origin: &str) -> Result<String, String> {
    let well_formed = origin.split_once("://").is_some_and(|(scheme, host)| {
        !scheme.is_empty() && !host.is_empty() && !host.contains(['/', '?', '#'])
    }) && origin.parse::<http::Uri>().is_ok();
    match well_formed {
        true => Ok(origin.to_owned()),
        false => Err("an origin is scheme://host[:port], with no path, not even a trailing /".to_owned()),
    }
}

impl Default for Http2Config {
    fn default() -> Self {
        Http2Config {
            max_concurrent_streams: 1024,
            http2_stream_window: None,
            http2_connection_window: None,
            max_connection_age: Timeout(None),
            max_connection_age_grace: Timeout(None),
            compress_responses: false,
            grpc_web: false,
            grpc_web_origin: Vec::new(),
            no_connect: false,
        }
    }
}

/// TLS on the gRPC port: PEM files, reread on SIGHUP.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TlsConfig {
    /// PEM certificate chain: serve TLS (with --tls-key); SIGHUP rereads the files.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA certificates: require client certificates signed by them (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

impl TlsConfig {
    /// The files to load, when TLS is on.
    pub fn settings(&self) -> Option<super::TlsSettings> {
        Some(super::TlsSettings {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
            client_ca: self.tls_client_ca.clone(),
        })
    }
}

impl From<super::TlsSettings> for TlsConfig {
    fn from(settings: super::TlsSettings) -> Self {
        TlsConfig {
            tls_cert: Some(settings.cert),
            tls_key: Some(settings.key),
            tls_client_ca: settings.client_ca,
        }
    }
}

/// Metrics, logs and traces.
#[derive(Debug, Clone, clap::Args)]
pub struct ObservabilityConfig {
    /// Serve Prometheus metrics at http://ADDR/metrics (plaintext; off by default).
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Connections open at once on the metrics port; a newcomer beyond it closes an idle
    /// one of the client holding the most.
    #[arg(long, default_value_t = ObservabilityConfig::default().metrics_max_connections)]
    pub metrics_max_connections: usize,
    /// Seconds a request to the metrics port has to send its headers, from its first byte.
    #[arg(long, value_name = "SECONDS", default_value_t = ObservabilityConfig::default().metrics_header_read_timeout)]
    pub metrics_header_read_timeout: Seconds,
    /// Seconds a metrics connection may stay open with no request in progress.
    #[arg(long, value_name = "SECONDS", default_value_t = ObservabilityConfig::default().metrics_idle_timeout)]
    pub metrics_idle_timeout: Seconds,
    /// Export a trace span for every call to this OTLP/gRPC collector (for example
    /// http://127.0.0.1:4317), continuing a caller's W3C traceparent; off by default.
    #[arg(long)]
    pub otlp_endpoint: Option<http::Uri>,
    /// The service.name that exported spans carry.
    #[arg(long, default_value_t = ObservabilityConfig::default().otlp_service_name)]
    pub otlp_service_name: String,
}

impl Default for ObservabilityConfig {
    fn default() -> Self {
        let limits = super::metrics_endpoint::EndpointLimits::default();
        ObservabilityConfig {
            metrics_listen: None,
            metrics_max_connections: limits.max_connections,
            metrics_header_read_timeout: Seconds(limits.header_read_timeout),
            metrics_idle_timeout: Seconds(limits.idle_timeout),
            otlp_endpoint: None,
            otlp_service_name: "gamesolver".to_owned(),
        }
    }
}

impl ObservabilityConfig {
    /// The metrics port's bounds, counting clients by `grouping` as the gRPC port does.
    pub(crate) fn endpoint_limits(
        &self,
        grouping: super::connection::admission::Grouping,
    ) -> super::metrics_endpoint::EndpointLimits {
        super::metrics_endpoint::EndpointLimits {
            max_connections: self.metrics_max_connections,
            header_read_timeout: self.metrics_header_read_timeout.0,
            idle_timeout: self.metrics_idle_timeout.0,
            grouping,
        }
    }
}

/// Why `--check-config` refuses a configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The TLS files cannot be used.
    #[error("cannot load the TLS files: {0}")]
    Tls(#[from] super::tls::TlsError),
    /// A table file cannot be used.
    #[error("{0}")]
    Table(super::TableError),
    /// `--peer-header` and `--trusted-proxy` do not come together.
    #[error(transparent)]
    Proxies(#[from] ProxyConfigError),
}

/// Checks what start-up would load without binding a port or keeping a file: the TLS
/// files load, and each table file (if any) is a table or absent, in a directory that
/// exists and takes a new file (one is created and removed). A damaged table is not an
/// error here either: start-up recomputes it.
pub fn check(config: &ServerConfig) -> Result<(), ConfigError> {
    config.limits.check_proxies()?;
    if let Some(settings) = config.tls.settings() {
        super::ReloadableTls::load(settings)?;
    }
    super::tables::check(&config.tables).map_err(ConfigError::Table)
}

/// Prefix of the environment variables that flags can come from.
pub const ENV_PREFIX: &str = "GAMESOLVER_";

/// `command` with every long flag (help and version aside) readable from the environment
/// as `GAMESOLVER_<FLAG>`; a flag on the command line wins.
pub fn with_env(command: clap::Command) -> clap::Command {
    crate::flag_env::with_env(command, ENV_PREFIX)
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches, Parser};

    use super::*;

    #[derive(Debug, Parser)]
    struct Flags {
        #[command(flatten)]
        config: ServerConfig,
    }

    fn parse(args: &[&str]) -> Result<ServerConfig, clap::Error> {
        let matches =
            Flags::command().try_get_matches_from(std::iter::once("server").chain(args.iter().copied()))?;
        Ok(Flags::from_arg_matches(&matches)?.config)
    }

    #[test]
    fn the_flag_defaults_are_the_configs_defaults() {
        let parsed = parse(&[]).unwrap();
        let default = ServerConfig::default();
        assert_eq!(format!("{parsed:?}"), format!("{default:?}"));
    }

    #[test]
    fn trusted_proxies_are_networks_or_addresses_and_need_the_header() {
        let parsed =
            parse(&["--peer-header", "x-real-ip", "--trusted-proxy", "10.0.0.0/8, 192.0.2.7,2001:db8::/32"])
                .unwrap();
        let proxies: Vec<String> = parsed.limits.trusted_proxy.iter().map(ToString::to_string).collect();
        assert_eq!(proxies, ["10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32"]);
        assert_eq!(parsed.limits.check_proxies(), Ok(()));
        let err = parse(&["--trusted-proxy", "10.0.0.0/33"]).unwrap_err().to_string();
        assert!(err.contains("\"10.0.0.0/33\" is not an address or a network in CIDR notation"), "{err}");
        let header_alone = parse(&["--peer-header", "x-real-ip"]).unwrap().limits.check_proxies();
        assert_eq!(header_alone, Err(ProxyConfigError::HeaderWithoutProxies("x-real-ip".into())));
        let proxies_alone = parse(&["--trusted-proxy", "127.0.0.1"]).unwrap().limits.check_proxies();
        assert_eq!(proxies_alone, Err(ProxyConfigError::ProxiesWithoutHeader));
    }

    #[test]
    fn seconds_and_timeouts_parse_and_refuse() {
        let parsed = parse(&["--shutdown-timeout", "1.5", "--connection-idle-timeout", "0"]).unwrap();
        assert_eq!(parsed.shutdown_grace, Seconds(Duration::from_millis(1500)));
        assert_eq!(parsed.limits.connection_idle_timeout, Timeout(None));
        let err = parse(&["--handshake-timeout=-1"]).unwrap_err().to_string();
        assert!(err.contains("\"-1\" is not a non-negative number of seconds"), "{err}");
    }

    #[test]
    fn per_client_caps_are_off_unless_set_and_the_ipv6_prefix_is_1_to_128_bits() {
        let limits = parse(&[]).unwrap().limits;
        assert_eq!(
            (limits.max_connections_per_peer, limits.max_calls_per_peer, limits.max_request_bytes_per_peer),
            (None, None, None)
        );
        assert_eq!(limits.peer_ipv6_prefix, 64);
        let limits = parse(&["--max-calls-per-peer", "16", "--peer-ipv6-prefix", "48"]).unwrap().limits;
        assert_eq!((limits.max_calls_per_peer, limits.peer_ipv6_prefix), (Some(16), 48));
        for bad in ["0", "129"] {
            let err = parse(&["--peer-ipv6-prefix", bad]).unwrap_err().to_string();
            assert!(err.contains("1..=128"), "{bad}: {err}");
        }
    }

    #[test]
    fn grpc_web_origins_repeat_split_and_refuse_paths() {
        let parsed = parse(&[
            "--grpc-web",
            "--grpc-web-origin",
            "http://localhost:3000",
            "--grpc-web-origin=https://a.example,https://b.example:8443",
        ])
        .unwrap();
        assert!(parsed.http2.grpc_web);
        assert_eq!(
            parsed.http2.grpc_web_origin,
            ["http://localhost:3000", "https://a.example", "https://b.example:8443"]
        );
        for bad in ["http://localhost:3000/", "https://a.example/app", "localhost:3000", "*"] {
            let err = parse(&["--grpc-web", "--grpc-web-origin", bad]).unwrap_err().to_string();
            assert!(err.contains("an origin is scheme://host[:port]"), "{bad}: {err}");
        }
        let err = parse(&["--grpc-web-origin", "http://localhost:3000"]).unwrap_err().to_string();
        assert!(err.contains("--grpc-web"), "{err}");
    }

    #[test]
    fn each_games_limit_flag_is_a_flag_here_up_to_its_maximum() {
        let games = crate::games::GameKind::ALL.into_iter();
        for (flag, max) in games.filter_map(|game| Some((game.limit_flag()?, game.max_limit()?))) {
            assert!(parse(&[&flag, &max.to_string()]).is_ok(), "{flag} {max}");
            let err = parse(&[&flag, &(max + 1).to_string()]).unwrap_err().to_string();
            assert!(err.contains(&format!("..={max}")), "{flag}: {err}");
        }
    }

    #[test]
    fn every_flag_has_its_environment_variable() {
        let command = with_env(Flags::command());
        for arg in command.get_arguments().filter(|arg| arg.get_long().is_some_and(|l| l != "help")) {
            let long = arg.get_long().unwrap();
            let env = arg.get_env().unwrap_or_else(|| panic!("--{long} has no environment variable"));
            assert_eq!(
                env.to_str().unwrap(),
                format!("GAMESOLVER_{}", long.to_uppercase().replace('-', "_"))
            );
        }
    }
}

//! The `/metrics` port's bounds: a connection cap that evicts idle connections for
//! newcomers, the header-read and idle timeouts, the gRPC port unaffected by a flood on
//! it, and the process metrics it serves.

use crate::common;
use crate::production;

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::TestServer;
use gamesolver::seconds::Seconds;
use gamesolver::server::config::ObservabilityConfig;
use gamesolver::server::ServerConfig;
use production::{metrics_listen, scrape, series};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longer than any bound a test sets: what "never" means in a test that must end.
const LONG: Duration = Duration::from_secs(60);

/// How long a test waits for something that should happen at once, or after a short
/// configured timeout. Generous: only a broken server waits this long.
const PATIENCE: Duration = Duration::from_secs(10);

async fn start(config: ServerConfig) -> (TestServer, SocketAddr) {
    let mut config = config;
    config.observability.metrics_listen = Some(metrics_listen());
    let server = TestServer::start(config).await;
    let addr = server.metrics_addr();
    (server, addr)
}

/// The default configuration with the metrics port's bounds changed by `change`.
fn endpoint(change: impl FnOnce(&mut ObservabilityConfig)) -> ServerConfig {
    let mut config = ServerConfig::default();
    change(&mut config.observability);
    config
}

/// A scrape on a new connection; fails rather than hangs if it is not answered.
async fn scrape_in_time(metrics: SocketAddr) -> String {
    tokio::time::timeout(PATIENCE, scrape(metrics)).await.expect("a scrape answered in time")
}

/// True if the server has closed `stream` (end of file or reset) within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(within, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {} // a response's bytes: keep reading
        }
    }
}

/// Sends `GET /metrics` with keep-alive on `stream` and reads one response: its status
/// line and body.
async fn request(stream: &mut TcpStream, method: &str, path: &str) -> (String, String) {
    let head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut data = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let response = tokio::time::timeout(PATIENCE, async {
        loop {
            let n = stream.read(&mut buf).await.expect("read a response");
            assert!(n > 0, "connection closed before a whole response: {:?}", String::from_utf8_lossy(&data));
            data.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&data).into_owned();
            let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
            let length = head
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase().strip_prefix("content-length:")?.trim().parse().ok()
                })
                .unwrap_or(0usize);
            let length = if method == "HEAD" { 0 } else { length };
            if body.len() >= length {
                return (head.lines().next().unwrap_or_default().to_owned(), body.to_owned());
            }
        }
    });
    response.await.expect("a response in time")
}

#[tokio::test]
async fn a_new_scraper_is_served_while_idle_connections_hold_the_cap() {
    let config = endpoint(|o| {
        o.metrics_max_connections = 4;
        o.metrics_header_read_timeout = Seconds(LONG);
        o.metrics_idle_timeout = Seconds(LONG);
    });
    let (_server, metrics) = start(config).await;
    // Twice the cap in connections that never send a byte.
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(metrics).await.unwrap());
    }
    let text = scrape_in_time(metrics).await;
    assert!(text.contains("gamesolver_build_info"), "{text}");
    // Each newcomer closed the connection waiting longest: the first four for the last
    // four, the fifth for the scraper. The last three are still open.
    for (i, stream) in held.iter_mut().enumerate().take(5) {
        assert!(closed_within(stream, PATIENCE).await, "held connection {i} is still open");
    }
    for (i, stream) in held.iter_mut().enumerate().skip(5) {
        assert!(!closed_within(stream, Duration::from_millis(300)).await, "held connection {i} was closed");
    }
}

#[tokio::test]
async fn a_slowloris_is_closed_after_the_header_read_timeout() {
    let config = endpoint(|o| {
        o.metrics_header_read_timeout = Seconds(Duration::from_secs(1));
        o.metrics_idle_timeout = Seconds(LONG);
    });
    let (_server, metrics) = start(config).await;
    let mut slow = TcpStream::connect(metrics).await.unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
    // A header byte every 100 ms: never idle, never done. Bounded by PATIENCE.
    let mut sent = 0;
    let mut buf = [0u8; 256];
    let closed = loop {
        if sent * 100 > PATIENCE.as_millis() {
            break false;
        }
        tokio::select! {
            read = slow.read(&mut buf) => {
                match read {
                    Ok(0) | Err(_) => break true,
                    Ok(n) => panic!("a response to a request never finished: {:?}", String::from_utf8_lossy(&buf[..n])),
                }
            }
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                if slow.write_all(b"x").await.is_err() {
                    break true;
                }
                sent += 1;
            }
        }
    };
    assert!(closed, "a slowloris still open after {sent} header bytes");
    // Bytes kept arriving until the close, so it was the header timer, not the idle one
    // (a minute here), that closed it.
    assert!(sent >= 3, "closed after {sent} header bytes");
    let text = scrape_in_time(metrics).await;
    assert!(text.contains("gamesolver_build_info"));
}

#[tokio::test]
async fn the_header_read_timeout_does_not_close_an_idle_keep_alive_connection() {
    let config = endpoint(|o| {
        o.metrics_header_read_timeout = Seconds(Duration::from_secs(1));
        o.metrics_idle_timeout = Seconds(LONG);
    });
    let (_server, metrics) = start(config).await;
    let mut stream = TcpStream::connect(metrics).await.unwrap();
    let (status, _) = request(&mut stream, "GET", "/metrics").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    // Idle for longer than the header-read timeout: hyper's own would close it here.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, body) = request(&mut stream, "GET", "/metrics").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(body.contains("gamesolver_build_info"));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let config = endpoint(|o| {
        o.metrics_header_read_timeout = Seconds(LONG);
        o.metrics_idle_timeout = Seconds(Duration::from_secs(1));
    });
    let (_server, metrics) = start(config).await;
    let mut stream = TcpStream::connect(metrics).await.unwrap();
    // Keep-alive is honoured: two requests on one connection.
    for _ in 0..2 {
        let (status, body) = request(&mut stream, "GET", "/metrics").await;
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        assert!(body.ends_with("# EOF\n"), "{body}");
    }
    assert!(closed_within(&mut stream, PATIENCE).await, "an idle connection still open");
}

#[tokio::test]
async fn only_get_and_head_of_metrics_are_answered() {
    let (_server, metrics) = start(ServerConfig::default()).await;
    let mut stream = TcpStream::connect(metrics).await.unwrap();
    let (status, body) = request(&mut stream, "HEAD", "/metrics").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(body, "");
    let (status, _) = request(&mut stream, "POST", "/metrics").await;
    assert!(status.starts_with("HTTP/1.1 405"), "{status}");
    let (status, _) = request(&mut stream, "GET", "/").await;
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    // A request head beyond the endpoint's buffer is refused, not buffered.
    let mut big = TcpStream::connect(metrics).await.unwrap();
    let huge =
        format!("GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "a".repeat(64 * 1024));
    let _ = big.write_all(huge.as_bytes()).await;
    let mut response = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, big.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response);
    assert!(!response.contains(" 200 "), "{response}");
}

#[tokio::test]
async fn the_grpc_port_serves_while_the_metrics_port_is_flooded() {
    const FLOOD: usize = 200;
    let (server, metrics) = start(ServerConfig::default()).await;
    let cap = ServerConfig::default().observability.metrics_max_connections;
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        flood.push(TcpStream::connect(metrics).await.unwrap());
    }
    let mut client = server.client().await;
    let solution = common::solve(&mut client, common::sum("a", "25??")).await.unwrap();
    assert_eq!(solution.id, "a");
    let text = scrape_in_time(metrics).await;
    assert!(text.contains("gamesolver_build_info"));
    // The server holds at most its cap of them; it closed the rest.
    let closed = futures::future::join_all(
        flood.iter_mut().map(|stream| closed_within(stream, Duration::from_secs(2))),
    )
    .await;
    let closed = closed.into_iter().filter(|&closed| closed).count();
    assert!(closed >= FLOOD - cap, "only {closed} of {FLOOD} flood connections closed (cap {cap})");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_process_metrics_are_served_with_plausible_values() {
    let (_server, metrics) = start(ServerConfig::default()).await;
    let text = scrape_in_time(metrics).await;
    let value = |name: &str| series(&text, name).unwrap_or_else(|| panic!("{name} missing:\n{text}"));
    assert!(value("process_resident_memory_bytes") > 0.0);
    assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
    assert!(value("process_open_fds") > 0.0);
    assert!(value("process_max_fds") >= value("process_open_fds"));
    assert!(value("process_threads") >= 1.0);
    assert!(value("process_cpu_seconds_total") >= 0.0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let started = value("process_start_time_seconds");
    // The boot time the start is counted from has a resolution of one second.
    assert!(started > now - 3600.0 && started <= now + 1.0, "started {started}, now {now}");
    // Standard names: no crate prefix on them, and the crate's own still carry it.
    assert!(!text.contains("gamesolver_process_"));
    assert!(text.contains("gamesolver_build_info"));
}

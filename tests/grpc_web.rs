//! gRPC-Web on the gRPC port behind `--grpc-web`: a browser's CORS preflight and unary
//! call over HTTP/1.1, written on raw TCP as a browser sends them, seen by the metrics
//! like any call, closed by the idle timeout without HTTP/2 bytes and at once on shutdown;
//! the same origins' Connect calls (preflight, POST and GET) beside it; and with neither
//! it nor the Connect door (`--no-connect`), HTTP/1.1 closed unanswered.
//! `.ci/grpc-web.sh` runs a real gRPC-Web client.

use crate::common;
use crate::production;

use std::time::Duration;

use common::{solve, sum, TestServer};
use gamesolver::pb;
use gamesolver::server::config::{Seconds, Timeout};
use gamesolver::server::ServerConfig;
use production::{metrics_listen, settled};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ORIGIN: &str = "http://localhost:3000";
const SOLVE: &str = "/gamesolver.v1.GameSolverService/Solve";
const PATIENCE: Duration = Duration::from_secs(10);

/// The default configuration with gRPC-Web on for `ORIGIN`, and a metrics port.
fn grpc_web() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.http2.grpc_web = true;
    config.http2.grpc_web_origin = vec![ORIGIN.to_owned()];
    config.observability.metrics_listen = Some(metrics_listen());
    config
}

/// An HTTP/1.1 response: status, headers (names lower case) and body (chunks joined).
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads one response from `socket`, whose bytes so far are in `buf`.
async fn read_response(socket: &mut TcpStream, buf: &mut Vec<u8>) -> Response {
    async fn more(socket: &mut TcpStream, buf: &mut Vec<u8>) {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.expect("read a response");
        assert!(n > 0, "the server closed mid-response: {:?}", String::from_utf8_lossy(buf));
        buf.extend_from_slice(&chunk[..n]);
    }
    let response = async {
        let head_end = loop {
            if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at;
            }
            more(socket, buf).await;
        };
        let head = String::from_utf8(buf.drain(..head_end + 4).collect()).unwrap();
        let mut lines = head.trim_end().split("\r\n");
        let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .map(|line| {
                let (name, value) = line.split_once(':').unwrap();
                (name.trim().to_ascii_lowercase(), value.trim().to_owned())
            })
            .collect();
        let find = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        let mut body = Vec::new();
        if let Some(length) = find("content-length") {
            let length: usize = length.parse().unwrap();
            while buf.len() < length {
                more(socket, buf).await;
            }
            body.extend(buf.drain(..length));
        } else if find("transfer-encoding").is_some_and(|te| te.contains("chunked")) {
            loop {
                let line_end = loop {
                    if let Some(at) = buf.windows(2).position(|w| w == b"\r\n") {
                        break at;
                    }
                    more(socket, buf).await;
                };
                let size_line = String::from_utf8(buf.drain(..line_end + 2).collect()).unwrap();
                let size = usize::from_str_radix(size_line.trim().split(';').next().unwrap(), 16).unwrap();
                while buf.len() < size + 2 {
                    more(socket, buf).await;
                }
                body.extend(buf.drain(..size));
                buf.drain(..2);
                if size == 0 {
                    break;
                }
            }
        }
        Response { status, headers, body }
    };
    tokio::time::timeout(PATIENCE, response).await.expect("a response in time")
}

/// A CORS preflight of a Solve call from `origin`, as a browser sends it.
fn preflight(origin: &str) -> String {
    format!(
        "OPTIONS {SOLVE} HTTP/1.1\r\nHost: localhost\r\nOrigin: {origin}\r\n\
         Access-Control-Request-Method: POST\r\n\
         Access-Control-Request-Headers: content-type,x-grpc-web,x-user-agent,grpc-timeout\r\n\r\n"
    )
}

/// A gRPC-Web Solve call of `problem` from `ORIGIN`: binary protobuf, one framed message.
fn grpc_web_solve(problem: pb::Problem) -> Vec<u8> {
    let message = pb::SolveRequest { problem: Some(problem), winner_only: false }.encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&(message.len() as u32).to_be_bytes());
    body.extend_from_slice(&message);
    let head = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nOrigin: {ORIGIN}\r\n\
         Content-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\nX-User-Agent: test\r\n\
         Grpc-Timeout: 10S\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    [head.into_bytes(), body].concat()
}

/// Splits a gRPC-Web response body into its messages and its trailers' text.
fn grpc_web_frames(mut body: &[u8]) -> (Vec<Vec<u8>>, String) {
    let (mut messages, mut trailers) = (Vec::new(), String::new());
    while body.len() >= 5 {
        let length = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        let payload = body[5..5 + length].to_vec();
        match body[0] & 0x80 {
            0 => messages.push(payload),
            _ => trailers.push_str(&String::from_utf8(payload).unwrap()),
        }
        body = &body[5 + length..];
    }
    assert!(body.is_empty(), "a truncated gRPC-Web frame");
    (messages, trailers)
}

/// Reads until the server closes `socket`, within `PATIENCE`; returns what it sent.
async fn read_until_closed(socket: &mut TcpStream) -> Vec<u8> {
    let mut received = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, async {
        let mut buf = [0u8; 4096];
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the server kept the connection open");
    received
}

#[tokio::test]
async fn a_preflight_from_an_allowed_origin_is_granted_and_from_another_is_not() {
    let server = TestServer::start(grpc_web()).await;
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let mut buf = Vec::new();

    socket.write_all(preflight(ORIGIN).as_bytes()).await.unwrap();
    let granted = read_response(&mut socket, &mut buf).await;
    assert_eq!(granted.status, 200, "{granted:?}");
    assert_eq!(granted.header("access-control-allow-origin"), Some(ORIGIN), "{granted:?}");
    let methods = granted.header("access-control-allow-methods").unwrap_or_default().to_uppercase();
    assert!(methods.contains("POST"), "{granted:?}");
    let allowed = granted.header("access-control-allow-headers").unwrap_or_default().to_lowercase();
    for name in ["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout"] {
        assert!(allowed.contains(name), "{name} not allowed: {granted:?}");
    }

    // The same connection, kept alive: another origin gets no grant.
    socket.write_all(preflight("http://evil.example").as_bytes()).await.unwrap();
    let refused = read_response(&mut socket, &mut buf).await;
    assert_eq!(refused.header("access-control-allow-origin"), None, "{refused:?}");
}

/// A CORS preflight of a Connect call to Solve from `ORIGIN` with `method`, asking for
/// every header a Connect client may send.
fn connect_preflight(method: &str) -> String {
    format!(
        "OPTIONS {SOLVE} HTTP/1.1\r\nHost: localhost\r\nOrigin: {ORIGIN}\r\n\
         Access-Control-Request-Method: {method}\r\n\
         Access-Control-Request-Headers: {CONNECT_HEADERS}\r\n\r\n"
    )
}

/// The request headers of a Connect unary call that are not CORS-safelisted.
const CONNECT_HEADERS: &str =
    "content-type,connect-protocol-version,connect-timeout-ms,content-encoding,accept-encoding";

#[tokio::test]
async fn a_connect_call_from_an_allowed_origin_passes_its_preflight_and_is_answered() {
    let server = TestServer::start(grpc_web()).await;
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let mut buf = Vec::new();
    for method in ["POST", "GET"] {
        socket.write_all(connect_preflight(method).as_bytes()).await.unwrap();
        let granted = read_response(&mut socket, &mut buf).await;
        assert_eq!(granted.status, 200, "{granted:?}");
        assert_eq!(granted.header("access-control-allow-origin"), Some(ORIGIN), "{granted:?}");
        let methods = granted.header("access-control-allow-methods").unwrap_or_default().to_uppercase();
        assert!(methods.split(',').any(|m| m.trim() == method), "{method} not allowed: {granted:?}");
        let allowed = granted.header("access-control-allow-headers").unwrap_or_default().to_lowercase();
        let allowed: Vec<&str> = allowed.split(',').map(str::trim).collect();
        for name in CONNECT_HEADERS.split(',') {
            assert!(allowed.contains(&name), "{name} not allowed: {granted:?}");
        }
    }

    // The call itself, as a browser sends it after the preflight: answered, with the grant.
    let body = r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#;
    let call = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nOrigin: {ORIGIN}\r\n\
         Content-Type: application/json\r\nConnect-Protocol-Version: 1\r\nConnect-Timeout-Ms: 10000\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(call.as_bytes()).await.unwrap();
    let answer = read_response(&mut socket, &mut buf).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.header("access-control-allow-origin"), Some(ORIGIN), "{answer:?}");
    assert_eq!(
        String::from_utf8(answer.body).unwrap(),
        r#"{"solution":{"id":"a1","aliceWins":true,"winner":"WINNER_ALICE","winningMove":{"sumGame":{"index":"2","digit":9}}}}"#
    );

    // And its GET form, which a browser sends without a preflight when it adds no header.
    let get = format!(
        "GET {SOLVE}?connect=v1&encoding=json&message=%7B%22problem%22%3A%7B%22id%22%3A%22g%22%2C%22sumGame%22%3A%7B%22num%22%3A%2211%22%7D%7D%7D HTTP/1.1\r\n\
         Host: localhost\r\nOrigin: {ORIGIN}\r\n\r\n"
    );
    socket.write_all(get.as_bytes()).await.unwrap();
    let answer = read_response(&mut socket, &mut buf).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.header("access-control-allow-origin"), Some(ORIGIN), "{answer:?}");
    assert_eq!(
        String::from_utf8(answer.body).unwrap(),
        r#"{"solution":{"id":"g","aliceWins":false,"winner":"WINNER_BOB"}}"#
    );
}

#[tokio::test]
async fn a_grpc_web_solve_over_http1_is_answered_and_counted() {
    let server = TestServer::start(grpc_web()).await;
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let mut buf = Vec::new();
    for id in ["first", "second"] {
        socket.write_all(&grpc_web_solve(sum(id, "25??"))).await.unwrap();
        let response = read_response(&mut socket, &mut buf).await;
        assert_eq!(response.status, 200, "{response:?}");
        assert!(
            response.header("content-type").is_some_and(|ct| ct.starts_with("application/grpc-web")),
            "{response:?}"
        );
        assert_eq!(response.header("access-control-allow-origin"), Some(ORIGIN), "{response:?}");
        let exposed = response.header("access-control-expose-headers").unwrap_or_default().to_lowercase();
        assert!(
            exposed.contains("grpc-status") && exposed.contains("grpc-status-details-bin"),
            "{response:?}"
        );
        let (messages, trailers) = grpc_web_frames(&response.body);
        assert!(trailers.contains("grpc-status:0"), "trailers: {trailers:?}");
        assert_eq!(messages.len(), 1);
        let solution = pb::SolveResponse::decode(&messages[0][..]).unwrap().solution.unwrap();
        assert_eq!(solution.id, id);
        assert_eq!(solution.winner, pb::Winner::Alice as i32);
    }
    // GrpcWebLayer sits outside the metrics: they count the calls as any gRPC call.
    let ok =
        "gamesolver_calls_total{service=\"gamesolver.v1.GameSolverService\",method=\"Solve\",code=\"OK\"}";
    assert_eq!(settled(server.metrics_addr(), ok, 2.0).await, Some(2.0));
    // And HTTP/2 gRPC is served beside it.
    let mut client = server.client().await;
    assert_eq!(solve(&mut client, sum("h2", "25??")).await.unwrap().id, "h2");
}

#[tokio::test]
async fn an_idle_http1_connection_is_closed_with_no_http2_bytes() {
    let mut config = grpc_web();
    config.limits.connection_idle_timeout = Timeout(Some(Duration::from_millis(300)));
    let server = TestServer::start(config).await;
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let mut buf = Vec::new();
    socket.write_all(&grpc_web_solve(sum("a", "25??"))).await.unwrap();
    assert_eq!(read_response(&mut socket, &mut buf).await.status, 200);
    // No GOAWAY after the answer: an HTTP/1.1 connection only sees its end.
    let after = read_until_closed(&mut socket).await;
    assert!(buf.is_empty() && after.is_empty(), "bytes after the answer: {buf:?} {after:?}");
}

#[tokio::test]
async fn the_handshake_timeout_holds_with_grpc_web_on() {
    let mut config = grpc_web();
    config.limits.handshake_timeout = Seconds(Duration::from_millis(200));
    let server = TestServer::start(config).await;
    // A peer that stops partway through what could still be the HTTP/2 preface.
    let mut stalled = TcpStream::connect(server.addr).await.unwrap();
    stalled.write_all(b"PRI * HTTP/2").await.unwrap();
    assert!(read_until_closed(&mut stalled).await.is_empty());
}

#[tokio::test]
async fn with_neither_grpc_web_nor_connect_http1_is_closed_unanswered() {
    let mut config = ServerConfig::default();
    config.http2.no_connect = true;
    let server = TestServer::start(config).await;
    for request in [preflight(ORIGIN).into_bytes(), grpc_web_solve(sum("a", "25??"))] {
        let mut socket = TcpStream::connect(server.addr).await.unwrap();
        socket.write_all(&request).await.unwrap();
        let answer = read_until_closed(&mut socket).await;
        assert!(answer.is_empty(), "answered: {:?}", String::from_utf8_lossy(&answer));
    }
    let mut client = server.client().await;
    assert_eq!(solve(&mut client, sum("h2", "25??")).await.unwrap().id, "h2");
}

#[tokio::test]
async fn shutdown_closes_an_idle_http1_connection_at_once() {
    let mut server = TestServer::start(grpc_web()).await;
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let mut buf = Vec::new();
    socket.write_all(&grpc_web_solve(sum("a", "25??"))).await.unwrap();
    assert_eq!(read_response(&mut socket, &mut buf).await.status, 200);
    // The shutdown grace is 30 s: a server that waited on the kept-alive connection
    // would not be done within PATIENCE.
    server.trigger_shutdown();
    assert!(read_until_closed(&mut socket).await.is_empty());
    let done = tokio::time::timeout(PATIENCE, &mut server.task).await.expect("the server stopped in time");
    done.unwrap().unwrap();
}

/// A `grpc-web-text` body that is not base64 is the client's fault: `INVALID_ARGUMENT`,
/// counted so, never as a server error (`INTERNAL` would fire the server-error alert).
#[tokio::test]
async fn grpc_web_text_that_is_not_base64_is_invalid_argument() {
    let server = TestServer::start(grpc_web()).await;
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    let body = "AAAAAA!!not base64!!";
    let request = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nOrigin: {ORIGIN}\r\n\
         Content-Type: application/grpc-web-text\r\nX-Grpc-Web: 1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let response = read_response(&mut socket, &mut Vec::new()).await;
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(response.header("grpc-status"), Some("3"), "{response:?}");
    let message = response.header("grpc-message").unwrap_or_default();
    assert!(message.starts_with("malformed%20gRPC-Web%20request"), "{response:?}");
    let calls = |code: &str| {
        format!("gamesolver_calls_total{{service=\"gamesolver.v1.GameSolverService\",method=\"Solve\",code=\"{code}\"}}")
    };
    assert_eq!(settled(server.metrics_addr(), &calls("INVALID_ARGUMENT"), 1.0).await, Some(1.0));
    assert_eq!(settled(server.metrics_addr(), &calls("INTERNAL"), 0.0).await, None);
}

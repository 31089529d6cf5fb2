//! One client cannot take the server from the others: each case is one client holding
//! what it can of a bound (connections, calls, request bytes) while bystanders, on
//! connections of their own from other addresses and from the same one, are served.
//! Clients come from different 127.0.0.0/8 addresses, which the server counts apart.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{limits, solve, sum, Client, TestServer};
use gamesolver::seconds::Seconds;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tonic::Code;

/// Upper bound on any wait for the server to act; only reached when a bound is broken.
const PATIENCE: Duration = Duration::from_secs(20);

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// A Solve answered within the patience (a bound that blocks bystanders hangs here).
async fn answered(client: &mut Client, id: &str) {
    let answer = tokio::time::timeout(PATIENCE, solve(client, sum(id, "25??"))).await;
    assert_eq!(answer.expect("answered, not held up").expect("solved").id, id);
}

/// A raw TCP connection to `server` from `ip`.
async fn connect_from(server: &TestServer, ip: [u8; 4]) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((ip, 0))).unwrap();
    socket.connect(server.addr).await.unwrap()
}

/// Reads until the server closes `socket`, within the patience.
async fn closed_by_server(socket: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 4096];
    let closed = tokio::time::timeout(PATIENCE, async {
        while let Ok(read) = socket.read(&mut buf).await {
            if read == 0 {
                return;
            }
        }
    });
    closed.await.unwrap_or_else(|_| panic!("the server did not close {what}"));
}

/// An h2 connection from `ip` with `streams` Solve calls, each of which sends a gRPC
/// header announcing 64 MiB and `payload` bytes of it, then stalls. Returns what keeps
/// them open.
async fn stalled_solves(
    server: &TestServer,
    ip: [u8; 4],
    streams: usize,
    payload: usize,
) -> Vec<Box<dyn Send>> {
    let tcp = connect_from(server, ip).await;
    let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut held: Vec<Box<dyn Send>> = Vec::new();
    for _ in 0..streams {
        let request =
            http::Request::post(format!("http://{}/gamesolver.v1.GameSolverService/Solve", server.addr))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
        let (response, mut body) = client.send_request(request, false).unwrap();
        let mut message = vec![0u8];
        message.extend_from_slice(&(64u32 << 20).to_be_bytes());
        message.resize(5 + payload, b'1');
        body.send_data(message.into(), false).unwrap();
        held.push(Box::new((response, body)));
    }
    held.push(Box::new(client));
    held
}

#[tokio::test]
async fn stalled_message_headers_do_not_hold_up_other_messages() {
    let server = TestServer::start(common::limits(|_| {})).await;
    // Header only, then a stall: holds no request memory at all.
    let _headers = stalled_solves(&server, [127, 0, 0, 2], 2, 0).await;
    // Header and a byte: the first stream of each of three clients reserves its whole
    // message (128 MiB with the decoded copy), the rest wait holding nothing.
    let mut attackers = Vec::new();
    for ip in [[127, 0, 0, 3], [127, 0, 0, 4], [127, 0, 0, 5]] {
        attackers.push(stalled_solves(&server, ip, 2, 1).await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    answered(&mut server.client_from([127, 0, 0, 6]).await, "new client").await;
    answered(&mut server.client_from([127, 0, 0, 3]).await, "an attacker's address, new connection").await;
    answered(&mut server.client().await, "loopback").await;
}

#[tokio::test]
async fn a_client_holding_its_calls_does_not_lock_out_the_others() {
    let config = limits(|limits| {
        limits.max_calls = 16;
        limits.max_calls_per_peer = 8;
    });
    let server = TestServer::start(config).await;
    // Calls that send headers and nothing else, as many as the client may hold.
    let _held = stalled_solves(&server, [127, 0, 0, 2], 8, 0).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut attacker = server.client_from([127, 0, 0, 2]).await;
    let status = solve(&mut attacker, sum("ninth", "11")).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(status.message(), "too many calls in flight from this client (limit 8 a client); retry later");
    answered(&mut server.client_from([127, 0, 0, 3]).await, "bystander").await;
    answered(&mut server.client().await, "another bystander").await;
}

#[tokio::test]
async fn silent_connections_hold_only_their_clients_share_and_close_under_pressure() {
    let config = limits(|limits| {
        limits.max_connections = 16;
        limits.max_connections_per_peer = 8;
        limits.idle_under_pressure = Seconds(Duration::from_millis(300));
    });
    let server = TestServer::start(config).await;
    // Preface and SETTINGS, then nothing: the first eight are this client's share.
    let mut silent = Vec::new();
    for _ in 0..8 {
        let mut tcp = connect_from(&server, [127, 0, 0, 2]).await;
        tcp.write_all(PREFACE).await.unwrap();
        tcp.write_all(SETTINGS).await.unwrap();
        silent.push(tcp);
    }
    // The ninth is closed at once.
    let mut ninth = connect_from(&server, [127, 0, 0, 2]).await;
    // The server may have closed it before this is written.
    let _ = ninth.write_all(PREFACE).await;
    closed_by_server(&mut ninth, "the ninth connection").await;
    // A bystander is served meanwhile.
    answered(&mut server.client_from([127, 0, 0, 3]).await, "bystander").await;
    // Another client fills the server past 7/8 of its cap: connections without a call
    // close after --idle-under-pressure (the oldest idle first) until it is below 7/8
    // again; the first silent one is among them.
    let mut second = Vec::new();
    for _ in 0..7 {
        let mut tcp = connect_from(&server, [127, 0, 0, 4]).await;
        tcp.write_all(PREFACE).await.unwrap();
        tcp.write_all(SETTINGS).await.unwrap();
        second.push(tcp);
    }
    closed_by_server(&mut silent[0], "the oldest silent connection").await;
    answered(&mut server.client_from([127, 0, 0, 5]).await, "a new bystander").await;
}

/// Opens a `SolveStream` call from `ip` for each of `names`, sending it as `x-real-ip`
/// (none for `None`), and keeps the calls open. Returns the `grpc-status` of each call's
/// response headers (`None`: admitted, and held open) and what keeps them open.
async fn calls_naming(
    server: &TestServer,
    ip: [u8; 4],
    names: &[Option<&str>],
) -> (Vec<Option<String>>, Vec<Box<dyn Send>>) {
    let tcp = connect_from(server, ip).await;
    let (mut client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let (mut statuses, mut held): (Vec<_>, Vec<Box<dyn Send>>) = (Vec::new(), Vec::new());
    for name in names {
        let mut request = http::Request::post(format!(
            "http://{}/gamesolver.v1.GameSolverService/SolveStream",
            server.addr
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
        if let Some(name) = name {
            request = request.header("x-real-ip", *name);
        }
        let (response, body) = client.send_request(request.body(()).unwrap(), false).unwrap();
        let response = tokio::time::timeout(PATIENCE, response).await.expect("response headers").unwrap();
        statuses.push(response.headers().get("grpc-status").map(|s| s.to_str().unwrap().to_owned()));
        held.push(Box::new((response, body)));
    }
    held.push(Box::new(client));
    (statuses, held)
}

/// `--peer-header` is believed only on connections from a `--trusted-proxy`: from anyone
/// else a client could name itself anyone, to take a share per call or use up another
/// client's.
#[tokio::test]
async fn the_peer_header_is_believed_only_from_a_trusted_proxy() {
    let config = limits(|limits| {
        limits.max_calls_per_peer = 2;
        limits.peer_header = Some(http::HeaderName::from_static("x-real-ip"));
        limits.trusted_proxy = vec!["127.0.0.2/32".parse().unwrap()];
    });
    let server = TestServer::start(config).await;
    let refused = Some("8".to_owned());

    // A forged address per call, from an untrusted address: its own calls, its own cap.
    let names = [Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.3")];
    let (statuses, _forger) = calls_naming(&server, [127, 0, 0, 3], &names).await;
    assert_eq!(statuses, [None, None, refused.clone()]);
    // Naming a real client does not use up that client's share.
    let names = [Some("127.0.0.4"), Some("127.0.0.4")];
    let (statuses, _impostor) = calls_naming(&server, [127, 0, 0, 5], &names).await;
    assert_eq!(statuses, [None, None]);
    let (statuses, _victim) = calls_naming(&server, [127, 0, 0, 4], &[None, None]).await;
    assert_eq!(statuses, [None, None]);

    // From the proxy, each client it names has a share of its own.
    let names = [Some("10.0.0.1"), Some("10.0.0.1"), Some("10.0.0.2"), Some("10.0.0.2"), Some("10.0.0.1")];
    let (statuses, _proxied) = calls_naming(&server, [127, 0, 0, 2], &names).await;
    assert_eq!(statuses, [None, None, None, None, refused]);
    // A bystander is served meanwhile.
    answered(&mut server.client_from([127, 0, 0, 6]).await, "bystander").await;
}

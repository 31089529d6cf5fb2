//! No client, and no number of heavy clients, can take the server from the others: each
//! case is clients holding what they can of a bound (connections, calls, request bytes)
//! while bystanders, on connections of their own from other addresses and from the same
//! one, are served; and a lone client may use all the server has. Clients come from
//! different 127.0.0.0/8 addresses, which the server counts apart. The cases scale the
//! server's bounds down and keep their ratios.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{limits, solve, stream_request, sum, Client, TestServer};
use gamesolver::pb;
use gamesolver::seconds::Seconds;
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Status};
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

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
    connect_to(server.addr, ip).await
}

/// A raw TCP connection to `addr` from `ip`.
async fn connect_to(addr: SocketAddr, ip: [u8; 4]) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((ip, 0))).unwrap();
    socket.connect(addr).await.unwrap()
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
    // Header and a byte: the first such stream reserves its whole message (128 MiB with
    // the decoded copy, half the budget); each other one would take the budget past its
    // limit and its client past its fair share, so it waits holding nothing.
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
        limits.max_calls_per_peer = Some(8);
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
        limits.max_connections_per_peer = Some(8);
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
        limits.max_calls_per_peer = Some(2);
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

/// The status of a call ended to make room for a client within its fair share.
const PREEMPTED: &str =
    "server overloaded: this call made way for a client under its fair share; retry later";

/// A `SolveStream` call that has had one answer and stays open.
type HeldStream = (mpsc::Sender<pb::SolveStreamRequest>, tonic::Streaming<pb::SolveStreamResponse>);

/// Opens a `SolveStream` call and has one answer back, so that the call is surely in
/// flight; or the status it was refused with.
async fn hold_stream(client: &mut Client) -> Result<HeldStream, Status> {
    let (send, requests) = mpsc::channel(4);
    send.send(stream_request(sum("first", "11"))).await.unwrap();
    let call = client.solve_stream(ReceiverStream::new(requests));
    let mut answers = tokio::time::timeout(PATIENCE, call).await.expect("answered")?.into_inner();
    let first = tokio::time::timeout(PATIENCE, answers.message()).await.expect("answered")?;
    assert!(first.is_some(), "the stream ended without its answer");
    Ok((send, answers))
}

/// Whether a held stream still answers, or the status it ended with.
async fn still_open((send, mut answers): HeldStream) -> Result<(), Status> {
    // A stream that has ended may have stopped reading its requests.
    let _ = send.send(stream_request(sum("again", "11"))).await;
    match tokio::time::timeout(PATIENCE, answers.message()).await.expect("answered or ended") {
        Ok(Some(_)) => Ok(()),
        Ok(None) => panic!("the stream ended with OK"),
        Err(status) => Err(status),
    }
}

/// A health check on a new connection from `ip` to `server`, as a liveness probe makes.
async fn probe(server: &TestServer, ip: [u8; 4]) {
    probe_at(server.addr, ip).await;
}

/// A health check on a new connection from `ip` to `addr`.
async fn probe_at(addr: SocketAddr, ip: [u8; 4]) {
    let check = async {
        let mut health = HealthClient::new(common::channel_from(addr, ip).await);
        health.check(HealthCheckRequest { service: String::new() }).await
    };
    let serving = tokio::time::timeout(PATIENCE, check).await.expect("the probe connected and was answered");
    assert_eq!(serving.unwrap().into_inner().status, 1, "SERVING");
}

#[tokio::test]
async fn five_heavy_clients_holding_streams_cannot_keep_a_newcomer_out() {
    // Five clients with a connection each, as many streams as a connection may carry,
    // against a server limit they exceed together by a quarter: the 5 x 1,024
    // streams against 4,096 calls, at a 64th of the scale.
    let config = limits(|limits| {
        limits.max_calls = 64;
        limits.max_calls_per_connection = 16;
    });
    let server = TestServer::start(config).await;
    let mut held = Vec::new();
    let mut refused = Vec::new();
    for ip in 2..=6 {
        let mut attacker = server.client_from([127, 0, 0, ip]).await;
        for _ in 0..16 {
            match hold_stream(&mut attacker).await {
                Ok(stream) => held.push(stream),
                Err(status) => refused.push(status),
            }
        }
    }
    // The first four fill the server; the fifth gets its fair share (64 / 5, so 12),
    // each stream taken from the client holding the most, and is refused beyond it,
    // with the count that is really held.
    assert_eq!(held.len(), 4 * 16 + 12);
    assert_eq!(refused.len(), 4);
    for status in &refused {
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        assert_eq!(status.message(), "server overloaded: 64 calls in flight, its limit; retry later");
    }
    // A newcomer is served: one more stream of the heaviest makes way.
    answered(&mut server.client_from([127, 0, 0, 7]).await, "newcomer").await;
    probe(&server, [127, 0, 0, 8]).await;
    let mut preempted = 0;
    for stream in held {
        if let Err(status) = still_open(stream).await {
            assert_eq!((status.code(), status.message()), (Code::ResourceExhausted, PREEMPTED));
            preempted += 1;
        }
    }
    assert_eq!(preempted, 12 + 1);
}

#[tokio::test]
async fn twenty_heavy_clients_cannot_refuse_a_bystander_a_single_call() {
    // The 200 addresses x 2 connections x 512 streams, where 170 of 255 bystander
    // Solves were refused: here 20 addresses x 2 connections x 8 streams against 64 calls.
    let config = limits(|limits| limits.max_calls = 64);
    let server = TestServer::start(config).await;
    let mut held = Vec::new();
    for ip in 10..30 {
        for _ in 0..2 {
            let mut attacker = server.client_from([127, 0, 0, ip]).await;
            for _ in 0..8 {
                held.extend(hold_stream(&mut attacker).await.ok());
            }
        }
    }
    let mut bystander = server.client_from([127, 0, 0, 7]).await;
    for n in 0..10 {
        answered(&mut bystander, &format!("bystander {n}")).await;
    }
    // The first Solve took a stream's place and gave it back; none was needed after.
    let mut open = 0;
    for stream in held {
        match still_open(stream).await {
            Ok(()) => open += 1,
            Err(status) => {
                assert_eq!((status.code(), status.message()), (Code::ResourceExhausted, PREEMPTED))
            }
        }
    }
    assert_eq!(open, 64 - 1);
}

#[tokio::test]
async fn a_lone_client_may_use_all_the_calls_nobody_else_wants() {
    // The 2,000 streams from one client on an idle server (4,096 calls, 1,024 a
    // connection): none is refused, nor a unary call beside them.
    let server = TestServer::start(limits(|_| {})).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut client = server.client_from([127, 0, 0, 2]).await;
        for _ in 0..1000 {
            held.push(hold_stream(&mut client).await.expect("a stream is admitted"));
        }
    }
    answered(&mut server.client_from([127, 0, 0, 2]).await, "beside the streams").await;
    assert_eq!(held.len(), 2000);
}

#[tokio::test]
async fn a_flood_of_connections_from_five_clients_leaves_a_liveness_probe_its_way_in() {
    // Five clients open more connections together than the server's bound (the issue's
    // 5 x 1,000 against 4,096, at a hundredth of the scale), half silent after the
    // HTTP/2 preface and half not even sending it. Nothing closes them by itself here.
    let config = limits(|limits| {
        limits.max_connections = 40;
        limits.idle_under_pressure = Seconds(Duration::from_secs(600));
        limits.handshake_timeout = Seconds(Duration::from_secs(600));
    });
    let server = TestServer::start(config).await;
    let mut flood = Vec::new();
    for ip in 2..=6 {
        for n in 0..10 {
            let mut tcp = connect_from(&server, [127, 0, 0, ip]).await;
            if n % 2 == 0 {
                tcp.write_all(PREFACE).await.unwrap();
                tcp.write_all(SETTINGS).await.unwrap();
            }
            flood.push(tcp);
        }
    }
    // A probe (a new connection and a health check) and a newcomer's call get in.
    probe(&server, [127, 0, 0, 7]).await;
    answered(&mut server.client_from([127, 0, 0, 8]).await, "newcomer").await;
}

#[tokio::test]
async fn a_connection_taken_back_for_a_newcomer_ends_its_calls_when_it_has_only_busy_ones() {
    let config = limits(|limits| limits.max_connections = 2);
    let server = TestServer::start(config).await;
    // One client holds both connections, each busy with a stream.
    let mut busy = Vec::new();
    for _ in 0..2 {
        busy.push(hold_stream(&mut server.client_from([127, 0, 0, 2]).await).await.unwrap());
    }
    answered(&mut server.client_from([127, 0, 0, 3]).await, "newcomer").await;
    let mut ended = 0;
    for stream in busy {
        ended += usize::from(still_open(stream).await.is_err());
    }
    assert_eq!(ended, 1, "one connection closed, calls and all; the other kept");
}

/// One gRPC message carrying `request`, as a client writes it on the wire.
fn grpc_frame(request: &impl Message) -> bytes::Bytes {
    let body = request.encode_to_vec();
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(&body);
    frame.into()
}

/// A request for `method` of the solver service, as raw h2 sends it.
fn grpc_request(server: &TestServer, method: &str) -> http::Request<()> {
    http::Request::post(format!("http://{}/gamesolver.v1.GameSolverService/{method}", server.addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

#[tokio::test]
async fn a_call_taken_back_whose_client_reads_nothing_closes_its_connection() {
    let server = TestServer::start(limits(|limits| limits.max_calls = 2)).await;
    // A client that grants the server no flow-control window: its answers, and so the
    // end of a call taken back, can never be sent.
    let tcp = connect_from(&server, [127, 0, 0, 2]).await;
    let (mut h2, connection) =
        h2::client::Builder::new().initial_window_size(0).handshake(tcp).await.unwrap();
    let connection = tokio::spawn(connection);
    let mut calls = Vec::new();
    for _ in 0..2 {
        let (response, mut body) = h2.send_request(grpc_request(&server, "SolveStream"), false).unwrap();
        body.send_data(grpc_frame(&stream_request(sum("x", "11"))), false).unwrap();
        let response = tokio::time::timeout(PATIENCE, response).await.expect("headers").unwrap();
        assert_eq!(response.status(), 200);
        calls.push((response, body));
    }
    // Both calls are the server's whole limit; a newcomer takes one of them back.
    answered(&mut server.client_from([127, 0, 0, 3]).await, "newcomer").await;
    let closed = tokio::time::timeout(PATIENCE, connection).await;
    assert!(closed.is_ok(), "the connection of a call that could not end stayed open");
}

#[tokio::test]
async fn a_stalled_message_holding_the_whole_budget_makes_way_for_a_newcomer() {
    let server = TestServer::start(limits(|limits| limits.max_request_bytes_in_flight = 4 << 20)).await;
    // A lone client begins a 64 MiB message, which takes the whole 4 MiB budget (what one
    // client may hold at most), and stalls.
    let tcp = connect_from(&server, [127, 0, 0, 2]).await;
    let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let (response, mut body) = h2.send_request(grpc_request(&server, "Solve"), false).unwrap();
    let mut message = vec![0u8];
    message.extend_from_slice(&(64u32 << 20).to_be_bytes());
    message.push(b'1');
    body.send_data(message.into(), false).unwrap();
    // A newcomer's small message is within its fair share: the stalled call ends.
    answered(&mut server.client_from([127, 0, 0, 3]).await, "newcomer").await;
    let response = tokio::time::timeout(PATIENCE, response).await.expect("the stalled call ended").unwrap();
    let header = |name: &str| response.headers().get(name).map(|value| value.to_str().unwrap().to_owned());
    assert_eq!(header("grpc-status").as_deref(), Some("8"));
    assert_eq!(header("grpc-message").map(|m| m.replace("%20", " ")).as_deref(), Some(PREEMPTED));
    drop(body);
}

/// A server process, killed when dropped, a failed assertion included.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn under_a_low_open_file_limit_the_connection_bound_follows_it_and_a_bystander_gets_in() {
    use std::io::{BufRead, BufReader, Read};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::sync::{Arc, Mutex};

    // Room for this test's own sockets, whatever the shell's limit.
    let _ = rlimit::increase_nofile_limit(u64::MAX);
    let mut command = Command::new(env!("CARGO_BIN_EXE_gamesolver-server"));
    command
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec the child only calls setrlimit, which is
    // async-signal-safe. A hard limit of 256 too: the server cannot raise it.
    unsafe {
        command.pre_exec(|| rlimit::setrlimit(rlimit::Resource::NOFILE, 256, 256));
    }
    let mut server = Killed(command.spawn().unwrap());
    let child = &mut server.0;
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let mut stderr = child.stderr.take().unwrap();
    let sink = Arc::clone(&log);
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = stderr.read(&mut buf) {
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    let addr: SocketAddr =
        line.trim().strip_prefix("listening on ").expect("the server started").parse().unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let flooded = runtime.block_on(async {
        // One client holds more silent connections than the descriptors allow.
        let mut flood = Vec::new();
        for _ in 0..300 {
            let mut tcp = connect_to(addr, [127, 0, 0, 2]).await;
            // Beyond the bound, the server may have closed it already.
            let _ = tcp.write_all(PREFACE).await;
            let _ = tcp.write_all(SETTINGS).await;
            flood.push(tcp);
        }
        // A bystander's connection, accepted after all of them, gets in.
        probe_at(addr, [127, 0, 0, 3]).await;
        flood
    });
    // Stopped, and its log read to the end.
    drop(server);
    reader.join().unwrap();
    drop(flooded);
    let log = log.lock().unwrap().clone();
    // 256 less 64 kept for the rest is 192 descriptors: 171 connections, and 21 for
    // those closing (an eighth).
    assert!(log.contains("--max-connections lowered to fit the open-file limit"), "{log}");
    assert!(log.contains("asked=4096 max_connections=171 open_files=256"), "{log}");
    assert!(log.contains("open_files=256 kept=64 max_connections=171"), "{log}");
    assert!(!log.contains("accept failed"), "{log}");
}

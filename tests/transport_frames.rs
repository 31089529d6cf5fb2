//! The HTTP/2 bytes `src/server/connection/transport.rs` writes and follows under hyper, checked
//! with the `h2` crate (the one hyper uses) as a real client: a call is answered through
//! the wrapped stream, and an idle close arrives as a GOAWAY that names the last stream
//! the client opened, with NO_ERROR, after the call's last frame. An h2 or hyper upgrade
//! that changes the framing this relies on fails here. Also the frames behind what
//! `.ci/h2spec.sh` checks, where this server's own code decides them (a connection that
//! does not open with the preface ends with an orderly close, not a reset) or where h2spec
//! cannot see them: its requests carry no gRPC message, so the answers have no DATA to
//! hold back, and the flow-control cases are checked here with a real call instead.

use crate::common;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use common::{limits, TestServer};
use gamesolver::seconds::Timeout;
use gamesolver::server::ServerConfig;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// The bytes every HTTP/2 client sends first (RFC 9113, section 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A TCP stream that keeps a copy of every byte it reads.
struct Recorded {
    tcp: TcpStream,
    read: Arc<Mutex<Vec<u8>>>,
}

impl AsyncRead for Recorded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.tcp).poll_read(cx, buf);
        self.read.lock().unwrap().extend_from_slice(&buf.filled()[before..]);
        result
    }
}

impl AsyncWrite for Recorded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A frame as read: type, flags, stream and payload (RFC 9113, section 4.1).
#[derive(Debug)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

/// The whole frames at the start of `bytes`, and what follows them.
fn parse_frames(bytes: &[u8]) -> (Vec<Frame>, &[u8]) {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        let Some(payload) = rest.get(9..9 + len) else { break };
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        frames.push(Frame { kind: rest[3], flags: rest[4], stream, payload: payload.to_vec() });
        rest = &rest[9 + len..];
    }
    (frames, rest)
}

/// Every frame in `bytes`, which must end with a whole frame.
fn frames(bytes: &[u8]) -> Vec<Frame> {
    let (frames, rest) = parse_frames(bytes);
    assert!(rest.is_empty(), "{} bytes after the last whole frame", rest.len());
    frames
}

// Frame types and flags (RFC 9113, section 6).
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
/// The error code of a stream refused before any processing (section 7).
const REFUSED_STREAM: u32 = 7;

/// One frame on the wire: a 9-byte header, then `payload` (section 4.1).
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut frame = vec![len[1], len[2], len[3], kind, flags];
    frame.extend_from_slice(&stream.to_be_bytes());
    frame.extend_from_slice(payload);
    frame
}

/// The header block of a health check, in literal fields never indexed and not
/// Huffman-coded (RFC 7541, section 6.2.3), so that no HPACK encoder is needed.
fn health_check_headers() -> Vec<u8> {
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/grpc.health.v1.Health/Check"),
        (":authority", "localhost"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0x10);
        for text in [name, value] {
            block.push(u8::try_from(text.len()).unwrap()); // below 127: a one-byte length
            block.extend_from_slice(text.as_bytes());
        }
    }
    block
}

/// Reads from `tcp` into `read` until `done` holds for the whole frames read so far, and
/// returns them; panics if the server closes the connection first, or after 10 s.
async fn read_frames_until(
    tcp: &mut TcpStream,
    read: &mut Vec<u8>,
    done: impl Fn(&[Frame]) -> bool,
) -> Vec<Frame> {
    let reading = async {
        loop {
            let (frames, _) = parse_frames(read);
            if done(&frames) {
                return frames;
            }
            let mut buf = [0u8; 4096];
            let n = tcp.read(&mut buf).await.unwrap();
            assert!(n > 0, "the server closed the connection after {frames:?}");
            read.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(10), reading).await.expect("the frames in time")
}

#[tokio::test]
async fn an_idle_close_is_a_goaway_naming_the_last_stream_after_whole_frames() {
    let config = limits(|limits| limits.connection_idle_timeout = Timeout(Some(Duration::from_millis(300))));
    let server = TestServer::start(config).await;
    let read = Arc::new(Mutex::new(Vec::new()));
    let tcp = TcpStream::connect(server.addr).await.unwrap();
    let (mut client, connection) =
        h2::client::handshake(Recorded { tcp, read: Arc::clone(&read) }).await.unwrap();
    let connection = tokio::spawn(connection);

    // Two health checks on streams 1 and 3, each answered to its end.
    for _ in 0..2 {
        let request = http::Request::post(format!("http://{}/grpc.health.v1.Health/Check", server.addr))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut body) = client.send_request(request, false).unwrap();
        body.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), true).unwrap();
        let response = response.await.unwrap();
        assert_eq!(response.status(), 200);
        let mut incoming = response.into_body();
        while let Some(data) = incoming.data().await {
            let data = data.unwrap();
            incoming.flow_control().release_capacity(data.len()).unwrap();
        }
        let trailers = incoming.trailers().await.unwrap().expect("gRPC trailers");
        assert_eq!(trailers["grpc-status"], "0");
    }
    // The connection idles out (the client keeps it: dropping the last handle would close
    // it from this side): h2 sees a graceful close, not a protocol error.
    let ended = tokio::time::timeout(Duration::from_secs(10), connection).await.expect("closed when idle");
    drop(client);
    if let Err(err) = ended.unwrap() {
        assert!(err.is_go_away() && err.reason() == Some(h2::Reason::NO_ERROR), "{err:?}");
    }

    let frames = frames(&read.lock().unwrap());
    let goaways: Vec<_> = frames.iter().filter(|f| f.kind == GOAWAY).collect();
    let last = goaways.last().expect("a GOAWAY");
    assert_eq!(last.stream, 0, "GOAWAY is a connection frame");
    let last_stream = u32::from_be_bytes(last.payload[0..4].try_into().unwrap()) & 0x7fff_ffff;
    let code = u32::from_be_bytes(last.payload[4..8].try_into().unwrap());
    assert_eq!((last_stream, code), (3, 0), "GOAWAY names stream 3 with NO_ERROR");
    let answered_on_3 = frames.iter().rposition(|f| f.stream == 3).unwrap();
    let goaway_at = frames.iter().rposition(|f| f.kind == GOAWAY).unwrap();
    assert!(goaway_at > answered_on_3, "the GOAWAY comes after the last call's frames");
}

#[tokio::test]
async fn an_invalid_preface_ends_in_an_orderly_close_not_a_reset() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    // h2spec's bytes (its case http2/3.5/2): longer than the preface, so that the server
    // decides on its first read and leaves the rest unread.
    tcp.write_all(b"INVALID CONNECTION PREFACE\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await.expect("closed");
    // A reset would read as ConnectionReset.
    assert_eq!(read.map_err(|err| err.kind()), Ok(0), "the end of the stream, with nothing written");
}

#[tokio::test]
async fn window_update_and_priority_on_a_half_closed_stream_release_its_held_data() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    // A stream window of 0 (SETTINGS_INITIAL_WINDOW_SIZE), then a health check sent whole:
    // the stream is half-closed (remote), and the answer's message waits for window.
    let mut opening = PREFACE.to_vec();
    opening.extend(frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 0]));
    opening.extend(frame(HEADERS, END_HEADERS, 1, &health_check_headers()));
    opening.extend(frame(DATA, END_STREAM, 1, &[0, 0, 0, 0, 0]));
    tcp.write_all(&opening).await.unwrap();
    let on_1 = |frames: &[Frame], kind: u8| frames.iter().filter(|f| f.kind == kind && f.stream == 1).count();
    let mut read = Vec::new();
    read_frames_until(&mut tcp, &mut read, |frames| on_1(frames, HEADERS) == 1).await;

    // One byte of window: one byte of the message, no more (section 6.9.1).
    tcp.write_all(&frame(WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes())).await.unwrap();
    let frames = read_frames_until(&mut tcp, &mut read, |frames| on_1(frames, DATA) == 1).await;
    let first = frames.iter().find(|f| f.kind == DATA).unwrap();
    assert_eq!(first.payload.len(), 1, "a DATA frame as large as the window");

    // PRIORITY and WINDOW_UPDATE are frames a half-closed (remote) stream still takes
    // (section 5.1): the rest of the message follows, then the trailers that end the call.
    tcp.write_all(&frame(PRIORITY, 0, 1, &[0, 0, 0, 0, 255])).await.unwrap();
    tcp.write_all(&frame(WINDOW_UPDATE, 0, 1, &1024u32.to_be_bytes())).await.unwrap();
    let ended = |frames: &[Frame]| {
        frames.iter().any(|f| match f.kind {
            HEADERS => f.stream == 1 && f.flags & END_STREAM != 0,
            kind => kind == RST_STREAM || kind == GOAWAY,
        })
    };
    let frames = read_frames_until(&mut tcp, &mut read, ended).await;
    assert!(frames.iter().all(|f| f.kind != RST_STREAM && f.kind != GOAWAY), "{frames:?}");
    let body: usize =
        frames.iter().filter(|f| f.kind == DATA && f.stream == 1).map(|f| f.payload.len()).sum();
    assert_eq!(body, 7, "the whole answer: a 5-byte gRPC header and SERVING (2 bytes)");
}

#[tokio::test]
async fn a_stream_beyond_the_concurrent_stream_limit_is_refused() {
    let mut config = ServerConfig::default();
    config.http2.max_concurrent_streams = 4;
    let server = TestServer::start(config).await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    // Five calls whose messages never come: the first four stay open, so the fifth
    // exceeds SETTINGS_MAX_CONCURRENT_STREAMS whatever the timing (section 5.1.2).
    let mut opening = PREFACE.to_vec();
    opening.extend(frame(SETTINGS, 0, 0, &[]));
    for stream in [1, 3, 5, 7, 9] {
        opening.extend(frame(HEADERS, END_HEADERS, stream, &health_check_headers()));
    }
    tcp.write_all(&opening).await.unwrap();
    let mut read = Vec::new();
    let reset = |frames: &[Frame]| frames.iter().any(|f| f.kind == RST_STREAM || f.kind == GOAWAY);
    let frames = read_frames_until(&mut tcp, &mut read, reset).await;
    let resets: Vec<_> = frames
        .iter()
        .filter(|f| f.kind == RST_STREAM || f.kind == GOAWAY)
        .map(|f| (f.kind, f.stream, u32::from_be_bytes(f.payload[..4].try_into().unwrap())))
        .collect();
    assert_eq!(resets, [(RST_STREAM, 9, REFUSED_STREAM)], "only the fifth stream, refused");
}

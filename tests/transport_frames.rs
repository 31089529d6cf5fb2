//! The HTTP/2 bytes `src/server/transport.rs` writes and follows under hyper, checked
//! with the `h2` crate (the one hyper uses) as a real client: a call is answered through
//! the wrapped stream, and an idle close arrives as a GOAWAY that names the last stream
//! the client opened, with NO_ERROR, after the call's last frame. An h2 or hyper upgrade
//! that changes the framing this relies on fails here.

mod common;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use common::{limits, TestServer};
use gamesolver::seconds::Timeout;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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

/// (type, stream id, payload) of each frame in `bytes` (RFC 9113, section 4.1).
fn frames(bytes: &[u8]) -> Vec<(u8, u32, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & 0x7fff_ffff;
        assert!(rest.len() >= 9 + len, "a frame cut short: {len} bytes announced, {} left", rest.len() - 9);
        frames.push((rest[3], stream, rest[9..9 + len].to_vec()));
        rest = &rest[9 + len..];
    }
    assert!(rest.is_empty(), "{} bytes after the last whole frame", rest.len());
    frames
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
    let goaways: Vec<_> = frames.iter().filter(|(kind, _, _)| *kind == 7).collect();
    let last = goaways.last().expect("a GOAWAY");
    assert_eq!(last.1, 0, "GOAWAY is a connection frame");
    let last_stream = u32::from_be_bytes(last.2[0..4].try_into().unwrap()) & 0x7fff_ffff;
    let code = u32::from_be_bytes(last.2[4..8].try_into().unwrap());
    assert_eq!((last_stream, code), (3, 0), "GOAWAY names stream 3 with NO_ERROR");
    let answered_on_3 = frames.iter().rposition(|(_, stream, _)| *stream == 3).unwrap();
    let goaway_at = frames.iter().rposition(|(kind, _, _)| *kind == 7).unwrap();
    assert!(goaway_at > answered_on_3, "the GOAWAY comes after the last call's frames");
}

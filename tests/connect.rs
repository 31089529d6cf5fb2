//! The Connect door on the gRPC port: unary `Solve` and `SolveBatch` in JSON and binary
//! protobuf, over HTTP/1.1 and HTTP/2, plaintext and TLS, against the real server with
//! hyper's clients. Each error is compared with the gRPC status of the same problem; the
//! limits, the metrics and the deadline are the gRPC call's. `.ci/connect.sh` runs curl
//! and Connect's own client under node.

use crate::common;
use crate::production;

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use common::{iv, sum, TestServer};
use gamesolver::pb;
use gamesolver::server::config::Seconds;
use gamesolver::server::{ServerConfig, TlsSettings};
use http::{HeaderMap, Method, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use production::{metrics_listen, scrape, series, settled, write_leaf, TestCa};
use prost::Message;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic_types::StatusExt;

const SERVICE: &str = "gamesolver.v1.GameSolverService";
const SOLVE: &str = "/gamesolver.v1.GameSolverService/Solve";
const SOLVE_BATCH: &str = "/gamesolver.v1.GameSolverService/SolveBatch";
const PATIENCE: Duration = Duration::from_secs(30);

/// An answer: status, headers and the whole body.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|err| panic!("{err}: {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// How a test reaches the server: plaintext or TLS, HTTP/1.1 or HTTP/2.
#[derive(Clone)]
struct Door {
    addr: SocketAddr,
    version: Version,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Door {
    fn new(server: &TestServer, version: Version) -> Door {
        Door { addr: server.addr, version, tls: None }
    }

    fn with_tls(server: &TestServer, version: Version, ca: &TestCa) -> Door {
        use rustls_pki_types::pem::PemObject;
        let mut roots = tokio_rustls::rustls::RootCertStore::empty();
        roots.add(rustls_pki_types::CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap()).unwrap();
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut config = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        // What curl offers for --http2 and --http1.1.
        config.alpn_protocols = match version {
            Version::HTTP_2 => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            _ => vec![b"http/1.1".to_vec()],
        };
        Door { addr: server.addr, version, tls: Some(tokio_rustls::TlsConnector::from(Arc::new(config))) }
    }

    /// Sends one request on a new connection and reads the whole answer.
    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let uri = match self.version {
            Version::HTTP_2 => format!("{scheme}://localhost:{}{path}", self.addr.port()),
            _ => path.to_owned(),
        };
        let mut request = http::Request::builder().method(method).uri(uri).version(self.version);
        request = request.header("host", format!("localhost:{}", self.addr.port()));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).unwrap();
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        let answer = async {
            match &self.tls {
                None => exchange(tcp, self.version, request).await,
                Some(tls) => {
                    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
                    let stream = tls.connect(name, tcp).await.expect("a TLS handshake");
                    let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                    let expected: &[u8] = if self.version == Version::HTTP_2 { b"h2" } else { b"http/1.1" };
                    assert_eq!(alpn.as_deref(), Some(expected), "ALPN");
                    exchange(stream, self.version, request).await
                }
            }
        };
        tokio::time::timeout(PATIENCE, answer).await.expect("an answer in time")
    }

    async fn post_json(&self, path: &str, json: &str) -> Answer {
        self.send(Method::POST, path, &[("content-type", "application/json")], json.to_owned()).await
    }
}

async fn exchange(
    io: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    version: Version,
    request: http::Request<Full<Bytes>>,
) -> Answer {
    let io = TokioIo::new(io);
    let response = match version {
        Version::HTTP_2 => {
            let (mut sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await.unwrap();
            tokio::spawn(connection);
            sender.send_request(request).await.unwrap()
        }
        _ => {
            let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(connection);
            sender.send_request(request).await.unwrap()
        }
    };
    assert_eq!(response.version(), version);
    let (parts, body) = response.into_parts();
    Answer { status: parts.status, headers: parts.headers, body: body.collect().await.unwrap().to_bytes() }
}

/// The default configuration with a metrics port.
fn with_metrics() -> ServerConfig {
    ServerConfig {
        observability: gamesolver::server::config::ObservabilityConfig {
            metrics_listen: Some(metrics_listen()),
            ..Default::default()
        },
        ..ServerConfig::default()
    }
}

fn calls(method: &str, code: &str) -> String {
    format!("gamesolver_calls_total{{service=\"{SERVICE}\",method=\"{method}\",code=\"{code}\"}}")
}

const SOLVED: &str = r#"{"solution":{"id":"a1","aliceWins":true,"winner":"WINNER_ALICE","winningMove":{"sumGame":{"index":"2","digit":9}}}}"#;

#[tokio::test]
async fn json_and_proto_over_http1_and_http2_answer_as_grpc_does() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let problem = sum("a1", "25??");
    let grpc = client
        .solve(pb::SolveRequest { problem: Some(problem.clone()), winner_only: false })
        .await
        .unwrap()
        .into_inner();
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let door = Door::new(&server, version);
        let answer = door.post_json(SOLVE, r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.body, SOLVED, "{version:?}");
        let json: pb::SolveResponse = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(json, grpc);

        // The protocol version header is accepted, and so is JSON's charset.
        let headers =
            [("content-type", "application/json; charset=utf-8"), ("connect-protocol-version", "1")];
        let body = r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#;
        let answer = door.send(Method::POST, SOLVE, &headers, body).await;
        assert_eq!(answer.body, SOLVED);

        let request = pb::SolveRequest { problem: Some(problem.clone()), winner_only: false };
        let headers = [("content-type", "application/proto")];
        let answer = door.send(Method::POST, SOLVE, &headers, request.encode_to_vec()).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(answer.header("content-type"), Some("application/proto"));
        assert_eq!(pb::SolveResponse::decode(answer.body).unwrap(), grpc);

        let batch = r#"{"problems":[{"id":"ix","stoneGameIx":{"stones":[1,1,7,10,8,17,10,20,2,10]}},{"id":"iv","stoneGameIv":{"n":"7"}},{"id":"bad","sumGame":{"num":"123"}}],"winnerOnly":true}"#;
        let answer = door.post_json(SOLVE_BATCH, batch).await;
        assert_eq!(answer.status, StatusCode::OK);
        let json: pb::SolveBatchResponse = serde_json::from_slice(&answer.body).unwrap();
        let request: pb::SolveBatchRequest = serde_json::from_str(batch).unwrap();
        assert_eq!(json, client.solve_batch(request).await.unwrap().into_inner());
        assert_eq!(json.solutions[2].error.as_ref().unwrap().reason, "ODD_LENGTH");
    }
}

#[tokio::test]
async fn tls_serves_http1_and_http2_by_alpn() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test ca");
    write_leaf(dir.path(), "server", &ca.server("server"));
    let settings = TlsSettings {
        cert: dir.path().join("server.pem"),
        key: dir.path().join("server.key"),
        client_ca: None,
    };
    let server = TestServer::start(ServerConfig { tls: settings.into(), ..ServerConfig::default() }).await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let door = Door::with_tls(&server, version, &ca);
        let answer = door.post_json(SOLVE, r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#).await;
        assert_eq!((answer.status, &answer.body[..]), (StatusCode::OK, SOLVED.as_bytes()), "{version:?}");
        let answer = door.post_json(SOLVE, r#"{"problem":{"sumGame":{"num":"2?x?"}}}"#).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_eq!(answer.json()["code"], "invalid_argument");
    }
}

/// The ErrorInfo and BadRequest of a Connect error body, decoded from their bytes, and
/// checked against their `debug` JSON.
fn connect_details(
    body: &Value,
) -> (Option<tonic_types::pb::ErrorInfo>, Option<tonic_types::pb::BadRequest>) {
    let (mut info, mut bad_request) = (None, None);
    for detail in body["details"].as_array().into_iter().flatten() {
        let value = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(detail["value"].as_str().unwrap())
            .unwrap();
        match detail["type"].as_str().unwrap() {
            "google.rpc.ErrorInfo" => {
                let decoded = tonic_types::pb::ErrorInfo::decode(&value[..]).unwrap();
                assert_eq!(detail["debug"]["reason"], decoded.reason);
                assert_eq!(detail["debug"]["domain"], decoded.domain);
                info = Some(decoded);
            }
            "google.rpc.BadRequest" => {
                let decoded = tonic_types::pb::BadRequest::decode(&value[..]).unwrap();
                assert_eq!(detail["debug"]["fieldViolations"][0]["field"], decoded.field_violations[0].field);
                bad_request = Some(decoded);
            }
            other => panic!("unexpected detail {other}"),
        }
    }
    (info, bad_request)
}

#[tokio::test]
async fn each_error_is_the_grpc_status_of_the_same_problem() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    // (request, HTTP status, Connect code, reason)
    let cases = [
        (json!({}), 400, "invalid_argument", "MISSING_PROBLEM"),
        (json!({"problem": {"id": "g"}}), 400, "invalid_argument", "NO_GAME"),
        (json!({"problem": {"sumGame": {"num": "123"}}}), 400, "invalid_argument", "ODD_LENGTH"),
        (json!({"problem": {"sumGame": {"num": "12x4"}}}), 400, "invalid_argument", "INVALID_CHARACTER"),
        (json!({"problem": {"stoneGameIv": {"n": "5000000000"}}}), 400, "out_of_range", "PILE_ABOVE_LIMIT"),
    ];
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let door = Door::new(&server, version);
        for (request, http_status, code, reason) in &cases {
            let answer = door.post_json(SOLVE, &request.to_string()).await;
            assert_eq!(answer.status.as_u16(), *http_status, "{request}: {answer:?}");
            assert_eq!(answer.header("content-type"), Some("application/json"));
            let body = answer.json();
            let grpc_request: pb::SolveRequest = serde_json::from_value(request.clone()).unwrap();
            let status = client.solve(grpc_request).await.unwrap_err();
            assert_eq!(body["code"], *code, "{request}");
            assert_eq!(body["message"], status.message(), "{request}");
            let (info, bad_request) = connect_details(&body);
            let info = info.expect("an ErrorInfo");
            let details = status.get_error_details();
            let grpc_info = details.error_info().unwrap();
            assert_eq!(info.reason, *reason);
            assert_eq!((&info.reason, &info.domain), (&grpc_info.reason, &grpc_info.domain));
            assert_eq!(info.metadata, grpc_info.metadata);
            let bad_request = bad_request.expect("a BadRequest");
            let grpc_violations = &details.bad_request().unwrap().field_violations;
            assert_eq!(bad_request.field_violations.len(), grpc_violations.len());
            assert_eq!(bad_request.field_violations[0].field, grpc_violations[0].field);
            assert_eq!(bad_request.field_violations[0].description, grpc_violations[0].description);
        }
    }
    // One exactly, as curl shows it.
    let answer = Door::new(&server, Version::HTTP_11)
        .post_json(SOLVE, r#"{"problem":{"sumGame":{"num":"123"}}}"#)
        .await;
    let expected = json!({
        "code": "invalid_argument",
        "message": "sum game: length 3 is odd; the string must split into two equal halves",
        "details": [
            {
                "type": "google.rpc.ErrorInfo",
                "value": "CgpPRERfTEVOR1RIEg1nYW1lc29sdmVyLnYxGgsKBmxlbmd0aBIBMw",
                "debug": {"reason": "ODD_LENGTH", "domain": "gamesolver.v1", "metadata": {"length": "3"}}
            },
            {
                "type": "google.rpc.BadRequest",
                "value": "Cl4KFHByb2JsZW0uc3VtX2dhbWUubnVtEkZzdW0gZ2FtZTogbGVuZ3RoIDMgaXMgb2RkOyB0aGUgc3RyaW5nIG11c3Qgc3BsaXQgaW50byB0d28gZXF1YWwgaGFsdmVz",
                "debug": {"fieldViolations": [{"field": "problem.sum_game.num", "description": "sum game: length 3 is odd; the string must split into two equal halves"}]}
            }
        ]
    });
    assert_eq!(answer.json(), expected);
}

#[tokio::test]
async fn a_bad_json_body_is_invalid_argument_and_counted_under_its_method() {
    let (server, metrics) = start_with_metrics(with_metrics()).await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let door = Door::new(&server, version);
        let answer = door.post_json(SOLVE, r#"{"problem":{"stoneGameIv":{"n":-5}}}"#).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        let body = answer.json();
        assert_eq!(body["code"], "invalid_argument");
        assert_eq!(
            body["message"],
            "invalid JSON request: problem.stoneGameIv.n: -5 is not a uint64 at line 1 column 34"
        );
        let (info, bad_request) = connect_details(&body);
        let info = info.unwrap();
        assert_eq!((info.reason.as_str(), info.domain.as_str()), ("INVALID_JSON", "gamesolver.v1"));
        assert!(bad_request.is_none());

        let answer = door.post_json(SOLVE_BATCH, r#"{"problems":[{"sumGame":{"num":"11"}}"#).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_eq!(
            answer.json()["message"],
            "invalid JSON request: EOF while parsing a list at line 1 column 37"
        );
        let answer = door.post_json(SOLVE, "").await;
        assert_eq!(answer.json()["message"], "invalid JSON request: the body is empty; send one JSON object");
    }
    assert_eq!(settled(metrics, &calls("Solve", "INVALID_ARGUMENT"), 4.0).await, Some(4.0));
    assert_eq!(settled(metrics, &calls("SolveBatch", "INVALID_ARGUMENT"), 2.0).await, Some(2.0));
}

#[tokio::test]
async fn a_json_number_is_taken_only_when_its_digits_are_exactly_an_integer() {
    let server = TestServer::start(ServerConfig::default()).await;
    let door = Door::new(&server, Version::HTTP_11);
    for (n, expected) in [("7.0", 7), ("100.000", 100), ("1e3", 1000), ("\"1e1\"", 10)] {
        let answer = door.post_json(SOLVE, &format!(r#"{{"problem":{{"stoneGameIv":{{"n":{n}}}}}}}"#)).await;
        assert_eq!(answer.status, StatusCode::OK, "{n}");
        let solved =
            door.post_json(SOLVE, &format!(r#"{{"problem":{{"stoneGameIv":{{"n":{expected}}}}}}}"#)).await;
        assert_eq!(answer.json(), solved.json(), "{n} is {expected}");
    }
    for (n, message) in [
        (
            "99.99999999999999999",
            "problem.stoneGameIv.n: 99.99999999999999999 is not a uint64: not a whole number at line 1 column 52",
        ),
        ("1e-400", "problem.stoneGameIv.n: 1e-400 is not a uint64: not a whole number at line 1 column 38"),
        ("1.5", "problem.stoneGameIv.n: 1.5 is not a uint64: not a whole number at line 1 column 35"),
        ("1e20", "problem.stoneGameIv.n: 1e20 is not a uint64 at line 1 column 36"),
    ] {
        let answer = door.post_json(SOLVE, &format!(r#"{{"problem":{{"stoneGameIv":{{"n":{n}}}}}}}"#)).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{n}");
        assert_eq!(answer.json()["code"], "invalid_argument");
        assert_eq!(answer.json()["message"], format!("invalid JSON request: {message}"));
    }
    let answer = door.post_json(SOLVE_BATCH, r#"{"problems":[{"nimSquare":{"piles":[1,2.5]}}]}"#).await;
    assert_eq!(
        answer.json()["message"],
        "invalid JSON request: problems[0].nimSquare.piles[1]: 2.5 is not a uint64: not a whole number \
         at line 1 column 42"
    );
}

/// Protobuf that does not decode is the caller's error: 400, `invalid_argument`, naming
/// what could not be decoded; counted as `INVALID_ARGUMENT`, never `INTERNAL` (a page).
#[tokio::test]
async fn a_protobuf_body_that_does_not_decode_is_invalid_argument() {
    let (server, metrics) = start_with_metrics(with_metrics()).await;
    // A problem whose id is not UTF-8.
    let body = Bytes::from_static(&[0x0a, 0x04, 0x0a, 0x02, 0xff, 0xfe]);
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let door = Door::new(&server, version);
        let answer = door
            .send(Method::POST, SOLVE_BATCH, &[("content-type", "application/proto")], body.clone())
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
        // Connect's error body is JSON whatever the request's encoding.
        let status = answer.json();
        assert_eq!(status["code"], "invalid_argument");
        assert_eq!(
            status["message"],
            "the request message does not decode: Problem.id: SolveBatchRequest.problems: invalid string value: \
             data is not UTF-8 encoded"
        );
    }
    assert_eq!(settled(metrics, &calls("SolveBatch", "INVALID_ARGUMENT"), 2.0).await, Some(2.0));
    assert_eq!(settled(metrics, &calls("SolveBatch", "INTERNAL"), 0.0).await, None);
}

/// A JSON body is charged what it decodes to, read from its text, before it is decoded:
/// 4 MiB of `{}` (1.4 million problems, 150 MB of structs) is refused undecoded, naming
/// that size, where the same budget answers a batch of ordinary size; a bystander on
/// another address is served.
#[tokio::test]
async fn a_json_body_is_charged_what_it_decodes_to_before_it_is_decoded() {
    let config = common::limits(|limits| {
        limits.max_request_bytes_in_flight = 16 << 20;
        limits.max_message_bytes = 4 << 20;
    });
    let server = TestServer::start(config).await;
    let door = Door { addr: server.addr, version: Version::HTTP_2, tls: None };
    let count = ((4 << 20) - 20) / 3;
    let empties = vec!["{}"; count].join(",");
    let answer = door.post_json(SOLVE_BATCH, &format!(r#"{{"problems":[{empties}]}}"#)).await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{answer:?}");
    // The key's bytes, the list's first room, and each problem's struct, twice.
    let decoded = "problems".len() + 128 + count * 2 * std::mem::size_of::<pb::Problem>();
    assert_eq!(answer.json()["code"], "resource_exhausted");
    assert_eq!(
        answer.json()["message"],
        format!(
            "request message decodes to {decoded} bytes, past the 16777216 bytes of request memory one client \
             may hold"
        )
    );
    let problems = vec![r#"{"stoneGameIv":{"n":7}}"#; 10_000].join(",");
    let answer = door.post_json(SOLVE_BATCH, &format!(r#"{{"problems":[{problems}]}}"#)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["solutions"].as_array().map(Vec::len), Some(10_000));
    let bystander = common::channel_from(server.addr, [127, 0, 0, 2]).await;
    let mut client = pb::game_solver_service_client::GameSolverServiceClient::new(bystander);
    let solved = common::solve(&mut client, sum("bystander", "25??")).await.unwrap();
    assert_eq!(solved.id, "bystander");
}

#[tokio::test]
async fn a_long_value_in_a_json_error_is_cut() {
    let server = TestServer::start(ServerConfig::default()).await;
    let door = Door::new(&server, Version::HTTP_2);
    let field = "x".repeat(100_000);
    let answer = door.post_json(SOLVE, &format!(r#"{{"problem":{{"stoneGameIv":{{"{field}":1}}}}}}"#)).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    // The path names the field too: the reason is cut at 1,000 characters, the path's
    // field and all.
    let message = format!(
        "invalid JSON request: problem.stoneGameIv.{}…",
        "x".repeat(1000 - "problem.stoneGameIv.".len())
    );
    assert_eq!(answer.json()["message"], message);
}

async fn start_with_metrics(config: ServerConfig) -> (TestServer, SocketAddr) {
    let server = TestServer::start(config).await;
    let metrics = server.metrics_addr();
    (server, metrics)
}

#[tokio::test]
async fn metrics_count_connect_calls_under_their_method_and_code() {
    let (server, metrics) = start_with_metrics(with_metrics()).await;
    let door = Door::new(&server, Version::HTTP_11);
    door.post_json(SOLVE, r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#).await;
    Door::new(&server, Version::HTTP_2).post_json(SOLVE, r#"{"problem":{"sumGame":{"num":"11"}}}"#).await;
    door.post_json(SOLVE, r#"{"problem":{"stoneGameIv":{"n":"5000000000"}}}"#).await;
    door.post_json(SOLVE_BATCH, r#"{"problems":[{"sumGame":{"num":"11"}}]}"#).await;
    assert_eq!(settled(metrics, &calls("Solve", "OK"), 2.0).await, Some(2.0));
    assert_eq!(settled(metrics, &calls("Solve", "OUT_OF_RANGE"), 1.0).await, Some(1.0));
    assert_eq!(settled(metrics, &calls("SolveBatch", "OK"), 1.0).await, Some(1.0));
    let problems = "gamesolver_problems_total{game=\"sum_game\",outcome=\"solved\"}";
    assert_eq!(settled(metrics, problems, 3.0).await, Some(3.0));
    // The door's own refusals come before a call: nothing is counted for them.
    door.post_json("/nowhere", "{}").await;
    let unknown = "gamesolver_calls_total{service=\"unknown\",method=\"unknown\",code=\"UNIMPLEMENTED\"}";
    assert_eq!(series(&scrape(metrics).await, unknown), None);
}

#[tokio::test]
async fn paths_methods_content_types_and_headers_the_door_refuses() {
    let server = TestServer::start(ServerConfig::default()).await;
    let door = Door::new(&server, Version::HTTP_11);
    let served = "/gamesolver.v1.GameSolverService/Solve and /gamesolver.v1.GameSolverService/SolveBatch";
    let refusal = |answer: &Answer, status: u16, code: &str, message: String| {
        assert_eq!(answer.status.as_u16(), status, "{answer:?}");
        assert_eq!(answer.header("content-type"), Some("application/json"));
        assert_eq!(answer.json(), json!({"code": code, "message": message}));
    };

    let answer = door.post_json("/gamesolver.v1.GameSolverService/Nope", "{}").await;
    let message = format!("no procedure at /gamesolver.v1.GameSolverService/Nope: Connect serves {served}");
    refusal(&answer, 404, "unimplemented", message);
    let answer = door.post_json("/gamesolver.v1.GameSolverService/SolveStream", "{}").await;
    let message = format!(
        "/gamesolver.v1.GameSolverService/SolveStream is a streaming RPC: call it over gRPC; Connect serves {served}"
    );
    refusal(&answer, 404, "unimplemented", message);

    let answer = door.send(Method::PUT, SOLVE, &[("content-type", "application/json")], "{}").await;
    refusal(&answer, 405, "unimplemented", "Solve takes GET, POST, not PUT".into());
    assert_eq!(answer.header("allow"), Some("GET, POST"));
    let answer = door.send(Method::GET, SOLVE_BATCH, &[], "").await;
    refusal(&answer, 405, "unimplemented", "SolveBatch takes POST, not GET".into());
    assert_eq!(answer.header("allow"), Some("POST"));

    // curl -d without a content type sends a form.
    let form = [("content-type", "application/x-www-form-urlencoded")];
    let answer = door.send(Method::POST, SOLVE, &form, "{}").await;
    let message = "content-type application/x-www-form-urlencoded is not a Connect unary request: send Content-Type: application/json (or application/proto)";
    refusal(&answer, 415, "invalid_argument", message.into());
    assert_eq!(answer.header("accept-post"), Some("application/json, application/proto"));
    let answer = door.send(Method::POST, SOLVE, &[("content-type", "application/connect+json")], "{}").await;
    assert_eq!(answer.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    let headers = [("content-type", "application/json"), ("connect-protocol-version", "2")];
    let answer = door.send(Method::POST, SOLVE, &headers, "{}").await;
    refusal(&answer, 400, "invalid_argument", "connect-protocol-version must be \"1\": got \"2\"".into());
    let headers = [("content-type", "application/json"), ("connect-timeout-ms", "soon")];
    let answer = door.send(Method::POST, SOLVE, &headers, "{}").await;
    let message = "connect-timeout-ms must be a number of milliseconds of at most 10 digits: got \"soon\"";
    refusal(&answer, 400, "invalid_argument", message.into());
}

#[tokio::test]
async fn the_get_form_of_solve_in_json_and_base64_proto() {
    let server = TestServer::start(ServerConfig::default()).await;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let door = Door::new(&server, version);
        let message = percent_encode(r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#);
        let path = format!("{SOLVE}?connect=v1&encoding=json&message={message}");
        let answer = door.send(Method::GET, &path, &[], "").await;
        assert_eq!((answer.status, &answer.body[..]), (StatusCode::OK, SOLVED.as_bytes()), "{answer:?}");

        let request = pb::SolveRequest { problem: Some(iv("g", 7)), winner_only: false };
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(request.encode_to_vec());
        let path = format!("{SOLVE}?encoding=proto&base64=1&message={encoded}");
        let answer = door.send(Method::GET, &path, &[], "").await;
        assert_eq!(answer.header("content-type"), Some("application/proto"));
        let solution = pb::SolveResponse::decode(answer.body).unwrap().solution.unwrap();
        assert_eq!((solution.id.as_str(), solution.winner), ("g", pb::Winner::Bob as i32));

        // A compressed message is base64 too; and errors come as for a POST.
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gzip.write_all(br#"{"problem":{"sumGame":{"num":"1"}}}"#).unwrap();
        let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(gzip.finish().unwrap());
        let path = format!("{SOLVE}?encoding=json&compression=gzip&base64=1&message={encoded}");
        let answer = door.send(Method::GET, &path, &[], "").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_eq!(connect_details(&answer.json()).0.unwrap().reason, "ODD_LENGTH");

        let answer = door.send(Method::GET, &format!("{SOLVE}?message=%7B%7D"), &[], "").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_eq!(answer.json()["message"], "a Connect GET needs encoding=json or encoding=proto");
    }
}

/// Percent-encodes everything but unreserved characters, as `encodeURIComponent` does.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test]
async fn compressed_requests_and_responses() {
    let mut config = ServerConfig::default();
    config.http2.compress_responses = true;
    let server = TestServer::start(config).await;
    let body = br#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#;
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let door = Door::new(&server, version);
        for (name, compressed) in [("gzip", gzip(body)), ("zstd", zstd::encode_all(&body[..], 3).unwrap())] {
            let headers = [("content-type", "application/json"), ("content-encoding", name)];
            let answer = door.send(Method::POST, SOLVE, &headers, compressed.clone()).await;
            assert_eq!((answer.status, &answer.body[..]), (StatusCode::OK, SOLVED.as_bytes()), "{name}");
            assert_eq!(answer.header("content-encoding"), None);

            let headers = [("content-type", "application/json"), ("accept-encoding", name)];
            let answer = door.send(Method::POST, SOLVE, &headers, &body[..]).await;
            assert_eq!(answer.header("content-encoding"), Some(name));
            let plain = match name {
                "gzip" => {
                    let mut out = Vec::new();
                    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&answer.body[..]), &mut out)
                        .unwrap();
                    out
                }
                _ => zstd::decode_all(&answer.body[..]).unwrap(),
            };
            assert_eq!(plain, SOLVED.as_bytes());
        }
        let headers = [("content-type", "application/json"), ("content-encoding", "br")];
        let answer = door.send(Method::POST, SOLVE, &headers, &body[..]).await;
        assert_eq!(answer.status, StatusCode::NOT_IMPLEMENTED);
        assert_eq!(
            answer.json(),
            json!({"code": "unimplemented", "message": "Content is compressed with `br` which isn't supported"})
        );
        assert_eq!(answer.header("accept-encoding"), Some("gzip,zstd,identity"));
    }
}

/// A configuration whose messages are at most 1 KiB.
fn small_messages() -> ServerConfig {
    let mut config = with_metrics();
    config.limits.max_message_bytes = 1024;
    config
}

#[tokio::test]
async fn a_body_over_max_message_bytes_is_resource_exhausted_as_over_grpc() {
    let (server, metrics) = start_with_metrics(small_messages()).await;
    let json = format!(r#"{{"problem":{{"sumGame":{{"num":"{}"}}}}}}"#, "?".repeat(2000));
    let expected = format!(
        "Error, decoded message length too large: found {} bytes, the limit is: 1024 bytes",
        json.len()
    );
    for version in [Version::HTTP_11, Version::HTTP_2] {
        let answer = Door::new(&server, version).post_json(SOLVE, &json).await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS, "{answer:?}");
        assert_eq!(answer.json(), json!({"code": "resource_exhausted", "message": expected}));
    }
    // gRPC's own refusal of an over-limit message says the same.
    let mut client = server.client().await;
    let request = pb::SolveRequest { problem: Some(sum("x", &"?".repeat(2000))), winner_only: false };
    let status = client.solve(request).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    assert!(status.message().starts_with("Error, decoded message length too large: found "), "{status:?}");
    assert_eq!(settled(metrics, &calls("Solve", "RESOURCE_EXHAUSTED"), 3.0).await, Some(3.0));

    // An inflated body is held to the same limit.
    let headers = [("content-type", "application/json"), ("content-encoding", "gzip")];
    let answer =
        Door::new(&server, Version::HTTP_11).send(Method::POST, SOLVE, &headers, gzip(json.as_bytes())).await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(answer.json()["message"], "request message inflates to more than the limit of 1024 bytes");
}

/// Writes an HTTP/1.1 request head on a new connection and returns the socket.
async fn http1_head(server: &TestServer, head: &str) -> TcpStream {
    let mut socket = TcpStream::connect(server.addr).await.unwrap();
    socket.write_all(head.as_bytes()).await.unwrap();
    socket
}

/// Reads an HTTP/1.1 response head and its Content-Length body from `socket`.
async fn http1_answer(socket: &mut TcpStream) -> (String, Value) {
    let mut buf = Vec::new();
    let read = async {
        loop {
            let mut chunk = [0u8; 4096];
            let n = socket.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed mid-response: {:?}", String::from_utf8_lossy(&buf));
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8(buf[..end].to_vec()).unwrap();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                    })
                    .unwrap()
                    .parse()
                    .unwrap();
                if buf.len() >= end + 4 + length {
                    let body = serde_json::from_slice(&buf[end + 4..end + 4 + length]).unwrap();
                    return (head, body);
                }
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("an answer in time")
}

#[tokio::test]
async fn an_announced_body_over_the_limit_is_refused_before_it_is_sent() {
    let server = TestServer::start(small_messages()).await;
    // 64 MiB announced, 16 bytes sent: the refusal comes from the length alone.
    let head = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{{\"problem\":{{}}}}",
        64 << 20
    );
    let mut socket = http1_head(&server, &head).await;
    let (status, body) = http1_answer(&mut socket).await;
    assert!(status.starts_with("HTTP/1.1 429"), "{status}");
    assert_eq!(
        body["message"],
        "Error, decoded message length too large: found 67108864 bytes, the limit is: 1024 bytes"
    );
}

#[tokio::test]
async fn a_chunked_body_is_gathered_only_up_to_the_limit() {
    let server = TestServer::start(small_messages()).await;
    // No length: 4 KiB of a body whose end never comes is enough to refuse it.
    let head = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n1000\r\n{}\r\n",
        "x".repeat(4096)
    );
    let mut socket = http1_head(&server, &head).await;
    let (status, body) = http1_answer(&mut socket).await;
    assert!(status.starts_with("HTTP/1.1 429"), "{status}");
    assert_eq!(
        body["message"],
        "Error, decoded message length too large: found 4096 bytes, the limit is: 1024 bytes"
    );
    // Within the limit, a chunked body is answered.
    let json = r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#;
    let head = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{json}\r\n0\r\n\r\n",
        json.len()
    );
    let mut socket = http1_head(&server, &head).await;
    let (status, body) = http1_answer(&mut socket).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(body, serde_json::from_str::<Value>(SOLVED).unwrap());
}

#[tokio::test]
async fn per_client_call_limits_apply_to_connect_calls() {
    let mut config = with_metrics();
    config.limits.max_calls_per_peer = Some(1);
    let (server, metrics) = start_with_metrics(config).await;
    // A call whose body never ends holds this client's only call.
    let head = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    let held = http1_head(&server, &head).await;
    let in_flight = format!("gamesolver_calls_in_flight{{service=\"{SERVICE}\",method=\"Solve\"}}");
    assert_eq!(settled(metrics, &in_flight, 1.0).await, Some(1.0));
    let answer =
        Door::new(&server, Version::HTTP_2).post_json(SOLVE, r#"{"problem":{"sumGame":{"num":"11"}}}"#).await;
    assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        answer.json(),
        json!({"code": "resource_exhausted", "message": "too many calls in flight from this client (limit 1 a client); retry later"})
    );
    drop(held);
    assert_eq!(settled(metrics, &in_flight, 0.0).await, Some(0.0));
    let answer =
        Door::new(&server, Version::HTTP_2).post_json(SOLVE, r#"{"problem":{"sumGame":{"num":"11"}}}"#).await;
    assert_eq!(answer.status, StatusCode::OK);
}

#[tokio::test]
async fn a_connect_call_taken_back_for_a_client_within_its_share_answers_429() {
    let mut config = with_metrics();
    config.limits.max_calls = 2;
    let (server, metrics) = start_with_metrics(config).await;
    // Two calls whose bodies never end hold the server's calls, both this client's.
    let head = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
    );
    let mut oldest = http1_head(&server, &head).await;
    let in_flight = format!("gamesolver_calls_in_flight{{service=\"{SERVICE}\",method=\"Solve\"}}");
    assert_eq!(settled(metrics, &in_flight, 1.0).await, Some(1.0));
    let _newer = http1_head(&server, &head).await;
    assert_eq!(settled(metrics, &in_flight, 2.0).await, Some(2.0));
    // A client holding none is within its share (2 / 2): the oldest call makes way.
    let mut newcomer = server.client_from([127, 0, 0, 2]).await;
    assert_eq!(common::solve(&mut newcomer, sum("a1", "11")).await.unwrap().id, "a1");
    let (status, body) = http1_answer(&mut oldest).await;
    assert!(status.starts_with("HTTP/1.1 429"), "{status}");
    assert_eq!(
        body,
        json!({"code": "resource_exhausted", "message": "server overloaded: this call made way for a client under its fair share; retry later"})
    );
}

#[tokio::test]
async fn connect_timeout_ms_is_the_calls_deadline() {
    let server = TestServer::start(ServerConfig::default()).await;
    let json = format!(r#"{{"problem":{{"sumGame":{{"num":"{}"}}}}}}"#, "?".repeat(10_000_000));
    let headers = [("content-type", "application/json"), ("connect-timeout-ms", "1")];
    let answer = Door::new(&server, Version::HTTP_11).send(Method::POST, SOLVE, &headers, json).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        answer.json(),
        json!({"code": "deadline_exceeded", "message": "the call's deadline of 1ms expired"})
    );
    // The server goes on.
    let answer = Door::new(&server, Version::HTTP_11)
        .post_json(SOLVE, r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#)
        .await;
    assert_eq!(answer.body, SOLVED);
}

#[tokio::test]
async fn the_server_request_timeout_bounds_connect_calls_too() {
    let config = ServerConfig {
        limits: gamesolver::server::config::LimitsConfig {
            request_timeout: gamesolver::server::config::Timeout(Some(Duration::from_millis(1))),
            ..Default::default()
        },
        ..ServerConfig::default()
    };
    let server = TestServer::start(config).await;
    let json = format!(r#"{{"problem":{{"sumGame":{{"num":"{}"}}}}}}"#, "?".repeat(10_000_000));
    let answer = Door::new(&server, Version::HTTP_2).post_json(SOLVE, &json).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(answer.json()["message"], "the server's request timeout of 1ms expired");
}

#[tokio::test]
async fn an_idle_http1_connection_is_closed_after_a_connect_call() {
    let mut config = ServerConfig::default();
    config.limits.connection_idle_timeout =
        gamesolver::server::config::Timeout(Some(Duration::from_millis(300)));
    config.limits.handshake_timeout = Seconds(Duration::from_secs(5));
    let server = TestServer::start(config).await;
    let json = r#"{"problem":{"id":"a1","sumGame":{"num":"25??"}}}"#;
    let head = format!(
        "POST {SOLVE} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
        json.len()
    );
    let mut socket = http1_head(&server, &head).await;
    let (status, _) = http1_answer(&mut socket).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    // Kept alive, then closed by the idle timeout with nothing more written.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, socket.read_to_end(&mut rest)).await;
    assert!(closed.is_ok() && rest.is_empty(), "{closed:?} {rest:?}");
}

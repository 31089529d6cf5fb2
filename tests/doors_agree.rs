//! The same bad problem gets the same code, reason and field from every door: the gRPC
//! status's details, a Connect JSON call's solution, a Flight exchange's row (its reason
//! and game, mapped by the same rows the client reads a table's with) and the bulk
//! client's JSON lines written from a table.

use std::io::{Read, Write};

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt64Array};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::{FlightClient, FlightDescriptor};
use futures::TryStreamExt;
use gamesolver::columnar::{ERROR_REASON, GAME};
use gamesolver::games::GameKind;
use gamesolver::pb;
use gamesolver::problem::Reason;
use gamesolver::server::ServerConfig;
use tonic_types::StatusExt;

use crate::common::{self, TestServer};

/// What a door says of a bad problem: its code (the gRPC name), reason and field.
type Fault = (String, String, String);

/// The gRPC door: `Solve`'s status and its `ErrorInfo` and `BadRequest`.
async fn grpc(server: &TestServer, problem: pb::Problem) -> Fault {
    let status = common::solve(&mut server.client().await, problem).await.unwrap_err();
    let details = status.get_error_details();
    let field = details.bad_request().map(|b| b.field_violations[0].field.clone()).unwrap_or_default();
    (format!("{:?}", status.code()), details.error_info().unwrap().reason.clone(), field)
}

/// The Connect door: `SolveBatch` as HTTP/1.1 JSON, its one solution's error.
fn connect(server: &TestServer, problem_json: &str) -> Fault {
    let body = format!(r#"{{"problems":[{problem_json}]}}"#);
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    write!(
        stream,
        "POST /gamesolver.v1.GameSolverService/SolveBatch HTTP/1.1\r\nhost: localhost\r\n\
         content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let json: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    error_of(&json["solutions"][0])
}

/// A JSON `Solution`'s error, its code as the gRPC name (`CODE_OUT_OF_RANGE` is
/// `OutOfRange`).
fn error_of(solution: &serde_json::Value) -> Fault {
    let error = &solution["error"];
    let code = error["code"].as_str().unwrap().trim_start_matches("CODE_");
    let code = code.split('_').map(|word| word[..1].to_owned() + &word[1..].to_lowercase()).collect();
    let text = |key: &str| error[key].as_str().unwrap_or_default().to_owned();
    (code, text("reason"), text("field"))
}

/// The Flight door: a one-row exchange's reason and game, and the code and field they
/// come with.
async fn flight(server: &TestServer, kind: GameKind, column: ArrayRef) -> Fault {
    let inner = FlightServiceClient::new(server.channel().await);
    let mut client = FlightClient::new_from_inner(inner);
    let batch = RecordBatch::try_from_iter([(kind.input(), column)]).unwrap();
    let messages = FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_path(vec![kind.label().to_owned()])))
        .build(futures::stream::iter([Ok(batch)]));
    let answers: Vec<RecordBatch> = client.do_exchange(messages).await.unwrap().try_collect().await.unwrap();
    let text = |name: &str| {
        // `game` is a dictionary: read as text.
        let column = answers[0].column_by_name(name).unwrap();
        let column = arrow_cast::cast(column, &arrow_schema::DataType::Utf8).unwrap();
        column.as_any().downcast_ref::<StringArray>().unwrap().value(0).to_owned()
    };
    let reason = Reason::parse(&text(ERROR_REASON)).expect("a reason the registry knows");
    let field = reason.field(GameKind::from_label(&text(GAME))).unwrap_or_default();
    (format!("{:?}", reason.code()), reason.name().to_owned(), field.to_owned())
}

/// The bulk client's tables: a CSV table of the problem, answered as JSON lines.
fn client_table(server: &TestServer, kind: GameKind, cell: &str) -> Fault {
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.csv"), dir.path().join("out.jsonl"));
    std::fs::write(&input, format!("{}\n{cell}\n", kind.input())).unwrap();
    let args = ["solve", common::path_str(&input), "-o", common::path_str(&output), "--server"];
    let (status, stderr) = common::client(&[&args[..], &[&server.url()]].concat());
    assert!(status.code() == Some(0) || status.code() == Some(1), "{stderr}");
    let line = std::fs::read_to_string(&output).unwrap();
    error_of(&serde_json::from_str(line.trim()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_door_gives_a_bad_problem_the_same_code_reason_and_field() {
    let server = TestServer::start(ServerConfig::default()).await;
    let beyond = 1u64 << 60;
    let cases: [(GameKind, pb::Problem, String, ArrayRef, String, Fault); 2] = [
        (
            GameKind::SumGame,
            common::sum("a", "1?x"),
            r#"{"id":"a","sumGame":{"num":"1?x"}}"#.to_owned(),
            std::sync::Arc::new(StringArray::from(vec!["1?x"])),
            "1?x".to_owned(),
            ("InvalidArgument".into(), "INVALID_CHARACTER".into(), "problem.sum_game.num".into()),
        ),
        (
            GameKind::StoneGameIv,
            common::iv("a", beyond),
            format!(r#"{{"id":"a","stoneGameIv":{{"n":"{beyond}"}}}}"#),
            std::sync::Arc::new(UInt64Array::from(vec![beyond])),
            beyond.to_string(),
            ("OutOfRange".into(), "PILE_ABOVE_LIMIT".into(), "problem.stone_game_iv.n".into()),
        ),
    ];
    for (kind, problem, json, column, cell, expected) in cases {
        assert_eq!(grpc(&server, problem).await, expected, "gRPC");
        let connect = {
            let server = &server;
            tokio::task::block_in_place(|| connect(server, &json))
        };
        assert_eq!(connect, expected, "Connect JSON");
        assert_eq!(flight(&server, kind, column).await, expected, "Flight");
        let table = tokio::task::block_in_place(|| client_table(&server, kind, &cell));
        assert_eq!(table, expected, "the client's table");
    }
}

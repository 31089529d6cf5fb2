//! The four RPCs, health, reflection and error codes against a real server.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{expected, iv, ix, limits, solve, stream_request, sum, Client, TestServer};
use futures::StreamExt;
use gamesolver::games::GameKind;
use gamesolver::pb;
use gamesolver::seconds::{Seconds, Timeout};
use gamesolver::server::{ServerConfig, SERVICE_NAME};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic_types::StatusExt;

fn winner(solution: &pb::Solution) -> pb::Winner {
    pb::Winner::try_from(solution.winner).unwrap()
}

#[tokio::test]
async fn solve_answers_each_game_with_a_winning_move() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;

    let answer = solve(&mut client, sum("s", "25??")).await.unwrap();
    assert_eq!((answer.id.as_str(), answer.alice_wins, winner(&answer)), ("s", true, pb::Winner::Alice));
    let Some(pb::Move { game: Some(pb::r#move::Game::SumGame(m)) }) = answer.winning_move else {
        panic!("no sum game move in {answer:?}")
    };
    assert_eq!(m.index, 2);

    let answer = solve(&mut client, sum("b", "?3295???")).await.unwrap();
    assert_eq!((answer.alice_wins, winner(&answer), answer.winning_move), (false, pb::Winner::Bob, None));

    let answer = solve(&mut client, ix("x", &[3, 1, 2])).await.unwrap();
    assert_eq!(winner(&answer), pb::Winner::Bob);
    let answer = solve(&mut client, ix("y", &[2, 1])).await.unwrap();
    assert_eq!(winner(&answer), pb::Winner::Alice);
    assert!(matches!(answer.winning_move.and_then(|m| m.game), Some(pb::r#move::Game::StoneGameIx(_))));

    let answer = solve(&mut client, iv("v", 7)).await.unwrap();
    assert_eq!(winner(&answer), pb::Winner::Bob);
    let answer = solve(&mut client, iv("w", 4)).await.unwrap();
    assert_eq!(
        answer.winning_move.and_then(|m| m.game),
        Some(pb::r#move::Game::StoneGameIv(pb::StoneGameIvMove { take: 4 }))
    );
}

#[tokio::test]
async fn degenerate_inputs_are_bob_wins() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    for problem in [sum("", ""), ix("", &[]), iv("", 0)] {
        let answer = solve(&mut client, problem).await.unwrap();
        assert_eq!((answer.alice_wins, winner(&answer)), (false, pb::Winner::Bob));
        assert_eq!(answer.error, None);
    }
}

/// The `ErrorInfo` reason and metadata, and the `BadRequest` fields, of a status.
fn details(status: &tonic::Status) -> (String, BTreeMap<String, String>, Vec<String>) {
    let details = status.get_error_details();
    let info = details.error_info().expect("every error carries an ErrorInfo");
    assert_eq!(info.domain, "gamesolver.v1");
    let fields = details.bad_request().map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect());
    (info.reason.clone(), info.metadata.clone().into_iter().collect(), fields.unwrap_or_default())
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[tokio::test]
async fn bad_problems_get_codes_reasons_fields_and_values() {
    let mut config = ServerConfig::default();
    config.tables.get_mut(GameKind::StoneGameIv).unwrap().max_n = 1000;
    let server = TestServer::start(config).await;
    let mut client = server.client().await;

    let status = solve(&mut client, pb::Problem { id: "none".into(), game: None }).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("no game"), "{}", status.message());
    assert_eq!(details(&status), ("NO_GAME".into(), map(&[]), vec!["problem.game".into()]));

    let status = solve(&mut client, sum("c", "12x4")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("index 2"), "{}", status.message());
    let expected = map(&[("index", "2"), ("character", "x")]);
    assert_eq!(details(&status), ("INVALID_CHARACTER".into(), expected, vec!["problem.sum_game.num".into()]));

    let status = solve(&mut client, sum("o", "123")).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("odd"), "{}", status.message());
    let expected = map(&[("length", "3")]);
    assert_eq!(details(&status), ("ODD_LENGTH".into(), expected, vec!["problem.sum_game.num".into()]));

    let status = solve(&mut client, iv("big", 1001)).await.unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange);
    assert_eq!(
        status.message(),
        "stone game iv: n = 1001 is beyond the limit 1000 of this server (raise it with --iv-max-n, at most 100000000000)"
    );
    let expected = map(&[("n", "1001"), ("limit", "1000")]);
    assert_eq!(
        details(&status),
        ("PILE_ABOVE_LIMIT".into(), expected, vec!["problem.stone_game_iv.n".into()])
    );

    let status = client.solve(pb::SolveRequest::default()).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert_eq!(details(&status), ("MISSING_PROBLEM".into(), map(&[]), vec!["problem".into()]));

    // The server goes on answering.
    assert!(solve(&mut client, iv("ok", 1000)).await.is_ok());
}

#[tokio::test]
async fn a_bad_problem_in_a_batch_or_stream_carries_what_solve_sends() {
    let mut config = ServerConfig::default();
    config.tables.get_mut(GameKind::StoneGameIv).unwrap().max_n = 1000;
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    let bad = [sum("c", "12x4"), sum("o", "123"), iv("big", 1001), pb::Problem::default()];
    let batch = pb::SolveBatchRequest { problems: bad.to_vec(), winner_only: false };
    let batch = client.solve_batch(batch).await.unwrap().into_inner().solutions;
    let streamed = stream_answers(&mut client, &bad).await;
    for (problem, (in_batch, in_stream)) in bad.iter().zip(batch.iter().zip(&streamed)) {
        let status = solve(&mut client, problem.clone()).await.unwrap_err();
        let (reason, metadata, fields) = details(&status);
        for solution in [in_batch, in_stream] {
            let error = solution.error.as_ref().expect("an error solution");
            assert_eq!(error.code, status.code() as i32);
            assert_eq!(
                (&error.reason, &error.metadata, &error.message),
                (&reason, &metadata, &status.message().to_owned())
            );
            assert_eq!(vec![error.field.clone()], fields);
            assert_eq!(solution.winner, pb::Winner::Unspecified as i32);
        }
    }
    // A stream request without its problem is answered in place; the stream goes on.
    let requests = [pb::SolveStreamRequest::default(), stream_request(sum("ok", "11"))];
    let answers: Vec<_> =
        client.solve_stream(futures::stream::iter(requests)).await.unwrap().into_inner().collect().await;
    let error = answers[0].as_ref().unwrap().solution.as_ref().unwrap().error.clone().unwrap();
    assert_eq!((error.reason.as_str(), error.field.as_str()), ("MISSING_PROBLEM", "problem"));
    assert_eq!(answers[1].as_ref().unwrap().solution.as_ref().unwrap().winner, pb::Winner::Bob as i32);
}

#[tokio::test]
async fn winner_only_answers_the_same_winners_without_moves() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let problems = mixed_problems(400);
    let full = client
        .solve_batch(pb::SolveBatchRequest { problems: problems.clone(), winner_only: false })
        .await
        .unwrap()
        .into_inner()
        .solutions;
    assert!(full.iter().any(|s| s.winning_move.is_some()));
    let batch = client
        .solve_batch(pb::SolveBatchRequest { problems: problems.clone(), winner_only: true })
        .await
        .unwrap()
        .into_inner()
        .solutions;
    let unary = pb::SolveRequest { problem: Some(problems[1].clone()), winner_only: true };
    let unary = client.solve(unary).await.unwrap().into_inner().solution.unwrap();
    let requests: Vec<_> = problems
        .iter()
        .map(|p| pb::SolveStreamRequest { problem: Some(p.clone()), winner_only: true })
        .collect();
    let streamed: Vec<_> = client
        .solve_stream(futures::stream::iter(requests))
        .await
        .unwrap()
        .into_inner()
        .map(|a| a.unwrap().solution.unwrap())
        .collect()
        .await;
    for answers in [&batch, &streamed] {
        for (answer, full) in answers.iter().zip(&full) {
            assert_eq!(answer, &pb::Solution { winning_move: None, ..full.clone() });
        }
    }
    assert_eq!(unary, batch[1]);
}

#[tokio::test]
async fn batch_keeps_order_and_reports_bad_problems_in_place() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let problems = vec![
        sum("0", "25??"),
        pb::Problem { id: "1".into(), game: None },
        sum("2", "1?a?"),
        ix("3", &[5, 1, 2, 4, 3]),
        iv("4", 10),
    ];
    let batch = pb::SolveBatchRequest { problems: problems.clone(), winner_only: false };
    let solutions = client.solve_batch(batch).await.unwrap().into_inner().solutions;
    let ids: Vec<_> = solutions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["0", "1", "2", "3", "4"]);
    let code = |s: &pb::Solution| s.error.as_ref().map(|e| e.code);
    assert_eq!(code(&solutions[1]), Some(pb::solution_error::Code::InvalidArgument as i32));
    assert_eq!(code(&solutions[2]), Some(pb::solution_error::Code::InvalidArgument as i32));
    assert!(solutions[2].error.as_ref().unwrap().message.contains("index 2"));
    assert_eq!(winner(&solutions[0]), pb::Winner::Alice);
    assert_eq!(winner(&solutions[3]), pb::Winner::Bob);
    assert_eq!(winner(&solutions[4]), pb::Winner::Bob); // 10 is a P-position
}

/// One answer per problem, in order, each what the solver core says.
fn assert_matches_core(problems: &[pb::Problem], answers: &[pb::Solution]) {
    let table = gamesolver::games::Tables::new(10_000, 10_000);
    assert_eq!(answers.len(), problems.len());
    for (problem, answer) in problems.iter().zip(answers) {
        assert_eq!(answer, &expected(problem, &table));
    }
}

/// Sends `problems` over `SolveStream` and collects the answers.
async fn stream_answers(client: &mut Client, problems: &[pb::Problem]) -> Vec<pb::Solution> {
    let requests =
        problems.iter().map(|p| pb::SolveStreamRequest { problem: Some(p.clone()), winner_only: false });
    let answers = client.solve_stream(futures::stream::iter(requests.collect::<Vec<_>>())).await.unwrap();
    answers.into_inner().map(|a| a.unwrap().solution.unwrap()).collect().await
}

/// Sends `problems` over `SolveBatchStream` in batches of `per_batch`; collects the answers.
async fn batch_stream_answers(
    client: &mut Client,
    problems: &[pb::Problem],
    per_batch: usize,
) -> Vec<pb::Solution> {
    let batches: Vec<_> = problems
        .chunks(per_batch)
        .map(|c| pb::SolveBatchStreamRequest { problems: c.to_vec(), winner_only: false })
        .collect();
    let answers = client.solve_batch_stream(futures::stream::iter(batches)).await.unwrap();
    answers.into_inner().flat_map(|batch| futures::stream::iter(batch.unwrap().solutions)).collect().await
}

/// Problems of mixed sizes, so that some are solved inline and some on the pool.
fn mixed_problems(count: usize) -> Vec<pb::Problem> {
    (0..count)
        .map(|i| {
            let id = i.to_string();
            match i % 4 {
                0 => sum(&id, &format!("{}?{}", i % 10, "9".repeat(if i % 8 == 0 { 50_001 } else { 5 }))),
                1 => ix(&id, &(0..(i as u64 % 7) * 10_000).map(|s| s * 7 + i as u64).collect::<Vec<_>>()),
                2 => iv(&id, (i as u64 * 7919) % 5000),
                _ => sum(&id, "??1?"),
            }
        })
        .collect()
}

#[tokio::test]
async fn large_batch_matches_the_solver_core() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let problems = mixed_problems(2000);
    let solutions = client
        .solve_batch(pb::SolveBatchRequest { problems: problems.clone(), winner_only: false })
        .await
        .unwrap()
        .into_inner()
        .solutions;
    assert_matches_core(&problems, &solutions);
}

#[tokio::test]
async fn solve_stream_answers_before_the_client_finishes_sending() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let (send, requests) = mpsc::channel(4);
    let mut answers = client.solve_stream(ReceiverStream::new(requests)).await.unwrap().into_inner();
    for (i, problem) in [sum("a", "25??"), ix("b", &[1, 2]), pb::Problem::default()].into_iter().enumerate() {
        send.send(pb::SolveStreamRequest { problem: Some(problem), winner_only: false }).await.unwrap();
        // The sender is still open: each answer must come back on its own.
        let answer = tokio::time::timeout(Duration::from_secs(30), answers.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
            .solution
            .unwrap();
        match i {
            0 | 1 => assert_eq!(winner(&answer), pb::Winner::Alice),
            _ => assert_eq!(
                answer.error.map(|e| e.code),
                Some(pb::solution_error::Code::InvalidArgument as i32)
            ),
        }
    }
    drop(send);
    assert!(answers.next().await.is_none());
}

#[tokio::test]
async fn solve_stream_keeps_request_order() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let problems = mixed_problems(600);
    let answers = stream_answers(&mut client, &problems).await;
    assert_matches_core(&problems, &answers);
}

#[tokio::test]
async fn solve_batch_stream_keeps_batch_order() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let problems = mixed_problems(3000);
    let answers = batch_stream_answers(&mut client, &problems, 250).await;
    assert_matches_core(&problems, &answers);
}

#[tokio::test]
async fn ten_million_character_problem_fits_the_default_limit() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let half = 5_000_000;
    let num = format!("{}?{}?", "9".repeat(half - 1), "9".repeat(half - 1));
    let answer = solve(&mut client, sum("huge", &num)).await.unwrap();
    // Equal halves with one '?' each: Bob mirrors Alice's digit.
    assert_eq!(winner(&answer), pb::Winner::Bob);
}

#[tokio::test]
async fn message_over_the_limit_is_refused_and_the_server_goes_on() {
    let config = limits(|limits| limits.max_message_bytes = 1024);
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    // RESOURCE_EXHAUSTED, as grpc-go and grpc-java answer (tonic's decoder says OUT_OF_RANGE).
    let status = solve(&mut client, sum("big", &"1".repeat(4096))).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("the limit is: 1024 bytes"), "{}", status.message());
    let requests = [stream_request(sum("small", "11")), stream_request(sum("big", &"1".repeat(4096)))];
    let mut answers = client.solve_stream(futures::stream::iter(requests)).await.unwrap().into_inner();
    assert!(answers.next().await.unwrap().is_ok());
    let status = answers.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert!(solve(&mut client, sum("small", "11")).await.is_ok());
}

#[tokio::test]
async fn health_reports_serving_for_the_service_and_the_server() {
    use tonic_health::pb::{
        health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    };
    let server = TestServer::start(ServerConfig::default()).await;
    let mut health = HealthClient::new(server.channel().await);
    for service in ["", SERVICE_NAME] {
        let response = health.check(HealthCheckRequest { service: service.into() }).await.unwrap();
        assert_eq!(response.into_inner().status, ServingStatus::Serving as i32, "service {service:?}");
    }
    let status = health.check(HealthCheckRequest { service: "no.such.Service".into() }).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
}

#[tokio::test]
async fn reflection_v1_lists_the_services_and_describes_them() {
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
        server_reflection_response::MessageResponse, ServerReflectionRequest,
    };
    let server = TestServer::start(ServerConfig::default()).await;
    let mut reflection = ServerReflectionClient::new(server.channel().await);
    let requests = [
        MessageRequest::ListServices(String::new()),
        MessageRequest::FileContainingSymbol(SERVICE_NAME.into()),
        // The error details' types, so that reflection clients can print them.
        MessageRequest::FileContainingSymbol("google.rpc.ErrorInfo".into()),
    ]
    .map(|request| ServerReflectionRequest { host: String::new(), message_request: Some(request) });
    let responses: Vec<_> = reflection
        .server_reflection_info(futures::stream::iter(requests))
        .await
        .unwrap()
        .into_inner()
        .map(|r| r.unwrap().message_response.unwrap())
        .collect()
        .await;
    let MessageResponse::ListServicesResponse(list) = &responses[0] else { panic!("{:?}", responses[0]) };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    for expected in [SERVICE_NAME, "grpc.health.v1.Health"] {
        assert!(names.contains(&expected), "{names:?}");
    }
    for response in &responses[1..] {
        let MessageResponse::FileDescriptorResponse(file) = response else { panic!("{response:?}") };
        assert!(!file.file_descriptor_proto.is_empty());
    }
}

#[tokio::test]
async fn reflection_v1alpha_is_served_too() {
    use tonic_reflection::pb::v1alpha::{
        server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
        server_reflection_response::MessageResponse, ServerReflectionRequest,
    };
    let server = TestServer::start(ServerConfig::default()).await;
    let mut reflection = ServerReflectionClient::new(server.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses =
        reflection.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
    let response = responses.next().await.unwrap().unwrap().message_response.unwrap();
    let MessageResponse::ListServicesResponse(list) = response else { panic!("{response:?}") };
    assert!(list.service.iter().any(|s| s.name == SERVICE_NAME));
}

#[tokio::test]
async fn shutdown_finishes_in_flight_calls_then_stops() {
    let mut server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let (send, requests) = mpsc::channel(4);
    let mut answers = client.solve_stream(ReceiverStream::new(requests)).await.unwrap().into_inner();
    send.send(stream_request(sum("before", "25??"))).await.unwrap();
    assert!(answers.next().await.unwrap().is_ok());

    server.trigger_shutdown();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The call that was in flight still gets its answers.
    send.send(stream_request(sum("during", "25??"))).await.unwrap();
    let answer = answers.next().await.unwrap().unwrap();
    assert_eq!(answer.solution.unwrap().id, "during");
    drop(send);
    assert!(answers.next().await.is_none());

    let stopped = tokio::time::timeout(Duration::from_secs(30), &mut server.task).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
    // New connections are refused once it has stopped.
    assert!(tonic::transport::Channel::from_shared(server.url()).unwrap().connect().await.is_err());
}

#[tokio::test]
async fn shutdown_grace_bounds_a_call_that_never_ends() {
    let config =
        ServerConfig { shutdown_grace: Seconds(Duration::from_millis(300)), ..ServerConfig::default() };
    let mut server = TestServer::start(config).await;
    let mut client = server.client().await;
    let (send, requests) = mpsc::channel(1);
    let mut answers = client.solve_stream(ReceiverStream::new(requests)).await.unwrap().into_inner();
    send.send(stream_request(sum("a", "11"))).await.unwrap();
    assert!(answers.next().await.unwrap().is_ok());
    server.trigger_shutdown();
    // The client never closes its stream; the server stops anyway after the grace.
    let stopped = tokio::time::timeout(Duration::from_secs(30), &mut server.task).await;
    assert!(matches!(stopped, Ok(Ok(Ok(())))), "{stopped:?}");
    drop(send);
}

#[tokio::test]
async fn a_client_deadline_ends_the_call_and_the_server_goes_on() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let problem = sum("slow", &"?".repeat(10_000_000));
    let mut request = tonic::Request::new(pb::SolveRequest { problem: Some(problem), winner_only: false });
    request.set_timeout(Duration::from_micros(1));
    let status = client.solve(request).await.unwrap_err();
    assert!(matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded), "{status:?}");
    assert!(solve(&mut client, sum("next", "11")).await.is_ok());
}

#[tokio::test]
async fn the_servers_request_timeout_is_deadline_exceeded() {
    let config = limits(|limits| limits.request_timeout = Timeout(Some(Duration::from_millis(10))));
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    // The Stone Game IV table must first grow to 3·10^7: far more than 10 ms of work.
    let status = solve(&mut client, iv("slow", 30_000_000)).await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("request timeout"), "{}", status.message());
    assert!(solve(&mut client, sum("next", "11")).await.is_ok());
}

#[tokio::test]
async fn compressed_requests_and_responses_work() {
    use tonic::codec::CompressionEncoding;
    for compress_responses in [false, true] {
        let mut config = ServerConfig::default();
        config.http2.compress_responses = compress_responses;
        let server = TestServer::start(config).await;
        for encoding in [CompressionEncoding::Gzip, CompressionEncoding::Zstd] {
            let mut client = server.client().await.send_compressed(encoding).accept_compressed(encoding);
            let problems = mixed_problems(50);
            let response =
                client.solve_batch(pb::SolveBatchRequest { problems, winner_only: false }).await.unwrap();
            let sent_encoding =
                response.metadata().get("grpc-encoding").map(|v| v.to_str().unwrap().to_owned());
            assert_eq!(sent_encoding.is_some(), compress_responses, "{sent_encoding:?}");
            assert_eq!(response.into_inner().solutions.len(), 50);
        }
    }
}

#[tokio::test]
async fn a_stream_budget_smaller_than_one_problem_still_answers_everything_in_order() {
    use gamesolver::solver::SolverConfig;
    let solver = SolverConfig { stream_in_flight_bytes: 1, ..SolverConfig::default() };
    let server = TestServer::start(ServerConfig { solver, ..ServerConfig::default() }).await;
    let mut client = server.client().await;
    let problems = mixed_problems(300);
    let answers = stream_answers(&mut client, &problems).await;
    assert_matches_core(&problems, &answers);
    let answers = batch_stream_answers(&mut client, &problems, 70).await;
    assert_matches_core(&problems, &answers);
}

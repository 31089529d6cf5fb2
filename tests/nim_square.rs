//! Nim Square through the real server: the answer, move and nim value of a pinned
//! position over every RPC shape, the empty position, the limit's rich error, a long
//! pile list, and the table file across a restart.

use crate::common;

use common::{solve, TestServer};
use gamesolver::games::GameKind;
use gamesolver::pb;
use gamesolver::server::ServerConfig;
use tonic::Code;
use tonic_types::StatusExt;

fn nim(id: &str, piles: &[u64]) -> pb::Problem {
    pb::Problem {
        id: id.into(),
        game: Some(pb::problem::Game::NimSquare(pb::NimSquare { piles: piles.to_vec() })),
    }
}

fn nim_move(solution: &pb::Solution) -> Option<(u64, u64)> {
    match solution.winning_move.as_ref()?.game.as_ref()? {
        pb::r#move::Game::NimSquare(m) => Some((m.pile, m.take)),
        other => panic!("a Nim Square answer with a move of another game: {other:?}"),
    }
}

#[tokio::test]
async fn a_three_pile_position_is_answered_with_its_move_and_nim_value_on_every_rpc() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    // Grundy values 68, 81 and 33: nim value 52; pile 2 goes to 21 by taking 120².
    let pinned = nim("pinned", &[123_456, 150_000, 199_999]);
    let solution = solve(&mut client, pinned.clone()).await.unwrap();
    assert_eq!(solution.winner, pb::Winner::Alice as i32);
    assert_eq!((solution.nim_value, nim_move(&solution)), (Some(52), Some((2, 14_400))));

    let batch =
        pb::SolveBatchRequest { problems: vec![pinned.clone(), nim("one", &[2])], winner_only: false };
    let solutions = client.solve_batch(batch).await.unwrap().into_inner().solutions;
    assert_eq!(solutions[0], solution);
    // A one-pile problem reads the pile's Grundy value: g(2) = 0, so Bob wins.
    assert_eq!((solutions[1].nim_value, solutions[1].winner), (Some(0), pb::Winner::Bob as i32));

    let only_winner = pb::SolveRequest { problem: Some(pinned), winner_only: true };
    let answer = client.solve(only_winner).await.unwrap().into_inner().solution.unwrap();
    assert_eq!((answer.nim_value, answer.winning_move), (Some(52), None));

    // The JSON spelling a caller sees.
    let json = serde_json::to_string(&solution).unwrap();
    assert!(
        json.contains(r#""nimValue":52"#) && json.contains(r#""nimSquare":{"pile":"2","take":"14400"}"#),
        "{json}"
    );
}

#[tokio::test]
async fn no_piles_is_bob_and_other_games_carry_no_nim_value() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    let empty = solve(&mut client, nim("empty", &[])).await.unwrap();
    assert_eq!((empty.winner, empty.nim_value, empty.winning_move), (pb::Winner::Bob as i32, Some(0), None));
    let iv = solve(&mut client, common::iv("iv", 2)).await.unwrap();
    assert_eq!(iv.nim_value, None);
}

#[tokio::test]
async fn a_pile_above_the_limit_is_out_of_range_with_its_details() {
    let mut config = ServerConfig::default();
    config.tables.get_mut(GameKind::NimSquare).unwrap().max_n = 1000;
    let server = TestServer::start(config).await;
    let mut client = server.client().await;
    let status = solve(&mut client, nim("big", &[5, 1001])).await.unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange);
    assert_eq!(
        status.message(),
        "nim square: n = 1001 is beyond the limit 1000 of this server (raise it with --grundy-max-n, at most 4294967295)"
    );
    let details = status.get_error_details();
    let info = details.error_info().unwrap();
    assert_eq!(info.reason, "PILE_ABOVE_LIMIT");
    assert_eq!((info.metadata["n"].as_str(), info.metadata["limit"].as_str()), ("1001", "1000"));
    assert_eq!(details.bad_request().unwrap().field_violations[0].field, "problem.nim_square.piles");
    // The server goes on answering.
    assert!(solve(&mut client, nim("ok", &[1000])).await.is_ok());
}

#[tokio::test]
async fn a_million_piles_in_one_problem_are_answered() {
    let server = TestServer::start(ServerConfig::default()).await;
    let mut client = server.client().await;
    // Pairs of equal piles cancel: nim value 0 whatever the values, then one pile of 1
    // (Grundy value 1) makes it 1. The first pile with a winning move is the first pile
    // of 1 (index 2, after the two empty ones), taking its one stone.
    let mut piles: Vec<u64> = (0..500_000u64).flat_map(|i| [i % 10_000, i % 10_000]).collect();
    piles.push(1);
    let solution = solve(&mut client, nim("long", &piles)).await.unwrap();
    assert_eq!((solution.nim_value, nim_move(&solution)), (Some(1), Some((2, 1))));
}

#[tokio::test]
async fn the_table_file_is_saved_at_shutdown_and_loaded_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = ServerConfig::default();
    config.tables.get_mut(GameKind::NimSquare).unwrap().file = Some(dir.path().join("grundy.table"));
    let mut server = TestServer::start(config.clone()).await;
    let mut client = server.client().await;
    let first = solve(&mut client, nim("a", &[54_321, 7])).await.unwrap();
    drop(client);
    server.trigger_shutdown();
    server.task.await.unwrap().unwrap();
    assert!(dir.path().join("grundy.table").metadata().unwrap().len() > 2 * 54_321);

    let server = TestServer::start(config).await;
    assert!(server.tables.grundy.covered() > 54_321, "loaded before the first call");
    let mut client = server.client().await;
    assert_eq!(solve(&mut client, nim("a", &[54_321, 7])).await.unwrap(), first);
}

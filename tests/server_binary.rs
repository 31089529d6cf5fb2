//! The `gamesolver-server` binary: start-up line, serving, and SIGTERM/SIGINT handling.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{solve, ServerProcess};

use gamesolver::pb::{self, game_solver_service_client::GameSolverServiceClient};

#[tokio::test]
async fn prints_its_address_serves_and_exits_zero_on_sigterm() {
    let mut server = ServerProcess::start("127.0.0.1:0", &[]);
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();
    let problem =
        pb::Problem { id: "p".into(), game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n: 2 })) };
    let answer = solve(&mut client, problem).await.unwrap();
    assert_eq!(answer.winner, pb::Winner::Bob as i32);
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

#[tokio::test]
async fn exits_zero_on_sigint() {
    let mut server = ServerProcess::start("127.0.0.1:0", &[]);
    server.signal("INT");
    assert_eq!(server.wait_exit().await.code(), Some(0));
}

#[test]
fn a_bad_flag_is_a_clear_error() {
    let output =
        Command::new(env!("CARGO_BIN_EXE_gamesolver-server")).args(["--listen", "nowhere"]).output().unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--listen"));
}

#[tokio::test]
async fn the_iv_table_file_survives_a_restart_and_a_corrupt_one_is_recomputed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iv.table");
    let path_arg = path.to_str().unwrap();
    let flags = ["--iv-table", path_arg, "--iv-precompute", "300000"];

    let mut server = ServerProcess::start("127.0.0.1:0", &flags);
    for _ in 0..300 {
        if gamesolver::iv_table_file::IvTableFile::load(&path).is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    let saved = gamesolver::iv_table_file::IvTableFile::load(&path).expect("a valid table file");
    assert!(saved.covered >= 300_000);

    // Corrupt one byte in the middle: the server must not trust it, and answers right.
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let mut server = ServerProcess::start("127.0.0.1:0", &flags);
    let mut client = GameSolverServiceClient::connect(server.url()).await.unwrap();
    let table = gamesolver::games::StoneGameIvTable::new(1_000_000);
    for n in [299_999u64, 123_456, 250_001, 2] {
        let problem = pb::Problem {
            id: n.to_string(),
            game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n })),
        };
        let answer = solve(&mut client, problem).await.unwrap();
        let expected = gamesolver::games::Game::StoneGameIv(n).solve(&table).unwrap();
        assert_eq!(answer.alice_wins, expected.alice_wins(), "n = {n}");
    }
    server.signal("TERM");
    assert_eq!(server.wait_exit().await.code(), Some(0));
    assert!(gamesolver::iv_table_file::IvTableFile::load(&path).is_ok(), "the file was rewritten whole");
}

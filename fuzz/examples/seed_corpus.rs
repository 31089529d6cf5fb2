//! Writes the seed inputs of the fuzz targets into `fuzz/corpus/<target>/`, from
//! real inputs: the lines of `examples/problems.jsonl`, those problems encoded as
//! requests, answers of every kind, and table files written by the library.
//!
//! `cargo run --example seed_corpus` from `fuzz/` (stable is enough). The committed
//! corpora are these seeds plus what fuzzing found, minimised with `cargo fuzz cmin`.

use std::fs;
use std::path::{Path, PathBuf};

use gamesolver::client::parse_problem;
use gamesolver::games::stone_game_iv::losing_positions_below;
use gamesolver::games::stone_game_iv::IvTableFile;
use gamesolver::tables::TableFile;
use gamesolver::pb;
use prost::Message;

fn main() -> std::io::Result<()> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"));
    let examples = fs::read(fuzz.join("../examples/problems.jsonl"))?;
    let lines: Vec<&[u8]> = examples.split(|&b| b == b'\n').filter(|line| !line.is_empty()).collect();

    let mut line_seeds: Vec<Vec<u8>> = lines.iter().map(|line| line.to_vec()).collect();
    line_seeds.push(b"\xef\xbb\xbf{\"id\":\"bom\",\"sumGame\":{\"num\":\"?3\"}}".to_vec());
    line_seeds.push(br#"{"id":"g"}"#.to_vec());
    line_seeds.push(br#"{"stoneGameIx":{"stones":[1,"2"]}}"#.to_vec());
    line_seeds.push(br#"{"id":"x","sumGame":{"num":"1"},"extra":1}"#.to_vec());
    write_seeds(&fuzz.join("corpus/line_parser"), "example", &line_seeds)?;

    let problems: Vec<pb::Problem> =
        lines.iter().enumerate().filter_map(|(i, line)| parse_problem(line, i as u64 + 1).ok()).collect();
    let mut requests: Vec<Vec<u8>> = problems
        .iter()
        .map(|problem| {
            pb::SolveRequest { problem: Some(problem.clone()), winner_only: false }.encode_to_vec()
        })
        .collect();
    let batches = [
        pb::SolveBatchRequest { problems: problems.clone(), winner_only: false }.encode_to_vec(),
        pb::SolveBatchRequest { problems, winner_only: true }.encode_to_vec(),
    ];
    requests.extend(batches.iter().cloned());
    let edge_cases = [
        pb::Problem { id: "no-game".into(), game: None },
        iv("above-fuzz-limit", 1_000_001),
        iv("above-default-limit", 1_000_000_001),
        iv("at-fuzz-limit", 1_000_000),
        iv("u64-max", u64::MAX),
        // Longer than one 896-byte block of the Sum Game tally.
        sum("two-blocks", &"9?01".repeat(500)),
        sum("bad-in-second-block", &format!("{}x?", "1".repeat(1000))),
        sum("odd", "1?3"),
        sum("non-ascii", "1é"),
    ];
    for problem in edge_cases {
        requests.push(pb::SolveRequest { problem: Some(problem), winner_only: false }.encode_to_vec());
    }
    requests.push(pb::SolveRequest { problem: None, winner_only: true }.encode_to_vec());
    write_seeds(&fuzz.join("corpus/solve_request"), "request", &requests)?;

    // The batch decoder reads requests and responses: one of each kind of answer.
    use pb::r#move::Game as M;
    let answer = |id: &str, game: Option<M>, error: Option<pb::SolutionError>| pb::Solution {
        id: id.into(),
        alice_wins: game.is_some(),
        winner: if game.is_some() { pb::Winner::Alice } else { pb::Winner::Bob } as i32,
        nim_value: matches!(game, Some(M::NimSquare(_))).then_some(52),
        winning_move: game.map(|game| pb::Move { game: Some(game) }),
        error: error.map(Box::new),
    };
    let error = pb::SolutionError {
        code: pb::solution_error::Code::InvalidArgument as i32,
        reason: "ODD_LENGTH".into(),
        metadata: [("length".to_owned(), "3".to_owned())].into(),
        ..Default::default()
    };
    let solutions = vec![
        answer("s", Some(M::SumGame(pb::SumGameMove { index: 3, digit: 9 })), None),
        answer("x", Some(M::StoneGameIx(pb::StoneGameIxMove { index: 1 })), None),
        answer("v", Some(M::StoneGameIv(pb::StoneGameIvMove { take: 961 })), None),
        answer("n", Some(M::NimSquare(pb::NimSquareMove { pile: 2, take: 14_400 })), None),
        answer("b", None, None),
        answer("e", None, Some(error)),
    ];
    let mut batch_seeds = batches.to_vec();
    batch_seeds.push(pb::SolveBatchResponse { solutions }.encode_to_vec());
    write_seeds(&fuzz.join("corpus/batch_decode"), "batch", &batch_seeds)?;

    // 0 and 1 cover nothing or one pile; 2^20 + 1000 is past the loader's spot check.
    // The target's first byte: 1 fixes the checksum up before loading, 0 keeps it as is.
    let tables: Vec<Vec<u8>> = [0, 1, 100, 1000, 4000, (1 << 20) + 1000]
        .into_iter()
        .map(|covered| IvTableFile { covered, losing: losing_positions_below(covered) }.encode())
        .flat_map(|file| [[&[1], file.as_slice()].concat(), [&[0], file.as_slice()].concat()])
        .collect();
    write_seeds(&fuzz.join("corpus/iv_table_file"), "table", &tables)
}

fn iv(id: &str, n: u64) -> pb::Problem {
    pb::Problem { id: id.into(), game: Some(pb::problem::Game::StoneGameIv(pb::StoneGameIv { n })) }
}

fn sum(id: &str, num: &str) -> pb::Problem {
    pb::Problem { id: id.into(), game: Some(pb::problem::Game::SumGame(pb::SumGame { num: num.into() })) }
}

fn write_seeds(dir: &Path, prefix: &str, seeds: &[Vec<u8>]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    for (i, seed) in seeds.iter().enumerate() {
        let path: PathBuf = dir.join(format!("seed-{prefix}-{i:02}"));
        fs::write(path, seed)?;
    }
    println!("{}: {} seeds", dir.display(), seeds.len());
    Ok(())
}

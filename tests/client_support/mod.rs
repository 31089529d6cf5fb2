//! Shared by the client test binaries: datasets, and checking outputs against the core.
#![allow(dead_code)] // each test binary uses its own part of this module

use std::path::Path;

use gamesolver::client::gen::{self, GenConfig};
use gamesolver::convert;
use gamesolver::games::{stone_game_iv, StoneGameIvTable};
use gamesolver::pb;

/// Writes `count` generated problems to `path`.
pub fn generate(path: &Path, count: u64, seed: u64) {
    let config = GenConfig { count, seed, ..GenConfig::default() };
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    gen::generate(&config, &mut file).unwrap();
}

/// What the output line for `input_line` (1-based `number`) must be, from the solver core.
pub fn expected(input_line: &str, number: u64, table: &StoneGameIvTable) -> pb::Solution {
    let problem: pb::Problem = serde_json::from_str(input_line).unwrap();
    let (id, game) = convert::problem(problem);
    let id = if id.is_empty() { number.to_string() } else { id };
    let result = game.and_then(|game| game.solve(table).map_err(Into::into));
    convert::solution(id, result)
}

/// Checks every output line against the solver core, in order.
pub fn assert_all_correct(input: &Path, output: &Path) {
    let table = StoneGameIvTable::new(stone_game_iv::DEFAULT_LIMIT);
    let input = std::fs::read_to_string(input).unwrap();
    let output = std::fs::read_to_string(output).unwrap();
    assert!(output.ends_with('\n'), "output ends in a partial line");
    let (inputs, outputs): (Vec<_>, Vec<_>) = (input.lines().collect(), output.lines().collect());
    assert_eq!(outputs.len(), inputs.len(), "one output line per input line");
    for (i, (input_line, output_line)) in inputs.iter().zip(&outputs).enumerate() {
        let got: pb::Solution = serde_json::from_str(output_line)
            .unwrap_or_else(|err| panic!("output line {} is not a Solution ({err}): {output_line}", i + 1));
        assert_eq!(got, expected(input_line, i as u64 + 1, &table), "line {}: {input_line}", i + 1);
    }
}

//! Request bytes as the server receives them: decode → validate → solve → encode.
//!
//! The same bytes are read as a `SolveBatchRequest` and as a `SolveRequest` (the two
//! shapes every RPC uses), each problem goes through `convert` and `Game::solve`, and the
//! response must survive an encode/decode round trip. Every answer is checked: Sum Game
//! and Stone Game IX against plain re-implementations of their rules, Stone Game IV
//! against the definition (exactly below 2^16, by its moves above), Nim Square against
//! the plain dynamic programme's Grundy values and the rule of its move.
#![no_main]

use std::sync::OnceLock;

use gamesolver::convert;
use gamesolver::problem::ProblemError;
use gamesolver::games::{nim_square, stone_game_iv, stone_game_ix, sum_game, Game, GameKind, Move, Outcome, Player, SolveError, Tables};
use gamesolver::pb;
use gamesolver_fuzz::{StoneGameIvReference, IV_REFERENCE_END};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// The fuzzer's table limit: growing to it takes milliseconds, once per process, and
/// every pile above it must be refused as out of range.
const IV_LIMIT: u64 = 1_000_000;

/// The fuzzer's Nim Square limit, below which the plain programme is the reference.
const GRUNDY_LIMIT: u64 = 20_000;

/// Longer inputs are skipped: a request's cost is linear in its size, and short ones
/// reach every branch while keeping the run at thousands of inputs a second.
const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Squares tried when checking that a lost Stone Game IV pile above the reference has
/// no winning move: the full check costs √n solves.
const IV_MOVES_CHECKED: u64 = 64;

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables::new(IV_LIMIT, GRUNDY_LIMIT))
}

fn grundy_reference() -> &'static [u16] {
    static VALUES: OnceLock<Vec<u16>> = OnceLock::new();
    VALUES.get_or_init(|| nim_square::baseline::grundy_values_below(GRUNDY_LIMIT + 1))
}

fn iv_reference() -> &'static StoneGameIvReference {
    static REFERENCE: OnceLock<StoneGameIvReference> = OnceLock::new();
    REFERENCE.get_or_init(StoneGameIvReference::new)
}

fuzz_target!(|bytes: &[u8]| {
    if bytes.len() > MAX_INPUT_BYTES {
        return;
    }
    if let Ok(request) = pb::SolveBatchRequest::decode(bytes) {
        assert_eq!(pb::SolveBatchRequest::decode(request.encode_to_vec().as_slice()).as_ref(), Ok(&request));
        let solutions = request
            .problems
            .into_iter()
            .map(|problem| {
                let (wire_id, wire_game) = (problem.id.clone(), problem.game.clone());
                let (id, game) = convert::problem(problem);
                assert_eq!(id, wire_id);
                check_conversion(wire_game, &game);
                solve_and_check(id, game)
            })
            .collect();
        round_trip(pb::SolveBatchResponse { solutions });
    }
    if let Ok(request) = pb::SolveRequest::decode(bytes) {
        assert_eq!(pb::SolveRequest::decode(request.encode_to_vec().as_slice()).as_ref(), Ok(&request));
        let wire = request.problem.clone();
        let (id, game) = convert::required_problem(request.problem);
        match wire {
            None => assert_eq!((id.as_str(), &game), ("", &Err(ProblemError::MissingProblem))),
            Some(problem) => {
                assert_eq!(id, problem.id);
                check_conversion(problem.game, &game);
            }
        }
        round_trip(pb::SolveResponse { solution: Some(solve_and_check(id, game)) });
    }
});

/// The domain game is the wire game, unchanged; no game is `MissingGame`.
fn check_conversion(wire: Option<pb::problem::Game>, game: &Result<Game, ProblemError>) {
    match (wire, game) {
        (Some(wire), Ok(game)) => assert_eq!(wire, pb::problem::Game::from(game.clone())),
        (None, Err(ProblemError::MissingGame)) => {}
        (wire, game) => panic!("{wire:?} converted to {game:?}"),
    }
}

/// Solves `game` as the service does, checks the outcome and its wire form, and
/// returns the wire solution.
fn solve_and_check(id: String, game: Result<Game, ProblemError>) -> pb::Solution {
    let result = game.and_then(|game| {
        let outcome = game.solve(tables());
        check_outcome(&game, &outcome);
        outcome.map_err(ProblemError::from)
    });
    let solution = convert::solution(id.clone(), result.clone());
    assert_eq!(solution.id, id);
    match result {
        Ok(outcome) => {
            assert_eq!(solution.error, None);
            assert_eq!(solution.alice_wins, outcome.winner == Player::Alice);
            assert_eq!(solution.winner, pb::Winner::from(outcome.winner) as i32);
            assert_eq!(solution.winning_move, outcome.winning_move.map(pb::Move::from));
            assert_eq!(solution.nim_value, outcome.nim_value);
        }
        Err(err) => {
            let wire = solution.error.as_ref().expect("an error solution carries its error");
            assert_eq!(wire.code, err.code() as i32);
            assert_ne!(wire.code, pb::solution_error::Code::Unspecified as i32);
            assert_eq!(wire.reason, err.reason());
            assert!(!wire.reason.is_empty() && !wire.message.is_empty());
            assert_eq!(wire.field, err.field().unwrap_or_default());
            assert_eq!(wire.metadata, err.metadata());
            assert_eq!((solution.alice_wins, solution.winner), (false, pb::Winner::Unspecified as i32));
            assert_eq!(solution.winning_move, None);
        }
    }
    solution
}

/// Every game: an outcome's move is its own game's, and only Alice has one; then the
/// games this target has a reference for are held to it. The check over every game is
/// made of what the registry says, so a game new to the crate is fuzzed the day it is
/// listed, before it has a reference here.
fn check_outcome(game: &Game, outcome: &Result<Outcome, SolveError>) {
    if let Ok(outcome) = outcome {
        if let Some(winning_move) = outcome.winning_move {
            assert_eq!((outcome.winner, winning_move.values().0), (Player::Alice, game.kind()), "{game:?}");
        }
        assert_eq!(outcome.nim_value.is_some(), game.kind().has_nim_value(), "{game:?}");
    }
    if let Game::SumGame(num) = game {
        assert_eq!(outcome, &sum_game_reference(num), "sum game {num:?}");
    }
    if let Game::StoneGameIx(stones) = game {
        assert_eq!(outcome, &Ok(stone_game_ix_reference(stones)), "stone game ix {stones:?}");
    }
    if let Game::StoneGameIv(n) = game {
        check_stone_game_iv(*n, outcome);
    }
    if let Game::NimSquare(piles) = game {
        check_nim_square(piles, outcome);
    }
}

/// Above the limit: `OutOfRange` for the first such pile. Within it: the nim value is the
/// XOR of the plain programme's values, Bob wins exactly when it is 0, and Alice's move
/// is the first pile with a square that leaves a value of 0, the smallest such square.
fn check_nim_square(piles: &[u64], outcome: &Result<Outcome, SolveError>) {
    if let Some(&n) = piles.iter().find(|&&n| n > GRUNDY_LIMIT) {
        assert_eq!(outcome, &Err(SolveError::OutOfRange { game: GameKind::NimSquare, n, limit: GRUNDY_LIMIT }));
        return;
    }
    let values = grundy_reference();
    let value = |n: u64| u32::from(values[n as usize]);
    let nim_value = piles.iter().fold(0, |xor, &n| xor ^ value(n));
    let expected_move = (0u64..).zip(piles).find_map(|(pile, &n)| {
        let target = value(n) ^ nim_value;
        (1..=n.isqrt()).map(|k| k * k).find(|&take| value(n - take) == target).map(|take| (pile, take))
    });
    let expected = match nim_value {
        0 => Outcome { winner: Player::Bob, winning_move: None, nim_value: Some(0) },
        _ => Outcome {
            winner: Player::Alice,
            winning_move: expected_move.map(|(pile, take)| Move::NimSquare(nim_square::NimSquareMove { pile, take })),
            nim_value: Some(nim_value),
        },
    };
    assert_eq!(outcome, &Ok(expected), "nim square {piles:?}");
}

/// Sum Game by its rules, one byte at a time: the first byte that is neither a digit nor
/// '?' is an error before an odd length is; Bob wins iff 2(left − right digit sums) =
/// 9(right − left '?' counts); Alice fills the first '?' with 9 or 0, whichever pushes
/// that difference further from zero.
fn sum_game_reference(num: &str) -> Result<Outcome, SolveError> {
    let bytes = num.as_bytes();
    if let Some(index) = bytes.iter().position(|&b| !b.is_ascii_digit() && b != b'?') {
        let found = num[index..].chars().next().expect("a byte after ASCII starts a char");
        return Err(SolveError::InvalidCharacter { index: index as u64, found });
    }
    if bytes.len() % 2 == 1 {
        return Err(SolveError::OddLength { len: bytes.len() as u64 });
    }
    let half = bytes.len() / 2;
    let (mut difference, mut marks) = (0i128, 0i128);
    for (i, &b) in bytes.iter().enumerate() {
        let sign = if i < half { 1 } else { -1 };
        match b {
            b'?' => marks += sign,
            digit => difference += sign * i128::from(digit - b'0'),
        }
    }
    let d = 2 * difference + 9 * marks;
    if d == 0 {
        return Ok(Outcome::BOB);
    }
    let winning_move = bytes.iter().position(|&b| b == b'?').map(|index| {
        let digit = if (d > 0) == (index < half) { 9 } else { 0 };
        Move::SumGame(sum_game::SumGameMove { index: index as u64, digit })
    });
    Ok(Outcome::alice(winning_move))
}

/// Stone Game IX from residue counts taken with `%`: with an even count of multiples of
/// 3 Alice wins iff both other residues occur, with an odd count iff their counts differ
/// by more than 2. Her opening stone is the first of the residue she opens with (the
/// scarcer one when even, the plentiful one when odd).
fn stone_game_ix_reference(stones: &[u64]) -> Outcome {
    let count = |r: u64| stones.iter().filter(|&&s| s % 3 == r).count();
    let (c0, c1, c2) = (count(0), count(1), count(2));
    let opening = match c0 % 2 {
        0 if c1 >= 1 && c2 >= 1 => Some(if c1 <= c2 { 1 } else { 2 }),
        1 if c1 > c2 + 2 => Some(1),
        1 if c2 > c1 + 2 => Some(2),
        _ => None,
    };
    match opening {
        None => Outcome::BOB,
        Some(residue) => {
            let index = stones.iter().position(|&s| s % 3 == residue).expect("the residue occurs") as u64;
            Outcome::alice(Some(Move::StoneGameIx(stone_game_ix::StoneGameIxMove { index })))
        }
    }
}

/// Above the limit: `OutOfRange`. Below 2^16: exactly the definition's answer and its
/// smallest winning square. Above: a winning move leaves a lost pile, and a lost pile
/// has no winning move among the first squares.
fn check_stone_game_iv(n: u64, outcome: &Result<Outcome, SolveError>) {
    if n > IV_LIMIT {
        assert_eq!(outcome, &Err(SolveError::OutOfRange { game: GameKind::StoneGameIv, n, limit: IV_LIMIT }));
        return;
    }
    let outcome = outcome.as_ref().unwrap_or_else(|err| panic!("n = {n} within the limit: {err}"));
    if n < IV_REFERENCE_END {
        let reference = iv_reference();
        let expected = match reference.wins(n) {
            true => Outcome::alice(reference.smallest_winning_take(n).map(|take| Move::StoneGameIv(stone_game_iv::StoneGameIvMove { take }))),
            false => Outcome::BOB,
        };
        assert_eq!(outcome, &expected, "stone game iv n = {n}");
        return;
    }
    let solve = |n: u64| tables().iv.solve(n).expect("within the limit").winner;
    match (outcome.winner, outcome.winning_move) {
        (Player::Alice, Some(Move::StoneGameIv(stone_game_iv::StoneGameIvMove { take }))) => {
            let k = take.isqrt();
            assert!(take > 0 && k * k == take && take <= n, "n = {n}: take {take} is not a square move");
            assert_eq!(solve(n - take), Player::Bob, "n = {n}: take {take} leaves a won pile");
        }
        (Player::Bob, None) => {
            for square in (1..=IV_MOVES_CHECKED).map(|k| k * k).take_while(|&sq| sq <= n) {
                assert_eq!(solve(n - square), Player::Alice, "n = {n} is lost, yet taking {square} wins");
            }
        }
        other => panic!("n = {n}: inconsistent outcome {other:?}"),
    }
}

/// Encoding then decoding gives the message back.
fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(message: M) {
    let decoded = M::decode(message.encode_to_vec().as_slice()).expect("an encoded message decodes");
    assert_eq!(decoded, message);
}

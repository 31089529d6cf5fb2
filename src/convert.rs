//! Protobuf ⇄ domain conversions, and the one place where errors become wire errors.
//!
//! A problem's error ([`ProblemError`], in [`crate::problem`]) carries its gRPC code, its
//! stable AIP-193 reason, the request field to blame and the values that vary; here the
//! unary RPC sends them as `google.rpc.Status` details (`ErrorInfo` and `BadRequest`), the
//! batch and streaming RPCs as the `error` of a `Solution`, so both always agree.

use std::collections::{BTreeMap, HashMap};

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::games::{Declared, Game, GameKind, GameRef, InputRef, Move, MoveValues, Outcome, Player};
use crate::pb;
use crate::problem::ProblemError;

/// The `ErrorInfo.domain` of every error this server sends.
pub const ERROR_DOMAIN: &str = "gamesolver.v1";

impl From<ProblemError> for Status {
    fn from(err: ProblemError) -> Self {
        let message = err.to_string();
        let metadata: HashMap<_, _> = err.metadata().into_iter().collect();
        let mut details = ErrorDetails::with_error_info(err.reason(), ERROR_DOMAIN, metadata);
        if let Some(field) = err.field() {
            details.add_bad_request_violation(field, message.clone());
        }
        Status::with_error_details(err.code(), message, details)
    }
}

impl From<ProblemError> for pb::SolutionError {
    fn from(err: ProblemError) -> Self {
        wire_error(err.code(), err.reason(), err.field(), err.metadata(), err.to_string())
    }
}

/// The `ErrorInfo.reason` of a request (a bulk client's input line, or an HTTP/JSON
/// body) that is not the message it should be in the protobuf JSON mapping.
pub const INVALID_JSON: &str = "INVALID_JSON";

/// The status of an HTTP/JSON request body that is not its request message:
/// `INVALID_ARGUMENT` with an `ErrorInfo` ([`INVALID_JSON`]); `message` says what is wrong
/// and where.
pub fn invalid_json(message: String) -> Status {
    let details = ErrorDetails::with_error_info(INVALID_JSON, ERROR_DOMAIN, HashMap::<String, String>::new());
    Status::with_error_details(Code::InvalidArgument, message, details)
}

/// A `SolutionError` from its parts; the bulk client builds its own line errors with it.
pub fn wire_error(
    code: Code,
    reason: &str,
    field: Option<&str>,
    metadata: BTreeMap<String, String>,
    message: String,
) -> pb::SolutionError {
    // SolutionError.Code is numbered as the gRPC codes; one that is not listed reads UNKNOWN.
    let code = pb::solution_error::Code::try_from(code as i32).unwrap_or(pb::solution_error::Code::Unknown);
    pb::SolutionError {
        code: code.into(),
        message,
        reason: reason.to_owned(),
        field: field.unwrap_or_default().to_owned(),
        metadata,
    }
}

/// The start of tonic's message for a request above the decoding limit.
const DECODE_LIMIT_MESSAGE: &str = "Error, decoded message length too large";

/// What prost's `DecodeError` says first, which tonic's codec makes `INTERNAL`.
const PROST_DECODE: &str = "failed to decode Protobuf message: ";

/// What tonic's decoder says of a request body that ends inside a message.
const TONIC_EOF: &str = "Unexpected EOF decoding stream.";

/// What tonic's decoder says of a message header with a compressed flag it cannot take.
const TONIC_PROTOCOL: &str = "protocol error: received message with";

/// What tonic-web's errors start with; in a request's status, every one is about a body
/// it could not read (its response errors never reach the server's layers).
const TONIC_WEB_DECODE: &str = "tonic-web: ";

/// Whether [`caller_fault`] may rewrite a status of `code`: the codes its match reads. A
/// layer that sees every call's status asks this before parsing the whole status.
pub fn may_be_caller_fault(code: Code) -> bool {
    matches!(code, Code::OutOfRange | Code::Internal)
}

/// The status a server sends in place of `status`, which tonic (or tonic-web) made for a
/// request the caller got wrong, so that codes say whose fault a failure is and the
/// server-error alert counts only the server's own: `RESOURCE_EXHAUSTED` for a message
/// above the limit (tonic says `OUT_OF_RANGE`; grpc-go and grpc-java say
/// `RESOURCE_EXHAUSTED`), and `INVALID_ARGUMENT` for one that does not decode, a body cut
/// inside a message, a bad compressed flag, or a gRPC-Web body tonic-web cannot read
/// (tonic says `INTERNAL`, as gRPC's status code table has it for a server that cannot
/// parse, which would let any client fire the alert). Any other status is itself.
pub fn caller_fault(status: Status) -> Status {
    let message = status.message();
    match status.code() {
        Code::OutOfRange if message.starts_with(DECODE_LIMIT_MESSAGE) => Status::resource_exhausted(message),
        Code::Internal => match message {
            _ if message.starts_with(PROST_DECODE) => Status::invalid_argument(format!(
                "the request message does not decode: {}",
                &message[PROST_DECODE.len()..]
            )),
            TONIC_EOF => Status::invalid_argument("the request body ended inside a message"),
            _ if message.starts_with(TONIC_PROTOCOL) => Status::invalid_argument(message),
            _ if message.starts_with(TONIC_WEB_DECODE) => Status::invalid_argument(format!(
                "malformed gRPC-Web request: {}",
                &message[TONIC_WEB_DECODE.len()..]
            )),
            _ => status,
        },
        _ => status,
    }
}

/// Which game a wire problem holds, if any.
pub fn game_kind(problem: &pb::Problem) -> Option<GameKind> {
    problem.game.as_ref().map(|game| wire_input(game).0)
}

/// The metrics label of a wire problem's game; `none` for a problem without one.
pub fn game_label(problem: Option<&pb::Problem>) -> &'static str {
    problem.and_then(game_kind).map_or("none", GameKind::label)
}

/// Roughly the memory a decoded problem holds: what a stream's admission counts.
pub fn problem_bytes(problem: &pb::Problem) -> usize {
    let input = match problem.game.as_ref().map(|game| wire_input(game).1) {
        Some(InputRef::Text(text)) => text.len(),
        Some(InputRef::Integers(values)) => std::mem::size_of_val(values),
        Some(InputRef::Integer(_)) | None => 0,
    };
    std::mem::size_of::<pb::Problem>() + problem.id.len() + input
}

/// Splits a wire problem into its id and its game, taking ownership of the input.
pub fn problem(problem: pb::Problem) -> (String, Result<Game, ProblemError>) {
    (problem.id, problem.game.map(wire_game).ok_or(ProblemError::MissingGame))
}

/// As [`problem`], for a request field that may be unset (`MISSING_PROBLEM`, with an empty id).
pub fn required_problem(problem: Option<pb::Problem>) -> (String, Result<Game, ProblemError>) {
    match problem {
        Some(p) => self::problem(p),
        None => (String::new(), Err(ProblemError::MissingProblem)),
    }
}

impl From<Player> for pb::Winner {
    fn from(player: Player) -> Self {
        match player {
            Player::Alice => pb::Winner::Alice,
            Player::Bob => pb::Winner::Bob,
        }
    }
}

impl From<Move> for pb::Move {
    fn from(winning_move: Move) -> Self {
        let (kind, values) = winning_move.values();
        pb::Move { game: Some(wire_move(kind, values)) }
    }
}

/// The arms of every conversion between a game's protobuf messages and its domain
/// types, one a game of the list, each through the game's own [`Declared`] conversions.
macro_rules! wire_arms {
    ($($module:ident :: $game:ident),+ $(,)?) => {
        /// A wire problem's game and its input.
        pub fn wire_input(game: &pb::problem::Game) -> (GameKind, InputRef<'_>) {
            match game {
                $(pb::problem::Game::$game(g) => {
                    let input = <crate::games::$module::$game as Declared>::wire_input(g);
                    GameRef::$game(input).parts()
                })+
            }
        }

        /// The domain game of a wire game, taking ownership of its input.
        fn wire_game(game: pb::problem::Game) -> Game {
            match game {
                $(pb::problem::Game::$game(g) =>
                    Game::$game(<crate::games::$module::$game as Declared>::from_wire(g)),)+
            }
        }

        impl From<Game> for pb::problem::Game {
            fn from(game: Game) -> Self {
                match game {
                    $(Game::$game(input) =>
                        pb::problem::Game::$game(<crate::games::$module::$game as Declared>::to_wire(input)),)+
                }
            }
        }

        /// A wire move's game and its values, in the order of the game's
        /// [`GameKind::move_fields`] ([`Move::values`] of the wire types).
        pub fn move_values(game: &pb::r#move::Game) -> (GameKind, MoveValues) {
            match game {
                $(pb::r#move::Game::$game(m) =>
                    (GameKind::$game, <crate::games::$module::$game as Declared>::wire_move_values(m)),)+
            }
        }

        /// The wire move of `kind` with `values` ([`move_values`]' inverse). A `uint32`
        /// field keeps the low 32 bits of its value, as prost reads one from the wire.
        pub fn wire_move(kind: GameKind, values: MoveValues) -> pb::r#move::Game {
            match kind {
                $(GameKind::$game =>
                    pb::r#move::Game::$game(<crate::games::$module::$game as Declared>::wire_move(values)),)+
            }
        }
    };
}

crate::games::with_games!(wire_arms);

/// The wire solution for problem `id`: its outcome, or its error.
pub fn solution(id: String, result: Result<Outcome, ProblemError>) -> pb::Solution {
    match result {
        Ok(outcome) => pb::Solution {
            id,
            alice_wins: outcome.alice_wins(),
            winner: pb::Winner::from(outcome.winner).into(),
            winning_move: outcome.winning_move.map(Into::into),
            error: None,
            nim_value: outcome.nim_value,
        },
        Err(err) => pb::Solution { id, error: Some(Box::new(err.into())), ..Default::default() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::{stone_game_iv, SolveError};
    use crate::pool::PoolError;

    /// A problem of `kind` with a non-empty input, drawn by its own generator.
    fn sample(kind: GameKind) -> pb::Problem {
        let sizes: Vec<_> = kind.sizes().iter().map(|_| 2..=2).collect();
        let game = kind.random(&mut rand::rng(), &sizes);
        pb::Problem { id: "p".into(), game: Some(game.into()) }
    }

    /// Every game through every fact the wire side asks of it: its kind and label, its
    /// domain problem, its size for the request budget, the field its errors blame.
    #[test]
    fn every_game_has_every_wire_fact() {
        let base = std::mem::size_of::<pb::Problem>() + 1;
        for kind in GameKind::ALL {
            let problem = sample(kind);
            assert_eq!(game_kind(&problem), Some(kind));
            let values =
                std::array::from_fn(|at| if at < kind.move_fields().len() { at as u64 + 7 } else { 0 });
            assert_eq!(move_values(&wire_move(kind, values)), (kind, values), "{kind:?}");
            assert_eq!(game_label(Some(&problem)), kind.label());
            assert!(problem_bytes(&problem) >= base, "{kind:?}");
            let (_, game) = self::problem(problem);
            assert_eq!(game.unwrap().kind(), kind);
            let null = ProblemError::NullInput { game: kind, index: None };
            assert_eq!(null.field(), Some(kind.input_path()));
            assert!(kind.input_path().starts_with(&format!("problem.{}.", kind.label())));
            if let Some(limit) = kind.max_limit() {
                let err = ProblemError::Solve(SolveError::OutOfRange { game: kind, n: limit + 1, limit });
                assert_eq!(err.field(), Some(kind.input_path()), "{kind:?}");
            }
        }
        let sum = ProblemError::Solve(SolveError::OddLength { len: 3 });
        assert_eq!(sum.field(), Some(GameKind::SumGame.input_path()));
    }

    fn every_error() -> Vec<ProblemError> {
        vec![
            ProblemError::MissingProblem,
            ProblemError::MissingGame,
            SolveError::OddLength { len: 3 }.into(),
            SolveError::InvalidCharacter { index: 1, found: 'x' }.into(),
            SolveError::OutOfRange { game: GameKind::StoneGameIv, n: 5, limit: 4 }.into(),
            PoolError::Panicked("boom".into()).into(),
            PoolError::Gone.into(),
            ProblemError::NullInput { game: GameKind::StoneGameIv, index: None },
            ProblemError::NegativeValue { game: GameKind::NimSquare, value: -4, index: Some(2) },
            ProblemError::SeveralGames { games: vec![GameKind::SumGame, GameKind::StoneGameIv] },
        ]
    }

    #[test]
    fn status_details_and_solution_error_agree() {
        for err in every_error() {
            let status = Status::from(err.clone());
            let wire = pb::SolutionError::from(err);
            assert_eq!(wire.code, status.code() as i32, "{}", status.message());
            assert_eq!(wire.message, status.message());
            let details = status.get_error_details();
            let info = details.error_info().expect("every status carries an ErrorInfo");
            assert_eq!(info.reason, wire.reason);
            assert_eq!(info.domain, ERROR_DOMAIN);
            assert_eq!(info.metadata, wire.metadata.clone().into_iter().collect());
            let fields: Vec<_> = details
                .bad_request()
                .map(|b| b.field_violations.iter().map(|v| v.field.clone()).collect())
                .unwrap_or_default();
            assert_eq!(fields, if wire.field.is_empty() { vec![] } else { vec![wire.field.clone()] });
        }
    }

    #[test]
    fn reasons_are_distinct_and_metadata_carries_the_values() {
        let reasons: std::collections::HashSet<_> = every_error().iter().map(ProblemError::reason).collect();
        assert_eq!(reasons.len(), every_error().len());
        let err = ProblemError::from(SolveError::InvalidCharacter { index: 7, found: 'é' });
        assert_eq!(err.metadata()["index"], "7");
        assert_eq!(err.metadata()["character"], "é");
        let err = ProblemError::from(SolveError::OutOfRange {
            game: GameKind::StoneGameIv,
            n: 10_000_000_000,
            limit: 1_000_000_000,
        });
        assert_eq!((err.code(), err.field()), (Code::OutOfRange, Some("problem.stone_game_iv.n")));
        assert_eq!(err.metadata()["limit"], "1000000000");
    }

    #[test]
    fn columnar_errors_name_the_input_and_carry_its_values() {
        let wire = |err: ProblemError| pb::SolutionError::from(err);
        let null = wire(ProblemError::NullInput { game: GameKind::StoneGameIv, index: None });
        assert_eq!(null.code, pb::solution_error::Code::InvalidArgument as i32);
        assert_eq!(
            (null.message.as_str(), null.reason.as_str(), null.field.as_str()),
            ("stone game iv: n is null", "NULL_INPUT", "problem.stone_game_iv.n")
        );
        assert!(null.metadata.is_empty());
        let null = wire(ProblemError::NullInput { game: GameKind::StoneGameIx, index: Some(3) });
        assert_eq!(null.message, "stone game ix: stones[3] is null");
        assert_eq!(null.metadata["index"], "3");
        let negative =
            wire(ProblemError::NegativeValue { game: GameKind::NimSquare, value: -4, index: Some(2) });
        assert_eq!(
            (negative.message.as_str(), negative.reason.as_str(), negative.field.as_str()),
            ("nim square: piles[2] = -4 is negative", "NEGATIVE_VALUE", "problem.nim_square.piles")
        );
        assert_eq!((negative.metadata["value"].as_str(), negative.metadata["index"].as_str()), ("-4", "2"));
        let negative =
            wire(ProblemError::NegativeValue { game: GameKind::StoneGameIv, value: -1, index: None });
        assert_eq!(negative.message, "stone game iv: n = -1 is negative");
        assert!(!negative.metadata.contains_key("index"));
        let fraction = wire(ProblemError::NotUint64 {
            game: GameKind::StoneGameIx,
            value: "7.5".into(),
            index: Some(1),
        });
        assert_eq!(
            (fraction.message.as_str(), fraction.reason.as_str(), fraction.field.as_str()),
            (
                "stone game ix: stones[1] = 7.5 is not a uint64 (a whole number from 0 to 18446744073709551615)",
                "NOT_UINT64",
                "problem.stone_game_ix.stones"
            )
        );
        assert_eq!((fraction.metadata["value"].as_str(), fraction.metadata["index"].as_str()), ("7.5", "1"));
        assert_eq!(fraction.code, pb::solution_error::Code::InvalidArgument as i32);
        let several =
            wire(ProblemError::SeveralGames { games: vec![GameKind::SumGame, GameKind::StoneGameIv] });
        assert_eq!(
            (several.message.as_str(), several.reason.as_str(), several.field.as_str()),
            ("problem has several games: num, n; set only one", "SEVERAL_GAMES", "problem.game")
        );
        assert_eq!(several.metadata["games"], "sum_game,stone_game_iv");
    }

    #[test]
    fn outcome_to_solution() {
        let won = solution(
            "a".into(),
            Ok(Outcome::alice(Some(Move::StoneGameIv(stone_game_iv::StoneGameIvMove { take: 4 })))),
        );
        assert!(won.alice_wins);
        assert_eq!(won.winner, pb::Winner::Alice as i32);
        assert_eq!(
            won.winning_move.and_then(|m| m.game),
            Some(pb::r#move::Game::StoneGameIv(pb::StoneGameIvMove { take: 4 }))
        );
        let lost = solution("b".into(), Ok(Outcome::BOB));
        assert_eq!((lost.alice_wins, lost.winner), (false, pb::Winner::Bob as i32));
        let bad = solution("c".into(), Err(ProblemError::MissingGame));
        let error = bad.error.expect("an error solution");
        assert_eq!(error.code, pb::solution_error::Code::InvalidArgument as i32);
        assert_eq!(error.reason, "NO_GAME");
        assert_eq!(bad.winner, pb::Winner::Unspecified as i32);
    }
}

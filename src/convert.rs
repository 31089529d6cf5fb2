//! Protobuf ⇄ domain conversions, and the one place where errors become wire errors.
//!
//! Every error a problem can meet maps to a gRPC code in [`ProblemError::code`]; the
//! unary RPC turns that into a `tonic::Status`, the batch and streaming RPCs into the
//! `error` field of a `Solution`, so both always agree.

use tonic::{Code, Status};

use crate::games::{Game, Move, Outcome, Player, SolveError};
use crate::pb;
use crate::pool::PoolError;

/// Why one problem got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemError {
    /// The `game` oneof is unset.
    #[error("problem has no game: set one of sumGame, stoneGameIx, stoneGameIv")]
    MissingGame,
    /// The game's input is not valid, or beyond this server's limits.
    #[error(transparent)]
    Solve(#[from] SolveError),
    /// The solver failed (a bug) or the server is stopping.
    #[error(transparent)]
    Pool(#[from] PoolError),
}

impl ProblemError {
    /// The gRPC code of this error.
    pub fn code(&self) -> Code {
        match self {
            ProblemError::MissingGame => Code::InvalidArgument,
            ProblemError::Solve(SolveError::InvalidCharacter { .. } | SolveError::OddLength { .. }) => {
                Code::InvalidArgument
            }
            ProblemError::Solve(SolveError::OutOfRange { .. }) => Code::OutOfRange,
            ProblemError::Pool(PoolError::Panicked(_)) => Code::Internal,
            ProblemError::Pool(PoolError::Gone) => Code::Unavailable,
        }
    }
}

impl From<ProblemError> for Status {
    fn from(err: ProblemError) -> Self {
        Status::new(err.code(), err.to_string())
    }
}

impl From<ProblemError> for pb::Error {
    fn from(err: ProblemError) -> Self {
        // Error.Code is numbered as the gRPC codes; one that is not listed reads UNKNOWN.
        let code = pb::error::Code::try_from(err.code() as i32).unwrap_or(pb::error::Code::Unknown);
        pb::Error { code: code.into(), message: err.to_string() }
    }
}

/// Splits a wire problem into its id and its game, taking ownership of the input.
pub fn problem(problem: pb::Problem) -> (String, Result<Game, ProblemError>) {
    use pb::problem::Game as G;
    let game = match problem.game {
        Some(G::SumGame(g)) => Ok(Game::SumGame(g.num)),
        Some(G::StoneGameIx(g)) => Ok(Game::StoneGameIx(g.stones)),
        Some(G::StoneGameIv(g)) => Ok(Game::StoneGameIv(g.n)),
        None => Err(ProblemError::MissingGame),
    };
    (problem.id, game)
}

impl From<Game> for pb::problem::Game {
    fn from(game: Game) -> Self {
        use pb::problem::Game as G;
        match game {
            Game::SumGame(num) => G::SumGame(pb::SumGame { num }),
            Game::StoneGameIx(stones) => G::StoneGameIx(pb::StoneGameIx { stones }),
            Game::StoneGameIv(n) => G::StoneGameIv(pb::StoneGameIv { n }),
        }
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
        use pb::r#move::Game as G;
        let game = match winning_move {
            Move::SumGame { index, digit } => G::SumGame(pb::SumGameMove { index, digit: u32::from(digit) }),
            Move::StoneGameIx { index } => G::StoneGameIx(pb::StoneGameIxMove { index }),
            Move::StoneGameIv { take } => G::StoneGameIv(pb::StoneGameIvMove { take }),
        };
        pb::Move { game: Some(game) }
    }
}

/// The wire solution for problem `id`: its outcome, or its error.
pub fn solution(id: String, result: Result<Outcome, ProblemError>) -> pb::Solution {
    match result {
        Ok(outcome) => pb::Solution {
            id,
            alice_wins: outcome.alice_wins(),
            winner: pb::Winner::from(outcome.winner).into(),
            winning_move: outcome.winning_move.map(Into::into),
            error: None,
        },
        Err(err) => pb::Solution { id, error: Some(err.into()), ..Default::default() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_agree_between_status_and_solution() {
        let errors = [
            ProblemError::MissingGame,
            SolveError::OddLength { len: 3 }.into(),
            SolveError::InvalidCharacter { index: 1, found: 'x' }.into(),
            SolveError::OutOfRange { n: 5, limit: 4 }.into(),
            PoolError::Panicked("boom".into()).into(),
            PoolError::Gone.into(),
        ];
        for err in errors {
            let status = Status::from(err.clone());
            let wire = pb::Error::from(err);
            assert_eq!(wire.code, status.code() as i32, "{}", status.message());
            assert_eq!(wire.message, status.message());
        }
    }

    #[test]
    fn outcome_to_solution() {
        let won = solution("a".into(), Ok(Outcome::alice(Some(Move::StoneGameIv { take: 4 }))));
        assert!(won.alice_wins);
        assert_eq!(won.winner, pb::Winner::Alice as i32);
        assert_eq!(
            won.winning_move.and_then(|m| m.game),
            Some(pb::r#move::Game::StoneGameIv(pb::StoneGameIvMove { take: 4 }))
        );
        let lost = solution("b".into(), Ok(Outcome::BOB));
        assert_eq!((lost.alice_wins, lost.winner), (false, pb::Winner::Bob as i32));
        let bad = solution("c".into(), Err(ProblemError::MissingGame));
        assert_eq!(bad.error.map(|e| e.code), Some(pb::error::Code::InvalidArgument as i32));
        assert_eq!(bad.winner, pb::Winner::Unspecified as i32);
    }
}

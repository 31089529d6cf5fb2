//! A problem as every door hands it to the solver, and why one got no answer: the
//! domain's error, and its one mapping to a gRPC code, a stable reason and the request
//! field to blame, which every door (gRPC, Connect, Flight) and the bulk client's tables
//! send and read alike.
//!
//! The mapping is two exhaustive steps: an error to its [`Reason`] and its game
//! ([`ProblemError::reason_of`], [`ProblemError::game`]), and a reason to its code, its
//! name and the field it blames (`reasons!`, one row a reason). A new error does not
//! compile until it has a reason, and a new reason not until it has a code and a field;
//! a table's row, which keeps only the reason and the game, is mapped back by the same rows
//! ([`Reason::parse`]).

use std::collections::BTreeMap;

use tonic::Code;

use crate::games::{Game, GameKind, GameRef, SolveError};
use crate::pool::PoolError;

/// A problem as the doors hand it over: its game, or why it has none (a missing game, a
/// null input), which is answered and counted like any other error.
pub type Problem = Result<Game, ProblemError>;

/// A problem whose input a door keeps in buffers of its own (Arrow columns), borrowed
/// from them, which the solver solves without copying (`Solver::solve_borrowed`).
pub type ProblemRef<'a> = Result<GameRef<'a>, ProblemError>;

/// Why one problem got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProblemError {
    /// A request message without its `problem`.
    #[error("request has no problem: set its problem field")]
    MissingProblem,
    /// The `game` oneof is unset.
    #[error("problem has no game: set one of {}", GameKind::ALL.map(GameKind::json_field).join(", "))]
    MissingGame,
    /// The game's input is not valid, or beyond this server's limits.
    #[error(transparent)]
    Solve(#[from] SolveError),
    /// The solver failed (a bug) or the server is stopping.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// A table row whose game input is null, or holds a null value (columnar input only).
    #[error("{}: {} is null", game.name(), element(*game, *index))]
    NullInput {
        /// The game whose input it is.
        game: GameKind,
        /// The position of the null value in a list input; `None` when the input itself is null.
        index: Option<u64>,
    },
    /// A table row with a negative integer where the game counts stones (columnar input only).
    #[error("{}: {} = {value} is negative", game.name(), element(*game, *index))]
    NegativeValue {
        /// The game whose input it is.
        game: GameKind,
        /// The value found.
        value: i64,
        /// Its position in a list input; `None` for a single integer (`n`).
        index: Option<u64>,
    },
    /// A table row whose number is not a count: a fraction, an infinity, or beyond
    /// `uint64` (a float, decimal or text column; columnar input only).
    #[error("{}: {} = {value} is not a uint64 (a whole number from 0 to 18446744073709551615)", game.name(), element(*game, *index))]
    NotUint64 {
        /// The game whose input it is.
        game: GameKind,
        /// The value found, as the message shows it: `7.5`, `inf`, `"x"`.
        value: String,
        /// Its position in a list input; `None` for a single number (`n`).
        index: Option<u64>,
    },
    /// A table row of a `mixed` exchange with more than one game's input set.
    #[error("problem has several games: {}; set only one", inputs(games))]
    SeveralGames {
        /// The games whose inputs are set, in the order of [`GameKind::ALL`].
        games: Vec<GameKind>,
    },
}

/// A game's input, or one element of it: `n`, `stones[3]`.
fn element(game: GameKind, index: Option<u64>) -> String {
    match index {
        Some(index) => format!("{}[{index}]", game.input()),
        None => game.input().to_owned(),
    }
}

/// The games' input names, for a message: `num, n`.
fn inputs(games: &[GameKind]) -> String {
    games.iter().map(|game| game.input()).collect::<Vec<_>>().join(", ")
}

/// What an error blames in the request; see [`Reason::field`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blames {
    /// The request's `problem`.
    Problem,
    /// The problem's `game` oneof.
    Game,
    /// The game's input ([`GameKind::input_path`]).
    Input,
    /// Nothing in the request: the server's fault or its state.
    Nothing,
}

/// Declares [`Reason`] from its rows: a variant, its name, its code, what it blames.
macro_rules! reasons {
    ($($(#[$doc:meta])* $reason:ident => $name:literal, $code:ident, $blames:ident;)+) => {
        /// Why a problem got no answer, as its wire error says: `ErrorInfo.reason`, with
        /// the code and the field that go with it. The README lists them all.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Reason {
            $($(#[$doc])* $reason,)+
        }

        impl Reason {
            /// Every reason.
            pub const ALL: [Reason; [$($name),+].len()] = [$(Reason::$reason),+];

            /// The reason's name on the wire: `ODD_LENGTH`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Reason::$reason => $name,)+
                }
            }

            /// The gRPC code of every error of this reason.
            pub const fn code(self) -> Code {
                match self {
                    $(Reason::$reason => Code::$code,)+
                }
            }

            const fn blames(self) -> Blames {
                match self {
                    $(Reason::$reason => Blames::$blames,)+
                }
            }
        }
    };
}

reasons! {
    /// A request message without its `problem`.
    MissingProblem => "MISSING_PROBLEM", InvalidArgument, Problem;
    /// A problem without a game.
    NoGame => "NO_GAME", InvalidArgument, Game;
    /// A Sum Game string with a character other than a digit or '?'.
    InvalidCharacter => "INVALID_CHARACTER", InvalidArgument, Input;
    /// A Sum Game string of odd length.
    OddLength => "ODD_LENGTH", InvalidArgument, Input;
    /// A pile beyond the limit of its game's table.
    PileAboveLimit => "PILE_ABOVE_LIMIT", OutOfRange, Input;
    /// The solver panicked (a bug).
    SolverPanicked => "SOLVER_PANICKED", Internal, Nothing;
    /// The server is stopping.
    ServerStopping => "SERVER_STOPPING", Unavailable, Nothing;
    /// A null input or a null in a list (columnar input).
    NullInput => "NULL_INPUT", InvalidArgument, Input;
    /// A negative integer (columnar input).
    NegativeValue => "NEGATIVE_VALUE", InvalidArgument, Input;
    /// A number that is not a count (columnar input).
    NotUint64 => "NOT_UINT64", InvalidArgument, Input;
    /// A row with several games' inputs set (columnar input).
    SeveralGames => "SEVERAL_GAMES", InvalidArgument, Game;
}

impl Reason {
    /// The reason named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|reason| reason.name() == name)
    }

    /// The request field an error of this reason blames, as a path from the request's
    /// `problem`, given the game whose input it is (an input's error has one; a table's
    /// row keeps it in its `game` column).
    pub fn field(self, game: Option<GameKind>) -> Option<&'static str> {
        match self.blames() {
            Blames::Problem => Some("problem"),
            Blames::Game => Some("problem.game"),
            Blames::Input => game.map(GameKind::input_path),
            Blames::Nothing => None,
        }
    }
}

impl ProblemError {
    /// The error's reason: the one exhaustive step from an error to its code, reason and
    /// field.
    pub fn reason_of(&self) -> Reason {
        match self {
            ProblemError::MissingProblem => Reason::MissingProblem,
            ProblemError::MissingGame => Reason::NoGame,
            ProblemError::Solve(SolveError::InvalidCharacter { .. }) => Reason::InvalidCharacter,
            ProblemError::Solve(SolveError::OddLength { .. }) => Reason::OddLength,
            ProblemError::Solve(SolveError::OutOfRange { .. }) => Reason::PileAboveLimit,
            ProblemError::Pool(PoolError::Panicked(_)) => Reason::SolverPanicked,
            ProblemError::Pool(PoolError::Gone) => Reason::ServerStopping,
            ProblemError::NullInput { .. } => Reason::NullInput,
            ProblemError::NegativeValue { .. } => Reason::NegativeValue,
            ProblemError::NotUint64 { .. } => Reason::NotUint64,
            ProblemError::SeveralGames { .. } => Reason::SeveralGames,
        }
    }

    /// The game whose input is at fault, if one is.
    pub fn game(&self) -> Option<GameKind> {
        match self {
            ProblemError::Solve(err) => Some(err.game()),
            ProblemError::NullInput { game, .. }
            | ProblemError::NegativeValue { game, .. }
            | ProblemError::NotUint64 { game, .. } => Some(*game),
            ProblemError::MissingProblem
            | ProblemError::MissingGame
            | ProblemError::SeveralGames { .. }
            | ProblemError::Pool(_) => None,
        }
    }

    /// The gRPC code of this error.
    pub fn code(&self) -> Code {
        self.reason_of().code()
    }

    /// The stable, machine-readable reason (`ErrorInfo.reason`).
    pub fn reason(&self) -> &'static str {
        self.reason_of().name()
    }

    /// The request field to blame, as a path from the request's `problem`
    /// (a `BadRequest` field violation); `None` when the input is not at fault.
    pub fn field(&self) -> Option<&'static str> {
        self.reason_of().field(self.game())
    }

    /// The values that vary from one occurrence to the next (`ErrorInfo.metadata`).
    pub fn metadata(&self) -> BTreeMap<String, String> {
        let pairs: Vec<(&str, String)> = match self {
            ProblemError::Solve(SolveError::InvalidCharacter { index, found }) => {
                vec![("index", index.to_string()), ("character", found.to_string())]
            }
            ProblemError::Solve(SolveError::OddLength { len }) => vec![("length", len.to_string())],
            ProblemError::Solve(SolveError::OutOfRange { n, limit, .. }) => {
                vec![("n", n.to_string()), ("limit", limit.to_string())]
            }
            ProblemError::NullInput { index, .. } => {
                index.map(|index| ("index", index.to_string())).into_iter().collect()
            }
            ProblemError::NegativeValue { value, index, .. } => {
                let index = index.map(|index| ("index", index.to_string()));
                [("value", value.to_string())].into_iter().chain(index).collect()
            }
            ProblemError::NotUint64 { value, index, .. } => {
                let index = index.map(|index| ("index", index.to_string()));
                [("value", value.clone())].into_iter().chain(index).collect()
            }
            ProblemError::SeveralGames { games } => {
                vec![("games", games.iter().map(|game| game.label()).collect::<Vec<_>>().join(","))]
            }
            ProblemError::MissingProblem
            | ProblemError::MissingGame
            | ProblemError::Pool(PoolError::Panicked(_) | PoolError::Gone) => vec![],
        };
        pairs.into_iter().map(|(key, value)| (key.to_owned(), value)).collect()
    }
}

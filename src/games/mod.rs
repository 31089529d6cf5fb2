//! The pure solver core: synchronous, deterministic, no I/O, no tokio, no protobuf.
//!
//! Each game lives in its own module with a closed-form (or table-driven) solver and the
//! winning move. `exhaustive` holds the brute-force minimax that the tests hold every
//! solver to.

pub mod nim_square;
pub mod stone_game_iv;
pub mod stone_game_ix;
pub mod sum_game;

#[cfg(test)]
pub(crate) mod exhaustive;
mod grower;
pub mod table;

use std::ops::RangeInclusive;

pub use nim_square::GrundyTable;
pub use stone_game_iv::StoneGameIvTable;
use table::{Table, TableGame};

/// A player; Alice always moves first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Player {
    /// The first player.
    Alice,
    /// The second player.
    Bob,
}

/// Alice's winning first move, per game.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// Fill the '?' at `index` with `digit`.
    SumGame {
        /// Byte index of the '?' in the string.
        index: u64,
        /// The digit to write, 0 to 9.
        digit: u8,
    },
    /// Remove the stone at `index` first.
    StoneGameIx {
        /// Index of the stone in the input.
        index: u64,
    },
    /// Take `take` stones (a non-zero square).
    StoneGameIv {
        /// The square number of stones to take.
        take: u64,
    },
    /// Take `take` stones (a non-zero square) from pile number `pile`.
    NimSquare(nim_square::NimSquareMove),
}

impl Move {
    /// The move's game and its values, in the order of that game's
    /// [`GameKind::move_fields`]: how every door that is not the proto's own types (the
    /// codec's writer, Arrow columns) carries a move.
    pub fn values(&self) -> (GameKind, MoveValues) {
        match *self {
            Move::SumGame { index, digit } => (GameKind::SumGame, [index, u64::from(digit)]),
            Move::StoneGameIx { index } => (GameKind::StoneGameIx, [index, 0]),
            Move::StoneGameIv { take } => (GameKind::StoneGameIv, [take, 0]),
            Move::NimSquare(m) => (GameKind::NimSquare, [m.pile, m.take]),
        }
    }
}

/// A field of a move, as the proto names it. A game's move is made of some of these
/// ([`GameKind::move_fields`]), numbered 1, 2, ... in that order in its move message; a
/// table of solutions has one `move_` column a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MoveField {
    /// A position in the input: the `?` to fill, the stone to remove.
    Index,
    /// The digit to write (the proto's only `uint32` move field).
    Digit,
    /// The pile to take from.
    Pile,
    /// How many stones to take.
    Take,
}

impl MoveField {
    /// Every field, in the order of a table's `move_` columns.
    pub const ALL: [MoveField; 4] = [MoveField::Index, MoveField::Digit, MoveField::Pile, MoveField::Take];

    /// The field's name in the proto: `index`.
    pub const fn name(self) -> &'static str {
        match self {
            MoveField::Index => "index",
            MoveField::Digit => "digit",
            MoveField::Pile => "pile",
            MoveField::Take => "take",
        }
    }

    /// The field's column in a table of solutions: `move_index`.
    pub const fn column(self) -> &'static str {
        match self {
            MoveField::Index => "move_index",
            MoveField::Digit => "move_digit",
            MoveField::Pile => "move_pile",
            MoveField::Take => "move_take",
        }
    }

    /// True for a field the proto declares `uint32`; the others are `uint64`.
    pub const fn is_u32(self) -> bool {
        matches!(self, MoveField::Digit)
    }
}

/// The most fields a game's move has.
pub const MOST_MOVE_FIELDS: usize = 2;

/// A move's values in the order of its game's [`GameKind::move_fields`]; those past its
/// fields are 0.
pub type MoveValues = [u64; MOST_MOVE_FIELDS];

/// The result of optimal play.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Who wins.
    pub winner: Player,
    /// When Alice wins and a move is left to make, one move that keeps her winning.
    pub winning_move: Option<Move>,
    /// Nim Square only: the position's nim value (0 exactly when Bob wins).
    pub nim_value: Option<u32>,
}

impl From<nim_square::NimSquareOutcome> for Outcome {
    fn from(outcome: nim_square::NimSquareOutcome) -> Self {
        Outcome {
            winner: outcome.winner,
            winning_move: outcome.winning_move.map(Move::NimSquare),
            nim_value: Some(outcome.nim_value),
        }
    }
}

impl Outcome {
    /// Bob wins; there is nothing for Alice to play.
    pub const BOB: Outcome = Outcome { winner: Player::Bob, winning_move: None, nim_value: None };

    /// Alice wins by playing `winning_move` (if any move is left).
    pub fn alice(winning_move: Option<Move>) -> Self {
        Outcome { winner: Player::Alice, winning_move, nim_value: None }
    }

    /// The same outcome without its move: what `winner_only` answers.
    pub fn without_move(self) -> Self {
        Outcome { winning_move: None, ..self }
    }

    /// True when Alice wins.
    pub fn alice_wins(&self) -> bool {
        self.winner == Player::Alice
    }
}

/// The games this crate solves: what the rest of the crate asks of a game by name.
///
/// Adding a game adds a variant here and its row in [`GameKind::ALL`]'s facts; the
/// metrics, the logs, the client's JSON and its generator read them from here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GameKind {
    /// [`sum_game`].
    SumGame,
    /// [`stone_game_ix`].
    StoneGameIx,
    /// [`stone_game_iv`].
    StoneGameIv,
    /// [`nim_square`].
    NimSquare,
}

impl GameKind {
    /// Every game, in the order of the wire contract's `oneof`.
    pub const ALL: [GameKind; 4] =
        [GameKind::SumGame, GameKind::StoneGameIx, GameKind::StoneGameIv, GameKind::NimSquare];

    /// Every name the crate gives the game, in one row a game.
    const fn facts(self) -> GameFacts {
        match self {
            GameKind::SumGame => GameFacts {
                label: "sum_game",
                name: "sum game",
                json_field: "sumGame",
                mix_key: "sum",
                mix_weight: 4,
                input: "num",
                input_shape: InputShape::Text,
                input_path: "problem.sum_game.num",
                move_fields: &[MoveField::Index, MoveField::Digit],
                nim_value: false,
                sizes: &[SizeFact {
                    flag: "sum-len",
                    help: "Sum Game string length, `N` or `MIN..MAX` (inclusive; odd lengths round down)",
                    default: (2, 16),
                }],
                table: None,
            },
            GameKind::StoneGameIx => GameFacts {
                label: "stone_game_ix",
                name: "stone game ix",
                json_field: "stoneGameIx",
                mix_key: "ix",
                mix_weight: 4,
                input: "stones",
                input_shape: InputShape::Integers,
                input_path: "problem.stone_game_ix.stones",
                move_fields: &[MoveField::Index],
                nim_value: false,
                sizes: &[
                    SizeFact {
                        flag: "ix-len",
                        help: "Stone Game IX number of stones, `N` or `MIN..MAX`",
                        default: (1, 12),
                    },
                    SizeFact {
                        flag: "ix-value",
                        help: "Stone Game IX stone values, `N` or `MIN..MAX`",
                        default: (1, 1000),
                    },
                ],
                table: None,
            },
            GameKind::StoneGameIv => GameFacts {
                label: "stone_game_iv",
                name: "stone game iv",
                json_field: "stoneGameIv",
                mix_key: "iv",
                mix_weight: 2,
                input: "n",
                input_shape: InputShape::Integer,
                input_path: "problem.stone_game_iv.n",
                move_fields: &[MoveField::Take],
                nim_value: false,
                sizes: &[SizeFact {
                    flag: "iv-n",
                    help: "Stone Game IV pile sizes, `N` or `MIN..MAX`",
                    default: (0, 1000),
                }],
                table: Some(TableFacts {
                    name: "iv",
                    title: "Stone Game IV",
                    default_limit: stone_game_iv::DEFAULT_LIMIT,
                    max_limit: stone_game_iv::MAX_LIMIT,
                }),
            },
            GameKind::NimSquare => GameFacts {
                label: "nim_square",
                name: "nim square",
                json_field: "nimSquare",
                mix_key: "nim",
                mix_weight: 0,
                input: "piles",
                input_shape: InputShape::Integers,
                input_path: "problem.nim_square.piles",
                move_fields: &[MoveField::Pile, MoveField::Take],
                nim_value: true,
                sizes: &[
                    SizeFact {
                        flag: "nim-piles",
                        help: "Nim Square number of piles, `N` or `MIN..MAX`",
                        default: (1, 4),
                    },
                    SizeFact {
                        flag: "nim-n",
                        help: "Nim Square pile sizes, `N` or `MIN..MAX`",
                        default: (0, 1000),
                    },
                ],
                table: Some(TableFacts {
                    name: "grundy",
                    title: "Nim Square",
                    default_limit: nim_square::DEFAULT_LIMIT,
                    max_limit: nim_square::MAX_LIMIT,
                }),
            },
        }
    }

    /// The label in metrics and structured logs, as the proto's field name: `sum_game`.
    /// Also the game's name in a Flight descriptor.
    pub const fn label(self) -> &'static str {
        self.facts().label
    }

    /// The name in messages: `sum game`.
    pub const fn name(self) -> &'static str {
        self.facts().name
    }

    /// The problem's JSON field (proto3 JSON mapping): `sumGame`.
    pub const fn json_field(self) -> &'static str {
        self.facts().json_field
    }

    /// The short key of `gamesolver-client gen --mix`: `sum`.
    pub const fn mix_key(self) -> &'static str {
        self.facts().mix_key
    }

    /// The game's weight in `gamesolver-client gen`'s default mix (0: only when asked).
    pub const fn mix_weight(self) -> u32 {
        self.facts().mix_weight
    }

    /// The game's input, as the proto names its one field and a table names its column:
    /// `num`, `stones`, `n`, `piles`.
    pub const fn input(self) -> &'static str {
        self.facts().input
    }

    /// The input's path from a request's `problem`, the field an error about it blames:
    /// `problem.sum_game.num`.
    pub const fn input_path(self) -> &'static str {
        self.facts().input_path
    }

    /// What the input is (a string, an integer, a list of integers): how a door without
    /// the proto's types (Arrow columns, CSV cells) carries it.
    pub const fn input_shape(self) -> InputShape {
        self.facts().input_shape
    }

    /// The fields of the game's move, in the order its move message numbers them.
    pub const fn move_fields(self) -> &'static [MoveField] {
        self.facts().move_fields
    }

    /// True when the game's answers carry a nim value (`nim_value`).
    pub const fn has_nim_value(self) -> bool {
        self.facts().nim_value
    }

    /// The sizes `gamesolver-client gen` draws this game's problems within, each its own
    /// flag; [`GameKind::random`] takes one range a size, in this order.
    pub const fn sizes(self) -> &'static [SizeFact] {
        self.facts().sizes
    }

    /// A random problem of this game, its sizes drawn within `sizes`: one range for each
    /// of [`GameKind::sizes`], in that order (the caller's contract: fewer panics).
    pub fn random(self, rng: &mut impl rand::RngExt, sizes: &[RangeInclusive<u64>]) -> Game {
        let size = |at: usize| sizes[at].clone();
        match self {
            GameKind::SumGame => Game::SumGame(sum_game::random(rng, size(0))),
            GameKind::StoneGameIx => Game::StoneGameIx(random_values(rng, size(0), size(1))),
            GameKind::StoneGameIv => Game::StoneGameIv(rng.random_range(size(0))),
            GameKind::NimSquare => Game::NimSquare(random_values(rng, size(0), size(1))),
        }
    }

    /// The game's place in [`GameKind::ALL`], which is also its place in the proto's
    /// `oneof`s: a `Problem`'s game is field `index + 2`, a `Move`'s is field `index + 1`.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The game of this kind with `input`, or `None` when `input` is not of this game's
    /// shape ([`GameKind::input_shape`]).
    pub fn with_input(self, input: Input) -> Option<Game> {
        match (self, input) {
            (GameKind::SumGame, Input::Text(num)) => Some(Game::SumGame(num)),
            (GameKind::StoneGameIx, Input::Integers(stones)) => Some(Game::StoneGameIx(stones)),
            (GameKind::StoneGameIv, Input::Integer(n)) => Some(Game::StoneGameIv(n)),
            (GameKind::NimSquare, Input::Integers(piles)) => Some(Game::NimSquare(piles)),
            _ => None,
        }
    }

    /// [`GameKind::with_input`] for a borrowed input.
    pub fn with_input_ref(self, input: InputRef<'_>) -> Option<GameRef<'_>> {
        match (self, input) {
            (GameKind::SumGame, InputRef::Text(num)) => Some(GameRef::SumGame(num)),
            (GameKind::StoneGameIx, InputRef::Integers(stones)) => Some(GameRef::StoneGameIx(stones)),
            (GameKind::StoneGameIv, InputRef::Integer(n)) => Some(GameRef::StoneGameIv(n)),
            (GameKind::NimSquare, InputRef::Integers(piles)) => Some(GameRef::NimSquare(piles)),
            _ => None,
        }
    }

    /// The facts of the game's table, for the games answered from a table of bounded
    /// size ([`Tables`]); the server's table flags, metrics and files are made of them.
    pub const fn table(self) -> Option<TableFacts> {
        self.facts().table
    }

    /// The server flag that sets the largest pile this game answers (`--iv-max-n`), for
    /// the games answered from a table of bounded size.
    pub fn limit_flag(self) -> Option<String> {
        self.table().map(|table| format!("--{}-max-n", table.name))
    }

    /// The most [`GameKind::limit_flag`] may be set to: its table's largest size.
    pub const fn max_limit(self) -> Option<u64> {
        match self.facts().table {
            Some(table) => Some(table.max_limit),
            None => None,
        }
    }

    /// The game whose label (or input column) is `name`.
    pub fn from_label(name: &str) -> Option<GameKind> {
        GameKind::ALL.into_iter().find(|kind| kind.label() == name)
    }
}

/// A list of random length drawn from `len`, of values drawn from `value`.
fn random_values(
    rng: &mut impl rand::RngExt,
    len: RangeInclusive<u64>,
    value: RangeInclusive<u64>,
) -> Vec<u64> {
    let len = rng.random_range(len);
    (0..len).map(|_| rng.random_range(value.clone())).collect()
}

/// A game's names; see [`GameKind`]'s accessors.
struct GameFacts {
    label: &'static str,
    name: &'static str,
    json_field: &'static str,
    mix_key: &'static str,
    mix_weight: u32,
    input: &'static str,
    input_path: &'static str,
    input_shape: InputShape,
    move_fields: &'static [MoveField],
    nim_value: bool,
    sizes: &'static [SizeFact],
    table: Option<TableFacts>,
}

/// A size that `gamesolver-client gen` draws a game's problems within, and its flag; see
/// [`GameKind::sizes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeFact {
    /// The flag, without its dashes: `sum-len`.
    pub flag: &'static str,
    /// What it sizes, as its help line.
    pub help: &'static str,
    /// The range drawn from unless the flag says otherwise, inclusive.
    pub default: (u64, u64),
}

/// The shape of a game's input; see [`GameKind::input_shape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputShape {
    /// A string (Sum Game's `num`).
    Text,
    /// One unsigned integer (Stone Game IV's `n`).
    Integer,
    /// A list of unsigned integers (Stone Game IX's `stones`, Nim Square's `piles`).
    Integers,
}

/// A game's input by its shape, not yet a [`Game`]: [`GameKind::with_input`] makes it one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// An [`InputShape::Text`] input.
    Text(String),
    /// An [`InputShape::Integer`] input.
    Integer(u64),
    /// An [`InputShape::Integers`] input.
    Integers(Vec<u64>),
}

/// A game's input by its shape, borrowed: what a writer of its bytes or cells reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputRef<'a> {
    /// An [`InputShape::Text`] input.
    Text(&'a str),
    /// An [`InputShape::Integer`] input.
    Integer(u64),
    /// An [`InputShape::Integers`] input.
    Integers(&'a [u64]),
}

impl InputRef<'_> {
    /// The input, owned.
    pub fn to_owned(self) -> Input {
        match self {
            InputRef::Text(text) => Input::Text(text.to_owned()),
            InputRef::Integer(n) => Input::Integer(n),
            InputRef::Integers(values) => Input::Integers(values.to_vec()),
        }
    }
}

impl Input {
    /// This input's shape.
    pub fn shape(&self) -> InputShape {
        match self {
            Input::Text(_) => InputShape::Text,
            Input::Integer(_) => InputShape::Integer,
            Input::Integers(_) => InputShape::Integers,
        }
    }
}

/// What the crate needs to know of a game's table; see [`GameKind::table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFacts {
    /// The table's name in its flags and files: `iv` makes `--iv-max-n`,
    /// `--iv-precompute` and `--iv-table` (its metrics carry the game's label instead).
    pub name: &'static str,
    /// The game's name in a heading or a help line: `Stone Game IV`.
    pub title: &'static str,
    /// The largest pile answered unless a flag says otherwise.
    pub default_limit: u64,
    /// The most the limit may be set to: the table's largest size.
    pub max_limit: u64,
}

/// One problem of any of the four games, owning its input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Game {
    /// A Sum Game string of digits and '?'.
    SumGame(String),
    /// Stone Game IX stone values.
    StoneGameIx(Vec<u64>),
    /// Stone Game IV pile size.
    StoneGameIv(u64),
    /// Nim Square pile sizes.
    NimSquare(Vec<u64>),
}

/// One problem of any of the four games, borrowing its input: what a door that keeps
/// its inputs in buffers of its own (Arrow columns) solves without copying a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GameRef<'a> {
    /// A Sum Game string of digits and '?'.
    SumGame(&'a str),
    /// Stone Game IX stone values.
    StoneGameIx(&'a [u64]),
    /// Stone Game IV pile size.
    StoneGameIv(u64),
    /// Nim Square pile sizes.
    NimSquare(&'a [u64]),
}

/// The tables the table-driven games answer from, shared by every call.
#[derive(Debug)]
pub struct Tables {
    /// Stone Game IV's P-positions.
    pub iv: std::sync::Arc<StoneGameIvTable>,
    /// Nim Square's Grundy values.
    pub grundy: std::sync::Arc<GrundyTable>,
}

/// Sees each table of [`Tables`] with its type, so that the server can bind each to its
/// file without naming one ([`Tables::visit`]).
pub trait TableVisitor {
    /// Called once a table game.
    fn visit<T: TableGame>(&mut self, table: &std::sync::Arc<T>);
}

impl Default for Tables {
    /// Tables answering piles up to each game's default limit.
    fn default() -> Self {
        Tables::with_limits(|game| game.table().map_or(0, |table| table.default_limit))
    }
}

impl Tables {
    /// Tables answering Stone Game IV piles up to `iv_limit` and Nim Square piles up to
    /// `grundy_limit` (the tests' and benches' shorthand for [`Tables::with_limits`]).
    pub fn new(iv_limit: u64, grundy_limit: u64) -> Self {
        Tables::with_limits(|game| match game {
            GameKind::StoneGameIv => iv_limit,
            _ => grundy_limit,
        })
    }

    /// Tables answering each table game's piles up to `limit` of it.
    pub fn with_limits(limit: impl Fn(GameKind) -> u64) -> Self {
        Tables {
            iv: StoneGameIvTable::with_limit(limit(GameKind::StoneGameIv)).into(),
            grundy: GrundyTable::with_limit(limit(GameKind::NimSquare)).into(),
        }
    }

    /// Shows `visitor` every table, in the order of [`GameKind::ALL`].
    pub fn visit(&self, visitor: &mut impl TableVisitor) {
        visitor.visit(&self.iv);
        visitor.visit(&self.grundy);
    }

    /// Every table, in the order of [`GameKind::ALL`].
    pub fn each(&self) -> Vec<std::sync::Arc<dyn Table>> {
        struct Each(Vec<std::sync::Arc<dyn Table>>);
        impl TableVisitor for Each {
            fn visit<T: TableGame>(&mut self, table: &std::sync::Arc<T>) {
                self.0.push(std::sync::Arc::clone(table) as std::sync::Arc<dyn Table>);
            }
        }
        let mut each = Each(Vec::new());
        self.visit(&mut each);
        each.0
    }

    /// The largest pile of `game` that its table must cover first, if it does not yet.
    pub fn needs_extension(&self, game: GameRef<'_>) -> Option<(GameKind, u64)> {
        match game {
            GameRef::StoneGameIv(n) => self.iv.needs_extension(n).then_some((GameKind::StoneGameIv, n)),
            GameRef::NimSquare(piles) => {
                let n = piles.iter().copied().filter(|&n| n <= self.grundy.limit()).max()?;
                self.grundy.needs_extension(n).then_some((GameKind::NimSquare, n))
            }
            GameRef::SumGame(_) | GameRef::StoneGameIx(_) => None,
        }
    }

    /// Warms the parts of the tables that `games` will read, before they are solved on
    /// several threads (each table's [`TableGame::preload`]).
    pub fn preload<'a>(&self, games: impl Iterator<Item = GameRef<'a>> + Clone) {
        struct Preload<I>(I);
        impl<'a, I: Iterator<Item = GameRef<'a>> + Clone> TableVisitor for Preload<I> {
            fn visit<T: TableGame>(&mut self, table: &std::sync::Arc<T>) {
                table.preload(self.0.clone());
            }
        }
        self.visit(&mut Preload(games));
    }

    /// Grows `game`'s table to cover `n` (blocking; the caller runs it off the async
    /// workers). Piles beyond the limit are left to `solve` to refuse.
    pub fn extend(&self, game: GameKind, n: u64) {
        if let Some(table) = self.each().into_iter().find(|table| table.game() == game) {
            let _ = table.extend_to(n);
        }
    }
}

impl Game {
    /// The game with its input borrowed.
    #[inline]
    pub fn borrowed(&self) -> GameRef<'_> {
        match self {
            Game::SumGame(num) => GameRef::SumGame(num),
            Game::StoneGameIx(stones) => GameRef::StoneGameIx(stones),
            Game::StoneGameIv(n) => GameRef::StoneGameIv(*n),
            Game::NimSquare(piles) => GameRef::NimSquare(piles),
        }
    }

    /// Rough cost of solving; see [`GameRef::work`].
    pub fn work(&self) -> usize {
        self.borrowed().work()
    }

    /// Which game this is and its input.
    pub fn parts(&self) -> (GameKind, InputRef<'_>) {
        self.borrowed().parts()
    }

    /// Which game this is.
    pub fn kind(&self) -> GameKind {
        self.parts().0
    }

    /// The game's input.
    pub fn input(&self) -> InputRef<'_> {
        self.parts().1
    }

    /// Solves the game; see [`GameRef::solve`].
    pub fn solve(&self, tables: &Tables) -> Result<Outcome, SolveError> {
        self.borrowed().solve(tables)
    }

    /// The outcome without a move; see [`GameRef::winner`].
    pub fn winner(&self, tables: &Tables) -> Result<Outcome, SolveError> {
        self.borrowed().winner(tables)
    }
}

impl<'a> GameRef<'a> {
    /// The game with its input copied.
    pub fn to_owned(self) -> Game {
        match self {
            GameRef::SumGame(num) => Game::SumGame(num.to_owned()),
            GameRef::StoneGameIx(stones) => Game::StoneGameIx(stones.to_vec()),
            GameRef::StoneGameIv(n) => Game::StoneGameIv(n),
            GameRef::NimSquare(piles) => Game::NimSquare(piles.to_vec()),
        }
    }

    /// Rough cost of solving, in input units (bytes or stones); decides inline vs. pool.
    ///
    /// A one-integer input (Stone Game IV's) is cheap once its table covers `n` and is
    /// then counted as one unit; whether the table must grow first is asked of the table,
    /// not estimated here.
    pub fn work(self) -> usize {
        match self.input() {
            InputRef::Text(text) => text.len(),
            InputRef::Integer(_) => 1,
            InputRef::Integers(values) => values.len(),
        }
    }

    /// Which game this is and its input.
    pub fn parts(self) -> (GameKind, InputRef<'a>) {
        match self {
            GameRef::SumGame(num) => (GameKind::SumGame, InputRef::Text(num)),
            GameRef::StoneGameIx(stones) => (GameKind::StoneGameIx, InputRef::Integers(stones)),
            GameRef::StoneGameIv(n) => (GameKind::StoneGameIv, InputRef::Integer(n)),
            GameRef::NimSquare(piles) => (GameKind::NimSquare, InputRef::Integers(piles)),
        }
    }

    /// Which game this is.
    pub fn kind(self) -> GameKind {
        self.parts().0
    }

    /// The game's input.
    pub fn input(self) -> InputRef<'a> {
        self.parts().1
    }

    /// Solves the game; the table-driven games answer from (and may grow) `tables`.
    pub fn solve(self, tables: &Tables) -> Result<Outcome, SolveError> {
        match self {
            GameRef::SumGame(num) => sum_game::solve(num),
            GameRef::StoneGameIx(stones) => Ok(stone_game_ix::solve(stones)),
            GameRef::StoneGameIv(n) => tables.iv.solve(n),
            GameRef::NimSquare(piles) => tables.grundy.solve(piles, false).map(Outcome::from),
        }
    }

    /// The outcome without a move: Stone Game IV answers with one binary search in its
    /// table and Nim Square skips the move search, where [`GameRef::solve`] also looks for
    /// Alice's move; the other two games are solved and their move dropped (it costs at
    /// most one more pass over the input).
    pub fn winner(self, tables: &Tables) -> Result<Outcome, SolveError> {
        match self {
            GameRef::StoneGameIv(n) => {
                tables.iv.winner(n).map(|winner| Outcome { winner, winning_move: None, nim_value: None })
            }
            GameRef::NimSquare(piles) => tables.grundy.solve(piles, true).map(Outcome::from),
            game => game.solve(tables).map(Outcome::without_move),
        }
    }
}

/// Why a problem has no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SolveError {
    /// A Sum Game string holds something other than a digit or '?'.
    #[error("sum game: invalid character {found:?} at index {index}; expected a digit or '?'")]
    InvalidCharacter {
        /// Byte index of the first bad character.
        index: u64,
        /// The character found there.
        found: char,
    },
    /// A Sum Game string of odd length has no two halves.
    #[error("sum game: length {len} is odd; the string must split into two equal halves")]
    OddLength {
        /// The string's length in bytes.
        len: u64,
    },
    /// A pile beyond the configured limit of its game's table; the message names the
    /// server flag that raises it.
    #[error("{}: n = {n} is beyond the limit {limit} of this server{}", game.name(), how_to_raise(*game, *limit))]
    OutOfRange {
        /// The game whose table it is beyond.
        game: GameKind,
        /// The requested pile size.
        n: u64,
        /// The largest n this server answers.
        limit: u64,
    },
}

impl SolveError {
    /// The game whose input is at fault: the field an error blames is this game's
    /// [`GameKind::input_path`].
    pub fn game(&self) -> GameKind {
        match self {
            SolveError::InvalidCharacter { .. } | SolveError::OddLength { .. } => GameKind::SumGame,
            SolveError::OutOfRange { game, .. } => *game,
        }
    }
}

/// How the operator raises `game`'s `limit`, as the end of [`SolveError::OutOfRange`]'s
/// message: the flag and the most it allows, or that it is there already.
fn how_to_raise(game: GameKind, limit: u64) -> String {
    match (game.limit_flag(), game.max_limit()) {
        (Some(flag), Some(max)) if limit < max => format!(" (raise it with {flag}, at most {max})"),
        (Some(flag), Some(_)) => format!(" (already the most {flag} allows)"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_game_has_every_name_and_no_two_share_one() {
        let distinct =
            |names: Vec<&str>| names.iter().collect::<std::collections::HashSet<_>>().len() == names.len();
        for facts in
            [GameKind::label, GameKind::name, GameKind::json_field, GameKind::mix_key, GameKind::input_path]
        {
            let names: Vec<_> = GameKind::ALL.map(facts).into();
            assert!(names.iter().all(|name| !name.is_empty()) && distinct(names.clone()), "{names:?}");
        }
        for kind in GameKind::ALL {
            assert_eq!(kind.input_path(), format!("problem.{}.{}", kind.label(), kind.input()));
            assert_eq!(GameKind::from_label(kind.label()), Some(kind));
        }
        assert_eq!(GameKind::from_label("chess"), None);
    }

    /// Every game takes an input of its own shape, and only of that shape.
    #[test]
    fn every_game_is_made_from_an_input_of_its_shape() {
        let inputs = [Input::Text("25??".into()), Input::Integer(7), Input::Integers(vec![1, 2])];
        for kind in GameKind::ALL {
            for input in inputs.clone() {
                let shape = input.shape();
                let game = kind.with_input(input);
                assert_eq!(game.is_some(), shape == kind.input_shape(), "{kind:?} from {shape:?}");
                assert!(game.is_none_or(|game| game.kind() == kind), "{kind:?}");
            }
        }
    }

    /// Every game's place in [`GameKind::ALL`] is its index; every game's input is of its
    /// shape and makes the same game again.
    #[test]
    fn every_game_has_its_place_and_its_input() {
        let games = [
            Game::SumGame("1?".into()),
            Game::StoneGameIx(vec![1, 2]),
            Game::StoneGameIv(5),
            Game::NimSquare(vec![3, 4]),
        ];
        assert_eq!(games.each_ref().map(Game::kind), GameKind::ALL);
        for (at, game) in games.iter().enumerate() {
            let kind = game.kind();
            assert_eq!(kind.index(), at);
            let input = game.input().to_owned();
            assert_eq!(input.shape(), kind.input_shape());
            assert_eq!(kind.with_input(input).as_ref(), Some(game));
        }
    }

    /// Every game's move has fields and values for them; no two games' moves fill the same
    /// fields, so a table of solutions' `move_` columns say whose move a row holds.
    #[test]
    fn every_game_has_its_move_fields_and_no_two_share_them() {
        let moves = [
            Move::SumGame { index: 3, digit: 9 },
            Move::StoneGameIx { index: 2 },
            Move::StoneGameIv { take: 4 },
            Move::NimSquare(nim_square::NimSquareMove { pile: 1, take: 9 }),
        ];
        assert_eq!(moves.map(|m| m.values().0), GameKind::ALL);
        let mut field_sets = std::collections::HashSet::new();
        for (kind, values) in moves.map(|m| m.values()) {
            let fields = kind.move_fields();
            assert!(!fields.is_empty() && fields.len() <= MOST_MOVE_FIELDS, "{kind:?}");
            assert!(values[..fields.len()].iter().all(|&v| v != 0), "{kind:?}: {values:?}");
            assert!(values[fields.len()..].iter().all(|&v| v == 0), "{kind:?}: {values:?}");
            let mut sorted = fields.to_vec();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), fields.len(), "{kind:?} names a field twice");
            assert!(fields.iter().all(|field| field.column() == format!("move_{}", field.name())));
            assert!(field_sets.insert(sorted), "{kind:?}'s move fills the same fields as another game's");
        }
        let with_values: Vec<_> = GameKind::ALL.into_iter().filter(|kind| kind.has_nim_value()).collect();
        assert_eq!(with_values, [GameKind::NimSquare]);
    }

    /// Every game with table facts has a table in [`Tables`] and no other does, each
    /// answering its own game up to its default limit.
    #[test]
    fn every_table_game_has_its_table_and_its_facts() {
        let tables = Tables::default();
        let with_tables: Vec<_> = tables.each().iter().map(|table| table.game()).collect();
        let with_facts: Vec<_> = GameKind::ALL.into_iter().filter(|kind| kind.table().is_some()).collect();
        assert_eq!(with_tables, with_facts);
        let names: std::collections::HashSet<_> =
            with_facts.iter().map(|kind| kind.table().unwrap().name).collect();
        assert_eq!(names.len(), with_facts.len(), "two tables share a name");
        for table in tables.each() {
            let facts = table.game().table().unwrap();
            assert_eq!(table.limit(), facts.default_limit);
            assert!(facts.default_limit <= facts.max_limit && !facts.title.is_empty());
            assert_eq!(table.game().limit_flag(), Some(format!("--{}-max-n", facts.name)));
            let beyond = SolveError::OutOfRange {
                game: table.game(),
                n: facts.default_limit + 1,
                limit: facts.default_limit,
            };
            assert_eq!(table.extend_to(facts.default_limit + 1), Err(beyond));
        }
    }

    #[test]
    fn a_pile_beyond_the_limit_names_the_flag_that_raises_it() {
        let out_of_range = |game, n, limit| SolveError::OutOfRange { game, n, limit }.to_string();
        assert_eq!(
            out_of_range(GameKind::StoneGameIv, 1_000_000_000_000, 1_000_000_000),
            "stone game iv: n = 1000000000000 is beyond the limit 1000000000 of this server \
             (raise it with --iv-max-n, at most 100000000000)"
        );
        assert_eq!(
            out_of_range(GameKind::StoneGameIv, 1_000_000_000_000, 100_000_000_000),
            "stone game iv: n = 1000000000000 is beyond the limit 100000000000 of this server \
             (already the most --iv-max-n allows)"
        );
        assert_eq!(
            out_of_range(GameKind::NimSquare, 1001, 1000),
            "nim square: n = 1001 is beyond the limit 1000 of this server \
             (raise it with --grundy-max-n, at most 4294967295)"
        );
        let table_games: Vec<_> =
            GameKind::ALL.into_iter().filter(|game| game.limit_flag().is_some()).collect();
        assert_eq!(table_games, [GameKind::StoneGameIv, GameKind::NimSquare]);
    }

    proptest! {
        /// Any string at all gets an answer or an error that points at the offending
        /// character; nothing panics.
        #[test]
        fn any_sum_game_string_is_answered_or_located(num in "\\PC{0,40}|[0-9?]{0,40}|[0-9?x]{0,40}") {
            let table = Tables::new(100, 100);
            match Game::SumGame(num.clone()).solve(&table) {
                Ok(_) => prop_assert!(num.len() % 2 == 0 && num.bytes().all(|b| b.is_ascii_digit() || b == b'?')),
                Err(SolveError::InvalidCharacter { index, found }) => {
                    let index = index as usize;
                    prop_assert!(num.is_char_boundary(index));
                    prop_assert_eq!(num[index..].chars().next(), Some(found));
                    prop_assert!(num[..index].bytes().all(|b| b.is_ascii_digit() || b == b'?'));
                }
                Err(SolveError::OddLength { len }) => prop_assert_eq!(len as usize, num.len()),
                Err(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }

        #[test]
        fn stone_game_iv_beyond_the_limit_is_out_of_range(n in 101u64..) {
            let table = Tables::new(100, 100);
            prop_assert_eq!(Game::StoneGameIv(n).solve(&table), Err(SolveError::OutOfRange { game: GameKind::StoneGameIv, n, limit: 100 }));
            prop_assert_eq!(Game::StoneGameIv(n).winner(&table), Err(SolveError::OutOfRange { game: GameKind::StoneGameIv, n, limit: 100 }));
        }

        /// The winner alone agrees with the exhaustive search, for every game.
        #[test]
        fn winner_matches_exhaustive_search(
            sum in "([0-9?]{2}){0,4}",
            ix in proptest::collection::vec(0u64..10, 0..7),
            iv in 0u64..2000,
        ) {
            let table = Tables::new(2000, 100);
            let alice = |game: Game| game.winner(&table).unwrap().winner == Player::Alice;
            prop_assert_eq!(alice(Game::SumGame(sum.clone())), exhaustive::sum_game_alice_wins(sum.as_bytes(), true));
            prop_assert_eq!(alice(Game::StoneGameIx(ix.clone())), exhaustive::stone_game_ix_alice_wins(&ix, 0, true));
            prop_assert_eq!(alice(Game::StoneGameIv(iv)), exhaustive::stone_game_iv_mover_wins(iv));
        }
    }
}

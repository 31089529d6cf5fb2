//! The pure solver core: synchronous, deterministic, no I/O, no tokio.
//!
//! Each game lives in its own folder with a closed-form (or table-driven) solver, the
//! winning move, and its declaration (`game.rs`: [`Declared`]), which says everything
//! the rest of the crate asks of it. `with_games!` lists the games once; [`GameKind`],
//! [`Game`], [`GameRef`], [`Move`] and every arm over them are generated from that list
//! (`registry.rs`). `exhaustive` holds the brute-force minimax that the tests hold every
//! solver to.

pub mod declare;
#[cfg(test)]
pub(crate) mod exhaustive;
mod grower;
mod registry;
pub mod table;
#[cfg(test)]
mod tests;

pub use declare::{
    ColumnKernel, Declared, GameFacts, Input, InputRef, InputShape, MakeGameRef, MoveField, MoveValues,
    SizeFact, TableFacts, MOST_MOVE_FIELDS,
};
pub use nim_square::GrundyTable;
pub use stone_game_iv::StoneGameIvTable;
use table::{Table, TableGame};

/// Calls the macro `then` with every game, as `module::Declaration`, in the order of the
/// wire contract's `oneof`s: the one list of games. A game is added here, in one line,
/// and in its own folder and the proto; everything else is generated from this list or
/// reads [`GameKind::ALL`].
macro_rules! with_games {
    ($($then:ident)::+) => {
        $($then)::+! {
            sum_game::SumGame,
            stone_game_ix::StoneGameIx,
            stone_game_iv::StoneGameIv,
            nim_square::NimSquare,
        }
    };
}
pub(crate) use with_games;

with_games!(registry::declare_games);

/// A player; Alice always moves first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Player {
    /// The first player.
    Alice,
    /// The second player.
    Bob,
}

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

impl GameKind {
    /// The label in metrics and structured logs, as the proto's field name: `sum_game`.
    /// Also the game's name in a Flight descriptor.
    pub const fn label(self) -> &'static str {
        self.facts().label
    }

    /// The name in messages: `sum game`.
    pub const fn name(self) -> &'static str {
        self.facts().name
    }

    /// The name in a heading or a help line: `Sum Game`.
    pub const fn title(self) -> &'static str {
        self.facts().title
    }

    /// Every game's title, as a sentence lists them: `Sum Game, Stone Game IX and Nim
    /// Square` (help text and docs list the games from here).
    pub fn titles() -> String {
        let titles = GameKind::ALL.map(GameKind::title);
        match titles.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
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

    /// [`GameKind::with_input`] for a borrowed input.
    pub fn with_input_ref(self, input: InputRef<'_>) -> Option<GameRef<'_>> {
        self.make_ref().make(input)
    }

    /// The game's place in [`GameKind::ALL`], which is also its place in the proto's
    /// `oneof`s: a `Problem`'s game is field `index + 2`, a `Move`'s is field `index + 1`.
    pub const fn index(self) -> usize {
        self as usize
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

impl MoveField {
    /// Every field, in the order of a table's `move_` columns: the four the first games
    /// declared, in the order tables have always held them, then each later game's new
    /// fields in the order of [`GameKind::ALL`].
    pub const ALL: [MoveField; move_fields::COUNT] = move_fields::in_table_order();
}

mod move_fields {
    //! [`MoveField::ALL`], worked out at compile time from every game's fields.
    use super::{GameKind, MoveField};

    /// The fields whose columns come first, in the order tables have held them.
    const FIRST: [MoveField; 4] = [MoveField::INDEX, MoveField::DIGIT, MoveField::PILE, MoveField::TAKE];

    /// True when the two strings are the same.
    pub(super) const fn same(a: &str, b: &str) -> bool {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        let mut at = 0;
        while at < a.len() {
            if a[at] != b[at] {
                return false;
            }
            at += 1;
        }
        true
    }

    /// True when `fields[..len]` has a field named as `field`.
    const fn has(fields: &[MoveField], len: usize, field: MoveField) -> bool {
        let mut at = 0;
        while at < len {
            if same(fields[at].name(), field.name()) {
                return true;
            }
            at += 1;
        }
        false
    }

    /// [`FIRST`], then every game's fields not yet in it; `into` has room for them all.
    const fn collect(into: &mut [MoveField]) -> usize {
        let mut len = 0;
        while len < FIRST.len() {
            into[len] = FIRST[len];
            len += 1;
        }
        let mut game = 0;
        while game < GameKind::ALL.len() {
            let fields = GameKind::ALL[game].facts().move_fields;
            let mut at = 0;
            while at < fields.len() {
                if !has(into, len, fields[at]) {
                    into[len] = fields[at];
                    len += 1;
                }
                at += 1;
            }
            game += 1;
        }
        len
    }

    /// The most fields there could be: the first ones and every game's.
    const ROOM: usize = FIRST.len() + GameKind::ALL.len() * crate::games::MOST_MOVE_FIELDS;

    /// How many distinct fields there are.
    pub(super) const COUNT: usize = collect(&mut [MoveField::INDEX; ROOM]);

    /// Every distinct field, in table order.
    pub(super) const fn in_table_order() -> [MoveField; COUNT] {
        let mut room = [MoveField::INDEX; ROOM];
        collect(&mut room);
        let mut all = [MoveField::INDEX; COUNT];
        let mut at = 0;
        while at < COUNT {
            all[at] = room[at];
            at += 1;
        }
        all
    }
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
        Tables {
            iv: StoneGameIvTable::with_limit(iv_limit).into(),
            grundy: GrundyTable::with_limit(grundy_limit).into(),
        }
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
        game.needs_extension(self)
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

    /// Which game this is.
    pub fn kind(self) -> GameKind {
        self.parts().0
    }

    /// The game's input.
    pub fn input(self) -> InputRef<'a> {
        self.parts().1
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

//! What a game declares, once, in its own folder: [`Declared`], its facts and the shape of
//! its input and move. [`super::GameKind`], [`super::Game`], [`super::GameRef`],
//! [`super::Move`] and their arms are generated from the one list of games in
//! `games/mod.rs`; a game that leaves out a fact does not compile.

use std::ops::RangeInclusive;

use super::{GameRef, Outcome, SolveError, Tables};

/// A game, as its folder declares it: its facts, the shape of its input, its move, its
/// solver, its generator and its protobuf messages.
///
/// The wire conversions are here rather than in `convert.rs` so that a game is one
/// declaration: they are the only place under `games/` that names a `pb` type (which
/// imports nothing of the crate, so the layers still point one way).
pub trait Declared {
    /// Every name and number the crate gives the game.
    const FACTS: GameFacts;
    /// What its input is: [`Text`], [`Integer`] or [`Integers`].
    type Shape: Shape;
    /// Alice's winning first move.
    type Move: Copy + std::fmt::Debug + PartialEq + Eq;
    /// The game's problem message (`pb::SumGame`).
    type Wire;
    /// The game's move message (`pb::SumGameMove`).
    type WireMove;

    /// The move's values in the order of [`GameFacts::move_fields`]; those past its
    /// fields are 0.
    fn move_values(winning_move: Self::Move) -> MoveValues;
    /// Solves the game; a table game answers from (and may grow) its table in `tables`.
    fn solve(input: InputOf<'_, Self>, tables: &Tables) -> Result<Outcome, SolveError>;
    /// The outcome without a move; solving and dropping the move unless the game has a
    /// cheaper way.
    fn winner(input: InputOf<'_, Self>, tables: &Tables) -> Result<Outcome, SolveError> {
        Self::solve(input, tables).map(Outcome::without_move)
    }
    /// The kernel a table of its problems is answered with a column at a time
    /// (`columnar::kernels`): the one every game has unless the game has a faster one.
    const KERNEL: ColumnKernel = ColumnKernel::Rows;
    /// The largest pile its table must cover first, if it does not yet (table games).
    fn needs_extension(_input: InputOf<'_, Self>, _tables: &Tables) -> Option<u64> {
        None
    }
    /// A random problem for `gamesolver-client gen`: one range for each of
    /// [`GameFacts::sizes`], in that order.
    fn random(rng: &mut impl rand::RngExt, sizes: &[RangeInclusive<u64>]) -> OwnedOf<Self>;

    /// The wire problem's input, borrowed.
    fn wire_input(wire: &Self::Wire) -> InputOf<'_, Self>;
    /// The wire problem's input, taken.
    fn from_wire(wire: Self::Wire) -> OwnedOf<Self>;
    /// The wire problem of an input.
    fn to_wire(input: OwnedOf<Self>) -> Self::Wire;
    /// The wire move of `values`; a `uint32` field keeps their low 32 bits, as prost
    /// reads one from the wire.
    fn wire_move(values: MoveValues) -> Self::WireMove;
    /// The wire move's values, as [`Declared::move_values`].
    fn wire_move_values(wire: &Self::WireMove) -> MoveValues;
}

/// How a column of a game's problems is answered (`columnar::kernels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKernel {
    /// Every game's: its input column read once by its shape and its solver called on each
    /// row's input where it lies.
    Rows,
    /// Stone Game IV's: each pile's winner and move gathered from the table of small
    /// piles' moves, 64 rows a word.
    StoneGameIvMoves,
    /// Nim Square's: each list's Grundy values gathered and XORed under one read of the
    /// table.
    NimSquareGrundy,
}

/// A declared game's input shape.
pub type ShapeOf<D> = <D as Declared>::Shape;

/// A declared game's input, owned.
pub type OwnedOf<D> = <<D as Declared>::Shape as Shape>::Owned;

/// A declared game's input, borrowed.
pub type InputOf<'a, D> = <<D as Declared>::Shape as Shape>::Ref<'a>;

/// A game's names and numbers; see [`super::GameKind`]'s accessors.
#[derive(Debug, Clone, Copy)]
pub struct GameFacts {
    /// The label in metrics, logs and Flight descriptors, as the proto's field name.
    pub label: &'static str,
    /// The name in messages: `sum game`.
    pub name: &'static str,
    /// The name in a heading or a help line: `Sum Game`.
    pub title: &'static str,
    /// The problem's JSON field (proto3 JSON mapping): `sumGame`.
    pub json_field: &'static str,
    /// The short key of `gamesolver-client gen --mix`.
    pub mix_key: &'static str,
    /// The weight in `gen`'s default mix (0: only when asked).
    pub mix_weight: u32,
    /// The input: the proto's field name, and a table's column.
    pub input: &'static str,
    /// The input's path from a request's `problem`: `problem.<label>.<input>`.
    pub input_path: &'static str,
    /// The fields of the move, in the order its move message numbers them.
    pub move_fields: &'static [MoveField],
    /// True when the answers carry a nim value.
    pub nim_value: bool,
    /// The sizes `gen` draws problems within, each its own flag.
    pub sizes: &'static [SizeFact],
    /// For a game answered from a table of bounded size: its table's facts.
    pub table: Option<TableFacts>,
}

/// A size that `gamesolver-client gen` draws a game's problems within, and its flag; see
/// [`super::GameKind::sizes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeFact {
    /// The flag, without its dashes: `sum-len`.
    pub flag: &'static str,
    /// What it sizes, as its help line.
    pub help: &'static str,
    /// The range drawn from unless the flag says otherwise, inclusive.
    pub default: (u64, u64),
}

/// What the crate needs to know of a game's table; see [`super::GameKind::table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFacts {
    /// The table's name in its flags and files: `iv` makes `--iv-max-n`,
    /// `--iv-precompute` and `--iv-table` (its metrics carry the game's label instead).
    pub name: &'static str,
    /// The largest pile answered unless a flag says otherwise.
    pub default_limit: u64,
    /// The most the limit may be set to: the table's largest size.
    pub max_limit: u64,
}

/// A field of a move, as the proto names it. A game's move is made of some of these
/// ([`GameFacts::move_fields`]), numbered 1, 2, ... in that order in its move message; a
/// table of solutions has one `move_` column a field. Games share a field by naming the
/// same constant; a new one is declared in its game's folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MoveField {
    name: &'static str,
    column: &'static str,
    is_u32: bool,
}

impl MoveField {
    /// A position in the input: the `?` to fill, the stone to remove.
    pub const INDEX: MoveField = MoveField::new("index", "move_index", false);
    /// The digit to write (a `uint32` field).
    pub const DIGIT: MoveField = MoveField::new("digit", "move_digit", true);
    /// The pile to take from.
    pub const PILE: MoveField = MoveField::new("pile", "move_pile", false);
    /// How many stones to take.
    pub const TAKE: MoveField = MoveField::new("take", "move_take", false);

    /// A field named `name` in the proto, `column` in a table (`move_` and its name: a
    /// test holds every field to it), `uint32` when `is_u32`, else `uint64`.
    pub const fn new(name: &'static str, column: &'static str, is_u32: bool) -> Self {
        MoveField { name, column, is_u32 }
    }

    /// The field's name in the proto: `index`.
    pub const fn name(self) -> &'static str {
        self.name
    }

    /// The field's column in a table of solutions: `move_index`.
    pub const fn column(self) -> &'static str {
        self.column
    }

    /// True for a field the proto declares `uint32`; the others are `uint64`.
    pub const fn is_u32(self) -> bool {
        self.is_u32
    }
}

/// The most fields a game's move has.
pub const MOST_MOVE_FIELDS: usize = 2;

/// A move's values in the order of its game's [`GameFacts::move_fields`]; those past its
/// fields are 0.
pub type MoveValues = [u64; MOST_MOVE_FIELDS];

/// The shape of a game's input; see [`super::GameKind::input_shape`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputShape {
    /// A string (Sum Game's `num`).
    Text,
    /// One unsigned integer (Stone Game IV's `n`).
    Integer,
    /// A list of unsigned integers (Stone Game IX's `stones`, Nim Square's `piles`).
    Integers,
}

/// A game's input by its shape, not yet a [`super::Game`]:
/// [`super::GameKind::with_input`] makes it one.
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

/// How to make a game of one kind from a borrowed input of its shape: the game's variant,
/// behind its shape ([`super::GameKind::make_ref`]). A reader that finds a column by the
/// shape makes the game with it, with no shape left to mismatch.
#[derive(Debug, Clone, Copy)]
pub enum MakeGameRef {
    /// A game of text.
    Text(for<'a> fn(&'a str) -> GameRef<'a>),
    /// A game of one integer.
    Integer(fn(u64) -> GameRef<'static>),
    /// A game of a list of integers.
    Integers(for<'a> fn(&'a [u64]) -> GameRef<'a>),
}

impl MakeGameRef {
    /// The game of `input`, or `None` when `input` is of another shape.
    pub fn make(self, input: InputRef<'_>) -> Option<GameRef<'_>> {
        match (self, input) {
            (MakeGameRef::Text(make), InputRef::Text(text)) => Some(make(text)),
            (MakeGameRef::Integer(make), InputRef::Integer(n)) => Some(make(n).shorten()),
            (MakeGameRef::Integers(make), InputRef::Integers(values)) => Some(make(values)),
            (MakeGameRef::Text(_), InputRef::Integer(_) | InputRef::Integers(_))
            | (MakeGameRef::Integer(_), InputRef::Text(_) | InputRef::Integers(_))
            | (MakeGameRef::Integers(_), InputRef::Text(_) | InputRef::Integer(_)) => None,
        }
    }
}

/// A declared game's variant of [`GameRef`]: implemented for every game of the list by
/// the registry, not by hand.
pub trait Variant: Declared {
    /// The game of `input`.
    fn game_ref(input: InputOf<'_, Self>) -> GameRef<'_>;
}

/// An input shape as a type: what [`Declared::Shape`] names, so that the generated
/// `Game` and `GameRef` hold each game's input as its own type.
pub trait Shape {
    /// The shape as a value.
    const SHAPE: InputShape;
    /// The input, owned.
    type Owned: Clone + std::fmt::Debug + PartialEq + Eq;
    /// The input, borrowed.
    type Ref<'a>: Copy + std::fmt::Debug + PartialEq + Eq;
    /// Borrows an owned input.
    fn borrow(input: &Self::Owned) -> Self::Ref<'_>;
    /// Copies a borrowed input.
    fn to_owned(input: Self::Ref<'_>) -> Self::Owned;
    /// The input as the shapes' common type.
    fn input<'a>(input: Self::Ref<'a>) -> InputRef<'a>;
    /// The input of this shape, if `input` is of it.
    fn from_input(input: Input) -> Option<Self::Owned>;
    /// The input, borrowed for less long: what the compiler would do by itself if
    /// `GameRef` held the input's own type rather than this trait's.
    fn shorten<'b, 'a: 'b>(input: Self::Ref<'a>) -> Self::Ref<'b>;
    /// [`MakeGameRef`] of game `D`'s variant.
    fn make_ref<D: Variant<Shape = Self>>() -> MakeGameRef;
}

/// A string input.
#[derive(Debug)]
pub enum Text {}

/// One unsigned integer.
#[derive(Debug)]
pub enum Integer {}

/// A list of unsigned integers.
#[derive(Debug)]
pub enum Integers {}

impl Shape for Text {
    const SHAPE: InputShape = InputShape::Text;
    type Owned = String;
    type Ref<'a> = &'a str;
    fn borrow(input: &String) -> &str {
        input
    }
    fn to_owned(input: &str) -> String {
        input.to_owned()
    }
    fn input<'a>(input: Self::Ref<'a>) -> InputRef<'a> {
        InputRef::Text(input)
    }
    fn from_input(input: Input) -> Option<String> {
        match input {
            Input::Text(text) => Some(text),
            Input::Integer(_) | Input::Integers(_) => None,
        }
    }
    fn shorten<'b, 'a: 'b>(input: Self::Ref<'a>) -> Self::Ref<'b> {
        input
    }
    fn make_ref<D: Variant<Shape = Self>>() -> MakeGameRef {
        MakeGameRef::Text(|input| D::game_ref(input))
    }
}

impl Shape for Integer {
    const SHAPE: InputShape = InputShape::Integer;
    type Owned = u64;
    type Ref<'a> = u64;
    fn borrow(input: &u64) -> u64 {
        *input
    }
    fn to_owned(input: u64) -> u64 {
        input
    }
    fn input<'a>(input: u64) -> InputRef<'a> {
        InputRef::Integer(input)
    }
    fn from_input(input: Input) -> Option<u64> {
        match input {
            Input::Integer(n) => Some(n),
            Input::Text(_) | Input::Integers(_) => None,
        }
    }
    fn shorten<'b, 'a: 'b>(input: Self::Ref<'a>) -> Self::Ref<'b> {
        input
    }
    fn make_ref<D: Variant<Shape = Self>>() -> MakeGameRef {
        MakeGameRef::Integer(|input| D::game_ref(input))
    }
}

impl Shape for Integers {
    const SHAPE: InputShape = InputShape::Integers;
    type Owned = Vec<u64>;
    type Ref<'a> = &'a [u64];
    fn borrow(input: &Vec<u64>) -> &[u64] {
        input
    }
    fn to_owned(input: &[u64]) -> Vec<u64> {
        input.to_vec()
    }
    fn input<'a>(input: Self::Ref<'a>) -> InputRef<'a> {
        InputRef::Integers(input)
    }
    fn from_input(input: Input) -> Option<Vec<u64>> {
        match input {
            Input::Integers(values) => Some(values),
            Input::Text(_) | Input::Integer(_) => None,
        }
    }
    fn shorten<'b, 'a: 'b>(input: Self::Ref<'a>) -> Self::Ref<'b> {
        input
    }
    fn make_ref<D: Variant<Shape = Self>>() -> MakeGameRef {
        MakeGameRef::Integers(|input| D::game_ref(input))
    }
}

/// A list of random length drawn from `len`, of values drawn from `value`: the
/// generator of the games whose input is a list.
pub fn random_values(
    rng: &mut impl rand::RngExt,
    len: RangeInclusive<u64>,
    value: RangeInclusive<u64>,
) -> Vec<u64> {
    let len = rng.random_range(len);
    (0..len).map(|_| rng.random_range(value.clone())).collect()
}

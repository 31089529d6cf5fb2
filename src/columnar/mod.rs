//! The columnar contract: the columns, types and descriptors that the Arrow Flight door
//! and the bulk client's Parquet, Arrow IPC and CSV path agree on.
//!
//! A table of problems has one input column a game, named as the proto names the game's
//! one field (`num`, `stones`, `n`, `piles`, from [`GameKind::input`]), and an optional
//! `id` of any type that is echoed back unchanged. A table of solutions has the `id` (when
//! given), `game` (the row's game as descriptors name it, null when it has none),
//! `alice_wins`, the move as nullable columns named after the proto's move fields
//! with a `move_` prefix, `nim_value` for Nim Square, and `error_reason` and
//! `error_message`, null on the rows that were solved. `docs/api.md` documents the same.
//!
//! A Flight exchange names what it solves in its descriptor's path: one game's label
//! (`["stone_game_iv"]`), or `["mixed"]`, where each row's game is the one input column
//! that is not null; a second element `winner_only` skips the moves.
//!
//! Beside the contract: [`problems`] reads a batch's rows into the domain problems every
//! door hands the solver, and [`solutions`] writes their results into a table of
//! solutions, and [`BatchEncoder`] turns either into the Flight messages that carry it.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};

use crate::echo;
use crate::games::{GameKind, InputShape, MoveField};

mod bits;
mod input;
pub mod ipc;
pub mod kernels;
mod messages;
mod numbers;
mod output;

pub(crate) use bits::spread_bits;
pub use input::{id_column, problems, problems_into, BatchProblems, ColumnError};
pub use messages::{BatchEncoder, FlightMessage};
pub(crate) use numbers::quoted;
pub use numbers::{decimal_count, float_count, text_count, NotACount};
pub use output::{game_column, one_game_column, solutions, AnswerColumns, Solutions};

/// The optional column echoed from each problem to its solution.
pub const ID: &str = "id";
/// The row's game, as descriptors name it (`stone_game_iv`); null on a row with no game
/// or several.
pub const GAME: &str = "game";
/// True when Alice, who moves first, wins; null on an error row.
pub const ALICE_WINS: &str = "alice_wins";
/// Nim Square: the position's nim value (0 exactly when Bob wins).
pub const NIM_VALUE: &str = "nim_value";
/// The error's stable reason (as `ErrorInfo.reason`), null when the row was solved.
pub const ERROR_REASON: &str = "error_reason";
/// The error's message, null when the row was solved.
pub const ERROR_MESSAGE: &str = "error_message";

/// The descriptor path element that asks for each row's own game.
pub const MIXED: &str = "mixed";
/// The optional second descriptor path element that skips the moves.
pub const WINNER_ONLY: &str = "winner_only";

/// What one exchange solves: one game, or each row's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Games {
    /// Every row is a problem of this game, in its input column.
    One(GameKind),
    /// Each row's game is the one game input column that is not null.
    Mixed,
}

impl Games {
    /// Every choice a descriptor can name: each game, then `mixed`.
    pub const ALL: [Games; GameKind::ALL.len() + 1] = {
        let mut all = [Games::Mixed; GameKind::ALL.len() + 1];
        let mut at = 0;
        while at < GameKind::ALL.len() {
            all[at] = Games::One(GameKind::ALL[at]);
            at += 1;
        }
        all
    };

    /// The games whose input columns a table of these problems may hold.
    pub fn kinds(self) -> &'static [GameKind] {
        static KINDS: [GameKind; GameKind::ALL.len()] = GameKind::ALL;
        match self {
            Games::One(kind) => std::slice::from_ref(&KINDS[kind.index()]),
            Games::Mixed => &KINDS,
        }
    }

    /// The descriptor path element: the game's label, or `mixed`.
    pub fn name(self) -> &'static str {
        match self {
            Games::One(kind) => kind.label(),
            Games::Mixed => MIXED,
        }
    }
}

/// A Flight descriptor's path, parsed: what is solved and whether moves are wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Descriptor {
    /// What the exchange solves.
    pub games: Games,
    /// No moves are looked for; the move columns are then all null.
    pub winner_only: bool,
}

/// Why a descriptor path names nothing this server solves.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescriptorError {
    /// The path is empty, or not a path at all.
    #[error("the descriptor's path must name a game: one of {}", names())]
    NoGame,
    /// The first element is no game.
    #[error("unknown game {} in the descriptor: expected one of {expected}", echo::quoted(game), expected = names())]
    UnknownGame {
        /// The path's first element.
        game: String,
    },
    /// A second element other than `winner_only`, or more than two.
    #[error("unexpected {} in the descriptor's path: after the game, only {WINNER_ONLY:?} may follow", echo::quoted(.0))]
    UnknownOption(String),
}

/// The names a descriptor may start with, for messages.
fn names() -> String {
    Games::ALL.map(Games::name).join(", ")
}

impl Descriptor {
    /// Parses a descriptor's path: `[game]` or `[game, "winner_only"]`.
    pub fn parse<S: AsRef<str>>(path: &[S]) -> Result<Descriptor, DescriptorError> {
        let mut parts = path.iter().map(AsRef::as_ref);
        let game = parts.next().ok_or(DescriptorError::NoGame)?;
        let games = match game {
            MIXED => Games::Mixed,
            label => Games::One(
                GameKind::from_label(label)
                    .ok_or_else(|| DescriptorError::UnknownGame { game: label.to_owned() })?,
            ),
        };
        let winner_only = match parts.next() {
            None => false,
            Some(WINNER_ONLY) => true,
            Some(other) => return Err(DescriptorError::UnknownOption(other.to_owned())),
        };
        if let Some(extra) = parts.next() {
            return Err(DescriptorError::UnknownOption(extra.to_owned()));
        }
        Ok(Descriptor { games, winner_only })
    }

    /// The descriptor's path, as [`Descriptor::parse`] reads it.
    pub fn path(&self) -> Vec<String> {
        let mut path = vec![self.games.name().to_owned()];
        if self.winner_only {
            path.push(WINNER_ONLY.to_owned());
        }
        path
    }
}

/// The canonical type of a game's input column; [`input_schema`] describes what else is
/// accepted.
pub fn input_type(kind: GameKind) -> DataType {
    match kind.input_shape() {
        InputShape::Text => DataType::Utf8,
        InputShape::Integer => DataType::UInt64,
        InputShape::Integers => DataType::List(Arc::new(Field::new_list_field(DataType::UInt64, false))),
    }
}

/// True when a column of `ty` can hold `kind`'s problems: the one test of a column's type
/// that the Flight door and the bulk client's tables share (the door then reads it as
/// [`accepted_types`] says).
pub fn accepts(kind: GameKind, ty: &DataType) -> bool {
    // Numbers of another type than integers are read by the rule of `numbers`.
    let number = |ty: &DataType| ty.is_integer() || numbers::is_convertible(ty);
    match (kind.input_shape(), ty) {
        (InputShape::Text, DataType::Dictionary(keys, values)) => keys.is_integer() && is_string(values),
        (InputShape::Text, ty) => is_string(ty),
        (InputShape::Integer, ty) => number(ty),
        (
            InputShape::Integers,
            DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _),
        ) => number(item.data_type()),
        (InputShape::Integers, _) => false,
    }
}

fn is_string(ty: &DataType) -> bool {
    matches!(ty, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

/// The input types accepted for `kind`'s column, in words (for messages and docs).
pub fn accepted_types(kind: GameKind) -> &'static str {
    match kind.input_shape() {
        InputShape::Text => "a string type (utf8, large_utf8, utf8_view, or a dictionary of them)",
        InputShape::Integer => {
            "whole numbers: an integer type (uint64), or a float, decimal or string type holding them"
        }
        InputShape::Integers => {
            "a list of whole numbers (list, large_list or fixed_size_list of uint64, or of a float, \
             decimal or string type holding them)"
        }
    }
}

/// The one-line cast that makes a column named `column` readable as `kind`'s input, in
/// pandas, Polars and Spark terms (for the message that refuses its type).
pub fn cast_fix(kind: GameKind, column: &str) -> String {
    let c = column;
    let (pandas, polars, spark) = match kind.input_shape() {
        InputShape::Text => ("astype(\"string\")".to_owned(), "pl.String", "string"),
        InputShape::Integer => ("astype(\"UInt64\")".to_owned(), "pl.UInt64", "decimal(20,0)"),
        InputShape::Integers => (
            "map(lambda v: None if v is None else [int(x) for x in v])".to_owned(),
            "pl.List(pl.UInt64)",
            "array<decimal(20,0)>",
        ),
    };
    format!(
        "cast it first: in pandas df[{c:?}] = df[{c:?}].{pandas}; in Polars df = \
         df.with_columns(pl.col({c:?}).cast({polars})); in Spark df = df.withColumn({c:?}, \
         F.col({c:?}).cast({spark:?}))"
    )
}

/// The canonical schema of a table of `games` problems: `id` (utf8 here, though any type
/// is echoed), then each game's input column, all nullable.
///
/// Also accepted: `large_utf8`, `utf8_view` and dictionaries of them for `num`; any
/// integer type for `n` and inside the lists (a negative value is that row's error), and
/// floats, decimals and strings holding whole numbers (`7.0`, `decimal(20,0)`, `"7"`;
/// `NaN` is no value, and any other value that is not a count is that row's error);
/// `large_list` and `fixed_size_list` for `stones` and `piles`; sliced arrays.
pub fn input_schema(games: Games) -> Schema {
    let mut fields = vec![Field::new(ID, DataType::Utf8, true)];
    fields.extend(games.kinds().iter().map(|&kind| Field::new(kind.input(), input_type(kind), true)));
    Schema::new(fields)
}

/// A column of a table of solutions between `alice_wins` and the error's: a field of
/// the move, or the nim value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnswerColumn {
    /// `move_` and the field's name ([`MoveField::column`]).
    Move(MoveField),
    /// [`NIM_VALUE`].
    NimValue,
}

impl AnswerColumn {
    /// Every answer column, in the order a table of solutions holds them.
    const ALL: [AnswerColumn; MoveField::ALL.len() + 1] = {
        let mut all = [AnswerColumn::NimValue; MoveField::ALL.len() + 1];
        let mut at = 0;
        while at < MoveField::ALL.len() {
            all[at] = AnswerColumn::Move(MoveField::ALL[at]);
            at += 1;
        }
        all
    };

    /// The answer columns that some game of `games` fills, in table order.
    pub fn of(games: Games) -> impl Iterator<Item = AnswerColumn> {
        AnswerColumn::ALL
            .into_iter()
            .filter(move |column| games.kinds().iter().any(|&kind| column.filled_by(kind)))
    }

    /// True when `kind`'s solutions fill this column.
    pub fn filled_by(self, kind: GameKind) -> bool {
        match self {
            AnswerColumn::Move(field) => kind.move_fields().contains(&field),
            AnswerColumn::NimValue => kind.has_nim_value(),
        }
    }

    /// The column's name.
    pub const fn name(self) -> &'static str {
        match self {
            AnswerColumn::Move(field) => field.column(),
            AnswerColumn::NimValue => NIM_VALUE,
        }
    }

    /// The column's type: the proto field's, `uint32` or `uint64`.
    pub fn data_type(self) -> DataType {
        match self {
            AnswerColumn::Move(field) if !field.is_u32() => DataType::UInt64,
            AnswerColumn::Move(_) | AnswerColumn::NimValue => DataType::UInt32,
        }
    }
}

/// Bytes of a row's answer in Arrow's buffers, at most: 8 for each answer column (every
/// move field's and the nim value's), and 4 for the offset of each of `strings` string
/// columns; its validity bits and flag are left to the caller's rounding.
pub const fn answer_row_bytes(strings: usize) -> usize {
    AnswerColumn::ALL.len() * 8 + strings * 4
}

/// The type of the `game` column: a dictionary of every game's label (in
/// [`GameKind::ALL`]'s order, the same in every batch), one byte a row. As text it was 17
/// bytes a row, more than the rest of a Stone Game IV answer, and half of what the Flight
/// door sent (docs/performance.md, "The game column as a dictionary").
pub fn game_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
}

/// The schema of a table of `games` solutions: `id` as the problems' `id` field (when
/// they have one), `game`, `alice_wins`, the answer columns `games` fill, then the error
/// columns; every column nullable.
pub fn output_schema(games: Games, id: Option<&Field>) -> Schema {
    let mut fields: Vec<Field> =
        id.map(|id| Field::new(ID, id.data_type().clone(), true)).into_iter().collect();
    fields.push(Field::new(GAME, game_type(), true));
    fields.push(Field::new(ALICE_WINS, DataType::Boolean, true));
    fields.extend(AnswerColumn::of(games).map(|column| Field::new(column.name(), column.data_type(), true)));
    fields.push(Field::new(ERROR_REASON, DataType::Utf8, true));
    fields.push(Field::new(ERROR_MESSAGE, DataType::Utf8, true));
    Schema::new(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_parse_and_print_back() {
        for games in Games::ALL {
            for winner_only in [false, true] {
                let descriptor = Descriptor { games, winner_only };
                assert_eq!(Descriptor::parse(&descriptor.path()), Ok(descriptor));
            }
        }
        assert_eq!(Descriptor::parse::<&str>(&[]), Err(DescriptorError::NoGame));
        let err = Descriptor::parse(&["chess"]).unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown game \"chess\" in the descriptor: expected one of sum_game, stone_game_ix, stone_game_iv, nim_square, mixed"
        );
        assert_eq!(
            Descriptor::parse(&["n", "moves"]),
            Err(DescriptorError::UnknownGame { game: "n".into() })
        );
        assert_eq!(
            Descriptor::parse(&["nim_square", "moves"]),
            Err(DescriptorError::UnknownOption("moves".into()))
        );
        assert_eq!(
            Descriptor::parse(&["nim_square", "winner_only", "x"]),
            Err(DescriptorError::UnknownOption("x".into()))
        );
    }

    #[test]
    fn each_game_has_its_own_answer_columns_and_mixed_has_them_all() {
        let names = |schema: Schema| schema.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>();
        let id = Field::new(ID, DataType::Int64, false);
        assert_eq!(
            names(output_schema(Games::One(GameKind::NimSquare), Some(&id))),
            [
                "id",
                "game",
                "alice_wins",
                "move_pile",
                "move_take",
                "nim_value",
                "error_reason",
                "error_message"
            ]
        );
        assert_eq!(
            names(output_schema(Games::One(GameKind::SumGame), None)),
            ["game", "alice_wins", "move_index", "move_digit", "error_reason", "error_message"]
        );
        assert_eq!(
            names(output_schema(Games::Mixed, None)),
            [
                "game",
                "alice_wins",
                "move_index",
                "move_digit",
                "move_pile",
                "move_take",
                "nim_value",
                "error_reason",
                "error_message"
            ]
        );
        assert_eq!(output_schema(Games::Mixed, Some(&id)).field(0).data_type(), &DataType::Int64);
        assert_eq!(names(input_schema(Games::Mixed)), ["id", "num", "stones", "n", "piles"]);
    }
}

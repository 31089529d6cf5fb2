//! Sum Game as the crate sees it: its facts, its move and its protobuf messages.

use std::ops::RangeInclusive;

use crate::games::declare::{Declared, GameFacts, MoveField, MoveValues, SizeFact, Text};
use crate::games::{Outcome, SolveError, Tables};
use crate::pb;

/// Sum Game (LeetCode 1927): a string of digits and '?'.
#[derive(Debug)]
pub enum SumGame {}

/// Alice's move: fill the '?' at `index` with `digit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SumGameMove {
    /// Byte index of the '?' in the string.
    pub index: u64,
    /// The digit to write, 0 to 9.
    pub digit: u8,
}

impl Declared for SumGame {
    const FACTS: GameFacts = GameFacts {
        label: "sum_game",
        name: "sum game",
        title: "Sum Game",
        json_field: "sumGame",
        mix_key: "sum",
        mix_weight: 4,
        input: "num",
        input_path: "problem.sum_game.num",
        move_fields: &[MoveField::INDEX, MoveField::DIGIT],
        nim_value: false,
        sizes: &[SizeFact {
            flag: "sum-len",
            help: "Sum Game string length, `N` or `MIN..MAX` (inclusive; odd lengths round down)",
            default: (2, 16),
        }],
        table: None,
    };
    type Shape = Text;
    type Move = SumGameMove;
    type Wire = pb::SumGame;
    type WireMove = pb::SumGameMove;

    fn move_values(m: SumGameMove) -> MoveValues {
        [m.index, u64::from(m.digit)]
    }

    fn solve(num: &str, _: &Tables) -> Result<Outcome, SolveError> {
        super::solve(num)
    }

    fn random(rng: &mut impl rand::RngExt, sizes: &[RangeInclusive<u64>]) -> String {
        super::random(rng, sizes[0].clone())
    }

    fn wire_input(wire: &pb::SumGame) -> &str {
        &wire.num
    }

    fn from_wire(wire: pb::SumGame) -> String {
        wire.num
    }

    fn to_wire(num: String) -> pb::SumGame {
        pb::SumGame { num }
    }

    fn wire_move([index, digit]: MoveValues) -> pb::SumGameMove {
        pb::SumGameMove { index, digit: digit as u32 }
    }

    fn wire_move_values(wire: &pb::SumGameMove) -> MoveValues {
        [wire.index, u64::from(wire.digit)]
    }
}

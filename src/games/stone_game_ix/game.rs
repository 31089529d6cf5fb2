//! Stone Game IX as the crate sees it: its facts, its move and its protobuf messages.

use std::ops::RangeInclusive;

use crate::games::declare::{random_values, Declared, GameFacts, Integers, MoveField, MoveValues, SizeFact};
use crate::games::{Outcome, SolveError, Tables};
use crate::pb;

/// Stone Game IX (LeetCode 2029): a list of stone values.
#[derive(Debug)]
pub enum StoneGameIx {}

/// Alice's move: remove the stone at `index` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoneGameIxMove {
    /// Index of the stone in the input.
    pub index: u64,
}

impl Declared for StoneGameIx {
    const FACTS: GameFacts = GameFacts {
        label: "stone_game_ix",
        name: "stone game ix",
        title: "Stone Game IX",
        json_field: "stoneGameIx",
        mix_key: "ix",
        mix_weight: 4,
        input: "stones",
        input_path: "problem.stone_game_ix.stones",
        move_fields: &[MoveField::INDEX],
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
    };
    type Shape = Integers;
    type Move = StoneGameIxMove;
    type Wire = pb::StoneGameIx;
    type WireMove = pb::StoneGameIxMove;

    fn move_values(m: StoneGameIxMove) -> MoveValues {
        [m.index, 0]
    }

    fn solve(stones: &[u64], _: &Tables) -> Result<Outcome, SolveError> {
        Ok(super::solve(stones))
    }

    fn random(rng: &mut impl rand::RngExt, sizes: &[RangeInclusive<u64>]) -> Vec<u64> {
        random_values(rng, sizes[0].clone(), sizes[1].clone())
    }

    fn wire_input(wire: &pb::StoneGameIx) -> &[u64] {
        &wire.stones
    }

    fn from_wire(wire: pb::StoneGameIx) -> Vec<u64> {
        wire.stones
    }

    fn to_wire(stones: Vec<u64>) -> pb::StoneGameIx {
        pb::StoneGameIx { stones }
    }

    fn wire_move([index, _]: MoveValues) -> pb::StoneGameIxMove {
        pb::StoneGameIxMove { index }
    }

    fn wire_move_values(wire: &pb::StoneGameIxMove) -> MoveValues {
        [wire.index, 0]
    }
}

//! Stone Game IV as the crate sees it: its facts, its move and its protobuf messages.

use std::ops::RangeInclusive;

use crate::games::declare::{Declared, GameFacts, Integer, MoveField, MoveValues, SizeFact, TableFacts};
use crate::games::{ColumnKernel, Outcome, SolveError, Tables};
use crate::pb;

/// Stone Game IV (LeetCode 1510): one pile, answered from a growing table.
#[derive(Debug)]
pub enum StoneGameIv {}

/// Alice's move: take `take` stones (a non-zero square).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoneGameIvMove {
    /// The square number of stones to take.
    pub take: u64,
}

impl Declared for StoneGameIv {
    const FACTS: GameFacts = GameFacts {
        label: "stone_game_iv",
        name: "stone game iv",
        title: "Stone Game IV",
        json_field: "stoneGameIv",
        mix_key: "iv",
        mix_weight: 2,
        input: "n",
        input_path: "problem.stone_game_iv.n",
        move_fields: &[MoveField::TAKE],
        nim_value: false,
        sizes: &[SizeFact {
            flag: "iv-n",
            help: "Stone Game IV pile sizes, `N` or `MIN..MAX`",
            default: (0, 1000),
        }],
        table: Some(TableFacts {
            name: "iv",
            default_limit: super::DEFAULT_LIMIT,
            max_limit: super::MAX_LIMIT,
        }),
    };
    const KERNEL: ColumnKernel = ColumnKernel::StoneGameIvMoves;
    type Shape = Integer;
    type Move = StoneGameIvMove;
    type Wire = pb::StoneGameIv;
    type WireMove = pb::StoneGameIvMove;

    fn move_values(m: StoneGameIvMove) -> MoveValues {
        [m.take, 0]
    }

    fn solve(n: u64, tables: &Tables) -> Result<Outcome, SolveError> {
        tables.iv.solve(n)
    }

    /// One binary search in the table, where solving also looks for Alice's move.
    fn winner(n: u64, tables: &Tables) -> Result<Outcome, SolveError> {
        tables.iv.winner(n).map(|winner| Outcome { winner, winning_move: None, nim_value: None })
    }

    fn needs_extension(n: u64, tables: &Tables) -> Option<u64> {
        tables.iv.needs_extension(n).then_some(n)
    }

    fn random(rng: &mut impl rand::RngExt, sizes: &[RangeInclusive<u64>]) -> u64 {
        rng.random_range(sizes[0].clone())
    }

    fn wire_input(wire: &pb::StoneGameIv) -> u64 {
        wire.n
    }

    fn from_wire(wire: pb::StoneGameIv) -> u64 {
        wire.n
    }

    fn to_wire(n: u64) -> pb::StoneGameIv {
        pb::StoneGameIv { n }
    }

    fn wire_move([take, _]: MoveValues) -> pb::StoneGameIvMove {
        pb::StoneGameIvMove { take }
    }

    fn wire_move_values(wire: &pb::StoneGameIvMove) -> MoveValues {
        [wire.take, 0]
    }
}

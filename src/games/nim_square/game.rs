//! Nim Square as the crate sees it: its facts, its move and its protobuf messages.

use std::ops::RangeInclusive;

use super::{NimSquareMove, NimSquareOutcome};
use crate::games::declare::{
    random_values, Declared, GameFacts, Integers, MoveField, MoveValues, SizeFact, TableFacts,
};
use crate::games::{ColumnKernel, Move, Outcome, SolveError, Tables};
use crate::pb;

/// Nim Square: several piles, a square taken from one, answered from a table of Grundy
/// values.
#[derive(Debug)]
pub enum NimSquare {}

impl Declared for NimSquare {
    const FACTS: GameFacts = GameFacts {
        label: "nim_square",
        name: "nim square",
        title: "Nim Square",
        json_field: "nimSquare",
        mix_key: "nim",
        mix_weight: 0,
        input: "piles",
        input_path: "problem.nim_square.piles",
        move_fields: &[MoveField::PILE, MoveField::TAKE],
        nim_value: true,
        sizes: &[
            SizeFact {
                flag: "nim-piles",
                help: "Nim Square number of piles, `N` or `MIN..MAX`",
                default: (1, 4),
            },
            SizeFact { flag: "nim-n", help: "Nim Square pile sizes, `N` or `MIN..MAX`", default: (0, 1000) },
        ],
        table: Some(TableFacts {
            name: "grundy",
            default_limit: super::DEFAULT_LIMIT,
            max_limit: super::MAX_LIMIT,
        }),
    };
    const KERNEL: ColumnKernel = ColumnKernel::NimSquareGrundy;
    type Shape = Integers;
    type Move = NimSquareMove;
    type Wire = pb::NimSquare;
    type WireMove = pb::NimSquareMove;

    fn move_values(m: NimSquareMove) -> MoveValues {
        [m.pile, m.take]
    }

    fn solve(piles: &[u64], tables: &Tables) -> Result<Outcome, SolveError> {
        tables.grundy.solve(piles, false).map(Outcome::from)
    }

    /// The nim value without the move search.
    fn winner(piles: &[u64], tables: &Tables) -> Result<Outcome, SolveError> {
        tables.grundy.solve(piles, true).map(Outcome::from)
    }

    fn needs_extension(piles: &[u64], tables: &Tables) -> Option<u64> {
        let n = piles.iter().copied().filter(|&n| n <= tables.grundy.limit()).max()?;
        tables.grundy.needs_extension(n).then_some(n)
    }

    fn random(rng: &mut impl rand::RngExt, sizes: &[RangeInclusive<u64>]) -> Vec<u64> {
        random_values(rng, sizes[0].clone(), sizes[1].clone())
    }

    fn wire_input(wire: &pb::NimSquare) -> &[u64] {
        &wire.piles
    }

    fn from_wire(wire: pb::NimSquare) -> Vec<u64> {
        wire.piles
    }

    fn to_wire(piles: Vec<u64>) -> pb::NimSquare {
        pb::NimSquare { piles }
    }

    fn wire_move([pile, take]: MoveValues) -> pb::NimSquareMove {
        pb::NimSquareMove { pile, take }
    }

    fn wire_move_values(wire: &pb::NimSquareMove) -> MoveValues {
        [wire.pile, wire.take]
    }
}

impl From<NimSquareOutcome> for Outcome {
    fn from(outcome: NimSquareOutcome) -> Self {
        Outcome {
            winner: outcome.winner,
            winning_move: outcome.winning_move.map(Move::NimSquare),
            nim_value: Some(outcome.nim_value),
        }
    }
}

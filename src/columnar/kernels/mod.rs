//! Column kernels: a batch's problems answered a game at a time and a column at a time,
//! from its input column's buffers straight into the answer's, where the row path builds a
//! problem and a result a row and then the columns from them (docs/performance.md).
//!
//! A one-game batch is one run; a `mixed` batch is split by game into runs, each answered
//! by its game's kernel, and put back in order with one gather per column
//! ([`interleave`]). A row a kernel cannot answer simply (a gap in its input, a pile its
//! table does not reach yet or at all) is left to the row path ([`Answered::fallback`]),
//! which every door already has: the kernels answer what the row path would, and are held
//! to it by the tests here and by the `columnar` fuzz target ([`solve_rows`]).

mod answers;
mod counts;
mod nim_square;
mod rows;
mod stone_game_iv;

use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch};
use arrow_schema::{ArrowError, DataType};
use arrow_select::interleave::interleave;

use self::answers::Answers;
use self::counts::{Counts, Lists};
use super::{
    id_column, one_game_column, output_schema, solutions, BatchProblems, ColumnError, Descriptor, Games,
};
use crate::games::{ColumnKernel, GameKind, Outcome, Tables};
use crate::problem::ProblemError;

/// A game's kernel over a batch's input column, read once for the batch: the one its
/// declaration names ([`crate::games::Declared::KERNEL`]).
enum Kernel<'a> {
    Rows(rows::Kernel<'a>),
    StoneGameIv(stone_game_iv::Kernel<'a>),
    NimSquare(nim_square::Kernel<'a>),
}

impl<'a> Kernel<'a> {
    /// `kind`'s kernel over `array`, answering from `tables` (Stone Game IV's from its
    /// small piles' `moves`, Nim Square's from its `grundy` values); `None` when the
    /// column is of no type it reads (the row path then answers every row).
    fn of(
        kind: GameKind,
        choice: ColumnKernel,
        array: &'a dyn Array,
        tables: &'a Tables,
        moves: &'a [u16],
        grundy: &'a [u16],
        winner_only: bool,
    ) -> Option<Self> {
        Some(match choice {
            ColumnKernel::Rows => {
                Kernel::Rows(rows::Kernel::of(array, kind.make_ref(), tables, winner_only)?)
            }
            ColumnKernel::StoneGameIvMoves => {
                Kernel::StoneGameIv(stone_game_iv::Kernel { piles: Counts::of(array)?, moves, winner_only })
            }
            ColumnKernel::NimSquareGrundy => Kernel::NimSquare(nim_square::Kernel {
                piles: Lists::of(array)?,
                values: grundy,
                winner_only,
            }),
        })
    }

    /// Answers `rows` into `answers`, appending the positions it leaves to the row path
    /// to `fallback`.
    fn answer(&self, rows: impl Iterator<Item = usize>, answers: &mut Answers, fallback: &mut Vec<usize>) {
        match self {
            Kernel::Rows(kernel) => kernel.answer_rows(rows, answers, fallback),
            Kernel::StoneGameIv(kernel) => kernel.answer(rows, answers, fallback),
            Kernel::NimSquare(kernel) => kernel.answer(rows, answers, fallback),
        }
    }
}

/// One game's rows of a batch, answered.
struct Run {
    /// The rows' game; `None` for the rows of a mixed batch with no game or several.
    kind: Option<GameKind>,
    answers: Answers,
    /// The rows left to the row path: their position in the run, and their row.
    fallback: Vec<(usize, usize)>,
}

/// A batch answered by the kernels, but for the rows left to the row path
/// ([`Answered::fallback`], [`Answered::fill`]); then [`Answered::finish`]ed into its
/// table of solutions.
pub struct Answered {
    games: Games,
    runs: Vec<Run>,
    /// In a mixed batch, each row's run and position in it.
    order: Option<Vec<(usize, usize)>>,
    game: ArrayRef,
}

impl Answered {
    /// `batch`'s problems of `descriptor` answered by the kernels, from `tables` as they
    /// are (a pile they do not cover yet is left to the row path, which grows them).
    pub fn of(batch: &RecordBatch, descriptor: Descriptor, tables: &Tables) -> Result<Answered, ColumnError> {
        Answered::with_kernels(batch, descriptor, tables, GameKind::kernel)
    }

    /// [`Answered::of`], each game answered by the kernel `choose` gives it (the tests
    /// hold every game's rows kernel to the row path too).
    fn with_kernels(
        batch: &RecordBatch,
        descriptor: Descriptor,
        tables: &Tables,
        choose: fn(GameKind) -> ColumnKernel,
    ) -> Result<Answered, ColumnError> {
        let (games, rows) = (descriptor.games, batch.num_rows());
        let moves = tables.iv.small_moves();
        let grundy = tables.grundy.values();
        let kernel = |kind: GameKind| {
            // The columns were checked: the game's is there, once.
            let array = batch.column_by_name(kind.input())?;
            Kernel::of(kind, choose(kind), array.as_ref(), tables, moves, &grundy, descriptor.winner_only)
        };
        let run = |kind: Option<GameKind>, listed: Option<&[usize]>| {
            let len = listed.map_or(rows, <[usize]>::len);
            let mut answers = Answers::new(kind, games, len);
            let mut fallback = Vec::new();
            match (kind.and_then(kernel), listed) {
                (Some(kernel), None) => kernel.answer(0..rows, &mut answers, &mut fallback),
                (Some(kernel), Some(listed)) => {
                    kernel.answer(listed.iter().copied(), &mut answers, &mut fallback)
                }
                (None, _) => {
                    fallback.extend(0..len);
                    (0..len).for_each(|_| answers.push(None));
                }
            }
            let fallback =
                fallback.into_iter().map(|at| (at, listed.map_or(at, |listed| listed[at]))).collect();
            Run { kind, answers, fallback }
        };
        match games {
            Games::One(kind) => {
                // The columns' checks alone, on no rows: the kernel reads the rows.
                BatchProblems::of(&batch.slice(0, 0), games)?;
                let game = one_game_column(kind, rows);
                Ok(Answered { games, runs: vec![run(Some(kind), None)], order: None, game })
            }
            Games::Mixed => {
                let problems = BatchProblems::of(batch, games)?;
                // A run a game, in the order of `GameKind::ALL`, then the rows without one.
                let mut listed = vec![Vec::new(); GameKind::ALL.len() + 1];
                let order = (0..rows)
                    .map(|row| {
                        let at = problems.game(row).map_or(GameKind::ALL.len(), GameKind::index);
                        listed[at].push(row);
                        (at, listed[at].len() - 1)
                    })
                    .collect();
                let kinds = GameKind::ALL.map(Some).into_iter().chain([None]);
                let runs = kinds.zip(&listed).map(|(kind, listed)| run(kind, Some(listed))).collect();
                Ok(Answered { games, runs, order: Some(order), game: problems.game_column(rows) })
            }
        }
    }

    /// The rows left to the row path, ascending within each run: [`Answered::fill`] takes
    /// their answers in this order.
    pub fn fallback(&self) -> impl Iterator<Item = usize> + '_ {
        self.runs.iter().flat_map(|run| run.fallback.iter().map(|&(_, row)| row))
    }

    /// The row path's answers of the rows [`Answered::fallback`] lists, in its order.
    pub fn fill(&mut self, answers: impl IntoIterator<Item = Result<Outcome, ProblemError>>) {
        let mut answers = answers.into_iter();
        for run in &mut self.runs {
            for &(at, _) in &run.fallback {
                if let Some(answer) = answers.next() {
                    run.answers.set(at, answer);
                }
            }
        }
    }

    /// The problems the kernels answered, as (game label, outcome, count), for the
    /// metrics; the row path counts its own.
    pub fn counts(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut counts: Vec<(&'static str, &'static str, u64)> = Vec::new();
        for run in &self.runs {
            let Some(kind) = run.kind else { continue };
            let errors = run.answers.errors();
            let solved = run.answers.len() - run.fallback.len() - errors.len();
            let outcomes = errors.iter().map(|(_, err)| (err.reason(), 1)).chain([("solved", solved as u64)]);
            for (outcome, count) in outcomes.filter(|&(_, count)| count > 0) {
                match counts.iter_mut().find(|(_, o, _)| *o == outcome) {
                    Some(found) => found.2 += count,
                    None => counts.push((kind.label(), outcome, count)),
                }
            }
        }
        counts
    }

    /// The table of solutions, with `id` first when the batch has one.
    pub fn finish(self, batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
        let id = id_column(batch).map_err(|err| ArrowError::InvalidArgumentError(err.to_string()))?;
        let schema = output_schema(self.games, id.as_ref().map(|(field, _)| field.as_ref()));
        let mut columns: Vec<ArrayRef> = id.map(|(_, array)| array).into_iter().collect();
        columns.push(self.game);
        let runs: Vec<Vec<ArrayRef>> = self.runs.into_iter().map(|run| run.answers.finish()).collect();
        match &self.order {
            None => columns.extend(runs.into_iter().flatten()),
            Some(order) => {
                for at in 0..runs.first().map_or(0, Vec::len) {
                    let pieces: Vec<&dyn Array> = runs.iter().map(|run| run[at].as_ref()).collect();
                    // A column no run fills (the error columns of a batch without errors,
                    // a move field no game of it has) is written null at once.
                    let column = match pieces.iter().all(|piece| piece.null_count() == piece.len()) {
                        true => new_null_array(
                            pieces.first().map_or(&DataType::Null, |p| p.data_type()),
                            order.len(),
                        ),
                        false => without_empty_nulls(interleave(&pieces, order)?),
                    };
                    columns.push(column);
                }
            }
        }
        RecordBatch::try_new(Arc::new(schema), columns)
    }
}

/// `array` without a validity buffer when every row is valid, as the row path writes it.
fn without_empty_nulls(array: ArrayRef) -> ArrayRef {
    match array.nulls() {
        Some(nulls) if nulls.null_count() == 0 => {
            let data = array.into_data().into_builder().nulls(None);
            // The same data, less its validity: valid as it was.
            arrow_array::make_array(data.build().expect("the same data without its validity"))
        }
        _ => array,
    }
}

/// `batch`'s table of solutions of `descriptor` by the kernels, the rows they leave
/// answered by the row path on this thread (the tables grown as it needs): what the door
/// answers, without its fan-out, metrics and pool.
pub fn solve_columns(
    batch: &RecordBatch,
    descriptor: Descriptor,
    tables: &Tables,
) -> Result<RecordBatch, ColumnError> {
    solve_columns_with(batch, descriptor, tables, GameKind::kernel)
}

/// [`solve_columns`], each game answered by the kernel `choose` gives it.
fn solve_columns_with(
    batch: &RecordBatch,
    descriptor: Descriptor,
    tables: &Tables,
    choose: fn(GameKind) -> ColumnKernel,
) -> Result<RecordBatch, ColumnError> {
    let mut answered = Answered::with_kernels(batch, descriptor, tables, choose)?;
    let rows: Vec<usize> = answered.fallback().collect();
    if !rows.is_empty() {
        let problems = BatchProblems::of(batch, descriptor.games)?;
        answered.fill(rows.into_iter().map(|row| row_answer(&problems, row, tables, descriptor.winner_only)));
    }
    Ok(answered.finish(batch).expect("columns of the output schema"))
}

/// `batch`'s table of solutions of `descriptor` by the row path alone: a problem and a
/// result a row, then the columns from them. The reference the kernels are held to.
pub fn solve_rows(
    batch: &RecordBatch,
    descriptor: Descriptor,
    tables: &Tables,
) -> Result<RecordBatch, ColumnError> {
    let problems = BatchProblems::of(batch, descriptor.games)?;
    let rows = batch.num_rows();
    let results: Vec<_> =
        (0..rows).map(|row| row_answer(&problems, row, tables, descriptor.winner_only)).collect();
    let id = id_column(batch)?;
    let id = id.as_ref().map(|(field, array)| (field.as_ref(), Arc::clone(array)));
    Ok(solutions(descriptor.games, &results, id, problems.game_column(rows))
        .expect("columns of the output schema"))
}

/// The row path's answer of `row`.
fn row_answer(
    problems: &BatchProblems<'_>,
    row: usize,
    tables: &Tables,
    winner_only: bool,
) -> Result<Outcome, ProblemError> {
    let game = problems.get(row)?;
    let outcome = match winner_only {
        true => game.winner(tables),
        false => game.solve(tables),
    };
    outcome.map_err(ProblemError::from)
}

#[cfg(test)]
mod tests;

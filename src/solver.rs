//! The domain fan-out behind every door: takes domain problems, returns domain outcomes.
//!
//! Each door (gRPC in [`crate::service`], Arrow Flight beside it) decodes its own wire
//! format into [`Game`]s, hands them here and encodes what comes back; the growing of
//! tables, the choice between inline and pool, the panic guard and the counting of
//! problems by game are decided once, here, so that no door solves differently.
//!
//! Small problems are solved inline on the async worker (cheaper than a hop to another
//! thread); anything whose input exceeds [`SolverConfig::inline_work`] goes to the rayon
//! pool, and batches are split across it. Piles beyond a table's range first grow the
//! table on the blocking pool, once per batch.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use rayon::prelude::*;

use crate::games::{Game, GameKind, GameRef, Outcome, Tables};
use crate::pool::{self, PoolError};
use crate::problem::{Problem, ProblemError, ProblemRef};
use crate::seconds::Timeout;

/// Tuning of the fan-out.
#[derive(Debug, Clone, clap::Args)]
pub struct SolverConfig {
    /// Problems whose input is at most this many bytes/stones are solved inline on the
    /// calling async worker; larger ones go to the CPU pool.
    #[arg(long, default_value_t = SolverConfig::default().inline_work)]
    pub inline_work: usize,
    /// Problems of one `SolveStream` call solved concurrently, ahead of the one the
    /// client is waiting for.
    #[arg(skip = SolverConfig::default().stream_window)]
    pub stream_window: usize,
    /// Batches of one `SolveBatchStream` call solved concurrently.
    #[arg(skip = SolverConfig::default().batch_window)]
    pub batch_window: usize,
    /// Bytes of decoded problems one streaming call may have in flight before the server
    /// stops reading from it (HTTP/2 flow control then holds the client back); a request
    /// larger than this waits until it can have all of it, then runs alone.
    #[arg(long, default_value_t = SolverConfig::default().stream_in_flight_bytes)]
    pub stream_in_flight_bytes: usize,
    /// Seconds a stream may send nothing while the server has nothing left to answer
    /// before it ends with DEADLINE_EXCEEDED; 0 is never.
    #[arg(long, value_name = "SECONDS", default_value_t = SolverConfig::default().stream_idle_timeout)]
    pub stream_idle_timeout: Timeout,
}

impl Default for SolverConfig {
    fn default() -> Self {
        SolverConfig {
            inline_work: 32 * 1024,
            stream_window: 64,
            batch_window: 4,
            stream_in_flight_bytes: 64 * 1024 * 1024,
            stream_idle_timeout: Timeout(Some(Duration::from_secs(60))),
        }
    }
}

/// Smallest number of problems that one rayon task of a batch takes.
const MIN_PROBLEMS_PER_TASK: usize = 256;

/// What the fan-out reports of its work. The server's metrics implement it; the solver
/// knows nothing of how it is counted.
pub trait SolveObserver: Send + Sync + std::fmt::Debug + 'static {
    /// Problems answered, as (game label, outcome, count): the outcome is `solved` or the
    /// error's reason. Called once a batch or task with its whole tally, so that a
    /// million small problems a second do not contend on one counter.
    fn problems_answered(&self, counts: &[(&'static str, &'static str, u64)]);

    /// A caller spent `seconds` growing `game`'s table (or waiting for that growth);
    /// `cause` says what asked for it.
    fn table_extended(&self, game: GameKind, cause: &'static str, seconds: f64);
}

/// A problem in either form, as the solver reads it (a door's tag beside it ignored).
pub trait AsProblem {
    /// The problem's game, or why it has none.
    fn as_problem(&self) -> Result<GameRef<'_>, &ProblemError>;
}

impl AsProblem for Problem {
    #[inline]
    fn as_problem(&self) -> Result<GameRef<'_>, &ProblemError> {
        self.as_ref().map(Game::borrowed)
    }
}

impl AsProblem for ProblemRef<'_> {
    #[inline]
    fn as_problem(&self) -> Result<GameRef<'_>, &ProblemError> {
        self.as_ref().map(|game| game.shorten())
    }
}

impl<M, P: AsProblem> AsProblem for (M, P) {
    #[inline]
    fn as_problem(&self) -> Result<GameRef<'_>, &ProblemError> {
        self.1.as_problem()
    }
}

/// The metrics label of a problem: its game's (a row error that names its game counts
/// under it), or `none` for one without a game.
fn label(problem: Result<GameRef<'_>, &ProblemError>) -> &'static str {
    match problem {
        Ok(game) => game.kind().label(),
        Err(err) => err.game().map_or("none", GameKind::label),
    }
}

/// Problems counted locally, reported to the observer in one call when dropped.
#[derive(Debug)]
struct Tally {
    observer: Arc<dyn SolveObserver>,
    /// (game, outcome, count); a batch has a handful of distinct pairs.
    counts: Vec<(&'static str, &'static str, u64)>,
}

impl Tally {
    /// Counts one problem of `game` with its result.
    fn record<T>(&mut self, game: &'static str, result: &Result<T, ProblemError>) {
        let outcome = match result {
            Ok(_) => "solved",
            Err(err) => err.reason(),
        };
        // Labels are literals, so the same label is almost always the same pointer: that
        // test first, per problem, and the strings compared only for a pair not found that
        // way (a copy of a literal elsewhere). Comparing texts made a mixed batch call
        // memcmp for every problem (docs/performance.md).
        let found = self
            .counts
            .iter()
            .position(|(g, o, _)| std::ptr::eq(*g, game) && std::ptr::eq(*o, outcome))
            .or_else(|| self.counts.iter().position(|(g, o, _)| *g == game && *o == outcome));
        match found {
            Some(at) => self.counts[at].2 += 1,
            None => self.counts.push((game, outcome, 1)),
        }
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        if !self.counts.is_empty() {
            self.observer.problems_answered(&self.counts);
        }
    }
}

/// The solver behind every door: the shared tables plus the fan-out policy.
#[derive(Debug)]
pub struct Solver {
    tables: Arc<Tables>,
    config: SolverConfig,
    /// Told of problems answered and table extensions.
    observer: Option<Arc<dyn SolveObserver>>,
}

impl Solver {
    /// A solver answering the table-driven games from `tables`.
    pub fn new(tables: Arc<Tables>, config: SolverConfig) -> Self {
        Solver { tables, config, observer: None }
    }

    /// The same solver, reporting what it does to `observer`.
    pub fn with_observer(self, observer: Arc<dyn SolveObserver>) -> Self {
        Solver { observer: Some(observer), ..self }
    }

    /// The fan-out's tuning, which the doors' stream plumbing reads too.
    pub fn config(&self) -> &SolverConfig {
        &self.config
    }

    /// The tables the games answer from, for a door's column kernels
    /// ([`crate::columnar::kernels`]).
    pub fn tables(&self) -> &Arc<Tables> {
        &self.tables
    }

    /// Counts problems answered without the fan-out (by a column kernel), as (game
    /// label, outcome, count), as the fan-out counts its own.
    pub fn answered(&self, counts: &[(&'static str, &'static str, u64)]) {
        if let (Some(observer), false) = (&self.observer, counts.is_empty()) {
            observer.problems_answered(counts);
        }
    }

    /// A tally that reports to the observer when dropped; `None` without one.
    fn tally(&self) -> Option<Tally> {
        let observer = Arc::clone(self.observer.as_ref()?);
        Some(Tally { observer, counts: Vec::new() })
    }

    /// Grows each table to the largest pile among `games` that needs it, on the
    /// blocking pool (a table extension can take seconds). Piles beyond a table's limit
    /// get their own error from `solve`.
    async fn prepare<'a>(&self, games: impl Iterator<Item = GameRef<'a>>) -> Result<(), PoolError> {
        let mut needed: Vec<(GameKind, u64)> = Vec::new();
        for (kind, n) in games.filter_map(|game| self.tables.needs_extension(game)) {
            match needed.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, most)) => *most = (*most).max(n),
                None => needed.push((kind, n)),
            }
        }
        for (kind, n) in needed {
            let tables = Arc::clone(&self.tables);
            let started = std::time::Instant::now();
            let extend = pool::run_blocking(move || tables.extend(kind, n));
            let span = tracing::info_span!("table.extend", game = kind.label(), n);
            tracing::Instrument::instrument(extend, span).await?;
            if let Some(observer) = &self.observer {
                observer.table_extended(kind, "request", started.elapsed().as_secs_f64());
            }
        }
        Ok(())
    }

    /// Solves one game, uncounted; with `winner_only`, no winning move is looked for.
    pub async fn solve(&self, game: Game, winner_only: bool) -> Result<Outcome, ProblemError> {
        self.prepare(std::iter::once(game.borrowed())).await?;
        if game.work() <= self.config.inline_work {
            return solve_guarded(game.borrowed(), &self.tables, winner_only);
        }
        let tables = Arc::clone(&self.tables);
        pool::run(move |_| solve_guarded(game.borrowed(), &tables, winner_only)).await?
    }

    /// True when `problems` are solved on the caller's thread rather than handed to the
    /// pool: their work is within `--inline-work`. [`Solver::solve_into`] decides by it,
    /// and a door asks it before [`Solver::solve_borrowed`].
    pub fn solves_inline(&self, problems: &[impl AsProblem]) -> bool {
        work(problems) <= self.config.inline_work
    }

    /// Solves one problem (which may have failed to convert), counting it.
    pub async fn solve_one(&self, problem: Problem, winner_only: bool) -> Result<Outcome, ProblemError> {
        let label = label(problem.as_problem());
        let result = match problem {
            Ok(game) => self.solve(game, winner_only).await,
            Err(err) => Err(err),
        };
        if let Some(mut tally) = self.tally() {
            tally.record(label, &result);
        }
        result
    }

    /// Solves a batch, counting every problem: one `finish(tag, result)` per problem, in
    /// the same order. `tag` is what a door carries beside each problem (its id); `finish`
    /// runs on the solving thread, so that a door's encoding is spread over the pool too.
    pub async fn solve_batch<M, T, F>(
        &self,
        problems: Vec<(M, Problem)>,
        winner_only: bool,
        finish: F,
    ) -> Result<Vec<T>, PoolError>
    where
        M: Default + Send + 'static,
        T: Send + 'static,
        F: Fn(M, Result<Outcome, ProblemError>) -> T + Send + Sync + 'static,
    {
        let buffers = BatchBuffers { problems, results: Vec::new() };
        Ok(self.solve_into(buffers, winner_only, finish).await?.results)
    }

    /// [`Solver::solve_batch`] into vectors a door keeps from batch to batch: the
    /// problems are drained (their vector comes back empty, its capacity kept) and the
    /// results replace what `buffers.results` held, in its allocation when it is large
    /// enough. A batch's vectors are megabytes; allocated afresh for every batch, their
    /// pages were faulted in again each time (docs/performance.md).
    pub async fn solve_into<M, T, F>(
        &self,
        buffers: BatchBuffers<M, T>,
        winner_only: bool,
        finish: F,
    ) -> Result<BatchBuffers<M, T>, PoolError>
    where
        M: Default + Send + 'static,
        T: Send + 'static,
        F: Fn(M, Result<Outcome, ProblemError>) -> T + Send + Sync + 'static,
    {
        let BatchBuffers { mut problems, mut results } = buffers;
        let failed = self.ready(&problems).await;
        let inline = self.solves_inline(&problems);
        // Each problem is counted in a tally of its task, added to the metrics at its end.
        let tally = {
            let observer = self.observer.clone();
            move || observer.clone().map(|observer| Tally { observer, counts: Vec::new() })
        };
        let solve_one = move |tables: &Tables, tally: &mut Option<Tally>, (tag, problem): (M, &Problem)| {
            finish(tag, solve_counted(tables, failed.as_ref(), winner_only, tally, problem.as_problem()))
        };
        if inline {
            let mut tally = tally();
            results.clear();
            results.extend(
                problems.drain(..).map(|(tag, problem)| solve_one(&self.tables, &mut tally, (tag, &problem))),
            );
            return Ok(BatchBuffers { problems, results });
        }
        let tables = Arc::clone(&self.tables);
        let mut buffers = pool::run(move |caller| {
            problems
                .par_iter_mut()
                .with_min_len(MIN_PROBLEMS_PER_TASK)
                .map_init(tally, |tally, (tag, problem)| match caller.is_gone() {
                    // Nobody will read the rest: answer it cheaply and let the job end.
                    true => {
                        solve_one(&tables, &mut None, (std::mem::take(tag), &Err(PoolError::Gone.into())))
                    }
                    false => solve_one(&tables, tally, (std::mem::take(tag), problem)),
                })
                .collect_into_vec(&mut results);
            BatchBuffers { problems, results }
        })
        .await?;
        // Freed here, on the thread that is most likely the one that allocated them (the
        // door's task), rather than on the pool's: mimalloc frees a block from another
        // thread through an atomic list that its owner must then collect.
        buffers.problems.clear();
        Ok(buffers)
    }

    /// Solves problems that borrow a door's buffers (Arrow columns), so that no row's
    /// input is copied, on the calling worker: for a run that [`Solver::solves_inline`]
    /// admits (a larger one goes to the pool through [`Solver::solve_into`], which needs
    /// them owned). The results replace what `results` held, one a problem, in order.
    pub async fn solve_borrowed(
        &self,
        problems: &[ProblemRef<'_>],
        winner_only: bool,
        results: &mut Vec<Result<Outcome, ProblemError>>,
    ) {
        let failed = self.ready(problems).await;
        let mut tally = self.tally();
        results.clear();
        results.extend(problems.iter().map(|problem| {
            solve_counted(&self.tables, failed.as_ref(), winner_only, &mut tally, problem.as_problem())
        }));
    }

    /// Readies the tables for a batch: grows them ([`Solver::prepare`]) and warms what
    /// its problems will read. A table that could not grow fails only the problems that
    /// needed it: the error returned, for [`solve_counted`].
    async fn ready(&self, problems: &[impl AsProblem]) -> Option<ProblemError> {
        let failed = self.prepare(games(problems)).await.err();
        self.tables.preload(games(problems));
        failed.map(ProblemError::from)
    }
}

/// Solves one problem of a batch whose tables are ready (`failed`: why they could not
/// grow), counting it in `tally`. Inlined into each loop over a batch, so that the
/// processor reaches the next problem's table load while this one's waits on memory: as a
/// call, a batch of Stone Game IV piles was solved at a third of the rate
/// (docs/performance.md).
#[inline(always)]
fn solve_counted(
    tables: &Tables,
    failed: Option<&ProblemError>,
    winner_only: bool,
    tally: &mut Option<Tally>,
    problem: Result<GameRef<'_>, &ProblemError>,
) -> Result<Outcome, ProblemError> {
    let result = match problem {
        Err(err) => Err(err.clone()),
        Ok(game) => match failed {
            Some(err) if tables.needs_extension(game).is_some() => Err(err.clone()),
            _ => solve_guarded(game, tables, winner_only),
        },
    };
    if let Some(tally) = tally {
        tally.record(label(problem), &result);
    }
    result
}

/// The work of a batch's problems (a problem that failed to convert counts one).
fn work(problems: &[impl AsProblem]) -> usize {
    problems.iter().map(|problem| problem.as_problem().map_or(1, GameRef::work)).sum()
}

/// The two vectors of a batch solved by [`Solver::solve_into`]: its problems, each with
/// the tag a door carries beside it, and their results in the same order.
#[derive(Debug)]
pub struct BatchBuffers<M, T> {
    /// The problems to solve; empty after solving, its capacity kept.
    pub problems: Vec<(M, Problem)>,
    /// The results of the last batch solved, one a problem, in order.
    pub results: Vec<T>,
}

impl<M, T> Default for BatchBuffers<M, T> {
    fn default() -> Self {
        BatchBuffers { problems: Vec::new(), results: Vec::new() }
    }
}

/// The games of a batch's problems that converted.
fn games<P: AsProblem>(problems: &[P]) -> impl Iterator<Item = GameRef<'_>> + Clone + '_ {
    problems.iter().filter_map(|problem| problem.as_problem().ok())
}

/// Solves `game`, turning a panic into an error for this problem alone.
/// With `winner_only`, no move is looked for ([`Game::winner`]).
fn solve_guarded(game: GameRef<'_>, tables: &Tables, winner_only: bool) -> Result<Outcome, ProblemError> {
    let solved = catch_unwind(AssertUnwindSafe(|| match winner_only {
        true => game.winner(tables),
        false => game.solve(tables),
    }));
    solved
        .map_err(|_| {
            ProblemError::Pool(PoolError::Panicked(format!("while solving {}", game.kind().name())))
        })?
        .map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::games::{nim_square, stone_game_iv};

    /// Keeps what it is told, for the tally's test.
    #[derive(Debug, Default)]
    struct Counts(std::sync::Mutex<Vec<(&'static str, &'static str, u64)>>);

    impl SolveObserver for Counts {
        fn problems_answered(&self, counts: &[(&'static str, &'static str, u64)]) {
            self.0.lock().unwrap().extend_from_slice(counts);
        }

        fn table_extended(&self, _: GameKind, _: &'static str, _: f64) {}
    }

    #[test]
    fn a_tally_counts_labels_by_their_text_wherever_they_are_stored() {
        let counts = Arc::new(Counts::default());
        let mut tally = Tally { observer: Arc::clone(&counts) as Arc<dyn SolveObserver>, counts: Vec::new() };
        // The same text at another address than the literal's (`leak` keeps a copy).
        let game: &'static str = String::from("sum_game").leak();
        let failed: Result<(), ProblemError> = Err(ProblemError::MissingGame);
        tally.record("sum_game", &Ok::<(), ProblemError>(()));
        tally.record(game, &Ok::<(), ProblemError>(()));
        tally.record("stone_game_iv", &failed);
        tally.record("sum_game", &Ok::<(), ProblemError>(()));
        assert!(!std::ptr::eq(game, "sum_game"));
        drop(tally);
        let reason = ProblemError::MissingGame.reason();
        assert_eq!(*counts.0.lock().unwrap(), [("sum_game", "solved", 3), ("stone_game_iv", reason, 1)]);
    }

    fn solver(inline_work: usize) -> Solver {
        let tables = Arc::new(Tables::new(stone_game_iv::DEFAULT_LIMIT, nim_square::DEFAULT_LIMIT));
        Solver::new(tables, SolverConfig { inline_work, ..SolverConfig::default() })
    }

    /// A batch of `rows` tagged problems: piles, every seventh a string that is no Sum Game,
    /// every eleventh a row that had no problem to read.
    fn batch(rows: usize) -> Vec<(usize, Problem)> {
        (0..rows)
            .map(|row| match (row % 7, row % 11) {
                (_, 10) => (row, Err(ProblemError::MissingGame)),
                (6, _) => (row, Ok(Game::SumGame("1?x".into()))),
                _ => (row, Ok(Game::StoneGameIv(row as u64 * 7919 % 100_000))),
            })
            .collect()
    }

    #[tokio::test]
    async fn vectors_kept_from_batch_to_batch_answer_as_fresh_ones_and_keep_their_room() {
        // Inline and on the pool; a smaller batch after a larger one, then a larger again.
        for inline_work in [0, usize::MAX] {
            let solver = solver(inline_work);
            let mut buffers = BatchBuffers::default();
            for rows in [5_000, 300, 0, 9_000] {
                let fresh =
                    solver.solve_batch(batch(rows), false, |row, result| (row, result)).await.unwrap();
                buffers.problems.extend(batch(rows));
                let room = buffers.problems.capacity();
                buffers = solver.solve_into(buffers, false, |row, result| (row, result)).await.unwrap();
                assert_eq!(buffers.results, fresh, "{rows} rows, inline_work {inline_work}");
                // Each result is its own row's: the tags in order, a row error as it came.
                for (row, (tag, result)) in fresh.iter().enumerate() {
                    assert_eq!(*tag, row);
                    if row % 11 == 10 {
                        assert!(matches!(result, Err(ProblemError::MissingGame)), "{row}: {result:?}");
                    } else {
                        assert_eq!(result.is_ok(), row % 7 != 6, "{row}: {result:?}");
                    }
                }
                assert!(buffers.problems.is_empty());
                assert_eq!(buffers.problems.capacity(), room, "the problems' vector is kept");
            }
        }
    }

    /// Borrowed problems are answered and counted as the same problems owned are, a
    /// table that must grow first included; `results` is replaced.
    #[tokio::test]
    async fn borrowed_problems_answer_and_count_as_owned_ones() {
        let counted = |counts: &Counts| {
            let mut counts = counts.0.lock().unwrap().clone();
            counts.sort();
            counts
        };
        let (owned_counts, borrowed_counts) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
        let owned = solver(usize::MAX).with_observer(Arc::clone(&owned_counts) as Arc<dyn SolveObserver>);
        let borrowed =
            solver(usize::MAX).with_observer(Arc::clone(&borrowed_counts) as Arc<dyn SolveObserver>);
        let mut problems: Vec<_> = batch(3_000).into_iter().map(|(_, problem)| problem).collect();
        // Beyond the move table a fresh table covers: it grows first.
        problems.push(Ok(Game::StoneGameIv(3_000_000)));
        problems.push(Ok(Game::NimSquare(vec![4, 9, 1_000])));
        let expected =
            owned.solve_batch(problems.iter().cloned().map(|p| ((), p)).collect(), false, |(), r| r);
        let expected = expected.await.unwrap();
        let refs: Vec<ProblemRef<'_>> = problems
            .iter()
            .map(|problem| problem.as_ref().map(Game::borrowed).map_err(Clone::clone))
            .collect();
        let mut results = vec![Err(ProblemError::MissingProblem); 7];
        borrowed.solve_borrowed(&refs, false, &mut results).await;
        assert_eq!(results, expected);
        assert_eq!(counted(&borrowed_counts), counted(&owned_counts));
        assert!(counted(&owned_counts).iter().any(|&(game, _, _)| game == "stone_game_iv"));
    }
}

//! The `GameSolverService` gRPC service: a thin adapter over the solver core.
//!
//! Small problems are solved inline on the async worker (cheaper than a hop to another
//! thread); anything whose input exceeds [`SolverConfig::inline_work`] goes to the rayon
//! pool, and batches are split across it. Stone Game IV piles beyond the table's range
//! first grow the table on the blocking pool, once per batch.
//!
//! A stream reads its next request only while its decoded problems in flight hold less
//! than [`SolverConfig::stream_in_flight_bytes`] (and fewer than its window), so a client
//! that sends faster than the server solves is held back by HTTP/2 flow control instead
//! of filling memory. The budget is per stream, so a client that stops reading its
//! answers stalls only itself.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use rayon::prelude::*;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::{Request, Response, Status, Streaming};

use crate::convert::{self, ProblemError};
use crate::games::{Game, GameKind, Outcome, Tables};
use crate::pb;
use crate::pool::{self, PoolError};
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
    #[arg(long, default_value_t = SolverConfig::default().stream_idle_timeout)]
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

/// A stream's budget counts memory in these units, so that a `u32` of permits spans
/// terabytes.
const BUDGET_UNIT: usize = 1024;

/// Smallest number of problems that one rayon task of a batch takes.
const MIN_PROBLEMS_PER_TASK: usize = 256;

/// What the service reports of its work. The server's metrics implement it; the
/// service knows nothing of how it is counted.
pub trait SolveObserver: Send + Sync + std::fmt::Debug + 'static {
    /// Problems answered, as (game label, outcome, count): the outcome is `solved` or the
    /// error's reason. Called once a batch or task with its whole tally, so that a
    /// million small problems a second do not contend on one counter.
    fn problems_answered(&self, counts: &[(&'static str, &'static str, u64)]);

    /// A caller spent `seconds` growing `game`'s table (or waiting for that growth);
    /// `cause` says what asked for it.
    fn table_extended(&self, game: GameKind, cause: &'static str, seconds: f64);
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
        match self.counts.iter_mut().find(|(g, o, _)| *g == game && *o == outcome) {
            Some((_, _, count)) => *count += 1,
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

/// The solver behind the RPCs: the Stone Game IV table plus the fan-out policy.
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

    /// A tally that reports to the observer when dropped; `None` without one.
    fn tally(&self) -> Option<Tally> {
        let observer = Arc::clone(self.observer.as_ref()?);
        Some(Tally { observer, counts: Vec::new() })
    }

    /// Grows each table to the largest pile among `games` that needs it, on the
    /// blocking pool (a table extension can take seconds). Piles beyond a table's limit
    /// get their own error from `solve`.
    async fn prepare<'a>(&self, games: impl Iterator<Item = &'a Game>) -> Result<(), PoolError> {
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
            pool::run_blocking(move || tables.extend(kind, n)).await?;
            if let Some(observer) = &self.observer {
                observer.table_extended(kind, "request", started.elapsed().as_secs_f64());
            }
        }
        Ok(())
    }

    /// Solves one game; with `winner_only`, no winning move is looked for.
    pub async fn solve(&self, game: Game, winner_only: bool) -> Result<Outcome, ProblemError> {
        self.prepare(std::iter::once(&game)).await?;
        if game.work() <= self.config.inline_work {
            return solve_guarded(&game, &self.tables, winner_only);
        }
        let tables = Arc::clone(&self.tables);
        pool::run(move |_| solve_guarded(&game, &tables, winner_only)).await?
    }

    /// Solves one wire problem (which may be unset) into its wire solution; errors go
    /// into the solution.
    pub async fn solve_problem(&self, problem: Option<pb::Problem>, winner_only: bool) -> pb::Solution {
        let (id, result) = self.solve_required(problem, winner_only).await;
        convert::solution(id, result)
    }

    /// Solves one wire problem (which may be unset), counting it; returns its id.
    async fn solve_required(
        &self,
        problem: Option<pb::Problem>,
        winner_only: bool,
    ) -> (String, Result<Outcome, ProblemError>) {
        let label = convert::game_label(problem.as_ref());
        let (id, game) = convert::required_problem(problem);
        let result = match game {
            Ok(game) => self.solve(game, winner_only).await,
            Err(err) => Err(err),
        };
        if let Some(mut tally) = self.tally() {
            tally.record(label, &result);
        }
        (id, result)
    }

    /// Solves a batch, one solution per problem in the same order.
    pub async fn solve_batch(
        &self,
        problems: Vec<pb::Problem>,
        winner_only: bool,
    ) -> Result<Vec<pb::Solution>, PoolError> {
        let mut problems: Vec<_> = problems
            .into_iter()
            .map(|problem| (convert::game_label(Some(&problem)), convert::problem(problem)))
            .collect();
        if let Err(err) = self.prepare(games(&problems)).await {
            // A table could not grow: only the problems that needed it fail.
            for (_, (_, game)) in &mut problems {
                if game.as_ref().is_ok_and(|game| self.tables.needs_extension(game).is_some()) {
                    *game = Err(err.clone().into());
                }
            }
        }

        self.tables.iv.preload_moves(games(&problems).filter_map(|game| match game {
            Game::StoneGameIv(n) => Some(*n),
            _ => None,
        }));
        let work: usize = problems.iter().map(|(_, (_, game))| game.as_ref().map_or(1, Game::work)).sum();
        // Each problem is counted in a tally of its task, added to the metrics at its end.
        let tally = {
            let observer = self.observer.clone();
            move || observer.clone().map(|observer| Tally { observer, counts: Vec::new() })
        };
        let solve_one = move |table: &Tables, tally: &mut Option<Tally>, (label, (id, game)): Converted| {
            let result = game.and_then(|game| solve_guarded(&game, table, winner_only));
            if let Some(tally) = tally {
                tally.record(label, &result);
            }
            convert::solution(id, result)
        };
        if work <= self.config.inline_work {
            let mut tally = tally();
            return Ok(problems.into_iter().map(|p| solve_one(&self.tables, &mut tally, p)).collect());
        }
        let table = Arc::clone(&self.tables);
        pool::run(move |caller| {
            problems
                .into_par_iter()
                .with_min_len(MIN_PROBLEMS_PER_TASK)
                .map_init(tally, |tally, (label, (id, game))| match caller.is_gone() {
                    // Nobody will read the rest: answer it cheaply and let the job end.
                    true => convert::solution(id, Err(PoolError::Gone.into())),
                    false => solve_one(&table, tally, (label, (id, game))),
                })
                .collect()
        })
        .await
    }
}

/// A batch's problem as the solver takes it: its metrics label, its id and its game.
type Converted = (&'static str, (String, Result<Game, ProblemError>));

/// The games of a batch's converted problems that converted.
fn games(problems: &[Converted]) -> impl Iterator<Item = &Game> + '_ {
    problems.iter().filter_map(|(_, (_, game))| game.as_ref().ok())
}

/// Solves `game`, turning a panic into an error for this problem alone.
/// With `winner_only`, no move is looked for ([`Game::winner`]).
fn solve_guarded(game: &Game, tables: &Tables, winner_only: bool) -> Result<Outcome, ProblemError> {
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

/// The tonic service; cheap to clone.
#[derive(Debug, Clone)]
pub struct GameSolverService {
    solver: Arc<Solver>,
}

impl GameSolverService {
    /// A service over `solver`.
    pub fn new(solver: Arc<Solver>) -> Self {
        GameSolverService { solver }
    }
}

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

fn pool_status(err: PoolError) -> Status {
    ProblemError::from(err).into()
}

#[tonic::async_trait]
impl pb::game_solver_service_server::GameSolverService for GameSolverService {
    async fn solve(&self, request: Request<pb::SolveRequest>) -> Result<Response<pb::SolveResponse>, Status> {
        let pb::SolveRequest { problem, winner_only } = request.into_inner();
        let (id, result) = self.solver.solve_required(problem, winner_only).await;
        let outcome = result.inspect_err(|err| tracing::debug!(%id, %err, "Solve failed"))?;
        Ok(Response::new(pb::SolveResponse { solution: Some(convert::solution(id, Ok(outcome))) }))
    }

    async fn solve_batch(
        &self,
        request: Request<pb::SolveBatchRequest>,
    ) -> Result<Response<pb::SolveBatchResponse>, Status> {
        let pb::SolveBatchRequest { problems, winner_only } = request.into_inner();
        tracing::debug!(problems = problems.len(), "SolveBatch");
        let solutions = self.solver.solve_batch(problems, winner_only).await.map_err(pool_status)?;
        Ok(Response::new(pb::SolveBatchResponse { solutions }))
    }

    type SolveStreamStream = ResponseStream<pb::SolveStreamResponse>;

    async fn solve_stream(
        &self,
        request: Request<Streaming<pb::SolveStreamRequest>>,
    ) -> Result<Response<Self::SolveStreamStream>, Status> {
        tracing::debug!(remote = ?request.remote_addr(), "SolveStream opened");
        let solver = Arc::clone(&self.solver);
        let budget = StreamBudget::new(solver.config.stream_window, solver.config.stream_in_flight_bytes);
        let requests = request.into_inner();
        let request_bytes =
            |request: &pb::SolveStreamRequest| request.problem.as_ref().map_or(0, convert::problem_bytes);
        let idle = solver.config.stream_idle_timeout.0;
        Ok(Response::new(solve_in_order(requests, budget, idle, request_bytes, move |request| {
            let solver = Arc::clone(&solver);
            async move {
                let solution = solver.solve_problem(request.problem, request.winner_only).await;
                Ok(pb::SolveStreamResponse { solution: Some(solution) })
            }
        })))
    }

    type SolveBatchStreamStream = ResponseStream<pb::SolveBatchStreamResponse>;

    async fn solve_batch_stream(
        &self,
        request: Request<Streaming<pb::SolveBatchStreamRequest>>,
    ) -> Result<Response<Self::SolveBatchStreamStream>, Status> {
        tracing::debug!(remote = ?request.remote_addr(), "SolveBatchStream opened");
        let solver = Arc::clone(&self.solver);
        let budget = StreamBudget::new(solver.config.batch_window, solver.config.stream_in_flight_bytes);
        let requests = request.into_inner();
        let batch_bytes =
            |batch: &pb::SolveBatchStreamRequest| batch.problems.iter().map(convert::problem_bytes).sum();
        let idle = solver.config.stream_idle_timeout.0;
        Ok(Response::new(solve_in_order(requests, budget, idle, batch_bytes, move |batch| {
            let solver = Arc::clone(&solver);
            async move {
                let solutions =
                    solver.solve_batch(batch.problems, batch.winner_only).await.map_err(pool_status)?;
                Ok(pb::SolveBatchStreamResponse { solutions })
            }
        })))
    }
}

/// How far one streaming call may read ahead of the answer its client waits for.
#[derive(Debug)]
struct StreamBudget {
    /// Requests in flight at most.
    window: usize,
    /// Units of [`BUDGET_UNIT`] bytes of decoded requests in flight.
    bytes: Arc<Semaphore>,
    units: u32,
}

impl StreamBudget {
    fn new(window: usize, bytes: usize) -> Self {
        let units = u32::try_from((bytes / BUDGET_UNIT).clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
        StreamBudget { window: window.max(1), bytes: Arc::new(Semaphore::new(units as usize)), units }
    }

    /// Waits until `bytes` more may be in flight; a request larger than the whole budget
    /// waits for all of it. The permit gives them back when dropped.
    async fn admit(bytes: Arc<Semaphore>, units: u32, size: usize) -> Option<OwnedSemaphorePermit> {
        let wanted = u32::try_from(size / BUDGET_UNIT + 1).unwrap_or(u32::MAX).min(units);
        // The semaphore belongs to this stream and is never closed.
        bytes.acquire_many_owned(wanted).await.ok()
    }
}

/// Answers each request of a stream with `solve`, in request order; the stream ends after
/// the first error (the client's transport failing, or a failed answer), which becomes
/// the call's status.
///
/// Reading and solving are bounded apart. The next request is read as long as the
/// decoded requests in flight stay within the `budget`'s bytes (each counts at least one
/// [`BUDGET_UNIT`]), so HTTP/2 flow control reaches the client only when that much is
/// waiting; at most the budget's `window` of them are solved at once. Reading ahead of the
/// solving matters: h2 closes a connection whose peer keeps many small DATA frames unread
/// (`ENHANCE_YOUR_CALM`, "too_many_data_frames": a budget of half the connection window
/// at 256 bytes a frame), which a grpc-go client streaming 25-byte problems reached with
/// only 64 read ahead.
///
/// A stream with nothing in flight that sends nothing for `idle_timeout` ends with
/// [`stream_idle_status`].
fn solve_in_order<Req, Resp, Fut>(
    requests: impl Stream<Item = Result<Req, Status>> + Send + 'static,
    budget: StreamBudget,
    idle_timeout: Option<Duration>,
    weigh: impl Fn(&Req) -> usize + Send + 'static,
    mut solve: impl FnMut(Req) -> Fut + Send + 'static,
) -> ResponseStream<Resp>
where
    Req: Send + 'static,
    Resp: Send + 'static,
    Fut: Future<Output = Result<Resp, Status>> + Send + 'static,
{
    let StreamBudget { window, bytes, units } = budget;
    let solving = Arc::new(Semaphore::new(window));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let answered = Arc::clone(&in_flight);
    let requests = IdleTimeout { requests: Box::pin(requests), timeout: idle_timeout, in_flight, idle: None };
    let answers = requests
        .then(move |request| {
            let size = request.as_ref().map_or(0, &weigh);
            let admitted = StreamBudget::admit(Arc::clone(&bytes), units, size);
            async move { (request, admitted.await) }
        })
        .map(move |(request, admitted)| {
            let answer = request.map_err(convert::over_limit_is_exhausted).map(&mut solve);
            let solving = Arc::clone(&solving);
            async move {
                let _admitted = admitted;
                let answer = answer?;
                // The semaphore belongs to this stream and is never closed.
                let _solving = solving.acquire_owned().await;
                answer.await
            }
        })
        // Every request in flight holds at least one unit, so `units` bounds this too.
        .buffered(units as usize)
        .inspect(move |_| {
            answered.fetch_sub(1, Ordering::SeqCst);
        });
    Box::pin(stop_after_error(answers))
}

/// The status of a call that the stream idle timeout ends.
pub(crate) fn stream_idle_status(timeout: Duration) -> Status {
    Status::deadline_exceeded(format!(
        "stream idle: the client sent nothing for {timeout:?} while the server had nothing left to answer"
    ))
}

/// A stream of requests that fails with [`stream_idle_status`] when none comes for
/// `timeout` while `in_flight` (requests read, not yet answered) is zero.
struct IdleTimeout<S> {
    requests: Pin<Box<S>>,
    timeout: Option<Duration>,
    in_flight: Arc<AtomicUsize>,
    /// Armed when the stream went idle.
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S: Stream<Item = Result<T, Status>>, T> Stream for IdleTimeout<S> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Poll::Ready(item) = this.requests.as_mut().poll_next(cx) {
            this.idle = None;
            if item.is_some() {
                this.in_flight.fetch_add(1, Ordering::SeqCst);
            }
            return Poll::Ready(item);
        }
        let Some(timeout) = this.timeout else { return Poll::Pending };
        if this.in_flight.load(Ordering::SeqCst) > 0 {
            this.idle = None;
            return Poll::Pending;
        }
        let idle = this.idle.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match idle.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.timeout = None;
                this.in_flight.fetch_add(1, Ordering::SeqCst);
                Poll::Ready(Some(Err(stream_idle_status(timeout))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Ends a response stream after its first error, which becomes the call's status.
fn stop_after_error<T>(
    items: impl Stream<Item = Result<T, Status>>,
) -> impl Stream<Item = Result<T, Status>> {
    items.scan(false, |failed, item| {
        let next = (!*failed).then(|| {
            *failed = item.is_err();
            item
        });
        futures::future::ready(next)
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// Pulls through `solve_in_order` with answers that never come, and counts how many
    /// requests it read from the client and how many it started solving.
    async fn requests_read_and_started(budget: StreamBudget, weight: usize) -> (usize, usize) {
        let (read, started) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let counter = Arc::clone(&read);
        let requests = futures::stream::iter(0..1000).map(move |i| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok::<_, Status>(i)
        });
        let counter = Arc::clone(&started);
        let never = move |_| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                futures::future::pending::<Result<u32, Status>>().await
            }
        };
        let mut answers = solve_in_order(requests, budget, None, move |_| weight, never);
        let _ = tokio::time::timeout(Duration::from_millis(50), answers.next()).await;
        (read.load(Ordering::SeqCst), started.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_stream_reads_ahead_only_as_far_as_its_byte_budget() {
        // Each request takes 3 units of 10: three are admitted, the fourth is read and waits.
        let budget = StreamBudget::new(64, 10 * BUDGET_UNIT);
        assert_eq!(requests_read_and_started(budget, 2 * BUDGET_UNIT).await, (4, 3));
    }

    #[tokio::test]
    async fn a_stream_reads_past_its_window_but_solves_only_that_many_at_once() {
        // 100 units, one a request: 100 read and admitted, 5 solving.
        let budget = StreamBudget::new(5, 100 * BUDGET_UNIT);
        assert_eq!(requests_read_and_started(budget, 1).await, (100, 5));
    }
}

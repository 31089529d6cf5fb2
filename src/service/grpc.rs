//! The `GameSolverService` gRPC door: protobuf in, [`Solver`] in the middle, protobuf out.
//!
//! It owns only its encoding: each problem is converted ([`convert`]), the fan-out solves
//! it, and each outcome becomes a `Solution`; the streaming RPCs read and answer through
//! `super::stream`.

use std::sync::Arc;

use tonic::{Request, Response, Status, Streaming};

use super::stream::{solve_in_order, ResponseStream, StreamBudget};
use crate::convert;
use crate::pb;
use crate::pool::PoolError;
use crate::problem::ProblemError;
use crate::solver::Solver;

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

fn pool_status(err: PoolError) -> Status {
    ProblemError::from(err).into()
}

/// Solves one wire problem (which may be unset); returns its id and its result.
async fn solve_problem(
    solver: &Solver,
    problem: Option<pb::Problem>,
    winner_only: bool,
) -> (String, Result<crate::games::Outcome, ProblemError>) {
    let (id, problem) = convert::required_problem(problem);
    (id, solver.solve_one(problem, winner_only).await)
}

/// Solves a batch of wire problems into wire solutions, in order: `SolveBatch` without
/// the transport (the benches and a test's stand-in servers call it).
pub async fn solve_batch(
    solver: &Solver,
    problems: Vec<pb::Problem>,
    winner_only: bool,
) -> Result<Vec<pb::Solution>, PoolError> {
    let problems = problems.into_iter().map(convert::problem).collect();
    solver.solve_batch(problems, winner_only, convert::solution).await
}

#[tonic::async_trait]
impl pb::game_solver_service_server::GameSolverService for GameSolverService {
    async fn solve(&self, request: Request<pb::SolveRequest>) -> Result<Response<pb::SolveResponse>, Status> {
        let pb::SolveRequest { problem, winner_only } = request.into_inner();
        tracing::Span::current().record("problems", 1);
        let (id, result) = solve_problem(&self.solver, problem, winner_only).await;
        let outcome = result.inspect_err(|err| tracing::debug!(%id, %err, "Solve failed"))?;
        Ok(Response::new(pb::SolveResponse { solution: Some(convert::solution(id, Ok(outcome))) }))
    }

    async fn solve_batch(
        &self,
        request: Request<pb::SolveBatchRequest>,
    ) -> Result<Response<pb::SolveBatchResponse>, Status> {
        let pb::SolveBatchRequest { problems, winner_only } = request.into_inner();
        tracing::debug!(problems = problems.len(), "SolveBatch");
        tracing::Span::current().record("problems", problems.len() as i64);
        let solutions = solve_batch(&self.solver, problems, winner_only).await.map_err(pool_status)?;
        Ok(Response::new(pb::SolveBatchResponse { solutions }))
    }

    type SolveStreamStream = ResponseStream<pb::SolveStreamResponse>;

    async fn solve_stream(
        &self,
        request: Request<Streaming<pb::SolveStreamRequest>>,
    ) -> Result<Response<Self::SolveStreamStream>, Status> {
        tracing::debug!(remote = ?request.remote_addr(), "SolveStream opened");
        let solver = Arc::clone(&self.solver);
        let config = solver.config();
        let budget = StreamBudget::new(config.stream_window, config.stream_in_flight_bytes);
        let idle = config.stream_idle_timeout.0;
        let requests = request.into_inner();
        let request_bytes =
            |request: &pb::SolveStreamRequest| request.problem.as_ref().map_or(0, convert::problem_bytes);
        Ok(Response::new(solve_in_order(requests, budget, idle, request_bytes, move |request| {
            let solver = Arc::clone(&solver);
            async move {
                let (id, result) = solve_problem(&solver, request.problem, request.winner_only).await;
                Ok(pb::SolveStreamResponse { solution: Some(convert::solution(id, result)) })
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
        let config = solver.config();
        let budget = StreamBudget::new(config.batch_window, config.stream_in_flight_bytes);
        let idle = config.stream_idle_timeout.0;
        let requests = request.into_inner();
        let batch_bytes =
            |batch: &pb::SolveBatchStreamRequest| batch.problems.iter().map(convert::problem_bytes).sum();
        Ok(Response::new(solve_in_order(requests, budget, idle, batch_bytes, move |batch| {
            let solver = Arc::clone(&solver);
            async move {
                let solutions =
                    solve_batch(&solver, batch.problems, batch.winner_only).await.map_err(pool_status)?;
                Ok(pb::SolveBatchStreamResponse { solutions })
            }
        })))
    }
}

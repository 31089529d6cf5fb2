//! The gRPC path end to end over loopback: an empty RPC (health check) against `Solve`
//! on small problems, and the batch paths, all against an in-process server.
//!
//! `cargo bench --bench grpc`. The ratio Solve / health is what the solver adds to the
//! cost of gRPC itself.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::StreamExt;
use gamesolver::pb::{self, game_solver_service_client::GameSolverServiceClient, problem::Game as G};
use gamesolver::server::{self, ServerConfig};
use tonic::transport::Channel;
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

fn problems(count: usize) -> Vec<pb::Problem> {
    (0..count as u64)
        .map(|i| {
            let game = match i % 3 {
                0 => G::SumGame(pb::SumGame { num: format!("{:04}??{:02}", i % 10_000, i % 100) }),
                1 => G::StoneGameIx(pb::StoneGameIx { stones: vec![i, i + 1, i * 7, 3] }),
                _ => G::StoneGameIv(pb::StoneGameIv { n: i % 100_000 }),
            };
            pb::Problem { id: i.to_string(), game: Some(game) }
        })
        .collect()
}

fn grpc(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let channel: Channel = runtime.block_on(async {
        let server = server::Server::bind(ServerConfig::ephemeral()).await.unwrap();
        let url = format!("http://{}", server.local_addr());
        tokio::spawn(server.run(std::future::pending()));
        Channel::from_shared(url).unwrap().connect().await.unwrap()
    });
    let solver = GameSolverServiceClient::new(channel.clone());
    let health = HealthClient::new(channel);
    let one: Vec<_> =
        problems(3).into_iter().map(|p| pb::SolveRequest { problem: Some(p), winner_only: false }).collect();

    let mut group = c.benchmark_group("unary");
    group.bench_function("health_check", |b| {
        b.to_async(&runtime).iter(|| {
            let mut health = health.clone();
            async move { health.check(HealthCheckRequest { service: String::new() }).await.unwrap() }
        })
    });
    for (name, problem) in ["sum_game", "stone_game_ix", "stone_game_iv"].iter().zip(&one) {
        group.bench_function(BenchmarkId::new("solve", name), |b| {
            b.to_async(&runtime).iter(|| {
                let mut solver = solver.clone();
                let problem = problem.clone();
                async move { solver.solve(problem).await.unwrap() }
            })
        });
    }
    group.finish();

    let batch = problems(1000);
    let mut group = c.benchmark_group("bulk");
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.bench_function("solve_batch_1000", |b| {
        b.to_async(&runtime).iter(|| {
            let mut solver = solver.clone();
            let problems = batch.clone();
            async move {
                solver.solve_batch(pb::SolveBatchRequest { problems, winner_only: false }).await.unwrap()
            }
        })
    });
    let batches: Vec<_> = batch
        .chunks(100)
        .map(|c| pb::SolveBatchStreamRequest { problems: c.to_vec(), winner_only: false })
        .collect();
    group.bench_function("solve_batch_stream_10x100", |b| {
        b.to_async(&runtime).iter(|| {
            let mut solver = solver.clone();
            let batches = batches.clone();
            async move {
                let answers = solver.solve_batch_stream(futures::stream::iter(batches)).await.unwrap();
                answers.into_inner().count().await
            }
        })
    });
    let stream_requests: Vec<_> = batch
        .iter()
        .map(|p| pb::SolveStreamRequest { problem: Some(p.clone()), winner_only: false })
        .collect();
    group.bench_function("solve_stream_1000", |b| {
        b.to_async(&runtime).iter(|| {
            let mut solver = solver.clone();
            let requests = stream_requests.clone();
            async move {
                let answers = solver.solve_stream(futures::stream::iter(requests)).await.unwrap();
                answers.into_inner().count().await
            }
        })
    });
    group.finish();
}

criterion_group!(benches, grpc);
criterion_main!(benches);

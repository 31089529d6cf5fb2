//! gamesolver: exact answers to two-player games ([`games::GameKind::ALL`]), in bulk, over
//! gRPC.
//!
//! # Layout
//! Layers point one way: `games` <- `convert` <- `codec` <- `service` <- `server` <- the
//! binaries; `client` sits beside `server` and never imports it (`docs/architecture.md`).
//! - [`games`]: the pure solver core, one module a game, and [`games::GameKind`], what the
//!   rest of the crate asks of a game; no I/O, no async, no protobuf.
//! - [`pb`]: generated protobuf types, gRPC stubs and their JSON mapping.
//! - [`problem`]: a problem as the doors hand it to the solver, and the domain's error with
//!   its one mapping to a code, a reason and a field, which every door uses.
//! - [`convert`]: protobuf ⇄ domain conversions and errors as `Status` and `SolutionError`.
//! - [`columnar`]: the columnar contract (Arrow ⇄ domain): the columns, types and Flight
//!   descriptors that the Flight door and the bulk client's Parquet path agree on.
//! - [`codec`]: the gRPC codec: prost, with a one-pass decoder for batches of problems
//!   and solutions that gives way to prost for anything unusual, and encoders that write
//!   prost's bytes.
//! - [`solver`]: the domain fan-out every door calls: grows tables, solves inline or on
//!   the CPU pool, guards against panics, counts problems by game.
//! - [`service`]: the doors, thin adapters over the fan-out: the `GameSolverService` gRPC
//!   service, the Connect protocol's HTTP/JSON calls translated to it, and the stream
//!   plumbing the streaming doors share.
//! - `pool`: runs CPU-heavy work on rayon without blocking the async runtime.
//! - [`tables`]: every table game's table on disk: one frame, verified load, atomic save
//!   (no link followed, exclusive temporaries), and the store that binds a file to its
//!   table; each game's codec is in its own folder ([`games::table::TableCodec`]).
//! - [`seconds`]: durations as flags give them; [`flag_env`]: flags read from the
//!   environment too, for both binaries.
//! - [`server`]: [`server::Server`] (`bind`, then `run`): the whole server: accept loop
//!   and per-client connection bounds, TLS, call limits and the request budget, metrics, traces,
//!   health, reflection, the status codes other gRPC stacks send, and the tables'
//!   lifecycle; [`server::config`] holds every flag.
//! - [`client`]: the bulk client: reading problem files, the streaming pipeline, output.
//! - [`allocator`]: mimalloc's settings, shared by the two binaries.
//! - `echo`: input values quoted back in error messages, cut to a bounded length.
//! - `src/bin/`: thin binaries that parse flags and call into the above.
#![warn(missing_docs)]

pub mod allocator;
pub mod client;
pub mod codec;
pub mod columnar;
pub mod convert;
mod echo;
pub mod flag_env;
pub mod games;
mod json_number;
mod log_limiter;
pub mod pb;
pub(crate) mod pool;
pub mod problem;
pub mod seconds;
pub mod server;
pub mod service;
pub mod solver;
pub mod tables;

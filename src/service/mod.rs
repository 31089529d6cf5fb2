//! The doors: thin adapters that decode a wire format into domain problems, call the one
//! fan-out ([`crate::solver::Solver`]) and encode its outcomes.
//!
//! - [`grpc`]: the `GameSolverService` protobuf RPCs (gRPC-Web reaches it through a layer
//!   of the server's).
//! - [`connect`]: the Connect protocol's unary calls (HTTP/JSON, for curl), translated to
//!   and from the gRPC calls they stand for, so that they reach [`grpc`] through the same
//!   layers.
//! - [`flight`]: Arrow Flight's `DoExchange`, tables of problems in and of solutions out,
//!   in the columns of [`crate::columnar`].
//! - `memory`: the caller's share of the request memory, which a door charges what it
//!   decodes and holds.
//! - `stream`: what every streaming door shares: answers in request order, a bounded
//!   read-ahead, the idle timeout.
//!
//! A door owns its encoding and nothing else: the limits, metrics and traces are the
//! server's layers around every door, and the solving is the fan-out's.

pub mod connect;
pub mod flight;
pub mod grpc;
pub(crate) mod memory;
pub(crate) mod stream;

pub use flight::{FlightServer, FlightSolverService};
pub use grpc::GameSolverService;
pub(crate) use stream::stream_idle_status;

//! The bulk client: problem files of any size through `SolveBatchStream`, in order, with
//! nothing lost.
//!
//! A run is a pipeline of bounded stages: [`input`] reads lines (plain, gzip or zstd);
//! [`batch`] parses them ([`problem_json`]: the protobuf JSON mapping generated from the
//! schema) and encodes them on the reading thread; [`queue`] hands the batches to one
//! [`connection`] per server; [`output`] puts the answers back in input order on the
//! writing thread. [`budget`] bounds the bytes between reading and writing, so memory
//! stays flat whatever the input size; [`resume`] continues a cut-off output; [`gen`]
//! writes the random datasets that tests and benchmarks feed it.

pub mod batch;
pub mod budget;
pub mod connection;
pub mod gen;
pub mod input;
pub mod output;
pub mod pipeline;
pub mod problem_json;
pub mod progress;
pub mod queue;
pub mod resume;

pub use pipeline::{solve, solve_until, ClientError, SolveConfig};
pub use progress::Summary;

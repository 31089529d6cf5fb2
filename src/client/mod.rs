//! The bulk client: problem files of any size through `SolveBatchStream`, in order, with
//! nothing lost.
//!
//! A run is a pipeline of bounded stages: `input` reads lines (plain, gzip or zstd);
//! `batch` parses them (`problem_json`: the protobuf JSON mapping generated from the
//! schema, with a one-pass number reader) and
//! encodes them on the reading thread; `queue` hands the batches to one `connection` per
//! server; `output` puts the answers back in input order on the writing thread. `budget`
//! bounds the bytes between reading and writing, so memory stays flat whatever the input
//! size; `resume` proves that a cut-off output is this input's and continues it; `pipeline`
//! starts, runs and stops the whole; [`gen`] writes the random datasets that tests and
//! benchmarks feed it.

pub(crate) mod batch;
pub(crate) mod budget;
pub(crate) mod connection;
pub mod gen;
pub(crate) mod input;
pub(crate) mod output;
pub(crate) mod pipeline;
pub(crate) mod problem_json;
pub(crate) mod progress;
pub(crate) mod queue;
pub(crate) mod resume;

pub use batch::{BatchBuilder, InputMark, LineError};
pub use connection::{ConnectionError, TlsFiles};
pub use input::{InputError, InputSource};
pub use output::OutputError;
pub use pipeline::{solve, solve_until, ClientError, SolveConfig};
pub use problem_json::parse_problem;
pub use progress::Summary;
pub use resume::ResumeError;

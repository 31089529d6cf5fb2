//! The bulk client: problem files of any size through `SolveBatchStream`, in order, with
//! nothing lost.
//!
//! A run is a pipeline of bounded stages: `input` reads lines (plain, gzip or zstd);
//! `problem_json` parses each into a `Problem` (or says why it is not one); `batch`
//! encodes them on the reading thread; `queue` hands the batches to one `connection` per
//! server; `output` puts the answers back in input order on the writing thread. `budget`
//! bounds the bytes between reading and writing, so memory stays flat whatever the input
//! size; `fingerprint` and `resume` prove that a cut-off output is this input's and
//! continue it; `pipeline` starts, runs and stops the whole; [`gen`] writes the random
//! datasets that tests and benchmarks feed it.
//!
//! The library does not contain a server: a run given no server address starts one
//! through the [`EmbeddedStarter`] its caller hands it, so that a program linking the
//! client does not link the server.

pub(crate) mod batch;
pub(crate) mod budget;
pub(crate) mod connection;
pub(crate) mod embedded;
pub(crate) mod fingerprint;
pub mod gen;
pub(crate) mod input;
pub(crate) mod output;
pub(crate) mod pipeline;
pub(crate) mod problem_json;
pub(crate) mod progress;
pub(crate) mod queue;
pub(crate) mod resume;
pub(crate) mod tls_failure;

pub use batch::{BatchBuilder, InputMark};
pub use connection::{ConnectionError, TlsFiles};
pub use embedded::{BoxError, EmbeddedServer, EmbeddedStarter};
pub use input::{InputError, InputSource};
pub use output::OutputError;
pub use pipeline::{solve, solve_until, ClientError, SolveConfig};
pub use problem_json::{parse_problem, LineError};
pub use progress::Summary;
pub use resume::ResumeError;

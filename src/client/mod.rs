//! The bulk client: problem files of any size through the servers, in order, with
//! nothing lost.
//!
//! A run is a pipeline of bounded stages: `input` reads lines (plain, gzip or zstd);
//! `problem_json` parses each into a `Problem` (or says why it is not one); `batch`
//! encodes them on the reading thread; `queue` hands the batches to one `connection` per
//! server, which checks each answer against its batch (`answer_check` for protobuf, the
//! Flight door's own check for tables); `sink` puts the answers back in input order on
//! the writing thread and writes them (`output` as JSON lines). A table (Parquet, Arrow
//! IPC, CSV: `table`, formats in [`format`](mod@format)) goes the same way as record
//! batches, through the Flight door (`flight`), and any input can be written in any
//! format. `budget` bounds the bytes between reading and writing, so memory stays flat
//! whatever the input size; `fingerprint` and `resume` (with `table::resume`) prove that
//! a cut-off output is this input's and continue it; `plan` opens what a run reads and
//! writes, `pipeline` starts, runs and stops the whole; [`gen`] writes the random
//! datasets that tests and benchmarks feed it.
//!
//! The library does not contain a server: a run given no server address starts one
//! through the [`EmbeddedStarter`] its caller hands it, so that a program linking the
//! client does not link the server.

/// Prefix of the environment variables that the client's flags can come from:
/// `GAMESOLVER_CLIENT_RETRY_FOR` for `--retry-for`.
pub const ENV_PREFIX: &str = "GAMESOLVER_CLIENT_";

pub(crate) mod answer_check;
pub(crate) mod batch;
pub(crate) mod budget;
pub(crate) mod config;
pub(crate) mod connection;
mod decompress;
pub(crate) mod embedded;
pub(crate) mod error;
pub(crate) mod fingerprint;
pub(crate) mod flight;
pub mod format;
pub mod gen;
pub(crate) mod input;
pub(crate) mod output;
pub mod parts;
pub(crate) mod pipeline;
pub(crate) mod plan;
pub(crate) mod problem_json;
pub(crate) mod progress;
pub(crate) mod queue;
pub(crate) mod resume;
pub(crate) mod sink;
pub(crate) mod sniff;
pub(crate) mod table;
pub(crate) mod tls_failure;

pub use answer_check::WrongAnswer;
pub use batch::{BatchBuilder, InputMark};
pub use config::{Compression, SolveConfig};
pub use connection::{ConnectionError, TlsFiles};
pub use embedded::{BoxError, EmbeddedServer, EmbeddedStarter, Exchange, Growing, Growth, Pipe};
pub use error::ClientError;
pub use input::{InputError, InputSource};
pub use output::OutputError;
pub use pipeline::{solve, solve_until};
pub use plan::read_table_problems;
pub use problem_json::{parse_problem, LineError};
pub use progress::{MaxErrors, Summary};
pub use resume::ResumeError;
pub use sniff::SniffError;
pub use table::columns::{ColumnMap, ColumnsError, Rename};
pub use table::keep::{Keep, KeepError};
pub use table::write::parquet_properties;

//! [`ClientError`]: why a `solve` run stopped before its output was complete.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use arrow_schema::ArrowError;

use crate::client::connection::ConnectionError;
use crate::client::embedded::BoxError;
use crate::client::format::Format;
use crate::client::input::InputError;
use crate::client::output::OutputError;
use crate::client::parts::PartsError;
use crate::client::resume::ResumeError;
use crate::client::sniff::SniffError;
use crate::client::table::columns::ColumnsError;
use crate::client::table::keep::KeepError;

/// Why a run stopped before the output was complete.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The input could not be read.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The output could not be written, or a server answered nonsense.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The reader of the output went away (`| head`): as Unix filters do, the binary
    /// then exits quietly.
    #[error("the output was closed before the run ended")]
    OutputClosed,
    /// The output file could not be opened.
    #[error("cannot open output {path}")]
    OpenOutput {
        /// The path given.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The output cannot be resumed, or its sidecar cannot be written.
    #[error(transparent)]
    Resume(#[from] ResumeError),
    /// `--resume` needs an output file to resume from.
    #[error("--resume needs an output file (-o FILE)")]
    ResumeNeedsOutput,
    /// `--resume` was given an output that is not a regular file (a device, a pipe).
    #[error("--resume needs a regular output file; {path} is not one")]
    ResumeNeedsRegularFile {
        /// The output given.
        path: PathBuf,
    },
    /// TLS files were given, but no server would use them.
    #[error("--ca-cert, --client-cert and --client-key apply to https:// servers, and none is given")]
    TlsWithoutHttps,
    /// Every server failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// None of several servers was ever reached, each for its reason.
    #[error("cannot reach any server within {deadline:.1?} (--connect-deadline): {}", unreached_list(.servers))]
    NoServerReached {
        /// How long they were tried.
        deadline: Duration,
        /// Each server's URL and why it was not reached, in the order given.
        servers: Vec<(String, String)>,
    },
    /// The embedded server could not start or failed.
    #[error("embedded server: {0}")]
    EmbeddedServer(BoxError),
    /// No server address was given, and the caller supplied no embedded server.
    #[error("no server to send the problems to (give --server URL)")]
    NoServer,
    /// The table's columns cannot be read as problems.
    #[error(transparent)]
    Columns(#[from] ColumnsError),
    /// The inputs of a run over several cannot be read or written as parts.
    #[error(transparent)]
    Parts(#[from] PartsError),
    /// Stdin's format cannot be told from its first bytes.
    #[error(transparent)]
    Sniff(#[from] SniffError),
    /// `--keep` names columns that cannot be kept.
    #[error(transparent)]
    Keep(#[from] KeepError),
    /// A binary output (Parquet, Arrow) would go to a terminal.
    #[error("refusing to write {0} to a terminal: give -o FILE, or --output-format jsonl or csv")]
    BinaryToTerminal(Format),
    /// The output file is the input file: writing would destroy the input.
    #[error("the output {0} is the input file")]
    OutputIsInput(PathBuf),
    /// Stopped on request; the output holds a prefix of the answers.
    #[error("interrupted; the output holds the answers written so far: rerun with --resume to continue")]
    Interrupted,
    /// The run was abandoned part-way (a thread stopped).
    #[error("run abandoned: {0}")]
    Aborted(String),
}

/// `URL: reason; URL: reason`.
fn unreached_list(servers: &[(String, String)]) -> String {
    let each: Vec<String> = servers.iter().map(|(url, reason)| format!("{url}: {reason}")).collect();
    each.join("; ")
}

impl ClientError {
    /// An output error, with a closed pipe told apart.
    pub(crate) fn writing(err: OutputError) -> Self {
        let closed = std::iter::successors(Some(&err as &dyn std::error::Error), |err| err.source()).any(
            |err| err.downcast_ref::<io::Error>().is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe),
        ) || matches!(&err, OutputError::Table(ArrowError::IoError(_, io)) if io.kind() == io::ErrorKind::BrokenPipe);
        match closed {
            true => ClientError::OutputClosed,
            false => ClientError::Output(err),
        }
    }

    /// An error of a table writer.
    pub(crate) fn table_output(err: ArrowError) -> Self {
        ClientError::writing(OutputError::Table(err))
    }

    /// An error of a table reader outside of a read (its schema).
    pub(crate) fn table_input(err: ArrowError) -> Self {
        ClientError::Aborted(format!("reading the table: {err}"))
    }
}

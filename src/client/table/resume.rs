//! Continuing a cut-off output of a run that reads or writes a table, once it is proven
//! to be this input's.
//!
//! The proof is the same as for JSON lines (the sidecar `OUTPUT.resume`, holding the
//! options that shape the output and the fingerprint of the input rows answered), and a
//! checkpoint is saved only once the rows it counts can be got back: a text output's are
//! on disk up to a byte, an Arrow IPC output's are record batches that read back, a
//! Parquet output's are whole row groups, read back through the footer the sidecar saves
//! with them ([`Recovery`]). Only checkpointed rows are kept; the rest are solved again.
//!
//! A text output is cut at its checkpoint's byte and appended to. A Parquet or Arrow IPC
//! output cannot be appended to, so a resumed run copies the rows it gets back into a new
//! file beside it (`OUTPUT.partial`), goes on there, and renames it over the output at the
//! end; the sidecar names the file that holds the rows, and switches to the new one only
//! once the new one holds as many, so that a run killed while copying leaves the old
//! file as the one to resume from.

use std::fs::OpenOptions;
use std::io::{BufWriter, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use arrow_schema::{ArrowError, SchemaRef};
use serde::{Deserialize, Serialize};

use super::columns::ColumnMap;
use super::copy::CopyPlan;
use super::keep::Keep;
use super::write::{read_back, Recovery, TableWriter};
use crate::client::fingerprint::Checkpoint;
use crate::client::format::Format;
use crate::client::resume::{
    formats_of as any_formats_of, sidecar_format, sidecar_text, ResumeError, Sidecar,
};

/// Names this sidecar format; a file with another is not a table run's.
const FORMAT: &str = "gamesolver-client table resume 1";

/// Bytes of output buffered before they are written.
const OUTPUT_BUFFER: usize = 1 << 20;

/// The options that change what a table run's output says; a resumed run must have the
/// same ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TableOptions {
    /// The input's format.
    pub input_format: Format,
    /// The output's format.
    pub output_format: Format,
    /// Answers carry no winning move.
    pub winner_only: bool,
    /// The `--column` renames.
    pub columns: ColumnMap,
    /// Lines of a JSON-lines input longer than this are errors instead of answers (0 for a
    /// table input, whose output it does not change).
    pub max_message_bytes: usize,
    /// Rows of a Parquet output's row groups (0 for other outputs).
    pub row_group_rows: usize,
    /// The input columns kept beside the answers (`--keep`); a sidecar from before the
    /// flag kept none.
    #[serde(default = "keep_none")]
    pub keep: String,
}

fn keep_none() -> String {
    Keep::None.to_string()
}

impl TableOptions {
    fn formats(&self) -> String {
        format!("{} out of {}", self.output_format, self.input_format)
    }
}

/// What the sidecar of a table run holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TableSidecarFile {
    format: String,
    /// The input as it was named, for messages only.
    input: String,
    options: TableOptions,
    /// The file, beside the output, that holds the rows: the output itself, or the copy a
    /// resumed run is writing.
    partial: String,
    /// The input rows (or lines) answered, and their fingerprint.
    checkpoint: Checkpoint,
    /// Of which are errors.
    errors: u64,
    /// How the rows are got back.
    recovery: Recovery,
    /// The run wrote its last row and the output's end.
    complete: bool,
}

/// The sidecar of a table run.
pub type TableSidecar = Sidecar<TableSidecarFile>;

/// What a resumable output holds, as its sidecar says.
#[derive(Debug, Clone)]
pub struct Saved {
    file: TableSidecarFile,
}

impl Saved {
    /// The input rows (or lines) answered, and their fingerprint.
    pub fn checkpoint(&self) -> Checkpoint {
        self.file.checkpoint
    }

    /// The input as it was named.
    pub fn input(&self) -> &str {
        &self.file.input
    }

    /// True when the run that wrote it ended its output.
    pub fn complete(&self) -> bool {
        self.file.complete
    }

    /// Error rows among the answered ones.
    pub fn errors(&self) -> u64 {
        self.file.errors
    }
}

/// The file beside `output` named `name`.
fn beside(output: &Path, name: &str) -> PathBuf {
    output.with_file_name(name)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `OUTPUT.partial`, where a resumed run rewrites a Parquet or Arrow IPC output.
fn partial_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

fn io_error<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ResumeError + 'a {
    move |source| ResumeError::Io { action, path: path.to_owned(), source }
}

/// Reads what `output`'s sidecar proves, for `--resume`: `None` when there is nothing to
/// resume (no output, or an empty one, without a sidecar; or a sidecar whose file is
/// gone). Refuses an output this client did not write, or wrote with other options.
pub fn saved(output: &Path, sidecar: &Path, options: &TableOptions) -> Result<Option<Saved>, ResumeError> {
    let Some(text) = sidecar_text(sidecar)? else {
        return match std::fs::metadata(output) {
            Ok(meta) if meta.len() > 0 => {
                Err(ResumeError::NotOurs { output: output.to_owned(), sidecar: sidecar.to_owned() })
            }
            _ => Ok(None),
        };
    };
    let sidecar = sidecar.to_owned();
    if let Some(format) = sidecar_format(&text).filter(|format| format != FORMAT) {
        return Err(ResumeError::OptionsDiffer {
            output: output.to_owned(),
            was: any_formats_of(&format, &text),
            now: options.formats(),
        });
    }
    let file: TableSidecarFile = serde_json::from_slice(&text)
        .map_err(|err| ResumeError::BadSidecar { sidecar: sidecar.clone(), reason: err.to_string() })?;
    if file.format != FORMAT {
        return Err(ResumeError::BadSidecar { sidecar, reason: format!("format {:?}", file.format) });
    }
    compare(output, &file.options, options)?;
    if !beside(output, &file.partial).exists() {
        return Ok(None);
    }
    Ok(Some(Saved { file }))
}

fn compare(output: &Path, was: &TableOptions, now: &TableOptions) -> Result<(), ResumeError> {
    let differ =
        |was: String, now: String| Err(ResumeError::OptionsDiffer { output: output.to_owned(), was, now });
    if (was.input_format, was.output_format) != (now.input_format, now.output_format) {
        return differ(was.formats(), now.formats());
    }
    let winner_only = |on: bool| if on { "--winner-only" } else { "no --winner-only" }.to_owned();
    if was.winner_only != now.winner_only {
        return differ(winner_only(was.winner_only), winner_only(now.winner_only));
    }
    if was.columns != now.columns {
        let flags = |map: &ColumnMap| match map.flags() {
            flags if flags.is_empty() => "no --column".to_owned(),
            flags => flags,
        };
        return differ(flags(&was.columns), flags(&now.columns));
    }
    if was.row_group_rows != now.row_group_rows {
        let flag = |n: usize| format!("--row-group-rows {n}");
        return differ(flag(was.row_group_rows), flag(now.row_group_rows));
    }
    if was.keep != now.keep {
        let flag = |keep: &str| format!("--keep {keep}");
        return differ(flag(&was.keep), flag(&now.keep));
    }
    if was.max_message_bytes != now.max_message_bytes {
        let flag = |n: usize| format!("--max-message-bytes {n}");
        return differ(flag(was.max_message_bytes), flag(now.max_message_bytes));
    }
    Ok(())
}

/// Why the input rows do not match what the output answers, if they do not: `now` is the
/// fingerprint of the input's first `saved.checkpoint().lines` rows (fewer if it ended).
pub fn check_input(output: &Path, saved: &Saved, now: Checkpoint) -> Result<(), ResumeError> {
    let was = saved.checkpoint();
    if now.lines < was.lines {
        return Err(ResumeError::FewerRows {
            output: output.to_owned(),
            output_rows: was.lines,
            input_rows: now.lines,
        });
    }
    if now != was {
        return Err(ResumeError::RowsDiffer {
            output: output.to_owned(),
            input_was: saved.input().to_owned(),
            rows: was.lines,
        });
    }
    Ok(())
}

/// An output opened for a run: fresh, or holding the rows a resumed run got back.
pub struct OpenedOutput {
    /// Writes the rest.
    pub writer: TableWriter,
    /// Saves the checkpoints.
    pub sidecar: TableSidecar,
    /// The file being written, beside the output (the output itself, or its `.partial`).
    pub target: String,
    /// The file the sidecar named before this run, to remove once it names `target`.
    pub stale: Option<PathBuf>,
    /// Rows already in the output, their errors and their input checkpoint.
    pub resumed: Option<(u64, u64, Checkpoint)>,
    /// Of those, the rows `writer` did not write itself (a text output appended to).
    pub held: u64,
}

impl std::fmt::Debug for OpenedOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenedOutput").field("target", &self.target).finish_non_exhaustive()
    }
}

/// What a table output is written with.
#[derive(Debug, Clone)]
pub struct OutputSpec<'a> {
    /// The output file.
    pub path: &'a Path,
    /// Its sidecar.
    pub sidecar: PathBuf,
    /// The input, as named on the command line.
    pub input: String,
    /// The run's options (the output's format among them).
    pub options: TableOptions,
    /// The output table's columns.
    pub schema: &'a SchemaRef,
    /// The kept columns copied from a Parquet input, if they are.
    pub copy: Option<&'a CopyPlan>,
}

impl OutputSpec<'_> {
    /// The writer of this output to `out`, which holds `start` bytes of a text output.
    fn writer(&self, out: Box<dyn std::io::Write + Send>, start: u64) -> Result<TableWriter, ArrowError> {
        let (format, rows) = (self.options.output_format, self.options.row_group_rows);
        TableWriter::open(self.copy, format, out, self.schema, start, rows)
    }
}

/// Opens the output of a fresh run: the file, truncated, and its sidecar, written before
/// any row. A `.partial` left by an earlier resumed run is removed.
pub fn create(spec: &OutputSpec<'_>) -> Result<OpenedOutput, ResumeError> {
    let output = spec.path;
    if let Some(text) = sidecar_text(&spec.sidecar)? {
        if let Ok(file) = serde_json::from_slice::<TableSidecarFile>(&text) {
            let partial = beside(output, &file.partial);
            if partial == partial_path(output) {
                let _ = std::fs::remove_file(partial);
            }
        }
    }
    let file = std::fs::File::create(output).map_err(io_error("create", output))?;
    let writer = spec.writer(Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, file)), 0).map_err(|err| {
        ResumeError::Io { action: "write", path: output.to_owned(), source: std::io::Error::other(err) }
    })?;
    let file = TableSidecarFile {
        format: FORMAT.to_owned(),
        input: spec.input.clone(),
        options: spec.options.clone(),
        partial: file_name(output),
        checkpoint: Checkpoint::default(),
        errors: 0,
        recovery: match spec.options.output_format {
            Format::Parquet => Recovery::Footer { footer: String::new() },
            Format::Arrow | Format::Arrows => Recovery::Batches,
            Format::Csv | Format::Jsonl => Recovery::Bytes { bytes: 0 },
        },
        complete: false,
    };
    let sidecar = Sidecar::write_new(&spec.sidecar, file)?;
    Ok(OpenedOutput { writer, sidecar, target: file_name(output), stale: None, resumed: None, held: 0 })
}

/// Opens the output of a resumed run, whose input is past the rows `saved` answers: a
/// text output cut after them, or a new copy of a Parquet or Arrow IPC output's rows.
pub fn reopen(spec: &OutputSpec<'_>, saved: Saved) -> Result<OpenedOutput, ResumeError> {
    let output = spec.path;
    let format = spec.options.output_format;
    let file = saved.file;
    let rows = file.checkpoint.lines;
    let resumed = Some((rows, file.errors, file.checkpoint));
    let partial = beside(output, &file.partial);
    let writer_error = |path: &Path| {
        let path = path.to_owned();
        move |err: arrow_schema::ArrowError| ResumeError::Io {
            action: "write",
            path,
            source: std::io::Error::other(err),
        }
    };
    match &file.recovery {
        Recovery::Bytes { bytes } => {
            let mut out =
                OpenOptions::new().write(true).open(&partial).map_err(io_error("open", &partial))?;
            let len = out.metadata().map_err(io_error("read", &partial))?.len();
            if len < *bytes {
                return Err(ResumeError::Shrunk { output: partial, len, saved: *bytes });
            }
            out.set_len(*bytes).map_err(io_error("cut", &partial))?;
            out.seek(SeekFrom::End(0)).map_err(io_error("open", &partial))?;
            let writer = spec
                .writer(Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, out)), *bytes)
                .map_err(writer_error(&partial))?;
            let target = file.partial.clone();
            let sidecar = Sidecar::write_new(&spec.sidecar, file)?;
            Ok(OpenedOutput { writer, sidecar, target, stale: None, resumed, held: rows })
        }
        recovery => {
            let target = match partial == output {
                true => partial_path(output),
                false => output.to_owned(),
            };
            let out = std::fs::File::create(&target).map_err(io_error("create", &target))?;
            let mut writer = spec
                .writer(Box::new(BufWriter::with_capacity(OUTPUT_BUFFER, out)), 0)
                .map_err(writer_error(&target))?;
            let written = spec.copy.map(CopyPlan::written);
            read_back(format, &partial, spec.schema, written, recovery, rows, |batch| {
                writer.write(&batch, &[])
            })
            .map_err(|source| ResumeError::ReadBack { output: partial.clone(), source })?;
            // The sidecar still names the old file: it does until the new one holds the rows.
            let sidecar = Sidecar::write_new(&spec.sidecar, file)?;
            Ok(OpenedOutput {
                writer,
                sidecar,
                target: file_name(&target),
                stale: Some(partial),
                resumed,
                held: 0,
            })
        }
    }
}

/// Records a checkpoint: `rows`' input checkpoint, their errors, and how they are got back
/// from `target` (the file being written).
pub fn save(
    sidecar: &mut TableSidecar,
    target: &str,
    checkpoint: Checkpoint,
    errors: u64,
    recovery: Recovery,
    complete: bool,
) -> Result<(), ResumeError> {
    sidecar.update(|file| {
        file.partial = target.to_owned();
        file.checkpoint = checkpoint;
        file.errors = errors;
        file.recovery = recovery;
        file.complete = complete;
    })
}

/// Where a resumed run's copy ends up: renamed over `output` once complete.
pub fn finish_rename(output: &Path, target: &str) -> Result<bool, ResumeError> {
    let target = beside(output, target);
    if target == output {
        return Ok(false);
    }
    std::fs::rename(&target, output).map_err(io_error("rename", &target))?;
    Ok(true)
}

/// The file name of `output`.
pub fn output_name(output: &Path) -> String {
    file_name(output)
}

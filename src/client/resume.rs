//! Picking up an interrupted run from its partial output, once it is proven to be this
//! input's.
//!
//! Output is written strictly in input order, so its complete lines answer exactly as
//! many leading non-blank input lines; a half line left by a kill is cut off and solved
//! again. The proof is a sidecar, `OUTPUT.resume`, rather than a header, so that the output
//! stays one `Solution` a line: it holds the options that shape the output and the last
//! checkpoint (see `fingerprint`), saved only after the lines it counts are flushed. The
//! lines written after it are checked through the id of the last one.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::client::fingerprint::{Checkpoint, Fingerprint};
use crate::client::format::Format;
use crate::client::input::{is_blank, InputError, Line, ProblemReader};
use crate::client::problem_json::parse_problem;
use crate::pb;

/// Marks an error line as the writer formats it; cannot occur inside a JSON string,
/// where every quote is escaped.
const ERROR_MARK: &[u8] = b",\"error\":{\"code\":";

/// Names the sidecar format; a file with another is not ours.
const FORMAT: &str = "gamesolver-client resume 1";

/// How often the writer saves a checkpoint: each costs a flush and a small file rename,
/// and a crash repeats at most this much of the id check's blind spot.
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// Why an output cannot be resumed (or its sidecar not kept).
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The output exists but was not written by this client.
    #[error(
        "{output} has no {sidecar} beside it: not an output of `gamesolver-client solve -o`, \
         refusing to append to it"
    )]
    NotOurs {
        /// The output.
        output: PathBuf,
        /// The sidecar that is missing.
        sidecar: PathBuf,
    },
    /// The sidecar is not one this client wrote.
    #[error("{sidecar} is not a resume file of this client: {reason}")]
    BadSidecar {
        /// The sidecar.
        sidecar: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An option that shapes the output differs from the run that wrote it.
    #[error("{output} was written with {was}, this run has {now}: rerun with the same options, or write a new output")]
    OptionsDiffer {
        /// The output.
        output: PathBuf,
        /// The option as the output was written.
        was: String,
        /// The option as this run has it.
        now: String,
    },
    /// The output has fewer lines than its last checkpoint counted.
    #[error("{output} has {lines} complete lines but held {checkpoint} when its run last saved: it was cut or changed since")]
    Cut {
        /// The output.
        output: PathBuf,
        /// Its complete lines.
        lines: u64,
        /// Lines at the last checkpoint.
        checkpoint: u64,
    },
    /// The input lines that the output answers are not this input's.
    #[error(
        "{output} answers {input_was}, not this input: the first {lines} answered lines \
         (up to input line {input_line}) differ"
    )]
    InputDiffers {
        /// The output.
        output: PathBuf,
        /// The input the output was written from, as it was named then.
        input_was: String,
        /// Answered lines compared.
        lines: u64,
        /// Their last input line number, in the original input.
        input_line: u64,
    },
    /// The output has more lines than the input.
    #[error("{output} has {output_lines} lines but the input only {input_lines}: not this input's output")]
    InputShorter {
        /// The output.
        output: PathBuf,
        /// Complete lines in the output.
        output_lines: u64,
        /// Non-blank lines in the input.
        input_lines: u64,
    },
    /// The last kept output line answers another problem than the input line in its place.
    #[error(
        "line {line} of {output} answers id {output_id:?} but input line {input_line} has id \
         {input_id:?}: not this input's output"
    )]
    IdDiffers {
        /// The output.
        output: PathBuf,
        /// The output line.
        line: u64,
        /// Its id.
        output_id: String,
        /// The input line in its place.
        input_line: u64,
        /// That line's id.
        input_id: String,
    },
    /// The last kept output line is not a solution.
    #[error("line {line} of {output} is not a solution: {reason}")]
    NotASolution {
        /// The output.
        output: PathBuf,
        /// The output line.
        line: u64,
        /// The JSON parser's complaint.
        reason: String,
    },
    /// The rows a table output answers are not this input's.
    #[error("{output} answers {input_was}, not this input: its first {rows} rows differ")]
    RowsDiffer {
        /// The output.
        output: PathBuf,
        /// The input the output was written from, as it was named then.
        input_was: String,
        /// Rows compared.
        rows: u64,
    },
    /// A table output answers more rows (or lines) than the input has.
    #[error(
        "{output} answers {output_rows} rows but the input has only {input_rows}: not this input's output"
    )]
    FewerRows {
        /// The output.
        output: PathBuf,
        /// Rows the output answers.
        output_rows: u64,
        /// Rows (or lines) in the input.
        input_rows: u64,
    },
    /// A text output of a table run is shorter than its last checkpoint counted.
    #[error(
        "{output} is {len} bytes long but was {saved} when its run last saved: it was cut or changed since"
    )]
    Shrunk {
        /// The output.
        output: PathBuf,
        /// Its length.
        len: u64,
        /// Its length at the last checkpoint.
        saved: u64,
    },
    /// The rows of a table output cannot be read back.
    #[error("cannot read the rows of {output} back: it {source}")]
    ReadBack {
        /// The file read.
        output: PathBuf,
        /// Why.
        source: crate::client::table::write::ReadBackError,
    },
    /// The input could not be read while skipping the answered lines.
    #[error(transparent)]
    Input(#[from] InputError),
    /// Reading or writing the output or its sidecar failed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// The options that change what the output says; a resumed run must have the same ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputOptions {
    /// Answers carry no winning move.
    pub winner_only: bool,
    /// Lines longer than this are `LINE_TOO_LONG` errors instead of answers.
    pub max_message_bytes: usize,
}

/// The file that proves what a JSON-lines output of a JSON-lines input answers.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SidecarFile {
    format: String,
    /// The input as it was named (a path, or `-`): for messages only, since the same lines
    /// read from elsewhere (stdin, a compressed copy) are the same input.
    input: String,
    options: OutputOptions,
    checkpoint: Checkpoint,
}

/// `OUTPUT.resume`, beside `output`.
pub fn sidecar_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".resume");
    PathBuf::from(name)
}

/// The sidecar of `output`: [`sidecar_path`], or for a part of a directory output
/// (`hidden`) `.NAME.resume` beside it, which Spark, Hive and Hadoop skip, as they skip
/// every file whose name starts with `.` or `_`, so that the directory reads as a table.
pub fn sidecar_for(output: &Path, hidden: bool) -> PathBuf {
    match (hidden, output.file_name()) {
        (true, Some(name)) => {
            let mut hidden = std::ffi::OsString::from(".");
            hidden.push(name);
            hidden.push(".resume");
            output.with_file_name(hidden)
        }
        _ => sidecar_path(output),
    }
}

/// Saves checkpoints of a run writing to a file: `F` is what the sidecar holds.
#[derive(Debug)]
pub struct Sidecar<F: Serialize = SidecarFile> {
    path: PathBuf,
    file: F,
    saved_at: Instant,
}

impl Sidecar {
    /// Writes the sidecar `sidecar` at `checkpoint`: before a fresh run writes any line,
    /// so that even a run killed at once leaves an output that `--resume` accepts.
    pub fn create(
        sidecar: &Path,
        input: String,
        options: OutputOptions,
        checkpoint: Checkpoint,
    ) -> Result<Self, ResumeError> {
        let file = SidecarFile { format: FORMAT.to_owned(), input, options, checkpoint };
        Sidecar::write_new(sidecar, file)
    }

    /// Saves `checkpoint`, which the output (already flushed) must cover.
    pub fn save(&mut self, checkpoint: Checkpoint) -> Result<(), ResumeError> {
        self.update(|file| file.checkpoint = checkpoint)
    }
}

impl<F: Serialize> Sidecar<F> {
    /// The sidecar at `path`, holding `file`, written now.
    pub fn write_new(path: &Path, file: F) -> Result<Self, ResumeError> {
        let mut sidecar = Sidecar { path: path.to_owned(), file, saved_at: Instant::now() };
        sidecar.update(|_| ())?;
        Ok(sidecar)
    }

    /// True when a checkpoint is due.
    pub fn due(&self) -> bool {
        self.saved_at.elapsed() >= CHECKPOINT_EVERY
    }

    /// Changes what the sidecar holds with `change`, and saves it. Written to a temporary
    /// file and renamed, so that a crash leaves the old sidecar or the new one.
    pub fn update(&mut self, change: impl FnOnce(&mut F)) -> Result<(), ResumeError> {
        change(&mut self.file);
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(".tmp");
        let temporary = PathBuf::from(temporary);
        let io_error = |source| ResumeError::Io { action: "write", path: self.path.clone(), source };
        let mut text = serde_json::to_vec_pretty(&self.file).expect("a sidecar always serializes");
        text.push(b'\n');
        std::fs::write(&temporary, text).map_err(io_error)?;
        std::fs::rename(&temporary, &self.path).map_err(io_error)?;
        self.saved_at = Instant::now();
        Ok(())
    }
}

/// What an existing output already holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumePoint {
    /// Complete lines: the non-blank input lines to skip.
    pub lines: u64,
    /// Of which carry an `error`.
    pub errors: u64,
    /// Bytes of a partial last line that were cut off.
    pub truncated: u64,
}

/// A resume that passed every check: the input is past the answered lines.
#[derive(Debug, Default)]
pub struct Resumed {
    /// What the output holds.
    pub point: ResumePoint,
    /// The fingerprint of the skipped lines, to go on from.
    pub fingerprint: Fingerprint,
}

/// Checks that `output` answers the first lines of `reader`'s input with `options`, skips
/// those lines, and cuts off a partial last output line. A missing or empty output is a
/// fresh start. Nothing is changed unless every check passes.
pub fn resume(
    output: &Path,
    sidecar: &Path,
    options: OutputOptions,
    reader: &mut ProblemReader,
) -> Result<Resumed, ResumeError> {
    let len = match std::fs::metadata(output) {
        Ok(meta) => meta.len(),
        Err(err) if err.kind() == io::ErrorKind::NotFound => 0,
        Err(err) => return Err(io_error("read", output)(err)),
    };
    if len == 0 {
        return Ok(Resumed::default());
    }
    let saved = read_sidecar(output, sidecar)?;
    compare_options(output, saved.options, options)?;

    let mut file =
        OpenOptions::new().read(true).write(true).open(output).map_err(io_error("open", output))?;
    let scan = scan_output(&mut file).map_err(io_error("read", output))?;
    if scan.point.lines < saved.checkpoint.lines {
        return Err(ResumeError::Cut {
            output: output.to_owned(),
            lines: scan.point.lines,
            checkpoint: saved.checkpoint.lines,
        });
    }
    let skipped = skip_answered(output, &saved, scan.point.lines, reader)?;
    if let (Some(line), Some(range)) = (skipped.last, scan.last_line.clone()) {
        let input_id = match line {
            Line::Text { number } => parse_problem(&skipped.text, number).map_or_else(|(id, _)| id, |p| p.id),
            Line::TooLong { number, .. } => number.to_string(),
        };
        let output_id = solution_id(&mut file, range).map_err(|err| match err {
            Ok(reason) => {
                ResumeError::NotASolution { output: output.to_owned(), line: scan.point.lines, reason }
            }
            Err(source) => io_error("read", output)(source),
        })?;
        if output_id != input_id {
            return Err(ResumeError::IdDiffers {
                output: output.to_owned(),
                line: scan.point.lines,
                output_id,
                input_line: skipped.fingerprint.input_line(),
                input_id,
            });
        }
    }
    if scan.point.truncated > 0 {
        file.set_len(scan.complete_end).map_err(io_error("cut the partial last line of", output))?;
    }
    Ok(Resumed { point: scan.point, fingerprint: skipped.fingerprint })
}

/// Reads `sidecar`, the sidecar of `output`, which must exist and be ours.
fn read_sidecar(output: &Path, sidecar: &Path) -> Result<SidecarFile, ResumeError> {
    let Some(text) = sidecar_text(sidecar)? else {
        return Err(ResumeError::NotOurs { output: output.to_owned(), sidecar: sidecar.to_owned() });
    };
    let sidecar = sidecar.to_owned();
    if let Some(format) = sidecar_format(&text).filter(|format| format != FORMAT) {
        return Err(written_as(output, &format, &text));
    }
    let saved: SidecarFile = serde_json::from_slice(&text)
        .map_err(|err| ResumeError::BadSidecar { sidecar: sidecar.clone(), reason: err.to_string() })?;
    Ok(saved)
}

/// The text of the sidecar at `sidecar`, `None` when there is none.
pub fn sidecar_text(sidecar: &Path) -> Result<Option<Vec<u8>>, ResumeError> {
    match std::fs::read(sidecar) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(io_error("read", sidecar)(err)),
    }
}

/// The `format` a sidecar's text names, if it is a JSON object naming one.
pub fn sidecar_format(text: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Format {
        format: String,
    }
    serde_json::from_slice::<Format>(text).ok().map(|f| f.format)
}

/// The formats a sidecar of `format` was written with, in words, as
/// [`ResumeError::OptionsDiffer`] says them.
pub fn formats_of(format: &str, text: &[u8]) -> String {
    /// The formats a table run's sidecar names in its options (the table module writes
    /// them; read here by shape, so that this module needs nothing of the table one).
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Formats {
        input_format: Format,
        output_format: Format,
    }
    #[derive(Deserialize)]
    struct Options {
        options: Formats,
    }
    match format {
        FORMAT => "JSON lines out of JSON lines".to_owned(),
        _ => serde_json::from_slice::<Options>(text).map_or_else(
            |_| format!("a sidecar of {format:?}"),
            |Options { options }| format!("{} out of {}", options.output_format, options.input_format),
        ),
    }
}

/// The error for a sidecar of another kind of run (`format`, its text `text`).
fn written_as(output: &Path, format: &str, text: &[u8]) -> ResumeError {
    ResumeError::OptionsDiffer {
        output: output.to_owned(),
        was: formats_of(format, text),
        now: "JSON lines out of JSON lines".into(),
    }
}

/// The input lines [`skip_answered`] went past.
pub struct Skipped {
    /// Their fingerprint, to go on from.
    pub fingerprint: Fingerprint,
    /// The last of them, with its text in `text`.
    last: Option<Line>,
    text: Vec<u8>,
}

/// Reads `lines` non-blank lines of the input, checking their fingerprint against the
/// sidecar's checkpoint on the way.
fn skip_answered(
    output: &Path,
    saved: &SidecarFile,
    lines: u64,
    reader: &mut ProblemReader,
) -> Result<Skipped, ResumeError> {
    skip_lines(output, saved.checkpoint, &saved.input, lines, reader)
}

/// Reads `lines` non-blank lines of the input, checking on the way that the first
/// `checkpoint.lines` of them are those of `checkpoint` (of the input named `input_was`).
pub fn skip_lines(
    output: &Path,
    checkpoint: Checkpoint,
    input_was: &str,
    lines: u64,
    reader: &mut ProblemReader,
) -> Result<Skipped, ResumeError> {
    let mut skipped = Skipped { fingerprint: Fingerprint::default(), last: None, text: Vec::new() };
    let mut checked = false;
    loop {
        if !checked && skipped.fingerprint.lines() == checkpoint.lines {
            check_fingerprint(output, checkpoint, input_was, &skipped.fingerprint)?;
            checked = true;
        }
        if skipped.fingerprint.lines() == lines {
            return Ok(skipped);
        }
        let Some(line) = reader.next_line(&mut skipped.text)? else {
            return Err(ResumeError::InputShorter {
                output: output.to_owned(),
                output_lines: lines,
                input_lines: skipped.fingerprint.lines(),
            });
        };
        if matches!(line, Line::Text { .. }) && is_blank(&skipped.text) {
            continue;
        }
        skipped.fingerprint.add(line, &skipped.text);
        skipped.last = Some(line);
    }
}

fn compare_options(output: &Path, was: OutputOptions, now: OutputOptions) -> Result<(), ResumeError> {
    let differ =
        |was: String, now: String| Err(ResumeError::OptionsDiffer { output: output.to_owned(), was, now });
    let winner_only = |on: bool| if on { "--winner-only" } else { "no --winner-only" }.to_owned();
    if was.winner_only != now.winner_only {
        return differ(winner_only(was.winner_only), winner_only(now.winner_only));
    }
    if was.max_message_bytes != now.max_message_bytes {
        let flag = |n: usize| format!("--max-message-bytes {n}");
        return differ(flag(was.max_message_bytes), flag(now.max_message_bytes));
    }
    Ok(())
}

fn check_fingerprint(
    output: &Path,
    saved: Checkpoint,
    input_was: &str,
    now: &Fingerprint,
) -> Result<(), ResumeError> {
    if now.checkpoint() == saved {
        return Ok(());
    }
    Err(ResumeError::InputDiffers {
        output: output.to_owned(),
        input_was: input_was.to_owned(),
        lines: saved.lines,
        input_line: saved.input_line,
    })
}

/// Turns an `io::Error` about `path` into a [`ResumeError`].
fn io_error<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> ResumeError + 'a {
    move |source| ResumeError::Io { action, path: path.to_owned(), source }
}

/// The id of the solution at `range` of `file`; `Err(Ok(reason))` when it is not one.
fn solution_id(file: &mut File, range: std::ops::Range<u64>) -> Result<String, Result<String, io::Error>> {
    let mut line = vec![0u8; (range.end - range.start) as usize];
    file.seek(SeekFrom::Start(range.start)).map_err(Err)?;
    file.read_exact(&mut line).map_err(Err)?;
    serde_json::from_slice::<pb::Solution>(&line).map(|s| s.id).map_err(|err| Ok(err.to_string()))
}

/// The complete lines of an output, read to its end.
#[derive(Debug, Default)]
struct OutputScan {
    point: ResumePoint,
    /// File offset after the last complete line.
    complete_end: u64,
    /// Where the last complete line lies, newline excluded.
    last_line: Option<std::ops::Range<u64>>,
}

/// Counts the complete lines (and error lines) of `file`, from its start.
fn scan_output(file: &mut File) -> io::Result<OutputScan> {
    let finder = memchr::memmem::Finder::new(ERROR_MARK);
    let mut scan = OutputScan::default();
    let mut buf = vec![0u8; 1 << 20];
    // `buf[..carried]` is the start of an unfinished line, read earlier; `offset` is the
    // file offset of `buf[0]`; `line_offset` that of the line being read.
    let mut carried = 0;
    let mut offset = 0u64;
    let mut line_offset = 0u64;
    let mut line_has_error = false;
    loop {
        let n = match file.read(&mut buf[carried..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        let filled = carried + n;
        let mut line_start = 0;
        for end in memchr::memchr_iter(b'\n', &buf[carried..filled]).map(|i| carried + i) {
            scan.point.lines += 1;
            scan.point.errors += u64::from(line_has_error || finder.find(&buf[line_start..end]).is_some());
            scan.last_line = Some(line_offset..offset + end as u64);
            line_has_error = false;
            line_start = end + 1;
            line_offset = offset + line_start as u64;
        }
        if line_start > 0 {
            scan.complete_end = offset + line_start as u64;
        }
        // An unfinished line longer than half the buffer is scanned now and only the tail
        // that could hold the start of the mark is kept.
        let unfinished = &buf[line_start..filled];
        let mut drop_to = line_start;
        if unfinished.len() > buf.len() / 2 {
            line_has_error |= finder.find(unfinished).is_some();
            drop_to = filled - (ERROR_MARK.len() - 1);
        }
        buf.copy_within(drop_to..filled, 0);
        offset += drop_to as u64;
        carried = filled - drop_to;
    }
    scan.point.truncated = file.metadata()?.len() - scan.complete_end;
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scanned(content: &[u8]) -> OutputScan {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.jsonl");
        std::fs::write(&path, content).unwrap();
        scan_output(&mut File::open(&path).unwrap()).unwrap()
    }

    #[test]
    fn a_partial_last_line_is_found() {
        let content = b"{\"id\":\"1\",\"aliceWins\":true,\"winner\":\"ALICE\"}\n\
            {\"id\":\"2\",\"error\":{\"code\":\"INVALID_ARGUMENT\",\"message\":\"x\"}}\n{\"id\":\"3\",\"ali";
        let scan = scanned(content);
        assert_eq!(scan.point, ResumePoint { lines: 2, errors: 1, truncated: 14 });
        assert_eq!(scan.complete_end, content.len() as u64 - 14);
        let last = scan.last_line.unwrap();
        assert_eq!(&content[last.start as usize..last.end as usize], &content[45..content.len() - 15]);
    }

    #[test]
    fn complete_and_unfinished_outputs() {
        let scan = scanned(b"a\nbc\n");
        assert_eq!(scan.point, ResumePoint { lines: 2, errors: 0, truncated: 0 });
        assert_eq!(scan.last_line, Some(2..4));
        let scan = scanned(b"no newline");
        assert_eq!((scan.point.lines, scan.point.truncated, scan.last_line), (0, 10, None));
    }

    #[test]
    fn lines_longer_than_the_buffer() {
        let mut content = vec![b'x'; 3 << 20];
        content.push(b'\n');
        content.extend_from_slice(ERROR_MARK);
        content.extend_from_slice(&vec![b'y'; 5 << 20]);
        content.push(b'\n');
        content.extend_from_slice(&vec![b'y'; 5 << 20]);
        content.extend_from_slice(ERROR_MARK);
        content.extend_from_slice(b"\nz");
        let scan = scanned(&content);
        assert_eq!(scan.point, ResumePoint { lines: 3, errors: 2, truncated: 1 });
        let last = scan.last_line.unwrap();
        assert_eq!((last.end - last.start) as usize, (5 << 20) + ERROR_MARK.len());
    }

    const OPTIONS: OutputOptions = OutputOptions { winner_only: false, max_message_bytes: 1 << 20 };

    /// An input with blank lines; its non-blank lines have ids a, (line 4), c, d.
    const INPUT: &[u8] = b"{\"id\":\"a\"}\n\n  \n{}\n{\"id\":\"c\"}\n\n{\"id\":\"d\"}\n";

    fn reader(input: &[u8]) -> ProblemReader {
        ProblemReader::from_reader(Box::new(io::Cursor::new(input.to_vec())), None, 1 << 20).unwrap()
    }

    /// The fingerprint of the first `lines` non-blank lines of `input`.
    fn fingerprint_of(input: &[u8], lines: u64) -> Checkpoint {
        let (mut reader, mut fingerprint, mut text) = (reader(input), Fingerprint::default(), Vec::new());
        while fingerprint.lines() < lines {
            let line = reader.next_line(&mut text).unwrap().unwrap();
            if !is_blank(&text) {
                fingerprint.add(line, &text);
            }
        }
        fingerprint.checkpoint()
    }

    /// An output of `ids` (plus `tail`) whose sidecar counts the first `checkpoint` lines of INPUT.
    fn output(dir: &Path, ids: &[&str], tail: &str, checkpoint: u64) -> PathBuf {
        let path = dir.join("out.jsonl");
        let mut text: String =
            ids.iter().map(|id| format!("{{\"id\":\"{id}\",\"aliceWins\":false}}\n")).collect();
        text.push_str(tail);
        std::fs::write(&path, text).unwrap();
        Sidecar::create(&sidecar_path(&path), "in.jsonl".into(), OPTIONS, fingerprint_of(INPUT, checkpoint))
            .unwrap();
        path
    }

    #[test]
    fn a_resume_skips_the_answered_lines_blank_ones_too() {
        let dir = tempfile::tempdir().unwrap();
        // Two lines checkpointed, a third written after, half a fourth cut off.
        let path = output(dir.path(), &["a", "4", "c"], "{\"id\":\"d", 2);
        let mut input = reader(INPUT);
        let resumed = resume(&path, &sidecar_path(&path), OPTIONS, &mut input).unwrap();
        assert_eq!(resumed.point, ResumePoint { lines: 3, errors: 0, truncated: 8 });
        assert_eq!(resumed.fingerprint.checkpoint(), fingerprint_of(INPUT, 3));
        let mut text = Vec::new();
        assert_eq!(input.next_line(&mut text).unwrap(), Some(Line::Text { number: 6 }));
        assert!(std::fs::read_to_string(&path).unwrap().ends_with("\"c\",\"aliceWins\":false}\n"));
    }

    #[test]
    fn a_resume_refuses_what_it_cannot_prove() {
        let dir = tempfile::tempdir().unwrap();
        let refused = |path: &Path, input: &[u8], options| {
            resume(path, &sidecar_path(path), options, &mut reader(input)).unwrap_err()
        };

        let path = output(dir.path(), &["a", "4", "x"], "", 2);
        let err = refused(&path, INPUT, OPTIONS);
        assert!(matches!(&err, ResumeError::IdDiffers { line: 3, input_line: 5, .. }), "{err}");
        assert!(err
            .to_string()
            .ends_with("answers id \"x\" but input line 5 has id \"c\": not this input's output"));

        let path = output(dir.path(), &["a", "4", "c"], "", 2);
        let other = b"{\"id\":\"a\"}\n{}\n{\"id\":\"c\"}\n";
        let err = refused(&path, other, OPTIONS);
        assert!(matches!(err, ResumeError::InputDiffers { lines: 2, input_line: 4, .. }), "{err}");
        let err = refused(&path, b"{\"id\":\"a\"}\n\n  \n{}\n", OPTIONS);
        assert!(matches!(err, ResumeError::InputShorter { output_lines: 3, input_lines: 2, .. }), "{err}");
        let err = refused(&path, INPUT, OutputOptions { winner_only: true, ..OPTIONS });
        assert!(matches!(err, ResumeError::OptionsDiffer { .. }), "{err}");

        let path = output(dir.path(), &["a"], "", 2);
        assert!(matches!(refused(&path, INPUT, OPTIONS), ResumeError::Cut { lines: 1, checkpoint: 2, .. }));

        std::fs::remove_file(sidecar_path(&path)).unwrap();
        assert!(matches!(refused(&path, INPUT, OPTIONS), ResumeError::NotOurs { .. }));
        std::fs::write(sidecar_path(&path), "{}").unwrap();
        assert!(matches!(refused(&path, INPUT, OPTIONS), ResumeError::BadSidecar { .. }));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"id\":\"a\",\"aliceWins\":false}\n",
            "untouched"
        );
    }

    #[test]
    fn a_missing_or_empty_output_is_a_fresh_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.jsonl");
        assert_eq!(
            resume(&path, &sidecar_path(&path), OPTIONS, &mut reader(INPUT)).unwrap().point,
            ResumePoint::default()
        );
        std::fs::write(&path, "").unwrap();
        assert_eq!(
            resume(&path, &sidecar_path(&path), OPTIONS, &mut reader(INPUT)).unwrap().point,
            ResumePoint::default()
        );
    }
}

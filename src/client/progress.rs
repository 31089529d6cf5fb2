//! What a run tells the person watching it: a live bar and a closing summary.
//!
//! The bar's position is the raw input offset of the last batch written, so the ETA comes
//! from the file size and holds for compressed files too; stdin, having no size, gets a
//! spinner with counts only. While the embedded server grows a table (half a minute for
//! Stone Game IV to 10^9), no batch is written: the bar says which table and how far it
//! is instead of an ETA, and the ETA starts afresh once it is built, so that the wait
//! does not count in it. Without a bar (stderr not a terminal), a line says when a table
//! starts growing and one when it is built.

use std::fmt;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::client::embedded::{Growing, Growth};

/// The bar's template while problems are answered.
const ANSWERING: &str = "{spinner} {elapsed_precise} [{wide_bar}] {percent:>3}% {msg} ETA {eta}";
/// The bar's template while a table grows: no ETA, which the wait would only mislead.
const GROWING: &str = "{spinner} {elapsed_precise} [{wide_bar}] {msg}";

/// The live progress display on stderr; does nothing when disabled.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    lines: u64,
    last_message: Option<Instant>,
    /// The embedded server's tables, watched while the run waits for them.
    growth: Option<Growth>,
    /// Lines on stderr for a table's growth when there is no bar (and the run is not quiet).
    log: bool,
    /// The table growing when last looked, and since when.
    growing: Option<(Growing, Instant)>,
    last_look: Option<Instant>,
    /// Where this run's positions start on the bar: the parts read before, in a run over
    /// several inputs.
    offset: u64,
    /// The bar is this run's own, removed when it finishes; a part's is its run's.
    owner: bool,
}

impl Progress {
    /// A bar over `raw_len` input bytes (a spinner when unknown), or nothing if `!enabled`.
    pub fn new(enabled: bool, raw_len: Option<u64>) -> Self {
        let bar = enabled.then(|| {
            let (bar, template) = match raw_len {
                Some(len) => {
                    (ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()), ANSWERING)
                }
                None => (
                    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
                    "{spinner} {elapsed_precise} {msg}",
                ),
            };
            bar.set_style(style(template));
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            started: Instant::now(),
            lines: 0,
            last_message: None,
            growth: None,
            log: false,
            growing: None,
            last_look: None,
            offset: 0,
            owner: true,
        }
    }

    /// The progress of one part of a run over several, on this run's bar: its positions
    /// from `offset`, its problems counted after the `lines` answered before it.
    pub fn part(&self, offset: u64, lines: u64) -> Progress {
        Progress {
            bar: self.bar.clone(),
            started: self.started,
            lines,
            last_message: None,
            growth: self.growth.clone(),
            log: self.log,
            growing: None,
            last_look: None,
            offset,
            owner: false,
        }
    }

    /// Watches the embedded server's tables through `growth`; without a bar, says their
    /// growth in lines on stderr unless `quiet`.
    pub fn watching(self, growth: Option<Growth>, quiet: bool) -> Self {
        let log = !quiet && self.bar.is_none();
        Progress { growth, log, ..self }
    }

    /// Records `lines` more lines written, up to raw input offset `input_offset`.
    pub fn advance(&mut self, lines: u64, input_offset: u64) {
        self.lines += lines;
        self.look_at_tables();
        let Some(bar) = &self.bar else { return };
        bar.set_position(self.offset + input_offset);
        // Formatting the message each batch would cost more than the bar is worth.
        if self.growing.is_none()
            && self.last_message.is_none_or(|at| at.elapsed() >= Duration::from_millis(100))
        {
            self.last_message = Some(Instant::now());
            let rate = self.lines as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{}, {}/s", counted(self.lines, "problem"), human_count(rate)));
        }
    }

    /// Called while nothing is written: looks whether a table is growing.
    pub fn tick(&mut self) {
        self.look_at_tables();
    }

    /// Shows the table growing now, if any, at most five times a second.
    fn look_at_tables(&mut self) {
        let Some(growth) = &self.growth else { return };
        if self.last_look.is_some_and(|at| at.elapsed() < Duration::from_millis(200)) {
            return;
        }
        self.last_look = Some(Instant::now());
        let now = growth.growing().into_iter().next();
        match (now, self.growing.take()) {
            (Some(growing), was) => {
                let since = match was {
                    Some((was, since)) if was.game == growing.game => since,
                    _ => {
                        if self.log {
                            eprintln!("gamesolver-client: {}", building(&growing, None));
                        }
                        if let Some(bar) = &self.bar {
                            bar.set_style(style(GROWING));
                        }
                        Instant::now()
                    }
                };
                if let Some(bar) = &self.bar {
                    let percent = (growing.covered as f64 / (growing.target as f64 + 1.0) * 100.0).min(99.0);
                    bar.set_message(building(&growing, Some(percent as u32)));
                }
                self.growing = Some((growing, since));
            }
            (None, Some((built, since))) => {
                if self.log {
                    let seconds = since.elapsed().as_secs_f64();
                    eprintln!(
                        "gamesolver-client: built the {} table to {} in {seconds:.1}s",
                        title(&built),
                        grouped(built.target)
                    );
                }
                if let Some(bar) = &self.bar {
                    bar.set_style(style(ANSWERING));
                    // The rate so far counts the wait: the ETA starts again from here.
                    bar.reset_eta();
                }
            }
            (None, None) => {}
        }
    }

    /// Removes the bar, if it is this run's own.
    pub fn finish(&self) {
        if let Some(bar) = self.bar.as_ref().filter(|_| self.owner) {
            bar.finish_and_clear();
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).expect("valid template").progress_chars("=> ")
}

/// The table's title: `Stone Game IV`.
fn title(growing: &Growing) -> &'static str {
    growing.game.table().map_or(growing.game.name(), |_| growing.game.title())
}

/// `building the Stone Game IV table to 1,000,000,000`, and `: 43%` when given.
fn building(growing: &Growing, percent: Option<u32>) -> String {
    let target = grouped(growing.target);
    match percent {
        Some(percent) => format!("building the {} table to {target}: {percent}%", title(growing)),
        None => format!("building the {} table to {target}", title(growing)),
    }
}

/// `1000000000` as `1,000,000,000`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `1234567.0` as `1.23M`.
fn human_count(n: f64) -> String {
    match n {
        n if n >= 1e6 => format!("{:.2}M", n / 1e6),
        n if n >= 1e3 => format!("{:.1}k", n / 1e3),
        n => format!("{n:.0}"),
    }
}

/// The outcome of a `solve` run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Lines answered by this run.
    pub problems: u64,
    /// Of which carry an `error`.
    pub errors: u64,
    /// Lines already in the output when resuming (not counted above).
    pub resumed: u64,
    /// Error lines among those.
    pub resumed_errors: u64,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl Summary {
    /// Problems answered per second.
    pub fn rate(&self) -> f64 {
        self.problems as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// True when some line of the whole output (resumed part included) carries an error.
    pub fn has_errors(&self) -> bool {
        self.errors + self.resumed_errors > 0
    }

    /// True when the errors of the whole output (resumed part included) are within `max`:
    /// the run then exits 0 though some rows are errors.
    pub fn within(&self, max: MaxErrors) -> bool {
        max.allows(self.errors + self.resumed_errors, self.problems + self.resumed)
    }

    /// This summary and `other`'s, as one run's: the parts of a run over several inputs.
    pub fn add(&mut self, other: &Summary) {
        self.problems += other.problems;
        self.errors += other.errors;
        self.resumed += other.resumed;
        self.resumed_errors += other.resumed_errors;
    }
}

/// `n` and its noun, the noun plural unless `n` is 1: `1 problem`, `2 problems`, `0 errors`.
pub(crate) fn counted(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, {}, {:.2}s, {:.0} problems/s",
            counted(self.problems, "problem"),
            counted(self.errors, "error"),
            self.elapsed.as_secs_f64(),
            self.rate()
        )?;
        if self.resumed > 0 {
            write!(
                f,
                " (resumed after {}, {} with errors)",
                counted(self.resumed, "line"),
                self.resumed_errors
            )?;
        }
        Ok(())
    }
}

/// How many error rows a run may have and still exit 0 (`--max-errors`): a count, or a
/// percentage of the rows of the whole output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxErrors {
    /// At most this many rows.
    Count(u64),
    /// At most this percentage of the rows (0 to 100).
    Percent(f64),
}

impl Default for MaxErrors {
    /// None: any error row makes the run exit 1, as a scheduler expects of a failed task.
    fn default() -> Self {
        MaxErrors::Count(0)
    }
}

impl MaxErrors {
    /// True when `errors` among `rows` are within the bound.
    pub fn allows(self, errors: u64, rows: u64) -> bool {
        match self {
            MaxErrors::Count(most) => errors <= most,
            // errors / rows <= p / 100 without the division, so that no rows allow no error
            // and `1%` of 100 rows allows exactly 1.
            MaxErrors::Percent(percent) => (errors as f64) * 100.0 <= percent * rows as f64,
        }
    }
}

impl std::str::FromStr for MaxErrors {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wrong = || format!("{text:?}: expected a count of rows (10) or a percentage of them (0.5%)");
        match text.strip_suffix('%') {
            Some(percent) => match percent.trim().parse::<f64>() {
                Ok(p) if (0.0..=100.0).contains(&p) => Ok(MaxErrors::Percent(p)),
                _ => Err(wrong()),
            },
            None => text.trim().parse().map(MaxErrors::Count).map_err(|_| wrong()),
        }
    }
}

impl fmt::Display for MaxErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxErrors::Count(n) => write!(f, "{n}"),
            MaxErrors::Percent(p) => write!(f, "{p}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line() {
        let summary =
            Summary { problems: 2000, errors: 1, elapsed: Duration::from_secs(2), ..Default::default() };
        assert_eq!(summary.to_string(), "2000 problems, 1 error, 2.00s, 1000 problems/s");
        assert!(summary.has_errors());
        let resumed =
            Summary { resumed: 5, resumed_errors: 1, elapsed: Duration::from_secs(1), ..Default::default() };
        assert!(resumed.has_errors());
        assert!(resumed.to_string().ends_with("(resumed after 5 lines, 1 with errors)"));
    }

    #[test]
    fn the_counts_are_in_words_that_agree_with_them() {
        let one = Summary { problems: 1, errors: 1, elapsed: Duration::from_secs(1), ..Default::default() };
        assert_eq!(one.to_string(), "1 problem, 1 error, 1.00s, 1 problems/s");
        let two = Summary { problems: 2, errors: 2, resumed: 1, ..one };
        assert!(two.to_string().starts_with("2 problems, 2 errors, "), "{two}");
        assert!(two.to_string().ends_with("(resumed after 1 line, 0 with errors)"), "{two}");
        let none = Summary { problems: 0, errors: 0, ..one };
        assert!(none.to_string().starts_with("0 problems, 0 errors, "), "{none}");
    }

    #[test]
    fn max_errors_is_a_count_or_a_percentage_of_the_rows() {
        let parse = |text: &str| text.parse::<MaxErrors>();
        assert_eq!(parse("10"), Ok(MaxErrors::Count(10)));
        assert_eq!(parse("0.5%"), Ok(MaxErrors::Percent(0.5)));
        assert_eq!(
            parse("ten").unwrap_err(),
            "\"ten\": expected a count of rows (10) or a percentage of them (0.5%)"
        );
        assert!(parse("101%").is_err() && parse("-1").is_err() && parse("-1%").is_err());
        let summary = |errors, resumed_errors| Summary {
            problems: 150,
            errors,
            resumed: 50,
            resumed_errors,
            ..Default::default()
        };
        assert!(summary(0, 0).within(MaxErrors::default()));
        assert!(!summary(1, 0).within(MaxErrors::default()));
        assert!(summary(1, 1).within(MaxErrors::Count(2)));
        assert!(!summary(2, 1).within(MaxErrors::Count(2)));
        // 1% of the 200 rows of the whole output, resumed ones included.
        assert!(summary(1, 1).within(MaxErrors::Percent(1.0)));
        assert!(!summary(2, 1).within(MaxErrors::Percent(1.0)));
        assert_eq!(MaxErrors::Percent(0.5).to_string(), "0.5%");
    }

    #[test]
    fn a_growing_table_is_said_in_words() {
        let growing =
            Growing { game: crate::games::GameKind::StoneGameIv, covered: 0, target: 1_000_000_000 };
        assert_eq!(building(&growing, Some(43)), "building the Stone Game IV table to 1,000,000,000: 43%");
        let nim = Growing { game: crate::games::GameKind::NimSquare, covered: 0, target: 999 };
        assert_eq!(building(&nim, None), "building the Nim Square table to 999");
        assert_eq!(grouped(1_234), "1,234");
        assert_eq!(grouped(0), "0");
    }

    #[test]
    fn human_counts() {
        assert_eq!(human_count(999.0), "999");
        assert_eq!(human_count(1500.0), "1.5k");
        assert_eq!(human_count(2_345_678.0), "2.35M");
    }
}

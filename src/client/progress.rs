//! What a run tells the person watching it: a live bar and a closing summary.
//!
//! The bar's position is the raw input offset of the last batch written, so the ETA comes
//! from the file size and holds for compressed files too; stdin, having no size, gets a
//! spinner with counts only.

use std::fmt;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The live progress display on stderr; does nothing when disabled.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    lines: u64,
    last_message: Option<Instant>,
}

impl Progress {
    /// A bar over `raw_len` input bytes (a spinner when unknown), or nothing if `!enabled`.
    pub fn new(enabled: bool, raw_len: Option<u64>) -> Self {
        let bar = enabled.then(|| {
            let (bar, template) = match raw_len {
                Some(len) => (
                    ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr()),
                    "{spinner} {elapsed_precise} [{wide_bar}] {percent:>3}% {msg} ETA {eta}",
                ),
                None => (
                    ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
                    "{spinner} {elapsed_precise} {msg}",
                ),
            };
            let style = ProgressStyle::with_template(template).expect("valid template").progress_chars("=> ");
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress { bar, started: Instant::now(), lines: 0, last_message: None }
    }

    /// Records `lines` more lines written, up to raw input offset `input_offset`.
    pub fn advance(&mut self, lines: u64, input_offset: u64) {
        self.lines += lines;
        let Some(bar) = &self.bar else { return };
        bar.set_position(input_offset);
        // Formatting the message each batch would cost more than the bar is worth.
        if self.last_message.is_none_or(|at| at.elapsed() >= Duration::from_millis(100)) {
            self.last_message = Some(Instant::now());
            let rate = self.lines as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!("{}, {}/s", counted(self.lines, "problem"), human_count(rate)));
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
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
            write!(f, " (resumed after {}, {} with errors)", counted(self.resumed, "line"), self.resumed_errors)?;
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
    fn human_counts() {
        assert_eq!(human_count(999.0), "999");
        assert_eq!(human_count(1500.0), "1.5k");
        assert_eq!(human_count(2_345_678.0), "2.35M");
    }
}

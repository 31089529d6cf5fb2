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
            bar.set_message(format!("{} problems, {}/s", self.lines, human_count(rate)));
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
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: u64| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{} problems, {} error{}, {:.2}s, {:.0} problems/s",
            self.problems,
            self.errors,
            plural(self.errors),
            self.elapsed.as_secs_f64(),
            self.rate()
        )?;
        if self.resumed > 0 {
            write!(f, " (resumed after {} lines, {} with errors)", self.resumed, self.resumed_errors)?;
        }
        Ok(())
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
    fn human_counts() {
        assert_eq!(human_count(999.0), "999");
        assert_eq!(human_count(1500.0), "1.5k");
        assert_eq!(human_count(2_345_678.0), "2.35M");
    }
}

//! Durations as flags give them: seconds, fractions allowed, and timeouts where 0 is none.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A duration given in seconds, fractions allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Seconds(pub Duration);

impl FromStr for Seconds {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.trim()
            .parse::<f64>()
            .ok()
            .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
            .map(Seconds)
            .ok_or_else(|| format!("{text:?} is not a non-negative number of seconds"))
    }
}

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.as_secs_f64())
    }
}

/// A timeout in seconds where 0 means none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timeout(pub Option<Duration>);

impl FromStr for Timeout {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let Seconds(duration) = text.parse()?;
        Ok(Timeout((!duration.is_zero()).then_some(duration)))
    }
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.map_or(0.0, |d| d.as_secs_f64()))
    }
}

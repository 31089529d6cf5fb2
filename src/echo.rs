//! Input quoted back in an error message, bounded.
//!
//! An error names the value at fault, and that value is whatever a peer sent: a game name
//! of 100 KB in a Flight descriptor, an unknown JSON field, a header. Quoted whole, it
//! ends up in `grpc-message` (HTTP/2 trailers, which peers cap at 16 to 64 KiB and then
//! reset the stream), in Connect's error body and in logs. Every place that quotes a
//! value it was given goes through [`quoted`] or [`bounded`], which keep the first
//! [`ECHO_CHARS`] characters and mark the cut with `…`. A message made by a library
//! that quotes a value where this crate cannot reach (serde's `unknown field` and
//! `invalid type: string`) is bounded whole by [`message`].

use std::borrow::Cow;
use std::fmt;

/// The most characters of an input value an error message repeats: a game name, a
/// field name or a number as written fit whole, a wall of text does not.
pub const ECHO_CHARS: usize = 100;

/// The most characters of a library's message that quotes an input value: room for the
/// value cut to [`ECHO_CHARS`] and the longest fixed text around it (serde's list of a
/// problem's fields, about 200).
pub const MESSAGE_CHARS: usize = 1000;

/// `text` as it is when it has at most [`ECHO_CHARS`] characters; else its first
/// [`ECHO_CHARS`] and `…`.
pub fn bounded(text: &str) -> Cow<'_, str> {
    cut(text, ECHO_CHARS)
}

/// A whole message that quotes an input value unbounded, cut as [`bounded`] cuts a value
/// but at [`MESSAGE_CHARS`].
pub fn message(text: &str) -> Cow<'_, str> {
    cut(text, MESSAGE_CHARS)
}

fn cut(text: &str, chars: usize) -> Cow<'_, str> {
    match text.char_indices().nth(chars) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

/// `text` quoted as Rust's `{:?}` quotes a string (escapes and all), cut as
/// [`bounded`] cuts it, the `…` inside the quotes.
pub fn quoted(text: &str) -> Quoted<'_> {
    Quoted(text)
}

/// A value shown quoted and bounded; see [`quoted`].
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(&'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.char_indices().nth(ECHO_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((end, _)) => {
                let shown = format!("{:?}", &self.0[..end]);
                // The quote that closes the cut text goes after the mark.
                write!(f, "{}…\"", &shown[..shown.len() - 1])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_whole_and_long_ones_cut_on_a_character() {
        assert_eq!(bounded("stone_game_iv"), "stone_game_iv");
        assert_eq!(quoted("stone_game_iv").to_string(), "\"stone_game_iv\"");
        assert_eq!(quoted("a\"b\n").to_string(), r#""a\"b\n""#);
        let exact = "x".repeat(ECHO_CHARS);
        assert_eq!(bounded(&exact), exact);
        let long = "é".repeat(100_000);
        let cut = bounded(&long);
        assert_eq!(cut, format!("{}…", "é".repeat(ECHO_CHARS)));
        assert_eq!(quoted(&long).to_string(), format!("\"{}…\"", "é".repeat(ECHO_CHARS)));
        assert_eq!(quoted(&"\"".repeat(500)).to_string(), format!("\"{}…\"", "\\\"".repeat(ECHO_CHARS)));
        let serde = format!("unknown field `{}`, expected `n`", "m".repeat(5000));
        assert_eq!(message(&serde).chars().count(), MESSAGE_CHARS + 1);
        assert_eq!(message("unknown field `m`, expected `n`"), "unknown field `m`, expected `n`");
    }
}

//! The fingerprint of the input lines an output answers: what lets `--resume` prove that
//! an output is this input's.
//!
//! It sits below both the batches (each carries the checkpoint of its last line) and
//! `resume` (which recomputes it from the input), so that neither imports the other.

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::client::input::Line;

/// How many input lines the output answers, and their fingerprint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkpoint {
    /// Output lines: the non-blank input lines answered.
    pub lines: u64,
    /// The input line number of the last of them (blank lines count).
    pub input_line: u64,
    /// xxh3-64 of those lines; see [`Fingerprint`].
    pub hash: u64,
}

/// The running fingerprint of the non-blank input lines read so far.
#[derive(Clone)]
pub struct Fingerprint {
    hasher: Xxh3,
    lines: u64,
    input_line: u64,
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fingerprint")
            .field("lines", &self.lines)
            .field("input_line", &self.input_line)
            .finish()
    }
}

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint { hasher: Xxh3::new(), lines: 0, input_line: 0 }
    }
}

impl Fingerprint {
    /// Adds one non-blank line; `text` holds its bytes unless it was too long to keep.
    pub fn add(&mut self, line: Line, text: &[u8]) {
        // Number, kind and length frame each line, so that no two inputs feed the same bytes.
        let (number, kind, len) = match line {
            Line::Text { number } => (number, 0u8, text.len() as u64),
            Line::TooLong { number, len } => (number, 1u8, len),
        };
        let mut frame = [0u8; 17];
        frame[..8].copy_from_slice(&number.to_le_bytes());
        frame[8] = kind;
        frame[9..].copy_from_slice(&len.to_le_bytes());
        self.hasher.update(&frame);
        if kind == 0 {
            self.hasher.update(text);
        }
        self.lines += 1;
        self.input_line = number;
    }

    /// Non-blank lines added so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The input line number of the last line added.
    pub fn input_line(&self) -> u64 {
        self.input_line
    }

    /// Where the input stands now.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint { lines: self.lines, input_line: self.input_line, hash: self.hasher.digest() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_sees_line_numbers_and_contents() {
        let of = |lines: &[(u64, &[u8])]| {
            let mut fingerprint = Fingerprint::default();
            for &(number, text) in lines {
                fingerprint.add(Line::Text { number }, text);
            }
            fingerprint.checkpoint()
        };
        let base = of(&[(1, b"ab"), (2, b"c")]);
        assert_eq!((base.lines, base.input_line), (2, 2));
        assert_eq!(base, of(&[(1, b"ab"), (2, b"c")]));
        assert_ne!(base.hash, of(&[(1, b"a"), (2, b"bc")]).hash);
        assert_ne!(base.hash, of(&[(1, b"ab"), (3, b"c")]).hash);
        let mut long = Fingerprint::default();
        long.add(Line::TooLong { number: 1, len: 2 }, b"");
        long.add(Line::Text { number: 2 }, b"c");
        assert_ne!(base.hash, long.checkpoint().hash);
    }
}

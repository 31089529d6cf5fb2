//! The file formats the client reads and writes, and which one a run uses.
//!
//! A format comes from a flag when given, otherwise from the file's extension; an input
//! with no known extension (and stdin) is JSON lines, as it always was. The output follows
//! its own extension, and otherwise the input's format, so that a Parquet file in gives a
//! Parquet file out.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A file format of problems or solutions; the flags name it as its variant in lowercase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One JSON object a line (the protobuf JSON mapping); .jsonl, .ndjson, .json (an
    /// input also gzip- or zstd-compressed).
    Jsonl,
    /// Apache Parquet; .parquet, .pq.
    Parquet,
    /// The Arrow IPC file format (Feather v2); .arrow, .feather, .ipc.
    Arrow,
    /// The Arrow IPC stream format; .arrows.
    Arrows,
    /// Comma-separated values with a header row, a list cell written `[1,2,3]`; .csv.
    Csv,
}

impl Format {
    /// Every format, in the order the flags list them.
    pub const ALL: [Format; 5] = [Format::Jsonl, Format::Parquet, Format::Arrow, Format::Arrows, Format::Csv];

    /// The flag value: `jsonl`, `parquet`, `arrow`, `arrows`, `csv`.
    pub const fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Parquet => "parquet",
            Format::Arrow => "arrow",
            Format::Arrows => "arrows",
            Format::Csv => "csv",
        }
    }

    /// The extension a file of this format is written with.
    pub const fn extension(self) -> &'static str {
        self.name()
    }

    /// The format a path's extension names, if any; a `.gz` or `.zst` suffix is looked
    /// through (`problems.jsonl.gz` is JSON lines).
    pub fn of_path(path: &Path) -> Option<Format> {
        let extension =
            |path: &Path| path.extension().and_then(|ext| ext.to_str()).map(str::to_ascii_lowercase);
        let mut ext = extension(path)?;
        if ext == "gz" || ext == "zst" {
            ext = extension(Path::new(path.file_stem()?))?;
        }
        match ext.as_str() {
            "jsonl" | "ndjson" | "json" | "jsonlines" => Some(Format::Jsonl),
            "parquet" | "pq" => Some(Format::Parquet),
            "arrow" | "feather" | "ipc" => Some(Format::Arrow),
            "arrows" => Some(Format::Arrows),
            "csv" => Some(Format::Csv),
            _ => None,
        }
    }

    /// True for the formats whose problems are rows of a table (all but JSON lines).
    pub const fn is_table(self) -> bool {
        !matches!(self, Format::Jsonl)
    }

    /// True for the binary formats, which are not written to a terminal.
    pub const fn is_binary(self) -> bool {
        matches!(self, Format::Parquet | Format::Arrow | Format::Arrows)
    }

    /// True when a reader needs to seek in the file (Parquet and the Arrow IPC file keep
    /// their index at the end), so that stdin cannot hold it.
    pub const fn needs_file(self) -> bool {
        matches!(self, Format::Parquet | Format::Arrow)
    }

    /// The input's format: `flag`, else the path's extension, else JSON lines.
    pub fn of_input(flag: Option<Format>, path: Option<&Path>) -> Format {
        flag.or_else(|| path.and_then(Format::of_path)).unwrap_or(Format::Jsonl)
    }

    /// The output's format: `flag`, else the path's extension, else the input's format.
    pub fn of_output(flag: Option<Format>, path: Option<&Path>, input: Format) -> Format {
        flag.or_else(|| path.and_then(Format::of_path)).unwrap_or(input)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Jsonl => "JSON lines",
            Format::Parquet => "Parquet",
            Format::Arrow => "Arrow IPC file",
            Format::Arrows => "Arrow IPC stream",
            Format::Csv => "CSV",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_name_formats_and_compression_is_looked_through() {
        let of = |path: &str| Format::of_path(Path::new(path));
        assert_eq!(of("a.parquet"), Some(Format::Parquet));
        assert_eq!(of("dir.v2/A.PQ"), Some(Format::Parquet));
        assert_eq!(of("a.feather"), Some(Format::Arrow));
        assert_eq!(of("a.arrow"), Some(Format::Arrow));
        assert_eq!(of("a.arrows"), Some(Format::Arrows));
        assert_eq!(of("a.csv"), Some(Format::Csv));
        assert_eq!(of("a.jsonl.gz"), Some(Format::Jsonl));
        assert_eq!(of("a.ndjson.zst"), Some(Format::Jsonl));
        assert_eq!(of("a.txt"), None);
        assert_eq!(of("a.gz"), None);
        assert_eq!(of("noext"), None);
    }

    #[test]
    fn the_output_follows_its_flag_then_its_extension_then_the_input() {
        let input = Format::of_input(None, Some(Path::new("in.parquet")));
        assert_eq!(input, Format::Parquet);
        assert_eq!(Format::of_input(None, Some(Path::new("in.txt"))), Format::Jsonl);
        assert_eq!(Format::of_input(Some(Format::Csv), Some(Path::new("in.txt"))), Format::Csv);
        assert_eq!(Format::of_output(None, Some(Path::new("out")), input), Format::Parquet);
        assert_eq!(Format::of_output(None, Some(Path::new("out.csv")), input), Format::Csv);
        assert_eq!(Format::of_output(None, None, input), Format::Parquet);
        assert_eq!(Format::of_output(Some(Format::Jsonl), Some(Path::new("out.csv")), input), Format::Jsonl);
    }

    #[test]
    fn the_flags_name_each_format_as_its_name() {
        use clap::ValueEnum;
        for format in Format::ALL {
            assert_eq!(Format::from_str(format.name(), false), Ok(format));
        }
        assert_eq!(Format::value_variants(), Format::ALL);
    }
}

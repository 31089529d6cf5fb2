//! A run over several inputs: a directory (as Spark, DuckDB, Polars and Hive write a
//! table, one `part-*` file a task, under `key=value` folders), a glob, or several paths,
//! read one part after the other in a stated order and written one part a part into an
//! output directory, under the part's own name and folders, so that a directory Spark
//! wrote comes back as one Spark reads.
//!
//! The order: the inputs as given; within a directory or a glob, its files sorted by
//! their path (byte by byte, as `LC_ALL=C ls -R` sorts). Skipped, as Spark and Hive skip
//! them: files and folders whose names start with `_` or `.` (`_SUCCESS`, `_temporary/`,
//! `.part-0.crc`) and `.crc` files. Every part is of one format: a directory mixing
//! formats is refused with the two it mixes (a glob picks one).

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::client::format::Format;
use crate::client::input::InputSource;

/// Folders deep, at most, below a directory given as input: a link that loops stops here.
const MOST_DEPTH: usize = 64;
/// Files, at most, in a run over several inputs; each is a run of its own.
const MOST_PARTS: usize = 1_000_000;

/// The value Hive and Spark give a partition folder for a null (`key=__HIVE_DEFAULT_PARTITION__`).
const HIVE_NULL: &str = "__HIVE_DEFAULT_PARTITION__";

/// One part of a run over several inputs, as its own run sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Part {
    /// The Hive partition columns of its `key=value` folders, outermost first (`None`:
    /// Hive's null).
    pub partition: Vec<(String, Option<String>)>,
}

/// An input file of a run over several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartInput {
    /// The file.
    pub path: PathBuf,
    /// Its path below the directory (or the glob's fixed folders) it was found in: its
    /// output's path below the output directory.
    pub relative: PathBuf,
    /// Its partition columns, from `relative`'s folders.
    pub part: Part,
}

/// Why the inputs of a run over several cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum PartsError {
    /// `-` beside other inputs.
    #[error("stdin (-) cannot be one of several inputs")]
    StdinAmongSeveral,
    /// A directory or glob without a file to read.
    #[error(
        "{0} holds no input file (names starting with _ or ., and .crc files, are skipped, as Spark skips them)"
    )]
    Empty(String),
    /// A glob that is not one.
    #[error("{pattern}: not a glob: {reason}")]
    Glob {
        /// The pattern.
        pattern: String,
        /// What is wrong.
        reason: String,
    },
    /// A directory that cannot be listed.
    #[error("cannot read {path}")]
    List {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// Folders nested too deep (a link looping back).
    #[error("{0}: folders nested more than 64 deep (a link looping back?)")]
    TooDeep(PathBuf),
    /// More files than a run takes.
    #[error("more than {MOST_PARTS} input files")]
    TooMany,
    /// A part whose name says no format.
    #[error("cannot tell the format of {0} from its name: give --input-format FORMAT")]
    UnknownFormat(PathBuf),
    /// Parts of two formats.
    #[error(
        "the parts of a run are of one format: {first} is {first_format}, {other} is {other_format}; \
         pick one with a glob (such as 'DIR/**/*.parquet') or give --input-format"
    )]
    MixedFormats {
        /// The first part.
        first: PathBuf,
        /// Its format.
        first_format: Format,
        /// A part of another.
        other: PathBuf,
        /// Its format.
        other_format: Format,
    },
    /// No output directory.
    #[error(
        "several inputs (a directory, a glob or several paths) are written one part a part into a \
         directory: give -o DIR/"
    )]
    NeedsDirectory,
    /// An output that cannot be a directory.
    #[error(
        "{0} is not a directory; several inputs (a directory, a glob or several paths) are written one \
         part a part into a directory: give -o DIR/"
    )]
    NotADirectory(PathBuf),
    /// Two parts with one output.
    #[error("{first} and {second} would both be written to {output}")]
    SameOutput {
        /// One part.
        first: PathBuf,
        /// The other.
        second: PathBuf,
        /// Their output.
        output: PathBuf,
    },
    /// The output directory below an input directory, which a later run would read.
    #[error("the output directory {output} is inside the input {input}: a later run would read its answers")]
    OutputInsideInput {
        /// The output directory.
        output: PathBuf,
        /// The input directory.
        input: PathBuf,
    },
}

/// True when `text` holds a glob's special characters.
fn is_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// The files a run reads, when it reads several: `None` for one file or stdin (a run as
/// ever), else every part in order.
pub fn expand(first: &InputSource, more: &[InputSource]) -> Result<Option<Vec<PartInput>>, PartsError> {
    let single = |source: &InputSource| match source {
        InputSource::Stdin => true,
        InputSource::File(path) => !path.is_dir() && (path.exists() || !is_glob(&path.to_string_lossy())),
    };
    if more.is_empty() && single(first) {
        return Ok(None);
    }
    let mut parts = Vec::new();
    for source in std::iter::once(first).chain(more) {
        let InputSource::File(path) = source else { return Err(PartsError::StdinAmongSeveral) };
        let found = if path.is_dir() {
            let mut found = Vec::new();
            walk(path, Path::new(""), 0, &mut found)?;
            found
        } else if !path.exists() && is_glob(&path.to_string_lossy()) {
            glob(path)?
        } else {
            let name = path.file_name().map(PathBuf::from).unwrap_or_else(|| path.clone());
            vec![PartInput { path: path.clone(), relative: name, part: Part::default() }]
        };
        if found.is_empty() {
            return Err(PartsError::Empty(path.display().to_string()));
        }
        parts.extend(found);
        if parts.len() > MOST_PARTS {
            return Err(PartsError::TooMany);
        }
    }
    Ok(Some(parts))
}

/// True for a name Spark, Hive and Hadoop skip: `_SUCCESS`, `_temporary`, `.part-0.crc`,
/// and `.crc` files.
fn skipped(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('.') || name.ends_with(".crc")
}

/// The files below `dir` (whose path below the input is `below`), sorted, into `found`.
fn walk(dir: &Path, below: &Path, depth: usize, found: &mut Vec<PartInput>) -> Result<(), PartsError> {
    if depth > MOST_DEPTH {
        return Err(PartsError::TooDeep(dir.to_owned()));
    }
    let list = |source| PartsError::List { path: dir.to_owned(), source };
    let mut entries: Vec<_> =
        std::fs::read_dir(dir).map_err(list)?.collect::<Result<_, _>>().map_err(list)?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name();
        if skipped(&name.to_string_lossy()) {
            continue;
        }
        let (path, relative) = (entry.path(), below.join(&name));
        if path.is_dir() {
            walk(&path, &relative, depth + 1, found)?;
        } else {
            found.push(PartInput { path, part: partition_of(&relative), relative });
        }
        if found.len() > MOST_PARTS {
            return Err(PartsError::TooMany);
        }
    }
    Ok(())
}

/// The files `pattern` matches (a directory matched: its files), sorted, each relative to
/// the pattern's folders before its first special character.
fn glob(pattern: &Path) -> Result<Vec<PartInput>, PartsError> {
    let text = pattern.to_string_lossy().into_owned();
    let fixed: PathBuf = pattern
        .components()
        .take_while(|component| !is_glob(&component.as_os_str().to_string_lossy()))
        .collect();
    let fail = |reason: String| PartsError::Glob { pattern: text.clone(), reason };
    let mut matched: Vec<PathBuf> = glob::glob(&text)
        .map_err(|err| fail(err.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|err| fail(err.to_string()))?;
    matched.sort();
    let mut found = Vec::new();
    for path in matched {
        let relative = path.strip_prefix(&fixed).unwrap_or(&path).to_owned();
        let hidden = relative
            .components()
            .any(|c| matches!(c, Component::Normal(name) if skipped(&name.to_string_lossy())));
        if hidden {
            continue;
        }
        match path.is_dir() {
            true => walk(&path, &relative, 0, &mut found)?,
            false => found.push(PartInput { part: partition_of(&relative), relative, path }),
        }
    }
    Ok(found)
}

/// The Hive partition columns of the `key=value` folders of `relative`, outermost first;
/// a value is percent-decoded, as Hive escapes it.
fn partition_of(relative: &Path) -> Part {
    let folders = relative.parent().into_iter().flat_map(Path::components);
    let partition = folders
        .filter_map(|component| {
            let Component::Normal(name) = component else { return None };
            let name = name.to_str()?;
            let (key, value) = name.split_once('=').filter(|(key, _)| !key.is_empty())?;
            let value = percent_encoding::percent_decode_str(value).decode_utf8_lossy().into_owned();
            Some((key.to_owned(), (value != HIVE_NULL).then_some(value)))
        })
        .collect();
    Part { partition }
}

/// The one format of every part: `flag`, else each part's extension.
pub fn format_of(parts: &[PartInput], flag: Option<Format>) -> Result<Format, PartsError> {
    if let Some(format) = flag {
        return Ok(format);
    }
    let mut first: Option<(&Path, Format)> = None;
    for part in parts {
        let format =
            Format::of_path(&part.path).ok_or_else(|| PartsError::UnknownFormat(part.path.clone()))?;
        match first {
            None => first = Some((&part.path, format)),
            Some((path, known)) if known != format => {
                return Err(PartsError::MixedFormats {
                    first: path.to_owned(),
                    first_format: known,
                    other: part.path.clone(),
                    other_format: format,
                });
            }
            Some(_) => {}
        }
    }
    Ok(first.map_or(Format::Jsonl, |(_, format)| format))
}

/// The output directory of a run over several inputs: `-o`'s, which is one, ends with `/`,
/// or names no file of a known format yet.
pub fn output_dir(output: Option<&Path>) -> Result<PathBuf, PartsError> {
    let output = output.ok_or(PartsError::NeedsDirectory)?;
    let named_dir = output.to_string_lossy().ends_with('/') || output.is_dir();
    if named_dir || (!output.exists() && Format::of_path(output).is_none()) {
        return Ok(output.to_owned());
    }
    Err(PartsError::NotADirectory(output.to_owned()))
}

/// Where each part's answers go in `dir`: its relative path, its extension the output
/// format's (a `.gz` or `.zst` suffix dropped, since the output is not compressed).
/// Refuses two parts with one output, and a `dir` inside an input directory.
pub fn outputs(
    parts: &[PartInput],
    inputs: &[InputSource],
    dir: &Path,
    input: Format,
    output: Format,
) -> Result<Vec<PathBuf>, PartsError> {
    let inside = |input: &Path| -> Option<(PathBuf, PathBuf)> {
        let input = input.canonicalize().ok().filter(|path| path.is_dir())?;
        // The output may not exist yet: its nearest existing ancestor decides.
        let existing = dir.ancestors().find(|path| path.exists())?.canonicalize().ok()?;
        existing.starts_with(&input).then(|| (dir.to_owned(), input))
    };
    for source in inputs {
        if let Some((output, input)) = match source {
            InputSource::File(path) => inside(path),
            InputSource::Stdin => None,
        } {
            return Err(PartsError::OutputInsideInput { output, input });
        }
    }
    let mut seen = std::collections::HashMap::new();
    let mut paths = Vec::with_capacity(parts.len());
    for part in parts {
        let path = dir.join(output_relative(&part.relative, input, output));
        if let Some(first) = seen.insert(path.clone(), part.path.clone()) {
            return Err(PartsError::SameOutput { first, second: part.path.clone(), output: path });
        }
        paths.push(path);
    }
    Ok(paths)
}

/// `relative` with the output format's extension.
fn output_relative(relative: &Path, input: Format, output: Format) -> PathBuf {
    let compressed = relative.extension().is_some_and(|ext| ext == "gz" || ext == "zst");
    let plain = match compressed {
        true => relative.with_extension(""),
        false => relative.to_owned(),
    };
    match Format::of_path(&plain) {
        Some(format) if format == output => plain,
        Some(_) => plain.with_extension(output.extension()),
        // A part named without an extension (Hive's `000000_0`) keeps its name in its
        // own format.
        None if input == output => plain,
        None => {
            let mut name = plain.into_os_string();
            name.push(format!(".{}", output.extension()));
            PathBuf::from(name)
        }
    }
}

/// The size of a part in the unit its reading's position counts (rows of a Parquet file,
/// record batches of an Arrow IPC file, bytes of the rest), for a run's progress bar.
pub fn progress_total(path: &Path, format: Format) -> Option<u64> {
    let file = std::fs::File::open(path).ok()?;
    match format {
        Format::Parquet => {
            let metadata =
                parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&file).ok()?;
            Some(metadata.file_metadata().num_rows().max(0) as u64)
        }
        Format::Arrow => Some(arrow_ipc::reader::FileReader::try_new(file, None).ok()?.num_batches() as u64),
        Format::Arrows | Format::Csv | Format::Jsonl => Some(file.metadata().ok()?.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn names(parts: &[PartInput]) -> Vec<String> {
        parts.iter().map(|part| part.relative.display().to_string()).collect()
    }

    /// A directory as Spark writes one, partitioned by `year` and `kind`.
    fn spark_dir(root: &Path) {
        for file in [
            "_SUCCESS",
            "._SUCCESS.crc",
            "year=2024/kind=a%2Fb/part-00001-x.snappy.parquet",
            "year=2024/kind=a%2Fb/.part-00001-x.snappy.parquet.crc",
            "year=2023/kind=__HIVE_DEFAULT_PARTITION__/part-00000-x.snappy.parquet",
            "year=2023/kind=c/part-00002-x.snappy.parquet",
            "_temporary/0/part-9.parquet",
        ] {
            let path = root.join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, b"").unwrap();
        }
    }

    #[test]
    fn a_directory_is_read_sorted_its_partition_folders_giving_columns() {
        let dir = tempfile::tempdir().unwrap();
        spark_dir(dir.path());
        let parts = expand(&InputSource::File(dir.path().to_owned()), &[]).unwrap().unwrap();
        assert_eq!(
            names(&parts),
            [
                "year=2023/kind=__HIVE_DEFAULT_PARTITION__/part-00000-x.snappy.parquet",
                "year=2023/kind=c/part-00002-x.snappy.parquet",
                "year=2024/kind=a%2Fb/part-00001-x.snappy.parquet",
            ]
        );
        let column = |key: &str, value: Option<&str>| (key.to_owned(), value.map(str::to_owned));
        assert_eq!(parts[0].part.partition, [column("year", Some("2023")), column("kind", None)]);
        assert_eq!(parts[2].part.partition, [column("year", Some("2024")), column("kind", Some("a/b"))]);
        assert_eq!(format_of(&parts, None).unwrap(), Format::Parquet);
        // One file, and stdin, are runs as ever.
        assert_eq!(expand(&InputSource::File(parts[0].path.clone()), &[]).unwrap(), None);
        assert_eq!(expand(&InputSource::Stdin, &[]).unwrap(), None);
    }

    #[test]
    fn a_glob_and_several_paths_are_read_in_order() {
        let dir = tempfile::tempdir().unwrap();
        spark_dir(dir.path());
        let pattern = dir.path().join("year=*/kind=c/*.parquet");
        let parts = expand(&InputSource::File(pattern), &[]).unwrap().unwrap();
        assert_eq!(names(&parts), ["year=2023/kind=c/part-00002-x.snappy.parquet"]);
        assert_eq!(parts[0].part.partition[0], ("year".to_owned(), Some("2023".to_owned())));
        let (a, b) = (dir.path().join("b.csv"), dir.path().join("a.csv"));
        fs::write(&a, "n\n1\n").unwrap();
        fs::write(&b, "n\n2\n").unwrap();
        let parts = expand(&InputSource::File(a.clone()), &[InputSource::File(b.clone())]).unwrap().unwrap();
        assert_eq!(names(&parts), ["b.csv", "a.csv"], "as given");
        let err = expand(&InputSource::File(a), &[InputSource::Stdin]).unwrap_err();
        assert_eq!(err.to_string(), "stdin (-) cannot be one of several inputs");
        let none = expand(&InputSource::File(dir.path().join("*.arrow")), &[]).unwrap_err();
        assert!(none.to_string().ends_with("*.arrow holds no input file (names starting with _ or ., and .crc files, are skipped, as Spark skips them)"), "{none}");
    }

    #[test]
    fn mixed_formats_and_nameless_parts_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.parquet", "b.csv", "000000_0"] {
            fs::write(dir.path().join(name), b"").unwrap();
        }
        let parts = expand(&InputSource::File(dir.path().to_owned()), &[]).unwrap().unwrap();
        assert_eq!(
            format_of(&parts, None).unwrap_err().to_string(),
            format!(
                "cannot tell the format of {} from its name: give --input-format FORMAT",
                parts[0].path.display()
            )
        );
        let err = format_of(&parts[1..], None).unwrap_err().to_string();
        assert!(err.starts_with("the parts of a run are of one format: "), "{err}");
        assert!(
            err.contains("a.parquet is Parquet, ") && err.contains("b.csv is CSV; pick one with a glob"),
            "{err}"
        );
        assert_eq!(format_of(&parts, Some(Format::Csv)).unwrap(), Format::Csv);
    }

    #[test]
    fn each_part_is_written_under_its_own_name_in_the_output_directory() {
        let relative = |name: &str, input, output| output_relative(Path::new(name), input, output);
        let p = Format::Parquet;
        assert_eq!(relative("y=1/part-0.snappy.parquet", p, p), Path::new("y=1/part-0.snappy.parquet"));
        assert_eq!(relative("y=1/part-0.parquet", p, Format::Csv), Path::new("y=1/part-0.csv"));
        assert_eq!(relative("p.jsonl.gz", Format::Jsonl, Format::Jsonl), Path::new("p.jsonl"));
        assert_eq!(relative("000000_0", p, p), Path::new("000000_0"));
        assert_eq!(relative("000000_0", p, Format::Arrow), Path::new("000000_0.arrow"));

        let dir = tempfile::tempdir().unwrap();
        spark_dir(dir.path());
        let input = InputSource::File(dir.path().to_owned());
        let parts = expand(&input, &[]).unwrap().unwrap();
        let out = dir.path().join("out");
        let err = outputs(&parts, std::slice::from_ref(&input), &out, p, p).unwrap_err();
        assert!(err.to_string().contains("is inside the input"), "{err}");
        let elsewhere = tempfile::tempdir().unwrap();
        let paths = outputs(&parts, &[input], elsewhere.path(), p, p).unwrap();
        assert_eq!(paths[1], elsewhere.path().join("year=2023/kind=c/part-00002-x.snappy.parquet"));
        assert_eq!(output_dir(None).unwrap_err().to_string(), "several inputs (a directory, a glob or several paths) are written one part a part into a directory: give -o DIR/");
        assert!(output_dir(Some(Path::new("answers.parquet"))).is_err());
        assert_eq!(output_dir(Some(Path::new("answers/"))).unwrap(), Path::new("answers/"));
    }
}

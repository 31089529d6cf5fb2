//! A run over several inputs: a directory (as Spark, DuckDB, Polars and Hive write a
//! table, one `part-*` file a task), a glob, or several paths, read one part after the
//! other in a stated order and written one part a part into an output directory.

/// One part of a run over several inputs, as its own run sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Part {
    /// The Hive partition columns of its `key=value` folders, outermost first.
    pub partition: Vec<(String, String)>,
}

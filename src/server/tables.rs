//! The tables' life in a server, the same for each table game: its flags, loaded from
//! its file before serving, extended in the background while serving if asked, saved
//! when it has grown. Nothing here names a game: the games' tables come from [`Tables`],
//! their flags from the registry of games ([`GameKind::table`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use super::metrics::Metrics;
use crate::games::table::{Table, TableGame};
use crate::games::{GameKind, TableVisitor, Tables};
use crate::tables::{Opened, StoredTable, TableFileError};

/// One table game's table: its range, its file and what is computed at start-up; its
/// flags are `--NAME-max-n`, `--NAME-precompute` and `--NAME-table`, NAME the table's
/// name ([`crate::games::TableFacts::name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableConfig {
    /// Largest pile answered (OUT_OF_RANGE beyond it).
    pub max_n: u64,
    /// Piles put in the table at start-up, in the background while serving. None by
    /// default: a request grows the table as far as it needs, and a background sieve
    /// would take both cores from every embedded and test server.
    pub precompute: u64,
    /// The table file: loaded at start (recomputed if damaged; refused if its directory
    /// is missing or it is not a table), saved after the start-up precompute and at
    /// shutdown when the table has grown.
    pub file: Option<PathBuf>,
}

/// Every table game's [`TableConfig`], made from the
/// registry of games ([`GameKind::table`]): a game with a table gets its flags here
/// without a line of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TablesConfig {
    games: Vec<(GameKind, TableConfig)>,
    /// Where a table without a `--NAME-table` file is kept (the client's embedded server's
    /// cache); none by default.
    cache: Option<TableCache>,
}

/// A directory that keeps the tables across runs, each in its own file (`iv.table`,
/// `grundy.table`), for the tables no `--NAME-table` names: the bulk client's embedded
/// server keeps its tables there, so that a second run does not rebuild them. Unlike a
/// `--NAME-table` file, a cache that cannot be used is only warned about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCache {
    /// The directory.
    pub dir: PathBuf,
    /// A table whose file would be larger is not kept (said once in the log), and a
    /// larger file is not read.
    pub max_bytes: u64,
}

impl TableCache {
    /// The cache's file of the table `name` (`iv`, `grundy`).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.table"))
    }
}

/// The bulk client's flags for its embedded server's [`TableCache`]: on by default, in
/// the user's cache directory.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct TableCacheFlags {
    /// Directory that keeps the embedded server's tables across runs, so that a second
    /// run does not rebuild them (default: the user's cache directory,
    /// $XDG_CACHE_HOME/gamesolver or ~/.cache/gamesolver). A --NAME-table file wins.
    #[arg(long, value_name = "DIR")]
    pub table_cache: Option<PathBuf>,
    /// Keep no table across runs: each run builds the tables it needs, and writes nothing.
    #[arg(long, conflicts_with = "table_cache")]
    pub no_table_cache: bool,
    /// A table whose file would be larger is not kept in the cache (said once in the log).
    #[arg(long, value_name = "BYTES", default_value_t = TableCacheFlags::default().table_cache_max_bytes)]
    pub table_cache_max_bytes: u64,
}

impl Default for TableCacheFlags {
    fn default() -> Self {
        TableCacheFlags {
            table_cache: None,
            no_table_cache: false,
            // Every Stone Game IV table up to its largest limit fits (3.4 MB at the
            // default 10^9), and so do Nim Square tables up to about 5 x 10^8 piles (two
            // bytes a pile; 20 MB at the default 10^7); a larger one is for a file of
            // its own (--grundy-table), not for a home directory to fill unasked.
            table_cache_max_bytes: 1 << 30,
        }
    }
}

impl TableCacheFlags {
    /// The cache these flags ask for, its directory created: none with
    /// `--no-table-cache`, or (with a warning) when the directory cannot be had.
    pub fn open(&self) -> Option<TableCache> {
        if self.no_table_cache {
            return None;
        }
        let Some(dir) = self.table_cache.clone().or_else(|| Some(dirs::cache_dir()?.join("gamesolver")))
        else {
            tracing::warn!("no table cache: this system has no cache directory (give --table-cache DIR)");
            return None;
        };
        if let Err(err) = std::fs::create_dir_all(&dir) {
            tracing::warn!("no table cache: cannot create {}: {err}", dir.display());
            return None;
        }
        Some(TableCache { dir, max_bytes: self.table_cache_max_bytes })
    }
}

impl Default for TablesConfig {
    fn default() -> Self {
        let games = GameKind::ALL.into_iter().filter_map(|game| {
            let table = game.table()?;
            Some((game, TableConfig { max_n: table.default_limit, precompute: 0, file: None }))
        });
        TablesConfig { games: games.collect(), cache: None }
    }
}

impl TablesConfig {
    /// These tables, the ones without a file of their own kept in `cache`.
    pub fn with_cache(self, cache: Option<TableCache>) -> Self {
        TablesConfig { cache, ..self }
    }

    /// `game`'s table flags; `None` for a game without a table.
    pub fn get(&self, game: GameKind) -> Option<&TableConfig> {
        self.games.iter().find(|(kind, _)| *kind == game).map(|(_, config)| config)
    }

    /// `game`'s table flags, to change; `None` for a game without a table.
    pub fn get_mut(&mut self, game: GameKind) -> Option<&mut TableConfig> {
        self.games.iter_mut().find(|(kind, _)| *kind == game).map(|(_, config)| config)
    }

    /// Empty tables of the limits these flags set.
    pub fn tables(&self) -> Tables {
        Tables::with_limits(|game| self.get(game).map_or(0, |table| table.max_n))
    }
}

/// The ids of a table's three flags: `iv_max_n`, `iv_precompute`, `iv_table`.
fn table_flag_ids(name: &str) -> [String; 3] {
    [format!("{name}_max_n"), format!("{name}_precompute"), format!("{name}_table")]
}

impl clap::FromArgMatches for TablesConfig {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut config = TablesConfig::default();
        config.update_from_arg_matches(matches)?;
        Ok(config)
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        for (game, config) in &mut self.games {
            let Some(table) = game.table() else { continue };
            let [max_n, precompute, file] = table_flag_ids(table.name);
            let read = |id: &str| matches.try_get_one::<u64>(id).ok().flatten().copied();
            config.max_n = read(&max_n).unwrap_or(config.max_n);
            config.precompute = read(&precompute).unwrap_or(config.precompute);
            if let Some(path) = matches.try_get_one::<PathBuf>(&file).ok().flatten() {
                config.file = Some(path.clone());
            }
        }
        Ok(())
    }
}

impl clap::Args for TablesConfig {
    fn augment_args(mut command: clap::Command) -> clap::Command {
        // Under the heading the flattening gives (the server's, the client's embedded
        // server's); each flag's help names its game.
        for (game, config) in TablesConfig::default().games {
            let Some(table) = game.table() else { continue };
            let (name, title) = (table.name, game.title());
            let [max_n, precompute, file] = table_flag_ids(name);
            command = command
                .arg(
                    clap::Arg::new(max_n)
                        .long(format!("{name}-max-n"))
                        .value_name("N")
                        .default_value(config.max_n.to_string())
                        .value_parser(clap::value_parser!(u64).range(..=table.max_limit))
                        .help(format!("Largest {title} pile answered (OUT_OF_RANGE beyond it)")),
                )
                .arg(
                    clap::Arg::new(precompute)
                        .long(format!("{name}-precompute"))
                        .value_name("N")
                        .default_value(config.precompute.to_string())
                        .value_parser(clap::value_parser!(u64))
                        .help(format!(
                            "{title} piles put in the table at start-up, in the background while serving; \
                             none by default (a request grows the table as far as it needs)"
                        )),
                )
                .arg(
                    clap::Arg::new(file)
                        .long(format!("{name}-table"))
                        .value_name("PATH")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help(format!(
                            "{title} table file: loaded at start (recomputed if damaged; refused if its \
                             directory is missing or it is not a table), saved after the start-up \
                             precompute and at shutdown when the table has grown"
                        )),
                );
        }
        command
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        TablesConfig::augment_args(command)
    }
}

/// A table file that start-up cannot use: which game's, and why.
#[derive(Debug, thiserror::Error)]
#[error("{} table: {error}", game.name())]
pub struct TableError {
    /// The game whose table it is.
    pub game: GameKind,
    /// Why the file cannot be used. Not a `source`: the message already carries it, and
    /// `{:#}` would print it twice.
    pub error: TableFileError,
}

/// A table and, with its file flag (or a cache), its file.
type TableFile = (Arc<dyn Table>, Option<Arc<dyn StoredTable>>);

/// Every table bound to the file its flag names, else to its file in the cache, if any.
pub(crate) fn files(tables: &Tables, config: &TablesConfig) -> Vec<TableFile> {
    struct Files<'a>(&'a TablesConfig, Vec<TableFile>);
    impl TableVisitor for Files<'_> {
        fn visit<T: TableGame>(&mut self, table: &Arc<T>) {
            let game = table.game();
            let file: Option<PathBuf> = self.0.get(game).and_then(|config| config.file.clone());
            let stored = match (file, &self.0.cache, game.table()) {
                (Some(path), _, _) => Some(crate::tables::bind(Arc::clone(table), path)),
                (None, Some(cache), Some(facts)) => Some(crate::tables::bind_cached(
                    Arc::clone(table),
                    cache.file(facts.name),
                    cache.max_bytes,
                )),
                (None, _, _) => None,
            };
            self.1.push((Arc::clone(table) as Arc<dyn Table>, stored));
        }
    }
    let mut files = Files(config, Vec::new());
    tables.visit(&mut files);
    files.1
}

/// Opens every table file of `config` into fresh tables of its limits, as start-up
/// would, and keeps nothing: what `--check-config` asks.
pub(crate) fn check(config: &TablesConfig) -> Result<(), TableError> {
    let tables = config.tables();
    for (table, stored) in files(&tables, config) {
        if let Some(stored) = stored {
            stored.open().map_err(|error| TableError { game: table.game(), error })?;
        }
    }
    Ok(())
}

/// A table and, with its file flag, the file that keeps it across restarts.
#[derive(Debug)]
pub(crate) struct TableLifecycle {
    table: Arc<dyn Table>,
    store: Option<Arc<dyn StoredTable>>,
    metrics: Metrics,
}

impl TableLifecycle {
    /// Step 1, before serving: loads every table's file into its table. A file that
    /// cannot be used at all stops the start; a damaged one is recomputed.
    pub(crate) async fn open_all(
        tables: &Tables,
        config: &TablesConfig,
        metrics: &Metrics,
    ) -> Result<Vec<TableLifecycle>, TableError> {
        let mut opened = Vec::new();
        for (table, store) in files(tables, config) {
            opened.push(TableLifecycle::open(table, store, metrics.clone()).await?);
        }
        Ok(opened)
    }

    /// [`TableLifecycle::open_all`] for one table.
    async fn open(
        table: Arc<dyn Table>,
        store: Option<Arc<dyn StoredTable>>,
        metrics: Metrics,
    ) -> Result<Self, TableError> {
        let game = table.game();
        if let Some(stored) = &store {
            let opening = Arc::clone(stored);
            let opened = tokio::task::spawn_blocking(move || opening.open())
                .await
                .unwrap_or_else(|panicked| std::panic::resume_unwind(panicked.into_panic()));
            let opened = match opened {
                Ok(opened) => opened,
                // A cache is a convenience: one that cannot be used (its directory not
                // writable, a link, a newer build's file) leaves the table unkept.
                Err(error) if stored.cached() => {
                    tracing::warn!("not keeping the {} table in the table cache: {error}", game.name());
                    return Ok(TableLifecycle { table, store: None, metrics });
                }
                Err(error) => return Err(TableError { game, error }),
            };
            let (path, name) = (stored.path().display(), game.name());
            match opened {
                Opened::Loaded(covered) => tracing::info!(%path, covered, "{name} table loaded"),
                Opened::Missing => {
                    tracing::info!(%path, "no {name} table yet; it will be computed and saved")
                }
                Opened::Untrusted(err) => tracing::warn!("ignoring {name} table: {err}; recomputing"),
            }
        }
        Ok(TableLifecycle { table, store, metrics })
    }

    /// Step 2, while serving: covers piles below the game's `--NAME-precompute` on a
    /// thread of its own, then saves. Requests inside the range covered so far are
    /// answered meanwhile, and larger ones wait for (then continue) this extension. A
    /// plain thread, not the blocking pool, so that it never delays the runtime's
    /// shutdown.
    pub(crate) fn precompute_in_background(&self, config: &TablesConfig) {
        let game = self.table.game();
        let precompute = config.get(game).map_or(0, |table| table.precompute);
        let n = precompute.min(self.table.limit() + 1);
        if n == 0 || !self.table.needs_extension(n - 1) {
            return;
        }
        let (table, store, metrics) = (Arc::clone(&self.table), self.store.clone(), self.metrics.clone());
        let name = format!("{}-precompute", game.label());
        let spawned = std::thread::Builder::new().name(name).spawn(move || {
            let started = Instant::now();
            if table.extend_to(n - 1).is_ok() {
                let seconds = started.elapsed().as_secs_f64();
                metrics.observe_extension(game, "precompute", seconds);
                tracing::info!(covered = table.covered(), seconds, "{} table precomputed", game.name());
            }
            if let Some(store) = store {
                store.save_or_report();
            }
        });
        if let Err(err) = spawned {
            tracing::warn!("no {} precompute: {err}", game.name());
        }
    }

    /// Step 3, after serving: saves the table if requests grew it.
    pub(crate) async fn save(self) {
        if let Some(store) = self.store {
            let _ = tokio::task::spawn_blocking(move || store.save_or_report()).await;
        }
    }
}

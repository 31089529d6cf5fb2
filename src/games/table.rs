//! What a game that answers from a table of bounded size tells the rest of the crate:
//! its limit, how far its table covers, how it grows, and what it keeps on disk.
//!
//! The server's table lifecycle (flags, file, precompute, metrics) and the table file
//! (`crate::tables`) are written once against these traits, so that a table game brings
//! only its table, its codec and its line in [`super::Tables`].

use super::{GameKind, GameRef, SolveError};

/// A growing table that answers one game, as the solver and the server's lifecycle see
/// it (object safe: the server holds every table game's behind one type).
pub trait Table: Send + Sync + std::fmt::Debug + 'static {
    /// The game the table answers.
    fn game(&self) -> GameKind;
    /// The largest pile the table answers.
    fn limit(&self) -> u64;
    /// Every pile below this is already in the table.
    fn covered(&self) -> u64;
    /// True when answering a pile of `n` first needs the table to grow (a slow,
    /// blocking call).
    fn needs_extension(&self, n: u64) -> bool;
    /// Grows the table to cover `n`; blocks. A pile beyond the limit is refused.
    fn extend_to(&self, n: u64) -> Result<(), SolveError>;
    /// The pile the table is growing to while an extension runs, for a progress display
    /// (with [`Table::covered`], how far it is).
    fn growing_to(&self) -> Option<u64>;
}

/// A [`Table`] that a server keeps in a file across restarts.
pub trait TableGame: Table + Sized {
    /// The table's contents as saved: its on-disk codec.
    type Saved: TableCodec;
    /// An empty table answering piles up to `limit` (at most [`GameKind::max_limit`]).
    fn with_limit(limit: u64) -> Self;
    /// What the table covers now, to be saved.
    fn saved(&self) -> Self::Saved;
    /// Replaces the table's contents by `saved` after checking them; keeps the current
    /// contents when they already cover more.
    fn restore(&self, saved: Self::Saved) -> Result<(), <Self::Saved as TableCodec>::Invalid>;
    /// Warms what solving `games` on several threads will read; nothing by default.
    /// Generic rather than behind `dyn`, so that the loop is one piece and its loads
    /// overlap: through a call a game, warming took eight times as long
    /// (docs/performance.md).
    fn preload<'a>(&self, _games: impl Iterator<Item = GameRef<'a>>) {}
}

/// A table's contents and their bytes on disk, past the header every table file shares
/// (magic, version, a reserved word, `covered`) and before its checksum.
pub trait TableCodec: Sized + Send + 'static {
    /// The game whose table it is.
    const GAME: GameKind;
    /// The file's first 8 bytes: whose table it is.
    const MAGIC: [u8; 8];
    /// The version written.
    const VERSION: u32;
    /// Every version read, [`TableCodec::VERSION`] included; a newer one is refused.
    const READS: &'static [u32];
    /// Why well-formed bytes are not this table.
    type Invalid: std::error::Error + Send + Sync + 'static;

    /// Every pile below this is in the contents.
    fn covered(&self) -> u64;
    /// Appends the body (what follows the shared header) in [`TableCodec::VERSION`].
    fn encode_body(&self, bytes: &mut Vec<u8>);
    /// The whole file's length in `version`, given `covered` and the body read so far
    /// (`rest`, checksum included); `Err` with the least length when `rest` is too short
    /// to tell.
    fn file_len(version: u32, covered: u64, rest: &[u8]) -> Result<u64, u64>;
    /// The contents from a body of the length [`TableCodec::file_len`] gave, whose
    /// checksum matched.
    fn decode_body(version: u32, covered: u64, body: &[u8]) -> Result<Self, Self::Invalid>;
}

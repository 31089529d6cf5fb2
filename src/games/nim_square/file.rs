//! The Nim Square table on disk: the Grundy value of every pile below `covered`, so that
//! a restarted server answers at once. The header, the checksum and every check of the
//! file as a whole are the table file's (`crate::tables`); this is the values' codec.
//!
//! After the shared header (magic `GSNIMGRU`, version 1, reserved word, covered): covered
//! × u16 values, little-endian. Values that fail [`check_grundy_values`] are not trusted.

use super::{check_grundy_values, GrundyTable, InvalidGrundyTable};
use crate::games::table::{Table, TableCodec, TableGame};
use crate::games::{GameKind, SolveError};

/// The header every table file starts with, and the checksum after the values.
const FRAME_BYTES: u64 = 24 + 4;

/// A saved table: the Grundy values of the piles below `covered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrundyTableFile {
    /// Every pile below this has its value.
    pub covered: u64,
    /// g(n) for every n below `covered`.
    pub values: Vec<u16>,
}

impl TableCodec for GrundyTableFile {
    const GAME: GameKind = GameKind::NimSquare;
    const MAGIC: [u8; 8] = *b"GSNIMGRU";
    const VERSION: u32 = 1;
    const READS: &'static [u32] = &[1];
    type Invalid = InvalidGrundyTable;

    fn covered(&self) -> u64 {
        self.covered
    }

    fn encode_body(&self, bytes: &mut Vec<u8>) {
        self.values.iter().for_each(|value| bytes.extend_from_slice(&value.to_le_bytes()));
    }

    fn file_len(_version: u32, covered: u64, _rest: &[u8]) -> Result<u64, u64> {
        Ok(covered.saturating_mul(2).saturating_add(FRAME_BYTES))
    }

    fn decode_body(_version: u32, covered: u64, body: &[u8]) -> Result<Self, InvalidGrundyTable> {
        let values: Vec<u16> = body.chunks_exact(2).map(|v| u16::from_le_bytes([v[0], v[1]])).collect();
        check_grundy_values(covered, &values)?;
        Ok(GrundyTableFile { covered, values })
    }
}

impl Table for GrundyTable {
    fn game(&self) -> GameKind {
        GameKind::NimSquare
    }
    fn limit(&self) -> u64 {
        GrundyTable::limit(self)
    }
    fn covered(&self) -> u64 {
        GrundyTable::covered(self)
    }
    fn needs_extension(&self, n: u64) -> bool {
        GrundyTable::needs_extension(self, n)
    }
    fn extend_to(&self, n: u64) -> Result<(), SolveError> {
        GrundyTable::extend_to(self, n)
    }
    fn growing_to(&self) -> Option<u64> {
        self.grower.target()
    }
}

impl TableGame for GrundyTable {
    type Saved = GrundyTableFile;

    fn with_limit(limit: u64) -> Self {
        GrundyTable::new(limit)
    }
    fn saved(&self) -> GrundyTableFile {
        let (covered, values) = self.snapshot();
        GrundyTableFile { covered, values }
    }
    fn restore(&self, saved: GrundyTableFile) -> Result<(), InvalidGrundyTable> {
        GrundyTable::restore(self, saved.covered, saved.values)
    }
}

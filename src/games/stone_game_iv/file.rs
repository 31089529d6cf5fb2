//! The Stone Game IV table on disk: the sorted list of P-positions, so that a restarted
//! server answers at once. The header, the checksum and every check of the file as a
//! whole are the table file's (`crate::tables`); this is the list's codec.
//!
//! After the shared header (magic `GSIVLOSE`, version, reserved word, covered), little
//! endian: count (u64), then
//! - version 2, written: the payload's length in bytes (u64), then count LEB128 varints,
//!   the first P-position and then each one's distance from the previous minus 1 (far
//!   smaller than `u64`s; `docs/performance.md` has the sizes). Only the minimal
//!   encoding of a varint is read, so a list has one file.
//! - version 1, still read: count × u32 P-positions (a table below 2^32).
//!
//! A list that is not the minimal varints its count says, or that fails
//! [`check_losing_list`], is not trusted.

use super::{check_losing_list, InvalidLosingList, StoneGameIvTable};
use crate::games::table::{Table, TableCodec, TableGame};
use crate::games::{GameKind, GameRef, SolveError};

/// The version written.
const VERSION: u32 = 2;
/// The version of `u32` P-positions, still read.
const VERSION_U32: u32 = 1;
/// The header every table file starts with (magic, version, reserved word, covered).
const SHARED_HEADER_BYTES: u64 = 24;
/// The shared header, then the count: version 1's header.
const HEADER_V1_BYTES: u64 = SHARED_HEADER_BYTES + 8;
/// Version 2's header: version 1's and the payload's length.
const HEADER_V2_BYTES: u64 = HEADER_V1_BYTES + 8;
/// The checksum after the body.
const CRC_BYTES: u64 = 4;

/// A saved table: the P-positions below `covered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IvTableFile {
    /// Every n below this is classified.
    pub covered: u64,
    /// The P-positions below `covered`, strictly increasing.
    pub losing: Vec<u64>,
}

/// Why a well-formed Stone Game IV table file is not the table it claims to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidIvTable {
    /// The payload is not the header's count of minimal varints, each P-position
    /// below 2^64, and nothing else.
    #[error("P-position {index} is not encoded as a minimal varint")]
    BadEncoding {
        /// The index of the first P-position that fails (the count, for bytes left over).
        index: u64,
    },
    /// The list is not the P-positions it claims to be.
    #[error(transparent)]
    BadList(#[from] InvalidLosingList),
}

impl TableCodec for IvTableFile {
    const GAME: GameKind = GameKind::StoneGameIv;
    const MAGIC: [u8; 8] = *b"GSIVLOSE";
    const VERSION: u32 = VERSION;
    const READS: &'static [u32] = &[VERSION_U32, VERSION];
    type Invalid = InvalidIvTable;

    fn covered(&self) -> u64 {
        self.covered
    }

    fn encode_body(&self, bytes: &mut Vec<u8>) {
        bytes.extend_from_slice(&(self.losing.len() as u64).to_le_bytes());
        let length_at = bytes.len();
        bytes.extend_from_slice(&0u64.to_le_bytes());
        let mut next = 0;
        for &p in &self.losing {
            push_varint(bytes, p - next);
            next = p + 1;
        }
        let payload = (bytes.len() - length_at - 8) as u64;
        bytes[length_at..length_at + 8].copy_from_slice(&payload.to_le_bytes());
    }

    fn file_len(version: u32, _covered: u64, rest: &[u8]) -> Result<u64, u64> {
        let u64_at =
            |at: usize| rest.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        match version {
            VERSION_U32 => match u64_at(0) {
                Some(count) => Ok(count.saturating_mul(4).saturating_add(HEADER_V1_BYTES + CRC_BYTES)),
                None => Err(HEADER_V1_BYTES + CRC_BYTES),
            },
            _ => match u64_at(8)
                .filter(|_| rest.len() as u64 + SHARED_HEADER_BYTES >= HEADER_V2_BYTES + CRC_BYTES)
            {
                Some(payload) => Ok(payload.saturating_add(HEADER_V2_BYTES + CRC_BYTES)),
                None => Err(HEADER_V2_BYTES + CRC_BYTES),
            },
        }
    }

    fn decode_body(version: u32, covered: u64, body: &[u8]) -> Result<Self, InvalidIvTable> {
        let count = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
        let losing = match version {
            VERSION_U32 => body[8..]
                .chunks_exact(4)
                .map(|p| u64::from(u32::from_le_bytes(p.try_into().expect("4 bytes"))))
                .collect(),
            _ => decode_gaps(&body[16..], count).map_err(|index| InvalidIvTable::BadEncoding { index })?,
        };
        check_losing_list(covered, &losing)?;
        Ok(IvTableFile { covered, losing })
    }
}

/// Appends `value` as a LEB128 varint: 7 bits a byte, low first, the high bit set on
/// every byte but the last.
fn push_varint(bytes: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        bytes.push(value as u8 | 0x80);
        value >>= 7;
    }
    bytes.push(value as u8);
}

/// The `count` P-positions of a version 2 payload, or the index of the first that is
/// not a minimal varint, overflows, or runs past the end (`count` for bytes left over).
fn decode_gaps(payload: &[u8], count: u64) -> Result<Vec<u64>, u64> {
    // Each takes at least a byte: a count beyond the payload fails below, unallocated.
    let mut losing = Vec::with_capacity(count.min(payload.len() as u64) as usize);
    let (mut at, mut next) = (0, 0u64);
    for index in 0..count {
        let (mut gap, mut shift) = (0u64, 0);
        loop {
            let Some(&byte) = payload.get(at) else { return Err(index) };
            at += 1;
            let bits = u64::from(byte & 0x7F);
            // The tenth byte holds bit 63 alone; a last byte of 0 (after the first) is
            // an overlong encoding.
            if shift == 63 && bits > 1 || byte == 0 && shift > 0 {
                return Err(index);
            }
            gap |= bits << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err(index);
            }
        }
        let p = next.checked_add(gap).ok_or(index)?;
        losing.push(p);
        next = p.checked_add(1).ok_or(index)?;
    }
    if at != payload.len() {
        return Err(count);
    }
    Ok(losing)
}

impl Table for StoneGameIvTable {
    fn game(&self) -> GameKind {
        GameKind::StoneGameIv
    }
    fn limit(&self) -> u64 {
        StoneGameIvTable::limit(self)
    }
    fn covered(&self) -> u64 {
        StoneGameIvTable::covered(self)
    }
    fn needs_extension(&self, n: u64) -> bool {
        StoneGameIvTable::needs_extension(self, n)
    }
    fn extend_to(&self, n: u64) -> Result<(), SolveError> {
        StoneGameIvTable::extend_to(self, n)
    }
    fn growing_to(&self) -> Option<u64> {
        self.grower.target()
    }
}

impl TableGame for StoneGameIvTable {
    type Saved = IvTableFile;

    fn with_limit(limit: u64) -> Self {
        StoneGameIvTable::new(limit)
    }
    fn saved(&self) -> IvTableFile {
        let (covered, losing) = self.snapshot();
        IvTableFile { covered, losing }
    }
    fn restore(&self, saved: IvTableFile) -> Result<(), InvalidIvTable> {
        Ok(StoneGameIvTable::restore(self, saved.covered, saved.losing)?)
    }
    fn preload<'a>(&self, games: impl Iterator<Item = GameRef<'a>>) {
        self.preload_moves(games.filter_map(|game| {
            let GameRef::StoneGameIv(n) = game else { return None };
            Some(n)
        }));
    }
}

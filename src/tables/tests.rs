//! The table file's checks, on both table games' files.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;
use crate::games::nim_square::GrundyTableFile;
use crate::games::stone_game_iv::{losing_positions_below, InvalidIvTable, IvTableFile};
use crate::games::{GrundyTable, StoneGameIvTable};

// Stone Game IV's file.
fn decode(bytes: &[u8]) -> Result<IvTableFile, TableFileError> {
    IvTableFile::decode(bytes, Path::new("iv.table"))
}

fn table() -> IvTableFile {
    IvTableFile { covered: 1_200_000, losing: losing_positions_below(1_200_000) }
}

#[test]
fn round_trips_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iv.table");
    table().save(&path).unwrap();
    assert_eq!(IvTableFile::load(&path).unwrap(), table());
    // Saving again replaces the file and leaves no temporary behind.
    IvTableFile { covered: 10, losing: losing_positions_below(10) }.save(&path).unwrap();
    assert_eq!(IvTableFile::load(&path).unwrap().covered, 10);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = IvTableFile::load(Path::new("/nonexistent/iv.table")).unwrap_err();
    assert!(matches!(err, TableFileError::Io { .. }));
    assert!(err.to_string().starts_with("/nonexistent/iv.table: "), "{err}");
}

#[test]
fn every_truncation_is_rejected() {
    let bytes = table().encode();
    for len in [0, 7, 8, 20, 32, 36, bytes.len() / 2, bytes.len() - 1] {
        // Cut anywhere, even inside the magic, it is a damaged table (recomputed),
        // not someone else's file (refused).
        let err = decode(&bytes[..len]).unwrap_err();
        assert!(matches!(err, TableFileError::BadLength { .. }), "len {len}: {err}");
    }
    let mut padded = bytes.clone();
    padded.push(0);
    assert!(matches!(decode(&padded), Err(TableFileError::BadLength { .. })));
}

#[test]
fn an_empty_file_is_recomputed_and_saves_left_by_dead_processes_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iv.table");
    fs::write(&path, b"").unwrap();
    let stale = [dir.path().join("iv.table.tmp4000000.0"), dir.path().join("iv.table.tmp12.3")];
    let kept = [dir.path().join("iv.table.tmpx.1"), dir.path().join("other.table.tmp12.3")];
    for file in stale.iter().chain(&kept) {
        fs::write(file, b"partial").unwrap();
        super::disk::tests::age(file);
    }
    let table = StoneGameIvTable::new(1000);
    assert!(matches!(
        TableStore::<StoneGameIvTable>::new(&path).open(&table),
        Ok(Opened::Untrusted(TableFileError::BadLength { .. }))
    ));
    assert!(stale.iter().all(|file| !file.exists()), "stale saves removed");
    assert!(kept.iter().all(|file| file.exists()), "nothing else touched");
}

#[test]
fn a_flipped_bit_anywhere_is_rejected() {
    let bytes = table().encode();
    for at in (0..bytes.len()).step_by(997).chain([8, 16, 24, bytes.len() - 1]) {
        let mut corrupt = bytes.clone();
        corrupt[at] ^= 0x10;
        assert!(decode(&corrupt).is_err(), "flip at {at} accepted");
    }
    let mut corrupt = bytes;
    corrupt[32 + 40] ^= 1;
    assert!(matches!(decode(&corrupt), Err(TableFileError::BadChecksum { .. })));
}

#[test]
fn wrong_magic_and_version_are_rejected() {
    let mut bytes = table().encode();
    bytes[0] = b'X';
    assert!(matches!(decode(&bytes), Err(TableFileError::BadMagic { .. })));
    let mut bytes = table().encode();
    bytes[8] = 3;
    assert!(matches!(decode(&bytes), Err(TableFileError::UnsupportedVersion { version: 3, .. })));
}

/// A file in version 1: `u32` P-positions, no payload length.
fn encode_v1(file: &IvTableFile) -> Vec<u8> {
    let mut bytes = IvTableFile::MAGIC.to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&file.covered.to_le_bytes());
    bytes.extend_from_slice(&(file.losing.len() as u64).to_le_bytes());
    for &p in &file.losing {
        bytes.extend_from_slice(&u32::try_from(p).unwrap().to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn a_version_1_file_still_loads_and_is_saved_again_in_version_2() {
    let v1 = encode_v1(&table());
    assert_eq!(v1.len(), 32 + 4 * table().losing.len() + CRC_BYTES);
    let loaded = decode(&v1).unwrap();
    assert_eq!(loaded, table());
    let v2 = loaded.encode();
    assert_eq!(u32::from_le_bytes(v2[8..12].try_into().unwrap()), 2);
    // Gaps below 2^14 take two bytes, against four for a u32.
    assert!(v2.len() < v1.len() * 55 / 100, "{} bytes against {}", v2.len(), v1.len());
    assert_eq!(decode(&v2).unwrap(), table());
    // A version 1 file is checked as strictly as ever.
    let mut truncated = v1.clone();
    truncated.truncate(v1.len() - 4);
    assert!(matches!(decode(&truncated), Err(TableFileError::BadLength { .. })));
    let mut unsorted = table();
    unsorted.losing.swap(5, 6);
    assert!(matches!(decode(&encode_v1(&unsorted)), Err(TableFileError::Invalid { .. })));
}

#[test]
fn positions_above_2_to_the_32_round_trip_and_stay_unchecked_above_the_spot_check() {
    // Made-up positions beyond the 2^20 the load recomputes: only form is checked.
    let mut losing = losing_positions_below(1 << 20);
    losing.extend([1 << 20 | 1, (1 << 32) - 1, 1 << 32, (1 << 32) + 1, 7_777_777_777, 9_999_999_999]);
    let file = IvTableFile { covered: 10_000_000_000, losing };
    let bytes = file.encode();
    assert_eq!(decode(&bytes).unwrap(), file);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iv.table");
    file.save(&path).unwrap();
    assert_eq!(IvTableFile::load(&path).unwrap(), file);
    // Beyond the largest table: refused.
    let too_large = IvTableFile { covered: crate::games::stone_game_iv::MAX_LIMIT + 2, ..file };
    assert!(matches!(decode(&too_large.encode()), Err(TableFileError::Invalid { .. })));
}

/// `payload` as a version 2 file of `count` P-positions below `covered`, with a
/// valid checksum.
fn v2_with_payload(covered: u64, count: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = IvTableFile::MAGIC.to_vec();
    bytes.extend_from_slice(&2u32.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&covered.to_le_bytes());
    bytes.extend_from_slice(&count.to_le_bytes());
    bytes.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    bytes.extend_from_slice(payload);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

#[test]
fn only_minimal_varints_that_fill_the_payload_are_read() {
    // 0, 2, 5 as 0 then gaps minus one: 1, 2.
    let good = v2_with_payload(6, 3, &[0, 1, 2]);
    assert_eq!(decode(&good).unwrap(), IvTableFile { covered: 6, losing: vec![0, 2, 5] });
    assert_eq!(IvTableFile { covered: 6, losing: vec![0, 2, 5] }.encode(), good);
    let bad_encoding = |bytes: &[u8]| match decode(bytes) {
        Err(TableFileError::Invalid { source, .. }) => match source.downcast_ref() {
            Some(InvalidIvTable::BadEncoding { index }) => Some(*index),
            _ => None,
        },
        _ => None,
    };
    // 1 written in two bytes: overlong.
    assert_eq!(bad_encoding(&v2_with_payload(6, 3, &[0, 0x81, 0x00, 2])), Some(1));
    // A varint cut short, a count the payload does not hold, bytes left over.
    assert_eq!(bad_encoding(&v2_with_payload(6, 3, &[0, 1, 0x82])), Some(2));
    assert_eq!(bad_encoding(&v2_with_payload(6, u64::MAX, &[0, 1, 2])), Some(3));
    assert_eq!(bad_encoding(&v2_with_payload(6, 2, &[0, 1, 2])), Some(2));
    // Eleven bytes, and ten whose last holds more than bit 63.
    assert_eq!(bad_encoding(&v2_with_payload(6, 1, &[0xFF; 11])), Some(0));
    let mut over = vec![0xFF; 9];
    over.push(0x02);
    assert_eq!(bad_encoding(&v2_with_payload(6, 1, &over)), Some(0));
    // The largest gap that fits, then one more P-position: past 2^64.
    let mut max = vec![0xFF; 9];
    max.push(0x01);
    assert_eq!(bad_encoding(&v2_with_payload(6, 1, &max)), Some(0));
    let err = decode(&v2_with_payload(6, 3, &[0, 1, 0x82])).unwrap_err();
    assert_eq!(err.to_string(), "iv.table: P-position 2 is not encoded as a minimal varint");
}

#[test]
fn a_non_zero_reserved_word_is_refused_even_with_a_good_checksum() {
    let mut bytes = table().encode();
    bytes[12] = 1;
    let content = bytes.len() - CRC_BYTES;
    let crc = crc32fast::hash(&bytes[..content]);
    bytes[content..].copy_from_slice(&crc.to_le_bytes());
    let err = decode(&bytes).unwrap_err();
    assert!(matches!(err, TableFileError::UnsupportedFlags { flags: 1, .. }), "{err}");
    assert!(err.to_string().contains("reserved header word 0x1, expected 0 (a newer format?)"), "{err}");
}

#[test]
fn a_well_formed_file_with_a_wrong_list_is_rejected() {
    let mut wrong = table();
    wrong.losing.retain(|&p| p != 5);
    assert!(matches!(decode(&wrong.encode()), Err(TableFileError::Invalid { .. })));
    let mut beyond = table();
    beyond.covered = 1000;
    assert!(matches!(decode(&beyond.encode()), Err(TableFileError::Invalid { .. })));
}

#[test]
fn a_store_saves_only_when_the_table_grew_and_restores_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::<StoneGameIvTable>::new(dir.path().join("iv.table"));
    let table = StoneGameIvTable::new(10_000_000);
    assert!(matches!(store.load_into(&table), Err(TableFileError::Io { .. })));
    assert_eq!(store.save_if_grown(&table).unwrap(), None);
    table.extend_to(1_000_000).unwrap();
    let covered = table.covered();
    assert_eq!(store.save_if_grown(&table).unwrap(), Some(covered));
    assert_eq!(store.save_if_grown(&table).unwrap(), None);

    let restarted = StoneGameIvTable::new(10_000_000);
    assert_eq!(TableStore::<StoneGameIvTable>::new(store.path()).load_into(&restarted).unwrap(), covered);
    assert_eq!(restarted.snapshot(), table.snapshot());

    fs::write(store.path(), b"GSIVLOSE garbage").unwrap();
    let after_corruption = StoneGameIvTable::new(10_000_000);
    assert!(TableStore::<StoneGameIvTable>::new(store.path()).load_into(&after_corruption).is_err());
    assert_eq!(after_corruption.covered(), 0);
}

/// Two processes sharing a file (two client runs over the table cache): the one whose
/// table covers less does not replace the other's larger save; a cache's limit keeps a
/// table too large out, and a file too large unread.
#[test]
fn a_shared_file_keeps_the_larger_table_and_a_cache_keeps_none_over_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("iv.table");
    let (small, large) = (StoneGameIvTable::new(10_000_000), StoneGameIvTable::new(10_000_000));
    let (first, second) = (TableStore::<StoneGameIvTable>::new(&path), TableStore::new(&path));
    assert!(matches!(first.open(&small), Ok(Opened::Missing)));
    assert!(matches!(second.open(&large), Ok(Opened::Missing)));
    large.extend_to(2_000_000).unwrap();
    small.extend_to(100_000).unwrap();
    assert_eq!(second.save_if_grown(&large).unwrap(), Some(large.covered()));
    assert_eq!(first.save_if_grown(&small).unwrap(), None, "the larger save is kept");
    assert_eq!(IvTableFile::load(&path).unwrap().covered, large.covered());

    let cached = TableStore::<StoneGameIvTable>::new(dir.path().join("cached.table")).with_limit(1000);
    assert_eq!(cached.save_if_grown(&large).unwrap(), None, "over the limit: not kept");
    assert!(!dir.path().join("cached.table").exists());
    let reader = TableStore::<StoneGameIvTable>::new(&path).with_limit(1000);
    let err = reader.open(&StoneGameIvTable::new(10_000_000)).unwrap();
    assert!(matches!(err, Opened::Untrusted(TableFileError::TooLarge { limit: 1000, .. })), "{err:?}");
}

#[test]
fn open_refuses_what_it_could_never_save_or_would_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let table = StoneGameIvTable::new(10_000);
    let open = |path: PathBuf| TableStore::<StoneGameIvTable>::new(path).open(&table);
    assert!(matches!(open(dir.path().join("no/such/dir/iv.table")), Err(TableFileError::NoDirectory { .. })));
    assert!(matches!(open(dir.path().join("iv.table")), Ok(Opened::Missing)));
    let notes = dir.path().join("notes.txt");
    fs::write(&notes, "notes").unwrap();
    assert!(matches!(open(notes), Err(TableFileError::BadMagic { .. })));
    let damaged = dir.path().join("damaged.table");
    let mut bytes = table_of(1000).encode();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&damaged, bytes).unwrap();
    assert!(matches!(open(damaged), Ok(Opened::Untrusted(TableFileError::BadChecksum { .. }))));
    assert_eq!(table.covered(), 0);
}

#[test]
fn a_directory_where_nothing_can_be_created_is_refused() {
    // sysfs takes no new file, not even from root.
    let path = Path::new("/sys/gamesolver-iv.table");
    let err = TableStore::<StoneGameIvTable>::new(path).open(&StoneGameIvTable::new(1000)).unwrap_err();
    assert!(matches!(err, TableFileError::NotWritable { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("/sys/gamesolver-iv.table: cannot create a file in its directory, so the table could never be saved: "),
        "{err}"
    );
}

#[test]
fn a_newer_format_is_refused_and_kept_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let table = StoneGameIvTable::new(10_000);
    for (at, value) in [(8, 3u8), (12, 1)] {
        // A valid checksum: written that way, not damaged.
        let mut bytes = table_of(1000).encode();
        bytes[at] = value;
        let content = bytes.len() - CRC_BYTES;
        let crc = crc32fast::hash(&bytes[..content]);
        bytes[content..].copy_from_slice(&crc.to_le_bytes());
        let path = dir.path().join(format!("newer-{at}.table"));
        fs::write(&path, &bytes).unwrap();
        let err = TableStore::<StoneGameIvTable>::new(&path).open(&table).unwrap_err();
        assert!(
            matches!(
                err,
                TableFileError::UnsupportedVersion { version: 3, .. }
                    | TableFileError::UnsupportedFlags { flags: 1, .. }
            ),
            "{err}"
        );
        assert!(err.to_string().ends_with("refusing to overwrite it (remove it to recompute)"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), bytes);
    }
    assert_eq!(table.covered(), 0);
}

#[cfg(unix)]
#[test]
fn a_link_at_the_table_path_is_refused_even_to_a_good_table() {
    let dir = tempfile::tempdir().unwrap();
    let (path, target) = (dir.path().join("iv.table"), dir.path().join("elsewhere.table"));
    table_of(1000).save(&target).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let table = StoneGameIvTable::new(10_000);
    let err = TableStore::<StoneGameIvTable>::new(&path).open(&table).unwrap_err();
    assert_eq!(err.to_string(), format!("{}: a symbolic link; refusing to follow it", path.display()));
    assert_eq!(table.covered(), 0);
    assert_eq!(IvTableFile::load(&target).unwrap(), table_of(1000));
}

fn table_of(covered: u64) -> IvTableFile {
    IvTableFile { covered, losing: losing_positions_below(covered) }
}

// Nim Square's file.
#[test]
fn a_saved_table_loads_back_and_damage_is_recomputed_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grundy.table");
    let table = GrundyTable::new(10_000);
    table.extend_to(5_000).unwrap();
    let store = TableStore::<GrundyTable>::new(&path);
    assert!(matches!(store.open(&table).unwrap(), Opened::Missing));
    assert_eq!(store.save_if_grown(&table).unwrap(), Some(table.covered()));
    assert_eq!(store.save_if_grown(&table).unwrap(), None, "nothing new to save");

    let fresh = GrundyTable::new(10_000);
    assert!(
        matches!(TableStore::<GrundyTable>::new(&path).open(&fresh).unwrap(), Opened::Loaded(c) if c == table.covered())
    );
    assert_eq!(fresh.snapshot(), table.snapshot());

    // Every truncation and a flipped bit are refused before anything is loaded.
    let bytes = fs::read(&path).unwrap();
    for len in [0, 7, 8, 27, bytes.len() - 1] {
        assert!(
            matches!(
                GrundyTableFile::decode(&bytes[..len], &path),
                Err(TableFileError::BadLength { .. } | TableFileError::BadChecksum { .. })
            ),
            "{len} bytes"
        );
    }
    let mut flipped = bytes.clone();
    flipped[HEADER_BYTES + 10] ^= 1;
    assert!(matches!(
        GrundyTableFile::decode(&flipped, &path),
        Err(TableFileError::BadLength { .. } | TableFileError::BadChecksum { .. })
    ));
    // A wrong value with a good checksum fails the values' check.
    let (covered, mut values) = table.snapshot();
    values[1] = 7;
    assert!(matches!(
        GrundyTableFile::decode(&GrundyTableFile { covered, values }.encode(), &path),
        Err(TableFileError::Invalid { .. })
    ));
}

#[test]
fn another_files_magic_is_refused_and_a_missing_directory_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-table");
    fs::write(&path, b"hello, world, this is not a table").unwrap();
    let table = GrundyTable::new(100);
    assert!(matches!(
        TableStore::<GrundyTable>::new(&path).open(&table),
        Err(TableFileError::BadMagic { .. })
    ));
    let nowhere = dir.path().join("missing").join("grundy.table");
    assert!(matches!(
        TableStore::<GrundyTable>::new(nowhere).open(&table),
        Err(TableFileError::NoDirectory { .. })
    ));
}

#[test]
fn a_newer_grundy_format_is_refused_and_kept_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grundy.table");
    let mut bytes = GrundyTableFile { covered: 3, values: vec![0, 1, 0] }.encode();
    bytes[8] = 2;
    let content = bytes.len() - CRC_BYTES;
    let crc = crc32fast::hash(&bytes[..content]);
    bytes[content..].copy_from_slice(&crc.to_le_bytes());
    fs::write(&path, &bytes).unwrap();
    let err = TableStore::<GrundyTable>::new(&path).open(&GrundyTable::new(100)).unwrap_err();
    assert!(matches!(err, TableFileError::UnsupportedVersion { version: 2, .. }), "{err}");
    assert_eq!(fs::read(&path).unwrap(), bytes);
}

#[cfg(unix)]
#[test]
fn a_link_at_the_grundy_table_path_is_refused_even_to_a_good_table() {
    let dir = tempfile::tempdir().unwrap();
    let (path, target) = (dir.path().join("grundy.table"), dir.path().join("elsewhere.table"));
    let grown = GrundyTable::new(1_000);
    grown.extend_to(500).unwrap();
    TableStore::<GrundyTable>::new(&target).save_if_grown(&grown).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let table = GrundyTable::new(1_000);
    let err = TableStore::<GrundyTable>::new(&path).open(&table).unwrap_err();
    assert_eq!(err.to_string(), format!("{}: a symbolic link; refusing to follow it", path.display()));
    assert_eq!(table.covered(), 0);
}

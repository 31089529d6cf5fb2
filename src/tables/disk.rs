//! What the table files share on disk: how one is read, saved and cleaned up after.
//!
//! A table file lives in a directory others may write to (a shared volume, a state
//! directory), so nothing there is trusted to be what its name says. The file is read
//! without following a link at its path; a save goes to a temporary file created
//! exclusively, under a random name, beside the table (a link planted there cannot
//! redirect it), is flushed, renamed over the table (which replaces a link there rather
//! than writing through it), and the directory is flushed, so that a crash mid-save leaves
//! the old file or the new one, never half, and never loses the rename.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// The temporary files' names: `NAME.tmp` and this many random letters and digits.
const RANDOM_CHARS: usize = 8;

/// A temporary file younger than this may be another process's save in flight (two runs
/// sharing the client's table cache), so it is left; a save takes seconds, even of the
/// largest table.
const STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(600);

/// Reads the file at `path`, refusing to follow a symbolic link there (see [`is_link`]).
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let mut file = options.open(path)?;
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut file, &mut bytes)?;
    Ok(bytes)
}

/// True when `err`, from [`read`] of `path`, is the refusal of a link at `path`.
pub(crate) fn is_link(err: &io::Error, path: &Path) -> bool {
    // O_NOFOLLOW fails with ELOOP on Linux (EMLINK on some BSDs); the path is looked at
    // again only to tell that apart from a real loop further up.
    err.kind() != io::ErrorKind::NotFound && fs::symlink_metadata(path).is_ok_and(|meta| meta.is_symlink())
}

/// Writes `bytes` to `path` atomically: a temporary file created exclusively beside it,
/// flushed to disk, renamed over it, then the directory flushed so that the rename
/// survives a crash.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| io::Error::other("the table path names no file"))?;
    let directory = directory_of(path);
    let prefix = temporary_prefix(name);
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).rand_bytes(RANDOM_CHARS);
    // As `File::create` would: readable by whoever the umask lets read the directory's files.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    // Removed on drop when anything below fails.
    let mut temporary = builder.tempfile_in(directory)?;
    temporary.write_all(bytes)?;
    temporary.as_file().sync_all()?;
    temporary.persist(path).map_err(|err| err.error)?;
    fs::File::open(directory)?.sync_all()
}

/// Removes the temporary files that saves of `path` by processes that died mid-save left
/// beside it: `NAME.tmp` and random characters (or `NAME.tmpPID.N`, as older versions
/// named them), untouched for [`STALE_AFTER`]. Called before the table's first save, when
/// none of this process's is in flight.
pub(crate) fn remove_stale_temporaries(path: &Path) {
    let Some(name) = path.file_name() else { return };
    let prefix = temporary_prefix(name).to_string_lossy().into_owned();
    let Ok(entries) = fs::read_dir(directory_of(path)) else { return };
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file_name.strip_prefix(&prefix) else { continue };
        let random = rest.len() == RANDOM_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric());
        let numbered = rest.split_once('.').is_some_and(|(pid, n)| {
            !pid.is_empty() && !n.is_empty() && pid.bytes().chain(n.bytes()).all(|b| b.is_ascii_digit())
        });
        if !random && !numbered {
            continue;
        }
        // A link is never a save's: it goes whatever its age.
        let young = fs::symlink_metadata(entry.path()).is_ok_and(|meta| {
            !meta.is_symlink()
                && meta.modified().is_ok_and(|at| at.elapsed().is_ok_and(|age| age < STALE_AFTER))
        });
        if young {
            continue;
        }
        // A link is removed, not followed.
        match fs::remove_file(entry.path()) {
            Ok(()) => {
                tracing::info!(file = %entry.path().display(), "removed a table save left by a process that died")
            }
            Err(err) => {
                tracing::warn!(file = %entry.path().display(), "cannot remove a stale table save: {err}")
            }
        }
    }
}

/// The size and modification time of the file at `path` (a link's own), if there is one.
pub(crate) fn stamp(path: &Path) -> Option<(u64, std::time::SystemTime)> {
    let meta = fs::symlink_metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// The `covered` of the table file at `path` if it is one of `magic`'s (its header alone
/// is read, not checked further): a save of a table that covers no more is not worth
/// replacing it, when another process sharing the file saved a larger one meanwhile.
pub(crate) fn covered_on_disk(path: &Path, magic: &[u8; 8]) -> Option<u64> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    let mut header = [0u8; 24];
    io::Read::read_exact(&mut options.open(path).ok()?, &mut header).ok()?;
    (header[..8] == magic[..]).then(|| u64::from_le_bytes(header[16..24].try_into().expect("8 bytes")))
}

/// Whether a save to `path` can create its temporary file: one is created beside it, as
/// a save would, and removed.
pub(crate) fn check_writable(path: &Path) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| io::Error::other("the table path names no file"))?;
    let prefix = temporary_prefix(name);
    tempfile::Builder::new()
        .prefix(&prefix)
        .rand_bytes(RANDOM_CHARS)
        .tempfile_in(directory_of(path))
        .map(drop)
}

/// Whether a save to `path` could ever succeed: its directory exists.
pub(crate) fn directory_exists(path: &Path) -> bool {
    directory_of(path).is_dir()
}

/// The directory `path` is in (`.` for a bare file name).
fn directory_of(path: &Path) -> &Path {
    path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// `NAME.tmp`: what every temporary file of the table `NAME` starts with.
fn temporary_prefix(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut prefix = name.to_owned();
    prefix.push(".tmp");
    prefix
}

#[cfg(all(test, unix))]
pub(crate) mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn a_save_writes_through_no_link_planted_beside_the_table_and_replaces_one_at_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iv.table");
        let victim = dir.path().join("victim");
        fs::write(&victim, "keep me").unwrap();
        // Every name the saves of this process would once have used, and the table path.
        let links: Vec<_> = (0..1024)
            .map(|n| dir.path().join(format!("iv.table.tmp{}.{n}", std::process::id())))
            .chain([dir.path().join("iv.table.tmp")])
            .collect();
        for link in &links {
            symlink(&victim, link).unwrap();
        }
        symlink(&victim, &path).unwrap();

        write_atomically(&path, b"the table").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep me", "written through a link");
        assert!(!fs::symlink_metadata(&path).unwrap().is_symlink(), "the table path is still a link");
        assert_eq!(read(&path).unwrap(), b"the table");
        assert!(links.iter().all(|link| fs::symlink_metadata(link).unwrap().is_symlink()));
        // Nothing else was left behind: the links, the victim, the table.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), links.len() + 2);
    }

    #[test]
    fn a_link_at_the_table_path_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let (path, target) = (dir.path().join("iv.table"), dir.path().join("elsewhere"));
        fs::write(&target, "someone else's").unwrap();
        symlink(&target, &path).unwrap();
        let err = read(&path).unwrap_err();
        assert!(is_link(&err, &path), "{err}");
        let missing = read(&dir.path().join("missing")).unwrap_err();
        assert!(!is_link(&missing, &dir.path().join("missing")));
    }

    #[test]
    fn stale_temporaries_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iv.table");
        let stale =
            ["iv.table.tmp4000000.0", "iv.table.tmp12.3", "iv.table.tmpAb3dE6gH"].map(|n| dir.path().join(n));
        let kept = ["iv.table.tmpx.1", "other.table.tmp12.3", "iv.table.tmpAb3", "iv.table"]
            .map(|n| dir.path().join(n));
        for file in stale.iter().chain(&kept) {
            fs::write(file, b"partial").unwrap();
            age(file);
        }
        // Another process's save in flight.
        let young = dir.path().join("iv.table.tmpYoung123");
        fs::write(&young, b"partial").unwrap();
        let target = dir.path().join("target");
        fs::write(&target, b"kept").unwrap();
        let link = dir.path().join("iv.table.tmpLinkLink");
        symlink(&target, &link).unwrap();
        remove_stale_temporaries(&path);
        assert!(
            stale.iter().chain([&link]).all(|file| fs::symlink_metadata(file).is_err()),
            "stale saves removed"
        );
        assert!(kept.iter().chain([&target, &young]).all(|file| file.exists()), "nothing else touched");
    }

    /// Makes `file` look untouched for an hour.
    pub(crate) fn age(file: &Path) {
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        fs::File::options().write(true).open(file).unwrap().set_modified(hour_ago).unwrap();
    }

    #[test]
    fn the_covered_of_a_table_on_disk_is_read_from_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("iv.table");
        assert_eq!(covered_on_disk(&path, b"GSIVLOSE"), None);
        let mut header = b"GSIVLOSE".to_vec();
        header.extend_from_slice(&[0; 8]);
        header.extend_from_slice(&1234u64.to_le_bytes());
        fs::write(&path, &header).unwrap();
        assert_eq!(covered_on_disk(&path, b"GSIVLOSE"), Some(1234));
        assert_eq!(covered_on_disk(&path, b"GSNIMGRU"), None, "another game's");
        fs::write(&path, &header[..20]).unwrap();
        assert_eq!(covered_on_disk(&path, b"GSIVLOSE"), None, "cut short");
    }
}

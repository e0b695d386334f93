//! Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory.
//!
//! A reader sees either the old bytes or the new ones, never a half-written file, and a
//! crash leaves at most a temp file named `.<name>.tmp.<pid>.<n>` beside the target.
//! Those are ours alone and are removed by [`clean_temp_files`] while the writer lock is
//! held (never without it: a live writer's temp file must not vanish under it).
//!
//! [`Staged`] splits a replacement for background writers: the bytes are written and synced
//! with no name and no lock, published later under the lock, and the directory synced once
//! per batch ([`DirSync`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::StoreError;

/// Distinguishes temp files of one process (several writes may be in flight in threads).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

const TEMP_MARKER: &str = ".tmp.";

fn io_err(path: &Path, source: io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn parent_and_name(path: &Path) -> Result<(&Path, String), StoreError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            io_err(
                path,
                io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"),
            )
        })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// Write `bytes` to a fresh temp file beside `path`, synced, and return the temp's path.
fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf, StoreError> {
    let (dir, name) = parent_and_name(path)?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}{TEMP_MARKER}{}.{n}", std::process::id()));
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = result {
        // Best effort: the write already failed; a leftover is cleaned under the lock later.
        let _ = fs::remove_file(&tmp);
        return Err(io_err(&tmp, e));
    }
    Ok(tmp)
}

/// Make a directory entry change (rename, link, create) durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, e))
}

/// Replace `path` with `bytes` by rename, without syncing: for rebuildable copies (the
/// mirror), made durable in bulk by [`sync_filesystem`].
pub fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let (dir, name) = parent_and_name(path)?;
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}{TEMP_MARKER}{}.{n}", std::process::id()));
    let written = fs::write(&tmp, bytes).and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(path, e));
    }
    Ok(())
}

/// Flush every pending write of the filesystem holding `dir` (one `syncfs`).
pub fn sync_filesystem(dir: &Path) -> Result<(), StoreError> {
    let d = File::open(dir).map_err(|e| io_err(dir, e))?;
    rustix::fs::syncfs(&d).map_err(|e| io_err(dir, e.into()))
}

/// Replace `path` with `bytes` atomically (create it when absent).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = write_temp(path, bytes)?;
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(path, e));
    }
    let (dir, _) = parent_and_name(path)?;
    sync_dir(dir)
}

/// When a write-once file becomes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Before the call returns: data synced before the name appears, directory synced after.
    Now,
    /// At the caller's group commit ([`crate::store::group`]): no fsync here; the caller
    /// makes the whole group durable with one `syncfs` and then records the commit.
    Group,
}

/// Create `path` with `bytes` only if it does not exist yet: `Ok(true)` when written,
/// `Ok(false)` when it already holds exactly these bytes (an idempotent re-run), and
/// [`StoreError::WouldOverwrite`] when it holds anything else.
///
/// The temp file is published with `hard_link`, which fails when the target exists — so
/// even two racing writers cannot replace each other's file (a check-then-rename could).
/// This needs a filesystem with hard links, which every local Linux and macOS one has.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<bool, StoreError> {
    write_new_with(path, bytes, Durability::Now)
}

/// [`write_new`], durable now or at the caller's group commit.
pub fn write_new_with(
    path: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<bool, StoreError> {
    let now = durability == Durability::Now;
    // A group's files are new (what a killed run left is removed first): skip the check,
    // `linkat` refuses an existing name anyway.
    if now && path.exists() {
        return compare_existing(path, bytes);
    }
    let (dir, _) = parent_and_name(path)?;
    match link_anonymous(dir, path, bytes, now) {
        Ok(Some(())) => {
            if now {
                sync_dir(dir)?;
            }
            return Ok(true);
        }
        Ok(None) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return compare_existing(path, bytes),
        Err(e) => return Err(io_err(path, e)),
    }
    let tmp = write_temp(path, bytes)?;
    let linked = fs::hard_link(&tmp, path);
    // The temp name is only a staging entry; the target (if linked) keeps the inode.
    let removed = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            removed.map_err(|e| io_err(&tmp, e))?;
            if now {
                sync_dir(dir)?;
            }
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => compare_existing(path, bytes),
        Err(e) => Err(io_err(path, e)),
    }
}

/// Linux: write into an unnamed inode (`O_TMPFILE`), sync it when `sync`, then give it its
/// name with `linkat`, which fails when the name exists. No named temp file is created and
/// unlinked, which on ext4 makes every later create in the directory scan recently freed
/// inodes — it dominated archive time. `Ok(None)` when the filesystem has no `O_TMPFILE`:
/// the caller falls back to a named temp file.
fn link_anonymous(dir: &Path, path: &Path, bytes: &[u8], sync: bool) -> io::Result<Option<()>> {
    use rustix::fs::{linkat, AtFlags, CWD};
    use std::os::fd::AsRawFd;
    let Some(file) = write_anonymous(dir, bytes, sync)? else {
        return Ok(None);
    };
    let by_fd = format!("{PROC_FD}/{}", file.as_raw_fd());
    match linkat(CWD, by_fd.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => Ok(Some(())),
        // No /proc: the named temp file still works.
        Err(rustix::io::Errno::NOENT) if !Path::new(PROC_FD).exists() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Where an unnamed inode is found to give it a name (`linkat` by path; the flag that links
/// a descriptor directly needs a capability we do not have).
const PROC_FD: &str = "/proc/self/fd";

/// `bytes` in a fresh unnamed inode in `dir` (`O_TMPFILE`), data synced when `sync` (else
/// left to the group's `syncfs`). `Ok(None)` when the filesystem has no `O_TMPFILE`.
fn write_anonymous(dir: &Path, bytes: &[u8], sync: bool) -> io::Result<Option<File>> {
    use rustix::fs::{openat, Mode, OFlags, CWD};
    let fd = match openat(
        CWD,
        dir,
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    let mut file = File::from(fd);
    file.write_all(bytes)?;
    // A group's file gets no writeback advice: `fadvise(DONTNEED)` started each file's
    // writeback in the writer thread, which doubled the cost of creating it; the kernel's
    // flusher and the group's one `syncfs` do that work off our threads (measured: archive
    // of 2,000 and 8,000 turns, wall −20 to −25 %, system CPU −25 to −45 %,
    // docs/benchmarks.md issue #14).
    if sync {
        file.sync_data()?;
    }
    Ok(Some(file))
}

/// New bytes for a file (replacing it or creating it), made durable before they get any
/// name: written into an unnamed inode (`O_TMPFILE`) and `fdatasync`ed without a lock, then
/// published under the lock by [`Staged::publish`] with two directory operations and no sync.
///
/// Why this is crash safe without a directory fsync per file: the data is on disk before a
/// name points at it, so a crash shows the old file or the complete new one — never the
/// empty or zero-filled file a rename of unsynced data can leave (ext4's `auto_da_alloc`
/// only starts that data's writeback at the rename, XFS not even that; neither waits). The
/// rename is one journaled operation; what the missing directory fsync costs is only *when*
/// it is durable, so the caller fsyncs each directory it published into once, through
/// [`DirSync`], before it records the work as done. A crash before that loses renames,
/// never files: the old version stays.
#[derive(Debug)]
pub struct Staged {
    path: PathBuf,
    content: StagedContent,
}

#[derive(Debug)]
enum StagedContent {
    /// Written and synced; freed by the kernel if never linked.
    Anonymous(File),
    /// No `O_TMPFILE` here: written by `publish`, through a named temp file, under the lock
    /// (a named temp written outside it could outlive a crash with nobody to remove it).
    Deferred(Vec<u8>),
}

/// Stage `bytes` as the next version of `path` (see [`Staged`]). Takes no lock.
pub fn stage(path: &Path, bytes: &[u8]) -> Result<Staged, StoreError> {
    let (dir, _) = parent_and_name(path)?;
    let anonymous = if Path::new(PROC_FD).exists() {
        write_anonymous(dir, bytes, true).map_err(|e| io_err(path, e))?
    } else {
        None
    };
    let content = match anonymous {
        Some(file) => StagedContent::Anonymous(file),
        None => StagedContent::Deferred(bytes.to_vec()),
    };
    Ok(Staged {
        path: path.to_path_buf(),
        content,
    })
}

impl Staged {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replace the target with the staged bytes; the caller holds the writer lock (a crash
    /// between link and rename leaves a temp name that the next holder clears) and syncs
    /// the directory later ([`DirSync`]).
    pub fn publish(self) -> Result<(), StoreError> {
        let file = match self.content {
            StagedContent::Anonymous(file) => file,
            StagedContent::Deferred(bytes) => {
                let tmp = write_temp(&self.path, &bytes)?;
                return rename_into(&tmp, &self.path);
            }
        };
        use rustix::fs::{linkat, AtFlags, CWD};
        use std::os::fd::AsRawFd;
        let (dir, name) = parent_and_name(&self.path)?;
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}{TEMP_MARKER}{}.{n}", std::process::id()));
        let by_fd = format!("{PROC_FD}/{}", file.as_raw_fd());
        linkat(CWD, by_fd.as_str(), CWD, &tmp, AtFlags::SYMLINK_FOLLOW)
            .map_err(|e| io_err(&tmp, e.into()))?;
        rename_into(&tmp, &self.path)
    }
}

fn rename_into(tmp: &Path, path: &Path) -> Result<(), StoreError> {
    fs::rename(tmp, path).map_err(|e| {
        let _ = fs::remove_file(tmp);
        io_err(path, e)
    })
}

/// The directories a batch published into, each fsynced once by [`DirSync::sync`].
#[derive(Debug, Default)]
pub struct DirSync {
    dirs: std::collections::BTreeSet<PathBuf>,
}

impl DirSync {
    /// Note that `path`'s directory entry changed and is not yet durable.
    pub fn changed(&mut self, path: &Path) {
        if let Ok((dir, _)) = parent_and_name(path) {
            self.dirs.insert(dir.to_path_buf());
        }
    }

    /// Make every noted directory change durable. Needs no lock: an fsync of a directory
    /// only flushes entries already there.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        while let Some(dir) = self.dirs.pop_first() {
            sync_dir(&dir)?;
        }
        Ok(())
    }
}

fn compare_existing(path: &Path, bytes: &[u8]) -> Result<bool, StoreError> {
    let existing = fs::read(path).map_err(|e| io_err(path, e))?;
    if existing == bytes {
        Ok(false)
    } else {
        Err(StoreError::WouldOverwrite {
            path: path.to_path_buf(),
        })
    }
}

/// A hint file (the store's catalog, the signed-roots hint) whose write failed with `error`:
/// remove it, since a missing hint makes its reader look at everything, and log which
/// happened — `removed` when it is gone, `kept` when it could not be removed either. The
/// error is logged with its causes, each said once (`names::said_once`).
pub fn drop_failed_hint(
    path: &Path,
    error: &(dyn std::error::Error + 'static),
    removed: &str,
    kept: &str,
) {
    let error = crate::names::said_once(error);
    match fs::remove_file(path) {
        Ok(()) => tracing::warn!(error = %error, file = %path.display(), "{removed}"),
        Err(gone) if gone.kind() == io::ErrorKind::NotFound => {}
        Err(rm) => tracing::warn!(error = %error, remove = %rm, file = %path.display(), "{kept}"),
    }
}

/// Whether `name` is one of our temp files: `.<target>.tmp.<pid>.<n>`, or the `-journal`,
/// `-wal` or `-shm` SQLite makes beside one (the store's catalog is built under a temp name:
/// a process killed while building it leaves them too).
pub fn is_temp_name(name: &str) -> bool {
    let name = ["-journal", "-wal", "-shm"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name);
    let Some(rest) = name.strip_prefix('.') else {
        return false;
    };
    let Some(idx) = rest.rfind(TEMP_MARKER) else {
        return false;
    };
    let (target, tail) = (&rest[..idx], &rest[idx + TEMP_MARKER.len()..]);
    let mut parts = tail.split('.');
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    !target.is_empty()
        && matches!((parts.next(), parts.next(), parts.next()), (Some(pid), Some(n), None) if all_digits(pid) && all_digits(n))
}

/// Remove our leftover temp files under `dir`, at most `depth` directory levels down.
/// Call only while holding the writer lock. Returns how many were removed.
pub fn clean_temp_files(dir: &Path, depth: u32) -> Result<u64, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io_err(dir, e)),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let path = entry.path();
        // file_type() does not follow symlinks, so a link never leads the walk outside.
        let file_type = entry.file_type().map_err(|e| io_err(&path, e))?;
        if file_type.is_dir() {
            if depth > 0 {
                removed += clean_temp_files(&path, depth - 1)?;
            }
        } else if file_type.is_file() && is_temp_name(&entry.file_name().to_string_lossy()) {
            fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
            tracing::debug!(path = %path.display(), "removed a temp file left by an interrupted write");
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn write_atomic_creates_and_replaces_without_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one");
        write_atomic(&p, b"two, longer").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two, longer");
        write_atomic(&p, b"").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"");
        assert_eq!(names(dir.path()), vec!["state.json"]);
    }

    #[test]
    fn write_atomic_into_missing_dir_fails_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope").join("x");
        let err = write_atomic(&p, b"x").unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn write_new_is_idempotent_and_refuses_different_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("001-a.md");
        assert!(write_new(&p, b"body").unwrap());
        assert!(
            !write_new(&p, b"body").unwrap(),
            "same bytes again: nothing written"
        );
        let err = write_new(&p, b"other").unwrap_err();
        assert!(
            matches!(err, StoreError::WouldOverwrite { ref path } if path == &p),
            "{err}"
        );
        assert_eq!(
            fs::read(&p).unwrap(),
            b"body",
            "the refused write changed nothing"
        );
        assert_eq!(
            names(dir.path()),
            vec!["001-a.md"],
            "no temp file left behind"
        );
    }

    #[test]
    fn write_new_large_content() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big.txt");
        let big = vec![b'x'; 3 * 1024 * 1024];
        assert!(write_new(&p, &big).unwrap());
        assert_eq!(fs::read(&p).unwrap().len(), big.len());
        let mut other = big.clone();
        other[big.len() - 1] = b'y';
        assert!(matches!(
            write_new(&p, &other),
            Err(StoreError::WouldOverwrite { .. })
        ));
    }

    #[test]
    fn a_staged_version_is_invisible_until_published_and_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("001-a.md");
        write_atomic(&p, b"old").unwrap();
        let staged = stage(&p, b"new, longer").unwrap();
        assert!(matches!(staged.content, StagedContent::Anonymous(_)));
        assert_eq!(
            fs::read(&p).unwrap(),
            b"old",
            "nothing visible before publish"
        );
        assert_eq!(
            names(dir.path()),
            vec!["001-a.md"],
            "no name for staged bytes"
        );
        let mut dirs = DirSync::default();
        staged.publish().unwrap();
        dirs.changed(&p);
        dirs.changed(&p);
        assert_eq!(dirs.dirs.len(), 1, "one fsync per directory");
        dirs.sync().unwrap();
        assert!(dirs.dirs.is_empty());
        assert_eq!(fs::read(&p).unwrap(), b"new, longer");
        assert_eq!(names(dir.path()), vec!["001-a.md"]);

        // Never published (the batch stopped): the old bytes stay, no file is left.
        drop(stage(&p, b"abandoned").unwrap());
        assert_eq!(fs::read(&p).unwrap(), b"new, longer");
        assert_eq!(names(dir.path()), vec!["001-a.md"]);
    }

    #[test]
    fn without_anonymous_files_staged_bytes_are_written_at_publish() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("001-a.md");
        write_atomic(&p, b"old").unwrap();
        let staged = Staged {
            path: p.clone(),
            content: StagedContent::Deferred(b"new".to_vec()),
        };
        assert_eq!(names(dir.path()), vec!["001-a.md"]);
        staged.publish().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new");
        assert_eq!(names(dir.path()), vec!["001-a.md"]);
    }

    #[test]
    fn publishing_into_a_vanished_directory_fails_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("chapters");
        fs::create_dir(&sub).unwrap();
        let p = sub.join("001-a.md");
        write_atomic(&p, b"old").unwrap();
        let staged = stage(&p, b"new").unwrap();
        fs::remove_dir_all(&sub).unwrap();
        let err = staged.publish().unwrap_err();
        assert!(err.to_string().contains("chapters"), "{err}");
    }

    #[test]
    fn temp_name_pattern() {
        assert!(is_temp_name(".001-a.md.tmp.123.0"));
        assert!(is_temp_name(".x.tmp.1.22"));
        assert!(!is_temp_name("001-a.md"));
        assert!(!is_temp_name(".gitignore"));
        assert!(!is_temp_name(".x.tmp.1"));
        assert!(!is_temp_name(".x.tmp.1.2.3"));
        assert!(!is_temp_name(".x.tmp.a.2"));
        assert!(!is_temp_name("..tmp.1.2"));
        assert!(!is_temp_name("x.tmp.1.2"));
        // SQLite's files beside a catalog built under a temp name.
        assert!(is_temp_name("..catalog.sqlite3.tmp.19666.0-journal"));
        assert!(is_temp_name("..catalog.sqlite3.tmp.1.0-wal"));
        assert!(is_temp_name("..catalog.sqlite3.tmp.1.0-shm"));
        assert!(!is_temp_name(".catalog.sqlite3-wal"));
        assert!(!is_temp_name(".x.tmp.1.2-other"));
    }

    #[test]
    fn clean_removes_only_our_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a").join("chapters");
        fs::create_dir_all(&sub).unwrap();
        fs::write(sub.join(".001-x.md.tmp.42.7"), b"torn").unwrap();
        fs::write(sub.join("001-x.md"), b"kept").unwrap();
        fs::write(dir.path().join(".state.json.tmp.1.0"), b"torn").unwrap();
        fs::write(dir.path().join(".writer.lock"), b"").unwrap();
        fs::write(dir.path().join("notes.tmp.1.0"), b"not ours").unwrap();
        assert_eq!(clean_temp_files(dir.path(), 4).unwrap(), 2);
        assert_eq!(names(&sub), vec!["001-x.md"]);
        assert_eq!(
            names(dir.path()),
            vec![".writer.lock", "a", "notes.tmp.1.0"]
        );
        assert_eq!(clean_temp_files(&dir.path().join("absent"), 4).unwrap(), 0);
    }

    #[test]
    fn clean_respects_depth() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a").join("b");
        fs::create_dir_all(&deep).unwrap();
        fs::write(deep.join(".f.tmp.1.1"), b"").unwrap();
        assert_eq!(clean_temp_files(dir.path(), 1).unwrap(), 0);
        assert_eq!(clean_temp_files(dir.path(), 2).unwrap(), 1);
    }
}

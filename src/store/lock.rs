//! The writer lock: one cross-process lock (flock on `.dsh-chapters/.writer.lock`) so two
//! archivers never interleave. The kernel drops it when its holder dies, so a dead
//! process never leaves a stale lock. OWNER: store helper.
//!
//! `.writer.pid` beside it names the holder for the `Busy` message only; the flock is
//! the truth.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const LOCK_FILE: &str = ".writer.lock";
pub const PID_FILE: &str = ".writer.pid";
/// The collections lock: held only around "read the ledger's last signature, append".
pub const COLLECTIONS_LOCK_FILE: &str = ".collections.lock";

/// How long to sleep between attempts: short enough that a waiter follows a quick
/// holder closely, long enough not to spin.
const RETRY_SLEEP: Duration = Duration::from_millis(25);

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("the store {path} is locked by another writer (pid {holder}) and did not free within {waited_ms} ms; wait for it or stop it")]
    Busy {
        path: PathBuf,
        holder: String,
        waited_ms: u64,
    },
    #[error("cannot open the writer lock {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Held while writing the store; dropping it releases the lock.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
    pid_path: PathBuf,
    previous_holder_died: bool,
}

impl WriterLock {
    /// Take the store's writer lock, retrying until `timeout` has passed.
    pub fn acquire(store_dir: &Path, timeout: Duration) -> Result<WriterLock, LockError> {
        let path = store_dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| LockError::Io {
                path: path.clone(),
                source,
            })?;
        let started = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(fs::TryLockError::WouldBlock) => {
                    let waited = started.elapsed();
                    if waited >= timeout {
                        return Err(LockError::Busy {
                            path: store_dir.to_path_buf(),
                            holder: read_holder(&store_dir.join(PID_FILE)),
                            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                    std::thread::sleep(RETRY_SLEEP.min(timeout - waited));
                }
                Err(fs::TryLockError::Error(source)) => return Err(LockError::Io { path, source }),
            }
        }
        let pid_path = store_dir.join(PID_FILE);
        // The note is removed on every clean release: finding one means its writer died
        // holding the lock, and may have left temp files behind.
        let previous_holder_died = pid_path.exists();
        // `args_os`, not `args`: an argument that is not UTF-8 (a `--workspace` path) must
        // not panic here.
        let command: Vec<String> = std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let note = format!("{}\n{}\n", std::process::id(), command.join(" "));
        // Informational only: a failure here must not cost the lock we hold. Written in
        // place, not through a temp file: a kill mid-write leaves at worst a torn note (the
        // flock is the truth), never a stray temp file beside the store.
        if let Err(e) = fs::write(&pid_path, note.as_bytes()) {
            tracing::debug!(error = %e, "could not record the writer pid");
        }
        Ok(WriterLock {
            file,
            pid_path,
            previous_holder_died,
        })
    }

    /// Whether the previous holder died without releasing (its pid note was still there).
    pub fn previous_holder_died(&self) -> bool {
        self.previous_holder_died
    }
}

impl Drop for WriterLock {
    fn drop(&mut self) {
        // Removed while still locked, so it never deletes the next holder's note.
        let _ = fs::remove_file(&self.pid_path);
        let _ = self.file.unlock();
    }
}

/// Held around one "read the last signature, append the new ones" step of any collection
/// ledger of the store. The daemon signs turns under this lock alone (never the writer
/// lock, which an archive holds for seconds), and the archive's pass 1 re-reads the ledger
/// under it before appending, so a turn is signed exactly once whoever gets there first.
/// Holds last microseconds to milliseconds, so waiting for it blocks.
#[derive(Debug)]
pub struct CollectionsLock {
    _held: BlockingLock,
}

impl CollectionsLock {
    pub fn acquire(store_dir: &Path) -> Result<CollectionsLock, LockError> {
        Ok(CollectionsLock {
            _held: BlockingLock::acquire(&store_dir.join(COLLECTIONS_LOCK_FILE))?,
        })
    }
}

/// An exclusive lock on one file (created when absent), waited for, released on drop: for
/// short critical sections (the collections lock, the store catalog's creation lock).
#[derive(Debug)]
pub struct BlockingLock {
    file: File,
}

impl BlockingLock {
    pub fn acquire(path: &Path) -> Result<BlockingLock, LockError> {
        let io = |source| LockError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        file.lock().map_err(io)?;
        Ok(BlockingLock { file })
    }
}

impl Drop for BlockingLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

/// `<pid> (<command>)` from the pid note, or `unknown` when it cannot be read.
fn read_holder(pid_path: &Path) -> String {
    let Ok(text) = fs::read_to_string(pid_path) else {
        return "unknown".into();
    };
    let mut lines = text.lines();
    match (lines.next().map(str::trim), lines.next().map(str::trim)) {
        (Some(pid), Some(cmd)) if !pid.is_empty() && !cmd.is_empty() => format!("{pid} ({cmd})"),
        (Some(pid), _) if !pid.is_empty() => pid.to_string(),
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_is_busy_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = WriterLock::acquire(dir.path(), Duration::from_millis(0)).unwrap();
        let note = fs::read_to_string(dir.path().join(PID_FILE)).unwrap();
        assert!(
            note.starts_with(&format!("{}\n", std::process::id())),
            "{note}"
        );
        // A second open file description conflicts with the first on Linux, as another
        // process's would.
        let err = WriterLock::acquire(dir.path(), Duration::from_millis(60)).unwrap_err();
        match &err {
            LockError::Busy {
                holder, waited_ms, ..
            } => {
                assert!(
                    holder.starts_with(&std::process::id().to_string()),
                    "{holder}"
                );
                assert!(*waited_ms >= 60);
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("pid"), "{err}");
        drop(held);
        assert!(
            !dir.path().join(PID_FILE).exists(),
            "the note goes with the lock"
        );
        let again = WriterLock::acquire(dir.path(), Duration::from_millis(0)).unwrap();
        drop(again);
    }

    #[test]
    fn a_waiter_gets_the_lock_once_the_holder_drops_it() {
        let dir = tempfile::tempdir().unwrap();
        let held = WriterLock::acquire(dir.path(), Duration::from_millis(0)).unwrap();
        let path = dir.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            tx.send(()).unwrap();
            WriterLock::acquire(&path, Duration::from_secs(60)).map(drop)
        });
        rx.recv().unwrap();
        drop(held);
        waiter.join().unwrap().unwrap();
    }

    #[test]
    fn the_collections_lock_excludes_and_is_independent_of_the_writer_lock() {
        let dir = tempfile::tempdir().unwrap();
        let _writer = WriterLock::acquire(dir.path(), Duration::from_millis(0)).unwrap();
        let held = CollectionsLock::acquire(dir.path()).unwrap();
        let path = dir.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let got = CollectionsLock::acquire(&path).map(drop);
            tx.send(()).unwrap();
            got
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(100)).is_err(),
            "a second holder waits"
        );
        drop(held);
        rx.recv().unwrap();
        waiter.join().unwrap().unwrap();
    }

    #[test]
    fn holder_note_parsing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(PID_FILE);
        assert_eq!(read_holder(&p), "unknown");
        fs::write(&p, "12\nchapters archive\n").unwrap();
        assert_eq!(read_holder(&p), "12 (chapters archive)");
        fs::write(&p, "12").unwrap();
        assert_eq!(read_holder(&p), "12");
        fs::write(&p, "").unwrap();
        assert_eq!(read_holder(&p), "unknown");
    }

    #[test]
    fn missing_store_dir_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let err =
            WriterLock::acquire(&dir.path().join("absent"), Duration::from_millis(0)).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err}");
    }
}

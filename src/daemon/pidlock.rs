//! One daemon per `DSH_HOME`: an exclusive flock on `$DSH_HOME/dsh-chapters/daemon.pid`,
//! which also holds the holder's pid. The kernel drops the lock when its holder dies, so a
//! killed daemon never leaves a stale lock; the pid in the file is informational.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub const PID_FILE: &str = "daemon.pid";

#[derive(Debug, thiserror::Error)]
pub enum PidLockError {
    #[error("another daemon already runs for this DSH_HOME (pid {holder}, lock {path}); stop it with `chapters daemon stop` first")]
    Held { path: PathBuf, holder: String },
    #[error("cannot take the daemon lock {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Held for the daemon's life; dropping it releases the lock.
#[derive(Debug)]
pub struct PidLock {
    file: File,
    path: PathBuf,
}

impl PidLock {
    /// Take the lock in `home` (created when absent) and record this process's pid.
    pub fn acquire(home: &Path) -> Result<PidLock, PidLockError> {
        let path = home.join(PID_FILE);
        let io_err = |source| PidLockError::Io {
            path: path.clone(),
            source,
        };
        if let Some(parent) = home.parent() {
            fs::create_dir_all(parent).map_err(io_err)?;
        }
        crate::home::ensure_private_dir(home).map_err(io_err)?;
        let mut file = crate::home::open_rw(&path).map_err(io_err)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                return Err(PidLockError::Held {
                    holder: read_pid(&mut file).map_or("unknown".into(), |p| p.to_string()),
                    path,
                });
            }
            Err(fs::TryLockError::Error(source)) => return Err(io_err(source)),
        }
        // Rewritten in place under the lock: a reader sees the old pid, the new one, or
        // an empty file, never a temp file left behind by a kill.
        let note = format!("{}\n", std::process::id());
        file.set_len(0)
            .and_then(|()| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(note.as_bytes()))
            .and_then(|()| file.sync_data())
            .map_err(io_err)?;
        Ok(PidLock { file, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the lock still guards this home: its file is still the one locked. A lock
    /// file removed or replaced (by hand, or with the home) no longer keeps a second
    /// daemon out — the holder must stop.
    pub fn still_held(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match (self.file.metadata(), fs::metadata(&self.path)) {
            (Ok(ours), Ok(now)) => ours.dev() == now.dev() && ours.ino() == now.ino(),
            _ => false,
        }
    }
}

impl Drop for PidLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

fn read_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(64).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The pid of the daemon holding the lock in `home`, or `None` when no daemon runs.
pub fn holder(home: &Path) -> Option<u32> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(home.join(PID_FILE))
        .ok()?;
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            None
        }
        Err(fs::TryLockError::WouldBlock) => Some(read_pid(&mut file).unwrap_or(0)),
        Err(fs::TryLockError::Error(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_named_in_the_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("dsh-chapters");
        assert_eq!(holder(&home), None, "no file, no daemon");
        let held = PidLock::acquire(&home).unwrap();
        assert_eq!(holder(&home), Some(std::process::id()));
        let err = PidLock::acquire(&home).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(held);
        assert_eq!(holder(&home), None);
        let _again = PidLock::acquire(&home).unwrap();
    }

    #[test]
    fn a_lock_file_removed_or_replaced_is_no_longer_held() {
        let dir = tempfile::tempdir().unwrap();
        let held = PidLock::acquire(dir.path()).unwrap();
        assert!(held.still_held());
        fs::remove_file(held.path()).unwrap();
        assert!(!held.still_held(), "removed");
        let other = PidLock::acquire(dir.path()).unwrap();
        assert!(other.still_held());
        assert!(!held.still_held(), "replaced by another holder's file");
    }

    #[test]
    fn a_garbled_pid_file_is_overwritten_and_reported_as_unknown_while_held() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join(PID_FILE),
            "not a pid at all, and longer than the old one",
        )
        .unwrap();
        let held = PidLock::acquire(dir.path()).unwrap();
        assert_eq!(
            fs::read_to_string(dir.path().join(PID_FILE)).unwrap(),
            format!("{}\n", std::process::id())
        );
        drop(held);
        fs::write(dir.path().join(PID_FILE), "garbage").unwrap();
        let held = PidLock::acquire(dir.path()).unwrap();
        fs::write(dir.path().join(PID_FILE), "garbage").unwrap();
        let err = PidLock::acquire(dir.path()).unwrap_err();
        assert!(err.to_string().contains("pid unknown"), "{err}");
        drop(held);
    }
}

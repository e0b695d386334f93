//! The publish queue of a local pool: an exclusive `flock` on `<pool>/chapters-publish.lock`,
//! held by a sync from before its fetch until after its push, so the publishers of one local
//! pool take turns instead of racing for its ref (issue #17 point 9). Shell.
//!
//! It is an optimisation, never the guard: the ref's compare-and-swap still refuses a
//! publish that is not a fast-forward. So every failure to queue falls back to racing with
//! backoff, as a network pool does: a pool that is not there yet (never created by this
//! lock), a read-only pool, or a holder that keeps it longer than the bounded wait. The
//! kernel drops a flock when its holder dies, so a SIGKILLed sync never wedges the others;
//! the file it leaves behind is empty and harmless (git ignores it).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

pub const PUBLISH_LOCK_FILE: &str = "chapters-publish.lock";
/// How long a sync waits for its turn before it races anyway. Eight machines publishing
/// back to back on a loaded machine take a few seconds each; a waiter holds no store lock.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// Between attempts: short, so a waiter follows a quick holder closely.
const RETRY_SLEEP: Duration = Duration::from_millis(10);

/// Why a sync races instead of queuing (said in its report's notes).
#[derive(Debug, thiserror::Error)]
pub enum PublishLockError {
    #[error("the pool {path} is not a git repository yet")]
    NoPool { path: String },
    #[error("cannot open the pool's publish lock {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("another sync held the pool's publish lock for over {waited_ms} ms")]
    Busy { waited_ms: u64 },
}

/// This sync's turn at publishing into a local pool; dropping it (or dying) ends the turn.
#[derive(Debug)]
pub struct PublishLock {
    file: File,
    /// Whether another sync held it when this one asked (it waited its turn).
    pub waited: bool,
}

impl PublishLock {
    /// Wait up to `wait` for the pool's publish lock. The lock file is created only inside
    /// an existing bare repository (its `HEAD` present): a missing or empty pool directory
    /// stays as it is, for the sync to report.
    pub fn acquire(pool: &Path, wait: Duration) -> Result<PublishLock, PublishLockError> {
        if !pool.join("HEAD").is_file() {
            return Err(PublishLockError::NoPool {
                path: pool.display().to_string(),
            });
        }
        let path = pool.join(PUBLISH_LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|source| PublishLockError::Io {
                path: path.display().to_string(),
                source,
            })?;
        let started = Instant::now();
        let mut waited = false;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(PublishLock { file, waited }),
                Err(TryLockError::WouldBlock) => {
                    waited = true;
                    let so_far = started.elapsed();
                    if so_far >= wait {
                        return Err(PublishLockError::Busy {
                            waited_ms: u64::try_from(so_far.as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                    std::thread::sleep(RETRY_SLEEP.min(wait - so_far));
                }
                Err(TryLockError::Error(source)) => {
                    return Err(PublishLockError::Io {
                        path: path.display().to_string(),
                        source,
                    })
                }
            }
        }
    }
}

impl Drop for PublishLock {
    fn drop(&mut self) {
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bare(dir: &Path) {
        std::fs::write(dir.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    #[test]
    fn one_holder_at_a_time_and_the_next_after_release() {
        let tmp = tempfile::tempdir().unwrap();
        bare(tmp.path());
        let first = PublishLock::acquire(tmp.path(), Duration::ZERO).unwrap();
        assert!(!first.waited);
        // A second open file description: flock excludes it even within one process.
        let busy = PublishLock::acquire(tmp.path(), Duration::ZERO).unwrap_err();
        assert!(matches!(busy, PublishLockError::Busy { .. }), "{busy}");
        drop(first);
        PublishLock::acquire(tmp.path(), Duration::ZERO).unwrap();
    }

    #[test]
    fn a_missing_or_empty_pool_gets_no_lock_file() {
        let tmp = tempfile::tempdir().unwrap();
        let err = PublishLock::acquire(tmp.path(), Duration::ZERO).unwrap_err();
        assert!(matches!(err, PublishLockError::NoPool { .. }));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        let gone = tmp.path().join("gone");
        assert!(PublishLock::acquire(&gone, Duration::ZERO).is_err());
        assert!(!gone.exists());
    }
}

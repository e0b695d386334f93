//! The writer lock: one cross-process lock (flock on `.dsh-chapters/.writer.lock`) so two
//! archivers never interleave. The kernel drops it when its holder dies, so a dead
//! process never leaves a stale lock. OWNER: store helper.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("the store {path} is locked by another writer (pid {holder}) and did not free within {waited_ms} ms; wait for it or stop it")]
    Busy { path: PathBuf, holder: String, waited_ms: u64 },
    #[error("cannot open the writer lock {path}: {source}")]
    Io { path: PathBuf, #[source] source: std::io::Error },
}

//! Finding a workspace's sessions and each session's highest-generation log.
//! OWNER: session helper.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLog {
    /// The session directory name, unescaped to the session id when possible.
    pub session_dir: PathBuf,
    /// The highest generation log file (`session.v4.jsonl.zstd` > … > `session.jsonl.zstd`).
    pub log: PathBuf,
    pub generation: u32,
    pub compressed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("cannot list {dir}: {source}")]
    Io { dir: PathBuf, #[source] source: std::io::Error },
}

/// `$DSH_HOME/sessions/--<cwd-key>--` for `workspace` (absolute path).
pub fn workspace_sessions_dir(dsh_home: &Path, workspace: &str) -> PathBuf {
    let _ = (dsh_home, workspace);
    unimplemented!("session helper pending")
}

/// Every session of the workspace, sorted by directory name; sessions without any log
/// file are skipped. A missing workspace directory is an empty list.
pub fn list_sessions(dsh_home: &Path, workspace: &str) -> Result<Vec<SessionLog>, DiscoverError> {
    let _ = (dsh_home, workspace);
    unimplemented!("session helper pending")
}

/// The highest-generation log in one session directory, if any.
pub fn highest_generation(session_dir: &Path) -> Result<Option<SessionLog>, DiscoverError> {
    let _ = session_dir;
    unimplemented!("session helper pending")
}

//! The cwd key that names a workspace's directory under `$DSH_HOME/sessions/`.
//! OWNER: session helper.

/// `/home/ana/src/widgets` → `home-ana-src-widgets` (the directory is `--<key>--`).
pub fn cwd_key(cwd: &str) -> String {
    let _ = cwd;
    unimplemented!("session helper pending")
}

/// Escape a session id for its directory name (same rules; `.` is `~002E`).
pub fn escape_session_id(id: &str) -> String {
    let _ = id;
    unimplemented!("session helper pending")
}

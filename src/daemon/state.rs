//! `daemon-state.json`: where a restart resumes each followed log (its anchor, see
//! `daemon::follow`). An optimization only: a lost or damaged file costs a re-read from each
//! log's start, never a duplicate signature (the ledger decides what is signed).

use std::collections::BTreeMap;
use std::path::Path;

use super::follow::SavedFollow;

pub const STATE_FILE: &str = "daemon-state.json";

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct StateFile {
    v: u32,
    /// Log path → where a restart resumes it.
    logs: BTreeMap<String, SavedFollow>,
}

/// The saved anchors; empty (said in the log) when the file is absent or does not parse.
pub(super) fn read(path: &Path) -> BTreeMap<String, SavedFollow> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot read the daemon state; following every log from its start");
            return BTreeMap::new();
        }
    };
    match serde_json::from_slice::<StateFile>(&bytes) {
        Ok(state) if state.v == 1 => state.logs,
        Ok(_) | Err(_) => {
            tracing::warn!(file = %path.display(), "the daemon state does not parse; following every log from its start");
            BTreeMap::new()
        }
    }
}

/// Write the anchors atomically, owner-only.
pub(super) fn write(path: &Path, logs: &BTreeMap<String, SavedFollow>) -> Result<(), String> {
    // The same shape as `StateFile`, borrowed.
    #[derive(serde::Serialize)]
    struct Out<'a> {
        v: u32,
        logs: &'a BTreeMap<String, SavedFollow>,
    }
    let bytes = serde_json::to_vec(&Out { v: 1, logs })
        .map_err(|e| format!("cannot serialize the daemon state: {e}"))?;
    crate::home::write_private(path, &bytes)
        .map_err(|e| format!("cannot save the daemon state: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_state_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        std::fs::write(&path, b"{ not json").unwrap();
        assert!(read(&path).is_empty());
        std::fs::write(&path, br#"{"v":9,"logs":{}}"#).unwrap();
        assert!(read(&path).is_empty());
        assert!(read(&dir.path().join("absent")).is_empty());
    }
}

//! Codex's discovery: rollouts under `<home>/sessions/` (live) and `archived_sessions/`
//! (where `codex archive` moves them: cold), each `rollout-*.jsonl` or — recompressed after
//! 7 days — `.jsonl.zst`; a session's file may change (recompressed, moved), found again by
//! its thread id.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::session::discover::{DiscoverError, SessionLog};
use crate::session::reader::{ReadError, ResumePoint};
use crate::source::discovery::{depth_and_name, LogTree, TreeHarness};
use crate::source::{is_quiet, EventSource, Harness, SourceOptions};

use super::{rollout_facts, CodexReader, FIRST_LINE_CAP, MAX_DEPTH};

/// Codex through the seam.
pub struct Codex;

impl TreeHarness for Codex {
    fn harness(&self) -> Harness {
        Harness::Codex
    }

    fn home_from_env(&self) -> Option<PathBuf> {
        super::home_from_env()
    }

    fn switch(&self) -> &'static str {
        "codexSessions"
    }

    fn trees(&self, home: &Path) -> Vec<LogTree> {
        vec![
            LogTree::under(Harness::Codex, home, "sessions", false),
            LogTree::under(Harness::Codex, home, "archived_sessions", true),
        ]
    }

    fn max_depth(&self) -> usize {
        MAX_DEPTH
    }

    /// A rollout, plain or `.jsonl.zst`; a plain file hides its compressed sibling.
    fn is_log(&self, tree: &Path, path: &Path) -> bool {
        depth_and_name(tree, path).is_some_and(|(depth, name)| {
            let compressed = name.ends_with(".jsonl.zst");
            depth <= MAX_DEPTH
                && name.starts_with("rollout-")
                && (name.ends_with(".jsonl") || compressed)
                && !(compressed && path.with_extension("").is_file())
        })
    }

    fn log_cwd(&self, path: &Path) -> Option<String> {
        rollout_facts(path, FIRST_LINE_CAP).ok().flatten()?.cwd
    }

    fn fork_parent(&self, path: &Path) -> Option<String> {
        rollout_facts(path, FIRST_LINE_CAP)
            .ok()
            .flatten()?
            .forked_from
    }

    fn successor(&self, gone: &Path, id: &str) -> Option<PathBuf> {
        super::find_rollout(gone, id)
    }

    fn sessions_move(&self) -> bool {
        true
    }

    fn is_sealed(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "zst")
    }

    fn list_workspace_sessions(
        &self,
        home: &Path,
        workspace: &str,
        path_map: &BTreeMap<String, String>,
    ) -> Result<Vec<SessionLog>, DiscoverError> {
        super::list_workspace_sessions(home, workspace, path_map)
    }

    fn open(
        &self,
        path: &Path,
        from: ResumePoint,
        options: SourceOptions,
    ) -> Result<Box<dyn EventSource>, ReadError> {
        Ok(Box::new(CodexReader::open(
            path,
            from,
            options.reader,
            is_quiet(path, options.quiet_after_ms),
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_rollout_hides_its_compressed_sibling() {
        let home = tempfile::tempdir().expect("tempdir");
        let tree = home.path().join("sessions");
        let day = tree.join("2026/12/03");
        std::fs::create_dir_all(&day).expect("mkdir");
        let zst = day.join("rollout-a.jsonl.zst");
        std::fs::write(&zst, b"").expect("write");
        assert!(
            Codex.is_log(&tree, &zst),
            "alone, the compressed file is the log"
        );
        std::fs::write(day.join("rollout-a.jsonl"), b"").expect("write");
        assert!(!Codex.is_log(&tree, &zst), "hidden by the plain one");
        assert!(Codex.is_log(&tree, &day.join("rollout-a.jsonl")));
        assert!(!Codex.is_log(&tree, &day.join("notes.jsonl")));
        assert!(Codex.is_sealed(&zst) && !Codex.is_sealed(&day.join("rollout-a.jsonl")));
    }
}

//! Claude Code's discovery: `<home>/projects/<key>/<sessionId>.jsonl` (subagents' `agent-*`
//! transcripts are not sessions), each transcript's own `cwd`, a fork's parent, and the
//! `cleanupPeriodDays` sweep of `<home>/settings.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::session::discover::{DiscoverError, SessionLog};
use crate::session::reader::{ReadError, ResumePoint};
use crate::source::discovery::{depth_and_name, FollowCache, LogTree, TreeHarness};
use crate::source::{is_quiet, EventSource, Harness, SourceOptions};

use super::{ClaudeReader, PlanCache};

/// Claude Code's default `cleanupPeriodDays`.
pub const CLEANUP_DAYS: u64 = 30;

/// Claude Code through the seam.
pub struct ClaudeCode;

impl TreeHarness for ClaudeCode {
    fn harness(&self) -> Harness {
        Harness::ClaudeCode
    }

    fn home_from_env(&self) -> Option<PathBuf> {
        super::home_from_env()
    }

    fn switch(&self) -> &'static str {
        "claudeCodeSessions"
    }

    fn trees(&self, home: &Path) -> Vec<LogTree> {
        vec![LogTree::under(Harness::ClaudeCode, home, "projects", false)]
    }

    fn max_depth(&self) -> usize {
        2
    }

    fn is_log(&self, tree: &Path, path: &Path) -> bool {
        depth_and_name(tree, path).is_some_and(|(depth, name)| {
            depth == 2 && name.ends_with(".jsonl") && !name.starts_with("agent-")
        })
    }

    fn log_cwd(&self, path: &Path) -> Option<String> {
        super::transcript_cwd(path)
    }

    fn fork_parent(&self, path: &Path) -> Option<String> {
        super::fork_parent(path)
    }

    /// `cleanupPeriodDays` from `<home>/settings.json`; the default when the file or the
    /// key is absent or not a number.
    fn sweep_days(&self, home: &Path) -> Option<u64> {
        Some(
            std::fs::read(home.join("settings.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .and_then(|v| v.get("cleanupPeriodDays").and_then(Value::as_u64))
                .unwrap_or(CLEANUP_DAYS),
        )
    }

    fn settings_file(&self, home: &Path) -> Option<PathBuf> {
        Some(home.join("settings.json"))
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
        Ok(Box::new(
            ClaudeReader::open(
                path,
                from,
                options.reader,
                is_quiet(path, options.quiet_after_ms),
            )?
            .with_idle_gap(options.quiet_after_ms),
        ))
    }

    /// The first pass (the `uuid`/`parentUuid` DAG) is kept between polls and extended by
    /// what was appended.
    fn open_followed(
        &self,
        path: &Path,
        from: ResumePoint,
        options: SourceOptions,
        cache: &mut FollowCache,
    ) -> Result<Box<dyn EventSource>, ReadError> {
        Ok(Box::new(
            ClaudeReader::open_cached(
                path,
                from,
                options.reader,
                is_quiet(path, options.quiet_after_ms),
                cache.get_or_default::<PlanCache>(),
            )?
            .with_idle_gap(options.quiet_after_ms),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_reads_cleanup_period_days_and_falls_back_to_thirty() {
        let home = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            ClaudeCode.sweep_days(home.path()),
            Some(CLEANUP_DAYS),
            "no settings"
        );
        std::fs::write(
            home.path().join("settings.json"),
            "{\"cleanupPeriodDays\": 10}",
        )
        .expect("write");
        assert_eq!(ClaudeCode.sweep_days(home.path()), Some(10));
        std::fs::write(
            home.path().join("settings.json"),
            "{\"cleanupPeriodDays\": \"x\"}",
        )
        .expect("write");
        assert_eq!(
            ClaudeCode.sweep_days(home.path()),
            Some(CLEANUP_DAYS),
            "not a number"
        );
    }

    #[test]
    fn a_session_transcript_is_a_log_and_a_subagents_is_not() {
        let tree = Path::new("/h/projects");
        assert!(ClaudeCode.is_log(tree, Path::new("/h/projects/-a-b/123.jsonl")));
        assert!(!ClaudeCode.is_log(tree, Path::new("/h/projects/-a-b/agent-1.jsonl")));
        assert!(!ClaudeCode.is_log(
            tree,
            Path::new("/h/projects/-a-b/123/subagents/agent-1.jsonl")
        ));
        assert!(
            !ClaudeCode.is_log(tree, Path::new("/h/projects/123.jsonl")),
            "too shallow"
        );
        assert!(!ClaudeCode.is_log(tree, Path::new("/h/projects/-a-b/123.json")));
    }
}

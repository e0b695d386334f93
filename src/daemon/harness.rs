//! The other harnesses' trees the daemon follows (Claude Code's `projects/`, Codex's
//! `sessions/` and `archived_sessions/`) and which files in them are logs. Reads directory
//! listings and Claude Code's `settings.json`; never writes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::config::Config;
use crate::source::Harness;

/// Claude Code deletes a transcript whose file is `cleanupPeriodDays` old (default 30). A
/// transcript this many days short of that, with signed turns no chapter covers yet, is
/// archived at once instead of waiting for an idle moment.
pub const SWEEP_MARGIN_DAYS: u64 = 2;
/// Claude Code's default `cleanupPeriodDays`.
pub const CLAUDE_CLEANUP_DAYS: u64 = 30;
/// The cap on a Codex rollout's first line when the daemon reads its `cwd`.
pub(super) const ROLLOUT_FIRST_LINE_CAP: usize = 8 << 20;

/// Another harness's tree the daemon follows: Claude Code's `projects/`, Codex's `sessions/`
/// and `archived_sessions/`.
#[derive(Debug, Clone)]
pub(super) struct HarnessTree {
    pub harness: Harness,
    pub home: PathBuf,
    pub tree: PathBuf,
    /// Logs no one appends to (Codex's `archived_sessions/`, where `codex archive` moves a
    /// rollout and Codex recompresses it after 7 days): what they hold is archived at once.
    pub cold: bool,
}

/// Whether a harness's logs are on this machine: its live tree, or the tree its archived
/// logs are moved to (a Codex home may hold only `archived_sessions/`).
pub(super) fn present(trees: &[HarnessTree], harness: Harness) -> bool {
    trees
        .iter()
        .any(|t| t.harness == harness && t.tree.is_dir())
}

/// The other harnesses' trees `config` turns on, each home found from the environment
/// (`CLAUDE_CONFIG_DIR` / `~/.claude`, `CODEX_HOME` / `~/.codex`).
pub(super) fn harness_trees(config: &Config) -> Vec<HarnessTree> {
    let mut out = Vec::new();
    if config.claude_code_sessions {
        if let Some(home) = crate::source::claude_code::home_from_env() {
            out.push(HarnessTree {
                harness: Harness::ClaudeCode,
                tree: home.join("projects"),
                home,
                cold: false,
            });
        }
    }
    if config.codex_sessions {
        if let Some(home) = crate::source::codex::home_from_env() {
            out.push(HarnessTree {
                harness: Harness::Codex,
                tree: home.join("sessions"),
                home: home.clone(),
                cold: false,
            });
            out.push(HarnessTree {
                harness: Harness::Codex,
                tree: home.join("archived_sessions"),
                home,
                cold: true,
            });
        }
    }
    out
}

/// Claude Code's `cleanupPeriodDays` from `<home>/settings.json`; the default when the file
/// or the key is absent or not a number.
pub fn claude_cleanup_days(home: &Path) -> u64 {
    std::fs::read(home.join("settings.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("cleanupPeriodDays").and_then(Value::as_u64))
        .unwrap_or(CLAUDE_CLEANUP_DAYS)
}

/// How many path components below its tree a harness's log lies at most: Claude Code's
/// `projects/<key>/<id>.jsonl`, Codex's `sessions/YYYY/MM/DD/rollout-*.jsonl`.
fn max_components(harness: Harness) -> usize {
    match harness {
        Harness::ClaudeCode => 2,
        _ => 4,
    }
}

/// Whether `path` under `tree` is a log of `harness` the daemon follows: a Claude Code
/// session transcript (not a subagent's), a Codex rollout, plain or `.jsonl.zst` (Codex
/// recompresses rollouts older than 7 days; a plain file hides its compressed sibling).
pub(super) fn is_harness_log(harness: Harness, tree: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(tree) else {
        return false;
    };
    let depth = rel.components().count();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match harness {
        Harness::ClaudeCode => {
            depth == 2 && name.ends_with(".jsonl") && !name.starts_with("agent-")
        }
        Harness::Codex => {
            let compressed = name.ends_with(".jsonl.zst");
            depth <= max_components(harness)
                && name.starts_with("rollout-")
                && (name.ends_with(".jsonl") || compressed)
                // A plain rollout hides its compressed sibling.
                && !(compressed && path.with_extension("").is_file())
        }
        Harness::Dsh => false,
    }
}

/// The logs of `harness` under `dir` (inside `tree`), sorted.
pub(super) fn collect_harness_logs(
    harness: Harness,
    tree: &Path,
    dir: &Path,
    out: &mut Vec<PathBuf>,
) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut found: Vec<(PathBuf, bool)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.path(), e.file_type().ok()?.is_dir())))
        .collect();
    found.sort();
    for (path, is_dir) in found {
        let depth = path
            .strip_prefix(tree)
            .map_or(usize::MAX, |r| r.components().count());
        if is_dir && depth < max_components(harness) {
            collect_harness_logs(harness, tree, &path, out);
        } else if !is_dir && is_harness_log(harness, tree, &path) {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_with_only_its_archived_tree_is_present() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tree = |name: &str, cold: bool| HarnessTree {
            harness: Harness::Codex,
            home: dir.path().to_path_buf(),
            tree: dir.path().join(name),
            cold,
        };
        let trees = [tree("sessions", false), tree("archived_sessions", true)];
        assert!(!present(&trees, Harness::Codex), "neither tree exists");
        std::fs::create_dir(dir.path().join("archived_sessions")).expect("mkdir");
        assert!(present(&trees, Harness::Codex), "the archived tree alone");
        assert!(!present(&trees, Harness::ClaudeCode), "another harness");
    }
}

//! Codex: `$CODEX_HOME` (default `~/.codex`), rollouts in `sessions/YYYY/MM/DD/` (and the
//! older flat `sessions/`) and `archived_sessions/`, each `rollout-*.jsonl` or
//! `rollout-*.jsonl.zst`; a plain file hides its compressed sibling. A rollout belongs to
//! the workspace when its `session_meta.cwd` (G1: the header's `cwd`; an early G1 header has
//! none: the `<cwd>` of its first `<environment_context>`) is the workspace or inside it. A spring-2025 TypeScript rollout (`rollout-*.json`, G0, `g0`) belongs to it
//! when its first `shell` call's `workdir` does; of the files one such session's saves left
//! (each holding every item so far), the fullest is read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::session::cwdkey::{cwd_in_roots, workspace_roots};
use crate::session::discover::{DiscoverError, SessionLog};

mod code_mode;
pub mod discovery;
mod g0;
mod reader;
pub(crate) mod screen;
mod web_search;

pub use reader::{rollout_facts, CodexReader, RolloutFacts, SEQ_SHIFT};

/// Folder levels searched under `sessions/` (`YYYY/MM/DD`).
const MAX_DEPTH: usize = 4;
/// The cap on a rollout's first line when discovery reads it.
const FIRST_LINE_CAP: usize = 8 << 20;

/// Codex's home: `$CODEX_HOME`, else `$HOME/.codex`.
pub fn home_from_env() -> Option<PathBuf> {
    crate::source::discovery::home_from_env("CODEX_HOME", ".codex")
}

fn is_rollout(name: &str) -> bool {
    name.starts_with("rollout-")
        && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst") || name.ends_with(".json"))
}

fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(Result::ok) {
        let Ok(t) = e.file_type() else { continue };
        let path = e.path();
        if t.is_dir() && depth < MAX_DEPTH {
            collect(&path, depth + 1, out);
        } else if t.is_file() && is_rollout(&e.file_name().to_string_lossy()) {
            out.push(path);
        }
    }
}

/// The rollout of thread `id` in the Codex home that holds `near` (plain before compressed).
pub(crate) fn find_rollout(near: &Path, id: &str) -> Option<PathBuf> {
    let home = near
        .ancestors()
        .find(|a| {
            a.file_name()
                .is_some_and(|n| n == "sessions" || n == "archived_sessions")
        })?
        .parent()?;
    let mut found = Vec::new();
    for sub in ["sessions", "archived_sessions"] {
        collect(&home.join(sub), 0, &mut found);
    }
    found.sort();
    let named = |p: &PathBuf, plain: bool| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
        name.is_some_and(|n| {
            let stem = n.trim_end_matches(".zst");
            (plain == (stem.len() == n.len())) && stem.trim_end_matches(".jsonl").ends_with(id)
        })
    };
    let hit = found.iter().find(|p| named(p, true) && p.as_path() != near);
    hit.or_else(|| {
        found
            .iter()
            .find(|p| named(p, false) && p.as_path() != near)
    })
    .cloned()
}

/// The Codex rollouts of `workspace` under `home`, sorted by path; a session in both
/// `sessions/` and `archived_sessions/`, or plain and compressed, is listed once (the
/// live, plain one).
pub fn list_workspace_sessions(
    home: &Path,
    workspace: &str,
    path_map: &BTreeMap<String, String>,
) -> Result<Vec<SessionLog>, DiscoverError> {
    // The workspace's root and its `pathMap` twins: a rollout copied from another machine
    // names that machine's cwd.
    let roots = workspace_roots(workspace, path_map);
    let mut files = Vec::new();
    for sub in ["sessions", "archived_sessions"] {
        let mut found = Vec::new();
        collect(&home.join(sub), 0, &mut found);
        found.sort();
        files.extend(found);
    }
    let mut seen = std::collections::BTreeSet::new();
    // G0: the fullest file of each conversation.
    let mut fullest: std::collections::BTreeMap<String, (usize, PathBuf)> =
        std::collections::BTreeMap::new();
    for path in files.iter().filter(|p| g0::is_g0(p)) {
        if let Some((key, n)) = g0::conversation_key(path) {
            let e = fullest.entry(key).or_insert((n, path.clone()));
            if n > e.0 {
                *e = (n, path.clone());
            }
        }
    }
    let mut out = Vec::new();
    for path in files {
        if g0::is_g0(&path) && !fullest.values().any(|(_, p)| *p == path) {
            continue; // an earlier save of a conversation a fuller file holds
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = name.trim_end_matches(".zst").to_owned();
        let compressed = name.ends_with(".zst");
        if compressed && path.with_file_name(&stem).is_file() {
            continue; // the plain file hides it
        }
        if !seen.insert(stem.clone()) {
            continue;
        }
        let Ok(Some(facts)) = rollout_facts(&path, FIRST_LINE_CAP) else {
            continue;
        };
        let Some(cwd) = facts.cwd.as_deref() else {
            continue;
        };
        if !cwd_in_roots(cwd, &roots, path_map) {
            continue;
        }
        let id = facts.id.clone().unwrap_or_else(|| {
            stem.trim_end_matches(".jsonl")
                .trim_end_matches(".json")
                .to_owned()
        });
        out.push(SessionLog {
            session_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            session_id: format!("{}{id}", crate::source::Harness::Codex.session_prefix()),
            log: path,
            generation: 0,
            compressed,
        });
    }
    Ok(out)
}

//! Claude Code: `<root>/projects/<key>/<sessionId>.jsonl`, `<root>` = `$CLAUDE_CONFIG_DIR`
//! or `~/.claude`.
//!
//! Discovery: the folder key is lossy (every non-alphanumeric character → `-`, cut at 200
//! with a hash), so it is never decoded: a folder whose name could belong to the workspace
//! (or a folder under it) is opened and each transcript's own `cwd` decides — the session
//! belongs to the workspace when its first `cwd` is the workspace or inside it. Subagent
//! transcripts (`agent-*.jsonl`, beside the session or under `<sessionId>/subagents/`) are
//! not sessions: their answered calls are folded into the parent's `Task` call and their
//! report is that call's result (`subagent`).
//!
//! Screen: [`screen`]. Tool vocabulary: Claude Code's tools already speak the shared one
//! (`Bash` takes `command`; `Read`/`Edit`/`Write`/`MultiEdit` take `file_path`,
//! `NotebookEdit` `notebook_path`, `Glob`/`Grep` `path`), so calls pass through unchanged.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::session::cwdkey::{cwd_in_roots, workspace_roots};
use crate::session::discover::{DiscoverError, SessionLog};

mod dag;
pub mod discovery;
mod line;
mod reader;
pub(crate) mod screen;
mod subagent;

pub use reader::{ClaudeReader, PlanCache, SessionFacts, SEQ_SHIFT};

/// The longest folder key Claude Code writes before cutting it and adding a hash.
const MAX_KEY: usize = 200;
/// Lines read, at most, to find a transcript's `cwd`.
const CWD_SCAN_LINES: usize = 64;

/// Claude Code's root: `$CLAUDE_CONFIG_DIR`, else `$HOME/.claude`.
pub fn home_from_env() -> Option<PathBuf> {
    crate::source::discovery::home_from_env("CLAUDE_CONFIG_DIR", ".claude")
}

/// Claude Code's folder key of `cwd`: every character but ASCII letters and digits → `-`,
/// counted as JavaScript counts them (`cwd.replace(/[^a-zA-Z0-9]/g, "-")` replaces UTF-16
/// code units: a character outside the Basic Multilingual Plane, an emoji, becomes two; the
/// function as read from Claude Code 2.1.139's bundle, public in Michaelliv/claude-quest#15).
pub fn folder_key(cwd: &str) -> String {
    let mut key = String::with_capacity(cwd.len());
    for c in cwd.chars() {
        if c.is_ascii_alphanumeric() {
            key.push(c);
        } else {
            for _ in 0..c.len_utf16() {
                key.push('-');
            }
        }
    }
    key
}

/// Whether a folder named `name` may hold sessions of `workspace_key`'s workspace or of a
/// folder under it (a key cut at 200 characters is compared on what is left); `fold_case`
/// for a Windows root, whose drive letter Claude Code writes as the shell had it.
fn may_hold(name: &str, workspace_key: &str, fold_case: bool) -> bool {
    let starts = |text: &str, prefix: &str| {
        text.get(..prefix.len()).is_some_and(|head| {
            if fold_case {
                head.eq_ignore_ascii_case(prefix)
            } else {
                head == prefix
            }
        })
    };
    if starts(name, workspace_key) {
        return true;
    }
    let cut = name.len().min(MAX_KEY);
    name.len() >= MAX_KEY && starts(workspace_key, &name[..cut])
}

/// The first `cwd` a transcript's lines carry.
pub fn transcript_cwd(path: &Path) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Cwd {
        cwd: Option<String>,
        #[serde(rename = "isSidechain")]
        is_sidechain: Option<bool>,
    }
    let file = crate::session::reader::open_regular(path).ok()?;
    let reader = BufReader::with_capacity(64 * 1024, file);
    for line in reader.split(b'\n').take(CWD_SCAN_LINES) {
        let line = line.ok()?;
        if let Ok(Cwd {
            cwd: Some(cwd),
            is_sidechain,
        }) = serde_json::from_slice::<Cwd>(&line)
        {
            if !cwd.is_empty() && is_sidechain != Some(true) {
                return Some(cwd);
            }
        }
    }
    None
}

/// The session a transcript was forked (or, before 2.x, resumed) from, when it is one:
/// the `forkedFrom.sessionId` its first lines carry (`/branch`, the SDK's `forkSession`),
/// else the earlier transcript of its folder that starts with the same `uuid`
/// (`--resume … --fork-session` copies the chain with its uuids under the new
/// `sessionId`, and writes no `forkedFrom`) or, when the first `uuid` line names a parent
/// (a fork of a compacted session starts at the compaction), holds that line. The
/// parent's own id, unprefixed.
pub fn fork_parent(path: &Path) -> Option<String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Forked {
        forked_from: Option<Origin>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Origin {
        session_id: Option<String>,
    }
    let own = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    let file = crate::session::reader::open_regular(path).ok()?;
    let lines = BufReader::with_capacity(64 * 1024, file).split(b'\n');
    for line in lines.take(CWD_SCAN_LINES) {
        let line = line.ok()?;
        if let Ok(Forked {
            forked_from: Some(Origin {
                session_id: Some(parent),
            }),
        }) = serde_json::from_slice::<Forked>(&line)
        {
            if !parent.is_empty() && Some(&parent) != own.as_ref() {
                return Some(parent);
            }
        }
    }
    let first = reader::first_uuid_of(path)?;
    let cap = crate::session::reader::DEFAULT_MAX_LINE_BYTES;
    let origin = reader::earlier_siblings(path, &first, cap)
        .into_iter()
        .next()?;
    origin.file_stem().map(|s| s.to_string_lossy().into_owned())
}

/// The Claude Code sessions of `workspace` under `home` (sorted by folder, then file).
/// A missing `projects/` folder is no session; an unreadable project folder is skipped.
pub fn list_workspace_sessions(
    home: &Path,
    workspace: &str,
    path_map: &BTreeMap<String, String>,
) -> Result<Vec<SessionLog>, DiscoverError> {
    let projects = home.join("projects");
    let entries = match std::fs::read_dir(&projects) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(DiscoverError::Io {
                dir: projects,
                source,
            })
        }
    };
    // The workspace's root and its `pathMap` twins (a transcript copied from another
    // machine names that machine's cwd, and its folder that cwd's key).
    let roots = workspace_roots(workspace, path_map);
    let keys: Vec<(String, bool)> = roots
        .iter()
        .map(|r| (folder_key(r.text.trim_end_matches('/')), r.windows))
        .collect();
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            keys.iter()
                .any(|(key, windows)| may_hold(&name, key, *windows))
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut logs: Vec<PathBuf> = files
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                name.is_some_and(|n| n.ends_with(".jsonl") && !n.starts_with("agent-"))
            })
            .collect();
        logs.sort();
        for log in logs {
            let Some(cwd) = transcript_cwd(&log) else {
                continue;
            };
            if !cwd_in_roots(&cwd, &roots, path_map) {
                continue;
            }
            let stem = log
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push(SessionLog {
                session_dir: dir.clone(),
                session_id: format!(
                    "{}{stem}",
                    crate::source::Harness::ClaudeCode.session_prefix()
                ),
                log,
                generation: 0,
                compressed: false,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_keys_are_lossy_and_matched_by_prefix() {
        assert_eq!(
            folder_key("/Users/foo/.config/my_app"),
            "-Users-foo--config-my-app"
        );
        assert_eq!(folder_key("C:\\Users\\x\\proj"), "C--Users-x-proj");
        // Accents and CJK are one code unit each, an emoji two (JavaScript's count).
        assert_eq!(folder_key("/home/José/项目"), "-home-Jos----");
        assert_eq!(folder_key("/w/🦀x"), "-w---x");
        let ws = folder_key("/home/a/w");
        assert!(may_hold("-home-a-w", &ws, false));
        assert!(may_hold("-home-a-w-sub", &ws, false));
        assert!(!may_hold("-home-a-x", &ws, false));
        assert!(!may_hold("-HOME-a-w", &ws, false));
        // A Windows root: the drive letter as the shell had it.
        let win = folder_key("C:/Users/x/proj");
        assert!(may_hold("c--Users-x-proj-sub", &win, true));
        assert!(!may_hold("c--Users-x-proj-sub", &win, false));
        let long = format!("/{}", "d".repeat(300));
        let cut = format!("{}-abc123", &folder_key(&long)[..MAX_KEY]);
        assert!(may_hold(&cut, &folder_key(&long), false));
    }

    #[test]
    fn a_transcript_from_a_windows_machine_is_found_through_the_path_map() {
        // Claude Code on Windows: the folder key of `c:\Users\ana\proj\pkg` (the drive
        // letter as the shell had it), the lines' cwd with backslashes.
        let home = tempfile::tempdir().unwrap();
        let folder = home.path().join("projects").join("c--Users-ana-proj-pkg");
        std::fs::create_dir_all(&folder).unwrap();
        let line = serde_json::json!({"type": "user", "cwd": "c:\\Users\\ana\\proj\\pkg",
            "uuid": "u1", "sessionId": "s-1", "message": {"role": "user", "content": "hi"}});
        std::fs::write(folder.join("s-1.jsonl"), format!("{line}\n")).unwrap();
        let ws = "/home/ana/proj";
        let none = BTreeMap::new();
        assert!(list_workspace_sessions(home.path(), ws, &none)
            .unwrap()
            .is_empty());
        let map = BTreeMap::from([("C:\\Users\\ana\\proj".to_owned(), ws.to_owned())]);
        let found = list_workspace_sessions(home.path(), ws, &map).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        // A sibling the map does not cover stays out.
        let other = BTreeMap::from([("C:\\Users\\ana\\pro".to_owned(), ws.to_owned())]);
        assert!(list_workspace_sessions(home.path(), ws, &other)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_session_whose_cwd_no_longer_exists_is_still_found_for_its_workspace() {
        // A monorepo package or a worktree deleted since the session: its transcript names a
        // cwd that is gone; the workspace it lay in still owns it (matched on the path text).
        let home = tempfile::tempdir().unwrap();
        let workspace = home.path().join("w");
        std::fs::create_dir(&workspace).unwrap();
        let gone = workspace.join("packages").join("removed");
        let gone_text = gone.to_string_lossy().into_owned();
        let folder = home.path().join("projects").join(folder_key(&gone_text));
        std::fs::create_dir_all(&folder).unwrap();
        let line = serde_json::json!({"type": "user", "cwd": gone_text, "uuid": "u1",
            "sessionId": "s-1", "message": {"role": "user", "content": "hello"}});
        std::fs::write(folder.join("s-1.jsonl"), format!("{line}\n")).unwrap();
        assert!(!gone.exists());
        let found =
            list_workspace_sessions(home.path(), &workspace.to_string_lossy(), &BTreeMap::new())
                .unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].session_id.ends_with("s-1"));
        // Another workspace does not take it.
        let other = home.path().join("x");
        assert!(
            list_workspace_sessions(home.path(), &other.to_string_lossy(), &BTreeMap::new())
                .unwrap()
                .is_empty()
        );
    }
}

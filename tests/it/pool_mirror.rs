//! Issue #17 point 6: the packed mirror. A new machine's first sync keeps the pool's
//! documents in the mirror's git directory (a local pool's objects fetched as one pack) and
//! writes no plain file for them; search still covers them, and a document `search` or
//! `show` returns is written out where the agent's `read` tool opens it. A first sync killed
//! before its marker leaves a mirror every reader still opens; the next sync completes it.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use crate::pool::{git, pool_files};
use crate::support::{link_private, two_task_turns, Sandbox};

const S1: &str = "session-0000000a-0000-4000-8000-000000000001";

/// A machine that archived one session of two csv tasks and published it.
fn publisher(pool: &Path) -> Sandbox {
    let a = Sandbox::machine("machine-a");
    a.write_session(S1, 4, true, &two_task_turns(&a.ws));
    link_private(&a, pool);
    a.ok(&["archive"]);
    a.ok(&["sync"]);
    a
}

/// A machine joining the pool with no recent window: only what is returned is written.
fn newcomer(pool: &Path) -> Sandbox {
    let b = Sandbox::machine("machine-b");
    b.ok(&["init"]);
    std::fs::write(
        b.ws.join(".dsh-chapters/config.yml"),
        "mirrorRecentDays: 0\n",
    )
    .expect("config");
    link_private(&b, pool);
    b
}

/// Every plain file under the mirror but its git directory.
fn mirror_files(m: &Sandbox) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![m.ws.join(".dsh-knowledge")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name() == ".git" {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The pool's chapters of session `S1`, as pool paths.
fn pool_chapters(pool: &Path) -> Vec<String> {
    pool_files(pool)
        .into_iter()
        .filter(|p| p.starts_with("chapters/") && p.contains(S1) && p.ends_with(".md"))
        .collect()
}

fn pool_bytes(pool: &Path, path: &str) -> String {
    git(pool, &["show", &format!("main:{path}")])
}

#[test]
fn a_new_machine_searches_documents_never_written_and_show_writes_one_out() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let _a = publisher(&pool);
    let chapters = pool_chapters(&pool);
    assert!(
        chapters.len() >= 2,
        "two chapters in the pool: {chapters:?}"
    );

    let b = newcomer(&pool);
    let j = b.json(&["sync", "--json"]);
    assert_eq!(j["code"], "ok", "{j}");
    // The mirror holds the pool's objects, not a file per document.
    let written: Vec<PathBuf> = mirror_files(&b)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/chapters/"))
        .collect();
    assert!(written.is_empty(), "chapters written at sync: {written:?}");
    let objects = b.ws.join(".dsh-knowledge/.git");
    for path in &chapters {
        let blob = git(&pool, &["rev-parse", &format!("main:{path}")]);
        let held = git(&objects, &["cat-file", "-t", blob.trim()]);
        assert_eq!(held.trim(), "blob", "{path} is in the mirror's objects");
    }

    // Search covers them, and what it returns opens.
    let v = b.json(&["search", "csv", "--json"]);
    let hits = v["matches"].as_array().expect("matches");
    let first = hits
        .iter()
        .map(|m| m["path"].as_str().expect("path"))
        .find(|p| p.starts_with(".dsh-knowledge/chapters/") && p.contains(S1))
        .unwrap_or_else(|| panic!("a pool document found: {v}"))
        .to_owned();
    let pool_path = first.strip_prefix(".dsh-knowledge/").expect("mirror path");
    assert_eq!(
        std::fs::read_to_string(b.ws.join(&first)).expect("written out by search"),
        pool_bytes(&pool, pool_path),
    );

    // `show` of one no answer returned yet writes it out, with the pool's bytes.
    let other = chapters
        .iter()
        .map(|p| format!(".dsh-knowledge/{p}"))
        .find(|p| !b.ws.join(p).exists())
        .unwrap_or_else(|| {
            // Search returned every chapter: forget the written copy, as a fresh machine.
            let p = format!(".dsh-knowledge/{}", chapters[0]);
            std::fs::remove_file(b.ws.join(&p)).expect("remove");
            p
        });
    assert!(!b.ws.join(&other).exists());
    let shown = b.ok(&["show", &other]);
    let pool_path = other.strip_prefix(".dsh-knowledge/").expect("mirror path");
    let bytes = pool_bytes(&pool, pool_path);
    assert_eq!(
        std::fs::read_to_string(b.ws.join(&other)).expect("written out by show"),
        bytes
    );
    let title = bytes
        .lines()
        .find_map(|l| l.strip_prefix("title: "))
        .expect("title")
        .trim_matches('"')
        .to_owned();
    assert!(shown.contains(&title), "{shown}");
    // Another sync writes nothing more and keeps the written copies.
    b.ok(&["sync"]);
    assert!(b.ws.join(&first).is_file() && b.ws.join(&other).is_file());
}

#[test]
fn the_recent_window_writes_recent_chapters_at_sync() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let _a = publisher(&pool);
    let b = newcomer(&pool);
    std::fs::write(
        b.ws.join(".dsh-chapters/config.yml"),
        "mirrorRecentDays: 36500\n",
    )
    .expect("config");
    b.ok(&["sync"]);
    // The fixture's chapters are dated in 2025: all inside a window of a hundred years.
    for path in pool_chapters(&pool) {
        let file = b.ws.join(".dsh-knowledge").join(&path);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap_or_default(),
            pool_bytes(&pool, &path),
            "{path}"
        );
    }
}

#[test]
fn a_killed_first_sync_leaves_a_readable_mirror() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let _a = publisher(&pool);
    let b = newcomer(&pool);
    // Killed with the objects fetched and the files written, before the marker.
    let out = b
        .cmd(&["sync"])
        .env("CHAPTERS_CRASH_AT", "sync-after-materialize")
        .output()
        .expect("run");
    assert_eq!(out.status.signal(), Some(9), "{out:?}");
    // Every reader opens what it left: nothing of the pool yet, no failure.
    let v = b.json(&["search", "csv", "--json"]);
    assert!(v["matches"].is_array(), "{v}");
    b.ok(&["status"]);
    b.ok(&["list"]);
    // Killed at whatever point a timer hits, then the next sync completes the mirror.
    for delay in [5u64, 30, 120] {
        b.killed_after(&["sync"], std::time::Duration::from_millis(delay));
        let v = b.json(&["search", "csv", "--json"]);
        assert!(v["matches"].is_array(), "after a kill at {delay} ms: {v}");
    }
    let j = b.json(&["sync", "--json"]);
    assert_eq!(j["code"], "ok", "{j}");
    let v = b.json(&["search", "csv", "--json"]);
    let found = v["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .filter_map(|m| m["path"].as_str())
        .any(|p| p.starts_with(".dsh-knowledge/chapters/") && p.contains(S1));
    assert!(found, "the pool's documents found after the next sync: {v}");
    let git_fsck = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(b.ws.join(".dsh-knowledge/.git"))
        .args(["fsck", "--connectivity-only"])
        .output()
        .expect("git fsck");
    assert!(git_fsck.status.success(), "{git_fsck:?}");
}

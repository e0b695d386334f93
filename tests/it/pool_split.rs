//! Issue #17 point 1: a pool is never silently split. Once a sync adopted a pool
//! (`pool.json`'s `pool`), a pool that is missing, empty or another history is refused with
//! its own code (`pool-missing`, `pool-replaced`) and never re-created nor written into;
//! only `chapters link` adopts one. A history rewritten on purpose (docs/purging.md) is
//! adopted as divergence. Real directories, real git, the real binary.

use std::path::Path;

use crate::pool::{git, pool_files, session_id};
use crate::support::{link_private, two_task_turns, Sandbox};

fn pool_json(m: &Sandbox) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(m.store().join("pool.json")).expect("pool.json"))
        .expect("json")
}

/// One machine with a session archived and synced to `pool`.
fn synced_machine(name: &str, n: usize, pool: &Path) -> Sandbox {
    let m = Sandbox::machine(name);
    m.write_session(&session_id(n, 1), 4, true, &two_task_turns(&m.ws));
    link_private(&m, pool);
    m.ok(&["archive"]);
    m.ok(&["sync"]);
    m
}

/// `sync --json` fails (exit 1) with `code`; status then says local-only, the same code and
/// a hint naming what to do.
fn refused(m: &Sandbox, code: &str) -> serde_json::Value {
    let out = m.run(&["sync", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["code"], code, "{j}");
    assert!(
        j["hint"]
            .as_str()
            .is_some_and(|h| h.contains("chapters link")),
        "{j}"
    );
    let st = m.json(&["status", "--json"]);
    assert_eq!(st["mode"], "local-only", "{st}");
    assert_eq!(st["lastSyncCode"], code, "{st}");
    let hint = st["lastSyncHint"].as_str().expect("hint");
    assert!(hint.contains("chapters link"), "{hint}");
    let text = m.ok(&["status"]);
    assert!(
        text.contains(&format!("last sync: {code}")) && text.contains("chapters link"),
        "{text}"
    );
    j
}

#[test]
fn first_sync_records_the_pool_and_every_good_sync_its_head() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = synced_machine("m1", 1, &pool);
    let rec = pool_json(&m);
    let head = git(&pool, &["rev-parse", "main"]);
    assert_eq!(rec["pool"]["head"], head.trim(), "{rec}");
    assert_eq!(
        rec["pool"]["root"].as_str().map(str::len),
        Some(40),
        "{rec}"
    );
    // Another machine publishes: the next good sync here records the new head.
    let _other = synced_machine("m2", 2, &pool);
    m.ok(&["sync"]);
    let head = git(&pool, &["rev-parse", "main"]);
    assert_eq!(pool_json(&m)["pool"]["head"], head.trim());
}

#[test]
fn a_pool_renamed_away_is_refused_not_recreated_and_archives_go_on() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let aside = tmp.path().join("moved.git");
    let m = synced_machine("m1", 1, &pool);
    let head = git(&pool, &["rev-parse", "main"]);
    std::fs::rename(&pool, &aside).expect("rename");
    let j = refused(&m, "pool-missing");
    assert!(
        j["detail"].as_str().expect("detail").contains("missing"),
        "{j}"
    );
    assert!(!pool.exists(), "the pool was re-created");
    // Archiving goes on, and what it wrote waits for the pool.
    m.write_session(&session_id(1, 2), 4, true, &two_task_turns(&m.ws));
    m.ok(&["archive"]);
    assert!(!pool.exists());
    // An empty directory where the pool was (a mount point with nothing mounted): missing too.
    std::fs::create_dir(&pool).expect("mkdir");
    refused(&m, "pool-missing");
    assert_eq!(std::fs::read_dir(&pool).expect("dir").count(), 0);
    std::fs::remove_dir(&pool).expect("rmdir");
    // Back in place: the same pool, its history goes on from where it was.
    std::fs::rename(&aside, &pool).expect("rename back");
    m.ok(&["sync"]);
    let new_head = git(&pool, &["rev-parse", "main"]);
    assert_ne!(new_head, head);
    git(
        &pool,
        &["merge-base", "--is-ancestor", head.trim(), new_head.trim()],
    );
    assert!(pool_files(&pool)
        .iter()
        .any(|p| p.contains(&session_id(1, 2))));
    assert_eq!(m.json(&["status", "--json"])["mode"], "linked");
}

#[test]
fn a_pool_whose_parent_is_missing_is_refused_and_no_parent_is_created() {
    let tmp = tempfile::tempdir().expect("tmp");
    let drive = tmp.path().join("media").join("team-drive");
    let pool = drive.join("pools").join("project.git");
    let m = synced_machine("m1", 1, &pool);
    let aside = tmp.path().join("unplugged");
    std::fs::rename(&drive, &aside).expect("unplug");
    let j = refused(&m, "pool-missing");
    assert!(
        j["detail"].as_str().expect("detail").contains("parent"),
        "{j}"
    );
    assert!(!drive.exists(), "the parents were re-created");
    std::fs::rename(&aside, &drive).expect("plug back");
    m.ok(&["sync"]);
}

#[test]
fn a_pool_replaced_by_an_empty_repository_is_refused_until_linked_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = synced_machine("m1", 1, &pool);
    let before = pool_files(&pool);
    std::fs::remove_dir_all(&pool).expect("rm pool");
    git(&pool, &["init", "--bare", "-q"]);
    refused(&m, "pool-replaced");
    assert!(
        git(&pool, &["for-each-ref"]).trim().is_empty(),
        "something was published into the replaced pool"
    );
    // A person adopts it: `link` again, and the next sync republishes everything.
    link_private(&m, &pool);
    assert!(pool_json(&m).get("pool").is_none());
    m.ok(&["sync"]);
    assert_eq!(pool_files(&pool), before, "everything republished");
    assert_eq!(m.json(&["status", "--json"])["lastSyncCode"], "ok");
    let quiet = git(&pool, &["rev-parse", "main"]);
    m.ok(&["sync"]);
    assert_eq!(git(&pool, &["rev-parse", "main"]), quiet);
}

#[test]
fn a_pool_replaced_by_another_history_is_refused_not_adopted() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let other = tmp.path().join("other.git");
    let m = synced_machine("m1", 1, &pool);
    // Another machine of the same project started a pool of its own elsewhere…
    let n = synced_machine("m2", 2, &other);
    assert_eq!(
        m.json(&["status", "--json"])["identity"]["projectKey"],
        n.json(&["status", "--json"])["identity"]["projectKey"]
    );
    // …and it ends up at m1's link (the pool directory swapped).
    std::fs::remove_dir_all(&pool).expect("rm pool");
    std::fs::rename(&other, &pool).expect("swap");
    let theirs = git(&pool, &["rev-parse", "main"]);
    let j = refused(&m, "pool-replaced");
    assert!(
        j["detail"]
            .as_str()
            .expect("detail")
            .contains("first commit"),
        "{j}"
    );
    assert_eq!(
        git(&pool, &["rev-parse", "main"]),
        theirs,
        "published into it"
    );
    assert!(!pool_files(&pool)
        .iter()
        .any(|p| p.contains(&session_id(1, 1))));
    // Adopted by a person: both machines' work in one pool.
    link_private(&m, &pool);
    m.ok(&["sync"]);
    let files = pool_files(&pool);
    assert!(files.iter().any(|p| p.contains(&session_id(1, 1))));
    assert!(files.iter().any(|p| p.contains(&session_id(2, 1))));
}

#[test]
fn a_history_purged_on_purpose_is_adopted_as_divergence() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = synced_machine("machine-a", 1, &pool);
    let b = synced_machine("machine-b", 2, &pool);
    a.ok(&["sync"]);
    let old_root = git(&pool, &["rev-list", "--max-parents=0", "main"]);
    // The purge of docs/purging.md (git filter-branch), of words every commit holds (in a
    // derived file, which the next sync writes again: a chapter's own words would be
    // republished from the stores, which step 2 — forget — is for).
    let word = "merge by union";
    crate::forget::purge_with_filter_branch(&pool, word);
    assert_ne!(
        git(&pool, &["rev-list", "--max-parents=0", "main"]),
        old_root,
        "the purge rewrote the first commit"
    );
    // Neither machine refuses it: same first commit's author and message, same project.
    for m in [&a, &b] {
        let j = m.json(&["sync", "--json"]);
        assert_eq!(j["code"], "ok", "{j}");
        assert_eq!(j["report"]["historyRewritten"], true, "{j}");
        let head = git(&pool, &["rev-parse", "main"]);
        assert_eq!(pool_json(m)["pool"]["head"], head.trim());
    }
    // Then they settle: a quiet round publishes nothing.
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let quiet = git(&pool, &["rev-parse", "main"]);
    for m in [&a, &b] {
        let j = m.json(&["sync", "--json"]);
        assert_eq!(j["report"]["historyRewritten"], false, "{j}");
        assert!(
            j["report"]["published"]
                .as_object()
                .expect("published")
                .is_empty(),
            "{j}"
        );
    }
    assert_eq!(git(&pool, &["rev-parse", "main"]), quiet);
}

/// A history rewritten to drop one of this machine's chapters (a purge, docs/purging.md):
/// the head the sync's listing state names is no longer in the pool's history, so the next
/// sync compares every store file with the new tree and publishes the chapter again (the
/// store is the truth; only `chapters forget` takes a chapter back) — that one, nothing else.
#[test]
fn a_history_rewritten_without_a_chapter_gets_it_published_again() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = synced_machine("machine-a", 1, &pool);
    let dropped = pool_files(&pool)
        .into_iter()
        .find(|p| p.starts_with("chapters/") && p.contains(&session_id(1, 1)))
        .expect("a chapter of a's");
    crate::forget::rewrite_with_filter_branch(
        &pool,
        "--index-filter",
        &format!("git rm --cached --ignore-unmatch -q '{dropped}'"),
    );
    assert!(!pool_files(&pool).contains(&dropped));
    let before = git(&pool, &["rev-parse", "main"]);
    let j = a.json(&["sync", "--json"]);
    assert_eq!(j["report"]["historyRewritten"], true, "{j}");
    let changed = git(
        &pool,
        &["diff-tree", "-r", "--name-only", before.trim(), "main"],
    );
    let republished: Vec<&str> = changed
        .lines()
        .filter(|p| !(p.starts_with("index/") || p.starts_with("topics/") || *p == "README.md"))
        .collect();
    assert_eq!(republished, [dropped.as_str()], "{j}");
}

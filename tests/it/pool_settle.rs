//! Issue #17 point 8: a kill never leaves the pool arguing with itself. Syncs of the real
//! binary are killed with SIGKILL — at a chosen point through `CHAPTERS_CRASH_AT`, and at
//! whatever point a timer hits — and then every machine's syncs settle: after at most two
//! rounds a quiet round (no new work anywhere) publishes nothing. A killed sync's temp
//! files go, and a torn write-once file is never published.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;

use crate::pool::{add_turns, assert_fsck, git, pool_files, session_id};
use crate::support::{link_private, two_task_turns, Sandbox};

fn head(pool: &Path) -> String {
    git(pool, &["rev-parse", "main"]).trim().to_owned()
}

fn machine(name: &str, n: usize, pool: &Path) -> Sandbox {
    let m = Sandbox::machine(name);
    m.write_session(&session_id(n, 1), 4, true, &two_task_turns(&m.ws));
    link_private(&m, pool);
    m.ok(&["archive"]);
    m
}

/// `chapters sync` killed at `point`: it must die of SIGKILL, not finish.
fn sync_killed_at(m: &Sandbox, point: &str) -> u32 {
    let (pid, killed) = sync_crashing_at(m, point);
    assert!(killed, "not killed at {point}");
    pid
}

/// `chapters sync` with a crash point armed: whether it reached it (a sync with nothing to
/// publish never reaches `sync-after-push`).
fn sync_crashing_at(m: &Sandbox, point: &str) -> (u32, bool) {
    let child = m
        .cmd(&["sync"])
        .env("CHAPTERS_CRASH_AT", point)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    let killed = out.status.signal() == Some(9);
    assert!(killed || out.status.success(), "{out:?}");
    (pid, killed)
}

/// What one `sync --json` published, by kind.
fn published(m: &Sandbox) -> serde_json::Value {
    let j = m.json(&["sync", "--json"]);
    assert_eq!(j["code"], "ok", "{j}");
    j["report"]["published"].clone()
}

/// After the faults: two rounds to catch up, then a quiet round publishes nothing and the
/// pool's head stays where it is.
fn settles(machines: &[&Sandbox], pool: &Path) {
    for _ in 0..2 {
        for m in machines {
            published(m);
        }
    }
    let before = head(pool);
    for round in 0..2 {
        for m in machines {
            let p = published(m);
            assert!(
                p.as_object().is_some_and(|o| o.is_empty()),
                "quiet round {round}: {} published {p}",
                m.harness
            );
        }
    }
    assert_eq!(head(pool), before, "a quiet round moved the pool");
    assert_fsck(pool);
}

/// No machine's mirror holds a copy of its own store's chapters.
fn no_own_copies(m: &Sandbox) {
    let key = m.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned();
    for rel in m.snapshot().keys() {
        if let Some((p, dsh_chapters::pool::plan::FileKind::Chapter)) =
            dsh_chapters::pool::plan::pool_path(&key, rel)
        {
            assert!(
                !m.ws.join(".dsh-knowledge").join(&p).exists(),
                "{}: its own {p} was copied into its mirror",
                m.harness
            );
        }
    }
}

#[test]
fn a_sync_killed_between_its_push_and_its_mirror_marker_settles() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", 1, &pool);
    let b = machine("machine-b", 2, &pool);
    for m in [&a, &b, &a] {
        m.ok(&["sync"]);
    }
    // New work on A; its sync is killed right after the pool's ref moved.
    let log = a.write_session(&session_id(1, 2), 4, true, &two_task_turns(&a.ws));
    a.ok(&["archive"]);
    let before = head(&pool);
    // Killed once its pack is durable and before the ref moves: the pool as it was, sound
    // (the pack's objects are only unnamed), and the next sync publishes.
    sync_killed_at(&a, "sync-after-pack");
    assert_eq!(head(&pool), before, "the ref moved before the kill");
    assert_fsck(&pool);
    sync_killed_at(&a, "sync-after-push");
    assert_ne!(head(&pool), before, "the push happened before the kill");
    assert!(pool_files(&pool)
        .iter()
        .any(|p| p.contains(&session_id(1, 2))));
    settles(&[&a, &b], &pool);
    // More work in the tree the killed sync published: its part of the index is computed
    // again on A (with its own chapters copied into its mirror, A counted them twice and
    // B once, and each machine's next sync rewrote the other's index part, forever).
    add_turns(&a, &session_id(1, 2), &log, 2);
    a.ok(&["archive"]);
    settles(&[&a, &b], &pool);
    // A full rebuild of the index on either machine — what a root touched again does for
    // its part — is one the other machine agrees with (with its own chapters copied into
    // its mirror, A counted them twice and the two rebuilt the index against each other).
    a.ok(&["index", "rebuild"]);
    settles(&[&a, &b], &pool);
    b.ok(&["index", "rebuild"]);
    settles(&[&a, &b], &pool);
    no_own_copies(&a);
    no_own_copies(&b);
}

#[test]
fn kills_at_every_point_then_the_syncs_settle() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", 1, &pool);
    let b = machine("machine-b", 2, &pool);
    for m in [&a, &b] {
        m.ok(&["sync"]);
    }
    // `sync-after-pack`: the publish's own pack written, its ref not moved yet.
    for (n, point) in [
        (2, "sync-after-materialize"),
        (3, "sync-after-push"),
        (4, "sync-after-pack"),
    ] {
        for m in [&a, &b] {
            // New work on this machine, and the other one's sync lands first.
            let id = if m.harness == "machine-a" { 1 } else { 2 };
            m.write_session(&session_id(id, n), 4, true, &two_task_turns(&m.ws));
            m.ok(&["archive"]);
            sync_killed_at(m, point);
            let other = if m.harness == "machine-a" { &b } else { &a };
            other.ok(&["sync"]);
            sync_crashing_at(m, point);
        }
    }
    // Kills at whatever point a timer hits (the first sync of a bigger tree takes long
    // enough to be hit mid-run at some of these delays).
    let turns: Vec<dsh_chapters::testkit::writer::TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(11, 120, 4_000, 4, &a.ws_str()).collect();
    a.write_session(&session_id(1, 9), 4, true, &turns);
    a.ok(&["archive"]);
    for delay in [5u64, 20, 60, 150] {
        a.killed_after(&["sync"], std::time::Duration::from_millis(delay));
        b.ok(&["sync"]);
    }
    settles(&[&a, &b], &pool);
    no_own_copies(&a);
    no_own_copies(&b);
    // Nothing lost: every store file is in the pool with the store's bytes.
    for m in [&a, &b] {
        let key = m.json(&["status", "--json"])["identity"]["projectKey"]
            .as_str()
            .expect("key")
            .to_owned();
        for (rel, bytes) in m.snapshot() {
            if let Some((p, _)) = dsh_chapters::pool::plan::pool_path(&key, &rel) {
                let id = git(&pool, &["rev-parse", &format!("main:{p}")]);
                assert_eq!(id.trim(), dsh_chapters::pool::plan::blob_id(&bytes), "{p}");
            }
        }
    }
}

#[test]
fn a_killed_syncs_temp_files_are_cleaned() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", 1, &pool);
    let b = machine("machine-b", 2, &pool);
    b.ok(&["sync"]);
    let pid = sync_killed_at(&a, "sync-after-materialize");
    // What a kill in the middle of a mirror write leaves: a temp file beside its target,
    // named after the dead process (`.<name>.tmp.<pid>.<n>`).
    let mirror = a.ws.join(".dsh-knowledge");
    let key = a.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let dir = mirror.join("chapters").join(&key).join(session_id(2, 1));
    // B's chapters were materialized before the kill: the pool's objects in the mirror's.
    let b_head = head(&pool);
    assert_eq!(
        git(&mirror.join(".git"), &["cat-file", "-t", &b_head]).trim(),
        "commit",
        "B's chapters were materialized before the kill"
    );
    let left = [
        dir.join(format!(".002-x.md.tmp.{pid}.3")),
        mirror
            .join("index")
            .join(format!(".manifest.json.tmp.{pid}.0")),
        mirror
            .join(".git")
            .join(format!(".dsh-chapters-materialized.tmp.{pid}.7")),
    ];
    for f in &left {
        std::fs::create_dir_all(f.parent().expect("dir")).expect("mkdir");
        std::fs::write(f, b"half").expect("temp");
    }
    let j = a.json(&["sync", "--json"]);
    for f in &left {
        assert!(!f.exists(), "{} left behind: {j}", f.display());
    }
    assert!(
        j["report"]["notes"].to_string().contains("temp file"),
        "{j}"
    );
    settles(&[&a, &b], &pool);
}

#[test]
fn a_torn_write_once_file_is_never_published() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    let turns: Vec<dsh_chapters::testkit::writer::TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(11, 30, 4_000, 4, &a.ws_str()).collect();
    a.write_session(&session_id(1, 1), 4, true, &turns);
    link_private(&a, &pool);
    a.ok(&["archive"]);
    let store = a.store();
    let files: Vec<String> = a.snapshot().into_keys().collect();
    let artifact = files
        .iter()
        .find(|f| f.contains("/artifacts/"))
        .expect("the session stored an artifact")
        .clone();
    let chapter = files
        .iter()
        .find(|f| f.contains("/chapters/") && !f.contains("/plan-"))
        .expect("a chapter")
        .clone();
    // A power cut tore both (their names were written, their bytes were not all).
    let mut whole = Vec::new();
    for f in [&artifact, &chapter] {
        let bytes = std::fs::read(store.join(f)).expect("read");
        std::fs::write(store.join(f), &bytes[..bytes.len() / 2]).expect("tear");
        whole.push((f.clone(), bytes));
    }
    let j = a.json(&["sync", "--json"]);
    let notes = j["report"]["notes"].to_string();
    assert!(notes.contains("held back"), "{j}");
    let key = a.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let files_in_pool = pool_files(&pool);
    for f in [&artifact, &chapter] {
        let (p, _) = dsh_chapters::pool::plan::pool_path(&key, f).expect("maps");
        assert!(!files_in_pool.contains(&p), "torn {p} was published");
    }
    // The rest of the store is published.
    assert!(
        files_in_pool
            .iter()
            .filter(|p| p.starts_with("chapters/"))
            .count()
            > 0
    );
    // Still held back at the next sync (never published later behind the check's back).
    let j = a.json(&["sync", "--json"]);
    assert!(
        j["report"]["notes"].to_string().contains("held back"),
        "{j}"
    );
    let files_in_pool = pool_files(&pool);
    for f in [&artifact, &chapter] {
        let (p, _) = dsh_chapters::pool::plan::pool_path(&key, f).expect("maps");
        assert!(!files_in_pool.contains(&p), "torn {p} was published");
    }
    // Repaired behind the store's catalog's back (nothing records a repair): its root is
    // listed again at every sync until it publishes, so the next sync publishes both whole.
    for (f, bytes) in &whole {
        std::fs::write(store.join(f), bytes).expect("repair");
    }
    let j = a.json(&["sync", "--json"]);
    assert!(
        !j["report"]["notes"].to_string().contains("held back"),
        "{j}"
    );
    let files_in_pool = pool_files(&pool);
    for f in [&artifact, &chapter] {
        let (p, _) = dsh_chapters::pool::plan::pool_path(&key, f).expect("maps");
        assert!(files_in_pool.contains(&p), "repaired {p} was not published");
    }
}

#[test]
fn a_mirror_an_older_version_filled_with_its_own_chapters_is_swept_once() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", 1, &pool);
    a.ok(&["sync"]);
    // What an older version left after a kill between push and marker: the store's own
    // chapters copied into the mirror, and no record of a sweep.
    let key = a.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let mirror = a.ws.join(".dsh-knowledge");
    let mut copied = 0;
    for (rel, bytes) in a.snapshot() {
        if let Some((p, dsh_chapters::pool::plan::FileKind::Chapter)) =
            dsh_chapters::pool::plan::pool_path(&key, &rel)
        {
            let target = mirror.join(&p);
            std::fs::create_dir_all(target.parent().expect("dir")).expect("mkdir");
            std::fs::write(&target, bytes).expect("copy");
            copied += 1;
        }
    }
    assert!(copied > 0);
    std::fs::remove_file(mirror.join(".git").join("dsh-chapters-own-swept")).expect("marker");
    let j = a.json(&["sync", "--json"]);
    assert!(
        j["report"]["notes"].to_string().contains("own chapters"),
        "{j}"
    );
    no_own_copies(&a);
    settles(&[&a], &pool);
}

#[test]
fn a_ref_lock_a_killed_writer_left_is_removed_and_the_publish_goes_through() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", 1, &pool);
    a.ok(&["sync"]);
    // What a writer killed inside its ref transaction leaves: the ref's lock file.
    std::fs::write(pool.join("refs/heads/main.lock"), b"").expect("lock");
    a.write_session(&session_id(1, 2), 4, true, &two_task_turns(&a.ws));
    a.ok(&["archive"]);
    let j = a.json(&["sync", "--json"]);
    assert_eq!(j["code"], "ok", "{j}");
    assert!(!pool.join("refs/heads/main.lock").exists());
    assert!(pool_files(&pool)
        .iter()
        .any(|p| p.contains(&session_id(1, 2))));
    settles(&[&a], &pool);
}

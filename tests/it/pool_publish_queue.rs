//! Issue #17 point 9: the publishers of one local pool take turns on its publish lock
//! (`<pool>/chapters-publish.lock`, a flock) instead of racing for its ref. N `chapters
//! sync` processes at once all succeed, each in one attempt (no lost race to retry); a
//! SIGKILLed holder never wedges the next sync (the kernel drops its flock); a turn not had
//! in time falls back to racing, still safe (the ref's compare-and-swap is the guard).

use std::fs::OpenOptions;
use std::path::Path;
use std::process::Stdio;

use crate::pool::{assert_fsck, git};
use crate::pool_converge::new_work;
use crate::support::{link_private, Sandbox};

const MACHINES: usize = 6;
/// Long enough never to be reached here: a turn is always had, so no sync races.
const NEVER_MS: &str = "600000";

fn sync_json(m: &Sandbox, wait_ms: &str, crash_at: Option<&str>) -> Option<serde_json::Value> {
    let mut cmd = m.cmd(&["sync", "--json"]);
    cmd.env("CHAPTERS_PUBLISH_LOCK_WAIT_MS", wait_ms)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(point) = crash_at {
        cmd.env("CHAPTERS_CRASH_AT", point);
    }
    let out = cmd.output().expect("run chapters sync");
    out.status.code()?;
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: sync printed no JSON ({e}): {}{}",
            m.harness,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }))
}

fn notes(j: &serde_json::Value) -> String {
    j["report"]["notes"].to_string()
}

/// `n` machines linked to one pool, each with work archived; the pool created by the first
/// one's sync (a team's pool exists before its members sync at once).
fn team(pool: &Path, n: usize) -> Vec<Sandbox> {
    let machines: Vec<Sandbox> = (0..n)
        .map(|i| {
            let m = Sandbox::machine(&format!("machine-{i}"));
            link_private(&m, pool);
            new_work(&m, i, 1);
            m
        })
        .collect();
    let first = sync_json(&machines[0], NEVER_MS, None).expect("first sync");
    assert_eq!(first["code"], "ok", "{first}");
    machines
}

#[test]
fn concurrent_syncs_to_one_local_pool_all_succeed_without_a_lost_race() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let machines = team(&pool, MACHINES);
    for round in 0..2 {
        std::thread::scope(|s| {
            for (i, m) in machines.iter().enumerate() {
                s.spawn(move || new_work(m, i, round + 2));
            }
        });
        let outcomes: Vec<serde_json::Value> = std::thread::scope(|s| {
            let handles: Vec<_> = machines
                .iter()
                .map(|m| s.spawn(move || sync_json(m, NEVER_MS, None).expect("not killed")))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("sync thread"))
                .collect()
        });
        for (m, j) in machines.iter().zip(&outcomes) {
            assert_eq!(j["code"], "ok", "round {round}: {}: {j}", m.harness);
            // In turn, a sync's fetch and push see the same head: it never lost a race.
            assert_eq!(
                j["report"]["attempts"],
                1,
                "round {round}: {} raced: {}",
                m.harness,
                notes(j)
            );
        }
    }
    assert!(pool.join("chapters-publish.lock").is_file());
    assert_fsck(&pool);
    // Every machine's chapters are in the pool: each published its own once per round.
    let authors = git(&pool, &["log", "--format=%ae", "main"]);
    for m in &machines {
        assert!(
            authors.lines().any(|a| a.starts_with(&m.harness)),
            "{} never published: {authors}",
            m.harness
        );
    }
}

#[test]
fn a_sigkilled_holder_of_the_publish_lock_does_not_wedge_the_next_sync() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let machines = team(&pool, 2);
    new_work(&machines[1], 1, 2);
    // Killed by SIGKILL after its push, its turn still held.
    assert!(
        sync_json(&machines[1], NEVER_MS, Some("sync-after-push")).is_none(),
        "the crash point was not reached"
    );
    // The kernel dropped the dead holder's flock: the next syncs get their turn at once
    // (with a wait bound they would otherwise run out of, and then say so).
    for m in &machines {
        let j = sync_json(m, "30000", None).expect("not killed");
        assert_eq!(j["code"], "ok", "{}: {j}", m.harness);
        assert!(!notes(&j).contains("publish lock"), "{}: {j}", m.harness);
    }
    assert_fsck(&pool);
}

#[test]
fn a_turn_not_had_in_time_falls_back_to_racing_safely() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let machines = team(&pool, 2);
    new_work(&machines[1], 1, 2);
    // A live holder that never lets go (this test process).
    let held = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(pool.join("chapters-publish.lock"))
        .expect("the lock file beside the pool's ref");
    held.lock().expect("hold the publish lock");
    let j = sync_json(&machines[1], "0", None).expect("not killed");
    assert_eq!(j["code"], "ok", "{j}");
    assert!(
        notes(&j).contains("publishing without waiting for a turn"),
        "{j}"
    );
    held.unlock().expect("release");
    assert_fsck(&pool);
}

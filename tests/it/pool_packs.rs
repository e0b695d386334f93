//! A year's scale (issue #17 point 6): every publish packs the objects it wrote, so a pool
//! after many publishes holds a bounded number of loose objects, and real git finds it sound.

use std::path::Path;

use crate::support::{link_private, two_task_turns, Sandbox};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `git count-objects -v` as name → number.
fn count_objects(pool: &Path) -> std::collections::BTreeMap<String, u64> {
    git(pool, &["count-objects", "-v"])
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(": ")?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn after_many_publishes_a_local_pool_is_packed_and_fsck_clean() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = std::fs::canonicalize(tmp.path())
        .expect("canon")
        .join("pool.git");
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    link_private(&sb, &pool);
    let mirror = sb.ws.join(".dsh-knowledge/.git");
    let mut first_loose = 0;
    const PUBLISHES: usize = 10;
    for k in 0..PUBLISHES {
        sb.write_session(
            &format!("session-pac0pac0-0000-4000-8000-{k:012}"),
            4,
            true,
            &two_task_turns(&sb.ws),
        );
        sb.ok(&["archive"]);
        let out = sb.cmd(&["sync"]).output().expect("sync");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        // Past the roll-ups (8 packs), the mirror's copy still lands whole: no fallback.
        assert!(!stderr.contains("could not"), "publish {k}: {stderr}");
        let counts = count_objects(&pool);
        // Each publish's objects are in its pack; nothing stays loose.
        assert_eq!(
            counts["count"], 0,
            "loose objects after publish {k}: {counts:?}"
        );
        assert!(
            counts["packs"] >= 1 && counts["packs"] <= (k + 1) as u64 * 2,
            "{counts:?}"
        );
        // The mirror holds the pool's head too: fetched once, then copied in and packed
        // per publish, its tracking ref moved along (what a consolidation keeps).
        let head = git(&pool, &["rev-parse", "main"]);
        assert_eq!(
            git(&mirror, &["rev-parse", "refs/remotes/pool/main"]),
            head,
            "publish {k}"
        );
        let mirrored = count_objects(&mirror);
        if k == 0 {
            first_loose = mirrored["count"];
        }
        assert!(
            mirrored["count"] <= first_loose && mirrored["packs"] <= (k + 1) as u64 * 2,
            "the mirror after publish {k}: {mirrored:?}"
        );
    }
    git(&pool, &["fsck", "--strict", "--no-dangling"]);
    git(&mirror, &["fsck", "--strict", "--no-dangling"]);
    let files = git(&pool, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(
        files.lines().filter(|l| l.starts_with("chapters/")).count() >= PUBLISHES,
        "{files}"
    );
}

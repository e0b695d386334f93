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
    const PUBLISHES: usize = 6;
    for k in 0..PUBLISHES {
        sb.write_session(
            &format!("session-pac0pac0-0000-4000-8000-{k:012}"),
            4,
            true,
            &two_task_turns(&sb.ws),
        );
        sb.ok(&["archive"]);
        sb.ok(&["sync"]);
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
    }
    git(&pool, &["fsck", "--strict", "--no-dangling"]);
    let files = git(&pool, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(
        files.lines().filter(|l| l.starts_with("chapters/")).count() >= PUBLISHES,
        "{files}"
    );
}

//! The knowledge pool end to end: real bare repositories on local disk, a real smart-HTTP
//! server on loopback, three "machines", faults.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use dsh_chapters::testkit::writer::{LogWriter, SessionScript, TurnSpec};

use crate::githttp::GitHttpServer;
use crate::support::{link_private, two_task_turns, Sandbox, START_MS};

pub(crate) fn session_id(machine: usize, n: usize) -> String {
    format!("session-{machine:08}-0000-4000-8000-{n:012}")
}

pub(crate) fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn assert_fsck(pool: &Path) {
    let fsck = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["fsck", "--strict"])
        .output()
        .expect("fsck");
    assert!(
        fsck.status.success(),
        "git fsck: {}",
        String::from_utf8_lossy(&fsck.stderr)
    );
}

/// The pool file `p` as `m`'s mirror holds it: its plain file, or the packed mirror's tree at
/// the head the mirror materialized (`pool::mirror`: other machines' documents stay in the
/// mirror's objects until a machine reads them).
pub(crate) fn mirror_bytes(m: &Sandbox, p: &str) -> Option<Vec<u8>> {
    if let Ok(bytes) = std::fs::read(m.ws.join(".dsh-knowledge").join(p)) {
        return Some(bytes);
    }
    let git_dir = m.ws.join(".dsh-knowledge/.git");
    let head = std::fs::read_to_string(git_dir.join("dsh-chapters-materialized")).ok()?;
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(&git_dir)
        .args(["cat-file", "blob", &format!("{}:{p}", head.trim())])
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

/// Whether `m`'s mirror holds the pool file `p` (see [`mirror_bytes`]).
pub(crate) fn mirror_holds(m: &Sandbox, p: &str) -> bool {
    mirror_bytes(m, p).is_some()
}

/// The files of `m`'s mirror under the pool path `prefix` (plain files and the packed
/// mirror's tree), as (pool path, text), sorted.
pub(crate) fn mirror_documents(m: &Sandbox, prefix: &str) -> Vec<(String, String)> {
    let git_dir = m.ws.join(".dsh-knowledge/.git");
    let mut paths: BTreeSet<String> = BTreeSet::new();
    if let Ok(head) = std::fs::read_to_string(git_dir.join("dsh-chapters-materialized")) {
        paths.extend(
            git(&git_dir, &["ls-tree", "-r", "--name-only", head.trim()])
                .lines()
                .filter(|p| p.starts_with(prefix))
                .map(str::to_owned),
        );
    }
    let mut stack = vec![m.ws.join(".dsh-knowledge").join(prefix)];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(m.ws.join(".dsh-knowledge")) {
                paths.insert(rel.to_string_lossy().into_owned());
            }
        }
    }
    paths
        .into_iter()
        .filter_map(|p| {
            let text = String::from_utf8_lossy(&mirror_bytes(m, &p)?).into_owned();
            Some((p, text))
        })
        .collect()
}

pub(crate) fn pool_files(pool: &Path) -> BTreeSet<String> {
    git(pool, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Chapter files a machine's store holds, as pool paths.
/// A machine that archived one two-task session and published it to a new local pool
/// (`<tmp>/pool.git`): the tests' common start.
fn published_machine(
    name: &str,
    machine: usize,
) -> (tempfile::TempDir, std::path::PathBuf, Sandbox) {
    let (tmp, pool, m, _) = published_session(name, machine);
    (tmp, pool, m)
}

/// [`published_machine`], and the session's log (to add turns to).
fn published_session(
    name: &str,
    machine: usize,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    Sandbox,
    std::path::PathBuf,
) {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine(name);
    let log = m.write_session(&session_id(machine, 1), 4, true, &two_task_turns(&m.ws));
    link_private(&m, &pool);
    m.ok(&["archive"]);
    m.ok(&["sync"]);
    (tmp, pool, m, log)
}

fn own_pool_paths(sb: &Sandbox, project_key: &str) -> BTreeSet<String> {
    sb.snapshot()
        .keys()
        .filter_map(|k| dsh_chapters::pool::plan::pool_path(project_key, k).map(|(p, _)| p))
        .collect()
}

fn project_key(sb: &Sandbox) -> String {
    sb.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned()
}

/// Which harnesses ever committed each path (derived files aside).
fn writers_per_path(pool: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let log = git(pool, &["log", "--format=@%ae", "--name-only", "main"]);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut author = String::new();
    for line in log.lines() {
        if let Some(a) = line.strip_prefix('@') {
            author = a.to_owned();
        } else if !line.is_empty()
            && line != "project.yml"
            && line != "README.md"
            && line != ".gitattributes"
            && !line.starts_with("index/")
            && line != "topics/vocabulary.json"
        {
            out.entry(line.to_owned())
                .or_default()
                .insert(author.clone());
        }
    }
    out
}

pub(crate) fn add_turns(sb: &Sandbox, session: &str, log: &Path, n: usize) {
    let text = std::fs::read_to_string(
        sb.store()
            .join(session)
            .join("collections")
            .join(format!("{session}.jsonl")),
    )
    .expect("ledger");
    let last: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("line")).expect("json");
    let next = last["seqs"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|v| v.as_u64())
        .expect("seq")
        + 1;
    let turn = last["turn"].as_u64().expect("turn") + 1;
    let mut w = LogWriter::open_append(log, true).expect("append");
    let mut script = SessionScript::starting_at(4, next, turn, START_MS + 5_000_000);
    for i in 0..n {
        let t = TurnSpec::new(&format!("Write the release notes, part {i}"), "Written.");
        w.append_turn(&mut script, &t).expect("turn");
    }
}

#[test]
fn three_machines_interleaved_on_a_local_pool() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    three_machines_interleaved(&pool, pool.to_str().expect("utf8"), None);
}

#[test]
fn three_machines_interleaved_over_http() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("forge");
    std::fs::create_dir_all(&root).expect("forge");
    let served = root.join("pool.git");
    assert!(Command::new("git")
        .args(["init", "--bare", "-q"])
        .arg(&served)
        .status()
        .expect("git")
        .success());
    let server = GitHttpServer::start(&root, Some("three-machines-token"));
    let token_file = tmp.path().join("token");
    std::fs::write(&token_file, "three-machines-token\n").expect("token");
    three_machines_interleaved(&served, &server.url("pool.git"), Some(&token_file));
}

/// Three machines (distinct harness ids, one remote) archive and sync in interleaved
/// order through `target`; `pool` is the bare repository behind it.
fn three_machines_interleaved(pool: &Path, target: &str, token_file: Option<&Path>) {
    let pool = pool.to_path_buf();
    let machines: Vec<Sandbox> = (0..3)
        .map(|i| Sandbox::machine(&format!("machine-{i}")))
        .collect();
    let mut logs = Vec::new();
    for (i, m) in machines.iter().enumerate() {
        let s = session_id(i, 1);
        logs.push((
            s.clone(),
            m.write_session(&s, 4, true, &two_task_turns(&m.ws)),
        ));
        match token_file {
            None => link_private(m, &pool),
            Some(t) => {
                m.ok(&[
                    "link",
                    target,
                    "--visibility",
                    "private",
                    "--token-file",
                    t.to_str().expect("utf8"),
                ]);
            }
        }
    }
    let key = project_key(&machines[0]);
    assert!(
        machines.iter().all(|m| project_key(m) == key),
        "one remote, one project key"
    );
    let mut heads = Vec::new();
    // Interleaved: archive/sync in a mixed order, with new turns in between.
    for (round, order) in [[0usize, 1, 2], [2, 0, 1], [1, 2, 0]].iter().enumerate() {
        for &i in order {
            let m = &machines[i];
            if round > 0 {
                add_turns(m, &logs[i].0, &logs[i].1, 2);
            }
            m.ok(&["archive"]);
            m.ok(&["sync"]);
            heads.push(git(&pool, &["rev-parse", "main"]).trim().to_owned());
        }
    }
    for m in &machines {
        m.ok(&["sync"]);
    }
    let final_head = git(&pool, &["rev-parse", "main"]).trim().to_owned();
    for h in &heads {
        let st = Command::new("git")
            .arg("--git-dir")
            .arg(&pool)
            .args(["merge-base", "--is-ancestor", h, &final_head])
            .status()
            .expect("git");
        assert!(
            st.success(),
            "{h} is not an ancestor of the final head: a forced update happened"
        );
    }
    assert_fsck(&pool);

    let in_pool = pool_files(&pool);
    for m in &machines {
        let own = own_pool_paths(m, &key);
        assert!(!own.is_empty());
        assert!(
            own.is_subset(&in_pool),
            "{} did not publish everything",
            m.harness
        );
        // Every machine can read every other machine's chapters in its mirror.
        for other in machines.iter().filter(|o| o.harness != m.harness) {
            for p in own_pool_paths(other, &key) {
                assert!(mirror_holds(m, &p), "{} lacks {p}", m.harness);
            }
        }
    }
    for (path, writers) in writers_per_path(&pool) {
        assert_eq!(writers.len(), 1, "{path} was written by {writers:?}");
    }
    assert!(in_pool.contains("project.yml") && in_pool.contains(".gitattributes"));
    let attrs = git(&pool, &["show", "main:.gitattributes"]);
    assert!(attrs.contains("*.jsonl merge=union"));
    // Author line as the record says.
    let authors = git(&pool, &["log", "--format=%an <%ae>", "main"]);
    assert!(authors.lines().all(|l| l.starts_with("dsh-chapters <machine-") && l.ends_with("@dsh-chapters.local>")), "{authors}");
}

#[test]
fn status_counts_what_waits_and_one_sync_publishes_it() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("solo");
    m.write_session(&session_id(9, 1), 4, true, &two_task_turns(&m.ws));
    link_private(&m, &pool);
    m.ok(&["archive"]);
    let s = m.json(&["status", "--json"]);
    assert_eq!(s["lastSyncCode"], "never-synced");
    assert!(
        s["pendingPublish"]["chapter"].as_u64().unwrap_or(0) >= 2,
        "{s}"
    );
    m.ok(&["sync"]);
    let s = m.json(&["status", "--json"]);
    assert_eq!(s["lastSyncCode"], "ok");
    assert_eq!(s["mode"], "linked");
    let pending: u64 = s["pendingPublish"]
        .as_object()
        .expect("obj")
        .values()
        .filter_map(|v| v.as_u64())
        .sum();
    assert_eq!(pending, 0, "{s}");
    // Twice: nothing new, the head does not move.
    let head = git(&pool, &["rev-parse", "main"]);
    m.ok(&["sync"]);
    assert_eq!(git(&pool, &["rev-parse", "main"]), head);
}

/// A local publish's pack reaches the publisher's packed mirror by hard link, not by a
/// `git fetch` back from the pool (issue #17 point 6): the mirror's pack is the pool's file
/// (same inode), the mirror holds everything the pool's head reaches (git's own check), its
/// tracking ref follows — and another machine, which did not publish it, still fetches it.
#[test]
fn a_local_publish_links_its_pack_into_the_mirror_instead_of_fetching_it() {
    use std::os::unix::fs::MetadataExt as _;
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let (a, b) = (Sandbox::machine("machine-a"), Sandbox::machine("machine-b"));
    for (i, m) in [&a, &b].into_iter().enumerate() {
        m.write_session(&session_id(i, 1), 4, true, &two_task_turns(&m.ws));
        link_private(m, &pool);
        m.ok(&["archive"]);
    }
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let inodes = |git_dir: &Path| -> BTreeSet<u64> {
        std::fs::read_dir(git_dir.join("objects/pack"))
            .expect("pack dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
            .map(|e| e.metadata().expect("stat").ino())
            .collect()
    };
    let mirror = |m: &Sandbox| m.ws.join(".dsh-knowledge/.git");
    let head = git(&pool, &["rev-parse", "main"]).trim().to_owned();
    // B published last, on top of A's publish that its pull fetched: B's mirror shares the
    // pool's pack of B's publish.
    assert!(
        !inodes(&mirror(&b)).is_disjoint(&inodes(&pool)),
        "B's mirror holds none of the pool's pack files"
    );
    assert_eq!(
        git(&mirror(&b), &["rev-parse", "refs/remotes/pool/main"]).trim(),
        head
    );
    git(&mirror(&b), &["fsck", "--connectivity-only", &head]);
    // A did not publish B's chapters: its next sync fetches them, and they are there.
    a.ok(&["sync"]);
    git(&mirror(&a), &["fsck", "--connectivity-only", &head]);
    assert!(
        mirror_documents(&a, "chapters/")
            .iter()
            .any(|(p, _)| p.contains(&session_id(1, 1))),
        "A's mirror lacks B's chapters"
    );
    // A newcomer's first sync links the pool's packs instead of fetching a copy of them —
    // trusted only because every object the head reaches is then found there.
    let c = Sandbox::machine("machine-c");
    c.ok(&["init"]);
    link_private(&c, &pool);
    c.ok(&["sync"]);
    let head = git(&pool, &["rev-parse", "main"]).trim().to_owned();
    assert!(
        inodes(&pool).is_subset(&inodes(&mirror(&c))),
        "the newcomer's mirror does not share the pool's packs"
    );
    git(&mirror(&c), &["fsck", "--connectivity-only", &head]);
    for i in 0..2 {
        assert!(
            mirror_documents(&c, "chapters/")
                .iter()
                .any(|(p, _)| p.contains(&session_id(i, 1))),
            "the newcomer lacks machine {i}'s chapters"
        );
    }
}

#[test]
fn pool_deleted_is_refused_then_linked_again_gets_everything_again() {
    let (_tmp, pool, m) = published_machine("m1", 1);
    let before = pool_files(&pool);
    std::fs::remove_dir_all(&pool).expect("rm pool");
    // Missing: not re-created (issue #17: a pool is never silently split).
    let out = m.run(&["sync"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!pool.exists(), "the pool was re-created");
    assert_eq!(
        m.json(&["status", "--json"])["lastSyncCode"],
        "pool-missing"
    );
    // A person adopts a new pool at the same path: everything is published again.
    Command::new("git")
        .args(["init", "--bare", "-q"])
        .arg(&pool)
        .status()
        .expect("git init");
    link_private(&m, &pool);
    m.ok(&["sync"]);
    assert_eq!(
        pool_files(&pool),
        before,
        "everything republished from the store"
    );
}

#[test]
fn pool_unreachable_degrades_to_local_only_and_recovers() {
    let (tmp, pool, m, log) = published_session("m1", 1);
    let s = session_id(1, 1);
    // The pool becomes a broken path: not a repository.
    let aside = tmp.path().join("aside.git");
    std::fs::rename(&pool, &aside).expect("move away");
    std::fs::write(&pool, b"not a directory").expect("file in the way");
    add_turns(&m, &s, &log, 2);
    m.ok(&["archive"]); // archiving never fails because of the pool
    let out = m.run(&["sync"]);
    assert_eq!(out.status.code(), Some(1));
    let st = m.json(&["status", "--json"]);
    assert_eq!(st["mode"], "local-only", "{st}");
    assert_ne!(st["lastSyncCode"], "ok");
    assert!(st["lastSyncHint"].is_string());
    assert!(st["pendingPublish"]
        .as_object()
        .expect("obj")
        .values()
        .any(|v| v.as_u64() > Some(0)));
    // Back: one sync publishes everything pending.
    std::fs::remove_file(&pool).expect("rm file");
    std::fs::rename(&aside, &pool).expect("move back");
    m.ok(&["sync"]);
    let key = project_key(&m);
    assert!(own_pool_paths(&m, &key).is_subset(&pool_files(&pool)));
    assert_eq!(m.json(&["status", "--json"])["mode"], "linked");
}

#[test]
fn public_pools_receive_no_conversation() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("m1");
    m.write_session(&session_id(1, 1), 4, true, &two_task_turns(&m.ws));
    m.ok(&[
        "link",
        pool.to_str().expect("utf8"),
        "--visibility",
        "public",
    ]);
    m.ok(&["archive"]);
    let out = m.ok(&["sync"]);
    assert!(
        out.contains("declared public") && out.contains(pool.to_str().expect("utf8")),
        "{out}"
    );
    let files = pool_files(&pool);
    assert!(
        files
            .iter()
            .all(|f| f == "project.yml" || f == ".gitattributes"),
        "{files:?}"
    );
}

#[test]
fn visibility_is_mandatory_and_tokens_are_required_for_network_pools() {
    let m = Sandbox::machine("m1");
    assert_eq!(m.run(&["link", "/tmp/some-pool"]).status.code(), Some(2));
    let out = m.run(&[
        "link",
        "https://git.example.com/team/pool.git",
        "--visibility",
        "private",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("token"));
    let shown = m.ok(&["link"]);
    assert!(shown.contains("none"), "{shown}");
}

#[test]
fn a_machine_never_overwrites_another_machines_file() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    let b = Sandbox::machine("machine-b");
    // Both "machines" hold a session with the same id but different content.
    let s = session_id(7, 7);
    a.write_session(&s, 4, true, &two_task_turns(&a.ws)[..3]);
    b.write_session(&s, 4, true, &two_task_turns(&b.ws)[3..]);
    for m in [&a, &b] {
        link_private(m, &pool);
        m.ok(&["archive"]);
    }
    a.ok(&["sync"]);
    let before: BTreeMap<String, String> = pool_files(&pool)
        .into_iter()
        .map(|p| (p.clone(), git(&pool, &["rev-parse", &format!("main:{p}")])))
        .collect();
    let out = b.run(&["sync"]);
    assert_eq!(out.status.code(), Some(1), "the refusal is reported");
    assert!(String::from_utf8_lossy(&out.stderr).contains("refused to overwrite"));
    for (p, id) in &before {
        // Derived files (project.yml, README.md, .gitattributes, the topic index, the vocabulary) are
        // rebuilt, not owned.
        if p != "project.yml"
            && p != "README.md"
            && p != ".gitattributes"
            && !p.starts_with("index/")
            && p != "topics/vocabulary.json"
        {
            assert_eq!(
                &git(&pool, &["rev-parse", &format!("main:{p}")]),
                id,
                "{p} was overwritten"
            );
        }
    }
}

#[test]
fn two_syncs_at_once_on_one_workspace() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("m1");
    let turns: Vec<TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(5, 60, 3_000, 4, &m.ws_str()).collect();
    m.write_session(&session_id(1, 1), 4, true, &turns);
    link_private(&m, &pool);
    m.ok(&["archive"]);
    let a = m.cmd(&["sync"]).output();
    let b = m.cmd(&["sync"]).output();
    let (a, b) = (a.expect("a"), b.expect("b"));
    // Run for real concurrently as well.
    let c = m
        .cmd(&["sync"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("c");
    let d = m
        .cmd(&["sync"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("d");
    assert!(c.wait_with_output().expect("c").status.success());
    assert!(d.wait_with_output().expect("d").status.success());
    assert!(a.status.success() && b.status.success());
    let key = project_key(&m);
    assert!(own_pool_paths(&m, &key).is_subset(&pool_files(&pool)));
    assert_fsck(&pool);
}

#[test]
fn kill_9_during_sync_then_sync_again_loses_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("m1");
    let turns: Vec<TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(11, 250, 4_000, 4, &m.ws_str()).collect();
    m.write_session(&session_id(1, 1), 4, true, &turns);
    link_private(&m, &pool);
    m.ok(&["archive"]);
    let mut kills = 0;
    for delay in [2u64, 6, 12, 25, 50, 90, 150] {
        let mut child = m
            .cmd(&["sync"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(std::time::Duration::from_millis(delay));
        if child.try_wait().expect("wait").is_none() {
            child.kill().expect("kill");
            kills += 1;
        }
        child.wait().expect("reap");
        if pool.join("refs").exists() && git_ok(&pool, &["rev-parse", "--verify", "main"]) {
            let fsck = Command::new("git")
                .arg("--git-dir")
                .arg(&pool)
                .args(["fsck"])
                .output()
                .expect("fsck");
            assert!(
                fsck.status.success(),
                "pool damaged after a kill at {delay} ms: {}",
                String::from_utf8_lossy(&fsck.stderr)
            );
        }
    }
    let _ = kills;
    m.ok(&["sync"]);
    let key = project_key(&m);
    let own = own_pool_paths(&m, &key);
    let files = pool_files(&pool);
    assert!(
        own.is_subset(&files),
        "missing: {:?}",
        own.difference(&files).collect::<Vec<_>>()
    );
    // Nothing duplicated: every store file's bytes equal the pool's.
    for (rel, bytes) in m.snapshot() {
        if let Some((p, _)) = dsh_chapters::pool::plan::pool_path(&key, &rel) {
            let id = git(&pool, &["rev-parse", &format!("main:{p}")]);
            assert_eq!(id.trim(), dsh_chapters::pool::plan::blob_id(&bytes), "{p}");
        }
    }
}

/// #17 point 8: temp files a killed git left in the pool's and the mirror's pack directories
/// are cleared by the next sync once they are old enough to be no live git's; a fresh one
/// (a git that may still be writing) is kept, and nothing else is touched.
#[test]
fn a_sync_clears_the_temp_files_a_killed_git_left_in_the_pool_and_the_mirror() {
    let (_tmp, pool, m) = published_machine("m1", 1);
    let mirror = m.ws.join(".dsh-knowledge/.git");
    let hour_and_more = std::time::SystemTime::now()
        - dsh_chapters::pool::pack::STALE_GIT_TEMP
        - std::time::Duration::from_secs(120);
    let leftovers = [
        "tmp_pack_k1LLed",
        "tmp_idx_k1LLed",
        "tmp_rev_k1LLed",
        ".tmp-999-pack",
    ];
    for git_dir in [&pool, &mirror] {
        let dir = git_dir.join("objects/pack");
        for name in leftovers {
            std::fs::File::create(dir.join(name))
                .and_then(|f| f.set_modified(hour_and_more))
                .expect("an old temp file");
        }
        std::fs::File::create(dir.join("tmp_pack_st1ll0n")).expect("a fresh temp file");
    }
    let temp_files = |git_dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(git_dir.join("objects/pack"))
            .expect("pack dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("tmp_") || n.starts_with(".tmp-"))
            .collect()
    };
    let out = m.ok(&["sync", "--json"]);
    for (git_dir, what) in [(&pool, "the pool"), (&mirror, "the mirror")] {
        assert_eq!(
            temp_files(git_dir),
            BTreeSet::from(["tmp_pack_st1ll0n".to_owned()]),
            "{what}"
        );
        assert!(
            out.contains(&format!(
                "removed 4 temp file(s) a killed git left in {what}"
            )),
            "{out}"
        );
    }
    assert!(
        git_ok(&pool, &["fsck", "--no-progress"]),
        "the pool after the sweep"
    );
    // The next sync finds nothing old left and says nothing of it.
    let out = m.ok(&["sync", "--json"]);
    assert!(!out.contains("a killed git left"), "{out}");
}

fn git_ok(repo: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn network_pool_over_http_with_a_token_revoked_mid_run() {
    let tmp = tempfile::tempdir().expect("tmp");
    let root = tmp.path().join("forge");
    std::fs::create_dir_all(&root).expect("forge");
    assert!(Command::new("git")
        .args(["init", "--bare", "-q"])
        .arg(root.join("pool.git"))
        .status()
        .expect("git")
        .success());
    let server = GitHttpServer::start(&root, Some("s3cret-token-for-tests"));
    let url = server.url("pool.git");
    let a = Sandbox::machine("net-a");
    let b = Sandbox::machine("net-b");
    for (i, m) in [&a, &b].into_iter().enumerate() {
        let s = session_id(20 + i, 1);
        m.write_session(&s, 4, true, &two_task_turns(&m.ws));
        let token_file = m.ws.parent().expect("root").join("token");
        std::fs::write(&token_file, "s3cret-token-for-tests\n").expect("token");
        m.ok(&[
            "link",
            &url,
            "--visibility",
            "private",
            "--token-file",
            token_file.to_str().expect("utf8"),
        ]);
        m.ok(&["archive"]);
        // The token is stored 0600 under the home, never in the project tree.
        let cred = m.home.join("dsh-chapters/credentials").join(project_key(m));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&cred).expect("cred").permissions().mode() & 0o777,
            0o600
        );
        let tree = m.snapshot();
        assert!(!crate::support::text_of(&tree).contains("s3cret-token-for-tests"));
        let shown = m.ok(&["link"]);
        assert!(!shown.contains("s3cret"), "{shown}");
    }
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    a.ok(&["sync"]);
    let served = root.join("pool.git");
    let key = project_key(&a);
    let files = pool_files(&served);
    assert!(
        own_pool_paths(&a, &key).is_subset(&files) && own_pool_paths(&b, &key).is_subset(&files)
    );
    for p in own_pool_paths(&b, &key) {
        assert!(mirror_holds(&a, &p), "a cannot read b's {p}");
    }
    // Revoked mid-run: auth code, local-only, re-link advice; archive still works.
    server.set_token(Some("a-new-token".into()));
    let out = a.run(&["sync", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["code"], "auth", "{j}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("s3cret"));
    let st = a.json(&["status", "--json"]);
    assert_eq!(st["mode"], "local-only");
    assert_eq!(st["lastSyncCode"], "auth");
    assert!(st["lastSyncHint"]
        .as_str()
        .expect("hint")
        .contains("link again"));
    // Unreachable: a network code, told apart from divergence by code.
    drop(server);
    let out = a.run(&["sync", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["code"], "network", "{j}");
}

#[test]
fn machines_racing_to_publish_all_land_without_a_forced_update() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let machines: Vec<Sandbox> = (0..3)
        .map(|i| Sandbox::machine(&format!("racer-{i}")))
        .collect();
    for (i, m) in machines.iter().enumerate() {
        m.write_session(&session_id(40 + i, 1), 4, true, &two_task_turns(&m.ws));
        link_private(m, &pool);
        m.ok(&["archive"]);
    }
    // All three publish at once: the losers of each compare-and-swap fetch and retry.
    let children: Vec<_> = machines
        .iter()
        .map(|m| {
            m.cmd(&["sync"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_fsck(&pool);
    let key = project_key(&machines[0]);
    let files = pool_files(&pool);
    for m in &machines {
        assert!(
            own_pool_paths(m, &key).is_subset(&files),
            "{} lost a file",
            m.harness
        );
    }
    // A linear history: every commit has at most one parent, none was rewritten.
    let parents = git(&pool, &["log", "--format=%p", "main"]);
    assert!(
        parents.lines().all(|l| l.split_whitespace().count() <= 1),
        "{parents}"
    );
}

#[test]
fn a_damaged_or_deleted_mirror_is_rebuilt_from_the_pool_and_the_store() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("m-a");
    let b = Sandbox::machine("m-b");
    for (i, m) in [&a, &b].into_iter().enumerate() {
        m.write_session(&session_id(50 + i, 1), 4, true, &two_task_turns(&m.ws));
        link_private(m, &pool);
        m.ok(&["archive"]);
        m.ok(&["sync"]);
    }
    a.ok(&["sync"]);
    let key = project_key(&a);
    let theirs: Vec<String> = own_pool_paths(&b, &key).into_iter().collect();
    // Deleted outright.
    std::fs::remove_dir_all(a.ws.join(".dsh-knowledge")).expect("rm mirror");
    a.ok(&["sync"]);
    assert!(theirs.iter().all(|p| mirror_holds(&a, p)));
    // Garbage where the mirror's repository should be.
    let git_dir = a.ws.join(".dsh-knowledge/.git");
    std::fs::remove_dir_all(&git_dir).expect("rm");
    std::fs::write(&git_dir, b"garbage").expect("garbage");
    let out = a.ok(&["sync"]);
    assert!(out.contains("rebuilt"), "{out}");
    assert!(theirs.iter().all(|p| mirror_holds(&a, p)));
    assert_eq!(a.json(&["status", "--json"])["lastSyncCode"], "ok");
}

#[test]
fn a_truncated_pack_in_the_pool_is_pool_broken_with_what_to_do() {
    // Half a pack (a copy cut short, a disk error): reading the pool's objects fails, and
    // the sync says the pool is damaged and what to do, not "other".
    let (_tmp, pool, _a) = published_machine("m-a", 62);
    let pack_dir = pool.join("objects/pack");
    let pack = std::fs::read_dir(&pack_dir)
        .expect("pack dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pack"))
        .expect("a pack");
    let len = std::fs::metadata(&pack).expect("pack").len();
    let mut perms = std::fs::metadata(&pack).expect("pack").permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&pack, perms).expect("writable");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&pack)
        .and_then(|f| f.set_len(len / 2))
        .expect("truncate");
    // A new machine joining reads every object.
    let b = Sandbox::machine("m-b");
    link_private(&b, &pool);
    let out = b.run(&["sync", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["code"], "pool-broken", "{doc}");
    assert!(
        doc["hint"].as_str().is_some_and(|h| h.contains("git fsck")),
        "{doc}"
    );
    assert_eq!(b.json(&["status", "--json"])["lastSyncCode"], "pool-broken");
}

#[test]
fn a_pool_of_another_project_is_refused_loudly() {
    let (_tmp, pool, a) = published_machine("m-a", 60);
    // Another project (another remote) linked to the same pool.
    let other = Sandbox::machine("m-other");
    std::fs::write(
        other.ws.join(".git/config"),
        "[remote \"origin\"]\n\turl = https://github.com/example/gadgets.git\n",
    )
    .expect("config");
    other.write_session(&session_id(61, 1), 4, true, &two_task_turns(&other.ws));
    link_private(&other, &pool);
    other.ok(&["archive"]);
    let head = git(&pool, &["rev-parse", "main"]);
    let out = other.run(&["sync", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["code"], "identity-mismatch");
    assert_eq!(
        git(&pool, &["rev-parse", "main"]),
        head,
        "nothing published into a foreign pool"
    );
    let st = other.json(&["status", "--json"]);
    let warning = st["identityWarning"].as_str().expect("warning");
    assert!(
        warning.contains(&project_key(&a)) && warning.contains(&project_key(&other)),
        "{warning}"
    );
    assert!(other.ok(&["status"]).contains("WARNING"));
}

#[test]
fn an_unwritable_mirror_degrades_to_local_only_then_recovers() {
    // The disk-full path: any write error in the mirror is `mirror-io`. A file where the
    // mirror needs a directory makes the writes fail whoever runs the test (root included).
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("m-a");
    let b = Sandbox::machine("m-b");
    for (i, m) in [&a, &b].into_iter().enumerate() {
        m.write_session(&session_id(70 + i, 1), 4, true, &two_task_turns(&m.ws));
        link_private(m, &pool);
        m.ok(&["archive"]);
    }
    b.ok(&["sync"]);
    std::fs::create_dir_all(a.ws.join(".dsh-knowledge")).expect("mirror dir");
    // (`index/`: the pool's documents stay packed, its index pages are written out.)
    std::fs::write(a.ws.join(".dsh-knowledge/index"), b"in the way").expect("blocker");
    let out = a.run(&["sync", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(j["code"], "mirror-io", "{j}");
    let st = a.json(&["status", "--json"]);
    assert_eq!(st["mode"], "local-only");
    assert_eq!(st["lastSyncCode"], "mirror-io");
    // Archiving is untouched by it.
    a.ok(&["archive"]);
    std::fs::remove_file(a.ws.join(".dsh-knowledge/index")).expect("unblock");
    a.ok(&["sync"]);
    let key = project_key(&a);
    for p in own_pool_paths(&b, &key) {
        assert!(mirror_holds(&a, &p), "{p}");
    }
    assert!(own_pool_paths(&a, &key).is_subset(&pool_files(&pool)));
    assert_eq!(a.json(&["status", "--json"])["mode"], "linked");
}

#[test]
fn pull_only_brings_files_in_and_publishes_nothing() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("m-a");
    let b = Sandbox::machine("m-b");
    for (i, m) in [&a, &b].into_iter().enumerate() {
        m.write_session(&session_id(80 + i, 1), 4, true, &two_task_turns(&m.ws));
        link_private(m, &pool);
        m.ok(&["archive"]);
    }
    a.ok(&["sync"]);
    let head = git(&pool, &["rev-parse", "main"]);
    b.ok(&["sync", "--pull-only"]);
    assert_eq!(
        git(&pool, &["rev-parse", "main"]),
        head,
        "pull-only published"
    );
    let key = project_key(&a);
    for p in own_pool_paths(&a, &key) {
        assert!(mirror_holds(&b, &p), "{p}");
    }
    let shown = b.json(&["link", "--json"]);
    assert_eq!(shown["visibility"], "private");
    assert_eq!(shown["mirrorExists"], true);
}

#[test]
fn a_local_pool_needs_no_git_program() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("m1");
    m.write_session(&session_id(90, 1), 4, true, &two_task_turns(&m.ws));
    link_private(&m, &pool);
    m.ok(&["archive"]);
    // No `git` anywhere on PATH: the local path is gix only.
    let out = m
        .cmd(&["sync"])
        .env("PATH", tmp.path().join("no-such-bin"))
        .output()
        .expect("sync");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = project_key(&m);
    assert!(own_pool_paths(&m, &key).is_subset(&pool_files(&pool)));
}

#[test]
fn a_sync_never_lands_mid_archive() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("m1");
    let turns: Vec<TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(13, 200, 4_000, 4, &m.ws_str()).collect();
    m.write_session(&session_id(91, 1), 4, true, &turns);
    link_private(&m, &pool);
    // Archive and sync race for the writer lock; whichever wins, the pool never holds a
    // chapter whose collection line is missing, and a final sync publishes everything.
    let archive = m
        .cmd(&["archive"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("archive");
    let sync = m
        .cmd(&["sync"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("sync");
    assert!(archive
        .wait_with_output()
        .expect("archive")
        .status
        .success());
    assert!(sync.wait_with_output().expect("sync").status.success());
    if git_ok(&pool, &["rev-parse", "--verify", "main"]) {
        // All or nothing: the sync ran wholly before the archive or wholly after it.
        let files = pool_files(&pool);
        let published = files.iter().filter(|f| f.starts_with("chapters/")).count();
        let stored = m.chapter_files().len();
        assert!(
            published == 0 || published == stored,
            "{published} of {stored} chapters published: a half-written store shipped"
        );
    }
    m.ok(&["sync"]);
    let key = project_key(&m);
    assert!(own_pool_paths(&m, &key).is_subset(&pool_files(&pool)));
    assert_fsck(&pool);
}

/// A signature appended by the signer (no record in the store's catalog) is published by the next
/// sync through the signed-roots hint, though a sync no longer lists a quiet root's ledgers
/// (issue #17 point 6): one appended behind the hint's back — its line lost, as a power cut
/// loses un-fsynced lines — is not looked at in the same boot, and is published by the first
/// sync whose cursor was kept in another boot.
#[test]
fn signatures_publish_through_the_signed_roots_hint_and_a_new_boot_lists_every_root() {
    use dsh_chapters::signature::Signature;
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("solo");
    let session = session_id(9, 1);
    m.write_session(&session, 4, true, &two_task_turns(&m.ws));
    link_private(&m, &pool);
    m.ok(&["archive"]);
    m.ok(&["sync"]);
    m.ok(&["sync"]);
    let pk = project_key(&m);
    let in_pool = || {
        git(
            &pool,
            &["show", &format!("main:collections/{pk}/{session}.jsonl")],
        )
    };
    let store = dsh_chapters::store::Store::open(&m.ws).expect("store");
    let redactor = dsh_chapters::redact::built_in().expect("rules");
    let sign = |turn: u64| {
        let raw = serde_json::json!({
            "v": 1, "sessionId": session, "turn": turn, "seqs": [turn], "paths": [],
            "commands": [], "terms": ["notes"], "size": 1, "by": "deterministic",
            "at": "2026-01-01T00:00:00Z", "reason": "completed"
        });
        let sig = redactor
            .redact_json(&raw, &mut Default::default())
            .derive(|v| serde_json::from_value::<Signature>(v.clone()).expect("signature"));
        let mut cursor = dsh_chapters::signer::LedgerCursor::default();
        let n = dsh_chapters::signer::sign(
            &store,
            &session,
            &session,
            &[sig],
            redactor,
            &mut cursor,
            dsh_chapters::signer::After::Seq,
        )
        .expect("sign");
        assert_eq!(n, 1);
    };
    sign(1_000);
    m.ok(&["sync"]);
    assert!(in_pool().contains("\"turn\":1000"), "{}", in_pool());

    // The hint's line of the next signature lost (cut back as a power cut would leave it).
    let hint = m.store().join(dsh_chapters::store::signed::SIGNED_FILE);
    let before = std::fs::read(&hint).expect("hint");
    sign(1_001);
    std::fs::write(&hint, &before).expect("cut the hint back");
    m.ok(&["sync"]);
    assert!(
        !in_pool().contains("\"turn\":1001"),
        "not looked at in this boot"
    );
    // The cursor was kept in another boot: every root's ledgers are listed.
    let cursor = m.ws.join(".dsh-knowledge/.git/dsh-chapters-listing.json");
    let mut saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cursor).expect("cursor")).expect("json");
    saved["signed"]["boot"] = serde_json::json!("an-earlier-boot");
    std::fs::write(&cursor, saved.to_string()).expect("write");
    m.ok(&["sync"]);
    assert!(in_pool().contains("\"turn\":1001"), "{}", in_pool());
}

/// What the pool lacks of `m`'s store at the pool commit `at`: every store file that maps
/// to a pool path whose blob the tree does not hold there.
fn missing_at(m: &Sandbox, pool: &Path, at: &str) -> BTreeSet<String> {
    let key = project_key(m);
    let in_tree: BTreeMap<String, String> = git(pool, &["ls-tree", "-r", at])
        .lines()
        .filter_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            Some((path.to_owned(), meta.split(' ').nth(2)?.to_owned()))
        })
        .collect();
    let mut out = BTreeSet::new();
    let store = m.store();
    let mut stack = vec![store.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("list") {
            let entry = entry.expect("entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().expect("type").is_dir() {
                if !name.starts_with('.') {
                    stack.push(entry.path());
                }
                continue;
            }
            let rel = entry.path();
            let rel = rel
                .strip_prefix(&store)
                .expect("in store")
                .to_string_lossy();
            let Some((path, _)) = dsh_chapters::pool::plan::pool_path(&key, &rel) else {
                continue;
            };
            let blob =
                dsh_chapters::pool::plan::blob_id(&std::fs::read(entry.path()).expect("read"));
            if in_tree.get(&path) != Some(&blob) {
                out.insert(path);
            }
        }
    }
    out
}

/// The store files a sync published between two pool commits (the derived pages aside).
fn published_between(pool: &Path, from: &str, to: &str) -> BTreeSet<String> {
    git(pool, &["diff-tree", "-r", "--name-only", from, to])
        .lines()
        .filter(|p| {
            !(p.starts_with("index/")
                || p.starts_with("topics/")
                || *p == "README.md"
                || *p == "project.yml"
                || *p == ".gitattributes")
        })
        .map(str::to_owned)
        .collect()
}

/// The sync reads what changed from the store's catalog: a chapter copied into the store by
/// hand (recorded nowhere) waits for the next full comparison. The catalog deleted after an
/// archive: the next sync compares every store file with the pool's tree and publishes
/// exactly what the pool lacks — the chapters the lost catalog named, the hand copy, the
/// grown ledger — and nothing else.
#[test]
fn a_sync_after_the_catalog_is_deleted_publishes_exactly_what_is_missing() {
    let (_tmp, pool, m, log) = published_session("solo", 9);
    let s = session_id(9, 1);
    let head = || git(&pool, &["rev-parse", "main"]).trim().to_owned();
    // A chapter copied in by hand into a session tree no archive wrote.
    let chapters = m.store().join(&s).join("chapters");
    let original = std::fs::read_dir(&chapters)
        .expect("chapters")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("plan-"))
        .min()
        .expect("a chapter");
    let by_hand = session_id(9, 7);
    let into = m.store().join(&by_hand).join("chapters");
    std::fs::create_dir_all(&into).expect("mkdir");
    std::fs::copy(chapters.join(&original), into.join(&original)).expect("copy");
    let copied = format!("chapters/{}/{by_hand}/{original}", project_key(&m));
    m.ok(&["sync"]);
    assert!(
        !pool_files(&pool).contains(&copied),
        "not named by the catalog"
    );
    // More turns archived (the catalog records their chapters), then the catalog is lost.
    add_turns(&m, &s, &log, 4);
    m.ok(&["archive"]);
    for file in [
        ".catalog.sqlite3",
        ".catalog.sqlite3-wal",
        ".catalog.sqlite3-shm",
    ] {
        let _ = std::fs::remove_file(m.store().join(file));
    }
    let before = head();
    let missing = missing_at(&m, &pool, &before);
    assert!(missing.contains(&copied), "{missing:?}");
    assert!(
        missing
            .iter()
            .filter(|p| p.starts_with("chapters/"))
            .count()
            > 1,
        "the archive wrote chapters: {missing:?}"
    );
    m.ok(&["sync"]);
    assert_eq!(published_between(&pool, &before, &head()), missing);
    assert!(missing_at(&m, &pool, &head()).is_empty());
    // Nothing is left to publish: the next sync's head does not move.
    let after = head();
    m.ok(&["sync"]);
    assert_eq!(head(), after);
}

/// A mirror an earlier version synced keeps its publication manifests under its git
/// directory: the first sync of this version compares the store with the pool's tree once,
/// publishes what the pool lacks and removes them.
#[test]
fn a_mirror_with_the_old_publication_manifests_syncs_and_loses_them() {
    let (_tmp, pool, m, log) = published_session("solo", 9);
    let s = session_id(9, 1);
    // What an earlier version left: its manifests, and no listing state.
    let git_dir = m.ws.join(".dsh-knowledge/.git");
    std::fs::remove_file(git_dir.join("dsh-chapters-listing.json")).expect("state");
    let old = git_dir.join("dsh-chapters-published");
    std::fs::create_dir_all(&old).expect("mkdir");
    let head = git(&pool, &["rev-parse", "main"]).trim().to_owned();
    std::fs::write(old.join("HEAD"), format!("{head}\n")).expect("HEAD");
    std::fs::write(
        old.join(format!("{s}.json")),
        r#"{"v":1,"chapters_mtime":1,"files":{}}"#,
    )
    .expect("record");
    std::fs::write(old.join(".listed-roots.json"), r#"{"v":1,"roots":{}}"#).expect("listed");
    add_turns(&m, &s, &log, 4);
    m.ok(&["archive"]);
    let missing = missing_at(&m, &pool, &head);
    assert!(!missing.is_empty());
    m.ok(&["sync"]);
    let after = git(&pool, &["rev-parse", "main"]).trim().to_owned();
    assert_eq!(published_between(&pool, &head, &after), missing);
    assert!(!old.exists(), "the old manifests were removed");
    assert!(git_dir.join("dsh-chapters-listing.json").is_file());
    m.ok(&["sync"]);
    assert_eq!(git(&pool, &["rev-parse", "main"]).trim(), after);
}

//! Issue #13.7–9: `chapters forget` (a person's act), `chapters scan` (old leaks with today's
//! rules) and a purge of the pool's history with the git program, on real stores, real pools
//! and the real binary.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use dsh_chapters::session::writer::TurnSpec;

use crate::support::{bash, link_private, read, Sandbox};

/// A token no built-in rule knows: what "yesterday's archive let through".
const LEAK: &str = "zqleak_7c1f2e9a4b8d6e3f0a1b";

fn session_id(machine: usize, n: usize) -> String {
    format!("session-{machine:08}-0000-4000-8000-{n:012}")
}

/// Two tasks; the second (the last chapter) holds the leak in a human message.
fn leaky_turns(ws: &Path) -> Vec<TurnSpec> {
    let mut t = Vec::new();
    for i in 0..3 {
        let mut s = TurnSpec::new(
            &format!("Fix the refresh token middleware expiry bug, step {i}"),
            &format!("Middleware step {i} done."),
        );
        s.tool_calls = vec![
            read(ws, "src/auth/middleware.rs", "fn refresh() {}\n"),
            bash(ws, "cargo test -p auth", "ok\n"),
        ];
        t.push(s);
    }
    for i in 0..2 {
        let mut s = TurnSpec::new(
            &format!("Make the csv exporter write its header row, part {i}; my key is {LEAK}"),
            &format!("Exporter part {i} done."),
        );
        s.tool_calls = vec![
            read(ws, "src/export/csv.rs", "fn export() {}\n"),
            bash(ws, "cargo test -p export", "ok\n"),
        ];
        t.push(s);
    }
    t
}

fn git(repo: &Path, args: &[&str]) -> String {
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

fn pool_files(pool: &Path) -> BTreeSet<String> {
    git(pool, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Every blob of the pool's history (`git rev-list --objects --all | git cat-file --batch`),
/// concatenated.
fn pool_history_text(pool: &Path) -> String {
    let list = git(pool, &["rev-list", "--objects", "--all"]);
    let mut out = String::new();
    for line in list.lines() {
        let id = line.split(' ').next().unwrap_or_default();
        let kind = git(pool, &["cat-file", "-t", id]);
        if kind.trim() == "blob" {
            out.push_str(&git(pool, &["cat-file", "blob", id]));
            out.push('\n');
        }
    }
    out
}

fn files_text(dir: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_name() == ".git" {
                continue;
            }
            if e.path().is_dir() {
                stack.push(e.path());
            } else if let Ok(bytes) = std::fs::read(e.path()) {
                out.push_str(&String::from_utf8_lossy(&bytes));
                out.push('\n');
            }
        }
    }
    out
}

fn candidates(sb: &Sandbox, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["forget", "--list", "--json"];
    args.extend_from_slice(extra);
    sb.json(&args)["candidates"]
        .as_array()
        .expect("candidates")
        .clone()
}

/// The id of the chapter whose text holds the leak (found with `--grep`, never printed).
fn leaky_chapter(sb: &Sandbox) -> (String, String) {
    let found = candidates(sb, &["--grep", LEAK]);
    let chapter = found
        .iter()
        .find(|c| c["kind"] == "chapter")
        .unwrap_or_else(|| panic!("no chapter holds the leak: {found:?}"));
    (
        chapter["id"].as_str().expect("id").to_owned(),
        chapter["path"].as_str().expect("path").to_owned(),
    )
}

#[test]
fn forget_lists_then_removes_a_chapter_that_is_never_archived_again() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let s = session_id(0, 1);
    let log = sb.write_session(&s, 4, true, &leaky_turns(&sb.ws));
    sb.ok(&["archive"]);
    let before = sb.chapter_files();
    assert!(before.len() >= 2, "{before:?}");

    // The listing: the session, its chapters with ids; --grep names, never prints, the text.
    let all = candidates(&sb, &[]);
    assert_eq!(all[0]["kind"], "session");
    assert_eq!(all[0]["id"], s.as_str());
    let listed = sb.ok(&["forget", "--list", "--grep", LEAK]);
    assert!(!listed.contains(LEAK), "{listed}");
    let (id, path) = leaky_chapter(&sb);
    assert!(id.starts_with(&format!("{s}/")), "{id}");
    assert_eq!(candidates(&sb, &["--session", "no-such-session"]).len(), 0);

    // --by is mandatory (a usage error), and never taken from the environment.
    let out = sb
        .cmd(&["forget", &id])
        .env("GIT_AUTHOR_NAME", "Git Config")
        .env("USER", "someone")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        sb.store().join(&path).exists(),
        "nothing removed without --by"
    );

    let out = sb.ok(&[
        "forget",
        &id,
        "--by",
        "Ada Lovelace",
        "--reason",
        "pasted a key",
    ]);
    assert!(out.contains(&id), "{out}");
    assert!(!sb.store().join(&path).exists(), "the chapter is gone");
    // The ledger: ids, person, reason, time — never the removed text, nor its file name.
    let ledger = std::fs::read_to_string(
        sb.store()
            .join("forget")
            .join(&sb.harness)
            .join("forget.jsonl"),
    )
    .expect("ledger");
    let line: serde_json::Value = serde_json::from_str(ledger.trim()).expect("one line");
    assert_eq!(line["by"], "Ada Lovelace");
    assert_eq!(line["reason"], "pasted a key");
    assert_eq!(line["ids"][0], id.as_str());
    assert!(line["at"].as_str().is_some_and(|a| a.starts_with("20")));
    let file_name = path.rsplit('/').next().expect("name");
    assert!(!ledger.contains(LEAK) && !ledger.contains(file_name) && !ledger.contains("csv"));
    // Nothing of it anywhere in the store (the search cache included).
    let holding: Vec<String> = sb
        .snapshot()
        .into_iter()
        .filter(|(_, v)| String::from_utf8_lossy(v).contains(LEAK))
        .map(|(k, _)| k)
        .collect();
    assert!(holding.is_empty(), "{holding:?}");
    let found = sb.ok(&["search", "csv exporter header row"]);
    assert!(!found.contains(file_name), "{found}");

    // The archive never writes the forgotten span again…
    sb.ok(&["archive"]);
    let after = sb.chapter_files();
    assert_eq!(
        after.len(),
        before.len() - 1,
        "re-archived? {before:?} → {after:?}"
    );
    assert!(!crate::support::text_of(&sb.snapshot()).contains(LEAK));
    // …and never gives its number again: new turns get a new number.
    let mut w = dsh_chapters::session::writer::LogWriter::open_append(&log, true).expect("log");
    let text = std::fs::read_to_string(
        sb.store()
            .join(&s)
            .join("collections")
            .join(format!("{s}.jsonl")),
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
    let mut script = dsh_chapters::session::writer::SessionScript::starting_at(
        4,
        next,
        turn,
        crate::support::START_MS + 5_000_000,
    );
    let mut t = TurnSpec::new(
        "Write the release notes for the deploy pipeline",
        "Written.",
    );
    t.tool_calls = vec![bash(&sb.ws, "make release-notes", "ok\n")];
    w.append_turn(&mut script, &t).expect("turn");
    drop(w);
    sb.ok(&["archive"]);
    let newest = sb.chapter_files();
    let added: Vec<&String> = newest.iter().filter(|f| !after.contains(f)).collect();
    assert_eq!(added.len(), 1, "{added:?}");
    let forgotten_number = &id[id.rfind('/').expect("/") + 1..];
    let added_name = added[0].rsplit('/').next().expect("name");
    assert!(
        added_name.as_bytes()[..3] > *forgotten_number.as_bytes(),
        "{added_name} reuses or precedes {forgotten_number}"
    );

    // Forgetting the same id again: nothing to do, said so, exit 0.
    sb.ok(&["forget", &id, "--by", "Ada Lovelace"]);
}

#[test]
fn forget_a_whole_session_and_the_daemonless_archive_never_recreates_it() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let s = session_id(0, 2);
    sb.write_session(&s, 4, true, &leaky_turns(&sb.ws));
    sb.ok(&["archive"]);
    assert!(sb.store().join(&s).is_dir());
    let out = sb.json(&["forget", &s, "--by", "Ada", "--json"]);
    assert_eq!(out["ids"][0], s.as_str());
    assert!(
        out["removed"]["storeFiles"].as_u64().unwrap_or(0) > 2,
        "{out}"
    );
    assert!(!sb.store().join(&s).exists());
    let report = sb.json(&["archive", "--json"]);
    assert!(!sb.store().join(&s).exists(), "re-archived: {report}");
    assert!(report.to_string().contains("forgotten"), "{report}");
    assert!(!crate::support::text_of(&sb.snapshot()).contains(LEAK));
}

#[test]
fn forget_bad_input_unknown_id_and_the_writer_lock() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let s = session_id(0, 3);
    sb.write_session(&s, 4, true, &leaky_turns(&sb.ws));
    sb.ok(&["archive"]);
    let snapshot = sb.snapshot();

    // Unknown ids: exit 1, each named, nothing removed.
    let out = sb.run(&[
        "forget",
        "no-such-root/001",
        &format!("{s}/999"),
        "--by",
        "Ada",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-root/001") && err.contains(&format!("{s}/999")),
        "{err}"
    );
    assert_eq!(sb.snapshot(), snapshot, "nothing removed");

    // During an archive (the writer lock held): forget waits for it, then acts.
    let (id, path) = leaky_chapter(&sb);
    let store = dsh_chapters::store::Store::open(&sb.ws).expect("store");
    let held = store
        .lock(std::time::Duration::from_millis(0))
        .expect("writer lock");
    let mut child = sb
        .cmd(&["forget", &id, "--by", "Ada"])
        .env("CHAPTERS_WRITER_LOCK_TIMEOUT_MS", "600000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Whatever the machine's speed, it cannot finish while the lock is held.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        child.try_wait().expect("wait").is_none(),
        "forget did not wait for the writer lock"
    );
    assert!(sb.store().join(&path).exists());
    drop(held);
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    assert!(!sb.store().join(&path).exists());
}

/// Two machines on one local pool: A forgets its chapter; the next sync removes it from the
/// pool's tip in a commit of its own naming the person and the reason, publishes the forget
/// ledger; B's mirror drops it; B cannot forget A's document (the refusal names A).
#[test]
fn forget_reaches_the_pool_tip_and_other_mirrors_and_is_refused_elsewhere() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    let b = Sandbox::machine("machine-b");
    let sa = session_id(1, 1);
    a.write_session(&sa, 4, true, &leaky_turns(&a.ws));
    let sb_id = session_id(2, 1);
    b.write_session(&sb_id, 4, true, &crate::support::two_task_turns(&b.ws));
    for m in [&a, &b] {
        link_private(m, &pool);
        m.ok(&["archive"]);
        m.ok(&["sync"]);
    }
    a.ok(&["sync"]);
    let (id, path) = leaky_chapter(&a);
    let name = path.rsplit('/').next().expect("name").to_owned();
    let before = pool_files(&pool);
    let leaked: Vec<&String> = before
        .iter()
        .filter(|p| p.ends_with(&name) && p.contains(&sa))
        .collect();
    assert_eq!(leaked.len(), 1, "{before:?}");
    let leaked = leaked[0].clone();
    assert!(
        b.ws.join(".dsh-knowledge").join(&leaked).exists(),
        "B received it"
    );

    // B may not forget A's document: refused, naming A.
    let out = b.run(&["forget", &id, "--by", "Bob"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("machine-a"), "{err}");

    a.ok(&[
        "forget",
        &id,
        "--by",
        "Ada Lovelace",
        "--reason",
        "pasted a key",
    ]);
    assert!(
        !a.ws.join(".dsh-knowledge").join(&leaked).exists(),
        "A's mirror copy went with it"
    );
    let head_before = git(&pool, &["rev-parse", "main"]).trim().to_owned();
    let report = a.json(&["sync", "--json"]);
    let after = pool_files(&pool);
    assert!(!after.contains(&leaked), "still at the tip: {report}");
    let forget_ledger = "forget/machine-a/forget.jsonl".to_string();
    assert!(after.contains(&forget_ledger), "{after:?}");
    // Nothing else was lost from the tip (index files aside, which are derived).
    let kept = |s: &BTreeSet<String>| -> BTreeSet<String> {
        s.iter()
            .filter(|p| !p.starts_with("index/") && !p.starts_with("topics/"))
            .cloned()
            .collect()
    };
    let mut expected = kept(&before);
    expected.remove(&leaked);
    expected.insert(forget_ledger.clone());
    assert_eq!(kept(&after), expected);
    // The forget commit is a commit of its own, naming the person and the reason.
    let commits = git(
        &pool,
        &["log", "--format=%H", &format!("{head_before}..main")],
    );
    let forget_commit = commits
        .lines()
        .find(|c| git(&pool, &["log", "-1", "--format=%B", c]).contains("forget"))
        .unwrap_or_else(|| panic!("no forget commit among {commits}"))
        .to_owned();
    let message = git(&pool, &["log", "-1", "--format=%B", &forget_commit]);
    assert!(
        message.contains("Ada Lovelace") && message.contains("pasted a key"),
        "{message}"
    );
    assert!(!message.contains(LEAK));
    let changed = git(
        &pool,
        &[
            "diff-tree",
            "--no-commit-id",
            "--name-status",
            "-r",
            &forget_commit,
        ],
    );
    for line in changed.lines() {
        let scrubbed = format!(
            "collections/{}/{sa}.jsonl",
            leaked.split('/').nth(1).expect("pk")
        );
        assert!(
            line.starts_with('D') || line.ends_with(&forget_ledger) || line.ends_with(&scrubbed),
            "the forget commit only removes (publishing its ledger and the scrubbed signatures): {changed}"
        );
    }
    // A second sync republishes nothing forgotten.
    a.ok(&["sync"]);
    assert!(!pool_files(&pool).contains(&leaked));

    // B's next sync drops it from its mirror.
    let report = b.json(&["sync", "--json"]);
    assert!(
        report["report"]["dropped"].as_u64().unwrap_or(0) >= 1,
        "{report}"
    );
    assert!(!b.ws.join(".dsh-knowledge").join(&leaked).exists());
    assert!(!files_text(&b.ws.join(".dsh-knowledge")).contains(LEAK));
    let found = b.ok(&["search", "csv exporter header row"]);
    assert!(
        !found.lines().any(|l| l.contains(&sa) && l.contains(&name)),
        "{found}"
    );
}

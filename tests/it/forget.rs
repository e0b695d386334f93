//! Issue #13.7–9: `chapters forget` (a person's act), `chapters scan` (old leaks with today's
//! rules) and a purge of the pool's history with the git program, on real stores, real pools
//! and the real binary.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use dsh_chapters::testkit::writer::TurnSpec;

use crate::support::{bash, link_private, two_task_turns, Sandbox};

/// A token no built-in rule knows: what "yesterday's archive let through".
const LEAK: &str = "zqleak_7c1f2e9a4b8d6e3f0a1b";

fn session_id(machine: usize, n: usize) -> String {
    format!("session-{machine:08}-0000-4000-8000-{n:012}")
}

/// Two tasks; the second (the last chapter) holds the leak in a human message.
fn leaky_turns(ws: &Path) -> Vec<TurnSpec> {
    let mut t = two_task_turns(ws);
    for s in &mut t[3..] {
        s.human_text.push_str(&format!("; my key is {LEAK}"));
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
    let mut w = dsh_chapters::testkit::writer::LogWriter::open_append(&log, true).expect("log");
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
    let mut script = dsh_chapters::testkit::writer::SessionScript::starting_at(
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
    assert!(crate::pool::mirror_holds(&b, &leaked), "B received it");

    let named_at_tip = || {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(&pool)
            .args([
                "grep",
                "-l",
                "--fixed-strings",
                &format!("{sa}/{name}"),
                "main",
            ])
            .output()
            .expect("git grep");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        named_at_tip().contains("index/"),
        "the topic index names it before"
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
    // No file at the tip — the topic index and vocabulary included — names it any more.
    let named = named_at_tip();
    assert!(named.is_empty(), "still named at the tip: {named}");
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
    assert!(!crate::pool::mirror_holds(&b, &leaked));
    assert!(!files_text(&b.ws.join(".dsh-knowledge")).contains(LEAK));
    let found = b.ok(&["search", "csv exporter header row"]);
    assert!(
        !found.lines().any(|l| l.contains(&sa) && l.contains(&name)),
        "{found}"
    );
}

/// Today's rule for the leak, added after the archive let it through.
fn add_rule(sb: &Sandbox) {
    std::fs::write(
        sb.store().join("config.yml"),
        "redactionPatterns:\n  - name: zq-token\n    keywords: [\"zqleak_\"]\n    regex: 'zqleak_[a-z0-9]{16,}'\n",
    )
    .expect("config");
}

fn findings(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["findings"].as_array().cloned().unwrap_or_default()
}

/// #13.8: a rule added today finds what yesterday's archive let through, in the store and in
/// every blob of the pool's history — counts and locations, never values — and names the
/// forget id that removes each; an unreachable pool is said, and the store still scanned.
#[test]
fn scan_finds_old_leaks_with_todays_rules_in_the_store_and_the_pool_history() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    let s = session_id(1, 7);
    a.write_session(&s, 4, true, &leaky_turns(&a.ws));
    link_private(&a, &pool);
    a.ok(&["archive"]);
    a.ok(&["sync"]);

    // Yesterday's rules: nothing found.
    let before = a.json(&["scan", "--pool", "--json"]);
    assert_eq!(findings(&before["store"]).len(), 0, "{before}");
    assert_eq!(findings(&before["pool"]["result"]).len(), 0, "{before}");

    add_rule(&a);
    let out = a.ok(&["scan", "--pool", "--json"]);
    assert!(!out.contains(LEAK), "a value was printed: {out}");
    let report: serde_json::Value = serde_json::from_str(&out).expect("json");
    let (id, path) = leaky_chapter(&a);
    let store = findings(&report["store"]);
    let chapter = store
        .iter()
        .find(|f| f["location"] == format!(".dsh-chapters/{path}").as_str())
        .unwrap_or_else(|| panic!("the chapter is not among {store:?}"));
    assert_eq!(chapter["rule"], "zq-token");
    assert!(chapter["count"].as_u64().unwrap_or(0) >= 2);
    assert!(!chapter["lines"].as_array().expect("lines").is_empty());
    assert_eq!(chapter["forgetId"], id.as_str());
    // The signatures hold it too; forgetting the chapter scrubs them.
    let signatures = store
        .iter()
        .find(|f| {
            f["location"]
                .as_str()
                .is_some_and(|l| l.contains("/collections/"))
        })
        .unwrap_or_else(|| panic!("signatures not among {store:?}"));
    assert_eq!(signatures["forgetId"], id.as_str());
    let pool_found = findings(&report["pool"]["result"]);
    assert!(
        pool_found
            .iter()
            .any(|f| f["forgetId"] == id.as_str() && f["atTip"] == true),
        "{pool_found:?}"
    );
    let text = a.ok(&["scan", "--pool"]);
    assert!(
        text.contains(&format!("chapters forget {id}")) && !text.contains(LEAK),
        "{text}"
    );

    // Forgotten and synced: the store is clean, the pool's tip too; its history still holds
    // the leak, and the scan says only a rewrite removes it.
    a.ok(&["forget", &id, "--by", "Ada", "--reason", "zq token"]);
    a.ok(&["sync"]);
    let after = a.json(&["scan", "--pool", "--json"]);
    let leftover: Vec<serde_json::Value> = findings(&after["store"]);
    assert!(leftover.is_empty(), "{leftover:?}");
    let history = findings(&after["pool"]["result"]);
    assert!(!history.is_empty());
    for f in &history {
        assert_eq!(f["atTip"], false, "{f}");
        assert!(
            f["remedy"].as_str().is_some_and(|r| r.contains("purging")),
            "{f}"
        );
    }

    // An unreachable pool: said so (exit 1), the store still scanned and printed.
    std::fs::rename(&pool, tmp.path().join("moved.git")).expect("move");
    let out = a.run(&["scan", "--pool", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unreachable"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["pool"]["reachable"], false);
    assert!(v["store"]["scanned"].as_u64().unwrap_or(0) > 0, "{v}");
}

/// #13.9: the docs' purge (docs/purging.md), done on a real pool with the git program: after
/// the rewrite every machine's next sync detects it, rebuilds its mirror, republishes nothing
/// forgotten and loses nothing else.
/// The purge of docs/purging.md with `git filter-branch` (part of git itself): `value`
/// replaced by `[purged]` in every blob of every commit, the old history dropped.
pub(crate) fn purge_with_filter_branch(pool: &Path, value: &str) {
    let filter = format!(
        "grep -rlZ --fixed-strings '{value}' . | xargs -0 -r sed -i 's/{value}/[purged]/g'"
    );
    rewrite_with_filter_branch(pool, "--tree-filter", &filter);
}

/// Rewrite every commit of `pool` with `git filter-branch <kind> <filter>`, the old history
/// dropped (its refs, reflogs and objects).
pub(crate) fn rewrite_with_filter_branch(pool: &Path, kind: &str, filter: &str) {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["filter-branch", "--force", kind, filter, "--", "--all"])
        .env("FILTER_BRANCH_SQUELCH_WARNING", "1")
        .output()
        .expect("git filter-branch");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for r in git(
        pool,
        &["for-each-ref", "--format=%(refname)", "refs/original/"],
    )
    .lines()
    {
        git(pool, &["update-ref", "-d", r]);
    }
    git(pool, &["reflog", "expire", "--expire=now", "--all"]);
    git(pool, &["gc", "--prune=now", "--quiet"]);
}

#[test]
fn purge_history_with_git_filter_branch_and_every_machine_heals() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    let b = Sandbox::machine("machine-b");
    let sa = session_id(1, 9);
    a.write_session(&sa, 4, true, &leaky_turns(&a.ws));
    let sb_id = session_id(2, 9);
    b.write_session(&sb_id, 4, true, &crate::support::two_task_turns(&b.ws));
    for m in [&a, &b] {
        link_private(m, &pool);
        m.ok(&["archive"]);
        m.ok(&["sync"]);
    }
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let (id, _) = leaky_chapter(&a);
    a.ok(&["forget", &id, "--by", "Ada", "--reason", "zq token"]);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    let tip_before = pool_files(&pool);
    assert!(!pool_files(&pool)
        .iter()
        .any(|p| p.contains(&id[id.rfind('/').expect("/") + 1..]) && p.contains(&sa)));
    assert!(
        pool_history_text(&pool).contains(LEAK),
        "the history still holds it"
    );
    let old_root = git(&pool, &["rev-list", "--max-parents=0", "main"]);

    // The purge, as docs/purging.md writes it (git filter-branch: part of git itself).
    purge_with_filter_branch(&pool, LEAK);
    assert!(!pool_history_text(&pool).contains(LEAK), "the purge worked");
    assert_ne!(
        git(&pool, &["rev-list", "--max-parents=0", "main"]),
        old_root,
        "the rewrite changed the first commit's id (its author and message are kept)"
    );

    // Every machine's next sync: rewrite detected, mirror rebuilt, nothing forgotten
    // republished, nothing else lost.
    for m in [&a, &b] {
        let report = m.json(&["sync", "--json"]);
        let r = &report["report"];
        assert_eq!(r["historyRewritten"], true, "{report}");
        assert_eq!(r["mirrorRebuilt"], true, "{report}");
        assert!(r["notes"].to_string().contains("rewritten"), "{report}");
    }
    for m in [&a, &b] {
        m.ok(&["sync"]);
    }
    assert!(
        !pool_history_text(&pool).contains(LEAK),
        "republished a leak"
    );
    let tip_after = pool_files(&pool);
    let documents = |s: &BTreeSet<String>| -> BTreeSet<String> {
        s.iter()
            .filter(|p| {
                p.starts_with("chapters/")
                    || p.starts_with("artifacts/")
                    || p.starts_with("collections/")
                    || p.starts_with("forget/")
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        documents(&tip_after),
        documents(&tip_before),
        "lost or republished a document"
    );
    for m in [&a, &b] {
        let mirror = m.ws.join(".dsh-knowledge");
        assert!(!files_text(&mirror).contains(LEAK));
        assert!(!crate::pool::mirror_documents(m, "")
            .iter()
            .any(|(_, text)| text.contains(LEAK)));
        // Every document is readable here: in the mirror, or (this machine's own, never
        // copied into its mirror) in the store.
        let key = m.json(&["status", "--json"])["identity"]["projectKey"]
            .as_str()
            .expect("key")
            .to_owned();
        let own: BTreeSet<String> = m
            .snapshot()
            .keys()
            .filter_map(|k| dsh_chapters::pool::plan::pool_path(&key, k).map(|(p, _)| p))
            .collect();
        for p in documents(&tip_after) {
            assert!(
                crate::pool::mirror_holds(m, &p) || own.contains(&p),
                "{} lacks {p}",
                m.harness
            );
        }
    }
    // B's own documents and A's other chapter are all still there.
    assert!(tip_after.iter().any(|p| p.contains(&sb_id)));
    assert!(tip_after
        .iter()
        .any(|p| p.contains(&sa) && p.starts_with("chapters/")));
}

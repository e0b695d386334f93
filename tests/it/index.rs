//! The derived topic index end to end: the store's index, the pool's index built by sync,
//! `chapters index rebuild`, `chapters topic merge`, and two machines at one pool state
//! agreeing byte for byte.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::support::{link_private, two_task_turns, Sandbox};

const S1: &str = "session-61616161-1111-4111-8111-111111111111";
const S2: &str = "session-62626262-2222-4222-8222-222222222222";

/// Every file of a directory, by name (not recursive: `index/` is flat; dot files are
/// local bookkeeping, not the index).
fn files(dir: &Path) -> BTreeMap<String, String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter(|e| e.path().is_file() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).expect("read"),
            )
        })
        .collect()
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", repo)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The pool's `index/` at main, by file name.
fn pool_index(pool: &Path) -> BTreeMap<String, String> {
    git(pool, &["ls-tree", "--name-only", "main", "index/"])
        .lines()
        .map(|p| {
            (
                p.trim_start_matches("index/").to_owned(),
                git(pool, &["show", &format!("main:{p}")]),
            )
        })
        .collect()
}

fn head(pool: &Path) -> String {
    git(pool, &["rev-parse", "main"])
}

fn machine(name: &str, session: Option<&str>, pool: &Path) -> Sandbox {
    let m = Sandbox::machine(name);
    if let Some(s) = session {
        m.write_session(s, 4, true, &two_task_turns(&m.ws));
    }
    m.ok(&["init"]);
    link_private(&m, pool);
    if session.is_some() {
        m.ok(&["archive"]);
    }
    m
}

#[test]
fn the_store_index_follows_the_store_and_a_rebuild_gives_the_same_bytes() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    sb.ok(&["search", "csv"]);
    let index = sb.store().join("index");
    let incremental = files(&index);
    assert!(
        incremental.contains_key("manifest.json"),
        "{:?}",
        incremental.keys()
    );
    let csv = &incremental["csv.md"];
    assert!(csv.starts_with("# csv — "), "{csv}");
    // Every link opens a chapter of the store, relative to the index directory.
    for line in csv.lines().filter(|l| l.starts_with("- ")) {
        let link = line
            .split("](")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .expect("a link");
        assert!(link.starts_with("../"), "{line}");
        assert!(index.join(link).is_file(), "{link} does not open");
    }
    let v = sb.json(&["index", "rebuild", "--json"]);
    assert_eq!(v["base"], "store");
    assert_eq!(v["result"]["full"], true);
    assert_eq!(files(&index), incremental, "rebuild = incremental");
    // A hand edit is repaired by the rebuild.
    std::fs::write(index.join("csv.md"), "hand edited\n").expect("edit");
    sb.ok(&["index", "rebuild"]);
    assert_eq!(files(&index), incremental);
}

#[test]
fn topic_merge_is_a_persons_fact_that_syncs_and_moves_both_machines_alike() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", Some(S1), &pool);
    a.ok(&["sync"]);
    let b = machine("machine-b", None, &pool);
    b.ok(&["sync"]);
    let before = b.json(&["search", "--topic", "exporter", "--json"]);
    assert_eq!(before["canonicalTopic"], "exporter");
    let exporter_docs = before["total"].as_u64().expect("total");
    assert!(exporter_docs >= 1, "{before}");

    let v = a.json(&[
        "topic",
        "merge",
        "Exporter",
        "csv",
        "--reason",
        "one piece of work",
        "--json",
    ]);
    assert_eq!(v["written"]["type"], "topic-alias");
    assert_eq!(v["written"]["from"], "exporter");
    assert_eq!(v["written"]["to"], "csv");
    assert_eq!(v["written"]["author"], "user");
    assert_eq!(v["written"]["reason"], "one piece of work");
    assert_eq!(v["canonical"], "csv");
    let file = a.ws.join(v["file"].as_str().expect("file"));
    assert!(file.ends_with(".dsh-chapters/edits/machine-a/curation.jsonl"));
    assert!(std::fs::read_to_string(&file)
        .expect("curation file")
        .contains("\"type\":\"topic-alias\""));
    // Usage errors: the same topic twice, exit 2, nothing written.
    assert_eq!(
        a.run(&["topic", "merge", "csv", " CSV "]).status.code(),
        Some(2)
    );

    a.ok(&["sync"]);
    b.ok(&["sync"]);
    assert!(git(&pool, &["show", "main:edits/machine-a/curation.jsonl"]).contains("topic-alias"));
    for m in [&a, &b] {
        let v = m.json(&["search", "--topic", "exporter", "--json"]);
        assert_eq!(v["canonicalTopic"], "csv", "{}: {v}", m.harness);
        assert!(v["total"].as_u64().expect("total") >= exporter_docs);
        assert!(v["shard"]
            .as_str()
            .expect("shard")
            .ends_with("index/csv.md"));
        let index = files(&m.ws.join(".dsh-knowledge/index"));
        assert!(
            index["exporter.md"].contains("merged into [csv](csv.md)"),
            "{}",
            index["exporter.md"]
        );
    }
    assert_eq!(
        files(&a.ws.join(".dsh-knowledge/index")),
        files(&b.ws.join(".dsh-knowledge/index"))
    );
    assert_eq!(files(&a.ws.join(".dsh-knowledge/index")), pool_index(&pool));
}

#[test]
fn two_machines_build_the_same_pool_index_and_a_hand_edit_is_rebuilt() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", Some(S1), &pool);
    let b = machine("machine-b", Some(S2), &pool);
    a.ok(&["sync"]);
    b.ok(&["sync"]); // b's incremental build adds its chapters to a's index
    a.ok(&["sync"]);
    let settled = head(&pool);
    let index = pool_index(&pool);
    assert!(
        index["csv.md"].contains(S1) && index["csv.md"].contains(S2),
        "{}",
        index["csv.md"]
    );
    // Neither machine disagrees with the other's build: nothing to commit.
    b.ok(&["sync"]);
    a.ok(&["index", "rebuild"]);
    b.ok(&["index", "rebuild"]);
    assert_eq!(
        head(&pool),
        settled,
        "a rebuild on either machine changes nothing"
    );
    assert_eq!(files(&a.ws.join(".dsh-knowledge/index")), index);
    assert_eq!(files(&b.ws.join(".dsh-knowledge/index")), index);

    // Someone edits a shard in the pool by hand: the next sync rebuilds it.
    let work = tmp.path().join("work");
    let clone = Command::new("git")
        .args(["clone", "-q"])
        .arg(&pool)
        .arg(&work)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .expect("clone");
    assert!(clone.success());
    std::fs::write(work.join("index/csv.md"), "# csv — hand edited\n").expect("edit");
    std::fs::write(work.join("index/junk.md"), "junk\n").expect("junk");
    let run = |args: &[&str]| {
        let ok = Command::new("git")
            .arg("-C")
            .arg(&work)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "x")
            .env("GIT_AUTHOR_EMAIL", "x@y")
            .env("GIT_COMMITTER_NAME", "x")
            .env("GIT_COMMITTER_EMAIL", "x@y")
            .status()
            .expect("git");
        assert!(ok.success(), "{args:?}");
    };
    run(&["add", "-A"]);
    run(&["commit", "-qm", "hand edit"]);
    run(&["push", "-q", "origin", "HEAD:main"]);
    a.ok(&["sync"]);
    let repaired = pool_index(&pool);
    assert_eq!(
        repaired, index,
        "the edited shard is rebuilt and the stray file removed"
    );
}

#[test]
fn two_machines_at_one_pool_state_answer_byte_for_byte_alike() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let writer = machine("writer-1", Some(S1), &pool);
    writer.ok(&["sync"]);
    let writer2 = machine("writer-2", Some(S2), &pool);
    writer2.ok(&["sync"]);
    let r1 = machine("reader-1", None, &pool);
    let r2 = machine("reader-2", None, &pool);
    r1.ok(&["sync"]);
    r2.ok(&["sync"]);
    assert_eq!(
        files(&r1.ws.join(".dsh-knowledge/index")),
        files(&r2.ws.join(".dsh-knowledge/index"))
    );
    for args in [
        vec!["search", "csv", "exporter"],
        vec!["search", "refresh", "middleware", "--explain"],
        vec!["search", "--topic", "csv"],
        vec![
            "search",
            "csv",
            "--json",
            "--explain",
            "--max-tokens",
            "100000",
        ],
        vec!["search", "plan", "--json"],
        vec!["search", "xylophone", "--json"],
    ] {
        let (one, two) = (r1.ok(&args), r2.ok(&args));
        assert_eq!(one, two, "{args:?}");
        assert!(!one.is_empty());
    }
}

fn put_chapter(sb: &Sandbox, root: &str, name: &str, title: &str, topics: &str) {
    let key = sb.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let dir = sb.store().join(root).join("chapters");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join(name),
        format!("---\ntitle: \"{title}\"\nsummary: \"\"\nkind: chapter\nprojectKey: \"{key}\"\ntopics: [{topics}]\ndate: \"2025-11-20T00:00:00Z\"\n---\nbody\n"),
    )
    .expect("write");
}

#[test]
fn the_vocabulary_is_shadow_by_default_and_applied_as_plugin_facts_a_person_overrides() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    put_chapter(&sb, "s1", "001-a.md", "Token refresh", "token, auth");
    put_chapter(&sb, "s1", "002-b.md", "Tokens expire", "tokens, expiry");
    put_chapter(&sb, "s2", "001-c.md", "More tokens", "tokens");
    sb.ok(&["search", "token"]);
    let status = sb.json(&["status", "--json"]);
    let vocab = &status["vocabulary"];
    assert_eq!(vocab["apply"], false);
    let candidates = vocab["candidates"].as_array().expect("candidates");
    assert_eq!(candidates.len(), 1, "{vocab}");
    assert_eq!(candidates[0]["from"], "token");
    assert_eq!(candidates[0]["to"], "tokens");
    assert_eq!(candidates[0]["signal"], "plural");
    let curation = sb.store().join("edits/test-machine/curation.jsonl");
    assert!(!curation.exists(), "shadow mode writes nothing");
    assert!(sb.ok(&["status"]).contains("shadow"));

    let out = sb
        .cmd(&["search", "token", "--json"])
        .env("CHAPTERS_VOCAB_APPLY", "true")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let facts = std::fs::read_to_string(&curation).expect("a plugin fact");
    assert!(
        facts.contains("\"author\":\"plugin\"")
            && facts.contains("plural: token (1 documents) / tokens (2 documents)"),
        "{facts}"
    );
    let listed = sb.json(&["search", "--topic", "token", "--json"]);
    assert_eq!(listed["canonicalTopic"], "tokens");
    assert_eq!(listed["total"], 3);
    let vocabulary =
        std::fs::read_to_string(sb.store().join("topics/vocabulary.json")).expect("vocabulary");
    assert!(vocabulary.contains("\"from\": \"token\""), "{vocabulary}");
    assert!(sb.store().join("index/token.md").is_file(), "the stub");
    // Applying again writes nothing new (the candidate is gone).
    let again = sb
        .cmd(&["search", "token"])
        .env("CHAPTERS_VOCAB_APPLY", "true")
        .output()
        .expect("run");
    assert!(again.status.success());
    assert_eq!(std::fs::read_to_string(&curation).expect("facts"), facts);
    // A person's alias for the same topic wins over the plugin's.
    sb.ok(&["topic", "merge", "token", "credential"]);
    let listed = sb.json(&["search", "--topic", "token", "--json"]);
    assert_eq!(listed["canonicalTopic"], "credential");
}

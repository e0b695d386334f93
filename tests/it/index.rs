//! The derived topic index end to end: the store's index, the pool's index built by sync,
//! `chapters index rebuild`, `chapters topic merge`, and two machines at one pool state
//! agreeing byte for byte.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use dsh_chapters::testkit::writer::{LogWriter, SessionScript, TurnSpec};

use crate::support::{link_private, two_task_turns, Sandbox, START_MS};

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
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(repo).env("HOME", repo);
    run_git(cmd, args)
}

/// `git` in a work tree, as a person at a terminal would run it.
fn git_in(dir: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(["-c", "user.name=Ana", "-c", "user.email=ana@example.com"])
        .env("HOME", dir);
    run_git(cmd, args)
}

fn run_git(mut cmd: Command, args: &[&str]) -> String {
    let out = cmd
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The pool's `index/` at main, by file name (a topic's pages as `<topic>/<page>.md`).
fn pool_index(pool: &Path) -> BTreeMap<String, String> {
    git(pool, &["ls-tree", "-r", "--name-only", "main", "index/"])
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
    // A search writes no shard; a writer command does (a person's topic merge here).
    sb.ok(&["search", "csv"]);
    assert!(
        !sb.store().join("index").exists(),
        "a search wrote the index"
    );
    sb.ok(&["topic", "merge", "csv-export", "csv"]);
    let index = sb.store().join("index");
    let incremental = files_deep(&index);
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
    assert_eq!(files_deep(&index), incremental, "rebuild = incremental");
    // A hand edit is repaired by the rebuild.
    std::fs::write(index.join("csv.md"), "hand edited\n").expect("edit");
    sb.ok(&["index", "rebuild"]);
    assert_eq!(files_deep(&index), incremental);
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
    // The report shows the fact as the ledger holds it: a credential typed into a topic or
    // a reason is shown through the rules, in the JSON and in the words.
    let secret = "AKIAQ3EGUWZXJ4TPLM7N";
    let reason = format!("pasted {secret} by mistake");
    let v = a.json(&["topic", "pin", "keep-me", "--reason", &reason, "--json"]);
    assert!(
        !v.to_string().to_ascii_uppercase().contains("AKIAQ3EG"),
        "{v}"
    );
    assert_eq!(v["written"]["topic"], "keep-me", "{v}");
    assert!(
        v["written"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("redacted")),
        "{v}"
    );
    let out = a.ok(&[
        "topic",
        "unpin",
        &format!("t-{secret}"),
        "--reason",
        &reason,
    ]);
    assert!(out.contains("wrote a topic-pin fact to"), "{out}");
    assert!(!out.to_ascii_uppercase().contains("AKIAQ3EG"), "{out}");
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
        let index = files_deep(&m.ws.join(".dsh-knowledge/index"));
        assert!(
            index["exporter.md"].contains("merged into [csv](csv.md)"),
            "{}",
            index["exporter.md"]
        );
    }
    assert_eq!(
        files_deep(&a.ws.join(".dsh-knowledge/index")),
        files_deep(&b.ws.join(".dsh-knowledge/index"))
    );
    assert_eq!(
        files_deep(&a.ws.join(".dsh-knowledge/index")),
        pool_index(&pool)
    );
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
    assert_eq!(files_deep(&a.ws.join(".dsh-knowledge/index")), index);
    assert_eq!(files_deep(&b.ws.join(".dsh-knowledge/index")), index);

    // Someone edits a shard in the pool by hand: the next sync rebuilds it.
    commit_by_hand(
        tmp.path(),
        &pool,
        &[
            ("index/csv.md", Some("# csv — hand edited\n")),
            ("index/junk.md", Some("junk\n")),
        ],
    );
    a.ok(&["sync"]);
    let repaired = pool_index(&pool);
    assert_eq!(
        repaired, index,
        "the edited shard is rebuilt and the stray file removed"
    );
}

/// A sync, and its account of the topic index it planned (`CHAPTERS_LOG` at debug).
fn sync_index_plan(m: &Sandbox) -> String {
    let out = m
        .cmd(&["sync"])
        .env("CHAPTERS_LOG", "dsh_chapters::pool::sync=debug")
        .output()
        .expect("sync");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let plans: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("topic index planned"))
        .collect();
    assert_eq!(plans.len(), 1, "{err}");
    plans[0].to_owned()
}

/// Commit `files` (path → bytes; `None` removes) to the pool's main from a clone, as a
/// person would.
fn commit_by_hand(tmp: &Path, pool: &Path, files: &[(&str, Option<&str>)]) {
    let work = tmp.join("by-hand");
    let _ = std::fs::remove_dir_all(&work);
    let git = |dir: &Path, args: &[&str]| {
        let ok = Command::new("git")
            .arg("-C")
            .arg(dir)
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
    git(
        tmp,
        &[
            "clone",
            "-q",
            &pool.to_string_lossy(),
            &work.to_string_lossy(),
        ],
    );
    for (path, text) in files {
        let at = work.join(path);
        match text {
            Some(text) => {
                std::fs::create_dir_all(at.parent().expect("a parent")).expect("dir");
                std::fs::write(&at, text).expect("write");
            }
            None => std::fs::remove_file(&at).expect("remove"),
        }
    }
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "by hand"]);
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
}

#[test]
fn an_index_another_machine_built_is_updated_from_the_tree_diff() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", Some(S1), &pool);
    assert!(sync_index_plan(&a).contains("full=true"), "a first build");
    // b never built this index: its manifest names the input trees of a's commit, which b
    // pulls — the diff from them to b's publication says what b adds.
    let b = machine("machine-b", Some(S2), &pool);
    let plan = sync_index_plan(&b);
    assert!(plan.contains("full=false"), "{plan}");
    let index = pool_index(&pool);
    assert!(
        index["csv.md"].contains(S1) && index["csv.md"].contains(S2),
        "{}",
        index["csv.md"]
    );
    let settled = head(&pool);
    a.ok(&["index", "rebuild"]);
    assert_eq!(head(&pool), settled, "the update equals a rebuild");

    // A pool whose index is of the manifest's parts (version 2): its first sync rebuilds
    // once and the parts go; the shards keep their bytes.
    let manifest = index["manifest.json"].replace("\"v\": 3", "\"v\": 2");
    commit_by_hand(
        tmp.path(),
        &pool,
        &[
            ("index/manifest.json", Some(&manifest)),
            ("index/manifest/ab.json", Some("{\"inputs\":{}}\n")),
        ],
    );
    // (b pulls the parts into its mirror first, as from a machine of the old version.)
    b.ok(&["sync", "--pull-only"]);
    assert!(b.ws.join(".dsh-knowledge/index/manifest/ab.json").is_file());
    let plan = sync_index_plan(&a);
    assert!(plan.contains("full=true"), "{plan}");
    assert_eq!(
        pool_index(&pool),
        index,
        "the parts removed, the rest as it was"
    );
    // Once; and the parts leaving b's mirror (derived pages, no documents) start no
    // search table over.
    let plan = sync_index_plan(&b);
    assert!(plan.contains("full=false"), "once: {plan}");
    assert!(plan.contains("rescan=false"), "{plan}");

    // One of b's chapters removed from the pool by hand: its topics come from its old
    // blob, and the diff from b's build takes it out of them as a rebuild would.
    let key = a.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("project key")
        .to_owned();
    let gone = git(&pool, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .find(|p| p.starts_with(&format!("chapters/{key}/")) && p.contains("62626262"))
        .expect("one of b's chapters")
        .to_owned();
    commit_by_hand(tmp.path(), &pool, &[(&gone, None)]);
    let plan = sync_index_plan(&a);
    assert!(plan.contains("full=false"), "{plan}");
    assert_ne!(
        pool_index(&pool),
        index,
        "the removed chapter left the index"
    );
    let settled = head(&pool);
    // (On a: b would publish its chapter again.)
    a.ok(&["index", "rebuild"]);
    assert_eq!(head(&pool), settled, "the update equals a rebuild");
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
        files_deep(&r1.ws.join(".dsh-knowledge/index")),
        files_deep(&r2.ws.join(".dsh-knowledge/index"))
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
    // A writer's step (a search writes no fact and no shard): `index rebuild`.
    sb.ok(&["index", "rebuild"]);
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
        .cmd(&["index", "rebuild", "--json"])
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
        .cmd(&["index", "rebuild"])
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

// --- the store's catalog: every writer records what it wrote ----------------------------

/// A fixed time long ago.
fn long_ago() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_secs(1_600_000_000)
}

/// Set a folder's mtime back to [`long_ago`]: a rescan that lists folders by mtime sees it
/// as unchanged since the table last listed it, so only the store's catalog can lead a
/// refresh to what was written there.
fn age(dir: &Path) {
    std::fs::File::open(dir)
        .and_then(|f| f.set_modified(long_ago()))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

/// Every document the store's catalog names, `folder/name` a line.
fn catalog_text(sb: &Sandbox) -> String {
    use dsh_chapters::store::catalog;
    let Some(now) = catalog::current(&sb.store()) else {
        return String::new();
    };
    let from_start = catalog::Cursor { revision: 0, ..now };
    match catalog::read_since(&sb.store(), Some(&from_start)) {
        catalog::Since::Changes { changes, .. } => changes
            .iter()
            .flat_map(|c| c.files.iter().map(move |f| format!("{}/{f}\n", c.folder)))
            .collect(),
        catalog::Since::Rescan { reason } => panic!("the catalog cannot say: {reason}"),
    }
}

fn total(sb: &Sandbox, terms: &[&str]) -> u64 {
    let mut args = vec!["search"];
    args.extend_from_slice(terms);
    args.push("--json");
    sb.json(&args)["total"].as_u64().expect("total")
}

fn last_seq(sb: &Sandbox, session: &str) -> u64 {
    let ledger = std::fs::read_to_string(
        sb.store()
            .join(session)
            .join("collections")
            .join(format!("{session}.jsonl")),
    )
    .expect("ledger");
    let v: serde_json::Value =
        serde_json::from_str(ledger.lines().last().expect("a line")).expect("json");
    v["seqs"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(serde_json::Value::as_u64)
        .expect("seq")
}

/// One more turn on `session`'s log, in the same root.
fn append_turn(sb: &Sandbox, session: &str, turn: TurnSpec) {
    let log = sb.log_path(session, 4, true);
    let mut w = LogWriter::open_append(&log, true).expect("append");
    let mut script =
        SessionScript::starting_at(4, last_seq(sb, session) + 1, 6, START_MS + 1_000_000);
    w.append_turn(&mut script, &turn).expect("append turn");
}

#[test]
fn every_writer_names_its_documents_and_search_finds_them_without_a_rescan() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let chapters = sb.store().join(S1).join("chapters");
    let rules = sb.store().join("rules");
    sb.ok(&[
        "rule",
        "add",
        "testing",
        "Every parser faces a garbled input test.",
    ]);
    // The first search builds the table (a full listing); the folders it records are old.
    age(&chapters);
    age(&rules);
    assert!(total(&sb, &["csv"]) >= 1);
    assert!(total(&sb, &["garbled"]) >= 1);

    // The archive: a chapter (and a session rule from its marker) in folders the table
    // already knows, which look unchanged to a listing.
    let mut turn = TurnSpec::new(
        "Write the zanzibar release notes.\nADD RULE: Release notes name every zanzibar migration.",
        "Release notes written.",
    );
    turn.tool_calls = vec![crate::support::read(
        &sb.ws,
        "docs/RELEASE.md",
        "# Release\n",
    )];
    append_turn(&sb, S1, turn);
    let report = sb.json(&["archive", "--json"]);
    let new_chapter = report["sessions"][0]["chapters"][0]
        .as_str()
        .expect("a new chapter")
        .to_owned();
    age(&chapters);
    age(&rules);
    let catalog = catalog_text(&sb);
    assert!(
        catalog.contains(&format!(".dsh-chapters/{S1}/chapters/{new_chapter}")),
        "{catalog}"
    );
    assert!(catalog.contains(".dsh-chapters/rules/"), "{catalog}");
    let found = sb.json(&["search", "zanzibar", "--json"]);
    let kinds: Vec<&str> = found["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| m["kind"].as_str().expect("kind"))
        .collect();
    assert!(
        kinds.contains(&"chapter") && kinds.contains(&"rule"),
        "the new chapter and its session rule: {found}"
    );

    // A project rule (`rule add`).
    sb.ok(&[
        "rule",
        "add",
        "review",
        "A quokka review precedes every merge.",
    ]);
    age(&rules);
    assert_eq!(total(&sb, &["quokka"]), 1);

    // Enrichment's re-annotation rewrites chapters in place (new topics, a new title).
    let server = crate::enrich::serve(vec![], crate::enrich::good("Fix the narwhal expiry check"));
    sb.ok(&[
        "enrich",
        "model",
        "--endpoint",
        &server.url,
        "--model",
        "m1",
    ]);
    assert_eq!(total(&sb, &["narwhal"]), 0);
    let report = sb.json(&["enrich", "run", "--json", "--limit", "50"]);
    let annotated = report["annotated"].as_array().expect("annotated").len() as u64;
    assert!(annotated >= 3, "{report}");
    age(&chapters);
    assert_eq!(
        total(&sb, &["narwhal"]),
        annotated,
        "every rewritten chapter, re-read"
    );

    // The store's index followed every writer: a rebuild gives the same bytes.
    let index = sb.store().join("index");
    let incremental = files_deep(&index);
    assert!(
        incremental["jwt-refresh.md"].contains("narwhal"),
        "{:?}",
        incremental.keys()
    );
    sb.ok(&["index", "rebuild"]);
    assert_eq!(files_deep(&index), incremental, "rebuild = incremental");
}

#[test]
fn the_pool_pull_names_other_machines_documents() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = machine("machine-a", Some(S1), &pool);
    let b = machine("machine-b", Some(S2), &pool);
    b.ok(&["sync"]);
    a.ok(&["sync"]);
    // B's chapters in A's mirror: kept in its objects (the packed mirror), a folder on
    // disk only for what was read; one written out is aged to look unchanged to a listing.
    let mirrored: Vec<String> = crate::pool::mirror_documents(&a, "chapters/")
        .into_iter()
        .map(|(p, _)| p)
        .filter(|p| p.contains(S2))
        .collect();
    assert!(!mirrored.is_empty());
    let age_mirrored = || {
        for p in &mirrored {
            let dir = a.ws.join(".dsh-knowledge").join(p);
            if let Some(dir) = dir.parent().filter(|d| d.is_dir()) {
                age(dir);
            }
        }
    };
    age_mirrored();
    assert!(total(&a, &["csv"]) >= 2, "both machines' csv chapters");

    // b writes a chapter in the same session; a's pull materializes it into a folder a's
    // table knows, which looks unchanged to a listing.
    let mut turn = TurnSpec::new("Tune the walrus cache eviction.", "Eviction tuned.");
    turn.tool_calls = vec![crate::support::read(
        &b.ws,
        "src/cache.rs",
        "fn evict() {}\n",
    )];
    append_turn(&b, S2, turn);
    b.ok(&["archive"]);
    b.ok(&["sync"]);
    assert_eq!(total(&a, &["walrus"]), 0, "not pulled yet");
    a.ok(&["sync"]);
    age_mirrored();
    assert!(
        catalog_text(&a).contains(".dsh-knowledge/chapters/"),
        "{}",
        catalog_text(&a)
    );
    assert_eq!(total(&a, &["walrus"]), 1);
    // The pool's index built incrementally on both machines equals a rebuild.
    let index = pool_index(&pool);
    assert!(
        !index.keys().any(|f| f.starts_with("manifest/")),
        "no manifest parts: {:?}",
        index.keys()
    );
    assert!(
        index["manifest.json"].contains("\"chapters\": \""),
        "{}",
        index["manifest.json"]
    );
    a.ok(&["index", "rebuild"]);
    assert_eq!(pool_index(&pool), index, "a rebuild commits nothing new");
}

#[test]
fn a_folder_copied_in_by_hand_is_found_by_the_fallback() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    assert!(total(&sb, &["csv"]) >= 1);
    let chapter = std::fs::read_dir(sb.store().join(S1).join("chapters"))
        .expect("chapters")
        .flatten()
        .map(|e| e.path())
        .find(|p| !p.to_string_lossy().contains("/plan-"))
        .expect("a chapter");
    let text = std::fs::read_to_string(&chapter).expect("read");
    let title_line = text
        .lines()
        .find(|l| l.starts_with("title:"))
        .expect("a title")
        .to_owned();
    // A chapter copied in by hand (no writer of this program, no record).
    let by_hand = |root: &str, word: &str| {
        let dir = sb.store().join(root).join("chapters");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(
            dir.join("001-copied.md"),
            text.replacen(&title_line, &format!("title: \"The {word} chapter\""), 1),
        )
        .expect("copy");
    };
    by_hand("session-copied-1", "ocelot");
    assert_eq!(
        total(&sb, &["ocelot"]),
        0,
        "the catalog does not name it: found only by a rescan"
    );
    sb.ok(&["index", "rebuild"]);
    assert_eq!(total(&sb, &["ocelot"]), 1, "the rebuild's full rescan");
    assert!(
        files(&sb.store().join("index"))
            .iter()
            .any(|(f, text)| f.ends_with(".md") && text.contains("session-copied-1")),
        "the rebuilt index lists it"
    );
    // A catalog that is gone (or was started over) means a full rescan at the next search.
    by_hand("session-copied-2", "pangolin");
    std::fs::remove_file(sb.store().join(".catalog.sqlite3")).expect("rm catalog");
    assert_eq!(total(&sb, &["pangolin"]), 1);
}

/// Every file of an index directory and of its subdirectories (a topic's pages as
/// `<topic>/<page>.md`; an older index's manifest parts as `manifest/xx.json`).
fn files_deep(dir: &Path) -> BTreeMap<String, String> {
    let mut out = files(dir);
    for entry in std::fs::read_dir(dir).expect("index dir").flatten() {
        if entry.path().is_dir() {
            let name = entry.file_name().to_string_lossy().into_owned();
            for (file, text) in files(&entry.path()) {
                out.insert(format!("{name}/{file}"), text);
            }
        }
    }
    out
}

// --- every merge revertible with git (record §6.3) -------------------------------------

fn sync_applying_vocabulary(m: &Sandbox) -> serde_json::Value {
    let out = m.ok_with_env(&["sync", "--json"], &[("CHAPTERS_VOCAB_APPLY", "true")]);
    serde_json::from_str(&out).expect("json")
}

fn canonical(m: &Sandbox, topic: &str) -> String {
    m.json(&["search", "--topic", topic, "--json"])["canonicalTopic"]
        .as_str()
        .expect("canonicalTopic")
        .to_owned()
}

#[test]
fn a_git_revert_of_the_plugins_merge_in_the_pool_holds_on_every_machine() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    a.ok(&["init"]);
    put_chapter(&a, "s1", "001-a.md", "Token refresh", "token, auth");
    put_chapter(&a, "s1", "002-b.md", "Tokens expire", "tokens, expiry");
    put_chapter(&a, "s2", "001-c.md", "More tokens", "tokens");
    link_private(&a, &pool);
    let ledger = "edits/machine-a/curation.jsonl";

    // The plugin's merge lands in a commit of its own, after the documents'.
    let report = sync_applying_vocabulary(&a);
    assert!(report.to_string().contains("token → tokens"), "{report}");
    let subject = git(&pool, &["log", "-1", "--format=%s", "main"]);
    assert_eq!(subject.trim(), "dsh-chapters: vocabulary from machine-a");
    let touched = git(&pool, &["show", "--format=", "--name-only", "main"]);
    assert!(touched.lines().any(|l| l == ledger), "{touched}");
    assert!(
        !touched.lines().any(|l| l.starts_with("chapters/")),
        "only the merge and what it derives: {touched}"
    );
    let b = machine("machine-b", None, &pool);
    b.ok(&["sync"]);
    assert_eq!(canonical(&a, "token"), "tokens");
    assert_eq!(canonical(&b, "token"), "tokens");

    // A person reverts that commit in the pool with git.
    let work = tmp.path().join("work");
    git_in(
        tmp.path(),
        &["clone", "-q", pool.to_str().expect("utf8"), "work"],
    );
    git_in(&work, &["revert", "--no-edit", "HEAD"]);
    git_in(&work, &["push", "-q", "origin", "HEAD:main"]);
    // The merge was the ledger's first line: the revert takes the file out of the pool.
    assert!(git(&pool, &["ls-tree", "-r", "--name-only", "main", "edits/"]).is_empty());

    // The machine that wrote the merge records the revert as a person's pin, publishes its
    // ledger whole again (a ledger never shrinks), and does not merge the topic again.
    let report = sync_applying_vocabulary(&a);
    assert!(
        report
            .to_string()
            .contains("kept undone by a person's topic-pin"),
        "{report}"
    );
    let published = git(&pool, &["show", &format!("main:{ledger}")]);
    let store_ledger = std::fs::read_to_string(a.store().join(ledger)).expect("ledger");
    assert_eq!(published, store_ledger);
    let lines: Vec<serde_json::Value> = published
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 2, "{published}");
    assert_eq!(
        (&lines[0]["type"], &lines[0]["author"]),
        (&"topic-alias".into(), &"plugin".into())
    );
    assert_eq!(
        (&lines[1]["type"], &lines[1]["topic"], &lines[1]["author"]),
        (&"topic-pin".into(), &"token".into(), &"user".into())
    );
    assert!(
        lines[1]["reason"]
            .as_str()
            .expect("reason")
            .contains("reverted in the pool"),
        "{published}"
    );
    let vocabulary = git(&pool, &["show", "main:topics/vocabulary.json"]);
    assert!(!vocabulary.contains("\"from\": \"token\""), "{vocabulary}");
    b.ok(&["sync"]);
    for m in [&a, &b] {
        assert_eq!(canonical(m, "token"), "token", "{}", m.harness);
    }
    assert_eq!(
        files_deep(&a.ws.join(".dsh-knowledge/index")),
        pool_index(&pool)
    );
    assert_eq!(
        files_deep(&b.ws.join(".dsh-knowledge/index")),
        pool_index(&pool)
    );
    // It holds: more syncs change nothing.
    let settled = head(&pool);
    sync_applying_vocabulary(&a);
    b.ok(&["sync"]);
    assert_eq!(head(&pool), settled);
    assert_eq!(canonical(&a, "token"), "token");

    // The pin is what holds it: lifted, the plugin merges the topic again.
    let v = a.json(&["topic", "unpin", "token", "--json"]);
    assert_eq!(v["written"]["type"], "topic-pin");
    assert_eq!(v["written"]["pinned"], false);
    sync_applying_vocabulary(&a);
    assert_eq!(canonical(&a, "token"), "tokens");
    b.ok(&["sync"]);
    assert_eq!(canonical(&b, "token"), "tokens");
    // And a person can undo it from the command line as well.
    a.ok(&[
        "topic",
        "pin",
        "token",
        "--reason",
        "token is the JWT, not the list",
    ]);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    assert_eq!(canonical(&a, "token"), "token");
    assert_eq!(canonical(&b, "token"), "token");
    assert_eq!(
        a.run(&["topic", "pin", "  "]).status.code(),
        Some(2),
        "an empty topic is a usage error"
    );
}

//! Full-text search (issue 16): bodies are searchable (tool results, commands, file reads,
//! assistant words, CJK), the query language, filters, the SQLite FTS5 cache kept derived
//! and disposable, a search that writes nothing published, and `show` / `list`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use dsh_chapters::testkit::writer::TurnSpec;

use crate::support::{bash, read, Sandbox};

const S1: &str = "session-61616161-1111-4111-8111-111111111111";
const S2: &str = "session-62626262-2222-4222-8222-222222222222";

/// Turns whose telling words are only in bodies: a lint code in a tool result, a command,
/// a file read, an assistant's word, a Chinese sentence.
fn body_turns(ws: &Path) -> Vec<TurnSpec> {
    let mut lint = TurnSpec::new(
        "Tidy up the documentation pages",
        "The long lines are wrapped now.",
    );
    lint.tool_calls = vec![bash(
        ws,
        "npx markdownlint docs",
        "docs/guide.md:3 MD013/line-length Line length [Expected: 80; Actual: 131]\n",
    )];
    let mut tests = TurnSpec::new(
        "Make the unit tests pass again",
        "All green. This was a draft approach at first.",
    );
    tests.tool_calls = vec![bash(ws, "npm test", "Tests: 42 passed, 42 total\n")];
    let mut image = TurnSpec::new(
        "Shrink the container image",
        "The image is 40% smaller; the Authorization header is now read from the environment.",
    );
    image.tool_calls = vec![read(
        ws,
        "Dockerfile",
        "FROM rust:1.80-slim AS build\nRUN cargo build --release\n",
    )];
    let cjk = TurnSpec::new(
        "请修复数据库连接的超时问题",
        "已经把连接池的超时时间改为三十秒。",
    );
    vec![lint, tests, image, cjk]
}

fn archived() -> Sandbox {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &body_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    sb
}

pub fn search(sb: &Sandbox, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    all.push("--json");
    sb.json(&all)
}

pub fn matches(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["matches"].as_array().expect("matches").clone()
}

#[test]
fn the_issues_queries_find_words_that_are_only_in_bodies() {
    let sb = archived();
    for (query, word) in [
        ("MD013", "MD013"),
        ("npm test", "npm test"),
        ("Dockerfile", "Dockerfile"),
        ("Authorization", "Authorization"),
    ] {
        let v = search(&sb, &[query]);
        let found = matches(&v);
        assert!(!found.is_empty(), "{query}: {v}");
        let first = &found[0];
        assert!(
            !first["title"]
                .as_str()
                .expect("title")
                .to_lowercase()
                .contains(&word.to_lowercase()),
            "{query} must be found in a body, not a title: {first}"
        );
        let snippet = first["snippet"].as_str().expect("a snippet");
        assert!(
            snippet.to_lowercase().contains(&word.to_lowercase()),
            "{query}: {snippet}"
        );
        assert!(snippet.chars().count() <= 110, "a short snippet: {snippet}");
    }
    // The text line carries the id `show` takes and the snippet, inside the budget.
    let text = sb.ok(&["search", "MD013", "--max-tokens", "200"]);
    let line = text.lines().nth(1).expect("a match line");
    assert!(
        line.contains("| 61616161/") && line.contains("MD013"),
        "{text}"
    );
    assert!(
        text.lines()
            .last()
            .expect("footer")
            .ends_with(" of 200 tokens"),
        "{text}"
    );
}

#[test]
fn cjk_words_are_found_inside_a_sentence() {
    let sb = archived();
    for word in ["数据库", "超时", "连接池"] {
        let v = search(&sb, &[word]);
        assert_eq!(v["total"], 1, "{word}: {v}");
        assert!(
            matches(&v)[0]["snippet"]
                .as_str()
                .expect("snippet")
                .contains(word),
            "{v}"
        );
    }
}

#[test]
fn phrases_prefixes_exclusions_and_explain() {
    let sb = archived();
    assert_eq!(search(&sb, &["\"npm test\""])["total"], 1);
    assert_eq!(
        search(&sb, &["\"test npm\""])["total"],
        0,
        "a phrase keeps its order"
    );
    assert_eq!(search(&sb, &["markdownl*"])["total"], 1);
    assert_eq!(
        search(&sb, &["markdownl"])["total"],
        0,
        "no prefix without *"
    );
    let green = search(&sb, &["green"]);
    assert_eq!(green["total"], 1, "{green}");
    assert_eq!(search(&sb, &["green -draft"])["total"], 0);
    assert_eq!(search(&sb, &["green -absentword"])["total"], 1);
    // --explain names the body part beside the §8 parts.
    let v = search(&sb, &["Dockerfile", "--explain"]);
    let e = &matches(&v)[0]["explain"];
    assert!(e["body"]["bm25"].as_f64().expect("bm25") > 0.0, "{e}");
    assert!(e["body"]["points"].as_f64().expect("points") < 0.5, "{e}");
    assert_eq!(e["base"], 0.0, "no §8 field hit: {e}");
    let text = sb.ok(&["search", "Dockerfile", "--explain"]);
    assert!(text.contains("body: BM25"), "{text}");
}

#[test]
fn field_hits_rank_above_body_hits() {
    let sb = archived();
    // "container" is in a title; "image" in that title and in a body.
    let v = search(&sb, &["image"]);
    let found = matches(&v);
    assert!(!found.is_empty(), "{v}");
    assert!(
        found[0]["title"]
            .as_str()
            .expect("title")
            .to_lowercase()
            .contains("image"),
        "{v}"
    );
    // Same store, same query: the same answer, byte for byte.
    assert_eq!(
        sb.ok(&["search", "image", "test", "--json"]),
        sb.ok(&["search", "image", "test", "--json"])
    );
}

#[test]
fn filters_narrow_by_kind_machine_session_and_date() {
    let sb = archived();
    assert_eq!(search(&sb, &["MD013", "--kind", "chapter"])["total"], 1);
    assert_eq!(search(&sb, &["MD013", "--kind", "plan"])["total"], 0);
    assert_eq!(
        search(&sb, &["MD013", "--machine", &sb.harness])["total"],
        1
    );
    assert_eq!(
        search(&sb, &["MD013", "--machine", "elsewhere"])["total"],
        0
    );
    assert_eq!(search(&sb, &["MD013", "--harness", "dsh"])["total"], 1);
    assert_eq!(search(&sb, &["MD013", "--session", "61616161"])["total"], 1);
    assert_eq!(search(&sb, &["MD013", "--session", "7777"])["total"], 0);
    assert_eq!(search(&sb, &["MD013", "--since", "2020-01-01"])["total"], 1);
    assert_eq!(search(&sb, &["MD013", "--until", "2020-01-01"])["total"], 0);
    // A date in the future: nothing matched, not an error.
    let future = search(&sb, &["MD013", "--since", "2999-01-01"]);
    assert_eq!(future["empty"], "nothing-matched", "{future}");
    assert_eq!(
        search(&sb, &["Dockerfile", "--path", "Dockerfile"])["total"],
        1
    );
    assert_eq!(search(&sb, &["MD013", "--path", "Dockerfile"])["total"], 0);
    let bad = sb.run(&["search", "MD013", "--since", "someday"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// Every file of the store but the derived search caches.
fn published(sb: &Sandbox) -> BTreeMap<String, Vec<u8>> {
    sb.snapshot()
        .into_iter()
        .filter(|(k, _)| !k.starts_with(".search/") && !k.contains(".catalog."))
        .collect()
}

#[test]
fn a_search_writes_nothing_but_its_caches_even_with_the_vocabulary_applied() {
    let sb = archived();
    // Hand-written documents the archive's index step has not seen.
    let dir = sb.store().join("s9").join("chapters");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for (name, topic) in [
        ("001-a.md", "token"),
        ("002-b.md", "tokens"),
        ("003-c.md", "tokens"),
    ] {
        std::fs::write(
            dir.join(name),
            format!("---\ntitle: \"{name}\"\nkind: chapter\nprojectKey: \"x\"\ntopics: [{topic}]\ndate: null\n---\nbody\n"),
        )
        .expect("write");
    }
    let before = published(&sb);
    for args in [
        vec!["search", "token", "--cross-project"],
        vec!["search", "MD013"],
        vec!["search", "--topic", "tokens", "--cross-project"],
        vec!["list", "--cross-project"],
    ] {
        let out = sb
            .cmd(&args)
            .env("CHAPTERS_VOCAB_APPLY", "true")
            .output()
            .expect("run");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let after = published(&sb);
    let moved: Vec<&String> = after
        .keys()
        .chain(before.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(moved.is_empty(), "a read path wrote {moved:?}");
    // The writer's path does it: `index rebuild` applies the vocabulary.
    let out = sb
        .cmd(&["index", "rebuild"])
        .env("CHAPTERS_VOCAB_APPLY", "true")
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sb.store().join("index").is_dir());
}

fn cache_file(sb: &Sandbox) -> std::path::PathBuf {
    sb.store().join(".search").join("fts.sqlite3")
}

#[test]
fn the_cache_is_derived_deleted_garbage_foreign_or_newer_it_is_rebuilt() {
    let sb = archived();
    let want = search(&sb, &["MD013"]);
    assert_eq!(want["total"], 1);
    assert!(
        cache_file(&sb).is_file(),
        "the cache lives beside the table"
    );
    let again = |what: &str| {
        let v = search(&sb, &["MD013"]);
        assert_eq!(v["total"], 1, "{what}: {v}");
        assert_eq!(matches(&v), matches(&want), "{what}");
    };
    std::fs::remove_file(cache_file(&sb)).expect("rm");
    again("deleted");
    std::fs::write(cache_file(&sb), b"this is not a database at all").expect("garbage");
    let _ = std::fs::remove_file(sb.store().join(".search/fts.sqlite3-wal"));
    again("garbage");
    {
        let _ = std::fs::remove_file(cache_file(&sb));
        let _ = std::fs::remove_file(sb.store().join(".search/fts.sqlite3-wal"));
        let _ = std::fs::remove_file(sb.store().join(".search/fts.sqlite3-shm"));
        let other = rusqlite::Connection::open(cache_file(&sb)).expect("open");
        other
            .execute_batch("CREATE TABLE docs(x); INSERT INTO docs VALUES (1);")
            .expect("another program's database");
    }
    again("another program's database");
    {
        let c = rusqlite::Connection::open(cache_file(&sb)).expect("open");
        c.pragma_update(None, "user_version", 99)
            .expect("newer format");
    }
    again("a newer format");
    let c = rusqlite::Connection::open(cache_file(&sb)).expect("open");
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(v, dsh_chapters::catalog::cache::CACHE_VERSION);
    drop(c);
    // A cache that cannot be written (here: a directory in its place) is built in memory.
    let _ = std::fs::remove_file(cache_file(&sb));
    let _ = std::fs::remove_file(sb.store().join(".search/fts.sqlite3-wal"));
    let _ = std::fs::remove_file(sb.store().join(".search/fts.sqlite3-shm"));
    std::fs::create_dir_all(cache_file(&sb).join("x")).expect("a directory in its place");
    let out = sb
        .cmd(&["search", "MD013", "--json"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["total"], 1, "{v}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("built in memory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_cache_follows_new_and_removed_documents() {
    let sb = archived();
    assert_eq!(search(&sb, &["zanzibar"])["total"], 0);
    let more = TurnSpec::new("Plan the zanzibar release", "Zanzibar is scheduled.");
    sb.write_session(S2, 4, true, &[more]);
    sb.ok(&["archive"]);
    assert_eq!(search(&sb, &["zanzibar"])["total"], 1);
}

#[test]
fn show_and_list() {
    let sb = archived();
    let found = search(&sb, &["MD013"]);
    let m = &matches(&found)[0];
    let id = m["id"].as_str().expect("id");
    assert!(id.starts_with("61616161/"), "{id}");
    let shown = sb.ok(&["show", id]);
    let mut lines = shown.lines();
    assert!(lines.next().expect("title").starts_with("# "), "{shown}");
    let header = lines.next().expect("header");
    for part in [id, &sb.harness, "dsh", "session ", "seq ", "topics:"] {
        assert!(header.contains(part), "{part}: {header}");
    }
    assert!(shown.contains("MD013/line-length"), "the body: {shown}");
    let path = m["path"].as_str().expect("path");
    assert_eq!(sb.ok(&["show", path]), shown, "by path");
    let raw = sb.ok(&["show", id, "--raw"]);
    assert_eq!(
        raw.as_bytes(),
        std::fs::read(sb.ws.join(path)).expect("file").as_slice()
    );
    let j = sb.json(&["show", id, "--json"]);
    assert_eq!(j["path"], path);
    assert!(j["body"].as_str().expect("body").contains("MD013"));
    assert!(j["seqRange"].is_array(), "{j}");
    let missing = sb.run(&["show", "00000000/9"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("chapters list"));

    let listed = sb.json(&["list", "--json"]);
    let docs = listed["documents"].as_array().expect("documents");
    assert!(docs.len() >= 2, "{listed}");
    let dates: Vec<&str> = docs
        .iter()
        .map(|d| d["date"].as_str().unwrap_or(""))
        .collect();
    assert!(
        dates.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {dates:?}"
    );
    assert_eq!(sb.json(&["list", "--limit", "1", "--json"])["shown"], 1);
    assert_eq!(sb.json(&["list", "--kind", "rule", "--json"])["shown"], 0);
    let text = sb.ok(&["list"]);
    let row = text.lines().nth(1).expect("a row");
    assert_eq!(
        row.split(" | ").count(),
        7,
        "date | harness | machine | kind | title | path | id: {row}"
    );
}

#[test]
fn bad_queries_are_answers_or_usage_errors_never_fts_syntax_errors() {
    let sb = archived();
    let huge = (0..10_000)
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");
    let out = sb.cmd(&["search", &huge, "--json"]).output().expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("left out"));
    for q in [
        "\"unbalanced quote",
        "NEAR",
        "MD013 NEAR npm",
        "title: MD013",
        "MD013*",
        "\"\"",
        "a:b:c \" * ( ) ^",
        "-",
        "*",
        "-draft",
    ] {
        let out = sb.cmd(&["search", q, "--json"]).output().expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr).to_lowercase();
        assert!(
            matches!(out.status.code(), Some(0) | Some(2)),
            "{q}: {stderr}"
        );
        assert!(
            !stderr.contains("fts5") && !stderr.contains("syntax error") && !stderr.contains("sql"),
            "{q}: {stderr}"
        );
    }
    assert_eq!(sb.run(&["search", "-"]).status.code(), Some(2));
}

#[test]
fn two_searches_at_once_during_an_archive() {
    let sb = archived();
    let mut turns = Vec::new();
    for i in 0..6 {
        turns.push(TurnSpec::new(
            &format!("Another task number {i} about quokkas"),
            "Done.",
        ));
    }
    sb.write_session(S2, 4, true, &turns);
    let spawn = |args: &[&str]| {
        sb.cmd(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let archive = spawn(&["archive"]);
    let a = spawn(&["search", "MD013", "--json"]);
    let b = spawn(&["search", "quokkas", "--json"]);
    for (what, child) in [("archive", archive), ("search a", a), ("search b", b)] {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(search(&sb, &["MD013"])["total"], 1);
    assert!(search(&sb, &["quokkas"])["total"].as_u64().expect("total") >= 1);
}

/// Issue 16 point 2: a search killed (SIGKILL) at any moment of filling the search table and
/// the FTS5 cache — a first build with its final merge, or the next search's update — leaves
/// a cache the next search uses or rebuilds, and answers as a cache built in one go does.
#[test]
fn a_search_killed_while_it_fills_the_cache_answers_as_a_clean_build_does() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    // Enough documents that filling the cache takes a while in a debug build: 2,400 chapters
    // of ~1.6 KB in 24 folders, every one holding `gadget`, one of them `needle7x42`.
    let filler: String = (0..180).map(|i| format!("word{} ", i * 7 % 97)).collect();
    let write_folder = |f: usize| {
        let dir = sb.store().join(format!("s{f}")).join("chapters");
        std::fs::create_dir_all(&dir).expect("mkdir");
        for c in 0..100 {
            std::fs::write(
                dir.join(format!("{c:03}-gadget.md")),
                format!("---\ntitle: \"gadget {f} {c}\"\nkind: chapter\nprojectKey: \"x\"\ntopics: [gadget]\ndate: \"2026-01-02T00:00:00Z\"\n---\nneedle{f}x{c} gadget {filler}\n"),
            )
            .expect("write");
        }
    };
    for f in 0..20 {
        write_folder(f);
    }
    let query = ["needle7x42 gadget", "--cross-project"];
    let (mut kills, mut killed_with_a_cache) = (0, 0);
    for (round, delay_ms) in [2u64, 10, 30, 60, 120, 250, 500, 900, 1500]
        .into_iter()
        .enumerate()
    {
        if round == 5 {
            // The next searches update a built cache with new folders.
            for f in 20..24 {
                write_folder(f);
            }
        }
        if sb.killed_after(
            &["search", query[0], query[1]],
            Duration::from_millis(delay_ms),
        ) {
            kills += 1;
            killed_with_a_cache += usize::from(cache_file(&sb).exists());
        }
    }
    assert!(
        kills >= 3,
        "the searches finished too fast to be killed; make the corpus bigger"
    );
    // Some kills came while the cache file was being filled or updated, not only before it.
    assert!(
        killed_with_a_cache >= 1,
        "{kills} kills, none with a cache on disk"
    );
    let after_kills = search(&sb, &query);
    assert_eq!(after_kills["documents"], 2400, "{after_kills}");
    let cache = cache_file(&sb);
    for f in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{f}", cache.display()));
    }
    let clean = search(&sb, &query);
    assert_eq!(matches(&after_kills), matches(&clean));
    assert_eq!(after_kills["total"], clean["total"]);
    assert!(
        matches(&clean)[0]["path"]
            .as_str()
            .expect("path")
            .ends_with("s7/chapters/042-gadget.md"),
        "{clean}"
    );
}

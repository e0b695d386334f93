//! A mixed team (issue 17 point 5): one machine runs the original TypeScript plugin, another
//! runs `chapters`, both on one pool. The plugin's files (`fixtures/ts-plugin/`, shaped as its
//! source writes them) are committed into a real pool with git, as its sync does; `chapters`
//! then reads, searches, lists and shows them, never rewrites them, and its derived index
//! keeps their topics.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{link_private, two_task_turns, Sandbox};

const PLUGIN_HARNESS: &str = "adrian-mbp";
const PLUGIN_ROOT: &str = "5f0c2d4e-8a71-4b3c-9d2e-6a1f0b7c3e94";
const OUR_SESSION: &str = "session-17171717-0000-4000-8000-000000000001";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/ts-plugin/pool")
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).expect("fixture dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            walk(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).expect("under base");
            out.insert(
                rel.to_string_lossy().into_owned(),
                std::fs::read(&path).expect("fixture"),
            );
        }
    }
}

/// The plugin's files for this project: pool path → bytes.
fn plugin_files(project_key: &str) -> BTreeMap<String, Vec<u8>> {
    let mut raw = BTreeMap::new();
    walk(&fixture_dir(), &fixture_dir(), &mut raw);
    raw.into_iter()
        .map(|(path, bytes)| {
            let text = String::from_utf8(bytes).expect("utf8 fixture");
            (
                path.replace("__PROJECT_KEY__", project_key),
                text.replace("__PROJECT_KEY__", project_key).into_bytes(),
            )
        })
        .collect()
}

/// The plugin's documents (its derived `index/` aside): what must stay byte-identical.
fn plugin_documents(project_key: &str) -> BTreeMap<String, Vec<u8>> {
    plugin_files(project_key)
        .into_iter()
        .filter(|(p, _)| !p.starts_with("index/"))
        .collect()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
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

fn pool_blob(pool: &Path, path: &str) -> Vec<u8> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["cat-file", "blob", &format!("main:{path}")])
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "{path} is not in the pool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn pool_paths(pool: &Path) -> BTreeSet<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["ls-tree", "-r", "--name-only", "main"])
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The plugin machine's sync, as its source does it: a clone of the pool, the files copied
/// in where absent, one commit by `dsh-chapters <harness@dsh-chapters.local>`, a push.
fn plugin_publishes(pool: &Path, work: &Path, files: &BTreeMap<String, Vec<u8>>) {
    let parent = work.parent().expect("parent");
    git(
        parent,
        &[
            "clone",
            "-q",
            pool.to_str().expect("utf8"),
            work.to_str().expect("utf8"),
        ],
    );
    for (path, bytes) in files {
        let dst = work.join(path);
        std::fs::create_dir_all(dst.parent().expect("parent")).expect("mkdir");
        std::fs::write(&dst, bytes).expect("write");
    }
    git(work, &["add", "-A"]);
    git(
        work,
        &[
            "-c",
            "user.name=dsh-chapters",
            "-c",
            &format!("user.email={PLUGIN_HARNESS}@dsh-chapters.local"),
            "commit",
            "-q",
            "-m",
            &format!(
                "dsh-chapters: (+{} file(s)) — harness {PLUGIN_HARNESS}",
                files.len()
            ),
        ],
    );
    git(work, &["push", "-q", "origin", "HEAD:main"]);
}

fn project_key(sb: &Sandbox) -> String {
    sb.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned()
}

fn assert_plugin_documents_untouched(pool: &Path, docs: &BTreeMap<String, Vec<u8>>, when: &str) {
    for (path, bytes) in docs {
        assert!(
            pool_blob(pool, path) == *bytes,
            "{when}: the plugin's {path} was rewritten in the pool"
        );
    }
}

fn search(sb: &Sandbox, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    all.push("--json");
    sb.json(&all)
}

fn found_paths(v: &serde_json::Value) -> Vec<String> {
    v["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .map(|m| m["path"].as_str().expect("path").to_owned())
        .collect()
}

#[test]
fn a_pool_the_typescript_plugin_shares_is_read_and_never_rewritten() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let m = Sandbox::machine("our-laptop");
    m.write_session(OUR_SESSION, 4, true, &two_task_turns(&m.ws));
    link_private(&m, &pool);
    m.ok(&["archive"]);
    m.ok(&["sync"]);
    let pk = project_key(&m);

    // The plugin machine publishes its chapters, artifacts, collection, rule, curation
    // lines and its own index into the same pool.
    let docs = plugin_documents(&pk);
    plugin_publishes(&pool, &tmp.path().join("plugin-clone"), &plugin_files(&pk));
    m.ok(&["sync"]);
    assert_plugin_documents_untouched(&pool, &docs, "after our sync");

    let ch1 = format!(
        ".dsh-knowledge/chapters/{pk}/{PLUGIN_ROOT}/001-tune-the-websocket-reconnect-backoff.md"
    );
    let ch2 = format!(
        ".dsh-knowledge/chapters/{pk}/{PLUGIN_ROOT}/002-rotate-the-signing-keys-for-session-tokens.md"
    );

    // Searched: by title, by topic, by a word only in the body — and counted, not unreadable.
    let by_title = search(&m, &["websocket"]);
    assert!(found_paths(&by_title).contains(&ch1), "{by_title}");
    let by_topic = search(&m, &["backoff"]);
    assert!(found_paths(&by_topic).contains(&ch1), "{by_topic}");
    let by_body = search(&m, &["quokka"]);
    assert_eq!(found_paths(&by_body), vec![ch2.clone()], "{by_body}");
    let by_summary = search(&m, &["jitter"]);
    assert!(found_paths(&by_summary).contains(&ch1), "{by_summary}");
    assert_eq!(by_title["unreadable"], 0, "{by_title}");
    let ours = m.chapter_files().len() as u64;
    assert_eq!(
        by_title["documents"].as_u64().expect("documents"),
        ours + 3,
        "our {ours} chapters, the plugin's 2 and its rule: {by_title}"
    );
    let rule_hit = search(&m, &["reconnect", "--kind", "rule"]);
    assert_eq!(
        rule_hit["total"], 1,
        "the plugin's rule is searched: {rule_hit}"
    );
    let plugin_hit = by_title["matches"]
        .as_array()
        .expect("matches")
        .iter()
        .find(|x| x["path"] == ch1.as_str())
        .expect("hit")
        .clone();
    assert_eq!(plugin_hit["kind"], "chapter", "{plugin_hit}");

    // Counted by status as documents, none unreadable.
    let status = m.json(&["status", "--json"]);
    assert_eq!(status["documents"]["unreadable"], 0, "{status}");
    assert!(
        status["documents"]["pool"].as_u64().expect("pool") >= 3,
        "{status}"
    );

    // Listed, and shown.
    let listed = m.json(&["list", "--limit", "100", "--json"]);
    let listed_paths: Vec<&str> = listed["documents"]
        .as_array()
        .expect("documents")
        .iter()
        .map(|d| d["path"].as_str().expect("path"))
        .collect();
    for p in [&ch1, &ch2] {
        assert!(listed_paths.contains(&p.as_str()), "{p}: {listed}");
    }
    let shown = m.ok(&["show", &ch2]);
    assert!(shown.contains("Rotate the signing keys"), "{shown}");
    assert!(shown.contains("quokka service"), "the body: {shown}");
    let raw = m.ok(&["show", &ch2, "--raw"]);
    assert_eq!(
        raw.as_bytes(),
        docs[ch2.trim_start_matches(".dsh-knowledge/")].as_slice()
    );

    // The plugin's rule is listed; its curation lines are read without refusing anyone's.
    let rules = m.json(&["rule", "list", "--json"]);
    assert_eq!(rules["unreadable"], 0, "{rules}");
    let plugin_rule = rules["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .find(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.contains(PLUGIN_HARNESS))
        })
        .unwrap_or_else(|| panic!("the plugin's rule is listed: {rules}"))
        .clone();
    assert_eq!(plugin_rule["category"], "testing", "{plugin_rule}");
    assert_eq!(
        plugin_rule["status"], "proposed",
        "the plugin machine's approval governs that machine only: {plugin_rule}"
    );
    // The plugin's alias (keys → session-tokens) is honoured…
    let by_alias = search(&m, &["--topic", "session-tokens"]);
    assert!(found_paths(&by_alias).contains(&ch2), "{by_alias}");
    // …but never over a person's: keys stays its own label once a person pins it.
    m.ok(&["topic", "pin", "keys"]);
    let pinned = search(&m, &["--topic", "keys"]);
    assert!(found_paths(&pinned).contains(&ch2), "{pinned}");

    // Rebuilt over both, the index keeps their topics; their files stay byte-identical.
    m.ok(&["index", "rebuild"]);
    m.ok(&["sync"]);
    assert_plugin_documents_untouched(&pool, &docs, "after index rebuild and sync");
    let paths = pool_paths(&pool);
    let pool_ch1 = ch1.trim_start_matches(".dsh-knowledge/");
    for topic in ["websocket", "reconnect", "backoff"] {
        let shard = format!("index/{topic}.md");
        assert!(paths.contains(&shard), "{shard}: {paths:?}");
        let text = String::from_utf8(pool_blob(&pool, &shard)).expect("utf8");
        assert!(
            text.contains(pool_ch1),
            "{shard} lists the plugin's chapter:\n{text}"
        );
    }
    let keys = String::from_utf8(pool_blob(&pool, "index/keys.md")).expect("utf8");
    assert!(
        keys.contains(ch2.trim_start_matches(".dsh-knowledge/")),
        "the pinned topic's shard lists the plugin's chapter:\n{keys}"
    );
    // A quiet round publishes nothing.
    let head = git(&pool, &["rev-parse", "main"]);
    m.ok(&["sync"]);
    assert_eq!(git(&pool, &["rev-parse", "main"]), head);

    // The plugin syncs again and writes its index over ours (its own format, its own
    // manifest): our next sync puts ours back, still with their topics, and settles.
    let index: BTreeMap<String, Vec<u8>> = plugin_files(&pk)
        .into_iter()
        .filter(|(p, _)| p.starts_with("index/"))
        .collect();
    plugin_publishes(&pool, &tmp.path().join("plugin-clone-2"), &index);
    assert_eq!(
        pool_blob(&pool, "index/websocket.md"),
        index["index/websocket.md"]
    );
    m.ok(&["sync"]);
    assert_plugin_documents_untouched(&pool, &docs, "after the plugin's second sync");
    let websocket = String::from_utf8(pool_blob(&pool, "index/websocket.md")).expect("utf8");
    assert!(
        websocket.contains(pool_ch1) && websocket.as_bytes() != index["index/websocket.md"],
        "our shard again, with the plugin's chapter:\n{websocket}"
    );
    let head = git(&pool, &["rev-parse", "main"]);
    m.ok(&["sync"]);
    assert_eq!(git(&pool, &["rev-parse", "main"]), head, "settled");
}

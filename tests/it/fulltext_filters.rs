//! Full-text search (issue 16), the filters and parts beyond the basics in `fulltext.rs`:
//! artifacts only when asked, `--path` by the files a signature names (not by prose),
//! `--harness` from the frontmatter with no hidden default, every part of `--explain`, the
//! same answer from the same state, and bad input (FTS syntax typed as words, a cache on a
//! directory this user cannot write).

use std::path::Path;
use std::process::{Command, Output};

use dsh_chapters::testkit::writer::TurnSpec;

use crate::fulltext::{matches, search};
use crate::support::{bash, read, Sandbox};

const S1: &str = "session-71717171-1111-4111-8111-111111111111";
const S2: &str = "session-72727272-2222-4222-8222-222222222222";

#[test]
fn artifacts_are_searched_only_when_asked() {
    let sb = Sandbox::new();
    // A tool result far over `toolResultArtifactTokens` (8000): kept as an artifact.
    let log: String = (0..3000)
        .map(|i| format!("test billing::ledger::case_{i:04} ... ok\n"))
        .collect::<String>()
        + "error: quuxinator overflowed at case_2999\n";
    let mut turn = TurnSpec::new(
        "Run the billing test suite",
        "The suite ran; the log is kept.",
    );
    turn.tool_calls = vec![bash(&sb.ws, "cargo test -p billing", &log)];
    sb.write_session(S1, 4, true, &[turn]);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let artifact_dir = sb.store().join(S1).join("artifacts");
    assert!(artifact_dir.is_dir(), "the big log became an artifact");

    // Not by default: the word is only in the artifact.
    let v = search(&sb, &["quuxinator"]);
    assert_eq!(v["total"], 0, "{v}");
    assert_eq!(v["empty"], "nothing-matched", "{v}");
    // With --artifacts (or --kind artifact): found, as a document of kind `artifact`.
    for flags in [&["--artifacts"][..], &["--kind", "artifact"][..]] {
        let mut args = vec!["quuxinator"];
        args.extend_from_slice(flags);
        let v = search(&sb, &args);
        assert_eq!(v["total"], 1, "{flags:?}: {v}");
        let m = &matches(&v)[0];
        assert_eq!(m["kind"], "artifact", "{m}");
        let path = m["path"].as_str().expect("path");
        assert!(
            path.contains("/artifacts/") && path.ends_with(".txt"),
            "{m}"
        );
        assert!(
            m["snippet"]
                .as_str()
                .expect("a snippet")
                .contains("quuxinator"),
            "{m}"
        );
        // `show` reads it by the id the search gave.
        let shown = sb.ok(&["show", m["id"].as_str().expect("id")]);
        assert!(shown.contains("quuxinator overflowed"), "{shown}");
    }
    // A chapter word still finds the chapter only, unless artifacts are asked for too.
    let plain = search(&sb, &["billing"]);
    assert!(
        matches(&plain).iter().all(|m| m["kind"] != "artifact"),
        "{plain}"
    );
    let with = search(&sb, &["billing", "--artifacts"]);
    assert!(
        matches(&with).iter().any(|m| m["kind"] == "artifact"),
        "{with}"
    );
    // Listing: artifacts only when asked.
    let listed = sb.json(&["list", "--json"]);
    assert!(
        listed["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .all(|d| d["kind"] != "artifact"),
        "{listed}"
    );
    let listed = sb.json(&["list", "--artifacts", "--json"]);
    assert!(
        listed["documents"]
            .as_array()
            .expect("documents")
            .iter()
            .any(|d| d["kind"] == "artifact"),
        "{listed}"
    );
    // Exclusion reaches artifacts too.
    assert_eq!(
        search(&sb, &["billing -quuxinator", "--artifacts"])["total"],
        1,
        "the chapter stays, the artifact holding the excluded word goes"
    );
}

#[test]
fn path_matches_the_files_a_signature_names_not_prose() {
    let sb = Sandbox::new();
    // Session 1 only talks about the file (the assistant's prose: body text, which the
    // signature does not read); session 2's tool call reads it.
    let prose = TurnSpec::new(
        "Why does the README point at the invoice code as the entry point?",
        "The README names src/billing/invoice.rs because the invoice totals start there.",
    );
    sb.write_session(S1, 4, true, &[prose]);
    let mut touched = TurnSpec::new(
        "Round the invoice totals to cents",
        "The invoice totals are rounded now.",
    );
    touched.tool_calls = vec![read(
        &sb.ws,
        "src/billing/invoice.rs",
        "fn total() -> f64 { 0.0 }\n",
    )];
    sb.write_session(S2, 4, true, &[touched]);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);

    let all = search(&sb, &["invoice"]);
    assert_eq!(all["total"], 2, "both chapters hold the word: {all}");
    for path in [
        "src/billing/invoice.rs",
        "./src/billing/invoice.rs",
        "billing/invoice.rs",
        "invoice.rs",
        "SRC/Billing/Invoice.rs",
    ] {
        let v = search(&sb, &["invoice", "--path", path]);
        assert_eq!(v["total"], 1, "{path}: {v}");
        assert!(
            matches(&v)[0]["id"]
                .as_str()
                .expect("id")
                .starts_with("72727272/"),
            "{path}: the chapter whose tool call read it, not the one that names it in prose: {v}"
        );
    }
    // A part of a component is not the file.
    assert_eq!(search(&sb, &["invoice", "--path", "voice.rs"])["total"], 0);
    assert_eq!(
        search(&sb, &["invoice", "--path", "src/billing"])["total"],
        0
    );
    // `list` takes the same filter.
    let listed = sb.json(&["list", "--path", "invoice.rs", "--json"]);
    assert_eq!(listed["total"], 1, "{listed}");
    // An absolute path, as an editor copies it: inside the workspace it is the same file,
    // as this machine names it or as a `pathMap` twin (a Windows machine) does.
    let absolute = sb.ws.join("src/billing/invoice.rs");
    let absolute = absolute.to_str().expect("utf-8");
    assert_eq!(
        search(&sb, &["invoice", "--path", absolute])["total"],
        1,
        "{absolute}"
    );
    let listed = sb.json(&["list", "--path", absolute, "--json"]);
    assert_eq!(listed["total"], 1, "{listed}");
    std::fs::write(
        sb.store().join("config.yml"),
        format!("pathMap:\n  'C:\\Users\\ana\\shop': {}\n", sb.ws_str()),
    )
    .expect("config");
    let windows = r"C:\Users\ana\shop\src\billing\invoice.rs";
    assert_eq!(search(&sb, &["invoice", "--path", windows])["total"], 1);
    // Outside the workspace it is no file of it.
    assert_eq!(
        search(
            &sb,
            &["invoice", "--path", "/elsewhere/src/billing/invoice.rs"]
        )["total"],
        0
    );
}

/// A document as another harness would store it (hand-written, before the first search
/// builds the table from a full scan).
fn put(ws: &Path, rel: &str, title: &str, harness: Option<&str>) {
    let p = ws.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    let harness = harness
        .map(|h| format!("harness: {h}\n"))
        .unwrap_or_default();
    std::fs::write(
        p,
        format!("---\ntitle: \"{title}\"\nkind: chapter\nprojectKey: \"x\"\n{harness}harnessId: m1\ntopics: [gadget]\ndate: \"2026-01-02T00:00:00Z\"\n---\nThe gadget body.\n"),
    )
    .expect("write");
}

#[test]
fn harness_filters_on_the_frontmatter_and_no_default_hides_one() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    put(
        &sb.ws,
        ".dsh-chapters/session-a1/chapters/001-a.md",
        "Gadget by dsh",
        None,
    );
    put(
        &sb.ws,
        ".dsh-chapters/session-b2/chapters/001-b.md",
        "Gadget by codex",
        Some("codex"),
    );
    put(
        &sb.ws,
        ".dsh-chapters/session-c3/chapters/001-c.md",
        "Gadget by claude",
        Some("claude-code"),
    );
    let all = search(&sb, &["gadget", "--cross-project"]);
    assert_eq!(all["total"], 3, "no flag, every harness: {all}");
    let mut harnesses: Vec<String> = matches(&all)
        .iter()
        .map(|m| m["harness"].as_str().expect("harness").to_owned())
        .collect();
    harnesses.sort();
    assert_eq!(harnesses, ["claude-code", "codex", "dsh"]);
    for (h, title) in [
        ("codex", "Gadget by codex"),
        ("CODEX", "Gadget by codex"),
        ("dsh", "Gadget by dsh"),
        ("claude-code", "Gadget by claude"),
    ] {
        let v = search(&sb, &["gadget", "--cross-project", "--harness", h]);
        assert_eq!(v["total"], 1, "{h}: {v}");
        assert_eq!(matches(&v)[0]["title"], title, "{h}");
    }
    assert_eq!(
        search(&sb, &["gadget", "--cross-project", "--harness", "aider"])["total"],
        0
    );
    let listed = sb.json(&["list", "--cross-project", "--json"]);
    assert_eq!(listed["total"], 3, "{listed}");
    let listed = sb.json(&["list", "--cross-project", "--harness", "codex", "--json"]);
    assert_eq!(listed["total"], 1, "{listed}");
}

#[test]
fn explain_names_every_part_and_the_same_state_gives_the_same_answer() {
    let sb = Sandbox::new();
    let mut lint = TurnSpec::new(
        "Tidy up the documentation pages",
        "The long lines are wrapped now.",
    );
    lint.tool_calls = vec![bash(
        &sb.ws,
        "npx markdownlint docs",
        "docs/guide.md:3 MD013/line-length Line length\n",
    )];
    sb.write_session(S1, 4, true, &[lint]);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let v = search(&sb, &["documentation", "md013", "--explain"]);
    let m = &matches(&v)[0];
    let parts = &m["explain"]["parts"];
    let mut sum = 0.0;
    for key in [
        "topic", "title", "summary", "category", "kind", "recency", "coreRule", "body",
    ] {
        sum += parts[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {parts}"));
    }
    assert!(parts["title"].as_f64().expect("title") > 0.0, "{parts}");
    assert!(parts["body"].as_f64().expect("body") > 0.0, "{parts}");
    let score = m["score"].as_f64().expect("score");
    assert!(
        (sum - score).abs() < 1e-9,
        "the parts add up: {sum} vs {score}"
    );
    let text = sb.ok(&["search", "documentation", "md013", "--explain"]);
    for part in [
        "topic ×2",
        "title",
        "summary",
        "category",
        "kind",
        "recency:",
        "core rule",
        "body: BM25",
        "score:",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    // Same state, same answer — also from a cache built anew.
    let once = sb.ok(&["search", "documentation", "md013", "--json", "--explain"]);
    assert_eq!(
        once,
        sb.ok(&["search", "documentation", "md013", "--json", "--explain"])
    );
    std::fs::remove_dir_all(sb.store().join(".search")).expect("rm caches");
    assert_eq!(
        once,
        sb.ok(&["search", "documentation", "md013", "--json", "--explain"])
    );
}

#[test]
fn fts_syntax_typed_as_words_is_words() {
    let sb = Sandbox::new();
    let mut t = TurnSpec::new(
        "Check the query parser",
        "The parser reads NOT and OR as words; see title:draft and (group).",
    );
    t.tool_calls = vec![bash(&sb.ws, "echo done", "done\n")];
    sb.write_session(S1, 4, true, &[t]);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    for q in [
        "parser AND",
        "parser OR nothinghere",
        "NOT parser",
        "parser (group",
        "parser)",
        "title:draft",
        "parser NEAR(",
        "parser ^ + { } [ ]",
        "\"parser",
        "parser\"\"\"",
        "parser*)",
        "- parser",
        "parser -",
    ] {
        let out = sb
            .cmd(&["search", "--json", "--", q])
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{q}: {stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert!(
            v["total"].as_u64().expect("total") <= 1,
            "{q}: {v} {stderr}"
        );
    }
    // `OR`, `AND`, `NOT` alone are the words "or", "and", "not" of the body.
    for w in ["OR", "AND", "NOT"] {
        assert_eq!(sb.json(&["search", "--json", "--", w])["total"], 1, "{w}");
    }
    assert_eq!(search(&sb, &["parser AND"])["total"], 1);
    assert_eq!(search(&sb, &["title:draft"])["total"], 1);
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `chapters ARGS` as a user who cannot write the workspace: `nobody` under root (root
/// writes anywhere), else this user with the directory made read-only.
fn as_reader(sb: &Sandbox, args: &[&str]) -> Output {
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_chapters"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_chapters"))
    };
    cmd.args(args)
        .current_dir(&sb.ws)
        .env("DSH_HOME", &sb.home)
        .env("CHAPTERS_HARNESS_ID", &sb.harness)
        .output()
        .expect("run")
}

#[test]
fn a_cache_where_nothing_can_be_written_still_answers() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    let mut t = TurnSpec::new("Wrap the long lines", "Done.");
    t.tool_calls = vec![bash(&sb.ws, "npx markdownlint docs", "MD013 line-length\n")];
    sb.write_session(S1, 4, true, &[t]);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    assert_eq!(search(&sb, &["MD013"])["total"], 1);
    // No cache yet, and nowhere to write one: everything readable, nothing writable.
    std::fs::remove_file(sb.store().join(".search").join("fts.sqlite3")).expect("rm cache");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(
            sb.store()
                .join(".search")
                .join(format!("fts.sqlite3{suffix}")),
        );
    }
    let root = sb.home.parent().expect("sandbox root").to_path_buf();
    let mode = |dir: &Path, m: u32| {
        let out = Command::new("chmod")
            .args(["-R", &format!("{m:o}")])
            .arg(dir)
            .status()
            .expect("chmod");
        assert!(out.success());
    };
    // Directories and files readable (and directories searchable) by all, writable by none.
    let status = Command::new("chmod")
        .args(["-R", "a+rX,a-w"])
        .arg(&root)
        .status()
        .expect("chmod");
    assert!(status.success());
    let out = as_reader(&sb, &["search", "MD013", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // Give the directory back before any assertion can fail (the temp dir is removed).
    mode(&root, 0o755);
    let _ = std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700));
    eprintln!("as a reader: {:?} {stderr}", out.status.code());
    match out.status.code() {
        Some(0) => {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
            assert_eq!(v["total"], 1, "answered from a cache built in memory: {v}");
            assert!(stderr.contains("built in memory"), "{stderr}");
        }
        code => {
            // Or a clear error that names what could not be written.
            assert_eq!(code, Some(1), "{stderr}");
            assert!(
                stderr.contains("cannot be brought up to date") && stderr.contains("denied"),
                "a clear error: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{stderr}");
        }
    }
}

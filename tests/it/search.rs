//! `chapters search` end to end: the store door, the pool door, the two empty answers, the
//! budget, plans by kind, and the project filter.

use crate::support::{link_private, two_task_turns, Sandbox};

const S1: &str = "session-51515151-1111-4111-8111-111111111111";
const S2: &str = "session-52525252-2222-4222-8222-222222222222";

fn archived(sb: &Sandbox, session: &str) {
    sb.write_session(session, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
}

fn matches(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["matches"].as_array().expect("matches")
}

#[test]
fn store_door_finds_the_right_chapter_first_and_says_so() {
    let sb = Sandbox::new();
    archived(&sb, S1);
    let text = sb.ok(&["search", "csv", "exporter"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("searched this machine's store only (")
            && lines[0].contains("no pool linked"),
        "{text}"
    );
    assert!(lines[1].contains("csv"), "{text}");
    assert!(
        !lines[1].contains("refresh"),
        "the auth chapter is not first:\n{text}"
    );
    assert!(
        lines[1].contains(&format!(".dsh-chapters/{S1}/chapters/")),
        "{text}"
    );
    let footer = lines.last().expect("footer");
    assert!(
        footer.starts_with("shown ")
            && footer.contains(" matches, used ")
            && footer.ends_with(" of 400 tokens"),
        "{text}"
    );
    // The auth term finds the auth chapter first.
    let auth = sb.json(&["search", "refresh", "middleware", "--json"]);
    let first = &matches(&auth)[0];
    assert!(
        first["title"]
            .as_str()
            .expect("title")
            .to_lowercase()
            .contains("refresh"),
        "{auth}"
    );
}

#[test]
fn json_shape_and_explain() {
    let sb = Sandbox::new();
    archived(&sb, S1);
    let v = sb.json(&["search", "csv", "--json", "--explain"]);
    assert_eq!(v["door"], "store");
    let documents = v["documents"].as_u64().expect("documents");
    assert!(documents >= 2, "{v}");
    assert_eq!(v["unreadable"], 0);
    assert_eq!(v["empty"], serde_json::Value::Null);
    let total = v["total"].as_u64().expect("total");
    let shown = v["shown"].as_u64().expect("shown");
    assert!(shown >= 1 && shown <= total, "{v}");
    assert_eq!(matches(&v).len() as u64, shown);
    let budget = &v["budget"];
    assert_eq!(budget["requested"], 400);
    assert_eq!(
        budget["used"].as_u64().expect("used") + budget["remaining"].as_u64().expect("remaining"),
        400
    );
    let m = &matches(&v)[0];
    for key in [
        "score", "date", "kind", "title", "path", "topics", "explain",
    ] {
        assert!(m.get(key).is_some(), "match lacks {key}: {m}");
    }
    let hits = m["explain"]["hits"].as_array().expect("hits");
    assert!(hits.iter().any(|h| h["term"] == "csv"), "{m}");
    // Scores never increase down the list.
    let scores: Vec<f64> = matches(&v)
        .iter()
        .map(|m| m["score"].as_f64().expect("score"))
        .collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
}

#[test]
fn nothing_here_differs_from_nothing_matched() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let here = sb.json(&["search", "csv", "--json"]);
    assert_eq!(here["empty"], "nothing-here");
    assert_eq!(here["documents"], 0);
    assert!(sb.ok(&["search", "csv"]).contains("chapters archive"));

    archived(&sb, S1);
    let none = sb.json(&["search", "xylophone", "--json"]);
    assert_eq!(none["empty"], "nothing-matched");
    assert!(none["documents"].as_u64().expect("documents") > 0);
    assert_eq!(none["total"], 0);
    assert!(sb.ok(&["search", "xylophone"]).contains("nothing matched"));
}

#[test]
fn a_budget_below_one_line_refuses_with_numbers() {
    let sb = Sandbox::new();
    archived(&sb, S1);
    let out = sb.run(&["search", "csv", "--max-tokens", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("budget too small") && stderr.contains("--max-tokens is 1"),
        "{stderr}"
    );
    let out = sb.run(&["search", "csv", "--max-tokens", "1", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["shown"], 0);
    assert!(
        v["budgetTooSmall"]["needed"].as_u64().expect("needed") > 1,
        "{v}"
    );
    // Exactly the needed size shows that one line and uses all of it.
    let needed = v["budgetTooSmall"]["needed"]
        .as_u64()
        .expect("needed")
        .to_string();
    let v = sb.json(&["search", "csv", "--max-tokens", &needed, "--json"]);
    assert_eq!(v["shown"], 1);
    assert_eq!(v["budget"]["remaining"], 0);
}

#[test]
fn usage_errors_exit_two() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    assert_eq!(sb.run(&["search"]).status.code(), Some(2));
    assert_eq!(sb.run(&["search", "a", "!"]).status.code(), Some(2));
    assert_eq!(
        sb.run(&["search", "x", "--max-tokens", "-3"]).status.code(),
        Some(2)
    );
}

#[test]
fn kind_plan_finds_a_plan() {
    let sb = Sandbox::new();
    let mut turns = two_task_turns(&sb.ws);
    turns[4].plan = Some("# Rewrite the tokenizer\n1. Split on commas\n".to_owned());
    sb.write_session(S1, 4, true, &turns);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let v = sb.json(&["search", "plan", "--json", "--explain"]);
    let plan = matches(&v)
        .iter()
        .find(|m| m["kind"] == "plan")
        .unwrap_or_else(|| panic!("no plan found: {v}"));
    assert!(
        plan["path"]
            .as_str()
            .expect("path")
            .contains("/chapters/plan-001-"),
        "{plan}"
    );
    let hits = plan["explain"]["hits"].as_array().expect("hits");
    assert!(hits.iter().any(|h| h["field"] == "kind"), "{plan}");
}

#[test]
fn pool_door_finds_another_machines_chapter_and_the_project_filter_holds() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    let b = Sandbox::machine("machine-b");
    a.write_session(S1, 4, true, &two_task_turns(&a.ws));
    a.ok(&["init"]);
    link_private(&a, &pool);
    a.ok(&["archive"]);
    a.ok(&["sync"]);
    b.ok(&["init"]);
    link_private(&b, &pool);
    let before = b.json(&["search", "csv", "--json"]);
    assert_eq!(before["door"], "pool-and-store");
    assert_eq!(before["empty"], "nothing-here", "not yet synced: {before}");
    b.ok(&["sync"]);

    let text = b.ok(&["search", "csv"]);
    assert!(
        text.starts_with("searched the pool mirror and this machine's store ("),
        "{text}"
    );
    let v = b.json(&["search", "csv", "--json"]);
    assert_eq!(v["door"], "pool-and-store");
    let first = matches(&v)[0]["path"].as_str().expect("path").to_owned();
    assert!(
        first.starts_with(".dsh-knowledge/chapters/") && first.contains(&format!("/{S1}/")),
        "{v}"
    );
    assert!(b.ws.join(&first).is_file(), "the path opens: {first}");

    // B's own work joins A's: both machines' chapters, no duplicates.
    b.write_session(S2, 4, true, &two_task_turns(&b.ws));
    b.ok(&["archive"]);
    let both = b.json(&["search", "csv", "--json", "--max-tokens", "100000"]);
    let paths: Vec<&str> = matches(&both)
        .iter()
        .map(|m| m["path"].as_str().expect("path"))
        .collect();
    assert!(
        paths.iter().any(|p| p.contains(S1)) && paths.iter().any(|p| p.contains(S2)),
        "{paths:?}"
    );
    let unique: std::collections::BTreeSet<&&str> = paths.iter().collect();
    assert_eq!(unique.len(), paths.len());

    // A foreign project's chapter in the mirror: out by default, in with --cross-project.
    let foreign =
        b.ws.join(".dsh-knowledge/chapters/foreign-project-key/session-f/001-zebra.md");
    std::fs::create_dir_all(foreign.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &foreign,
        "---\ntitle: \"Zebra striping\"\nsummary: \"\"\nkind: chapter\nprojectKey: \"foreign-project-key\"\ntopics: [zebra]\ndate: null\n---\nbody\n",
    )
    .expect("write");
    // Recorded in the store's catalog, as the pool pull records what it materializes.
    dsh_chapters::testkit::catalog::record(
        &b.store(),
        &[(
            ".dsh-knowledge/chapters/foreign-project-key/session-f",
            &["001-zebra.md"],
        )],
    );
    let off = b.json(&["search", "zebra", "--json"]);
    assert_eq!(off["empty"], "nothing-matched", "{off}");
    let on = b.json(&["search", "zebra", "--json", "--cross-project"]);
    assert_eq!(on["total"], 1, "{on}");
    assert_eq!(
        matches(&on)[0]["path"],
        ".dsh-knowledge/chapters/foreign-project-key/session-f/001-zebra.md"
    );
}

#[test]
fn topic_lists_and_restricts() {
    let sb = Sandbox::new();
    archived(&sb, S1);
    let listing = sb.json(&["search", "--topic", "CSV", "--json"]);
    assert!(listing["total"].as_u64().expect("total") >= 1, "{listing}");
    for m in matches(&listing) {
        let topics: Vec<&str> = m["topics"]
            .as_array()
            .expect("topics")
            .iter()
            .map(|t| t.as_str().expect("t"))
            .collect();
        assert!(topics.contains(&"csv"), "{m}");
    }
    let restricted = sb.json(&["search", "refresh", "--topic", "csv", "--json"]);
    let unrestricted = sb.json(&["search", "refresh", "--json"]);
    assert!(
        restricted["total"].as_u64() < unrestricted["total"].as_u64(),
        "{restricted}\n{unrestricted}"
    );
}

//! Rules end to end: the project tier across machines, the session tier from the marker at
//! the signing point, the block on every door, and the person-only decisions.

use dsh_chapters::testkit::writer::TurnSpec;

use crate::support::{link_private, two_task_turns, Sandbox};

const PARENT: &str = "session-61616161-1111-4111-8111-111111111111";
const CHILD: &str = "session-62626262-2222-4222-8222-222222222222";
const OTHER: &str = "session-63636363-3333-4333-8333-333333333333";

fn add(sb: &Sandbox, category: &str, text: &str) -> String {
    let v = sb.json(&["rule", "add", category, text, "--json"]);
    v["id"].as_str().expect("id").to_owned()
}

fn fails(sb: &Sandbox, args: &[&str]) -> (i32, String, String) {
    let out = sb.run(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn pool_files(pool: &std::path::Path) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-C",
            pool.to_str().expect("utf8"),
            "ls-tree",
            "-r",
            "main",
            "--name-only",
        ])
        .output()
        .expect("git ls-tree");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_person_approves_and_the_mark_is_given_never_inferred() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let id = add(&sb, "testing", "Run cargo fmt before every commit.");
    // The same words again (other whitespace) are the same rule, one file.
    assert_eq!(
        add(&sb, "testing", "Run cargo fmt\n  before every commit."),
        id
    );
    let rules: Vec<_> = std::fs::read_dir(sb.store().join("rules"))
        .expect("rules dir")
        .collect();
    assert_eq!(rules.len(), 1);

    // No --by: a usage error, even with a name in git config and the environment.
    std::fs::write(sb.ws.join(".git/config"), "[user]\n\tname = Git Name\n[remote \"origin\"]\n\turl = https://github.com/example/widgets.git\n").expect("git config");
    let out = sb
        .cmd(&["rule", "approve", &id])
        .env("GIT_AUTHOR_NAME", "Env Name")
        .env("USER", "env-user")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let (code, _, err) = fails(&sb, &["rule", "approve", &id, "--by", "  "]);
    assert_eq!(code, 1, "{err}");
    assert!(
        !sb.store().join("edits").exists(),
        "nothing recorded without a person"
    );

    sb.ok(&["rule", "approve", &id, "--by", "Ana"]);
    let view = sb.json(&["rule", "view", &id, "--json"]);
    assert_eq!(view["status"], "core");
    assert_eq!(view["decision"]["by"], "Ana");
    assert_eq!(view["text"], "Run cargo fmt before every commit.");
    sb.ok(&["rule", "pin", &id, "--by", "Ana"]);
    let list = sb.json(&["rule", "list", "--json"]);
    assert_eq!(list["rules"][0]["pinned"], true);
    // The rule file was never rewritten by a decision.
    let file = sb.store().join("rules").join(format!("{id}.md"));
    assert!(std::fs::read_to_string(&file)
        .expect("rule")
        .contains("status: proposed"));
    sb.ok(&["rule", "revoke", &id, "--by", "Ana"]);
    assert_eq!(
        sb.json(&["rule", "view", &id, "--json"])["status"],
        "revoked"
    );
    assert_eq!(
        sb.json(&["rule", "list", "--proposed", "--json"])["rules"]
            .as_array()
            .expect("rules")
            .len(),
        0
    );
    // The words of `rule view` and `rule list` are the rule as read back; an unknown id is
    // named through the rules (a key pasted where an id goes is not printed again).
    let words = sb.ok(&["rule", "view", &id]);
    assert!(
        words.contains("Run cargo fmt before every commit."),
        "{words}"
    );
    assert!(words.contains("decided by Ana"), "{words}");
    assert!(sb.ok(&["rule", "list"]).contains(&id));
    let (code, _, err) = fails(&sb, &["rule", "view", "AKIAQ3EGUWZXJ4TPLM7N"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no rule"), "{err}");
    assert!(!err.contains("AKIAQ3EG"), "{err}");
    // Every CLI error goes out through the rules (`cli::run`), and so does a flag's value
    // quoted back by a usage error.
    let (code, _, err) = fails(&sb, &["show", "AKIAQ3EGUWZXJ4TPLM7N/3"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no chapter, plan or rule"), "{err}");
    assert!(!err.contains("AKIAQ3EG"), "{err}");
    let (code, _, err) = fails(&sb, &["search", "fmt", "--since", "AKIAQ3EGUWZXJ4TPLM7N"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is not a date"), "{err}");
    assert!(!err.contains("AKIAQ3EG"), "{err}");
    // Bad input is refused by name.
    let (code, _, err) = fails(&sb, &["rule", "add", "bad category", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("not a category name"), "{err}");
    let (code, _, err) = fails(&sb, &["rule", "view", "r-nothing"]);
    assert_eq!(code, 1);
    assert!(err.contains("no rule"), "{err}");
}

#[test]
fn rule_search_finds_rules_as_rules() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    add(
        &sb,
        "migrations",
        "Database migrations run inside one transaction.",
    );
    let v = sb.json(&["search", "migrations", "--json"]);
    assert_eq!(v["matches"][0]["kind"], "rule", "{v}");
}

fn marker_turns(sb: &Sandbox) -> Vec<TurnSpec> {
    let mut turns = two_task_turns(&sb.ws);
    turns[0] = TurnSpec::new(
        "Fix the refresh token middleware.\nADD RULE: Never push to main without a review.",
        "Noted.",
    );
    turns
}

#[test]
fn a_marker_becomes_a_session_rule_carried_on_continue_dropped_on_fork_never_published() {
    let sb = Sandbox::new();
    let pool = sb.home.join("pool.git");
    sb.write_session(PARENT, 4, true, &marker_turns(&sb));
    sb.write_session_with(CHILD, 4, true, &two_task_turns(&sb.ws), |h| {
        h.parent_session = Some(PARENT.to_owned());
    });
    sb.write_session(OTHER, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json"]);
    let captured: Vec<String> = report["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .flat_map(|s| s["sessionRules"].as_array().cloned().unwrap_or_default())
        .map(|v| v.as_str().expect("id").to_owned())
        .collect();
    assert_eq!(captured.len(), 1, "{report}");
    let sid = &captured[0];
    assert!(sid.starts_with("s-"));
    // A second archive captures nothing new (signed exactly once, write-once file).
    let again = sb.json(&["archive", "--json"]);
    assert!(!again.to_string().contains(sid.as_str()), "{again}");

    // Continue: the child's head carries its parent's session rule with its warrant.
    let notice = sb.ok(&["notice", "--session", CHILD]);
    for needle in [
        "Never push to main without a review.",
        "you said this (session",
        "Precedence: project rules are the team's order.",
        "name by id the session rules",
        "0 project rules — this checkout is not linked",
        "## Finding things",
        "`chapters_search`",
        "`chapters_rules`",
        "`chapters_artifact`",
    ] {
        assert!(notice.contains(needle), "missing {needle:?}:\n{notice}");
    }
    // Fork: project rules only — zero session bytes.
    let fork = sb.ok(&["notice", "--session", CHILD, "--intent", "fork"]);
    assert!(!fork.contains("Never push"), "{fork}");
    assert!(!fork.contains("## Rules"), "{fork}");
    // Another session tree is not governed by it.
    let other = sb.ok(&["notice", "--session", OTHER]);
    assert!(!other.contains("Never push"), "{other}");

    // Never staged to the pool.
    link_private(&sb, &pool);
    let pid = add(&sb, "style", "Keep functions short.");
    sb.ok(&["sync"]);
    let files = pool_files(&pool);
    assert!(files.contains("rules/") && files.contains(&pid), "{files}");
    assert!(
        !files.contains(sid.as_str()),
        "a session rule reached the pool:\n{files}"
    );
    assert!(
        !files
            .lines()
            .any(|l| l.starts_with("rules/") && l.contains("/s-")),
        "{files}"
    );
    // The pool's topic index lists the project rule and never names the session rule.
    let index = std::process::Command::new("git")
        .args([
            "-C",
            pool.to_str().expect("utf8"),
            "grep",
            "-h",
            "-e",
            ".",
            "main",
            "--",
            "index/",
        ])
        .output()
        .expect("git grep");
    let index = String::from_utf8_lossy(&index.stdout);
    assert!(
        index.contains(&pid),
        "the project rule is indexed:\n{index}"
    );
    assert!(
        !index.contains(sid.as_str()),
        "a session rule is named by the pool's index:\n{index}"
    );
    assert!(!index.contains("Never push"), "{index}");

    // Revoke is a local fact: the rule stops governing.
    sb.ok(&["rule", "revoke", sid, "--by", "Ana"]);
    let after = sb.ok(&["notice", "--session", CHILD]);
    assert!(!after.contains("Never push"), "{after}");
    let (code, _, err) = fails(&sb, &["rule", "approve", sid, "--by", "Ana"]);
    assert_eq!(code, 1);
    assert!(err.contains("session rule"), "{err}");
}

#[test]
fn three_machines_a_rule_governs_only_where_a_person_approved_it() {
    let a = Sandbox::machine("machine-a");
    let b = Sandbox::machine("machine-b");
    let c = Sandbox::machine("machine-c");
    let pool = a.home.join("pool.git");
    for m in [&a, &b, &c] {
        m.ok(&["init"]);
        link_private(m, &pool);
    }
    let id = add(&a, "testing", "Every bug fix lands with a regression test.");
    a.ok(&["sync"]);
    // Proposed on A: renders nowhere, not even on A.
    for m in [&a, &b, &c] {
        m.ok(&["sync"]);
        let active = m.ok(&["rule", "active"]);
        assert!(
            active.contains("nothing renders"),
            "{}: {active}",
            m.harness
        );
    }
    // B sees it (from the pool) as proposed; B's person approves it on B.
    let list = b.json(&["rule", "list", "--json"]);
    assert_eq!(list["rules"][0]["id"], id.as_str());
    assert_eq!(list["rules"][0]["status"], "proposed");
    b.ok(&["rule", "approve", &id, "--by", "Bea"]);
    b.ok(&["sync"]);
    for m in [&a, &c] {
        m.ok(&["sync"]);
    }
    assert!(b.ok(&["rule", "active"]).contains("regression test"));
    for m in [&a, &c] {
        let active = m.ok(&["rule", "active"]);
        assert!(
            active.contains("nothing renders"),
            "{}: {active}",
            m.harness
        );
        assert_eq!(
            m.json(&["rule", "view", &id, "--json"])["status"],
            "proposed"
        );
    }
    // C proposes the same words: one id, one file in the pool.
    assert_eq!(
        add(&c, "testing", "Every bug fix lands with a regression test."),
        id
    );
    c.ok(&["sync"]);
    let files = pool_files(&pool);
    assert_eq!(files.matches(&id).count(), 1, "{files}");
    // Approved on A too: A's and B's heads are byte-identical (a pure function of stored
    // inputs, not of which machine wrote the file or read the directory).
    a.ok(&["rule", "approve", &id, "--by", "Ada"]);
    let na = a.ok(&["notice", "--session", PARENT]);
    let nb = b.ok(&["notice", "--session", PARENT]);
    assert!(na.contains("regression test"), "{na}");
    assert_eq!(na, nb);
    assert!(
        c.ok(&["rule", "active"]).contains("nothing renders"),
        "C's own proposal still governs nothing on C"
    );
}

#[test]
fn an_overflowing_core_set_refuses_with_numbers_on_every_door() {
    let sb = Sandbox::new();
    let pool = sb.home.join("pool.git");
    sb.ok(&["init"]);
    link_private(&sb, &pool);
    for i in 0..8 {
        let text = format!(
            "Rule {i}: {}",
            "always check the widget invariants carefully. ".repeat(20)
        );
        let id = add(&sb, "widgets", &text);
        sb.ok(&["rule", "approve", &id, "--by", "Ana"]);
    }
    let (code, out, err) = fails(&sb, &["rule", "active"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        err.contains("rules block refused") && err.contains("coreRulesBudgetTokens is 1200"),
        "{err}"
    );
    assert!(out.contains("nothing renders"), "{out}");
    let out = sb.run(&["notice", "--session", PARENT]);
    assert!(out.status.success(), "the notice is non-blocking");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains("## Rules") && !stdout.contains("Rule 0"),
        "{stdout}"
    );
    assert!(stdout.contains("## Finding things"));
    assert!(
        stderr.contains("rules block refused") && stderr.contains("per rule: r-"),
        "{stderr}"
    );
}

#[test]
fn conflicts_without_a_model_route_refuses_and_says_so() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let (code, _, err) = fails(&sb, &["rule", "conflicts"]);
    assert_eq!(code, 1);
    assert!(err.contains("no model route is configured"), "{err}");
}

/// No code path approves, pins or revokes for a person: only `cli/rule.rs` (the human door,
/// behind a mandatory `--by`) constructs a user-authored rule fact.
#[test]
fn only_the_human_door_writes_a_persons_rule_decision() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offenders = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            // Source files only (`src/demo/` holds the demo's recorded log).
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            // `curation/` builds facts, among them `Fact::revert_seen_in_pool`: the record
            // of a person's `git revert` in the pool (a person's act through git's door).
            if rel == "cli/rule.rs" || rel.starts_with("curation/") {
                continue;
            }
            // `topic merge` is the human door for a topic-alias: a person's act too, but it
            // may build no rule fact.
            let needles: &[&str] = if rel == "cli/topic.rs" {
                &["FactKind::RuleStatus", "FactKind::RulePin"]
            } else {
                &["Author::User", "FactKind::RuleStatus", "FactKind::RulePin"]
            };
            let text = std::fs::read_to_string(&path).expect("read");
            // Test modules may build facts to test the fold; production code above them may not.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for needle in needles {
                if code.contains(needle) {
                    offenders.push(format!("{rel}: {needle}"));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:?}");
}

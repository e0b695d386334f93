//! `chapters init` + `archive` + `status`, end to end through the binary.

use dsh_chapters::testkit::writer::{
    LogWriter, SessionScript, TurnSpec, AGENT_INSTRUCTIONS_TEXT, SKILL_CATALOG_TEXT,
};

use crate::support::{bash, read, text_of, two_task_turns, Sandbox, START_MS};

const S1: &str = "session-11111111-1111-4111-8111-111111111111";
const S2: &str = "session-22222222-2222-4222-8222-222222222222";

#[test]
fn archive_writes_chapters_then_nothing_new_then_appends_after() {
    let sb = Sandbox::new();
    let turns = two_task_turns(&sb.ws);
    let log = sb.write_session(S1, 4, true, &turns);
    sb.ok(&["init"]);
    let gitignore = std::fs::read_to_string(sb.ws.join(".gitignore")).expect("ignore hint");
    assert!(gitignore.contains(".dsh-chapters/") && gitignore.contains(".dsh-knowledge/"));

    let report = sb.json(&["archive", "--json"]);
    let s = &report["sessions"][0];
    assert_eq!(s["sessionId"], S1);
    assert_eq!(s["turnsSigned"], 5);
    assert_eq!(s["turnsArchived"], 5);
    let chapters: Vec<String> = s["chapters"]
        .as_array()
        .expect("chapters")
        .iter()
        .map(|c| c.as_str().expect("name").to_owned())
        .collect();
    assert_eq!(chapters.len(), 2, "two tasks → two chapters: {chapters:?}");
    assert!(
        chapters[0].starts_with("001-") && chapters[1].starts_with("002-"),
        "{chapters:?}"
    );

    let first = sb.snapshot();
    let collection =
        String::from_utf8(first[&format!("{S1}/collections/{S1}.jsonl")].clone()).expect("utf8");
    assert_eq!(
        collection.lines().count(),
        5,
        "one collection line per completed turn"
    );
    for line in collection.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json line");
        for key in [
            "seqs",
            "paths",
            "commands",
            "terms",
            "size",
            "by",
            "at",
            "turn",
            "sessionId",
        ] {
            assert!(v.get(key).is_some(), "collection line lacks {key}: {line}");
        }
        assert_eq!(v["by"], "deterministic");
    }

    // Run twice: nothing new, not one byte changed.
    let again = sb.json(&["archive", "--json"]);
    assert_eq!(again["sessions"][0]["turnsSigned"], 0);
    assert_eq!(
        again["sessions"][0]["chapters"].as_array().map(Vec::len),
        Some(0)
    );
    assert_eq!(sb.snapshot(), first);

    // More turns: new chapters after the old ones; the old ones untouched.
    let mut w = LogWriter::open_append(&log, true).expect("append");
    let mut script = SessionScript::starting_at(4, last_seq(&sb) + 1, 6, START_MS + 1_000_000);
    let mut t = TurnSpec::new(
        "Write the release notes for the deploy script",
        "Release notes written.",
    );
    t.tool_calls = vec![read(&sb.ws, "docs/RELEASE.md", "# Release\n")];
    w.append_turn(&mut script, &t).expect("append turn");
    let third = sb.json(&["archive", "--json"]);
    let new: Vec<&str> = third["sessions"][0]["chapters"]
        .as_array()
        .expect("chapters")
        .iter()
        .map(|c| c.as_str().expect("name"))
        .collect();
    assert_eq!(new.len(), 1);
    assert!(new[0].starts_with("003-"), "{new:?}");
    let after = sb.snapshot();
    for (path, bytes) in &first {
        if path.ends_with(".jsonl") {
            assert!(
                after[path].starts_with(bytes),
                "{path}: a ledger only grows by appending"
            );
        } else {
            assert_eq!(&after[path], bytes, "{path} was rewritten");
        }
    }
}

fn last_seq(sb: &Sandbox) -> u64 {
    let c = std::fs::read_to_string(
        sb.store()
            .join(S1)
            .join("collections")
            .join(format!("{S1}.jsonl")),
    )
    .expect("ledger");
    let last = c.lines().last().expect("a line");
    let v: serde_json::Value = serde_json::from_str(last).expect("json");
    v["seqs"]
        .as_array()
        .and_then(|a| a.last())
        .and_then(|x| x.as_u64())
        .expect("seq")
}

#[test]
fn chapters_have_contract_frontmatter_and_cover_the_span() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let snap = sb.snapshot();
    let mut ranges = Vec::new();
    for (path, bytes) in snap.iter().filter(|(p, _)| p.contains("/chapters/")) {
        let text = String::from_utf8(bytes.clone()).expect("utf8");
        let fm = dsh_chapters::render::parse_frontmatter(&text).expect("frontmatter parses");
        assert_eq!(fm.kind, "chapter", "{path}");
        for key in [
            "title:",
            "summary:",
            "kind:",
            "projectKey:",
            "harnessId: test-machine",
            "sessionId:",
            "rootSessionId:",
            "seqRange:",
            "date: \"2025-11-29T",
            "messages:",
            "tokens:",
            "topics:",
            "artifacts:",
            "sha256:",
            "generated:",
        ] {
            assert!(text.contains(key), "{path} lacks `{key}`");
        }
        let body = dsh_chapters::render::body_text(&text).expect("body");
        let sha = dsh_chapters::names::sha256_hex(body.as_bytes());
        assert!(
            text.contains(&format!("\nsha256: {sha}\n"))
                || text.contains(&format!("\nsha256: \"{sha}\"\n")),
            "{path}: sha256 is not the body's"
        );
        ranges.push(fm.seq_range);
    }
    ranges.sort();
    assert_eq!(
        ranges[0].0, 0,
        "the first chapter starts at the log's first event"
    );
    for w in ranges.windows(2) {
        assert_eq!(w[0].1 + 1, w[1].0, "chapters tile the session: {ranges:?}");
    }
}

#[test]
fn secrets_never_reach_the_store_and_injections_are_screened() {
    let sb = Sandbox::new();
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let gh = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAAAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAIG\n-----END OPENSSH PRIVATE KEY-----";
    let mut t = TurnSpec::new(
        &format!("Deploy with {aws} and token {gh}"),
        &format!("Used the key {aws}."),
    );
    t.tool_calls = vec![
        bash(
            &sb.ws,
            &format!("GITHUB_TOKEN={gh} ./deploy.sh"),
            &format!("key file:\n{pem}\ndone\n"),
        ),
        read(
            &sb.ws,
            "postgres.env",
            "DATABASE_URL=postgres://app:hunter2hunter2@db.internal:5432/app\n",
        ),
    ];
    t.plan = Some(format!("# Rotate\n1. Revoke {gh}\n"));
    sb.write_session(S1, 4, true, &[t]);
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json"]);
    let redactions: u64 = report["sessions"][0]["redactions"]
        .as_object()
        .expect("counts")
        .values()
        .filter_map(|v| v.as_u64())
        .sum();
    assert!(redactions >= 5, "redaction counts reported: {report}");
    let all = text_of(&sb.snapshot());
    for secret in [
        aws,
        gh,
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
        "hunter2hunter2",
    ] {
        assert!(!all.contains(secret), "{secret} reached the store");
    }
    assert!(all.contains("⟦redacted:credential sha256="));
    assert!(
        !all.contains(AGENT_INSTRUCTIONS_TEXT.lines().nth(2).expect("a line")),
        "instructions leaked"
    );
    assert!(
        !all.contains("review: review a diff"),
        "skill catalog leaked: {SKILL_CATALOG_TEXT}"
    );
    assert_eq!(
        report["sessions"][0]["omittedInjections"], 2,
        "instructions + skill catalog, each a marker"
    );
    assert!(all.contains("⟦omitted: host-injected agent-instructions"));
    let plans = report["sessions"][0]["plans"].as_array().expect("plans");
    assert_eq!(plans.len(), 1);
    assert!(plans[0].as_str().expect("name").starts_with("plan-001-"));
    // Nothing about the secrets in the CLI's own output either.
    let out = sb.run(&["status", "--json"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains(aws));
}

#[test]
fn big_tool_results_become_one_artifact() {
    let sb = Sandbox::new();
    let big: String = (0..4000)
        .map(|i| format!("line {i:05} of a long build log\n"))
        .collect();
    let mut t1 = TurnSpec::new("Run the full build for the widgets", "Built.");
    t1.tool_calls = vec![bash(&sb.ws, "cargo build --workspace", &big)];
    let mut t2 = TurnSpec::new("Run the full build for the widgets again", "Built again.");
    t2.tool_calls = vec![bash(&sb.ws, "cargo build --workspace", &big)];
    sb.write_session(S1, 3, true, &[t1, t2]);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let snap = sb.snapshot();
    let artifacts: Vec<_> = snap
        .iter()
        .filter(|(p, _)| p.contains("/artifacts/"))
        .collect();
    assert_eq!(
        artifacts.len(),
        1,
        "same content stored once: {:?}",
        snap.keys().collect::<Vec<_>>()
    );
    let (path, bytes) = artifacts[0];
    assert_eq!(bytes, big.as_bytes(), "artifact is the result verbatim");
    let sha = dsh_chapters::names::sha256_hex(bytes);
    assert!(
        path.ends_with(&format!("artifacts/{}/{sha}.txt", &sha[..2])),
        "{path}"
    );
    let chapters = text_of(
        &snap
            .into_iter()
            .filter(|(p, _)| p.contains("/chapters/"))
            .collect(),
    );
    assert!(
        chapters.contains(&sha),
        "the chapter references the artifact"
    );
    assert!(
        !chapters.contains("line 02000 of a long build log"),
        "the big result is not inlined"
    );
}

#[test]
fn every_generation_compressed_and_plain_archives_the_same_chapters() {
    let mut bodies = Vec::new();
    for version in 0..=4u32 {
        for compressed in [true, false] {
            let sb = Sandbox::new();
            let mut turns = two_task_turns(&sb.ws);
            if version <= 1 {
                turns[0].packed_chunks = true;
            }
            sb.write_session(S1, version, compressed, &turns);
            // An older generation beside it must be ignored: the highest one is read.
            if version > 0 {
                sb.write_session(S1, version - 1, compressed, &turns[..1]);
            }
            sb.ok(&["init"]);
            let report = sb.json(&["archive", "--json"]);
            assert_eq!(
                report["sessions"][0]["generation"], version,
                "v{version} compressed={compressed}"
            );
            assert_eq!(
                report["sessions"][0]["turnsArchived"], 5,
                "v{version} compressed={compressed}"
            );
            let titles: Vec<String> = sb
                .chapter_files()
                .iter()
                .map(|p| p.rsplit('/').next().expect("name").to_owned())
                .collect();
            bodies.push((version, compressed, titles));
        }
    }
    let first = &bodies[0].2;
    for (v, c, titles) in &bodies {
        if *v >= 2 {
            assert_eq!(titles, first, "v{v} compressed={c} composes differently");
        }
    }
}

#[test]
fn same_input_gives_byte_identical_chapters() {
    let sb = Sandbox::new();
    let mut turns = two_task_turns(&sb.ws);
    turns.extend(dsh_chapters::testkit::writer::generate_session(
        3,
        40,
        3_000,
        4,
        &sb.ws_str(),
    ));
    sb.write_session(S1, 4, true, &turns);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let docs = |sb: &Sandbox| -> Vec<(String, Vec<u8>)> {
        sb.snapshot()
            .into_iter()
            .filter(|(p, _)| p.contains("/chapters/") || p.contains("/artifacts/"))
            .collect()
    };
    let first = docs(&sb);
    assert!(first.len() > 3);
    sb.fresh_store();
    sb.ok(&["archive"]);
    assert_eq!(docs(&sb), first, "a second run over the same input differs");
}

#[test]
fn in_flight_turn_waits_and_is_archived_once_complete() {
    let sb = Sandbox::new();
    let mut turns = two_task_turns(&sb.ws);
    let mut open = TurnSpec::new("Now refactor the csv exporter tests", "");
    open.end_reason = None;
    turns.push(open);
    let log = sb.write_session(S1, 4, true, &turns);
    sb.ok(&["init"]);
    let r = sb.json(&["archive", "--json"]);
    assert_eq!(r["sessions"][0]["turnsSigned"], 5);
    assert!(
        r["sessions"][0]["inFlight"].is_array(),
        "in-flight turn reported: {r}"
    );
    let status = sb.json(&["status", "--json"]);
    assert_eq!(status["pendingTurns"], 0);
    assert!(status["sessions"][0]["inFlight"].is_array());

    // The turn ends: its turn/end arrives in a later frame.
    let next_seq = r["sessions"][0]["inFlight"][1].as_u64().expect("hi") + 1;
    let mut w = LogWriter::open_append(&log, true).expect("append");
    w.append_batch(&[serde_json::json!({"type":"turn/end","seq":next_seq,"time":START_MS + 99_000,"data":{"turn":6,"reason":{"kind":"completed"}}})])
        .expect("turn/end");
    let status = sb.json(&["status", "--json"]);
    assert_eq!(status["pendingTurns"], 1);
    let r = sb.json(&["archive", "--json"]);
    assert_eq!(r["sessions"][0]["turnsSigned"], 1);
    assert_eq!(r["sessions"][0]["turnsArchived"], 1);
    assert!(r["sessions"][0]["inFlight"].is_null());
}

#[test]
fn a_fork_archives_under_its_root_session_without_the_seeded_prefix() {
    let sb = Sandbox::new();
    let parent_turns = two_task_turns(&sb.ws);
    sb.write_session(S1, 4, true, &parent_turns[..3]);
    // The child is seeded with the parent's first 3 turns, then works on its own.
    let seed_len = {
        let mut script = SessionScript::new(4, START_MS);
        for t in &parent_turns[..3] {
            script.turn_events(t);
        }
        script.next_seq()
    };
    let mut child_turns = parent_turns[..3].to_vec();
    child_turns.extend(parent_turns[3..].iter().cloned());
    sb.write_session_with(S2, 4, true, &child_turns, |h| {
        h.parent_session = Some(S1.to_owned());
        h.is_seeded = true;
        h.seed_length = Some(seed_len);
    });
    sb.ok(&["init"]);
    let r = sb.json(&["archive", "--json"]);
    let child = r["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["sessionId"] == S2)
        .expect("child");
    assert_eq!(child["rootSessionId"], S1);
    assert_eq!(
        child["turnsArchived"], 2,
        "only the child's own turns: {child}"
    );
    let snap = sb.snapshot();
    assert!(snap
        .keys()
        .any(|k| k.starts_with(&format!("{S1}/collections/{S2}.jsonl"))));
    // Status agrees: nothing waits, the seeded prefix is the parent's, not the fork's.
    let st = sb.json(&["status", "--json"]);
    assert_eq!(st["pendingTurns"], 0, "{st}");
    assert!(
        !snap.keys().any(|k| k.starts_with(&format!("{S2}/"))),
        "no separate tree for the fork"
    );
    // Chapter numbers are shared within the tree and never collide.
    let names: Vec<String> = sb.chapter_files();
    let mut numbers: Vec<&str> = names
        .iter()
        .map(|n| &n.rsplit('/').next().expect("name")[..3])
        .collect();
    numbers.sort();
    let before = numbers.len();
    numbers.dedup();
    assert_eq!(before, numbers.len(), "{names:?}");
}

#[test]
fn session_filter_and_unknown_session() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));
    sb.write_session(S2, 4, true, &two_task_turns(&sb.ws)[..2]);
    sb.ok(&["init"]);
    let r = sb.json(&["archive", "--session", S2, "--json"]);
    assert_eq!(r["sessions"].as_array().map(Vec::len), Some(1));
    assert_eq!(r["sessions"][0]["sessionId"], S2);
    let out = sb.run(&["archive", "--session", "session-nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("session-nope"));
}

#[test]
fn status_shows_identity_and_counts() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));
    let before = sb.json(&["status", "--json"]);
    assert_eq!(before["enabled"], false);
    assert_eq!(before["pendingTurns"], 5);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let s = sb.json(&["status", "--json"]);
    assert_eq!(s["identity"]["projectKeySource"], "remote");
    assert_eq!(s["identity"]["canonical"], "github.com/example/widgets");
    assert!(s["identity"]["origin"]
        .as_str()
        .expect("origin")
        .contains(".git/config"));
    assert_eq!(
        s["identity"]["projectKey"],
        dsh_chapters::identity::uuid_v5(
            &dsh_chapters::identity::PROJECT_NAMESPACE,
            b"github.com/example/widgets"
        )
    );
    assert_eq!(s["harnessId"], "test-machine");
    assert_eq!(s["mode"], "local-only");
    assert_eq!(s["store"]["chapters"], 2);
    assert_eq!(s["store"]["collectionLines"], 5);
    assert_eq!(s["pendingTurns"], 0);
    let text = sb.ok(&["status"]);
    assert!(text.contains("remote"), "{text}");
}

#[test]
fn archive_needs_init_and_usage_errors_exit_2() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));
    let out = sb.run(&["archive"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("chapters init"));
    assert_eq!(
        sb.run(&["archive", "--reason", "sometimes"]).status.code(),
        Some(2)
    );
    assert_eq!(sb.run(&["no-such-command"]).status.code(), Some(2));
}

#[test]
fn two_archivers_at_once_never_interleave() {
    let sb = Sandbox::new();
    let turns: Vec<TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(7, 120, 4_000, 4, &sb.ws_str()).collect();
    sb.write_session(S1, 4, true, &turns);
    sb.ok(&["init"]);
    let a = sb
        .cmd(&["archive", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("a");
    let b = sb
        .cmd(&["archive", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("b");
    let (a, b) = (
        a.wait_with_output().expect("a"),
        b.wait_with_output().expect("b"),
    );
    assert!(a.status.success() && b.status.success(), "{a:?} {b:?}");
    let ja: serde_json::Value = serde_json::from_slice(&a.stdout).expect("json a");
    let jb: serde_json::Value = serde_json::from_slice(&b.stdout).expect("json b");
    let signed = ja["sessions"][0]["turnsSigned"].as_u64().unwrap_or(0)
        + jb["sessions"][0]["turnsSigned"].as_u64().unwrap_or(0);
    let completed = turns.iter().filter(|t| t.end_reason.is_some()).count() as u64;
    assert_eq!(
        signed, completed,
        "each turn signed exactly once across both runs"
    );
    let ledger = std::fs::read_to_string(
        sb.store()
            .join(S1)
            .join("collections")
            .join(format!("{S1}.jsonl")),
    )
    .expect("ledger");
    assert_eq!(ledger.lines().count() as u64, completed);
    let reference = Sandbox::new();
    let turns2: Vec<TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(7, 120, 4_000, 4, &reference.ws_str())
            .collect();
    reference.write_session(S1, 4, true, &turns2);
    reference.ok(&["init"]);
    reference.ok(&["archive"]);
    assert_eq!(
        sb.chapter_files(),
        reference.chapter_files(),
        "racing archivers compose as one run does"
    );
}

#[test]
fn identity_sources_override_and_path_derived_are_shown() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::write(
        sb.store().join("config.yml"),
        "# pinned for the monorepo\nprojectKeyOverride: 11111111-2222-5333-8444-555555555555\n",
    )
    .expect("config");
    let s = sb.json(&["status", "--json"]);
    assert_eq!(s["identity"]["projectKeySource"], "override");
    assert_eq!(
        s["identity"]["projectKey"],
        "11111111-2222-5333-8444-555555555555"
    );
    let origin = s["identity"]["origin"].as_str().expect("origin");
    assert!(
        origin.contains("config.yml") && origin.contains(":2"),
        "{origin}"
    );

    let bare = Sandbox::new();
    std::fs::remove_dir_all(bare.ws.join(".git")).expect("no git");
    let s = bare.json(&["status", "--json"]);
    assert_eq!(s["identity"]["projectKeySource"], "path-derived");
    assert!(bare.ok(&["status"]).contains("warning: path-derived"));
    // A bad config value is refused by name, file and line.
    std::fs::create_dir_all(bare.store()).expect("store");
    std::fs::write(
        bare.store().join("config.yml"),
        "mergeThreshold: 0.3\nchapterLimt: 10\n",
    )
    .expect("config");
    let out = bare.run(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("chapterLimt") && err.contains("config.yml") && err.contains('2'),
        "{err}"
    );
}

/// The README's first command: `chapters demo` builds a session, archives it, shows the store
/// and finds a chapter again.
/// Every chapter file under `dir`: (file name, text).
fn walk_md(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.parent().is_some_and(|p| p.ends_with("chapters"))
                && path.extension().is_some_and(|e| e == "md")
            {
                let name = entry.file_name().to_string_lossy().into_owned();
                out.push((name, std::fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// `chapters demo --dir DIR`, with no `DSH_HOME` from the test's environment.
fn run_demo(dir: &std::path::Path) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_chapters"))
        .args(["demo", "--dir"])
        .arg(dir)
        .env_remove("DSH_HOME")
        .output()
        .unwrap()
}

#[test]
fn the_demo_refuses_a_directory_its_recorded_log_cannot_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("de\"mo");
    let out = run_demo(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("give --dir a plainer one"), "{err}");
    assert!(!dir.join("widgets").exists(), "nothing written");
}

#[test]
fn the_demo_archives_its_sample_and_finds_it_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let out = run_demo(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One task, one chapter: the refresh-token work's second turn printed a 48 KB log, which
    // is an artifact and counts as its reference line, so it stays with its task (#18).
    assert!(
        text.contains("5 archived into 3 chapter(s), 1 plan(s)"),
        "{text}"
    );
    let chapters = walk_md(&dir);
    let first = chapters
        .iter()
        .find(|(name, _)| name.starts_with("001-the-refresh-token-middleware"))
        .unwrap_or_else(|| panic!("no 001 chapter in {chapters:?}"));
    assert!(first.1.contains("\nturns: [0, 1]\n"), "{}", first.1);
    assert!(text.contains("3 credential(s) redacted"), "{text}");
    let found = text
        .split("chapters search \"refresh token expiry\"")
        .nth(1)
        .unwrap_or_default();
    assert!(found.contains("001-the-refresh-token-middleware"), "{text}");
    // A second run into the same directory refuses rather than mixing two demos.
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_chapters"))
        .args(["demo", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
}

/// A session longer than one signing batch (256 turns) in today's real v4 shape: every
/// completed turn is signed exactly once, in order, the turns tile the log, and the chapters
/// cover every turn; a second archive signs nothing.
#[test]
fn a_long_real_shaped_session_is_signed_in_batches_exactly_once() {
    use dsh_chapters::testkit::realshape::{self, RealShapeScript};
    let sb = Sandbox::new();
    let log = sb.log_path(S1, 4, true);
    std::fs::create_dir_all(log.parent().expect("session dir")).expect("mkdir");
    let header = RealShapeScript::new(4, START_MS).header(S1, &sb.ws_str());
    let turns = 600;
    realshape::write_session(&log, &header, turns, 1_500, 400, 7).expect("write log");
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json"]);
    let s = &report["sessions"][0];
    assert_eq!(s["turnsSigned"], turns, "{s}");
    assert_eq!(s["turnsArchived"], turns, "{s}");
    let text = std::fs::read_to_string(
        sb.store()
            .join(S1)
            .join("collections")
            .join(format!("{S1}.jsonl")),
    )
    .expect("collection");
    let mut next = 0;
    for line in text.lines() {
        let sig: serde_json::Value = serde_json::from_str(line).expect("json line");
        let seqs: Vec<u64> = sig["seqs"]
            .as_array()
            .expect("seqs")
            .iter()
            .map(|n| n.as_u64().expect("seq"))
            .collect();
        assert_eq!(
            seqs.first().copied(),
            Some(next),
            "turns tile the log: {line}"
        );
        next = seqs.last().expect("a seq") + 1;
    }
    assert_eq!(text.lines().count(), turns, "one line per turn");
    let again = sb.json(&["archive", "--json"]);
    assert_eq!(again["sessions"][0]["turnsSigned"], 0, "{again}");
    assert_eq!(again["sessions"][0]["turnsArchived"], 0, "{again}");
}

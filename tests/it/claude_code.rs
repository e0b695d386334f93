//! Claude Code transcripts (real public ones, `fixtures/claude-code/`, README there) archived
//! through the harness seam, end to end through the binary, beside a DSH session.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use dsh_chapters::session::reader::{LogItem, ReaderOptions, ResumePoint};
use dsh_chapters::source::{self, Harness, SourceOptions};
use dsh_chapters::turn::{CompletedTurn, TurnAssembler};

use crate::support::{two_task_turns, Sandbox};

const FIXTURES: &[&str] = &[
    "v2.1.38-short.jsonl",
    "v2.1.38-tool-heavy.jsonl",
    "v2.1.38-subagent.jsonl",
    "v2.1.39-compaction.jsonl",
    "v2.1.39-subagent.jsonl",
];

/// Host text that must never reach a chapter.
const SCREENED: &[&str] = &[
    "<system-reminder>",
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-caveat>",
    "<task-notification>",
    "Caveat: The messages below were generated",
    "This session is being continued from a previous conversation",
];

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/claude-code")
}

/// The session id (file stem) a fixture's lines carry.
fn session_id_of(text: &str) -> String {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v["sessionId"].as_str().map(str::to_owned))
        .expect("a sessionId")
}

/// Install `name` as a transcript of `sb`'s workspace (its `cwd` fields pointed there),
/// quiet for a day. Returns the transcript's path and session id.
pub fn install(sb: &Sandbox, name: &str) -> (PathBuf, String) {
    let text = std::fs::read_to_string(fixture_dir().join(name)).expect("fixture");
    let ws = sb.ws_str();
    let mut out = String::new();
    for l in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(l).expect("fixture lines are JSON");
        if v.get("cwd").is_some_and(|c| c.is_string()) {
            v["cwd"] = ws.clone().into();
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    let (path, sid) = write_transcript(sb, &ws, &out);
    let dir = path.parent().expect("a project folder").to_path_buf();
    let stub = fixture_dir().join(name.trim_end_matches(".jsonl"));
    if stub.is_dir() {
        // Its subagent transcripts, where Claude Code keeps them: never sessions.
        let sub = dir.join(&sid).join("subagents");
        std::fs::create_dir_all(&sub).expect("subagents dir");
        for e in std::fs::read_dir(stub.join("subagents")).expect("subagents") {
            let e = e.expect("entry");
            std::fs::copy(e.path(), sub.join(e.file_name())).expect("copy");
        }
    }
    quiet_for_a_day(&path);
    (path, sid)
}

/// Write `text` as a transcript where Claude Code keeps one whose session ran in `cwd` (the
/// sandbox's `projects/<cwd's folder key>/<sessionId>.jsonl`). Returns its path and id.
pub fn write_transcript(sb: &Sandbox, cwd: &str, text: &str) -> (PathBuf, String) {
    let sid = session_id_of(text);
    let key: String = cwd
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = sb.home.join("claude/projects").join(key);
    std::fs::create_dir_all(&dir).expect("project dir");
    let path = dir.join(format!("{sid}.jsonl"));
    std::fs::write(&path, text).expect("transcript");
    (path, sid)
}

/// Set `path`'s mtime a day back: quiet past `idleArchiveMs`.
pub fn quiet_for_a_day(path: &Path) {
    let day_ago = SystemTime::now() - Duration::from_secs(86_400);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(day_ago))
        .expect("mtime");
}

/// Every completed turn of a log, read through the seam as the archive reads it.
pub fn turns_of(harness: Harness, path: &Path) -> Vec<CompletedTurn> {
    let options = SourceOptions {
        reader: ReaderOptions::default(),
        quiet_after_ms: Some(600_000),
    };
    let mut reader = source::open(harness, path, ResumePoint::default(), options).expect("open");
    let mut asm = TurnAssembler::new();
    let mut turns = Vec::new();
    while let Some(item) = reader.next_item().expect("no damage in a fixture") {
        if let LogItem::Event(e) = item {
            turns.extend(asm.push(e));
        }
    }
    turns
}

#[test]
fn claude_code_fixtures_archive_beside_dsh_with_their_harness_and_no_host_text() {
    let sb = Sandbox::new();
    sb.write_session(
        "session-11111111-1111-4111-8111-111111111111",
        4,
        true,
        &two_task_turns(&sb.ws),
    );
    let installed: Vec<(PathBuf, String)> = FIXTURES.iter().map(|f| install(&sb, f)).collect();
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json"]);
    assert_eq!(
        report["failures"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    let sessions = report["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1 + FIXTURES.len());
    assert!(sessions
        .iter()
        .any(|s| s["sessionId"] == "session-11111111-1111-4111-8111-111111111111"));
    for (path, sid) in &installed {
        let id = format!("claude-code-{sid}");
        let s = sessions
            .iter()
            .find(|s| s["sessionId"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} archived: {report}"));
        // Every completed turn is covered once: signed once, archived once.
        let completed = turns_of(Harness::ClaudeCode, path);
        assert!(!completed.is_empty(), "{id} has completed turns");
        assert_eq!(s["turnsSigned"], completed.len() as u64, "{id}");
        assert_eq!(s["turnsArchived"], completed.len() as u64, "{id}");
        every_call_has_its_result(&id, &completed);
    }
    let files = sb.snapshot();
    let mut claude_chapters = 0;
    for (name, bytes) in &files {
        if !name.contains("/chapters/") {
            continue;
        }
        let text = String::from_utf8_lossy(bytes);
        for s in SCREENED {
            assert!(!text.contains(s), "{name} holds host text {s:?}");
        }
        if name.starts_with("claude-code-") {
            claude_chapters += 1;
            assert!(text.contains("\nharness: claude-code\n"), "{name}");
            assert!(text.contains("\nharnessVersion: \"2.1.3"), "{name}");
        } else {
            assert!(
                !text.contains("\nharness:"),
                "a DSH chapter is as before: {name}"
            );
        }
    }
    assert!(claude_chapters >= FIXTURES.len());
    // Subagent transcripts are not sessions of their own.
    assert!(!files.keys().any(|k| k.contains("agent-")));

    // Nothing new the second time.
    let again = sb.json(&["archive", "--json"]);
    for s in again["sessions"].as_array().expect("sessions") {
        assert_eq!(s["turnsSigned"], 0, "{s}");
        assert_eq!(s["chapters"].as_array().map(Vec::len), Some(0), "{s}");
    }
}

#[test]
fn a_claude_code_session_is_named_by_its_own_id_too_and_grows() {
    let sb = Sandbox::new();
    let (path, sid) = install(&sb, "v2.1.38-short.jsonl");
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json", "--session", &sid]);
    let s = &report["sessions"][0];
    assert_eq!(s["sessionId"], format!("claude-code-{sid}"));
    let first = s["turnsArchived"].as_u64().expect("count");
    assert!(first >= 1);
    // `status` lists it beside DSH's sessions, all archived.
    let status = sb.json(&["status", "--json"]);
    let listed = status["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|x| x["sessionId"] == format!("claude-code-{sid}"))
        .unwrap_or_else(|| panic!("listed: {status}"))
        .clone();
    assert_eq!(listed["completedTurns"], first);
    assert_eq!(listed["unarchivedTurns"], 0);
    // The person goes on: a new prompt and its answer are appended.
    let mut text = std::fs::read_to_string(&path).expect("read");
    let cwd = sb.ws_str();
    for (uuid, parent, kind, message) in [
        (
            "9a000000-0000-4000-8000-000000000001",
            None,
            "user",
            serde_json::json!({"role": "user", "content": "one more question"}),
        ),
        (
            "9a000000-0000-4000-8000-000000000002",
            Some("9a000000-0000-4000-8000-000000000001"),
            "assistant",
            serde_json::json!({"id": "msg_new", "role": "assistant", "content": [{"type": "text", "text": "one more answer"}], "stop_reason": "end_turn"}),
        ),
    ] {
        let line = serde_json::json!({
            "type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": sid, "cwd": cwd,
            "version": "2.1.40", "timestamp": "2026-02-13T10:00:00.000Z", "isSidechain": false,
            "message": message,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    std::fs::write(&path, text).expect("append");
    let report = sb.json(&[
        "archive",
        "--json",
        "--session",
        &format!("claude-code-{sid}"),
    ]);
    let s = &report["sessions"][0];
    assert_eq!(s["turnsArchived"], 1, "{report}");
    let chapter = &s["chapters"][0];
    let body = std::fs::read_to_string(
        sb.store()
            .join(format!("claude-code-{sid}/chapters"))
            .join(chapter.as_str().expect("name")),
    )
    .expect("chapter");
    assert!(body.contains("one more answer"));
    assert!(body.contains("\nharnessVersion: \"2.1.40\"\n"));
}

/// Every tool call of each turn has its result in the same turn.
pub fn every_call_has_its_result(session: &str, turns: &[CompletedTurn]) {
    for t in turns {
        let results: Vec<&str> = t
            .events
            .iter()
            .filter_map(|e| e.tool_result())
            .map(|r| r.call_id.as_str())
            .collect();
        for c in t.events.iter().filter_map(|e| e.tool_call()) {
            assert!(
                results.contains(&c.call_id.as_str()),
                "{session}: call {} of turn {} has no result",
                c.call_id,
                t.turn
            );
        }
    }
}

/// `claudeCodeSessions: false` leaves Claude Code's sessions alone: not archived, not listed;
/// turned back on (here by the environment layer), they are.
#[test]
fn a_harness_turned_off_by_config_is_not_read() {
    let sb = Sandbox::new();
    let (_, sid) = install(&sb, "v2.1.38-short.jsonl");
    sb.ok(&["init"]);
    std::fs::write(
        sb.ws.join(".dsh-chapters/config.yml"),
        "claudeCodeSessions: false\n",
    )
    .expect("workspace config");
    let named = format!("claude-code-{sid}");
    let report = sb.json(&["archive", "--json"]);
    assert!(
        !report.to_string().contains(&named),
        "turned off, yet archived: {report}"
    );
    let status = sb.json(&["status", "--json"]);
    assert!(!status.to_string().contains(&named), "{status}");
    assert!(sb.chapter_files().is_empty(), "{:?}", sb.chapter_files());

    let on = [("CHAPTERS_CLAUDE_CODE_SESSIONS", "true")];
    let report: serde_json::Value =
        serde_json::from_str(&sb.ok_with_env(&["archive", "--json"], &on)).expect("JSON");
    assert!(report.to_string().contains(&named), "{report}");
    assert!(!sb.chapter_files().is_empty());
}

/// Writes `lines` as one quiet transcript of session `sid` (each line stamped with the
/// session, the workspace, `version` and one time), archives, and gives the session's archive
/// report and its chapters' text, joined.
fn archive_transcript(
    sb: &Sandbox,
    sid: &str,
    version: &str,
    lines: Vec<serde_json::Value>,
) -> (serde_json::Value, String) {
    let cwd = sb.ws_str();
    let mut text = String::new();
    for mut l in lines {
        l["sessionId"] = sid.into();
        l["cwd"] = cwd.clone().into();
        l["version"] = version.into();
        l["timestamp"] = "2026-11-02T09:00:00.000Z".into();
        text.push_str(&l.to_string());
        text.push('\n');
    }
    let (path, _) = write_transcript(sb, &cwd, &text);
    quiet_for_a_day(&path);
    let report = sb.json(&["archive", "--json"]);
    let session = report["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|s| s["sessionId"] == format!("claude-code-{sid}"))
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    let dir = sb.store().join(format!("claude-code-{sid}/chapters"));
    let mut body = String::new();
    for name in session["chapters"].as_array().expect("chapters") {
        body.push_str(
            &std::fs::read_to_string(dir.join(name.as_str().expect("a name"))).expect("chapter"),
        );
    }
    (session, body)
}

/// Every signed path of a session's collection ledger.
fn signed_paths(sb: &Sandbox, session: &str) -> Vec<String> {
    let ledger = sb
        .store()
        .join(session)
        .join("collections")
        .join(format!("{session}.jsonl"));
    std::fs::read_to_string(ledger)
        .expect("the session's collection ledger")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .flat_map(|v| {
            v["paths"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p.as_str().map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn a_transcript_copied_from_another_machine_is_this_workspaces_through_path_map() {
    // A real transcript as it lies on its author's machine: its lines name that machine's
    // cwd and it sits in that cwd's project folder. Copied here, `pathMap` ties the two.
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let theirs = "/home/marco/projects/spotter";
    let text =
        std::fs::read_to_string(fixture_dir().join("v2.1.38-tool-heavy.jsonl")).expect("fixture");
    assert!(text.contains(&format!("\"cwd\":\"{theirs}\"")));
    let (path, sid) = write_transcript(&sb, theirs, &text);
    quiet_for_a_day(&path);
    let id = format!("claude-code-{sid}");

    // Without the map it is another workspace's.
    assert!(!sb.ok(&["status"]).contains(&id));
    std::fs::write(
        sb.store().join("config.yml"),
        format!("pathMap:\n  {theirs}: {}\n", sb.ws_str()),
    )
    .expect("config");
    assert!(sb.ok(&["status"]).contains(&id), "status lists it");
    let report = sb.json(&["archive", "--json"]);
    let sessions = report["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "{report}");
    assert_eq!(sessions[0]["sessionId"], id.as_str(), "{report}");
    assert!(
        sessions[0]["turnsArchived"].as_u64().unwrap_or(0) >= 1,
        "{report}"
    );
    // Its paths are the workspace's, relative, as if it had run here.
    let paths = signed_paths(&sb, &id);
    assert!(paths.iter().any(|p| p == "assets/js/app.js"), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains(theirs)), "{paths:?}");
}

#[test]
fn a_transcript_saved_with_a_byte_order_mark_archives_and_damage_names_claude_code() {
    // Copied through a Windows editor or PowerShell's `Out-File`: a UTF-8 byte order mark
    // opens the file and lines end in CRLF. Every turn archives.
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let (path, sid) = install(&sb, "v2.1.38-tool-heavy.jsonl");
    let text = std::fs::read_to_string(&path).expect("transcript");
    let lines: Vec<&str> = text.lines().collect();
    let windows = format!("\u{feff}{}\r\n", lines.join("\r\n"));
    std::fs::write(&path, windows).expect("rewrite");
    quiet_for_a_day(&path);
    let id = format!("claude-code-{sid}");
    let report = sb.json(&["archive", "--json"]);
    let session = &report["sessions"][0];
    assert_eq!(session["sessionId"], id.as_str(), "{report}");
    assert_eq!(session["turnsArchived"], 2, "{report}");
    assert!(session["damage"].is_null(), "{report}");

    // A garbled line in the middle is damage, and what to do names the harness writing it.
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let (path, _) = install(&sb, "v2.1.38-tool-heavy.jsonl");
    let text = std::fs::read_to_string(&path).expect("transcript");
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(lines.len() / 2, "{garbled");
    std::fs::write(&path, lines.join("\n") + "\n").expect("rewrite");
    quiet_for_a_day(&path);
    let out = sb.run(&["archive", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "damage fails the archive asked for"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the report");
    let damage = report["sessions"][0]["damage"]
        .as_str()
        .unwrap_or_else(|| panic!("damage: {report}"));
    assert!(
        damage.contains("If Claude Code is still writing this session"),
        "{damage}"
    );
}

/// Real shapes a VS Code user's transcript holds (Claude Code 2.1): the editor's open file and
/// selection as blocks before the typed words, and a prompt typed while the agent worked
/// (an `attachment` of type `queued_command`), archived through the CLI: the chapter is titled
/// and signed by the typed words, the editor's context is a marker and nowhere in the store,
/// the queued prompt is the person's.
#[test]
fn an_editors_context_is_screened_and_a_queued_prompt_is_the_persons_end_to_end() {
    // A secret the person typed into the queued prompt: redacted in the body, and no derived
    // byte (topics, file names, the catalog, the signatures) carries it or a piece of it.
    const SECRET: &str = "ghp_Qw3rTy7UiOp9AsDfGh1JkLzXcVbNm4Ql2Wx8";
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let cwd = sb.ws_str();
    let sid = "7c000000-0000-4000-8000-000000000001";
    let ide = "<ide_opened_file>The user opened the file src/billing/invoice.rs in the IDE. This may or may not be related to the current task.</ide_opened_file>";
    let selection = "<ide_selection>The user selected the lines 3 to 4 from src/billing/tax.rs:\nlet vat = 0.2;\n\nThis may or may not be related to the current task.</ide_selection>";
    let lines = [
        serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null, "message": {"role": "user", "content": [
            {"type": "text", "text": ide}, {"type": "text", "text": selection},
            {"type": "text", "text": "Round the invoice totals to cents"}]}}),
        serde_json::json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "Read", "input": {"file_path": format!("{cwd}/src/billing/invoice.rs")}}]}}),
        serde_json::json!({"type": "queue-operation", "operation": "enqueue", "content": "and keep the tax lines as they are"}),
        serde_json::json!({"type": "attachment", "uuid": "q1", "parentUuid": "a1", "attachment": {"type": "queued_command", "prompt": format!("and keep the tax lines as they are, the key is {SECRET}"), "commandMode": "prompt"}}),
        serde_json::json!({"type": "user", "uuid": "r1", "parentUuid": "q1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "fn total() -> f64 { 0.0 }"}]}}),
        serde_json::json!({"type": "assistant", "uuid": "a2", "parentUuid": "r1", "message": {"id": "m2", "role": "assistant", "stop_reason": "end_turn", "content": [
            {"type": "text", "text": "Totals round to cents now; tax lines unchanged."}]}}),
    ];
    let (s, body) = archive_transcript(&sb, sid, "2.1.220", lines.to_vec());
    assert_eq!(s["turnsArchived"], 1, "{s}");
    assert!(
        body.contains("\ntitle: \"Round the invoice totals to cents\"\n"),
        "{body}"
    );
    assert!(body.contains("host-injected ide-context"), "{body}");
    assert!(
        body.contains("**User** · ") && body.contains("and keep the tax lines as they are"),
        "{body}"
    );
    assert!(body.contains("⟦redacted:"), "{body}");
    for (file, bytes) in sb.snapshot() {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("may or may not be related") && !text.contains("let vat"),
            "the editor's context reached {file}"
        );
        let lower = text.to_lowercase();
        for piece in [SECRET, &SECRET[4..], "qw3rty7uiop9asdfgh1jklzxcvbnm4ql2wx8"] {
            assert!(
                !text.contains(piece) && !lower.contains(&piece.to_lowercase()),
                "the secret reached {file}"
            );
            assert!(
                !file.to_lowercase().contains(&piece.to_lowercase()),
                "{file}"
            );
        }
    }
}

/// Other agents' words in a lead's transcript (Claude Code 2.1.1xx–2.1.2xx shapes, from public
/// transcripts; ids and texts made up): a background agent's `<task-notification>` with its
/// `<result>`, a subagent's `<agent-message>` hand-back and a teammate's `<teammate-message>`
/// are conversation — in the chapter, labelled as another agent's — and never the person's
/// terms or title; a teammate's idle notices are plumbing, screened.
#[test]
fn other_agents_words_are_conversation_and_never_the_persons_terms_end_to_end() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let sid = "7c000000-0000-4000-8000-000000000002";
    let agent_done = "<task-notification>\n<task-id>a106ed7b5288e9506</task-id>\n<tool-use-id>toolu_01Mz</tool-use-id>\n<status>completed</status>\n<summary>Agent \"Fix the lexer\" finished</summary>\n<result>The quuxlexer handles tabs now.</result>\n</task-notification>";
    let hand_back = "<agent-message from=\"a80403d7fcf4619f1\">\n[Subagent hand-back] The report follows:\n  The zorbwidget audit found two stale caches.\n</agent-message>";
    let teammate = "<teammate-message teammate_id=\"qa\" color=\"blue\" summary=\"a race\">\nFound a flimflamrace in the lock file.\n</teammate-message>";
    let idle = "<teammate-message teammate_id=\"qa\" color=\"blue\">\n{\"type\":\"idle_notification\",\"from\":\"qa\",\"idleReason\":\"available\"}\n</teammate-message>";
    let user = |uuid: &str, parent: &str, text: &str| serde_json::json!({"type": "user", "uuid": uuid, "parentUuid": parent, "message": {"role": "user", "content": text}});
    let answer = |uuid: &str, parent: &str, id: &str, text: &str| serde_json::json!({"type": "assistant", "uuid": uuid, "parentUuid": parent, "message": {"id": id, "role": "assistant", "stop_reason": "end_turn", "content": [{"type": "text", "text": text}]}});
    let mut lines = vec![
        serde_json::json!({"type": "user", "uuid": "u1", "parentUuid": null, "message": {"role": "user", "content": "Split the parser rewrite between background agents"}}),
        serde_json::json!({"type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "c1", "name": "Agent", "input": {"description": "Fix the lexer", "prompt": "Fix the lexer's tab handling", "run_in_background": true}}]}}),
        serde_json::json!({"type": "user", "uuid": "r1", "parentUuid": "a1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "Async agent launched successfully."}]}}),
        answer("a2", "r1", "m2", "Two agents are on it."),
        user("n1", "a2", agent_done),
        answer("a3", "n1", "m3", "The lexer agent finished."),
        user("n2", "a3", hand_back),
        answer("a4", "n2", "m4", "Noted the audit."),
        user("n3", "a4", teammate),
        answer("a5", "n3", "m5", "I will look at the lock."),
        user("n4", "a5", idle),
        answer("a6", "n4", "m6", "QA is idle."),
    ];
    lines.push(user("u2", "a6", "Now rename the parser module"));
    lines.push(answer("a7", "u2", "m7", "Renamed."));
    let (s, body) = archive_transcript(&sb, sid, "2.1.288", lines);
    // Each answer that ends the agent's work ends a turn, the agents' words' turns too.
    assert_eq!(s["turnsArchived"], 6, "{s}");
    assert!(
        body.contains("\ntitle: \"Split the parser rewrite between background agents\"\n"),
        "{body}"
    );
    assert_eq!(
        body.matches("**Delegate report** (subagent-settled/notice)")
            .count(),
        2,
        "{body}"
    );
    assert!(body.contains("**Agent message** (team-message)"), "{body}");
    for word in ["quuxlexer", "zorbwidget", "flimflamrace"] {
        assert!(
            body.contains(word),
            "{word} missing from the chapter: {body}"
        );
    }
    assert!(!body.contains("idle_notification"), "{body}");
    let terms: Vec<String> = sb
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.contains("/collections/"))
        .flat_map(|(_, bytes)| {
            String::from_utf8_lossy(&bytes)
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .flat_map(|v| {
                    v["terms"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.as_str().map(str::to_owned))
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(terms.iter().any(|t| t.contains("parser")), "{terms:?}");
    for (file, bytes) in sb.snapshot() {
        if file.contains("/chapters/") && file.ends_with(".md") {
            let text = String::from_utf8_lossy(&bytes);
            let head = text.split("\n---\n").next().unwrap_or("");
            for word in ["quuxlexer", "zorbwidget", "flimflamrace", "lock"] {
                assert!(!head.contains(word), "{word} in the frontmatter of {file}");
            }
        }
    }
    for word in ["quuxlexer", "zorbwidget", "flimflamrace"] {
        assert!(
            !terms.iter().any(|t| t.contains(word)),
            "{word} in terms {terms:?}"
        );
    }
}

/// A slash command typed with words (a real 2.1.38 transcript: `/handgemacht:create-beads
/// websearch to learn how to fastest setup credo, dialyzer, mix_audit …`): the words are the
/// person's request — the chapter's title and terms — while the command's expanded prompt
/// (an `isMeta` line, the command author's text) stays screened.
#[test]
fn a_command_typed_with_words_titles_the_chapter_and_gives_its_terms() {
    let sb = Sandbox::new();
    let (_, sid) = install(&sb, "v2.1.38-subagent.jsonl");
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json", "--session", &sid]);
    let s = &report["sessions"][0];
    let first = s["chapters"][0].as_str().expect("a chapter");
    let text = std::fs::read_to_string(
        sb.store()
            .join(format!("claude-code-{sid}/chapters"))
            .join(first),
    )
    .expect("chapter");
    let head = text.split("\n---\n").next().expect("frontmatter");
    assert!(
        head.contains("title: \"/handgemacht:create-beads websearch to learn"),
        "{head}"
    );
    let topics = head
        .lines()
        .find(|l| l.starts_with("topics:"))
        .unwrap_or_default();
    assert!(
        [
            "credo",
            "dialyzer",
            "websearch",
            "claude-marketplace-elixir"
        ]
        .iter()
        .any(|w| topics.contains(w)),
        "the person's words give topics: {topics}"
    );
    assert!(
        !topics.contains("basically"),
        "filler is no topic: {topics}"
    );
    // The expanded prompt is the command author's, screened.
    assert!(!text.contains("This skill ONLY creates beads"), "{text}");
}

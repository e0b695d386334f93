//! Codex rollouts (real, sanitized by their publisher: `fixtures/codex/`, README there)
//! archived through the harness seam, one of them as `.jsonl.zst`.

use std::path::{Path, PathBuf};

use dsh_chapters::source::Harness;

use crate::claude_code::{every_call_has_its_result, quiet_for_a_day, turns_of};
use crate::support::Sandbox;

/// (file, installed compressed)
const FIXTURES: &[(&str, bool)] = &[
    (
        "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
        false,
    ),
    (
        "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
        true,
    ),
    (
        "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
        false,
    ),
];

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/codex")
}

/// Install a rollout under the sandbox's `CODEX_HOME`, its `cwd`s pointed at the workspace,
/// quiet for a day. Returns its path, its thread id and its developer messages' texts.
fn install(sb: &Sandbox, name: &str, compress: bool) -> (PathBuf, String, Vec<String>) {
    let text = std::fs::read_to_string(fixture_dir().join(name)).expect("fixture");
    let ws = sb.ws_str();
    let mut out = String::new();
    let mut id = String::new();
    let mut developer = Vec::new();
    for l in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(l).expect("fixture lines are JSON");
        if v["payload"]["cwd"].is_string() {
            v["payload"]["cwd"] = ws.clone().into();
        }
        if v["type"] == "session_meta" {
            id = v["payload"]["id"].as_str().expect("id").to_owned();
        }
        if v["payload"]["role"] == "developer" {
            for b in v["payload"]["content"].as_array().expect("content") {
                developer.extend(b["text"].as_str().map(str::to_owned));
            }
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    let dir = sb.home.join("codex/sessions/2026/02/23");
    std::fs::create_dir_all(&dir).expect("day dir");
    let path = if compress {
        let path = dir.join(format!("{name}.zst"));
        let packed = zstd::encode_all(out.as_bytes(), 3).expect("compress");
        std::fs::write(&path, packed).expect("rollout");
        path
    } else {
        let path = dir.join(name);
        std::fs::write(&path, out).expect("rollout");
        path
    };
    quiet_for_a_day(&path);
    (path, id, developer)
}

#[test]
fn codex_fixtures_plain_and_zst_archive_with_their_harness_and_no_host_text() {
    let sb = Sandbox::new();
    let installed: Vec<_> = FIXTURES.iter().map(|(f, z)| install(&sb, f, *z)).collect();
    // Another project's rollout in the same home is not this workspace's.
    let other = sb.home.join("codex/sessions/2026/02/24");
    std::fs::create_dir_all(&other).expect("dir");
    std::fs::write(
        other.join("rollout-2026-02-24T10-00-00-0199aaaa-0000-7000-8000-00000000000f.jsonl"),
        "{\"timestamp\":\"2026-02-24T10:00:00Z\",\"type\":\"session_meta\",\"payload\":{\"id\":\"0199aaaa-0000-7000-8000-00000000000f\",\"cwd\":\"/elsewhere\"}}\n",
    )
    .expect("other");
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json"]);
    assert_eq!(
        report["failures"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    let sessions = report["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), FIXTURES.len(), "{report}");
    let mut developer_texts = Vec::new();
    let mut archived_total = 0;
    for (path, id, developer) in &installed {
        developer_texts.extend(developer.iter().cloned());
        let sid = format!("codex-{id}");
        let s = sessions
            .iter()
            .find(|s| s["sessionId"] == sid.as_str())
            .unwrap_or_else(|| panic!("{sid}: {report}"));
        let completed = turns_of(Harness::Codex, path);
        assert_eq!(s["turnsSigned"], completed.len() as u64, "{sid}");
        assert_eq!(s["turnsArchived"], completed.len() as u64, "{sid}");
        archived_total += completed.len();
        every_call_has_its_result(&sid, &completed);
    }
    assert!(archived_total >= 2, "the two finished tasks");
    for (name, bytes) in sb.snapshot() {
        if !name.contains("/chapters/") {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("\nharness: codex\n"), "{name}");
        assert!(
            text.contains("\nharnessVersion: \"0.104.0-alpha.1\"\n"),
            "{name}"
        );
        for d in &developer_texts {
            assert!(
                !text.contains(d.as_str()),
                "{name} holds developer text {d}"
            );
        }
        assert!(!text.contains("[REDACTED_ENCRYPTED_CONTENT"), "{name}");
    }
    let again = sb.json(&["archive", "--json"]);
    for s in again["sessions"].as_array().expect("sessions") {
        assert_eq!(s["turnsSigned"], 0, "{s}");
    }
}

/// Issue #15 point 4: sessions of all three harnesses of one project, archived on one
/// machine, reach another through the project's pool under the same `projectKey`, each
/// chapter naming its harness and its session id namespaced by it, found there by harness.
#[test]
fn all_three_harnesses_share_one_project_and_pool_and_another_machine_finds_each_by_harness() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    a.write_session(
        "session-11111111-1111-4111-8111-111111111111",
        4,
        true,
        &crate::support::two_task_turns(&a.ws),
    );
    let (_, cc_sid) = crate::claude_code::install(&a, "v2.1.38-short.jsonl");
    let (name, compress) = FIXTURES[0];
    let (_, codex_id, _) = install(&a, name, compress);
    crate::support::link_private(&a, &pool);
    a.ok(&["archive"]);
    a.ok(&["sync"]);

    let b = Sandbox::machine("machine-b");
    crate::support::link_private(&b, &pool);
    b.ok(&["sync"]);
    let key_a = a.json(&["status", "--json"])["identity"]["projectKey"].clone();
    let key_b = b.json(&["status", "--json"])["identity"]["projectKey"].clone();
    assert!(key_a.is_string(), "{key_a}");
    assert_eq!(key_a, key_b, "one project on both machines");

    let all = b.json(&["list", "--json"]);
    let docs = all["documents"]
        .as_array()
        .or(all["matches"].as_array())
        .expect("listed");
    for (harness, id) in [
        ("dsh", "11111111-1111-4111-8111-111111111111".to_owned()),
        ("claude-code", cc_sid.clone()),
        ("codex", codex_id.clone()),
    ] {
        let only = b.json(&["list", "--harness", harness, "--json"]);
        let n = only["total"].as_u64().expect("total");
        assert!(n >= 1, "{harness} on machine b: {only}");
        assert!(n < docs.len() as u64, "{harness} filters: {only}");
        let text = only.to_string();
        assert!(
            text.contains(&id),
            "{harness}'s session {id} on machine b: {only}"
        );
        if harness != "dsh" {
            // Namespaced by the harness where ids could collide.
            assert!(text.contains(&format!("{harness}-{id}")), "{only}");
        }
    }
}

#[test]
fn a_rollout_copied_from_another_machine_is_this_workspaces_through_path_map() {
    // A real rollout as it lies on its author's machine: its `cwd` is that machine's.
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let name = "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl";
    let theirs = "/redacted/path/da0ba47443";
    let text = std::fs::read_to_string(fixture_dir().join(name)).expect("fixture");
    assert!(text.contains(&format!("\"cwd\":\"{theirs}\"")));
    let dir = sb.home.join("codex/sessions/2026/02/23");
    std::fs::create_dir_all(&dir).expect("day dir");
    let path = dir.join(name);
    std::fs::write(&path, &text).expect("rollout");
    quiet_for_a_day(&path);

    let listed = |sb: &Sandbox| sb.ok(&["status"]).contains("codex-019c8a4d");
    assert!(!listed(&sb), "without the map it is another workspace's");
    std::fs::write(
        sb.store().join("config.yml"),
        format!("pathMap:\n  {theirs}: {}\n", sb.ws_str()),
    )
    .expect("config");
    assert!(listed(&sb), "status lists it");
    let report = sb.json(&["archive", "--json"]);
    let sessions = report["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "{report}");
    assert!(
        sessions[0]["sessionId"]
            .as_str()
            .is_some_and(|s| s.starts_with("codex-019c8a4d")),
        "{report}"
    );
    assert!(
        sessions[0]["turnsArchived"].as_u64().unwrap_or(0) >= 1,
        "{report}"
    );
}

/// `/review` (codex-rs's shapes, as its rollouts record them): the chapter says the person
/// asked for a review; the reviewer's request Codex wrote and the results it hands back are
/// the host's — never the person's terms or the title.
#[test]
fn a_review_archives_as_the_persons_command_with_the_hosts_request_screened() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let ws = sb.ws_str();
    let id = "019c9999-0000-7000-8000-00000000abcd";
    let line = |t: &str, payload: serde_json::Value| {
        serde_json::json!({"timestamp": t, "type": "event_msg", "payload": payload}).to_string()
    };
    let request = "Review the current code changes (staged, unstaged, and untracked files) and provide prioritized findings.";
    let results = "<user_action>\n  <context>User initiated a review task. Here's the full review output from reviewer model. User may select one or more comments to resolve.</context>\n  <action>review</action>\n  <results>\n  [P1] Hold the lock in src/session/refresh.rs\n  </results>\n</user_action>\n";
    let text = [
        serde_json::json!({"timestamp": "2026-02-23T10:00:00.000Z", "type": "session_meta", "payload": {"id": id, "cwd": ws, "cli_version": "0.98.0"}}).to_string(),
        line("2026-02-23T10:00:01.000Z", serde_json::json!({"type": "entered_review_mode", "target": {"type": "uncommittedChanges"}, "user_facing_hint": "current changes"})),
        line("2026-02-23T10:00:02.000Z", serde_json::json!({"type": "task_started", "turn_id": "rv"})),
        line("2026-02-23T10:00:02.100Z", serde_json::json!({"type": "user_message", "message": request, "images": []})),
        line("2026-02-23T10:00:02.100Z", serde_json::json!({"type": "user_message", "message": request, "images": []})),
        serde_json::json!({"timestamp": "2026-02-23T10:01:00.000Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": results}]}}).to_string(),
        line("2026-02-23T10:01:00.100Z", serde_json::json!({"type": "exited_review_mode", "review_output": {"findings": []}})),
        serde_json::json!({"timestamp": "2026-02-23T10:01:00.200Z", "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "[P1] Hold the lock in src/session/refresh.rs"}]}}).to_string(),
        line("2026-02-23T10:01:00.300Z", serde_json::json!({"type": "task_complete", "turn_id": "r1"})),
    ]
    .join("\n")
        + "\n";
    let chapters = archive_rollout(&sb, id, &text, 1);
    assert_eq!(chapters.len(), 1, "{chapters:?}");
    let chapter = &chapters[0];
    let head = chapter.split("\n---\n").next().expect("frontmatter");
    assert!(
        head.contains("/review current changes"),
        "titled by the person's act:\n{head}"
    );
    for host_word in [
        "unstaged",
        "untracked",
        "prioritized",
        "initiated",
        "reviewer",
    ] {
        assert!(
            !head.to_lowercase().contains(host_word),
            "{host_word} in\n{head}"
        );
    }
    // The review itself is the answer, kept whole.
    assert!(chapter.contains("[P1] Hold the lock"), "{chapter}");
}

/// Write a rollout under the sandbox's Codex home, quiet for a day, archive it, and return
/// its chapters' texts (checking `turns` were archived).
fn archive_rollout(sb: &Sandbox, id: &str, text: &str, turns: u64) -> Vec<String> {
    let dir = sb.home.join("codex/sessions/2026/02/23");
    std::fs::create_dir_all(&dir).expect("day dir");
    let path = dir.join(format!("rollout-2026-02-23T10-00-00-{id}.jsonl"));
    std::fs::write(&path, text).expect("rollout");
    quiet_for_a_day(&path);
    let report = sb.json(&["archive", "--json"]);
    assert_eq!(report["sessions"][0]["turnsArchived"], turns, "{report}");
    // In path order: the snapshot is a sorted map.
    sb.snapshot()
        .into_iter()
        .filter(|(name, _)| name.contains("/chapters/") && name.ends_with(".md"))
        .map(|(_, bytes)| String::from_utf8(bytes).expect("a chapter is text"))
        .collect()
}

/// A paginated rollout (codex-cli 0.135+: `history_mode: "paginated"`, no `event_msg
/// user_message`; shapes measured on real rollouts by public readers): the person's prompts
/// are its user items — read once, though an `item_completed` mirrors one.
#[test]
fn a_paginated_rollout_archives_the_persons_prompts() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let id = "01a0b3da-c522-7af2-8a6d-2e1aed53b269";
    let line = |kind: &str, payload: serde_json::Value| {
        serde_json::json!({"timestamp": "2026-02-23T10:00:01.000Z", "type": kind, "payload": payload}).to_string()
    };
    let user = |text: &str| {
        line(
            "response_item",
            serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
        )
    };
    let text = [
        line("session_meta", serde_json::json!({"id": id, "cwd": sb.ws_str(), "cli_version": "0.154.0", "originator": "codex-tui", "history_mode": "paginated"})),
        user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        line("event_msg", serde_json::json!({"type": "task_started", "turn_id": "t1"})),
        user("make the sidegraph exporter stream its rows"),
        line("event_msg", serde_json::json!({"type": "item_completed", "thread_id": id, "item": {"type": "UserMessage", "id": "u1", "content": [{"type": "text", "text": "make the sidegraph exporter stream its rows"}]}})),
        line("response_item", serde_json::json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "The exporter streams now."}]})),
        line("event_msg", serde_json::json!({"type": "task_complete", "turn_id": "t1"})),
    ]
    .join("\n")
        + "\n";
    let chapters = archive_rollout(&sb, id, &text, 1);
    assert_eq!(chapters.len(), 1);
    let head = chapters[0].split("\n---\n").next().expect("frontmatter");
    assert!(
        head.contains("title: \"make the sidegraph exporter stream its rows\""),
        "{head}"
    );
    assert!(
        head.contains("sidegraph"),
        "the person's words give topics:\n{head}"
    );
    assert_eq!(
        chapters[0].matches("**User**").count(),
        1,
        "the prompt once, though mirrored:\n{}",
        chapters[0]
    );
}

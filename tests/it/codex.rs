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

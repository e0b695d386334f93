//! Every Claude Code and Codex fixture (`fixtures/claude-code/`, `fixtures/codex/`, the real
//! sessions of `fixtures/labelled/`; their READMEs say which are real and where from), archived together in one workspace through
//! the binary: each archives with no error, every completed turn is signed and archived
//! once (a resumed transcript's copies and Codex's `replacement_history` included), no
//! screened block reaches a chapter, every tool call has its result, and a subagent's
//! work lands in its parent's `Task` call.

use std::path::{Path, PathBuf};

use dsh_chapters::source::Harness;
use dsh_chapters::turn::CompletedTurn;

use crate::claude_code::{every_call_has_its_result, quiet_for_a_day, turns_of};
use crate::support::Sandbox;

/// How a fixture is installed.
#[derive(Clone, Copy)]
enum How {
    /// A Claude Code transcript in the workspace's project folder (a folder named as the
    /// file without `.jsonl` brings its `subagents/` and `beside/` files).
    Claude,
    /// A Codex rollout under `sessions/`, plain.
    Codex,
    /// A Codex rollout under `sessions/`, compressed to `.jsonl.zst` as Codex does after 7 days.
    CodexZst,
}

/// (fixture, how, the least number of completed turns it must give)
const ALL: &[(&str, How, usize)] = &[
    (
        "claude-code/v1.0.98-before-compaction.jsonl",
        How::Claude,
        2,
    ),
    ("claude-code/v1.0.98-after-compaction.jsonl", How::Claude, 1),
    // Real 1.0.108 (d-kimuson/claude-code-viewer, MIT): subagents as sidechain lines.
    ("claude-code/v1.0.108-subagent.jsonl", How::Claude, 1),
    ("claude-code/v2.0.50-compaction.jsonl", How::Claude, 2),
    ("claude-code/v2.0.76-turns.jsonl", How::Claude, 6),
    ("claude-code/v2.0.50-resumed-first.jsonl", How::Claude, 1),
    ("claude-code/v2.0.50-resumed-second.jsonl", How::Claude, 1),
    ("claude-code/v2.1.38-short.jsonl", How::Claude, 1),
    ("claude-code/v2.1.38-tool-heavy.jsonl", How::Claude, 1),
    ("claude-code/v2.1.38-subagent.jsonl", How::Claude, 1),
    ("claude-code/v2.1.39-compaction.jsonl", How::Claude, 1),
    ("claude-code/v2.1.39-subagent.jsonl", How::Claude, 1),
    // Real sessions of four more versions (2.1.31, 2.1.17, 2.1.22, 2.0.76), labelled for the
    // quality figures (`fixtures/labelled/README.md`), stored compressed.
    ("labelled/entire-lint-migration.jsonl.zst", How::Claude, 15),
    ("labelled/entire-remote-env-gpg.jsonl.zst", How::Claude, 11),
    (
        "labelled/entire-shadow-branch-rebase.jsonl.zst",
        How::Claude,
        15,
    ),
    ("labelled/entire-session-cleanup.jsonl.zst", How::Claude, 13),
    (
        "codex/rollout-2025-04-20-5e550000-0000-4000-8000-000000000001.json",
        How::Codex,
        1,
    ),
    (
        "codex/rollout-2025-08-20T13-20-47-0198c000-0000-7000-8000-000000000001.jsonl",
        How::Codex,
        2,
    ),
    // Real early G1 rollouts (0.2x): no cwd in the header, only in `<environment_context>`.
    (
        "codex/rollout-2025-08-31T11-51-11-40cb3c9c-9557-4cb0-b9cf-f6661872da35.jsonl",
        How::Codex,
        2,
    ),
    (
        "codex/rollout-2025-08-31T12-14-27-18a59085-ee11-4ef3-b460-f942642861b3.jsonl",
        How::Codex,
        1,
    ),
    (
        "codex/rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
        How::Codex,
        1,
    ),
    (
        "codex/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl",
        How::CodexZst,
        1,
    ),
    (
        "codex/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
        How::Codex,
        0,
    ),
    (
        "codex/rollout-2026-03-10T08-00-00-019fd000-0000-7000-8000-000000000001.jsonl",
        How::Codex,
        2,
    ),
    (
        "codex/rollout-2026-03-10T09-00-00-019fd000-0000-7000-8000-0000000000f1.jsonl",
        How::Codex,
        1,
    ),
    (
        "codex/rollout-2026-08-03T10-48-56-019fc8be-3658-7ca3-9e29-000000000000.jsonl",
        How::Codex,
        1,
    ),
];

/// Host text that must never reach a chapter, whichever harness wrote it.
const SCREENED: &[&str] = &[
    "<system-reminder>",
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-caveat>",
    "<task-notification>",
    "Caveat: The messages below were generated",
    "This session is being continued from a previous conversation",
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md instructions",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures")
}

/// The cwd a fixture's session names (Claude Code: the first line's `cwd`; Codex: the
/// session header's, else (early G1) the `<environment_context>`'s `<cwd>`, a G0 file's
/// first `shell` call's `workdir`).
fn cwd_of(text: &str, json_file: bool) -> String {
    if json_file {
        let doc: serde_json::Value = serde_json::from_str(text).expect("a G0 object");
        return doc["items"]
            .as_array()
            .expect("items")
            .iter()
            .find_map(|i| {
                let a: serde_json::Value = serde_json::from_str(i["arguments"].as_str()?).ok()?;
                a["workdir"].as_str().map(str::to_owned)
            })
            .expect("a workdir");
    }
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| {
            [&v["cwd"], &v["payload"]["cwd"]]
                .iter()
                .find_map(|c| c.as_str().filter(|c| !c.is_empty()).map(str::to_owned))
        })
        .or_else(|| {
            let start = text.find("<cwd>")? + "<cwd>".len();
            let end = start + text[start..].find("</cwd>")?;
            Some(text[start..end].trim().to_owned())
        })
        .expect("a cwd")
}

/// Install `name` into `sb`'s agent homes with its cwd (everywhere it is named) replaced
/// by the workspace, quiet for a day. Returns the installed path.
fn install(sb: &Sandbox, name: &str, how: How) -> PathBuf {
    let src = fixtures().join(name);
    let bytes = std::fs::read(&src).expect("fixture");
    let bytes = if name.ends_with(".zst") {
        zstd::decode_all(bytes.as_slice()).expect("a zstd fixture")
    } else {
        bytes
    };
    let text = String::from_utf8(bytes).expect("a UTF-8 fixture");
    let file = src
        .file_name()
        .expect("name")
        .to_string_lossy()
        .trim_end_matches(".zst")
        .to_owned();
    let cwd = cwd_of(&text, file.ends_with(".json"));
    let ws = sb.ws_str();
    let text = text.replace(&cwd, &ws);
    let installed = match how {
        How::Claude => {
            let (path, sid) = crate::claude_code::write_transcript(sb, &ws, &text);
            let dir = path.parent().expect("a project folder").to_path_buf();
            let stub = src.with_file_name(file.trim_end_matches(".jsonl"));
            for (sub, to) in [
                ("subagents", dir.join(&sid).join("subagents")),
                ("beside", dir.clone()),
            ] {
                let Ok(entries) = std::fs::read_dir(stub.join(sub)) else {
                    continue;
                };
                std::fs::create_dir_all(&to).expect("dir");
                for e in entries {
                    let e = e.expect("entry");
                    let t = std::fs::read_to_string(e.path()).expect("agent file");
                    let to_file = to.join(e.file_name());
                    std::fs::write(&to_file, t.replace(&cwd, &ws)).expect("agent file");
                    quiet_for_a_day(&to_file);
                }
            }
            path
        }
        How::Codex | How::CodexZst => {
            let dir = sb.home.join("codex/sessions/2026/01/02");
            std::fs::create_dir_all(&dir).expect("day dir");
            if let How::CodexZst = how {
                let path = dir.join(format!("{file}.zst"));
                let packed = zstd::encode_all(text.as_bytes(), 3).expect("compress");
                std::fs::write(&path, packed).expect("rollout");
                path
            } else {
                let path = dir.join(&file);
                std::fs::write(&path, &text).expect("rollout");
                path
            }
        }
    };
    quiet_for_a_day(&installed);
    installed
}

fn harness(how: How) -> Harness {
    match how {
        How::Claude => Harness::ClaudeCode,
        How::Codex | How::CodexZst => Harness::Codex,
    }
}

/// The answers' texts of a session's completed turns.
fn answers(turns: &[CompletedTurn]) -> Vec<String> {
    turns
        .iter()
        .flat_map(|t| t.events.iter())
        .filter_map(|e| e.assistant_text())
        .map(str::to_owned)
        .collect()
}

fn call_ids(turns: &[CompletedTurn]) -> Vec<String> {
    turns
        .iter()
        .flat_map(|t| t.events.iter())
        .filter_map(|e| e.tool_call())
        .map(|c| c.call_id.clone())
        .collect()
}

#[test]
fn every_fixture_of_every_harness_archives_each_turn_once_with_no_host_text() {
    let sb = Sandbox::new();
    // Installed in order: a resumed transcript after the one it was resumed from.
    let installed: Vec<(PathBuf, How, usize, &str)> = ALL
        .iter()
        .map(|&(name, how, least)| {
            let p = install(&sb, name, how);
            std::thread::sleep(std::time::Duration::from_millis(20));
            (p, how, least, name)
        })
        .collect();
    // A plain rollout hides its compressed sibling (Codex recompresses, then appends).
    let (plain, _, _, _) = installed
        .iter()
        .find(|(p, how, _, _)| {
            matches!(how, How::Codex) && p.extension().is_some_and(|e| e == "jsonl")
        })
        .expect("a plain rollout");
    let packed =
        zstd::encode_all(std::fs::read(plain).expect("plain").as_slice(), 3).expect("zstd");
    let sibling = plain.with_file_name(format!(
        "{}.zst",
        plain.file_name().expect("name").to_string_lossy()
    ));
    std::fs::write(&sibling, packed).expect("sibling");
    sb.ok(&["init"]);
    let report = sb.json(&["archive", "--json"]);
    assert_eq!(
        report["failures"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
    let sessions = report["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), ALL.len(), "one session a fixture: {report}");
    let mut all_answers: Vec<(String, &str)> = Vec::new();
    for (path, how, least, name) in &installed {
        let h = harness(*how);
        let completed = turns_of(h, path);
        assert!(
            completed.len() >= *least,
            "{name}: {} completed turns, at least {least}",
            completed.len()
        );
        let header = dsh_chapters::source::read_header(
            h,
            path,
            dsh_chapters::source::SourceOptions::default(),
        )
        .expect("header")
        .expect("a header");
        let s = sessions
            .iter()
            .find(|s| s["sessionId"] == header.id.as_str())
            .unwrap_or_else(|| panic!("{name} ({}) archived: {report}", header.id));
        assert_eq!(s["turnsSigned"], completed.len() as u64, "{name}");
        assert_eq!(s["turnsArchived"], completed.len() as u64, "{name}");
        every_call_has_its_result(name, &completed);
        if name.contains("2025-08-31T11-51-11") {
            // A gpt-oss model's reasoning: raw `reasoning_text`, no summary — still reasoning.
            let reasoning: usize = completed
                .iter()
                .flat_map(|t| t.events.iter())
                .filter_map(|e| e.assistant_message())
                .map(|m| m.reasoning.len())
                .sum();
            assert_eq!(reasoning, 4, "{name}: its four reasoning items");
        }
        if name.ends_with("0000000000f1.jsonl") {
            // A fork: its copies of the parent's first task are read in the parent.
            assert_eq!(completed.len(), 1, "{name}: only its own task");
        }
        if name.ends_with("resumed-second.jsonl") {
            // Its first turn repeats the transcript it was resumed from: read there.
            assert_eq!(completed.len(), 1, "{name}: only its own turn");
            let prompts: Vec<String> = completed[0]
                .events
                .iter()
                .filter_map(|e| e.user_message())
                .map(|m| m.text.clone())
                .collect();
            assert_eq!(prompts, ["and update its callers"], "{name}");
        }
        all_answers.extend(answers(&completed).into_iter().map(|a| (a, *name)));
        let ids = call_ids(&completed);
        assert!(
            !ids.iter().any(|i| i.contains("acompact")),
            "{name}: the summarizer is never folded as work"
        );
        // A subagent's calls are its parent turn's.
        let folded = match *name {
            "claude-code/v2.1.39-subagent.jsonl" => Some("agent-a2898e3/"),
            "claude-code/v2.0.50-compaction.jsonl" => Some("agent-5f3c9a1d/"),
            "claude-code/v1.0.98-before-compaction.jsonl" => Some("sidechain/"),
            "claude-code/v1.0.108-subagent.jsonl" => Some("sidechain/"),
            _ => None,
        };
        if let Some(prefix) = folded {
            assert!(
                ids.iter().any(|i| i.starts_with(prefix)),
                "{name}: subagent calls folded ({prefix}): {ids:?}"
            );
        }
        if name.ends_with("v1.0.108-subagent.jsonl") {
            // Two `Task`s ran subagents (2 and 6 calls, as sidechain lines of the session
            // file); a third failed its input validation and ran none.
            let sidechain = ids.iter().filter(|i| i.starts_with("sidechain/")).count();
            assert_eq!(
                sidechain, 8,
                "{name}: both subagents' calls folded: {ids:?}"
            );
        }
    }
    // Each answer is archived once: a resumed transcript's copies are read in the one it
    // was resumed from, Codex's `replacement_history` never.
    let mut seen: std::collections::BTreeMap<&str, &str> = std::collections::BTreeMap::new();
    for (a, name) in &all_answers {
        if a.len() < 20 {
            continue; // short answers ("Done.") may repeat for real
        }
        if let Some(before) = seen.insert(a.as_str(), name) {
            panic!("an answer read twice, in {before} and {name}: {a}");
        }
    }
    let mut summary_notes = 0;
    for (file, bytes) in sb.snapshot() {
        if !file.contains("/chapters/") {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        // A compaction summary is the harness's: a marked note, never its words.
        summary_notes += text
            .matches("⟦omitted: host-injected compact-checkpoint")
            .count();
        for s in SCREENED {
            assert!(!text.contains(s), "{file} holds host text {s:?}");
        }
        assert!(!text.contains("gAAAA"), "{file} holds encrypted reasoning");
        // Every harness's chapters are dated, even an early Codex rollout's, which times only
        // its header.
        assert!(!text.contains("\ndate: null\n"), "{file} has no date");
    }
    assert!(
        summary_notes >= 3,
        "the compaction summaries of 1.0.98, 2.0.50 and 2.1.39 each leave a marker: {summary_notes}"
    );
    // Nothing new the second time.
    let again = sb.json(&["archive", "--json"]);
    for s in again["sessions"].as_array().expect("sessions") {
        assert_eq!(s["turnsSigned"], 0, "{s}");
    }
}

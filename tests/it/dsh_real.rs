//! Issue 14: DSH logs as current DSH (0.2.x, formats v3 and v4) writes them, what Node's
//! `JSON.stringify` writes, and damage that costs only itself. Logs are written in the real
//! shape by `testkit::realshape` (from the facts, not copied from any log).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use dsh_chapters::testkit::realshape::{RealShapeScript, RealTurn, INJECTED_WORDS};
use dsh_chapters::testkit::writer::{LogWriter, ToolCallSpec};
use serde_json::{json, Value};

use crate::support::{signed_turns, Migration, Sandbox, START_MS};

const S1: &str = "session-11111111-1111-4111-8111-111111111111";
const S2: &str = "session-22222222-2222-4222-8222-222222222222";
const S3: &str = "session-33333333-3333-4333-8333-333333333333";

/// The human's words of turn `i`: a marker found nowhere else.
fn human(i: usize) -> String {
    format!("Please fix the humanmarker{i} parser in the tokenizer module")
}

/// Six turns: tools, a policy notice, a delegate's report, a 300 KB answer, an aborted
/// turn, and one left in flight.
fn real_turns() -> Vec<RealTurn> {
    let mut turns: Vec<RealTurn> = (0..6)
        .map(|i| RealTurn::new(&human(i), &format!("Answer {i}: the parser is fixed.")))
        .collect();
    turns[0].tool_calls = vec![
        ToolCallSpec::new(
            "read_file",
            json!({"path": "src/tokenizer/parser.rs"}),
            "fn parse() {}\n",
        ),
        ToolCallSpec::new(
            "bash",
            json!({"command": "cargo test -p tokenizer"}),
            "ok\n",
        ),
    ];
    turns[0].approval_notice = true;
    turns[1].delegate_report = Some("delegatereport: the docs are written".into());
    turns[1].tool_calls = vec![ToolCallSpec::new(
        "bash",
        json!({"command": "cargo doc"}),
        "ok\n",
    )];
    turns[2].answer_bytes = 300_000;
    turns[4].end_reason = Some("aborted".into());
    turns[5].end_reason = None;
    turns
}

/// Write `turns` as one session, one frame per turn; returns the log and each turn's
/// events (as written).
fn write_real(
    sb: &Sandbox,
    session: &str,
    version: u32,
    turns: &[RealTurn],
) -> (PathBuf, Vec<Vec<Value>>) {
    let path = sb.log_path(session, version, true);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut script = RealShapeScript::new(version, START_MS);
    let header = script.header(session, &sb.ws_str());
    let mut w = LogWriter::create(&path, true, &header).expect("create");
    let mut all = Vec::new();
    for t in turns {
        let events = script.turn_events(t);
        w.append_batch(&events).expect("append");
        all.push(events);
    }
    (path, all)
}

fn end_seq(events: &[Value]) -> u64 {
    events.last().expect("events")["seq"].as_u64().expect("seq")
}

/// Every chapter of the store: (seqRange, whole text), by seq.
fn chapters(sb: &Sandbox) -> Vec<((u64, u64), String)> {
    let mut out: Vec<((u64, u64), String)> = sb
        .snapshot()
        .into_iter()
        .filter(|(k, _)| k.contains("/chapters/") && !k.contains("/plan-"))
        .map(|(_, bytes)| {
            let text = String::from_utf8(bytes).expect("utf-8");
            let range = text
                .lines()
                .find_map(|l| l.strip_prefix("seqRange: ["))
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|r| r.split_once(", "))
                .map(|(a, b)| (a.parse().expect("lo"), b.parse().expect("hi")))
                .expect("seqRange");
            (range, text)
        })
        .collect();
    out.sort();
    out
}

fn frontmatter_uint(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {text}"))
}

/// Every line of every collection ledger in the store.
fn collection_lines(sb: &Sandbox) -> Vec<Value> {
    sb.snapshot()
        .into_iter()
        .filter(|(k, _)| k.contains("/collections/"))
        .flat_map(|(_, bytes)| {
            String::from_utf8(bytes)
                .expect("utf-8")
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("json"))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn collection_terms(sb: &Sandbox) -> Vec<String> {
    collection_lines(sb)
        .iter()
        .flat_map(|v| v["terms"].as_array().into_iter().flatten())
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

/// Run `chapters` and wait, killing it if it has not ended after a minute: a guard so a
/// regression (a blocking open) fails the test instead of hanging it. Not a timing check.
fn run_guarded(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "chapters blocked on a log and was killed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn real_v4_and_v3_logs_archive_every_completed_turn_once() {
    for version in [4, 3, 5] {
        let sb = Sandbox::new();
        let turns = real_turns();
        let (_, events) = write_real(&sb, S1, version, &turns);
        let big = events[2]
            .iter()
            .filter(|e| e["type"] == "assistant/message")
            .map(|e| e.to_string().len())
            .max()
            .expect("an assistant line");
        assert!(big > 500_000, "a line of several hundred KB: {big}");
        sb.ok(&["init"]);
        let out = sb.run(&["archive", "--json"]);
        assert_eq!(out.status.code(), Some(0), "v{version}: {}", stderr(&out));
        let report = json_of(&out);
        assert_eq!(report["failures"], json!([]), "v{version}");
        let session = &report["sessions"][0];
        assert_eq!(session["turnsArchived"], 5, "v{version}: {session}");
        assert_eq!(session["turnsSigned"], 5);
        let last_end = end_seq(&events[4]);
        assert_eq!(
            session["inFlight"][0],
            json!(last_end + 1),
            "the in-flight turn starts after the last turn/end"
        );

        // Contiguous cover of every completed turn, from seq 0 to the last turn/end.
        let chapters = chapters(&sb);
        assert!(!chapters.is_empty());
        let mut next = 0;
        for ((lo, hi), _) in &chapters {
            assert_eq!(*lo, next, "v{version}: chapters tile the span");
            next = hi + 1;
        }
        assert_eq!(next, last_end + 1, "v{version}: every completed turn");

        let all: String = chapters.iter().map(|(_, t)| t.as_str()).collect();
        // One copy of each human message (spliced, user/message, the title request).
        for i in 0..5 {
            assert_eq!(
                all.matches(&format!("\n{}\n", human(i))).count(),
                1,
                "v{version}: turn {i}'s words once"
            );
        }
        assert!(!all.contains("humanmarker5"), "the in-flight turn waits");
        // Host-injected context is screened with a marker and never in the text.
        for word in INJECTED_WORDS.iter().chain(&["SYSPROMPTWORD"]) {
            assert!(!all.contains(word), "v{version}: {word} leaked");
        }
        let runtime = if version >= 4 {
            "runtime-context"
        } else {
            "plugin:@deepseek-ai/dsh-system-prompt"
        };
        for kind in [
            "agent-instructions",
            "skill-catalog",
            runtime,
            "time-context",
            "dsh-mnemon",
            "user-approval",
        ] {
            assert!(
                all.contains(&format!("⟦omitted: host-injected {kind}")),
                "v{version}: a marker for {kind}"
            );
        }
        // A delegate's report is conversation.
        assert!(all.contains("delegatereport: the docs are written"));
        assert!(all.contains("Background subagent agent-7 finished"));
        // Reasoning is left out by default, and counted.
        assert!(!all.contains("Think it through first"), "v{version}");
        let omitted: u64 = chapters
            .iter()
            .map(|(_, t)| frontmatter_uint(t, "omittedReasoning"))
            .sum();
        assert_eq!(omitted, 7, "one per model call: 5 answers + 2 tool steps");
        // Tool calls once each (the content's tool-call blocks are not doubled).
        assert_eq!(all.matches("cargo test -p tokenizer").count(), 1);
        // Terms: the human's words, never the host's nor a delegate's.
        let terms = collection_terms(&sb);
        assert!(terms.iter().any(|t| t.contains("tokenizer")), "{terms:?}");
        for word in INJECTED_WORDS
            .iter()
            .chain(&["syspromptword", "delegatereport"])
        {
            assert!(
                !terms.iter().any(|t| t.contains(word)),
                "v{version}: {word} in terms {terms:?}"
            );
        }
        // Archiving again adds nothing.
        let again = json_of(&sb.run(&["archive", "--json"]));
        assert_eq!(again["sessions"][0]["turnsArchived"], 0);
    }
}

#[test]
fn reasoning_rendered_when_configured() {
    let sb = Sandbox::new();
    write_real(&sb, S1, 4, &real_turns()[..2]);
    sb.ok(&["init"]);
    sb.ok_with_env(&["archive"], &[("CHAPTERS_RENDER_REASONING", "true")]);
    let all: String = chapters(&sb).into_iter().map(|(_, t)| t).collect();
    assert!(all.contains("**Assistant reasoning**"), "{all}");
    assert!(all.contains("Think it through first"));
}

#[test]
fn a_string_cut_mid_emoji_is_read_as_replacement_and_counted() {
    let sb = Sandbox::new();
    let path = sb.log_path(S1, 4, true);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut script = RealShapeScript::new(4, START_MS);
    let mut w = LogWriter::create(&path, true, &script.header(S1, &sb.ws_str())).expect("log");
    for i in 0..3 {
        let mut turn = RealTurn::new(&format!("{} CUTHERE", human(i)), "Done CUTHERE");
        turn.reasoning = "short".into();
        // What `JSON.stringify` writes for a string cut between the halves of an emoji.
        let lines: Vec<String> = script
            .turn_events(&turn)
            .iter()
            .map(|e| e.to_string().replace("CUTHERE", "\\ud83d"))
            .collect();
        w.append_lines(&lines).expect("append");
    }
    sb.ok(&["init"]);
    let out = sb.run(&["archive", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json_of(&out);
    let session = &report["sessions"][0];
    assert_eq!(session["turnsArchived"], 3, "{report}");
    let notes = session["notes"].to_string();
    assert!(
        notes.contains("lone UTF-16 surrogate escape(s)") && notes.contains("U+FFFD"),
        "{notes}"
    );
    let all: String = chapters(&sb).into_iter().map(|(_, t)| t).collect();
    assert!(all.contains(&format!("{} \u{fffd}", human(0))), "{all}");
    assert!(all.contains("Done \u{fffd}"));
}

/// Turns 0–1 whole, turn 2 with `line` in place of its `n`-th event, turn 3 whole.
fn damaged_log(sb: &Sandbox, session: &str, damage: impl Fn(&str) -> String) -> Vec<Vec<Value>> {
    let path = sb.log_path(session, 4, true);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut script = RealShapeScript::new(4, START_MS);
    let mut w = LogWriter::create(&path, true, &script.header(session, &sb.ws_str())).expect("log");
    let mut all = Vec::new();
    for (i, turn) in real_turns()[..4].iter().enumerate() {
        let events = script.turn_events(turn);
        let mut lines: Vec<String> = events.iter().map(Value::to_string).collect();
        if i == 2 {
            lines[8] = damage(&lines[8]);
        }
        w.append_lines(&lines).expect("append");
        all.push(events);
    }
    all
}

#[test]
fn a_garbled_line_mid_log_costs_only_its_turn_and_is_retried() {
    let sb = Sandbox::new();
    let events = damaged_log(&sb, S1, |line| line[..line.len() / 2].to_owned());
    let good_end = end_seq(&events[1]);
    let damaged_after = events[2][7]["seq"].as_u64().expect("seq");
    sb.ok(&["init"]);
    for _ in 0..2 {
        let out = sb.run(&["archive", "--json"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains("session.v4.jsonl.zstd"), "{err}");
        assert!(
            err.contains(&format!("the line after seq {damaged_after}")),
            "{err}"
        );
        assert!(
            err.contains(&format!("(through seq {good_end}) is archived")),
            "{err}"
        );
        assert!(
            err.contains(&format!("(from seq {})", good_end + 1)),
            "{err}"
        );
        assert!(err.contains("retries"), "what to do: {err}");
        assert!(
            !err.contains("Some(") && !err.contains("..="),
            "no Rust syntax: {err}"
        );
        let report = json_of(&out);
        assert!(report["sessions"][0]["damage"].is_string(), "{report}");
        let chapters = chapters(&sb);
        assert_eq!(chapters.first().map(|c| c.0 .0), Some(0));
        assert_eq!(chapters.last().map(|c| c.0 .1), Some(good_end));
    }
    // Status reads what it can and names the damage, without failing.
    let status = sb.json(&["status", "--json"]);
    let s = &status["sessions"][0];
    assert_eq!(s["completedTurns"], 2, "{s}");
    assert!(
        s["error"].as_str().is_some_and(|e| e.contains("seq")),
        "{s}"
    );

    // Repaired (the log written whole again): the next archive takes the rest.
    std::fs::remove_dir_all(sb.log_path(S1, 4, true).parent().expect("dir")).expect("rm");
    let fixed = damaged_log(&sb, S1, str::to_owned);
    let out = sb.run(&["archive", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let chapters = chapters(&sb);
    assert_eq!(chapters.last().map(|c| c.0 .1), Some(end_seq(&fixed[3])));
    let mut next = 0;
    for ((lo, hi), _) in &chapters {
        assert_eq!(*lo, next);
        next = hi + 1;
    }
}

#[test]
fn another_sessions_damage_never_fails_the_session_asked_for() {
    let sb = Sandbox::new();
    write_real(&sb, S1, 4, &real_turns()[..2]);
    damaged_log(&sb, S2, |line| line[..10].to_owned());
    // A header that is not one: unreadable from its first line.
    let bad = sb.log_path(S3, 4, false);
    std::fs::create_dir_all(bad.parent().expect("dir")).expect("mkdir");
    std::fs::write(&bad, b"{\"type\":\"sess\n").expect("write");
    sb.ok(&["init"]);
    let out = sb.run(&["archive", "--session", S1, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["failures"], json!([]));
    assert_eq!(report["sessions"].as_array().map(Vec::len), Some(1));
    assert_eq!(report["sessions"][0]["sessionId"], S1);
    let notes = report["notes"].to_string();
    assert!(
        notes.contains(S3) && notes.contains("not the session asked for"),
        "{notes}"
    );
    // Asked for the damaged one: it fails (exit 1), its good turns archived.
    let out = sb.run(&["archive", "--session", S2, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(json_of(&out)["sessions"][0]["turnsArchived"], 2);
    // Asked for the unreadable one: it fails by name.
    let out = sb.run(&["archive", "--session", S3]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(S3), "{}", stderr(&out));
}

#[test]
fn fifo_device_and_empty_logs_are_skipped_with_a_note_never_blocking() {
    let sb = Sandbox::new();
    write_real(&sb, S1, 4, &real_turns()[..2]);
    let fifo = sb.log_path(S2, 4, true);
    std::fs::create_dir_all(fifo.parent().expect("dir")).expect("mkdir");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let zero = sb.log_path(S3, 4, false);
    std::fs::create_dir_all(zero.parent().expect("dir")).expect("mkdir");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
    let empty = sb.log_path("session-44444444-4444-4444-8444-444444444444", 4, true);
    std::fs::create_dir_all(empty.parent().expect("dir")).expect("mkdir");
    std::fs::write(&empty, b"").expect("empty");
    let header_only = sb.log_path("session-55555555-5555-4555-8555-555555555555", 4, true);
    std::fs::create_dir_all(header_only.parent().expect("dir")).expect("mkdir");
    let script = RealShapeScript::new(4, START_MS);
    LogWriter::create(
        &header_only,
        true,
        &script.header("session-55555555-5555-4555-8555-555555555555", &sb.ws_str()),
    )
    .expect("header only");
    sb.ok(&["init"]);

    let out = run_guarded(sb.cmd(&["archive", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = json_of(&out);
    assert_eq!(report["failures"], json!([]), "{report}");
    let notes = report["notes"].to_string();
    assert!(notes.contains("a FIFO") && notes.contains(S2), "{notes}");
    assert!(
        notes.contains("a character device") && notes.contains(S3),
        "{notes}"
    );
    assert!(notes.contains("no header line yet"), "{notes}");
    let archived: u64 = report["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .map(|s| s["turnsArchived"].as_u64().expect("n"))
        .sum();
    assert_eq!(archived, 2);

    let out = run_guarded(sb.cmd(&["status", "--json"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let status = json_of(&out).to_string();
    assert!(status.contains("a FIFO (named pipe)"), "{status}");
}

#[test]
fn a_200_mb_line_is_refused_by_name_and_costs_only_its_turn() {
    let sb = Sandbox::new();
    let path = sb.log_path(S1, 4, true);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut script = RealShapeScript::new(4, START_MS);
    let mut w = LogWriter::create(&path, true, &script.header(S1, &sb.ws_str())).expect("log");
    let first = script.turn_events(&RealTurn::new(&human(0), "ok"));
    w.append_batch(&first).expect("append");
    drop(w);
    // One frame holding a 200 MB assistant line, streamed (never held whole).
    let seq = script.next_seq();
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("open");
    let mut enc = zstd::stream::write::Encoder::new(file, 1).expect("encoder");
    write!(
        enc,
        "{{\"type\":\"assistant/message\",\"seq\":{seq},\"data\":{{\"message\":{{\"content\":[{{\"type\":\"text\",\"text\":\""
    )
    .expect("w");
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..200 {
        enc.write_all(&chunk).expect("w");
    }
    enc.write_all(b"\"}]}}}\n").expect("w");
    enc.finish().expect("finish");
    sb.ok(&["init"]);
    let out = sb.run(&["archive", "--json"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("maxEventBytes") && err.contains(&format!("the line after seq {}", seq - 1)),
        "{err}"
    );
    assert_eq!(json_of(&out)["sessions"][0]["turnsArchived"], 1);
}

#[test]
fn a_million_entry_stream_and_a_spliced_item_without_source_are_read() {
    let sb = Sandbox::new();
    let path = sb.log_path(S1, 4, true);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut script = RealShapeScript::new(4, START_MS);
    let mut w = LogWriter::create(&path, true, &script.header(S1, &sb.ws_str())).expect("log");
    let mut events = script.turn_events(&RealTurn::new(&human(0), "millionanswer"));
    let entries = vec![json!({"type": "text-chunks"}); 1_000_000];
    let mut spliced = 0;
    for e in &mut events {
        if e["type"] == "assistant/message" {
            e["data"]["stream"] = Value::Array(entries.clone());
        }
        if e["type"] == "agent/inbox/spliced" {
            if let Some(items) = e["data"]["inserted"].as_array_mut() {
                for item in items {
                    item.as_object_mut().expect("item").remove("source");
                    spliced += 1;
                }
            }
        }
    }
    assert_eq!(spliced, 1);
    w.append_batch(&events).expect("append");
    sb.ok(&["init"]);
    let out = sb.run(&["archive", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let all: String = chapters(&sb).into_iter().map(|(_, t)| t).collect();
    assert!(all.contains("millionanswer"));
    assert_eq!(all.matches(&format!("\n{}\n", human(0))).count(), 1);
}

#[test]
fn an_unreadable_session_directory_fails_that_session_only() {
    let sb = Sandbox::new();
    write_real(&sb, S1, 4, &real_turns()[..2]);
    let (locked, _) = write_real(&sb, S2, 4, &real_turns()[..1]);
    let locked_dir = locked.parent().expect("dir").to_path_buf();
    sb.ok(&["init"]);
    // Root reads any directory: run as nobody, over a tree nobody may use.
    let as_root = rustix::process::geteuid().is_root();
    if as_root {
        open_up(sb.ws.parent().expect("root"));
    }
    set_mode(&locked_dir, 0o000);
    let cmd = |args: &[&str]| {
        let inner = sb.cmd(args);
        if !as_root {
            return inner;
        }
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(inner.get_program())
            .args(inner.get_args())
            .current_dir(&sb.ws);
        for (k, v) in inner.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd
    };
    let out = run_guarded(cmd(&["archive", "--json"]));
    set_mode(&locked_dir, 0o755);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(S2), "{err}");
    let report = json_of(&out);
    assert_eq!(report["sessions"][0]["sessionId"], S1, "{report}");
    assert_eq!(report["sessions"][0]["turnsArchived"], 2);
    assert_eq!(report["failures"].as_array().map(Vec::len), Some(1));
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Every directory and file under `root` usable by anyone (for a run as another user).
fn open_up(root: &Path) {
    set_mode(root, 0o777);
    for entry in std::fs::read_dir(root).expect("read").flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            open_up(&path);
        } else if !path.is_symlink() {
            set_mode(&path, 0o666);
        }
    }
}

/// DSH's programmatic tool calling (PTC): the model calls `run_code` once, and each tool
/// the program runs is logged only as a sub-call — `tool/ptc-dispatch-start` (v3/v4;
/// `tool/code-dispatch-start` in v0) with `rootCallId`, `parentCallId`, `subCallId`, `name`
/// and `arguments` as an object, then `tool/ptc-dispatch` settling it in `tool/result`'s
/// words (`isError`, `content`). Facts from public DSH plugin and adapter tests, not a log.
/// Every path and command of such a turn lives in the sub-calls: they are signed, rendered
/// as tool calls, and the outer `run_code` is kept too.
#[test]
fn ptc_sub_calls_are_signed_and_rendered_as_tool_calls() {
    for (start_kind, end_kind) in [
        ("tool/ptc-dispatch-start", "tool/ptc-dispatch"),
        ("tool/code-dispatch-start", "tool/code-dispatch"),
    ] {
        let sb = Sandbox::new();
        let path = sb.log_path(S1, 4, true);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        let script = RealShapeScript::new(4, START_MS);
        let header = script.header(S1, &sb.ws_str());
        let mut w = LogWriter::create(&path, true, &header).expect("create");
        let csv = format!("{}/src/export/csv_writer.rs", sb.ws_str());
        let program = "const a = await tools.read({ file_path: 'csv_writer.rs' });\nawait tools.pwsh({ command: 'cargo test -p exporter' })";
        let rows: Vec<(&str, Value)> = vec![
            ("turn/start", json!({"turn": 1})),
            ("step/start", json!({"turn": 1, "step": 1})),
            (
                "user/message",
                json!({"turn": 1, "step": 1, "role": "user", "id": "m1",
                "source": {"kind": "user"},
                "content": [{"type": "text", "text": "Fix the quoting in the csv exporter"}]}),
            ),
            (
                "assistant/message",
                json!({"turn": 1, "step": 1, "message": {"role": "assistant",
                "content": [{"type": "tool-call", "id": "call-1", "name": "run_code",
                    "arguments": json!({"code": program}).to_string()}]}}),
            ),
            (
                "tool/call",
                json!({"turn": 1, "step": 1, "callId": "call-1", "name": "run_code",
                "arguments": json!({"code": program, "description": "read and test"}).to_string()}),
            ),
            (
                start_kind,
                json!({"rootCallId": "call-1", "parentCallId": "call-1",
                "subCallId": "call-1:ptc:1", "name": "read", "arguments": {"file_path": csv}}),
            ),
            (
                end_kind,
                json!({"rootCallId": "call-1", "parentCallId": "call-1",
                "subCallId": "call-1:ptc:1", "name": "read", "arguments": {}, "isError": false,
                "content": [{"type": "text", "text": "1: fn quote_field() {}"}]}),
            ),
            (
                start_kind,
                json!({"rootCallId": "call-1", "parentCallId": "call-1",
                "subCallId": "call-1:ptc:2", "name": "pwsh",
                "arguments": {"command": "cargo test -p exporter"}}),
            ),
            (
                end_kind,
                json!({"rootCallId": "call-1", "parentCallId": "call-1",
                "subCallId": "call-1:ptc:2", "name": "pwsh", "arguments": {}, "isError": true,
                "content": [{"type": "text", "text": "ptcsubresult: 1 test failed"}]}),
            ),
            (
                "tool/result",
                json!({"turn": 1, "step": 1, "message": {"role": "tool",
                "toolCallId": "call-1", "isError": false,
                "content": [{"type": "text", "text": "program finished"}]}}),
            ),
            ("step/end", json!({"turn": 1, "step": 1})),
            (
                "assistant/message",
                json!({"turn": 1, "step": 2, "message": {"role": "assistant",
                "content": [{"type": "text", "text": "The quoting is fixed."}]}}),
            ),
            (
                "turn/end",
                json!({"turn": 1, "reason": {"kind": "completed"}}),
            ),
        ];
        let events: Vec<Value> = rows
            .into_iter()
            .enumerate()
            .map(|(seq, (kind, data))| {
                json!({"type": kind, "seq": seq, "time": START_MS + seq as i64, "data": data})
            })
            .collect();
        w.append_batch(&events).expect("append");
        sb.ok(&["init"]);
        let out = sb.run(&["archive", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{start_kind}: {}", stderr(&out));

        let sigs = collection_lines(&sb);
        assert_eq!(sigs.len(), 1, "{sigs:?}");
        assert_eq!(
            sigs[0]["paths"],
            json!(["src/export/csv_writer.rs"]),
            "{start_kind}: the sub-call's path, repo-relative"
        );
        assert_eq!(
            sigs[0]["commands"],
            json!(["cargo test exporter"]),
            "{start_kind}: the sub-call's command"
        );

        let all: String = chapters(&sb).into_iter().map(|(_, t)| t).collect();
        assert!(all.contains("**Tool call** `run_code` · `call-1`"), "{all}");
        assert!(
            all.contains("**Tool call** `read` · `call-1:ptc:1`"),
            "{all}"
        );
        assert!(
            all.contains("**Tool call** `pwsh` · `call-1:ptc:2`"),
            "{all}"
        );
        assert!(all.contains("ptcsubresult: 1 test failed"), "{all}");
        assert!(all.contains("program finished"), "{all}");
    }
}

/// DSH migrates a log to a new format generation beside the old file, and the migration
/// may renumber its events (v1 → v2 drops the `assistant/chunk` events; v4 → v5 adds a
/// `turn/end` for every interrupted turn) while turn numbers stay. The turns archived from
/// the old generation are neither archived nor signed again from the new one, and the
/// turns after them are — whether the seqs shrank or grew. Facts from DSH's published
/// migration packages' documentation and source, not from a log.
#[test]
fn a_migrated_log_with_renumbered_seqs_archives_only_its_new_turns() {
    for shrinks in [true, false] {
        let sb = Sandbox::new();
        let m = Migration::new(&sb, S1, shrinks, human);
        let (old_gen, new_gen) = (m.old_generation, m.new_generation);
        m.write_old(&sb);
        sb.ok(&["init"]);
        let first = json_of(&sb.run(&["archive", "--json"]));
        assert_eq!(first["sessions"][0]["turnsArchived"], 3, "{first}");

        m.write_new(&sb);
        // Before the new generation's first archive, `status` counts its two new turns
        // pending: by turn numbers, as the archive will take them, not by the old seqs.
        let status = sb.json(&["status", "--json"]);
        assert_eq!(status["pendingTurns"], 2, "v{old_gen}→v{new_gen}: {status}");
        let out = sb.run(&["archive", "--json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "v{old_gen}→v{new_gen}: {}",
            stderr(&out)
        );
        let report = json_of(&out);
        assert_eq!(report["failures"], json!([]), "{report}");
        assert_eq!(report["sessions"][0]["turnsArchived"], 2, "{report}");
        assert_eq!(report["sessions"][0]["turnsSigned"], 2, "{report}");
        let all: String = chapters(&sb).into_iter().map(|(_, t)| t).collect();
        for i in 0..5 {
            assert_eq!(
                all.matches(&format!("\n{}\n", human(i))).count(),
                1,
                "v{old_gen}→v{new_gen}: turn {i}'s words once\n{all}"
            );
        }
        assert_eq!(
            signed_turns(&sb, S1, S1),
            [1, 2, 3, 4, 5],
            "v{old_gen}→v{new_gen}: each turn signed once"
        );
        // And again: nothing new.
        let again = json_of(&sb.run(&["archive", "--json"]));
        assert_eq!(again["sessions"][0]["turnsArchived"], 0, "{again}");
        assert_eq!(again["sessions"][0]["turnsSigned"], 0, "{again}");
        // A turn more: `status` counts it pending against the last chapter, not against
        // the old numbering's higher seqs; the archive takes it.
        m.append_sixth(&sb);
        let status = sb.json(&["status", "--json"]);
        assert_eq!(status["pendingTurns"], 1, "v{old_gen}→v{new_gen}: {status}");
        let sixth = json_of(&sb.run(&["archive", "--json"]));
        assert_eq!(sixth["sessions"][0]["turnsArchived"], 1, "{sixth}");
        assert_eq!(signed_turns(&sb, S1, S1), [1, 2, 3, 4, 5, 6]);
    }
}

//! The daemon follows Claude Code's and Codex's logs live (issue #15 point 5): the real
//! binary, real inotify, real transcript files written line by line under the sandbox's
//! `CLAUDE_CONFIG_DIR` and `CODEX_HOME` while it runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant, SystemTime};

use dsh_chapters::daemon::control::{Client, Request};
use serde_json::{json, Value};

use crate::support::Sandbox;

const WAIT: Duration = Duration::from_secs(60);
const CC_SID: &str = "0b0b0b0b-0000-4000-8000-0000000000aa";
const CC_OLD: &str = "0b0b0b0b-0000-4000-8000-0000000000bb";
const CODEX_ID: &str = "0199aaaa-0000-7000-8000-0000000000cc";

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn socket(sb: &Sandbox) -> PathBuf {
    sb.home.join("dsh-chapters/daemon.sock")
}

struct Daemon(Child);

impl Daemon {
    fn start(sb: &Sandbox, env: &[(&str, &str)]) -> Daemon {
        let mut cmd = sb.cmd(&["daemon", "--foreground"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the daemon");
        let d = Daemon(child);
        wait_for("the daemon's socket", || {
            Client::connect(&socket(sb), Duration::from_secs(5)).is_ok()
        });
        d
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status(sb: &Sandbox) -> Value {
    let mut c = Client::connect(&socket(sb), Duration::from_secs(10)).expect("connect");
    c.request(Request::Status, &socket(sb)).expect("status")
}

/// The number of signatures in a session's collection ledger.
fn signed(sb: &Sandbox, session: &str) -> usize {
    let path = sb
        .store()
        .join(session)
        .join("collections")
        .join(format!("{session}.jsonl"));
    std::fs::read_to_string(path)
        .map(|t| t.lines().filter(|l| l.ends_with('}')).count())
        .unwrap_or(0)
}

fn chapters(sb: &Sandbox, root: &str) -> usize {
    std::fs::read_dir(sb.store().join(root).join("chapters"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.ends_with(".md") && !n.starts_with('.')
                })
                .count()
        })
        .unwrap_or(0)
}

fn workspace_status(st: &Value) -> Option<&Value> {
    st["workspaces"]
        .as_array()?
        .iter()
        .find(|w| w["followed"] == true)
}

fn session_status<'a>(st: &'a Value, id: &str) -> Option<&'a Value> {
    st["workspaces"]
        .as_array()?
        .iter()
        .flat_map(|w| w["sessions"].as_array().into_iter().flatten())
        .find(|s| s["sessionId"] == id)
}

/// Claude Code's project folder of `cwd` (every character but ASCII letters and digits → `-`).
fn project_dir(sb: &Sandbox, cwd: &str) -> PathBuf {
    let key: String = cwd
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    sb.home.join("claude/projects").join(key)
}

/// A Claude Code transcript written line by line, as Claude Code writes it.
struct Transcript {
    path: PathBuf,
    sid: String,
    cwd: String,
    n: usize,
    last: Option<String>,
}

impl Transcript {
    fn new(sb: &Sandbox, sid: &str) -> Transcript {
        Transcript::in_cwd(sb, sid, &sb.ws_str())
    }

    /// A transcript whose lines name `cwd`, in Claude Code's project folder of that cwd.
    fn in_cwd(sb: &Sandbox, sid: &str, cwd: &str) -> Transcript {
        Transcript {
            path: project_dir(sb, cwd).join(format!("{sid}.jsonl")),
            sid: sid.to_owned(),
            cwd: cwd.to_owned(),
            n: 0,
            last: None,
        }
    }

    fn line(&mut self, kind: &str, rest: Value) -> String {
        self.n += 1;
        // Unique per transcript, as Claude Code's random uuids are: a uuid two transcripts
        // share means one was resumed from the other (its lines copied).
        let tail = &self.sid[self.sid.len() - 8..];
        let uuid = format!("{tail}-0000-4000-8000-{:012}", self.n);
        let mut v = json!({
            "type": kind, "uuid": uuid, "parentUuid": self.last, "sessionId": self.sid,
            "cwd": self.cwd, "version": "2.1.39", "timestamp": "2026-12-01T10:00:00.000Z",
            "isSidechain": false, "userType": "external",
        });
        if let (Value::Object(o), Value::Object(r)) = (&mut v, rest) {
            o.extend(r);
        }
        self.last = Some(uuid);
        v.to_string() + "\n"
    }

    fn prompt(&mut self, text: &str) -> String {
        self.line(
            "user",
            json!({"message": {"role": "user", "content": text}}),
        )
    }

    fn answer(&mut self, text: &str) -> String {
        let id = format!("msg_{}", self.n);
        self.line(
            "assistant",
            json!({"message": {"id": id, "role": "assistant", "content": [{"type": "text", "text": text}]}}),
        )
    }

    fn turn_duration(&mut self) -> String {
        self.line(
            "system",
            json!({"subtype": "turn_duration", "durationMs": 1200}),
        )
    }

    fn append(&self, lines: &[String]) {
        use std::io::Write;
        std::fs::create_dir_all(self.path.parent().expect("dir")).expect("project dir");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .expect("open the transcript");
        for l in lines {
            f.write_all(l.as_bytes()).expect("append a line");
        }
    }

    fn id(&self) -> String {
        format!("claude-code-{}", self.sid)
    }
}

fn codex_line(kind: &str, payload: Value) -> String {
    json!({"timestamp": "2026-12-02T10:00:00.000Z", "type": kind, "payload": payload}).to_string()
        + "\n"
}

fn append(path: &Path, lines: &[String]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open");
    for l in lines {
        f.write_all(l.as_bytes()).expect("append");
    }
}

/// A file's bytes and modification time.
fn fingerprint(path: &Path) -> (Vec<u8>, SystemTime) {
    let bytes = std::fs::read(path).expect("read");
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("mtime");
    (bytes, mtime)
}

fn set_mtime_days_ago(path: &Path, days: u64) {
    let at = SystemTime::now() - Duration::from_secs(days * 86_400);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .expect("mtime");
}

#[test]
fn claude_code_and_codex_logs_made_after_start_are_followed_signed_and_archived_untouched() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    // Both homes present, their trees empty.
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    std::fs::create_dir_all(sb.home.join("codex/sessions")).expect("sessions");
    let _d = Daemon::start(&sb, &[("CHAPTERS_IDLE_ARCHIVE_MS", "3000")]);
    let st = status(&sb);
    let harnesses: Vec<&str> = st["harnesses"]
        .as_array()
        .expect("harnesses")
        .iter()
        .filter(|h| h["present"] == true)
        .filter_map(|h| h["harness"].as_str())
        .collect();
    assert_eq!(harnesses, ["claude-code", "codex"], "{st}");

    // Claude Code: the project folder and the transcript appear after the start.
    let mut cc = Transcript::new(&sb, CC_SID);
    let (p, a) = (
        cc.prompt("Fix the tokenizer in src/lexer.rs"),
        cc.answer("The tokenizer now splits on unicode whitespace."),
    );
    cc.append(&[p, a]);
    // Followed (in flight, or — on a machine slow enough that the file was quiet for
    // `idleArchiveMs` before the daemon answered — already ended by the quiet: waiting for
    // `inFlight` alone waited for a window that can close first).
    wait_for("the transcript followed", || {
        session_status(&status(&sb), &cc.id()).is_some()
    });
    // Its turn ends at `system/turn_duration`: signed then.
    let end = cc.turn_duration();
    cc.append(&[end]);
    wait_for("the first Claude Code turn signed", || {
        signed(&sb, &cc.id()) == 1
    });
    let s = status(&sb);
    assert_eq!(
        session_status(&s, &cc.id()).expect("session")["harness"],
        "claude-code"
    );

    // Codex: `sessions/YYYY/MM/DD/` made after the start, a rollout in it.
    let day = sb.home.join("codex/sessions/2026/12/02");
    std::fs::create_dir_all(&day).expect("day dir");
    let rollout = day.join(format!("rollout-2026-12-02T10-00-00-{CODEX_ID}.jsonl"));
    append(
        &rollout,
        &[
            codex_line(
                "session_meta",
                json!({"id": CODEX_ID, "cwd": sb.ws_str(), "cli_version": "0.58.0"}),
            ),
            codex_line(
                "event_msg",
                json!({"type": "task_started", "turn_id": "t1"}),
            ),
            codex_line(
                "response_item",
                json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "run the migration tests"}]}),
            ),
            codex_line(
                "event_msg",
                json!({"type": "user_message", "message": "run the migration tests"}),
            ),
            codex_line(
                "response_item",
                json!({"type": "function_call", "name": "shell", "call_id": "c1", "arguments": "{\"command\":[\"cargo\",\"test\",\"migration\"]}"}),
            ),
            codex_line(
                "response_item",
                json!({"type": "function_call_output", "call_id": "c1", "output": "test result: ok. 4 passed"}),
            ),
            codex_line(
                "response_item",
                json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All four migration tests pass."}]}),
            ),
        ],
    );
    let codex_id = format!("codex-{CODEX_ID}");
    wait_for("the rollout followed", || {
        session_status(&status(&sb), &codex_id).is_some()
    });
    assert_eq!(signed(&sb, &codex_id), 0, "no turn end yet");
    append(
        &rollout,
        &[codex_line(
            "event_msg",
            json!({"type": "task_complete", "turn_id": "t1"}),
        )],
    );
    wait_for("the Codex turn signed at task_complete", || {
        signed(&sb, &codex_id) == 1
    });

    // A second Claude Code turn with no turn end of its own: it ends when the file has
    // been quiet for `idleArchiveMs`, is signed then, and the idle archive follows.
    let (p, a) = (
        cc.prompt("Now add a test for the tokenizer"),
        cc.answer("Added tests/lexer.rs covering unicode whitespace."),
    );
    cc.append(&[p, a]);
    let before_cc = fingerprint(&cc.path);
    let before_codex = fingerprint(&rollout);
    wait_for("the quiet Claude Code turn signed", || {
        signed(&sb, &cc.id()) == 2
    });
    wait_for("chapters of both harnesses archived when idle", || {
        chapters(&sb, &cc.id()) > 0 && chapters(&sb, &codex_id) > 0
    });
    wait_for("the idle archive reported", || {
        workspace_status(&status(&sb)).is_some_and(|w| w["lastArchive"]["moment"] == "idle")
    });
    // The daemon read both logs many times and changed neither.
    assert!(
        fingerprint(&cc.path) == before_cc,
        "the transcript was changed"
    );
    assert!(
        fingerprint(&rollout) == before_codex,
        "the rollout was changed"
    );
    let st = status(&sb);
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
}

#[test]
fn a_harness_turned_off_by_config_is_not_followed() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    let _d = Daemon::start(&sb, &[("CHAPTERS_CLAUDE_CODE_SESSIONS", "false")]);
    let mut cc = Transcript::new(&sb, CC_SID);
    let lines = [
        cc.prompt("Fix the build"),
        cc.answer("Fixed."),
        cc.turn_duration(),
    ];
    cc.append(&lines);
    // A DSH-side change makes the daemon pass its loop; the transcript stays unread.
    std::thread::sleep(Duration::from_millis(1500));
    let st = status(&sb);
    assert!(
        !st["harnesses"]
            .as_array()
            .expect("harnesses")
            .iter()
            .any(|h| h["harness"] == "claude-code"),
        "{st}"
    );
    assert!(session_status(&st, &cc.id()).is_none(), "{st}");
    assert_eq!(signed(&sb, &cc.id()), 0);
}

#[test]
fn a_transcript_near_claude_codes_sweep_is_archived_at_once() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("claude")).expect("claude home");
    std::fs::write(
        sb.home.join("claude/settings.json"),
        r#"{"cleanupPeriodDays": 10, "model": "opus"}"#,
    )
    .expect("settings");
    // Nine days old of ten: within the two-day margin. Its neighbour is a day old.
    let mut old = Transcript::new(&sb, CC_OLD);
    let lines = [
        old.prompt("Document the release process in RELEASING.md"),
        old.answer("RELEASING.md now lists the five release steps."),
        old.turn_duration(),
        old.prompt("Add the changelog step"),
        old.answer("Step six: update CHANGELOG.md."),
        old.turn_duration(),
    ];
    old.append(&lines);
    set_mtime_days_ago(&old.path, 9);
    let mut young = Transcript::new(&sb, CC_SID);
    let lines = [
        young.prompt("Rename the config loader"),
        young.answer("Renamed to load_settings."),
        young.turn_duration(),
    ];
    young.append(&lines);
    set_mtime_days_ago(&young.path, 1);
    let before = fingerprint(&old.path);
    // The default idle time (ten minutes): only the sweep can archive now.
    let _d = Daemon::start(&sb, &[]);
    wait_for("the old transcript archived", || {
        chapters(&sb, &old.id()) > 0
    });
    wait_for("the sweep archive reported", || {
        workspace_status(&status(&sb)).is_some_and(|w| w["lastArchive"]["moment"] == "sweep")
    });
    let st = status(&sb);
    let claude = st["harnesses"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["harness"] == "claude-code"))
        .unwrap_or_else(|| panic!("no claude-code entry: {st}"));
    assert_eq!(claude["sweepDays"], 10, "{st}");
    let codex = st["harnesses"]
        .as_array()
        .and_then(|hs| hs.iter().find(|h| h["harness"] == "codex"));
    assert!(
        codex.is_none_or(|c| c.get("sweepDays").is_none_or(|d| d.is_null())),
        "Codex never sweeps its logs: {st}"
    );
    wait_for("the young transcript signed", || {
        signed(&sb, &young.id()) == 1
    });
    assert_eq!(
        chapters(&sb, &young.id()),
        0,
        "far from the sweep: waits for idle"
    );
    assert!(
        fingerprint(&old.path) == before,
        "the transcript was changed"
    );
}

#[test]
fn a_transcript_that_vanished_before_it_was_archived_is_reported_not_as_corruption() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    let _d = Daemon::start(&sb, &[]);
    let mut cc = Transcript::new(&sb, CC_SID);
    let lines = [
        cc.prompt("Profile the slow query in src/db.rs"),
        cc.answer("The index on users.email was missing."),
        cc.turn_duration(),
    ];
    cc.append(&lines);
    wait_for("the turn signed", || signed(&sb, &cc.id()) == 1);
    // Claude Code's sweep (or a person) deletes it before any archive moment.
    std::fs::remove_file(&cc.path).expect("rm");
    wait_for("the vanished log reported", || {
        workspace_status(&status(&sb))
            .is_some_and(|w| w["vanished"].as_array().is_some_and(|v| !v.is_empty()))
    });
    let st = status(&sb);
    let w = workspace_status(&st).expect("workspace");
    assert_eq!(w["vanished"][0]["turns"], 1, "{st}");
    assert_eq!(w["vanished"][0]["harness"], "claude-code", "{st}");
    assert_eq!(
        st["lastErrors"].as_array().map_or(0, Vec::len),
        0,
        "not an error: {st}"
    );
    let out = sb.ok(&["status"]);
    let file = cc.path.to_string_lossy().into_owned();
    assert!(
        out.contains("vanished before archived: 1 turns, file") && out.contains(&file),
        "{out}"
    );
    assert!(!out.to_lowercase().contains("corrupt"), "{out}");
    let out = sb.ok(&["daemon", "status"]);
    assert!(out.contains("vanished before archived: 1 turns"), "{out}");
}

#[test]
fn a_transcript_whose_cwd_was_deleted_is_followed_in_its_checkout_and_one_elsewhere_is_said_not_here(
) {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    let _d = Daemon::start(&sb, &[]);
    // A monorepo package removed since the session ran in it: never created here.
    let gone = sb.ws.join("packages").join("removed");
    assert!(!gone.exists());
    let mut cc = Transcript::in_cwd(&sb, CC_SID, &gone.to_string_lossy());
    let lines = [
        cc.prompt("Drop the legacy package"),
        cc.answer("Removed packages/removed and its CI job."),
        cc.turn_duration(),
    ];
    cc.append(&lines);
    wait_for("the turn of the deleted cwd signed", || {
        signed(&sb, &cc.id()) == 1
    });
    // A transcript whose cwd lies in no checkout here: said why, not followed, no error.
    let nowhere = sb.home.join("nowhere").join("proj");
    let mut elsewhere = Transcript::in_cwd(&sb, CC_OLD, &nowhere.to_string_lossy());
    let lines = [
        elsewhere.prompt("Hello"),
        elsewhere.answer("Hi."),
        elsewhere.turn_duration(),
    ];
    elsewhere.append(&lines);
    let why = |st: &Value| -> Option<String> {
        st["harnesses"]
            .as_array()?
            .iter()
            .find(|h| h["harness"] == "claude-code")?["notFollowed"]
            .as_array()?
            .iter()
            .find(|n| {
                n["log"]
                    .as_str()
                    .is_some_and(|l| l.ends_with(&format!("{CC_OLD}.jsonl")))
            })?["why"]
            .as_str()
            .map(str::to_owned)
    };
    wait_for("the elsewhere transcript said not followed", || {
        why(&status(&sb)).is_some()
    });
    let st = status(&sb);
    let said = why(&st).expect("why");
    assert!(said.contains("is not here"), "{said}");
    assert!(said.contains("`pathMap`"), "what to do: {said}");
    assert_eq!(signed(&sb, &elsewhere.id()), 0);
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
}

#[test]
fn a_claude_code_compaction_archives_the_completed_turns() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    let _d = Daemon::start(&sb, &[]);
    let mut cc = Transcript::new(&sb, CC_SID);
    let lines = [
        cc.prompt("Split the router into modules"),
        cc.answer("src/router/ now has mod.rs, match.rs and table.rs."),
        cc.turn_duration(),
        cc.prompt("Move the tests beside each module"),
        cc.answer("Each module carries its own tests now."),
        cc.turn_duration(),
    ];
    cc.append(&lines);
    wait_for("both turns signed", || signed(&sb, &cc.id()) == 2);
    assert_eq!(chapters(&sb, &cc.id()), 0, "no archive before a moment");
    // Claude Code 2.x compacts: a boundary, then the summary as a user line.
    let boundary = cc.line(
        "system",
        json!({"subtype": "compact_boundary", "compactMetadata": {"trigger": "auto"}}),
    );
    let summary = cc.line(
        "user",
        json!({"isCompactSummary": true, "message": {"role": "user", "content": "This session is being continued from a previous conversation that ran out of context."}}),
    );
    cc.append(&[boundary, summary]);
    wait_for("chapters written by the compaction archive", || {
        chapters(&sb, &cc.id()) > 0
    });
    wait_for("the compaction archive reported", || {
        workspace_status(&status(&sb)).is_some_and(|w| w["lastArchive"]["reason"] == "compaction")
    });
}

#[test]
fn a_restart_after_kill_9_signs_each_claude_code_turn_once() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    let mut cc = Transcript::new(&sb, CC_SID);
    let d = Daemon::start(&sb, &[]);
    for i in 0..2 {
        let lines = [
            cc.prompt(&format!("Fix lint warning {i} in src/cache.rs")),
            cc.answer(&format!("Warning {i} fixed.")),
            cc.turn_duration(),
        ];
        cc.append(&lines);
        wait_for("the turn signed", || signed(&sb, &cc.id()) == i + 1);
    }
    // Half a turn, then kill -9: the restart resumes from its saved turn end (or reads
    // again from the start) and signs every turn once.
    let (p, a) = (
        cc.prompt("Fix lint warning 2"),
        cc.answer("Warning 2 fixed."),
    );
    cc.append(&[p, a]);
    std::thread::sleep(Duration::from_millis(700));
    drop(d);
    let end = cc.turn_duration();
    cc.append(&[end]);
    let _d = Daemon::start(&sb, &[]);
    wait_for("the third turn signed", || signed(&sb, &cc.id()) == 3);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(signed(&sb, &cc.id()), 3, "every turn once");
}

/// The bodies of every chapter of a session.
fn chapter_text(sb: &Sandbox, root: &str) -> String {
    let mut out = String::new();
    if let Ok(rd) = std::fs::read_dir(sb.store().join(root).join("chapters")) {
        let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "md"))
        {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            // The body only: the frontmatter's summary repeats an answer.
            let body = text.splitn(3, "---\n").nth(2).unwrap_or(&text);
            out.push_str(body);
        }
    }
    out
}

/// One completed Codex task: prompt, answer, `task_complete`.
fn codex_task(turn: &str, prompt: &str, answer: &str) -> Vec<String> {
    vec![
        codex_line(
            "event_msg",
            json!({"type": "task_started", "turn_id": turn}),
        ),
        codex_line(
            "event_msg",
            json!({"type": "user_message", "message": prompt}),
        ),
        codex_line(
            "response_item",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}),
        ),
        codex_line(
            "event_msg",
            json!({"type": "task_complete", "turn_id": turn}),
        ),
    ]
}

fn codex_meta(sb: &Sandbox, id: &str) -> String {
    codex_line(
        "session_meta",
        json!({"id": id, "cwd": sb.ws_str(), "cli_version": "0.146.0"}),
    )
}

#[test]
fn a_codex_compaction_archives_the_completed_turns_and_never_its_replacement_history() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let day = sb.home.join("codex/sessions/2026/12/02");
    std::fs::create_dir_all(&day).expect("day dir");
    // The default idle time (ten minutes): only the compaction can archive now.
    let _d = Daemon::start(&sb, &[]);
    let rollout = day.join(format!("rollout-2026-12-02T10-00-00-{CODEX_ID}.jsonl"));
    let mut lines = vec![codex_meta(&sb, CODEX_ID)];
    lines.extend(codex_task(
        "t1",
        "Port the scheduler to tokio",
        "The scheduler now runs on tokio.",
    ));
    lines.extend(codex_task(
        "t2",
        "Add a shutdown signal",
        "Ctrl-C now drains the queue first.",
    ));
    append(&rollout, &lines);
    let id = format!("codex-{CODEX_ID}");
    wait_for("both turns signed", || signed(&sb, &id) == 2);
    assert_eq!(chapters(&sb, &id), 0, "no archive before a moment");
    // Codex compacts mid-task (2026 shape): a `compacted` line whose replacement history
    // copies earlier items, then `context_compacted`; the task then completes.
    let mut lines = vec![
        codex_line(
            "event_msg",
            json!({"type": "task_started", "turn_id": "t3"}),
        ),
        codex_line(
            "event_msg",
            json!({"type": "user_message", "message": "Now document the shutdown path"}),
        ),
        codex_line(
            "compacted",
            json!({
                "message": "",
                "window_number": 2,
                "replacement_history": [
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Port the scheduler to tokio"}]},
                    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "REPLACEMENT-HISTORY-ONLY sentence"}]},
                ],
            }),
        ),
        codex_line("event_msg", json!({"type": "context_compacted"})),
    ];
    lines.extend(
        codex_task("t3", "unused", "docs/shutdown.md explains the drain.")[2..]
            .iter()
            .cloned(),
    );
    append(&rollout, &lines);
    wait_for("the compaction archive reported", || {
        workspace_status(&status(&sb)).is_some_and(|w| w["lastArchive"]["reason"] == "compaction")
    });
    wait_for("the third turn signed", || signed(&sb, &id) == 3);
    let text = chapter_text(&sb, &id);
    assert!(
        text.contains("The scheduler now runs on tokio."),
        "the turns before the compaction are archived"
    );
    assert!(
        !text.contains("REPLACEMENT-HISTORY-ONLY"),
        "the replacement history is never archived"
    );
    assert_eq!(
        text.matches("\nThe scheduler now runs on tokio.\n```")
            .count(),
        1,
        "each answer once: {text}"
    );
    let st = status(&sb);
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
}

/// Write `lines` compressed to `path` as Codex does: a temporary file, then into place.
fn write_zst(path: &Path, lines: &[String]) {
    let packed = zstd::encode_all(lines.concat().as_bytes(), 3).expect("compress");
    let tmp = path.with_file_name(".rollout-compression.tmp");
    std::fs::write(&tmp, packed).expect("write the compressed rollout");
    std::fs::rename(&tmp, path).expect("into place");
}

fn vanished(st: &Value) -> usize {
    workspace_status(st)
        .and_then(|w| w["vanished"].as_array())
        .map_or(0, Vec::len)
}

/// How Codex takes a rollout away from `sessions/YYYY/MM/DD/`.
#[derive(Clone, Copy, PartialEq)]
enum Replace {
    /// The plain file is deleted, then its `.jsonl.zst` appears.
    PlainGoneFirst,
    /// Codex's own order: the `.jsonl.zst` is linked into place, then the plain file goes.
    ZstFirst,
    /// `codex archive`: the rollout is renamed into `archived_sessions/`.
    MovedToArchive,
}

#[test]
fn a_rollout_replaced_by_its_zst_is_followed_there_archived_once_and_not_reported_lost() {
    replaced_rollout(Replace::PlainGoneFirst);
}

#[test]
fn a_rollout_recompressed_in_codexs_order_is_followed_in_its_zst() {
    replaced_rollout(Replace::ZstFirst);
}

#[test]
fn a_rollout_moved_to_archived_sessions_is_followed_there_not_reported_lost() {
    replaced_rollout(Replace::MovedToArchive);
}

fn replaced_rollout(how: Replace) {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let day = sb.home.join("codex/sessions/2026/11/20");
    std::fs::create_dir_all(&day).expect("day dir");
    let _d = Daemon::start(&sb, &[]);
    let plain = day.join(format!("rollout-2026-11-20T10-00-00-{CODEX_ID}.jsonl"));
    let mut lines = vec![codex_meta(&sb, CODEX_ID)];
    lines.extend(codex_task(
        "t1",
        "Cache the parsed manifests",
        "Manifests are cached by content hash.",
    ));
    lines.extend(codex_task(
        "t2",
        "Expire the cache after a day",
        "Entries older than a day are dropped.",
    ));
    append(&plain, &lines);
    let id = format!("codex-{CODEX_ID}");
    wait_for("both turns signed", || signed(&sb, &id) == 2);
    assert_eq!(chapters(&sb, &id), 0, "no archive moment yet");
    // Codex takes the rollout away (here its new file also holds a turn the daemon never
    // saw).
    lines.extend(codex_task(
        "t3",
        "Log cache misses",
        "Misses are logged at debug level.",
    ));
    let name = format!("rollout-2026-11-20T10-00-00-{CODEX_ID}.jsonl");
    let zst = day.join(format!("{name}.zst"));
    let now_at = match how {
        Replace::PlainGoneFirst => {
            std::fs::remove_file(&plain).expect("rm plain");
            write_zst(&zst, &lines);
            zst.clone()
        }
        Replace::ZstFirst => {
            write_zst(&zst, &lines);
            std::fs::remove_file(&plain).expect("rm plain");
            zst.clone()
        }
        Replace::MovedToArchive => {
            let archived = sb.home.join("codex/archived_sessions");
            std::fs::create_dir_all(&archived).expect("archived_sessions");
            append(&plain, &lines[lines.len() - 4..]);
            std::fs::rename(&plain, archived.join(&name)).expect("move");
            archived.join(&name)
        }
    };
    wait_for("the recompressed or moved rollout archived", || {
        workspace_status(&status(&sb)).is_some_and(|w| w["lastArchive"]["moment"] == "compressed")
    });
    assert_eq!(signed(&sb, &id), 3, "each turn signed once");
    let st = status(&sb);
    assert_eq!(vanished(&st), 0, "its new file holds it: not lost: {st}");
    let s = session_status(&st, &id).expect("followed");
    assert_eq!(s["log"], now_at.to_string_lossy().as_ref(), "{st}");
    let text = chapter_text(&sb, &id);
    for answer in [
        "Manifests are cached by content hash.",
        "Entries older than a day are dropped.",
        "Misses are logged at debug level.",
    ] {
        let fenced = format!("\n{answer}\n```");
        assert_eq!(text.matches(&fenced).count(), 1, "{answer} once: {text}");
    }
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
    let out = sb.ok(&["status"]);
    assert!(!out.contains("vanished before archived"), "{out}");
}

#[test]
fn codexs_archived_sessions_are_watched_and_an_archived_rollout_is_followed_into_its_zst() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("codex/sessions")).expect("sessions");
    let archived = sb.home.join("codex/archived_sessions");
    std::fs::create_dir_all(&archived).expect("archived_sessions");
    // `codex archive` moved this rollout out of `sessions/` while the daemon was stopped.
    let name = format!("rollout-2026-11-02T09-00-00-{CODEX_ID}.jsonl");
    let plain = archived.join(&name);
    let mut lines = vec![codex_meta(&sb, CODEX_ID)];
    lines.extend(codex_task(
        "t1",
        "Pin the toolchain",
        "rust-toolchain.toml pins the compiler.",
    ));
    lines.extend(codex_task(
        "t2",
        "Cache the registry in CI",
        "CI now caches ~/.cargo/registry.",
    ));
    append(&plain, &lines);
    // No full rescan while the test runs: only the start and the watch see these files.
    let _d = Daemon::start(&sb, &[("CHAPTERS_DAEMON_RESCAN_MS", "3600000")]);
    let id = format!("codex-{CODEX_ID}");
    wait_for("the archived rollout archived at once", || {
        chapters(&sb, &id) > 0
    });
    let st = status(&sb);
    let s = session_status(&st, &id).expect("followed");
    assert_eq!(s["log"], plain.to_string_lossy().as_ref(), "{st}");
    // A week on, Codex recompresses it there, in its order: the `.zst` into place, then
    // the plain file removed.
    write_zst(&archived.join(format!("{name}.zst")), &lines);
    std::fs::remove_file(&plain).expect("rm plain");
    let zst = archived.join(format!("{name}.zst"));
    wait_for("the recompressed rollout followed in its .zst", || {
        session_status(&status(&sb), &id)
            .is_some_and(|s| s["log"] == zst.to_string_lossy().as_ref())
    });
    let st = status(&sb);
    assert_eq!(vanished(&st), 0, "its .zst holds it: not lost: {st}");
    assert_eq!(signed(&sb, &id), 2, "each turn signed once");
    let text = chapter_text(&sb, &id);
    for answer in [
        "rust-toolchain.toml pins the compiler.",
        "CI now caches ~/.cargo/registry.",
    ] {
        let fenced = format!("\n{answer}\n```");
        assert_eq!(text.matches(&fenced).count(), 1, "{answer} once: {text}");
    }
    let codex = st["harnesses"]
        .as_array()
        .and_then(|h| h.iter().find(|h| h["harness"] == "codex"))
        .expect("codex in status");
    assert_eq!(
        codex["archivedTree"],
        archived.to_string_lossy().as_ref(),
        "{st}"
    );
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
}

#[test]
fn a_session_only_in_a_zst_at_start_is_archived_and_a_plain_file_hides_its_zst() {
    const OTHER: &str = "0199aaaa-0000-7000-8000-0000000000dd";
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let day = sb.home.join("codex/sessions/2026/11/01");
    std::fs::create_dir_all(&day).expect("day dir");
    let mut old = vec![codex_meta(&sb, CODEX_ID)];
    old.extend(codex_task(
        "t1",
        "Vendor the protobuf definitions",
        "proto/ now holds the vendored definitions.",
    ));
    let zst = day.join(format!("rollout-2026-11-01T09-00-00-{CODEX_ID}.jsonl.zst"));
    write_zst(&zst, &old);
    set_mtime_days_ago(&zst, 30);
    // Another session, live again: its plain file hides its older compressed copy.
    let mut live = vec![codex_meta(&sb, OTHER)];
    live.extend(codex_task(
        "t1",
        "Rename the crate",
        "The crate is now called wirecut.",
    ));
    let hidden = day.join(format!("rollout-2026-11-01T11-00-00-{OTHER}.jsonl.zst"));
    write_zst(&hidden, &live[..1]);
    live.extend(codex_task(
        "t2",
        "Update the README",
        "README.md names wirecut throughout.",
    ));
    let plain = hidden.with_extension("");
    append(&plain, &live);
    // Rescans every 300 ms poll every followed log again: a `.zst` read past its
    // compressed length is not "truncated".
    let d = Daemon::start(&sb, &[("CHAPTERS_DAEMON_RESCAN_MS", "300")]);
    let id = format!("codex-{CODEX_ID}");
    wait_for("the compressed-only session archived", || {
        chapters(&sb, &id) > 0
    });
    assert!(chapter_text(&sb, &id).contains("proto/ now holds the vendored definitions."));
    let other = format!("codex-{OTHER}");
    wait_for("the live session signed", || signed(&sb, &other) == 2);
    let st = status(&sb);
    let s = session_status(&st, &other).expect("followed");
    assert_eq!(s["log"], plain.to_string_lossy().as_ref(), "{st}");
    assert_eq!(
        chapters(&sb, &other),
        0,
        "a live rollout waits for its moment"
    );
    std::thread::sleep(Duration::from_millis(1200));
    let st = status(&sb);
    assert_eq!(
        session_status(&st, &id).expect("still followed")["log"],
        zst.to_string_lossy().as_ref()
    );
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
    // A restart resumes the `.zst` at its saved (decoded) position: no complaint.
    drop(d);
    let _d = Daemon::start(&sb, &[("CHAPTERS_DAEMON_RESCAN_MS", "300")]);
    std::thread::sleep(Duration::from_millis(1000));
    let st = status(&sb);
    assert!(session_status(&st, &id).is_some(), "{st}");
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
    assert_eq!(signed(&sb, &id), 1, "signed once");
}

/// How a Claude Code fork copies its parent's lines.
#[derive(Clone, Copy, PartialEq)]
enum ForkShape {
    /// `claude --resume <parent> --fork-session`: a `mode` line, then the parent's lines
    /// with their uuids under the fork's `sessionId`, no `forkedFrom`.
    ForkSession,
    /// The Agent SDK's `forkSession`: fresh uuids, each copy marked `forkedFrom`.
    SdkFreshUuids,
    /// `--fork-session` of a compacted parent: the copy starts at the compaction boundary
    /// (the chain from the leaf stops there), in the middle of the parent's file.
    CompactedParent,
}

#[test]
fn a_claude_code_fork_session_archives_its_parent_and_never_its_copied_prefix() {
    claude_code_fork(ForkShape::ForkSession);
}

#[test]
fn a_claude_code_fork_with_forked_from_marks_and_fresh_uuids_is_a_fork_too() {
    claude_code_fork(ForkShape::SdkFreshUuids);
}

#[test]
fn a_claude_code_fork_of_a_compacted_session_archives_its_parent_and_never_its_copies() {
    claude_code_fork(ForkShape::CompactedParent);
}

fn claude_code_fork(shape: ForkShape) {
    const FORK: &str = "0b0b0b0b-0000-4000-8000-0000000000ff";
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    // The default idle time (ten minutes): only the fork can archive the parent now.
    let _d = Daemon::start(&sb, &[]);
    let mut cc = Transcript::new(&sb, CC_SID);
    let mut parent_lines = vec![
        cc.prompt("Extract the retry policy into src/retry.rs"),
        cc.answer("src/retry.rs now holds RetryPolicy."),
        cc.turn_duration(),
    ];
    // What the fork copies: the parent's lines from `copied_from` on.
    let mut copied_from = 0;
    if shape == ForkShape::CompactedParent {
        // Claude Code 2.x compacts in the file: a boundary (its chain link only logical),
        // the summary as a user line; the parent goes on after it.
        copied_from = parent_lines.len();
        let logical = cc.last.take();
        parent_lines.push(cc.line(
            "system",
            json!({"subtype": "compact_boundary", "logicalParentUuid": logical, "compactMetadata": {"trigger": "auto"}}),
        ));
        parent_lines.push(cc.line(
            "user",
            json!({"isCompactSummary": true, "message": {"role": "user", "content": "This session is being continued from a previous conversation that ran out of context."}}),
        ));
    }
    parent_lines.extend([
        cc.prompt("Make the backoff exponential"),
        cc.answer("Backoff doubles up to thirty seconds."),
        cc.turn_duration(),
    ]);
    cc.append(&parent_lines);
    wait_for("the parent's turns signed", || signed(&sb, &cc.id()) == 2);
    if shape == ForkShape::CompactedParent {
        wait_for("the compaction archive reported", || {
            workspace_status(&status(&sb))
                .is_some_and(|w| w["lastArchive"]["reason"] == "compaction")
        });
    } else {
        assert_eq!(chapters(&sb, &cc.id()), 0, "no archive before a moment");
    }
    // The fork's file appears whole once its first turn ends.
    let mut fork = Transcript::new(&sb, FORK);
    fork.n = 100;
    let mut lines = Vec::new();
    match shape {
        ForkShape::ForkSession | ForkShape::CompactedParent => {
            lines.push(
                json!({"type": "mode", "mode": "normal", "sessionId": FORK}).to_string() + "\n",
            );
            for l in &parent_lines[copied_from..] {
                lines.push(l.replace(CC_SID, FORK));
            }
            fork.last = cc.last.clone();
        }
        ForkShape::SdkFreshUuids => {
            let mut last: Option<String> = None;
            for (i, l) in parent_lines.iter().enumerate() {
                let mut v: Value = serde_json::from_str(l).expect("json");
                let uuid = format!("00000000-0000-4000-8000-{:012}", 500 + i);
                v["forkedFrom"] = json!({"sessionId": CC_SID, "messageUuid": v["uuid"]});
                v["sessionId"] = json!(FORK);
                v["uuid"] = json!(uuid);
                v["parentUuid"] = json!(last);
                last = Some(uuid);
                lines.push(v.to_string() + "\n");
            }
            fork.last = last;
        }
    }
    lines.push(fork.prompt("Now make it jittered instead"));
    lines.push(fork.answer("Backoff now adds full jitter."));
    lines.push(fork.turn_duration());
    fork.append(&lines);
    wait_for("the parent archived", || chapters(&sb, &cc.id()) > 0);
    wait_for("the fork archive reported", || {
        workspace_status(&status(&sb)).is_some_and(|w| w["lastArchive"]["reason"] == "fork")
    });
    wait_for("the fork's own turn signed", || {
        signed(&sb, &fork.id()) == 1
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        signed(&sb, &fork.id()),
        1,
        "the copied turns are the parent's"
    );
    assert_eq!(signed(&sb, &cc.id()), 2);
    // Archived in full later, the fork's chapters hold only its own turn.
    sb.ok(&["archive"]);
    let fork_text = chapter_text(&sb, &fork.id());
    assert!(
        fork_text.contains("\nBackoff now adds full jitter.\n```"),
        "{fork_text}"
    );
    for copied in [
        "src/retry.rs now holds RetryPolicy.",
        "Backoff doubles up to thirty seconds.",
    ] {
        assert!(!fork_text.contains(copied), "{copied} archived twice");
        let parent_text = chapter_text(&sb, &cc.id());
        let fenced = format!("\n{copied}\n```");
        assert_eq!(parent_text.matches(&fenced).count(), 1, "{parent_text}");
    }
    let st = status(&sb);
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
}

#[test]
fn a_codex_fork_archives_its_parent_and_never_its_copied_lines() {
    const FORK: &str = "0199aaaa-0000-7000-8000-0000000000ee";
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let day = sb.home.join("codex/sessions/2026/12/02");
    std::fs::create_dir_all(&day).expect("day dir");
    let _d = Daemon::start(&sb, &[]);
    let mut parent = vec![codex_meta(&sb, CODEX_ID)];
    parent.extend(codex_task(
        "t1",
        "Split the config loader",
        "config/ now has load.rs and merge.rs.",
    ));
    append(
        &day.join(format!("rollout-2026-12-02T10-00-00-{CODEX_ID}.jsonl")),
        &parent,
    );
    let id = format!("codex-{CODEX_ID}");
    wait_for("the parent's turn signed", || signed(&sb, &id) == 1);
    assert_eq!(chapters(&sb, &id), 0, "no archive before a moment");
    // The fork: its own meta naming the parent, the parent's lines copied, its own task.
    let mut fork = vec![codex_line(
        "session_meta",
        json!({"id": FORK, "cwd": sb.ws_str(), "cli_version": "0.146.0", "forked_from_id": CODEX_ID}),
    )];
    fork.extend(parent[1..].iter().cloned());
    fork.extend(codex_task(
        "t2",
        "Now validate the merged config",
        "merge.rs rejects unknown keys.",
    ));
    append(
        &day.join(format!("rollout-2026-12-02T11-00-00-{FORK}.jsonl")),
        &fork,
    );
    wait_for("the parent archived at the fork", || chapters(&sb, &id) > 0);
    wait_for("the fork archive reported", || {
        workspace_status(&status(&sb)).is_some_and(|w| w["lastArchive"]["reason"] == "fork")
    });
    let fork_id = format!("codex-{FORK}");
    wait_for("the fork's own turn signed", || signed(&sb, &fork_id) == 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(signed(&sb, &fork_id), 1, "the copied turn is the parent's");
}

#[test]
fn a_transcript_from_another_machine_is_followed_through_the_path_map() {
    // A Windows machine's transcript copied here (its cwd `C:\Users\ana\proj\pkg`, a
    // package of the repository): the daemon's `pathMap` (the home config) finds its
    // workspace, as it does for DSH's sessions.
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let home_config = sb.home.join("dsh-chapters/config.yml");
    let mut config = std::fs::read_to_string(&home_config).unwrap_or_default();
    config.push_str(&format!(
        "pathMap:\n  'C:\\Users\\ana\\proj': {}\n",
        sb.ws_str()
    ));
    std::fs::write(&home_config, config).expect("home config");
    std::fs::create_dir_all(sb.home.join("claude/projects")).expect("projects");
    let _d = Daemon::start(&sb, &[]);
    let mut cc = Transcript::in_cwd(&sb, CC_SID, r"C:\Users\ana\proj\pkg");
    let lines = [
        cc.prompt("Fix the parser"),
        cc.answer("Fixed pkg/src/parse.rs."),
        cc.turn_duration(),
    ];
    cc.append(&lines);
    wait_for("the Windows transcript's turn signed", || {
        signed(&sb, &cc.id()) == 1
    });
    let st = status(&sb);
    assert_eq!(st["lastErrors"].as_array().map_or(0, Vec::len), 0, "{st}");
}

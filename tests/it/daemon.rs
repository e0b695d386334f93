//! The daemon end to end: the real binary, real zstd logs grown frame by frame while it
//! runs, real inotify, real signals, kill -9.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use dsh_chapters::daemon::control::{Client, Request};
use dsh_chapters::session::Header;
use dsh_chapters::testkit::writer::{LogWriter, SessionScript, TurnSpec};
use serde_json::{json, Value};

use crate::support::{
    ledger_lines, link_private, signed_turns, two_task_turns, Migration, Sandbox, START_MS,
};

const P: &str = "session-11111111-1111-4111-8111-111111111111";
const C: &str = "session-22222222-2222-4222-8222-222222222222";
const Q: &str = "session-33333333-3333-4333-8333-333333333333";

/// Long enough for a loaded CI machine; every wait ends as soon as its condition holds.
const WAIT: Duration = Duration::from_secs(30);

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

/// A daemon in the foreground, as a child of the test.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(sb: &Sandbox, env: &[(&str, &str)]) -> Daemon {
        let child = spawn(sb, env);
        let d = Daemon { child };
        wait_for("the daemon's socket", || {
            Client::connect(&socket(sb), Duration::from_secs(5)).is_ok()
        });
        d
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .args([format!("-{name}"), self.pid().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{name}");
    }

    fn wait_exit(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(started.elapsed() < WAIT, "the daemon did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn spawn(sb: &Sandbox, env: &[(&str, &str)]) -> Child {
    let mut cmd = sb.cmd(&["daemon", "--foreground"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the daemon")
}

fn status(sb: &Sandbox) -> Value {
    let mut c = Client::connect(&socket(sb), Duration::from_secs(10)).expect("connect");
    c.request(Request::Status, &socket(sb)).expect("status")
}

/// A session log being written live, frame by frame.
struct Live {
    writer: LogWriter,
    script: SessionScript,
}

impl Live {
    fn create(sb: &Sandbox, id: &str, edit: impl FnOnce(&mut Header)) -> Live {
        Live::create_in(&sb.home, &sb.ws_str(), id, edit)
    }

    fn create_in(home: &Path, ws: &str, id: &str, edit: impl FnOnce(&mut Header)) -> Live {
        let path = dsh_chapters::testkit::writer::session_log_path(home, ws, id, 4, true);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        let script = SessionScript::new(4, START_MS);
        let mut header = script.header(id, ws, START_MS);
        edit(&mut header);
        let writer = LogWriter::create(&path, true, &header).expect("create log");
        Live { writer, script }
    }

    fn turn(&mut self, i: usize) {
        let spec = TurnSpec::new(
            &format!("Fix the parser for input case {i} in src/parse.rs"),
            &format!("Parser case {i} fixed."),
        );
        self.writer
            .append_turn(&mut self.script, &spec)
            .expect("append turn");
    }

    fn in_flight(&mut self, i: usize) {
        let mut spec = TurnSpec::new(&format!("Now look at case {i}"), "working");
        spec.end_reason = None;
        self.writer
            .append_turn(&mut self.script, &spec)
            .expect("append turn");
    }

    fn event(&mut self, kind: &str, data: Value) {
        let seq = self.script.next_seq();
        // The script does not know this event: continue its numbering by hand.
        self.script = SessionScript::starting_at(
            4,
            seq + 1,
            self.script.next_turn(),
            self.script.clock_ms() + 1,
        );
        self.writer
            .append_batch(&[json!({"type": kind, "seq": seq, "time": START_MS, "data": data})])
            .expect("append event");
    }

    fn path(&self) -> &Path {
        self.writer.path()
    }
}

/// The `turn/end` seqs of a session's collection ledger, in order.
fn signed(sb: &Sandbox, root: &str, session: &str) -> Vec<u64> {
    signed_in(&sb.store(), root, session)
}

fn signed_in(store: &Path, root: &str, session: &str) -> Vec<u64> {
    ledger_lines(store, root, session)
        .iter()
        .map(|v| {
            v["seqs"]
                .as_array()
                .and_then(|a| a.last())
                .and_then(Value::as_u64)
                .expect("seqs")
        })
        .collect()
}

/// Every completed turn's `turn/end` seq in a log, read by the library's own reader.
fn completed_ends(log: &Path) -> Vec<u64> {
    use dsh_chapters::session::reader::{LogItem, LogReader, ResumePoint};
    let mut reader = LogReader::open(log, ResumePoint::default()).expect("open");
    let mut out = Vec::new();
    while let Ok(Some(item)) = reader.next_item() {
        if let LogItem::Event(e) = item {
            if e.kind == "turn/end" {
                out.push(e.seq);
            }
        }
    }
    out
}

fn chapters(store: &Path, root: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(store.join(root).join("chapters"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".md") && !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn session_status<'a>(status: &'a Value, id: &str) -> Option<&'a Value> {
    status["workspaces"]
        .as_array()?
        .iter()
        .flat_map(|w| w["sessions"].as_array().into_iter().flatten())
        .find(|s| s["sessionId"] == id)
}

/// The daemon has read `log` up to its current end.
fn caught_up(sb: &Sandbox, id: &str, log: &Path) -> bool {
    let len = std::fs::metadata(log).expect("log").len();
    session_status(&status(sb), id).is_some_and(|s| s["offset"] == len)
}

#[test]
fn lifecycle_status_second_daemon_refused_and_stop() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    live.turn(0);
    let mut d = Daemon::start(&sb, &[]);
    wait_for("the first turn signed", || signed(&sb, P, P).len() == 1);

    let s = sb.json(&["daemon", "status", "--json"]);
    assert_eq!(s["running"], true);
    assert_eq!(s["pid"], d.pid());
    assert_eq!(s["sessionsWatched"], 1);
    assert_eq!(s["workspacesFollowed"], 1);
    assert_eq!(s["pollingFallback"], false);
    assert!(s["uptimeSecs"].is_u64() && s["queueDepth"].is_u64(), "{s}");
    assert!(s["signing"]["p99Ms"].is_number(), "{s}");
    let text = sb.ok(&["daemon", "status"]);
    assert!(text.contains(&format!("daemon pid {}", d.pid())), "{text}");

    // One daemon per DSH_HOME: a second one refuses, naming the holder.
    let second = sb.run(&["daemon", "--foreground"]);
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains(&format!("pid {}", d.pid())), "{err}");
    // So does a background start.
    let bg = sb.run(&["daemon"]);
    assert_eq!(
        bg.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&bg.stderr)
    );

    let out = sb.ok(&["daemon", "stop"]);
    assert!(out.contains("stopped"), "{out}");
    assert!(d.wait_exit().success());
    assert!(!socket(&sb).exists(), "the socket is removed at stop");
    let s = sb.json(&["daemon", "status", "--json"]);
    assert_eq!(s["running"], false);
    assert!(sb.ok(&["daemon", "stop"]).contains("no daemon"));
    // Logs went to the daemon's home, not to the sessions.
    let log = std::fs::read_to_string(sb.home.join("dsh-chapters/logs/daemon.log")).expect("log");
    assert!(
        log.contains("daemon started") && log.contains("daemon stopped"),
        "{log}"
    );
}

#[test]
fn background_start_then_stop() {
    let sb = Sandbox::new();
    let out = sb.ok(&["daemon"]);
    assert!(out.contains("daemon started (pid"), "{out}");
    let s = sb.json(&["daemon", "status", "--json"]);
    assert_eq!(s["running"], true);
    let pid = s["pid"].as_u64().expect("pid");
    assert!(sb.ok(&["daemon", "stop"]).contains(&format!("pid {pid}")));
    assert_eq!(sb.json(&["daemon", "status", "--json"])["running"], false);
}

/// The daemon's stderr once it has exited.
fn stderr_of(d: &mut Daemon) -> String {
    let mut text = String::new();
    if let Some(mut err) = d.child.stderr.take() {
        std::io::Read::read_to_string(&mut err, &mut text).expect("read stderr");
    }
    text
}

/// A critical error — one the daemon cannot continue after — stops it with exit 1 and a
/// message saying what happened: its home deleted under it.
#[test]
fn its_home_deleted_while_it_runs_stops_the_daemon_with_exit_1_saying_why() {
    stops_with_exit_1_saying(
        |sb| {
            std::fs::remove_dir_all(sb.home.join("dsh-chapters")).expect("remove the daemon's home")
        },
        "was deleted while it ran",
    );
}

/// Start a daemon, do `critical` to its home while it runs, and see it stop with exit 1 and
/// `says` on stderr.
fn stops_with_exit_1_saying(critical: impl FnOnce(&Sandbox), says: &str) {
    let sb = Sandbox::new();
    let mut d = Daemon::start(&sb, &[("CHAPTERS_DAEMON_RESCAN_MS", "100")]);
    critical(&sb);
    let status = d.wait_exit();
    let err = stderr_of(&mut d);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(says), "{err}");
}

/// Its lock file removed no longer keeps a second daemon out: critical, the daemon stops
/// with exit 1 naming the lock; a runtime error (a damaged log, a failed sync) never does.
#[test]
fn its_lock_file_removed_while_it_runs_stops_the_daemon_with_exit_1_naming_it() {
    stops_with_exit_1_saying(
        |sb| {
            std::fs::remove_file(sb.home.join("dsh-chapters/daemon.pid")).expect("remove the lock")
        },
        "daemon.pid was removed or replaced",
    );
}

#[test]
fn a_live_session_gets_every_completed_turn_signed_and_the_in_flight_one_not() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    live.turn(0);
    let _d = Daemon::start(&sb, &[]);
    for i in 1..20 {
        live.turn(i);
        let want = i + 1;
        wait_for("turn signed", || signed(&sb, P, P).len() == want);
    }
    live.in_flight(20);
    wait_for("the daemon read the in-flight frame", || {
        caught_up(&sb, P, live.path())
    });
    let ends = signed(&sb, P, P);
    assert_eq!(
        ends,
        completed_ends(live.path()),
        "exactly the completed turns"
    );
    let s = status(&sb);
    assert!(
        session_status(&s, P).expect("session")["inFlight"].is_array(),
        "{s}"
    );
    // Completing it signs it.
    live.event(
        "turn/end",
        json!({"turn": 20, "reason": {"kind": "completed"}}),
    );
    wait_for("the completed turn signed", || {
        signed(&sb, P, P).len() == 21
    });
    assert_eq!(signed(&sb, P, P), completed_ends(live.path()));
    // `chapters archive` takes the writer lock and runs while the daemon does; it signs
    // nothing twice.
    sb.ok(&["archive"]);
    assert_eq!(signed(&sb, P, P), completed_ends(live.path()));
    assert!(!chapters(&sb.store(), P).is_empty());
}

#[test]
fn an_add_rule_line_becomes_a_session_rule_at_the_signing_point() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[]);
    live.turn(0);
    let spec = TurnSpec::new(
        "Fix the lexer next.\nADD RULE: run cargo fmt before every commit",
        "Noted; fixing the lexer.",
    );
    live.writer
        .append_turn(&mut live.script, &spec)
        .expect("append turn");
    wait_for("both turns signed", || signed(&sb, P, P).len() == 2);
    // Written before the signature, so it is there once the turn is signed.
    let rules: Vec<_> = std::fs::read_dir(sb.store().join("rules"))
        .expect("a rules directory")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert!(rules[0].starts_with("s-"), "{rules:?}");
    let active = sb.ok(&["rule", "active", "--session", P]);
    assert!(
        active.contains("run cargo fmt before every commit"),
        "{active}"
    );
    // The archive that follows does not capture it again.
    let report = sb.json(&["archive", "--json"]);
    assert!(
        !report.to_string().contains("\"sessionRules\":[\"s-"),
        "{report}"
    );
}

#[test]
fn polling_fallback_follows_too_and_says_so() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(
        &sb,
        &[
            ("CHAPTERS_DAEMON_WATCH", "poll"),
            ("CHAPTERS_DAEMON_POLL_MS", "50"),
        ],
    );
    for i in 0..3 {
        live.turn(i);
    }
    wait_for("turns signed by polling", || signed(&sb, P, P).len() == 3);
    let s = status(&sb);
    assert_eq!(s["pollingFallback"], true);
    assert!(
        s["pollingReason"]
            .as_str()
            .unwrap_or("")
            .contains("daemonWatch"),
        "{s}"
    );
}

#[test]
fn new_workspaces_and_sessions_after_start_are_picked_up() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let _d = Daemon::start(&sb, &[]);
    // A session in the enabled workspace, created after the start.
    let mut a = Live::create(&sb, P, |_| {});
    a.turn(0);
    wait_for("the new session signed", || signed(&sb, P, P).len() == 1);
    // A new workspace, enabled after the start, with a session of its own.
    let ws2 = sb.home.parent().expect("root").join("ws2");
    std::fs::create_dir_all(&ws2).expect("ws2");
    let init = sb.cmd(&["init"]).current_dir(&ws2).output().expect("init");
    assert!(init.status.success());
    let mut b = Live::create_in(&sb.home, &ws2.to_string_lossy(), Q, |_| {});
    b.turn(0);
    b.turn(1);
    let store2 = ws2.join(".dsh-chapters");
    wait_for("the new workspace's session signed", || {
        signed_in(&store2, Q, Q).len() == 2
    });
    // A workspace that is not enabled is seen, not followed, and nothing is written to it.
    let ws3 = sb.home.parent().expect("root").join("ws3");
    std::fs::create_dir_all(&ws3).expect("ws3");
    let mut c = Live::create_in(&sb.home, &ws3.to_string_lossy(), C, |_| {});
    c.turn(0);
    wait_for("the disabled workspace listed", || {
        status(&sb)["workspaces"]
            .as_array()
            .expect("workspaces")
            .iter()
            .any(|w| w["workspace"] == ws3.to_string_lossy().as_ref() && w["followed"] == false)
    });
    assert!(!ws3.join(".dsh-chapters").exists());
    assert_eq!(status(&sb)["workspacesFollowed"], 2);
}

#[test]
fn a_compaction_archives_the_completed_turns() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[]);
    for i in 0..4 {
        live.turn(i);
    }
    wait_for("turns signed", || signed(&sb, P, P).len() == 4);
    assert!(
        chapters(&sb.store(), P).is_empty(),
        "no archive before a moment"
    );
    live.event("compaction/start", json!({}));
    live.event("compaction/end", json!({}));
    wait_for("chapters written by the compaction archive", || {
        !chapters(&sb.store(), P).is_empty()
    });
    wait_for("the archive reported", || {
        status(&sb)["workspaces"][0]["lastArchive"]["reason"] == "compaction"
    });
}

#[test]
fn an_idle_session_is_archived() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[("CHAPTERS_IDLE_ARCHIVE_MS", "300")]);
    for i in 0..3 {
        live.turn(i);
    }
    wait_for("chapters written when idle", || {
        !chapters(&sb.store(), P).is_empty()
    });
    // The chapters land before the job reports back: wait for its report.
    wait_for("the idle archive reported", || {
        status(&sb)["workspaces"][0]["lastArchive"]["reason"] == "idle"
    });
    // `chapters status` shows what the daemon does here.
    let st = sb.json(&["status", "--json"]);
    let d = &st["daemon"];
    assert_eq!(d["running"], true, "{st}");
    assert_eq!(d["followsThisWorkspace"], true, "{st}");
    assert_eq!(d["sessions"], 1, "{st}");
    assert_eq!(d["lastArchive"]["reason"], "idle", "{st}");
    assert!(sb.ok(&["status"]).contains("daemon      running"));
}

#[test]
fn idle_time_enrichment_annotates_archived_chapters_in_the_background() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let server = crate::enrich::serve(vec![], crate::enrich::good("Annotated by the daemon"));
    sb.ok(&[
        "enrich",
        "model",
        "--endpoint",
        &server.url,
        "--model",
        "m1",
    ]);
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(
        &sb,
        &[
            ("CHAPTERS_IDLE_ARCHIVE_MS", "300"),
            ("CHAPTERS_ENRICHMENT_IDLE_MS", "300"),
        ],
    );
    for i in 0..3 {
        live.turn(i);
    }
    wait_for("a chapter annotated by the model", || {
        chapters(&sb.store(), P).iter().any(|c| {
            std::fs::read_to_string(sb.store().join(P).join("chapters").join(c))
                .is_ok_and(|t| t.contains("Annotated by the daemon"))
        })
    });
    wait_for("the batch reported", || {
        status(&sb)["workspaces"][0]["lastEnrich"]["annotated"]
            .as_u64()
            .is_some_and(|n| n >= 1)
    });
    // Chapters archived after that batch reach the next one: the enrich thread keeps what
    // it read of the store and learns of new chapters from the store's catalog.
    let first: BTreeSet<String> = chapters(&sb.store(), P).into_iter().collect();
    for i in 3..6 {
        live.turn(i);
    }
    wait_for("a later chapter annotated by the model", || {
        chapters(&sb.store(), P)
            .iter()
            .filter(|c| !first.contains(*c))
            .any(|c| {
                std::fs::read_to_string(sb.store().join(P).join("chapters").join(c))
                    .is_ok_and(|t| t.contains("Annotated by the daemon"))
            })
    });
    // Every turn signed exactly once while it ran.
    assert_eq!(signed(&sb, P, P), completed_ends(live.path()));
}

fn pool_files(pool: &Path) -> BTreeSet<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["ls-tree", "-r", "--name-only", "main"])
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_fork_pulls_archives_the_parent_and_pushes() {
    let sb = Sandbox::new();
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    sb.ok(&["init"]);
    link_private(&sb, &pool);
    let mut parent = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[("CHAPTERS_SYNC_DEBOUNCE_MS", "100")]);
    for i in 0..3 {
        parent.turn(i);
    }
    wait_for("parent turns signed", || signed(&sb, P, P).len() == 3);
    let seed = parent.script.next_seq();
    let mut child = Live::create(&sb, C, |h| {
        h.parent_session = Some(P.into());
        h.is_seeded = true;
        h.seed_length = Some(seed);
    });
    // The fork's copy of its parent's events, then its own first turn.
    child.script = SessionScript::starting_at(4, 0, 0, START_MS);
    for i in 0..3 {
        child.turn(i);
    }
    child.turn(3);
    wait_for("the parent archived and pushed", || {
        pool_files(&pool)
            .iter()
            .any(|f| f.starts_with("chapters/") && f.contains(P))
    });
    wait_for("the fork's archive reported", || {
        let s = status(&sb);
        let ws = &s["workspaces"][0];
        ws["lastArchive"]["reason"] == "fork"
            && ws["lastSync"]["ok"] == true
            && ws["linked"] == true
    });
    // The child's own turn is signed into the root's collections; its seeded prefix is not.
    wait_for("the child's own turn signed", || {
        signed(&sb, P, C).len() == 1
    });
    // sync-now publishes it (the collection line) without waiting for a moment.
    let mut c = Client::connect(&socket(&sb), Duration::from_secs(10)).expect("connect");
    let v = c.request(Request::SyncNow, &socket(&sb)).expect("sync-now");
    assert_eq!(v["queued"], 1, "{v}");
    wait_for("the child's collection in the pool", || {
        pool_files(&pool)
            .iter()
            .any(|f| f.starts_with("collections/") && f.ends_with(&format!("{C}.jsonl")))
    });
}

/// §5.1's sync points: a new session of a linked workspace pulls (another machine's work
/// arrives in the mirror); an archive pushes once `syncDebounceMs` has passed.
#[test]
fn a_new_session_pulls_and_an_archive_pushes_after_the_debounce() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let other = Sandbox::machine("machine-b");
    other.write_session(Q, 4, true, &two_task_turns(&other.ws));
    other.ok(&["init"]);
    other.ok(&["archive"]);
    link_private(&other, &pool);
    other.ok(&["sync"]);

    let sb = Sandbox::new();
    sb.ok(&["init"]);
    link_private(&sb, &pool);
    let _d = Daemon::start(&sb, &[("CHAPTERS_SYNC_DEBOUNCE_MS", "300")]);
    // Pulled: in the mirror's files or its packed objects (`pool::mirror`).
    let mirrored = || {
        crate::pool::mirror_documents(&sb, "chapters/")
            .iter()
            .any(|(p, _)| p.contains(Q))
    };
    assert!(!mirrored(), "nothing pulled before a new session");
    let mut live = Live::create(&sb, P, |_| {});
    live.turn(0);
    wait_for(
        "the new session's pull brought machine-b's chapters",
        mirrored,
    );
    live.turn(1);
    live.event("compaction/start", json!({}));
    live.event("compaction/end", json!({}));
    wait_for("the compaction archive pushed after the debounce", || {
        pool_files(&pool)
            .iter()
            .any(|f| f.starts_with("chapters/") && f.contains(P))
    });
}

/// A pool that fails: logged, shown in both statuses, retried with a backoff — and the
/// archive still writes its chapters.
#[test]
fn a_failing_pool_is_shown_and_never_fails_an_archive() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    link_private(&sb, &pool);
    // The pool's path is taken by a plain file: no sync can succeed.
    std::fs::write(&pool, b"not a repository").expect("block the pool");
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[("CHAPTERS_SYNC_DEBOUNCE_MS", "100")]);
    for i in 0..3 {
        live.turn(i);
    }
    live.event("compaction/start", json!({}));
    live.event("compaction/end", json!({}));
    wait_for("the archive wrote its chapters", || {
        !chapters(&sb.store(), P).is_empty()
    });
    wait_for("the failed push is shown", || {
        let s = status(&sb);
        let ws = &s["workspaces"][0];
        ws["lastSync"]["ok"] == false
            && ws["syncFailures"].as_u64().is_some_and(|n| n >= 1)
            && s["lastErrors"]
                .to_string()
                .contains("the archive is not affected")
    });
    let st = sb.json(&["status", "--json"]);
    assert_eq!(st["mode"], "local-only", "{st}");
    assert_ne!(st["lastSyncCode"], "ok", "{st}");
    assert!(
        st["lastSyncHint"].as_str().is_some_and(|h| !h.is_empty()),
        "{st}"
    );
}

/// The signer never waits on the writer lock an archive or a sync holds.
#[test]
fn signing_never_waits_for_the_writer_lock() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[]);
    live.turn(0);
    wait_for("signed", || signed(&sb, P, P).len() == 1);
    let store = dsh_chapters::store::Store::open(&sb.ws).expect("store");
    let held = store.lock(Duration::from_secs(5)).expect("the writer lock");
    for i in 1..4 {
        live.turn(i);
    }
    wait_for("turns signed while the writer lock is held", || {
        signed(&sb, P, P).len() == 4
    });
    // An archive meanwhile waits for the lock, as every writer does.
    let out = sb
        .cmd(&["archive"])
        .env("CHAPTERS_WRITER_LOCK_TIMEOUT_MS", "200")
        .output()
        .expect("archive");
    assert_eq!(
        out.status.code(),
        Some(1),
        "the archive cannot take the held lock"
    );
    drop(held);
    sb.ok(&["archive"]);
    assert!(!chapters(&sb.store(), P).is_empty());
}

#[test]
fn sigterm_and_sigint_exit_zero() {
    for signal in ["TERM", "INT"] {
        let sb = Sandbox::new();
        sb.ok(&["init"]);
        let mut live = Live::create(&sb, P, |_| {});
        let mut d = Daemon::start(&sb, &[]);
        live.turn(0);
        wait_for("signed", || signed(&sb, P, P).len() == 1);
        d.signal(signal);
        let exit = d.wait_exit();
        assert_eq!(exit.code(), Some(0), "SIG{signal}: {exit}");
        // Where it stopped is saved for the next start.
        let state = std::fs::read_to_string(sb.home.join("dsh-chapters/daemon-state.json"))
            .expect("state saved");
        assert!(state.contains(P), "{state}");
    }
}

#[test]
fn reload_refuses_a_bad_config_by_name_and_keeps_the_old() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let d = Daemon::start(&sb, &[]);
    let config = sb.home.join("dsh-chapters/config.yml");
    std::fs::write(&config, "syncDebounceMs: 5\nidleArchiveMs: banana\n").expect("config");
    // Over the socket: refused, with the key and the file:line.
    let mut c = Client::connect(&socket(&sb), Duration::from_secs(10)).expect("connect");
    let err = c
        .request(Request::Reload, &socket(&sb))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("idleArchiveMs") && err.contains("config.yml:2"),
        "{err}"
    );
    assert!(err.contains("previous configuration stays"), "{err}");
    // By SIGHUP: the same, shown in status; the daemon carries on.
    std::fs::write(&config, "idleArchiveMs: -3\n").expect("config");
    d.signal("HUP");
    wait_for("the refused reload shown", || {
        let s = status(&sb);
        s["lastReload"]["ok"] == false
            && s["lastReload"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("idleArchiveMs") && e.contains("config.yml:1"))
    });
    // A good one is taken.
    std::fs::write(&config, "idleArchiveMs: 1234\n").expect("config");
    let v = c.request(Request::Reload, &socket(&sb)).expect("reload");
    assert_eq!(v["reloaded"], true);
    assert_eq!(status(&sb)["lastReload"]["ok"], true);
}

#[test]
fn hostile_control_input_is_refused_and_the_daemon_survives() {
    let sb = Sandbox::new();
    let _d = Daemon::start(&sb, &[]);
    let mut raw = UnixStream::connect(socket(&sb)).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut reader = BufReader::new(raw.try_clone().expect("clone"));
    let mut hello = String::new();
    reader.read_line(&mut hello).expect("hello");
    let hello: Value = serde_json::from_str(&hello).expect("hello is JSON");
    assert_eq!(hello["v"], 1);
    assert_eq!(hello["hello"], "dsh-chapters-daemon");
    raw.write_all(b"{\"v\":1,\"request\":\"status\"\n")
        .expect("write");
    let mut answer = String::new();
    reader.read_line(&mut answer).expect("answer");
    assert!(answer.contains("\"ok\":false"), "{answer}");
    raw.write_all(b"{\"v\":1,\"request\":\"format-disk\"}\n")
        .expect("write");
    answer.clear();
    reader.read_line(&mut answer).expect("answer");
    assert!(answer.contains("unknown request"), "{answer}");
    // A line over the cap: an error, then the connection is closed.
    let _ = raw.write_all(&vec![b'{'; 200 * 1024]);
    answer.clear();
    reader.read_line(&mut answer).expect("answer");
    assert!(answer.contains("longer than"), "{answer}");
    // Many idle connections at once, dropped: the daemon still answers.
    let idle: Vec<UnixStream> = (0..20)
        .filter_map(|_| UnixStream::connect(socket(&sb)).ok())
        .collect();
    drop(idle);
    wait_for(
        "the daemon answering again once the idle connections are gone",
        || {
            Client::connect(&socket(&sb), Duration::from_secs(5))
                .and_then(|mut c| c.request(Request::Status, &socket(&sb)))
                .is_ok_and(|s| s["pid"].is_u64())
        },
    );
}

#[test]
fn bad_logs_are_reported_and_the_others_carry_on() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut good = Live::create(&sb, P, |_| {});
    let mut garbled = Live::create(&sb, C, |_| {});
    let mut truncated = Live::create(&sb, Q, |_| {});
    let _d = Daemon::start(&sb, &[]);
    for live in [&mut good, &mut garbled, &mut truncated] {
        live.turn(0);
        live.turn(1);
    }
    wait_for("all signed", || {
        signed(&sb, P, P).len() == 2 && signed(&sb, C, C).len() == 2 && signed(&sb, Q, Q).len() == 2
    });
    // Garbage appended to one log.
    let mut raw = std::fs::OpenOptions::new()
        .append(true)
        .open(garbled.path())
        .expect("open");
    raw.write_all(b"\x28\xb5\x2f\xfdthis is not a zstd frame at all......")
        .expect("garbage");
    drop(raw);
    // Another truncated under the daemon.
    let len = std::fs::metadata(truncated.path()).expect("len").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(truncated.path())
        .expect("open")
        .set_len(len / 2)
        .expect("truncate");
    // The good one carries on.
    good.turn(2);
    wait_for("the good session signed on", || {
        signed(&sb, P, P).len() == 3
    });
    wait_for("both reported", || {
        let s = status(&sb);
        let garbled_err =
            session_status(&s, C).and_then(|x| x["error"].as_str().map(str::to_owned));
        let text = s["lastErrors"].to_string();
        garbled_err.is_some_and(|e| e.contains("corrupt zstd frame")) && text.contains("truncated")
    });
    // A session directory deleted: reported, the others carry on.
    std::fs::remove_dir_all(truncated.path().parent().expect("dir")).expect("rm");
    good.turn(3);
    wait_for("the good session signed on", || {
        signed(&sb, P, P).len() == 4
    });
    wait_for("the deletion reported", || {
        let s = status(&sb);
        session_status(&s, Q).is_none() && s["lastErrors"].to_string().contains("deleted")
    });
    // Nothing signed twice, nothing lost.
    assert_eq!(signed(&sb, P, P), completed_ends(good.path()));
    assert_eq!(signed(&sb, C, C).len(), 2);
    assert_eq!(signed(&sb, Q, Q).len(), 2);
}

/// Make everything under `dir` readable and writable by anyone (the daemon may run as
/// another user below).
fn open_up(dir: &Path) {
    let ok = Command::new("chmod")
        .args(["-R", "a+rwX"])
        .arg(dir)
        .status()
        .expect("chmod")
        .success();
    assert!(ok);
}

#[test]
fn a_log_made_unreadable_is_reported_and_the_others_carry_on() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut good = Live::create(&sb, P, |_| {});
    let mut locked = Live::create(&sb, C, |_| {});
    for live in [&mut good, &mut locked] {
        live.turn(0);
    }
    // Root reads any file: as root, the daemon runs as `nobody`, so a permission change is
    // a real one for it.
    let as_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let mut cmd = if as_root {
        let root = sb.home.parent().expect("sandbox root");
        open_up(root);
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_chapters"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_chapters"))
    };
    cmd.args(["daemon", "--foreground"])
        .current_dir(&sb.ws)
        .env("DSH_HOME", &sb.home)
        .env("CHAPTERS_HARNESS_ID", &sb.harness)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut d = Daemon {
        child: cmd.spawn().expect("spawn the daemon"),
    };
    wait_for("the daemon's socket", || {
        Client::connect(&socket(&sb), Duration::from_secs(5)).is_ok()
    });
    wait_for("both signed", || {
        signed(&sb, P, P).len() == 1 && signed(&sb, C, C).len() == 1
    });
    // The log's permissions change under the daemon; the session grows.
    std::fs::set_permissions(locked.path(), std::fs::Permissions::from_mode(0o000))
        .expect("chmod 000");
    locked.turn(1);
    good.turn(1);
    wait_for("the good session signed on", || {
        signed(&sb, P, P).len() == 2
    });
    wait_for("the unreadable log reported", || {
        let s = status(&sb);
        let err = session_status(&s, C).and_then(|x| x["error"].as_str().map(str::to_owned));
        err.is_some_and(|e| e.contains("ermission"))
            || s["lastErrors"].to_string().contains("ermission")
    });
    // Readable again: the session is followed on, nothing signed twice or lost.
    std::fs::set_permissions(locked.path(), std::fs::Permissions::from_mode(0o644))
        .expect("chmod 644");
    locked.turn(2);
    wait_for("the unlocked session caught up", || {
        signed(&sb, C, C).len() == 3
    });
    assert_eq!(signed(&sb, C, C), completed_ends(locked.path()));
    assert_eq!(signed(&sb, P, P), completed_ends(good.path()));
    d.kill9();
}

#[test]
fn install_and_uninstall_write_and_remove_the_user_unit() {
    let sb = Sandbox::new();
    let tmp = tempfile::tempdir().expect("tmp");
    let home = tmp.path().join("home");
    let xdg = tmp.path().join("xdg");
    std::fs::create_dir_all(&home).expect("home");
    let run = |args: &[&str], xdg_set: bool| {
        let mut cmd = sb.cmd(args);
        cmd.env("HOME", &home)
            .env("DSH_CHAPTERS_NO_SERVICE_MANAGER", "1");
        if xdg_set {
            cmd.env("XDG_CONFIG_HOME", &xdg);
        } else {
            cmd.env_remove("XDG_CONFIG_HOME");
        }
        let out = cmd.output().expect("run");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let unit = xdg.join("systemd/user/dsh-chapters.service");
    let out = run(&["daemon", "install"], true);
    assert!(out.contains(&format!("wrote {}", unit.display())), "{out}");
    assert!(out.contains("undo: chapters daemon uninstall"), "{out}");
    assert!(
        !out.contains("systemctl --user daemon-reload`"),
        "systemctl must not run: {out}"
    );
    let text = std::fs::read_to_string(&unit).expect("unit");
    assert!(text.contains("daemon --foreground"), "{text}");
    assert!(
        text.contains(&format!("DSH_HOME={}", sb.home.display())),
        "{text}"
    );
    assert!(run(&["daemon", "install"], true).contains("already installed"));
    assert!(run(&["daemon", "uninstall"], true).contains("removed"));
    assert!(!unit.exists());
    assert!(run(&["daemon", "uninstall"], true).contains("nothing to remove"));
    // Without XDG_CONFIG_HOME: under ~/.config.
    run(&["daemon", "install"], false);
    assert!(home
        .join(".config/systemd/user/dsh-chapters.service")
        .exists());
}

/// kill -9 at random moments of a live stream, restart, repeat; in the end every completed
/// turn is signed exactly once, in order, no line torn, and the chapters tile their range.
#[test]
fn kill_9_during_a_live_stream_signs_every_turn_exactly_once() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let env = [("CHAPTERS_IDLE_ARCHIVE_MS", "150")];
    let mut live = Live::create(&sb, P, |_| {});
    let log = live.path().to_path_buf();
    let writing = std::thread::spawn(move || {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..240 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if rng.is_multiple_of(7) {
                live.event("compaction/end", json!({}));
            }
            live.turn(i);
            std::thread::sleep(Duration::from_millis(2 + rng % 25));
        }
        live.in_flight(240);
    });
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut kills = 0;
    while !writing.is_finished() {
        let mut child = spawn(&sb, &env);
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(150 + rng % 600));
        let _ = child.kill();
        let _ = child.wait();
        kills += 1;
        // Between kills the store stays whole: every ledger line parses.
        let _ = signed(&sb, P, P);
    }
    writing.join().expect("writer");
    assert!(kills >= 4, "the stream ended before enough kills ({kills})");
    let _d = Daemon::start(&sb, &env);
    let want = completed_ends(&log);
    assert_eq!(want.len(), 240);
    wait_for("every completed turn signed", || {
        signed(&sb, P, P).len() >= want.len()
    });
    wait_for("the daemon caught up", || caught_up(&sb, P, &log));
    let got = signed(&sb, P, P);
    assert_eq!(got, want, "signed exactly once, in order, no gap");
    // No torn line anywhere in the ledger.
    let text = std::fs::read_to_string(
        sb.store()
            .join(P)
            .join("collections")
            .join(format!("{P}.jsonl")),
    )
    .expect("ledger");
    assert!(text.ends_with('\n'));
    for line in text.lines() {
        serde_json::from_str::<Value>(line).expect("whole line");
    }
    // The chapters written so far tile a prefix of the log with no gap and no overlap,
    // and an archive now completes them.
    sb.ok(&["archive"]);
    let mut next = 0u64;
    for name in chapters(&sb.store(), P)
        .iter()
        .filter(|n| !n.starts_with("plan-"))
    {
        let text = std::fs::read_to_string(sb.store().join(P).join("chapters").join(name))
            .expect("chapter");
        let fm = dsh_chapters::render::parse_frontmatter(&text).expect("whole chapter");
        assert_eq!(fm.seq_range.0, next, "{name} starts where the last ended");
        next = fm.seq_range.1 + 1;
    }
    assert_eq!(
        next,
        want.last().expect("turns") + 1,
        "chapters cover every completed turn"
    );
}

/// `chapters archive` run again and again while the daemon signs a live stream: the two
/// signers race for the same ledger and every completed turn is still signed exactly once.
#[test]
fn archive_runs_racing_the_daemon_sign_every_turn_once() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    let log = live.path().to_path_buf();
    let _d = Daemon::start(&sb, &[]);
    // The stream lasts at least 150 turns and until three archives have raced it, however
    // slow a loaded machine makes them.
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writing = std::thread::spawn({
        let runs = runs.clone();
        move || {
            let mut i = 0;
            while i < 150 || (runs.load(std::sync::atomic::Ordering::SeqCst) < 3 && i < 3000) {
                live.turn(i);
                std::thread::sleep(Duration::from_millis(1 + (i as u64 * 7) % 9));
                i += 1;
            }
        }
    });
    while !writing.is_finished() {
        sb.ok(&["archive"]);
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    writing.join().expect("writer");
    sb.ok(&["archive"]);
    let runs = runs.load(std::sync::atomic::Ordering::SeqCst);
    assert!(runs >= 3, "too few archives raced the stream ({runs})");
    let want = completed_ends(&log);
    wait_for("the daemon caught up", || caught_up(&sb, P, &log));
    assert_eq!(signed(&sb, P, P), want, "exactly once, in order");
}

/// The trigger logic is pure (the source-shape rule of `shape.rs`, for the daemon's module).
#[test]
fn the_trigger_logic_does_no_io() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/daemon/triggers.rs"
    ))
    .expect("triggers.rs");
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    for needle in [
        "std::fs",
        "std::env",
        "std::process",
        "std::net",
        "SystemTime",
        "Instant::now",
        "File::",
        "Command::new",
    ] {
        assert!(!code.contains(needle), "triggers.rs uses `{needle}`");
    }
}

#[test]
fn a_monorepo_package_session_is_followed_for_the_root_workspace() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let _d = Daemon::start(&sb, &[]);
    // Started in a package of the repository, after the daemon: its own `--<key>--`.
    let package = sb.ws.join("svc").join("api");
    std::fs::create_dir_all(&package).expect("package");
    let mut live = Live::create_in(&sb.home, &package.to_string_lossy(), Q, |_| {});
    live.turn(0);
    live.turn(1);
    wait_for("the package's session signed into the root's store", || {
        signed(&sb, Q, Q).len() == 2
    });
    let line = std::fs::read_to_string(
        sb.store()
            .join(Q)
            .join("collections")
            .join(format!("{Q}.jsonl")),
    )
    .expect("collection");
    let first: Value = serde_json::from_str(line.lines().next().expect("a line")).expect("json");
    assert_eq!(first["paths"], json!(["svc/api/src/parse.rs"]), "{first}");
    assert!(session_status(&status(&sb), Q).is_some(), "status lists it");
}

/// Issue 13.1 on the daemon's signing path: a turn of secrets is signed from its redacted
/// text, so the collection line holds no lowercased secret as a term.
#[test]
fn the_daemon_signs_from_redacted_text() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[]);
    let secrets = ["AKIAQ7ZXW4JRMN2KVB5T", "glpat-Lx8Rq2VmNk4TzW7bHc9D"];
    let text = format!(
        "{a} {a} {a} {b} {b} {b} rotate",
        a = secrets[0],
        b = secrets[1]
    );
    live.writer
        .append_turn(&mut live.script, &TurnSpec::new(&text, "Rotated."))
        .expect("append turn");
    wait_for("turn signed", || signed(&sb, P, P).len() == 1);
    let ledger = std::fs::read_to_string(
        sb.store()
            .join(P)
            .join("collections")
            .join(format!("{P}.jsonl")),
    )
    .expect("ledger")
    .to_ascii_lowercase();
    for secret in secrets {
        let secret = secret.to_ascii_lowercase();
        for piece in secret.as_bytes().windows(8) {
            let piece = std::str::from_utf8(piece).expect("ascii");
            assert!(!ledger.contains(piece), "{piece:?} in {ledger}");
        }
    }
    assert!(ledger.contains("\"rotate\""), "{ledger}");
}

/// Issue 14: a session log that is a FIFO (or a symlink to `/dev/zero`) never blocks the
/// daemon; a header-only log grows into a real one and is followed; a line holding a lone
/// UTF-16 surrogate (a string cut mid-emoji by `JSON.stringify`) does not stop the follow.
#[test]
fn a_fifo_never_blocks_the_daemon_and_a_header_only_log_grows_into_a_real_one() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let fifo = dsh_chapters::testkit::writer::session_log_path(&sb.home, &sb.ws_str(), C, 4, true);
    std::fs::create_dir_all(fifo.parent().expect("dir")).expect("mkdir");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo")
        .success());
    let zero = dsh_chapters::testkit::writer::session_log_path(&sb.home, &sb.ws_str(), Q, 4, false);
    std::fs::create_dir_all(zero.parent().expect("dir")).expect("mkdir");
    std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
    // Header only: the daemon follows it from there.
    let mut live = Live::create(&sb, P, |_| {});
    let _d = Daemon::start(&sb, &[]);
    wait_for("the skipped logs said", || {
        let errors = status(&sb)["lastErrors"].to_string();
        errors.contains("a FIFO") && errors.contains("a character device")
    });
    live.turn(0);
    wait_for("the first turn signed", || signed(&sb, P, P).len() == 1);
    // A turn whose human text was cut mid-emoji.
    let spec = TurnSpec::new("Fix the emoji CUTHERE handling", "Fixed CUTHERE.");
    let lines: Vec<String> = live
        .script
        .turn_events(&spec)
        .iter()
        .map(|e| e.to_string().replace("CUTHERE", "\\ud83d"))
        .collect();
    live.writer.append_lines(&lines).expect("append");
    live.turn(2);
    wait_for("every turn signed", || signed(&sb, P, P).len() == 3);
    assert_eq!(signed(&sb, P, P), completed_ends(live.path()));
    // The control socket answered all along; the FIFO was never opened for reading.
    let s = status(&sb);
    assert_eq!(
        s["lastErrors"].to_string().matches("a FIFO").count(),
        1,
        "said once: {s}"
    );
}

/// A running daemon follows a DSH log into the generation a format migration wrote beside
/// it, renumbered (seqs shrunk, or grown): it signs the new turns and none of the old ones
/// again (`session::renumber`).
#[test]
fn a_migrated_log_is_followed_and_only_its_new_turns_are_signed() {
    for shrinks in [true, false] {
        let sb = Sandbox::new();
        sb.ok(&["init"]);
        let m = Migration::new(&sb, P, shrinks, |i| {
            format!("Please fix the parser number {i}")
        });
        m.write_old(&sb);
        let _d = Daemon::start(&sb, &[]);
        wait_for("the old generation signed", || {
            signed_turns(&sb, P, P).len() == 3
        });
        m.write_new(&sb);
        wait_for("the new turns signed", || {
            signed_turns(&sb, P, P).last() == Some(&5)
        });
        assert_eq!(
            signed_turns(&sb, P, P),
            [1, 2, 3, 4, 5],
            "v{}→v{}: each turn signed once",
            m.old_generation,
            m.new_generation
        );
    }
}

//! A scratch DSH home + workspace, and the built `chapters` binary run against them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dsh_chapters::testkit::writer::{
    session_log_path, LogWriter, SessionScript, ToolCallSpec, TurnSpec,
};
use serde_json::json;

pub const START_MS: i64 = 1_764_400_000_000;

pub struct Sandbox {
    _tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub ws: PathBuf,
    pub harness: String,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let tmp = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical temp dir");
        let home = root.join("home");
        let ws = root.join("ws");
        std::fs::create_dir_all(&home).expect("home");
        std::fs::create_dir_all(ws.join(".git")).expect("ws");
        std::fs::write(
            ws.join(".git/config"),
            "[remote \"origin\"]\n\turl = https://github.com/example/widgets.git\n",
        )
        .expect("git config");
        Sandbox {
            _tmp: tmp,
            home,
            ws,
            harness: "test-machine".into(),
        }
    }

    /// A "machine" of its own: its own workspace and home, named `harness`.
    pub fn machine(harness: &str) -> Sandbox {
        let mut sb = Sandbox::new();
        sb.harness = harness.to_owned();
        sb
    }

    pub fn ws_str(&self) -> String {
        self.ws.to_string_lossy().into_owned()
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_chapters"));
        cmd.args(args)
            .current_dir(&self.ws)
            .env("DSH_HOME", &self.home)
            // Claude Code's root: the sandbox's own, never the machine's `~/.claude`.
            .env("CLAUDE_CONFIG_DIR", self.home.join("claude"))
            .env("CODEX_HOME", self.home.join("codex"));
        for (k, _) in std::env::vars() {
            if k.starts_with("CHAPTERS_") {
                cmd.env_remove(k);
            }
        }
        cmd.env("CHAPTERS_HARNESS_ID", &self.harness);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run chapters")
    }

    /// Run and require exit 0.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with_env(args, &[])
    }

    /// Run with these environment variables set, and require exit 0.
    pub fn ok_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let mut cmd = self.cmd(args);
        cmd.envs(env.iter().copied());
        let out = cmd.output().expect("run chapters");
        assert!(
            out.status.success(),
            "chapters {args:?} failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run `chapters ARGS` and SIGKILL it after `delay` unless it finished; whether it was
    /// killed.
    pub fn killed_after(&self, args: &[&str], delay: std::time::Duration) -> bool {
        let mut child = self
            .cmd(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        let running = child.try_wait().expect("try_wait").is_none();
        if running {
            let _ = child.kill();
        }
        child.wait().expect("reap");
        running
    }

    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{out}"))
    }

    pub fn log_path(&self, session: &str, version: u32, compressed: bool) -> PathBuf {
        session_log_path(&self.home, &self.ws_str(), session, version, compressed)
    }

    /// Write a whole session log; returns its path.
    pub fn write_session(
        &self,
        session: &str,
        version: u32,
        compressed: bool,
        turns: &[TurnSpec],
    ) -> PathBuf {
        self.write_session_with(session, version, compressed, turns, |_| {})
    }

    pub fn write_session_with(
        &self,
        session: &str,
        version: u32,
        compressed: bool,
        turns: &[TurnSpec],
        edit_header: impl FnOnce(&mut dsh_chapters::session::Header),
    ) -> PathBuf {
        let path = self.log_path(session, version, compressed);
        std::fs::create_dir_all(path.parent().expect("session dir")).expect("mkdir");
        let mut script = SessionScript::new(version, START_MS);
        let mut header = script.header(session, &self.ws_str(), START_MS);
        edit_header(&mut header);
        let mut w = LogWriter::create(&path, compressed, &header).expect("create log");
        for t in turns {
            w.append_turn(&mut script, t).expect("append turn");
        }
        path
    }

    pub fn store(&self) -> PathBuf {
        self.ws.join(".dsh-chapters")
    }

    /// Every file under the store (excluding lock/pid/temp files, the store's catalog — its
    /// readers' local bookkeeping — and the signed-roots hint, the sync's) with its bytes.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        walk(&self.store(), &self.store(), &mut out);
        out
    }

    /// Throw the store away and enable the workspace again: the same machine, the same
    /// logs, an empty store — what a second, independent run over the same input sees.
    pub fn fresh_store(&self) {
        std::fs::remove_dir_all(self.store()).expect("remove store");
        self.ok(&["init"]);
    }

    pub fn chapter_files(&self) -> Vec<String> {
        self.snapshot()
            .into_keys()
            .filter(|k| k.contains("/chapters/"))
            .collect()
    }
}

fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        // The store's catalog (SQLite, not the archive's output), also while a killed
        // process's copy of it is still under its temp name (`..catalog.sqlite3.tmp.…`).
        if name.starts_with(".writer")
            || name.starts_with(".catalog.")
            || name.starts_with("..catalog.")
            || name == dsh_chapters::store::signed::SIGNED_FILE
        {
            continue;
        }
        if p.is_dir() {
            walk(base, &p, out);
        } else {
            let rel = p
                .strip_prefix(base)
                .expect("under base")
                .to_string_lossy()
                .into_owned();
            out.insert(rel, std::fs::read(&p).expect("read"));
        }
    }
}

pub fn text_of(files: &BTreeMap<String, Vec<u8>>) -> String {
    files
        .values()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn bash(ws: &Path, command: &str, out: &str) -> ToolCallSpec {
    let _ = ws;
    ToolCallSpec::new("bash", json!({ "command": command }), out)
}

pub fn read(ws: &Path, rel: &str, out: &str) -> ToolCallSpec {
    ToolCallSpec::new(
        "read_file",
        json!({ "path": ws.join(rel).to_string_lossy() }),
        out,
    )
}

/// A few turns on two tasks: auth (three turns) then csv export (two turns).
pub fn two_task_turns(ws: &Path) -> Vec<TurnSpec> {
    let mut t = Vec::new();
    for i in 0..3 {
        let mut s = TurnSpec::new(
            &format!("Fix the refresh token middleware expiry bug, step {i}"),
            &format!("Middleware step {i} done."),
        );
        s.tool_calls = vec![
            read(ws, "src/auth/middleware.rs", "fn refresh() {}\n"),
            bash(ws, "cargo test -p auth", "ok\n"),
        ];
        t.push(s);
    }
    for i in 0..2 {
        let mut s = TurnSpec::new(
            &format!("Make the csv exporter write its header row, part {i}"),
            &format!("Exporter part {i} done."),
        );
        s.tool_calls = vec![
            read(ws, "src/export/csv.rs", "fn export() {}\n"),
            bash(ws, "cargo test -p export", "ok\n"),
        ];
        t.push(s);
    }
    t
}

/// Link `m` to the local pool at `pool`, declared private.
pub fn link_private(m: &Sandbox, pool: &Path) {
    m.ok(&[
        "link",
        pool.to_str().expect("utf8"),
        "--visibility",
        "private",
    ]);
}

/// `turns` (events with their own seqs) renumbered densely from 0, with `extra` filler
/// events inserted after the first event of each turn listed in `padded`.
fn renumbered(
    turns: &[Vec<serde_json::Value>],
    padded: &[usize],
    extra: usize,
    kind: &str,
) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for (i, events) in turns.iter().enumerate() {
        for (j, e) in events.iter().enumerate() {
            let mut e = e.clone();
            e["seq"] = json!(out.len());
            assert!(e.get("sourceEventSeqs").is_none(), "no seq references");
            out.push(e);
            if j == 0 && padded.contains(&i) {
                for _ in 0..extra {
                    out.push(json!({"type": kind, "seq": out.len(), "time": START_MS,
                        "data": {"turn": i + 1, "step": 1, "text": "x"}}));
                }
            }
        }
    }
    out
}

/// A DSH session before and after a format migration that renumbers its events while
/// turn numbers stay (DSH's published migration packages: v1 → v2 drops every
/// `assistant/chunk` event, v4 → v5 adds a `turn/end` for each interrupted turn). The old
/// generation holds the first three of six real-shaped turns, the new one five, and the
/// sixth comes later.
pub struct Migration {
    pub old_generation: u32,
    pub new_generation: u32,
    header: dsh_chapters::session::Header,
    old: Vec<serde_json::Value>,
    new: Vec<serde_json::Value>,
    sixth: Vec<serde_json::Value>,
}

impl Migration {
    /// `shrinks`: v1 → v4 (the old log had sixty `assistant/chunk` events a turn: its seqs
    /// stay above the new log's for all six turns); else v4 → v5 (one event more in the
    /// new log's first turn). Turn `i`'s human words are `words(i)`.
    pub fn new(
        sb: &Sandbox,
        session: &str,
        shrinks: bool,
        words: impl Fn(usize) -> String,
    ) -> Self {
        use dsh_chapters::testkit::realshape::{RealShapeScript, RealTurn};
        let (old_generation, new_generation) = if shrinks { (1, 4) } else { (4, 5) };
        let mut script = RealShapeScript::new(new_generation, START_MS);
        let header = script.header(session, &sb.ws_str());
        let events: Vec<Vec<serde_json::Value>> = (0..6)
            .map(|i| script.turn_events(&RealTurn::new(&words(i), &format!("Answer {i}: done."))))
            .collect();
        let (old, mut new) = if shrinks {
            (
                renumbered(&events[..3], &[0, 1, 2], 60, "assistant/chunk"),
                renumbered(&events, &[], 0, ""),
            )
        } else {
            (
                renumbered(&events[..3], &[], 0, ""),
                renumbered(&events, &[0], 1, "llm/retry"),
            )
        };
        let sixth = new.split_off(new.len() - events[5].len());
        Migration {
            old_generation,
            new_generation,
            header,
            old,
            new,
            sixth,
        }
    }

    /// Append the sixth turn to the new generation's log, as DSH appends.
    pub fn append_sixth(&self, sb: &Sandbox) {
        let path = sb.log_path(&self.header.id, self.new_generation, true);
        let mut w = LogWriter::open_append(&path, true).expect("open");
        w.append_batch(&self.sixth).expect("append");
    }

    /// Write the old generation's log (three turns).
    pub fn write_old(&self, sb: &Sandbox) {
        self.write(sb, self.old_generation, &self.old);
    }

    /// Write the successor beside it, as DSH does when it opens the session again (five
    /// turns).
    pub fn write_new(&self, sb: &Sandbox) {
        self.write(sb, self.new_generation, &self.new);
    }

    fn write(&self, sb: &Sandbox, generation: u32, events: &[serde_json::Value]) {
        let path = sb.log_path(&self.header.id, generation, true);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        let mut header = self.header.clone();
        header.version = generation;
        let mut w = LogWriter::create(&path, true, &header).expect("create");
        w.append_batch(events).expect("append");
    }
}

/// The whole lines of a session's collection ledger in `store`, in order (a torn tail left
/// out).
pub fn ledger_lines(store: &Path, root: &str, session: &str) -> Vec<serde_json::Value> {
    let path = store
        .join(root)
        .join("collections")
        .join(format!("{session}.jsonl"));
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter(|l| l.ends_with('}'))
        .map(|l| serde_json::from_str(l).expect("a whole ledger line"))
        .collect()
}

/// The turn numbers of a session's collection ledger, in order.
pub fn signed_turns(sb: &Sandbox, root: &str, session: &str) -> Vec<u64> {
    ledger_lines(&sb.store(), root, session)
        .iter()
        .map(|v| v["turn"].as_u64().expect("turn"))
        .collect()
}

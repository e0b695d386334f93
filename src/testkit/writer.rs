//! A DSH log writer: produces real session logs (zstd multi-frame or plain) for tests,
//! benchmarks and the recording of `chapters demo`'s session (`testkit::demo_session`).
//!
//! - [`LogWriter`] writes the header as its own frame (or line) and each appended batch as
//!   one zstd frame holding `\n`-terminated lines, like the harness's writer.
//! - [`SessionScript`] turns a [`TurnSpec`] into the events of one turn, with contiguous
//!   seqs, in the shape of a given format generation (0–4).
//! - [`generate_session`] yields varied, deterministic turns (several tasks with their own
//!   files and commands, large tool outputs, planted fake secrets) one at a time, so a
//!   session of any size is produced without holding it in memory.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};

pub use crate::session::discover::session_log_path;
use crate::session::event::Header;

/// zstd level for written frames (the harness's default).
const ZSTD_LEVEL: i32 = 3;

/// The header line's JSON, keys in the spec's order, absent optionals omitted.
pub fn header_line(header: &Header) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct HeaderLine<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        version: u32,
        id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        created_at: Option<i64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cwd: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_session: Option<&'a str>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_seeded: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        seed_length: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        origin: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        delegation_depth: Option<u32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        agent_preset: Option<&'a str>,
    }
    let line = HeaderLine {
        kind: "session",
        version: header.version,
        id: &header.id,
        created_at: header.created_at,
        cwd: header.cwd.as_deref(),
        parent_session: header.parent_session.as_deref(),
        is_seeded: header.is_seeded,
        seed_length: header.seed_length,
        origin: header.origin.as_deref(),
        delegation_depth: header.delegation_depth,
        agent_preset: header.agent_preset.as_deref(),
    };
    // Serializing plain strings and numbers into a String cannot fail.
    serde_json::to_string(&line).expect("header fields serialize")
}

/// Appends frames (or lines) to one log file.
pub struct LogWriter {
    path: PathBuf,
    file: File,
    compressed: bool,
    sync: bool,
}

impl LogWriter {
    /// Create a new log (refusing to overwrite one) and write its header.
    pub fn create(path: &Path, compressed: bool, header: &Header) -> io::Result<LogWriter> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        let mut writer = LogWriter {
            path: path.to_path_buf(),
            file,
            compressed,
            sync: true,
        };
        writer.write_unit(std::iter::once(header_line(header)))?;
        Ok(writer)
    }

    /// Continue an existing log: later batches go after its current end.
    pub fn open_append(path: &Path, compressed: bool) -> io::Result<LogWriter> {
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(LogWriter {
            path: path.to_path_buf(),
            file,
            compressed,
            sync: true,
        })
    }

    /// Whether each batch is fsynced (on by default, as the harness does; benchmarks
    /// turn it off).
    pub fn set_sync(&mut self, sync: bool) {
        self.sync = sync;
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one batch: one zstd frame (or plain lines), each event a `\n`-terminated line.
    pub fn append_batch(&mut self, events: &[Value]) -> io::Result<()> {
        self.write_unit(events.iter().map(Value::to_string))
    }

    /// Append one batch of lines given as text (each `\n`-terminated): for lines no
    /// `Value` can hold, such as a lone UTF-16 surrogate escape or a garbled line.
    pub fn append_lines(&mut self, lines: &[String]) -> io::Result<()> {
        self.write_unit(lines.iter().cloned())
    }

    /// The events of one turn (from `script`) as one batch.
    pub fn append_turn(&mut self, script: &mut SessionScript, spec: &TurnSpec) -> io::Result<()> {
        let events = script.turn_events(spec);
        self.append_batch(&events)
    }

    fn write_unit(&mut self, lines: impl Iterator<Item = String>) -> io::Result<()> {
        if self.compressed {
            let mut encoder = zstd::stream::write::Encoder::new(&mut self.file, ZSTD_LEVEL)?;
            for line in lines {
                encoder.write_all(line.as_bytes())?;
                encoder.write_all(b"\n")?;
            }
            encoder.finish()?;
        } else {
            let mut out = BufWriter::new(&mut self.file);
            for line in lines {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
            }
            out.flush()?;
        }
        if self.sync {
            self.file.sync_data()?;
        }
        Ok(())
    }
}

/// One tool call of a turn and its result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallSpec {
    pub name: String,
    /// The arguments object; logged as a raw JSON string, as the harness does.
    pub arguments: Value,
    pub result: String,
    pub is_error: bool,
}

impl ToolCallSpec {
    pub fn new(name: &str, arguments: Value, result: &str) -> Self {
        ToolCallSpec {
            name: name.to_owned(),
            arguments,
            result: result.to_owned(),
            is_error: false,
        }
    }
}

/// What happens in one turn; [`SessionScript::turn_events`] turns it into events.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnSpec {
    /// Emit `permission/preset` and `approval/policy` before `turn/start`.
    pub pre_turn: bool,
    /// The human's message (`source.kind: "user"`), after the host's injected
    /// agent-instructions and skill-catalog messages.
    pub human_text: String,
    pub tool_calls: Vec<ToolCallSpec>,
    /// A plan submitted through an `exit_plan_mode` tool call (`{"plan": …}`).
    pub plan: Option<String>,
    /// The final assistant message.
    pub assistant_text: String,
    /// The `turn/end` reason kind (`completed`, `aborted`, `error`, …). `None` leaves the
    /// turn in flight: no final `step/end` nor `turn/end`. With `error` the final model
    /// call is an `assistant/attempt` instead of an `assistant/message`.
    pub end_reason: Option<String>,
    /// v0/v1 only: the final text also streamed as a packed `text-chunks` row that the
    /// assistant message points at through `sourceEventSeqs`.
    pub packed_chunks: bool,
}

impl TurnSpec {
    /// A completed turn with no tool calls.
    pub fn new(human_text: &str, assistant_text: &str) -> Self {
        TurnSpec {
            pre_turn: false,
            human_text: human_text.to_owned(),
            tool_calls: Vec::new(),
            plan: None,
            assistant_text: assistant_text.to_owned(),
            end_reason: Some("completed".to_owned()),
            packed_chunks: false,
        }
    }
}

/// The injected agent instructions (`AGENTS.md`) every turn carries.
pub const AGENT_INSTRUCTIONS_TEXT: &str =
    "# AGENTS.md\n\nRun `cargo fmt` and the tests before you say a change is done. \
Keep commits small. Never push to main.";
/// The injected skill catalog every turn carries.
pub const SKILL_CATALOG_TEXT: &str = "Available skills:\n- review: review a diff\n- release: cut a release\n- chapters: recall earlier work";

/// Builds the events of successive turns with contiguous seqs, for one format version.
#[derive(Debug, Clone)]
pub struct SessionScript {
    version: u32,
    next_seq: u64,
    next_turn: u64,
    clock_ms: i64,
    next_id: u64,
}

impl SessionScript {
    /// A fresh session: seq 0, turn 0, clock at `start_ms`.
    pub fn new(version: u32, start_ms: i64) -> Self {
        Self::starting_at(version, 0, 0, start_ms)
    }

    /// Continue a session whose next event has seq `next_seq` and next turn `next_turn`.
    pub fn starting_at(version: u32, next_seq: u64, next_turn: u64, clock_ms: i64) -> Self {
        SessionScript {
            version,
            next_seq,
            next_turn,
            clock_ms,
            next_id: next_seq,
        }
    }

    pub fn version(&self) -> u32 {
        self.version
    }

    /// The seq the next event will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The number the next turn will carry.
    pub fn next_turn(&self) -> u64 {
        self.next_turn
    }

    /// The session's clock (ms), advanced by every event.
    pub fn clock_ms(&self) -> i64 {
        self.clock_ms
    }

    /// The header for this script's version.
    pub fn header(&self, id: &str, cwd: &str, created_at: i64) -> Header {
        Header {
            version: self.version,
            id: id.to_owned(),
            created_at: Some(created_at),
            cwd: Some(cwd.to_owned()),
            delegation_depth: Some(0),
            ..Header::default()
        }
    }

    /// The events of one turn, in log order, seqs contiguous from [`Self::next_seq`]:
    /// `permission/preset`, `approval/policy` (if `pre_turn`); `turn/start`; `step/start`;
    /// `user/message` ×3 (agent-instructions, skill-catalog, the human); `request/header`;
    /// with tool calls (the plan's `exit_plan_mode` last): `assistant/message` (text and
    /// tool-call blocks), `tool/call` ×n, `tool/result` ×n (v0–v3 or v4 shape), `step/end`,
    /// `step/start`, `request/header`; then the final model call — `assistant/message`
    /// (v0/v1 with `packed_chunks`: preceded by a `text-chunks` row it points at through
    /// `sourceEventSeqs`; v2+: with an embedded `stream`), or `assistant/attempt` when the
    /// turn ends `error`; then `step/end` and `turn/end` unless the turn is in flight.
    pub fn turn_events(&mut self, spec: &TurnSpec) -> Vec<Value> {
        let turn = self.next_turn;
        self.next_turn += 1;
        let mut out = Vec::new();
        if spec.pre_turn {
            self.push(&mut out, "permission/preset", json!({"preset": "default"}));
            self.push(&mut out, "approval/policy", json!({"policy": "on-request"}));
        }
        self.push(&mut out, "turn/start", json!({ "turn": turn }));
        let mut step = 0u64;
        self.push(&mut out, "step/start", json!({"turn": turn, "step": step}));
        for (kind, text) in [
            ("agent-instructions", AGENT_INSTRUCTIONS_TEXT),
            ("skill-catalog", SKILL_CATALOG_TEXT),
            ("user", spec.human_text.as_str()),
        ] {
            let id = self.id("msg");
            self.push(
                &mut out,
                "user/message",
                json!({"id": id, "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": kind}}),
            );
        }
        self.request_header(&mut out, turn, step);

        let mut calls: Vec<ToolCallSpec> = spec.tool_calls.clone();
        if let Some(plan) = &spec.plan {
            calls.push(ToolCallSpec::new(
                "exit_plan_mode",
                json!({ "plan": plan }),
                "The plan was submitted for approval.",
            ));
        }
        if !calls.is_empty() {
            let call_ids: Vec<String> = calls.iter().map(|_| self.id("call")).collect();
            let mut content = vec![json!({"type": "text", "text": "Let me look at that first."})];
            for (call, id) in calls.iter().zip(&call_ids) {
                content.push(json!({"type": "tool-call", "toolCallId": id, "name": call.name, "arguments": call.arguments.to_string()}));
            }
            self.assistant_message(&mut out, turn, step, content, None, None);
            for (call, id) in calls.iter().zip(&call_ids) {
                self.push(
                    &mut out,
                    "tool/call",
                    json!({"turn": turn, "step": step, "callId": id, "name": call.name, "arguments": call.arguments.to_string()}),
                );
            }
            for (call, id) in calls.iter().zip(&call_ids) {
                let data = self.tool_result(turn, step, id, call);
                self.push(&mut out, "tool/result", data);
            }
            self.push(&mut out, "step/end", json!({"turn": turn, "step": step}));
            step += 1;
            self.push(&mut out, "step/start", json!({"turn": turn, "step": step}));
            self.request_header(&mut out, turn, step);
        }

        let text_block = vec![json!({"type": "text", "text": spec.assistant_text})];
        if spec.end_reason.as_deref() == Some("error") {
            self.push(
                &mut out,
                "assistant/attempt",
                json!({"turn": turn, "step": step, "error": {"code": "SERVER", "message": "upstream returned 500"}}),
            );
        } else if spec.packed_chunks && self.version <= 1 {
            let (row, seqs) = self.packed_text_row(turn, step, &spec.assistant_text);
            out.push(row);
            self.assistant_message(&mut out, turn, step, text_block, None, Some(seqs));
        } else if self.version >= 2 {
            let stream = json!([{"type": "text-chunks", "time0": self.clock_ms, "index": 0, "dt": [], "texts": [spec.assistant_text]}]);
            self.assistant_message(&mut out, turn, step, text_block, Some(stream), None);
        } else {
            self.assistant_message(&mut out, turn, step, text_block, None, None);
        }
        if let Some(reason) = &spec.end_reason {
            self.push(&mut out, "step/end", json!({"turn": turn, "step": step}));
            self.push(
                &mut out,
                "turn/end",
                json!({"turn": turn, "reason": {"kind": reason}}),
            );
        }
        out
    }

    fn push(&mut self, out: &mut Vec<Value>, kind: &str, data: Value) {
        self.clock_ms += 7;
        out.push(json!({"type": kind, "seq": self.next_seq, "time": self.clock_ms, "data": data}));
        self.next_seq += 1;
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{}", self.next_id)
    }

    fn request_header(&mut self, out: &mut Vec<Value>, turn: u64, step: u64) {
        self.push(
            out,
            "request/header",
            json!({"turn": turn, "step": step, "reason": "turn", "header": {
                "system": "You are a coding agent working in the user's repository.",
                "tools": [{"name": "bash"}, {"name": "read_file"}, {"name": "write_file"}, {"name": "exit_plan_mode"}],
                "config": {"provider": "deepseek", "model": "deepseek-chat"}}}),
        );
    }

    fn assistant_message(
        &mut self,
        out: &mut Vec<Value>,
        turn: u64,
        step: u64,
        content: Vec<Value>,
        stream: Option<Value>,
        source_seqs: Option<Vec<u64>>,
    ) {
        self.clock_ms += 1200;
        let id = self.id("msg");
        let mut data = json!({"turn": turn, "step": step,
            "message": {"id": id, "role": "assistant", "content": content,
                "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"}},
            "usage": {"inputTokens": 1200, "outputTokens": 180}});
        if let (Some(stream), Some(map)) = (stream, data.as_object_mut()) {
            map.insert("stream".to_owned(), stream);
        }
        self.push(out, "assistant/message", data);
        if let (Some(seqs), Some(Value::Object(event))) = (source_seqs, out.last_mut()) {
            event.insert("sourceEventSeqs".to_owned(), json!(seqs));
        }
    }

    fn tool_result(&self, turn: u64, step: u64, call_id: &str, call: &ToolCallSpec) -> Value {
        let content = json!([{"type": "text", "text": call.result}]);
        if self.version >= 4 {
            json!({"turn": turn, "step": step, "message": {"role": "tool", "toolCallId": call_id,
                "content": content, "isError": call.is_error}})
        } else {
            json!({"turn": turn, "step": step, "message": {"role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": call.is_error}]}})
        }
    }

    /// A `text-chunks` row standing for one `assistant/chunk` per ~24-byte piece of `text`.
    fn packed_text_row(&mut self, turn: u64, step: u64, text: &str) -> (Value, Vec<u64>) {
        let pieces = split_pieces(text, 24);
        let seq0 = self.next_seq;
        let time0 = self.clock_ms + 1;
        let dt = vec![20; pieces.len().saturating_sub(1)];
        self.next_seq += pieces.len() as u64;
        self.clock_ms = time0 + 20 * dt.len() as i64;
        let row = json!({"type": "text-chunks", "seq0": seq0, "time0": time0,
            "data": {"turn": turn, "step": step, "index": 0, "dt": dt, "texts": pieces}});
        (row, (seq0..self.next_seq).collect())
    }
}

/// `text` cut into pieces of about `size` bytes, on char boundaries.
fn split_pieces(text: &str, size: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if current.len() >= size {
            pieces.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() || pieces.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Write a whole generated session: header, then one frame per turn. Returns the seq
/// after the last event. `sync` off is for benchmarks.
pub fn write_session(
    path: &Path,
    compressed: bool,
    header: &Header,
    turns: impl IntoIterator<Item = TurnSpec>,
    sync: bool,
) -> io::Result<u64> {
    let mut writer = LogWriter::create(path, compressed, header)?;
    writer.set_sync(sync);
    let mut script = SessionScript::new(header.version, header.created_at.unwrap_or(0));
    for spec in turns {
        writer.append_turn(&mut script, &spec)?;
    }
    Ok(script.next_seq())
}

/// A deterministic stream of varied turns (see [`SessionGenerator`]).
pub fn generate_session(
    seed: u64,
    turns: usize,
    target_bytes_per_turn: usize,
    version: u32,
    workspace: &str,
) -> SessionGenerator {
    SessionGenerator {
        rng: XorShift::new(seed),
        remaining: turns,
        produced: 0,
        target_bytes_per_turn,
        version,
        workspace: workspace.trim_end_matches('/').to_owned(),
        task: 0,
        turns_left_on_task: 0,
    }
}

/// Yields [`TurnSpec`]s one at a time. Several tasks, each with its own files and
/// commands, switch every 3–6 turns. About one turn in 12 carries a ~40 KB tool output,
/// one in 20 a planted fake secret (`AKIA…`, `ghp_…` or a PEM private key), one in 15 a
/// plan; most turns end `completed`, a few `aborted`, `interrupted` or `error`. The text
/// of each turn is padded to about `target_bytes_per_turn`.
pub struct SessionGenerator {
    rng: XorShift,
    remaining: usize,
    produced: usize,
    target_bytes_per_turn: usize,
    version: u32,
    workspace: String,
    task: usize,
    turns_left_on_task: usize,
}

struct Task {
    topic: &'static str,
    files: &'static [&'static str],
    commands: &'static [&'static str],
    nouns: &'static [&'static str],
}

const TASKS: &[Task] = &[
    Task {
        topic: "retry logic in the HTTP client",
        files: &["src/http/client.rs", "src/http/retry.rs", "tests/retry.rs"],
        commands: &["cargo test -p http-client", "cargo clippy -p http-client"],
        nouns: &[
            "backoff",
            "timeout",
            "retry budget",
            "status code",
            "request",
        ],
    },
    Task {
        topic: "the flaky date parsing test",
        files: &["src/time/parse.rs", "tests/parse_dates.rs"],
        commands: &[
            "cargo test -p timeparse -- dates",
            "cargo test -p timeparse -- --nocapture",
        ],
        nouns: &["timezone", "leap day", "format string", "offset", "parser"],
    },
    Task {
        topic: "CSV export of invoices",
        files: &[
            "src/export/csv.rs",
            "src/billing/invoice.rs",
            "docs/export.md",
        ],
        commands: &[
            "cargo run --bin export -- --format csv",
            "cargo test -p billing",
        ],
        nouns: &["invoice", "currency", "column", "quote escaping", "row"],
    },
    Task {
        topic: "the migration for user roles",
        files: &[
            "migrations/0007_roles.sql",
            "src/db/roles.rs",
            "src/db/mod.rs",
        ],
        commands: &["sqlx migrate run", "cargo test -p db roles"],
        nouns: &["role", "foreign key", "index", "transaction", "permission"],
    },
    Task {
        topic: "the frontend build warnings",
        files: &["web/src/App.tsx", "web/src/api.ts", "web/package.json"],
        commands: &["npm run build", "npm test -- --watch=false"],
        nouns: &["component", "hook", "bundle", "type error", "prop"],
    },
    Task {
        topic: "caching in the CI pipeline",
        files: &[".github/workflows/ci.yml", "scripts/ci-cache.sh"],
        commands: &["act -j build", "bash scripts/ci-cache.sh --dry-run"],
        nouns: &["cache key", "runner", "artifact", "job", "lockfile"],
    },
    Task {
        topic: "the memory growth in the LRU cache",
        files: &["src/cache/lru.rs", "src/cache/metrics.rs", "benches/lru.rs"],
        commands: &["cargo test -p cache", "cargo bench -p cache -- lru"],
        nouns: &["eviction", "entry", "capacity", "allocation", "hit rate"],
    },
];

const VERBS: &[&str] = &[
    "drops",
    "duplicates",
    "ignores",
    "rewrites",
    "delays",
    "validates",
    "caches",
];
const CONDITIONS: &[&str] = &[
    "the input is empty",
    "two requests race",
    "the config file is missing",
    "the clock jumps back",
    "the buffer is full",
    "the test runs in parallel",
];
const REQUESTS: &[&str] = &[
    "Can you look at {topic}? Start with {file}.",
    "The tests still fail after the last change: `{cmd}` reports an error around {file}.",
    "Good. Now update {file} the same way and run `{cmd}`.",
    "Why does {file} handle the {noun} like that? Explain before changing anything.",
    "Let's continue with {topic}. What is left?",
    "Please add a test for the {noun} case in {file}.",
];

impl Iterator for SessionGenerator {
    type Item = TurnSpec;

    fn next(&mut self) -> Option<TurnSpec> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        if self.turns_left_on_task == 0 {
            self.task = self.rng.below(TASKS.len());
            self.turns_left_on_task = 3 + self.rng.below(4);
        }
        self.turns_left_on_task -= 1;
        let task = &TASKS[self.task];
        let first = self.produced == 0;
        self.produced += 1;

        let file = *self.rng.pick(task.files);
        let cmd = *self.rng.pick(task.commands);
        let noun = *self.rng.pick(task.nouns);
        let human_text = self
            .rng
            .pick(REQUESTS)
            .replace("{topic}", task.topic)
            .replace("{file}", file)
            .replace("{cmd}", cmd)
            .replace("{noun}", noun);

        // Text budget: about a third to the answer, the rest to tool outputs.
        let budget = self.target_bytes_per_turn.max(200);
        let mut tool_calls = vec![
            ToolCallSpec::new(
                "read_file",
                json!({ "path": format!("{}/{file}", self.workspace) }),
                &self.file_listing(task, file, budget / 3),
            ),
            ToolCallSpec::new(
                "bash",
                json!({ "command": cmd }),
                &self.command_output(task, cmd, budget / 3),
            ),
        ];
        if self.rng.below(12) == 0 {
            let big = self.command_output(task, cmd, 40 * 1024);
            tool_calls.push(ToolCallSpec::new(
                "bash",
                json!({ "command": format!("{cmd} --verbose") }),
                &big,
            ));
        }
        if self.rng.below(20) == 0 {
            let secret = self.fake_secret();
            tool_calls.push(ToolCallSpec::new(
                "read_file",
                json!({ "path": format!("{}/.env.local", self.workspace) }),
                &format!("# local settings\nAPI_URL=https://api.example.test\n{secret}\n"),
            ));
        }
        if self.rng.below(10) == 0 {
            tool_calls[1].is_error = true;
        }
        let plan = (self.rng.below(15) == 0).then(|| {
            format!(
                "## Plan: {}\n\n1. Read {file} and find where the {noun} is handled.\n2. Change it.\n3. Run `{cmd}`.",
                task.topic
            )
        });
        let assistant_text = format!(
            "I looked at {file}. {}\n\nI ran `{cmd}`; {}",
            self.prose(task, budget / 3),
            if tool_calls[1].is_error {
                "it still fails, see above."
            } else {
                "it passes now."
            }
        );
        let end_reason = match self.rng.below(50) {
            0 | 1 => "aborted",
            2 => "interrupted",
            3 => "error",
            _ => "completed",
        };
        Some(TurnSpec {
            pre_turn: first || self.rng.below(10) == 0,
            human_text,
            tool_calls,
            plan,
            assistant_text,
            end_reason: Some(end_reason.to_owned()),
            packed_chunks: self.version <= 1 && self.rng.below(4) == 0,
        })
    }
}

impl SessionGenerator {
    fn sentence(&mut self, task: &Task) -> String {
        let noun = *self.rng.pick(task.nouns);
        let other = *self.rng.pick(task.nouns);
        let file = *self.rng.pick(task.files);
        let verb = *self.rng.pick(VERBS);
        let condition = *self.rng.pick(CONDITIONS);
        format!("The {noun} in {file} {verb} the {other} when {condition}.")
    }

    fn prose(&mut self, task: &Task, bytes: usize) -> String {
        let mut out = String::new();
        while out.len() < bytes {
            if !out.is_empty() {
                out.push(if self.rng.below(5) == 0 { '\n' } else { ' ' });
            }
            let s = self.sentence(task);
            out.push_str(&s);
        }
        out
    }

    fn file_listing(&mut self, task: &Task, file: &str, bytes: usize) -> String {
        let mut out = format!("// {file}\n");
        let mut line = 1;
        while out.len() < bytes {
            let noun = self.rng.pick(task.nouns).replace(' ', "_");
            let n = self.rng.below(1000);
            out.push_str(&format!("{line:>4}  fn handle_{noun}_{n}(input: &str) -> Result<(), Error> {{ check(input)? }}\n"));
            line += 1;
        }
        out
    }

    fn command_output(&mut self, task: &Task, cmd: &str, bytes: usize) -> String {
        let mut out = format!("$ {cmd}\n");
        let mut i = 0;
        while out.len() < bytes {
            let noun = self.rng.pick(task.nouns).replace(' ', "_");
            let status = if self.rng.below(9) == 0 {
                "FAILED"
            } else {
                "ok"
            };
            out.push_str(&format!("test {noun}::case_{i} ... {status}\n"));
            i += 1;
        }
        out
    }

    fn fake_secret(&mut self) -> String {
        const UPPER_ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        match self.rng.below(3) {
            0 => format!("AWS_ACCESS_KEY_ID=AKIA{}", self.rng.string(UPPER_ALNUM, 16)),
            1 => format!("GITHUB_TOKEN=ghp_{}", self.rng.string(ALNUM, 36)),
            _ => {
                let mut pem = "-----BEGIN RSA PRIVATE KEY-----\n".to_owned();
                for _ in 0..8 {
                    pem.push_str(&self.rng.string(BASE64, 64));
                    pem.push('\n');
                }
                pem.push_str("-----END RSA PRIVATE KEY-----");
                pem
            }
        }
    }
}

/// xorshift64*: deterministic, seedable, no dependency (also `testkit::labelled`'s).
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        // splitmix64 spreads nearby seeds apart; a zero state would stay zero forever.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        XorShift(if z == 0 { 0x9E37_79B9_7F4A_7C15 } else { z })
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform enough in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn string(&mut self, alphabet: &[u8], len: usize) -> String {
        (0..len)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::discover::log_file_name;
    use crate::session::reader::{LogItem, LogReader, ResumePoint};

    fn read_all(path: &Path) -> (Header, Vec<crate::session::Event>) {
        let mut reader = LogReader::open(path, ResumePoint::default()).unwrap();
        let mut header = None;
        let mut events = Vec::new();
        while let Some(item) = reader.next_item().unwrap() {
            match item {
                LogItem::Header(h) => header = Some(h),
                LogItem::Event(e) => events.push(e),
            }
        }
        assert!(reader.notes().is_empty());
        (header.unwrap(), events)
    }

    #[test]
    fn header_line_key_order_and_omissions() {
        let h = Header {
            version: 3,
            id: "session-1".into(),
            created_at: Some(5),
            cwd: Some("/w".into()),
            delegation_depth: Some(0),
            ..Header::default()
        };
        assert_eq!(
            header_line(&h),
            r#"{"type":"session","version":3,"id":"session-1","createdAt":5,"cwd":"/w","delegationDepth":0}"#
        );
        let full = Header {
            parent_session: Some("p".into()),
            is_seeded: true,
            seed_length: Some(4),
            origin: Some("subagent".into()),
            agent_preset: Some("chapters".into()),
            ..h
        };
        assert_eq!(
            header_line(&full),
            r#"{"type":"session","version":3,"id":"session-1","createdAt":5,"cwd":"/w","parentSession":"p","isSeeded":true,"seedLength":4,"origin":"subagent","delegationDepth":0,"agentPreset":"chapters"}"#
        );
    }

    #[test]
    fn session_log_path_layout() {
        let p = session_log_path(Path::new("/h"), "/home/ana/w", "session-a.b", 2, true);
        assert_eq!(
            p,
            PathBuf::from("/h/sessions/--home-ana-w--/session-a~002Eb/session.v2.jsonl.zstd")
        );
        let p = session_log_path(Path::new("/h"), "/w", "session-x", 0, false);
        assert_eq!(
            p,
            PathBuf::from("/h/sessions/--w--/session-x/session.jsonl")
        );
    }

    #[test]
    fn create_refuses_to_overwrite() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("session.jsonl");
        let header = SessionScript::new(0, 0).header("s", "/w", 0);
        LogWriter::create(&path, false, &header).unwrap();
        assert!(LogWriter::create(&path, false, &header).is_err());
    }

    #[test]
    fn turn_shape_completed_with_tools_and_plan() {
        let mut script = SessionScript::new(3, 1000);
        let mut spec = TurnSpec::new("fix it", "done");
        spec.pre_turn = true;
        spec.tool_calls.push(ToolCallSpec::new(
            "bash",
            json!({"command": "cargo test -p foo"}),
            "ok",
        ));
        spec.plan = Some("1. do it".into());
        let events = script.turn_events(&spec);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "permission/preset",
                "approval/policy",
                "turn/start",
                "step/start",
                "user/message",
                "user/message",
                "user/message",
                "request/header",
                "assistant/message",
                "tool/call",
                "tool/call",
                "tool/result",
                "tool/result",
                "step/end",
                "step/start",
                "request/header",
                "assistant/message",
                "step/end",
                "turn/end",
            ]
        );
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (0..19).collect::<Vec<_>>());
        assert_eq!(script.next_seq(), 19);
        assert_eq!(events[10]["data"]["name"], "exit_plan_mode");
        assert_eq!(events[10]["data"]["arguments"], r#"{"plan":"1. do it"}"#);
        // The next turn continues the numbering.
        let more = script.turn_events(&TurnSpec::new("again", "ok"));
        assert_eq!(more[0]["seq"], 19);
        assert_eq!(more[0]["data"]["turn"], 1);
    }

    #[test]
    fn in_flight_and_error_turns() {
        let mut script = SessionScript::new(4, 0);
        let mut spec = TurnSpec::new("go", "partial");
        spec.end_reason = None;
        let events = script.turn_events(&spec);
        assert_eq!(events.last().unwrap()["type"], "assistant/message");
        spec.end_reason = Some("error".into());
        let events = script.turn_events(&spec);
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert!(kinds.contains(&"assistant/attempt"));
        assert!(!kinds.contains(&"assistant/message"));
        assert_eq!(events.last().unwrap()["data"]["reason"]["kind"], "error");
    }

    #[test]
    fn tool_result_shape_per_version() {
        for version in 0..=4 {
            let tmp = tempfile::tempdir().unwrap();
            let path = tmp.path().join("log");
            let mut spec = TurnSpec::new("read it", "read");
            spec.tool_calls.push(ToolCallSpec {
                is_error: true,
                ..ToolCallSpec::new(
                    "read_file",
                    json!({"path": "/w/src/x.rs"}),
                    "line one\nline two",
                )
            });
            write_session(
                &path,
                false,
                &SessionScript::new(version, 0).header("s", "/w", 0),
                [spec],
                false,
            )
            .unwrap();
            let (_, events) = read_all(&path);
            let call = events.iter().find_map(|e| e.tool_call()).unwrap();
            assert_eq!(call.name, "read_file");
            assert_eq!(call.arguments, r#"{"path":"/w/src/x.rs"}"#);
            let result = events.iter().find_map(|e| e.tool_result()).unwrap();
            assert_eq!(result.call_id, call.call_id, "v{version}");
            assert_eq!(result.content, "line one\nline two");
            assert!(result.is_error);
            let text = std::fs::read_to_string(&path).unwrap();
            let raw: Value = serde_json::from_str(
                text.lines()
                    .find(|l| l.contains(r#""type":"tool/result""#))
                    .unwrap(),
            )
            .unwrap();
            let raw_role = &raw["data"]["message"]["role"];
            assert_eq!(raw_role, if version >= 4 { "tool" } else { "user" });
        }
    }

    #[test]
    fn packed_chunks_only_for_v0_v1() {
        for version in 0..=4 {
            let mut script = SessionScript::new(version, 0);
            let mut spec = TurnSpec::new("q", &"answer text ".repeat(10));
            spec.packed_chunks = true;
            let events = script.turn_events(&spec);
            let packed = events.iter().any(|e| e["type"] == "text-chunks");
            assert_eq!(packed, version <= 1, "v{version}");
        }
    }

    #[test]
    fn packed_row_round_trip_keeps_seqs() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("session.v1.jsonl.zstd");
        let text = "abcdefghij".repeat(10); // 100 bytes → 5 pieces of 24, one of 4
        let mut spec = TurnSpec::new("q", &text);
        spec.packed_chunks = true;
        let header = SessionScript::new(1, 0).header("s", "/w", 0);
        let end_seq = write_session(&path, true, &header, [spec.clone(), spec], false).unwrap();
        let (_, events) = read_all(&path);
        assert_eq!(events.len() as u64, end_seq);
        assert!(events.iter().enumerate().all(|(i, e)| e.seq == i as u64));
        let chunks: Vec<_> = events
            .iter()
            .filter(|e| e.kind == "assistant/chunk")
            .collect();
        assert_eq!(chunks.len(), 10);
        let joined: String = chunks[..5]
            .iter()
            .map(|e| e.data().unwrap()["chunk"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(joined, text);
        let message = events
            .iter()
            .find(|e| e.kind == "assistant/message")
            .unwrap();
        let sources = message.source_event_seqs.clone().unwrap();
        assert_eq!(
            sources,
            chunks[..5].iter().map(|e| e.seq).collect::<Vec<_>>()
        );
        assert_eq!(message.assistant_text().unwrap(), text);
    }

    #[test]
    fn round_trip_every_version_compressed_and_plain() {
        for version in 0..=4 {
            for compressed in [false, true] {
                let tmp = tempfile::tempdir().unwrap();
                let path = tmp.path().join(log_file_name(version, compressed));
                let header = SessionScript::new(version, 1_764_400_000_000).header(
                    "session-x",
                    "/ws",
                    1_764_400_000_000,
                );
                let specs: Vec<TurnSpec> = generate_session(7, 12, 2_000, version, "/ws").collect();
                let end_seq =
                    write_session(&path, compressed, &header, specs.clone(), false).unwrap();
                let (read_header, events) = read_all(&path);
                assert_eq!(read_header, header);
                assert_eq!(
                    events.len() as u64,
                    end_seq,
                    "v{version} compressed={compressed}"
                );
                let humans: Vec<String> = events
                    .iter()
                    .filter_map(|e| e.user_message())
                    .filter(|m| m.source.kind == "user")
                    .map(|m| m.text.clone())
                    .collect();
                let expected: Vec<String> = specs.iter().map(|s| s.human_text.clone()).collect();
                assert_eq!(humans, expected);
                let ends = events.iter().filter(|e| e.kind == "turn/end").count();
                assert_eq!(ends, 12);
            }
        }
    }

    #[test]
    fn generator_is_deterministic_and_varied() {
        let a: Vec<TurnSpec> = generate_session(42, 60, 3_000, 3, "/ws").collect();
        let b: Vec<TurnSpec> = generate_session(42, 60, 3_000, 3, "/ws").collect();
        assert!(a == b, "the same seed gave different sessions");
        let c: Vec<TurnSpec> = generate_session(43, 60, 3_000, 3, "/ws").collect();
        assert!(a != c, "seeds 42 and 43 gave the same session");
        assert_eq!(a.len(), 60);
        let topics: std::collections::BTreeSet<&str> = a
            .iter()
            .flat_map(|t| {
                TASKS.iter().filter(|task| {
                    t.human_text.contains(task.topic)
                        || task.files.iter().any(|f| t.human_text.contains(f))
                })
            })
            .map(|task| task.topic)
            .collect();
        assert!(topics.len() >= 3, "{topics:?}");
        assert!(a
            .iter()
            .all(|t| t.tool_calls.iter().any(|c| c.arguments["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("/ws/")))));
    }

    #[test]
    fn generator_plants_secrets_big_outputs_and_plans() {
        let turns: Vec<TurnSpec> = generate_session(1, 400, 1_000, 2, "/ws").collect();
        let all_results: Vec<&str> = turns
            .iter()
            .flat_map(|t| t.tool_calls.iter().map(|c| c.result.as_str()))
            .collect();
        let has = |needle: &str| all_results.iter().any(|r| r.contains(needle));
        assert!(has("AKIA"));
        assert!(has("ghp_"));
        assert!(has("-----BEGIN RSA PRIVATE KEY-----"));
        assert!(all_results.iter().any(|r| r.len() >= 40 * 1024));
        assert!(turns.iter().any(|t| t.plan.is_some()));
        let reasons: std::collections::BTreeSet<&str> = turns
            .iter()
            .filter_map(|t| t.end_reason.as_deref())
            .collect();
        assert!(
            reasons.contains("completed") && reasons.len() >= 3,
            "{reasons:?}"
        );
        let aws = all_results
            .iter()
            .find_map(|r| r.find("AKIA").map(|i| &r[i + 4..i + 20]))
            .unwrap();
        assert!(aws
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit()));
    }

    #[test]
    fn generator_reaches_target_size() {
        let target = 5_000;
        let total: usize = generate_session(3, 50, target, 4, "/ws")
            .map(|t| {
                t.assistant_text.len()
                    + t.human_text.len()
                    + t.tool_calls.iter().map(|c| c.result.len()).sum::<usize>()
            })
            .sum();
        assert!(total >= 50 * target * 9 / 10, "{total}");
    }
}

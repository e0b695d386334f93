//! Codex rollout → normalized events, streamed line by line (plain or `.jsonl.zst`).
//!
//! Generations read: G1 (mid-2025: a bare header `{id, timestamp, instructions, cwd?}` —
//! with no `cwd`, the first `<environment_context>`'s `<cwd>` names the folder —
//! `{"record_type":"state"}` markers, bare response items), G2 (`{timestamp, type,
//! payload}`: `session_meta`, `response_item`, `event_msg`, `turn_context`, `compacted`) and
//! G3 (2026: G2 plus `ordinal` and new line types, skipped unless they hold conversation).
//! G0 (the spring-2025 TypeScript `.json`) is read as the G1 lines it holds ([`super::g0`]).
//!
//! One stream is read: the person's prompt from `event_msg user_message` where the log has
//! an envelope (G2+; the `response_item` copy is skipped), else the `response_item` user
//! message (G1, and a paginated rollout — `session_meta.history_mode: "paginated"`,
//! codex-cli 0.135+ — which writes no `user_message` and mirrors some prompts as
//! `item_completed` `UserMessage`s, never read); a `<send_user_message_question_reply>` is
//! the person's answers; an image's `<image …>`/`</image>` wrapper blocks are dropped (the
//! image leaves its marker); the answer, reasoning summaries (with none, the raw `reasoning_text`
//! content an open-weight model leaves) and tool calls from `response_item` (`event_msg
//! agent_message` / `agent_reasoning` are copies). Encrypted reasoning is dropped. A
//! `compacted` line (G2 and G3) becomes a compaction-summary note (its `message`, screened
//! like Claude Code's summary: the daemon's compaction moment); its `replacement_history`
//! copies earlier items and is never read.
//!
//! A subagent's rollout (multi-agent Codex: `session_meta.source.subagent`, with
//! `thread_spawn.parent_thread_id` and `depth`; or `thread_source: "subagent"`) belongs to
//! the session tree of the thread that spawned it (the header's parent), and its prompts are
//! that agent's: relayed messages (`agent-message`), conversation but never the person's
//! terms.
//!
//! A fork (`session_meta.forked_from_id`) first copies its parent's lines: while its lines
//! are among the parent rollout's (same type and payload), they are the parent's and are
//! not read here.
//!
//! A hosted web search (`web_search_call`, and its `event_msg web_search_end` twin) is a
//! `web_search` call and its result, shown once ([`super::web_search`]).
//!
//! `/review` (`event_msg entered_review_mode` … `exited_review_mode`) is the person's
//! `/review <hint>`; inside it, the `user_message`s are the request Codex wrote for the
//! reviewer, copied from the reviewer's thread: host context, screened, each text once.
//!
//! Screened (a marker each): `developer`/`system` messages and user-role host context
//! ([`super::screen`]). `turn_context`, `base_instructions` and every unknown type yield
//! nothing.
//!
//! Turns: `task_started` … `task_complete` (completed) or `turn_aborted` (aborted); a log
//! without those ends a turn at the next prompt after an exchange, or (when quiet) at its
//! end after an answer. Seqs: line `i`'s events carry `i << 4 | k`; the resume point is kept
//! at turn ends (a byte offset into the decoded stream for `.zst`).

use std::collections::{BTreeSet, HashSet};
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::screen;
use super::web_search;
use crate::session::reader::{ReadError, ReadNote, ReaderOptions, ResumePoint};
use crate::session::Header;
use crate::source::lines::{Lines, Next, Outbox, Step};

/// The rollout's decoded lines from `from`: `.jsonl.zst` decompressed, a G0 `.json` as the
/// lines it holds ([`super::g0`]).
fn open_stream(path: &Path, from: u64) -> Result<Box<dyn BufRead>, ReadError> {
    if !super::g0::is_g0(path) {
        return crate::source::lines::open_stream(path, from);
    }
    let bytes = super::g0::to_lines(path)?;
    let len = bytes.len() as u64;
    if from > len {
        return Err(ReadError::Io {
            file: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("resume offset {from} is past the end of the rollout's items ({len} bytes): it was rewritten; read it again from the start"),
            ),
        });
    }
    let mut cursor = io::Cursor::new(bytes);
    cursor.set_position(from);
    Ok(Box::new(cursor))
}

/// Bits of a seq that number the events of one line.
pub const SEQ_SHIFT: u32 = 4;
const MAX_SUB: u64 = (1 << SEQ_SHIFT) - 1;
/// The note of a `compacted` line with no summary text (remote compaction).
const COMPACTED_NOTE: &str = "Conversation compacted";
/// The result of a call a `turn_aborted` cut off.
const ABORTED_CALL: &str = "[no result: the turn was aborted before the call returned]";

/// What the log's first lines say of the session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RolloutFacts {
    pub id: Option<String>,
    pub cwd: Option<String>,
    pub cli_version: Option<String>,
    pub first_time: Option<i64>,
    /// `forked_from_id`: the thread this one was forked from (its items copied first).
    pub forked_from: Option<String>,
    /// A subagent's thread (multi-agent Codex: `source.subagent`, or `thread_source:
    /// "subagent"`): its prompts are another agent's, not the person's.
    pub subagent: Option<Subagent>,
    /// `history_mode: "paginated"` (codex-cli 0.135+, and legacy rollouts Codex migrated):
    /// no `event_msg user_message` is written; a prompt is its `response_item`.
    pub paginated: bool,
}

/// What a subagent rollout says of the thread that spawned it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Subagent {
    /// `source.subagent.thread_spawn.parent_thread_id` (else the payload's
    /// `parent_thread_id`, else its `forked_from_id`).
    pub parent: Option<String>,
    /// `thread_spawn.depth`.
    pub depth: Option<u32>,
}

/// A `session_meta` payload's subagent facts, when it is a subagent's.
fn subagent_of(meta: &Value) -> Option<Subagent> {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let source = meta.get("source").and_then(|s| s.get("subagent"));
    let spawned = meta.get("thread_source").and_then(Value::as_str) == Some("subagent");
    if source.is_none() && !spawned {
        return None;
    }
    let spawn = source.and_then(|s| s.get("thread_spawn"));
    Some(Subagent {
        parent: text(spawn.and_then(|s| s.get("parent_thread_id")))
            .or_else(|| text(meta.get("parent_thread_id")))
            .or_else(|| text(meta.get("forked_from_id"))),
        depth: spawn
            .and_then(|s| s.get("depth"))
            .and_then(Value::as_u64)
            .and_then(|d| u32::try_from(d).ok()),
    })
}

/// The facts of a `session_meta` payload or a G1 header line.
fn facts_of(meta: &Value) -> RolloutFacts {
    let s = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_owned);
    RolloutFacts {
        id: s("id").or_else(|| s("session_id")),
        cwd: s("cwd").filter(|c| !c.is_empty()),
        cli_version: s("cli_version"),
        forked_from: s("forked_from_id").filter(|f| !f.is_empty()),
        subagent: subagent_of(meta),
        paginated: meta.get("history_mode").and_then(Value::as_str) == Some("paginated"),
        first_time: meta
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(crate::time::parse_rfc3339_ms),
    }
}

/// Whether a line is a G1 header (`id` + `timestamp`, no `type`).
fn is_bare_header(line: &Value) -> bool {
    line.get("type").is_none() && line.get("id").is_some() && line.get("record_type").is_none()
}

pub(crate) fn is_zst(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

/// The `<cwd>` of a G1 user message carrying `<environment_context>`: early G1 headers
/// (Codex 0.2x, August 2025) name no `cwd`, that message is the one place the session's
/// folder is written.
fn environment_cwd(item: &Value) -> Option<String> {
    if item.get("type").and_then(Value::as_str) != Some("message")
        || item.get("role").and_then(Value::as_str) != Some("user")
    {
        return None;
    }
    item.get("content")?.as_array()?.iter().find_map(|block| {
        let text = block.get("text")?.as_str()?;
        let context = &text[text.find("<environment_context>")?..];
        let start = context.find("<cwd>")? + "<cwd>".len();
        let end = start + context[start..].find("</cwd>")?;
        Some(context[start..end].trim().to_owned()).filter(|c| !c.is_empty())
    })
}

/// The facts of a rollout's first lines (`session_meta` or a G1 header, with an early G1
/// header's cwd from the `<environment_context>` after it), reading at most a few lines.
pub fn rollout_facts(path: &Path, cap: usize) -> Result<Option<RolloutFacts>, ReadError> {
    let stream = open_stream(path, 0)?;
    let mut lines = Lines::new(stream, 0, cap);
    // A G1 header with no `cwd`, waiting for its `<environment_context>`.
    let mut header: Option<RolloutFacts> = None;
    for _ in 0..8 {
        let next = lines.next_line().map_err(|e| stream_error(path, 0, e))?;
        match next {
            Next::Line { .. } => {}
            Next::TooLong { .. } => continue,
            Next::Torn { .. } | Next::End => return Ok(header),
        }
        let Ok(v) = serde_json::from_slice::<Value>(lines.line()) else {
            continue;
        };
        if let Some(mut f) = header.take() {
            f.cwd = environment_cwd(&v);
            if f.cwd.is_some() {
                return Ok(Some(f));
            }
            header = Some(f);
            continue;
        }
        if v.get("type").and_then(Value::as_str) == Some("session_meta") {
            let payload = v.get("payload").cloned().unwrap_or(Value::Null);
            let mut f = facts_of(&payload);
            if f.first_time.is_none() {
                f.first_time = v
                    .get("timestamp")
                    .and_then(Value::as_str)
                    .and_then(crate::time::parse_rfc3339_ms);
            }
            return Ok(Some(f));
        }
        if is_bare_header(&v) {
            let f = facts_of(&v);
            if f.cwd.is_some() {
                return Ok(Some(f));
            }
            header = Some(f);
        }
    }
    Ok(header)
}

/// A decoding failure of a `.zst` (or any read failure) at `at`.
fn stream_error(path: &Path, at: u64, e: io::Error) -> ReadError {
    if is_zst(path) {
        ReadError::CorruptFrame {
            file: path.to_path_buf(),
            at,
            detail: format!("{e} (an offset into the decoded rollout)"),
        }
    } else {
        ReadError::Io {
            file: path.to_path_buf(),
            source: e,
        }
    }
}

/// Streaming reader of one Codex rollout.
pub struct CodexReader {
    path: PathBuf,
    lines: Lines<Box<dyn BufRead>>,
    line_index: u64,
    out: Outbox,
    open_calls: BTreeSet<String>,
    /// This turn's web searches shown, by call id and by arguments: Codex records each
    /// twice (see [`super::web_search`]).
    searches: BTreeSet<String>,
    exchange: bool,
    last_was_answer: bool,
    /// The log has `task_started`/`task_complete`: only those end turns.
    tasks: bool,
    /// The log has the `{type, payload}` envelope: prompts come from `event_msg`.
    enveloped: bool,
    /// A paginated rollout: prompts come from the `response_item`s (there is no
    /// `event_msg user_message`; an `item_completed` `UserMessage` is a mirror).
    paginated: bool,
    /// A subagent's rollout: its prompts are the spawning agent's (a relayed message,
    /// conversation but never the person's terms).
    subagent: bool,
    quiet_end: bool,
    cap: usize,
    /// A fork's copies of its parent's lines, by content: while the log's lines are among
    /// them they are the parent's and are not read (they are read in the parent's rollout).
    parent_lines: Option<HashSet<u64>>,
    /// Inside `/review` (`entered_review_mode` until `exited_review_mode` or the turn's end):
    /// the `user_message`s are the reviewer's request, copied from its thread — the host's
    /// words, each text once — not the person's.
    review: Option<BTreeSet<String>>,
}

/// A rollout line's content (its type and payload, not its time or ordinal).
fn content_key(line: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    line.get("type").map(Value::to_string).hash(&mut h);
    line.get("payload").map(Value::to_string).hash(&mut h);
    h.finish()
}

/// The content keys of the lines of the rollout `parent` names, when it is found beside
/// `path` in the same Codex home.
fn parent_lines(path: &Path, parent: &str, cap: usize) -> Option<HashSet<u64>> {
    let parent_path = super::find_rollout(path, parent)?;
    let stream = open_stream(&parent_path, 0).ok()?;
    let mut lines = Lines::new(stream, 0, cap);
    let mut keys = HashSet::new();
    while let Ok(next) = lines.next_line() {
        match next {
            Next::Line { .. } => {}
            Next::TooLong { .. } => continue,
            Next::Torn { .. } | Next::End => break,
        }
        if let Ok(v) = serde_json::from_slice::<Value>(lines.line()) {
            keys.insert(content_key(&v));
        }
    }
    Some(keys)
}

impl CodexReader {
    pub fn open(
        path: &Path,
        from: ResumePoint,
        options: ReaderOptions,
        quiet_end: bool,
    ) -> Result<Self, ReadError> {
        let facts = rollout_facts(path, options.max_line_bytes)?;
        let header = if from.header_seen {
            None
        } else {
            facts.as_ref().map(|f| header_of(path, f))
        };
        // Whether the log uses task events and the envelope is learned as it is read; a
        // resumed reader learns it from the first line again.
        let enveloped = !is_g1(path);
        // A resume point is a turn end, and a fork's copies end no turn: past the start, the
        // copies are behind.
        let parent_lines = facts
            .as_ref()
            .and_then(|f| f.forked_from.as_deref())
            .filter(|_| from.byte_offset == 0)
            .and_then(|p| parent_lines(path, p, options.max_line_bytes));
        let stream = open_stream(path, from.byte_offset)?;
        Ok(CodexReader {
            path: path.to_path_buf(),
            lines: Lines::new(stream, from.byte_offset, options.max_line_bytes),
            line_index: from.next_seq >> SEQ_SHIFT,
            out: Outbox::new(header, from),
            open_calls: BTreeSet::new(),
            searches: BTreeSet::new(),
            exchange: false,
            last_was_answer: false,
            tasks: from.byte_offset > 0 && enveloped && has_tasks(path),
            enveloped,
            paginated: facts.as_ref().is_some_and(|f| f.paginated),
            subagent: facts.as_ref().is_some_and(|f| f.subagent.is_some()),
            quiet_end,
            cap: options.max_line_bytes,
            parent_lines,
            review: None,
        })
    }

    fn push(&mut self, seq: u64, kind: &str, data: Value, time: Option<i64>) {
        self.out.push(seq, kind, data, time);
    }

    fn end_turn(&mut self, seq: u64, reason: &str, resume: ResumePoint) {
        self.out.end_turn(seq, reason, resume);
        self.exchange = false;
        self.last_was_answer = false;
        self.open_calls.clear();
        self.searches.clear();
    }

    fn step(&mut self) -> Result<(), ReadError> {
        let at = self.lines.offset();
        let next = self
            .lines
            .next_line()
            .map_err(|e| stream_error(&self.path, at, e))?;
        let index = self.line_index;
        let base = index << SEQ_SHIFT;
        match next {
            Next::End | Next::Torn { .. } => {
                if let Next::Torn { start } = next {
                    self.out.note(ReadNote::TornTail {
                        file: self.path.clone(),
                        at: start,
                    });
                }
                if self.quiet_end
                    && !self.tasks
                    && self.exchange
                    && self.open_calls.is_empty()
                    && self.last_was_answer
                {
                    let resume = ResumePoint {
                        byte_offset: self.lines.offset(),
                        next_seq: base + 1,
                        header_seen: true,
                    };
                    self.end_turn(base, "completed", resume);
                }
                self.out.finish();
                Ok(())
            }
            Next::TooLong { .. } => {
                self.line_index += 1;
                Err(ReadError::LineTooLong {
                    file: self.path.clone(),
                    after_seq: base.checked_sub(1),
                    limit: self.cap,
                })
            }
            Next::Line { start } => {
                self.line_index += 1;
                let line: Value = match serde_json::from_slice(self.lines.line()) {
                    Ok(v) => v,
                    Err(e) => {
                        return Err(ReadError::BadLine {
                            file: self.path.clone(),
                            after_seq: base.checked_sub(1),
                            detail: format!("line {}: {e}", index + 1),
                        })
                    }
                };
                let line_start = ResumePoint {
                    byte_offset: start,
                    next_seq: base + 1,
                    header_seen: true,
                };
                let after = ResumePoint {
                    byte_offset: self.lines.offset(),
                    next_seq: (index + 1) << SEQ_SHIFT,
                    header_seen: true,
                };
                self.line(base, line, line_start, after);
                Ok(())
            }
        }
    }

    fn line(&mut self, base: u64, line: Value, line_start: ResumePoint, after: ResumePoint) {
        let time = line
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(crate::time::parse_rfc3339_ms);
        let mut sub = 1u64;
        let mut next_seq = move || {
            let s = base | sub.min(MAX_SUB);
            sub += 1;
            s
        };
        let kind = line.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(copies) = &self.parent_lines {
            if matches!(kind, "response_item" | "event_msg" | "compacted") {
                if copies.contains(&content_key(&line)) {
                    return; // the parent's, copied by the fork
                }
                self.parent_lines = None; // the fork's own lines begin
            }
        }
        let payload = line.get("payload");
        match (kind, payload) {
            ("event_msg", Some(p)) => match p.get("type").and_then(Value::as_str) {
                Some("task_started") => {
                    self.tasks = true;
                }
                Some("item_completed") => {
                    // Canonical items (paginated rollouts): only a review's start and end say
                    // what the legacy events do; a `UserMessage` mirrors a `response_item`.
                    let item = p.get("item");
                    match item.and_then(|i| i.get("type")).and_then(Value::as_str) {
                        Some("EnteredReviewMode") => self.enter_review(
                            item.unwrap_or(&Value::Null),
                            &mut next_seq,
                            time,
                            line_start,
                        ),
                        Some("ExitedReviewMode") => self.review = None,
                        _ => {}
                    }
                }
                // A paginated rollout writes none; one there would copy a `response_item`.
                Some("user_message") if self.paginated => {}
                Some("entered_review_mode") => {
                    self.enter_review(p, &mut next_seq, time, line_start)
                }
                Some("exited_review_mode") => self.review = None,
                Some("user_message") if self.review.is_some() => {
                    let text = user_message_text(p);
                    let first = self
                        .review
                        .as_mut()
                        .is_some_and(|seen| seen.insert(text.clone()));
                    if first && !text.is_empty() {
                        let seq = next_seq();
                        self.push(
                            seq,
                            "user/message",
                            json!({"content": text, "source": {"kind": screen::CONTEXT}}),
                            time,
                        );
                    }
                }
                Some("task_complete") if self.exchange => {
                    self.review = None;
                    let seq = next_seq();
                    self.end_turn(seq, "completed", after);
                }
                Some("turn_aborted") if self.exchange => {
                    self.review = None;
                    // A call the abort cut off gets a result that says so.
                    let open: Vec<String> = std::mem::take(&mut self.open_calls)
                        .into_iter()
                        .take(usize::try_from(MAX_SUB).unwrap_or(0).saturating_sub(2))
                        .collect();
                    for id in open {
                        self.result(next_seq(), &id, ABORTED_CALL, true, time);
                    }
                    let seq = next_seq();
                    self.end_turn(seq, "aborted", after);
                }
                Some("web_search_end") => {
                    let id = p.get("call_id").and_then(Value::as_str).unwrap_or_default();
                    self.web_search(
                        id,
                        web_search::arguments(p.get("action"), p.get("query")),
                        p.get("results"),
                        &mut next_seq,
                        time,
                    );
                }
                Some("user_message") => {
                    let text = user_message_text(p);
                    self.user_text(text, true, &mut next_seq, time, line_start);
                }
                _ => {}
            },
            ("response_item", Some(p)) => self.item(p, &mut next_seq, time, line_start),
            // A new turn's settings: a review that never said it ended is over.
            ("turn_context", _) => self.review = None,
            ("compacted", Some(p)) => {
                // The summary only: `replacement_history` copies lines read already.
                let text = p
                    .get("message")
                    .and_then(Value::as_str)
                    .filter(|m| !m.trim().is_empty())
                    .unwrap_or(COMPACTED_NOTE)
                    .to_owned();
                let seq = next_seq();
                self.push(
                    seq,
                    "user/message",
                    json!({"content": text, "source": {"kind": crate::source::COMPACTION_SUMMARY}}),
                    time,
                );
            }
            // G1: a bare item.
            (
                "message"
                | "reasoning"
                | "function_call"
                | "function_call_output"
                | "local_shell_call"
                | "custom_tool_call"
                | "custom_tool_call_output"
                | "web_search_call",
                None,
            ) => self.item(&line, &mut next_seq, time, line_start),
            _ => {}
        }
    }

    /// `/review` begins (the legacy event or the paginated item, `p` its payload): the
    /// person's `/review <hint>`, then review mode until it ends.
    fn enter_review(
        &mut self,
        p: &Value,
        next_seq: &mut impl FnMut() -> u64,
        time: Option<i64>,
        line_start: ResumePoint,
    ) {
        self.user_text(review_command(p), true, next_seq, time, line_start);
        self.review = Some(BTreeSet::new());
    }

    /// A person's (or the host's) user-role text.
    fn user_text(
        &mut self,
        text: String,
        from_event: bool,
        next_seq: &mut impl FnMut() -> u64,
        time: Option<i64>,
        line_start: ResumePoint,
    ) {
        if text.is_empty() {
            return;
        }
        let kind = screen::classify_user(&text);
        if kind == screen::HUMAN && !from_event && self.enveloped && !self.paginated {
            return; // the `event_msg user_message` copy is the one read
        }
        let text = screen::question_reply(&text).unwrap_or(text);
        if kind == screen::HUMAN && !self.tasks && self.exchange {
            let reason = if self.open_calls.is_empty() {
                "completed"
            } else {
                "aborted"
            };
            let seq = line_start.next_seq - 1;
            self.end_turn(seq, reason, line_start);
        }
        let seq = next_seq();
        let source = crate::source::user_source(kind, kind == screen::HUMAN && self.subagent);
        let text = if kind == screen::DELEGATE {
            screen::delegate_report(&text)
        } else {
            text
        };
        self.push(
            seq,
            "user/message",
            json!({"content": text, "source": source}),
            time,
        );
        self.last_was_answer = false;
    }

    /// A response item (`response_item.payload`, or a G1 bare line).
    fn item(
        &mut self,
        p: &Value,
        next_seq: &mut impl FnMut() -> u64,
        time: Option<i64>,
        line_start: ResumePoint,
    ) {
        let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
        match p.get("type").and_then(Value::as_str) {
            Some("message") => {
                let role = p.get("role").and_then(Value::as_str).unwrap_or("");
                let text = message_text(p.get("content"));
                match role {
                    "assistant" => {
                        if text.is_empty() {
                            return;
                        }
                        let seq = next_seq();
                        self.push(
                            seq,
                            "assistant/message",
                            json!({"content": [{"type": "text", "text": text}]}),
                            time,
                        );
                        self.exchange = true;
                        self.last_was_answer = true;
                    }
                    "user" => self.user_text(text, false, next_seq, time, line_start),
                    _ => {
                        if text.is_empty() {
                            return;
                        }
                        // `developer` / `system`: the host's instructions.
                        let seq = next_seq();
                        self.push(
                            seq,
                            "user/message",
                            json!({"content": text, "source": {"kind": screen::DEVELOPER}}),
                            time,
                        );
                    }
                }
            }
            Some("reasoning") => {
                let texts = |key: &str| -> Vec<Value> {
                    p.get(key)
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|b| b.get("text").and_then(Value::as_str))
                                .map(|t| json!({"type": "reasoning", "text": t}))
                                .collect()
                        })
                        .unwrap_or_default()
                };
                // The summary where there is one; else the raw `reasoning_text` blocks an
                // open-weight model's rollout carries in `content` (a real 2025 G1 file).
                let mut summary = texts("summary");
                if summary.is_empty() {
                    summary = texts("content");
                }
                if summary.is_empty() {
                    return; // encrypted only
                }
                let seq = next_seq();
                self.push(
                    seq,
                    "assistant/message",
                    json!({ "content": summary }),
                    time,
                );
            }
            Some("function_call") => {
                let id = s("call_id").or_else(|| s("id")).unwrap_or_default();
                let arguments = match p.get("arguments") {
                    Some(Value::String(a)) => a.clone(),
                    Some(other) => other.to_string(),
                    None => "{}".to_owned(),
                };
                self.call(id, s("name").unwrap_or_default(), arguments, next_seq, time);
            }
            Some("custom_tool_call") => {
                let id = s("call_id").or_else(|| s("id")).unwrap_or_default();
                let name = s("name").unwrap_or_default();
                let input = s("input").unwrap_or_default();
                let arguments = screen::custom_call_arguments(&name, &input);
                self.call(id, name, arguments, next_seq, time);
            }
            Some("local_shell_call") => {
                let id = s("call_id").or_else(|| s("id")).unwrap_or_default();
                let command = p
                    .get("action")
                    .and_then(|a| a.get("command"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let arguments = json!({ "command": command }).to_string();
                self.call(id, "local_shell".to_owned(), arguments, next_seq, time);
            }
            Some("web_search_call") => {
                let id = s("id").or_else(|| s("call_id")).unwrap_or_default();
                let arguments = web_search::arguments(p.get("action"), None);
                self.web_search(&id, arguments, None, next_seq, time);
            }
            Some("function_call_output") | Some("custom_tool_call_output") => {
                let id = s("call_id").unwrap_or_default();
                let content = output_text(p.get("output"));
                self.result(next_seq(), &id, &content, false, time);
                self.open_calls.remove(&id);
                self.last_was_answer = false;
            }
            _ => {}
        }
    }

    /// A web search shown as a call and its result, once per search: a record whose id or
    /// arguments this turn showed already is the search's other record.
    fn web_search(
        &mut self,
        id: &str,
        arguments: Option<String>,
        results: Option<&Value>,
        next_seq: &mut impl FnMut() -> u64,
        time: Option<i64>,
    ) {
        let Some(arguments) = arguments else {
            return; // says nothing of what was searched: the other record will
        };
        if (!id.is_empty() && self.searches.contains(id)) || self.searches.contains(&arguments) {
            return;
        }
        if !id.is_empty() {
            self.searches.insert(id.to_owned());
        }
        self.searches.insert(arguments.clone());
        // Answered at once: it leaves no call open (nor closes another of the same id).
        let was_open = self.open_calls.contains(id);
        self.call(
            id.to_owned(),
            web_search::TOOL.to_owned(),
            arguments,
            next_seq,
            time,
        );
        self.result(
            next_seq(),
            id,
            &web_search::result_text(results),
            false,
            time,
        );
        if !was_open {
            self.open_calls.remove(id);
        }
    }

    /// A `tool/result` answering `id`.
    fn result(&mut self, seq: u64, id: &str, content: &str, is_error: bool, time: Option<i64>) {
        self.push(
            seq,
            "tool/result",
            json!({"role": "tool", "toolCallId": id, "content": content, "isError": is_error}),
            time,
        );
    }

    fn call(
        &mut self,
        id: String,
        name: String,
        arguments: String,
        next_seq: &mut impl FnMut() -> u64,
        time: Option<i64>,
    ) {
        let seq = next_seq();
        self.push(
            seq,
            "tool/call",
            json!({"callId": id, "name": name, "arguments": arguments}),
            time,
        );
        self.open_calls.insert(id);
        self.exchange = true;
        self.last_was_answer = false;
    }
}

/// Whether the rollout's first line is a G1 bare header.
fn is_g1(path: &Path) -> bool {
    first_line(path).is_some_and(|v| is_bare_header(&v))
}

/// How far a plain rollout was searched for a `task_started` event, and whether one was
/// found (see [`has_tasks`]).
#[derive(Clone, Copy)]
struct TasksSeen {
    dev: u64,
    ino: u64,
    /// The end of the last whole line searched.
    searched: u64,
    found: bool,
}

/// [`TasksSeen`] by rollout: a followed rollout is searched once, then only past where
/// the last search ended (a poll costs what was appended, not the file).
static TASKS: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<PathBuf, TasksSeen>>> =
    std::sync::OnceLock::new();

/// Whether the rollout holds a `task_started` event (a resumed reader's question).
fn has_tasks(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let cache = TASKS.get_or_init(Default::default);
    // Only a plain rollout grows by appends; a compressed one is searched whole.
    let id = path
        .extension()
        .is_some_and(|e| e == "jsonl")
        .then(|| std::fs::metadata(path).ok())
        .flatten()
        .map(|m| (m.dev(), m.ino(), m.len()));
    let kept = id.and_then(|(dev, ino, len)| {
        let c = cache.lock().ok()?;
        c.get(path)
            .copied()
            .filter(|t| t.dev == dev && t.ino == ino && t.searched <= len)
    });
    if kept.is_some_and(|t| t.found) {
        return true;
    }
    let from = kept.map_or(0, |t| t.searched);
    let Ok(mut stream) = open_stream(path, from) else {
        return false;
    };
    let mut searched = from;
    let mut found = false;
    let mut line = Vec::new();
    loop {
        line.clear();
        let Ok(n) = stream.read_until(b'\n', &mut line) else {
            break;
        };
        if n == 0 {
            break;
        }
        if memfind(&line, b"\"task_started\"") {
            found = true;
            break;
        }
        if line.last() != Some(&b'\n') {
            break; // a torn last line: searched again next time
        }
        searched += n as u64;
    }
    if let (Some((dev, ino, _)), Ok(mut c)) = (id, cache.lock()) {
        c.insert(
            path.to_path_buf(),
            TasksSeen {
                dev,
                ino,
                searched,
                found,
            },
        );
    }
    found
}

fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn first_line(path: &Path) -> Option<Value> {
    let stream = open_stream(path, 0).ok()?;
    let line = stream.split(b'\n').next()?.ok()?;
    serde_json::from_slice(&line).ok()
}

/// Text of a message's `content` blocks (`input_text`, `output_text`, `text`); images as a
/// marker.
fn message_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let mut parts = Vec::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("input_image") => {
                        let len = b
                            .get("image_url")
                            .and_then(Value::as_str)
                            .map_or(0, str::len);
                        parts.push(image_marker(&format!("{len} bytes")));
                    }
                    _ => {
                        if let Some(t) = b.get("text").and_then(Value::as_str) {
                            // `<image name=[Image #1] path="…">` … `</image>` around an
                            // `input_image`: the host's wrapper, its marker says it.
                            if !screen::is_image_wrapper(t) {
                                parts.push(t.to_owned());
                            }
                        }
                    }
                }
            }
            parts.join("\n\n")
        }
        _ => String::new(),
    }
}

/// The person's `/review` as the person chose it: the command and Codex's hint for the
/// target (`current changes`, `changes against 'main'`, a custom review's instructions).
fn review_command(p: &Value) -> String {
    let hint = p
        .get("user_facing_hint")
        .and_then(Value::as_str)
        .or_else(|| {
            p.get("target")
                .and_then(|t| t.get("instructions"))
                .and_then(Value::as_str)
        })
        .map(crate::names::one_line)
        .unwrap_or_default();
    let hint = hint.trim();
    if hint.is_empty() {
        "/review".to_owned()
    } else {
        format!("/review {hint}")
    }
}

/// An `event_msg user_message`'s text: its `message`, then a marker per image the person
/// attached — `images` (inline data URLs: their size) and `local_images` (files: their
/// name) — so a prompt of images alone is still the person's message.
fn user_message_text(p: &Value) -> String {
    let strings = |k: &str| {
        p.get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
    };
    let mut parts: Vec<String> = p
        .get("message")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty())
        .map(str::to_owned)
        .into_iter()
        .collect();
    parts.extend(strings("images").map(|url| image_marker(&format!("{} bytes", url.len()))));
    parts.extend(
        strings("local_images")
            .map(|path| image_marker(path.rsplit(['/', '\\']).next().unwrap_or(path))),
    );
    parts.join("\n\n")
}

/// The marker an image leaves in a message: what is known of it (its size or file name).
fn image_marker(what: &str) -> String {
    crate::session::attachment::marker("image", Some(what))
}

/// A call's output: a string, often JSON `{"output": …, "metadata": …}` (the output is
/// read), or content blocks.
fn output_text(output: Option<&Value>) -> String {
    match output {
        Some(Value::String(s)) => {
            if s.starts_with('{') {
                if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(s) {
                    if let Some(Value::String(inner)) = o.get("output") {
                        return inner.clone();
                    }
                }
            }
            s.clone()
        }
        Some(Value::Object(o)) => match o.get("content") {
            Some(Value::String(c)) => c.clone(),
            Some(c @ Value::Array(_)) => message_text(Some(c)),
            _ => Value::Object(o.clone()).to_string(),
        },
        Some(c @ Value::Array(_)) => message_text(Some(c)),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn header_of(path: &Path, facts: &RolloutFacts) -> Header {
    let id = facts.id.clone().unwrap_or_else(|| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
            .trim_end_matches(".zst")
            .trim_end_matches(".jsonl")
            .trim_end_matches(".json")
            .to_owned()
    });
    let mut header = crate::source::lines::header(
        crate::source::Harness::Codex,
        &id,
        facts.cwd.clone(),
        facts.first_time,
        facts.cli_version.clone(),
    );
    // A subagent's chapters belong to the tree of the thread that spawned it.
    if let Some(sub) = &facts.subagent {
        header.parent_session = sub
            .parent
            .as_ref()
            .map(|p| format!("{}{p}", crate::source::Harness::Codex.session_prefix()));
        header.delegation_depth = sub.depth;
    }
    header
}

impl Step for CodexReader {
    fn outbox(&mut self) -> &mut Outbox {
        &mut self.out
    }
    fn outbox_ref(&self) -> &Outbox {
        &self.out
    }
    fn step(&mut self) -> Result<(), ReadError> {
        CodexReader::step(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::reader::LogItem;
    use crate::source::EventSource;
    use crate::turn::{CompletedTurn, TurnAssembler};

    fn env(kind: &str, payload: Value) -> String {
        json!({"timestamp": "2026-02-01T10:00:00.000Z", "type": kind, "payload": payload})
            .to_string()
            + "\n"
    }
    fn meta() -> String {
        env(
            "session_meta",
            json!({"id": "0199aaaa-0000-7000-8000-000000000001", "cwd": "/w", "cli_version": "0.58.0", "base_instructions": {"text": "You are Codex. SYSTEM PROMPT"}}),
        )
    }
    fn item(payload: Value) -> String {
        env("response_item", payload)
    }

    #[test]
    fn a_followed_rollout_is_searched_for_task_events_past_where_the_last_search_ended() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("rollout-2026-02-01T10-00-00-x.jsonl");
        let mut f = std::fs::File::create(&path).expect("create");
        f.write_all((meta() + &user_item("one") + &answer("1")).as_bytes())
            .expect("write");
        assert!(!has_tasks(&path));
        let searched = |p: &Path| {
            TASKS
                .get()
                .and_then(|c| c.lock().ok()?.get(p).map(|t| t.searched))
        };
        let first = searched(&path).expect("kept");
        assert_eq!(first, std::fs::metadata(&path).expect("meta").len());
        // A torn line is searched again once whole.
        f.write_all(br#"{"timestamp":"2026-02-01T10:00:01.000Z","type":"event_msg","payload":{"type":"task_st"#)
            .expect("torn");
        assert!(!has_tasks(&path));
        assert_eq!(searched(&path), Some(first));
        f.write_all(b"arted\"}}\n").expect("rest");
        assert!(has_tasks(&path));
        // A rollout replaced by another file is searched from its start.
        std::fs::remove_file(&path).expect("rm");
        std::fs::write(&path, meta() + &user_item("two")).expect("replace");
        assert!(!has_tasks(&path));
    }
    fn event(payload: Value) -> String {
        env("event_msg", payload)
    }
    fn user_item(text: &str) -> String {
        item(
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}),
        )
    }
    fn answer(text: &str) -> String {
        item(
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}),
        )
    }

    struct Read {
        header: Option<Header>,
        turns: Vec<CompletedTurn>,
        error: Option<ReadError>,
        notes: Vec<ReadNote>,
    }

    fn read_bytes(name: &str, bytes: &[u8], quiet: bool) -> Read {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let mut out = Read {
            header: None,
            turns: Vec::new(),
            error: None,
            notes: Vec::new(),
        };
        let mut r = match CodexReader::open(
            &path,
            ResumePoint::default(),
            ReaderOptions::default(),
            quiet,
        ) {
            Ok(r) => r,
            Err(e) => {
                out.error = Some(e);
                return out;
            }
        };
        let mut asm = TurnAssembler::new();
        let mut last = None;
        loop {
            match r.next_item() {
                Ok(Some(LogItem::Header(h))) => out.header = Some(h),
                Ok(Some(LogItem::Event(e))) => {
                    assert!(last.is_none_or(|l| e.seq > l), "seqs ascend");
                    last = Some(e.seq);
                    out.turns.extend(asm.push(e));
                }
                Ok(None) => break,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            }
        }
        out.notes = r.notes().to_vec();
        out
    }

    fn read(text: &str, quiet: bool) -> Read {
        read_bytes(
            "rollout-2026-02-01T10-00-00-x.jsonl",
            text.as_bytes(),
            quiet,
        )
    }

    /// A quiet rollout read whole: no error, and `turns` completed turns.
    fn read_turns(text: &str, turns: usize) -> Read {
        let r = read(text, true);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(
            r.turns.len(),
            turns,
            "{:?}",
            r.turns.iter().map(texts).collect::<Vec<_>>()
        );
        r
    }

    fn texts(t: &CompletedTurn) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for e in &t.events {
            if let Some(m) = e.user_message() {
                out.push((m.source.kind.clone(), m.text.clone()));
            } else if let Some(a) = e.assistant_text().filter(|a| !a.is_empty()) {
                out.push(("assistant".into(), a.to_owned()));
            }
        }
        out
    }

    fn g2() -> String {
        [
            meta(),
            item(json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>sandboxed"}]})),
            user_item("# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be terse</INSTRUCTIONS>"),
            user_item("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            env("turn_context", json!({"turn_id": "t1", "cwd": "/w", "model": "gpt-5"})),
            user_item("fix the build"),
            event(json!({"type": "user_message", "message": "fix the build", "images": []})),
            item(json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": "thinking about it"}], "encrypted_content": "gAAAAAsecret"})),
            event(json!({"type": "agent_reasoning", "text": "thinking about it"})),
            item(json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"bash\",\"-lc\",\"cargo build\"]}", "call_id": "c1"})),
            item(json!({"type": "function_call_output", "call_id": "c1", "output": "{\"output\":\"Finished\",\"metadata\":{\"exit_code\":0}}"})),
            item(json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch\n*** Update File: src/a.rs\n*** End Patch", "call_id": "c2"})),
            item(json!({"type": "custom_tool_call_output", "call_id": "c2", "output": "Success"})),
            answer("fixed"),
            event(json!({"type": "agent_message", "message": "fixed"})),
            event(json!({"type": "token_count", "info": null})),
            event(json!({"type": "task_complete", "turn_id": "t1", "last_agent_message": "fixed"})),
            env("compacted", json!({"message": "", "replacement_history": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the build"}]}]})),
            event(json!({"type": "context_compacted"})),
            env("world_state", json!({"x": 1})),
            json!({"timestamp": "2026-02-01T10:00:00.000Z", "ordinal": 20, "type": "token_usage_record", "payload": {}}).to_string() + "\n",
            event(json!({"type": "task_started", "turn_id": "t2"})),
            event(json!({"type": "user_message", "message": "now test"})),
            item(json!({"type": "local_shell_call", "call_id": "c3", "action": {"type": "exec", "command": ["cargo", "test"]}})),
        ]
        .concat()
    }

    /// Real shapes (Codex's code mode, codex-cli 0.1xx): one `custom_tool_call` named `exec`
    /// whose `input` is a JavaScript program calling the tools. The turn signs the
    /// program's commands and the paths its patch touches.
    #[test]
    fn a_code_mode_program_signs_its_commands_and_patched_paths() {
        let program = "const r = await tools.exec_command({cmd: \"cargo test -p auth\", workdir: \"/w\", yield_time_ms: 1000});\ntext(r);\ntext(await tools.apply_patch(\"*** Begin Patch\\n*** Update File: src/auth/token.rs\\n@@\\n-a\\n+b\\n*** End Patch\"));";
        let text = [
            meta(),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            event(json!({"type": "user_message", "message": "fix the token expiry"})),
            item(json!({"type": "custom_tool_call", "namespace": "functions", "name": "exec", "input": program, "call_id": "c1"})),
            item(json!({"type": "custom_tool_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "Exit code: 0\ntest result: ok"}]})),
            answer("fixed"),
            event(json!({"type": "task_complete", "turn_id": "t1"})),
        ]
        .concat();
        let r = read(&text, true);
        assert!(r.error.is_none(), "{:?}", r.error);
        let redactor = crate::redact::built_in().expect("rules");
        let turn = redactor.redact_all(
            crate::signature::TurnText::of(&r.turns[0]),
            &mut crate::redact::RedactionCounts::default(),
        );
        let sig = crate::signature::sign(&turn, "s", "/w", "2026-01-01T00:00:00Z").into_inner();
        assert_eq!(sig.commands, ["cargo test auth"], "{sig:?}");
        assert_eq!(sig.paths, ["src/auth/token.rs"], "{sig:?}");
    }

    /// Real shapes: a prompt of images alone (`local_images`, no `message`), one with a
    /// placeholder and a Windows path, one with an inline data URL.
    #[test]
    fn a_prompt_with_images_keeps_a_marker_for_each() {
        let text = [
            meta(),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            event(json!({"type": "user_message", "local_images": ["attachments/ref.png"]})),
            answer("a diagram"),
            event(json!({"type": "task_complete", "turn_id": "t1"})),
            event(json!({"type": "task_started", "turn_id": "t2"})),
            event(json!({"type": "user_message", "message": "[Image #1] 这个图片多大", "images": [], "local_images": ["C:\\Users\\ana\\Desktop\\1.png"], "text_elements": [{"placeholder": "[Image #1]"}]})),
            answer("500 × 277"),
            event(json!({"type": "task_complete", "turn_id": "t2"})),
            event(json!({"type": "task_started", "turn_id": "t3"})),
            event(json!({"type": "user_message", "message": "", "images": ["data:image/png;base64,iVBORw0K"]})),
            answer("a chart"),
            event(json!({"type": "task_complete", "turn_id": "t3"})),
        ]
        .concat();
        let r = read(&text, true);
        assert!(r.error.is_none(), "{:?}", r.error);
        let prompts: Vec<Vec<(String, String)>> = r
            .turns
            .iter()
            .map(|t| texts(t).into_iter().filter(|(k, _)| k == "user").collect())
            .collect();
        assert_eq!(
            prompts,
            [
                vec![("user".into(), "⟦image omitted: ref.png⟧".into())],
                vec![(
                    "user".into(),
                    "[Image #1] 这个图片多大\n\n⟦image omitted: 1.png⟧".into()
                )],
                vec![("user".into(), "⟦image omitted: 30 bytes⟧".into())],
            ]
        );
    }

    /// Real shapes (multi-agent Codex, 0.146): a spawned thread's `session_meta` names its
    /// parent under `source.subagent.thread_spawn`; older ones say `thread_source:
    /// "subagent"` with `parent_thread_id`.
    #[test]
    fn a_subagents_rollout_joins_its_parents_tree_and_its_prompt_is_relayed() {
        for (meta, depth) in [
            (
                json!({"id": "child-1", "cwd": "/w", "cli_version": "0.146.0", "source": {"subagent": {"thread_spawn": {"parent_thread_id": "0199aaaa-0000-7000-8000-000000000001", "depth": 1, "agent_nickname": "Ada", "agent_role": "explorer"}}}, "multi_agent_version": "v1"}),
                Some(1),
            ),
            (
                json!({"id": "child-1", "cwd": "/w", "thread_source": "subagent", "parent_thread_id": "0199aaaa-0000-7000-8000-000000000001"}),
                None,
            ),
        ] {
            let text = [
                env("session_meta", meta),
                event(json!({"type": "task_started", "turn_id": "t1"})),
                event(json!({"type": "user_message", "message": "Review src/auth.rs for token expiry bugs"})),
                answer("No expiry bug found."),
                event(json!({"type": "task_complete", "turn_id": "t1"})),
            ]
            .concat();
            let r = read(&text, true);
            assert!(r.error.is_none(), "{:?}", r.error);
            let h = r.header.expect("header");
            assert_eq!(
                h.parent_session.as_deref(),
                Some("codex-0199aaaa-0000-7000-8000-000000000001")
            );
            assert_eq!(h.delegation_depth, depth);
            assert_eq!(r.turns.len(), 1);
            let m = r.turns[0]
                .events
                .iter()
                .find_map(|e| e.user_message())
                .expect("the prompt");
            assert_eq!(
                (m.source.kind.as_str(), m.source.form.as_deref()),
                ("agent-message", Some("relay"))
            );
            assert!(crate::injection::is_conversation(&m.source));
            assert!(!crate::injection::is_human_authored(&m.source));
        }
        // A thread the person started is nobody's child, its prompt the person's.
        let r = read(&g2(), true);
        let h = r.header.expect("header");
        assert_eq!((h.parent_session, h.delegation_depth), (None, None));
    }

    /// Real shape (parent-side, multi-agent Codex): a subagent's final message arrives as a
    /// user-role `response_item` `<subagent_notification>{"agent_id", "status"}` — a
    /// delegate's report: conversation as its text, never the person's words, no turn end.
    #[test]
    fn a_subagents_notification_is_a_delegate_report_inside_the_turn() {
        let note = "<subagent_notification>{\"agent_id\":\"019cc375-5af5\",\"status\":{\"completed\":\"No expiry bug in src/auth.rs.\"}}</subagent_notification>";
        let text = [
            meta(),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            event(json!({"type": "user_message", "message": "Have an agent review the auth module"})),
            item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Have an agent review the auth module"}]})),
            answer("Spawned a reviewer."),
            item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": note}]})),
            answer("The reviewer found nothing."),
            event(json!({"type": "task_complete", "turn_id": "t1"})),
        ]
        .concat();
        let r = read(&text, true);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 1);
        let messages: Vec<_> = r.turns[0]
            .events
            .iter()
            .filter_map(|e| e.user_message())
            .collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        let report = messages[1];
        assert_eq!(
            (report.source.kind.as_str(), report.source.form.as_deref()),
            ("subagent-settled", Some("notice"))
        );
        assert_eq!(
            report.text,
            "Subagent 019cc375-5af5 completed:\n\nNo expiry bug in src/auth.rs."
        );
        assert!(crate::injection::is_conversation(&report.source));
        assert!(!crate::injection::is_human_authored(&report.source));
    }

    /// Real shapes (codex-cli 0.1xx rollouts): a search recorded as a `response_item`
    /// `web_search_call` and again as `event_msg web_search_end`, in either order, with the
    /// action empty in one of them or both carrying it; an opened page; results when recorded.
    #[test]
    fn a_web_search_is_one_call_with_what_was_searched_and_its_result() {
        let text = [
            meta(),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            event(json!({"type": "user_message", "message": "what is new in TypeScript 5.0?"})),
            // The item first, its action empty (0.137); the end event says the query.
            item(json!({"type": "web_search_call", "status": "completed", "action": {}})),
            event(json!({"type": "web_search_end", "call_id": "ws_1", "query": "TypeScript 5.0 whats new", "action": {"type": "search", "query": "TypeScript 5.0 whats new"}})),
            // The end event first, then its item with the same id and action.
            event(json!({"type": "web_search_end", "call_id": "ws_2", "query": "https://devblogs.microsoft.com/ts", "action": {"type": "open_page", "url": "https://devblogs.microsoft.com/ts"}})),
            item(json!({"type": "web_search_call", "id": "ws_2", "status": "completed", "action": {"type": "open_page", "url": "https://devblogs.microsoft.com/ts"}})),
            // Results recorded.
            event(json!({"type": "web_search_end", "call_id": "ws_3", "action": {"type": "search", "queries": ["decorators", "const type parameters"]}, "results": [{"title": "Announcing TypeScript 5.0", "url": "https://devblogs.microsoft.com/typescript/announcing-typescript-5-0/"}]})),
            answer("Decorators and const type parameters."),
            event(json!({"type": "task_complete", "turn_id": "t1"})),
        ]
        .concat();
        let r = read(&text, true);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 1);
        let t = &r.turns[0];
        let calls: Vec<(&str, &str, &str)> = t
            .events
            .iter()
            .filter_map(|e| e.tool_call())
            .map(|c| (c.call_id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                (
                    "ws_1",
                    "web_search",
                    r#"{"query":"TypeScript 5.0 whats new"}"#
                ),
                (
                    "ws_2",
                    "web_search",
                    r#"{"url":"https://devblogs.microsoft.com/ts"}"#
                ),
                (
                    "ws_3",
                    "web_search",
                    r#"{"query":"decorators; const type parameters"}"#
                ),
            ]
        );
        let results: Vec<(&str, &str)> = t
            .events
            .iter()
            .filter_map(|e| e.tool_result())
            .map(|r| (r.call_id.as_str(), r.content.as_str()))
            .collect();
        assert_eq!(
            results,
            [
                ("ws_1", web_search::NO_RESULTS),
                ("ws_2", web_search::NO_RESULTS),
                (
                    "ws_3",
                    "Announcing TypeScript 5.0 — https://devblogs.microsoft.com/typescript/announcing-typescript-5-0/"
                ),
            ]
        );
    }

    #[test]
    fn g2_tasks_one_stream_screened_context_and_no_copies() {
        let r = read(&g2(), true);
        assert!(r.error.is_none(), "{:?}", r.error);
        let h = r.header.expect("header");
        assert_eq!(h.id, "codex-0199aaaa-0000-7000-8000-000000000001");
        assert_eq!(
            (h.cwd.as_deref(), h.origin.as_deref()),
            (Some("/w"), Some("0.58.0"))
        );
        assert_eq!(
            r.turns.len(),
            1,
            "the second task is in flight even when quiet"
        );
        let t = &r.turns[0];
        assert_eq!(
            texts(t),
            [
                (
                    "codex-developer".into(),
                    "<permissions instructions>sandboxed".into()
                ),
                (
                    "codex-context".into(),
                    "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be terse</INSTRUCTIONS>"
                        .into()
                ),
                (
                    "codex-context".into(),
                    "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>".into()
                ),
                ("user".into(), "fix the build".into()),
                ("assistant".into(), "fixed".into()),
            ]
        );
        let reasoning: Vec<&String> = t
            .events
            .iter()
            .filter_map(|e| e.assistant_message())
            .flat_map(|m| &m.reasoning)
            .collect();
        assert_eq!(reasoning, ["thinking about it"]);
        let calls: Vec<_> = t.events.iter().filter_map(|e| e.tool_call()).collect();
        assert_eq!(calls.len(), 2);
        assert!(calls[1].arguments.contains("\"paths\":[\"src/a.rs\"]"));
        let results: Vec<_> = t.events.iter().filter_map(|e| e.tool_result()).collect();
        assert_eq!(results[0].content, "Finished");
        let all = format!("{:?}", t.events);
        assert!(!all.contains("gAAAA") && !all.contains("SYSTEM PROMPT"));
    }

    /// A paginated rollout (`history_mode: "paginated"`, codex-cli 0.135+; shapes measured on
    /// real rollouts by public readers, redacted there): no `event_msg user_message` — a
    /// person's prompt is the `response_item` and, sometimes, an `item_completed`
    /// `UserMessage` mirror; an image prompt wraps the picture in `<image …>` text blocks; an
    /// answer to the agent's question is `<send_user_message_question_reply>` JSON.
    #[test]
    fn a_paginated_rollouts_prompts_are_its_user_items_each_once() {
        let pmeta = env(
            "session_meta",
            json!({"id": "01a0b3da-c522-7af2-8a6d-2e1aed53b269", "cwd": "/w", "cli_version": "0.154.0", "originator": "codex-tui", "source": "cli", "thread_source": "user", "history_mode": "paginated"}),
        );
        let user = |blocks: Value| {
            item(
                json!({"type": "message", "id": "msg_1", "role": "user", "content": blocks, "internal_chat_message_metadata_passthrough": {"turn_id": "t", "content_item_kinds": ["user.text"]}}),
            )
        };
        let mirror = |content: Value| {
            event(
                json!({"type": "item_completed", "thread_id": "01a0b3da", "turn_id": "t", "item": {"type": "UserMessage", "id": "u", "content": content}}),
            )
        };
        let text = [
            pmeta,
            user(json!([{"type": "input_text", "text": "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>\nuse uv\n</INSTRUCTIONS>"}, {"type": "input_text", "text": "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"}])),
            user(json!([{"type": "input_text", "text": "<recommended_plugins>\nHere is a list of plugins that are available."}])),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            user(json!([{"type": "input_text", "text": "check whether sidegraph works for us"}])),
            mirror(json!([{"type": "text", "text": "check whether sidegraph works for us", "text_elements": []}])),
            answer("It does, with one caveat."),
            item(json!({"type": "function_call", "name": "request_user_input_async", "arguments": "{\"questions\":[{\"question\":\"Which backend?\"}]}", "call_id": "call_q"})),
            item(json!({"type": "function_call_output", "call_id": "call_q", "output": "asked"})),
            user(json!([{"type": "input_text", "text": "<send_user_message_question_reply>\n[{\"answer\":\"the postgres backend\",\"question\":\"Which backend?\"}]"}])),
            answer("Using postgres."),
            event(json!({"type": "task_complete", "turn_id": "t1"})),
            event(json!({"type": "task_started", "turn_id": "t2"})),
            user(json!([
                {"type": "input_text", "text": "<image name=[Image #1] path=\"/tmp/codex-clipboard-XXXXXX.png\">"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBOR", "detail": "high"},
                {"type": "input_text", "text": "</image>"},
                {"type": "input_text", "text": "[Image #1] an example in the screenshot"}
            ])),
            mirror(json!([{"type": "local_image", "path": "/tmp/pasted-image-XXXX.png"}, {"type": "text", "text": "an example in the screenshot\n\n[Image #1]"}])),
            answer("I see the example."),
            event(json!({"type": "task_complete", "turn_id": "t2"})),
        ]
        .concat();
        let r = read_turns(&text, 2);
        let persons = |t: &CompletedTurn| -> Vec<String> {
            texts(t)
                .into_iter()
                .filter(|(k, _)| k == screen::HUMAN)
                .map(|(_, t)| t)
                .collect()
        };
        assert_eq!(
            persons(&r.turns[0]),
            [
                "check whether sidegraph works for us",
                "the postgres backend"
            ]
        );
        let second = persons(&r.turns[1]);
        assert_eq!(second.len(), 1, "{second:?}");
        assert!(
            second[0].contains("an example in the screenshot"),
            "{second:?}"
        );
        assert!(second[0].contains("⟦image omitted"), "{second:?}");
        assert!(
            !second[0].contains("codex-clipboard"),
            "the wrapper's path is no word: {second:?}"
        );
        let hosts = texts(&r.turns[0])
            .into_iter()
            .filter(|(k, _)| k == screen::CONTEXT)
            .count();
        assert_eq!(
            hosts, 2,
            "the instructions and the plugin list are the host's, screened"
        );
    }

    /// `/review` as Codex records it (codex-rs `tasks/review.rs`, `review_format.rs`; the
    /// shapes public rollout readers test against): `entered_review_mode` with its target and
    /// hint, the reviewer's copied events — its request twice as `user_message`, a progress
    /// `agent_message` — then the results as a user-role `<user_action>` item,
    /// `exited_review_mode`, and the review as the answer.
    #[test]
    fn a_review_is_the_persons_command_and_its_request_and_results_are_the_hosts() {
        const REQUEST: &str = "Review the current code changes (staged, unstaged, and untracked files) and provide prioritized findings.";
        let results = "<user_action>\n  <context>User initiated a review task. Here's the full review output from reviewer model. User may select one or more comments to resolve.</context>\n  <action>review</action>\n  <results>\n  [P1] Keep the token refresh under the lock\n  </results>\n</user_action>\n";
        let text = [
            meta(),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            event(json!({"type": "user_message", "message": "Fix the login redirect"})),
            answer("Fixed in src/login.rs."),
            event(json!({"type": "task_complete", "turn_id": "t1"})),
            event(json!({"type": "entered_review_mode", "target": {"type": "uncommittedChanges"}, "user_facing_hint": "current changes", "turn_id": "r1"})),
            event(json!({"type": "task_started", "turn_id": "rv-t1"})),
            event(json!({"type": "user_message", "message": REQUEST, "images": [], "local_images": []})),
            event(json!({"type": "user_message", "message": REQUEST, "images": [], "local_images": []})),
            event(json!({"type": "agent_message", "message": "Looking at the diff."})),
            item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": results}]})),
            event(json!({"type": "exited_review_mode", "turn_id": "r1", "review_output": {"findings": [], "overall_correctness": "patch is incorrect"}})),
            answer("[P1] Keep the token refresh under the lock"),
            event(json!({"type": "task_complete", "turn_id": "r1"})),
            env("turn_context", json!({"model": "gpt-5.2-codex"})),
            event(json!({"type": "task_started", "turn_id": "t2"})),
            event(json!({"type": "user_message", "message": "thanks, fix that finding"})),
            answer("Done."),
            event(json!({"type": "task_complete", "turn_id": "t2"})),
        ]
        .concat();
        let r = read_turns(&text, 3);
        let review = texts(&r.turns[1]);
        let persons: Vec<&str> = review
            .iter()
            .filter(|(k, _)| k == screen::HUMAN)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(persons, ["/review current changes"], "{review:?}");
        let hosts: Vec<&str> = review
            .iter()
            .filter(|(k, _)| k == screen::CONTEXT)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(
            hosts,
            [REQUEST, results],
            "the request once, the results screened"
        );
        assert_eq!(
            review.last().map(|(k, t)| (k.as_str(), t.as_str())),
            Some(("assistant", "[P1] Keep the token refresh under the lock"))
        );
        // Review mode ends with the review: the next prompt is the person's again.
        assert_eq!(
            texts(&r.turns[2])[0],
            (
                screen::HUMAN.to_owned(),
                "thanks, fix that finding".to_owned()
            )
        );
        // A custom review's instructions are the person's words, said once.
        let custom = [
            meta(),
            event(json!({"type": "entered_review_mode", "target": {"type": "custom", "instructions": "  check the auth module  "}, "user_facing_hint": "check the auth module"})),
            event(json!({"type": "user_message", "message": "check the auth module"})),
            event(json!({"type": "user_message", "message": "check the auth module"})),
            answer("No findings."),
            event(json!({"type": "exited_review_mode", "review_output": null})),
        ]
        .concat();
        let r = read(&custom, true);
        assert_eq!(r.turns.len(), 1);
        // A paginated rollout says the same with canonical items; the reviewer's request is
        // an `item_completed` `UserMessage` of the reviewer's thread, never read.
        let paginated = [
            env("session_meta", json!({"id": "p", "cwd": "/w", "history_mode": "paginated"})),
            event(json!({"type": "item_completed", "thread_id": "p", "item": {"type": "EnteredReviewMode", "id": "i1", "target": {"type": "baseBranch", "branch": "main"}, "user_facing_hint": "changes against 'main'"}})),
            event(json!({"type": "item_completed", "thread_id": "p-r", "item": {"type": "UserMessage", "id": "u2", "content": [{"type": "text", "text": "Review the code changes against the base branch 'main'."}]}})),
            item(json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<user_action>\n  <context>User initiated a review task, but was interrupted.</context>\n</user_action>\n"}]})),
            event(json!({"type": "item_completed", "thread_id": "p", "item": {"type": "ExitedReviewMode", "id": "i2", "review_output": null}})),
            answer("Review was interrupted."),
        ]
        .concat();
        let rp = read(&paginated, true);
        assert_eq!(rp.turns.len(), 1);
        let said_p = texts(&rp.turns[0]);
        assert_eq!(
            said_p
                .iter()
                .filter(|(k, _)| k == screen::HUMAN)
                .collect::<Vec<_>>(),
            [&(
                screen::HUMAN.to_owned(),
                "/review changes against 'main'".to_owned()
            )],
            "{said_p:?}"
        );
        // A review that never said it ended (a killed Codex): the next turn's settings end
        // it, and the person's next prompt is theirs again.
        let unclosed = [
            meta(),
            event(json!({"type": "entered_review_mode", "target": {"type": "uncommittedChanges"}, "user_facing_hint": "current changes"})),
            event(json!({"type": "user_message", "message": REQUEST})),
            env("turn_context", json!({"model": "gpt-5.2-codex"})),
            event(json!({"type": "user_message", "message": "fix the login redirect"})),
            answer("Fixed."),
        ]
        .concat();
        let ru = read(&unclosed, true);
        let persons: Vec<String> = ru
            .turns
            .iter()
            .flat_map(texts)
            .filter(|(k, _)| k == screen::HUMAN)
            .map(|(_, t)| t)
            .collect();
        assert_eq!(
            persons,
            ["/review current changes", "fix the login redirect"]
        );
        let said = texts(&r.turns[0]);
        assert_eq!(
            said[0],
            (
                screen::HUMAN.to_owned(),
                "/review check the auth module".to_owned()
            )
        );
        assert_eq!(
            said.iter().filter(|(k, _)| k == screen::HUMAN).count(),
            1,
            "{said:?}"
        );
    }

    #[test]
    fn a_compacted_line_is_a_screened_note_and_its_history_is_not_read_again() {
        let mut log = g2();
        log.push_str(&answer("tests pass"));
        log.push_str(&event(json!({"type": "task_complete", "turn_id": "t2"})));
        log.push_str(&event(json!({"type": "task_started", "turn_id": "t3"})));
        log.push_str(&event(
            json!({"type": "user_message", "message": "and lint"}),
        ));
        log.push_str(&env("compacted", json!({"message": "Summary: the build was fixed.", "replacement_history": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "fixed"}]}], "window_number": 2})));
        log.push_str(&answer("lint is clean"));
        log.push_str(&event(json!({"type": "task_complete", "turn_id": "t3"})));
        let r = read(&log, false);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 3);
        // Remote compaction (no summary text) leaves a note, in the turn after it.
        assert_eq!(
            texts(&r.turns[1])[0],
            ("compact-checkpoint".into(), COMPACTED_NOTE.into())
        );
        assert_eq!(
            texts(&r.turns[2]),
            [
                ("user".into(), "and lint".into()),
                (
                    "compact-checkpoint".into(),
                    "Summary: the build was fixed.".into()
                ),
                ("assistant".into(), "lint is clean".into()),
            ]
        );
        // `replacement_history` is never read: each prompt and answer once.
        let all: Vec<(String, String)> = r.turns.iter().flat_map(texts).collect();
        assert_eq!(all.iter().filter(|(_, t)| t == "fixed").count(), 1);
        assert_eq!(all.iter().filter(|(_, t)| t == "fix the build").count(), 1);
    }

    /// Reasoning with no summary but raw `reasoning_text` content (a gpt-oss model's, in a
    /// real G1 file) is the turn's reasoning; a summary, when there is one, is preferred;
    /// encrypted-only reasoning gives nothing.
    #[test]
    fn reasoning_content_stands_in_for_a_missing_summary() {
        let header = r#"{"id":"40cb3c9c-0000-4000-8000-000000000001","timestamp":"2025-08-31T11:51:11.655Z","instructions":null,"cwd":"/w"}"#;
        let line = |v: Value| v.to_string() + "\n";
        let log = [
            header.to_owned() + "\n",
            line(json!({"type": "message", "id": null, "role": "user", "content": [{"type": "input_text", "text": "what is the date"}]})),
            line(json!({"type": "reasoning", "id": "", "summary": [], "content": [{"type": "reasoning_text", "text": "use the system date"}], "encrypted_content": null})),
            line(json!({"type": "reasoning", "id": "", "summary": [{"type": "summary_text", "text": "the short form"}], "content": [{"type": "reasoning_text", "text": "the long form"}]})),
            line(json!({"type": "reasoning", "id": "", "summary": [], "content": null, "encrypted_content": "gAAAAAsecret"})),
            line(json!({"type": "reasoning", "id": "", "summary": [], "content": [{"type": "reasoning_text"}, 7, "x"]})),
            line(json!({"type": "message", "id": null, "role": "assistant", "content": [{"type": "output_text", "text": "2025-08-31"}]})),
        ]
        .concat();
        let r = read(&log, true);
        assert_eq!(r.turns.len(), 1);
        let reasoning: Vec<&String> = r.turns[0]
            .events
            .iter()
            .filter_map(|e| e.assistant_message())
            .flat_map(|m| &m.reasoning)
            .collect();
        assert_eq!(reasoning, ["use the system date", "the short form"]);
    }

    /// An early G1 rollout (0.2x, August 2025, the shape of a real public one): the header
    /// names no `cwd`; the `<environment_context>` message after it does.
    #[test]
    fn an_early_g1_header_takes_its_cwd_from_the_environment_context() {
        let dir = tempfile::tempdir().expect("tmp");
        let header = r#"{"id":"40cb3c9c-9557-4cb0-b9cf-f6661872da35","timestamp":"2025-08-31T11:51:11.655Z","instructions":null,"git":{"commit_hash":"c9f4","branch":"main"}}"#;
        let context = |text: &str| {
            json!({"type": "message", "id": null, "role": "user", "content": [{"type": "input_text", "text": text}]}).to_string()
        };
        let facts_of_lines = |lines: &[String]| {
            let path = dir.path().join("rollout-2025-08-31T11-51-11-x.jsonl");
            std::fs::write(&path, lines.join("\n") + "\n").expect("write");
            rollout_facts(&path, 1 << 20).expect("read")
        };
        let state = r#"{"record_type":"state"}"#.to_owned();
        let f = facts_of_lines(&[
            header.to_owned(),
            state.clone(),
            context("<user_instructions>\n# AGENTS.md\n</user_instructions>"),
            context("<environment_context>\n  <cwd>/Users/me/proj</cwd>\n  <shell>zsh</shell>\n</environment_context>"),
            context("list files"),
        ])
        .expect("facts");
        assert_eq!(f.cwd.as_deref(), Some("/Users/me/proj"));
        assert_eq!(
            f.id.as_deref(),
            Some("40cb3c9c-9557-4cb0-b9cf-f6661872da35")
        );
        // A header's own `cwd` wins; a context with no `<cwd>`, a `<cwd>` left open, an empty
        // one, or one in a prompt rather than a context name nothing.
        let with_cwd = header.replace(r#""instructions""#, r#""cwd":"/w","instructions""#);
        let f = facts_of_lines(&[
            with_cwd,
            context("<environment_context><cwd>/x</cwd></environment_context>"),
        ]);
        assert_eq!(f.expect("facts").cwd.as_deref(), Some("/w"));
        for bad in [
            "<environment_context>\n  <shell>zsh</shell>\n</environment_context>",
            "<environment_context>\n  <cwd>/Users/me/proj\n</environment_context>",
            "<environment_context><cwd>  </cwd></environment_context>",
            "see <cwd>/Users/me/proj</cwd>",
        ] {
            let f =
                facts_of_lines(&[header.to_owned(), state.clone(), context(bad)]).expect("facts");
            assert_eq!(f.cwd, None, "{bad}");
        }
        // An assistant's words are not the host's context.
        let answer = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "<environment_context><cwd>/x</cwd></environment_context>"}]}).to_string();
        let f = facts_of_lines(&[header.to_owned(), answer]).expect("facts");
        assert_eq!(f.cwd, None);
        // Past the first lines nothing is searched for.
        let mut far = vec![header.to_owned()];
        far.extend(std::iter::repeat_n(state.clone(), 10));
        far.push(context(
            "<environment_context><cwd>/x</cwd></environment_context>",
        ));
        assert_eq!(facts_of_lines(&far).expect("facts").cwd, None);
    }

    #[test]
    fn g1_bare_items_end_turns_at_the_next_prompt() {
        let log = [
            r#"{"id":"c27a914d-0000-4000-8000-000000000001","timestamp":"2025-08-20T13:20:47.060Z","instructions":null,"cwd":"/w","git":{"branch":"main"}}"#.to_owned() + "\n",
            r#"{"record_type":"state"}"#.to_owned() + "\n",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<user_instructions>be nice</user_instructions>"}]}).to_string() + "\n",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]}).to_string() + "\n",
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"}).to_string() + "\n",
            json!({"type": "function_call", "id": "fc_1", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"}).to_string() + "\n",
            json!({"type": "function_call_output", "call_id": "call_1", "output": {"content": "a b", "success": true}}).to_string() + "\n",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two files"}]}).to_string() + "\n",
            r#"{"record_type":"state"}"#.to_owned() + "\n",
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "thanks"}]}).to_string() + "\n",
            json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "welcome"}]}).to_string() + "\n",
        ]
        .concat();
        let r = read(&log, false);
        assert_eq!(
            r.header.expect("header").id,
            "codex-c27a914d-0000-4000-8000-000000000001"
        );
        assert_eq!(r.turns.len(), 1);
        assert_eq!(
            texts(&r.turns[0]),
            [
                (
                    "codex-context".into(),
                    "<user_instructions>be nice</user_instructions>".into()
                ),
                ("user".into(), "list files".into()),
                ("assistant".into(), "two files".into()),
            ]
        );
        let res = r.turns[0]
            .events
            .iter()
            .find_map(|e| e.tool_result())
            .expect("result");
        assert_eq!(
            (res.call_id.as_str(), res.content.as_str()),
            ("call_1", "a b")
        );
        // Quiet: the last answered exchange is a turn too.
        assert_eq!(read(&log, true).turns.len(), 2);
    }

    #[test]
    fn zst_reads_as_plain_and_corrupt_zst_is_damage() {
        let text = g2();
        let plain = read(&text, true);
        let packed = zstd::encode_all(text.as_bytes(), 3).expect("compress");
        let z = read_bytes("rollout-x.jsonl.zst", &packed, true);
        assert!(z.error.is_none());
        assert_eq!(z.turns, plain.turns);
        let mut bad = packed.clone();
        let mid = bad.len() / 2;
        for b in &mut bad[mid..mid + 16] {
            *b ^= 0x5a;
        }
        let r = read_bytes("rollout-y.jsonl.zst", &bad, true);
        assert!(
            matches!(r.error, Some(ReadError::CorruptFrame { .. })) || r.turns.len() <= 1,
            "{:?}",
            r.error
        );
        let r = read_bytes("rollout-z.jsonl.zst", b"not zstd at all\n", true);
        assert!(
            matches!(r.error, Some(ReadError::CorruptFrame { .. })),
            "{:?}",
            r.error
        );
    }

    #[test]
    fn torn_tail_and_unknown_payloads() {
        let mut text = g2();
        text.push_str(&event(json!({"type": "brand_new_event", "x": [1, 2]})));
        text.push_str(&item(json!({"type": "brand_new_item"})));
        text.push_str(r#"{"timestamp":"2026-02-01T10:00:00.000Z","type":"event_msg","payload":{"type":"task_comp"#);
        let r = read(&text, true);
        assert!(r.error.is_none());
        assert_eq!(r.turns.len(), 1);
        assert!(matches!(r.notes[..], [ReadNote::TornTail { .. }]));
    }

    #[test]
    fn another_tools_lines_in_a_rollout_are_skipped() {
        // A Claude Code line and a DSH event line where a rollout line was expected.
        let mut text = g2();
        text.push_str(
            &(json!({"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": "not codex"}}).to_string() + "\n"),
        );
        text.push_str(
            &(json!({"seq": 9, "type": "user/message", "data": {"content": "dsh"}}).to_string()
                + "\n"),
        );
        let r = read(&text, true);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 1);
        assert!(!format!("{:?}", r.turns).contains("not codex"));
    }

    #[test]
    fn an_aborted_turn_answers_the_call_it_cut_off() {
        let text = [
            meta(),
            event(json!({"type": "task_started", "turn_id": "t1"})),
            event(json!({"type": "user_message", "message": "run the slow tests"})),
            item(json!({"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"make\",\"slow\"]}", "call_id": "c9"})),
            event(json!({"type": "turn_aborted", "reason": "interrupted"})),
        ]
        .concat();
        let r = read(&text, false);
        assert_eq!(r.turns.len(), 1);
        let results: Vec<_> = r.turns[0]
            .events
            .iter()
            .filter_map(|e| e.tool_result())
            .collect();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].call_id, "c9");
        assert!(results[0].is_error);
    }

    #[test]
    fn g0_json_reads_as_its_items_with_the_workdir_as_cwd() {
        let doc = json!({
            "session": {"timestamp": "2025-04-20T09:15:02.118Z", "id": "5e55-1", "instructions": ""},
            "items": [
                {"id": "m1", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
                {"id": "f1", "type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"command\":[\"ls\"],\"workdir\":\"/w/sub\"}"},
                {"type": "function_call_output", "call_id": "c1", "output": "{\"output\":\"a\\nb\",\"metadata\":{\"exit_code\":0}}"},
                {"id": "m2", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two files"}]},
            ]
        });
        let bytes = serde_json::to_vec_pretty(&doc).expect("json");
        let r = read_bytes("rollout-2025-04-20-5e55-1.json", &bytes, true);
        assert!(r.error.is_none(), "{:?}", r.error);
        let h = r.header.expect("header");
        assert_eq!(h.id, "codex-5e55-1");
        assert_eq!(h.cwd.as_deref(), Some("/w/sub"));
        assert_eq!(r.turns.len(), 1);
        assert_eq!(
            texts(&r.turns[0]),
            [
                ("user".to_owned(), "list the files".to_owned()),
                ("assistant".to_owned(), "two files".to_owned())
            ]
        );
        // Not one object: damage, said.
        let r = read_bytes("rollout-2025-04-20-x.json", b"{\"session\": {", true);
        assert!(
            matches!(r.error, Some(ReadError::BadLine { .. })),
            "{:?}",
            r.error
        );
    }
}

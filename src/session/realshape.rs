//! Session logs in the shape current DSH (0.2.x, formats v3 and v4) writes them, for tests
//! and benchmarks: written from the facts gathered in issue 14 (logs people committed
//! publicly), not copied from any log.
//!
//! What a turn holds, in log order (the first turn of a session also opens with
//! `permission/preset`, `sandbox/mode`, `approval/policy`, `agent-preset/selected`,
//! `subagent/catalog`, `subagent/model-selection-policy`):
//! - `agent/inbox/spliced` inserting the human's message (`data.inserted[]` with `id`,
//!   `role`, `content`, `source`), `turn/start`, then a splice that only removes
//!   (`removedCount`, no `inserted`);
//! - `step/start`, `system/message` (the system prompt), `model/selection`, the host's
//!   `user/message`s (`agent-instructions`, `skill-catalog`, the runtime context — v4
//!   `runtime-context`, v3 `plugin` `@deepseek-ai/dsh-system-prompt` —, `time-context`,
//!   `dsh-mnemon`, and `user-approval` when asked), then the human's `user/message` with the
//!   spliced item's `id`, `request/header` (the tool catalog), `request/context`,
//!   `session/title-llm-request` (repeating the human's words) and `session/title` on the
//!   first turn;
//! - per tool step: an `assistant/message` whose `content` holds the final `reasoning`,
//!   `text` and `tool-call` blocks and whose `data.stream` holds the packed
//!   `reasoning-chunks`, `text-chunks` and `tool-call-chunks` rows (no `seq0`, not counted
//!   in `seq`), `usage` with `cacheReadTokens`, `cacheWriteTokens`, `reasoningTokens`, and
//!   `source.replayState`; one `tool/call` per call; `tool/ptc-dispatch-start` and
//!   `tool/ptc-dispatch`; one `tool/result` per call with `data.meta` and
//!   `sourceEventSeqs` of single seqs (v4 `role: "tool"`; v3 a `tool-result` block);
//!   `todo/write`; `step/end`;
//! - a delegate's report when asked (`agent-message`/`relay` then `subagent-settled`/`notice`);
//! - the final `assistant/message` (reasoning, text, a stream repeating the text: one line
//!   can be several hundred KB), `deliverables/presented`,
//!   `session-log-deepseek/delivery-accepted`, `command/run`/`command/done`, `step/end`,
//!   `session/end-seed`, `turn/end`.

use serde_json::{json, Value};

use super::event::Header;
use super::writer::ToolCallSpec;

/// The system prompt every step repeats (large in real logs; trimmed here).
pub const SYSTEM_PROMPT: &str = "You are DSH, a coding agent. Work in the user's workspace. \
Prefer small, verified changes. SYSPROMPTWORD appears only here.";
/// Words that appear only in host-injected messages: never in signatures' terms.
pub const INJECTED_WORDS: [&str; 6] = [
    "instructionword",
    "catalogword",
    "runtimeword",
    "timeword",
    "mnemonword",
    "approvalword",
];

/// One turn of a real-shaped session.
#[derive(Debug, Clone, PartialEq)]
pub struct RealTurn {
    /// The human's message.
    pub human_text: String,
    pub tool_calls: Vec<ToolCallSpec>,
    /// The model's reasoning before each answer (one `reasoning` block per model call).
    pub reasoning: String,
    /// The final answer.
    pub answer: String,
    /// Pad the final answer to about this many bytes (the stream repeats it: the line is
    /// about twice as long).
    pub answer_bytes: usize,
    /// A delegate's report arrives during the turn (`agent-message` + `subagent-settled`).
    pub delegate_report: Option<String>,
    /// A `user-approval` policy-change notice is injected.
    pub approval_notice: bool,
    /// `turn/end` reason; `None` leaves the turn in flight.
    pub end_reason: Option<String>,
}

impl RealTurn {
    pub fn new(human_text: &str, answer: &str) -> Self {
        RealTurn {
            human_text: human_text.to_owned(),
            tool_calls: Vec::new(),
            reasoning: format!("The user wants: {human_text}. Think it through first."),
            answer: answer.to_owned(),
            answer_bytes: 0,
            delegate_report: None,
            approval_notice: false,
            end_reason: Some("completed".to_owned()),
        }
    }
}

/// Builds the events of successive real-shaped turns with contiguous seqs (v3 or v4).
#[derive(Debug, Clone)]
pub struct RealShapeScript {
    version: u32,
    next_seq: u64,
    next_turn: u64,
    clock_ms: i64,
    next_id: u64,
}

impl RealShapeScript {
    /// A fresh session of format `version` (3 or 4), clock at `start_ms`.
    pub fn new(version: u32, start_ms: i64) -> Self {
        RealShapeScript {
            version,
            next_seq: 0,
            next_turn: 1,
            clock_ms: start_ms,
            next_id: 0,
        }
    }

    /// The header DSH writes.
    pub fn header(&self, id: &str, cwd: &str) -> Header {
        Header {
            version: self.version,
            id: id.to_owned(),
            created_at: Some(self.clock_ms),
            cwd: Some(cwd.to_owned()),
            delegation_depth: Some(0),
            agent_preset: Some("default".to_owned()),
            ..Header::default()
        }
    }

    /// The seq the next event will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn push(&mut self, out: &mut Vec<Value>, kind: &str, data: Value) -> u64 {
        self.clock_ms += 5;
        let seq = self.next_seq;
        out.push(json!({"type": kind, "seq": seq, "time": self.clock_ms, "data": data}));
        self.next_seq += 1;
        seq
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        format!("{:08x}-0000-4000-8000-{:012x}", self.next_id, self.next_id)
    }

    fn user(&mut self, out: &mut Vec<Value>, source: Value, text: &str) {
        let id = self.id();
        self.push(
            out,
            "user/message",
            json!({"content": [{"type": "text", "text": text}], "source": source, "role": "user", "id": id}),
        );
    }

    /// The events of one turn, in log order (see the module documentation).
    pub fn turn_events(&mut self, spec: &RealTurn) -> Vec<Value> {
        let turn = self.next_turn;
        self.next_turn += 1;
        let first = turn == 1;
        let mut out = Vec::new();
        if first {
            self.push(
                &mut out,
                "permission/preset",
                json!({"preset": "workspace-write"}),
            );
            self.push(&mut out, "sandbox/mode", json!({"mode": "workspace-write"}));
            self.push(&mut out, "approval/policy", json!({"policy": "ask"}));
            self.push(
                &mut out,
                "agent-preset/selected",
                json!({"preset": "default"}),
            );
            self.push(
                &mut out,
                "subagent/catalog",
                json!({"agents": [{"name": "explorer", "description": "reads code"}]}),
            );
            self.push(
                &mut out,
                "subagent/model-selection-policy",
                json!({"policy": "inherit"}),
            );
        }
        let human_id = self.id();
        let human_source = json!({"kind": "user", "rpcId": format!("rpc-{turn}")});
        let human_content = json!([{"type": "text", "text": spec.human_text}]);
        self.push(
            &mut out,
            "agent/inbox/spliced",
            json!({"target": "next-turn", "start": 0, "inserted": [
                {"content": human_content, "source": human_source, "role": "user", "id": human_id}]}),
        );
        self.push(&mut out, "turn/start", json!({ "turn": turn }));
        self.push(
            &mut out,
            "agent/inbox/spliced",
            json!({"target": "next-turn", "start": 0, "removedCount": 1}),
        );
        let mut step = 1u64;
        self.push(&mut out, "step/start", json!({"turn": turn, "step": step}));
        self.push(
            &mut out,
            "system/message",
            json!({"turn": turn, "step": step, "content": SYSTEM_PROMPT}),
        );
        self.push(
            &mut out,
            "model/selection",
            json!({"provider": "deepseek", "model": "deepseek-reasoner", "reasoningEffort": "high"}),
        );
        self.user(
            &mut out,
            json!({"kind": "agent-instructions", "form": "instructions"}),
            "# AGENTS.md\nKeep changes small. instructionword",
        );
        self.user(
            &mut out,
            json!({"kind": "skill-catalog"}),
            "Available skills: review, release. catalogword",
        );
        let runtime = if self.version >= 4 {
            json!({"kind": "runtime-context", "form": "snapshot"})
        } else {
            json!({"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt", "form": "snapshot",
                "sections": [{"name": "sandbox:policy", "text": "workspace-write"}]})
        };
        self.user(
            &mut out,
            runtime,
            "Current runtime context. Current DSH file policy: workspace-write. runtimeword",
        );
        self.user(
            &mut out,
            json!({"kind": "time-context"}),
            "The current time is 2026-12-01T10:00:00Z. timeword",
        );
        self.user(
            &mut out,
            json!({"kind": "dsh-mnemon"}),
            "Remembered: the user prefers tabs. mnemonword",
        );
        if spec.approval_notice {
            self.user(
                &mut out,
                json!({"kind": "user-approval"}),
                "Approval policy changed to: never ask. approvalword",
            );
        }
        self.push(
            &mut out,
            "user/message",
            json!({"content": human_content, "source": human_source, "role": "user", "id": human_id}),
        );
        self.request(&mut out, turn, step);
        if first {
            self.push(
                &mut out,
                "session/title-llm-request",
                json!({"messages": [{"role": "system", "content": "Title this session."},
                    {"role": "user", "content": spec.human_text}]}),
            );
            self.push(
                &mut out,
                "session/title",
                json!({"title": "A session title", "source": "llm"}),
            );
        }

        if !spec.tool_calls.is_empty() {
            let call_ids: Vec<String> = spec.tool_calls.iter().map(|_| self.id()).collect();
            let mut content = vec![
                json!({"type": "reasoning", "text": spec.reasoning}),
                json!({"type": "text", "text": "Let me look first."}),
            ];
            let mut stream = vec![
                json!({"type": "reasoning-chunks", "time0": self.clock_ms, "index": 0, "dt": [3], "texts": split2(&spec.reasoning)}),
                json!({"type": "text-chunks", "time0": self.clock_ms, "index": 1, "dt": [], "texts": ["Let me look first."]}),
            ];
            for (i, (call, id)) in spec.tool_calls.iter().zip(&call_ids).enumerate() {
                let args = call.arguments.to_string();
                content.push(
                    json!({"type": "tool-call", "id": id, "name": call.name, "arguments": args}),
                );
                stream.push(
                    json!({"type": "tool-call-chunks", "time0": self.clock_ms, "index": i + 2,
                    "id": id, "name": call.name, "dt": [1], "args": split2(&args)}),
                );
            }
            self.assistant(&mut out, turn, step, content, stream);
            let mut call_seqs = Vec::new();
            for (call, id) in spec.tool_calls.iter().zip(&call_ids) {
                let seq = self.push(
                    &mut out,
                    "tool/call",
                    json!({"turn": turn, "step": step, "callId": id, "name": call.name, "arguments": call.arguments.to_string()}),
                );
                call_seqs.push(seq);
            }
            if let Some(id) = call_ids.first() {
                self.push(
                    &mut out,
                    "tool/ptc-dispatch-start",
                    json!({"turn": turn, "step": step, "callId": id}),
                );
                self.push(
                    &mut out,
                    "tool/ptc-dispatch",
                    json!({"turn": turn, "step": step, "callId": id, "status": "done"}),
                );
            }
            for ((call, id), call_seq) in spec.tool_calls.iter().zip(&call_ids).zip(call_seqs) {
                let data = self.tool_result(turn, step, id, call);
                self.push(&mut out, "tool/result", data);
                if let Some(Value::Object(event)) = out.last_mut() {
                    event.insert("sourceEventSeqs".to_owned(), json!([call_seq]));
                }
            }
            self.push(
                &mut out,
                "todo/write",
                json!({"todos": [{"content": "check the result", "status": "in_progress"}]}),
            );
            self.push(&mut out, "step/end", json!({"turn": turn, "step": step}));
            step += 1;
            self.push(&mut out, "step/start", json!({"turn": turn, "step": step}));
            self.request(&mut out, turn, step);
        }
        if let Some(report) = &spec.delegate_report {
            self.user(
                &mut out,
                json!({"kind": "agent-message", "form": "relay", "agentId": "agent-7"}),
                &format!("Agent agent-7 sent a message: {report}"),
            );
            self.user(
                &mut out,
                json!({"kind": "subagent-settled", "form": "notice", "agentId": "agent-7"}),
                "Background subagent agent-7 finished and will do no further work.",
            );
        }

        let mut answer = spec.answer.clone();
        if spec.answer_bytes > answer.len() {
            let pad = "The details follow, line by line, for the record. ";
            answer.push('\n');
            while answer.len() < spec.answer_bytes {
                answer.push_str(pad);
            }
        }
        let content = vec![
            json!({"type": "reasoning", "text": spec.reasoning}),
            json!({"type": "text", "text": answer}),
        ];
        let stream = vec![
            json!({"type": "reasoning-chunks", "time0": self.clock_ms, "index": 0, "dt": [2], "texts": split2(&spec.reasoning)}),
            json!({"type": "text-chunks", "time0": self.clock_ms, "index": 1, "dt": [4], "texts": split2(&answer)}),
        ];
        let in_flight = spec.end_reason.is_none();
        self.assistant(&mut out, turn, step, content, stream);
        if in_flight {
            return out;
        }
        self.push(
            &mut out,
            "deliverables/presented",
            json!({"turn": turn, "items": []}),
        );
        self.push(
            &mut out,
            "session-log-deepseek/delivery-accepted",
            json!({"turn": turn}),
        );
        self.push(&mut out, "command/run", json!({"command": "/cost"}));
        self.push(
            &mut out,
            "command/done",
            json!({"command": "/cost", "output": "0.01 USD"}),
        );
        self.push(&mut out, "step/end", json!({"turn": turn, "step": step}));
        self.push(&mut out, "session/end-seed", json!({"turn": turn}));
        if let Some(reason) = &spec.end_reason {
            self.push(
                &mut out,
                "turn/end",
                json!({"turn": turn, "reason": {"kind": reason}}),
            );
        }
        out
    }

    fn request(&mut self, out: &mut Vec<Value>, turn: u64, step: u64) {
        self.push(
            out,
            "request/header",
            json!({"turn": turn, "step": step, "tools": [
                {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object"}},
                {"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}]}),
        );
        self.push(
            out,
            "request/context",
            json!({"turn": turn, "step": step, "messages": 12, "estimatedTokens": 4096}),
        );
    }

    fn assistant(
        &mut self,
        out: &mut Vec<Value>,
        turn: u64,
        step: u64,
        content: Vec<Value>,
        stream: Vec<Value>,
    ) {
        self.clock_ms += 900;
        let id = self.id();
        self.push(
            out,
            "assistant/message",
            json!({"turn": turn, "step": step,
                "message": {"id": id, "role": "assistant", "content": content,
                    "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-reasoner",
                        "replayState": {"reasoningContent": true, "cacheKey": format!("k-{id}")}}},
                "usage": {"inputTokens": 5200, "outputTokens": 640, "cacheReadTokens": 4800,
                    "cacheWriteTokens": 400, "reasoningTokens": 320},
                "stream": stream}),
        );
    }

    fn tool_result(&self, turn: u64, step: u64, call_id: &str, call: &ToolCallSpec) -> Value {
        let content = json!([{"type": "text", "text": call.result}]);
        let meta = json!({"durationMs": 42, "exitCode": if call.is_error { 1 } else { 0 }, "truncated": false});
        if self.version >= 4 {
            json!({"turn": turn, "step": step, "message": {"role": "tool", "toolCallId": call_id,
                "content": content, "isError": call.is_error}, "meta": meta})
        } else {
            json!({"turn": turn, "step": step, "message": {"role": "user",
                "source": {"kind": "tool", "callId": call_id},
                "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": call.is_error}]},
                "meta": meta})
        }
    }
}

/// `text` in two pieces (on a char boundary), as a stream row's members.
fn split2(text: &str) -> Vec<String> {
    let mut mid = text.len() / 2;
    while !text.is_char_boundary(mid) {
        mid -= 1;
    }
    vec![text[..mid].to_owned(), text[mid..].to_owned()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::normalize::{parse_event_line, EventLine};
    use crate::turn::TurnAssembler;

    #[test]
    fn turns_read_back_with_contiguous_seqs_and_typed_payloads() {
        for version in [3, 4] {
            let mut script = RealShapeScript::new(version, 1_000);
            let mut first = RealTurn::new("fix the login bug", "Fixed.");
            first.tool_calls = vec![ToolCallSpec::new(
                "bash",
                json!({"command": "cargo test"}),
                "ok",
            )];
            first.delegate_report = Some("docs written".into());
            first.approval_notice = true;
            let second = RealTurn::new("now the docs", "Done.");
            let mut asm = TurnAssembler::new();
            let mut turns = Vec::new();
            let mut results = 0;
            for spec in [first, second] {
                for line in script.turn_events(&spec) {
                    let EventLine::Single(event) = parse_event_line(&line.to_string()).unwrap()
                    else {
                        panic!("a packed row at the top level")
                    };
                    if let Some(r) = event.tool_result() {
                        assert_eq!(r.content, "ok");
                        assert_eq!(event.source_event_seqs.as_ref().map(Vec::len), Some(1));
                        results += 1;
                    }
                    if let Some(m) = event.assistant_message() {
                        assert_eq!(m.reasoning.len(), 1, "{version}");
                    }
                    turns.extend(asm.push(event));
                }
            }
            assert_eq!(results, 1);
            assert_eq!(turns.len(), 2);
            assert_eq!(turns[0].first_seq, 0);
            assert_eq!(turns[1].first_seq, turns[0].end_seq + 1);
            assert_eq!(script.next_seq(), turns[1].end_seq + 1);
            let humans = turns[0]
                .events
                .iter()
                .filter_map(|e| e.user_message())
                .filter(|m| m.source.kind == "user")
                .count();
            assert_eq!(humans, 1, "one user/message of the human per turn");
        }
    }
}

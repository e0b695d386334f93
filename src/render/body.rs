//! The conversation part of a chapter body: one walk over the member turns' events in
//! seq order. Message text and tool arguments are copied verbatim (the whole part is
//! redacted afterwards, in one pass); big tool results and plans are redacted here, on
//! their own, because they leave as separate files. Pure.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::markdown::{
    cut_at_word, escape_inline, heading_or_first_line, inline_code, one_line, push_fenced,
    push_message_fence,
};
use super::{
    estimated_tokens, file_stem, sha256_hex, Artifact, SUMMARY_MAX_CHARS, TITLE_MAX_CHARS,
};
use crate::injection::{is_conversation, is_human_authored, screen_spans, Piece};
use crate::redact::{Redacted, RedactionCounts, Redactor};
use crate::session::event::{Event, MessageSource, ToolCall, ToolResult, UserMessage};
use crate::turn::CompletedTurn;

/// The tool whose call submits a plan (amendment 2026-10-10).
const PLAN_TOOL: &str = "exit_plan_mode";
/// Prefix of the line a screened injection leaves; fixed so it stays grep-able.
pub(super) const OMITTED_MARKER_PREFIX: &str = "_⟦omitted: host-injected ";

/// A plan found in the walk; its document is finished once the chapter's name is known.
pub(super) struct PendingPlan {
    pub number: u64,
    pub file_name: String,
    pub title: String,
    pub summary: String,
    pub body: Redacted<String>,
    pub sha256: String,
    pub seq: u64,
    pub turn: u64,
    /// The submitting call's event time, when logged.
    pub time: Option<i64>,
    pub redactions: u64,
}

/// What the walk produced.
#[derive(Default)]
pub(super) struct Conversation {
    /// Markdown blocks separated by blank lines; NOT yet redacted.
    pub markdown: String,
    /// Raw text of the first human message with any non-blank text.
    pub first_human: Option<String>,
    /// Words of the first message another agent sent this one (a parent's task to its
    /// delegate, a teammate's message), its frame tags left out: a delegated session's
    /// title when no person spoke in the chapter.
    pub first_relayed: Option<String>,
    pub first_assistant: Option<String>,
    pub last_assistant: Option<String>,
    pub artifacts: Vec<Artifact>,
    pub plans: Vec<PendingPlan>,
    /// User, assistant and kept host messages (not tool calls or results).
    pub messages: u64,
    pub tool_calls: u64,
    pub omitted_injections: u64,
    /// Assistant `reasoning` blocks left out (`renderReasoning` off).
    pub omitted_reasoning: u64,
}

pub(super) struct WalkConfig {
    pub artifact_tokens: u64,
    pub next_plan_number: u32,
    /// Render assistant `reasoning` blocks (`renderReasoning`); off, they are counted only.
    pub render_reasoning: bool,
    /// The project key the pool files this chapter under: its artifact links are relative
    /// to the chapter's place in the pool (`names::artifact_link_from_chapter`).
    pub project_key: String,
}

/// Walk `turns` in order and render their conversation.
pub(super) fn walk(
    turns: &[&CompletedTurn],
    cfg: &WalkConfig,
    redactor: &Redactor,
    counts: &mut RedactionCounts,
) -> Conversation {
    let mut w = Walker {
        cfg,
        redactor,
        counts,
        out: Conversation::default(),
        tool_names: BTreeMap::new(),
        artifact_shas: BTreeSet::new(),
    };
    for turn in turns {
        w.turn(turn);
    }
    w.out
}

struct Walker<'a> {
    cfg: &'a WalkConfig,
    redactor: &'a Redactor,
    counts: &'a mut RedactionCounts,
    out: Conversation,
    /// callId → tool name, so a result can name its tool.
    tool_names: BTreeMap<String, String>,
    artifact_shas: BTreeSet<String>,
}

/// One step's streamed assistant text, for turns that never logged an `assistant/message`.
struct Streamed {
    first_seq: u64,
    last_seq: u64,
    text: String,
}

impl Walker<'_> {
    fn turn(&mut self, turn: &CompletedTurn) {
        // Chunks are the stream of a message; when the message itself was logged it is
        // the one copy rendered, so the text is never doubled.
        let has_message = turn.events.iter().any(|e| e.kind == "assistant/message");
        let mut streamed = if has_message {
            BTreeMap::new()
        } else {
            streamed_text(&turn.events)
        };
        for ev in &turn.events {
            if let Some(m) = ev.user_message() {
                self.user(ev.seq, m);
            } else if let Some(m) = ev.assistant_message() {
                self.reasoning(ev.seq, &m.reasoning);
                self.assistant(&format!("seq {}", ev.seq), &m.text);
            } else if let Some(call) = ev.tool_call() {
                self.tool_call(ev.seq, turn.turn, call);
            } else if let Some(result) = ev.tool_result() {
                self.tool_result(ev.seq, result);
            } else if ev.kind == "tool/result" {
                // A result shape no reader generation knows: keep its data rather than lose it.
                let fallback = ToolResult {
                    call_id: String::new(),
                    content: ev.data().map(Value::to_string).unwrap_or_default(),
                    is_error: false,
                };
                self.tool_result(ev.seq, &fallback);
            } else if ev.kind == "assistant/chunk" {
                let step = ev
                    .data()
                    .and_then(|d| d.get("step"))
                    .and_then(Value::as_u64);
                if let Some(s) = streamed.get_mut(&step).filter(|s| s.first_seq == ev.seq) {
                    let label = format!("seq {}–{} (streamed)", s.first_seq, s.last_seq);
                    let text = std::mem::take(&mut s.text);
                    self.assistant(&label, &text);
                }
            }
        }
    }

    /// Start a new block: blocks are separated by one blank line.
    fn block(&mut self) -> &mut String {
        if !self.out.markdown.is_empty() {
            self.out.markdown.push('\n');
        }
        &mut self.out.markdown
    }

    fn user(&mut self, seq: u64, m: &UserMessage) {
        if !is_conversation(&m.source) {
            self.omitted(&source_label(&m.source), seq, m.text.chars().count());
            return;
        }
        self.out.messages += 1;
        let relayed = matches!(m.source.kind.as_str(), "agent-message" | "team-message");
        let speaker = if is_human_authored(&m.source) {
            "**User**".to_owned()
        } else if relayed {
            // Another agent's words to this one: a parent's task to its delegate (Codex's
            // subagent prompt), or a relayed message — not a report.
            format!("**Agent message** ({})", source_label(&m.source))
        } else if m.source.kind == "subagent-settled" {
            format!("**Delegate report** ({})", source_label(&m.source))
        } else {
            format!("**Host notice** ({})", source_label(&m.source))
        };
        let pieces = screen_spans(&m.text);
        let own_text: String = pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text(t) => Some(*t),
                Piece::Screened { .. } => None,
            })
            .collect();
        self.block().push_str(&format!("{speaker} · seq {seq}\n\n"));
        let screened = pieces.iter().any(|p| matches!(p, Piece::Screened { .. }));
        if own_text.trim().is_empty() && !screened {
            self.out.markdown.push_str("_(no text)_\n");
        } else {
            // Injected spans inside the message leave the same marker a host-injected
            // message does, between fenced pieces of the message's own text.
            let mut first = true;
            for piece in &pieces {
                if !first {
                    self.out.markdown.push('\n');
                }
                first = false;
                match piece {
                    Piece::Text(t) => push_message_fence(&mut self.out.markdown, t),
                    Piece::Screened { kind, chars } => {
                        self.out.omitted_injections += 1;
                        let line = omitted_line(kind.label(), seq, *chars);
                        self.out.markdown.push_str(&line);
                    }
                }
            }
        }
        if is_human_authored(&m.source) && self.out.first_human.is_none() {
            // An attachment's marker is no title: the person's own words are.
            let words = crate::session::attachment::without_markers(&own_text);
            if !words.trim().is_empty() {
                self.out.first_human = Some(words.into_owned());
            }
        }
        if relayed && self.out.first_relayed.is_none() {
            let words = crate::injection::relayed_words(
                &crate::session::attachment::without_markers(&own_text),
            );
            if !words.trim().is_empty() {
                self.out.first_relayed = Some(words);
            }
        }
    }

    /// A whole host-injected message, screened: its countable marker line.
    fn omitted(&mut self, label: &str, seq: u64, chars: usize) {
        self.out.omitted_injections += 1;
        let line = omitted_line(label, seq, chars);
        self.block().push_str(&line);
    }

    /// An assistant message's reasoning blocks: the model's scratch work, which dominates
    /// the bytes of a reasoning model's log. Rendered only with `renderReasoning` (not as
    /// messages); otherwise counted for the frontmatter.
    fn reasoning(&mut self, seq: u64, blocks: &[String]) {
        if !self.cfg.render_reasoning {
            self.out.omitted_reasoning += blocks.len() as u64;
            return;
        }
        for text in blocks.iter().filter(|t| !t.trim().is_empty()) {
            let block = self.block();
            block.push_str(&format!("**Assistant reasoning** · seq {seq}\n\n"));
            // Fenced like every message: its text can never read as our markup.
            push_message_fence(block, text);
        }
    }

    /// Assistant text; a message with no text (only tool calls or reasoning) renders
    /// nothing and is not counted.
    fn assistant(&mut self, position: &str, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        self.out.messages += 1;
        let block = self.block();
        block.push_str(&format!("**Assistant** · {position}\n\n"));
        push_message_fence(block, text);
        if self.out.first_assistant.is_none() {
            self.out.first_assistant = Some(text.to_owned());
        }
        self.out.last_assistant = Some(text.to_owned());
    }

    fn tool_call(&mut self, seq: u64, turn: u64, call: &ToolCall) {
        self.out.tool_calls += 1;
        self.tool_names
            .insert(call.call_id.clone(), call.name.clone());
        let header = format!(
            "**Tool call** {} · seq {seq}\n",
            call_ident(Some(&call.name), &call.call_id)
        );
        if call.name == PLAN_TOOL {
            if let Some((plan_text, other_args)) = plan_arguments(&call.arguments) {
                let plan = self.plan(seq, turn, &plan_text);
                let block = self.block();
                block.push_str(&header);
                // The plan sits beside the chapter, in the store and in the pool alike.
                block.push_str(&format!(
                    "\nPlan document [{}]({}) · sha256 `{}`\n",
                    inline_code(&plan.file_name),
                    crate::names::link_segment(&plan.file_name),
                    plan.sha256
                ));
                if let Some(rest) = other_args {
                    block.push('\n');
                    push_fenced(block, "json", &rest);
                }
                self.out.plans.push(plan);
                return;
            }
        }
        let block = self.block();
        block.push_str(&header);
        if !call.arguments.is_empty() {
            block.push('\n');
            push_fenced(block, "json", &call.arguments);
        }
    }

    fn plan(&mut self, seq: u64, turn: u64, text: &str) -> PendingPlan {
        let mut plan_counts = RedactionCounts::default();
        let body = self.redactor.redact(text, &mut plan_counts);
        let number = u64::from(self.cfg.next_plan_number) + self.out.plans.len() as u64;
        let title = heading_or_first_line(body.as_str(), TITLE_MAX_CHARS)
            .unwrap_or_else(|| format!("Plan {number}"));
        let summary = body
            .as_str()
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .map(one_line)
            .find(|l| !l.is_empty())
            .map_or_else(|| title.clone(), |l| cut_at_word(&l, SUMMARY_MAX_CHARS));
        // Cut and collapsed text is redacted again: joining lines can complete a pattern.
        let title = self.redactor.redact(&title, &mut plan_counts).into_inner();
        let summary = self
            .redactor
            .redact(&summary, &mut plan_counts)
            .into_inner();
        self.counts.add(&plan_counts);
        PendingPlan {
            number,
            file_name: format!("plan-{number:03}-{}.md", file_stem(&title, "plan")),
            title,
            summary,
            sha256: sha256_hex(body.as_bytes()),
            body,
            seq,
            turn,
            time: None,
            redactions: plan_counts.total(),
        }
    }

    fn tool_result(&mut self, seq: u64, result: &ToolResult) {
        let name = self.tool_names.get(&result.call_id).cloned();
        let error = if result.is_error { " (error)" } else { "" };
        let header = format!(
            "**Tool result**{error} {} · seq {seq}",
            call_ident(name.as_deref(), &result.call_id)
        );
        let tokens = estimated_tokens(&result.content);
        if tokens < self.cfg.artifact_tokens {
            let block = self.block();
            block.push_str(&header);
            block.push_str("\n\n");
            push_fenced(block, "", &result.content);
            return;
        }
        let content = self.redactor.redact(&result.content, self.counts);
        let sha = sha256_hex(content.as_bytes());
        let line = format!(
            "{header} → artifact [{}]({}) · {} bytes · ~{tokens} tokens\n",
            inline_code(&format!("{sha}.txt")),
            crate::names::artifact_link_from_chapter(&self.cfg.project_key, &sha),
            content.as_bytes().len()
        );
        if self.artifact_shas.insert(sha.clone()) {
            self.out.artifacts.push(Artifact {
                sha256: sha,
                content,
            });
        }
        self.block().push_str(&line);
    }
}

/// The line a screened injection leaves: `_⟦omitted: host-injected LABEL · seq N · M chars⟧_`.
fn omitted_line(label: &str, seq: u64, chars: usize) -> String {
    format!("{OMITTED_MARKER_PREFIX}{label} · seq {seq} · {chars} chars⟧_\n")
}

/// `` `name` · `callId` `` with whichever parts are known.
fn call_ident(name: Option<&str>, call_id: &str) -> String {
    let mut parts = Vec::with_capacity(2);
    match name {
        Some(n) if !n.is_empty() => parts.push(inline_code(n)),
        Some(_) => parts.push("(unnamed)".to_owned()),
        None => {}
    }
    if !call_id.is_empty() {
        parts.push(inline_code(call_id));
    }
    parts.join(" · ")
}

/// `kind[:name][/form]`, on one line, escaped so it reads as text in markdown.
fn source_label(source: &MessageSource) -> String {
    escape_inline(&raw_source_label(source), false)
}

/// `kind[:name][/form]`, on one line.
fn raw_source_label(source: &MessageSource) -> String {
    let mut label = one_line(&source.kind);
    if let Some(name) = &source.name {
        label.push(':');
        label.push_str(&one_line(name));
    }
    if let Some(form) = &source.form {
        label.push('/');
        label.push_str(&one_line(form));
    }
    label
}

/// The `plan` string of an `exit_plan_mode` call, and the other arguments (if any) as
/// JSON. `None` when the arguments are not an object with a string `plan`.
fn plan_arguments(arguments: &str) -> Option<(String, Option<String>)> {
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(arguments) else {
        return None;
    };
    let Some(Value::String(plan)) = map.remove("plan") else {
        return None;
    };
    let rest = (!map.is_empty()).then(|| Value::Object(map).to_string());
    Some((plan, rest))
}

/// The text of an `assistant/chunk`: `data.delta`, or a `text-delta` chunk's text.
/// Reasoning and tool-call chunks carry no message text.
fn chunk_text(ev: &Event) -> Option<&str> {
    let data = ev.data()?;
    let kind = data.get("kind").and_then(Value::as_str);
    if let Some(delta) = data.get("delta").and_then(Value::as_str) {
        return matches!(kind, None | Some("text" | "text-delta")).then_some(delta);
    }
    let chunk = data.get("chunk")?;
    if chunk.get("type").and_then(Value::as_str) != Some("text-delta") {
        return None;
    }
    chunk.get("text").and_then(Value::as_str)
}

/// Streamed text per step, in seq order, for a turn without an `assistant/message`.
fn streamed_text(events: &[Event]) -> BTreeMap<Option<u64>, Streamed> {
    let mut by_step: BTreeMap<Option<u64>, Streamed> = BTreeMap::new();
    for ev in events.iter().filter(|e| e.kind == "assistant/chunk") {
        let Some(text) = chunk_text(ev) else { continue };
        let step = ev
            .data()
            .and_then(|d| d.get("step"))
            .and_then(Value::as_u64);
        let s = by_step.entry(step).or_insert_with(|| Streamed {
            first_seq: ev.seq,
            last_seq: ev.seq,
            text: String::new(),
        });
        s.last_seq = ev.seq;
        s.text.push_str(text);
    }
    by_step
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(seq: u64, kind: &str, data: Value) -> Event {
        Event::new(seq, kind, data)
    }

    fn turn(events: Vec<Event>) -> CompletedTurn {
        let first_seq = events.first().map_or(0, |e| e.seq);
        let end_seq = events.last().map_or(0, |e| e.seq);
        CompletedTurn {
            turn: 1,
            first_seq,
            end_seq,
            reason: "completed".into(),
            events,
        }
    }

    fn run(t: &CompletedTurn) -> Conversation {
        let redactor = Redactor::new(&[crate::redact::ExtraPattern {
            name: "test-secret".into(),
            keywords: vec!["SECRET-".into()],
            regex: "SECRET-[A-Z0-9]+".into(),
        }])
        .expect("redactor");
        let cfg = WalkConfig {
            render_reasoning: false,
            artifact_tokens: 100,
            next_plan_number: 1,
            project_key: "pk".into(),
        };
        walk(&[t], &cfg, &redactor, &mut RedactionCounts::default())
    }

    #[test]
    fn chunks_render_only_without_a_message() {
        let chunks = vec![
            ev(1, "assistant/chunk", json!({"step": 1, "delta": "Hel"})),
            ev(
                2,
                "assistant/chunk",
                json!({"step": 1, "chunk": {"type": "text-delta", "text": "lo"}}),
            ),
            ev(
                3,
                "assistant/chunk",
                json!({"step": 1, "chunk": {"type": "reasoning-delta", "text": "hmm"}}),
            ),
            ev(4, "assistant/chunk", json!({"step": 2, "delta": "Bye"})),
        ];
        let c = run(&turn(chunks.clone()));
        assert_eq!(c.messages, 2);
        assert!(
            c.markdown
                .contains("**Assistant** · seq 1–2 (streamed)\n\n```text\nHello\n```\n"),
            "{}",
            c.markdown
        );
        assert!(c
            .markdown
            .contains("**Assistant** · seq 4–4 (streamed)\n\n```text\nBye\n```\n"));
        assert!(!c.markdown.contains("hmm"));
        assert_eq!(c.last_assistant.as_deref(), Some("Bye"));

        let mut with_message = chunks;
        with_message.push(ev(
            5,
            "assistant/message",
            json!({"message": {"content": [{"type": "text", "text": "Hello"}]}}),
        ));
        let c = run(&turn(with_message));
        assert_eq!(c.messages, 1);
        assert!(!c.markdown.contains("streamed"));
    }

    #[test]
    fn silent_events_render_nothing() {
        let c = run(&turn(vec![
            ev(0, "turn/start", json!({"turn": 1})),
            ev(1, "step/start", json!({})),
            ev(2, "request/header", json!({"x": "SECRET-A"})),
            ev(3, "command/run", json!({"out": "visible?"})),
            ev(4, "mystery/type", json!({"text": "nope"})),
            ev(
                5,
                "assistant/message",
                json!({"message": {"content": [{"type": "reasoning", "text": "think"}]}}),
            ),
            ev(6, "turn/end", json!({"reason": {"kind": "completed"}})),
        ]));
        assert_eq!(c.markdown, "");
        assert_eq!(c.messages, 0);
    }

    #[test]
    fn unknown_result_shapes_are_kept() {
        let c = run(&turn(vec![ev(3, "tool/result", json!({"weird": "shape"}))]));
        assert!(c.markdown.contains("\"weird\":\"shape\""), "{}", c.markdown);
    }

    #[test]
    fn plan_arguments_need_a_plan_string() {
        assert_eq!(
            plan_arguments(r##"{"plan":"# P\n1. x"}"##),
            Some(("# P\n1. x".into(), None))
        );
        assert_eq!(
            plan_arguments(r#"{"plan":"p","mode":"x"}"#),
            Some(("p".into(), Some(r#"{"mode":"x"}"#.into())))
        );
        assert_eq!(plan_arguments(r#"{"plan":3}"#), None);
        assert_eq!(plan_arguments(r#"{"plan":"#), None);
        assert_eq!(plan_arguments("[]"), None);
    }

    #[test]
    fn hostile_source_labels_stay_on_one_line() {
        let src = MessageSource {
            kind: "evil\nkind".into(),
            name: Some("n\u{7}".into()),
            form: Some("f\r\n".into()),
        };
        assert_eq!(raw_source_label(&src), "evil kind:n/f");
    }

    #[test]
    fn empty_human_text_is_counted_but_not_a_title_source() {
        let c = run(&turn(vec![ev(
            1,
            "user/message",
            json!({"content": [{"type": "video"}], "source": {"kind": "user"}}),
        )]));
        assert_eq!(c.messages, 1);
        assert!(c.first_human.is_none());
        assert!(c.markdown.contains("_(no text)_"));
    }

    #[test]
    fn an_attachment_alone_is_shown_but_not_a_title_source() {
        let c = run(&turn(vec![
            ev(
                1,
                "user/message",
                json!({"content": [{"type": "image", "attachment": {"name": "shot.png"}}], "source": {"kind": "user"}}),
            ),
            ev(
                2,
                "user/message",
                json!({"content": [{"type": "image"}, {"type": "text", "text": "why does it crash"}], "source": {"kind": "user"}}),
            ),
        ]));
        assert_eq!(c.messages, 2);
        assert!(
            c.markdown.contains("⟦image omitted: shot.png⟧"),
            "{}",
            c.markdown
        );
        assert_eq!(
            c.first_human.as_deref().map(str::trim),
            Some("why does it crash")
        );
    }
}

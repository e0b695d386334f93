//! The event model: one header, then events with contiguous `seq`.
//! Unknown event types are carried as they are (their `data` kept verbatim).

use serde_json::Value;

/// Line 1 of a session log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Header {
    pub version: u32,
    pub id: String,
    pub created_at: Option<i64>,
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    pub is_seeded: bool,
    pub seed_length: Option<u64>,
    pub origin: Option<String>,
    pub delegation_depth: Option<u32>,
    pub agent_preset: Option<String>,
}

/// One event after normalizing: packed chunk rows are already expanded and
/// `sourceEventSeqs` pairs already unpacked by the reader.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: u64,
    /// The `type` field, e.g. `turn/end`. Unknown types are kept.
    pub kind: String,
    pub time: Option<i64>,
    pub data: Value,
    pub ignorable: bool,
    pub source_event_seqs: Option<Vec<u64>>,
}

/// Who wrote a user-role message, read from `source`.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageSource {
    /// `user` for the human; otherwise the host's producer (`agent-instructions`, `plugin`, …).
    pub kind: String,
    /// `plugin:<name>` or `source.name` / `source.plugin`.
    pub name: Option<String>,
    pub form: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UserMessage {
    pub text: String,
    pub source: MessageSource,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub call_id: String,
    pub name: String,
    /// The raw JSON string as logged.
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub call_id: String,
    /// The result flattened to text (string content, or the text of content blocks).
    pub content: String,
    pub is_error: bool,
}

impl Event {
    /// An event of `kind` at `seq` with `data` (no time, not ignorable).
    pub fn new(seq: u64, kind: &str, data: Value) -> Event {
        Event {
            seq,
            kind: kind.to_owned(),
            time: None,
            data,
            ignorable: false,
            source_event_seqs: None,
        }
    }

    /// `data.turn`, when the event carries one.
    pub fn turn(&self) -> Option<u64> {
        self.data.get("turn").and_then(Value::as_u64)
    }

    /// `turn/end` → its `reason.kind` (`completed`, `aborted`, …).
    pub fn turn_end_reason(&self) -> Option<&str> {
        if self.kind != "turn/end" {
            return None;
        }
        Some(
            self.data
                .get("reason")
                .and_then(|r| r.get("kind"))
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
        )
    }

    /// A `user/message` event: joined text blocks and its source.
    pub fn user_message(&self) -> Option<UserMessage> {
        if self.kind != "user/message" {
            return None;
        }
        let msg = self.data.get("message").unwrap_or(&self.data);
        let text = content_text(msg.get("content"));
        let src = msg.get("source").or_else(|| self.data.get("source"));
        Some(UserMessage {
            text,
            source: parse_source(src),
        })
    }

    /// An `assistant/message` event: the text of its text blocks (reasoning excluded).
    pub fn assistant_text(&self) -> Option<String> {
        if self.kind != "assistant/message" {
            return None;
        }
        let msg = self.data.get("message").unwrap_or(&self.data);
        Some(content_text(msg.get("content")))
    }

    /// A `tool/call` event.
    pub fn tool_call(&self) -> Option<ToolCall> {
        if self.kind != "tool/call" {
            return None;
        }
        let d = &self.data;
        let arguments = match d.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        Some(ToolCall {
            call_id: str_field(d, "callId"),
            name: str_field(d, "name"),
            arguments,
        })
    }

    /// A `tool/result` event, v0–v3 (content block inside a user-role message) or v4
    /// (`role: "tool"` with the fields on the message).
    pub fn tool_result(&self) -> Option<ToolResult> {
        if self.kind != "tool/result" {
            return None;
        }
        let msg = self.data.get("message").unwrap_or(&self.data);
        if msg.get("role").and_then(Value::as_str) == Some("tool")
            || msg.get("toolCallId").is_some()
        {
            return Some(ToolResult {
                call_id: str_field(msg, "toolCallId"),
                content: value_text(msg.get("content")),
                is_error: msg.get("isError").and_then(Value::as_bool).unwrap_or(false),
            });
        }
        let blocks = msg.get("content").and_then(Value::as_array)?;
        let block = blocks
            .iter()
            .find(|b| b.get("type").and_then(Value::as_str) == Some("tool-result"))?;
        Some(ToolResult {
            call_id: block
                .get("toolCallId")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| {
                    msg.get("source")
                        .and_then(|s| s.get("callId"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or_default(),
            content: value_text(block.get("content")),
            is_error: block
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        })
    }
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn parse_source(src: Option<&Value>) -> MessageSource {
    let Some(src) = src else {
        return MessageSource {
            kind: "unknown".into(),
            name: None,
            form: None,
        };
    };
    let raw_kind = src.get("kind").and_then(Value::as_str).unwrap_or("unknown");
    let (kind, name_from_kind) = match raw_kind.split_once(':') {
        Some((k, n)) => (k.to_owned(), Some(n.to_owned())),
        None => (raw_kind.to_owned(), None),
    };
    let name = name_from_kind.or_else(|| {
        src.get("name")
            .or_else(|| src.get("plugin"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let form = src.get("form").and_then(Value::as_str).map(str::to_owned);
    MessageSource { kind, name, form }
}

/// Text of a `content` array of blocks (`{type:"text",text}`), joined by blank lines.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => {
            let mut out = String::new();
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("text") {
                    if let Some(t) = b.get("text").and_then(Value::as_str) {
                        if !out.is_empty() {
                            out.push_str("\n\n");
                        }
                        out.push_str(t);
                    }
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// Any tool-result content to text: a string as is, blocks by their text, else JSON.
fn value_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) if blocks.iter().all(|b| b.get("text").is_some()) => {
            let mut out = String::new();
            for b in blocks {
                if let Some(t) = b.get("text").and_then(Value::as_str) {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(t);
                }
            }
            out
        }
        Some(other) => other.to_string(),
    }
}

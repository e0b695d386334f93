//! A Claude Code transcript line as the reader's second pass and the subagent folding both
//! read it: its envelope fields, the message, and the content blocks (text, thinking,
//! tool calls and results, images kept as a marker of their size).

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// A line as the second pass reads it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Line {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) subtype: Option<String>,
    pub(super) uuid: Option<String>,
    pub(super) is_sidechain: Option<bool>,
    pub(super) is_meta: Option<bool>,
    pub(super) is_compact_summary: Option<bool>,
    /// `isApiErrorMessage`: an assistant line Claude Code wrote in the model's place (an API
    /// error, a rate limit, an expired login; model `<synthetic>`).
    pub(super) is_api_error_message: Option<bool>,
    pub(super) timestamp: Option<String>,
    pub(super) message: Option<Message>,
    /// `toolUseResult.agentId`: the subagent a `Task` call's result names (2.1).
    pub(super) tool_use_result: Option<AgentRef>,
    /// `forkedFrom` (`/branch`, the SDK's `forkSession`): the line is a fork's copy.
    pub(super) forked_from: Option<ForkedFrom>,
    /// `attachment` of a `type: "attachment"` line (2.1): only a queued prompt's fields.
    pub(super) attachment: Option<Attachment>,
}

/// An `attachment` line's payload as the reader reads it. A prompt the person typed while
/// the agent worked is delivered into the running turn as `{type: "queued_command",
/// prompt, commandMode: "prompt"}` — not as a `user` line (a background agent's
/// `<task-notification>` arrives the same way, `commandMode: "task-notification"`). The
/// messages of a `teammate_mailbox` attachment (agent teams) are read as a teammate's
/// (`Attachment::teammate_messages`); every other attachment (memory files, hook context,
/// reminders) is the host's and not read.
/// Scalars are read leniently: an attachment of an unexpected shape is skipped, never a
/// damaged line.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub(super) struct Attachment {
    #[serde(rename = "type")]
    kind: Option<Value>,
    pub(super) prompt: Option<Content>,
    command_mode: Option<Value>,
    /// `isMeta`: a prompt the host queued hidden from the person's view.
    is_meta: Option<Value>,
    /// `origin.kind` (2.1.2xx): `human` for the person's words.
    origin: Option<Value>,
    /// A `teammate_mailbox` attachment's messages (agent teams): `[{from, text, …}]`.
    messages: Option<Value>,
}

impl Attachment {
    /// A prompt queued while the agent worked.
    pub(super) fn is_queued_prompt(&self) -> bool {
        self.kind.as_ref().and_then(Value::as_str) == Some("queued_command")
    }

    /// It carries a background task's notification, not the person's words.
    pub(super) fn is_task_notification(&self) -> bool {
        self.command_mode.as_ref().and_then(Value::as_str) == Some("task-notification")
    }

    /// `origin.kind`, when the line has an `origin`.
    fn origin_kind(&self) -> Option<Option<&str>> {
        self.origin
            .as_ref()
            .map(|o| o.get("kind").and_then(Value::as_str))
    }

    /// The host's, by its own flags: `isMeta`, or an `origin` that is neither `human` nor
    /// another session ([`Attachment::is_from_peer`]).
    pub(super) fn is_hosts(&self) -> bool {
        self.is_meta.as_ref().and_then(Value::as_bool) == Some(true)
            || self
                .origin_kind()
                .is_some_and(|kind| kind != Some("human") && kind != Some("peer"))
    }

    /// A `teammate_mailbox` attachment's messages from teammates, each in the frame a user
    /// line gives it (`<teammate-message teammate_id="FROM">`), blank-line separated; its
    /// status notices (`screen::is_status_notice`) and empty texts left out. `None` for any
    /// other attachment or when nothing is left.
    pub(super) fn teammate_messages(&self) -> Option<String> {
        if self.kind.as_ref().and_then(Value::as_str) != Some("teammate_mailbox") {
            return None;
        }
        let mut out = String::new();
        for m in self.messages.as_ref()?.as_array()? {
            let Some(text) = m.get("text").and_then(Value::as_str) else {
                continue;
            };
            if text.trim().is_empty() || super::screen::is_status_notice(text) {
                continue;
            }
            let from = m.get("from").and_then(Value::as_str).unwrap_or("teammate");
            let from = crate::names::one_line(from).replace('"', "'");
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&format!(
                "<teammate-message teammate_id=\"{from}\">\n{text}\n</teammate-message>"
            ));
        }
        (!out.is_empty()).then_some(out)
    }

    /// Another Claude session's message (`origin.kind: "peer"`).
    pub(super) fn is_from_peer(&self) -> bool {
        self.origin_kind() == Some(Some("peer"))
    }
}

/// `forkedFrom.sessionId`: the transcript a fork copied this line from.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ForkedFrom {
    pub(super) session_id: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct Message {
    pub(super) id: Option<String>,
    pub(super) content: Option<Content>,
    pub(super) stop_reason: Option<String>,
}

/// The `agentId` of a `toolUseResult`, whatever else it holds (an object of any shape, a
/// string, …), and whether the agent was launched in the background (2.1: `isAsync: true`,
/// `status: "async_launched"` — its result came at once, its work goes on); nothing else is
/// kept.
#[derive(Default)]
pub(super) struct AgentRef {
    pub(super) id: Option<String>,
    pub(super) in_background: bool,
}

impl<'de> Deserialize<'de> for AgentRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = AgentRef;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a tool's result")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<AgentRef, A::Error> {
                let mut out = AgentRef::default();
                while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match k.as_ref() {
                        "agentId" => {
                            let v: Value = map.next_value()?;
                            out.id = v.as_str().map(str::to_owned);
                        }
                        "isAsync" => {
                            let v: Value = map.next_value()?;
                            out.in_background |= v.as_bool() == Some(true);
                        }
                        "status" => {
                            let v: Value = map.next_value()?;
                            out.in_background |= v.as_str() == Some("async_launched");
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AgentRef, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(AgentRef::default())
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<AgentRef, E> {
                Ok(AgentRef::default())
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<AgentRef, E> {
                Ok(AgentRef::default())
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<AgentRef, E> {
                Ok(AgentRef::default())
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<AgentRef, E> {
                Ok(AgentRef::default())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<AgentRef, E> {
                Ok(AgentRef::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<AgentRef, E> {
                Ok(AgentRef::default())
            }
        }
        d.deserialize_any(V)
    }
}

/// `message.content` / `tool_result.content`: a string or content blocks.
pub(super) enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut blocks = Vec::new();
                while let Some(b) = seq.next_element::<Block>()? {
                    blocks.push(b);
                }
                Ok(Content::Blocks(blocks))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Content, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Content::Blocks(Vec::new()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
                Ok(Content::Blocks(Vec::new()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Content, E> {
                Ok(Content::Blocks(Vec::new()))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Content, E> {
                Ok(Content::Blocks(Vec::new()))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Content, E> {
                Ok(Content::Blocks(Vec::new()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Content, E> {
                Ok(Content::Blocks(Vec::new()))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
pub(super) struct Block {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) text: Option<String>,
    pub(super) thinking: Option<String>,
    pub(super) id: Option<String>,
    pub(super) name: Option<String>,
    pub(super) input: Option<Value>,
    pub(super) tool_use_id: Option<String>,
    pub(super) content: Option<Content>,
    pub(super) is_error: Option<bool>,
    source: Option<ImageSource>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ImageSource {
    media_type: Option<String>,
    /// The base64 data's length; the data itself is never held.
    data: Option<StrLen>,
}

struct StrLen(usize);

impl<'de> Deserialize<'de> for StrLen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = StrLen;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StrLen, E> {
                Ok(StrLen(v.len()))
            }
        }
        d.deserialize_str(V)
    }
}

impl Block {
    /// A text block: a message whose content is a bare string.
    pub(super) fn text(text: String) -> Block {
        Block {
            kind: Some("text".into()),
            text: Some(text),
            ..Block::default()
        }
    }

    /// The marker an attached image or document (a PDF) leaves: its kind, media type and
    /// size — its bytes are never held.
    pub(super) fn image_marker(&self) -> String {
        let what = if self.kind.as_deref() == Some("document") {
            "document"
        } else {
            "image"
        };
        let media = self
            .source
            .as_ref()
            .and_then(|s| s.media_type.as_deref())
            .unwrap_or(what);
        let bytes = self
            .source
            .as_ref()
            .and_then(|s| s.data.as_ref())
            .map_or(0, |d| d.0);
        crate::session::attachment::marker(what, Some(&format!("{media}, {bytes} bytes of base64")))
    }
}

/// A prompt's text: its text blocks, images as a marker, blocks apart by a blank line (as
/// a `user` line's are read).
pub(super) fn prompt_text(content: Option<Content>) -> String {
    blocks_text(content, "\n\n", false)
}

/// Text of a tool result's content: strings and text blocks as they are, images as a marker.
pub(super) fn content_text(content: Option<Content>) -> String {
    blocks_text(content, "\n", true)
}

/// A text block as read: the line Claude Code writes beside a pasted image naming where it
/// cached it (`[Image: source: /Users/…/.claude/image-cache/…/1.png]`) is the harness's, a
/// marker (so its path is never signed); any other text as it is.
pub(super) fn text_block(text: String) -> String {
    let cached = text
        .trim()
        .strip_prefix("[Image: source: ")
        .and_then(|rest| rest.strip_suffix(']'))
        .filter(|path| !path.contains(['\n', ']']));
    match cached {
        Some(path) => {
            crate::session::attachment::marker("image", Some(&format!("cached at {path}")))
        }
        None => text,
    }
}

/// `content` as text: a string as it is; blocks joined by `sep`, images as a marker, the
/// text of text blocks (of any block carrying `text` when `any_text`).
fn blocks_text(content: Option<Content>, sep: &str, any_text: bool) -> String {
    match content {
        None => String::new(),
        Some(Content::Text(t)) => t,
        Some(Content::Blocks(blocks)) => {
            let mut parts: Vec<String> = Vec::new();
            for b in blocks {
                match b.kind.as_deref() {
                    Some("image") | Some("document") => parts.push(b.image_marker()),
                    Some("text") => parts.extend(b.text.map(text_block)),
                    _ if any_text => parts.extend(b.text),
                    _ => {}
                }
            }
            parts.join(sep)
        }
    }
}

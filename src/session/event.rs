//! The event model: one header, then events with contiguous `seq`.
//!
//! The four kinds the archive reads (`user/message`, `assistant/message`, `tool/call`,
//! `tool/result`) are parsed into typed payloads once, when the line is read, so signing
//! and rendering borrow their text instead of walking and copying a JSON tree. Every other
//! event (and a `tool/result` of a shape no reader generation knows) keeps its `data`
//! verbatim as JSON: unknown types are carried, never fatal.

use std::sync::OnceLock;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use super::attachment::marker;

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
    pub ignorable: bool,
    pub source_event_seqs: Option<Vec<u64>>,
    /// `data.turn` of a typed payload, when it is a turn number (an untyped event's is read
    /// from its `data` when asked for).
    turn: Option<u64>,
    payload: Payload,
}

/// What an event's `data` holds, read once.
#[derive(Debug, Clone, PartialEq)]
enum Payload {
    User(UserMessage),
    Assistant(AssistantMessage),
    Call(ToolCall),
    Result(ToolResult),
    /// Any other event's `data`, as logged (`null` when absent).
    Data(Verbatim),
}

/// An untyped event's `data`: its tree, or its JSON text as the line held it — checked as
/// a tree would be when the line was read (`normalize::parse_event_line`) and made one only
/// when asked for. Most events (the system prompt, request headers, step marks) reach the
/// chapter's end unread: building and dropping their trees was most of the parse's
/// allocations.
#[derive(Debug)]
pub(crate) enum Verbatim {
    Tree(Value),
    /// The checked text, and its tree once asked for.
    Text {
        text: Box<RawValue>,
        tree: OnceLock<Value>,
    },
}

impl Verbatim {
    fn of_tree(tree: Value) -> Verbatim {
        Verbatim::Tree(tree)
    }

    fn of_text(text: Box<RawValue>) -> Verbatim {
        Verbatim::Text {
            text,
            tree: OnceLock::new(),
        }
    }

    fn get(&self) -> &Value {
        match self {
            Verbatim::Tree(tree) => tree,
            Verbatim::Text { text, tree } => tree.get_or_init(|| checked_tree(text)),
        }
    }
}

/// The tree of `data` kept as text: its line's parse checked it as a tree would be.
fn checked_tree(text: &RawValue) -> Value {
    serde_json::from_str(text.get())
        .expect("data kept as text was checked as a JSON tree when its line was read")
}

impl Clone for Verbatim {
    fn clone(&self) -> Verbatim {
        Verbatim::of_tree(self.get().clone())
    }
}

impl PartialEq for Verbatim {
    fn eq(&self, other: &Verbatim) -> bool {
        self.get() == other.get()
    }
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

/// An assistant message's text blocks (joined) and its `reasoning` blocks (the model's
/// scratch work, each block's text; rendered only with `renderReasoning`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AssistantMessage {
    pub text: String,
    pub reasoning: Vec<String>,
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
        let fields = if is_typed(kind) {
            // Reading fields out of a `Value` cannot fail: every shape is accepted.
            DataFields::deserialize(&data).unwrap_or_default()
        } else {
            DataFields::default()
        };
        let (turn, payload) = match read_payload(kind, fields) {
            Read::Typed(turn, payload) => (turn, payload),
            Read::NeedsData => (None, Payload::Data(Verbatim::of_tree(data))),
        };
        Event {
            seq,
            kind: kind.to_owned(),
            time: None,
            ignorable: false,
            source_event_seqs: None,
            turn,
            payload,
        }
    }

    /// An event read from a log line, with its `data` as the line's one pass captured it;
    /// `whole_data` is called only when a kind needs `data` verbatim and the pass read only
    /// its fields.
    pub(crate) fn from_line(
        head: EventHead,
        data: CapturedData,
        whole_data: impl FnOnce() -> Result<Value, String>,
    ) -> Result<Event, String> {
        let typed = is_typed(&head.kind);
        let (fields, kept) = match data {
            CapturedData::Fields(fields) if typed => (fields, None),
            // Reading fields out of a `Value` cannot fail: every shape is accepted.
            CapturedData::Tree(tree) if typed => (
                DataFields::deserialize(&tree).unwrap_or_default(),
                Some(Verbatim::of_tree(tree)),
            ),
            // Kept as text while `type` named a verbatim kind, and a later `type` a typed one.
            CapturedData::Raw(text) if typed => {
                let tree = checked_tree(&text);
                (
                    DataFields::deserialize(&tree).unwrap_or_default(),
                    Some(Verbatim::of_tree(tree)),
                )
            }
            CapturedData::Fields(_) => (DataFields::default(), None),
            CapturedData::Tree(tree) => (DataFields::default(), Some(Verbatim::of_tree(tree))),
            CapturedData::Raw(text) => (DataFields::default(), Some(Verbatim::of_text(text))),
        };
        let (turn, payload) = match read_payload(&head.kind, fields) {
            Read::Typed(turn, payload) => (turn, payload),
            Read::NeedsData => {
                let data = match kept {
                    Some(data) => data,
                    None => Verbatim::of_tree(whole_data()?),
                };
                (None, Payload::Data(data))
            }
        };
        Ok(Event {
            seq: head.seq,
            kind: head.kind,
            time: head.time,
            ignorable: head.ignorable,
            source_event_seqs: head.source_event_seqs,
            turn,
            payload,
        })
    }

    /// `data` as logged, for the kinds not read into a typed payload (`None` for
    /// `user/message`, `assistant/message`, `tool/call` and a recognized `tool/result`).
    pub fn data(&self) -> Option<&Value> {
        match &self.payload {
            Payload::Data(v) => Some(v.get()),
            _ => None,
        }
    }

    /// `data.turn`, when the event carries one.
    pub fn turn(&self) -> Option<u64> {
        match &self.payload {
            Payload::Data(v) => v.get().get("turn").and_then(Value::as_u64),
            _ => self.turn,
        }
    }

    /// `turn/end` → its `reason.kind` (`completed`, `aborted`, …).
    pub fn turn_end_reason(&self) -> Option<&str> {
        if self.kind != "turn/end" {
            return None;
        }
        Some(
            self.data()
                .and_then(|d| d.get("reason"))
                .and_then(|r| r.get("kind"))
                .and_then(Value::as_str)
                .unwrap_or("unknown"),
        )
    }

    /// A `user/message` event: joined text blocks and its source.
    pub fn user_message(&self) -> Option<&UserMessage> {
        match &self.payload {
            Payload::User(m) if self.kind == "user/message" => Some(m),
            _ => None,
        }
    }

    /// An `assistant/message` event: the text of its text blocks (reasoning excluded).
    pub fn assistant_text(&self) -> Option<&str> {
        self.assistant_message().map(|m| m.text.as_str())
    }

    /// An `assistant/message` event: its text and its reasoning blocks.
    pub fn assistant_message(&self) -> Option<&AssistantMessage> {
        match &self.payload {
            Payload::Assistant(m) if self.kind == "assistant/message" => Some(m),
            _ => None,
        }
    }

    /// A `tool/call` event, or a sub-call a `run_code` program made (see [`CALL_KINDS`]).
    pub fn tool_call(&self) -> Option<&ToolCall> {
        match &self.payload {
            Payload::Call(c) if CALL_KINDS.contains(&self.kind.as_str()) => Some(c),
            _ => None,
        }
    }

    /// A `tool/result` event, v0–v3 (content block inside a user-role message) or v4
    /// (`role: "tool"` with the fields on the message). `None` for a shape no generation
    /// knows (its `data` is kept, see [`Event::data`]).
    pub fn tool_result(&self) -> Option<&ToolResult> {
        match &self.payload {
            Payload::Result(r) if RESULT_KINDS.contains(&self.kind.as_str()) => Some(r),
            _ => None,
        }
    }
}

/// The envelope fields of an event line, checked (see `normalize`).
pub(crate) struct EventHead {
    pub(crate) seq: u64,
    pub(crate) kind: String,
    pub(crate) time: Option<i64>,
    pub(crate) ignorable: bool,
    pub(crate) source_event_seqs: Option<Vec<u64>>,
}

/// The kinds read into a typed payload.
const TYPED_KINDS: [&str; 8] = [
    "user/message",
    "assistant/message",
    "tool/call",
    "tool/result",
    SUB_CALL_START,
    SUB_CALL_END,
    V0_SUB_CALL_START,
    V0_SUB_CALL_END,
];

/// Programmatic tool calling: the model calls `run_code` once, and each tool its program
/// runs is logged only as a sub-call — started (`subCallId`, `name`, `arguments` as an
/// object, beside `rootCallId`/`parentCallId`), then settled in `tool/result`'s words
/// (`isError`, `content`). Every path and command of such a turn lives there. v0 named
/// them `tool/code-dispatch*`.
const SUB_CALL_START: &str = "tool/ptc-dispatch-start";
const SUB_CALL_END: &str = "tool/ptc-dispatch";
const V0_SUB_CALL_START: &str = "tool/code-dispatch-start";
const V0_SUB_CALL_END: &str = "tool/code-dispatch";

/// The kinds that are a tool call: the model's own, and a `run_code` program's sub-calls.
pub const CALL_KINDS: [&str; 3] = ["tool/call", SUB_CALL_START, V0_SUB_CALL_START];
/// The kinds that are a tool's result.
pub const RESULT_KINDS: [&str; 3] = ["tool/result", SUB_CALL_END, V0_SUB_CALL_END];

/// Whether `kind`'s `data` is read into a typed payload (else it is kept verbatim).
pub(crate) fn is_typed(kind: &str) -> bool {
    TYPED_KINDS.contains(&kind)
}

/// An event line's `data` as its parse pass captured it: the fields the typed payloads
/// read (when the kind was not known yet, or is typed), or the whole tree (when `type`
/// came first and names a kind kept verbatim — the logs' own key order).
// Lives on the stack for one line; boxing the fields would cost an allocation per line.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum CapturedData {
    Fields(DataFields),
    Tree(Value),
    /// A verbatim kind's `data` as its JSON text, already checked as a tree would be.
    Raw(Box<RawValue>),
}

enum Read {
    Typed(Option<u64>, Payload),
    /// The kind is not read into a typed payload, or its shape is unknown: keep `data`.
    NeedsData,
}

/// The typed payload of `kind` from the fields of its `data` (the rules each accessor
/// documents: `message` when present, else `data` itself).
fn read_payload(kind: &str, data: DataFields) -> Read {
    let turn = data.turn.as_ref().and_then(Value::as_u64);
    let payload = match kind {
        "user/message" => {
            let DataFields {
                message, source, ..
            } = data;
            let (content, source) = match message {
                Some(msg) => {
                    let msg = *msg;
                    (msg.content, msg.source.or(source))
                }
                None => (data.content, source),
            };
            Payload::User(UserMessage {
                text: user_text(content),
                source: parse_source(source.as_ref()),
            })
        }
        "assistant/message" => {
            let content = match data.message {
                Some(msg) => msg.content,
                None => data.content,
            };
            Payload::Assistant(assistant_message(content))
        }
        "tool/call" | SUB_CALL_START | V0_SUB_CALL_START => Payload::Call(ToolCall {
            call_id: str_field(if kind == "tool/call" {
                data.call_id
            } else {
                data.sub_call_id
            }),
            name: str_field(data.name),
            arguments: match data.arguments {
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
                None => String::new(),
            },
        }),
        SUB_CALL_END | V0_SUB_CALL_END => {
            Payload::Result(flat_result(data.sub_call_id, data.content, data.is_error))
        }
        "tool/result" => {
            let msg = match data.message {
                Some(msg) => *msg,
                None => data,
            };
            match tool_result(msg) {
                Some(r) => Payload::Result(r),
                None => return Read::NeedsData,
            }
        }
        _ => return Read::NeedsData,
    };
    Read::Typed(turn, payload)
}

/// A result whose fields sit on one object (v4's `role: "tool"` message, a sub-call's
/// end).
fn flat_result(
    call_id: Option<Value>,
    content: Option<Content>,
    is_error: Option<Value>,
) -> ToolResult {
    ToolResult {
        call_id: str_field(call_id),
        content: value_text(content.map(Content::into_tree)),
        is_error: is_error.as_ref().and_then(Value::as_bool).unwrap_or(false),
    }
}

fn tool_result(msg: DataFields) -> Option<ToolResult> {
    if msg.role.as_ref().and_then(Value::as_str) == Some("tool") || msg.tool_call_id.is_some() {
        return Some(flat_result(msg.tool_call_id, msg.content, msg.is_error));
    }
    let Some(Value::Array(blocks)) = msg.content.map(Content::into_tree) else {
        return None;
    };
    let block = blocks
        .into_iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("tool-result"))?;
    let Value::Object(mut block) = block else {
        return None;
    };
    let call_id = match block.remove("toolCallId") {
        Some(Value::String(id)) => Some(id),
        _ => None,
    }
    .or_else(|| {
        msg.source
            .as_ref()
            .and_then(|s| s.get("callId"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    })
    .unwrap_or_default();
    Some(ToolResult {
        call_id,
        content: value_text(block.remove("content")),
        is_error: block
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

fn str_field(v: Option<Value>) -> String {
    match v {
        Some(Value::String(s)) => s,
        _ => String::new(),
    }
}

pub(crate) fn parse_source(src: Option<&Value>) -> MessageSource {
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
fn content_text(content: Option<Value>) -> String {
    match content {
        Some(Value::String(s)) => s,
        Some(Value::Array(blocks)) => {
            let texts = blocks.into_iter().filter_map(|b| match b {
                Value::Object(mut b) => match b.get("type").and_then(Value::as_str) {
                    Some("text") => match b.remove("text") {
                        Some(Value::String(t)) => Some(t),
                        _ => None,
                    },
                    kind => tree_marker(kind, &b),
                },
                _ => None,
            });
            join(texts, "\n\n")
        }
        _ => String::new(),
    }
}

/// The marker of an attachment block of a tree (`kind` `image` or `file`), as the typed
/// read writes it.
fn tree_marker(kind: Option<&str>, block: &serde_json::Map<String, Value>) -> Option<String> {
    let what = match kind {
        Some("image") => "image",
        Some("file") => "file",
        _ => return None,
    };
    let name = block
        .get("attachment")
        .and_then(|a| a.get("name"))
        .and_then(Value::as_str);
    Some(marker(what, name))
}

/// An assistant `content`: the text blocks joined as [`content_text`] joins them, and each
/// `reasoning` block's `text` (blocks of other types — `tool-call`, … — are read elsewhere).
fn assistant_content(content: Option<Value>) -> AssistantMessage {
    let Some(Value::Array(blocks)) = content else {
        return AssistantMessage {
            text: content_text(content),
            reasoning: Vec::new(),
        };
    };
    let mut texts = Vec::new();
    let mut reasoning = Vec::new();
    for block in blocks {
        let Value::Object(mut b) = block else {
            continue;
        };
        let text = match b.remove("text") {
            Some(Value::String(t)) => Some(t),
            _ => None,
        };
        match b.get("type").and_then(Value::as_str) {
            Some("text") => texts.extend(text),
            // Every reasoning block counts, one with no text (redacted by the provider) too.
            Some("reasoning") => reasoning.push(text.unwrap_or_default()),
            kind => texts.extend(tree_marker(kind, &b)),
        }
    }
    AssistantMessage {
        text: join(texts.into_iter(), "\n\n"),
        reasoning,
    }
}

/// A `user/message` content's text: read typed in the line's pass, or from a tree as
/// [`content_text`] reads it.
fn user_text(content: Option<Content>) -> String {
    match content {
        Some(Content::Text(text)) => text,
        Some(Content::Assistant(m)) => m.text,
        Some(Content::Tree(tree)) => content_text(Some(tree)),
        None => String::new(),
    }
}

/// An `assistant/message` content: read typed in the line's pass, or from a tree as
/// [`assistant_content`] reads it.
fn assistant_message(content: Option<Content>) -> AssistantMessage {
    match content {
        Some(Content::Assistant(m)) => m,
        Some(Content::Text(text)) => AssistantMessage {
            text,
            reasoning: Vec::new(),
        },
        Some(Content::Tree(tree)) => assistant_content(Some(tree)),
        None => assistant_content(None),
    }
}

/// Any tool-result content to text: a string as is, blocks by their text, else JSON.
fn value_text(content: Option<Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(Value::Array(blocks)) if blocks.iter().all(|b| b.get("text").is_some()) => {
            let texts = blocks.into_iter().filter_map(|b| match b {
                Value::Object(mut b) => match b.remove("text") {
                    Some(Value::String(t)) => Some(t),
                    _ => None,
                },
                _ => None,
            });
            join(texts, "\n")
        }
        Some(other) => other.to_string(),
    }
}

/// Join owned pieces; a lone piece is moved, not copied (the usual single text block).
fn join(pieces: impl Iterator<Item = String>, separator: &str) -> String {
    let mut out = String::new();
    for piece in pieces {
        if out.is_empty() {
            // An empty `out` gets no separator: the same as pushing onto it.
            if piece.is_empty() {
                continue;
            }
            out = piece;
        } else {
            out.push_str(separator);
            out.push_str(&piece);
        }
    }
    out
}

/// The fields of an event's `data` (and of its `message`) that the typed payloads read,
/// captured in the line's one parse pass. Every shape is accepted, as a JSON tree would
/// accept it: a field of an unexpected type is kept as it is and judged by the reader of
/// the payload, a repeated key keeps its last value, any other key is checked and skipped.
#[derive(Debug, Default)]
pub(crate) struct DataFields {
    turn: Option<Value>,
    message: Option<Box<DataFields>>,
    content: Option<Content>,
    role: Option<Value>,
    source: Option<Value>,
    tool_call_id: Option<Value>,
    is_error: Option<Value>,
    call_id: Option<Value>,
    sub_call_id: Option<Value>,
    name: Option<Value>,
    arguments: Option<Value>,
}

/// A `content` field as the line's pass read it: typed when the event's kind was known
/// before its `data` (the logs' own key order) and is a message, else as a JSON tree.
#[derive(Debug)]
enum Content {
    Tree(Value),
    /// A `user/message` content: its text, as [`content_text`] reads it from a tree.
    Text(String),
    /// An `assistant/message` content, as [`assistant_content`] reads it from a tree.
    Assistant(AssistantMessage),
}

impl Content {
    /// The tree of a content read as one (a tool result's); a typed read has no tree left,
    /// and never happens for the kinds that ask for one.
    fn into_tree(self) -> Value {
        match self {
            Content::Tree(tree) => tree,
            Content::Text(text) => Value::String(text),
            Content::Assistant(m) => Value::String(m.text),
        }
    }
}

/// How a `data`'s `content` is read in the line's pass: as a tree, or typed for a
/// message kind (its text and reasoning blocks kept, every other block and field checked
/// and skipped without being built).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ContentAs {
    Tree,
    User,
    Assistant,
}

impl ContentAs {
    /// How `kind`'s content is read.
    pub(crate) fn of_kind(kind: &str) -> ContentAs {
        match kind {
            "user/message" => ContentAs::User,
            "assistant/message" => ContentAs::Assistant,
            _ => ContentAs::Tree,
        }
    }
}

impl<'de> Deserialize<'de> for DataFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DataFieldsVisitor(ContentAs::Tree))
    }
}

impl<'de> DeserializeSeed<'de> for ContentAs {
    type Value = DataFields;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<DataFields, D::Error> {
        deserializer.deserialize_any(DataFieldsVisitor(self))
    }
}

struct DataFieldsVisitor(ContentAs);

/// A visitor's methods for every JSON value but an object: the value is checked as a JSON
/// tree would check it (an array walked by [`SkipVisitor`]) and read as `$out::default()`.
macro_rules! non_objects_read_as_default {
    ($out:ty) => {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<$out, A::Error> {
            SkipVisitor.visit_seq(seq)?;
            Ok(<$out>::default())
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<$out, E> {
            Ok(<$out>::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<$out, E> {
            Ok(<$out>::default())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<$out, E> {
            Ok(<$out>::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<$out, E> {
            Ok(<$out>::default())
        }
        fn visit_str<E: de::Error>(self, _: &str) -> Result<$out, E> {
            Ok(<$out>::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<$out, E> {
            Ok(<$out>::default())
        }
    };
}
pub(crate) use non_objects_read_as_default;

impl<'de> Visitor<'de> for DataFieldsVisitor {
    type Value = DataFields;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DataFields, A::Error> {
        let mut out = DataFields::default();
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key.0.as_ref() {
                "message" => {
                    out.message = Some(Box::new(map.next_value_seed(self.0)?));
                    continue;
                }
                "content" => {
                    out.content = Some(match self.0 {
                        ContentAs::Tree => Content::Tree(map.next_value::<Value>()?),
                        ContentAs::User => {
                            let m = map.next_value_seed(MessageContent)?;
                            Content::Text(m.text)
                        }
                        ContentAs::Assistant => {
                            Content::Assistant(map.next_value_seed(MessageContent)?)
                        }
                    });
                    continue;
                }
                // An assistant message's source (its model's replay state) is never read.
                "source" if self.0 == ContentAs::Assistant => {
                    map.next_value::<Skip>()?;
                    continue;
                }
                "turn" => &mut out.turn,
                "role" => &mut out.role,
                "source" => &mut out.source,
                "toolCallId" => &mut out.tool_call_id,
                "isError" => &mut out.is_error,
                "callId" => &mut out.call_id,
                "subCallId" => &mut out.sub_call_id,
                "name" => &mut out.name,
                "arguments" => &mut out.arguments,
                _ => {
                    map.next_value::<Skip>()?;
                    continue;
                }
            };
            *slot = Some(map.next_value::<Value>()?);
        }
        Ok(out)
    }

    non_objects_read_as_default!(DataFields);
}

/// A message's `content` read typed: a string is the text; an array's `text` blocks are
/// joined by blank lines and each `reasoning` block's `text` kept (a user message has
/// none worth keeping: [`content_text`] ignores them, and so does the caller); anything
/// else reads as empty. The same result as [`assistant_content`] on the tree, which keeps
/// a repeated key's last value.
struct MessageContent;

impl<'de> DeserializeSeed<'de> for MessageContent {
    type Value = AssistantMessage;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<AssistantMessage, D::Error> {
        d.deserialize_any(MessageContentVisitor)
    }
}

struct MessageContentVisitor;

impl<'de> Visitor<'de> for MessageContentVisitor {
    type Value = AssistantMessage;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<AssistantMessage, E> {
        Ok(AssistantMessage {
            text: v.to_owned(),
            reasoning: Vec::new(),
        })
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<AssistantMessage, E> {
        Ok(AssistantMessage {
            text: v,
            reasoning: Vec::new(),
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AssistantMessage, A::Error> {
        let mut texts = Vec::new();
        let mut reasoning = Vec::new();
        while let Some(block) = seq.next_element::<Block>()? {
            match block.kind {
                BlockKind::Text => texts.extend(block.text),
                // Every reasoning block counts, one with no text (redacted by the provider) too.
                BlockKind::Reasoning => reasoning.push(block.text.unwrap_or_default()),
                BlockKind::Image => texts.push(marker("image", block.attachment_name.as_deref())),
                BlockKind::File => texts.push(marker("file", block.attachment_name.as_deref())),
                BlockKind::Other => {}
            }
        }
        Ok(AssistantMessage {
            text: join(texts.into_iter(), "\n\n"),
            reasoning,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<AssistantMessage, A::Error> {
        SkipVisitor.visit_map(map)?;
        Ok(AssistantMessage::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<AssistantMessage, E> {
        Ok(AssistantMessage::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<AssistantMessage, E> {
        Ok(AssistantMessage::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<AssistantMessage, E> {
        Ok(AssistantMessage::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<AssistantMessage, E> {
        Ok(AssistantMessage::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<AssistantMessage, E> {
        Ok(AssistantMessage::default())
    }
}

/// A content block's `type`, as far as the messages read it.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
enum BlockKind {
    Text,
    Reasoning,
    /// An attached image or file (`attachment` holds a reference, never the bytes): a
    /// marker in the text.
    Image,
    File,
    #[default]
    Other,
}

impl<'de> Deserialize<'de> for BlockKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KindVisitor;
        impl<'de> Visitor<'de> for KindVisitor {
            type Value = BlockKind;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<BlockKind, E> {
                Ok(match v {
                    "text" => BlockKind::Text,
                    "reasoning" => BlockKind::Reasoning,
                    "image" => BlockKind::Image,
                    "file" => BlockKind::File,
                    _ => BlockKind::Other,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<BlockKind, A::Error> {
                SkipVisitor.visit_map(map)?;
                Ok(BlockKind::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<BlockKind, A::Error> {
                SkipVisitor.visit_seq(seq)?;
                Ok(BlockKind::Other)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<BlockKind, E> {
                Ok(BlockKind::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<BlockKind, E> {
                Ok(BlockKind::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<BlockKind, E> {
                Ok(BlockKind::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<BlockKind, E> {
                Ok(BlockKind::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<BlockKind, E> {
                Ok(BlockKind::Other)
            }
        }
        deserializer.deserialize_any(KindVisitor)
    }
}

/// One content block: its `type` and its `text` when that is a string (each a repeated
/// key's last value); anything that is not an object is a block of no kind.
#[derive(Debug, Default)]
struct Block {
    kind: BlockKind,
    text: Option<String>,
    /// `attachment.name`, when it is a string.
    attachment_name: Option<String>,
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BlockVisitor;
        impl<'de> Visitor<'de> for BlockVisitor {
            type Value = Block;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Block, A::Error> {
                let mut out = Block::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key.0.as_ref() {
                        "type" => out.kind = map.next_value::<BlockKind>()?,
                        "text" => out.text = map.next_value::<MaybeString>()?.0,
                        "attachment" => out.attachment_name = map.next_value::<AttachmentName>()?.0,
                        _ => {
                            map.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(out)
            }
            non_objects_read_as_default!(Block);
        }
        deserializer.deserialize_any(BlockVisitor)
    }
}

/// An attachment reference's `name` when it is a string (the rest checked and dropped).
#[derive(Default)]
struct AttachmentName(Option<String>);

impl<'de> Deserialize<'de> for AttachmentName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AttachmentNameVisitor;
        impl<'de> Visitor<'de> for AttachmentNameVisitor {
            type Value = AttachmentName;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AttachmentName, A::Error> {
                let mut name = None;
                while let Some(key) = map.next_key::<Key>()? {
                    if key.0 == "name" {
                        name = map.next_value::<MaybeString>()?.0;
                    } else {
                        map.next_value::<Skip>()?;
                    }
                }
                Ok(AttachmentName(name))
            }
            non_objects_read_as_default!(AttachmentName);
        }
        deserializer.deserialize_any(AttachmentNameVisitor)
    }
}

/// A value that is kept when it is a string, and checked and dropped otherwise.
struct MaybeString(Option<String>);

impl<'de> Deserialize<'de> for MaybeString {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MaybeStringVisitor;
        impl<'de> Visitor<'de> for MaybeStringVisitor {
            type Value = MaybeString;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<MaybeString, E> {
                Ok(MaybeString(Some(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<MaybeString, E> {
                Ok(MaybeString(Some(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<MaybeString, A::Error> {
                SkipVisitor.visit_map(map)?;
                Ok(MaybeString(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<MaybeString, A::Error> {
                SkipVisitor.visit_seq(seq)?;
                Ok(MaybeString(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<MaybeString, E> {
                Ok(MaybeString(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<MaybeString, E> {
                Ok(MaybeString(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<MaybeString, E> {
                Ok(MaybeString(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<MaybeString, E> {
                Ok(MaybeString(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<MaybeString, E> {
                Ok(MaybeString(None))
            }
        }
        deserializer.deserialize_any(MaybeStringVisitor)
    }
}

/// A map key, borrowed from the line when it has no escapes.
pub(crate) struct Key<'de>(pub(crate) std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A value checked as a JSON tree would be (string escapes, nesting depth, numbers) and
/// dropped without being built. (`IgnoredAny` would skip past lone surrogates and
/// unbounded nesting that a tree refuses.)
pub(crate) struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SkipVisitor)
    }
}

pub(crate) struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_key::<Key>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Skip)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
}

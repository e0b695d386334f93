//! From one log line (JSON text) to the normalized model: the header, one event, or a
//! packed chunk row to expand. Pure: text in, values out.
//!
//! Generation normalizing done here:
//! - **Packed chunk rows** (v0/v1, written with `packChunks` on). Shape, as in the
//!   harness's own fixtures (`@deepseek-ai/dsh-session-persistence-jsonl` tests and the
//!   `AssistantStreamRecord` codec):
//!   `{"type":"text-chunks","seq0":S,"time0":T,"data":{"turn","step","index","dt":[…],"texts":[…]}}`
//!   (`reasoning-chunks` likewise with `texts`; `tool-call-chunks` with `id`, `name?` and
//!   `args` instead of `texts`). The row stands for one `assistant/chunk` event per member:
//!   seq `S+i`; time `T` for the first and then the running sum of `dt` (`dt` holds the
//!   n−1 gaps between consecutive members; a missing gap counts 0); data
//!   `{"turn","step","chunk":{"type":"text-delta"|"reasoning-delta","index","text"}}` or,
//!   for tool calls, `{"turn","step","chunk":{"type":"tool-call-delta","index","id","name","argumentsDelta"}}`.
//!   Fields absent from the row are absent from the events; members are carried as they are.
//! - **`sourceEventSeqs`** (from v2): entries are seqs or inclusive `[start,end]` runs;
//!   they are expanded to the full list. A run may expand to at most
//!   [`MAX_SOURCE_SEQS`] seqs per event (hostile input must not blow up memory).

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::event::{
    is_typed, non_objects_read_as_default, CapturedData, ContentAs, DataFields, Event, EventHead,
    Header, Key, Skip, SkipVisitor,
};

/// The most seqs one event's `sourceEventSeqs` may expand to.
pub const MAX_SOURCE_SEQS: u64 = 1 << 20;

/// The storage row types that pack `assistant/chunk` runs.
pub const PACKED_ROW_TYPES: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];

/// One event line, normalized.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EventLine {
    Single(Event),
    Packed(PackedRow),
}

/// A packed chunk row, expanded lazily one event at a time (a long row of tiny members
/// must not turn into millions of `Event`s at once).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PackedRow {
    seq0: u64,
    next: usize,
    time: Option<i64>,
    delta_type: &'static str,
    member_key: &'static str,
    /// Fields copied into every chunk (`index`, and `id`/`name` for tool calls).
    chunk_fields: Map<String, Value>,
    /// `turn` and `step` copied into every event's data.
    data_fields: Map<String, Value>,
    dt: Vec<Value>,
    members: Vec<Value>,
    ignorable: bool,
}

impl PackedRow {
    /// The next expanded event, or `None` when all members are out.
    pub(crate) fn next_event(&mut self) -> Option<Event> {
        let i = self.next;
        let member = self.members.get_mut(i)?;
        let member = std::mem::take(member);
        if i > 0 {
            let gap = self.dt.get(i - 1).and_then(json_i64).unwrap_or(0);
            self.time = self.time.map(|t| t.saturating_add(gap));
        }
        self.next += 1;
        let mut chunk = Map::new();
        chunk.insert("type".to_owned(), Value::String(self.delta_type.to_owned()));
        chunk.extend(self.chunk_fields.clone());
        chunk.insert(self.member_key.to_owned(), member);
        let mut data = self.data_fields.clone();
        data.insert("chunk".to_owned(), Value::Object(chunk));
        let mut event = Event::new(self.seq0 + i as u64, "assistant/chunk", Value::Object(data));
        event.time = self.time;
        event.ignorable = self.ignorable;
        Some(event)
    }

    pub(crate) fn is_exhausted(&self) -> bool {
        self.next >= self.members.len()
    }
}

/// Parse the header line. Errors are the detail for `BadHeader`.
pub(crate) fn parse_header(text: &str) -> Result<Header, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(map) = value else {
        return Err("not a JSON object".to_owned());
    };
    match map.get("type") {
        Some(Value::String(t)) if t == "session" => {}
        Some(Value::String(t)) => return Err(format!("type is {t:?}, not \"session\"")),
        _ => return Err("no \"type\":\"session\"".to_owned()),
    }
    let version = match map.get("version") {
        // The earliest logs may predate the stamp.
        None => 0,
        Some(v) => v
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| format!("version {v} is not a generation number"))?,
    };
    let id = match map.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        _ => return Err("no session \"id\"".to_owned()),
    };
    let string = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_owned);
    Ok(Header {
        version,
        id,
        created_at: map.get("createdAt").and_then(json_i64),
        cwd: string("cwd"),
        parent_session: string("parentSession"),
        is_seeded: map
            .get("isSeeded")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        seed_length: map.get("seedLength").and_then(Value::as_u64),
        origin: string("origin"),
        delegation_depth: map
            .get("delegationDepth")
            .and_then(Value::as_u64)
            .and_then(|d| u32::try_from(d).ok()),
        agent_preset: string("agentPreset"),
    })
}

/// Parse one event line. Errors are the detail for `BadLine`.
///
/// One pass reads the envelope and the `data` fields the typed payloads use; the line is
/// parsed again as a JSON tree only for what must be kept verbatim (the `data` of other
/// kinds, packed chunk rows), which are the small lines of a log.
pub(crate) fn parse_event_line(text: &str) -> Result<EventLine, String> {
    // A verbatim kind's `data` is kept as its checked text (see `LineSeed`); a line that
    // pass refuses is read again the old way, so a refusal is a tree's, word for word.
    let line = read_line(text, true)
        .or_else(|_| read_line(text, false))
        .map_err(|e| format!("not JSON: {e}"))?;
    if !line.object {
        return Err("not a JSON object".to_owned());
    }
    let kind = match line.kind {
        Some(Value::String(kind)) => kind,
        Some(_) => return Err("\"type\" is not a string".to_owned()),
        None => return Err("no \"type\"".to_owned()),
    };
    let ignorable = line
        .ignorable
        .as_ref()
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let Some(seq) = line.seq else {
        if PACKED_ROW_TYPES.contains(&kind.as_str()) {
            let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
                return Err("the line changed between two parses".to_owned());
            };
            return packed_row(&kind, map, ignorable).map(EventLine::Packed);
        }
        return Err(format!("{kind} event has no \"seq\""));
    };
    let seq = seq
        .as_u64()
        .ok_or_else(|| format!("seq {seq} is not a non-negative integer"))?;
    let source_event_seqs = match &line.source_event_seqs {
        None | Some(Value::Null) => None,
        Some(v) => Some(expand_source_seqs(v)?),
    };
    let head = EventHead {
        seq,
        kind,
        time: line.time.as_ref().and_then(json_i64),
        ignorable,
        source_event_seqs,
    };
    let whole_data = || {
        serde_json::from_str::<DataOnly>(text)
            .map(|d| d.0.unwrap_or(Value::Null))
            .map_err(|e| format!("not JSON: {e}"))
    };
    Event::from_line(head, line.data, whole_data).map(EventLine::Single)
}

/// [`parse_event_line`], accepting what JavaScript's `JSON.stringify` writes: a string cut
/// in the middle of a surrogate pair leaves a lone UTF-16 surrogate escape (`"\ud83d"`)
/// that strict JSON refuses. Only when the strict parse fails, every lone surrogate escape
/// is read as U+FFFD (`\ufffd`, the same length) and the line parsed again. Returns the
/// line and how many escapes were replaced.
pub(crate) fn parse_event_line_lenient(text: &str) -> Result<(EventLine, u64), String> {
    match parse_event_line(text) {
        Ok(line) => Ok((line, 0)),
        Err(strict) => match replace_lone_surrogates(text) {
            Some((repaired, n)) => parse_event_line(&repaired).map(|line| (line, n)),
            None => Err(strict),
        },
    }
}

/// [`parse_header`], with lone surrogate escapes read as U+FFFD (see
/// [`parse_event_line_lenient`]).
pub(crate) fn parse_header_lenient(text: &str) -> Result<Header, String> {
    parse_header(text).or_else(|strict| match replace_lone_surrogates(text) {
        Some((repaired, _)) => parse_header(&repaired),
        None => Err(strict),
    })
}

/// `text` with every lone UTF-16 surrogate escape (`\uD800`–`\uDFFF` not part of a
/// high+low pair) written `\ufffd`, and the count; `None` when there is none. An escaped
/// backslash (`\\`) is skipped as a pair, so `\\ud83d` (a backslash, then text) is left.
pub(crate) fn replace_lone_surrogates(text: &str) -> Option<(String, u64)> {
    fn hex4(b: &[u8]) -> Option<u16> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        if !s.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u16::from_str_radix(s, 16).ok()
    }
    fn escape_at(b: &[u8], i: usize) -> Option<u16> {
        if b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u') {
            hex4(b.get(i + 2..)?)
        } else {
            None
        }
    }
    let b = text.as_bytes();
    // Nothing to do without a `\u` followed by `d`/`D`: the usual failing line.
    if !memchr::memmem::find_iter(b, b"\\u").any(|i| matches!(b.get(i + 2), Some(b'd' | b'D'))) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let mut count = 0u64;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            // Copy up to the next backslash in one go.
            let next = memchr::memchr(b'\\', &b[i..]).map_or(b.len(), |k| i + k);
            out.extend_from_slice(&b[i..next]);
            i = next;
            continue;
        }
        match escape_at(b, i) {
            Some(0xD800..=0xDBFF) => {
                if matches!(escape_at(b, i + 6), Some(0xDC00..=0xDFFF)) {
                    out.extend_from_slice(&b[i..i + 12]);
                    i += 12;
                } else {
                    out.extend_from_slice(b"\\ufffd");
                    count += 1;
                    i += 6;
                }
            }
            Some(0xDC00..=0xDFFF) => {
                out.extend_from_slice(b"\\ufffd");
                count += 1;
                i += 6;
            }
            Some(_) => {
                out.extend_from_slice(&b[i..i + 6]);
                i += 6;
            }
            None => {
                // Any other escape: the backslash and the byte after it, as they are.
                let end = (i + 2).min(b.len());
                out.extend_from_slice(&b[i..end]);
                i = end;
            }
        }
    }
    if count == 0 {
        return None;
    }
    // Only ASCII was replaced by ASCII: the bytes are still UTF-8.
    String::from_utf8(out).ok().map(|s| (s, count))
}

/// The envelope of an event line, with its `data` (see [`CapturedData`]). A repeated key
/// keeps its last value, as in a JSON tree.
struct LineFields {
    /// The line is a JSON object.
    object: bool,
    kind: Option<Value>,
    seq: Option<Value>,
    time: Option<Value>,
    ignorable: Option<Value>,
    source_event_seqs: Option<Value>,
    data: CapturedData,
}

impl Default for LineFields {
    fn default() -> Self {
        LineFields {
            object: false,
            kind: None,
            seq: None,
            time: None,
            ignorable: None,
            source_event_seqs: None,
            data: CapturedData::Fields(DataFields::default()),
        }
    }
}

/// One line's envelope and `data`, as `serde_json::from_str` reads a value (the same
/// errors): `raw` keeps a verbatim kind's `data` as text, else as a tree.
fn read_line(text: &str, raw: bool) -> serde_json::Result<LineFields> {
    let mut de = serde_json::Deserializer::from_str(text);
    let line = LineSeed { raw }.deserialize(&mut de)?;
    de.end()?;
    Ok(line)
}

/// A verbatim `data` holding this many `[` and `{` (bytes, strings included) is read as a
/// tree: a text checked alone is one level shallower than in its line, and below this
/// count neither comes near `serde_json`'s nesting limit (128).
const TREE_FROM_OPENINGS: usize = 100;

/// How the line's pass keeps a verbatim kind's `data`: `raw`, as its JSON text, checked as
/// a tree would be (`Skip`: escapes, numbers, nesting) but not built — most such events are
/// never read (`session::event::Verbatim`); else as its tree. Refused in `raw` (a failed
/// check, deep nesting), the line is read again as a tree.
#[derive(Clone, Copy)]
struct LineSeed {
    raw: bool,
}

impl<'de> DeserializeSeed<'de> for LineSeed {
    type Value = LineFields;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<LineFields, D::Error> {
        struct LineVisitor(LineSeed);
        impl<'de> Visitor<'de> for LineVisitor {
            type Value = LineFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LineFields, A::Error> {
                let mut out = LineFields {
                    object: true,
                    ..LineFields::default()
                };
                while let Some(key) = map.next_key::<Key>()? {
                    let slot = match key.0.as_ref() {
                        "data" => {
                            // With `type` already read, a kind kept verbatim takes its
                            // tree in this pass; otherwise the typed fields are read.
                            let (verbatim, content) = match &out.kind {
                                Some(Value::String(kind)) => {
                                    (!is_typed(kind), ContentAs::of_kind(kind))
                                }
                                _ => (false, ContentAs::Tree),
                            };
                            out.data = if verbatim && self.0.raw {
                                let text = map.next_value::<Box<RawValue>>()?;
                                let bytes = text.get().as_bytes();
                                if memchr::memchr2_iter(b'[', b'{', bytes).count()
                                    >= TREE_FROM_OPENINGS
                                {
                                    return Err(de::Error::custom("nested: read as a tree"));
                                }
                                serde_json::from_str::<Skip>(text.get())
                                    .map_err(de::Error::custom)?;
                                CapturedData::Raw(text)
                            } else if verbatim {
                                CapturedData::Tree(map.next_value::<Value>()?)
                            } else {
                                CapturedData::Fields(map.next_value_seed(content)?)
                            };
                            continue;
                        }
                        "type" => &mut out.kind,
                        "seq" => &mut out.seq,
                        "time" => &mut out.time,
                        "ignorable" => &mut out.ignorable,
                        "sourceEventSeqs" => &mut out.source_event_seqs,
                        _ => {
                            map.next_value::<Skip>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value::<Value>()?);
                }
                Ok(out)
            }
            non_objects_read_as_default!(LineFields);
        }
        deserializer.deserialize_any(LineVisitor(self))
    }
}

/// Only the `data` of an event line (its last, if repeated), as a JSON tree.
struct DataOnly(Option<Value>);

impl<'de> Deserialize<'de> for DataOnly {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct DataVisitor;
        impl<'de> Visitor<'de> for DataVisitor {
            type Value = DataOnly;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DataOnly, A::Error> {
                let mut data = None;
                while let Some(key) = map.next_key::<Key>()? {
                    if key.0 == "data" {
                        data = Some(map.next_value::<Value>()?);
                    } else {
                        map.next_value::<Skip>()?;
                    }
                }
                Ok(DataOnly(data))
            }
        }
        deserializer.deserialize_map(DataVisitor)
    }
}

fn packed_row(
    kind: &str,
    mut row: Map<String, Value>,
    ignorable: bool,
) -> Result<PackedRow, String> {
    let seq0 = match row.get("seq0") {
        Some(v) => v
            .as_u64()
            .ok_or_else(|| format!("{kind} row: seq0 {v} is not a non-negative integer"))?,
        None => return Err(format!("{kind} row has neither \"seq\" nor \"seq0\"")),
    };
    let time = row.get("time0").and_then(json_i64);
    let Some(Value::Object(mut data)) = row.remove("data") else {
        return Err(format!("{kind} row has no \"data\" object"));
    };
    let (delta_type, members_key, member_key) = match kind {
        "text-chunks" => ("text-delta", "texts", "text"),
        "reasoning-chunks" => ("reasoning-delta", "texts", "text"),
        _ => ("tool-call-delta", "args", "argumentsDelta"),
    };
    let Some(Value::Array(members)) = data.remove(members_key) else {
        return Err(format!("{kind} row has no \"data.{members_key}\" array"));
    };
    let dt = match data.remove("dt") {
        Some(Value::Array(dt)) => dt,
        None => Vec::new(),
        Some(_) => return Err(format!("{kind} row: \"data.dt\" is not an array")),
    };
    seq0.checked_add(members.len() as u64).ok_or_else(|| {
        format!(
            "{kind} row: seq0 {seq0} + {} members overflows",
            members.len()
        )
    })?;
    let mut chunk_fields = Map::new();
    let chunk_keys: &[&str] = if member_key == "argumentsDelta" {
        &["index", "id", "name"]
    } else {
        &["index"]
    };
    for key in chunk_keys {
        if let Some(v) = data.remove(*key) {
            chunk_fields.insert((*key).to_owned(), v);
        }
    }
    let mut data_fields = Map::new();
    for key in ["turn", "step"] {
        if let Some(v) = data.remove(key) {
            data_fields.insert(key.to_owned(), v);
        }
    }
    Ok(PackedRow {
        seq0,
        next: 0,
        time,
        delta_type,
        member_key,
        chunk_fields,
        data_fields,
        dt,
        members,
        ignorable,
    })
}

/// `[3, [5, 8], 10]` → `[3, 5, 6, 7, 8, 10]`.
pub(crate) fn expand_source_seqs(value: &Value) -> Result<Vec<u64>, String> {
    let Value::Array(entries) = value else {
        return Err("sourceEventSeqs is not an array".to_owned());
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        match entry {
            Value::Array(pair) => {
                let (start, end) = match pair.as_slice() {
                    [a, b] => match (a.as_u64(), b.as_u64()) {
                        (Some(a), Some(b)) => (a, b),
                        _ => return Err(format!("sourceEventSeqs run {entry} is not two seqs")),
                    },
                    _ => {
                        return Err(format!(
                            "sourceEventSeqs run {entry} is not a [start,end] pair"
                        ))
                    }
                };
                if start > end {
                    return Err(format!("sourceEventSeqs run {entry} ends before it starts"));
                }
                if (out.len() as u64).saturating_add((end - start).saturating_add(1))
                    > MAX_SOURCE_SEQS
                {
                    return Err(format!(
                        "sourceEventSeqs expands past {MAX_SOURCE_SEQS} seqs"
                    ));
                }
                out.extend(start..=end);
            }
            other => {
                let seq = other
                    .as_u64()
                    .ok_or_else(|| format!("sourceEventSeqs entry {other} is not a seq"))?;
                if out.len() as u64 >= MAX_SOURCE_SEQS {
                    return Err(format!(
                        "sourceEventSeqs expands past {MAX_SOURCE_SEQS} seqs"
                    ));
                }
                out.push(seq);
            }
        }
    }
    Ok(out)
}

/// Milliseconds: an integer, or a float truncated (JSON numbers from JavaScript).
fn json_i64(v: &Value) -> Option<i64> {
    v.as_i64()
        .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn single(text: &str) -> Event {
        match parse_event_line(text).unwrap() {
            EventLine::Single(e) => e,
            EventLine::Packed(_) => panic!("packed"),
        }
    }

    fn expand(text: &str) -> Vec<Event> {
        let EventLine::Packed(mut row) = parse_event_line(text).unwrap() else {
            panic!("not packed")
        };
        let mut out = Vec::new();
        while let Some(e) = row.next_event() {
            out.push(e);
        }
        assert!(row.is_exhausted());
        out
    }

    #[test]
    fn header_fields() {
        let h = parse_header(
            r#"{"type":"session","version":3,"id":"session-1","createdAt":1764400000000,
            "cwd":"/w","parentSession":"session-0","isSeeded":true,"seedLength":12,
            "origin":"subagent","delegationDepth":1,"agentPreset":"chapters"}"#,
        )
        .unwrap();
        assert_eq!(
            h,
            Header {
                version: 3,
                id: "session-1".into(),
                created_at: Some(1_764_400_000_000),
                cwd: Some("/w".into()),
                parent_session: Some("session-0".into()),
                is_seeded: true,
                seed_length: Some(12),
                origin: Some("subagent".into()),
                delegation_depth: Some(1),
                agent_preset: Some("chapters".into()),
            }
        );
    }

    #[test]
    fn header_minimal_and_refusals() {
        let h = parse_header(r#"{"type":"session","id":"s"}"#).unwrap();
        assert_eq!((h.version, h.id.as_str(), h.cwd), (0, "s", None));
        for bad in [
            r#"{"type":"turn/start","seq":0}"#,
            r#"{"id":"s"}"#,
            r#"{"type":"session"}"#,
            r#"{"type":"session","id":"s","version":-1}"#,
            r#"{"type":"session","id":"s","version":"3"}"#,
            r#"[1,2]"#,
            r#"{"type":"session","#,
        ] {
            assert!(parse_header(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn event_fields() {
        let e = single(
            r#"{"type":"turn/end","seq":17,"time":1764400012345,"data":{"turn":2,"reason":{"kind":"completed"}},"ignorable":true,"surfaceOp":"append"}"#,
        );
        assert_eq!(e.seq, 17);
        assert_eq!(e.kind, "turn/end");
        assert_eq!(e.time, Some(1_764_400_012_345));
        assert!(e.ignorable);
        assert_eq!(e.turn_end_reason(), Some("completed"));
        assert_eq!(e.source_event_seqs, None);
    }

    #[test]
    fn event_without_data_or_time() {
        let e = single(r#"{"type":"x/y","seq":0}"#);
        assert_eq!(
            (e.data(), e.time, e.ignorable),
            (Some(&Value::Null), None, false)
        );
    }

    #[test]
    fn event_refusals() {
        for bad in [
            r#"{"seq":1}"#,
            r#"{"type":"turn/start"}"#,
            r#"{"type":7,"seq":1}"#,
            r#"{"type":"a","seq":-1}"#,
            r#"{"type":"a","seq":1.5}"#,
            r#"{"type":"a","seq":"1"}"#,
            r#""text""#,
            r#"{"type":"a","seq":1,"sourceEventSeqs":"x"}"#,
            "{\"type\":\"a\"",
        ] {
            assert!(parse_event_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let deep = format!(
            r#"{{"type":"a","seq":0,"data":{}{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert!(parse_event_line(&deep).is_err());
    }

    #[test]
    fn source_seqs_pairs_expanded() {
        let e = single(
            r#"{"type":"assistant/message","seq":20,"sourceEventSeqs":[1,[3,6],9,[10,12]]}"#,
        );
        assert_eq!(
            e.source_event_seqs,
            Some(vec![1, 3, 4, 5, 6, 9, 10, 11, 12])
        );
        let e = single(r#"{"type":"assistant/message","seq":20,"sourceEventSeqs":[2,4]}"#);
        assert_eq!(e.source_event_seqs, Some(vec![2, 4]));
    }

    #[test]
    fn source_seqs_refusals() {
        for bad in [
            json!([[5, 3]]),
            json!([[1, 2, 3]]),
            json!([[1]]),
            json!([["a", 2]]),
            json!([-1]),
            json!([[0, u64::MAX]]),
            json!([[0, MAX_SOURCE_SEQS - 1], 7]),
        ] {
            assert!(expand_source_seqs(&bad).is_err(), "{bad}");
        }
        assert_eq!(
            expand_source_seqs(&json!([[0, MAX_SOURCE_SEQS - 1]]))
                .unwrap()
                .len() as u64,
            MAX_SOURCE_SEQS
        );
    }

    #[test]
    fn text_chunks_expanded() {
        let events = expand(
            r#"{"type":"text-chunks","seq0":4,"time0":1000,"data":{"turn":1,"step":2,"index":0,"dt":[5,7],"texts":["a","b","c"]}}"#,
        );
        let seqs: Vec<_> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [4, 5, 6]);
        let times: Vec<_> = events.iter().map(|e| e.time).collect();
        assert_eq!(times, [Some(1000), Some(1005), Some(1012)]);
        assert!(events.iter().all(|e| e.kind == "assistant/chunk"));
        assert_eq!(
            *events[1].data().unwrap(),
            json!({"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"b"}})
        );
    }

    #[test]
    fn reasoning_and_tool_call_chunks_expanded() {
        let r = expand(
            r#"{"type":"reasoning-chunks","seq0":0,"time0":5,"data":{"turn":0,"step":0,"index":1,"dt":[1],"texts":["x","y"]}}"#,
        );
        assert_eq!(
            r[0].data().unwrap()["chunk"],
            json!({"type":"reasoning-delta","index":1,"text":"x"})
        );
        let t = expand(
            r#"{"type":"tool-call-chunks","seq0":9,"time0":5,"ignorable":true,"data":{"turn":0,"step":0,"index":2,"id":"call-1","name":"bash","dt":[],"args":["{\"co","mmand\":1}"]}}"#,
        );
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].seq, t[1].seq), (9, 10));
        assert_eq!((t[0].time, t[1].time), (Some(5), Some(5)));
        assert!(t[1].ignorable);
        assert_eq!(
            t[1].data().unwrap()["chunk"],
            json!({"type":"tool-call-delta","index":2,"id":"call-1","name":"bash","argumentsDelta":"mmand\":1}"})
        );
    }

    #[test]
    fn packed_without_time_or_members() {
        let e = expand(r#"{"type":"text-chunks","seq0":0,"data":{"texts":["a"]}}"#);
        assert_eq!(
            (e[0].time, e[0].data().unwrap()),
            (None, &json!({"chunk":{"type":"text-delta","text":"a"}}))
        );
        assert!(expand(r#"{"type":"text-chunks","seq0":3,"data":{"texts":[]}}"#).is_empty());
    }

    #[test]
    fn packed_refusals() {
        for bad in [
            r#"{"type":"text-chunks","time0":0,"data":{"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":0}"#,
            r#"{"type":"text-chunks","seq0":0,"data":{"args":["a"]}}"#,
            r#"{"type":"tool-call-chunks","seq0":0,"data":{"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":0,"data":{"texts":["a"],"dt":3}}"#,
            r#"{"type":"text-chunks","seq0":-2,"data":{"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq0":18446744073709551615,"data":{"texts":["a"]}}"#,
        ] {
            assert!(parse_event_line(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lone_surrogates_replaced_pairs_and_escaped_backslashes_kept() {
        let cases = [
            (r#""\ud83d""#, Some((r#""\ufffd""#, 1))),
            (r#""\uDC00x""#, Some((r#""\ufffdx""#, 1))),
            (r#""\ud83d\u0041""#, Some((r#""\ufffd\u0041""#, 1))),
            (
                r#""\ud83d\ud83d\ude00""#,
                Some((r#""\ufffd\ud83d\ude00""#, 1)),
            ),
            (r#""a\ud83d""#, Some((r#""a\ufffd""#, 1))),
            (r#""\ud83d\ude00""#, None),
            (r#""\\ud83d""#, None),
            (r#""\u00e9 \n""#, None),
            (r#""plain""#, None),
        ];
        for (text, want) in cases {
            let got = replace_lone_surrogates(text);
            assert_eq!(got.as_ref().map(|(s, n)| (s.as_str(), *n)), want, "{text}");
        }
    }

    #[test]
    fn lenient_parse_reads_a_cut_emoji_as_replacement() {
        let line = r#"{"type":"user/message","seq":3,"data":{"content":[{"type":"text","text":"hi \ud83d"}],"source":{"kind":"user"},"role":"user","id":"m"}}"#;
        assert!(parse_event_line(line).is_err(), "strict JSON refuses it");
        let (EventLine::Single(e), replaced) = parse_event_line_lenient(line).unwrap() else {
            panic!("packed")
        };
        assert_eq!(replaced, 1);
        assert_eq!(e.user_message().unwrap().text, "hi \u{fffd}");
        // A line damaged otherwise stays refused with the strict parser's reason.
        let garbled = r#"{"type":"a","seq":3,"data":{"x":"\ud83d"#;
        assert!(parse_event_line_lenient(garbled).is_err());
        let header = r#"{"type":"session","id":"s","cwd":"/w/\udc00"}"#;
        assert_eq!(
            parse_header_lenient(header).unwrap().cwd.as_deref(),
            Some("/w/\u{fffd}")
        );
    }

    /// DSH (0.1.7+) keeps an attachment in a message as a reference — `{type: "image",
    /// attachment: {attachmentId, …}, offloaded?}`, `{type: "file", attachment: {hash, name,
    /// bytes}}` — never its bytes: a marker says it was there, and its words are no terms.
    #[test]
    fn an_attached_image_or_file_leaves_a_marker_and_no_terms() {
        let e = single(
            r#"{"type":"user/message","seq":3,"data":{"role":"user","id":"m","source":{"kind":"user"},"content":[{"type":"text","text":"the tokenizer crashes"},{"type":"image","attachment":{"attachmentId":"a1"},"offloaded":true},{"type":"file","attachment":{"hash":"sha256:ab","name":"report.csv","bytes":3}}]}}"#,
        );
        assert_eq!(
            e.user_message().unwrap().text,
            "the tokenizer crashes\n\n⟦image omitted⟧\n\n⟦file omitted: report.csv⟧"
        );
        let turn = crate::turn::CompletedTurn {
            turn: 1,
            first_seq: 3,
            end_seq: 4,
            reason: "completed".into(),
            events: vec![
                e,
                Event::new(
                    4,
                    "turn/end",
                    serde_json::json!({"turn": 1, "reason": {"kind": "completed"}}),
                ),
            ],
        };
        let redactor = crate::redact::built_in().expect("rules");
        let text = redactor.redact_all(
            crate::signature::TurnText::of(&turn),
            &mut crate::redact::RedactionCounts::default(),
        );
        let sig = crate::signature::sign(&text, "s", "/w", "2026-01-01T00:00:00Z").into_inner();
        assert_eq!(sig.terms, ["tokenizer", "crashes"], "{sig:?}");
    }

    #[test]
    fn a_chunk_type_with_seq_is_an_ordinary_event() {
        let e = single(r#"{"type":"text-chunks","seq":3,"data":{}}"#);
        assert_eq!(e.kind, "text-chunks");
    }
}

/// The typed payloads held equal to the JSON-tree reading they replaced: the old accessors,
/// kept here as the oracle, over generated, hostile and randomly shaped lines.
#[cfg(test)]
mod oracle {
    use super::*;
    use crate::session::event::{parse_source, ToolCall, ToolResult, UserMessage};
    use crate::testkit::writer::{generate_session, SessionScript};
    use serde_json::json;

    /// What the old reader made of a line: the event fields and the accessors' answers.
    #[derive(Debug, PartialEq)]
    struct Reading {
        seq: u64,
        kind: String,
        time: Option<i64>,
        ignorable: bool,
        source_event_seqs: Option<Vec<u64>>,
        turn: Option<u64>,
        turn_end_reason: Option<String>,
        user: Option<UserMessage>,
        assistant: Option<String>,
        call: Option<ToolCall>,
        result: Option<ToolResult>,
        /// `data`, for the kinds that keep it.
        data: Option<Value>,
    }

    fn new_reading(e: &Event) -> Reading {
        Reading {
            seq: e.seq,
            kind: e.kind.clone(),
            time: e.time,
            ignorable: e.ignorable,
            source_event_seqs: e.source_event_seqs.clone(),
            turn: e.turn(),
            turn_end_reason: e.turn_end_reason().map(str::to_owned),
            user: e.user_message().cloned(),
            assistant: e.assistant_text().map(str::to_owned),
            call: e.tool_call().cloned(),
            result: e.tool_result().cloned(),
            data: e.data().cloned(),
        }
    }

    /// The old `parse_event_line` (single events) and accessors, on a JSON tree.
    fn old_reading(text: &str) -> Result<Option<Reading>, ()> {
        let value: Value = serde_json::from_str(text).map_err(|_| ())?;
        let Value::Object(mut map) = value else {
            return Err(());
        };
        let Some(Value::String(kind)) = map.remove("type") else {
            return Err(());
        };
        let ignorable = map
            .get("ignorable")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if PACKED_ROW_TYPES.contains(&kind.as_str()) && !map.contains_key("seq") {
            return Ok(None);
        }
        let seq = map.get("seq").and_then(Value::as_u64).ok_or(())?;
        let source_event_seqs = match map.get("sourceEventSeqs") {
            None | Some(Value::Null) => None,
            Some(v) => Some(expand_source_seqs(v).map_err(|_| ())?),
        };
        let data = map.remove("data").unwrap_or(Value::Null);
        let user = (kind == "user/message").then(|| {
            let msg = data.get("message").unwrap_or(&data);
            UserMessage {
                text: content_text(msg.get("content")),
                source: parse_source(msg.get("source").or_else(|| data.get("source"))),
            }
        });
        let assistant = (kind == "assistant/message")
            .then(|| content_text(data.get("message").unwrap_or(&data).get("content")));
        let sub_start = matches!(
            kind.as_str(),
            "tool/ptc-dispatch-start" | "tool/code-dispatch-start"
        );
        let sub_end = matches!(kind.as_str(), "tool/ptc-dispatch" | "tool/code-dispatch");
        let call = (kind == "tool/call" || sub_start).then(|| ToolCall {
            call_id: str_field(&data, if sub_start { "subCallId" } else { "callId" }),
            name: str_field(&data, "name"),
            arguments: match data.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
        });
        let result = if kind == "tool/result" {
            tool_result(&data)
        } else if sub_end {
            Some(ToolResult {
                call_id: str_field(&data, "subCallId"),
                content: value_text(data.get("content")),
                is_error: data
                    .get("isError")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            })
        } else {
            None
        };
        let keeps_data = !matches!(
            kind.as_str(),
            "user/message" | "assistant/message" | "tool/call"
        ) && !sub_start
            && result.is_none();
        Ok(Some(Reading {
            seq,
            time: map.get("time").and_then(json_i64),
            ignorable,
            source_event_seqs,
            turn: data.get("turn").and_then(Value::as_u64),
            turn_end_reason: (kind == "turn/end").then(|| {
                data.get("reason")
                    .and_then(|r| r.get("kind"))
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_owned()
            }),
            kind,
            user,
            assistant,
            call,
            result,
            data: keeps_data.then_some(data),
        }))
    }

    fn tool_result(data: &Value) -> Option<ToolResult> {
        let msg = data.get("message").unwrap_or(data);
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

    fn str_field(v: &Value, key: &str) -> String {
        v.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }

    fn content_text(content: Option<&Value>) -> String {
        match content {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(blocks)) => {
                let mut out = String::new();
                for b in blocks {
                    let piece = match b.get("type").and_then(Value::as_str) {
                        Some("text") => b.get("text").and_then(Value::as_str).map(str::to_owned),
                        // An attachment (a reference, never bytes) leaves its marker.
                        Some(what @ ("image" | "file")) => {
                            let name = b
                                .get("attachment")
                                .and_then(|a| a.get("name"))
                                .and_then(Value::as_str);
                            Some(match name {
                                Some(name) => format!("⟦{what} omitted: {name}⟧"),
                                None => format!("⟦{what} omitted⟧"),
                            })
                        }
                        _ => None,
                    };
                    if let Some(t) = piece {
                        if !out.is_empty() {
                            out.push_str("\n\n");
                        }
                        out.push_str(&t);
                    }
                }
                out
            }
            _ => String::new(),
        }
    }

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

    /// Both readings of one line agree: the same refusal, or the same event.
    fn check(text: &str) {
        let new = parse_event_line(text);
        match (old_reading(text), new) {
            (Err(()), Err(_)) | (Ok(None), Ok(EventLine::Packed(_))) => {}
            (Ok(Some(old)), Ok(EventLine::Single(e))) => {
                assert_eq!(old, new_reading(&e), "{text}");
                // The test constructor reads a tree the same way.
                let data = old.data.clone().unwrap_or_else(|| {
                    serde_json::from_str::<Value>(text).unwrap()["data"].clone()
                });
                let built = Event::new(e.seq, &e.kind, data);
                assert_eq!(
                    (
                        built.user_message(),
                        built.assistant_text(),
                        built.tool_call()
                    ),
                    (e.user_message(), e.assistant_text(), e.tool_call()),
                    "{text}"
                );
                assert_eq!(built.tool_result(), e.tool_result(), "{text}");
                // Reasoning blocks too (read typed in the line's pass when `type` came first).
                assert_eq!(built.assistant_message(), e.assistant_message(), "{text}");
                assert_eq!(built.turn(), e.turn(), "{text}");
            }
            (old, new) => panic!("{text}: old {old:?}, new {new:?}"),
        }
    }

    #[test]
    fn generated_sessions_read_alike() {
        for version in 0..=4 {
            let ws = "/w";
            let mut script = SessionScript::new(version, 1_764_400_000_000);
            let mut lines = 0;
            for spec in generate_session(7 + u64::from(version), 60, 6_000, version, ws) {
                for event in script.turn_events(&spec) {
                    check(&event.to_string());
                    // The same event with `type` first, as the harness writes it.
                    if let Value::Object(mut map) = event {
                        let kind = map.remove("type").unwrap_or(Value::Null);
                        let rest = Value::Object(map).to_string();
                        check(&format!(r#"{{"type":{kind},{}"#, &rest[1..]));
                    }
                    lines += 1;
                }
            }
            assert!(lines > 500, "v{version}: {lines} lines");
        }
    }

    const KINDS: [&str; 11] = [
        "user/message",
        "assistant/message",
        "tool/call",
        "tool/result",
        "tool/ptc-dispatch-start",
        "tool/ptc-dispatch",
        "tool/code-dispatch-start",
        "tool/code-dispatch",
        "turn/end",
        "turn/start",
        "x/unknown",
    ];

    #[test]
    fn hostile_shapes_read_alike() {
        let datas = [
            "null",
            "5",
            "\"s\"",
            "[]",
            "[1,{\"turn\":2}]",
            "{}",
            r#"{"message":null,"source":{"kind":"user"}}"#,
            r#"{"message":5,"content":"outer"}"#,
            r#"{"message":{"content":"t","source":null},"source":{"kind":"user"}}"#,
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":""},{"type":"text","text":"b"}]}"#,
            r#"{"content":[{"type":"text","text":""},{"type":"text","text":"b"}]}"#,
            r#"{"content":[{"type":"text"},3,{"text":5},{"type":"text","text":7}]}"#,
            r#"{"message":{"role":"tool","toolCallId":null,"content":[{"text":1},{"text":"x"}]}}"#,
            r#"{"message":{"role":"tool","content":[{"text":"x"},{"type":"image"}]}}"#,
            r#"{"message":{"role":"tool","content":{"a":[1,2.5,"x"]},"isError":"yes"}}"#,
            r#"{"message":{"role":"user","content":[{"type":"tool-result","content":[{"type":"x"}],"isError":true}],"source":{"callId":"c"}}}"#,
            r#"{"message":{"role":"user","content":[5,{"type":"tool-result","toolCallId":7,"content":null}],"source":{"callId":"c"}}}"#,
            r#"{"message":{"role":"user","content":[{"type":"text","text":"no result block"}]}}"#,
            r#"{"role":"tool","toolCallId":"top","content":"v4 on data"}"#,
            r#"{"source":{"kind":"plugin:foo","name":5,"plugin":"p"}}"#,
            r#"{"source":{"kind":"plugin","name":5,"plugin":"p","form":"relay"}}"#,
            r#"{"source":{"kind":"plugin","plugin":"p"}}"#,
            r#"{"arguments":{"b":1,"a":[true,null]}}"#,
            r#"{"arguments":null,"callId":5,"name":"n"}"#,
            r#"{"arguments":"{\"command\":\"ls\"}","callId":"c","name":"bash"}"#,
            r#"{"turn":-1,"reason":{"kind":5}}"#,
            r#"{"turn":1.0,"reason":"completed"}"#,
            r#"{"turn":18446744073709551615,"reason":{"kind":"aborted"}}"#,
            r#"{"content":"a","content":"b","turn":1,"turn":2}"#,
            r#"{"message":{"content":"a"},"message":5}"#,
            r#"{"message":5,"message":{"content":"last"}}"#,
            r#"{"con\u0074ent":"escaped key","\u0074urn":4}"#,
            r#"{"content":"\ud83d\ude00 pair and \n escapes \u0000"}"#,
            r#"{"content":[{"type":"reasoning","text":"r"},{"type":"reasoning"},{"type":"text","text":"t"}]}"#,
            r#"{"content":[{"type":"reasoning","text":5},{"text":"a","type":"text","text":"b"},{"type":"text","type":"x","text":"c"}]}"#,
            r#"{"message":{"content":[{"type":"tool-call","id":"c","arguments":{"a":[1,"\u00e9"]}},{"type":["text"],"text":"d"}],"source":{"kind":"model","replayState":{}}}}"#,
            r#"{"content":{"type":"text","text":"an object"}}"#,
            r#"{"content":[[{"type":"text","text":"nested"}],null,{"type":"text","text":"\t"}]}"#,
            r#"{"other":{"deep":[[[[{"x":"\u00e9"}]]]]},"content":"ok"}"#,
            r#"{"rootCallId":"r","parentCallId":"r","subCallId":"r:ptc:1","name":"pwsh","arguments":{"command":"ls"}}"#,
            r#"{"subCallId":"r:ptc:1","name":"read","arguments":{},"isError":true,"content":[{"type":"text","text":"1: A"}]}"#,
            r#"{"subCallId":7,"callId":"c","isError":"no","content":{"x":1},"arguments":"{\"a\":1}"}"#,
            r#"{"content":[{"type":"text","text":"see"},{"type":"image","attachment":{"attachmentId":"a1","name":"shot.png"}},{"type":"file","attachment":{"hash":"sha256:x","name":"report.txt","bytes":3}}]}"#,
            r#"{"content":[{"type":"image","offloaded":true,"attachment":{"attachmentId":"a1"}},{"attachment":{"name":"before type"},"type":"file"},{"type":"file","attachment":{"name":5}},{"type":"image","attachment":"x"},{"type":"file","attachment":{"name":"a"},"attachment":{"name":"b"}}]}"#,
            r#"{"message":{"content":[{"type":"image","text":"not text","attachment":{"name":"i.png","name":"j.png"}},{"type":"reasoning","text":"r"}]}}"#,
        ];
        for kind in KINDS {
            for data in datas {
                check(&format!(
                    r#"{{"type":"{kind}","seq":3,"time":9,"data":{data}}}"#
                ));
                // The same with `type` last and extra envelope keys.
                check(&format!(
                    r#"{{"data":{data},"seq":3,"ignorable":true,"surfaceOp":{{"op":[1]}},"type":"{kind}"}}"#
                ));
            }
        }
        for line in [
            r#"{"type":"a","type":"user/message","seq":1,"data":{"content":"x"}}"#,
            r#"{"type":"a","seq":1,"data":{"content":"x","turn":3},"type":"user/message"}"#,
            r#"{"type":"user/message","seq":1,"data":{"content":"x","turn":3},"type":"a"}"#,
            r#"{"type":"a","seq":1,"data":{"content":"x"},"type":"tool/result"}"#,
            r#"{"type":"tool/result","seq":1,"data":{"content":"x"},"data":{"message":{"role":"tool"}}}"#,
            r#"{"type":"a","seq":1,"data":{"x":1},"type":"b","data":[2]}"#,
            r#"{"type":"user/message","seq":1,"data":{"content":"x"},"data":{"content":"y"}}"#,
            r#"{"type":"user/message","seq":1,"seq":2}"#,
            r#"{"type":"user/message","seq":null}"#,
            r#"{"type":"user/message","seq":1,"time":1.5e3,"ignorable":1}"#,
            r#"{"type":"user/message","seq":1,"sourceEventSeqs":[1,[2,3]]}"#,
            r#"{"type":"user/message","seq":1,"sourceEventSeqs":null}"#,
            r#"{"type":"tool/call","seq":1,"x":"\ud800"}"#,
            r#"{"type":"tool/call","seq":1,"data":{"x":"\udc00"}}"#,
            r#"{"type":"tool/call","seq":1,"data":{"x":1e999}}"#,
            r#"{"type":"tool/call","seq":1,"data":{"x":"bad \q escape"}}"#,
            r#"{"type":"tool/call","seq":1,"data":{"x":1}} trailing"#,
            r#"{"type":"tool/call","seq":1,"data":{"x":1},}"#,
            r#"{"type":"text-chunks","seq0":1,"data":{"texts":["a"]}}"#,
            r#"{"type":"text-chunks","seq":1,"data":{"texts":["a"]}}"#,
            r#"["type","user/message"]"#,
            r#""user/message""#,
            "null",
            "",
        ] {
            check(line);
        }
        // Nesting past the parser's depth limit, in an ignored field and in a read one.
        for field in ["surfaceOp", "data"] {
            check(&format!(
                r#"{{"type":"tool/result","seq":0,"{field}":{{"x":{}{}}}}}"#,
                "[".repeat(300),
                "]".repeat(300)
            ));
        }
        check(&format!(
            r#"{{"type":"tool/result","seq":0,"data":{{"content":{}{}}}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        ));
    }

    /// A random JSON value over the keys and strings the payload readers look at.
    fn random_value(rng: &mut u64, depth: u32) -> Value {
        const KEYS: [&str; 17] = [
            "type",
            "text",
            "content",
            "message",
            "role",
            "source",
            "toolCallId",
            "isError",
            "callId",
            "name",
            "arguments",
            "turn",
            "reason",
            "kind",
            "plugin",
            "form",
            "step",
        ];
        const STRINGS: [&str; 11] = [
            "text",
            "reasoning",
            "tool",
            "tool-result",
            "user",
            "plugin:x",
            "agent-message",
            "",
            "a\nb",
            "{\"path\":\"src/a.rs\"}",
            "é",
        ];
        let pick = if depth >= 4 {
            next(rng, 6)
        } else {
            next(rng, 9)
        };
        match pick {
            0 => Value::Null,
            1 => json!(next(rng, 2) == 0),
            2 => json!(next(rng, 5)),
            3 => json!(-(next(rng, 3) as i64) - 1),
            4 => json!(next(rng, 7) as f64 + 0.5),
            5 => json!(STRINGS[next(rng, STRINGS.len() as u64) as usize]),
            6 => {
                let n = next(rng, 4);
                Value::Array((0..n).map(|_| random_value(rng, depth + 1)).collect())
            }
            _ => {
                let n = next(rng, 5);
                let mut map = Map::new();
                for _ in 0..n {
                    let key = KEYS[next(rng, KEYS.len() as u64) as usize];
                    map.insert(key.to_owned(), random_value(rng, depth + 1));
                }
                Value::Object(map)
            }
        }
    }

    fn next(rng: &mut u64, n: u64) -> u64 {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        *rng % n
    }

    /// A verbatim kind's `data` is kept as checked text in the line's pass: every line that
    /// pass could judge apart from a tree — nesting around the limit (a text checked alone is
    /// a level shallower), numbers a tree refuses, lone surrogates, bad escapes, a later
    /// `type` naming a typed kind — reads as the tree reads it.
    #[test]
    fn verbatim_data_kept_as_text_reads_as_a_tree() {
        let mut datas: Vec<String> = Vec::new();
        for depth in [1, 50, 98, 99, 100, 101, 125, 126, 127, 128, 129, 200] {
            datas.push(format!("{}{}", "[".repeat(depth), "]".repeat(depth)));
            datas.push(format!(
                "{}1{}",
                r#"{"a":"#.repeat(depth),
                "}".repeat(depth)
            ));
            // Brackets inside strings count too, and never make a line refused.
            datas.push(format!(r#"{{"turn":3,"s":"{}"}}"#, "[{".repeat(depth)));
        }
        for number in [
            "1e400",
            "-1e400",
            "1e308",
            "1.5e-400",
            "01",
            "1.",
            "-",
            "1e",
            "18446744073709551616",
        ] {
            datas.push(format!(r#"{{"turn":{number}}}"#));
        }
        for text in [
            r"\ud83d",
            r"\ude00x",
            r"\ud83d\ude00",
            r"\x",
            r"\u12",
            "\u{1}",
            r"\\ud83d",
        ] {
            datas.push(format!(r#"{{"turn":1,"t":"{text}"}}"#));
            datas.push(format!(r#"{{"{text}":1}}"#));
        }
        datas.push(r#"{"turn":1,"reason":{"kind":"completed"}}"#.to_owned());
        datas.push(r#"{"turn":1,"turn":2}"#.to_owned());
        for data in &datas {
            for kind in ["turn/end", "x/unknown"] {
                let line = format!(r#"{{"type":"{kind}","seq":4,"data":{data}}}"#);
                check(&line);
                // Read leniently too: the surrogates' repair sees the same refusals.
                let strict = parse_event_line(&line).ok();
                let lenient = parse_event_line_lenient(&line).ok().map(|(l, _)| l);
                if strict.is_some() {
                    assert_eq!(strict, lenient, "{line}");
                }
            }
            // Kept as text under a verbatim `type`, then a typed one.
            check(&format!(
                r#"{{"type":"x/unknown","seq":4,"data":{data},"type":"tool/result"}}"#
            ));
            check(&format!(
                r#"{{"type":"x/unknown","seq":4,"data":{data},"data":{{"turn":9}}}}"#
            ));
        }
    }

    #[test]
    fn random_shapes_read_alike() {
        let mut rng = 0x2545_F491_4F6C_DD1D_u64;
        for i in 0..20_000u64 {
            let kind = KINDS[(i % KINDS.len() as u64) as usize];
            let data = random_value(&mut rng, 0);
            // Keys sorted (`data` before `type`) and in the logs' own order (`type` first).
            check(&json!({"type": kind, "seq": i, "data": data}).to_string());
            check(&format!(r#"{{"type":"{kind}","seq":{i},"data":{data}}}"#));
        }
    }
}

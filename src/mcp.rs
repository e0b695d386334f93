//! `chapters mcp`: a Model Context Protocol server on stdio (shell). Newline-delimited
//! JSON-RPC 2.0, synchronous: one request in, one response out, in order. Four tools —
//! `chapters_search`, `chapters_rules`, `chapters_rule_propose` (always `proposed`; nothing
//! here approves, pins or revokes) and `chapters_artifact` — each a thin door over the same
//! library functions the CLI uses (`search`, `rules::store::assemble`, the store).
//!
//! Built on serde_json rather than an SDK: the protocol surface a tools-only server needs
//! is small, and an SDK would bring an async runtime into a crate that has none.

use std::io::{self, BufRead, Write};
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::identity::Identity;
use crate::redact::Redactor;
use crate::rules::block::Block;
use crate::rules::store::{self as rules_store, AssembleRequest, Written};
use crate::rules::Rule;
use crate::search;
use crate::search_door;
use crate::store::{Store, MIRROR_DIR, STORE_DIR};

/// Protocol revisions this server speaks, newest first. A client asking for another gets
/// the newest, and may disconnect (the protocol's negotiation).
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-06-18", "2025-03-26", "2024-11-05"];
/// `chapters_artifact`'s page size when the call names none, in estimated tokens.
const DEFAULT_ARTIFACT_TOKENS: u64 = 2000;
/// The largest page `chapters_artifact` returns in one call.
const MAX_ARTIFACT_TOKENS: u64 = 50_000;
/// A request line longer than this is refused unread (a tool call is a few KiB).
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;

/// What the server answers from, resolved once at start.
pub struct McpContext<'a> {
    pub workspace: &'a Path,
    pub dsh_home: &'a Path,
    pub config: &'a Config,
    pub identity: &'a Identity,
    pub harness_id: &'a str,
    /// The clock, read per search (recency).
    pub now_ms: &'a dyn Fn() -> i64,
}

/// Serve until the input ends.
pub fn serve(ctx: &McpContext<'_>, input: impl BufRead, mut output: impl Write) -> io::Result<()> {
    let mut input = input;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = read_bounded_line(&mut input, &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let response = if line.len() > MAX_LINE_BYTES {
            Some(error(
                Value::Null,
                INVALID_REQUEST,
                &format!("request line longer than {MAX_LINE_BYTES} bytes; refused unread"),
            ))
        } else {
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Value>(text.trim()) {
                Err(e) => Some(error(Value::Null, PARSE_ERROR, &format!("not JSON: {e}"))),
                Ok(Value::Array(batch)) if !batch.is_empty() => {
                    let answers: Vec<Value> = batch.iter().filter_map(|m| handle(ctx, m)).collect();
                    (!answers.is_empty()).then_some(Value::Array(answers))
                }
                Ok(message) => handle(ctx, &message),
            }
        };
        if let Some(response) = response {
            serde_json::to_writer(&mut output, &response)?;
            output.write_all(b"\n")?;
            output.flush()?;
        }
    }
}

/// Read one line, keeping at most `MAX_LINE_BYTES + 1` bytes of it (the rest is skipped):
/// a hostile line never grows memory without bound.
fn read_bounded_line(input: &mut impl BufRead, out: &mut Vec<u8>) -> io::Result<usize> {
    let mut total = 0;
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = (MAX_LINE_BYTES + 1).saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(buf.len());
        total += used;
        input.consume(used);
        if done.is_some() {
            return Ok(total);
        }
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(id: Value, value: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": value})
}

/// One message → its response; notifications and responses get none.
fn handle(ctx: &McpContext<'_>, message: &Value) -> Option<Value> {
    let Some(obj) = message.as_object() else {
        return Some(error(
            Value::Null,
            INVALID_REQUEST,
            "a JSON-RPC message is an object",
        ));
    };
    let id = obj.get("id").cloned();
    let id_ok = matches!(id, None | Some(Value::String(_)) | Some(Value::Number(_)));
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !id_ok {
        return Some(error(
            if id_ok {
                id.unwrap_or(Value::Null)
            } else {
                Value::Null
            },
            INVALID_REQUEST,
            "not a JSON-RPC 2.0 request (`jsonrpc` must be \"2.0\", `id` a string or number)",
        ));
    }
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        // A response from the client (we send no requests): nothing to answer.
        if obj.contains_key("result") || obj.contains_key("error") {
            return None;
        }
        return Some(error(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "a request needs a `method`",
        ));
    };
    let id = id?; // a notification: acted on (there is nothing to act on), never answered
    let params = obj.get("params").cloned().unwrap_or(Value::Null);
    Some(match method {
        "initialize" => result(id, initialize(&params)),
        "ping" => result(id, json!({})),
        "tools/list" => result(id, json!({"tools": tools()})),
        "tools/call" => match call(ctx, &params) {
            Ok(value) => result(id, value),
            Err(message) => error(id, INVALID_PARAMS, &message),
        },
        other => error(id, METHOD_NOT_FOUND, &format!("unknown method {other:?}; this server answers initialize, ping, tools/list and tools/call")),
    })
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| PROTOCOL_VERSIONS.contains(v))
        .unwrap_or(PROTOCOL_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "dsh-chapters", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Before a task, call chapters_rules with the task description and name the rules you follow. For earlier work, decisions or bug history, call chapters_search first. chapters_artifact returns an oversized tool result by its hash.",
    })
}

fn tools() -> Value {
    json!([
        {
            "name": "chapters_search",
            "description": "Search this project's archived chapters, plans and rules (this machine's store, plus other machines' work when a pool is linked). Returns whole result lines, most relevant first, within a token budget.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Words to look for in titles, topics (double), summaries and the conversations' text — tool output, commands, files read; `\"a phrase\"`, `prefix*`, `-word` leaves a word out; `plan` or `rule` finds those kinds."},
                    "max_tokens": {"type": "integer", "minimum": 1, "description": "Token budget of the answer (default: searchDefaultMaxTokens)."},
                    "topic": {"type": "string", "description": "Only documents carrying this topic."}
                },
                "required": ["query"]
            }
        },
        {
            "name": "chapters_rules",
            "description": "The rules that apply to a task: project rules approved on this machine and, given a session, that session tree's rules — verbatim within the rules budget, with the count of any withheld.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What you are about to do."},
                    "session": {"type": "string", "description": "The current session id (adds its session rules)."}
                },
                "required": ["task"]
            }
        },
        {
            "name": "chapters_rule_propose",
            "description": "Propose a project rule. It is written `proposed` and governs nothing until a person approves it on each machine.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "category": {"type": "string", "description": "Lowercase category name, e.g. `testing`."},
                    "text": {"type": "string", "description": "The rule, in words."}
                },
                "required": ["category", "text"]
            }
        },
        {
            "name": "chapters_artifact",
            "description": "The text of an artifact (an oversized tool result a chapter names by SHA-256), one page within a token budget; a longer artifact says where the next page starts.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "hash": {"type": "string", "description": "The artifact's SHA-256 (64 hex digits)."},
                    "max_tokens": {"type": "integer", "minimum": 1, "description": "Page size in estimated tokens (default 2000)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "First character of the page (default 0)."}
                },
                "required": ["hash"]
            }
        }
    ])
}

fn text_result(text: String, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": is_error})
}

/// Argument access with the tool named in every complaint.
struct Arguments<'a> {
    tool: &'a str,
    map: Map<String, Value>,
}

impl Arguments<'_> {
    fn string(&self, key: &str, required: bool) -> Result<Option<String>, String> {
        match self.map.get(key) {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => {
                Err(format!("{}: `{key}` is required (a string)", self.tool))
            }
            Some(other) => Err(format!(
                "{}: `{key}` must be a string, got {other}",
                self.tool
            )),
        }
    }

    fn count(&self, key: &str) -> Result<Option<u64>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                format!(
                    "{}: `{key}` must be a non-negative integer, got {v}",
                    self.tool
                )
            }),
        }
    }
}

/// `tools/call`: an unknown tool or bad arguments is a protocol error (the caller fixes the
/// call); a tool that ran and could not answer is a result with `isError`.
fn call(ctx: &McpContext<'_>, params: &Value) -> Result<Value, String> {
    let tool = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or("tools/call needs `name`, one of the tools tools/list names")?;
    let map = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(format!(
                "{tool}: `arguments` must be an object, got {other}"
            ))
        }
    };
    let args = Arguments { tool, map };
    match tool {
        "chapters_search" => search_tool(ctx, &args),
        "chapters_rules" => rules_tool(ctx, &args),
        "chapters_rule_propose" => propose_tool(ctx, &args),
        "chapters_artifact" => artifact_tool(ctx, &args),
        other => Err(format!(
            "unknown tool {other:?}; the tools are chapters_search, chapters_rules, chapters_rule_propose and chapters_artifact"
        )),
    }
}

fn search_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Value, String> {
    let text = args.string("query", true)?.unwrap_or_default();
    let request = search_door::Request::text(&text, args.string("topic", false)?);
    if request.query.is_empty() && request.topic.is_none() {
        return Err(format!(
            "chapters_search: the query {:?} has no word to look for (letters or digits)",
            crate::redact::echo(&text)
        ));
    }
    let budget = args
        .count("max_tokens")?
        .unwrap_or(ctx.config.search_default_max_tokens);
    let corpus = match search_door::open(
        ctx.workspace,
        &ctx.identity.project_key,
        false,
        std::time::Duration::from_millis(ctx.config.writer_lock_timeout_ms),
    ) {
        Ok(corpus) => corpus,
        Err(e) => return Ok(text_result(format!("search failed: {e}"), true)),
    };
    let mut request = request;
    request.topic = request
        .topic
        .as_deref()
        .map(|t| corpus.curation.canonical(t).topic);
    let params = search::ScoreParams {
        curation: corpus.curation.clone(),
        core_rule_bonus: ctx.config.rules_core_bonus,
    };
    let now = search::day_start((ctx.now_ms)());
    let answer = match corpus.answer_packed(&request, &params, ctx.harness_id, now, budget) {
        Ok(answer) => answer,
        Err(e) => return Ok(text_result(format!("search failed: {e}"), true)),
    };
    let mut out = corpus.door.describe(corpus.documents, corpus.mirror_absent);
    out.push('\n');
    if let Some(needed) = answer.packed.first_line_too_large {
        return Ok(text_result(
            format!("{out}budget too small: the best of {} matches is one line of {needed} tokens and max_tokens is {budget}; ask again with max_tokens {needed} or more (a line is never clipped)", answer.total),
            true,
        ));
    }
    if corpus.documents == 0 {
        out.push_str("nothing here: no chapters, plans or rules archived yet\n");
    } else if answer.total == 0 {
        // The query is not echoed: the caller has it, and a password typed into a query
        // is a secret no rule can tell from a word.
        out.push_str("nothing matched the query: try other words\n");
    } else {
        for line in &answer.lines[..answer.packed.shown] {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str(&format!(
            "shown {} of {} matches, used {} of {} tokens\n",
            answer.packed.shown, answer.total, answer.packed.used, answer.packed.requested
        ));
    }
    Ok(text_result(out, false))
}

fn rules_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Value, String> {
    let task = args.string("task", true)?.unwrap_or_default();
    let session = args.string("session", false)?;
    let assembled = match rules_store::assemble(&AssembleRequest {
        workspace: ctx.workspace,
        dsh_home: ctx.dsh_home,
        config: ctx.config,
        identity: ctx.identity,
        harness: ctx.harness_id,
        session: session.as_deref(),
        include_session: session.is_some(),
        terms: Some(search::query_terms(&task)),
    }) {
        Ok(a) => a,
        Err(e) => return Ok(text_result(format!("rules could not be read: {e}"), true)),
    };
    // §7.8: the door names a missing project rather than answering a silent zero.
    let note = if assembled.linked {
        String::new()
    } else {
        format!(
            "note: no project pool is linked here — project {} resolves from {} ({}); project rules govern only a linked checkout (`chapters link`)\n",
            ctx.identity.project_key,
            ctx.identity.source.as_str(),
            ctx.identity.origin
        )
    };
    Ok(match assembled.block {
        Block::Rendered(r) => text_result(format!("{}{note}", r.text), false),
        Block::None => text_result(
            format!(
                "no rule governs this task on this machine ({} project rule(s) proposed and not approved here)\n{note}",
                assembled.proposed
            ),
            false,
        ),
        Block::Refused(refusal) => text_result(format!("{}\n{note}", refusal.message()), true),
    })
}

fn propose_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Value, String> {
    let category = args.string("category", true)?.unwrap_or_default();
    let text = args.string("text", true)?.unwrap_or_default();
    let rule = Rule::project(&ctx.identity.project_key, &category, &text)
        .map_err(|e| format!("chapters_rule_propose: {e}"))?;
    let outcome = (|| -> Result<(Rule, Written), String> {
        let store = Store::open(ctx.workspace).map_err(|e| e.to_string())?;
        let redactor = Redactor::new(&ctx.config.redaction_patterns).map_err(|e| e.to_string())?;
        let _lock = rules_store::lock(&store, ctx.config).map_err(|e| e.to_string())?;
        rules_store::write_rule(&store, ctx.workspace, &redactor, rule).map_err(|e| e.to_string())
    })();
    Ok(match outcome {
        Ok((rule, written)) => {
            let what = match written {
                Written::New => "proposed",
                Written::AlreadyHere => "already proposed here",
                Written::InThePool => "already proposed on another machine",
            };
            text_result(
                format!(
                    "{what}: {} ({}) — status proposed; it governs nothing until a person approves it on each machine (`chapters rule approve {} --by NAME`)\n",
                    rule.id, rule.category, rule.id
                ),
                false,
            )
        }
        Err(e) => text_result(format!("the rule was not written: {e}"), true),
    })
}

fn artifact_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Value, String> {
    let hash = args
        .string("hash", true)?
        .unwrap_or_default()
        .to_lowercase();
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "chapters_artifact: `hash` must be 64 hex digits (an artifact's SHA-256), got {hash:?}"
        ));
    }
    let budget = args
        .count("max_tokens")?
        .unwrap_or(DEFAULT_ARTIFACT_TOKENS)
        .clamp(1, MAX_ARTIFACT_TOKENS);
    let offset = args.count("offset")?.unwrap_or(0) as usize;
    let Some(path) = find_artifact(ctx, &hash) else {
        return Ok(text_result(
            format!("no artifact {hash} in this machine's store or the pool mirror (`chapters sync` brings in other machines' artifacts)"),
            true,
        ));
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            return Ok(text_result(
                format!("cannot read {}: {e}", path.display()),
                true,
            ))
        }
    };
    let total = text.chars().count();
    if offset > total {
        return Err(format!(
            "chapters_artifact: offset {offset} is past the artifact's end ({total} characters)"
        ));
    }
    let page_chars = (budget * 4) as usize;
    let page: String = text.chars().skip(offset).take(page_chars).collect();
    let end = offset + page.chars().count();
    let header = if offset == 0 && end == total {
        format!("artifact {hash} ({total} characters)\n")
    } else {
        format!(
            "artifact {hash}: characters {offset}–{end} of {total}{}\n",
            if end < total {
                format!("; call again with offset {end} for the rest")
            } else {
                String::new()
            }
        )
    };
    Ok(text_result(format!("{header}{page}"), false))
}

/// `<store>/<root>/artifacts/ab/<sha>.txt` (any root), then the mirror's
/// `artifacts/<projectKey>/ab/<sha>.txt`.
fn find_artifact(ctx: &McpContext<'_>, hash: &str) -> Option<std::path::PathBuf> {
    let rel = crate::render::artifact_path(hash);
    if let Ok(store) = Store::open(ctx.workspace) {
        for root in store.roots().unwrap_or_default() {
            let p = ctx.workspace.join(STORE_DIR).join(&root).join(&rel);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    let p = ctx
        .workspace
        .join(MIRROR_DIR)
        .join("artifacts")
        .join(&ctx.identity.project_key)
        .join(&hash[..2])
        .join(format!("{hash}.txt"));
    p.is_file().then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_a_known_version_and_offers_the_newest_otherwise() {
        let v = initialize(&json!({"protocolVersion": "2024-11-05"}));
        assert_eq!(v["protocolVersion"], "2024-11-05");
        let v = initialize(&json!({"protocolVersion": "1999-01-01"}));
        assert_eq!(v["protocolVersion"], PROTOCOL_VERSIONS[0]);
        assert!(v["capabilities"]["tools"].is_object());
    }

    #[test]
    fn every_tool_has_a_schema_with_its_required_fields() {
        let tools = tools();
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "chapters_search",
                "chapters_rules",
                "chapters_rule_propose",
                "chapters_artifact"
            ]
        );
        for t in tools.as_array().unwrap() {
            assert_eq!(t["inputSchema"]["type"], "object");
            for r in t["inputSchema"]["required"].as_array().unwrap() {
                assert!(t["inputSchema"]["properties"][r.as_str().unwrap()].is_object());
            }
        }
    }

    #[test]
    fn long_lines_are_bounded() {
        let big = vec![b'x'; MAX_LINE_BYTES + 100];
        let mut input = std::io::Cursor::new([big, b"\n{}\n".to_vec()].concat());
        let mut line = Vec::new();
        let n = read_bounded_line(&mut input, &mut line).unwrap();
        assert_eq!(n, MAX_LINE_BYTES + 101);
        assert_eq!(line.len(), MAX_LINE_BYTES + 1);
        line.clear();
        read_bounded_line(&mut input, &mut line).unwrap();
        assert_eq!(line, b"{}");
    }
}

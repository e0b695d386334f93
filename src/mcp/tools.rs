//! The five tools of `chapters mcp`: their schemas (`list`) and their calls (`call`). Each
//! returns `structuredContent` (matching its `outputSchema`) and the same answer as text.
//! A mistake in the arguments or a failure is a result with `isError` and a sentence the
//! model can act on; only an unknown tool or a malformed `tools/call` is a protocol fault.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::{Fault, McpContext, Workspace, INVALID_PARAMS};
use crate::catalog::cache::short_id;
use crate::catalog::query::{self, Parsed};
use crate::catalog::score;
use crate::redact::{Redacted, Redactor, Settings};
use crate::rules::block::Block;
use crate::rules::store::{self as rules_store, AssembleRequest, Written};
use crate::rules::Rule;
use crate::search;
use crate::store::Store;

/// A page's size when the call names none, in estimated tokens (`chapters_read`,
/// `chapters_artifact`).
const DEFAULT_PAGE_TOKENS: u64 = 2000;
/// The largest page one call returns.
const MAX_PAGE_TOKENS: u64 = 50_000;
/// Characters per estimated token (`render::estimated_tokens`).
const CHARS_PER_TOKEN: u64 = 4;

const TOOL_NAMES: &str =
    "chapters_search, chapters_read, chapters_rules, chapters_rule_propose and chapters_artifact";

fn string_prop(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn nullable(kind: &str) -> Value {
    json!({"type": [kind, "null"]})
}

/// `tools/list`'s result. A 2026-era list carries the cache hints that revision requires.
pub(super) fn list(modern: bool) -> Value {
    let mut v = json!({"tools": tools()});
    if modern {
        v["ttlMs"] = json!(0);
        v["cacheScope"] = json!("private");
    }
    v
}

fn tools() -> Value {
    let match_item = json!({
        "type": "object",
        "properties": {
            "id": string_prop("The document's id: give it to chapters_read."),
            "path": string_prop("The document's path in the workspace."),
            "title": {"type": "string"},
            "kind": {"type": "string"},
            "date": nullable("string"),
            "harness": {"type": "string"},
            "machine": {"type": "string"},
            "topics": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "number"},
            "snippet": nullable("string")
        },
        "required": ["id", "path", "title", "kind", "topics", "score"]
    });
    json!([
        {
            "name": "chapters_search",
            "title": "Search past work",
            "description": "Search this project's archived chapters, plans and rules (this machine's store, plus other machines' work when a pool is linked): titles and topics first, then the conversations' text — tool output, commands, file names, error codes. Returns whole result lines, most relevant first, within a token budget; each carries an id for chapters_read.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": string_prop("Words to look for; `\"a phrase\"`, `prefix*`, `-word` leaves documents with that word out. Optional when `topic` is given (then the topic's documents, newest first)."),
                    "topic": string_prop("Only documents carrying this topic (curation aliases followed)."),
                    "max_tokens": {"type": "integer", "minimum": 1, "description": "Token budget of the answer (default: the configured searchDefaultMaxTokens)."},
                    "kind": string_prop("Only documents of this kind: `chapter`, `plan`, `rule` or `artifact`."),
                    "harness": string_prop("Only documents of sessions of this agent (e.g. `dsh`)."),
                    "machine": string_prop("Only documents written on this machine (its harness id)."),
                    "session": string_prop("Only documents of this session (an id or its first characters)."),
                    "since": string_prop("Only documents dated at or after: `YYYY-MM-DD`, an RFC 3339 time, or `7d` / `12h` / `2w` ago."),
                    "until": string_prop("Only documents dated before (same forms as `since`)."),
                    "path": string_prop("Only documents whose signature names this file: its path in the workspace (absolute or relative) or its last parts (`csv.rs`)."),
                    "artifacts": {"type": "boolean", "description": "Also search artifacts (big tool outputs a chapter stored apart), kind `artifact`; off by default."}
                },
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "searched": string_prop("Which documents were searched (this machine only, or the pool too)."),
                    "door": {"type": "string", "enum": ["store", "pool-and-store"]},
                    "documents": {"type": "integer"},
                    "total": {"type": "integer", "description": "Matches, shown or not: every document holding all the query's words, plus those matching on a topic, title or summary only (all of those when at most 256 documents hold a query word in such a field; else a lower bound: then totalExact is false)."},
                    "totalExact": {"type": "boolean", "description": "Whether total counts every match; false when it is a lower bound (the text then says \"at least\")."},
                    "shown": {"type": "integer"},
                    "budget": {
                        "type": "object",
                        "properties": {"requested": {"type": "integer"}, "used": {"type": "integer"}, "remaining": {"type": "integer"}},
                        "required": ["requested", "used", "remaining"]
                    },
                    "empty": {"type": ["string", "null"], "enum": ["nothing-here", "nothing-matched", null]},
                    "matches": {"type": "array", "items": match_item},
                    "notes": {"type": "array", "items": {"type": "string"}}
                },
                "required": ["searched", "door", "documents", "total", "totalExact", "shown", "budget", "empty", "matches", "notes"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": "chapters_read",
            "title": "Read a chapter, plan or rule",
            "description": "One document by the id chapters_search gave (like `5151abcd/3`, `5151abcd/p1` for a plan) or by its path: a short header (title, date, harness, machine, session, topics) and its text, one page of at most max_tokens; a longer document returns nextCursor — call again with it for the next page.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": string_prop("The document's id from chapters_search, or its path (relative to the workspace, or absolute)."),
                    "path": string_prop("The document's path, instead of `id`."),
                    "max_tokens": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_TOKENS, "description": "Page size in estimated tokens (default 2000)."},
                    "cursor": string_prop("Where the page starts: the nextCursor of the previous page (default: the beginning).")
                },
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "path": {"type": "string"},
                    "title": {"type": "string"},
                    "kind": {"type": "string"},
                    "date": nullable("string"),
                    "harness": {"type": "string"},
                    "machine": {"type": "string"},
                    "session": nullable("string"),
                    "seqRange": {"type": ["array", "null"], "items": {"type": "integer"}},
                    "topics": {"type": "array", "items": {"type": "string"}},
                    "text": string_prop("This page of the document's body."),
                    "totalTokens": {"type": "integer", "description": "The whole body, in estimated tokens."},
                    "pageStartTokens": {"type": "integer"},
                    "pageTokens": {"type": "integer"},
                    "nextCursor": {"type": ["string", "null"], "description": "Pass as `cursor` for the next page; null on the last page."}
                },
                "required": ["id", "path", "title", "kind", "topics", "text", "totalTokens", "pageStartTokens", "pageTokens", "nextCursor"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": "chapters_rules",
            "title": "Rules for a task",
            "description": "The rules that apply to a task: project rules approved on this machine and, given a session, that session tree's rules — verbatim within the rules budget, with the count of any withheld.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "task": string_prop("What you are about to do."),
                    "session": string_prop("The current session id (adds its session rules).")
                },
                "required": ["task"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "text": string_prop("The rules block, verbatim (empty when no rule governs)."),
                    "governing": {"type": "boolean"},
                    "rules": {"type": "array", "items": {"type": "string"}, "description": "Ids of the rules shown."},
                    "withheld": {"type": "array", "items": {"type": "string"}, "description": "Ids of active rules over the display cap."},
                    "proposedNotApproved": {"type": "integer"},
                    "linked": {"type": "boolean", "description": "Whether a project pool is linked (project rules need one)."}
                },
                "required": ["text", "governing", "rules", "withheld", "proposedNotApproved", "linked"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": "chapters_rule_propose",
            "title": "Propose a project rule",
            "description": "Propose a project rule. It is written `proposed` and governs nothing until a person approves it on each machine.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "category": string_prop("Lowercase category name, e.g. `testing`."),
                    "text": string_prop("The rule, in words.")
                },
                "required": ["category", "text"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "category": {"type": "string"},
                    "status": {"type": "string", "enum": ["proposed"]},
                    "written": {"type": "string", "enum": ["new", "already-here", "in-the-pool"]}
                },
                "required": ["id", "category", "status", "written"]
            },
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        },
        {
            "name": "chapters_artifact",
            "title": "Read an artifact",
            "description": "The text of an artifact (an oversized tool result a chapter names by SHA-256), one page within a token budget; a longer artifact says where the next page starts.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "hash": string_prop("The artifact's SHA-256 (64 hex digits)."),
                    "max_tokens": {"type": "integer", "minimum": 1, "description": "Page size in estimated tokens (default 2000)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "First character of the page (default 0)."}
                },
                "required": ["hash"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "hash": {"type": "string"},
                    "text": {"type": "string"},
                    "offset": {"type": "integer"},
                    "end": {"type": "integer"},
                    "totalCharacters": {"type": "integer"},
                    "nextOffset": {"type": ["integer", "null"]}
                },
                "required": ["hash", "text", "offset", "end", "totalCharacters", "nextOffset"]
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }
    ])
}

/// What a tool answers: structured content and its text, or an error the model can act on.
/// An answer is `Redacted`: derived (`Redacted::derive_with`) from what the store's reader
/// read back or the rules passed, never formatted from raw text.
enum Answer {
    Done {
        text: Redacted<String>,
        structured: Redacted<Value>,
    },
    /// What went wrong, through the rules (`redact::echoed_text`): it may echo an argument.
    Failed(Redacted<String>),
}

impl Answer {
    /// Text and structured content derived together from one redacted value.
    fn of<T, A: Settings>(value: &Redacted<T>, with: &A, f: fn(&T, &A) -> (String, Value)) -> Self {
        let both = value.derive_with(with, f);
        Answer::Done {
            text: both.derive(|(text, _)| text.clone()),
            structured: both.derive(|(_, structured)| structured.clone()),
        }
    }

    fn into_result(self) -> Value {
        match self {
            Answer::Done { text, structured } => json!({
                "content": [{"type": "text", "text": text.get()}],
                "structuredContent": structured.get(),
                "isError": false,
            }),
            Answer::Failed(text) => json!({
                "content": [{"type": "text", "text": text.get()}],
                "isError": true,
            }),
        }
    }
}

/// Argument access with the tool named in every complaint.
struct Arguments<'a> {
    tool: &'a str,
    map: Map<String, Value>,
}

impl Arguments<'_> {
    /// The tool's own properties, from its input schema.
    fn check_names(&self, known: &[&str]) -> Result<(), String> {
        let unknown: Vec<&str> = self
            .map
            .keys()
            .map(String::as_str)
            .filter(|k| !known.contains(k))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(format!(
            "{}: unknown argument(s) {}; the arguments are {}",
            self.tool,
            unknown
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }

    fn string(&self, key: &str, required: bool) -> Result<Option<String>, String> {
        match self.map.get(key) {
            Some(Value::String(s)) => Ok(Some(s.clone())),
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => {
                Err(format!("{}: `{key}` is required (a string)", self.tool))
            }
            Some(other) => Err(format!(
                "{}: `{key}` must be a string, got {}",
                self.tool,
                shorten(&other.to_string())
            )),
        }
    }

    fn flag(&self, key: &str) -> Result<bool, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!(
                "{}: `{key}` must be true or false, got {}",
                self.tool,
                shorten(&other.to_string())
            )),
        }
    }

    fn count(&self, key: &str) -> Result<Option<u64>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                format!(
                    "{}: `{key}` must be a non-negative integer, got {}",
                    self.tool,
                    shorten(&v.to_string())
                )
            }),
        }
    }

    /// A page size: at least 1, at most [`MAX_PAGE_TOKENS`].
    fn page_tokens(&self, key: &str, default: u64) -> Result<u64, String> {
        match self.count(key)? {
            None => Ok(default),
            Some(0) => Err(format!("{}: `{key}` must be 1 or more", self.tool)),
            Some(n) => Ok(n.min(MAX_PAGE_TOKENS)),
        }
    }
}

/// A value quoted back in an error, through the rules first (so a cut cannot leave a
/// piece of a credential the rules would no longer know), then cut to a readable length.
/// The whole error goes through the rules again as it becomes `Answer::Failed`.
fn shorten(text: &str) -> String {
    let text = crate::redact::echo(text);
    if text.chars().count() <= 80 {
        return text;
    }
    let head: String = text.chars().take(80).collect();
    format!("{head}…")
}

/// Each tool's argument names, in the order its `inputSchema` lists them (a test holds the
/// two equal); `None` for a tool this server does not have.
fn known_arguments(tool: &str) -> Option<&'static [&'static str]> {
    Some(match tool {
        "chapters_search" => &[
            "query",
            "topic",
            "max_tokens",
            "kind",
            "harness",
            "machine",
            "session",
            "since",
            "until",
            "path",
            "artifacts",
        ],
        "chapters_read" => &["id", "path", "max_tokens", "cursor"],
        "chapters_rules" => &["task", "session"],
        "chapters_rule_propose" => &["category", "text"],
        "chapters_artifact" => &["hash", "max_tokens", "offset"],
        _ => return None,
    })
}

/// `tools/call`: an unknown tool or a malformed call is a protocol fault; anything the tool
/// itself finds wrong is a result with `isError`.
pub(super) fn call(ws: &Workspace<'_>, params: &Value) -> Result<Value, Fault> {
    let tool = params.get("name").and_then(Value::as_str).ok_or_else(|| {
        Fault::new(
            INVALID_PARAMS,
            format!("tools/call needs `name`: one of {TOOL_NAMES}"),
        )
    })?;
    let Some(known) = known_arguments(tool) else {
        return Err(Fault::new(
            INVALID_PARAMS,
            format!("unknown tool {tool:?}; the tools are {TOOL_NAMES}"),
        ));
    };
    let answer = (|| -> Result<Answer, String> {
        let map = match params.get("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(format!(
                    "{tool}: `arguments` must be an object, got {}",
                    shorten(&other.to_string())
                ))
            }
        };
        let ctx = match ws {
            Workspace::Ready(ctx) => ctx,
            Workspace::Unusable(reason) => return Err(format!("{tool}: {reason}")),
        };
        let args = Arguments { tool, map };
        args.check_names(known)?;
        match tool {
            "chapters_search" => search_tool(ctx, &args),
            "chapters_read" => read_tool(ctx, &args),
            "chapters_rules" => rules_tool(ctx, &args),
            "chapters_rule_propose" => propose_tool(ctx, &args),
            _ => artifact_tool(ctx, &args),
        }
    })();
    Ok(answer
        .unwrap_or_else(|text| Answer::Failed(crate::redact::echoed_text(&text)))
        .into_result())
}

fn lock_timeout(ctx: &McpContext<'_>) -> std::time::Duration {
    std::time::Duration::from_millis(ctx.config.writer_lock_timeout_ms)
}

fn search_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Answer, String> {
    let text = args.string("query", false)?.unwrap_or_default();
    let topic = args.string("topic", false)?;
    let query = Parsed::parse(&text);
    if query.is_empty() && topic.is_none() {
        return Err(format!(
            "chapters_search: the query {:?} has no word to look for (two or more letters or digits; `-word` only leaves words out): give `query` words, or `topic` to list one topic's documents",
            shorten(&text)
        ));
    }
    let mut notes = Vec::new();
    if query.dropped > 0 {
        notes.push(format!(
            "the query has more than {} terms; the first {} are used, {} left out",
            query::MAX_TERMS,
            query::MAX_TERMS,
            query.dropped
        ));
    }
    let budget = match args.count("max_tokens")? {
        None => ctx.config.search_default_max_tokens,
        Some(0) => return Err("chapters_search: `max_tokens` must be 1 or more".to_owned()),
        Some(n) => n,
    };
    let clock = (ctx.now_ms)();
    let when = |key: &str| -> Result<Option<i64>, String> {
        match args.string(key, false)? {
            None => Ok(None),
            Some(t) => query::parse_when(&t, clock).map(Some).ok_or_else(|| {
                format!(
                    "chapters_search: `{key}` {:?} is not a date: give YYYY-MM-DD, an RFC 3339 time, or 7d / 12h / 2w",
                    shorten(&t)
                )
            }),
        }
    };
    let (since_ms, until_ms) = (when("since")?, when("until")?);
    let corpus = search::open(
        ctx.workspace,
        &ctx.identity.project_key,
        false,
        lock_timeout(ctx),
    )
    .map_err(|e| format!("search failed: {e}"))?;
    notes.extend(corpus.notes.iter().cloned());
    notes.extend(
        corpus
            .unreadable
            .iter()
            .map(|u| format!("skipped unreadable document {}: {}", u.path, u.reason)),
    );
    // The topic as the index keys it: aliases followed to the canonical label.
    let topic = topic.map(|t| corpus.curation.canonical(&t).topic);
    let request = search::Request {
        query,
        topic,
        filters: search::Narrowing {
            kind: args.string("kind", false)?,
            harness: args.string("harness", false)?,
            machine: args.string("machine", false)?,
            session: args.string("session", false)?,
            since_ms,
            until_ms,
            // An absolute path inside the workspace is read as signatures keep it.
            path: args.string("path", false)?.map(|p| {
                crate::signature::Workspace::for_session(
                    &ctx.workspace.to_string_lossy(),
                    None,
                    &ctx.config.path_map,
                )
                .as_signed(&p)
            }),
            artifacts: args.flag("artifacts")?,
        },
    };
    let params = score::ScoreParams {
        curation: corpus.curation.clone(),
        core_rule_bonus: ctx.config.rules_core_bonus,
    };
    let now = score::day_start(clock);
    let answer = corpus
        .answer_packed(&request, &params, ctx.harness_id, now, budget)
        .map_err(|e| format!("search failed: {e}"))?;
    let searched = corpus.door.describe(corpus.documents, corpus.mirror_absent);
    if let Some(needed) = answer.packed.first_line_too_large {
        return Err(format!(
            "{searched}\nbudget too small: the best of {} matches is one line of {needed} tokens and max_tokens is {budget}; ask again with max_tokens {needed} or more (a line is never clipped)",
            answer.total_said()
        ));
    }
    let empty = if corpus.documents == 0 {
        Some("nothing-here")
    } else if answer.total == 0 {
        Some("nothing-matched")
    } else {
        None
    };
    let frame = SearchFrame {
        searched,
        door: corpus.door,
        documents: corpus.documents,
        empty,
        notes,
    };
    Ok(Answer::of(&answer, &frame, search_answer))
}

/// What a search answer says beside its matches: counts, the door, notes about the files.
struct SearchFrame {
    searched: String,
    door: search::Door,
    documents: u64,
    empty: Option<&'static str>,
    notes: Vec<String>,
}

impl Settings for SearchFrame {}

fn search_answer(answer: &search::PackedAnswer, frame: &SearchFrame) -> (String, Value) {
    let mut out = format!("{}\n", frame.searched);
    match frame.empty {
        Some("nothing-here") => {
            out.push_str("nothing here: no chapters, plans or rules archived yet\n")
        }
        // The query is not echoed: the caller has it, and a password typed into a query
        // is a secret no rule can tell from a word.
        Some(_) => {
            out.push_str("nothing matched the query: try other words, fewer filters, or `topic`\n")
        }
        None => {
            for line in &answer.lines[..answer.packed.shown] {
                out.push_str(line);
                out.push('\n');
            }
            out.push_str(&format!(
                "shown {} of {} matches, used {} of {} tokens\n",
                answer.packed.shown,
                answer.total_said(),
                answer.packed.used,
                answer.packed.requested
            ));
        }
    }
    for note in &frame.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    let matches: Vec<Value> = answer.hits[..answer.packed.shown]
        .iter()
        .map(|h| {
            let m = &h.doc.meta;
            json!({
                "id": h.id,
                "path": h.doc.path,
                "title": m.title,
                "kind": m.kind,
                "date": m.date.as_deref().filter(|d| crate::time::parse_rfc3339_ms(d).is_some()),
                "harness": h.harness,
                "machine": h.machine,
                "topics": m.topics,
                "score": h.score,
                "snippet": h.snippet,
            })
        })
        .collect();
    let structured = json!({
        "searched": frame.searched,
        "door": frame.door,
        "documents": frame.documents,
        "total": answer.total,
        "totalExact": answer.total_exact,
        "shown": answer.packed.shown,
        "budget": {"requested": answer.packed.requested, "used": answer.packed.used, "remaining": answer.packed.remaining},
        "empty": frame.empty,
        "matches": matches,
        "notes": frame.notes,
    });
    (out, structured)
}

/// `chapters_read`'s document key: an id, or a path made relative to the workspace.
fn document_key(workspace: &Path, given: &str) -> String {
    let p = Path::new(given);
    if p.is_absolute() {
        let rel = p
            .canonicalize()
            .ok()
            .zip(workspace.canonicalize().ok())
            .and_then(|(a, w)| a.strip_prefix(w).ok().map(Path::to_path_buf));
        if let Some(rel) = rel {
            return rel.to_string_lossy().into_owned();
        }
    }
    given.to_owned()
}

fn read_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Answer, String> {
    let given = match (args.string("id", false)?, args.string("path", false)?) {
        (Some(id), None) | (None, Some(id)) => id,
        (Some(_), Some(_)) => {
            return Err("chapters_read: give `id` or `path`, not both".to_owned());
        }
        (None, None) => {
            return Err("chapters_read: `id` is required: an id from chapters_search (like 5151abcd/3) or a document's path".to_owned());
        }
    };
    let budget = args.page_tokens("max_tokens", DEFAULT_PAGE_TOKENS)?;
    let start = match args.string("cursor", false)? {
        None => 0,
        Some(c) => c.parse::<usize>().map_err(|_| {
            format!(
                "chapters_read: cursor {:?} is not one this tool gave: pass a page's nextCursor unchanged, or leave `cursor` out to start at the beginning",
                shorten(&c)
            )
        })?,
    };
    let corpus = search::open(
        ctx.workspace,
        &ctx.identity.project_key,
        true,
        lock_timeout(ctx),
    )
    .map_err(|e| format!("chapters_read: the documents could not be read: {e}"))?;
    let found = corpus
        .find(&document_key(ctx.workspace, &given))
        .map_err(|e| format!("chapters_read: the documents could not be read: {e}"))?;
    let row = match found.as_slice() {
        [row] => row,
        [] => {
            return Err(format!(
                "chapters_read: no chapter, plan or rule {:?} here: give an id from chapters_search (like 5151abcd/3, or 5151abcd/p1 for a plan) or a document's path",
                shorten(&given)
            ))
        }
        many => {
            return Err(format!(
                "chapters_read: {:?} names {} documents ({}): give more of the session id, or the path",
                shorten(&given),
                many.len(),
                many.iter()
                    .map(|r| r.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    };
    let Some(body) = corpus
        .read_document(&row.path, false)
        .or_else(|| corpus.read_document(&row.path, true))
    else {
        return Err(format!("chapters_read: cannot read {}", row.path));
    };
    let total = body.chars().count();
    if start > total {
        return Err(format!(
            "chapters_read: cursor {start} is past the document's end; leave `cursor` out to start at the beginning"
        ));
    }
    let page = PageFrame {
        start,
        size: (budget * CHARS_PER_TOKEN) as usize,
    };
    Ok(Answer::of(&row.clone().zip(body), &page, read_answer))
}

/// Which page of a document a read shows.
struct PageFrame {
    start: usize,
    size: usize,
}

impl Settings for PageFrame {}

fn read_answer(
    (row, body): &(crate::catalog::cache::Row, String),
    page: &PageFrame,
) -> (String, Value) {
    let chars: Vec<char> = body.chars().collect();
    let (start, total) = (page.start, chars.len());
    let end = page_end(&chars, start, page.size);
    let text_of_page: String = chars[start..end].iter().collect();
    let next = (end < total).then(|| end.to_string());
    let id = short_id(&row.root, &row.name, &row.path);
    let tokens = |chars: usize| (chars as u64).div_ceil(CHARS_PER_TOKEN);
    let mut text = if start == 0 {
        format!("{}\n\n", search::document_header(row))
    } else {
        format!("{id} ({}), continued:\n", row.path)
    };
    text.push_str(&text_of_page);
    if let Some(cursor) = &next {
        if !text_of_page.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "[tokens {}–{} of {}; call chapters_read again with cursor \"{cursor}\" for the rest]\n",
            tokens(start),
            tokens(end),
            tokens(total)
        ));
    }
    let mut structured = search::document_fields(row);
    for (key, value) in [
        ("text", json!(text_of_page)),
        ("totalTokens", json!(tokens(total))),
        ("pageStartTokens", json!(tokens(start))),
        ("pageTokens", json!(tokens(end - start))),
        ("nextCursor", json!(next)),
    ] {
        structured.insert(key.to_owned(), value);
    }
    (text, Value::Object(structured))
}

/// Where a page of at most `size` characters from `start` ends: after the last newline in
/// its second half when there is one (whole lines read better), else at `size`.
fn page_end(chars: &[char], start: usize, size: usize) -> usize {
    let hard = (start + size.max(1)).min(chars.len());
    if hard == chars.len() {
        return hard;
    }
    let half = start + size / 2;
    (half..hard)
        .rev()
        .find(|&i| chars[i] == '\n')
        .map_or(hard, |i| i + 1)
}

fn rules_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Answer, String> {
    let task = args.string("task", true)?.unwrap_or_default();
    let session = args.string("session", false)?;
    let assembled = rules_store::assemble(&AssembleRequest {
        workspace: ctx.workspace,
        dsh_home: ctx.dsh_home,
        config: ctx.config,
        identity: ctx.identity,
        harness: ctx.harness_id,
        session: session.as_deref(),
        include_session: session.is_some(),
        terms: Some(score::query_terms(&task)),
        linked: crate::pool::link::is_linked(ctx.workspace)
            .map_err(|e| format!("rules could not be read: {e}"))?,
    })
    .map_err(|e| format!("rules could not be read: {e}"))?;
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
    if let Block::Refused(refusal) = assembled.block.get() {
        return Ok(Answer::Failed(crate::redact::echoed_text(&format!(
            "{}\n{note}",
            refusal.message()
        ))));
    }
    let frame = RulesFrame {
        note,
        proposed: assembled.proposed,
        linked: assembled.linked,
    };
    Ok(Answer::of(&assembled.block, &frame, rules_answer))
}

/// What a rules answer says beside the block: counts and the absent pool's note.
struct RulesFrame {
    note: String,
    proposed: usize,
    linked: bool,
}

impl Settings for RulesFrame {}

fn rules_answer(block: &Block, frame: &RulesFrame) -> (String, Value) {
    let structured = |text: &str, shown: Vec<String>, withheld: Vec<String>| {
        json!({
            "text": text,
            "governing": !shown.is_empty(),
            "rules": shown,
            "withheld": withheld,
            "proposedNotApproved": frame.proposed,
            "linked": frame.linked,
        })
    };
    let note = &frame.note;
    match block {
        Block::Rendered(r) => {
            let shown = [r.project.shown.clone(), r.session.shown.clone()].concat();
            let withheld = [r.project.withheld.clone(), r.session.withheld.clone()].concat();
            (
                format!("{}{note}", r.text),
                structured(&r.text, shown, withheld),
            )
        }
        // A refused block is answered as a failure before this.
        Block::None | Block::Refused(_) => (
            format!(
                "no rule governs this task on this machine ({} project rule(s) proposed and not approved here)\n{note}",
                frame.proposed
            ),
            structured("", Vec::new(), Vec::new()),
        ),
    }
}

fn propose_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Answer, String> {
    let category = args.string("category", true)?.unwrap_or_default();
    let text = args.string("text", true)?.unwrap_or_default();
    let rule = Rule::project(&ctx.identity.project_key, &category, &text)
        .map_err(|e| format!("chapters_rule_propose: {e}"))?;
    let (rule, written) = (|| -> Result<(Redacted<Rule>, Written), String> {
        let store = Store::open(ctx.workspace).map_err(|e| e.to_string())?;
        let redactor = Redactor::new(&ctx.config.redaction_patterns).map_err(|e| e.to_string())?;
        let rule = rule.redacted(&redactor).map_err(|e| e.to_string())?;
        let _lock = rules_store::lock(&store, ctx.config).map_err(|e| e.to_string())?;
        rules_store::write_rule(&store, ctx.workspace, rule).map_err(|e| e.to_string())
    })()
    .map_err(|e| format!("the rule was not written: {e}"))?;
    Ok(Answer::of(&rule, &written, propose_answer))
}

impl Settings for Written {}

fn propose_answer(rule: &Rule, written: &Written) -> (String, Value) {
    let (what, key) = match written {
        Written::New => ("proposed", "new"),
        Written::AlreadyHere => ("already proposed here", "already-here"),
        Written::InThePool => ("already proposed on another machine", "in-the-pool"),
    };
    (
        format!(
            "{what}: {} ({}) — status proposed; it governs nothing until a person approves it on each machine (`chapters rule approve {} --by NAME`)\n",
            rule.id, rule.category, rule.id
        ),
        json!({"id": rule.id, "category": rule.category, "status": "proposed", "written": key}),
    )
}

fn artifact_tool(ctx: &McpContext<'_>, args: &Arguments<'_>) -> Result<Answer, String> {
    let hash = args
        .string("hash", true)?
        .unwrap_or_default()
        .to_lowercase();
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "chapters_artifact: `hash` must be 64 hex digits (an artifact's SHA-256, as a chapter names it), got {:?}",
            shorten(&hash)
        ));
    }
    let budget = args.page_tokens("max_tokens", DEFAULT_PAGE_TOKENS)?;
    let offset = args.count("offset")?.unwrap_or(0) as usize;
    let corpus = search::open(
        ctx.workspace,
        &ctx.identity.project_key,
        true,
        lock_timeout(ctx),
    )
    .map_err(|e| format!("chapters_artifact: the store could not be read: {e}"))?;
    let Some(text) = corpus.read_artifact(&hash) else {
        return Err(format!("no artifact {hash} in this machine's store or the pool mirror (`chapters sync` brings in other machines' artifacts)"));
    };
    let total = text.chars().count();
    if offset > total {
        return Err(format!(
            "chapters_artifact: offset {offset} is past the artifact's end ({total} characters)"
        ));
    }
    let page = ArtifactPage {
        hash,
        offset,
        size: (budget * CHARS_PER_TOKEN) as usize,
    };
    Ok(Answer::of(&text, &page, artifact_answer))
}

/// Which page of which artifact (the hash was checked: 64 hex digits).
struct ArtifactPage {
    hash: String,
    offset: usize,
    size: usize,
}

impl Settings for ArtifactPage {}

#[allow(clippy::ptr_arg)] // `Redacted::derive_with` hands the value over as `&T`.
fn artifact_answer(text: &String, at: &ArtifactPage) -> (String, Value) {
    let (hash, offset) = (&at.hash, at.offset);
    let total = text.chars().count();
    let page: String = text.chars().skip(offset).take(at.size).collect();
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
    let structured = json!({
        "hash": hash,
        "text": page,
        "offset": offset,
        "end": end,
        "totalCharacters": total,
        "nextOffset": (end < total).then_some(end),
    });
    (format!("{header}{page}"), structured)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error result that quotes an argument quotes it through the rules: a credential
    /// pasted into a call's arguments is not shown back, whole or cut.
    #[test]
    fn a_failed_call_echoes_its_arguments_through_the_rules() {
        let key = "AKIAQ3EGUWZXJ4TPLM7N";
        let pad = "x".repeat(70);
        for arguments in [json!(format!("key {key}")), json!([format!("{pad} {key}")])] {
            let ws = Workspace::Unusable(format!("no project here ({key})"));
            let params = json!({"name": "chapters_search", "arguments": arguments});
            let Ok(result) = call(&ws, &params) else {
                panic!("an error result, not a fault")
            };
            assert_eq!(result["isError"], true, "{result}");
            let text = result["content"][0]["text"].as_str().expect("text");
            assert!(text.contains("`arguments` must be an object"), "{text}");
            assert!(!text.contains("AKIAQ3EG"), "{text}");
        }
        let ws = Workspace::Unusable(format!("cannot read {key}"));
        let Ok(result) = call(&ws, &json!({"name": "chapters_search", "arguments": {}})) else {
            panic!("an error result, not a fault")
        };
        let text = result["content"][0]["text"].as_str().expect("text");
        assert!(!text.to_ascii_uppercase().contains("AKIAQ3EG"), "{text}");
        assert!(text.contains("redacted"), "{text}");
    }

    /// The argument names a call is checked against are exactly the schema's properties.
    #[test]
    fn known_arguments_are_the_input_schemas_properties() {
        for t in tools().as_array().unwrap() {
            let name = t["name"].as_str().unwrap();
            let mut schema: Vec<&str> = t["inputSchema"]["properties"]
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .collect();
            let mut known = known_arguments(name).unwrap().to_vec();
            schema.sort_unstable();
            known.sort_unstable();
            assert_eq!(known, schema, "{name}");
        }
        assert!(known_arguments("chapters_nothing").is_none());
    }

    #[test]
    fn every_tool_has_a_title_and_both_schemas() {
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
                "chapters_read",
                "chapters_rules",
                "chapters_rule_propose",
                "chapters_artifact"
            ]
        );
        for t in tools.as_array().unwrap() {
            assert!(t["title"].is_string(), "{t}");
            for schema in ["inputSchema", "outputSchema"] {
                assert_eq!(t[schema]["type"], "object", "{t}");
                for r in t[schema]["required"].as_array().into_iter().flatten() {
                    assert!(
                        t[schema]["properties"][r.as_str().unwrap()].is_object(),
                        "{r} in {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn pages_end_on_a_line_when_one_is_near() {
        let chars: Vec<char> = "aaaa\nbbbb\ncccc".chars().collect();
        assert_eq!(
            page_end(&chars, 0, 8),
            5,
            "after the newline in the second half"
        );
        assert_eq!(page_end(&chars, 0, 3), 3, "no newline: the hard cut");
        assert_eq!(page_end(&chars, 5, 100), 14, "the rest");
        assert_eq!(page_end(&chars, 14, 8), 14);
    }
}

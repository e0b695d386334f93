//! `chapters mcp`: a Model Context Protocol server on stdio (shell). Newline-delimited
//! JSON-RPC 2.0, synchronous: one request in, one response out, in order.
//!
//! Both protocol eras, per request (the server keeps no session state):
//! - **2026-07-28** ([`MODERN_VERSIONS`]): no handshake; `server/discover` names the versions
//!   and capabilities, and every request carries its protocol version and the client's
//!   capabilities in `params._meta`. A version this server does not speak is error -32022
//!   with the supported versions in `data`. Every result carries `resultType` and the
//!   server's identity in `_meta`.
//! - **2025-11-25, 2025-06-18** and older ([`HANDSHAKE_VERSIONS`]): `initialize`, then plain
//!   requests.
//!
//! Five tools (`tools`): each a thin door over the library functions the CLI uses. A tool's
//! argument mistakes and failures are tool results with `isError` (the model reads and fixes
//! them); JSON-RPC errors are for protocol faults only (bad JSON, unknown method or tool,
//! an unsupported version).
//!
//! Built on serde_json rather than an SDK: the protocol surface a tools-only server needs
//! is small, and an SDK would bring an async runtime into a crate that has none. The
//! integration tests drive it with the official Python SDK's client in both eras.

mod tools;

use std::io::{self, BufRead, Write};
use std::path::Path;

use serde_json::{json, Map, Value};

use crate::config::Config;
use crate::identity::Identity;
use crate::store::STORE_DIR;

/// Per-request-envelope revisions this server speaks, newest first.
pub const MODERN_VERSIONS: &[&str] = &["2026-07-28"];
/// Revisions reached through the `initialize` handshake, newest first. A client asking for
/// another gets the newest, and may disconnect (the handshake's negotiation).
pub const HANDSHAKE_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// A request line longer than this is refused unread (a tool call is a few KiB).
const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// `_meta` keys of the 2026-07-28 envelope.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const UNSUPPORTED_VERSION: i64 = -32022;

const INSTRUCTIONS: &str = "Before a task, call chapters_rules with the task description and name the rules you follow. For earlier work, decisions or bug history, call chapters_search first, then chapters_read with a result's id to read it. chapters_artifact returns an oversized tool result by its hash.";

/// What the server answers from, resolved once at start.
pub struct McpContext<'a> {
    pub workspace: &'a Path,
    pub dsh_home: &'a Path,
    pub config: &'a Config,
    pub identity: &'a Identity,
    pub harness_id: &'a str,
    /// The clock, read per search (recency, `since`/`until`).
    pub now_ms: &'a dyn Fn() -> i64,
}

/// The workspace the server was started on.
pub enum Workspace<'a> {
    Ready(McpContext<'a>),
    /// No project to answer from (an editor started the server from `/`, a folder with no
    /// project, a workspace that cannot be read): the protocol is served, and every tool
    /// call answers this reason as an error result.
    Unusable(String),
}

/// Why `workspace` is no project to serve, if it is none: neither a git checkout nor a
/// folder with a chapters store. The reason names `--workspace`.
pub fn unusable_reason(workspace: &Path) -> Option<String> {
    if workspace.join(".git").exists() || workspace.join(STORE_DIR).is_dir() {
        return None;
    }
    let launched = if workspace == Path::new("/") {
        " (a client started this server from `/`)"
    } else {
        ""
    };
    Some(format!(
        "no project at {}{launched}: it is neither a git checkout nor a folder with a chapters store ({STORE_DIR}); register the server as `chapters mcp --workspace /path/to/project` (or run `chapters init` in this folder to make it one)",
        workspace.display()
    ))
}

/// The reason for a workspace that could not be opened at all.
pub fn unopened_reason(error: &str) -> String {
    format!("the workspace could not be opened: {error}; register the server as `chapters mcp --workspace /path/to/project`")
}

/// Serve until the input ends.
pub fn serve(ws: &Workspace<'_>, input: impl BufRead, mut output: impl Write) -> io::Result<()> {
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
                    let answers: Vec<Value> = batch.iter().filter_map(|m| handle(ws, m)).collect();
                    (!answers.is_empty()).then_some(Value::Array(answers))
                }
                Ok(message) => handle(ws, &message),
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

/// A JSON-RPC error: code, message, optional `data`.
struct Fault {
    code: i64,
    message: String,
    data: Option<Value>,
}

impl Fault {
    fn new(code: i64, message: impl Into<String>) -> Fault {
        Fault {
            code,
            message: message.into(),
            data: None,
        }
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn fault(id: Value, f: Fault) -> Value {
    let mut e = json!({"code": f.code, "message": f.message});
    if let Some(data) = f.data {
        e["data"] = data;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

/// Which era a request speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Era {
    /// `initialize`, and requests without the 2026 envelope.
    Handshake,
    /// A request carrying the 2026-07-28 envelope (or `server/discover`).
    Modern,
}

/// The era of one request, or the protocol fault its envelope is. `initialize` is always the
/// handshake (it does not exist at 2026 versions); the envelope's version key alone marks a
/// modern request, and then the envelope must be whole and its version one this server speaks.
fn era_of(method: &str, params: &Value) -> Result<Era, Fault> {
    if method == "initialize" {
        return Ok(Era::Handshake);
    }
    let meta = params.get("_meta");
    let Some(version) = meta.and_then(|m| m.get(VERSION_KEY)) else {
        // A discovery probe without an envelope is still answered as the 2026 method.
        return Ok(if method == "server/discover" {
            Era::Modern
        } else {
            Era::Handshake
        });
    };
    let Some(version) = version.as_str() else {
        return Err(Fault::new(
            INVALID_PARAMS,
            format!("params._meta[{VERSION_KEY:?}] must be a string, got {version}"),
        ));
    };
    if !MODERN_VERSIONS.contains(&version) {
        return Err(Fault {
            code: UNSUPPORTED_VERSION,
            message: format!(
                "unsupported protocol version {version:?}: this server speaks {} per request, and {} through initialize",
                MODERN_VERSIONS.join(", "),
                HANDSHAKE_VERSIONS.join(", ")
            ),
            data: Some(json!({"supported": MODERN_VERSIONS, "requested": version})),
        });
    }
    if meta.and_then(|m| m.get(CAPABILITIES_KEY)).is_none() {
        return Err(Fault::new(
            INVALID_PARAMS,
            format!("params._meta is missing the required envelope key {CAPABILITIES_KEY}"),
        ));
    }
    Ok(Era::Modern)
}

fn server_info() -> Value {
    json!({"name": "dsh-chapters", "title": "dsh-chapters", "version": env!("CARGO_PKG_VERSION")})
}

/// One message → its response; notifications and responses get none.
fn handle(ws: &Workspace<'_>, message: &Value) -> Option<Value> {
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
    if !(params.is_null() || params.is_object()) {
        return Some(error(
            id,
            INVALID_PARAMS,
            &format!("{method}: `params` must be an object"),
        ));
    }
    let era = match era_of(method, &params) {
        Ok(era) => era,
        Err(f) => return Some(fault(id, f)),
    };
    let answer = match method {
        "initialize" => Ok(initialize(ws, &params)),
        "server/discover" => Ok(discover(ws)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(tools::list(era == Era::Modern)),
        "tools/call" => tools::call(ws, &params),
        other => Err(Fault::new(
            METHOD_NOT_FOUND,
            format!("unknown method {other:?}; this server answers server/discover, initialize, ping, tools/list and tools/call"),
        )),
    };
    Some(match answer {
        Ok(mut value) => {
            if era == Era::Modern {
                stamp_modern(&mut value);
            }
            json!({"jsonrpc": "2.0", "id": id, "result": value})
        }
        Err(f) => fault(id, f),
    })
}

/// A 2026-era result: `resultType` and the server's identity in `_meta`.
fn stamp_modern(value: &mut Value) {
    if let Some(obj) = value.as_object_mut() {
        obj.entry("resultType").or_insert_with(|| json!("complete"));
        let meta = obj
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(SERVER_INFO_KEY.to_owned(), server_info());
        }
    }
}

fn instructions(ws: &Workspace<'_>) -> String {
    match ws {
        Workspace::Ready(_) => INSTRUCTIONS.to_owned(),
        Workspace::Unusable(reason) => format!("Not usable yet: {reason}. {INSTRUCTIONS}"),
    }
}

fn initialize(ws: &Workspace<'_>, params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| HANDSHAKE_VERSIONS.contains(v))
        .unwrap_or(HANDSHAKE_VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": server_info(),
        "instructions": instructions(ws),
    })
}

fn discover(ws: &Workspace<'_>) -> Value {
    json!({
        "supportedVersions": MODERN_VERSIONS,
        "capabilities": {"tools": {}},
        "instructions": instructions(ws),
        "ttlMs": 0,
        "cacheScope": "private",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern(version: &str) -> Value {
        json!({"_meta": {VERSION_KEY: version, CAPABILITIES_KEY: {}}})
    }

    fn ask(method: &str, params: Value) -> Value {
        let ws = Workspace::Unusable("no project here".to_owned());
        handle(
            &ws,
            &json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .expect("an answer")
    }

    #[test]
    fn negotiation_echoes_a_known_version_and_offers_the_newest_otherwise() {
        let ws = Workspace::Unusable("x".to_owned());
        let v = initialize(&ws, &json!({"protocolVersion": "2025-06-18"}));
        assert_eq!(v["protocolVersion"], "2025-06-18");
        let v = initialize(&ws, &json!({"protocolVersion": "2026-07-28"}));
        assert_eq!(
            v["protocolVersion"], "2025-11-25",
            "initialize is the handshake era"
        );
        let v = initialize(&ws, &json!({"protocolVersion": "1999-01-01"}));
        assert_eq!(v["protocolVersion"], HANDSHAKE_VERSIONS[0]);
        assert!(v["capabilities"]["tools"].is_object());
        assert!(v.get("resultType").is_none());
    }

    #[test]
    fn discover_and_every_modern_result_carry_result_type_and_server_info() {
        let d = ask("server/discover", modern("2026-07-28"));
        let r = &d["result"];
        assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["_meta"][SERVER_INFO_KEY]["name"], "dsh-chapters");
        assert!(r["capabilities"]["tools"].is_object());
        for method in ["ping", "tools/list"] {
            let v = ask(method, modern("2026-07-28"));
            assert_eq!(v["result"]["resultType"], "complete", "{method}: {v}");
        }
        let v = ask(
            "tools/call",
            json!({"name": "chapters_search", "arguments": {"query": "x"}, "_meta": {VERSION_KEY: "2026-07-28", CAPABILITIES_KEY: {}}}),
        );
        assert_eq!(v["result"]["resultType"], "complete", "{v}");
        assert_eq!(v["result"]["isError"], true, "no project here: {v}");
        // The handshake era's results stay as they were.
        assert_eq!(ask("ping", json!({}))["result"], json!({}));
    }

    #[test]
    fn an_unsupported_version_is_32022_naming_the_supported_ones() {
        let v = ask("tools/list", modern("2099-01-01"));
        assert_eq!(v["error"]["code"], -32022, "{v}");
        assert_eq!(v["error"]["data"]["supported"], json!(["2026-07-28"]));
        assert_eq!(v["error"]["data"]["requested"], "2099-01-01");
        // A handshake version is not spoken through the envelope.
        let v = ask("tools/list", modern("2025-06-18"));
        assert_eq!(v["error"]["code"], -32022, "{v}");
        // A half envelope is a protocol fault naming the missing key.
        let v = ask("tools/list", json!({"_meta": {VERSION_KEY: "2026-07-28"}}));
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains(CAPABILITIES_KEY));
        let v = ask("tools/list", json!({"_meta": {VERSION_KEY: 7}}));
        assert_eq!(v["error"]["code"], -32602, "{v}");
        // initialize stays the handshake even when stamped.
        let v = ask(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}, "_meta": {VERSION_KEY: "2099-01-01"}}),
        );
        assert_eq!(v["result"]["protocolVersion"], "2025-11-25", "{v}");
    }

    #[test]
    fn an_unusable_workspace_names_the_flag() {
        let tmp = tempfile::tempdir().unwrap();
        let reason = unusable_reason(tmp.path()).expect("an empty folder is no project");
        assert!(reason.contains("--workspace"), "{reason}");
        assert!(unusable_reason(Path::new("/"))
            .is_some_and(|r| r.contains("started this server from `/`")));
        std::fs::create_dir(tmp.path().join(".git")).unwrap();
        assert_eq!(unusable_reason(tmp.path()), None);
        let v = ask(
            "tools/call",
            json!({"name": "chapters_read", "arguments": {"id": "a/1"}}),
        );
        assert_eq!(v["result"]["isError"], true);
        assert!(v["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("no project here"));
        let init = ask("initialize", json!({"protocolVersion": "2025-11-25"}));
        assert!(init["result"]["instructions"]
            .as_str()
            .unwrap()
            .starts_with("Not usable yet: no project here"));
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

//! `chapters mcp` over a real child's stdio: initialize, tools/list, a call of each tool, a
//! bad call, and an overflowing rule set refused with numbers through `chapters_rules`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use dsh_chapters::session::writer::TurnSpec;
use serde_json::{json, Value};

use crate::support::{bash, link_private, two_task_turns, Sandbox};

const S1: &str = "session-71717171-1111-4111-8111-111111111111";

struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Client {
    fn start(sb: &Sandbox) -> Client {
        let mut child = sb
            .cmd(&["mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn chapters mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Client {
            child,
            stdin,
            stdout,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write");
        self.stdin.flush().expect("flush");
    }

    fn send_raw(&mut self, line: &str) -> Value {
        writeln!(self.stdin, "{line}").expect("write");
        self.stdin.flush().expect("flush");
        self.read()
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.read();
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["jsonrpc"], "2.0");
        answer
    }

    fn call(&mut self, tool: &str, arguments: Value) -> (String, bool) {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        let result = &answer["result"];
        assert!(result.is_object(), "{answer}");
        let text = result["content"][0]["text"]
            .as_str()
            .expect("text")
            .to_owned();
        (text, result["isError"].as_bool().expect("isError"))
    }

    fn close(mut self) {
        drop(self.stdin);
        let status = self.child.wait().expect("wait");
        assert!(
            status.success(),
            "the server exits cleanly when stdin closes"
        );
    }
}

fn initialized(sb: &Sandbox) -> Client {
    let mut c = Client::start(sb);
    let init = c.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "dsh-chapters");
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c
}

fn artifact_hash(sb: &Sandbox) -> String {
    sb.snapshot()
        .into_keys()
        .find(|k| k.contains("/artifacts/"))
        .and_then(|k| {
            k.rsplit('/')
                .next()
                .and_then(|n| n.strip_suffix(".txt"))
                .map(str::to_owned)
        })
        .expect("an artifact was written")
}

#[test]
fn a_client_lists_and_calls_every_tool() {
    let sb = Sandbox::new();
    let mut turns = two_task_turns(&sb.ws);
    let mut big = TurnSpec::new("Dump the whole generated schema please", "Here it is.");
    let body: String = (0..4000).map(|i| format!("column_{i} text\n")).collect();
    big.tool_calls = vec![bash(&sb.ws, "cat schema.sql", &body)];
    turns.push(big);
    sb.write_session(S1, 4, true, &turns);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let hash = artifact_hash(&sb);

    let mut c = initialized(&sb);
    let ping = c.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    let list = c.request("tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
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

    let (text, err) = c.call("chapters_search", json!({"query": "csv exporter"}));
    assert!(!err, "{text}");
    assert!(
        text.starts_with("searched this machine's store only"),
        "{text}"
    );
    assert!(
        text.lines().nth(1).expect("a result").contains("csv"),
        "{text}"
    );

    let (text, err) = c.call(
        "chapters_rule_propose",
        json!({"category": "testing", "text": "Every exporter change ships with a golden file."}),
    );
    assert!(!err, "{text}");
    assert!(
        text.starts_with("proposed: r-") && text.contains("status proposed"),
        "{text}"
    );
    let id = text["proposed: ".len()..]
        .split_whitespace()
        .next()
        .expect("id")
        .to_owned();
    // Proposed is inert: the rules door shows nothing governing, and names the missing pool.
    let (text, err) = c.call("chapters_rules", json!({"task": "change the csv exporter"}));
    assert!(!err, "{text}");
    assert!(
        text.contains("no rule governs") && text.contains("no project pool is linked"),
        "{text}"
    );
    assert_eq!(
        sb.json(&["rule", "view", &id, "--json"])["status"],
        "proposed",
        "the tool never approves"
    );

    let (text, err) = c.call(
        "chapters_artifact",
        json!({"hash": hash, "max_tokens": 100}),
    );
    assert!(!err, "{text}");
    assert!(
        text.starts_with(&format!("artifact {hash}: characters 0–400 of ")),
        "{text}"
    );
    assert!(
        text.contains("call again with offset 400") && text.contains("column_0 text"),
        "{text}"
    );
    let (text, err) = c.call("chapters_artifact", json!({"hash": "ab".repeat(32)}));
    assert!(err && text.starts_with("no artifact"), "{text}");

    // Bad calls get clear protocol errors.
    let bad = c.request(
        "tools/call",
        json!({"name": "chapters_nothing", "arguments": {}}),
    );
    assert_eq!(bad["error"]["code"], -32602);
    assert!(
        bad["error"]["message"]
            .as_str()
            .expect("message")
            .contains("unknown tool"),
        "{bad}"
    );
    let bad = c.request(
        "tools/call",
        json!({"name": "chapters_search", "arguments": {"query": 7}}),
    );
    assert_eq!(bad["error"]["code"], -32602);
    assert!(
        bad["error"]["message"]
            .as_str()
            .expect("m")
            .contains("`query` must be a string"),
        "{bad}"
    );
    let bad = c.request("resources/list", json!({}));
    assert_eq!(bad["error"]["code"], -32601);
    let garbled = c.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 9, \"method\": ");
    assert_eq!(garbled["error"]["code"], -32700);
    assert_eq!(garbled["id"], Value::Null);
    let not_rpc = c.send_raw("{\"id\": 10, \"method\": \"ping\"}");
    assert_eq!(not_rpc["error"]["code"], -32600);
    // Still serving after the bad ones.
    assert_eq!(c.request("ping", json!({}))["result"], json!({}));
    c.close();
}

#[test]
fn chapters_rules_refuses_an_overflowing_core_set_with_numbers() {
    let sb = Sandbox::new();
    let pool = sb.home.join("pool.git");
    sb.ok(&["init"]);
    link_private(&sb, &pool);
    for i in 0..8 {
        let text = format!(
            "Rule {i}: {}",
            "always check the widget invariants carefully. ".repeat(20)
        );
        let v = sb.json(&["rule", "add", "widgets", &text, "--json"]);
        sb.ok(&[
            "rule",
            "approve",
            v["id"].as_str().expect("id"),
            "--by",
            "Ana",
        ]);
    }
    let mut c = initialized(&sb);
    let (text, err) = c.call("chapters_rules", json!({"task": "check widget invariants"}));
    assert!(err, "{text}");
    assert!(
        text.starts_with("rules block refused")
            && text.contains("coreRulesBudgetTokens is 1200")
            && text.contains("per rule: r-"),
        "{text}"
    );
    c.close();
}

//! `chapters mcp` over a real child's stdio: initialize, tools/list, a call of each tool, a
//! bad call, and an overflowing rule set refused with numbers through `chapters_rules`; the
//! official Python SDK's client (`tests/it/mcp_client.py`) in both protocol eras; a server
//! started without a project.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use dsh_chapters::testkit::writer::TurnSpec;
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
    assert!(init["result"].get("resultType").is_none(), "{init}");
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
            "chapters_read",
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
    // A word only the artifact holds: found only when artifacts are asked for.
    let (text, err) = c.call("chapters_search", json!({"query": "column_3999"}));
    assert!(!err && text.contains("nothing matched"), "{text}");
    let (text, err) = c.call(
        "chapters_search",
        json!({"query": "column_3999", "artifacts": true}),
    );
    assert!(!err && text.contains(&hash), "{text}");
    let (text, err) = c.call(
        "chapters_search",
        json!({"query": "column_3999", "artifacts": "yes"}),
    );
    assert!(
        err && text.contains("`artifacts` must be true or false"),
        "{text}"
    );

    // An unknown tool is a protocol error; a mistake in the arguments is an error result
    // the model reads.
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
    let (text, err) = c.call("chapters_search", json!({"query": 7}));
    assert!(err && text.contains("`query` must be a string"), "{text}");
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

/// Run `tests/it/mcp_client.py ERA` (the official Python SDK's client, `mcp` 2.x) against the
/// built `chapters mcp` on `sb`'s workspace; its JSON report.
fn python_client(sb: &Sandbox, era: &str, query: &str, artifact: &str) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp_client.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script)
        .args([
            era,
            env!("CARGO_BIN_EXE_chapters"),
            &sb.ws_str(),
            query,
            artifact,
        ])
        .current_dir(&sb.ws)
        .env("DSH_HOME", &sb.home)
        .env("CHAPTERS_HARNESS_ID", &sb.harness);
    for (k, _) in std::env::vars() {
        if k.starts_with("CHAPTERS_") && k != "CHAPTERS_HARNESS_ID" {
            cmd.env_remove(k);
        }
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("python3 could not run ({e}); install it and the MCP SDK: pip install 'mcp==2.3.0'")
    });
    assert!(
        out.status.success(),
        "mcp_client.py {era} failed (is the SDK installed? pip install 'mcp==2.3.0'):\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("mcp_client.py printed no JSON ({e}): {stdout}"))
}

fn tool_names(report: &Value) -> Vec<&str> {
    report["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect()
}

#[test]
fn the_python_sdk_client_works_in_both_protocol_eras() {
    let sb = Sandbox::new();
    let mut turns = two_task_turns(&sb.ws);
    let mut long = TurnSpec::new(
        "Write the csv exporter's golden file with every column",
        "Golden file written.",
    );
    let body: String = (0..60)
        .map(|i| format!("csv column {i} goes into the golden file\n"))
        .collect();
    long.tool_calls = vec![bash(&sb.ws, "cat golden.csv", &body)];
    turns.push(long);
    let mut big = TurnSpec::new("Dump the whole generated schema please", "Here it is.");
    let dump: String = (0..4000).map(|i| format!("column_{i} text\n")).collect();
    big.tool_calls = vec![bash(&sb.ws, "cat schema.sql", &dump)];
    turns.push(big);
    sb.write_session(S1, 4, true, &turns);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let hash = artifact_hash(&sb);
    let all = [
        "chapters_search",
        "chapters_read",
        "chapters_rules",
        "chapters_rule_propose",
        "chapters_artifact",
    ];

    for era in ["modern", "legacy"] {
        let r = python_client(&sb, era, "csv exporter", &hash);
        let version = if era == "modern" {
            "2026-07-28"
        } else {
            "2025-11-25"
        };
        assert_eq!(r["protocolVersion"], version, "{era}: {r}");
        assert_eq!(r["serverName"], "dsh-chapters", "{era}: {r}");
        assert_eq!(tool_names(&r), all, "{era}");
        for t in r["tools"].as_array().expect("tools") {
            assert!(
                t["title"].is_string() && t["hasOutputSchema"] == true,
                "{era}: {t}"
            );
        }
        let search_props = &r["tools"][0]["inputProperties"];
        for filter in [
            "query", "topic", "kind", "harness", "machine", "session", "since", "until", "path",
        ] {
            assert!(
                search_props
                    .as_array()
                    .expect("props")
                    .contains(&json!(filter)),
                "{era}: {filter} in {search_props}"
            );
        }

        // A search: structured content (validated by the SDK against the output schema) and
        // the same answer as text.
        let s = &r["search"];
        assert_eq!(s["isError"], false, "{era}: {s}");
        assert_eq!(s["resultType"], "complete", "{era}: {s}");
        let st = &s["structured"];
        assert!(st["total"].as_u64().expect("total") >= 1, "{era}: {st}");
        let first = &st["matches"][0];
        assert!(
            first["title"].as_str().expect("title").contains("csv"),
            "{era}: {st}"
        );
        let id = first["id"].as_str().expect("id");
        assert!(
            s["text"].as_str().expect("text").contains(id),
            "{era}: the text copy names the id: {s}"
        );
        // A filter narrows (no plan here).
        assert_eq!(r["searchFiltered"]["structured"]["total"], 0, "{era}: {r}");

        // `query` is optional with `topic`; a `since` in the future is an empty answer.
        let topic = &r["topicOnly"];
        assert_eq!(topic["isError"], false, "{era}: {topic}");
        // The csv task is one chapter (its long turn merged in), the auth task another.
        assert_eq!(topic["structured"]["total"], 1, "{era}: {topic}");
        for m in topic["structured"]["matches"].as_array().expect("matches") {
            assert!(
                m["topics"]
                    .as_array()
                    .expect("topics")
                    .iter()
                    .any(|t| t == "csv"),
                "{era}: {m}"
            );
        }
        let future = &r["sinceFuture"];
        assert_eq!(future["isError"], false, "{era}: {future}");
        assert_eq!(
            future["structured"]["empty"], "nothing-matched",
            "{era}: {future}"
        );

        // Reading the first match, paged by tokens with a cursor.
        let read = &r["read"];
        assert_eq!(read["isError"], false, "{era}: {read}");
        assert_eq!(read["structured"]["id"], id, "{era}: {read}");
        assert!(
            read["text"]
                .as_str()
                .expect("text")
                .starts_with(&format!("# {}", first["title"].as_str().expect("t"))),
            "{era}: {read}"
        );
        let page = read["structured"]["pageTokens"].as_u64().expect("page");
        assert!(page <= 40 && page > 0, "{era}: {read}");
        let cursor = read["structured"]["nextCursor"]
            .as_str()
            .expect("a next page");
        let next = &r["readNext"];
        assert_eq!(next["isError"], false, "{era}: {next}");
        assert_eq!(
            next["structured"]["pageStartTokens"].as_u64(),
            Some(cursor.parse::<u64>().expect("cursor").div_ceil(4)),
            "{era}: {next}"
        );

        // The other tools answer structured content too.
        let rules = &r["rules"];
        assert_eq!(rules["isError"], false, "{era}: {rules}");
        assert_eq!(rules["structured"]["governing"], false, "{era}: {rules}");
        assert_eq!(rules["structured"]["linked"], false, "{era}: {rules}");
        let proposed = &r["propose"];
        let written: Vec<&Value> = proposed
            .as_array()
            .expect("proposals")
            .iter()
            .map(|p| &p["structured"]["written"])
            .collect();
        let first_write = if era == "modern" {
            "new"
        } else {
            "already-here"
        };
        assert_eq!(
            written,
            [&json!(first_write), &json!("already-here")],
            "{era}: {proposed}"
        );
        assert_eq!(proposed[0]["structured"]["status"], "proposed");
        let artifact = &r["artifact"]["structured"];
        assert_eq!(artifact["hash"], hash.as_str(), "{era}: {artifact}");
        assert_eq!(artifact["end"], 200, "{era}: {artifact}");
        assert_eq!(artifact["nextOffset"], 200, "{era}: {artifact}");

        // Mistakes in arguments: error results with a sentence to act on.
        let bad = r["badArguments"].as_array().expect("bad");
        let expect = [
            "`query` must be a string",
            "unknown argument(s) `querry`",
            "is not a date",
            "no chapter, plan or rule \"nothing/99\"",
            "`id` is required",
            "64 hex digits",
        ];
        assert_eq!(bad.len(), expect.len());
        for (b, want) in bad.iter().zip(expect) {
            assert_eq!(b["isError"], true, "{era}: {b}");
            assert!(
                b["text"].as_str().expect("text").contains(want),
                "{era}: {want:?} in {b}"
            );
        }
        // Hostile queries: an answer or an error result, never a protocol error.
        for b in r["badQueries"].as_array().expect("bad queries") {
            assert!(b.get("protocolError").is_none(), "{era}: {b}");
            assert!(b["isError"].is_boolean(), "{era}: {b}");
            if b["isError"] == true {
                assert!(
                    b["text"]
                        .as_str()
                        .expect("t")
                        .contains("no word to look for"),
                    "{era}: {b}"
                );
            }
        }
        let long_query = &r["badQueries"][0];
        assert_eq!(long_query["isError"], false, "{era}: {long_query}");
        assert!(
            long_query["text"]
                .as_str()
                .expect("t")
                .contains("the first 32 are used"),
            "{era}: {long_query}"
        );
        assert_eq!(
            r["badQueries"][2]["isError"], true,
            "a lone `-` has no word: {r}"
        );
        let fts_words = &r["badQueries"][7]["structured"];
        assert!(
            fts_words["total"].as_u64().expect("total") >= 1,
            "FTS syntax typed as words is read as words: {fts_words}"
        );
        assert_eq!(r["unknownTool"], -32602, "{era}: {r}");
    }

    // 2025-06-18, spoken by hand: the SDK's client offers only its newest handshake version.
    let r = python_client(&sb, "2025-06-18", "csv exporter", &hash);
    assert_eq!(r["protocolVersion"], "2025-06-18", "{r}");
    assert_eq!(tool_names(&r), all);
    assert_eq!(r["search"]["isError"], false, "{r}");
    assert!(r["search"]["structured"]["total"].as_u64().expect("total") >= 1);
    assert_eq!(r["unsupportedVersion"]["code"], -32022, "{r}");
    assert_eq!(
        r["unsupportedVersion"]["data"]["supported"],
        json!(["2026-07-28"])
    );
    assert_eq!(r["exit"], 0);
}

/// Start `chapters mcp ARGS` in `dir`, call one tool, close; (answer, stderr).
fn without_workspace(sb: &Sandbox, dir: &Path, args: &[&str]) -> (Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chapters"));
    cmd.arg("mcp")
        .args(args)
        .current_dir(dir)
        .env("DSH_HOME", &sb.home)
        .env("CHAPTERS_HARNESS_ID", &sb.harness)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn chapters mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let calls = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "chapters_search", "arguments": {"query": "csv"}}}),
    ];
    for c in &calls {
        writeln!(stdin, "{c}").expect("write");
    }
    drop(stdin);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("read");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read");
    assert!(child.wait().expect("wait").success());
    let answers: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(answers.len(), 2, "{stdout}");
    assert!(answers[0]["result"]["protocolVersion"].is_string());
    (answers[1].clone(), stderr)
}

#[test]
fn started_without_a_project_it_says_so_and_names_the_workspace_flag() {
    let sb = Sandbox::new();
    let empty = sb.home.join("not-a-project");
    std::fs::create_dir_all(&empty).expect("mkdir");
    for dir in [empty.as_path(), Path::new("/")] {
        let (answer, stderr) = without_workspace(&sb, dir, &[]);
        assert!(
            stderr.contains("no project at") && stderr.contains("--workspace"),
            "{}: {stderr}",
            dir.display()
        );
        let result = &answer["result"];
        assert_eq!(result["isError"], true, "{answer}");
        let text = result["content"][0]["text"].as_str().expect("text");
        assert!(
            text.contains("--workspace") && text.contains("no project at"),
            "{text}"
        );
    }
    assert!(
        !empty.join(dsh_chapters::store::STORE_DIR).exists(),
        "nothing is created"
    );
    // A --workspace that does not exist: served, and every tool says why.
    let gone = sb.home.join("gone");
    let (answer, stderr) =
        without_workspace(&sb, &sb.ws, &["--workspace", &gone.to_string_lossy()]);
    assert!(
        stderr.contains("could not be opened") && stderr.contains("--workspace"),
        "{stderr}"
    );
    assert_eq!(answer["result"]["isError"], true, "{answer}");
}

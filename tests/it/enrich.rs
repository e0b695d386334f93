//! Enrichment against a real HTTP server on loopback speaking the chat-completions API with
//! scripted answers: valid; invalid then valid; always invalid; slower than the timeout;
//! 500s. Plus an opt-in live test against `CHAPTERS_LIVE_ENDPOINT`.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sha2::Digest;

use crate::support::{link_private, two_task_turns, Sandbox};

#[derive(Clone)]
pub enum Reply {
    /// 200 with this completion text.
    Content(String),
    /// Sleep, then answer with this completion text.
    Slow(Duration, String),
    Status(u16),
}

pub struct Server {
    pub url: String,
    script: Arc<Mutex<VecDeque<Reply>>>,
    /// Every request: (headers, body).
    seen: Arc<Mutex<Vec<(String, String)>>>,
    /// The most requests ever in flight at once.
    max_in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

pub fn good(title: &str) -> Reply {
    Reply::Content(
        serde_json::json!({
            "title": title,
            "summary": "The expiry check compared seconds with milliseconds; fixed and tested.",
            "topics": ["Auth", "jwt refresh", "middleware"],
        })
        .to_string(),
    )
}

/// A chat-completions server on loopback. Replies are taken from the script in order; once
/// it is empty, `fallback` answers.
pub fn serve(script: Vec<Reply>, fallback: Reply) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let script = Arc::new(Mutex::new(VecDeque::from(script)));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s, v) = (script.clone(), seen.clone());
    let max_in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let max = max_in_flight.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let (s, v, fallback) = (s.clone(), v.clone(), fallback.clone());
            let (in_flight, max) = (in_flight.clone(), max.clone());
            std::thread::spawn(move || {
                use std::sync::atomic::Ordering::SeqCst;
                let now = in_flight.fetch_add(1, SeqCst) + 1;
                max.fetch_max(now, SeqCst);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        in_flight.fetch_sub(1, SeqCst);
                        return;
                    }
                    if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = n.trim().parse().unwrap();
                    }
                    head.push_str(&line);
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                v.lock()
                    .unwrap()
                    .push((head, String::from_utf8(body).unwrap()));
                let reply = s.lock().unwrap().pop_front().unwrap_or(fallback);
                let (status, content) = match reply {
                    Reply::Content(c) => (200, Some(c)),
                    Reply::Slow(d, c) => {
                        std::thread::sleep(d);
                        (200, Some(c))
                    }
                    Reply::Status(code) => (code, None),
                };
                let body = match content {
                    Some(c) => serde_json::json!({
                        "id": "x", "object": "chat.completion",
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": c}, "finish_reason": "stop"}],
                    })
                    .to_string(),
                    None => "{\"error\":\"scripted failure\"}".to_owned(),
                };
                let mut stream = stream;
                // Out of flight before the answer lands, so the next request is not counted
                // as overlapping this one.
                in_flight.fetch_sub(1, SeqCst);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    Server {
        url,
        script,
        seen,
        max_in_flight,
    }
}

fn archived(sb: &Sandbox) {
    sb.write_session("s-enrich", 4, true, &two_task_turns(&sb.ws));
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
}

fn point_at(sb: &Sandbox, server: &Server, model: &str) {
    sb.ok(&[
        "enrich",
        "model",
        "--endpoint",
        &server.url,
        "--model",
        model,
    ]);
}

/// Chapter files (not plans) with their bytes.
fn chapters(sb: &Sandbox) -> BTreeMap<String, String> {
    sb.snapshot()
        .into_iter()
        .filter(|(p, _)| p.contains("/chapters/") && !p.contains("/plan-"))
        .map(|(p, b)| (p, String::from_utf8(b).unwrap()))
        .collect()
}

fn body_sha(doc: &str) -> String {
    let body = dsh_chapters::render::body_text(doc).unwrap();
    hex(&sha2::Sha256::digest(body.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn frontmatter(doc: &str) -> serde_json::Value {
    let yaml = dsh_chapters::render::frontmatter_text(doc).unwrap();
    serde_saphyr::from_str(yaml).unwrap()
}

#[test]
fn valid_answers_annotate_model_owned_fields_and_never_touch_a_body() {
    let sb = Sandbox::new();
    archived(&sb);
    let before = chapters(&sb);
    assert!(before.len() >= 2);
    let plans_before: Vec<_> = sb
        .snapshot()
        .into_iter()
        .filter(|(p, _)| p.contains("/plan-"))
        .collect();
    let server = serve(vec![], good("Fix the refresh-token expiry check"));
    point_at(&sb, &server, "m1");
    // The search table is built before the annotation, so the update below is incremental.
    assert_eq!(
        sb.json(&["search", "middleware", "--json"])["empty"],
        serde_json::Value::Null
    );

    let report = sb.json(&["enrich", "run", "--json", "--limit", "50"]);
    assert_eq!(
        report["annotated"].as_array().unwrap().len(),
        before.len(),
        "{report}"
    );
    let after = chapters(&sb);
    for (path, doc) in &after {
        assert_eq!(
            body_sha(doc),
            body_sha(&before[path]),
            "{path}: the body changed"
        );
        let fm = frontmatter(doc);
        assert_eq!(fm["title"], "Fix the refresh-token expiry check");
        assert_eq!(
            fm["topics"],
            serde_json::json!(["auth", "jwt-refresh", "middleware"])
        );
        assert_eq!(fm["generated"]["title"]["by"], "model");
        assert_eq!(fm["generated"]["title"]["model"], "m1");
        assert_eq!(fm["generated"]["title"]["previousBy"], "deterministic");
        assert_eq!(fm["sha256"].as_str().unwrap(), body_sha(doc));
    }
    // Plans are never annotated.
    let plans_after: Vec<_> = sb
        .snapshot()
        .into_iter()
        .filter(|(p, _)| p.contains("/plan-"))
        .collect();
    assert_eq!(plans_before, plans_after);
    // One request in flight at a time (the target server is single-slot).
    assert_eq!(
        server
            .max_in_flight
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    // The request carried the cheap slice, not the whole chapter.
    let (_, body) = server.seen.lock().unwrap()[0].clone();
    let request: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(request["model"], "m1");
    assert!(request["messages"][1]["content"]
        .as_str()
        .unwrap()
        .contains("## Human request 1"));

    // Same model, same answer: nothing queued; forced, nothing changes.
    let calls = server.seen.lock().unwrap().len();
    let again = sb.json(&["enrich", "run", "--json"]);
    assert_eq!(again["queued"], 0);
    assert_eq!(
        server.seen.lock().unwrap().len(),
        calls,
        "no call for a done chapter"
    );
    let forced = sb.json(&["enrich", "run", "--json", "--all", "--limit", "50"]);
    assert_eq!(forced["unchanged"].as_u64().unwrap() as usize, before.len());
    assert_eq!(chapters(&sb), after);

    // A newer model overwrites model-owned fields only, and the provenance shows both.
    point_at(&sb, &server, "m2");
    server
        .script
        .lock()
        .unwrap()
        .push_back(good("A newer title for the expiry fix"));
    sb.ok(&["enrich", "run", "--limit", "1"]);
    let newer = chapters(&sb);
    let changed: Vec<_> = newer.iter().filter(|(p, d)| after[*p] != **d).collect();
    assert_eq!(changed.len(), 1);
    let fm = frontmatter(changed[0].1);
    assert_eq!(fm["title"], "A newer title for the expiry fix");
    // Search reads the re-annotated title.
    let found = sb.json(&["search", "newer", "--json"]);
    assert_eq!(found["total"], 1, "{found}");
    assert!(
        found["matches"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with(changed[0].0.rsplit('/').next().unwrap()),
        "{found}"
    );
    assert_eq!(fm["generated"]["summary"]["model"], "m2");
    assert_eq!(fm["generated"]["summary"]["previousModel"], "m1");
    assert_eq!(body_sha(changed[0].1), body_sha(&before[changed[0].0]));

    let status = sb.json(&["status", "--json"]);
    assert_eq!(
        status["enrichment"]["batches"]["annotated"]
            .as_u64()
            .unwrap() as usize,
        before.len() + 1
    );
}

#[test]
fn an_invalid_answer_is_retried_once_then_the_deterministic_values_stay() {
    let sb = Sandbox::new();
    archived(&sb);
    let before = chapters(&sb);
    // First chapter: invalid, then valid. Second: invalid twice.
    let server = serve(
        vec![
            Reply::Content("Sure! Here is the title you wanted.".into()),
            good("Fixed on the retry"),
            Reply::Content("{\"title\": \"\", \"summary\": \"s\", \"topics\": []}".into()),
            Reply::Content("{\"title\": 42}".into()),
        ],
        Reply::Status(500),
    );
    point_at(&sb, &server, "m1");
    let report = sb.json(&["enrich", "run", "--json", "--limit", "2"]);
    assert_eq!(report["annotated"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["invalid"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["retries"], 2);
    let after = chapters(&sb);
    let unchanged = after.iter().filter(|(p, d)| before[*p] == **d).count();
    assert_eq!(
        unchanged,
        before.len() - 1,
        "the twice-invalid chapter is byte-identical"
    );
    let status = sb.json(&["enrich", "report", "--json"]);
    assert_eq!(status["status"]["invalid"], 1);
    assert!(status["status"]["lastError"]
        .as_str()
        .unwrap()
        .contains("invalid answer twice"));
}

#[test]
fn a_slow_or_failing_endpoint_is_counted_backs_off_and_never_blanks_a_chapter() {
    let sb = Sandbox::new();
    archived(&sb);
    let before = chapters(&sb);

    let slow = serve(vec![], Reply::Slow(Duration::from_secs(3), "{}".into()));
    point_at(&sb, &slow, "m1");
    let out = sb
        .cmd(&["enrich", "run", "--json"])
        .env("CHAPTERS_ENRICHMENT_TIMEOUT_MS", "300")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["timeouts"], 1,
        "the batch stops at the first timeout: {report}"
    );
    assert_eq!(chapters(&sb), before);

    let failing = serve(vec![], Reply::Status(500));
    point_at(&sb, &failing, "m1");
    let out = sb.run(&["enrich", "run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("failed"));
    assert_eq!(chapters(&sb), before);
    let status = sb.json(&["status", "--json"]);
    let batches = &status["enrichment"]["batches"];
    assert_eq!(batches["timeouts"], 1);
    assert_eq!(batches["failed"], 1);
    assert_eq!(batches["consecutiveFailures"], 2);
    assert!(batches["backoffUntilMs"].as_i64().is_some());
    assert!(batches["lastError"].as_str().unwrap().contains("HTTP 500"));

    // Archiving is untouched by a dead endpoint, and a good batch clears the backoff.
    sb.ok(&["archive"]);
    let fixed = serve(vec![], good("Back"));
    point_at(&sb, &fixed, "m1");
    sb.ok(&["enrich", "run"]);
    let status = sb.json(&["enrich", "report", "--json"]);
    assert_eq!(status["status"]["consecutiveFailures"], 0);
    assert!(status["status"]["backoffUntilMs"].is_null());

    // Nothing listens: a connect failure, said plainly.
    let dead = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", dead.local_addr().unwrap());
    drop(dead);
    sb.ok(&["enrich", "model", "--endpoint", &url, "--model", "m1"]);
    let out = sb.run(&["enrich", "run", "--all"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn the_api_key_is_stored_0600_sent_as_a_bearer_and_never_printed() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new();
    archived(&sb);
    let server = serve(vec![], good("Keyed"));
    const KEY: &str = "sk-live-test-key-0123456789abcdef";
    let mut child = sb
        .cmd(&[
            "enrich",
            "model",
            "--endpoint",
            &server.url,
            "--model",
            "m1",
            "--key-stdin",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(KEY.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key_file = sb.home.join("dsh-chapters/credentials/enrichment-api-key");
    assert_eq!(
        std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let config = std::fs::read_to_string(sb.home.join("dsh-chapters/config.yml")).unwrap();
    assert!(!config.contains(KEY));

    let mut printed = String::from_utf8_lossy(&out.stdout).into_owned();
    for args in [
        &["enrich", "run"][..],
        &["enrich", "report"],
        &["enrich", "report", "--json"],
        &["status"],
        &["status", "--json"],
    ] {
        let out = sb.run(args);
        printed.push_str(&String::from_utf8_lossy(&out.stdout));
        printed.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    assert!(!printed.contains(KEY), "the key was printed");
    assert!(printed.contains("API key stored"));
    let (head, _) = server.seen.lock().unwrap()[0].clone();
    assert!(
        head.contains(&format!("Authorization: Bearer {KEY}")),
        "{head}"
    );
    let store_text = crate::support::text_of(&sb.snapshot());
    assert!(!store_text.contains(KEY));
}

#[test]
fn a_bad_endpoint_or_model_is_refused_and_the_config_kept() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    // `init` saved the harness id there; a refused model must leave the file as it was.
    let config = sb.home.join("dsh-chapters/config.yml");
    let before = std::fs::read(&config).expect("init wrote the home config");
    for (endpoint, model) in [
        ("https://api.example.com/v1?key=1", "m"),
        ("ftp://x", "m"),
        ("http://127.0.0.1:8080/v1", ""),
    ] {
        let out = sb.run(&["enrich", "model", "--endpoint", endpoint, "--model", model]);
        assert_eq!(out.status.code(), Some(1), "{endpoint} {model:?}");
    }
    assert_eq!(std::fs::read(&config).expect("config"), before);
    let out = sb.run(&["enrich", "run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("enrichmentEndpoint"));
}

#[test]
fn an_annotated_chapter_replaces_its_earlier_copy_in_the_pool() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    archived(&a);
    link_private(&a, &pool);
    a.ok(&["sync"]);
    let server = serve(vec![], good("Annotated before the second sync"));
    point_at(&a, &server, "m1");
    a.ok(&["enrich", "run", "--limit", "50"]);
    let report = a.json(&["sync", "--json"]);
    assert!(
        report["report"]["refused"].as_array().unwrap().is_empty(),
        "{report}"
    );

    let b = Sandbox::machine("machine-b");
    b.ok(&["init"]);
    link_private(&b, &pool);
    b.ok(&["sync"]);
    let mirrored = crate::pool::mirror_documents(&b, "chapters/");
    let annotated = mirrored
        .iter()
        .filter(|(p, d)| !p.contains("/plan-") && d.contains("Annotated before the second sync"))
        .count();
    assert_eq!(annotated, chapters(&a).len());
}

/// `chapters enrich run` killed with SIGKILL at different points of a batch (waiting for
/// the model, staging, publishing): every chapter file is its old bytes or a complete new
/// version, the store stays readable, and the next run finishes exactly what was left.
#[test]
fn a_batch_killed_mid_way_leaves_every_chapter_old_or_new_and_the_next_run_finishes() {
    let sb = Sandbox::new();
    let turns: Vec<_> =
        dsh_chapters::testkit::writer::generate_session(7, 40, 1_500, 4, &sb.ws_str()).collect();
    sb.write_session("s-crash", 4, true, &turns);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);
    let before = chapters(&sb);
    assert!(before.len() >= 8, "{} chapters", before.len());
    // Every answer differs, so each round rewrites chapters the previous one annotated.
    let script = (0..2_000)
        .map(|n| {
            let text = serde_json::json!({
                "title": format!("Take {n} of the crash-safe title"),
                "summary": "Annotated while the batch could be killed.",
                "topics": ["crash"],
            })
            .to_string();
            Reply::Slow(Duration::from_millis(25), text)
        })
        .collect();
    let server = serve(script, Reply::Status(500));
    point_at(&sb, &server, "m1");
    let new_or_old = |when: &str| {
        let now = chapters(&sb);
        assert_eq!(
            now.keys().filter(|p| !p.contains("/.")).collect::<Vec<_>>(),
            before.keys().collect::<Vec<_>>(),
            "{when}: the same chapter files"
        );
        let mut annotated = 0;
        for (path, old) in &before {
            let doc = &now[path];
            assert_eq!(body_sha(doc), body_sha(old), "{when}: {path}'s body");
            if doc != old {
                let fm = frontmatter(doc);
                assert!(
                    fm["title"]
                        .as_str()
                        .unwrap()
                        .ends_with("of the crash-safe title"),
                    "{when}: {path} is neither old nor new: {doc}"
                );
                assert_eq!(fm["generated"]["title"]["model"], "m1", "{when}: {path}");
                annotated += 1;
            }
        }
        annotated
    };
    let mut killed_mid_batch = 0;
    for round in 0..6u64 {
        let asked = server.seen.lock().unwrap().len();
        let mut child = sb
            .cmd(&["enrich", "run", "--all", "--limit", "1000"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // A few chapters in, then somewhere inside one chapter's answer and rewrite.
        while server.seen.lock().unwrap().len() < asked + 3 + round as usize {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(round * 6));
        child.kill().unwrap();
        let status = child.wait().unwrap();
        if status.code().is_none() {
            killed_mid_batch += 1;
        }
        let annotated = new_or_old(&format!("after kill {round}"));
        assert!(
            annotated >= 1,
            "round {round}: some chapters were annotated"
        );
        // Readable: status, the enrichment status file and search, as the kill left them.
        sb.ok(&["status", "--json"]);
        sb.ok(&["enrich", "report", "--json"]);
        sb.ok(&["search", "crash", "--json"]);
    }
    assert!(
        killed_mid_batch >= 5,
        "the batches were killed, not finished"
    );

    let waiting = chapters(&sb)
        .values()
        .filter(|doc| frontmatter(doc)["generated"]["title"]["model"] != "m1")
        .count();
    let report = sb.json(&["enrich", "run", "--json", "--limit", "1000"]);
    assert_eq!(
        report["queued"].as_u64().unwrap() as usize,
        waiting,
        "{report}"
    );
    assert_eq!(
        report["annotated"].as_array().unwrap().len(),
        waiting,
        "{report}"
    );
    assert_eq!(new_or_old("after the clean run"), before.len());
    // No temp file outlives the next holder of the lock.
    let leftovers: Vec<_> = sb
        .snapshot()
        .into_keys()
        .filter(|p| p.contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let again = sb.json(&["enrich", "run", "--json"]);
    assert_eq!(again["queued"], 0, "{again}");
}

/// Opt-in: a real endpoint named by `CHAPTERS_LIVE_ENDPOINT` (and `CHAPTERS_LIVE_MODEL`).
#[test]
fn live_endpoint_when_one_is_named() {
    let Ok(endpoint) = std::env::var("CHAPTERS_LIVE_ENDPOINT") else {
        eprintln!("skipped: set CHAPTERS_LIVE_ENDPOINT (and CHAPTERS_LIVE_MODEL) to run enrichment against a real model");
        return;
    };
    let model = std::env::var("CHAPTERS_LIVE_MODEL").unwrap_or_else(|_| "default".into());
    let sb = Sandbox::new();
    archived(&sb);
    let before = chapters(&sb);
    sb.ok(&[
        "enrich",
        "model",
        "--endpoint",
        &endpoint,
        "--model",
        &model,
    ]);
    let report = sb.json(&["enrich", "run", "--json", "--limit", "1"]);
    eprintln!("live report: {report}");
    for (path, doc) in chapters(&sb) {
        assert_eq!(body_sha(&doc), body_sha(&before[&path]));
    }
}

fn with_rules(title: &str, rules: serde_json::Value) -> Reply {
    Reply::Content(
        serde_json::json!({
            "title": title,
            "summary": "Fixed the expiry check.",
            "topics": ["auth"],
            "rules": rules,
        })
        .to_string(),
    )
}

/// Session rule files in the store: (id, frontmatter).
fn session_rules(sb: &Sandbox) -> Vec<(String, serde_json::Value)> {
    sb.snapshot()
        .into_iter()
        .filter(|(p, _)| p.contains("rules/s-"))
        .map(|(p, b)| (p, frontmatter(&String::from_utf8(b).unwrap())))
        .collect()
}

#[test]
fn mined_rules_become_session_rules_labelled_capped_and_never_published() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("pool.git");
    let sb = Sandbox::new();
    archived(&sb);
    link_private(&sb, &pool);
    // The human said "Fix the refresh token middleware expiry bug" — a `stated` claim of
    // words nobody said is relabelled `inferred`; four candidates, a cap of three written
    // (the duplicate does not count against it).
    let server = serve(
        vec![with_rules(
            "Mined",
            serde_json::json!([
                {"text": "Fix the refresh token middleware expiry bug", "label": "stated", "category": "auth"},
                {"text": "Always run cargo test -p auth first", "label": "stated", "category": "testing"},
                {"text": "Fix the refresh token middleware expiry bug", "label": "stated", "category": "auth"},
                {"text": "Keep diffs small", "label": "inferred"},
                {"text": "A fourth rule that the cap keeps out", "label": "inferred"},
            ]),
        )],
        good("Plain"),
    );
    point_at(&sb, &server, "m1");
    let report = sb.json(&["enrich", "run", "--json", "--limit", "1"]);
    let mined = report["rulesMined"].as_array().unwrap();
    assert_eq!(mined.len(), 3, "{report}");
    let rules = session_rules(&sb);
    assert_eq!(rules.len(), 3);
    let label_of = |text: &str| {
        rules
            .iter()
            .find(|(_, fm)| fm["title"].as_str().unwrap().starts_with(text))
            .map(|(_, fm)| fm["minedLabel"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(label_of("Fix the refresh token"), "stated");
    assert_eq!(label_of("Always run cargo test"), "inferred");
    assert_eq!(label_of("Keep diffs small"), "inferred");
    for (_, fm) in &rules {
        assert_eq!(fm["derivedFrom"], "model");
        assert_eq!(fm["scope"], "session");
        assert_eq!(fm["status"], "active");
        assert!(fm["minedFrom"].as_str().unwrap().ends_with(".md"));
    }

    // They govern the session tree on arrival (rulesAutoActivate), with their warrant.
    let active = sb.ok(&["rule", "active", "--session", "s-enrich"]);
    assert!(
        active.contains("Always run cargo test -p auth first"),
        "{active}"
    );
    assert!(active.contains("inferred by a model from"), "{active}");
    assert!(active.contains("stated by you in"), "{active}");

    // Never staged to the pool.
    sb.ok(&["sync"]);
    let tree = std::process::Command::new("git")
        .args([
            "-C",
            pool.to_str().unwrap(),
            "ls-tree",
            "-r",
            "--name-only",
            "main",
        ])
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&tree.stdout);
    assert!(tree.contains("chapters/"), "{tree}");
    assert!(
        !tree
            .lines()
            .any(|l| l.starts_with("rules/") && l.contains("/s-")),
        "a session rule reached the pool:\n{tree}"
    );
}

#[test]
fn review_only_mined_rules_wait_for_a_person() {
    let sb = Sandbox::new();
    archived(&sb);
    let server = serve(
        vec![with_rules(
            "Mined",
            serde_json::json!([{"text": "Prefer tracing over println", "label": "inferred", "category": "logging"}]),
        )],
        good("Plain"),
    );
    point_at(&sb, &server, "m1");
    let out = sb
        .cmd(&["enrich", "run", "--json", "--limit", "1"])
        .env("CHAPTERS_RULES_AUTO_ACTIVATE", "false")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rules = session_rules(&sb);
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].1["reviewOnly"], true);
    let id = rules[0].1["id"].as_str().unwrap().to_owned();
    let view = sb.json(&["rule", "view", &id, "--json"]);
    assert_eq!(view["status"], "review-only");
    let active = sb.ok(&["rule", "active", "--session", "s-enrich"]);
    assert!(!active.contains("Prefer tracing"), "{active}");
    // A person approves it; then it governs.
    sb.ok(&["rule", "approve", &id, "--by", "Ana"]);
    assert_eq!(
        sb.json(&["rule", "view", &id, "--json"])["status"],
        "active"
    );
    let active = sb.ok(&["rule", "active", "--session", "s-enrich"]);
    assert!(active.contains("Prefer tracing"), "{active}");
}

#[test]
fn a_dedicated_rules_model_mines_in_its_own_call() {
    let sb = Sandbox::new();
    archived(&sb);
    let server = serve(
        vec![
            good("Annotated"),
            Reply::Content(
                serde_json::json!({"rules": [{"text": "Run clippy before pushing", "label": "inferred"}]})
                    .to_string(),
            ),
        ],
        good("Plain"),
    );
    point_at(&sb, &server, "m1");
    let out = sb
        .cmd(&["enrich", "run", "--json", "--limit", "1"])
        .env("CHAPTERS_RULES_MODEL", "miner-7b")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = server.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    let first: serde_json::Value = serde_json::from_str(&seen[0].1).unwrap();
    let second: serde_json::Value = serde_json::from_str(&seen[1].1).unwrap();
    assert_eq!(first["model"], "m1");
    assert!(!first["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("standing orders"));
    assert_eq!(second["model"], "miner-7b");
    assert_eq!(session_rules(&sb).len(), 1);
}

#[test]
fn rule_conflicts_spends_one_call_and_only_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let pool = tmp.path().join("pool.git");
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    link_private(&sb, &pool);
    let mut ids = Vec::new();
    for text in [
        "Always run the full test suite before a commit.",
        "Never run the full test suite; run only the changed crate.",
        "Use tracing for logs.",
    ] {
        let out = sb.json(&["rule", "add", "testing", text, "--json"]);
        let id = out["id"].as_str().unwrap().to_owned();
        sb.ok(&["rule", "approve", &id, "--by", "Ana"]);
        ids.push(id);
    }
    let before = sb.snapshot();
    let server = serve(
        vec![
            Reply::Content("not a report".into()),
            Reply::Content(
                serde_json::json!({"conflicts": [{"a": ids[1], "b": ids[0], "why": "always vs never"}]})
                    .to_string(),
            ),
        ],
        Reply::Status(500),
    );
    point_at(&sb, &server, "m1");
    let report = sb.json(&["rule", "conflicts", "--json"]);
    assert_eq!(report["checked"], 3, "{report}");
    let pairs = report["conflicts"].as_array().unwrap();
    assert_eq!(pairs.len(), 1);
    let (a, b) = if ids[0] < ids[1] {
        (&ids[0], &ids[1])
    } else {
        (&ids[1], &ids[0])
    };
    assert_eq!(pairs[0]["a"], a.as_str());
    assert_eq!(pairs[0]["b"], b.as_str());
    assert_eq!(
        server.seen.lock().unwrap().len(),
        2,
        "one call and one retry"
    );
    // Report-only: not a byte of the store changed.
    assert_eq!(sb.snapshot(), before);
    // A failing route refuses and says so.
    let out = sb.run(&["rule", "conflicts"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 500"));
}

const TLS_SERVER: &str = r#"
import http.server, json, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        json.loads(body)
        with open(sys.argv[3], "a") as seen:
            seen.write(self.headers.get("Authorization", "") + "\n")
        content = json.dumps({"title": "Annotated over TLS", "summary": "Done.", "topics": ["tls"]})
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = ctx.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A hosted provider speaks https: a real TLS server on loopback (Python's, with a certificate
/// made here by openssl), reached through curl, the key in a 0600 file curl reads, never argv.
#[test]
fn an_https_endpoint_is_reached_through_curl_with_the_key_off_the_command_line() {
    use std::io::BufRead as _;
    let sb = Sandbox::new();
    archived(&sb);
    let tls = tempfile::tempdir().unwrap();
    let (cert, key_pem) = (tls.path().join("cert.pem"), tls.path().join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key_pem)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (install it: the test makes a certificate)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let script = tls.path().join("server.py");
    std::fs::write(&script, TLS_SERVER).unwrap();
    let seen = tls.path().join("seen.txt");
    let mut server = std::process::Command::new("python3")
        .arg(&script)
        .arg(&cert)
        .arg(&key_pem)
        .arg(&seen)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut port = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let url = format!("https://127.0.0.1:{}/v1", port.trim());

    const KEY: &str = "sk-hosted-provider-key-0123456789";
    let mut child = sb
        .cmd(&[
            "enrich",
            "model",
            "--endpoint",
            &url,
            "--model",
            "hosted",
            "--key-stdin",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(KEY.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    let scratch = tempfile::tempdir().unwrap();
    let before = chapters(&sb);
    let out = sb
        .cmd(&["enrich", "run", "--json", "--limit", "50"])
        .env("CURL_CA_BUNDLE", &cert)
        .env("TMPDIR", scratch.path())
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["annotated"].as_array().unwrap().len(),
        before.len(),
        "{report}"
    );
    for (path, doc) in chapters(&sb) {
        assert!(doc.contains("Annotated over TLS"));
        assert_eq!(body_sha(&doc), body_sha(&before[&path]));
    }
    let headers = std::fs::read_to_string(&seen).unwrap();
    assert!(
        headers.lines().all(|l| l == format!("Bearer {KEY}")),
        "{headers}"
    );
    // The config file curl read (with the key) is gone.
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
    assert!(!String::from_utf8_lossy(&out.stderr).contains(KEY));

    // The server gone: the failure is counted and said, nothing is blanked.
    let out = sb.run(&["enrich", "run", "--all", "--limit", "1"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn the_report_says_whether_enrichment_runs_not_only_the_switch() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    let report = sb.json(&["enrich", "report", "--json"]);
    assert_eq!(report["endpoint"], serde_json::Value::Null, "{report}");
    assert_eq!(
        report["active"], false,
        "no endpoint: nothing runs ({report})"
    );
    sb.ok(&[
        "enrich",
        "model",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
    ]);
    let report = sb.json(&["enrich", "report", "--json"]);
    assert_eq!(
        (report["enabled"].clone(), report["active"].clone()),
        (serde_json::json!(true), serde_json::json!(true)),
        "{report}"
    );
}

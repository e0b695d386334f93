//! Errors said the jj way (issue #19 point 4): a `--json` failure's `hint` is filled where the
//! CLI has one (hints live in one place, `src/cli/hint.rs`), and no message carries Rust
//! syntax. The chain-said-once walk over every module error is a unit test beside the hints
//! (`cli::hint::tests`), since the renderer is the binary's.

use std::path::Path;

use crate::support::{two_task_turns, Sandbox};

const S1: &str = "session-11111111-1111-4111-8111-111111111111";

fn json_failure(sb: &Sandbox, args: &[&str]) -> serde_json::Value {
    let out = sb.run(args);
    assert_ne!(out.status.code(), Some(0), "{args:?} succeeded");
    serde_json::from_slice(&out.stdout).expect("one JSON document on stdout")
}

#[test]
fn a_json_failure_carries_a_hint_where_the_cli_has_one() {
    let sb = Sandbox::new();
    sb.write_session(S1, 4, true, &two_task_turns(&sb.ws));

    // Not enabled: run init.
    let doc = json_failure(&sb, &["archive", "--json"]);
    let hint = doc["error"]["hint"].as_str().expect("a hint");
    assert!(hint.contains("chapters init"), "{doc}");

    // A usage error: the subcommand's help.
    let doc = json_failure(&sb, &["status", "--json", "--no-such-flag"]);
    assert_eq!(doc["error"]["code"], "usage");
    assert!(
        doc["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("chapters status --help")),
        "{doc}"
    );

    // A directory where the config file should be: the I/O error's kind says what to do,
    // on stderr once (the message did not say it) and in the JSON.
    sb.ok(&["init"]);
    std::fs::create_dir_all(sb.ws.join(".dsh-chapters/config.yml")).expect("a directory");
    let out = sb.run(&["status", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let hint = doc["error"]["hint"].as_str().expect("a hint");
    assert!(hint.contains("directory"), "{doc}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches(hint).count(), 1, "{stderr}");
}

/// Format strings of messages a person reads: every `#[error(...)]`, and the first literal of
/// `bail!`, `anyhow!` and `.context(` in `src/` outside test modules.
fn messages() -> Vec<(String, usize, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    crate::cycles::sources(&root.join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("read");
        let text = match text.find("#[cfg(test)]\nmod tests") {
            Some(at) => &text[..at],
            None => &text[..],
        };
        let rel = f
            .strip_prefix(root)
            .expect("under the crate")
            .display()
            .to_string();
        for opener in ["#[error(\"", "bail!(\"", "anyhow!(\"", ".context(\""] {
            let mut from = 0;
            while let Some(at) = text[from..].find(opener) {
                let start = from + at + opener.len();
                // The literal runs to the first unescaped quote.
                let mut end = start;
                let bytes = text.as_bytes();
                while end < bytes.len() && !(bytes[end] == b'"' && bytes[end - 1] != b'\\') {
                    end += 1;
                }
                let line = text[..start].matches('\n').count() + 1;
                out.push((rel.clone(), line, text[start..end].to_owned()));
                from = end;
            }
        }
    }
    out
}

/// Placeholders shown with `{name:?}`: each names a string or a path, quoted (with its
/// escapes) as the safe way to show a name someone else chose — never an enum, an `Option`
/// or a collection.
const QUOTED: &[&str] = &[
    "0", "id", "name", "key", "path", "category", "existing", "harness", "refname", "this",
    "writer", "url",
];

#[test]
fn no_message_holds_rust_syntax() {
    let found = messages();
    assert!(
        found.len() > 150,
        "the reader found only {} messages",
        found.len()
    );
    let mut bad = Vec::new();
    for (file, line, msg) in &found {
        for syntax in ["Some(", "Ok(", "Err(", "None"] {
            if msg.contains(syntax) {
                bad.push(format!("{file}:{line}: {syntax} in {msg:?}"));
            }
        }
        let mut rest = msg.as_str();
        while let Some(at) = rest.find(":?}") {
            let open = rest[..at].rfind('{').map_or(0, |o| o + 1);
            let name = &rest[open..at];
            if !QUOTED.contains(&name) {
                bad.push(format!(
                    "{file}:{line}: {{{name}:?}} prints Rust's Debug form in {msg:?}"
                ));
            }
            rest = &rest[at + 3..];
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

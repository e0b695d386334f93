//! The source-shape line: the pure core takes bytes, a clock value and ids and returns
//! values — no filesystem, clock, environment or process. This test reads the sources.

const PURE: &[&str] = &[
    "src/session/event.rs",
    "src/session/cwdkey.rs",
    "src/session/normalize.rs",
    "src/turn.rs",
    "src/signature.rs",
    "src/signature/paths.rs",
    "src/signature/shell.rs",
    "src/compose.rs",
    "src/injection.rs",
    "src/redact/mod.rs",
    "src/redact/rules.rs",
    "src/render/mod.rs",
    "src/render/body.rs",
    "src/render/markdown.rs",
    "src/render/yaml.rs",
    "src/render/frontmatter.rs",
    "src/time.rs",
    "src/pool/plan.rs",
    "src/catalog/score.rs",
    "src/topics/shard.rs",
    "src/topics/vocab.rs",
    "src/catalog/query.rs",
    "src/curation/mod.rs",
    "src/enrich/slice.rs",
    "src/enrich/answer.rs",
    "src/render/annotate.rs",
    "src/rules/mod.rs",
    "src/rules/block.rs",
    "src/rules/notice.rs",
    "src/rules/conflicts.rs",
    "src/daemon/triggers.rs",
];

const SHELL_ONLY: &[&str] = &[
    "std::fs",
    "std::env",
    "std::process",
    "std::net",
    "SystemTime",
    "Instant::now",
    "File::",
    "Command::new",
    "tokio::",
];

#[test]
fn the_pure_core_does_no_io() {
    let root = env!("CARGO_MANIFEST_DIR");
    for file in PURE {
        let text = std::fs::read_to_string(format!("{root}/{file}"))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        // Unit tests may use temp files; the code above them may not.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for needle in SHELL_ONLY {
            assert!(
                !code.contains(needle),
                "{file} uses `{needle}`: the pure core does no I/O — move it to the shell"
            );
        }
    }
}

#[test]
fn only_the_redactor_builds_redacted_values() {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/src/redact/mod.rs")).expect("redact");
    assert!(
        text.contains("pub struct Redacted<T>(T);"),
        "Redacted's field must stay private"
    );
    assert!(
        !text.contains("impl<T> From<T> for Redacted"),
        "no From: the chokepoint is the only door"
    );
}

/// The modules `lib.rs` builds only for tests and benchmarks (`testkit` feature).
fn test_only_modules(lib: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut gated = false;
    for line in lib.lines() {
        let line = line.trim();
        if line == "#[cfg(any(test, feature = \"testkit\"))]" {
            gated = true;
        } else if let Some(name) = line
            .strip_prefix("pub mod ")
            .and_then(|l| l.strip_suffix(';'))
        {
            if gated {
                out.push(name.to_owned());
            }
            gated = false;
        }
    }
    out
}

/// What only the test kit's generators are called.
const GENERATOR_NAMES: &[&str] = &[
    "testkit",
    "LogWriter",
    "SessionScript",
    "TurnSpec",
    "realshape",
    "labelled_session",
    "demo_session",
];

/// Every code line (comments emptied, unit tests cut) of every file under `src/` that `skip`
/// does not refuse (given the path under `src/`), with `src/<file>:<line>`.
fn for_each_product_line(
    skip: impl Fn(&std::path::Path) -> bool,
    mut each: impl FnMut(&str, &str),
) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    crate::cycles::sources(&root.join("src"), &mut files);
    files.sort();
    for file in &files {
        let rel = file.strip_prefix(root.join("src")).expect("under src");
        if skip(rel) {
            continue;
        }
        let code = crate::cycles::code(&std::fs::read_to_string(file).expect("read"));
        for (n, line) in code.lines().enumerate() {
            each(&format!("src/{}:{}", rel.display(), n + 1), line);
        }
    }
}

/// One writer: outside `store` (and the test kit) no module of the product reaches the store
/// catalog's recording functions — a document is written, re-annotated or removed through a
/// `Store` method, which records it (`docs/architecture.md`, "The store's catalog").
#[test]
fn only_the_store_records_in_its_catalog() {
    let mut named = Vec::new();
    for_each_product_line(
        |rel| rel.starts_with("store") || rel.starts_with("testkit"),
        |at, line| {
            let writer = line.contains("catalog::")
                && (line.contains("Writer") || line.contains("Presence"));
            if writer || line.contains("Presence::") {
                named.push(format!("{at}: {}", line.trim()));
            }
        },
    );
    assert!(
        named.is_empty(),
        "a module outside `store` records in the store's catalog (give the write a `Store` method):\n{}",
        named.join("\n")
    );
}

/// Lines of product code outside `store` (and the test kit, and `skip_also`) that write a
/// file (`writes`) from what `source` says a line yields — on that line, or through a `let`
/// binding of it earlier in the same function; a call split over lines is read with its
/// next two.
fn writes_from(skip_also: &[&str], source: impl Fn(&str) -> bool, writes: &[&str]) -> Vec<String> {
    let is_fn = |line: &str| {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        t.starts_with("fn ") || t.starts_with("async fn ")
    };
    let names = |line: &str, name: &str| {
        line.match_indices(name).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = line[at + name.len()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    };
    let mut lines: Vec<(String, String)> = Vec::new();
    for_each_product_line(
        |rel| {
            rel.starts_with("store")
                || rel.starts_with("testkit")
                || skip_also.iter().any(|s| rel == std::path::Path::new(s))
        },
        |at, line| lines.push((at.to_owned(), line.to_owned())),
    );
    let mut named = Vec::new();
    // The names bound to such a value in the function being read.
    let mut bound: Vec<String> = Vec::new();
    for (i, (at, line)) in lines.iter().enumerate() {
        if is_fn(line) {
            bound.clear();
        }
        if let Some(rest) = line.trim_start().strip_prefix("let ") {
            if source(line) {
                let rest = rest.strip_prefix("mut ").unwrap_or(rest);
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    bound.push(name);
                }
            }
        }
        if !writes.iter().any(|w| calls(line, w)) {
            continue;
        }
        let call: String = lines[i..(i + 3).min(lines.len())]
            .iter()
            .map(|(_, l)| l.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        if source(&call) || bound.iter().any(|b| names(&call, b)) {
            named.push(format!("{at}: {}", line.trim()));
        }
    }
    named
}

/// Whether `line` holds `write`; a function's call (`name(`) only as a free function's, not a
/// method's or a longer name's.
fn calls(line: &str, write: &str) -> bool {
    let bare = write
        .strip_suffix('(')
        .is_some_and(|n| n.chars().all(|c| c.is_alphanumeric() || c == '_'));
    if !bare {
        return line.contains(write);
    }
    line.match_indices(write).any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
    })
}

const FILE_WRITES: &[&str] = &["write_atomic", "write_new", "fs::write(", "File::create("];

/// The free functions of the product outside `store` (and the test kit) that write a file
/// themselves, each as its call (`name(`): a path handed to such a writer in another module
/// is written as surely as one written in place. A name defined twice is left out (its calls
/// cannot be told apart); so is a write to a path made from the mirror's git directory
/// (`git_dir(…)`, the sync's own markers).
fn file_writers(writes: &[&str]) -> Vec<String> {
    let mut bodies: Vec<(String, bool)> = Vec::new();
    let mut git_paths: Vec<String> = Vec::new();
    for_each_product_line(
        |rel| rel.starts_with("store") || rel.starts_with("testkit"),
        |_, line| {
            let t = line.trim_start();
            let t = ["pub(crate) ", "pub(super) ", "pub "]
                .iter()
                .find_map(|p| t.strip_prefix(p))
                .unwrap_or(t);
            if let Some(rest) = t.strip_prefix("fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                // A method's calls (`x.name(`) are not followed.
                let call = if line.contains("self") {
                    String::new()
                } else {
                    format!("{name}(")
                };
                bodies.push((call, false));
                git_paths.clear();
            } else if let Some((_, writes_here)) = bodies.last_mut() {
                if let Some(rest) = t.strip_prefix("let ").filter(|_| line.contains("git_dir(")) {
                    let rest = rest.strip_prefix("mut ").unwrap_or(rest);
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    git_paths.push(name);
                }
                let to_git = line.contains("git_dir(")
                    || git_paths.iter().any(|p| line.contains(&format!("&{p}")));
                *writes_here |= !to_git && writes.iter().any(|w| line.contains(w));
            }
        },
    );
    let defined = |call: &str| bodies.iter().filter(|(c, _)| c == call).count();
    let mut writers: Vec<String> = bodies
        .iter()
        .filter(|(call, writes)| *writes && !call.is_empty() && defined(call) == 1)
        .map(|(call, _)| call.clone())
        .collect();
    writers.sort();
    writers.dedup();
    writers
}

/// The mirror's copies behind `Store`: outside `store` (and the test kit) no function of the
/// product writes a file with bytes it read from a pool object (`read_blob`, `read_blob_from`,
/// or the reader's `pulled_blob`) — the sync hands them to `Store::mirror_writes` /
/// `Store::mirror_write_outs`, which write them and record the received documents. The check
/// follows a `let` binding of such bytes to a file write in the same function.
#[test]
fn only_the_store_writes_the_pools_bytes_into_the_mirror() {
    const READS: &[&str] = &[".read_blob(", ".read_blob_from(", ".pulled_blob("];
    let named = writes_from(
        &["git.rs"],
        |line| READS.iter().any(|r| line.contains(r)),
        FILE_WRITES,
    );
    assert!(
        named.is_empty(),
        "a module outside `store` writes a pool object's bytes to a file (give the write to `Store::mirror_writes`):\n{}",
        named.join("\n")
    );
}

/// Every file of the mirror's work tree (`.dsh-knowledge/`) is written by `Store`: the
/// topic index, the vocabulary and the landing pages this machine publishes too — the sync's
/// copy-in writes them from the commit through `Store::mirror_writes` like another machine's
/// — so outside `store` no function writes (a file write, or the index's writers
/// `topics::build::apply` / `write_index_file` / `write_if_changed`) to a path made from the
/// mirror's directory (`mirror_dir.join(…)`, `MIRROR_DIR).join(…)`); its git directory
/// (`git_dir(mirror_dir)`: markers, manifests, cursors) is the sync's own.
#[test]
fn only_the_store_writes_files_into_the_mirror() {
    let mirror_path = |line: &str| {
        !line.contains("git_dir(")
            && ["mirror_dir.join(", "MIRROR_DIR).join(", ".join(MIRROR_DIR)"]
                .iter()
                .any(|p| line.contains(p))
    };
    let mut writes = FILE_WRITES.to_vec();
    writes.extend(["build::apply(", "write_index_file(", "write_if_changed("]);
    let writers = file_writers(&writes);
    writes.extend(writers.iter().map(String::as_str));
    let named = writes_from(&[], mirror_path, &writes);
    assert!(
        named.is_empty(),
        "a module outside `store` writes a file into the mirror (give the write to a `Store` method, e.g. the sync's copy-in `Store::mirror_writes`):\n{}",
        named.join("\n")
    );
}

/// The shipped program holds no generator: the session writer, the real-shape and labelled
/// generators and the demo's session are the `testkit` module, built behind the `testkit`
/// feature (off by default; the tests and benchmarks turn it on through a dev-dependency on
/// this crate), and no module of the product names them (the demo embeds a recorded log).
#[test]
fn the_shipped_program_names_no_generator() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("lib.rs");
    let test_only = test_only_modules(&lib);
    assert!(
        test_only.iter().any(|m| m == "testkit"),
        "lib.rs must declare `testkit` behind #[cfg(any(test, feature = \"testkit\"))]: {test_only:?}"
    );
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    assert!(manifest.contains("\n[features]\n"), "no [features] table");
    assert!(
        manifest.contains("\ntestkit = []\n"),
        "no `testkit` feature"
    );
    assert!(
        !manifest
            .lines()
            .any(|l| l.starts_with("default") && l.contains("testkit")),
        "the testkit must stay off by default"
    );
    assert!(
        manifest.contains("dsh-chapters = { path = \".\", features = [\"testkit\"] }"),
        "the tests and benchmarks turn the testkit on through a dev-dependency on this crate"
    );
    let mut named = Vec::new();
    for_each_product_line(
        |rel| {
            let top = rel
                .components()
                .next()
                .map(|c| {
                    c.as_os_str()
                        .to_string_lossy()
                        .trim_end_matches(".rs")
                        .to_owned()
                })
                .unwrap_or_default();
            rel == std::path::Path::new("lib.rs") || test_only.contains(&top)
        },
        |at, line| {
            for name in GENERATOR_NAMES {
                if line.contains(name) {
                    named.push(format!("{at}: {name}"));
                }
            }
        },
    );
    assert!(
        named.is_empty(),
        "the product names a generator (keep generators in src/testkit/):\n{}",
        named.join("\n")
    );
}

#[test]
fn the_test_only_modules_are_read_from_lib_rs() {
    let lib = "pub mod a;\n#[cfg(any(test, feature = \"testkit\"))]\npub mod kit;\npub mod b;\n";
    assert_eq!(test_only_modules(lib), ["kit"]);
}

/// The frames of a zstd log, each decoded.
fn frames(mut bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let len = zstd::zstd_safe::find_frame_compressed_size(bytes).expect("a whole frame");
        let (frame, rest) = bytes.split_at(len);
        let text = zstd::stream::decode_all(frame).expect("decodes");
        out.push(String::from_utf8(text).expect("UTF-8"));
        bytes = rest;
    }
    out
}

/// The demo's embedded log is the generator's, frame for frame, with the demo's workspace in
/// place of the one it was recorded for. When the demo session changes, record it again:
/// `testkit::demo_session::write` for `RECORDED_WORKSPACE` into `src/demo/session.v4.jsonl.zst`.
#[test]
fn the_demo_writes_the_generators_log_for_its_workspace() {
    use dsh_chapters::testkit::demo_session;
    let tmp = tempfile::tempdir().expect("tmp");
    let setup = dsh_chapters::demo::prepare(&tmp.path().join("demo")).expect("prepare");
    let ws = setup.workspace.to_string_lossy().into_owned();
    assert_ne!(ws, demo_session::RECORDED_WORKSPACE);
    let generated = tmp.path().join("generated.jsonl.zst");
    demo_session::write(&generated, &ws).expect("generate");
    let want = frames(&std::fs::read(&generated).expect("read generated"));
    let got = frames(&std::fs::read(&setup.log).expect("read the demo's log"));
    assert_eq!(want.len(), 7, "a header frame and one per turn");
    assert_eq!(
        got, want,
        "the recorded demo log differs from the generator's: record it again"
    );
    assert!(got[0].contains(&format!("\"cwd\":\"{ws}\"")), "{}", got[0]);
}

/// Names only one harness's own code uses: its module, its variant, its reader, its switch.
const HARNESS_NAMES: &[&str] = &[
    "claude_code",
    "codex::",
    "Harness::ClaudeCode",
    "Harness::Codex",
    "ClaudeReader",
    "CodexReader",
    "PlanCache",
    "\"claude-code\"",
    "\"codex\"",
    "claudeCodeSessions",
    "codexSessions",
];

fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Issue 15's seam: a harness is its folder under `src/source/` (discovery, reader, screen,
/// tool vocabulary) and its line in `source::tree_harnesses`; nothing after the seam — the
/// daemon, the archive, status, config — names one (comments and tests aside), so a fourth
/// touches one folder (and `config/defaults.yml` for its on/off switch).
#[test]
fn no_code_outside_the_source_folder_names_a_harness() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let source = root.join("src/source");
    let testkit = root.join("src/testkit");
    let mut found = Vec::new();
    for file in files
        .iter()
        .filter(|f| !f.starts_with(&source) && !f.starts_with(&testkit))
    {
        let text = std::fs::read_to_string(file).expect("a source file");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            let code_part = line.split(" // ").next().unwrap_or(line);
            for name in HARNESS_NAMES {
                if code_part.contains(name) {
                    found.push(format!(
                        "{}:{}: {name}",
                        file.strip_prefix(root).unwrap_or(file).display(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "code outside src/source/ names a harness (move it behind source::TreeHarness):\n{}",
        found.join("\n")
    );
    // The registry names each harness once.
    let registry = std::fs::read_to_string(source.join("mod.rs")).expect("source/mod.rs");
    assert!(registry.contains("pub fn tree_harnesses()"));
}

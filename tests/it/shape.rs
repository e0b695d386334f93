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
    "src/time.rs",
    "src/pool/plan.rs",
    "src/search/mod.rs",
    "src/search/query.rs",
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

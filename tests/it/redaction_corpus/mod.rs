//! Recall and precision of the built-in redaction rules (issue #13, point 2), measured on the
//! generated corpus in `cases.rs`: recall ≥ 0.99 over all secrets and ≥ 0.9 for every kind,
//! at most 1 % of the look-alikes touched. A secret is redacted when no 8-character piece of
//! it survives; a look-alike must come out byte-identical. On failure the per-kind table and
//! the misses are printed.

pub mod cases;

use std::collections::BTreeMap;

use dsh_chapters::redact::{RedactionCounts, Redactor};

fn redact(redactor: &Redactor, text: &str) -> String {
    let mut counts = RedactionCounts::default();
    redactor.redact(text, &mut counts).into_inner()
}

#[test]
fn built_in_rules_reach_the_recall_and_precision_goals_on_the_corpus() {
    let redactor = Redactor::new(&[]).expect("built-in rules compile");
    let secrets = cases::secrets();
    let look_alikes = cases::look_alikes();

    // kind → (cases, redacted)
    let mut by_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    for case in &secrets {
        let out = redact(&redactor, &case.text);
        let entry = by_kind.entry(case.kind).or_default();
        entry.0 += 1;
        match cases::survives(&case.secret, &out) {
            None => entry.1 += 1,
            Some(piece) => misses.push(format!(
                "  {} / {}: {piece:?} survives in {:?}",
                case.kind, case.context, out
            )),
        }
    }
    let mut touched = Vec::new();
    for look_alike in &look_alikes {
        let out = redact(&redactor, &look_alike.text);
        if out != look_alike.text {
            touched.push(format!(
                "  {}: {:?} → {:?}",
                look_alike.kind, look_alike.text, out
            ));
        }
    }

    let total = secrets.len();
    let found: usize = by_kind.values().map(|(_, redacted)| redacted).sum();
    let recall = found as f64 / total as f64;
    let touched_rate = touched.len() as f64 / look_alikes.len() as f64;
    let weakest = by_kind
        .values()
        .map(|&(cases, redacted)| redacted as f64 / cases as f64)
        .fold(1.0, f64::min);
    let mut table = format!(
        "recall {recall:.4} ({found}/{total}) over {} kinds; weakest kind {weakest:.2}; look-alikes touched {}/{} ({:.2} %)\n{:<40} {:>5} {:>8} {:>7}\n",
        by_kind.len(),
        touched.len(),
        look_alikes.len(),
        touched_rate * 100.0,
        "kind",
        "cases",
        "redacted",
        "recall"
    );
    for (kind, (cases, redacted)) in &by_kind {
        table.push_str(&format!(
            "{kind:<40} {cases:>5} {redacted:>8} {:>7.2}\n",
            *redacted as f64 / *cases as f64
        ));
    }
    let report = format!(
        "{table}misses:\n{}\nlook-alikes touched:\n{}",
        misses.join("\n"),
        touched.join("\n")
    );

    // Shown with `--nocapture`; the figures in docs/benchmarks.md come from here.
    println!("{table}");
    assert!(total >= 600, "corpus too small: {total} secrets");
    assert!(
        by_kind.len() >= 50,
        "corpus too narrow: {} kinds",
        by_kind.len()
    );
    assert!(
        look_alikes.len() >= 200,
        "{} look-alikes",
        look_alikes.len()
    );
    assert!(
        recall >= 0.99 && weakest >= 0.9 && touched_rate <= 0.01,
        "redaction goals missed:\n{report}"
    );
}

#[test]
fn survives_finds_any_eight_character_piece() {
    assert_eq!(
        cases::survives("abcdefghij", "xx cdefghij yy"),
        Some("cdefghij")
    );
    assert_eq!(cases::survives("abcdefghij", "abcdefg hij"), None);
    assert_eq!(cases::survives("short", "a short one"), Some("short"));
    assert_eq!(cases::survives("short", "shor t"), None);
    assert_eq!(cases::survives("é-1234567", "é-123456"), Some("é-123456"));
}

#[test]
fn the_corpus_is_deterministic() {
    let first: Vec<String> = cases::secrets().into_iter().map(|case| case.text).collect();
    let second: Vec<String> = cases::secrets().into_iter().map(|case| case.text).collect();
    assert_eq!(first, second);
    for case in cases::secrets() {
        assert!(
            case.text.contains(&case.secret)
                || case.text.contains(&case.secret.replace('\n', "\\n"))
                || case.text.contains(&case.secret.replace("\\n", "\\\\n")),
            "{} / {}: the secret is not in its text",
            case.kind,
            case.context
        );
    }
}

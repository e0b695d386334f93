//! The one sanctioned change to a stored chapter (record §6.2): its model-owned frontmatter
//! fields — `title`, `summary`, `topics`, `topicsUnvetted` — rewritten with their
//! provenance in `generated`, guarded by the body's hash. The body's bytes never change,
//! a plan is never annotated (amendment 2026-10-10), and the same model giving the same
//! answer changes nothing. Pure.

use std::collections::BTreeMap;

use super::{body_text, frontmatter_text, sha256_hex, yaml};
use crate::redact::{Redacted, RedactionCounts, Redactor};

/// The frontmatter fields enrichment reads and owns.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFields {
    pub title: String,
    #[serde(default)]
    pub summary: String,
    pub kind: String,
    #[serde(default)]
    pub topics: Vec<String>,
    #[serde(default)]
    pub topics_unvetted: Vec<String>,
    #[serde(default)]
    pub sha256: Option<String>,
    /// field → provenance (`by`, `model`, `at`, `previous…`).
    #[serde(default)]
    pub generated: BTreeMap<String, BTreeMap<String, String>>,
}

impl ModelFields {
    pub fn read(doc: &str) -> Result<ModelFields, AnnotateError> {
        let yaml = frontmatter_text(doc)
            .ok_or_else(|| AnnotateError::Frontmatter("it does not start with `---`".into()))?;
        serde_saphyr::from_str(yaml).map_err(|e| AnnotateError::Frontmatter(e.to_string()))
    }

    /// The model that wrote this chapter's title, when one did.
    pub fn title_model(&self) -> Option<&str> {
        let title = self.generated.get("title")?;
        (title.get("by").map(String::as_str) == Some("model"))
            .then(|| title.get("model").map(String::as_str))
            .flatten()
    }
}

/// What a model proposed for one chapter, already validated and canonicalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation<'a> {
    pub title: &'a str,
    pub summary: &'a str,
    pub topics: &'a [String],
    /// Labels the vocabulary does not know yet: kept, and marked as such.
    pub unvetted: &'a [String],
    pub model: &'a str,
    pub at: &'a str,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnnotateError {
    #[error("the document has no readable frontmatter ({0}); it is not annotated")]
    Frontmatter(String),
    #[error("a `{kind}` document is never annotated; only chapters are")]
    NotAChapter { kind: String },
    #[error("the body no longer hashes to the frontmatter's sha256 ({expected} ≠ {actual}): the file was changed by hand; it is not annotated")]
    BodyChanged { expected: String, actual: String },
    #[error("the frontmatter has no `{key}:` line to replace; it is not annotated")]
    MissingKey { key: &'static str },
}

#[derive(Debug)]
pub enum Annotated {
    /// The new document bytes; the body is byte-identical to the old one.
    Changed(Redacted<String>),
    /// The chapter already carries exactly this model's answer.
    Unchanged,
}

/// Rewrite `doc`'s model-owned fields with `ann`. Everything the model wrote passes the
/// redactor: a model can echo a secret it was shown.
pub fn annotate(
    doc: &str,
    ann: &Annotation<'_>,
    redactor: &Redactor,
    counts: &mut RedactionCounts,
) -> Result<Annotated, AnnotateError> {
    let fm = ModelFields::read(doc)?;
    if fm.kind != "chapter" {
        return Err(AnnotateError::NotAChapter { kind: fm.kind });
    }
    let body = body_text(doc).ok_or_else(|| AnnotateError::Frontmatter("no body".into()))?;
    let actual = sha256_hex(body.as_bytes());
    if fm.sha256.as_deref() != Some(actual.as_str()) {
        return Err(AnnotateError::BodyChanged {
            expected: fm.sha256.unwrap_or_default(),
            actual,
        });
    }
    let title = redactor.redact(ann.title, counts);
    let summary = redactor.redact(ann.summary, counts);
    let topics: Vec<String> = ann
        .topics
        .iter()
        .map(|t| redactor.redact(t, counts).into_inner())
        .collect();
    let unvetted: Vec<String> = ann
        .unvetted
        .iter()
        .map(|t| redactor.redact(t, counts).into_inner())
        .collect();

    let by_this_model = ["title", "summary", "topics"].iter().all(|field| {
        fm.generated.get(*field).is_some_and(|p| {
            p.get("by").map(String::as_str) == Some("model")
                && p.get("model").map(String::as_str) == Some(ann.model)
        })
    });
    if by_this_model
        && fm.title == title.as_str()
        && fm.summary == summary.as_str()
        && fm.topics == topics
        && fm.topics_unvetted == unvetted
    {
        return Ok(Annotated::Unchanged);
    }

    let provenance = |field: &str| {
        let mut pairs = vec![
            ("by", "model".to_owned()),
            ("model", yaml::scalar(ann.model)),
            ("at", yaml::scalar(ann.at)),
        ];
        // The provenance shows what this answer replaced.
        if let Some(previous) = fm.generated.get(field) {
            let by = previous.get("by").cloned().unwrap_or_default();
            pairs.push(("previousBy", yaml::scalar(&by)));
            if by == "model" {
                for (key, name) in [("model", "previousModel"), ("at", "previousAt")] {
                    if let Some(value) = previous.get(key) {
                        pairs.push((name, yaml::scalar(value)));
                    }
                }
            }
        }
        yaml::flow_map(&pairs)
    };
    let generated = yaml::flow_map(&[
        ("title", provenance("title")),
        ("summary", provenance("summary")),
        ("topics", provenance("topics")),
    ]);
    let seq = |items: &[String]| {
        yaml::flow_seq(&items.iter().map(|t| yaml::scalar(t)).collect::<Vec<_>>())
    };

    let head = frontmatter_text(doc).ok_or_else(|| AnnotateError::Frontmatter("none".into()))?;
    let mut lines: Vec<String> = head.lines().map(str::to_owned).collect();
    let mut replace = |key: &'static str, value: String| -> Result<(), AnnotateError> {
        let prefix = format!("{key}: ");
        let at = lines
            .iter()
            .position(|l| l.starts_with(&prefix))
            .ok_or(AnnotateError::MissingKey { key })?;
        lines[at] = format!("{prefix}{value}");
        Ok(())
    };
    replace("title", yaml::scalar(title.as_str()))?;
    replace("summary", yaml::scalar(summary.as_str()))?;
    replace("topics", seq(&topics))?;
    replace("generated", generated)?;
    let unvetted_line = format!("topicsUnvetted: {}", seq(&unvetted));
    match lines.iter().position(|l| l.starts_with("topicsUnvetted: ")) {
        Some(at) => lines[at] = unvetted_line,
        None => {
            let at = lines
                .iter()
                .position(|l| l.starts_with("topics: "))
                .ok_or(AnnotateError::MissingKey { key: "topics" })?;
            lines.insert(at + 1, unvetted_line);
        }
    }
    let mut out = String::with_capacity(doc.len() + 256);
    out.push_str("---\n");
    for line in &lines {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("---\n");
    out.push_str(body);
    // Every value above was redacted on its own; the assembled text is re-checked as a
    // whole so the store still receives a `Redacted` it could not get any other way.
    let out = redactor.redact(&out, &mut RedactionCounts::default());
    debug_assert_eq!(body_text(out.as_str()), Some(body));
    Ok(Annotated::Changed(out))
}

/// The frontmatter keys a model owns; a line of any other key never changes.
const MODEL_OWNED: [&str; 5] = ["title", "summary", "topics", "topicsUnvetted", "generated"];

/// Whether `new` is `old` re-annotated: the same body bytes, a model's provenance on `new`,
/// and every frontmatter line outside the model-owned keys unchanged. The pool lets such a
/// chapter replace its earlier copy; any other difference stays refused.
pub fn is_reannotation(old: &str, new: &str) -> bool {
    let (Some(old_body), Some(new_body)) = (body_text(old), body_text(new)) else {
        return false;
    };
    let (Some(old_head), Some(new_head)) = (frontmatter_text(old), frontmatter_text(new)) else {
        return false;
    };
    let fixed = |head: &str| -> Vec<String> {
        head.lines()
            .filter(|l| {
                !MODEL_OWNED
                    .iter()
                    .any(|k| l.strip_prefix(k).is_some_and(|r| r.starts_with(": ")))
            })
            .map(str::to_owned)
            .collect()
    };
    old_body == new_body
        && fixed(old_head) == fixed(new_head)
        && ModelFields::read(new).is_ok_and(|f| f.kind == "chapter" && f.title_model().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_frontmatter(doc: &str) -> Result<ModelFields, AnnotateError> {
        ModelFields::read(doc)
    }

    fn redactor() -> Redactor {
        Redactor::new(&[]).unwrap()
    }

    fn chapter() -> String {
        let body = "# A title\n\n**User** · seq 1\n\nfix it\n";
        format!(
            "---\ntitle: A title\nsummary: \"s\"\nkind: chapter\ntopics: [auth]\nsha256: {}\ngenerated: {{title: {{by: deterministic}}, summary: {{by: deterministic}}, topics: {{by: deterministic}}}}\n---\n{body}",
            sha256_hex(body.as_bytes())
        )
    }

    fn ann<'a>(model: &'a str, at: &'a str, topics: &'a [String]) -> Annotation<'a> {
        Annotation {
            title: "Fix: the refresh check",
            summary: "Seconds were compared with milliseconds.",
            topics,
            unvetted: &topics[1..],
            model,
            at,
        }
    }

    fn changed(a: Annotated) -> String {
        match a {
            Annotated::Changed(text) => text.into_inner(),
            Annotated::Unchanged => panic!("expected a change"),
        }
    }

    #[test]
    fn rewrites_only_model_owned_fields_and_keeps_the_body() {
        let doc = chapter();
        let topics = vec!["auth".to_string(), "jwt-refresh".to_string()];
        let mut counts = RedactionCounts::default();
        let out = changed(
            annotate(
                &doc,
                &ann("m1", "2026-11-29T00:00:00Z", &topics),
                &redactor(),
                &mut counts,
            )
            .unwrap(),
        );
        assert_eq!(body_text(&out), body_text(&doc));
        let fm = parse_frontmatter(&out).unwrap();
        assert_eq!(fm.title, "Fix: the refresh check");
        assert_eq!(fm.topics, topics);
        assert_eq!(fm.topics_unvetted, vec!["jwt-refresh".to_string()]);
        assert_eq!(fm.generated["title"]["by"], "model");
        assert_eq!(fm.generated["title"]["model"], "m1");
        assert_eq!(fm.generated["title"]["previousBy"], "deterministic");
        assert_eq!(fm.sha256, parse_frontmatter(&doc).unwrap().sha256);

        // The same model and the same answer: nothing to write.
        let again = annotate(
            &out,
            &ann("m1", "2026-11-30T00:00:00Z", &topics),
            &redactor(),
            &mut counts,
        )
        .unwrap();
        assert!(matches!(again, Annotated::Unchanged));

        // A newer model overwrites, and the provenance shows both.
        let newer = changed(
            annotate(
                &out,
                &ann("m2", "2026-12-01T00:00:00Z", &topics),
                &redactor(),
                &mut counts,
            )
            .unwrap(),
        );
        let fm = parse_frontmatter(&newer).unwrap();
        assert_eq!(fm.generated["summary"]["model"], "m2");
        assert_eq!(fm.generated["summary"]["previousModel"], "m1");
        assert_eq!(
            fm.generated["summary"]["previousAt"],
            "2026-11-29T00:00:00Z"
        );
        assert_eq!(body_text(&newer), body_text(&doc));
    }

    #[test]
    fn a_reannotation_is_told_apart_from_any_other_change() {
        let doc = chapter();
        let topics = vec!["auth".to_string()];
        let mut counts = RedactionCounts::default();
        let out =
            changed(annotate(&doc, &ann("m1", "t", &topics), &redactor(), &mut counts).unwrap());
        assert!(is_reannotation(&doc, &out));
        assert!(
            !is_reannotation(&out, &doc),
            "the deterministic copy carries no model"
        );
        assert!(!is_reannotation(
            &doc,
            &out.replace("fix it", "fix it later")
        ));
        assert!(!is_reannotation(
            &doc,
            &out.replace("kind: chapter", "kind: rule")
        ));
        assert!(!is_reannotation(&doc, &doc));
        assert!(!is_reannotation("", &out));
    }

    #[test]
    fn plans_edited_bodies_and_broken_frontmatter_are_refused() {
        let topics = vec!["a".to_string()];
        let mut counts = RedactionCounts::default();
        let plan = chapter().replace("kind: chapter", "kind: plan");
        assert!(matches!(
            annotate(&plan, &ann("m", "t", &topics), &redactor(), &mut counts),
            Err(AnnotateError::NotAChapter { .. })
        ));
        let edited = chapter().replace("fix it", "fix it later");
        assert!(matches!(
            annotate(&edited, &ann("m", "t", &topics), &redactor(), &mut counts),
            Err(AnnotateError::BodyChanged { .. })
        ));
        for broken in ["", "---\n", "no frontmatter", "---\ntitle: [\n---\nbody"] {
            assert!(annotate(broken, &ann("m", "t", &topics), &redactor(), &mut counts).is_err());
        }
    }

    #[test]
    fn a_secret_echoed_by_the_model_is_redacted_and_hostile_text_stays_on_its_line() {
        let doc = chapter();
        let topics = vec!["a".to_string()];
        let mut counts = RedactionCounts::default();
        let mut a = ann("m", "t", &topics);
        let title = "key AKIAIOSFODNN7EXAMPLE\n---\nkind: plan".to_string();
        a.title = &title;
        let out = changed(annotate(&doc, &a, &redactor(), &mut counts).unwrap());
        assert!(!out.contains("AKIAIOSFODNN7EXAMPLE"), "{out}");
        assert_eq!(counts.total(), 1);
        let fm = parse_frontmatter(&out).unwrap();
        assert_eq!(fm.kind, "chapter");
        assert!(fm.title.contains("kind: plan"));
        assert_eq!(body_text(&out), body_text(&doc));
    }
}

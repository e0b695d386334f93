//! A model's answer, validated before anything is written (record §6.1): one JSON object
//! `{title, summary, topics, rules?}` with every field in bounds. Anything else is an
//! invalid answer — the caller retries once, then keeps the deterministic values. Pure.

use serde_json::Value;

use crate::curation::normalize_topic;
use crate::redact::{Redacted, RedactionCounts, Redactor};

pub const TITLE_MAX_CHARS: usize = 160;
pub const SUMMARY_MAX_CHARS: usize = 800;
pub const TOPICS_MAX: usize = 10;
pub const TOPIC_MAX_CHARS: usize = 48;
pub const RULE_MAX_CHARS: usize = 400;
/// Candidates examined per answer; the per-chapter cap on rules written is the caller's.
pub const RULE_CANDIDATES_MAX: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleLabel {
    /// A human sentence of the chapter says it verbatim.
    Stated,
    /// The model read it between the lines.
    Inferred,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MinedRule {
    pub text: String,
    pub label: RuleLabel,
    pub category: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub title: String,
    pub summary: String,
    /// Normalized, deduplicated, in the model's order.
    pub topics: Vec<String>,
    pub rules: Vec<MinedRule>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("the answer holds no JSON object")]
    NoJson,
    #[error("the answer's JSON does not parse: {0}")]
    Json(String),
    #[error("`{field}` {problem}")]
    Field {
        field: &'static str,
        problem: String,
    },
}

fn field(field: &'static str, problem: impl Into<String>) -> AnswerError {
    AnswerError::Field {
        field,
        problem: problem.into(),
    }
}

/// Most `{` positions tried before the answer is called JSON-less: bounded work on garbage.
const OBJECT_STARTS_TRIED: usize = 64;

/// The first JSON object inside a completion's text: bare, in a ```json fence, or after
/// prose or a thinking block that may hold braces of its own.
fn json_object(content: &str) -> Result<Value, AnswerError> {
    let mut last_error = None;
    for (at, _) in content.match_indices('{').take(OBJECT_STARTS_TRIED) {
        let mut values = serde_json::Deserializer::from_str(&content[at..]).into_iter::<Value>();
        match values.next() {
            Some(Ok(value)) if value.is_object() => return Ok(value),
            Some(Err(e)) => last_error = Some(e.to_string()),
            _ => {}
        }
    }
    Err(last_error.map_or(AnswerError::NoJson, AnswerError::Json))
}

fn text(
    value: &Value,
    name: &'static str,
    max_chars: usize,
    one_line: bool,
) -> Result<String, AnswerError> {
    let s = value
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| field(name, "is missing or not a string"))?
        .trim();
    if s.is_empty() {
        return Err(field(name, "is empty"));
    }
    if s.chars().count() > max_chars {
        return Err(field(
            name,
            format!("is longer than {max_chars} characters"),
        ));
    }
    if one_line && s.contains(['\n', '\r']) {
        return Err(field(name, "must be one line"));
    }
    if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(field(name, "holds control characters"));
    }
    Ok(s.to_owned())
}

/// The answer's JSON object, every string in it redacted before any field is read: a topic
/// is lowercased and a title cut only after a secret the model echoed has become a marker.
fn redacted_object(
    content: &str,
    redactor: &Redactor,
    counts: &mut RedactionCounts,
) -> Result<Redacted<Value>, AnswerError> {
    let value = json_object(content)?;
    Ok(redactor.redact_json(&value, counts))
}

/// Validate a completion's answer; its strings are redacted first.
pub fn parse(
    content: &str,
    redactor: &Redactor,
    counts: &mut RedactionCounts,
) -> Result<Answer, AnswerError> {
    fields(&redacted_object(content, redactor, counts)?)
}

/// The answer's fields, from its redacted object only.
fn fields(value: &Redacted<Value>) -> Result<Answer, AnswerError> {
    let value = value.get();
    let title = text(value, "title", TITLE_MAX_CHARS, true)?;
    let summary = text(value, "summary", SUMMARY_MAX_CHARS, false)?;
    let raw_topics = value
        .get("topics")
        .and_then(Value::as_array)
        .ok_or_else(|| field("topics", "is missing or not a list"))?;
    if raw_topics.is_empty() || raw_topics.len() > TOPICS_MAX {
        return Err(field(
            "topics",
            format!("must hold 1 to {TOPICS_MAX} labels"),
        ));
    }
    let mut topics = Vec::new();
    for t in raw_topics {
        if t.as_str()
            .is_some_and(|t| t.contains(crate::redact::MARKER_PREFIX))
        {
            // A redacted secret is no topic; the label is dropped, never lowercased.
            continue;
        }
        let label = t
            .as_str()
            .map(normalize_topic)
            .filter(|l| !l.is_empty() && l.chars().count() <= TOPIC_MAX_CHARS)
            .filter(|l| l.chars().all(|c| !c.is_control()))
            .ok_or_else(|| {
                field(
                    "topics",
                    format!(
                        "holds {t} — each must be a label of 1 to {TOPIC_MAX_CHARS} characters"
                    ),
                )
            })?;
        if !topics.contains(&label) {
            topics.push(label);
        }
    }
    if topics.is_empty() {
        return Err(field("topics", "holds only redacted secrets"));
    }
    let rules = parse_rules_field(value)?;
    Ok(Answer {
        title,
        summary,
        topics,
        rules,
    })
}

/// The answer of a dedicated mining call: `{"rules": [...]}`, its strings redacted first.
pub fn parse_rules(
    content: &str,
    redactor: &Redactor,
    counts: &mut RedactionCounts,
) -> Result<Vec<MinedRule>, AnswerError> {
    let value = redacted_object(content, redactor, counts)?;
    if value.get().get("rules").is_none() {
        return Err(field("rules", "is missing"));
    }
    parse_rules_field(value.get())
}

fn parse_rules_field(value: &Value) -> Result<Vec<MinedRule>, AnswerError> {
    let mut rules = Vec::new();
    match value.get("rules") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for item in items.iter().take(RULE_CANDIDATES_MAX) {
                let text = text(item, "text", RULE_MAX_CHARS, false)
                    .map_err(|_| field("rules", "holds a rule without a usable `text`"))?;
                let label = match item.get("label").and_then(Value::as_str) {
                    Some("stated") => RuleLabel::Stated,
                    Some("inferred") | None => RuleLabel::Inferred,
                    Some(other) => {
                        return Err(field(
                            "rules",
                            format!("label {other:?} is not stated or inferred"),
                        ))
                    }
                };
                let category = item
                    .get("category")
                    .and_then(Value::as_str)
                    .map(normalize_topic)
                    .filter(|c| !c.is_empty() && c.chars().count() <= TOPIC_MAX_CHARS)
                    .unwrap_or_else(|| "general".to_owned());
                rules.push(MinedRule {
                    text,
                    label,
                    category,
                });
            }
        }
        Some(_) => return Err(field("rules", "is not a list")),
    }
    Ok(rules)
}

/// Whitespace-folded, lowercase: how "says it verbatim" is compared.
fn folded(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A rule the model called `stated` keeps the label only when a human sentence of the
/// chapter holds its text; assistant prose never counts (amendment 2026-10-21).
pub fn check_stated(rule: &MinedRule, human_text: &[String]) -> RuleLabel {
    if rule.label != RuleLabel::Stated {
        return rule.label;
    }
    let needle = folded(&rule.text);
    if human_text.iter().any(|h| folded(h).contains(&needle)) {
        RuleLabel::Stated
    } else {
        RuleLabel::Inferred
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(content: &str) -> Result<Answer, AnswerError> {
        let redactor = crate::redact::built_in().expect("built-in rules");
        super::parse(content, redactor, &mut RedactionCounts::default())
    }

    fn parse_rules(content: &str) -> Result<Vec<MinedRule>, AnswerError> {
        let redactor = crate::redact::built_in().expect("built-in rules");
        super::parse_rules(content, redactor, &mut RedactionCounts::default())
    }

    #[test]
    fn an_echoed_secret_is_redacted_before_it_is_lowercased_or_kept() {
        let answer = parse(
            r#"{"title":"Rotated AKIAQ7ZXW4JRMN2KVB5T","summary":"Used ?token=Tq9sk2LmQ8","topics":["AKIAQ7ZXW4JRMN2KVB5T","auth"],"rules":[{"text":"Never paste AKIAQ7ZXW4JRMN2KVB5T"}]}"#,
        )
        .unwrap();
        let all = format!("{answer:?}").to_lowercase();
        assert!(
            !all.contains("akiaq7zx") && !all.contains("tq9sk2lm"),
            "{all}"
        );
        assert_eq!(answer.topics, vec!["auth"]);
        assert!(answer.title.contains(crate::redact::MARKER_PREFIX));
        assert!(parse(r#"{"title":"t","summary":"s","topics":["AKIAQ7ZXW4JRMN2KVB5T"]}"#).is_err());
    }

    #[test]
    fn a_good_answer_in_any_wrapping() {
        for content in [
            r#"{"title":"Fix the refresh check","summary":"Units.","topics":["Auth","JWT Refresh","auth"]}"#,
            "```json\n{\"title\":\"Fix the refresh check\",\"summary\":\"Units.\",\"topics\":[\"auth\",\"jwt-refresh\"]}\n```",
            "<think>hmm {not json}</think>\nHere: {\"title\":\"Fix the refresh check\",\"summary\":\"Units.\",\"topics\":[\"auth\",\"jwt-refresh\"]}",
        ] {
            let a = parse(content).unwrap();
            assert_eq!(a.title, "Fix the refresh check");
            assert_eq!(a.topics, vec!["auth", "jwt-refresh"]);
            assert!(a.rules.is_empty());
        }
    }

    #[test]
    fn every_bad_shape_is_refused_by_field() {
        let long = "x".repeat(TITLE_MAX_CHARS + 1);
        let cases = [
            ("", "no JSON"),
            ("[1,2]", "no JSON"),
            ("{\"title\":", "does not parse"),
            (r#"{"title": 5, "summary":"s","topics":["a"]}"#, "`title`"),
            (r#"{"title":"","summary":"s","topics":["a"]}"#, "`title`"),
            (
                r#"{"title":"a\nb","summary":"s","topics":["a"]}"#,
                "one line",
            ),
            (
                &format!(r#"{{"title":"{long}","summary":"s","topics":["a"]}}"#),
                "longer",
            ),
            (r#"{"title":"t","topics":["a"]}"#, "`summary`"),
            (r#"{"title":"t","summary":"s","topics":[]}"#, "`topics`"),
            (r#"{"title":"t","summary":"s","topics":"auth"}"#, "`topics`"),
            (r#"{"title":"t","summary":"s","topics":[1]}"#, "`topics`"),
            (
                r#"{"title":"t","summary":"s","topics":["a"],"rules":{}}"#,
                "`rules`",
            ),
            (
                r#"{"title":"t","summary":"s","topics":["a"],"rules":[{"label":"stated"}]}"#,
                "`rules`",
            ),
            (
                r#"{"title":"t","summary":"s","topics":["a"],"rules":[{"text":"x","label":"maybe"}]}"#,
                "`rules`",
            ),
        ];
        for (content, expect) in cases {
            let err = parse(content).unwrap_err().to_string();
            assert!(err.contains(expect), "{content}: {err}");
        }
        let eleven: Vec<String> = (0..11).map(|i| format!("\"t{i}\"")).collect();
        assert!(parse(&format!(
            r#"{{"title":"t","summary":"s","topics":[{}]}}"#,
            eleven.join(",")
        ))
        .is_err());
    }

    #[test]
    fn a_mining_answer_holds_rules_only() {
        let rules = parse_rules(r#"{"rules":[{"text":"Run fmt","label":"stated"}]}"#).unwrap();
        assert_eq!(rules.len(), 1);
        assert!(parse_rules(r#"{"rules":[]}"#).unwrap().is_empty());
        assert!(parse_rules(r#"{"title":"t"}"#).is_err());
        assert!(parse_rules("no").is_err());
    }

    #[test]
    fn stated_needs_a_human_sentence() {
        let answer = parse(
            r#"{"title":"t","summary":"s","topics":["a"],"rules":[
            {"text":"Run the tests before every commit","label":"stated","category":"Testing"},
            {"text":"Prefer small diffs","label":"stated"},
            {"text":"Use tracing","label":"inferred"}]}"#,
        )
        .unwrap();
        let human = vec!["please  RUN the tests before every\ncommit, always".to_string()];
        assert_eq!(check_stated(&answer.rules[0], &human), RuleLabel::Stated);
        assert_eq!(answer.rules[0].category, "testing");
        assert_eq!(check_stated(&answer.rules[1], &human), RuleLabel::Inferred);
        assert_eq!(check_stated(&answer.rules[2], &human), RuleLabel::Inferred);
        assert_eq!(answer.rules[1].category, "general");
    }
}

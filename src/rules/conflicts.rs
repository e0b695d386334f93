//! `chapters rule conflicts` (§7.7): one bounded model call over the governing rules, and the
//! validation of its report — contradictory pairs named by id. Report-only: nothing here can
//! edit, revoke or rank a rule. Pure.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{json, Value};

use super::Rule;

/// Most characters of rule text one call carries; a larger set is refused with numbers
/// rather than silently cut.
pub const MAX_PROMPT_CHARS: usize = 24_000;
/// Most pairs a report may hold; more is not a report a person reads.
pub const MAX_PAIRS: usize = 50;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conflict {
    pub a: String,
    pub b: String,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConflictsError {
    #[error("{rules} governing rules hold {chars} characters of text, over the {MAX_PROMPT_CHARS}-character bound of one call; revoke or merge some first, nothing was checked")]
    TooLarge { rules: usize, chars: usize },
    #[error("the model's report is not valid: {0}")]
    Invalid(String),
}

/// The chat messages of the one call.
pub fn messages(rules: &[&Rule]) -> Result<Value, ConflictsError> {
    let listing: String = rules
        .iter()
        .map(|r| format!("{}: {}\n", r.id, r.text))
        .collect();
    if listing.chars().count() > MAX_PROMPT_CHARS {
        return Err(ConflictsError::TooLarge {
            rules: rules.len(),
            chars: listing.chars().count(),
        });
    }
    Ok(json!([
        {"role": "system", "content": "You check a set of standing orders given to an AI coding agent for contradictions: pairs that cannot both be followed. Answer with ONE JSON object and nothing else: {\"conflicts\": [{\"a\": id, \"b\": id, \"why\": one sentence}]} — [] when none contradict. Use only the ids given."},
        {"role": "user", "content": listing},
    ]))
}

/// The report, checked: every id must be one of the set, a pair is two different rules,
/// each pair once (in id order).
pub fn parse(content: &str, rules: &[&Rule]) -> Result<Vec<Conflict>, ConflictsError> {
    let invalid = |why: &str| ConflictsError::Invalid(why.to_owned());
    let start = content.find('{').ok_or_else(|| invalid("no JSON object"))?;
    let value: Value = serde_json::Deserializer::from_str(&content[start..])
        .into_iter::<Value>()
        .next()
        .ok_or_else(|| invalid("no JSON object"))?
        .map_err(|e| ConflictsError::Invalid(e.to_string()))?;
    let items = value
        .get("conflicts")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("`conflicts` is missing or not a list"))?;
    if items.len() > MAX_PAIRS {
        return Err(invalid("more pairs than a report may hold"));
    }
    let known: BTreeSet<&str> = rules.iter().map(|r| r.id.as_str()).collect();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for item in items {
        let id = |key: &str| {
            item.get(key)
                .and_then(Value::as_str)
                .filter(|id| known.contains(id))
                .map(str::to_owned)
                .ok_or_else(|| {
                    ConflictsError::Invalid(format!(
                        "a pair's `{key}` is not one of the rules given"
                    ))
                })
        };
        let (a, b) = (id("a")?, id("b")?);
        if a == b {
            return Err(invalid("a pair names the same rule twice"));
        }
        let why = item
            .get("why")
            .and_then(Value::as_str)
            .map(|w| w.trim().chars().take(400).collect::<String>())
            .filter(|w| !w.is_empty())
            .ok_or_else(|| invalid("a pair has no `why`"))?;
        let (a, b) = if a < b { (a, b) } else { (b, a) };
        if seen.insert((a.clone(), b.clone())) {
            out.push(Conflict { a, b, why });
        }
    }
    out.sort_by(|x, y| (&x.a, &x.b).cmp(&(&y.a, &y.b)));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> Vec<Rule> {
        vec![
            Rule::project(
                "pk",
                "testing",
                "Always run the full test suite before a commit.",
            )
            .unwrap(),
            Rule::project(
                "pk",
                "testing",
                "Never run the full test suite; run only the changed crate.",
            )
            .unwrap(),
            Rule::project("pk", "style", "Use tracing for logs.").unwrap(),
        ]
    }

    #[test]
    fn a_valid_report_is_ordered_and_deduplicated() {
        let rules = rules();
        let refs: Vec<&Rule> = rules.iter().collect();
        let (a, b) = (&rules[0].id, &rules[1].id);
        let content = format!(
            r#"sure: {{"conflicts": [{{"a": "{b}", "b": "{a}", "why": "one says always, one never"}}, {{"a": "{a}", "b": "{b}", "why": "again"}}]}}"#
        );
        let report = parse(&content, &refs).unwrap();
        assert_eq!(report.len(), 1);
        assert_eq!(report[0].a, *a.min(b));
        assert!(parse(r#"{"conflicts": []}"#, &refs).unwrap().is_empty());
        let m = messages(&refs).unwrap();
        assert!(m[1]["content"].as_str().unwrap().contains(&rules[2].id));
    }

    #[test]
    fn invented_ids_self_pairs_and_garbage_are_refused() {
        let rules = rules();
        let refs: Vec<&Rule> = rules.iter().collect();
        let a = &rules[0].id;
        for bad in [
            String::new(),
            "no json".into(),
            r#"{"conflicts": 3}"#.into(),
            format!(r#"{{"conflicts": [{{"a": "{a}", "b": "r-0000000000000000", "why": "x"}}]}}"#),
            format!(r#"{{"conflicts": [{{"a": "{a}", "b": "{a}", "why": "x"}}]}}"#),
            format!(
                r#"{{"conflicts": [{{"a": "{a}", "b": "{}", "why": ""}}]}}"#,
                rules[1].id
            ),
        ] {
            assert!(parse(&bad, &refs).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_set_over_the_bound_is_refused_with_numbers() {
        let long: Vec<Rule> = (0..10)
            .map(|i| Rule::project("pk", "x", &format!("{i} {}", "word ".repeat(600))).unwrap())
            .collect();
        let refs: Vec<&Rule> = long.iter().collect();
        let err = messages(&refs).unwrap_err().to_string();
        assert!(err.contains("10 governing rules"), "{err}");
    }
}

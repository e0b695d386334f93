//! A Codex web search as a tool call (pure).
//!
//! Codex records one hosted web search twice: a `response_item` `web_search_call` (its
//! `action`: `search` with `query` or `queries`, `open_page` with `url`, `find_in_page` with
//! `url` and `pattern`; some versions leave the action empty) and an `event_msg`
//! `web_search_end` (`call_id`, `query`, the same `action`, sometimes `results`). Either may
//! come first. The chapter shows the search once, as a `web_search` call whose arguments say
//! what was searched or opened; its result lists the results when the log has them.

use serde_json::{Map, Value};

/// The tool name a search is shown under.
pub const TOOL: &str = "web_search";

/// What a search result says when the log recorded none.
pub const NO_RESULTS: &str = "[no results recorded: Codex keeps only what was searched]";

/// The most result lines a search's result lists.
const MAX_RESULTS: usize = 20;

/// The call's arguments (a JSON object) from the record's `action` and, for
/// `web_search_end`, its `query`; `None` when the record says nothing of what was searched.
pub fn arguments(action: Option<&Value>, query: Option<&Value>) -> Option<String> {
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let mut args = Map::new();
    if let Some(a) = action {
        if let Some(q) = text(a.get("query")) {
            args.insert("query".into(), q.into());
        } else if let Some(qs) = a.get("queries").and_then(Value::as_array) {
            let qs: Vec<&str> = qs
                .iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .filter(|q| !q.is_empty())
                .collect();
            if !qs.is_empty() {
                args.insert("query".into(), qs.join("; ").into());
            }
        }
        if let Some(url) = text(a.get("url")) {
            args.insert("url".into(), url.into());
        }
        if let Some(p) = text(a.get("pattern")) {
            args.insert("pattern".into(), p.into());
        }
    }
    if args.is_empty() {
        // An opened page's `query` is its URL: said as the query all the same.
        if let Some(q) = text(query) {
            args.insert("query".into(), q.into());
        }
    }
    (!args.is_empty()).then(|| Value::Object(args).to_string())
}

/// The result text: one line per recorded result (`title — url`), else [`NO_RESULTS`].
pub fn result_text(results: Option<&Value>) -> String {
    let lines: Vec<String> = results
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter_map(|r| {
                    let field = |k: &str| r.get(k).and_then(Value::as_str).map(str::trim);
                    match (field("title"), field("url")) {
                        (Some(t), Some(u)) if !t.is_empty() => Some(format!("{t} — {u}")),
                        (_, Some(u)) if !u.is_empty() => Some(u.to_owned()),
                        (Some(t), _) if !t.is_empty() => Some(t.to_owned()),
                        _ => None,
                    }
                })
                .take(MAX_RESULTS)
                .collect()
        })
        .unwrap_or_default();
    if lines.is_empty() {
        NO_RESULTS.to_owned()
    } else {
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_action_says_what_was_searched_or_opened() {
        let a = |v: Value| arguments(Some(&v), None);
        assert_eq!(
            a(json!({"type": "search", "query": "rust zstd frames"})).as_deref(),
            Some(r#"{"query":"rust zstd frames"}"#)
        );
        assert_eq!(
            a(json!({"type": "search", "queries": ["a", " ", "b"]})).as_deref(),
            Some(r#"{"query":"a; b"}"#)
        );
        assert_eq!(
            a(json!({"type": "open_page", "url": "https://example.com/x"})).as_deref(),
            Some(r#"{"url":"https://example.com/x"}"#)
        );
        assert_eq!(
            a(json!({"type": "find_in_page", "url": "https://e.com", "pattern": "answer"}))
                .as_deref(),
            Some(r#"{"pattern":"answer","url":"https://e.com"}"#)
        );
        // An empty action says nothing; the end event's query does.
        assert_eq!(a(json!({})), None);
        assert_eq!(arguments(None, None), None);
        assert_eq!(
            arguments(Some(&json!({})), Some(&json!("TypeScript 5.0 whats new"))).as_deref(),
            Some(r#"{"query":"TypeScript 5.0 whats new"}"#)
        );
    }

    #[test]
    fn results_are_listed_when_recorded_and_their_absence_is_said() {
        assert_eq!(result_text(None), NO_RESULTS);
        assert_eq!(result_text(Some(&json!([]))), NO_RESULTS);
        assert_eq!(
            result_text(Some(&json!([
                {"title": "Complete result", "url": "https://example.test"},
                {"url": 7, "title": null, "snippet": {"x": 1}},
                {"url": "https://only.url"}
            ]))),
            "Complete result — https://example.test\nhttps://only.url"
        );
    }
}

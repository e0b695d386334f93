//! The cheap slice one enrichment call sees (record §6.1): the human request(s), the first
//! and last assistant message, each capped, plus the head of the body for grounding — and
//! the chat messages that carry it. Pure.

use serde_json::{json, Value};

/// How much of a chapter one call may see.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SliceLimits {
    /// Cap on each message, in characters.
    pub message_chars: usize,
    /// Most human requests carried.
    pub max_requests: usize,
    /// Head of the body, in characters (~200 tokens at 4 characters a token).
    pub body_head_chars: usize,
}

impl Default for SliceLimits {
    fn default() -> Self {
        SliceLimits {
            message_chars: 1200,
            max_requests: 4,
            body_head_chars: 800,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Slice {
    pub requests: Vec<String>,
    pub first_assistant: Option<String>,
    pub last_assistant: Option<String>,
    pub body_head: String,
}

/// Cut at a character boundary, marking the cut.
fn cap(text: &str, chars: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

pub fn slice(body: &str, limits: &SliceLimits) -> Slice {
    use crate::render::read::{messages, Speaker};
    // The body's own reader: a speaker line typed inside a message is message text.
    let blocks: Vec<(&'static str, String)> = messages(body)
        .into_iter()
        .filter_map(|m| match m.speaker {
            Speaker::User => Some(("user", m.text)),
            Speaker::Assistant => Some(("assistant", m.text)),
            Speaker::AgentMessage | Speaker::DelegateReport | Speaker::HostNotice => None,
        })
        .collect();
    let assistant: Vec<&String> = blocks
        .iter()
        .filter(|(r, t)| *r == "assistant" && !t.trim().is_empty())
        .map(|(_, t)| t)
        .collect();
    Slice {
        requests: blocks
            .iter()
            .filter(|(r, t)| *r == "user" && !t.trim().is_empty())
            .take(limits.max_requests)
            .map(|(_, t)| cap(t, limits.message_chars))
            .collect(),
        first_assistant: assistant.first().map(|t| cap(t, limits.message_chars)),
        last_assistant: (assistant.len() > 1)
            .then(|| assistant.last().map(|t| cap(t, limits.message_chars)))
            .flatten(),
        body_head: cap(body, limits.body_head_chars),
    }
}

/// The instruction: one JSON object, nothing else. Rules are asked for only when mining is on.
pub fn system_prompt(mine_rules: bool, rules_cap: u64) -> String {
    let mut prompt = String::from(
        "You label one chapter of an AI coding agent's past work so it can be found again.\n\
         Answer with ONE JSON object and nothing else:\n\
         {\"title\": one sentence (at most 120 characters) naming the task, \
         \"summary\": at most three sentences on what was done and found, \
         \"topics\": 1 to 10 short lowercase topic labels (kebab-case)",
    );
    if mine_rules {
        prompt.push_str(&format!(
            ", \"rules\": at most {rules_cap} standing orders the human gave for future work, \
             each {{\"text\": the order, \"label\": \"stated\" if a human sentence says it verbatim, \
             else \"inferred\", \"category\": one word}} — [] when there are none"
        ));
    }
    prompt.push_str("}.");
    prompt
}

/// Every human request of a body, uncapped: what a `stated` rule is checked against.
pub fn human_text(body: &str) -> Vec<String> {
    let unlimited = SliceLimits {
        message_chars: usize::MAX,
        max_requests: usize::MAX,
        body_head_chars: 0,
    };
    slice(body, &unlimited).requests
}

/// The instruction of a dedicated mining call (`rulesModel`): rules only.
pub fn mining_prompt(rules_cap: u64) -> String {
    format!(
        "You read one chapter of an AI coding agent's past work and list the standing orders \
         the human gave for future work. Answer with ONE JSON object and nothing else: \
         {{\"rules\": at most {rules_cap} items, each {{\"text\": the order, \"label\": \"stated\" \
         if a human sentence says it verbatim, else \"inferred\", \"category\": one word}} — [] when \
         there are none}}."
    )
}

/// The chat messages of a dedicated mining call.
pub fn mining_messages(slice: &Slice, rules_cap: u64) -> Value {
    let mut messages = messages(slice, false, rules_cap);
    messages[0]["content"] = Value::String(mining_prompt(rules_cap));
    messages
}

/// The chat messages of one call.
pub fn messages(slice: &Slice, mine_rules: bool, rules_cap: u64) -> Value {
    let mut user = String::new();
    for (n, request) in slice.requests.iter().enumerate() {
        user.push_str(&format!("## Human request {}\n{request}\n\n", n + 1));
    }
    if let Some(first) = &slice.first_assistant {
        user.push_str(&format!("## First assistant message\n{first}\n\n"));
    }
    if let Some(last) = &slice.last_assistant {
        user.push_str(&format!("## Last assistant message\n{last}\n\n"));
    }
    user.push_str(&format!("## Start of the chapter\n{}\n", slice.body_head));
    json!([
        {"role": "system", "content": system_prompt(mine_rules, rules_cap)},
        {"role": "user", "content": user},
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "# T\n\n> s\n\n**User** · seq 6\n\nFix the refresh check.\n\n**Assistant** · seq 8\n\nLooking.\n\n**Tool call** `bash` · `c1` · seq 9\n\n```json\n{}\n```\n\n**Tool result** `bash` · `c1` · seq 10\n\n```\nok\n```\n\n**User** · seq 12\n\nADD RULE: run tests first\n\n**Assistant** · seq 14\n\nFixed it.\n";

    #[test]
    fn takes_requests_and_first_and_last_assistant_messages() {
        let s = slice(BODY, &SliceLimits::default());
        assert_eq!(
            s.requests,
            vec!["Fix the refresh check.", "ADD RULE: run tests first"]
        );
        assert_eq!(s.first_assistant.as_deref(), Some("Looking."));
        assert_eq!(s.last_assistant.as_deref(), Some("Fixed it."));
        let m = messages(&s, true, 3);
        let user = m[1]["content"].as_str().unwrap();
        assert!(user.contains("## Human request 2\nADD RULE"));
        assert!(m[0]["content"]
            .as_str()
            .unwrap()
            .contains("at most 3 standing orders"));
        assert!(!messages(&s, false, 3)[0]["content"]
            .as_str()
            .unwrap()
            .contains("rules"));
    }

    #[test]
    fn caps_every_part_and_survives_odd_bodies() {
        let huge = format!("**User** · seq 1\n\n{}\n", "x".repeat(100_000));
        let s = slice(&huge, &SliceLimits::default());
        assert_eq!(s.requests[0].chars().count(), 1201);
        assert!(s.body_head.chars().count() <= 801);
        for odd in [
            "",
            "**",
            "**User**",
            "**User** · seq",
            "\u{0}\u{feff}**Assistant** · seq 1\n",
        ] {
            let s = slice(odd, &SliceLimits::default());
            assert!(s.requests.len() <= 1);
        }
        // A single assistant message is the first, not also the last.
        let s = slice("**Assistant** · seq 1\n\nonly\n", &SliceLimits::default());
        assert_eq!(s.first_assistant.as_deref(), Some("only"));
        assert_eq!(s.last_assistant, None);
        // Multi-byte text is cut on a character boundary.
        let s = slice(
            &format!("**User** · seq 1\n\n{}\n", "é".repeat(2000)),
            &SliceLimits::default(),
        );
        assert!(s.requests[0].ends_with('…'));
    }
}

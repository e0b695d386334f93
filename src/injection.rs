//! Whose words a user-role message holds (amendments 2026-09-21, 2026-10-10, 2026-10-22).
//! One predicate pair shared by the signature layer (strict) and the render screen, so
//! the two can never drift. Pure.

use crate::session::event::MessageSource;

pub(crate) mod relay;
mod spans;
pub use relay::relayed_words;
pub use spans::{screen_spans, unscreened_text, Piece, SpanKind};

/// Strictly the human: only `source.kind == "user"` feeds topic signatures and rules.
pub fn is_human_authored(source: &MessageSource) -> bool {
    source.kind == "user"
}

/// Whether a user-role message is archived as conversation. The human always is; host
/// injections are screened except the named producer+form exceptions: delegate reports
/// (`agent-message`/`relay`, `subagent-settled`/`notice`), a teammate's message
/// (`team-message`, DSH's Agent Teams) and the plan-mode flip notice (`plugin` named
/// `plan-mode`, form `notice`).
///
/// Screened (a marker each, never terms), as seen in DSH 0.2.x logs: `user-approval` (a
/// policy-change notice), `runtime-context`, `time-context`, `skill-catalog`,
/// `system-prompt` (v3: `plugin` named `@deepseek-ai/dsh-system-prompt`), `dsh-mnemon` (a
/// memory plugin's injection), `dsh-session-title-llm`, `agent-instructions`,
/// `compact-checkpoint`. Anything unknown — a new kind, a message without `source` — is
/// screened too: it is most likely re-derivable host state, a wrong keep would leak
/// instruction files into the pool, and the marker still says it was there.
pub fn is_conversation(source: &MessageSource) -> bool {
    if is_human_authored(source) {
        return true;
    }
    let form = source.form.as_deref();
    match source.kind.as_str() {
        "agent-message" => form == Some("relay"),
        // Agent Teams: a teammate's message in the target's session (the lead's task to a
        // member among them) — another agent's words, as a relay is.
        "team-message" => true,
        "subagent-settled" => form == Some("notice"),
        "plugin" => source.name.as_deref() == Some("plan-mode") && form == Some("notice"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(kind: &str, name: Option<&str>, form: Option<&str>) -> MessageSource {
        MessageSource {
            kind: kind.into(),
            name: name.map(Into::into),
            form: form.map(Into::into),
        }
    }

    #[test]
    fn human_is_both() {
        let s = src("user", None, None);
        assert!(is_human_authored(&s));
        assert!(is_conversation(&s));
    }

    #[test]
    fn delegate_reports_are_conversation_but_not_human() {
        for s in [
            src("agent-message", None, Some("relay")),
            src("subagent-settled", None, Some("notice")),
        ] {
            assert!(is_conversation(&s));
            assert!(!is_human_authored(&s));
        }
    }

    /// Every source kind DSH 0.2.x logs carry on a user-role message, read from the JSON
    /// as the log has it, classified: human, delegate report, or host-injected.
    #[test]
    fn dsh_source_kinds_classified() {
        use crate::session::event::parse_source;
        use serde_json::json;
        let cases = [
            (json!({"kind": "user", "rpcId": "r"}), true, true),
            (
                json!({"kind": "agent-message", "form": "relay"}),
                false,
                true,
            ),
            (
                json!({"kind": "subagent-settled", "form": "notice"}),
                false,
                true,
            ),
            (
                json!({"kind": "team-message", "teamId": "lead", "messageId": "m1", "senderId": "lead", "senderName": "lead"}),
                false,
                true,
            ),
            (json!({"kind": "user-approval"}), false, false),
            (
                json!({"kind": "runtime-context", "form": "snapshot"}),
                false,
                false,
            ),
            (json!({"kind": "time-context"}), false, false),
            (json!({"kind": "skill-catalog"}), false, false),
            (json!({"kind": "system-prompt"}), false, false),
            (json!({"kind": "dsh-mnemon"}), false, false),
            (json!({"kind": "dsh-session-title-llm"}), false, false),
            (
                json!({"kind": "agent-instructions", "form": "instructions"}),
                false,
                false,
            ),
            (
                json!({"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt", "form": "snapshot"}),
                false,
                false,
            ),
            (json!({"kind": "some-future-kind"}), false, false),
            (json!({}), false, false),
        ];
        for (source, human, conversation) in cases {
            let s = parse_source(Some(&source));
            assert_eq!(is_human_authored(&s), human, "{source}");
            assert_eq!(is_conversation(&s), conversation, "{source}");
        }
        let none = parse_source(None);
        assert!(!is_human_authored(&none) && !is_conversation(&none));
    }

    #[test]
    fn instructions_and_host_context_are_screened() {
        for s in [
            src("agent-instructions", None, Some("instructions")),
            src("agent-instructions", None, Some("relay")),
            src("skill-catalog", None, None),
            src("runtime-context", None, None),
            src("system-prompt", None, None),
            src("compact-checkpoint", None, None),
            src("plugin", Some("chapters"), Some("notice")),
            src("plugin", Some("plan-mode"), Some("instructions")),
            src("unknown", None, None),
        ] {
            assert!(!is_conversation(&s), "{s:?} must be screened");
        }
        assert!(is_conversation(&src(
            "plugin",
            Some("plan-mode"),
            Some("notice")
        )));
    }
}

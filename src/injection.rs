//! Whose words a user-role message holds (amendments 2026-09-21, 2026-10-10, 2026-10-22).
//! One predicate pair shared by the signature layer (strict) and the render screen, so
//! the two can never drift. Pure.

use crate::session::event::MessageSource;

mod spans;
pub use spans::{screen_spans, unscreened_text, Piece, SpanKind};

/// Strictly the human: only `source.kind == "user"` feeds topic signatures and rules.
pub fn is_human_authored(source: &MessageSource) -> bool {
    source.kind == "user"
}

/// Whether a user-role message is archived as conversation. The human always is; host
/// injections are screened except the named producer+form exceptions: delegate reports
/// (`agent-message`/`relay`, `subagent-settled`/`notice`) and the plan-mode flip notice
/// (`plugin` named `plan-mode`, form `notice`). Anything unknown is screened — it is
/// re-derivable host state, and a wrong keep would leak instruction files into the pool.
pub fn is_conversation(source: &MessageSource) -> bool {
    if is_human_authored(source) {
        return true;
    }
    let form = source.form.as_deref();
    match source.kind.as_str() {
        "agent-message" => form == Some("relay"),
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

//! The daemon's runtime errors: logged, kept for `daemon status` (`lastErrors`), and the
//! daemon carries on. (Critical errors — those it cannot continue after — are
//! `DaemonError`s and stop it.)

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::context::now_ms;

/// Runtime errors kept for `status`.
const ERRORS_KEPT: usize = 32;

#[derive(Default)]
pub(super) struct RuntimeErrors {
    kept: VecDeque<Value>,
}

impl RuntimeErrors {
    /// Log one and keep it (the oldest goes past [`ERRORS_KEPT`]).
    pub fn push(&mut self, what: &str, detail: &str) {
        // A reader's message may quote a damaged log line's value (a credential where a
        // number belonged): the log file and `daemon status` get it through the rules.
        let detail = crate::redact::echo(detail);
        tracing::warn!(what, "{detail}");
        if self.kept.len() == ERRORS_KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back(json!({
            "at": crate::time::rfc3339_utc(now_ms()),
            "what": what,
            "detail": detail,
        }));
    }

    pub fn to_json(&self) -> Value {
        json!(self.kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_errors_are_kept_oldest_out_first() {
        let mut errors = RuntimeErrors::default();
        for i in 0..ERRORS_KEPT + 3 {
            errors.push("test", &format!("error {i}"));
        }
        let kept = errors.to_json();
        let kept = kept.as_array().expect("an array");
        assert_eq!(kept.len(), ERRORS_KEPT);
        assert_eq!(kept[0]["detail"], "error 3");
        assert_eq!(kept[ERRORS_KEPT - 1]["what"], "test");
    }
}

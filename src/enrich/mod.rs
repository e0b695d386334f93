//! Idle-time model enrichment (record §6): better titles, summaries and topics for archived
//! chapters from any OpenAI-compatible chat-completions endpoint — validated, provenance-
//! tagged, re-runnable, and never in the way.
//!
//! `slice` (what one call sees) and `answer` (what a valid answer is) are pure; `http` is
//! the one network call; `run` walks the store, calls one chapter at a time (the target
//! server is single-slot), and writes through the store's one sanctioned chapter rewrite.

pub mod answer;
pub mod curl;
pub mod http;
pub mod run;
pub mod slice;

/// Politeness of a thread that runs enrichment: its model calls and rewrites are background
/// work and yield the CPU to signing and archiving.
pub const BACKGROUND_NICE: i32 = 10;

/// Lower the calling thread's CPU priority (Linux keeps a nice value per thread; elsewhere
/// it is the process's). A failure only costs politeness, so it is logged, not returned.
pub fn run_in_background() {
    if let Err(e) = rustix::process::nice(BACKGROUND_NICE) {
        tracing::debug!(error = %e, "could not lower the enrichment thread's priority");
    }
}

/// The name under `$DSH_HOME/dsh-chapters/credentials/` that holds the endpoint's API key.
pub const KEY_NAME: &str = "enrichment-api-key";

/// The text of one chat completion, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// The first choice's text; empty when a 2xx answer held none (an invalid answer, not a
    /// dead endpoint).
    Content(String),
    /// Unreachable, refused, an HTTP error status or an unreadable response: what happened.
    Failed(String),
    TimedOut(String),
}

/// One chat-completions call (`<endpoint>/chat/completions`): temperature 0, no streaming,
/// `enrichmentMaxTokens`, `enrichmentTimeoutMs`; `model` empty = the endpoint's default.
/// The one request shape enrichment, mining and `rule conflicts` share.
pub fn chat(
    endpoint: &http::Endpoint,
    config: &crate::config::Config,
    key: Option<&crate::pool::credentials::Secret>,
    model: &str,
    messages: &serde_json::Value,
) -> Completion {
    use serde_json::{json, Value};
    let mut request = json!({
        "messages": messages,
        "max_tokens": config.enrichment_max_tokens,
        "temperature": 0,
        "stream": false,
    });
    if !model.is_empty() {
        request["model"] = Value::String(model.to_owned());
    }
    let body = serde_json::to_vec(&request).expect("a JSON value always serializes");
    let timeout = std::time::Duration::from_millis(config.enrichment_timeout_ms);
    match endpoint.post_json("chat/completions", &body, key, timeout) {
        Err(e) if e.is_timeout() => Completion::TimedOut(e.to_string()),
        Err(e) => Completion::Failed(e.to_string()),
        Ok((status, bytes)) if !(200..300).contains(&status) => Completion::Failed(format!(
            "{} answered HTTP {status}: {}",
            endpoint.describe(),
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        )),
        Ok((_, bytes)) => Completion::Content(
            serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|v| {
                    v["choices"][0]["message"]["content"]
                        .as_str()
                        .map(str::to_owned)
                })
                .unwrap_or_default(),
        ),
    }
}

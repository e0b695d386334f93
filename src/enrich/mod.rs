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

/// A failed call to a model endpoint, over plain HTTP (`http`) or through `curl`: both
/// transports report their failures in these words, so the type lives above them both.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{url:?} is not an endpoint this program can call: {why}")]
    BadUrl { url: String, why: String },
    #[error("cannot reach {endpoint}: {source}; is the model server running there? (`chapters enrich model --endpoint URL` changes it)")]
    Connect {
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{endpoint} did not answer within {ms} ms; a slow model needs a larger `enrichmentTimeoutMs`")]
    Timeout { endpoint: String, ms: u128 },
    #[error("{endpoint}: {source}")]
    Io {
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{endpoint} sent a response this client cannot read: {why}")]
    Malformed { endpoint: String, why: String },
}

impl HttpError {
    pub fn is_timeout(&self) -> bool {
        matches!(self, HttpError::Timeout { .. })
    }
}

/// Politeness of a thread that runs enrichment: its model calls and rewrites are background
/// work and yield the CPU to signing and archiving.
pub const BACKGROUND_NICE: i32 = 10;

/// Make the calling thread background work: nice [`BACKGROUND_NICE`] for its CPU work
/// (parsing, rendering, redaction) and the idle I/O class for its reads and data syncs.
/// Both are per thread on Linux, so the daemon's signing thread keeps its priority. A
/// failure only costs politeness, so it is logged, not returned.
pub fn run_in_background() {
    let tid = rustix::thread::gettid();
    // Absolute, never raised: a caller started under `nice -n 15` stays at 15, and a
    // second call does not push the thread further down.
    let nice = rustix::process::getpriority_process(Some(tid))
        .map_or(BACKGROUND_NICE, |now| now.max(BACKGROUND_NICE));
    if let Err(e) = rustix::process::setpriority_process(Some(tid), nice) {
        tracing::debug!(error = %e, "could not lower the enrichment thread's priority");
    }
    idle_io(tid.as_raw_nonzero().get());
}

/// Put thread `tid` in the idle I/O class (`ionice -c 3`): the block layer serves its
/// requests only when no one else's are waiting. The schedulers that order by class
/// (`bfq`, and `mq-deadline` since Linux 5.14, which ages a starved request after 10 s)
/// honour it; `none` ignores it. Through the `ionice` program because `ioprio_set` has no
/// safe binding and this crate forbids `unsafe`. Only enrichment's own requests wait: its
/// chapter and status bytes are synced before the writer lock is taken
/// (`store::atomic::Staged`), so no lock is held across them.
fn idle_io(tid: i32) {
    let outcome = std::process::Command::new("ionice")
        .args(["-c", "3", "-p", &tid.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match outcome {
        Ok(status) if status.success() => {}
        Ok(status) => {
            tracing::debug!(%status, "ionice refused to lower the enrichment thread's I/O class")
        }
        Err(e) => {
            tracing::debug!(error = %e, "no ionice to lower the enrichment thread's I/O class")
        }
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
    key: Option<&crate::credentials::Secret>,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn nice_of(tid: rustix::process::Pid) -> i32 {
        rustix::process::getpriority_process(Some(tid)).unwrap()
    }

    #[test]
    fn background_work_lowers_only_its_own_thread() {
        let caller = rustix::thread::gettid();
        let before = nice_of(caller);
        let (nice, again, class) = std::thread::spawn(|| {
            let me = rustix::thread::gettid();
            run_in_background();
            let nice = nice_of(me);
            run_in_background();
            let class = std::process::Command::new("ionice")
                .args(["-p", &me.as_raw_nonzero().get().to_string()])
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
            (nice, nice_of(me), class)
        })
        .join()
        .unwrap();
        assert_eq!(nice, before.max(BACKGROUND_NICE));
        assert_eq!(again, nice, "a second call does not lower it further");
        assert_eq!(
            nice_of(caller),
            before,
            "the calling thread keeps its priority"
        );
        match class {
            Some(class) => assert_eq!(class, "idle"),
            None => eprintln!("no ionice here: the I/O class is not checked"),
        }
    }
}

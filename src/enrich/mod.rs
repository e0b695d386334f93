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

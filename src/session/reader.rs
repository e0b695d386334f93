//! The log reader: multi-frame zstd or plain JSONL, streamed with bounded memory,
//! resumable from a saved byte offset. A torn last frame/line keeps every complete
//! record before it. Seq gaps/repeats are reported by file and seq.
//!
//! OWNER: session helper. Interface is fixed; implementation pending.

use std::path::{Path, PathBuf};

use super::event::{Event, Header};

/// Where to resume reading. `byte_offset` is always at a frame boundary (zstd) or
/// just after a newline (plain), so re-opening there decodes cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResumePoint {
    pub byte_offset: u64,
    /// The seq the next event must carry (0 before the first event).
    pub next_seq: u64,
    /// Whether the header line has been consumed.
    pub header_seen: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LogItem {
    Header(Header),
    Event(Event),
}

/// A note about the log that is not fatal (the torn tail).
#[derive(Debug, Clone, PartialEq)]
pub enum ReadNote {
    /// The last frame or line was incomplete; it was skipped. `at` is its byte offset.
    TornTail { file: PathBuf, at: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read session log {file}: {source}; check that it exists and is readable")]
    Io { file: PathBuf, #[source] source: std::io::Error },
    #[error("session log {file}: corrupt zstd frame at byte {at}: {detail}; the log is damaged from there on — nothing after it was read")]
    CorruptFrame { file: PathBuf, at: u64, detail: String },
    #[error("session log {file}: line after seq {after_seq:?} is not valid JSON ({detail}); the log is damaged there")]
    BadLine { file: PathBuf, after_seq: Option<u64>, detail: String },
    #[error("session log {file}: line after seq {after_seq:?} is longer than {limit} bytes; refusing to read it")]
    LineTooLong { file: PathBuf, after_seq: Option<u64>, limit: usize },
    #[error("session log {file}: line after seq {after_seq:?} is not valid UTF-8")]
    InvalidUtf8 { file: PathBuf, after_seq: Option<u64> },
    #[error("session log {file}: seq gap — expected seq {expected}, found {found}")]
    SeqGap { file: PathBuf, expected: u64, found: u64 },
    #[error("session log {file}: seq {seq} repeated (expected {expected})")]
    SeqRepeat { file: PathBuf, seq: u64, expected: u64 },
    #[error("session log {file}: the first line is not a session header ({detail})")]
    BadHeader { file: PathBuf, detail: String },
}

/// Streaming reader over one log file.
pub struct LogReader {
    _private: (),
}

impl LogReader {
    /// Open `path` (zstd if the name ends in `.zstd`, else plain) at `from`.
    pub fn open(path: &Path, from: ResumePoint) -> Result<Self, ReadError> {
        let _ = (path, from);
        unimplemented!("session reader pending")
    }

    /// Next header or event; `Ok(None)` at the end of complete data.
    pub fn next_item(&mut self) -> Result<Option<LogItem>, ReadError> {
        unimplemented!("session reader pending")
    }

    /// Where a later reader should resume: just after the last item returned whose
    /// frame/line is complete and fully delivered.
    pub fn resume_point(&self) -> ResumePoint {
        unimplemented!("session reader pending")
    }

    /// Non-fatal notes gathered so far (torn tail).
    pub fn notes(&self) -> &[ReadNote] {
        unimplemented!("session reader pending")
    }
}

//! The one reader/appender of every JSONL ledger (collections, later curation facts):
//! a version on every line, a torn last line skipped with a note (and cut before the
//! next append), a corrupt middle line refused by name and never appended past,
//! byte-identical duplicate lines read once. OWNER: store helper.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LedgerRead {
    pub lines: Vec<serde_json::Value>,
    /// Set when the last line was torn (a killed write) and skipped.
    pub torn_tail: Option<String>,
    pub duplicates_skipped: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{file}: line {line} is corrupt ({detail}); the ledger is damaged in the middle — refusing to read past or append to it. Restore the line from git or a backup")]
    CorruptLine { file: PathBuf, line: u64, detail: String },
    #[error("{file}: line {line} has format version {version}, newer than this program reads ({known}); upgrade dsh-chapters")]
    UnknownVersion { file: PathBuf, line: u64, version: u64, known: u64 },
    #[error("{file}: {source}")]
    Io { file: PathBuf, #[source] source: std::io::Error },
}

//! The deterministic signature of one completed turn (record §4.1 with its amendments).
//! Pure. OWNER: compose helper.

use serde::{Deserialize, Serialize};

use crate::turn::CompletedTurn;

/// One collection line (`collections/<sessionId>.jsonl`), contract format plus `v`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// Line format version.
    pub v: u32,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    pub turn: u64,
    pub seqs: Vec<u64>,
    pub paths: Vec<String>,
    pub commands: Vec<String>,
    pub terms: Vec<String>,
    pub size: u64,
    pub by: String,
    pub at: String,
    /// `reason.kind` of the turn's `turn/end`.
    pub reason: String,
}

pub const SIGNATURE_VERSION: u32 = 1;

/// Sign one turn. `workspace` is the absolute workspace root, used to make paths
/// repo-relative; `at` is the RFC 3339 time stamp to record.
pub fn sign(turn: &CompletedTurn, session_id: &str, workspace: &str, at: &str) -> Signature {
    let _ = (turn, session_id, workspace, at);
    unimplemented!("compose helper pending")
}

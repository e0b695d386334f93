//! The knowledge pool: a git repository shared by every harness of a project (record §2,
//! §3, §5). The workspace store stays the truth; the pool is transport.
//!
//! - `credentials`: the per-project token at rest (0600 under the DSH home).
//! - `plan` (pure): the store → pool mapping, what the pool lacks, the namespace rule.
//! - `transport`: fetch and push of network pools through the `git` program, with failures
//!   reduced to machine-readable codes.

pub mod credentials;
pub mod link;
pub mod plan;
pub mod transport;

//! The catalog of every document the store and the pool mirror hold, below the published
//! topic index and the search door (both read it; it reads neither).
//!
//! - `table` (shell): every document's frontmatter read once, kept as append-only segments
//!   with postings and a change log, so nothing above it parses the corpus.
//! - `cache` (shell): the full-text cache (SQLite FTS5) filled from the table's change log.
//! - `query` (pure): query words, CJK bigrams, dates and snippets.
//! - `score` (pure): the deterministic §8 scorer and packer; `rank` over every document is
//!   the oracle the table's and the cache's answers are tested against.

pub mod cache;
pub mod query;
pub mod score;
pub mod table;

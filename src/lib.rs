//! dsh-chapters: a shared, searchable memory of AI coding agents' past work.
//!
//! Modules follow the data flow: session log → turn → signature → composition →
//! render/redact → store → catalog → topics → search → pool. The pure core (`turn`, `signature`,
//! `compose`, `redact`, `render`, `identity::canonical`) takes bytes, a clock value and ids
//! and returns values; the shell (`store`, `archive`, `cli`) performs the I/O the core
//! decides. `docs/architecture.md` has the codemap in the same order.

// Leaves every stage uses: names and hashes, time, the owner-only home, secrets at rest,
// git objects and refs (gix), opening a file that must be a regular one.
pub mod credentials;
pub mod git;
pub mod home;
pub mod names;
pub mod regular_file;
pub mod time;

// Reading: a harness's logs, normalized events, host-injected spans, completed turns.
pub mod injection;
pub mod session;
pub mod source;
pub mod turn;

// Deciding: a turn's signature and its ledger, chapters composed from them.
pub mod compose;
pub mod signature;
pub mod signer;

// Writing: the redaction chokepoint, the documents, where and as whom they go, the store.
pub mod archive;
pub mod config;
pub mod identity;
pub mod redact;
pub mod render;
pub mod resolve;
pub mod store;

// What people and the model add: curation facts, rules, enrichment.
pub mod curation;
pub mod enrich;
pub mod rules;

// Finding again: the catalog of every document (table, scorer, full-text cache), the
// published topic index built from it, and the search door over both.
pub mod catalog;
pub mod search;
pub mod topics;

// Sharing: the pool.
pub mod pool;

// Doors and reports: the daemon, the MCP server, status, scan, the demo.
pub mod daemon;
pub mod demo;
pub mod mcp;
pub mod scan;
pub mod status;

// Measurement and generators for the tests and benchmarks (the `testkit` feature).
#[cfg(any(test, feature = "testkit"))]
pub mod quality;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;

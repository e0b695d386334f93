//! dsh-chapters: a shared, searchable memory of AI coding agents' past work.
//!
//! Modules follow the data flow: session log → turn → signature → composition →
//! render/redact → store. The pure core (`turn`, `signature`, `compose`, `redact`,
//! `render`, `identity::canonical`) takes bytes, a clock value and ids and returns
//! values; the shell (`store`, `archive`, `cli`) performs the I/O the core decides.

pub mod archive;
pub mod compose;
pub mod config;
pub mod credentials;
pub mod curation;
pub mod daemon;
pub mod demo;
pub mod enrich;
pub mod home;
pub mod identity;
pub mod index;
pub mod injection;
pub mod mcp;
pub mod names;
pub mod pool;
pub mod quality;
pub mod redact;
pub mod render;
pub mod resolve;
pub mod rules;
pub mod scan;
pub mod search;
pub mod search_door;
pub mod session;
pub mod signature;
pub mod signer;
pub mod source;
pub mod status;
pub mod store;
pub mod time;
pub mod turn;

//! The one integration-test binary: real files, real zstd logs, the real `chapters` binary.

mod archive;
mod bad_input;
mod crash;
mod daemon;
mod durable;
mod enrich;
mod fulltext;
mod githttp;
mod identity;
mod index;
mod mcp;
mod pool;
mod rules;
mod search;
mod shape;
mod support;
mod transport;

//! The one integration-test binary: real files, real zstd logs, the real `chapters` binary.

mod archive;
mod bad_input;
mod crash;
mod daemon;
mod doors;
mod durable;
mod enrich;
mod githttp;
mod identity;
mod index;
mod mcp;
mod pool;
mod rules;
mod search;
mod shape;
mod ssh;
mod support;
mod transport;

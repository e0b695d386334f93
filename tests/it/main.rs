//! The one integration-test binary: real files, real zstd logs, the real `chapters` binary.

mod archive;
mod bad_input;
mod crash;
mod daemon;
mod enrich;
mod forget;
mod githttp;
mod index;
mod mcp;
mod pool;
mod rules;
mod search;
mod shape;
mod support;
mod transport;

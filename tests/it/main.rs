//! The one integration-test binary: real files, real zstd logs, the real `chapters` binary.

mod archive;
mod bad_input;
mod claude_code;
mod crash;
mod daemon;
mod doors;
mod dsh_real;
mod durable;
mod enrich;
mod forget;
mod fulltext;
mod githttp;
mod identity;
mod index;
mod link_user;
mod mcp;
mod pool;
mod privacy;
mod redaction_corpus;
mod rules;
mod scripts;
mod search;
mod shape;
mod ssh;
mod support;
mod transport;

//! The one integration-test binary: real files, real zstd logs, the real `chapters` binary.

mod archive;
mod bad_input;
mod crash;
mod githttp;
mod index;
mod pool;
mod search;
mod shape;
mod support;
mod transport;

//! Generators for the tests and benchmarks, never in the shipped program: built for this
//! crate's unit tests and behind the `testkit` cargo feature (off by default; the
//! integration tests and benchmarks turn it on through a dev-dependency on this crate).
//! `tests/it/shape.rs` fails when a module of the product names one of them.
//!
//! - [`writer`]: real DSH session logs (zstd multi-frame or plain), turn by turn, in any
//!   format generation, and a generator of varied sessions of any size;
//! - [`realshape`]: sessions in today's real DSH shape (the archive benchmark's);
//! - [`labelled`]: sessions whose turns say which task they belong to (composition quality);
//! - [`demo_session`]: the session `chapters demo` shows, recorded once into
//!   `src/demo/session.v4.jsonl.zst`;
//! - [`catalog`]: documents put in place by hand recorded in the store's catalog, as `Store`
//!   records what it writes.

pub mod catalog;
pub mod demo_session;
pub mod labelled;
pub mod realshape;
pub mod writer;

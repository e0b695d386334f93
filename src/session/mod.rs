//! DSH session logs: discovery by cwd key, the frame reader (zstd and plain), event model
//! and generation normalizing (v0–v4). Bytes in, events out.

pub mod attachment;
pub mod cwdkey;
pub mod discover;
pub mod event;
mod frames;
pub mod lineage;
pub mod normalize;
pub mod reader;
pub mod renumber;

pub use event::{Event, Header};

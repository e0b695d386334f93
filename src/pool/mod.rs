//! The knowledge pool: a git repository shared by every harness of a project (record §2,
//! §3, §5). The workspace store stays the truth; the pool is transport.
//!
//! - `pack`: after a publish, its objects go into one pack (`git pack-objects`, through
//!   `transport`'s isolated command) and the packs are consolidated when they pile up.
//! - `plan` (pure): the store → pool mapping, what the pool lacks, the namespace rule.
//! - `link`: which pool this workspace publishes to, under which declared visibility.
//! - `crate::git` (a leaf beside it): the shell layer over gix — objects, trees, commits,
//!   compare-and-swap ref moves and the local object copy behind a fast-forward-only publish.
//! - `crate::store::mirror`: the packed mirror — the pool's objects in the mirror's git
//!   directory, read by the search table and cache as the store's other read side.
//! - `publish_lock`: the publish queue of a local pool (a flock beside its ref), so its
//!   publishers take turns instead of racing; the ref's compare-and-swap stays the guard.
//! - `readme` (pure): the pool's landing pages, `README.md` and `index/README.md`.
//! - `sync`: pull, plan, commit, publish, materialize — under the writer lock.
//! - `transport`: fetch and push of network pools through the `git` program, with failures
//!   reduced to machine-readable codes.

pub mod link;
pub mod pack;
pub mod plan;
pub mod publish_lock;
pub mod readme;
pub mod sync;
pub mod transport;

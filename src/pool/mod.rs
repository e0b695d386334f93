//! The git knowledge pool (design record §2.2, §3): the per-project repository that carries
//! chapters, artifacts and collections between machines.
//!
//! `git` is the shell layer over gix — objects, trees, commits, compare-and-swap ref moves and
//! the local object copy behind a fast-forward-only publish. No `git` program is ever run.

pub mod git;

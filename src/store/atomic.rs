//! Atomic file writes: temp file in the same directory, fsync, rename, fsync the directory.

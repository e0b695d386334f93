//! Project identity (record §2.3, contract "Project identity"): projectKey = UUIDv5 over the
//! canonical remote, read from `.git/config` without the git program; override; path-derived
//! fallback flagged. Also the harness id and the workspace root. OWNER: store helper.

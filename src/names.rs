//! Names: what is safe as one path component, and content names (SHA-256 digests in
//! lowercase hex: artifact files, rule ids, `sha256:` frontmatter, manifest parts). A leaf
//! (no module of this crate below it), so the store (session and root ids), identity
//! (harness ids), the render, the rules, the index and the pool share one rule and one hash
//! without depending on each other. Pure.

/// Longest id accepted: room for our suffixes and temp-file decorations within the 255-byte
/// file name limit (session ids are 36-character UUIDs).
const MAX_ID_BYTES: usize = 128;

/// A name safe as one path component: non-empty, at most [`MAX_ID_BYTES`] bytes, no separator, no
/// `..`, no control character, no leading `.` (which would also hide it, or collide with
/// our own dot-files).
pub fn is_safe_component(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_BYTES
        && !id.starts_with('.')
        && !id.contains("..")
        && !id.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}

/// A path as JSON text (`#[serde(serialize_with = "crate::names::path_text")]`): the same
/// string serde writes for a UTF-8 path, and for one that is not UTF-8 (a workspace under a
/// Latin-1 directory name) its bytes lossily decoded — reported, never a serialization
/// failure.
pub fn path_text<S: serde::Serializer>(path: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

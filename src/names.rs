//! Names safe as one path component: a leaf (no module of this crate below it), so the store
//! (session and root ids) and identity (harness ids) share the rule without depending on
//! each other. Pure.

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

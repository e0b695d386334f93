//! Names: what is safe as one path component, and content names (SHA-256 digests in
//! lowercase hex: artifact files, rule ids, `sha256:` frontmatter, manifest parts; git's
//! blob ids), a field on one line, an error's causes said once, and the link a chapter
//! writes to its artifact where the pool keeps it. A leaf (no module of this crate below
//! it), so the store (session and root ids), identity (harness ids), the render, the rules,
//! the index and the pool share one rule and one hash without depending on each other. Pure.

/// File names in the order written (a list in JSON), held as one text, a name a line: an
/// archive of thousands of chapters keeps one block, not a block per name. Names with no line
/// break only (a document's name: `Store::write_document_in` refuses one).
///
/// What an archive holds that grows with the session is kept this way: blocks that live the
/// whole run, allocated among a thread's large transient ones, kept its heap from shrinking
/// (peak RSS grew with the log by ~1.5 times their bytes), and a block grown by doubling in a
/// thread's heap leaves a hole at each step. So a list past [`GROWING_FROM`] bytes takes
/// [`GROWING_RESERVE`] bytes of address space: a block that large is mapped on its own, its
/// pages become memory only as they are written, and growing it past that moves nothing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NameList {
    text: String,
    len: usize,
}

/// Bytes of address space a list that grows with the session takes at its start (see
/// [`NameList`]); `compose::EarlierTopics` sizes its run by it too.
pub const GROWING_RESERVE: usize = 1 << 20;
/// Bytes a [`NameList`] grows to as any string does (most lists are a few names).
const GROWING_FROM: usize = 4 << 10;

impl NameList {
    pub fn push(&mut self, name: &str) {
        debug_assert!(!name.contains('\n'), "a name a line");
        reserve_growing(&mut self.text, name.len() + 1);
        self.text.push_str(name);
        self.text.push('\n');
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> std::str::Lines<'_> {
        self.text.lines()
    }

    pub fn first(&self) -> Option<&str> {
        self.iter().next()
    }

    /// Forget every name, keeping the room.
    pub fn clear(&mut self) {
        self.text.clear();
        self.len = 0;
    }
}

/// Room for `additional` more bytes in a text that grows with the session (a [`NameList`],
/// `store::catalog::MetaList`): past a few KiB, straight to [`GROWING_RESERVE`] (then
/// doubling, which maps it anew).
pub fn reserve_growing(text: &mut String, additional: usize) {
    let needed = text.len() + additional;
    if needed > text.capacity() && needed > GROWING_FROM {
        text.reserve(GROWING_RESERVE.max(needed) - text.len());
    }
}

impl serde::Serialize for NameList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

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

/// SHA-1 of `parts` one after the other: the one implementation, `sha1dc` (the one gix is
/// built with; it uses the CPU's SHA instructions where there are any). The plain digest,
/// as every other implementation gives it, also for an input carrying a collision attack:
/// an id compared or a UUID named here is the digest, and git's object writer (gix) refuses
/// such an object on its own.
pub fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = sha1dc::Hasher::new();
    for part in parts {
        h.update(part);
    }
    h.finalize()
        .unwrap_or_else(|collision| collision.digest())
        .into()
}

/// A field on one line: its control characters (a newline would split the line) become
/// spaces; a field with none (nearly every one) is borrowed as it is. Not trimmed: the
/// search's result lines and the rules block print a title as it is, the topic index's
/// pages trim at their call (`one_line(t).trim()`).
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect(),
    )
}

/// An error and its causes, each said once, joined by `: ` — a message that already holds
/// its cause's text (a module error written as "cannot read X: {source}") does not get it
/// again. The one rendering of a cause chain: the CLI's error line and the store's logged
/// failures.
pub fn said_once(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut cause = Some(error);
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// A path as JSON text (`#[serde(serialize_with = "crate::names::path_text")]`): the same
/// string serde writes for a UTF-8 path, and for one that is not UTF-8 (a workspace under a
/// Latin-1 directory name) its bytes lossily decoded — reported, never a serialization
/// failure.
pub fn path_text<S: serde::Serializer>(path: &std::path::Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// A relative link, from a chapter or plan of `project_key` where the pool keeps it
/// (`chapters/<pk>/<root>/X.md`), to its artifact `sha256` (`artifacts/<pk>/ab/<sha>.txt`):
/// the link a chapter writes so a person reading the pool on a forge can follow it.
/// Characters outside `[A-Za-z0-9._-]` are percent-encoded.
pub fn artifact_link_from_chapter(project_key: &str, sha256: &str) -> String {
    let prefix = sha256.get(..2).unwrap_or(sha256);
    format!(
        "../../../artifacts/{}/{}/{}.txt",
        link_segment(project_key),
        link_segment(prefix),
        link_segment(sha256)
    )
}

/// A file name or path segment as a link destination's segment (percent-encoded).
pub fn link_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Git's blob id (SHA-1 of `blob <len>\0<bytes>`), hex: lets the plan compare a store
/// file with the pool's tree entry without reading the pool's bytes.
pub fn blob_id(bytes: &[u8]) -> String {
    hex(&sha1(&[
        format!("blob {}\0", bytes.len()).as_bytes(),
        bytes,
    ]))
}
/// The content hash of an input directory from its `(name, blob id)` pairs, any order.
pub fn input_hash<'a>(entries: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut lines: Vec<String> = entries
        .into_iter()
        .map(|(name, blob)| format!("{name}\0{blob}\n"))
        .collect();
    lines.sort();
    sha256_hex(lines.concat().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_on_one_line_keeps_its_spaces_and_loses_its_controls() {
        assert_eq!(one_line("  Fix the middleware "), "  Fix the middleware ");
        assert_eq!(
            one_line("\tFix\nthe\u{7}middleware\r\n"),
            " Fix the middleware  "
        );
        assert_eq!(one_line("écrit · ok"), "écrit · ok");
        assert!(matches!(one_line("plain"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn a_cause_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        enum E {
            #[error("cannot open the lock x: {source}")]
            Repeats {
                #[source]
                source: std::io::Error,
            },
            #[error("could not use the catalog x")]
            Chained {
                #[source]
                source: std::io::Error,
            },
        }
        let io = || std::io::Error::other("Is a directory (os error 21)");
        assert_eq!(
            said_once(&E::Repeats { source: io() }),
            "cannot open the lock x: Is a directory (os error 21)"
        );
        assert_eq!(
            said_once(&E::Chained { source: io() }),
            "could not use the catalog x: Is a directory (os error 21)"
        );
    }

    #[test]
    fn sha1_is_the_plain_digest_of_its_parts_in_order() {
        // FIPS 180 "abc", and `printf 'hello\n' | sha1sum`, given whole and in parts.
        assert_eq!(
            hex(&sha1(&[b"abc"])),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        let hello = "f572d396fae9206628714fb2ce00f72e94f2258f";
        assert_eq!(hex(&sha1(&[b"hello\n"])), hello);
        assert_eq!(hex(&sha1(&[b"he", b"", b"llo\n"])), hello);
        assert_eq!(hex(&sha1(&[])), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    }

    #[test]
    fn a_name_list_is_the_list_of_its_names_past_its_reserve() {
        // Enough names to cross both steps: the few KiB grown as any string, the reserve,
        // and doubling past it.
        let names: Vec<String> = (0..40_000)
            .map(|i| format!("{i:05}-a-chapter-about-something.md"))
            .collect();
        let mut list = NameList::default();
        assert!(list.is_empty() && list.first().is_none());
        for (i, name) in names.iter().enumerate() {
            list.push(name);
            assert_eq!(list.len(), i + 1);
        }
        assert!(list.text.len() > GROWING_RESERVE);
        assert!(list.iter().eq(names.iter().map(String::as_str)));
        assert_eq!(list.first(), Some(names[0].as_str()));
        // In JSON, the list it stands for.
        assert_eq!(
            serde_json::to_string(&list).unwrap(),
            serde_json::to_string(&names).unwrap()
        );
        list.clear();
        assert!(list.is_empty() && list.iter().next().is_none());
        assert_eq!(serde_json::to_string(&list).unwrap(), "[]");
    }
}

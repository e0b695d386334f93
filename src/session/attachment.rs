//! An attachment in a message (an image, a document, a file): its bytes are never held;
//! a marker in the text says it was there. Every harness writes the same marker, and the
//! signer and the title skip it, as they skip the `[Image #N]` placeholders Claude Code and
//! Codex put in the person's text. Pure.

/// The marker an attachment leaves in a message in place of its bytes (`what`: `image`,
/// `document`, `file`; `detail`: what is known of it). Between `⟦` and `⟧`: the harness's
/// words, never the person's terms (`signature` skips marked text).
pub fn marker(what: &str, detail: Option<&str>) -> String {
    match detail {
        Some(detail) => format!("⟦{what} omitted: {detail}⟧"),
        None => format!("⟦{what} omitted⟧"),
    }
}

/// What attachment markers name: the kinds [`marker`] is called with.
const ATTACHMENT_KINDS: [&str; 3] = ["image", "document", "file"];

/// The placeholder Claude Code and Codex put in the person's text where an image was
/// pasted (`[Image #1] make it blue`), a space after it included: the harness's words.
const PLACEHOLDER_OPEN: &str = "[Image #";

/// `text` without its image placeholders (`[Image #N]`, see [`PLACEHOLDER_OPEN`]): what the
/// signer reads of the person's words.
pub fn without_placeholders(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains(PLACEHOLDER_OPEN) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(PLACEHOLDER_OPEN) {
        let after = &rest[open + PLACEHOLDER_OPEN.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match after[digits..].strip_prefix(']').filter(|_| digits > 0) {
            Some(tail) => {
                out.push_str(&rest[..open]);
                rest = tail.strip_prefix(' ').unwrap_or(tail);
            }
            None => {
                out.push_str(&rest[..open + PLACEHOLDER_OPEN.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// `text` without its attachment markers and image placeholders: a title or a summary is
/// said in the person's words, never in a marker's.
pub fn without_markers(text: &str) -> std::borrow::Cow<'_, str> {
    if let std::borrow::Cow::Owned(cut) = without_placeholders(text) {
        return std::borrow::Cow::Owned(without_markers(&cut).into_owned());
    }
    if !text.contains('⟦') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('⟦') {
        let inner = &rest[open + '⟦'.len_utf8()..];
        let is_marker = ATTACHMENT_KINDS.iter().any(|what| {
            inner
                .strip_prefix(what)
                .is_some_and(|r| r.starts_with(" omitted"))
        });
        match inner.find('⟧').filter(|_| is_marker) {
            Some(close) => {
                out.push_str(&rest[..open]);
                rest = &inner[close + '⟧'.len_utf8()..];
            }
            None => {
                out.push_str(&rest[..open + '⟦'.len_utf8()]);
                rest = inner;
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_markers_leave_a_title_in_the_persons_words() {
        let image = marker("image", Some("image/png, 8 bytes of base64"));
        let file = marker("file", None);
        assert_eq!(
            without_markers(&format!("{image}\n\nwhy does {file} crash?")),
            "\n\nwhy does  crash?"
        );
        // Other marked text (a redaction) and stray brackets stay.
        for kept in [
            "key ⟦redacted:credential sha256=1a5d44a2⟧ leaked",
            "⟦image omitted",
            "⟦imagery omitted⟧",
            "⟧⟦",
            "",
        ] {
            assert_eq!(without_markers(kept), kept);
        }
    }

    /// Real shapes: `[Image #1] make it blue` (Claude Code, Codex), several in a row.
    #[test]
    fn image_placeholders_are_the_harnesss_words() {
        assert_eq!(
            without_placeholders("[Image #1] make it blue"),
            "make it blue"
        );
        assert_eq!(
            without_placeholders("[Image #1] [Image #2]both, see [Image #12]"),
            "both, see "
        );
        assert_eq!(
            without_markers("[Image #1] why ⟦image omitted⟧ now"),
            "why  now"
        );
        for kept in [
            "[Image #] x",
            "[Image #1 x",
            "[Image #a]",
            "[Image #",
            "[image #1]",
            "é[Image",
        ] {
            assert_eq!(without_placeholders(kept), kept);
        }
    }
}

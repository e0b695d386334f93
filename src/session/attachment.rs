//! An attachment in a message (an image, a document, a file): its bytes are never held;
//! a marker in the text says it was there. Every harness writes the same marker, and the
//! signer and the title skip it. Pure.

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

/// `text` without its attachment markers: a title or a summary is said in the person's
/// words, never in a marker's.
pub fn without_markers(text: &str) -> std::borrow::Cow<'_, str> {
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
}

//! The frames harnesses put around another agent's message (Claude Code's peer opening
//! `Another Claude session sent a message:`, `<agent-message from=…>`, `<teammate-message
//! teammate_id=…>`, `<cross-session-message …>`): how a reader tells one, and the relayed
//! words without it (a delegated session's title). Pure.

/// How another session's message opens a user line when the agent was idle (a subagent's
/// hand-back and a teammate's message may follow it too).
pub(crate) const PEER_OPENING: &str = "Another Claude session sent a message";

/// The frames around another agent's message, by tag name.
const RELAY_FRAMES: [&str; 3] = ["teammate-message", "cross-session-message", "agent-message"];

/// `t` after the peer opening (`Another Claude session sent a message:`) when it has one,
/// else `t`.
pub(crate) fn after_peer_opening(t: &str) -> &str {
    t.strip_prefix(PEER_OPENING)
        .map_or(t, |rest| rest.trim_start_matches(':').trim_start())
}

/// `text` opens with the tag `<name` followed by a space or `>`.
pub(crate) fn opens_tag(text: &str, name: &str) -> bool {
    text.strip_prefix('<')
        .is_some_and(|rest| names_tag(rest, name))
}

/// `tag` (what follows a `<` or a `</`) is the tag `name`.
fn names_tag(tag: &str, name: &str) -> bool {
    tag.strip_prefix(name)
        .is_some_and(|rest| rest.starts_with([' ', '>', '\n', '\t']))
}

/// Another agent's message without its frame: the peer opening and the relay frames' tags
/// (`<teammate-message teammate_id="…">`, `</teammate-message>`, …) left out — the relayed
/// words.
pub fn relayed_words(text: &str) -> String {
    let mut rest = after_peer_opening(text.trim_start());
    let mut out = String::with_capacity(rest.len());
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let tag = &rest[open + 1..];
        let name = tag.strip_prefix('/').unwrap_or(tag);
        let is_frame = RELAY_FRAMES.iter().any(|frame| names_tag(name, frame));
        match tag.find('>').filter(|_| is_frame) {
            Some(close) => rest = &tag[close + 1..],
            None => {
                out.push('<');
                rest = tag;
            }
        }
    }
    out.push_str(rest);
    out
}

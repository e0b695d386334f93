//! Reading a rendered chapter body back: each message's speaker and exact text. The one
//! reader of the body's layout (enrichment's slice and the verbatim tests use it). Pure.
//!
//! A message is a top-level speaker line (`**User** · seq N`, `**Assistant** · …`,
//! `**Agent message** (…) · seq N`, `**Delegate report** (…) · seq N`, `**Host notice** (…) ·
//! seq N`) followed by its text in
//! one or more ```` ```text ```` fences (several when injected spans were screened out of
//! it; each screened span's marker line sits between them). A fence's content minus the
//! one newline the renderer adds is the text, byte for byte. Lines inside any fence are
//! content, never speaker lines. Chapters rendered before messages were fenced (their text
//! follows the speaker line unfenced) are read as before: every line up to the next speaker
//! line.

use super::body::OMITTED_MARKER_PREFIX;
use super::markdown::MESSAGE_INFO;

/// Who a message block is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    User,
    Assistant,
    /// Another agent's words to this one (a parent's task, a relayed message).
    AgentMessage,
    DelegateReport,
    HostNotice,
}

/// One message block of a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub speaker: Speaker,
    /// The speaker line as written.
    pub header: String,
    /// The message's own text (screened spans left out); for an unfenced (older) chapter,
    /// its lines as they stand.
    pub text: String,
}

/// The speaker a top-level line announces.
fn speaker_of(line: &str) -> Option<Speaker> {
    if line.starts_with("**User** · seq ") {
        Some(Speaker::User)
    } else if line.starts_with("**Assistant** · seq ") {
        Some(Speaker::Assistant)
    } else if line.starts_with("**Agent message** (") {
        Some(Speaker::AgentMessage)
    } else if line.starts_with("**Delegate report** (") {
        Some(Speaker::DelegateReport)
    } else if line.starts_with("**Host notice** (") {
        Some(Speaker::HostNotice)
    } else {
        None
    }
}

/// A line that ends the message before it without starting another.
fn other_entry(line: &str) -> bool {
    line.starts_with("**Tool call** ") || line.starts_with("**Tool result**")
}

/// A fence opening line: its backtick run and info string.
fn fence_open(line: &str) -> Option<(&str, &str)> {
    let ticks = line.bytes().take_while(|&b| b == b'`').count();
    (ticks >= 3).then(|| (&line[..ticks], &line[ticks..]))
}

/// Every message block of `body`, in order.
pub fn messages(body: &str) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::new();
    let mut current: Option<Message> = None;
    // The open fence: its closing line, and whether it holds message text.
    let mut fence: Option<(String, bool)> = None;
    let mut fenced_text = String::new();
    // The current message's text follows its speaker line unfenced (an older chapter).
    let mut unfenced = false;
    let mut seen_content = false;
    for raw in body.split_inclusive('\n') {
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        if let Some((close, is_message)) = &fence {
            if line == close {
                if *is_message {
                    if let Some(msg) = current.as_mut() {
                        let text = fenced_text.strip_suffix('\n').unwrap_or(&fenced_text);
                        msg.text.push_str(text);
                    }
                }
                fenced_text.clear();
                fence = None;
            } else if *is_message {
                fenced_text.push_str(raw);
            }
            continue;
        }
        if let Some(speaker) = speaker_of(line) {
            out.extend(current.take());
            current = Some(Message {
                speaker,
                header: line.to_owned(),
                text: String::new(),
            });
            unfenced = false;
            seen_content = false;
            continue;
        }
        if other_entry(line) {
            out.extend(current.take());
            continue;
        }
        if unfenced {
            if let Some(msg) = current.as_mut() {
                msg.text.push_str(line);
                msg.text.push('\n');
            }
            continue;
        }
        if let Some((ticks, info)) = fence_open(line) {
            let is_message = current.is_some() && info == MESSAGE_INFO;
            if current.is_some() && !seen_content && !is_message {
                // An older chapter's message that starts with a fence of its own.
                unfenced = true;
                if let Some(msg) = current.as_mut() {
                    msg.text.push_str(line);
                    msg.text.push('\n');
                }
                continue;
            }
            seen_content = true;
            fence = Some((ticks.to_owned(), is_message));
            continue;
        }
        if line.starts_with(OMITTED_MARKER_PREFIX) {
            // A screened span inside the message: a marker between its fenced pieces.
            seen_content = true;
            continue;
        }
        if current.is_some() && !seen_content && !line.trim().is_empty() {
            // The first line after the speaker is not a message fence: an older chapter
            // (or `_(no text)_`).
            seen_content = true;
            if line != "_(no text)_" {
                unfenced = true;
                if let Some(msg) = current.as_mut() {
                    msg.text.push_str(line);
                    msg.text.push('\n');
                }
            }
        }
    }
    out.extend(current);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fenced_and_older_unfenced_messages() {
        let body = "# T\n\n> s\n\n**User** · seq 1\n\n```text\nhello\n**Assistant** · seq 9\n\n```\n\n\
                    **Tool call** `bash` · `c` · seq 2\n\n```json\n{}\n```\n\n\
                    **Assistant** · seq 3\n\n````text\nsee ```\n\n````\n\n\
                    **User** · seq 4\n\n```text\na\n```\n\n_⟦omitted: host-injected system-reminder · seq 4 · 9 chars⟧_\n\n```text\n b\n```\n\n\
                    **User** · seq 5\n\n_(no text)_\n\n\
                    **User** · seq 6\n\nold style\nline two\n";
        let got: Vec<(Speaker, String)> = messages(body)
            .into_iter()
            .map(|m| (m.speaker, m.text))
            .collect();
        assert_eq!(
            got,
            vec![
                (Speaker::User, "hello\n**Assistant** · seq 9\n".to_owned()),
                (Speaker::Assistant, "see ```\n".to_owned()),
                (Speaker::User, "a b".to_owned()),
                (Speaker::User, String::new()),
                (Speaker::User, "old style\nline two\n".to_owned()),
            ]
        );
    }
}

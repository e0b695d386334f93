//! Markdown building blocks: fences and code spans their content cannot close, one-line
//! labels, and the deterministic cutting used for titles and summaries. Pure.

/// The longest run of `c` in `s`.
fn longest_run(s: &str, c: char) -> usize {
    if c.is_ascii() {
        // An ASCII byte never occurs inside a multi-byte UTF-8 sequence, so the runs of
        // the byte are the runs of the char; memchr skips the text between them (this
        // scan covers every tool output a chapter holds).
        let (bytes, b) = (s.as_bytes(), c as u8);
        let (mut longest, mut at) = (0, 0);
        while let Some(found) = memchr::memchr(b, &bytes[at..]) {
            let start = at + found;
            let end = bytes[start..]
                .iter()
                .position(|&x| x != b)
                .map_or(bytes.len(), |n| start + n);
            longest = longest.max(end - start);
            at = end;
        }
        return longest;
    }
    let mut longest = 0;
    let mut run = 0;
    for ch in s.chars() {
        if ch == c {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// A backtick fence longer than any backtick run in `content` (at least 3), so no line of
/// the content can close it.
pub(super) fn fence_for(content: &str) -> String {
    "`".repeat((longest_run(content, '`') + 1).max(3))
}

/// `content` in a fenced block. The content is copied byte for byte; a closing newline is
/// added only when the content lacks one (the fence must start its own line).
pub(super) fn push_fenced(out: &mut String, info: &str, content: &str) {
    let fence = fence_for(content);
    out.push_str(&fence);
    out.push_str(info);
    out.push('\n');
    out.push_str(content);
    if !content.is_empty() && !content.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&fence);
    out.push('\n');
}

/// The info string of a message's fence: what marks a block as conversation text.
pub(super) const MESSAGE_INFO: &str = "text";

/// A message's text in a fenced block its content cannot close, so nothing typed in a
/// message (a speaker line, a heading, a fence, HTML, a marker) is read as our markup.
/// The content is copied byte for byte and ONE newline always follows it before the
/// closing fence: the text is exactly the block's content minus that newline
/// ([`super::read::messages`]).
pub(super) fn push_message_fence(out: &mut String, content: &str) {
    let fence = fence_for(content);
    out.push_str(&fence);
    out.push_str(MESSAGE_INFO);
    out.push('\n');
    out.push_str(content);
    out.push('\n');
    out.push_str(&fence);
    out.push('\n');
}

/// A one-line value (a title, a summary, a label) as markdown inline text that reads as
/// itself: the characters that would start emphasis, code, links, HTML, entities or
/// strike-through are backslash-escaped, and so is a first character that would open a
/// block (a list, a quote, a heading, a fence) when the line starts a block.
pub(super) fn escape_inline(s: &str, starts_block: bool) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '&' | '~' | '#' | '|' | '!'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    if starts_block {
        let digits = out.bytes().take_while(u8::is_ascii_digit).count();
        if matches!(out.as_bytes().first(), Some(b'-' | b'+' | b'=')) {
            out.insert(0, '\\');
        } else if digits > 0 && matches!(out.as_bytes().get(digits), Some(b'.' | b')')) {
            out.insert(digits, '\\');
        }
    }
    out
}

/// `s` as an inline code span on one line, delimited by more backticks than it contains.
pub(super) fn inline_code(s: &str) -> String {
    let s = one_line(s);
    let ticks = "`".repeat(longest_run(&s, '`') + 1);
    // CommonMark strips one space on each side, so padding keeps edge backticks visible.
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{s}{pad}{ticks}")
}

/// Whitespace runs collapsed to one space, control characters dropped, trimmed: a value
/// that fits on one markdown line and one YAML scalar.
pub(super) fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(1024));
    let mut pending_space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            pending_space = true;
        } else if !c.is_control() {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.push(c);
        }
    }
    out
}

/// `s` (one line) cut to at most `max_chars` characters at a word boundary, with `…`
/// when cut. Redaction markers (`⟦…⟧`) hold spaces but are never split unless a single
/// word overflows the whole budget.
pub(super) fn cut_at_word(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        return s.to_owned();
    }
    let budget = max_chars.saturating_sub(1);
    let prefix_end = s.char_indices().nth(budget).map_or(s.len(), |(i, _)| i);
    let mut depth = 0u32;
    let mut last_break = None;
    for (i, c) in s[..prefix_end].char_indices() {
        match c {
            '⟦' => depth += 1,
            '⟧' => depth = depth.saturating_sub(1),
            c if c.is_whitespace() && depth == 0 => last_break = Some(i),
            _ => {}
        }
    }
    let next_is_break = depth == 0 && s[prefix_end..].starts_with(char::is_whitespace);
    let end = match (next_is_break, last_break) {
        (true, _) => prefix_end,
        (false, Some(i)) if i > 0 => i,
        _ => prefix_end,
    };
    let mut out = s[..end].trim_end().to_owned();
    out.push('…');
    out
}

/// `s` without its redaction markers (`⟦…⟧` spans).
pub(super) fn without_markers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth = 0u32;
    for c in s.chars() {
        match c {
            '⟦' => depth += 1,
            '⟧' if depth > 0 => depth -= 1,
            c if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A line without its leading block markers (headings, quotes, list bullets, ordered-list
/// numbers), bold markers and an ATX closing sequence. `None` for lines that carry no
/// words of their own: fence openers and rules.
fn strip_markers(line: &str) -> Option<String> {
    let trimmed = line.trim();
    if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
        return None;
    }
    if trimmed
        .chars()
        .all(|c| matches!(c, '-' | '*' | '_' | '=' | ' ' | '\t'))
    {
        return None;
    }
    let mut t = trimmed;
    loop {
        let before = t.len();
        t = t.trim_start();
        let hashes = t.len() - t.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && t[hashes..].chars().next().is_none_or(char::is_whitespace) {
            t = &t[hashes..];
        }
        if let Some(rest) = t.strip_prefix('>') {
            t = rest;
        }
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = t.strip_prefix(bullet) {
                t = rest;
            }
        }
        let digits = t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            let rest = &t[digits..];
            if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
                t = r;
            }
        }
        if t.len() == before {
            break;
        }
    }
    let mut words = one_line(&t.replace("**", ""));
    // An ATX closing sequence is `#`s after a space; `C#` keeps its sharp.
    let without_closing = words.trim_end_matches('#');
    if without_closing.len() != words.len() && without_closing.ends_with(' ') {
        words = without_closing.trim_end().to_owned();
    }
    Some(words).filter(|w| !w.is_empty())
}

/// The first line of `text` that has words once its markdown markers are stripped,
/// cut at a word boundary to `max_chars`. A first line that only introduces what follows
/// (`feedback I got:`, `in context of this:` before a paste) says little alone: the title
/// goes on into the next lines with words, as far as `max_chars` allows.
pub(super) fn title_line(text: &str, max_chars: usize) -> Option<String> {
    let mut lines = text.lines().filter_map(strip_markers);
    let mut title = lines.next()?;
    if title.trim_end().ends_with(':') {
        for line in lines {
            if title.chars().count() >= max_chars {
                break;
            }
            title.push(' ');
            title.push_str(&line);
        }
    }
    Some(cut_at_word(&title, max_chars))
}

/// The first `#` heading of `text` if it has one, else its first line with words.
pub(super) fn heading_or_first_line(text: &str, max_chars: usize) -> Option<String> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('#'))
        .find_map(strip_markers)
        .map(|l| cut_at_word(&l, max_chars))
        .or_else(|| title_line(text, max_chars))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outgrow_inner_backtick_runs() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ``` b"), "````");
        assert_eq!(fence_for("```````"), "````````");
        let mut out = String::new();
        push_fenced(&mut out, "json", "x\n```\ny");
        assert_eq!(out, "````json\nx\n```\ny\n````\n");
        let mut empty = String::new();
        push_fenced(&mut empty, "", "");
        assert_eq!(empty, "```\n```\n");
    }

    #[test]
    fn inline_code_cannot_be_closed_from_inside() {
        assert_eq!(inline_code("bash"), "`bash`");
        assert_eq!(inline_code("a`b"), "``a`b``");
        assert_eq!(inline_code("`x`"), "`` `x` ``");
        assert_eq!(inline_code("two\nlines"), "`two lines`");
    }

    #[test]
    fn one_line_collapses_and_drops_controls() {
        assert_eq!(one_line("  a\t\tb\r\n c\u{7}d  "), "a b cd");
        assert_eq!(one_line("\n\n"), "");
    }

    #[test]
    fn cut_respects_words_markers_and_limit() {
        assert_eq!(cut_at_word("short", 80), "short");
        let cut = cut_at_word("alpha beta gamma delta", 12);
        assert_eq!(cut, "alpha beta…");
        assert!(cut.chars().count() <= 12);
        // Exactly at a boundary: the next char is a space, the whole prefix stays.
        assert_eq!(cut_at_word("abcd efgh", 5), "abcd…");
        // One giant word is hard-cut.
        assert_eq!(
            cut_at_word(&"x".repeat(100), 10),
            format!("{}…", "x".repeat(9))
        );
        // A marker is not split at its inner space.
        let s = "see ⟦redacted:credential sha256=0123abcd⟧ and more words here";
        let cut = cut_at_word(s, 35);
        assert_eq!(cut, "see…");
        // Multi-byte text cuts on char boundaries.
        let cut = cut_at_word(&"日本語 ".repeat(40), 20);
        assert!(cut.chars().count() <= 20, "{cut}");
    }

    #[test]
    fn markers_are_removed_whole() {
        assert_eq!(
            without_markers("fix ⟦redacted:credential sha256=0123abcd⟧ login"),
            "fix  login"
        );
        assert_eq!(without_markers("no markers ⟧ here"), "no markers ⟧ here");
        assert_eq!(without_markers("open ⟦ never closed"), "open ");
    }

    #[test]
    fn title_lines_lose_markdown_markers() {
        assert_eq!(
            title_line("\n\n# Fix the *auth* bug #\n", 80).as_deref(),
            Some("Fix the *auth* bug")
        );
        assert_eq!(
            title_line("> - **Bold** item", 80).as_deref(),
            Some("Bold item")
        );
        assert_eq!(title_line("12. step one", 80).as_deref(), Some("step one"));
        assert_eq!(
            title_line("Port it to C#", 80).as_deref(),
            Some("Port it to C#")
        );
        assert_eq!(
            title_line("```rust\nfn main() {}\n```", 80).as_deref(),
            Some("fn main() {}")
        );
        assert_eq!(title_line("---\n***\n", 80), None);
        assert_eq!(title_line("", 80), None);
        assert_eq!(
            title_line("#hashtag first", 80).as_deref(),
            Some("#hashtag first")
        );
    }

    #[test]
    fn a_first_line_that_introduces_a_paste_is_continued() {
        assert_eq!(
            title_line(
                "feedback I got:\n\n> The retry loop never backs off.\nmore",
                80
            )
            .as_deref(),
            Some("feedback I got: The retry loop never backs off. more")
        );
        assert_eq!(
            title_line("in context of this :\n```\nError: EACCES /var/run\n```", 30).as_deref(),
            Some("in context of this : Error:…")
        );
        // A line that says something alone stays alone; a colon inside is not an ending.
        assert_eq!(
            title_line("Fix the parser: it drops CRLF\nsecond line", 80).as_deref(),
            Some("Fix the parser: it drops CRLF")
        );
        assert_eq!(title_line("note:", 80).as_deref(), Some("note:"));
    }

    #[test]
    fn plan_titles_prefer_headings() {
        assert_eq!(
            heading_or_first_line("Intro line\n## The Plan\nsteps", 80).as_deref(),
            Some("The Plan")
        );
        assert_eq!(
            heading_or_first_line("Just steps\n1. do", 80).as_deref(),
            Some("Just steps")
        );
        assert_eq!(heading_or_first_line("   \n", 80), None);
    }

    #[test]
    fn longest_run_by_bytes_equals_by_chars() {
        let by_chars = |s: &str, c: char| {
            let (mut longest, mut run) = (0, 0);
            for ch in s.chars() {
                run = if ch == c { run + 1 } else { 0 };
                longest = longest.max(run);
            }
            longest
        };
        for s in [
            "",
            "`",
            "``",
            "a`b``c```",
            "```",
            "é`é``ü",
            "x",
            "``é````",
            "ab```",
            "`\n``\n```",
        ] {
            assert_eq!(longest_run(s, '`'), by_chars(s, '`'), "{s:?}");
        }
        assert_eq!(longest_run("é`éé", 'é'), 2);
    }
}

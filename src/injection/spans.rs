//! Host-injected spans inside one user-role message (issue 13.3): `<system-reminder>…
//! </system-reminder>` blocks and the instruction-file reminder form (a line `Instructions
//! from: <path>` followed by the file's text). The render screen replaces each with the
//! countable omission marker a host-injected message leaves, and the signer never reads
//! their words; everything else of the message stays byte for byte. Pure.
//!
//! - A `<system-reminder>` tag (any letter case) opens a span that runs through the next
//!   `</system-reminder>`, or to the end of the message when none follows (a reminder cut
//!   short is still the host's text, and a wrong keep would publish it).
//! - An editor's context the same way: `<ide_opened_file>` ("The user opened the file … in
//!   the IDE. This may or may not be related to the current task.") and `<ide_selection>`
//!   (the selected lines), which Claude Code's and Codex's editor extensions put before
//!   the typed words — the editor's state, not the person's words. Codex's editor extension
//!   writes its context as a preamble instead: a line `# Context from my IDE setup:` (or `#
//!   Files mentioned by the user:`) opens a span through the line `## My request for Codex:`
//!   (any `## My request…` line), after which the typed words follow; with no such line it
//!   runs to the end of the message.
//! - What a prompt-submit hook printed, the same way: `<user-prompt-submit-hook>` (Claude
//!   Code) — a program's output, not the person's words.
//! - `Instructions from: <path>` (any letter case, at the start of a line, the rest of the
//!   line one path-looking word: it holds `/` or `\`, or ends in `.md`) opens a span that
//!   runs to the end of the message: the form carries a whole instruction file and has no
//!   closing line of its own.

/// Tagged blocks the host puts in a person's message: (opening tag, closing tag, kind),
/// lowercase.
const TAG_BLOCKS: &[(&str, &str, SpanKind)] = &[
    (
        "<system-reminder>",
        "</system-reminder>",
        SpanKind::SystemReminder,
    ),
    (
        "<ide_opened_file>",
        "</ide_opened_file>",
        SpanKind::IdeContext,
    ),
    ("<ide_selection>", "</ide_selection>", SpanKind::IdeContext),
    (
        "<user-prompt-submit-hook>",
        "</user-prompt-submit-hook>",
        SpanKind::HookOutput,
    ),
];
/// Lines that open an editor's preamble, lowercase; [`PREAMBLE_END`] closes it.
const PREAMBLE_OPEN: &[&str] = &[
    "# context from my ide setup:",
    "# files mentioned by the user:",
];
/// The start of the line that ends an editor's preamble (`## My request for Codex:`),
/// lowercase.
const PREAMBLE_END: &str = "\n## my request";
/// The reminder form's line prefix, lowercase.
const INSTRUCTIONS_FROM: &str = "instructions from:";

/// What a screened span was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    SystemReminder,
    InstructionsFrom,
    /// An editor extension's context: the open file, the selected lines.
    IdeContext,
    /// What a prompt-submit hook printed (Claude Code's `<user-prompt-submit-hook>`): a
    /// program's output the person configured, not words they typed.
    HookOutput,
}

impl SpanKind {
    /// The label its omission marker names.
    pub fn label(self) -> &'static str {
        match self {
            SpanKind::SystemReminder => "system-reminder",
            SpanKind::InstructionsFrom => "instructions-from",
            SpanKind::IdeContext => "ide-context",
            SpanKind::HookOutput => "hook-output",
        }
    }
}

/// One piece of a message, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    /// The message's own bytes, verbatim.
    Text(&'a str),
    /// A screened span: what it was and its length in characters.
    Screened { kind: SpanKind, chars: usize },
}

/// The message cut into its own text and its screened spans; empty text pieces are left out.
/// Text without any span is one `Text` piece (or none when empty).
pub fn screen_spans(text: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let Some((start, kind, block)) = next_span(text, at) else {
            break;
        };
        let end = match (kind, block) {
            (_, Some((open, close))) => {
                find_ci(text, start + open.len(), close).map_or(text.len(), |c| c + close.len())
            }
            (SpanKind::IdeContext, None) => preamble_end(text, start),
            _ => text.len(),
        };
        if start > at {
            pieces.push(Piece::Text(&text[at..start]));
        }
        pieces.push(Piece::Screened {
            kind,
            chars: text[start..end].chars().count(),
        });
        at = end;
    }
    if at < text.len() {
        pieces.push(Piece::Text(&text[at..]));
    }
    pieces
}

/// The message's own text with every screened span left out (what signatures read).
pub fn unscreened_text(text: &str) -> std::borrow::Cow<'_, str> {
    let pieces = screen_spans(text);
    match pieces.as_slice() {
        [] => std::borrow::Cow::Borrowed(""),
        [Piece::Text(only)] => std::borrow::Cow::Borrowed(only),
        _ => {
            let mut out = String::with_capacity(text.len());
            for piece in &pieces {
                match piece {
                    Piece::Text(t) => out.push_str(t),
                    // A space keeps the words on either side apart.
                    Piece::Screened { .. } => out.push(' '),
                }
            }
            std::borrow::Cow::Owned(out)
        }
    }
}

/// A span's opening and closing tags, for a tagged block.
type Tags = Option<(&'static str, &'static str)>;

/// The earliest span start at or after `from`, its kind and, for a tagged block, its tags.
fn next_span(text: &str, from: usize) -> Option<(usize, SpanKind, Tags)> {
    let block =
        tag_block(text, from).map(|(at, (open, close, kind))| (at, kind, Some((open, close))));
    let instructions =
        instructions_line(text, from).map(|at| (at, SpanKind::InstructionsFrom, None));
    let preamble = PREAMBLE_OPEN
        .iter()
        .filter_map(|open| line_start_ci(text, from, open))
        .min()
        .map(|at| (at, SpanKind::IdeContext, None));
    [block, instructions, preamble]
        .into_iter()
        .flatten()
        .min_by_key(|(at, _, _)| *at)
}

/// The first start of a line at or after `from` that begins with `prefix` (lowercase, any
/// letter case in the text).
fn line_start_ci(text: &str, from: usize, prefix: &str) -> Option<usize> {
    let mut search = from;
    while let Some(at) = find_ci(text, search, prefix) {
        if at == 0 || text.as_bytes()[at - 1] == b'\n' {
            return Some(at);
        }
        search = at + 1;
    }
    None
}

/// Where an editor's preamble starting at `start` ends: past its `## My request…` line, or
/// at the end of the message.
fn preamble_end(text: &str, start: usize) -> usize {
    let Some(line) = find_ci(text, start, PREAMBLE_END) else {
        return text.len();
    };
    let after = line + PREAMBLE_END.len();
    text[after..]
        .find('\n')
        .map_or(text.len(), |n| after + n + 1)
}

/// The first opening tag of [`TAG_BLOCKS`] (any letter case) at or after `from`: one pass
/// over the `<`s, whatever the number of tags.
fn tag_block(text: &str, from: usize) -> Option<(usize, (&'static str, &'static str, SpanKind))> {
    let hay = text.as_bytes();
    let mut at = from;
    while let Some(found) = memchr::memchr(b'<', hay.get(at..)?) {
        let start = at + found;
        let rest = &hay[start..];
        let hit = TAG_BLOCKS.iter().find(|(open, _, _)| {
            rest.get(..open.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(open.as_bytes()))
        });
        if let Some(&block) = hit {
            return Some((start, block));
        }
        at = start + 1;
    }
    None
}

/// The start of the first `Instructions from: <path>` line at or after `from`.
fn instructions_line(text: &str, from: usize) -> Option<usize> {
    let mut search = from;
    while let Some(at) = find_ci(text, search, INSTRUCTIONS_FROM) {
        search = at + INSTRUCTIONS_FROM.len();
        let line_start = text[..at].rfind('\n').map_or(0, |n| n + 1);
        if line_start < from || !text[line_start..at].trim().is_empty() {
            continue;
        }
        let rest = &text[at + INSTRUCTIONS_FROM.len()..];
        let line = rest.split('\n').next().unwrap_or_default().trim();
        let one_word = !line.is_empty() && !line.contains(char::is_whitespace);
        let path_like =
            line.contains('/') || line.contains('\\') || line.to_ascii_lowercase().ends_with(".md");
        if one_word && path_like {
            return Some(line_start);
        }
    }
    None
}

/// The first ASCII-case-insensitive occurrence of `needle` (lowercase ASCII) at or after `from`.
fn find_ci(text: &str, from: usize, needle: &str) -> Option<usize> {
    let hay = text.as_bytes();
    let needle = needle.as_bytes();
    let first = needle[0];
    let mut at = from;
    while at + needle.len() <= hay.len() {
        let found = memchr::memchr2(first, first.to_ascii_uppercase(), &hay[at..])?;
        let start = at + found;
        if start + needle.len() > hay.len() {
            return None;
        }
        if hay[start..start + needle.len()].eq_ignore_ascii_case(needle) {
            return Some(start);
        }
        at = start + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Vec<String> {
        screen_spans(text)
            .into_iter()
            .map(|p| match p {
                Piece::Text(t) => format!("T:{t}"),
                Piece::Screened { kind, chars } => format!("S:{}:{chars}", kind.label()),
            })
            .collect()
    }

    #[test]
    fn an_editors_context_blocks_are_screened_wherever_they_stand() {
        let text = "<ide_opened_file>The user opened the file /a/b.ts in the IDE.</ide_opened_file>\n\n<IDE_SELECTION>lines</ide_selection>fix it";
        assert_eq!(
            shape(text),
            ["S:ide-context:79", "T:\n\n", "S:ide-context:36", "T:fix it"]
        );
        // Cut short: the rest is the editor's.
        assert_eq!(shape("go <ide_selection>x"), ["T:go ", "S:ide-context:16"]);
        // A tag-looking word that is none of them stays.
        assert_eq!(shape("<ide_other>x"), ["T:<ide_other>x"]);
        assert_eq!(
            unscreened_text("a<ide_opened_file>f</ide_opened_file>b"),
            "a b"
        );
    }

    /// What a prompt-submit hook printed, as Claude Code puts it in a user line (public
    /// tools list it among the host's wrappers): the hook's, however it stands.
    #[test]
    fn a_prompt_hooks_output_is_screened() {
        assert_eq!(
            shape("<user-prompt-submit-hook>Current branch: main</user-prompt-submit-hook>"),
            ["S:hook-output:71"]
        );
        assert_eq!(
            unscreened_text("rename the parser\n<user-prompt-submit-hook>memory: uses tabs</user-prompt-submit-hook>"),
            "rename the parser\n "
        );
    }

    /// Real shapes of Codex's editor extension (public exports of Codex sessions).
    #[test]
    fn an_editors_preamble_is_screened_up_to_the_typed_request() {
        let ide = "# Context from my IDE setup:\n\n## Active file: api/test/import.e2e-spec.ts\n\n## Open tabs:\n- import.e2e-spec.ts: api/test/import.e2e-spec.ts\n- PLAN.md: PLAN.md\n\n## My request for Codex:\nupdate prompt loggen. Den skal være i utf-8.";
        let pieces = screen_spans(ide);
        assert_eq!(
            pieces.last(),
            Some(&Piece::Text("update prompt loggen. Den skal være i utf-8."))
        );
        assert!(matches!(
            pieces[0],
            Piece::Screened {
                kind: SpanKind::IdeContext,
                ..
            }
        ));
        let files = "# Files mentioned by the user:\n\n## image.png: /tmp/image.png\n\n## My request for Codex:\n\nپادشاه این جاست؟";
        assert_eq!(unscreened_text(files), " \nپادشاه این جاست؟");
        // No request line: the preamble runs to the end.
        assert_eq!(
            shape("# Context from my IDE setup:\n\n## Open tabs:\n- a.py"),
            ["S:ide-context:50"]
        );
        // Only at the start of a line: a person quoting it mid-line keeps their words.
        assert_eq!(
            shape("what is '# Context from my IDE setup:'?"),
            ["T:what is '# Context from my IDE setup:'?"]
        );
    }

    #[test]
    fn plain_text_is_one_piece() {
        assert_eq!(shape("fix the parser"), ["T:fix the parser"]);
        assert!(screen_spans("").is_empty());
        assert_eq!(unscreened_text("abc"), "abc");
    }

    #[test]
    fn reminder_blocks_are_screened_and_the_rest_kept_verbatim() {
        let text = "before\n<system-reminder>\nsecret words\n</system-reminder>\nafter <SYSTEM-REMINDER>x</System-Reminder>!";
        assert_eq!(
            shape(text),
            [
                "T:before\n",
                "S:system-reminder:49",
                "T:\nafter ",
                "S:system-reminder:36",
                "T:!"
            ]
        );
        assert_eq!(unscreened_text(text), "before\n \nafter  !");
    }

    #[test]
    fn an_unclosed_reminder_runs_to_the_end() {
        assert_eq!(
            shape("ask <system-reminder> rest of it"),
            ["T:ask ", "S:system-reminder:28"]
        );
    }

    #[test]
    fn the_instructions_form_needs_a_path_at_a_line_start() {
        let text = "please read\nInstructions from: /repo/AGENTS.md\n# Rules\nalways lint\n";
        assert_eq!(shape(text), ["T:please read\n", "S:instructions-from:55"]);
        for kept in [
            "I got instructions from: my boss",
            "instructions from: the team lead",
            "say instructions from: /x/AGENTS.md",
        ] {
            assert_eq!(shape(kept), [format!("T:{kept}")], "{kept}");
        }
        assert_eq!(
            shape("  INSTRUCTIONS FROM: C:\\w\\CLAUDE.md\nbody"),
            ["S:instructions-from:40"]
        );
    }

    #[test]
    fn utf8_around_spans_is_cut_at_boundaries() {
        let text = "é<system-reminder>ü</system-reminder>日本";
        assert_eq!(shape(text), ["T:é", "S:system-reminder:36", "T:日本"]);
    }
}

//! The continuation notice (record §7.6, §7.9, amendment 2026-10-11): what a continued or
//! forked head is told. Pure: the session, the intent, its chapters and the rules block in;
//! the notice's bytes out. A continuation carries both rule tiers; a fork carries project
//! rules only (the caller assembles the block with the session tier off).

/// Continue the same session tree, or branch from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NoticeIntent {
    Continue,
    Fork,
}

/// One archived chapter of the session tree, as the notice lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChapterLine {
    pub title: String,
    /// Workspace-relative path.
    pub path: String,
    pub kind: String,
}

/// The `## Finding things` block: the three verbs a child would otherwise never reach for.
pub const FINDING_THINGS: &str = "## Finding things\n\n\
- `chapters_search` — search this project's archived chapters, plans (`kind: plan`) and rules by words; rules approved on other machines arrive through the pool.\n\
- `chapters_rules` — call it with the task description before you start: it returns the rules that apply.\n\
- `chapters_artifact` — the full text of an oversized tool result, by the hash a chapter names.\n";

pub fn build(
    session: &str,
    intent: NoticeIntent,
    chapters: &[ChapterLine],
    rules_block: &str,
) -> String {
    let mut out = match intent {
        NoticeIntent::Continue => format!("# Continuing session {session}\n\n"),
        NoticeIntent::Fork => format!("# Forked from session {session}\n\n"),
    };
    if !chapters.is_empty() {
        out.push_str("## Earlier chapters\n\n");
        for c in chapters {
            out.push_str(&format!("- {} ({}) — {}\n", c.title, c.kind, c.path));
        }
        out.push('\n');
    }
    if !rules_block.is_empty() {
        out.push_str(rules_block);
        out.push('\n');
    }
    out.push_str(FINDING_THINGS);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_names_the_three_verbs_and_carries_the_block() {
        let chapters = vec![ChapterLine {
            title: "Fix the refresh".into(),
            path: ".dsh-chapters/s/chapters/001-fix.md".into(),
            kind: "chapter".into(),
        }];
        let text = build("s-1", NoticeIntent::Continue, &chapters, "## Rules\n\nx\n");
        assert!(text.starts_with("# Continuing session s-1\n"));
        for verb in [
            "`chapters_search`",
            "`chapters_rules`",
            "`chapters_artifact`",
        ] {
            assert!(text.contains(verb), "{verb}");
        }
        assert!(text.contains("## Rules\n\nx\n") && text.contains("001-fix.md"));
        let empty = build("s-1", NoticeIntent::Fork, &[], "");
        assert!(empty.starts_with("# Forked from session s-1\n\n## Finding things"));
        assert!(!empty.contains("## Rules"));
    }
}

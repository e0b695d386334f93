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

use crate::redact::Redacted;
use crate::store::{ArchivedDoc, STORE_DIR};

/// One archived chapter of the session tree, as the notice lists it: derived from the
/// store's `Redacted<ArchivedDoc>` (`Redacted::derive(ChapterLine::of)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChapterLine {
    pub title: String,
    /// The document's file name in its root's `chapters/`.
    pub file_name: String,
    pub kind: String,
}

impl ChapterLine {
    pub fn of(doc: &ArchivedDoc) -> ChapterLine {
        ChapterLine {
            title: doc.title.clone(),
            file_name: doc.file_name.clone(),
            kind: doc.kind.clone(),
        }
    }
}

/// The `## Finding things` block: the three verbs a child would otherwise never reach for.
pub const FINDING_THINGS: &str = "## Finding things\n\n\
- `chapters_search` — search this project's archived chapters, plans (`kind: plan`) and rules by words; rules approved on other machines arrive through the pool.\n\
- `chapters_rules` — call it with the task description before you start: it returns the rules that apply.\n\
- `chapters_artifact` — the full text of an oversized tool result, by the hash a chapter names.\n";

/// The notice of `session` (of the tree rooted at `root`). The chapter lines are `Redacted`:
/// read back from the store, never raw text.
pub fn build(
    session: &str,
    root: &str,
    intent: NoticeIntent,
    chapters: &[Redacted<ChapterLine>],
    rules_block: &Redacted<String>,
) -> Redacted<String> {
    let head = NoticeHead {
        session: session.to_owned(),
        root: root.to_owned(),
        intent,
    };
    chapters
        .iter()
        .cloned()
        .collect::<Redacted<Vec<ChapterLine>>>()
        .zip(rules_block.clone())
        .derive_with(&head, render)
}

/// Which notice: ids and the intent, no conversation text.
struct NoticeHead {
    session: String,
    root: String,
    intent: NoticeIntent,
}

impl crate::redact::Settings for NoticeHead {}

fn render((chapters, rules_block): &(Vec<ChapterLine>, String), head: &NoticeHead) -> String {
    let (session, root) = (&head.session, &head.root);
    let mut out = match head.intent {
        NoticeIntent::Continue => format!("# Continuing session {session}\n\n"),
        NoticeIntent::Fork => format!("# Forked from session {session}\n\n"),
    };
    if !chapters.is_empty() {
        out.push_str("## Earlier chapters\n\n");
        for c in chapters {
            out.push_str(&format!(
                "- {} ({}) — {STORE_DIR}/{root}/chapters/{}\n",
                c.title, c.kind, c.file_name
            ));
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

impl crate::redact::Redactable for ChapterLine {
    fn map_text(self, f: &mut dyn FnMut(&str) -> String) -> Self {
        ChapterLine {
            title: f(&self.title),
            file_name: f(&self.file_name),
            kind: f(&self.kind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_names_the_three_verbs_and_carries_the_block() {
        let line = ChapterLine {
            title: "Fix the refresh".into(),
            file_name: "001-fix.md".into(),
            kind: "chapter".into(),
        };
        let rules = crate::redact::built_in().unwrap();
        let chapters = vec![rules.redact_all(line, &mut Default::default())];
        let block = rules.redact("## Rules\n\nx\n", &mut Default::default());
        let text = build("s-1", "s", NoticeIntent::Continue, &chapters, &block);
        assert!(text.starts_with("# Continuing session s-1\n"));
        for verb in [
            "`chapters_search`",
            "`chapters_rules`",
            "`chapters_artifact`",
        ] {
            assert!(text.contains(verb), "{verb}");
        }
        assert!(
            text.contains("## Rules\n\nx\n")
                && text.contains(
                    "- Fix the refresh (chapter) — .dsh-chapters/s/chapters/001-fix.md\n"
                )
        );
        let none = rules.redact("", &mut Default::default());
        let empty = build("s-1", "s", NoticeIntent::Fork, &[], &none);
        assert!(empty.starts_with("# Forked from session s-1\n\n## Finding things"));
        assert!(!empty.contains("## Rules"));
    }
}

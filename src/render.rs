//! Rendering: a chapter span and its events → the chapter document, its artifacts and
//! its plan documents, all redacted at the one chokepoint. Pure. OWNER: render helper.

use serde::{Deserialize, Serialize};

use crate::compose::ChapterSpan;
use crate::redact::{RedactionCounts, Redacted, Redactor};
use crate::turn::CompletedTurn;

/// Who and where a chapter belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct ChapterMeta {
    pub project_key: String,
    pub harness_id: String,
    pub session_id: String,
    pub root_session_id: String,
    /// The chapter number (NNN).
    pub number: u32,
    /// The first plan number free for plans found in this chapter.
    pub next_plan_number: u32,
    /// Tool results of at least this many estimated tokens become artifacts.
    pub tool_result_artifact_tokens: u64,
}

/// A content-addressed artifact: `artifacts/<sha[0:2]>/<sha>.txt`.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    /// SHA-256 (hex) of the redacted content bytes.
    pub sha256: String,
    pub content: Redacted<String>,
}

/// A document ready for the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// `NNN-<slug>.md` or `plan-NNN-<slug>.md`.
    pub file_name: String,
    pub text: Redacted<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct RenderStats {
    /// Conversation messages rendered (user, assistant, delegate reports).
    pub messages: u64,
    /// Host-injected messages screened out (each left a marker).
    pub omitted_injections: u64,
    pub redactions: RedactionCounts,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RenderedChapter {
    pub chapter: Document,
    pub artifacts: Vec<Artifact>,
    pub plans: Vec<Document>,
    pub stats: RenderStats,
}

/// The frontmatter fields the store and the index read back. Unknown keys ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FrontmatterSummary {
    pub title: String,
    pub kind: String,
    pub session_id: String,
    pub root_session_id: String,
    pub seq_range: (u64, u64),
}

#[derive(Debug, thiserror::Error)]
pub enum FrontmatterError {
    #[error("no YAML frontmatter (a document must start with a `---` line)")]
    Missing,
    #[error("bad frontmatter: {0}")]
    Yaml(String),
}

/// Render one chapter. `turns` are exactly the span's member turns, in order.
pub fn render_chapter(
    span: &ChapterSpan,
    turns: &[&CompletedTurn],
    meta: &ChapterMeta,
    redactor: &Redactor,
) -> RenderedChapter {
    let _ = (span, turns, meta, redactor);
    unimplemented!("render helper pending")
}

/// Read the frontmatter back from a stored document.
pub fn parse_frontmatter(doc: &str) -> Result<FrontmatterSummary, FrontmatterError> {
    let yaml = frontmatter_text(doc).ok_or(FrontmatterError::Missing)?;
    serde_saphyr::from_str(yaml).map_err(|e| FrontmatterError::Yaml(e.to_string()))
}

/// The YAML between the opening `---` line and the closing `---` line.
pub fn frontmatter_text(doc: &str) -> Option<&str> {
    let rest = doc.strip_prefix("---\n")?;
    if let Some(body) = rest.strip_prefix("---\n") {
        return Some(&body[..0]);
    }
    let end = rest.find("\n---\n").or_else(|| rest.strip_suffix("\n---").map(|r| r.len()))?;
    Some(&rest[..end + 1])
}

/// `lowercase, [^a-z0-9]+ → -, trimmed, ≤ 48 chars`.
pub fn slug(title: &str) -> String {
    let mut out = String::with_capacity(title.len().min(48));
    let mut pending_dash = false;
    for c in title.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c);
        } else {
            pending_dash = true;
        }
    }
    if out.len() > 48 {
        out.truncate(48);
        while out.ends_with('-') {
            out.pop();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slug_rules() {
        assert_eq!(slug("Fix the Refresh-Token middleware!"), "fix-the-refresh-token-middleware");
        assert_eq!(slug("  --Ünïcode  & spaces--  "), "n-code-spaces");
        assert_eq!(slug("!!!"), "");
        let long = slug(&"word ".repeat(30));
        assert!(long.len() <= 48 && !long.ends_with('-'), "{long}");
    }

    #[test]
    fn frontmatter_round_trip() {
        let doc = "---\ntitle: \"A: b\"\nkind: chapter\nsessionId: session-1\nrootSessionId: session-1\nseqRange: [3, 9]\nextra: [1]\n---\n# body\n";
        let fm = parse_frontmatter(doc).expect("parses");
        assert_eq!(fm.seq_range, (3, 9));
        assert_eq!(fm.title, "A: b");
        assert!(matches!(parse_frontmatter("# no"), Err(FrontmatterError::Missing)));
        assert!(matches!(parse_frontmatter("---\ntitle: [\n---\n"), Err(FrontmatterError::Yaml(_))));
    }
}

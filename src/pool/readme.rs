//! The pool's landing pages (PURE): `README.md` at the pool's root and `index/README.md`,
//! derived like the topic index and rebuilt by a sync that publishes, so a person browsing
//! the pool on a forge (GitHub, GitLab, Gitea) reads a page, not folders of hashes.
//!
//! Every link is relative and resolves in the pool's layout: chapters at
//! `chapters/<projectKey>/<root>/<file>`, topic shards at `index/<shard file>`. A link target
//! is percent-encoded where a forge would otherwise read a byte of it as syntax or as an
//! escape (a shard's `%HH`, spaces, parentheses). Text comes from documents' frontmatter
//! (already redacted when they were written) and is written on one line, with the bytes
//! Markdown reads as syntax escaped. Deterministic: the same documents, facts and machine
//! list give the same bytes.

use std::collections::BTreeMap;

use crate::curation::Curation;
use crate::index::shard::{self, INDEX_DIR};
use crate::index::IndexDoc;

pub const ROOT_README: &str = "README.md";
/// Relative to the pool's root.
pub const INDEX_README: &str = "index/README.md";
/// How many of the newest chapters the root page lists.
pub const NEWEST: usize = 50;

/// What the pages are made of.
pub struct Inputs<'a> {
    pub project_key: &'a str,
    pub slug: &'a str,
    /// The pool's documents, paths relative to the pool's root.
    pub docs: &'a [IndexDoc],
    pub curation: &'a Curation,
    /// Harness id → the time (RFC 3339) of its last publish that rewrote the page.
    pub machines: &'a BTreeMap<String, String>,
}

const MACHINES_START: &str = "<!-- machines -->";
const MACHINES_END: &str = "<!-- /machines -->";

/// The machine table of a root page this module wrote (`harness → last publish`); empty
/// for anything else.
pub fn machines_in(readme: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(start) = readme.find(MACHINES_START) else {
        return out;
    };
    let rest = &readme[start + MACHINES_START.len()..];
    let table = rest.find(MACHINES_END).map_or(rest, |end| &rest[..end]);
    for line in table.lines() {
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').collect();
        if let [harness, at] = cells.as_slice() {
            let harness = harness.trim().trim_matches('`');
            let at = at.trim();
            if !harness.is_empty()
                && harness != "machine"
                && !harness.starts_with('-')
                && crate::search::parse_rfc3339_ms(at).is_some()
            {
                out.insert(harness.to_owned(), at.to_owned());
            }
        }
    }
    out
}

/// Topic → how many documents its shard lists (canonical topics only).
fn topic_counts(docs: &[IndexDoc], curation: &Curation) -> BTreeMap<String, u64> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for d in docs {
        let mut topics = shard::canonical_topics(d, curation);
        topics.sort();
        topics.dedup();
        for t in topics {
            *counts.entry(t).or_default() += 1;
        }
    }
    counts
}

/// `README.md` at the pool's root.
pub fn render_root(inputs: &Inputs<'_>) -> String {
    let mut out = format!(
        "# {} — conversation chapters\n\n\
         Written by dsh-chapters; derived, do not edit (every sync that publishes rebuilds it).\n\n\
         Project key `{}`. Each machine publishes its own sessions' chapters under \
         [`chapters/{}/`](chapters/{}/); the [topic index](index/README.md) lists every document \
         by topic.\n\n",
        text(inputs.slug),
        code(inputs.project_key),
        code(inputs.project_key),
        target(inputs.project_key)
    );
    let chapters: Vec<&IndexDoc> = inputs
        .docs
        .iter()
        .filter(|d| d.kind == "chapter" || d.kind == "plan")
        .collect();
    out.push_str(&format!(
        "{} document(s): {} chapter(s) and plan(s), {} topic(s).\n\n",
        inputs.docs.len(),
        chapters.len(),
        topic_counts(inputs.docs, inputs.curation).len()
    ));
    out.push_str("## Machines\n\nEach machine (its harness id) and its last publish that rebuilt this page.\n\n");
    out.push_str(MACHINES_START);
    out.push_str("\n\n| machine | last publish |\n|---|---|\n");
    for (harness, at) in inputs.machines {
        out.push_str(&format!("| `{}` | {} |\n", code(harness), text(at)));
    }
    out.push('\n');
    out.push_str(MACHINES_END);
    out.push_str("\n\n## Topics\n\n");
    out.push_str(&topic_list(inputs, "index/"));
    out.push_str(&format!("\n## The {NEWEST} newest chapters\n\n"));
    let mut newest = chapters;
    newest.sort_by(|a, b| newest_first(a, b));
    if newest.is_empty() {
        out.push_str("None yet.\n");
    }
    for d in newest.into_iter().take(NEWEST) {
        out.push_str(&format!(
            "- {} [{}]({}) ({})\n",
            crate::search::day_of(d.date.as_deref()),
            title(d),
            target(&d.path),
            text(&d.kind)
        ));
    }
    out
}

/// `index/README.md`: every topic with its count, linking to its shard.
pub fn render_index(inputs: &Inputs<'_>) -> String {
    format!(
        "# Topic index of {}\n\n\
         Written by dsh-chapters; derived, do not edit. One page per topic, newest documents \
         first; a topic folded into another by curation keeps a page that points there. \
         Back to the [pool's front page](../README.md).\n\n{}",
        text(inputs.slug),
        topic_list(inputs, "")
    )
}

fn topic_list(inputs: &Inputs<'_>, prefix: &str) -> String {
    let counts = topic_counts(inputs.docs, inputs.curation);
    if counts.is_empty() {
        return "None yet.\n".to_owned();
    }
    let mut out = String::new();
    for (topic, n) in &counts {
        out.push_str(&format!(
            "- [{}]({prefix}{}) — {n}\n",
            text(topic),
            target(&shard::shard_file(topic))
        ));
    }
    out
}

/// Newest first (undated last), then by path.
fn newest_first(a: &IndexDoc, b: &IndexDoc) -> std::cmp::Ordering {
    let at = |d: &IndexDoc| d.date.as_deref().and_then(crate::search::parse_rfc3339_ms);
    at(b).cmp(&at(a)).then_with(|| a.path.cmp(&b.path))
}

fn title(d: &IndexDoc) -> String {
    let t = text(&d.title);
    if t.is_empty() {
        text(d.path.rsplit('/').next().unwrap_or(&d.path))
    } else {
        t
    }
}

/// One line of text with Markdown's syntax bytes escaped (a title never becomes a link,
/// an image, markup or a table cell's end).
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            c if c.is_control() => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '!' | '&' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.trim().to_owned()
}

/// Text inside a code span: no backtick, one line.
fn code(s: &str) -> String {
    s.chars()
        .map(|c| if c == '`' || c.is_control() { ' ' } else { c })
        .collect()
}

/// A relative link target: every byte outside the unreserved set and `/` percent-encoded
/// (so a shard's `%HH`, a space or a parenthesis reaches the forge as the file's name).
pub fn target(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Where the index pages live, for callers that list the index directory.
pub fn index_readme_file() -> &'static str {
    INDEX_README
        .strip_prefix(INDEX_DIR)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(INDEX_README)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(path: &str, title: &str, date: &str, topics: &[&str]) -> IndexDoc {
        IndexDoc {
            path: path.into(),
            title: title.into(),
            kind: "chapter".into(),
            date: Some(date.into()),
            topics: topics.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn pages_list_topics_and_newest_chapters_with_links_that_name_pool_files() {
        let docs = vec![
            doc(
                "chapters/pk/r1/001-a.md",
                "Fix [the] *auth*",
                "2026-11-02T10:00:00Z",
                &["auth", "c++"],
            ),
            doc(
                "chapters/pk/r2/001-b.md",
                "Export CSV",
                "2026-11-03T10:00:00Z",
                &["export"],
            ),
        ];
        let machines: BTreeMap<String, String> =
            [("m1".to_owned(), "2026-11-03T10:00:00.000Z".to_owned())].into();
        let curation = Curation::default();
        let inputs = Inputs {
            project_key: "pk",
            slug: "team/app",
            docs: &docs,
            curation: &curation,
            machines: &machines,
        };
        let root = render_root(&inputs);
        assert!(
            root.contains("[Export CSV](chapters/pk/r2/001-b.md)"),
            "{root}"
        );
        assert!(root.contains(r"Fix \[the\] \*auth\*"), "{root}");
        assert!(root.contains("[c++](index/c%252B%252B.md) — 1"), "{root}");
        assert!(
            root.find("Export CSV") < root.find("Fix"),
            "newest first: {root}"
        );
        assert_eq!(machines_in(&root), machines);
        assert_eq!(render_root(&inputs), root, "deterministic");
        let index = render_index(&inputs);
        assert!(index.contains("[auth](auth.md) — 1"), "{index}");
        assert!(index.contains("(../README.md)"), "{index}");
        assert_eq!(index_readme_file(), "README.md");
    }

    #[test]
    fn machines_of_a_page_not_ours_are_none() {
        assert!(machines_in("# Someone's README\n| a | b |\n").is_empty());
    }
}

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

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::curation::Curation;
use crate::topics::shard::{self, INDEX_DIR};
use crate::topics::IndexDoc;

pub const ROOT_README: &str = "README.md";
/// Relative to the pool's root.
pub const INDEX_README: &str = "index/README.md";
/// How many of the newest chapters the root page lists.
pub const NEWEST: usize = 50;
const PAGES_VERSION: u32 = 1;
/// The page's own data, on the last line of `README.md` inside an HTML comment (a forge
/// shows nothing of it): the next sync updates the pages from it and the change alone.
const DATA_START: &str = "<!-- dsh-chapters-pages ";
const DATA_END: &str = " -->";

/// What the pages say. Kept up by the change: the index update's shards give the topics'
/// counts, the documents a sync publishes or receives join the newest list.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pages {
    pub v: u32,
    pub documents: u64,
    /// Harness id → the time (RFC 3339) of its last publish that rewrote the pages.
    pub machines: BTreeMap<String, String>,
    /// Canonical topic → how many documents its shard lists.
    pub topics: BTreeMap<String, u64>,
    /// The newest chapters and plans, newest first, at most [`NEWEST`].
    pub newest: Vec<Entry>,
}

/// One chapter or plan of the newest list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub title: String,
    pub date: Option<String>,
    pub kind: String,
}

impl From<IndexDoc> for Entry {
    fn from(d: IndexDoc) -> Entry {
        Entry {
            path: d.path,
            title: d.title,
            date: d.date,
            kind: d.kind,
        }
    }
}

impl Pages {
    /// The pages of a whole pool (a first build, a full index rebuild).
    pub fn full(docs: &[IndexDoc], curation: &Curation) -> Pages {
        let mut topics: BTreeMap<String, u64> = BTreeMap::new();
        for d in docs {
            let canonical: BTreeSet<String> =
                shard::canonical_topics(d, curation).into_iter().collect();
            for t in canonical {
                *topics.entry(t).or_default() += 1;
            }
        }
        let mut pages = Pages {
            v: PAGES_VERSION,
            documents: docs.len() as u64,
            topics,
            ..Pages::default()
        };
        pages.add_newest(docs.iter().cloned());
        pages
    }

    /// The data a root page written by this module carries; `None` for any other page.
    pub fn parse(readme: &str) -> Option<Pages> {
        let line = readme.lines().rev().find(|l| l.starts_with(DATA_START))?;
        let json = line.strip_prefix(DATA_START)?.strip_suffix(DATA_END)?;
        serde_json::from_str::<Pages>(json)
            .ok()
            .filter(|p| p.v == PAGES_VERSION)
    }

    /// Topic counts from the shards an index update wrote or removed (a shard's header
    /// holds its count; an alias stub or a removed shard lists nothing).
    pub fn apply_shards(&mut self, writes: &BTreeMap<String, String>, removes: &BTreeSet<String>) {
        for file in removes {
            if let Some(topic) = shard::topic_of_file(file) {
                self.topics.remove(&topic);
            }
        }
        for (file, text) in writes {
            let Some(topic) = shard::topic_of_file(file) else {
                continue;
            };
            let count = text
                .lines()
                .next()
                .and_then(|h| h.strip_prefix(&format!("# {topic} — ")))
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse::<u64>().ok());
            match count {
                Some(n) if n > 0 => {
                    self.topics.insert(topic, n);
                }
                _ => {
                    self.topics.remove(&topic);
                }
            }
        }
    }

    /// Chapters and plans join the newest list (a path already there is replaced).
    pub fn add_newest(&mut self, docs: impl IntoIterator<Item = IndexDoc>) {
        let mut by_path: BTreeMap<String, Entry> =
            self.newest.drain(..).map(|d| (d.path.clone(), d)).collect();
        for d in docs {
            if d.kind == "chapter" || d.kind == "plan" {
                by_path.insert(d.path.clone(), Entry::from(d));
            }
        }
        let mut all: Vec<Entry> = by_path.into_values().collect();
        all.sort_by(newest_first);
        all.truncate(NEWEST);
        self.newest = all;
    }

    /// Drop the entries whose file the pool no longer holds (a person's forget).
    pub fn retain_newest(&mut self, mut holds: impl FnMut(&str) -> bool) {
        self.newest.retain(|d| holds(&d.path));
    }

    /// `README.md` at the pool's root.
    pub fn render_root(&self, project_key: &str, slug: &str) -> String {
        let mut out = format!(
            "# {} — conversation chapters\n\n\
             Written by dsh-chapters; derived, do not edit (every sync that publishes rebuilds it).\n\n\
             Project key `{}`. Each machine publishes its own sessions' chapters under \
             [`chapters/{}/`](chapters/{}/); the [topic index](index/README.md) lists every document \
             by topic.\n\n",
            text(slug),
            code(project_key),
            code(project_key),
            target(project_key)
        );
        out.push_str(&format!(
            "{} document(s), {} topic(s).\n\n",
            self.documents,
            self.topics.len()
        ));
        out.push_str("## Machines\n\nEach machine (its harness id) and its last publish that rebuilt this page.\n\n");
        out.push_str("| machine | last publish |\n|---|---|\n");
        for (harness, at) in &self.machines {
            out.push_str(&format!("| `{}` | {} |\n", code(harness), text(at)));
        }
        out.push_str("\n## Topics\n\n");
        out.push_str(&self.topic_list("index/"));
        out.push_str(&format!("\n## The {NEWEST} newest chapters\n\n"));
        if self.newest.is_empty() {
            out.push_str("None yet.\n");
        }
        for d in &self.newest {
            out.push_str(&format!(
                "- {} [{}]({}) ({})\n",
                crate::catalog::score::day_of(d.date.as_deref()),
                title(d),
                target(&d.path),
                text(&d.kind)
            ));
        }
        let json = serde_json::to_string(self)
            .expect("pages always serialize")
            .replace('<', "\\u003c")
            .replace('>', "\\u003e");
        out.push_str(&format!("\n{DATA_START}{json}{DATA_END}\n"));
        out
    }

    /// `index/README.md`: every topic with its count, linking to its shard.
    pub fn render_index(&self, slug: &str) -> String {
        format!(
            "# Topic index of {}\n\n\
             Written by dsh-chapters; derived, do not edit. One page per topic, newest documents \
             first; a topic folded into another by curation keeps a page that points there. \
             Back to the [pool's front page](../README.md).\n\n{}",
            text(slug),
            self.topic_list("")
        )
    }

    fn topic_list(&self, prefix: &str) -> String {
        if self.topics.is_empty() {
            return "None yet.\n".to_owned();
        }
        let mut out = String::new();
        for (topic, n) in &self.topics {
            out.push_str(&format!(
                "- [{}]({prefix}{}) — {n}\n",
                text(topic),
                target(&shard::shard_file(topic))
            ));
        }
        out
    }
}

/// Newest first (undated last), then by path.
fn newest_first(a: &Entry, b: &Entry) -> std::cmp::Ordering {
    let at = |d: &Entry| d.date.as_deref().and_then(crate::time::parse_rfc3339_ms);
    at(b).cmp(&at(a)).then_with(|| a.path.cmp(&b.path))
}

fn title(d: &Entry) -> String {
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
                "Fix [the] *auth* -->",
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
        let mut pages = Pages::full(&docs, &Curation::default());
        pages
            .machines
            .insert("m1".into(), "2026-11-03T10:00:00.000Z".into());
        let root = pages.render_root("pk", "team/app");
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
        // The data line survives a title that would end an HTML comment.
        assert_eq!(root.matches("-->").count(), 1, "{root}");
        assert_eq!(Pages::parse(&root), Some(pages.clone()));
        assert_eq!(pages.render_root("pk", "team/app"), root, "deterministic");
        let index = pages.render_index("team/app");
        assert!(index.contains("[auth](auth.md) — 1"), "{index}");
        assert!(index.contains("(../README.md)"), "{index}");
        assert_eq!(index_readme_file(), "README.md");
    }

    #[test]
    fn pages_follow_the_change() {
        let mut pages = Pages::full(
            &[doc(
                "chapters/pk/r1/001-a.md",
                "A",
                "2026-11-02T10:00:00Z",
                &["auth"],
            )],
            &Curation::default(),
        );
        let writes: BTreeMap<String, String> = [
            (
                "auth.md".to_owned(),
                "# auth — 2 documents, last updated 2026-11-04\n\n".to_owned(),
            ),
            (
                "db.md".to_owned(),
                "# db — 1 document, last updated 2026-11-04\n\n".to_owned(),
            ),
            (
                "old.md".to_owned(),
                "# old — merged into [db](db.md)\n".to_owned(),
            ),
            ("manifest/ab.json".to_owned(), "{}".to_owned()),
        ]
        .into();
        pages.apply_shards(&writes, &BTreeSet::new());
        assert_eq!(
            pages.topics,
            [("auth".to_owned(), 2), ("db".to_owned(), 1)].into()
        );
        pages.apply_shards(&BTreeMap::new(), &["db.md".to_owned()].into());
        assert_eq!(pages.topics, [("auth".to_owned(), 2)].into());
        let many: Vec<IndexDoc> = (0..60)
            .map(|i| {
                doc(
                    &format!("chapters/pk/r2/{i:03}-x.md"),
                    "X",
                    &format!("2026-11-05T10:{i:02}:00Z"),
                    &[],
                )
            })
            .collect();
        pages.add_newest(many);
        assert_eq!(pages.newest.len(), NEWEST);
        assert_eq!(pages.newest[0].path, "chapters/pk/r2/059-x.md");
        pages.retain_newest(|p| p != "chapters/pk/r2/059-x.md");
        assert_eq!(pages.newest[0].path, "chapters/pk/r2/058-x.md");
    }

    #[test]
    fn a_page_not_ours_has_no_data() {
        assert_eq!(Pages::parse("# Someone's README\n| a | b |\n"), None);
    }
}

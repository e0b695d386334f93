//! Layer 2 of the index (record §10.2): the published topic index, built from the catalog.
//!
//! - `shard` (pure): one markdown shard per canonical topic, alias stubs, the manifest —
//!   a function of the documents and the curation facts, nothing else.
//! - `vocab` (pure): merge candidates for the emergent vocabulary (§6.3) and
//!   `topics/vocabulary.json`.
//! - `build` (shell): the incremental index build (store, or the pool inside `sync`) and
//!   `chapters index rebuild`.

pub mod build;
pub mod shard;
pub mod vocab;

/// One document as the index sees it: where it is (relative to the index's base: the pool's
/// root, or the store), and the frontmatter fields shards and search use.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexDoc {
    pub path: String,
    pub title: String,
    pub kind: String,
    /// RFC 3339, or `None` when the document carries no date.
    pub date: Option<String>,
    /// Topics as written in the frontmatter, normalized (`curation::normalize_topic`);
    /// canonicalization happens when the index or a query reads them.
    pub topics: Vec<String>,
}

/// Text fields through the rules: how a test (or a writer with text of its own) gets the
/// `Redacted<IndexDoc>` a shard takes; the index itself reads them back from the table.
impl crate::redact::Redactable for IndexDoc {
    fn map_text(self, f: &mut dyn FnMut(&str) -> String) -> Self {
        IndexDoc {
            path: f(&self.path),
            title: f(&self.title),
            kind: f(&self.kind),
            date: self.date.as_deref().map(&mut *f),
            topics: self.topics.iter().map(|t| f(t)).collect(),
        }
    }
}

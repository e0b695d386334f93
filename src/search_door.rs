//! The two doors of `chapters search` (shell): which documents a search reads, and the
//! search itself over the search table (`index::table`).
//!
//! Not linked → this machine's store only, and the answer says other machines' work is not
//! here. Linked → the pool mirror (other machines' files) plus this machine's store (the sync
//! does not materialize this machine's own files in the mirror), one document read once.
//! Either way an unreadable document is counted and named, never silently dropped. The
//! table is brought up to date first (only the folders the store's change journal names are
//! looked at, only new or rewritten files read), so a query never parses the corpus.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::curation::Curation;
use crate::index::build::{self, BuildError, VocabApply};
use crate::index::shard::{self, INDEX_DIR};
use crate::index::table::{Found, Table, TableDoc, TableError, TableQuery};
use crate::pool::link;
use crate::pool::plan::Visibility;
use crate::search::{self, ScoreParams, SearchDoc};
use crate::store::{MIRROR_DIR, STORE_DIR};

#[derive(Debug, thiserror::Error)]
pub enum DoorError {
    #[error(transparent)]
    Link(#[from] link::LinkError),
    #[error(transparent)]
    Table(#[from] TableError),
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// Which door answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Door {
    /// No pool linked: this machine's store only.
    Store,
    /// Linked: the pool mirror and this machine's store.
    PoolAndStore,
}

impl Door {
    /// The sentence naming the door, so "this machine only" is never read as "the project".
    pub fn describe(self, documents: u64, mirror_absent: bool) -> String {
        match self {
            Door::Store => format!(
                "searched this machine's store only ({documents} documents; no pool linked — other machines' work is not here)"
            ),
            Door::PoolAndStore if mirror_absent => format!(
                "searched the pool mirror and this machine's store ({documents} documents; the mirror is empty — run `chapters sync` to bring in other machines' work)"
            ),
            Door::PoolAndStore => format!(
                "searched the pool mirror and this machine's store ({documents} documents)"
            ),
        }
    }
}

/// A document that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub path: String,
    pub reason: String,
}

/// The documents behind one search.
pub struct Corpus {
    /// `None` when the workspace has no store: no documents (an answer, not a failure).
    table: Option<Table>,
    pub door: Door,
    /// Documents in the door (of this project unless `cross_project`).
    pub documents: u64,
    /// Documents left out because they belong to another project (see `cross_project`).
    pub other_projects: u64,
    pub unreadable: Vec<Unreadable>,
    /// Linked, but the mirror holds no chapters directory yet (never synced).
    pub mirror_absent: bool,
    /// Every machine's curation facts (aliases, weights, rule decisions).
    pub curation: Curation,
    /// Notes about the curation files (torn tails, facts this version cannot honour).
    pub notes: Vec<String>,
    /// Where this door's topic shards live.
    pub index_dir: PathBuf,
    project_key: String,
    cross_project: bool,
}

/// Open the door this workspace has and bring its table up to date. When the store holds
/// the index (not linked to a private pool), the store index is brought up to date too,
/// unless an archive or sync holds the store (the next search does it).
pub fn open(
    workspace: &Path,
    project_key: &str,
    cross_project: bool,
    lock_timeout: Duration,
    vocabulary: Option<&VocabApply<'_>>,
) -> Result<Corpus, DoorError> {
    let store_dir = workspace.join(STORE_DIR);
    let link = if store_dir.is_dir() {
        link::read(&store_dir)?
    } else {
        None
    };
    let linked = link.is_some();
    let private_pool = link
        .as_ref()
        .is_some_and(|l| l.visibility == Visibility::Private);
    let mirror_dir = workspace.join(MIRROR_DIR);
    let door = if linked {
        Door::PoolAndStore
    } else {
        Door::Store
    };
    let index_dir = if private_pool {
        mirror_dir.join(INDEX_DIR)
    } else {
        store_dir.join(INDEX_DIR)
    };
    let mut corpus = Corpus {
        table: None,
        door,
        documents: 0,
        other_projects: 0,
        unreadable: Vec::new(),
        mirror_absent: linked && !mirror_dir.join("chapters").is_dir(),
        curation: Curation::default(),
        notes: Vec::new(),
        index_dir,
        project_key: project_key.to_owned(),
        cross_project,
    };
    if !store_dir.is_dir() {
        return Ok(corpus);
    }
    let (table, _) = Table::refresh(workspace, linked, lock_timeout)?;
    if !private_pool {
        update_store_index(workspace, project_key, &table, vocabulary);
    }
    let inputs = build::read_curation(&store_dir, linked.then_some(mirror_dir.as_path()))?;
    (corpus.documents, corpus.other_projects) = table.counts(project_key, cross_project, linked);
    corpus.unreadable = table
        .unreadable()
        .iter()
        .filter(|(path, _)| linked || !path.starts_with(MIRROR_DIR))
        .map(|(path, reason)| Unreadable {
            path: path.clone(),
            reason: reason.clone(),
        })
        .collect();
    corpus.curation = inputs.curation;
    corpus.notes = inputs.notes;
    corpus.table = Some(table);
    Ok(corpus)
}

/// The store's index follows its documents; a busy store (an archive or a sync running)
/// is left for the next search.
fn update_store_index(
    workspace: &Path,
    project_key: &str,
    table: &Table,
    vocabulary: Option<&VocabApply<'_>>,
) {
    if vocabulary.is_none() && build::store_index_current(workspace, table) {
        return;
    }
    let Ok(store) = crate::store::Store::open(workspace) else {
        return;
    };
    let Ok(_lock) = store.lock(Duration::ZERO) else {
        return;
    };
    if let Some(apply) = vocabulary {
        if let Err(e) = build::apply_vocabulary(&store, table, project_key, false, None, apply) {
            tracing::warn!(error = %e, "could not apply the vocabulary");
        }
    }
    if let Err(e) = build::update_store(workspace, table, false) {
        tracing::warn!(error = %e, "could not update the store's topic index");
    }
}

/// One ranked result with its document.
pub struct Hit {
    pub score: f64,
    pub doc: SearchDoc,
}

/// The fewest tokens a result line can cost: its score, separators, a store path of at
/// least `.dsh-chapters/x/chapters/x.md` and `(topics: )` are over 56 characters.
const MIN_LINE_TOKENS: u64 = 14;

/// One query answered and packed to a budget: the one path `chapters search` and the MCP
/// tool `chapters_search` share.
pub struct PackedAnswer {
    /// The resolved leading matches; the first `packed.shown` fit the budget.
    pub hits: Vec<Hit>,
    pub lines: Vec<String>,
    pub packed: search::Packed,
    /// Every match, shown or not.
    pub total: usize,
}

/// The answer to one query: every match's rank, and the leading ones resolved to documents.
pub struct Answer {
    pub total: usize,
    found: Vec<Found>,
}

impl Corpus {
    /// The shard file of a topic in this door, if it exists.
    pub fn shard_path(&self, canonical_topic: &str) -> Option<PathBuf> {
        let path = self.index_dir.join(shard::shard_file(canonical_topic));
        path.is_file().then_some(path)
    }

    /// Rank every document of the door for `terms` (and a canonical `topic`); the first
    /// `resolve` results are in their final order.
    pub fn search(
        &self,
        terms: &[String],
        topic: Option<&str>,
        params: &ScoreParams,
        harness: &str,
        now_ms: i64,
        resolve: usize,
    ) -> Result<Answer, DoorError> {
        let Some(table) = &self.table else {
            return Ok(Answer {
                total: 0,
                found: Vec::new(),
            });
        };
        let found = table.search(&TableQuery {
            terms,
            topic,
            project_key: &self.project_key,
            cross_project: self.cross_project,
            include_mirror: self.door == Door::PoolAndStore,
            curation: &self.curation,
            harness,
            params,
            now_ms,
            resolve,
        })?;
        Ok(Answer {
            total: found.len(),
            found,
        })
    }

    /// The `n`th result's document, as the scorer reads it.
    pub fn hit(&self, answer: &Answer, n: usize, harness: &str) -> Result<Hit, DoorError> {
        let f = answer.found[n];
        let table = self
            .table
            .as_ref()
            .expect("an answer with results comes from a table");
        let doc: TableDoc = table.doc(f.seg, f.id)?;
        Ok(Hit {
            score: f.score,
            doc: doc.search_doc(&self.curation, harness),
        })
    }

    /// Answer a query and pack whole result lines to `budget` tokens, resolving only as many
    /// leading matches as can be shown (more only if a tie needs it).
    pub fn answer_packed(
        &self,
        terms: &[String],
        topic: Option<&str>,
        params: &ScoreParams,
        harness: &str,
        now_ms: i64,
        budget: u64,
    ) -> Result<PackedAnswer, DoorError> {
        // Every line costs at least MIN_LINE_TOKENS, so no more than this many can be shown.
        let mut resolve = (budget / MIN_LINE_TOKENS + 2) as usize;
        let mut answer = self.search(terms, topic, params, harness, now_ms, resolve)?;
        let mut hits: Vec<Hit> = Vec::new();
        let mut lines: Vec<String> = Vec::new();
        let mut used = 0u64;
        while hits.len() < answer.total && used <= budget {
            if hits.len() >= resolve {
                resolve = resolve.saturating_mul(4);
                answer = self.search(terms, topic, params, harness, now_ms, resolve)?;
                hits.clear();
                lines.clear();
                used = 0;
                continue;
            }
            let hit = self.hit(&answer, hits.len(), harness)?;
            let line = search::line_of(hit.score, &hit.doc);
            used += search::line_tokens(&line);
            lines.push(line);
            hits.push(hit);
        }
        let packed = search::pack(&lines, budget);
        Ok(PackedAnswer {
            hits,
            lines,
            packed,
            total: answer.total,
        })
    }
}

/// The explanation of one hit, recomputed by the reference scorer.
pub fn explain(hit: &Hit, terms: &[String], params: &ScoreParams, now_ms: i64) -> search::Explain {
    if terms.is_empty() {
        return search::listing_score(hit.doc.meta.date.as_deref(), now_ms).1;
    }
    search::score(&hit.doc, terms, now_ms, params).1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn chapter(pk: &str, title: &str) -> String {
        format!("---\ntitle: \"{title}\"\nkind: chapter\nprojectKey: \"{pk}\"\ntopics: [csv]\ndate: null\n---\nbody\n")
    }

    fn put(ws: &Path, rel: &str, text: &str) {
        let p = ws.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    const T: Duration = Duration::from_secs(5);

    #[test]
    fn store_door_counts_unreadable_and_filters_projects() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("pk", "A"),
        );
        put(
            ws,
            ".dsh-chapters/s1/chapters/002-b.md",
            &chapter("other", "B"),
        );
        put(ws, ".dsh-chapters/s1/chapters/003-c.md", "no frontmatter\n");
        put(
            ws,
            ".dsh-chapters/s1/chapters/004-d.md",
            "---\ntitle: [\n---\n",
        );
        put(ws, ".dsh-chapters/s1/chapters/005-e.md", "---\ntitle: x\n");
        put(
            ws,
            ".dsh-chapters/s1/chapters/.tmp-001.md",
            &chapter("pk", "T"),
        );
        put(
            ws,
            ".dsh-chapters/s1/chapters/notes.txt",
            &chapter("pk", "N"),
        );
        let corpus = open(ws, "pk", false, T, None).expect("open");
        assert_eq!(corpus.door, Door::Store);
        assert_eq!((corpus.documents, corpus.other_projects), (1, 1));
        let bad: Vec<&str> = corpus.unreadable.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(
            bad,
            [
                ".dsh-chapters/s1/chapters/003-c.md",
                ".dsh-chapters/s1/chapters/004-d.md",
                ".dsh-chapters/s1/chapters/005-e.md"
            ]
        );
        let params = ScoreParams::default();
        let terms = search::query_terms("a");
        let answer = corpus
            .search(&["a".to_string()], None, &params, "m", 0, 10)
            .expect("search");
        assert_eq!(answer.total, 1);
        assert_eq!(
            corpus.hit(&answer, 0, "m").expect("hit").doc.path,
            ".dsh-chapters/s1/chapters/001-a.md"
        );
        assert!(terms.is_empty(), "one letter is not a term");
        let all = open(ws, "pk", true, T, None).expect("open");
        assert_eq!((all.documents, all.other_projects), (2, 0));
        // The store's index followed (not linked): a csv shard listing one document of pk
        // and one of the other project.
        assert!(ws.join(".dsh-chapters/index/csv.md").is_file());
    }

    #[test]
    fn no_store_is_an_empty_store_door_and_creates_nothing() {
        let tmp = tempfile::tempdir().expect("tmp");
        let corpus = open(tmp.path(), "pk", false, T, None).expect("open");
        assert_eq!(corpus.door, Door::Store);
        assert_eq!(corpus.documents, 0);
        assert!(corpus.unreadable.is_empty());
        assert!(!tmp.path().join(STORE_DIR).exists());
    }

    #[test]
    fn huge_frontmatter_is_unreadable_not_buffered() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let huge = format!("---\ntitle: x\n{}", "k: v\n".repeat(100_000));
        put(ws, ".dsh-chapters/s1/chapters/001-a.md", &huge);
        let corpus = open(ws, "pk", false, T, None).expect("open");
        assert_eq!(corpus.unreadable.len(), 1);
        assert!(corpus.unreadable[0].reason.contains("closing `---`"));
    }
}

//! The search cache (shell): every document's catalog row and full text in SQLite with FTS5,
//! at `<store>/.search/fts.sqlite3` beside the search table (`catalog::table`).
//!
//! Derived and disposable. It records the table revision ([`TableRev`]) it was filled from;
//! a search brings it up to date by re-reading only the folders the table's change log names
//! since then (the table follows the store's catalog and the pool mirror), in one
//! SQLite transaction (WAL): killed mid-update, the cache is the one before. Deleted, garbage,
//! another program's database (`application_id`), or another cache format (`user_version`):
//! it is deleted and built again from the table. Where it cannot be written (a read-only
//! filesystem) it is built in memory for this one search.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::functions::FunctionFlags;
use rusqlite::{params, Connection, OptionalExtension};
use serde::Deserialize;

use crate::catalog::query::cjk_bigrams;
use crate::catalog::score::DocMeta;
use crate::catalog::table::{folder_of, Table, TableDoc, TableError, TableRev, TABLE_DIR};
use crate::redact::Redacted;
use crate::store::read::Reader;

pub const CACHE_FILE: &str = "fts.sqlite3";
/// Bumped whenever the schema or what is indexed changes: an older or newer cache is rebuilt.
pub const CACHE_VERSION: i64 = 8;
/// `PRAGMA application_id` of this cache ("dshs"): anything else in its place is not ours.
const APPLICATION_ID: i64 = 0x6473_6873;
/// The kind of an artifact document (searched only when asked: [`Narrowing::artifacts`]).
pub const ARTIFACT_KIND: &str = "artifact";
/// SQLite's page cache for one search, in KiB when negative (heap, freed with the search;
/// not `mmap`: mapped pages a search touches count in its resident memory, 171 MiB at
/// 100,000 chapters).
const CACHE_KIB: i64 = -32_768;
/// Rowids `id >> BLOCK_SHIFT` share a `blocks` row: the newest date among them. Tests use
/// blocks of 4 rowids so their few hundred documents span many blocks.
#[cfg(not(test))]
const BLOCK_SHIFT: u32 = 8;
#[cfg(test)]
const BLOCK_SHIFT: u32 = 2;
/// A body longer than this is indexed up to here (a chapter is far smaller).
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("the search cache {path} failed; it is a cache — delete it and search again")]
    Sql {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(transparent)]
    Table(#[from] TableError),
}

/// One document's catalog row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub path: String,
    pub root: String,
    pub name: String,
    pub blob: String,
    pub meta: DocMeta,
    /// The agent that wrote the session (frontmatter `harness`; `dsh` when absent).
    pub harness: String,
    /// The machine (frontmatter `harnessId`).
    pub machine: String,
    pub date_ms: Option<i64>,
    pub mirror: bool,
    /// A rule's category (frontmatter `category`; empty for other kinds).
    pub category: String,
}

impl Row {
    /// The table's view of the document (for the scorer and the line).
    pub fn table_doc(&self) -> TableDoc {
        TableDoc {
            path: self.path.clone(),
            root: self.root.clone(),
            name: self.name.clone(),
            blob: self.blob.clone(),
            meta: self.meta.clone(),
        }
    }
}

/// What a person narrows a search or a listing by: the part of [`Filters`] a request
/// carries (`chapters search`'s flags, the MCP tools' arguments).
#[derive(Debug, Clone, Default)]
pub struct Narrowing {
    pub kind: Option<String>,
    pub harness: Option<String>,
    pub machine: Option<String>,
    pub session: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// A file the document's signature names (the `paths` of the collection lines of its
    /// seq range): the whole path, or its last components (`csv.rs`, `export/csv.rs`).
    pub path: Option<String>,
    /// Artifacts (kind `artifact`) are searched too; without it they are left out (unless
    /// `kind` asks for them).
    pub artifacts: bool,
}

impl Narrowing {
    /// Whether artifacts are searched: asked for, or the kind asked for.
    pub fn wants_artifacts(&self) -> bool {
        self.artifacts
            || self
                .kind
                .as_deref()
                .is_some_and(|k| k.eq_ignore_ascii_case(ARTIFACT_KIND))
    }

    /// Whether a field that keeps rows out is set (`artifacts` lets rows in).
    pub fn narrows(&self) -> bool {
        self.kind.is_some()
            || self.harness.is_some()
            || self.machine.is_some()
            || self.session.is_some()
            || self.since_ms.is_some()
            || self.until_ms.is_some()
            || self.path.is_some()
    }
}

/// The filters a search or a listing applies to catalog rows: a request's narrowing inside
/// the door's scope (its project and whether it sees the mirror), which only the door sets.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub narrowing: Narrowing,
    /// `Some(pk)`: this project's documents only.
    pub project_key: Option<String>,
    pub include_mirror: bool,
}

/// One ranked full-text query ([`Cache::top`], [`Cache::count`]).
pub struct TopQuery<'a> {
    /// The FTS5 expression every result matches.
    pub expr: &'a str,
    /// The FTS5 expression of the whole-query phrase: its documents rank first. A
    /// document holding it holds every term of `expr`.
    pub phrase: Option<&'a str>,
    /// The FTS5 expression of the excluded words: their documents are left out.
    pub excluded: Option<&'a str>,
    /// A `--topic` search: whether a document with these raw topic labels (one per line)
    /// carries the topic.
    pub topic: Option<TopicTest>,
    pub filters: &'a Filters,
    /// The FTS5 expression of each term of `expr` (the phrases BM25 sums over): the body
    /// BM25 bound is counted from them ([`Cache::bm25_bound`]).
    pub phrases: &'a [String],
    /// The store's reader: with it, the body BM25 of a query of two phrases or more is
    /// computed here from the documents' bodies ([`OwnBm25`]) instead of by FTS5's `bm25()`,
    /// whose every statement first walks every phrase's whole doclist to count its documents.
    pub reader: Option<&'a Reader>,
}

/// One of [`Cache::top`]'s results.
pub struct TopRow {
    pub row: Row,
    /// Body BM25, sign turned (larger is better), ≥ 0.
    pub bm25: f64,
    /// Holds the whole-query phrase.
    pub phrase: bool,
    /// The score the ranking function gave.
    pub score: f64,
}

/// See [`TopQuery::topic`].
pub type TopicTest = std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What [`Cache::top`] knows of the scores it has not read yet, body hits aside (it adds
/// the most they can give, [`Bounds::body`] of its BM25 bound). No core-rule bonus either:
/// every rule is scored up front whenever a bound is used.
pub struct Bounds<'a> {
    /// The best score a document with no §8 field hit and no category can reach when it is
    /// dated `newest` at the latest (`None`: undated), body hits aside.
    pub plain: &'a dyn Fn(Option<i64>) -> f64,
    /// The documents with a §8 field hit, best first: each call hands over the next ones
    /// (path, its score but body hits), none when there are no more.
    pub fields: &'a mut dyn FnMut() -> Result<Vec<(String, f64)>, CacheError>,
    /// The points body hits of BM25 at most `s` add (increasing in `s`; `s` may be
    /// infinite: no bound known).
    pub body: &'a dyn Fn(f64) -> f64,
}

/// Below this many matches (FTS5's count, filters aside) the walk reads every one (a few
/// in the unit tests, whose corpora are small: they exercise the bounded streams too).
const WALK_ALL_BELOW: usize = if cfg!(test) { 8 } else { 2_048 };
/// The first round of field hits reads at most this many.
const FIRST_ROUND_MAX: usize = 4_096;
/// Up to this many documents holding the whole-query phrase are scored up front (beyond,
/// each batch read is checked; a few in the unit tests, so that both ways are exercised).
const PHRASE_UP_FRONT: usize = if cfg!(test) { 4 } else { 1_000 };
/// Up to this many documents are checked for the phrase one by one (a seek each), more in
/// one walk over their rowid range.
const SEEK_AT_MOST: usize = 64;
/// A filtered count stops here (then it says "at least").
const COUNT_CAP: usize = 2_000;
/// A count FTS5 answers alone (the filters leave nothing out) stops here.
const FTS_COUNT_CAP: usize = 10_000;
/// Added to every bound: sums in another order may differ in their last bits.
const BOUND_SLACK: f64 = 1e-9;

/// One match read and scored.
struct Scan {
    id: i64,
    path: String,
    phrase: bool,
    /// The document's score; with `exact` false, read without its BM25 (as if 0), a lower
    /// bound of it.
    score: f64,
    /// The most the score can be (`score` when exact; else with the most BM25 there is).
    upper: f64,
    bm25: f64,
    exact: bool,
}

/// The best `k` matches read so far, in final order, and the matches read without their
/// BM25 that may still be among them.
struct Best {
    k: usize,
    rows: Vec<Scan>,
    seen: BTreeSet<i64>,
    /// [`Best::prune`] runs when there are more rows than this.
    prune_at: usize,
}

impl Best {
    /// A match read by the walk (read once by it; maybe scored before by id).
    fn push_walked(&mut self, scan: Scan) {
        if self.seen.contains(&scan.id) {
            return;
        }
        self.push(scan);
    }

    fn push(&mut self, scan: Scan) {
        if !self.seen.insert(scan.id) {
            return;
        }
        let at = self
            .rows
            .partition_point(|r| Best::order(r, &scan) == std::cmp::Ordering::Less);
        self.rows.insert(at, scan);
        // Beyond the `k`-th, only what its BM25 could still lift into the `k` is kept,
        // pruned once the rows double (not at every push: a walk read without BM25 may
        // keep thousands).
        if self.rows.len() > self.prune_at {
            self.prune();
            self.prune_at = (2 * self.rows.len()).max(2 * self.k);
        }
    }

    /// Drop the rows that cannot be among the best `k`: beyond the `k`-th, any read with
    /// BM25, and any read without it whose most is below the `k`-th's score.
    fn prune(&mut self) {
        if self.rows.len() > self.k {
            let Some(kth) = self.k.checked_sub(1).and_then(|i| self.rows.get(i)) else {
                self.rows.clear();
                return;
            };
            let (phrase, score, path) = (kth.phrase, kth.score, kth.path.clone());
            let mut i = 0usize;
            self.rows.retain(|r| {
                i += 1;
                if i <= self.k || r.exact {
                    return i <= self.k;
                }
                let most = r.upper;
                match (phrase, r.phrase) {
                    (true, false) => false,
                    (false, true) => true,
                    _ => most > score || (most == score && r.path < path),
                }
            });
        }
    }

    fn order(a: &Scan, b: &Scan) -> std::cmp::Ordering {
        b.phrase
            .cmp(&a.phrase)
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.path.cmp(&b.path))
    }

    /// Whether no document left, scoring at most `bound` (and holding the phrase when
    /// `phrase_open`), can enter the top `k`.
    fn beats(&self, phrase_open: bool, bound: f64) -> bool {
        if self.k == 0 {
            return true;
        }
        let Some(last) = self.rows.get(self.k - 1) else {
            return false;
        };
        match (last.phrase, phrase_open) {
            (false, true) => false,
            (true, false) => true,
            _ => last.score > bound,
        }
    }
}

/// A document's fields as the ranking function in SQLite sees them.
pub struct ScoreFields<'a> {
    pub title: &'a str,
    pub summary: &'a str,
    /// The raw topic labels, one per line.
    pub topics: &'a str,
    pub kind: &'a str,
    pub category: &'a str,
    pub date: Option<&'a str>,
    pub rule_id: Option<&'a str>,
    /// SQLite FTS5's BM25 over the body (sign turned: larger is better; ≥ 0).
    pub bm25: f64,
}

/// The search cache of one store.
pub struct Cache {
    conn: Connection,
    path: PathBuf,
    /// Built in memory (the file could not be written): said to the reader.
    pub in_memory: bool,
    /// Rebuilt from nothing by this open (deleted, damaged, another format).
    pub rebuilt: Option<String>,
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> CacheError + '_ {
    move |source| CacheError::Sql {
        path: path.to_path_buf(),
        source,
    }
}

/// The body is FTS5's column 0: a position list names any other column with two more bytes
/// (`0x01`, its number) in every (term, document) entry, which cost 28 % of the index when
/// the body came last. The order changes no score: BM25 sums whole counts per column.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS state(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs(
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  folder TEXT NOT NULL,
  root TEXT NOT NULL,
  name TEXT NOT NULL,
  blob TEXT NOT NULL,
  kind TEXT NOT NULL,
  title TEXT NOT NULL,
  summary TEXT NOT NULL,
  topics TEXT NOT NULL,
  date TEXT,
  date_ms INTEGER,
  session TEXT,
  seq_lo INTEGER,
  seq_hi INTEGER,
  rule_id TEXT,
  project_key TEXT NOT NULL,
  harness TEXT NOT NULL,
  machine TEXT NOT NULL,
  mirror INTEGER NOT NULL,
  category TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_folder ON docs(folder);
CREATE INDEX IF NOT EXISTS docs_date ON docs(date_ms);
CREATE INDEX IF NOT EXISTS docs_rules ON docs(id) WHERE category != '' OR kind = 'rule';
CREATE TABLE IF NOT EXISTS blocks(b INTEGER PRIMARY KEY, max_ms INTEGER);
CREATE TABLE IF NOT EXISTS counts(
  project_key TEXT NOT NULL, mirror INTEGER NOT NULL, artifact INTEGER NOT NULL, n INTEGER NOT NULL,
  PRIMARY KEY(project_key, mirror, artifact)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS common(term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS files(doc INTEGER NOT NULL, path TEXT NOT NULL, tail TEXT NOT NULL, PRIMARY KEY(doc, path)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS files_tail ON files(tail);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
  body, title, summary, topics, category,
  content='', contentless_delete=1,
  tokenize='unicode61 remove_diacritics 2'
);
";

impl Cache {
    /// Open the store's cache, building it anew when it is absent, damaged, another
    /// program's or another format; in memory when the file cannot be written.
    pub fn open(store_dir: &Path, busy: Duration) -> Result<Cache, CacheError> {
        let dir = store_dir.join(TABLE_DIR);
        let path = dir.join(CACHE_FILE);
        match Cache::open_file(&path, busy) {
            Ok(Some(cache)) => return Ok(cache),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "search cache unusable; rebuilding it"),
        }
        // Not ours, damaged or another format: start over.
        let reason = if path.exists() {
            "the cache file was damaged, another program's, or another format"
        } else {
            "the cache is new"
        };
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        match std::fs::create_dir_all(&dir)
            .ok()
            .and_then(|()| Cache::create_file(&path, busy).ok())
        {
            Some(mut cache) => {
                cache.rebuilt = Some(reason.to_owned());
                Ok(cache)
            }
            None => {
                let conn = Connection::open_in_memory().map_err(sql(&path))?;
                conn.execute_batch(SCHEMA).map_err(sql(&path))?;
                Ok(Cache {
                    conn,
                    path,
                    in_memory: true,
                    rebuilt: Some(format!(
                        "{reason}, and it cannot be written here: built in memory for this search"
                    )),
                })
            }
        }
    }

    /// An existing cache of this format, or `None` when there is none or it is not usable.
    fn open_file(path: &Path, busy: Duration) -> Result<Option<Cache>, rusqlite::Error> {
        let Some(conn) =
            crate::store::catalog::open_ours(path, busy, APPLICATION_ID, CACHE_VERSION)?
        else {
            return Ok(None);
        };
        // A query reads its terms' doclists several times (BM25's setup, the walks):
        // kept in SQLite's page cache rather than read and parsed again.
        conn.pragma_update(None, "cache_size", CACHE_KIB)?;
        // Reading the state proves the schema is there.
        conn.query_row("SELECT count(*) FROM state", [], |r| r.get::<_, i64>(0))?;
        conn.query_row("SELECT count(*) FROM docs", [], |r| r.get::<_, i64>(0))?;
        Ok(Some(Cache {
            conn,
            path: path.to_path_buf(),
            in_memory: false,
            rebuilt: None,
        }))
    }

    fn create_file(path: &Path, busy: Duration) -> Result<Cache, rusqlite::Error> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(busy)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "cache_size", CACHE_KIB)?;
        // Schema and marks in one transaction: another search opening the file meanwhile
        // sees no cache of ours or a whole one, never a half-made one.
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {SCHEMA} PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {CACHE_VERSION}; COMMIT;"
        ))?;
        Ok(Cache {
            conn,
            path: path.to_path_buf(),
            in_memory: false,
            rebuilt: None,
        })
    }

    fn err(&self) -> impl Fn(rusqlite::Error) -> CacheError + '_ {
        sql(&self.path)
    }

    /// Bring the cache up to the table's revision: the folders changed since the revision it
    /// holds, or every document when the table cannot say. One transaction.
    pub fn update(&mut self, workspace: &Path, table: &Table) -> Result<usize, CacheError> {
        let want = table.revision();
        let path = self.path.clone();
        let err = sql(&path);
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&err)?;
        let have: Option<TableRev> = tx
            .query_row("SELECT value FROM state WHERE key = 'rev'", [], |r| {
                r.get::<_, String>(0)
            })
            .optional()
            .map_err(&err)?
            .and_then(|t| t.parse().ok());
        if have == Some(want) {
            return Ok(0);
        }
        // Another search already brought it further with a newer table: leave it.
        if let Some(h) = have {
            if h.id == want.id && h.rev > want.rev {
                return Ok(0);
            }
        }
        let changes = match have {
            Some(h) => table.changes_since(h)?,
            None => None,
        };
        // Folder by folder, each replacing what the cache held of it; or, built from
        // nothing, document by document oldest first, so that rowid order follows date
        // order (the ranked scan walks rowids newest first: see [`Cache::top`]).
        let full = changes.is_none();
        let folders: Vec<(String, Vec<Redacted<TableDoc>>)> = match changes {
            Some(changes) => {
                let mut out = BTreeMap::new();
                for c in changes {
                    if let std::collections::btree_map::Entry::Vacant(e) = out.entry(c.folder) {
                        let docs = table.docs_in_folder(e.key())?;
                        e.insert(docs);
                    }
                }
                out.into_iter().collect()
            }
            None => {
                tx.execute_batch(
                    "DELETE FROM fts; DELETE FROM docs; DELETE FROM files; DELETE FROM blocks; DELETE FROM counts; DELETE FROM common;",
                )
                .map_err(&err)?;
                let mut docs: Vec<(Option<i64>, String, Redacted<TableDoc>)> = table
                    .all_docs()?
                    .into_iter()
                    .map(|d| {
                        let date = d
                            .meta
                            .date
                            .as_deref()
                            .and_then(crate::time::parse_rfc3339_ms);
                        (date, d.path.clone(), d)
                    })
                    .collect();
                docs.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
                docs.into_iter()
                    .map(|(_, path, d)| (folder_of(&path).to_owned(), vec![d]))
                    .collect()
            }
        };
        let mut written = 0;
        let reader = crate::store::mirror::reader(workspace);
        let mut common = if full {
            Common::sampling()
        } else {
            Common::load(&tx).map_err(&err)?
        };
        {
            let mut ids = tx
                .prepare(
                    "SELECT id, project_key, mirror, kind = 'artifact' FROM docs WHERE folder = ?1",
                )
                .map_err(&err)?;
            let mut count = tx
                .prepare(
                    "INSERT INTO counts(project_key, mirror, artifact, n) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT DO UPDATE SET n = n + excluded.n",
                )
                .map_err(&err)?;
            let mut block = tx
                .prepare(
                    "INSERT INTO blocks(b, max_ms) VALUES (?1, ?2)
                     ON CONFLICT(b) DO UPDATE SET max_ms = CASE
                       WHEN excluded.max_ms IS NULL THEN max_ms
                       WHEN max_ms IS NULL THEN excluded.max_ms
                       ELSE max(max_ms, excluded.max_ms) END",
                )
                .map_err(&err)?;
            let mut del_fts = tx
                .prepare("DELETE FROM fts WHERE rowid = ?1")
                .map_err(&err)?;
            let mut del_doc = tx.prepare("DELETE FROM docs WHERE id = ?1").map_err(&err)?;
            let mut del_files = tx
                .prepare("DELETE FROM files WHERE doc = ?1")
                .map_err(&err)?;
            let mut ins_file = tx
                .prepare("INSERT OR IGNORE INTO files(doc, path, tail) VALUES (?1, ?2, ?3)")
                .map_err(&err)?;
            let mut signatures = Signatures::default();
            let mut ins_doc = tx
                .prepare(
                    "INSERT INTO docs(path, folder, root, name, blob, kind, title, summary, topics, date, date_ms,
                       session, seq_lo, seq_hi, rule_id, project_key, harness, machine, mirror, category)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)
                     ON CONFLICT(path) DO NOTHING",
                )
                .map_err(&err)?;
            let mut ins_fts = tx
                .prepare("INSERT INTO fts(rowid, body, title, summary, topics, category) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
                .map_err(&err)?;
            for (folder, docs) in &folders {
                let old: Vec<(i64, String, bool, bool)> = if full {
                    Vec::new()
                } else {
                    ids.query_map([folder], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                    })
                    .map_err(&err)?
                    .collect::<Result<_, _>>()
                    .map_err(&err)?
                };
                common.removed(old.len());
                for (id, pk, mirror, artifact) in old {
                    del_fts.execute([id]).map_err(&err)?;
                    del_doc.execute([id]).map_err(&err)?;
                    del_files.execute([id]).map_err(&err)?;
                    // A block keeps its newest date: still a bound for what is left in it.
                    count
                        .execute(params![pk, mirror, artifact, -1])
                        .map_err(&err)?;
                }
                // Every entry is built from what the store's reader read back (the table's
                // record, the document, its signatures and artifacts): raw text cannot
                // reach the cache.
                let mut entries: Vec<Redacted<Entry>> = Vec::new();
                for doc in docs {
                    let (extra, body) = read_body(&reader, &doc.path).into_inner();
                    let mut m = doc.meta.clone();
                    m.session_id = m.session_id.or(extra.session_id.clone());
                    m.seq_range = m.seq_range.or(extra.seq_range);
                    let files = signatures.paths_of(workspace, folder, &m, &extra);
                    let artifacts = artifact_entries(&reader, folder, doc, &m, &extra);
                    entries.push(reader.read_back(Entry {
                        doc: doc.get().clone(),
                        meta: m,
                        extra,
                        body,
                        files,
                    }));
                    entries.extend(artifacts);
                }
                for entry in &entries {
                    let Entry {
                        doc,
                        meta: m,
                        extra,
                        body,
                        files,
                    } = entry.get();
                    let date_ms = m.date.as_deref().and_then(crate::time::parse_rfc3339_ms);
                    let inserted = ins_doc
                        .execute(params![
                            doc.path,
                            folder,
                            doc.root,
                            doc.name,
                            doc.blob,
                            m.kind,
                            m.title,
                            m.summary,
                            m.topics.join("\n"),
                            m.date,
                            date_ms,
                            m.session_id,
                            m.seq_range.map(|r| r.0 as i64),
                            m.seq_range.map(|r| r.1 as i64),
                            m.id,
                            m.project_key,
                            extra.harness.clone().unwrap_or_else(|| "dsh".to_owned()),
                            extra.harness_id.clone().unwrap_or_default(),
                            doc.from_mirror(),
                            extra.category.clone().unwrap_or_default(),
                        ])
                        .map_err(&err)?;
                    if inserted == 0 {
                        // An artifact another folder's chapter already brought in.
                        continue;
                    }
                    let id = tx.last_insert_rowid();
                    count
                        .execute(params![
                            m.project_key,
                            doc.from_mirror(),
                            m.kind == ARTIFACT_KIND,
                            1
                        ])
                        .map_err(&err)?;
                    block
                        .execute(params![id >> BLOCK_SHIFT, date_ms])
                        .map_err(&err)?;
                    let indexed = body_column(body, &m.title, &m.summary);
                    common.add(&indexed);
                    ins_fts
                        .execute(params![
                            id,
                            indexed,
                            cjk_bigrams(&m.title),
                            cjk_bigrams(&m.summary),
                            cjk_bigrams(&m.topics.join(" ")),
                            cjk_bigrams(extra.category.as_deref().unwrap_or("")),
                        ])
                        .map_err(&err)?;
                    for f in files {
                        ins_file
                            .execute(params![id, f, file_tail(f)])
                            .map_err(&err)?;
                    }
                    written += 1;
                }
            }
        }
        common.store(&tx).map_err(&err)?;
        if full {
            // Built from nothing, the index is several segments of FTS5's flushes and merges,
            // and every statement seeks each term in each segment and merges their doclists
            // row by row: merged into one, a query reads one doclist per term. Updates add
            // small segments, which FTS5's automerge keeps few.
            tx.execute_batch("INSERT INTO fts(fts) VALUES('optimize')")
                .map_err(&err)?;
        }
        tx.execute(
            "INSERT INTO state(key, value) VALUES ('rev', ?1)
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [want.to_string()],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(written)
    }

    /// The best `k` documents matching an FTS5 expression (`q.expr`, over title, summary,
    /// topics, category and body), none of `q.excluded`, passing the filters: those holding
    /// the phrase `q.phrase` first, then by `score` (called with the document's fields and
    /// its body BM25), ties by path. And how many matched, and whether that count is exact
    /// (else it is a lower bound).
    ///
    /// It stops before the end of the matches once no document left can rank in the top
    /// `k` (early termination). Every document is in one of three streams, each scored
    /// exactly when read: (a) those with a §8 field hit, read in the order of the bound the
    /// caller gives ([`Bounds::fields`]: the search table's ranking); (b) every match,
    /// walked newest rowid first (FTS5 walks `ORDER BY rowid DESC` for free, and rowids
    /// follow dates: a cache is built oldest first and grows with new documents), where a
    /// document with no field hit can score at most [`Bounds::plain`] of the newest date
    /// among the rowids left (`blocks` keeps the newest date of every 256 rowids: a bound
    /// even for a document from another machine inserted out of date order); (c) the few
    /// with a category (rules) and, when few, those holding the phrase, scored up front.
    /// The scan stops when the `k`-th best beats both streams' bounds, or when (b) ends.
    /// When at least `k` documents hold the phrase and all are known (up to 1,000), they
    /// are read first, alone: if `k` of them pass the filters they are the answer (they
    /// rank above every other match), with no bound counted and no stream read.
    pub fn top(
        &self,
        q: &TopQuery<'_>,
        score: &dyn Fn(&ScoreFields<'_>) -> f64,
        bounds: Bounds<'_>,
        k: usize,
    ) -> Result<(Vec<TopRow>, usize, bool), CacheError> {
        let expr = match q.excluded {
            Some(ex) => format!("({}) NOT ({ex})", q.expr),
            None => q.expr.to_owned(),
        };
        let (clause, filter_args) = filter_sql(q.filters);
        let topic_sql = if self.register_topic(q)? {
            " AND chapters_topic(d.topics)"
        } else {
            ""
        };
        // With `exact` false, no BM25 (NULL): FTS5's BM25 reads every term's whole doclist
        // once per statement to count its documents, before the first row.
        let select = |exact: bool, more: &str| {
            let bm25 = if exact {
                "-bm25(fts, 1.0, 0.0, 0.0, 0.0, 0.0)"
            } else {
                "NULL"
            };
            format!(
                "SELECT d.id, d.path, d.title, d.summary, d.topics, d.kind, d.category, d.date,
                   d.rule_id, {bm25}
                 FROM fts JOIN docs d ON d.id = fts.rowid
                 WHERE fts MATCH ?{clause}{topic_sql}{more}"
            )
        };
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        args.push(expr.clone().into());
        args.extend(filter_args.iter().cloned());
        // The most BM25 a match can have, once the walk and later field hits are read
        // without it (see `lazy`).
        let bm25_most = std::cell::Cell::new(f64::INFINITY);
        let fields_of = |r: &rusqlite::Row<'_>| -> rusqlite::Result<(RowFields, Option<f64>)> {
            let text = |i: usize| -> rusqlite::Result<Option<String>> { r.get(i) };
            Ok((
                RowFields {
                    id: r.get(0)?,
                    path: r.get(1)?,
                    title: text(2)?,
                    summary: text(3)?,
                    topics: text(4)?,
                    kind: text(5)?,
                    category: text(6)?,
                    date: text(7)?,
                    rule_id: text(8)?,
                },
                r.get::<_, Option<f64>>(9)?,
            ))
        };
        let scan_of = |f: RowFields, exact: Option<f64>| -> Scan {
            let bm25 = exact.unwrap_or(0.0).max(0.0);
            let with = |bm25: f64| {
                score(&ScoreFields {
                    title: f.title.as_deref().unwrap_or(""),
                    summary: f.summary.as_deref().unwrap_or(""),
                    topics: f.topics.as_deref().unwrap_or(""),
                    kind: f.kind.as_deref().unwrap_or(""),
                    category: f.category.as_deref().unwrap_or(""),
                    date: f.date.as_deref(),
                    rule_id: f.rule_id.as_deref(),
                    bm25,
                })
            };
            let s = with(bm25);
            // Not `s` plus the body's most: body points make a document with no field hit
            // score at all (its recency too).
            let upper = if exact.is_some() {
                s
            } else {
                with(bm25_most.get()) + BOUND_SLACK
            };
            Scan {
                id: f.id,
                path: f.path,
                // Set by `mark_phrase` for the whole batch read.
                phrase: false,
                score: s,
                upper,
                bm25,
                exact: exact.is_some(),
            }
        };
        let read = |r: &rusqlite::Row<'_>| -> rusqlite::Result<Scan> {
            let (f, exact) = fields_of(r)?;
            Ok(scan_of(f, exact))
        };
        let mut best = Best {
            k,
            rows: Vec::new(),
            seen: BTreeSet::new(),
            prune_at: 2 * k,
        };
        // Artifacts are not in the search table: their field hits have no bound.
        let unbounded = q.filters.narrowing.wants_artifacts();
        // The whole-query phrase's documents, read before anything is counted (up to one
        // more than are scored up front): when they are all read and at least `k`, they
        // alone can make the top `k` (below).
        let phrase_read = |cap: usize| -> Result<Vec<i64>, CacheError> {
            let Some(p) = q.phrase else {
                return Ok(Vec::new());
            };
            let mut stmt = self
                .conn
                .prepare_cached("SELECT rowid FROM fts WHERE fts MATCH ?1 LIMIT ?2")
                .map_err(self.err())?;
            // The whole-query phrase holds every term: the phrase alone (not `expr AND` it,
            // which reads every term's doclist twice), less the excluded words.
            let holding = match q.excluded {
                Some(ex) => format!("({p}) NOT ({ex})"),
                None => p.to_owned(),
            };
            let ids = stmt
                .query_map(params![holding, cap as i64], |r| r.get(0))
                .map_err(self.err())?
                .collect::<Result<_, _>>()
                .map_err(self.err());
            ids
        };
        // More documents hold the phrase than are scored up front, by the `common` table
        // (which counts no exclusion): not read.
        let many = match (q.phrase, q.excluded) {
            (Some(p), None) => self
                .common_least(p)?
                .is_some_and(|n| n > PHRASE_UP_FRONT as i64),
            _ => false,
        };
        let mut holders = if many {
            Vec::new()
        } else {
            phrase_read(PHRASE_UP_FRONT + 1)?
        };
        let holders_all = q.phrase.is_some() && !many && holders.len() <= PHRASE_UP_FRONT;
        let phrase_tier = holders_all && k > 0 && holders.len() >= k;
        // The matches, counted once by FTS5 alone (no BM25) as far as three uses need:
        // few of them (the walk then reads them all, cheaper than field hits of which few
        // hold every term: `E0599 billing`); the BM25 bound (every positive phrase is in
        // at least these documents, so at half the rows each IDF is FTS5's floor); the
        // total (up to its cap). One statement instead of a count for each — only up to
        // the total's cap when the phrase's documents may make the top `k` alone (no bound
        // needed then; counted again in the rare case they do not, most filtered out).
        let half_rows = self.fts_rows()?.map_or(0, half);
        // Every phrase in half the rows or more by the `common` table: each IDF is FTS5's
        // floor, so the matches are counted only as far as the total and the walk need.
        let floored = self.common_floor(q.phrases, half_rows)?;
        let small = (WALK_ALL_BELOW as i64).max(FTS_COUNT_CAP as i64);
        // Body BM25 is computed here for two FTS5 phrases or more (an excluded word is one:
        // `fts5_excluded` joins them with ` OR `): `bm25()` walks each one's doclist in every
        // statement; for one, that walk costs less than reading the bodies of a round
        // (measured: `brasu*` and `kalo` slower). Scored here, the phrase holders need the
        // count to half too (for the IDFs).
        let excluded_phrases = q.excluded.map_or(0, |e| e.matches(" OR ").count() + 1);
        let own_may = q.phrases.len() + excluded_phrases >= 2
            && q.reader.is_some()
            && q.phrases.iter().all(|p| phrase_tokens(p).is_some());
        let limit = if (phrase_tier && !own_may) || floored {
            small
        } else {
            half_rows.max(small)
        };
        let mut matched = self.count_upto(&expr, limit)?;
        // Body BM25 computed here (below), when the walk does not read every match (it
        // then reads them with `bm25()`, whose setup is cheap for so few).
        let mut counted_to = limit;
        let own = if !own_may || (matched as usize) < WALK_ALL_BELOW {
            None
        } else {
            self.own_bm25(q, &expr, &mut matched, &mut counted_to, floored)?
        };
        let few = (matched as usize) < WALK_ALL_BELOW;
        if few && q.phrase.is_some() && !holders_all {
            // Every match is walked: every document holding the phrase is wanted.
            holders = phrase_read(WALK_ALL_BELOW)?;
        }
        // The documents with a category and the rules (few), scored with the first field
        // hits: so no document left unread has a category or a core-rule bonus.
        let rules: Vec<i64> = {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT id FROM docs WHERE category != '' OR kind = 'rule'")
                .map_err(self.err())?;
            let rows = stmt.query_map([], |r| r.get(0)).map_err(self.err())?;
            rows.collect::<Result<_, _>>().map_err(self.err())?
        };
        let mut first: Vec<i64> = if few { Vec::new() } else { rules.clone() };
        let rules: BTreeSet<i64> = rules.into_iter().collect();
        // The documents holding the phrase, when few (then none is left unread), too.
        // Not read up front (the walk reads every match): any document left may hold it.
        let mut phrase_open = q.phrase.is_some() && few;
        // Every document holding the phrase, when they are few (all of them when the walk
        // reads every match); `None`: too many, each batch read is checked instead.
        let mut phrase_known: Option<BTreeSet<i64>> = Some(BTreeSet::new());
        if q.phrase.is_some() {
            if few {
                phrase_known = Some(holders.iter().copied().collect());
            } else if !holders_all {
                phrase_open = true;
                phrase_known = None;
            } else {
                phrase_known = Some(holders.iter().copied().collect());
                first.extend(holders.iter().copied());
            }
        }
        // Which of a batch of documents read hold the phrase: from the known set, or else
        // in one statement over the batch's rowid range (no BM25 there). A correlated
        // `EXISTS` per row cost a phrase query each: 3.7 ms a row for three common words
        // at 100,000 documents.
        let mark_phrase = |scans: &mut [Scan]| -> Result<(), CacheError> {
            let Some(p) = q.phrase else {
                return Ok(());
            };
            if let Some(known) = &phrase_known {
                for scan in scans.iter_mut() {
                    scan.phrase = known.contains(&scan.id);
                }
                return Ok(());
            }
            let (Some(lo), Some(hi)) = (
                scans.iter().map(|s| s.id).min(),
                scans.iter().map(|s| s.id).max(),
            ) else {
                return Ok(());
            };
            let list: Vec<String> = scans.iter().map(|s| s.id.to_string()).collect();
            // A few documents are looked up one by one (each a seek in the phrase's
            // doclists: no BM25 here to set up again per value); more in one walk of
            // their rowid range, which checks positions in every document inside it.
            let list = list.join(", ");
            let constraint = if scans.len() <= SEEK_AT_MOST {
                format!("rowid IN ({list})")
            } else {
                format!("rowid BETWEEN {lo} AND {hi} AND +rowid IN ({list})")
            };
            let mut stmt = self
                .conn
                .prepare(&format!(
                    "SELECT rowid FROM fts WHERE fts MATCH ?1 AND {constraint}"
                ))
                .map_err(self.err())?;
            let holding: BTreeSet<i64> = stmt
                .query_map([p], |r| r.get(0))
                .map_err(self.err())?
                .collect::<Result<_, _>>()
                .map_err(self.err())?;
            for scan in scans.iter_mut() {
                scan.phrase = holding.contains(&scan.id);
            }
            Ok(())
        };
        // Score the documents `ids` (those matching and passing the filters) in one
        // statement: FTS5's BM25 reads every query term's whole doclist once per statement
        // (and once per value of a `rowid IN` list), so a few ids are looked up one by one
        // and more are read in one walk over their rowid range.
        let has_prefix = q.phrases.iter().any(|p| p.ends_with('*'));
        let fts5_score_ids = |ids: &[i64], exact: bool| -> Result<Vec<Scan>, CacheError> {
            let Some(more) = ids_clause(ids, 2) else {
                return Ok(Vec::new());
            };
            let mut stmt = self
                .conn
                .prepare(&select(exact, &more))
                .map_err(self.err())?;
            let rows = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), read)
                .map_err(self.err())?;
            rows.collect::<Result<_, _>>().map_err(self.err())
        };
        // With the body BM25 computed here, the rows are read without `bm25()` (a few by a
        // seek each, which a prefix's doclist merge would make dear; more over their rowid
        // range), then scored; a document this cannot score (see [`OwnBm25::score`]) is
        // scored by FTS5.
        let score_ids = |ids: &[i64], exact: bool| -> Result<Vec<Scan>, CacheError> {
            let Some(own) = own.as_ref().filter(|_| exact) else {
                return fts5_score_ids(ids, exact);
            };
            let seeks = if has_prefix { 0 } else { SEEK_AT_MOST };
            let Some(more) = ids_clause(ids, seeks) else {
                return Ok(Vec::new());
            };
            let mut stmt = self
                .conn
                .prepare(&select(false, &more))
                .map_err(self.err())?;
            let rows: Vec<(RowFields, Option<f64>)> = stmt
                .query_map(rusqlite::params_from_iter(args.iter()), fields_of)
                .map_err(self.err())?
                .collect::<Result<_, _>>()
                .map_err(self.err())?;
            let mut out = Vec::with_capacity(rows.len());
            let mut rest = Vec::new();
            for (f, _) in rows {
                match own.score(self, &f)? {
                    Some(bm25) => out.push(scan_of(f, Some(bm25))),
                    None => rest.push(f.id),
                }
            }
            out.extend(fts5_score_ids(&rest, true)?);
            Ok(out)
        };
        let by_ids = |ids: &[i64], best: &mut Best, exact: bool| -> Result<(), CacheError> {
            let ids: Vec<i64> = ids
                .iter()
                .copied()
                .filter(|id| !best.seen.contains(id))
                .collect();
            let mut scans = score_ids(&ids, exact)?;
            mark_phrase(&mut scans)?;
            for scan in scans {
                best.push(scan);
            }
            Ok(())
        };
        // (d) At least `k` documents hold the whole-query phrase and all of them are known:
        // they rank above every other match whatever it scores, so when `k` of them pass
        // the filters they are the top `k`, scored here with BM25 in one statement, and no
        // bound, count to half or other stream is needed.
        let decided = phrase_tier && !few && {
            by_ids(&holders, &mut best, true)?;
            best.rows.len() >= k
        };
        if !decided && !few && !floored && counted_to < half_rows && matched >= counted_to {
            // Counted only to the total's cap for (d), which did not decide: the bound
            // needs the count to half the rows.
            matched = self.count_upto(&expr, half_rows)?;
        }
        // The newest date among the rowids up to each block's end.
        let blocks: Vec<(i64, Option<i64>)> = {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT b, max_ms FROM blocks ORDER BY b")
                .map_err(self.err())?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(self.err())?;
            let mut newest: Option<i64> = None;
            let mut out = Vec::new();
            for row in rows {
                let (b, ms): (i64, Option<i64>) = row.map_err(self.err())?;
                newest = newest.max(ms);
                out.push((b, newest));
            }
            out
        };
        // The most body hits add to a document's score (unused when the walk reads every
        // match: no counting then).
        let bm25_most_counted = if few || decided {
            f64::INFINITY
        } else {
            self.bm25_bound_counted(q.phrases, q.expr, matched, floored)?
        };
        let body_max = if few {
            f64::INFINITY
        } else {
            (bounds.body)(bm25_most_counted) + BOUND_SLACK
        };
        // With the body's most known, the walk and the field hits after the first round are
        // read without BM25 (each statement with it counts every term's documents first),
        // and those that may still rank are scored with it at the end, in one statement.
        let lazy = !few && body_max.is_finite();
        if lazy {
            bm25_most.set(bm25_most_counted);
        }
        // The bound of a document with no field hit among the rowids below `below` (none
        // when the field hits are not read: the walk then reads every match).
        let plain_below = |below: Option<i64>| -> f64 {
            if unbounded || few {
                return f64::INFINITY;
            }
            let last = match below {
                None => blocks.last(),
                Some(id) if id <= 0 => None,
                Some(id) => {
                    let b = (id - 1) >> BLOCK_SHIFT;
                    let i = blocks.partition_point(|(x, _)| *x <= b);
                    i.checked_sub(1).and_then(|i| blocks.get(i))
                }
            };
            match last {
                Some((_, newest)) => (bounds.plain)(*newest) + body_max + BOUND_SLACK,
                None => f64::NEG_INFINITY,
            }
        };
        let fields = bounds.fields;
        let mut field_queue: std::collections::VecDeque<(String, f64)> = Default::default();
        let mut fields_done = few;
        let mut id_of = self
            .conn
            .prepare_cached("SELECT id FROM docs WHERE path = ?1")
            .map_err(self.err())?;
        // (b) Every match, newest rowid first; with `--path`, only among the documents whose
        // signatures name the file (found through the `files_tail` index).
        let walk_more = match &q.filters.narrowing.path {
            Some(p) => {
                let key = file_key(p);
                let esc = key
                    .replace('\\', "\\\\")
                    .replace('%', "\\%")
                    .replace('_', "\\_");
                let mut stmt = self
                    .conn
                    .prepare_cached(
                        "SELECT DISTINCT doc FROM files
                         WHERE tail = ?1 AND (path = ?2 OR path LIKE ?3 ESCAPE '\\') ORDER BY doc",
                    )
                    .map_err(self.err())?;
                let ids: Vec<i64> = stmt
                    .query_map(params![file_tail(&key), key, format!("%/{esc}")], |r| {
                        r.get::<_, i64>(0)
                    })
                    .map_err(self.err())?
                    .collect::<Result<_, _>>()
                    .map_err(self.err())?;
                // One range (one BM25 setup), the ids as a plain filter inside it.
                let lo = ids.first().copied().unwrap_or(0);
                let hi = ids.last().copied().unwrap_or(-1);
                let list: Vec<String> = ids.iter().map(i64::to_string).collect();
                format!(
                    " AND fts.rowid BETWEEN {lo} AND {hi} AND +fts.rowid IN ({})",
                    list.join(", ")
                )
            }
            None => String::new(),
        };
        let walk_sql = format!("{} ORDER BY fts.rowid DESC", select(!lazy, &walk_more));
        let mut walk = self.conn.prepare(&walk_sql).map_err(self.err())?;
        // Not run until its first row is asked for: a query the field hits answer never
        // pays the walk's BM25.
        let mut rows = walk
            .query(rusqlite::params_from_iter(args.iter()))
            .map_err(self.err())?;
        // Which walked documents hold the phrase, when too many hold it to be read up
        // front: the phrase's documents walked beside them, newest first — one statement
        // for the whole walk instead of one for every batch of 32.
        let mut phrase_walk = match (q.phrase, &phrase_known) {
            (Some(p), None) => Some((
                self.conn
                    .prepare("SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rowid DESC")
                    .map_err(self.err())?,
                p,
            )),
            _ => None,
        };
        let mut phrase_rows = match &mut phrase_walk {
            Some((stmt, p)) => Some(stmt.query([*p]).map_err(self.err())?),
            None => None,
        };
        // The phrase walk's current document (`None` before its first), and whether it ended.
        let (mut phrase_at, mut phrase_end): (Option<i64>, bool) = (None, false);
        let mut walked = 0usize;
        let mut last_id: Option<i64> = None;
        let mut walk_done = k == 0;
        let mut round = 0u32;
        let mut walk_budget = 0usize;
        loop {
            if decided {
                break;
            }
            if field_queue.is_empty() && !fields_done {
                let next = fields()?;
                fields_done = next.is_empty();
                field_queue.extend(next);
            }
            let field_bound = if unbounded {
                f64::INFINITY
            } else {
                field_queue
                    .front()
                    .map_or(f64::NEG_INFINITY, |(_, b)| *b + body_max + BOUND_SLACK)
            };
            let fields_stop = (field_queue.is_empty() && first.is_empty())
                || best.beats(phrase_open, field_bound);
            let walk_stop = walk_done || best.beats(phrase_open, plain_below(last_id));
            if (fields_stop && walk_stop) || walk_done {
                break;
            }
            if !fields_stop {
                // (a) The next field hits, best bound first: 64, then 4× more each round,
                // in one statement (with the rules and the phrase's documents first).
                let want = 64usize << (2 * round).min(16);
                let mut ids = std::mem::take(&mut first);
                let mut taken = 0usize;
                // The first round also takes every field hit that may beat the `k`-th one
                // taken (each taken one scores at least its fields' score).
                let mut kth_least = f64::INFINITY;
                while taken < want
                    || (round == 0
                        && taken < FIRST_ROUND_MAX
                        && field_queue
                            .front()
                            .is_some_and(|(_, b)| *b + body_max + BOUND_SLACK >= kth_least))
                {
                    if field_queue.is_empty() && !fields_done {
                        let next = fields()?;
                        fields_done = next.is_empty();
                        field_queue.extend(next);
                    }
                    let Some((path, least)) = field_queue.pop_front() else {
                        break;
                    };
                    let id: Option<i64> = id_of
                        .query_row([&path], |r| r.get(0))
                        .optional()
                        .map_err(self.err())?;
                    if let Some(id) = id {
                        if !best.seen.contains(&id) && !rules.contains(&id) {
                            ids.push(id);
                            taken += 1;
                            if taken == k {
                                kth_least = least;
                            }
                        }
                    }
                }
                by_ids(&ids, &mut best, round == 0 || !lazy)?;
                round += 1;
                walk_budget = walk_budget.saturating_add(1024usize << (2 * round).min(16));
            }
            // (b) The walk, a share at a time while field hits remain to be read.
            let mut steps = 0usize;
            while !walk_done
                && (fields_stop || steps < walk_budget)
                && !best.beats(phrase_open, plain_below(last_id))
            {
                let mut batch: Vec<Scan> = Vec::with_capacity(32);
                while batch.len() < 32 {
                    match rows.next().map_err(self.err())? {
                        Some(r) => batch.push(read(r).map_err(self.err())?),
                        None => {
                            walk_done = true;
                            break;
                        }
                    }
                }
                match &mut phrase_rows {
                    Some(holding) => {
                        for scan in batch.iter_mut() {
                            while !phrase_end && phrase_at.is_none_or(|at| at > scan.id) {
                                match holding.next().map_err(self.err())? {
                                    Some(r) => phrase_at = Some(r.get(0).map_err(self.err())?),
                                    None => phrase_end = true,
                                }
                            }
                            scan.phrase = phrase_at == Some(scan.id);
                        }
                    }
                    None => mark_phrase(&mut batch)?,
                }
                for scan in batch {
                    walked += 1;
                    steps += 1;
                    last_id = Some(scan.id);
                    best.push_walked(scan);
                }
            }
            walk_budget = walk_budget.saturating_sub(steps);
        }
        drop(rows);
        drop(phrase_rows);
        // The matches read without BM25 that may rank: scored with it, in one statement.
        best.prune();
        let unscored: BTreeMap<i64, bool> = best
            .rows
            .iter()
            .filter(|r| !r.exact)
            .map(|r| (r.id, r.phrase))
            .collect();
        if !unscored.is_empty() {
            let ids: Vec<i64> = unscored.keys().copied().collect();
            let mut scored = score_ids(&ids, true)?;
            for scan in scored.iter_mut() {
                scan.phrase = unscored.get(&scan.id).copied().unwrap_or(false);
            }
            best.rows.retain(|r| r.exact);
            best.rows.extend(scored);
            best.rows.sort_by(Best::order);
            best.rows.truncate(k);
        }
        // How many match: counted by the walk when it went to the end; else by FTS5 alone
        // when the filters leave nothing out of this cache; else up to a cap.
        let (total, exact) = if walk_done && k > 0 {
            (walked, true)
        } else if topic_sql.is_empty() && self.filters_keep_all(q.filters)? {
            // FTS5's count from the start, up to a cap: counting every match of a word in
            // nearly every document is a walk of its whole doclist.
            let n = (matched as usize).min(FTS_COUNT_CAP);
            (n, n < FTS_COUNT_CAP)
        } else {
            let mut all = args.clone();
            all.push((COUNT_CAP as i64).into());
            let n: i64 = self
                .conn
                .query_row(
                    &format!(
                        "SELECT count(*) FROM (SELECT 1 FROM fts JOIN docs d ON d.id = fts.rowid
                         WHERE fts MATCH ?{clause}{topic_sql} LIMIT ?)"
                    ),
                    rusqlite::params_from_iter(all),
                    |r| r.get(0),
                )
                .map_err(self.err())?;
            (n as usize, (n as usize) < COUNT_CAP)
        };
        let mut out = Vec::with_capacity(best.rows.len());
        for scan in best.rows {
            let Some((_, row)) = self.row_by_id(scan.id)? else {
                continue;
            };
            out.push(TopRow {
                row,
                bm25: scan.bm25,
                phrase: scan.phrase,
                score: scan.score,
            });
        }
        Ok((out, total, exact))
    }

    /// The most body BM25 (sign turned) a document matching every one of `phrases` can
    /// have, or infinity when the cache cannot say. FTS5's BM25 is a sum over the query's
    /// phrases of `idf · f·(k1+1) / (f + k1·(1 − b + b·D/avgdl))`, each under
    /// `idf·(k1+1)`, with `idf = ln((N − n + 0.5)/(n + 0.5))` (`1e-6` when ≤ 0) of the
    /// `N` rows and the `n` holding the phrase — so a bound needs `N` from above and `n`
    /// from below: `n` is counted up to `N/2` (beyond, `idf` is `1e-6` whatever `n`). A
    /// word in half the documents thus bounds its body points near 0 instead of the body's
    /// most.
    pub fn bm25_bound(&self, phrases: &[String]) -> Result<f64, CacheError> {
        self.bm25_bound_counted(phrases, "", 0, false)
    }

    /// [`Cache::bm25_bound`], knowing that `matched` documents (counted up to at least half
    /// the rows, or all of them) match `expr`, an expression every document counted for
    /// the bound matches: each phrase is in at least as many, and `expr` itself (a query
    /// of one term) in exactly as many. `floored`: every phrase is in half the rows or more
    /// ([`Cache::common_floor`]).
    fn bm25_bound_counted(
        &self,
        phrases: &[String],
        expr: &str,
        matched: i64,
        floored: bool,
    ) -> Result<f64, CacheError> {
        let Some(rows) = self.fts_rows()? else {
            return Ok(f64::INFINITY);
        };
        let rows = rows.max(1);
        let mut sum = 0.0f64;
        for p in phrases {
            // Counted once, and only when the matches alone do not floor the IDF: a
            // phrase of several words checks positions in every document holding them.
            let least: i64 = if floored {
                half(rows)
            } else if matched >= half(rows) || p == expr {
                matched
            } else {
                self.count_upto(p, half(rows))?.max(matched)
            };
            let (rows, least) = (rows as f64, least.max(1) as f64);
            let idf = ((rows - least + 0.5) / (least + 0.5)).ln();
            // FTS5's `k1` (its `b` the bound does not need).
            sum += if idf <= 0.0 { BM25_IDF_FLOOR } else { idf } * (BM25_K1 + 1.0);
        }
        // Sums in another order may differ in their last bits.
        Ok(sum * (1.0 + 1e-9))
    }

    /// `N` as FTS5's BM25 reads it: the first varint of its averages record (its row 1),
    /// which counts rows deleted from a contentless table too (more than `docs` holds);
    /// `None` when it cannot be read.
    fn fts_rows(&self) -> Result<Option<i64>, CacheError> {
        Ok(self.averages()?.map(|(rows, _)| rows))
    }

    /// The statistics [`OwnBm25`] scores with, or `None` when it cannot score this query
    /// (no reader, a phrase of other than ASCII words, no averages record). `matched`
    /// documents match `expr` (the query, exclusions inside), counted up to `counted_to`:
    /// when that is short of half the rows it is counted on to half (every phrase is in at
    /// least those documents, so at half each IDF is FTS5's floor and none is counted);
    /// not when `floored` (every phrase is in half the rows: [`Cache::common_floor`]).
    fn own_bm25<'r>(
        &self,
        q: &TopQuery<'r>,
        expr: &str,
        matched: &mut i64,
        counted_to: &mut i64,
        floored: bool,
    ) -> Result<Option<OwnBm25<'r>>, CacheError> {
        let Some(reader) = q.reader else {
            return Ok(None);
        };
        let mut phrases = Vec::with_capacity(q.phrases.len());
        for p in q.phrases {
            let Some((tokens, prefix)) = phrase_tokens(p) else {
                return Ok(None);
            };
            phrases.push((tokens, prefix, 0.0));
        }
        let Some((rows, totals)) = self.averages()? else {
            return Ok(None);
        };
        if rows <= 0 {
            return Ok(None);
        }
        let half_rows = half(rows);
        if !floored && *matched >= *counted_to && *counted_to < half_rows {
            *matched = self.count_upto(expr, half_rows)?;
            *counted_to = half_rows;
        }
        for (p, (_, _, idf)) in q.phrases.iter().zip(phrases.iter_mut()) {
            // Each phrase's documents, as FTS5's `bm25()` counts them (the phrase alone,
            // in any column), up to half the rows (beyond, the IDF is the floor).
            let n = if floored || *matched >= half_rows {
                half_rows
            } else if q.excluded.is_none() && p == q.expr && *matched < *counted_to {
                *matched
            } else {
                self.count_upto(p, half_rows)?
            };
            *idf = if n >= half_rows {
                BM25_IDF_FLOOR
            } else {
                // FTS5's `log((nRow - nHit + 0.5) / (nHit + 0.5))`, operation by operation.
                let v = (((rows - n) as f64 + 0.5) / (n as f64 + 0.5)).ln();
                if v <= 0.0 {
                    BM25_IDF_FLOOR
                } else {
                    v
                }
            };
        }
        let tokens: i64 = totals.iter().sum();
        Ok(Some(OwnBm25 {
            reader,
            avgdl: tokens as f64 / rows as f64,
            phrases,
        }))
    }

    /// FTS5's averages record (its row 1): the rows (counting rows deleted from the
    /// contentless table too) and each column's tokens in all; `None` when unreadable.
    fn averages(&self) -> Result<Option<(i64, Vec<i64>)>, CacheError> {
        let record: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT block FROM fts_data WHERE id = 1")
            .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
            .map_err(self.err())?;
        Ok(record.and_then(|r| {
            let mut all = varints(&r)?;
            if all.is_empty() {
                return None;
            }
            let rows = all.remove(0);
            Some((rows, all))
        }))
    }

    /// A document's tokens per FTS5 column (`fts_docsize`), or `None`.
    fn docsize(&self, id: i64) -> Result<Option<Vec<i64>>, CacheError> {
        let sz: Option<Vec<u8>> = self
            .conn
            .prepare_cached("SELECT sz FROM fts_docsize WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
            .map_err(self.err())?;
        Ok(sz.as_deref().and_then(varints))
    }

    /// Whether the `common` table shows every one of `phrases` (a word, or a phrase of two)
    /// in at least `half_rows` documents: then each one's IDF is FTS5's floor.
    fn common_floor(&self, phrases: &[String], half_rows: i64) -> Result<bool, CacheError> {
        if phrases.is_empty() {
            return Ok(false);
        }
        for p in phrases {
            if self.common_least(p)?.is_none_or(|n| n < half_rows) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// At least how many documents hold an FTS5 phrase (a word, or two, no prefix) by the
    /// `common` table; `None` when it does not say.
    fn common_least(&self, phrase: &str) -> Result<Option<i64>, CacheError> {
        let Some((tokens, false)) = phrase_tokens(phrase) else {
            return Ok(None);
        };
        if tokens.len() > 2 {
            return Ok(None);
        }
        self.conn
            .prepare_cached("SELECT n FROM common WHERE term = ?1")
            .and_then(|mut s| s.query_row([tokens.join(" ")], |r| r.get(0)).optional())
            .map_err(self.err())
    }

    /// The `common` table: (term, documents at least), by term.
    #[cfg(test)]
    pub fn common_terms(&self) -> Result<Vec<(String, i64)>, CacheError> {
        common_rows(&self.conn).map_err(self.err())
    }

    /// How many documents an FTS5 expression matches, up to `limit`.
    #[cfg(test)]
    pub fn count_matching(&self, expr: &str, limit: i64) -> Result<i64, CacheError> {
        self.count_upto(expr, limit)
    }

    /// How many documents match an FTS5 expression, counted up to `limit` (no BM25).
    fn count_upto(&self, expr: &str, limit: i64) -> Result<i64, CacheError> {
        self.conn
            .prepare_cached("SELECT count(*) FROM (SELECT 1 FROM fts WHERE fts MATCH ?1 LIMIT ?2)")
            .and_then(|mut s| s.query_row(params![expr, limit], |r| r.get(0)))
            .map_err(self.err())
    }

    /// Whether no document of this cache is left out by `f`: only the project, mirror and
    /// artifact filters, and every document passes them.
    fn filters_keep_all(&self, f: &Filters) -> Result<bool, CacheError> {
        if f.narrowing.narrows() {
            return Ok(false);
        }
        let wants_artifacts = f.narrowing.wants_artifacts();
        let mut stmt = self
            .conn
            .prepare_cached("SELECT project_key, mirror, artifact FROM counts WHERE n > 0")
            .map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, bool>(1)?,
                    r.get::<_, bool>(2)?,
                ))
            })
            .map_err(self.err())?;
        for row in rows {
            let (pk, mirror, artifact) = row.map_err(self.err())?;
            let pk_ok = f
                .project_key
                .as_ref()
                .is_none_or(|want| want.to_lowercase() == pk.to_lowercase());
            if !pk_ok || (mirror && !f.include_mirror) || (artifact && !wants_artifacts) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Register the topic test of `q` as `chapters_topic` (when it has one).
    fn register_topic(&self, q: &TopQuery<'_>) -> Result<bool, CacheError> {
        let Some(test) = &q.topic else {
            return Ok(false);
        };
        let test = test.clone();
        self.conn
            .create_scalar_function(
                "chapters_topic",
                1,
                FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
                move |ctx| {
                    let topics = match ctx.get_raw(0) {
                        rusqlite::types::ValueRef::Text(t) => t,
                        _ => b"",
                    };
                    Ok(test(&String::from_utf8_lossy(topics)))
                },
            )
            .map_err(self.err())?;
        Ok(true)
    }

    /// Whether the document `id` matches an FTS5 expression.
    pub fn id_matches(&self, expr: &str, id: i64) -> Result<bool, CacheError> {
        self.conn
            .query_row(
                "SELECT 1 FROM fts WHERE fts MATCH ?1 AND rowid = ?2",
                params![expr, id],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
            .map_err(self.err())
    }

    /// Whether the document `id` names the file of the `--path` filter in its signature
    /// (true when the filter is not set).
    pub fn id_names_path(&self, id: i64, filters: &Filters) -> Result<bool, CacheError> {
        if filters.narrowing.path.is_none() {
            return Ok(true);
        }
        let (clause, args) = filter_sql(&Filters {
            narrowing: Narrowing {
                path: filters.narrowing.path.clone(),
                artifacts: true,
                ..Narrowing::default()
            },
            include_mirror: true,
            ..Filters::default()
        });
        let mut all: Vec<rusqlite::types::Value> = vec![id.into()];
        all.extend(args);
        self.conn
            .query_row(
                &format!("SELECT 1 FROM docs d WHERE d.id = ?{clause}"),
                rusqlite::params_from_iter(all),
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
            .map_err(self.err())
    }

    /// One document's id and row by path.
    pub fn row_with_id(&self, path: &str) -> Result<Option<(i64, Row)>, CacheError> {
        let q = format!("SELECT {ROW_COLUMNS}, d.id FROM docs d WHERE d.path = ?1");
        self.conn
            .query_row(&q, [path], |r| Ok((r.get(ROW_COLUMN_COUNT)?, row_of(r)?)))
            .optional()
            .map_err(self.err())
    }

    fn row_by_id(&self, id: i64) -> Result<Option<(i64, Row)>, CacheError> {
        let q = format!("SELECT {ROW_COLUMNS}, d.id FROM docs d WHERE d.id = ?1");
        self.conn
            .query_row(&q, [id], |r| Ok((r.get(ROW_COLUMN_COUNT)?, row_of(r)?)))
            .optional()
            .map_err(self.err())
    }

    /// Every document with a category (rules), with its id, by path: few.
    pub fn with_category(&self) -> Result<Vec<(i64, Row)>, CacheError> {
        // Through the partial index `docs_rules`, sorted here: `ORDER BY d.path` made
        // SQLite walk every row in path order (250 ms at 100,000 documents).
        let q = format!("SELECT {ROW_COLUMNS}, d.id FROM docs d WHERE d.category != ''");
        let mut stmt = self.conn.prepare_cached(&q).map_err(self.err())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(ROW_COLUMN_COUNT)?, row_of(r)?)))
            .map_err(self.err())?;
        let mut out: Vec<(i64, Row)> = rows.collect::<Result<_, _>>().map_err(self.err())?;
        out.sort_by(|a, b| a.1.path.cmp(&b.1.path));
        Ok(out)
    }

    /// Documents matching an FTS5 expression (over title, summary, topics, category and
    /// body) and the filters, with their rows: (row, body BM25 as a positive number, larger
    /// is better), by path. Every match: the full scoring's (the top-k path's test oracle).
    #[cfg(test)]
    pub fn matching(&self, expr: &str, filters: &Filters) -> Result<Vec<(Row, f64)>, CacheError> {
        let mut out = self.fts_select(
            &format!("{ROW_COLUMNS}, -bm25(fts, 1.0, 0.0, 0.0, 0.0, 0.0)"),
            expr,
            filters,
            |r| Ok((row_of(r)?, r.get::<_, f64>(ROW_COLUMN_COUNT)?)),
        )?;
        out.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        Ok(out)
    }

    /// For every document matching `q` (its exclusions and filters too): its path, the
    /// body BM25 [`OwnBm25`] computes (`None` where it leaves the document to FTS5, or
    /// for the whole query) and FTS5's `bm25()`, both sign turned.
    #[cfg(test)]
    pub fn own_and_fts5_bm25(
        &self,
        q: &TopQuery<'_>,
    ) -> Result<Vec<(String, Option<f64>, f64)>, CacheError> {
        let expr = match q.excluded {
            Some(ex) => format!("({}) NOT ({ex})", q.expr),
            None => q.expr.to_owned(),
        };
        let (mut matched, mut counted_to) = (0, 0);
        let floored = self.common_floor(q.phrases, self.fts_rows()?.map_or(0, half))?;
        let own = self.own_bm25(q, &expr, &mut matched, &mut counted_to, floored)?;
        let rows = self.fts_select(
            "d.id, d.path, d.title, d.summary, -bm25(fts, 1.0, 0.0, 0.0, 0.0, 0.0)",
            &expr,
            q.filters,
            |r| {
                Ok((
                    RowFields {
                        id: r.get(0)?,
                        path: r.get(1)?,
                        title: r.get(2)?,
                        summary: r.get(3)?,
                        topics: None,
                        kind: None,
                        category: None,
                        date: None,
                        rule_id: None,
                    },
                    r.get::<_, f64>(4)?,
                ))
            },
        )?;
        let mut out = Vec::with_capacity(rows.len());
        for (f, fts5) in rows {
            let mine = match &own {
                Some(own) => own.score(self, &f)?,
                None => None,
            };
            out.push((f.path, mine, fts5));
        }
        Ok(out)
    }

    /// Plain BM25 (SQLite FTS5's, every column weighed alike, no boosts) of the documents
    /// matching an FTS5 expression and the filters, best first, ties by path: the baseline
    /// the relevance set compares the ranking with.
    pub fn plain_bm25(
        &self,
        expr: &str,
        filters: &Filters,
    ) -> Result<Vec<(String, f64)>, CacheError> {
        let mut out = self.fts_select("d.path, -bm25(fts)", expr, filters, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?))
        })?;
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }

    /// `SELECT <columns>` of the documents matching an FTS5 expression and the filters.
    fn fts_select<T>(
        &self,
        columns: &str,
        expr: &str,
        filters: &Filters,
        map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, CacheError> {
        let (clause, args) = filter_sql(filters);
        let q = format!(
            "SELECT {columns} FROM fts JOIN docs d ON d.id = fts.rowid WHERE fts MATCH ?{clause}"
        );
        let mut stmt = self.conn.prepare(&q).map_err(self.err())?;
        let mut all: Vec<rusqlite::types::Value> = vec![expr.to_owned().into()];
        all.extend(args);
        let rows = stmt
            .query_map(rusqlite::params_from_iter(all), map)
            .map_err(self.err())?;
        rows.collect::<Result<_, _>>().map_err(self.err())
    }

    /// The paths of documents matching an FTS5 expression (no filters; the oracle's).
    #[cfg(test)]
    pub fn paths_matching(
        &self,
        expr: &str,
    ) -> Result<std::collections::BTreeSet<String>, CacheError> {
        Ok(self
            .matching(
                expr,
                &Filters {
                    narrowing: Narrowing {
                        artifacts: true,
                        ..Narrowing::default()
                    },
                    include_mirror: true,
                    ..Filters::default()
                },
            )?
            .into_iter()
            .map(|(r, _)| r.path)
            .collect())
    }

    /// One document's row by path.
    pub fn row(&self, path: &str) -> Result<Option<Row>, CacheError> {
        let q = format!("SELECT {ROW_COLUMNS} FROM docs d WHERE d.path = ?1");
        self.conn
            .query_row(&q, [path], row_of)
            .optional()
            .map_err(self.err())
    }

    /// Rows passing the filters, newest first (undated last), ties by path.
    pub fn list(
        &self,
        filters: &Filters,
        limit: Option<usize>,
    ) -> Result<(Vec<Row>, usize), CacheError> {
        let (clause, args) = filter_sql(filters);
        let q = format!(
            "SELECT {ROW_COLUMNS} FROM docs d WHERE 1 = 1{clause}
             ORDER BY d.date_ms IS NULL, d.date_ms DESC, d.path"
        );
        let mut stmt = self.conn.prepare(&q).map_err(self.err())?;
        let rows = stmt
            .query_map(rusqlite::params_from_iter(args), row_of)
            .map_err(self.err())?;
        let all: Vec<Row> = rows.collect::<Result<_, _>>().map_err(self.err())?;
        let total = all.len();
        Ok((
            all.into_iter().take(limit.unwrap_or(usize::MAX)).collect(),
            total,
        ))
    }

    /// Rows whose root session starts with `prefix` (after `session-`) and whose file
    /// name is numbered `number` (`003-…`, `plan-003-…`).
    pub fn by_short_id(&self, prefix: &str, number: u64) -> Result<Vec<Row>, CacheError> {
        let q = format!("SELECT {ROW_COLUMNS} FROM docs d WHERE d.root LIKE ?1 ESCAPE '\\' OR d.root LIKE ?2 ESCAPE '\\' ORDER BY d.path");
        let esc = prefix
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        let mut stmt = self.conn.prepare(&q).map_err(self.err())?;
        let rows = stmt
            .query_map(
                params![format!("{esc}%"), format!("session-{esc}%")],
                row_of,
            )
            .map_err(self.err())?;
        let all: Vec<Row> = rows.collect::<Result<_, _>>().map_err(self.err())?;
        Ok(all
            .into_iter()
            .filter(|r| file_number(&r.name) == Some(number))
            .collect())
    }
}

/// The `AND …` clause keeping the rows `ids` of a statement over `fts`: a seek each for at
/// most `seek_at_most` of them, else one walk over their rowid range; `None` for no id.
fn ids_clause(ids: &[i64], seek_at_most: usize) -> Option<String> {
    let (lo, hi) = (ids.iter().min()?, ids.iter().max()?);
    let list: Vec<String> = ids.iter().map(i64::to_string).collect();
    Some(if ids.len() <= seek_at_most {
        format!(" AND fts.rowid IN ({})", list.join(", "))
    } else {
        format!(
            " AND fts.rowid BETWEEN {lo} AND {hi} AND +fts.rowid IN ({})",
            list.join(", ")
        )
    })
}

/// FTS5's least IDF (a phrase in at least half the rows).
const BM25_IDF_FLOOR: f64 = 1e-6;

/// FTS5's BM25 constants `k1` and `b`.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// A row of [`Cache::top`]'s statements before it is scored.
struct RowFields {
    id: i64,
    path: String,
    title: Option<String>,
    summary: Option<String>,
    topics: Option<String>,
    kind: Option<String>,
    category: Option<String>,
    date: Option<String>,
    rule_id: Option<String>,
}

/// FTS5's body BM25 (`bm25(fts, 1.0, 0.0, 0.0, 0.0, 0.0)`, sign turned) computed here with
/// the same operations in the same order, so the same bits (held by
/// `tests::own_bm25_is_fts5s_to_the_bit`): the IDFs once per query ([`Cache::own_bm25`]),
/// where `bm25()` counts every phrase's documents again in each statement; a document's
/// phrase counts from its body as indexed, read back through the store's reader; its
/// length from `fts_docsize`.
struct OwnBm25<'r> {
    reader: &'r Reader,
    avgdl: f64,
    /// Per positive phrase of the expression, in its order: its tokens, whether the last is
    /// a prefix, its IDF. (An excluded phrase adds `0.0`: no document scored holds it.)
    phrases: Vec<(Vec<String>, bool, f64)>,
}

impl OwnBm25<'_> {
    /// The document's body BM25, or `None` when it cannot be computed here (its body holds
    /// a character whose token class is not known here, or is not the text indexed: its
    /// token count differs from FTS5's) — FTS5 scores it then.
    fn score(&self, cache: &Cache, f: &RowFields) -> Result<Option<f64>, CacheError> {
        let Some(sizes) = cache.docsize(f.id)? else {
            return Ok(None);
        };
        let Ok(bytes) = self.reader.bytes(Path::new(&f.path)) else {
            return Ok(None);
        };
        let (title, summary) = (
            f.title.as_deref().unwrap_or(""),
            f.summary.as_deref().unwrap_or(""),
        );
        // Only counts leave the redacted bytes the reader read back.
        let text = String::from_utf8_lossy(bytes.get());
        let indexed = body_column(stored_body(&text), title, summary);
        let Some(tokens) = ascii_tokens(&indexed) else {
            return Ok(None);
        };
        let freqs: Vec<u32> = self
            .phrases
            .iter()
            .map(|(phrase, prefix, _)| phrase_count(&tokens, phrase, *prefix))
            .collect();
        let body_tokens = tokens.len();
        if sizes.first().copied() != Some(body_tokens as i64) {
            return Ok(None);
        }
        let d = sizes.iter().sum::<i64>() as f64;
        let mut score = 0.0f64;
        for ((_, _, idf), freq) in self.phrases.iter().zip(freqs) {
            let freq = f64::from(freq);
            score += idf
                * ((freq * (BM25_K1 + 1.0))
                    / (freq + BM25_K1 * (1.0 - BM25_B + BM25_B * d / self.avgdl)));
        }
        Ok(Some(score))
    }
}

/// A cache filled from nothing picks the words of the `common` table from this many of
/// the first documents it inserts (a few in the unit tests).
const COMMON_SAMPLE: usize = if cfg!(test) { 16 } else { 256 };

/// The `common` table: lower bounds of how many documents hold, in their body, each word
/// most documents hold, and each two-word phrase of such words. At half FTS5's rows or
/// more a phrase's IDF is FTS5's floor whatever its count ([`Cache::common_floor`]), so a
/// query of such words is not counted to half the rows (a walk of half their doclists).
/// Filled from nothing: every word of the first [`COMMON_SAMPLE`] documents is counted,
/// those in a quarter of them or more are kept and counted on, with the phrases of two of
/// them from where each is first seen; the phrases in more documents than [`Cache::top`]
/// scores up front are kept too (it then does not read them). An update counts what it inserts and takes every
/// document it removes off every term (which it may not have held): a lower bound still.
/// A body [`ascii_tokens`] cannot cut is not counted.
struct Common {
    /// Per term: its text (`word` or `word word`), its documents counted, the last
    /// document counted (one count per document).
    terms: Vec<(String, i64, u64)>,
    words: HashMap<String, usize>,
    pairs: HashMap<(usize, usize), usize>,
    /// Filled from nothing: phrases of two counted words are added when first seen.
    grow: bool,
    /// While picking the words: the documents read and every word's documents.
    sample: Option<(usize, BTreeMap<String, i64>)>,
    /// Documents counted (`terms`' third field).
    docs: u64,
    /// Documents removed (an update's).
    removed: i64,
    /// Documents counted, the sample's too.
    total: i64,
}

impl Common {
    fn sampling() -> Common {
        Common {
            terms: Vec::new(),
            words: HashMap::new(),
            pairs: HashMap::new(),
            grow: true,
            sample: Some((0, BTreeMap::new())),
            docs: 0,
            removed: 0,
            total: 0,
        }
    }

    /// The table as stored, for an update to count on (no new term).
    fn load(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<Common> {
        let mut c = Common {
            grow: false,
            sample: None,
            ..Common::sampling()
        };
        let rows = common_rows(tx)?;
        // Words first, so that every phrase finds its two.
        let (words, phrases): (Vec<_>, Vec<_>) =
            rows.into_iter().partition(|(t, _)| !t.contains(' '));
        for (term, _) in words {
            c.words.insert(term.clone(), c.terms.len());
            c.terms.push((term, 0, 0));
        }
        for (term, _) in phrases {
            let ids = term
                .split_once(' ')
                .and_then(|(a, b)| Some((*c.words.get(a)?, *c.words.get(b)?)));
            if let Some(ids) = ids {
                c.pairs.insert(ids, c.terms.len());
                c.terms.push((term, 0, 0));
            }
        }
        Ok(c)
    }

    /// `n` documents were taken out of the cache.
    fn removed(&mut self, n: usize) {
        self.removed += n as i64;
    }

    /// One document inserted, its body column's text `indexed`.
    fn add(&mut self, indexed: &str) {
        let lower = indexed.to_ascii_lowercase();
        let Some(tokens) = ascii_tokens(&lower) else {
            return;
        };
        self.total += 1;
        if let Some((seen, counts)) = &mut self.sample {
            let distinct: BTreeSet<&str> = tokens.iter().copied().collect();
            for t in distinct {
                *counts.entry(t.to_owned()).or_default() += 1;
            }
            *seen += 1;
            if *seen >= COMMON_SAMPLE {
                self.pick();
            }
            return;
        }
        self.docs += 1;
        let doc = self.docs;
        let mut prev: Option<usize> = None;
        for t in tokens {
            let word = self.words.get(t).copied();
            if let Some(w) = word {
                self.count(w, doc);
            }
            if let (Some(a), Some(b)) = (prev, word) {
                let at = match self.pairs.get(&(a, b)) {
                    Some(at) => Some(*at),
                    None if self.grow => {
                        let text = format!("{} {}", self.terms[a].0, self.terms[b].0);
                        self.pairs.insert((a, b), self.terms.len());
                        self.terms.push((text, 0, 0));
                        Some(self.terms.len() - 1)
                    }
                    None => None,
                };
                if let Some(at) = at {
                    self.count(at, doc);
                }
            }
            prev = word;
        }
    }

    /// Term `at` is in document `doc`: counted once per document.
    fn count(&mut self, at: usize, doc: u64) {
        let term = &mut self.terms[at];
        if term.2 != doc {
            term.1 += 1;
            term.2 = doc;
        }
    }

    /// Keep the sample's words in a quarter of its documents or more, with their counts.
    fn pick(&mut self) {
        let Some((seen, counts)) = self.sample.take() else {
            return;
        };
        let least = (seen as i64 / 4).max(1);
        for (word, n) in counts {
            if n >= least {
                self.words.insert(word.clone(), self.terms.len());
                self.terms.push((word, n, 0));
            }
        }
    }

    /// Write the counts: filled from nothing, the terms in a quarter of the documents
    /// counted or more, and the phrases in more than [`PHRASE_UP_FRONT`] (the table was
    /// emptied); else each term's count moved by what was
    /// inserted and removed.
    fn store(mut self, tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
        if self.grow {
            self.pick();
            // A phrase held by more documents than are scored up front is kept too: its
            // holders are then not read (see [`Cache::top`]).
            let least = (self.total / 4).max(1);
            let phrase_least = least.min(PHRASE_UP_FRONT as i64 + 1);
            let mut ins = tx.prepare("INSERT INTO common(term, n) VALUES (?1, ?2)")?;
            let mut terms: Vec<&(String, i64, u64)> = self
                .terms
                .iter()
                .filter(|t| {
                    t.1 >= if t.0.contains(' ') {
                        phrase_least
                    } else {
                        least
                    }
                })
                .collect();
            terms.sort();
            for (term, n, _) in terms {
                ins.execute(params![term, n])?;
            }
            return Ok(());
        }
        let mut upd = tx.prepare("UPDATE common SET n = n + ?2 WHERE term = ?1")?;
        for (term, n, _) in &self.terms {
            let moved = n - self.removed;
            if moved != 0 {
                upd.execute(params![term, moved])?;
            }
        }
        Ok(())
    }
}

/// The `common` table's rows (term, documents at least), by term.
fn common_rows(conn: &Connection) -> rusqlite::Result<Vec<(String, i64)>> {
    let mut stmt = conn.prepare("SELECT term, n FROM common ORDER BY term")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// The body of a document's text the cache keeps (bounded by [`indexed_body`]).
fn stored_body(text: &str) -> &str {
    indexed_body(crate::render::body_text(text).unwrap_or(""))
}

/// What FTS5's body column holds of a stored body: the scorer's own BM25 counts this text,
/// so it is made in this one place for the insert and the count alike.
fn body_column(body: &str, title: &str, summary: &str) -> String {
    cjk_bigrams(without_head(body, title, summary))
}

/// The part of a body the cache indexes: at most [`MAX_BODY_BYTES`], cut at a character.
fn indexed_body(body: &str) -> &str {
    let mut end = body.len().min(MAX_BODY_BYTES);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    &body[..end]
}

/// Characters outside ASCII known to be separators to FTS5's `unicode61` tokenizer
/// (punctuation, symbols and spaces, none a diacritic) that chapters hold.
const KNOWN_SEPARATORS: &[char] = &[
    '\u{a0}', '·', '—', '–', '…', '→', '←', '↑', '↓', '⇒', '“', '”', '‘', '’', '«', '»', '•', '×',
    '÷', '±', '≤', '≥', '≠', '°', '§', '©', '®', '™', '€', '£', '✓', '✔', '✗', '✘', '│', '─', '└',
    '├', '┌', '┐', '┘', '┬', '┴', '┼', '═', '║',
];

/// `text`'s tokens as FTS5's `unicode61` tokenizer makes them of ASCII text (runs of
/// letters and digits; the caller compares them without case), or `None` when the text
/// holds another character than those and [`KNOWN_SEPARATORS`].
fn ascii_tokens(text: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in text.char_indices() {
        if c.is_ascii_alphanumeric() {
            start.get_or_insert(i);
            continue;
        }
        if !c.is_ascii() && !KNOWN_SEPARATORS.contains(&c) {
            return None;
        }
        if let Some(s) = start.take() {
            out.push(&text[s..i]);
        }
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    Some(out)
}

/// An FTS5 phrase as [`crate::catalog::query`] writes it (`"a b"`, `"a" *`): its tokens,
/// lowercase, and whether the last is a prefix; `None` when [`ascii_tokens`] cannot read
/// it or it has no token.
fn phrase_tokens(phrase: &str) -> Option<(Vec<String>, bool)> {
    let (quoted, prefix) = match phrase.strip_suffix('*') {
        Some(rest) => (rest.trim_end(), true),
        None => (phrase, false),
    };
    let inner = quoted
        .strip_prefix('"')?
        .strip_suffix('"')?
        .replace("\"\"", "\"");
    let tokens: Vec<String> = ascii_tokens(&inner)?
        .into_iter()
        .map(str::to_ascii_lowercase)
        .collect();
    (!tokens.is_empty()).then_some((tokens, prefix))
}

/// How many times the phrase starts in `tokens` (FTS5's instances of it in the column:
/// every start, overlapping ones too).
fn phrase_count(tokens: &[&str], phrase: &[String], prefix: bool) -> u32 {
    let n = phrase.len();
    if n == 0 || tokens.len() < n {
        return 0;
    }
    let mut count = 0u32;
    for at in 0..=tokens.len() - n {
        let holds = phrase.iter().enumerate().all(|(j, want)| {
            let t = tokens[at + j].as_bytes();
            if prefix && j == n - 1 {
                t.len() >= want.len() && t[..want.len()].eq_ignore_ascii_case(want.as_bytes())
            } else {
                t.eq_ignore_ascii_case(want.as_bytes())
            }
        });
        if holds {
            count += 1;
        }
    }
    count
}

/// The SQLite varints `bytes` holds, one after another (FTS5's records); `None` when one
/// is cut short.
fn varints(bytes: &[u8]) -> Option<Vec<i64>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = bytes.get(at..)?;
        let len = rest
            .iter()
            .take(9)
            .position(|b| b & 0x80 == 0)
            .map_or(9, |i| i + 1);
        if rest.len() < len {
            return None;
        }
        out.push(varint(rest)?);
        at += len;
    }
    Some(out)
}

/// Half of `rows`, rounded up: a term in this many documents has FTS5's floor IDF.
fn half(rows: i64) -> i64 {
    (rows + 1) / 2
}

/// The SQLite varint `bytes` starts with (big-endian 7-bit groups, the 9th byte whole), as
/// FTS5 writes its records; `None` when cut short or negative.
fn varint(bytes: &[u8]) -> Option<i64> {
    let mut v: u64 = 0;
    for (i, b) in bytes.iter().take(9).enumerate() {
        if i == 8 {
            v = (v << 8) | u64::from(*b);
            return i64::try_from(v).ok();
        }
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return i64::try_from(v).ok();
        }
    }
    None
}

/// The number a document's file name starts with (`003-x.md` → 3, `plan-002-x.md` → 2).
pub fn file_number(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("plan-").unwrap_or(name);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The short id `chapters show` takes: `<first 8 of the root session>/<number>` for a
/// numbered document of a session, `plan-…` numbers prefixed `p`; else the path.
pub fn short_id(root: &str, name: &str, path: &str) -> String {
    let session = root.strip_prefix("session-").unwrap_or(root);
    let prefix: String = session.chars().take(8).collect();
    match file_number(name) {
        Some(n)
            if root != crate::rules::store::RULES_DIR
                && !prefix.is_empty()
                && name.ends_with(".md") =>
        {
            if name.starts_with("plan-") {
                format!("{prefix}/p{n}")
            } else {
                format!("{prefix}/{n}")
            }
        }
        _ => path.to_owned(),
    }
}

const ROW_COLUMNS: &str = "d.path, d.root, d.name, d.blob, d.kind, d.title, d.summary, d.topics, d.date, d.session, d.seq_lo, d.seq_hi, d.rule_id, d.project_key, d.harness, d.machine, d.date_ms, d.mirror, d.category";

/// How many columns [`ROW_COLUMNS`] names.
const ROW_COLUMN_COUNT: usize = 19;

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    let topics: String = r.get(7)?;
    let seq_lo: Option<i64> = r.get(10)?;
    let seq_hi: Option<i64> = r.get(11)?;
    Ok(Row {
        path: r.get(0)?,
        root: r.get(1)?,
        name: r.get(2)?,
        blob: r.get(3)?,
        meta: DocMeta {
            kind: r.get(4)?,
            title: r.get(5)?,
            summary: r.get(6)?,
            topics: topics
                .split('\n')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            date: r.get(8)?,
            session_id: r.get(9)?,
            seq_range: seq_lo.zip(seq_hi).map(|(a, b)| (a as u64, b as u64)),
            id: r.get(12)?,
            project_key: r.get(13)?,
        },
        harness: r.get(14)?,
        machine: r.get(15)?,
        date_ms: r.get(16)?,
        mirror: r.get(17)?,
        category: r.get(18)?,
    })
}

/// `AND …` clauses over `docs d` for the filters, with their values in order.
fn filter_sql(f: &Filters) -> (String, Vec<rusqlite::types::Value>) {
    let mut clause = String::new();
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    let eq = |clause: &mut String, col: &str, v: &Option<String>, args: &mut Vec<_>| {
        if let Some(v) = v {
            clause.push_str(&format!(" AND lower(d.{col}) = lower(?)"));
            args.push(rusqlite::types::Value::from(v.clone()));
        }
    };
    eq(&mut clause, "kind", &f.narrowing.kind, &mut args);
    eq(&mut clause, "harness", &f.narrowing.harness, &mut args);
    eq(&mut clause, "machine", &f.narrowing.machine, &mut args);
    eq(&mut clause, "project_key", &f.project_key, &mut args);
    if let Some(s) = &f.narrowing.session {
        clause.push_str(" AND (d.session LIKE ? ESCAPE '\\' OR d.root LIKE ? ESCAPE '\\' OR d.root LIKE ? ESCAPE '\\')");
        let esc = s
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        args.push(format!("{esc}%").into());
        args.push(format!("{esc}%").into());
        args.push(format!("session-{esc}%").into());
    }
    if let Some(ms) = f.narrowing.since_ms {
        clause.push_str(" AND d.date_ms >= ?");
        args.push(ms.into());
    }
    if let Some(ms) = f.narrowing.until_ms {
        clause.push_str(" AND d.date_ms < ?");
        args.push(ms.into());
    }
    if !f.include_mirror {
        clause.push_str(" AND d.mirror = 0");
    }
    if !f.narrowing.wants_artifacts() {
        clause.push_str(&format!(" AND d.kind != '{ARTIFACT_KIND}'"));
    }
    if let Some(p) = &f.narrowing.path {
        // A file the document's signature names: the whole path or its last components.
        let key = file_key(p);
        let esc = key
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        clause.push_str(" AND EXISTS (SELECT 1 FROM files f WHERE f.doc = d.id AND f.tail = ? AND (f.path = ? OR f.path LIKE ? ESCAPE '\\'))");
        args.push(file_tail(&key).to_owned().into());
        args.push(key.into());
        args.push(format!("%/{esc}").into());
    }
    (clause, args)
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Extra {
    #[serde(default)]
    harness: Option<String>,
    /// A rule's category.
    #[serde(default)]
    category: Option<String>,
    /// Files a document names in its frontmatter (a harness that records them there).
    #[serde(default)]
    paths: Vec<String>,
    /// The SHA-256 of the artifacts a chapter references.
    #[serde(default)]
    artifacts: Vec<String>,
    #[serde(default)]
    harness_id: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    seq_range: Option<(u64, u64)>,
}

/// One document (or artifact) about to be written into the cache.
struct Entry {
    doc: TableDoc,
    meta: DocMeta,
    extra: Extra,
    body: String,
    /// The files its signature names (normalized by [`file_key`]).
    files: BTreeSet<String>,
}

/// A path as the `--path` filter compares it: `/` separators, no leading `./`, lowercase.
pub fn file_key(path: &str) -> String {
    let p = path.replace('\\', "/");
    let mut p = p.trim().trim_end_matches('/');
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    p.to_lowercase()
}

/// A path's last component, as [`file_key`] made it (what the `--path` filter looks up).
fn file_tail(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

/// The collection lines (signatures) of the sessions one update reads, each file once:
/// per line, its seqs and the paths it names.
#[derive(Default)]
struct Signatures {
    files: BTreeMap<PathBuf, Vec<SignedPaths>>,
}

/// One collection line: its seqs and the paths it names.
type SignedPaths = (Vec<u64>, Vec<String>);

impl Signatures {
    /// The files a document's signature names: the `paths` of its session's collection
    /// lines whose seqs fall in its seq range, plus any `paths` its frontmatter lists.
    fn paths_of(
        &mut self,
        workspace: &Path,
        folder: &str,
        meta: &DocMeta,
        extra: &Extra,
    ) -> BTreeSet<String> {
        let mut out: BTreeSet<String> = extra.paths.iter().map(|p| file_key(p)).collect();
        let (Some(session), Some((lo, hi))) = (meta.session_id.as_deref(), meta.seq_range) else {
            return out;
        };
        let Some(file) = collection_file(workspace, folder, session) else {
            return out;
        };
        let lines = self.files.entry(file).or_insert_with_key(|file| {
            match crate::store::ledger::read(file, crate::store::COLLECTION_VERSION) {
                Ok(read) => read
                    .lines
                    .iter()
                    .map(|v| {
                        let nums = |k: &str| -> Vec<u64> {
                            v[k].as_array()
                                .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                                .unwrap_or_default()
                        };
                        let strs: Vec<String> = v["paths"]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(|x| x.as_str().map(str::to_owned))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (nums("seqs"), strs)
                    })
                    .collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "signatures unreadable; --path cannot name their files");
                    Vec::new()
                }
            }
        });
        for (seqs, paths) in lines.iter() {
            if seqs.iter().any(|s| (lo..=hi).contains(s)) {
                out.extend(paths.iter().map(|p| file_key(p)));
            }
        }
        out
    }
}

/// The collection (signature ledger) of `session` for a document in `folder`:
/// `.dsh-chapters/<root>/chapters` → `.dsh-chapters/<root>/collections/<session>.jsonl`,
/// `.dsh-knowledge/chapters/<pk>/<root>` → `.dsh-knowledge/collections/<pk>/<session>.jsonl`.
fn collection_file(workspace: &Path, folder: &str, session: &str) -> Option<PathBuf> {
    if !crate::store::is_safe_component(session) {
        return None;
    }
    let name = format!("{session}.jsonl");
    let parts: Vec<&str> = folder.split('/').collect();
    match parts.as_slice() {
        [store, root, "chapters"] if *store == crate::store::STORE_DIR => Some(
            workspace
                .join(store)
                .join(root)
                .join("collections")
                .join(name),
        ),
        [mirror, "chapters", pk, _root] if *mirror == crate::store::MIRROR_DIR => Some(
            workspace
                .join(mirror)
                .join("collections")
                .join(pk)
                .join(name),
        ),
        _ => None,
    }
}

/// The artifacts a chapter references, as documents of kind `artifact`: the tool output
/// as body, titled after the chapter, with its date, session, project and harness.
fn artifact_entries(
    reader: &Reader,
    folder: &str,
    doc: &TableDoc,
    meta: &DocMeta,
    extra: &Extra,
) -> Vec<Redacted<Entry>> {
    let mut out = Vec::new();
    if meta.kind == ARTIFACT_KIND {
        return out;
    }
    let parts: Vec<&str> = folder.split('/').collect();
    let dir = match parts.as_slice() {
        [store, root, "chapters"] if *store == crate::store::STORE_DIR => {
            format!("{store}/{root}/artifacts")
        }
        [mirror, "chapters", pk, _root] if *mirror == crate::store::MIRROR_DIR => {
            format!("{mirror}/artifacts/{pk}")
        }
        _ => return out,
    };
    for sha in &extra.artifacts {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let sha = sha.to_ascii_lowercase();
        let path = format!("{dir}/{}/{sha}.txt", &sha[..2]);
        let Ok(bytes) = reader.bytes(Path::new(&path)) else {
            continue;
        };
        let text = String::from_utf8_lossy(bytes.get());
        let mut end = text.len().min(MAX_BODY_BYTES);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let artifact_meta = DocMeta {
            title: format!("Artifact of: {}", meta.title),
            summary: String::new(),
            kind: ARTIFACT_KIND.to_owned(),
            project_key: meta.project_key.clone(),
            topics: Vec::new(),
            date: meta.date.clone(),
            session_id: meta.session_id.clone(),
            seq_range: None,
            id: None,
        };
        out.push(reader.read_back(Entry {
            doc: TableDoc {
                path,
                root: doc.root.clone(),
                name: format!("{sha}.txt"),
                blob: sha.clone(),
                meta: artifact_meta.clone(),
            },
            meta: artifact_meta,
            extra: Extra {
                harness: extra.harness.clone(),
                harness_id: extra.harness_id.clone(),
                ..Extra::default()
            },
            body: text[..end].to_owned(),
            files: BTreeSet::new(),
        }));
    }
    out
}

/// A document's frontmatter fields the table does not keep, and its body (bounded), read
/// through the store's reader; an unreadable file (removed since the table read it) has
/// neither.
fn read_body(reader: &Reader, rel: &str) -> Redacted<(Extra, String)> {
    match reader.bytes(Path::new(rel)) {
        Ok(bytes) => bytes.derive(|bytes| parse_body(bytes)),
        Err(_) => reader.read_back((Extra::default(), String::new())),
    }
}

/// A body without the `# title` and `> summary` lines a chapter starts with, when they
/// repeat the title and summary word for word (both are indexed in their own columns):
/// indexed twice they only made the cache larger.
fn without_head<'a>(body: &'a str, title: &str, summary: &str) -> &'a str {
    fn words(text: &str) -> impl Iterator<Item = String> + '_ {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
    }
    let mut rest = body;
    for (mark, field) in [("# ", title), ("> ", summary)] {
        let trimmed = rest.trim_start_matches(['\n', '\r']);
        let (line, after) = trimmed.split_once('\n').unwrap_or((trimmed, ""));
        let Some(text) = line.strip_prefix(mark) else {
            break;
        };
        if field.is_empty() || !words(text).eq(words(field)) {
            break;
        }
        rest = after;
    }
    rest
}

fn parse_body(bytes: &[u8]) -> (Extra, String) {
    let text = String::from_utf8_lossy(bytes);
    let extra = crate::render::frontmatter_text(&text)
        .and_then(|y| serde_saphyr::from_str::<Extra>(y).ok())
        .unwrap_or_default();
    (extra, stored_body(&text).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_text_is_cut_into_fts5s_tokens_and_other_text_is_left_to_fts5() {
        assert_eq!(
            ascii_tokens("**Tool call** `bash` · E0599: case_0042—x"),
            Some(vec!["Tool", "call", "bash", "E0599", "case", "0042", "x"])
        );
        // A letter outside ASCII (its token class and folding are FTS5's to say).
        assert_eq!(ascii_tokens("café"), None);
        assert_eq!(ascii_tokens("数据"), None);
        assert_eq!(
            phrase_tokens("\"brasu\" *"),
            Some((vec!["brasu".to_owned()], true))
        );
        assert_eq!(
            phrase_tokens("\"case_0042\""),
            Some((vec!["case".to_owned(), "0042".to_owned()], false))
        );
        assert_eq!(phrase_tokens("\"__\""), None);
        let tokens = ["a", "A", "a", "Brasuka", "b"];
        let a = ["a".to_owned(), "a".to_owned()];
        assert_eq!(phrase_count(&tokens, &a, false), 2, "overlapping starts");
        assert_eq!(phrase_count(&tokens, &["bras".to_owned()], true), 1);
        assert_eq!(phrase_count(&tokens, &["bras".to_owned()], false), 0);
        assert_eq!(
            varints(&[131, 86, 14, 17, 6, 0]),
            Some(vec![470, 14, 17, 6, 0])
        );
        assert_eq!(varints(&[131]), None);
    }

    #[test]
    fn the_body_is_the_first_full_text_column() {
        // Any other column costs two bytes in each of its (term, document) entries.
        let conn = Connection::open_in_memory().expect("memory");
        conn.execute_batch(SCHEMA).expect("schema");
        let first: String = conn
            .query_row(
                "SELECT name FROM pragma_table_info('fts') WHERE cid = 0",
                [],
                |r| r.get(0),
            )
            .expect("column 0");
        assert_eq!(first, "body");
    }

    #[test]
    fn a_varint_reads_as_sqlite_writes_it_and_a_cut_one_is_none() {
        assert_eq!(varint(&[0x05, 0xff]), Some(5));
        assert_eq!(varint(&[0x86, 0x8d, 0x20]), Some(100_000));
        assert_eq!(varint(&[0xff; 9]), None, "negative");
        assert_eq!(varint(&[0x81; 8]), None, "cut short");
        assert_eq!(varint(&[]), None);
    }

    #[test]
    fn the_repeated_title_and_summary_lines_are_not_indexed_twice() {
        let body = "# Fix the `CSV` header\n\n> Export \\*quoted\\* rows\n\n**User** · seq 1\n";
        assert_eq!(
            without_head(body, "Fix the CSV header", "Export *quoted* rows"),
            "\n**User** · seq 1\n"
        );
        // Only a line repeating its field word for word is left out.
        assert_eq!(without_head(body, "Fix the header", "x"), body);
        assert_eq!(
            without_head(body, "Fix the CSV header", "other"),
            "\n> Export \\*quoted\\* rows\n\n**User** · seq 1\n"
        );
        assert_eq!(
            without_head("plain text\n", "plain text", ""),
            "plain text\n"
        );
        assert_eq!(without_head("", "t", "s"), "");
    }

    #[test]
    fn short_ids_and_numbers() {
        assert_eq!(file_number("003-fix.md"), Some(3));
        assert_eq!(file_number("plan-012-x.md"), Some(12));
        assert_eq!(file_number("notes.md"), None);
        assert_eq!(
            short_id("session-5151abcd-1111", "003-fix.md", "p"),
            "5151abcd/3"
        );
        assert_eq!(
            short_id("session-5151abcd-1111", "plan-002-x.md", "p"),
            "5151abcd/p2"
        );
        assert_eq!(short_id("rules", "001-x.md", "r/p.md"), "r/p.md");
        // An artifact's name starts with hex digits, not a number: its id is its path.
        assert_eq!(
            short_id("session-5151abcd-1111", "6228b4f4.txt", "a/6228b4f4.txt"),
            "a/6228b4f4.txt"
        );
    }

    #[test]
    fn file_keys_and_where_signatures_live() {
        assert_eq!(file_key("./src\\Export/CSV.rs/"), "src/export/csv.rs");
        assert_eq!(file_key("  Dockerfile "), "dockerfile");
        let ws = Path::new("/w");
        assert_eq!(
            collection_file(ws, ".dsh-chapters/session-a/chapters", "session-b"),
            Some(PathBuf::from(
                "/w/.dsh-chapters/session-a/collections/session-b.jsonl"
            ))
        );
        assert_eq!(
            collection_file(ws, ".dsh-knowledge/chapters/pk/session-a", "session-a"),
            Some(PathBuf::from(
                "/w/.dsh-knowledge/collections/pk/session-a.jsonl"
            ))
        );
        assert_eq!(collection_file(ws, ".dsh-chapters/rules", "s"), None);
        assert_eq!(
            collection_file(ws, ".dsh-chapters/session-a/chapters", "../x"),
            None
        );
    }

    #[test]
    fn the_path_filter_compares_whole_trailing_components() {
        let (clause, args) = filter_sql(&Filters {
            narrowing: Narrowing {
                path: Some("export/csv_1.rs".into()),
                ..Narrowing::default()
            },
            include_mirror: true,
            ..Filters::default()
        });
        assert!(clause.contains("FROM files f"), "{clause}");
        assert!(clause.contains("d.kind != 'artifact'"), "{clause}");
        assert_eq!(
            args,
            vec![
                rusqlite::types::Value::from("csv_1.rs".to_owned()),
                rusqlite::types::Value::from("export/csv_1.rs".to_owned()),
                rusqlite::types::Value::from("%/export/csv\\_1.rs".to_owned()),
            ]
        );
        let (clause, _) = filter_sql(&Filters {
            narrowing: Narrowing {
                kind: Some("Artifact".into()),
                ..Narrowing::default()
            },
            ..Filters::default()
        });
        assert!(!clause.contains("!= 'artifact'"), "{clause}");
    }
}

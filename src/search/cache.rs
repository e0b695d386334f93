//! The search cache (shell): every document's catalog row and full text in SQLite with FTS5,
//! at `<store>/.search/fts.sqlite3` beside the search table (`index::table`).
//!
//! Derived and disposable. It records the table revision ([`TableRev`]) it was filled from;
//! a search brings it up to date by re-reading only the folders the table's change log names
//! since then (the table follows the store's change journal and the pool mirror), in one
//! SQLite transaction (WAL): killed mid-update, the cache is the one before. Deleted, garbage,
//! another program's database (`application_id`), or another cache format (`user_version`):
//! it is deleted and built again from the table. Where it cannot be written (a read-only
//! filesystem) it is built in memory for this one search.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};
use serde::Deserialize;

use crate::index::table::{folder_of, Table, TableDoc, TableError, TableRev, TABLE_DIR};
use crate::redact::Redacted;
use crate::search::query::cjk_bigrams;
use crate::search::DocMeta;
use crate::store::read::Reader;

pub const CACHE_FILE: &str = "fts.sqlite3";
/// Bumped whenever the schema or what is indexed changes: an older or newer cache is rebuilt.
pub const CACHE_VERSION: i64 = 1;
/// `PRAGMA application_id` of this cache ("dshs"): anything else in its place is not ours.
const APPLICATION_ID: i64 = 0x6473_6873;
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

/// The filters a search or a listing applies to catalog rows.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub kind: Option<String>,
    pub harness: Option<String>,
    pub machine: Option<String>,
    pub session: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    /// A file named in the document (its path appears in the text).
    pub path: Option<String>,
    /// `Some(pk)`: this project's documents only.
    pub project_key: Option<String>,
    pub include_mirror: bool,
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
  mirror INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_folder ON docs(folder);
CREATE INDEX IF NOT EXISTS docs_date ON docs(date_ms);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
  title, summary, topics, body,
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
        if !path.is_file() {
            return Ok(None);
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(busy)?;
        let app: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if app != APPLICATION_ID || version != CACHE_VERSION {
            return Ok(None);
        }
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
        let folders: BTreeMap<String, Vec<Redacted<TableDoc>>> = match changes {
            Some(changes) => {
                let mut out = BTreeMap::new();
                for c in changes {
                    if let std::collections::btree_map::Entry::Vacant(e) = out.entry(c.folder) {
                        let docs = table.docs_in_folder(e.key())?;
                        e.insert(docs);
                    }
                }
                out
            }
            None => {
                tx.execute_batch("DELETE FROM fts; DELETE FROM docs;")
                    .map_err(&err)?;
                let mut out: BTreeMap<String, Vec<Redacted<TableDoc>>> = BTreeMap::new();
                for doc in table.all_docs()? {
                    out.entry(folder_of(&doc.path).to_owned())
                        .or_default()
                        .push(doc);
                }
                out
            }
        };
        let mut written = 0;
        let reader = Reader::new(workspace);
        {
            let mut ids = tx
                .prepare("SELECT id FROM docs WHERE folder = ?1")
                .map_err(&err)?;
            let mut del_fts = tx
                .prepare("DELETE FROM fts WHERE rowid = ?1")
                .map_err(&err)?;
            let mut del_doc = tx.prepare("DELETE FROM docs WHERE id = ?1").map_err(&err)?;
            let mut ins_doc = tx
                .prepare(
                    "INSERT INTO docs(path, folder, root, name, blob, kind, title, summary, topics, date, date_ms,
                       session, seq_lo, seq_hi, rule_id, project_key, harness, machine, mirror)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
                )
                .map_err(&err)?;
            let mut ins_fts = tx
                .prepare("INSERT INTO fts(rowid, title, summary, topics, body) VALUES (?1, ?2, ?3, ?4, ?5)")
                .map_err(&err)?;
            for (folder, docs) in &folders {
                let old: Vec<i64> = ids
                    .query_map([folder], |r| r.get(0))
                    .map_err(&err)?
                    .collect::<Result<_, _>>()
                    .map_err(&err)?;
                for id in old {
                    del_fts.execute([id]).map_err(&err)?;
                    del_doc.execute([id]).map_err(&err)?;
                }
                for doc in docs {
                    let read = read_body(&reader, &doc.path);
                    insert_doc(&tx, &mut ins_doc, &mut ins_fts, folder, doc, read).map_err(&err)?;
                    written += 1;
                }
            }
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

    /// Documents matching an FTS5 expression (over title, summary, topics and body) and
    /// the filters: (path, body BM25 as a positive number, larger is better).
    pub fn matching(
        &self,
        expr: &str,
        filters: &Filters,
    ) -> Result<Vec<(String, f64)>, CacheError> {
        let (clause, args) = filter_sql(filters);
        let q = format!(
            "SELECT d.path, -bm25(fts, 0.0, 0.0, 0.0, 1.0) FROM fts JOIN docs d ON d.id = fts.rowid
             WHERE fts MATCH ?{clause}"
        );
        let mut stmt = self.conn.prepare(&q).map_err(self.err())?;
        let mut all: Vec<rusqlite::types::Value> = vec![expr.to_owned().into()];
        all.extend(args);
        let rows = stmt
            .query_map(rusqlite::params_from_iter(all), |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?))
            })
            .map_err(self.err())?;
        let mut out: Vec<(String, f64)> = rows.collect::<Result<_, _>>().map_err(self.err())?;
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The paths of documents matching an FTS5 expression (no filters).
    pub fn paths_matching(
        &self,
        expr: &str,
    ) -> Result<std::collections::BTreeSet<String>, CacheError> {
        Ok(self
            .matching(
                expr,
                &Filters {
                    include_mirror: true,
                    ..Filters::default()
                },
            )?
            .into_iter()
            .map(|(p, _)| p)
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
        Some(n) if root != crate::rules::store::RULES_DIR && !prefix.is_empty() => {
            if name.starts_with("plan-") {
                format!("{prefix}/p{n}")
            } else {
                format!("{prefix}/{n}")
            }
        }
        _ => path.to_owned(),
    }
}

const ROW_COLUMNS: &str = "d.path, d.root, d.name, d.blob, d.kind, d.title, d.summary, d.topics, d.date, d.session, d.seq_lo, d.seq_hi, d.rule_id, d.project_key, d.harness, d.machine, d.date_ms, d.mirror";

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
    eq(&mut clause, "kind", &f.kind, &mut args);
    eq(&mut clause, "harness", &f.harness, &mut args);
    eq(&mut clause, "machine", &f.machine, &mut args);
    eq(&mut clause, "project_key", &f.project_key, &mut args);
    if let Some(s) = &f.session {
        clause.push_str(" AND (d.session LIKE ? ESCAPE '\\' OR d.root LIKE ? ESCAPE '\\' OR d.root LIKE ? ESCAPE '\\')");
        let esc = s
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        args.push(format!("{esc}%").into());
        args.push(format!("{esc}%").into());
        args.push(format!("session-{esc}%").into());
    }
    if let Some(ms) = f.since_ms {
        clause.push_str(" AND d.date_ms >= ?");
        args.push(ms.into());
    }
    if let Some(ms) = f.until_ms {
        clause.push_str(" AND d.date_ms < ?");
        args.push(ms.into());
    }
    if !f.include_mirror {
        clause.push_str(" AND d.mirror = 0");
    }
    if let Some(p) = &f.path {
        // A file the document names: its path as a phrase of the text's words.
        let words: Vec<String> = p
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        if !words.is_empty() {
            clause.push_str(" AND d.id IN (SELECT rowid FROM fts WHERE fts MATCH ?)");
            args.push(format!("body : \"{}\"", words.join(" ")).into());
        }
    }
    (clause, args)
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Extra {
    #[serde(default)]
    harness: Option<String>,
    #[serde(default)]
    harness_id: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    seq_range: Option<(u64, u64)>,
}

/// One document's catalog row and full text. Both inputs are `Redacted`: the table's
/// record and the document as the store's reader read it — raw text cannot reach the cache.
fn insert_doc(
    tx: &rusqlite::Transaction<'_>,
    ins_doc: &mut rusqlite::Statement<'_>,
    ins_fts: &mut rusqlite::Statement<'_>,
    folder: &str,
    doc: &Redacted<TableDoc>,
    read: Redacted<(Extra, String)>,
) -> Result<(), rusqlite::Error> {
    let (extra, body) = read.get();
    let mut m = doc.meta.clone();
    m.session_id = m.session_id.or(extra.session_id.clone());
    m.seq_range = m.seq_range.or(extra.seq_range);
    let m = &m;
    let date_ms = m.date.as_deref().and_then(super::parse_rfc3339_ms);
    ins_doc.execute(params![
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
    ])?;
    let id = tx.last_insert_rowid();
    ins_fts.execute(params![
        id,
        cjk_bigrams(&m.title),
        cjk_bigrams(&m.summary),
        cjk_bigrams(&m.topics.join(" ")),
        cjk_bigrams(body),
    ])?;
    Ok(())
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

fn parse_body(bytes: &[u8]) -> (Extra, String) {
    let text = String::from_utf8_lossy(bytes);
    let extra = crate::render::frontmatter_text(&text)
        .and_then(|y| serde_saphyr::from_str::<Extra>(y).ok())
        .unwrap_or_default();
    let body = crate::render::body_text(&text).unwrap_or("");
    let mut end = body.len().min(MAX_BODY_BYTES);
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    (extra, body[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}

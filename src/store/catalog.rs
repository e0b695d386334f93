//! The store's catalog, `<store>/.catalog.sqlite3`: one row per document the search table
//! indexes (the archive's chapters and plans, enrichment's re-annotations, rule files, the
//! pool mirror's copies of other machines' documents), keyed by (folder, file name), with the
//! revision of its last change, whether it is present (a removal leaves a *tombstone*) and
//! the (length, mtime) seen when it was recorded. Only [`Store`](super::Store) records in it
//! (the product reaches the recording functions only through `Store`), so a writer cannot forget to.
//!
//! A record is one SQLite transaction (WAL, `synchronous=FULL`, `BEGIN IMMEDIATE`) that gives
//! every file it names one new revision. A reader's cursor is (generation, revision):
//! [`read_since`] answers the documents changed since, grouped by folder, or says "rescan"
//! with its reason whenever it cannot say — no catalog, damaged, another program's, another
//! version, another generation (started over after a writer died holding the writer lock, a
//! forget, documents that left the mirror, a record that failed), a cursor past the end or
//! below the floor (tombstones pruned). The readers then look at every folder, which is also
//! what finds a document no record names (a folder copied in by hand).
//!
//! Bounded: a row per document plus at most [`MAX_TOMBSTONES`] tombstones; past that the
//! oldest are pruned and the floor raised to the newest pruned revision. A record that fails
//! never fails its writer: the catalog is removed (its readers rescan) and that is logged.
//! The change journal it replaces (`.changes.jsonl`, `.changes.lock`) is removed when a
//! catalog is created.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};

pub const CATALOG_FILE: &str = ".catalog.sqlite3";
/// Bumped whenever the schema changes: a catalog of another version is made anew (its
/// readers rescan once).
pub const CATALOG_VERSION: i64 = 3;
/// `PRAGMA application_id` of the catalog ("dshc"): anything else in its place is not ours.
const APPLICATION_ID: i64 = 0x6473_6863;
/// How long a record or a read waits for another process's write transaction.
const BUSY: Duration = Duration::from_secs(10);
/// Tombstones kept before the oldest are pruned (half of them at once).
pub const MAX_TOMBSTONES: i64 = 10_000;
/// Held while a catalog file is made or removed (never while recording or reading).
const CATALOG_LOCK_FILE: &str = ".catalog.lock";
/// The change journal this catalog replaced: removed when a catalog is created.
const OLD_JOURNAL: [&str; 2] = [".changes.jsonl", ".changes.lock"];

/// `meta` keys.
const GENERATION: &str = "generation";
const REVISION: &str = "revision";
const FLOOR: &str = "floor";
/// The generation whose every present store document's metadata was read in one
/// transaction ([`fill`]); absent or another generation: not filled.
const FILLED: &str = "filled";

/// `len` and `mtime_ns` are what a later reader compares a stat with. The metadata
/// (`kind`, `title_model`, `vetted`, `readable`: a [`RowMeta`]) is nullable: `kind` NULL
/// means not known (recorded by a path that did not know it), read from the file, never
/// guessed. `project_key` is the frontmatter's, or the mirror folder's when it names none or
/// the row has no metadata (a document left in the mirror's pack): what status counts by.
const SCHEMA: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE docs (
  folder TEXT NOT NULL,
  name TEXT NOT NULL,
  rev INTEGER NOT NULL,
  present INTEGER NOT NULL,
  len INTEGER,
  mtime_ns INTEGER,
  kind TEXT,
  title_model TEXT,
  vetted TEXT,
  project_key TEXT,
  readable INTEGER,
  PRIMARY KEY (folder, name)
) WITHOUT ROWID;
CREATE INDEX docs_by_rev ON docs (rev);
CREATE INDEX tombstones ON docs (rev) WHERE present = 0;
CREATE TABLE counts (
  area INTEGER NOT NULL,
  project_key TEXT NOT NULL,
  readable INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY (area, project_key, readable)
) WITHOUT ROWID;
CREATE TRIGGER count_in AFTER INSERT ON docs WHEN new.present = 1 BEGIN
  INSERT INTO counts SELECT AREA(new), coalesce(new.project_key, ''), coalesce(new.readable, 2), 0
    WHERE NOT EXISTS (SELECT 1 FROM counts WHERE area = AREA(new)
      AND project_key = coalesce(new.project_key, '') AND readable = coalesce(new.readable, 2));
  UPDATE counts SET n = n + 1 WHERE area = AREA(new) AND project_key = coalesce(new.project_key, '')
    AND readable = coalesce(new.readable, 2);
END;
CREATE TRIGGER count_moved AFTER UPDATE OF present, project_key, readable ON docs
WHEN old.present IS NOT new.present OR old.project_key IS NOT new.project_key
  OR old.readable IS NOT new.readable BEGIN
  UPDATE counts SET n = n - 1 WHERE old.present = 1 AND area = AREA(old)
    AND project_key = coalesce(old.project_key, '') AND readable = coalesce(old.readable, 2);
  INSERT INTO counts SELECT AREA(new), coalesce(new.project_key, ''), coalesce(new.readable, 2), 0
    WHERE new.present = 1 AND NOT EXISTS (SELECT 1 FROM counts WHERE area = AREA(new)
      AND project_key = coalesce(new.project_key, '') AND readable = coalesce(new.readable, 2));
  UPDATE counts SET n = n + 1 WHERE new.present = 1 AND area = AREA(new)
    AND project_key = coalesce(new.project_key, '') AND readable = coalesce(new.readable, 2);
END;
CREATE TRIGGER count_out AFTER DELETE ON docs WHEN old.present = 1 BEGIN
  UPDATE counts SET n = n - 1 WHERE area = AREA(old) AND project_key = coalesce(old.project_key, '')
    AND readable = coalesce(old.readable, 2);
END;
";

/// `counts` (kept by the triggers of [`SCHEMA`], in the transaction that changes a row): the
/// present rows by area (0 the store's folders, 1 the mirror's, 2 any other), project key
/// ('' for none) and `readable` (2 for not known) — status's counts without a scan of a row
/// per document (a scan of 100,000 rows took 80–150 ms). (No `INSERT OR IGNORE` in them: the
/// outer statement's conflict policy would override it.)
fn schema() -> String {
    let area = |row: &str| {
        format!(
            "(CASE WHEN {row}.folder GLOB '{}/*' THEN 0 WHEN {row}.folder GLOB '{}/*' THEN 1 ELSE 2 END)",
            super::STORE_DIR,
            super::MIRROR_DIR
        )
    };
    SCHEMA
        .replace("AREA(new)", &area("new"))
        .replace("AREA(old)", &area("old"))
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("could not use the store's catalog {path}")]
    Sql {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("could not create or replace the store's catalog {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Store(#[from] super::StoreError),
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> CatalogError + '_ {
    move |source| CatalogError::Sql {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a reader stopped: the catalog's generation and the last revision it read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub generation: String,
    pub revision: u64,
}

/// The files of one folder (workspace-relative, as the search table names it) that changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub folder: String,
    pub files: Vec<String>,
}

/// What the catalog says about the time since a cursor.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// Every document changed since the cursor (by folder, then name; each once), and the
    /// cursor to keep.
    Changes { changes: Vec<Change>, end: Cursor },
    /// The catalog cannot say: the reader must rescan every folder.
    Rescan { reason: String },
}

/// Whether the files a record names were written or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    Written,
    Removed,
}

pub fn catalog_path(store_dir: &Path) -> PathBuf {
    store_dir.join(CATALOG_FILE)
}

/// A generation name no earlier one has (also the signed-roots hint's).
pub(crate) fn new_generation() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{ns:x}-{:x}-{:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// The file's identity, to notice a catalog replaced under an open connection.
fn inode(path: &Path) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// An existing SQLite file of this program (`application_id`) in format `version`
/// (`user_version`), opened read-write (never created), or `None` when there is none or it is
/// another program's or another format. Shared with the search cache (`catalog::cache`).
pub(crate) fn open_ours(
    path: &Path,
    busy: Duration,
    application_id: i64,
    version: i64,
) -> Result<Option<Connection>, rusqlite::Error> {
    if !path.is_file() {
        return Ok(None);
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(busy)?;
    let app: i64 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    Ok((app == application_id && found == version).then_some(conn))
}

/// An existing catalog of this version, or `None` when there is none or it is not ours.
fn open_existing(path: &Path) -> Result<Option<Connection>, rusqlite::Error> {
    let Some(conn) = open_ours(path, BUSY, APPLICATION_ID, CATALOG_VERSION)? else {
        return Ok(None);
    };
    // Reading the marks proves the schema is there.
    read_meta(&conn)?;
    conn.query_row("SELECT count(*) FROM docs WHERE rev < 0", [], |r| {
        r.get::<_, i64>(0)
    })?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(Some(conn))
}

/// (generation, revision, floor).
fn read_meta(conn: &Connection) -> rusqlite::Result<(String, u64, u64)> {
    let get = |key: &str| -> rusqlite::Result<String> {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
    };
    let number = |key: &str| -> rusqlite::Result<u64> {
        let text = get(key)?;
        text.parse().map_err(|_| {
            rusqlite::Error::InvalidColumnType(0, key.to_owned(), rusqlite::types::Type::Text)
        })
    };
    Ok((get(GENERATION)?, number(REVISION)?, number(FLOOR)?))
}

fn remove_files(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

fn lock(store_dir: &Path) -> Result<super::lock::BlockingLock, CatalogError> {
    super::lock::BlockingLock::acquire(&store_dir.join(CATALOG_LOCK_FILE))
        .map_err(|e| CatalogError::Store(e.into()))
}

/// Make a new catalog at `path` (a new generation, no rows) unless one is there: built
/// under a temp name and linked into place, the caller holding [`lock`]. A `-wal` left by
/// a removed catalog is removed first: SQLite would replay it into the new file.
fn create(store_dir: &Path, path: &Path) -> Result<(), CatalogError> {
    if path.exists() {
        return Ok(());
    }
    for suffix in ["-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", path.display()));
    }
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    // The store's temp-file pattern, so `Store::lock` clears one a killed process left.
    let temp = store_dir.join(format!(
        ".{CATALOG_FILE}.tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let made = (|| -> Result<(), rusqlite::Error> {
        let conn = Connection::open(&temp)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {} PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {CATALOG_VERSION};",
            schema()
        ))?;
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2), (?3, '0'), (?4, '0')",
            params![GENERATION, new_generation(), REVISION, FLOOR],
        )?;
        conn.execute_batch("COMMIT;")?;
        // Closed cleanly: the WAL is folded into the file, which holds the whole catalog.
        conn.close().map_err(|(_, e)| e)
    })();
    let linked = made.map_err(sql(&temp)).and_then(|()| {
        match fs::hard_link(&temp, path) {
            Ok(()) => Ok(()),
            // Another process made one first: that one is the catalog.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            Err(source) => Err(CatalogError::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    });
    remove_files(&temp);
    linked?;
    super::atomic::sync_dir(store_dir)?;
    for old in OLD_JOURNAL {
        let _ = fs::remove_file(store_dir.join(old));
    }
    Ok(())
}

/// Open the catalog, making it anew when it is absent, damaged, not ours or another version.
fn open_or_create(store_dir: &Path) -> Result<(Connection, Option<(u64, u64)>), CatalogError> {
    let path = catalog_path(store_dir);
    for _ in 0..3 {
        let before = inode(&path);
        match open_existing(&path) {
            Ok(Some(conn)) => return Ok((conn, before)),
            Ok(None) | Err(_) => {
                let _held = lock(store_dir)?;
                // Not ours, damaged or another version: only the file judged so is removed
                // (another process may have just made a good one in its place).
                if before.is_some() && inode(&path) == before {
                    remove_files(&path);
                }
                create(store_dir, &path)?;
            }
        }
    }
    let conn = open_existing(&path)
        .map_err(sql(&path))?
        .ok_or_else(|| CatalogError::Io {
            path: path.clone(),
            source: io::Error::other("was replaced by something not a catalog while opening it"),
        })?;
    Ok((conn, inode(&path)))
}

/// The page cache of the kept recording connection, KiB.
const WRITER_CACHE_KIB: i64 = 256;

/// One row of a record: folder, file name, the (length, mtime in ns) seen, and the
/// document's metadata columns when the writer knows it.
type Row<'a> = (&'a str, &'a str, Option<(u64, i64)>, Option<Columns<'a>>);

/// A document's metadata as a row's `kind`, `title_model` and `vetted` (JSON list) columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Columns<'a> {
    kind: &'a str,
    title_model: Option<&'a str>,
    vetted: &'a str,
    project_key: &'a str,
    readable: bool,
}

/// Many documents' metadata, in order, as their rows' columns back to back in one text: an
/// archive of thousands of documents keeps ~80 bytes each in one block (grown as
/// `names::NameList` grows) instead of a `RowMeta` of about seven blocks each, long-lived
/// among its threads' transient ones (peak memory grew with the session by ~0.4 KiB a
/// document). Built as `Redacted<MetaList>` by `Redacted::absorb` of each `Redacted<RowMeta>`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct MetaList {
    text: String,
    /// Per document, where its `kind`, its `title_model` (when it has one), its `vetted`
    /// and its `project_key` text end in `text`, and whether it is readable.
    ends: Vec<Ends>,
}

/// Where one document's columns end in a [`MetaList`]'s text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ends {
    kind: usize,
    title: Option<usize>,
    vetted: usize,
    project_key: usize,
    readable: bool,
}

impl MetaList {
    /// One document's metadata after the others (a [`Redacted::absorb`](crate::redact::Redacted::absorb) function).
    pub fn push(&mut self, meta: &RowMeta) {
        let vetted = meta.vetted_text();
        let title = meta.title_model.as_deref().unwrap_or("");
        crate::names::reserve_growing(
            &mut self.text,
            meta.kind.len() + title.len() + vetted.len() + meta.project_key.len(),
        );
        self.text.push_str(&meta.kind);
        let kind = self.text.len();
        self.text.push_str(title);
        let title = meta.title_model.as_ref().map(|_| self.text.len());
        self.text.push_str(&vetted);
        let vetted = self.text.len();
        self.text.push_str(&meta.project_key);
        self.ends.push(Ends {
            kind,
            title,
            vetted,
            project_key: self.text.len(),
            readable: meta.readable,
        });
    }

    /// The list of one document's metadata (a [`Redacted::derive`](crate::redact::Redacted::derive) function).
    pub fn of_one(meta: &RowMeta) -> MetaList {
        let mut list = MetaList::default();
        list.push(meta);
        list
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn columns(&self) -> impl Iterator<Item = Columns<'_>> + Clone {
        let mut start = 0;
        self.ends.iter().map(move |e| {
            let after_title = e.title.unwrap_or(e.kind);
            let columns = Columns {
                kind: &self.text[start..e.kind],
                title_model: e.title.map(|end| &self.text[e.kind..end]),
                vetted: &self.text[after_title..e.vetted],
                project_key: &self.text[e.vetted..e.project_key],
                readable: e.readable,
            };
            start = e.project_key;
            columns
        })
    }
}

/// What readers need of a document, read from its redacted text by the one frontmatter
/// reader (`render::frontmatter`: fast for the writers' shapes, YAML otherwise): a row's
/// `kind`, `title_model` and `vetted` columns. A record takes it only as `Redacted<RowMeta>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowMeta {
    /// What the frontmatter's `kind` says (`chapter`, `plan`, …); `other` when the
    /// document has no frontmatter the reader reads, or names no kind.
    pub kind: String,
    /// The model that wrote its title, when one did.
    pub title_model: Option<String>,
    /// Its topics the vocabulary vetted: `topics` minus `topicsUnvetted`, in order.
    pub vetted: Vec<String>,
    /// The frontmatter's `projectKey` (empty when it names none).
    pub project_key: String,
    /// Whether it is a document the search table reads (a frontmatter within the bound —
    /// `render::frontmatter::bounded_head` — that either reader takes); the rest it counts
    /// unreadable.
    pub readable: bool,
}

impl RowMeta {
    /// The metadata of a document's text (a `Redacted::derive` function, hence `&String`).
    #[allow(clippy::ptr_arg)]
    pub fn read(text: &String) -> RowMeta {
        RowMeta::of_text(text)
    }

    /// The metadata of a file's bytes; not UTF-8 is no readable frontmatter.
    #[allow(clippy::ptr_arg)]
    pub fn of_bytes(bytes: &Vec<u8>) -> RowMeta {
        std::str::from_utf8(bytes).map_or_else(|_| RowMeta::other(), RowMeta::of_text)
    }

    fn of_text(text: &str) -> RowMeta {
        use crate::render::frontmatter::{bounded_head, read, Head};
        let Some(yaml) = crate::render::frontmatter_text(text) else {
            return RowMeta::other();
        };
        match read(yaml).map_or_else(|| Head::parse_yaml(yaml), Ok) {
            Ok(head) => {
                let mut meta = RowMeta::of_head(head);
                // The search table's bound: a frontmatter it does not buffer is unreadable.
                meta.readable = bounded_head(text.as_bytes()).is_ok();
                meta
            }
            Err(_) => RowMeta::other(),
        }
    }

    /// Not a document: no frontmatter a reader takes.
    fn other() -> RowMeta {
        RowMeta {
            kind: "other".into(),
            title_model: None,
            vetted: Vec::new(),
            project_key: String::new(),
            readable: false,
        }
    }

    fn of_head(head: crate::render::frontmatter::Head) -> RowMeta {
        let Some(kind) = head.kind else {
            // The original plugin's chapters name no kind: a document all the same.
            return RowMeta {
                project_key: head.project_key,
                readable: true,
                ..RowMeta::other()
            };
        };
        // A model's label stays unvetted until the vocabulary takes it in.
        let vetted = head
            .topics
            .into_iter()
            .filter(|t| !head.topics_unvetted.contains(t))
            .collect();
        RowMeta {
            kind,
            title_model: head.title_model,
            vetted,
            project_key: head.project_key,
            readable: true,
        }
    }

    /// The `vetted` column's text (a JSON list).
    fn vetted_text(&self) -> String {
        serde_json::to_string(&self.vetted).expect("a list of strings always serializes")
    }

    /// From a row's columns; `None` when the row does not know (`kind` NULL) or its
    /// `vetted` is not a list (then the file is read).
    fn from_columns(
        kind: Option<String>,
        title_model: Option<String>,
        vetted: Option<String>,
        project_key: Option<String>,
        readable: Option<bool>,
    ) -> Option<RowMeta> {
        let vetted = serde_json::from_str(vetted.as_deref()?).ok()?;
        Some(RowMeta {
            kind: kind?,
            title_model,
            vetted,
            project_key: project_key.unwrap_or_default(),
            readable: readable?,
        })
    }
}

/// A document of the store as [`fill`] found it on disk: its folder (workspace-relative),
/// name, (length, mtime) and metadata.
pub(crate) struct Found {
    pub folder: String,
    pub name: String,
    pub seen: Option<(u64, i64)>,
    /// `None`: a document left in the mirror's pack (not read: its row's metadata stays
    /// unknown, as the sync recorded it).
    pub meta: Option<crate::redact::Redacted<RowMeta>>,
}

/// The (length, mtime in ns) a record keeps of a file.
pub(crate) fn seen(meta: &fs::Metadata) -> (u64, i64) {
    (meta.len(), meta.mtime() * 1_000_000_000 + meta.mtime_nsec())
}

/// A store's connection for recording, opened on first use and kept. Crate-visible for the
/// test kit only: the product records through `Store` (`tests/it/shape.rs` checks it).
#[derive(Default)]
pub(crate) struct Writer {
    /// The connection and the identity of the file it opened.
    open: Option<Opened>,
    path: PathBuf,
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.close();
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("catalog::Writer")
    }
}

/// Close `conn` (opened on the file `ino` at `path`) — unless its file was replaced
/// meanwhile: closing the last connection to a database makes SQLite delete its `-wal` *by
/// name*, which is now the new catalog's. That connection is left open instead (a
/// descriptor until exit).
fn close_conn(conn: Connection, ino: Option<(u64, u64)>, path: &Path) {
    if ino != inode(path) {
        std::mem::forget(conn);
    }
}

/// A connection and the identity of the file it opened.
type Opened = (Connection, Option<(u64, u64)>);

/// Open (or create) the catalog for recording, its page cache bounded.
fn open_for_recording(store_dir: &Path) -> Result<Opened, CatalogError> {
    let path = catalog_path(store_dir);
    let (conn, ino) = open_or_create(store_dir)?;
    // A negative size is in KiB (SQLite's default, 2,000 KiB, held a page of the whole
    // catalog: an archive's one record of thousands of rows grew the run's peak memory by
    // the catalog's size). Past it, a transaction's pages spill to the WAL.
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)
        .map_err(sql(&path))?;
    Ok((conn, ino))
}

/// A recording connection opened ahead of its record, on another thread
/// ([`OpenedAhead::start`]): an archive opens the catalog — and makes it, with its
/// fsyncs, in a workspace that has none — while it reads and writes, instead of after its
/// commit line, when the run waits for nothing else. It records nothing: the record still
/// comes after the documents and the commit line are durable ([`Writer::adopt`]).
pub(crate) struct OpenedAhead {
    thread: std::thread::JoinHandle<Option<Opened>>,
}

impl OpenedAhead {
    /// Start opening the catalog of `store_dir`; `None` when no thread could be started
    /// (the record opens it itself).
    pub(crate) fn start(store_dir: &Path) -> Option<OpenedAhead> {
        let store_dir = store_dir.to_path_buf();
        std::thread::Builder::new()
            .name("catalog-open".into())
            .spawn(move || match open_for_recording(&store_dir) {
                Ok(opened) => Some(opened),
                Err(e) => {
                    // The record opens it again and reports what it finds.
                    tracing::debug!(error = %e, "could not open the catalog ahead");
                    None
                }
            })
            .ok()
            .map(|thread| OpenedAhead { thread })
    }
}

impl Writer {
    /// Close the connection (see [`close_conn`]).
    fn close(&mut self) {
        if let Some((conn, ino)) = self.open.take() {
            close_conn(conn, ino, &self.path);
        }
    }

    /// Whether a connection is kept (a record would not open one).
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// Take the connection `ahead` opened for the next record of `store_dir` (kept as if
    /// this writer had opened it; a connection already kept wins, the other is closed).
    pub(crate) fn adopt(&mut self, store_dir: &Path, ahead: OpenedAhead) {
        let Ok(Some((conn, ino))) = ahead.thread.join() else {
            return;
        };
        let path = catalog_path(store_dir);
        if self.open.is_some() && self.path == path {
            close_conn(conn, ino, &path);
            return;
        }
        self.close();
        self.path = path;
        self.open = Some((conn, ino));
    }

    /// Record that `changes` (folder, file names) were written or removed — after they were
    /// and their directories synced. Never fails its writer: when the record cannot be made
    /// the catalog is removed (its readers rescan) and the failure is logged.
    pub(crate) fn record(
        &mut self,
        store_dir: &Path,
        changes: &[(&str, &[&str])],
        presence: Presence,
    ) {
        let docs: Vec<(&str, &str, Option<&crate::redact::Redacted<RowMeta>>)> = changes
            .iter()
            .flat_map(|(folder, files)| files.iter().map(move |name| (*folder, *name, None)))
            .collect();
        self.record_documents(store_dir, &docs, presence);
    }

    /// [`Writer::record`] of documents (folder, name) each with its metadata when the
    /// writer knows it (`None`: the row's metadata becomes unknown, read from the file).
    pub(crate) fn record_documents(
        &mut self,
        store_dir: &Path,
        docs: &[(&str, &str, Option<&crate::redact::Redacted<RowMeta>>)],
        presence: Presence,
    ) {
        let vetted: Vec<Option<String>> = docs
            .iter()
            .map(|(_, _, meta)| meta.map(|m| m.vetted_text()))
            .collect();
        let docs = docs
            .iter()
            .zip(&vetted)
            .map(|((folder, name, meta), vetted)| {
                let columns = meta.zip(vetted.as_deref()).map(|(m, vetted)| Columns {
                    kind: &m.kind,
                    title_model: m.title_model.as_deref(),
                    vetted,
                    project_key: &m.project_key,
                    readable: m.readable,
                });
                (*folder, *name, columns)
            });
        self.record_rows(store_dir, docs, presence);
    }

    /// [`Writer::record_documents`] of the documents a group wrote into `folder`: their
    /// names and metadata in the same order.
    pub(crate) fn record_listed(
        &mut self,
        store_dir: &Path,
        folder: &str,
        names: &crate::names::NameList,
        metas: &crate::redact::Redacted<MetaList>,
    ) {
        debug_assert_eq!(names.len(), metas.len(), "a name per metadata");
        let docs = names
            .iter()
            .zip(metas.columns())
            .map(|(name, columns)| (folder, name, Some(columns)));
        self.record_rows(store_dir, docs, Presence::Written);
    }

    fn record_rows<'a>(
        &mut self,
        store_dir: &Path,
        docs: impl Iterator<Item = (&'a str, &'a str, Option<Columns<'a>>)> + Clone,
        presence: Presence,
    ) {
        // Stat outside the transaction: no file I/O while holding SQLite's write lock. Only
        // what was seen is collected (24 bytes a document): the rows are made from `docs`
        // again as they are written.
        let workspace = store_dir.parent().unwrap_or(store_dir);
        let seen: Vec<Option<(u64, i64)>> = docs
            .clone()
            .map(|(folder, name, _)| match presence {
                Presence::Written => fs::metadata(workspace.join(folder).join(name))
                    .ok()
                    .map(|m| seen(&m)),
                Presence::Removed => None,
            })
            .collect();
        if seen.is_empty() {
            return;
        }
        let rows = docs
            .zip(&seen)
            .map(|((folder, name, columns), seen)| (folder, name, *seen, columns));
        let path = catalog_path(store_dir);
        self.path.clone_from(&path);
        let mut outcome = self.try_record(store_dir, rows.clone(), presence);
        // The file was replaced under the connection (removed after a failure elsewhere,
        // made anew by another process): the record went to a file no reader opens.
        if outcome.is_ok() && self.open.as_ref().map(|(_, ino)| *ino) != Some(inode(&path)) {
            self.close();
            outcome = self.try_record(store_dir, rows, presence);
        }
        if let Err(e) = outcome {
            self.close();
            fail(store_dir, &path, &e);
        }
    }

    fn try_record<'a>(
        &mut self,
        store_dir: &Path,
        rows: impl Iterator<Item = Row<'a>>,
        presence: Presence,
    ) -> Result<(), CatalogError> {
        let path = catalog_path(store_dir);
        if self
            .open
            .as_ref()
            .is_some_and(|(_, ino)| *ino != inode(&path))
        {
            self.close();
        }
        let (conn, _) = match &mut self.open {
            Some(open) => open,
            None => self.open.insert(open_for_recording(store_dir)?),
        };
        write_rows(conn, rows, presence).map_err(sql(&path))
    }
}

/// A row's `project_key`: the frontmatter's, else the mirror folder's (the original
/// TypeScript plugin writes none; a document left in the pack has no metadata here).
fn row_project_key<'a>(folder: &'a str, frontmatter: Option<&'a str>) -> Option<&'a str> {
    frontmatter
        .filter(|pk| !pk.is_empty())
        .or_else(|| super::mirror_folder_project_key(folder))
        .or(frontmatter)
}

/// One transaction: every row the next revision; tombstones pruned past the bound.
fn write_rows<'a>(
    conn: &mut Connection,
    rows: impl Iterator<Item = Row<'a>>,
    presence: Presence,
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let (_, revision, _) = read_meta(&tx)?;
    let revision = revision + 1;
    {
        let mut upsert = tx.prepare_cached(
            "INSERT INTO docs (folder, name, rev, present, len, mtime_ns, kind, title_model, vetted,
               project_key, readable)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT (folder, name) DO UPDATE SET rev = excluded.rev, present = excluded.present,
               len = excluded.len, mtime_ns = excluded.mtime_ns, kind = excluded.kind,
               title_model = excluded.title_model, vetted = excluded.vetted,
               project_key = excluded.project_key, readable = excluded.readable",
        )?;
        for (folder, name, seen, meta) in rows {
            let written = presence == Presence::Written;
            upsert.execute(params![
                folder,
                name,
                revision as i64,
                i64::from(written),
                seen.map(|(len, _)| len as i64),
                seen.map(|(_, mtime)| mtime),
                meta.map(|m| m.kind),
                meta.and_then(|m| m.title_model),
                meta.map(|m| m.vetted),
                written
                    .then(|| row_project_key(folder, meta.map(|m| m.project_key)))
                    .flatten(),
                meta.map(|m| m.readable),
            ])?;
        }
    }
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = ?2",
        params![revision.to_string(), REVISION],
    )?;
    if presence == Presence::Removed {
        prune(&tx)?;
    }
    tx.commit()
}

/// Past [`MAX_TOMBSTONES`], drop the oldest half and raise the floor to the newest dropped
/// revision: a cursor below it might miss a removal, so it is answered "rescan".
fn prune(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let count: i64 = tx.query_row("SELECT count(*) FROM docs WHERE present = 0", [], |r| {
        r.get(0)
    })?;
    if count <= MAX_TOMBSTONES {
        return Ok(());
    }
    let cut: Option<i64> = tx
        .query_row(
            "SELECT rev FROM docs WHERE present = 0 ORDER BY rev LIMIT 1 OFFSET ?1",
            [count - MAX_TOMBSTONES / 2 - 1],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(cut) = cut {
        tx.execute("DELETE FROM docs WHERE present = 0 AND rev <= ?1", [cut])?;
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = ?2",
            params![cut.to_string(), FLOOR],
        )?;
    }
    Ok(())
}

/// A record that failed: the catalog goes, so its readers rescan instead of trusting it.
fn fail(store_dir: &Path, path: &Path, error: &CatalogError) {
    let _held = lock(store_dir);
    // The log line says the whole chain, each cause once: the cause is what a person can
    // act on.
    super::atomic::drop_failed_hint(
        path,
        error,
        "could not record a change in the store's catalog; removed it, so its readers rescan the store",
        "could not record a change in the store's catalog nor remove it; the next periodic rescan finds the change",
    );
    for suffix in ["-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// Start the catalog over: a new generation, so every reader's cursor is answered "rescan"
/// (a writer died holding the writer lock, a forget, documents that left the mirror).
/// Returns the cursor at its end.
pub(crate) fn start_over(store_dir: &Path) -> Result<Cursor, CatalogError> {
    new_generation_of(store_dir, false)
}

/// [`start_over`] after a person took documents back (`chapters forget`): every row goes with
/// the old generation — not tombstoned: every reader's cursor is of the old generation, so
/// each rescans, and the fill records what is there — with SQLite's `secure_delete` on and the
/// write-ahead log checkpointed and truncated, so no page of the catalog keeps a forgotten
/// chapter's topics (where a secret yesterday's rules missed can be) or names.
pub(crate) fn start_over_forgetting(store_dir: &Path) -> Result<Cursor, CatalogError> {
    new_generation_of(store_dir, true)
}

/// A new generation of the catalog; with `forgetting`, no byte of the old rows kept.
fn new_generation_of(store_dir: &Path, forgetting: bool) -> Result<Cursor, CatalogError> {
    let path = catalog_path(store_dir);
    let (conn, _) = open_or_create(store_dir)?;
    let generation = new_generation();
    let revision = (|| -> rusqlite::Result<u64> {
        if forgetting {
            conn.pragma_update(None, "secure_delete", "ON")?;
        }
        let tx = conn.unchecked_transaction()?;
        if forgetting {
            tx.execute("DELETE FROM docs", [])?;
        }
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = ?2",
            params![generation, GENERATION],
        )?;
        let (_, revision, _) = read_meta(&tx)?;
        tx.commit()?;
        if forgetting {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        Ok(revision)
    })()
    .map_err(sql(&path))?;
    Ok(Cursor {
        generation,
        revision,
    })
}

/// A connection for reading, or why there is none.
fn open_for_reading(store_dir: &Path) -> Result<Connection, String> {
    let path = catalog_path(store_dir);
    if !path.exists() {
        return Err(format!("{} is missing", path.display()));
    }
    match open_existing(&path) {
        Ok(Some(conn)) => Ok(conn),
        Ok(None) => Err(format!(
            "{} is not a catalog of this version",
            path.display()
        )),
        Err(e) => Err(format!("{} is damaged: {e}", path.display())),
    }
}

/// The current generation and revision: where a reader that is about to rescan everything
/// starts its cursor. `None` when there is no usable catalog.
pub fn current(store_dir: &Path) -> Option<Cursor> {
    let conn = open_for_reading(store_dir).ok()?;
    let (generation, revision, _) = read_meta(&conn).ok()?;
    Some(Cursor {
        generation,
        revision,
    })
}

/// The catalog's end, made when there is none or it is unusable (without starting a usable
/// one over: other readers' cursors stay answerable). For a reader about to list everything.
pub fn end(store_dir: &Path) -> Result<Cursor, CatalogError> {
    let path = catalog_path(store_dir);
    let (conn, _) = open_or_create(store_dir)?;
    let (generation, revision, _) = read_meta(&conn).map_err(sql(&path))?;
    Ok(Cursor {
        generation,
        revision,
    })
}

/// What changed since `cursor` (`None`: the reader has no cursor yet).
pub fn read_since(store_dir: &Path, cursor: Option<&Cursor>) -> Since {
    let rescan = |reason: String| Since::Rescan { reason };
    let Some(cursor) = cursor else {
        return rescan("no catalog cursor yet".into());
    };
    let mut conn = match open_for_reading(store_dir) {
        Ok(conn) => conn,
        Err(reason) => return rescan(reason),
    };
    let path = catalog_path(store_dir);
    // One read transaction: the rows and the revision they end at are one snapshot.
    let read = (|| -> rusqlite::Result<Result<Since, String>> {
        let tx = conn.transaction()?;
        let (generation, revision, floor) = read_meta(&tx)?;
        if generation != cursor.generation {
            return Ok(Err(format!(
                "{} was started over (generation {generation}, the cursor is in {})",
                path.display(),
                cursor.generation
            )));
        }
        if cursor.revision > revision {
            return Ok(Err(format!(
                "the cursor (revision {}) is past the end of {} (revision {revision})",
                cursor.revision,
                path.display()
            )));
        }
        if cursor.revision < floor {
            return Ok(Err(format!(
                "the cursor (revision {}) is below the floor of {} (revision {floor}): removals it has not seen were pruned",
                cursor.revision,
                path.display()
            )));
        }
        let mut by_folder: BTreeMap<String, Vec<String>> = BTreeMap::new();
        {
            let mut stmt =
                tx.prepare("SELECT folder, name FROM docs WHERE rev > ?1 ORDER BY folder, name")?;
            let mut rows = stmt.query([cursor.revision as i64])?;
            while let Some(row) = rows.next()? {
                by_folder.entry(row.get(0)?).or_default().push(row.get(1)?);
            }
        }
        Ok(Ok(Since::Changes {
            changes: by_folder
                .into_iter()
                .map(|(folder, files)| Change { folder, files })
                .collect(),
            end: Cursor {
                generation,
                revision,
            },
        }))
    })();
    match read {
        Ok(Ok(since)) => since,
        Ok(Err(reason)) => rescan(reason),
        Err(e) => rescan(format!("{} could not be read: {e}", path.display())),
    }
}

/// The generation whose metadata is whole, when one is.
fn filled_generation(conn: &Connection) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [FILLED], |r| {
        r.get(0)
    })
    .optional()
}

/// Rows of the store's own folders (not the mirror's), as a `GLOB` pattern.
fn store_folders() -> String {
    format!("{}/*", super::STORE_DIR)
}

/// Rows of the mirror's folders, as a `GLOB` pattern.
fn mirror_folders() -> String {
    format!("{}/*", super::MIRROR_DIR)
}

/// Fill the metadata of every present document of the store (its session folders and
/// rules) and of the mirror (its files, and the documents left in its pack without their
/// metadata) unless this generation's is whole already. `find` lists and reads them — file
/// I/O, before any write transaction; `None` when it could not read them all, and then
/// nothing is filled. One transaction then writes what it found into the rows no record
/// changed since it started (a writer's newer record knows better), adds rows for documents
/// no record named (at revision 0: readers that rescanned found them), marks absent the
/// rows whose file is gone, and marks the generation filled — so a kill before the commit
/// leaves it unfilled. A start-over meanwhile leaves it unfilled too (the next reader
/// fills). `Ok(true)` when `find` ran.
pub(crate) fn fill(
    store_dir: &Path,
    find: impl FnOnce() -> Option<Vec<Found>>,
) -> Result<bool, CatalogError> {
    let path = catalog_path(store_dir);
    let (mut conn, _) = open_or_create(store_dir)?;
    let (generation, revision, filled) = (|| -> rusqlite::Result<_> {
        let tx = conn.transaction()?;
        let (generation, revision, _) = read_meta(&tx)?;
        Ok((generation, revision, filled_generation(&tx)?))
    })()
    .map_err(sql(&path))?;
    if filled.as_deref() == Some(generation.as_str()) {
        return Ok(false);
    }
    let Some(found) = find() else {
        return Ok(true);
    };
    (|| -> rusqlite::Result<()> {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (now, _, _) = read_meta(&tx)?;
        if now != generation || filled_generation(&tx)?.as_deref() == Some(generation.as_str())
        {
            return Ok(());
        }
        let mut absent = std::collections::BTreeSet::new();
        {
            let mut stmt = tx.prepare(
                "SELECT folder, name FROM docs WHERE present = 1 AND rev <= ?1
                   AND (folder GLOB ?2 OR folder GLOB ?3)",
            )?;
            let mut rows = stmt.query(params![revision as i64, store_folders(), mirror_folders()])?;
            while let Some(row) = rows.next()? {
                absent.insert((row.get::<_, String>(0)?, row.get::<_, String>(1)?));
            }
        }
        {
            let mut upsert = tx.prepare(
                "INSERT INTO docs (folder, name, rev, present, len, mtime_ns, kind, title_model, vetted,
                   project_key, readable)
                 VALUES (?1, ?2, 0, 1, ?3, ?4, ?5, ?6, ?7, ?9, ?10)
                 ON CONFLICT (folder, name) DO UPDATE SET present = 1, len = excluded.len,
                   mtime_ns = excluded.mtime_ns, kind = excluded.kind,
                   title_model = excluded.title_model, vetted = excluded.vetted,
                   project_key = excluded.project_key, readable = excluded.readable
                 WHERE docs.rev <= ?8",
            )?;
            for doc in &found {
                absent.remove(&(doc.folder.clone(), doc.name.clone()));
                let meta = doc.meta.as_ref().map(|m| m.get());
                upsert.execute(params![
                    doc.folder,
                    doc.name,
                    doc.seen.map(|(len, _)| len as i64),
                    doc.seen.map(|(_, mtime)| mtime),
                    meta.map(|m| &m.kind),
                    meta.and_then(|m| m.title_model.as_ref()),
                    meta.map(RowMeta::vetted_text),
                    revision as i64,
                    row_project_key(&doc.folder, meta.map(|m| m.project_key.as_str())),
                    meta.map(|m| m.readable),
                ])?;
            }
            let mut gone = tx.prepare(
                "UPDATE docs SET present = 0, kind = NULL, title_model = NULL, vetted = NULL,
                   project_key = NULL, readable = NULL
                 WHERE folder = ?1 AND name = ?2",
            )?;
            for (folder, name) in &absent {
                gone.execute(params![folder, name])?;
            }
        }
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            params![FILLED, generation],
        )?;
        tx.commit()
    })()
    .map_err(sql(&path))?;
    Ok(true)
}

/// Whether the catalog's metadata is whole for its current generation.
pub fn is_filled(store_dir: &Path) -> bool {
    open_for_reading(store_dir).is_ok_and(|conn| {
        let (Ok((generation, _, _)), Ok(filled)) = (read_meta(&conn), filled_generation(&conn))
        else {
            return false;
        };
        filled == Some(generation)
    })
}

/// One project's documents by where they are, and the files that are not documents: what
/// `chapters status` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DocumentCounts {
    /// Readable documents of the project in the store.
    pub store: u64,
    /// Readable documents of the project in the mirror (with `with_mirror`).
    pub pool: u64,
    /// Files of the store (and the mirror, with `with_mirror`) that are not documents.
    pub unreadable: u64,
}

/// [`DocumentCounts`] of `project_key` from the rows, in one read transaction, when the
/// catalog's metadata is whole for its generation ([`fill`]: every store and mirror folder
/// listed); `None` when it is not, there is no usable catalog, or a store row does not know
/// whether it is a document (the caller counts another way). A row of the mirror's pack,
/// never read here, counts as the pool's document its path names. A rule of the pool whose
/// name the store's rules hold is the same rule proposed on two machines: counted once, the
/// store's, as the search table does.
pub fn document_counts(
    store_dir: &Path,
    project_key: &str,
    with_mirror: bool,
) -> Option<DocumentCounts> {
    let mut conn = open_for_reading(store_dir).ok()?;
    let read = (|| -> rusqlite::Result<Option<DocumentCounts>> {
        let tx = conn.transaction()?;
        let (generation, _, _) = read_meta(&tx)?;
        if filled_generation(&tx)? != Some(generation) {
            return Ok(None);
        }
        let mut counts = DocumentCounts::default();
        let mut stmt = tx.prepare(
            "SELECT area, project_key = ?1, readable, n FROM counts
             WHERE n > 0 AND (area = 0 OR (?2 AND area = 1))",
        )?;
        let mut rows = stmt.query(params![project_key, with_mirror])?;
        while let Some(row) = rows.next()? {
            let (area, mine, readable, n): (i64, bool, i64, i64) =
                (row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?);
            let n = n as u64;
            match (area, readable) {
                // A store row that does not know whether it is a document.
                (0, 2) => return Ok(None),
                (_, 0) => counts.unreadable += n,
                (0, 1) if mine => counts.store += n,
                // The mirror's: read (1), or left in the pack (2).
                (1, _) if mine => counts.pool += n,
                _ => {}
            }
        }
        if with_mirror {
            let (twins, unreadable_twins): (i64, i64) = tx.query_row(
                "SELECT coalesce(sum(m.readable IS NOT 0 AND m.project_key = ?1), 0),
                        coalesce(sum(m.readable IS 0), 0)
                 FROM docs m JOIN docs s ON s.folder = ?2 AND s.name = m.name AND s.present = 1
                 WHERE m.present = 1 AND m.folder GLOB ?3",
                params![
                    project_key,
                    format!("{}/{}", super::STORE_DIR, super::RULES_DIR),
                    format!("{}/{}/*", super::MIRROR_DIR, super::RULES_DIR)
                ],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            counts.pool = counts.pool.saturating_sub(twins as u64);
            counts.unreadable = counts.unreadable.saturating_sub(unreadable_twins as u64);
        }
        Ok(Some(counts))
    })();
    read.ok().flatten()
}

/// A present document of one of the store's session folders, as the catalog knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionDoc {
    pub root: String,
    pub name: String,
    /// `None`: the row does not know; read the file.
    pub meta: Option<RowMeta>,
}

/// Every present document of the store's session folders (`<store>/<root>/chapters/`) in
/// one read transaction, when the catalog's metadata is whole for its generation; `None`
/// when it is not, or there is no usable catalog (the reader reads the folders).
pub fn session_docs(store_dir: &Path) -> Option<Vec<SessionDoc>> {
    let mut conn = open_for_reading(store_dir).ok()?;
    let read = (|| -> rusqlite::Result<Option<Vec<SessionDoc>>> {
        let tx = conn.transaction()?;
        let (generation, _, _) = read_meta(&tx)?;
        if filled_generation(&tx)? != Some(generation) {
            return Ok(None);
        }
        let prefix = format!("{}/", super::STORE_DIR);
        let suffix = format!("/{}", super::CHAPTERS);
        let mut stmt = tx.prepare(
            "SELECT folder, name, kind, title_model, vetted, project_key, readable FROM docs
             WHERE present = 1 AND folder GLOB ?1",
        )?;
        let mut rows = stmt.query([format!("{prefix}*{suffix}")])?;
        let mut docs = Vec::new();
        while let Some(row) = rows.next()? {
            let folder: String = row.get(0)?;
            let Some(root) = folder
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(&suffix))
                .filter(|root| !root.contains('/'))
            else {
                continue;
            };
            docs.push(SessionDoc {
                root: root.to_owned(),
                name: row.get(1)?,
                meta: RowMeta::from_columns(
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                    row.get(6)?,
                ),
            });
        }
        Ok(Some(docs))
    })();
    read.ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row's metadata from the one frontmatter reader is what the annotator's whole
    /// parse (`ModelFields`) says, for the writers' shapes and for others.
    #[test]
    fn row_meta_reads_as_the_annotators_parse_reads() {
        use crate::render::annotate::ModelFields;
        let chapter = "---\ntitle: \"继续: a \\\"quoted\\\" title\"\nsummary: \"s: t\"\nkind: chapter\ndate: \"2025-11-29T07:06:49.880Z\"\ntopics: [\"口延\", config, new-label]\ntopicsUnvetted: [new-label]\nseqRange: [106, 175]\ncomposition: [{turn: 4, rule: topic-change, score: 0.1429}]\nsha256: \"82b6\"\ngenerated: {title: {by: model, model: m1, at: \"2026-01-01T00:00:00Z\"}, summary: {by: deterministic}}\n---\n# body\n";
        let plan = "---\ntitle: \"P\"\nkind: plan\nplanNumber: 2\ntopics: []\n---\nplan\n";
        // Not the writer's shape: a block sequence, a comment, an anchor, CRLF.
        let block =
            "---\ntitle: T\nkind: chapter\ntopics:\n  - a\n  - b\ntopicsUnvetted:\n  - b\n---\n";
        let comment = "---\n# note\ntitle: T\nkind: chapter\n---\n";
        let alias = "---\nid: &x T\ntitle: *x\nkind: chapter\n---\n";
        let crlf = "---\ntitle: T\r\nkind: chapter\r\ntopics: [a, b]\r\ntopicsUnvetted: [a]\r\ngenerated: {title: {by: model, model: m2}}\r\n---\n";
        for doc in [chapter, plan, block, comment, alias, crlf] {
            let fields = ModelFields::read(doc).expect("parses");
            let vetted: Vec<String> = fields
                .topics
                .iter()
                .filter(|t| !fields.topics_unvetted.contains(t))
                .cloned()
                .collect();
            let want = RowMeta {
                kind: fields.kind.clone(),
                title_model: fields.title_model().map(str::to_owned),
                vetted,
                project_key: String::new(),
                readable: true,
            };
            assert_eq!(RowMeta::read(&doc.to_owned()), want, "{doc}");
            assert_eq!(RowMeta::of_bytes(&doc.as_bytes().to_vec()), want, "{doc}");
        }
        let meta = RowMeta::read(&chapter.to_owned());
        assert_eq!(
            (meta.title_model.as_deref(), meta.vetted),
            (Some("m1"), vec!["口延".to_owned(), "config".to_owned()])
        );
        let crlf = RowMeta::read(&crlf.to_owned());
        assert_eq!(
            (crlf.title_model.as_deref(), crlf.vetted),
            (Some("m2"), vec!["b".to_owned()])
        );
        for unread in ["no frontmatter", "---\nkind: chapter\n---\n"] {
            assert_eq!(
                RowMeta::read(&unread.to_owned()),
                RowMeta::other(),
                "{unread}"
            );
        }
        // No kind (the original plugin's chapters): no kind known, a document all the same.
        let kindless = RowMeta::read(&"---\ntitle: t\nprojectKey: p\n---\n".to_owned());
        assert_eq!(
            (kindless.kind.as_str(), kindless.project_key.as_str()),
            ("other", "p")
        );
        assert!(kindless.readable);
        assert_eq!(RowMeta::of_bytes(&vec![0xff, 0xfe]), RowMeta::other());
    }

    fn changes_of(since: Since) -> (Vec<Change>, Cursor) {
        match since {
            Since::Changes { changes, end } => (changes, end),
            Since::Rescan { reason } => panic!("rescan: {reason}"),
        }
    }

    fn reason(since: Since) -> String {
        match since {
            Since::Rescan { reason } => reason,
            other => panic!("not a rescan: {other:?}"),
        }
    }

    fn record(w: &mut Writer, store: &Path, folder: &str, files: &[&str]) {
        w.record(store, &[(folder, files)], Presence::Written);
    }

    /// After `chapters forget`, no byte of the catalog — its file, its write-ahead log — holds
    /// a forgotten document's name or topics (a secret yesterday's rules missed can be there):
    /// its rows are deleted, not tombstoned, with freed pages zeroed; readers rescan.
    #[test]
    fn starting_over_after_a_forget_keeps_no_byte_of_the_old_rows() {
        const SECRET: &str = "zqsecret7c1f2e9a4b8d6e3f";
        let dir = tempfile::tempdir().expect("tmp");
        let store = &dir.path().join(".dsh-chapters");
        fs::create_dir_all(store.join("s1/chapters")).expect("mkdir");
        let before = start_over(store).expect("start");
        let mut w = Writer::default();
        let names: Vec<String> = (0..50).map(|i| format!("{i:03}-{SECRET}.md")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        record(&mut w, store, ".dsh-chapters/s1/chapters", &names);
        let holds = || {
            ["", "-wal", "-shm"].iter().any(|ext| {
                let mut path = catalog_path(store).into_os_string();
                path.push(ext);
                fs::read(&path)
                    .is_ok_and(|bytes| bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()))
            })
        };
        assert!(holds(), "recorded: the test can see a name in the files");
        let after = start_over_forgetting(store).expect("forget");
        drop(w);
        assert!(!holds(), "a forgotten name is left in the catalog's bytes");
        assert_ne!(after.generation, before.generation);
        assert!(matches!(
            read_since(store, Some(&before)),
            Since::Rescan { .. }
        ));
    }

    #[test]
    fn a_reader_sees_what_was_recorded_since_its_cursor_each_document_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = &dir.path().join(".dsh-chapters");
        fs::create_dir_all(store.join("s1/chapters")).expect("mkdir");
        fs::write(store.join("s1/chapters/001-a.md"), "abc").expect("write");
        let start = start_over(store).expect("start");
        let mut w = Writer::default();
        record(&mut w, store, ".dsh-chapters/s1/chapters", &["001-a.md"]);
        w.record(
            store,
            &[
                (".dsh-chapters/s1/chapters", &["plan-001-a.md", "001-a.md"]),
                (".dsh-chapters/rules", &["r-1.md"]),
            ],
            Presence::Written,
        );
        let (got, end) = changes_of(read_since(store, Some(&start)));
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].folder, ".dsh-chapters/rules");
        assert_eq!(got[1].files, ["001-a.md", "plan-001-a.md"]);
        assert_eq!(end.revision, start.revision + 2, "one revision per record");
        let (none, same) = changes_of(read_since(store, Some(&end)));
        assert!(none.is_empty());
        assert_eq!(same, end);
        record(&mut w, store, ".dsh-chapters/s2/chapters", &["001-c.md"]);
        let (next, _) = changes_of(read_since(store, Some(&end)));
        assert_eq!(next.len(), 1, "only what came after the cursor");
        assert_eq!(
            current(store).expect("current").generation,
            start.generation
        );
        // The row holds what was seen of the file when it was recorded.
        let conn = Connection::open(catalog_path(store)).expect("open");
        let (present, len): (i64, Option<i64>) = conn
            .query_row(
                "SELECT present, len FROM docs WHERE name = '001-a.md'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row");
        assert_eq!((present, len), (1, Some(3)));
        // A removal is a tombstone the readers see.
        w.record(
            store,
            &[(".dsh-chapters/s1/chapters", &["001-a.md"])],
            Presence::Removed,
        );
        let gone: i64 = conn
            .query_row(
                "SELECT present FROM docs WHERE name = '001-a.md'",
                [],
                |r| r.get(0),
            )
            .expect("row");
        assert_eq!(gone, 0);
    }

    fn meta(kind: &str, model: Option<&str>) -> crate::redact::Redacted<RowMeta> {
        let text = format!(
            "---\ntitle: t\nkind: {kind}\ntopics: [a, b]\ntopicsUnvetted: [b]\n{}---\n",
            model.map_or(String::new(), |m| format!(
                "generated:\n  title:\n    by: model\n    model: {m}\n"
            ))
        );
        crate::redact::echoed_text(&text).derive(RowMeta::read)
    }

    fn found(folder: &str, name: &str, model: Option<&str>) -> Found {
        Found {
            folder: folder.into(),
            name: name.into(),
            seen: None,
            meta: Some(meta("chapter", model)),
        }
    }

    /// A temp dir and the store folder made in it.
    fn a_store() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path().join(".dsh-chapters");
        fs::create_dir_all(&store).expect("mkdir");
        (dir, store)
    }

    #[test]
    fn a_listed_record_writes_each_documents_own_columns() {
        let (dir, store) = a_store();
        let store = &store;
        let folder = ".dsh-chapters/r/chapters";
        // With a title's model and without, and a document no frontmatter reader reads
        // (`other`, nothing vetted).
        let metas = [
            meta("chapter", None),
            meta("plan", Some("m-1")),
            meta("chapter", Some("m-2")),
            crate::redact::echoed_text("no frontmatter").derive(RowMeta::read),
        ];
        let mut list = metas[0].derive(MetaList::of_one);
        for m in &metas[1..] {
            list.absorb(m, MetaList::push);
        }
        let mut names = crate::names::NameList::default();
        for name in ["001-a.md", "plan-001-p.md", "002-b.md", "003-c.md"] {
            names.push(name);
        }
        let mut w = Writer::default();
        w.record_listed(store, folder, &names, &list);
        // A listed record's rows are those of one `RowMeta` each.
        let listed = session_docs_unfilled(store);
        let mut w2 = Writer::default();
        let other = &dir.path().join("other");
        fs::create_dir_all(other).expect("mkdir");
        let docs: Vec<_> = names
            .iter()
            .zip(&metas)
            .map(|(name, m)| (folder, name, Some(m)))
            .collect();
        w2.record_documents(other, &docs, Presence::Written);
        assert_eq!(listed, session_docs_unfilled(other));
        let row = |name: &str| {
            let (_, kind, model, vetted) = listed.iter().find(|r| r.0 == name).expect("a row");
            (kind.as_deref(), model.as_deref(), vetted.as_deref())
        };
        assert_eq!(listed.len(), 4);
        assert_eq!(row("001-a.md"), (Some("chapter"), None, Some(r#"["a"]"#)));
        assert_eq!(
            row("plan-001-p.md"),
            (Some("plan"), Some("m-1"), Some(r#"["a"]"#))
        );
        assert_eq!(
            row("002-b.md"),
            (Some("chapter"), Some("m-2"), Some(r#"["a"]"#))
        );
        assert_eq!(row("003-c.md"), (Some("other"), None, Some("[]")));
    }

    /// A row's (name, kind, title model, vetted).
    type RowText = (String, Option<String>, Option<String>, Option<String>);

    /// Every row, in order of name.
    fn session_docs_unfilled(store: &Path) -> Vec<RowText> {
        let conn = open_for_reading(store).expect("a catalog");
        let mut stmt = conn
            .prepare("SELECT name, kind, title_model, vetted FROM docs ORDER BY name")
            .expect("select");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .expect("rows");
        rows.map(|r| r.expect("row")).collect()
    }

    #[test]
    fn the_kept_recording_connection_holds_a_bounded_page_cache() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let mut w = Writer::default();
        record(&mut w, store, "f", &["a.md"]);
        let (conn, _) = w.open.as_ref().expect("kept open");
        let size: i64 = conn
            .query_row("PRAGMA cache_size", [], |r| r.get(0))
            .expect("cache_size");
        assert_eq!(size, -WRITER_CACHE_KIB);
    }

    #[test]
    fn a_fill_is_whole_or_nothing_and_leaves_a_newer_record_alone() {
        let (_dir, store) = a_store();
        let store = &store;
        let folder = ".dsh-chapters/r/chapters";
        let mut w = Writer::default();
        // Recorded by a path that did not know the metadata: not filled, so not an answer.
        record(&mut w, store, folder, &["001-a.md", "002-gone.md"]);
        assert!(session_docs(store).is_none());
        // A fill that could not read everything fills nothing.
        assert!(fill(store, || None).expect("fill"));
        assert!(!is_filled(store));
        // A writer records `001-a.md` (the model titled it) while the fill reads the old file.
        let newer = meta("chapter", Some("m"));
        let ran = fill(store, || {
            w.record_documents(
                store,
                &[(folder, "001-a.md", Some(&newer))],
                Presence::Written,
            );
            Some(vec![
                found(folder, "001-a.md", None),
                found(folder, "003-new.md", None),
            ])
        })
        .expect("fill");
        assert!(ran && is_filled(store));
        let docs = session_docs(store).expect("filled");
        let by_name = |n: &str| {
            docs.iter()
                .find(|d| d.name == n)
                .and_then(|d| d.meta.clone())
        };
        assert_eq!(
            by_name("001-a.md").expect("a").title_model.as_deref(),
            Some("m"),
            "the newer record"
        );
        let new = by_name("003-new.md").expect("a document no record named");
        assert_eq!(
            (new.kind.as_str(), new.vetted.as_slice()),
            ("chapter", &["a".to_owned()][..])
        );
        assert!(
            by_name("002-gone.md").is_none(),
            "a row whose file is gone is absent"
        );
        assert_eq!(docs.len(), 2);
        // Filled: the next fill reads nothing. Started over: filled again.
        assert!(!fill(store, || panic!("read again")).expect("fill"));
        start_over(store).expect("start over");
        assert!(!is_filled(store) && session_docs(store).is_none());
        assert!(fill(store, || Some(Vec::new())).expect("fill"));
        assert!(is_filled(store));
    }

    #[test]
    fn every_case_the_catalog_cannot_say_means_rescan() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        assert!(reason(read_since(store, None)).contains("no catalog cursor"));
        let start = start_over(store).expect("start");
        let mut w = Writer::default();
        record(&mut w, store, "f", &["a.md"]);
        // Started over (a writer died holding the lock, a forget, documents left the mirror).
        let again = start_over(store).expect("again");
        assert_ne!(again.generation, start.generation);
        assert!(reason(read_since(store, Some(&start))).contains("started over"));
        // Past the end.
        let beyond = Cursor {
            revision: again.revision + 1,
            ..again.clone()
        };
        assert!(reason(read_since(store, Some(&beyond))).contains("past the end"));
        // Missing: a writer that finds none makes a new one, still a rescan for old cursors.
        remove_files(&catalog_path(store));
        assert!(reason(read_since(store, Some(&again))).contains("missing"));
        record(&mut w, store, "f", &["b.md"]);
        assert!(reason(read_since(store, Some(&again))).contains("started over"));
        let now = current(store).expect("a catalog again");
        let (got, _) = changes_of(read_since(store, Some(&Cursor { revision: 0, ..now })));
        assert_eq!(got[0].files, ["b.md"], "recorded in the new catalog");
    }

    #[test]
    fn garbage_foreign_and_newer_catalogs_mean_rescan_and_a_writer_makes_a_new_one() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let start = start_over(store).expect("start");
        let path = catalog_path(store);
        let foreign = |version: i64, app: i64| {
            remove_files(&path);
            let conn = Connection::open(&path).expect("open");
            conn.execute_batch(&format!(
                "CREATE TABLE x (a); PRAGMA application_id = {app}; PRAGMA user_version = {version};"
            ))
            .expect("foreign");
        };
        let torn = |bytes: &[u8]| {
            remove_files(&path);
            fs::write(&path, bytes).expect("write");
        };
        let check = |what: &str| {
            assert!(
                matches!(read_since(store, Some(&start)), Since::Rescan { .. }),
                "{what}"
            );
            assert!(current(store).is_none(), "{what}");
            let mut w = Writer::default();
            record(&mut w, store, "f", &["a.md"]);
            let now = current(store).unwrap_or_else(|| panic!("{what}: a usable catalog again"));
            assert_ne!(now.generation, start.generation, "{what}");
        };
        for (what, bytes) in [
            ("empty", &b""[..]),
            ("garbage", &[b'x'; 10_000][..]),
            ("binary", &b"\xff\xfe\x00"[..]),
        ] {
            torn(bytes);
            check(what);
        }
        for (what, version, app) in [
            ("foreign", CATALOG_VERSION, 7),
            ("newer", CATALOG_VERSION + 1, APPLICATION_ID),
            ("no schema", CATALOG_VERSION, APPLICATION_ID),
        ] {
            foreign(version, app);
            check(what);
        }
        // A torn copy of a real catalog (its first page only) is not trusted either.
        let bytes = fs::read(&path).expect("read");
        torn(&bytes[..bytes.len().min(1024)]);
        assert!(matches!(
            read_since(store, Some(&start)),
            Since::Rescan { .. }
        ));
    }

    #[test]
    fn a_record_that_fails_removes_the_catalog_and_never_fails_its_writer() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let mut w = Writer::default();
        record(&mut w, store, "f", &["a.md"]);
        let before = current(store).expect("current");
        // Make the kept connection's writes fail: another connection holds the write lock
        // past the (shortened) busy timeout.
        let conn = Connection::open(catalog_path(store)).expect("open");
        conn.execute_batch("PRAGMA query_only = 0; BEGIN EXCLUSIVE;")
            .expect("hold the write lock");
        let (kept, _) = w.open.as_ref().expect("kept");
        kept.busy_timeout(Duration::from_millis(10)).expect("busy");
        record(&mut w, store, "f", &["b.md"]);
        drop(conn);
        assert!(
            !catalog_path(store).exists(),
            "the catalog that could not record is gone"
        );
        assert!(reason(read_since(store, Some(&before))).contains("missing"));
        // The next record starts a new one.
        record(&mut w, store, "f", &["c.md"]);
        assert!(reason(read_since(store, Some(&before))).contains("started over"));
    }

    #[test]
    fn a_catalog_replaced_under_a_kept_connection_is_reopened_and_the_record_kept() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let mut w = Writer::default();
        record(&mut w, store, "f", &["a.md"]);
        // Another process removed it (its record failed) and made a new one.
        remove_files(&catalog_path(store));
        let fresh = start_over(store).expect("new");
        record(&mut w, store, "f", &["b.md"]);
        let (got, _) = changes_of(read_since(store, Some(&fresh)));
        assert_eq!(got.len(), 1, "recorded in the catalog readers open");
        assert_eq!(got[0].files, ["b.md"]);
    }

    #[test]
    fn tombstones_are_bounded_and_a_cursor_below_the_floor_rescans() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let start = start_over(store).expect("start");
        let mut w = Writer::default();
        let names: Vec<String> = (0..=MAX_TOMBSTONES).map(|i| format!("{i}.md")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        // One by one, so the oldest tombstones have the oldest revisions.
        let (first, rest) = names.split_at(10);
        for name in first {
            w.record(store, &[("f", &[name])], Presence::Removed);
        }
        let early = current(store).expect("current");
        w.record(store, &[("f", rest)], Presence::Removed);
        let conn = Connection::open(catalog_path(store)).expect("open");
        let left: i64 = conn
            .query_row("SELECT count(*) FROM docs", [], |r| r.get(0))
            .expect("count");
        assert!(left <= MAX_TOMBSTONES, "{left}");
        assert!(reason(read_since(store, Some(&start))).contains("below the floor"));
        assert!(reason(read_since(store, Some(&early))).contains("below the floor"));
        let now = current(store).expect("current");
        changes_of(read_since(store, Some(&now)));
    }

    #[test]
    fn creating_a_catalog_removes_the_old_change_journal() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        for old in OLD_JOURNAL {
            fs::write(store.join(old), "{}\n").expect("old");
        }
        start_over(store).expect("start");
        for old in OLD_JOURNAL {
            assert!(!store.join(old).exists(), "{old}");
        }
    }

    #[test]
    fn two_writers_recording_at_once_lose_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path().to_path_buf();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut w = Writer::default();
                    for i in 0..25 {
                        let name = format!("{t}-{i}.md");
                        record(&mut w, &store, "f", &[name.as_str()]);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let now = current(&store).expect("current");
        let (got, _) = changes_of(read_since(
            &store,
            Some(&Cursor {
                revision: 0,
                ..now.clone()
            }),
        ));
        assert_eq!(got[0].files.len(), 100);
        assert_eq!(now.revision, 100, "one revision per record, none shared");
    }

    /// The triggers keep `counts` equal to a scan of the present rows through every kind of
    /// change: a record without metadata, the same rows again with it, a removal, a fill
    /// (new rows, rows gone, rows it knows better), a pruned tombstone.
    #[test]
    fn the_counts_are_the_present_rows_by_area_project_and_readability() {
        let (_dir, store) = a_store();
        let ws = store.parent().expect("ws").to_path_buf();
        let put = |rel: &str, text: &str| {
            let path = ws.join(rel);
            fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
            fs::write(path, text).expect("write");
        };
        let good = "---\ntitle: t\nkind: chapter\nprojectKey: pk\n---\n";
        put(".dsh-chapters/s1/chapters/001-a.md", good);
        put(".dsh-chapters/s1/chapters/002-b.md", "junk");
        put(
            ".dsh-knowledge/chapters/other/s2/001-c.md",
            "---\ntitle: c\n---\n",
        );
        let scan = || -> Vec<(i64, String, i64, i64)> {
            let conn = Connection::open(catalog_path(&store)).expect("open");
            let area = "CASE WHEN folder GLOB '.dsh-chapters/*' THEN 0 WHEN folder GLOB '.dsh-knowledge/*' THEN 1 ELSE 2 END";
            let query = |q: &str| -> Vec<(i64, String, i64, i64)> {
                let mut stmt = conn.prepare(q).expect("prepare");
                let rows = stmt
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                    .expect("query");
                rows.map(|r| r.expect("row")).collect()
            };
            let scanned = query(&format!(
                "SELECT {area}, coalesce(project_key, ''), coalesce(readable, 2), count(*) FROM docs
                 WHERE present = 1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            ));
            let kept = query(
                "SELECT area, project_key, readable, n FROM counts WHERE n > 0 ORDER BY 1, 2, 3",
            );
            assert_eq!(kept, scanned, "the counts are the rows'");
            kept
        };
        let mut w = Writer::default();
        w.record(
            &store,
            &[(".dsh-chapters/s1/chapters", &["001-a.md", "002-b.md"])],
            Presence::Written,
        );
        assert_eq!(scan(), vec![(0, String::new(), 2, 2)]);
        let a = crate::redact::echoed_text(good).derive(RowMeta::read);
        w.record_documents(
            &store,
            &[(".dsh-chapters/s1/chapters", "001-a.md", Some(&a))],
            Presence::Written,
        );
        w.record(&store, &[("other/folder", &["x.md"])], Presence::Written);
        assert_eq!(scan().len(), 3);
        let filled = fill(&store, || {
            Some(vec![
                Found {
                    folder: ".dsh-chapters/s1/chapters".into(),
                    name: "002-b.md".into(),
                    seen: None,
                    meta: Some(crate::redact::echoed_text("junk").derive(RowMeta::read)),
                },
                Found {
                    folder: ".dsh-knowledge/chapters/other/s2".into(),
                    name: "001-c.md".into(),
                    seen: None,
                    meta: None,
                },
            ])
        })
        .expect("fill");
        assert!(filled);
        // 001-a.md was not found by the fill: gone.
        assert_eq!(
            scan(),
            vec![
                (0, String::new(), 0, 1),
                (1, "other".into(), 2, 1),
                (2, String::new(), 2, 1)
            ]
        );
        w.record(&store, &[("other/folder", &["x.md"])], Presence::Removed);
        let conn = Connection::open(catalog_path(&store)).expect("open");
        conn.execute("DELETE FROM docs WHERE present = 0", [])
            .expect("prune");
        assert_eq!(scan().len(), 2);
    }
}

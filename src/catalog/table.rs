//! The search table (shell): every document's frontmatter read once, kept so a query never
//! parses the corpus.
//!
//! It lives in `<store>/.search/` (a dot directory: never published, never a session tree)
//! and is a cache: lose it and the next search rebuilds it from the documents. It holds
//! append-only *segments*; a refresh looks at the folders the store's catalog
//! (`store::catalog`) names since its cursor — or, when the catalog cannot say, every 10
//! minutes and on `chapters index rebuild`, lists every document folder (store, and the
//! mirror when linked) and re-lists only a folder whose mtime moved — reads only files it has
//! not seen or whose (length, mtime) moved, and writes them as one new segment; a segment at
//! least a quarter the size of the one before it is merged into it, so there are O(log n)
//! segments and each document is rewritten O(log n) times. Nothing beside the segments grows
//! with the corpus per refresh: the folder states are in 256 parts, each folder's file list
//! in its own file, and a bounded change log says which documents each revision changed, so
//! an index update asks only for what changed since the revision it last saw.
//!
//! A segment is five files: `docs` (one tab-separated record per document, sorted by path),
//! `meta` (16 bytes per document: date, record offset, project, flags), `dict` (one line per
//! field and token: `F\ttoken\toffset\tcount`), `post` (the postings, u32 LE) and `skip`
//! (every 64th `dict` line's offset and key: an exact lookup seeks instead of scanning). A query
//! term is looked up by substring in `dict` — a term occurs in a field exactly when it occurs
//! in one of the field's tokens, since a term holds only letters, digits and `_` — and only
//! the postings and records it needs are read (`pread`). The answer equals
//! `score::rank` over every document (tested).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::catalog::score::{self, DocMeta, ScoreParams, SearchDoc, TermHits};
use crate::curation::{normalize_topic, Curation, RuleStatus};
use crate::redact::Redacted;
use crate::render::frontmatter::MAX_FRONTMATTER_BYTES;
use crate::rules::store::RULES_DIR;
use crate::store::read::Reader;
use crate::store::{
    self, atomic, catalog, is_safe_component, mirror_folder_project_key, MIRROR_DIR, STORE_DIR,
};

/// A topic's documents are named by opaque numbers (the caller's).
pub type DocSets = BTreeMap<String, BTreeSet<u64>>;

pub const TABLE_DIR: &str = ".search";
const STATE_FILE: &str = "state.json";
const TABLE_VERSION: u32 = 2;
/// A folder modified this recently is listed again next time: a file landing in the same
/// mtime tick as the listing would otherwise be missed.
const SETTLE: Duration = Duration::from_secs(2);
const META_BYTES: usize = 16;
const NO_DATE: i64 = i64::MIN;
/// The date range of a segment without documents ([`SegmentInfo::dates`]).
const NO_DATES: (i64, i64) = (i64::MAX, i64::MIN);
const FLAG_RULE: u8 = 1;
const FLAG_MIRROR: u8 = 2;
const FIELD_TOPIC: u8 = b'T';
const FIELD_TITLE: u8 = b't';
const FIELD_SUMMARY: u8 = b's';
const FIELD_KIND: u8 = b'k';
/// The folder a document was read from (its `sources` key): the unit of an index delta.
const FIELD_FOLDER: u8 = b'd';

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("search table {path}: {source}; it is a cache — delete {dir} and search again", dir = TABLE_DIR)]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("the search table (a cache under {dir}) cannot be brought up to date: {0}", dir = TABLE_DIR)]
    Lock(#[from] store::lock::LockError),
    #[error("search table segment {path} is damaged ({detail}); it is a cache — delete {dir} and search again", dir = TABLE_DIR)]
    Damaged { path: PathBuf, detail: String },
}

fn io_err(path: &Path, source: io::Error) -> TableError {
    TableError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One document as the table keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDoc {
    /// Relative to the workspace: `.dsh-chapters/<root>/chapters/X.md` or
    /// `.dsh-knowledge/chapters/<pk>/<root>/X.md` — the path a search answer shows.
    pub path: String,
    pub root: String,
    pub name: String,
    /// Git's blob id of the file's bytes.
    pub blob: String,
    /// Topics normalized, not yet canonical.
    pub meta: DocMeta,
}

impl TableDoc {
    pub fn from_mirror(&self) -> bool {
        self.path.starts_with(MIRROR_DIR)
    }

    /// The document as the scorer reads it: canonical topics, the core-rule flag.
    pub fn search_doc(&self, curation: &Curation, harness: &str) -> SearchDoc {
        let mut meta = self.meta.clone();
        meta.topics = curation.canonical_topics(self.meta.topics.iter().map(String::as_str));
        SearchDoc {
            path: self.path.clone(),
            core_rule: is_core_rule(&self.meta, curation, harness),
            meta,
        }
    }
}

/// A `kind: rule` document whose `id` this machine approved (its latest `rule-status`).
pub fn is_core_rule(meta: &DocMeta, curation: &Curation, harness: &str) -> bool {
    is_core_rule_id(&meta.kind, meta.id.as_deref(), curation, harness)
}

/// [`is_core_rule`] of a document's kind and rule id.
pub fn is_core_rule_id(kind: &str, id: Option<&str>, curation: &Curation, harness: &str) -> bool {
    kind == "rule"
        && id.is_some_and(|id| {
            curation
                .rule_decision(harness, id)
                .is_some_and(|d| d.status == RuleStatus::Approved)
        })
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SegmentInfo {
    id: u64,
    docs: u32,
    /// Bytes of each file, checked on open: a torn cache is rebuilt, never trusted.
    sizes: [u64; 5],
    /// Project keys of the segment's documents; `meta` refers to them by index.
    pks: Vec<String>,
    /// Per project key: (store documents, mirror documents).
    counts: Vec<(u64, u64)>,
    /// The smallest and largest date of its documents (UTC ms, [`NO_DATE`] for an undated
    /// one; `(i64::MAX, i64::MIN)` when it has none), from its `meta`: a lookup by date skips
    /// a segment none of whose dates it wants. `None` in a state written before the field
    /// (or by a build without it): filled from the `meta` file at the next refresh.
    #[serde(default)]
    dates: Option<(i64, i64)>,
}

/// Dates an index update wants (UTC milliseconds): sorted, disjoint half-open spans, and
/// whether undated documents too ([`Table::docs_with_labels_in`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DateSpans {
    spans: Vec<(i64, i64)>,
    undated: bool,
}

impl DateSpans {
    /// The instants of any of `spans` (`[from, to)`, in any order, overlapping or not), and
    /// the undated documents when `undated`.
    pub fn new(spans: impl IntoIterator<Item = (i64, i64)>, undated: bool) -> DateSpans {
        let mut sorted: Vec<(i64, i64)> = spans.into_iter().filter(|(f, t)| f < t).collect();
        sorted.sort_unstable();
        let mut joined: Vec<(i64, i64)> = Vec::with_capacity(sorted.len());
        for (from, to) in sorted {
            match joined.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(to),
                _ => joined.push((from, to)),
            }
        }
        DateSpans {
            spans: joined,
            undated,
        }
    }

    /// Whether a document of this date (`None`: undated) is wanted: asked of every posting
    /// of a topic (one per document for a topic on all), so a binary search.
    pub fn contains(&self, date: Option<i64>) -> bool {
        match date {
            Some(ms) => {
                let i = self.spans.partition_point(|(from, _)| *from <= ms);
                i > 0 && ms < self.spans[i - 1].1
            }
            None => self.undated,
        }
    }

    /// Whether a segment whose dates lie in `[min, max]` ([`NO_DATE`] for undated ones) may
    /// hold a wanted document.
    fn may_hold(&self, (min, max): (i64, i64)) -> bool {
        if min == NO_DATE && self.undated {
            return true;
        }
        // The first span ending after `min` is the only one that may start by `max`.
        let i = self.spans.partition_point(|(_, to)| *to <= min);
        self.spans.get(i).is_some_and(|(from, _)| *from <= max)
    }
}

/// A document folder as last listed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceState {
    /// mtime (ns) when listed; 0 = list again at the next full rescan.
    mtime: u128,
    pub files: u64,
    /// `shard::input_hash` of its readable documents.
    pub hash: String,
}

/// Which incarnation of the table, and how far its documents have moved: what a derived
/// index records as "built from", so its next update asks only for what changed since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableRev {
    /// The table's incarnation (a clock reading when it was created): a revision of
    /// another incarnation (the cache was lost and rebuilt) says nothing here.
    pub id: u64,
    pub rev: u64,
}

impl std::fmt::Display for TableRev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:x}.{}", self.id, self.rev)
    }
}

impl std::str::FromStr for TableRev {
    type Err = ();
    fn from_str(s: &str) -> Result<TableRev, ()> {
        let (id, rev) = s.trim().split_once('.').ok_or(())?;
        Ok(TableRev {
            id: u64::from_str_radix(id, 16).map_err(|_| ())?,
            rev: rev.parse().map_err(|_| ())?,
        })
    }
}

/// What one revision changed in one folder: the documents (re)read, and the topic labels
/// of the versions they replaced (a re-annotation's old topics lose the document).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FolderChange {
    pub folder: String,
    pub names: Vec<String>,
    pub old_labels: Vec<String>,
}

/// `state.json`: small whatever the corpus (the per-folder states live in `folders/`, the
/// per-folder document lists in `sources/`, the change log in `changes.tsv`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    v: u32,
    id: u64,
    /// Bumped by every refresh that changed what some folder holds.
    rev: u64,
    next_id: u64,
    segments: Vec<SegmentInfo>,
    /// Documents that could not be read, by path, with why.
    unreadable: BTreeMap<String, String>,
    /// Where this table stopped reading the store's catalog (a state of the change
    /// journal it replaced has none: one rescan).
    catalog: Option<catalog::Cursor>,
    /// When every folder was last listed (ms since the epoch).
    rescanned_ms: u64,
    /// Whether the mirror's folders are in the table (linking changes the folder set).
    linked: bool,
    /// Every folder change of a revision above this one is in the change log.
    log_floor: u64,
}

impl State {
    fn new(now: SystemTime) -> State {
        State {
            v: TABLE_VERSION,
            id: u64::try_from(stamp(now)).unwrap_or(u64::MAX),
            ..State::default()
        }
    }

    fn revision(&self) -> TableRev {
        TableRev {
            id: self.id,
            rev: self.rev,
        }
    }
}

/// What one refresh found.
#[derive(Debug, Default)]
pub struct Refresh {
    pub added: usize,
    pub merged: usize,
    pub rebuilt: bool,
    /// Why every folder was listed; `None` when the store's catalog named what to look at.
    pub rescan: Option<String>,
    /// Folders listed.
    pub folders: usize,
    /// What the refresh could not do (a catalog it could not open), said.
    pub notes: Vec<String>,
}

/// How a refresh finds what changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// The store's catalog since the cursor; every folder (those whose mtime moved) when
    /// the catalog cannot say, when the folder set changed, or every [`FULL_RESCAN_EVERY`].
    Catalog,
    /// Every folder listed and every file stat'ed whatever the mtimes say: the repair path.
    Thorough,
}

/// A full rescan runs at least this often even when the catalog has an answer: it finds a
/// document no record names (a writer older than the catalog, a folder copied in by hand)
/// within this long — at once with `chapters index rebuild`.
pub const FULL_RESCAN_EVERY: Duration = Duration::from_secs(600);

/// One folder a refresh looks at.
struct Visit {
    key: String,
    root: String,
    /// The files the catalog named (a known file is stat'ed only when named); `None`: every
    /// file of the folder is stat'ed.
    named: Option<BTreeSet<String>>,
    /// Skip the folder when its mtime is the one recorded (a full, not thorough, rescan).
    check_mtime: bool,
}

/// The search table of one store.
pub struct Table {
    dir: PathBuf,
    state: State,
    /// The table is the store's document reader for every deriver (index, vocabulary,
    /// search cache): it reads only the store's and the mirror's documents and its own
    /// files under the store, so what it hands out is `Redacted` (`store::read`).
    reader: Reader,
    /// Segments opened so far (dictionary and metadata in memory, files open): each is
    /// opened once per table, however many lookups a query or a build makes.
    open: std::cell::RefCell<Vec<Option<std::rc::Rc<SegReader>>>>,
}

/// A ranked result: segment, document number, score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Found {
    pub seg: usize,
    pub id: u32,
    pub score: f64,
}

/// One query against the table.
pub struct TableQuery<'a> {
    pub terms: &'a [String],
    /// A canonical topic every result must carry (exact).
    pub topic: Option<&'a str>,
    pub project_key: &'a str,
    pub cross_project: bool,
    /// The mirror's documents count (linked) or not (the store door).
    pub include_mirror: bool,
    pub curation: &'a Curation,
    pub harness: &'a str,
    pub params: &'a ScoreParams,
    pub now_ms: i64,
    /// How many leading results must be in final order (ties broken by path); the rest
    /// are in score order only.
    pub resolve: usize,
}

impl Table {
    /// The table as last written; an absent or damaged one is empty (the next refresh
    /// rebuilds it).
    pub fn open(store_dir: &Path) -> Table {
        let dir = store_dir.join(TABLE_DIR);
        let state = load_state(&dir).unwrap_or_default();
        Table::new(dir, state)
    }

    /// Drop the table's state, so that the next refresh rebuilds it from the documents on
    /// disk. The table never drops a document on its own (the store only grows); a writer
    /// that removes documents (`chapters forget`, a file the pool no longer holds, a mirror
    /// rebuilt after a rewrite of the pool's history) calls this.
    pub fn invalidate(store_dir: &Path, lock_timeout: Duration) -> Result<(), TableError> {
        let dir = store_dir.join(TABLE_DIR);
        if !dir.is_dir() {
            return Ok(());
        }
        let _lock = store::lock::WriterLock::acquire(&dir, lock_timeout)?;
        match fs::remove_file(dir.join(STATE_FILE)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&dir, e)),
        }
    }

    /// Bring the table up to date, under the table's own lock (never the store's writer
    /// lock: a search must not wait for an archive): the folders the store's catalog
    /// names since the last refresh, or every folder whose mtime moved when the catalog
    /// cannot say (see [`FULL_RESCAN_EVERY`]).
    pub fn refresh(
        workspace: &Path,
        linked: bool,
        lock_timeout: Duration,
    ) -> Result<(Table, Refresh), TableError> {
        Table::refresh_with(workspace, linked, lock_timeout, Scan::Catalog)
    }

    /// Bring the table up to date by listing every folder and stat'ing every file, whatever
    /// the catalog and the mtimes say (`chapters index rebuild`: the repair path).
    pub fn rescan(
        workspace: &Path,
        linked: bool,
        lock_timeout: Duration,
    ) -> Result<(Table, Refresh), TableError> {
        Table::refresh_with(workspace, linked, lock_timeout, Scan::Thorough)
    }

    fn refresh_with(
        workspace: &Path,
        linked: bool,
        lock_timeout: Duration,
        scan: Scan,
    ) -> Result<(Table, Refresh), TableError> {
        let store_dir = workspace.join(STORE_DIR);
        let dir = store_dir.join(TABLE_DIR);
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let _lock = store::lock::WriterLock::acquire(&dir, lock_timeout)?;
        let mut report = Refresh::default();
        let now = SystemTime::now();
        let now_ms = u64::try_from(stamp(now) / 1_000_000).unwrap_or(u64::MAX);
        let mut state = match load_state(&dir) {
            Some(s) => s,
            None => {
                report.rebuilt = true;
                clear(&dir)?;
                State::new(now)
            }
        };
        let before = (state.catalog.clone(), state.linked, state.rescanned_ms);
        let rescan = if scan == Scan::Thorough {
            Some("asked for (`chapters index rebuild`)".to_owned())
        } else if report.rebuilt {
            Some("the table is new".to_owned())
        } else if state.linked != linked {
            Some("the workspace was linked or unlinked".to_owned())
        } else if now_ms.saturating_sub(state.rescanned_ms) >= FULL_RESCAN_EVERY.as_millis() as u64
        {
            Some("the periodic full rescan".to_owned())
        } else {
            None
        };
        // The pool's documents in the packed mirror are listed and read from its tree.
        let mut packed = if linked {
            crate::store::mirror::Packed::open(workspace)
        } else {
            None
        };
        let from_catalog = match rescan {
            Some(reason) => Err(reason),
            None => match catalog::read_since(&store_dir, state.catalog.as_ref()) {
                catalog::Since::Changes { changes, end } => Ok((changes, end)),
                catalog::Since::Rescan { reason } => Err(reason),
            },
        };
        let visits: Vec<Visit> = match from_catalog {
            Ok((changes, end)) => {
                let mut by_folder: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
                for change in changes {
                    // A record naming anything but a document folder of this door is ignored:
                    // it cannot hold a document the table keeps.
                    if let Some(root) = source_root(&change.folder, linked) {
                        by_folder
                            .entry(change.folder)
                            .or_insert_with(|| (root, BTreeSet::new()))
                            .1
                            .extend(change.files);
                    }
                }
                state.catalog = Some(end);
                by_folder
                    .into_iter()
                    .map(|(key, (root, named))| Visit {
                        key,
                        root,
                        named: Some(named),
                        check_mtime: false,
                    })
                    .collect()
            }
            Err(reason) => {
                // The catalog's end, taken before listing: whatever is recorded from now on
                // is read next time, so nothing falls between this listing and that read.
                // Made when there is none (other readers' cursors are left as they are).
                state.catalog = match catalog::end(&store_dir) {
                    Ok(cursor) => Some(cursor),
                    Err(e) => {
                        report.notes.push(format!(
                            "the store's catalog could not be opened ({e}); the next search rescans again"
                        ));
                        None
                    }
                };
                report.rescan = Some(reason);
                state.rescanned_ms = now_ms;
                list_sources(workspace, linked, packed.as_ref())?
                    .into_iter()
                    .map(|(key, root)| Visit {
                        key,
                        root,
                        named: None,
                        check_mtime: scan != Scan::Thorough,
                    })
                    .collect()
            }
        };
        state.linked = linked;

        let mirror_pks = mirror_chapter_pks(workspace, linked, packed.as_ref())?;
        let mut folders = Folders::new(&dir);
        let mut added: Vec<TableDoc> = Vec::new();
        // Paths whose document changed: their old version leaves the table.
        let mut replaced: BTreeSet<String> = BTreeSet::new();
        let mut known_writes: Vec<(String, BTreeMap<String, Known>)> = Vec::new();
        let mut changed: Vec<FolderChange> = Vec::new();
        let mut unreadable_moved = false;
        // Segments this refresh wrote while it read (a first build of a big pool): merged
        // into one by a streaming pass below.
        let mut fresh: Vec<SegmentInfo> = Vec::new();
        let mut added_count = 0;
        let marker = dir.join(DIRTY_FILE);
        for visit in &visits {
            let path = workspace.join(&visit.key);
            // A folder of the packed mirror: its tree id stands for its mtime, its blob ids
            // for its files' stamps.
            let tree = match (&packed, packed_folder(&visit.key)) {
                (Some(packed), Some(rel)) => match packed.folder(rel) {
                    Ok(Some((id, files))) => {
                        Some((id, own_left_out(workspace, &visit.root, files)))
                    }
                    // Not the pool's (a file put there by hand): read from disk.
                    Ok(None) => None,
                    Err(e) => return Err(io_err(&path, io::Error::other(e.to_string()))),
                },
                _ => None,
            };
            let (settled, mtime) = match &tree {
                Some((id, _)) => (true, id_stamp(id)),
                None => {
                    let mtime = fs::metadata(&path).ok().and_then(|m| m.modified().ok());
                    let Some(modified) = mtime else {
                        continue;
                    };
                    let settled = now.duration_since(modified).is_ok_and(|age| age >= SETTLE);
                    (settled, stamp(modified))
                }
            };
            let was = folders.get(&visit.key)?;
            if visit.check_mtime && was.as_ref().is_some_and(|w| w.mtime == mtime && mtime != 0) {
                continue;
            }
            report.folders += 1;
            let mut known = read_known(&dir, &visit.key)?;
            let twins = twin_names(
                &dir,
                workspace,
                &visit.key,
                &visit.root,
                linked,
                &mirror_pks,
            )?;
            let mut names = Vec::new();
            let mut known_moved = false;
            let listed = match &tree {
                Some((_, files)) => files
                    .keys()
                    .filter(|n| !n.starts_with('.') && n.ends_with(".md"))
                    .cloned()
                    .collect(),
                None => list_markdown(&path)?,
            };
            for name in listed {
                if twins.contains(&name) {
                    continue;
                }
                let entry = known.get(&name).cloned();
                // A known document is looked at again only when the catalog names it (or
                // on a rescan), and read again only when its size or time moved: the one
                // sanctioned rewrite (enrichment's re-annotation) or another machine's,
                // materialized into the mirror.
                if entry.is_some() && visit.named.as_ref().is_some_and(|n| !n.contains(&name)) {
                    continue;
                }
                let rel = format!("{}/{name}", visit.key);
                let blob = tree.as_ref().and_then(|(_, files)| files.get(&name));
                let stamp_now = match blob {
                    Some(id) => Some((0, id_stamp(id))),
                    None => file_stamp(&workspace.join(&rel)),
                };
                if let Some(k) = &entry {
                    match (k.stamp, stamp_now) {
                        (Some(was), Some(now)) if was != now => {}
                        (None, Some(now)) => {
                            known.insert(
                                name.clone(),
                                Known {
                                    stamp: Some(now),
                                    ..k.clone()
                                },
                            );
                            known_moved = true;
                            continue;
                        }
                        _ => continue,
                    }
                }
                known_moved = true;
                let read = match (blob, &packed) {
                    (Some(id), Some(packed)) => packed
                        .blob(*id)
                        .map_err(|e| format!("cannot read from the mirror's pack: {e}"))
                        .and_then(|bytes| doc_of(&bytes, &visit.key, Some(id))),
                    _ => read_doc(&workspace.join(&rel), &visit.key),
                };
                match read {
                    Ok((blob, meta)) => {
                        unreadable_moved |= state.unreadable.remove(&rel).is_some();
                        if let Some(old) = &entry {
                            if old.blob == blob {
                                known.insert(
                                    name.clone(),
                                    Known {
                                        blob,
                                        stamp: stamp_now,
                                    },
                                );
                                continue;
                            }
                            if old.blob != UNREADABLE {
                                replaced.insert(rel.clone());
                            }
                        }
                        known.insert(
                            name.clone(),
                            Known {
                                blob: blob.clone(),
                                stamp: stamp_now,
                            },
                        );
                        names.push(name.clone());
                        added.push(TableDoc {
                            path: rel,
                            root: visit.root.clone(),
                            name,
                            blob,
                            meta,
                        });
                    }
                    Err(reason) => {
                        known.insert(
                            name.clone(),
                            Known {
                                blob: UNREADABLE.into(),
                                stamp: stamp_now,
                            },
                        );
                        state.unreadable.insert(rel, reason);
                        unreadable_moved = true;
                    }
                }
            }
            let readable: Vec<(&str, &str)> = known
                .iter()
                .filter(|(_, k)| k.blob != UNREADABLE)
                .map(|(n, k)| (n.as_str(), k.blob.as_str()))
                .collect();
            let now_state = SourceState {
                mtime: if settled { mtime } else { 0 },
                files: readable.len() as u64,
                hash: crate::names::input_hash(readable),
            };
            let content_moved = was
                .as_ref()
                .is_none_or(|w| w.files != now_state.files || w.hash != now_state.hash);
            if was.as_ref() != Some(&now_state) {
                folders.set(&visit.key, now_state);
            }
            if known_moved {
                known_writes.push((visit.key.clone(), known));
            }
            if content_moved || !names.is_empty() {
                // Past `LOG_MAX_FOLDERS` the change is not logged (`append_log`): a first
                // build of a big pool keeps no name per document for it.
                if changed.len() == LOG_MAX_FOLDERS {
                    changed.iter_mut().for_each(|c| c.names = Vec::new());
                }
                if changed.len() >= LOG_MAX_FOLDERS {
                    names = Vec::new();
                }
                changed.push(FolderChange {
                    folder: visit.key.clone(),
                    names,
                    old_labels: Vec::new(),
                });
            }
            if added.len() >= FLUSH_EVERY && replaced.is_empty() {
                // Bounded memory: the documents read so far become a segment, and the lists
                // of the folders they came from are written with it. The marker goes first:
                // a crash from here on leaves files ahead of the state, and the next refresh
                // starts over.
                if fresh.is_empty() {
                    fs::write(&marker, b"").map_err(|e| io_err(&marker, e))?;
                }
                added_count += added.len();
                fresh.push(write_segment(
                    &dir,
                    state.next_id,
                    std::mem::take(&mut added),
                )?);
                state.next_id += 1;
                for (key, known) in known_writes.drain(..) {
                    write_known(&dir, &key, &known)?;
                }
                // The pack's pages read so far stay in this process's memory while it is
                // mapped: a fresh handle (on the same tree) per segment keeps a first
                // build's share of a big pool's pack to one segment's worth.
                if let Some(old) = &packed {
                    let tree = |p: &crate::store::mirror::Packed| {
                        p.folder("chapters").ok().flatten().map(|(id, _)| id)
                    };
                    if let Some(fresh) = crate::store::mirror::Packed::open(workspace)
                        .filter(|fresh| tree(fresh).is_some() && tree(fresh) == tree(old))
                    {
                        packed = Some(fresh);
                    }
                }
                #[cfg(test)]
                if CUT_AFTER_FLUSH.with(std::cell::Cell::get) {
                    return Err(io_err(&marker, io::Error::other("cut for a test")));
                }
            }
        }
        added_count += added.len();
        report.added = added_count;

        let aux = !known_writes.is_empty() || folders.is_dirty() || !changed.is_empty();
        let segments = added_count > 0 || !replaced.is_empty();
        if (aux || segments) && fresh.is_empty() {
            // Until the state below is saved, the files beside it may be ahead of it: a
            // crash in between leaves this marker, and the next refresh starts over.
            fs::write(&marker, b"").map_err(|e| io_err(&marker, e))?;
        }
        if !replaced.is_empty() {
            // Rare (a re-annotation): every segment is rewritten without the old versions,
            // and the new ones join them in one segment. The old versions' topics are kept
            // in the change log: their shards lose the document.
            let mut old_labels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            let mut docs = Vec::new();
            for info in &state.segments {
                for doc in read_segment_docs(&dir, info)? {
                    if replaced.contains(&doc.path) {
                        old_labels
                            .entry(folder_of(&doc.path).to_owned())
                            .or_default()
                            .extend(doc.meta.topics);
                    } else {
                        docs.push(doc);
                    }
                }
            }
            for change in &mut changed {
                if let Some(labels) = old_labels.remove(&change.folder) {
                    change.old_labels = labels.into_iter().collect();
                }
            }
            // Documents new in this refresh that a flush above wrote already: no replaced
            // document is among them (each path is read once a refresh).
            for info in &fresh {
                docs.extend(read_segment_docs(&dir, info)?);
            }
            docs.append(&mut added);
            let info = write_segment(&dir, state.next_id, docs)?;
            state.next_id += 1;
            state.segments = vec![info];
            report.merged += 1;
        } else if added_count > 0 {
            if !added.is_empty() {
                fresh.push(write_segment(&dir, state.next_id, added)?);
                state.next_id += 1;
            }
            if fresh.len() > 1 {
                let info = merge_segments(&dir, state.next_id, &fresh)?;
                state.next_id += 1;
                fresh = vec![info];
                report.merged += 1;
            }
            state.segments.append(&mut fresh);
            while state.segments.len() >= 2 {
                let n = state.segments.len();
                if u64::from(state.segments[n - 1].docs) * 4 < u64::from(state.segments[n - 2].docs)
                {
                    break;
                }
                let newer = state.segments.pop().expect("two segments");
                let older = state.segments.pop().expect("two segments");
                let info = merge_segments(&dir, state.next_id, &[older, newer])?;
                state.next_id += 1;
                state.segments.push(info);
                report.merged += 1;
            }
        }
        for (key, known) in &known_writes {
            write_known(&dir, key, known)?;
        }
        folders.save()?;
        if !changed.is_empty() {
            state.rev += 1;
            append_log(&dir, &mut state, &changed)?;
        }
        let moved = (state.catalog.clone(), state.linked, state.rescanned_ms) != before;
        let dated = fill_dates(&dir, &mut state.segments);
        if aux || segments || moved || unreadable_moved || report.rebuilt || dated {
            save_state(&dir, &state)?;
        }
        if aux || segments {
            let _ = fs::remove_file(dir.join(DIRTY_FILE));
            remove_unreferenced(&dir, &state);
        }
        Ok((Table::new(dir, state), report))
    }

    fn new(dir: PathBuf, state: State) -> Table {
        let open = std::cell::RefCell::new(vec![None; state.segments.len()]);
        // `<workspace>/.dsh-chapters/.search`: the workspace is two levels up.
        let workspace = dir.parent().and_then(Path::parent).unwrap_or(&dir);
        Table {
            reader: Reader::new(workspace),
            dir,
            state,
            open,
        }
    }

    /// Segment `s`, opened on first use.
    fn seg(&self, s: usize) -> Result<std::rc::Rc<SegReader>, TableError> {
        if let Some(seg) = &self.open.borrow()[s] {
            return Ok(seg.clone());
        }
        let seg = std::rc::Rc::new(SegReader::open(&self.dir, &self.state.segments[s])?);
        self.open.borrow_mut()[s] = Some(seg.clone());
        Ok(seg)
    }

    /// Which incarnation and revision of the table this is (see [`TableRev`]).
    pub fn revision(&self) -> TableRev {
        self.state.revision()
    }

    /// Documents that could not be read, by path.
    pub fn unreadable(&self) -> &BTreeMap<String, String> {
        &self.state.unreadable
    }

    /// Every folder's state: reads them all (a full index build, never an update).
    pub fn all_sources(&self) -> Result<BTreeMap<String, SourceState>, TableError> {
        Folders::new(&self.dir).all()
    }

    /// Every folder change after revision `since`, oldest first; `None` when the table
    /// cannot say (another incarnation, or older than its change log reaches): the caller
    /// compares everything instead.
    pub fn changes_since(&self, since: TableRev) -> Result<Option<Vec<FolderChange>>, TableError> {
        if since.id != self.state.id
            || since.rev < self.state.log_floor
            || since.rev > self.state.rev
        {
            return Ok(None);
        }
        if since.rev == self.state.rev {
            return Ok(Some(Vec::new()));
        }
        let entries = read_log(&self.dir)?;
        // Every revision after `since` must be there (the log is cut from its old end
        // only, raising the floor): a gap means the log was lost, so nothing is trusted.
        let found: BTreeSet<u64> = entries.iter().map(|(rev, _)| *rev).collect();
        if ((since.rev + 1)..=self.state.rev).any(|r| !found.contains(&r)) {
            return Ok(None);
        }
        Ok(Some(
            entries
                .into_iter()
                .filter(|(rev, _)| *rev > since.rev)
                .map(|(_, change)| change)
                .collect(),
        ))
    }

    /// Documents in the table: this machine's store's, plus the mirror's when asked.
    pub fn documents(&self, include_mirror: bool) -> u64 {
        self.state
            .segments
            .iter()
            .flat_map(|seg| &seg.counts)
            .map(|(store, mirror)| store + if include_mirror { *mirror } else { 0 })
            .sum()
    }

    /// (documents in the door, documents of other projects left out).
    pub fn counts(
        &self,
        project_key: &str,
        cross_project: bool,
        include_mirror: bool,
    ) -> (u64, u64) {
        let (mut mine, mut other) = (0, 0);
        for seg in &self.state.segments {
            for (pk, (store, mirror)) in seg.pks.iter().zip(&seg.counts) {
                let n = store + if include_mirror { *mirror } else { 0 };
                if cross_project || pk == project_key {
                    mine += n;
                } else {
                    other += n;
                }
            }
        }
        (mine, other)
    }

    /// One document's record.
    pub fn doc(&self, seg: usize, id: u32) -> Result<Redacted<TableDoc>, TableError> {
        Ok(self.reader.read_back(self.seg(seg)?.record(id)?))
    }

    /// Every document (the full rebuild and the reference checks read this).
    pub fn all_docs(&self) -> Result<Vec<Redacted<TableDoc>>, TableError> {
        let mut out = Vec::new();
        for info in &self.state.segments {
            out.extend(read_segment_docs(&self.dir, info)?);
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(self.reader.read_back(out).into_items())
    }

    /// Every document read from one folder (a `sources` key).
    pub fn docs_in_folder(&self, folder: &str) -> Result<Vec<Redacted<TableDoc>>, TableError> {
        let mut out = Vec::new();
        for s in 0..self.state.segments.len() {
            let seg = self.seg(s)?;
            if let Some((off, count)) = seg.exact(FIELD_FOLDER, folder)? {
                for id in seg.postings(off, count)? {
                    out.push(seg.record(id)?);
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(self.reader.read_back(out).into_items())
    }

    /// Documents carrying any of these (normalized, raw) topic labels.
    pub fn docs_with_labels(
        &self,
        labels: &BTreeSet<String>,
    ) -> Result<Vec<Redacted<TableDoc>>, TableError> {
        self.docs_with_labels_dated(labels, |_| true)
    }

    /// [`Table::docs_with_labels`], only the documents of `dates`: a segment whose dates
    /// fall outside them is not read at all (its postings nor its metadata), the others as
    /// [`Table::docs_with_labels_dated`] reads them — so an update of a topic's recent months
    /// reads the recent segments, not the old big one.
    pub fn docs_with_labels_in(
        &self,
        labels: &BTreeSet<String>,
        dates: &DateSpans,
    ) -> Result<Vec<Redacted<TableDoc>>, TableError> {
        let segments: Vec<usize> = (0..self.state.segments.len())
            .filter(|s| {
                self.state.segments[*s]
                    .dates
                    .is_none_or(|range| dates.may_hold(range))
            })
            .collect();
        self.labelled_dated_in(&segments, labels, |date| dates.contains(date))
    }

    /// [`Table::docs_with_labels`], only the documents whose date (UTC milliseconds, `None`
    /// when undated) `keep` accepts: the dates are read from the metadata, so only the records
    /// kept are read (an index update's months of a topic, not the topic's history).
    pub fn docs_with_labels_dated(
        &self,
        labels: &BTreeSet<String>,
        keep: impl Fn(Option<i64>) -> bool,
    ) -> Result<Vec<Redacted<TableDoc>>, TableError> {
        let every: Vec<usize> = (0..self.state.segments.len()).collect();
        self.labelled_dated_in(&every, labels, keep)
    }

    /// The documents of `segments` carrying any of `labels` whose date `keep` accepts.
    fn labelled_dated_in(
        &self,
        segments: &[usize],
        labels: &BTreeSet<String>,
        keep: impl Fn(Option<i64>) -> bool,
    ) -> Result<Vec<Redacted<TableDoc>>, TableError> {
        let mut out = Vec::new();
        for &s in segments {
            let seg = self.seg(s)?;
            // The dates first, from the fixed-size metadata: only the kept are sorted and
            // read (a +10's months of a topic on every chapter, not that topic's history).
            let mut ids = Vec::new();
            for label in labels {
                if let Some((off, count)) = seg.exact(FIELD_TOPIC, label)? {
                    // The dates straight from the loaded metadata: a label on every document
                    // is a posting per document.
                    let metas = seg.metas()?;
                    for id in seg.postings(off, count)? {
                        let date = meta_date(metas, id);
                        if keep((date != NO_DATE).then_some(date)) {
                            ids.push(id);
                        }
                    }
                }
            }
            ids.sort_unstable();
            ids.dedup();
            for id in ids {
                out.push(seg.record(id)?);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(self.reader.read_back(out).into_items())
    }

    /// Every raw topic label with its documents (numbered `segment << 32 | id`), for the
    /// vocabulary: the door's documents of this project only.
    pub fn label_docs(
        &self,
        project_key: &str,
        include_mirror: bool,
    ) -> Result<Redacted<DocSets>, TableError> {
        let mut out = DocSets::new();
        for (s, info) in self.state.segments.iter().enumerate() {
            let seg = self.seg(s)?;
            let dict = seg.dict()?;
            let mut start = 1;
            while start < dict.len() {
                let Some((token, off, count)) = SegReader::line(dict, start) else {
                    break;
                };
                let end =
                    memchr::memchr(b'\n', &dict[start..]).map_or(dict.len(), |i| start + i + 1);
                if dict[start] == FIELD_TOPIC {
                    let token = token.to_owned();
                    for id in seg.postings(off, count)? {
                        let m = seg.meta(id)?;
                        if (m.flags & FLAG_MIRROR != 0 && !include_mirror)
                            || info.pks.get(m.pk as usize).map(String::as_str) != Some(project_key)
                        {
                            continue;
                        }
                        out.entry(token.clone())
                            .or_default()
                            .insert(((s as u64) << 32) | u64::from(id));
                    }
                }
                start = end;
            }
        }
        Ok(self.reader.read_back(out))
    }

    /// Rank the table's documents for `q`: the same order `score::rank` gives over every
    /// document, for the first `q.resolve` results.
    pub fn search(&self, q: &TableQuery<'_>) -> Result<Vec<Found>, TableError> {
        let sources: BTreeSet<&String> = q.curation.aliases().keys().collect();
        let mut found = Vec::new();
        for (s, info) in self.state.segments.iter().enumerate() {
            let seg = self.seg(s)?;
            let n = info.docs as usize;
            let allowed: Option<BTreeSet<u32>> = match q.topic {
                Some(topic) => {
                    let mut ids = BTreeSet::new();
                    for label in labels_of(topic, q.curation) {
                        if let Some((off, count)) = seg.exact(FIELD_TOPIC, &label)? {
                            ids.extend(seg.postings(off, count)?);
                        }
                    }
                    Some(ids)
                }
                None => None,
            };
            // The §8 field points per document: its hits found here from the postings,
            // made points by `score::add_term_points` (what the door's scorer runs too),
            // term by term in query order, so the sums have the door's bits.
            let mut base = vec![0f64; if q.terms.is_empty() { 0 } else { n }];
            let mut hits = TermHitsOf::new(base.len());
            for term in q.terms {
                for (label, off, count) in seg.containing(FIELD_TOPIC, term)? {
                    if sources.contains(&label) {
                        continue;
                    }
                    let w = q.params.weight(&label);
                    for id in seg.postings(off, count)? {
                        hits.of(id).topic(w);
                    }
                }
                for source in &sources {
                    let canonical = q.curation.canonical(source).topic;
                    if !canonical.contains(term.as_str()) {
                        continue;
                    }
                    if let Some((off, count)) = seg.exact(FIELD_TOPIC, source)? {
                        let w = q.params.weight(&canonical);
                        for id in seg.postings(off, count)? {
                            hits.of(id).topic(w);
                        }
                    }
                }
                for (_, off, count) in seg.containing(FIELD_TITLE, term)? {
                    for id in seg.postings(off, count)? {
                        hits.of(id).title = true;
                    }
                }
                for (_, off, count) in seg.containing(FIELD_SUMMARY, term)? {
                    for id in seg.postings(off, count)? {
                        hits.of(id).summary = true;
                    }
                }
                if let Some((off, count)) = seg.exact(FIELD_KIND, term)? {
                    for id in seg.postings(off, count)? {
                        hits.of(id).kind = true;
                    }
                }
                hits.take_each(|id, h| {
                    score::add_term_points(&mut base[id as usize], term, h, &mut |_, _, _| {});
                });
            }
            let pk_ok: Vec<bool> = info
                .pks
                .iter()
                .map(|pk| q.cross_project || pk == q.project_key)
                .collect();
            let candidates: Box<dyn Iterator<Item = u32>> = if q.terms.is_empty() {
                match &allowed {
                    Some(ids) => Box::new(ids.clone().into_iter()),
                    None => Box::new(std::iter::empty()),
                }
            } else {
                Box::new((0..n as u32).filter(|id| base[*id as usize] > 0.0))
            };
            for id in candidates {
                if let Some(allowed) = &allowed {
                    if !allowed.contains(&id) {
                        continue;
                    }
                }
                let m = seg.meta(id)?;
                if m.flags & FLAG_MIRROR != 0 && !q.include_mirror {
                    continue;
                }
                if !pk_ok.get(m.pk as usize).copied().unwrap_or(false) {
                    continue;
                }
                let date = (m.date != NO_DATE).then_some(m.date);
                let score = if q.terms.is_empty() {
                    score::listing_score_at(date, q.now_ms).0
                } else {
                    let core = m.flags & FLAG_RULE != 0 && {
                        let doc = self.doc(s, id)?;
                        is_core_rule(&doc.meta, q.curation, q.harness)
                    };
                    let b = base[id as usize];
                    score::finish_at(Vec::new(), b, date, core, q.now_ms, q.params).0
                };
                found.push(Found { seg: s, id, score });
            }
        }
        let order = |a: &Found, b: &Found| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| (a.seg, a.id).cmp(&(b.seg, b.id)))
        };
        // Only the head a reader can be shown needs an order (plus its tie group, which
        // extends past it only among equal scores): select it, sort it, leave the rest.
        if q.resolve < found.len() {
            found.select_nth_unstable_by(q.resolve, order);
            let pivot = found[q.resolve].score;
            let (head, tail) = found.split_at_mut(q.resolve + 1);
            head.sort_by(order);
            // Equal scores in the tail belong to the head's last tie group.
            let mut ties: Vec<Found> = tail
                .iter()
                .copied()
                .filter(|f| f.score.to_bits() == pivot.to_bits())
                .collect();
            if !ties.is_empty() {
                let mut rest: Vec<Found> = tail
                    .iter()
                    .copied()
                    .filter(|f| f.score.to_bits() != pivot.to_bits())
                    .collect();
                let mut merged = head.to_vec();
                merged.append(&mut ties);
                merged.sort_by(order);
                merged.append(&mut rest);
                found = merged;
            }
        } else {
            found.sort_by(order);
        }
        // Ties across segments break by path: resolve every tie group that reaches the
        // results a reader can be shown (within a segment, number order is path order).
        let mut start = 0;
        while start < found.len() && start < q.resolve {
            let mut end = start + 1;
            while end < found.len() && found[end].score.to_bits() == found[start].score.to_bits() {
                end += 1;
            }
            if end - start > 1 {
                let mut group: Vec<(String, Found)> = Vec::with_capacity(end - start);
                for f in &found[start..end] {
                    group.push((self.doc(f.seg, f.id)?.into_inner().path, *f));
                }
                group.sort_by(|a, b| a.0.cmp(&b.0));
                for (i, (_, f)) in group.into_iter().enumerate() {
                    found[start + i] = f;
                }
            }
            start = end;
        }
        Ok(found)
    }
}

/// One query term's [`TermHits`] per document of a segment, kept only for the documents the
/// term hit (a search touches few of a segment's documents per term).
struct TermHitsOf {
    /// Per document number: its place in `hits`, or `UNTOUCHED`.
    slot: Vec<u32>,
    hits: Vec<(u32, TermHits)>,
}

const UNTOUCHED: u32 = u32::MAX;

impl TermHitsOf {
    fn new(docs: usize) -> TermHitsOf {
        TermHitsOf {
            slot: vec![UNTOUCHED; docs],
            hits: Vec::new(),
        }
    }

    /// The hits of document `id` (a posting: below the segment's document count).
    fn of(&mut self, id: u32) -> &mut TermHits {
        let slot = &mut self.slot[id as usize];
        if *slot == UNTOUCHED {
            *slot = self.hits.len() as u32;
            self.hits.push((id, TermHits::default()));
        }
        &mut self.hits[*slot as usize].1
    }

    /// Hand each document this term hit, with its hits, to `f`; then empty for the next term.
    fn take_each(&mut self, mut f: impl FnMut(u32, &TermHits)) {
        for (id, hits) in self.hits.drain(..) {
            self.slot[id as usize] = UNTOUCHED;
            f(id, &hits);
        }
    }
}

/// The raw labels whose canonical topic is `topic`.
pub fn labels_of(topic: &str, curation: &Curation) -> BTreeSet<String> {
    let mut labels: BTreeSet<String> = curation
        .aliases()
        .keys()
        .filter(|from| curation.canonical(from).topic == topic)
        .cloned()
        .collect();
    if curation.canonical(topic).topic == topic {
        labels.insert(topic.to_owned());
    }
    labels
}

/// The folder of a workspace-relative document path.
pub fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn stamp(t: SystemTime) -> u128 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Document folders: the store's session trees, and the mirror's when linked; each as
/// (workspace-relative path, root session id), sorted.
fn list_sources(
    workspace: &Path,
    linked: bool,
    packed: Option<&crate::store::mirror::Packed>,
) -> Result<Vec<(String, String)>, TableError> {
    let mut out = Vec::new();
    let store_dir = workspace.join(STORE_DIR);
    // A root without `chapters/` is skipped by the caller's stat (one stat per folder).
    for root in list_dirs(&store_dir)? {
        out.push((format!("{STORE_DIR}/{root}/chapters"), root));
    }
    // Rules are documents of kind `rule` (record §7.1): the store's (both tiers) and, when
    // linked, the pool's project rules, under the pseudo-root `rules`.
    out.push((format!("{STORE_DIR}/{RULES_DIR}"), RULES_DIR.to_owned()));
    if linked {
        // The packed mirror's folders from its tree, and any folder on disk besides.
        let mut folders: BTreeSet<(String, String)> = BTreeSet::new();
        if let Some(packed) = packed {
            folders.extend(packed.chapter_folders().map_err(|e| {
                io_err(&workspace.join(MIRROR_DIR), io::Error::other(e.to_string()))
            })?);
        }
        let chapters = workspace.join(MIRROR_DIR).join("chapters");
        for pk in list_dirs(&chapters)? {
            for root in list_dirs(&chapters.join(&pk))? {
                folders.insert((pk.clone(), root));
            }
        }
        for (pk, root) in folders {
            if is_safe_component(&pk) && is_safe_component(&root) {
                out.push((format!("{MIRROR_DIR}/chapters/{pk}/{root}"), root));
            }
        }
        let rules = workspace.join(MIRROR_DIR).join(RULES_DIR);
        for pk in list_dirs(&rules)? {
            // The original TypeScript plugin keeps a machine's rules one level down,
            // `rules/<pk>/<harness>/NNN-<slug>.md`.
            for harness in list_dirs(&rules.join(&pk))? {
                out.push((
                    format!("{MIRROR_DIR}/{RULES_DIR}/{pk}/{harness}"),
                    RULES_DIR.to_owned(),
                ));
            }
            out.push((
                format!("{MIRROR_DIR}/{RULES_DIR}/{pk}"),
                RULES_DIR.to_owned(),
            ));
        }
    }
    Ok(out)
}

fn list_dirs(dir: &Path) -> Result<Vec<String>, TableError> {
    list_names(dir, |name, kind| is_safe_component(name) && kind.is_dir())
}

fn list_markdown(dir: &Path) -> Result<Vec<String>, TableError> {
    list_names(dir, |name, kind| {
        !name.starts_with('.') && name.ends_with(".md") && kind.is_file()
    })
}

/// The UTF-8 names in `dir` that `keep` accepts, sorted; a missing directory has none.
fn list_names(
    dir: &Path,
    keep: impl Fn(&str, fs::FileType) -> bool,
) -> Result<Vec<String>, TableError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if entry.file_type().is_ok_and(|t| keep(&name, t)) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

/// Read one document of the table folder `folder`: its blob id and frontmatter, or why not.
fn read_doc(path: &Path, folder: &str) -> Result<(String, DocMeta), String> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read: {e}"))?;
    doc_of(&bytes, folder, None)
}

/// The mirror folder `key` as a path of the packed mirror's tree (`chapters/<pk>/<root>`).
fn packed_folder(key: &str) -> Option<&str> {
    key.strip_prefix(MIRROR_DIR)?
        .strip_prefix('/')
        .filter(|rel| rel.starts_with("chapters/"))
}

/// A stamp from an object id (a tree's for a folder, a blob's for a file): it moves exactly
/// when the content does; never 0 (which means "list again").
fn id_stamp(id: &crate::git::ObjectId) -> u128 {
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&id.as_bytes()[..16]);
    u128::from_be_bytes(bytes) | 1
}

/// A packed folder's files, name → blob, without this machine's own chapters: the pool holds
/// them too, but the store's copy is the one read (a document counted once, as the mirror's
/// files never held them).
fn own_left_out(
    workspace: &Path,
    root: &str,
    files: Vec<(String, crate::git::ObjectId)>,
) -> BTreeMap<String, crate::git::ObjectId> {
    let own = workspace.join(STORE_DIR).join(root).join("chapters");
    let mine = own.is_dir();
    files
        .into_iter()
        .filter(|(name, _)| !mine || !own.join(name).is_file())
        .collect()
}

/// The project keys of the mirror's chapter folders (the packed mirror's tree, or the files).
fn mirror_chapter_pks(
    workspace: &Path,
    linked: bool,
    packed: Option<&crate::store::mirror::Packed>,
) -> Result<Vec<String>, TableError> {
    if !linked {
        return Ok(Vec::new());
    }
    let mut pks: BTreeSet<String> = list_dirs(&workspace.join(MIRROR_DIR).join("chapters"))?
        .into_iter()
        .collect();
    if let Some(packed) = packed {
        pks.extend(
            packed
                .chapter_pks()
                .map_err(|e| io_err(&workspace.join(MIRROR_DIR), io::Error::other(e.to_string())))?
                .into_iter()
                .filter(|pk| is_safe_component(pk)),
        );
    }
    Ok(pks.into_iter().collect())
}

/// A document's blob id and frontmatter from its bytes, or why they are not one.
/// `id`: the blob id when the caller has it (the mirror's tree names it), so it is not hashed
/// again.
fn doc_of(
    bytes: &[u8],
    folder: &str,
    id: Option<&crate::git::ObjectId>,
) -> Result<(String, DocMeta), String> {
    let blob = id.map_or_else(|| crate::names::blob_id(bytes), ToString::to_string);
    let mut meta = parse_head(bytes)?;
    if meta.project_key.is_empty() {
        // The original TypeScript plugin writes no `projectKey`: a pool document is of
        // the project its folder names.
        meta.project_key = mirror_folder_project_key(folder)
            .unwrap_or_default()
            .to_owned();
    }
    Ok((blob, meta))
}

/// A summary for a document whose frontmatter has none: the original TypeScript plugin
/// writes it as the body's first quote, `# title`, a blank line, `> summary`.
fn body_summary(body: &[u8]) -> Option<String> {
    let text = match std::str::from_utf8(body) {
        Ok(t) => t,
        // The window may cut a character: what precedes it is still text.
        Err(e) => std::str::from_utf8(&body[..e.valid_up_to()]).ok()?,
    };
    let mut lines = text.lines();
    lines.next().filter(|l| l.starts_with("# "))?;
    lines.next().filter(|l| l.is_empty())?;
    let summary = lines.next()?.strip_prefix("> ")?.trim();
    (!summary.is_empty()).then(|| summary.to_owned())
}

/// The frontmatter of a document's bytes, bounded.
pub fn parse_head(bytes: &[u8]) -> Result<DocMeta, String> {
    let (head, end) = crate::render::frontmatter::bounded_head(bytes)?;
    let window = &bytes[..bytes.len().min(MAX_FRONTMATTER_BYTES)];
    // Our writers' shapes are read directly; anything else through YAML.
    let fast = crate::render::frontmatter_text(head)
        .and_then(crate::render::frontmatter::read)
        .map(DocMeta::from);
    let mut meta = match fast {
        Some(meta) => meta,
        None => score::parse_meta(head).map_err(|e| e.to_string())?,
    };
    if meta.summary.is_empty() {
        meta.summary = body_summary(&window[end..]).unwrap_or_default();
    }
    meta.topics = meta
        .topics
        .iter()
        .map(|t| normalize_topic(t))
        .filter(|t| !t.is_empty())
        .collect();
    Ok(meta)
}

// --- segments ------------------------------------------------------------------------

fn seg_path(dir: &Path, id: u64, part: &str) -> PathBuf {
    dir.join(format!("seg-{id}.{part}"))
}

const PARTS: [&str; 5] = ["docs", "meta", "dict", "post", "skip"];
/// Every this many dictionary lines, `skip` holds the line's offset and key: an exact lookup
/// reads that small file and one block of the dictionary, never the whole of it.
const SKIP_EVERY: usize = 64;
/// A refresh that reads this many new documents (a first build of a big pool) writes them as
/// a segment and goes on, so its memory does not grow with the pool.
const FLUSH_EVERY: usize = if cfg!(test) { 64 } else { 8192 };

#[cfg(test)]
thread_local! {
    /// A test's crash: the refresh stops right after its first flushed segment.
    static CUT_AFTER_FLUSH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn clean(text: &str) -> String {
    // Nearly every field has none: copied whole rather than a character at a time (a first
    // build writes ten fields of each of a year's chapters, and merges them once more).
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

fn record(doc: &TableDoc) -> String {
    let m = &doc.meta;
    let topics: Vec<String> = m.topics.iter().map(|t| clean(t)).collect();
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
        clean(&doc.path),
        clean(&doc.root),
        clean(&doc.name),
        doc.blob,
        clean(m.date.as_deref().unwrap_or("")),
        clean(&m.kind),
        clean(&m.project_key),
        clean(m.id.as_deref().unwrap_or("")),
        clean(&m.title),
        clean(&m.summary),
        topics.join("\u{1f}")
    )
}

fn parse_record(bytes: &[u8]) -> Option<TableDoc> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let f: Vec<&str> = text.split('\t').collect();
    if f.len() != 11 {
        return None;
    }
    let opt = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    Some(TableDoc {
        path: f[0].into(),
        root: f[1].into(),
        name: f[2].into(),
        blob: f[3].into(),
        meta: DocMeta {
            title: f[8].into(),
            summary: f[9].into(),
            kind: f[5].into(),
            project_key: f[6].into(),
            topics: if f[10].is_empty() {
                Vec::new()
            } else {
                f[10].split('\u{1f}').map(str::to_owned).collect()
            },
            date: opt(f[4]),
            session_id: None,
            seq_range: None,
            id: opt(f[7]),
        },
    })
}

/// The tokens a term can occur in: maximal runs of letters, digits and `_`, lowercased.
fn tokens(text: &str) -> BTreeSet<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

fn write_segment(dir: &Path, id: u64, mut docs: Vec<TableDoc>) -> Result<SegmentInfo, TableError> {
    docs.sort_by(|a, b| a.path.cmp(&b.path));
    docs.dedup_by(|a, b| a.path == b.path);
    let mut out = SegWriter::create(dir, id)?;
    let mut postings: BTreeMap<(u8, String), Vec<u32>> = BTreeMap::new();
    for doc in &docs {
        let n = out.push(doc)?;
        for key in doc_keys(doc) {
            let list = postings.entry(key).or_default();
            if list.last() != Some(&n) {
                list.push(n);
            }
        }
    }
    out.finish(postings.into_iter().map(Ok))
}

/// Merge `infos` (oldest first) into one new segment, reading one record of each at a time
/// and then one dictionary line of each at a time: memory holds a number per document (its
/// place in the new segment), never the documents nor their postings. A path in several
/// segments keeps its oldest version, as [`write_segment`] over their concatenation does.
fn merge_segments(dir: &Path, id: u64, infos: &[SegmentInfo]) -> Result<SegmentInfo, TableError> {
    let mut readers = infos
        .iter()
        .map(|info| SegDocs::open(dir, info))
        .collect::<Result<Vec<_>, _>>()?;
    // Each input document's number in the new segment (`UNTOUCHED`: an older version kept).
    let mut renumber: Vec<Vec<u32>> = infos
        .iter()
        .map(|info| vec![UNTOUCHED; info.docs as usize])
        .collect();
    let mut heads = Vec::with_capacity(readers.len());
    for r in &mut readers {
        heads.push(r.next_doc()?);
    }
    let mut out = SegWriter::create(dir, id)?;
    loop {
        let mut pick: Option<usize> = None;
        for (i, head) in heads.iter().enumerate() {
            if let Some(doc) = head {
                if pick.is_none_or(|p| heads[p].as_ref().is_some_and(|d| doc.path < d.path)) {
                    pick = Some(i);
                }
            }
        }
        let Some(p) = pick else { break };
        let doc = heads[p].take().expect("picked a head");
        let n = out.push(&doc)?;
        let slot = readers[p].n - 1;
        *renumber[p]
            .get_mut(slot)
            .ok_or_else(|| readers[p].past_count())? = n;
        for (i, r) in readers.iter_mut().enumerate() {
            if i == p || heads[i].as_ref().is_some_and(|d| d.path == doc.path) {
                heads[i] = r.next_doc()?;
            }
        }
    }
    drop(readers);
    let mut dicts = infos
        .iter()
        .map(|info| SegDict::open(dir, info))
        .collect::<Result<Vec<_>, _>>()?;
    let mut heads = Vec::with_capacity(dicts.len());
    for d in &mut dicts {
        heads.push(d.next_entry()?);
    }
    let postings = std::iter::from_fn(move || {
        let mut pick: Option<usize> = None;
        for (i, head) in heads.iter().enumerate() {
            if let Some((key, _)) = head {
                if pick.is_none_or(|p| heads[p].as_ref().is_some_and(|(k, _)| key < k)) {
                    pick = Some(i);
                }
            }
        }
        let key = heads[pick?].as_ref().expect("picked a head").0.clone();
        let mut merge = || -> Result<Vec<u32>, TableError> {
            let mut ids = Vec::new();
            for (i, d) in dicts.iter_mut().enumerate() {
                if heads[i].as_ref().is_some_and(|(k, _)| *k == key) {
                    let (_, old) = heads[i].take().expect("a head");
                    for o in old {
                        match renumber[i].get(o as usize) {
                            Some(&UNTOUCHED) => {}
                            Some(&n) => ids.push(n),
                            None => return Err(d.past_count()),
                        }
                    }
                    heads[i] = d.next_entry()?;
                }
            }
            ids.sort_unstable();
            Ok(ids)
        };
        Some(merge().map(|ids| (key, ids)))
    });
    // A token only older versions held is not in the new segment.
    out.finish(postings.filter(|e| !matches!(e, Ok((_, ids)) if ids.is_empty())))
}

/// The postings keys of one document: (field, token).
fn doc_keys(doc: &TableDoc) -> Vec<(u8, String)> {
    let m = &doc.meta;
    let mut keys: Vec<(u8, String)> = m.topics.iter().map(|t| (FIELD_TOPIC, clean(t))).collect();
    keys.extend(tokens(&m.title).into_iter().map(|t| (FIELD_TITLE, t)));
    keys.extend(tokens(&m.summary).into_iter().map(|t| (FIELD_SUMMARY, t)));
    keys.push((FIELD_KIND, clean(&m.kind.to_lowercase())));
    keys.push((FIELD_FOLDER, folder_of(&doc.path).to_owned()));
    keys
}

/// A segment's dictionary read one entry at a time, with its postings (read in step: the
/// `post` file is in dictionary order).
struct SegDict {
    path: PathBuf,
    dict: io::BufReader<fs::File>,
    post: io::BufReader<fs::File>,
    line: Vec<u8>,
    /// Postings read so far: where the next entry's must start.
    at: u64,
    docs: u32,
}

impl SegDict {
    fn open(dir: &Path, info: &SegmentInfo) -> Result<SegDict, TableError> {
        let path = seg_path(dir, info.id, "dict");
        let dict = fs::File::open(&path).map_err(|e| io_err(&path, e))?;
        let post_path = seg_path(dir, info.id, "post");
        let post = fs::File::open(&post_path).map_err(|e| io_err(&post_path, e))?;
        Ok(SegDict {
            path,
            dict: io::BufReader::new(dict),
            post: io::BufReader::new(post),
            line: Vec::new(),
            at: 0,
            docs: info.docs,
        })
    }

    fn damaged(&self, detail: String) -> TableError {
        TableError::Damaged {
            path: self.path.clone(),
            detail,
        }
    }

    fn past_count(&self) -> TableError {
        self.damaged(format!(
            "a posting past the segment's {} documents",
            self.docs
        ))
    }

    #[allow(clippy::type_complexity)]
    fn next_entry(&mut self) -> Result<Option<((u8, String), Vec<u32>)>, TableError> {
        use io::Read;
        if !next_line(&mut self.dict, &mut self.line, &self.path)? {
            return Ok(None);
        }
        let entry = SegReader::line(&self.line, 0).and_then(|(token, off, count)| {
            let field = *self.line.first()?;
            Some(((field, token.to_owned()), off, count))
        });
        let Some((key, off, count)) = entry.filter(|(_, off, _)| *off == self.at) else {
            return Err(self.damaged(format!("dictionary entry at posting {}", self.at)));
        };
        let mut bytes = vec![0u8; count as usize * 4];
        self.post
            .read_exact(&mut bytes)
            .map_err(|e| io_err(&self.path.with_extension("post"), e))?;
        self.at = off + count;
        let ids = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        Ok(Some((key, ids)))
    }
}

/// Read the next line of `path` into `line`; false at its end.
fn next_line(
    read: &mut io::BufReader<fs::File>,
    line: &mut Vec<u8>,
    path: &Path,
) -> Result<bool, TableError> {
    line.clear();
    let got = io::BufRead::read_until(read, b'\n', line).map_err(|e| io_err(path, e))?;
    Ok(got > 0)
}

/// A segment's `docs` file read one record at a time.
struct SegDocs {
    path: PathBuf,
    read: io::BufReader<fs::File>,
    line: Vec<u8>,
    n: usize,
}

impl SegDocs {
    fn open(dir: &Path, info: &SegmentInfo) -> Result<SegDocs, TableError> {
        let path = seg_path(dir, info.id, "docs");
        let file = fs::File::open(&path).map_err(|e| io_err(&path, e))?;
        Ok(SegDocs {
            path,
            read: io::BufReader::new(file),
            line: Vec::new(),
            n: 0,
        })
    }

    fn next_doc(&mut self) -> Result<Option<TableDoc>, TableError> {
        if !next_line(&mut self.read, &mut self.line, &self.path)? {
            return Ok(None);
        }
        let doc = parse_record(&self.line).ok_or_else(|| TableError::Damaged {
            path: self.path.clone(),
            detail: format!("record {}", self.n),
        })?;
        self.n += 1;
        Ok(Some(doc))
    }

    fn past_count(&self) -> TableError {
        TableError::Damaged {
            path: self.path.clone(),
            detail: format!("more records than the {} the state names", self.n),
        }
    }
}

/// One file of a segment being written: streamed through a buffer into a temp name beside
/// it (`seg-<id>.<part>.tmp`, which `clear` and `remove_unreferenced` sweep as the
/// segment's own), renamed once whole. Unsynced like every part: the table's dirty marker is
/// down while segments are written, so a torn one is never read.
struct PartWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: io::BufWriter<fs::File>,
    len: u64,
}

impl PartWriter {
    fn create(dir: &Path, id: u64, part: &str) -> Result<PartWriter, TableError> {
        let path = seg_path(dir, id, part);
        let tmp = seg_path(dir, id, &format!("{part}.tmp"));
        let file = fs::File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        Ok(PartWriter {
            path,
            tmp,
            out: io::BufWriter::with_capacity(64 * 1024, file),
            len: 0,
        })
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), TableError> {
        io::Write::write_all(&mut self.out, bytes).map_err(|e| io_err(&self.tmp, e))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    fn finish(self) -> Result<u64, TableError> {
        let file = self
            .out
            .into_inner()
            .map_err(|e| io_err(&self.tmp, e.into_error()))?;
        drop(file);
        fs::rename(&self.tmp, &self.path).map_err(|e| io_err(&self.path, e))?;
        Ok(self.len)
    }
}

/// A segment being written: its documents, in path order without duplicates, go to the
/// `docs` and `meta` files as they come; the postings, in dictionary order, at the end. What
/// it holds is the project keys.
struct SegWriter {
    dir: PathBuf,
    id: u64,
    count: u32,
    text: PartWriter,
    meta: PartWriter,
    pks: Vec<String>,
    counts: Vec<(u64, u64)>,
    /// The smallest and largest date written ([`SegmentInfo::dates`]).
    dates: (i64, i64),
}

impl SegWriter {
    fn create(dir: &Path, id: u64) -> Result<SegWriter, TableError> {
        Ok(SegWriter {
            dir: dir.to_path_buf(),
            id,
            count: 0,
            text: PartWriter::create(dir, id, PARTS[0])?,
            meta: PartWriter::create(dir, id, PARTS[1])?,
            pks: Vec::new(),
            counts: Vec::new(),
            dates: NO_DATES,
        })
    }

    /// Write `doc`'s record and metadata; returns its number in the segment.
    fn push(&mut self, doc: &TableDoc) -> Result<u32, TableError> {
        let n = self.count;
        self.count += 1;
        let offset = u32::try_from(self.text.len).map_err(|_| TableError::Damaged {
            path: seg_path(&self.dir, self.id, "docs"),
            detail: "over 4 GiB of records in one segment".into(),
        })?;
        self.text.put(record(doc).as_bytes())?;
        let m = &doc.meta;
        let pk = match self.pks.iter().position(|p| *p == clean(&m.project_key)) {
            Some(i) => i,
            None => {
                self.pks.push(clean(&m.project_key));
                self.counts.push((0, 0));
                self.pks.len() - 1
            }
        };
        let mirror = doc.from_mirror();
        if mirror {
            self.counts[pk].1 += 1;
        } else {
            self.counts[pk].0 += 1;
        }
        let date = m
            .date
            .as_deref()
            .and_then(crate::time::parse_rfc3339_ms)
            .unwrap_or(NO_DATE);
        self.dates = (self.dates.0.min(date), self.dates.1.max(date));
        let mut flags = 0u8;
        if m.kind == "rule" && m.id.is_some() {
            flags |= FLAG_RULE;
        }
        if mirror {
            flags |= FLAG_MIRROR;
        }
        let mut row = [0u8; META_BYTES];
        row[..8].copy_from_slice(&date.to_le_bytes());
        row[8..12].copy_from_slice(&offset.to_le_bytes());
        row[12..14].copy_from_slice(&(pk as u16).to_le_bytes());
        row[14] = flags;
        self.meta.put(&row)?;
        Ok(n)
    }

    /// Write the dictionary, postings and skip list from `postings` (sorted by key), and
    /// close the segment.
    #[allow(clippy::type_complexity)]
    fn finish(
        self,
        postings: impl Iterator<Item = Result<((u8, String), Vec<u32>), TableError>>,
    ) -> Result<SegmentInfo, TableError> {
        let (dir, id) = (&self.dir, self.id);
        let mut dict = PartWriter::create(dir, id, PARTS[2])?;
        let mut post = PartWriter::create(dir, id, PARTS[3])?;
        let mut skip = PartWriter::create(dir, id, PARTS[4])?;
        let mut ids_written: u64 = 0;
        for (n, entry) in postings.enumerate() {
            let ((field, token), ids) = entry?;
            if n % SKIP_EVERY == 0 {
                skip.put(format!("{}\t{}\t{token}\n", dict.len, field as char).as_bytes())?;
            }
            dict.put(
                format!("{}\t{token}\t{ids_written}\t{}\n", field as char, ids.len()).as_bytes(),
            )?;
            for id in &ids {
                post.put(&id.to_le_bytes())?;
            }
            ids_written += ids.len() as u64;
        }
        let sizes = [
            self.text.finish()?,
            self.meta.finish()?,
            dict.finish()?,
            post.finish()?,
            skip.finish()?,
        ];
        Ok(SegmentInfo {
            id,
            docs: self.count,
            sizes,
            pks: self.pks,
            counts: self.counts,
            dates: Some(self.dates),
        })
    }
}

fn read_segment_docs(dir: &Path, info: &SegmentInfo) -> Result<Vec<TableDoc>, TableError> {
    let path = seg_path(dir, info.id, "docs");
    let bytes = fs::read(&path).map_err(|e| io_err(&path, e))?;
    let mut out = Vec::with_capacity(info.docs as usize);
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        out.push(parse_record(line).ok_or_else(|| TableError::Damaged {
            path: path.clone(),
            detail: format!("record {}", out.len()),
        })?);
    }
    Ok(out)
}

struct Meta {
    date: i64,
    pk: u16,
    flags: u8,
}

/// Document `id`'s date (UTC milliseconds, [`NO_DATE`]) in a segment's loaded metadata
/// (`id` checked against the segment's count by [`SegReader::postings`]).
fn meta_date(metas: &[u8], id: u32) -> i64 {
    let at = id as usize * META_BYTES;
    i64::from_le_bytes(metas[at..at + 8].try_into().expect("8 bytes"))
}

/// A segment opened for lookups: each file read on demand — an exact lookup (an index
/// update's) reads the small skip list and one dictionary block; a query's substring
/// lookups and ranking load the whole dictionary and metadata, once.
struct SegReader {
    dict_file: fs::File,
    meta_file: fs::File,
    dict_path: PathBuf,
    dict_len: u64,
    /// The dictionary with a leading `\n`, so every line starts after one.
    dict: std::cell::OnceCell<Vec<u8>>,
    meta_path: PathBuf,
    meta: std::cell::OnceCell<Vec<u8>>,
    skip_path: PathBuf,
    /// (dictionary offset, `F\ttoken\t`) of every [`SKIP_EVERY`]th line.
    skip: std::cell::OnceCell<Vec<(u64, Vec<u8>)>>,
    post: fs::File,
    post_path: PathBuf,
    docs: fs::File,
    docs_path: PathBuf,
    docs_len: u64,
    count: u32,
    /// Where each dictionary line starts, found on the first in-memory exact lookup.
    lines: std::cell::OnceCell<Vec<u32>>,
}

/// The value of a once-cell, computed by `init` the first time (which may fail).
fn once<T>(
    cell: &std::cell::OnceCell<T>,
    init: impl FnOnce() -> Result<T, TableError>,
) -> Result<&T, TableError> {
    if let Some(v) = cell.get() {
        return Ok(v);
    }
    let v = init()?;
    Ok(cell.get_or_init(|| v))
}

impl SegReader {
    fn open(dir: &Path, info: &SegmentInfo) -> Result<SegReader, TableError> {
        let open = |part: &str| {
            let p = seg_path(dir, info.id, part);
            fs::File::open(&p)
                .map(|f| (f, p.clone()))
                .map_err(|e| io_err(&p, e))
        };
        let (post, post_path) = open("post")?;
        let (docs, docs_path) = open("docs")?;
        let (dict_file, _) = open("dict")?;
        let (meta_file, _) = open("meta")?;
        Ok(SegReader {
            dict_file,
            meta_file,
            dict_path: seg_path(dir, info.id, "dict"),
            dict_len: info.sizes[2],
            dict: std::cell::OnceCell::new(),
            meta_path: seg_path(dir, info.id, "meta"),
            meta: std::cell::OnceCell::new(),
            skip_path: seg_path(dir, info.id, "skip"),
            skip: std::cell::OnceCell::new(),
            post,
            post_path,
            docs,
            docs_path,
            docs_len: info.sizes[0],
            count: info.docs,
            lines: std::cell::OnceCell::new(),
        })
    }

    fn dict(&self) -> Result<&[u8], TableError> {
        once(&self.dict, || {
            let bytes = fs::read(&self.dict_path).map_err(|e| io_err(&self.dict_path, e))?;
            let mut dict = Vec::with_capacity(bytes.len() + 1);
            dict.push(b'\n');
            dict.extend(bytes);
            Ok(dict)
        })
        .map(Vec::as_slice)
    }

    fn metas(&self) -> Result<&[u8], TableError> {
        once(&self.meta, || {
            let meta = fs::read(&self.meta_path).map_err(|e| io_err(&self.meta_path, e))?;
            if meta.len() != self.count as usize * META_BYTES {
                return Err(TableError::Damaged {
                    path: self.meta_path.clone(),
                    detail: format!("{} bytes for {} documents", meta.len(), self.count),
                });
            }
            Ok(meta)
        })
        .map(Vec::as_slice)
    }

    fn skips(&self) -> Result<&[(u64, Vec<u8>)], TableError> {
        once(&self.skip, || {
            let text = fs::read(&self.skip_path).map_err(|e| io_err(&self.skip_path, e))?;
            let mut out = Vec::new();
            for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let tab = memchr::memchr(b'\t', line);
                let offset = tab
                    .and_then(|t| std::str::from_utf8(&line[..t]).ok())
                    .and_then(|o| o.parse::<u64>().ok())
                    .filter(|o| *o < self.dict_len);
                let (Some(tab), Some(offset)) = (tab, offset) else {
                    return Err(TableError::Damaged {
                        path: self.skip_path.clone(),
                        detail: "a skip line without an offset in the dictionary".into(),
                    });
                };
                let mut key = line[tab + 1..].to_vec();
                key.push(b'\t');
                out.push((offset, key));
            }
            Ok(out)
        })
        .map(Vec::as_slice)
    }

    /// A record's (start, end) in `docs`: from the metadata when it is loaded, else one read
    /// of the two offsets (adjacent entries).
    fn record_span(&self, id: u32) -> Result<(u64, u64), TableError> {
        let at = id as usize * META_BYTES + 8;
        let last = id + 1 >= self.count;
        let mut bytes = [0u8; META_BYTES + 4];
        let want = if last { 4 } else { META_BYTES + 4 };
        match self.meta.get() {
            Some(meta) => bytes[..want].copy_from_slice(&meta[at..at + want]),
            None => self
                .meta_file
                .read_exact_at(&mut bytes[..want], at as u64)
                .map_err(|e| io_err(&self.meta_path, e))?,
        }
        let offset = |i: usize| {
            u64::from(u32::from_le_bytes(
                bytes[i..i + 4].try_into().expect("4 bytes"),
            ))
        };
        let end = if last {
            self.docs_len
        } else {
            offset(META_BYTES)
        };
        Ok((offset(0), end))
    }

    /// Document `id`'s record (one positioned read, two before the metadata is loaded).
    fn record(&self, id: u32) -> Result<TableDoc, TableError> {
        let damaged = || TableError::Damaged {
            path: self.docs_path.clone(),
            detail: format!("record {id}"),
        };
        if id >= self.count {
            return Err(damaged());
        }
        let (start, end) = self.record_span(id)?;
        if end < start || end > self.docs_len {
            return Err(damaged());
        }
        let mut bytes = vec![0u8; (end - start) as usize];
        self.docs
            .read_exact_at(&mut bytes, start)
            .map_err(|e| io_err(&self.docs_path, e))?;
        parse_record(&bytes).ok_or_else(damaged)
    }

    fn meta(&self, id: u32) -> Result<Meta, TableError> {
        let metas = self.metas()?;
        let at = id as usize * META_BYTES;
        let m = &metas[at..at + META_BYTES];
        Ok(Meta {
            date: meta_date(metas, id),
            pk: u16::from_le_bytes(m[12..14].try_into().expect("2 bytes")),
            flags: m[14],
        })
    }

    /// The dictionary line starting at `start` (just after a `\n`): token, offset, count.
    fn line(dict: &[u8], start: usize) -> Option<(&str, u64, u64)> {
        let end = memchr::memchr(b'\n', &dict[start..])? + start;
        let text = std::str::from_utf8(dict.get(start + 2..end)?).ok()?;
        let mut parts = text.rsplitn(3, '\t');
        let count = parts.next()?.parse().ok()?;
        let off = parts.next()?.parse().ok()?;
        Some((parts.next()?, off, count))
    }

    /// Entries of `field` whose token contains `term`.
    fn containing(&self, field: u8, term: &str) -> Result<Vec<(String, u64, u64)>, TableError> {
        let dict = self.dict()?;
        let mut out = Vec::new();
        let mut last = usize::MAX;
        for occ in memchr::memmem::find_iter(dict, term.as_bytes()) {
            let start = memchr::memrchr(b'\n', &dict[..occ]).map_or(0, |i| i + 1);
            if start == last || dict.get(start) != Some(&field) {
                continue;
            }
            let token_start = start + 2;
            let Some(tab) = memchr::memchr(b'\t', &dict[token_start..]) else {
                continue;
            };
            if occ < token_start || occ + term.len() > token_start + tab {
                continue;
            }
            last = start;
            if let Some((token, off, count)) = SegReader::line(dict, start) {
                out.push((token.to_owned(), off, count));
            }
        }
        Ok(out)
    }

    /// The entry of `field` whose token is exactly `token`: a binary search, the lines
    /// being sorted by field then token (a token never holds a byte below `\t`, so
    /// comparing `F\ttoken\t` prefixes orders lines as (field, token) pairs) — in memory
    /// when a query loaded the dictionary, else over the skip list and one block.
    fn exact(&self, field: u8, token: &str) -> Result<Option<(u64, u64)>, TableError> {
        let key = format!("{}\t{token}\t", field as char);
        let key = key.as_bytes();
        let order = |line: &[u8]| {
            let n = key.len().min(line.len());
            line[..n].cmp(key).then(if n < key.len() {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Equal
            })
        };
        if let Some(dict) = self.dict.get() {
            let lines = self.lines.get_or_init(|| {
                memchr::memchr_iter(b'\n', &dict[..dict.len().saturating_sub(1)])
                    .map(|i| (i + 1) as u32)
                    .collect()
            });
            let Ok(found) = lines.binary_search_by(|&start| order(&dict[start as usize..])) else {
                return Ok(None);
            };
            let start = lines[found] as usize;
            return Ok(SegReader::line(dict, start).map(|(_, off, count)| (off, count)));
        }
        let skips = self.skips()?;
        // The last block whose first key is not past the key.
        let block = skips.partition_point(|(_, first)| order(first) != std::cmp::Ordering::Greater);
        let Some(block) = block.checked_sub(1) else {
            return Ok(None);
        };
        let from = skips[block].0;
        let to = skips.get(block + 1).map_or(self.dict_len, |(o, _)| *o);
        let mut bytes = vec![0u8; to.saturating_sub(from) as usize + 1];
        bytes[0] = b'\n';
        self.dict_file
            .read_exact_at(&mut bytes[1..], from)
            .map_err(|e| io_err(&self.dict_path, e))?;
        let mut start = 1;
        while start < bytes.len() {
            let line = &bytes[start..];
            match order(line) {
                std::cmp::Ordering::Equal => {
                    return Ok(SegReader::line(&bytes, start).map(|(_, off, count)| (off, count)))
                }
                std::cmp::Ordering::Greater => return Ok(None),
                std::cmp::Ordering::Less => {}
            }
            start += memchr::memchr(b'\n', line).map_or(line.len(), |i| i + 1);
        }
        Ok(None)
    }

    fn postings(&self, off: u64, count: u64) -> Result<Vec<u32>, TableError> {
        let mut bytes = vec![0u8; count as usize * 4];
        self.post
            .read_exact_at(&mut bytes, off * 4)
            .map_err(|e| io_err(&self.post_path, e))?;
        let ids: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        // A garbled cache must be an error, never an index out of bounds.
        if ids.iter().any(|id| *id >= self.count) {
            return Err(TableError::Damaged {
                path: self.post_path.clone(),
                detail: format!("a posting past the segment's {} documents", self.count),
            });
        }
        Ok(ids)
    }
}

// --- state, folder states, per-folder document lists, change log ---------------------

/// Present while the files beside the state may be ahead of it (a refresh writing them).
const DIRTY_FILE: &str = "dirty";
const FOLDERS_DIR: &str = "folders";
const SOURCES_DIR: &str = "sources";
const LOG_FILE: &str = "changes.tsv";
/// A refresh changing more folders than this (a first build, a big pull) logs none of them:
/// an index built before it compares everything once.
const LOG_MAX_FOLDERS: usize = 256;
/// Past this size the change log keeps its newer half.
const LOG_MAX_BYTES: u64 = 64 * 1024;
/// The blob id of a document that could not be read.
const UNREADABLE: &str = "-";

/// The state, if it is whole: no refresh died writing beside it, and every segment it
/// names present with its recorded size.
fn load_state(dir: &Path) -> Option<State> {
    if dir.join(DIRTY_FILE).exists() {
        return None;
    }
    let bytes = fs::read(dir.join(STATE_FILE)).ok()?;
    let state: State = serde_json::from_slice(&bytes).ok()?;
    if state.v != TABLE_VERSION {
        return None;
    }
    for seg in &state.segments {
        for (part, size) in PARTS.iter().zip(seg.sizes) {
            if fs::metadata(seg_path(dir, seg.id, part))
                .map(|m| m.len())
                .ok()
                != Some(size)
            {
                return None;
            }
        }
    }
    Some(state)
}

/// The date range of each segment a state written without it names, read from the
/// segment's `meta` (once: the state saved with them). Whether any was filled; a `meta` that
/// cannot be read leaves its segment without (read as spanning every date).
fn fill_dates(dir: &Path, segments: &mut [SegmentInfo]) -> bool {
    let mut filled = false;
    for info in segments.iter_mut().filter(|info| info.dates.is_none()) {
        let Ok(meta) = fs::read(seg_path(dir, info.id, "meta")) else {
            continue;
        };
        if meta.len() != info.docs as usize * META_BYTES {
            continue;
        }
        info.dates = Some((0..info.docs).fold(NO_DATES, |(min, max), id| {
            let date = meta_date(&meta, id);
            (min.min(date), max.max(date))
        }));
        filled = true;
    }
    filled
}

fn save_state(dir: &Path, state: &State) -> Result<(), TableError> {
    let bytes = serde_json::to_vec(state).expect("the table state always serializes");
    atomic::write_atomic_unsynced(&dir.join(STATE_FILE), &bytes)?;
    Ok(())
}

/// Start over: every segment, list and log goes.
fn clear(dir: &Path) -> Result<(), TableError> {
    for entry in fs::read_dir(dir).map_err(|e| io_err(dir, e))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("seg-") || [STATE_FILE, LOG_FILE].contains(&name.as_str()) {
            let _ = fs::remove_file(entry.path());
        } else if name == SOURCES_DIR || name == FOLDERS_DIR {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    let _ = fs::remove_file(dir.join(DIRTY_FILE));
    Ok(())
}

fn remove_unreferenced(dir: &Path, state: &State) {
    let live: BTreeSet<u64> = state.segments.iter().map(|s| s.id).collect();
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let id = name
            .strip_prefix("seg-")
            .and_then(|r| r.split('.').next())
            .and_then(|n| n.parse::<u64>().ok());
        if id.is_some_and(|id| !live.contains(&id)) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// A file's (length, mtime in ns): what tells a rewritten document from an unchanged one.
fn file_stamp(path: &Path) -> Option<(u64, u128)> {
    let meta = fs::metadata(path).ok()?;
    Some((meta.len(), stamp(meta.modified().ok()?)))
}

/// A key's file name: its digest, so any folder path maps to one portable name.
fn digest_name(key: &str, len: usize) -> String {
    crate::names::sha256_hex(key.as_bytes())[..len].to_owned()
}

/// The folder states, in 256 files by the first two hex digits of the SHA-256 of the
/// folder's key: an update reads and rewrites only the few it touches.
struct Folders {
    dir: PathBuf,
    parts: BTreeMap<String, BTreeMap<String, SourceState>>,
    dirty: BTreeSet<String>,
}

impl Folders {
    fn new(table_dir: &Path) -> Folders {
        Folders {
            dir: table_dir.join(FOLDERS_DIR),
            parts: BTreeMap::new(),
            dirty: BTreeSet::new(),
        }
    }

    fn part(&mut self, name: &str) -> Result<&mut BTreeMap<String, SourceState>, TableError> {
        if !self.parts.contains_key(name) {
            let path = self.dir.join(format!("{name}.tsv"));
            let text = match fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
                Err(e) => return Err(io_err(&path, e)),
            };
            let mut part = BTreeMap::new();
            for line in text.lines() {
                let f: Vec<&str> = line.split('\t').collect();
                let parsed = (f.len() == 4)
                    .then(|| Some((f[1].parse().ok()?, f[2].parse().ok()?)))
                    .flatten();
                let Some((mtime, files)) = parsed else {
                    return Err(TableError::Damaged {
                        path,
                        detail: format!("folder line {line:?}"),
                    });
                };
                part.insert(
                    f[0].to_owned(),
                    SourceState {
                        mtime,
                        files,
                        hash: f[3].to_owned(),
                    },
                );
            }
            self.parts.insert(name.to_owned(), part);
        }
        Ok(self.parts.get_mut(name).expect("inserted above"))
    }

    fn get(&mut self, key: &str) -> Result<Option<SourceState>, TableError> {
        Ok(self.part(&digest_name(key, 2))?.get(key).cloned())
    }

    fn set(&mut self, key: &str, state: SourceState) {
        let name = digest_name(key, 2);
        // Loaded by the `get` every visit makes first.
        if let Some(part) = self.parts.get_mut(&name) {
            part.insert(key.to_owned(), state);
            self.dirty.insert(name);
        }
    }

    fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    fn all(&mut self) -> Result<BTreeMap<String, SourceState>, TableError> {
        let names = list_names(&self.dir, |name, kind| {
            kind.is_file() && name.len() == 6 && name.ends_with(".tsv")
        })?;
        let mut out = BTreeMap::new();
        for name in names {
            let stem = name.trim_end_matches(".tsv").to_owned();
            out.extend(self.part(&stem)?.clone());
        }
        Ok(out)
    }

    fn save(&self) -> Result<(), TableError> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        fs::create_dir_all(&self.dir).map_err(|e| io_err(&self.dir, e))?;
        for name in &self.dirty {
            let text: String = self.parts[name]
                .iter()
                .map(|(k, s)| format!("{k}\t{}\t{}\t{}\n", s.mtime, s.files, s.hash))
                .collect();
            atomic::write_atomic_unsynced(&self.dir.join(format!("{name}.tsv")), text.as_bytes())?;
        }
        Ok(())
    }
}

/// What the table knows of one file of a folder: its blob id ([`UNREADABLE`] when it could
/// not be read) and its (length, mtime) when it was read.
#[derive(Debug, Clone, PartialEq)]
struct Known {
    blob: String,
    stamp: Option<(u64, u128)>,
}

fn known_path(dir: &Path, key: &str) -> PathBuf {
    dir.join(SOURCES_DIR)
        .join(format!("{}.tsv", digest_name(key, 32)))
}

/// The files already read from one folder.
fn read_known(dir: &Path, key: &str) -> Result<BTreeMap<String, Known>, TableError> {
    let path = known_path(dir, key);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(io_err(&path, e)),
    };
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            let name = f.next()?;
            let blob = f.next()?;
            let stamp = match (f.next(), f.next()) {
                (Some(len), Some(mtime)) => Some((len.parse().ok()?, mtime.parse().ok()?)),
                _ => None,
            };
            Some((
                name.to_owned(),
                Known {
                    blob: blob.to_owned(),
                    stamp,
                },
            ))
        })
        .collect())
}

fn write_known(dir: &Path, key: &str, known: &BTreeMap<String, Known>) -> Result<(), TableError> {
    let path = known_path(dir, key);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
    }
    let text: String = known
        .iter()
        .map(|(n, k)| match k.stamp {
            Some((len, mtime)) => format!("{n}\t{}\t{len}\t{mtime}\n", k.blob),
            None => format!("{n}\t{}\n", k.blob),
        })
        .collect();
    atomic::write_atomic_unsynced(&path, text.as_bytes())?;
    Ok(())
}

/// Append one revision's folder changes to the change log (`rev TAB folder TAB names TAB
/// old labels`, lists joined by U+001F), keeping the log bounded: a refresh that changed
/// too many folders is not logged, and a long log keeps its newer half — either way the
/// floor rises, and an index built before it compares everything once.
fn append_log(dir: &Path, state: &mut State, changed: &[FolderChange]) -> Result<(), TableError> {
    let path = dir.join(LOG_FILE);
    if changed.len() > LOG_MAX_FOLDERS {
        let _ = fs::remove_file(&path);
        state.log_floor = state.rev;
        return Ok(());
    }
    let mut text = String::new();
    for c in changed {
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            state.rev,
            clean(&c.folder),
            c.names
                .iter()
                .map(|n| clean(n))
                .collect::<Vec<_>>()
                .join("\u{1f}"),
            c.old_labels
                .iter()
                .map(|n| clean(n))
                .collect::<Vec<_>>()
                .join("\u{1f}"),
        ));
    }
    let mut file = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    io::Write::write_all(&mut file, text.as_bytes()).map_err(|e| io_err(&path, e))?;
    let len = file.metadata().map_err(|e| io_err(&path, e))?.len();
    drop(file);
    if len > LOG_MAX_BYTES {
        let all = fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
        let cut = all.len() - all.len() / 2;
        let cut = all[..cut].rfind('\n').map_or(0, |i| i + 1);
        // The floor is the newest revision dropped; its other lines go too, so a revision
        // is in the log whole or not at all.
        let floor = all[..cut]
            .lines()
            .filter_map(|l| l.split('\t').next()?.parse::<u64>().ok())
            .max()
            .unwrap_or(state.log_floor);
        let kept: String = all[cut..]
            .lines()
            .filter(|l| {
                l.split('\t')
                    .next()
                    .and_then(|r| r.parse::<u64>().ok())
                    .is_some_and(|r| r > floor)
            })
            .map(|l| format!("{l}\n"))
            .collect();
        atomic::write_atomic_unsynced(&path, kept.as_bytes())?;
        state.log_floor = state.log_floor.max(floor);
    }
    Ok(())
}

/// The change log's entries, by revision.
fn read_log(dir: &Path) -> Result<Vec<(u64, FolderChange)>, TableError> {
    let path = dir.join(LOG_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(&path, e)),
    };
    let list = |s: &str| -> Vec<String> {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split('\u{1f}').map(str::to_owned).collect()
        }
    };
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let rev = (f.len() == 4).then(|| f[0].parse::<u64>().ok()).flatten();
        let Some(rev) = rev else {
            return Err(TableError::Damaged {
                path,
                detail: format!("change log line {line:?}"),
            });
        };
        out.push((
            rev,
            FolderChange {
                folder: f[1].to_owned(),
                names: list(f[2]),
                old_labels: list(f[3]),
            },
        ));
    }
    Ok(out)
}

/// The root a document folder's documents belong to, if `key` names a document folder of
/// this door: `.dsh-chapters/<root>/chapters`, `.dsh-chapters/rules`, and when linked
/// `.dsh-knowledge/chapters/<pk>/<root>` and `.dsh-knowledge/rules/<pk>`.
fn source_root(key: &str, linked: bool) -> Option<String> {
    let parts: Vec<&str> = key.split('/').collect();
    if !parts[1..].iter().all(|p| is_safe_component(p)) {
        return None;
    }
    match parts.as_slice() {
        [STORE_DIR, RULES_DIR] => Some(RULES_DIR.to_owned()),
        [STORE_DIR, root, "chapters"] => Some((*root).to_owned()),
        [MIRROR_DIR, RULES_DIR, _] | [MIRROR_DIR, RULES_DIR, _, _] if linked => {
            Some(RULES_DIR.to_owned())
        }
        [MIRROR_DIR, "chapters", _, root] if linked => Some((*root).to_owned()),
        _ => None,
    }
}

/// Names the other side already holds for the same root session (store ↔ mirror), or for
/// the same rule (the store's rules ↔ every project's rules in the mirror): one document is
/// read once, whichever copy was seen first.
fn twin_names(
    dir: &Path,
    workspace: &Path,
    key: &str,
    root: &str,
    linked: bool,
    mirror_pks: &[String],
) -> Result<BTreeSet<String>, TableError> {
    let store_rules = format!("{STORE_DIR}/{RULES_DIR}");
    let mirror_rules = |pk: &str| format!("{MIRROR_DIR}/{RULES_DIR}/{pk}");
    let mut twins: Vec<String> = Vec::new();
    if key == store_rules || key.starts_with(&format!("{MIRROR_DIR}/{RULES_DIR}/")) {
        // The same rule proposed on two machines: one id, one file in each place.
        twins.push(store_rules.clone());
        if linked {
            for pk in list_dirs(&workspace.join(MIRROR_DIR).join(RULES_DIR))? {
                twins.push(mirror_rules(&pk));
            }
        }
    } else if key.starts_with(MIRROR_DIR) {
        twins.push(format!("{STORE_DIR}/{root}/chapters"));
    } else if linked {
        for pk in mirror_pks {
            twins.push(format!("{MIRROR_DIR}/chapters/{pk}/{root}"));
        }
    }
    let mut out = BTreeSet::new();
    for twin in twins.iter().filter(|t| t.as_str() != key) {
        out.extend(read_known(dir, twin)?.into_keys());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record's field keeps its spaces and has no control character (a tab would split
    /// the record) — with none (the whole-field copy) and with some (the character walk).
    #[test]
    fn a_record_field_has_no_control_character() {
        assert_eq!(clean(" Fix the middleware "), " Fix the middleware ");
        assert_eq!(clean("Fix\tthe\nmiddleware\u{7}"), "Fix the middleware ");
        assert_eq!(clean("écrit · ok"), "écrit · ok");
    }

    fn chapter(title: &str, summary: &str, kind: &str, topics: &str, date: &str) -> String {
        format!(
            "---\ntitle: \"{title}\"\nsummary: \"{summary}\"\nkind: {kind}\nprojectKey: \"pk\"\ntopics: [{topics}]\ndate: {date}\nid: r-{title}\n---\nbody\n"
        )
    }

    /// The catalog's `readable` column and this table's reader agree on what is a document
    /// (status counts from the one where the other was): the writers' shapes, the original
    /// plugin's, and each way a file is not one.
    #[test]
    fn the_catalogs_readable_is_what_the_table_reads() {
        let long = format!(
            "---\ntitle: t\nsummary: \"{}\"\n---\nbody\n",
            "x".repeat(300_000)
        );
        let docs: Vec<Vec<u8>> = vec![
            chapter("A", "s", "chapter", "a, b", "2025-01-01T00:00:00Z").into_bytes(),
            b"---\ntitle: plugin chapter\n---\n# t\n\n> s\n".to_vec(),
            b"---\ntitle: T\nkind: rule\ntopics:\n  - a\n---\n".to_vec(),
            b"".to_vec(),
            b"no frontmatter\n".to_vec(),
            b"---\nkind: chapter\n---\n".to_vec(),
            b"---\ntitle: t\n".to_vec(),
            b"---\ntitle: \xff\n---\n".to_vec(),
            b"---\ntitle: [unclosed\n---\n".to_vec(),
            long.into_bytes(),
        ];
        let mut readable = 0;
        for bytes in docs {
            let table = parse_head(&bytes).is_ok();
            let row = catalog::RowMeta::of_bytes(&bytes).readable;
            assert_eq!(
                row,
                table,
                "{}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
            );
            readable += usize::from(table);
        }
        assert_eq!(readable, 3, "both kinds of case are here");
    }

    fn put(ws: &Path, rel: &str, text: &str) {
        crate::testkit::catalog::put_document(ws, rel, text);
    }

    const NOW: i64 = 1_764_400_000_000;

    fn reference(
        table: &Table,
        terms: &[String],
        topic: Option<&str>,
        curation: &Curation,
        params: &ScoreParams,
    ) -> Vec<(String, f64)> {
        let docs: Vec<SearchDoc> = table
            .all_docs()
            .expect("docs")
            .iter()
            .filter(|d| d.meta.project_key == "pk")
            .map(|d| d.search_doc(curation, "m1"))
            .collect();
        let q = score::Query {
            terms: terms.to_vec(),
            topic: topic.map(str::to_owned),
        };
        score::rank(&docs, &q, NOW, params)
            .iter()
            .map(|r| (r.doc.path.clone(), r.score))
            .collect()
    }

    fn table_answer(
        table: &Table,
        terms: &[String],
        topic: Option<&str>,
        curation: &Curation,
        params: &ScoreParams,
    ) -> Vec<(String, f64)> {
        let q = TableQuery {
            terms,
            topic,
            project_key: "pk",
            cross_project: false,
            include_mirror: true,
            curation,
            harness: "m1",
            params,
            now_ms: NOW,
            resolve: usize::MAX,
        };
        table
            .search(&q)
            .expect("search")
            .iter()
            .map(|f| {
                (
                    table.doc(f.seg, f.id).expect("doc").into_inner().path,
                    f.score,
                )
            })
            .collect()
    }

    #[test]
    fn the_table_answers_exactly_as_the_reference_ranking() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let mut n = 0;
        let mut add = |ws: &Path, root: &str, text: String| {
            n += 1;
            put(
                ws,
                &format!(".dsh-chapters/{root}/chapters/{n:03}-x.md"),
                &text,
            );
        };
        add(
            ws,
            "s1",
            chapter(
                "Auth fix",
                "the OAuth bug",
                "chapter",
                "auth, middleware",
                "\"2025-11-20T00:00:00Z\"",
            ),
        );
        add(
            ws,
            "s1",
            chapter("CSV export", "header row", "plan", "csv", "null"),
        );
        add(
            ws,
            "s2",
            chapter(
                "Tokenizer",
                "auth tokens",
                "rule",
                "authentication, Tokens",
                "\"2025-10-01T00:00:00Z\"",
            ),
        );
        add(ws, "s2", chapter("Same", "same", "chapter", "same", "null"));
        add(ws, "s3", chapter("Same", "same", "chapter", "same", "null"));
        put(
            ws,
            ".dsh-chapters/s3/chapters/999-bad.md",
            "no frontmatter\n",
        );
        let (table, r) = Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
        assert_eq!(r.added, 5);
        assert_eq!(table.unreadable().len(), 1);
        // A second batch lands in a new segment; the answer spans both.
        add(
            ws,
            "s4",
            chapter(
                "Auth again",
                "",
                "chapter",
                "auth",
                "\"2025-11-28T00:00:00Z\"",
            ),
        );
        let (table, r) = Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
        assert_eq!(r.added, 1);
        let (table2, r) = Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
        assert_eq!(r.added, 0, "nothing new is read twice");
        drop(table2);

        let mut curation = Curation::default();
        let mut params = ScoreParams {
            core_rule_bonus: 0.15,
            ..ScoreParams::default()
        };
        for (terms, topic) in [
            ("auth", None),
            ("auth csv plan", None),
            ("same", None),
            ("tokens rule", None),
            ("zebra", None),
            ("", Some("auth")),
            ("fix", Some("auth")),
        ] {
            let terms = score::query_terms(terms);
            assert_eq!(
                table_answer(&table, &terms, topic, &curation, &params),
                reference(&table, &terms, topic, &curation, &params),
                "{terms:?} {topic:?}"
            );
        }
        // Curation: an alias, a weight and an approved rule change both answers alike.
        use crate::curation::{Author, Fact, FactKind, SourcedFact};
        let fact = |kind, at: &str| {
            let mut f = Fact::new(kind, Author::User, at);
            f.by = Some("Ana".into());
            SourcedFact {
                harness: "m1".into(),
                line: 1,
                fact: f,
            }
        };
        curation = Curation::fold([
            fact(
                FactKind::TopicAlias {
                    from: "auth".into(),
                    to: "identity".into(),
                },
                "1",
            ),
            fact(
                FactKind::RuleStatus {
                    rule: "r-Tokenizer".into(),
                    status: RuleStatus::Approved,
                },
                "2",
            ),
            fact(
                FactKind::Weight {
                    topic: "identity".into(),
                    weight: 2.5,
                },
                "3",
            ),
        ]);
        params.curation = curation.clone();
        for (terms, topic) in [
            ("identity", None),
            ("auth", None),
            ("tokens", None),
            ("", Some("identity")),
        ] {
            let terms = score::query_terms(terms);
            let got = table_answer(&table, &terms, topic, &curation, &params);
            assert_eq!(
                got,
                reference(&table, &terms, topic, &curation, &params),
                "{terms:?}"
            );
            assert!(!got.is_empty(), "{terms:?} {topic:?}");
        }
    }

    fn refresh(ws: &Path) -> (Table, Refresh) {
        Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh")
    }

    fn paths(table: &Table) -> Vec<String> {
        table
            .all_docs()
            .expect("docs")
            .into_iter()
            .map(|d| d.into_inner().path)
            .collect()
    }

    /// A file written without a record: a hand copy, or a writer older than the catalog.
    fn put_by_hand(ws: &Path, rel: &str, text: &str) {
        let p = ws.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    #[test]
    fn the_catalog_names_what_a_refresh_reads_and_a_rescan_finds_the_rest() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let doc = |t: &str| chapter(t, "", "chapter", "x", "null");
        put(ws, ".dsh-chapters/s1/chapters/001-a.md", &doc("A"));
        let (_, r) = refresh(ws);
        assert_eq!(r.rescan.as_deref(), Some("the table is new"));
        // Recorded: read without listing any other folder.
        put(ws, ".dsh-chapters/s1/chapters/002-b.md", &doc("B"));
        put(ws, ".dsh-chapters/s2/chapters/001-c.md", &doc("C"));
        let (table, r) = refresh(ws);
        assert_eq!((r.rescan.as_deref(), r.added, r.folders), (None, 2, 2));
        assert_eq!(paths(&table).len(), 3);
        // Not recorded: a catalog refresh does not see it ...
        put_by_hand(ws, ".dsh-chapters/s3/chapters/001-d.md", &doc("D"));
        put_by_hand(ws, ".dsh-chapters/s1/chapters/003-e.md", &doc("E"));
        let (table, r) = refresh(ws);
        assert_eq!((r.rescan.as_deref(), r.added), (None, 0));
        assert_eq!(paths(&table).len(), 3);
        // ... a recorded neighbour's folder listing does (a file in a named folder) ...
        put(ws, ".dsh-chapters/s1/chapters/004-f.md", &doc("F"));
        let (table, r) = refresh(ws);
        assert_eq!(r.added, 2, "004-f named, 003-e listed beside it");
        assert_eq!(paths(&table).len(), 5);
        // ... and a rescan finds the rest.
        let (table, r) = Table::rescan(ws, false, Duration::from_secs(5)).expect("rescan");
        assert!(r.rescan.is_some());
        assert_eq!(r.added, 1);
        assert_eq!(paths(&table).len(), 6);
        assert_eq!(refresh(ws).1.added, 0, "nothing read twice");
    }

    #[test]
    fn a_missing_or_restarted_catalog_and_the_periodic_rescan_list_every_folder() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let doc = |t: &str| chapter(t, "", "chapter", "x", "null");
        put(ws, ".dsh-chapters/s1/chapters/001-a.md", &doc("A"));
        refresh(ws);
        put_by_hand(ws, ".dsh-chapters/s2/chapters/001-b.md", &doc("B"));
        fs::remove_file(catalog::catalog_path(&ws.join(STORE_DIR))).expect("rm catalog");
        let (table, r) = refresh(ws);
        assert!(
            r.rescan.as_deref().is_some_and(|w| w.contains("missing")),
            "{r:?}"
        );
        assert_eq!(paths(&table).len(), 2);
        // A writer that died holding the lock starts the catalog over: a rescan follows.
        put_by_hand(ws, ".dsh-chapters/s3/chapters/001-c.md", &doc("C"));
        catalog::start_over(&ws.join(STORE_DIR)).expect("restart");
        let (table, r) = refresh(ws);
        assert!(
            r.rescan
                .as_deref()
                .is_some_and(|w| w.contains("started over")),
            "{r:?}"
        );
        assert_eq!(paths(&table).len(), 3);
        // The periodic rescan: the last one long ago.
        put_by_hand(ws, ".dsh-chapters/s4/chapters/001-d.md", &doc("D"));
        assert_eq!(refresh(ws).1.added, 0);
        let dir = ws.join(STORE_DIR).join(TABLE_DIR);
        let mut state = load_state(&dir).expect("state");
        state.rescanned_ms -= FULL_RESCAN_EVERY.as_millis() as u64;
        save_state(&dir, &state).expect("save");
        let (table, r) = refresh(ws);
        assert_eq!(r.rescan.as_deref(), Some("the periodic full rescan"));
        assert_eq!(paths(&table).len(), 4);
        // Linking changes the folder set: the mirror's folders are listed at once.
        put_by_hand(ws, ".dsh-knowledge/chapters/pk/s9/001-m.md", &doc("M"));
        let (table, r) = Table::refresh(ws, true, Duration::from_secs(5)).expect("refresh");
        assert!(r.rescan.is_some());
        assert_eq!(paths(&table).len(), 5);
    }

    #[test]
    fn a_recorded_rewrite_replaces_the_document_and_logs_its_old_topics() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "", "chapter", "old1, old2", "null"),
        );
        let (table, _) = refresh(ws);
        let first = table.revision();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A annotated", "", "chapter", "new", "null"),
        );
        let (table, r) = refresh(ws);
        assert_eq!(r.added, 1);
        let docs = table.all_docs().expect("docs");
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].meta.topics, ["new"]);
        let changes = table.changes_since(first).expect("log").expect("known");
        assert_eq!(
            changes,
            [FolderChange {
                folder: ".dsh-chapters/s1/chapters".into(),
                names: vec!["001-a.md".into()],
                old_labels: vec!["old1".into(), "old2".into()],
            }]
        );
        assert_eq!(
            table.changes_since(table.revision()).expect("log"),
            Some(Vec::new())
        );
        // Another incarnation's revision, or one from the future, says nothing.
        let other = TableRev {
            id: first.id + 1,
            ..first
        };
        assert_eq!(table.changes_since(other).expect("log"), None);
        let future = TableRev {
            rev: first.rev + 9,
            ..first
        };
        assert_eq!(table.changes_since(future).expect("log"), None);
        assert_eq!("zz.1".parse::<TableRev>(), Err(()));
        assert_eq!(first.to_string().parse::<TableRev>(), Ok(first));
    }

    #[test]
    fn the_change_log_is_bounded_and_its_floor_rises() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s0/chapters/001-a.md",
            &chapter("A", "", "chapter", "x", "null"),
        );
        let (table, _) = refresh(ws);
        let start = table.revision();
        let long = "n".repeat(100);
        // Five long names a revision: ~560 bytes a line.
        for i in 0..(LOG_MAX_BYTES as usize / 400) {
            for k in 0..5 {
                put(
                    ws,
                    &format!(".dsh-chapters/s1/chapters/{i:04}-{k}-{long}.md"),
                    &chapter("A", "", "chapter", "x", "null"),
                );
            }
            refresh(ws);
        }
        let (table, _) = refresh(ws);
        let len = fs::metadata(ws.join(STORE_DIR).join(TABLE_DIR).join(LOG_FILE))
            .expect("log")
            .len();
        assert!(len <= LOG_MAX_BYTES + 1024, "{len}");
        assert_eq!(
            table.changes_since(start).expect("log"),
            None,
            "below the floor"
        );
        let recent = TableRev {
            rev: table.revision().rev - 3,
            ..start
        };
        assert_eq!(
            table.changes_since(recent).expect("log").map(|c| c.len()),
            Some(3)
        );
        // A refresh that changes more folders than the log keeps logs none of them.
        for i in 0..=LOG_MAX_FOLDERS {
            put(
                ws,
                &format!(".dsh-chapters/r{i:04}/chapters/001-a.md"),
                &chapter("A", "", "chapter", "x", "null"),
            );
        }
        let (after, r) = refresh(ws);
        assert_eq!(r.added, LOG_MAX_FOLDERS + 1);
        assert!(after
            .changes_since(table.revision())
            .expect("log")
            .is_none());
        assert_eq!(
            after.changes_since(after.revision()).expect("log"),
            Some(Vec::new())
        );
    }

    #[test]
    fn a_refresh_that_died_writing_leaves_a_table_that_is_rebuilt() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "", "chapter", "x", "null"),
        );
        refresh(ws);
        let dir = ws.join(STORE_DIR).join(TABLE_DIR);
        fs::write(dir.join(DIRTY_FILE), "").expect("marker");
        let (table, r) = refresh(ws);
        assert!(r.rebuilt);
        assert_eq!(paths(&table).len(), 1);
        assert!(!dir.join(DIRTY_FILE).exists());
        // A garbled folder-state part is an error naming the cache, never a panic.
        let folders = dir.join(FOLDERS_DIR);
        let part = fs::read_dir(&folders)
            .expect("folders")
            .flatten()
            .next()
            .expect("a part");
        fs::write(part.path(), "garbage\n").expect("garble");
        let err = table.all_sources().expect_err("damaged");
        assert!(err.to_string().contains("delete .search"), "{err}");
    }

    #[test]
    fn an_exact_lookup_through_the_skip_list_equals_the_whole_dictionary() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        for i in 0..150 {
            put(
                ws,
                &format!(".dsh-chapters/s{}/chapters/{i:03}-a.md", i % 7),
                &chapter(
                    &format!("T{i} w{}", i * 7),
                    "",
                    "chapter",
                    &format!("t{i}, u{}", i % 13),
                    "null",
                ),
            );
        }
        let (table, _) = refresh(ws);
        let info = &table.state.segments[0];
        let whole = SegReader::open(&table.dir, info).expect("open");
        let dict = whole.dict().expect("dict").to_vec();
        let mut keys: Vec<(u8, String)> = Vec::new();
        let mut start = 1;
        while start < dict.len() {
            let (token, _, _) = SegReader::line(&dict, start).expect("line");
            keys.push((dict[start], token.to_owned()));
            start += memchr::memchr(b'\n', &dict[start..]).expect("newline") + 1;
        }
        assert!(
            keys.len() > 3 * SKIP_EVERY,
            "{} lines: several blocks",
            keys.len()
        );
        // Absent keys before, between and after the present ones.
        let mut probes = keys.clone();
        probes.extend([
            (b'A', "x".to_owned()),
            (FIELD_TOPIC, "t0a".to_owned()),
            (FIELD_TOPIC, "zzz".to_owned()),
            (b'z', "x".to_owned()),
            (FIELD_TITLE, String::new()),
        ]);
        for (field, token) in &probes {
            let skipping = SegReader::open(&table.dir, info).expect("open");
            let by_skip = skipping.exact(*field, token).expect("skip");
            assert!(skipping.dict.get().is_none(), "the dictionary was not read");
            let in_memory = whole.exact(*field, token).expect("memory");
            assert_eq!(by_skip, in_memory, "{} {token}", *field as char);
            assert_eq!(
                by_skip.is_some(),
                keys.contains(&(*field, token.clone())),
                "{} {token}",
                *field as char
            );
        }
        // Records read through single metadata reads equal those read with it loaded.
        let lazy = SegReader::open(&table.dir, info).expect("open");
        for id in 0..info.docs {
            assert_eq!(lazy.record(id).expect("lazy"), {
                whole.metas().expect("metas");
                whole.record(id).expect("loaded")
            });
        }
        assert!(lazy.meta.get().is_none());
    }

    #[test]
    fn a_damaged_table_is_rebuilt_not_trusted() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "", "chapter", "x", "null"),
        );
        Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
        let dir = ws.join(".dsh-chapters").join(TABLE_DIR);
        let seg = fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".docs"))
            .expect("a segment");
        fs::write(seg.path(), "torn").expect("tear");
        let (table, r) = Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
        assert!(r.rebuilt);
        assert_eq!(table.all_docs().expect("docs").len(), 1);
        fs::write(dir.join(STATE_FILE), "{garbage").expect("garble");
        let (table, r) = Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
        assert!(r.rebuilt);
        assert_eq!(table.counts("pk", false, false), (1, 0));
    }

    #[test]
    fn garbled_postings_are_an_error_not_a_panic() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("Alpha", "", "chapter", "x", "null"),
        );
        let (table, _) = Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
        let dir = ws.join(".dsh-chapters").join(TABLE_DIR);
        let post = fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".post"))
            .expect("postings");
        let len = fs::metadata(post.path()).expect("len").len() as usize;
        fs::write(post.path(), vec![0xff; len]).expect("garble, same size");
        let curation = Curation::default();
        let params = ScoreParams::default();
        let terms = score::query_terms("alpha");
        let q = TableQuery {
            terms: &terms,
            topic: None,
            project_key: "pk",
            cross_project: false,
            include_mirror: false,
            curation: &curation,
            harness: "m",
            params: &params,
            now_ms: NOW,
            resolve: 10,
        };
        let err = Table::open(&ws.join(".dsh-chapters"))
            .search(&q)
            .expect_err("damaged");
        assert!(err.to_string().contains("delete .search"), "{err}");
        drop(table);
    }

    #[test]
    fn the_typescript_plugins_documents_read_as_chapters_of_their_folders_project() {
        let doc = b"---\ntitle: \"Tune the backoff\"\nseqRange: [4, 15]\nevents: 12\ntokens: 9  # chars/4 estimate\ntopics: [\"Backoff\"]\nunrenderedSeqs: []\n---\n# Tune the backoff\n\n> Capped at 30 s.\n\n**User:**\n";
        let m = parse_head(doc).expect("a chapter");
        assert_eq!(
            (m.kind.as_str(), m.summary.as_str(), m.topics.as_slice()),
            ("chapter", "Capped at 30 s.", &["backoff".to_owned()][..])
        );
        // A summary in the frontmatter wins; a body of another shape gives none.
        let ours = parse_head(b"---\ntitle: t\nsummary: s\n---\n# t\n\n> q\n").expect("ok");
        assert_eq!(ours.summary, "s");
        assert_eq!(
            parse_head(b"---\ntitle: t\n---\nplain\n")
                .expect("ok")
                .summary,
            ""
        );
        for (folder, pk) in [
            (".dsh-knowledge/chapters/pk1/root", Some("pk1")),
            (".dsh-knowledge/rules/pk2", Some("pk2")),
            (".dsh-knowledge/rules/pk3/adrian-mbp", Some("pk3")),
            (".dsh-chapters/root/chapters", None),
            (".dsh-chapters/rules", None),
        ] {
            assert_eq!(mirror_folder_project_key(folder), pk, "{folder}");
        }
    }

    #[test]
    fn parse_head_refuses_hostile_input() {
        assert!(parse_head(b"").is_err());
        assert!(parse_head(b"title: x\n").is_err());
        assert!(parse_head(b"---\ntitle: x\nkind: chapter\n").is_err());
        assert!(parse_head(b"---\ntitle: [\n---\n").is_err());
        let huge = format!("---\ntitle: x\n{}", "k: v\n".repeat(100_000));
        assert!(parse_head(huge.as_bytes())
            .expect_err("huge")
            .contains("closing"));
        let m =
            parse_head(b"---\ntitle: x\nkind: chapter\ntopics: [\"Login Flow\", \"  \"]\n---\n")
                .expect("ok");
        assert_eq!(m.topics, ["login-flow"]);
        assert!(parse_head(b"---\ntitle: \xff\nkind: c\n---\n").is_err());
    }

    #[test]
    fn date_spans_hold_a_date_and_a_range_exactly_when_one_of_the_spans_does() {
        // Overlapping, touching, nested, repeated, empty and far-apart spans, as an index
        // update gives them (a day each, widened by a margin) beside a month's.
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as i64
        };
        for round in 0..300 {
            let spans: Vec<(i64, i64)> = (0..next(12))
                .map(|_| {
                    let from = next(1_000);
                    (from, from + next(120) - 10)
                })
                .collect();
            let dates = DateSpans::new(spans.clone(), round % 2 == 0);
            let any = |ms: i64| spans.iter().any(|(from, to)| (*from..*to).contains(&ms));
            for ms in -20..1_200 {
                assert_eq!(dates.contains(Some(ms)), any(ms), "{ms} in {spans:?}");
            }
            assert_eq!(dates.contains(None), round % 2 == 0);
            for _ in 0..40 {
                let min = next(1_200) - 20;
                let max = min + next(100);
                let held = (min..=max).any(any);
                assert_eq!(
                    dates.may_hold((min, max)),
                    held,
                    "[{min}, {max}] in {spans:?}"
                );
                // A segment with undated documents: held when they are wanted, else when a
                // wanted date is at or before its newest.
                let below = round % 2 == 0 || (-20..=max).any(any);
                assert_eq!(dates.may_hold((NO_DATE, max)), below, "{max} in {spans:?}");
            }
            assert!(!dates.may_hold(NO_DATES), "a segment without documents");
        }
    }

    #[test]
    fn a_lookup_by_dates_reads_only_the_segments_that_may_hold_them() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let doc =
            |i: usize, date: &str| chapter(&format!("D{i}"), "a fix", "chapter", "auth, csv", date);
        let rel = |i: usize| format!(".dsh-chapters/s{}/chapters/{i:03}-a.md", i / 10);
        // Three refreshes, three segments (each too small to merge into the one before):
        // January, March (one at its first instant), and an undated one.
        for i in 0..40 {
            put(
                ws,
                &rel(i),
                &doc(i, &format!("\"2026-01-{:02}T10:00:00Z\"", 1 + i % 28)),
            );
        }
        refresh(ws);
        for i in 40..46 {
            let day = if i == 40 {
                "2026-03-01T00:00:00Z".to_owned()
            } else {
                format!("2026-03-{:02}T10:00:00+02:00", i - 30)
            };
            put(ws, &rel(i), &doc(i, &format!("\"{day}\"")));
        }
        refresh(ws);
        put(ws, &rel(46), &doc(46, "null"));
        let (table, _) = refresh(ws);
        assert_eq!(table.state.segments.len(), 3);
        let ms = |t: &str| crate::time::parse_rfc3339_ms(t).expect("a date");
        let ranges: Vec<Option<(i64, i64)>> =
            table.state.segments.iter().map(|s| s.dates).collect();
        assert_eq!(
            ranges,
            [
                Some((ms("2026-01-01T10:00:00Z"), ms("2026-01-28T10:00:00Z"))),
                Some((ms("2026-03-01T00:00:00Z"), ms("2026-03-15T08:00:00Z"))),
                Some((NO_DATE, NO_DATE)),
            ]
        );
        let labels: BTreeSet<String> = ["csv".to_owned()].into();
        let month = |m: &str, next: &str| {
            (
                ms(&format!("{m}-01T00:00:00Z")),
                ms(&format!("{next}-01T00:00:00Z")),
            )
        };
        let cases = [
            (
                vec![month("2026-03", "2026-04")],
                false,
                vec![false, true, false],
            ),
            (
                vec![month("2026-02", "2026-03")],
                false,
                vec![false, false, false],
            ),
            (
                vec![(ms("2026-02-20T00:00:00Z"), ms("2026-03-01T00:00:00Z") + 1)],
                false,
                vec![false, true, false],
            ),
            (
                vec![month("2026-01", "2026-02")],
                true,
                vec![true, false, true],
            ),
            (vec![], true, vec![false, false, true]),
            (vec![(i64::MIN + 1, i64::MAX)], true, vec![true, true, true]),
        ];
        let paths = |docs: &[Redacted<TableDoc>]| -> Vec<String> {
            docs.iter().map(|d| d.get().path.clone()).collect()
        };
        for (spans, undated, opened) in cases {
            let dates = DateSpans::new(spans.clone(), undated);
            let table = Table::open(&ws.join(STORE_DIR));
            let got = table.docs_with_labels_in(&labels, &dates).expect("lookup");
            let want = table
                .docs_with_labels_dated(&labels, |d| dates.contains(d))
                .expect("every segment");
            assert_eq!(paths(&got), paths(&want), "{spans:?}");
            // Read again on a table of its own: only the segments that may hold them opened.
            let table = Table::open(&ws.join(STORE_DIR));
            table.docs_with_labels_in(&labels, &dates).expect("lookup");
            let open: Vec<bool> = table.open.borrow().iter().map(Option::is_some).collect();
            assert_eq!(open, opened, "{spans:?}");
        }
        // A state written without the ranges (an older build's) is read as spanning every
        // date, and the next refresh fills them from the segments' metadata.
        let dir = ws.join(STORE_DIR).join(TABLE_DIR);
        let mut state = load_state(&dir).expect("state");
        for info in &mut state.segments {
            info.dates = None;
        }
        save_state(&dir, &state).expect("save");
        let table = Table::open(&ws.join(STORE_DIR));
        let dates = DateSpans::new([month("2026-03", "2026-04")], false);
        assert_eq!(
            paths(&table.docs_with_labels_in(&labels, &dates).expect("lookup")).len(),
            6
        );
        assert!(
            table.open.borrow().iter().all(Option::is_some),
            "every segment read"
        );
        let (table, _) = refresh(ws);
        let filled: Vec<Option<(i64, i64)>> =
            table.state.segments.iter().map(|s| s.dates).collect();
        assert_eq!(filled, ranges);
        assert_eq!(
            load_state(&dir).expect("saved").segments[1].dates,
            ranges[1]
        );
    }

    #[test]
    fn a_big_first_build_flushes_segments_and_merges_them_streaming() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let total = FLUSH_EVERY * 3 + 10;
        let mut expected = Vec::new();
        for i in 0..total {
            let rel = format!(".dsh-chapters/s{:02}/chapters/{i:04}-a.md", i / 7);
            let topic = if i % 3 == 0 { "auth" } else { "csv" };
            put(
                ws,
                &rel,
                &chapter(&format!("Doc {i}"), "a fix", "chapter", topic, "null"),
            );
            expected.push(rel);
        }
        expected.sort();
        // Cut after the first flushed segment: what it left is not trusted, the next
        // refresh starts over and finds every document.
        CUT_AFTER_FLUSH.with(|c| c.set(true));
        let cut = Table::refresh(ws, false, Duration::from_secs(5));
        CUT_AFTER_FLUSH.with(|c| c.set(false));
        assert!(cut.is_err(), "the cut happens after the first flush");
        let dir = ws.join(STORE_DIR).join(TABLE_DIR);
        assert!(dir.join(DIRTY_FILE).exists());
        assert!(
            seg_path(&dir, 0, "docs").exists(),
            "the first segment was written"
        );
        let (table, r) = refresh(ws);
        assert!(r.rebuilt);
        assert_eq!(r.added, total);
        assert_eq!(paths(&table), expected);
        assert_eq!(table.state.segments.len(), 1, "merged into one");
        assert_eq!(table.state.segments[0].docs as usize, total);
        // The flushed segments are gone once merged.
        let segs = fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".docs"))
            .count();
        assert_eq!(segs, 1, "only the merged segment is left");
        let curation = Curation::default();
        let params = ScoreParams::default();
        for (terms, topic) in [("fix", None), ("", Some("auth")), ("fix", Some("csv"))] {
            let terms = score::query_terms(terms);
            let got = table_answer(&table, &terms, topic, &curation, &params);
            assert!(!got.is_empty(), "{terms:?} {topic:?}");
            assert_eq!(got, reference(&table, &terms, topic, &curation, &params));
        }
        // The streaming merge keeps the oldest version of a path, as a merge in memory does.
        let info = &table.state.segments[0];
        let twice = merge_segments(&dir, 99, &[info.clone(), info.clone()]).expect("merge");
        assert_eq!(twice.docs as usize, total);
        assert_eq!(twice.sizes, info.sizes);
        assert_eq!(
            read_segment_docs(&dir, &twice).expect("docs"),
            read_segment_docs(&dir, info).expect("docs")
        );
        // A damaged record is an error naming the segment, never a panic.
        let docs = seg_path(&dir, twice.id, "docs");
        fs::write(&docs, "garbage\n").expect("garble");
        let err = merge_segments(&dir, 100, &[twice]).expect_err("damaged");
        assert!(err.to_string().contains("record 0"), "{err}");
    }

    #[test]
    fn a_streaming_merge_writes_the_bytes_a_merge_in_memory_writes() {
        let doc = |path: String, title: &str, topic: &str| TableDoc {
            root: "s".into(),
            name: path.rsplit('/').next().expect("a name").into(),
            blob: format!("b-{title}"),
            meta: DocMeta {
                title: title.into(),
                summary: format!("{title} summary"),
                kind: "chapter".into(),
                project_key: if path.starts_with(MIRROR_DIR) {
                    "pool"
                } else {
                    "pk"
                }
                .into(),
                topics: vec![topic.into()],
                date: Some("2026-12-01T10:00:00Z".into()),
                session_id: None,
                seq_range: None,
                id: None,
            },
            path,
        };
        let folder = |i: usize| {
            if i.is_multiple_of(2) {
                format!(".dsh-chapters/s{}/chapters", i % 5)
            } else {
                format!("{MIRROR_DIR}/chapters/pool/s{}", i % 5)
            }
        };
        // Three segments, oldest first; the later ones hold other versions of some paths
        // (whose words must not reach the merged segment) and paths of their own.
        let version = |paths: std::ops::Range<usize>, title: &str, topic: &str| -> Vec<TableDoc> {
            paths
                .map(|i| {
                    doc(
                        format!("{}/{i:03}.md", folder(i)),
                        &format!("{title}{i}"),
                        topic,
                    )
                })
                .collect()
        };
        let oldest = version(0..40, "alpha", "auth");
        let middle = version(30..70, "zebra", "csv");
        let mut newest = version(60..90, "gamma", "auth");
        newest.reverse();
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path();
        let infos = [&oldest, &middle, &newest]
            .iter()
            .enumerate()
            .map(|(id, docs)| write_segment(dir, id as u64, (*docs).clone()).expect("write"))
            .collect::<Vec<_>>();
        let merged = merge_segments(dir, 10, &infos).expect("merge");
        let all: Vec<TableDoc> = [oldest, middle, newest].concat();
        let whole = write_segment(dir, 11, all).expect("write");
        assert_eq!(merged.docs, 90);
        assert_eq!(
            (merged.docs, &merged.sizes, &merged.pks, &merged.counts),
            (whole.docs, &whole.sizes, &whole.pks, &whole.counts)
        );
        for part in PARTS {
            let read = |id| fs::read(seg_path(dir, id, part)).expect("part");
            assert!(read(10) == read(11), "{part} differs");
        }
        let dict = fs::read_to_string(seg_path(dir, 10, "dict")).expect("dict");
        assert!(
            dict.contains("\tzebra40\t") && !dict.contains("\tzebra30\t"),
            "{dict}"
        );
        // No temp file is left beside the segments.
        let temps = fs::read_dir(dir)
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .count();
        assert_eq!(temps, 0);
        // A damaged dictionary is an error naming the segment, never a panic.
        fs::write(seg_path(dir, 1, "dict"), "t\tzebra\t7\t1\n").expect("garble");
        let err = merge_segments(dir, 12, &infos).expect_err("damaged");
        assert!(err.to_string().contains("seg-1.dict"), "{err}");
    }

    #[test]
    fn a_blob_id_from_the_tree_is_the_one_hashing_gives() {
        let text = chapter("A", "", "chapter", "x", "null");
        let (hashed, meta) =
            doc_of(text.as_bytes(), ".dsh-chapters/s/chapters", None).expect("doc");
        let id = crate::git::ObjectId::from_hex(hashed.as_bytes()).expect("hex");
        let (given, same) =
            doc_of(text.as_bytes(), ".dsh-chapters/s/chapters", Some(&id)).expect("doc");
        assert_eq!((given, same), (hashed, meta));
    }

    #[test]
    fn records_round_trip_and_segments_merge() {
        let doc = TableDoc {
            path: ".dsh-chapters/s/chapters/1.md".into(),
            root: "s".into(),
            name: "1.md".into(),
            blob: "b".into(),
            meta: DocMeta {
                title: "T".into(),
                summary: "".into(),
                kind: "chapter".into(),
                project_key: "pk".into(),
                topics: vec!["a".into(), "b".into()],
                date: None,
                session_id: None,
                seq_range: None,
                id: None,
            },
        };
        assert_eq!(parse_record(record(&doc).as_bytes()), Some(doc.clone()));
        let mut tabbed = doc.clone();
        tabbed.meta.title = "a\tb\nc".into();
        assert_eq!(
            parse_record(record(&tabbed).as_bytes())
                .expect("parse")
                .meta
                .title,
            "a b c"
        );
        assert_eq!(parse_record(b"x\ty\n"), None);

        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        for i in 0..4 {
            put(
                ws,
                &format!(".dsh-chapters/s{i}/chapters/001-a.md"),
                &chapter("A", "", "chapter", "x", "null"),
            );
            let (table, _) = Table::refresh(ws, false, Duration::from_secs(5)).expect("refresh");
            assert_eq!(table.all_docs().expect("docs").len(), i + 1);
            assert!(
                table.state.segments.len() <= 2,
                "{:?}",
                table.state.segments.len()
            );
        }
    }
}

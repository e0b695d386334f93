//! The search table (shell): every document's frontmatter read once, kept so a query never
//! parses the corpus.
//!
//! It lives in `<store>/.search/` (a dot directory: never published, never a session tree)
//! and is a cache: lose it and the next search rebuilds it from the documents. It holds
//! append-only *segments*; a refresh lists the document folders (store, and the mirror when
//! linked), re-lists only a folder whose mtime moved, reads only files it has not seen, and
//! writes them as one new segment; a segment at least a quarter the size of the one before
//! it is merged into it, so there are O(log n) segments and each document is rewritten
//! O(log n) times.
//!
//! A segment is four files: `docs` (one tab-separated record per document, sorted by path),
//! `meta` (16 bytes per document: date, record offset, project, flags), `dict` (one line per
//! field and token: `F\ttoken\toffset\tcount`) and `post` (the postings, u32 LE). A query
//! term is looked up by substring in `dict` — a term occurs in a field exactly when it occurs
//! in one of the field's tokens, since a term holds only letters, digits and `_` — and only
//! the postings and records it needs are read (`pread`). The answer equals
//! `search::rank` over every document (tested).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::curation::{normalize_topic, Curation, RuleStatus};
use crate::rules::store::RULES_DIR;
use crate::search::{self, DocMeta, ScoreParams, SearchDoc};
use crate::store::{self, atomic, is_safe_component, MIRROR_DIR, STORE_DIR};

pub const TABLE_DIR: &str = ".search";
const STATE_FILE: &str = "state.json";
const TABLE_VERSION: u32 = 1;
/// A frontmatter longer than this is counted unreadable rather than buffered.
const MAX_FRONTMATTER_BYTES: usize = 256 * 1024;
/// A folder modified this recently is listed again next time: a file landing in the same
/// mtime tick as the listing would otherwise be missed.
const SETTLE: Duration = Duration::from_secs(2);
const META_BYTES: usize = 16;
const NO_DATE: i64 = i64::MIN;
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
    #[error("the search table is busy: {0}")]
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
    meta.kind == "rule"
        && meta.id.as_deref().is_some_and(|id| {
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
    sizes: [u64; 4],
    /// Project keys of the segment's documents; `meta` refers to them by index.
    pks: Vec<String>,
    /// Per project key: (store documents, mirror documents).
    counts: Vec<(u64, u64)>,
}

/// A document folder as last listed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceState {
    /// mtime (ns) when listed; 0 = list again next time.
    mtime: u128,
    pub files: u64,
    /// `shard::input_hash` of its readable documents.
    pub hash: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct State {
    v: u32,
    next_id: u64,
    segments: Vec<SegmentInfo>,
    sources: BTreeMap<String, SourceState>,
    /// Documents that could not be read, by path, with why.
    unreadable: BTreeMap<String, String>,
}

/// What one refresh found.
#[derive(Debug, Default)]
pub struct Refresh {
    pub added: usize,
    pub merged: usize,
    pub rebuilt: bool,
}

/// The search table of one store.
pub struct Table {
    dir: PathBuf,
    state: State,
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

    /// Bring the table up to date with the document folders, under the table's own lock
    /// (never the store's writer lock: a search must not wait for an archive).
    pub fn refresh(
        workspace: &Path,
        linked: bool,
        lock_timeout: Duration,
    ) -> Result<(Table, Refresh), TableError> {
        let store_dir = workspace.join(STORE_DIR);
        let dir = store_dir.join(TABLE_DIR);
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let _lock = store::lock::WriterLock::acquire(&dir, lock_timeout)?;
        let mut report = Refresh::default();
        let mut state = match load_state(&dir) {
            Some(s) => s,
            None => {
                report.rebuilt = true;
                clear(&dir)?;
                State {
                    v: TABLE_VERSION,
                    ..State::default()
                }
            }
        };
        let now = SystemTime::now();
        let mut dirty = report.rebuilt;
        let mut added: Vec<TableDoc> = Vec::new();
        // Paths whose document changed: their old version leaves the table.
        let mut replaced: BTreeSet<String> = BTreeSet::new();
        let sources = list_sources(workspace, linked)?;
        for (key, root) in &sources {
            let path = workspace.join(key);
            let mtime = fs::metadata(&path)
                .ok()
                .and_then(|m| m.modified().ok())
                .map(|t| (t, stamp(t)));
            let Some((modified, mtime)) = mtime else {
                continue;
            };
            let known_state = state.sources.get(key).cloned().unwrap_or_default();
            if known_state.mtime == mtime && mtime != 0 {
                continue;
            }
            dirty = true;
            let mut known = read_names(&dir, key)?;
            let mut stamps = read_stamps(&dir, key)?;
            let twins = twin_names(&dir, &state, key, root)?;
            let mut changed = false;
            for name in list_markdown(&path)? {
                if twins.contains(&name) {
                    continue;
                }
                let rel = format!("{key}/{name}");
                let stamp_now = file_stamp(&workspace.join(&rel));
                if known.contains_key(&name) {
                    // A known document is read again only when its size or time moved: the
                    // one sanctioned rewrite (enrichment's re-annotation) or another
                    // machine's, materialized into the mirror.
                    match (stamps.get(&name), stamp_now) {
                        (Some(was), Some(now)) if *was != now => {}
                        (None, Some(now)) => {
                            stamps.insert(name.clone(), now);
                            changed = true;
                            continue;
                        }
                        _ => continue,
                    }
                }
                changed = true;
                if let Some(now) = stamp_now {
                    stamps.insert(name.clone(), now);
                }
                match read_doc(&workspace.join(&rel)) {
                    Ok((blob, meta)) => {
                        if let Some(old) = known.get(&name) {
                            if *old == blob {
                                continue;
                            }
                            replaced.insert(rel.clone());
                        }
                        known.insert(name.clone(), blob.clone());
                        added.push(TableDoc {
                            path: rel,
                            root: root.clone(),
                            name,
                            blob,
                            meta,
                        });
                    }
                    Err(reason) => {
                        known.insert(name.clone(), "-".into());
                        state.unreadable.insert(rel, reason);
                    }
                }
            }
            if changed {
                write_names(&dir, key, &known)?;
                write_stamps(&dir, key, &stamps)?;
            }
            let readable: Vec<(&str, &str)> = known
                .iter()
                .filter(|(_, b)| b.as_str() != "-")
                .map(|(n, b)| (n.as_str(), b.as_str()))
                .collect();
            let settled = now.duration_since(modified).is_ok_and(|age| age >= SETTLE);
            state.sources.insert(
                key.clone(),
                SourceState {
                    mtime: if settled { mtime } else { 0 },
                    files: readable.len() as u64,
                    hash: super::shard::input_hash(readable),
                },
            );
        }
        report.added = added.len();
        if !replaced.is_empty() {
            // Rare (a re-annotation): every segment is rewritten without the old versions,
            // and the new ones join them in one segment.
            let mut docs = Vec::new();
            for info in &state.segments {
                docs.extend(
                    read_segment_docs(&dir, info)?
                        .into_iter()
                        .filter(|d| !replaced.contains(&d.path)),
                );
            }
            docs.append(&mut added);
            let info = write_segment(&dir, state.next_id, docs)?;
            state.next_id += 1;
            state.segments = vec![info];
            report.merged += 1;
            save_state(&dir, &state)?;
            remove_unreferenced(&dir, &state);
        } else if !added.is_empty() {
            let info = write_segment(&dir, state.next_id, added)?;
            state.next_id += 1;
            state.segments.push(info);
            while state.segments.len() >= 2 {
                let n = state.segments.len();
                if u64::from(state.segments[n - 1].docs) * 4 < u64::from(state.segments[n - 2].docs)
                {
                    break;
                }
                let newer = state.segments.pop().expect("two segments");
                let older = state.segments.pop().expect("two segments");
                let mut docs = read_segment_docs(&dir, &older)?;
                docs.extend(read_segment_docs(&dir, &newer)?);
                let info = write_segment(&dir, state.next_id, docs)?;
                state.next_id += 1;
                state.segments.push(info);
                report.merged += 1;
            }
            save_state(&dir, &state)?;
            remove_unreferenced(&dir, &state);
        } else if dirty {
            save_state(&dir, &state)?;
        }
        Ok((Table::new(dir, state), report))
    }

    fn new(dir: PathBuf, state: State) -> Table {
        let open = std::cell::RefCell::new(vec![None; state.segments.len()]);
        Table { dir, state, open }
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

    /// Changes whenever the table's documents do: the next segment's number.
    pub fn generation(&self) -> u64 {
        self.state.next_id
    }

    /// Documents that could not be read, by path.
    pub fn unreadable(&self) -> &BTreeMap<String, String> {
        &self.state.unreadable
    }

    /// Every listed folder's state (for the index manifest), by workspace-relative path.
    pub fn sources(&self) -> &BTreeMap<String, SourceState> {
        &self.state.sources
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
    pub fn doc(&self, seg: usize, id: u32) -> Result<TableDoc, TableError> {
        self.seg(seg)?.record(id)
    }

    /// Every document (the full rebuild and the reference checks read this).
    pub fn all_docs(&self) -> Result<Vec<TableDoc>, TableError> {
        let mut out = Vec::new();
        for info in &self.state.segments {
            out.extend(read_segment_docs(&self.dir, info)?);
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Every document read from one folder (a `sources` key).
    pub fn docs_in_folder(&self, folder: &str) -> Result<Vec<TableDoc>, TableError> {
        let mut out = Vec::new();
        for s in 0..self.state.segments.len() {
            let seg = self.seg(s)?;
            if let Some((off, count)) = seg.exact(FIELD_FOLDER, folder) {
                for id in seg.postings(off, count)? {
                    out.push(seg.record(id)?);
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Documents carrying any of these (normalized, raw) topic labels.
    pub fn docs_with_labels(&self, labels: &BTreeSet<String>) -> Result<Vec<TableDoc>, TableError> {
        let mut out = Vec::new();
        for s in 0..self.state.segments.len() {
            let seg = self.seg(s)?;
            let mut ids = BTreeSet::new();
            for label in labels {
                if let Some((off, count)) = seg.exact(FIELD_TOPIC, label) {
                    ids.extend(seg.postings(off, count)?);
                }
            }
            for id in ids {
                out.push(seg.record(id)?);
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Every raw topic label with its documents (numbered `segment << 32 | id`), for the
    /// vocabulary: the door's documents of this project only.
    pub fn label_docs(
        &self,
        project_key: &str,
        include_mirror: bool,
    ) -> Result<super::vocab::DocSets, TableError> {
        let mut out = super::vocab::DocSets::new();
        for (s, info) in self.state.segments.iter().enumerate() {
            let seg = self.seg(s)?;
            let mut start = 1;
            while start < seg.dict.len() {
                let Some((token, off, count)) = seg.line(start) else {
                    break;
                };
                let end = memchr::memchr(b'\n', &seg.dict[start..])
                    .map_or(seg.dict.len(), |i| start + i + 1);
                if seg.dict[start] == FIELD_TOPIC {
                    let token = token.to_owned();
                    for id in seg.postings(off, count)? {
                        let m = seg.meta(id);
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
        Ok(out)
    }

    /// Rank the table's documents for `q`: the same order `search::rank` gives over every
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
                        if let Some((off, count)) = seg.exact(FIELD_TOPIC, &label) {
                            ids.extend(seg.postings(off, count)?);
                        }
                    }
                    Some(ids)
                }
                None => None,
            };
            let mut base = vec![0f64; if q.terms.is_empty() { 0 } else { n }];
            let mut seen = vec![0u32; base.len()];
            let mut pass = 0u32;
            for term in q.terms {
                // Field by field, in the reference scorer's order, so sums round alike.
                let mut topic: HashMap<u32, f64> = HashMap::new();
                for (label, off, count) in seg.containing(FIELD_TOPIC, term) {
                    if sources.contains(&label) {
                        continue;
                    }
                    let w = q.params.weight(&label);
                    for id in seg.postings(off, count)? {
                        let e = topic.entry(id).or_insert(w);
                        *e = e.max(w);
                    }
                }
                for source in &sources {
                    let canonical = q.curation.canonical(source).topic;
                    if !canonical.contains(term.as_str()) {
                        continue;
                    }
                    if let Some((off, count)) = seg.exact(FIELD_TOPIC, source) {
                        let w = q.params.weight(&canonical);
                        for id in seg.postings(off, count)? {
                            let e = topic.entry(id).or_insert(w);
                            *e = e.max(w);
                        }
                    }
                }
                let mut ids: Vec<(u32, f64)> = topic.into_iter().collect();
                ids.sort_by_key(|(id, _)| *id);
                for (id, w) in ids {
                    base[id as usize] += search::TOPIC_POINTS * w;
                }
                for field in [FIELD_TITLE, FIELD_SUMMARY] {
                    // A document counts once per field however many of its tokens match:
                    // `seen` holds the pass that last counted it.
                    pass += 1;
                    for (_, off, count) in seg.containing(field, term) {
                        for id in seg.postings(off, count)? {
                            if seen[id as usize] != pass {
                                seen[id as usize] = pass;
                                base[id as usize] += search::FIELD_POINTS;
                            }
                        }
                    }
                }
                if let Some((off, count)) = seg.exact(FIELD_KIND, term) {
                    for id in seg.postings(off, count)? {
                        base[id as usize] += search::FIELD_POINTS;
                    }
                }
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
                let m = seg.meta(id);
                if m.flags & FLAG_MIRROR != 0 && !q.include_mirror {
                    continue;
                }
                if !pk_ok.get(m.pk as usize).copied().unwrap_or(false) {
                    continue;
                }
                let date = (m.date != NO_DATE).then_some(m.date);
                let score = if q.terms.is_empty() {
                    search::recency_at(date, q.now_ms).points()
                } else {
                    let core = m.flags & FLAG_RULE != 0 && {
                        let doc = self.doc(s, id)?;
                        is_core_rule(&doc.meta, q.curation, q.harness)
                    };
                    let b = base[id as usize];
                    b + search::recency_at(date, q.now_ms).points()
                        + if core { q.params.core_rule_bonus } else { 0.0 }
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
                    group.push((self.doc(f.seg, f.id)?.path, *f));
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
fn list_sources(workspace: &Path, linked: bool) -> Result<Vec<(String, String)>, TableError> {
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
        let chapters = workspace.join(MIRROR_DIR).join("chapters");
        for pk in list_dirs(&chapters)? {
            for root in list_dirs(&chapters.join(&pk))? {
                out.push((format!("{MIRROR_DIR}/chapters/{pk}/{root}"), root));
            }
        }
        let rules = workspace.join(MIRROR_DIR).join(RULES_DIR);
        for pk in list_dirs(&rules)? {
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

/// Read one document: its blob id and frontmatter, or why not.
fn read_doc(path: &Path) -> Result<(String, DocMeta), String> {
    let mut bytes = Vec::new();
    fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read: {e}"))?;
    let blob = crate::pool::plan::blob_id(&bytes);
    let meta = parse_head(&bytes)?;
    Ok((blob, meta))
}

/// The frontmatter of a document's bytes, bounded.
pub fn parse_head(bytes: &[u8]) -> Result<DocMeta, String> {
    if bytes.is_empty() {
        return Err("empty file".into());
    }
    if !bytes.starts_with(b"---\n") {
        return Err("no YAML frontmatter (the first line is not `---`)".into());
    }
    let window = &bytes[..bytes.len().min(MAX_FRONTMATTER_BYTES)];
    let end = memchr::memmem::find(&window[3..], b"\n---\n")
        .map(|i| i + 3 + 5)
        .ok_or_else(|| {
            format!("no closing `---` within the first {MAX_FRONTMATTER_BYTES} bytes")
        })?;
    let head =
        std::str::from_utf8(&window[..end]).map_err(|_| "frontmatter is not UTF-8".to_owned())?;
    let mut meta = search::parse_meta(head).map_err(|e| e.to_string())?;
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

const PARTS: [&str; 4] = ["docs", "meta", "dict", "post"];

fn clean(text: &str) -> String {
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
    let mut text = String::new();
    let mut meta = Vec::with_capacity(docs.len() * META_BYTES);
    let mut pks: Vec<String> = Vec::new();
    let mut counts: Vec<(u64, u64)> = Vec::new();
    let mut postings: BTreeMap<(u8, String), Vec<u32>> = BTreeMap::new();
    for (n, doc) in docs.iter().enumerate() {
        let n = n as u32;
        let offset = u32::try_from(text.len()).map_err(|_| TableError::Damaged {
            path: seg_path(dir, id, "docs"),
            detail: "over 4 GiB of records in one segment".into(),
        })?;
        text.push_str(&record(doc));
        let m = &doc.meta;
        let pk = match pks.iter().position(|p| *p == clean(&m.project_key)) {
            Some(i) => i,
            None => {
                pks.push(clean(&m.project_key));
                counts.push((0, 0));
                pks.len() - 1
            }
        };
        let mirror = doc.from_mirror();
        if mirror {
            counts[pk].1 += 1;
        } else {
            counts[pk].0 += 1;
        }
        let date = m
            .date
            .as_deref()
            .and_then(search::parse_rfc3339_ms)
            .unwrap_or(NO_DATE);
        let mut flags = 0u8;
        if m.kind == "rule" && m.id.is_some() {
            flags |= FLAG_RULE;
        }
        if mirror {
            flags |= FLAG_MIRROR;
        }
        meta.extend_from_slice(&date.to_le_bytes());
        meta.extend_from_slice(&offset.to_le_bytes());
        meta.extend_from_slice(&(pk as u16).to_le_bytes());
        meta.push(flags);
        meta.push(0);
        let mut add = |field: u8, token: String| {
            let list = postings.entry((field, token)).or_default();
            if list.last() != Some(&n) {
                list.push(n);
            }
        };
        for t in &m.topics {
            add(FIELD_TOPIC, clean(t));
        }
        for t in tokens(&m.title) {
            add(FIELD_TITLE, t);
        }
        for t in tokens(&m.summary) {
            add(FIELD_SUMMARY, t);
        }
        add(FIELD_KIND, clean(&m.kind.to_lowercase()));
        add(FIELD_FOLDER, folder_of(&doc.path).to_owned());
    }
    let mut dict = String::new();
    let mut post = Vec::new();
    for ((field, token), ids) in &postings {
        dict.push_str(&format!(
            "{}\t{token}\t{}\t{}\n",
            *field as char,
            post.len() / 4,
            ids.len()
        ));
        for id in ids {
            post.extend_from_slice(&id.to_le_bytes());
        }
    }
    let parts: [&[u8]; 4] = [text.as_bytes(), &meta, dict.as_bytes(), &post];
    let mut sizes = [0u64; 4];
    for (i, (part, bytes)) in PARTS.iter().zip(parts).enumerate() {
        atomic::write_atomic_unsynced(&seg_path(dir, id, part), bytes)?;
        sizes[i] = bytes.len() as u64;
    }
    Ok(SegmentInfo {
        id,
        docs: docs.len() as u32,
        sizes,
        pks,
        counts,
    })
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

/// A segment opened for one query: its dictionary and metadata in memory, postings and
/// records read on demand.
struct SegReader {
    /// The dictionary with a leading `\n`, so every line starts after one.
    dict: Vec<u8>,
    meta: Vec<u8>,
    post: fs::File,
    post_path: PathBuf,
    docs: fs::File,
    docs_path: PathBuf,
    docs_len: u64,
    count: u32,
    /// Where each dictionary line starts, found on the first exact lookup.
    lines: std::cell::OnceCell<Vec<u32>>,
}

impl SegReader {
    fn open(dir: &Path, info: &SegmentInfo) -> Result<SegReader, TableError> {
        let read = |part: &str| {
            let p = seg_path(dir, info.id, part);
            fs::read(&p).map_err(|e| io_err(&p, e))
        };
        let mut dict = Vec::with_capacity(info.sizes[2] as usize + 1);
        dict.push(b'\n');
        dict.extend(read("dict")?);
        let meta = read("meta")?;
        let post_path = seg_path(dir, info.id, "post");
        let post = fs::File::open(&post_path).map_err(|e| io_err(&post_path, e))?;
        let docs_path = seg_path(dir, info.id, "docs");
        let docs = fs::File::open(&docs_path).map_err(|e| io_err(&docs_path, e))?;
        if meta.len() != info.docs as usize * META_BYTES {
            return Err(TableError::Damaged {
                path: seg_path(dir, info.id, "meta"),
                detail: format!("{} bytes for {} documents", meta.len(), info.docs),
            });
        }
        Ok(SegReader {
            dict,
            meta,
            post,
            post_path,
            docs,
            docs_path,
            docs_len: info.sizes[0],
            count: info.docs,
            lines: std::cell::OnceCell::new(),
        })
    }

    /// Document `id`'s record (one positioned read).
    fn record(&self, id: u32) -> Result<TableDoc, TableError> {
        let offset = |i: u32| -> u64 {
            let at = i as usize * META_BYTES + 8;
            u64::from(u32::from_le_bytes(
                self.meta[at..at + 4].try_into().expect("4 bytes"),
            ))
        };
        let damaged = || TableError::Damaged {
            path: self.docs_path.clone(),
            detail: format!("record {id}"),
        };
        if id >= self.count {
            return Err(damaged());
        }
        let start = offset(id);
        let end = if id + 1 < self.count {
            offset(id + 1)
        } else {
            self.docs_len
        };
        let mut bytes = vec![0u8; end.saturating_sub(start) as usize];
        self.docs
            .read_exact_at(&mut bytes, start)
            .map_err(|e| io_err(&self.docs_path, e))?;
        parse_record(&bytes).ok_or_else(damaged)
    }

    fn meta(&self, id: u32) -> Meta {
        let at = id as usize * META_BYTES;
        let m = &self.meta[at..at + META_BYTES];
        Meta {
            date: i64::from_le_bytes(m[0..8].try_into().expect("8 bytes")),
            pk: u16::from_le_bytes(m[12..14].try_into().expect("2 bytes")),
            flags: m[14],
        }
    }

    /// The dictionary line starting at `start` (just after a `\n`): token, offset, count.
    fn line(&self, start: usize) -> Option<(&str, u64, u64)> {
        let end = memchr::memchr(b'\n', &self.dict[start..])? + start;
        let text = std::str::from_utf8(&self.dict[start + 2..end]).ok()?;
        let mut parts = text.rsplitn(3, '\t');
        let count = parts.next()?.parse().ok()?;
        let off = parts.next()?.parse().ok()?;
        Some((parts.next()?, off, count))
    }

    /// Entries of `field` whose token contains `term`.
    fn containing(&self, field: u8, term: &str) -> Vec<(String, u64, u64)> {
        let mut out = Vec::new();
        let mut last = usize::MAX;
        for occ in memchr::memmem::find_iter(&self.dict, term.as_bytes()) {
            let start = memchr::memrchr(b'\n', &self.dict[..occ]).map_or(0, |i| i + 1);
            if start == last || self.dict.get(start) != Some(&field) {
                continue;
            }
            let token_start = start + 2;
            let Some(tab) = memchr::memchr(b'\t', &self.dict[token_start..]) else {
                continue;
            };
            if occ < token_start || occ + term.len() > token_start + tab {
                continue;
            }
            last = start;
            if let Some((token, off, count)) = self.line(start) {
                out.push((token.to_owned(), off, count));
            }
        }
        out
    }

    /// The entry of `field` whose token is exactly `token`: a binary search, the lines
    /// being sorted by field then token (a token never holds a byte below `\t`, so
    /// comparing `F\ttoken\t` prefixes orders lines as (field, token) pairs).
    fn exact(&self, field: u8, token: &str) -> Option<(u64, u64)> {
        let lines = self.lines.get_or_init(|| {
            memchr::memchr_iter(b'\n', &self.dict[..self.dict.len().saturating_sub(1)])
                .map(|i| (i + 1) as u32)
                .collect()
        });
        let key = format!("{}\t{token}\t", field as char);
        let key = key.as_bytes();
        let found = lines.binary_search_by(|&start| {
            let line = &self.dict[start as usize..];
            let n = key.len().min(line.len());
            line[..n].cmp(key).then(if n < key.len() {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Equal
            })
        });
        let start = lines[found.ok()?] as usize;
        self.line(start).map(|(_, off, count)| (off, count))
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

// --- state and per-folder name lists -------------------------------------------------

/// The state, if it is whole: every segment it names present with its recorded size.
fn load_state(dir: &Path) -> Option<State> {
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

fn save_state(dir: &Path, state: &State) -> Result<(), TableError> {
    let bytes = serde_json::to_vec(state).expect("the table state always serializes");
    atomic::write_atomic_unsynced(&dir.join(STATE_FILE), &bytes)?;
    Ok(())
}

/// Start over: every segment and name list goes.
fn clear(dir: &Path) -> Result<(), TableError> {
    for entry in fs::read_dir(dir).map_err(|e| io_err(dir, e))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("seg-") || name == STATE_FILE {
            let _ = fs::remove_file(entry.path());
        } else if name == "sources" {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
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

fn stamps_path(dir: &Path, key: &str) -> PathBuf {
    names_path(dir, key).with_extension("stamps")
}

/// Each known document's stamp when it was last read, per folder.
fn read_stamps(dir: &Path, key: &str) -> Result<BTreeMap<String, (u64, u128)>, TableError> {
    let path = stamps_path(dir, key);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(io_err(&path, e)),
    };
    Ok(text
        .lines()
        .filter_map(|l| {
            let mut parts = l.split('\t');
            let name = parts.next()?;
            let len = parts.next()?.parse().ok()?;
            let mtime = parts.next()?.parse().ok()?;
            Some((name.to_owned(), (len, mtime)))
        })
        .collect())
}

fn write_stamps(
    dir: &Path,
    key: &str,
    stamps: &BTreeMap<String, (u64, u128)>,
) -> Result<(), TableError> {
    let path = stamps_path(dir, key);
    let text: String = stamps
        .iter()
        .map(|(n, (len, mtime))| format!("{n}\t{len}\t{mtime}\n"))
        .collect();
    atomic::write_atomic_unsynced(&path, text.as_bytes())?;
    Ok(())
}

fn names_path(dir: &Path, key: &str) -> PathBuf {
    let digest = crate::render::sha256_hex(key.as_bytes());
    dir.join("sources").join(format!("{}.tsv", &digest[..32]))
}

/// The names (and blob ids, `-` for unreadable) already read from one folder.
fn read_names(dir: &Path, key: &str) -> Result<BTreeMap<String, String>, TableError> {
    let path = names_path(dir, key);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(io_err(&path, e)),
    };
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(n, b)| (n.to_owned(), b.to_owned()))
        .collect())
}

fn write_names(dir: &Path, key: &str, names: &BTreeMap<String, String>) -> Result<(), TableError> {
    let path = names_path(dir, key);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
    }
    let text: String = names.iter().map(|(n, b)| format!("{n}\t{b}\n")).collect();
    atomic::write_atomic_unsynced(&path, text.as_bytes())?;
    Ok(())
}

/// Names the other side already holds for the same root session (store ↔ mirror): one
/// document is read once, whichever copy was seen first.
fn twin_names(
    dir: &Path,
    state: &State,
    key: &str,
    root: &str,
) -> Result<BTreeSet<String>, TableError> {
    let mut out = BTreeSet::new();
    let from_mirror = key.starts_with(MIRROR_DIR);
    let rules = key == format!("{STORE_DIR}/{RULES_DIR}")
        || key.starts_with(&format!("{MIRROR_DIR}/{RULES_DIR}/"));
    for other in state.sources.keys() {
        let twin = if rules {
            // The same rule proposed on two machines: one id, one file in each place.
            other.as_str() != key
                && (*other == format!("{STORE_DIR}/{RULES_DIR}")
                    || other.starts_with(&format!("{MIRROR_DIR}/{RULES_DIR}/")))
        } else if from_mirror {
            *other == format!("{STORE_DIR}/{root}/chapters")
        } else {
            other.starts_with(MIRROR_DIR) && other.ends_with(&format!("/{root}"))
        };
        if twin {
            out.extend(read_names(dir, other)?.into_keys());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chapter(title: &str, summary: &str, kind: &str, topics: &str, date: &str) -> String {
        format!(
            "---\ntitle: \"{title}\"\nsummary: \"{summary}\"\nkind: {kind}\nprojectKey: \"pk\"\ntopics: [{topics}]\ndate: {date}\nid: r-{title}\n---\nbody\n"
        )
    }

    fn put(ws: &Path, rel: &str, text: &str) {
        let p = ws.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
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
        let q = search::Query {
            terms: terms.to_vec(),
            topic: topic.map(str::to_owned),
        };
        search::rank(&docs, &q, NOW, params)
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
            .map(|f| (table.doc(f.seg, f.id).expect("doc").path, f.score))
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
            let terms = search::query_terms(terms);
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
            let terms = search::query_terms(terms);
            let got = table_answer(&table, &terms, topic, &curation, &params);
            assert_eq!(
                got,
                reference(&table, &terms, topic, &curation, &params),
                "{terms:?}"
            );
            assert!(!got.is_empty(), "{terms:?}");
        }
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
        let terms = search::query_terms("alpha");
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

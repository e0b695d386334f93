//! The index build (shell): which shards a change touches, and writing them.
//!
//! The documents come from the search table (`catalog::table`), which has read every
//! document's frontmatter once; the manifest says what the last build processed — per
//! curation file its blob id, the effective aliases, and for the pool's index the ids of the
//! input trees it describes. An update learns what changed since that build ([`Since`]): in
//! the store, from the table's changes since the revision the last build saw (documents by
//! name, and the topics of versions they replaced; a full rebuild when the table cannot
//! say); in the pool, from the diff of the recorded trees with the trees the commit leaves
//! (the sync's `tree_changes`: documents added, changed or removed, and the topics of their
//! old blobs), whichever machine built the index. It regenerates only the shards of topics
//! those documents carry, that an alias change moved, or that someone else changed
//! (`suspects`) — each regenerated from the table, so a hand edit in a touched shard is
//! overwritten and the bytes always equal a full rebuild. A paged topic whose change is
//! known document by document (new documents, someone else's pages) renders its head and
//! only the pages of the months those fall in (`shard::render_topic_months`): the other
//! pages are as the last build wrote them, so an update costs the pages of its size, not the
//! topic's history. When its head page is the one this machine last wrote, the topic is not
//! even read whole: the head read back gives the other pages' counts and the newest lines,
//! and the table only the documents of the changed months and of those lines' days
//! ([`paged_update`]).
//!
//! Two bases: the store (`<store>/index/`, links `../<root>/chapters/X.md`) when the
//! workspace is not linked to a private pool, and the pool (`index/` in the pool, links
//! `../chapters/<pk>/<root>/X.md`), built by `sync` before it commits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::shard::{self, Manifest, INDEX_DIR, MANIFEST_FILE};
use super::vocab::{self, Candidate, VocabParams};
use super::IndexDoc;
use crate::catalog::table::{self, Table, TableDoc, TableRev};
use crate::curation::{self, file::CurationFileError, Curation};
use crate::names::blob_id;
use crate::redact::{Redacted, Redactor, Settings};
use crate::rules::store::RULES_DIR;
use crate::rules::SESSION_PREFIX;
use crate::store::{atomic, Store, StoreError, MIRROR_DIR, STORE_DIR};

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Table(#[from] table::TableError),
    #[error(transparent)]
    Curation(#[from] CurationFileError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot read {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// Where the index is built and what its links lead to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// `<store>/index/`: this machine's documents only.
    Store,
    /// The pool's `index/`: every document of the pool tree (the mirror's and this
    /// machine's store, under their pool paths).
    Pool { project_key: String },
}

impl Base {
    /// Whether the mirror's documents are among the base's.
    fn includes_mirror(&self) -> bool {
        matches!(self, Base::Pool { .. })
    }

    /// The table folders an input directory of this base gathers (the inverse of
    /// [`Base::input_dir`]).
    fn folders_of(&self, dir: &str) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            Base::Store => out.push(format!("{STORE_DIR}/{dir}")),
            Base::Pool { project_key } => {
                out.push(format!("{MIRROR_DIR}/{dir}"));
                if dir == format!("{RULES_DIR}/{project_key}") {
                    out.push(format!("{STORE_DIR}/{RULES_DIR}"));
                } else if let Some(root) = dir
                    .strip_prefix(&format!("chapters/{project_key}/"))
                    .filter(|r| !r.contains('/'))
                {
                    out.push(format!("{STORE_DIR}/{root}/chapters"));
                }
            }
        }
        out
    }

    fn includes(&self, doc: &TableDoc) -> bool {
        match self {
            // A session rule is never staged to the pool — nor named by its index.
            Base::Pool { .. } => !(is_store_rule(doc) && doc.name.starts_with(SESSION_PREFIX)),
            Base::Store => !doc.from_mirror(),
        }
    }

    /// A document's path relative to the base.
    fn path_of(&self, doc: &TableDoc) -> String {
        match self {
            Base::Store => strip(&doc.path, STORE_DIR).to_owned(),
            Base::Pool { project_key } => {
                if doc.from_mirror() {
                    strip(&doc.path, MIRROR_DIR).to_owned()
                } else if is_store_rule(doc) {
                    format!("{RULES_DIR}/{project_key}/{}", doc.name)
                } else {
                    format!("chapters/{project_key}/{}/{}", doc.root, doc.name)
                }
            }
        }
    }

    /// The input folder (relative to the base) a table folder maps to.
    fn input_dir(&self, folder: &str) -> Option<String> {
        if let Some(rest) = folder.strip_prefix(&format!("{MIRROR_DIR}/")) {
            return matches!(self, Base::Pool { .. }).then(|| rest.to_owned());
        }
        let rest = folder.strip_prefix(&format!("{STORE_DIR}/"))?;
        match self {
            Base::Store => Some(rest.to_owned()),
            Base::Pool { project_key } if rest == RULES_DIR => {
                Some(format!("{RULES_DIR}/{project_key}"))
            }
            Base::Pool { project_key } => {
                let root = rest.strip_suffix("/chapters")?;
                Some(format!("chapters/{project_key}/{root}"))
            }
        }
    }

    /// A document as its shard lines show it: derived from the table's `Redacted` record
    /// and where the base links to, nothing else.
    fn index_doc(&self, doc: &Redacted<TableDoc>) -> Redacted<IndexDoc> {
        doc.derive_with(self, |doc, base| IndexDoc {
            path: base.path_of(doc),
            title: doc.meta.title.clone(),
            kind: doc.meta.kind.clone(),
            date: doc.meta.date.clone(),
            topics: doc.meta.topics.clone(),
        })
    }
}

/// Where an index links to: a project key from the identity, no conversation text.
impl Settings for Base {}

/// A time stamp a derived fact records.
struct At(String);

impl Settings for At {}

/// The pool's documents as its index reads them, paths relative to the pool's root (for
/// the pool's landing pages, `pool::readme`).
pub fn pool_docs(table: &Table, project_key: &str) -> Result<Vec<Redacted<IndexDoc>>, BuildError> {
    let base = Base::Pool {
        project_key: project_key.to_owned(),
    };
    let docs = fold_folders(table, &base, Vec::new, |docs, folder| docs.extend(folder))?;
    Ok(in_table_order(docs))
}

/// Documents handed out with their table paths, in the table's order (by that path; one
/// path's records keep their order), without the paths.
fn in_table_order(mut docs: Vec<(String, Redacted<IndexDoc>)>) -> Vec<Redacted<IndexDoc>> {
    docs.sort_by(|a, b| a.0.cmp(&b.0));
    docs.into_iter().map(|(_, d)| d).collect()
}

/// The base's documents as its index reads them, each with its path in the table, folded
/// one folder of the table at a time (the table's folders in key order, each folder's
/// documents in path order): only one folder's full records are held at once, never every
/// `TableDoc` of a year's pool. The table's own count checks that its folders held every
/// document; if they did not, the fold starts again from every document read at once
/// ([`Table::all_docs`]).
fn fold_folders<A>(
    table: &Table,
    base: &Base,
    init: impl Fn() -> A,
    add: impl Fn(&mut A, Vec<(String, Redacted<IndexDoc>)>),
) -> Result<A, BuildError> {
    let of = |docs: Vec<Redacted<TableDoc>>| -> Vec<(String, Redacted<IndexDoc>)> {
        docs.iter()
            .filter(|d| base.includes(d))
            .map(|d| (d.path.clone(), base.index_doc(d)))
            .collect()
    };
    let mut acc = init();
    let mut seen = 0u64;
    for folder in table.all_sources()?.into_keys() {
        // The store's own index never lists the mirror's documents.
        if !base.includes_mirror() && folder.starts_with(MIRROR_DIR) {
            continue;
        }
        let docs = table.docs_in_folder(&folder)?;
        seen += docs.len() as u64;
        add(&mut acc, of(docs));
    }
    if seen != table.documents(base.includes_mirror()) {
        tracing::warn!(
            seen,
            table = table.documents(base.includes_mirror()),
            "the search table's folders did not hold all its documents; read at once"
        );
        let mut acc = init();
        add(&mut acc, of(table.all_docs()?));
        return Ok(acc);
    }
    Ok(acc)
}

/// A rule document of this machine's store (`<store>/rules/<id>.md`).
fn is_store_rule(doc: &TableDoc) -> bool {
    doc.path.starts_with(&format!("{STORE_DIR}/{RULES_DIR}/"))
}

fn strip<'a>(path: &'a str, prefix: &str) -> &'a str {
    path.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(path)
}

/// What an update writes and removes under the index directory (file names), and why.
#[derive(Debug, Default)]
pub struct Update {
    /// File (relative to the index directory: a shard, `manifest.json`) → bytes; unchanged
    /// files may be among them (the caller compares before writing).
    pub writes: BTreeMap<String, String>,
    pub removes: BTreeSet<String>,
    /// A full rebuild (no usable manifest, no saying what changed since it, or asked for).
    pub full: bool,
    /// Topics whose shard was regenerated.
    pub touched: usize,
    /// Of those, paged topics updated from their head page and the documents of their
    /// changed months, without reading the topic's other documents.
    pub from_head: usize,
    /// Documents the index covers.
    pub documents: u64,
    /// Shard files (alias stubs included) of a full build; `None` for an update, which
    /// does not count them.
    pub shards: Option<usize>,
    pub manifest: Manifest,
    /// `topics/vocabulary.json` as of this build, when the vocabulary (the canonical topics
    /// or the aliases) may have changed; `None` = unchanged, nothing to write.
    pub vocabulary: Option<Redacted<String>>,
    /// The table revision this update was planned from: recorded with the index, so the
    /// next update asks only for what changed since.
    pub revision: TableRev,
    /// Shard files (head pages, pages, stubs) handed to the caller's [`Sink`] as they were
    /// rendered and not held among `writes`: named, so a full rebuild's clean-up keeps them.
    pub handed: BTreeSet<String>,
    /// The header line of each topic's head page (or stub) among `handed`: its count, for
    /// the pool's landing pages ([`Update::shard_heads`]).
    pub handed_heads: BTreeMap<String, String>,
}

/// Where an update's shard files go as they are rendered (file name relative to the index
/// directory, bytes): the sink gives the bytes back when the update is to hold them among
/// its `writes`, or takes them (written, or found equal to what the base holds) — so a
/// topic of a year's documents is never held whole as text until the update is done.
pub type Sink<'a> = dyn FnMut(&str, String) -> Result<Option<String>, BuildError> + 'a;

/// The sink that holds every file among the update's `writes`.
pub fn hold_all(_: &str, text: String) -> Result<Option<String>, BuildError> {
    Ok(Some(text))
}

impl Update {
    /// One rendered shard file, through the sink.
    fn put(&mut self, sink: &mut Sink<'_>, file: String, text: String) -> Result<(), BuildError> {
        let text_head = text.lines().next().map(str::to_owned);
        match sink(&file, text)? {
            Some(text) => {
                self.handed.remove(&file);
                self.writes.insert(file, text);
            }
            None => {
                self.writes.remove(&file);
                if let Some(head) = shard::topic_of_file(&file).and(text_head) {
                    self.handed_heads.insert(file.clone(), head);
                }
                self.handed.insert(file);
            }
        }
        Ok(())
    }

    /// The topic files this update rendered (head pages and stubs, not pages), each by its
    /// header line at least: what the pool's landing pages count topics from.
    pub fn shard_heads(&self) -> BTreeMap<String, String> {
        let mut heads = self.handed_heads.clone();
        for (file, text) in &self.writes {
            if shard::topic_of_file(file).is_some() {
                heads.insert(file.clone(), text.lines().next().unwrap_or("").to_owned());
            }
        }
        heads
    }
}

/// Where the vocabulary file lives, relative to the base (pool root or store).
pub const VOCABULARY_FILE: &str = "topics/vocabulary.json";

/// Every machine's curation facts folded, the blob id of each file by its pool path, and
/// notes on what could not be honoured.
pub struct CurationInputs {
    pub curation: Curation,
    pub files: BTreeMap<String, String>,
    pub notes: Vec<String>,
}

/// Read every machine's curation facts: this machine's from the store, the others' from
/// the mirror.
pub fn read_curation(
    store_dir: &Path,
    mirror_dir: Option<&Path>,
) -> Result<CurationInputs, BuildError> {
    let read = curation::file::read_all(store_dir, mirror_dir)?;
    let mut files = BTreeMap::new();
    for path in &read.files {
        let bytes = std::fs::read(path).map_err(|source| BuildError::Io {
            path: path.clone(),
            source,
        })?;
        let key = path
            .strip_prefix(store_dir)
            .or_else(|_| path.strip_prefix(mirror_dir.unwrap_or(store_dir)))
            .map(|p| p.to_string_lossy().replace('\\', "/"))
            .unwrap_or_else(|_| path.to_string_lossy().into_owned());
        files.insert(key, blob_id(&bytes));
    }
    let mut notes = read.notes;
    let curation = Curation::fold(read.facts);
    notes.extend(curation.ignored.iter().cloned());
    Ok(CurationInputs {
        curation,
        files,
        notes,
    })
}

/// A document whose blob differs between the input trees the pool's manifest records and
/// the trees now (added, changed or removed), by its path relative to the pool's root, with
/// the topics its recorded version had (from that blob's frontmatter; none when it is new).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeChange {
    pub path: String,
    pub old_topics: Vec<String>,
}

/// What the last build of a base saw, so an update learns only what changed since.
#[derive(Debug, Clone)]
pub enum Since {
    /// The store's index: the table revision the last build saw; `None` (unknown, or
    /// another table) — or a revision the table cannot answer for: a full rebuild.
    Table(Option<TableRev>),
    /// The pool's index: the ids of the input trees now (`chapters`, `rules` at the pool's
    /// root, recorded in the manifest this build writes), and the documents changed since
    /// the trees the manifest records — `None` when it records none this machine holds: a
    /// full rebuild.
    Tree {
        inputs: BTreeMap<String, String>,
        changes: Option<Vec<TreeChange>>,
    },
}

/// What the index at a base was last built from: the manifest as the base holds it, a
/// reader of its files, and what changed since that build.
pub struct Previous<'a> {
    /// `manifest.json` as the base holds it.
    pub manifest: Option<String>,
    /// Reads one file of the index (a topic's head page; relative to the index directory):
    /// `None` when the base has none.
    pub read_file: &'a dyn Fn(&str) -> Result<Option<String>, BuildError>,
    /// Whether the base holds this file of the index (a shard, relative to the index
    /// directory): what tells a new topic from a known one and what a removal must remove.
    pub holds: &'a dyn Fn(&str) -> Result<bool, BuildError>,
    /// The pages a topic's pages directory holds (`<dir>/<page>.md`, relative to the index
    /// directory), for a touched topic: pages it no longer writes are removed.
    pub pages: &'a dyn Fn(&str) -> Result<Vec<String>, BuildError>,
    pub since: Since,
}

/// The input areas of the pool's tree whose trees the pool's manifest records: where the
/// documents its index lists live (`chapters/<projectKey>/<root>/`, `rules/<projectKey>/`).
pub const POOL_INPUT_AREAS: [&str; 2] = ["chapters", RULES_DIR];

/// Plan an update of the index at `base`. `previous` is what the base holds; `suspects`
/// are index files someone else changed since this machine last looked (they are verified
/// by regeneration); `full` asks for the repair path. Each shard file is handed to `sink` as
/// it is rendered (`hold_all`: every file held among the update's `writes`); the manifest
/// is always held, so a caller writes it after the shards.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    table: &Table,
    base: &Base,
    curation: &Curation,
    curation_files: BTreeMap<String, String>,
    previous: &Previous<'_>,
    suspects: &BTreeSet<String>,
    full: bool,
    sink: &mut Sink<'_>,
) -> Result<Update, BuildError> {
    let aliases = shard::alias_map(curation);
    let manifest = Manifest {
        v: shard::MANIFEST_VERSION,
        documents: table.documents(base.includes_mirror()),
        curation: curation_files,
        aliases,
        inputs: match &previous.since {
            Since::Tree { inputs, .. } => inputs.clone(),
            Since::Table(_) => BTreeMap::new(),
        },
    };
    let old = previous.manifest.as_deref().and_then(Manifest::parse);
    let (Some(old), false) = (old, full) else {
        return full_build(table, base, curation, manifest, sink);
    };
    match incremental(
        table,
        base,
        curation,
        manifest.clone(),
        &old,
        previous,
        suspects,
        sink,
    )? {
        Some(update) => Ok(update),
        // What changed cannot be said: the repair path.
        None => full_build(table, base, curation, manifest, sink),
    }
}

/// The whole index from the table: every shard, and the manifest.
fn full_build(
    table: &Table,
    base: &Base,
    curation: &Curation,
    manifest: Manifest,
    sink: &mut Sink<'_>,
) -> Result<Update, BuildError> {
    // The documents as the index reads them (not the table's whole records), and the
    // vocabulary's topics folder by folder.
    let (docs, topics) = fold_folders(
        table,
        base,
        || (Vec::new(), Vec::new()),
        |(docs, topics), folder| {
            topics.push(topic_set(
                folder.iter().map(|(_, d)| d.clone()).collect(),
                curation,
            ));
            // (Folders in key order put the store's before the mirror's, as the table's
            // order does: a shard orders its lines itself, and of one path and date keeps
            // the first.)
            docs.extend(folder.into_iter().map(|(_, d)| d));
        },
    )?;
    let topics = union(topics);
    let mut update = Update {
        full: true,
        documents: manifest.documents,
        revision: table.revision(),
        ..Update::default()
    };
    let mut files = 0;
    shard::build_all_each(&docs, curation, &mut |file, text| {
        files += 1;
        update.put(sink, file, text)
    })?;
    drop(docs);
    update.touched = files;
    update.shards = Some(files);
    update.vocabulary = Some(vocab::vocabulary_json(&topics, curation));
    update
        .writes
        .insert(MANIFEST_FILE.to_owned(), manifest.render());
    update.manifest = manifest;
    Ok(update)
}

/// The topics of the base's documents (see [`topic_set`]), folder by folder.
fn streamed_topic_set(
    table: &Table,
    base: &Base,
    curation: &Curation,
) -> Result<Redacted<BTreeSet<String>>, BuildError> {
    let parts = fold_folders(table, base, Vec::new, |topics, folder| {
        topics.push(topic_set(
            folder.into_iter().map(|(_, d)| d).collect(),
            curation,
        ));
    })?;
    Ok(union(parts))
}

/// Sets of topics derived from redacted documents, as one.
fn union(parts: Vec<Redacted<BTreeSet<String>>>) -> Redacted<BTreeSet<String>> {
    let parts: Redacted<Vec<BTreeSet<String>>> = parts.into_iter().collect();
    parts.derive(|sets| sets.iter().flatten().cloned().collect())
}

/// A topic's documents as the base's index lists them. A topic with pages may hold most of a
/// year's pool: its records are read by date in `buckets` (a day's documents in one), so only
/// a bucket's full records are held at once beside the topic's (smaller) index documents.
/// Bucket after bucket, each in the table's order: a shard orders its lines itself (by date,
/// then path) and keeps the first of one path and date — which share a bucket, in the
/// table's order.
fn topic_docs(
    table: &Table,
    base: &Base,
    labels: &BTreeSet<String>,
    buckets: i64,
) -> Result<Vec<Redacted<IndexDoc>>, BuildError> {
    const DAY_MS: i64 = 86_400_000;
    let mut docs = Vec::new();
    for bucket in 0..buckets {
        let in_bucket = |date: Option<i64>| {
            date.map_or(0, |ms| ms.div_euclid(DAY_MS).rem_euclid(buckets)) == bucket
        };
        docs.extend(
            table
                .docs_with_labels_dated(labels, in_bucket)?
                .iter()
                .filter(|d| base.includes(d))
                .map(|d| base.index_doc(d)),
        );
    }
    Ok(docs)
}

/// The update of what changed since `previous`; `None` when only a full build can say.
#[allow(clippy::too_many_arguments)]
fn incremental(
    table: &Table,
    base: &Base,
    curation: &Curation,
    manifest: Manifest,
    old: &Manifest,
    previous: &Previous<'_>,
    suspects: &BTreeSet<String>,
    sink: &mut Sink<'_>,
) -> Result<Option<Update>, BuildError> {
    let mut update = Update {
        documents: manifest.documents,
        revision: table.revision(),
        ..Update::default()
    };
    let canonical =
        |labels: &[String]| curation.canonical_topics(labels.iter().map(String::as_str));
    // The topics the changed documents touch.
    let mut touched: BTreeSet<String> = BTreeSet::new();
    // Touched topics whose change is known page by page: the months of their pages that may
    // change (a new document's month, a suspect page's). Every other touched topic is
    // rendered whole: a document that left it, or one whose earlier version it listed
    // (its old month is not known), an alias change.
    let mut months_of: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut whole_topics: BTreeSet<String> = BTreeSet::new();
    // What changed, as (table folder, names changed in it, topics of replaced versions).
    let mut changes: Vec<(Vec<String>, BTreeSet<String>, Vec<String>)> = Vec::new();
    match &previous.since {
        Since::Table(since) => {
            let Some(log) = since.map(|s| table.changes_since(s)).transpose()?.flatten() else {
                return Ok(None);
            };
            for change in log {
                if base.input_dir(&change.folder).is_none() {
                    continue;
                }
                changes.push((
                    vec![change.folder],
                    change.names.into_iter().collect(),
                    change.old_labels,
                ));
            }
        }
        Since::Tree {
            changes: Some(tree),
            ..
        } => {
            // By input directory: its folders' documents read once however many changed.
            let mut by_dir: BTreeMap<&str, (BTreeSet<String>, Vec<String>)> = BTreeMap::new();
            for change in tree {
                let Some((dir, name)) = change.path.rsplit_once('/') else {
                    continue;
                };
                let entry = by_dir.entry(dir).or_default();
                entry.0.insert(name.to_owned());
                entry.1.extend(change.old_topics.iter().cloned());
            }
            for (dir, (names, old_topics)) in by_dir {
                changes.push((base.folders_of(dir), names, old_topics));
            }
        }
        Since::Tree { changes: None, .. } => return Ok(None),
    }
    for (folders, names, old_labels) in changes {
        let old = canonical(&old_labels);
        touched.extend(old.iter().cloned());
        whole_topics.extend(old);
        if names.is_empty() {
            continue;
        }
        for folder in folders {
            for doc in table.docs_in_folder(&folder)? {
                if names.contains(&doc.name) && base.includes(&doc) {
                    let month = shard::page_month(doc.meta.date.as_deref());
                    for topic in canonical(&doc.meta.topics) {
                        months_of
                            .entry(topic.clone())
                            .or_default()
                            .insert(month.clone());
                        touched.insert(topic);
                    }
                }
            }
        }
    }
    for file in suspects {
        if let Some(topic) = shard::topic_of_page(file) {
            // Someone else's page: its month is verified by regeneration.
            match shard::month_of_page(file) {
                Some(month) => {
                    months_of.entry(topic.clone()).or_default().insert(month);
                }
                None => {
                    whole_topics.insert(topic.clone());
                }
            }
            touched.insert(topic);
            continue;
        }
        match shard::topic_of_file(file) {
            // Someone else's head page: always regenerated, with the topic's pages' counts.
            Some(topic) => {
                touched.insert(topic);
            }
            None if file == MANIFEST_FILE || file == VOCABULARY_SUSPECT => {}
            None => {
                update.removes.insert(file.clone());
            }
        }
    }
    let moved = shard::alias_changes(&old.aliases, &manifest.aliases);
    touched.extend(moved.iter().cloned());
    whole_topics.extend(moved);

    // Each touched shard, regenerated.
    let stubs = shard::stubs(curation);
    update.touched = touched.len();
    let mut topics_moved = old.aliases != manifest.aliases || suspects.contains(VOCABULARY_SUSPECT);
    for topic in touched {
        let file = shard::shard_file(&topic);
        let held_pages: BTreeSet<String> = (previous.pages)(&shard::pages_dir(&topic))?
            .into_iter()
            .collect();
        // Asked before the sink is handed anything: a sink may write into the base.
        let held = (previous.holds)(&file)?;
        // Every page the topic has now (`None`: it has no documents left).
        let pages: Option<BTreeSet<String>> = match stubs.get(&topic) {
            Some(to) => {
                update.put(sink, file.clone(), shard::render_stub(&topic, to))?;
                Some(BTreeSet::new())
            }
            None => {
                let months = (!whole_topics.contains(&topic))
                    .then(|| months_of.remove(&topic).unwrap_or_default());
                // A paged topic of ours that only gained documents: from its head page and
                // the documents of its changed months, not its history.
                let from_head = match &months {
                    // (A topic without pages is small: read whole.)
                    Some(months) if !suspects.contains(&file) && !held_pages.is_empty() => {
                        paged_update(table, base, curation, &topic, months, previous)?
                    }
                    _ => None,
                }
                .filter(|rendered| {
                    rendered
                        .pages
                        .iter()
                        .all(|p| rendered.files.contains_key(p) || held_pages.contains(p))
                });
                if let Some(rendered) = from_head {
                    update.from_head += 1;
                    for (file, text) in rendered.files {
                        update.put(sink, file, text)?;
                    }
                    for held in &held_pages {
                        if !rendered.pages.contains(held) {
                            update.removes.insert(held.clone());
                        }
                    }
                    continue;
                }
                // A paged topic may hold most of the pool: its records read by date.
                let buckets = if held_pages.is_empty() { 1 } else { 8 };
                let docs = topic_docs(table, base, &table::labels_of(&topic, curation), buckets)?;
                let docs: Vec<&Redacted<IndexDoc>> = docs.iter().collect();
                if docs.is_empty() {
                    None
                } else {
                    // A page left out must be one the base holds as the last build wrote
                    // it (the topic was paged already); otherwise every page is rendered.
                    let months = months.filter(|months| {
                        shard::topic_pages(&topic, &docs)
                            .iter()
                            .all(|(page, month)| {
                                months.contains(month) || held_pages.contains(page)
                            })
                    });
                    let pages = shard::render_topic_each(
                        &topic,
                        &docs,
                        months.as_ref(),
                        &mut |file, text| update.put(sink, file, text),
                    )?;
                    Some(pages)
                }
            }
        };
        // Pages the base holds that this topic no longer has (it shrank, or a document
        // moved to another month): removed.
        for held in held_pages {
            if !pages.as_ref().is_some_and(|p| p.contains(&held)) {
                update.removes.insert(held);
            }
        }
        // Whether a stub is a stub moves only with the aliases (compared above); a topic
        // comes or goes when its shard appears or empties.
        match pages {
            Some(_) => {
                topics_moved |= !held && !stubs.contains_key(&topic);
            }
            None => {
                topics_moved |= held;
                if held || suspects.contains(&file) {
                    update.removes.insert(file);
                }
            }
        }
    }
    if topics_moved {
        // The topic list is the one thing that lists the whole index: only when it changed,
        // from the table's documents as the full build derives it, folder by folder.
        update.vocabulary = Some(vocab::vocabulary_json(
            &streamed_topic_set(table, base, curation)?,
            curation,
        ));
    }
    update
        .writes
        .insert(MANIFEST_FILE.to_owned(), manifest.render());
    update.manifest = manifest;
    Ok(Some(update))
}

/// A paged topic whose documents only joined `months` (no document left it, none of its
/// listed versions was replaced), from its head page as the base holds it: the documents
/// of those months and the ones the head lists outside them, read from the table by date
/// (the dates from its metadata: only the records of those months and days are read). `None` when the head
/// page is not one this build wrote for a paged topic, or a document it lists is gone: the
/// caller renders from every document of the topic.
fn paged_update(
    table: &Table,
    base: &Base,
    curation: &Curation,
    topic: &str,
    months: &BTreeSet<String>,
    previous: &Previous<'_>,
) -> Result<Option<shard::TopicFiles>, BuildError> {
    let Some(text) = (previous.read_file)(&shard::shard_file(topic))? else {
        return Ok(None);
    };
    let Some(old) = shard::parse_head(topic, &text) else {
        return Ok(None);
    };
    // A date's day (and month) is its literal `YYYY-MM-DD`, its instant UTC: an offset
    // (under a day; `parse_rfc3339_ms` refuses more) moves the instant by less than this.
    const MARGIN_MS: i64 = 86_400_000 + 60_000;
    let start = |day: String| crate::time::parse_rfc3339_ms(&format!("{day}T00:00:00Z"));
    let month_span = |m: &str| -> Option<(i64, i64)> {
        let (year, month) = m.split_once('-')?;
        let (year, month): (i32, u32) = (year.parse().ok()?, month.parse().ok()?);
        let next = if month == 12 {
            format!("{:04}-01-01", year + 1)
        } else {
            format!("{year:04}-{:02}-01", month + 1)
        };
        Some((start(format!("{m}-01"))?, start(next)?))
    };
    // The head's lines outside `months`: looked up on their days.
    let outside: Vec<&shard::HeadLine> = old
        .lines
        .iter()
        .filter(|l| !months.contains(&l.month))
        .collect();
    let mut spans: Vec<(i64, i64)> = months.iter().filter_map(|m| month_span(m)).collect();
    spans.extend(
        outside
            .iter()
            .filter_map(|l| start(l.day.clone()))
            .map(|at| (at, at + 86_400_000)),
    );
    let undated = months.contains("undated") || outside.iter().any(|l| l.month == "undated");
    let dates = table::DateSpans::new(
        spans
            .into_iter()
            .map(|(from, to)| (from - MARGIN_MS, to + MARGIN_MS)),
        undated,
    );
    let docs: Vec<Redacted<IndexDoc>> = table
        .docs_with_labels_in(&table::labels_of(topic, curation), &dates)?
        .iter()
        .filter(|d| base.includes(d))
        .map(|d| base.index_doc(d))
        .collect();
    let wanted: BTreeSet<&str> = outside.iter().map(|l| l.path.as_str()).collect();
    let listed: Vec<&Redacted<IndexDoc>> = docs
        .iter()
        .filter(|d| wanted.contains(d.get().path.as_str()))
        .collect();
    let found: BTreeSet<&str> = listed.iter().map(|d| d.get().path.as_str()).collect();
    if found.len() != wanted.len() {
        return Ok(None);
    }
    Ok(shard::update_paged_topic(
        topic,
        &old,
        months,
        &docs.iter().collect::<Vec<_>>(),
        &listed,
    ))
}

/// The topics `topics/vocabulary.json` lists: the canonical topics of the index's redacted
/// documents — the topics the shards are written for — alias stubs left out.
fn topic_set(docs: Redacted<Vec<IndexDoc>>, curation: &Curation) -> Redacted<BTreeSet<String>> {
    docs.derive_with(curation, |docs, curation| {
        let stubs = shard::stubs(curation);
        docs.iter()
            .flat_map(|d| shard::canonical_topics(d, curation))
            .filter(|t| !stubs.contains_key(t))
            // A topic's shard file names it back (as `vocabulary.json` listed the files).
            .filter(|t| shard::topic_of_file(&shard::shard_file(t)).as_deref() == Some(t))
            .collect()
    })
}

/// Passed among the suspects when someone else changed `topics/vocabulary.json`.
pub const VOCABULARY_SUSPECT: &str = "../topics/vocabulary.json";

/// What a store-index update did.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub full: bool,
    pub touched: usize,
    pub written: usize,
    pub removed: usize,
    pub documents: u64,
    /// Shard files after a full build (alias stubs included); 0 after an update, which
    /// does not count them.
    pub shards: usize,
}

/// The files of an index directory (an older build's manifest parts as `manifest/xx.json`),
/// dot files left out: what a full rebuild removes when it does not name them (hand-added
/// files, the parts).
pub fn files_on_disk(index_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let list = |dir: &Path| -> Vec<(String, bool)> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        (name, e.file_type().is_ok_and(|t| t.is_dir()))
                    })
                    .filter(|(name, _)| !name.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default()
    };
    for (name, dir) in list(index_dir) {
        if !dir {
            out.push(name);
        } else if name == OLD_PARTS_DIR {
            for (part, sub) in list(&index_dir.join(OLD_PARTS_DIR)) {
                if !sub {
                    out.push(format!("{OLD_PARTS_DIR}/{part}"));
                }
            }
        } else if shard::topic_of_file(&format!("{name}.md")).is_some() {
            // A topic's pages (`<topic>/<page>.md`).
            for (page, sub) in list(&index_dir.join(&name)) {
                let file = format!("{name}/{page}");
                if !sub && shard::topic_of_page(&file).is_some() {
                    out.push(file);
                }
            }
        }
    }
    out.sort();
    out
}

/// The pages of one topic's pages directory `dir` on disk (`<dir>/<page>.md`), sorted.
pub fn pages_on_disk(index_dir: &Path, dir: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(index_dir.join(dir))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .map(|e| format!("{dir}/{}", e.file_name().to_string_lossy()))
                .filter(|f| shard::topic_of_page(f).is_some())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Apply an update to the store's index directory (`<store>/index/`; the pool's index
/// reaches the mirror through the sync's copy-in, `Store::mirror_writes`): write what
/// differs, remove what goes;
/// on a full rebuild, also remove any file the index does not name (a hand-added file).
/// The shards first, then `manifest.json`: a crash leaves the manifest behind the shards,
/// and the next update (which starts from the revision recorded after this one completes)
/// regenerates what they do not reflect.
fn apply(index_dir: &Path, update: &Update) -> Result<Written, BuildError> {
    let mut written = Written {
        full: update.full,
        touched: update.touched,
        documents: update.documents,
        shards: update.shards.unwrap_or(0),
        ..Written::default()
    };
    let mut removes = update.removes.clone();
    if update.full {
        removes.extend(
            files_on_disk(index_dir)
                .into_iter()
                .filter(|f| !update.writes.contains_key(f) && !update.handed.contains(f)),
        );
    }
    for name in &removes {
        if std::fs::remove_file(index_dir.join(name)).is_ok() {
            written.removed += 1;
        }
    }
    if update.full {
        // An older build's parts went above; their directory goes with them (kept if
        // anything else is in it).
        let _ = std::fs::remove_dir(index_dir.join(OLD_PARTS_DIR));
    }
    let mut order: Vec<(&String, &String)> = update.writes.iter().collect();
    order.sort_by_key(|(name, _)| *name == MANIFEST_FILE);
    for (name, text) in order {
        written.written += write_index_file(index_dir, name, text)? as usize;
    }
    Ok(written)
}

/// The directory of the manifest's 256 parts an index of manifest version 2 kept (per input
/// folder a content hash): removed by the full rebuild a manifest of another version gets.
pub const OLD_PARTS_DIR: &str = "manifest";

/// One file of an index directory, when its bytes differ; whether it was written.
fn write_index_file(index_dir: &Path, name: &str, text: &str) -> Result<bool, BuildError> {
    let path = index_dir.join(name);
    if name.contains('/') {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
    }
    write_if_changed(&path, text)
}

fn write_if_changed(path: &Path, text: &str) -> Result<bool, BuildError> {
    if std::fs::read(path).ok().as_deref() == Some(text.as_bytes()) {
        return Ok(false);
    }
    // Derived and rebuildable: renamed into place, not fsynced one by one.
    atomic::write_atomic_unsynced(path, text.as_bytes())?;
    Ok(true)
}

/// The vocabulary's merge candidates over the door's documents (`include_mirror` when
/// linked), given every machine's curation.
pub fn vocabulary_candidates(
    table: &Table,
    project_key: &str,
    include_mirror: bool,
    curation: &Curation,
    params: VocabParams,
) -> Result<Redacted<Vec<Candidate>>, BuildError> {
    let raw = table.label_docs(project_key, include_mirror)?;
    let with = VocabWith { curation, params };
    Ok(raw.derive_with(&with, |raw, with| {
        let sets = vocab::canonical_sets(raw, with.curation);
        vocab::candidates(&sets, with.curation, with.params)
    }))
}

/// What the vocabulary's candidates are computed with beside the documents' topics: the
/// curation read back from the store and the mirror, and the configured thresholds.
struct VocabWith<'a> {
    curation: &'a Curation,
    params: VocabParams,
}

impl Settings for VocabWith<'_> {}

/// `vocabApply: true`: what the vocabulary pass may write, and with which redactor.
pub struct VocabApply<'a> {
    pub params: VocabParams,
    pub redactor: &'a Redactor,
    pub harness: &'a str,
    pub now: &'a str,
}

impl<'a> VocabApply<'a> {
    /// The vocabulary pass as configured: `None` in shadow mode (`vocabApply: false`).
    pub fn when_applied(
        config: &crate::config::Config,
        redactor: &'a Redactor,
        harness: &'a str,
        now: &'a str,
    ) -> Option<VocabApply<'a>> {
        config.vocab_apply.then(|| VocabApply {
            params: VocabParams::from_config(config),
            redactor,
            harness,
            now,
        })
    }
}

/// Apply the vocabulary: each candidate becomes a `topic-alias` fact by `plugin` in this
/// machine's curation file (a person's alias still wins: the fold never lets a plugin fact
/// override one). The caller holds the store's writer lock. Returns what was written.
pub fn apply_vocabulary(
    store: &Store,
    table: &Table,
    project_key: &str,
    include_mirror: bool,
    mirror_dir: Option<&Path>,
    apply: &VocabApply<'_>,
) -> Result<Redacted<Vec<Candidate>>, BuildError> {
    let inputs = read_curation(store.dir(), mirror_dir)?;
    let candidates = vocabulary_candidates(
        table,
        project_key,
        include_mirror,
        &inputs.curation,
        apply.params,
    )?;
    let at = At(apply.now.to_owned());
    for c in candidates.clone().into_items() {
        curation::file::append(
            store,
            apply.harness,
            &c.derive_with(&at, |c, at| c.fact(&at.0)),
        )?;
    }
    Ok(candidates)
}

/// Bring the store's own index (`<store>/index/`) up to date with the table, or rebuild it.
pub fn update_store(workspace: &Path, table: &Table, full: bool) -> Result<Written, BuildError> {
    let store_dir = workspace.join(STORE_DIR);
    let index_dir = store_dir.join(INDEX_DIR);
    let inputs = read_curation(&store_dir, None)?;
    let marker = index_dir.join(BUILT_MARKER);
    let built = std::fs::read_to_string(&marker).ok();
    if !full && built == Some(built_key(&index_dir, table.revision(), &inputs.files)) {
        return Ok(Written::default());
    }
    let read_file = |file: &str| read_index_file(&index_dir, file);
    let holds = |file: &str| Ok(index_dir.join(file).is_file());
    let pages = |dir: &str| Ok(pages_on_disk(&index_dir, dir));
    let previous = Previous {
        manifest: std::fs::read_to_string(index_dir.join(MANIFEST_FILE)).ok(),
        read_file: &read_file,
        holds: &holds,
        pages: &pages,
        since: Since::Table(
            built
                .as_deref()
                .and_then(|b| b.lines().next())
                .and_then(|l| l.parse().ok()),
        ),
    };
    std::fs::create_dir_all(&index_dir).map_err(|source| BuildError::Io {
        path: index_dir.clone(),
        source,
    })?;
    // Each shard file written as it is rendered; the manifest after them.
    let mut shards_written = 0;
    let update = plan(
        table,
        &Base::Store,
        &inputs.curation,
        inputs.files,
        &previous,
        &BTreeSet::new(),
        full,
        &mut |file, text| {
            shards_written += write_index_file(&index_dir, file, &text)? as usize;
            Ok(None)
        },
    )?;
    let mut written = apply(&index_dir, &update)?;
    written.written += shards_written;
    let vocabulary = store_dir.join(VOCABULARY_FILE);
    if let Some(dir) = vocabulary.parent() {
        std::fs::create_dir_all(dir).map_err(|source| BuildError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    if let Some(text) = &update.vocabulary {
        write_if_changed(&vocabulary, text)?;
    }
    write_if_changed(
        &marker,
        &built_key(&index_dir, update.revision, &update.manifest.curation),
    )?;
    Ok(written)
}

/// A file of an index directory (`None` when absent).
fn read_index_file(index_dir: &Path, file: &str) -> Result<Option<String>, BuildError> {
    let path = index_dir.join(file);
    match std::fs::read(&path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(BuildError::Io { path, source }),
    }
}

/// What a store-index build is a function of, locally: the table revision it saw (its
/// first line: the next update asks the table for what changed since), the curation files,
/// and the manifest as written (a hand edit changes its stamp).
fn built_key(
    index_dir: &Path,
    revision: TableRev,
    curation_files: &BTreeMap<String, String>,
) -> String {
    let manifest_stamp = std::fs::metadata(index_dir.join(MANIFEST_FILE))
        .ok()
        .map(|m| (m.len(), m.modified().ok()));
    format!(
        "{revision}\n{}\n{manifest_stamp:?}\n",
        serde_json::to_string(curation_files).expect("a map of strings")
    )
}

/// Whether the store's index already reflects the table and the curation files: read-only,
/// so a search can skip the writer lock when nothing changed.
pub fn store_index_current(workspace: &Path, table: &Table) -> bool {
    let store_dir = workspace.join(STORE_DIR);
    let index_dir = store_dir.join(INDEX_DIR);
    read_curation(&store_dir, None)
        .map(|inputs| {
            std::fs::read_to_string(index_dir.join(BUILT_MARKER)).ok()
                == Some(built_key(&index_dir, table.revision(), &inputs.files))
        })
        .unwrap_or(false)
}

/// `index/.built`: the inputs of the last index update at that base (a dot file: never
/// part of the index, never published, ignored by a rebuild's clean-up).
const BUILT_MARKER: &str = ".built";

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn put(ws: &Path, rel: &str, text: &str) {
        crate::testkit::catalog::put_document(ws, rel, text);
    }

    fn chapter(title: &str, topics: &str, day: u32) -> String {
        format!("---\ntitle: \"{title}\"\nkind: chapter\nprojectKey: \"pk\"\ntopics: [{topics}]\ndate: \"2025-11-{day:02}T00:00:00Z\"\n---\nbody\n")
    }

    fn snapshot(dir: &Path) -> BTreeMap<String, String> {
        files_on_disk(dir)
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(dir.join(&f)).expect("read");
                (f, text)
            })
            .collect()
    }

    fn refresh(ws: &Path) -> Table {
        Table::refresh(ws, false, Duration::from_secs(5))
            .expect("refresh")
            .0
    }

    #[test]
    fn incremental_equals_rebuild_and_touches_only_what_changed() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "auth, csv", 1),
        );
        put(
            ws,
            ".dsh-chapters/s2/chapters/001-b.md",
            &chapter("B", "csv", 2),
        );
        let index = ws.join(".dsh-chapters/index");
        let first = update_store(ws, &refresh(ws), false).expect("first");
        assert!(first.full);
        assert_eq!(first.shards, 2);
        put(
            ws,
            ".dsh-chapters/s2/chapters/002-c.md",
            &chapter("C", "jwt, auth", 3),
        );
        put(
            ws,
            ".dsh-chapters/s3/chapters/001-d.md",
            &chapter("D", "jwt", 4),
        );
        let next = update_store(ws, &refresh(ws), false).expect("next");
        assert!(!next.full);
        // The new documents' topics only (s2's 002-c: jwt, auth; s3's 001-d: jwt): csv,
        // which s2's older document carries, is not regenerated.
        assert_eq!(next.touched, 2);
        let incremental = snapshot(&index);
        let vocabulary = ws.join(".dsh-chapters").join(VOCABULARY_FILE);
        let vocabulary_incremental = std::fs::read_to_string(&vocabulary).expect("vocabulary");
        assert!(
            vocabulary_incremental.contains("\"jwt\""),
            "a new topic joins it"
        );
        let rebuilt = update_store(ws, &refresh(ws), true).expect("rebuild");
        assert!(rebuilt.full);
        assert_eq!(snapshot(&index), incremental);
        assert_eq!(
            std::fs::read_to_string(&vocabulary).expect("vocabulary"),
            vocabulary_incremental
        );
        assert!(
            incremental["auth.md"].starts_with("# auth — 2 documents, last updated 2025-11-03\n")
        );
        assert!(incremental["auth.md"].contains("[002-c.md](../s2/chapters/002-c.md)"));
        assert!(incremental.contains_key("manifest.json"));
        // Nothing new: nothing written.
        let idle = update_store(ws, &refresh(ws), false).expect("idle");
        assert_eq!((idle.touched, idle.written), (0, 0));
    }

    #[test]
    fn a_paged_topic_updates_its_head_and_one_page_like_a_rebuild() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let n = shard::HEAD_LINES + 5;
        for i in 0..n {
            put(
                ws,
                &format!(".dsh-chapters/s{}/chapters/{i:03}-a.md", i % 7),
                &chapter(&format!("A{i}"), "auth", (i % 20 + 1) as u32),
            );
        }
        let index = ws.join(".dsh-chapters/index");
        update_store(ws, &refresh(ws), false).expect("first");
        let before = snapshot(&index);
        assert!(
            before.contains_key("auth/2025-11.md"),
            "{:?}",
            before.keys()
        );
        put(
            ws,
            ".dsh-chapters/s9/chapters/001-z.md",
            &chapter("Z", "auth", 28),
        );
        let next = update_store(ws, &refresh(ws), false).expect("next");
        assert!(!next.full);
        let after = snapshot(&index);
        let changed: Vec<&String> = after
            .keys()
            .filter(|f| before.get(*f) != after.get(*f) && !f.starts_with("manifest"))
            .collect();
        assert_eq!(changed, ["auth.md", "auth/2025-11.md"]);
        update_store(ws, &refresh(ws), true).expect("rebuild");
        assert_eq!(snapshot(&index), after);
        // The topic shrinks back under a head's worth (documents move to another topic):
        // its pages go, like a rebuild.
        for i in 0..10 {
            put(
                ws,
                &format!(".dsh-chapters/s{}/chapters/{i:03}-a.md", i % 7),
                &chapter(&format!("A{i}"), "csv", (i % 20 + 1) as u32),
            );
        }
        update_store(ws, &refresh(ws), false).expect("shrink");
        let shrunk = snapshot(&index);
        assert!(
            !shrunk.keys().any(|f| f.starts_with("auth/")),
            "{:?} {}",
            shrunk.keys(),
            shrunk["auth.md"]
        );
        update_store(ws, &refresh(ws), true).expect("rebuild");
        assert_eq!(snapshot(&index), shrunk);
    }

    #[test]
    fn an_alias_fact_moves_documents_and_leaves_a_stub_like_a_rebuild() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "auth", 1),
        );
        put(
            ws,
            ".dsh-chapters/s1/chapters/002-b.md",
            &chapter("B", "authentication", 2),
        );
        let store = crate::store::Store::init(ws).expect("store");
        update_store(ws, &refresh(ws), false).expect("first");
        let mut fact = curation::Fact::new(
            curation::FactKind::TopicAlias {
                from: "auth".into(),
                to: "authentication".into(),
            },
            curation::Author::User,
            "2025-12-01T00:00:00Z",
        );
        fact.reason = Some("same thing".into());
        let redactor = crate::redact::Redactor::new(&[]).expect("redactor");
        curation::file::append(&store, "m1", &curation::file::redacted(&fact, &redactor))
            .expect("append");
        let after = update_store(ws, &refresh(ws), false).expect("after");
        assert!(!after.full);
        assert_eq!(after.touched, 2, "auth and authentication only");
        let index = ws.join(".dsh-chapters/index");
        let incremental = snapshot(&index);
        assert!(incremental["auth.md"].contains("merged into [authentication]"));
        assert!(incremental["authentication.md"].starts_with("# authentication — 2 documents"));
        update_store(ws, &refresh(ws), true).expect("rebuild");
        assert_eq!(snapshot(&index), incremental);
    }

    /// The plan `update_store` would apply, for a test to see what it renders.
    fn store_plan(ws: &Path) -> Update {
        let table = refresh(ws);
        let store_dir = ws.join(STORE_DIR);
        let index_dir = store_dir.join(INDEX_DIR);
        let inputs = read_curation(&store_dir, None).expect("curation");
        let read_file = |file: &str| read_index_file(&index_dir, file);
        let holds = |file: &str| Ok(index_dir.join(file).is_file());
        let pages = |dir: &str| Ok(pages_on_disk(&index_dir, dir));
        let built = std::fs::read_to_string(index_dir.join(BUILT_MARKER)).ok();
        let previous = Previous {
            manifest: std::fs::read_to_string(index_dir.join(MANIFEST_FILE)).ok(),
            read_file: &read_file,
            holds: &holds,
            pages: &pages,
            since: Since::Table(
                built
                    .as_deref()
                    .and_then(|b| b.lines().next())
                    .and_then(|l| l.parse().ok()),
            ),
        };
        plan(
            &table,
            &Base::Store,
            &inputs.curation,
            inputs.files,
            &previous,
            &BTreeSet::new(),
            false,
            &mut hold_all,
        )
        .expect("plan")
    }

    /// A paged topic's update renders its head and the pages of the months its new
    /// documents fall in, nothing else — and the index it leaves is, byte for byte, the
    /// index a from-scratch build of the same documents writes in another workspace.
    #[test]
    fn a_paged_topic_renders_only_the_touched_months_and_equals_a_build_from_scratch() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path().join("incremental");
        let scratch = tmp.path().join("scratch");
        let dated = |title: &str, topics: &str, month: u32, day: u32| {
            format!("---\ntitle: \"{title}\"\nkind: chapter\nprojectKey: \"pk\"\ntopics: [{topics}]\ndate: \"2025-{month:02}-{day:02}T{:02}:00:00Z\"\n---\nbody\n", day % 24)
        };
        let mut docs: Vec<(String, String)> = Vec::new();
        let add = |ws: &Path, docs: &mut Vec<(String, String)>, rel: String, text: String| {
            put(ws, &rel, &text);
            docs.push((rel, text));
        };
        // 3 months of `auth` (the middle one past a page of its own), `csv` on a few.
        for i in 0..(shard::PAGE_LINES + 300) {
            let month = [9, 10, 10, 10, 10, 11][i % 6];
            let topics = if i % 50 == 0 { "auth, csv" } else { "auth" };
            add(
                &ws,
                &mut docs,
                format!(".dsh-chapters/s{}/chapters/{i:04}-a.md", i % 13),
                dated(&format!("A{i}"), topics, month, (i % 28 + 1) as u32),
            );
        }
        let index = ws.join(".dsh-chapters/index");
        assert!(update_store(&ws, &refresh(&ws), false).expect("first").full);
        let before = snapshot(&index);
        assert!(
            before.contains_key("auth/2025-10-2.md"),
            "{:?}",
            before.keys()
        );

        // New documents in November only (one also in `csv`).
        for i in 0..5 {
            add(
                &ws,
                &mut docs,
                format!(".dsh-chapters/s20/chapters/{i:03}-n.md"),
                dated(
                    &format!("N{i}"),
                    if i == 0 { "auth, csv" } else { "auth" },
                    11,
                    27,
                ),
            );
        }
        let update = store_plan(&ws);
        assert!(!update.full);
        let rendered: Vec<&str> = update
            .writes
            .keys()
            .map(String::as_str)
            .filter(|f| !f.starts_with("manifest"))
            .collect();
        assert_eq!(rendered, ["auth.md", "auth/2025-11.md", "csv.md"]);
        assert!(update.removes.is_empty(), "{:?}", update.removes);
        update_store(&ws, &refresh(&ws), false).expect("next");

        // A document into the middle of October (its pages shift): October's pages only.
        add(
            &ws,
            &mut docs,
            ".dsh-chapters/s21/chapters/001-o.md".into(),
            dated("O", "auth", 10, 3),
        );
        let update = store_plan(&ws);
        let rendered: Vec<&str> = update
            .writes
            .keys()
            .map(String::as_str)
            .filter(|f| !f.starts_with("manifest"))
            .collect();
        assert_eq!(
            rendered,
            ["auth.md", "auth/2025-10-2.md", "auth/2025-10.md"]
        );
        update_store(&ws, &refresh(&ws), false).expect("october");

        // A re-annotation (an earlier version listed in `auth`): the topic is rendered whole.
        add(
            &ws,
            &mut docs,
            ".dsh-chapters/s0/chapters/0000-a.md".into(),
            dated("A0 again", "auth", 12, 1),
        );
        let update = store_plan(&ws);
        assert!(update.writes.contains_key("auth/2025-09.md"));
        assert!(update.writes.contains_key("auth/2025-12.md"));
        update_store(&ws, &refresh(&ws), false).expect("reannotated");

        let incremental = snapshot(&index);
        assert_ne!(incremental, before);
        // The same documents, written at once into another workspace and built whole.
        let mut last: BTreeMap<&str, &str> = BTreeMap::new();
        for (rel, text) in &docs {
            last.insert(rel, text);
        }
        for (rel, text) in last {
            put(&scratch, rel, text);
        }
        let whole = update_store(&scratch, &refresh(&scratch), true).expect("scratch");
        assert!(whole.full);
        let from_scratch = snapshot(&scratch.join(".dsh-chapters/index"));
        assert_eq!(
            incremental.keys().collect::<Vec<_>>(),
            from_scratch.keys().collect::<Vec<_>>()
        );
        for (file, text) in &from_scratch {
            assert_eq!(incremental[file], *text, "{file}");
        }
    }

    /// +10 chapters at a time into a few hundred: the paged topics are updated from their
    /// head pages and the documents of the changed months (none of their history read), and
    /// every round leaves the index `index rebuild` writes, byte for byte — new months, an
    /// older month, an undated chapter, an offset date on a month's edge, a topic that
    /// becomes paged, a hand-edited head (read whole instead).
    #[test]
    fn ten_new_chapters_update_paged_topics_from_their_heads_like_a_rebuild() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let doc = |i: usize, date: Option<String>| {
            let mut topics = vec!["auth"];
            if i.is_multiple_of(3) {
                topics.push("csv");
            }
            if i % 8 == 4 {
                topics.push("jwt");
            }
            let date = date.map_or(String::new(), |d| format!("date: \"{d}\"\n"));
            format!(
                "---\ntitle: \"C{i}\"\nkind: chapter\nprojectKey: \"pk\"\ntopics: [{}]\n{date}---\nbody\n",
                topics.join(", ")
            )
        };
        let dated = |month: usize, day: usize, hour: usize| {
            let (year, month) = (2025 + (month - 1) / 12, (month - 1) % 12 + 1);
            Some(format!("{year}-{month:02}-{day:02}T{hour:02}:00:00Z"))
        };
        let rel = |i: usize| format!(".dsh-chapters/s{}/chapters/{i:04}-c.md", i / 25);
        // 400 chapters over September 2025 to January 2026, a few per hour (ties by path).
        for i in 0..400 {
            let month = 9 + i / 80;
            put(
                ws,
                &rel(i),
                &doc(i, dated(month, i % 80 / 3 + 1, i % 3 * 7)),
            );
        }
        let index = ws.join(".dsh-chapters/index");
        assert!(update_store(ws, &refresh(ws), false).expect("first").full);
        let mut next = 400;
        for round in 0..4 {
            let mut dates: Vec<Option<String>> =
                (0..10).map(|k| dated(13 + round, 28 - k, 23 - k)).collect();
            match round {
                // An older month, an undated chapter, and an offset date on February's edge
                // (January 31st at 23:30 UTC; its month is its literal one, February).
                0 => {
                    dates[3] = dated(10, 15, 12);
                    dates[4] = None;
                    dates[5] = Some("2026-02-01T01:30:00+02:00".into());
                }
                // Ties with the head's newest lines: the same instant, paths before and after.
                1 => dates[2] = dated(14, 28, 23),
                _ => {}
            }
            for date in dates {
                put(ws, &rel(next), &doc(next, date));
                next += 1;
            }
            if round == 2 {
                // A hand edit of a head's line: that topic is read whole, to the same bytes.
                let head = index.join("csv.md");
                let text = std::fs::read_to_string(&head).expect("csv head");
                let edited = format!("{}a note by hand\n", text.replacen("| C", "| X", 1));
                std::fs::write(&head, edited).expect("edit");
            }
            let plan = store_plan(ws);
            assert!(!plan.full, "round {round}");
            // Round 0: `jwt` becomes paged (read whole); round 2: `csv`'s head was edited.
            let from_head = [2, 3, 2, 3][round];
            assert_eq!(plan.from_head, from_head, "round {round}");
            update_store(ws, &refresh(ws), false).expect("incremental");
            let incremental = snapshot(&index);
            assert!(incremental.contains_key("csv.md"));
            assert!(incremental.keys().any(|f| f.starts_with("auth/2026-")));
            assert!(update_store(ws, &refresh(ws), true).expect("rebuild").full);
            let rebuilt = snapshot(&index);
            assert_eq!(
                incremental.keys().collect::<Vec<_>>(),
                rebuilt.keys().collect::<Vec<_>>(),
                "round {round}"
            );
            for (file, text) in &rebuilt {
                assert_eq!(incremental[file], *text, "round {round}: {file}");
            }
        }
        // `jwt` (one in eight: 50 at first) became paged on the way.
        assert!(snapshot(&index)["jwt.md"].contains("## Pages"));
    }

    #[test]
    fn a_hand_edited_or_lost_manifest_means_a_full_rebuild_to_the_same_bytes() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "auth", 1),
        );
        update_store(ws, &refresh(ws), false).expect("first");
        let index = ws.join(".dsh-chapters/index");
        let good = snapshot(&index);
        std::fs::write(index.join("manifest.json"), "{ hand edited").expect("edit");
        std::fs::write(index.join("stray.md"), "x").expect("stray");
        let again = update_store(ws, &refresh(ws), false).expect("again");
        assert!(again.full);
        assert_eq!(snapshot(&index), good);
    }

    #[test]
    fn a_reannotation_moves_its_document_out_of_its_old_topics_like_a_rebuild() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "auth, csv", 1),
        );
        put(
            ws,
            ".dsh-chapters/s1/chapters/002-b.md",
            &chapter("B", "csv", 2),
        );
        update_store(ws, &refresh(ws), false).expect("first");
        // Enrichment rewrites 001-a with other topics (a longer file: its stamp moves).
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A, annotated", "jwt", 1),
        );
        let next = update_store(ws, &refresh(ws), false).expect("next");
        assert!(!next.full);
        // jwt gains it; auth and csv lose it (auth goes, csv is regenerated).
        assert_eq!(next.touched, 3);
        let index = ws.join(".dsh-chapters/index");
        let incremental = snapshot(&index);
        assert!(
            !incremental.contains_key("auth.md"),
            "{:?}",
            incremental.keys()
        );
        assert!(incremental["csv.md"].starts_with("# csv — 1 document,"));
        let vocabulary = ws.join(".dsh-chapters").join(VOCABULARY_FILE);
        let vocabulary_incremental = std::fs::read_to_string(&vocabulary).expect("vocabulary");
        assert!(
            !vocabulary_incremental.contains("\"auth\""),
            "a topic that emptied leaves it"
        );
        update_store(ws, &refresh(ws), true).expect("rebuild");
        assert_eq!(snapshot(&index), incremental);
        assert_eq!(
            std::fs::read_to_string(&vocabulary).expect("vocabulary"),
            vocabulary_incremental
        );
    }

    #[test]
    fn without_a_usable_revision_the_store_index_is_rebuilt_and_an_old_format_loses_its_parts() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "auth", 1),
        );
        update_store(ws, &refresh(ws), false).expect("first");
        let index = ws.join(".dsh-chapters/index");
        put(
            ws,
            ".dsh-chapters/s2/chapters/001-b.md",
            &chapter("B", "auth, jwt", 2),
        );
        // The record of the revision the last build saw is lost (and the table's own log
        // with the cache): the table cannot say what changed, so everything is rebuilt.
        std::fs::remove_file(index.join(BUILT_MARKER)).expect("rm marker");
        std::fs::remove_dir_all(ws.join(".dsh-chapters/.search")).expect("rm table");
        let next = update_store(ws, &refresh(ws), false).expect("next");
        assert!(next.full, "the table cannot say: a rebuild");
        let rebuilt = snapshot(&index);
        assert!(rebuilt["auth.md"].starts_with("# auth — 2 documents"));
        assert!(rebuilt.contains_key("jwt.md"));
        // An index of manifest version 2 (its per-folder parts in `manifest/`): rebuilt
        // once, the parts and their directory removed, the shards' bytes unchanged.
        let manifest = index.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&manifest).expect("manifest");
        std::fs::write(&manifest, text.replace("\"v\": 3", "\"v\": 2")).expect("v2");
        std::fs::create_dir_all(index.join(OLD_PARTS_DIR)).expect("parts dir");
        std::fs::write(
            index.join(OLD_PARTS_DIR).join("ab.json"),
            "{\"inputs\":{}}\n",
        )
        .expect("part");
        put(
            ws,
            ".dsh-chapters/s3/chapters/001-c.md",
            &chapter("C", "csv", 3),
        );
        let next = update_store(ws, &refresh(ws), false).expect("old format");
        assert!(next.full, "a manifest of another version: a rebuild");
        assert!(!index.join(OLD_PARTS_DIR).exists(), "the parts are gone");
        let after = snapshot(&index);
        assert_eq!(after["auth.md"], rebuilt["auth.md"]);
        assert_eq!(
            after[MANIFEST_FILE],
            text.replace("\"documents\": 2", "\"documents\": 3")
        );
        update_store(ws, &refresh(ws), true).expect("rebuild");
        assert_eq!(snapshot(&index), after);
    }

    #[test]
    fn an_update_reads_and_writes_only_what_it_touches() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        for i in 0..40 {
            put(
                ws,
                &format!(".dsh-chapters/s{i:02}/chapters/001-a.md"),
                &chapter("A", &format!("t{i}, common"), 1),
            );
        }
        update_store(ws, &refresh(ws), false).expect("first");
        let index = ws.join(".dsh-chapters/index");
        let before = snapshot(&index);
        put(
            ws,
            ".dsh-chapters/s05/chapters/002-b.md",
            &chapter("B", "t5", 2),
        );
        let table = refresh(ws);
        let read_files = std::cell::RefCell::new(BTreeSet::new());
        let counting = |file: &str| {
            read_files.borrow_mut().insert(file.to_owned());
            read_index_file(&index, file)
        };
        let holds = |file: &str| Ok(index.join(file).is_file());
        let update = plan(
            &table,
            &Base::Store,
            &Curation::default(),
            BTreeMap::new(),
            &Previous {
                manifest: before.get(MANIFEST_FILE).cloned(),
                read_file: &counting,
                holds: &holds,
                pages: &|dir: &str| Ok(pages_on_disk(&index, dir)),
                since: Since::Table(
                    std::fs::read_to_string(index.join(BUILT_MARKER))
                        .ok()
                        .and_then(|b| b.lines().next()?.parse().ok()),
                ),
            },
            &BTreeSet::new(),
            false,
            &mut hold_all,
        )
        .expect("plan");
        assert!(!update.full);
        assert_eq!(update.touched, 1, "t5 only");
        assert!(
            read_files.borrow().is_empty(),
            "no file of the index is read: {:?}",
            read_files.borrow()
        );
        let written: BTreeSet<&String> = update.writes.keys().collect();
        let expected = ["manifest.json".to_owned(), "t5.md".to_owned()];
        assert_eq!(
            written,
            expected.iter().collect(),
            "the shard and the manifest"
        );
        assert!(update.vocabulary.is_none(), "no topic came or went");
        apply(&index, &update).expect("apply");
        let after = snapshot(&index);
        update_store(ws, &refresh(ws), true).expect("rebuild");
        assert_eq!(snapshot(&index), after);
    }

    /// What a base holds, in memory: `Previous` over a plan's writes.
    /// The index as it was built before it streamed: every record of the table at once,
    /// every shard file held (`Table::all_docs`, `shard::build_all`, one `topic_set`).
    fn built_from_every_record(
        table: &Table,
        base: &Base,
        curation: &Curation,
    ) -> (BTreeMap<String, String>, Redacted<String>) {
        let docs: Vec<Redacted<IndexDoc>> = table
            .all_docs()
            .expect("all")
            .iter()
            .filter(|d| base.includes(d))
            .map(|d| base.index_doc(d))
            .collect();
        let topics = topic_set(docs.iter().cloned().collect(), curation);
        (
            shard::build_all(&docs, curation),
            vocab::vocabulary_json(&topics, curation),
        )
    }

    #[test]
    fn folders_that_lost_a_document_list_fall_back_to_every_record() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        for i in 0..30usize {
            put(
                ws,
                &format!(".dsh-chapters/s{}/chapters/{i:03}-d.md", i % 3),
                &format!(
                    "---\ntitle: \"Doc {i}\"\nkind: chapter\nprojectKey: \"pk\"\ntopics: [refresh]\ndate: \"2025-01-{:02}T00:00:00Z\"\n---\nbody\n",
                    1 + i % 28
                ),
            );
        }
        crate::store::Store::init(ws).expect("store");
        let table = Table::refresh(ws, true, Duration::from_secs(5))
            .expect("refresh")
            .0;
        let every: Vec<IndexDoc> = table
            .all_docs()
            .expect("all")
            .iter()
            .map(|d| Base::Store.index_doc(d).into_inner())
            .collect();
        assert_eq!(every.len(), 30);
        // The folder states that name one session's folder lost (a part removed by hand or
        // by a crash): that folder's documents are no longer listed folder by folder.
        let parts = ws.join(STORE_DIR).join(table::TABLE_DIR).join("folders");
        let mut lost = 0;
        for part in std::fs::read_dir(&parts).expect("parts").flatten() {
            let text = std::fs::read_to_string(part.path()).unwrap_or_default();
            if text.contains("s1/chapters") {
                std::fs::remove_file(part.path()).expect("remove part");
                lost += 1;
            }
        }
        assert_eq!(lost, 1, "one part names the folder");
        assert_eq!(
            table.all_sources().expect("sources").len(),
            2,
            "the folder is no longer listed"
        );
        let folded =
            fold_folders(&table, &Base::Store, Vec::new, |d, f| d.extend(f)).expect("fold");
        let folded: Vec<IndexDoc> = in_table_order(folded)
            .into_iter()
            .map(Redacted::into_inner)
            .collect();
        assert!(folded == every, "every document, read at once");
    }

    #[test]
    fn the_streamed_build_writes_what_the_build_from_every_record_wrote() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        // A year's pool in small: a topic on every document, paged (more than a page in a
        // month), dates on many days and some undated, the store's and the mirror's
        // documents, an alias folding one topic into another.
        let doc = |i: usize| {
            let date = match i % 23 {
                0 => String::new(),
                _ => format!(
                    "date: \"2025-{:02}-{:02}T{:02}:00:00Z\"\n",
                    1 + i % 2,
                    1 + i % 28,
                    i % 24
                ),
            };
            format!(
                "---\ntitle: \"Doc {i}\"\nkind: chapter\nprojectKey: \"pk\"\ntopics: [refresh, area-{}{}]\n{date}---\nbody\n",
                i % 7,
                if i.is_multiple_of(5) { ", auth" } else { ", authentication" }
            )
        };
        for i in 0..1_300usize {
            let rel = if i.is_multiple_of(4) {
                format!(".dsh-chapters/s{}/chapters/{i:04}-d.md", i % 9)
            } else {
                format!(".dsh-knowledge/chapters/pk/m{}/{i:04}-d.md", i % 31)
            };
            put(ws, &rel, &doc(i));
        }
        // A copy of one of the store's chapters in the mirror under its pool path, with
        // another title: one path and date twice, and the store's (first in the table) wins.
        put(
            ws,
            ".dsh-knowledge/chapters/pk/s0/0036-d.md",
            &doc(36).replace("Doc 36", "Doc 36 copy"),
        );
        let store = crate::store::Store::init(ws).expect("store");
        let fact = curation::Fact::new(
            curation::FactKind::TopicAlias {
                from: "auth".into(),
                to: "authentication".into(),
            },
            curation::Author::User,
            "2025-12-01T00:00:00Z",
        );
        let redactor = crate::redact::Redactor::new(&[]).expect("redactor");
        curation::file::append(&store, "m1", &curation::file::redacted(&fact, &redactor))
            .expect("append");
        let curation = read_curation(&ws.join(STORE_DIR), Some(&ws.join(MIRROR_DIR)))
            .expect("curation")
            .curation;
        let table = Table::refresh(ws, true, Duration::from_secs(5))
            .expect("refresh")
            .0;
        for base in [
            Base::Store,
            Base::Pool {
                project_key: "pk".into(),
            },
        ] {
            let (files, vocabulary) = built_from_every_record(&table, &base, &curation);
            assert!(
                files.values().any(|t| t.contains("| Doc 36 |"))
                    && !files.values().any(|t| t.contains("Doc 36 copy")),
                "the store's document wins"
            );
            let second_page = files
                .keys()
                .any(|f| f.starts_with("refresh/") && f.ends_with("-2.md"));
            assert_eq!(second_page, base != Base::Store, "a month of two pages");
            assert!(files["auth.md"].contains("merged into"));
            // Folder by folder: the same documents as every record at once.
            let folded = fold_folders(&table, &base, Vec::new, |d, f| d.extend(f)).expect("fold");
            let folded: Vec<IndexDoc> = in_table_order(folded)
                .into_iter()
                .map(Redacted::into_inner)
                .collect();
            let every: Vec<IndexDoc> = table
                .all_docs()
                .expect("all")
                .iter()
                .filter(|d| base.includes(d))
                .map(|d| base.index_doc(d).into_inner())
                .collect();
            assert!(folded == every, "the folders' documents are the table's");
            // A topic's records by date bucket: the table's answer for the topic, and its
            // files.
            for topic in ["refresh", "authentication", "area-3"] {
                let labels = table::labels_of(topic, &curation);
                let whole: Vec<Redacted<IndexDoc>> = table
                    .docs_with_labels(&labels)
                    .expect("labels")
                    .iter()
                    .filter(|d| base.includes(d))
                    .map(|d| base.index_doc(d))
                    .collect();
                let bucketed = topic_docs(&table, &base, &labels, 8).expect("buckets");
                let paths = |docs: &[Redacted<IndexDoc>]| {
                    let mut paths: Vec<String> = docs.iter().map(|d| d.path.clone()).collect();
                    paths.sort();
                    paths
                };
                assert!(
                    paths(&bucketed) == paths(&whole),
                    "{topic}: the same documents"
                );
                assert!(
                    shard::render_topic(topic, &bucketed.iter().collect::<Vec<_>>())
                        == shard::render_topic(topic, &whole.iter().collect::<Vec<_>>()),
                    "{topic}: the same files"
                );
            }
            // A full build handing every shard file to a sink.
            let mut handed = BTreeMap::new();
            let full = plan(
                &table,
                &base,
                &curation,
                BTreeMap::new(),
                &Previous {
                    manifest: None,
                    read_file: &nothing,
                    holds: &|_: &str| Ok(false),
                    pages: &|_: &str| Ok(Vec::new()),
                    since: Since::Table(None),
                },
                &BTreeSet::new(),
                false,
                &mut |file, text| {
                    handed.insert(file.to_owned(), text);
                    Ok(None)
                },
            )
            .expect("full");
            assert!(full.full);
            assert_eq!(handed, files);
            assert_eq!(full.handed, files.keys().cloned().collect());
            assert_eq!(full.writes.keys().collect::<Vec<_>>(), [MANIFEST_FILE]);
            assert_eq!(full.vocabulary.as_deref(), Some(&*vocabulary));
            // A new machine's first update: every file of the index someone else's, each
            // regenerated to be verified, through the sink.
            let mut index = full.writes.clone();
            index.extend(files.clone());
            let pages = |dir: &str| -> Result<Vec<String>, BuildError> {
                Ok(index
                    .keys()
                    .filter(|f| f.starts_with(&format!("{dir}/")))
                    .cloned()
                    .collect())
            };
            let mut suspects: BTreeSet<String> = index.keys().cloned().collect();
            suspects.insert(VOCABULARY_SUSPECT.to_owned());
            let mut regenerated = BTreeMap::new();
            let first = plan(
                &table,
                &base,
                &curation,
                full.manifest.curation.clone(),
                &Previous {
                    manifest: Some(full.writes[MANIFEST_FILE].clone()),
                    read_file: &held(&index),
                    holds: &|file: &str| Ok(index.contains_key(file)),
                    pages: &pages,
                    since: nothing_changed(&base, &table),
                },
                &suspects,
                false,
                &mut |file, text| {
                    regenerated.insert(file.to_owned(), text);
                    Ok(None)
                },
            )
            .expect("first update");
            assert!(!first.full);
            assert_eq!(regenerated, files);
            assert!(first.removes.is_empty(), "{:?}", first.removes);
            assert_eq!(first.vocabulary.as_deref(), Some(&*vocabulary));
            assert_eq!(
                first.shard_heads().keys().collect::<Vec<_>>(),
                files
                    .keys()
                    .filter(|f| shard::topic_of_file(f).is_some())
                    .collect::<Vec<_>>()
            );
        }
        // The store's index on disk, each file written as rendered: the same bytes.
        update_store(ws, &table, true).expect("store index");
        let (files, vocabulary) = built_from_every_record(&table, &Base::Store, &curation);
        let mut on_disk = snapshot(&ws.join(STORE_DIR).join(INDEX_DIR));
        on_disk.retain(|f, _| f != MANIFEST_FILE);
        assert_eq!(on_disk, files);
        assert_eq!(
            std::fs::read_to_string(ws.join(STORE_DIR).join(VOCABULARY_FILE)).expect("vocab"),
            *vocabulary
        );
    }

    fn held(
        writes: &BTreeMap<String, String>,
    ) -> impl Fn(&str) -> Result<Option<String>, BuildError> + '_ {
        move |file: &str| Ok(writes.get(file).cloned())
    }

    fn nothing(_: &str) -> Result<Option<String>, BuildError> {
        Ok(None)
    }

    /// No document changed since the last build of `base`.
    fn nothing_changed(base: &Base, table: &Table) -> Since {
        match base {
            Base::Store => Since::Table(Some(table.revision())),
            Base::Pool { .. } => Since::Tree {
                inputs: BTreeMap::new(),
                changes: Some(Vec::new()),
            },
        }
    }

    #[test]
    fn pool_paths_and_suspects() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("A", "auth", 1),
        );
        put(
            ws,
            ".dsh-knowledge/chapters/pk/s2/001-b.md",
            &chapter("B", "auth", 2),
        );
        let table = Table::refresh(ws, true, Duration::from_secs(5))
            .expect("refresh")
            .0;
        let base = Base::Pool {
            project_key: "pk".into(),
        };
        let c = Curation::default();
        let holds_nothing = |_: &str| Ok(false);
        let empty = Previous {
            manifest: None,
            read_file: &nothing,
            holds: &holds_nothing,
            pages: &|_: &str| Ok(Vec::new()),
            since: Since::Table(None),
        };
        let first = plan(
            &table,
            &base,
            &c,
            BTreeMap::new(),
            &empty,
            &BTreeSet::new(),
            false,
            &mut hold_all,
        )
        .expect("plan");
        let auth = &first.writes["auth.md"];
        assert!(
            auth.contains("(../chapters/pk/s1/001-a.md)")
                && auth.contains("(../chapters/pk/s2/001-b.md)"),
            "{auth}"
        );
        assert_eq!(first.documents, 2);
        let manifest = first.writes["manifest.json"].clone();
        let read = held(&first.writes);
        let holds = |file: &str| Ok(first.writes.contains_key(file));
        // Someone edited auth.md and added junk.md in the pool: both are suspects, verified
        // against the table although no document changed since the trees the build saw.
        let suspects: BTreeSet<String> = ["auth.md".to_string(), "junk.md".to_string()].into();
        let previous = Previous {
            manifest: Some(manifest.clone()),
            read_file: &read,
            holds: &holds,
            pages: &|_: &str| Ok(Vec::new()),
            since: nothing_changed(&base, &table),
        };
        let next = plan(
            &table,
            &base,
            &c,
            BTreeMap::new(),
            &previous,
            &suspects,
            false,
            &mut hold_all,
        )
        .expect("plan");
        assert!(!next.full);
        assert_eq!(next.writes["auth.md"], *auth);
        assert!(next.removes.contains("junk.md"));
        assert_eq!(next.writes["manifest.json"], manifest);
        // A manifest that records no trees this machine holds: a full build.
        let previous = Previous {
            manifest: Some(manifest.clone()),
            read_file: &read,
            holds: &holds,
            pages: &|_: &str| Ok(Vec::new()),
            since: Since::Tree {
                inputs: BTreeMap::new(),
                changes: None,
            },
        };
        let repaired = plan(
            &table,
            &base,
            &c,
            BTreeMap::new(),
            &previous,
            &BTreeSet::new(),
            false,
            &mut hold_all,
        )
        .expect("plan");
        assert!(repaired.full);
        assert_eq!(repaired.writes["auth.md"], *auth);
        // The store base leaves the mirror's documents out.
        let store = plan(
            &table,
            &Base::Store,
            &c,
            BTreeMap::new(),
            &empty,
            &BTreeSet::new(),
            false,
            &mut hold_all,
        )
        .expect("plan");
        assert!(store.writes["auth.md"].starts_with("# auth — 1 document,"));
        assert_eq!(store.documents, 1);
    }
}

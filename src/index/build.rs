//! The index build (shell): which shards a change touches, and writing them.
//!
//! The documents come from the search table (`index::table`), which has read every
//! document's frontmatter once; the manifest says what the last build processed — per input
//! folder a content hash of its `(name, blob id)` pairs, per curation file its blob id, the
//! effective aliases and every shard's count and blob id. An update regenerates only the
//! shards of topics that a changed folder's documents carry, that an alias change moved, or
//! that someone else changed (`suspects`) — each regenerated whole from the table, so a
//! hand edit in a touched shard is overwritten and the bytes always equal a full rebuild.
//!
//! Two bases: the store (`<store>/index/`, links `../<root>/chapters/X.md`) when the
//! workspace is not linked to a private pool, and the pool (`index/` in the pool, links
//! `../chapters/<pk>/<root>/X.md`), built by `sync` before it commits.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::shard::{self, InputState, Manifest, ShardState, INDEX_DIR, MANIFEST_FILE};
use super::table::{self, Table, TableDoc};
use super::vocab::{self, Candidate, VocabParams};
use super::IndexDoc;
use crate::curation::{self, file::CurationFileError, Curation};
use crate::pool::plan::blob_id;
use crate::redact::Redactor;
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

    fn index_doc(&self, doc: &TableDoc) -> IndexDoc {
        IndexDoc {
            path: self.path_of(doc),
            title: doc.meta.title.clone(),
            kind: doc.meta.kind.clone(),
            date: doc.meta.date.clone(),
            topics: doc.meta.topics.clone(),
        }
    }
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
    /// File name → bytes, the manifest included; unchanged files may be among them (the
    /// caller compares before writing).
    pub writes: BTreeMap<String, String>,
    pub removes: BTreeSet<String>,
    /// A full rebuild (no usable manifest, a vanished input, or asked for).
    pub full: bool,
    /// Topics whose shard was regenerated.
    pub touched: usize,
    pub manifest: Manifest,
    /// `topics/vocabulary.json` as of this build, when the vocabulary (the canonical topics
    /// or the aliases) may have changed; `None` = unchanged, nothing to write.
    pub vocabulary: Option<String>,
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

/// The input folders of the base and their states.
fn inputs(table: &Table, base: &Base) -> BTreeMap<String, (InputState, Vec<String>)> {
    let mut out: BTreeMap<String, (InputState, Vec<String>)> = BTreeMap::new();
    for (folder, state) in table.sources() {
        if state.files == 0 {
            continue;
        }
        let Some(dir) = base.input_dir(folder) else {
            continue;
        };
        let entry = out.entry(dir).or_insert_with(|| {
            (
                InputState {
                    files: 0,
                    hash: String::new(),
                },
                Vec::new(),
            )
        });
        entry.0.files += state.files;
        entry.1.push(folder.clone());
        // A folder split between the store and the mirror (rare): combine the hashes.
        entry.0.hash = if entry.1.len() == 1 {
            state.hash.clone()
        } else {
            shard::input_hash([(entry.0.hash.as_str(), state.hash.as_str())])
        };
    }
    out
}

/// Plan an update of the index at `base`. `old_manifest` is the manifest now in the index
/// directory; `suspects` are index files someone else changed since this machine last
/// looked (they are verified by regeneration); `full` asks for the repair path.
pub fn plan(
    table: &Table,
    base: &Base,
    curation: &Curation,
    curation_files: BTreeMap<String, String>,
    old_manifest: Option<&str>,
    suspects: &BTreeSet<String>,
    full: bool,
) -> Result<Update, BuildError> {
    let inputs = inputs(table, base);
    let aliases = shard::alias_map(curation);
    let old = old_manifest.and_then(Manifest::parse);
    let mut update = Update::default();
    let mut shards: BTreeMap<String, ShardState>;
    match old
        .as_ref()
        .filter(|o| !full && o.inputs.keys().all(|k| inputs.contains_key(k)))
    {
        None => {
            update.full = true;
            let docs: Vec<IndexDoc> = table
                .all_docs()?
                .iter()
                .filter(|d| base.includes(d))
                .map(|d| base.index_doc(d))
                .collect();
            let files = shard::build_all(&docs, curation);
            shards = BTreeMap::new();
            for (file, text) in files {
                shards.insert(file.clone(), shard_state(&text));
                update.writes.insert(file, text);
            }
            update.touched = shards.len();
            if let Some(old) = &old {
                update.removes.extend(
                    old.shards
                        .keys()
                        .filter(|f| !shards.contains_key(*f))
                        .cloned(),
                );
            }
        }
        Some(old) => {
            shards = old.shards.clone();
            let mut touched: BTreeSet<String> = BTreeSet::new();
            for (dir, (state, folders)) in &inputs {
                if old.inputs.get(dir) == Some(state) {
                    continue;
                }
                for folder in folders {
                    for doc in table.docs_in_folder(folder)? {
                        if base.includes(&doc) {
                            touched.extend(
                                curation
                                    .canonical_topics(doc.meta.topics.iter().map(String::as_str)),
                            );
                        }
                    }
                }
            }
            touched.extend(shard::alias_changes(&old.aliases, &aliases));
            for file in suspects {
                match shard::topic_of_file(file) {
                    Some(topic) => {
                        touched.insert(topic);
                    }
                    None if file == MANIFEST_FILE || file == VOCABULARY_SUSPECT => {}
                    None => {
                        update.removes.insert(file.clone());
                    }
                }
            }
            let stubs = shard::stubs(curation);
            update.touched = touched.len();
            for topic in touched {
                let file = shard::shard_file(&topic);
                let text = match stubs.get(&topic) {
                    Some(to) => shard::render_stub(&topic, to),
                    None => {
                        let docs: Vec<IndexDoc> = table
                            .docs_with_labels(&table::labels_of(&topic, curation))?
                            .iter()
                            .filter(|d| base.includes(d))
                            .map(|d| base.index_doc(d))
                            .collect();
                        if docs.is_empty() {
                            if shards.remove(&file).is_some() || suspects.contains(&file) {
                                update.removes.insert(file);
                            }
                            continue;
                        }
                        shard::render_shard(&topic, &docs.iter().collect::<Vec<_>>())
                    }
                };
                shards.insert(file.clone(), shard_state(&text));
                update.writes.insert(file, text);
            }
        }
    }
    update.manifest = Manifest {
        v: shard::MANIFEST_VERSION,
        documents: inputs.values().map(|(s, _)| s.files).sum(),
        inputs: inputs.into_iter().map(|(k, (s, _))| (k, s)).collect(),
        curation: curation_files,
        aliases,
        shards,
    };
    update
        .writes
        .insert(MANIFEST_FILE.to_owned(), update.manifest.render());
    let same_topics = old.as_ref().is_some_and(|o| {
        !update.full
            && o.aliases == update.manifest.aliases
            && o.shards.len() == update.manifest.shards.len()
            && update
                .writes
                .keys()
                .all(|f| f == MANIFEST_FILE || o.shards.contains_key(f))
    });
    if !same_topics || suspects.contains(VOCABULARY_SUSPECT) {
        update.vocabulary = Some(vocabulary_of(&update.manifest, curation));
    }
    Ok(update)
}

/// Passed among the suspects when someone else changed `topics/vocabulary.json`.
pub const VOCABULARY_SUSPECT: &str = "../topics/vocabulary.json";

/// `topics/vocabulary.json` for the topics a manifest lists.
pub fn vocabulary_of(manifest: &Manifest, curation: &Curation) -> String {
    let topics: BTreeSet<String> = manifest
        .shards
        .iter()
        .filter(|(_, s)| s.count > 0)
        .filter_map(|(file, _)| shard::topic_of_file(file))
        .collect();
    vocab::vocabulary_json(&topics, curation)
}

fn shard_state(text: &str) -> ShardState {
    ShardState {
        count: text.lines().filter(|l| l.starts_with("- ")).count() as u64,
        hash: blob_id(text.as_bytes()),
    }
}

/// What a store-index update did.
#[derive(Debug, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Written {
    pub full: bool,
    pub touched: usize,
    pub written: usize,
    pub removed: usize,
    pub documents: u64,
    pub shards: usize,
}

/// Apply an update to an index directory on disk: write what differs, remove what goes;
/// on a full rebuild, also remove any file the index does not name (a hand-added file).
/// The manifest is written last, so a crash leaves an older manifest and the next update
/// regenerates what it did not record.
pub fn apply(index_dir: &Path, update: &Update) -> Result<Written, BuildError> {
    std::fs::create_dir_all(index_dir).map_err(|source| BuildError::Io {
        path: index_dir.to_path_buf(),
        source,
    })?;
    let mut written = Written {
        full: update.full,
        touched: update.touched,
        documents: update.manifest.documents,
        shards: update.manifest.shards.len(),
        ..Written::default()
    };
    let mut removes = update.removes.clone();
    if update.full {
        if let Ok(entries) = std::fs::read_dir(index_dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if !name.starts_with('.') && !update.writes.contains_key(&name) {
                    removes.insert(name);
                }
            }
        }
    }
    for name in &removes {
        if std::fs::remove_file(index_dir.join(name)).is_ok() {
            written.removed += 1;
        }
    }
    let manifest = update.writes.get(MANIFEST_FILE);
    for (name, text) in update.writes.iter().filter(|(n, _)| *n != MANIFEST_FILE) {
        written.written += write_if_changed(&index_dir.join(name), text)? as usize;
    }
    if let Some(text) = manifest {
        written.written += write_if_changed(&index_dir.join(MANIFEST_FILE), text)? as usize;
    }
    Ok(written)
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
) -> Result<Vec<Candidate>, BuildError> {
    let raw = table.label_docs(project_key, include_mirror)?;
    let sets = vocab::canonical_sets(&raw, curation);
    Ok(vocab::candidates(&sets, curation, params))
}

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
) -> Result<Vec<Candidate>, BuildError> {
    let inputs = read_curation(store.dir(), mirror_dir)?;
    let candidates = vocabulary_candidates(
        table,
        project_key,
        include_mirror,
        &inputs.curation,
        apply.params,
    )?;
    for c in &candidates {
        curation::file::append(store, apply.harness, &c.fact(apply.now), apply.redactor)?;
    }
    Ok(candidates)
}

/// Bring the store's own index (`<store>/index/`) up to date with the table, or rebuild it.
pub fn update_store(workspace: &Path, table: &Table, full: bool) -> Result<Written, BuildError> {
    let store_dir = workspace.join(STORE_DIR);
    let index_dir = store_dir.join(INDEX_DIR);
    let inputs = read_curation(&store_dir, None)?;
    let marker = index_dir.join(BUILT_MARKER);
    if !full && store_index_is_current(&index_dir, table, &inputs.files) {
        return Ok(Written::default());
    }
    let old = std::fs::read_to_string(index_dir.join(MANIFEST_FILE)).ok();
    let update = plan(
        table,
        &Base::Store,
        &inputs.curation,
        inputs.files,
        old.as_deref(),
        &BTreeSet::new(),
        full,
    )?;
    let written = apply(&index_dir, &update)?;
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
        &built_key(&index_dir, table, &update.manifest.curation),
    )?;
    Ok(written)
}

/// What a store-index build is a function of, locally: the table's generation, the
/// curation files, and the manifest as written (a hand edit changes its stamp).
fn built_key(index_dir: &Path, table: &Table, curation_files: &BTreeMap<String, String>) -> String {
    let manifest_stamp = std::fs::metadata(index_dir.join(MANIFEST_FILE))
        .ok()
        .map(|m| (m.len(), m.modified().ok()));
    format!(
        "{}\n{}\n{manifest_stamp:?}\n",
        table.generation(),
        serde_json::to_string(curation_files).expect("a map of strings")
    )
}

fn store_index_is_current(
    index_dir: &Path,
    table: &Table,
    curation_files: &BTreeMap<String, String>,
) -> bool {
    std::fs::read_to_string(index_dir.join(BUILT_MARKER)).ok()
        == Some(built_key(index_dir, table, curation_files))
}

/// Whether the store's index already reflects the table and the curation files: read-only,
/// so a search can skip the writer lock when nothing changed.
pub fn store_index_current(workspace: &Path, table: &Table) -> bool {
    let store_dir = workspace.join(STORE_DIR);
    read_curation(&store_dir, None)
        .map(|inputs| store_index_is_current(&store_dir.join(INDEX_DIR), table, &inputs.files))
        .unwrap_or(false)
}

/// `<store>/index/.built`: the inputs of the last store-index update (a dot file: never
/// part of the index, ignored by a rebuild's clean-up).
const BUILT_MARKER: &str = ".built";

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn put(ws: &Path, rel: &str, text: &str) {
        let p = ws.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }

    fn chapter(title: &str, topics: &str, day: u32) -> String {
        format!("---\ntitle: \"{title}\"\nkind: chapter\nprojectKey: \"pk\"\ntopics: [{topics}]\ndate: \"2025-11-{day:02}T00:00:00Z\"\n---\nbody\n")
    }

    fn snapshot(dir: &Path) -> BTreeMap<String, String> {
        std::fs::read_dir(dir)
            .expect("index dir")
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(e.path()).expect("read"),
                )
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
        // s2 changed (csv, jwt, auth) and s3 is new (jwt): csv is regenerated (same bytes).
        assert_eq!(next.touched, 3);
        let incremental = snapshot(&index);
        let rebuilt = update_store(ws, &refresh(ws), true).expect("rebuild");
        assert!(rebuilt.full);
        assert_eq!(snapshot(&index), incremental);
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
        curation::file::append(&store, "m1", &fact, &redactor).expect("append");
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
        let first = plan(
            &table,
            &base,
            &c,
            BTreeMap::new(),
            None,
            &BTreeSet::new(),
            false,
        )
        .expect("plan");
        let auth = &first.writes["auth.md"];
        assert!(
            auth.contains("(../chapters/pk/s1/001-a.md)")
                && auth.contains("(../chapters/pk/s2/001-b.md)"),
            "{auth}"
        );
        assert_eq!(first.manifest.inputs.len(), 2);
        let manifest = first.manifest.render();
        // Someone edited auth.md and added junk.md in the pool: both are suspects.
        let suspects: BTreeSet<String> = ["auth.md".to_string(), "junk.md".to_string()].into();
        let next = plan(
            &table,
            &base,
            &c,
            BTreeMap::new(),
            Some(&manifest),
            &suspects,
            false,
        )
        .expect("plan");
        assert!(!next.full);
        assert_eq!(next.writes["auth.md"], *auth);
        assert!(next.removes.contains("junk.md"));
        assert_eq!(next.writes["manifest.json"], manifest);
        // The store base leaves the mirror's documents out.
        let store = plan(
            &table,
            &Base::Store,
            &c,
            BTreeMap::new(),
            None,
            &BTreeSet::new(),
            false,
        )
        .expect("plan");
        assert!(store.writes["auth.md"].starts_with("# auth — 1 document,"));
    }
}

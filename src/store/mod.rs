//! The workspace store `<workspace>/.dsh-chapters/`: layout, atomic writes, ledgers and the
//! writer lock. Append-only: never renumbered, never rewritten. Only `Redacted` values are
//! accepted for anything derived from conversation. OWNER: store helper.
//!
//! Layout: `<store>/<rootSessionId>/chapters/{NNN-slug.md, plan-NNN-slug.md}`,
//! `<store>/<rootSessionId>/artifacts/<sha[0:2]>/<sha>.txt`,
//! `<store>/<rootSessionId>/collections/<sessionId>.jsonl`, plus `<store>/project.yml`
//! and the writer lock files. Every id that becomes a path component
//! is checked first ([`is_safe_component`]), so no id can reach outside the store.

pub mod atomic;
pub mod catalog;
pub mod forget;
pub mod group;
pub mod ledger;
pub mod lock;
pub mod mirror;
pub mod read;
pub mod signed;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::identity::{Identity, KeySource};
use crate::redact::Redacted;
use crate::render::{Artifact, Document};

pub const STORE_DIR: &str = ".dsh-chapters";
pub const MIRROR_DIR: &str = ".dsh-knowledge";
/// `<store>/rules/`: both tiers of rules, one directory; the file name's prefix says the
/// tier (`rules::store` writes and reads them).
pub const RULES_DIR: &str = "rules";

/// Format version of collection lines (their `v`); lines newer than this are refused.
pub const COLLECTION_VERSION: u64 = 1;

const CHAPTERS: &str = "chapters";
pub(crate) const ARTIFACTS: &str = "artifacts";
pub(crate) const COLLECTIONS: &str = "collections";
const PROJECT_YML: &str = "project.yml";
const PLAN_PREFIX: &str = "plan-";
/// Deepest directory holding our files below the store: `<root>/artifacts/<ab>/`.
const STORE_DEPTH: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("workspace {workspace} is not enabled: run `chapters init` there first")]
    NotEnabled { workspace: PathBuf },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("refusing to overwrite {path}: the store is append-only and the file already holds different bytes")]
    WouldOverwrite { path: PathBuf },
    #[error("id {id:?} is not a safe file or directory name (empty, over 128 bytes, or it holds `/`, `\\`, `..`, a control character or a leading `.`); refusing it")]
    UnsafeId { id: String },
    #[error("the pool names a file {path:?} whose path has an empty, `.` or `..` part, so it would land outside the mirror; not copying it (the pool was written by hand or by a faulty tool: remove that file from the pool)")]
    UnsafeMirrorPath { path: String },
    #[error("{name:?} is not a document name the store keeps (`NNN-<slug>.md` or `plan-NNN-<slug>.md`); refusing it")]
    BadDocumentName { name: String },
    #[error("artifact {sha}: its content hashes to {actual}; refusing to store it under a name that does not match")]
    ArtifactHash { sha: String, actual: String },
    #[error("{path} is damaged: {detail}. Restore it from git or a backup, or move it aside to let the store continue")]
    Damaged { path: PathBuf, detail: String },
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error(transparent)]
    Lock(#[from] lock::LockError),
}

/// A chapter or plan already in the store, read from its frontmatter.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedDoc {
    pub file_name: String,
    /// From the file name: `NNN` of `NNN-…` (chapters) or of `plan-NNN-…` (plans).
    pub number: u32,
    pub kind: String,
    pub title: String,
    pub session_id: String,
    pub seq_lo: u64,
    pub seq_hi: u64,
    /// For a plan: the chapter file that references it.
    pub chapter: Option<String>,
    /// A chapter's topics as its frontmatter says (for `continues`).
    pub topics: Vec<String>,
    /// A chapter's turn numbers as its frontmatter says (empty for a plan, or a chapter
    /// written without them): they outlive a log's renumbering.
    pub turns: Vec<u64>,
}

/// Counts for `chapters status`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoreCounts {
    pub root_sessions: u64,
    pub chapters: u64,
    pub plans: u64,
    pub artifacts: u64,
    pub collection_lines: u64,
}

/// `<store>/project.yml`: the identity this workspace resolved, for people and the pool.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProjectYml {
    pub project_key: String,
    pub project_key_source: KeySource,
    pub origin: String,
    pub slug: String,
    pub created_by: String,
    pub created_at: String,
}

/// Which numbering series a document name belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Series {
    Chapter,
    Plan,
}

/// `NNN-<slug>.md` → (Chapter, NNN); `plan-NNN-<slug>.md` → (Plan, NNN).
pub(crate) fn parse_doc_name(name: &str) -> Option<(Series, u32)> {
    let stem = name.strip_suffix(".md")?;
    let (series, rest) = match stem.strip_prefix(PLAN_PREFIX) {
        Some(rest) => (Series::Plan, rest),
        None => (Series::Chapter, stem),
    };
    let digits_end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if digits_end == 0 || !rest[digits_end..].starts_with('-') {
        return None;
    }
    rest[..digits_end].parse().ok().map(|n| (series, n))
}

/// The project key a mirror folder (workspace-relative) names:
/// `.dsh-knowledge/chapters/<pk>/<root>` or `.dsh-knowledge/rules/<pk>[/<harness>]`.
pub fn mirror_folder_project_key(folder: &str) -> Option<&str> {
    let rest = folder.strip_prefix(MIRROR_DIR)?.strip_prefix('/')?;
    let mut parts = rest.split('/');
    match parts.next()? {
        "chapters" | RULES_DIR => parts.next().filter(|pk| !pk.is_empty()),
        _ => None,
    }
}

/// Ids as one path component: the rule lives in the leaf `names` (identity checks harness ids
/// with it too, and store depends on identity, not the other way round).
pub use crate::names::is_safe_component;
use crate::names::sha256_hex;

fn check_id(id: &str) -> Result<&str, StoreError> {
    if is_safe_component(id) {
        Ok(id)
    } else {
        Err(StoreError::UnsafeId { id: id.to_string() })
    }
}

fn io_err(path: &Path, source: io::Error) -> StoreError {
    StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn create_dir_all(dir: &Path) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(|e| io_err(dir, e))
}

/// Directories a writer already made (a group writes thousands of files into a few).
type MadeDirs = std::collections::BTreeSet<PathBuf>;

fn ensure_dir(dir: &Path, made: Option<&mut MadeDirs>) -> Result<(), StoreError> {
    match made {
        Some(made) if made.contains(dir) => Ok(()),
        Some(made) => {
            create_dir_all(dir)?;
            made.insert(dir.to_path_buf());
            Ok(())
        }
        None => create_dir_all(dir),
    }
}

/// Names in `dir`, sorted; an absent directory has none.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<(String, fs::FileType)>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err(dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let file_type = entry.file_type().map_err(|e| io_err(&entry.path(), e))?;
        out.push((entry.file_name().to_string_lossy().into_owned(), file_type));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The lines the project's `.gitignore` must hold, and whether `line` already says it
/// (`/x`, `x`, `x/` and `/x/` all ignore the folder at the top level).
const IGNORE_HINTS: [&str; 2] = [STORE_DIR, MIRROR_DIR];

fn ignores(line: &str, dir: &str) -> bool {
    let t = line.trim();
    let t = t.strip_prefix('/').unwrap_or(t);
    let t = t.strip_suffix('/').unwrap_or(t);
    t == dir
}

/// The `.gitignore` content with the missing hint lines appended, or `None` when both are there.
fn with_ignore_hints(existing: &str) -> Option<String> {
    let missing: Vec<&str> = IGNORE_HINTS
        .iter()
        .copied()
        .filter(|dir| !existing.lines().any(|line| ignores(line, dir)))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let mut out = existing.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for dir in missing {
        out.push_str(dir);
        out.push_str("/\n");
    }
    Some(out)
}

/// A chapter's re-annotation, staged by [`Store::stage_reannotation`] and published by
/// [`Store::reannotate_chapter`].
#[derive(Debug)]
pub struct Reannotation {
    expected: Vec<u8>,
    staged: atomic::Staged,
    /// `<root>/chapters` and the file name, for the store's catalog.
    folder: String,
    name: String,
    /// The staged bytes' metadata, for the catalog's row.
    meta: Redacted<catalog::RowMeta>,
}

pub struct Store {
    dir: PathBuf,
    /// The catalog's connection, opened at the first record and kept (`store::catalog`).
    catalog: std::sync::Mutex<catalog::Writer>,
}

impl Store {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn at(dir: PathBuf) -> Store {
        Store {
            dir,
            catalog: Default::default(),
        }
    }

    /// Enable a workspace: create the store and add both folders to its `.gitignore`
    /// (existing lines are kept as they are). Idempotent.
    pub fn init(workspace: &Path) -> Result<Store, StoreError> {
        // The workspace must exist: creating it here would enable a mistyped path.
        if !workspace.is_dir() {
            return Err(io_err(
                workspace,
                io::Error::new(io::ErrorKind::NotFound, "no such workspace directory"),
            ));
        }
        let dir = workspace.join(STORE_DIR);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(e) => return Err(io_err(&dir, e)),
        }
        let gitignore = workspace.join(".gitignore");
        let existing = match fs::read_to_string(&gitignore) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io_err(&gitignore, e)),
        };
        if let Some(updated) = with_ignore_hints(&existing) {
            atomic::write_atomic(&gitignore, updated.as_bytes())?;
        }
        Ok(Store::at(dir))
    }

    /// Open an enabled workspace's store.
    pub fn open(workspace: &Path) -> Result<Store, StoreError> {
        let dir = workspace.join(STORE_DIR);
        match fs::metadata(&dir) {
            Ok(meta) if meta.is_dir() => Ok(Store::at(dir)),
            Ok(_) => Err(io_err(
                &dir,
                io::Error::other(
                    "exists but is not a directory; move it aside and run `chapters init`",
                ),
            )),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(StoreError::NotEnabled {
                workspace: workspace.to_path_buf(),
            }),
            Err(e) => Err(io_err(&dir, e)),
        }
    }

    /// Take the writer lock; when the previous holder died mid-run, clear the temp files it
    /// may have left (safe now: no other writer can be mid-write). A clean history costs
    /// no walk of the store.
    pub fn lock(&self, timeout: Duration) -> Result<lock::WriterLock, StoreError> {
        let held = lock::WriterLock::acquire(&self.dir, timeout)?;
        if !held.previous_holder_died() {
            return Ok(held);
        }
        // It may have written a document and died before recording it in the catalog: a
        // catalog started over makes the search table's next refresh list every folder.
        if let Err(e) = catalog::start_over(&self.dir) {
            tracing::warn!(error = %e, "could not start the store's catalog over after a writer died; the next periodic rescan lists every folder");
        }
        let removed = atomic::clean_temp_files(&self.dir, STORE_DEPTH)?;
        if removed > 0 {
            tracing::info!(removed, store = %self.dir.display(), "removed temp files of interrupted writes");
        }
        Ok(held)
    }

    /// Take the collections lock (see [`lock::CollectionsLock`]): around reading a
    /// ledger's last signature and appending after it.
    pub fn lock_collections(&self) -> Result<lock::CollectionsLock, StoreError> {
        Ok(lock::CollectionsLock::acquire(&self.dir)?)
    }

    /// `<store>/<root>`.
    pub fn root_dir(&self, root_session: &str) -> Result<PathBuf, StoreError> {
        Ok(self.dir.join(check_id(root_session)?))
    }

    /// `<store>/<root>/chapters`.
    pub fn chapters_dir(&self, root_session: &str) -> Result<PathBuf, StoreError> {
        Ok(self.root_dir(root_session)?.join(CHAPTERS))
    }

    /// `<store>/<root>/artifacts/<sha[0:2]>/<sha>.txt`; `sha` must be 64 lowercase hex digits.
    pub fn artifact_path(&self, root_session: &str, sha: &str) -> Result<PathBuf, StoreError> {
        if sha.len() != 64
            || !sha
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(StoreError::UnsafeId {
                id: sha.to_string(),
            });
        }
        Ok(self
            .root_dir(root_session)?
            .join(ARTIFACTS)
            .join(&sha[..2])
            .join(format!("{sha}.txt")))
    }

    /// `<store>/<root>/collections/<session>.jsonl`.
    pub fn collection_path(
        &self,
        root_session: &str,
        session_id: &str,
    ) -> Result<PathBuf, StoreError> {
        let session = check_id(session_id)?;
        Ok(self
            .root_dir(root_session)?
            .join(COLLECTIONS)
            .join(format!("{session}.jsonl")))
    }

    /// Write a chapter or plan once: `Ok(false)` when the same bytes are already there.
    pub fn write_document(&self, root_session: &str, doc: &Document) -> Result<bool, StoreError> {
        self.write_document_in(root_session, doc, atomic::Durability::Now, None)
    }

    fn write_document_in(
        &self,
        root_session: &str,
        doc: &Document,
        durability: atomic::Durability,
        made: Option<&mut MadeDirs>,
    ) -> Result<bool, StoreError> {
        let name = check_id(&doc.file_name)?;
        if parse_doc_name(name).is_none() {
            return Err(StoreError::BadDocumentName {
                name: name.to_string(),
            });
        }
        let dir = self.chapters_dir(root_session)?;
        ensure_dir(&dir, made)?;
        let wrote = atomic::write_new_with(&dir.join(name), doc.text.as_bytes(), durability)?;
        // Also when the bytes were already there: a re-run after a crash between the write
        // and its record records the document then. A group records its documents at its
        // commit, in one record.
        if durability == atomic::Durability::Now {
            let folder = format!("{STORE_DIR}/{}/{CHAPTERS}", check_id(root_session)?);
            let meta = doc.text.derive(catalog::RowMeta::read);
            self.record_documents(&[(&folder, name, Some(&meta))]);
        }
        Ok(wrote)
    }

    /// The one way into the catalog: `changes` are workspace-relative folders and their
    /// files, recorded after they were written or removed and their directories synced.
    fn record(&self, changes: &[(&str, &[&str])], presence: catalog::Presence) {
        self.catalog_writer().record(&self.dir, changes, presence);
    }

    /// The catalog's kept connection; a writer that panicked while holding it left nothing
    /// half-done in it (a record is one transaction), so a poisoned lock is taken as it is.
    fn catalog_writer(&self) -> std::sync::MutexGuard<'_, catalog::Writer> {
        self.catalog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// [`Store::record`] of written documents (workspace-relative folder, name) with their
    /// metadata when known.
    fn record_documents(&self, docs: &[(&str, &str, Option<&Redacted<catalog::RowMeta>>)]) {
        self.catalog_writer()
            .record_documents(&self.dir, docs, catalog::Presence::Written);
    }

    /// Start opening the catalog on a thread of its own for a record to come (a group's
    /// commit), unless a connection is kept already.
    fn open_catalog_ahead(&self) -> Option<catalog::OpenedAhead> {
        if self.catalog_writer().is_open() {
            return None;
        }
        catalog::OpenedAhead::start(&self.dir)
    }

    /// Keep the connection [`Store::open_catalog_ahead`] opened for the next record.
    fn adopt_catalog(&self, ahead: catalog::OpenedAhead) {
        self.catalog_writer().adopt(&self.dir, ahead);
    }

    /// [`Store::record_documents`] of a group's documents: their names and metadata in order.
    fn record_listed(
        &self,
        folder: &str,
        names: &crate::names::NameList,
        metas: &Redacted<catalog::MetaList>,
    ) {
        self.catalog_writer()
            .record_listed(&self.dir, folder, names, metas);
    }

    /// A document's metadata read from its file (`folder` workspace-relative) through the
    /// store's reader; `Ok(None)` when the file is gone (or left in the mirror's pack).
    pub fn document_meta(
        &self,
        folder: &str,
        name: &str,
    ) -> Result<Option<Redacted<catalog::RowMeta>>, StoreError> {
        let workspace = self.dir.parent().unwrap_or(&self.dir);
        let path = workspace.join(folder).join(name);
        match read::Reader::of_store(&self.dir).bytes(&path) {
            Ok(bytes) => Ok(Some(bytes.derive(catalog::RowMeta::of_bytes))),
            Err(read::ReadError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(read::ReadError::Io { path, source }) => Err(io_err(&path, source)),
            Err(e @ read::ReadError::Outside { .. }) => Err(io_err(&path, io::Error::other(e))),
        }
    }

    /// Fill the catalog's metadata when its generation's is not whole (a catalog made
    /// anew, started over): every session folder's documents and the rules read, outside
    /// any transaction, then written in one (`catalog::fill`). Never fails its reader (it
    /// reads the folders itself when the catalog cannot say). Returns the files read.
    pub fn fill_catalog(&self) -> u64 {
        let mut read = 0;
        let filled = catalog::fill(&self.dir, || self.find_documents(&mut read));
        if let Err(e) = filled {
            tracing::debug!(error = %e, "could not fill the store's catalog; its readers read the files");
        }
        read
    }

    /// Every document of the session folders and the rules folder, and of the mirror (see
    /// [`Store::find_mirror_documents`]), read; `None` when one could not be read (a fill must
    /// be whole).
    fn find_documents(&self, read: &mut u64) -> Option<Vec<catalog::Found>> {
        let mut folders: Vec<String> = self
            .roots()
            .ok()?
            .into_iter()
            .map(|root| format!("{root}/{CHAPTERS}"))
            .collect();
        folders.push(RULES_DIR.to_owned());
        let mut found = Vec::new();
        for in_store in folders {
            let folder = format!("{STORE_DIR}/{in_store}");
            let dir = self.dir.join(&in_store);
            let names = match list_dir(&dir) {
                Ok(names) => names,
                Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                    continue
                }
                Err(_) => return None,
            };
            for (name, file_type) in names {
                if !file_type.is_file() || name.starts_with('.') || !name.ends_with(".md") {
                    continue;
                }
                *read += 1;
                let Some(meta) = self.document_meta(&folder, &name).ok()? else {
                    continue;
                };
                let seen = fs::metadata(dir.join(&name))
                    .ok()
                    .map(|m| catalog::seen(&m));
                found.push(catalog::Found {
                    folder: folder.clone(),
                    name,
                    seen,
                    meta: Some(meta),
                });
            }
        }
        self.find_mirror_documents(&mut found, read)?;
        Some(found)
    }

    /// The mirror's documents as the search table lists them: each chapter folder of the
    /// packed mirror's tree from the tree (its files read where they are written out, left
    /// in the pack unread otherwise: their rows' metadata stays unknown), any other chapter
    /// folder and the rules folders from disk; never this machine's own chapters (the store's
    /// copy is the one counted).
    fn find_mirror_documents(&self, found: &mut Vec<catalog::Found>, read: &mut u64) -> Option<()> {
        let workspace = self.dir.parent()?;
        let mirror = workspace.join(MIRROR_DIR);
        if !mirror.is_dir() {
            return Some(());
        }
        let dirs = |dir: &Path| -> Option<Vec<String>> {
            match list_dir(dir) {
                Ok(names) => Some(
                    names
                        .into_iter()
                        .filter(|(name, kind)| kind.is_dir() && is_safe_component(name))
                        .map(|(name, _)| name)
                        .collect(),
                ),
                Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                    Some(Vec::new())
                }
                Err(_) => None,
            }
        };
        let packed = mirror::Packed::open(workspace);
        let mut chapter_folders: std::collections::BTreeSet<(String, String)> =
            std::collections::BTreeSet::new();
        if let Some(packed) = &packed {
            chapter_folders.extend(packed.chapter_folders().ok()?);
        }
        for pk in dirs(&mirror.join(CHAPTERS))? {
            for root in dirs(&mirror.join(CHAPTERS).join(&pk))? {
                chapter_folders.insert((pk.clone(), root));
            }
        }
        let mut folders: Vec<(String, Option<String>)> = Vec::new();
        for (pk, root) in chapter_folders {
            if is_safe_component(&pk) && is_safe_component(&root) {
                folders.push((format!("{CHAPTERS}/{pk}/{root}"), Some(root)));
            }
        }
        for pk in dirs(&mirror.join(RULES_DIR))? {
            for harness in dirs(&mirror.join(RULES_DIR).join(&pk))? {
                folders.push((format!("{RULES_DIR}/{pk}/{harness}"), None));
            }
            folders.push((format!("{RULES_DIR}/{pk}"), None));
        }
        for (rel, root) in folders {
            let folder = format!("{MIRROR_DIR}/{rel}");
            let dir = mirror.join(&rel);
            let in_pack = match (&packed, &root) {
                (Some(packed), Some(_)) => packed.folder(&rel).ok()?,
                _ => None,
            };
            let names: Vec<(String, bool)> = match in_pack {
                Some((_, files)) => files
                    .into_iter()
                    .map(|(name, _)| {
                        let on_disk = dir.join(&name).is_file();
                        (name, on_disk)
                    })
                    .collect(),
                None => match list_dir(&dir) {
                    Ok(names) => names
                        .into_iter()
                        .filter(|(_, kind)| kind.is_file())
                        .map(|(name, _)| (name, true))
                        .collect(),
                    Err(_) => return None,
                },
            };
            let own = root.map(|root| self.dir.join(root).join(CHAPTERS));
            for (name, on_disk) in names {
                if name.starts_with('.') || !name.ends_with(".md") {
                    continue;
                }
                if own.as_ref().is_some_and(|own| own.join(&name).is_file()) {
                    continue;
                }
                let (meta, seen) = if on_disk {
                    *read += 1;
                    let Some(meta) = self.document_meta(&folder, &name).ok()? else {
                        continue;
                    };
                    let seen = fs::metadata(dir.join(&name))
                        .ok()
                        .map(|m| catalog::seen(&m));
                    (Some(meta), seen)
                } else {
                    (None, None)
                };
                found.push(catalog::Found {
                    folder: folder.clone(),
                    name,
                    seen,
                    meta,
                });
            }
        }
        Some(())
    }

    /// Write a rule file (`<store>/rules/<file_name>`) once and record it: `Ok(false)` when
    /// the same bytes are already there. The caller holds the writer lock.
    pub fn write_rule(&self, file_name: &str, text: &Redacted<String>) -> Result<bool, StoreError> {
        let name = check_id(file_name)?;
        let dir = self.dir.join(RULES_DIR);
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let wrote = atomic::write_new(&dir.join(name), text.as_bytes())?;
        // Recorded also when it was already there: a capture re-run after a crash between
        // the write and its record records it then.
        let meta = text.derive(catalog::RowMeta::read);
        self.record_documents(&[(&format!("{STORE_DIR}/{RULES_DIR}"), name, Some(&meta))]);
        Ok(wrote)
    }

    /// The one sanctioned rewrite of a stored chapter (record §6.2), step one of two, taking
    /// no lock: check that `annotated` differs from `expected` (the bytes the annotation was
    /// computed from) in model-owned frontmatter only, and stage it — written and synced,
    /// not yet visible ([`atomic::Staged`]). The disk work happens here, so the writer lock
    /// is held only around [`Store::reannotate_chapter`]'s compare and rename.
    pub fn stage_reannotation(
        &self,
        root_session: &str,
        file_name: &str,
        expected: &str,
        annotated: &Redacted<String>,
    ) -> Result<Reannotation, StoreError> {
        let name = check_id(file_name)?;
        let path = self.chapters_dir(root_session)?.join(name);
        if !crate::render::annotate::is_reannotation(expected, annotated.as_str()) {
            return Err(StoreError::WouldOverwrite { path });
        }
        Ok(Reannotation {
            expected: expected.as_bytes().to_vec(),
            staged: atomic::stage(&path, annotated.as_bytes())?,
            folder: format!("{}/{CHAPTERS}", check_id(root_session)?),
            name: name.to_owned(),
            meta: annotated.derive(catalog::RowMeta::read),
        })
    }

    /// Step two, the caller holding the writer lock: replace the chapter with the staged
    /// bytes only if it still holds exactly what they were computed from. `Ok(false)`: the
    /// file changed meanwhile, nothing written. The rename is durable once `dirs` is synced,
    /// which the caller does once per batch, before recording the batch as done; a crash
    /// before that leaves the old complete chapter.
    pub fn reannotate_chapter(
        &self,
        staged: Reannotation,
        dirs: &mut atomic::DirSync,
    ) -> Result<bool, StoreError> {
        let path = staged.staged.path().to_path_buf();
        let current = fs::read(&path).map_err(|e| io_err(&path, e))?;
        if current != staged.expected {
            return Ok(false);
        }
        staged.staged.publish()?;
        dirs.changed(&path);
        let folder = format!("{STORE_DIR}/{}", staged.folder);
        self.record_documents(&[(&folder, &staged.name, Some(&staged.meta))]);
        Ok(true)
    }

    /// A chapter a reader found gone (removed by hand: no record says so), recorded as
    /// removed if it still is. The caller holds the writer lock: no writer writes it again
    /// between the look and the record.
    pub fn record_gone(&self, root_session: &str, file_name: &str) -> Result<(), StoreError> {
        let name = check_id(file_name)?;
        if self.chapters_dir(root_session)?.join(name).exists() {
            return Ok(());
        }
        let folder = format!("{STORE_DIR}/{}/{CHAPTERS}", check_id(root_session)?);
        self.record(&[(&folder, &[name])], catalog::Presence::Removed);
        Ok(())
    }

    /// Write a content-addressed artifact once: `Ok(false)` when it is already there.
    pub fn write_artifact(
        &self,
        root_session: &str,
        artifact: &Artifact,
    ) -> Result<bool, StoreError> {
        self.write_artifact_in(root_session, artifact, atomic::Durability::Now, None)
    }

    /// [`Store::write_artifact`], durable now or at a group commit. An existing file whose
    /// bytes do not hash to its name is damage (a power loss before a group commit can
    /// leave one empty or torn): it is replaced with the right bytes, since a
    /// content-addressed name admits only one content.
    fn write_artifact_in(
        &self,
        root_session: &str,
        artifact: &Artifact,
        durability: atomic::Durability,
        made: Option<&mut MadeDirs>,
    ) -> Result<bool, StoreError> {
        let path = self.artifact_path(root_session, &artifact.sha256)?;
        let actual = sha256_hex(artifact.content.as_bytes());
        if actual != artifact.sha256 {
            return Err(StoreError::ArtifactHash {
                sha: artifact.sha256.clone(),
                actual,
            });
        }
        if let Some(dir) = path.parent() {
            ensure_dir(dir, made)?;
        }
        match atomic::write_new_with(&path, artifact.content.as_bytes(), durability) {
            Err(StoreError::WouldOverwrite { .. }) => {
                let existing = fs::read(&path).map_err(|e| io_err(&path, e))?;
                if sha256_hex(&existing) == artifact.sha256 {
                    // Unreachable in practice (equal hashes, different bytes).
                    return Err(StoreError::WouldOverwrite { path });
                }
                tracing::warn!(path = %path.display(), "artifact damaged (its bytes do not match its hash); replacing it");
                atomic::write_atomic(&path, artifact.content.as_bytes())?;
                Ok(true)
            }
            other => other,
        }
    }

    pub fn append_collection(
        &self,
        root_session: &str,
        session_id: &str,
        line: &Redacted<serde_json::Value>,
    ) -> Result<(), StoreError> {
        self.append_collection_many(root_session, session_id, std::slice::from_ref(line))
    }

    /// Several collection lines in one write and one fsync, under the collections lock
    /// (taken here: the caller must not hold it).
    pub fn append_collection_many(
        &self,
        root_session: &str,
        session_id: &str,
        lines: &[Redacted<serde_json::Value>],
    ) -> Result<(), StoreError> {
        let held = self.lock_collections()?;
        self.append_collection_after(root_session, session_id, lines, None, &held)?;
        Ok(())
    }

    /// [`Store::append_collection_many`] for a signer holding the collections lock (`held`)
    /// that knows the ledger was whole at `whole_len` bytes (see
    /// [`ledger::append_many_after`]). Returns the ledger's new length. The root is named in
    /// the signed-roots hint first (`signed::note`), so a sync lists its ledgers.
    pub fn append_collection_after<I>(
        &self,
        root_session: &str,
        session_id: &str,
        lines: I,
        whole_len: Option<u64>,
        held: &lock::CollectionsLock,
    ) -> Result<u64, StoreError>
    where
        I: IntoIterator,
        I::Item: std::borrow::Borrow<Redacted<serde_json::Value>>,
    {
        let path = self.collection_path(root_session, session_id)?;
        if let Some(dir) = path.parent() {
            create_dir_all(dir)?;
        }
        signed::note(&self.dir, check_id(root_session)?, held);
        Ok(ledger::append_many_after(
            &path,
            lines,
            COLLECTION_VERSION,
            whole_len,
        )?)
    }

    pub fn read_collection(
        &self,
        root_session: &str,
        session_id: &str,
    ) -> Result<ledger::LedgerRead, StoreError> {
        let path = self.collection_path(root_session, session_id)?;
        Ok(ledger::read(&path, COLLECTION_VERSION)?)
    }

    /// Every chapter and plan of a root session, read from its frontmatter, sorted by
    /// (kind, number). A document that does not parse is damage, reported by name.
    pub fn archived(&self, root_session: &str) -> Result<Vec<ArchivedDoc>, StoreError> {
        let dir = self.chapters_dir(root_session)?;
        let mut docs = Vec::new();
        for (name, file_type) in list_dir(&dir)? {
            if !file_type.is_file() || name.starts_with('.') {
                continue;
            }
            let path = dir.join(&name);
            let Some((series, number)) = parse_doc_name(&name) else {
                return Err(StoreError::Damaged {
                    path,
                    detail: "a file the store did not write (not `NNN-<slug>.md` or `plan-NNN-<slug>.md`)".into(),
                });
            };
            let text = fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
            let fm = crate::render::parse_frontmatter(&text).map_err(|e| StoreError::Damaged {
                path: path.clone(),
                detail: e.to_string(),
            })?;
            if (series == Series::Plan) != (fm.kind == "plan") {
                return Err(StoreError::Damaged {
                    path,
                    detail: format!("its name and its frontmatter `kind: {}` disagree", fm.kind),
                });
            }
            docs.push(ArchivedDoc {
                file_name: name,
                number,
                kind: fm.kind,
                title: fm.title,
                session_id: fm.session_id,
                seq_lo: fm.seq_range.0,
                seq_hi: fm.seq_range.1,
                chapter: fm.chapter,
                topics: fm.topics,
                turns: fm.turns,
            });
        }
        docs.sort_by(|a, b| {
            (&a.kind, a.number, &a.file_name).cmp(&(&b.kind, b.number, &b.file_name))
        });
        Ok(docs)
    }

    /// [`Store::archived`] as the store's document reader hands it to a deriver (the
    /// continuation notice): `Redacted`, since the store holds only redacted documents.
    pub fn archived_read_back(
        &self,
        root_session: &str,
    ) -> Result<Vec<Redacted<ArchivedDoc>>, StoreError> {
        let docs = self.archived(root_session)?;
        Ok(read::Reader::of_store(&self.dir)
            .read_back(docs)
            .into_items())
    }

    /// The highest number in a series, from file names alone (cheap; no frontmatter read).
    fn max_number(&self, root_session: &str, series: Series) -> Result<u32, StoreError> {
        let dir = self.chapters_dir(root_session)?;
        Ok(list_dir(&dir)?
            .iter()
            .filter_map(|(name, _)| parse_doc_name(name))
            .filter(|(s, _)| *s == series)
            .map(|(_, n)| n)
            .max()
            .unwrap_or(0))
    }

    /// The next free chapter number (1-based).
    pub fn next_chapter_number(&self, root_session: &str) -> Result<u32, StoreError> {
        Ok(self
            .max_number(root_session, Series::Chapter)?
            .saturating_add(1))
    }

    /// One past the highest plan number on disk, orphans of killed runs included. The
    /// archive numbers from the plans whose chapter landed instead (see `archive`).
    pub fn next_plan_number(&self, root_session: &str) -> Result<u32, StoreError> {
        Ok(self
            .max_number(root_session, Series::Plan)?
            .saturating_add(1))
    }

    /// Root session ids that have a directory in the store, sorted. A root is a directory
    /// holding `chapters/`, `collections/` or `artifacts/`: other directories beside them
    /// (curation edits, an index, rules) are never mistaken for session trees.
    pub fn roots(&self) -> Result<Vec<String>, StoreError> {
        Ok(self
            .root_candidates()?
            .into_iter()
            .filter(|name| self.is_root(name))
            .collect())
    }

    /// Every folder of the store that may be a root session (a safe name), in name order,
    /// from one listing: a caller that already knows which are roots skips [`Store::is_root`]'s
    /// `stat`s.
    pub fn root_candidates(&self) -> Result<Vec<String>, StoreError> {
        Ok(list_dir(&self.dir)?
            .into_iter()
            .filter(|(name, file_type)| file_type.is_dir() && is_safe_component(name))
            .map(|(name, _)| name)
            .collect())
    }

    /// Whether the candidate `name` holds what a root session holds.
    pub fn is_root(&self, name: &str) -> bool {
        let dir = self.dir.join(name);
        ["chapters", "collections", "artifacts"]
            .iter()
            .any(|sub| dir.join(sub).is_dir())
    }

    pub fn counts(&self) -> Result<StoreCounts, StoreError> {
        let mut counts = StoreCounts::default();
        for root in self.roots()? {
            counts.root_sessions += 1;
            for (name, _) in list_dir(&self.chapters_dir(&root)?)? {
                match parse_doc_name(&name) {
                    Some((Series::Chapter, _)) => counts.chapters += 1,
                    Some((Series::Plan, _)) => counts.plans += 1,
                    None => {}
                }
            }
            let artifacts = self.root_dir(&root)?.join(ARTIFACTS);
            for (prefix, file_type) in list_dir(&artifacts)? {
                if file_type.is_dir() && is_safe_component(&prefix) {
                    counts.artifacts += list_dir(&artifacts.join(&prefix))?
                        .iter()
                        .filter(|(name, t)| {
                            t.is_file() && !name.starts_with('.') && name.ends_with(".txt")
                        })
                        .count() as u64;
                }
            }
            let collections = self.root_dir(&root)?.join(COLLECTIONS);
            for (name, file_type) in list_dir(&collections)? {
                if file_type.is_file() && !name.starts_with('.') && name.ends_with(".jsonl") {
                    let read = ledger::read(&collections.join(&name), COLLECTION_VERSION)?;
                    counts.collection_lines += read.lines.len() as u64;
                }
            }
        }
        Ok(counts)
    }

    /// Write `<store>/project.yml` when absent or when the key changed (it is derived, not a
    /// ledger, so a changed identity replaces it atomically). `Ok(true)` when written.
    pub fn write_project_yml(
        &self,
        identity: &Identity,
        created_by: &str,
        created_at: &str,
    ) -> Result<bool, StoreError> {
        if let Some(existing) = self.read_project_yml()? {
            if existing.project_key == identity.project_key {
                return Ok(false);
            }
        }
        let record = ProjectYml {
            project_key: identity.project_key.clone(),
            project_key_source: identity.source,
            origin: identity.origin.clone(),
            slug: identity.slug(),
            created_by: created_by.to_string(),
            created_at: created_at.to_string(),
        };
        let path = self.dir.join(PROJECT_YML);
        let text = serde_saphyr::to_string(&record).map_err(|e| StoreError::Damaged {
            path: path.clone(),
            detail: format!("cannot serialize: {e}"),
        })?;
        atomic::write_atomic(&path, text.as_bytes())?;
        Ok(true)
    }

    /// `<store>/project.yml`, or `None` when absent. A file that does not parse is
    /// treated as absent (it is derived, and the next `write_project_yml` replaces it).
    pub fn read_project_yml(&self) -> Result<Option<ProjectYml>, StoreError> {
        let path = self.dir.join(PROJECT_YML);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path, e)),
        };
        match serde_saphyr::from_str::<ProjectYml>(&text) {
            Ok(record) => Ok(Some(record)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "project.yml does not parse; it will be rewritten");
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::{RedactionCounts, Redactor};
    use serde_json::json;

    fn redactor() -> Redactor {
        Redactor::new(&[]).unwrap()
    }

    pub(super) fn text(s: &str) -> Redacted<String> {
        redactor().redact(s, &mut RedactionCounts::default())
    }

    fn doc(name: &str, kind: &str, lo: u64, hi: u64) -> Document {
        doc_of("root-1", name, kind, lo, hi)
    }

    /// A document of root `root` covering seqs `lo..=hi`.
    pub(super) fn doc_of(root: &str, name: &str, kind: &str, lo: u64, hi: u64) -> Document {
        Document {
            file_name: name.into(),
            text: text(&format!(
                "---\ntitle: \"T {name}\"\nkind: {kind}\nsessionId: s-1\nrootSessionId: {root}\nseqRange: [{lo}, {hi}]\n---\n# body\n"
            )),
        }
    }

    pub(super) fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        (dir, store)
    }

    /// A row's metadata columns (kind, title_model, vetted), `None` when there is no row.
    fn row_meta(
        store: &Store,
        folder: &str,
        name: &str,
    ) -> Option<(Option<String>, Option<String>, Option<String>)> {
        let conn = rusqlite::Connection::open(catalog::catalog_path(store.dir())).unwrap();
        rusqlite::OptionalExtension::optional(conn.query_row(
            "SELECT kind, title_model, vetted FROM docs WHERE folder = ?1 AND name = ?2",
            [folder, name],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        ))
        .unwrap()
    }

    fn known(
        kind: &str,
        model: Option<&str>,
        vetted: &str,
    ) -> Option<(Option<String>, Option<String>, Option<String>)> {
        Some((
            Some(kind.into()),
            model.map(str::to_owned),
            Some(vetted.into()),
        ))
    }

    #[test]
    fn every_writer_records_the_documents_metadata() {
        use crate::render::annotate::{annotate, Annotated, Annotation};
        let (dir, store) = store();
        let folder = |root: &str| format!("{STORE_DIR}/{root}/{CHAPTERS}");
        let chapter = |topics: &str| {
            let body = "# A title\n\n**User** · seq 1\n\nfix it\n";
            format!(
                "---\ntitle: A title\nsummary: \"s\"\nkind: chapter\ntopics: [{topics}]\nsha256: {}\ngenerated: {{title: {{by: deterministic}}, summary: {{by: deterministic}}, topics: {{by: deterministic}}}}\n---\n{body}",
                crate::names::sha256_hex(body.as_bytes())
            )
        };
        // The archive's single write.
        let doc = Document {
            file_name: "001-a-title.md".into(),
            text: text(&chapter("auth, csv")),
        };
        store.write_document("root-1", &doc).unwrap();
        assert_eq!(
            row_meta(&store, &folder("root-1"), "001-a-title.md"),
            known("chapter", None, r#"["auth","csv"]"#)
        );
        // The group: at its commit.
        let redactor = redactor();
        let mut group = store.begin_group("root-2", &redactor).unwrap();
        group
            .write_document(&doc_of("root-2", "001-x.md", "chapter", 1, 2))
            .unwrap();
        group
            .write_document(&doc_of("root-2", "plan-002-x.md", "plan", 1, 2))
            .unwrap();
        assert_eq!(
            row_meta(&store, &folder("root-2"), "001-x.md"),
            None,
            "not before"
        );
        group.commit().unwrap();
        assert_eq!(
            row_meta(&store, &folder("root-2"), "001-x.md"),
            known("chapter", None, "[]")
        );
        assert_eq!(
            row_meta(&store, &folder("root-2"), "plan-002-x.md"),
            known("plan", None, "[]")
        );
        // A re-annotation: the model's title, its own label unvetted.
        let topics = vec!["auth".to_string(), "new-label".to_string()];
        let a = Annotation {
            title: "First",
            summary: "Seconds were compared with milliseconds.",
            topics: &topics,
            unvetted: &topics[1..],
            model: "m1",
            at: "2026-11-29T00:00:00Z",
        };
        let source = doc.text.as_str();
        let Annotated::Changed(annotated) =
            annotate(source, &a, &redactor, &mut RedactionCounts::default()).unwrap()
        else {
            panic!("expected a change")
        };
        let staged = store
            .stage_reannotation("root-1", "001-a-title.md", source, &annotated)
            .unwrap();
        let mut dirs = atomic::DirSync::default();
        assert!(store.reannotate_chapter(staged, &mut dirs).unwrap());
        assert_eq!(
            row_meta(&store, &folder("root-1"), "001-a-title.md"),
            known("chapter", Some("m1"), r#"["auth"]"#)
        );
        // A rule file.
        let rule = text("---\ntitle: \"Use tabs\"\nkind: rule\ntopics: [style]\n---\nUse tabs.\n");
        store.write_rule("r-1.md", &rule).unwrap();
        assert_eq!(
            row_meta(&store, &format!("{STORE_DIR}/{RULES_DIR}"), "r-1.md"),
            known("rule", None, r#"["style"]"#)
        );
        // The mirror's documents: their metadata read from the bytes written; one left in
        // the pack is not known (its readers read it); a file that is no document is
        // written, not recorded.
        let received = doc_of("r9", "001-m.md", "chapter", 1, 1).text;
        let bytes = received.derive(|t: &String| t.as_bytes().to_vec());
        let mut writes = store.mirror_writes();
        writes.write("chapters/pk/r9/001-m.md", &bytes).unwrap();
        writes.write("artifacts/pk/ab/abcd.txt", &bytes).unwrap();
        let refused = writes
            .write("chapters/pk/../x.md", &bytes)
            .expect_err("a path outside its place");
        assert!(
            matches!(&refused, StoreError::UnsafeMirrorPath { path } if path == "chapters/pk/../x.md"),
            "{refused}"
        );
        assert!(!dir.path().join(MIRROR_DIR).join("chapters/x.md").exists());
        writes.finish().unwrap();
        store.record_mirror_packed(&[("chapters/pk/r9", &["002-packed.md"])]);
        let mirror = dir.path().join(MIRROR_DIR);
        assert_eq!(
            fs::read(mirror.join("chapters/pk/r9/001-m.md")).unwrap(),
            received.as_bytes()
        );
        let mirrored = format!("{MIRROR_DIR}/chapters/pk/r9");
        assert_eq!(
            row_meta(&store, &mirrored, "001-m.md"),
            known("chapter", None, "[]")
        );
        assert_eq!(
            row_meta(&store, &mirrored, "002-packed.md"),
            Some((None, None, None))
        );
        assert_eq!(
            row_meta(&store, &format!("{MIRROR_DIR}/artifacts/pk/ab"), "abcd.txt"),
            None
        );
        // Written out of the pack: written, not recorded again.
        let mut outs = store.mirror_write_outs();
        outs.write("chapters/pk/r9/002-packed.md", &bytes).unwrap();
        outs.finish().unwrap();
        assert_eq!(
            row_meta(&store, &mirrored, "002-packed.md"),
            Some((None, None, None))
        );
    }

    #[test]
    fn a_reannotation_is_staged_unseen_and_published_only_over_its_source() {
        use crate::render::annotate::{annotate, Annotated, Annotation};
        let (_dir, store) = store();
        let chapter = |body: &str| {
            format!(
                "---\ntitle: A title\nsummary: \"s\"\nkind: chapter\ntopics: [auth]\nsha256: {}\ngenerated: {{title: {{by: deterministic}}, summary: {{by: deterministic}}, topics: {{by: deterministic}}}}\n---\n{body}",
                crate::names::sha256_hex(body.as_bytes())
            )
        };
        let source = chapter("# A title\n\n**User** · seq 1\n\nfix it\n");
        let dir = store.chapters_dir("root-1").unwrap();
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("001-a-title.md");
        fs::write(&path, &source).unwrap();
        let topics = vec!["auth".to_string()];
        let annotated = |title: &str, from: &str| {
            let a = Annotation {
                title,
                summary: "Seconds were compared with milliseconds.",
                topics: &topics,
                unvetted: &[],
                model: "m1",
                at: "2026-11-29T00:00:00Z",
            };
            match annotate(from, &a, &redactor(), &mut RedactionCounts::default()).unwrap() {
                Annotated::Changed(text) => text,
                Annotated::Unchanged => panic!("expected a change"),
            }
        };
        let first = annotated("First", &source);
        let staged = store
            .stage_reannotation("root-1", "001-a-title.md", &source, &first)
            .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            source,
            "unseen until published"
        );
        let mut dirs = atomic::DirSync::default();
        assert!(store.reannotate_chapter(staged, &mut dirs).unwrap());
        dirs.sync().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), first.as_str());

        // Computed from the old bytes, published after the file changed: refused, untouched.
        let stale = store
            .stage_reannotation(
                "root-1",
                "001-a-title.md",
                &source,
                &annotated("Stale", &source),
            )
            .unwrap();
        assert!(!store.reannotate_chapter(stale, &mut dirs).unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), first.as_str());

        // Anything but a re-annotation of its source is refused before a byte is written.
        let other = annotated(
            "Other",
            &chapter("# A title\n\n**User** · seq 1\n\nfix it later\n"),
        );
        let err = store
            .stage_reannotation("root-1", "001-a-title.md", &source, &other)
            .unwrap_err();
        assert!(matches!(err, StoreError::WouldOverwrite { .. }), "{err}");
        assert!(matches!(
            store.stage_reannotation("root-1", "../x.md", &source, &first),
            Err(StoreError::UnsafeId { .. })
        ));
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["001-a-title.md"], "no temp file left");
    }

    #[test]
    fn open_needs_init() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Store::open(dir.path()),
            Err(StoreError::NotEnabled { .. })
        ));
        Store::init(dir.path()).unwrap();
        assert_eq!(
            Store::open(dir.path()).unwrap().dir(),
            dir.path().join(STORE_DIR)
        );
        let file_ws = tempfile::tempdir().unwrap();
        fs::write(file_ws.path().join(STORE_DIR), b"").unwrap();
        assert!(matches!(
            Store::open(file_ws.path()),
            Err(StoreError::Io { .. })
        ));
    }

    #[test]
    fn init_needs_an_existing_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("typo");
        assert!(matches!(Store::init(&missing), Err(StoreError::Io { .. })));
        assert!(!missing.exists(), "a mistyped workspace is not created");
    }

    #[test]
    fn init_ignore_hint_is_idempotent_and_keeps_existing_lines() {
        let dir = tempfile::tempdir().unwrap();
        let gi = dir.path().join(".gitignore");
        fs::write(&gi, "target/\n# keep me\nnode_modules").unwrap();
        Store::init(dir.path()).unwrap();
        Store::init(dir.path()).unwrap();
        assert_eq!(
            fs::read_to_string(&gi).unwrap(),
            "target/\n# keep me\nnode_modules\n.dsh-chapters/\n.dsh-knowledge/\n"
        );

        let fresh = tempfile::tempdir().unwrap();
        Store::init(fresh.path()).unwrap();
        assert_eq!(
            fs::read_to_string(fresh.path().join(".gitignore")).unwrap(),
            ".dsh-chapters/\n.dsh-knowledge/\n"
        );

        let partial = tempfile::tempdir().unwrap();
        fs::write(partial.path().join(".gitignore"), "/.dsh-chapters\n").unwrap();
        Store::init(partial.path()).unwrap();
        assert_eq!(
            fs::read_to_string(partial.path().join(".gitignore")).unwrap(),
            "/.dsh-chapters\n.dsh-knowledge/\n"
        );
    }

    #[test]
    fn ignore_hint_matching() {
        assert!(ignores(" /.dsh-chapters/ ", STORE_DIR));
        assert!(ignores(".dsh-chapters", STORE_DIR));
        assert!(!ignores("# .dsh-chapters", STORE_DIR));
        assert!(!ignores(".dsh-chapters/x", STORE_DIR));
        assert_eq!(with_ignore_hints(".dsh-chapters/\n.dsh-knowledge/\n"), None);
    }

    #[test]
    fn unsafe_ids_are_refused() {
        let (_d, store) = store();
        for bad in [
            "../x",
            "a/b",
            "",
            "a\\b",
            ".hidden",
            "..",
            "a\nb",
            "x..y",
            &"a".repeat(256),
        ] {
            assert!(
                matches!(store.root_dir(bad), Err(StoreError::UnsafeId { .. })),
                "{bad:?}"
            );
            assert!(
                matches!(
                    store.read_collection("root", bad),
                    Err(StoreError::UnsafeId { .. })
                ),
                "{bad:?}"
            );
            assert!(matches!(
                store.write_document(bad, &doc("001-a.md", "chapter", 1, 2)),
                Err(StoreError::UnsafeId { .. })
            ));
        }
        assert!(matches!(
            store.write_document("root", &doc("../001-a.md", "chapter", 1, 2)),
            Err(StoreError::UnsafeId { .. })
        ));
        assert!(matches!(
            store.write_document("root", &doc("notes.md", "chapter", 1, 2)),
            Err(StoreError::BadDocumentName { .. })
        ));
        assert!(matches!(
            store.write_document("root", &doc("001-a.txt", "chapter", 1, 2)),
            Err(StoreError::BadDocumentName { .. })
        ));
        assert!(matches!(
            store.artifact_path("root", "../../etc"),
            Err(StoreError::UnsafeId { .. })
        ));
        assert!(matches!(
            store.artifact_path("root", &"A".repeat(64)),
            Err(StoreError::UnsafeId { .. })
        ));
        assert!(is_safe_component("0198c1a2-7b3e-7c41-9d2e-0123456789ab"));
        assert!(is_safe_component("001-fix-the-thing.md"));
    }

    #[test]
    fn documents_are_written_once_and_read_back_sorted() {
        let (_d, store) = store();
        assert_eq!(store.next_chapter_number("root-1").unwrap(), 1);
        assert!(store.archived("root-1").unwrap().is_empty());
        assert!(store
            .write_document("root-1", &doc("002-second.md", "chapter", 5, 9))
            .unwrap());
        assert!(store
            .write_document("root-1", &doc("001-first.md", "chapter", 1, 4))
            .unwrap());
        assert!(store
            .write_document("root-1", &doc("plan-001-build.md", "plan", 3, 3))
            .unwrap());
        assert!(store
            .write_document("root-1", &doc("010-tenth.md", "chapter", 10, 12))
            .unwrap());
        assert!(!store
            .write_document("root-1", &doc("001-first.md", "chapter", 1, 4))
            .unwrap());
        let err = store
            .write_document("root-1", &doc("001-first.md", "chapter", 1, 5))
            .unwrap_err();
        assert!(matches!(err, StoreError::WouldOverwrite { .. }), "{err}");

        let docs = store.archived("root-1").unwrap();
        let order: Vec<(&str, u32)> = docs.iter().map(|d| (d.kind.as_str(), d.number)).collect();
        assert_eq!(
            order,
            vec![("chapter", 1), ("chapter", 2), ("chapter", 10), ("plan", 1)]
        );
        assert_eq!((docs[1].seq_lo, docs[1].seq_hi), (5, 9));
        assert_eq!(docs[1].session_id, "s-1");
        assert_eq!(docs[1].title, "T 002-second.md");
        assert_eq!(store.next_chapter_number("root-1").unwrap(), 11);
        assert_eq!(store.next_plan_number("root-1").unwrap(), 2);
        assert_eq!(store.next_plan_number("other").unwrap(), 1);
    }

    #[test]
    fn damaged_documents_are_named() {
        let (_d, store) = store();
        let dir = store.chapters_dir("r").unwrap();
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("001-x.md"), "no frontmatter").unwrap();
        let err = store.archived("r").unwrap_err();
        assert!(
            matches!(err, StoreError::Damaged { ref path, .. } if path.ends_with("001-x.md")),
            "{err}"
        );
        assert!(err.to_string().contains("001-x.md"), "{err}");

        fs::write(
            dir.join("001-x.md"),
            "---\ntitle: x\nkind: plan\nsessionId: s\nrootSessionId: r\nseqRange: [1, 2]\n---\n",
        )
        .unwrap();
        let err = store.archived("r").unwrap_err();
        assert!(err.to_string().contains("disagree"), "{err}");

        fs::remove_file(dir.join("001-x.md")).unwrap();
        fs::write(dir.join("README.md"), "hi").unwrap();
        assert!(matches!(
            store.archived("r"),
            Err(StoreError::Damaged { .. })
        ));

        fs::remove_file(dir.join("README.md")).unwrap();
        fs::write(dir.join(".001-x.md.tmp.1.0"), "torn").unwrap();
        assert!(
            store.archived("r").unwrap().is_empty(),
            "temp files are not documents"
        );
    }

    #[test]
    fn doc_name_parsing() {
        assert_eq!(parse_doc_name("001-a.md"), Some((Series::Chapter, 1)));
        assert_eq!(parse_doc_name("1234-a-b.md"), Some((Series::Chapter, 1234)));
        assert_eq!(parse_doc_name("plan-007-x.md"), Some((Series::Plan, 7)));
        assert_eq!(parse_doc_name("001-.md"), Some((Series::Chapter, 1)));
        assert_eq!(parse_doc_name("001.md"), None);
        assert_eq!(parse_doc_name("-a.md"), None);
        assert_eq!(parse_doc_name("plan-x.md"), None);
        assert_eq!(parse_doc_name("99999999999-a.md"), None, "overflows u32");
        assert_eq!(parse_doc_name("001-a.md.bak"), None);
    }

    #[test]
    fn artifacts_are_content_addressed() {
        let (_d, store) = store();
        let content = "a large tool result";
        let sha = sha256_hex(content.as_bytes());
        let artifact = Artifact {
            sha256: sha.clone(),
            content: text(content),
        };
        assert!(store.write_artifact("root", &artifact).unwrap());
        assert!(!store.write_artifact("root", &artifact).unwrap());
        let path = store.artifact_path("root", &sha).unwrap();
        assert!(path.ends_with(format!("root/artifacts/{}/{sha}.txt", &sha[..2])));
        assert_eq!(fs::read_to_string(&path).unwrap(), content);

        let lying = Artifact {
            sha256: sha.clone(),
            content: text("other"),
        };
        assert!(matches!(
            store.write_artifact("root", &lying),
            Err(StoreError::ArtifactHash { .. })
        ));
        // A damaged file under a content address (a power loss before a group commit can
        // leave one) is replaced: the name admits only one content.
        fs::write(&path, "corrupted").unwrap();
        assert!(store.write_artifact("root", &artifact).unwrap());
        assert_eq!(fs::read_to_string(&path).unwrap(), content);
    }

    #[test]
    fn collections_and_counts() {
        let (_d, store) = store();
        let r = store.read_collection("root", "s-1").unwrap();
        assert!(!r.exists);
        let line = |turn: u64| {
            redactor().redact_json(
                &json!({"v": 1, "turn": turn}),
                &mut RedactionCounts::default(),
            )
        };
        store.append_collection("root", "s-1", &line(1)).unwrap();
        store
            .append_collection_many("root", "s-2", &[line(1), line(2)])
            .unwrap();
        assert_eq!(store.read_collection("root", "s-1").unwrap().lines.len(), 1);
        store
            .write_document("root", &doc("001-a.md", "chapter", 1, 2))
            .unwrap();
        store
            .write_document("root", &doc("plan-001-a.md", "plan", 1, 2))
            .unwrap();
        store
            .write_document("root-2", &doc("001-a.md", "chapter", 1, 2))
            .unwrap();
        let content = "x";
        let artifact = Artifact {
            sha256: sha256_hex(content.as_bytes()),
            content: text(content),
        };
        store.write_artifact("root", &artifact).unwrap();
        // Directories that are not session trees (edits, an index) are not roots.
        fs::create_dir_all(store.dir().join("edits").join("machine-a")).unwrap();
        fs::create_dir_all(store.dir().join("index")).unwrap();
        assert_eq!(store.roots().unwrap(), vec!["root", "root-2"]);
        assert_eq!(
            store.counts().unwrap(),
            StoreCounts {
                root_sessions: 2,
                chapters: 2,
                plans: 1,
                artifacts: 1,
                collection_lines: 3
            }
        );
    }

    #[test]
    fn lock_cleans_leftover_temp_files_after_a_dead_holder() {
        let (_d, store) = store();
        let dir = store.chapters_dir("root").unwrap();
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(".001-a.md.tmp.99.0"), "torn").unwrap();
        // A clean history: no walk, the leftover stays (it is harmless: never read).
        drop(store.lock(Duration::from_millis(0)).unwrap());
        assert!(dir.join(".001-a.md.tmp.99.0").exists());
        // The previous holder died holding the lock: its pid note is still there.
        fs::write(store.dir().join(lock::PID_FILE), "99\nchapters archive\n").unwrap();
        let held = store.lock(Duration::from_millis(0)).unwrap();
        assert!(!dir.join(".001-a.md.tmp.99.0").exists());
        assert!(matches!(
            store.lock(Duration::from_millis(0)),
            Err(StoreError::Lock(_))
        ));
        drop(held);
    }

    #[test]
    fn project_yml_is_write_once_unless_the_key_changes() {
        let (_d, store) = store();
        let mut identity = Identity {
            project_key: "886313e1-3b8a-5372-9b90-0c9aee199e5d".into(),
            source: KeySource::Remote,
            origin: "remote origin https://github.com/org/repo.git in /w/.git/config".into(),
            canonical: "github.com/org/repo".into(),
        };
        assert!(store.read_project_yml().unwrap().is_none());
        assert!(store
            .write_project_yml(&identity, "host-a", "2026-01-01T00:00:00Z")
            .unwrap());
        assert!(!store
            .write_project_yml(&identity, "host-b", "2026-02-01T00:00:00Z")
            .unwrap());
        let read = store.read_project_yml().unwrap().unwrap();
        assert_eq!(read.created_by, "host-a");
        assert_eq!(read.slug, "repo");
        assert_eq!(read.project_key_source, KeySource::Remote);
        let text = fs::read_to_string(store.dir().join(PROJECT_YML)).unwrap();
        assert!(text.contains("projectKeySource: remote"), "{text}");

        identity.project_key = "other".into();
        identity.source = KeySource::PathDerived;
        assert!(store
            .write_project_yml(&identity, "host-b", "2026-02-01T00:00:00Z")
            .unwrap());
        let read = store.read_project_yml().unwrap().unwrap();
        assert_eq!(
            (read.project_key.as_str(), read.created_by.as_str()),
            ("other", "host-b")
        );
        assert!(fs::read_to_string(store.dir().join(PROJECT_YML))
            .unwrap()
            .contains("path-derived"));

        fs::write(store.dir().join(PROJECT_YML), "projectKey: [").unwrap();
        assert!(store.read_project_yml().unwrap().is_none());
        assert!(store.write_project_yml(&identity, "host-c", "t").unwrap());
    }
}

//! The forget ledger (issue #13.7): a person's act of taking documents back, and what it
//! removes from this machine's store and mirror. Shell.
//!
//! `<store>/forget/<harnessId>/forget.jsonl`, appended through `store::ledger` (a version on
//! every line, a torn tail skipped, a corrupt middle line refused by name), one line per act:
//! when, by whom (`--by`, a person's name, never inferred), why, and the items — ids, session
//! ids, seq ranges, numbers and content hashes, **never the removed text**: a chapter is named
//! by its root session and number, not by its file name (the slug comes from its words).
//! Published to the pool as `forget/<harnessId>/forget.jsonl` so other machines know.
//!
//! What the ledger means elsewhere: the archive never writes a forgotten span again (its seqs
//! count as archived, its numbers as used) and never touches a forgotten session tree; the
//! daemon's signer never signs into one; `sync` never publishes a forgotten file and removes
//! what the pool's tip still holds of them in a commit of its own (`pool::sync`).
//!
//! Ids (what `chapters forget --list` prints and `chapters forget ID…` takes):
//! `<root>` a whole session tree (its chapters, plans, artifacts, signatures and session
//! rules); `<root>/NNN` a chapter; `<root>/plan-NNN` a plan; `<root>/artifact-<12 hex>` an
//! artifact. Signatures (collection lines) of a forgotten chapter are kept: they are derived
//! from redacted human text and the ledgers are append-only; a whole session's go with it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{ledger, parse_doc_name, Series, Store, StoreError, MIRROR_DIR};
use crate::redact::{RedactionCounts, Redactor};

pub const FORGET_DIR: &str = "forget";
pub const FORGET_FILE: &str = "forget.jsonl";
pub const FORGET_VERSION: u64 = 1;
/// How many hex digits of an artifact's SHA-256 its id shows.
const ARTIFACT_ID_HEX: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum ForgetError {
    #[error("harness id {harness:?} cannot name a forget ledger (it must be a safe directory name); set `harnessId` in the config")]
    BadHarness { harness: String },
    #[error("no document or session of this store has the id(s) {}: run `chapters forget --list` to see the ids", ids.join(", "))]
    Unknown { ids: Vec<String> },
    #[error("{id} was written by the machine {writer:?}, not by this one ({this:?}): only the machine that wrote a document may forget it — run `chapters forget {id} --by NAME` there")]
    NotOurs {
        id: String,
        writer: String,
        this: String,
    },
    #[error("artifact {id} is still referenced by {}: forget those documents too, or leave the artifact", by.join(", "))]
    Referenced { id: String, by: Vec<String> },
    #[error("the forget ledger {file} holds a line that is not a forget act ({detail}); restore it from git or a backup")]
    BadLine { file: PathBuf, detail: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn io_err(path: &Path, source: io::Error) -> ForgetError {
    ForgetError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One thing a forget act took back.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Item {
    /// A whole session tree: `<store>/<root>/`, with the sessions whose signatures it held.
    #[serde(rename_all = "camelCase")]
    Session { root: String, sessions: Vec<String> },
    #[serde(rename_all = "camelCase")]
    Chapter {
        root: String,
        number: u32,
        session_id: String,
        seq_range: (u64, u64),
    },
    #[serde(rename_all = "camelCase")]
    Plan {
        root: String,
        number: u32,
        session_id: String,
        seq_range: (u64, u64),
    },
    #[serde(rename_all = "camelCase")]
    Artifact { root: String, sha256: String },
}

impl Item {
    pub fn id(&self) -> String {
        match self {
            Item::Session { root, .. } => root.clone(),
            Item::Chapter { root, number, .. } => format!("{root}/{number:03}"),
            Item::Plan { root, number, .. } => format!("{root}/plan-{number:03}"),
            Item::Artifact { root, sha256 } => {
                format!(
                    "{root}/artifact-{}",
                    &sha256[..ARTIFACT_ID_HEX.min(sha256.len())]
                )
            }
        }
    }

    pub fn root(&self) -> &str {
        match self {
            Item::Session { root, .. }
            | Item::Chapter { root, .. }
            | Item::Plan { root, .. }
            | Item::Artifact { root, .. } => root,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Item::Session { .. } => "session",
            Item::Chapter { .. } => "chapter",
            Item::Plan { .. } => "plan",
            Item::Artifact { .. } => "artifact",
        }
    }
}

/// One line of the ledger: a person's act.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Act {
    pub v: u64,
    pub act: String,
    pub at: String,
    pub by: String,
    #[serde(default)]
    pub reason: Option<String>,
    pub harness_id: String,
    /// The ids the person named.
    pub ids: Vec<String>,
    /// What was removed: the named items and the artifacts only they referenced.
    pub items: Vec<Item>,
}

/// Every act this store's ledgers hold (all harness ids the store was written under).
#[derive(Debug, Clone, Default)]
pub struct Forgotten {
    pub acts: Vec<Act>,
}

impl Forgotten {
    pub fn is_empty(&self) -> bool {
        self.acts.is_empty()
    }

    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.acts.iter().flat_map(|a| a.items.iter())
    }

    /// A whole session tree was forgotten.
    pub fn root_forgotten(&self, root: &str) -> bool {
        self.items()
            .any(|i| matches!(i, Item::Session { root: r, .. } if r == root))
    }

    /// The highest forgotten chapter and plan numbers of a root (0 when none): never
    /// given again.
    pub fn max_numbers(&self, root: &str) -> (u32, u32) {
        let (mut chapter, mut plan) = (0, 0);
        for item in self.items() {
            match item {
                Item::Chapter {
                    root: r, number, ..
                } if r == root => chapter = chapter.max(*number),
                Item::Plan {
                    root: r, number, ..
                } if r == root => plan = plan.max(*number),
                _ => {}
            }
        }
        (chapter, plan)
    }

    /// Forgotten chapters of `session_id` under `root`, as `(number, seq_lo, seq_hi)`.
    pub fn chapters_of(&self, root: &str, session_id: &str) -> Vec<(u32, u64, u64)> {
        self.items()
            .filter_map(|i| match i {
                Item::Chapter {
                    root: r,
                    number,
                    session_id: s,
                    seq_range,
                } if r == root && s == session_id => Some((*number, seq_range.0, seq_range.1)),
                _ => None,
            })
            .collect()
    }

    /// Whether a store file (path relative to the store) is one of the forgotten.
    pub fn covers(&self, store_rel: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        let parts: Vec<&str> = store_rel.split('/').collect();
        let Some(root) = parts.first() else {
            return false;
        };
        self.items().any(|item| match (item, parts.as_slice()) {
            (Item::Session { root: r, .. }, _) => r == root,
            (
                Item::Chapter {
                    root: r, number, ..
                },
                [_, "chapters", name],
            ) => r == root && parse_doc_name(name) == Some((Series::Chapter, *number)),
            (
                Item::Plan {
                    root: r, number, ..
                },
                [_, "chapters", name],
            ) => r == root && parse_doc_name(name) == Some((Series::Plan, *number)),
            (Item::Artifact { root: r, sha256 }, [_, "artifacts", _, name]) => {
                r == root && name.strip_suffix(".txt") == Some(sha256.as_str())
            }
            _ => false,
        })
    }

    /// Whether a file of the pool's tree (or the mirror) is one of the forgotten, given
    /// the project key.
    pub fn covers_pool_path(&self, project_key: &str, pool_path: &str) -> bool {
        !self.is_empty()
            && self
                .items()
                .any(|i| i.covers_pool_path(project_key, pool_path))
    }
}

impl Item {
    /// Whether a pool path is this item's: `chapters/<pk>/<root>/…` (a session's whole
    /// folder, or the document of its number), `artifacts/<pk>/ab/<sha>.txt`,
    /// `collections/<pk>/<session>.jsonl` of a forgotten session.
    pub fn covers_pool_path(&self, project_key: &str, pool_path: &str) -> bool {
        let parts: Vec<&str> = pool_path.split('/').collect();
        match (self, parts.as_slice()) {
            (Item::Session { root, .. }, ["chapters", pk, r, ..]) => {
                *pk == project_key && r == root
            }
            (Item::Session { sessions, .. }, ["collections", pk, file]) => {
                *pk == project_key
                    && file
                        .strip_suffix(".jsonl")
                        .is_some_and(|s| sessions.iter().any(|x| x == s))
            }
            (Item::Chapter { root, number, .. }, ["chapters", pk, r, name]) => {
                *pk == project_key
                    && r == root
                    && parse_doc_name(name) == Some((Series::Chapter, *number))
            }
            (Item::Plan { root, number, .. }, ["chapters", pk, r, name]) => {
                *pk == project_key
                    && r == root
                    && parse_doc_name(name) == Some((Series::Plan, *number))
            }
            (Item::Artifact { sha256, .. }, ["artifacts", pk, _, name]) => {
                *pk == project_key && name.strip_suffix(".txt") == Some(sha256.as_str())
            }
            _ => false,
        }
    }
}

/// `<store>/forget/<harness>/forget.jsonl`.
pub fn ledger_path(store_dir: &Path, harness: &str) -> Result<PathBuf, ForgetError> {
    if !super::is_safe_component(harness) {
        return Err(ForgetError::BadHarness {
            harness: harness.to_owned(),
        });
    }
    Ok(store_dir.join(FORGET_DIR).join(harness).join(FORGET_FILE))
}

/// Every forget act in this store. Cheap when nothing was ever forgotten (one failed
/// directory read).
pub fn read(store_dir: &Path) -> Result<Forgotten, ForgetError> {
    let dir = store_dir.join(FORGET_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Forgotten::default()),
        Err(e) => return Err(io_err(&dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err(&dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if super::is_safe_component(&name) {
            files.push(entry.path().join(FORGET_FILE));
        }
    }
    files.sort();
    let mut acts = Vec::new();
    for file in files {
        let read = ledger::read(&file, FORGET_VERSION)?;
        if let Some(note) = read.torn_tail {
            tracing::warn!(file = %file.display(), note, "forget ledger: torn tail skipped");
        }
        for line in read.lines {
            let act: Act = serde_json::from_value(line).map_err(|e| ForgetError::BadLine {
                file: file.clone(),
                detail: e.to_string(),
            })?;
            acts.push(act);
        }
    }
    Ok(Forgotten { acts })
}

/// Append one act (redacted: the reason is a person's text).
pub fn append(store: &Store, act: &Act, redactor: &Redactor) -> Result<(), ForgetError> {
    let path = ledger_path(store.dir(), &act.harness_id)?;
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    }
    let value = serde_json::to_value(act).expect("a forget act always serializes to JSON");
    let line = redactor.redact_json(&value, &mut RedactionCounts::default());
    Ok(ledger::append(&path, &line, FORGET_VERSION)?)
}

/// One thing `chapters forget --list` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub id: String,
    pub kind: &'static str,
    pub root_session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_range: Option<(u64, u64)>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The file (or folder) in the store, relative to it.
    pub path: String,
    pub bytes: u64,
    /// For an artifact: the ids of the documents that reference it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub referenced_by: Vec<String>,
    /// For a session: how many chapters, plans and artifacts it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holds: Option<BTreeMap<&'static str, u64>>,
}

/// Every candidate of this store: each session tree, then its chapters, plans and
/// artifacts, in order.
pub fn candidates(store: &Store) -> Result<Vec<Candidate>, ForgetError> {
    let mut out = Vec::new();
    for root in store.roots()? {
        let docs = store.archived(&root)?;
        let chapters_dir = store.chapters_dir(&root)?;
        let mut texts = Vec::new();
        let session_at = out.len();
        let mut holds = BTreeMap::from([("chapter", 0u64), ("plan", 0), ("artifact", 0)]);
        out.push(Candidate {
            id: root.clone(),
            kind: "session",
            root_session_id: root.clone(),
            session_id: None,
            seq_range: None,
            title: None,
            path: root.clone(),
            bytes: 0,
            referenced_by: Vec::new(),
            holds: None,
        });
        for doc in &docs {
            let path = chapters_dir.join(&doc.file_name);
            let text = fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
            let (kind, item) = if doc.kind == "plan" {
                (
                    "plan",
                    Item::Plan {
                        root: root.clone(),
                        number: doc.number,
                        session_id: doc.session_id.clone(),
                        seq_range: (doc.seq_lo, doc.seq_hi),
                    },
                )
            } else {
                (
                    "chapter",
                    Item::Chapter {
                        root: root.clone(),
                        number: doc.number,
                        session_id: doc.session_id.clone(),
                        seq_range: (doc.seq_lo, doc.seq_hi),
                    },
                )
            };
            *holds.entry(kind).or_default() += 1;
            out.push(Candidate {
                id: item.id(),
                kind,
                root_session_id: root.clone(),
                session_id: Some(doc.session_id.clone()),
                seq_range: Some((doc.seq_lo, doc.seq_hi)),
                title: Some(doc.title.clone()),
                path: format!("{root}/chapters/{}", doc.file_name),
                bytes: text.len() as u64,
                referenced_by: Vec::new(),
                holds: None,
            });
            texts.push((item.id(), text));
        }
        for (sha, path, bytes) in artifacts_of(store, &root)? {
            let item = Item::Artifact {
                root: root.clone(),
                sha256: sha.clone(),
            };
            *holds.entry("artifact").or_default() += 1;
            let referenced_by = texts
                .iter()
                .filter(|(_, text)| text.contains(&sha))
                .map(|(id, _)| id.clone())
                .collect();
            out.push(Candidate {
                id: item.id(),
                kind: "artifact",
                root_session_id: root.clone(),
                session_id: None,
                seq_range: None,
                title: None,
                path,
                bytes,
                referenced_by,
                holds: None,
            });
        }
        let total: u64 = out[session_at..].iter().map(|c| c.bytes).sum();
        let session = &mut out[session_at];
        session.bytes = total;
        session.holds = Some(holds);
    }
    Ok(out)
}

/// `(sha256, store-relative path, bytes)` of every artifact of a root, sorted.
fn artifacts_of(store: &Store, root: &str) -> Result<Vec<(String, String, u64)>, ForgetError> {
    let dir = store.root_dir(root)?.join("artifacts");
    let mut out = Vec::new();
    for (prefix, ty) in super::list_dir(&dir)? {
        if !ty.is_dir() || prefix.len() != 2 {
            continue;
        }
        for (name, ty) in super::list_dir(&dir.join(&prefix))? {
            let Some(sha) = name.strip_suffix(".txt") else {
                continue;
            };
            if !ty.is_file() || name.starts_with('.') {
                continue;
            }
            let path = dir.join(&prefix).join(&name);
            let bytes = fs::metadata(&path).map_err(|e| io_err(&path, e))?.len();
            out.push((
                sha.to_owned(),
                format!("{root}/artifacts/{prefix}/{name}"),
                bytes,
            ));
        }
    }
    Ok(out)
}

/// Who wrote the documents at `dir` (a mirror folder of another machine's session), from
/// the first `harnessId:` in their frontmatter.
fn writer_in(mirror: &Mirror<'_>, dir: &str, number: Option<(Series, u32)>) -> Option<String> {
    let names: Vec<String> = mirror
        .names(dir, false)
        .into_iter()
        .filter(|n| n.ends_with(".md"))
        .filter(|n| number.is_none() || parse_doc_name(n) == number)
        .collect();
    names.iter().find_map(|n| {
        mirror
            .text(&format!("{dir}/{n}"))
            .and_then(|t| harness_of(&t))
    })
}

/// The mirror as `forget` reads it: its files, and the packed mirror's tree
/// (`pool::mirror`), which holds the pool's documents never written out.
struct Mirror<'a> {
    dir: std::path::PathBuf,
    packed: Option<&'a dyn super::read::MirrorObjects>,
}

impl Mirror<'_> {
    /// The names of folders (`dirs`) or files in the mirror's folder `rel`, sorted.
    fn names(&self, rel: &str, dirs: bool) -> Vec<String> {
        let mut out: BTreeSet<String> = fs::read_dir(self.dir.join(rel))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir() == dirs))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if let Some(packed) = self.packed {
            out.extend(
                packed
                    .list(rel)
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(_, is_dir)| *is_dir == dirs)
                    .map(|(name, _)| name),
            );
        }
        out.into_iter().collect()
    }

    /// The text of the mirror's file `rel`: on disk, else in the packed mirror.
    fn text(&self, rel: &str) -> Option<String> {
        match fs::read_to_string(self.dir.join(rel)) {
            Ok(text) => Some(text),
            Err(_) => {
                let bytes = self.packed?.file(rel).ok()??;
                String::from_utf8(bytes).ok()
            }
        }
    }
}

/// The `harnessId` a document's frontmatter names.
pub fn harness_of(text: &str) -> Option<String> {
    let rest = text.strip_prefix("---\n")?;
    let end = rest.find("\n---\n").unwrap_or(rest.len());
    rest[..end].lines().find_map(|l| {
        l.strip_prefix("harnessId:")
            .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_owned())
    })
}

/// What one `forget` resolved: the items to remove, the ids named.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub ids: Vec<String>,
    pub items: Vec<Item>,
    /// Ids already forgotten by an earlier act (nothing left to do but finish removal).
    pub already: Vec<String>,
}

/// Resolve the ids a person named against this store (and, for the refusal, the mirror):
/// every id must be known, ours, and an artifact must not be referenced by a document that
/// stays. Forgetting a document also takes the artifacts only it (and other forgotten
/// documents) referenced; forgetting a session takes its artifacts no other document
/// references. Nothing is removed here.
pub fn resolve(
    store: &Store,
    workspace: &Path,
    packed: Option<&dyn super::read::MirrorObjects>,
    project_key: &str,
    harness: &str,
    ids: &[String],
) -> Result<Resolved, ForgetError> {
    let forgotten = read(store.dir())?;
    let all = candidates(store)?;
    let by_id: BTreeMap<&str, &Candidate> = all.iter().map(|c| (c.id.as_str(), c)).collect();
    let mirror = Mirror {
        dir: workspace.join(MIRROR_DIR),
        packed,
    };
    let mut unknown = Vec::new();
    let mut named: Vec<&Candidate> = Vec::new();
    let mut already = Vec::new();
    for id in ids {
        if let Some(c) = by_id.get(id.as_str()) {
            if !named.iter().any(|n| n.id == c.id) {
                named.push(c);
            }
            continue;
        }
        // An artifact by a longer prefix or its full hash.
        if let Some((root, hex)) = id.split_once("/artifact-") {
            let hits: Vec<&&Candidate> = by_id
                .values()
                .filter(|c| {
                    c.kind == "artifact"
                        && c.root_session_id == root
                        && c.path
                            .rsplit('/')
                            .next()
                            .is_some_and(|f| f.starts_with(hex))
                })
                .collect();
            if hits.len() == 1 && hex.len() >= ARTIFACT_ID_HEX {
                named.push(hits[0]);
                continue;
            }
        }
        if forgotten.items().any(|i| &i.id() == id) {
            already.push(id.clone());
            continue;
        }
        // Another machine's document, seen in the mirror: refused, naming its writer.
        let (root, rest) = id.split_once('/').unwrap_or((id.as_str(), ""));
        if super::is_safe_component(root) {
            let folder = format!("chapters/{project_key}/{root}");
            let number = if rest.is_empty() {
                Some(None)
            } else if let Some(n) = rest.strip_prefix("plan-") {
                n.parse().ok().map(|n| Some((Series::Plan, n)))
            } else {
                rest.parse().ok().map(|n| Some((Series::Chapter, n)))
            };
            if let Some(number) = number {
                if let Some(writer) = writer_in(&mirror, &folder, number) {
                    if writer != harness {
                        return Err(ForgetError::NotOurs {
                            id: id.clone(),
                            writer,
                            this: harness.to_owned(),
                        });
                    }
                }
            }
        }
        unknown.push(id.clone());
    }
    if !unknown.is_empty() {
        return Err(ForgetError::Unknown { ids: unknown });
    }
    // Documents that stay, and what they reference: this store's and the mirror's.
    let forgotten_roots: BTreeSet<&str> = named
        .iter()
        .filter(|c| c.kind == "session")
        .map(|c| c.root_session_id.as_str())
        .collect();
    let gone = |c: &Candidate| {
        forgotten_roots.contains(c.root_session_id.as_str()) || named.iter().any(|n| n.id == c.id)
    };
    let mut staying: Vec<(String, String)> = Vec::new();
    for c in all.iter().filter(|c| matches!(c.kind, "chapter" | "plan")) {
        if gone(c) {
            continue;
        }
        let path = store.dir().join(&c.path);
        let text = fs::read_to_string(&path).map_err(|e| io_err(&path, e))?;
        staying.push((c.id.clone(), text));
    }
    staying.extend(mirror_documents(&mirror, project_key, harness));
    let referencing = |sha: &str| -> Vec<String> {
        staying
            .iter()
            .filter(|(_, text)| text.contains(sha))
            .map(|(id, _)| id.clone())
            .collect()
    };
    let mut items = Vec::new();
    for c in &named {
        let item = item_of(store, c)?;
        if let Item::Artifact { sha256, .. } = &item {
            let by = referencing(sha256);
            if !by.is_empty() {
                return Err(ForgetError::Referenced {
                    id: c.id.clone(),
                    by,
                });
            }
        }
        items.push(item);
    }
    // Artifacts that go with what was named.
    for c in all.iter().filter(|c| c.kind == "artifact") {
        if named.iter().any(|n| n.id == c.id) {
            continue;
        }
        let sha = c
            .path
            .rsplit('/')
            .next()
            .and_then(|f| f.strip_suffix(".txt"))
            .unwrap_or_default();
        let whole_root = forgotten_roots.contains(c.root_session_id.as_str());
        let by_named = c
            .referenced_by
            .iter()
            .any(|r| named.iter().any(|n| &n.id == r));
        if (whole_root || by_named) && referencing(sha).is_empty() {
            items.push(item_of(store, c)?);
        }
    }
    items.sort();
    items.dedup();
    Ok(Resolved {
        ids: ids.to_vec(),
        items,
        already,
    })
}

fn item_of(store: &Store, c: &Candidate) -> Result<Item, ForgetError> {
    let root = c.root_session_id.clone();
    Ok(match c.kind {
        "session" => {
            let mut sessions: Vec<String> =
                super::list_dir(&store.root_dir(&root)?.join("collections"))?
                    .into_iter()
                    .filter_map(|(n, _)| n.strip_suffix(".jsonl").map(str::to_owned))
                    .filter(|n| !n.starts_with('.'))
                    .collect();
            sessions.sort();
            Item::Session { root, sessions }
        }
        "artifact" => Item::Artifact {
            root,
            sha256: c
                .path
                .rsplit('/')
                .next()
                .and_then(|f| f.strip_suffix(".txt"))
                .unwrap_or_default()
                .to_owned(),
        },
        kind => {
            let (lo, hi) = c.seq_range.unwrap_or((0, 0));
            let number = c
                .path
                .rsplit('/')
                .next()
                .and_then(parse_doc_name)
                .map_or(0, |(_, n)| n);
            let session_id = c.session_id.clone().unwrap_or_default();
            if kind == "plan" {
                Item::Plan {
                    root,
                    number,
                    session_id,
                    seq_range: (lo, hi),
                }
            } else {
                Item::Chapter {
                    root,
                    number,
                    session_id,
                    seq_range: (lo, hi),
                }
            }
        }
    })
}

/// Other machines' documents in the mirror, as (a label, text).
fn mirror_documents(
    mirror: &Mirror<'_>,
    project_key: &str,
    harness: &str,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let base = format!("chapters/{project_key}");
    for root in mirror.names(&base, true) {
        for name in mirror.names(&format!("{base}/{root}"), false) {
            if !name.ends_with(".md") {
                continue;
            }
            if let Some(text) = mirror.text(&format!("{base}/{root}/{name}")) {
                if harness_of(&text).as_deref() == Some(harness) {
                    continue; // this machine's own, in its store already
                }
                out.push((format!("{root}/{name} (another machine's)"), text));
            }
        }
    }
    out
}

/// What [`remove`] took away.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Removed {
    pub store_files: u64,
    pub mirror_files: u64,
    /// Signature lines of forgotten chapters whose terms, paths and commands were emptied.
    pub signatures_scrubbed: u64,
}

/// Remove the items from the store and from this machine's mirror (its own copies there),
/// after the act was appended. The caller holds the writer lock. Idempotent: what is
/// already gone is skipped, so a forget cut short by a crash is finished by running it
/// again.
pub fn remove(
    store: &Store,
    workspace: &Path,
    project_key: &str,
    items: &[Item],
    redactor: &Redactor,
) -> Result<Removed, ForgetError> {
    let mut removed = Removed::default();
    let mirror = workspace.join(MIRROR_DIR);
    let pk_dir = |top: &str| mirror.join(top).join(project_key);
    for item in items {
        match item {
            Item::Session { root, sessions } => {
                let _collections = store.lock_collections()?;
                let dir = store.root_dir(root)?;
                removed.store_files += remove_tree(&dir)?;
                removed.mirror_files += remove_tree(&pk_dir("chapters").join(root))?;
                for s in sessions {
                    if super::is_safe_component(s) {
                        removed.mirror_files +=
                            remove_file(&pk_dir("collections").join(format!("{s}.jsonl")))?;
                    }
                }
                // Session rules captured from its sessions.
                let rules = store.dir().join(super::RULES_DIR);
                for (name, ty) in super::list_dir(&rules)? {
                    if !ty.is_file() || !name.starts_with("s-") {
                        continue;
                    }
                    let path = rules.join(&name);
                    let text = fs::read_to_string(&path).unwrap_or_default();
                    if sessions.iter().any(|s| text.contains(s.as_str())) {
                        removed.store_files += remove_file(&path)?;
                    }
                }
            }
            Item::Chapter { root, number, .. } | Item::Plan { root, number, .. } => {
                if let Item::Chapter {
                    session_id,
                    seq_range,
                    ..
                } = item
                {
                    let n = scrub_signatures(store, root, session_id, *seq_range, redactor)?;
                    removed.signatures_scrubbed += n;
                    // This machine's copy in the mirror follows (the next sync replaces it too).
                    let copy = pk_dir("collections").join(format!("{session_id}.jsonl"));
                    if n > 0 && copy.is_file() {
                        let path = store.collection_path(root, session_id)?;
                        let bytes = fs::read(&path).map_err(|e| io_err(&path, e))?;
                        super::atomic::write_atomic(&copy, &bytes)?;
                    }
                }
                let series = if matches!(item, Item::Plan { .. }) {
                    Series::Plan
                } else {
                    Series::Chapter
                };
                for dir in [store.chapters_dir(root)?, pk_dir("chapters").join(root)] {
                    for (name, _) in super::list_dir(&dir)? {
                        if parse_doc_name(&name) == Some((series, *number)) {
                            let n = remove_file(&dir.join(&name))?;
                            if dir.starts_with(&mirror) {
                                removed.mirror_files += n;
                            } else {
                                removed.store_files += n;
                            }
                        }
                    }
                }
            }
            Item::Artifact { root, sha256 } => {
                if let Ok(path) = store.artifact_path(root, sha256) {
                    removed.store_files += remove_file(&path)?;
                    removed.mirror_files += remove_file(
                        &pk_dir("artifacts")
                            .join(&sha256[..2])
                            .join(format!("{sha256}.txt")),
                    )?;
                }
            }
        }
    }
    // The search table and the enrichment catalog learn of removals by a rescan; the
    // catalog keeps no row of what was taken back.
    if let Err(e) = super::catalog::start_over_forgetting(store.dir()) {
        tracing::warn!(error = %e, "could not start the store's catalog over; the next periodic rescan drops the forgotten documents");
    }
    Ok(removed)
}

/// Empty the terms, paths and commands of the signature lines of a forgotten chapter's span
/// (they are words of its turns; a secret the rules missed is among them), keeping each
/// line's seqs so that every turn stays signed exactly once, and mark them `forgotten`. The
/// one sanctioned rewrite of a collection ledger: atomic, under the collections lock; the
/// next sync publishes the scrubbed ledger in the forget commit (`pool::sync`). Idempotent.
fn scrub_signatures(
    store: &Store,
    root: &str,
    session_id: &str,
    (lo, hi): (u64, u64),
    redactor: &Redactor,
) -> Result<u64, ForgetError> {
    let _collections = store.lock_collections()?;
    let path = store.collection_path(root, session_id)?;
    let read = ledger::read(&path, super::COLLECTION_VERSION)?;
    if !read.exists {
        return Ok(0);
    }
    let mut scrubbed = 0;
    let mut counts = RedactionCounts::default();
    let mut out = String::new();
    for mut line in read.lines {
        let inside = line["seqs"].as_array().is_some_and(|seqs| {
            !seqs.is_empty()
                && seqs
                    .iter()
                    .all(|s| s.as_u64().is_some_and(|s| (lo..=hi).contains(&s)))
        });
        if inside && line.get("forgotten").is_none() {
            for key in ["terms", "paths", "commands"] {
                line[key] = serde_json::Value::Array(Vec::new());
            }
            line["forgotten"] = serde_json::Value::Bool(true);
            scrubbed += 1;
        }
        let line = redactor.redact_json(&line, &mut counts);
        out.push_str(&serde_json::to_string(line.get()).expect("a JSON value always serializes"));
        out.push('\n');
    }
    if scrubbed > 0 {
        super::atomic::write_atomic(&path, out.as_bytes())?;
    }
    Ok(scrubbed)
}

fn remove_file(path: &Path) -> Result<u64, ForgetError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(1),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_err(path, e)),
    }
}

/// Remove a directory tree; returns how many files it held.
fn remove_tree(dir: &Path) -> Result<u64, ForgetError> {
    fn count(dir: &Path) -> u64 {
        fs::read_dir(dir).map_or(0, |rd| {
            rd.flatten()
                .map(|e| {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        count(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
    }
    let n = count(dir);
    match fs::remove_dir_all(dir) {
        Ok(()) => Ok(n),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(io_err(dir, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(items: Vec<Item>) -> Act {
        Act {
            v: 1,
            act: "forget".into(),
            at: "2026-12-01T00:00:00Z".into(),
            by: "Ada".into(),
            reason: Some("a key".into()),
            harness_id: "m".into(),
            ids: items.iter().map(Item::id).collect(),
            items,
        }
    }

    #[test]
    fn ids_and_coverage() {
        let sha = "ab".repeat(32);
        let f = Forgotten {
            acts: vec![act(vec![
                Item::Chapter {
                    root: "r1".into(),
                    number: 3,
                    session_id: "s1".into(),
                    seq_range: (10, 20),
                },
                Item::Plan {
                    root: "r1".into(),
                    number: 1,
                    session_id: "s1".into(),
                    seq_range: (12, 12),
                },
                Item::Artifact {
                    root: "r1".into(),
                    sha256: sha.clone(),
                },
                Item::Session {
                    root: "r2".into(),
                    sessions: vec!["r2".into(), "fork".into()],
                },
            ])],
        };
        let ids: Vec<String> = f.items().map(Item::id).collect();
        assert_eq!(
            ids,
            vec![
                "r1/003".to_string(),
                "r1/plan-001".into(),
                format!("r1/artifact-{}", &sha[..12]),
                "r2".into()
            ]
        );
        assert!(f.covers("r1/chapters/003-a-title.md"));
        assert!(!f.covers("r1/chapters/004-a-title.md"));
        assert!(f.covers("r1/chapters/plan-001-x.md"));
        assert!(!f.covers("r1/chapters/plan-003-x.md"));
        assert!(f.covers(&format!("r1/artifacts/ab/{sha}.txt")));
        assert!(f.covers("r2/collections/fork.jsonl"));
        assert!(
            !f.covers("r1/collections/s1.jsonl"),
            "a chapter's signatures stay"
        );
        assert!(f.covers_pool_path("pk", "chapters/pk/r1/003-a.md"));
        assert!(!f.covers_pool_path("other", "chapters/pk/r1/003-a.md"));
        assert!(f.covers_pool_path("pk", "collections/pk/fork.jsonl"));
        assert!(f.covers_pool_path("pk", "chapters/pk/r2/001-x.md"));
        assert!(f.covers_pool_path("pk", &format!("artifacts/pk/ab/{sha}.txt")));
        assert!(!f.covers_pool_path("pk", "collections/pk/s1.jsonl"));
        assert_eq!(f.max_numbers("r1"), (3, 1));
        assert_eq!(f.chapters_of("r1", "s1"), vec![(3, 10, 20)]);
        assert!(f.root_forgotten("r2") && !f.root_forgotten("r1"));
    }

    #[test]
    fn the_ledger_round_trips_and_carries_no_file_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        assert!(read(store.dir()).unwrap().is_empty());
        let a = act(vec![Item::Chapter {
            root: "r1".into(),
            number: 3,
            session_id: "s1".into(),
            seq_range: (10, 20),
        }]);
        let redactor = Redactor::new(&[]).unwrap();
        append(&store, &a, &redactor).unwrap();
        let back = read(store.dir()).unwrap();
        assert_eq!(back.acts, vec![a]);
        let text = fs::read_to_string(ledger_path(store.dir(), "m").unwrap()).unwrap();
        assert!(text.contains("\"by\":\"Ada\""), "{text}");
        assert!(!text.contains(".md"), "{text}");
        assert!(matches!(
            ledger_path(store.dir(), "../x"),
            Err(ForgetError::BadHarness { .. })
        ));
    }

    #[test]
    fn harness_is_read_from_frontmatter_only() {
        assert_eq!(
            harness_of("---\ntitle: x\nharnessId: box-a\n---\nharnessId: b\n").as_deref(),
            Some("box-a")
        );
        assert_eq!(harness_of("no frontmatter\nharnessId: b\n"), None);
    }
}

//! The packed mirror (shell, issue #17 point 6): the mirror's git directory
//! (`<workspace>/.dsh-knowledge/.git`) holds the pool's objects, and the head it last
//! materialized (its marker) names the tree every reader of the mirror sees. The pool's
//! documents — chapters, plans and artifacts of other machines — are not written out as a
//! file each: the search table lists them from that tree, the search cache and the door read
//! them through `store::read::Reader` (which takes a [`Packed`] as its source for a mirror
//! file not on disk), and a plain file is written only for what a machine reads —
//! [`write_out`] for any document `search`, `show` or an MCP tool returns, and the recent
//! window `pool.mirrorRecentDays` at each sync. Everything else of the pool (index pages,
//! rules, curation and forget ledgers, collections, landing pages) is still materialized
//! as files: a handful per session, read by the index and the rules block.

use std::path::{Path, PathBuf};

use crate::git::ObjectId;

use crate::git::{GitError, GitRepo};
use crate::redact::Redacted;
use crate::store::catalog::RowMeta;
use crate::store::read::MirrorObjects;
use crate::store::{atomic, io_err, Store, StoreError, MIRROR_DIR, RULES_DIR};

/// The marker in the mirror's git directory: the pool commit the mirror was last
/// materialized at (written last, after the objects and the files of that commit).
pub const MATERIALIZED_FILE: &str = "dsh-chapters-materialized";

/// The mirror's git directory under a mirror directory.
pub fn git_dir(mirror_dir: &Path) -> PathBuf {
    mirror_dir.join(".git")
}

/// Whether the pool file `path` (`chapters/<pk>/<root>/X.md`, `artifacts/<pk>/ab/<sha>.txt`)
/// is read from the packed mirror instead of being written out at each sync.
pub fn is_packed(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["chapters", _, _, name] => name.ends_with(".md"),
        ["artifacts", _, _, name] => name.ends_with(".txt"),
        _ => false,
    }
}

/// The commit the mirror was last materialized at, as its marker names it.
pub fn materialized_head(mirror_dir: &Path) -> Option<ObjectId> {
    std::fs::read_to_string(git_dir(mirror_dir).join(MATERIALIZED_FILE))
        .ok()
        .and_then(|s| ObjectId::from_hex(s.trim().as_bytes()).ok())
}

/// The pool's tree at the mirror's materialized head, in the mirror's own object database.
pub struct Packed {
    repo: GitRepo,
    tree: ObjectId,
    /// The packs the blobs are read from, opened at the first blob: a first sync reads every
    /// chapter through them, each delta base resolved once while it stays cached.
    blobs: std::cell::RefCell<Option<crate::git::PackBlobs>>,
}

impl Packed {
    /// The packed mirror of `workspace`, or `None` when it has materialized nothing yet (or
    /// its objects are not there: a mirror of an older version, whose files are all on disk).
    pub fn open(workspace: &Path) -> Option<Packed> {
        let mirror_dir = workspace.join(MIRROR_DIR);
        let head = materialized_head(&mirror_dir)?;
        let repo = GitRepo::open(&git_dir(&mirror_dir)).ok()?;
        if !repo.has_object(head) {
            return None;
        }
        let tree = repo.commit_tree(head).ok()?;
        Some(Packed {
            repo,
            tree,
            blobs: std::cell::RefCell::new(None),
        })
    }

    /// As the reader's source.
    pub fn boxed(self) -> Box<dyn MirrorObjects> {
        Box::new(self)
    }

    /// The project keys under `chapters/` in the tree.
    pub fn chapter_pks(&self) -> Result<Vec<String>, GitError> {
        let Some(chapters) = self.repo.tree_at(self.tree, "chapters")? else {
            return Ok(Vec::new());
        };
        Ok(self
            .repo
            .entries(chapters)?
            .into_iter()
            .filter(|(_, _, is_tree)| *is_tree)
            .map(|(pk, _, _)| pk)
            .collect())
    }

    /// The chapter folders in the tree (this machine's own too), as
    /// `(project key, root session)`, sorted.
    pub fn chapter_folders(&self) -> Result<Vec<(String, String)>, GitError> {
        let mut out = Vec::new();
        let Some(chapters) = self.repo.tree_at(self.tree, "chapters")? else {
            return Ok(out);
        };
        for (pk, pk_tree, is_tree) in self.repo.entries(chapters)? {
            if !is_tree {
                continue;
            }
            for (root, _, is_tree) in self.repo.entries(pk_tree)? {
                if is_tree {
                    out.push((pk.clone(), root));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The folder `rel` of the tree (relative to the mirror): its tree id and its files as
    /// `(name, blob id)`; `None` when the tree holds no such folder.
    #[allow(clippy::type_complexity)]
    pub fn folder(
        &self,
        rel: &str,
    ) -> Result<Option<(ObjectId, Vec<(String, ObjectId)>)>, GitError> {
        let Some(tree) = self.repo.tree_at(self.tree, rel)? else {
            return Ok(None);
        };
        let files = self
            .repo
            .entries(tree)?
            .into_iter()
            .filter(|(_, _, is_tree)| !is_tree)
            .map(|(name, id, _)| (name, id))
            .collect();
        Ok(Some((tree, files)))
    }

    /// The bytes of blob `id`.
    pub fn blob(&self, id: ObjectId) -> Result<Vec<u8>, GitError> {
        let mut blobs = self.blobs.borrow_mut();
        let blobs = blobs.get_or_insert_with(|| self.repo.pack_blobs());
        self.repo.read_blob_from(blobs, id)
    }
}

impl MirrorObjects for Packed {
    fn git_dir(&self) -> &Path {
        self.repo.path()
    }

    fn file(&self, rel: &str) -> std::io::Result<Option<Vec<u8>>> {
        let found = self
            .repo
            .blob_at(self.tree, rel)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        found
            .map(|blob| self.blob(blob))
            .transpose()
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn list(&self, rel: &str) -> std::io::Result<Vec<(String, bool)>> {
        let io = |e: GitError| std::io::Error::other(e.to_string());
        let Some(tree) = self.repo.tree_at(self.tree, rel).map_err(io)? else {
            return Ok(Vec::new());
        };
        Ok(self
            .repo
            .entries(tree)
            .map_err(io)?
            .into_iter()
            .map(|(name, _, is_tree)| (name, is_tree))
            .collect())
    }
}

/// The store's document reader for `workspace`, reading a mirror file that was never written
/// out from the packed mirror.
pub fn reader(workspace: &Path) -> crate::store::read::Reader {
    crate::store::read::Reader::new(workspace)
        .with_mirror(Packed::open(workspace).map(Packed::boxed))
}

/// The pool's files a sync copies into the mirror ([`Store::mirror_writes`]), or documents
/// left in its pack written out as files ([`Store::mirror_write_outs`]: the recent window).
/// Each file is written at once (temp file and rename, unsynced: the mirror is a rebuildable
/// copy of the pool); [`MirrorWrites::finish`] makes them durable with one `syncfs` and then
/// records the received documents in the store's catalog, their metadata read from the bytes
/// in hand. Dropped unfinished (the sync failed), nothing is recorded.
pub struct MirrorWrites<'s> {
    store: &'s Store,
    dir: PathBuf,
    /// Whether `finish` records what was written (a write-out's document was recorded when
    /// the mirror received it).
    record: bool,
    wrote: bool,
    /// The received documents: the catalog's folder (workspace-relative, under the mirror),
    /// name, metadata.
    docs: Vec<(String, String, Redacted<RowMeta>)>,
}

impl Store {
    /// Copy pool files into the mirror: the sync's copy-in of what a pull brought.
    pub fn mirror_writes(&self) -> MirrorWrites<'_> {
        self.mirror_writer(true)
    }

    /// Write out as files documents the mirror holds in its pack (and the catalog already
    /// names).
    pub fn mirror_write_outs(&self) -> MirrorWrites<'_> {
        self.mirror_writer(false)
    }

    fn mirror_writer(&self, record: bool) -> MirrorWrites<'_> {
        let workspace = self.dir.parent().unwrap_or(&self.dir);
        MirrorWrites {
            store: self,
            dir: workspace.join(MIRROR_DIR),
            record,
            wrote: false,
            docs: Vec::new(),
        }
    }

    /// Write the mirror's document `path` (mirror-relative) out of its pack where an agent's
    /// `read` tool opens it: atomic and durable at once (one file, read on demand).
    pub fn write_out_mirror_document(
        &self,
        path: &str,
        bytes: &Redacted<Vec<u8>>,
    ) -> Result<(), StoreError> {
        let target = self.mirror_writer(false).target(path)?;
        atomic::write_atomic(&target, bytes.get())
    }

    /// Record documents the mirror received and left in its pack (mirror-relative folders
    /// and their files): no file to read their metadata from, so the rows carry none (their
    /// readers read them).
    pub fn record_mirror_packed(&self, changes: &[(&str, &[&str])]) {
        let folders: Vec<String> = changes
            .iter()
            .map(|(folder, _)| format!("{MIRROR_DIR}/{folder}"))
            .collect();
        let docs: Vec<(&str, &str, Option<&Redacted<RowMeta>>)> = changes
            .iter()
            .zip(&folders)
            .flat_map(|((_, names), folder)| {
                names.iter().map(move |name| (folder.as_str(), *name, None))
            })
            .collect();
        self.record_documents(&docs);
    }
}

impl MirrorWrites<'_> {
    /// The file of the mirror-relative `path`, its folder made; a path with an empty, `.`
    /// or `..` component is refused (it would name a file outside its place).
    fn target(&self, path: &str) -> Result<PathBuf, StoreError> {
        if path
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
        {
            return Err(StoreError::UnsafeMirrorPath { path: path.into() });
        }
        let target = self.dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_err(parent, e))?;
        }
        Ok(target)
    }

    /// Write the pool file `path` (mirror-relative) with `bytes`.
    pub fn write(&mut self, path: &str, bytes: &Redacted<Vec<u8>>) -> Result<(), StoreError> {
        let target = self.target(path)?;
        atomic::write_atomic_unsynced(&target, bytes.get())?;
        self.wrote = true;
        if self.record {
            if let Some((folder, name)) = document_place(path) {
                self.docs.push((
                    format!("{MIRROR_DIR}/{folder}"),
                    name.to_owned(),
                    bytes.derive(RowMeta::of_bytes),
                ));
            }
        }
        Ok(())
    }

    /// Make what was written durable (one `syncfs`), then record the received documents.
    pub fn finish(self) -> Result<(), StoreError> {
        if self.wrote {
            atomic::sync_filesystem(&self.dir)?;
        }
        if self.record {
            let docs: Vec<(&str, &str, Option<&Redacted<RowMeta>>)> = self
                .docs
                .iter()
                .map(|(folder, name, meta)| (folder.as_str(), name.as_str(), Some(meta)))
                .collect();
            self.store.record_documents(&docs);
        }
        Ok(())
    }
}

/// The (folder, name) of a pool path the search table indexes — other machines' chapters
/// and plans (`chapters/<pk>/<root>/X.md`) and project rules (`rules/<pk>/X.md`, and the
/// original TypeScript plugin's `rules/<pk>/<harness>/X.md`) — or `None`.
pub(crate) fn document_place(path: &str) -> Option<(&str, &str)> {
    let parts: Vec<&str> = path.split('/').collect();
    let document = match parts.as_slice() {
        ["chapters", _, _, name] | [RULES_DIR, _, name] | [RULES_DIR, _, _, name] => {
            name.ends_with(".md")
        }
        _ => false,
    };
    if document {
        path.rsplit_once('/')
    } else {
        None
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("cannot write the pool's document {path} out of the mirror: {detail}")]
    Write { path: PathBuf, detail: String },
}

/// Write the mirror file `rel` (relative to the workspace: `.dsh-knowledge/chapters/…`) out
/// of the packed mirror where an agent's `read` tool opens it, when it is not there yet
/// (atomic: temp file, fsync, rename). Returns whether it wrote. A path outside the mirror,
/// or one the mirror's tree does not hold, writes nothing.
pub fn write_out(workspace: &Path, rel: &str) -> Result<bool, MirrorError> {
    let Some(inner) = rel
        .strip_prefix(MIRROR_DIR)
        .and_then(|r| r.strip_prefix('/'))
    else {
        return Ok(false);
    };
    if !is_packed(inner)
        || inner
            .split('/')
            .any(|c| c.is_empty() || c.starts_with('.') || c == "..")
    {
        return Ok(false);
    }
    let target = workspace.join(rel);
    if target.is_file() {
        return Ok(false);
    }
    let err = |detail: String| MirrorError::Write {
        path: target.clone(),
        detail,
    };
    // Not on disk: the reader reads it from the packed mirror's tree (redacted, as the
    // pool's published bytes are), or finds nothing there.
    let bytes = match reader(workspace).bytes(&target) {
        Ok(bytes) => bytes,
        Err(crate::store::read::ReadError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(false);
        }
        Err(e) => return Err(err(e.to_string())),
    };
    Store::at(workspace.join(crate::store::STORE_DIR))
        .write_out_mirror_document(inner, &bytes)
        .map_err(|e| err(e.to_string()))?;
    Ok(true)
}

/// `mirrorRecentDays`: the chapters dated within that many days of now (a day of clock skew
/// allowed ahead) are written out as files at each sync.
#[derive(Debug, Clone, Copy)]
pub struct Recent {
    from_ms: i64,
    to_ms: i64,
}

impl Recent {
    /// The window of `days` ending now; `None` for 0.
    pub fn days(days: u64, now_secs: i64) -> Option<Recent> {
        const DAY_MS: i64 = 86_400_000;
        let days = i64::try_from(days).ok().filter(|d| *d > 0)?;
        let now_ms = now_secs.saturating_mul(1000);
        Some(Recent {
            from_ms: now_ms.saturating_sub(days.saturating_mul(DAY_MS)),
            to_ms: now_ms.saturating_add(DAY_MS),
        })
    }

    /// Whether an RFC 3339 `date` (a frontmatter's, as the search table keeps it) falls in the
    /// window.
    pub fn holds_date(&self, date: &str) -> bool {
        crate::time::parse_rfc3339_ms(date)
            .is_some_and(|ms| (self.from_ms..=self.to_ms).contains(&ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_paths_are_other_machines_documents_only() {
        for p in [
            "chapters/pk/root/001-a.md",
            "chapters/pk/root/plan-1.md",
            "artifacts/pk/ab/abcd.txt",
        ] {
            assert!(is_packed(p), "{p}");
        }
        for p in [
            "index/manifest.json",
            "rules/pk/r-1.md",
            "collections/pk/s.jsonl",
            "edits/h/curation.jsonl",
            "chapters/pk/root/notes.txt",
            "README.md",
            "project.yml",
        ] {
            assert!(!is_packed(p), "{p}");
        }
    }

    #[test]
    fn the_recent_window_holds_dates_within_its_days() {
        let now = 1_764_633_600; // 2025-12-02T00:00:00Z
        let window = Recent::days(30, now).expect("a window");
        assert!(window.holds_date("2025-11-20T10:00:00Z"));
        assert!(window.holds_date("2025-12-02T10:00:00.5Z"));
        assert!(!window.holds_date("2025-10-01T10:00:00Z"));
        assert!(!window.holds_date("2026-01-20T10:00:00Z"));
        assert!(!window.holds_date("null"));
        assert!(!window.holds_date("not a date"));
        assert!(!window.holds_date(""));
        assert!(Recent::days(0, now).is_none());
    }
}

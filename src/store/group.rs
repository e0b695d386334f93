//! Group commit for an archive run: the run's chapters, plans and artifacts of one root
//! session are written without an fsync each, then made durable together by one `syncfs`,
//! and only then is the commit recorded: a line in the ledger `<store>/commits.jsonl`
//! naming the root and the highest chapter and plan number that are durable.
//!
//! Why: a fsync per file (data, then directory) cost the archive more than all its other
//! work together — each one waits for the disk to flush its cache. One flush per run is
//! as durable at the commit point.
//!
//! Crash safety. A killed process loses nothing it wrote (the page cache survives it); a
//! power loss may leave files written after the last commit empty, partial or missing.
//! Either way, whoever next takes the writer lock and opens a group or syncs
//! ([`Store::recover_uncommitted`]) removes every chapter and plan numbered past the
//! root's last commit — they were never committed — and the archive writes them again:
//! rendering is deterministic, so after a kill they come back byte for byte. A
//! content-addressed artifact left damaged is recognised by its hash and replaced (see
//! `Store::write_artifact_in`). Before a root's first unsynced write, a commit line for
//! what is already there is appended (synced), so unsynced files never exist without one.
//!
//! A root with no commit line (a store written before group commit, or one no group has
//! written to yet) had every document synced one by one: all of them count as committed.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::atomic::{self, Durability};
use super::{check_id, io_err, ledger, list_dir, parse_doc_name, Series, Store, StoreError};
use crate::redact::{RedactionCounts, Redactor};
use crate::render::{Artifact, Document};

/// The commit ledger, at the store's top (never published to the pool).
pub const COMMITS_JSONL: &str = "commits.jsonl";

/// Format version of commit lines; a newer one is refused.
const COMMIT_VERSION: u64 = 1;

/// The highest chapter and plan numbers of a root that are durable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitMark {
    pub v: u64,
    pub root: String,
    pub chapter: u32,
    pub plan: u32,
}

/// One root session's writes of an archive run; see the module docs.
pub struct Group<'s> {
    store: &'s Store,
    redactor: &'s Redactor,
    root: String,
    /// Whether a commit line exists for this root (else one is written before a write).
    marked: bool,
    /// Whether anything was written since the last commit.
    dirty: bool,
    /// Documents written since the last commit, in order: recorded in the store's catalog at
    /// commit, removed by [`Group::abort`]. One string, not a list of strings or paths: an
    /// archive of thousands of chapters keeps ~40 bytes each.
    created_docs: crate::names::NameList,
    /// Their metadata, in the same order, for the catalog's rows (`None` until the first).
    created_metas: Option<crate::redact::Redacted<super::catalog::MetaList>>,
    /// Artifacts this group created since the last commit, for [`Group::abort`]: their
    /// SHA-256 hex, 64 bytes each, back to back.
    created_artifacts: String,
    made_dirs: super::MadeDirs,
    /// Flushes started while the run goes on, so the commit's `syncfs` finds little left.
    early: EarlyFlush,
    /// The catalog opened (made, in a workspace without one) on a thread while the group
    /// writes, started at its first write: the commit then waits only for its record.
    catalog_ahead: Option<super::catalog::OpenedAhead>,
}

/// Bytes a group writes between two early flushes.
const EARLY_FLUSH_BYTES: u64 = 8 << 20;

/// A `syncfs` started on a thread of its own once a group has written [`EARLY_FLUSH_BYTES`]
/// since the last one: the disk writes the run's first files while the run renders the
/// next, instead of all of them at the commit, where the run would wait for them alone.
/// It only starts writeback early: durability is the commit's own `syncfs`, as before, and
/// an early flush that fails changes nothing (the commit's reports the failure).
struct EarlyFlush {
    /// Bytes between two flushes ([`EARLY_FLUSH_BYTES`]; tests set less).
    every: u64,
    since: u64,
    running: Option<std::thread::JoinHandle<()>>,
    /// Flushes started (for tests and the debug log).
    started: u32,
}

impl Default for EarlyFlush {
    fn default() -> Self {
        EarlyFlush {
            every: EARLY_FLUSH_BYTES,
            since: 0,
            running: None,
            started: 0,
        }
    }
}

impl EarlyFlush {
    /// `bytes` more were written into the store at `dir`.
    fn wrote(&mut self, dir: &Path, bytes: usize) {
        self.since += bytes as u64;
        if self.since < self.every || self.running.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        self.started += 1;
        self.since = 0;
        self.wait();
        let dir = dir.to_path_buf();
        let started = std::thread::Builder::new()
            .name("early-flush".into())
            .spawn(move || {
                if let Err(e) = atomic::sync_filesystem(&dir) {
                    tracing::debug!(error = %e, "an early flush failed; the commit's flush decides");
                }
            });
        self.running = started.ok();
    }

    /// Wait for a flush in flight.
    fn wait(&mut self) {
        if let Some(t) = self.running.take() {
            let _ = t.join();
        }
    }
}

/// A root's document folder as the store's catalog names it (workspace-relative).
fn chapters_folder(root: &str) -> String {
    format!("{}/{root}/{}", super::STORE_DIR, super::CHAPTERS)
}

/// Each root's last commit line.
fn read_marks(store: &Store) -> Result<BTreeMap<String, CommitMark>, StoreError> {
    let path = store.dir().join(COMMITS_JSONL);
    let read = ledger::read(&path, COMMIT_VERSION)?;
    let mut marks = BTreeMap::new();
    for (i, line) in read.lines.into_iter().enumerate() {
        let mark: CommitMark = serde_json::from_value(line).map_err(|e| StoreError::Damaged {
            path: path.clone(),
            detail: format!("line {} is not a commit line ({e})", i + 1),
        })?;
        marks.insert(mark.root.clone(), mark);
    }
    Ok(marks)
}

/// The highest chapter and plan numbers among the documents in `dir`.
fn highest(dir: &Path, root: &str) -> Result<CommitMark, StoreError> {
    let mut mark = CommitMark {
        v: COMMIT_VERSION,
        root: root.to_owned(),
        chapter: 0,
        plan: 0,
    };
    // One name at a time: finding two maxima needs no sorted list of a root's thousands
    // of documents.
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(mark),
        Err(e) => return Err(io_err(dir, e)),
    };
    for entry in entries {
        let name = entry.map_err(|e| io_err(dir, e))?.file_name();
        match parse_doc_name(&name.to_string_lossy()) {
            Some((Series::Chapter, n)) => mark.chapter = mark.chapter.max(n),
            Some((Series::Plan, n)) => mark.plan = mark.plan.max(n),
            None => {}
        }
    }
    Ok(mark)
}

impl Store {
    fn append_commit(&self, mark: &CommitMark, redactor: &Redactor) -> Result<(), StoreError> {
        let value = serde_json::to_value(mark).expect("a commit line always serializes");
        // Ids and numbers only, but every ledger line passes the one chokepoint.
        let line = redactor.redact_json(&value, &mut RedactionCounts::default());
        Ok(ledger::append(
            &self.dir().join(COMMITS_JSONL),
            &line,
            COMMIT_VERSION,
        )?)
    }

    /// Remove every chapter and plan of every root numbered past that root's last commit:
    /// what an interrupted group left. Call with the writer lock held. Returns the removed
    /// documents as `<root>/<file>`.
    pub fn recover_uncommitted(&self) -> Result<Vec<String>, StoreError> {
        let mut removed = Vec::new();
        for (root, mark) in read_marks(self)? {
            if check_id(&root).is_err() {
                continue;
            }
            let dir = self.chapters_dir(&root)?;
            let mut here = 0;
            for (name, file_type) in list_dir(&dir)? {
                let past = match parse_doc_name(&name) {
                    Some((Series::Chapter, n)) => n > mark.chapter,
                    Some((Series::Plan, n)) => n > mark.plan,
                    None => false,
                };
                if past && file_type.is_file() {
                    let path = dir.join(&name);
                    fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
                    removed.push(format!("{root}/{name}"));
                    here += 1;
                }
            }
            if here > 0 {
                atomic::sync_dir(&dir)?;
                let names: Vec<&str> = removed[removed.len() - here..]
                    .iter()
                    .filter_map(|r| r.rsplit('/').next())
                    .collect();
                // The search table looks at what the catalog names: these are gone.
                self.record(
                    &[(&chapters_folder(&root), &names)],
                    super::catalog::Presence::Removed,
                );
                tracing::info!(
                    root = root.as_str(),
                    removed = here,
                    "removed documents an interrupted archive left uncommitted; the archive writes them again"
                );
            }
        }
        Ok(removed)
    }

    /// Open a group of writes for `root_session` (after [`Store::recover_uncommitted`]).
    /// Call with the writer lock held.
    pub fn begin_group<'s>(
        &'s self,
        root_session: &str,
        redactor: &'s Redactor,
    ) -> Result<Group<'s>, StoreError> {
        let root = check_id(root_session)?.to_owned();
        let marked = read_marks(self)?.contains_key(&root);
        Ok(Group {
            store: self,
            redactor,
            root,
            marked,
            dirty: false,
            created_docs: crate::names::NameList::default(),
            created_metas: None,
            created_artifacts: String::new(),
            made_dirs: Default::default(),
            early: EarlyFlush::default(),
            catalog_ahead: None,
        })
    }
}

impl Group<'_> {
    /// Before the first unsynced write of a root without a commit line: record what is
    /// there (all of it synced one by one) as committed.
    fn before_write(&mut self) -> Result<(), StoreError> {
        if !self.marked {
            let dir = self.store.chapters_dir(&self.root)?;
            self.store
                .append_commit(&highest(&dir, &self.root)?, self.redactor)?;
            self.marked = true;
        }
        if !self.dirty && self.catalog_ahead.is_none() {
            self.catalog_ahead = self.store.open_catalog_ahead();
        }
        self.dirty = true;
        Ok(())
    }

    /// [`Store::write_document`], durable at [`Group::commit`].
    pub fn write_document(&mut self, doc: &Document) -> Result<bool, StoreError> {
        self.before_write()?;
        let written = self.store.write_document_in(
            &self.root,
            doc,
            Durability::Group,
            Some(&mut self.made_dirs),
        )?;
        if written {
            self.early
                .wrote(self.store.dir(), doc.text.as_bytes().len());
            // `write_document_in` checked the name: a safe file name, no line break.
            self.created_docs.push(&doc.file_name);
            let meta = doc.text.derive(super::catalog::RowMeta::read);
            match &mut self.created_metas {
                Some(metas) => metas.absorb(&meta, super::catalog::MetaList::push),
                None => self.created_metas = Some(meta.derive(super::catalog::MetaList::of_one)),
            }
        }
        Ok(written)
    }

    /// [`Store::write_artifact`], durable at [`Group::commit`].
    pub fn write_artifact(&mut self, artifact: &Artifact) -> Result<bool, StoreError> {
        self.before_write()?;
        let written = self.store.write_artifact_in(
            &self.root,
            artifact,
            Durability::Group,
            Some(&mut self.made_dirs),
        )?;
        if written {
            self.early
                .wrote(self.store.dir(), artifact.content.as_str().len());
            // `artifact_path` checked it: 64 hex digits.
            self.created_artifacts.push_str(&artifact.sha256);
        }
        Ok(written)
    }

    /// Give up the writes since the last commit: remove every file this group created
    /// (best effort — what stays is past the commit and the next run removes it). For a
    /// run that fails after writing, so that a refused archive leaves the store as it was.
    pub fn abort(&mut self) {
        let docs = self.store.chapters_dir(&self.root);
        let paths = self
            .created_docs
            .iter()
            .filter_map(|name| docs.as_ref().ok().map(|dir| dir.join(name)));
        let shas = self.created_artifacts.as_bytes().chunks(64);
        let artifacts = shas.filter_map(|sha| {
            let sha = std::str::from_utf8(sha).ok()?;
            self.store.artifact_path(&self.root, sha).ok()
        });
        for path in paths.chain(artifacts) {
            if let Err(e) = fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "could not remove an uncommitted file; the next archive removes it");
            }
        }
        self.dirty = false;
        self.created_docs.clear();
        self.created_metas = None;
        self.created_artifacts.clear();
        if let Some(ahead) = self.catalog_ahead.take() {
            self.store.adopt_catalog(ahead);
        }
    }

    /// Make everything written durable (one `syncfs`), then record the commit. A group
    /// that wrote nothing commits nothing.
    pub fn commit(&mut self) -> Result<(), StoreError> {
        if !self.dirty {
            return Ok(());
        }
        let dir = self.store.chapters_dir(&self.root)?;
        self.early.wait();
        // Long done by now; waited for before the flush, so a catalog it made is durable
        // with the documents and nothing of the record's order depends on its timing.
        if let Some(ahead) = self.catalog_ahead.take() {
            self.store.adopt_catalog(ahead);
        }
        atomic::sync_filesystem(self.store.dir())?;
        self.store
            .append_commit(&highest(&dir, &self.root)?, self.redactor)?;
        if let Some(metas) = &self.created_metas {
            let folder = chapters_folder(&self.root);
            self.store.record_listed(&folder, &self.created_docs, metas);
        }
        self.dirty = false;
        self.created_metas = None;
        self.created_docs.clear();
        self.created_artifacts.clear();
        Ok(())
    }
}

impl Drop for Group<'_> {
    /// A group given up without a commit or an abort (an error on the way): the catalog
    /// opened ahead goes to the store's writer, which closes it safely.
    fn drop(&mut self) {
        if let Some(ahead) = self.catalog_ahead.take() {
            self.store.adopt_catalog(ahead);
        }
    }
}

/// Each root's last commit, for tests and diagnostics.
pub fn commit_marks(store: &Store) -> Result<BTreeMap<String, CommitMark>, StoreError> {
    read_marks(store)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::Redactor;

    use crate::store::tests::{store, text};

    fn doc(name: &str, kind: &str, lo: u64, hi: u64) -> Document {
        crate::store::tests::doc_of("r", name, kind, lo, hi)
    }

    fn mark(store: &Store, root: &str) -> Option<(u32, u32)> {
        commit_marks(store)
            .unwrap()
            .get(root)
            .map(|m| (m.chapter, m.plan))
    }

    #[test]
    fn a_first_write_marks_what_is_there_and_commit_marks_the_rest() {
        let (_d, store) = store();
        let r = Redactor::new(&[]).unwrap();
        store
            .write_document("r", &doc("001-a.md", "chapter", 1, 2))
            .unwrap();
        store
            .write_document("r", &doc("plan-001-p.md", "plan", 1, 1))
            .unwrap();
        let mut g = store.begin_group("r", &r).unwrap();
        g.commit().unwrap();
        assert_eq!(
            mark(&store, "r"),
            None,
            "a group that wrote nothing commits nothing"
        );
        g.write_document(&doc("002-b.md", "chapter", 3, 4)).unwrap();
        assert_eq!(
            mark(&store, "r"),
            Some((1, 1)),
            "documents written one by one (synced) count as committed before the first group write"
        );
        g.write_document(&doc("plan-002-q.md", "plan", 3, 3))
            .unwrap();
        g.commit().unwrap();
        assert_eq!(mark(&store, "r"), Some((2, 2)));
        let ledger = fs::read_to_string(store.dir().join(COMMITS_JSONL)).unwrap();
        assert_eq!(ledger.lines().count(), 2, "{ledger}");
    }

    #[test]
    fn early_flushes_start_while_the_group_writes_and_the_commit_waits_for_them() {
        let (_d, early) = store();
        let r = Redactor::new(&[]).unwrap();
        let mut g = early.begin_group("r", &r).unwrap();
        g.early.every = 1;
        for n in 1..=5u64 {
            g.write_document(&doc(&format!("{n:03}-x.md"), "chapter", n, n))
                .unwrap();
        }
        assert!(g.early.started >= 1, "a flush started while writing");
        g.commit().unwrap();
        assert!(g.early.running.is_none(), "the commit waited for it");
        assert_eq!(mark(&early, "r"), Some((5, 0)));
        // The same documents with no early flush: the same store.
        let (_d2, plain) = store();
        let mut g = plain.begin_group("r", &r).unwrap();
        g.early.every = u64::MAX;
        for n in 1..=5u64 {
            g.write_document(&doc(&format!("{n:03}-x.md"), "chapter", n, n))
                .unwrap();
        }
        assert_eq!(g.early.started, 0);
        g.commit().unwrap();
        for n in 1..=5u64 {
            let name = format!("r/chapters/{n:03}-x.md");
            assert_eq!(
                fs::read(early.dir().join(&name)).unwrap(),
                fs::read(plain.dir().join(&name)).unwrap()
            );
        }
    }

    #[test]
    fn an_interrupted_group_is_removed_and_written_again() {
        let (_d, store) = store();
        let r = Redactor::new(&[]).unwrap();
        let mut g = store.begin_group("r", &r).unwrap();
        g.write_document(&doc("001-a.md", "chapter", 1, 2)).unwrap();
        g.commit().unwrap();
        g.write_document(&doc("002-b.md", "chapter", 3, 4)).unwrap();
        g.write_document(&doc("plan-001-p.md", "plan", 3, 3))
            .unwrap();
        drop(g); // killed before commit
        let dir = store.chapters_dir("r").unwrap();
        // A power loss may also leave a torn file past the mark.
        fs::write(dir.join("003-c.md"), b"---\nkind: chap").unwrap();
        // Another root, never grouped: nothing of it is touched.
        store
            .write_document("other", &doc("007-x.md", "chapter", 1, 2))
            .unwrap();
        let removed = store.recover_uncommitted().unwrap();
        assert_eq!(removed, vec!["r/002-b.md", "r/003-c.md", "r/plan-001-p.md"]);
        assert!(dir.join("001-a.md").exists(), "committed documents stay");
        assert_eq!(
            store.archived("r").unwrap().len(),
            1,
            "the store reads whole"
        );
        assert_eq!(store.archived("other").unwrap().len(), 1);
        let mut g = store.begin_group("r", &r).unwrap();
        assert!(g.write_document(&doc("002-b.md", "chapter", 3, 4)).unwrap());
        g.commit().unwrap();
        assert!(
            store.recover_uncommitted().unwrap().is_empty(),
            "a committed group is never removed"
        );
    }

    #[test]
    fn a_damaged_commit_ledger_is_refused_by_name() {
        let (_d, store) = store();
        let r = Redactor::new(&[]).unwrap();
        let path = store.dir().join(COMMITS_JSONL);
        for bad in [
            &b"{\"v\":1,\"root\":\"r\",\"chapter\":1,\"plan\":0}\n{garbage\n{\"v\":1}\n"[..],
            b"{\"v\":1,\"root\":\"r\"}\n",
            b"{\"v\":9,\"root\":\"r\",\"chapter\":1,\"plan\":0}\n",
        ] {
            fs::write(&path, bad).unwrap();
            let Err(err) = store.recover_uncommitted() else {
                panic!("{bad:?} was accepted");
            };
            assert!(err.to_string().contains(COMMITS_JSONL), "{err}");
            assert!(store.begin_group("r", &r).is_err());
        }
        // A torn last line (a killed append) is skipped: the commit before it holds.
        fs::write(
            &path,
            b"{\"v\":1,\"root\":\"r\",\"chapter\":1,\"plan\":0}\n{\"v\":1,\"ro",
        )
        .unwrap();
        assert!(store.recover_uncommitted().unwrap().is_empty());
        assert_eq!(mark(&store, "r"), Some((1, 0)));
    }

    #[test]
    fn an_aborted_group_removes_what_it_created_since_its_commit_and_names_it_nowhere() {
        let (_d, store) = store();
        let r = Redactor::new(&[]).unwrap();
        let artifact = |content: &str| Artifact {
            sha256: crate::names::sha256_hex(content.as_bytes()),
            content: text(content),
        };
        let (kept, dropped) = (artifact("kept\n"), artifact("dropped\n"));
        let mut g = store.begin_group("r", &r).unwrap();
        g.write_document(&doc("001-a.md", "chapter", 1, 2)).unwrap();
        g.write_artifact(&kept).unwrap();
        g.commit().unwrap();
        use super::super::catalog;
        let recorded = catalog::current(store.dir()).expect("a catalog");
        let from_start = catalog::Cursor {
            revision: 0,
            ..recorded.clone()
        };
        let catalog::Since::Changes { changes, .. } =
            catalog::read_since(store.dir(), Some(&from_start))
        else {
            panic!("changes");
        };
        assert_eq!(changes[0].files, ["001-a.md"]);
        g.write_document(&doc("plan-001-p.md", "plan", 3, 3))
            .unwrap();
        g.write_document(&doc("002-b.md", "chapter", 3, 4)).unwrap();
        g.write_artifact(&dropped).unwrap();
        g.abort();
        let dir = store.chapters_dir("r").unwrap();
        assert!(dir.join("001-a.md").exists(), "committed documents stay");
        assert!(store.artifact_path("r", &kept.sha256).unwrap().exists());
        assert!(!dir.join("plan-001-p.md").exists());
        assert!(!dir.join("002-b.md").exists());
        assert!(!store.artifact_path("r", &dropped.sha256).unwrap().exists());
        g.commit().unwrap();
        assert_eq!(
            catalog::current(store.dir()),
            Some(recorded),
            "an aborted write is never recorded"
        );
        assert_eq!(mark(&store, "r"), Some((1, 0)));
    }

    #[test]
    fn a_groups_first_write_opens_the_catalog_ahead_and_only_its_commit_records() {
        use super::super::catalog;
        let (_d, store) = store();
        let r = Redactor::new(&[]).unwrap();
        let mut g = store.begin_group("r", &r).unwrap();
        g.commit().unwrap();
        assert!(
            g.catalog_ahead.is_none(),
            "a group that wrote nothing opens none"
        );
        assert_eq!(catalog::current(store.dir()), None);
        g.write_document(&doc("001-a.md", "chapter", 1, 2)).unwrap();
        // Waited for here, as the commit waits for it.
        let ahead = g.catalog_ahead.take().expect("opened at the first write");
        store.adopt_catalog(ahead);
        let made = catalog::current(store.dir()).expect("the catalog made ahead");
        assert_eq!(made.revision, 0, "nothing recorded before the commit");
        g.write_document(&doc("002-b.md", "chapter", 3, 4)).unwrap();
        assert!(g.catalog_ahead.is_none(), "opened once");
        g.commit().unwrap();
        let recorded = catalog::current(store.dir()).expect("a catalog");
        assert_eq!(
            (recorded.generation.as_str(), recorded.revision),
            (made.generation.as_str(), 1),
            "the commit recorded into the catalog opened ahead"
        );
        let from_start = catalog::Cursor {
            revision: 0,
            ..recorded
        };
        let catalog::Since::Changes { changes, .. } =
            catalog::read_since(store.dir(), Some(&from_start))
        else {
            panic!("changes");
        };
        assert_eq!(changes[0].files, ["001-a.md", "002-b.md"]);
        // A later group of the same store records through the kept connection.
        let mut g = store.begin_group("r", &r).unwrap();
        g.write_document(&doc("003-c.md", "chapter", 5, 6)).unwrap();
        assert!(
            g.catalog_ahead.is_none(),
            "a kept connection is not opened again"
        );
    }

    #[test]
    fn a_damaged_artifact_is_replaced_not_refused() {
        let (_d, store) = store();
        let r = Redactor::new(&[]).unwrap();
        let content = "tool output\n";
        let artifact = Artifact {
            sha256: crate::names::sha256_hex(content.as_bytes()),
            content: text(content),
        };
        let mut g = store.begin_group("r", &r).unwrap();
        assert!(g.write_artifact(&artifact).unwrap());
        let path = store.artifact_path("r", &artifact.sha256).unwrap();
        fs::write(&path, b"").unwrap(); // what a power loss may leave
        assert!(g.write_artifact(&artifact).unwrap(), "repaired");
        assert_eq!(fs::read_to_string(&path).unwrap(), "tool output\n");
        assert!(!g.write_artifact(&artifact).unwrap(), "then idempotent");
    }
}

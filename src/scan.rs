//! `chapters scan` (issue #13.8): find old leaks with today's redaction rules. Shell.
//!
//! Every file of the store and the mirror — and, with `--pool`, every blob of the pool's whole
//! history (`git rev-list --objects --all`, each blob once) — is run through the redactor's
//! finder ([`Redactor::locate`]), so a rule added today finds what yesterday's archive let
//! through. A finding is a location (file or pool path, line numbers, blob and commit), a rule
//! name and a count: **never a value**. Each says which `chapters forget` id would remove it
//! (or which machine must forget it, or that only a rewrite of the history can).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::git::{GitError, GitRepo, ObjectId};
use crate::redact::Redactor;
use crate::store::forget::harness_of;
use crate::store::{Store, StoreError, MIRROR_DIR, STORE_DIR};

/// At most this many line numbers are listed per finding (the count is exact).
const MAX_LINES: usize = 20;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One rule's hits in one file or blob.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The file, relative to the workspace (`.dsh-chapters/…`, `.dsh-knowledge/…`), or the
    /// pool path the blob was first met at.
    pub location: String,
    pub rule: String,
    pub count: u64,
    /// 1-based line numbers (at most 20 listed).
    pub lines: Vec<u64>,
    /// The `chapters forget` id that removes it from this machine's store and the pool's tip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forget_id: Option<String>,
    /// The machine that wrote it, when not this one: only it may forget it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
    /// What removes it when no forget id does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// Pool findings: the blob, the first commit it was met at, and whether the tip holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_tip: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scanned {
    /// Files (or blobs) read.
    pub scanned: u64,
    pub bytes: u64,
    pub findings: Vec<Finding>,
    /// Findings per rule.
    pub by_rule: BTreeMap<String, u64>,
}

impl Scanned {
    fn push(&mut self, finding: Finding) {
        *self.by_rule.entry(finding.rule.clone()).or_default() += finding.count;
        self.findings.push(finding);
    }

    pub fn total(&self) -> u64 {
        self.by_rule.values().sum()
    }
}

/// Per rule: (count, first line numbers), in the rule's name order.
pub fn scan_text(redactor: &Redactor, text: &str) -> BTreeMap<String, (u64, Vec<u64>)> {
    let mut out: BTreeMap<String, (u64, Vec<u64>)> = BTreeMap::new();
    let (mut line, mut at) = (1u64, 0usize);
    for (offset, rule) in redactor.locate(text) {
        line += memchr::memchr_iter(b'\n', &text.as_bytes()[at..offset]).count() as u64;
        at = offset;
        let entry = out.entry(rule.to_owned()).or_default();
        entry.0 += 1;
        if entry.1.len() < MAX_LINES && entry.1.last() != Some(&line) {
            entry.1.push(line);
        }
    }
    out
}

/// Scan this machine's store and its mirror's files.
pub fn scan_store(
    store: &Store,
    workspace: &Path,
    project_key: &str,
    harness: &str,
    redactor: &Redactor,
) -> Result<Scanned, ScanError> {
    let mut out = Scanned::default();
    let ids = ForgetIds::read(store)?;
    for (base, top) in [
        (store.dir().to_path_buf(), STORE_DIR),
        (workspace.join(MIRROR_DIR), MIRROR_DIR),
    ] {
        let mut files = Vec::new();
        walk(&base, "", &mut files);
        files.sort();
        for rel in files {
            let path = base.join(&rel);
            let Ok(bytes) = fs::read(&path) else {
                continue;
            };
            out.scanned += 1;
            out.bytes += bytes.len() as u64;
            let text = String::from_utf8_lossy(&bytes);
            for (rule, (count, lines)) in scan_text(redactor, &text) {
                let (forget_id, writer, remedy) = if top == STORE_DIR {
                    ids.for_store_file(&rel, &text, &lines)
                } else {
                    ids.for_pool_path(project_key, harness, &rel, &text)
                };
                out.push(Finding {
                    location: shown(redactor, &format!("{top}/{rel}")),
                    rule,
                    count,
                    lines,
                    forget_id,
                    writer,
                    remedy,
                    blob: None,
                    commit: None,
                    at_tip: None,
                });
            }
        }
    }
    Ok(out)
}

/// Scan every blob reachable in `repo` (each once), marking those the tip at `head` holds.
pub fn scan_pool(
    repo: &GitRepo,
    head: Option<ObjectId>,
    store: &Store,
    project_key: &str,
    harness: &str,
    redactor: &Redactor,
) -> Result<Scanned, ScanError> {
    let ids = ForgetIds::read(store)?;
    let at_tip: HashSet<ObjectId> = match head {
        Some(h) => repo
            .list_tree(repo.commit_tree(h)?)?
            .into_iter()
            .map(|(_, b)| b)
            .collect(),
        None => HashSet::new(),
    };
    let mut out = Scanned::default();
    for blob in repo.reachable_blobs()? {
        let bytes = repo.read_blob(blob.id)?;
        out.scanned += 1;
        out.bytes += bytes.len() as u64;
        let text = String::from_utf8_lossy(&bytes);
        let found = scan_text(redactor, &text);
        if found.is_empty() {
            continue;
        }
        let tip = at_tip.contains(&blob.id);
        for (rule, (count, lines)) in found {
            let (forget_id, writer, mut remedy) =
                ids.for_pool_path(project_key, harness, &blob.path, &text);
            if !tip {
                remedy =
                    Some("only in the pool's history: rewrite it (docs/purging.md)".to_owned());
            }
            out.push(Finding {
                location: shown(redactor, &blob.path),
                rule,
                count,
                lines,
                forget_id: forget_id.filter(|_| tip),
                writer,
                remedy,
                blob: Some(blob.id.to_string()),
                commit: Some(blob.commit.to_string()),
                at_tip: Some(tip),
            });
        }
    }
    out.findings
        .sort_by(|a, b| (&a.location, &a.rule).cmp(&(&b.location, &b.rule)));
    Ok(out)
}

/// A location as a person may read it: a file named by what yesterday's rules let through
/// (a topic's shard `index/<the value>.md`) is shown with today's rules applied to its name,
/// as everything `scan` prints — never a value.
fn shown(redactor: &Redactor, location: &str) -> String {
    redactor
        .redact(location, &mut crate::redact::RedactionCounts::default())
        .into_inner()
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // The git objects of the mirror are scanned by `--pool`; the search table's
        // segments are binary postings rebuilt from the documents; locks hold pids.
        if name == ".git" || name == crate::catalog::table::TABLE_DIR || name.starts_with(".writer")
        {
            continue;
        }
        let path = entry.path();
        let rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        match entry.file_type() {
            Ok(t) if t.is_dir() => walk(&path, &rel, out),
            Ok(t) if t.is_file() => out.push(rel),
            _ => {}
        }
    }
}

/// One document of a root, as forget ids name it: (series is plan, number, seq_lo, seq_hi,
/// session).
type DocEntry = (bool, u32, u64, u64, String);

/// What this store knows to name forget ids: each root's documents (number, seq range)
/// and artifacts, and the session ids of its ledgers.
struct ForgetIds {
    /// root → its documents
    docs: BTreeMap<String, Vec<DocEntry>>,
    /// session id → root
    sessions: BTreeMap<String, String>,
    /// artifact sha → root
    artifacts: BTreeMap<String, String>,
}

const DERIVED: &str =
    "derived: rebuilt from the documents once the source is forgotten (`chapters index rebuild`)";

impl ForgetIds {
    fn read(store: &Store) -> Result<ForgetIds, ScanError> {
        let mut ids = ForgetIds {
            docs: BTreeMap::new(),
            sessions: BTreeMap::new(),
            artifacts: BTreeMap::new(),
        };
        for root in store.roots()? {
            let docs = store
                .archived(&root)?
                .into_iter()
                .map(|d| (d.kind == "plan", d.number, d.seq_lo, d.seq_hi, d.session_id))
                .collect();
            ids.docs.insert(root.clone(), docs);
            let dir = store.root_dir(&root)?;
            for entry in fs::read_dir(dir.join("collections"))
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(s) = name.strip_suffix(".jsonl") {
                    ids.sessions.insert(s.to_owned(), root.clone());
                }
            }
            let mut files = Vec::new();
            walk(&dir.join("artifacts"), "", &mut files);
            for f in files {
                if let Some(sha) = f.rsplit('/').next().and_then(|n| n.strip_suffix(".txt")) {
                    ids.artifacts.insert(sha.to_owned(), root.clone());
                }
            }
        }
        Ok(ids)
    }

    fn doc_id(&self, root: &str, name: &str) -> Option<String> {
        let stem = name.strip_suffix(".md")?;
        let (plan, rest) = match stem.strip_prefix("plan-") {
            Some(rest) => (true, rest),
            None => (false, stem),
        };
        let number: u32 = rest.split('-').next()?.parse().ok()?;
        self.docs
            .get(root)?
            .iter()
            .any(|d| d.0 == plan && d.1 == number)
            .then(|| {
                if plan {
                    format!("{root}/plan-{number:03}")
                } else {
                    format!("{root}/{number:03}")
                }
            })
    }

    /// The chapter whose span holds the signature line at `line` of a collection ledger.
    fn signature_ids(&self, root: &str, text: &str, lines: &[u64]) -> Option<String> {
        let mut out: Vec<String> = Vec::new();
        for &n in lines {
            let line = text.lines().nth(usize::try_from(n).ok()?.checked_sub(1)?)?;
            let value: serde_json::Value = serde_json::from_str(line).ok()?;
            let session = value["sessionId"].as_str()?;
            let hi = value["seqs"].as_array()?.last()?.as_u64()?;
            let chapter = self
                .docs
                .get(root)?
                .iter()
                .find(|d| !d.0 && d.4 == session && d.2 <= hi && hi <= d.3);
            if let Some(d) = chapter {
                let id = format!("{root}/{:03}", d.1);
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        (!out.is_empty()).then(|| out.join(" "))
    }

    /// (forget id, writer, remedy) for a file of the store, by its path relative to it.
    fn for_store_file(
        &self,
        rel: &str,
        text: &str,
        lines: &[u64],
    ) -> (Option<String>, Option<String>, Option<String>) {
        let parts: Vec<&str> = rel.split('/').collect();
        match parts.as_slice() {
            [root, "chapters", name] => (self.doc_id(root, name), None, None),
            [root, "artifacts", _, name] => (
                name.strip_suffix(".txt")
                    .map(|sha| format!("{root}/artifact-{}", &sha[..12.min(sha.len())])),
                None,
                None,
            ),
            [root, "collections", _] => (
                self.signature_ids(root, text, lines)
                    .or_else(|| Some((*root).to_owned())),
                None,
                None,
            ),
            ["rules", name] if name.starts_with("s-") => (
                None,
                None,
                Some("a session rule: forgetting its session removes it".into()),
            ),
            _ => (None, None, Some(DERIVED.into())),
        }
    }

    /// (forget id, writer, remedy) for a pool path (or a mirror file, which has the same
    /// path), given the blob's text.
    fn for_pool_path(
        &self,
        project_key: &str,
        harness: &str,
        path: &str,
        text: &str,
    ) -> (Option<String>, Option<String>, Option<String>) {
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["chapters", pk, root, name] if *pk == project_key => {
                match harness_of(text).filter(|w| w != harness) {
                    Some(writer) => (
                        None,
                        Some(writer.clone()),
                        Some(format!("written by {writer}: forget it there")),
                    ),
                    None => (
                        self.doc_id(root, name),
                        None,
                        self.doc_id(root, name)
                            .is_none()
                            .then(|| "no longer in this store (already forgotten?)".into()),
                    ),
                }
            }
            ["artifacts", pk, _, name] if *pk == project_key => {
                let sha = name.strip_suffix(".txt").unwrap_or_default();
                match self.artifacts.get(sha) {
                    Some(root) => (
                        Some(format!("{root}/artifact-{}", &sha[..12.min(sha.len())])),
                        None,
                        None,
                    ),
                    None => (
                        None,
                        None,
                        Some("another machine's artifact, or one already forgotten here".into()),
                    ),
                }
            }
            ["collections", pk, name] if *pk == project_key => {
                let session = name.strip_suffix(".jsonl").unwrap_or_default();
                match self.sessions.get(session) {
                    Some(root) => (Some(root.clone()), None, None),
                    None => (
                        None,
                        None,
                        Some("another machine's signatures: forget the session there".into()),
                    ),
                }
            }
            ["edits", writer, _] | ["forget", writer, _] if *writer != harness => (
                None,
                Some((*writer).to_owned()),
                Some(format!("a ledger of {writer}")),
            ),
            _ => (None, None, Some(DERIVED.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::ExtraPattern;

    #[test]
    fn lines_and_counts_never_values() {
        let redactor = Redactor::new(&[ExtraPattern {
            name: "zq".into(),
            keywords: vec!["zqleak_".into()],
            regex: "zqleak_[a-z0-9]{8,}".into(),
        }])
        .unwrap();
        let text = "a\nzqleak_12345678 and zqleak_abcdefgh\nb\nc zqleak_99999999\n";
        let found = scan_text(&redactor, text);
        assert_eq!(found.get("zq"), Some(&(3, vec![2, 4])));
        let json = serde_json::to_string(&found).unwrap();
        assert!(!json.contains("zqleak_"), "{json}");
        assert!(scan_text(&redactor, "nothing here\n").is_empty());
    }
}

//! The shell of Layer 1: where curation files live, reading every machine's, and appending
//! this machine's — always through `store::ledger`, so the register rules hold (a version on
//! every line, a torn tail skipped with a note, a corrupt middle line refused by name, a
//! duplicate line read once).
//!
//! This machine's facts live in its store, `<store>/edits/<harnessId>/curation.jsonl`
//! (the store is truth; sync publishes the file to the same path in the pool). Other
//! machines' facts are read from the pool mirror, `<mirror>/edits/<harnessId>/…`.

use std::path::{Path, PathBuf};

use super::{Fact, FactError, SourcedFact, CURATION_VERSION};
use crate::redact::{Redacted, RedactionCounts, Redactor};
use crate::store::{self, ledger, Store};

pub const EDITS_DIR: &str = "edits";
pub const CURATION_FILE: &str = "curation.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum CurationFileError {
    #[error("harness id {harness:?} cannot name a curation file (it must be a safe directory name); set `harnessId` in the config")]
    BadHarness { harness: String },
    #[error("refusing to write an invalid curation fact to {file}: {source}")]
    Invalid {
        file: PathBuf,
        #[source]
        source: FactError,
    },
    #[error("cannot list curation files in {dir}: {source}")]
    List {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
}

/// Every machine's facts, and what reading them noticed.
#[derive(Debug, Default)]
pub struct CurationRead {
    pub facts: Vec<SourcedFact>,
    /// Torn tails skipped and lines this version cannot honour, each named by file.
    pub notes: Vec<String>,
    /// The files read, sorted: this machine's store file first when it exists.
    pub files: Vec<PathBuf>,
}

/// `<store>/edits/<harness>/curation.jsonl`.
pub fn store_path(store_dir: &Path, harness: &str) -> Result<PathBuf, CurationFileError> {
    // A harness named like a session tree's folder could be mistaken for one.
    if !store::is_safe_component(harness)
        || ["chapters", "collections", "artifacts"].contains(&harness)
    {
        return Err(CurationFileError::BadHarness {
            harness: harness.to_owned(),
        });
    }
    Ok(store_dir.join(EDITS_DIR).join(harness).join(CURATION_FILE))
}

/// Append one fact to this machine's file. The caller holds the store's writer lock (one
/// writer per file, ever). User-given text (a reason, a note) passes the redactor like every
/// byte bound for the store.
pub fn append(
    store: &Store,
    harness: &str,
    fact: &Redacted<Fact>,
) -> Result<(), CurationFileError> {
    let path = store_path(store.dir(), harness)?;
    fact.validate()
        .map_err(|source| CurationFileError::Invalid {
            file: path.clone(),
            source,
        })?;
    let line = fact.derive(|fact| {
        serde_json::to_value(fact)
            .expect("a fact is strings, finite numbers and enums: always serializable")
    });
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| CurationFileError::List {
            dir: dir.to_path_buf(),
            source,
        })?;
    }
    ledger::append(&path, &line, CURATION_VERSION)?;
    Ok(())
}

/// A fact a person or the program states, as a curation file may hold it: every string in
/// it (topics, names, reasons) through the rules. A fact derived from the store's documents
/// (a vocabulary candidate's) is derived from their `Redacted` values instead.
pub fn redacted(fact: &Fact, redactor: &Redactor) -> Redacted<Fact> {
    let value = serde_json::to_value(fact)
        .expect("a fact is strings, finite numbers and enums: always serializable");
    redactor
        .redact_json(&value, &mut RedactionCounts::default())
        .derive(|value| {
            serde_json::from_value(value.clone())
                .expect("redaction rewrites strings only, so the fact reads back")
        })
}

/// Read this machine's facts from the store and every other machine's from the mirror
/// (a machine's own file in the mirror is a published copy of its store file and is
/// skipped). A corrupt middle line in any file refuses the whole read, naming the file:
/// a derived index built without it would silently differ between machines.
pub fn read_all(
    store_dir: &Path,
    mirror_dir: Option<&Path>,
) -> Result<CurationRead, CurationFileError> {
    let mut out = CurationRead::default();
    let mut seen = std::collections::BTreeSet::new();
    for base in std::iter::once(store_dir).chain(mirror_dir) {
        let edits = base.join(EDITS_DIR);
        for harness in harness_dirs(&edits)? {
            if !seen.insert(harness.clone()) {
                continue;
            }
            let path = edits.join(&harness).join(CURATION_FILE);
            // Another machine's file may be the original TypeScript plugin's, whose lines
            // carry no `v` (read as version 0, in its own shape); this machine's own file
            // is held to the register's rules.
            let read = if base == store_dir {
                ledger::read(&path, CURATION_VERSION)?
            } else {
                ledger::read_with_unversioned(&path, CURATION_VERSION)?
            };
            if !read.exists {
                continue;
            }
            if let Some(torn) = read.torn_tail {
                out.notes.push(format!(
                    "{}: a torn last line was skipped ({torn})",
                    path.display()
                ));
            }
            for (index, value) in read.lines.into_iter().enumerate() {
                let line = index as u64 + 1;
                let fact = if value.get("v").is_none() {
                    Fact::from_plugin_line(&value)
                } else {
                    serde_json::from_value::<Fact>(value).map_err(|e| e.to_string())
                };
                match fact {
                    Ok(fact) => out.facts.push(SourcedFact {
                        harness: harness.clone(),
                        line,
                        fact,
                    }),
                    Err(e) => out.notes.push(format!(
                        "{} fact {line}: not a fact this version reads ({e}); left as it is",
                        path.display()
                    )),
                }
            }
            out.files.push(path);
        }
    }
    Ok(out)
}

fn harness_dirs(edits: &Path) -> Result<Vec<String>, CurationFileError> {
    let entries = match std::fs::read_dir(edits) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(CurationFileError::List {
                dir: edits.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| CurationFileError::List {
            dir: edits.to_path_buf(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() && store::is_safe_component(&name) {
            out.push(name);
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curation::{Author, Curation, FactKind};

    fn redactor() -> Redactor {
        Redactor::new(&[]).unwrap()
    }

    fn alias(from: &str, to: &str, at: &str) -> Fact {
        let mut fact = Fact::new(
            FactKind::TopicAlias {
                from: from.into(),
                to: to.into(),
            },
            Author::User,
            at,
        );
        fact.reason = Some("asked by hand".into());
        fact
    }

    #[test]
    fn appends_reads_back_and_merges_the_mirror() {
        let ws = tempfile::tempdir().unwrap();
        let store = Store::init(ws.path()).unwrap();
        append(
            &store,
            "m1",
            &redacted(&alias("auth", "authentication", "1"), &redactor()),
        )
        .unwrap();
        append(
            &store,
            "m1",
            &redacted(&alias("jwt", "tokens", "2"), &redactor()),
        )
        .unwrap();
        let mirror = ws.path().join(".dsh-knowledge");
        let other = mirror.join("edits").join("m2");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(
            other.join(CURATION_FILE),
            format!(
                "{}\n",
                serde_json::to_string(&alias("tokens", "credentials", "3")).unwrap()
            ),
        )
        .unwrap();
        // The mirror's copy of this machine's own file is stale and ignored.
        std::fs::create_dir_all(mirror.join("edits").join("m1")).unwrap();
        std::fs::write(mirror.join("edits/m1").join(CURATION_FILE), "").unwrap();

        let read = read_all(store.dir(), Some(&mirror)).unwrap();
        assert_eq!(read.facts.len(), 3);
        assert_eq!(read.files.len(), 2);
        let curation = Curation::fold(read.facts);
        assert_eq!(curation.canonical("jwt").topic, "credentials");
        assert_eq!(curation.canonical("auth").topic, "authentication");
    }

    #[test]
    fn invalid_facts_and_bad_harness_ids_are_refused_before_writing() {
        let ws = tempfile::tempdir().unwrap();
        let store = Store::init(ws.path()).unwrap();
        let err = append(&store, "m1", &redacted(&alias("a", "a", "1"), &redactor())).unwrap_err();
        assert!(err.to_string().contains("to itself"), "{err}");
        assert!(!store_path(store.dir(), "m1").unwrap().exists());
        assert!(append(
            &store,
            "../x",
            &redacted(&alias("a", "b", "1"), &redactor())
        )
        .is_err());
    }

    #[test]
    fn secrets_in_a_reason_are_redacted() {
        let ws = tempfile::tempdir().unwrap();
        let store = Store::init(ws.path()).unwrap();
        let mut fact = alias("a", "b", "1");
        fact.reason = Some("token ghp_abcdefghijklmnopqrstuvwxyz0123456789".into());
        append(&store, "m1", &redacted(&fact, &redactor())).unwrap();
        let text = std::fs::read_to_string(store_path(store.dir(), "m1").unwrap()).unwrap();
        assert!(!text.contains("ghp_abc"), "{text}");
        assert!(text.contains("⟦redacted:credential sha256="));
    }

    #[test]
    fn torn_tails_are_noted_corrupt_middles_refused_and_unknown_types_kept_aside() {
        let ws = tempfile::tempdir().unwrap();
        let store = Store::init(ws.path()).unwrap();
        let path = store_path(store.dir(), "m1").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let good = serde_json::to_string(&alias("a", "b", "1")).unwrap();
        let newer = r#"{"v":1,"type":"topic-split","author":"user","at":"2"}"#;
        std::fs::write(
            &path,
            format!("{good}\n{newer}\n{good}\n{{\"v\":1,\"type\""),
        )
        .unwrap();
        let read = read_all(store.dir(), None).unwrap();
        assert_eq!(read.facts.len(), 1, "the duplicate line is read once");
        assert_eq!(read.notes.len(), 2, "{:?}", read.notes);
        assert!(read.notes.iter().any(|n| n.contains("torn")));
        assert!(read
            .notes
            .iter()
            .any(|n| n.contains("not a fact this version reads")));
        // Appending cuts the torn tail first and keeps every whole line.
        append(&store, "m1", &redacted(&alias("c", "d", "3"), &redactor())).unwrap();
        assert_eq!(read_all(store.dir(), None).unwrap().facts.len(), 2);

        std::fs::write(&path, format!("{good}\nnot json\n{good}\n")).unwrap();
        let err = read_all(store.dir(), None).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = append(&store, "m1", &redacted(&alias("e", "f", "4"), &redactor())).unwrap_err();
        assert!(err.to_string().contains("corrupt"), "{err}");
    }
}

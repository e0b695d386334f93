//! What the store has that the pool lacks (pure). The store → pool mapping, the
//! per-machine namespace rule and the public-pool refusal all live here, at the one
//! mapping point, so no other code decides what may be published.

use serde::{Deserialize, Serialize};

/// The pool's names the render writes into chapters and the plan compares by (in the leaf
/// `names`, so the render does not reach the pool).
pub use crate::names::{artifact_link_from_chapter, blob_id, link_segment};

/// The pool's declared regime (contract: `--visibility`, mandatory, no default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Private,
    Public,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Private => "private",
            Visibility::Public => "public",
        }
    }
}

/// What a published file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    Chapter,
    Plan,
    Artifact,
    Collection,
    /// `edits/<harnessId>/curation.jsonl`: a machine's curation facts (Layer 1).
    Curation,
    /// `rules/<projectKey>/r-<hex>.md`: a project rule (write-once, content-derived name).
    Rule,
    /// `forget/<harnessId>/forget.jsonl`: a machine's forget acts (ids, person, reason, time;
    /// never the removed text), an append-only ledger.
    Forget,
    /// `project.yml`, `.gitattributes`: derived, rebuilt when they diverge, never merged.
    Derived,
}

impl FileKind {
    /// Verbatim conversation, or anything derived from its text: never published to a
    /// pool declared public.
    pub fn from_conversation(self) -> bool {
        !matches!(self, FileKind::Derived)
    }

    /// Ledgers grow only by appending; every other file is write-once.
    pub fn is_ledger(self) -> bool {
        matches!(
            self,
            FileKind::Collection | FileKind::Curation | FileKind::Forget
        )
    }
}

/// `<root>/chapters/X.md → chapters/<pk>/<root>/X.md`,
/// `<root>/artifacts/ab/<sha>.txt → artifacts/<pk>/ab/<sha>.txt`,
/// `<root>/collections/<session>.jsonl → collections/<pk>/<session>.jsonl`,
/// `rules/r-<hex>.md → rules/<pk>/r-<hex>.md` (project rules; session rules never).
/// `None` for store files that are not published (state, config, locks, temp files).
pub fn pool_path(project_key: &str, store_rel: &str) -> Option<(String, FileKind)> {
    let parts: Vec<&str> = store_rel.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || p.starts_with('.') || *p == "..")
    {
        return None;
    }
    match parts.as_slice() {
        // Checked first: a curation file is never read as a session tree's ledger.
        ["edits", harness, "curation.jsonl"] => Some((
            format!("edits/{harness}/curation.jsonl"),
            FileKind::Curation,
        )),
        ["forget", harness, "forget.jsonl"] => {
            Some((format!("forget/{harness}/forget.jsonl"), FileKind::Forget))
        }
        // Session rules (`s-…`) are never staged: they govern one session tree on this
        // machine (record §7.5), and this is the one place that decides so.
        ["rules", file]
            if file.starts_with(crate::rules::PROJECT_PREFIX)
                && file
                    .strip_suffix(".md")
                    .is_some_and(crate::rules::is_rule_id) =>
        {
            Some((format!("rules/{project_key}/{file}"), FileKind::Rule))
        }
        [root, "chapters", file] if file.ends_with(".md") => {
            let kind = if file.starts_with("plan-") {
                FileKind::Plan
            } else {
                FileKind::Chapter
            };
            Some((format!("chapters/{project_key}/{root}/{file}"), kind))
        }
        [_root, "artifacts", prefix, file] if file.ends_with(".txt") && prefix.len() == 2 => {
            Some((
                format!("artifacts/{project_key}/{prefix}/{file}"),
                FileKind::Artifact,
            ))
        }
        [_root, "collections", file] if file.ends_with(".jsonl") => Some((
            format!("collections/{project_key}/{file}"),
            FileKind::Collection,
        )),
        _ => None,
    }
}

/// What to do with one store file, given the pool's version of its path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// The pool lacks it: copy it in.
    Add,
    /// A ledger the pool holds a prefix of: publish the longer version.
    Append,
    /// The pool already holds these bytes.
    Same,
    /// This machine's curation ledger, of which the pool lost lines (a person reverted the
    /// plugin's merge in git): every line the pool kept is in ours, in order, so ours is
    /// published whole again — a ledger never shrinks; what the revert meant was recorded
    /// in it as a person's fact (`pool::sync`).
    Restore,
    /// A chapter this machine re-annotated (model-owned frontmatter only, the body's bytes
    /// unchanged): the one sanctioned replacement of a write-once file (record §6.2).
    Annotate,
    /// The pool holds different bytes this machine may not replace: another machine
    /// wrote that path, or the pool's copy is not a prefix of ours. Never overwritten.
    Refuse { reason: String },
}

/// Decide for one file. `pool_blob` is the pool tree's blob id at the path, if any;
/// `pool_bytes` is read only when the ids differ and the file is a ledger.
pub fn decide(
    kind: FileKind,
    store_bytes: &[u8],
    pool_blob: Option<&str>,
    pool_bytes: impl FnOnce() -> Option<Vec<u8>>,
) -> Action {
    let Some(pool_blob) = pool_blob else {
        return Action::Add;
    };
    if pool_blob == blob_id(store_bytes) {
        return Action::Same;
    }
    if kind == FileKind::Chapter {
        use crate::render::annotate::{is_reannotation, ModelFields};
        // Only a chapter a model annotated can be a re-annotation: the pool's bytes are read
        // for nothing else.
        let ours = std::str::from_utf8(store_bytes)
            .ok()
            .filter(|doc| ModelFields::read(doc).is_ok_and(|f| f.title_model().is_some()));
        let reannotated = ours.is_some_and(|ours| {
            pool_bytes().is_some_and(|theirs| {
                std::str::from_utf8(&theirs).is_ok_and(|theirs| is_reannotation(theirs, ours))
            })
        });
        return if reannotated {
            Action::Annotate
        } else {
            Action::Refuse {
                reason: "the pool holds a different chapter at this write-once path (another machine wrote it, or the body changed)".into(),
            }
        };
    }
    if !kind.is_ledger() {
        return Action::Refuse {
            reason:
                "the pool holds different bytes at this write-once path (another machine wrote it)"
                    .into(),
        };
    }
    match pool_bytes() {
        Some(theirs) if theirs.len() < store_bytes.len() && store_bytes.starts_with(&theirs) => Action::Append,
        Some(theirs) if kind == FileKind::Curation && lines_kept_in_order(&theirs, store_bytes) => {
            Action::Restore
        }
        Some(_) => Action::Refuse {
            reason: "the pool's ledger is not a prefix of this machine's: a ledger only grows by appending, and another machine may have written it".into(),
        },
        None => Action::Refuse { reason: "the pool's copy could not be read".into() },
    }
}

/// Why a write-once file's bytes are not the ones it was written with, if they are not:
/// an artifact whose bytes do not hash to its name, a chapter or plan whose body does not
/// hash to its frontmatter's `sha256` or whose frontmatter never closes (a file torn by a
/// power cut before its group commit, or damaged since). Such a file is never published:
/// a write-once path admits one content, and the pool would keep the torn one for good.
/// Ledgers are checked by the ledger reader, derived files are rebuilt: `None` for them.
pub fn torn(kind: FileKind, pool_path: &str, bytes: &[u8]) -> Option<String> {
    let sha256 = crate::names::sha256_hex;
    match kind {
        FileKind::Artifact => {
            let name = pool_path.rsplit('/').next().unwrap_or_default();
            let want = name.strip_suffix(".txt").unwrap_or(name);
            let have = sha256(bytes);
            (have != want)
                .then(|| format!("its bytes hash to {have}, not to the {want} its name says"))
        }
        FileKind::Chapter | FileKind::Plan => {
            let Ok(doc) = std::str::from_utf8(bytes) else {
                return Some("it is not UTF-8 text".into());
            };
            let (Some(front), Some(body)) = (
                crate::render::frontmatter_text(doc),
                crate::render::body_text(doc),
            ) else {
                return Some("its frontmatter never closes".into());
            };
            let want = front.lines().find_map(|l| {
                l.strip_prefix("sha256:")
                    .map(|v| v.trim().trim_matches('"').to_owned())
            })?;
            let have = sha256(body.as_bytes());
            (have != want).then(|| {
                format!("its body hashes to {have}, not to the sha256 {want} its frontmatter says")
            })
        }
        _ => None,
    }
}

/// Whether every line of `theirs` is a line of `ours`, in the same order (`theirs` is
/// `ours` with lines taken out).
fn lines_kept_in_order(theirs: &[u8], ours: &[u8]) -> bool {
    let mut ours = ours.split_inclusive(|b| *b == b'\n');
    theirs
        .split_inclusive(|b| *b == b'\n')
        .all(|line| ours.any(|o| o == line))
}

/// The `.gitattributes` shipped at the pool's root: ledgers merge by union, so even a
/// hand merge of the pool can never conflict on them.
pub const GITATTRIBUTES: &str =
    "# Written by dsh-chapters. Append-only ledgers merge by union.\n*.jsonl merge=union\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chapters_artifact_link_resolves_where_the_pool_keeps_both() {
        let sha = "ab".repeat(32);
        let (chapter, _) = pool_path("pk-1", "root/chapters/001-x.md").expect("chapter");
        let (artifact, _) =
            pool_path("pk-1", &format!("root/artifacts/ab/{sha}.txt")).expect("artifact");
        let link = artifact_link_from_chapter("pk-1", &sha);
        let mut at: Vec<&str> = chapter.split('/').collect();
        at.pop();
        for part in link.split('/') {
            match part {
                ".." => {
                    at.pop();
                }
                p => at.push(p),
            }
        }
        assert_eq!(at.join("/"), artifact);
        // A key a person chose may hold anything: it stays one segment of the link.
        assert_eq!(
            artifact_link_from_chapter("a b/c", "ab12"),
            "../../../artifacts/a%20b%2Fc/ab/ab12.txt"
        );
    }

    const PK: &str = "0fa80a81-7250-550a-9d80-2f98da5d2732";

    #[test]
    fn mapping_follows_the_contract() {
        assert_eq!(
            pool_path(PK, "session-a/chapters/001-x.md"),
            Some((
                format!("chapters/{PK}/session-a/001-x.md"),
                FileKind::Chapter
            ))
        );
        assert_eq!(
            pool_path(PK, "session-a/chapters/plan-001-x.md"),
            Some((
                format!("chapters/{PK}/session-a/plan-001-x.md"),
                FileKind::Plan
            ))
        );
        assert_eq!(
            pool_path(PK, "session-a/artifacts/ab/abcdef.txt"),
            Some((format!("artifacts/{PK}/ab/abcdef.txt"), FileKind::Artifact))
        );
        assert_eq!(
            pool_path(PK, "session-a/collections/session-b.jsonl"),
            Some((
                format!("collections/{PK}/session-b.jsonl"),
                FileKind::Collection
            ))
        );
        assert_eq!(
            pool_path(PK, "edits/machine-a/curation.jsonl"),
            Some((
                "edits/machine-a/curation.jsonl".to_string(),
                FileKind::Curation
            ))
        );
        assert!(FileKind::Curation.is_ledger());
        for unpublished in [
            "edits/machine-a/notes.jsonl",
            "edits/curation.jsonl",
            "project.yml",
            "state.json",
            "config.yml",
            ".writer.lock",
            "session-a/chapters/.001-x.md.tmp.1.2",
            "session-a/chapters/notes.txt",
            "session-a/artifacts/abc/x.txt",
            "../x/chapters/001.md",
            "session-a//chapters/001.md",
        ] {
            assert_eq!(pool_path(PK, unpublished), None, "{unpublished}");
        }
    }

    #[test]
    fn project_rules_are_published_and_session_rules_never() {
        let project = crate::rules::rule_id(crate::rules::Scope::Project, None, "Do it.");
        let session = crate::rules::rule_id(crate::rules::Scope::Session, Some("s-1"), "Do it.");
        assert_eq!(
            pool_path(PK, &format!("rules/{project}.md")),
            Some((format!("rules/{PK}/{project}.md"), FileKind::Rule))
        );
        assert!(!FileKind::Rule.is_ledger());
        assert!(FileKind::Rule.from_conversation());
        for unpublished in [
            format!("rules/{session}.md"),
            format!("rules/session/{project}.md"),
            format!("rules/{project}.txt"),
            "rules/r-notanid.md".to_owned(),
            "rules/README.md".to_owned(),
            format!("rules/.{project}.md.tmp.1.2"),
        ] {
            assert_eq!(pool_path(PK, &unpublished), None, "{unpublished}");
        }
    }

    #[test]
    fn a_torn_write_once_file_is_told_apart_from_a_whole_one() {
        let text = b"echo hello\n";
        let sha = crate::names::sha256_hex(text);
        let path = format!("artifacts/pk/{}/{sha}.txt", &sha[..2]);
        assert_eq!(torn(FileKind::Artifact, &path, text), None);
        assert!(torn(FileKind::Artifact, &path, b"echo hel").is_some());
        assert!(torn(FileKind::Artifact, &path, b"").is_some());
        let body = "# T\n\n**User** \u{b7} seq 1\n\nfix it\n";
        let doc = format!(
            "---\ntitle: T\nkind: chapter\nsha256: {}\n---\n{body}",
            crate::names::sha256_hex(body.as_bytes())
        );
        let p = "chapters/pk/root/001-t.md";
        assert_eq!(torn(FileKind::Chapter, p, doc.as_bytes()), None);
        assert_eq!(torn(FileKind::Plan, p, doc.as_bytes()), None);
        let cut = &doc.as_bytes()[..doc.len() - 4];
        assert!(torn(FileKind::Chapter, p, cut).is_some());
        let cut_front = &doc.as_bytes()[..20];
        assert!(torn(FileKind::Chapter, p, cut_front).is_some());
        assert!(torn(FileKind::Chapter, p, b"").is_some());
        // A chapter without a sha256 line (written before it existed) is not judged.
        assert_eq!(
            torn(FileKind::Chapter, p, b"---\ntitle: T\n---\nbody\n"),
            None
        );
        // Ledgers and derived files are someone else's to check.
        assert_eq!(
            torn(FileKind::Collection, "collections/pk/s.jsonl", b"{"),
            None
        );
    }

    #[test]
    fn blob_id_is_gits() {
        // `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(
            blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    }

    #[test]
    fn decisions() {
        let ours = b"line1\nline2\n";
        let never = || -> Option<Vec<u8>> { panic!("pool bytes read needlessly") };
        assert_eq!(decide(FileKind::Chapter, ours, None, never), Action::Add);
        assert_eq!(
            decide(FileKind::Chapter, ours, Some(&blob_id(ours)), never),
            Action::Same
        );
        assert!(matches!(
            decide(FileKind::Chapter, ours, Some(&blob_id(b"x")), never),
            Action::Refuse { .. }
        ));
        // A re-annotated chapter replaces its earlier copy; a different body never does.
        let body = "# T\n\nbody\n";
        let sha = crate::names::sha256_hex(body.as_bytes());
        let det = format!("---\ntitle: T\nsummary: s\nkind: chapter\ntopics: [a]\nsha256: {sha}\ngenerated: {{title: {{by: deterministic}}}}\n---\n{body}");
        let annotated = det
            .replace("title: T", "title: Better")
            .replace("{by: deterministic}", "{by: model, model: m, at: t}");
        assert_eq!(
            decide(
                FileKind::Chapter,
                annotated.as_bytes(),
                Some(&blob_id(det.as_bytes())),
                || Some(det.clone().into_bytes())
            ),
            Action::Annotate
        );
        let other_body = annotated.replace("body\n", "other\n");
        assert!(matches!(
            decide(
                FileKind::Chapter,
                other_body.as_bytes(),
                Some(&blob_id(det.as_bytes())),
                || Some(det.clone().into_bytes())
            ),
            Action::Refuse { .. }
        ));
        assert!(matches!(
            decide(FileKind::Artifact, ours, Some(&blob_id(b"x")), never),
            Action::Refuse { .. }
        ));
        assert_eq!(
            decide(
                FileKind::Collection,
                ours,
                Some(&blob_id(b"line1\n")),
                || Some(b"line1\n".to_vec())
            ),
            Action::Append
        );
        assert!(matches!(
            decide(
                FileKind::Collection,
                ours,
                Some(&blob_id(b"other\n")),
                || Some(b"other\n".to_vec())
            ),
            Action::Refuse { .. }
        ));
        // The pool's ledger longer than ours: never shrink it.
        let longer = b"line1\nline2\nline3\n";
        assert!(matches!(
            decide(FileKind::Collection, ours, Some(&blob_id(longer)), || Some(
                longer.to_vec()
            )),
            Action::Refuse { .. }
        ));
    }

    #[test]
    fn this_machines_curation_ledger_with_lines_taken_out_is_restored_never_another_ledger() {
        let ours = b"a\nb\nc\npin\n";
        let decide_with = |kind, theirs: &'static [u8]| {
            decide(kind, ours, Some(&blob_id(theirs)), || Some(theirs.to_vec()))
        };
        for reverted in [&b"a\nc\n"[..], b"b\n", b"pin\n"] {
            assert_eq!(decide_with(FileKind::Curation, reverted), Action::Restore);
        }
        for prefix in [&b"a\nb\n"[..], b""] {
            assert_eq!(decide_with(FileKind::Curation, prefix), Action::Append);
        }
        for not_ours in [&b"c\na\n"[..], b"a\nx\n", b"a\nb\nc\npin\nmore\n", b"a\nc"] {
            assert!(
                matches!(
                    decide_with(FileKind::Curation, not_ours),
                    Action::Refuse { .. }
                ),
                "{not_ours:?}"
            );
        }
        assert!(matches!(
            decide_with(FileKind::Collection, b"a\nc\n"),
            Action::Refuse { .. }
        ));
    }

    #[test]
    fn public_pools_get_nothing_from_conversation() {
        for k in [
            FileKind::Chapter,
            FileKind::Plan,
            FileKind::Artifact,
            FileKind::Collection,
        ] {
            assert!(k.from_conversation());
        }
        assert!(!FileKind::Derived.from_conversation());
    }
}

//! The two doors of `chapters search` (shell): which documents a search reads.
//!
//! Not linked → this machine's store only, and the answer says other machines' work is not
//! here. Linked → the pool mirror (other machines' files) plus this machine's store (the sync
//! does not materialize this machine's own files in the mirror), deduplicated by root and file
//! name. Either way an unreadable document is counted and named, never silently dropped.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::pool::link;
use crate::search::{self, SearchDoc};
use crate::store::{is_safe_component, MIRROR_DIR, STORE_DIR};

/// The frontmatter of a document is read up to this many bytes; past it the document is
/// counted unreadable rather than buffered (chapter frontmatter is a few KiB).
const MAX_FRONTMATTER_BYTES: u64 = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum DoorError {
    #[error("cannot list {path}: {source}; check its permissions")]
    List { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Link(#[from] link::LinkError),
}

/// Which door answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Door {
    /// No pool linked: this machine's store only.
    Store,
    /// Linked: the pool mirror and this machine's store.
    PoolAndStore,
}

impl Door {
    /// The sentence naming the door, so "this machine only" is never read as "the project".
    pub fn describe(self, documents: usize, mirror_absent: bool) -> String {
        match self {
            Door::Store => format!(
                "searched this machine's store only ({documents} documents; no pool linked — other machines' work is not here)"
            ),
            Door::PoolAndStore if mirror_absent => format!(
                "searched the pool mirror and this machine's store ({documents} documents; the mirror is empty — run `chapters sync` to bring in other machines' work)"
            ),
            Door::PoolAndStore => format!(
                "searched the pool mirror and this machine's store ({documents} documents)"
            ),
        }
    }
}

/// A document that could not be read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub path: String,
    pub reason: String,
}

/// The documents behind one search.
#[derive(Debug, Default)]
pub struct Corpus {
    pub docs: Vec<SearchDoc>,
    pub unreadable: Vec<Unreadable>,
    /// Documents left out because they belong to another project (see `cross_project`).
    pub other_projects: usize,
    /// Linked, but the mirror holds no chapters directory yet (never synced).
    pub mirror_absent: bool,
}

/// Collect the documents of the door this workspace has. A workspace without a store has
/// no documents (an answer, not a failure).
pub fn collect(
    workspace: &Path,
    project_key: &str,
    cross_project: bool,
) -> Result<(Door, Corpus), DoorError> {
    let store_dir = workspace.join(STORE_DIR);
    let linked = store_dir.is_dir() && link::read(&store_dir)?.is_some();
    let mut corpus = Corpus::default();
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    // This machine's store first: on a (root, name) collision it is the original.
    for root in list(&store_dir, Kind::Dir)? {
        let rel = format!("{STORE_DIR}/{root}/chapters");
        read_dir_docs(workspace, &rel, &root, &mut seen, &mut corpus)?;
    }
    // Rules are chapters of kind `rule` (record §7.1): this machine's (both tiers), then the
    // pool's project rules. One file per id, so the (dir, name) key dedupes them.
    let rules_rel = format!("{STORE_DIR}/{}", crate::rules::store::RULES_DIR);
    read_dir_docs(workspace, &rules_rel, "rules", &mut seen, &mut corpus)?;
    if linked {
        let rel = format!("{MIRROR_DIR}/rules/{project_key}");
        read_dir_docs(workspace, &rel, "rules", &mut seen, &mut corpus)?;
    }
    if linked {
        let mirror_chapters = workspace.join(MIRROR_DIR).join("chapters");
        corpus.mirror_absent = !mirror_chapters.is_dir();
        for pk in list(&mirror_chapters, Kind::Dir)? {
            // The mirror's layout says whose project a directory holds; skip the foreign ones
            // unread unless asked (the frontmatter filter below still applies).
            if !cross_project && pk != project_key {
                continue;
            }
            for root in list(&mirror_chapters.join(&pk), Kind::Dir)? {
                let rel = format!("{MIRROR_DIR}/chapters/{pk}/{root}");
                read_dir_docs(workspace, &rel, &root, &mut seen, &mut corpus)?;
            }
        }
    }
    if !cross_project {
        let before = corpus.docs.len();
        corpus.docs.retain(|d| d.meta.project_key == project_key);
        corpus.other_projects = before - corpus.docs.len();
    }
    corpus.docs.sort_by(|a, b| a.path.cmp(&b.path));
    let door = if linked {
        Door::PoolAndStore
    } else {
        Door::Store
    };
    Ok((door, corpus))
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Dir,
    Markdown,
}

/// Names in `dir` of the given kind, sorted; an absent directory lists nothing. Symlinks are
/// not followed (the store and mirror never create them).
fn list(dir: &Path, kind: Kind) -> Result<Vec<String>, DoorError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(DoorError::List {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DoorError::List {
            path: dir.to_path_buf(),
            source,
        })?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        let wanted = match kind {
            Kind::Dir => file_type.is_dir() && is_safe_component(&name),
            Kind::Markdown => {
                file_type.is_file() && !name.starts_with('.') && name.ends_with(".md")
            }
        };
        if wanted {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn read_dir_docs(
    workspace: &Path,
    rel_dir: &str,
    root: &str,
    seen: &mut BTreeSet<(String, String)>,
    corpus: &mut Corpus,
) -> Result<(), DoorError> {
    for name in list(&workspace.join(rel_dir), Kind::Markdown)? {
        if !seen.insert((root.to_owned(), name.clone())) {
            continue;
        }
        let path = format!("{rel_dir}/{name}");
        match read_head(&workspace.join(&path))
            .and_then(|head| search::parse_meta(&head).map_err(|e| e.to_string()))
        {
            Ok(meta) => corpus.docs.push(SearchDoc { path, meta }),
            Err(reason) => corpus.unreadable.push(Unreadable { path, reason }),
        }
    }
    Ok(())
}

/// The document's head: its opening `---` line through its closing `---` line, bounded.
fn read_head(path: &Path) -> Result<String, String> {
    let file = fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let mut reader = BufReader::new(file.take(MAX_FRONTMATTER_BYTES));
    let mut head = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .map_err(|e| format!("cannot read: {e}"))?;
        if n == 0 {
            return Err(if head.is_empty() {
                "empty file".to_owned()
            } else {
                format!("no closing `---` within the first {MAX_FRONTMATTER_BYTES} bytes")
            });
        }
        let first = head.is_empty();
        head.push_str(&line);
        if first && line != "---\n" {
            return Err("no YAML frontmatter (the first line is not `---`)".to_owned());
        }
        if !first && line == "---\n" {
            return Ok(head);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chapter(pk: &str, title: &str) -> String {
        format!("---\ntitle: \"{title}\"\nkind: chapter\nprojectKey: \"{pk}\"\ntopics: [csv]\ndate: null\n---\nbody\n")
    }

    fn put(ws: &Path, rel: &str, text: &str) {
        let p = ws.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    }

    #[test]
    fn store_door_counts_unreadable_and_filters_projects() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        put(
            ws,
            ".dsh-chapters/s1/chapters/001-a.md",
            &chapter("pk", "A"),
        );
        put(
            ws,
            ".dsh-chapters/s1/chapters/002-b.md",
            &chapter("other", "B"),
        );
        put(ws, ".dsh-chapters/s1/chapters/003-c.md", "no frontmatter\n");
        put(
            ws,
            ".dsh-chapters/s1/chapters/004-d.md",
            "---\ntitle: [\n---\n",
        );
        put(ws, ".dsh-chapters/s1/chapters/005-e.md", "---\ntitle: x\n");
        put(
            ws,
            ".dsh-chapters/s1/chapters/.tmp-001.md",
            &chapter("pk", "T"),
        );
        put(
            ws,
            ".dsh-chapters/s1/chapters/notes.txt",
            &chapter("pk", "N"),
        );
        let (door, corpus) = collect(ws, "pk", false).expect("collect");
        assert_eq!(door, Door::Store);
        let paths: Vec<&str> = corpus.docs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, [".dsh-chapters/s1/chapters/001-a.md"]);
        assert_eq!(corpus.other_projects, 1);
        let bad: Vec<&str> = corpus.unreadable.iter().map(|u| u.path.as_str()).collect();
        assert_eq!(
            bad,
            [
                ".dsh-chapters/s1/chapters/003-c.md",
                ".dsh-chapters/s1/chapters/004-d.md",
                ".dsh-chapters/s1/chapters/005-e.md"
            ]
        );
        let (_, all) = collect(ws, "pk", true).expect("collect");
        assert_eq!((all.docs.len(), all.other_projects), (2, 0));
    }

    #[test]
    fn no_store_is_an_empty_store_door() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (door, corpus) = collect(tmp.path(), "pk", false).expect("collect");
        assert_eq!(door, Door::Store);
        assert!(corpus.docs.is_empty() && corpus.unreadable.is_empty());
    }

    #[test]
    fn huge_frontmatter_is_unreadable_not_buffered() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let huge = format!("---\ntitle: x\n{}", "k: v\n".repeat(100_000));
        put(ws, ".dsh-chapters/s1/chapters/001-a.md", &huge);
        let (_, corpus) = collect(ws, "pk", false).expect("collect");
        assert_eq!(corpus.unreadable.len(), 1);
        assert!(corpus.unreadable[0].reason.contains("closing `---`"));
    }
}

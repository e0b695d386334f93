//! The store's document reader (shell): the one way from a file the store or a pool
//! mirror holds back to a [`Redacted`] value.
//!
//! Everything under `<workspace>/.dsh-chapters/` and `<workspace>/.dsh-knowledge/` was
//! written from `Redacted` values (the store's writes take them; the mirror holds what
//! other machines' stores published), so what is read from there is redacted text. A
//! [`Reader`] reads only there, and only it makes the [`ReadBack`] proof that
//! [`Redacted::read_back`] needs. The derivers of the index, the vocabulary and the search
//! cache read documents through the search table and the cache, which hold a `Reader`; the
//! continuation notice reads `Store::archived_read_back`; the rules block is built from rule
//! files `rules::store::read_rules` reads through one; the CLI's and the MCP server's answers
//! (search lines, list rows, bodies, artifacts) come from `search::Corpus`, which
//! holds one (a test in this module lists every caller of `read_back`).

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Component, Path, PathBuf};

use super::{MIRROR_DIR, STORE_DIR};
use crate::redact::Redacted;

/// Proof that a value was read from the store or a pool mirror. Made only here.
pub struct ReadBack(());

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path} is not a file of the store ({STORE_DIR}/) or the pool mirror ({MIRROR_DIR}/) of {workspace}; derived text is read only from there")]
    Outside { path: PathBuf, workspace: PathBuf },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Reads the store and the pool mirror of one workspace, and nothing else.
pub struct Reader {
    workspace: PathBuf,
    proof: ReadBack,
    /// The mirror's object database at its materialized head (`crate::store::mirror::Packed`): a
    /// mirror file that was never written out is read from there.
    packed: Option<Box<dyn MirrorObjects>>,
}

/// The packed mirror as the reader sees it: the files of the pool's tree at the head the
/// mirror last materialized, read from the mirror's own git directory
/// (`<workspace>/.dsh-knowledge/.git`). Those are the bytes other machines' stores published
/// — redacted, as the mirror's plain files are. Implemented by `crate::store::mirror::Packed`.
pub trait MirrorObjects {
    /// The git directory the objects come from: the reader takes only its workspace's mirror.
    fn git_dir(&self) -> &Path;
    /// The bytes of the mirror's file `rel` (relative to the mirror, `chapters/pk/root/X.md`),
    /// or `None` when the tree holds no such file.
    fn file(&self, rel: &str) -> std::io::Result<Option<Vec<u8>>>;
    /// The entries of the mirror's folder `rel` as `(name, is a folder)`; none when absent.
    fn list(&self, rel: &str) -> std::io::Result<Vec<(String, bool)>>;
}

/// A file of the store or the mirror, open for positioned reads.
pub struct StoreFile {
    file: fs::File,
    path: PathBuf,
}

impl Reader {
    pub fn new(workspace: &Path) -> Reader {
        Reader {
            workspace: workspace.to_path_buf(),
            proof: ReadBack(()),
            packed: None,
        }
    }

    /// This reader, reading a mirror file that is not on disk from the packed mirror's tree
    /// (`pool::mirror`). A source that is not this workspace's mirror is not taken.
    pub fn with_mirror(mut self, packed: Option<Box<dyn MirrorObjects>>) -> Reader {
        let own = self.workspace.join(MIRROR_DIR).join(".git");
        self.packed = packed.filter(|p| p.git_dir() == own);
        self
    }

    /// The reader of the workspace whose store is `store_dir` (`<workspace>/.dsh-chapters`).
    pub fn of_store(store_dir: &Path) -> Reader {
        Reader::new(store_dir.parent().unwrap_or(store_dir))
    }

    /// `path` (absolute, or relative to the workspace) when it lies under the store or the
    /// mirror, with no `..` on the way.
    fn inside(&self, path: &Path) -> Result<PathBuf, ReadError> {
        let rel = path.strip_prefix(&self.workspace).unwrap_or(path);
        let mut parts = rel.components();
        let top = parts.next();
        let ok = matches!(top, Some(Component::Normal(c)) if c == STORE_DIR || c == MIRROR_DIR)
            && parts.all(|c| matches!(c, Component::Normal(_)));
        if !ok {
            return Err(ReadError::Outside {
                path: path.to_path_buf(),
                workspace: self.workspace.clone(),
            });
        }
        Ok(self.workspace.join(rel))
    }

    /// A whole file's bytes.
    /// A mirror file not written out (the packed mirror writes plain files only for what a
    /// machine reads) comes from the mirror's tree when the reader has it.
    pub fn bytes(&self, path: &Path) -> Result<Redacted<Vec<u8>>, ReadError> {
        let path = self.inside(path)?;
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
                match self.packed_file(&path) {
                    Some(Ok(Some(bytes))) => bytes,
                    Some(Err(source)) => return Err(ReadError::Io { path, source }),
                    Some(Ok(None)) | None => return Err(ReadError::Io { path, source }),
                }
            }
            Err(source) => return Err(ReadError::Io { path, source }),
        };
        Ok(Redacted::read_back(bytes, &self.proof))
    }

    /// A blob of the pool this workspace's mirror pulls, by id, for the sync's copy-in into
    /// the mirror (`Store::mirror_writes`): from the mirror's own objects, or from a local
    /// pool's before they are fetched in. Those are what the pool's machines' stores
    /// published — redacted, as the mirror's files (their copies) are.
    /// `blobs`: `pool`'s packs ([`crate::git::GitRepo::pack_blobs`]), kept by the caller
    /// across the blobs it reads.
    pub fn pulled_blob(
        &self,
        pool: &crate::git::GitRepo,
        blobs: &mut crate::git::PackBlobs,
        id: crate::git::ObjectId,
    ) -> Result<Redacted<Vec<u8>>, crate::git::GitError> {
        Ok(Redacted::read_back(
            pool.read_blob_from(blobs, id)?,
            &self.proof,
        ))
    }

    /// `path` (inside the workspace's mirror) from the packed mirror, when the reader has one.
    fn packed_file(&self, path: &Path) -> Option<std::io::Result<Option<Vec<u8>>>> {
        let packed = self.packed.as_ref()?;
        let rel = path.strip_prefix(self.workspace.join(MIRROR_DIR)).ok()?;
        let rel = rel.to_str()?;
        Some(packed.file(rel))
    }

    /// A file opened for positioned reads ([`Reader::read_at`]).
    pub fn open(&self, path: &Path) -> Result<StoreFile, ReadError> {
        let path = self.inside(path)?;
        let file = fs::File::open(&path).map_err(|source| ReadError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(StoreFile { file, path })
    }

    /// `len` bytes of `file` at `offset`.
    pub fn read_at(
        &self,
        file: &StoreFile,
        len: usize,
        offset: u64,
    ) -> Result<Redacted<Vec<u8>>, ReadError> {
        let mut bytes = vec![0u8; len];
        file.file
            .read_exact_at(&mut bytes, offset)
            .map_err(|source| ReadError::Io {
                path: file.path.clone(),
                source,
            })?;
        Ok(Redacted::read_back(bytes, &self.proof))
    }

    /// A value the holder parsed from bytes this reader read (the search table's records,
    /// kept in files under the store). Callers are listed by a test below.
    pub fn read_back<T>(&self, value: T) -> Redacted<T> {
        Redacted::read_back(value, &self.proof)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_the_store_and_the_mirror() {
        let ws = tempfile::tempdir().unwrap();
        let reader = Reader::new(ws.path());
        for dir in [STORE_DIR, MIRROR_DIR, "elsewhere"] {
            std::fs::create_dir_all(ws.path().join(dir)).unwrap();
            std::fs::write(ws.path().join(dir).join("a.md"), "text").unwrap();
        }
        for rel in [".dsh-chapters/a.md", ".dsh-knowledge/a.md"] {
            assert_eq!(reader.bytes(Path::new(rel)).unwrap().get(), b"text");
            assert_eq!(
                reader.bytes(&ws.path().join(rel)).unwrap().get(),
                b"text",
                "{rel}"
            );
        }
        for rel in [
            "elsewhere/a.md",
            ".dsh-chapters/../elsewhere/a.md",
            "/etc/hostname",
            "a.md",
        ] {
            assert!(
                matches!(reader.bytes(Path::new(rel)), Err(ReadError::Outside { .. })),
                "{rel}"
            );
        }
        let file = reader.open(Path::new(".dsh-chapters/a.md")).unwrap();
        assert_eq!(reader.read_at(&file, 2, 1).unwrap().get(), b"ex");
    }

    struct Tree {
        git_dir: PathBuf,
    }

    impl MirrorObjects for Tree {
        fn git_dir(&self) -> &Path {
            &self.git_dir
        }
        fn file(&self, rel: &str) -> std::io::Result<Option<Vec<u8>>> {
            Ok((rel == "chapters/pk/r/001-a.md").then(|| b"packed".to_vec()))
        }
        fn list(&self, _rel: &str) -> std::io::Result<Vec<(String, bool)>> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn a_mirror_file_not_on_disk_comes_from_the_workspaces_own_packed_mirror_only() {
        let ws = tempfile::tempdir().unwrap();
        let rel = Path::new(".dsh-knowledge/chapters/pk/r/001-a.md");
        let own = Tree {
            git_dir: ws.path().join(MIRROR_DIR).join(".git"),
        };
        let reader = Reader::new(ws.path()).with_mirror(Some(Box::new(own)));
        assert_eq!(reader.bytes(rel).unwrap().get(), b"packed");
        // Not in the tree: still an I/O error; the store is never read from the tree.
        assert!(reader
            .bytes(Path::new(".dsh-knowledge/chapters/pk/r/002-b.md"))
            .is_err());
        assert!(reader
            .bytes(Path::new(".dsh-chapters/chapters/pk/r/001-a.md"))
            .is_err());
        // A file on disk wins over the tree.
        std::fs::create_dir_all(ws.path().join(rel).parent().unwrap()).unwrap();
        std::fs::write(ws.path().join(rel), "on disk").unwrap();
        assert_eq!(reader.bytes(rel).unwrap().get(), b"on disk");
        // Another repository is not taken as this workspace's mirror.
        std::fs::remove_file(ws.path().join(rel)).unwrap();
        let elsewhere = Tree {
            git_dir: ws.path().join("elsewhere.git"),
        };
        let reader = Reader::new(ws.path()).with_mirror(Some(Box::new(elsewhere)));
        assert!(reader.bytes(rel).is_err());
    }

    /// The proof's callers: a new one is a reviewed decision, not an accident.
    #[test]
    fn only_the_document_readers_read_back() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut callers = Vec::new();
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    if text.contains(".read_back(") || text.contains("Redacted::read_back(") {
                        let rel = path.strip_prefix(&src).unwrap();
                        callers.push(rel.to_string_lossy().into_owned());
                    }
                }
            }
        }
        callers.sort();
        assert_eq!(
            callers,
            [
                // The search table's records and the search cache's rows.
                "catalog/cache.rs",
                "catalog/table.rs",
                // Rule files, and the block built from them.
                "rules/store.rs",
                // The door's answers: cache rows, packed lines, bodies, artifacts.
                "search.rs",
                // The continuation notice's chapters.
                "store/mod.rs",
                "store/read.rs"
            ],
            "who builds `Redacted` from read-back values"
        );
    }
}

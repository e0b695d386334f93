//! The knowledge pool's git layer over gix: objects, trees, commits, compare-and-swap ref
//! moves, and the local object copy behind a fast-forward-only publish (design record §3.2,
//! §5.2). No `git` program is run here, and no network is touched.
//!
//! Efficiency rules, because the pool grows without bound (§1 invariant 6): [`GitRepo::tree_with`]
//! rewrites only the trees on the upserted paths, [`copy_reachable`] stops at objects the target
//! already has and compares each new tree with its parent commit's tree so unchanged entries cost
//! no lookup, and nothing lists a whole tree or walks the whole history unless the caller asks
//! ([`GitRepo::list_tree`], and [`GitRepo::is_ancestor`] when the answer is "no").
//!
//! Objects are written loose (one zlib file each, as `git` does before `gc`), or — on a handle
//! that holds its writes ([`GitRepo::hold_writes`], a sync's) — kept in memory and written as
//! one pack ([`pack_file`]) before the ref moves; real `git` reads every repository this module
//! writes (the tests check it with `git fsck --strict`). Writes are crash-safe against a killed
//! process (objects, packs and refs land by atomic rename, objects before anything that refers
//! to them); against a power loss, [`GitRepo::cas_ref`] makes the objects durable before the
//! ref moves (the pack's fsyncs, or one `syncfs` for loose files) and the ref after.
//!
//! [`copy_reachable`] trusts that an object present in the target brings its whole closure. That
//! holds for every repository written by this module or by a full `git` clone/push; it does not
//! hold for shallow or partial clones, which must not be used as a pool or mirror.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Duration;

use gix::bstr::ByteSlice;
use gix::lock::acquire::Fail;
use gix::objs::tree::EntryKind;
use gix::objs::tree::EntryRef;
use gix::objs::{CommitRef, Exists as _, Find as _, Kind, TreeRef, Write as _};
use gix::odb::Header as _;
use gix::refs::transaction::{Change, LogChange, PreviousValue, RefEdit, RefLog};
use gix::refs::{FullName, Target};

use crate::redact::Redacted;

pub use gix::ObjectId;

mod pack_file;

/// How long a ref move waits for a concurrent writer's lock. Generous on purpose: the loser of a
/// race should wait for the winner to finish and then report [`GitError::RefMoved`] with the
/// winner's value, rather than a lock timeout.
const REF_LOCK_WAIT: Duration = Duration::from_secs(5);

/// The git directory of a mirror, inside its workspace directory (see [`GitRepo::init_or_open_mirror`]).
const MIRROR_GIT_DIR: &str = ".git";

/// Everything that can fail in the pool's git layer. Each message names the repository (its git
/// directory) or the input at fault, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot create directory {path} for a git repository: {source}; check its parent's permissions and free space")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot list {path} to check that it is empty before creating a git repository in it: {source}")]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot initialize a bare git repository at {path}: {source}")]
    Init {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("{path} exists, is not empty and is not a git repository ({reason}); point the pool at a new or empty directory, or at an existing bare repository")]
    NotEmpty { path: PathBuf, reason: String },
    #[error("cannot open the git repository at {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: gix::Error,
    },
    #[error("{path} is a git repository with a work tree; the knowledge pool must be a bare repository (create it with `git init --bare`, or let the pool create it in an empty directory)")]
    NotBare { path: PathBuf },
    #[error("object {id} ({what}) is missing from the git repository {repo}; the repository is incomplete — publish again from a complete repository, or rebuild the mirror")]
    Missing {
        repo: PathBuf,
        id: ObjectId,
        what: &'static str,
    },
    #[error("cannot read object {id} ({what}) in the git repository {repo}: {source}")]
    Read {
        repo: PathBuf,
        id: ObjectId,
        what: &'static str,
        #[source]
        source: gix::Error,
    },
    #[error("object {id} ({what}) in the git repository {repo} is a {actual}, not a {expected}")]
    WrongKind {
        repo: PathBuf,
        id: ObjectId,
        what: &'static str,
        expected: Kind,
        actual: Kind,
    },
    #[error("object {id} in the git repository {repo} is an annotated tag; the knowledge pool only stores commits, trees and blobs")]
    Unsupported { repo: PathBuf, id: ObjectId },
    #[error(
        "cannot decode {kind} {id} in the git repository {repo}: {source}; the object is corrupt"
    )]
    Decode {
        repo: PathBuf,
        id: ObjectId,
        kind: Kind,
        #[source]
        source: gix::Error,
    },
    #[error("tree {tree} in the git repository {repo} holds a path that is not UTF-8 ({path:?}); the knowledge pool only writes UTF-8 paths, so this repository was written by something else")]
    NonUtf8Path {
        repo: PathBuf,
        tree: ObjectId,
        path: String,
    },
    #[error("cannot write {what} into the git repository {repo}: {source}; check permissions and free space")]
    Write {
        repo: PathBuf,
        what: String,
        #[source]
        source: gix::Error,
    },
    #[error("copying object {expected} into {repo} produced object {actual}; the source repository holds a corrupt object — run `git fsck` on it")]
    HashMismatch {
        repo: PathBuf,
        expected: ObjectId,
        actual: ObjectId,
    },
    #[error("{path:?} is not a valid path inside a repository tree: {reason}")]
    InvalidPath { path: String, reason: String },
    #[error("cannot write a commit: {reason}")]
    InvalidCommit { reason: String },
    #[error("{refname:?} is not a full reference name under refs/ ({reason})")]
    InvalidRefName { refname: String, reason: String },
    #[error("reference {refname} in the git repository {repo} is symbolic; the pool only moves direct references")]
    SymbolicRef { repo: PathBuf, refname: String },
    #[error("cannot read reference {refname} in the git repository {repo}: {source}")]
    ReadRef {
        repo: PathBuf,
        refname: String,
        #[source]
        source: gix::Error,
    },
    #[error("cannot move reference {refname} in the git repository {repo}: {source}; if a crashed process left {refname}.lock behind, remove that file")]
    WriteRef {
        repo: PathBuf,
        refname: String,
        #[source]
        source: gix::Error,
    },
    #[error("cannot write a publish's objects as a pack into the git repository {repo}: {source}; check permissions and free space")]
    WritePack {
        repo: PathBuf,
        #[source]
        source: pack_file::PackFileError,
    },
    #[error("cannot make the git repository {repo} durable ({step}): {source}; check the disk")]
    Durable {
        repo: PathBuf,
        step: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("reference {refname} in the git repository {repo} moved under us: expected {}, found {}; re-read it and retry", show(.expected), show(.actual))]
    RefMoved {
        repo: PathBuf,
        refname: String,
        expected: Option<ObjectId>,
        actual: Option<ObjectId>,
    },
    #[error("reference {refname} in the git repository {repo} was locked by {lock}, unchanged through the whole wait: a writer killed mid-update left it; it was removed, retry")]
    StaleLockRemoved {
        repo: PathBuf,
        refname: String,
        lock: PathBuf,
    },
    #[error("refusing to move {refname} in the git repository {repo} from {current} to {new}: not a fast-forward (the target has commits the source lacks); rebuild the mirror from the store and publish again")]
    NotFastForward {
        repo: PathBuf,
        refname: String,
        current: ObjectId,
        new: ObjectId,
    },
}

impl GitError {
    /// The repository whose objects could not be read as they should (missing, unreadable —
    /// a truncated pack —, or of another kind): damage in that repository, not a fault of
    /// this run.
    pub fn damaged_repository(&self) -> Option<&Path> {
        match self {
            GitError::Missing { repo, .. }
            | GitError::Read { repo, .. }
            | GitError::WrongKind { repo, .. } => Some(repo),
            _ => None,
        }
    }
}

fn show(id: &Option<ObjectId>) -> String {
    match id {
        Some(id) => id.to_string(),
        None => "no reference".to_string(),
    }
}

/// A blob met by [`GitRepo::reachable_blobs`]: its id, the first path and commit it was met at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReachableBlob {
    pub id: ObjectId,
    pub path: String,
    pub commit: ObjectId,
}

/// The delta-base cache of one [`GitRepo`] handle (git's own `core.deltaBaseCacheLimit` is
/// 96 MiB; a handle is per thread, and a machine's first sync must stay small: one first sync
/// of 100,000 chapters on a loaded machine took no more CPU time with 8 MiB than with 16).
const PACK_CACHE_BYTES: usize = 8 * 1024 * 1024;

/// Blob bytes a handle that holds its writes ([`GitRepo::hold_writes`]) keeps in memory before
/// it packs them early: a first publish of a big store would otherwise hold all of it.
const HELD_BYTES: usize = if cfg!(test) {
    64 * 1024
} else {
    64 * 1024 * 1024
};

/// The decoded-object cache of one [`GitRepo`] handle (least recently used first out): the
/// few trees a path lookup reads again fit; blobs read once only pass through.
const OBJECT_CACHE_BYTES: usize = 2 * 1024 * 1024;

/// A tree of at least this many entries is kept as a name map once a path lookup read it
/// ([`GitRepo::blob_at`], [`GitRepo::tree_at`]): `chapters/<pk>/` and `collections/<pk>/` list
/// every session of the project (~2,000 entries, ~140 KB at 100,000 chapters), and a publish
/// looks up dozens of paths under them — each lookup copied and decoded the whole tree again.
const LOOKUP_TREE_MIN_ENTRIES: usize = 64;

/// Entries of the name maps one handle keeps (dropped all at once past this): a first sync's
/// lookups over thousands of trees stay a few MiB.
const LOOKUP_CACHE_ENTRIES: usize = 65_536;

/// The name maps of big trees a handle's path lookups read, by tree id (an id names its
/// bytes: a map is never stale).
#[derive(Default)]
struct TreeLookups {
    trees: HashMap<ObjectId, HashMap<Vec<u8>, (ObjectId, gix::objs::tree::EntryMode)>>,
    entries: usize,
    /// Trees a lookup read from the object database (tests count them).
    #[cfg(test)]
    reads: usize,
}

/// A repository's packs read blob after blob with every delta base resolved kept in a
/// cache of [`PACK_CACHE_BYTES`] ([`GitRepo::pack_blobs`], [`GitRepo::read_blob_from`]). The
/// packs stay mapped while it lives.
pub struct PackBlobs {
    bundles: Vec<gix::odb::pack::Bundle>,
    cache: gix::odb::pack::cache::lru::MemoryCappedHashmap,
    inflate: gix::zlib::Inflate,
    /// The deltas applied so far, for a test of how often a base is resolved again.
    #[cfg(test)]
    applied: u32,
}

impl PackBlobs {
    /// Blob `id` from the packs, or `None` when they do not hold it (or its entry could not be
    /// resolved here: the caller reads it through gix and reports what is wrong).
    fn read(&mut self, id: &ObjectId) -> Option<Vec<u8>> {
        use gix::odb::pack::cache::DecodeEntry as _;
        use gix::odb::pack::data::decode::entry::ResolvedBase;
        use gix::odb::pack::data::entry::Header;
        let PackBlobs {
            bundles,
            cache,
            inflate,
            ..
        } = self;
        let bundle = bundles.iter().find(|b| b.index.lookup(id).is_some())?;
        let (index, pack) = (&bundle.index, &bundle.pack);
        let offset = index.pack_offset_at_index(index.lookup(id)?);
        let top = pack.entry(offset).ok()?;
        // The chain from the object down to the first entry that is cached or a whole object
        // (or a base named by id outside this pack, which gix then fails to resolve).
        let mut chain = vec![top];
        let mut scratch = Vec::new();
        loop {
            let cur = chain.last().expect("the chain starts with the object");
            let base = match cur.header {
                Header::OfsDelta { base_distance } => cur.base_pack_offset(base_distance),
                Header::RefDelta { base_id } => match index.lookup(base_id) {
                    Some(i) => index.pack_offset_at_index(i),
                    None => break,
                },
                _ => break,
            };
            if cache.get(pack.id, cur.data_offset, &mut scratch).is_some() {
                break;
            }
            chain.push(pack.entry(base).ok()?);
        }
        // A base named by id: in this pack, else not resolved here.
        let resolve = |base: &gix::hash::oid, _: &mut Vec<u8>| {
            Ok(index
                .lookup(base)
                .and_then(|i| pack.entry(index.pack_offset_at_index(i)).ok())
                .map(ResolvedBase::InPack))
        };
        // Bottom up: each delta's base is then in the cache, so each costs one inflation. A
        // whole object below a delta is not decoded alone: gix looks only deltas up in the
        // cache, and inflates the whole object at the bottom of a chain with its first delta.
        let mut out = Vec::new();
        let mut kind = Kind::Blob;
        let mut applied = 0;
        while let Some(entry) = chain.pop() {
            if !entry.header.is_delta() && !chain.is_empty() {
                continue;
            }
            let outcome = pack
                .decode_entry(entry, &mut out, inflate, &resolve, cache)
                .ok()?;
            kind = outcome.kind;
            applied += outcome.num_deltas;
        }
        #[cfg(test)]
        {
            self.applied += applied;
        }
        let _ = applied;
        (kind == Kind::Blob).then_some(out)
    }
}

/// One git repository: a pool (bare), a mirror (bare, at `<dir>/.git`) or any repository opened
/// for reading. Not `Sync` (gix caches per handle): open one per thread.
pub struct GitRepo {
    repo: gix::Repository,
    git_dir: PathBuf,
    /// Objects are written to memory until a ref moves ([`GitRepo::hold_writes`]).
    held: bool,
    /// Bytes of blobs held in memory since the last pack of them.
    held_bytes: std::cell::Cell<usize>,
    /// Packs of held objects written since the last [`GitRepo::write_held`].
    held_packs: std::cell::RefCell<Vec<String>>,
    /// Big trees' entries by name, for path lookups ([`LOOKUP_TREE_MIN_ENTRIES`]).
    lookups: std::cell::RefCell<TreeLookups>,
}

impl std::fmt::Debug for GitRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitRepo")
            .field("git_dir", &self.git_dir)
            .finish()
    }
}

impl GitRepo {
    /// Create a bare repository at `path` (and its missing parents), or open it if it already is
    /// one. An existing non-empty directory that is not a repository, or a repository with a
    /// work tree, is refused rather than written into. The initial `HEAD` names `refs/heads/main`.
    pub fn init_bare(path: &Path) -> Result<GitRepo, GitError> {
        if path.exists() {
            match open_isolated(path) {
                Ok(repo) if repo.is_bare() => return Ok(GitRepo::wrap(repo)),
                Ok(_) => {
                    return Err(GitError::NotBare {
                        path: path.to_path_buf(),
                    })
                }
                Err(open_error) => {
                    if !dir_is_empty(path)? {
                        return Err(GitError::NotEmpty {
                            path: path.to_path_buf(),
                            reason: open_error.to_string(),
                        });
                    }
                }
            }
        } else {
            std::fs::create_dir_all(path).map_err(|source| GitError::CreateDir {
                path: path.to_path_buf(),
                source,
            })?;
        }
        // Isolated: the user's global git config (init.defaultBranch, reflog settings, …) must
        // not change what the pool looks like on one machine versus another.
        match gix::ThreadSafeRepository::init_opts(
            path,
            gix::create::Kind::Bare,
            gix::create::Options::default(),
            isolated_options(),
        ) {
            Ok(repo) => Ok(GitRepo::wrap(repo.to_thread_local())),
            // Another process initialized it between our check and our write: use theirs.
            Err(source) => match open_isolated(path) {
                Ok(repo) if repo.is_bare() => Ok(GitRepo::wrap(repo)),
                _ => Err(GitError::Init {
                    path: path.to_path_buf(),
                    source,
                }),
            },
        }
    }

    /// The workspace mirror (§3.1): a **bare** repository at `<path>/.git`, created if absent.
    ///
    /// Bare because the pool materializes files itself and never needs a checkout or an index: a
    /// non-bare repository without a checkout would show every file as deleted to `git status`.
    /// At `<path>/.git` so that `git -C <path> log` works for a human looking at the mirror, and
    /// `<path>` itself stays free for materialized files. An existing `<path>/.git` is opened as
    /// it is (bare or not).
    pub fn init_or_open_mirror(path: &Path) -> Result<GitRepo, GitError> {
        let git_dir = path.join(MIRROR_GIT_DIR);
        if git_dir.exists() {
            GitRepo::open(&git_dir)
        } else {
            GitRepo::init_bare(&git_dir)
        }
    }

    /// Open an existing repository: a bare repository's directory, a git directory, or a work
    /// tree containing `.git`. Never searches parent directories.
    pub fn open(path: &Path) -> Result<GitRepo, GitError> {
        open_isolated(path)
            .map(GitRepo::wrap)
            .map_err(|source| GitError::Open {
                path: path.to_path_buf(),
                source,
            })
    }

    fn wrap(mut repo: gix::Repository) -> GitRepo {
        // Without a delta-base cache every object of a delta chain (up to 50 deep in
        // `git pack-objects`' packs) inflates its bases again: reading a packed pool's
        // documents one after another costs O(depth) inflations each (issue #17 point 6).
        repo.objects.set_pack_cache(|| {
            Box::new(gix::odb::pack::cache::lru::MemoryCappedHashmap::new(
                PACK_CACHE_BYTES,
            ))
        });
        // Paths are looked up from the root tree down, so the same few trees (`chapters/<pk>/`
        // lists every session of the project) are read again for every document: kept decoded.
        repo.object_cache_size(OBJECT_CACHE_BYTES);
        let git_dir = repo.git_dir().to_path_buf();
        GitRepo {
            repo,
            git_dir,
            held: false,
            held_bytes: std::cell::Cell::new(0),
            held_packs: std::cell::RefCell::new(Vec::new()),
            lookups: std::cell::RefCell::new(TreeLookups::default()),
        }
    }

    /// From now on this handle writes objects to memory, not loose files: they are read back
    /// from memory, and [`GitRepo::cas_ref`] (or [`GitRepo::write_held`]) writes them as one
    /// pack, each deflated once, before the ref moves (issue #17 point 6: a publish's objects
    /// were written loose, then inflated and deflated again by `git pack-objects`). Past
    /// [`HELD_BYTES`] of blobs they are packed early (a big first publish stays small in
    /// memory). Other handles and the git program see them only once they are packed.
    pub fn hold_writes(&mut self) {
        self.repo.objects.enable_object_memory();
        self.held = true;
    }

    /// Store a blob: loose unless present already (gix's check), or, on a handle that holds
    /// its writes, in memory even when present — so the packs of held objects hold every
    /// object a publish wrote, whatever else the repository holds (a killed sync's pack).
    fn put_blob(&self, bytes: &[u8]) -> Result<ObjectId, gix::Error> {
        if self.held {
            return self.repo.objects.write_buf(Kind::Blob, bytes);
        }
        once_more(|| self.repo.write_blob(bytes)).map(|id| id.detach())
    }

    /// [`GitRepo::put_blob`] of a tree or commit.
    fn put_object<T: gix::objs::WriteTo>(&self, object: &T) -> Result<ObjectId, gix::Error> {
        if self.held {
            return self.repo.objects.write(object);
        }
        once_more(|| self.repo.write_object(object)).map(|id| id.detach())
    }

    /// Write the objects held in memory ([`GitRepo::hold_writes`]) as one pack with its
    /// index, durably (`pack_file`'s order: temp files fsynced, renamed, the pack directory
    /// fsynced); returns the stems (`pack-<hash>`) of every pack written since the last call,
    /// early ones first: together they hold every object written since (what a publish
    /// brings, so a mirror that links them all holds its commit). Later reads find them there.
    pub fn write_held(&self) -> Result<Vec<String>, GitError> {
        self.pack_held()?;
        Ok(self.held_packs.take())
    }

    /// The objects held in memory into one pack, its stem noted for [`GitRepo::write_held`]
    /// or the next [`GitRepo::cas_ref`] (which calls this itself; a caller may call it first).
    /// Every one, also an object the repository holds already (a blob written again): a pack
    /// that holds all a publish wrote is what the mirror's link relies on.
    pub fn pack_held(&self) -> Result<(), GitError> {
        self.held_bytes.set(0);
        let Some(mut storage) = self.repo.objects.reset_object_memory() else {
            return Ok(());
        };
        let mut objects: Vec<(ObjectId, Kind, Vec<u8>)> = storage
            .drain()
            .map(|(id, (kind, data))| (id, kind, data))
            .collect();
        let stem = pack_file::write(&self.git_dir.join("objects").join("pack"), &mut objects)
            .map_err(|source| GitError::WritePack {
                repo: self.git_dir.clone(),
                source,
            })?;
        self.held_packs.borrow_mut().extend(stem);
        Ok(())
    }

    /// The repository's git directory (for a mirror: `<path>/.git`).
    pub fn path(&self) -> &Path {
        &self.git_dir
    }

    /// Where `refname` (a full name such as `refs/heads/main`) points, or `None` if it does not
    /// exist.
    pub fn ref_target(&self, refname: &str) -> Result<Option<ObjectId>, GitError> {
        let name = full_ref_name(refname)?;
        let found = self
            .repo
            .try_find_reference(name.as_ref())
            .map_err(|source| GitError::ReadRef {
                repo: self.git_dir.clone(),
                refname: refname.to_string(),
                source,
            })?;
        match found {
            None => Ok(None),
            Some(reference) => match reference.target().try_id() {
                Some(id) => Ok(Some(id.to_owned())),
                None => Err(GitError::SymbolicRef {
                    repo: self.git_dir.clone(),
                    refname: refname.to_string(),
                }),
            },
        }
    }

    /// Store `bytes` as a blob (a no-op if it already exists) and return its id.
    pub fn write_blob(&self, bytes: &[u8]) -> Result<ObjectId, GitError> {
        let id = self.put_blob(bytes).map_err(|source| GitError::Write {
            repo: self.git_dir.clone(),
            what: format!("a blob of {} bytes", bytes.len()),
            source,
        })?;
        if self.held {
            let held = self.held_bytes.get() + bytes.len();
            self.held_bytes.set(held);
            if held >= HELD_BYTES {
                self.pack_held()?;
            }
        }
        Ok(id)
    }

    /// The bytes of blob `id`.
    pub fn read_blob(&self, id: ObjectId) -> Result<Vec<u8>, GitError> {
        self.read_kind(id, Kind::Blob, "blob")
    }

    /// The bytes of blob `id`, as [`GitRepo::read_blob`], for a reader of many blobs: an
    /// object in one of `blobs`' packs is resolved from the bottom of its delta chain up, each
    /// base it resolves kept in `blobs`' cache (gix's own read keeps only the object asked
    /// for, so reading a packed pool's chapters one after another inflated their whole chain
    /// again for each: ~8 deep at 100,000 chapters, issue #17 point 6). Anything else —
    /// loose, in a pack opened since, or a pack entry this cannot resolve — is read as
    /// `read_blob` reads it, with its errors.
    pub fn read_blob_from(&self, blobs: &mut PackBlobs, id: ObjectId) -> Result<Vec<u8>, GitError> {
        match blobs.read(&id) {
            Some(data) => Ok(data),
            None => self.read_blob(id),
        }
    }

    /// The packs of this repository's object directory, for [`GitRepo::read_blob_from`].
    pub fn pack_blobs(&self) -> PackBlobs {
        let dir = self.repo.objects.store_ref().path().join("pack");
        let mut idx: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "idx"))
                    .collect()
            })
            .unwrap_or_default();
        // A fixed order: a blob in two packs is read from the same one each time.
        idx.sort();
        let bundles = idx
            .iter()
            // A pack that cannot be opened (removed since the listing) is read through gix.
            .filter_map(|p| gix::odb::pack::Bundle::at(p, self.repo.object_hash()).ok())
            .zip(0u32..)
            .map(|(mut bundle, n)| {
                // The cache's key: gix's own is a hash of the pack's path.
                bundle.pack.id = n;
                bundle
            })
            .collect();
        PackBlobs {
            bundles,
            cache: gix::odb::pack::cache::lru::MemoryCappedHashmap::new(PACK_CACHE_BYTES),
            inflate: gix::zlib::Inflate::default(),
            #[cfg(test)]
            applied: 0,
        }
    }

    /// Whether the object database physically holds `id` (no special case for the empty tree,
    /// so a commit is never written over a tree that `git fsck` would call missing).
    pub fn has_object(&self, id: ObjectId) -> bool {
        self.repo.objects.exists(&id)
    }

    /// A new tree = `base` (or the empty tree) with these `path → blob` upserts applied in order:
    /// paths use `/`, missing intermediate trees are created, an existing entry is overwritten
    /// (a later upsert of the same path wins). Only the trees on the upserted paths are read and
    /// rewritten; every other subtree is reused by id. Each blob must already be in the
    /// repository, and each path component must be portable (no `.`, `..`, `.git`, `\`,
    /// Windows device names or control characters).
    pub fn tree_with(
        &self,
        base: Option<ObjectId>,
        upserts: &[(String, ObjectId)],
    ) -> Result<ObjectId, GitError> {
        self.tree_edit(base, upserts, &[])
    }

    /// [`Self::tree_with`], then remove the file entries at `removals` (a path with nothing
    /// there, or a tree there, is left as it is): derived files that are no longer derived.
    pub fn tree_edit(
        &self,
        base: Option<ObjectId>,
        upserts: &[(String, ObjectId)],
        removals: &[String],
    ) -> Result<ObjectId, GitError> {
        self.tree_edit_over(base, &[], upserts, removals)
    }

    /// [`Self::tree_edit`] that first sets the subtrees `trees` (`path → tree id`, written
    /// already): a subtree edited before (a big area with a publish's upserts applied) is not
    /// read, edited and hashed a second time.
    pub fn tree_edit_over(
        &self,
        base: Option<ObjectId>,
        trees: &[(String, ObjectId)],
        upserts: &[(String, ObjectId)],
        removals: &[String],
    ) -> Result<ObjectId, GitError> {
        for path in removals {
            validate_tree_path(path)?;
        }
        for (path, tree) in trees {
            validate_tree_path(path)?;
            self.require_kind(*tree, Kind::Tree, "subtree")?;
        }
        for (path, blob) in upserts {
            validate_tree_path(path)?;
            self.require_kind(*blob, Kind::Blob, "upserted blob")?;
        }
        let root = match base {
            Some(id) if !id.is_empty_tree() => {
                let data = self.read_kind(id, Kind::Tree, "base tree")?;
                gix::objs::Tree::from(self.decode_tree(id, &data)?)
            }
            _ => gix::objs::Tree::default(),
        };
        // The plumbing editor, not `Repository::edit_tree`: the latter re-checks the existence of
        // every entry of every rewritten tree on write, which is O(width) object lookups for a
        // directory of thousands of sessions; here only the upserted blobs are checked (above).
        let mut editor =
            gix::objs::tree::Editor::new(root, &self.repo.objects, self.repo.object_hash());
        // The subtrees first: an upsert below one edits it.
        let entries = (trees.iter().map(|(path, id)| (path, EntryKind::Tree, id)))
            .chain(upserts.iter().map(|(path, id)| (path, EntryKind::Blob, id)));
        for (path, kind, id) in entries {
            editor
                .upsert(path.split('/'), kind, *id)
                .map_err(|source| GitError::Write {
                    repo: self.git_dir.clone(),
                    what: format!("tree entry {path}"),
                    source,
                })?;
        }
        for path in removals {
            editor
                .remove_if_leaf(path.split('/'))
                .map_err(|source| GitError::Write {
                    repo: self.git_dir.clone(),
                    what: format!("removal of {path}"),
                    source,
                })?;
        }
        editor
            .write(|tree| self.put_object(tree))
            .map_err(|source| GitError::Write {
                repo: self.git_dir.clone(),
                what: "a tree".to_string(),
                source,
            })
    }

    /// Every blob in `tree`, recursively, as `(path, blob id)` sorted by path (bytewise).
    /// Reads the whole tree: meant for materializing or auditing, not for the publish path.
    pub fn list_tree(&self, tree: ObjectId) -> Result<Vec<(String, ObjectId)>, GitError> {
        let mut blobs = Vec::new();
        let mut pending = vec![(String::new(), tree)];
        while let Some((prefix, id)) = pending.pop() {
            let data = self.read_kind(id, Kind::Tree, "tree")?;
            for entry in self.decode_tree(id, &data)?.entries {
                if entry.mode.is_commit() {
                    continue; // a submodule link names a commit of another repository
                }
                let name = entry.filename.to_str().map_err(|_| GitError::NonUtf8Path {
                    repo: self.git_dir.clone(),
                    tree: id,
                    path: format!("{prefix}{}", entry.filename.to_str_lossy()),
                })?;
                let path = format!("{prefix}{name}");
                if entry.mode.is_tree() {
                    pending.push((format!("{path}/"), entry.oid.to_owned()));
                } else {
                    blobs.push((path, entry.oid.to_owned()));
                }
            }
        }
        blobs.sort();
        Ok(blobs)
    }

    /// The entries of one tree (not recursive), as `(name, id, is a tree)` in the tree's order;
    /// submodule links are left out. A name that is not UTF-8 is left out too (no document
    /// has one).
    pub fn entries(&self, tree: ObjectId) -> Result<Vec<(String, ObjectId, bool)>, GitError> {
        let data = self.read_kind(tree, Kind::Tree, "tree")?;
        Ok(self
            .decode_tree(tree, &data)?
            .entries
            .into_iter()
            .filter(|entry| !entry.mode.is_commit())
            .filter_map(|entry| {
                let name = entry.filename.to_str().ok()?;
                Some((name.to_owned(), entry.oid.to_owned(), entry.mode.is_tree()))
            })
            .collect())
    }

    /// Blobs of `new` that `old` lacks or holds with other bytes, handed to `each` one at a
    /// time in path order (a tree's entry order is its paths' byte order), so a pull of a
    /// whole pool is never one list. Descends only into subtrees whose ids differ, so the
    /// cost follows the change, not the tree.
    pub fn changed_blobs<E: From<GitError>>(
        &self,
        old: Option<ObjectId>,
        new: ObjectId,
        each: &mut dyn FnMut(String, ObjectId) -> Result<(), E>,
    ) -> Result<(), E> {
        self.changed_under("", old, new, each)
    }

    fn changed_under<E: From<GitError>>(
        &self,
        prefix: &str,
        old: Option<ObjectId>,
        new: ObjectId,
        each: &mut dyn FnMut(String, ObjectId) -> Result<(), E>,
    ) -> Result<(), E> {
        if old == Some(new) {
            return Ok(());
        }
        for (name, oid, is_tree, was) in self.changed_entries(old, new)? {
            let name = name.to_str().map_err(|_| GitError::NonUtf8Path {
                repo: self.git_dir.clone(),
                tree: new,
                path: format!("{prefix}{}", name.to_str_lossy()),
            })?;
            let path = format!("{prefix}{name}");
            if is_tree {
                let old_sub = was.filter(|(_, is_tree)| *is_tree).map(|(id, _)| id);
                self.changed_under(&format!("{path}/"), old_sub, oid, each)?;
            } else if was != Some((oid, false)) {
                each(path, oid)?;
            }
        }
        Ok(())
    }

    /// The entries of tree `new` (name, id, whether a tree, and what `old` holds at that name)
    /// that differ from `old`'s (all of them for `None`), submodules' commits left out. Owned,
    /// so the trees' bytes are not held while their subtrees are walked; an entry the change
    /// left alone (most of a folder of 2,000 sessions) costs a comparison.
    #[allow(clippy::type_complexity)]
    fn changed_entries(
        &self,
        old: Option<ObjectId>,
        new: ObjectId,
    ) -> Result<Vec<(gix::bstr::BString, ObjectId, bool, Option<(ObjectId, bool)>)>, GitError> {
        let (old, old_data) = self.tree_or_empty(old)?;
        let before = self.decode_tree(old, &old_data)?.entries;
        let data = self.read_kind(new, Kind::Tree, "tree")?;
        let after = self.decode_tree(new, &data)?.entries;
        let found = matches(&before, &after);
        let mut entries = Vec::new();
        for (k, entry) in after.iter().enumerate() {
            if entry.mode.is_commit() {
                continue;
            }
            let was = found[k].map(|b| (before[b].oid.to_owned(), before[b].mode.is_tree()));
            let is_tree = entry.mode.is_tree();
            if was == Some((entry.oid.to_owned(), is_tree)) {
                continue;
            }
            entries.push((
                entry.filename.to_owned(),
                entry.oid.to_owned(),
                is_tree,
                was,
            ));
        }
        Ok(entries)
    }

    /// The objects `new` reaches that `old` may lack, for a publish's pack: the commits from
    /// `new` back to `old` along single parents (at most `MAX_CHAIN`), and in each one's tree
    /// every tree and blob whose id differs from its parent's at the same path — a superset
    /// of what `old` lacks (an object `old` holds at another path may be named again), found
    /// by walking only the trees that changed. `None` when there is no such chain (a merge, a
    /// first publish, a longer history): then git's own walk decides.
    pub fn objects_since(
        &self,
        old: Option<ObjectId>,
        new: ObjectId,
    ) -> Result<Option<Vec<ObjectId>>, GitError> {
        const MAX_CHAIN: usize = 16;
        let Some(old) = old else {
            return Ok(None);
        };
        let mut out = Vec::new();
        let mut commit = new;
        for _ in 0..MAX_CHAIN {
            if commit == old {
                return Ok(Some(out));
            }
            let data = self.read_kind(commit, Kind::Commit, "commit")?;
            let decoded = self.decode_commit(commit, &data)?;
            let mut parents = decoded.parents();
            let (Some(parent), None) = (parents.next(), parents.next()) else {
                return Ok(None);
            };
            let tree = decoded.tree();
            out.push(commit);
            let parent_tree = self.commit_tree(parent)?;
            self.changed_objects(Some(parent_tree), tree, &mut out)?;
            commit = parent;
        }
        Ok((commit == old).then_some(out))
    }

    /// `new` and, under it, the trees and blobs whose ids differ from `old`'s at the same
    /// path (all of them when `old` is `None`), appended to `out`.
    fn changed_objects(
        &self,
        old: Option<ObjectId>,
        new: ObjectId,
        out: &mut Vec<ObjectId>,
    ) -> Result<(), GitError> {
        if old == Some(new) {
            return Ok(());
        }
        out.push(new);
        for (_, oid, is_tree, was) in self.changed_entries(old, new)? {
            if is_tree {
                let old_sub = was.filter(|(_, is_tree)| *is_tree).map(|(id, _)| id);
                self.changed_objects(old_sub, oid, out)?;
            } else {
                out.push(oid);
            }
        }
        Ok(())
    }

    /// Tree `id`'s bytes; for `None`, the empty tree's (no bytes, no entries).
    fn tree_or_empty(&self, id: Option<ObjectId>) -> Result<(ObjectId, Vec<u8>), GitError> {
        match id {
            Some(id) => Ok((id, self.read_kind(id, Kind::Tree, "tree")?)),
            None => Ok((ObjectId::empty_tree(self.repo.object_hash()), Vec::new())),
        }
    }

    /// Every blob path whose id differs between trees `old` and `new` (`None`: the empty
    /// tree), as `(path, blob in old, blob in new)` — added, changed and removed alike — in
    /// no set order. Descends only into subtrees whose ids differ, so the cost follows the
    /// change, not the tree (the topic index learns what changed since the tree it records).
    #[allow(clippy::type_complexity)]
    pub fn diff_blobs(
        &self,
        old: Option<ObjectId>,
        new: Option<ObjectId>,
        each: &mut dyn FnMut(String, Option<ObjectId>, Option<ObjectId>),
    ) -> Result<(), GitError> {
        let mut pending = vec![(String::new(), old, new)];
        while let Some((prefix, old, new)) = pending.pop() {
            if old == new {
                continue;
            }
            let (old_id, old_data) = self.tree_or_empty(old)?;
            let (new_id, new_data) = self.tree_or_empty(new)?;
            let before = self.decode_tree(old_id, &old_data)?.entries;
            let after = self.decode_tree(new_id, &new_data)?.entries;
            let found = matches(&before, &after);
            let mut matched = vec![false; before.len()];
            let path = |name: &gix::bstr::BStr| format!("{prefix}{}", name.to_str_lossy());
            for (k, entry) in after.iter().enumerate() {
                let was = found[k].map(|b| {
                    matched[b] = true;
                    (before[b].oid.to_owned(), before[b].mode.is_tree())
                });
                let is_tree = entry.mode.is_tree();
                if entry.mode.is_commit() || was == Some((entry.oid.to_owned(), is_tree)) {
                    continue;
                }
                let old_blob = was.filter(|(_, t)| !*t).map(|(id, _)| id);
                let old_tree = was.filter(|(_, t)| *t).map(|(id, _)| id);
                if is_tree {
                    pending.push((
                        format!("{}/", path(entry.filename)),
                        old_tree,
                        Some(entry.oid.to_owned()),
                    ));
                    if old_blob.is_some() {
                        each(path(entry.filename), old_blob, None);
                    }
                } else {
                    each(path(entry.filename), old_blob, Some(entry.oid.to_owned()));
                    if old_tree.is_some() {
                        pending.push((format!("{}/", path(entry.filename)), old_tree, None));
                    }
                }
            }
            for (b, entry) in before.iter().enumerate() {
                if matched[b] || entry.mode.is_commit() {
                    continue;
                }
                if entry.mode.is_tree() {
                    pending.push((
                        format!("{}/", path(entry.filename)),
                        Some(entry.oid.to_owned()),
                        None,
                    ));
                } else {
                    each(path(entry.filename), Some(entry.oid.to_owned()), None);
                }
            }
        }
        Ok(())
    }

    /// Paths `old` holds a blob at and `new` holds nothing at (files removed), sorted. Descends
    /// only into subtrees whose ids differ.
    pub fn removed_paths(&self, old: ObjectId, new: ObjectId) -> Result<Vec<String>, GitError> {
        let mut out = Vec::new();
        let mut pending = vec![(String::new(), old, Some(new))];
        while let Some((prefix, old_id, new_id)) = pending.pop() {
            if Some(old_id) == new_id {
                continue;
            }
            let (new_id, new_data) = self.tree_or_empty(new_id)?;
            let after = self.decode_tree(new_id, &new_data)?.entries;
            let data = self.read_kind(old_id, Kind::Tree, "tree")?;
            let before = self.decode_tree(old_id, &data)?.entries;
            let found = matches(&after, &before);
            for (k, entry) in before.iter().enumerate() {
                if entry.mode.is_commit() {
                    continue;
                }
                let now = found[k].map(|a| (after[a].oid.to_owned(), after[a].mode.is_tree()));
                if now == Some((entry.oid.to_owned(), entry.mode.is_tree())) {
                    continue;
                }
                let name = entry.filename.to_str_lossy();
                let path = format!("{prefix}{name}");
                if entry.mode.is_tree() {
                    let new_sub = now.filter(|(_, t)| *t).map(|(id, _)| id);
                    pending.push((format!("{path}/"), entry.oid.to_owned(), new_sub));
                } else if now.is_none_or(|(_, is_tree)| is_tree) {
                    out.push(path);
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// A fingerprint of the first commit of `head`'s history (following first parents): the
    /// SHA-1 of its author line and message. A history rewrite (`git filter-repo`,
    /// `git filter-branch`) keeps both even when it changes the commit's tree and id; a pool
    /// created anew has a first commit of its own.
    pub fn root_fingerprint(&self, head: ObjectId) -> Result<String, GitError> {
        let mut current = head;
        // Bounded by the history's length; a cycle is impossible in a content-addressed graph.
        loop {
            let data = self.read_kind(current, Kind::Commit, "commit")?;
            let parent = self.decode_commit(current, &data)?.parents().next();
            match parent {
                Some(parent) => current = parent,
                None => {
                    // The raw commit: its `author` line and its message (after the first
                    // blank line); the tree, parents and committer are what a rewrite changes.
                    let (headers, message) = match data.find(b"\n\n") {
                        Some(at) => (&data[..at], &data[at + 2..]),
                        None => (&data[..], &[][..]),
                    };
                    let mut parts: Vec<&[u8]> = Vec::new();
                    for line in headers.split(|b| *b == b'\n') {
                        if line.starts_with(b"author ") {
                            parts.extend([line, b"\n"]);
                        }
                    }
                    parts.push(message);
                    return Ok(crate::names::hex(&crate::names::sha1(&parts)));
                }
            }
        }
    }

    /// Every blob reachable from any reference (`git rev-list --objects --all`), each once,
    /// with the first path and commit it was met at; trees are read once each. For the leak
    /// scan of the pool's whole history.
    pub fn reachable_blobs(&self) -> Result<Vec<ReachableBlob>, GitError> {
        let mut tips = Vec::new();
        let refs = self.repo.references().map_err(|e| GitError::ReadRef {
            repo: self.git_dir.clone(),
            refname: "refs/*".into(),
            source: e,
        })?;
        let all = refs.all().map_err(|e| GitError::ReadRef {
            repo: self.git_dir.clone(),
            refname: "refs/*".into(),
            source: e,
        })?;
        for reference in all.flatten() {
            if let Some(id) = reference.target().try_id() {
                tips.push(id.to_owned());
            }
        }
        tips.sort();
        tips.dedup();
        let mut commits_seen: HashSet<ObjectId> = HashSet::new();
        let mut trees_seen: HashSet<ObjectId> = HashSet::new();
        let mut blobs_seen: HashSet<ObjectId> = HashSet::new();
        let mut out = Vec::new();
        let mut queue: VecDeque<ObjectId> = tips.into_iter().collect();
        while let Some(commit) = queue.pop_front() {
            if !commits_seen.insert(commit) {
                continue;
            }
            let data = match self.read_object(commit, "commit")? {
                (Kind::Commit, data) => data,
                _ => continue, // a ref to a tag or a blob: not the pool's
            };
            let decoded = self.decode_commit(commit, &data)?;
            queue.extend(decoded.parents());
            let mut trees = vec![(String::new(), decoded.tree())];
            while let Some((prefix, tree)) = trees.pop() {
                if !trees_seen.insert(tree) {
                    continue;
                }
                let data = self.read_kind(tree, Kind::Tree, "tree")?;
                for entry in self.decode_tree(tree, &data)?.entries {
                    if entry.mode.is_commit() {
                        continue;
                    }
                    let path = format!("{prefix}{}", entry.filename.to_str_lossy());
                    let oid = entry.oid.to_owned();
                    if entry.mode.is_tree() {
                        trees.push((format!("{path}/"), oid));
                    } else if blobs_seen.insert(oid) {
                        out.push(ReachableBlob {
                            id: oid,
                            path,
                            commit,
                        });
                    }
                }
            }
        }
        Ok(out)
    }

    /// The blob at `path` in `tree`, or `None` if nothing is there or a tree is there. Reads only
    /// the trees along `path`.
    pub fn blob_at(&self, tree: ObjectId, path: &str) -> Result<Option<ObjectId>, GitError> {
        Ok(self
            .entry_at(tree, path)?
            .filter(|(_, mode)| !mode.is_tree() && !mode.is_commit())
            .map(|(oid, _)| oid))
    }

    /// The tree at `path` in `tree`, or `None` if nothing is there or a blob is there. Reads
    /// only the trees along `path`.
    pub fn tree_at(&self, tree: ObjectId, path: &str) -> Result<Option<ObjectId>, GitError> {
        Ok(self
            .entry_at(tree, path)?
            .filter(|(_, mode)| mode.is_tree())
            .map(|(oid, _)| oid))
    }

    /// The entry at `path` in `tree` (every component before the last must be a tree), or
    /// `None` if nothing is there.
    fn entry_at(
        &self,
        tree: ObjectId,
        path: &str,
    ) -> Result<Option<(ObjectId, gix::objs::tree::EntryMode)>, GitError> {
        validate_tree_path(path)?;
        let mut components = path.split('/').peekable();
        let mut current = tree;
        while let Some(component) = components.next() {
            let Some((oid, mode)) = self.tree_entry(current, component.as_bytes())? else {
                return Ok(None);
            };
            if components.peek().is_none() {
                return Ok(Some((oid, mode)));
            }
            if !mode.is_tree() {
                return Ok(None);
            }
            current = oid;
        }
        Ok(None)
    }

    /// The entry `name` of `tree` (the first of that name), from the tree's name map when a
    /// lookup made one; a big tree read here gets one ([`LOOKUP_TREE_MIN_ENTRIES`]).
    fn tree_entry(
        &self,
        tree: ObjectId,
        name: &[u8],
    ) -> Result<Option<(ObjectId, gix::objs::tree::EntryMode)>, GitError> {
        if let Some(names) = self.lookups.borrow().trees.get(&tree) {
            return Ok(names.get(name).copied());
        }
        let data = self.read_kind(tree, Kind::Tree, "tree")?;
        let decoded = self.decode_tree(tree, &data)?;
        let found = decoded
            .entries
            .iter()
            .find(|entry| entry.filename == name)
            .map(|entry| (entry.oid.to_owned(), entry.mode));
        let mut lookups = self.lookups.borrow_mut();
        #[cfg(test)]
        {
            lookups.reads += 1;
        }
        if decoded.entries.len() >= LOOKUP_TREE_MIN_ENTRIES {
            let mut names = HashMap::with_capacity(decoded.entries.len());
            for entry in &decoded.entries {
                names
                    .entry(entry.filename.to_vec())
                    .or_insert((entry.oid.to_owned(), entry.mode));
            }
            if lookups.entries + names.len() > LOOKUP_CACHE_ENTRIES {
                lookups.trees.clear();
                lookups.entries = 0;
            }
            lookups.entries += names.len();
            lookups.trees.insert(tree, names);
        }
        Ok(found)
    }

    /// The root tree of `commit`.
    pub fn commit_tree(&self, commit: ObjectId) -> Result<ObjectId, GitError> {
        let data = self.read_kind(commit, Kind::Commit, "commit")?;
        let tree = self.decode_commit(commit, &data)?.tree();
        Ok(tree)
    }

    /// Write a commit object; **no ref moves** (see [`GitRepo::cas_ref`]). Author = committer =
    /// `name <email>` at `time_secs` (UTC, `+0000`). A message without a trailing newline gets
    /// one, as `git commit` writes it. The tree and every parent must already be here. The
    /// message is `Redacted`: derived from redacted values or passed through the rules.
    pub fn write_commit(
        &self,
        tree: ObjectId,
        parents: &[ObjectId],
        name: &str,
        email: &str,
        time_secs: i64,
        message: &Redacted<String>,
    ) -> Result<ObjectId, GitError> {
        validate_identity("author name", name)?;
        validate_identity("author email", email)?;
        if time_secs < 0 {
            return Err(GitError::InvalidCommit {
                reason: format!("time {time_secs} is before 1970; git tools reject it"),
            });
        }
        self.require_kind(tree, Kind::Tree, "commit tree")?;
        for parent in parents {
            self.require_kind(*parent, Kind::Commit, "parent commit")?;
        }
        let signature = gix::actor::Signature {
            name: name.into(),
            email: email.into(),
            time: gix::date::Time::new(time_secs, 0),
        };
        let mut message = message.as_str().to_owned();
        if !message.ends_with('\n') {
            message.push('\n');
        }
        let commit = gix::objs::Commit {
            tree,
            parents: parents.iter().copied().collect(),
            author: signature.clone(),
            committer: signature,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        };
        self.put_object(&commit).map_err(|source| GitError::Write {
            repo: self.git_dir.clone(),
            what: "a commit".to_string(),
            source,
        })
    }

    /// Compare-and-swap: move `refname` (full name under `refs/`) from `expected` (`None` = must
    /// not exist) to `new`. Holds gix's `<ref>.lock` file while comparing and writing, so of two
    /// processes racing from the same `expected` exactly one wins; the other gets
    /// [`GitError::RefMoved`] with the winner's value. `new` must already be in this repository.
    /// When the repository keeps reflogs, the entry is signed with `new`'s committer. Objects
    /// held in memory ([`GitRepo::hold_writes`]) are first written as one pack; returns the
    /// packs of held objects written since the last move (when the move fails they are
    /// written all the same, holding objects nothing names yet, and returned by the next).
    pub fn cas_ref(
        &self,
        refname: &str,
        expected: Option<ObjectId>,
        new: ObjectId,
        log_message: &str,
    ) -> Result<Vec<String>, GitError> {
        self.move_ref(refname, Some(expected), new, log_message)
    }

    /// Point `refname` at `new` whatever it names now, flushing nothing: for a ref that is a
    /// hint, not a publication — a local pool's mirror's tracking ref, which only spares a
    /// later `git fetch` sending again what the mirror holds (its readers trust its marker).
    pub fn set_ref(&self, refname: &str, new: ObjectId, log_message: &str) -> Result<(), GitError> {
        self.move_ref(refname, None, new, log_message).map(|_| ())
    }

    /// [`GitRepo::cas_ref`] when `expected` is given (flushed before and after), else
    /// [`GitRepo::set_ref`].
    fn move_ref(
        &self,
        refname: &str,
        cas: Option<Option<ObjectId>>,
        new: ObjectId,
        log_message: &str,
    ) -> Result<Vec<String>, GitError> {
        let name = full_ref_name(refname)?;
        let (kind, data) = self.read_object(new, "new reference target")?;
        let committer = if kind == Kind::Commit {
            let commit = self.decode_commit(new, &data)?;
            Some(commit.committer().map_err(|source| GitError::Decode {
                repo: self.git_dir.clone(),
                id: new,
                kind,
                source,
            })?)
        } else {
            None
        };
        let edit = RefEdit {
            change: Change::Update {
                log: LogChange {
                    mode: RefLog::AndReference,
                    force_create_reflog: false,
                    message: log_message.into(),
                },
                expected: match cas {
                    Some(Some(old)) => PreviousValue::MustExistAndMatch(Target::Object(old)),
                    Some(None) => PreviousValue::MustNotExist,
                    None => PreviousValue::Any,
                },
                new: Target::Object(new),
            },
            name,
            deref: false,
        };
        // A power cut must never leave a ref naming objects that are not on disk: every
        // object written so far (loose files and their directories) is flushed before the ref
        // moves, and the moved ref after. One `syncfs` each: objects are written unsynced by
        // gix, and one flush of the filesystem costs less than an fsync per object file.
        let Some(expected) = cas else {
            return self
                .repo
                .refs
                .transaction()
                .prepare(Some(edit), Fail::Immediately, Fail::Immediately)
                .and_then(|transaction| transaction.commit(committer))
                .map(|_| Vec::new())
                .map_err(|source| GitError::WriteRef {
                    repo: self.git_dir.clone(),
                    refname: refname.to_string(),
                    source,
                });
        };
        // Held objects go into a pack made durable on its own (fsyncs of its files and of the
        // pack directory): no loose file of this handle's is left to flush.
        if self.held {
            self.pack_held()?;
        } else {
            self.flush("objects before the reference moves")?;
        }
        // A writer killed while it held the ref's lock leaves the lock file behind, and every
        // machine's publish would wait on it and fail, forever. A ref transaction holds it for
        // milliseconds: the same lock file (inode, size, time) still there after the whole
        // wait was left by a dead writer, and is removed.
        let lock = self.git_dir.join(format!("{refname}.lock"));
        let lock_seen = file_identity(&lock);
        let wait = Fail::AfterDurationWithBackoff(REF_LOCK_WAIT);
        let outcome = self
            .repo
            .refs
            .transaction()
            .prepare(Some(edit), wait, wait)
            .and_then(|transaction| transaction.commit(committer));
        match outcome {
            // The packs of a lost race are handed out with the next move's: a retry that
            // finds its objects present writes them again, but a caller linking the packs
            // elsewhere gets them all.
            Ok(_) => self
                .flush("the moved reference")
                .map(|()| self.held_packs.take()),
            Err(source) => {
                // gix reports a failed comparison as a generic error; the ref's value now tells a
                // lost race apart from a real write failure.
                let actual = self.ref_target(refname)?;
                if actual != expected {
                    Err(GitError::RefMoved {
                        repo: self.git_dir.clone(),
                        refname: refname.to_string(),
                        expected,
                        actual,
                    })
                } else if lock_seen.is_some()
                    && file_identity(&lock) == lock_seen
                    && std::fs::remove_file(&lock).is_ok()
                {
                    Err(GitError::StaleLockRemoved {
                        repo: self.git_dir.clone(),
                        refname: refname.to_string(),
                        lock,
                    })
                } else {
                    Err(GitError::WriteRef {
                        repo: self.git_dir.clone(),
                        refname: refname.to_string(),
                        source,
                    })
                }
            }
        }
    }

    /// Whether `ancestor` is `descendant` or reachable from it through parents. Walks back from
    /// `descendant` until `ancestor` is found, so a fast-forward of a few commits costs a few
    /// reads; a "no" walks `descendant`'s whole history (unless `ancestor` is absent here, which
    /// answers "no" at once: this repository holds all of `descendant`'s history).
    pub fn is_ancestor(&self, ancestor: ObjectId, descendant: ObjectId) -> Result<bool, GitError> {
        self.require_kind(descendant, Kind::Commit, "descendant commit")?;
        if ancestor == descendant {
            return Ok(true);
        }
        if !self.has_object(ancestor) {
            return Ok(false);
        }
        let mut seen = HashSet::from([descendant]);
        let mut queue = VecDeque::from([descendant]);
        while let Some(id) = queue.pop_front() {
            let data = self.read_kind(id, Kind::Commit, "commit")?;
            for parent in self.decode_commit(id, &data)?.parents() {
                if parent == ancestor {
                    return Ok(true);
                }
                if seen.insert(parent) {
                    queue.push_back(parent);
                }
            }
        }
        Ok(false)
    }

    /// The kind and bytes of `id`, read from the object database itself.
    fn read_object(&self, id: ObjectId, what: &'static str) -> Result<(Kind, Vec<u8>), GitError> {
        let mut data = Vec::new();
        let mut found = self
            .repo
            .objects
            .try_find(&id, &mut data)
            .map(|o| o.map(|o| o.kind));
        if matches!(found, Ok(None)) {
            // Another machine's `pool::pack` may have moved the loose object into a pack this
            // handle has not seen: look again through a handle opened now.
            if let Ok(fresh) = open_isolated(&self.git_dir) {
                found = fresh
                    .objects
                    .try_find(&id, &mut data)
                    .map(|o| o.map(|o| o.kind));
            }
        }
        let kind = match found {
            Ok(Some(kind)) => kind,
            Ok(None) => {
                return Err(GitError::Missing {
                    repo: self.git_dir.clone(),
                    id,
                    what,
                })
            }
            Err(source) => {
                return Err(GitError::Read {
                    repo: self.git_dir.clone(),
                    id,
                    what,
                    source,
                })
            }
        };
        Ok((kind, data))
    }

    fn read_kind(
        &self,
        id: ObjectId,
        expected: Kind,
        what: &'static str,
    ) -> Result<Vec<u8>, GitError> {
        let (actual, data) = self.read_object(id, what)?;
        if actual != expected {
            return Err(GitError::WrongKind {
                repo: self.git_dir.clone(),
                id,
                what,
                expected,
                actual,
            });
        }
        Ok(data)
    }

    /// Fail unless `id` is physically present with kind `expected` (reads only the header).
    fn require_kind(
        &self,
        id: ObjectId,
        expected: Kind,
        what: &'static str,
    ) -> Result<(), GitError> {
        let header = self
            .repo
            .objects
            .try_header(&id)
            .map_err(|source| GitError::Read {
                repo: self.git_dir.clone(),
                id,
                what,
                source,
            })?
            .ok_or_else(|| GitError::Missing {
                repo: self.git_dir.clone(),
                id,
                what,
            })?;
        if header.kind() != expected {
            return Err(GitError::WrongKind {
                repo: self.git_dir.clone(),
                id,
                what,
                expected,
                actual: header.kind(),
            });
        }
        Ok(())
    }

    fn decode_tree<'a>(&self, id: ObjectId, data: &'a [u8]) -> Result<TreeRef<'a>, GitError> {
        TreeRef::from_bytes(data, self.repo.object_hash()).map_err(|source| GitError::Decode {
            repo: self.git_dir.clone(),
            id,
            kind: Kind::Tree,
            source,
        })
    }

    fn decode_commit<'a>(&self, id: ObjectId, data: &'a [u8]) -> Result<CommitRef<'a>, GitError> {
        CommitRef::from_bytes(data, self.repo.object_hash()).map_err(|source| GitError::Decode {
            repo: self.git_dir.clone(),
            id,
            kind: Kind::Commit,
            source,
        })
    }

    /// Store `data` as object `id` of `kind`, refusing bytes that do not hash to `id`.
    /// Flush every pending write of the filesystem holding the repository (one `syncfs`).
    fn flush(&self, step: &'static str) -> Result<(), GitError> {
        let durable = |source| GitError::Durable {
            repo: self.git_dir.clone(),
            step,
            source,
        };
        let dir = std::fs::File::open(&self.git_dir).map_err(durable)?;
        rustix::fs::syncfs(&dir).map_err(|e| durable(e.into()))
    }

    fn write_verified(&self, id: ObjectId, kind: Kind, data: &[u8]) -> Result<(), GitError> {
        let write_error = |source| GitError::Write {
            repo: self.git_dir.clone(),
            what: format!("{kind} {id}"),
            source,
        };
        let actual =
            gix::objs::compute_hash(self.repo.object_hash(), kind, data).map_err(write_error)?;
        if actual != id {
            return Err(GitError::HashMismatch {
                repo: self.git_dir.clone(),
                expected: id,
                actual,
            });
        }
        once_more(|| self.repo.objects.write_buf_with_known_id(kind, data, id))
            .map_err(write_error)?;
        Ok(())
    }
}

/// One step of [`copy_reachable`]'s depth-first walk. `Write` is pushed before the object's
/// children and so runs after all of them: an object lands in the target only once its whole
/// closure has, which keeps "present implies closure present" true even if the copy is killed.
enum CopyStep {
    Visit {
        id: ObjectId,
        expected: Option<Kind>,
        /// The same path's tree in the first parent commit, whose closure the target already
        /// holds by the time this tree is visited: entries equal to it need no lookup.
        baseline: Option<ObjectId>,
    },
    Write {
        id: ObjectId,
        kind: Kind,
        data: Vec<u8>,
    },
}

/// Copy every object reachable from `tip` that `to` lacks into `to`'s object database, and
/// return how many were copied. The walk stops at objects `to` already has — an object present
/// in `to` implies its closure is, since this module only ever writes closed sets (children
/// before parents) — and skips tree entries unchanged from the first parent's tree, so the cost
/// follows what is new, not the pool's size. Local repositories only: no git program, no pack
/// negotiation. Annotated tags are refused.
pub fn copy_reachable(from: &GitRepo, to: &GitRepo, tip: ObjectId) -> Result<u64, GitError> {
    // Probing for objects that are (mostly) absent would make gix re-scan the pack
    // directory on every miss; nothing packs objects into `to` while we copy.
    let mut probe = to.repo.objects.clone();
    probe.refresh_never();
    let mut copied = 0u64;
    let mut visited = HashSet::new();
    let mut stack = vec![CopyStep::Visit {
        id: tip,
        expected: None,
        baseline: None,
    }];
    while let Some(step) = stack.pop() {
        let (id, expected, baseline) = match step {
            CopyStep::Write { id, kind, data } => {
                to.write_verified(id, kind, &data)?;
                copied += 1;
                continue;
            }
            CopyStep::Visit {
                id,
                expected,
                baseline,
            } => (id, expected, baseline),
        };
        if !visited.insert(id) || probe.exists(&id) {
            continue;
        }
        let (kind, data) = from.read_object(id, "reachable object")?;
        if let Some(expected) = expected {
            if kind != expected {
                return Err(GitError::WrongKind {
                    repo: from.git_dir.clone(),
                    id,
                    what: "reachable object",
                    expected,
                    actual: kind,
                });
            }
        }
        let children = match kind {
            Kind::Blob => Vec::new(),
            Kind::Commit => commit_children(from, id, &data)?,
            Kind::Tree => tree_children(from, id, &data, baseline)?,
            Kind::Tag => {
                return Err(GitError::Unsupported {
                    repo: from.git_dir.clone(),
                    id,
                })
            }
        };
        stack.push(CopyStep::Write { id, kind, data });
        stack.extend(children);
    }
    Ok(copied)
}

/// A commit's tree and parents, ordered for the stack so that the parents (pushed last) are
/// copied completely before the tree, whose baseline is the first parent's tree.
fn commit_children(from: &GitRepo, id: ObjectId, data: &[u8]) -> Result<Vec<CopyStep>, GitError> {
    let commit = from.decode_commit(id, data)?;
    let parents: Vec<ObjectId> = commit.parents().collect();
    let baseline = match parents.first() {
        Some(first) => Some(from.commit_tree(*first)?),
        None => None,
    };
    let mut children = vec![CopyStep::Visit {
        id: commit.tree(),
        expected: Some(Kind::Tree),
        baseline,
    }];
    children.extend(parents.into_iter().rev().map(|parent| CopyStep::Visit {
        id: parent,
        expected: Some(Kind::Commit),
        baseline: None,
    }));
    Ok(children)
}

/// A tree's entries that differ from `baseline` (the same path in the parent commit).
fn tree_children(
    from: &GitRepo,
    id: ObjectId,
    data: &[u8],
    baseline: Option<ObjectId>,
) -> Result<Vec<CopyStep>, GitError> {
    let baseline_data = match baseline {
        Some(base) if base != id => {
            Some((base, from.read_kind(base, Kind::Tree, "baseline tree")?))
        }
        _ => None,
    };
    let mut baseline_entries = HashMap::new();
    if let Some((base, base_data)) = &baseline_data {
        for entry in from.decode_tree(*base, base_data)?.entries {
            baseline_entries.insert(entry.filename, (entry.oid, entry.mode.is_tree()));
        }
    }
    let mut children = Vec::new();
    for entry in from.decode_tree(id, data)?.entries {
        if entry.mode.is_commit() {
            continue; // a submodule link names a commit of another repository
        }
        let before = baseline_entries.get(entry.filename);
        if before.is_some_and(|(oid, _)| *oid == entry.oid) {
            continue;
        }
        let is_tree = entry.mode.is_tree();
        children.push(CopyStep::Visit {
            id: entry.oid.to_owned(),
            expected: Some(if is_tree { Kind::Tree } else { Kind::Blob }),
            baseline: before
                .filter(|(_, was_tree)| is_tree && *was_tree)
                .map(|(oid, _)| (*oid).to_owned()),
        });
    }
    Ok(children)
}

/// Fast-forward-only publish between two local repositories: check that `to`'s `refname` still
/// is `expected` (what the caller last saw) and that `new` descends from it, copy the missing
/// objects, then compare-and-swap the ref. A non-fast-forward is refused with
/// [`GitError::NotFastForward`] before anything is copied or moved; a concurrent move anywhere in
/// between ends in [`GitError::RefMoved`] with the ref untouched by us. Returns the number of
/// objects copied (0 when `new` already is `expected`).
pub fn publish_local(
    from: &GitRepo,
    to: &GitRepo,
    refname: &str,
    new: ObjectId,
    expected: Option<ObjectId>,
) -> Result<u64, GitError> {
    let current = to.ref_target(refname)?;
    if current != expected {
        return Err(GitError::RefMoved {
            repo: to.git_dir.clone(),
            refname: refname.to_string(),
            expected,
            actual: current,
        });
    }
    match expected {
        Some(old) if old == new => return Ok(0),
        Some(old) => {
            if !from.is_ancestor(old, new)? {
                return Err(GitError::NotFastForward {
                    repo: to.git_dir.clone(),
                    refname: refname.to_string(),
                    current: old,
                    new,
                });
            }
        }
        None => from.require_kind(new, Kind::Commit, "published commit")?,
    }
    let copied = copy_reachable(from, to, new)?;
    let log_message = match expected {
        Some(_) => "publish: fast-forward",
        None => "publish: created",
    };
    to.cas_ref(refname, expected, new, log_message)?;
    Ok(copied)
}

/// `write` again once if it fails: another machine's `git prune-packed` (`pool::pack`) may
/// remove an empty fan-out directory between gix creating it and moving a loose object in.
fn once_more<T, E>(mut write: impl FnMut() -> Result<T, E>) -> Result<T, E> {
    write().or_else(|_| write())
}

fn open_isolated(path: &Path) -> Result<gix::Repository, gix::Error> {
    gix::open_opts(path, isolated_options())
}

/// Isolated from the user's config, and with room for the packs that `pool::pack` (and other
/// machines) add while this handle is open: gix sizes its pack slots once, from the packs on
/// disk when it opens, and refuses to load more than that (32 by default). Packs stay below
/// logarithmic in the publishes (`pool::pack::ROLL_UP_AT_PACKS`, geometric roll-ups).
fn isolated_options() -> gix::open::Options {
    gix::open::Options::isolated().object_store_slots(
        gix::odb::store::init::Slots::AsNeededByDiskState {
            multiplier: 2.0,
            minimum: 512,
        },
    )
}

fn dir_is_empty(path: &Path) -> Result<bool, GitError> {
    let mut entries = std::fs::read_dir(path).map_err(|source| GitError::ReadDir {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(entries.next().is_none())
}

fn full_ref_name(refname: &str) -> Result<FullName, GitError> {
    let invalid = |reason: String| GitError::InvalidRefName {
        refname: refname.to_string(),
        reason,
    };
    if !refname.starts_with("refs/") {
        return Err(invalid("it must start with refs/".to_string()));
    }
    FullName::try_from(refname).map_err(|error| invalid(error.to_string()))
}

/// Every component must be one a checkout could create on any platform: the pool is shared
/// between machines, and one bad name would break every clone.
fn validate_tree_path(path: &str) -> Result<(), GitError> {
    let invalid = |reason: String| GitError::InvalidPath {
        path: path.to_string(),
        reason,
    };
    if path.is_empty() {
        return Err(invalid("it is empty".to_string()));
    }
    for component in path.split('/') {
        gix::validate::path::component(
            component.as_bytes().as_bstr(),
            None,
            gix::validate::path::component::Options::default(),
        )
        .map_err(|error| invalid(format!("component {component:?}: {error}")))?;
    }
    Ok(())
}

/// `git fsck` rejects identities that are empty or contain `<`, `>` or a line break.
fn validate_identity(field: &str, value: &str) -> Result<(), GitError> {
    if value.trim().is_empty() || value.contains(['<', '>', '\n', '\r', '\0']) {
        return Err(GitError::InvalidCommit {
            reason: format!(
                "{field} {value:?} must be non-empty and contain no '<', '>', line break or NUL"
            ),
        });
    }
    Ok(())
}

/// A file's identity (inode, size, modification time), or `None` when it is absent.
fn file_identity(path: &Path) -> Option<(u64, u64, Option<std::time::SystemTime>)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.ino(), m.len(), m.modified().ok()))
}

/// For each entry of `to`, the entry of `from` of the same name and kind (a file that became
/// a folder, or back, is changed whichever it is matched with). Both trees in git's order of entries (every tree git or gix
/// writes) are walked side by side, so an entry a change left alone costs a comparison, not
/// a hash and a copy of its name; a tree out of that order is looked up by name instead.
fn matches(from: &[EntryRef<'_>], to: &[EntryRef<'_>]) -> Vec<Option<usize>> {
    fn key<'a>(e: &EntryRef<'a>) -> (&'a [u8], bool) {
        (e.filename.as_bytes(), e.mode.is_tree())
    }
    let ordered = |v: &[EntryRef<'_>]| {
        v.windows(2).all(|w| {
            let ((a, at), (b, bt)) = (key(&w[0]), key(&w[1]));
            tree_order(a, at, b, bt).is_lt()
        })
    };
    if !ordered(from) || !ordered(to) {
        let by_name: HashMap<(&[u8], bool), usize> =
            from.iter().enumerate().map(|(i, e)| (key(e), i)).collect();
        return to.iter().map(|e| by_name.get(&key(e)).copied()).collect();
    }
    let mut at = 0;
    to.iter()
        .map(|e| {
            let (name, tree) = key(e);
            while from.get(at).is_some_and(|f| {
                let (f_name, f_tree) = key(f);
                tree_order(f_name, f_tree, name, tree).is_lt()
            }) {
                at += 1;
            }
            Some(at).filter(|&i| from.get(i).is_some_and(|f| key(f) == (name, tree)))
        })
        .collect()
}

/// Git's order of a tree's entries: by name, a tree's name as if it ended in `/`.
fn tree_order(a: &[u8], a_tree: bool, b: &[u8], b_tree: bool) -> std::cmp::Ordering {
    let common = a.len().min(b.len());
    a[..common].cmp(&b[..common]).then_with(|| {
        let next = |name: &[u8], tree: bool| name.get(common).copied().or(tree.then_some(b'/'));
        next(a, a_tree).cmp(&next(b, b_tree))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::echoed_text;
    use std::process::{Command, Stdio};
    use std::sync::{Arc, Barrier};

    const NAME: &str = "dsh-chapters";
    const EMAIL: &str = "h1@dsh-chapters.local";
    const MAIN: &str = "refs/heads/main";
    const T0: i64 = 1_700_000_000;

    /// Runs the real `git` (tests only), isolated from the machine's git configuration.
    pub(super) fn git_output(
        dir: &Path,
        args: &[&str],
        stdin: Option<&[u8]>,
    ) -> std::process::Output {
        use std::io::Write as _;
        let mut child = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn git");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(bytes) = stdin {
            input.write_all(bytes).expect("write git stdin");
        }
        drop(input);
        child.wait_with_output().expect("wait for git")
    }

    fn git(dir: &Path, args: &[&str]) -> String {
        git_in(dir, args, None)
    }

    /// A packed pool's blobs read one after another: the versions of one document that
    /// `git pack-objects` chains as deltas (~8 deep for a year's pool, up to 50 here), read in
    /// an order that has nothing to do with their chains, come out as gix reads them while
    /// each delta is applied about once — gix's own read applies a chain down to the
    /// last object it was asked for each time (issue #17 point 6).
    #[test]
    fn blobs_read_from_a_pack_resolve_each_delta_base_once() {
        // Bases named by offset (what `git repack` and `pool::pack` write) and by id.
        for by_offset in [true, false] {
            read_chained_versions(by_offset);
        }
    }

    fn read_chained_versions(by_offset: bool) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = GitRepo::init_bare(dir.path()).expect("init");
        // Each version changes one more line: its nearest version is the one before, so
        // git chains them (a version that only grew would be a delta of the largest, one deep).
        let mut lines: Vec<String> = (0..200u64)
            .map(|l| {
                format!(
                    "line {l:03}: {:016x}\n",
                    (l + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                )
            })
            .collect();
        let mut ids = Vec::new();
        for i in 0..60 {
            lines[i * 3] = format!("line {:03}: changed in version {i}\n", i * 3);
            ids.push(repo.write_blob(lines.concat().as_bytes()).expect("blob"));
        }
        let names: String = ids.iter().map(|id| format!("{id} chapter.md\n")).collect();
        git_in(
            dir.path(),
            &[
                "pack-objects",
                "-q",
                "--window=100",
                "--depth=50",
                if by_offset {
                    "--delta-base-offset"
                } else {
                    "--no-reuse-delta"
                },
                "objects/pack/pack",
            ],
            Some(names.as_bytes()),
        );
        let pack = std::fs::read_dir(dir.path().join("objects/pack"))
            .expect("pack dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "idx"))
            .expect("a pack");
        let verify = git(
            dir.path(),
            &["verify-pack", "-v", pack.to_str().expect("utf8")],
        );
        let deepest = verify
            .lines()
            .filter_map(|l| l.strip_prefix("chain length = "))
            .filter_map(|l| l.split(':').next()?.parse::<u32>().ok())
            .max()
            .unwrap_or(0);
        assert!(deepest >= 20, "the pack chains the versions: {verify}");

        let repo = GitRepo::open(dir.path()).expect("open");
        let mut blobs = repo.pack_blobs();
        let mut order = ids.clone();
        order.sort();
        for id in &order {
            assert_eq!(
                repo.read_blob_from(&mut blobs, *id).expect("from the pack"),
                repo.read_blob(*id).expect("through gix"),
                "blob {id}"
            );
        }
        assert!(
            blobs.applied <= ids.len() as u32,
            "{} deltas applied to read {} blobs (by offset: {by_offset})",
            blobs.applied,
            ids.len()
        );
        // Anything not a blob of the packs is read as `read_blob` reads it, errors too.
        let loose = repo.write_blob(b"loose").expect("blob");
        assert_eq!(
            repo.read_blob_from(&mut blobs, loose).expect("loose"),
            b"loose"
        );
        let tree = repo
            .tree_with(None, &[("a.md".into(), ids[0])])
            .expect("tree");
        assert!(matches!(
            repo.read_blob_from(&mut blobs, tree),
            Err(GitError::WrongKind { .. })
        ));
    }

    fn git_in(dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> String {
        let out = git_output(dir, args, stdin);
        assert!(
            out.status.success(),
            "git {args:?} in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("git prints UTF-8 here")
    }

    /// `git fsck --strict` must exit 0 and report nothing but notices (an unborn `HEAD` in a
    /// repository that holds only loose objects) — dangling objects aside.
    fn assert_fsck_clean(dir: &Path) {
        let out = git_output(
            dir,
            &["fsck", "--strict", "--no-dangling", "--no-progress"],
            None,
        );
        let report: Vec<String> = [out.stdout, out.stderr]
            .iter()
            .flat_map(|bytes| {
                String::from_utf8_lossy(bytes)
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .filter(|line| !line.starts_with("notice:"))
            .collect();
        assert!(
            out.status.success() && report.is_empty(),
            "fsck of {}: {report:?}",
            dir.display()
        );
    }

    fn oid(hex: &str) -> ObjectId {
        ObjectId::from_hex(hex.trim().as_bytes()).expect("hex object id")
    }

    fn commit_files(
        repo: &GitRepo,
        parent: Option<ObjectId>,
        files: &[(&str, &str)],
        time: i64,
    ) -> ObjectId {
        let base = parent.map(|p| repo.commit_tree(p).expect("parent tree"));
        let upserts: Vec<(String, ObjectId)> = files
            .iter()
            .map(|(path, text)| {
                (
                    path.to_string(),
                    repo.write_blob(text.as_bytes()).expect("blob"),
                )
            })
            .collect();
        let tree = repo.tree_with(base, &upserts).expect("tree");
        let parents: Vec<ObjectId> = parent.into_iter().collect();
        repo.write_commit(
            tree,
            &parents,
            NAME,
            EMAIL,
            time,
            &echoed_text("archive chapters"),
        )
        .expect("commit")
    }

    fn new_bare() -> (tempfile::TempDir, GitRepo) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = GitRepo::init_bare(&dir.path().join("pool")).expect("init");
        (dir, repo)
    }

    #[test]
    fn removed_paths_reachable_blobs_and_the_root_fingerprint() {
        let (_dir, repo) = new_bare();
        let (one, two) = (
            repo.write_blob(b"one").expect("blob"),
            repo.write_blob(b"two").expect("blob"),
        );
        let old = repo
            .tree_with(
                None,
                &[
                    ("a/x.md".into(), one),
                    ("a/y.md".into(), two),
                    ("b/c/z.md".into(), one),
                    ("keep.txt".into(), two),
                ],
            )
            .expect("tree");
        let new = repo
            .tree_edit(Some(old), &[], &["a/x.md".into(), "b/c/z.md".into()])
            .expect("edit");
        assert_eq!(
            repo.removed_paths(old, new).expect("diff"),
            vec!["a/x.md".to_string(), "b/c/z.md".to_string()]
        );
        assert!(repo.removed_paths(new, new).expect("same").is_empty());
        let first = repo
            .write_commit(
                old,
                &[],
                "dsh-chapters",
                "a@b",
                1_700_000_000,
                &echoed_text("first"),
            )
            .expect("commit");
        let second = repo
            .write_commit(
                new,
                &[first],
                "dsh-chapters",
                "a@b",
                1_700_000_100,
                &echoed_text("second"),
            )
            .expect("commit");
        repo.cas_ref("refs/heads/main", None, second, "test")
            .expect("ref");
        let blobs = repo.reachable_blobs().expect("walk");
        let ids: HashSet<ObjectId> = blobs.iter().map(|b| b.id).collect();
        assert_eq!(
            ids,
            HashSet::from([one, two]),
            "each blob once, the history's too"
        );
        // A rewrite keeps the first commit's author and message, not its id.
        let other_tree = repo
            .tree_with(None, &[("k.txt".into(), two)])
            .expect("tree");
        let rewritten = repo
            .write_commit(
                other_tree,
                &[],
                "dsh-chapters",
                "a@b",
                1_700_000_000,
                &echoed_text("first"),
            )
            .expect("commit");
        let replaced = repo
            .write_commit(
                other_tree,
                &[],
                "dsh-chapters",
                "a@b",
                1_800_000_000,
                &echoed_text("first"),
            )
            .expect("commit");
        let root = repo.root_fingerprint(second).expect("fp");
        assert_eq!(root, repo.root_fingerprint(first).expect("fp"));
        assert_eq!(root, repo.root_fingerprint(rewritten).expect("fp"));
        assert_ne!(root, repo.root_fingerprint(replaced).expect("fp"));
    }

    #[test]
    fn changed_blobs_come_one_at_a_time_in_path_order_and_follow_the_change() {
        let (_dir, repo) = new_bare();
        let [one, two, three] =
            [b"one" as &[u8], b"two", b"three"].map(|b| repo.write_blob(b).expect("blob"));
        // Names where a tree's entry order and its paths' byte order could differ
        // (`a-b` before `a/`, `a.md` before `a/`, `a0` after).
        let paths = ["a-b", "a.md", "a/x", "a/y/z", "a0", "b/c"];
        let files: Vec<(String, ObjectId)> = paths.iter().map(|p| (p.to_string(), one)).collect();
        let first = repo.tree_with(None, &files).expect("tree");
        let mut got = Vec::new();
        repo.changed_blobs(None, first, &mut |path, id| -> Result<(), GitError> {
            got.push((path, id));
            Ok(())
        })
        .expect("diff");
        let mut sorted = files.clone();
        sorted.sort();
        assert_eq!(got, sorted);
        let second = repo
            .tree_with(
                Some(first),
                &[
                    ("a/y/z".into(), two),
                    ("c/new".into(), three),
                    ("a0".into(), one),
                ],
            )
            .expect("tree");
        let mut got = Vec::new();
        repo.changed_blobs(Some(first), second, &mut |path,
                                                      _|
         -> Result<(), GitError> {
            got.push(path);
            Ok(())
        })
        .expect("diff");
        assert_eq!(got, ["a/y/z", "c/new"]);
        // The caller's error stops the walk.
        let mut seen = 0;
        let stopped = repo.changed_blobs(None, first, &mut |_, _| {
            seen += 1;
            Err(GitError::InvalidCommit {
                reason: "stop".into(),
            })
        });
        assert!(stopped.is_err());
        assert_eq!(seen, 1);
    }

    /// The side-by-side walk finds what a lookup by name and kind finds: git's order (a
    /// folder's name as if it ended in `/`), a file that became a folder unmatched, and a
    /// tree out of order looked up by name instead.
    #[test]
    fn tree_entries_are_matched_by_name_and_kind_in_any_order() {
        let id = ObjectId::null(gix::hash::Kind::Sha1);
        let entry = |name: &'static str, tree: bool| EntryRef {
            mode: if tree {
                EntryKind::Tree.into()
            } else {
                EntryKind::Blob.into()
            },
            filename: name.as_bytes().as_bstr(),
            oid: id.as_ref(),
        };
        let from = [
            entry("a-b", false),
            entry("a.md", false),
            entry("a", true),
            entry("a0", false),
            entry("x", false),
        ];
        let to = [
            entry("a.md", false),
            entry("a", true),
            entry("b", false),
            entry("x", true),
        ];
        assert_eq!(matches(&from, &to), [Some(1), Some(2), None, None]);
        let shuffled = [from[3], from[0], from[2], from[1], from[4]];
        assert_eq!(matches(&shuffled, &to), [Some(3), Some(2), None, None]);
        assert_eq!(
            matches(&to, &shuffled),
            [None, None, Some(1), Some(0), None]
        );
    }

    #[test]
    fn blob_round_trip_is_readable_by_git() {
        let (_dir, repo) = new_bare();
        for bytes in [
            &b""[..],
            b"chapter one\n",
            b"\x00\xff binary \x80",
            &vec![b'x'; 200_000],
        ] {
            let id = repo.write_blob(bytes).expect("write");
            assert_eq!(repo.read_blob(id).expect("read"), bytes);
            assert!(repo.has_object(id));
            let from_git = git_output(repo.path(), &["cat-file", "blob", &id.to_string()], None);
            assert!(from_git.status.success());
            assert_eq!(from_git.stdout, bytes);
            let hashed = git_in(repo.path(), &["hash-object", "--stdin"], Some(bytes));
            assert_eq!(oid(&hashed), id, "same id as git computes");
        }
        assert_eq!(
            repo.write_blob(b"chapter one\n").expect("again"),
            repo.write_blob(b"chapter one\n").expect("again"),
            "writing twice is idempotent"
        );
        assert_fsck_clean(repo.path());
    }

    #[test]
    fn read_blob_refuses_missing_and_non_blob_objects() {
        let (_dir, repo) = new_bare();
        let absent = oid("1111111111111111111111111111111111111111");
        assert!(!repo.has_object(absent));
        assert!(
            matches!(repo.read_blob(absent), Err(GitError::Missing { id, .. }) if id == absent)
        );
        let tree = repo.tree_with(None, &[]).expect("empty tree");
        assert!(
            repo.has_object(tree),
            "the empty tree is physically written"
        );
        match repo.read_blob(tree) {
            Err(GitError::WrongKind {
                expected: Kind::Blob,
                actual: Kind::Tree,
                ..
            }) => {}
            other => panic!("expected WrongKind, got {other:?}"),
        }
    }

    #[test]
    fn tree_with_creates_nested_trees_overwrites_and_reuses_untouched_subtrees() {
        let (_dir, repo) = new_bare();
        let one = repo.write_blob(b"one").expect("blob");
        let two = repo.write_blob(b"two").expect("blob");
        let three = repo.write_blob(b"three").expect("blob");
        let first = repo
            .tree_with(
                None,
                &[
                    ("chapters/pk/s1/001.md".to_string(), one),
                    ("chapters/pk/s2/001.md".to_string(), two),
                    ("project.yml".to_string(), three),
                    ("artifacts/pk/ab/abcd".to_string(), one),
                ],
            )
            .expect("first tree");
        let second = repo
            .tree_with(
                Some(first),
                &[
                    ("chapters/pk/s1/001.md".to_string(), three),
                    ("chapters/pk/s1/002.md".to_string(), two),
                    ("chapters/pk/s1/002.md".to_string(), one),
                ],
            )
            .expect("second tree");
        let listed = git(repo.path(), &["ls-tree", "-r", &second.to_string()]);
        let expected = format!(
            "100644 blob {one}\tartifacts/pk/ab/abcd\n\
             100644 blob {three}\tchapters/pk/s1/001.md\n\
             100644 blob {one}\tchapters/pk/s1/002.md\n\
             100644 blob {two}\tchapters/pk/s2/001.md\n\
             100644 blob {three}\tproject.yml\n"
        );
        assert_eq!(
            listed, expected,
            "overwrite in place, the later duplicate upsert wins"
        );
        for untouched in ["artifacts", "chapters/pk/s2"] {
            assert_eq!(
                git(repo.path(), &["rev-parse", &format!("{first}:{untouched}")]),
                git(
                    repo.path(),
                    &["rev-parse", &format!("{second}:{untouched}")]
                ),
                "{untouched} is reused by id, not rewritten"
            );
        }
        assert_eq!(repo.tree_with(Some(second), &[]).expect("no-op"), second);
        assert_fsck_clean(repo.path());
    }

    #[test]
    fn tree_with_refuses_hostile_paths_and_absent_or_non_blob_ids() {
        let (_dir, repo) = new_bare();
        let blob = repo.write_blob(b"x").expect("blob");
        let long = "a/".repeat(300) + "end.md";
        for path in [
            "",
            "/abs.md",
            "trailing/",
            "a//b.md",
            "../escape.md",
            "a/./b.md",
            "a/../b.md",
            ".git/config",
            "x/.GIT/hooks",
            "back\\slash.md",
            "nul\0byte.md",
            "c:drive.md",
            "CON",
            "ctl\u{1}char.md",
        ] {
            match repo.tree_with(None, &[(path.to_string(), blob)]) {
                Err(GitError::InvalidPath { path: named, .. }) => assert_eq!(named, path),
                other => panic!("{path:?} accepted: {other:?}"),
            }
        }
        let deep = repo
            .tree_with(None, &[(long.clone(), blob)])
            .expect("deep paths are fine");
        assert_eq!(repo.blob_at(deep, &long).expect("lookup"), Some(blob));
        let absent = oid("2222222222222222222222222222222222222222");
        assert!(matches!(
            repo.tree_with(None, &[("a.md".to_string(), absent)]),
            Err(GitError::Missing { id, .. }) if id == absent
        ));
        let tree = repo
            .tree_with(None, &[("a.md".to_string(), blob)])
            .expect("tree");
        assert!(matches!(
            repo.tree_with(None, &[("b.md".to_string(), tree)]),
            Err(GitError::WrongKind {
                expected: Kind::Blob,
                ..
            })
        ));
        assert!(matches!(
            repo.tree_with(Some(blob), &[]),
            Err(GitError::WrongKind {
                expected: Kind::Tree,
                ..
            })
        ));
    }

    #[test]
    fn list_tree_is_recursive_and_sorted_like_git() {
        let (_dir, repo) = new_bare();
        let names = [
            "z.md", "a/b/c.md", "a.md", "a-b.md", "a/a.md", "m/n.md", "a/b.md",
        ];
        let upserts: Vec<(String, ObjectId)> = names
            .iter()
            .map(|name| {
                (
                    name.to_string(),
                    repo.write_blob(name.as_bytes()).expect("blob"),
                )
            })
            .collect();
        let tree = repo.tree_with(None, &upserts).expect("tree");
        let listed = repo.list_tree(tree).expect("list");
        let mut expected = upserts.clone();
        expected.sort();
        assert_eq!(listed, expected);
        let from_git: Vec<String> = git(
            repo.path(),
            &["ls-tree", "-r", "--name-only", &tree.to_string()],
        )
        .lines()
        .map(str::to_string)
        .collect();
        let ours: Vec<String> = listed.into_iter().map(|(path, _)| path).collect();
        assert_eq!(ours, from_git);
        assert!(repo
            .list_tree(repo.tree_with(None, &[]).expect("empty"))
            .expect("list")
            .is_empty());
    }

    #[test]
    fn list_tree_refuses_a_non_utf8_name_written_by_someone_else() {
        let (_dir, repo) = new_bare();
        let blob = repo.write_blob(b"x").expect("blob");
        let mut line = format!("100644 blob {blob}\t").into_bytes();
        line.extend_from_slice(b"bad\xffname.md\n");
        let tree = oid(&git_in(repo.path(), &["mktree"], Some(&line)));
        match repo.list_tree(tree) {
            Err(GitError::NonUtf8Path { tree: named, .. }) => assert_eq!(named, tree),
            other => panic!("expected NonUtf8Path, got {other:?}"),
        }
    }

    #[test]
    fn blob_at_finds_one_path_without_listing() {
        let (_dir, repo) = new_bare();
        let blob = repo.write_blob(b"body").expect("blob");
        let other = repo.write_blob(b"other").expect("blob");
        let tree = repo
            .tree_with(
                None,
                &[
                    ("chapters/pk/s1/001.md".to_string(), blob),
                    ("top.md".to_string(), other),
                ],
            )
            .expect("tree");
        assert_eq!(
            repo.blob_at(tree, "chapters/pk/s1/001.md").expect("ok"),
            Some(blob)
        );
        assert_eq!(repo.blob_at(tree, "top.md").expect("ok"), Some(other));
        for absent in [
            "chapters/pk/s1/002.md",
            "chapters/pk",
            "top.md/below",
            "nothing/here.md",
        ] {
            assert_eq!(repo.blob_at(tree, absent).expect("ok"), None, "{absent}");
        }
        assert!(matches!(
            repo.blob_at(tree, "../x"),
            Err(GitError::InvalidPath { .. })
        ));
        assert!(matches!(
            repo.blob_at(blob, "x"),
            Err(GitError::WrongKind { .. })
        ));
    }

    #[test]
    fn a_big_tree_is_read_once_for_many_lookups_and_answers_as_a_scan() {
        // A folder of many sessions (as `chapters/<pk>/` is), looked up path after path.
        let (_dir, repo) = new_bare();
        let blob = repo.write_blob(b"body").expect("blob");
        let n = LOOKUP_TREE_MIN_ENTRIES * 2;
        let files: Vec<(String, ObjectId)> = (0..n)
            .map(|i| (format!("chapters/pk/s{i:03}/001.md"), blob))
            .chain([("chapters/pk/s000.md".to_string(), blob)])
            .collect();
        let tree = repo.tree_with(None, &files).expect("tree");
        let reads = || repo.lookups.borrow().reads;
        for (path, _) in &files {
            assert_eq!(repo.blob_at(tree, path).expect("ok"), Some(blob), "{path}");
        }
        // `pk` (big) read once; the small root, `chapters` and each session's tree each time.
        assert_eq!(reads(), 1 + 3 * n + 2);
        let before = reads();
        for absent in [
            "chapters/pk/s999/001.md",
            "chapters/pk/s001",
            "chapters/pk/s000.md/x",
        ] {
            assert_eq!(repo.blob_at(tree, absent).expect("ok"), None, "{absent}");
        }
        assert!(repo
            .tree_at(tree, "chapters/pk/s001")
            .expect("ok")
            .is_some());
        assert_eq!(repo.tree_at(tree, "chapters/pk/s000.md").expect("ok"), None);
        // The big tree answered from its map; only the root and `chapters` were read again.
        assert_eq!(reads(), before + 2 * 5);
    }

    #[test]
    fn commits_carry_parents_and_the_exact_author_line() {
        let (_dir, repo) = new_bare();
        let root = commit_files(&repo, None, &[("a.md", "a")], T0);
        let left = commit_files(&repo, Some(root), &[("l.md", "l")], T0 + 1);
        let right = commit_files(&repo, Some(root), &[("r.md", "r")], T0 + 2);
        let tree = repo.commit_tree(left).expect("tree");
        let merge = repo
            .write_commit(
                tree,
                &[left, right],
                NAME,
                EMAIL,
                T0 + 3,
                &echoed_text("merge\n\nbody"),
            )
            .expect("merge commit");
        repo.cas_ref(MAIN, None, merge, "test").expect("ref");
        let raw = git(repo.path(), &["cat-file", "-p", &merge.to_string()]);
        assert!(
            raw.contains(&format!("\nparent {left}\nparent {right}\n")),
            "{raw}"
        );
        assert!(
            raw.contains(&format!(
                "\nauthor dsh-chapters <h1@dsh-chapters.local> {} +0000\n",
                T0 + 3
            )),
            "{raw}"
        );
        assert!(raw.contains(&format!(
            "\ncommitter dsh-chapters <h1@dsh-chapters.local> {} +0000\n",
            T0 + 3
        )));
        assert!(
            raw.ends_with("\n\nmerge\n\nbody\n"),
            "message gets git's trailing newline: {raw:?}"
        );
        let log = git(repo.path(), &["log", "--format=%an%ae", MAIN]);
        assert_eq!(log, format!("{NAME}{EMAIL}\n").repeat(4));
        assert_eq!(repo.commit_tree(merge).expect("tree"), tree);
        assert_eq!(
            oid(&git(
                repo.path(),
                &["rev-parse", &format!("{merge}^{{tree}}")]
            )),
            tree
        );
        assert_fsck_clean(repo.path());
    }

    #[test]
    fn write_commit_refuses_bad_identities_times_and_missing_objects() {
        let (_dir, repo) = new_bare();
        let tree = repo.tree_with(None, &[]).expect("tree");
        for (name, email) in [
            ("", EMAIL),
            ("a<b", EMAIL),
            (NAME, "x>y"),
            ("two\nlines", EMAIL),
            (NAME, " "),
        ] {
            assert!(
                matches!(
                    repo.write_commit(tree, &[], name, email, T0, &echoed_text("m")),
                    Err(GitError::InvalidCommit { .. })
                ),
                "{name:?} {email:?}"
            );
        }
        assert!(matches!(
            repo.write_commit(tree, &[], NAME, EMAIL, -1, &echoed_text("m")),
            Err(GitError::InvalidCommit { .. })
        ));
        let absent = oid("3333333333333333333333333333333333333333");
        assert!(matches!(
            repo.write_commit(tree, &[absent], NAME, EMAIL, T0, &echoed_text("m")),
            Err(GitError::Missing {
                what: "parent commit",
                ..
            })
        ));
        assert!(matches!(
            repo.write_commit(absent, &[], NAME, EMAIL, T0, &echoed_text("m")),
            Err(GitError::Missing {
                what: "commit tree",
                ..
            })
        ));
        assert!(matches!(
            repo.write_commit(tree, &[tree], NAME, EMAIL, T0, &echoed_text("m")),
            Err(GitError::WrongKind {
                expected: Kind::Commit,
                ..
            })
        ));
    }

    /// Loose object files under `objects/xx/` (the pack directory not counted).
    fn loose_objects(git_dir: &Path) -> usize {
        std::fs::read_dir(git_dir.join("objects"))
            .expect("objects")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.file_name().is_some_and(|n| n.len() == 2))
            .map(|p| std::fs::read_dir(p).expect("fan-out").count())
            .sum()
    }

    #[test]
    fn held_writes_are_read_back_from_memory_and_packed_once_before_the_ref_moves() {
        let (_dir, mut repo) = new_bare();
        let first = commit_files(&repo, None, &[("a.md", "a"), ("b/c.md", "c")], T0);
        repo.cas_ref(MAIN, None, first, "create").expect("create");
        let before = loose_objects(repo.path());
        repo.hold_writes();
        // Written again (an unchanged blob) and new: read back before anything is on disk.
        let second = commit_files(&repo, Some(first), &[("a.md", "a"), ("d.md", "d")], T0 + 1);
        assert_eq!(
            loose_objects(repo.path()),
            before,
            "a held write went loose"
        );
        let other = GitRepo::open(repo.path()).expect("open");
        assert!(
            !other.has_object(second),
            "another handle saw a held object"
        );
        assert!(repo.has_object(second));
        let tree = repo.commit_tree(second).expect("tree");
        let d = repo.blob_at(tree, "d.md").expect("find").expect("d.md");
        assert_eq!(repo.read_blob(d).expect("read"), b"d");

        let packs = repo
            .cas_ref(MAIN, Some(first), second, "advance")
            .expect("advance");
        let [stem] = packs.as_slice() else {
            panic!("one pack of the held objects: {packs:?}");
        };
        assert_eq!(loose_objects(repo.path()), before);
        let idx = repo.path().join(format!("objects/pack/{stem}.idx"));
        let listed = git(repo.path(), &["verify-pack", "-v", &idx.to_string_lossy()]);
        // The commit, its tree, the blobs written (`a.md`'s again): all the publish wrote.
        let packed: Vec<&str> = listed
            .lines()
            .filter(|l| l.len() > 40 && l.as_bytes()[40] == b' ')
            .collect();
        assert_eq!(packed.len(), 4, "{listed}");
        assert_fsck_clean(repo.path());
        assert_eq!(
            other.read_blob(d).expect("packed, seen by another handle"),
            b"d"
        );
        assert_eq!(repo.read_blob(d).expect("read from the pack"), b"d");
        // A lost race's pack comes with the next move's.
        let third = commit_files(&repo, Some(second), &[("e.md", "e")], T0 + 2);
        assert!(matches!(
            repo.cas_ref(MAIN, Some(first), third, "stale"),
            Err(GitError::RefMoved { .. })
        ));
        let fourth = commit_files(&repo, Some(third), &[("f.md", "f")], T0 + 3);
        let packs = repo
            .cas_ref(MAIN, Some(second), fourth, "advance")
            .expect("advance");
        assert_eq!(packs.len(), 2, "{packs:?}");
        assert_fsck_clean(repo.path());
        // Nothing held: nothing more is packed.
        assert_eq!(repo.write_held().expect("nothing"), Vec::<String>::new());
    }

    #[test]
    fn held_blobs_past_the_bound_are_packed_early_and_handed_out_with_the_move() {
        let (_dir, mut repo) = new_bare();
        repo.hold_writes();
        let packs_on_disk = |repo: &GitRepo| {
            std::fs::read_dir(repo.path().join("objects/pack"))
                .map(|d| {
                    d.filter(|e| {
                        e.as_ref()
                            .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "idx"))
                    })
                    .count()
                })
                .unwrap_or(0)
        };
        let big = "x".repeat(HELD_BYTES / 2 + 1);
        let files: Vec<(String, String)> = (0..3)
            .map(|n| (format!("big/{n}.md"), format!("{n}{big}")))
            .collect();
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let first = commit_files(&repo, None, &files, T0);
        // Two blobs passed the bound: packed before the ref moves, the rest with it.
        assert_eq!(packs_on_disk(&repo), 1);
        let packs = repo.cas_ref(MAIN, None, first, "create").expect("create");
        assert_eq!(packs.len(), 2, "{packs:?}");
        assert_eq!(packs_on_disk(&repo), 2);
        assert_eq!(loose_objects(repo.path()), 0);
        assert_fsck_clean(repo.path());
    }

    #[test]
    fn cas_ref_moves_only_from_the_expected_value() {
        let (_dir, repo) = new_bare();
        let first = commit_files(&repo, None, &[("a.md", "a")], T0);
        let second = commit_files(&repo, Some(first), &[("b.md", "b")], T0 + 1);
        let third = commit_files(&repo, Some(second), &[("c.md", "c")], T0 + 2);
        assert_eq!(repo.ref_target(MAIN).expect("read"), None);
        repo.cas_ref(MAIN, None, first, "create").expect("create");
        assert_eq!(repo.ref_target(MAIN).expect("read"), Some(first));
        assert_eq!(oid(&git(repo.path(), &["rev-parse", MAIN])), first);

        match repo.cas_ref(MAIN, None, second, "create again") {
            Err(GitError::RefMoved {
                expected: None,
                actual: Some(actual),
                ..
            }) => assert_eq!(actual, first),
            other => panic!("MustNotExist on an existing ref: {other:?}"),
        }
        repo.cas_ref(MAIN, Some(first), second, "advance")
            .expect("advance");
        let stale = repo.cas_ref(MAIN, Some(first), third, "stale");
        match &stale {
            Err(GitError::RefMoved {
                expected: Some(e),
                actual: Some(a),
                refname,
                ..
            }) => {
                assert_eq!((*e, *a, refname.as_str()), (first, second, MAIN));
            }
            other => panic!("stale expected: {other:?}"),
        }
        let message = stale.expect_err("stale").to_string();
        assert!(
            message.contains(&first.to_string()) && message.contains(&second.to_string()),
            "{message}"
        );
        assert_eq!(
            repo.ref_target(MAIN).expect("read"),
            Some(second),
            "unchanged after refusals"
        );

        let absent = oid("4444444444444444444444444444444444444444");
        assert!(matches!(
            repo.cas_ref(MAIN, Some(second), absent, "dangling"),
            Err(GitError::Missing { .. })
        ));
        for bad in [
            "main",
            "HEAD",
            "refs/heads/a..b",
            "refs/heads/x.lock",
            "refs/heads/ sp",
        ] {
            assert!(
                matches!(
                    repo.cas_ref(bad, None, first, "bad"),
                    Err(GitError::InvalidRefName { .. })
                ),
                "{bad}"
            );
        }
        assert_eq!(repo.ref_target(MAIN).expect("read"), Some(second));
        assert_fsck_clean(repo.path());
    }

    #[test]
    fn cas_ref_works_on_packed_refs() {
        let (_dir, repo) = new_bare();
        let first = commit_files(&repo, None, &[("a.md", "a")], T0);
        let second = commit_files(&repo, Some(first), &[("b.md", "b")], T0 + 1);
        repo.cas_ref(MAIN, None, first, "create").expect("create");
        git(repo.path(), &["pack-refs", "--all"]);
        assert!(
            !repo.path().join(MAIN).exists(),
            "the ref now lives in packed-refs"
        );
        assert_eq!(repo.ref_target(MAIN).expect("read"), Some(first));
        assert!(matches!(
            repo.cas_ref(MAIN, Some(second), second, "stale"),
            Err(GitError::RefMoved { .. })
        ));
        repo.cas_ref(MAIN, Some(first), second, "advance")
            .expect("advance");
        assert_eq!(oid(&git(repo.path(), &["rev-parse", MAIN])), second);
    }

    #[test]
    fn concurrent_cas_from_the_same_expected_has_exactly_one_winner() {
        let (dir, repo) = new_bare();
        let base = commit_files(&repo, None, &[("a.md", "a")], T0);
        repo.cas_ref(MAIN, None, base, "create").expect("create");
        let path = repo.path().to_path_buf();
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|n| {
                let path = path.clone();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    let mine = GitRepo::open(&path).expect("open");
                    let commit =
                        commit_files(&mine, Some(base), &[("n.md", &n.to_string())], T0 + 1);
                    barrier.wait();
                    (commit, mine.cas_ref(MAIN, Some(base), commit, "race"))
                })
            })
            .collect();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect();
        let winners: Vec<ObjectId> = results
            .iter()
            .filter(|(_, outcome)| outcome.is_ok())
            .map(|(commit, _)| *commit)
            .collect();
        assert_eq!(winners.len(), 1, "{results:?}");
        let winner = winners[0];
        for (_, outcome) in &results {
            if let Err(error) = outcome {
                match error {
                    GitError::RefMoved {
                        expected, actual, ..
                    } => {
                        assert_eq!((*expected, *actual), (Some(base), Some(winner)));
                    }
                    other => panic!("loser got {other:?}"),
                }
            }
        }
        assert_eq!(repo.ref_target(MAIN).expect("read"), Some(winner));
        assert_fsck_clean(&dir.path().join("pool"));
    }

    #[test]
    fn copy_reachable_into_an_empty_repo_is_complete_for_git() {
        let (dir, source) = new_bare();
        let first = commit_files(
            &source,
            None,
            &[("chapters/pk/s1/001.md", "one"), ("project.yml", "k")],
            T0,
        );
        let second = commit_files(
            &source,
            Some(first),
            &[("chapters/pk/s1/002.md", "two")],
            T0 + 1,
        );
        let third = commit_files(
            &source,
            Some(second),
            &[("chapters/pk/s2/001.md", "one")],
            T0 + 2,
        );
        let target = GitRepo::init_bare(&dir.path().join("copy")).expect("target");
        let copied = copy_reachable(&source, &target, third).expect("copy");
        let reachable = git(
            source.path(),
            &["rev-list", "--objects", &third.to_string()],
        )
        .lines()
        .count();
        assert_eq!(copied, reachable as u64);
        target.cas_ref(MAIN, None, third, "copied").expect("ref");
        assert_fsck_clean(target.path());
        let log = git(target.path(), &["log", "--format=%H", MAIN]);
        assert_eq!(log, format!("{third}\n{second}\n{first}\n"));
        assert_eq!(
            copy_reachable(&source, &target, third).expect("again"),
            0,
            "nothing left to copy"
        );
    }

    /// What a publish's pack lists instead of git's walk holds every object the walk finds
    /// (`rev-list --objects new ^old`) — new sessions, a chapter added deep in a folder, a
    /// file turned into a folder, two commits at once — and no more than the changed paths'.
    #[test]
    fn objects_since_holds_every_object_git_walks_to() {
        use std::collections::BTreeSet;
        let (_dir, repo) = new_bare();
        let files: Vec<(String, String)> = (0..20)
            .map(|n| {
                (
                    format!("chapters/pk/s{n:02}/001.md"),
                    format!("chapter {n}"),
                )
            })
            .chain([("project.yml".to_string(), "key".to_string())])
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let first = commit_files(&repo, None, &refs, T0);
        assert_eq!(repo.objects_since(None, first).expect("first"), None);
        let second = commit_files(
            &repo,
            Some(first),
            &[
                ("chapters/pk/s99/001.md", "new"),
                ("chapters/pk/s05/002.md", "more"),
            ],
            T0 + 1,
        );
        let third = commit_files(
            &repo,
            Some(second),
            &[
                ("project.yml/inner.md", "now a tree"),
                // Bytes `old` already holds elsewhere: named again, harmlessly.
                ("chapters/pk/s06/002.md", "chapter 3"),
            ],
            T0 + 2,
        );
        for (old, new) in [(first, second), (second, third), (first, third)] {
            let listed = repo
                .objects_since(Some(old), new)
                .expect("objects")
                .expect("a chain of single parents");
            let walked: BTreeSet<String> = git(
                repo.path(),
                &[
                    "rev-list",
                    "--objects",
                    &new.to_string(),
                    &format!("^{old}"),
                ],
            )
            .lines()
            .map(|line| line[..40].to_owned())
            .collect();
            let listed_hex: BTreeSet<String> = listed.iter().map(|id| id.to_string()).collect();
            assert!(
                walked.is_subset(&listed_hex),
                "{old}..{new}: git walks to {:?} too",
                walked.difference(&listed_hex).collect::<Vec<_>>()
            );
            // Anything more is an object `old` holds (the repeated bytes), named again.
            let in_old: BTreeSet<String> =
                git(repo.path(), &["rev-list", "--objects", &old.to_string()])
                    .lines()
                    .map(|line| line[..40].to_owned())
                    .collect();
            let extra: Vec<&String> = listed_hex.difference(&walked).collect();
            assert!(extra.iter().all(|id| in_old.contains(*id)), "{extra:?}");
            assert_eq!(extra.len(), usize::from(new == third), "{extra:?}");
            assert_eq!(listed.len(), listed_hex.len(), "each once");
        }
        // A merge is left to git's walk.
        let side = commit_files(&repo, Some(first), &[("side.md", "side")], T0 + 3);
        let merge = repo
            .write_commit(
                repo.commit_tree(third).expect("tree"),
                &[third, side],
                NAME,
                EMAIL,
                T0 + 4,
                &echoed_text("merge"),
            )
            .expect("merge");
        assert_eq!(repo.objects_since(Some(third), merge).expect("merge"), None);
        // So is a history that does not reach `old`.
        assert_eq!(repo.objects_since(Some(side), third).expect("apart"), None);
    }

    #[test]
    fn incremental_copy_copies_exactly_the_new_objects() {
        let (dir, source) = new_bare();
        let mut files: Vec<(String, String)> = (0..40)
            .map(|n| {
                (
                    format!("chapters/pk/s{n:02}/001.md"),
                    format!("chapter {n}"),
                )
            })
            .collect();
        files.push(("project.yml".to_string(), "key".to_string()));
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let first = commit_files(&source, None, &refs, T0);
        let target = GitRepo::init_bare(&dir.path().join("copy")).expect("target");
        copy_reachable(&source, &target, first).expect("initial copy");
        // Two commits on top: one new session, one chapter added to an existing session, and a
        // blob whose bytes already exist elsewhere (nothing to copy for it).
        let second = commit_files(
            &source,
            Some(first),
            &[("chapters/pk/s99/001.md", "new")],
            T0 + 1,
        );
        let third = commit_files(
            &source,
            Some(second),
            &[
                ("chapters/pk/s05/002.md", "more"),
                ("chapters/pk/s06/002.md", "chapter 3"),
            ],
            T0 + 2,
        );
        // A file turned into a directory, and a merge with a side branch whose objects only the
        // second parent brings.
        let fourth = commit_files(
            &source,
            Some(third),
            &[("project.yml/inner.md", "now a tree")],
            T0 + 3,
        );
        let side = commit_files(
            &source,
            Some(first),
            &[("chapters/pk/s77/001.md", "side")],
            T0 + 4,
        );
        let side_blob = source
            .blob_at(
                source.commit_tree(side).expect("tree"),
                "chapters/pk/s77/001.md",
            )
            .expect("lookup")
            .expect("present");
        let merged_tree = source
            .tree_with(
                Some(source.commit_tree(fourth).expect("tree")),
                &[("chapters/pk/s77/001.md".to_string(), side_blob)],
            )
            .expect("merged tree");
        let merge = source
            .write_commit(
                merged_tree,
                &[fourth, side],
                NAME,
                EMAIL,
                T0 + 5,
                &echoed_text("merge"),
            )
            .expect("merge");
        for (tip, since) in [(third, first), (merge, third)] {
            let new_objects = git(
                source.path(),
                &[
                    "rev-list",
                    "--objects",
                    &tip.to_string(),
                    &format!("^{since}"),
                ],
            )
            .lines()
            .count();
            assert_eq!(
                copy_reachable(&source, &target, tip).expect("increment"),
                new_objects as u64,
                "copy up to {tip}"
            );
        }
        target.cas_ref(MAIN, None, merge, "copied").expect("ref");
        assert_fsck_clean(target.path());
        assert_eq!(
            git(target.path(), &["rev-list", "--count", MAIN]).trim(),
            "6"
        );
    }

    /// The walk writes children before parents, so a corrupt object stops the copy before
    /// anything that refers to it lands in the target.
    #[test]
    fn copy_reachable_refuses_bytes_that_do_not_match_their_id() {
        let (dir, source) = new_bare();
        let good = source.write_blob(b"good").expect("blob");
        let evil = source.write_blob(b"evil").expect("blob");
        let loose = |id: ObjectId| {
            let hex = id.to_string();
            source
                .path()
                .join("objects")
                .join(&hex[..2])
                .join(&hex[2..])
        };
        std::fs::remove_file(loose(good)).expect("remove");
        std::fs::copy(loose(evil), loose(good)).expect("swap the bytes");
        let tree = source
            .tree_with(None, &[("a/b.md".to_string(), good)])
            .expect("tree");
        let commit = source
            .write_commit(tree, &[], NAME, EMAIL, T0, &echoed_text("m"))
            .expect("commit");
        let target = GitRepo::init_bare(&dir.path().join("copy")).expect("target");
        match copy_reachable(&source, &target, commit) {
            Err(GitError::HashMismatch {
                expected, actual, ..
            }) => assert_eq!((expected, actual), (good, evil)),
            other => panic!("expected HashMismatch, got {other:?}"),
        }
        for id in [good, tree, commit] {
            assert!(
                !target.has_object(id),
                "{id} must not land before its closure"
            );
        }
    }

    #[test]
    fn copy_reachable_refuses_annotated_tags_and_missing_tips() {
        let (dir, source) = new_bare();
        let commit = commit_files(&source, None, &[("a.md", "a")], T0);
        source.cas_ref(MAIN, None, commit, "create").expect("ref");
        git(source.path(), &["tag", "-a", "-m", "release", "v1", MAIN]);
        let tag = oid(&git(source.path(), &["rev-parse", "refs/tags/v1"]));
        let target = GitRepo::init_bare(&dir.path().join("copy")).expect("target");
        assert!(
            matches!(copy_reachable(&source, &target, tag), Err(GitError::Unsupported { id, .. }) if id == tag)
        );
        let absent = oid("5555555555555555555555555555555555555555");
        assert!(matches!(
            copy_reachable(&source, &target, absent),
            Err(GitError::Missing { .. })
        ));
    }

    #[test]
    fn is_ancestor_follows_every_parent() {
        let (_dir, repo) = new_bare();
        let root = commit_files(&repo, None, &[("a.md", "a")], T0);
        let left = commit_files(&repo, Some(root), &[("l.md", "l")], T0 + 1);
        let right = commit_files(&repo, Some(root), &[("r.md", "r")], T0 + 2);
        let tree = repo.commit_tree(left).expect("tree");
        let merge = repo
            .write_commit(
                tree,
                &[left, right],
                NAME,
                EMAIL,
                T0 + 3,
                &echoed_text("merge"),
            )
            .expect("merge");
        assert!(repo.is_ancestor(root, merge).expect("walk"));
        assert!(
            repo.is_ancestor(right, merge).expect("walk"),
            "second parent counts"
        );
        assert!(repo.is_ancestor(merge, merge).expect("walk"));
        assert!(!repo.is_ancestor(left, right).expect("walk"));
        assert!(!repo.is_ancestor(merge, root).expect("walk"));
        let absent = oid("6666666666666666666666666666666666666666");
        assert!(!repo.is_ancestor(absent, merge).expect("walk"));
        assert!(matches!(
            repo.is_ancestor(root, absent),
            Err(GitError::Missing { .. })
        ));
    }

    #[test]
    fn publish_local_fast_forwards_and_refuses_everything_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mirror =
            GitRepo::init_or_open_mirror(&dir.path().join("ws/.dsh-knowledge")).expect("mirror");
        let pool = GitRepo::init_bare(&dir.path().join("pool")).expect("pool");
        let first = commit_files(&mirror, None, &[("chapters/pk/s1/001.md", "one")], T0);
        let created = publish_local(&mirror, &pool, MAIN, first, None).expect("create");
        assert_eq!(
            created, 6,
            "commit, four trees (root, chapters, pk, s1), one blob"
        );
        let second = commit_files(
            &mirror,
            Some(first),
            &[("chapters/pk/s1/002.md", "two")],
            T0 + 1,
        );
        let third = commit_files(
            &mirror,
            Some(second),
            &[("chapters/pk/s2/001.md", "three")],
            T0 + 2,
        );
        assert!(publish_local(&mirror, &pool, MAIN, third, Some(first)).expect("ff") > 0);
        assert_eq!(pool.ref_target(MAIN).expect("read"), Some(third));
        assert_eq!(
            publish_local(&mirror, &pool, MAIN, third, Some(third)).expect("no-op"),
            0
        );

        // Another machine moved the pool meanwhile: our view is stale.
        assert!(matches!(
            publish_local(&mirror, &pool, MAIN, third, Some(second)),
            Err(GitError::RefMoved { actual: Some(a), .. }) if a == third
        ));
        // A history that does not contain the pool's tip: refused before copying anything.
        let diverged = commit_files(
            &mirror,
            Some(second),
            &[("chapters/pk/s3/001.md", "fork")],
            T0 + 3,
        );
        match publish_local(&mirror, &pool, MAIN, diverged, Some(third)) {
            Err(GitError::NotFastForward { current, new, .. }) => {
                assert_eq!((current, new), (third, diverged))
            }
            other => panic!("expected NotFastForward, got {other:?}"),
        }
        assert!(
            !pool.has_object(diverged),
            "nothing copied for a refused publish"
        );
        // A pool tip the local history has never seen at all.
        let foreign = commit_files(
            &pool,
            Some(third),
            &[("edits/h2/curation.jsonl", "{}")],
            T0 + 4,
        );
        pool.cas_ref(MAIN, Some(third), foreign, "other machine")
            .expect("other machine");
        assert!(matches!(
            publish_local(&mirror, &pool, MAIN, diverged, Some(foreign)),
            Err(GitError::NotFastForward { .. })
        ));
        assert_eq!(
            pool.ref_target(MAIN).expect("read"),
            Some(foreign),
            "target ref unchanged"
        );
        assert_fsck_clean(pool.path());
        assert_fsck_clean(mirror.path());

        let clone = dir.path().join("clone");
        let clone_arg = clone.to_str().expect("utf-8 temp path");
        git(
            dir.path(),
            &[
                "clone",
                "--quiet",
                pool.path().to_str().expect("utf-8"),
                clone_arg,
            ],
        );
        let read = |path: &str| std::fs::read_to_string(clone.join(path)).expect("cloned file");
        assert_eq!(read("chapters/pk/s1/001.md"), "one");
        assert_eq!(read("chapters/pk/s2/001.md"), "three");
        assert_eq!(read("edits/h2/curation.jsonl"), "{}");
        assert_eq!(oid(&git(&clone, &["rev-parse", "HEAD"])), foreign);
    }

    #[test]
    fn init_is_idempotent_and_refuses_foreign_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("deep/er/pool");
        let repo = GitRepo::init_bare(&path).expect("create with parents");
        let commit = commit_files(&repo, None, &[("a.md", "a")], T0);
        repo.cas_ref(MAIN, None, commit, "create").expect("ref");
        let again = GitRepo::init_bare(&path).expect("reopen");
        assert_eq!(
            again.ref_target(MAIN).expect("read"),
            Some(commit),
            "re-init keeps the content"
        );
        assert_eq!(
            git(&path, &["rev-parse", "--is-bare-repository"]).trim(),
            "true"
        );
        assert_eq!(git(&path, &["symbolic-ref", "HEAD"]).trim(), MAIN);

        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).expect("mkdir");
        GitRepo::init_bare(&empty).expect("an empty directory becomes a repository");

        let occupied = dir.path().join("occupied");
        std::fs::create_dir(&occupied).expect("mkdir");
        std::fs::write(occupied.join("notes.txt"), "mine").expect("write");
        assert!(matches!(
            GitRepo::init_bare(&occupied),
            Err(GitError::NotEmpty { .. })
        ));
        assert_eq!(
            std::fs::read_dir(&occupied).expect("list").count(),
            1,
            "nothing written"
        );

        let worktree = dir.path().join("worktree");
        std::fs::create_dir(&worktree).expect("mkdir");
        git(&worktree, &["init", "--quiet"]);
        assert!(matches!(
            GitRepo::init_bare(&worktree),
            Err(GitError::NotBare { .. })
        ));
        GitRepo::open(&worktree).expect("open reads any repository");
        assert!(matches!(
            GitRepo::open(&occupied),
            Err(GitError::Open { .. })
        ));
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").expect("write");
        assert!(matches!(
            GitRepo::init_bare(&file),
            Err(GitError::ReadDir { .. })
        ));
        assert!(matches!(
            GitRepo::open(&dir.path().join("absent")),
            Err(GitError::Open { .. })
        ));
    }

    #[test]
    fn mirror_is_a_bare_repository_in_dot_git_that_git_reads_from_its_parent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let workspace_mirror = dir.path().join(".dsh-knowledge");
        let mirror = GitRepo::init_or_open_mirror(&workspace_mirror).expect("mirror");
        assert_eq!(mirror.path(), workspace_mirror.join(".git"));
        let commit = commit_files(&mirror, None, &[("a.md", "a")], T0);
        mirror.cas_ref(MAIN, None, commit, "create").expect("ref");
        assert_eq!(
            git(&workspace_mirror, &["log", "--format=%an%ae"]),
            format!("{NAME}{EMAIL}\n")
        );
        let reopened = GitRepo::init_or_open_mirror(&workspace_mirror).expect("reopen");
        assert_eq!(reopened.path(), mirror.path());
        assert_eq!(reopened.ref_target(MAIN).expect("read"), Some(commit));
        let via_parent = GitRepo::open(&workspace_mirror).expect("open via parent");
        assert_eq!(via_parent.ref_target(MAIN).expect("read"), Some(commit));
    }
}

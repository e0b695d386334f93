//! `chapters sync`: pull, then publish what the store has that the pool lacks (record §3.1,
//! §5.2, §5.3). Shell. The whole run holds the store's writer lock, so a pull never lands
//! mid-archive and a push never ships a half-written store.
//!
//! The mirror `<workspace>/.dsh-knowledge/` is transport: a bare git repository in its
//! `.git` plus the pool's files materialized beside it for reading. The store is the
//! truth; a damaged mirror is thrown away and rebuilt from the pool and the store.
//!
//! Publishing goes through `Provider`, the six-verb seam of the original (ensure the
//! mirror, init the local pool, remove the mirror, stage-and-commit, pull fast-forward,
//! push); git is its one provider, over a local path (gix only) or a network URL (the
//! `git` program for fetch/push).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::link::{LinkRecord, PoolIdentity, Upstream};
use super::pack;
use super::plan::{self, Action, FileKind, Visibility};
use super::publish_lock::{PublishLock, PublishLockError};
use super::transport::{self, FailureCode, Remote, TransportError};
use crate::credentials::Secret;
use crate::curation::{self, Fact, FactKind};
use crate::git::{GitError, GitRepo, ObjectId};
use crate::identity::Identity;
use crate::redact::Redacted;
use crate::store::{atomic, signed, Store, StoreError, MIRROR_DIR};
use crate::topics::shard::{INDEX_DIR, MANIFEST_FILE};

pub const POOL_REF: &str = "refs/heads/main";
const STATUS_FILE: &str = "sync-status.json";
use crate::store::mirror::MATERIALIZED_FILE;
/// A local pool's objects fetched into the mirror (a copy on this machine's disks).
const MIRROR_FETCH_TIMEOUT: Duration = Duration::from_secs(600);
/// Present once the mirror holds no copy of this store's own chapters (`sweep_own_copies`).
const OWN_SWEPT_FILE: &str = "dsh-chapters-own-swept";
/// The mirror's deepest files: `chapters/<pk>/<root>/X.md`, `index/<dir>/<file>` (and the
/// index's own records).
const MIRROR_DEPTH: u32 = 4;
/// Divergence (another machine moved the pool's ref between this sync's fetch and its
/// push) is resolved by re-fetching and re-planning from the store, after a wait
/// (`retry_wait`); bounded: at most this many attempts per commit.
const MAX_ATTEMPTS: u32 = 12;
/// The first retry waits within `[w/2, w]` for `w` this many ms; `w` doubles per attempt.
const RETRY_FIRST_WINDOW_MS: u64 = 50;
/// … up to this window, so the waits of one commit's attempts add up to at most
/// 50 + 100 + 200 + 400 + 800 + 6 × 1,000 ms ≈ 7.6 s (under `writerLockTimeoutMs`' 10 s
/// default, since the sync holds the store's writer lock meanwhile).
const RETRY_MAX_WINDOW_MS: u64 = 1_000;

/// The machine-readable result of a sync; status shows it, scripts branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SyncCode {
    Ok,
    Network,
    Auth,
    NotFound,
    Diverged,
    Timeout,
    /// The pool's `project.yml` names another project: nothing is published into it.
    IdentityMismatch,
    /// The mirror could not be written (disk full, permissions).
    MirrorIo,
    /// The pool repository is damaged or not a bare repository.
    PoolBroken,
    /// The adopted local pool is gone (a drive not mounted, a directory moved or deleted):
    /// it is not re-created; archiving goes on, sync waits for it or for a new `link`.
    PoolMissing,
    /// The pool at the link is not the one adopted: empty, or its history no longer holds
    /// what this machine last saw and its first commit is another's. Nothing is published
    /// into it until a person adopts it with `chapters link`.
    PoolReplaced,
    /// A web server answered at the URL, not git.
    NotGit,
    Other,
}

impl SyncCode {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncCode::Ok => "ok",
            SyncCode::Network => "network",
            SyncCode::Auth => "auth",
            SyncCode::NotFound => "not-found",
            SyncCode::Diverged => "diverged",
            SyncCode::Timeout => "timeout",
            SyncCode::IdentityMismatch => "identity-mismatch",
            SyncCode::MirrorIo => "mirror-io",
            SyncCode::PoolBroken => "pool-broken",
            SyncCode::PoolMissing => "pool-missing",
            SyncCode::PoolReplaced => "pool-replaced",
            SyncCode::NotGit => "not-git",
            SyncCode::Other => "other",
        }
    }

    pub fn hint(self) -> &'static str {
        match self {
            SyncCode::Ok => "",
            SyncCode::Network => FailureCode::Network.hint(),
            SyncCode::Auth => FailureCode::Auth.hint(),
            SyncCode::NotFound => FailureCode::NotFound.hint(),
            SyncCode::Diverged => "The pool kept moving while this machine published; run `chapters sync` again",
            SyncCode::Timeout => FailureCode::Timeout.hint(),
            SyncCode::IdentityMismatch => "The pool belongs to another project (its project.yml names another projectKey): link this workspace to its own pool, or set projectKeyOverride if both are one project",
            SyncCode::MirrorIo => "The mirror .dsh-knowledge/ could not be written (disk full? permissions?); free space and run `chapters sync` again — the store is untouched",
            SyncCode::PoolBroken => "The pool repository is damaged or not a bare git repository; check it with `git fsck`, or link a new one",
            SyncCode::PoolMissing => "The pool this workspace adopted is not there (a drive not mounted? a directory moved?) and is not re-created: mount it or move it back, then `chapters sync`; or adopt another pool with `chapters link PATH --visibility …`, which then receives everything again. Archiving goes on meanwhile",
            SyncCode::PoolReplaced => "The pool at the link is not the one this workspace adopted (empty, or another history): nothing was published into it. Put the right pool back, then `chapters sync`; or adopt this one with `chapters link PATH --visibility …`, which then receives everything again. Archiving goes on meanwhile",
            SyncCode::NotGit => FailureCode::NotGit.hint(),
            SyncCode::Other => "See the detail; the store is untouched and the next sync retries",
        }
    }

    fn from_transport(code: FailureCode) -> SyncCode {
        match code {
            FailureCode::Network => SyncCode::Network,
            FailureCode::Auth => SyncCode::Auth,
            FailureCode::NotFound => SyncCode::NotFound,
            FailureCode::Diverged => SyncCode::Diverged,
            FailureCode::Timeout => SyncCode::Timeout,
            FailureCode::NotGit => SyncCode::NotGit,
            FailureCode::Other => SyncCode::Other,
        }
    }

    /// A failure that leaves the workspace in local-only mode until the next good sync.
    pub fn is_failure(self) -> bool {
        self != SyncCode::Ok
    }
}

/// A path this machine may not write: another machine's, or not a prefix of ours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncReport {
    pub upstream: String,
    pub visibility: Option<Visibility>,
    pub pool_head: Option<String>,
    /// Files published by kind (`chapter`, `plan`, `artifact`, `collection`, `derived`).
    pub published: BTreeMap<String, u64>,
    /// Files of the pool newly materialized in the mirror (other machines' work, mostly).
    pub received: u64,
    pub refused: Vec<Refusal>,
    /// Conversation-derived files held back because the pool is declared public.
    pub withheld_public: u64,
    pub attempts: u32,
    pub mirror_rebuilt: bool,
    /// Files this machine's forget acts removed from the pool's tip (`chapters forget`).
    pub forgotten: u64,
    /// Files the pool no longer holds, dropped from the mirror (other machines' forgets).
    pub dropped: u64,
    /// The pool's history was rewritten (its head does not descend from the head this
    /// mirror last materialized, and its project.yml still names this project): the mirror
    /// was rebuilt from the new history.
    pub history_rewritten: bool,
    pub notes: Vec<String>,
}

/// The last sync's outcome, kept in the store for `chapters status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStatus {
    pub v: u32,
    pub code: SyncCode,
    pub at: String,
    pub pool_head: Option<String>,
    pub detail: Option<String>,
    pub hint: Option<String>,
    /// The pool's projectKey when it differs from this checkout's (the loud warning).
    pub pool_project_key: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("sync with {upstream} failed [{code}]: {detail}. {hint}", code = .code.as_str(), hint = .code.hint())]
pub struct SyncError {
    pub code: SyncCode,
    pub upstream: String,
    pub detail: String,
    /// What was done before the failure (partial publication is still publication).
    pub report: Box<SyncReport>,
}

/// What one sync needs, resolved by the caller.
pub struct SyncContext<'a> {
    pub workspace: &'a Path,
    pub store: &'a Store,
    pub identity: &'a Identity,
    pub harness_id: &'a str,
    pub link: &'a LinkRecord,
    pub token: Option<Secret>,
    pub now_secs: i64,
    pub now: &'a str,
    pub timeout: Duration,
    /// `mirrorRecentDays`: the pool's chapters dated this recently are written out as files.
    pub mirror_recent_days: u64,
    pub lock_timeout: Duration,
    /// Rebuild the pool's topic index from the tree (`chapters index rebuild`) instead of
    /// updating it.
    pub rebuild_index: bool,
    /// `vocabApply: true`: the vocabulary's candidates become plugin facts before publishing.
    pub vocabulary: Option<crate::topics::build::VocabApply<'a>>,
}

/// Internal failure before it is given its code.
struct Fail {
    code: SyncCode,
    detail: String,
}

/// The identity refusal carries the pool's key, for status's loud warning.
const MISMATCH_PREFIX: &str = "the pool's project.yml names projectKey ";

impl From<GitError> for Fail {
    fn from(e: GitError) -> Fail {
        // Objects that cannot be read in a local pool (a truncated pack, a missing object):
        // the pool is damaged — said as such, with its hint. The mirror's own damage stays
        // `other` (the mirror is rebuilt from the pool and the store).
        let in_pool = e
            .damaged_repository()
            .is_some_and(|repo| !repo.components().any(|c| c.as_os_str() == MIRROR_DIR));
        Fail {
            code: if in_pool {
                SyncCode::PoolBroken
            } else {
                SyncCode::Other
            },
            detail: e.to_string(),
        }
    }
}
impl From<TransportError> for Fail {
    fn from(e: TransportError) -> Fail {
        Fail {
            code: SyncCode::from_transport(e.code),
            detail: e.to_string(),
        }
    }
}
impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Fail {
        Fail {
            code: SyncCode::Other,
            detail: e.to_string(),
        }
    }
}
fn mirror_io(path: &Path, e: std::io::Error) -> Fail {
    Fail {
        code: SyncCode::MirrorIo,
        detail: format!("{}: {e}", path.display()),
    }
}

/// The transport seam. The original's six verbs map here as: `ensureClone` →
/// [`ensure_mirror`], `removeMirror` → [`remove_mirror`], `initLocal` →
/// `LocalPool::open_or_init`, `stageAllAndCommit` → `tree_with` + `write_commit` on the
/// provider's object repository (shared by every provider), and the two below.
trait Provider {
    /// The pool's head, its objects readable through `repo`; `None` for an empty pool.
    fn pull_fast_forward(&self, repo: &GitRepo) -> Result<Option<ObjectId>, Fail>;
    /// Publish `commit` (written into `repo`) whose parent is `expected`, fast-forward only.
    fn push(
        &self,
        repo: &GitRepo,
        commit: ObjectId,
        expected: Option<ObjectId>,
    ) -> Result<(), Fail>;
}

struct LocalPool {
    path: PathBuf,
    /// The mirror's own git directory, which a publish's pack is linked into.
    mirror_git: PathBuf,
}

impl LocalPool {
    /// The pool itself, created on first sync. A local pool needs no second object
    /// database: objects are written straight into it (invisible until its ref moves), so
    /// every object is written once.
    fn open_or_init(&self) -> Result<GitRepo, Fail> {
        let broken = |e: GitError| Fail {
            code: SyncCode::PoolBroken,
            detail: e.to_string(),
        };
        if let Ok(repo) = GitRepo::open(&self.path) {
            return Ok(repo);
        }
        let empty = std::fs::read_dir(&self.path)
            .map(|mut d| d.next().is_none())
            .unwrap_or(true);
        if self.path.exists() && !empty {
            // Not a repository and not ours to take over: say why, by name.
            return GitRepo::init_bare(&self.path).map_err(broken);
        }
        // Several machines may create the pool at once: each builds it aside and renames
        // it into place; the losers of the rename open the winner's.
        let parent = self.path.parent().unwrap_or(Path::new("."));
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        std::fs::create_dir_all(parent).map_err(|e| Fail {
            code: SyncCode::PoolBroken,
            detail: format!("{}: {e}", parent.display()),
        })?;
        let aside = parent.join(format!(".{name}.init.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&aside);
        GitRepo::init_bare(&aside).map_err(broken)?;
        if std::fs::rename(&aside, &self.path).is_err() {
            let _ = std::fs::remove_dir_all(&aside);
        }
        GitRepo::open(&self.path).map_err(broken)
    }
}

impl LocalPool {
    /// The pool a good sync already recorded: opened, never created. An absent path, an
    /// absent parent or an empty directory (a mount point with nothing mounted) is
    /// `pool-missing`; creating it would fork the team silently.
    fn open_adopted(&self) -> Result<GitRepo, Fail> {
        if let Ok(repo) = GitRepo::open(&self.path) {
            return Ok(repo);
        }
        let empty = std::fs::read_dir(&self.path).map(|mut d| d.next().is_none());
        match empty {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let parent = self.path.parent().filter(|p| !p.exists());
                Err(Fail {
                    code: SyncCode::PoolMissing,
                    detail: match parent {
                        Some(parent) => format!(
                            "the pool {} is missing, and so is its parent {}",
                            self.path.display(),
                            parent.display()
                        ),
                        None => format!("the pool {} is missing", self.path.display()),
                    },
                })
            }
            Ok(true) => Err(Fail {
                code: SyncCode::PoolMissing,
                detail: format!(
                    "the pool {} is an empty directory (nothing mounted there?)",
                    self.path.display()
                ),
            }),
            Ok(false) | Err(_) => Err(Fail {
                code: SyncCode::PoolBroken,
                detail: format!("{} is not a bare git repository", self.path.display()),
            }),
        }
    }
}

impl Provider for LocalPool {
    fn pull_fast_forward(&self, pool: &GitRepo) -> Result<Option<ObjectId>, Fail> {
        Ok(pool.ref_target(POOL_REF)?)
    }

    fn push(
        &self,
        pool: &GitRepo,
        commit: ObjectId,
        expected: Option<ObjectId>,
    ) -> Result<(), Fail> {
        // The publish's objects into their pack, durable; a kill from here to the ref's move
        // leaves a pack nothing names yet (as loose objects did), which roll-ups keep.
        {
            let _p = phase("pack held");
            pool.pack_held()?;
        }
        crash_point("sync-after-pack");
        // The commit's parent is `expected` by construction: the compare-and-swap is the
        // fast-forward check, under the ref's lock file.
        let moved = {
            let _p = phase("ref move");
            pool.cas_ref(POOL_REF, expected, commit, "dsh-chapters: publish")
        };
        match moved {
            Ok(packs) => {
                let _p = phase("pack and share");
                self.pack_and_share(pool, commit, expected, &packs);
                Ok(())
            }
            // A dead writer's lock, just removed: retried like a lost race.
            Err(e @ (GitError::RefMoved { .. } | GitError::StaleLockRemoved { .. })) => Err(Fail {
                code: SyncCode::Diverged,
                detail: e.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

impl LocalPool {
    /// [`pack_published`], the publish's pack also linked into the mirror when the mirror
    /// holds `expected` — and so everything it reaches: the mirror gains objects only by a
    /// connectivity-checked `git fetch` or by such a pack, which holds all that `commit`
    /// reaches and `expected` does not. The mirror then holds `commit` and its materialization
    /// needs no `git fetch` from the pool (whose cost grew with the mirror's packs); the
    /// mirror's tracking ref follows, and its linked packs roll up as the pool's do. Linking
    /// fails across filesystems: then the mirror fetches, as before.
    fn pack_and_share(
        &self,
        pool: &GitRepo,
        commit: ObjectId,
        expected: Option<ObjectId>,
        packs: &[String],
    ) {
        let mirror = GitRepo::open(&self.mirror_git)
            .ok()
            .filter(|m| expected.is_none_or(|old| m.has_object(old)));
        let share = mirror.as_ref().map(GitRepo::path);
        let packed = match packs {
            // The publish wrote its own packs (held writes): only shared and tidied.
            [_, ..] => crate::pool::pack::after_own_pack(pool.path(), packs, share),
            [] => {
                let objects = published_objects(pool, commit, expected);
                crate::pool::pack::after_publish(
                    pool.path(),
                    commit,
                    expected,
                    objects.as_deref(),
                    share,
                )
            }
        };
        match packed {
            Ok(packed) => {
                let Some(mirror) = mirror.filter(|_| packed.shared) else {
                    return;
                };
                if let Err(e) =
                    mirror.set_ref(transport::TRACKING_REF, commit, "dsh-chapters: publish")
                {
                    tracing::warn!(error = %e, "could not move the mirror's tracking ref");
                }
                if let Err(e) = crate::pool::pack::tidy_mirror(mirror.path()) {
                    tracing::warn!(error = %e, "could not roll up the mirror's packs");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not pack the objects of a publish"),
        }
    }
}

struct NetworkPool {
    remote: Remote,
    timeout: Duration,
}

impl Provider for NetworkPool {
    fn pull_fast_forward(&self, mirror: &GitRepo) -> Result<Option<ObjectId>, Fail> {
        let head = transport::fetch(mirror.path(), &self.remote, self.timeout)?;
        head.map(|hex| {
            ObjectId::from_hex(hex.as_bytes()).map_err(|e| Fail {
                code: SyncCode::Other,
                detail: format!("bad head {hex}: {e}"),
            })
        })
        .transpose()
    }

    fn push(
        &self,
        mirror: &GitRepo,
        commit: ObjectId,
        expected: Option<ObjectId>,
    ) -> Result<(), Fail> {
        // `git push` reads the objects from disk: held ones are packed first.
        let packs = mirror.write_held()?;
        transport::push(
            mirror.path(),
            &self.remote,
            &commit.to_string(),
            self.timeout,
        )?;
        if packs.is_empty() {
            pack_published(mirror, commit, expected);
        } else if let Err(e) = crate::pool::pack::after_own_pack(mirror.path(), &packs, None) {
            tracing::warn!(error = %e, "could not tidy the mirror's packs after a publish");
        }
        Ok(())
    }
}

/// Housekeeping after a publish moved the ref (issue #17 point 6): the objects it wrote loose
/// into `repo` (the local pool, or a network pool's mirror) go into one pack, and the packs
/// are consolidated when they pile up (`pool::pack`). The publish already happened: a
/// failure here leaves a correct loose repository, logged and retried by the next publish's
/// consolidation.
fn pack_published(repo: &GitRepo, commit: ObjectId, expected: Option<ObjectId>) {
    let objects = published_objects(repo, commit, expected);
    if let Err(e) =
        crate::pool::pack::after_publish(repo.path(), commit, expected, objects.as_deref(), None)
    {
        tracing::warn!(error = %e, "could not pack the objects of a publish");
    }
}

/// What a publish from `expected` to `commit` brings, as `GitRepo::objects_since` names it
/// from the trees that changed; `None` (git's walk decides) when it cannot say.
fn published_objects(
    repo: &GitRepo,
    commit: ObjectId,
    expected: Option<ObjectId>,
) -> Option<Vec<ObjectId>> {
    repo.objects_since(expected, commit).unwrap_or_else(|e| {
        tracing::info!(error = %e, "a publish's objects are left to git's walk");
        None
    })
}

/// The mirror repository, created when absent, rebuilt when damaged (it is transport).
fn ensure_mirror(mirror_dir: &Path, report: &mut SyncReport) -> Result<GitRepo, Fail> {
    match GitRepo::init_or_open_mirror(mirror_dir) {
        Ok(repo) => Ok(repo),
        Err(first) => {
            remove_mirror(mirror_dir)?;
            report.mirror_rebuilt = true;
            report.notes.push(format!(
                "the mirror was damaged ({first}); rebuilt it from the pool and the store"
            ));
            GitRepo::init_or_open_mirror(mirror_dir).map_err(|e| Fail {
                code: SyncCode::MirrorIo,
                detail: e.to_string(),
            })
        }
    }
}

fn remove_mirror(mirror_dir: &Path) -> Result<(), Fail> {
    match std::fs::remove_dir_all(mirror_dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(mirror_io(mirror_dir, e)),
    }
}

/// The sync's listing state, one versioned file beside the mirror's other markers
/// (`<mirror>/.git/dsh-chapters-listing.json`, never published): the pool commit this
/// machine last published or found nothing to publish at, the store catalog's and the
/// signed-roots hint's cursors its listing started from, and the roots to list whole at the
/// next sync (a torn write-once file was held back there). No per-file record: what the
/// pool holds is read from its tree, so the state's cost is one small file, whatever the
/// store's size. Trusted only while `head` is in the pool's history; absent, torn, of
/// another version or past a rewritten history, every store file is compared with the
/// pool's tree (never a guess).
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct Listing {
    v: u32,
    head: Option<String>,
    catalog: Option<crate::store::catalog::Cursor>,
    signed: Option<signed::Cursor>,
    #[serde(default)]
    again: BTreeSet<String>,
}

/// The listing state's file, under the mirror's git directory.
const LISTING_FILE: &str = "dsh-chapters-listing.json";

/// [`LISTING_FILE`]'s format (`v`). Another version is no state: one full comparison.
const LISTING_VERSION: u32 = 1;

/// The publication manifests this state replaced (a directory of per-root records):
/// removed by the first sync that finds them.
const PUBLISHED_DIR: &str = "dsh-chapters-published";

impl Listing {
    /// The saved state, or none (`v` 0: compare everything) when missing, torn or of
    /// another version.
    fn read(mirror_dir: &Path) -> Listing {
        let saved: Listing = read_json(&git_dir(mirror_dir).join(LISTING_FILE));
        if saved.v == LISTING_VERSION {
            saved
        } else {
            Listing::default()
        }
    }

    /// The pool head this state describes, while the pool still holds it in the history
    /// of `head`.
    fn base(&self, mirror: &GitRepo, head: Option<ObjectId>) -> Option<ObjectId> {
        let old = ObjectId::from_hex(self.head.as_ref()?.as_bytes()).ok()?;
        (mirror.has_object(old) && mirror.is_ancestor(old, head?).unwrap_or(false)).then_some(old)
    }

    /// Save the state as of the pool's `head`. Best effort, unsynced: losing it (or keeping
    /// an older one) costs a longer listing at the next sync, never a file skipped — a
    /// cursor names what changed after it, and a head the pool lost is no base.
    fn save_at(mut self, mirror_dir: &Path, head: Option<ObjectId>) {
        self.head = head.map(|h| h.to_string());
        let text = serde_json::to_vec(&self).expect("a listing state always serializes");
        if let Err(e) =
            atomic::write_atomic_unsynced(&git_dir(mirror_dir).join(LISTING_FILE), &text)
        {
            tracing::warn!(error = %e, "could not save the sync's listing state");
        }
    }
}

/// Remove the publication manifests an earlier version kept (once: the next sync finds
/// none). Their facts are not carried over: the first sync compares everything once.
fn retire_manifests(mirror_dir: &Path) {
    let old = git_dir(mirror_dir).join(PUBLISHED_DIR);
    if old.exists() {
        if let Err(e) = std::fs::remove_dir_all(&old) {
            tracing::warn!(error = %e, path = %old.display(), "could not remove the old publication manifests");
        }
    }
}

/// Which store files a listing looks at.
struct Listed {
    /// (root or tree key, pool path, kind, absolute path), sorted, each once.
    files: Vec<(String, String, FileKind, PathBuf)>,
    /// Whether every file of every root was listed (the catalog could not say).
    whole: bool,
    /// The cursors to keep once what was listed is published.
    catalog_end: Option<crate::store::catalog::Cursor>,
    signed_end: Option<signed::Cursor>,
}

/// How the signed-roots hint is read by a listing.
#[derive(Clone, Copy, PartialEq)]
enum Hint {
    /// Read since the saved cursor under the collections lock (the sync).
    Read { now_secs: u64 },
    /// Not read: every root's ledgers are listed (`status`, which writes nothing).
    ListAll,
}

/// The store files to compare with the pool's tree: (root, pool path, kind, absolute path).
///
/// With `saved` (a state whose head the pool still holds): the documents the store's
/// catalog names since its cursor (chapters and plans, written or re-annotated through
/// `Store`; a named root's artifacts too, written only with a chapter of theirs), the
/// ledgers of the roots the signed-roots hint names since its cursor, every file of the
/// roots marked to be listed again, and the small trees always listed. Without it, or when
/// the catalog cannot say, every file of every root; when the hint cannot say, every root's
/// ledgers. The cost follows the change, not the store.
fn store_files(
    store: &Store,
    project_key: &str,
    saved: Option<&Listing>,
    hint: Hint,
) -> Result<Listed, Fail> {
    use crate::store::catalog::{self, Since};
    let listing_fail = |dir: &Path, e: std::io::Error| Fail {
        code: SyncCode::Other,
        detail: format!("cannot list the store {}: {e}", dir.display()),
    };
    // Both ends are taken before the listing: what is recorded or signed during it is
    // named next time.
    let (signed_roots, signed_end) = match hint {
        Hint::Read { now_secs } => {
            let held = store.lock_collections().map_err(|e| Fail {
                code: SyncCode::Other,
                detail: format!("cannot take the collections lock: {e}"),
            })?;
            match signed::read_since(
                store.dir(),
                saved.and_then(|s| s.signed.as_ref()),
                now_secs,
                &held,
            ) {
                signed::Since::Roots { roots, end } => (Some(roots), Some(end)),
                signed::Since::ListAll { end, .. } => (None, end),
            }
        }
        Hint::ListAll => (None, None),
    };
    let (named, catalog_end) =
        match catalog::read_since(store.dir(), saved.and_then(|s| s.catalog.as_ref())) {
            Since::Changes { changes, end } if saved.is_some() => {
                // root → names in its `chapters/`.
                let mut named: BTreeMap<String, Vec<String>> = BTreeMap::new();
                let prefix = format!("{}/", crate::store::STORE_DIR);
                for change in changes {
                    let Some((root, "chapters")) = change
                        .folder
                        .strip_prefix(&prefix)
                        .and_then(|f| f.split_once('/'))
                    else {
                        continue;
                    };
                    named
                        .entry(root.to_owned())
                        .or_default()
                        .extend(change.files);
                }
                (Some(named), Some(end))
            }
            Since::Changes { end, .. } => (None, Some(end)),
            // The sync makes a catalog when there is none (as the search table does before it
            // lists everything), so its next listing can follow the change; `status` writes
            // nothing.
            Since::Rescan { .. } => match hint {
                Hint::Read { .. } => (None, catalog::end(store.dir()).ok()),
                Hint::ListAll => (None, catalog::current(store.dir())),
            },
        };
    let whole = named.is_none();
    let mut found: Vec<(String, String, FileKind, PathBuf)> = Vec::new();
    let walk = |found: &mut Vec<_>, root: &str, sub: Option<&str>| -> Result<(), Fail> {
        let (dir, rel) = match sub {
            Some(sub) => (store.dir().join(root).join(sub), format!("{root}/{sub}")),
            None => (store.dir().join(root), root.to_owned()),
        };
        let mut out = Vec::new();
        match walk_store(&dir, &rel, project_key, &mut out) {
            Ok(()) => {}
            Err(e) if sub.is_some() && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(listing_fail(&dir, e)),
        }
        found.extend(out.into_iter().map(|(p, k, f)| (root.to_owned(), p, k, f)));
        Ok(())
    };
    match &named {
        None => {
            for root in store.root_candidates()? {
                if store.is_root(&root) {
                    walk(&mut found, &root, None)?;
                }
            }
        }
        Some(named) => {
            let again = saved.map(|s| &s.again);
            for root in again.into_iter().flatten() {
                if crate::names::is_safe_component(root) && store.is_root(root) {
                    walk(&mut found, root, None)?;
                }
            }
            for (root, names) in named {
                if !crate::names::is_safe_component(root) {
                    continue;
                }
                walk(&mut found, root, Some("artifacts"))?;
                for name in names {
                    let rel = format!("{root}/chapters/{name}");
                    let file = store.dir().join(&rel);
                    if !file.is_file() {
                        continue; // removed since (a tombstone), or never there
                    }
                    if let Some((pool_path, kind)) = plan::pool_path(project_key, &rel) {
                        found.push((root.clone(), pool_path, kind, file));
                    }
                }
            }
            match &signed_roots {
                Some(signed) => {
                    for root in signed {
                        if crate::names::is_safe_component(root) {
                            walk(&mut found, root, Some("collections"))?;
                        }
                    }
                }
                None => {
                    for root in store.root_candidates()? {
                        walk(&mut found, &root, Some("collections"))?;
                    }
                }
            }
        }
    }
    // This machine's curation facts and forget acts: one small ledger per harness id each,
    // always listed, and the rule files (the mapping publishes project rules and never a
    // session rule). Their keys (`.edits`, `.forget`, `.rules`) cannot be session ids.
    for (dir_name, key) in [
        (crate::curation::file::EDITS_DIR, EDITS_KEY),
        (crate::store::forget::FORGET_DIR, FORGET_KEY),
        (crate::rules::store::RULES_DIR, RULES_KEY),
    ] {
        let dir = store.dir().join(dir_name);
        if !dir.is_dir() {
            continue;
        }
        let mut out = Vec::new();
        walk_store(&dir, dir_name, project_key, &mut out).map_err(|e| listing_fail(&dir, e))?;
        found.extend(out.into_iter().map(|(p, k, f)| (key.to_owned(), p, k, f)));
    }
    found.sort();
    found.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    Ok(Listed {
        files: found,
        whole,
        catalog_end,
        signed_end,
    })
}

/// The listing key of the store's `rules/` tree (no session id has a dot).
const RULES_KEY: &str = ".rules";

/// The listing key of the store's `forget/` tree.
const FORGET_KEY: &str = ".forget";

/// The listing key of the store's `edits/` tree.
const EDITS_KEY: &str = ".edits";

fn walk_store(
    dir: &Path,
    rel: &str,
    project_key: &str,
    out: &mut Vec<(String, FileKind, PathBuf)>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{rel}/{name}");
        let ty = entry.file_type()?;
        if ty.is_dir() && !name.starts_with('.') {
            walk_store(&entry.path(), &rel, project_key, out)?;
        } else if ty.is_file() {
            if let Some((pool_path, kind)) = plan::pool_path(project_key, &rel) {
                out.push((pool_path, kind, entry.path()));
            }
        }
    }
    Ok(())
}

/// The pool's `project.yml`: deterministic bytes, so every machine writes the same file
/// and a divergent copy is simply rebuilt.
pub fn project_yml(identity: &Identity) -> String {
    format!(
        "# Written by dsh-chapters; derived, do not edit.\nprojectKey: {}\nprojectKeySource: {}\nslug: {}\n",
        identity.project_key,
        identity.source.as_str(),
        identity.slug()
    )
}

/// The projectKey a pool `project.yml` names.
fn project_key_in(yml: &str) -> Option<String> {
    yml.lines()
        .find_map(|l| l.strip_prefix("projectKey:"))
        .map(|v| v.trim().trim_matches('"').to_owned())
}

/// Clear the stale temp files a killed git left in `git_dir` ([`pack::clear_stale_git_temp`]),
/// saying so in the report; a failure is only logged (they cost disk space, nothing else).
fn clear_git_temp(git_dir: &Path, what: &str, now: std::time::SystemTime, report: &mut SyncReport) {
    match pack::clear_stale_git_temp(git_dir, now) {
        Ok(0) => {}
        Ok(n) => report.notes.push(format!(
            "removed {n} temp file(s) a killed git left in {what}"
        )),
        Err(e) => {
            tracing::warn!(error = %e, "could not clear the temp files a killed git left in {what}")
        }
    }
}

fn git_dir(mirror_dir: &Path) -> PathBuf {
    mirror_dir.join(".git")
}

fn read_json<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> T {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Crash injection for tests: `CHAPTERS_CRASH_AT=<point>` kills this process with SIGKILL
/// when it reaches `point` (`sync-after-push`: the pool's ref moved, nothing after it done;
/// `sync-after-materialize`: the mirror written, its marker not). No effect otherwise.
/// A step of a sync, timed when `CHAPTERS_LOG` enables `dsh_chapters::pool::sync=debug`
/// (the CLI prints each span's busy time as it closes): where a sync's time goes.
fn phase(name: &'static str) -> tracing::span::EnteredSpan {
    tracing::debug_span!("sync", phase = name).entered()
}

fn crash_point(point: &str) {
    if std::env::var_os("CHAPTERS_CRASH_AT").is_some_and(|v| v == point) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

/// Run one sync. On failure the error carries the code and what was done; the last
/// status is written either way.
pub fn sync(ctx: &SyncContext<'_>, pull_only: bool) -> Result<SyncReport, SyncError> {
    let upstream = ctx.link.upstream.describe();
    let mut report = SyncReport {
        upstream: upstream.clone(),
        visibility: Some(ctx.link.visibility),
        ..Default::default()
    };
    // A local pool's publishers take turns (`publish_lock`), waited for before the store's
    // writer lock so a sync in the queue never keeps this machine's archive waiting.
    let publish_turn = match &ctx.link.upstream {
        Upstream::Local { path } if !pull_only && RetryPolicy::from_env().queue => {
            match PublishLock::acquire(path, publish_lock_wait()) {
                Ok(turn) => Some(turn),
                Err(e @ PublishLockError::NoPool { .. }) => {
                    tracing::debug!(error = %e, "publishing without the pool's publish lock");
                    None
                }
                Err(e) => {
                    report.notes.push(format!(
                        "{e}: publishing without waiting for a turn (the pool's ref still takes only fast-forwards)"
                    ));
                    None
                }
            }
        }
        _ => None,
    };
    let locking = phase("store lock");
    let lock = match ctx.store.lock(ctx.lock_timeout) {
        Ok(l) => l,
        Err(e) => {
            return Err(SyncError {
                code: SyncCode::Other,
                upstream,
                detail: e.to_string(),
                report: Box::new(report),
            });
        }
    };
    drop(locking);
    if lock.previous_holder_died() {
        // A sync (or an archive) killed mid-run: the mirror's temp files are ours to clear
        // now that no writer can be mid-write (the store's were cleared by `lock`).
        match atomic::clean_temp_files(&ctx.workspace.join(MIRROR_DIR), MIRROR_DEPTH) {
            Ok(0) => {}
            Ok(n) => report.notes.push(format!(
                "removed {n} temp file(s) an interrupted sync left in the mirror"
            )),
            Err(e) => tracing::warn!(error = %e, "could not clear the mirror's temp files"),
        }
    }
    // Temp files a killed git left in a pack directory: the mirror's are this machine's; a
    // local pool's are cleared only while this sync holds its publish turn (and only old
    // ones: another machine's git that raced the turn may be writing a fresh one).
    let now = std::time::SystemTime::now();
    clear_git_temp(
        &git_dir(&ctx.workspace.join(MIRROR_DIR)),
        "the mirror",
        now,
        &mut report,
    );
    if let (Some(_), Upstream::Local { path }) = (&publish_turn, &ctx.link.upstream) {
        clear_git_temp(path, "the pool", now, &mut report);
    }
    let result = {
        let _p = phase("run");
        run(ctx, pull_only, &mut report)
    };
    if result.is_ok() {
        record_adoption(ctx, &mut report);
    }
    let (code, detail, pool_project_key) = match &result {
        Ok(mismatch) => (SyncCode::Ok, None, mismatch.clone()),
        Err(f) => {
            let key = (f.code == SyncCode::IdentityMismatch)
                .then(|| {
                    f.detail
                        .strip_prefix(MISMATCH_PREFIX)
                        .and_then(|r| r.split(',').next())
                        .map(str::to_owned)
                })
                .flatten();
            (f.code, Some(f.detail.clone()), key)
        }
    };
    let status = SyncStatus {
        v: 1,
        code,
        at: ctx.now.to_owned(),
        pool_head: report.pool_head.clone(),
        detail: detail.clone(),
        hint: (code != SyncCode::Ok).then(|| code.hint().to_owned()),
        pool_project_key,
    };
    let status_written = {
        let _p = phase("status write");
        write_status(ctx.store, &status)
    };
    if let Err(e) = status_written {
        report
            .notes
            .push(format!("could not record the sync status: {e}"));
    }
    drop(lock);
    drop(publish_turn);
    match result {
        Ok(_) => Ok(report),
        Err(f) => Err(SyncError {
            code: f.code,
            upstream,
            detail: f.detail,
            report: Box::new(report),
        }),
    }
}

/// Whether the adopted pool's history was rewritten (`Ok(true)`) or is the one adopted
/// (`Ok(false)`); a replaced pool (empty, or a head that does not descend from the one this
/// machine last saw under a first commit of its own) is `pool-replaced`.
fn check_adopted(
    repo: &GitRepo,
    known: &PoolIdentity,
    head: Option<ObjectId>,
    upstream: &str,
) -> Result<bool, Fail> {
    let Some(head) = head else {
        return Err(Fail {
            code: SyncCode::PoolReplaced,
            detail: format!(
                "the pool {upstream} holds no history, but this workspace adopted it with history up to {} (seen {})",
                known.head, known.recorded_at
            ),
        });
    };
    let last = ObjectId::from_hex(known.head.as_bytes()).ok();
    if let Some(last) = last {
        if repo.has_object(last) && repo.is_ancestor(last, head).unwrap_or(false) {
            return Ok(false);
        }
    }
    if repo.root_fingerprint(head)? == known.root {
        return Ok(true);
    }
    Err(Fail {
        code: SyncCode::PoolReplaced,
        detail: format!(
            "the pool {upstream} is another repository: its head {head} does not descend from {}, the head this machine last saw ({}), and its first commit is not the adopted pool's",
            known.head, known.recorded_at
        ),
    })
}

/// After a good sync: `pool.json` records the pool as adopted (its first commit's
/// fingerprint) and the head this machine saw last. Written only when it changes, and only
/// while `pool.json` still holds the link this sync ran with (a `link` meanwhile wins).
fn record_adoption(ctx: &SyncContext<'_>, report: &mut SyncReport) {
    let Some(head) = report
        .pool_head
        .as_deref()
        .and_then(|h| ObjectId::from_hex(h.as_bytes()).ok())
    else {
        return;
    };
    let result = (|| -> Result<(), String> {
        let root = match &ctx.link.pool {
            Some(known) if !report.history_rewritten => known.root.clone(),
            _ => {
                let repo = match &ctx.link.upstream {
                    Upstream::Local { path } => GitRepo::open(path),
                    Upstream::Network { .. } => {
                        GitRepo::open(&git_dir(&ctx.workspace.join(MIRROR_DIR)))
                    }
                }
                .map_err(|e| e.to_string())?;
                repo.root_fingerprint(head).map_err(|e| e.to_string())?
            }
        };
        let head = head.to_string();
        if ctx
            .link
            .pool
            .as_ref()
            .is_some_and(|p| p.root == root && p.head == head)
        {
            return Ok(());
        }
        let current = super::link::read(ctx.store.dir()).map_err(|e| e.to_string())?;
        let Some(mut record) = current
            .filter(|r| r.upstream == ctx.link.upstream && r.linked_at == ctx.link.linked_at)
        else {
            return Ok(());
        };
        record.pool = Some(PoolIdentity {
            root,
            head,
            recorded_at: ctx.now.to_owned(),
        });
        super::link::write(ctx.store.dir(), &record).map_err(|e| e.to_string())
    })();
    if let Err(e) = result {
        report.notes.push(format!(
            "could not record the adopted pool in pool.json ({e}); the next sync tries again"
        ));
    }
}

pub fn read_status(store: &Store) -> Option<SyncStatus> {
    read_json::<Option<SyncStatus>>(&store.dir().join(STATUS_FILE))
}

fn write_status(store: &Store, status: &SyncStatus) -> Result<(), StoreError> {
    let text = serde_json::to_string_pretty(status).expect("a SyncStatus always serializes");
    atomic::write_atomic(
        &store.dir().join(STATUS_FILE),
        format!("{text}\n").as_bytes(),
    )
}

/// Returns the pool's projectKey when it differs from ours (publication refused then).
fn run(
    ctx: &SyncContext<'_>,
    pull_only: bool,
    report: &mut SyncReport,
) -> Result<Option<String>, Fail> {
    // Never publish what an interrupted archive left uncommitted (after a power loss it
    // may be torn); the next archive writes it again.
    let removed = {
        let _p = phase("recover uncommitted");
        ctx.store.recover_uncommitted()?
    };
    if !removed.is_empty() {
        report.notes.push(format!(
            "{} document(s) an interrupted archive left uncommitted were removed; the next archive writes them again",
            removed.len()
        ));
    }
    let mirror_dir = ctx.workspace.join(MIRROR_DIR);
    let opening = phase("open mirror and pool");
    let mirror_git = ensure_mirror(&mirror_dir, report)?;
    let swept = sweep_own_copies(&mirror_dir, ctx.store, &ctx.identity.project_key)?;
    if swept > 0 {
        report.notes.push(format!(
            "removed {swept} copie(s) of this machine's own chapters from the mirror (its store holds them)"
        ));
    }
    // The object database this sync reads and writes: the pool itself when it is a local
    // path, else the mirror (which `git fetch`/`git push` move objects through).
    let (mut mirror, provider): (GitRepo, Box<dyn Provider>) = match &ctx.link.upstream {
        Upstream::Local { path } => {
            let pool = LocalPool {
                path: path.clone(),
                mirror_git: mirror_git.path().to_path_buf(),
            };
            let repo = match &ctx.link.pool {
                Some(_) => pool.open_adopted()?,
                None => pool.open_or_init()?,
            };
            (repo, Box::new(pool))
        }
        Upstream::Network { url } => (
            mirror_git,
            Box::new(NetworkPool {
                remote: Remote {
                    url: url.clone(),
                    token: ctx.token.clone(),
                    user: ctx.link.user.clone(),
                },
                timeout: ctx.timeout,
            }),
        ),
    };
    // The publish's objects stay in memory until its ref moves, then go into one pack
    // (`GitRepo::hold_writes`): no loose files, no `git pack-objects` deflating them again.
    mirror.hold_writes();
    drop(opening);

    // `vocabApply`: the vocabulary's facts publish in a commit of their own after the
    // documents', so `git revert` of that one commit undoes exactly the plugin's merges.
    let mut vocabulary_round =
        ctx.vocabulary.is_some() && ctx.link.visibility == Visibility::Private && !pull_only;
    // A round's own message (the vocabulary's), derived from the facts it publishes.
    let mut message: Option<crate::redact::Redacted<String>> = None;
    // A forget commit is made at most once per sync; after it the index is rebuilt whole.
    let mut forget_pushed = false;
    let (mut adoption_checked, mut rewrite_noted) = (false, false);
    let upstream_name = ctx.link.upstream.describe();
    let retry = RetryPolicy::from_env();
    let mut attempt = 0;
    loop {
        attempt += 1;
        report.attempts = attempt;
        let pulling = phase("pull and checks");
        let head = provider.pull_fast_forward(&mirror)?;
        // Where the mirror stood before this pull: the pool index this machine last
        // published is a valid base for an update only while the mirror is still there.
        let mut materialized_before =
            crate::store::mirror::materialized_head(&mirror_dir).map(|o| o.to_string());
        report.pool_head = head.map(|h| h.to_string());
        let base_tree = head.map(|h| mirror.commit_tree(h)).transpose()?;

        // The pool's identity: a foreign project's pool receives nothing.
        if let Some(tree) = base_tree {
            if let Some(blob) = mirror.blob_at(tree, "project.yml")? {
                let theirs = String::from_utf8_lossy(&mirror.read_blob(blob)?).into_owned();
                if let Some(key) =
                    project_key_in(&theirs).filter(|k| k != &ctx.identity.project_key)
                {
                    materialize_pulled(ctx, &mirror, &mirror_dir, head, report)?;
                    return Err(Fail {
                        code: SyncCode::IdentityMismatch,
                        detail: format!(
                            "{MISMATCH_PREFIX}{key}, this checkout is {} ({}: {})",
                            ctx.identity.project_key,
                            ctx.identity.source.as_str(),
                            ctx.identity.origin
                        ),
                    });
                }
            }
        }
        // The pool this link adopted (`pool.json`): never silently another one. Its history
        // must still hold the head this machine last saw; if it does not, the same first
        // commit (author line and message) says the history was rewritten (a purge,
        // docs/purging.md), adopted as divergence; another first commit, or no history at
        // all, is a replaced pool: refused until a person links it.
        if let (Some(known), false) = (&ctx.link.pool, adoption_checked) {
            adoption_checked = true;
            if check_adopted(&mirror, known, head, &upstream_name)? {
                report.history_rewritten = true;
            }
        }
        // A history rewritten under us (`git filter-repo` / `git filter-branch` to purge a
        // leak): the pool still names this project (checked above), but its head does not
        // descend from the one the mirror last materialized. The mirror's files are rebuilt
        // from the new history; the store is the truth and republishes what the pool lacks,
        // except what a person forgot.
        if let Some(new) = head {
            let old = materialized_before
                .as_deref()
                .and_then(|h| ObjectId::from_hex(h.as_bytes()).ok());
            let diverged = match old {
                Some(old) => !mirror.has_object(old) || !mirror.is_ancestor(old, new)?,
                None => false,
            };
            if diverged {
                let old = old.map(|o| o.to_string()).unwrap_or_default();
                rebuild_mirror_files(&mirror_dir, ctx.store.dir())?;
                materialized_before = None;
                report.mirror_rebuilt = true;
                if ctx.link.pool.is_none() {
                    // Not adopted yet: `chapters link` just named this pool.
                    report.notes.push(format!(
                        "the pool's head {new} does not descend from {old}, which this mirror last held: the pool linked here is adopted as it is, and the mirror was rebuilt from it"
                    ));
                }
            }
            if report.history_rewritten && !rewrite_noted {
                rewrite_noted = true;
                report.notes.push(format!(
                    "the pool's history was rewritten (its head {new} does not descend from the head this machine last saw; its first commit and its project.yml are still this pool's): the mirror was rebuilt from the new history"
                ));
            }
        }
        if pull_only {
            materialize_pulled(ctx, &mirror, &mirror_dir, head, report)?;
            return Ok(None);
        }

        // The mirror becomes the pulled pool first, so the topic index is built over the
        // pool's tree as this commit leaves it: the mirror's files plus this store's.
        drop(pulling);
        let pulled = {
            let _p = phase("materialize pulled");
            materialize_pulled(ctx, &mirror, &mirror_dir, head, report)?
        };
        // A person's forget acts: what the pool's tip still holds of them goes, in a commit
        // of its own naming the person and the reason, before anything else is published.
        if !forget_pushed {
            let _p = phase("forget");
            let forgotten = read_forgotten(ctx)?;
            if let Some((removals, scrubbed, text)) =
                plan_forget(ctx, &mirror, base_tree, &forgotten)?
            {
                let mut ledgers = scrubbed;
                if ctx.link.visibility == Visibility::Private {
                    ledgers.extend(forget_ledgers(ctx, &mirror)?);
                }
                let tree = mirror.tree_edit(base_tree, &ledgers, &removals)?;
                if Some(tree) != base_tree {
                    let email = format!("{}@dsh-chapters.local", ctx.harness_id);
                    let commit = mirror.write_commit(
                        tree,
                        &head.into_iter().collect::<Vec<_>>(),
                        "dsh-chapters",
                        &email,
                        ctx.now_secs,
                        &text,
                    )?;
                    match provider.push(&mirror, commit, head) {
                        Ok(()) => {
                            forget_pushed = true;
                            report.forgotten += removals.len() as u64;
                            report.pool_head = Some(commit.to_string());
                            report.notes.push(format!(
                                "removed {} forgotten file(s) from the pool's tip in commit {commit}; its history still holds them until it is rewritten (docs/purging.md)",
                                removals.len()
                            ));
                            attempt = 0;
                            continue;
                        }
                        Err(f) if f.code == SyncCode::Diverged && attempt < retry.max_attempts => {
                            let wait = retry.wait(ctx.harness_id, attempt, head);
                            report.notes.push(format!(
                                "attempt {attempt}: the pool moved on before the forget commit; re-fetching in {} ms",
                                wait.as_millis()
                            ));
                            std::thread::sleep(wait);
                            continue;
                        }
                        Err(f) => return Err(f),
                    }
                }
            }
        }
        if ctx.link.visibility == Visibility::Private {
            let _p = phase("honour reverts");
            honour_reverts(ctx, &mirror, &mirror_dir, head, report)?;
        }
        let (mut upserts, listing) = {
            let _p = phase("plan publication");
            plan_publication(ctx, &mirror, &mirror_dir, head, base_tree, report)?
        };
        // The input areas' trees the index plan made (see `commit_tree`).
        let mut edited = Vec::new();
        let index = if ctx.link.visibility == Visibility::Private {
            let _p = phase("plan index");
            plan_index(
                ctx,
                &mirror,
                &mirror_dir,
                base_tree,
                &pulled,
                &mut upserts,
                &mut edited,
                report,
                ctx.rebuild_index || forget_pushed,
            )?
        } else {
            None
        };
        let removals = index.as_ref().map(|(_, r)| r.clone()).unwrap_or_default();
        // The landing pages ride along with a commit that publishes anyway (a quiet round
        // publishes nothing).
        if let Some((update, _)) = &index {
            if !upserts.is_empty() || !removals.is_empty() {
                plan_pages(
                    ctx,
                    &mirror,
                    &mirror_dir,
                    base_tree,
                    update,
                    &pulled,
                    &removals,
                    &mut upserts,
                    report,
                )?;
            }
        }
        let tree = if upserts.is_empty() && removals.is_empty() {
            None
        } else {
            let _p = phase("tree edit");
            Some(commit_tree(
                &mirror, base_tree, &upserts, &removals, &edited,
            )?)
        };
        // Nothing to publish, or everything planned is already there (a rebuilt index equal
        // to the pool's).
        let Some(tree) = tree.filter(|t| Some(*t) != base_tree) else {
            listing.save_at(&mirror_dir, head);
            match next_round(ctx, &mirror_dir, &mut vocabulary_round, report) {
                Some(m) => {
                    (message, attempt) = (Some(m), 0);
                    continue;
                }
                None => return Ok(None),
            }
        };
        let email = format!("{}@dsh-chapters.local", ctx.harness_id);
        let text = message.clone().unwrap_or_else(|| {
            let publication = Publication {
                harness: ctx.harness_id,
                published: &report.published,
            };
            Redacted::of_settings(&publication, commit_message)
        });
        let commit = mirror.write_commit(
            tree,
            &head.into_iter().collect::<Vec<_>>(),
            "dsh-chapters",
            &email,
            ctx.now_secs,
            &text,
        )?;
        let pushed = {
            let _p = phase("push");
            provider.push(&mirror, commit, head)
        };
        match pushed {
            Ok(()) => {
                crash_point("sync-after-push");
                let saving = phase("save listing");
                report.pool_head = Some(commit.to_string());
                listing.save_at(&mirror_dir, Some(commit));
                drop(saving);
                let own: BTreeMap<String, ObjectId> = upserts.into_iter().collect();
                // Without removals, the commit changes from `head` exactly its upserts.
                let over = head.filter(|_| removals.is_empty());
                {
                    let _p = phase("materialize own");
                    materialize(ctx, &mirror, &mirror_dir, Some(commit), &own, over, report)?;
                }
                match next_round(ctx, &mirror_dir, &mut vocabulary_round, report) {
                    Some(m) => (message, attempt) = (Some(m), 0),
                    None => return Ok(None),
                }
            }
            Err(f) if f.code == SyncCode::Diverged && attempt < retry.max_attempts => {
                // Another machine published first: fetch its head and plan again from the
                // store (the mirror is transport; nothing of this attempt is kept).
                let wait = retry.wait(ctx.harness_id, attempt, head);
                report.notes.push(format!(
                    "attempt {attempt}: the pool moved on; re-fetching and publishing again in {} ms",
                    wait.as_millis()
                ));
                std::thread::sleep(wait);
                report.published.clear();
                report.refused.clear();
                report.withheld_public = 0;
            }
            Err(f) => return Err(f),
        }
    }
}

/// How a sync retries a lost race: publishers of a local pool queue on its publish lock
/// (so they do not race at all), and `MAX_ATTEMPTS` with `retry_wait` between them for
/// races that still happen (network pools, a turn not had in time). For the benchmark's
/// side-by-side baselines only: `CHAPTERS_SYNC_RETRY=backoff` (no queue, the behaviour
/// before it) and `CHAPTERS_SYNC_RETRY=immediate` (no queue, 4 attempts back to back, the
/// behaviour before backoff).
#[derive(Clone, Copy)]
struct RetryPolicy {
    max_attempts: u32,
    backoff: bool,
    queue: bool,
}

impl RetryPolicy {
    fn from_env() -> RetryPolicy {
        let baseline = std::env::var_os("CHAPTERS_SYNC_RETRY");
        if baseline.as_deref().is_some_and(|v| v == "immediate") {
            RetryPolicy {
                max_attempts: 4,
                backoff: false,
                queue: false,
            }
        } else {
            RetryPolicy {
                max_attempts: MAX_ATTEMPTS,
                backoff: true,
                queue: baseline.as_deref().is_none_or(|v| v != "backoff"),
            }
        }
    }

    fn wait(self, harness_id: &str, attempt: u32, lost_against: Option<ObjectId>) -> Duration {
        if self.backoff {
            retry_wait(harness_id, attempt, lost_against)
        } else {
            Duration::ZERO
        }
    }
}

/// How long a sync waits for its turn at a local pool: `publish_lock::DEFAULT_WAIT`, or
/// `CHAPTERS_PUBLISH_LOCK_WAIT_MS` (tests: a turn not had in time falls back to racing).
fn publish_lock_wait() -> Duration {
    std::env::var("CHAPTERS_PUBLISH_LOCK_WAIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(super::publish_lock::DEFAULT_WAIT, Duration::from_millis)
}

/// How long a sync that lost the race for the pool's ref waits before it fetches again:
/// exponential backoff with jitter ("equal jitter": within `[w/2, w]`, `w` =
/// `RETRY_FIRST_WINDOW_MS` doubled per attempt up to `RETRY_MAX_WINDOW_MS`). Syncs that
/// collided spread apart instead of colliding again in step. The jitter is deterministic:
/// a hash of the machine's harness id, the attempt and the head it lost against, so two
/// machines draw different waits and a test can replay one.
fn retry_wait(harness_id: &str, attempt: u32, lost_against: Option<ObjectId>) -> Duration {
    let doublings = attempt.saturating_sub(1).min(16);
    let window = RETRY_FIRST_WINDOW_MS
        .saturating_mul(1u64 << doublings)
        .min(RETRY_MAX_WINDOW_MS);
    let half = window / 2;
    // FNV-1a over the seed's bytes, then a splitmix64 finalizer to spread nearby seeds.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let head = lost_against.map(|h| h.to_string()).unwrap_or_default();
    for b in harness_id
        .bytes()
        .chain([0])
        .chain(attempt.to_le_bytes())
        .chain(head.bytes())
    {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    Duration::from_millis(half + h % (window - half + 1))
}

/// This machine's forget acts (`chapters forget`).
fn read_forgotten(ctx: &SyncContext<'_>) -> Result<crate::store::forget::Forgotten, Fail> {
    crate::store::forget::read(ctx.store.dir()).map_err(|e| Fail {
        code: SyncCode::Other,
        detail: e.to_string(),
    })
}

/// The pool paths of this machine's forgotten items that the tip at `base_tree` still holds,
/// and the message of the commit that removes them (who, when, why, which ids). `None` when
/// the tip holds none of them. Only paths in this machine's own namespace are named: its
/// session folders, its sessions' ledgers, and the artifacts the forget found referenced by
/// nothing else.
fn plan_forget(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    base_tree: Option<ObjectId>,
    forgotten: &crate::store::forget::Forgotten,
) -> Result<Option<ForgetPlan>, Fail> {
    use crate::store::forget::Item;
    let Some(tree) = base_tree.filter(|_| !forgotten.is_empty()) else {
        return Ok(None);
    };
    let pk = &ctx.identity.project_key;
    let mut removals = BTreeSet::new();
    let mut upserts: Upserts = Vec::new();
    let mut lines = Vec::new();
    for act in &forgotten.acts {
        let before = removals.len() + upserts.len();
        for item in &act.items {
            match item {
                Item::Session { root, .. }
                | Item::Chapter { root, .. }
                | Item::Plan { root, .. } => {
                    let dir = format!("chapters/{pk}/{root}");
                    if let Some(sub) = mirror.tree_at(tree, &dir)? {
                        for (p, _) in mirror.list_tree(sub)? {
                            let path = format!("{dir}/{p}");
                            if item.covers_pool_path(pk, &path) {
                                removals.insert(path);
                            }
                        }
                    }
                    if let Item::Session { sessions, .. } = item {
                        for s in sessions {
                            let path = format!("collections/{pk}/{s}.jsonl");
                            if mirror.blob_at(tree, &path)?.is_some() {
                                removals.insert(path);
                            }
                        }
                    }
                }
                Item::Artifact { sha256, .. } if sha256.len() > 2 => {
                    let path = format!("artifacts/{pk}/{}/{sha256}.txt", &sha256[..2]);
                    if mirror.blob_at(tree, &path)?.is_some() {
                        removals.insert(path);
                    }
                }
                Item::Artifact { .. } => {}
            }
            // A forgotten chapter's signatures were scrubbed in the store: the pool's copy
            // of the ledger is replaced by it (the one place a ledger may shrink its lines'
            // contents — never its lines).
            if let Item::Chapter {
                root, session_id, ..
            } = item
            {
                let path = format!("collections/{pk}/{session_id}.jsonl");
                let file = ctx.store.collection_path(root, session_id)?;
                if let (Some(theirs), Ok(ours)) =
                    (mirror.blob_at(tree, &path)?, std::fs::read(&file))
                {
                    if theirs != plan::blob_id(&ours) && !upserts.iter().any(|(p, _)| p == &path) {
                        upserts.push((path, mirror.write_blob(&ours)?));
                    }
                }
            }
        }
        if removals.len() + upserts.len() > before {
            let ids: Vec<String> = act.items.iter().map(Item::id).collect();
            // A person's name and reason: through the rules, as the forget ledger holds them.
            lines.push(crate::redact::echoed_text(&format!(
                "Forgotten by {} at {}: {}\nids: {}",
                act.by,
                act.at,
                act.reason.as_deref().unwrap_or("(no reason given)"),
                ids.join(", ")
            )));
        }
    }
    if removals.is_empty() && upserts.is_empty() {
        return Ok(None);
    }
    let lines: Redacted<Vec<String>> = lines.into_iter().collect();
    let counts = ForgetCounts {
        harness: ctx.harness_id.to_owned(),
        removed: removals.len(),
        scrubbed: upserts.len(),
    };
    let text = lines.derive_with(&counts, forget_message);
    Ok(Some((removals.into_iter().collect(), upserts, text)))
}

/// The forget commit: the paths it removes, the ledgers it scrubs, its message.
type ForgetPlan = (Vec<String>, Upserts, Redacted<String>);

/// What the forget commit's message says beside the acts: the machine and counts.
struct ForgetCounts {
    harness: String,
    removed: usize,
    scrubbed: usize,
}

impl crate::redact::Settings for ForgetCounts {}

/// The forget commit's message: the acts' lines (through the rules) and the counts.
#[allow(clippy::ptr_arg)] // `Redacted::derive_with` hands the value over as `&T`.
fn forget_message(lines: &Vec<String>, counts: &ForgetCounts) -> String {
    format!(
        "dsh-chapters: forget from {}\n\n{}\n\n{} file(s) removed from the tip, {} signature ledger(s) scrubbed; the history still holds them until it is rewritten.\n",
        counts.harness,
        lines.join("\n\n"),
        counts.removed,
        counts.scrubbed
    )
}

/// This store's forget ledgers as pool upserts (published with the forget commit, so other
/// machines know what was taken back and by whom).
fn forget_ledgers(ctx: &SyncContext<'_>, mirror: &GitRepo) -> Result<Upserts, Fail> {
    let dir = ctx.store.dir().join(crate::store::forget::FORGET_DIR);
    let mut found = Vec::new();
    if dir.is_dir() {
        walk_store(
            &dir,
            crate::store::forget::FORGET_DIR,
            &ctx.identity.project_key,
            &mut found,
        )
        .map_err(|e| Fail {
            code: SyncCode::Other,
            detail: format!("cannot list {}: {e}", dir.display()),
        })?;
    }
    found.sort();
    let mut out = Vec::new();
    for (pool_path, _, file) in found {
        let bytes = std::fs::read(&file).map_err(|e| Fail {
            code: SyncCode::Other,
            detail: format!("{}: {e}", file.display()),
        })?;
        out.push((pool_path, mirror.write_blob(&bytes)?));
    }
    Ok(out)
}

/// After a history rewrite: remove every materialized file of the mirror (its `.git` stays,
/// minus the records of what it held), so the next materialization writes the new tree whole.
fn rebuild_mirror_files(mirror_dir: &Path, store_dir: &Path) -> Result<(), Fail> {
    let entries = match std::fs::read_dir(mirror_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(mirror_io(mirror_dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| mirror_io(mirror_dir, e))?;
        if entry.file_name() == ".git" {
            continue;
        }
        let path = entry.path();
        let removed = if entry.file_type().is_ok_and(|t| t.is_dir()) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.map_err(|e| mirror_io(&path, e))?;
    }
    for marker in [MATERIALIZED_FILE, LISTING_FILE, PUBLISHED_DIR] {
        let path = git_dir(mirror_dir).join(marker);
        let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir_all(&path));
    }
    forget_search_state(store_dir);
    Ok(())
}

/// Documents left the mirror: the search table, which never drops a document on its own,
/// is rebuilt at its next refresh, and the enrichment catalog reads every chapter again.
fn forget_search_state(store_dir: &Path) {
    if let Err(e) = crate::store::catalog::start_over(store_dir) {
        tracing::warn!(error = %e, "could not start the store's catalog over after documents left the mirror");
    }
    if let Err(e) = crate::catalog::table::Table::invalidate(store_dir, Duration::from_secs(30)) {
        tracing::warn!(error = %e, "could not reset the search table after documents left the mirror; `chapters index rebuild` does");
    }
}

/// A person who reverted a merge in the pool — `git revert` of the plugin's vocabulary
/// commit, or the line taken out by hand — took lines out of this machine's curation ledger
/// there. The store's ledger is append-only and publishes them again, so what the revert
/// meant is recorded first: each reverted `topic-alias` still in effect becomes a person's
/// `topic-pin` of its topic, which undoes the merge on every machine (record §6.3: every
/// merge revertible with git). The ledger itself is compared with the pool at every sync
/// (the small trees are always listed) and restored whole.
fn honour_reverts(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    mirror_dir: &Path,
    head: Option<ObjectId>,
    report: &mut SyncReport,
) -> Result<(), Fail> {
    let Some(base) = Listing::read(mirror_dir).base(mirror, head) else {
        return Ok(());
    };
    let Some(head) = head.filter(|h| *h != base) else {
        return Ok(());
    };
    let path = format!(
        "{}/{}/{}",
        curation::file::EDITS_DIR,
        ctx.harness_id,
        curation::file::CURATION_FILE
    );
    let Some(before) = mirror.blob_at(mirror.commit_tree(base)?, &path)? else {
        return Ok(());
    };
    let after = mirror.blob_at(mirror.commit_tree(head)?, &path)?;
    if after == Some(before) {
        return Ok(());
    }
    let before = mirror.read_blob(before)?;
    let after = after
        .map(|b| mirror.read_blob(b))
        .transpose()?
        .unwrap_or_default();
    let removed = lines_taken_out(&before, &after);
    if removed.is_empty() {
        return Ok(());
    }
    let fail = |e: &dyn std::fmt::Display| Fail {
        code: SyncCode::Other,
        detail: format!("recording a revert of {path} in the pool: {e}"),
    };
    let current = crate::topics::build::read_curation(ctx.store.dir(), Some(mirror_dir))
        .map_err(|e| fail(&e))?
        .curation;
    let mut undone = Vec::new();
    for line in &removed {
        let Ok(fact) = serde_json::from_slice::<Fact>(line) else {
            continue;
        };
        let FactKind::TopicAlias { from, to } = fact.kind else {
            continue;
        };
        let (from, to) = (
            curation::normalize_topic(&from),
            curation::normalize_topic(&to),
        );
        // Only a merge still in effect: a later fact may have replaced it, and a revert
        // already recorded left none.
        if current.aliases().get(&from).is_none_or(|a| a.to != to) || undone.contains(&from) {
            continue;
        }
        let pin = Fact::revert_seen_in_pool(&from, &to, &head.to_string(), ctx.now);
        let redactor = match &ctx.vocabulary {
            Some(apply) => apply.redactor,
            // Topic labels from a line that passed the full redactor when written.
            None => crate::redact::built_in()
                .ok_or_else(|| fail(&"the built-in redactor did not compile"))?,
        };
        curation::file::append(
            ctx.store,
            ctx.harness_id,
            &curation::file::redacted(&pin, redactor),
        )
        .map_err(|e| fail(&e))?;
        undone.push(from);
    }
    report.notes.push(format!(
        "the pool lost {} line(s) of this machine's curation ledger ({path}); a ledger only grows, so it is published whole again{}",
        removed.len(),
        if undone.is_empty() {
            String::new()
        } else {
            format!(
                ", and the reverted merge(s) of {} are kept undone by a person's topic-pin",
                undone.join(", ")
            )
        }
    ));
    Ok(())
}

/// The lines of `before` that `after` no longer holds, counting repeats.
fn lines_taken_out<'a>(before: &'a [u8], after: &[u8]) -> Vec<&'a [u8]> {
    let mut left: BTreeMap<&[u8], usize> = BTreeMap::new();
    for line in after.split_inclusive(|b| *b == b'\n') {
        *left.entry(line).or_default() += 1;
    }
    before
        .split_inclusive(|b| *b == b'\n')
        .filter(|line| match left.get_mut(line) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

/// After a round published (or found nothing to publish): with `vocabApply`, write the
/// vocabulary's facts once and, when there are any, return the message of the commit
/// that publishes them in another round.
fn next_round(
    ctx: &SyncContext<'_>,
    mirror_dir: &Path,
    vocabulary_round: &mut bool,
    report: &mut SyncReport,
) -> Option<crate::redact::Redacted<String>> {
    if !std::mem::take(vocabulary_round) {
        return None;
    }
    let apply = ctx.vocabulary.as_ref()?;
    let written = apply_vocabulary(ctx, mirror_dir, apply, report)?;
    if written.is_empty() {
        return None;
    }
    Some(written.derive_with(&Harness(ctx.harness_id.to_owned()), vocabulary_message))
}

/// The machine a commit comes from.
struct Harness(String);

impl crate::redact::Settings for Harness {}

/// The vocabulary commit's message: derived from the facts it publishes.
#[allow(clippy::ptr_arg)] // `Redacted::derive_with` hands the value over as `&T`.
fn vocabulary_message(written: &Vec<crate::topics::vocab::Candidate>, harness: &Harness) -> String {
    let lines: Vec<String> = written
        .iter()
        .map(|c| format!("{} → {} ({})", c.from, c.to, c.reason))
        .collect();
    format!(
        "dsh-chapters: vocabulary from {}\n\ntopic-alias facts by the plugin (`git revert` this commit to undo them):\n{}",
        harness.0,
        lines.join("\n")
    )
}

/// What a publish commit's message is made of: the machine and the counts per kind, no
/// conversation text.
struct Publication<'a> {
    harness: &'a str,
    published: &'a BTreeMap<String, u64>,
}

impl crate::redact::Settings for Publication<'_> {}

fn commit_message(publication: &Publication<'_>) -> String {
    let parts: Vec<String> = publication
        .published
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    format!(
        "dsh-chapters: publish from {}\n\n{}",
        publication.harness,
        parts.join(", ")
    )
}

type Upserts = Vec<(String, ObjectId)>;

/// Decide the store files a listing names against the pool's tree; write the blobs to
/// publish. Returns them and the listing state to save once they are in the pool.
fn plan_publication(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    mirror_dir: &Path,
    head: Option<ObjectId>,
    base_tree: Option<ObjectId>,
    report: &mut SyncReport,
) -> Result<(Upserts, Listing), Fail> {
    retire_manifests(mirror_dir);
    let saved = Listing::read(mirror_dir);
    let saved = saved.base(mirror, head).is_some().then_some(saved);
    let mut upserts = Vec::new();
    let listing = phase("list store files");
    let listed = store_files(
        ctx.store,
        &ctx.identity.project_key,
        saved.as_ref(),
        Hint::Read {
            now_secs: u64::try_from(ctx.now_secs).unwrap_or(0),
        },
    )?;
    drop(listing);
    let mut next = Listing {
        v: LISTING_VERSION,
        head: None,
        catalog: listed.catalog_end,
        signed: listed.signed_end,
        again: BTreeSet::new(),
    };
    let forgotten = read_forgotten(ctx)?;
    for (root, pool_path, kind, file) in listed.files {
        // What a person forgot is never published again (it should not be in the store;
        // a copy restored by hand stays local).
        if forgotten.covers_pool_path(&ctx.identity.project_key, &pool_path) {
            continue;
        }
        if ctx.link.visibility == Visibility::Public && kind.from_conversation() {
            report.withheld_public += 1;
            continue;
        }
        // The daemon appends signatures under the collections lock, not the writer lock:
        // a ledger is read under it too, so a line is never published half-written.
        let _collections = if kind == FileKind::Collection {
            Some(ctx.store.lock_collections().map_err(|e| Fail {
                code: SyncCode::Other,
                detail: format!("cannot take the collections lock: {e}"),
            })?)
        } else {
            None
        };
        let bytes = match std::fs::read(&file) {
            Ok(bytes) => bytes,
            // Named by the catalog, then removed (a forget) before this listing read it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !listed.whole => continue,
            Err(e) => {
                return Err(Fail {
                    code: SyncCode::Other,
                    detail: format!("{}: {e}", file.display()),
                })
            }
        };
        // A write-once file is published once and for good: verified first. A torn one is
        // held back, and its root listed whole again at the next sync (a repaired file then
        // publishes), whatever the catalog says.
        if let Some(why) = plan::torn(kind, &pool_path, &bytes) {
            report.notes.push(format!(
                "held back {}: {why} — torn (a power cut?) or damaged; it is never published so",
                file.display()
            ));
            tracing::warn!(path = %file.display(), reason = %why, "a torn write-once file was not published");
            next.again.insert(root);
            continue;
        }
        let pool_blob = match base_tree {
            Some(tree) => mirror.blob_at(tree, &pool_path)?,
            None => None,
        };
        let pool_hex = pool_blob.map(|b| b.to_string());
        let action = plan::decide(kind, &bytes, pool_hex.as_deref(), || {
            pool_blob.and_then(|b| mirror.read_blob(b).ok())
        });
        match action {
            Action::Same => {}
            Action::Add | Action::Append | Action::Annotate | Action::Restore => {
                let blob = mirror.write_blob(&bytes)?;
                upserts.push((pool_path.clone(), blob));
                *report
                    .published
                    .entry(kind_name(kind).to_owned())
                    .or_insert(0) += 1;
            }
            Action::Refuse { reason } => {
                report.refused.push(Refusal {
                    path: pool_path,
                    reason,
                });
                continue;
            }
        }
    }
    // Derived files: rebuilt and committed when they diverge, never merged.
    for (path, text) in [
        ("project.yml", project_yml(ctx.identity)),
        (".gitattributes", plan::GITATTRIBUTES.to_owned()),
    ] {
        let want = plan::blob_id(text.as_bytes());
        let have = match base_tree {
            Some(tree) => mirror.blob_at(tree, path)?.map(|b| b.to_string()),
            None => None,
        };
        if have.as_deref() != Some(want.as_str()) {
            upserts.push((path.to_owned(), mirror.write_blob(text.as_bytes())?));
            *report
                .published
                .entry(kind_name(FileKind::Derived).to_owned())
                .or_insert(0) += 1;
        }
    }
    if report.withheld_public > 0 {
        report.notes.push(format!(
            "the pool {} is declared public (`chapters link … --visibility public`): {} file(s) of conversation (chapters, plans, artifacts, collections) were not published",
            ctx.link.upstream.describe(),
            report.withheld_public
        ));
    }
    // A refused path is never written; the rest of the store still publishes.
    for r in &report.refused {
        tracing::warn!(path = %r.path, reason = %r.reason, "refused to overwrite a pool file");
    }
    Ok((upserts, next))
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Chapter => "chapter",
        FileKind::Plan => "plan",
        FileKind::Artifact => "artifact",
        FileKind::Collection => "collection",
        FileKind::Curation => "curation",
        FileKind::Rule => "rule",
        FileKind::Forget => "forget",
        FileKind::Derived => "derived",
    }
}

/// Whether the pool file `path` (blob `blob`) is this store's own: a chapter or plan of a
/// session tree the store holds under the same name (the store's copy is the truth, even
/// when newer), or a project rule, a curation or forget ledger with the same bytes.
fn in_store(store_dir: &Path, project_key: &str, path: &str, blob: ObjectId) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || p.starts_with('.') || *p == "..")
    {
        return false;
    }
    let want = blob.to_string();
    let same_bytes =
        |file: PathBuf| std::fs::read(file).is_ok_and(|bytes| plan::blob_id(&bytes) == want);
    match parts.as_slice() {
        ["chapters", pk, root, name] if *pk == project_key => {
            store_dir.join(root).join("chapters").join(name).is_file()
        }
        [crate::rules::store::RULES_DIR, pk, name] if *pk == project_key => {
            same_bytes(store_dir.join(crate::rules::store::RULES_DIR).join(name))
        }
        [dir @ ("edits" | "forget"), harness, name] => {
            same_bytes(store_dir.join(dir).join(harness).join(name))
        }
        _ => false,
    }
}

/// A page this machine derives and publishes — the topic index (`index/`, its landing page
/// too), `topics/vocabulary.json`, the root `README.md` — which no store holds: the mirror
/// copies it from the published commit.
fn is_derived_page(path: &str) -> bool {
    path.strip_prefix(INDEX_DIR)
        .is_some_and(|rest| rest.starts_with('/'))
        || path == crate::topics::build::VOCABULARY_FILE
        || path == super::readme::ROOT_README
}

/// Mirrors written before [`in_store`] may hold copies of this store's own chapters (a
/// sync killed between its push and its marker, a rebuilt mirror): removed once, so the
/// index counts each document once again. Returns how many went.
fn sweep_own_copies(mirror_dir: &Path, store: &Store, project_key: &str) -> Result<u64, Fail> {
    let marker = git_dir(mirror_dir).join(OWN_SWEPT_FILE);
    if marker.exists() || !git_dir(mirror_dir).is_dir() {
        return Ok(0);
    }
    let mut removed = 0;
    let chapters = mirror_dir.join("chapters").join(project_key);
    if chapters.is_dir() {
        for root in store.roots()? {
            let copies = chapters.join(&root);
            let Ok(entries) = std::fs::read_dir(&copies) else {
                continue;
            };
            for entry in entries {
                let entry = entry.map_err(|e| mirror_io(&copies, e))?;
                let own = store
                    .dir()
                    .join(&root)
                    .join("chapters")
                    .join(entry.file_name());
                if own.is_file() {
                    std::fs::remove_file(entry.path()).map_err(|e| mirror_io(&entry.path(), e))?;
                    removed += 1;
                }
            }
        }
    }
    if removed > 0 {
        forget_search_state(store.dir());
    }
    atomic::write_atomic(&marker, b"1\n").map_err(|e| Fail {
        code: SyncCode::MirrorIo,
        detail: e.to_string(),
    })?;
    Ok(removed)
}

/// The pool's chapters a pull left in the pack, by folder: a folder (`chapters/<pk>/<root>`)
/// and its documents' names joined by `/` (which no name holds), so a whole pool's pull
/// costs about a name per document, not a path and a string each.
#[derive(Default)]
struct LeftPacked {
    folders: Vec<(String, String)>,
}

impl LeftPacked {
    /// Add the pool path `path` (paths come in order, so a folder's are together).
    fn push(&mut self, path: &str) {
        let Some((folder, name)) = path.rsplit_once('/') else {
            return;
        };
        match self.folders.last_mut() {
            Some((last, names)) if last == folder => {
                names.push('/');
                names.push_str(name);
            }
            _ => self.folders.push((folder.to_owned(), name.to_owned())),
        }
    }
}

/// [`materialize`] of a head this sync pulled (nothing of it published by this sync).
fn materialize_pulled(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    mirror_dir: &Path,
    head: Option<ObjectId>,
    report: &mut SyncReport,
) -> Result<Vec<String>, Fail> {
    materialize(
        ctx,
        mirror,
        mirror_dir,
        head,
        &BTreeMap::new(),
        None,
        report,
    )
}

/// Copy-in: make the pool's files at `head` readable under the mirror directory, writing
/// only what changed since the last materialized head. `own`: the files this sync
/// published at `head` — skipped, but for its derived pages (`is_derived_page`), which are
/// written all the same (they are in no store) and not counted as received.
/// Returns the paths written (received).
fn materialize(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    mirror_dir: &Path,
    head: Option<ObjectId>,
    own: &BTreeMap<String, ObjectId>,
    own_over: Option<ObjectId>,
    report: &mut SyncReport,
) -> Result<Vec<String>, Fail> {
    let (store_dir, project_key) = (ctx.store.dir(), ctx.identity.project_key.as_str());
    let mut written = Vec::new();
    let Some(head) = head else {
        return Ok(written);
    };
    let marker = git_dir(mirror_dir).join(MATERIALIZED_FILE);
    let diffing = phase("materialize: diff and copy");
    let previous = std::fs::read_to_string(&marker)
        .ok()
        .and_then(|s| ObjectId::from_hex(s.trim().as_bytes()).ok())
        .filter(|c| mirror.has_object(*c));
    if previous == Some(head) {
        return Ok(written);
    }
    // This machine's publish over the head the mirror holds, its change exactly `own`: what a
    // diff of the two trees would find is all skipped below (in the store already), so the
    // two ~140 KB session folders of a year's pool are not read and compared again.
    let only_own = own_over.is_some() && own_over == previous;
    let old_tree = previous.map(|c| mirror.commit_tree(c)).transpose()?;
    let new_tree = mirror.commit_tree(head)?;
    // The packed mirror: the pool's objects in the mirror's own git directory (a network
    // pool's are there already; a local pool's are fetched, one pack), so its documents are
    // read from there instead of being written out a file each (`pool::mirror`).
    let packed = fetch_into_mirror(mirror, mirror_dir, head)?;
    let recent = crate::store::mirror::Recent::days(ctx.mirror_recent_days, ctx.now_secs);
    // The documents left in the pack, by folder (in path order, as the diff hands them):
    // recorded, and the recent window's candidates. Their artifacts are not kept: nothing
    // reads them from this list, and a year's pool holds one per chapter.
    let mut unwritten = LeftPacked::default();
    // The walk reads through a handle of its own: the pack pages it touches (a page fault
    // maps a run of the pack around it) are unmapped when it goes, instead of staying in
    // this process's memory for the rest of the sync — a year's pool's trees are spread
    // over most of its pack.
    let walker = GitRepo::open(mirror.path())?;
    let reader = crate::store::read::Reader::of_store(store_dir);
    let mut writes = ctx.store.mirror_writes();
    let mut blobs = walker.pack_blobs();
    let mut visit = |path: String, blob: ObjectId| -> Result<(), Fail> {
        // This machine's own files are in its store already: copying them in would double
        // every publish's writes — and a document both in the store and in the mirror is
        // counted twice by this machine's index and once by every other's, so the machines
        // would rebuild the pool's index against each other forever. Not only the files
        // this sync upserted (`own`): after a kill between a push and this marker, or a
        // mirror rebuilt after a rewrite, the whole history comes in again.
        // Its derived pages (the topic index, the vocabulary, the landing pages) are in no
        // store: copied in from the commit as another machine's are, through `Store`.
        let own_page = own.get(&path) == Some(&blob);
        if (own_page && !is_derived_page(&path)) || in_store(store_dir, project_key, &path, blob) {
            return Ok(());
        }
        if packed && crate::store::mirror::is_packed(&path) {
            // Left in the pack; the recent window's chapters are written out below, chosen
            // by the dates the search table reads anyway (not a second read of every one).
            report.received += 1;
            if path.ends_with(".md") {
                unwritten.push(&path);
            }
            return Ok(());
        }
        let bytes = reader.pulled_blob(&walker, &mut blobs, blob)?;
        // The mirror is transport: one filesystem sync at the end instead of one per file.
        writes.write(&path, &bytes).map_err(|e| Fail {
            code: SyncCode::MirrorIo,
            detail: e.to_string(),
        })?;
        if !own_page {
            report.received += 1;
            written.push(path);
        }
        Ok(())
    };
    if only_own {
        // The commit's change is exactly `own`: of it, only the derived pages come in.
        for (path, blob) in own.iter().filter(|(path, _)| is_derived_page(path)) {
            visit(path.clone(), *blob)?;
        }
    } else {
        walker.changed_blobs(old_tree, new_tree, &mut visit)?;
    }
    drop((blobs, walker));
    drop(diffing);
    let finishing = phase("materialize: removed, sync, record");
    // Files the pool no longer holds (a machine's forget, a purge): dropped here too.
    let mut dropped = false;
    if let Some(old_tree) = old_tree.filter(|_| !only_own) {
        for path in mirror.removed_paths(old_tree, new_tree)? {
            if path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == ".." || c == ".git")
            {
                continue;
            }
            let target = mirror_dir.join(&path);
            match std::fs::remove_file(&target) {
                Ok(()) => {
                    report.dropped += 1;
                    // A derived page is no document the catalog or the table holds: its
                    // going (a topic's page, an old index's manifest parts) starts nothing
                    // over.
                    dropped |= !is_derived_page(&path);
                }
                // A document left in the pack leaves the search table all the same.
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound
                        && crate::store::mirror::is_packed(&path) =>
                {
                    report.dropped += 1;
                    dropped = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(mirror_io(&target, e)),
            }
        }
    }
    if dropped {
        forget_search_state(store_dir);
    }
    // Durable, then the received documents recorded with their metadata. The documents
    // left in the pack are recorded too: the search table reads them from the mirror's
    // tree once the marker below names it.
    writes.finish().map_err(|e| Fail {
        code: SyncCode::MirrorIo,
        detail: e.to_string(),
    })?;
    {
        let left: Vec<(&str, Vec<&str>)> = unwritten
            .folders
            .iter()
            .map(|(folder, names)| (folder.as_str(), names.split('/').collect()))
            .collect();
        let changes: Vec<(&str, &[&str])> = left
            .iter()
            .map(|(folder, names)| (*folder, names.as_slice()))
            .collect();
        ctx.store.record_mirror_packed(&changes);
    }
    drop(finishing);
    crash_point("sync-after-materialize");
    atomic::write_atomic(&marker, format!("{head}\n").as_bytes()).map_err(|e| Fail {
        code: SyncCode::MirrorIo,
        detail: e.to_string(),
    })?;
    if let Some(window) = recent.filter(|_| !unwritten.folders.is_empty()) {
        // Of the documents left in the pack only those written out are returned: the
        // callers read what this pull brought from the files (a whole pool's paths are
        // not handed on).
        // Through a handle of its own too, gone with the pages it read.
        let reader = GitRepo::open(mirror.path())?;
        written.extend(write_recent(ctx, &reader, window, new_tree, &unwritten));
    }
    Ok(written)
}

/// `mirrorRecentDays`: of the pool's chapters just left in the pack (`candidates`, by
/// folder), write out as files those the search table dates within `window`, their
/// bytes from `tree`. The table reads every new document once to index it (from the tree the
/// marker now names), so its dates cost no second read of each chapter — a first sync holds
/// the whole pool. Best effort, after the marker: a document not written here is written on
/// demand when a search, `show` or MCP returns it (`store::mirror::write_out`). Returns the
/// pool paths written.
fn write_recent(
    ctx: &SyncContext<'_>,
    repo: &GitRepo,
    window: crate::store::mirror::Recent,
    tree: ObjectId,
    candidates: &LeftPacked,
) -> Vec<String> {
    let mut written = Vec::new();
    let reader = crate::store::read::Reader::of_store(ctx.store.dir());
    let mut outs = ctx.store.mirror_write_outs();
    let result = (|| -> Result<(), String> {
        let (table, _) =
            crate::catalog::table::Table::refresh(ctx.workspace, true, ctx.lock_timeout)
                .map_err(|e| e.to_string())?;
        let mut blobs = repo.pack_blobs();
        for (folder, names) in &candidates.folders {
            let names: BTreeSet<&str> = names.split('/').collect();
            for doc in table
                .docs_in_folder(&format!("{MIRROR_DIR}/{folder}"))
                .map_err(|e| e.to_string())?
            {
                let Some(path) = doc
                    .path
                    .strip_prefix(MIRROR_DIR)
                    .and_then(|p| p.strip_prefix('/'))
                    .filter(|p| {
                        p.rsplit_once('/')
                            .is_some_and(|(f, name)| f == folder && names.contains(name))
                    })
                else {
                    continue;
                };
                if !doc
                    .meta
                    .date
                    .as_deref()
                    .is_some_and(|d| window.holds_date(d))
                {
                    continue;
                }
                let Some(blob) = repo.blob_at(tree, path).map_err(|e| e.to_string())? else {
                    continue;
                };
                let bytes = reader.pulled_blob(repo, &mut blobs, blob);
                let bytes = bytes.map_err(|e| e.to_string())?;
                // The mirror is transport: one filesystem sync at the end instead of one per file.
                outs.write(path, &bytes).map_err(|e| e.to_string())?;
                written.push(path.to_owned());
            }
        }
        outs.finish().map_err(|e| e.to_string())
    })();
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not write the recent window's chapters out of the mirror; they are written when read");
    }
    written
}

/// Make the mirror's own git directory hold `head` and everything it reaches: a network
/// pool's mirror does already (its fetch went there); a local pool's objects are fetched from
/// it (`git fetch`, one pack). Returns whether the mirror holds them, so its documents may stay
/// packed; when the fetch fails they are written out as files, as before, and a note logged.
fn fetch_into_mirror(mirror: &GitRepo, mirror_dir: &Path, head: ObjectId) -> Result<bool, Fail> {
    let own = git_dir(mirror_dir);
    if mirror.path() == own {
        return Ok(true);
    }
    let local = GitRepo::open(&own)?;
    if local.has_object(head) || link_pool_packs(mirror.path(), &own, head) {
        return Ok(true);
    }
    let remote = Remote {
        url: mirror.path().to_string_lossy().into_owned(),
        token: None,
        user: None,
    };
    match transport::fetch(&own, &remote, MIRROR_FETCH_TIMEOUT) {
        Ok(_) if local.has_object(head) => Ok(true),
        Ok(_) => Ok(false),
        Err(e) => {
            tracing::warn!(error = %e, "could not fetch the local pool's objects into the mirror; its documents are written out as files");
            Ok(false)
        }
    }
}

/// A mirror without a pack yet (a first sync) of a local pool on its filesystem: the pool's
/// packs are linked into it ([`crate::pool::pack::share_packs`]) instead of fetched — no copy
/// of the pool, no re-indexing of every object — and trusted only once every object `head`
/// reaches is found in the mirror (a publish whose packing failed leaves its objects loose in
/// the pool: then the fetch brings them, as before). The tracking ref follows.
fn link_pool_packs(pool: &Path, own: &Path, head: ObjectId) -> bool {
    if !pack::pack_files(own).is_ok_and(|packs| packs.is_empty()) {
        return false;
    }
    match pack::share_packs(pool, own).and_then(|_| pack::holds_all_of(own, head)) {
        Ok(true) => {
            let moved = GitRepo::open(own).and_then(|repo| {
                repo.set_ref(transport::TRACKING_REF, head, "dsh-chapters: linked")
            });
            if let Err(e) = moved {
                tracing::warn!(error = %e, "could not move the mirror's tracking ref");
            }
            if let Err(e) = pack::tidy_mirror(own) {
                tracing::warn!(error = %e, "could not roll up the mirror's packs");
            }
            true
        }
        Ok(false) => {
            tracing::info!(
                "the pool's packs do not hold all its head reaches; the mirror fetches it"
            );
            false
        }
        Err(e) => {
            tracing::info!(error = %e, "the pool's packs were not linked into the mirror; it fetches them");
            false
        }
    }
}

/// `vocabApply`: write this machine's plugin facts for the vocabulary's candidates over the
/// pulled pool and this store. A failure is a note: the sync still publishes.
fn apply_vocabulary(
    ctx: &SyncContext<'_>,
    mirror_dir: &Path,
    apply: &crate::topics::build::VocabApply<'_>,
    report: &mut SyncReport,
) -> Option<crate::redact::Redacted<Vec<crate::topics::vocab::Candidate>>> {
    let result = crate::catalog::table::Table::refresh(ctx.workspace, true, ctx.lock_timeout)
        .map_err(crate::topics::build::BuildError::from)
        .and_then(|(table, _)| {
            crate::topics::build::apply_vocabulary(
                ctx.store,
                &table,
                &ctx.identity.project_key,
                true,
                Some(mirror_dir),
                apply,
            )
        });
    match result {
        Ok(written) => {
            if !written.is_empty() {
                report.notes.push(format!(
                    "vocabulary: {} topic-alias fact(s) written by the plugin ({})",
                    written.len(),
                    written
                        .iter()
                        .map(|c| format!("{} → {}", c.from, c.to))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            Some(written)
        }
        Err(e) => {
            report
                .notes
                .push(format!("vocabulary: nothing applied: {e}"));
            None
        }
    }
}

/// The pool's topic index (`index/`), derived: the shards a change touches, rebuilt and
/// committed when they differ from the pool's — never merged. `pulled` are the paths the
/// pull brought in: index files among them were written by someone else and are verified
/// by regeneration. A failure to build it is a note, never a failed sync (the documents
/// still publish; the next sync builds the index).
#[allow(clippy::too_many_arguments)]
fn plan_index(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    mirror_dir: &Path,
    base_tree: Option<ObjectId>,
    pulled: &[String],
    upserts: &mut Upserts,
    edited: &mut Vec<EditedArea>,
    report: &mut SyncReport,
    rebuild: bool,
) -> Result<Option<(crate::topics::build::Update, Vec<String>)>, Fail> {
    use crate::topics::build::{self, Base};
    let index_dir = mirror_dir.join(INDEX_DIR);
    let manifest_path = format!("{INDEX_DIR}/{MANIFEST_FILE}");
    // What the pool holds (not the mirror: a recreated pool holds nothing of it).
    let tree_manifest = match base_tree {
        Some(tree) => mirror.blob_at(tree, &manifest_path)?,
        None => None,
    };
    let old = tree_manifest
        .map(|b| mirror.read_blob(b))
        .transpose()?
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned());
    let mut suspects: std::collections::BTreeSet<String> = pulled
        .iter()
        .filter_map(|p| p.strip_prefix("index/"))
        .filter(|f| *f != super::readme::index_readme_file())
        .filter(|f| {
            !f.contains('/')
                // A page someone else changed: its month is regenerated to verify it.
                || crate::topics::shard::topic_of_page(f).is_some()
        })
        .map(str::to_owned)
        .collect();
    if pulled.iter().any(|p| p == build::VOCABULARY_FILE) {
        suspects.insert(build::VOCABULARY_SUSPECT.to_owned());
    }
    // The pool's `index/` as its tree holds it (file → blob id), listed once, on first use.
    let index_listing: std::cell::OnceCell<BTreeMap<String, ObjectId>> = std::cell::OnceCell::new();
    let tree_index = || -> Result<&BTreeMap<String, ObjectId>, build::BuildError> {
        if let Some(listing) = index_listing.get() {
            return Ok(listing);
        }
        let io = |e: &dyn std::fmt::Display| index_read_error(index_dir.clone(), e);
        let listing = match base_tree {
            Some(tree) => match mirror.tree_at(tree, INDEX_DIR).map_err(|e| io(&e))? {
                Some(index) => mirror
                    .list_tree(index)
                    .map_err(|e| io(&e))?
                    .into_iter()
                    .collect(),
                None => BTreeMap::new(),
            },
            None => BTreeMap::new(),
        };
        Ok(index_listing.get_or_init(|| listing))
    };
    // Whether the search table listed every folder (said with the plan, below).
    let rescanned = std::cell::Cell::new(false);
    let planned = (|| -> Result<build::Update, build::BuildError> {
        use crate::catalog::table::Table;
        let refreshing = phase("search table refresh");
        let (table, refreshed) = if rebuild {
            Table::rescan(ctx.workspace, true, ctx.lock_timeout)?
        } else {
            Table::refresh(ctx.workspace, true, ctx.lock_timeout)?
        };
        rescanned.set(refreshed.rescan.is_some());
        drop(refreshing);
        let curation = phase("read curation");
        let inputs = build::read_curation(ctx.store.dir(), Some(mirror_dir))?;
        drop(curation);
        let _p = phase("index build plan");
        // The pool's index files as its tree holds them (not the mirror: a recreated pool
        // holds nothing of them).
        let read_file = |file: &str| -> Result<Option<String>, build::BuildError> {
            let Some(tree) = base_tree else {
                return Ok(None);
            };
            let io = |e: &dyn std::fmt::Display| {
                index_read_error(mirror_dir.join(INDEX_DIR).join(file), e)
            };
            match mirror.blob_at(tree, &format!("{INDEX_DIR}/{file}")) {
                Ok(Some(blob)) => mirror
                    .read_blob(blob)
                    .map(|bytes| Some(String::from_utf8_lossy(&bytes).into_owned()))
                    .map_err(|e| io(&e)),
                Ok(None) => Ok(None),
                Err(e) => Err(io(&e)),
            }
        };
        let holds = |file: &str| Ok(tree_index()?.contains_key(file));
        let pages = |dir: &str| pool_pages_of(mirror, base_tree, dir);
        let since = {
            let _p = phase("index tree diff");
            tree_changes(ctx, mirror, base_tree, upserts, old.as_deref(), edited)?
        };
        let previous = build::Previous {
            manifest: old.clone(),
            read_file: &read_file,
            holds: &holds,
            pages: &pages,
            since,
        };
        // A shard file the pool holds with the same bytes is not held until the update is
        // done (a first sync regenerates every page to verify it): only what differs is.
        build::plan(
            &table,
            &Base::Pool {
                project_key: ctx.identity.project_key.clone(),
            },
            &inputs.curation,
            inputs.files,
            &previous,
            &suspects,
            rebuild,
            &mut |file, text| {
                let have = tree_index()?.get(file).map(ToString::to_string);
                let same = have.as_deref() == Some(plan::blob_id(text.as_bytes()).as_str());
                Ok((!same).then_some(text))
            },
        )
    })();
    let update = match planned {
        Ok(u) => u,
        Err(e) => {
            report
                .notes
                .push(format!("the topic index was not updated: {e}"));
            return Ok(None);
        }
    };
    tracing::debug!(
        full = update.full,
        touched = update.touched,
        from_head = update.from_head,
        rescan = rescanned.get(),
        "topic index planned"
    );
    let mut removals: Vec<String> = update
        .removes
        .iter()
        .map(|f| format!("{INDEX_DIR}/{f}"))
        .collect();
    let listing = match tree_index() {
        Ok(listing) => listing,
        Err(e) => {
            report
                .notes
                .push(format!("the topic index was not updated: {e}"));
            return Ok(None);
        }
    };
    if update.full {
        // A full rebuild also drops files the index does not name (hand-added ones).
        removals.extend(
            listing
                .keys()
                .filter(|name| !update.writes.contains_key(*name) && !update.handed.contains(*name))
                .filter(|name| name.as_str() != super::readme::index_readme_file())
                .map(|name| format!("{INDEX_DIR}/{name}")),
        );
    }
    removals.sort();
    removals.dedup();
    for (file, text) in &update.writes {
        let want = plan::blob_id(text.as_bytes());
        // What the pool holds there, from its tree.
        let have = if file == MANIFEST_FILE {
            tree_manifest.map(|b| b.to_string())
        } else {
            listing.get(file).map(ToString::to_string)
        };
        if have.as_deref() == Some(want.as_str()) {
            continue;
        }
        upserts.push((
            format!("{INDEX_DIR}/{file}"),
            mirror.write_blob(text.as_bytes())?,
        ));
        *report.published.entry("index".to_owned()).or_insert(0) += 1;
    }
    if let Some(vocabulary) = &update.vocabulary {
        let vocabulary = vocabulary.as_bytes();
        let have = match base_tree {
            Some(tree) => mirror.blob_at(tree, build::VOCABULARY_FILE)?,
            None => None,
        };
        if have.map(|b| b.to_string()) != Some(plan::blob_id(vocabulary)) {
            upserts.push((
                build::VOCABULARY_FILE.to_owned(),
                mirror.write_blob(vocabulary)?,
            ));
            *report.published.entry("index".to_owned()).or_insert(0) += 1;
        }
    }
    Ok(Some((update, removals)))
}

/// What changed for the pool's index since the input trees its manifest (`old`) records:
/// the input areas' trees as this commit leaves them (the pool's at `base_tree` with the
/// documents `upserts` brings), diffed with the recorded ones — only subtrees whose ids
/// differ are read — and the topics of each changed or removed document's recorded version
/// from its old blob's frontmatter. A manifest of another version, or a recorded tree this
/// mirror lacks: no changes (a full rebuild).
fn tree_changes(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    base_tree: Option<ObjectId>,
    upserts: &Upserts,
    old: Option<&str>,
    edited: &mut Vec<EditedArea>,
) -> Result<crate::topics::build::Since, crate::topics::build::BuildError> {
    use crate::topics::build::{Since, TreeChange, POOL_INPUT_AREAS};
    let io = |e: &dyn std::fmt::Display| {
        index_read_error(PathBuf::from(INDEX_DIR).join(MANIFEST_FILE), e)
    };
    // Each area's tree now: its part of the upserts applied to its tree in the pool (the
    // same trees the commit's own edit writes).
    let mut now: BTreeMap<String, ObjectId> = BTreeMap::new();
    for area in POOL_INPUT_AREAS {
        let mine = upserts_under(upserts, area);
        let tree = match base_tree {
            Some(tree) => mirror.tree_at(tree, area).map_err(|e| io(&e))?,
            None => None,
        };
        let tree = if mine.is_empty() {
            tree
        } else {
            let tree = mirror.tree_with(tree, &mine).map_err(|e| io(&e))?;
            edited.push(EditedArea {
                area: area.to_owned(),
                upserts: mine,
                tree,
            });
            Some(tree)
        };
        if let Some(tree) = tree {
            now.insert(area.to_owned(), tree);
        }
    }
    let inputs: BTreeMap<String, String> = now
        .iter()
        .map(|(a, t)| (a.clone(), t.to_string()))
        .collect();
    let recorded = old
        .and_then(crate::topics::shard::Manifest::parse)
        .map(|m| m.inputs)
        .and_then(|inputs| {
            inputs
                .into_iter()
                .map(|(area, id)| Some((area, ObjectId::from_hex(id.as_bytes()).ok()?)))
                .collect::<Option<BTreeMap<String, ObjectId>>>()
        })
        .filter(|trees| trees.values().all(|t| mirror.has_object(*t)));
    let Some(recorded) = recorded else {
        return Ok(Since::Tree {
            inputs,
            changes: None,
        });
    };
    let reader = crate::store::read::Reader::of_store(ctx.store.dir());
    let mut blobs = mirror.pack_blobs();
    let mut changes = Vec::new();
    for area in POOL_INPUT_AREAS {
        let mut changed: Vec<(String, Option<ObjectId>)> = Vec::new();
        mirror
            .diff_blobs(
                recorded.get(area).copied(),
                now.get(area).copied(),
                &mut |path, was, _| {
                    if path.ends_with(".md") {
                        changed.push((format!("{area}/{path}"), was));
                    }
                },
            )
            .map_err(|e| io(&e))?;
        for (path, was) in changed {
            // The topics its recorded version had: what a removal or a re-annotation
            // takes from a shard. (A blob that is no document has none.)
            let old_topics = match was {
                Some(blob) => reader
                    .pulled_blob(mirror, &mut blobs, blob)
                    .map_err(|e| io(&e))?
                    .derive(|bytes| {
                        crate::catalog::table::parse_head(bytes)
                            .map(|meta| meta.topics)
                            .unwrap_or_default()
                    })
                    .get()
                    .clone(),
                None => Vec::new(),
            };
            changes.push(TreeChange { path, old_topics });
        }
    }
    Ok(Since::Tree {
        inputs,
        changes: Some(changes),
    })
}

/// The upserts under `area`, relative to it, in their order.
fn upserts_under(upserts: &Upserts, area: &str) -> Upserts {
    let prefix = format!("{area}/");
    upserts
        .iter()
        .filter_map(|(path, blob)| Some((path.strip_prefix(&prefix)?.to_owned(), *blob)))
        .collect()
}

/// A failure reading the pool's objects for the index build, said as the index file (or
/// folder) it was reading for.
fn index_read_error(path: PathBuf, e: &dyn std::fmt::Display) -> crate::topics::build::BuildError {
    crate::topics::build::BuildError::Io {
        path,
        source: std::io::Error::other(e.to_string()),
    }
}

/// An input area's tree with the publish's upserts under it applied, made by
/// [`tree_changes`] for the manifest: `upserts` relative to `area`, in their order.
struct EditedArea {
    area: String,
    upserts: Upserts,
    tree: ObjectId,
}

/// The commit's tree: `base_tree` with `upserts` and `removals` applied; an area whose
/// upserts are still exactly those [`tree_changes`] applied (and nothing under it removed) is
/// set to the tree made there instead of being edited again — at 100,000 chapters reading,
/// editing and hashing the ~140 KB `chapters/<pk>/` tree is ~1.2 ms of a +10.
fn commit_tree(
    mirror: &GitRepo,
    base_tree: Option<ObjectId>,
    upserts: &Upserts,
    removals: &[String],
    edited: &[EditedArea],
) -> Result<ObjectId, GitError> {
    let mut trees = Vec::new();
    let mut rest = upserts.clone();
    for area in edited {
        let prefix = format!("{}/", area.area);
        let now = upserts_under(upserts, &area.area);
        if now == area.upserts && !removals.iter().any(|path| path.starts_with(&prefix)) {
            trees.push((area.area.clone(), area.tree));
            rest.retain(|(path, _)| !path.starts_with(&prefix));
        }
    }
    mirror.tree_edit_over(base_tree, &trees, &rest, removals)
}

/// The pages of one topic in the pool's tree (`index/<dir>/`), relative to `index/`: one
/// tree read, so a topic's update costs its pages, not the whole index.
fn pool_pages_of(
    mirror: &GitRepo,
    base_tree: Option<ObjectId>,
    dir: &str,
) -> Result<Vec<String>, crate::topics::build::BuildError> {
    let Some(tree) = base_tree else {
        return Ok(Vec::new());
    };
    let io = |e: &dyn std::fmt::Display| index_read_error(PathBuf::from(INDEX_DIR).join(dir), e);
    let Some(pages) = mirror
        .tree_at(tree, &format!("{INDEX_DIR}/{dir}"))
        .map_err(|e| io(&e))?
    else {
        return Ok(Vec::new());
    };
    Ok(mirror
        .list_tree(pages)
        .map_err(|e| io(&e))?
        .into_iter()
        .map(|(name, _)| format!("{dir}/{name}"))
        .filter(|f| crate::topics::shard::topic_of_page(f).is_some())
        .collect())
}

/// The pool's landing pages (`pool::readme`) over the tree this commit leaves: upserted
/// when they differ from the pool's (the mirror copies them from the commit). Kept up
/// from the pool's page and the change — the index update's shards, the documents this
/// commit publishes and the pull brought in — so their cost follows the change; built from
/// the whole search table only when the pool has no page of ours yet or the index was
/// rebuilt whole. A failure is a note: the documents still publish.
#[allow(clippy::too_many_arguments)]
fn plan_pages(
    ctx: &SyncContext<'_>,
    mirror: &GitRepo,
    mirror_dir: &Path,
    base_tree: Option<ObjectId>,
    update: &crate::topics::build::Update,
    pulled: &[String],
    removals: &[String],
    upserts: &mut Upserts,
    report: &mut SyncReport,
) -> Result<(), Fail> {
    use super::readme::{self, Pages};
    let _p = phase("plan pages");
    let previous = match base_tree {
        Some(tree) => mirror
            .blob_at(tree, readme::ROOT_README)?
            .map(|b| mirror.read_blob(b))
            .transpose()?
            .and_then(|bytes| Pages::parse(&String::from_utf8_lossy(&bytes))),
        None => None,
    };
    let machines = previous
        .as_ref()
        .map(|p| p.machines.clone())
        .unwrap_or_default();
    let mut pages = match previous.filter(|_| !update.full) {
        Some(mut pages) => {
            pages.apply_shards(&update.shard_heads(), &update.removes);
            pages.documents = update.documents;
            let chapters = |p: &&String| p.starts_with("chapters/") && p.ends_with(".md");
            let mut fresh = Vec::new();
            for (path, blob) in upserts.iter().filter(|(p, _)| chapters(&p)) {
                fresh.push((path.clone(), mirror.read_blob(*blob)?));
            }
            for path in pulled.iter().filter(chapters) {
                if let Ok(bytes) = std::fs::read(mirror_dir.join(path)) {
                    fresh.push((path.clone(), bytes));
                }
            }
            pages.add_newest(fresh.into_iter().filter_map(|(path, bytes)| {
                let meta =
                    crate::catalog::score::parse_meta(&String::from_utf8_lossy(&bytes)).ok()?;
                Some(crate::topics::IndexDoc {
                    path,
                    title: meta.title,
                    kind: meta.kind,
                    date: meta.date,
                    topics: meta.topics,
                })
            }));
            pages.retain_newest(|p| {
                upserts.iter().any(|(u, _)| u == p)
                    || (!removals.iter().any(|r| r == p)
                        && base_tree.is_some_and(|t| mirror.blob_at(t, p).ok().flatten().is_some()))
            });
            pages
        }
        None => {
            let inputs = (|| -> Result<_, crate::topics::build::BuildError> {
                let (table, _) =
                    crate::catalog::table::Table::refresh(ctx.workspace, true, ctx.lock_timeout)?;
                // Read back from the pool's own (redacted) documents, as the index is.
                let docs: Vec<_> =
                    crate::topics::build::pool_docs(&table, &ctx.identity.project_key)?
                        .into_iter()
                        .map(crate::redact::Redacted::into_inner)
                        .collect();
                let curation =
                    crate::topics::build::read_curation(ctx.store.dir(), Some(mirror_dir))?;
                Ok(Pages::full(&docs, &curation.curation))
            })();
            match inputs {
                Ok(pages) => pages,
                Err(e) => {
                    report
                        .notes
                        .push(format!("the pool's front page was not rebuilt: {e}"));
                    return Ok(());
                }
            }
        }
    };
    pages.machines = machines;
    pages
        .machines
        .insert(ctx.harness_id.to_owned(), ctx.now.to_owned());
    let slug = ctx.identity.slug();
    for (path, text) in [
        (
            readme::ROOT_README,
            pages.render_root(&ctx.identity.project_key, &slug),
        ),
        (readme::INDEX_README, pages.render_index(&slug)),
    ] {
        let have = match base_tree {
            Some(tree) => mirror.blob_at(tree, path)?.map(|b| b.to_string()),
            None => None,
        };
        if have.as_deref() != Some(plan::blob_id(text.as_bytes()).as_str()) {
            upserts.push((path.to_owned(), mirror.write_blob(text.as_bytes())?));
            *report
                .published
                .entry(kind_name(FileKind::Derived).to_owned())
                .or_insert(0) += 1;
        }
    }
    Ok(())
}

/// Store files the pool lacks as of the last sync (for `status`), by kind: of the files a
/// sync would list now, those whose bytes the pool's tree at the mirror's materialized head
/// does not hold. Reads the store's catalog since the sync's cursor and writes nothing;
/// every root's ledgers are listed (the signed-roots hint is the sync's to read). When the
/// catalog cannot say (every file listed), a write-once file the tree holds at its path is
/// not read: it is published, or refused (it never waits either) — a re-annotation of it
/// then shows from the next sync on. `None` when the store cannot be listed.
pub fn pending(
    store: &Store,
    workspace: &Path,
    identity: &Identity,
    visibility: Visibility,
) -> Option<BTreeMap<String, u64>> {
    let mirror_dir = workspace.join(MIRROR_DIR);
    let saved = Listing::read(&mirror_dir);
    let pool = crate::store::mirror::materialized_head(&mirror_dir).and_then(|head| {
        let repo = GitRepo::open(&git_dir(&mirror_dir)).ok()?;
        let tree = repo.commit_tree(head).ok()?;
        Some((repo, tree))
    });
    // The cursors are trusted as the sync trusts them: while the materialized head is
    // the one the state describes (else every file is compared).
    let trusted = pool.as_ref().is_some()
        && saved.head.is_some()
        && saved.head
            == crate::store::mirror::materialized_head(&mirror_dir).map(|h| h.to_string());
    let listed = store_files(
        store,
        &identity.project_key,
        trusted.then_some(&saved),
        Hint::ListAll,
    )
    .ok()?;
    let mut out = BTreeMap::new();
    for (_, pool_path, kind, file) in listed.files {
        if visibility == Visibility::Public && kind.from_conversation() {
            continue;
        }
        let in_pool = pool
            .as_ref()
            .and_then(|(repo, tree)| repo.blob_at(*tree, &pool_path).ok().flatten());
        let waits = match in_pool {
            None => true,
            Some(_) if listed.whole && !kind.is_ledger() => false,
            Some(blob) => std::fs::read(&file)
                .map(|bytes| plan::blob_id(&bytes) != blob)
                .unwrap_or(false),
        };
        if waits {
            *out.entry(kind_name(kind).to_owned()).or_insert(0) += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {

    /// The pages the mirror copies from this machine's own commit: the index (its landing
    /// page too), the vocabulary and the root landing page — nothing a store holds.
    #[test]
    fn derived_pages_are_the_index_the_vocabulary_and_the_landing_page() {
        for p in [
            "index/manifest.json",
            "index/manifest/ab.json",
            "index/auth.md",
            "index/auth/2026-01.md",
            "index/README.md",
            "topics/vocabulary.json",
            "README.md",
        ] {
            assert!(super::is_derived_page(p), "{p}");
        }
        for p in [
            "chapters/pk/root/001-a.md",
            "rules/pk/r-1.md",
            "edits/h/curation.jsonl",
            "project.yml",
            ".gitattributes",
            "indexes/x.md",
            "index",
            "topics/other.json",
            "docs/README.md",
        ] {
            assert!(!super::is_derived_page(p), "{p}");
        }
    }

    use super::*;

    /// The state a sync saves after `listed` was published at some head.
    fn saved_after(listed: &Listed) -> Listing {
        Listing {
            v: LISTING_VERSION,
            head: Some("0".repeat(40)),
            catalog: listed.catalog_end.clone(),
            signed: listed.signed_end.clone(),
            again: BTreeSet::new(),
        }
    }

    /// The listing state names its version; one of another version, of none or torn is no
    /// state (everything is compared), and what is written reads back as it was.
    #[test]
    fn a_listing_state_of_another_version_or_none_is_not_trusted() {
        let tmp = tempfile::tempdir().expect("tmp");
        let mirror = tmp.path();
        std::fs::create_dir_all(git_dir(mirror)).expect("mkdir");
        let state = Listing {
            v: LISTING_VERSION,
            head: None,
            catalog: Some(crate::store::catalog::Cursor {
                generation: "g".into(),
                revision: 7,
            }),
            signed: None,
            again: ["s1".to_owned()].into(),
        };
        let head = ObjectId::from_hex("ab".repeat(20).as_bytes()).expect("hex");
        Listing {
            v: 0,
            ..Listing::default()
        }
        .save_at(mirror, None);
        let path = git_dir(mirror).join(LISTING_FILE);
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).expect("state")).expect("json");
        doc["v"] = LISTING_VERSION.into();
        doc["head"] = head.to_string().into();
        doc["catalog"] = serde_json::to_value(&state.catalog).expect("json");
        doc["again"] = serde_json::json!(["s1"]);
        std::fs::write(&path, doc.to_string()).expect("write");
        let read = Listing::read(mirror);
        assert_eq!(read.head.as_deref(), Some(head.to_string().as_str()));
        assert_eq!(
            (read.catalog, read.again),
            (state.catalog.clone(), state.again)
        );
        let text = doc.to_string();
        let mut later = doc.clone();
        later["v"] = (LISTING_VERSION + 1).into();
        let mut none = doc;
        none.as_object_mut().expect("object").remove("v");
        for (what, written) in [
            ("a later version", later.to_string()),
            ("no version", none.to_string()),
            ("torn", text[..text.len() / 2].to_owned()),
        ] {
            std::fs::write(&path, written).expect("write");
            assert_eq!(Listing::read(mirror), Listing::default(), "{what}");
        }
    }

    /// After a saved listing, a root the store's catalog names nothing of is not looked at
    /// again (a file put there behind the catalog's back is not listed), one it names is;
    /// without a saved state, or when the catalog cannot say (started over, removed), every
    /// file of every root is.
    #[test]
    fn roots_the_catalog_names_nothing_of_are_not_listed_again() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let store = Store::init(ws).expect("store");
        let put = |root: &str, name: &str| {
            let dir = store.dir().join(root).join("chapters");
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join(name), "---\ntitle: t\n---\nbody\n").expect("write");
        };
        let list = |saved: Option<&Listing>| -> Listed {
            store_files(&store, "pk", saved, Hint::Read { now_secs: 1_000 })
                .unwrap_or_else(|f| panic!("list: {}", f.detail))
        };
        let chapters = |listed: &Listed| -> Vec<String> {
            listed
                .files
                .iter()
                .filter(|(_, _, kind, _)| *kind == FileKind::Chapter)
                .map(|(_, path, _, _)| path.clone())
                .collect()
        };
        for root in ["s1", "s2"] {
            put(root, "001-a.md");
            crate::testkit::catalog::record(
                store.dir(),
                &[(&format!(".dsh-chapters/{root}/chapters"), &["001-a.md"])],
            );
        }
        let first = list(None);
        assert!(first.whole);
        assert_eq!(chapters(&first).len(), 2, "a first listing");
        let saved = saved_after(&first);
        // s1 gains a chapter through the catalog; s2 one behind its back (a hand copy).
        put("s1", "002-b.md");
        crate::testkit::catalog::record(
            store.dir(),
            &[(".dsh-chapters/s1/chapters", &["002-b.md"])],
        );
        put("s2", "002-b.md");
        let listed = list(Some(&saved));
        assert!(!listed.whole);
        assert_eq!(chapters(&listed), ["chapters/pk/s1/002-b.md"]);
        // Nothing since the next cursor: no chapter listed.
        assert!(chapters(&list(Some(&saved_after(&listed)))).is_empty());
        // A root marked to be listed again (a torn file was held back there): whole,
        // whatever the catalog says.
        let mut marked = saved_after(&listed);
        marked.again.insert("s2".into());
        assert_eq!(
            chapters(&list(Some(&marked))),
            ["chapters/pk/s2/001-a.md", "chapters/pk/s2/002-b.md"]
        );
        // No saved state (none, another version, a head the pool lost): every file.
        let all = [
            "chapters/pk/s1/001-a.md",
            "chapters/pk/s1/002-b.md",
            "chapters/pk/s2/001-a.md",
            "chapters/pk/s2/002-b.md",
        ];
        assert_eq!(chapters(&list(None)), all);
        // A catalog started over (another generation) or removed: every file.
        crate::store::catalog::start_over(store.dir()).expect("start over");
        let listed = list(Some(&saved));
        assert!(listed.whole);
        assert_eq!(chapters(&listed), all);
        for file in [
            ".catalog.sqlite3",
            ".catalog.sqlite3-wal",
            ".catalog.sqlite3-shm",
        ] {
            let _ = std::fs::remove_file(store.dir().join(file));
        }
        assert_eq!(chapters(&list(Some(&saved))), all);
    }

    /// After a saved listing, a root neither the store's catalog nor the signed-roots hint
    /// names is not looked at at all — its ledgers are not listed (one appended behind the
    /// hint's back is not seen) —, a root the hint names has its ledgers listed; a cursor
    /// kept in another boot (a power cut may have lost hint lines), none, or an old full
    /// listing lists every root's.
    #[test]
    fn roots_the_signed_hint_names_nothing_of_have_their_ledgers_left_unlisted() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let store = Store::init(ws).expect("store");
        let redactor = crate::redact::built_in().expect("rules");
        let sign = |root: &str, turn: u64| {
            let line = redactor.redact_json(
                &serde_json::json!({"v": 1, "turn": turn}),
                &mut Default::default(),
            );
            store
                .append_collection_many(root, root, &[line])
                .expect("append");
        };
        let behind_the_hints_back = |root: &str| {
            let ledger = store.collection_path(root, root).expect("path");
            let mut text = std::fs::read_to_string(&ledger).expect("ledger");
            text.push_str("{\"v\":1,\"turn\":99}\n");
            std::fs::write(&ledger, text).expect("write");
        };
        for root in ["s1", "s2"] {
            sign(root, 1);
        }
        // A catalog that can say (a store's first chapter starts one).
        crate::testkit::catalog::record(
            store.dir(),
            &[(".dsh-chapters/s0/chapters", &["001-a.md"])],
        );
        let list = |saved: Option<&Listing>, now: u64| -> Listed {
            store_files(&store, "pk", saved, Hint::Read { now_secs: now })
                .unwrap_or_else(|f| panic!("list: {}", f.detail))
        };
        let ledgers = |listed: &Listed| -> Vec<String> {
            listed
                .files
                .iter()
                .filter(|(_, _, kind, _)| *kind == FileKind::Collection)
                .map(|(_, path, _, _)| path.clone())
                .collect()
        };
        let (s1, s2) = ("collections/pk/s1.jsonl", "collections/pk/s2.jsonl");
        let first = list(None, 1_000);
        assert_eq!(ledgers(&first), [s1, s2], "a first listing");
        // Nothing signed since: no ledger listed.
        let again = list(Some(&saved_after(&first)), 1_001);
        assert!(ledgers(&again).is_empty());
        // s1 signed into through the store (named), s2 behind the hint's back.
        sign("s1", 2);
        behind_the_hints_back("s2");
        let saved = saved_after(&again);
        let after = list(Some(&saved), 1_002);
        assert_eq!(ledgers(&after), [s1]);
        let saved = saved_after(&after);
        assert!(ledgers(&list(Some(&saved), 1_002)).is_empty());
        // A cursor kept in another boot: every root's ledgers are listed again.
        let mut other_boot = saved_after(&after);
        if let Some(c) = other_boot.signed.as_mut() {
            c.boot = "another-boot".into();
        }
        let after_boot = list(Some(&other_boot), 1_003);
        assert_eq!(ledgers(&after_boot), [s1, s2]);
        let saved = saved_after(&after_boot);
        assert!(ledgers(&list(Some(&saved), 1_004)).is_empty());
        // An old full listing, or no cursor: every root's again.
        let listed_all_at = 1_003 + signed::LIST_ALL_EVERY_SECS;
        assert_eq!(ledgers(&list(Some(&saved), listed_all_at)), [s1, s2]);
        let mut no_cursor = saved_after(&after_boot);
        no_cursor.signed = None;
        assert_eq!(ledgers(&list(Some(&no_cursor), 1_005)), [s1, s2]);
    }

    #[test]
    fn retry_waits_grow_are_bounded_and_differ_between_machines() {
        let mut total = Duration::ZERO;
        for attempt in 1..MAX_ATTEMPTS {
            let w = retry_wait("machine-a", attempt, None);
            let window = (RETRY_FIRST_WINDOW_MS << (attempt - 1)).min(RETRY_MAX_WINDOW_MS);
            let ms = w.as_millis() as u64;
            assert!(
                ms >= window / 2 && ms <= window,
                "attempt {attempt}: {ms} ms"
            );
            total += w;
            // Deterministic: the same seed, the same wait.
            assert_eq!(w, retry_wait("machine-a", attempt, None));
        }
        assert!(total <= Duration::from_millis(7_600), "{total:?}");
        // Machines that collided draw different waits (not in lock-step).
        let waits: BTreeSet<Duration> = (0..8)
            .map(|m| retry_wait(&format!("machine-{m}"), 4, None))
            .collect();
        assert!(waits.len() >= 6, "{waits:?}");
    }

    #[test]
    fn lines_taken_out_counts_repeats_and_ignores_what_was_added() {
        let before = b"a\nb\na\nc\n";
        assert_eq!(
            lines_taken_out(before, b"a\nc\n"),
            vec![&b"b\n"[..], b"a\n"]
        );
        assert_eq!(
            lines_taken_out(before, b""),
            before.split_inclusive(|b| *b == b'\n').collect::<Vec<_>>()
        );
        assert!(lines_taken_out(before, b"a\nb\na\nc\nd\n").is_empty());
        assert!(lines_taken_out(b"", b"x\n").is_empty());
    }

    /// The commit's tree sets an area to the tree the index plan made only while that area's
    /// upserts are still the ones applied there; else (an upsert added since, a removal under
    /// it) the area is edited again: the tree is always the whole edit's.
    #[test]
    fn commit_tree_reuses_an_edited_area_only_while_its_upserts_are_unchanged() {
        use super::{commit_tree, EditedArea};
        let dir = tempfile::tempdir().unwrap();
        let repo = crate::git::GitRepo::init_bare(&dir.path().join("pool")).unwrap();
        let blob = |text: &str| repo.write_blob(text.as_bytes()).unwrap();
        let base = repo
            .tree_with(
                None,
                &[
                    ("chapters/pk/s1/001.md".to_owned(), blob("one")),
                    ("rules/pk/r.md".to_owned(), blob("rule")),
                    ("index/a.md".to_owned(), blob("a")),
                ],
            )
            .unwrap();
        let mut upserts = vec![
            ("chapters/pk/s1/002.md".to_owned(), blob("two")),
            ("index/a.md".to_owned(), blob("a2")),
        ];
        let area = |upserts: &super::Upserts| {
            let mine: super::Upserts = upserts
                .iter()
                .filter_map(|(p, b)| Some((p.strip_prefix("chapters/")?.to_owned(), *b)))
                .collect();
            let old = repo.tree_at(base, "chapters").unwrap();
            EditedArea {
                area: "chapters".to_owned(),
                tree: repo.tree_with(old, &mine).unwrap(),
                upserts: mine,
            }
        };
        let whole = |upserts: &super::Upserts, removals: &[String]| {
            repo.tree_edit(Some(base), upserts, removals).unwrap()
        };
        // Unchanged: the area's tree is reused, the whole edit's tree comes out.
        let edited = [area(&upserts)];
        assert_eq!(
            commit_tree(&repo, Some(base), &upserts, &[], &edited).unwrap(),
            whole(&upserts, &[])
        );
        // An upsert under the area after its edit: edited again (the new chapter is in).
        upserts.push(("chapters/pk/s2/001.md".to_owned(), blob("three")));
        let tree = commit_tree(&repo, Some(base), &upserts, &[], &edited).unwrap();
        assert_eq!(tree, whole(&upserts, &[]));
        assert!(repo
            .blob_at(tree, "chapters/pk/s2/001.md")
            .unwrap()
            .is_some());
        // A removal under the area: edited again too.
        let edited = [area(&upserts)];
        let removals = ["chapters/pk/s1/001.md".to_owned()];
        let tree = commit_tree(&repo, Some(base), &upserts, &removals, &edited).unwrap();
        assert_eq!(tree, whole(&upserts, &removals));
        assert!(repo
            .blob_at(tree, "chapters/pk/s1/001.md")
            .unwrap()
            .is_none());
    }
}

//! The status cache, `<store>/.status-cache.json`: what `chapters status` last read from each
//! session log (its header's ids, its turn ends, the turn in flight) and from each store
//! folder (chapter and plan counts with each session's highest archived seq, a collection's
//! line count, an artifact folder's count), the document counts (keyed by the catalog's and
//! the search table's files) and the vocabulary's candidates, each keyed by the file's or folder's stamp (length,
//! mtime, inode, device). A later `status` reads again only what changed since: a log that
//! grew (its length), a chapter folder a document was added to or removed from (its mtime).
//!
//! A stamp is trusted only when its mtime and ctime are more than [`SETTLE_NS`] older than the
//! moment it was read: a write in the same clock tick as the read would leave the stamp unchanged (git's
//! "racily clean" index entries), so a file or folder that moved lately is read every time
//! until it settles. A chapter's frontmatter edited by hand in place (its folder unchanged) is
//! not seen until the folder changes; the store's writers never do that (re-annotation
//! publishes by link + rename, which moves the folder's mtime).
//!
//! A cache: rebuildable, so written without fsync; one that does not parse, or of another
//! version, is ignored; a failed write is ignored (the next status reads everything again).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::store::{self, Store, StoreCounts, StoreError};

pub const CACHE_FILE: &str = ".status-cache.json";
const VERSION: u32 = 2;
/// How long after its last change a stamp is trusted (covers coarse filesystem clocks).
const SETTLE_NS: i128 = 2_000_000_000;

/// A file's or folder's identity and change marks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    len: u64,
    mtime_ns: i128,
    /// The inode's change time: moved by every write, rename and `touch`, and never set
    /// back by a tool (a folder restored with old mtimes still differs here).
    ctime_ns: i128,
    ino: u64,
    dev: u64,
}

impl Stamp {
    /// The stamp of `path`, or `None` when it cannot be statted (then nothing is cached).
    pub fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            ctime_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
        })
    }

    /// Whether the stamp is old enough to be trusted the next time (see the module's doc).
    fn settled(&self, now_ns: i128) -> bool {
        self.mtime_ns.max(self.ctime_ns) + SETTLE_NS < now_ns
    }
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// The fields of a log's header that status needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderIds {
    pub id: String,
    pub parent_session: Option<String>,
    pub is_seeded: bool,
    pub seed_length: Option<u64>,
}

impl HeaderIds {
    pub fn of(h: &crate::session::Header) -> HeaderIds {
        HeaderIds {
            id: h.id.clone(),
            parent_session: h.parent_session.clone(),
            is_seeded: h.is_seeded,
            seed_length: h.seed_length,
        }
    }
}

/// What one whole read of a session log found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogRead {
    /// The header as the archive reads it (`None`: no header, or it could not be read).
    pub header: Option<HeaderIds>,
    /// The session id of the header the reader met, when it met one.
    pub read_id: Option<String>,
    /// The end seq of every completed turn, in order.
    pub ends: Vec<u64>,
    /// The turn number of each of [`LogRead::ends`] (`CompletedTurn::turn`): a DSH log's
    /// turns keep their numbers when a format migration renumbers its seqs. Saved as runs
    /// of consecutive numbers (one run for most logs).
    #[serde(with = "turn_runs")]
    pub turns: Vec<u64>,
    pub in_flight: Option<(u64, u64)>,
    pub error: Option<String>,
    /// Where a later read of the grown log may resume (DSH logs only).
    #[serde(default)]
    pub anchor: Option<Anchor>,
}

/// [`LogRead::turns`] saved as `[[first, count], …]`: runs of consecutive turn numbers.
mod turn_runs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// The most turns a saved run may expand to: a cache is ours, but read as untrusted.
    const MAX_TURNS: u64 = 1 << 24;

    pub fn serialize<S: Serializer>(turns: &[u64], s: S) -> Result<S::Ok, S::Error> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &turn in turns {
            match runs.last_mut() {
                Some((first, count)) if first.checked_add(*count) == Some(turn) => *count += 1,
                _ => runs.push((turn, 1)),
            }
        }
        runs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        let runs = Vec::<(u64, u64)>::deserialize(d)?;
        let total = runs
            .iter()
            .try_fold(0u64, |sum, &(_, count)| sum.checked_add(count))
            .filter(|&total| total <= MAX_TURNS)
            .ok_or_else(|| serde::de::Error::custom("too many turns"))?;
        let mut turns = Vec::with_capacity(total as usize);
        for (first, count) in runs {
            turns.extend((0..count).map(|i| first.saturating_add(i)));
        }
        Ok(turns)
    }
}

/// A turn boundary in a log: the reader's resume point at the frame holding the first event
/// not yet part of a completed turn, and the bytes just before it (hex) to check that what
/// was read is still there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Anchor {
    pub byte_offset: u64,
    pub next_seq: u64,
    pub first_seq: u64,
    pub header_seen: bool,
    pub tail: String,
}

/// How many bytes before an anchor are compared.
const TAIL_BYTES: u64 = 64;

/// The hex of the bytes of `path` just before `offset`.
fn tail_of(path: &Path, offset: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let start = offset.saturating_sub(TAIL_BYTES);
    let mut f = std::fs::File::open(path).ok()?;
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = vec![0; (offset - start) as usize];
    f.read_exact(&mut buf).ok()?;
    Some(crate::names::hex(&buf))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct LogEntry {
    stamp: Stamp,
    read: LogRead,
}

/// One root's chapter folder as last listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChaptersEntry {
    stamp: Stamp,
    chapters: u64,
    plans: u64,
    /// Each session's last chapter; `None` when the folder holds damage (status then counts
    /// every turn as unarchived, as before the cache).
    archived_hi: Option<BTreeMap<String, LastChapter>>,
}

/// A session's last chapter (the highest-numbered) as the archive reads it: the seq its last
/// turn ended at and, when the chapter names its turns, that turn's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LastChapter {
    pub seq_hi: u64,
    pub turn: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct CountEntry {
    stamp: Stamp,
    count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct RootEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    chapters: Option<ChaptersEntry>,
    /// Collection file name → its line count.
    #[serde(default)]
    collections: BTreeMap<String, CountEntry>,
    /// Artifact prefix folder → its artifact count.
    #[serde(default)]
    artifacts: BTreeMap<String, CountEntry>,
}

/// What the vocabulary's candidates were computed from: the search table's state file, every
/// curation file (this machine's and, when linked, the mirror's) and the folders listing
/// them, each by stamp, and the parameters (project, linked, `vocabApply`, thresholds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VocabKey {
    inputs: Vec<(String, Stamp)>,
    params: String,
}

/// The key of the vocabulary's inputs; `None` when one of them changed too lately to trust
/// its stamp (then the candidates are computed and not kept).
pub fn vocabulary_key(store_dir: &Path, mirror: Option<&Path>, params: String) -> Option<VocabKey> {
    use crate::curation::file::{CURATION_FILE, EDITS_DIR};
    let now = now_ns();
    let mut inputs = Vec::new();
    let mut add = |path: PathBuf| -> Option<()> {
        if let Some(stamp) = Stamp::of(&path) {
            if !stamp.settled(now) {
                return None;
            }
            inputs.push((path.to_string_lossy().into_owned(), stamp));
        }
        Some(())
    };
    add(store_dir
        .join(crate::catalog::table::TABLE_DIR)
        .join("state.json"))?;
    for base in std::iter::once(store_dir).chain(mirror) {
        let edits = base.join(EDITS_DIR);
        add(edits.clone())?;
        for (name, file_type) in store::list_dir(&edits).ok()? {
            if file_type.is_dir() {
                add(edits.join(&name))?;
                add(edits.join(&name).join(CURATION_FILE))?;
            }
        }
    }
    Some(VocabKey { inputs, params })
}

/// What the document counts were read from: the store's catalog (its file and write-ahead
/// log) and the search table's state, each by stamp or as absent, and the parameters
/// (project, linked). Opening SQLite alone costs a small store's status ~1 ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocumentsKey {
    inputs: Vec<(String, Option<Stamp>)>,
    params: String,
}

/// The key of the document counts' inputs; `None` when one of them changed too lately to
/// trust its stamp (then the counts are read and not kept).
pub fn documents_key(store_dir: &Path, params: String) -> Option<DocumentsKey> {
    let now = now_ns();
    let catalog = crate::store::catalog::catalog_path(store_dir);
    let wal = PathBuf::from(format!("{}-wal", catalog.display()));
    let state = store_dir
        .join(crate::catalog::table::TABLE_DIR)
        .join("state.json");
    let mut inputs = Vec::new();
    for path in [catalog, wal, state] {
        let stamp = Stamp::of(&path);
        if stamp.as_ref().is_some_and(|s| !s.settled(now)) {
            return None;
        }
        inputs.push((path.to_string_lossy().into_owned(), stamp));
    }
    Some(DocumentsKey { inputs, params })
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct CacheFile {
    v: u32,
    /// The vocabulary's candidates and what they were computed from.
    #[serde(default)]
    vocabulary: Option<(VocabKey, super::VocabularyStatus)>,
    /// The document counts and what they were read from.
    #[serde(default)]
    documents: Option<(DocumentsKey, super::DocumentCounts)>,
    /// Log path → what its last read found.
    logs: BTreeMap<String, LogEntry>,
    /// Root session id → its folders as last read.
    roots: BTreeMap<String, RootEntry>,
}

/// What this status run read again and what it took from the cache.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheCounts {
    pub logs_read: u64,
    /// Logs that grew: read on from where the last read's last turn boundary was.
    pub logs_resumed: u64,
    pub logs_reused: u64,
    pub folders_read: u64,
    pub folders_reused: u64,
}

/// The cache as loaded, the entries this run used (written back at the end), and counts.
pub struct StatusCache {
    path: Option<PathBuf>,
    old: CacheFile,
    new: CacheFile,
    /// This run's chapter folders, settled or not (each read at most once per run).
    seen: BTreeMap<String, ChaptersEntry>,
    now_ns: i128,
    pub counts: CacheCounts,
}

impl StatusCache {
    /// The cache of `store` (none without a store: everything is read).
    pub fn load(store: Option<&Store>) -> StatusCache {
        let path = store.map(|s| s.dir().join(CACHE_FILE));
        let old = path
            .as_deref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|bytes| serde_json::from_slice::<CacheFile>(&bytes).ok())
            .filter(|c| c.v == VERSION)
            .unwrap_or_default();
        StatusCache {
            path,
            old,
            new: CacheFile {
                v: VERSION,
                ..CacheFile::default()
            },
            seen: BTreeMap::new(),
            now_ns: now_ns(),
            counts: CacheCounts::default(),
        }
    }

    /// What `read` finds in the log at `path`, from the cache when the log is unchanged. A
    /// `resumable` log (DSH's, append-only) that only grew since — same inode and device,
    /// longer, the bytes before the last read's anchor unchanged — is read on from there:
    /// `read` gets the last read.
    pub fn log(
        &mut self,
        path: &Path,
        resumable: bool,
        read: impl FnOnce(Option<&LogRead>) -> LogRead,
    ) -> LogRead {
        let key = path.to_string_lossy().into_owned();
        let stamp = Stamp::of(path);
        let old = self.old.logs.get(&key);
        if let (Some(stamp), Some(entry)) = (&stamp, old) {
            if entry.stamp == *stamp && stamp.settled(self.now_ns) {
                self.counts.logs_reused += 1;
                let read = entry.read.clone();
                self.new.logs.insert(key, entry.clone());
                return read;
            }
        }
        let prev = old
            .filter(|_| resumable)
            .filter(|e| {
                stamp.as_ref().is_some_and(|s| {
                    s.ino == e.stamp.ino && s.dev == e.stamp.dev && s.len > e.stamp.len
                })
            })
            .filter(|e| {
                e.read.anchor.as_ref().is_some_and(|a| {
                    a.byte_offset <= e.stamp.len
                        && tail_of(path, a.byte_offset).as_deref() == Some(a.tail.as_str())
                })
            })
            .map(|e| e.read.clone());
        if prev.is_some() {
            self.counts.logs_resumed += 1;
        } else {
            self.counts.logs_read += 1;
        }
        let mut out = read(prev.as_ref());
        if let Some(anchor) = out.anchor.as_mut() {
            match tail_of(path, anchor.byte_offset) {
                Some(tail) => anchor.tail = tail,
                None => out.anchor = None,
            }
        }
        // The stamp taken before the read: a log that grew meanwhile is read again next time
        // (on from its anchor, which was taken from what this read saw).
        if let Some(stamp) = stamp {
            if out.error.is_none() {
                let entry = LogEntry {
                    stamp: stamp.clone(),
                    read: out.clone(),
                };
                if stamp.settled(self.now_ns) || out.anchor.is_some() {
                    self.new.logs.insert(key, entry);
                }
            }
        }
        out
    }

    /// [`Store::counts`], reading again only the folders and collection files that changed.
    pub fn store_counts(&mut self, store: &Store) -> Result<StoreCounts, StoreError> {
        let mut counts = StoreCounts::default();
        for root in store.roots()? {
            counts.root_sessions += 1;
            let chapters = self.chapters(store, &root)?;
            counts.chapters += chapters.chapters;
            counts.plans += chapters.plans;
            let root_dir = store.root_dir(&root)?;
            let artifacts = root_dir.join(store::ARTIFACTS);
            for (prefix, file_type) in store::list_dir(&artifacts)? {
                if file_type.is_dir() && store::is_safe_component(&prefix) {
                    let dir = artifacts.join(&prefix);
                    counts.artifacts += self.count(&root, Kind::Artifacts, &prefix, &dir)?;
                }
            }
            let collections = root_dir.join(store::COLLECTIONS);
            for (name, file_type) in store::list_dir(&collections)? {
                if file_type.is_file() && !name.starts_with('.') && name.ends_with(".jsonl") {
                    let file = collections.join(&name);
                    counts.collection_lines += self.count(&root, Kind::Collection, &name, &file)?;
                }
            }
        }
        Ok(counts)
    }

    /// The highest seq of `session_id`'s chapters under `root`, `None` when it has none or
    /// the folder holds damage (as `Store::archived` refusing it).
    pub fn last_chapter(
        &mut self,
        store: &Store,
        root: &str,
        session_id: &str,
    ) -> Option<LastChapter> {
        let entry = self.chapters(store, root).ok()?;
        entry.archived_hi.as_ref()?.get(session_id).copied()
    }

    /// One root's chapter folder: counts by name and each session's last chapter's highest seq.
    fn chapters(&mut self, store: &Store, root: &str) -> Result<ChaptersEntry, StoreError> {
        if let Some(entry) = self.seen.get(root) {
            return Ok(entry.clone());
        }
        let dir = store.chapters_dir(root)?;
        let stamp = Stamp::of(&dir);
        if let (Some(stamp), Some(entry)) = (
            &stamp,
            self.old.roots.get(root).and_then(|r| r.chapters.as_ref()),
        ) {
            if entry.stamp == *stamp && stamp.settled(self.now_ns) {
                self.counts.folders_reused += 1;
                let entry = entry.clone();
                self.new.roots.entry(root.to_owned()).or_default().chapters = Some(entry.clone());
                self.seen.insert(root.to_owned(), entry.clone());
                return Ok(entry);
            }
        }
        self.counts.folders_read += 1;
        let (mut chapters, mut plans) = (0, 0);
        for (name, _) in store::list_dir(&dir)? {
            match store::parse_doc_name(&name) {
                Some((store::Series::Chapter, _)) => chapters += 1,
                Some((store::Series::Plan, _)) => plans += 1,
                None => {}
            }
        }
        // Each session's last chapter (the highest-numbered): after a DSH format migration
        // renumbered its log, an older chapter holds higher seqs of the old numbering.
        let archived_hi = store.archived(root).ok().map(|docs| {
            let mut last = BTreeMap::<String, (u32, LastChapter)>::new();
            for d in docs.into_iter().filter(|d| d.kind == "chapter") {
                let this = LastChapter {
                    seq_hi: d.seq_hi,
                    turn: d.turns.last().copied(),
                };
                let slot = last.entry(d.session_id).or_insert((d.number, this));
                if d.number >= slot.0 {
                    *slot = (d.number, this);
                }
            }
            last.into_iter().map(|(id, (_, l))| (id, l)).collect()
        });
        let entry = ChaptersEntry {
            stamp: stamp.clone().unwrap_or(Stamp {
                len: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                ino: 0,
                dev: 0,
            }),
            chapters,
            plans,
            archived_hi,
        };
        if stamp.is_some_and(|s| s.settled(self.now_ns)) {
            self.new.roots.entry(root.to_owned()).or_default().chapters = Some(entry.clone());
        }
        self.seen.insert(root.to_owned(), entry.clone());
        Ok(entry)
    }

    /// An artifact folder's artifact count or a collection file's line count.
    fn count(
        &mut self,
        root: &str,
        kind: Kind,
        name: &str,
        path: &Path,
    ) -> Result<u64, StoreError> {
        let stamp = Stamp::of(path);
        let cached = self.old.roots.get(root).and_then(|r| kind.map(r).get(name));
        if let (Some(stamp), Some(entry)) = (&stamp, cached) {
            if entry.stamp == *stamp && stamp.settled(self.now_ns) {
                self.counts.folders_reused += 1;
                let entry = entry.clone();
                let count = entry.count;
                kind.map_mut(self.new.roots.entry(root.to_owned()).or_default())
                    .insert(name.to_owned(), entry);
                return Ok(count);
            }
        }
        self.counts.folders_read += 1;
        let count = match kind {
            Kind::Artifacts => store::list_dir(path)?
                .iter()
                .filter(|(name, t)| t.is_file() && !name.starts_with('.') && name.ends_with(".txt"))
                .count() as u64,
            Kind::Collection => store::ledger::read(path, store::COLLECTION_VERSION)?
                .lines
                .len() as u64,
        };
        if let Some(stamp) = stamp.filter(|s| s.settled(self.now_ns)) {
            kind.map_mut(self.new.roots.entry(root.to_owned()).or_default())
                .insert(name.to_owned(), CountEntry { stamp, count });
        }
        Ok(count)
    }

    /// The vocabulary's candidates: the cached ones when `key` is theirs, else `compute`'s
    /// (kept when it succeeded and the key could be taken).
    pub fn vocabulary(
        &mut self,
        key: Option<VocabKey>,
        compute: impl FnOnce() -> super::VocabularyStatus,
    ) -> super::VocabularyStatus {
        reuse_or(
            &self.old.vocabulary,
            &mut self.new.vocabulary,
            &mut self.counts,
            key,
            compute,
            |status| status.error.is_none(),
        )
    }

    /// The document counts: the cached ones when `key` is theirs, else `read`'s (kept when
    /// the key could be taken).
    pub fn documents(
        &mut self,
        key: Option<DocumentsKey>,
        read: impl FnOnce() -> super::DocumentCounts,
    ) -> super::DocumentCounts {
        reuse_or(
            &self.old.documents,
            &mut self.new.documents,
            &mut self.counts,
            key,
            read,
            |_| true,
        )
    }

    /// Write the entries this run used (entries of logs and folders gone are dropped) when
    /// they differ from the loaded ones. A failure is only logged: it is a cache.
    pub fn save(self) {
        let Some(path) = self.path else { return };
        if self.new == self.old {
            return;
        }
        let bytes = match serde_json::to_vec(&self.new) {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %e, "status cache not serialized");
                return;
            }
        };
        if let Err(e) = store::atomic::write_atomic_unsynced(&path, &bytes) {
            tracing::debug!(error = %e, "status cache not written");
        }
    }
}

/// One keyed entry of the cache: the old value when `key` is the old one's (counted reused,
/// carried into the new file), else `compute`'s (counted read), kept under `key` when there
/// is one and `keep` accepts the value.
fn reuse_or<K: PartialEq + Clone, V: Clone>(
    old: &Option<(K, V)>,
    new: &mut Option<(K, V)>,
    counts: &mut CacheCounts,
    key: Option<K>,
    compute: impl FnOnce() -> V,
    keep: impl Fn(&V) -> bool,
) -> V {
    if let (Some(key), Some((old_key, value))) = (&key, old) {
        if key == old_key {
            counts.folders_reused += 1;
            *new = Some((key.clone(), value.clone()));
            return value.clone();
        }
    }
    counts.folders_read += 1;
    let value = compute();
    if let Some(key) = key.filter(|_| keep(&value)) {
        *new = Some((key, value.clone()));
    }
    value
}

#[derive(Clone, Copy)]
enum Kind {
    Artifacts,
    Collection,
}

impl Kind {
    fn map(self, r: &RootEntry) -> &BTreeMap<String, CountEntry> {
        match self {
            Kind::Artifacts => &r.artifacts,
            Kind::Collection => &r.collections,
        }
    }
    fn map_mut(self, r: &mut RootEntry) -> &mut BTreeMap<String, CountEntry> {
        match self {
            Kind::Artifacts => &mut r.artifacts,
            Kind::Collection => &mut r.collections,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(store: u64) -> crate::status::DocumentCounts {
        crate::status::DocumentCounts {
            store,
            pool: 0,
            unreadable: 0,
        }
    }

    /// Turn numbers are saved as runs and read back as they were; a hostile run is refused.
    #[test]
    fn turn_numbers_round_trip_as_runs() {
        let read = LogRead {
            header: None,
            read_id: None,
            ends: vec![10, 20, 30, 40, 50, 60],
            turns: vec![1, 2, 3, 7, 8, u64::MAX],
            in_flight: None,
            error: None,
            anchor: None,
        };
        let json = serde_json::to_string(&read).expect("json");
        assert!(
            json.contains(r#""turns":[[1,3],[7,2],[18446744073709551615,1]]"#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<LogRead>(&json).expect("back"), read);
        let hostile = json.replace("[7,2]", "[7,18446744073709551615]");
        assert!(serde_json::from_str::<LogRead>(&hostile).is_err());
    }

    /// The document counts are taken from the cache while what they were read from is
    /// unchanged (here: no catalog, no search table), and read again once an input appears
    /// (a catalog just written is not settled: read, not kept).
    #[test]
    fn document_counts_are_reused_until_their_inputs_change() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = Store::init(tmp.path()).expect("store");
        let params = || "pk false".to_owned();
        let mut cache = StatusCache::load(Some(&store));
        let key = documents_key(store.dir(), params());
        assert!(key.is_some(), "absent inputs are a state");
        assert_eq!(cache.documents(key, || counts(7)), counts(7));
        cache.save();

        let mut cache = StatusCache::load(Some(&store));
        let key = documents_key(store.dir(), params());
        let reused = cache.documents(key, || panic!("read again though nothing changed"));
        assert_eq!(reused, counts(7));
        assert_eq!(cache.counts.folders_reused, 1);
        cache.save();

        // Other parameters (linked now): read again.
        let mut cache = StatusCache::load(Some(&store));
        let key = documents_key(store.dir(), "pk true".to_owned());
        assert_eq!(cache.documents(key, || counts(8)), counts(8));

        // A catalog appears: its stamp is too fresh to trust, so read and not kept.
        std::fs::write(crate::store::catalog::catalog_path(store.dir()), b"x").expect("catalog");
        assert!(documents_key(store.dir(), params()).is_none());
        let mut cache = StatusCache::load(Some(&store));
        assert_eq!(cache.documents(None, || counts(9)), counts(9));
        cache.save();
        let cache = StatusCache::load(Some(&store));
        assert!(
            cache.old.documents.is_none(),
            "an unsettled read is not kept"
        );
    }
}

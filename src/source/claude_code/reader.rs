//! Claude Code transcript → normalized events.
//!
//! Two passes over the file, memory bounded by the number of lines (a few dozen bytes a
//! line), never by their size:
//! 1. the envelope of every line (`uuid`, `parentUuid`, whether it is a person's prompt):
//!    the conversation DAG ([`super::dag`]), the current leaf (the last `user`/`assistant` line off any
//!    sidechain) and its chain. A branch that leaves the chain at a person's prompt is a
//!    rewind or an edit: it is abandoned and never read. Any other off-chain line (a
//!    fragment whose parent is in another file, a tool result logged as a sibling) is kept.
//!    A line whose `uuid` came before is a copy and is read once.
//! 2. the lines in file order, streamed: one assistant message per `message.id` (its text
//!    and thinking blocks joined; its `tool_use` blocks become `tool/call`s), `tool_result`
//!    blocks → `tool/result` by `tool_use_id`, user text → `user/message` with the source
//!    kind [`super::screen`] gives it, images → a marker, a prompt queued while the agent
//!    worked (an `attachment` line of type `queued_command`; `isMeta` or a non-`human` `origin` the host's) → `user/message` inside the
//!    running turn, an assistant line Claude Code wrote in the model's place
//!    (`isApiErrorMessage`: an API error, a rate limit) → a host notice, and turn ends:
//!    `system/turn_duration`; an assistant line with `stop_reason: end_turn` and no call
//!    left unanswered; the next person's prompt after an exchange; or, at the end of a
//!    quiet file (`quiet_end`), an answered exchange. Bookkeeping lines (`progress`,
//!    `file-history-snapshot`, `queue-operation`, `summary`, titles, unknown types) yield
//!    nothing; a subagent's answered calls (its own file, or sidechain lines in this one)
//!    are folded into its `Task` call ([`super::subagent`]). A transcript resumed or forked
//!    from an earlier one of its folder (the same first `uuid`; or, when its first line
//!    names a parent — a fork of a compacted session starts at the compaction — one that
//!    holds that line) leaves the lines that one holds to it.
//!
//! Seqs: line `i`'s events carry `i << 12 | k` (`k` from 1), a turn end synthesized before
//! line `i` carries `i << 12`: the same line gives the same seqs on every read, and a line
//! appended later only adds higher ones. The resume point is kept at turn ends, where no
//! message, call or exchange is pending.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{json, Value};

use super::dag::{node_line, Dag, Lookup, St, MAX_LINE};
use super::line::{content_text, prompt_text, text_block, Attachment, Block, Content, Line};
use super::{screen, subagent};
use crate::session::reader::{ReadError, ReadNote, ReaderOptions, ResumePoint};
use crate::session::Header;
use crate::source::lines::{Lines, Next, Outbox, Step};

/// Bits of a seq that number the events of one line.
pub const SEQ_SHIFT: u32 = 12;
const MAX_SUB: u64 = (1 << SEQ_SHIFT) - 1;

/// What the first pass learned of the session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionFacts {
    /// `sessionId` of the first line carrying one.
    pub session_id: Option<String>,
    /// `cwd` of the first line carrying one.
    pub cwd: Option<String>,
    /// `version` of the last line carrying one (the Claude Code that wrote the newest lines).
    pub version: Option<String>,
    pub first_time: Option<i64>,
}

/// The first pass's result.
struct Plan {
    facts: SessionFacts,
    dag: Lookup,
    /// Lines an earlier transcript of the folder holds too (this one was resumed or forked
    /// from it): read there, not here.
    copied: std::sync::Arc<HashSet<u64>>,
}

/// The first pass kept between reads of a growing transcript (the daemon's follower, see
/// [`ClaudeReader::open_cached`]): a read extends it with the lines appended since, so it
/// costs what was appended, not the file — the nodes' classification too, as long as the
/// new leaf descends from the old one (a rewind or an edit classifies the DAG again). Only
/// for a file that grows by appends: a truncated or replaced file needs a fresh cache.
#[derive(Default)]
pub struct PlanCache {
    offset: u64,
    index: u64,
    facts: SessionFacts,
    dag: std::sync::Arc<Dag>,
    leaf: Option<u64>,
    /// The transcript's first `uuid` line off any sidechain, once read (see
    /// `copied_from_siblings`).
    first: Option<Head>,
    /// The lines earlier transcripts of the folder hold, while the folder is unchanged.
    copied: Option<Copied>,
}

/// What [`copied_from_siblings`] found, kept while no file of the folder was created,
/// removed or renamed (the folder's mtime) and the transcripts it read did not change: a
/// poll of a resumed transcript does not read the one it was resumed from again.
struct Copied {
    folder: std::time::SystemTime,
    /// The earlier transcripts read, with their length and mtime then.
    read: Vec<(PathBuf, u64, std::time::SystemTime)>,
    uuids: std::sync::Arc<HashSet<u64>>,
}

fn len_and_mtime(path: &Path) -> Option<(u64, std::time::SystemTime)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// [`copied_from_siblings`], from `kept` while it still holds.
fn copied_kept(
    path: &Path,
    first: &Head,
    cap: usize,
    kept: &mut Option<Copied>,
) -> std::sync::Arc<HashSet<u64>> {
    let folder = path
        .parent()
        .and_then(|d| std::fs::metadata(d).and_then(|m| m.modified()).ok());
    if let (Some(c), Some(folder)) = (kept.as_ref(), folder) {
        let unchanged = c.folder == folder
            && c.read
                .iter()
                .all(|(p, len, m)| len_and_mtime(p) == Some((*len, *m)));
        if unchanged {
            return std::sync::Arc::clone(&c.uuids);
        }
    }
    let (uuids, read) = copied_from_siblings(path, first, cap);
    let uuids = std::sync::Arc::new(uuids);
    let read: Option<Vec<(PathBuf, u64, std::time::SystemTime)>> = read
        .into_iter()
        .map(|p| len_and_mtime(&p).map(|(len, m)| (p, len, m)))
        .collect();
    // A folder changed in the last second may change again within the same tick of the
    // file clock, its mtime unchanged: read it again next time.
    let settled = folder.filter(|m| {
        std::time::SystemTime::now()
            .duration_since(*m)
            .is_ok_and(|age| age >= std::time::Duration::from_secs(1))
    });
    *kept = settled.zip(read).map(|(folder, read)| Copied {
        folder,
        read,
        uuids: std::sync::Arc::clone(&uuids),
    });
    uuids
}

fn key(uuid: &str) -> u64 {
    // `DefaultHasher::new` has fixed keys: the same uuid hashes the same on every read.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    uuid.hash(&mut h);
    h.finish()
}

/// A line's envelope, as the first pass reads it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(rename = "type")]
    kind: Option<String>,
    uuid: Option<String>,
    parent_uuid: Option<String>,
    logical_parent_uuid: Option<String>,
    is_sidechain: Option<bool>,
    is_meta: Option<bool>,
    is_compact_summary: Option<bool>,
    session_id: Option<String>,
    cwd: Option<String>,
    version: Option<String>,
    timestamp: Option<String>,
    message: Option<LightMessage>,
}

#[derive(Deserialize)]
struct LightMessage {
    content: Option<LightContent>,
}

/// Whether a user line's content is text (a string or text blocks) rather than tool results.
struct LightContent {
    text: bool,
}

impl<'de> Deserialize<'de> for LightContent {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LightContent;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("message content")
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<LightContent, E> {
                Ok(LightContent { text: true })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<LightContent, A::Error> {
                #[derive(Deserialize)]
                struct LightBlock {
                    #[serde(rename = "type")]
                    kind: Option<String>,
                }
                let mut text = false;
                let mut result = false;
                while let Some(b) = seq.next_element::<LightBlock>()? {
                    match b.kind.as_deref() {
                        Some("text") => text = true,
                        Some("tool_result") => result = true,
                        _ => {}
                    }
                }
                Ok(LightContent {
                    text: text && !result,
                })
            }
            fn visit_map<A: de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<LightContent, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LightContent { text: false })
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
thread_local! {
    /// Reads whose classification only extended the last one's (see [`extend`]).
    static EXTENDED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Earlier transcripts read whole for their uuids (see [`copied_from_siblings`]).
    static SIBLINGS_READ: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Earlier transcripts searched for a line (see [`holds_uuid`]).
    static SIBLINGS_SEARCHED: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The first pass (see the module doc).
/// It starts where `cache` stopped and leaves it at the file's end (reset when it fails).
fn plan(path: &Path, cap: usize, cache: &mut PlanCache) -> Result<Plan, ReadError> {
    let PlanCache {
        offset,
        mut index,
        mut facts,
        dag,
        mut leaf,
        mut first,
        mut copied,
    } = std::mem::take(cache);
    // The reader of the last read (which shares it) is gone by the next one: no copy.
    let mut dag: Dag = std::sync::Arc::try_unwrap(dag).unwrap_or_else(|shared| (*shared).clone());
    let file = crate::session::reader::open_regular(path)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    std::io::Seek::seek(reader.get_mut(), std::io::SeekFrom::Start(offset)).map_err(|source| {
        ReadError::Io {
            file: path.to_path_buf(),
            source,
        }
    })?;
    let was_leaf = leaf;
    let first_new = index;
    let added_from = dag.len();
    // An appended node some older node named as its parent: the older node's branch changes.
    let mut adopted = false;
    let mut lines = Lines::new(reader, offset, cap);
    loop {
        let next = lines.next_line().map_err(|source| ReadError::Io {
            file: path.to_path_buf(),
            source,
        })?;
        let Next::Line { .. } = next else {
            if matches!(next, Next::TooLong { .. }) {
                index += 1;
                continue;
            }
            break;
        };
        let this = index;
        index += 1;
        let Ok(env) = serde_json::from_slice::<Envelope>(lines.line()) else {
            continue;
        };
        let sidechain = env.is_sidechain == Some(true);
        if !sidechain {
            if facts.session_id.is_none() {
                facts.session_id = env.session_id.clone();
            }
            if facts.cwd.is_none() {
                facts.cwd = env.cwd.clone().filter(|c| !c.is_empty());
            }
            if env.version.is_some() {
                facts.version = env.version.clone();
            }
            if facts.first_time.is_none() {
                facts.first_time = env
                    .timestamp
                    .as_deref()
                    .and_then(crate::time::parse_rfc3339_ms);
            }
        }
        let Some(uuid) = env.uuid.as_deref() else {
            continue;
        };
        if first.is_none() && !sidechain {
            first = Some(Head {
                uuid: uuid.to_owned(),
                session: env.session_id.clone(),
                mid: env.parent_uuid.is_some() || env.logical_parent_uuid.is_some(),
            });
        }
        let k = key(uuid);
        if dag.contains(k) {
            continue;
        }
        let Some(line) = node_line(this) else {
            return Err(ReadError::BadLine {
                file: path.to_path_buf(),
                after_seq: Some((this << SEQ_SHIFT) - 1),
                detail: format!(
                    "line {}: a Claude Code transcript is read up to line {} (its DAG \
                     numbers lines in 32 bits)",
                    this + 1,
                    MAX_LINE + 1
                ),
            });
        };
        // A compaction boundary has no parent; its logical parent bridges the chain.
        let parent = env
            .parent_uuid
            .as_deref()
            .or(env.logical_parent_uuid.as_deref())
            .map(key);
        let kind = env.kind.as_deref();
        let prompt_like = kind == Some("user")
            && env.is_meta != Some(true)
            && env.is_compact_summary != Some(true)
            && env
                .message
                .as_ref()
                .and_then(|m| m.content.as_ref())
                .is_some_and(|c| c.text);
        if !sidechain && matches!(kind, Some("user") | Some("assistant")) {
            leaf = Some(k);
        }
        adopted |= dag.add(k, parent, line, prompt_like, first_new);
    }
    let extended = !adopted && dag.extend(was_leaf, leaf, added_from);
    if !extended {
        dag.classify(leaf);
    }
    #[cfg(test)]
    EXTENDED.with(|c| c.set(c.get() + u64::from(extended)));
    let copied_uuids = match first.as_ref() {
        // The order of origin goes by the session the first line carrying one names.
        Some(head) => copied_kept(
            path,
            &Head {
                session: facts.session_id.clone(),
                ..head.clone()
            },
            cap,
            &mut copied,
        ),
        None => Default::default(),
    };
    let dag = std::sync::Arc::new(dag);
    *cache = PlanCache {
        offset: lines.offset(),
        index,
        facts: facts.clone(),
        dag: std::sync::Arc::clone(&dag),
        leaf,
        first,
        copied,
    };
    Ok(Plan {
        facts,
        dag: Lookup::Shared(dag),
        copied: copied_uuids,
    })
}

/// Lines read, at most, to find a sibling transcript's first `uuid`.
const SIBLING_HEAD_LINES: usize = 64;

/// A transcript's first `uuid` line (off any sidechain).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Head {
    pub uuid: String,
    /// The `sessionId` beside it.
    pub session: Option<String>,
    /// It names a parent (`parentUuid` or `logicalParentUuid`): the transcript starts past
    /// the start of a conversation, as a fork of a compacted session starts at the
    /// compaction (its chain stops at the boundary), in the middle of its parent's file.
    pub mid: bool,
}

/// A transcript's first `uuid` line (off any sidechain).
pub(super) fn first_uuid_of(path: &Path) -> Option<Head> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Raw {
        uuid: Option<String>,
        session_id: Option<String>,
        is_sidechain: Option<bool>,
        parent_uuid: Option<String>,
        logical_parent_uuid: Option<String>,
    }
    let file = crate::session::reader::open_regular(path).ok()?;
    let reader = std::io::BufRead::split(BufReader::new(file), b'\n');
    for line in reader.take(SIBLING_HEAD_LINES) {
        let line = line.ok()?;
        if let Ok(Raw {
            uuid: Some(uuid),
            session_id,
            is_sidechain,
            parent_uuid,
            logical_parent_uuid,
        }) = serde_json::from_slice::<Raw>(&line)
        {
            if is_sidechain != Some(true) {
                return Some(Head {
                    uuid,
                    session: session_id,
                    mid: parent_uuid.is_some() || logical_parent_uuid.is_some(),
                });
            }
        }
    }
    None
}

/// A file's length and mtime: what says a kept fact about it still holds (a rewrite in
/// the same tick of the file clock seldom keeps the length too).
type Stamp = (u64, std::time::SystemTime);

/// First `uuid` lines already read, by transcript: opening every session of a folder of N
/// would otherwise read N heads N times. A transcript changed since (appended to, or
/// rewritten) is read again.
static HEADS: std::sync::OnceLock<std::sync::Mutex<HashMap<PathBuf, (Stamp, Head)>>> =
    std::sync::OnceLock::new();

/// The first `uuid` line of each of `paths`, from the cache where still true.
fn sibling_heads(paths: &[PathBuf]) -> Vec<Option<Head>> {
    let cache = HEADS.get_or_init(Default::default);
    let stamps: Vec<Option<Stamp>> = paths.iter().map(|p| len_and_mtime(p)).collect();
    let known: Vec<Option<Head>> = match cache.lock() {
        Ok(c) => paths
            .iter()
            .zip(&stamps)
            .map(|(p, s)| {
                c.get(p)
                    .filter(|(at, _)| Some(*at) == *s)
                    .map(|(_, h)| h.clone())
            })
            .collect(),
        Err(_) => vec![None; paths.len()],
    };
    let out: Vec<Option<Head>> = paths
        .iter()
        .zip(known)
        .map(|(p, k)| k.or_else(|| first_uuid_of(p)))
        .collect();
    if let Ok(mut c) = cache.lock() {
        bound_cache(&mut c, |p| p);
        for ((p, h), s) in paths.iter().zip(&out).zip(&stamps) {
            if let (Some(h), Some(s)) = (h, s) {
                c.insert(p.clone(), (*s, h.clone()));
            }
        }
    }
    out
}

/// What [`holds_uuid`] found, by transcript and uuid, while the transcript is unchanged: a
/// fork of a compacted session searches the folder again whenever a file is created in it.
#[allow(clippy::type_complexity)]
static HOLDS: std::sync::OnceLock<std::sync::Mutex<HashMap<(PathBuf, u64), (Stamp, bool)>>> =
    std::sync::OnceLock::new();

/// Whether some line of `path` has `uuid` as its own `uuid` (from [`HOLDS`] while true).
fn holds_uuid(path: &Path, uuid: &str, cap: usize) -> bool {
    let cache = HOLDS.get_or_init(Default::default);
    let stamp = len_and_mtime(path);
    let k = (path.to_path_buf(), key(uuid));
    if let Ok(c) = cache.lock() {
        if let Some((at, found)) = c.get(&k) {
            if Some(*at) == stamp {
                return *found;
            }
        }
    }
    let found = search_uuid(path, uuid, cap);
    if let (Ok(mut c), Some(stamp)) = (cache.lock(), stamp) {
        bound_cache(&mut c, |(p, _)| p);
        c.insert(k, (stamp, found));
    }
    found
}

/// Entries a first-line cache keeps before it forgets: a long-running daemon sees transcripts
/// come and go (Claude Code's sweep deletes them), and a cache must not grow with them.
const CACHED_FILES_MAX: usize = 4096;

/// At the bound, the entries of files gone from disk are dropped; if the cache is still full,
/// all of it (it is only a cache: the next open reads the heads again).
fn bound_cache<K, V>(cache: &mut HashMap<K, V>, path_of: impl Fn(&K) -> &PathBuf) {
    if cache.len() < CACHED_FILES_MAX {
        return;
    }
    cache.retain(|k, _| path_of(k).exists());
    if cache.len() >= CACHED_FILES_MAX {
        cache.clear();
    }
}

/// Each whole line of `path` in order (a line past `cap` skipped, a torn tail ends it)
/// until `f` says stop; false when the file cannot be opened.
fn each_line(
    path: &Path,
    cap: usize,
    mut f: impl FnMut(&[u8]) -> std::ops::ControlFlow<()>,
) -> bool {
    let Ok(file) = crate::session::reader::open_regular(path) else {
        return false;
    };
    let mut lines = Lines::new(BufReader::with_capacity(64 * 1024, file), 0, cap);
    while let Ok(next) = lines.next_line() {
        match next {
            Next::Line { .. } => {}
            Next::TooLong { .. } => continue,
            Next::Torn { .. } | Next::End => break,
        }
        if f(lines.line()).is_break() {
            break;
        }
    }
    true
}

/// Whether some line of `path` has `uuid` as its own `uuid`, read through.
fn search_uuid(path: &Path, uuid: &str, cap: usize) -> bool {
    #[derive(Deserialize)]
    struct Uuid<'a> {
        #[serde(borrow)]
        uuid: Option<std::borrow::Cow<'a, str>>,
    }
    #[cfg(test)]
    SIBLINGS_SEARCHED.with(|c| c.set(c.get() + 1));
    let finder = memchr::memmem::Finder::new(uuid.as_bytes());
    let mut found = false;
    each_line(path, cap, |line| {
        found = finder.find(line).is_some()
            && serde_json::from_slice::<Uuid>(line).is_ok_and(|u| u.uuid.as_deref() == Some(uuid));
        if found {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    });
    found
}

/// Which transcript of a pair that starts with the same line came first: the one whose
/// first line carries its own `sessionId`, then the one created first, then by name.
fn origin_order(
    path: &Path,
    session_id: Option<&str>,
) -> (bool, Option<std::time::SystemTime>, PathBuf) {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    let own = session_id.is_some() && session_id.map(str::to_owned) == stem;
    let created = std::fs::metadata(path).and_then(|m| m.created()).ok();
    (!own, created, path.to_path_buf())
}

/// The uuids this transcript shares with the earlier ones of its folder it was resumed
/// or forked from ([`earlier_siblings`]): Claude Code's resume and fork start a new file
/// by repeating the conversation so far. Only those transcripts are read (returned too).
fn copied_from_siblings(path: &Path, first: &Head, cap: usize) -> (HashSet<u64>, Vec<PathBuf>) {
    let mut copied = HashSet::new();
    #[derive(Deserialize)]
    struct Uuid {
        uuid: Option<String>,
    }
    let earlier = earlier_siblings(path, first, cap);
    for sibling in &earlier {
        let read = each_line(sibling, cap, |line| {
            if let Ok(Uuid { uuid: Some(u) }) = serde_json::from_slice::<Uuid>(line) {
                copied.insert(key(&u));
            }
            std::ops::ControlFlow::Continue(())
        });
        #[cfg(test)]
        SIBLINGS_READ.with(|c| c.set(c.get() + u64::from(read)));
        #[cfg(not(test))]
        let _ = read;
    }
    (copied, earlier)
}

/// The transcripts of `path`'s folder it was resumed or forked from, sorted: those that
/// came before it (see [`origin_order`]) and start with the same line (`first`) or — when
/// `first` names a parent (a fork of a compacted session starts at the compaction) — hold
/// that line anywhere. "Before" is one order over the folder, so two transcripts never
/// leave their shared lines to each other.
pub(super) fn earlier_siblings(path: &Path, first: &Head, cap: usize) -> Vec<PathBuf> {
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mine = origin_order(path, first.session.as_deref());
    let earlier: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p != path)
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .is_some_and(|n| n.ends_with(".jsonl") && !n.starts_with("agent-"))
        })
        .collect();
    let heads = sibling_heads(&earlier);
    let mut earlier: Vec<PathBuf> = earlier
        .into_iter()
        .zip(heads)
        .filter_map(|(p, head)| {
            let head = head?;
            (origin_order(&p, head.session.as_deref()) < mine).then_some((p, head))
        })
        .filter(|(p, head)| {
            head.uuid == first.uuid || (first.mid && holds_uuid(p, &first.uuid, cap))
        })
        .map(|(p, _)| p)
        .collect();
    earlier.sort();
    earlier
}

/// The assistant message being gathered across lines sharing its `message.id`.
struct PendingMessage {
    id: Option<String>,
    seq: u64,
    time: Option<i64>,
    text: Vec<String>,
    reasoning: Vec<String>,
}

/// Streaming reader of one Claude Code transcript.
pub struct ClaudeReader {
    path: PathBuf,
    lines: Lines<Box<dyn std::io::BufRead>>,
    plan: Plan,
    /// The index of the next line.
    line_index: u64,
    out: Outbox,
    pending: Option<PendingMessage>,
    /// Calls not answered yet.
    open_calls: BTreeSet<String>,
    /// An assistant message or a call since the last turn end.
    exchange: bool,
    /// An event was made since the last turn end (the assembler holds it).
    since_end: bool,
    /// The last event was an assistant message.
    last_was_answer: bool,
    quiet_end: bool,
    /// `idleArchiveMs`: a line written this long after an answered exchange ends it first,
    /// as a quiet end of the file did (so a later read keeps the turn an earlier one ended).
    idle_gap_ms: Option<u64>,
    /// When the last answer was written.
    last_answer_time: Option<i64>,
    skipped_shapes: u64,
    /// The line cap, for the error that names it.
    cap: usize,
    /// `Task`/`Agent` calls not answered yet: their prompt (to find a ≤ 2.0 agent file).
    task_calls: HashMap<String, String>,
    /// Sidechain lines in the session file itself (old versions), gathered until the
    /// `Task` result they belong to.
    side: subagent::SideWork,
    /// Agent files already folded into a call.
    folded: Vec<PathBuf>,
    /// The session a fork's copied lines name (`forkedFrom.sessionId`) and whether its
    /// transcript is beside this one.
    fork_parent: Option<(String, bool)>,
}

impl ClaudeReader {
    /// Open `path` at `from`. `quiet_end`: the file has been quiet long enough that an
    /// answered exchange at its end is a finished turn.
    pub fn open(
        path: &Path,
        from: ResumePoint,
        options: ReaderOptions,
        quiet_end: bool,
    ) -> Result<Self, ReadError> {
        let mut cache = PlanCache::default();
        let mut reader = Self::open_cached(path, from, options, quiet_end, &mut cache)?;
        // Nothing keeps the first pass: the second holds only what it reads of the DAG.
        drop(cache);
        reader.plan.dag =
            std::mem::replace(&mut reader.plan.dag, Lookup::Sorted(Box::default())).alone();
        Ok(reader)
    }

    /// [`ClaudeReader::open`] with the first pass extended from `cache` (a growing file
    /// followed live) instead of read whole.
    pub fn open_cached(
        path: &Path,
        from: ResumePoint,
        options: ReaderOptions,
        quiet_end: bool,
        cache: &mut PlanCache,
    ) -> Result<Self, ReadError> {
        let plan = plan(path, options.max_line_bytes, cache)?;
        let stream = crate::source::lines::open_stream(path, from.byte_offset)?;
        let header = if from.header_seen {
            None
        } else {
            header_of(path, &plan.facts)
        };
        Ok(ClaudeReader {
            path: path.to_path_buf(),
            lines: Lines::new(stream, from.byte_offset, options.max_line_bytes),
            plan,
            line_index: from.next_seq >> SEQ_SHIFT,
            out: Outbox::new(header, from),
            pending: None,
            open_calls: BTreeSet::new(),
            exchange: false,
            since_end: false,
            last_was_answer: false,
            quiet_end,
            idle_gap_ms: None,
            last_answer_time: None,
            skipped_shapes: 0,
            cap: options.max_line_bytes,
            task_calls: HashMap::new(),
            side: subagent::SideWork::default(),
            folded: Vec::new(),
            fork_parent: None,
        })
    }

    /// Whether the transcript of session `id` (another one) is in this one's folder.
    fn parent_beside(&mut self, id: &str) -> bool {
        if let Some((known, beside)) = &self.fork_parent {
            if known == id {
                return *beside;
            }
        }
        let own = self.path.file_stem().is_some_and(|s| s == id);
        let beside = !own
            && crate::names::is_safe_component(id)
            && self.path.with_file_name(format!("{id}.jsonl")).is_file();
        self.fork_parent = Some((id.to_owned(), beside));
        beside
    }

    /// End an answered exchange before a line written `gap_ms` or more after the answer.
    pub fn with_idle_gap(mut self, gap_ms: Option<u64>) -> Self {
        self.idle_gap_ms = gap_ms;
        self
    }

    /// An assistant message or a call since the last turn end (a message still being
    /// gathered counts).
    fn has_exchange(&self) -> bool {
        self.exchange || self.pending.is_some()
    }

    /// What the first pass learned (session id, cwd, version).
    pub fn facts(&self) -> &SessionFacts {
        &self.plan.facts
    }

    fn push(&mut self, seq: u64, kind: &str, data: Value, time: Option<i64>) {
        self.out.push(seq, kind, data, time);
        self.since_end = true;
    }

    /// A user-role message of `kind`: nothing pending answers it any more.
    fn push_user(&mut self, seq: u64, text: String, kind: &str, time: Option<i64>) {
        let source = crate::source::user_source(kind, false);
        self.push(
            seq,
            "user/message",
            json!({"content": text, "source": source}),
            time,
        );
        self.last_was_answer = false;
    }

    fn flush_message(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        let mut blocks: Vec<Value> = p
            .reasoning
            .into_iter()
            .map(|t| json!({"type": "reasoning", "text": t}))
            .collect();
        if !p.text.is_empty() {
            blocks.push(json!({"type": "text", "text": p.text.join("\n\n")}));
        }
        self.push(
            p.seq,
            "assistant/message",
            json!({ "content": blocks }),
            p.time,
        );
        self.exchange = true;
        self.last_was_answer = true;
    }

    /// A subagent's answered calls, as events of the parent's turn (see [`subagent`]).
    fn fold_subagent(
        &mut self,
        agent_id: Option<&str>,
        prompt: &str,
        next_seq: &mut dyn FnMut() -> u64,
        time: Option<i64>,
    ) {
        let mut work = std::mem::take(&mut self.side);
        let file = subagent::agent_file(
            &self.path,
            agent_id,
            self.plan.facts.session_id.as_deref(),
            Some(prompt).filter(|p| !p.is_empty()),
            &self.folded,
        );
        if let Some(file) = file {
            work.extend(subagent::read_agent(&file, self.cap));
            self.folded.push(file);
        }
        self.push_side_calls(work, next_seq, time);
    }

    /// A background agent's work, when its report arrives (`reporting_agent`: the
    /// `<task-notification>`'s `<task-id>`, or the `<agent-message from=…>` hand-back): its
    /// transcript's answered calls, as events of the turn the report arrives in. Its launch
    /// folded nothing: its work went on after it.
    fn fold_reported_agent(
        &mut self,
        agent_id: &str,
        next_seq: &mut dyn FnMut() -> u64,
        time: Option<i64>,
    ) {
        let file = subagent::agent_file(&self.path, Some(agent_id), None, None, &self.folded);
        let Some(file) = file else {
            return;
        };
        let work = subagent::read_agent(&file, self.cap);
        self.folded.push(file);
        self.push_side_calls(work, next_seq, time);
    }

    /// A subagent's answered calls pushed as the parent's calls and results.
    fn push_side_calls(
        &mut self,
        work: subagent::SideWork,
        next_seq: &mut dyn FnMut() -> u64,
        time: Option<i64>,
    ) {
        for c in work.answered() {
            let (content, is_error) = c.result.unwrap_or_default();
            let seq = next_seq();
            self.push(
                seq,
                "tool/call",
                json!({"callId": c.id, "name": c.name, "arguments": c.arguments}),
                time,
            );
            let seq = next_seq();
            self.push(
                seq,
                "tool/result",
                json!({"role": "tool", "toolCallId": c.id, "content": content, "isError": is_error}),
                time,
            );
        }
    }

    /// End the turn at `seq`; the reader may resume at `resume` afterwards.
    fn end_turn(&mut self, seq: u64, reason: &str, resume: ResumePoint) {
        self.flush_message();
        self.out.end_turn(seq, reason, resume);
        self.since_end = false;
        self.exchange = false;
        self.last_was_answer = false;
        self.open_calls.clear();
    }

    /// Read one line (or the end) into the queue.
    fn step(&mut self) -> Result<(), ReadError> {
        let next = self.lines.next_line().map_err(|source| ReadError::Io {
            file: self.path.clone(),
            source,
        })?;
        let index = self.line_index;
        let base = index << SEQ_SHIFT;
        match next {
            Next::End | Next::Torn { .. } => {
                if let Next::Torn { start } = next {
                    self.out.note(ReadNote::TornTail {
                        file: self.path.clone(),
                        at: start,
                    });
                }
                if self.skipped_shapes > 0 {
                    tracing::debug!(
                        file = %self.path.display(),
                        lines = self.skipped_shapes,
                        "Claude Code lines of an unknown shape skipped"
                    );
                }
                self.flush_message();
                if self.quiet_end
                    && self.has_exchange()
                    && self.open_calls.is_empty()
                    && self.last_was_answer
                {
                    let resume = ResumePoint {
                        byte_offset: self.lines.offset(),
                        next_seq: base + 1,
                        header_seen: true,
                    };
                    self.end_turn(base, "completed", resume);
                }
                self.out.finish();
                return Ok(());
            }
            Next::TooLong { .. } => {
                self.line_index += 1;
                return Err(ReadError::LineTooLong {
                    file: self.path.clone(),
                    after_seq: base.checked_sub(1),
                    limit: self.cap,
                });
            }
            Next::Line { start } => {
                self.line_index += 1;
                let line_start = ResumePoint {
                    byte_offset: start,
                    next_seq: base + 1,
                    header_seen: true,
                };
                let after = ResumePoint {
                    byte_offset: self.lines.offset(),
                    next_seq: (index + 1) << SEQ_SHIFT,
                    header_seen: true,
                };
                let parsed = serde_json::from_slice::<Line>(self.lines.line());
                let line = match parsed {
                    Ok(l) => l,
                    Err(e) => {
                        if serde_json::from_slice::<IgnoredAny>(self.lines.line()).is_err() {
                            return Err(ReadError::BadLine {
                                file: self.path.clone(),
                                after_seq: base.checked_sub(1),
                                detail: format!("line {}: {e}", index + 1),
                            });
                        }
                        // Valid JSON of a shape no Claude Code wrote: skipped.
                        self.skipped_shapes += 1;
                        return Ok(());
                    }
                };
                self.line(index, base, line, line_start, after);
                // A line that leaves nothing pending (bookkeeping, a rewound branch)
                // moves the resume point past it.
                if !self.since_end && self.pending.is_none() && self.open_calls.is_empty() {
                    self.out.commit_when_idle(after);
                }
            }
        }
        Ok(())
    }

    fn line(
        &mut self,
        index: u64,
        base: u64,
        line: Line,
        line_start: ResumePoint,
        after: ResumePoint,
    ) {
        if line.is_sidechain == Some(true) {
            // An old transcript's subagent lines: folded into the `Task` result.
            self.side.add(line, "sidechain");
            return;
        }
        if let Some(parent) = line.forked_from.as_ref().and_then(|f| f.session_id.clone()) {
            if self.parent_beside(&parent) {
                return; // a fork's copy (fresh uuids or not): read in its parent
            }
        }
        if let Some(uuid) = line.uuid.as_deref() {
            let k = key(uuid);
            let node = self.plan.dag.get(k);
            if node.is_some_and(|(state, _)| state == St::Abandoned) {
                return;
            }
            if node.is_some_and(|(_, line)| line != index) {
                return; // a copy of an earlier line
            }
            if self.plan.copied.contains(&k) {
                return; // read in the transcript this one was resumed from
            }
        }
        let time = line
            .timestamp
            .as_deref()
            .and_then(crate::time::parse_rfc3339_ms);
        if let (Some(gap), Some(t), Some(answered)) =
            (self.idle_gap_ms, time, self.last_answer_time)
        {
            let answered_last = self.last_was_answer || self.pending.is_some();
            if answered_last
                && self.has_exchange()
                && self.open_calls.is_empty()
                && t.saturating_sub(answered) >= i64::try_from(gap).unwrap_or(i64::MAX)
            {
                self.end_turn(base, "completed", line_start);
            }
        }
        let mut sub: u64 = 1;
        let next_seq = |sub: &mut u64| {
            let s = base | (*sub).min(MAX_SUB);
            *sub += 1;
            s
        };
        match (line.kind.as_deref(), line.subtype.as_deref()) {
            (Some("system"), Some("turn_duration")) if self.has_exchange() => {
                let seq = next_seq(&mut sub);
                self.end_turn(seq, "completed", after);
            }
            (Some("assistant"), _) if line.is_api_error_message == Some(true) => {
                // Claude Code's words in the model's place: a host notice, never the answer
                // (a chapter's summary would read "API Error: 529 Overloaded").
                let text = line
                    .message
                    .map(|m| prompt_text(m.content))
                    .unwrap_or_default();
                if text.trim().is_empty() {
                    return;
                }
                self.flush_message();
                let seq = next_seq(&mut sub);
                self.push_user(seq, text, screen::NOTICE, time);
            }
            (Some("assistant"), _) => {
                let Some(msg) = line.message else { return };
                if self
                    .pending
                    .as_ref()
                    .is_some_and(|p| p.id.is_none() || p.id != msg.id)
                {
                    self.flush_message();
                }
                let blocks = match msg.content {
                    Some(Content::Blocks(b)) => b,
                    Some(Content::Text(t)) => vec![Block::text(t)],
                    None => Vec::new(),
                };
                for b in blocks {
                    match b.kind.as_deref() {
                        Some("text") | Some("thinking") | Some("redacted_thinking") => {
                            if self.pending.is_none() {
                                let seq = next_seq(&mut sub);
                                self.pending = Some(PendingMessage {
                                    id: msg.id.clone(),
                                    seq,
                                    time,
                                    text: Vec::new(),
                                    reasoning: Vec::new(),
                                });
                            }
                            self.last_answer_time = time.or(self.last_answer_time);
                            let p = self.pending.as_mut().expect("just set");
                            match b.kind.as_deref() {
                                Some("text") => p.text.extend(b.text.filter(|t| !t.is_empty())),
                                Some("thinking") => {
                                    p.reasoning.push(b.thinking.unwrap_or_default())
                                }
                                _ => p.reasoning.push(String::new()),
                            }
                        }
                        Some("tool_use") | Some("server_tool_use") => {
                            self.flush_message();
                            let id = b.id.unwrap_or_default();
                            let arguments = b
                                .input
                                .as_ref()
                                .map_or_else(|| "{}".to_owned(), |v| v.to_string());
                            let seq = next_seq(&mut sub);
                            self.push(
                                seq,
                                "tool/call",
                                json!({"callId": id, "name": b.name.clone().unwrap_or_default(), "arguments": arguments}),
                                time,
                            );
                            if matches!(b.name.as_deref(), Some("Task") | Some("Agent")) {
                                let prompt = b
                                    .input
                                    .as_ref()
                                    .and_then(|i| i.get("prompt"))
                                    .and_then(Value::as_str)
                                    .unwrap_or_default();
                                self.task_calls.insert(id.clone(), prompt.to_owned());
                            }
                            self.open_calls.insert(id);
                            self.exchange = true;
                            self.last_was_answer = false;
                        }
                        _ => {}
                    }
                }
                if msg.stop_reason.as_deref() == Some("end_turn")
                    && self.open_calls.is_empty()
                    && self.has_exchange()
                {
                    self.flush_message();
                    let seq = next_seq(&mut sub);
                    self.end_turn(seq, "completed", after);
                }
            }
            (Some("attachment"), _) => {
                if let Some(text) = line
                    .attachment
                    .as_ref()
                    .and_then(Attachment::teammate_messages)
                {
                    // Delivered into the running turn, as a queued prompt is: it ends nothing.
                    self.flush_message();
                    let seq = next_seq(&mut sub);
                    self.push_user(seq, text, screen::TEAMMATE, time);
                    return;
                }
                let Some(a) = line.attachment.filter(Attachment::is_queued_prompt) else {
                    return;
                };
                let notification = a.is_task_notification();
                let hosts = a.is_hosts();
                let from_peer = a.is_from_peer();
                let text = prompt_text(a.prompt);
                if text.trim().is_empty() {
                    return;
                }
                // Delivered into the running turn: it ends nothing (the agent reads it at
                // its next step); between turns it opens the next one as any prompt does.
                let kind = match screen::classify(&text, hosts, false) {
                    screen::HUMAN if notification => screen::COMMAND,
                    screen::HUMAN if from_peer => screen::PEER,
                    kind => kind,
                };
                self.flush_message();
                let seq = next_seq(&mut sub);
                let reporting = reporting_agent(kind, &text);
                self.push_user(seq, text, kind, time);
                if let Some(agent) = reporting {
                    self.fold_reported_agent(&agent, &mut || next_seq(&mut sub), time);
                }
            }
            (Some("user"), _) => {
                let Some(msg) = line.message else { return };
                let is_meta = line.is_meta == Some(true);
                let is_summary = line.is_compact_summary == Some(true);
                let (texts, results): (Vec<String>, Vec<Block>) = match msg.content {
                    Some(Content::Text(t)) => (vec![t], Vec::new()),
                    Some(Content::Blocks(blocks)) => {
                        let mut texts = Vec::new();
                        let mut results = Vec::new();
                        for b in blocks {
                            match b.kind.as_deref() {
                                Some("tool_result") => results.push(b),
                                Some("image") | Some("document") => texts.push(b.image_marker()),
                                Some("text") => texts.extend(b.text.map(text_block)),
                                _ => {}
                            }
                        }
                        (texts, results)
                    }
                    None => (Vec::new(), Vec::new()),
                };
                if !results.is_empty() {
                    self.flush_message();
                    let agent = line.tool_use_result.unwrap_or_default();
                    let agent_id = agent.id;
                    for r in results {
                        let id = r.tool_use_id.clone().unwrap_or_default();
                        let prompt = self.task_calls.remove(&id);
                        // A background agent's work goes on after its launch's result: it is
                        // folded when its report arrives (`fold_reported_agent`).
                        if let Some(prompt) = prompt.filter(|_| !agent.in_background) {
                            self.fold_subagent(
                                agent_id.as_deref(),
                                &prompt,
                                &mut || next_seq(&mut sub),
                                time,
                            );
                        }
                        let seq = next_seq(&mut sub);
                        let is_error = r.is_error == Some(true);
                        let content = screen::screen_tool_output(content_text(r.content));
                        self.push(
                            seq,
                            "tool/result",
                            json!({"role": "tool", "toolCallId": id, "content": content, "isError": is_error}),
                            time,
                        );
                        self.open_calls.remove(&id);
                        self.last_was_answer = false;
                    }
                    // Text beside results (an interruption notice) is the host's.
                    let text = texts.join("\n\n");
                    if !text.is_empty() {
                        let seq = next_seq(&mut sub);
                        let interrupted = screen::is_interruption(&text);
                        self.push(
                            seq,
                            "user/message",
                            json!({"content": text, "source": {"kind": screen::NOTICE}}),
                            time,
                        );
                        if interrupted && self.has_exchange() {
                            let seq = next_seq(&mut sub);
                            self.end_turn(seq, "aborted", after);
                        }
                    }
                    return;
                }
                let mut text = texts.join("\n\n");
                if text.is_empty() {
                    return;
                }
                // `/command words`: the words are the person's request.
                if !is_meta && !is_summary {
                    if let Some(typed) = screen::typed_command(&text) {
                        text = typed;
                    }
                }
                let kind = screen::classify(&text, is_meta, is_summary);
                if kind == screen::HUMAN && self.has_exchange() {
                    let reason = if self.open_calls.is_empty() {
                        "completed"
                    } else {
                        "aborted"
                    };
                    self.end_turn(base, reason, line_start);
                }
                self.flush_message();
                let seq = next_seq(&mut sub);
                let interrupted = kind == screen::NOTICE && screen::is_interruption(&text);
                let reporting = reporting_agent(kind, &text);
                self.push_user(seq, text, kind, time);
                if let Some(agent) = reporting {
                    self.fold_reported_agent(&agent, &mut || next_seq(&mut sub), time);
                }
                // The person stopped the agent: the turn is over.
                if interrupted && self.has_exchange() {
                    let seq = next_seq(&mut sub);
                    self.end_turn(seq, "aborted", after);
                }
            }
            _ => {}
        }
    }
}

/// The background agent a message of `kind` reports for (`screen::reporting_agent`): a
/// delegate's report, or a `<task-notification>` without a result — an agent stopped
/// (`killed`), whose work up to the stop folds in there; a background command's id names no
/// agent transcript, so it folds nothing.
fn reporting_agent(kind: &str, text: &str) -> Option<String> {
    (kind == screen::DELEGATE || kind == screen::COMMAND)
        .then(|| screen::reporting_agent(text).map(str::to_owned))
        .flatten()
}

fn header_of(path: &Path, facts: &SessionFacts) -> Option<Header> {
    let stem = path.file_stem()?.to_string_lossy().into_owned();
    // A file with no conversation line yet has no header.
    facts.session_id.as_ref()?;
    Some(crate::source::lines::header(
        crate::source::Harness::ClaudeCode,
        &stem,
        facts.cwd.clone(),
        facts.first_time,
        facts.version.clone(),
    ))
}

impl Step for ClaudeReader {
    fn outbox(&mut self) -> &mut Outbox {
        &mut self.out
    }
    fn outbox_ref(&self) -> &Outbox {
        &self.out
    }
    fn step(&mut self) -> Result<(), ReadError> {
        ClaudeReader::step(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::reader::LogItem;
    use crate::source::EventSource;
    use crate::turn::{CompletedTurn, TurnAssembler};
    use std::io::Write;

    const SID: &str = "0b0b0b0b-0000-4000-8000-000000000001";

    #[test]
    fn a_first_line_cache_forgets_files_gone_and_never_passes_its_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kept = dir.path().join("kept.jsonl");
        std::fs::write(&kept, b"{}\n").expect("write");
        let mut cache: HashMap<PathBuf, u32> = HashMap::new();
        cache.insert(kept.clone(), 0);
        for n in 1..CACHED_FILES_MAX {
            cache.insert(dir.path().join(format!("swept-{n}.jsonl")), 0);
        }
        bound_cache(&mut cache, |p| p);
        // The swept transcripts' entries go; the one still on disk stays.
        assert_eq!(cache.keys().collect::<Vec<_>>(), vec![&kept]);
        // Full of files that all still exist: it starts over rather than grow.
        let mut full: HashMap<PathBuf, u32> = (0..CACHED_FILES_MAX)
            .map(|n| (kept.join(n.to_string()), 0))
            .collect();
        full.insert(kept.clone(), 0);
        let before = full.len();
        bound_cache(&mut full, |p| p);
        assert!(full.len() < before);
        assert!(full.len() < CACHED_FILES_MAX);
    }

    fn line(uuid: &str, parent: Option<&str>, kind: &str, rest: Value) -> String {
        let mut v = json!({
            "type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": SID,
            "cwd": "/w", "version": "2.0.1", "timestamp": "2026-01-01T00:00:00.000Z",
            "isSidechain": false,
        });
        if let (Value::Object(o), Value::Object(r)) = (&mut v, rest) {
            o.extend(r);
        }
        v.to_string() + "\n"
    }
    fn prompt(uuid: &str, parent: Option<&str>, text: &str) -> String {
        line(
            uuid,
            parent,
            "user",
            json!({"message": {"role": "user", "content": text}}),
        )
    }
    fn answer(uuid: &str, parent: &str, id: &str, text: &str, stop: Option<&str>) -> String {
        line(
            uuid,
            Some(parent),
            "assistant",
            json!({"message": {"id": id, "role": "assistant", "content": [{"type": "text", "text": text}], "stop_reason": stop}}),
        )
    }
    fn call(uuid: &str, parent: &str, id: &str, call: &str) -> String {
        line(
            uuid,
            Some(parent),
            "assistant",
            json!({"message": {"id": id, "role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "Bash", "input": {"command": "ls"}}]}}),
        )
    }
    fn result(uuid: &str, parent: &str, call: &str, out: &str) -> String {
        line(
            uuid,
            Some(parent),
            "user",
            json!({"message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": out}]}, "toolUseResult": {"stdout": out}}),
        )
    }
    fn duration(uuid: &str, parent: &str) -> String {
        line(
            uuid,
            Some(parent),
            "system",
            json!({"subtype": "turn_duration", "durationMs": 5}),
        )
    }

    struct Read {
        header: Option<Header>,
        turns: Vec<CompletedTurn>,
        in_flight: Option<(u64, u64)>,
        error: Option<ReadError>,
        notes: Vec<ReadNote>,
        resume: ResumePoint,
    }

    fn read_text(text: &str, quiet: bool) -> Read {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(format!("{SID}.jsonl"));
        std::fs::File::create(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .expect("write");
        read_path(&path, ResumePoint::default(), quiet)
    }

    fn read_path(path: &Path, from: ResumePoint, quiet: bool) -> Read {
        let mut r = ClaudeReader::open(path, from, ReaderOptions::default(), quiet).expect("open");
        let mut asm = TurnAssembler::starting_at(from.next_seq, 0);
        let mut out = Read {
            header: None,
            turns: Vec::new(),
            in_flight: None,
            error: None,
            notes: Vec::new(),
            resume: ResumePoint::default(),
        };
        let mut last = None;
        loop {
            match r.next_item() {
                Ok(Some(LogItem::Header(h))) => out.header = Some(h),
                Ok(Some(LogItem::Event(e))) => {
                    assert!(last.is_none_or(|l| e.seq > l), "seqs ascend");
                    last = Some(e.seq);
                    out.turns.extend(asm.push(e));
                }
                Ok(None) => break,
                Err(e) => {
                    out.error = Some(e);
                    break;
                }
            }
        }
        out.in_flight = asm.in_flight();
        out.notes = r.notes().to_vec();
        out.resume = r.resume_point();
        out
    }

    fn users(t: &CompletedTurn) -> Vec<(String, String)> {
        t.events
            .iter()
            .filter_map(|e| e.user_message())
            .map(|m| (m.source.kind.clone(), m.text.clone()))
            .collect()
    }

    #[test]
    fn turns_end_at_turn_duration_end_turn_and_the_next_prompt() {
        let log = [
            prompt("u1", None, "list files"),
            call("a1", "u1", "m1", "t1"),
            result("r1", "a1", "t1", "a b"),
            answer("a2", "r1", "m2", "two files", None),
            duration("d1", "a2"),
            prompt("u2", Some("d1"), "thanks"),
            answer("a3", "u2", "m3", "welcome", Some("end_turn")),
            prompt("u3", Some("a3"), "again"),
            answer("a4", "u3", "m4", "sure", None),
            prompt("u4", Some("a4"), "last"),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none());
        let h = r.header.expect("header");
        assert_eq!(h.id, format!("claude-code-{SID}"));
        assert_eq!(
            (h.cwd.as_deref(), h.origin.as_deref()),
            (Some("/w"), Some("2.0.1"))
        );
        assert_eq!(r.turns.len(), 3);
        let t = &r.turns[0];
        assert_eq!(users(t), vec![("user".into(), "list files".into())]);
        let call = t.events.iter().find_map(|e| e.tool_call()).expect("call");
        let res = t
            .events
            .iter()
            .find_map(|e| e.tool_result())
            .expect("result");
        assert_eq!((call.call_id.as_str(), res.call_id.as_str()), ("t1", "t1"));
        assert_eq!(res.content, "a b");
        assert_eq!(users(&r.turns[2]), vec![("user".into(), "again".into())]);
        // "last" is in flight, and the resume point is where it starts.
        assert!(r.in_flight.is_some());
        assert_eq!(r.resume.next_seq >> SEQ_SHIFT, 9);
    }

    #[test]
    fn one_message_per_message_id_and_quiet_end() {
        let log = [
            prompt("u1", None, "hi"),
            line("a1", Some("u1"), "assistant", json!({"message": {"id": "m1", "content": [{"type": "thinking", "thinking": "hmm", "signature": "x"}]}})),
            answer("a2", "a1", "m1", "part one", None),
            answer("a3", "a2", "m1", "part two", None),
        ]
        .concat();
        assert!(read_text(&log, false).turns.is_empty());
        let r = read_text(&log, true);
        assert_eq!(r.turns.len(), 1);
        let msgs: Vec<_> = r.turns[0]
            .events
            .iter()
            .filter_map(|e| e.assistant_message())
            .collect();
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].text, "part one\n\npart two");
        assert_eq!(msgs[0].reasoning, vec!["hmm".to_owned()]);
    }

    #[test]
    fn host_lines_are_screened_and_bookkeeping_skipped() {
        let log = [
            r#"{"type":"summary","summary":"A title","leafUuid":"x"}"#.to_owned() + "\n",
            r#"{"type":"file-history-snapshot","messageId":"m","snapshot":{}}"#.to_owned() + "\n",
            line("c1", None, "user", json!({"isMeta": true, "message": {"content": "Caveat: The messages below were generated by the user while running local commands."}})),
            prompt("c2", Some("c1"), "<command-name>/clear</command-name>"),
            line("s1", Some("c2"), "user", json!({"isCompactSummary": true, "message": {"content": "This session is being continued from a previous conversation."}})),
            prompt("u1", Some("s1"), "real question"),
            line("p1", Some("u1"), "progress", json!({"data": {"type": "hook_progress"}})),
            r#"{"type":"some-future-type","uuid":"zz"}"#.to_owned() + "\n",
            r#"{"not":"claude"}"#.to_owned() + "\n",
            answer("a1", "p1", "m1", "answer", Some("end_turn")),
            prompt("h1", Some("a1"), "Stop hook feedback:\n- run the tests"),
            answer("a2", "h1", "m2", "ran them", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 2);
        let kinds: Vec<String> = users(&r.turns[0]).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            [
                "claude-code-meta",
                "claude-code-command",
                "compact-checkpoint",
                "user"
            ]
        );
        assert_eq!(users(&r.turns[1])[0].0, "claude-code-hook");
    }

    /// Real shapes (Claude Code 2.1.2xx): an API error, a rate limit or an expired login is
    /// written as an assistant line with `isApiErrorMessage`, model `<synthetic>`.
    #[test]
    fn an_api_error_in_the_models_place_is_a_host_notice_not_the_answer() {
        let err = |uuid: &str, parent: &str, text: &str| {
            line(
                uuid,
                Some(parent),
                "assistant",
                json!({"isApiErrorMessage": true, "error": "rate_limit", "apiErrorStatus": 429,
                       "message": {"id": format!("e-{uuid}"), "model": "<synthetic>", "role": "assistant",
                                   "content": [{"type": "text", "text": text}], "stop_reason": "stop_sequence"}}),
            )
        };
        let log = [
            prompt("u1", None, "migrate the schema"),
            call("a1", "u1", "m1", "c1"),
            result("r1", "a1", "c1", "ok"),
            answer("a2", "r1", "m2", "Migrated the users table.", None),
            err(
                "e1",
                "a2",
                "You've hit your session limit · resets 9:50pm (Asia/Saigon)",
            ),
            line(
                "e2",
                Some("e1"),
                "assistant",
                json!({"isApiErrorMessage": true, "message": {"content": []}}),
            ),
            prompt("u2", Some("e2"), "continue"),
            answer(
                "a3",
                "u2",
                "m3",
                "Migrated the orders table too.",
                Some("end_turn"),
            ),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 2);
        let answers: Vec<&str> = r.turns[0]
            .events
            .iter()
            .filter_map(|e| e.assistant_text())
            .filter(|t| !t.is_empty())
            .collect();
        assert_eq!(answers, ["Migrated the users table."]);
        assert_eq!(
            users(&r.turns[0]),
            [
                ("user".into(), "migrate the schema".into()),
                (
                    "claude-code-notice".into(),
                    "You've hit your session limit · resets 9:50pm (Asia/Saigon)".into()
                ),
            ]
        );
    }

    /// Real shapes (Claude Code 2.1: a prompt typed while the agent works is a
    /// `queue-operation` then an `attachment` of type `queued_command`, never a `user`
    /// line; its `prompt` a string or blocks with images; a background agent's
    /// notification arrives the same way with `commandMode: "task-notification"`).
    #[test]
    fn a_prompt_queued_while_the_agent_worked_is_the_persons_inside_the_running_turn() {
        let log = [
            prompt("u1", None, "fix the login bug"),
            call("a1", "u1", "m1", "c1"),
            r#"{"type":"queue-operation","operation":"enqueue","content":"also update the docs"}"#.to_owned() + "\n",
            line("q1", Some("a1"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": "also update the docs", "commandMode": "prompt"}})),
            result("r1", "q1", "c1", "ok"),
            line("q2", Some("r1"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": [{"type": "text", "text": "and this screenshot"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}, {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}, "title": "spec.pdf"}]}})),
            line("q3", Some("q2"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": "<task-notification>\n<task-id>a1b2</task-id>\n<status>completed</status>\n</task-notification>", "commandMode": "task-notification"}})),
            // The host's attachments, and odd shapes: nothing, and no damage.
            line("n1", Some("q3"), "attachment", json!({"attachment": {"type": "nested_memory", "path": "C:\\code\\CLAUDE.md", "content": {"content": "Use pnpm."}}})),
            line("n2", Some("n1"), "attachment", json!({"attachment": {"type": 5, "prompt": {"x": 1}, "commandMode": []}})),
            line("n3", Some("n2"), "attachment", json!({"attachment": "text"})),
            line("n4", Some("n3"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": "  "}})),
            // Hidden from the person's view, or not of human origin: the host's.
            line("n5", Some("n4"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": "hidden", "isMeta": true}})),
            line("n6", Some("n5"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": "from a hook", "origin": {"kind": "hook"}}})),
            line("n7", Some("n6"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": "and the tests too", "origin": {"kind": "human"}, "commandMode": "prompt"}})),
            answer("a2", "n7", "m2", "fixed, docs updated", Some("end_turn")),
            prompt("u2", Some("a2"), "thanks, now the signup page"),
            answer("a3", "u2", "m3", "on it", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 2, "a queued prompt ends no turn");
        assert_eq!(
            users(&r.turns[0]),
            [
                ("user".into(), "fix the login bug".into()),
                ("user".into(), "also update the docs".into()),
                (
                    "user".into(),
                    "and this screenshot\n\n⟦image omitted: image/png, 8 bytes of base64⟧\n\n⟦document omitted: application/pdf, 8 bytes of base64⟧".into()
                ),
                (
                    "claude-code-command".into(),
                    "<task-notification>\n<task-id>a1b2</task-id>\n<status>completed</status>\n</task-notification>".into()
                ),
                ("claude-code-meta".into(), "hidden".into()),
                ("claude-code-meta".into(), "from a hook".into()),
                ("user".into(), "and the tests too".into()),
            ]
        );
        assert_eq!(
            users(&r.turns[1]),
            [("user".into(), "thanks, now the signup page".into())]
        );
        // The call stays answered: the queued prompt between call and result changes nothing.
        assert_eq!(
            r.turns[0]
                .events
                .iter()
                .filter(|e| e.tool_result().is_some())
                .count(),
            1
        );
    }

    /// Another Claude session's message (Claude Desktop's session messaging; shapes as
    /// measured on real transcripts by a public tool's fixtures): when the agent is idle, a
    /// `user` line `Another Claude session sent a message: <cross-session-message from=…
    /// name=…>…</cross-session-message>` (several batched in one line); mid-turn, a queued
    /// prompt holding the bare wrapper, or one with `origin.kind: "peer"`. Another agent's
    /// words: conversation, never the person's.
    #[test]
    fn another_sessions_message_is_an_agents_not_the_persons() {
        let wrapped = "<cross-session-message from=\"local_watch\" name=\"Watchdog\">\nrevert the parser change\n</cross-session-message>";
        let log = [
            prompt("u1", None, "fix the login bug"),
            call("a1", "u1", "m1", "c1"),
            line("q1", Some("a1"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": wrapped, "commandMode": "prompt"}})),
            line("q2", Some("q1"), "attachment", json!({"attachment": {"type": "queued_command", "prompt": "No, stop and revert your change", "origin": {"kind": "peer", "msg_id": "pm1", "name": "helper"}}})),
            result("r1", "q2", "c1", "ok"),
            answer("a2", "r1", "m2", "done", Some("end_turn")),
            prompt("u2", Some("a2"), &format!("Another Claude session sent a message: {wrapped}\nAnother Claude session sent a message: {wrapped}")),
            answer("a3", "u2", "m3", "reverting", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none(), "{:?}", r.error);
        let messages: Vec<_> = r
            .turns
            .iter()
            .flat_map(|t| t.events.iter().filter_map(|e| e.user_message()))
            .collect();
        assert_eq!(messages.len(), 4);
        assert!(crate::injection::is_human_authored(&messages[0].source));
        for m in &messages[1..] {
            assert_eq!(
                (m.source.kind.as_str(), m.source.form.as_deref()),
                ("agent-message", Some("relay")),
                "{}",
                m.text
            );
            assert!(crate::injection::is_conversation(&m.source));
            assert!(!crate::injection::is_human_authored(&m.source));
        }
    }

    /// Agent teams (shapes from a public Claude Code fork's fixtures of Claude Code's
    /// transcript kinds): a teammate's messages delivered as a `teammate_mailbox` attachment
    /// (`messages: [{from, text, timestamp, color}]`, a termination notice among them as JSON)
    /// are a teammate's words inside the running turn; the notice and the `team_context`
    /// attachment are nothing.
    #[test]
    fn a_teammates_mailbox_is_a_teammates_words_inside_the_running_turn() {
        let mailbox = json!({"attachment": {"type": "teammate_mailbox", "messages": [
            {"from": "team-lead", "text": "Take the flaky login test", "timestamp": "2026-01-01T00:00:03Z", "color": "cyan"},
            {"from": "scribe", "text": "{\"type\":\"teammate_terminated\",\"message\":\"scribe has been terminated\"}"},
            {"from": 7, "text": "  "},
            {"text": "no sender"},
            "odd"
        ]}});
        let log = [
            prompt("u1", None, "fix the login bug"),
            line("t1", Some("u1"), "attachment", json!({"attachment": {"type": "team_context", "agentName": "dps1", "teamName": "party"}})),
            call("a1", "t1", "m1", "c1"),
            line("q1", Some("a1"), "attachment", mailbox),
            line("q2", Some("q1"), "attachment", json!({"attachment": {"type": "teammate_mailbox", "messages": [{"from": "x", "text": "{\"type\":\"idle_notification\"}"}]}})),
            line("q3", Some("q2"), "attachment", json!({"attachment": {"type": "teammate_mailbox", "messages": {"from": "x"}}})),
            result("r1", "q3", "c1", "ok"),
            answer("a2", "r1", "m2", "done", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 1, "a mailbox ends no turn");
        assert_eq!(
            users(&r.turns[0]),
            [
                ("user".into(), "fix the login bug".into()),
                (
                    "team-message".into(),
                    "<teammate-message teammate_id=\"team-lead\">\nTake the flaky login test\n</teammate-message>\n\n<teammate-message teammate_id=\"teammate\">\nno sender\n</teammate-message>".into()
                ),
            ]
        );
    }

    #[test]
    fn a_rewound_branch_is_not_read_and_copies_are_read_once() {
        let log = [
            prompt("u1", None, "first try"),
            answer("a1", "u1", "m1", "old answer", Some("end_turn")),
            // The person rewinds to before "first try" and asks again.
            prompt("u2", None, "second try"),
            answer("a2", "u2", "m2", "new answer", Some("end_turn")),
            // A resumed session repeats a line.
            answer("a2", "u2", "m2", "new answer", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        let texts: Vec<String> = r
            .turns
            .iter()
            .flat_map(|t| users(t).into_iter().map(|(_, t)| t))
            .collect();
        // Two roots: "first try" has no chain ancestor, so it is a detached fragment and
        // kept; a sibling edit under a shared parent is abandoned.
        assert_eq!(texts, ["first try", "second try"]);
        let log = [
            prompt("u0", None, "start"),
            answer("a0", "u0", "m0", "ok", Some("end_turn")),
            prompt("u1", Some("a0"), "first try"),
            answer("a1", "u1", "m1", "old answer", Some("end_turn")),
            prompt("u2", Some("a0"), "edited try"),
            answer("a2", "u2", "m2", "new answer", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        let texts: Vec<String> = r
            .turns
            .iter()
            .flat_map(|t| users(t).into_iter().map(|(_, t)| t))
            .collect();
        assert_eq!(texts, ["start", "edited try"]);
        let answers = r
            .turns
            .iter()
            .flat_map(|t| t.events.iter().filter_map(|e| e.assistant_text()))
            .filter(|t| *t == "new answer")
            .count();
        assert_eq!(answers, 1);
    }

    /// Random growth of a transcript's DAG — appends under the leaf, rewinds and edits,
    /// sidechains, copies, compaction boundaries, missing parents that turn up later,
    /// cycles, lines with no uuid or no JSON — read after each append with the first pass
    /// kept (as the daemon does) and from scratch: the same plan every time.
    #[test]
    fn a_kept_first_pass_plans_as_a_fresh_one_after_any_growth() {
        let cap = ReaderOptions::default().max_line_bytes;
        let before = EXTENDED.with(std::cell::Cell::get);
        let mut polls = 0u64;
        for seed in 1..=60u64 {
            // One folder each: transcripts of a folder that start alike are read as copies.
            let dir = tempfile::tempdir().expect("tmp");
            let path = dir.path().join(format!("{SID}.jsonl"));
            let mut file = std::fs::File::create(&path).expect("create");
            let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            let mut next = move |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n.max(1)
            };
            let mut written: Vec<String> = Vec::new();
            let mut missing: Vec<String> = Vec::new();
            let mut last: Option<String> = None;
            let mut fresh = 0u64;
            let mut cache = PlanCache::default();
            for _step in 0..40 {
                let mut text = String::new();
                for _ in 0..=next(5) {
                    fresh += 1;
                    let mut uuid = format!("n{fresh}");
                    let any = |r: u64, w: &Vec<String>| w.get(r as usize).cloned();
                    let under_last = last.clone();
                    let mut parent = under_last.clone();
                    let recent = |r: u64, w: &Vec<String>| {
                        w.len()
                            .checked_sub(1 + r as usize)
                            .and_then(|i| w.get(i).cloned())
                    };
                    let (kind, rest) = match next(100) {
                        0..=24 => (
                            "assistant",
                            json!({"message": {"id": format!("m{fresh}"), "content": [{"type": "text", "text": "a"}]}}),
                        ),
                        25..=34 => ("user", json!({"message": {"content": "a prompt"}})),
                        35..=41 => {
                            // Under one of the last few lines (a leaf under an old off-chain
                            // line: that line joins the chain, its other branches move).
                            parent = recent(next(3), &written);
                            let kind = if next(2) == 0 { "user" } else { "assistant" };
                            (kind, json!({"message": {"content": "a prompt"}}))
                        }
                        42..=49 => (
                            "user",
                            json!({"message": {"content": [{"type": "tool_result", "tool_use_id": "c", "content": "x"}]}}),
                        ),
                        50..=57 => ("system", json!({"subtype": "turn_duration"})),
                        58..=63 => {
                            // A rewind or an edit: a prompt under any earlier node.
                            parent = any(next(written.len() as u64 + 1), &written);
                            ("user", json!({"message": {"content": "edited"}}))
                        }
                        64..=71 => {
                            parent = match next(4) {
                                0 | 1 => under_last.clone(),
                                2 => recent(next(3), &written),
                                _ => any(next(written.len() as u64 + 1), &written),
                            };
                            let kind = if next(3) == 0 { "assistant" } else { "user" };
                            (
                                kind,
                                json!({"isSidechain": true, "message": {"content": "side"}}),
                            )
                        }
                        72..=75 => {
                            // A parent not written (yet).
                            let m = format!("x{fresh}");
                            missing.push(m.clone());
                            parent = Some(m);
                            ("assistant", json!({"message": {"content": "orphan"}}))
                        }
                        76..=79 if !missing.is_empty() => {
                            // A missing parent turns up, under any node (a cycle at times).
                            uuid = missing.swap_remove(next(missing.len() as u64) as usize);
                            parent = any(next(written.len() as u64 + 1), &written);
                            ("user", json!({"message": {"content": "late parent"}}))
                        }
                        80..=82 if !written.is_empty() => {
                            // A copy of an earlier uuid.
                            uuid = written[next(written.len() as u64) as usize].clone();
                            ("assistant", json!({"message": {"content": "copy"}}))
                        }
                        83..=85 => {
                            let logical = any(next(written.len() as u64 + 1), &written);
                            parent = None;
                            (
                                "system",
                                json!({"subtype": "compact_boundary", "logicalParentUuid": logical}),
                            )
                        }
                        86..=87 => {
                            parent = Some(uuid.clone()); // its own parent
                            ("assistant", json!({"message": {"content": "self"}}))
                        }
                        88..=91 => {
                            text.push_str(
                                &json!({"type": "progress", "parentUuid": under_last}).to_string(),
                            );
                            text.push('\n');
                            continue;
                        }
                        92 => {
                            text.push_str("{not json\n");
                            continue;
                        }
                        _ => (
                            "user",
                            json!({"isMeta": true, "message": {"content": "meta"}}),
                        ),
                    };
                    text.push_str(&line(&uuid, parent.as_deref(), kind, rest));
                    if !written.contains(&uuid) {
                        written.push(uuid.clone());
                    }
                    last = Some(uuid);
                }
                file.write_all(text.as_bytes()).expect("append");
                let kept = plan(&path, cap, &mut cache).expect("kept plan");
                let whole = plan(&path, cap, &mut PlanCache::default()).expect("fresh plan");
                polls += 1;
                assert_eq!(kept.facts, whole.facts, "seed {seed}");
                assert_eq!(*kept.copied, *whole.copied, "seed {seed}");
                assert!(
                    kept.dag.shared() == whole.dag.shared(),
                    "seed {seed}: the kept plan classifies as a fresh one"
                );
                assert!(kept.dag.shared().states().all(|(_, s)| s != St::New));
            }
        }
        let extended = EXTENDED.with(std::cell::Cell::get) - before;
        assert!(
            extended * 3 > polls,
            "most reads only extend ({extended} of {polls})"
        );
    }

    #[test]
    fn an_old_line_joining_the_chain_moves_the_branches_under_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(format!("{SID}.jsonl"));
        let cap = ReaderOptions::default().max_line_bytes;
        let side = |s: String| {
            let mut v: Value = serde_json::from_str(&s).expect("line");
            v["isSidechain"] = true.into();
            v.to_string() + "\n"
        };
        let first = [
            prompt("u1", None, "one"),
            answer("a1", "u1", "m1", "1", Some("end_turn")),
            duration("d1", "a1"),
            // Off the chain under `d1`: kept while `d1` is.
            side(prompt("x1", Some("d1"), "a side prompt")),
            side(answer("y1", "d1", "m9", "a side answer", None)),
        ]
        .concat();
        std::fs::write(&path, &first).expect("write");
        let mut cache = PlanCache::default();
        let state = |p: &Plan, u: &str| p.dag.get(key(u)).map(|(s, _)| s);
        let p = plan(&path, cap, &mut cache).expect("plan");
        assert_eq!(state(&p, "x1"), Some(St::Kept));
        // The next prompt hangs under `d1`: `d1` joins the chain, and the side prompt under
        // it now leaves the chain at a person's prompt.
        std::fs::write(&path, first + &prompt("u2", Some("d1"), "two")).expect("write");
        let before = EXTENDED.with(std::cell::Cell::get);
        let p = plan(&path, cap, &mut cache).expect("plan");
        assert_eq!(EXTENDED.with(std::cell::Cell::get) - before, 1);
        assert_eq!(state(&p, "d1"), Some(St::Chain));
        assert_eq!(state(&p, "x1"), Some(St::Abandoned));
        assert_eq!(state(&p, "y1"), Some(St::Kept));
        let whole = plan(&path, cap, &mut PlanCache::default()).expect("plan");
        assert!(p.dag.shared() == whole.dag.shared());
    }

    #[test]
    fn a_transcript_growing_under_its_leaf_is_classified_by_what_was_appended() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(format!("{SID}.jsonl"));
        let mut file = std::fs::File::create(&path).expect("create");
        let cap = ReaderOptions::default().max_line_bytes;
        let mut cache = PlanCache::default();
        let mut parent = None::<String>;
        for i in 0..50 {
            let (u, c, r, a, d) = (
                format!("u{i}"),
                format!("c{i}"),
                format!("r{i}"),
                format!("a{i}"),
                format!("d{i}"),
            );
            let turn = [
                prompt(&u, parent.as_deref(), "next"),
                call(&c, &u, &format!("mc{i}"), &format!("t{i}")),
                result(&r, &c, &format!("t{i}"), "ok"),
                answer(&a, &r, &format!("ma{i}"), "done", None),
                duration(&d, &a),
            ]
            .concat();
            file.write_all(turn.as_bytes()).expect("append");
            parent = Some(d);
            let before = EXTENDED.with(std::cell::Cell::get);
            let p = plan(&path, cap, &mut cache).expect("plan");
            // The first read classifies from scratch; each later one only extends.
            assert_eq!(
                EXTENDED.with(std::cell::Cell::get) - before,
                u64::from(i > 0)
            );
            // The `turn_duration` line under the old leaf joined the chain.
            assert!(p
                .dag
                .shared()
                .states()
                .all(|(line, s)| s == St::Chain || line % 5 == 4));
        }
    }

    #[test]
    fn a_rewind_after_an_archive_never_looks_like_a_truncated_log() {
        let before = [
            prompt("u0", None, "start"),
            answer("a0", "u0", "m0", "ok", Some("end_turn")),
            prompt("u1", Some("a0"), "first try"),
            answer("a1", "u1", "m1", "old answer", Some("end_turn")),
        ]
        .concat();
        let first = read_text(&before, false);
        let signed_hi = first.turns.last().expect("turns").end_seq;
        // The person rewinds to after "ok" and types again; no answer yet.
        let after = read_text(&(before + &prompt("u2", Some("a0"), "edited try")), false);
        assert_eq!(after.turns.len(), 1, "the rewound turn is not read again");
        assert!(
            after.resume.next_seq > signed_hi,
            "the log reaches past what was signed"
        );
    }

    #[test]
    fn cycles_and_missing_parents_end_the_walk() {
        let log = [
            prompt("u1", Some("u3"), "a"),
            answer("u2", "u1", "m1", "b", None),
            prompt("u3", Some("u2"), "c"),
            answer("u4", "missing-parent", "m2", "d", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none());
        let n: usize = r.turns.iter().map(|t| t.events.len()).sum();
        assert!(n >= 4, "every line read once");
    }

    #[test]
    fn torn_tail_and_garbled_middle() {
        let good = [
            prompt("u1", None, "hi"),
            answer("a1", "u1", "m1", "yo", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&(good.clone() + r#"{"type":"user","mess"#), false);
        assert_eq!(r.turns.len(), 1);
        assert!(matches!(r.notes[..], [ReadNote::TornTail { .. }]));
        assert!(r.error.is_none());
        let r = read_text(
            &(good + "{not json\n" + &prompt("u2", Some("a1"), "more")),
            false,
        );
        assert_eq!(r.turns.len(), 1, "the turn before the damage is read");
        assert!(matches!(r.error, Some(ReadError::BadLine { .. })));
    }

    #[test]
    fn a_huge_image_becomes_a_marker() {
        let data = "A".repeat(30 << 20);
        let img = line(
            "u1",
            None,
            "user",
            json!({"message": {"content": [{"type": "text", "text": "what is this?"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}]}}),
        );
        drop(data);
        let r = read_text(
            &(img + &answer("a1", "u1", "m1", "a cat", Some("end_turn"))),
            false,
        );
        let (_, text) = users(&r.turns[0]).remove(0);
        assert_eq!(
            text,
            "what is this?\n\n⟦image omitted: image/png, 31457280 bytes of base64⟧"
        );
    }

    /// An attachment's marker is the harness's words, not the person's: a prompt of a
    /// screenshot and two words signs those two words only — not the `[Image #1]`
    /// placeholder, nor the image cache's path Claude Code writes beside it (real shape:
    /// `[Image: source: …/.claude/image-cache/…]` as a text block of its own).
    #[test]
    fn an_attachments_marker_gives_no_terms() {
        let img = line(
            "u1",
            None,
            "user",
            json!({"message": {"content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}, {"type": "text", "text": "[Image #1] tokenizer crash"}, {"type": "text", "text": "[Image: source: /Users/ana/.claude/image-cache/0b1c/1.png]"}, {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}]}}),
        );
        let r = read_text(
            &(img + &answer("a1", "u1", "m1", "a cat", Some("end_turn"))),
            false,
        );
        let redactor = crate::redact::built_in().expect("rules");
        let turn = redactor.redact_all(
            crate::signature::TurnText::of(&r.turns[0]),
            &mut crate::redact::RedactionCounts::default(),
        );
        let sig = crate::signature::sign(&turn, "s", "/w", "2026-01-01T00:00:00Z").into_inner();
        assert_eq!(sig.terms, ["tokenizer", "crash"], "{sig:?}");
        assert!(sig.paths.is_empty(), "{sig:?}");
        let (_, text) = users(&r.turns[0]).remove(0);
        assert!(
            text.contains("⟦image omitted: cached at /Users/ana/.claude/image-cache/0b1c/1.png⟧"),
            "{text}"
        );
    }

    #[test]
    fn a_turn_a_quiet_end_closed_stays_closed_when_the_file_goes_on() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(format!("{SID}.jsonl"));
        let first = [
            prompt("u1", None, "one"),
            answer("a1", "u1", "m1", "done?", None),
        ]
        .concat();
        std::fs::write(&path, &first).expect("write");
        let ends = |quiet: bool| -> Vec<u64> {
            let mut r = ClaudeReader::open(
                &path,
                ResumePoint::default(),
                ReaderOptions::default(),
                quiet,
            )
            .expect("open")
            .with_idle_gap(Some(600_000));
            let mut asm = TurnAssembler::new();
            let mut out = Vec::new();
            while let Some(item) = r.next_item().expect("read") {
                if let LogItem::Event(e) = item {
                    out.extend(asm.push(e).map(|t| t.end_seq));
                }
            }
            out
        };
        let before = ends(true);
        assert_eq!(before.len(), 1);
        // An hour later the agent goes on (a hook's feedback, not a new prompt).
        let later = line(
            "a2",
            Some("a1"),
            "assistant",
            json!({"timestamp": "2026-01-01T01:00:00.000Z", "message": {"id": "m2", "content": [{"type": "text", "text": "more"}], "stop_reason": "end_turn"}}),
        );
        std::fs::write(&path, first + &later).expect("write");
        let after = ends(false);
        assert_eq!(after[0], before[0], "the same turn end");
        assert_eq!(after.len(), 2);
    }

    #[test]
    fn resumes_at_a_turn_end() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(format!("{SID}.jsonl"));
        let first = [
            prompt("u1", None, "one"),
            answer("a1", "u1", "m1", "1", Some("end_turn")),
            prompt("u2", Some("a1"), "two"),
        ]
        .concat();
        std::fs::write(&path, &first).expect("write");
        let r = read_path(&path, ResumePoint::default(), false);
        assert_eq!(r.turns.len(), 1);
        let more = first + &answer("a2", "u2", "m2", "2", Some("end_turn"));
        std::fs::write(&path, &more).expect("write");
        let again = read_path(&path, r.resume, false);
        assert!(again.header.is_none());
        assert_eq!(again.turns.len(), 1);
        assert_eq!(users(&again.turns[0]), vec![("user".into(), "two".into())]);
        let whole = read_path(&path, ResumePoint::default(), false);
        assert_eq!(
            whole.turns[1].end_seq, again.turns[0].end_seq,
            "the same seqs"
        );
    }

    fn task(uuid: &str, parent: &str, id: &str, call: &str, prompt: &str) -> String {
        line(
            uuid,
            Some(parent),
            "assistant",
            json!({"message": {"id": id, "role": "assistant", "content": [{"type": "tool_use", "id": call, "name": "Task", "input": {"description": "d", "prompt": prompt}}]}}),
        )
    }
    fn task_result(uuid: &str, parent: &str, call: &str, agent: Option<&str>) -> String {
        let mut tur =
            json!({"status": "completed", "content": [{"type": "text", "text": "report"}]});
        if let Some(a) = agent {
            tur["agentId"] = a.into();
        }
        line(
            uuid,
            Some(parent),
            "user",
            json!({"message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": "report"}]}, "toolUseResult": tur}),
        )
    }
    /// A subagent transcript: its prompt, one Bash call answered, one left open.
    fn agent_lines(agent: &str, prompt_text: &str) -> String {
        let side = |s: String| {
            let mut v: Value = serde_json::from_str(&s).expect("line");
            v["isSidechain"] = true.into();
            v["agentId"] = agent.into();
            v.to_string() + "\n"
        };
        [
            side(prompt("s1", None, prompt_text)),
            side(call("s2", "s1", "ms1", "sc1")),
            side(result("s3", "s2", "sc1", "found it")),
            side(call("s4", "s3", "ms2", "sc2")),
        ]
        .concat()
    }
    fn call_ids(r: &Read) -> Vec<String> {
        r.turns
            .iter()
            .flat_map(|t| t.events.iter().filter_map(|e| e.tool_call()))
            .map(|c| c.call_id.clone())
            .collect()
    }

    #[test]
    fn a_subagents_answered_calls_fold_into_its_task_call() {
        let dir = tempfile::tempdir().expect("tmp");
        let session = dir.path().join(format!("{SID}.jsonl"));
        let log = [
            prompt("u1", None, "look around"),
            task("a1", "u1", "m1", "t1", "find the config"),
            task_result("r1", "a1", "t1", Some("ab12cd3")),
            answer("a2", "r1", "m2", "done", Some("end_turn")),
        ]
        .concat();
        std::fs::write(&session, log).expect("write");
        let sub = dir.path().join(SID).join("subagents");
        std::fs::create_dir_all(&sub).expect("dir");
        std::fs::write(
            sub.join("agent-ab12cd3.jsonl"),
            agent_lines("ab12cd3", "find the config"),
        )
        .expect("agent");
        // The summarizer's transcript is never folded, even when a result names it.
        std::fs::write(
            sub.join("agent-acompact-99aa00.jsonl"),
            agent_lines("acompact-99aa00", "summarize"),
        )
        .expect("acompact");
        let r = read_path(&session, ResumePoint::default(), false);
        assert_eq!(r.turns.len(), 1);
        // The answered call is the parent's, before the Task's result; the open one is not.
        assert_eq!(call_ids(&r), ["t1", "agent-ab12cd3/sc1"]);
        let results: Vec<&str> = r.turns[0]
            .events
            .iter()
            .filter_map(|e| e.tool_result())
            .map(|x| x.call_id.as_str())
            .collect();
        assert_eq!(results, ["agent-ab12cd3/sc1", "t1"]);

        // ≤ 2.0: no agentId; the agent file beside the session is found by its prompt.
        std::fs::remove_dir_all(dir.path().join(SID)).expect("rm");
        let log = [
            prompt("u1", None, "look around"),
            task("a1", "u1", "m1", "t1", "find the config"),
            task_result("r1", "a1", "t1", None),
            answer("a2", "r1", "m2", "done", Some("end_turn")),
        ]
        .concat();
        std::fs::write(&session, log).expect("write");
        std::fs::write(
            dir.path().join("agent-0f0f0f0f.jsonl"),
            agent_lines("x", "another prompt"),
        )
        .expect("other agent");
        std::fs::write(
            dir.path().join("agent-1e1e1e1e.jsonl"),
            agent_lines("y", "find the config"),
        )
        .expect("agent");
        let r = read_path(&session, ResumePoint::default(), false);
        assert_eq!(call_ids(&r), ["t1", "agent-1e1e1e1e/sc1"]);
        // A result naming the summarizer folds nothing.
        let log = [
            prompt("u1", None, "look around"),
            task("a1", "u1", "m1", "t1", "summarize"),
            task_result("r1", "a1", "t1", Some("acompact-99aa00")),
            answer("a2", "r1", "m2", "done", Some("end_turn")),
        ]
        .concat();
        std::fs::write(&session, log).expect("write");
        let r = read_path(&session, ResumePoint::default(), false);
        assert_eq!(call_ids(&r), ["t1"]);
    }

    /// A background agent's launch answered at once (2.1: `isAsync`, `async_launched`): the
    /// `t1` call of the assistant line `a1`.
    fn async_launch(agent: &str) -> String {
        line(
            "r1",
            Some("a1"),
            "user",
            json!({"message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "Async agent launched successfully."}]},
                   "toolUseResult": {"isAsync": true, "status": "async_launched", "agentId": agent, "description": "d"}}),
        )
    }

    /// A background agent (2.1: the launch's result says `isAsync`, `status:
    /// "async_launched"`, at once; the agent reports later in a `<task-notification>` whose
    /// `<task-id>` is its id): its work is folded into the turn its report arrives in — all
    /// of it, even when the launch's turn was read before the agent did anything (a followed
    /// transcript) — and once. A background command's notification folds nothing.
    #[test]
    fn a_background_agents_work_folds_in_when_its_report_arrives() {
        let dir = tempfile::tempdir().expect("tmp");
        let session = dir.path().join(format!("{SID}.jsonl"));
        let launch = async_launch("ab12cd3");
        let notice = |uuid: &str, parent: &str, id: &str| {
            line(
                uuid,
                Some(parent),
                "user",
                json!({"message": {"role": "user", "content": format!(
                "<task-notification>\n<task-id>{id}</task-id>\n<status>completed</status>\n<summary>Agent \"d\" finished</summary>\n<result>found it</result>\n</task-notification>")}}),
            )
        };
        let first = [
            prompt("u1", None, "look around"),
            task("a1", "u1", "m1", "t1", "find the config"),
            launch,
            answer("a2", "r1", "m2", "launched", Some("end_turn")),
        ]
        .concat();
        let rest = [
            notice("n0", "a2", "b77"),
            answer("a3", "n0", "m3", "the build passed", Some("end_turn")),
            notice("n1", "a3", "ab12cd3"),
            answer("a4", "n1", "m4", "the agent found it", Some("end_turn")),
            notice("n2", "a4", "ab12cd3"),
            answer("a5", "n2", "m5", "again", Some("end_turn")),
            // 2.1.2xx: a hand-back from the agent instead of a notification.
            line("n3", Some("a5"), "user", json!({"message": {"role": "user", "content": "<agent-message from=\"cd34ef5\">\n[Subagent hand-back] The report follows:\n  done\n</agent-message>"}})),
            answer("a6", "n3", "m6", "both done", Some("end_turn")),
        ]
        .concat();
        let sub = dir.path().join(SID).join("subagents");
        std::fs::create_dir_all(&sub).expect("dir");
        // Followed: the launch's turn is read before the agent wrote anything.
        std::fs::write(&session, &first).expect("write");
        let r = read_path(&session, ResumePoint::default(), false);
        assert_eq!(call_ids(&r), ["t1"]);
        std::fs::write(
            sub.join("agent-ab12cd3.jsonl"),
            agent_lines("ab12cd3", "find the config"),
        )
        .expect("agent");
        std::fs::write(
            sub.join("agent-cd34ef5.jsonl"),
            agent_lines("cd34ef5", "check the docs"),
        )
        .expect("agent");
        std::fs::write(&session, first + &rest).expect("write");
        // Followed on from where the first read stopped (after the launch's turn) …
        let on = read_path(&session, r.resume, false);
        let ids = |turn: &CompletedTurn| -> Vec<String> {
            turn.events
                .iter()
                .filter_map(|e| e.tool_call())
                .map(|c| c.call_id.clone())
                .collect()
        };
        let folded: Vec<Vec<String>> = on.turns.iter().map(ids).collect();
        assert_eq!(
            folded,
            [
                vec![],
                vec!["agent-ab12cd3/sc1".to_owned()],
                vec![],
                vec!["agent-cd34ef5/sc1".to_owned()]
            ],
            "folded with its report, once"
        );
        // … and read whole later: the same turns.
        let r = read_path(&session, ResumePoint::default(), false);
        assert_eq!(r.turns.len(), 5);
        assert_eq!(ids(&r.turns[0]), ["t1"], "nothing folded at the launch");
        assert!(
            ids(&r.turns[1]).is_empty(),
            "a command's notice folds nothing"
        );
        assert_eq!(
            ids(&r.turns[2]),
            ["agent-ab12cd3/sc1"],
            "folded with its report"
        );
        assert!(ids(&r.turns[3]).is_empty(), "and once");
    }

    /// A background agent the person stopped: Claude Code's notification says `killed` and
    /// holds no `<result>` (real shape: `<summary>Agent "…" was stopped by user</summary>`).
    /// Plumbing still, but the agent's work up to the stop folds in there, once.
    #[test]
    fn a_stopped_background_agents_work_folds_in_at_its_stop_notice() {
        let dir = tempfile::tempdir().expect("tmp");
        let session = dir.path().join(format!("{SID}.jsonl"));
        let launch = async_launch("a28e47ea552aa4a31");
        let stopped = line(
            "n1",
            Some("a2"),
            "user",
            json!({"message": {"role": "user", "content": "<task-notification>\n<task-id>a28e47ea552aa4a31</task-id>\n<status>killed</status>\n<summary>Agent \"Map current unread + persistence\" was stopped by user</summary>\n<note>A task-notification fires each time this agent stops</note>\n</task-notification>"}}),
        );
        let log = [
            prompt("u1", None, "map the unread state"),
            task("a1", "u1", "m1", "t1", "map current unread"),
            launch,
            answer("a2", "r1", "m2", "launched", Some("end_turn")),
            stopped,
            answer("a3", "n1", "m3", "stopped it as asked", Some("end_turn")),
        ]
        .concat();
        let sub = dir.path().join(SID).join("subagents");
        std::fs::create_dir_all(&sub).expect("dir");
        std::fs::write(
            sub.join("agent-a28e47ea552aa4a31.jsonl"),
            agent_lines("a28e47ea552aa4a31", "map current unread"),
        )
        .expect("agent");
        std::fs::write(&session, log).expect("write");
        let r = read_path(&session, ResumePoint::default(), false);
        let calls: Vec<Vec<String>> = r
            .turns
            .iter()
            .map(|t| {
                t.events
                    .iter()
                    .filter_map(|e| e.tool_call())
                    .map(|c| c.call_id.clone())
                    .collect()
            })
            .collect();
        assert_eq!(
            calls,
            [
                vec!["t1".to_owned()],
                vec!["agent-a28e47ea552aa4a31/sc1".to_owned()]
            ]
        );
        // The notice is the host's, screened: no person's words in the stop's turn.
        let persons = r.turns[1]
            .events
            .iter()
            .filter_map(|e| e.user_message())
            .filter(|m| m.source.kind == screen::HUMAN)
            .count();
        assert_eq!(persons, 0);
    }

    #[test]
    fn a_resumed_transcript_leaves_the_lines_it_repeats_to_the_first() {
        let dir = tempfile::tempdir().expect("tmp");
        let first = [
            prompt("u1", None, "first question"),
            answer("a1", "u1", "m1", "first answer", Some("end_turn")),
        ]
        .concat();
        let a = dir
            .path()
            .join("0a0a0a0a-0000-4000-8000-000000000001.jsonl");
        let b = dir
            .path()
            .join("0a0a0a0a-0000-4000-8000-000000000002.jsonl");
        std::fs::write(&a, &first).expect("first");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = first.clone()
            + &prompt("u2", Some("a1"), "second question")
            + &answer("a2", "u2", "m2", "second answer", Some("end_turn"));
        std::fs::write(&b, second).expect("second");
        let ra = read_path(&a, ResumePoint::default(), false);
        let rb = read_path(&b, ResumePoint::default(), false);
        let prompts = |r: &Read| -> Vec<String> {
            r.turns
                .iter()
                .flat_map(|t| users(t).into_iter().map(|(_, t)| t))
                .collect()
        };
        assert_eq!(prompts(&ra), ["first question"]);
        assert_eq!(prompts(&rb), ["second question"]);
        // A transcript that merely shares no first line is not touched.
        std::fs::write(&a, prompt("z1", None, "unrelated")).expect("unrelated");
        let rb = read_path(&b, ResumePoint::default(), false);
        assert_eq!(prompts(&rb), ["first question", "second question"]);
    }

    #[test]
    fn a_followed_resumed_transcript_reads_the_one_it_repeats_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let cap = ReaderOptions::default().max_line_bytes;
        let first = [
            prompt("u1", None, "first question"),
            answer("a1", "u1", "m1", "first answer", Some("end_turn")),
        ]
        .concat();
        let a = dir
            .path()
            .join("0a0a0a0a-0000-4000-8000-000000000001.jsonl");
        let b = dir
            .path()
            .join("0a0a0a0a-0000-4000-8000-000000000002.jsonl");
        std::fs::write(&a, &first).expect("first");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut text = first.clone() + &prompt("u2", Some("a1"), "second question");
        std::fs::write(&b, &text).expect("second");
        // The folder settled a while ago (a folder changed within the last second is read
        // again: its mtime may not move on the next change).
        let past = std::time::SystemTime::now() - std::time::Duration::from_secs(10);
        std::fs::File::open(dir.path())
            .and_then(|f| f.set_modified(past))
            .expect("folder mtime");
        let mut cache = PlanCache::default();
        let before = SIBLINGS_READ.with(std::cell::Cell::get);
        let mut parent = "u2".to_owned();
        for i in 0..5 {
            let p = plan(&b, cap, &mut cache).expect("plan");
            assert!(p.copied.contains(&key("a1")) && !p.copied.contains(&key("u2")));
            let whole = plan(&b, cap, &mut PlanCache::default()).expect("plan");
            assert_eq!(*p.copied, *whole.copied);
            let more = answer(&format!("b{i}"), &parent, &format!("mb{i}"), "ok", None);
            parent = format!("b{i}");
            text.push_str(&more);
            std::fs::write(&b, &text).expect("append");
        }
        // The kept plan read `a` once, the fresh plans once each.
        assert_eq!(SIBLINGS_READ.with(std::cell::Cell::get) - before, 1 + 5);
        // `a` grows: read again.
        std::fs::write(&a, first + &prompt("z9", Some("a1"), "more")).expect("grow");
        let p = plan(&b, cap, &mut cache).expect("plan");
        assert!(p.copied.contains(&key("z9")));
    }

    #[test]
    fn a_fork_of_a_compacted_session_leaves_what_it_copied_to_its_parent() {
        let dir = tempfile::tempdir().expect("tmp");
        let parent_id = "0a0a0a0a-0000-4000-8000-000000000001";
        let fork_id = "0a0a0a0a-0000-4000-8000-000000000002";
        // The parent: a turn, a 2.x compaction (a boundary whose chain link is only
        // logical, the summary as a user line), a turn after it.
        let boundary = json!({"type": "system", "subtype": "compact_boundary", "uuid": "b1",
            "parentUuid": null, "logicalParentUuid": "a1", "sessionId": SID, "cwd": "/w",
            "isSidechain": false, "compactMetadata": {"trigger": "auto"}})
        .to_string()
            + "\n";
        let summary = line(
            "s1",
            Some("b1"),
            "user",
            json!({"isCompactSummary": true, "isVisibleInTranscriptOnly": true,
                "message": {"role": "user", "content": "This session is being continued from a previous conversation that ran out of context."}}),
        );
        let after = [
            boundary,
            summary,
            prompt("u2", Some("s1"), "second question"),
            answer("a2", "u2", "m2", "second answer", Some("end_turn")),
        ]
        .concat();
        let parent_text = [
            prompt("u1", None, "first question"),
            answer("a1", "u1", "m1", "first answer", Some("end_turn")),
        ]
        .concat()
            + &after;
        let parent = dir.path().join(format!("{parent_id}.jsonl"));
        std::fs::write(&parent, parent_text.replace(SID, parent_id)).expect("parent");
        // The fork: the parent's chain from its leaf up stops at the boundary, so the
        // copy starts there (uuids kept, the fork's `sessionId`, no `forkedFrom`).
        let fork_text = [
            json!({"type": "mode", "mode": "normal", "sessionId": SID}).to_string() + "\n",
            after,
            prompt("u3", Some("a2"), "fork question"),
            answer("a3", "u3", "m3", "fork answer", Some("end_turn")),
        ]
        .concat();
        let fork = dir.path().join(format!("{fork_id}.jsonl"));
        std::fs::write(&fork, fork_text.replace(SID, fork_id)).expect("fork");
        let texts = |r: &Read| -> Vec<(String, String)> {
            assert!(r.error.is_none(), "{:?}", r.error);
            r.turns.iter().flat_map(users).collect()
        };
        let prompts = |r: &Read| -> Vec<String> {
            let people = texts(r).into_iter().filter(|(k, _)| k == "user");
            people.map(|(_, t)| t).collect()
        };
        let searched = SIBLINGS_SEARCHED.with(std::cell::Cell::get);
        let rp = read_path(&parent, ResumePoint::default(), false);
        assert_eq!(
            SIBLINGS_SEARCHED.with(std::cell::Cell::get),
            searched,
            "a transcript that starts a conversation reads no sibling through"
        );
        assert_eq!(prompts(&rp), ["first question", "second question"]);
        let rf = read_path(&fork, ResumePoint::default(), false);
        assert_eq!(
            texts(&rf),
            [("user".to_owned(), "fork question".to_owned())],
            "the summary and the turn the fork copied are the parent's"
        );
        assert_eq!(
            crate::source::claude_code::fork_parent(&fork).as_deref(),
            Some(parent_id)
        );
        assert_eq!(crate::source::claude_code::fork_parent(&parent), None);
        // A transcript starting past a compaction no sibling holds is read whole.
        std::fs::write(
            &parent,
            prompt("z1", None, "unrelated").replace(SID, parent_id),
        )
        .expect("unrelated");
        let rf = read_path(&fork, ResumePoint::default(), false);
        assert_eq!(prompts(&rf), ["second question", "fork question"]);
        assert_eq!(crate::source::claude_code::fork_parent(&fork), None);
    }

    #[test]
    fn a_sibling_rewritten_within_one_tick_of_the_file_clock_is_read_again() {
        let dir = tempfile::tempdir().expect("tmp");
        let a = dir
            .path()
            .join("0a0a0a0a-0000-4000-8000-000000000001.jsonl");
        std::fs::write(&a, prompt("h1", None, "one")).expect("first");
        let at = std::fs::metadata(&a)
            .and_then(|m| m.modified())
            .expect("mtime");
        let head = |p: &Path| sibling_heads(&[p.to_path_buf()])[0].clone().map(|h| h.uuid);
        assert_eq!(head(&a).as_deref(), Some("h1"));
        // Rewritten within the same tick of the file clock: the mtime is the same.
        std::fs::write(&a, prompt("h2-another", None, "two")).expect("rewrite");
        std::fs::File::options()
            .write(true)
            .open(&a)
            .and_then(|f| f.set_modified(at))
            .expect("the same mtime");
        assert_eq!(head(&a).as_deref(), Some("h2-another"));
    }

    #[test]
    fn another_tools_lines_in_a_transcript_are_skipped() {
        let log = [
            prompt("u1", None, "hello"),
            // A Codex rollout line and a DSH event line in a Claude Code folder's file.
            json!({"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "x", "cwd": "/w"}}).to_string() + "\n",
            json!({"seq": 4, "type": "user/message", "data": {"content": "dsh"}}).to_string() + "\n",
            answer("a1", "u1", "m1", "hi", Some("end_turn")),
        ]
        .concat();
        let r = read_text(&log, false);
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.turns.len(), 1);
        assert_eq!(
            users(&r.turns[0]),
            [("user".to_owned(), "hello".to_owned())]
        );
    }
}

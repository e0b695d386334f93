//! Follow-and-sign, the daemon's main-thread component: every enabled workspace's live
//! session logs (DSH's `--<key>--` directories and the other harnesses' trees), decoded as
//! they grow, each turn signed as its `turn/end` lands (collections lock only, one fsync —
//! a signature never waits on an archive, a sync, a model or the network). It owns the
//! followers, the watch, the saved resume anchors (`daemon-state.json`) and the signing
//! latencies; what the other components must hear (a workspace loaded, a log grew, a turn
//! ended, a moment, an error) it says as [`Event`]s, which the wiring in `daemon/mod.rs`
//! hands on.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Map, Value};

use crate::archive::{self, Reason};
use crate::config::Config;
use crate::identity;
use crate::session::discover::{self, parse_log_file_name};
use crate::session::reader::ReaderOptions;
use crate::session::renumber;
use crate::signature::{self, Signature};
use crate::signer::{self, LedgerCursor};
use crate::source::discovery::{self, LogTree};
use crate::source::{Harness, SourceOptions};
use crate::store::STORE_DIR;

use super::context::{mtime_ms, now_ms, WsCtx};
use super::follow::{self, Follower, SavedFollow};
use super::watch::{self, Watch, WatchFlags};
use super::worker::ArchiveAsk;
use super::{state, Paths};

mod harness_logs;

/// Signing latencies kept for the percentiles.
const LATENCY_SAMPLES: usize = 2048;
/// The state file is written once the daemon has been quiet this long…
const STATE_QUIET: Duration = Duration::from_millis(500);
/// …or at least this often under a steady stream.
const STATE_MAX_AGE: Duration = Duration::from_secs(10);
const DAY_MS: i64 = 86_400_000;
/// How long after a folder's own event it is looked at again. `notify` hands a new folder's
/// create event over before it watches the folder (its watches are added after the read
/// batch), so a log made in between sends nothing and would wait for the next full rescan.
const FOLDER_SETTLE: Duration = Duration::from_millis(500);

/// What the follower tells the other components, in the order it happened.
pub(super) enum Event {
    /// A runtime error: logged, kept for `status`; the daemon goes on.
    Error { what: &'static str, detail: String },
    /// A workspace followed, or its configuration reloaded.
    Loaded { ws_dir: PathBuf, ctx: Arc<WsCtx> },
    /// A workspace no longer followed.
    Removed { ws_dir: PathBuf },
    /// A log first followed was last written at `at_ms` (the idle clock starts there).
    Found { ws_dir: PathBuf, at_ms: i64 },
    /// A followed log grew (the idle and enrichment clocks).
    Appended { ws_dir: PathBuf, at_ms: i64 },
    /// A turn ended, or another harness's answered turn went on growing.
    TurnCompleted { ws_dir: PathBuf },
    /// A session first seen while the daemon runs (a fork's parent, when it names one;
    /// `parent_followed`: that parent is followed here).
    NewSession {
        ws_dir: PathBuf,
        id: String,
        parent: Option<String>,
        parent_followed: bool,
    },
    /// An archive moment of the follower's own (compaction, a sweep, a cold rollout);
    /// `pull_first` / `push_after` when the workspace is linked.
    Archive { ws_dir: PathBuf, ask: ArchiveAsk },
}

struct SessionEntry {
    follower: Follower,
    cursor: LedgerCursor,
    root: String,
    error: Option<String>,
    signed: u64,
    /// A Claude Code transcript near the sweep: the log's length when its unarchived turns
    /// were last counted (counted again only when it grew), and whether its archive was
    /// queued (also for a cold Codex rollout, see `Sessions::check_cold`).
    sweep_checked_len: Option<u64>,
    sweep_queued: bool,
    /// For a DSH log followed from its start: which turns the ledger's last line already
    /// covers, told by turn number if the log was renumbered since (a new format
    /// generation, `session::renumber`). `None`: the ledger's last seq decides.
    covered: Option<renumber::Covered>,
}

impl SessionEntry {
    /// A session just followed: no error, nothing signed or swept yet.
    fn new(follower: Follower, cursor: LedgerCursor, root: String) -> SessionEntry {
        SessionEntry {
            follower,
            cursor,
            root,
            error: None,
            signed: 0,
            sweep_checked_len: None,
            sweep_queued: false,
            covered: None,
        }
    }
}

/// Another harness's log the daemon has seen: the workspace entry that follows it, or why
/// it is not followed (and its length then, so an unchanged log is not read again).
struct HarnessLog {
    harness: Harness,
    ws_dir: Option<PathBuf>,
    not_followed: Option<String>,
    len: Option<u64>,
}

struct WsEntry {
    /// The workspace from the sessions' headers (`cwd`), once a header was read.
    workspace: Option<PathBuf>,
    ctx: Option<Arc<WsCtx>>,
    /// Why the workspace is not followed (not enabled, or its config refused).
    not_followed: Option<String>,
    sessions: BTreeMap<PathBuf, SessionEntry>,
    /// Logs of other harnesses that vanished (deleted by their tool's sweep, or by hand)
    /// with turns no chapter covers: what was lost, never a corruption.
    vanished: Vec<Value>,
}

impl WsEntry {
    fn new() -> WsEntry {
        WsEntry {
            workspace: None,
            ctx: None,
            not_followed: None,
            sessions: BTreeMap::new(),
            vanished: Vec::new(),
        }
    }
}

/// The follow-and-sign component (see the module's note).
pub(super) struct Sessions {
    paths: Paths,
    env: BTreeMap<String, String>,
    config: Config,
    workspaces: BTreeMap<PathBuf, WsEntry>,
    saved: BTreeMap<String, SavedFollow>,
    state_dirty: bool,
    state_changed: Instant,
    state_written: Instant,
    latencies: VecDeque<f64>,
    signed_total: u64,
    last_latency_ms: Option<f64>,
    watch: Watch,
    flags: Arc<WatchFlags>,
    initial_scan_done: bool,
    /// When the daemon started (wall clock, before its socket answered).
    started_wall: SystemTime,
    last_rescan: Instant,
    /// Logs that are a FIFO, a device or a socket: never opened for reading, said once.
    skipped_logs: BTreeSet<PathBuf>,
    /// Other harnesses' trees that are followed (each on unless its config switch is off).
    harness_trees: Vec<LogTree>,
    /// Every other-harness log seen, by path.
    harness_logs: BTreeMap<PathBuf, HarnessLog>,
    /// After how many days each harness that sweeps its logs deletes one (Claude Code's
    /// `cleanupPeriodDays`), read at each full scan and when its settings change.
    sweep_days: BTreeMap<Harness, u64>,
    /// When logs not followed were last looked at again (at most every `daemonRescanMs`,
    /// also when polling every `daemonPollMs`).
    harness_retry: Instant,
    /// Folders an event named, each looked at again once at the time given
    /// ([`FOLDER_SETTLE`] after the event).
    settling: BTreeMap<PathBuf, Instant>,
    /// What the other components have not heard yet (see [`Event`]).
    events: Vec<Event>,
}

/// Where a path under `sessions/` points: its workspace dir, session dir, and file name.
fn locate(sessions: &Path, path: &Path) -> Option<(PathBuf, Option<PathBuf>, Option<String>)> {
    let rel = path.strip_prefix(sessions).ok()?;
    let mut parts = rel.components().map(|c| c.as_os_str().to_owned());
    let ws = sessions.join(parts.next()?);
    let Some(session) = parts.next() else {
        return Some((ws, None, None));
    };
    let session_dir = ws.join(session);
    let file = parts.next().map(|f| f.to_string_lossy().into_owned());
    Some((ws, Some(session_dir), file))
}

fn percentile(samples: &VecDeque<f64>, p: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted: Vec<f64> = samples.iter().copied().collect();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

impl Sessions {
    /// Follow under `paths` with the daemon's `config`; `watch` hands changed paths to the
    /// main loop and raises `flags`. Nothing is read before [`Sessions::start`].
    pub fn new(
        paths: Paths,
        env: BTreeMap<String, String>,
        config: Config,
        watch: Watch,
        flags: Arc<WatchFlags>,
        started_wall: SystemTime,
    ) -> Sessions {
        let saved = state::read(&paths.state);
        let harness_trees = discovery::trees(&config);
        let now = Instant::now();
        Sessions {
            paths,
            env,
            config,
            workspaces: BTreeMap::new(),
            saved,
            state_dirty: false,
            state_changed: now,
            state_written: now,
            latencies: VecDeque::new(),
            signed_total: 0,
            last_latency_ms: None,
            watch,
            flags,
            initial_scan_done: false,
            started_wall,
            last_rescan: now,
            skipped_logs: BTreeSet::new(),
            harness_trees,
            harness_logs: BTreeMap::new(),
            sweep_days: BTreeMap::new(),
            harness_retry: now,
            settling: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    /// The first full scan: what is there now is not new (no fork or pull moment).
    pub fn start(&mut self) {
        tracing::info!(pid = std::process::id(), home = %self.paths.dsh_home.display(), watch = ?self.watch.mode, "daemon started");
        if let watch::WatchMode::Polling { reason } = &self.watch.mode {
            let reason = reason.clone();
            self.error("watch", reason);
        }
        self.full_scan();
        self.initial_scan_done = true;
    }

    /// Whether a log first seen now is a new session (a pull or fork moment): anything
    /// after the first scan, and in the first scan a session `path` (its directory or log)
    /// made after the daemon started — the socket answers before that scan ends, so an agent
    /// started then would otherwise count as one that was already there. A filesystem
    /// that keeps no creation time leaves such a session as found.
    fn first_seen_is_new(&self, path: &Path) -> bool {
        self.initial_scan_done
            || std::fs::metadata(path)
                .and_then(|m| m.created())
                .is_ok_and(|born| born >= self.started_wall)
    }

    /// What happened since the last call, in order.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    fn error(&mut self, what: &'static str, detail: String) {
        self.events.push(Event::Error { what, detail });
    }

    fn rescan_every(&self) -> Duration {
        if self.watch.is_polling() {
            Duration::from_millis(self.config.daemon_poll_ms)
        } else {
            Duration::from_millis(self.config.daemon_rescan_ms)
        }
    }

    /// After the main loop's messages: a full scan when one is due (or the watch asked
    /// for one), else each changed path.
    pub fn catch_up(&mut self, changed: &mut BTreeSet<PathBuf>) {
        if self.flags.limit_hit.swap(false, Ordering::SeqCst) && !self.watch.is_polling() {
            let message = watch::limit_message("a watch for a new directory could not be added");
            self.watch.fall_back(message.clone());
            self.error("watch", message);
            self.flags.rescan.store(true, Ordering::SeqCst);
        }
        let now = Instant::now();
        for path in changed.iter().filter(|p| p.is_dir()) {
            self.settling
                .entry(path.clone())
                .or_insert(now + FOLDER_SETTLE);
        }
        if self.flags.rescan.swap(false, Ordering::SeqCst)
            || self.last_rescan.elapsed() >= self.rescan_every()
        {
            changed.clear();
            self.full_scan();
        } else {
            for path in std::mem::take(changed) {
                self.on_path(&path);
            }
        }
        let due: Vec<PathBuf> = self
            .settling
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(path, _)| path.clone())
            .collect();
        for path in due {
            self.settling.remove(&path);
            if path.is_dir() {
                self.on_path(&path);
            }
        }
    }

    /// How long the main loop may sleep for the follower: the next rescan, or the state
    /// file's quiet moment.
    pub fn next_wake(&self) -> Duration {
        let mut wake = self
            .rescan_every()
            .saturating_sub(self.last_rescan.elapsed());
        if self.state_dirty {
            wake = wake.min(STATE_QUIET.saturating_sub(self.state_changed.elapsed()));
        }
        if let Some(at) = self.settling.values().min() {
            wake = wake.min(at.saturating_duration_since(Instant::now()));
        }
        wake
    }

    /// Save the anchors when the daemon has been quiet long enough, or they are old.
    pub fn save_state_when_due(&mut self) {
        let quiet = self.state_changed.elapsed() >= STATE_QUIET;
        if self.state_dirty && (quiet || self.state_written.elapsed() >= STATE_MAX_AGE) {
            self.write_state();
        }
    }

    /// The idle moment of `ws_dir`: other harnesses' logs gone quiet end their answered
    /// turns first (signed here, then archived).
    pub fn poll_quiet(&mut self, ws_dir: &Path) {
        let quiet: Vec<PathBuf> = self
            .workspaces
            .get(ws_dir)
            .map(|w| {
                w.sessions
                    .iter()
                    .filter(|(_, s)| {
                        s.follower.harness() != Harness::Dsh && s.follower.in_flight().is_some()
                    })
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        for key in quiet {
            self.poll_session_with(ws_dir, &key, true);
        }
    }

    fn queue_archive(
        &mut self,
        ws_dir: &Path,
        reason: Reason,
        only: Option<String>,
        pull_first: bool,
        push_after: bool,
    ) {
        self.queue_archive_moment(
            ws_dir,
            ArchiveAsk {
                only,
                pull_first,
                push_after,
                ..ArchiveAsk::at(reason)
            },
        );
    }

    fn queue_archive_moment(&mut self, ws_dir: &Path, ask: ArchiveAsk) {
        self.events.push(Event::Archive {
            ws_dir: ws_dir.to_path_buf(),
            ask,
        });
    }

    fn on_path(&mut self, path: &Path) {
        // The tree holding the path, else (a change in the home itself) its home's first.
        let trees = &self.harness_trees;
        if let Some(t) = trees
            .iter()
            .find(|t| path.starts_with(&t.tree))
            .or_else(|| trees.iter().find(|t| path.starts_with(&t.home)))
            .cloned()
        {
            self.on_harness_path(&t, path);
            return;
        }
        if path == self.paths.sessions || !path.starts_with(&self.paths.sessions) {
            if path == self.paths.sessions {
                self.watch.ensure_sessions_watched();
                self.full_scan();
            }
            return;
        }
        let Some((ws_dir, session_dir, file)) = locate(&self.paths.sessions, path) else {
            return;
        };
        let followed = self
            .workspaces
            .get(&ws_dir)
            .is_some_and(|w| w.ctx.is_some());
        match (session_dir, file) {
            (Some(session_dir), Some(file)) if followed => {
                let is_current_log = self
                    .workspaces
                    .get(&ws_dir)
                    .and_then(|w| w.sessions.get(&session_dir))
                    .is_some_and(|s| s.follower.log.log == path);
                if is_current_log {
                    self.poll_session(&ws_dir, &session_dir);
                } else if parse_log_file_name(&file).is_some() {
                    self.scan_session(&ws_dir, &session_dir);
                }
            }
            (Some(session_dir), None) if followed => self.scan_session(&ws_dir, &session_dir),
            _ => self.scan_ws(&ws_dir),
        }
    }

    fn full_scan(&mut self) {
        self.last_rescan = Instant::now();
        self.watch.ensure_sessions_watched();
        let mut dirs = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&self.paths.sessions) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("--") && entry.path().is_dir() {
                    dirs.push(entry.path());
                }
            }
        }
        dirs.sort();
        let gone: Vec<PathBuf> = self
            .workspaces
            .keys()
            .filter(|k| !dirs.contains(k))
            .cloned()
            .collect();
        for dir in gone {
            if self.keep_for_harnesses(&dir) {
                continue;
            }
            if let Some(ws) = self.workspaces.remove(&dir) {
                self.events.push(Event::Removed {
                    ws_dir: dir.clone(),
                });
                if !ws.sessions.is_empty() {
                    self.error(
                        "workspace",
                        format!("{}: the workspace's session directory was deleted; its sessions are no longer followed (nothing archived is touched)", dir.display()),
                    );
                    self.state_dirty = true;
                }
            }
        }
        for dir in dirs {
            self.scan_ws(&dir);
        }
        for t in self.harness_trees.clone() {
            self.read_sweep_days(&t);
        }
        let retry = !self.initial_scan_done
            || self.harness_retry.elapsed() >= Duration::from_millis(self.config.daemon_rescan_ms);
        if retry {
            self.harness_retry = Instant::now();
        }
        for t in self.harness_trees.clone() {
            if !t.tree.is_dir() {
                self.watch.forget_tree(&t.tree);
            }
            self.watch.ensure_tree_watched(&t.home, &t.tree);
            self.scan_harness_tree(&t, retry);
        }
    }

    /// The entry of the workspace at `root` (one with that workspace, or the one keyed by
    /// its DSH session directory, made when absent), loaded when the workspace is enabled.
    fn ws_dir_for(&mut self, root: &Path) -> Result<PathBuf, String> {
        if let Some((dir, _)) = self
            .workspaces
            .iter()
            .find(|(_, w)| w.workspace.as_deref() == Some(root) && w.ctx.is_some())
        {
            return Ok(dir.clone());
        }
        let key = discover::workspace_sessions_dir(&self.paths.dsh_home, &root.to_string_lossy());
        let entry = self
            .workspaces
            .entry(key.clone())
            .or_insert_with(WsEntry::new);
        if entry.workspace.is_none() {
            entry.workspace = Some(root.to_path_buf());
        }
        if entry.workspace.as_deref() != Some(root) {
            return Err(format!(
                "{}: its DSH sessions directory belongs to another workspace",
                root.display()
            ));
        }
        if entry.ctx.is_none() {
            if !root.join(STORE_DIR).is_dir() {
                let why = "not enabled (run `chapters init` there)".to_owned();
                entry.not_followed = Some(why.clone());
                return Err(format!("{}: {why}", root.display()));
            }
            self.load_ws(&key, root)?;
        }
        Ok(key)
    }

    /// Load `workspace`'s config, identity and store into its entry `ws_dir`; a failure is
    /// kept as why it is not followed and said once.
    fn load_ws(&mut self, ws_dir: &Path, workspace: &Path) -> Result<(), String> {
        let loaded = WsCtx::load(workspace, &self.paths.dsh_home, &self.env);
        let entry = self
            .workspaces
            .entry(ws_dir.to_path_buf())
            .or_insert_with(WsEntry::new);
        match loaded {
            Ok(ctx) => {
                let ctx = Arc::new(ctx);
                entry.ctx = Some(Arc::clone(&ctx));
                entry.not_followed = None;
                self.events.push(Event::Loaded {
                    ws_dir: ws_dir.to_path_buf(),
                    ctx,
                });
                tracing::info!(workspace = %workspace.display(), "following a workspace");
                Ok(())
            }
            Err(e) => {
                let message = format!("{}: {e}", workspace.display());
                if entry.not_followed.as_deref() != Some(message.as_str()) {
                    entry.not_followed = Some(message.clone());
                    self.error("workspace", message.clone());
                }
                Err(message)
            }
        }
    }

    /// Find the workspace of a `--<key>--` directory, decide whether it is followed, and
    /// scan its sessions.
    fn scan_ws(&mut self, ws_dir: &Path) {
        let session_dirs = match list_dirs(ws_dir) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if self.keep_for_harnesses(ws_dir) {
                    return;
                }
                if let Some(ws) = self.workspaces.remove(ws_dir) {
                    self.events.push(Event::Removed {
                        ws_dir: ws_dir.to_path_buf(),
                    });
                    if !ws.sessions.is_empty() {
                        self.error(
                            "workspace",
                            format!(
                                "{}: deleted; its sessions are no longer followed",
                                ws_dir.display()
                            ),
                        );
                    }
                }
                return;
            }
            Err(e) => {
                self.error(
                    "workspace",
                    format!("cannot list {}: {e}", ws_dir.display()),
                );
                return;
            }
        };
        let entry = self
            .workspaces
            .entry(ws_dir.to_path_buf())
            .or_insert_with(WsEntry::new);
        if entry.workspace.is_none() {
            entry.workspace = session_dirs
                .iter()
                .find_map(|d| workspace_of(d, &self.config.path_map));
        }
        let Some(workspace) = entry.workspace.clone() else {
            return;
        };
        if entry.ctx.is_none() {
            if !workspace.join(STORE_DIR).is_dir() {
                entry.not_followed = Some("not enabled (run `chapters init` there)".into());
                return;
            }
            let expected = discover::workspace_sessions_dir(
                &self.paths.dsh_home,
                &workspace.to_string_lossy(),
            );
            // A monorepo's package, or the workspace as another machine names it
            // (`pathMap`): `chapters archive` at the root reads this directory too.
            let belongs = crate::session::cwdkey::normalize_abs(&workspace.to_string_lossy())
                .is_some_and(|root| {
                    let mut roots = vec![root.clone()];
                    roots.extend(crate::session::cwdkey::map_path(
                        &root,
                        &self.config.path_map,
                    ));
                    discover::key_relation(ws_dir, &discover::root_keys(&roots)).is_some()
                });
            if expected != ws_dir && !belongs {
                entry.not_followed = Some(format!(
                    "its sessions' cwd resolves to {}, whose sessions live in {}; `chapters archive` there does not read this directory",
                    workspace.display(),
                    expected.display()
                ));
                return;
            }
            if self.load_ws(ws_dir, &workspace).is_err() {
                return;
            }
        }
        let Some(entry) = self.workspaces.get(ws_dir) else {
            return;
        };
        let known: Vec<PathBuf> = entry
            .sessions
            .iter()
            .filter(|(_, s)| s.follower.harness() == Harness::Dsh)
            .map(|(k, _)| k.clone())
            .collect();
        for gone in known.iter().filter(|k| !session_dirs.contains(k)) {
            self.drop_session(ws_dir, gone, "its session directory was deleted");
        }
        for dir in session_dirs {
            self.scan_session(ws_dir, &dir);
        }
    }

    fn drop_session(&mut self, ws_dir: &Path, session_dir: &Path, why: &str) {
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            if ws.sessions.remove(session_dir).is_some() {
                self.state_dirty = true;
                self.error(
                    "session",
                    format!(
                        "{}: {why}; no longer followed (nothing archived is touched)",
                        session_dir.display()
                    ),
                );
            }
        }
    }

    /// (Re)discover one session's current log; open a follower for a new session or a new
    /// generation, then poll it.
    fn scan_session(&mut self, ws_dir: &Path, session_dir: &Path) {
        let log = match discover::highest_generation(session_dir) {
            Ok(Some(log)) => log,
            Ok(None) => return,
            Err(discover::DiscoverError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                self.drop_session(ws_dir, session_dir, "its session directory was deleted");
                return;
            }
            Err(e) => {
                self.session_error(ws_dir, session_dir, e.to_string());
                return;
            }
        };
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        let Some(ctx) = ws.ctx.clone() else {
            return;
        };
        let current = ws
            .sessions
            .get(session_dir)
            .map(|s| s.follower.log.log.clone());
        if current.as_ref() == Some(&log.log) {
            self.poll_session(ws_dir, session_dir);
            return;
        }
        let is_new = current.is_none();
        let saved = self.saved.get(&*log.log.to_string_lossy()).cloned();
        let options = ReaderOptions {
            max_line_bytes: usize::try_from(ctx.config.max_event_bytes).unwrap_or(usize::MAX),
        };
        let log_path = log.log.clone();
        let (follower, note) = match Follower::open(log, saved.as_ref(), options) {
            Ok(opened) => opened,
            Err(follow::FollowError::NoHeader { .. }) => return,
            // Not a file to follow (the open never blocks on it): skipped, said once.
            Err(follow::FollowError::Read(e)) if e.is_special_file() => {
                if self.skipped_logs.insert(log_path) {
                    self.error("session", format!("{e}; skipped"));
                }
                return;
            }
            Err(e) => {
                self.session_error(ws_dir, session_dir, e.to_string());
                return;
            }
        };
        // Followed from its start: its saved position was refused, or there was none.
        let from_start = saved.is_none() || note.is_some();
        if let Some(note) = note {
            self.error("session", note);
        }
        let header = follower.header.clone();
        let last_write = mtime_ms(&follower.log.log).unwrap_or_else(now_ms);
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        ws.sessions.insert(
            session_dir.to_path_buf(),
            SessionEntry::new(follower, LedgerCursor::default(), header.id.clone()),
        );
        let found = Event::Found {
            ws_dir: ws_dir.to_path_buf(),
            at_ms: last_write,
        };
        // Roots follow parentSession through the workspace's sessions, as the archive does.
        let parents: BTreeMap<String, Option<String>> = ws
            .sessions
            .values()
            .filter(|s| s.follower.harness() == Harness::Dsh)
            .map(|s| {
                (
                    s.follower.header.id.clone(),
                    s.follower.header.parent_session.clone(),
                )
            })
            .collect();
        for s in ws
            .sessions
            .values_mut()
            .filter(|s| s.follower.harness() == Harness::Dsh)
        {
            s.root = archive::root_session(&s.follower.header.id, &parents);
        }
        let known_ids: BTreeSet<String> = parents.keys().cloned().collect();
        self.events.push(found);
        let refreshed = match ws.sessions.get_mut(session_dir) {
            Some(entry) => signer::refresh(&ctx.store, &entry.root, &header.id, &mut entry.cursor)
                .and_then(|()| {
                    if from_start && entry.follower.harness() == Harness::Dsh {
                        let last = signer::last_signed(&ctx.store, &entry.root, &header.id)?;
                        entry.covered = Some(renumber::Covered::new(last, true));
                    }
                    Ok(())
                }),
            None => Ok(()),
        };
        if let Err(e) = refreshed {
            self.session_error(ws_dir, session_dir, e.to_string());
        }
        tracing::info!(session = %header.id, log = %session_dir.display(), "following a session");
        if is_new && self.first_seen_is_new(session_dir) {
            let parent = header.parent_session.clone();
            let parent_followed = parent.as_ref().is_some_and(|p| known_ids.contains(p));
            self.events.push(Event::NewSession {
                ws_dir: ws_dir.to_path_buf(),
                id: header.id.clone(),
                parent,
                parent_followed,
            });
        }
        self.poll_session(ws_dir, session_dir);
    }

    fn session_error(&mut self, ws_dir: &Path, session_dir: &Path, message: String) {
        let repeat = self
            .workspaces
            .get_mut(ws_dir)
            .and_then(|w| w.sessions.get_mut(session_dir))
            .map(|s| {
                let repeat = s.error.as_deref() == Some(message.as_str());
                s.error = Some(message.clone());
                repeat
            })
            .unwrap_or(false);
        if !repeat {
            self.error("session", message);
        }
    }

    /// Decode what a session's log gained and sign every turn it completed.
    fn poll_session(&mut self, ws_dir: &Path, session_dir: &Path) {
        self.poll_session_with(ws_dir, session_dir, false);
    }

    /// [`Sessions::poll_session`]; `force` reads an unchanged log too (another harness's
    /// log gone quiet ends its answered turn).
    fn poll_session_with(&mut self, ws_dir: &Path, session_dir: &Path, force: bool) {
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        let Some(ctx) = ws.ctx.clone() else {
            return;
        };
        let Some(entry) = ws.sessions.get_mut(session_dir) else {
            return;
        };
        // Latency is counted from here, the change noticed: file times are too coarse
        // (a kernel tick, ~4 ms) to time the writer's frame.
        let noticed = Instant::now();
        let session_id = entry.follower.header.id.clone();
        let seed_end = entry.follower.seed_end();
        let signed_hint = entry.cursor.signed_hi();
        let now_str = crate::time::rfc3339_utc(now_ms());
        let paths = signature::Workspace::for_session(
            &ctx.workspace_str,
            entry.follower.header.cwd.as_deref(),
            &ctx.config.path_map,
        );
        let mut sigs: Vec<crate::redact::Redacted<Signature>> = Vec::new();
        // Turns holding `ADD RULE:` lines: their session rules are written at this signing
        // point, before the signature (§7.5).
        let mut marker_turns = Vec::new();
        let marker_prefix = ctx.config.rules_marker_prefix.clone();
        let mut covered = entry.covered.take();
        let polled = entry.follower.poll_with(force, &mut |turn| {
            if turn.end_seq < seed_end {
                return;
            }
            let signed = match covered.as_mut() {
                Some(c) => c.covers(turn.turn, turn.end_seq),
                None => signed_hint.is_some_and(|hi| turn.end_seq <= hi),
            };
            if signed {
                return;
            }
            if !crate::rules::turn_marker_rules(turn, &marker_prefix).is_empty() {
                marker_turns.push(turn.clone());
            }
            let text = ctx.redactor.redact_all(
                signature::TurnText::of(turn),
                &mut crate::redact::RedactionCounts::default(),
            );
            sigs.push(signature::sign_in(
                &text,
                &session_id,
                &paths,
                &now_str,
                ctx.config.artifact_threshold_tokens(),
            ));
        });
        // A session tree a person forgot (`chapters forget`) is never written into again:
        // neither its rules here nor its signatures (`signer::sign`).
        if !marker_turns.is_empty()
            && crate::store::forget::read(ctx.store.dir())
                .is_ok_and(|f| f.root_forgotten(&entry.root))
        {
            marker_turns.clear();
        }
        let after = if covered.as_ref().is_some_and(renumber::Covered::renumbered) {
            signer::After::Turn
        } else {
            signer::After::Seq
        };
        entry.covered = covered;
        let capture = crate::rules::store::SessionCapture {
            store: &ctx.store,
            workspace: &ctx.workspace,
            redactor: &ctx.redactor,
            config: &ctx.config,
            project_key: &ctx.identity.project_key,
            harness: &ctx.harness_id,
            session_id: &session_id,
            root_session: &entry.root,
        };
        let captured: Result<usize, String> = marker_turns.iter().try_fold(0, |n, turn| {
            capture
                .capture_turn(turn)
                .map(|ids| n + ids.len())
                .map_err(|e| e.to_string())
        });
        let signed = if sigs.is_empty() {
            Ok(0)
        } else if let Err(e) = &captured {
            // Unsigned, these turns are signed — and their rules captured — by the next
            // archive's pass 1: a rule is never lost behind a signature.
            tracing::warn!(session = %session_id, error = %e, "session rule capture failed; signing left to the archive");
            Ok(0)
        } else {
            signer::sign(
                &ctx.store,
                &entry.root,
                &session_id,
                &sigs,
                &ctx.redactor,
                &mut entry.cursor,
                after,
            )
        };
        let latency = noticed.elapsed().as_secs_f64() * 1000.0;
        let mut errors = Vec::new();
        if let Err(e) = captured {
            errors.push(format!("{session_id}: session rule capture failed: {e}"));
        }
        match signed {
            Ok(n) if n > 0 => {
                entry.signed += n as u64;
                self.signed_total += n as u64;
                self.last_latency_ms = Some(latency);
                if self.latencies.len() == LATENCY_SAMPLES {
                    self.latencies.pop_front();
                }
                self.latencies.push_back(latency);
                tracing::debug!(session = %session_id, turns = n, latency_ms = latency, "signed");
            }
            Ok(_) => {}
            Err(e) => errors.push(format!("{session_id}: signing failed: {e}")),
        }
        let mut compaction = false;
        let mut gone = false;
        match polled {
            Ok(p) => {
                if let Some(reset) = p.reset {
                    errors.push(reset);
                }
                if p.appended {
                    self.events.push(Event::Appended {
                        ws_dir: ws_dir.to_path_buf(),
                        at_ms: now_ms(),
                    });
                    self.state_dirty = true;
                    self.state_changed = Instant::now();
                }
                // Another harness's turn may end only by going quiet: its in-flight turn
                // waits for the idle moment too.
                let quiet_ends = entry.follower.harness() != Harness::Dsh
                    && p.appended
                    && entry.follower.in_flight().is_some();
                if p.turns_completed > 0 || quiet_ends {
                    self.events.push(Event::TurnCompleted {
                        ws_dir: ws_dir.to_path_buf(),
                    });
                }
                compaction = p.compaction;
                if errors.is_empty() {
                    entry.error = None;
                }
            }
            Err(e) if e.is_gone() => gone = true,
            Err(e) => errors.push(e.to_string()),
        }
        if gone {
            let other = self
                .workspaces
                .get(ws_dir)
                .and_then(|w| w.sessions.get(session_dir))
                .is_some_and(|s| s.follower.harness() != Harness::Dsh);
            if other {
                if !self.log_moved(ws_dir, session_dir) {
                    self.log_vanished(ws_dir, session_dir);
                }
            } else {
                self.drop_session(ws_dir, session_dir, "its log was deleted");
            }
            return;
        }
        for message in errors {
            self.session_error(ws_dir, session_dir, message);
        }
        if compaction {
            self.queue_archive(ws_dir, Reason::Compaction, None, false, false);
        }
    }

    /// Re-read every config (the daemon's and each followed workspace's); a bad one is
    /// refused by name and the old ones are kept, all of them. The number of workspaces
    /// reloaded.
    pub fn reload(&mut self) -> Result<usize, String> {
        let config =
            crate::config::load_home(&self.paths.dsh_home, &self.env).map_err(|e| e.to_string())?;
        let mut fresh = Vec::new();
        for (dir, ws) in &self.workspaces {
            if let Some(old) = &ws.ctx {
                let ctx = WsCtx::load(&old.workspace, &self.paths.dsh_home, &self.env)?;
                fresh.push((dir.clone(), ctx));
            }
        }
        let n = fresh.len();
        if config.daemon_watch != self.config.daemon_watch {
            tracing::info!("daemonWatch changes take effect at the next start");
        }
        self.config = config;
        for (dir, ctx) in fresh {
            if let Some(ws) = self.workspaces.get_mut(&dir) {
                let ctx = Arc::new(ctx);
                ws.ctx = Some(Arc::clone(&ctx));
                self.events.push(Event::Loaded { ws_dir: dir, ctx });
            }
        }
        Ok(n)
    }

    /// The follower's part of `daemon status`; `more` adds the other components' fields
    /// of each workspace entry.
    pub fn status(&self, more: &dyn Fn(&Path, &mut Map<String, Value>)) -> Map<String, Value> {
        let mut workspaces = Vec::new();
        let mut sessions_watched = 0usize;
        for (dir, ws) in &self.workspaces {
            let sessions: Vec<Value> = ws
                .sessions
                .values()
                .map(|s| {
                    json!({
                        "sessionId": s.follower.header.id,
                        "harness": s.follower.harness().name(),
                        "rootSessionId": s.root,
                        "log": s.follower.log.log.to_string_lossy(),
                        "generation": s.follower.log.generation,
                        "offset": s.follower.offset(),
                        "lastSignedSeq": s.cursor.signed_hi(),
                        "signedThisRun": s.signed,
                        "inFlight": s.follower.in_flight(),
                        "error": s.error,
                    })
                })
                .collect();
            sessions_watched += sessions.len();
            let mut entry = Map::new();
            entry.insert("sessionsDir".into(), json!(dir.to_string_lossy()));
            entry.insert(
                "workspace".into(),
                json!(ws.workspace.as_deref().map(Path::to_string_lossy)),
            );
            entry.insert("followed".into(), json!(ws.ctx.is_some()));
            entry.insert("notFollowed".into(), json!(ws.not_followed));
            entry.insert("sessions".into(), json!(sessions));
            entry.insert("vanished".into(), json!(ws.vanished));
            more(dir, &mut entry);
            workspaces.push(Value::Object(entry));
        }
        let (mode, reason) = match &self.watch.mode {
            watch::WatchMode::Notify => ("notify", None),
            watch::WatchMode::Polling { reason } => ("polling", Some(reason.clone())),
        };
        let status = json!({
            "dshHome": self.paths.dsh_home.to_string_lossy(),
            "watch": mode,
            "pollingFallback": self.watch.is_polling(),
            "pollingReason": reason,
            "workspacesFollowed": self.workspaces.values().filter(|w| w.ctx.is_some()).count(),
            "sessionsWatched": sessions_watched,
            "workspaces": workspaces,
            "signing": {
                "turnsSigned": self.signed_total,
                "lastMs": self.last_latency_ms,
                "p50Ms": percentile(&self.latencies, 0.50),
                "p99Ms": percentile(&self.latencies, 0.99),
                "samples": self.latencies.len(),
            },
            "logs": self.paths.logs.to_string_lossy(),
            // One entry a harness: its live tree, and the tree of its archived logs.
            "harnesses": self.harness_trees.iter().filter(|t| !t.cold).map(|t| json!({
                "harness": t.harness.name(),
                "home": t.home.to_string_lossy(),
                "tree": t.tree.to_string_lossy(),
                "archivedTree": self.harness_trees.iter()
                    .find(|c| c.cold && c.harness == t.harness)
                    .map(|c| c.tree.to_string_lossy()),
                "present": discovery::present(&self.harness_trees, t.harness),
                // After how many days the harness deletes a log (Claude Code's
                // `cleanupPeriodDays`); absent for one that never does.
                "sweepDays": self.sweep_days.get(&t.harness),
                "logsSeen": self.harness_logs.values().filter(|l| l.harness == t.harness).count(),
                "logsFollowed": self.harness_logs.values().filter(|l| l.harness == t.harness && l.ws_dir.is_some()).count(),
                // Why the first few logs are not followed (sorted by path).
                "notFollowed": self.harness_logs.iter()
                    .filter(|(_, l)| l.harness == t.harness)
                    .filter_map(|(p, l)| Some(json!({"log": p.to_string_lossy(), "why": l.not_followed.as_ref()?})))
                    .take(20)
                    .collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "sweepMarginDays": harness_logs::SWEEP_MARGIN_DAYS,
        });
        match status {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    /// Save where each log was (also at stop).
    pub fn write_state(&mut self) {
        let mut logs = BTreeMap::new();
        for ws in self.workspaces.values() {
            for s in ws.sessions.values() {
                logs.insert(
                    s.follower.log.log.to_string_lossy().into_owned(),
                    s.follower.saved(),
                );
            }
        }
        // A failure is retried at the next change, not in a loop: the state only saves
        // re-reading.
        if let Err(message) = state::write(&self.paths.state, &logs) {
            self.error("state", message);
        } else {
            self.saved = logs;
        }
        self.state_dirty = false;
        self.state_written = Instant::now();
    }
}

/// Sub-directories of `dir`, sorted.
fn list_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The workspace a session directory's log names: its header's `cwd` — or, for a cwd of
/// another machine (`C:\\Users\\ana\\src\\proj`), its `pathMap` twin here — resolved to the
/// enclosing checkout as the CLI resolves `--workspace` (a monorepo's package resolves to
/// the repository's root).
fn workspace_of(session_dir: &Path, path_map: &BTreeMap<String, String>) -> Option<PathBuf> {
    let log = discover::highest_generation(session_dir).ok()??;
    let header = archive::read_header(&log.log, &Config::defaults()).ok()?;
    let here = crate::session::cwdkey::here_paths(&header.cwd?, path_map);
    identity::workspace_root(Path::new(here.first()?)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_under_sessions_are_located() {
        let s = Path::new("/h/sessions");
        assert_eq!(locate(s, Path::new("/elsewhere")), None);
        assert_eq!(
            locate(s, Path::new("/h/sessions/--w--")),
            Some((PathBuf::from("/h/sessions/--w--"), None, None))
        );
        assert_eq!(
            locate(s, Path::new("/h/sessions/--w--/s1")),
            Some((
                PathBuf::from("/h/sessions/--w--"),
                Some(PathBuf::from("/h/sessions/--w--/s1")),
                None
            ))
        );
        assert_eq!(
            locate(s, Path::new("/h/sessions/--w--/s1/session.v4.jsonl.zstd")),
            Some((
                PathBuf::from("/h/sessions/--w--"),
                Some(PathBuf::from("/h/sessions/--w--/s1")),
                Some("session.v4.jsonl.zstd".into())
            ))
        );
    }

    /// A new folder's event handled while it was empty, then a log made in it with no event
    /// (the moment before `notify` watches a new folder): the log is looked at
    /// [`FOLDER_SETTLE`] later, not at the next full rescan a minute on.
    #[test]
    fn a_log_made_in_a_new_folder_before_its_watch_is_found_once_the_folder_settles() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dsh_home = tmp.path().join("dsh");
        let claude = tmp.path().join("claude");
        std::fs::create_dir_all(dsh_home.join("sessions")).expect("sessions");
        std::fs::create_dir_all(claude.join("projects")).expect("projects");
        let flags = Arc::new(WatchFlags::default());
        let watch = Watch::start(&dsh_home, Arc::clone(&flags), |_| true, false);
        assert_eq!(watch.mode, watch::WatchMode::Notify, "a real watch");
        let mut sessions = Sessions::new(
            Paths::new(&dsh_home),
            BTreeMap::new(),
            Config::defaults(),
            watch,
            flags,
            SystemTime::now(),
        );
        sessions.harness_trees = crate::source::tree_harnesses()[0].trees(&claude);
        sessions.start();
        let folder = claude.join("projects/-tmp-proj");
        std::fs::create_dir(&folder).expect("project folder");
        sessions.catch_up(&mut BTreeSet::from([folder.clone()]));
        let log = folder.join("0b8f3b9e-1c2d-4e5f-8a9b-0c1d2e3f4a5b.jsonl");
        std::fs::write(&log, "{\"type\":\"user\",\"cwd\":\"/tmp/proj\"}\n").expect("log");
        sessions.catch_up(&mut BTreeSet::new());
        assert!(
            sessions.next_wake() <= FOLDER_SETTLE,
            "the loop wakes for it"
        );
        std::thread::sleep(FOLDER_SETTLE + Duration::from_millis(50));
        sessions.catch_up(&mut BTreeSet::new());
        assert!(
            sessions.harness_logs.contains_key(&log),
            "found without its event"
        );
        assert!(sessions.settling.is_empty(), "looked at once");
    }

    #[test]
    fn percentiles() {
        let mut v = VecDeque::new();
        assert_eq!(percentile(&v, 0.99), None);
        v.extend((1..=100).map(f64::from));
        assert_eq!(percentile(&v, 0.50), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        v.clear();
        v.push_back(3.0);
        assert_eq!(percentile(&v, 0.99), Some(3.0));
    }
}

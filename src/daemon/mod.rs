//! The daemon (shell): follow every enabled workspace's live session logs, sign each turn
//! as its `turn/end` frame lands, archive at the right moments and sync in the background.
//!
//! Threads, and why each exists:
//! - **main** (`Runtime::run`): owns all follow state. It decodes appended frames and
//!   signs (collections lock only, one fsync) — nothing else ever runs here, so a
//!   signature never waits on an archive, a sync, a model or the network.
//! - **worker**: archives and syncs, one job at a time, under the store's writer lock
//!   (the same lock `chapters archive` and `chapters sync` take).
//! - **watcher** (`notify`'s own thread): changed paths → a bounded channel (`try_send`;
//!   when full, a rescan flag instead of blocking).
//! - **control**: the Unix socket; requests are forwarded to main and answered from there.
//! - **signals**: SIGTERM/SIGINT stop, SIGHUP reloads (`signal-hook`, no `unsafe`).
//!
//! Its home is `$DSH_HOME/dsh-chapters/`: `daemon.pid` (the lock), `daemon.sock`,
//! `daemon-state.json` (resume anchors), `logs/`. Nothing is written under
//! `$DSH_HOME/sessions`.

pub mod control;
pub mod follow;
pub mod logs;
pub mod pidlock;
pub mod service;
pub mod triggers;
pub mod watch;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::archive::{self, ArchiveContext, Reason};
use crate::config::{self, Config, ConfigError, DaemonWatch};
use crate::credentials;
use crate::identity::{self, Identity};
use crate::pool::{link, sync};
use crate::redact::Redactor;
use crate::session::discover::{self, parse_log_file_name};
use crate::session::reader::ReaderOptions;
use crate::signature::{self, Signature};
use crate::source::{Harness, SourceOptions};
use crate::store::{Store, STORE_DIR};

use crate::signer::{self, LedgerCursor};
use follow::{Follower, SavedFollow};
use triggers::{Due, EnrichClock, NewSession, Timing, WorkspaceClock};
use watch::{Watch, WatchFlags};

pub const HOME_DIR: &str = crate::home::HOME_DIR;
pub const SOCKET_FILE: &str = "daemon.sock";
pub const STATE_FILE: &str = "daemon-state.json";
pub const LOGS_DIR: &str = "logs";

/// Messages queued for the main thread (bounded; file events never block on it).
const QUEUE: usize = 4096;
/// Signing latencies kept for the percentiles.
const LATENCY_SAMPLES: usize = 2048;
/// Runtime errors kept for `status`.
const ERRORS_KEPT: usize = 32;
/// The state file is written once the daemon has been quiet this long…
const STATE_QUIET: Duration = Duration::from_millis(500);
/// …or at least this often under a steady stream.
const STATE_MAX_AGE: Duration = Duration::from_secs(10);
/// How long a stop waits for an archive or sync in progress before leaving it (every
/// store write is atomic, so leaving one mid-way is as safe as a kill).
const STOP_GRACE: Duration = Duration::from_millis(1500);
/// Claude Code deletes a transcript whose file is `cleanupPeriodDays` old (default 30). A
/// transcript this many days short of that, with signed turns no chapter covers yet, is
/// archived at once instead of waiting for an idle moment.
pub const SWEEP_MARGIN_DAYS: u64 = 2;
/// Claude Code's default `cleanupPeriodDays`.
pub const CLAUDE_CLEANUP_DAYS: u64 = 30;
const DAY_MS: i64 = 86_400_000;
/// The cap on a Codex rollout's first line when the daemon reads its `cwd`.
const ROLLOUT_FIRST_LINE_CAP: usize = 8 << 20;

/// The daemon's files under `$DSH_HOME/dsh-chapters/`.
#[derive(Debug, Clone)]
pub struct Paths {
    pub dsh_home: PathBuf,
    pub home: PathBuf,
    pub socket: PathBuf,
    pub state: PathBuf,
    pub logs: PathBuf,
    pub sessions: PathBuf,
}

impl Paths {
    pub fn new(dsh_home: &Path) -> Paths {
        let home = dsh_home.join(HOME_DIR);
        Paths {
            dsh_home: dsh_home.to_path_buf(),
            socket: home.join(SOCKET_FILE),
            state: home.join(STATE_FILE),
            logs: home.join(LOGS_DIR),
            sessions: dsh_home.join("sessions"),
            home,
        }
    }
}

/// Errors that keep the daemon from starting (runtime errors are logged and shown instead).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Lock(#[from] pidlock::PidLockError),
    #[error("cannot listen on the control socket {path}: {source}; another program holds it, or the path is too long for a Unix socket (108 bytes) — set a shorter DSH_HOME")]
    Socket {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the daemon's configuration is refused: {0}")]
    Config(#[from] ConfigError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot install the signal handlers: {0}")]
    Signals(std::io::Error),
}

/// What the CLI resolves for the daemon.
pub struct Options {
    pub dsh_home: PathBuf,
    /// The process's `CHAPTERS_*` environment (a config layer).
    pub env: BTreeMap<String, String>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn mtime_ms(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let d = modified.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// Everything an archive or sync of one workspace needs, resolved once per (re)load.
struct WsCtx {
    workspace: PathBuf,
    workspace_str: String,
    config: Config,
    identity: Identity,
    harness_id: String,
    redactor: Redactor,
    store: Store,
}

impl WsCtx {
    fn load(
        workspace: &Path,
        dsh_home: &Path,
        env: &BTreeMap<String, String>,
    ) -> Result<WsCtx, String> {
        // The one resolution the CLI and `chapters mcp` make too.
        let crate::resolve::Resolved {
            config,
            identity,
            harness_id,
            link_migration,
        } = crate::resolve::workspace(workspace, dsh_home, env).map_err(|e| e.to_string())?;
        // A credential in the link's URL leaves the project tree here too (#13.5).
        if let Some(m) = link_migration {
            tracing::warn!(workspace = %workspace.display(), "{}", m.note());
        }
        let redactor = Redactor::new(&config.redaction_patterns).map_err(|e| e.to_string())?;
        let store = Store::open(workspace).map_err(|e| e.to_string())?;
        Ok(WsCtx {
            workspace: workspace.to_path_buf(),
            workspace_str: workspace.to_string_lossy().into_owned(),
            config,
            identity,
            harness_id,
            redactor,
            store,
        })
    }

    fn timing(&self) -> Timing {
        Timing {
            idle_archive_ms: self.config.idle_archive_ms,
            sync_debounce_ms: self.config.sync_debounce_ms,
        }
    }

    fn linked(&self) -> bool {
        link::read(self.store.dir()).ok().flatten().is_some()
    }
}

#[derive(Debug, Clone)]
enum JobKind {
    Archive {
        reason: Reason,
        /// The moment that asked for it, for `status` (the reason's word, or `sweep`).
        moment: &'static str,
        only: Option<String>,
        pull_first: bool,
        push_after: bool,
    },
    Sync {
        pull_only: bool,
    },
}

struct Job {
    ws_dir: PathBuf,
    ctx: Arc<WsCtx>,
    dsh_home: PathBuf,
    kind: JobKind,
}

struct SyncOutcome {
    pull_only: bool,
    result: Result<(), String>,
}

struct JobDone {
    ws_dir: PathBuf,
    kind: JobKind,
    /// Chapters written and per-session failures, or the archive's error.
    archive: Option<Result<(usize, Vec<String>), String>>,
    syncs: Vec<SyncOutcome>,
}

enum Msg {
    Fs(Vec<PathBuf>),
    Control(control::Incoming),
    Signal(i32),
    Done(Box<JobDone>),
    Enriched(Box<EnrichDone>),
}

/// An idle-time enrichment batch for one workspace, on its own thread: model calls take
/// seconds, and neither signing nor archives ever wait for them.
struct EnrichJob {
    ws_dir: PathBuf,
    ctx: Arc<WsCtx>,
    dsh_home: PathBuf,
}

struct EnrichDone {
    ws_dir: PathBuf,
    result: Result<crate::enrich::run::EnrichReport, String>,
}

/// `catalog`: what the enrich thread's earlier batches of this workspace read of its
/// chapters (see `enrich::run::Catalog`); the redactor is the workspace's, compiled once
/// per configuration load — so a batch costs what it examines, not what the store holds.
fn run_enrich(job: &EnrichJob, catalog: &mut crate::enrich::run::Catalog) -> EnrichDone {
    let ctx = &job.ctx;
    let result = (|| {
        let key =
            credentials::load(&job.dsh_home, crate::enrich::KEY_NAME).map_err(|e| e.to_string())?;
        let ectx = crate::enrich::run::EnrichContext {
            store: &ctx.store,
            workspace: &ctx.workspace,
            config: &ctx.config,
            project_key: &ctx.identity.project_key,
            harness: &ctx.harness_id,
            key: key.as_ref(),
            now_ms: now_ms(),
        };
        crate::enrich::run::run_with(
            &ectx,
            crate::enrich::run::RunOptions {
                limit: None,
                all: false,
                respect_backoff: true,
            },
            catalog,
            Some(&ctx.redactor),
        )
        .map_err(|e| e.to_string())
    })();
    EnrichDone {
        ws_dir: job.ws_dir.clone(),
        result,
    }
}

fn run_sync(job: &Job, pull_only: bool) -> SyncOutcome {
    let result = (|| {
        let ctx = &job.ctx;
        let Some(record) = link::read(ctx.store.dir()).map_err(|e| e.to_string())? else {
            return Ok(());
        };
        let token = match &record.upstream {
            link::Upstream::Network { .. } => {
                credentials::load(&job.dsh_home, &ctx.identity.project_key)
                    .map_err(|e| e.to_string())?
            }
            // Checked again at every sync: a symlink may have moved since `link`.
            link::Upstream::Local { path } => {
                link::check_local_pool(path, &ctx.workspace).map_err(|e| e.to_string())?;
                None
            }
        };
        let now = now_ms();
        let now_str = crate::time::rfc3339_utc(now);
        let sctx = sync::SyncContext {
            workspace: &ctx.workspace,
            store: &ctx.store,
            identity: &ctx.identity,
            harness_id: &ctx.harness_id,
            link: &record,
            token,
            now_secs: now / 1000,
            now: &now_str,
            timeout: Duration::from_millis(ctx.config.sync_timeout_ms),
            mirror_recent_days: ctx.config.mirror_recent_days,
            lock_timeout: Duration::from_millis(ctx.config.writer_lock_timeout_ms),
            rebuild_index: false,
            vocabulary: crate::topics::build::VocabApply::when_applied(
                &ctx.config,
                &ctx.redactor,
                &ctx.harness_id,
                &now_str,
            ),
        };
        sync::sync(&sctx, pull_only)
            .map(drop)
            .map_err(|e| e.to_string())
    })();
    SyncOutcome { pull_only, result }
}

/// Enrichment runs here only with an endpoint, switched on for this machine.
fn enrichment_on(config: &Config) -> bool {
    config.enrichment_endpoint.is_some() && config.enrichment_enabled
}

fn run_job(job: &Job) -> JobDone {
    let mut done = JobDone {
        ws_dir: job.ws_dir.clone(),
        kind: job.kind.clone(),
        archive: None,
        syncs: Vec::new(),
    };
    match &job.kind {
        JobKind::Sync { pull_only } => done.syncs.push(run_sync(job, *pull_only)),
        JobKind::Archive {
            reason,
            only,
            pull_first,
            push_after,
            ..
        } => {
            if *pull_first {
                done.syncs.push(run_sync(job, true));
            }
            let now = crate::time::rfc3339_utc(now_ms());
            let ctx = ArchiveContext {
                workspace: &job.ctx.workspace,
                dsh_home: &job.dsh_home,
                config: &job.ctx.config,
                identity: &job.ctx.identity,
                harness_id: &job.ctx.harness_id,
                now: &now,
            };
            let result = archive::archive_workspace(&ctx, only.as_deref(), *reason, &|_| {});
            done.archive = Some(match result {
                Ok(report) => Ok((
                    report.chapters_written(),
                    report
                        .failures
                        .iter()
                        .map(|f| format!("{}: {}", f.session_dir.display(), f.error))
                        .collect(),
                )),
                Err(e) => Err(e.to_string()),
            });
            if *push_after {
                done.syncs.push(run_sync(job, false));
            }
        }
    }
    done
}

struct SessionEntry {
    follower: Follower,
    cursor: LedgerCursor,
    root: String,
    error: Option<String>,
    signed: u64,
    /// A Claude Code transcript near the sweep: the log's length when its unarchived turns
    /// were last counted (counted again only when it grew), and whether its archive was
    /// queued (also for a cold Codex rollout, see `Runtime::check_cold`).
    sweep_checked_len: Option<u64>,
    sweep_queued: bool,
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
        }
    }
}

/// Another harness's tree the daemon follows: Claude Code's `projects/`, Codex's `sessions/`
/// and `archived_sessions/`.
#[derive(Debug, Clone)]
struct HarnessTree {
    harness: Harness,
    home: PathBuf,
    tree: PathBuf,
    /// Logs no one appends to (Codex's `archived_sessions/`, where `codex archive` moves a
    /// rollout and Codex recompresses it after 7 days): what they hold is archived at once.
    cold: bool,
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
    clock: WorkspaceClock,
    linked: bool,
    archive_busy: bool,
    archive_again: Option<Reason>,
    sync_busy: bool,
    last_archive: Option<Value>,
    last_sync: Option<Value>,
    enrich: EnrichClock,
    enrich_busy: bool,
    last_enrich: Option<Value>,
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
            clock: WorkspaceClock::default(),
            linked: false,
            archive_busy: false,
            archive_again: None,
            sync_busy: false,
            last_archive: None,
            last_sync: None,
            enrich: EnrichClock::default(),
            enrich_busy: false,
            last_enrich: None,
            vanished: Vec::new(),
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct StateFile {
    v: u32,
    /// Log path → where a restart resumes it.
    logs: BTreeMap<String, SavedFollow>,
}

struct Runtime {
    paths: Paths,
    env: BTreeMap<String, String>,
    config: Config,
    started: Instant,
    started_at: String,
    workspaces: BTreeMap<PathBuf, WsEntry>,
    saved: BTreeMap<String, SavedFollow>,
    state_dirty: bool,
    state_changed: Instant,
    state_written: Instant,
    jobs: mpsc::Sender<Job>,
    enrich_jobs: mpsc::Sender<EnrichJob>,
    queued_jobs: Arc<AtomicUsize>,
    latencies: VecDeque<f64>,
    signed_total: u64,
    last_latency_ms: Option<f64>,
    errors: VecDeque<Value>,
    watch: Watch,
    flags: Arc<WatchFlags>,
    last_reload: Option<Value>,
    initial_scan_done: bool,
    last_rescan: Instant,
    stop: bool,
    /// Logs that are a FIFO, a device or a socket: never opened for reading, said once.
    skipped_logs: BTreeSet<PathBuf>,
    /// Other harnesses whose trees are followed (each on unless its config key is off).
    harness_trees: Vec<HarnessTree>,
    /// Every other-harness log seen, by path.
    harness_logs: BTreeMap<PathBuf, HarnessLog>,
    /// Claude Code's `cleanupPeriodDays`, read at each full scan.
    claude_cleanup_days: u64,
    /// When logs not followed were last looked at again (at most every `daemonRescanMs`,
    /// also when polling every `daemonPollMs`).
    harness_retry: Instant,
}

/// The other harnesses' trees `config` turns on, each home found from the environment
/// (`CLAUDE_CONFIG_DIR` / `~/.claude`, `CODEX_HOME` / `~/.codex`).
fn harness_trees(config: &Config) -> Vec<HarnessTree> {
    let mut out = Vec::new();
    if config.claude_code_sessions {
        if let Some(home) = crate::source::claude_code::home_from_env() {
            out.push(HarnessTree {
                harness: Harness::ClaudeCode,
                tree: home.join("projects"),
                home,
                cold: false,
            });
        }
    }
    if config.codex_sessions {
        if let Some(home) = crate::source::codex::home_from_env() {
            out.push(HarnessTree {
                harness: Harness::Codex,
                tree: home.join("sessions"),
                home: home.clone(),
                cold: false,
            });
            out.push(HarnessTree {
                harness: Harness::Codex,
                tree: home.join("archived_sessions"),
                home,
                cold: true,
            });
        }
    }
    out
}

/// Claude Code's `cleanupPeriodDays` from `<home>/settings.json`; the default when the file
/// or the key is absent or not a number.
pub fn claude_cleanup_days(home: &Path) -> u64 {
    std::fs::read(home.join("settings.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("cleanupPeriodDays").and_then(Value::as_u64))
        .unwrap_or(CLAUDE_CLEANUP_DAYS)
}

/// How many path components below its tree a harness's log lies at most: Claude Code's
/// `projects/<key>/<id>.jsonl`, Codex's `sessions/YYYY/MM/DD/rollout-*.jsonl`.
fn max_components(harness: Harness) -> usize {
    match harness {
        Harness::ClaudeCode => 2,
        _ => 4,
    }
}

/// Whether `path` under `tree` is a log of `harness` the daemon follows: a Claude Code
/// session transcript (not a subagent's), a Codex rollout, plain or `.jsonl.zst` (Codex
/// recompresses rollouts older than 7 days; a plain file hides its compressed sibling).
fn is_harness_log(harness: Harness, tree: &Path, path: &Path) -> bool {
    let Ok(rel) = path.strip_prefix(tree) else {
        return false;
    };
    let depth = rel.components().count();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match harness {
        Harness::ClaudeCode => {
            depth == 2 && name.ends_with(".jsonl") && !name.starts_with("agent-")
        }
        Harness::Codex => {
            let compressed = name.ends_with(".jsonl.zst");
            depth <= max_components(harness)
                && name.starts_with("rollout-")
                && (name.ends_with(".jsonl") || compressed)
                // A plain rollout hides its compressed sibling.
                && !(compressed && path.with_extension("").is_file())
        }
        Harness::Dsh => false,
    }
}

/// The logs of `harness` under `dir` (inside `tree`), sorted.
fn collect_harness_logs(harness: Harness, tree: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut found: Vec<(PathBuf, bool)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.path(), e.file_type().ok()?.is_dir())))
        .collect();
    found.sort();
    for (path, is_dir) in found {
        let depth = path
            .strip_prefix(tree)
            .map_or(usize::MAX, |r| r.components().count());
        if is_dir && depth < max_components(harness) {
            collect_harness_logs(harness, tree, &path, out);
        } else if !is_dir && is_harness_log(harness, tree, &path) {
            out.push(path);
        }
    }
}

/// Run the daemon in this process until SIGTERM/SIGINT or a `stop` request.
pub fn run(options: Options) -> Result<(), DaemonError> {
    let paths = Paths::new(&options.dsh_home);
    let config = config::load_home(&paths.dsh_home, &options.env)?;
    // Owner-only whatever the umask: the home 0700, every file in it 0600.
    crate::home::ensure(&paths.dsh_home).map_err(|source| DaemonError::Io {
        path: paths.home.clone(),
        source,
    })?;
    let _lock = pidlock::PidLock::acquire(&paths.home)?;
    // We hold the lock: a socket file left here is a dead daemon's.
    let _ = std::fs::remove_file(&paths.socket);
    let listener = UnixListener::bind(&paths.socket).map_err(|source| DaemonError::Socket {
        path: paths.socket.clone(),
        source,
    })?;
    // The socket is bound with the umask's mode (0777 under a umask of 0); the home's 0700
    // already keeps other users out, and the socket itself is made 0600 before serving.
    crate::home::tighten_file(&paths.socket).map_err(|source| DaemonError::Socket {
        path: paths.socket.clone(),
        source,
    })?;
    let (tx, rx) = mpsc::sync_channel::<Msg>(QUEUE);

    let signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGHUP,
    ])
    .map_err(DaemonError::Signals)?;
    spawn("signals", {
        let tx = tx.clone();
        let mut signals = signals;
        move || {
            for signal in signals.forever() {
                if tx.send(Msg::Signal(signal)).is_err() {
                    return;
                }
            }
        }
    })?;
    let pid = std::process::id();
    spawn("control", {
        let tx = tx.clone();
        move || {
            control::serve(listener, pid, move |incoming| {
                tx.send(Msg::Control(incoming)).is_ok()
            })
        }
    })?;
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>();
    let queued_jobs = Arc::new(AtomicUsize::new(0));
    let (worker_done_tx, worker_done_rx) = mpsc::channel::<()>();
    spawn("worker", {
        let tx = tx.clone();
        let queued = Arc::clone(&queued_jobs);
        move || {
            for job in jobs_rx {
                let done = run_job(&job);
                queued.fetch_sub(1, Ordering::SeqCst);
                if tx.send(Msg::Done(Box::new(done))).is_err() {
                    break;
                }
            }
            let _ = worker_done_tx.send(());
        }
    })?;
    let (enrich_tx, enrich_rx) = mpsc::channel::<EnrichJob>();
    spawn("enrich", {
        let tx = tx.clone();
        move || {
            crate::enrich::run_in_background();
            let mut catalogs = BTreeMap::<PathBuf, crate::enrich::run::Catalog>::new();
            for job in enrich_rx {
                let catalog = catalogs.entry(job.ws_dir.clone()).or_default();
                let done = run_enrich(&job, catalog);
                if tx.send(Msg::Enriched(Box::new(done))).is_err() {
                    break;
                }
            }
        }
    })?;

    let trees = harness_trees(&config);
    let flags = Arc::new(WatchFlags::default());
    let watch = Watch::start(
        &paths.dsh_home,
        Arc::clone(&flags),
        {
            let tx = tx.clone();
            move |paths| tx.try_send(Msg::Fs(paths)).is_ok()
        },
        config.daemon_watch == DaemonWatch::Poll,
    );
    drop(tx);

    let saved = read_state(&paths.state);
    let now = Instant::now();
    let mut rt = Runtime {
        paths,
        env: options.env,
        config,
        started: now,
        started_at: crate::time::rfc3339_utc(now_ms()),
        workspaces: BTreeMap::new(),
        saved,
        state_dirty: false,
        state_changed: now,
        state_written: now,
        jobs: jobs_tx,
        enrich_jobs: enrich_tx,
        queued_jobs,
        latencies: VecDeque::new(),
        signed_total: 0,
        last_latency_ms: None,
        errors: VecDeque::new(),
        watch,
        flags,
        last_reload: None,
        initial_scan_done: false,
        last_rescan: now,
        stop: false,
        skipped_logs: BTreeSet::new(),
        harness_trees: trees,
        harness_logs: BTreeMap::new(),
        claude_cleanup_days: CLAUDE_CLEANUP_DAYS,
        harness_retry: now,
    };
    tracing::info!(pid, home = %rt.paths.dsh_home.display(), watch = ?rt.watch.mode, "daemon started");
    if let watch::WatchMode::Polling { reason } = &rt.watch.mode {
        let reason = reason.clone();
        rt.error("watch", reason);
    }
    rt.full_scan();
    rt.initial_scan_done = true;
    rt.main_loop(&rx);

    // Stopping: persist where each log was, let a job in progress finish briefly.
    rt.write_state();
    let Runtime { jobs, paths, .. } = rt;
    drop(jobs);
    if worker_done_rx.recv_timeout(STOP_GRACE).is_err() {
        tracing::warn!("an archive or sync was still running at stop; it is left mid-way (every store write is atomic)");
    }
    let _ = std::fs::remove_file(&paths.socket);
    tracing::info!("daemon stopped");
    Ok(())
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), DaemonError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|source| DaemonError::Io {
            path: PathBuf::from(format!("<thread {name}>")),
            source,
        })
}

fn read_state(path: &Path) -> BTreeMap<String, SavedFollow> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot read the daemon state; following every log from its start");
            return BTreeMap::new();
        }
    };
    match serde_json::from_slice::<StateFile>(&bytes) {
        Ok(state) if state.v == 1 => state.logs,
        Ok(_) | Err(_) => {
            tracing::warn!(file = %path.display(), "the daemon state does not parse; following every log from its start");
            BTreeMap::new()
        }
    }
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

impl Runtime {
    fn error(&mut self, what: &str, detail: String) {
        // A reader's message may quote a damaged log line's value (a credential where a
        // number belonged): the log file and `daemon status` get it through the rules.
        let detail = crate::redact::echo(&detail);
        tracing::warn!(what, "{detail}");
        if self.errors.len() == ERRORS_KEPT {
            self.errors.pop_front();
        }
        self.errors.push_back(json!({
            "at": crate::time::rfc3339_utc(now_ms()),
            "what": what,
            "detail": detail,
        }));
    }

    fn main_loop(&mut self, rx: &Receiver<Msg>) {
        let mut changed: BTreeSet<PathBuf> = BTreeSet::new();
        while !self.stop {
            let timeout = self.next_wake();
            match rx.recv_timeout(timeout) {
                Ok(msg) => self.handle(msg, &mut changed),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // Take everything already queued, so a burst of events is one pass.
            for _ in 0..QUEUE {
                match rx.try_recv() {
                    Ok(msg) => self.handle(msg, &mut changed),
                    Err(_) => break,
                }
            }
            if self.stop {
                break;
            }
            if self.flags.limit_hit.swap(false, Ordering::SeqCst) && !self.watch.is_polling() {
                let message =
                    watch::limit_message("a watch for a new directory could not be added");
                self.watch.fall_back(message.clone());
                self.error("watch", message);
                self.flags.rescan.store(true, Ordering::SeqCst);
            }
            let rescan_every = if self.watch.is_polling() {
                Duration::from_millis(self.config.daemon_poll_ms)
            } else {
                Duration::from_millis(self.config.daemon_rescan_ms)
            };
            if self.flags.rescan.swap(false, Ordering::SeqCst)
                || self.last_rescan.elapsed() >= rescan_every
            {
                changed.clear();
                self.full_scan();
            } else {
                for path in std::mem::take(&mut changed) {
                    self.on_path(&path);
                }
            }
            self.fire_due();
            let quiet = self.state_changed.elapsed() >= STATE_QUIET;
            if self.state_dirty && (quiet || self.state_written.elapsed() >= STATE_MAX_AGE) {
                self.write_state();
            }
        }
    }

    fn next_wake(&self) -> Duration {
        let rescan_every = if self.watch.is_polling() {
            Duration::from_millis(self.config.daemon_poll_ms)
        } else {
            Duration::from_millis(self.config.daemon_rescan_ms)
        };
        let mut wake = rescan_every.saturating_sub(self.last_rescan.elapsed());
        if self.state_dirty {
            wake = wake.min(STATE_QUIET.saturating_sub(self.state_changed.elapsed()));
        }
        let now = now_ms();
        for ws in self.workspaces.values() {
            let Some(ctx) = &ws.ctx else { continue };
            // A job in progress wakes the loop when it is done; its moments wait for that.
            if ws.archive_busy || ws.sync_busy {
                continue;
            }
            if let Some(at) = ws.clock.next_deadline(ctx.timing(), ws.linked) {
                let ms = u64::try_from(at.saturating_sub(now)).unwrap_or(0);
                wake = wake.min(Duration::from_millis(ms));
            }
        }
        for ws in self.workspaces.values() {
            let Some(ctx) = &ws.ctx else { continue };
            if ws.enrich_busy || !enrichment_on(&ctx.config) {
                continue;
            }
            if let Some(at) = ws
                .enrich
                .due_at(ctx.config.enrichment_trigger, ctx.config.enrichment_idle_ms)
            {
                let ms = u64::try_from(at.saturating_sub(now)).unwrap_or(0);
                wake = wake.min(Duration::from_millis(ms));
            }
        }
        // Never spin: at least one millisecond between passes that found nothing to do.
        wake.max(Duration::from_millis(1))
    }

    fn handle(&mut self, msg: Msg, changed: &mut BTreeSet<PathBuf>) {
        match msg {
            Msg::Fs(paths) => changed.extend(paths),
            Msg::Signal(signal) if signal == signal_hook::consts::SIGHUP => {
                let _ = self.reload();
            }
            Msg::Signal(signal) => {
                tracing::info!(signal, "stop requested by signal");
                self.stop = true;
            }
            Msg::Control(incoming) => {
                let answer = match incoming.request {
                    control::Request::Status => Ok(self.status()),
                    control::Request::SyncNow => Ok(json!({"queued": self.sync_now()})),
                    control::Request::Reload => self.reload(),
                    control::Request::Stop => {
                        tracing::info!("stop requested over the control socket");
                        self.stop = true;
                        Ok(json!({"stopping": true}))
                    }
                };
                let _ = incoming.reply.send(answer);
            }
            Msg::Done(done) => self.job_done(*done),
            Msg::Enriched(done) => self.enrich_done(*done),
        }
    }

    /// A changed path: a log of a followed session is polled at once; anything else
    /// rescans the directory it belongs to.
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
        if !self.paths.home.is_dir() {
            // Our own home was removed (the DSH_HOME deleted): nothing left to serve.
            tracing::warn!(home = %self.paths.home.display(), "the daemon's home is gone; stopping");
            self.stop = true;
            return;
        }
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
        self.claude_cleanup_days = self
            .harness_trees
            .iter()
            .find(|t| t.harness == Harness::ClaudeCode)
            .map_or(CLAUDE_CLEANUP_DAYS, |t| claude_cleanup_days(&t.home));
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

    /// A workspace entry whose DSH session directory is gone but which follows other
    /// harnesses' logs: its DSH sessions are dropped, the entry stays.
    fn keep_for_harnesses(&mut self, dir: &Path) -> bool {
        let Some(ws) = self.workspaces.get(dir) else {
            return false;
        };
        if !ws
            .sessions
            .values()
            .any(|s| s.follower.harness() != Harness::Dsh)
        {
            return false;
        }
        let dsh: Vec<PathBuf> = ws
            .sessions
            .iter()
            .filter(|(_, s)| s.follower.harness() == Harness::Dsh)
            .map(|(k, _)| k.clone())
            .collect();
        for session_dir in dsh {
            self.drop_session(dir, &session_dir, "its session directory was deleted");
        }
        true
    }

    /// A change under another harness's home: its tree (re)created, a directory made in
    /// it (Codex's `YYYY/MM/DD`, whose first rollout may land before the watch on it), a
    /// log written or removed, or Claude Code's settings changed.
    fn on_harness_path(&mut self, t: &HarnessTree, path: &Path) {
        if path == t.home.join("settings.json") && t.harness == Harness::ClaudeCode {
            self.claude_cleanup_days = claude_cleanup_days(&t.home);
            return;
        }
        if path == t.home || path == t.tree {
            if !t.tree.is_dir() {
                self.watch.forget_tree(&t.tree);
            }
            self.watch.ensure_tree_watched(&t.home, &t.tree);
            self.scan_harness_tree(t, false);
            return;
        }
        if !path.starts_with(&t.tree) {
            return;
        }
        if path.is_dir() {
            let mut files = Vec::new();
            collect_harness_logs(t.harness, &t.tree, path, &mut files);
            for f in files {
                self.harness_log(t.harness, &f, false);
            }
        } else if is_harness_log(t.harness, &t.tree, path) {
            self.harness_log(t.harness, path, false);
        }
    }

    /// Every log under one harness's tree; a followed log no longer there is polled (and
    /// so found gone). `retry`: logs not followed are looked at again (a workspace may
    /// have been enabled since).
    fn scan_harness_tree(&mut self, t: &HarnessTree, retry: bool) {
        let mut files = Vec::new();
        collect_harness_logs(t.harness, &t.tree, &t.tree, &mut files);
        let present: BTreeSet<&PathBuf> = files.iter().collect();
        let missing: Vec<(PathBuf, Option<PathBuf>)> = self
            .harness_logs
            .iter()
            .filter(|(p, l)| {
                l.harness == t.harness && p.starts_with(&t.tree) && !present.contains(p)
            })
            .map(|(p, l)| (p.clone(), l.ws_dir.clone()))
            .collect();
        for (path, ws_dir) in missing {
            match ws_dir {
                Some(ws_dir) => self.poll_session(&ws_dir, &path),
                None => {
                    self.harness_logs.remove(&path);
                }
            }
        }
        for f in files {
            self.harness_log(t.harness, &f, retry);
        }
    }

    /// One log of another harness changed or was found: poll it when followed, else find
    /// its workspace (its `cwd`'s checkout) and follow it when that workspace is enabled.
    fn harness_log(&mut self, harness: Harness, path: &Path, retry: bool) {
        let len = std::fs::metadata(path).ok().map(|m| m.len());
        if let Some(known) = self.harness_logs.get(path) {
            match known.ws_dir.clone() {
                Some(ws_dir) => {
                    let followed = self
                        .workspaces
                        .get(&ws_dir)
                        .is_some_and(|w| w.sessions.contains_key(path));
                    if followed {
                        self.poll_session(&ws_dir, path);
                        self.check_sweep(&ws_dir, path);
                        return;
                    }
                }
                None if !retry && known.len == len => return,
                None => {}
            }
        }
        if len.is_none() {
            self.harness_logs.remove(path);
            return;
        }
        match self.resolve_harness_log(harness, path) {
            Ok(ws_dir) => self.add_harness_session(&ws_dir, harness, path, len),
            Err(why) => {
                self.harness_logs.insert(
                    path.to_path_buf(),
                    HarnessLog {
                        harness,
                        ws_dir: None,
                        not_followed: Some(why),
                        len,
                    },
                );
            }
        }
    }

    /// The workspace entry that follows a log of `harness` at `path`: its `cwd` (the first
    /// a line carries) resolved to its checkout's top level, as `chapters archive` there
    /// finds it; or why none does.
    fn resolve_harness_log(&mut self, harness: Harness, path: &Path) -> Result<PathBuf, String> {
        let cwd = match harness {
            Harness::ClaudeCode => crate::source::claude_code::transcript_cwd(path),
            Harness::Codex => crate::source::codex::rollout_facts(path, ROLLOUT_FIRST_LINE_CAP)
                .ok()
                .flatten()
                .and_then(|f| f.cwd),
            Harness::Dsh => None,
        }
        .ok_or_else(|| "no working directory in its lines yet".to_owned())?;
        let root = identity::workspace_root(Path::new(&cwd))
            .map_err(|e| format!("its working directory {cwd} is not here: {e}"))?;
        self.ws_dir_for(&root)
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
                entry.linked = ctx.linked();
                entry.ctx = Some(Arc::new(ctx));
                entry.not_followed = None;
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

    /// Follow a log of another harness in the workspace entry `ws_dir`.
    fn add_harness_session(
        &mut self,
        ws_dir: &Path,
        harness: Harness,
        path: &Path,
        len: Option<u64>,
    ) {
        let Some(ctx) = self.workspaces.get(ws_dir).and_then(|w| w.ctx.clone()) else {
            return;
        };
        let not_followed = |why: String| HarnessLog {
            harness,
            ws_dir: None,
            not_followed: Some(why),
            len,
        };
        let on = match harness {
            Harness::ClaudeCode => ctx.config.claude_code_sessions,
            Harness::Codex => ctx.config.codex_sessions,
            Harness::Dsh => false,
        };
        if !on {
            let key = match harness {
                Harness::ClaudeCode => "claudeCodeSessions",
                _ => "codexSessions",
            };
            self.harness_logs.insert(
                path.to_path_buf(),
                not_followed(format!(
                    "turned off by `{key}: false` in the workspace's config"
                )),
            );
            return;
        }
        let log = discover::SessionLog {
            session_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            session_id: String::new(),
            log: path.to_path_buf(),
            generation: 0,
            compressed: false,
        };
        let saved = self.saved.get(&*path.to_string_lossy()).cloned();
        let options = SourceOptions {
            reader: ReaderOptions {
                max_line_bytes: usize::try_from(ctx.config.max_event_bytes).unwrap_or(usize::MAX),
            },
            quiet_after_ms: Some(ctx.config.idle_archive_ms),
        };
        let (follower, note) = match Follower::open_source(harness, log, saved.as_ref(), options) {
            Ok(opened) => opened,
            Err(follow::FollowError::NoHeader { .. }) => {
                self.harness_logs.insert(
                    path.to_path_buf(),
                    not_followed("no conversation line yet".into()),
                );
                return;
            }
            Err(e) => {
                let message = e.to_string();
                self.harness_logs
                    .insert(path.to_path_buf(), not_followed(message.clone()));
                if e.is_gone() {
                    return;
                }
                // A FIFO, a device or a socket is said once.
                let special = matches!(&e, follow::FollowError::Read(r) if r.is_special_file());
                if !special || self.skipped_logs.insert(path.to_path_buf()) {
                    self.error("session", message);
                }
                return;
            }
        };
        if let Some(note) = note {
            self.error("session", note);
        }
        let header = follower.header.clone();
        let last_write = mtime_ms(path).unwrap_or_else(now_ms);
        // This file holds the session now (a rollout recompressed, materialised plain
        // again, or moved): its other file is no longer followed, and was not lost.
        let elsewhere: Vec<PathBuf> = self
            .workspaces
            .get(ws_dir)
            .filter(|_| harness == Harness::Codex)
            .map(|w| {
                w.sessions
                    .iter()
                    .filter(|(k, s)| k.as_path() != path && s.follower.header.id == header.id)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut moved = !elsewhere.is_empty();
        for other in elsewhere {
            self.forget_log(ws_dir, &other);
        }
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        if harness == Harness::Codex {
            let reported = ws.vanished.len();
            ws.vanished.retain(|v| v["sessionId"] != header.id.as_str());
            moved |= ws.vanished.len() != reported;
        }
        let mut cursor = LedgerCursor::default();
        let refreshed = signer::refresh(&ctx.store, &header.id, &header.id, &mut cursor);
        ws.sessions.insert(
            path.to_path_buf(),
            SessionEntry::new(follower, cursor, header.id.clone()),
        );
        ws.clock.on_append(last_write);
        let linked = ws.linked;
        self.harness_logs.insert(
            path.to_path_buf(),
            HarnessLog {
                harness,
                ws_dir: Some(ws_dir.to_path_buf()),
                not_followed: None,
                len: None,
            },
        );
        if let Err(e) = refreshed {
            self.session_error(ws_dir, path, e.to_string());
        }
        tracing::info!(session = %header.id, harness = harness.name(), log = %path.display(), "following a session");
        // A session that moved to this file is not new: no pull, no fork moment.
        if self.initial_scan_done && !moved {
            // A fork (Claude Code's `--fork-session` or `/branch`, Codex's fork) is the
            // fork moment: its parent's completed turns are archived now.
            let parent = match harness {
                Harness::ClaudeCode => crate::source::claude_code::fork_parent(path),
                Harness::Codex => crate::source::codex::rollout_facts(path, ROLLOUT_FIRST_LINE_CAP)
                    .ok()
                    .flatten()
                    .and_then(|f| f.forked_from),
                Harness::Dsh => None,
            }
            .map(|p| format!("{}{p}", harness.session_prefix()));
            match triggers::on_new_session(parent.as_deref(), &header.id, linked) {
                NewSession::Fork { parent } => {
                    let known = self.workspaces.get(ws_dir).is_some_and(|w| {
                        w.sessions.values().any(|s| s.follower.header.id == parent)
                    });
                    let only = known.then_some(parent);
                    self.queue_archive(ws_dir, Reason::Fork, only, linked, linked);
                }
                NewSession::Pull => {
                    self.queue_sync(ws_dir, true, false);
                }
                NewSession::Nothing => {}
            }
        }
        self.poll_session(ws_dir, path);
        self.check_sweep(ws_dir, path);
        self.check_cold(ws_dir, path);
    }

    /// A Claude Code transcript within [`SWEEP_MARGIN_DAYS`] of its `cleanupPeriodDays`
    /// with signed turns no chapter covers is archived now: Claude Code deletes it soon.
    fn check_sweep(&mut self, ws_dir: &Path, key: &Path) {
        let cleanup_days = self.claude_cleanup_days;
        let Some(entry) = self
            .workspaces
            .get_mut(ws_dir)
            .and_then(|w| w.sessions.get_mut(key))
        else {
            return;
        };
        if entry.follower.harness() != Harness::ClaudeCode || entry.sweep_queued {
            return;
        }
        let Ok(meta) = std::fs::metadata(key) else {
            return;
        };
        if entry.sweep_checked_len == Some(meta.len()) {
            return;
        }
        let Some(mtime) = mtime_ms(key) else {
            return;
        };
        let window_days = cleanup_days.saturating_sub(SWEEP_MARGIN_DAYS);
        let window_ms = i64::try_from(window_days)
            .unwrap_or(i64::MAX / DAY_MS)
            .saturating_mul(DAY_MS);
        if now_ms().saturating_sub(mtime) < window_ms {
            return;
        }
        entry.sweep_checked_len = Some(meta.len());
        tracing::debug!(log = %key.display(), cleanup_days, "a Claude Code transcript nears its sweep");
        self.archive_session_now(ws_dir, key, "sweep");
    }

    /// Archive the session of `key` at once (an idle archive of it, `moment` in `status`)
    /// when it has signed turns no chapter covers; once per followed log.
    fn archive_session_now(&mut self, ws_dir: &Path, key: &Path, moment: &'static str) {
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        let Some(ctx) = ws.ctx.clone() else {
            return;
        };
        let linked = ws.linked;
        let Some(entry) = ws.sessions.get_mut(key) else {
            return;
        };
        if entry.sweep_queued {
            return;
        }
        let id = entry.follower.header.id.clone();
        let waiting = signer::signed_unarchived(&ctx.store, &entry.root, &id).unwrap_or(0);
        if waiting == 0 {
            return;
        }
        entry.sweep_queued = true;
        tracing::info!(session = %id, turns = waiting, moment, "archiving a session's turns no chapter covers now");
        self.queue_archive_moment(ws_dir, Reason::Idle, moment, Some(id), false, linked);
    }

    /// A followed Codex rollout is gone but another file holds it now: Codex recompressed
    /// it (`.jsonl.zst`), materialised it plain again, or moved it to `archived_sessions/`.
    /// That file is followed instead (what it holds and no chapter covers is archived at
    /// once, see [`Runtime::check_cold`]); nothing vanished. False when no file holds it.
    fn log_moved(&mut self, ws_dir: &Path, key: &Path) -> bool {
        let Some(entry) = self
            .workspaces
            .get(ws_dir)
            .and_then(|w| w.sessions.get(key))
        else {
            return false;
        };
        if entry.follower.harness() != Harness::Codex {
            return false;
        }
        let thread = entry
            .follower
            .header
            .id
            .trim_start_matches(Harness::Codex.session_prefix())
            .to_owned();
        let Some(successor) = crate::source::codex::find_rollout(key, &thread) else {
            return false;
        };
        tracing::info!(log = %key.display(), now = %successor.display(), "a rollout moved or was recompressed; following it there");
        self.forget_log(ws_dir, key);
        self.harness_log(Harness::Codex, &successor, false);
        true
    }

    /// Stop following `key` in `ws_dir`, reporting nothing (another file holds its session).
    fn forget_log(&mut self, ws_dir: &Path, key: &Path) {
        self.harness_logs.remove(key);
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            if ws.sessions.remove(key).is_some() {
                self.state_dirty = true;
            }
        }
    }

    /// A Codex rollout no one appends to any more — recompressed (`.jsonl.zst`) or moved
    /// out of `sessions/` (to `archived_sessions/`) — with signed turns no chapter covers
    /// is archived now: no turn end or idle moment will come from it.
    fn check_cold(&mut self, ws_dir: &Path, key: &Path) {
        let live_tree = self
            .harness_trees
            .iter()
            .any(|t| t.harness == Harness::Codex && !t.cold && key.starts_with(&t.tree));
        let compressed = key.extension().is_some_and(|e| e == "zst");
        let codex = self
            .workspaces
            .get(ws_dir)
            .and_then(|w| w.sessions.get(key))
            .is_some_and(|e| e.follower.harness() == Harness::Codex);
        if codex && (compressed || !live_tree) {
            self.archive_session_now(ws_dir, key, "compressed");
        }
    }

    /// A followed log of another harness is gone. Turns no chapter covers went with it:
    /// reported (`status`: "vanished before archived"), never as a corruption.
    fn log_vanished(&mut self, ws_dir: &Path, key: &Path) {
        let at = crate::time::rfc3339_utc(now_ms());
        self.harness_logs.remove(key);
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        let Some(entry) = ws.sessions.remove(key) else {
            return;
        };
        self.state_dirty = true;
        let id = entry.follower.header.id.clone();
        let signed = ws
            .ctx
            .as_ref()
            .and_then(|c| signer::signed_unarchived(&c.store, &entry.root, &id).ok())
            .unwrap_or(0);
        let turns = signed + u64::from(entry.follower.in_flight().is_some());
        tracing::info!(session = %id, log = %key.display(), turns, "a log vanished");
        if turns > 0 {
            ws.vanished.push(json!({
                "at": at,
                "harness": entry.follower.harness().name(),
                "sessionId": id,
                "log": key,
                "turns": turns,
            }));
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
        ws.clock.on_append(last_write);
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
        let linked = ws.linked;
        let refreshed = match ws.sessions.get_mut(session_dir) {
            Some(entry) => signer::refresh(&ctx.store, &entry.root, &header.id, &mut entry.cursor),
            None => Ok(()),
        };
        if let Err(e) = refreshed {
            self.session_error(ws_dir, session_dir, e.to_string());
        }
        tracing::info!(session = %header.id, log = %session_dir.display(), "following a session");
        if is_new && self.initial_scan_done {
            match triggers::on_new_session(header.parent_session.as_deref(), &header.id, linked) {
                NewSession::Fork { parent } => {
                    let only = known_ids.contains(&parent).then_some(parent);
                    self.queue_archive(ws_dir, Reason::Fork, only, linked, linked);
                }
                NewSession::Pull => {
                    self.queue_sync(ws_dir, true, false);
                }
                NewSession::Nothing => {}
            }
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

    /// [`Runtime::poll_session`]; `force` reads an unchanged log too (another harness's
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
        let polled = entry.follower.poll_with(force, &mut |turn| {
            if turn.end_seq < seed_end || signed_hint.is_some_and(|hi| turn.end_seq <= hi) {
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
                ctx.config.tool_result_artifact_tokens,
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
                    ws.clock.on_append(now_ms());
                    ws.enrich.on_append(now_ms());
                    self.state_dirty = true;
                    self.state_changed = Instant::now();
                }
                // Another harness's turn may end only by going quiet: its in-flight turn
                // waits for the idle moment too.
                let quiet_ends = entry.follower.harness() != Harness::Dsh
                    && p.appended
                    && entry.follower.in_flight().is_some();
                if p.turns_completed > 0 || quiet_ends {
                    ws.clock.on_turn_completed();
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
            reason,
            reason.as_str(),
            only,
            pull_first,
            push_after,
        );
    }

    /// [`Runtime::queue_archive`] with the moment `status` names (`sweep` runs as an idle
    /// archive of one session).
    fn queue_archive_moment(
        &mut self,
        ws_dir: &Path,
        reason: Reason,
        moment: &'static str,
        only: Option<String>,
        pull_first: bool,
        push_after: bool,
    ) {
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        let Some(ctx) = ws.ctx.clone() else {
            return;
        };
        if ws.archive_busy {
            // One archive at a time per workspace; this moment runs once it is done, and
            // covers the turns waiting now.
            ws.archive_again = Some(reason);
            ws.clock.on_archive_started();
            return;
        }
        let now = now_ms();
        let pull_first = pull_first && ws.clock.sync_allowed(now);
        let push_after = push_after && ws.clock.sync_allowed(now);
        ws.archive_busy = true;
        ws.clock.on_archive_started();
        tracing::info!(workspace = %ctx.workspace.display(), reason = ?reason, "archive queued");
        self.submit(Job {
            ws_dir: ws_dir.to_path_buf(),
            ctx,
            dsh_home: self.paths.dsh_home.clone(),
            kind: JobKind::Archive {
                reason,
                moment,
                only,
                pull_first,
                push_after,
            },
        });
    }

    fn queue_sync(&mut self, ws_dir: &Path, pull_only: bool, forced: bool) -> bool {
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return false;
        };
        let Some(ctx) = ws.ctx.clone() else {
            return false;
        };
        if !ws.linked || ws.sync_busy || (!forced && !ws.clock.sync_allowed(now_ms())) {
            return false;
        }
        ws.sync_busy = true;
        if !pull_only {
            ws.clock.on_push_started();
        }
        self.submit(Job {
            ws_dir: ws_dir.to_path_buf(),
            ctx,
            dsh_home: self.paths.dsh_home.clone(),
            kind: JobKind::Sync { pull_only },
        });
        true
    }

    fn submit(&mut self, job: Job) {
        self.queued_jobs.fetch_add(1, Ordering::SeqCst);
        if self.jobs.send(job).is_err() {
            self.queued_jobs.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn fire_due(&mut self) {
        let now = now_ms();
        let mut due = Vec::new();
        for (dir, ws) in &self.workspaces {
            let Some(ctx) = &ws.ctx else { continue };
            if ws.archive_busy || ws.sync_busy {
                continue;
            }
            for d in ws.clock.due(now, ctx.timing(), ws.linked) {
                due.push((dir.clone(), d, ws.linked));
            }
        }
        for (dir, d, linked) in due {
            match d {
                Due::IdleArchive => {
                    // Other harnesses' logs gone quiet end their answered turns first:
                    // signed here, then archived.
                    let quiet: Vec<PathBuf> = self
                        .workspaces
                        .get(&dir)
                        .map(|w| {
                            w.sessions
                                .iter()
                                .filter(|(_, s)| {
                                    s.follower.harness() != Harness::Dsh
                                        && s.follower.in_flight().is_some()
                                })
                                .map(|(k, _)| k.clone())
                                .collect()
                        })
                        .unwrap_or_default();
                    for key in quiet {
                        self.poll_session_with(&dir, &key, true);
                    }
                    self.queue_archive(&dir, Reason::Idle, None, false, linked)
                }
                Due::Push => {
                    self.queue_sync(&dir, false, false);
                }
            }
        }
        for (dir, ws) in self.workspaces.iter_mut() {
            let Some(ctx) = &ws.ctx else { continue };
            if ws.enrich_busy || !enrichment_on(&ctx.config) {
                continue;
            }
            let due = ws
                .enrich
                .due_at(ctx.config.enrichment_trigger, ctx.config.enrichment_idle_ms);
            if due.is_some_and(|at| at <= now) {
                ws.enrich.on_batch_started();
                ws.enrich_busy = true;
                let job = EnrichJob {
                    ws_dir: dir.clone(),
                    ctx: Arc::clone(ctx),
                    dsh_home: self.paths.dsh_home.clone(),
                };
                if self.enrich_jobs.send(job).is_err() {
                    ws.enrich_busy = false;
                }
            }
        }
    }

    fn enrich_done(&mut self, done: EnrichDone) {
        let at = crate::time::rfc3339_utc(now_ms());
        let mut error = None;
        if let Some(ws) = self.workspaces.get_mut(&done.ws_dir) {
            ws.enrich_busy = false;
            match &done.result {
                Ok(report) => {
                    let stopped = report.failed + report.timeouts > 0;
                    let more = report.queued > report.examined && !stopped;
                    ws.enrich.on_batch_done(
                        more || stopped,
                        report.backed_off_until_ms.or_else(|| {
                            // A failed batch backs off by the status file's clock; re-read it.
                            ws.ctx.as_ref().and_then(|c| {
                                crate::enrich::run::read_status(&c.store)
                                    .ok()
                                    .flatten()?
                                    .backoff_until_ms
                            })
                        }),
                    );
                    ws.last_enrich = Some(json!({
                        "at": at,
                        "annotated": report.annotated.len(),
                        "invalid": report.invalid.len(),
                        "failed": report.failed,
                        "timeouts": report.timeouts,
                        "rulesMined": report.rules_mined.len(),
                        "waiting": report.queued.saturating_sub(report.examined),
                    }));
                    if stopped {
                        error = Some(format!(
                            "enrichment of {} stopped: the endpoint failed {} time(s), timed out {} time(s); chapters keep their values",
                            done.ws_dir.display(),
                            report.failed,
                            report.timeouts
                        ));
                    }
                }
                Err(e) => {
                    ws.enrich.on_batch_done(false, None);
                    ws.last_enrich = Some(json!({"at": at, "error": e}));
                    error = Some(format!(
                        "enrichment of {} failed: {e}",
                        done.ws_dir.display()
                    ));
                }
            }
        }
        if let Some(e) = error {
            self.error("enrich", e);
        }
    }

    fn job_done(&mut self, done: JobDone) {
        let now = now_ms();
        let at = crate::time::rfc3339_utc(now);
        let mut errors = Vec::new();
        let mut again = None;
        {
            let Some(ws) = self.workspaces.get_mut(&done.ws_dir) else {
                return;
            };
            let timing = ws.ctx.as_ref().map(|c| c.timing()).unwrap_or(Timing {
                idle_archive_ms: u64::MAX,
                sync_debounce_ms: 0,
            });
            if let JobKind::Archive {
                reason,
                moment,
                push_after,
                ..
            } = &done.kind
            {
                ws.archive_busy = false;
                let (wrote, summary) = match &done.archive {
                    Some(Ok((chapters, failures))) => {
                        errors.extend(failures.iter().cloned());
                        (
                            *chapters > 0,
                            json!({"at": at, "reason": reason, "moment": moment, "chaptersWritten": chapters, "failures": failures}),
                        )
                    }
                    Some(Err(e)) => {
                        errors.push(format!("archive ({}) failed: {e}", reason.as_str()));
                        (
                            false,
                            json!({"at": at, "reason": reason, "moment": moment, "error": e}),
                        )
                    }
                    None => (false, Value::Null),
                };
                ws.last_archive = Some(summary);
                ws.clock.on_archive_done(now, wrote, timing);
                if wrote {
                    ws.enrich.on_chapters_written();
                }
                if *push_after {
                    ws.clock.on_push_started();
                }
                again = ws.archive_again.take();
            } else {
                ws.sync_busy = false;
            }
            for s in &done.syncs {
                ws.clock.on_sync_result(now, s.result.is_ok(), timing);
                if s.result.is_ok() && !s.pull_only {
                    ws.enrich.on_push_ok();
                }
                ws.last_sync = Some(json!({
                    "at": at,
                    "pullOnly": s.pull_only,
                    "ok": s.result.is_ok(),
                    "error": s.result.as_ref().err(),
                    "consecutiveFailures": ws.clock.sync_failures(),
                }));
                if let Err(e) = &s.result {
                    errors.push(format!(
                        "{} failed (retried after a backoff; the archive is not affected): {e}",
                        if s.pull_only { "pull" } else { "sync" }
                    ));
                }
            }
            ws.linked = ws.ctx.as_ref().is_some_and(|c| c.linked());
        }
        for e in errors {
            self.error("archive/sync", e);
        }
        if let Some(reason) = again {
            self.queue_archive(&done.ws_dir, reason, None, false, false);
        }
    }

    fn sync_now(&mut self) -> usize {
        let dirs: Vec<PathBuf> = self.workspaces.keys().cloned().collect();
        dirs.iter()
            .filter(|d| self.queue_sync(d, false, true))
            .count()
    }

    /// Re-read every config (the daemon's and each followed workspace's); a bad one is
    /// refused by name and the old ones are kept, all of them.
    fn reload(&mut self) -> Result<Value, String> {
        let at = crate::time::rfc3339_utc(now_ms());
        let result = (|| -> Result<(Config, Vec<(PathBuf, WsCtx)>), String> {
            let config =
                config::load_home(&self.paths.dsh_home, &self.env).map_err(|e| e.to_string())?;
            let mut fresh = Vec::new();
            for (dir, ws) in &self.workspaces {
                if let Some(old) = &ws.ctx {
                    let ctx = WsCtx::load(&old.workspace, &self.paths.dsh_home, &self.env)?;
                    fresh.push((dir.clone(), ctx));
                }
            }
            Ok((config, fresh))
        })();
        match result {
            Ok((config, fresh)) => {
                let n = fresh.len();
                if config.daemon_watch != self.config.daemon_watch {
                    tracing::info!("daemonWatch changes take effect at the next start");
                }
                self.config = config;
                for (dir, ctx) in fresh {
                    if let Some(ws) = self.workspaces.get_mut(&dir) {
                        ws.linked = ctx.linked();
                        ws.ctx = Some(Arc::new(ctx));
                    }
                }
                tracing::info!(workspaces = n, "configuration reloaded");
                self.last_reload = Some(json!({"at": at, "ok": true}));
                Ok(json!({"reloaded": true, "workspaces": n}))
            }
            Err(e) => {
                let message =
                    format!("reload refused, the previous configuration stays in force: {e}");
                self.error("reload", message.clone());
                self.last_reload = Some(json!({"at": at, "ok": false, "error": message}));
                Err(message)
            }
        }
    }

    fn status(&self) -> Value {
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
            workspaces.push(json!({
                "sessionsDir": dir.to_string_lossy(),
                "workspace": ws.workspace.as_deref().map(std::path::Path::to_string_lossy),
                "followed": ws.ctx.is_some(),
                "notFollowed": ws.not_followed,
                "linked": ws.linked,
                "sessions": sessions,
                "archiveRunning": ws.archive_busy,
                "lastArchive": ws.last_archive,
                "lastSync": ws.last_sync,
                "lastEnrich": ws.last_enrich,
                "enrichBusy": ws.enrich_busy,
                "syncFailures": ws.clock.sync_failures(),
                "pushDueAt": ws.clock.push_due_ms().map(crate::time::rfc3339_utc),
                "vanished": ws.vanished,
            }));
        }
        let (mode, reason) = match &self.watch.mode {
            watch::WatchMode::Notify => ("notify", None),
            watch::WatchMode::Polling { reason } => ("polling", Some(reason.clone())),
        };
        json!({
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "dshHome": self.paths.dsh_home.to_string_lossy(),
            "startedAt": self.started_at,
            "uptimeSecs": self.started.elapsed().as_secs(),
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
            "queueDepth": self.queued_jobs.load(Ordering::SeqCst),
            "lastReload": self.last_reload,
            "lastErrors": self.errors,
            "logs": self.paths.logs.to_string_lossy(),
            // One entry a harness: its live tree, and the tree of its archived logs.
            "harnesses": self.harness_trees.iter().filter(|t| !t.cold).map(|t| json!({
                "harness": t.harness.name(),
                "home": t.home.to_string_lossy(),
                "tree": t.tree.to_string_lossy(),
                "archivedTree": self.harness_trees.iter()
                    .find(|c| c.cold && c.harness == t.harness)
                    .map(|c| c.tree.to_string_lossy()),
                "present": t.tree.is_dir(),
                "logsSeen": self.harness_logs.values().filter(|l| l.harness == t.harness).count(),
                "logsFollowed": self.harness_logs.values().filter(|l| l.harness == t.harness && l.ws_dir.is_some()).count(),
                // Why the first few logs are not followed (sorted by path).
                "notFollowed": self.harness_logs.iter()
                    .filter(|(_, l)| l.harness == t.harness)
                    .filter_map(|(p, l)| Some(json!({"log": p.to_string_lossy(), "why": l.not_followed.as_ref()?})))
                    .take(20)
                    .collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "claudeCleanupPeriodDays": self.claude_cleanup_days,
            "sweepMarginDays": SWEEP_MARGIN_DAYS,
        })
    }

    fn write_state(&mut self) {
        let mut logs = BTreeMap::new();
        for ws in self.workspaces.values() {
            for s in ws.sessions.values() {
                logs.insert(
                    s.follower.log.log.to_string_lossy().into_owned(),
                    s.follower.saved(),
                );
            }
        }
        let state = StateFile { v: 1, logs };
        let bytes = match serde_json::to_vec(&state) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "cannot serialize the daemon state");
                return;
            }
        };
        match crate::home::write_private(&self.paths.state, &bytes) {
            Ok(()) => {
                self.saved = state.logs;
                self.state_dirty = false;
                self.state_written = Instant::now();
            }
            Err(e) => {
                // Retried at the next change, not in a loop: the state only saves re-reading.
                let message = format!("cannot save the daemon state: {e}");
                self.state_dirty = false;
                self.state_written = Instant::now();
                self.error("state", message);
            }
        }
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
    let cwd = crate::session::cwdkey::normalize_abs(&header.cwd?)?;
    let mut candidates = vec![cwd.clone()];
    candidates.extend(crate::session::cwdkey::map_path(&cwd, path_map));
    let native = candidates
        .into_iter()
        .find(|c| Path::new(&c.text).is_absolute())?;
    identity::workspace_root(Path::new(&native.text)).ok()
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

    #[test]
    fn a_damaged_state_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        std::fs::write(&path, b"{ not json").unwrap();
        assert!(read_state(&path).is_empty());
        std::fs::write(&path, br#"{"v":9,"logs":{}}"#).unwrap();
        assert!(read_state(&path).is_empty());
        assert!(read_state(&dir.path().join("absent")).is_empty());
    }
}

//! The daemon (shell): follow every enabled workspace's live session logs, sign each turn
//! as its `turn/end` frame lands, archive at the right moments and sync in the background.
//!
//! This file is the wiring. The components each own their state and talk through channels
//! (bounded for file events) or, on the main thread, through the follower's [`Event`]s:
//! - **follow-and-sign** (`sessions`, on the main thread): the followers, the watch, the
//!   saved anchors; it decodes appended frames and signs (collections lock only, one
//!   fsync) — nothing else runs on this thread, so a signature never waits on an archive,
//!   a sync, a model or the network.
//! - **archive worker** (`worker`, its thread): archives and the syncs (`sync`), one job at
//!   a time, under the store's writer lock; its main-thread side keeps each workspace's
//!   moments (`triggers`).
//! - **enrichment** (`enrich`, its thread at background priority): idle-time batches.
//! - **control socket** (`control`, its thread and one per connection): requests are
//!   forwarded to main and answered from there.
//! - **watcher** (`watch`, `notify`'s own thread): changed paths → the bounded queue
//!   (`try_send`; when full, a rescan flag instead of blocking).
//! - **signals**: SIGTERM/SIGINT stop, SIGHUP reloads (`signal-hook`, no `unsafe`).
//!
//! Errors: a critical one (the lock held, the socket not bindable, a bad configuration at
//! start, the home deleted or the lock lost while running) stops the daemon with exit 1 and
//! says why; every other is a runtime error — logged, kept in `status.lastErrors`
//! (`errors`), and the component goes on.
//!
//! Its home is `$DSH_HOME/dsh-chapters/`: `daemon.pid` (the lock), `daemon.sock`,
//! `daemon-state.json` (resume anchors), `logs/`. Nothing is written under
//! `$DSH_HOME/sessions`.

mod context;
pub mod control;
mod enrich;
mod errors;
pub mod follow;
pub mod logs;
pub mod pidlock;
pub mod service;
mod sessions;
mod state;
mod sync;
pub mod triggers;
pub mod watch;
mod worker;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::archive::Reason;
use crate::config::{self, ConfigError, DaemonWatch};

use context::now_ms;
use enrich::{EnrichDone, Enricher};
use errors::RuntimeErrors;
use sessions::{Event, Sessions};
use triggers::Due;
use watch::{Watch, WatchFlags};
use worker::{ArchiveAsk, Archiver, JobDone};

pub use state::STATE_FILE;

pub const HOME_DIR: &str = crate::home::HOME_DIR;
pub const SOCKET_FILE: &str = "daemon.sock";
pub const LOGS_DIR: &str = "logs";

/// Messages queued for the main thread (bounded; file events never block on it).
const QUEUE: usize = 4096;
/// How often the main loop checks, when it passes, that it can go on (its home and lock).
const CRITICAL_CHECK: Duration = Duration::from_secs(1);
/// How long a stop waits for an archive or sync in progress before leaving it (every
/// store write is atomic, so leaving one mid-way is as safe as a kill).
const STOP_GRACE: Duration = Duration::from_millis(1500);

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
    /// Critical at run time: the daemon's home was deleted under it (its lock, socket and
    /// state went with it).
    #[error("the daemon's home {path} was deleted while it ran; stopped")]
    HomeGone { path: PathBuf },
    /// Critical at run time: the lock file was removed or replaced, so it no longer keeps a
    /// second daemon out.
    #[error("the daemon's lock {path} was removed or replaced while it ran (a second daemon could start beside it); stopped")]
    LockLost { path: PathBuf },
}

/// What the CLI resolves for the daemon.
pub struct Options {
    pub dsh_home: PathBuf,
    /// The process's `CHAPTERS_*` environment (a config layer).
    pub env: BTreeMap<String, String>,
}

/// What the other threads send the main thread.
enum Msg {
    Fs(Vec<PathBuf>),
    Control(control::Incoming),
    Signal(i32),
    Done(Box<JobDone>),
    Enriched(Box<EnrichDone>),
}

/// Run the daemon in this process until SIGTERM/SIGINT or a `stop` request (`Ok`), or a
/// critical error.
pub fn run(options: Options) -> Result<(), DaemonError> {
    // Before the socket answers: a session created after this is new even when the first
    // scan is what finds it.
    let started_wall = std::time::SystemTime::now();
    let paths = Paths::new(&options.dsh_home);
    let config = config::load_home(&paths.dsh_home, &options.env)?;
    // Owner-only whatever the umask: the home 0700, every file in it 0600.
    crate::home::ensure(&paths.dsh_home).map_err(|source| DaemonError::Io {
        path: paths.home.clone(),
        source,
    })?;
    let lock = pidlock::PidLock::acquire(&paths.home)?;
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
    let thread_error = |name: &str| {
        let path = PathBuf::from(format!("<thread {name}>"));
        move |source| DaemonError::Io { path, source }
    };

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
    let archiver = Archiver::start(&paths.dsh_home, {
        let tx = tx.clone();
        move |done| tx.send(Msg::Done(Box::new(done))).is_ok()
    })
    .map_err(thread_error("worker"))?;
    let enricher = Enricher::start(&paths.dsh_home, {
        let tx = tx.clone();
        move |done| tx.send(Msg::Enriched(Box::new(done))).is_ok()
    })
    .map_err(thread_error("enrich"))?;

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

    let socket = paths.socket.clone();
    let home = paths.home.clone();
    let mut daemon = Daemon {
        lock,
        home,
        critical_checked: Instant::now(),
        sessions: Sessions::new(paths, options.env, config, watch, flags, started_wall),
        archiver,
        enricher,
        errors: RuntimeErrors::default(),
        started: Instant::now(),
        started_at: crate::time::rfc3339_utc(now_ms()),
        last_reload: None,
        stop: false,
        critical: None,
    };
    daemon.sessions.start();
    daemon.dispatch();
    daemon.main_loop(&rx);

    // Stopping: persist where each log was, let a job in progress finish briefly. After a
    // critical error the home is gone or no longer ours alone (another daemon may hold a
    // new lock, state file and socket there): nothing of it is written or removed.
    if daemon.critical.is_none() {
        daemon.sessions.write_state();
        daemon.dispatch();
    }
    let Daemon {
        archiver, critical, ..
    } = daemon;
    if !archiver.stop(STOP_GRACE) {
        tracing::warn!("an archive or sync was still running at stop; it is left mid-way (every store write is atomic)");
    }
    if critical.is_none() {
        let _ = std::fs::remove_file(&socket);
    }
    match critical {
        Some(e) => Err(e),
        None => {
            tracing::info!("daemon stopped");
            Ok(())
        }
    }
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

/// The components, wired on the main thread.
struct Daemon {
    lock: pidlock::PidLock,
    /// `$DSH_HOME/dsh-chapters/`.
    home: PathBuf,
    critical_checked: Instant,
    sessions: Sessions,
    archiver: Archiver,
    enricher: Enricher,
    errors: RuntimeErrors,
    started: Instant,
    started_at: String,
    last_reload: Option<Value>,
    stop: bool,
    /// The critical error that stopped the daemon.
    critical: Option<DaemonError>,
}

impl Daemon {
    fn main_loop(&mut self, rx: &Receiver<Msg>) {
        let mut changed: BTreeSet<PathBuf> = BTreeSet::new();
        while !self.stop {
            match rx.recv_timeout(self.next_wake()) {
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
            if self.stop || self.critical_error() {
                break;
            }
            self.sessions.catch_up(&mut changed);
            self.dispatch();
            self.fire_due();
            self.sessions.save_state_when_due();
            self.dispatch();
        }
    }

    /// Hand the follower's events to the components that hear them, in order.
    fn dispatch(&mut self) {
        for event in self.sessions.take_events() {
            match event {
                Event::Error { what, detail } => self.errors.push(what, &detail),
                Event::Loaded { ws_dir, ctx } => {
                    self.archiver.loaded(&ws_dir, Arc::clone(&ctx));
                    self.enricher.loaded(&ws_dir, ctx);
                }
                Event::Removed { ws_dir } => {
                    self.archiver.removed(&ws_dir);
                    self.enricher.removed(&ws_dir);
                }
                Event::Found { ws_dir, at_ms } => self.archiver.on_append(&ws_dir, at_ms),
                Event::Appended { ws_dir, at_ms } => {
                    self.archiver.on_append(&ws_dir, at_ms);
                    self.enricher.on_append(&ws_dir, at_ms);
                }
                Event::TurnCompleted { ws_dir } => self.archiver.on_turn_completed(&ws_dir),
                Event::NewSession {
                    ws_dir,
                    id,
                    parent,
                    parent_followed,
                } => self
                    .archiver
                    .new_session(&ws_dir, parent.as_deref(), &id, parent_followed),
                Event::Archive { ws_dir, ask } => self.archiver.queue_archive(&ws_dir, ask),
            }
        }
    }

    /// Whether the daemon cannot go on: its home deleted, or its lock no longer its own
    /// (checked at most every [`CRITICAL_CHECK`]). The error is kept for `run` to return.
    fn critical_error(&mut self) -> bool {
        if self.critical_checked.elapsed() < CRITICAL_CHECK {
            return false;
        }
        self.critical_checked = Instant::now();
        let error = if !self.home.is_dir() {
            DaemonError::HomeGone {
                path: self.home.clone(),
            }
        } else if !self.lock.still_held() {
            DaemonError::LockLost {
                path: self.lock.path().to_path_buf(),
            }
        } else {
            return false;
        };
        tracing::error!("{error}");
        self.critical = Some(error);
        true
    }

    fn next_wake(&self) -> Duration {
        let mut wake = self.sessions.next_wake();
        let now = now_ms();
        for at in [self.archiver.next_deadline(), self.enricher.next_deadline()]
            .into_iter()
            .flatten()
        {
            let ms = u64::try_from(at.saturating_sub(now)).unwrap_or(0);
            wake = wake.min(Duration::from_millis(ms));
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
                    control::Request::SyncNow => Ok(json!({"queued": self.archiver.sync_now()})),
                    control::Request::Reload => self.reload(),
                    control::Request::Stop => {
                        tracing::info!("stop requested over the control socket");
                        self.stop = true;
                        Ok(json!({"stopping": true}))
                    }
                };
                let _ = incoming.reply.send(answer);
            }
            Msg::Done(done) => {
                if let Some(finished) = self.archiver.job_done(*done) {
                    if finished.wrote {
                        self.enricher.on_chapters_written(&finished.ws_dir);
                    }
                    if finished.pushed {
                        self.enricher.on_push_ok(&finished.ws_dir);
                    }
                    for e in &finished.errors {
                        self.errors.push("archive/sync", e);
                    }
                }
            }
            Msg::Enriched(done) => {
                if let Some(e) = self.enricher.done(*done) {
                    self.errors.push("enrich", &e);
                }
            }
        }
    }

    /// Start what is due: archive moments and pushes, then enrichment batches.
    fn fire_due(&mut self) {
        let now = now_ms();
        for (dir, due) in self.archiver.due(now) {
            match due {
                Due::IdleArchive => {
                    // Other harnesses' logs gone quiet end their answered turns first:
                    // signed here, then archived.
                    self.sessions.poll_quiet(&dir);
                    self.dispatch();
                    self.archiver.queue_archive(
                        &dir,
                        ArchiveAsk {
                            push_after: true,
                            ..ArchiveAsk::at(Reason::Idle)
                        },
                    );
                }
                Due::Push => {
                    self.archiver.queue_sync(&dir, false, false);
                }
            }
        }
        self.enricher.fire_due(now);
    }

    /// Re-read every config; a bad one is refused by name and the old ones are kept.
    fn reload(&mut self) -> Result<Value, String> {
        let at = crate::time::rfc3339_utc(now_ms());
        let result = self.sessions.reload();
        self.dispatch();
        match result {
            Ok(n) => {
                tracing::info!(workspaces = n, "configuration reloaded");
                self.last_reload = Some(json!({"at": at, "ok": true}));
                Ok(json!({"reloaded": true, "workspaces": n}))
            }
            Err(e) => {
                let message =
                    format!("reload refused, the previous configuration stays in force: {e}");
                self.errors.push("reload", &message);
                self.last_reload = Some(json!({"at": at, "ok": false, "error": message}));
                Err(message)
            }
        }
    }

    fn status(&self) -> Value {
        let mut status = self.sessions.status(&|dir, entry| {
            self.archiver.status_into(dir, entry);
            self.enricher.status_into(dir, entry);
        });
        let mut put = |k: &str, v: Value| {
            status.insert(k.to_owned(), v);
        };
        put("pid", json!(std::process::id()));
        put("version", json!(env!("CARGO_PKG_VERSION")));
        put("startedAt", json!(self.started_at));
        put("uptimeSecs", json!(self.started.elapsed().as_secs()));
        put("queueDepth", json!(self.archiver.depth()));
        put("lastReload", json!(self.last_reload));
        put("lastErrors", self.errors.to_json());
        Value::Object(status)
    }
}

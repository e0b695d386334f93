//! The archive worker: archives and syncs, one job at a time on a thread of its own, under the
//! store's writer lock (the lock `chapters archive` and `chapters sync` take, so the CLI and
//! the daemon serialize). Jobs go in through a channel and come back, done, through the
//! main thread's queue.
//!
//! Its main-thread side, [`Archiver`], owns each followed workspace's moments: the pure
//! `triggers::WorkspaceClock` (idle archive, push debounce, sync backoff), whether an archive
//! runs and which one waits behind it, the last archive, and the workspace's [`SyncState`].
//! The follower tells it what happened (appends, turn ends, new sessions, moments); it
//! decides what runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::archive::{self, ArchiveContext, Reason};

use super::context::{now_ms, WsCtx};
use super::sync::{self, SyncOutcome, SyncState};
use super::triggers::{self, Due, NewSession, Timing, WorkspaceClock};

/// One archive a moment asks for, as the follower hands it to the worker.
#[derive(Debug, Clone)]
pub struct ArchiveAsk {
    pub reason: Reason,
    /// The moment that asked for it, for `status` (the reason's word, or `sweep`).
    pub moment: &'static str,
    /// One session (a fork's parent, a session near its sweep), or every one.
    pub only: Option<String>,
    pub pull_first: bool,
    pub push_after: bool,
}

impl ArchiveAsk {
    /// Every session, named by its reason, with no sync before or after.
    pub fn at(reason: Reason) -> ArchiveAsk {
        ArchiveAsk {
            reason,
            moment: reason.as_str(),
            only: None,
            pull_first: false,
            push_after: false,
        }
    }
}

#[derive(Debug, Clone)]
enum JobKind {
    Archive(ArchiveAsk),
    Sync { pull_only: bool },
}

struct Job {
    ws_dir: PathBuf,
    ctx: Arc<WsCtx>,
    dsh_home: PathBuf,
    kind: JobKind,
}

/// A finished job, sent back to the main thread.
pub(super) struct JobDone {
    ws_dir: PathBuf,
    kind: JobKind,
    /// Chapters written and per-session failures, or the archive's error.
    archive: Option<Result<(usize, Vec<String>), String>>,
    syncs: Vec<SyncOutcome>,
}

fn run_job(job: &Job) -> JobDone {
    let mut done = JobDone {
        ws_dir: job.ws_dir.clone(),
        kind: job.kind.clone(),
        archive: None,
        syncs: Vec::new(),
    };
    match &job.kind {
        JobKind::Sync { pull_only } => {
            done.syncs
                .push(sync::run(&job.ctx, &job.dsh_home, *pull_only));
        }
        JobKind::Archive(ArchiveAsk {
            reason,
            only,
            pull_first,
            push_after,
            ..
        }) => {
            if *pull_first {
                done.syncs.push(sync::run(&job.ctx, &job.dsh_home, true));
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
                        .map(|f| {
                            format!(
                                "{} (log in {}): {}",
                                f.session_id,
                                f.session_dir.display(),
                                f.error
                            )
                        })
                        .collect(),
                )),
                Err(e) => Err(e.to_string()),
            });
            if *push_after {
                done.syncs.push(sync::run(&job.ctx, &job.dsh_home, false));
            }
        }
    }
    done
}

/// The worker thread's handle: its job channel, the jobs queued or running, and the signal
/// that it has finished the last one.
struct Worker {
    jobs: Sender<Job>,
    queued: Arc<AtomicUsize>,
    finished: Receiver<()>,
}

impl Worker {
    fn spawn(done: impl Fn(JobDone) -> bool + Send + 'static) -> std::io::Result<Worker> {
        let (jobs, jobs_rx) = mpsc::channel::<Job>();
        let queued = Arc::new(AtomicUsize::new(0));
        let (finished_tx, finished) = mpsc::channel::<()>();
        let counter = Arc::clone(&queued);
        std::thread::Builder::new()
            .name("worker".into())
            .spawn(move || {
                for job in jobs_rx {
                    let result = run_job(&job);
                    counter.fetch_sub(1, Ordering::SeqCst);
                    if !done(result) {
                        break;
                    }
                }
                let _ = finished_tx.send(());
            })?;
        Ok(Worker {
            jobs,
            queued,
            finished,
        })
    }

    fn submit(&self, job: Job) {
        self.queued.fetch_add(1, Ordering::SeqCst);
        if self.jobs.send(job).is_err() {
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// One workspace's moments and jobs.
struct WsJobs {
    ctx: Arc<WsCtx>,
    clock: WorkspaceClock,
    archive_busy: bool,
    archive_again: Option<Reason>,
    last_archive: Option<Value>,
    sync: SyncState,
}

/// What a finished job means to the other components.
pub(super) struct Finished {
    pub ws_dir: PathBuf,
    /// The archive wrote chapters (enrichment has work).
    pub wrote: bool,
    /// A push succeeded (enrichment's `push` trigger).
    pub pushed: bool,
    /// Runtime errors to log.
    pub errors: Vec<String>,
}

/// The archive worker's main-thread side (see the module's note).
pub(super) struct Archiver {
    worker: Worker,
    dsh_home: PathBuf,
    workspaces: BTreeMap<PathBuf, WsJobs>,
}

impl Archiver {
    /// Start the worker thread; `done` hands each finished job to the main thread (false:
    /// the main thread is gone, the worker stops).
    pub fn start(
        dsh_home: &Path,
        done: impl Fn(JobDone) -> bool + Send + 'static,
    ) -> std::io::Result<Archiver> {
        Ok(Archiver {
            worker: Worker::spawn(done)?,
            dsh_home: dsh_home.to_path_buf(),
            workspaces: BTreeMap::new(),
        })
    }

    /// A workspace followed, or its configuration (re)loaded: its moments are kept.
    pub fn loaded(&mut self, ws_dir: &Path, ctx: Arc<WsCtx>) {
        let linked = ctx.linked();
        match self.workspaces.get_mut(ws_dir) {
            Some(ws) => {
                ws.ctx = ctx;
                ws.sync.linked = linked;
            }
            None => {
                self.workspaces.insert(
                    ws_dir.to_path_buf(),
                    WsJobs {
                        ctx,
                        clock: WorkspaceClock::default(),
                        archive_busy: false,
                        archive_again: None,
                        last_archive: None,
                        sync: SyncState {
                            linked,
                            ..SyncState::default()
                        },
                    },
                );
            }
        }
    }

    /// A workspace no longer followed: its moments go (a job of it finishing later is
    /// ignored).
    pub fn removed(&mut self, ws_dir: &Path) {
        self.workspaces.remove(ws_dir);
    }

    /// A log of the workspace was written at `at_ms`.
    pub fn on_append(&mut self, ws_dir: &Path, at_ms: i64) {
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            ws.clock.on_append(at_ms);
        }
    }

    /// A turn of the workspace ended (or went quiet with its answer in flight).
    pub fn on_turn_completed(&mut self, ws_dir: &Path) {
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            ws.clock.on_turn_completed();
        }
    }

    /// A session first seen while the daemon runs: a fork archives its parent (only it when
    /// `parent_followed`), a fresh session of a linked workspace pulls.
    pub fn new_session(
        &mut self,
        ws_dir: &Path,
        parent: Option<&str>,
        own_id: &str,
        parent_followed: bool,
    ) {
        let linked = self.linked(ws_dir);
        match triggers::on_new_session(parent, own_id, linked) {
            NewSession::Fork { parent } => {
                let only = parent_followed.then_some(parent);
                self.queue_archive(
                    ws_dir,
                    ArchiveAsk {
                        only,
                        pull_first: true,
                        push_after: true,
                        ..ArchiveAsk::at(Reason::Fork)
                    },
                );
            }
            NewSession::Pull => {
                self.queue_sync(ws_dir, true, false);
            }
            NewSession::Nothing => {}
        }
    }

    fn linked(&self, ws_dir: &Path) -> bool {
        self.workspaces.get(ws_dir).is_some_and(|w| w.sync.linked)
    }

    /// Queue an archive (`moment` is what `status` names: the reason's word, or `sweep`);
    /// `pull_first` / `push_after` apply when the workspace is linked and its sync is not
    /// backing off. One archive at a time per workspace: a moment arriving meanwhile runs
    /// once after it.
    pub fn queue_archive(&mut self, ws_dir: &Path, ask: ArchiveAsk) {
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        if ws.archive_busy {
            // This moment runs once the archive in progress is done, and covers the turns
            // waiting now.
            ws.archive_again = Some(ask.reason);
            ws.clock.on_archive_started();
            return;
        }
        let now = now_ms();
        let linked = ws.sync.linked;
        let pull_first = ask.pull_first && linked && ws.clock.sync_allowed(now);
        let push_after = ask.push_after && linked && ws.clock.sync_allowed(now);
        ws.archive_busy = true;
        ws.clock.on_archive_started();
        tracing::info!(workspace = %ws.ctx.workspace.display(), reason = ?ask.reason, "archive queued");
        self.worker.submit(Job {
            ws_dir: ws_dir.to_path_buf(),
            ctx: Arc::clone(&ws.ctx),
            dsh_home: self.dsh_home.clone(),
            kind: JobKind::Archive(ArchiveAsk {
                pull_first,
                push_after,
                ..ask
            }),
        });
    }

    /// Queue a sync (`pull_only`: a pull); `forced` ignores the backoff (`sync-now`).
    /// False when nothing was queued: not linked, one running, or backing off.
    pub fn queue_sync(&mut self, ws_dir: &Path, pull_only: bool, forced: bool) -> bool {
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return false;
        };
        if !ws.sync.linked || ws.sync.busy || (!forced && !ws.clock.sync_allowed(now_ms())) {
            return false;
        }
        ws.sync.busy = true;
        if !pull_only {
            ws.clock.on_push_started();
        }
        self.worker.submit(Job {
            ws_dir: ws_dir.to_path_buf(),
            ctx: Arc::clone(&ws.ctx),
            dsh_home: self.dsh_home.clone(),
            kind: JobKind::Sync { pull_only },
        });
        true
    }

    /// `sync-now`: a sync of every linked workspace not syncing; how many were queued.
    pub fn sync_now(&mut self) -> usize {
        let dirs: Vec<PathBuf> = self.workspaces.keys().cloned().collect();
        dirs.iter()
            .filter(|d| self.queue_sync(d, false, true))
            .count()
    }

    /// The moments due now, by workspace (none of a workspace with a job in progress: its
    /// moments wait for it).
    pub fn due(&self, now: i64) -> Vec<(PathBuf, Due)> {
        let mut due = Vec::new();
        for (dir, ws) in &self.workspaces {
            if ws.archive_busy || ws.sync.busy {
                continue;
            }
            for d in ws.clock.due(now, ws.ctx.timing(), ws.sync.linked) {
                due.push((dir.clone(), d));
            }
        }
        due
    }

    /// The next time a moment may become due (a job in progress wakes the loop when done).
    pub fn next_deadline(&self) -> Option<i64> {
        self.workspaces
            .values()
            .filter(|ws| !ws.archive_busy && !ws.sync.busy)
            .filter_map(|ws| ws.clock.next_deadline(ws.ctx.timing(), ws.sync.linked))
            .min()
    }

    /// A job is done: record it, and run the archive that waited behind it.
    pub fn job_done(&mut self, done: JobDone) -> Option<Finished> {
        let now = now_ms();
        let at = crate::time::rfc3339_utc(now);
        let mut finished = Finished {
            ws_dir: done.ws_dir.clone(),
            wrote: false,
            pushed: false,
            errors: Vec::new(),
        };
        let ws = self.workspaces.get_mut(&done.ws_dir)?;
        let timing: Timing = ws.ctx.timing();
        let mut again = None;
        if let JobKind::Archive(ArchiveAsk {
            reason,
            moment,
            push_after,
            ..
        }) = &done.kind
        {
            ws.archive_busy = false;
            let (wrote, summary) = match &done.archive {
                Some(Ok((chapters, failures))) => {
                    finished.errors.extend(failures.iter().cloned());
                    (
                        *chapters > 0,
                        json!({"at": at, "reason": reason, "moment": moment, "chaptersWritten": chapters, "failures": failures}),
                    )
                }
                Some(Err(e)) => {
                    finished
                        .errors
                        .push(format!("archive ({}) failed: {e}", reason.as_str()));
                    (
                        false,
                        json!({"at": at, "reason": reason, "moment": moment, "error": e}),
                    )
                }
                None => (false, Value::Null),
            };
            ws.last_archive = Some(summary);
            ws.clock.on_archive_done(now, wrote, timing);
            finished.wrote = wrote;
            if *push_after {
                ws.clock.on_push_started();
            }
            again = ws.archive_again.take();
        } else {
            ws.sync.busy = false;
        }
        for s in &done.syncs {
            ws.clock.on_sync_result(now, s.result.is_ok(), timing);
            if s.result.is_ok() && !s.pull_only {
                finished.pushed = true;
            }
            if let Some(e) = ws.sync.record(s, &at, ws.clock.sync_failures()) {
                finished.errors.push(e);
            }
        }
        ws.sync.linked = ws.ctx.linked();
        if let Some(reason) = again {
            self.queue_archive(&done.ws_dir, ArchiveAsk::at(reason));
        }
        Some(finished)
    }

    /// The workspace's fields of `daemon status`.
    pub fn status_into(&self, ws_dir: &Path, out: &mut Map<String, Value>) {
        let ws = self.workspaces.get(ws_dir);
        let mut put = |k: &str, v: Value| {
            out.insert(k.to_owned(), v);
        };
        put("linked", json!(ws.is_some_and(|w| w.sync.linked)));
        put("archiveRunning", json!(ws.is_some_and(|w| w.archive_busy)));
        put(
            "lastArchive",
            json!(ws.and_then(|w| w.last_archive.clone())),
        );
        put("lastSync", json!(ws.and_then(|w| w.sync.last.clone())));
        put(
            "syncFailures",
            json!(ws.map_or(0, |w| w.clock.sync_failures())),
        );
        put(
            "pushDueAt",
            json!(ws
                .and_then(|w| w.clock.push_due_ms())
                .map(crate::time::rfc3339_utc)),
        );
    }

    /// Jobs queued or running.
    pub fn depth(&self) -> usize {
        self.worker.queued.load(Ordering::SeqCst)
    }

    /// No more jobs; wait at most `grace` for the one in progress. False when it was still
    /// running (it is left mid-way: every store write is atomic).
    pub fn stop(self, grace: Duration) -> bool {
        let Archiver { worker, .. } = self;
        let Worker { jobs, finished, .. } = worker;
        drop(jobs);
        finished.recv_timeout(grace).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workspace with a store and nothing to archive, loaded as the daemon loads one.
    fn workspace(dir: &Path) -> Arc<WsCtx> {
        let ws = dir.join("w");
        std::fs::create_dir_all(&ws).expect("workspace");
        crate::store::Store::init(&ws).expect("init");
        Arc::new(WsCtx::load(&ws, &dir.join("home"), &BTreeMap::new()).expect("load"))
    }

    #[test]
    fn one_archive_at_a_time_and_the_moments_meanwhile_run_once_after_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (tx, rx) = mpsc::channel();
        let mut archiver =
            Archiver::start(&dir.path().join("home"), move |d| tx.send(d).is_ok()).expect("start");
        let key = dir.path().join("--w--");
        archiver.loaded(&key, workspace(dir.path()));
        archiver.queue_archive(&key, ArchiveAsk::at(Reason::Idle));
        // Two moments while it runs: one archive after it, for the last one.
        archiver.queue_archive(&key, ArchiveAsk::at(Reason::Compaction));
        archiver.queue_archive(
            &key,
            ArchiveAsk {
                pull_first: true,
                push_after: true,
                ..ArchiveAsk::at(Reason::Fork)
            },
        );
        let wait = Duration::from_secs(60);
        let first = rx.recv_timeout(wait).expect("the first archive");
        let finished = archiver.job_done(first).expect("its workspace");
        assert!(finished.errors.is_empty(), "{:?}", finished.errors);
        assert!(!finished.wrote && !finished.pushed);
        let status = |a: &Archiver| {
            let mut m = Map::new();
            a.status_into(&key, &mut m);
            m
        };
        assert_eq!(
            status(&archiver)["archiveRunning"],
            true,
            "the one waiting runs"
        );
        let second = rx.recv_timeout(wait).expect("the archive that waited");
        archiver.job_done(second).expect("its workspace");
        let after = status(&archiver);
        assert_eq!(after["archiveRunning"], false, "no third archive");
        assert_eq!(after["lastArchive"]["moment"], "fork");
        assert_eq!(after["linked"], false, "no pool: no sync around it");
        assert_eq!(after["lastSync"], Value::Null);
        assert_eq!(archiver.depth(), 0);
        // A workspace no longer followed: a job of it finishing is ignored.
        archiver.queue_archive(&key, ArchiveAsk::at(Reason::Idle));
        archiver.removed(&key);
        let late = rx.recv_timeout(wait).expect("the last archive");
        assert!(archiver.job_done(late).is_none());
        assert!(
            archiver.stop(wait),
            "the worker stops once its channel closes"
        );
    }
}

//! Idle-time enrichment, the daemon's side: batches (`enrich::run::run_with`) on a thread of
//! their own at background priority (model calls take seconds; neither signing nor archives
//! ever wait for them), one at a time; each batch's queue comes from the store's catalog,
//! so the thread keeps no state of its own between batches. Its main-thread side, [`Enricher`], owns each workspace's
//! `triggers::EnrichClock`, whether a batch runs, and the last batch's result.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::credentials;

use super::context::{now_ms, WsCtx};
use super::triggers::EnrichClock;

/// One batch for one workspace.
struct EnrichJob {
    ws_dir: PathBuf,
    ctx: Arc<WsCtx>,
    dsh_home: PathBuf,
}

/// A batch done, sent back to the main thread.
pub(super) struct EnrichDone {
    ws_dir: PathBuf,
    result: Result<crate::enrich::run::EnrichReport, String>,
}

/// The redactor is the workspace's, compiled once per configuration load, and the queue
/// comes from the store's catalog — so a batch costs what it examines, not what the store
/// holds.
fn run_enrich(job: &EnrichJob) -> EnrichDone {
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
            Some(&ctx.redactor),
        )
        .map_err(|e| e.to_string())
    })();
    EnrichDone {
        ws_dir: job.ws_dir.clone(),
        result,
    }
}

/// One workspace's enrichment state.
struct WsEnrich {
    ctx: Arc<WsCtx>,
    clock: EnrichClock,
    busy: bool,
    last: Option<Value>,
}

/// The enrich thread's main-thread side (see the module's note).
pub(super) struct Enricher {
    jobs: Sender<EnrichJob>,
    dsh_home: PathBuf,
    workspaces: BTreeMap<PathBuf, WsEnrich>,
}

impl Enricher {
    /// Start the enrich thread; `done` hands each finished batch to the main thread (false:
    /// the main thread is gone, the thread stops).
    pub fn start(
        dsh_home: &Path,
        done: impl Fn(EnrichDone) -> bool + Send + 'static,
    ) -> std::io::Result<Enricher> {
        let (jobs, jobs_rx) = mpsc::channel::<EnrichJob>();
        std::thread::Builder::new()
            .name("enrich".into())
            .spawn(move || {
                crate::enrich::run_in_background();
                for job in jobs_rx {
                    if !done(run_enrich(&job)) {
                        break;
                    }
                }
            })?;
        Ok(Enricher {
            jobs,
            dsh_home: dsh_home.to_path_buf(),
            workspaces: BTreeMap::new(),
        })
    }

    /// A workspace followed, or its configuration (re)loaded: its clock is kept.
    pub fn loaded(&mut self, ws_dir: &Path, ctx: Arc<WsCtx>) {
        match self.workspaces.get_mut(ws_dir) {
            Some(ws) => ws.ctx = ctx,
            None => {
                self.workspaces.insert(
                    ws_dir.to_path_buf(),
                    WsEnrich {
                        ctx,
                        clock: EnrichClock::default(),
                        busy: false,
                        last: None,
                    },
                );
            }
        }
    }

    /// A workspace no longer followed.
    pub fn removed(&mut self, ws_dir: &Path) {
        self.workspaces.remove(ws_dir);
    }

    /// A log of the workspace grew at `at_ms`.
    pub fn on_append(&mut self, ws_dir: &Path, at_ms: i64) {
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            ws.clock.on_append(at_ms);
        }
    }

    /// An archive of the workspace wrote chapters.
    pub fn on_chapters_written(&mut self, ws_dir: &Path) {
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            ws.clock.on_chapters_written();
        }
    }

    /// A push of the workspace succeeded.
    pub fn on_push_ok(&mut self, ws_dir: &Path) {
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            ws.clock.on_push_ok();
        }
    }

    /// When the next batch is due (of a workspace with enrichment on and no batch running).
    pub fn next_deadline(&self) -> Option<i64> {
        self.workspaces
            .values()
            .filter(|ws| !ws.busy && ws.ctx.enrichment_on())
            .filter_map(|ws| {
                ws.clock.due_at(
                    ws.ctx.config.enrichment_trigger,
                    ws.ctx.config.enrichment_idle_ms,
                )
            })
            .min()
    }

    /// Start every batch due at `now`.
    pub fn fire_due(&mut self, now: i64) {
        for (dir, ws) in self.workspaces.iter_mut() {
            if ws.busy || !ws.ctx.enrichment_on() {
                continue;
            }
            let due = ws.clock.due_at(
                ws.ctx.config.enrichment_trigger,
                ws.ctx.config.enrichment_idle_ms,
            );
            if due.is_some_and(|at| at <= now) {
                ws.clock.on_batch_started();
                ws.busy = true;
                let job = EnrichJob {
                    ws_dir: dir.clone(),
                    ctx: Arc::clone(&ws.ctx),
                    dsh_home: self.dsh_home.clone(),
                };
                if self.jobs.send(job).is_err() {
                    ws.busy = false;
                }
            }
        }
    }

    /// A batch is done: record it; the runtime error to log when it stopped or failed.
    pub fn done(&mut self, done: EnrichDone) -> Option<String> {
        let at = crate::time::rfc3339_utc(now_ms());
        let ws = self.workspaces.get_mut(&done.ws_dir)?;
        ws.busy = false;
        match &done.result {
            Ok(report) => {
                let stopped = report.failed + report.timeouts > 0;
                let more = report.queued > report.examined && !stopped;
                ws.clock.on_batch_done(
                    more || stopped,
                    report.backed_off_until_ms.or_else(|| {
                        // A failed batch backs off by the status file's clock; re-read it.
                        crate::enrich::run::read_status(&ws.ctx.store)
                            .ok()
                            .flatten()?
                            .backoff_until_ms
                    }),
                );
                ws.last = Some(json!({
                    "at": at,
                    "annotated": report.annotated.len(),
                    "invalid": report.invalid.len(),
                    "failed": report.failed,
                    "timeouts": report.timeouts,
                    "rulesMined": report.rules_mined.len(),
                    "waiting": report.queued.saturating_sub(report.examined),
                }));
                stopped.then(|| {
                    format!(
                        "enrichment of {} stopped: the endpoint failed {} time(s), timed out {} time(s); chapters keep their values",
                        done.ws_dir.display(),
                        report.failed,
                        report.timeouts
                    )
                })
            }
            Err(e) => {
                ws.clock.on_batch_done(false, None);
                ws.last = Some(json!({"at": at, "error": e}));
                Some(format!(
                    "enrichment of {} failed: {e}",
                    done.ws_dir.display()
                ))
            }
        }
    }

    /// The workspace's fields of `daemon status`.
    pub fn status_into(&self, ws_dir: &Path, out: &mut Map<String, Value>) {
        let ws = self.workspaces.get(ws_dir);
        out.insert("lastEnrich".into(), json!(ws.and_then(|w| w.last.clone())));
        out.insert("enrichBusy".into(), json!(ws.is_some_and(|w| w.busy)));
    }
}

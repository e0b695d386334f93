//! Sync, the daemon's side: one pull or push of a workspace's pool (`pool::sync`), run by the
//! archive worker's thread (one job at a time under the writer lock, as `chapters sync`
//! takes it), and each workspace's sync state: linked, running, the last result.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::credentials;
use crate::pool::{link, sync};

use super::context::{now_ms, WsCtx};

/// What one sync did.
pub(super) struct SyncOutcome {
    pub pull_only: bool,
    pub result: Result<(), String>,
}

/// Pull (`pull_only`) or sync the workspace's pool; nothing when it is not linked.
pub(super) fn run(ctx: &WsCtx, dsh_home: &Path, pull_only: bool) -> SyncOutcome {
    let result = (|| {
        let Some(record) = link::read(ctx.store.dir()).map_err(|e| e.to_string())? else {
            return Ok(());
        };
        let token = match &record.upstream {
            link::Upstream::Network { .. } => {
                credentials::load(dsh_home, &ctx.identity.project_key).map_err(|e| e.to_string())?
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

/// One workspace's sync state (the main thread's).
#[derive(Default)]
pub(super) struct SyncState {
    /// The workspace has a pool (`pool.json`), read at load and after each job.
    pub linked: bool,
    /// A sync job is queued or running.
    pub busy: bool,
    /// The last sync's result, for `status`.
    pub last: Option<Value>,
}

impl SyncState {
    /// Keep a finished sync's result; the runtime error to log when it failed.
    pub fn record(
        &mut self,
        s: &SyncOutcome,
        at: &str,
        consecutive_failures: u32,
    ) -> Option<String> {
        self.last = Some(json!({
            "at": at,
            "pullOnly": s.pull_only,
            "ok": s.result.is_ok(),
            "error": s.result.as_ref().err(),
            "consecutiveFailures": consecutive_failures,
        }));
        s.result.as_ref().err().map(|e| {
            format!(
                "{} failed (retried after a backoff; the archive is not affected): {e}",
                if s.pull_only { "pull" } else { "sync" }
            )
        })
    }
}

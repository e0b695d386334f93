//! What an archive, a sync or an enrichment batch of one workspace needs, resolved once per
//! (re)load and shared by the daemon's components (`Arc<WsCtx>`): the follower signs with its
//! redactor, the worker archives and syncs with it, the enrich thread runs batches with it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::config::Config;
use crate::identity::Identity;
use crate::pool::link;
use crate::redact::Redactor;
use crate::store::Store;

use super::triggers::Timing;

pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(super) fn mtime_ms(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let d = modified.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

/// Everything an archive or sync of one workspace needs, resolved once per (re)load.
pub(super) struct WsCtx {
    pub workspace: PathBuf,
    pub workspace_str: String,
    pub config: Config,
    pub identity: Identity,
    pub harness_id: String,
    pub redactor: Redactor,
    pub store: Store,
}

impl WsCtx {
    pub fn load(
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

    pub fn timing(&self) -> Timing {
        Timing {
            idle_archive_ms: self.config.idle_archive_ms,
            sync_debounce_ms: self.config.sync_debounce_ms,
        }
    }

    pub fn linked(&self) -> bool {
        link::read(self.store.dir()).ok().flatten().is_some()
    }

    /// Enrichment runs here only with an endpoint, switched on for this machine.
    pub fn enrichment_on(&self) -> bool {
        self.config.enrichment_endpoint.is_some() && self.config.enrichment_enabled
    }
}

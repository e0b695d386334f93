//! `chapters status`: what the store holds, what waits, and who this project is.
//! Shell: reads the store and the session logs; writes nothing.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::config::Config;
use crate::identity::Identity;
use crate::session::discover;
use crate::session::reader::{LogItem, ReaderOptions, ResumePoint};
use crate::source::{Harness, SourceOptions};
use crate::store::{Store, StoreCounts, MIRROR_DIR};
use crate::turn::TurnAssembler;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IdentityStatus {
    pub project_key: String,
    pub project_key_source: String,
    /// Where the key came from: the config file, the remote and its `.git/config`, or the path.
    pub origin: String,
    pub canonical: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStatus {
    pub session_id: String,
    pub log: PathBuf,
    pub generation: u32,
    pub completed_turns: u64,
    /// Completed turns whose range no chapter covers yet.
    pub unarchived_turns: u64,
    pub in_flight: Option<(u64, u64)>,
    /// Set when the log could not be read to the end (the archive will refuse it too).
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    pub workspace: PathBuf,
    pub enabled: bool,
    pub identity: IdentityStatus,
    pub harness_id: String,
    /// The pool, when linked; `null` means none is linked.
    pub upstream: Option<String>,
    pub mirror: PathBuf,
    pub mirror_exists: bool,
    /// `linked` or `local-only`.
    pub mode: String,
    /// Last sync result as a machine-readable code: `never-linked`, `never-synced`, `ok`,
    /// or a failure code (`network`, `auth`, `diverged`, `pool-missing`, `pool-replaced`, …).
    pub last_sync_code: String,
    pub last_sync_at: Option<String>,
    pub last_sync_detail: Option<String>,
    /// What to do about the last sync's failure.
    pub last_sync_hint: Option<String>,
    pub visibility: Option<String>,
    /// Store files the pool lacks as of the last sync, by kind; `null` when not linked.
    pub pending_publish: Option<std::collections::BTreeMap<String, u64>>,
    /// The loud warning: the pool's project.yml names another projectKey.
    pub identity_warning: Option<String>,
    /// The environment's `CHAPTERS_HARNESS_ID` and the config files' `harnessId` disagree:
    /// this shell speaks as another machine than the daemon and `chapters mcp`.
    pub harness_id_warning: Option<String>,
    pub store: Option<StoreCounts>,
    pub sessions: Vec<SessionStatus>,
    pub pending_turns: u64,
    /// Model enrichment: `null` when no endpoint is configured (enrichment off).
    pub enrichment: Option<EnrichmentStatus>,
    /// The background daemon of this `DSH_HOME`, asked over its socket.
    pub daemon: DaemonSummary,
    /// The vocabulary's merge candidates (record §6.3) over the documents the last search or
    /// sync read; `null` without a store. Shadow mode (`vocabApply: false`) only reports them.
    pub vocabulary: Option<VocabularyStatus>,
    /// The documents the last search or sync read (the search table as last written; status
    /// writes nothing, so it does not refresh it); `null` without a store.
    pub documents: Option<DocumentCounts>,
}

/// Documents of this project's door by where they were read, and the files that could not
/// be read as documents (named by `chapters search`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentCounts {
    /// In this machine's store.
    pub store: u64,
    /// In the pool mirror (other machines' — the original TypeScript plugin's too).
    pub pool: u64,
    pub unreadable: u64,
}

fn document_counts(store: &Store, identity: &Identity, linked: bool) -> DocumentCounts {
    let table = crate::index::table::Table::open(store.dir());
    let (local, _) = table.counts(&identity.project_key, false, false);
    let (all, _) = table.counts(&identity.project_key, false, linked);
    DocumentCounts {
        store: local,
        pool: all - local,
        unreadable: table.unreadable().len() as u64,
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSummary {
    pub running: bool,
    pub pid: Option<u64>,
    pub uptime_secs: Option<u64>,
    /// Whether it follows this workspace's sessions, and how many.
    pub follows_this_workspace: bool,
    pub sessions: u64,
    pub signing_p99_ms: Option<f64>,
    /// This workspace's last archive, sync and enrichment as the daemon saw them.
    pub last_archive: Option<serde_json::Value>,
    pub last_sync: Option<serde_json::Value>,
    pub last_enrich: Option<serde_json::Value>,
    pub errors: usize,
    /// Why it is not running (or could not be asked), and what to do.
    pub note: Option<String>,
}

/// Ask the daemon (if one runs for this home) what it does for this workspace.
fn daemon_summary(dsh_home: &Path, workspace: &Path) -> DaemonSummary {
    let mut out = DaemonSummary {
        running: false,
        pid: None,
        uptime_secs: None,
        follows_this_workspace: false,
        sessions: 0,
        signing_p99_ms: None,
        last_archive: None,
        last_sync: None,
        last_enrich: None,
        errors: 0,
        note: None,
    };
    let socket = crate::daemon::Paths::new(dsh_home).socket;
    let asked = crate::daemon::control::Client::connect(&socket, std::time::Duration::from_secs(2))
        .and_then(|mut c| c.request(crate::daemon::control::Request::Status, &socket));
    let status = match asked {
        Ok(status) => status,
        Err(_) => {
            out.note = Some(
                "not running: `chapters daemon` (or `chapters daemon install`) signs and archives as turns end; until then run `chapters archive`".into(),
            );
            return out;
        }
    };
    out.running = true;
    out.pid = status["pid"].as_u64();
    out.uptime_secs = status["uptimeSecs"].as_u64();
    out.signing_p99_ms = status["signing"]["p99Ms"].as_f64();
    out.errors = status["lastErrors"].as_array().map_or(0, Vec::len);
    let here = workspace.to_string_lossy();
    if let Some(ws) = status["workspaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|w| w["workspace"].as_str() == Some(here.as_ref()))
    {
        out.follows_this_workspace = ws["followed"].as_bool().unwrap_or(false);
        out.sessions = ws["sessions"].as_array().map_or(0, |s| s.len() as u64);
        out.last_archive = Some(ws["lastArchive"].clone()).filter(|v| !v.is_null());
        out.last_sync = Some(ws["lastSync"].clone()).filter(|v| !v.is_null());
        out.last_enrich = Some(ws["lastEnrich"].clone()).filter(|v| !v.is_null());
        if !out.follows_this_workspace {
            out.note = ws["notFollowed"].as_str().map(str::to_owned);
        }
    } else {
        out.note = Some("running, but it has seen no session of this workspace yet".into());
    }
    out
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrichmentStatus {
    pub endpoint: String,
    pub model: Option<String>,
    pub enabled: bool,
    /// Counts and backoff from the last batches; `null` when none has run here.
    pub batches: Option<crate::enrich::run::EnrichStatus>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VocabularyStatus {
    /// `vocabApply`: false = shadow (reported here, nothing written).
    pub apply: bool,
    pub candidates: Vec<crate::index::vocab::Candidate>,
    /// Set when the candidates could not be computed (the report still stands).
    pub error: Option<String>,
}

/// Candidates from the search table as last written (status writes nothing, so it does not
/// refresh it) and every machine's curation.
fn vocabulary_status(
    store: &Store,
    workspace: &Path,
    identity: &Identity,
    linked: bool,
    config: &Config,
) -> VocabularyStatus {
    let table = crate::index::table::Table::open(store.dir());
    let mirror = workspace.join(MIRROR_DIR);
    let params = crate::index::vocab::VocabParams::from_config(config);
    let result =
        crate::index::build::read_curation(store.dir(), linked.then_some(mirror.as_path()))
            .and_then(|inputs| {
                crate::index::build::vocabulary_candidates(
                    &table,
                    &identity.project_key,
                    linked,
                    &inputs.curation,
                    params,
                )
            });
    let (candidates, error) = match result {
        Ok(c) => (c.into_inner(), None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    VocabularyStatus {
        apply: config.vocab_apply,
        candidates,
        error,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    Discover(#[from] discover::DiscoverError),
}

pub fn status(
    workspace: &Path,
    dsh_home: &Path,
    config: &Config,
    identity: &Identity,
    harness_id: &str,
) -> Result<StatusReport, StatusError> {
    let store = Store::open(workspace).ok();
    let counts = store.as_ref().map(Store::counts).transpose()?;
    let ws = workspace.to_string_lossy().into_owned();
    let mut sessions = Vec::new();
    let (logs, unreadable) =
        discover::list_workspace_sessions_and_unreadable(dsh_home, &ws, &config.path_map)?;
    // An unreadable session directory is reported as that session's error, not the run's.
    for (dir, e) in unreadable {
        sessions.push(SessionStatus {
            session_id: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            log: dir,
            generation: 0,
            completed_turns: 0,
            unarchived_turns: 0,
            in_flight: None,
            error: Some(e.to_string()),
        });
    }
    let mut logs: Vec<(Harness, discover::SessionLog)> =
        logs.into_iter().map(|l| (Harness::Dsh, l)).collect();
    logs.extend(crate::source::other_harness_sessions(&ws, config).0);
    // Chapters live under the root of each session tree: resolve roots as the archive does.
    let headers: Vec<Option<crate::session::Header>> = logs
        .iter()
        .map(|(harness, l)| match harness {
            Harness::Dsh => crate::archive::read_header(&l.log, config).ok(),
            _ => crate::source::read_header(*harness, &l.log, source_options(config))
                .ok()
                .flatten(),
        })
        .collect();
    let parents: std::collections::BTreeMap<String, Option<String>> = headers
        .iter()
        .flatten()
        .map(|h| (h.id.clone(), h.parent_session.clone()))
        .collect();
    for ((harness, log), header) in logs.iter().zip(&headers) {
        sessions.push(session_status(
            store.as_ref(),
            *harness,
            log,
            header.as_ref(),
            &parents,
            config,
        ));
    }
    let pending_turns = sessions.iter().map(|s| s.unarchived_turns).sum();
    let mirror = workspace.join(MIRROR_DIR);
    let link = store
        .as_ref()
        .and_then(|s| crate::pool::link::read(s.dir()).ok().flatten());
    let last = store.as_ref().and_then(crate::pool::sync::read_status);
    let pending_publish = match (&store, &link) {
        (Some(store), Some(link)) => {
            crate::pool::sync::pending(store, workspace, identity, link.visibility)
        }
        _ => None,
    };
    let last_sync_code = match (&link, &last) {
        (None, _) => "never-linked".to_owned(),
        (Some(_), None) => "never-synced".to_owned(),
        (Some(_), Some(s)) => s.code.as_str().to_owned(),
    };
    let mode = match (&link, &last) {
        (Some(_), Some(s)) if !s.code.is_failure() => "linked",
        (Some(_), None) => "linked",
        _ => "local-only",
    };
    let identity_warning = last.as_ref().and_then(|s| s.pool_project_key.as_ref()).map(|key| {
        format!(
            "THIS CHECKOUT'S projectKey {} DIFFERS FROM THE POOL'S {key}: nothing is published until they agree",
            identity.project_key
        )
    });
    Ok(StatusReport {
        workspace: workspace.to_path_buf(),
        enabled: store.is_some(),
        identity: IdentityStatus {
            project_key: identity.project_key.clone(),
            project_key_source: identity.source.as_str().to_owned(),
            origin: identity.origin.clone(),
            canonical: identity.canonical.clone(),
        },
        harness_id: harness_id.to_owned(),
        upstream: link
            .as_ref()
            .map(|l| l.upstream.describe())
            .or_else(|| config.knowledge_remote.clone()),
        mirror_exists: mirror.join(".git").is_dir(),
        mirror,
        mode: mode.to_owned(),
        last_sync_code,
        last_sync_at: last.as_ref().map(|s| s.at.clone()),
        last_sync_detail: last.as_ref().and_then(|s| s.detail.clone()),
        last_sync_hint: last.as_ref().and_then(|s| s.hint.clone()),
        visibility: link.as_ref().map(|l| l.visibility.as_str().to_owned()),
        pending_publish,
        identity_warning,
        harness_id_warning: None,
        vocabulary: store
            .as_ref()
            .map(|s| vocabulary_status(s, workspace, identity, link.is_some(), config)),
        documents: store
            .as_ref()
            .map(|s| document_counts(s, identity, link.is_some())),
        store: counts,
        sessions,
        pending_turns,
        daemon: daemon_summary(dsh_home, workspace),
        enrichment: config
            .enrichment_endpoint
            .as_ref()
            .map(|endpoint| EnrichmentStatus {
                endpoint: endpoint.clone(),
                model: config.enrichment_model.clone(),
                enabled: config.enrichment_enabled,
                batches: store
                    .as_ref()
                    .and_then(|s| crate::enrich::run::read_status(s).ok().flatten()),
            }),
    })
}

fn source_options(config: &Config) -> SourceOptions {
    SourceOptions {
        reader: ReaderOptions {
            max_line_bytes: config.max_event_bytes as usize,
        },
        quiet_after_ms: Some(config.idle_archive_ms),
    }
}

fn session_status(
    store: Option<&Store>,
    harness: Harness,
    log: &discover::SessionLog,
    header: Option<&crate::session::Header>,
    parents: &std::collections::BTreeMap<String, Option<String>>,
    config: &Config,
) -> SessionStatus {
    let mut out = SessionStatus {
        session_id: log
            .session_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        log: log.log.clone(),
        generation: log.generation,
        completed_turns: 0,
        unarchived_turns: 0,
        in_flight: None,
        error: None,
    };
    if harness != Harness::Dsh {
        out.session_id = log.session_id.clone();
    }
    let opts = source_options(config);
    let mut reader = match crate::source::open(harness, &log.log, ResumePoint::default(), opts) {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let mut assembler = TurnAssembler::new();
    let mut ends = Vec::new();
    loop {
        match reader.next_item() {
            Ok(Some(LogItem::Header(h))) => out.session_id = h.id,
            Ok(Some(LogItem::Event(e))) => {
                if let Some(turn) = assembler.push(e) {
                    ends.push(turn.end_seq);
                }
            }
            Ok(None) => break,
            Err(e) => {
                out.error = Some(e.to_string());
                break;
            }
        }
    }
    out.in_flight = assembler.in_flight();
    // A seeded fork's first events are its parent's: never this session's to archive.
    let seed_end = header
        .filter(|h| h.is_seeded)
        .and_then(|h| h.seed_length)
        .unwrap_or(0);
    ends.retain(|&end| end >= seed_end);
    out.completed_turns = ends.len() as u64;
    let archived_hi = store.zip(header).and_then(|(store, h)| {
        let root = crate::archive::root_session(&h.id, parents);
        store
            .archived(&root)
            .ok()?
            .into_iter()
            .filter(|d| d.kind == "chapter" && d.session_id == h.id)
            .map(|d| d.seq_hi)
            .max()
    });
    out.unarchived_turns = ends
        .iter()
        .filter(|&&end| archived_hi.is_none_or(|hi| end > hi))
        .count() as u64;
    out
}

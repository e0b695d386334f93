//! `chapters status`: what the store holds, what waits, and who this project is.
//! Shell: reads the store and the session logs; writes only its own cache
//! (`<store>/.status-cache.json`, see [`cache`]), so a log or folder unchanged since the last
//! status is not read again.

pub mod cache;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

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
    #[serde(serialize_with = "crate::names::path_text")]
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
    #[serde(serialize_with = "crate::names::path_text")]
    pub workspace: PathBuf,
    pub enabled: bool,
    pub identity: IdentityStatus,
    pub harness_id: String,
    /// The pool, when linked; `null` means none is linked.
    pub upstream: Option<String>,
    #[serde(serialize_with = "crate::names::path_text")]
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
    /// does not refresh it); `null` without a store.
    pub documents: Option<DocumentCounts>,
    /// What this run read again and what it took from the status cache.
    pub status_cache: cache::CacheCounts,
}

/// Documents of this project's door by where they were read, and the files that could not
/// be read as documents (named by `chapters search`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentCounts {
    /// In this machine's store.
    pub store: u64,
    /// In the pool mirror (other machines' — the original TypeScript plugin's too).
    pub pool: u64,
    pub unreadable: u64,
}

/// From the store's catalog when its metadata is whole (it knows every document of the
/// store and the mirror as they are now), else from the search table as last written.
fn document_counts(store: &Store, identity: &Identity, linked: bool) -> DocumentCounts {
    if let Some(c) =
        crate::store::catalog::document_counts(store.dir(), &identity.project_key, linked)
    {
        return DocumentCounts {
            store: c.store,
            pool: c.pool,
            unreadable: c.unreadable,
        };
    }
    table_counts(store, &identity.project_key, linked)
}

fn table_counts(store: &Store, project_key: &str, linked: bool) -> DocumentCounts {
    let table = crate::catalog::table::Table::open(store.dir());
    let (local, _) = table.counts(project_key, false, false);
    let (all, _) = table.counts(project_key, false, linked);
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
    /// Logs of other harnesses (Claude Code, Codex) of this workspace that vanished before
    /// their turns were archived: `{harness, sessionId, log, turns, at}` each.
    pub vanished: Vec<serde_json::Value>,
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
        vanished: Vec::new(),
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
        out.vanished = ws["vanished"].as_array().cloned().unwrap_or_default();
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

#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VocabularyStatus {
    /// `vocabApply`: false = shadow (reported here, nothing written).
    pub apply: bool,
    pub candidates: Vec<crate::topics::vocab::Candidate>,
    /// Set when the candidates could not be computed (the report still stands).
    pub error: Option<String>,
}

/// Candidates from the search table as last written (status writes only its own cache, so it does not
/// refresh it) and every machine's curation.
fn vocabulary_status(
    store: &Store,
    workspace: &Path,
    identity: &Identity,
    linked: bool,
    config: &Config,
) -> VocabularyStatus {
    let table = crate::catalog::table::Table::open(store.dir());
    let mirror = workspace.join(MIRROR_DIR);
    let params = crate::topics::vocab::VocabParams::from_config(config);
    let result =
        crate::topics::build::read_curation(store.dir(), linked.then_some(mirror.as_path()))
            .and_then(|inputs| {
                crate::topics::build::vocabulary_candidates(
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
    let mut cache = cache::StatusCache::load(store.as_ref());
    let counts = store.as_ref().map(|s| cache.store_counts(s)).transpose()?;
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
    // Each log read once (or taken from the cache when unchanged): its header as the archive
    // reads it, then its turns.
    let reads: Vec<cache::LogRead> = logs
        .iter()
        .map(|(harness, l)| {
            let dsh = *harness == Harness::Dsh;
            cache.log(&l.log, dsh, |prev| read_log(*harness, l, config, prev))
        })
        .collect();
    // Chapters live under the root of each session tree: resolve roots as the archive does.
    let parents: std::collections::BTreeMap<String, Option<String>> = reads
        .iter()
        .filter_map(|r| r.header.as_ref())
        .map(|h| (h.id.clone(), h.parent_session.clone()))
        .collect();
    for ((harness, log), read) in logs.iter().zip(reads) {
        sessions.push(session_status(
            store.as_ref(),
            &mut cache,
            *harness,
            log,
            read,
            &parents,
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
    let vocabulary = store.as_ref().map(|s| {
        let linked = link.is_some();
        let params = format!(
            "{} {linked} {} {} {}",
            identity.project_key, config.vocab_apply, config.vocab_co_min, config.vocab_overlap_min
        );
        let key = cache::vocabulary_key(s.dir(), linked.then_some(mirror.as_path()), params);
        cache.vocabulary(key, || {
            vocabulary_status(s, workspace, identity, linked, config)
        })
    });
    let documents = store.as_ref().map(|s| {
        let linked = link.is_some();
        let key = cache::documents_key(s.dir(), format!("{} {linked}", identity.project_key));
        cache.documents(key, || document_counts(s, identity, linked))
    });
    let daemon = daemon_summary(dsh_home, workspace);
    let status_cache = cache.counts.clone();
    cache.save();
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
        vocabulary,
        documents,
        store: counts,
        sessions,
        pending_turns,
        daemon,
        status_cache,
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

/// A read of a session log: its header as the archive reads it, the end of every completed
/// turn, the turn in flight, and the error that stopped the read. With `prev` (the same DSH
/// log, grown since, its bytes before the anchor unchanged: see `cache::StatusCache::log`),
/// only what follows the last turn boundary `prev` saw is read, as the daemon's follower
/// resumes; a failure there falls back to a whole read.
fn read_log(
    harness: Harness,
    log: &discover::SessionLog,
    config: &Config,
    prev: Option<&cache::LogRead>,
) -> cache::LogRead {
    if let Some(read) = prev.and_then(|p| resume_log(log, config, p)) {
        return read;
    }
    let opts = source_options(config);
    let header = match harness {
        Harness::Dsh => crate::archive::read_header(&log.log, config).ok(),
        _ => crate::source::read_header(harness, &log.log, opts)
            .ok()
            .flatten(),
    };
    let mut out = cache::LogRead {
        header: header.as_ref().map(cache::HeaderIds::of),
        read_id: None,
        ends: Vec::new(),
        turns: Vec::new(),
        in_flight: None,
        error: None,
        anchor: None,
    };
    let reader = match crate::source::open(harness, &log.log, ResumePoint::default(), opts) {
        Ok(r) => r,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    let first = cache::Anchor {
        byte_offset: 0,
        next_seq: 0,
        first_seq: 0,
        header_seen: false,
        tail: String::new(),
    };
    if let Err(e) = read_turns(reader, &mut out, first, harness == Harness::Dsh) {
        out.error = Some(e.to_string());
    }
    if out.error.is_some() {
        out.anchor = None;
    }
    out
}

/// Read on from `prev`'s anchor; `None` when that cannot be done cleanly.
fn resume_log(
    log: &discover::SessionLog,
    config: &Config,
    prev: &cache::LogRead,
) -> Option<cache::LogRead> {
    let anchor = prev.anchor.clone()?;
    let point = ResumePoint {
        byte_offset: anchor.byte_offset,
        next_seq: anchor.next_seq,
        header_seen: anchor.header_seen,
    };
    let options = source_options(config);
    let reader =
        crate::session::reader::LogReader::open_with(&log.log, point, options.reader).ok()?;
    let mut out = prev.clone();
    let kept = out
        .ends
        .iter()
        .zip(&out.turns)
        .filter(|&(&end, _)| end < anchor.first_seq)
        .map(|(&end, &turn)| (end, turn));
    (out.ends, out.turns) = kept.unzip();
    out.in_flight = None;
    out.anchor = None;
    read_turns(Box::new(reader), &mut out, anchor, true).ok()?;
    Some(out)
}

/// Assemble turns from `reader`, skipping events before `from.first_seq` (a resumed reader
/// starts at the frame holding them), and keep, for DSH logs (`anchors`), the point a later
/// read may resume from: the frame where the last turn not yet complete began.
fn read_turns(
    mut reader: Box<dyn crate::source::EventSource>,
    out: &mut cache::LogRead,
    from: cache::Anchor,
    anchors: bool,
) -> Result<(), crate::session::reader::ReadError> {
    let mut assembler = TurnAssembler::new();
    let mut anchor = from.clone();
    let mut high: Option<u64> = None;
    loop {
        let before = reader.resume_point();
        let item = match reader.next_item() {
            Ok(item) => item,
            Err(e) => {
                out.in_flight = assembler.in_flight();
                return Err(e);
            }
        };
        match item {
            Some(LogItem::Header(h)) => out.read_id = Some(h.id),
            Some(LogItem::Event(e)) => {
                if e.seq < from.first_seq {
                    continue;
                }
                // (A repeated seq is dropped by the assembler: it opens nothing.)
                if assembler.in_flight().is_none() && high.is_none_or(|h| e.seq > h) {
                    // This event opens a turn: a later read resumes at the frame holding it.
                    anchor = cache::Anchor {
                        byte_offset: before.byte_offset,
                        next_seq: before.next_seq,
                        first_seq: e.seq,
                        header_seen: before.header_seen,
                        tail: String::new(),
                    };
                }
                high = Some(high.map_or(e.seq, |h| h.max(e.seq)));
                if let Some(turn) = assembler.push(e) {
                    out.ends.push(turn.end_seq);
                    out.turns.push(turn.turn);
                }
            }
            None => break,
        }
    }
    out.in_flight = assembler.in_flight();
    if assembler.in_flight().is_none() {
        let reached = reader.resume_point();
        anchor = cache::Anchor {
            byte_offset: reached.byte_offset,
            next_seq: reached.next_seq,
            first_seq: reached.next_seq,
            header_seen: reached.header_seen,
            tail: String::new(),
        };
    }
    out.anchor = anchors.then_some(anchor);
    Ok(())
}

fn session_status(
    store: Option<&Store>,
    cache: &mut cache::StatusCache,
    harness: Harness,
    log: &discover::SessionLog,
    read: cache::LogRead,
    parents: &std::collections::BTreeMap<String, Option<String>>,
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
        in_flight: read.in_flight,
        error: read.error,
    };
    if harness != Harness::Dsh {
        out.session_id = log.session_id.clone();
    }
    if let Some(id) = read.read_id {
        out.session_id = id;
    }
    let header = read.header;
    // A seeded fork's first events are its parent's: never this session's to archive.
    let seed_end = header
        .as_ref()
        .filter(|h| h.is_seeded)
        .and_then(|h| h.seed_length)
        .unwrap_or(0);
    let numbered = read.turns.len() == read.ends.len();
    let turns: Vec<(u64, u64)> = read
        .ends
        .iter()
        .enumerate()
        .filter(|&(_, &end)| end >= seed_end)
        .map(|(i, &end)| (read.turns.get(i).copied().unwrap_or(0), end))
        .collect();
    out.completed_turns = turns.len() as u64;
    let last = store.zip(header.as_ref()).and_then(|(store, h)| {
        let root = crate::archive::root_session(&h.id, parents);
        cache.last_chapter(store, &root, &h.id)
    });
    // As the archive decides (`session::renumber`): turn numbers outlive a DSH log's
    // renumbering by a format migration, so a chapter naming its turns anchors by them.
    let anchor = last.map(|l| crate::session::renumber::Anchor::of_chapter(l.seq_hi, l.turn));
    let by_turn = harness == Harness::Dsh && numbered && anchor.is_some_and(|(_, named)| named);
    let mut covered =
        crate::session::renumber::Covered::new(anchor.map(|(anchor, _)| anchor), by_turn);
    out.unarchived_turns = turns
        .iter()
        .filter(|&&(turn, end)| !covered.covers(turn, end))
        .count() as u64;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::catalog::put_document;

    fn doc(title: &str, project_key: Option<&str>) -> String {
        let pk = project_key.map_or(String::new(), |pk| format!("projectKey: \"{pk}\"\n"));
        format!("---\ntitle: \"{title}\"\nkind: chapter\n{pk}topics: [a]\n---\nbody\n")
    }

    /// Status counts the same documents from the catalog as from the search table, where a
    /// wrong column would move one: a store document of another project, files that are not
    /// documents in the store and the mirror, another project's mirror document, a pool
    /// document naming no project (its folder's). A document left in the mirror's pack
    /// counts as the project its pool path names.
    #[test]
    fn the_catalog_counts_what_the_search_table_counts() {
        let tmp = tempfile::tempdir().expect("tmp");
        let ws = tmp.path();
        let store = Store::init(ws).expect("init");
        for (rel, text) in [
            (".dsh-chapters/s1/chapters/001-a.md", doc("A", Some("pk"))),
            (
                ".dsh-chapters/s1/chapters/002-b.md",
                doc("B", Some("other")),
            ),
            (
                ".dsh-chapters/s1/chapters/003-c.md",
                "no frontmatter\n".into(),
            ),
            (".dsh-chapters/rules/r-1.md", doc("R1", Some("pk"))),
            (
                ".dsh-knowledge/chapters/pk/s9/001-m.md",
                doc("M", Some("pk")),
            ),
            (".dsh-knowledge/chapters/pk/s9/002-bad.md", String::new()),
            (".dsh-knowledge/chapters/pk/s7/001-ts.md", doc("TS", None)),
            (
                ".dsh-knowledge/chapters/other/s8/001-o.md",
                doc("O", Some("other")),
            ),
            (".dsh-knowledge/rules/pk/r-2.md", doc("R2", Some("pk"))),
        ] {
            put_document(ws, rel, &text);
        }
        crate::catalog::table::Table::refresh(ws, true, std::time::Duration::from_secs(5))
            .expect("refresh");
        let want = DocumentCounts {
            store: 2,
            pool: 3,
            unreadable: 2,
        };
        assert_eq!(table_counts(&store, "pk", true), want);
        let catalog = |linked| {
            crate::store::catalog::document_counts(store.dir(), "pk", linked).map(|c| {
                DocumentCounts {
                    store: c.store,
                    pool: c.pool,
                    unreadable: c.unreadable,
                }
            })
        };
        assert_eq!(catalog(true), None, "not filled yet: the table's counts");
        store.fill_catalog();
        assert_eq!(catalog(true), Some(want));
        // Not linked: the mirror is not counted (nor its unreadable file).
        assert_eq!(
            catalog(false),
            Some(DocumentCounts {
                store: 2,
                pool: 0,
                unreadable: 1
            })
        );
        // Received and left in the pack: counted by the project its pool path names.
        store.record_mirror_packed(&[
            ("chapters/pk/s6", &["001-p.md"]),
            ("chapters/other/s5", &["001-q.md"]),
        ]);
        assert_eq!(catalog(true).map(|c| c.pool), Some(4));
    }
}

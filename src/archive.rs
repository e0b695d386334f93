//! The archive door (shell): discover the workspace's sessions, sign every completed,
//! unsigned turn, compose every completed, unarchived turn into chapters and write them.
//!
//! Two streaming passes per session keep memory bounded whatever the log size: pass 1
//! signs (only signatures are kept), pass 2 re-reads from the resume point of the first
//! unarchived turn and holds one chapter's events at a time. Every write goes through the
//! store, which accepts only `Redacted` values. The whole run holds the writer lock.
//!
//! Crash safety: signatures are appended (one write + fsync) before any chapter is
//! written, and within a chapter artifacts and plans are written before the chapter file,
//! which is the commit of its range. A kill at any point leaves either a complete chapter
//! or none; re-rendering is deterministic, so a re-run rewrites an orphaned plan or
//! artifact with identical bytes (a no-op) and never numbers anything twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::compose::{self, ComposeConfig, ComposeError};
use crate::config::Config;
use crate::identity::Identity;
use crate::redact::{RedactionCounts, Redactor};
use crate::render::{self, ChapterMeta};
use crate::session::discover::{self, SessionLog};
use crate::session::reader::{LogItem, LogReader, ReadError, ReadNote, ReaderOptions, ResumePoint};
use crate::session::Header;
use crate::signature::{self, Signature, SIGNATURE_VERSION};
use crate::store::{Store, StoreError};
use crate::turn::{CompletedTurn, TurnAssembler};

/// Why an archive runs (recorded in the report and the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Reason {
    Manual,
    Fork,
    Compaction,
    Idle,
}

/// Everything one archive run needs, resolved by the caller.
pub struct ArchiveContext<'a> {
    pub workspace: &'a Path,
    pub dsh_home: &'a Path,
    pub config: &'a Config,
    pub identity: &'a Identity,
    pub harness_id: &'a str,
    /// RFC 3339 time stamp recorded on new signatures.
    pub now: &'a str,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionReport {
    pub session_id: String,
    pub root_session_id: String,
    pub log: PathBuf,
    pub generation: u32,
    pub turns_signed: u64,
    pub turns_archived: u64,
    pub chapters: Vec<String>,
    pub plans: Vec<String>,
    pub artifacts_written: u64,
    /// The in-flight turn's seqs, left for a later archive.
    pub in_flight: Option<(u64, u64)>,
    pub omitted_injections: u64,
    pub redactions: BTreeMap<String, u64>,
    pub notes: Vec<String>,
    /// Session rules captured from `rulesMarkerPrefix` lines of newly signed turns.
    pub session_rules: Vec<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionFailure {
    pub session_dir: PathBuf,
    pub error: String,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveReport {
    pub reason: Option<Reason>,
    pub sessions: Vec<SessionReport>,
    pub failures: Vec<SessionFailure>,
}

impl ArchiveReport {
    pub fn chapters_written(&self) -> usize {
        self.sessions.iter().map(|s| s.chapters.len()).sum()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(transparent)]
    Discover(#[from] discover::DiscoverError),
    #[error(transparent)]
    Compose(#[from] ComposeError),
    #[error(transparent)]
    Redact(#[from] crate::redact::RedactError),
    #[error("session log {file} has no header line; nothing to archive there")]
    NoHeader { file: PathBuf },
    #[error("session log {file}: session id {id:?} holds `/`, `\\` or `..`; refusing to use it as a directory name")]
    UnsafeSessionId { file: PathBuf, id: String },
    #[error("no session named {id} in this workspace's logs ({dir}); `chapters status` lists what is there")]
    NoSuchSession { id: String, dir: PathBuf },
    #[error("collections/{session_id}.jsonl line {line}: not a signature ({detail}); the ledger is damaged — restore it from a backup")]
    BadSignatureLine {
        session_id: String,
        line: usize,
        detail: String,
    },
    #[error("session log {file} ends at seq {log_end:?} but turns up to seq {signed_hi} were already signed from it: the log was truncated or replaced. Nothing archived was touched; restore the log or archive its replacement under a new session")]
    LogTruncated {
        file: PathBuf,
        log_end: Option<u64>,
        signed_hi: u64,
    },
    #[error("session log {file} changed between two reads (seq {seq} no longer completes a turn); archive again")]
    LogChanged { file: PathBuf, seq: u64 },
    #[error("session rules: {0}")]
    Rules(#[from] crate::rules::store::RulesStoreError),
}

/// A session found on disk, with its header.
struct FoundSession {
    log: SessionLog,
    header: Header,
}

/// Archive every session of the workspace (or only `only`). Per-session failures are
/// collected in the report and do not stop the other sessions; infrastructure failures
/// (the lock, the store) return an error.
pub fn archive_workspace(
    ctx: &ArchiveContext<'_>,
    only: Option<&str>,
    reason: Reason,
    progress: &dyn Fn(&str),
) -> Result<ArchiveReport, ArchiveError> {
    let store = Store::open(ctx.workspace)?;
    let _lock = store.lock(Duration::from_millis(ctx.config.writer_lock_timeout_ms))?;
    let redactor = Redactor::new(&ctx.config.redaction_patterns)?;
    let workspace_str = ctx.workspace.to_string_lossy().into_owned();
    let logs = discover::list_sessions(ctx.dsh_home, &workspace_str)?;

    let mut report = ArchiveReport {
        reason: Some(reason),
        ..ArchiveReport::default()
    };
    let mut found = Vec::new();
    for log in logs {
        match read_header(&log.log, ctx.config) {
            Ok(header) => found.push(FoundSession { log, header }),
            Err(e) => report.failures.push(SessionFailure {
                session_dir: log.session_dir.clone(),
                error: e.to_string(),
            }),
        }
    }
    if let Some(id) = only {
        found.retain(|s| s.header.id == id);
        if found.is_empty() {
            return Err(ArchiveError::NoSuchSession {
                id: id.to_owned(),
                dir: discover::workspace_sessions_dir(ctx.dsh_home, &workspace_str),
            });
        }
    }
    let parents: BTreeMap<String, Option<String>> = found
        .iter()
        .map(|s| (s.header.id.clone(), s.header.parent_session.clone()))
        .collect();

    for s in &found {
        progress(&s.header.id);
        let root = root_session(&s.header.id, &parents);
        match archive_session(ctx, &store, &redactor, s, &root) {
            Ok(r) => report.sessions.push(r),
            Err(e) => {
                tracing::warn!(session = %s.header.id, error = %e, "archive of one session failed");
                report.failures.push(SessionFailure {
                    session_dir: s.log.session_dir.clone(),
                    error: e.to_string(),
                })
            }
        }
    }
    Ok(report)
}

/// The root of a session tree: follow `parentSession` through the sessions we know;
/// a parent we do not have locally is still the root's name (its chapters live there).
pub(crate) fn root_session(id: &str, parents: &BTreeMap<String, Option<String>>) -> String {
    let mut current = id.to_owned();
    // Bounded: a cycle in hostile headers must not loop forever.
    for _ in 0..64 {
        match parents.get(&current) {
            Some(Some(parent)) if parent != &current => current = parent.clone(),
            Some(_) => return current,
            None => return current,
        }
    }
    current
}

fn reader_options(config: &Config) -> ReaderOptions {
    ReaderOptions {
        max_line_bytes: config.max_event_bytes as usize,
    }
}

pub(crate) fn read_header(log: &Path, config: &Config) -> Result<Header, ArchiveError> {
    let mut reader = LogReader::open_with(log, ResumePoint::default(), reader_options(config))?;
    match reader.next_item()? {
        Some(LogItem::Header(h)) => Ok(h),
        _ => Err(ArchiveError::NoHeader {
            file: log.to_path_buf(),
        }),
    }
}

fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && !id.contains('/')
        && !id.contains('\\')
        && !id.contains("..")
        && !id.chars().any(char::is_control)
}

/// Signatures already in the ledger, in order.
fn signed(
    store: &Store,
    root: &str,
    session_id: &str,
) -> Result<(Vec<Signature>, Option<String>), ArchiveError> {
    let read = store.read_collection(root, session_id)?;
    let mut out = Vec::with_capacity(read.lines.len());
    for (i, line) in read.lines.into_iter().enumerate() {
        let sig: Signature =
            serde_json::from_value(line).map_err(|e| ArchiveError::BadSignatureLine {
                session_id: session_id.to_owned(),
                line: i + 1,
                detail: e.to_string(),
            })?;
        out.push(sig);
    }
    Ok((out, read.torn_tail))
}

fn archive_session(
    ctx: &ArchiveContext<'_>,
    store: &Store,
    redactor: &Redactor,
    found: &FoundSession,
    root: &str,
) -> Result<SessionReport, ArchiveError> {
    let session_id = found.header.id.as_str();
    let file = &found.log.log;
    for id in [session_id, root] {
        if !safe_id(id) {
            return Err(ArchiveError::UnsafeSessionId {
                file: file.clone(),
                id: id.to_owned(),
            });
        }
    }
    let mut report = SessionReport {
        session_id: session_id.to_owned(),
        root_session_id: root.to_owned(),
        log: file.clone(),
        generation: found.log.generation,
        ..SessionReport::default()
    };

    // What is already signed and archived for this session.
    let (mut sigs, torn) = signed(store, root, session_id)?;
    if let Some(note) = torn {
        report.notes.push(note);
    }
    let signed_hi = sigs.iter().filter_map(|s| s.seqs.last().copied()).max();
    let archived = store.archived(root)?;
    let archived_hi = archived
        .iter()
        .filter(|d| d.kind == "chapter" && d.session_id == session_id)
        .map(|d| d.seq_hi)
        .max();
    // A seeded fork starts with a copy of its parent's events: those are the parent's.
    let seed_end = if found.header.is_seeded {
        found.header.seed_length.unwrap_or(0)
    } else {
        0
    };
    let first_unarchived = archived_hi.map_or(seed_end, |hi| (hi + 1).max(seed_end));

    // Pass 1: sign completed, unsigned turns; find where the unarchived span starts.
    let mut reader =
        LogReader::open_with(file, ResumePoint::default(), reader_options(ctx.config))?;
    let mut assembler = TurnAssembler::new();
    let mut new_sigs = Vec::new();
    let mut span_resume: Option<ResumePoint> = None;
    // Completed turns before the span: a resumed assembler numbers turns after them.
    let mut completed_before_span = 0u64;
    let mut last_completed_end: Option<u64> = None;
    let rule_capture = crate::rules::store::SessionCapture {
        store,
        workspace: ctx.workspace,
        redactor,
        config: ctx.config,
        project_key: &ctx.identity.project_key,
        harness: ctx.harness_id,
        session_id,
        root_session: root,
    };
    loop {
        let before = reader.resume_point();
        let Some(item) = reader.next_item()? else {
            break;
        };
        let LogItem::Event(event) = item else {
            continue;
        };
        if span_resume.is_none() && event.seq >= first_unarchived {
            span_resume = Some(before);
        }
        if let Some(turn) = assembler.push(event) {
            last_completed_end = Some(turn.end_seq);
            if turn.end_seq < first_unarchived {
                completed_before_span += 1;
            }
            if turn.end_seq < seed_end {
                continue;
            }
            if signed_hi.is_none_or(|hi| turn.end_seq > hi) {
                // The signing point is where `ADD RULE:` lines become session rules (§7.5);
                // written before the signatures, idempotently, so none is ever lost.
                report
                    .session_rules
                    .extend(rule_capture.capture_turn(&turn)?);
                new_sigs.push(signature::sign(
                    &turn,
                    session_id,
                    &ctx.workspace.to_string_lossy(),
                    ctx.now,
                ));
            }
        }
    }
    for note in reader.notes() {
        match note {
            ReadNote::TornTail { file, at } => report.notes.push(format!(
                "{}: torn last frame at byte {at} skipped (a write in progress or a crash); its records are read once complete",
                file.display()
            )),
        }
    }
    report.in_flight = assembler.in_flight();
    let log_end = reader.resume_point().next_seq.checked_sub(1);
    if let Some(hi) = signed_hi {
        if log_end.is_none_or(|end| end < hi) {
            return Err(ArchiveError::LogTruncated {
                file: file.clone(),
                log_end,
                signed_hi: hi,
            });
        }
    }

    // Sign: one batch, one fsync, before any chapter is written. The daemon signs under
    // the collections lock alone, so it may have signed some of these turns since the
    // read above: read the ledger again under that lock and append only what is past it.
    if !new_sigs.is_empty() {
        let collections_lock = store.lock_collections()?;
        let (fresh, _) = signed(store, root, session_id)?;
        if let Some(fresh_hi) = fresh.iter().filter_map(|s| s.seqs.last().copied()).max() {
            new_sigs.retain(|s| s.seqs.last().is_some_and(|&end| end > fresh_hi));
        }
        sigs = fresh;
        if !new_sigs.is_empty() {
            let mut counts = RedactionCounts::default();
            let lines: Vec<_> = new_sigs
                .iter()
                .map(|s| {
                    let value =
                        serde_json::to_value(s).expect("a Signature always serializes to JSON");
                    redactor.redact_json(&value, &mut counts)
                })
                .collect();
            store.append_collection_many(root, session_id, &lines)?;
            add_counts(&mut report.redactions, &counts);
            report.turns_signed = new_sigs.len() as u64;
            sigs.extend(new_sigs);
        }
        // Held only around the read and the append: the daemon signs under it.
        drop(collections_lock);
    }
    debug_assert!(sigs.iter().all(|s| s.v <= SIGNATURE_VERSION));

    // Compose the unarchived, completed span.
    let Some(span_hi) = last_completed_end.filter(|&hi| hi >= first_unarchived) else {
        return Ok(report);
    };
    let span_lo = first_unarchived;
    let all_sigs = sigs;
    let todo: Vec<Signature> = all_sigs
        .iter()
        .filter(|s| {
            s.seqs.first().is_some_and(|&lo| lo >= span_lo)
                && s.seqs.last().is_some_and(|&hi| hi <= span_hi)
        })
        .cloned()
        .collect();
    let cfg = ComposeConfig {
        merge_threshold: ctx.config.merge_threshold,
        chapter_limit: ctx.config.chapter_limit,
    };
    let mut spans = compose::compose(session_id, &todo, span_lo, span_hi, &cfg)?;
    if spans.is_empty() {
        return Ok(report);
    }
    // The first chapter's opening rule, decided against the chapter written before it.
    let last_archived = archived
        .iter()
        .filter(|d| d.kind == "chapter" && d.session_id == session_id)
        .max_by_key(|d| d.seq_hi);
    if let (Some(prev), Some(first)) = (last_archived, spans.first_mut()) {
        let prior: Vec<Signature> = all_sigs
            .iter()
            .filter(|s| {
                s.seqs.first().is_some_and(|&lo| lo >= prev.seq_lo)
                    && s.seqs.last().is_some_and(|&hi| hi <= prev.seq_hi)
            })
            .cloned()
            .collect();
        if let (Some(&member), Some(decision)) =
            (first.members.first(), first.decisions.first_mut())
        {
            if let Some(d) = compose::opening_decision(session_id, &prior, &todo[member], &cfg) {
                *decision = d;
            }
        }
    }

    // Pass 2: re-read from the span start, render and write one chapter at a time.
    let mut next_chapter = store.next_chapter_number(root)?;
    // Plan numbers count only plans whose chapter landed: a plan written by a run killed
    // before its chapter is an orphan, and the re-run rewrites it under the same number
    // with the same bytes instead of numbering the same plan twice.
    let landed: std::collections::BTreeSet<&str> = archived
        .iter()
        .filter(|d| d.kind == "chapter")
        .map(|d| d.file_name.as_str())
        .collect();
    let mut next_plan = archived
        .iter()
        .filter(|d| d.kind == "plan" && d.chapter.as_deref().is_some_and(|c| landed.contains(c)))
        .map(|d| d.number)
        .max()
        .unwrap_or(0)
        + 1;
    let resume = span_resume.unwrap_or_default();
    let mut reader = LogReader::open_with(file, resume, reader_options(ctx.config))?;
    let mut assembler = TurnAssembler::starting_at(span_lo, completed_before_span);
    let mut spans = spans.into_iter().peekable();
    let mut buffered: Vec<CompletedTurn> = Vec::new();
    while let Some(span) = spans.peek() {
        let Some(item) = reader.next_item()? else {
            return Err(ArchiveError::LogChanged {
                file: file.clone(),
                seq: span.seq_hi,
            });
        };
        let LogItem::Event(event) = item else {
            continue;
        };
        if event.seq < span_lo {
            continue;
        }
        let Some(turn) = assembler.push(event) else {
            continue;
        };
        if turn.end_seq < span.seq_lo {
            continue;
        }
        let end = turn.end_seq;
        buffered.push(turn);
        if end < span.seq_hi {
            continue;
        }
        if end > span.seq_hi {
            return Err(ArchiveError::LogChanged {
                file: file.clone(),
                seq: span.seq_hi,
            });
        }
        let span = spans.next().expect("peeked above");
        let turns: Vec<&CompletedTurn> = buffered.iter().collect();
        let meta = ChapterMeta {
            project_key: ctx.identity.project_key.clone(),
            harness_id: ctx.harness_id.to_owned(),
            session_id: session_id.to_owned(),
            root_session_id: root.to_owned(),
            number: next_chapter,
            next_plan_number: next_plan,
            tool_result_artifact_tokens: ctx.config.tool_result_artifact_tokens,
        };
        let rendered = render::render_chapter(&span, &turns, &meta, redactor);
        for artifact in &rendered.artifacts {
            if store.write_artifact(root, artifact)? {
                report.artifacts_written += 1;
            }
        }
        for plan in &rendered.plans {
            store.write_document(root, plan)?;
            report.plans.push(plan.file_name.clone());
        }
        store.write_document(root, &rendered.chapter)?;
        report.chapters.push(rendered.chapter.file_name.clone());
        report.turns_archived += buffered.len() as u64;
        report.omitted_injections += rendered.stats.omitted_injections;
        add_counts(&mut report.redactions, &rendered.stats.redactions);
        next_chapter += 1;
        next_plan += rendered.plans.len() as u32;
        buffered.clear();
    }
    Ok(report)
}

fn add_counts(into: &mut BTreeMap<String, u64>, counts: &RedactionCounts) {
    for (k, v) in &counts.by_rule {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

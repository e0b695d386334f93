//! The archive door (shell): discover the workspace's sessions, sign every completed,
//! unsigned turn, compose every completed, unarchived turn into chapters and write them.
//!
//! One streaming pass per session, memory bounded whatever the log size: the reader
//! assembles turns, signs the unsigned ones and composes the unarchived ones online
//! (`compose::Online`: a chapter closes when the next turn opens another); a renderer
//! thread renders each closed chapter and a writer thread writes it while the reader
//! decodes on. Every write goes
//! through the store, which accepts only `Redacted` values. The whole run holds the
//! writer lock.
//!
//! Crash safety: the run's documents are one group (`store::group`): written without an
//! fsync each, then the new signatures are appended (one write + fsync), then one
//! `syncfs` and a commit line. A kill anywhere before the commit leaves documents past
//! the root's last commit; the next run removes them and, rendering being deterministic,
//! writes the same bytes again — nothing is numbered twice, nothing committed is touched.
//! A run that fails (a truncated or garbled log) removes what it wrote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::compose::{self, ComposeConfig, ComposeError};
use crate::config::Config;
use crate::identity::Identity;
use crate::names::NameList;
use crate::redact::{ConfigRedactor, Redacted, RedactionCounts, Redactor};
use crate::render::{self, ChapterMeta};
use crate::session::discover::{self, SessionLog};
use crate::session::reader::{LogItem, LogReader, ReadError, ReadNote, ReaderOptions, ResumePoint};
use crate::session::{renumber, Header};
use crate::signature::{self, Signature, SIGNATURE_VERSION};
use crate::signer::LedgerCursor;
use crate::source::{Harness, SourceOptions};
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

impl Reason {
    /// The word the contract uses for this reason (as in `--reason` and the JSON report).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Manual => "manual",
            Reason::Fork => "fork",
            Reason::Compaction => "compaction",
            Reason::Idle => "idle",
        }
    }
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
    #[serde(serialize_with = "crate::names::path_text")]
    pub log: PathBuf,
    pub generation: u32,
    pub turns_signed: u64,
    pub turns_archived: u64,
    /// File names, in the order written.
    pub chapters: NameList,
    pub plans: NameList,
    pub artifacts_written: u64,
    /// The in-flight turn's seqs, left for a later archive.
    pub in_flight: Option<(u64, u64)>,
    pub omitted_injections: u64,
    pub redactions: BTreeMap<String, u64>,
    pub notes: Vec<String>,
    /// Session rules captured from `rulesMarkerPrefix` lines of newly signed turns.
    pub session_rules: Vec<String>,
    /// The log is damaged at a line or frame: where, what was archived before it and what
    /// to do. Every completed turn before the spot is archived; the run reports the session
    /// among the failures too, and every later archive retries from there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damage: Option<String>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionFailure {
    pub session_id: String,
    #[serde(serialize_with = "crate::names::path_text")]
    pub session_dir: PathBuf,
    pub error: String,
    /// What to do, said by the CLI's edge from [`SessionFailure::cause`] (the library says
    /// what happened; hints live in one place).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The error itself, so the edge finds its hint in the cause chain (the disk full, the
    /// store locked); `None` for damage in a log, which `error` says whole.
    #[serde(skip)]
    pub cause: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArchiveReport {
    pub reason: Option<Reason>,
    /// Documents an interrupted archive left uncommitted (`<root>/<file>`), removed before
    /// this run wrote them again (see `store::group`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uncommitted_removed: Vec<String>,
    pub sessions: Vec<SessionReport>,
    pub failures: Vec<SessionFailure>,
    /// What was skipped and is not a failure of what was asked: a log that is a FIFO, a
    /// device or a socket; an empty log (no header yet); with `--session`, another
    /// session that cannot be read.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
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
    #[error("session log {file} has no header line yet (empty, or its first frame is still being written)")]
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
    #[error("session log {file} ends {} but turns up to seq {signed_hi} were already signed from it: the log was truncated or replaced. Nothing archived was touched; restore the log or archive its replacement under a new session", log_end.map_or_else(|| "before its first event".to_owned(), |end| format!("at seq {end}")))]
    LogTruncated {
        file: PathBuf,
        log_end: Option<u64>,
        signed_hi: u64,
    },
    #[error(
        "the chapter writer thread panicked; nothing past the last commit was kept — archive again"
    )]
    WriterPanicked,
    #[error(
        "the log reading thread panicked; nothing past the last commit was kept — archive again"
    )]
    ReaderPanicked,
    #[error("session rules: {0}")]
    Rules(#[from] crate::rules::store::RulesStoreError),
    #[error(transparent)]
    Forget(#[from] crate::store::forget::ForgetError),
    #[error(transparent)]
    Sign(#[from] crate::signer::SignError),
}

/// A session found on disk, with its header and the harness that wrote it.
struct FoundSession {
    log: SessionLog,
    header: Header,
    harness: Harness,
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
    let redactor = ConfigRedactor::new(&ctx.config.redaction_patterns)?;
    // What a person took back (`chapters forget`) is never archived again.
    let forgotten = crate::store::forget::read(store.dir())?;
    let workspace_str = ctx.workspace.to_string_lossy().into_owned();
    let (logs, unreadable) = discover::list_workspace_sessions_and_unreadable(
        ctx.dsh_home,
        &workspace_str,
        &ctx.config.path_map,
    )?;

    let mut report = ArchiveReport {
        reason: Some(reason),
        // Before anything reads what is archived: an interrupted run's uncommitted
        // documents go, and this run writes them again.
        uncommitted_removed: store.recover_uncommitted()?,
        ..ArchiveReport::default()
    };
    // With `--session`, a session that cannot be read is a failure only when it is the
    // one asked for; any other is a note (it costs only itself).
    let mut asked_failed = false;
    let mut fail = |report: &mut ArchiveReport,
                    dir: &Path,
                    id: &str,
                    error: std::sync::Arc<dyn std::error::Error + Send + Sync>| {
        if only.is_none_or(|only| only == id) {
            asked_failed |= only.is_some();
            report.failures.push(SessionFailure {
                session_id: id.to_owned(),
                session_dir: dir.to_path_buf(),
                error: error.to_string(),
                hint: None,
                cause: Some(error),
            });
        } else {
            report.notes.push(format!(
                "{}: {error} (not the session asked for; left alone)",
                dir.display()
            ));
        }
    };
    for (dir, e) in unreadable {
        let id = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = crate::session::cwdkey::unescape_session_id(&id).unwrap_or(id);
        fail(&mut report, &dir, &id, std::sync::Arc::new(e));
    }
    let mut logs: Vec<(Harness, SessionLog)> =
        logs.into_iter().map(|l| (Harness::Dsh, l)).collect();
    // The other harnesses' sessions of this workspace (see `source`).
    let (others, notes) = crate::source::other_harness_sessions(&workspace_str, ctx.config);
    logs.extend(others);
    report.notes.extend(notes);
    let mut found = Vec::new();
    for (harness, log) in logs {
        match read_source_header(harness, &log.log, ctx.config) {
            Ok(header) => found.push(FoundSession {
                log,
                header,
                harness,
            }),
            Err(e) if is_skipped(&e) => report
                .notes
                .push(format!("{e}; skipped, nothing to archive there")),
            Err(e) => fail(
                &mut report,
                &log.session_dir,
                &log.session_id,
                std::sync::Arc::new(e),
            ),
        }
    }
    if let Some(id) = only {
        // A harness's own id names its session too (`claude-code-<id>` is also `<id>`).
        found.retain(|s| {
            s.header.id == id || s.header.id.strip_prefix(s.harness.session_prefix()) == Some(id)
        });
        if found.is_empty() {
            if asked_failed {
                return Ok(report);
            }
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
        if forgotten.root_forgotten(&root) {
            report.sessions.push(SessionReport {
                session_id: s.header.id.clone(),
                root_session_id: root.clone(),
                log: s.log.log.clone(),
                generation: s.log.generation,
                notes: vec![format!(
                    "session tree {root} was forgotten by a person (`chapters forget`); it is never archived again"
                )],
                ..SessionReport::default()
            });
            continue;
        }
        match archive_session(ctx, &store, &redactor, s, &root, &forgotten) {
            Ok(r) => {
                if let Some(damage) = &r.damage {
                    report.failures.push(SessionFailure {
                        session_id: s.header.id.clone(),
                        session_dir: s.log.session_dir.clone(),
                        error: damage.clone(),
                        hint: None,
                        cause: None,
                    });
                }
                report.sessions.push(r)
            }
            Err(e) => {
                // Said once, by whoever shows the report (the CLI, the daemon's errors).
                tracing::debug!(session = %s.header.id, error = %e, "archive of one session failed");
                report.failures.push(SessionFailure {
                    session_id: s.header.id.clone(),
                    session_dir: s.log.session_dir.clone(),
                    error: e.to_string(),
                    hint: None,
                    cause: Some(std::sync::Arc::new(e)),
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

/// A log that is skipped with a note, not a failure: not a regular file (a FIFO, a device,
/// a socket — never read, so never blocked on), or empty (no header written yet).
fn is_skipped(e: &ArchiveError) -> bool {
    matches!(e, ArchiveError::NoHeader { .. })
        || matches!(e, ArchiveError::Read(r) if r.is_special_file())
}

fn source_options(config: &Config) -> SourceOptions {
    SourceOptions {
        reader: reader_options(config),
        quiet_after_ms: Some(config.idle_archive_ms),
    }
}

/// The header of `harness`'s log at `log`.
fn read_source_header(
    harness: Harness,
    log: &Path,
    config: &Config,
) -> Result<Header, ArchiveError> {
    if harness == Harness::Dsh {
        return read_header(log, config);
    }
    crate::source::read_header(harness, log, source_options(config))?.ok_or_else(|| {
        ArchiveError::NoHeader {
            file: log.to_path_buf(),
        }
    })
}

pub(crate) fn read_header(log: &Path, config: &Config) -> Result<Header, ArchiveError> {
    crate::session::reader::read_header(log, reader_options(config))?.ok_or_else(|| {
        ArchiveError::NoHeader {
            file: log.to_path_buf(),
        }
    })
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
    forgotten: &crate::store::forget::Forgotten,
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
    let (sigs, torn) = signed(store, root, session_id)?;
    if let Some(note) = torn {
        report.notes.push(note);
    }
    let mut group = store.begin_group(root, redactor)?;
    let mut archived = store.archived(root)?;
    // A forgotten chapter's span counts as archived: it is never written again.
    for (number, seq_lo, seq_hi) in forgotten.chapters_of(root, session_id) {
        archived.push(crate::store::ArchivedDoc {
            file_name: format!("{number:03}-forgotten.md"),
            number,
            kind: "chapter".into(),
            title: String::new(),
            session_id: session_id.to_owned(),
            seq_lo,
            seq_hi,
            chapter: None,
            topics: Vec::new(),
            turns: Vec::new(),
        });
    }
    let (forgotten_chapter, forgotten_plan) = forgotten.max_numbers(root);
    // The chapter written last (chapters are numbered as written): after a log was
    // renumbered, an older chapter may hold higher seqs of the old numbering.
    let last_archived = archived
        .iter()
        .filter(|d| d.kind == "chapter" && d.session_id == session_id)
        .max_by_key(|d| d.number);
    // A seeded fork starts with a copy of its parent's events: those are the parent's.
    let seed_end = if found.header.is_seeded {
        found.header.seed_length.unwrap_or(0)
    } else {
        0
    };
    let first_unarchived = last_archived.map_or(seed_end, |d| (d.seq_hi + 1).max(seed_end));
    // The first new chapter's opening rule is decided against the chapter written before it.
    let prior: Vec<Signature> = last_archived
        .map(|prev| {
            sigs.iter()
                .filter(|s| {
                    s.seqs.first().is_some_and(|&lo| lo >= prev.seq_lo)
                        && s.seqs.last().is_some_and(|&hi| hi <= prev.seq_hi)
                        // A ledger spanning a renumbering holds other turns at those seqs.
                        && (prev.turns.is_empty() || prev.turns.contains(&s.turn))
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    // Turn numbers outlive a DSH log's renumbering (see `session::renumber`).
    let by_turn = found.harness == Harness::Dsh;
    let chapter_anchor = last_archived.map(|d| {
        let (anchor, named) = renumber::Anchor::of_chapter(d.seq_hi, d.turns.last().copied());
        (anchor, by_turn && named)
    });
    let signed_anchor = sigs.iter().rev().find_map(|s| {
        Some(renumber::Anchor {
            turn: s.turn,
            end_seq: *s.seqs.last()?,
        })
    });
    let composer = compose::Online::new(
        session_id,
        ComposeConfig {
            merge_threshold: ctx.config.merge_threshold,
            chapter_limit: ctx.config.chapter_limit,
        },
        first_unarchived,
        prior,
    );

    // The writer owns the numbering: plan numbers depend on what the chapters before
    // rendered. Plan numbers count only plans whose chapter landed (a store written before
    // group commit may hold an orphan plan; the re-run rewrites it under the same number).
    let landed: std::collections::BTreeSet<&str> = archived
        .iter()
        .filter(|d| d.kind == "chapter")
        .map(|d| d.file_name.as_str())
        .collect();
    // A forgotten document's number is never given again (chapters are never renumbered).
    let mut numbers = Numbering {
        chapter: store
            .next_chapter_number(root)?
            .max(forgotten_chapter.saturating_add(1)),
        plan: (archived
            .iter()
            .filter(|d| {
                d.kind == "plan" && d.chapter.as_deref().is_some_and(|c| landed.contains(c))
            })
            .map(|d| d.number)
            .max()
            .unwrap_or(0)
            + 1)
        .max(forgotten_plan.saturating_add(1)),
    };
    let meta = ChapterMeta {
        project_key: ctx.identity.project_key.clone(),
        harness_id: ctx.harness_id.to_owned(),
        session_id: session_id.to_owned(),
        root_session_id: root.to_owned(),
        number: 0,
        next_plan_number: 0,
        tool_result_artifact_tokens: ctx.config.artifact_threshold_tokens(),
        render_reasoning: ctx.config.render_reasoning,
        continues: None,
        harness: (found.harness != Harness::Dsh).then(|| found.harness.name().to_owned()),
        harness_version: (found.harness != Harness::Dsh)
            .then(|| found.header.origin.clone())
            .flatten(),
        session_started: found.header.created_at,
    };
    // The chapters of the session tree so far, for `continues` (new chapters join as they
    // are rendered).
    let mut earlier = compose::EarlierTopics::default();
    for d in archived.iter().filter(|d| d.kind == "chapter") {
        earlier.push(d.number, &d.topics);
    }
    let pass = Pass {
        harness: found.harness,
        ctx,
        file,
        store,
        redactor,
        session_id,
        root,
        sigs: &sigs,
        first_unarchived,
        chapter_anchor,
        signed_anchor,
        by_turn,
        seed_end,
        paths: signature::Workspace::for_session(
            &ctx.workspace.to_string_lossy(),
            found.header.cwd.as_deref(),
            &ctx.config.path_map,
        ),
    };

    // One pass over the log: sign every completed, unsigned turn and compose the
    // unarchived ones as they complete; a second thread renders and writes each chapter
    // as it closes while this one decodes on (a bounded hand-off: memory stays one or two
    // chapters' events whatever the log size).
    // Three stages, each a thread, joined by bounded channels (two chapters each): the
    // reader (decode, sign, compose), the renderer (render, redact, hash) and the writer
    // (files). On two cores the kernel's file creation overlaps both others.
    let (to_renderer, from_reader) = std::sync::mpsc::sync_channel::<Closed>(2);
    let (to_writer, from_renderer) = std::sync::mpsc::sync_channel::<render::RenderedChapter>(2);
    let (read_result, write_result) = std::thread::scope(|scope| {
        let written = &mut report;
        let group = &mut group;
        let renderer = scope.spawn(move || {
            let mut rendered = RenderTally::default();
            for closed in from_reader {
                let started = std::time::Instant::now();
                let chapter = render_chapter(
                    redactor,
                    &meta,
                    &mut numbers,
                    &mut earlier,
                    closed,
                    &mut rendered,
                );
                rendered.busy += started.elapsed();
                if to_writer.send(chapter).is_err() {
                    break; // the writer failed; its error is reported
                }
            }
            rendered
        });
        let writer = scope.spawn(move || -> Result<Duration, ArchiveError> {
            let mut busy = Duration::ZERO;
            for chapter in from_renderer {
                let started = std::time::Instant::now();
                write_chapter(group, &chapter, written)?;
                busy += started.elapsed();
            }
            Ok(busy)
        });
        let started = std::time::Instant::now();
        let read_result = pass.run(composer, &to_renderer);
        let read_elapsed = started.elapsed();
        drop(to_renderer);
        let tally = renderer.join();
        let write_result = writer.join().unwrap_or(Err(ArchiveError::WriterPanicked));
        match (tally, write_result) {
            (Ok(tally), Ok(write_busy)) => {
                // Which stage bounds the run (`reader_ms` includes `reader_wait_ms`, the time
                // spent waiting for room to hand a chapter on).
                let waited = read_result.as_ref().map_or(Duration::ZERO, |r| r.waited);
                tracing::debug!(
                    session = session_id,
                    reader_ms = read_elapsed.as_millis() as u64,
                    reader_wait_ms = waited.as_millis() as u64,
                    render_busy_ms = tally.busy.as_millis() as u64,
                    write_busy_ms = write_busy.as_millis() as u64,
                    "archive stages"
                );
                (read_result, Ok(tally))
            }
            (_, Err(e)) => (read_result, Err(e)),
            (Err(_), _) => (read_result, Err(ArchiveError::WriterPanicked)),
        }
    });
    let read = match (read_result, write_result) {
        (Ok(read), Ok(tally)) => {
            report.turns_archived += tally.turns;
            report.omitted_injections += tally.omitted_injections;
            add_counts(&mut report.redactions, &tally.redactions);
            read
        }
        (Err(e), _) | (Ok(_), Err(e)) => {
            // A refused archive leaves the store as it was.
            group.abort();
            return Err(e);
        }
    };
    report.notes.extend(read.notes);
    report.in_flight = read.in_flight;
    report.damage = read.damage;
    report.session_rules.extend(read.session_rules);

    // Sign what the pass left pending, before the chapters are committed (see
    // `Pass::sign_pending`: the daemon may have signed some of these turns meanwhile).
    let mut cursor = read.cursor;
    let mut turns_signed = read.turns_signed;
    match pass.sign_pending(&read.pending, &mut cursor, read.signed_after) {
        Ok(n) => turns_signed += n,
        Err(e) => {
            group.abort();
            return Err(e);
        }
    }
    report.turns_signed = turns_signed;
    debug_assert!(sigs.iter().all(|s| s.v <= SIGNATURE_VERSION));
    group.commit()?;
    Ok(report)
}

/// What the reading pass found besides the chapters it handed on.
#[derive(Default)]
struct PassOutcome {
    /// New signatures not yet appended (fewer than a batch), and how many were.
    /// Signed from the turns' redacted text, not yet in the ledger.
    pending: Vec<Redacted<Signature>>,
    turns_signed: u64,
    /// Where the pass left the collection ledger.
    cursor: LedgerCursor,
    notes: Vec<String>,
    in_flight: Option<(u64, u64)>,
    session_rules: Vec<String>,
    /// Time spent waiting for the renderer to take a chapter (for the stages' debug line).
    waited: Duration,
    /// The log's damage, said in full (see [`SessionReport::damage`]).
    damage: Option<String>,
    /// How the pending signatures are told fresh from the ledger's.
    signed_after: crate::signer::After,
}

/// What a damaged log costs and what to do: the reader's error (file and seq), the turns
/// archived before it, the turn holding it.
fn damage_message(
    e: &ReadError,
    harness: Harness,
    in_flight: Option<(u64, u64)>,
    last_completed_end: Option<u64>,
) -> String {
    let before = match last_completed_end {
        Some(end) => format!("Every completed turn before it (through seq {end}) is archived"),
        None => "No turn completed before it".to_owned(),
    };
    let from = in_flight
        .map(|(lo, _)| lo)
        .or_else(|| last_completed_end.map(|end| end + 1))
        .unwrap_or(0);
    format!(
        "{e}. {before}; the turn holding the damage (from seq {from}) and everything after it are not. If {} is still writing this session, archive again later; otherwise keep a copy of the log and repair or cut it at that line. Every archive retries from there",
        harness.title()
    )
}

/// The reading half of an archive run (see [`archive_session`]).
struct Pass<'p> {
    ctx: &'p ArchiveContext<'p>,
    file: &'p Path,
    store: &'p Store,
    redactor: &'p Redactor,
    session_id: &'p str,
    root: &'p str,
    /// The ledger's signatures, as read at the start.
    sigs: &'p [Signature],
    /// The first seq after the last chapter, while the log keeps its numbering.
    first_unarchived: u64,
    /// The last chapter's last turn and seq (and whether its turn numbers decide when the
    /// log was renumbered since), and the ledger's last signature's.
    chapter_anchor: Option<(renumber::Anchor, bool)>,
    signed_anchor: Option<renumber::Anchor>,
    by_turn: bool,
    seed_end: u64,
    /// The workspace as this session sees it (its cwd inside, the `pathMap` twins).
    paths: signature::Workspace,
    harness: Harness,
}

/// New signatures are appended to the ledger in batches of this many turns while the pass
/// reads on, so that memory does not grow with the log (one write and one fsync a batch).
const SIGN_BATCH: usize = 256;

impl Pass<'_> {
    /// Append `sigs` past the ledger's last signature, under the collections lock (as the
    /// daemon signs: it may have signed some of these turns since the pass began). Every
    /// batch lands before the run's commit; a run that fails afterwards leaves them signed,
    /// as if the daemon had signed them, and the next archive composes from them.
    fn sign_pending(
        &self,
        sigs: &[Redacted<Signature>],
        cursor: &mut LedgerCursor,
        after: crate::signer::After,
    ) -> Result<u64, ArchiveError> {
        let n = crate::signer::sign(
            self.store,
            self.root,
            self.session_id,
            sigs,
            self.redactor,
            cursor,
            after,
        )?;
        Ok(n as u64)
    }

    /// How the signer tells a fresh signature: by seq, or by turn number when the log was
    /// renumbered since the ledger's last line.
    fn signed_after(&self, signed: &renumber::Covered) -> crate::signer::After {
        if signed.renumbered() {
            crate::signer::After::Turn
        } else {
            crate::signer::After::Seq
        }
    }

    fn run(
        &self,
        composer: compose::Online,
        to_writer: &std::sync::mpsc::SyncSender<Closed>,
    ) -> Result<PassOutcome, ArchiveError> {
        // The ledger's signatures of unarchived turns, by their last seq: the composition
        // uses these (the daemon may have signed the turns) as a two-pass run would.
        let ledger: BTreeMap<u64, &Signature> = self
            .sigs
            .iter()
            .filter_map(|s| Some((*s.seqs.last()?, s)))
            .filter(|&(end, _)| end >= self.first_unarchived)
            .collect();
        let rule_capture = crate::rules::store::SessionCapture {
            store: self.store,
            workspace: self.ctx.workspace,
            redactor: self.redactor,
            config: self.ctx.config,
            project_key: &self.ctx.identity.project_key,
            harness: self.ctx.harness_id,
            session_id: self.session_id,
            root_session: self.root,
        };
        // Decoding, parsing and assembling turns run on a thread of their own, a few turns
        // ahead of signing and composing here (on two cores the two halves overlap).
        let (to_pass, from_reader) = std::sync::mpsc::sync_channel::<ReadStep>(READ_AHEAD);
        std::thread::scope(|scope| {
            let reading =
                scope.spawn(|| read_turns(self.harness, self.file, self.ctx.config, to_pass));
            // Returns having dropped `from_reader`: a reading thread still sending stops.
            let passed =
                self.sign_and_compose(composer, from_reader, &rule_capture, &ledger, to_writer);
            // Joined here, so that a panic there is this error, not a panic of the scope.
            match reading.join() {
                Ok(()) => passed,
                Err(_) => Err(ArchiveError::ReaderPanicked),
            }
        })
    }

    /// The rest of [`Pass::run`]: sign each turn the reading thread hands over, compose the
    /// unarchived ones and hand each closed chapter to the renderer.
    fn sign_and_compose(
        &self,
        mut composer: compose::Online,
        from_reader: std::sync::mpsc::Receiver<ReadStep>,
        rule_capture: &crate::rules::store::SessionCapture<'_>,
        ledger: &BTreeMap<u64, &Signature>,
        to_writer: &std::sync::mpsc::SyncSender<Closed>,
    ) -> Result<PassOutcome, ArchiveError> {
        let mut out = PassOutcome::default();
        let mut buffered: Vec<CompletedTurn> = Vec::new();
        let mut last_completed_end: Option<u64> = None;
        let mut writer_gone = false;
        let mut signed = renumber::Covered::new(self.signed_anchor, self.by_turn);
        let mut archived = match self.chapter_anchor {
            Some((anchor, by_turn)) => renumber::Covered::new(Some(anchor), by_turn),
            None => renumber::Covered::new(None, false),
        };
        // Where the new chapters start, once the first unarchived turn is read.
        let mut span_started = false;
        let sign = |turn: &CompletedTurn| {
            let text = self.redactor.redact_all(
                signature::TurnText::of(turn),
                &mut RedactionCounts::default(),
            );
            signature::sign_in(
                &text,
                self.session_id,
                &self.paths,
                self.ctx.now,
                self.ctx.config.artifact_threshold_tokens(),
            )
        };
        let end = loop {
            let turn = match from_reader.recv() {
                Ok(ReadStep::Turn(turn)) => turn,
                Ok(ReadStep::End(end)) => break end,
                Ok(ReadStep::Failed(e)) => return Err(e.into()),
                Err(_) => return Err(ArchiveError::ReaderPanicked),
            };
            last_completed_end = Some(turn.end_seq);
            if turn.end_seq < self.seed_end {
                continue;
            }
            let fresh = if !signed.covers(turn.turn, turn.end_seq) {
                // The signing point is where `ADD RULE:` lines become session rules (§7.5);
                // written before the signatures, idempotently, so none is ever lost.
                out.session_rules.extend(rule_capture.capture_turn(&turn)?);
                let sig = sign(&turn);
                out.pending.push(sig.clone());
                if out.pending.len() >= SIGN_BATCH {
                    let after = self.signed_after(&signed);
                    out.turns_signed += self.sign_pending(&out.pending, &mut out.cursor, after)?;
                    out.pending.clear();
                }
                Some(sig.into_inner())
            } else {
                None
            };
            if archived.covers(turn.turn, turn.end_seq) || writer_gone {
                continue;
            }
            if !span_started {
                span_started = true;
                if archived.renumbered() {
                    // The old numbering's next seq names nothing here: the new chapters
                    // start at this turn.
                    composer.restart_at(turn.first_seq);
                }
            }
            let renumbered = signed.renumbered() || archived.renumbered();
            // A turn the ledger has no signature for is a hole: its chapter absorbs it. In a
            // renumbered log the ledger's seqs name other turns: the turn is signed again
            // here, for the composition only.
            let sig = match fresh {
                Some(sig) => Some(sig),
                None if renumbered => Some(sign(&turn).into_inner()),
                None => ledger.get(&turn.end_seq).map(|s| (*s).clone()),
            };
            if let Some(sig) = sig {
                if let Some(span) = composer.push(sig)? {
                    let closed = Closed {
                        span,
                        turns: std::mem::take(&mut buffered),
                    };
                    // A closed channel means the writer failed; its error is reported.
                    let waiting = std::time::Instant::now();
                    writer_gone = to_writer.send(closed).is_err();
                    out.waited += waiting.elapsed();
                }
            }
            buffered.push(turn);
        };
        out.notes.extend(end.notes.iter().map(ReadNote::to_string));
        out.in_flight = end.in_flight;
        if let Some(e) = &end.damage {
            out.damage = Some(damage_message(
                e,
                self.harness,
                out.in_flight,
                last_completed_end,
            ));
        }
        out.signed_after = self.signed_after(&signed);
        let log_end = end.next_seq.checked_sub(1);
        if let (Some(anchor), None, false) = (self.signed_anchor, &end.damage, signed.renumbered())
        {
            if log_end.is_none_or(|end| end < anchor.end_seq) {
                return Err(ArchiveError::LogTruncated {
                    file: self.file.to_path_buf(),
                    log_end,
                    signed_hi: anchor.end_seq,
                });
            }
        }
        let Some(span_hi) = last_completed_end.filter(|_| span_started) else {
            return Ok(out);
        };
        if let Some(span) = composer.finish(span_hi)? {
            if !writer_gone {
                let _ = to_writer.send(Closed {
                    span,
                    turns: buffered,
                });
            }
        }
        Ok(out)
    }
}

/// Completed turns the reading thread may hold ready ahead of signing.
const READ_AHEAD: usize = 4;

/// What the reading thread hands over, in log order.
enum ReadStep {
    Turn(CompletedTurn),
    /// The log's end, or damage in it.
    End(ReadEnd),
    /// A read error that is not damage (it fails the session).
    Failed(ReadError),
}

/// How the reading of a log ended.
struct ReadEnd {
    notes: Vec<ReadNote>,
    in_flight: Option<(u64, u64)>,
    /// Damage in the log (a garbled or truncated line or frame, a seq gap) ends the pass
    /// like the log's end: every turn completed before it is archived, and it is reported
    /// with what to do.
    damage: Option<ReadError>,
    /// One past the last seq read.
    next_seq: u64,
}

/// The reading thread of a pass: decode, parse and assemble the log's turns, handing each
/// completed one on; stops early when the pass stops listening.
fn read_turns(
    harness: Harness,
    file: &Path,
    config: &Config,
    to_pass: std::sync::mpsc::SyncSender<ReadStep>,
) {
    let from = ResumePoint::default();
    let opened = match harness {
        // The whole log in one pass: decoding runs on a thread of its own, ahead of the
        // parsing here (as `zstd -dc | parse` runs on two cores).
        Harness::Dsh => LogReader::open_decoding_ahead(file, from, reader_options(config))
            .map(|r| Box::new(r) as Box<dyn crate::source::EventSource>),
        _ => crate::source::open(harness, file, from, source_options(config)),
    };
    let mut reader = match opened {
        Ok(reader) => reader,
        Err(e) => {
            let _ = to_pass.send(ReadStep::Failed(e));
            return;
        }
    };
    let mut assembler = TurnAssembler::new();
    let damage = loop {
        let item = match reader.next_item() {
            Ok(Some(item)) => item,
            Ok(None) => break None,
            Err(e) if e.is_damage() => break Some(e),
            Err(e) => {
                let _ = to_pass.send(ReadStep::Failed(e));
                return;
            }
        };
        let LogItem::Event(event) = item else {
            continue;
        };
        if let Some(turn) = assembler.push(event) {
            if to_pass.send(ReadStep::Turn(turn)).is_err() {
                return; // the pass failed; its error is reported
            }
        }
    };
    let _ = to_pass.send(ReadStep::End(ReadEnd {
        notes: reader.notes().to_vec(),
        in_flight: assembler.in_flight(),
        damage,
        next_seq: reader.resume_point().next_seq,
    }));
}

/// Chapter and plan numbers of the next chapter the writer renders.
struct Numbering {
    chapter: u32,
    plan: u32,
}

/// A chapter the reader has closed: its span and its turns, for the writer.
struct Closed {
    span: compose::ChapterSpan,
    turns: Vec<CompletedTurn>,
}

/// What the renderer counted.
#[derive(Default)]
struct RenderTally {
    /// Time spent rendering (not waiting).
    busy: Duration,
    turns: u64,
    omitted_injections: u64,
    redactions: RedactionCounts,
}

/// The rendering stage: one closed chapter → its documents, numbered (the renderer owns
/// the numbering: plan numbers depend on what the chapters before rendered).
fn render_chapter(
    redactor: &Redactor,
    meta: &ChapterMeta,
    numbers: &mut Numbering,
    earlier: &mut compose::EarlierTopics,
    closed: Closed,
    tally: &mut RenderTally,
) -> render::RenderedChapter {
    let turns: Vec<&CompletedTurn> = closed.turns.iter().collect();
    let meta = ChapterMeta {
        number: numbers.chapter,
        next_plan_number: numbers.plan,
        continues: compose::continues(&closed.span, earlier),
        ..meta.clone()
    };
    earlier.push(numbers.chapter, &closed.span.topics);
    let rendered = render::render_chapter(&closed.span, &turns, &meta, redactor);
    tally.turns += turns.len() as u64;
    tally.omitted_injections += rendered.stats.omitted_injections;
    tally.redactions.add(&rendered.stats.redactions);
    numbers.chapter += 1;
    numbers.plan += rendered.plans.len() as u32;
    rendered
}

/// The writing stage: a chapter's artifacts, then its plans, then the chapter itself.
fn write_chapter(
    group: &mut crate::store::group::Group<'_>,
    rendered: &render::RenderedChapter,
    report: &mut SessionReport,
) -> Result<(), ArchiveError> {
    for artifact in &rendered.artifacts {
        if group.write_artifact(artifact)? {
            report.artifacts_written += 1;
        }
    }
    for plan in &rendered.plans {
        group.write_document(plan)?;
        report.plans.push(&plan.file_name);
    }
    group.write_document(&rendered.chapter)?;
    report.chapters.push(&rendered.chapter.file_name);
    Ok(())
}

fn add_counts(into: &mut BTreeMap<String, u64>, counts: &RedactionCounts) {
    for (k, v) in &counts.by_rule {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

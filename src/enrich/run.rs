//! One enrichment batch over this machine's store: pick the chapters not yet annotated by
//! the configured model, call the endpoint for each — one request in flight, never under
//! the writer lock — validate, retry an invalid answer once, and write the annotation
//! through the store's guarded rewrite. Failures are counted in `<store>/enrich-status.json`
//! with a backoff, and never blank or block a chapter.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::answer::{self, AnswerError};
use super::http::Endpoint;
use super::slice::{self, SliceLimits};
use super::HttpError;
use super::{chat, Completion};
use crate::config::Config;
use crate::credentials::Secret;
use crate::curation::{self, Curation};
use crate::redact::{RedactionCounts, Redactor};
use crate::render::annotate::{self, Annotated, Annotation};
use crate::render::body_text;
use crate::store::catalog::{self, RowMeta};
use crate::store::{atomic, Store, StoreError};

const STATUS_FILE: &str = "enrich-status.json";
const STATUS_VERSION: u64 = 1;
/// First backoff after a failed batch; doubled per consecutive failure, up to the cap.
const BACKOFF_BASE_MS: i64 = 30_000;
const BACKOFF_CAP_MS: i64 = 3_600_000;
/// Most error texts kept in the status file.
const ERROR_TEXT_MAX: usize = 300;

#[derive(Debug, thiserror::Error)]
pub enum EnrichError {
    #[error("enrichment is off: no `enrichmentEndpoint` is configured. Set one with `chapters enrich model --endpoint URL --model NAME`")]
    NoEndpoint,
    #[error("enrichment is switched off on this machine (`enrichmentEnabled: false`)")]
    Disabled,
    #[error(transparent)]
    Endpoint(#[from] HttpError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Curation(#[from] curation::file::CurationFileError),
    #[error(transparent)]
    Redact(#[from] crate::redact::RedactError),
}

/// Cumulative counts and the backoff, kept across runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrichStatus {
    pub v: u64,
    pub annotated: u64,
    pub unchanged: u64,
    /// Answers invalid twice: the chapter kept its deterministic values.
    pub invalid: u64,
    /// Calls that failed: unreachable, HTTP errors, unreadable responses.
    pub failed: u64,
    pub timeouts: u64,
    pub consecutive_failures: u64,
    /// No automatic batch starts before this time (ms since the epoch).
    pub backoff_until_ms: Option<i64>,
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    pub last_run_at: Option<String>,
    pub model: Option<String>,
}

/// What one batch did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnrichReport {
    pub endpoint: String,
    pub model: String,
    /// Chapters waiting for this model before the batch.
    pub queued: usize,
    pub examined: usize,
    pub annotated: Vec<String>,
    pub unchanged: usize,
    pub invalid: Vec<String>,
    pub failed: usize,
    pub timeouts: usize,
    pub retries: usize,
    pub redactions: u64,
    /// Session rules mined and written (ids), at most `rulesMinedPerChapter` per chapter.
    pub rules_mined: Vec<MinedReport>,
    /// Set when the batch did not start because of the backoff.
    pub backed_off_until_ms: Option<i64>,
    pub notes: Vec<String>,
    /// Chapter files read to make the queue (a fill of the store's catalog, rows that did
    /// not know, folders no row names): none when the catalog was filled and knew them.
    #[serde(skip)]
    pub files_read: u64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MinedReport {
    pub id: String,
    pub chapter: String,
    pub label: crate::rules::MinedLabel,
    pub review_only: bool,
}

pub struct EnrichContext<'a> {
    pub store: &'a Store,
    pub workspace: &'a Path,
    pub config: &'a Config,
    /// Mined session rules carry the project and the machine that mined them.
    pub project_key: &'a str,
    pub harness: &'a str,
    pub key: Option<&'a Secret>,
    pub now_ms: i64,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Most chapters this batch examines; `None` = `enrichmentBatchCap`.
    pub limit: Option<u64>,
    /// Re-annotate chapters this model already annotated (a corrected vocabulary).
    pub all: bool,
    /// Automatic batches wait out the backoff; a person asking runs now.
    pub respect_backoff: bool,
}

pub fn read_status(store: &Store) -> Result<Option<EnrichStatus>, StoreError> {
    let path = store.dir().join(STATUS_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StoreError::Damaged {
                path,
                detail: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Io { path, source: e }),
    }
}

fn stage_status(store: &Store, status: &EnrichStatus) -> Result<atomic::Staged, StoreError> {
    let mut bytes = serde_json::to_vec_pretty(status).expect("plain data always serializes");
    bytes.push(b'\n');
    atomic::stage(&store.dir().join(STATUS_FILE), &bytes)
}

/// A chapter waiting in the queue.
struct Queued {
    root: String,
    file: String,
    path: PathBuf,
}

/// Queue and vocabulary for one batch, and the chapter files read to make them.
struct Snapshot {
    queue: Vec<Queued>,
    known: std::collections::BTreeSet<String>,
    files_read: u64,
}

fn is_chapter_name(name: &str) -> bool {
    name.ends_with(".md") && !name.starts_with("plan-") && !name.starts_with('.')
}

/// The store's chapters by (root, file), in the queue's order.
type Chapters = std::collections::BTreeMap<(String, String), RowMeta>;

/// A chapter's metadata read from its file; `None` when it is gone.
fn read_meta(store: &Store, root: &str, file: &str) -> Result<Option<RowMeta>, StoreError> {
    let folder = format!("{}/{root}/chapters", crate::store::STORE_DIR);
    Ok(store
        .document_meta(&folder, file)?
        .map(crate::redact::Redacted::into_inner))
}

/// The store's chapters as its catalog (`store::catalog`) knows them, by (root, file): one
/// query over the present rows of the session folders, once the store filled what a
/// start-over left unknown. Read from the file instead: a row whose metadata is unknown,
/// a session folder no row names (copied in by hand), and every folder when the catalog
/// cannot say. Also the chapter files read.
fn chapters(store: &Store) -> Result<(Chapters, u64), StoreError> {
    let mut files_read = store.fill_catalog();
    // Session folders are never removed by this program; one removed by hand leaves.
    let present: std::collections::BTreeSet<String> = store.roots()?.into_iter().collect();
    let mut chapters = std::collections::BTreeMap::new();
    let mut named = std::collections::BTreeSet::new();
    for doc in catalog::session_docs(store.dir()).unwrap_or_default() {
        if !present.contains(&doc.root) {
            continue;
        }
        named.insert(doc.root.clone());
        if !is_chapter_name(&doc.name) {
            continue;
        }
        let meta = match doc.meta {
            Some(meta) => Some(meta),
            None => {
                files_read += 1;
                read_meta(store, &doc.root, &doc.name)?
            }
        };
        if let Some(meta) = meta {
            chapters.insert((doc.root, doc.name), meta);
        }
    }
    for root in present.difference(&named) {
        let dir = store.chapters_dir(root)?;
        let names: Vec<String> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| is_chapter_name(n))
                .collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                return Err(StoreError::Io {
                    path: dir,
                    source: e,
                })
            }
        };
        for file in names {
            files_read += 1;
            if let Some(meta) = read_meta(store, root, &file)? {
                chapters.insert((root.clone(), file), meta);
            }
        }
    }
    Ok((chapters, files_read))
}

/// Every chapter not yet titled by `model` (all of them with `all`) in (root, file)
/// order, and the canonical topics already in use (the vocabulary a model's label is
/// vetted against).
fn snapshot(
    store: &Store,
    model: &str,
    all: bool,
    curation: &Curation,
) -> Result<Snapshot, StoreError> {
    let (chapters, files_read) = chapters(store)?;
    let mut queue = Vec::new();
    let mut known = std::collections::BTreeSet::new();
    for ((root, file), meta) in chapters {
        // A plan under a chapter's name, unreadable frontmatter: not a chapter.
        if meta.kind != "chapter" {
            continue;
        }
        known.extend(curation.canonical_topics(meta.vetted.iter().map(String::as_str)));
        if all || meta.title_model.as_deref() != Some(model) {
            queue.push(Queued {
                path: store.chapters_dir(&root)?.join(&file),
                root,
                file,
            });
        }
    }
    Ok(Snapshot {
        queue,
        known,
        files_read,
    })
}

fn clip(text: &str) -> String {
    match text.char_indices().nth(ERROR_TEXT_MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Write a chapter's mined rules as session rules of its session (never project-tier, never
/// staged): `stated` only when a human sentence of the chapter holds the words, at most
/// `rulesMinedPerChapter` written — a rule already there does not count against the cap.
fn write_mined(
    ctx: &EnrichContext<'_>,
    redactor: &Redactor,
    doc: &str,
    body: &str,
    queued: &Queued,
    candidates: &[answer::MinedRule],
) -> Result<Vec<MinedReport>, String> {
    use crate::rules::{self, store as rules_store, Mined, MinedLabel, Rule};
    let meta = crate::render::parse_frontmatter(doc).map_err(|e| e.to_string())?;
    let human = slice::human_text(body);
    let review_only = !ctx.config.rules_auto_activate;
    let corpus = rules_store::read_rules(ctx.workspace, ctx.project_key, false)
        .map_err(|e| e.to_string())?;
    let mut written = Vec::new();
    for candidate in candidates {
        if written.len() as u64 >= ctx.config.rules_mined_per_chapter {
            break;
        }
        let label = match answer::check_stated(candidate, &human) {
            answer::RuleLabel::Stated => MinedLabel::Stated,
            answer::RuleLabel::Inferred => MinedLabel::Inferred,
        };
        let category = rules::check_category(&candidate.category)
            .unwrap_or_else(|_| rules::MARKER_CATEGORY.to_owned());
        let rule = match Rule::session_mined(
            ctx.project_key,
            ctx.harness,
            &meta.session_id,
            &meta.root_session_id,
            meta.seq_range.0,
            &category,
            &candidate.text,
            Mined {
                label,
                chapter: queued.file.clone(),
                review_only,
            },
        ) {
            Ok(rule) => rule,
            Err(_) => continue,
        };
        // The same words already kept for this session (a marker, an earlier batch).
        let Ok(rule) = rule.redacted(redactor) else {
            continue;
        };
        if corpus.by_id(&rule.id).is_some() {
            continue;
        }
        match rules_store::write_rule(ctx.store, ctx.workspace, rule) {
            Ok((rule, rules_store::Written::New)) => written.push(MinedReport {
                id: rule.id.clone(),
                chapter: format!("{}/{}", queued.root, queued.file),
                label,
                review_only,
            }),
            Ok(_) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(written)
}

/// Run one batch on its own, the redactor compiled (the CLI's batch). The clock value is
/// the caller's; `at` stamps provenance.
pub fn run(ctx: &EnrichContext<'_>, options: RunOptions) -> Result<EnrichReport, EnrichError> {
    run_with(ctx, options, None)
}

/// Run one batch with the caller's compiled `redactionPatterns` (`None`: compiled for this
/// batch; the daemon keeps one per workspace). The queue and the vocabulary come from the
/// store's catalog. The clock value is the caller's; `at` stamps provenance.
pub fn run_with(
    ctx: &EnrichContext<'_>,
    options: RunOptions,
    redactor: Option<&Redactor>,
) -> Result<EnrichReport, EnrichError> {
    let url = ctx
        .config
        .enrichment_endpoint
        .as_deref()
        .ok_or(EnrichError::NoEndpoint)?;
    if !ctx.config.enrichment_enabled {
        return Err(EnrichError::Disabled);
    }
    let endpoint = Endpoint::parse(url)?;
    let model = ctx.config.enrichment_model.clone().unwrap_or_default();
    let at = crate::time::rfc3339_utc(ctx.now_ms);
    let mut status = read_status(ctx.store)?.unwrap_or_default();
    status.v = STATUS_VERSION;
    let mut report = EnrichReport {
        endpoint: endpoint.describe(),
        model: model.clone(),
        ..Default::default()
    };
    if options.respect_backoff {
        if let Some(until) = status.backoff_until_ms.filter(|u| *u > ctx.now_ms) {
            report.backed_off_until_ms = Some(until);
            report.notes.push(format!(
                "backing off after {} failed batch(es); the next automatic batch waits until {}",
                status.consecutive_failures,
                crate::time::rfc3339_utc(until)
            ));
            return Ok(report);
        }
    }
    let compiled;
    let redactor = match redactor {
        Some(r) => r,
        None => {
            compiled = Redactor::new(&ctx.config.redaction_patterns)?;
            &compiled
        }
    };
    let mirror = ctx.workspace.join(crate::store::MIRROR_DIR);
    let facts = curation::file::read_all(ctx.store.dir(), Some(&mirror))?;
    report.notes.extend(facts.notes);
    let curation = Curation::fold(facts.facts);
    let Snapshot {
        queue,
        known,
        files_read,
    } = snapshot(ctx.store, &model, options.all, &curation)?;
    report.queued = queue.len();
    report.files_read = files_read;
    let limit = options.limit.unwrap_or(ctx.config.enrichment_batch_cap);
    let limits = SliceLimits::default();
    let mine_rules = ctx.config.rules_enrichment && ctx.config.session_rules_enabled;
    // `rulesModel` set: mining is its own bounded call; else it rides the annotation call.
    let rules_model = ctx.config.rules_model.trim();
    let mine_inline = mine_rules && rules_model.is_empty();
    let mut counts = RedactionCounts::default();
    let mut endpoint_failed = false;
    let mut published = atomic::DirSync::default();
    // Rewrites are spaced (`enrichmentRewriteSpacingMs`): with a fast endpoint a batch would
    // otherwise sync a file every few milliseconds, each sync a journal commit the signer's
    // own fsync may queue behind. The model's answer time counts toward the spacing.
    let spacing = Duration::from_millis(ctx.config.enrichment_rewrite_spacing_ms);
    let mut last_rewrite: Option<Instant> = None;

    for queued in queue.into_iter().take(limit as usize) {
        report.examined += 1;
        let name = format!("{}/{}", queued.root, queued.file);
        let doc = match std::fs::read_to_string(&queued.path) {
            Ok(doc) => doc,
            // Removed by hand since the catalog listed it (no record says so): recorded as
            // removed, under the writer lock, so the next batch's queue leaves it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let _lock = ctx
                    .store
                    .lock(Duration::from_millis(ctx.config.writer_lock_timeout_ms))?;
                ctx.store.record_gone(&queued.root, &queued.file)?;
                report.notes.push(format!("{name}: gone; skipped"));
                continue;
            }
            Err(e) => {
                return Err(StoreError::Io {
                    path: queued.path.clone(),
                    source: e,
                }
                .into())
            }
        };
        let Some(body) = body_text(&doc) else {
            report.notes.push(format!("{name}: no body; skipped"));
            continue;
        };
        let chapter_slice = slice::slice(body, &limits);
        let messages = slice::messages(
            &chapter_slice,
            mine_inline,
            ctx.config.rules_mined_per_chapter,
        );
        let mut parsed: Option<Result<answer::Answer, AnswerError>> = None;
        for attempt in 0..2 {
            if attempt == 1 {
                report.retries += 1;
            }
            match chat(&endpoint, ctx.config, ctx.key, &model, &messages) {
                Completion::Content(content) => {
                    let result = answer::parse(&content, redactor, &mut counts);
                    let valid = result.is_ok();
                    parsed = Some(result);
                    if valid {
                        break;
                    }
                }
                Completion::Failed(e) => {
                    report.failed += 1;
                    status.failed += 1;
                    status.last_error = Some(clip(&e));
                    endpoint_failed = true;
                    break;
                }
                Completion::TimedOut(e) => {
                    report.timeouts += 1;
                    status.timeouts += 1;
                    status.last_error = Some(clip(&e));
                    endpoint_failed = true;
                    break;
                }
            }
        }
        if endpoint_failed {
            status.last_error_at = Some(at.clone());
            report.notes.push(format!(
                "{name}: the endpoint failed; it keeps its deterministic values and the batch stops here"
            ));
            break;
        }
        let answer = match parsed {
            Some(Ok(answer)) => answer,
            Some(Err(e)) => {
                status.invalid += 1;
                status.last_error = Some(clip(&format!("{name}: invalid answer twice: {e}")));
                status.last_error_at = Some(at.clone());
                report.invalid.push(name);
                continue;
            }
            None => continue,
        };
        let candidates = if !mine_rules {
            Vec::new()
        } else if mine_inline {
            answer.rules.clone()
        } else {
            let mining = slice::mining_messages(&chapter_slice, ctx.config.rules_mined_per_chapter);
            let mut found = None;
            for _ in 0..2 {
                match chat(&endpoint, ctx.config, ctx.key, rules_model, &mining) {
                    Completion::Content(content) => {
                        if let Ok(rules) = answer::parse_rules(&content, redactor, &mut counts) {
                            found = Some(rules);
                            break;
                        }
                    }
                    Completion::Failed(e) | Completion::TimedOut(e) => {
                        report
                            .notes
                            .push(format!("{name}: the mining call failed: {e}"));
                        break;
                    }
                }
            }
            if found.is_none() {
                report
                    .notes
                    .push(format!("{name}: no valid mining answer; no rules mined"));
            }
            found.unwrap_or_default()
        };
        let topics = curation.canonical_topics(answer.topics.iter().map(String::as_str));
        let unvetted: Vec<String> = topics
            .iter()
            .filter(|t| !known.contains(*t))
            .cloned()
            .collect();
        let annotation = Annotation {
            title: &answer.title,
            summary: &answer.summary,
            topics: &topics,
            unvetted: &unvetted,
            model: if model.is_empty() {
                "endpoint-default"
            } else {
                &model
            },
            at: &at,
        };
        let annotated = match annotate::annotate(&doc, &annotation, redactor, &mut counts) {
            Ok(Annotated::Unchanged) => Ok(None),
            // Staged before the lock: writing and syncing the new bytes is the slow part,
            // and nobody sees them until they are published.
            Ok(Annotated::Changed(text)) => {
                if let Some(wait) = last_rewrite.and_then(|at| spacing.checked_sub(at.elapsed())) {
                    std::thread::sleep(wait);
                }
                last_rewrite = Some(Instant::now());
                Ok(Some(ctx.store.stage_reannotation(
                    &queued.root,
                    &queued.file,
                    &doc,
                    &text,
                )?))
            }
            Err(e) => Err(e),
        };
        // The lock is held for the short writes only (a compare and a rename; mined rules,
        // rarely): never across a model call, and released before the next chapter.
        let lock = ctx
            .store
            .lock(Duration::from_millis(ctx.config.writer_lock_timeout_ms))?;
        if !candidates.is_empty() {
            match write_mined(ctx, redactor, &doc, body, &queued, &candidates) {
                Ok(mined) => report.rules_mined.extend(mined),
                Err(e) => report
                    .notes
                    .push(format!("{name}: mined rules not written: {e}")),
            }
        }
        match annotated {
            Ok(None) => {
                report.unchanged += 1;
                status.unchanged += 1;
            }
            Ok(Some(staged)) => {
                if ctx.store.reannotate_chapter(staged, &mut published)? {
                    report.annotated.push(name);
                    status.annotated += 1;
                } else {
                    report.notes.push(format!(
                        "{name}: changed while the model answered; left for the next batch"
                    ));
                }
            }
            Err(e) => report.notes.push(format!("{name}: {e}")),
        }
        drop(lock);
    }
    report.redactions = counts.total();
    if endpoint_failed {
        status.consecutive_failures += 1;
        let exponent = status.consecutive_failures.saturating_sub(1).min(16) as u32;
        let wait = BACKOFF_BASE_MS
            .saturating_mul(1 << exponent)
            .min(BACKOFF_CAP_MS);
        status.backoff_until_ms = Some(ctx.now_ms.saturating_add(wait));
    } else {
        status.consecutive_failures = 0;
        status.backoff_until_ms = None;
    }
    status.last_run_at = Some(at);
    status.model = Some(model);
    // The batch's disk syncs, fewest first: staging the status syncs its data, which on a
    // journaling filesystem commits the batch's renames with it; then one fsync per chapter
    // folder published into (usually nothing left to write), so the renames are durable
    // before the status that counts them is published; then the store folder.
    let staged = stage_status(ctx.store, &status)?;
    published.sync()?;
    let status_path = staged.path().to_path_buf();
    {
        let _lock = ctx
            .store
            .lock(Duration::from_millis(ctx.config.writer_lock_timeout_ms))?;
        staged.publish()?;
    }
    published.changed(&status_path);
    published.sync()?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Document;

    const ROOT: &str = "session-a";

    fn doc(title: &str, model: Option<&str>, topics: &[&str], unvetted: &[&str]) -> String {
        let generated = model.map_or(String::new(), |m| {
            format!("generated:\n  title:\n    by: model\n    model: {m}\n    at: \"2026-01-01T00:00:00Z\"\n")
        });
        format!(
            "---\ntitle: \"{title}\"\nkind: chapter\ntopics: [{}]\ntopicsUnvetted: [{}]\n{generated}---\n\nbody\n",
            topics.join(", "),
            unvetted.join(", ")
        )
    }

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        (dir, store)
    }

    /// Through the store's own writer, so the record is the one the archive makes.
    fn archive(store: &Store, root: &str, name: &str, text: &str) {
        let redactor = Redactor::new(&[]).unwrap();
        let document = Document {
            file_name: name.to_owned(),
            text: redactor.redact(text, &mut RedactionCounts::default()),
        };
        assert!(store.write_document(root, &document).unwrap());
    }

    /// A rewrite as enrichment publishes it: the file replaced, then recorded.
    fn rewrite(store: &Store, root: &str, name: &str, text: &str, recorded: bool) {
        let path = store.chapters_dir(root).unwrap().join(name);
        atomic::write_atomic(&path, text.as_bytes()).unwrap();
        if recorded {
            let folder = format!("{}/{root}/chapters", crate::store::STORE_DIR);
            crate::testkit::catalog::record(store.dir(), &[(&folder, &[name])]);
        }
    }

    fn queue(store: &Store, model: &str) -> Vec<String> {
        let curation = Curation::fold(Vec::new());
        let snapshot = snapshot(store, model, false, &curation).unwrap();
        snapshot
            .queue
            .iter()
            .map(|q| format!("{}/{}", q.root, q.file))
            .collect()
    }

    fn known(store: &Store) -> Vec<String> {
        let curation = Curation::fold(Vec::new());
        let snapshot = snapshot(store, "m", false, &curation).unwrap();
        snapshot.known.into_iter().collect()
    }

    /// The chapter files a batch's snapshot reads.
    fn files_read(store: &Store) -> u64 {
        let curation = Curation::fold(Vec::new());
        snapshot(store, "m", false, &curation).unwrap().files_read
    }

    #[test]
    fn a_batch_reads_no_chapter_file_when_the_store_catalog_is_filled_and_knows_them() {
        let (_dir, store) = store();
        archive(&store, ROOT, "001-a.md", &doc("a", None, &["csv"], &[]));
        archive(
            &store,
            ROOT,
            "002-b.md",
            &doc("b", Some("m"), &["git"], &[]),
        );
        archive(&store, ROOT, "plan-003-c.md", &doc("c", None, &[], &[]));
        // A new catalog is filled once (every document of the store read), then answers.
        assert_eq!(files_read(&store), 3);
        assert!(catalog::is_filled(store.dir()));
        assert_eq!(files_read(&store), 0);
        assert_eq!(queue(&store, "m"), vec!["session-a/001-a.md"]);
        assert_eq!(
            queue(&store, "other"),
            vec!["session-a/001-a.md", "session-a/002-b.md"]
        );

        // A new chapter (its writer knew its metadata: nothing read) and a rewrite recorded
        // by a path that did not know it (the model titled `a`, with an unvetted label of
        // its own): that one read from its file.
        archive(&store, ROOT, "004-d.md", &doc("d", None, &["zstd"], &[]));
        assert_eq!(files_read(&store), 0);
        rewrite(
            &store,
            ROOT,
            "001-a.md",
            &doc("A", Some("m"), &["csv", "new-label"], &["new-label"]),
            true,
        );
        assert_eq!(files_read(&store), 1);
        assert_eq!(queue(&store, "m"), vec!["session-a/004-d.md"]);
        assert_eq!(known(&store), vec!["csv", "git", "zstd"]);
    }

    #[test]
    fn a_catalog_started_over_made_anew_or_garbled_is_filled_again() {
        let (_dir, store) = store();
        archive(&store, ROOT, "001-a.md", &doc("a", None, &[], &[]));
        assert_eq!(files_read(&store), 1);

        // The catalog started over (a writer died holding the lock, perhaps after a write it
        // never recorded; a forget): filled again, the unrecorded write seen.
        rewrite(
            &store,
            ROOT,
            "001-a.md",
            &doc("a", Some("m"), &[], &[]),
            false,
        );
        assert_eq!(queue(&store, "m"), vec!["session-a/001-a.md"]);
        catalog::start_over(store.dir()).unwrap();
        assert!(!catalog::is_filled(store.dir()));
        assert_eq!(files_read(&store), 1);
        assert!(queue(&store, "m").is_empty());

        // The catalog gone: a new one, filled.
        std::fs::remove_file(catalog::catalog_path(store.dir())).unwrap();
        rewrite(&store, ROOT, "001-a.md", &doc("a", None, &[], &[]), false);
        assert_eq!(files_read(&store), 1);
        assert_eq!(files_read(&store), 0);
        assert_eq!(queue(&store, "m"), vec!["session-a/001-a.md"]);

        // Garbled: not an answer; made anew and filled.
        archive(&store, ROOT, "002-b.md", &doc("b", None, &[], &[]));
        std::fs::write(catalog::catalog_path(store.dir()), b"{\"garbled").unwrap();
        assert_eq!(files_read(&store), 2);
        assert_eq!(
            queue(&store, "m"),
            vec!["session-a/001-a.md", "session-a/002-b.md"]
        );
    }

    #[test]
    fn a_chapter_or_folder_removed_by_hand_leaves_the_queue_without_failing_a_batch() {
        let (dir, store) = store();
        archive(&store, ROOT, "001-a.md", &doc("a", None, &[], &[]));
        archive(&store, ROOT, "002-b.md", &doc("b", None, &[], &[]));
        archive(&store, "session-b", "001-x.md", &doc("x", None, &[], &[]));
        queue(&store, "m");
        std::fs::remove_dir_all(store.root_dir("session-b").unwrap()).unwrap();
        std::fs::remove_file(store.chapters_dir(ROOT).unwrap().join("001-a.md")).unwrap();
        assert_eq!(
            queue(&store, "m"),
            vec!["session-a/001-a.md", "session-a/002-b.md"]
        );

        // The batch skips the gone chapter and reaches the next one: here an endpoint that
        // refuses the connection, which stops the batch as a failure of its own.
        let mut config = crate::config::Config::defaults();
        config.enrichment_endpoint = Some("http://127.0.0.1:1/v1".into());
        config.enrichment_model = Some("m".into());
        let ctx = EnrichContext {
            store: &store,
            workspace: dir.path(),
            config: &config,
            project_key: "project",
            harness: "test",
            key: None,
            now_ms: 2,
        };
        let report = run_with(&ctx, RunOptions::default(), None).unwrap();
        assert_eq!(report.examined, 2, "{report:?}");
        assert!(
            report.notes[0].contains("session-a/001-a.md: gone"),
            "{report:?}"
        );
        assert_eq!(report.failed, 1, "{report:?}");
        // Recorded as removed: the next batch's queue leaves it.
        assert_eq!(queue(&store, "m"), vec!["session-a/002-b.md"]);
    }

    #[test]
    fn a_session_folder_no_record_names_is_read_on_sight() {
        let (_dir, store) = store();
        archive(&store, ROOT, "001-a.md", &doc("a", None, &[], &[]));
        queue(&store, "m");
        // A folder copied in by hand: no record, a new root.
        let dir = store.chapters_dir("session-b").unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("001-x.md"), doc("x", None, &[], &[])).unwrap();
        std::fs::write(dir.join("002-garbled.md"), "not a chapter\0\u{1}").unwrap();
        assert_eq!(files_read(&store), 2);
        assert_eq!(
            queue(&store, "m"),
            vec!["session-a/001-a.md", "session-b/001-x.md"]
        );
    }
}

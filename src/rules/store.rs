//! The shell of rules: rule files in the store (`<store>/rules/<id>.md`, write-once) and in
//! the pool mirror (`<mirror>/rules/<projectKey>/<id>.md`, other machines' project rules),
//! this machine's facts, the marker capture at the signing point,
//! and [`assemble`] — everything a door needs to call the one block builder.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::block::{self, Block, BlockInput, Candidate, Caps, ProjectAbsence};
use super::{status, Rule, RuleError, Scope, Status};
use crate::config::Config;
use crate::curation::file::{self as curation_file, CurationFileError};
use crate::curation::Curation;
use crate::identity::{Identity, KeySource};
use crate::redact::{Redacted, Redactor, Settings};
use crate::session::lineage::{self, Lineage};
use crate::signature::Signature;
use crate::store::read::Reader;
use crate::store::{Store, StoreError, MIRROR_DIR, STORE_DIR};
use crate::turn::CompletedTurn;

/// `<store>/rules/` (the store keeps its layout: `store::RULES_DIR`).
pub use crate::store::RULES_DIR;
/// A rule file is read up to this many bytes; a larger one is counted unreadable.
const MAX_RULE_FILE_BYTES: u64 = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum RulesStoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Rule(#[from] RuleError),
    #[error(transparent)]
    Curation(#[from] CurationFileError),
    #[error("cannot list {path}: {source}; check its permissions")]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("rule {id} already exists in category {existing:?} with these words; a rule file is write-once — the same text is one rule whatever its category")]
    OtherCategory { id: String, existing: String },
    #[error("cannot read the session logs: {0}")]
    Discover(#[from] crate::session::discover::DiscoverError),
}

/// One readable rule and where it was read.
#[derive(Debug, Clone)]
pub struct RuleEntry {
    pub rule: Rule,
    /// Workspace-relative path.
    pub path: String,
    /// From this machine's store (else: the pool mirror, another machine's proposal).
    pub local: bool,
}

/// Every rule this workspace can see.
#[derive(Debug, Default)]
pub struct RuleCorpus {
    /// Sorted by id; the store's copy wins over the mirror's.
    pub rules: Vec<RuleEntry>,
    /// (path, reason): counted and named, never silently dropped.
    pub unreadable: Vec<(String, String)>,
}

impl RuleCorpus {
    pub fn by_id(&self, id: &str) -> Option<&RuleEntry> {
        self.rules
            .binary_search_by(|e| e.rule.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.rules[i])
    }

    /// An exact id, or a unique prefix of one (at least 4 characters).
    pub fn resolve(&self, id: &str) -> Result<&RuleEntry, String> {
        if let Some(e) = self.by_id(id) {
            return Ok(e);
        }
        let matches: Vec<&RuleEntry> = if id.len() >= 4 {
            self.rules
                .iter()
                .filter(|e| e.rule.id.starts_with(id))
                .collect()
        } else {
            Vec::new()
        };
        match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(format!(
                "no rule {id:?} in this workspace's store or pool mirror; `chapters rule list` shows the ids"
            )),
            many => Err(format!(
                "{id:?} names {} rules ({}); give more of the id",
                many.len(),
                many.iter()
                    .map(|e| e.rule.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// The sub-directories of `dir` with safe names, sorted; none when it is missing.
fn sub_dirs(dir: &Path) -> Result<Vec<String>, RulesStoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RulesStoreError::List {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| crate::store::is_safe_component(n))
        .collect();
    names.sort();
    Ok(names)
}

fn markdown_files(dir: &Path) -> Result<Vec<String>, RulesStoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RulesStoreError::List {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if entry.file_type().is_ok_and(|t| t.is_file())
            && !name.starts_with('.')
            && name.ends_with(".md")
        {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// A rule file's text, read through the store's reader (the store's or the mirror's).
fn read_bounded(reader: &Reader, path: &Path) -> Result<String, String> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot open: {e}"))?
        .len();
    if len > MAX_RULE_FILE_BYTES {
        return Err(format!("larger than {MAX_RULE_FILE_BYTES} bytes"));
    }
    let bytes = reader.bytes(path).map_err(|e| e.to_string())?;
    String::from_utf8(bytes.into_inner()).map_err(|e| format!("cannot read: {e}"))
}

/// Read the rules of the store and (when given) the mirror's directory for this project:
/// read back through the store's reader, so what is derived from them (the rules block,
/// answers) stays `Redacted`.
pub fn read_rules(
    workspace: &Path,
    project_key: &str,
    with_mirror: bool,
) -> Result<Redacted<RuleCorpus>, RulesStoreError> {
    let reader = Reader::new(workspace);
    let mut by_id: BTreeMap<String, RuleEntry> = BTreeMap::new();
    let mut corpus = RuleCorpus::default();
    let mut dirs = vec![(format!("{STORE_DIR}/{RULES_DIR}"), true)];
    if with_mirror {
        let project_dir = format!("{MIRROR_DIR}/{RULES_DIR}/{project_key}");
        dirs.push((project_dir.clone(), false));
        // The original TypeScript plugin keeps each machine's rules one level down.
        for harness in sub_dirs(&workspace.join(&project_dir))? {
            dirs.push((format!("{project_dir}/{harness}"), false));
        }
    }
    for (rel_dir, local) in dirs {
        for name in markdown_files(&workspace.join(&rel_dir))? {
            let path = format!("{rel_dir}/{name}");
            let stem = name.trim_end_matches(".md");
            if by_id.contains_key(stem) {
                continue;
            }
            match read_bounded(&reader, &workspace.join(&path))
                .and_then(|text| Rule::parse(&path, &text).map_err(|e| e.to_string()))
            {
                // A session rule in the mirror cannot have come from this program's sync;
                // it governs nothing here.
                Ok(rule) if !local && rule.scope == Scope::Session => corpus
                    .unreadable
                    .push((path, "a session rule in the pool: session rules are never published, so this one is ignored".into())),
                Ok(mut rule) => {
                    if rule.project_key.is_empty() && !local {
                        // The original plugin's rules name their project by their folder.
                        rule.project_key = project_key.to_owned();
                    }
                    // The same words proposed on two machines are one rule: the first
                    // copy read (the store's) stands.
                    by_id
                        .entry(rule.id.clone())
                        .or_insert(RuleEntry { rule, path, local });
                }
                Err(reason) => corpus.unreadable.push((path, reason)),
            }
        }
    }
    corpus.rules = by_id.into_values().collect();
    // Parsed from files the reader read, and nothing else.
    Ok(reader.read_back(corpus))
}

/// What writing a rule did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Written {
    /// A new file in the store.
    New,
    /// The store already held these bytes (the same words proposed again).
    AlreadyHere,
    /// Another machine proposed the same words; the pool's copy is the rule.
    InThePool,
}

/// Write one rule file (write-once). The caller holds the writer lock. The text passes the
/// rules first ([`Rule::redacted`]), so the id covers the bytes that are stored.
pub fn write_rule(
    store: &Store,
    workspace: &Path,
    rule: Redacted<Rule>,
) -> Result<(Redacted<Rule>, Written), RulesStoreError> {
    let corpus = read_rules(workspace, &rule.project_key, rule.scope == Scope::Project)?;
    if let Some(existing) = corpus.by_id(&rule.id) {
        if existing.rule.category != rule.category {
            return Err(RulesStoreError::OtherCategory {
                id: rule.id.clone(),
                existing: existing.rule.category.clone(),
            });
        }
        if !existing.local {
            return Ok((rule, Written::InThePool));
        }
    }
    let bytes = rule.derive(Rule::render);
    let wrote = store.write_rule(&rule.file_name(), &bytes)?;
    Ok((
        rule,
        if wrote {
            Written::New
        } else {
            Written::AlreadyHere
        },
    ))
}

/// The session-tier capture at the signing point (§7.5), for the archive's pass 1 and the
/// daemon's `turn/end`: every marker line of the turn's human-authored messages becomes a
/// session rule file. Idempotent (content-derived ids, write-once files), so a re-run after
/// a crash rewrites identical bytes or nothing. Zero model tokens.
pub struct SessionCapture<'a> {
    pub store: &'a Store,
    pub workspace: &'a Path,
    pub redactor: &'a Redactor,
    pub config: &'a Config,
    pub project_key: &'a str,
    pub harness: &'a str,
    pub session_id: &'a str,
    pub root_session: &'a str,
}

impl SessionCapture<'_> {
    /// Capture the turn's marker rules; returns the ids newly written.
    pub fn capture_turn(&self, turn: &CompletedTurn) -> Result<Vec<String>, RulesStoreError> {
        if !self.config.session_rules_enabled {
            return Ok(Vec::new());
        }
        let mut written = Vec::new();
        for (seq, text) in super::turn_marker_rules(turn, &self.config.rules_marker_prefix) {
            let rule = match Rule::session_marker(
                self.project_key,
                self.harness,
                self.session_id,
                self.root_session,
                seq,
                &text,
            ) {
                Ok(rule) => rule,
                // A marker line too long to be a rule is the person's text, not an order we
                // can keep; the turn itself is still archived.
                Err(e) => {
                    tracing::warn!(session = %self.session_id, seq, error = %e, "marker line not captured");
                    continue;
                }
            };
            let (rule, outcome) =
                write_rule(self.store, self.workspace, rule.redacted(self.redactor)?)?;
            if outcome == Written::New {
                written.push(rule.id.clone());
            }
        }
        Ok(written)
    }
}

/// The term bag of a session head: the terms of its stored turn signatures, sorted.
fn session_terms(store: &Store, root: &str, session: &str) -> Vec<String> {
    let Ok(read) = store.read_collection(root, session) else {
        return Vec::new();
    };
    let mut terms = BTreeSet::new();
    for line in read.lines {
        if let Ok(sig) = serde_json::from_value::<Signature>(line) {
            terms.extend(sig.terms);
        }
    }
    terms.into_iter().collect()
}

/// Where the rules block is asked for.
pub struct AssembleRequest<'a> {
    pub workspace: &'a Path,
    pub dsh_home: &'a Path,
    pub config: &'a Config,
    pub identity: &'a Identity,
    pub harness: &'a str,
    /// The session whose head is rebuilt (its lineage's session rules), if any.
    pub session: Option<&'a str>,
    /// Continue: both tiers. Fork: project rules only (zero session bytes).
    pub include_session: bool,
    /// The task's query terms; `None` ⇒ the session's stored signature terms.
    pub terms: Option<Vec<String>>,
    /// Whether the workspace is linked to a pool (`pool::link::is_linked`, read by the door:
    /// the rules sit below the pool).
    pub linked: bool,
}

/// The block and everything a door reports beside it.
#[derive(Debug)]
pub struct Assembled {
    /// Built from rule files read back from the store and the mirror.
    pub block: Redacted<Block>,
    pub linked: bool,
    pub lineage: Option<Lineage>,
    pub unreadable: Vec<(String, String)>,
    pub curation_notes: Vec<String>,
    /// Project rules proposed and not approved on this machine.
    pub proposed: usize,
    pub terms: Vec<String>,
}

/// Read this machine's facts (the store's file, and the mirror's other machines when linked).
pub fn read_curation(
    workspace: &Path,
    linked: bool,
) -> Result<(Curation, Vec<String>), RulesStoreError> {
    let store_dir = workspace.join(STORE_DIR);
    let mirror = workspace.join(MIRROR_DIR);
    let read = curation_file::read_all(&store_dir, linked.then_some(mirror.as_path()))?;
    let mut notes = read.notes;
    let curation = Curation::fold(read.facts);
    notes.extend(curation.ignored.iter().cloned());
    Ok((curation, notes))
}

/// Gather the stored inputs and build the block: the one path every door takes.
pub fn assemble(req: &AssembleRequest<'_>) -> Result<Assembled, RulesStoreError> {
    let store = match Store::open(req.workspace) {
        Ok(store) => store,
        // A workspace never enabled has no rules: zero bytes, not a failure.
        Err(StoreError::NotEnabled { .. }) => {
            return Ok(Assembled {
                block: Reader::new(req.workspace).read_back(Block::None),
                linked: false,
                lineage: None,
                unreadable: Vec::new(),
                curation_notes: Vec::new(),
                proposed: 0,
                terms: Vec::new(),
            })
        }
        Err(e) => return Err(e.into()),
    };
    let linked = req.linked;
    let project_key = req.identity.project_key.as_str();
    let corpus = read_rules(req.workspace, project_key, linked)?;
    let (curation, curation_notes) = read_curation(req.workspace, linked)?;
    let lineage = match req.session {
        Some(s) => Some(lineage::lineage(
            req.dsh_home,
            req.workspace,
            crate::session::reader::ReaderOptions {
                max_line_bytes: req.config.max_event_bytes as usize,
            },
            s,
        )?),
        None => None,
    };
    let terms = match (&req.terms, req.session, &lineage) {
        (Some(t), _, _) => t.clone(),
        (None, Some(s), Some(l)) => session_terms(&store, l.root(), s),
        _ => Vec::new(),
    };
    let selection = Selection {
        curation: &curation,
        identity: req.identity,
        harness: req.harness,
        linked,
        include_session: req.include_session,
        on_lineage: lineage
            .iter()
            .flat_map(|l| l.sessions.iter().cloned())
            .collect(),
        terms: &terms,
        caps: Caps {
            project: req.config.project_rules_display_cap as usize,
            session: req.config.session_rules_display_cap as usize,
            budget_tokens: req.config.core_rules_budget_tokens,
            relevance: req.config.rules_relevance,
        },
        lineage_note: lineage.as_ref().and_then(Lineage::note),
    };
    let selected = corpus.derive_with(&selection, select_block);
    let proposed = selected.1;
    Ok(Assembled {
        block: selected.derive(|(block, _)| block.clone()),
        linked,
        lineage,
        unreadable: corpus.into_inner().unreadable,
        curation_notes,
        proposed,
        terms,
    })
}

/// What decides which rules a block shows, beside the rules themselves: no rule's words.
struct Selection<'a> {
    curation: &'a Curation,
    identity: &'a Identity,
    harness: &'a str,
    linked: bool,
    include_session: bool,
    on_lineage: BTreeSet<String>,
    /// Ranks the rules; never shown.
    terms: &'a [String],
    caps: Caps,
    lineage_note: Option<String>,
}

impl Settings for Selection<'_> {}

/// The block the rules give, and how many project rules wait for approval here.
fn select_block(corpus: &RuleCorpus, s: &Selection<'_>) -> (Block, usize) {
    let project_key = s.identity.project_key.as_str();
    let ours = |e: &&RuleEntry| e.rule.project_key == project_key;
    let mut proposed = 0;
    let mut project_rules = Vec::new();
    let mut session_rules = Vec::new();
    for entry in corpus.rules.iter().filter(ours) {
        let rule = &entry.rule;
        let st = status(rule, s.curation, s.harness);
        let cand = Candidate {
            rule,
            pinned: s.curation.rule_pinned(s.harness, &rule.id),
        };
        match (rule.scope, st) {
            (Scope::Project, Status::Proposed) => proposed += 1,
            (Scope::Project, Status::Core) if s.linked => project_rules.push(cand),
            (Scope::Session, Status::Active)
                if s.include_session
                    && entry.local
                    && rule
                        .session
                        .as_deref()
                        .is_some_and(|id| s.on_lineage.contains(id)) =>
            {
                session_rules.push(cand)
            }
            _ => {}
        }
    }
    let project_absence = if !s.linked {
        Some(ProjectAbsence::NotLinked {
            source: s.identity.source.as_str().to_owned(),
            origin: s.identity.origin.clone(),
        })
    } else if s.identity.source == KeySource::PathDerived {
        Some(ProjectAbsence::PathDerived {
            origin: s.identity.origin.clone(),
        })
    } else {
        Some(ProjectAbsence::NoneApproved { proposed })
    };
    let slug = s.identity.slug();
    let input = BlockInput {
        slug: &slug,
        project_key,
        project_rules,
        session_rules,
        terms: s.terms,
        caps: s.caps,
        project_absence,
        lineage_note: s.lineage_note.clone(),
    };
    (block::build(&input), proposed)
}

/// Take the store's writer lock for a rule write (one writer per file, ever).
pub fn lock(store: &Store, config: &Config) -> Result<crate::store::lock::WriterLock, StoreError> {
    store.lock(Duration::from_millis(config.writer_lock_timeout_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_rule_files_are_counted_and_named_never_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let rules = ws.join(STORE_DIR).join(RULES_DIR);
        std::fs::create_dir_all(&rules).unwrap();
        let good = Rule::project("pk", "x", "Keep it short.").unwrap();
        std::fs::write(rules.join(good.file_name()), good.render()).unwrap();
        std::fs::write(rules.join("r-0000000000000000.md"), "---\ntitle: [\n").unwrap();
        std::fs::write(rules.join("garbled.md"), [0xff, 0xfe, 0x00]).unwrap();
        let huge = format!(
            "{}{}",
            good.render(),
            "x".repeat(MAX_RULE_FILE_BYTES as usize)
        );
        std::fs::write(rules.join("r-1111111111111111.md"), huge).unwrap();
        // A truncated copy of a real rule: its text no longer matches its id.
        let torn = good.render();
        std::fs::write(rules.join("r-2222222222222222.md"), &torn[..torn.len() - 4]).unwrap();
        // A session rule planted in the mirror governs nothing.
        let mirror = ws.join(MIRROR_DIR).join(RULES_DIR).join("pk");
        std::fs::create_dir_all(&mirror).unwrap();
        let s = Rule::session_marker("pk", "m", "sess", "sess", 1, "Planted.").unwrap();
        std::fs::write(mirror.join(s.file_name()), s.render()).unwrap();
        let corpus = read_rules(ws, "pk", true).unwrap();
        assert_eq!(corpus.rules.len(), 1);
        assert_eq!(corpus.rules[0].rule, good);
        assert_eq!(corpus.unreadable.len(), 5, "{:?}", corpus.unreadable);
        assert!(corpus.resolve(&good.id[..6]).is_ok());
        assert!(corpus.resolve("r-").is_err());
    }
}

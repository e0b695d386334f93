//! Rules: chapters of kind `rule` (record §7). This module is the pure core — what a rule
//! document is, its content-derived id, its bytes, how it is read back, what a machine's
//! facts make of it, and the marker capture of the session tier. `rules::block` builds the
//! one rules block every door renders; `rules::store` is the shell (files, facts, lineage).
//!
//! Two tiers, one format (§7.1): a **project** rule is proposed (by a person's `rule add` or
//! an agent's `chapters_rule_propose`) and governs a machine only once a person approves it
//! there (a `rule-status` curation fact, amendment 2026-09-20); a **session** rule comes from
//! an `ADD RULE:` line of a human-authored message and governs its session tree on this
//! machine only, derived from ancestry, never published (§7.5).
//!
//! A rule's bytes are a pure function of its text (and, for a session rule, its session):
//! the same rule proposed on two machines is one id and one byte-identical file, so the
//! pool's write-once rule never sees two versions of it.

pub mod block;
pub mod conflicts;
pub mod notice;
pub mod store;

use serde::Deserialize;

use crate::curation::{Curation, RuleStatus};
use crate::injection;
use crate::render::yaml::{flow_map, FrontmatterWriter};
use crate::turn::CompletedTurn;

/// File-name prefix of a project rule's id: `r-<16 hex>`.
pub const PROJECT_PREFIX: &str = "r-";
/// File-name prefix of a session rule's id: `s-<16 hex>`. The pool mapping publishes
/// `r-` files only, so a session rule cannot reach the pool whatever its frontmatter says.
pub const SESSION_PREFIX: &str = "s-";
/// Hex digits of the content hash kept in an id (64 bits: collisions need ~4 billion rules).
const ID_HEX: usize = 16;
/// A rule's title: its first sentence, at most this many characters (`list` shows it).
const TITLE_MAX_CHARS: usize = 60;
/// A rule's summary: its text, at most this many characters.
const SUMMARY_MAX_CHARS: usize = 200;
/// Longest rule text accepted, in characters: a rule is an order, not a document.
pub const MAX_TEXT_CHARS: usize = 4000;
/// Longest category name.
const MAX_CATEGORY_CHARS: usize = 40;
/// Topics recorded on a rule (its searchable terms).
const MAX_TOPICS: usize = 8;
/// The category of a marker-captured rule: the marker names none.
pub const MARKER_CATEGORY: &str = "general";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Project,
    Session,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::Session => "session",
        }
    }
}

/// Where a rule's words came from (§7.1). Project rules carry none: their bytes must not
/// depend on who proposed them (see the module note).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DerivedFrom {
    Human,
    Marker,
    Model,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    #[error("a rule needs text: give the order itself, e.g. `chapters rule add testing \"Run cargo fmt before every commit.\"`")]
    EmptyText,
    #[error("the rule text is {chars} characters; a rule is at most {MAX_TEXT_CHARS} — say the order in fewer words")]
    TextTooLong { chars: usize },
    #[error("category {category:?} is not a category name: use 1 to {MAX_CATEGORY_CHARS} lowercase letters, digits, `-` or `_`, starting with a letter (e.g. `testing`)")]
    BadCategory { category: String },
    #[error("{file}: not a rule document: {detail}")]
    Parse { file: String, detail: String },
}

/// How a model-mined session rule stands (§7.5, amendment 2026-10-21).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MinedLabel {
    /// A human sentence of the chapter says it verbatim.
    Stated,
    /// Read between the lines: nobody said it.
    Inferred,
}

/// Where a mined rule came from and whether it may govern on arrival.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mined {
    pub label: MinedLabel,
    /// The chapter file it was mined from.
    pub chapter: String,
    /// `rulesAutoActivate: false` when written: inert until a person approves it.
    pub review_only: bool,
}

/// A rule as its file says it.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub id: String,
    pub scope: Scope,
    pub category: String,
    /// The order, verbatim (whitespace-normalized), redacted.
    pub text: String,
    pub title: String,
    pub project_key: String,
    pub topics: Vec<String>,
    /// Session tier: the session whose human said it, its tree's root, the machine and the
    /// message's seq.
    pub session: Option<String>,
    pub root_session: Option<String>,
    pub harness: Option<String>,
    pub seq: Option<u64>,
    pub derived_from: Option<DerivedFrom>,
    /// Set on a rule a model mined from a chapter (never a project rule).
    pub mined: Option<Mined>,
}

/// The text as ids and files hold it: trimmed, every run of whitespace one space, so a
/// re-typed rule with other line breaks is still the same rule.
pub fn normalize_text(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Check a category name and return it lowercased.
pub fn check_category(category: &str) -> Result<String, RuleError> {
    let c = category.trim().to_lowercase();
    let ok = c.chars().count() <= MAX_CATEGORY_CHARS
        && c.chars().next().is_some_and(|f| f.is_ascii_lowercase())
        && c.chars()
            .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-' || ch == '_');
    if ok {
        Ok(c)
    } else {
        Err(RuleError::BadCategory {
            category: category.to_owned(),
        })
    }
}

/// Check and normalize a rule's text.
pub fn check_text(text: &str) -> Result<String, RuleError> {
    let text = normalize_text(text);
    if text.is_empty() {
        return Err(RuleError::EmptyText);
    }
    let chars = text.chars().count();
    if chars > MAX_TEXT_CHARS {
        return Err(RuleError::TextTooLong { chars });
    }
    Ok(text)
}

/// The content-derived id (ledger-capture §6): from the input, so two machines proposing
/// the same words mint one id. A session rule's id also covers its session: the same words
/// said in two session trees are two rules, each governing its own tree.
pub fn rule_id(scope: Scope, session: Option<&str>, text: &str) -> String {
    let normalized = normalize_text(text);
    let (prefix, input) = match scope {
        Scope::Project => (PROJECT_PREFIX, format!("project\n{normalized}")),
        Scope::Session => (
            SESSION_PREFIX,
            format!("session\n{}\n{normalized}", session.unwrap_or_default()),
        ),
    };
    let hash = crate::names::sha256_hex(input.as_bytes());
    format!("{prefix}{}", &hash[..ID_HEX])
}

/// Whether a name is a rule id this program mints (`r-`/`s-` + 16 lowercase hex).
pub fn is_rule_id(id: &str) -> bool {
    let hex = id
        .strip_prefix(PROJECT_PREFIX)
        .or_else(|| id.strip_prefix(SESSION_PREFIX));
    hex.is_some_and(|h| {
        h.len() == ID_HEX
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The first sentence, cut to [`TITLE_MAX_CHARS`] on a character boundary.
pub fn title_of(text: &str) -> String {
    let end = text
        .char_indices()
        .find(|(i, c)| {
            matches!(c, '.' | '!' | '?')
                && text[i + c.len_utf8()..]
                    .chars()
                    .next()
                    .is_none_or(char::is_whitespace)
        })
        .map_or(text.len(), |(i, c)| i + c.len_utf8());
    cut(&text[..end], TITLE_MAX_CHARS)
}

fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The searchable terms of a rule: its category and its words (the signature's term
/// reader, so a rule and a chapter about the same thing share terms).
pub fn topics_of(category: &str, text: &str) -> Vec<String> {
    let mut out = vec![category.to_owned()];
    for term in crate::signature::terms_of(text) {
        if out.len() > MAX_TOPICS {
            break;
        }
        if !out.contains(&term) {
            out.push(term);
        }
    }
    out
}

/// Every word of a rule through the rules (its text, category, title and topics); ids and
/// names are the program's.
impl crate::redact::Redactable for Rule {
    fn map_text(self, f: &mut dyn FnMut(&str) -> String) -> Self {
        Rule {
            text: f(&self.text),
            category: f(&self.category),
            title: f(&self.title),
            topics: self.topics.iter().map(|t| f(t)).collect(),
            ..self
        }
    }
}

impl Rule {
    /// The rule as a rule file may hold it: its words through `redactor`, then its id, title
    /// and topics computed again from the redacted words (so the id covers the stored bytes).
    pub fn redacted(
        self,
        redactor: &crate::redact::Redactor,
    ) -> Result<crate::redact::Redacted<Rule>, RuleError> {
        redactor
            .redact_all(self, &mut crate::redact::RedactionCounts::default())
            .derive(|rule| rule.with_text(&rule.text))
            .transpose()
    }

    /// A project rule as `rule add` and `chapters_rule_propose` write it: `status: proposed`.
    pub fn project(project_key: &str, category: &str, text: &str) -> Result<Rule, RuleError> {
        let category = check_category(category)?;
        let text = check_text(text)?;
        Ok(Rule {
            id: rule_id(Scope::Project, None, &text),
            scope: Scope::Project,
            title: title_of(&text),
            topics: topics_of(&category, &text),
            category,
            text,
            project_key: project_key.to_owned(),
            session: None,
            root_session: None,
            harness: None,
            seq: None,
            derived_from: None,
            mined: None,
        })
    }

    /// A session rule captured from the marker line of message `seq` of `session`.
    pub fn session_marker(
        project_key: &str,
        harness: &str,
        session: &str,
        root_session: &str,
        seq: u64,
        text: &str,
    ) -> Result<Rule, RuleError> {
        let text = check_text(text)?;
        Ok(Rule {
            id: rule_id(Scope::Session, Some(session), &text),
            scope: Scope::Session,
            category: MARKER_CATEGORY.to_owned(),
            title: title_of(&text),
            topics: topics_of(MARKER_CATEGORY, &text),
            text,
            project_key: project_key.to_owned(),
            session: Some(session.to_owned()),
            root_session: Some(root_session.to_owned()),
            harness: Some(harness.to_owned()),
            seq: Some(seq),
            derived_from: Some(DerivedFrom::Marker),
            mined: None,
        })
    }

    /// A session rule a model mined from `chapter` of `session` (first seq `seq`). Never
    /// project-tier: a model proposes nothing to the pool.
    #[allow(clippy::too_many_arguments)]
    pub fn session_mined(
        project_key: &str,
        harness: &str,
        session: &str,
        root_session: &str,
        seq: u64,
        category: &str,
        text: &str,
        mined: Mined,
    ) -> Result<Rule, RuleError> {
        let category = check_category(category)?;
        let text = check_text(text)?;
        Ok(Rule {
            id: rule_id(Scope::Session, Some(session), &text),
            scope: Scope::Session,
            title: title_of(&text),
            topics: topics_of(&category, &text),
            category,
            text,
            project_key: project_key.to_owned(),
            session: Some(session.to_owned()),
            root_session: Some(root_session.to_owned()),
            harness: Some(harness.to_owned()),
            seq: Some(seq),
            derived_from: Some(DerivedFrom::Model),
            mined: Some(mined),
        })
    }

    /// The same rule with other words (the redacted ones): id, title and topics follow.
    pub fn with_text(&self, text: &str) -> Result<Rule, RuleError> {
        let text = check_text(text)?;
        Ok(Rule {
            id: rule_id(self.scope, self.session.as_deref(), &text),
            title: title_of(&text),
            topics: topics_of(&self.category, &text),
            text,
            ..self.clone()
        })
    }

    /// The file name in `<store>/rules/`.
    pub fn file_name(&self) -> String {
        format!("{}.md", self.id)
    }

    /// The document's bytes: frontmatter, then the rule text as the body. Deterministic: no
    /// clock, no machine name on a project rule.
    pub fn render(&self) -> String {
        let body = format!("{}\n", self.text);
        let mut fm = FrontmatterWriter::new();
        fm.string("title", &self.title)
            .string("summary", &cut(&self.text, SUMMARY_MAX_CHARS))
            .string("kind", "rule")
            .string("id", &self.id)
            .string("scope", self.scope.as_str())
            .string("category", &self.category)
            .string(
                "status",
                match self.scope {
                    Scope::Project => "proposed",
                    Scope::Session if self.mined.as_ref().is_some_and(|m| m.review_only) => {
                        "review-only"
                    }
                    Scope::Session => "active",
                },
            )
            .string("projectKey", &self.project_key);
        if let Some(session) = &self.session {
            fm.string("session", session).string("sessionId", session);
        }
        if let Some(root) = &self.root_session {
            fm.string("rootSessionId", root);
        }
        if let Some(harness) = &self.harness {
            fm.string("harnessId", harness);
        }
        if let Some(seq) = self.seq {
            fm.uints("seqRange", &[seq, seq]);
        }
        if let Some(from) = self.derived_from {
            fm.string(
                "derivedFrom",
                match from {
                    DerivedFrom::Human => "human",
                    DerivedFrom::Marker => "marker",
                    DerivedFrom::Model => "model",
                },
            );
        }
        if let Some(mined) = &self.mined {
            fm.string(
                "minedLabel",
                match mined.label {
                    MinedLabel::Stated => "stated",
                    MinedLabel::Inferred => "inferred",
                },
            )
            .string("minedFrom", &mined.chapter);
            if mined.review_only {
                fm.raw("reviewOnly", "true");
            }
        }
        fm.strings("topics", &self.topics)
            .string("sha256", &crate::names::sha256_hex(body.as_bytes()))
            .raw(
                "generated",
                &flow_map(&[("by", "deterministic".to_owned())]),
            );
        let mut out = fm.finish();
        out.push_str(&body);
        out
    }

    /// Read a rule document back. `file` names it in errors; the id must match both the
    /// file name and the text (a hand-edited rule is refused, not silently re-identified).
    pub fn parse(file: &str, doc: &str) -> Result<Rule, RuleError> {
        let fail = |detail: String| RuleError::Parse {
            file: file.to_owned(),
            detail,
        };
        let yaml = crate::render::frontmatter_text(doc)
            .ok_or_else(|| fail("no YAML frontmatter".into()))?;
        let meta: RuleMeta =
            serde_saphyr::from_str(yaml).map_err(|e| fail(format!("bad frontmatter: {e}")))?;
        if meta.kind != "rule" {
            return Err(fail(format!("kind is {:?}, not rule", meta.kind)));
        }
        let body = crate::render::body_text(doc).unwrap_or_default();
        let text = normalize_text(body);
        let scope = meta.scope.unwrap_or(Scope::Project);
        let expected = rule_id(scope, meta.session.as_deref(), &text);
        match (&meta.id, meta.number) {
            (Some(id), _) => {
                if *id != expected {
                    return Err(fail(format!(
                        "its id {id} does not match its text (which would be {expected}): a rule file is write-once — propose the new words as a new rule"
                    )));
                }
                let stem = file
                    .rsplit('/')
                    .next()
                    .and_then(|n| n.strip_suffix(".md"))
                    .unwrap_or_default();
                if stem != id.as_str() {
                    return Err(fail(format!("its id {id} is not its file name")));
                }
            }
            // The original TypeScript plugin's rule (`<pk>/<harness>/NNN-<slug>.md`, a
            // project rule): known here by the id of its words, like one of ours.
            (None, Some(_)) if scope == Scope::Project => {}
            (None, _) => return Err(fail("no `id` (nor the original plugin's `number`)".into())),
        }
        Ok(Rule {
            id: expected,
            scope,
            category: meta.category,
            text,
            title: meta.title,
            project_key: meta.project_key,
            topics: meta.topics,
            session: meta.session,
            root_session: meta.root_session_id,
            harness: meta.harness_id,
            seq: meta.seq_range.map(|(lo, _)| lo),
            derived_from: meta.derived_from,
            mined: match (meta.mined_label, meta.mined_from) {
                (Some(label), Some(chapter)) => Some(Mined {
                    label,
                    chapter,
                    review_only: meta.review_only,
                }),
                _ => None,
            },
        })
    }

    /// How the rule was established, said beside a session rule (§7.3 warrant).
    pub fn warrant(&self) -> String {
        match (self.derived_from, &self.session, self.seq) {
            (Some(DerivedFrom::Marker), Some(session), Some(seq)) => {
                format!("you said this (session {session}, seq {seq})")
            }
            (Some(DerivedFrom::Marker), _, _) => "you said this".to_owned(),
            (Some(DerivedFrom::Model), _, _) => match &self.mined {
                Some(Mined {
                    label: MinedLabel::Stated,
                    chapter,
                    ..
                }) => format!("stated by you in {chapter} (found by a model)"),
                Some(Mined { chapter, .. }) => {
                    format!("inferred by a model from {chapter} — nobody said it")
                }
                None => "inferred by a model — nobody said it".to_owned(),
            },
            (Some(DerivedFrom::Human), _, _) | (None, _, _) => "stated by a person".to_owned(),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleMeta {
    title: String,
    kind: String,
    /// Absent from the original TypeScript plugin's rules, which carry a per-machine
    /// `number` instead.
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    number: Option<u64>,
    #[serde(default)]
    scope: Option<Scope>,
    category: String,
    #[serde(default)]
    project_key: String,
    #[serde(default)]
    topics: Vec<String>,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    root_session_id: Option<String>,
    #[serde(default)]
    harness_id: Option<String>,
    #[serde(default)]
    seq_range: Option<(u64, u64)>,
    #[serde(default)]
    derived_from: Option<DerivedFrom>,
    #[serde(default)]
    mined_label: Option<MinedLabel>,
    #[serde(default)]
    mined_from: Option<String>,
    #[serde(default)]
    review_only: bool,
}

/// A rule's standing on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// A project rule no person approved on this machine: governs nothing here.
    Proposed,
    /// A project rule a person approved on this machine.
    Core,
    /// Revoked by a person on this machine (either tier).
    Revoked,
    /// A session rule not revoked: it governs its own session tree (and its descendants).
    Active,
    /// A mined session rule written with `rulesAutoActivate: false`: inert until a person
    /// approves it.
    #[serde(rename = "review-only")]
    ReviewOnly,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Proposed => "proposed",
            Status::Core => "core",
            Status::Revoked => "revoked",
            Status::Active => "active",
            Status::ReviewOnly => "review-only",
        }
    }
}

/// This machine's status of a rule: only this machine's `rule-status` facts count — another
/// machine's approval governs nothing here.
pub fn status(rule: &Rule, curation: &Curation, harness: &str) -> Status {
    let decision = curation.rule_decision(harness, &rule.id).map(|d| d.status);
    match (rule.scope, decision) {
        (_, Some(RuleStatus::Revoked)) => Status::Revoked,
        (Scope::Project, Some(RuleStatus::Approved)) => Status::Core,
        (Scope::Project, None) => Status::Proposed,
        // A review-only mined rule waits for a person; every other session rule's
        // activation is derived, and an approval fact says nothing more about it.
        (Scope::Session, decision)
            if rule.mined.as_ref().is_some_and(|m| m.review_only)
                && decision != Some(RuleStatus::Approved) =>
        {
            Status::ReviewOnly
        }
        (Scope::Session, _) => Status::Active,
    }
}

/// The marker lines of one human-authored message: each line that starts with `prefix`
/// (after leading whitespace) gives the rest of the line as a rule. Pure, zero model tokens.
pub fn marker_rules<'a>(text: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    text.lines().filter_map(move |line| {
        if prefix.trim().is_empty() {
            return None;
        }
        let rest = line.trim_start().strip_prefix(prefix)?.trim();
        (!rest.is_empty()).then_some(rest)
    })
}

/// Every marker rule of one completed turn: (seq of the message, text), human-authored
/// messages only — an injected file or a delegate report that happens to hold the marker is
/// not a person saying it.
pub fn turn_marker_rules(turn: &CompletedTurn, prefix: &str) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for event in &turn.events {
        let Some(message) = event.user_message() else {
            continue;
        };
        if !injection::is_human_authored(&message.source) {
            continue;
        }
        // A `<system-reminder>` or `Instructions from:` span inside the person's message is
        // the host's words, not the person's: its marker lines are no rules.
        let own = injection::unscreened_text(&message.text);
        for rule in marker_rules(&own, prefix) {
            out.push((event.seq, rule.to_owned()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curation::{Author, Fact, FactKind, SourcedFact};
    use crate::session::Event;
    use serde_json::json;

    const PK: &str = "0fa80a81-7250-550a-9d80-2f98da5d2732";

    #[test]
    fn ids_come_from_the_normalized_text() {
        let a = rule_id(Scope::Project, None, "Run  cargo fmt\nbefore commits.");
        let b = rule_id(Scope::Project, None, "  Run cargo fmt before commits. ");
        assert_eq!(a, b);
        assert!(a.starts_with("r-") && is_rule_id(&a), "{a}");
        assert_ne!(
            a,
            rule_id(Scope::Project, None, "Run cargo fmt before pushes.")
        );
        let s1 = rule_id(Scope::Session, Some("s-1"), "x y");
        let s2 = rule_id(Scope::Session, Some("s-2"), "x y");
        assert_ne!(s1, s2);
        assert!(s1.starts_with("s-") && is_rule_id(&s1));
        assert!(!is_rule_id("r-XYZ"));
        assert!(!is_rule_id("r-0123456789abcdef0"));
        assert!(!is_rule_id("../r-0123456789abcdef"));
    }

    #[test]
    fn the_same_rule_on_two_machines_is_the_same_bytes() {
        let a = Rule::project(PK, "Testing", "Run cargo fmt before every commit.").unwrap();
        let b = Rule::project(PK, "testing", "Run cargo fmt\n  before every commit.").unwrap();
        assert_eq!(a.render(), b.render());
        assert_eq!(a.category, "testing");
        let text = a.render();
        assert!(!text.contains("harnessId"), "{text}");
        let back = Rule::parse(&format!("rules/{}", a.file_name()), &text).unwrap();
        assert_eq!(back, a);
        let meta = crate::catalog::score::parse_meta(&text).unwrap();
        assert_eq!(meta.kind, "rule");
        assert_eq!(meta.project_key, PK);
    }

    #[test]
    fn session_rules_round_trip_with_their_warrant() {
        let r =
            Rule::session_marker(PK, "m-a", "sess-1", "sess-0", 7, "Never push to main.").unwrap();
        let text = r.render();
        assert!(text.contains("scope: session") && text.contains("derivedFrom: marker"));
        let back = Rule::parse(&r.file_name(), &text).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.warrant(), "you said this (session sess-1, seq 7)");
    }

    #[test]
    fn the_typescript_plugins_rule_is_a_project_rule_known_by_its_words() {
        // As its `rules.ts` writes one: a per-machine number, no id, the body's last line.
        let doc = "---\nnumber: 1\nkind: rule\ncategory: \"testing\"\ntitle: \"Run the suite\"\nstatus: proposed\nsourceSession: \"manual\"\nauthoredAt: \"2026-10-02T09:40:12.511Z\"\nsha256: 00\n---\nRun the suite before merging.\n";
        let r = Rule::parse("rules/pk/adrian-mbp/001-testing-run-the-suite.md", doc).unwrap();
        assert_eq!(
            r.id,
            rule_id(Scope::Project, None, "Run the suite before merging.")
        );
        assert_eq!(
            (r.scope, r.category.as_str(), r.title.as_str()),
            (Scope::Project, "testing", "Run the suite")
        );
        // Neither an id nor a number: refused, named.
        let e = Rule::parse("x.md", &doc.replace("number: 1\n", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no `id`"), "{e}");
    }

    #[test]
    fn a_tampered_or_misnamed_rule_is_refused() {
        let r = Rule::project(PK, "style", "Use tabs.").unwrap();
        let text = r.render().replace("Use tabs.\n", "Use spaces.\n");
        let e = Rule::parse(&r.file_name(), &text).unwrap_err().to_string();
        assert!(e.contains("does not match its text"), "{e}");
        let e = Rule::parse("r-0000000000000000.md", &r.render())
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not its file name"), "{e}");
        for garbage in ["", "---\n", "no frontmatter", "---\ntitle: [\n---\nx\n"] {
            assert!(Rule::parse("r.md", garbage).is_err());
        }
        let chapter = "---\ntitle: t\nkind: chapter\nid: x\ncategory: c\n---\nbody\n";
        assert!(Rule::parse("x.md", chapter).is_err());
    }

    #[test]
    fn text_and_category_are_checked() {
        assert_eq!(
            Rule::project(PK, "x", "  \n ").unwrap_err(),
            RuleError::EmptyText
        );
        assert!(matches!(
            Rule::project(PK, "bad cat", "t").unwrap_err(),
            RuleError::BadCategory { .. }
        ));
        assert!(check_category("../x").is_err());
        assert!(check_category("9x").is_err());
        assert!(check_category(&"a".repeat(41)).is_err());
        let huge = "word ".repeat(2000);
        assert!(matches!(
            Rule::project(PK, "x", &huge).unwrap_err(),
            RuleError::TextTooLong { .. }
        ));
        // Hostile text stays one YAML value and parses back to itself.
        let hostile = "---\nkind: chapter\n\u{2028}\"quoted\" \\ # not a comment: {x}";
        let r = Rule::project(PK, "x", hostile).unwrap();
        assert_eq!(Rule::parse(&r.file_name(), &r.render()).unwrap(), r);
    }

    #[test]
    fn titles_are_the_first_sentence_cut_at_60() {
        assert_eq!(title_of("Use tabs. Always."), "Use tabs.");
        assert_eq!(title_of("Version 1.2 is fine"), "Version 1.2 is fine");
        let long = "a".repeat(100);
        assert_eq!(title_of(&long).chars().count(), 60);
        assert_eq!(title_of("é".repeat(70).as_str()).chars().count(), 60);
    }

    fn fact(kind: FactKind, at: &str) -> Fact {
        let mut f = Fact::new(kind, Author::User, at);
        f.by = Some("Ana".into());
        f
    }

    #[test]
    fn status_is_this_machines_decision_only() {
        let r = Rule::project(PK, "x", "Do it.").unwrap();
        let approve = fact(
            FactKind::RuleStatus {
                rule: r.id.clone(),
                status: RuleStatus::Approved,
            },
            "2026-01-01T00:00:00Z",
        );
        let cur = Curation::fold([SourcedFact {
            harness: "m-a".into(),
            line: 1,
            fact: approve,
        }]);
        assert_eq!(status(&r, &cur, "m-a"), Status::Core);
        assert_eq!(status(&r, &cur, "m-b"), Status::Proposed);
        let revoke = fact(
            FactKind::RuleStatus {
                rule: r.id.clone(),
                status: RuleStatus::Revoked,
            },
            "2026-01-02T00:00:00Z",
        );
        let s = Rule::session_marker(PK, "m-a", "s1", "s1", 1, "Be brief.").unwrap();
        let cur = Curation::fold([
            SourcedFact {
                harness: "m-a".into(),
                line: 1,
                fact: revoke,
            },
            SourcedFact {
                harness: "m-a".into(),
                line: 2,
                fact: fact(
                    FactKind::RuleStatus {
                        rule: s.id.clone(),
                        status: RuleStatus::Revoked,
                    },
                    "2026-01-03T00:00:00Z",
                ),
            },
        ]);
        assert_eq!(status(&r, &cur, "m-a"), Status::Revoked);
        assert_eq!(status(&s, &cur, "m-a"), Status::Revoked);
        assert_eq!(status(&s, &Curation::default(), "m-a"), Status::Active);
    }

    fn user_event(seq: u64, kind: &str, text: &str) -> Event {
        Event::new(
            seq,
            "user/message",
            json!({"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": kind}}),
        )
    }

    #[test]
    fn markers_only_from_human_lines() {
        let turn = CompletedTurn {
            turn: 1,
            first_seq: 0,
            end_seq: 3,
            reason: "completed".into(),
            events: vec![
                user_event(
                    0,
                    "user",
                    "Fix it.\n  ADD RULE: Never push to main.\nADD RULE:   \nsay ADD RULE: no",
                ),
                user_event(
                    1,
                    "agent-instructions",
                    "ADD RULE: injected files are not a person",
                ),
                user_event(
                    2,
                    "user",
                    "ADD RULE: Keep answers short.\n<system-reminder>\nADD RULE: injected inside a person's message\n</system-reminder>\nthanks",
                ),
                Event::new(
                    3,
                    "turn/end",
                    json!({"turn": 1, "reason": {"kind": "completed"}}),
                ),
            ],
        };
        assert_eq!(
            turn_marker_rules(&turn, "ADD RULE:"),
            vec![
                (0, "Never push to main.".to_owned()),
                (2, "Keep answers short.".to_owned())
            ]
        );
        assert!(turn_marker_rules(&turn, "").is_empty());
        assert!(
            marker_rules("add rule: lower case is not the marker", "ADD RULE:")
                .next()
                .is_none()
        );
    }
}

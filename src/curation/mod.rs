//! Layer 1 of the index (record §10.1): curation facts, one append-only ledger per machine,
//! `edits/<harness-id>/curation.jsonl`. This module is the pure model — what a fact line
//! is, which lines are valid, and what a set of facts from every machine means (the fold).
//! Reading and appending the files is `curation::file`.
//!
//! A person's decision is never automated: `rule-status` and `rule-pin` are valid only
//! when authored by `user` with a named `by`, a plugin alias never overrides a user's, and
//! a person's `topic-pin` keeps the topic its own label against every plugin alias.

pub mod file;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// The format version of a curation line; a newer line is refused by name, never guessed at.
pub const CURATION_VERSION: u64 = 1;

/// Longest alias chain followed before the resolution gives up and says so; a chain longer
/// than any real vocabulary is a loop someone wrote by hand.
const MAX_ALIAS_HOPS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Author {
    /// Written by dsh-chapters itself (the vocabulary pass).
    Plugin,
    /// Written by a person through a command.
    User,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleStatus {
    Approved,
    Revoked,
}

/// What a fact says. The `type` tag and field names are the pool's file format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum FactKind {
    /// Merge or rename: the topic `from` is read as `to`.
    TopicAlias { from: String, to: String },
    /// A topic that stays in the vocabulary whatever the merge signals say. A person's pin
    /// also undoes the plugin's merge of that topic (record §6.3: every merge revertible):
    /// while it holds, no plugin alias folds the topic away.
    TopicPin { topic: String, pinned: bool },
    /// Sibling chapters (pool-relative paths) that belong together.
    Group {
        chapters: Vec<String>,
        label: String,
    },
    /// A search weight for a topic (1.0 is neutral).
    Weight { topic: String, weight: f64 },
    /// A note about a chapter path or a topic.
    Note { target: String, text: String },
    /// A per-machine approval or revocation of a project rule (amendment 2026-09-20).
    RuleStatus { rule: String, status: RuleStatus },
    /// The always-rendered class of rules, per machine, for the reason status is a fact.
    RulePin { rule: String, pinned: bool },
}

/// One line of `curation.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    pub v: u64,
    #[serde(flatten)]
    pub kind: FactKind,
    pub author: Author,
    /// The person who decided, as they gave their name (`--by`): never read from git
    /// config or the environment. Required on a person's rule decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FactError {
    #[error("a {kind} fact needs a non-empty `{field}`")]
    Empty {
        kind: &'static str,
        field: &'static str,
    },
    #[error("a topic-alias from `{topic}` to itself says nothing; name two different topics")]
    SelfAlias { topic: String },
    #[error("a {kind} fact is a person's decision: it must be authored by `user` and name the person in `by`")]
    NotAPerson { kind: &'static str },
    #[error("a weight must be a finite number between 0 and 100, got {weight}")]
    BadWeight { weight: f64 },
    #[error("fact version {v} is not {CURATION_VERSION}, the version this program writes")]
    Version { v: u64 },
}

impl FactKind {
    pub fn name(&self) -> &'static str {
        match self {
            FactKind::TopicAlias { .. } => "topic-alias",
            FactKind::TopicPin { .. } => "topic-pin",
            FactKind::Group { .. } => "group",
            FactKind::Weight { .. } => "weight",
            FactKind::Note { .. } => "note",
            FactKind::RuleStatus { .. } => "rule-status",
            FactKind::RulePin { .. } => "rule-pin",
        }
    }

    fn is_persons_decision(&self) -> bool {
        matches!(self, FactKind::RuleStatus { .. } | FactKind::RulePin { .. })
    }
}

/// A topic label as the index keys it: trimmed, lowercase, inner whitespace as `-`.
pub fn normalize_topic(topic: &str) -> String {
    topic
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-")
        .to_lowercase()
}

impl Fact {
    /// A version-1 fact with no reason, session or person yet.
    pub fn new(kind: FactKind, author: Author, at: &str) -> Fact {
        Fact {
            v: CURATION_VERSION,
            kind,
            author,
            by: None,
            reason: None,
            session: None,
            at: at.to_owned(),
        }
    }

    /// A person's undo of a merge they made with git — the `topic-alias` line taken out of
    /// the pool (`git revert`) — as the fact that keeps it undone: a `topic-pin` of the topic
    /// by `user`. The person acted; the program only writes down what their commit did.
    pub fn revert_seen_in_pool(from: &str, to: &str, pool_head: &str, at: &str) -> Fact {
        let mut pin = Fact::new(
            FactKind::TopicPin {
                topic: from.to_owned(),
                pinned: true,
            },
            Author::User,
            at,
        );
        pin.reason = Some(format!(
            "the merge {from} → {to} was reverted in the pool (seen at {pool_head}); a person's undo, recorded so it holds"
        ));
        pin
    }

    /// A line of the original TypeScript plugin (no `v`, no `author`), read as the fact it
    /// means, by `plugin` — so it never overrides a person's alias or pin. Its `topic-alias`
    /// (the vocabulary pass), `topic-pin`, `topic-weight` and `note` carry over; its `group`
    /// (of topics) and `rule-status` (that machine's own approval of its `<harness>/<NNN>`
    /// rule, which governs that machine only) have no meaning here: `Err` says why.
    pub fn from_plugin_line(line: &serde_json::Value) -> Result<Fact, String> {
        let field = |name: &str| line.get(name).and_then(serde_json::Value::as_str);
        let text = |name: &'static str| {
            field(name)
                .map(str::to_owned)
                .ok_or_else(|| format!("the original plugin's line has no `{name}`"))
        };
        let kind = match field("type").unwrap_or_default() {
            "topic-alias" => FactKind::TopicAlias {
                from: text("from")?,
                to: text("to")?,
            },
            "topic-pin" => FactKind::TopicPin {
                topic: text("topic")?,
                pinned: true,
            },
            "topic-weight" => FactKind::Weight {
                topic: text("topic")?,
                weight: line
                    .get("weight")
                    .and_then(serde_json::Value::as_f64)
                    .ok_or("the original plugin's topic-weight has no numeric `weight`")?,
            },
            "note" => FactKind::Note {
                target: text("topic")?,
                text: text("text")?,
            },
            "rule-status" => {
                return Err(format!(
                    "the original plugin's approval of its rule {} on its own machine; it governs that machine only",
                    field("rule").unwrap_or("?")
                ))
            }
            "group" => return Err("the original plugin's group of topics; this version groups chapters, so it is left as it is".into()),
            other => return Err(format!("the original plugin's fact type {other:?} is not one this version reads")),
        };
        let mut fact = Fact::new(kind, Author::Plugin, field("at").unwrap_or_default());
        fact.reason = field("reason").map(str::to_owned);
        fact.validate().map_err(|e| e.to_string())?;
        Ok(fact)
    }

    /// Whether the line may be written (and is honoured when read).
    pub fn validate(&self) -> Result<(), FactError> {
        if self.v != CURATION_VERSION {
            return Err(FactError::Version { v: self.v });
        }
        let kind = self.kind.name();
        let need = |value: &str, field: &'static str| {
            if value.trim().is_empty() {
                Err(FactError::Empty { kind, field })
            } else {
                Ok(())
            }
        };
        need(&self.at, "at")?;
        match &self.kind {
            FactKind::TopicAlias { from, to } => {
                need(from, "from")?;
                need(to, "to")?;
                if normalize_topic(from) == normalize_topic(to) {
                    return Err(FactError::SelfAlias {
                        topic: normalize_topic(from),
                    });
                }
            }
            FactKind::TopicPin { topic, .. } => need(topic, "topic")?,
            FactKind::Group { chapters, label } => {
                need(label, "label")?;
                if chapters.is_empty() || chapters.iter().any(|c| c.trim().is_empty()) {
                    return Err(FactError::Empty {
                        kind,
                        field: "chapters",
                    });
                }
            }
            FactKind::Weight { topic, weight } => {
                need(topic, "topic")?;
                if !weight.is_finite() || *weight < 0.0 || *weight > 100.0 {
                    return Err(FactError::BadWeight { weight: *weight });
                }
            }
            FactKind::Note { target, text } => {
                need(target, "target")?;
                need(text, "text")?;
            }
            FactKind::RuleStatus { rule, .. } | FactKind::RulePin { rule, .. } => {
                need(rule, "rule")?
            }
        }
        if self.kind.is_persons_decision()
            && (self.author != Author::User
                || self.by.as_deref().is_none_or(|b| b.trim().is_empty()))
        {
            return Err(FactError::NotAPerson { kind });
        }
        Ok(())
    }
}

/// A fact with where it came from: the machine whose file holds it and its line there.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcedFact {
    pub harness: String,
    pub line: u64,
    pub fact: Fact,
}

/// The effective alias of one topic and the fact that decided it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alias {
    pub to: String,
    pub author: Author,
    pub harness: String,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A person's pin that keeps a topic its own label, and which fact said so.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kept {
    pub harness: String,
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A rule decision as one machine holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleDecision {
    pub status: RuleStatus,
    pub by: String,
    pub at: String,
}

/// What every machine's facts mean together. Deterministic whatever order the files were
/// read in: facts are applied in (`at`, harness, line) order, later wins within an author
/// class, and a person's alias always wins over the plugin's for the same topic. A
/// person's pin cancels any alias of the topic before it and every plugin alias whenever
/// written; a person's later alias (or unpin) lifts it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Curation {
    aliases: BTreeMap<String, Alias>,
    pins: BTreeMap<String, bool>,
    /// Topics a person pinned and has not since aliased or unpinned: no plugin alias folds
    /// them, whatever its time.
    kept: BTreeMap<String, Kept>,
    weights: BTreeMap<String, f64>,
    groups: Vec<(String, Vec<String>)>,
    notes: BTreeMap<String, Vec<String>>,
    rule_status: BTreeMap<(String, String), RuleDecision>,
    rule_pins: BTreeMap<(String, String), bool>,
    /// Facts that failed validation when read: counted and named, never honoured.
    pub ignored: Vec<String>,
}

/// The curation is read back from the store's and the mirror's curation files (written only
/// from `Redacted<Fact>`): a parameter a deriver may use beside redacted text.
impl crate::redact::Settings for Curation {}

/// Where alias resolution ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canonical {
    pub topic: String,
    /// Set when the chain looped or ran past the hop cap; the topic is then the
    /// smallest label on the loop, so every machine still agrees.
    pub loop_broken: bool,
}

impl Curation {
    pub fn fold(facts: impl IntoIterator<Item = SourcedFact>) -> Curation {
        let mut facts: Vec<SourcedFact> = facts.into_iter().collect();
        facts.sort_by(|a, b| {
            (&a.fact.at, &a.harness, a.line).cmp(&(&b.fact.at, &b.harness, b.line))
        });
        let mut out = Curation::default();
        for SourcedFact {
            harness,
            line,
            fact,
        } in facts
        {
            if let Err(e) = fact.validate() {
                out.ignored
                    .push(format!("edits/{harness}/curation.jsonl line {line}: {e}"));
                continue;
            }
            match fact.kind {
                FactKind::TopicAlias { from, to } => {
                    let from = normalize_topic(&from);
                    let keep_person = out
                        .aliases
                        .get(&from)
                        .is_some_and(|a| a.author == Author::User && fact.author == Author::Plugin);
                    let kept = fact.author == Author::Plugin && out.kept.contains_key(&from);
                    if fact.author == Author::User {
                        // The person changed their mind about the topic: their alias holds.
                        out.kept.remove(&from);
                    }
                    if !keep_person && !kept {
                        out.aliases.insert(
                            from,
                            Alias {
                                to: normalize_topic(&to),
                                author: fact.author,
                                harness,
                                at: fact.at,
                                reason: fact.reason,
                            },
                        );
                    }
                }
                FactKind::TopicPin { topic, pinned } => {
                    let topic = normalize_topic(&topic);
                    if fact.author == Author::User {
                        if pinned {
                            out.aliases.remove(&topic);
                            out.kept.insert(
                                topic.clone(),
                                Kept {
                                    harness,
                                    at: fact.at,
                                    reason: fact.reason,
                                },
                            );
                        } else {
                            out.kept.remove(&topic);
                        }
                    }
                    out.pins.insert(topic, pinned);
                }
                FactKind::Group { chapters, label } => {
                    out.groups.push((label, chapters));
                }
                FactKind::Weight { topic, weight } => {
                    out.weights.insert(normalize_topic(&topic), weight);
                }
                FactKind::Note { target, text } => {
                    out.notes.entry(target).or_default().push(text);
                }
                FactKind::RuleStatus { rule, status } => {
                    out.rule_status.insert(
                        (harness, rule),
                        RuleDecision {
                            status,
                            by: fact.by.unwrap_or_default(),
                            at: fact.at,
                        },
                    );
                }
                FactKind::RulePin { rule, pinned } => {
                    out.rule_pins.insert((harness, rule), pinned);
                }
            }
        }
        out
    }

    /// The canonical label of a topic: its alias chain followed to the end.
    pub fn canonical(&self, topic: &str) -> Canonical {
        let mut current = normalize_topic(topic);
        let mut seen = BTreeSet::new();
        let mut path = Vec::new();
        while let Some(alias) = self.aliases.get(&current) {
            if !seen.insert(current.clone()) || path.len() >= MAX_ALIAS_HOPS {
                let start = path.iter().position(|t| *t == current).unwrap_or(0);
                let smallest = path[start..]
                    .iter()
                    .min()
                    .cloned()
                    .unwrap_or_else(|| current.clone());
                return Canonical {
                    topic: smallest,
                    loop_broken: true,
                };
            }
            path.push(current.clone());
            current = alias.to.clone();
        }
        Canonical {
            topic: current,
            loop_broken: false,
        }
    }

    /// The canonical topics of a list, deduplicated, in first-seen order.
    pub fn canonical_topics<'a>(&self, topics: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for topic in topics {
            let canonical = self.canonical(topic).topic;
            if !canonical.is_empty() && seen.insert(canonical.clone()) {
                out.push(canonical);
            }
        }
        out
    }

    /// Every effective alias, by source topic.
    pub fn aliases(&self) -> &BTreeMap<String, Alias> {
        &self.aliases
    }

    /// Topics a person keeps as their own label against the plugin's merges.
    pub fn kept(&self) -> &BTreeMap<String, Kept> {
        &self.kept
    }

    pub fn is_pinned(&self, topic: &str) -> bool {
        self.pins
            .get(&normalize_topic(topic))
            .copied()
            .unwrap_or(false)
    }

    pub fn pinned_topics(&self) -> impl Iterator<Item = &str> {
        self.pins
            .iter()
            .filter(|(_, pinned)| **pinned)
            .map(|(t, _)| t.as_str())
    }

    /// A topic's weight; `None` when no fact set one (absence is not 1.0 by accident:
    /// the caller says what neutral is).
    pub fn weight(&self, topic: &str) -> Option<f64> {
        self.weights.get(&normalize_topic(topic)).copied()
    }

    pub fn groups(&self) -> &[(String, Vec<String>)] {
        &self.groups
    }

    pub fn notes_for(&self, target: &str) -> &[String] {
        self.notes.get(target).map(Vec::as_slice).unwrap_or(&[])
    }

    /// This machine's latest decision on a rule; another machine's approval governs
    /// nothing here.
    pub fn rule_decision(&self, harness: &str, rule: &str) -> Option<&RuleDecision> {
        self.rule_status.get(&(harness.to_owned(), rule.to_owned()))
    }

    pub fn rule_pinned(&self, harness: &str, rule: &str) -> bool {
        self.rule_pins
            .get(&(harness.to_owned(), rule.to_owned()))
            .copied()
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias(from: &str, to: &str, author: Author, at: &str) -> Fact {
        Fact::new(
            FactKind::TopicAlias {
                from: from.into(),
                to: to.into(),
            },
            author,
            at,
        )
    }

    fn sourced(harness: &str, line: u64, fact: Fact) -> SourcedFact {
        SourcedFact {
            harness: harness.into(),
            line,
            fact,
        }
    }

    #[test]
    fn lines_round_trip_in_the_pool_format() {
        let mut fact = alias(
            "auth",
            "authentication",
            Author::Plugin,
            "2026-11-01T00:00:00Z",
        );
        fact.reason = Some("co-occurrence in 14 chapters".into());
        let line = serde_json::to_string(&fact).unwrap();
        assert_eq!(
            line,
            r#"{"v":1,"type":"topic-alias","from":"auth","to":"authentication","author":"plugin","reason":"co-occurrence in 14 chapters","at":"2026-11-01T00:00:00Z"}"#
        );
        let back: Fact = serde_json::from_str(&line).unwrap();
        assert_eq!(back, fact);
        let status: Fact = serde_json::from_str(
            r#"{"v":1,"type":"rule-status","rule":"r-1","status":"approved","author":"user","by":"Ana","at":"t"}"#,
        )
        .unwrap();
        assert_eq!(
            status.kind,
            FactKind::RuleStatus {
                rule: "r-1".into(),
                status: RuleStatus::Approved
            }
        );
        for bad in [
            r#"{"v":1,"type":"topic-alias","from":"a","author":"user","at":"t"}"#,
            r#"{"v":1,"type":"no-such-fact","author":"user","at":"t"}"#,
            r#"{"v":1,"type":"rule-status","rule":"r","status":"maybe","author":"user","at":"t"}"#,
            r#"{"v":1,"type":"weight","topic":"a","weight":"heavy","author":"user","at":"t"}"#,
        ] {
            assert!(serde_json::from_str::<Fact>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_typescript_plugins_lines_are_read_as_the_plugins_facts() {
        let read = |line: &str| Fact::from_plugin_line(&serde_json::from_str(line).unwrap());
        // As its vocabulary pass writes one: no `v`, no `author`.
        let alias = read(r#"{"type":"topic-alias","from":"keys","to":"session-tokens","at":"2026-10-02T09:45:00.000Z","reason":"co-occurrence: cooccur=3 overlap=0"}"#).unwrap();
        assert_eq!(
            (alias.kind.clone(), alias.author),
            (
                FactKind::TopicAlias {
                    from: "keys".into(),
                    to: "session-tokens".into()
                },
                Author::Plugin
            )
        );
        assert_eq!(
            alias.reason.as_deref(),
            Some("co-occurrence: cooccur=3 overlap=0")
        );
        let pinned = read(r#"{"type":"topic-pin","topic":"auth","at":"t"}"#).unwrap();
        assert_eq!(pinned.author, Author::Plugin);
        let weight = read(r#"{"type":"topic-weight","topic":"auth","weight":2,"at":"t"}"#).unwrap();
        assert!(matches!(weight.kind, FactKind::Weight { weight, .. } if weight == 2.0));
        let note = read(r#"{"type":"note","topic":"auth","text":"see the RFC","at":"t"}"#).unwrap();
        assert!(matches!(note.kind, FactKind::Note { .. }));
        for (line, why) in [
            (
                r#"{"type":"rule-status","rule":"adrian-mbp/001","status":"core","at":"t"}"#,
                "that machine only",
            ),
            (
                r#"{"type":"group","topics":["a","b"],"at":"t"}"#,
                "group of topics",
            ),
            (r#"{"type":"topic-alias","from":"a","at":"t"}"#, "no `to`"),
            (
                r#"{"type":"topic-alias","from":"a","to":"a","at":"t"}"#,
                "to itself",
            ),
            (r#"{"type":"mystery","at":"t"}"#, "mystery"),
        ] {
            let e = read(line).unwrap_err();
            assert!(e.contains(why), "{line}: {e}");
        }
        // The plugin's alias never overrides a person's pin.
        let folded = Curation::fold([
            sourced("adrian-mbp", 1, alias),
            sourced("m1", 1, pin("keys", true, Author::User, "2026-10-03")),
        ]);
        assert_eq!(folded.canonical("keys").topic, "keys");
    }

    #[test]
    fn a_persons_decision_needs_a_person() {
        let mut fact = Fact::new(
            FactKind::RuleStatus {
                rule: "r".into(),
                status: RuleStatus::Approved,
            },
            Author::Plugin,
            "t",
        );
        fact.by = Some("Ana".into());
        assert_eq!(
            fact.validate(),
            Err(FactError::NotAPerson {
                kind: "rule-status"
            })
        );
        fact.author = Author::User;
        fact.by = Some("  ".into());
        assert!(fact.validate().is_err());
        fact.by = Some("Ana".into());
        assert_eq!(fact.validate(), Ok(()));
        assert!(alias("a", " A ", Author::User, "t").validate().is_err());
        assert!(alias("a", "b", Author::User, "").validate().is_err());
        let weight = Fact::new(
            FactKind::Weight {
                topic: "a".into(),
                weight: f64::NAN,
            },
            Author::User,
            "t",
        );
        assert!(weight.validate().is_err());
    }

    #[test]
    fn aliases_chain_and_a_person_beats_the_plugin() {
        let curation = Curation::fold([
            sourced(
                "m2",
                1,
                alias("auth", "authn", Author::Plugin, "2026-01-03"),
            ),
            sourced(
                "m1",
                1,
                alias("auth", "authentication", Author::User, "2026-01-02"),
            ),
            sourced(
                "m1",
                2,
                alias("Login Flow", "auth", Author::User, "2026-01-04"),
            ),
        ]);
        assert_eq!(curation.canonical("auth").topic, "authentication");
        assert_eq!(curation.canonical("login   flow").topic, "authentication");
        assert_eq!(curation.canonical("other").topic, "other");
        assert_eq!(
            curation.canonical_topics(["auth", "authentication", "x"]),
            vec!["authentication".to_string(), "x".to_string()]
        );
        // A later person's fact does replace an earlier person's.
        let later = Curation::fold([
            sourced(
                "m1",
                1,
                alias("auth", "authentication", Author::User, "2026-01-02"),
            ),
            sourced(
                "m2",
                1,
                alias("auth", "identity", Author::User, "2026-01-05"),
            ),
        ]);
        assert_eq!(later.canonical("auth").topic, "identity");
    }

    fn pin(topic: &str, pinned: bool, author: Author, at: &str) -> Fact {
        Fact::new(
            FactKind::TopicPin {
                topic: topic.into(),
                pinned,
            },
            author,
            at,
        )
    }

    #[test]
    fn a_persons_pin_undoes_the_plugins_merge_before_and_after_it() {
        let merged = [sourced(
            "m1",
            1,
            alias("token", "tokens", Author::Plugin, "1"),
        )];
        assert_eq!(
            Curation::fold(merged.clone()).canonical("token").topic,
            "tokens"
        );
        // Pinned after the merge (the revert), or before a merge the plugin writes later
        // (another machine that had not seen the pin yet): the topic stays its own.
        for facts in [
            vec![
                merged[0].clone(),
                sourced("m2", 1, pin("Token", true, Author::User, "2")),
            ],
            vec![
                sourced("m2", 1, pin("token", true, Author::User, "0")),
                merged[0].clone(),
            ],
        ] {
            let curation = Curation::fold(facts);
            assert_eq!(curation.canonical("token").topic, "token");
            assert!(curation.aliases().is_empty());
            assert_eq!(curation.kept()["token"].harness, "m2");
        }
        // The plugin's own pin undoes nothing: only a person's decision does.
        let plugin_pin = Curation::fold([
            merged[0].clone(),
            sourced("m1", 2, pin("token", true, Author::Plugin, "2")),
        ]);
        assert_eq!(plugin_pin.canonical("token").topic, "tokens");
        // A person's later alias or unpin lifts the pin; an unpin does not bring back the
        // merge it undid (the vocabulary may propose it again).
        let realiased = Curation::fold([
            merged[0].clone(),
            sourced("m2", 1, pin("token", true, Author::User, "2")),
            sourced("m2", 2, alias("token", "credential", Author::User, "3")),
            sourced("m1", 2, alias("token", "tokens", Author::Plugin, "4")),
        ]);
        assert_eq!(realiased.canonical("token").topic, "credential");
        let unpinned = Curation::fold([
            merged[0].clone(),
            sourced("m2", 1, pin("token", true, Author::User, "2")),
            sourced("m2", 2, pin("token", false, Author::User, "3")),
        ]);
        assert_eq!(unpinned.canonical("token").topic, "token");
        assert!(unpinned.kept().is_empty());
        let merged_again = Curation::fold([
            merged[0].clone(),
            sourced("m2", 1, pin("token", true, Author::User, "2")),
            sourced("m2", 2, pin("token", false, Author::User, "3")),
            sourced("m1", 2, alias("token", "tokens", Author::Plugin, "4")),
        ]);
        assert_eq!(merged_again.canonical("token").topic, "tokens");
        // A pin on the target does not undo a merge into it.
        let target = Curation::fold([
            merged[0].clone(),
            sourced("m2", 1, pin("tokens", true, Author::User, "2")),
        ]);
        assert_eq!(target.canonical("token").topic, "tokens");
    }

    #[test]
    fn the_fold_does_not_depend_on_reading_order() {
        let facts = vec![
            sourced("m1", 1, alias("a", "b", Author::Plugin, "2026-01-01")),
            sourced("m2", 1, alias("a", "c", Author::Plugin, "2026-01-01")),
            sourced("m2", 2, alias("c", "d", Author::Plugin, "2026-01-02")),
        ];
        let forward = Curation::fold(facts.clone());
        let backward = Curation::fold(facts.into_iter().rev());
        assert_eq!(forward, backward);
        // Same time: the harness id breaks the tie, so m2's fact is the later one.
        assert_eq!(forward.canonical("a").topic, "d");
    }

    #[test]
    fn a_loop_resolves_to_its_smallest_label_and_says_so() {
        let curation = Curation::fold([
            sourced("m1", 1, alias("b", "c", Author::User, "1")),
            sourced("m1", 2, alias("c", "a", Author::User, "2")),
            sourced("m1", 3, alias("a", "b", Author::User, "3")),
            sourced("m1", 4, alias("z", "b", Author::User, "4")),
        ]);
        for start in ["a", "b", "c", "z"] {
            let canonical = curation.canonical(start);
            assert_eq!(canonical.topic, "a", "{start}");
            assert!(canonical.loop_broken);
        }
    }

    #[test]
    fn rule_decisions_are_per_machine_and_invalid_facts_are_named_not_honoured() {
        let decide = |status, at: &str| {
            let mut f = Fact::new(
                FactKind::RuleStatus {
                    rule: "r-1".into(),
                    status,
                },
                Author::User,
                at,
            );
            f.by = Some("Ana".into());
            f
        };
        let mut forged = decide(RuleStatus::Approved, "3");
        forged.author = Author::Plugin;
        let curation = Curation::fold([
            sourced("m1", 1, decide(RuleStatus::Approved, "1")),
            sourced("m1", 2, decide(RuleStatus::Revoked, "2")),
            sourced("m2", 1, decide(RuleStatus::Approved, "1")),
            sourced("m3", 1, forged),
        ]);
        assert_eq!(
            curation.rule_decision("m1", "r-1").map(|d| d.status),
            Some(RuleStatus::Revoked)
        );
        assert_eq!(
            curation.rule_decision("m2", "r-1").map(|d| d.status),
            Some(RuleStatus::Approved)
        );
        assert_eq!(curation.rule_decision("m3", "r-1"), None);
        assert_eq!(curation.ignored.len(), 1);
        assert!(curation.ignored[0].contains("edits/m3/curation.jsonl line 1"));
    }

    #[test]
    fn pins_weights_groups_and_notes_fold() {
        let curation = Curation::fold([
            sourced(
                "m1",
                1,
                Fact::new(
                    FactKind::TopicPin {
                        topic: "Auth".into(),
                        pinned: true,
                    },
                    Author::User,
                    "1",
                ),
            ),
            sourced(
                "m1",
                2,
                Fact::new(
                    FactKind::Weight {
                        topic: "auth".into(),
                        weight: 2.0,
                    },
                    Author::User,
                    "2",
                ),
            ),
            sourced(
                "m1",
                3,
                Fact::new(
                    FactKind::Note {
                        target: "auth".into(),
                        text: "see the middleware".into(),
                    },
                    Author::User,
                    "3",
                ),
            ),
            sourced(
                "m1",
                4,
                Fact::new(
                    FactKind::Group {
                        chapters: vec!["chapters/k/s/001-a.md".into()],
                        label: "jwt".into(),
                    },
                    Author::User,
                    "4",
                ),
            ),
        ]);
        assert!(curation.is_pinned("auth"));
        assert_eq!(curation.pinned_topics().collect::<Vec<_>>(), vec!["auth"]);
        assert_eq!(curation.weight("AUTH"), Some(2.0));
        assert_eq!(curation.weight("other"), None);
        assert_eq!(
            curation.notes_for("auth"),
            ["see the middleware".to_string()]
        );
        assert_eq!(curation.groups().len(), 1);
    }
}

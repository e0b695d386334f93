//! The emergent vocabulary (record §6.3), PURE: merge candidates between canonical topics,
//! and `topics/vocabulary.json`.
//!
//! Signals, each with the counts that justify it (they become the fact's `reason`):
//! - **plural**: `token` / `tokens`, `query` / `queries`, `fix` / `fixes` — both present;
//! - **co-occurrence**: together in at least `vocabCoMin` documents, the two document
//!   sets overlap (Jaccard) by at least `vocabOverlapMin`, and together more often than
//!   chance would put them: a lift `together · N / (|a| · |b|)` of at least [`MIN_LIFT`]
//!   over the N documents that carry topics (a label present everywhere, like a filler word
//!   that slipped into topics, pairs with everything by count alone, never by lift);
//! - **token overlap**: multi-word labels whose words overlap (Jaccard) by at least
//!   `vocabOverlapMin` (`csv-export` / `export-csv`);
//! - **prefix**: a label of 4+ characters that begins another (`auth` / `authentication`),
//!   corroborated by at least one document carrying both.
//!
//! No candidate has a stopword on either side (`signature::is_stopword`): such a label is
//! filler, merging it into anything spreads it. A pinned topic is never merged; a topic already folded by curation is not a candidate
//! (so applying is idempotent). The direction is deterministic: into the label with more
//! documents, then the shorter, then the smaller. One candidate per source label: the first
//! signal in the order above.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::curation::{Author, Curation, Fact, FactKind};
use crate::redact::Redacted;

pub use crate::catalog::table::DocSets;

/// Documents carrying more topics than this are left out of co-occurrence counting (their
/// pairs say little and cost quadratically).
const MAX_TOPICS_PER_DOC: usize = 16;
/// A word shared by more labels than this is not used to pair labels by token overlap.
const MAX_LABELS_PER_WORD: usize = 64;
const MIN_PREFIX_CHARS: usize = 4;
/// Co-occurrence must beat chance by this ratio (see the module doc): twice as often
/// together as two independent labels of their frequencies would be.
pub const MIN_LIFT: f64 = 2.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VocabParams {
    /// `vocabCoMin`.
    pub co_min: u64,
    /// `vocabOverlapMin`.
    pub overlap_min: f64,
}

impl VocabParams {
    pub fn from_config(config: &crate::config::Config) -> VocabParams {
        VocabParams {
            co_min: config.vocab_co_min,
            overlap_min: config.vocab_overlap_min,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Signal {
    Plural,
    CoOccurrence,
    TokenOverlap,
    Prefix,
}

/// One proposed merge, with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Candidate {
    pub from: String,
    pub to: String,
    pub signal: Signal,
    pub from_documents: u64,
    pub to_documents: u64,
    /// Documents carrying both.
    pub together: u64,
    /// The reason a plugin fact carries: the signal and its counts.
    pub reason: String,
}

impl Candidate {
    /// The `topic-alias` fact applying this candidate (author `plugin`).
    pub fn fact(&self, at: &str) -> Fact {
        let mut fact = Fact::new(
            FactKind::TopicAlias {
                from: self.from.clone(),
                to: self.to.clone(),
            },
            Author::Plugin,
            at,
        );
        fact.reason = Some(self.reason.clone());
        fact
    }
}

/// Canonical topics and their documents, from raw labels and their documents.
pub fn canonical_sets(raw: &DocSets, curation: &Curation) -> DocSets {
    let mut out = DocSets::new();
    for (label, docs) in raw {
        let canonical = curation.canonical(label).topic;
        if !canonical.is_empty() {
            out.entry(canonical)
                .or_default()
                .extend(docs.iter().copied());
        }
    }
    out
}

fn jaccard(a: &BTreeSet<u64>, b: &BTreeSet<u64>) -> (u64, f64) {
    let together = a.intersection(b).count() as u64;
    let union = (a.len() + b.len()) as u64 - together;
    (
        together,
        if union == 0 {
            0.0
        } else {
            together as f64 / union as f64
        },
    )
}

fn words(label: &str) -> BTreeSet<&str> {
    label
        .split(['-', '_', '.', '/'])
        .filter(|w| !w.is_empty())
        .collect()
}

fn plural_forms(label: &str) -> Vec<String> {
    let mut forms = vec![format!("{label}s"), format!("{label}es")];
    if let Some(stem) = label.strip_suffix('y') {
        forms.push(format!("{stem}ies"));
    }
    forms
}

/// Merge candidates among the canonical topics `sets` (see the module doc).
pub fn candidates(sets: &DocSets, curation: &Curation, params: VocabParams) -> Vec<Candidate> {
    let eligible =
        |label: &str| !curation.is_pinned(label) && !crate::signature::is_stopword(label);
    let mut pairs: BTreeMap<(String, String), Signal> = BTreeMap::new();
    let mut propose = |a: &str, b: &str, signal: Signal| {
        if a == b || !eligible(a) || !eligible(b) {
            return;
        }
        let key = if a < b {
            (a.to_owned(), b.to_owned())
        } else {
            (b.to_owned(), a.to_owned())
        };
        let entry = pairs.entry(key).or_insert(signal);
        *entry = (*entry).min(signal);
    };
    for label in sets.keys() {
        for form in plural_forms(label) {
            if sets.contains_key(&form) {
                propose(label, &form, Signal::Plural);
            }
        }
        if label.chars().count() >= MIN_PREFIX_CHARS {
            for (longer, docs) in sets.range::<String, _>(label.clone()..) {
                if !longer.starts_with(label.as_str()) {
                    break;
                }
                if longer != label && !docs.is_disjoint(&sets[label]) {
                    propose(label, longer, Signal::Prefix);
                }
            }
        }
    }
    // Token overlap between multi-word labels sharing a word.
    let mut by_word: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for label in sets.keys() {
        let w = words(label);
        if w.len() >= 2 {
            for word in w {
                by_word.entry(word).or_default().push(label);
            }
        }
    }
    for labels in by_word.values().filter(|l| l.len() <= MAX_LABELS_PER_WORD) {
        for (i, a) in labels.iter().enumerate() {
            for b in &labels[i + 1..] {
                let (wa, wb) = (words(a), words(b));
                let shared = wa.intersection(&wb).count() as f64;
                if shared / wa.union(&wb).count() as f64 >= params.overlap_min {
                    propose(a, b, Signal::TokenOverlap);
                }
            }
        }
    }
    // Co-occurrence: count pairs per document.
    let mut per_doc: HashMap<u64, Vec<&str>> = HashMap::new();
    for (label, docs) in sets {
        for d in docs {
            per_doc.entry(*d).or_default().push(label);
        }
    }
    let mut together: HashMap<(&str, &str), u64> = HashMap::new();
    for labels in per_doc.values().filter(|l| l.len() <= MAX_TOPICS_PER_DOC) {
        for (i, a) in labels.iter().enumerate() {
            for b in &labels[i + 1..] {
                let key = if a < b { (*a, *b) } else { (*b, *a) };
                *together.entry(key).or_insert(0) += 1;
            }
        }
    }
    let mut co: Vec<(&str, &str)> = together
        .iter()
        .filter(|(_, n)| **n >= params.co_min)
        .map(|(k, _)| *k)
        .collect();
    co.sort();
    let documents = per_doc.len() as f64;
    for (a, b) in co {
        let (n, overlap) = jaccard(&sets[a], &sets[b]);
        let chance = sets[a].len() as f64 * sets[b].len() as f64 / documents;
        if overlap >= params.overlap_min && n as f64 >= MIN_LIFT * chance {
            propose(a, b, Signal::CoOccurrence);
        }
    }
    // Direct each pair, one candidate per source, strongest signal first.
    let documents = per_doc.len() as f64;
    let mut best: BTreeMap<String, Candidate> = BTreeMap::new();
    for ((a, b), signal) in pairs {
        let (na, nb) = (sets[&a].len(), sets[&b].len());
        let a_first = (std::cmp::Reverse(na), a.len(), &a) < (std::cmp::Reverse(nb), b.len(), &b);
        let (to, from) = if a_first { (a, b) } else { (b, a) };
        let (together, overlap) = jaccard(&sets[&from], &sets[&to]);
        let (nf, nt) = (sets[&from].len() as u64, sets[&to].len() as u64);
        let reason = match signal {
            Signal::Plural => format!("plural: {from} ({nf} documents) / {to} ({nt} documents)"),
            Signal::CoOccurrence => format!(
                "co-occurrence: together in {together} documents ({from}: {nf}, {to}: {nt}; overlap {overlap:.2}; lift {:.1})",
                together as f64 * documents / (nf as f64 * nt as f64)
            ),
            Signal::TokenOverlap => format!(
                "token overlap: {from} / {to} share their words ({nf} and {nt} documents)"
            ),
            Signal::Prefix => format!(
                "prefix: {from} / {to}, together in {together} documents ({nf} and {nt})"
            ),
        };
        let candidate = Candidate {
            from: from.clone(),
            to,
            signal,
            from_documents: nf,
            to_documents: nt,
            together,
            reason,
        };
        match best.get(&from) {
            Some(existing) if (existing.signal, &existing.to) <= (signal, &candidate.to) => {}
            _ => {
                best.insert(from, candidate);
            }
        }
    }
    // A label merged away is not also a target of another merge in the same pass (the
    // next pass sees the result): drop candidates whose target is itself a source.
    let sources: BTreeSet<String> = best.keys().cloned().collect();
    best.into_values()
        .filter(|c| !sources.contains(&c.to))
        .collect()
}

#[derive(Debug, Serialize)]
struct VocabularyFile<'a> {
    v: u32,
    topics: Vec<VocabTopic<'a>>,
}

#[derive(Debug, Serialize)]
struct VocabTopic<'a> {
    topic: &'a str,
    aliases: Vec<VocabAlias<'a>>,
}

#[derive(Debug, Serialize)]
struct VocabAlias<'a> {
    from: &'a str,
    #[serde(flatten)]
    alias: &'a crate::curation::Alias,
}

/// `topics/vocabulary.json`: every canonical topic and the aliases folded into it, each
/// with its provenance (author, machine, time, reason). Deterministic; no counts, so it
/// changes only when the vocabulary does (a new topic, a new alias), not with every document.
///
/// The topics are `Redacted` (the canonical topics of the index's redacted documents,
/// `topics::build`), and the aliases come from the curation read back from the store.
pub fn vocabulary_json(
    topics: &Redacted<BTreeSet<String>>,
    curation: &Curation,
) -> Redacted<String> {
    topics.derive_with(curation, render_vocabulary)
}

fn render_vocabulary(topics: &BTreeSet<String>, curation: &Curation) -> String {
    let mut aliases: BTreeMap<String, Vec<VocabAlias<'_>>> = BTreeMap::new();
    for (from, alias) in curation.aliases() {
        let to = curation.canonical(from).topic;
        if to != *from {
            aliases
                .entry(to)
                .or_default()
                .push(VocabAlias { from, alias });
        }
    }
    let mut topics: BTreeSet<String> = topics.clone();
    topics.extend(aliases.keys().cloned());
    let file = VocabularyFile {
        v: 1,
        topics: topics
            .iter()
            .map(|t| VocabTopic {
                topic: t,
                aliases: aliases.remove(t).unwrap_or_default(),
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&file).expect("strings and numbers");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curation::SourcedFact;

    fn sets(entries: &[(&str, &[u64])]) -> DocSets {
        entries
            .iter()
            .map(|(l, d)| ((*l).to_owned(), d.iter().copied().collect()))
            .collect()
    }

    const P: VocabParams = VocabParams {
        co_min: 3,
        overlap_min: 0.5,
    };

    #[test]
    fn each_signal_proposes_with_its_counts() {
        let s = sets(&[
            ("token", &[1, 2]),
            ("tokens", &[3, 4, 5]),
            ("query", &[6]),
            ("queries", &[7]),
            ("auth", &[8, 9]),
            ("authentication", &[9, 10, 11]),
            ("form", &[12]),
            ("format", &[13]),
            ("csv-export", &[14]),
            ("export-csv", &[15, 16]),
            ("jwt", &[20, 21, 22, 23]),
            ("bearer", &[20, 21, 22]),
            ("middleware", &[20, 30, 31, 32, 33, 34, 35]),
        ]);
        let got: Vec<(String, String, Signal)> = candidates(&s, &Curation::default(), P)
            .into_iter()
            .map(|c| (c.from, c.to, c.signal))
            .collect();
        assert_eq!(
            got,
            [
                ("auth".into(), "authentication".into(), Signal::Prefix),
                ("bearer".into(), "jwt".into(), Signal::CoOccurrence),
                (
                    "csv-export".into(),
                    "export-csv".into(),
                    Signal::TokenOverlap
                ),
                ("queries".into(), "query".into(), Signal::Plural),
                ("token".into(), "tokens".into(), Signal::Plural),
            ]
        );
        // form/format share no document: no prefix candidate; jwt/middleware overlap little.
        let c = &candidates(&s, &Curation::default(), P)[1];
        assert_eq!(c.together, 3);
        assert!(
            c.reason
                .starts_with("co-occurrence: together in 3 documents"),
            "{}",
            c.reason
        );
        let fact = c.fact("2026-01-01T00:00:00Z");
        assert_eq!(fact.author, Author::Plugin);
        assert_eq!(fact.validate(), Ok(()));
    }

    #[test]
    fn co_occurrence_needs_a_lift_over_chance_and_no_stopword() {
        // `artifact` lives in 4 of 10 documents, always beside `release`, which is in 8:
        // together 4 times, chance 4·8/10 = 3.2, lift 1.25 — no candidate.
        let s = sets(&[
            ("artifact", &[1, 2, 3, 4]),
            ("release", &[1, 2, 3, 4, 5, 6, 7, 8]),
            ("deploy", &[9, 10]),
        ]);
        let p = VocabParams {
            co_min: 2,
            overlap_min: 0.5,
        };
        assert!(candidates(&s, &Curation::default(), p).is_empty());
        // Rarer labels, always together: lift 10/4 = 2.5 — a candidate, its lift said.
        let s = sets(&[
            ("artifact", &[1, 2, 3, 4]),
            ("bundle", &[1, 2, 3, 4]),
            ("deploy", &[5, 6, 7, 8, 9, 10]),
        ]);
        let got = candidates(&s, &Curation::default(), p);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].reason.contains("lift 2.5"), "{}", got[0].reason);
        // A stopword (filler that slipped into topics) is never a side.
        let s = sets(&[("look", &[1, 2, 3]), ("looks", &[4, 5])]);
        assert!(candidates(&s, &Curation::default(), P).is_empty());
    }

    #[test]
    fn pinned_and_already_folded_topics_are_left_alone_and_output_is_deterministic() {
        let s = sets(&[("token", &[1]), ("tokens", &[2, 3])]);
        let pin = SourcedFact {
            harness: "m".into(),
            line: 1,
            fact: Fact::new(
                FactKind::TopicPin {
                    topic: "token".into(),
                    pinned: true,
                },
                Author::User,
                "1",
            ),
        };
        assert!(candidates(&s, &Curation::fold([pin]), P).is_empty());
        let alias = SourcedFact {
            harness: "m".into(),
            line: 1,
            fact: Fact::new(
                FactKind::TopicAlias {
                    from: "token".into(),
                    to: "tokens".into(),
                },
                Author::Plugin,
                "1",
            ),
        };
        let curation = Curation::fold([alias]);
        let canonical = canonical_sets(&s, &curation);
        assert_eq!(canonical.len(), 1);
        assert!(
            candidates(&canonical, &curation, P).is_empty(),
            "applying is idempotent"
        );
        let topics: BTreeSet<String> = ["tokens".to_string()].into();
        let json = render_vocabulary(&topics, &curation);
        assert_eq!(json, render_vocabulary(&topics, &curation));
        let v: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(v["topics"][0]["topic"], "tokens");
        assert_eq!(v["topics"][0]["aliases"][0]["from"], "token");
        assert_eq!(v["topics"][0]["aliases"][0]["author"], "plugin");
    }
}

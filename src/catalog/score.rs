//! The deterministic scorer and packer behind `chapters search` (PURE: documents, a query and
//! a clock value in; ranked, packed lines out).
//!
//! Every point a result earns is traceable: per query term, +2 when a topic contains it
//! (times the topic's curation `weight`, 1 when none is set; the highest weight among the
//! matching topics), +1 for the title, +1 for the summary, +1 when the kind equals it (so
//! `plan` finds plans); the recency bonus `0.5^(age_days / 30)` and the core-rule bonus
//! (config `rulesCoreBonus`, for a `kind: rule` document approved on this machine) are added
//! only to a document that already scored. Topics are canonical (curation aliases applied
//! before scoring). Ties break by path, so the same corpus and query always give the same
//! answer.

use serde::{Deserialize, Serialize};

/// Points for a query term found in one of a document's topics (before its weight).
pub const TOPIC_POINTS: f64 = 2.0;
/// Points for a query term found in the title, the summary, or equal to the kind.
pub const FIELD_POINTS: f64 = 1.0;
/// Points for a query term found in a rule's category (record §8: category 1.5).
pub const CATEGORY_POINTS: f64 = 1.5;
/// The weight of a topic no `weight` fact names.
pub const NEUTRAL_WEIGHT: f64 = 1.0;
/// The recency bonus halves every this many days.
const RECENCY_HALF_LIFE_DAYS: f64 = 30.0;
/// The recency bonus of a document dated now.
const RECENCY_MAX: f64 = 1.0;
const MS_PER_DAY: f64 = 86_400_000.0;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error("no YAML frontmatter (a chapter document starts with a `---` line)")]
    NoFrontmatter,
    #[error("bad frontmatter: {0}")]
    Frontmatter(String),
}

/// The frontmatter fields search reads. Unknown keys are ignored (the original TypeScript
/// plugin's `events`, `unrenderedSeqs`, `tokens`, …); `title` is required (a document without
/// one is not a chapter, plan or rule). A document without `kind` is a chapter: the
/// original plugin's chapters carry none (its rules say `kind: rule`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DocMeta {
    pub title: String,
    #[serde(default)]
    pub summary: String,
    #[serde(default = "chapter_kind")]
    pub kind: String,
    #[serde(default)]
    pub project_key: String,
    #[serde(default)]
    pub topics: Vec<String>,
    /// RFC 3339, or `null` when the log recorded no time.
    #[serde(default)]
    pub date: Option<String>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub seq_range: Option<(u64, u64)>,
    /// A rule's id (`kind: rule` documents), what its `rule-status` facts name.
    #[serde(default)]
    pub id: Option<String>,
}

impl From<crate::render::frontmatter::Head> for DocMeta {
    /// The fast reader's fields, as the YAML parse would give them (no `kind`: a chapter).
    fn from(head: crate::render::frontmatter::Head) -> DocMeta {
        DocMeta {
            title: head.title,
            summary: head.summary,
            kind: head.kind.unwrap_or_else(chapter_kind),
            project_key: head.project_key,
            topics: head.topics,
            date: head.date,
            session_id: head.session_id,
            seq_range: head.seq_range,
            id: head.id,
        }
    }
}

/// The kind of a document whose frontmatter names none.
pub(crate) fn chapter_kind() -> String {
    "chapter".to_owned()
}

/// Parse a document's frontmatter (the text from its opening `---` line through its closing
/// `---` line is enough; the body is not needed).
pub fn parse_meta(doc: &str) -> Result<DocMeta, SearchError> {
    let yaml = crate::render::frontmatter_text(doc).ok_or(SearchError::NoFrontmatter)?;
    serde_saphyr::from_str(yaml).map_err(|e| SearchError::Frontmatter(e.to_string()))
}

/// One searchable document: where it is (as shown to the reader) and what it says of itself.
/// `meta.topics` are canonical (curation applied) by the time it is scored.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchDoc {
    pub path: String,
    pub meta: DocMeta,
    /// A `kind: rule` document this machine approved: earns the core-rule bonus.
    pub core_rule: bool,
}

/// What scoring needs beyond the document and the terms.
#[derive(Debug, Clone, Default)]
pub struct ScoreParams {
    /// Every machine's curation facts: the `weight` per canonical topic (absent: neutral).
    pub curation: crate::curation::Curation,
    /// Points added to a scored core rule (config `rulesCoreBonus`).
    pub core_rule_bonus: f64,
}

impl ScoreParams {
    pub fn weight(&self, topic: &str) -> f64 {
        self.curation.weight(topic).unwrap_or(NEUTRAL_WEIGHT)
    }
}

/// Which field a query term hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    Topic,
    Title,
    Summary,
    /// A rule's category (record §8).
    Category,
    Kind,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TermHit {
    pub term: String,
    pub field: Field,
    pub points: f64,
}

/// The recency term of a score, said even when it is zero.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "recency", rename_all = "kebab-case")]
pub enum Recency {
    /// `points = 0.5^(age_days / 30)`; a date in the future counts as age 0.
    #[serde(rename_all = "camelCase")]
    Bonus { age_days: f64, points: f64 },
    /// The document carries no date (or one that is not RFC 3339): no bonus.
    NoDate,
    /// The document scored nothing on the query terms, so recency is not added.
    NotScored,
}

impl Recency {
    pub fn points(&self) -> f64 {
        match self {
            Recency::Bonus { points, .. } => *points,
            Recency::NoDate | Recency::NotScored => 0.0,
        }
    }
}

/// A document's score and how it was earned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explain {
    pub hits: Vec<TermHit>,
    pub base: f64,
    #[serde(flatten)]
    pub recency: Recency,
    /// The core-rule bonus added (0 unless a scored core rule).
    pub core_rule_bonus: f64,
}

/// One ranked result.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked<'a> {
    pub doc: &'a SearchDoc,
    pub score: f64,
    pub explain: Explain,
}

/// The query terms: lowercase, split on anything but letters, digits and `_`, tokens of at
/// least 2 characters, each once, in first-seen order.
pub fn query_terms(query: &str) -> Vec<String> {
    let lowered: String = query.chars().flat_map(char::to_lowercase).collect();
    let mut terms: Vec<String> = Vec::new();
    for token in lowered.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if token.chars().count() >= 2 && !terms.iter().any(|t| t == token) {
            terms.push(token.to_owned());
        }
    }
    terms
}

/// A document's §8 fields as the scorer reads them: lowercase, topics canonical.
pub struct Fields<'a> {
    pub title: &'a str,
    pub summary: &'a str,
    pub kind: &'a str,
    pub topics: &'a [String],
    /// A rule's category (empty for other documents).
    pub category: &'a str,
}

/// Which of a document's §8 fields one query term hit: what the term's points are made of.
/// Found from the text by [`field_points`], from its postings by the search table
/// (`catalog::table`); turned into points only by [`add_term_points`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TermHits {
    /// The highest curation weight among the document's topics containing the term
    /// (`None`: no topic does).
    pub topic_weight: Option<f64>,
    pub title: bool,
    pub summary: bool,
    /// The kind equals the term.
    pub kind: bool,
}

impl TermHits {
    /// A topic of this weight contains the term: the highest weight counts, once.
    pub fn topic(&mut self, weight: f64) {
        self.topic_weight = Some(self.topic_weight.map_or(weight, |best| best.max(weight)));
    }
}

/// The points one term's hits earn — the best topic (2 × its weight), title, summary, kind
/// (1 each) — each handed to `on_hit` and added to `sum` in that order. The one place the
/// §8 field points are made: the door's ranking, its `--explain` lines ([`field_points`])
/// and the search table's ranking all add through it, term by term in query order, so a
/// document's sum has the same bits whoever found its hits.
pub fn add_term_points(
    sum: &mut f64,
    term: &str,
    hits: &TermHits,
    on_hit: &mut impl FnMut(&str, Field, f64),
) {
    let mut add = |field: Field, points: f64| {
        on_hit(term, field, points);
        *sum += points;
    };
    if let Some(w) = hits.topic_weight {
        add(Field::Topic, TOPIC_POINTS * w);
    }
    if hits.title {
        add(Field::Title, FIELD_POINTS);
    }
    if hits.summary {
        add(Field::Summary, FIELD_POINTS);
    }
    if hits.kind {
        add(Field::Kind, FIELD_POINTS);
    }
}

/// The §8 points of the query terms on a document's fields — per term its [`TermHits`]
/// found in the text, made points by [`add_term_points`]; then +1.5 per term a rule's
/// category holds — each hit handed to `on_hit` in that order, and summed in it: (the
/// fields' points, the category's). The lines' explanation and the ranking of every
/// full-text match both call it.
pub fn field_points(
    f: &Fields<'_>,
    terms: &[String],
    params: &ScoreParams,
    mut on_hit: impl FnMut(&str, Field, f64),
) -> (f64, f64) {
    // `-0.0`: what an empty `f64` sum is, so a document with no hit has the reference's bits.
    let mut base = -0.0f64;
    for term in terms {
        let t = term.as_str();
        let mut hits = TermHits {
            topic_weight: None,
            title: f.title.contains(t),
            summary: f.summary.contains(t),
            kind: f.kind == t,
        };
        for topic in f.topics.iter().filter(|topic| topic.contains(t)) {
            hits.topic(params.weight(topic));
        }
        add_term_points(&mut base, t, &hits, &mut on_hit);
    }
    let mut category = -0.0f64;
    if !f.category.is_empty() {
        for term in terms {
            if f.category.contains(term.as_str()) {
                on_hit(term, Field::Category, CATEGORY_POINTS);
                category += CATEGORY_POINTS;
            }
        }
    }
    (base, category)
}

/// Score one document against the query terms at `now_ms` (its category aside): the
/// reference scorer of the oracle [`rank`], written apart from [`field_points`] (what the
/// product runs) so that the oracle tests compare two implementations.
#[cfg(test)]
pub fn score(
    doc: &SearchDoc,
    terms: &[String],
    now_ms: i64,
    params: &ScoreParams,
) -> (f64, Explain) {
    let meta = &doc.meta;
    let title = meta.title.to_lowercase();
    let summary = meta.summary.to_lowercase();
    let kind = meta.kind.to_lowercase();
    let topics: Vec<String> = meta.topics.iter().map(|t| t.to_lowercase()).collect();
    let mut hits = Vec::new();
    for term in terms {
        let t = term.as_str();
        let topic_weight = topics
            .iter()
            .filter(|topic| topic.contains(t))
            .map(|topic| params.weight(topic))
            .fold(None, |best: Option<f64>, w| {
                Some(best.map_or(w, |b| b.max(w)))
            });
        if let Some(w) = topic_weight {
            hits.push(hit(term, Field::Topic, TOPIC_POINTS * w));
        }
        if title.contains(t) {
            hits.push(hit(term, Field::Title, FIELD_POINTS));
        }
        if summary.contains(t) {
            hits.push(hit(term, Field::Summary, FIELD_POINTS));
        }
        if kind == t {
            hits.push(hit(term, Field::Kind, FIELD_POINTS));
        }
    }
    let base: f64 = hits.iter().map(|h| h.points).sum();
    finish(
        hits,
        base,
        meta.date.as_deref(),
        doc.core_rule,
        now_ms,
        params,
    )
}

/// The score of term hits already found: the base, plus recency and the core-rule bonus
/// when the base is positive. Shared by the product's scorer and the reference scorer.
pub fn finish(
    hits: Vec<TermHit>,
    base: f64,
    date: Option<&str>,
    core_rule: bool,
    now_ms: i64,
    params: &ScoreParams,
) -> (f64, Explain) {
    finish_at(
        hits,
        base,
        date.and_then(parse_rfc3339_ms),
        core_rule,
        now_ms,
        params,
    )
}

/// [`finish`] of a document dated `date_ms` (already parsed): what the search table adds
/// to the field points it summed.
pub fn finish_at(
    hits: Vec<TermHit>,
    base: f64,
    date_ms: Option<i64>,
    core_rule: bool,
    now_ms: i64,
    params: &ScoreParams,
) -> (f64, Explain) {
    let (recency, core_rule_bonus) = if base > 0.0 {
        (
            recency_at(date_ms, now_ms),
            if core_rule {
                params.core_rule_bonus
            } else {
                0.0
            },
        )
    } else {
        (Recency::NotScored, 0.0)
    };
    let score = base + recency.points() + core_rule_bonus;
    (
        score,
        Explain {
            hits,
            base,
            recency,
            core_rule_bonus,
        },
    )
}

impl Explain {
    /// The points one field earned over every term.
    pub fn field_points(&self, field: Field) -> f64 {
        self.hits
            .iter()
            .filter(|h| h.field == field)
            .fold(0.0, |sum, h| sum + h.points)
    }
}

#[cfg(test)]
fn hit(term: &str, field: Field, points: f64) -> TermHit {
    TermHit {
        term: term.to_owned(),
        field,
        points,
    }
}

/// The recency term of a dated document; `NoDate` when the date is absent or unreadable.
pub fn recency(date: Option<&str>, now_ms: i64) -> Recency {
    recency_at(date.and_then(parse_rfc3339_ms), now_ms)
}

/// The recency term of a document dated `at_ms` (already parsed).
pub fn recency_at(at_ms: Option<i64>, now_ms: i64) -> Recency {
    let Some(at_ms) = at_ms else {
        return Recency::NoDate;
    };
    let age_days = ((now_ms - at_ms) as f64 / MS_PER_DAY).max(0.0);
    Recency::Bonus {
        age_days,
        points: RECENCY_MAX * 0.5f64.powf(age_days / RECENCY_HALF_LIFE_DAYS),
    }
}

/// The start (00:00:00 UTC) of the day holding `ms`: the clock search measures recency
/// from, so an answer does not change between two machines, or two runs, of one day.
pub fn day_start(ms: i64) -> i64 {
    ms - ms.rem_euclid(MS_PER_DAY as i64)
}

/// What to look for: query terms, and optionally a topic every result must carry.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub terms: Vec<String>,
    /// Exact topic (case-insensitive) a document must carry to be considered.
    pub topic: Option<String>,
}

/// Rank `docs`: documents that earn a score > 0, highest first, ties by path (ascending).
///
/// With no query terms and a `topic`, every document carrying that topic is listed, newest
/// first (its score is then its recency term alone; undated documents score 0 and come last),
/// ties by path.
///
/// This is the reference ranking, kept as the tests' oracle only: the search table
/// (`catalog::table`) answers the same question without reading every document, and its
/// answer must equal this one.
#[cfg(test)]
pub fn rank<'a>(
    docs: &'a [SearchDoc],
    query: &Query,
    now_ms: i64,
    params: &ScoreParams,
) -> Vec<Ranked<'a>> {
    let topic = query.topic.as_deref().map(str::to_lowercase);
    let mut ranked: Vec<Ranked<'a>> = docs
        .iter()
        .filter(|d| match &topic {
            Some(t) => d.meta.topics.iter().any(|dt| dt.to_lowercase() == *t),
            None => true,
        })
        .filter_map(|doc| {
            if query.terms.is_empty() {
                // A topic listing: the topic is the match; order by recency.
                topic.as_ref()?;
                let recency = recency(doc.meta.date.as_deref(), now_ms);
                return Some(Ranked {
                    doc,
                    score: recency.points(),
                    explain: Explain {
                        hits: Vec::new(),
                        base: 0.0,
                        recency,
                        core_rule_bonus: 0.0,
                    },
                });
            }
            let (score, explain) = score(doc, &query.terms, now_ms, params);
            (explain.base > 0.0).then_some(Ranked {
                doc,
                score,
                explain,
            })
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.doc.path.cmp(&b.doc.path))
    });
    ranked
}

/// A topic listing with no terms scores each document by its recency alone.
pub fn listing_score(date: Option<&str>, now_ms: i64) -> (f64, Explain) {
    listing_score_at(date.and_then(parse_rfc3339_ms), now_ms)
}

/// [`listing_score`] of a document dated `date_ms` (already parsed).
pub fn listing_score_at(date_ms: Option<i64>, now_ms: i64) -> (f64, Explain) {
    let recency = recency_at(date_ms, now_ms);
    (
        recency.points(),
        Explain {
            hits: Vec::new(),
            base: 0.0,
            recency,
            core_rule_bonus: 0.0,
        },
    )
}

/// `YYYY-MM-DD` of a document's date, or `-`.
pub fn day_of(date: Option<&str>) -> String {
    match date {
        Some(d) if parse_rfc3339_ms(d).is_some() => d[..10].to_owned(),
        _ => "-".to_owned(),
    }
}

/// One result line: `score | date | kind | title | path (topics: a, b)`.
pub fn result_line(r: &Ranked<'_>) -> String {
    line_of(r.score, r.doc)
}

/// The result line of a document with this score.
pub fn line_of(score: f64, doc: &SearchDoc) -> String {
    let m = &doc.meta;
    format!(
        "{:.2} | {} | {} | {} | {} (topics: {})",
        score,
        day_of(m.date.as_deref()),
        m.kind,
        // A title with line breaks would break the one-line-per-result contract.
        crate::names::one_line(&m.title),
        doc.path,
        m.topics.join(", ")
    )
}

/// Estimated tokens of one line: ceil(chars / 4).
pub fn line_tokens(line: &str) -> u64 {
    crate::render::estimated_tokens(line)
}

/// How many whole lines fit the budget, most relevant first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Packed {
    /// The first `shown` lines are shown; never a clipped line.
    pub shown: usize,
    pub requested: u64,
    pub used: u64,
    pub remaining: u64,
    /// The first line alone exceeds the budget: its size, so the caller can ask again.
    pub first_line_too_large: Option<u64>,
}

/// Pack whole lines in order until the next one would exceed `budget` tokens.
pub fn pack(lines: &[String], budget: u64) -> Packed {
    let mut used = 0u64;
    let mut shown = 0usize;
    let mut first_line_too_large = None;
    for line in lines {
        let cost = line_tokens(line);
        if used + cost > budget {
            if shown == 0 {
                first_line_too_large = Some(cost);
            }
            break;
        }
        used += cost;
        shown += 1;
    }
    Packed {
        shown,
        requested: budget,
        used,
        remaining: budget - used,
        first_line_too_large,
    }
}

use crate::time::parse_rfc3339_ms;

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_764_400_000_000; // 2025-11-29T07:06:40Z
    const DAY: i64 = 86_400_000;

    fn doc(path: &str, title: &str, summary: &str, kind: &str, topics: &[&str]) -> SearchDoc {
        SearchDoc {
            path: path.to_owned(),
            meta: DocMeta {
                title: title.to_owned(),
                summary: summary.to_owned(),
                kind: kind.to_owned(),
                project_key: "pk".to_owned(),
                topics: topics.iter().map(|t| (*t).to_owned()).collect(),
                date: None,
                session_id: None,
                seq_range: None,
                id: None,
            },
            core_rule: false,
        }
    }

    fn p() -> ScoreParams {
        ScoreParams::default()
    }

    fn dated(mut d: SearchDoc, ms: i64) -> SearchDoc {
        d.meta.date = Some(crate::time::rfc3339_utc(ms));
        d
    }

    fn q(text: &str) -> Query {
        Query {
            terms: query_terms(text),
            topic: None,
        }
    }

    #[test]
    fn day_start_is_midnight_utc() {
        assert_eq!(
            crate::time::rfc3339_utc(day_start(NOW)),
            "2025-11-29T00:00:00.000Z"
        );
        assert_eq!(day_start(day_start(NOW)), day_start(NOW));
        assert_eq!(day_start(-1), -DAY);
    }

    #[test]
    fn query_terms_are_lowercase_words_of_two_or_more() {
        assert_eq!(
            query_terms("Fix the CSV-header, a b_c x!! csv"),
            ["fix", "the", "csv", "header", "b_c"]
        );
        assert!(query_terms("").is_empty());
        assert!(query_terms("a - ! ?").is_empty());
    }

    #[test]
    fn weights_topic_two_title_summary_kind_one() {
        let d = doc(
            "a.md",
            "Auth fix",
            "the auth bug",
            "chapter",
            &["authentication"],
        );
        let (s, e) = score(&d, &query_terms("auth"), NOW, &p());
        assert_eq!(e.base, 4.0, "{e:?}");
        assert_eq!(s, 4.0, "no date, no recency");
        assert_eq!(e.recency, Recency::NoDate);
        let fields: Vec<Field> = e.hits.iter().map(|h| h.field).collect();
        assert_eq!(fields, [Field::Topic, Field::Title, Field::Summary]);
        // Two topics containing the term still count once.
        let d2 = doc("b.md", "x", "y", "chapter", &["auth", "oauth"]);
        assert_eq!(score(&d2, &query_terms("auth"), NOW, &p()).1.base, 2.0);
    }

    #[test]
    fn the_products_field_points_equal_the_reference_scorers_and_a_category_adds_its_own() {
        let docs = [
            doc(
                "a.md",
                "Auth fix",
                "the auth bug",
                "chapter",
                &["authentication"],
            ),
            doc("b.md", "Fix the header", "", "plan", &["auth", "oauth"]),
            doc("c.md", "x", "plan the csv export", "rule", &["csv"]),
            doc("d.md", "nothing", "here", "chapter", &[]),
        ];
        for terms in [q("auth"), q("plan csv"), q("fix auth header"), q("zebra")] {
            for d in &docs {
                let (_, reference) = score(d, &terms.terms, NOW, &p());
                let topics: Vec<String> = d.meta.topics.iter().map(|t| t.to_lowercase()).collect();
                let mut hits = Vec::new();
                let fields = Fields {
                    title: &d.meta.title.to_lowercase(),
                    summary: &d.meta.summary.to_lowercase(),
                    kind: &d.meta.kind.to_lowercase(),
                    topics: &topics,
                    category: "",
                };
                let (base, category) = field_points(&fields, &terms.terms, &p(), |t, f, pts| {
                    hits.push(hit(t, f, pts))
                });
                assert_eq!(hits, reference.hits, "{} {:?}", d.path, terms.terms);
                assert_eq!(base.to_bits(), reference.base.to_bits(), "{}", d.path);
                assert_eq!(category, 0.0);
            }
        }
        // A rule's category: 1.5 per term it holds, after the fields, summed apart.
        let topics = Vec::new();
        let mut fields_hit = Vec::new();
        let (base, category) = field_points(
            &Fields {
                title: "deploy",
                summary: "",
                kind: "rule",
                topics: &topics,
                category: "deploy-safety",
            },
            &query_terms("deploy safety rule"),
            &p(),
            |_, f, _| fields_hit.push(f),
        );
        assert_eq!((base, category), (2.0, 3.0));
        assert_eq!(
            fields_hit,
            [Field::Title, Field::Kind, Field::Category, Field::Category]
        );
    }

    #[test]
    fn kind_hit_finds_plans_only_on_equality() {
        let plan = doc("p.md", "Fix the header", "", "plan", &[]);
        let chapter = doc("c.md", "Fix the header", "", "chapter", &[]);
        let (_, e) = score(&plan, &query_terms("plan"), NOW, &p());
        assert_eq!(
            e.hits,
            [TermHit {
                term: "plan".into(),
                field: Field::Kind,
                points: 1.0
            }]
        );
        assert_eq!(score(&chapter, &query_terms("plan"), NOW, &p()).1.base, 0.0);
        assert_eq!(score(&plan, &query_terms("pla"), NOW, &p()).1.base, 0.0);
    }

    #[test]
    fn recency_halves_every_thirty_days_and_only_for_matches() {
        let points = |age: i64| recency(Some(&crate::time::rfc3339_utc(NOW - age)), NOW).points();
        assert!((points(0) - 1.0).abs() < 1e-9);
        assert!((points(30 * DAY) - 0.5).abs() < 1e-9);
        assert!((points(60 * DAY) - 0.25).abs() < 1e-9);
        assert!(
            (points(-5 * DAY) - 1.0).abs() < 1e-9,
            "future dates count as now"
        );
        let fresh = dated(doc("a.md", "csv", "", "chapter", &[]), NOW - 30 * DAY);
        let (s, e) = score(&fresh, &query_terms("csv"), NOW, &p());
        assert!((s - 1.5).abs() < 1e-9, "{s}");
        assert!(
            matches!(e.recency, Recency::Bonus { age_days, .. } if (age_days - 30.0).abs() < 1e-9)
        );
        let (s, e) = score(&fresh, &query_terms("nothing"), NOW, &p());
        assert_eq!((s, e.recency), (0.0, Recency::NotScored));
        let garbled = SearchDoc {
            meta: DocMeta {
                date: Some("yesterday".into()),
                ..fresh.meta.clone()
            },
            ..fresh.clone()
        };
        assert_eq!(
            score(&garbled, &query_terms("csv"), NOW, &p()).1.recency,
            Recency::NoDate
        );
    }

    #[test]
    fn ranked_by_score_then_path_zero_is_not_a_match() {
        let docs = vec![
            doc("b.md", "csv", "", "chapter", &[]),
            doc("a.md", "csv", "", "chapter", &[]),
            doc("c.md", "other", "", "chapter", &[]),
            doc("d.md", "", "", "chapter", &["csv"]),
        ];
        let ranked = rank(&docs, &q("csv"), NOW, &p());
        let paths: Vec<&str> = ranked.iter().map(|r| r.doc.path.as_str()).collect();
        assert_eq!(paths, ["d.md", "a.md", "b.md"]);
        // Recency breaks an equal base: the newer first regardless of path.
        let docs = vec![
            dated(doc("a.md", "csv", "", "chapter", &[]), NOW - 90 * DAY),
            dated(doc("b.md", "csv", "", "chapter", &[]), NOW - DAY),
        ];
        let ranked = rank(&docs, &q("csv"), NOW, &p());
        assert_eq!(ranked[0].doc.path, "b.md");
    }

    #[test]
    fn ranking_is_deterministic_under_input_order() {
        let mut docs: Vec<SearchDoc> = (0..20)
            .map(|i| {
                dated(
                    doc(&format!("{i:02}.md"), "auth csv", "", "chapter", &["csv"]),
                    NOW - (i % 3) * DAY,
                )
            })
            .collect();
        let first: Vec<String> = rank(&docs, &q("csv auth"), NOW, &p())
            .iter()
            .map(result_line)
            .collect();
        docs.reverse();
        let second: Vec<String> = rank(&docs, &q("csv auth"), NOW, &p())
            .iter()
            .map(result_line)
            .collect();
        assert_eq!(first, second);
        assert_eq!(first.len(), 20);
    }

    #[test]
    fn topic_filter_is_exact_and_lists_by_recency_without_terms() {
        let docs = vec![
            dated(doc("a.md", "x", "", "chapter", &["Auth"]), NOW - 10 * DAY),
            dated(doc("b.md", "x", "", "chapter", &["auth"]), NOW - DAY),
            doc("c.md", "x", "", "chapter", &["auth"]),
            doc("d.md", "x", "", "chapter", &["oauth"]),
        ];
        let listing = Query {
            terms: Vec::new(),
            topic: Some("AUTH".into()),
        };
        let paths: Vec<&str> = rank(&docs, &listing, NOW, &p())
            .iter()
            .map(|r| r.doc.path.as_str())
            .collect();
        assert_eq!(paths, ["b.md", "a.md", "c.md"]);
        // No terms and no topic: nothing is a match.
        assert!(rank(&docs, &Query::default(), NOW, &p()).is_empty());
        // Terms and a topic: the topic restricts, the terms score.
        let both = Query {
            terms: query_terms("x"),
            topic: Some("oauth".into()),
        };
        let ranked = rank(&docs, &both, NOW, &p());
        assert_eq!(ranked.len(), 1);
        assert_eq!(ranked[0].doc.path, "d.md");
    }

    #[test]
    fn explain_names_every_term_field_and_the_recency() {
        let d = dated(
            doc("a.md", "CSV export", "header row", "plan", &["csv"]),
            NOW - 15 * DAY,
        );
        let ranked = rank(std::slice::from_ref(&d), &q("csv plan header"), NOW, &p());
        let e = &ranked[0].explain;
        let got: Vec<(&str, Field, f64)> = e
            .hits
            .iter()
            .map(|h| (h.term.as_str(), h.field, h.points))
            .collect();
        assert_eq!(
            got,
            [
                ("csv", Field::Topic, 2.0),
                ("csv", Field::Title, 1.0),
                ("plan", Field::Kind, 1.0),
                ("header", Field::Summary, 1.0),
            ]
        );
        assert_eq!(e.base, 5.0);
        let json = serde_json::to_value(e).expect("json");
        assert_eq!(json["recency"], "bonus");
        assert!((json["points"].as_f64().expect("points") - 0.5f64.powf(0.5)).abs() < 1e-9);
    }

    #[test]
    fn result_line_has_the_five_fields_on_one_line() {
        // A title padded by hand (a mirror document's) is printed as it is, not trimmed as
        // the index pages' fields are.
        for (title, shown) in [("Two\nlines", "Two lines"), (" Padded\n", " Padded ")] {
            let d = dated(doc("p/a.md", title, "", "plan", &["csv", "export"]), NOW);
            let ranked = rank(std::slice::from_ref(&d), &q("csv"), NOW, &p());
            assert_eq!(
                result_line(&ranked[0]),
                format!("3.00 | 2025-11-29 | plan | {shown} | p/a.md (topics: csv, export)")
            );
        }
    }

    #[test]
    fn weights_scale_topic_points_and_core_rules_earn_the_bonus_only_when_scored() {
        use crate::curation::{Author, Curation, Fact, FactKind, SourcedFact};
        let weight = |topic: &str, weight: f64| SourcedFact {
            harness: "m1".into(),
            line: 1,
            fact: Fact::new(
                FactKind::Weight {
                    topic: topic.into(),
                    weight,
                },
                Author::User,
                "1",
            ),
        };
        let params = ScoreParams {
            core_rule_bonus: 0.15,
            curation: Curation::fold([weight("authentication", 3.0), weight("auth", 0.5)]),
        };
        let d = doc("a.md", "x", "", "rule", &["auth", "authentication"]);
        let (s, e) = score(&d, &query_terms("auth"), NOW, &params);
        assert_eq!(e.hits[0].points, 6.0, "the highest matching weight wins");
        assert_eq!((s, e.core_rule_bonus), (6.0, 0.0), "not a core rule");
        let core = SearchDoc {
            core_rule: true,
            ..d.clone()
        };
        let (s, e) = score(&core, &query_terms("auth"), NOW, &params);
        assert_eq!((s, e.core_rule_bonus), (6.15, 0.15));
        let (s, e) = score(&core, &query_terms("zebra"), NOW, &params);
        assert_eq!((s, e.core_rule_bonus), (0.0, 0.0), "no hit, no bonus");
        let json = serde_json::to_value(&score(&core, &query_terms("auth"), NOW, &params).1)
            .expect("json");
        assert_eq!(json["coreRuleBonus"], 0.15);
    }

    #[test]
    fn pack_takes_whole_lines_and_accounts_exactly() {
        let lines: Vec<String> = ["aaaa", "bbbbb", "cc", "dddddddd"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        // Costs: 1, 2, 1, 2.
        let p = pack(&lines, 4);
        assert_eq!((p.shown, p.used, p.remaining), (3, 4, 0));
        assert_eq!(p.first_line_too_large, None);
        let p = pack(&lines, 2);
        assert_eq!(
            (p.shown, p.used, p.remaining),
            (1, 1, 1),
            "stops, never skips ahead"
        );
        let p = pack(&lines, 100);
        assert_eq!((p.shown, p.used, p.remaining), (4, 6, 94));
        assert_eq!(pack(&[], 5).shown, 0);
        assert_eq!(pack(&[], 5).first_line_too_large, None);
    }

    #[test]
    fn pack_refuses_a_budget_below_the_first_line_with_its_size() {
        let lines = vec!["x".repeat(41)];
        let p = pack(&lines, 10);
        assert_eq!((p.shown, p.used, p.remaining), (0, 0, 10));
        assert_eq!(p.first_line_too_large, Some(11));
        assert_eq!(pack(&lines, 0).first_line_too_large, Some(11));
        // Characters, not bytes.
        assert_eq!(line_tokens("éééé"), 1);
    }

    #[test]
    fn parse_meta_reads_the_fields_and_ignores_unknown_keys() {
        let text = "---\ntitle: \"Fix it\"\nsummary: s\nkind: plan\nprojectKey: \"pk\"\nsessionId: s1\nseqRange: [3, 9]\ndate: null\ntopics: [a, b]\nextra: {x: 1}\n---\nbody\n";
        let m = parse_meta(text).expect("meta");
        assert_eq!(m.title, "Fix it");
        assert_eq!(m.kind, "plan");
        assert_eq!(m.seq_range, Some((3, 9)));
        assert_eq!(m.date, None);
        assert_eq!(m.topics, ["a", "b"]);
    }

    #[test]
    fn the_typescript_plugins_chapter_is_a_chapter() {
        // Its frontmatter as `render.ts` writes it: no kind, summary, date or project key; a
        // YAML comment after `tokens`; fields this program does not know.
        let text = "---\ntitle: \"Tune the backoff\"\nseqRange: [4, 15]\nevents: 12\ntokens: 321  # chars/4 estimate\nsha256: 0123abcd\ntopics: [\"websocket\", \"backoff\"]\nartifacts: 2\nunrenderedSeqs: [12]\n---\n# Tune the backoff\n";
        let m = parse_meta(text).expect("meta");
        assert_eq!(m.kind, "chapter");
        assert_eq!(m.title, "Tune the backoff");
        assert_eq!(m.topics, ["websocket", "backoff"]);
        assert_eq!(m.seq_range, Some((4, 15)));
        assert_eq!(m.summary, "");
        let rule = "---\nnumber: 1\nkind: rule\ncategory: \"testing\"\ntitle: \"Run it\"\nstatus: proposed\n---\nRun it.\n";
        assert_eq!(parse_meta(rule).expect("rule").kind, "rule");
    }

    #[test]
    fn parse_meta_refuses_garbled_truncated_and_hostile_input() {
        assert!(matches!(parse_meta(""), Err(SearchError::NoFrontmatter)));
        assert!(matches!(
            parse_meta("---\ntitle: x\nkind: chapter\n"),
            Err(SearchError::NoFrontmatter)
        ));
        assert!(parse_meta("---\ntitle: [unclosed\nkind: x\n---\n").is_err());
        assert!(parse_meta("---\nsummary: no title\n---\n").is_err());
        assert!(parse_meta("---\ntitle: x\nkind: chapter\ntopics: 7\n---\n").is_err());
        let huge = format!(
            "---\ntitle: \"{}\"\nkind: chapter\n---\n",
            "t".repeat(1 << 20)
        );
        assert_eq!(parse_meta(&huge).expect("huge").title.len(), 1 << 20);
    }

    #[test]
    fn rfc3339_round_trips_and_refuses_garbage() {
        for ms in [0, NOW, NOW + 123, 951_782_400_000 /* 2000-02-29 */] {
            assert_eq!(parse_rfc3339_ms(&crate::time::rfc3339_utc(ms)), Some(ms));
        }
        assert_eq!(
            parse_rfc3339_ms("2025-11-29T09:06:40+02:00"),
            parse_rfc3339_ms("2025-11-29T07:06:40Z")
        );
        assert_eq!(parse_rfc3339_ms("2025-11-29T07:06:40.5Z"), Some(NOW + 500));
        for bad in [
            "",
            "2025-11-29",
            "2025-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2025-11-29T07:06:40",
            "2025-11-29T07:06:40.Z",
            "2025-11-29T07:06:40+0200",
            "2025-11-29T07:06:4xZ",
            "２０２５-11-29T07:06:40Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad}");
        }
        assert_eq!(day_of(Some("2025-11-29T07:06:40Z")), "2025-11-29");
        assert_eq!(day_of(Some("soon")), "-");
        assert_eq!(day_of(None), "-");
    }
}

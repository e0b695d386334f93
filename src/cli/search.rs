use std::path::Path;

use anyhow::Result;
use serde_json::json;

use dsh_chapters::catalog::query::{self, Parsed};
use dsh_chapters::catalog::score::{self, Explain, Field, Recency, ScoreParams};
use dsh_chapters::search::{self, Door};

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    /// Words to look for: in topics (×2), titles, summaries and kinds (`plan` finds plans),
    /// then in the documents' text. `"two words"` is a phrase, `auth*` a prefix, `-draft`
    /// leaves out documents containing the word.
    /// (A query starting with `-` goes after `--`, or inside one quoted argument.)
    #[arg(value_name = "QUERY", required_unless_present = "topic")]
    query: Vec<String>,
    /// The token budget of the answer (default: config `searchDefaultMaxTokens`); whole
    /// result lines only, most relevant first.
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Only documents carrying this topic (exact, case-insensitive, curation aliases followed
    /// to the canonical topic — the documents of its `index/` shard); with no QUERY, list them
    /// newest first.
    #[arg(long, value_name = "T")]
    topic: Option<String>,
    /// Include other projects' documents (default: this workspace's projectKey only).
    #[arg(long)]
    cross_project: bool,
    /// Show how each result earned its score (outside the token budget).
    #[arg(long)]
    explain: bool,
    #[command(flatten)]
    filters: Filters,
    /// Print the answer as one JSON document.
    #[arg(long)]
    json: bool,
}

/// The filters `chapters search` and `chapters list` share.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Filters {
    /// Only documents of this kind (`chapter`, `plan`, `rule`).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Only documents of sessions of this agent (frontmatter `harness`; a document without
    /// one is `dsh`). Without it, every harness's documents are searched.
    #[arg(long, value_name = "NAME")]
    pub harness: Option<String>,
    /// Only documents written on this machine (its harness id).
    #[arg(long, value_name = "ID")]
    pub machine: Option<String>,
    /// Only documents of this session (an id or its first characters).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Only documents dated at or after: `YYYY-MM-DD`, an RFC 3339 time, or `7d` / `12h` / `2w` ago.
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only documents dated before (same forms as --since).
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,
    /// Only documents whose signature names this file (a path a tool call touched — not a
    /// word of the text): the whole path, or its last parts (`csv.rs`, `export/csv.rs`); an
    /// absolute path inside the workspace is read relative to it.
    #[arg(long, value_name = "FILE")]
    pub path: Option<String>,
    /// Also search artifacts (large tool outputs a chapter keeps beside it, kind `artifact`);
    /// left out unless asked (or `--kind artifact`).
    #[arg(long)]
    pub artifacts: bool,
}

impl Filters {
    /// The request these filters make, with `query` and `topic`; a date that cannot be read
    /// is a usage error (exit 2).
    pub fn request(
        &self,
        query: Parsed,
        topic: Option<String>,
        now_ms: i64,
        workspace: &dsh_chapters::signature::Workspace,
    ) -> Result<search::Request, super::Usage> {
        let when = |flag: &str, text: &Option<String>| {
            text.as_ref()
                .map(|t| {
                    query::parse_when(t, now_ms).ok_or_else(|| {
                        super::Usage(format!(
                            "{flag} {:?} is not a date: give YYYY-MM-DD, an RFC 3339 time, or 7d / 12h / 2w",
                            dsh_chapters::redact::echo(t)
                        ))
                    })
                })
                .transpose()
        };
        Ok(search::Request {
            query,
            topic,
            filters: search::Narrowing {
                kind: self.kind.clone(),
                harness: self.harness.clone(),
                machine: self.machine.clone(),
                session: self.session.clone(),
                since_ms: when("--since", &self.since)?,
                until_ms: when("--until", &self.until)?,
                path: self.path.as_deref().map(|p| workspace.as_signed(p)),
                artifacts: self.artifacts,
            },
        })
    }
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let text = args.query.join(" ");
    let parsed = Parsed::parse(&text);
    if parsed.is_empty() && args.topic.is_none() {
        return Err(super::Usage(format!(
            "the query {:?} has no word to look for (two or more letters or digits; -word only leaves words out): give one, or --topic T",
            dsh_chapters::redact::echo(&text)
        ))
        .into());
    }
    if parsed.dropped > 0 {
        eprintln!(
            "chapters: the query has more than {} terms; the first {} are used, {} left out",
            query::MAX_TERMS,
            query::MAX_TERMS,
            parsed.dropped
        );
    }
    let env = Env::resolve(workspace, None)?;
    let budget = args
        .max_tokens
        .unwrap_or(env.config.search_default_max_tokens);
    let corpus = search::open(
        &env.workspace,
        &env.identity.project_key,
        args.cross_project,
        std::time::Duration::from_millis(env.config.writer_lock_timeout_ms),
    )?;
    for u in &corpus.unreadable {
        eprintln!(
            "chapters: skipped unreadable document {}: {}",
            u.path, u.reason
        );
    }
    for note in &corpus.notes {
        eprintln!("chapters: {note}");
    }
    // The topic as the index keys it: aliases followed to the canonical label.
    let topic = args
        .topic
        .as_deref()
        .map(|t| corpus.curation.canonical(t).topic);
    let shard = topic.as_deref().and_then(|t| corpus.shard_path(t));
    let params = ScoreParams {
        curation: corpus.curation.clone(),
        core_rule_bonus: env.config.rules_core_bonus,
    };
    // Recency is measured from the start of the current UTC day: every machine at the
    // same pool state gives the same answer all day, not one that drifts by the millisecond.
    let now = score::day_start(super::now_ms());
    let request = args.filters.request(
        parsed,
        topic.clone(),
        super::now_ms(),
        &env.signing_workspace(),
    )?;
    let answer = corpus.answer_packed(&request, &params, &env.harness_id, now, budget)?;
    let (packed, total, total_said) = (answer.packed.clone(), answer.total, answer.total_said());
    let empty = if corpus.documents == 0 {
        Some("nothing-here")
    } else if total == 0 {
        Some("nothing-matched")
    } else {
        None
    };
    let shard_rel = shard.as_ref().map(|p| {
        p.strip_prefix(&env.workspace)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    });
    let frame = SearchFrame {
        searched: corpus.door.describe(corpus.documents, corpus.mirror_absent),
        door: corpus.door,
        shard: shard_rel,
        documents: corpus.documents,
        unreadable: corpus.unreadable.len(),
        other_projects: corpus.other_projects,
        empty,
        explain: args.explain,
        query_given: !text.is_empty(),
    };
    // What was asked, through the rules: a credential pasted into the query or the topic
    // is not printed again.
    let asked = Asked {
        query: text.clone(),
        topic: args.topic.clone(),
        canonical: topic.clone(),
    };
    let asked = dsh_chapters::redact::echoed(asked);
    let answer = answer.zip(asked);
    if args.json {
        super::print_json_answer(&answer.derive_with(&frame, search_json))?;
    } else {
        super::print_answer(&answer.derive_with(&frame, search_text));
    }
    if let Some(needed) = packed.first_line_too_large {
        eprintln!(
            "chapters: budget too small: the best of {total_said} matches is one line of {needed} tokens, --max-tokens is {budget}; ask again with --max-tokens {needed} or more (a line is never clipped)"
        );
        return Err(Reported.into());
    }
    Ok(())
}

/// What a search was asked: shown back only through the rules.
#[derive(Clone)]
struct Asked {
    query: String,
    topic: Option<String>,
    canonical: Option<String>,
}

impl dsh_chapters::redact::Redactable for Asked {
    fn map_text(self, f: &mut dyn FnMut(&str) -> String) -> Self {
        Asked {
            query: f(&self.query),
            topic: self.topic.as_deref().map(&mut *f),
            canonical: self.canonical.as_deref().map(f),
        }
    }
}

/// What a search answer says beside its matches: counts, the door, where the topic's shard is.
struct SearchFrame {
    searched: String,
    door: Door,
    shard: Option<String>,
    documents: u64,
    unreadable: usize,
    other_projects: u64,
    empty: Option<&'static str>,
    explain: bool,
    query_given: bool,
}

impl dsh_chapters::redact::Settings for SearchFrame {}

fn search_json(
    (answer, asked): &(search::PackedAnswer, Asked),
    frame: &SearchFrame,
) -> serde_json::Value {
    let packed = &answer.packed;
    let matches: Vec<serde_json::Value> = answer.hits[..packed.shown]
        .iter()
        .map(|h| match_json(h, frame.explain))
        .collect();
    json!({
        "door": frame.door,
        "searched": frame.searched,
        "query": asked.query,
        "topic": asked.topic,
        "canonicalTopic": asked.canonical,
        "shard": frame.shard,
        "documents": frame.documents,
        "unreadable": frame.unreadable,
        "otherProjects": frame.other_projects,
        "total": answer.total,
        "totalExact": answer.total_exact,
        "shown": packed.shown,
        "budget": {"requested": packed.requested, "used": packed.used, "remaining": packed.remaining},
        "budgetTooSmall": packed.first_line_too_large.map(|needed| json!({"needed": needed})),
        "matches": matches,
        "empty": frame.empty,
    })
}

fn search_text((answer, asked): &(search::PackedAnswer, Asked), frame: &SearchFrame) -> String {
    use std::fmt::Write;
    let packed = &answer.packed;
    let mut out = format!("{}\n", frame.searched);
    if frame.unreadable > 0 {
        let _ = writeln!(out, "unreadable: {}", frame.unreadable);
    }
    match frame.empty {
        Some("nothing-here") => {
            let _ = writeln!(out, "{}", nothing_here(frame.door, frame.other_projects));
        }
        Some(_) => {
            let _ = writeln!(
                out,
                "nothing matched{}: try other words, or --topic T to list one topic",
                describe_query(frame.query_given, asked.topic.as_deref())
            );
        }
        None => {
            for (h, line) in answer.hits.iter().zip(&answer.lines).take(packed.shown) {
                let _ = writeln!(out, "{line}");
                if frame.explain {
                    write_explain(&mut out, h.score, &h.explain, &h.body);
                }
            }
            let _ = writeln!(
                out,
                "shown {} of {} matches, used {} of {} tokens",
                packed.shown,
                answer.total_said(),
                packed.used,
                packed.requested
            );
        }
    }
    out
}

fn nothing_here(door: Door, other_projects: u64) -> String {
    let mut advice = match door {
        Door::Store => "nothing here: no chapters or plans yet — run `chapters archive` to archive this workspace's sessions, or link a pool and `chapters sync` to bring in other machines' work".to_owned(),
        Door::PoolAndStore => "nothing here: no chapters or plans yet — run `chapters archive` to archive this workspace's sessions, and `chapters sync` to bring in the pool's".to_owned(),
    };
    if other_projects > 0 {
        advice.push_str(&format!(
            " ({other_projects} documents of other projects were left out: --cross-project includes them)"
        ));
    }
    advice
}

/// What was asked, for "nothing matched": the topic (already through the rules), never the
/// query's words — the person has them, and a password typed into a query is a secret no
/// rule can tell from a word.
fn describe_query(query_given: bool, topic: Option<&str>) -> String {
    match (query_given, topic) {
        (true, Some(t)) => format!(" the query in topic {t:?}"),
        (true, None) => " the query".to_owned(),
        (false, Some(t)) => format!(" topic {t:?}"),
        (false, None) => String::new(),
    }
}

fn field_name(field: Field) -> &'static str {
    match field {
        Field::Topic => "topic",
        Field::Title => "title",
        Field::Summary => "summary",
        Field::Category => "category",
        Field::Kind => "kind",
    }
}

/// Every part of a score, each said even when it is zero: the §8 field parts (topic ×2,
/// title, summary, category, kind), recency, the core-rule bonus and the body's BM25.
fn explain_parts(explain: &Explain, body: &search::BodyExplain) -> serde_json::Value {
    json!({
        "topic": explain.field_points(Field::Topic),
        "title": explain.field_points(Field::Title),
        "summary": explain.field_points(Field::Summary),
        "category": explain.field_points(Field::Category),
        "kind": explain.field_points(Field::Kind),
        "recency": explain.recency.points(),
        "coreRule": explain.core_rule_bonus,
        "body": body.points,
    })
}

fn write_explain(out: &mut String, score: f64, explain: &Explain, body: &search::BodyExplain) {
    use std::fmt::Write;
    let mut terms: Vec<(&str, Vec<String>)> = Vec::new();
    for h in &explain.hits {
        let part = format!("{} +{}", field_name(h.field), h.points);
        match terms.iter_mut().find(|(t, _)| *t == h.term) {
            Some((_, parts)) => parts.push(part),
            None => terms.push((&h.term, vec![part])),
        }
    }
    for (term, parts) in terms {
        let _ = writeln!(out, "    {term}: {}", parts.join(", "));
    }
    let _ = writeln!(
        out,
        "    topic ×2 {:.2} · title {:.2} · summary {:.2} · category {:.2} · kind {:.2}",
        explain.field_points(Field::Topic),
        explain.field_points(Field::Title),
        explain.field_points(Field::Summary),
        explain.field_points(Field::Category),
        explain.field_points(Field::Kind),
    );
    match &explain.recency {
        Recency::Bonus { age_days, points } => {
            let _ = writeln!(
                out,
                "    recency: {age_days:.1} days old, 0.5^({age_days:.1}/30) = +{points:.2}"
            );
        }
        Recency::NoDate => {
            let _ = writeln!(out, "    recency: no date, no bonus");
        }
        Recency::NotScored => {
            let _ = writeln!(out, "    recency: not added (no term hit)");
        }
    }
    let _ = writeln!(
        out,
        "    core rule (approved on this machine): +{:.2}",
        explain.core_rule_bonus
    );
    let _ = writeln!(
        out,
        "    body: BM25 {:.2}, {}·s/(1+s) = +{:.2}",
        body.bm25,
        search::BODY_MAX,
        body.points
    );
    if body.phrase {
        let _ = writeln!(out, "    phrase: the query's words stand in a row here — ranked first among those that hold them all");
    }
    if !body.all_terms {
        let _ = writeln!(out, "    coverage: not every query word is in this document — ranked below those that hold them all");
    }
    let _ = writeln!(
        out,
        "    score: {} + {:.2} + {:.2} + {:.2} = {:.2}",
        explain.base,
        body.points,
        explain.recency.points(),
        explain.core_rule_bonus,
        score
    );
}

fn match_json(h: &search::Hit, explain: bool) -> serde_json::Value {
    let m = &h.doc.meta;
    let mut v = json!({
        "score": h.score,
        "date": m.date.as_deref().filter(|d| dsh_chapters::time::parse_rfc3339_ms(d).is_some()),
        "kind": m.kind,
        "title": m.title,
        "path": h.doc.path,
        "topics": m.topics,
        "id": h.id,
        "harness": h.harness,
        "machine": h.machine,
        "snippet": h.snippet,
    });
    if explain {
        let mut e = json!(h.explain);
        e["body"] = json!(h.body);
        e["parts"] = explain_parts(&h.explain, &h.body);
        v["explain"] = e;
    }
    v
}

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use dsh_chapters::search::{self, Explain, Field, Recency, ScoreParams};
use dsh_chapters::search_door::{self, Door};

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    /// Words to look for in topics (×2), titles, summaries and kinds (`plan` finds plans).
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
    /// Print the answer as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let text = args.query.join(" ");
    let terms = search::query_terms(&text);
    if terms.is_empty() && args.topic.is_none() {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!("the query {text:?} has no word of two or more letters or digits: give one, or --topic T\n"),
        )
        .exit();
    }
    let env = Env::resolve(workspace, None)?;
    let budget = args
        .max_tokens
        .unwrap_or(env.config.search_default_max_tokens);
    let vocab_redactor = env
        .config
        .vocab_apply
        .then(|| dsh_chapters::redact::Redactor::new(&env.config.redaction_patterns))
        .transpose()?;
    let at = dsh_chapters::time::rfc3339_utc(super::now_ms());
    let vocabulary = vocab_redactor.as_ref().and_then(|redactor| {
        dsh_chapters::index::build::VocabApply::when_applied(
            &env.config,
            redactor,
            &env.harness_id,
            &at,
        )
    });
    let corpus = search_door::open(
        &env.workspace,
        &env.identity.project_key,
        args.cross_project,
        std::time::Duration::from_millis(env.config.writer_lock_timeout_ms),
        vocabulary.as_ref(),
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
    let now = search::day_start(super::now_ms());
    let search_door::PackedAnswer {
        hits,
        lines,
        packed,
        total,
    } = corpus.answer_packed(
        &terms,
        topic.as_deref(),
        &params,
        &env.harness_id,
        now,
        budget,
    )?;
    let empty = if corpus.documents == 0 {
        Some("nothing-here")
    } else if total == 0 {
        Some("nothing-matched")
    } else {
        None
    };
    let searched = corpus.door.describe(corpus.documents, corpus.mirror_absent);
    let door = corpus.door;
    let shard_rel = shard.as_ref().map(|p| {
        p.strip_prefix(&env.workspace)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    });

    if args.json {
        let matches: Vec<serde_json::Value> = hits[..packed.shown]
            .iter()
            .map(|h| {
                match_json(
                    h,
                    args.explain
                        .then(|| search_door::explain(h, &terms, &params, now)),
                )
            })
            .collect();
        super::print_json(&json!({
            "door": door,
            "searched": searched,
            "query": text,
            "topic": args.topic,
            "canonicalTopic": topic,
            "shard": shard_rel,
            "documents": corpus.documents,
            "unreadable": corpus.unreadable.len(),
            "otherProjects": corpus.other_projects,
            "total": total,
            "shown": packed.shown,
            "budget": {"requested": packed.requested, "used": packed.used, "remaining": packed.remaining},
            "budgetTooSmall": packed.first_line_too_large.map(|needed| json!({"needed": needed})),
            "matches": matches,
            "empty": empty,
        }))?;
    } else {
        println!("{searched}");
        if !corpus.unreadable.is_empty() {
            println!("unreadable: {}", corpus.unreadable.len());
        }
        match empty {
            Some("nothing-here") => println!("{}", nothing_here(door, corpus.other_projects)),
            Some(_) => println!(
                "nothing matched{}: try other words, or --topic T to list one topic",
                describe_query(&text, args.topic.as_deref())
            ),
            None => {
                for (h, line) in hits.iter().zip(&lines).take(packed.shown) {
                    println!("{line}");
                    if args.explain {
                        print_explain(h.score, &search_door::explain(h, &terms, &params, now));
                    }
                }
                println!(
                    "shown {} of {} matches, used {} of {} tokens",
                    packed.shown, total, packed.used, packed.requested
                );
            }
        }
    }
    if let Some(needed) = packed.first_line_too_large {
        eprintln!(
            "chapters: budget too small: the best of {} matches is one line of {needed} tokens, --max-tokens is {budget}; ask again with --max-tokens {needed} or more (a line is never clipped)",
            total
        );
        return Err(Reported.into());
    }
    Ok(())
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

fn describe_query(text: &str, topic: Option<&str>) -> String {
    match (text.is_empty(), topic) {
        (false, Some(t)) => format!(" {text:?} in topic {t:?}"),
        (false, None) => format!(" {text:?}"),
        (true, Some(t)) => format!(" topic {t:?}"),
        (true, None) => String::new(),
    }
}

fn field_name(field: Field) -> &'static str {
    match field {
        Field::Topic => "topic",
        Field::Title => "title",
        Field::Summary => "summary",
        Field::Kind => "kind",
    }
}

fn print_explain(score: f64, explain: &Explain) {
    let mut terms: Vec<(&str, Vec<String>)> = Vec::new();
    for h in &explain.hits {
        let part = format!("{} +{}", field_name(h.field), h.points);
        match terms.iter_mut().find(|(t, _)| *t == h.term) {
            Some((_, parts)) => parts.push(part),
            None => terms.push((&h.term, vec![part])),
        }
    }
    for (term, parts) in terms {
        println!("    {term}: {}", parts.join(", "));
    }
    match &explain.recency {
        Recency::Bonus { age_days, points } => {
            println!("    recency: {age_days:.1} days old, 0.5^({age_days:.1}/30) = +{points:.2}")
        }
        Recency::NoDate => println!("    recency: no date, no bonus"),
        Recency::NotScored => println!("    recency: not added (no term hit)"),
    }
    if explain.core_rule_bonus > 0.0 {
        println!(
            "    core rule (approved on this machine): +{:.2}",
            explain.core_rule_bonus
        );
    }
    println!(
        "    score: {} + {:.2}{} = {:.2}",
        explain.base,
        explain.recency.points(),
        if explain.core_rule_bonus > 0.0 {
            format!(" + {:.2}", explain.core_rule_bonus)
        } else {
            String::new()
        },
        score
    );
}

fn match_json(h: &search_door::Hit, explain: Option<Explain>) -> serde_json::Value {
    let m = &h.doc.meta;
    let mut v = json!({
        "score": h.score,
        "date": m.date.as_deref().filter(|d| search::parse_rfc3339_ms(d).is_some()),
        "kind": m.kind,
        "title": m.title,
        "path": h.doc.path,
        "topics": m.topics,
    });
    if let Some(explain) = explain {
        v["explain"] = json!(explain);
    }
    v
}

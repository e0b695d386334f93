use std::path::Path;

use anyhow::Result;
use serde_json::json;

use dsh_chapters::search::{self, Field, Query, Ranked, Recency};
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
    /// Only documents carrying this topic (exact, case-insensitive); with no QUERY, list them newest first.
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
    let query = Query {
        terms: search::query_terms(&text),
        topic: args.topic.clone(),
    };
    if query.terms.is_empty() && query.topic.is_none() {
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
    let (door, corpus) = search_door::collect(
        &env.workspace,
        &env.identity.project_key,
        args.cross_project,
    )?;
    for u in &corpus.unreadable {
        eprintln!(
            "chapters: skipped unreadable document {}: {}",
            u.path, u.reason
        );
    }
    let ranked = search::rank(&corpus.docs, &query, super::now_ms());
    let lines: Vec<String> = ranked.iter().map(search::result_line).collect();
    let packed = search::pack(&lines, budget);
    let empty = if corpus.docs.is_empty() {
        Some("nothing-here")
    } else if ranked.is_empty() {
        Some("nothing-matched")
    } else {
        None
    };
    let searched = door.describe(corpus.docs.len(), corpus.mirror_absent);

    if args.json {
        let matches: Vec<serde_json::Value> = ranked[..packed.shown]
            .iter()
            .map(|r| match_json(r, args.explain))
            .collect();
        super::print_json(&json!({
            "door": door,
            "searched": searched,
            "query": text,
            "topic": args.topic,
            "documents": corpus.docs.len(),
            "unreadable": corpus.unreadable.len(),
            "otherProjects": corpus.other_projects,
            "total": ranked.len(),
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
                for (r, line) in ranked.iter().zip(&lines).take(packed.shown) {
                    println!("{line}");
                    if args.explain {
                        print_explain(r);
                    }
                }
                println!(
                    "shown {} of {} matches, used {} of {} tokens",
                    packed.shown,
                    ranked.len(),
                    packed.used,
                    packed.requested
                );
            }
        }
    }
    if let Some(needed) = packed.first_line_too_large {
        eprintln!(
            "chapters: budget too small: the best of {} matches is one line of {needed} tokens, --max-tokens is {budget}; ask again with --max-tokens {needed} or more (a line is never clipped)",
            ranked.len()
        );
        return Err(Reported.into());
    }
    Ok(())
}

fn nothing_here(door: Door, other_projects: usize) -> String {
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

fn print_explain(r: &Ranked<'_>) {
    let mut terms: Vec<(&str, Vec<String>)> = Vec::new();
    for h in &r.explain.hits {
        let part = format!("{} +{}", field_name(h.field), h.points);
        match terms.iter_mut().find(|(t, _)| *t == h.term) {
            Some((_, parts)) => parts.push(part),
            None => terms.push((&h.term, vec![part])),
        }
    }
    for (term, parts) in terms {
        println!("    {term}: {}", parts.join(", "));
    }
    match &r.explain.recency {
        Recency::Bonus { age_days, points } => {
            println!("    recency: {age_days:.1} days old, 0.5^({age_days:.1}/30) = +{points:.2}")
        }
        Recency::NoDate => println!("    recency: no date, no bonus"),
        Recency::NotScored => println!("    recency: not added (no term hit)"),
    }
    println!(
        "    score: {} + {:.2} = {:.2}",
        r.explain.base,
        r.explain.recency.points(),
        r.score
    );
}

fn match_json(r: &Ranked<'_>, explain: bool) -> serde_json::Value {
    let m = &r.doc.meta;
    let mut v = json!({
        "score": r.score,
        "date": m.date.as_deref().filter(|d| search::parse_rfc3339_ms(d).is_some()),
        "kind": m.kind,
        "title": m.title,
        "path": r.doc.path,
        "topics": m.topics,
    });
    if explain {
        v["explain"] = json!(r.explain);
    }
    v
}

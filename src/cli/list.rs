//! `chapters list`: the door's documents, newest first, with the filters `search` takes.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use dsh_chapters::search::cache::short_id;
use dsh_chapters::search::query::Parsed;
use dsh_chapters::search_door;

use super::search::Filters;
use super::Env;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    filters: Filters,
    /// Show at most this many (default 20).
    #[arg(long, value_name = "N", default_value_t = 20)]
    limit: usize,
    /// Include other projects' documents (default: this workspace's projectKey only).
    #[arg(long)]
    cross_project: bool,
    /// Print the list as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let now = super::now_ms();
    let request = args.filters.request(Parsed::default(), None, now);
    let corpus = search_door::open(
        &env.workspace,
        &env.identity.project_key,
        args.cross_project,
        std::time::Duration::from_millis(env.config.writer_lock_timeout_ms),
    )?;
    for note in &corpus.notes {
        eprintln!("chapters: {note}");
    }
    let (rows, total) = corpus.list(&request, Some(args.limit))?;
    let searched = corpus.door.describe(corpus.documents, corpus.mirror_absent);
    if args.json {
        let docs: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "id": short_id(&r.root, &r.name, &r.path),
                    "date": r.meta.date,
                    "harness": r.harness,
                    "machine": r.machine,
                    "kind": r.meta.kind,
                    "title": r.meta.title,
                    "path": r.path,
                    "topics": r.meta.topics,
                })
            })
            .collect();
        return super::print_json(&json!({
            "door": corpus.door,
            "searched": searched,
            "total": total,
            "shown": docs.len(),
            "documents": docs,
        }));
    }
    println!("{searched}");
    if rows.is_empty() {
        println!("nothing listed: no document passes the filters");
        return Ok(());
    }
    for r in &rows {
        println!(
            "{} | {} | {} | {} | {} | {} | {}",
            dsh_chapters::search::day_of(r.meta.date.as_deref()),
            r.harness,
            if r.machine.is_empty() {
                "-"
            } else {
                &r.machine
            },
            r.meta.kind,
            r.meta.title.replace(|c: char| c.is_control(), " "),
            r.path,
            short_id(&r.root, &r.name, &r.path),
        );
    }
    println!("shown {} of {total}", rows.len());
    Ok(())
}

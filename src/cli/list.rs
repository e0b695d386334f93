//! `chapters list`: the door's documents, newest first, with the filters `search` takes.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use dsh_chapters::catalog::cache::{short_id, Row};
use dsh_chapters::catalog::query::Parsed;
use dsh_chapters::search;

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
    let request = args
        .filters
        .request(Parsed::default(), None, now, &env.signing_workspace())?;
    let corpus = search::open(
        &env.workspace,
        &env.identity.project_key,
        args.cross_project,
        std::time::Duration::from_millis(env.config.writer_lock_timeout_ms),
    )?;
    for note in &corpus.notes {
        eprintln!("chapters: {note}");
    }
    let (rows, total) = corpus.list(&request, Some(args.limit))?;
    let frame = ListFrame {
        searched: corpus.door.describe(corpus.documents, corpus.mirror_absent),
        door: corpus.door,
        total,
    };
    if args.json {
        return super::print_json_answer(&rows.derive_with(&frame, list_json));
    }
    super::print_answer(&rows.derive_with(&frame, list_text));
    Ok(())
}

/// What a list says beside its rows.
struct ListFrame {
    searched: String,
    door: search::Door,
    total: usize,
}

impl dsh_chapters::redact::Settings for ListFrame {}

#[allow(clippy::ptr_arg)] // `Redacted::derive_with` hands the value over as `&T`.
fn list_json(rows: &Vec<Row>, frame: &ListFrame) -> serde_json::Value {
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
    json!({
        "door": frame.door,
        "searched": frame.searched,
        "total": frame.total,
        "shown": docs.len(),
        "documents": docs,
    })
}

#[allow(clippy::ptr_arg)] // `Redacted::derive_with` hands the value over as `&T`.
fn list_text(rows: &Vec<Row>, frame: &ListFrame) -> String {
    let mut out = format!("{}\n", frame.searched);
    if rows.is_empty() {
        out.push_str("nothing listed: no document passes the filters\n");
        return out;
    }
    for r in rows {
        out.push_str(&format!(
            "{} | {} | {} | {} | {} | {} | {}\n",
            dsh_chapters::catalog::score::day_of(r.meta.date.as_deref()),
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
        ));
    }
    out.push_str(&format!("shown {} of {}\n", rows.len(), frame.total));
    out
}

//! `chapters show ID|PATH`: one chapter, plan or rule — a short header, then the body.

use std::path::Path;

use anyhow::{bail, Result};
use serde_json::json;

use dsh_chapters::catalog::cache::Row;
use dsh_chapters::search;

use super::Env;

#[derive(clap::Args)]
pub struct Args {
    /// The document: an id from `search` or `list` (`<session-prefix>/<number>`, `…/p<number>`
    /// for a plan) or its path.
    #[arg(value_name = "ID|PATH")]
    id: String,
    /// The file's bytes as stored (frontmatter included), nothing added.
    #[arg(long, conflicts_with = "json")]
    raw: bool,
    /// Print the header fields and the body as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let corpus = search::open(
        &env.workspace,
        &env.identity.project_key,
        true,
        std::time::Duration::from_millis(env.config.writer_lock_timeout_ms),
    )?;
    // A path given as the shell sees it: made relative to the workspace.
    let key = {
        let p = Path::new(&args.id);
        let abs = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|d| d.join(p))
                .unwrap_or_else(|_| p.to_path_buf())
        };
        match abs.canonicalize().ok().and_then(|a| {
            env.workspace
                .canonicalize()
                .ok()
                .and_then(|w| a.strip_prefix(w).ok().map(Path::to_path_buf))
        }) {
            Some(rel) => rel.to_string_lossy().into_owned(),
            None => args.id.clone(),
        }
    };
    let found = corpus.find(&key)?;
    let row = match found.as_slice() {
        [row] => row,
        [] => bail!(
            "no chapter, plan or rule {:?} here: give an id from `chapters search` or `chapters list` (like 5151abcd/3) or a document's path",
            args.id
        ),
        many => bail!(
            "{:?} names {} documents ({}): give more of the session id or the path",
            args.id,
            many.len(),
            many.iter().map(|r| r.path.as_str()).collect::<Vec<_>>().join(", ")
        ),
    };
    let Some(text) = corpus.read_document(&row.path, true) else {
        bail!("cannot read {}", env.workspace.join(&row.path).display());
    };
    if args.raw {
        super::print_answer(&text);
        return Ok(());
    }
    let doc = row.clone().zip(text);
    if args.json {
        return super::print_json_answer(&doc.derive(show_json));
    }
    super::print_answer(&doc.derive(show_text));
    Ok(())
}

/// The body (the whole text when it has no chapter body: an artifact, a foreign file).
fn body_of(text: &str) -> &str {
    dsh_chapters::render::body_text(text).unwrap_or(text)
}

fn show_json((row, text): &(Row, String)) -> serde_json::Value {
    let mut doc = search::document_fields(row);
    doc.insert("body".to_owned(), json!(body_of(text)));
    serde_json::Value::Object(doc)
}

fn show_text((row, text): &(Row, String)) -> String {
    format!("{}\n\n{}", search::document_header(row), body_of(text))
}

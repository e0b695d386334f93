//! `chapters notice --session ID [--intent continue|fork]`: print the continuation notice
//! with its rules block. Omission is non-blocking: an overflowing rule set leaves the block
//! out (never clipped) and the refusal is reported on stderr, with numbers.

use std::path::Path;

use anyhow::Result;
use serde_json::json;

use dsh_chapters::redact::Redacted;
use dsh_chapters::rules::block::Block;
use dsh_chapters::rules::notice::{self, ChapterLine, NoticeIntent};
use dsh_chapters::rules::store::{self as rules_store, AssembleRequest};
use dsh_chapters::store::Store;

use super::rule::Intent;
use super::Env;

#[derive(clap::Args)]
pub struct Args {
    /// The session whose head is rebuilt.
    #[arg(long, value_name = "ID")]
    session: String,
    /// `continue` carries project and session rules; `fork` carries project rules only.
    #[arg(long, value_enum, default_value = "continue")]
    intent: Intent,
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let intent = match args.intent {
        Intent::Continue => NoticeIntent::Continue,
        Intent::Fork => NoticeIntent::Fork,
    };
    let assembled = rules_store::assemble(&AssembleRequest {
        workspace: &env.workspace,
        dsh_home: &env.dsh_home,
        config: &env.config,
        identity: &env.identity,
        harness: &env.harness_id,
        session: Some(&args.session),
        include_session: intent == NoticeIntent::Continue,
        terms: None,
        linked: super::rule::linked(&env)?,
    })?;
    for (path, reason) in &assembled.unreadable {
        eprintln!("chapters: skipped unreadable rule {path}: {reason}");
    }
    let root = assembled
        .lineage
        .as_ref()
        .map_or(args.session.as_str(), |l| l.root());
    let chapters = chapter_lines(&env, root);
    let text = notice::build(
        &args.session,
        root,
        intent,
        &chapters,
        &assembled.block.derive(|block| block.text().to_owned()),
    );
    if let Block::Refused(refusal) = assembled.block.get() {
        eprintln!(
            "chapters: the notice was printed without its rules block — {}",
            refusal.message()
        );
    }
    if args.json {
        return super::print_json(&json!({
            "session": args.session,
            "intent": intent,
            "notice": text.get(),
            "rules": assembled.block.get(),
            "lineage": assembled.lineage,
        }));
    }
    print!("{}", text.get());
    Ok(())
}

/// The session tree's chapters and plans, oldest first; a damaged store lists none here
/// (the notice is non-blocking; `chapters status` names the damage).
fn chapter_lines(env: &Env, root: &str) -> Vec<Redacted<ChapterLine>> {
    let Ok(store) = Store::open(&env.workspace) else {
        return Vec::new();
    };
    match store.archived_read_back(root) {
        Ok(docs) => docs.iter().map(|d| d.derive(ChapterLine::of)).collect(),
        Err(e) => {
            eprintln!("chapters: the notice lists no chapters: {e}");
            Vec::new()
        }
    }
}

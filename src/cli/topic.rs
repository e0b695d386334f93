//! `chapters topic merge A B`: a person's `topic-alias` fact (record §6.3 escape hatch);
//! `chapters topic pin|unpin T`: a person's `topic-pin` fact, which also undoes a merge the
//! plugin's vocabulary made (every merge revertible, §6.3).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use dsh_chapters::curation::{self, Author, Fact, FactKind};
use dsh_chapters::redact::Redactor;
use dsh_chapters::store::Store;

use super::Env;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Read topic A as topic B from now on, on every machine of the pool (a `topic-alias`
    /// fact by `user`; a later person's fact for A replaces it, the plugin's never does).
    Merge(MergeArgs),
    /// Keep topic T its own label: the plugin's vocabulary never folds it away, and a merge
    /// it already made is undone on every machine of the pool (a `topic-pin` fact by
    /// `user`; a later person's merge of T replaces it).
    Pin(PinArgs),
    /// Lift a pin: the vocabulary may propose merging T again.
    Unpin(PinArgs),
}

#[derive(clap::Args)]
struct PinArgs {
    /// The topic.
    #[arg(value_name = "T")]
    topic: String,
    /// Why, kept with the fact.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Print what was written as one JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct MergeArgs {
    /// The topic folded away.
    #[arg(value_name = "A")]
    from: String,
    /// The topic it is read as.
    #[arg(value_name = "B")]
    to: String,
    /// Why, kept with the fact.
    #[arg(long, value_name = "TEXT")]
    reason: Option<String>,
    /// Print what was written as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    match args.command {
        Command::Merge(a) => merge(workspace, a),
        Command::Pin(a) => pin(workspace, a, true),
        Command::Unpin(a) => pin(workspace, a, false),
    }
}

/// Append a person's fact to this machine's ledger. With `json`, print what was written and
/// return `None`; else the ledger's path (relative to the workspace) and the canonical label
/// of `topic` after the fact, for the caller's words.
fn write_fact(
    workspace: Option<&Path>,
    kind: FactKind,
    reason: Option<String>,
    topic: &str,
    json: bool,
) -> Result<Option<(String, String)>> {
    let env = Env::resolve(workspace, None)?;
    let store = Store::open(&env.workspace).with_context(|| {
        format!(
            "{} is not enabled: run `chapters init` first",
            env.workspace.display()
        )
    })?;
    let redactor = Redactor::new(&env.config.redaction_patterns)?;
    let mut fact = Fact::new(
        kind,
        Author::User,
        &dsh_chapters::time::rfc3339_utc(super::now_ms()),
    );
    fact.reason = reason;
    let file = curation::file::store_path(store.dir(), &env.harness_id)?;
    {
        // One writer per file, ever: the store's writer lock, as every store write.
        let _lock = store.lock(Duration::from_millis(env.config.writer_lock_timeout_ms))?;
        curation::file::append(
            &store,
            &env.harness_id,
            &curation::file::redacted(&fact, &redactor),
        )?;
    }
    let inputs = dsh_chapters::index::build::read_curation(store.dir(), None)?;
    let canonical = inputs.curation.canonical(topic).topic;
    let rel = file
        .strip_prefix(&env.workspace)
        .unwrap_or(&file)
        .to_string_lossy()
        .into_owned();
    if json {
        super::print_json(&json!({
            "written": fact,
            "file": rel,
            "canonical": canonical,
        }))?;
        return Ok(None);
    }
    Ok(Some((rel, canonical)))
}

fn pin(workspace: Option<&Path>, args: PinArgs, pinned: bool) -> Result<()> {
    let topic = curation::normalize_topic(&args.topic);
    if topic.is_empty() {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            "topic pin and unpin need a non-empty topic\n",
        )
        .exit();
    }
    let written = write_fact(
        workspace,
        FactKind::TopicPin {
            topic: topic.clone(),
            pinned,
        },
        args.reason,
        &topic,
        args.json,
    )?;
    let Some((rel, _)) = written else {
        return Ok(());
    };
    let verb = if pinned { "pinned" } else { "unpinned" };
    println!("wrote a topic-pin fact to {rel}: {topic} {verb} (author user)");
    if pinned {
        println!("  {topic} stays its own label: no merge by the plugin folds it away");
    } else {
        println!("  the vocabulary may propose merging {topic} again");
    }
    println!("  the index and search follow at the next search or sync; `chapters sync` shares it with the pool");
    Ok(())
}

fn merge(workspace: Option<&Path>, args: MergeArgs) -> Result<()> {
    let (from, to) = (
        curation::normalize_topic(&args.from),
        curation::normalize_topic(&args.to),
    );
    if from.is_empty() || to.is_empty() || from == to {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!(
                "topic merge needs two different, non-empty topics (got {from:?} and {to:?})\n"
            ),
        )
        .exit();
    }
    let written = write_fact(
        workspace,
        FactKind::TopicAlias {
            from: from.clone(),
            to: to.clone(),
        },
        args.reason,
        &from,
        args.json,
    )?;
    let Some((rel, canonical)) = written else {
        return Ok(());
    };
    println!("wrote a topic-alias fact to {rel}: {from} → {to} (author user)");
    if canonical != to {
        println!("  on this machine {from} now reads as {canonical} (an alias chain or a loop)");
    }
    println!("  the index and search follow at the next search or sync; `chapters sync` shares it with the pool");
    Ok(())
}

//! `chapters topic merge A B`: a person's `topic-alias` fact (record §6.3 escape hatch);
//! `chapters topic pin|unpin T`: a person's `topic-pin` fact, which also undoes a merge the
//! plugin's vocabulary made (every merge revertible, §6.3).

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use dsh_chapters::curation::{self, Author, Fact, FactKind};
use dsh_chapters::redact::{echo, Redactor};
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

/// Append a person's fact to this machine's ledger, and report it: the JSON document (with
/// `json`) or the words, both derived from the fact as it was written (through the rules:
/// a topic or a reason typed with a credential in it is shown as the ledger holds it).
fn write_fact(
    workspace: Option<&Path>,
    kind: FactKind,
    reason: Option<String>,
    json: bool,
) -> Result<()> {
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
    let fact = curation::file::redacted(&fact, &redactor);
    let file = curation::file::store_path(store.dir(), &env.harness_id)?;
    {
        // One writer per file, ever: the store's writer lock, as every store write.
        let _lock = store.lock(Duration::from_millis(env.config.writer_lock_timeout_ms))?;
        curation::file::append(&store, &env.harness_id, &fact)?;
    }
    let inputs = dsh_chapters::topics::build::read_curation(store.dir(), None)?;
    let frame = TopicFrame {
        rel: file
            .strip_prefix(&env.workspace)
            .unwrap_or(&file)
            .to_string_lossy()
            .into_owned(),
        curation: inputs.curation,
    };
    if json {
        return super::print_json_answer(&fact.derive_with(&frame, |fact, frame| {
            json!({
                "written": fact,
                "file": frame.rel,
                "canonical": frame.curation.canonical(subject(fact)).topic,
            })
        }));
    }
    super::print_answer(&fact.derive_with(&frame, report_text));
    Ok(())
}

/// Where the fact went and the curation after it (read back from the store): no
/// conversation text.
struct TopicFrame {
    rel: String,
    curation: dsh_chapters::curation::Curation,
}

impl dsh_chapters::redact::Settings for TopicFrame {}

/// The topic a fact is about.
fn subject(fact: &Fact) -> &str {
    match &fact.kind {
        FactKind::TopicPin { topic, .. } => topic,
        FactKind::TopicAlias { from, .. } => from,
        _ => "",
    }
}

/// What `topic pin|unpin|merge` says it wrote.
fn report_text(fact: &Fact, frame: &TopicFrame) -> String {
    let rel = &frame.rel;
    let follow = "  the index and search follow at the next search or sync; `chapters sync` shares it with the pool\n";
    match &fact.kind {
        FactKind::TopicPin { topic, pinned } => {
            let verb = if *pinned { "pinned" } else { "unpinned" };
            let what = if *pinned {
                format!("  {topic} stays its own label: no merge by the plugin folds it away\n")
            } else {
                format!("  the vocabulary may propose merging {topic} again\n")
            };
            format!("wrote a topic-pin fact to {rel}: {topic} {verb} (author user)\n{what}{follow}")
        }
        FactKind::TopicAlias { from, to } => {
            let canonical = frame.curation.canonical(from).topic;
            let chain = if canonical != *to {
                format!("  on this machine {from} now reads as {canonical} (an alias chain or a loop)\n")
            } else {
                String::new()
            };
            format!(
                "wrote a topic-alias fact to {rel}: {from} → {to} (author user)\n{chain}{follow}"
            )
        }
        _ => format!("wrote a fact to {rel}\n"),
    }
}

fn pin(workspace: Option<&Path>, args: PinArgs, pinned: bool) -> Result<()> {
    // Through the rules before it is lowercased: a lowercased key is no longer one the rules
    // know (`akia…`), so the order matters.
    let topic = curation::normalize_topic(&echo(&args.topic));
    if topic.is_empty() {
        return Err(super::Usage("topic pin and unpin need a non-empty topic".to_owned()).into());
    }
    write_fact(
        workspace,
        FactKind::TopicPin { topic, pinned },
        args.reason,
        args.json,
    )
}

fn merge(workspace: Option<&Path>, args: MergeArgs) -> Result<()> {
    let (from, to) = (
        curation::normalize_topic(&echo(&args.from)),
        curation::normalize_topic(&echo(&args.to)),
    );
    if from.is_empty() || to.is_empty() || from == to {
        return Err(super::Usage(format!(
            "topic merge needs two different, non-empty topics (got {from:?} and {to:?})"
        ))
        .into());
    }
    write_fact(
        workspace,
        FactKind::TopicAlias { from, to },
        args.reason,
        args.json,
    )
}

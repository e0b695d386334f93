//! `chapters forget`: a person takes back what slipped through (issue #13.7), in two
//! invocations and no dialogue — `--list` shows the candidates with their ids and writes
//! nothing; `forget ID… --by NAME [--reason TEXT]` removes those, and only those (with the
//! artifacts only they referenced), from this machine's store, its mirror copies and every
//! derived file, and records the act in the forget ledger. `--by` is mandatory and taken as
//! typed: never read from git's configuration or the environment. The next `chapters sync`
//! removes them from the pool's tip in a commit of its own.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::json;

use dsh_chapters::catalog::table::Table;
use dsh_chapters::pool::link;
use dsh_chapters::redact::ConfigRedactor;
use dsh_chapters::store::forget::{self, Act, Candidate, FORGET_VERSION};
use dsh_chapters::store::Store;
use dsh_chapters::topics::build;

use super::Env;

#[derive(clap::Args)]
pub struct Args {
    /// The ids to forget (from `chapters forget --list`): `<root>` a whole session tree,
    /// `<root>/NNN` a chapter, `<root>/plan-NNN` a plan, `<root>/artifact-<hex>` an artifact.
    #[arg(
        value_name = "ID",
        required_unless_present = "list",
        conflicts_with = "list"
    )]
    ids: Vec<String>,
    /// Show what can be forgotten, with ids; writes nothing.
    #[arg(long)]
    list: bool,
    /// With --list: only this session (a root session id or a session id).
    #[arg(long, value_name = "ID", requires = "list")]
    session: Option<String>,
    /// With --list: only documents whose text holds TEXT (case-insensitive); the text
    /// itself is never printed.
    #[arg(long, value_name = "TEXT", requires = "list")]
    grep: Option<String>,
    /// Your name: forgetting is a person's act, recorded as given (mandatory to act).
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "list",
        conflicts_with = "list"
    )]
    by: Option<String>,
    /// Why, recorded with the act (never the removed text).
    #[arg(long, value_name = "TEXT", conflicts_with = "list")]
    reason: Option<String>,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let store = Store::open(&env.workspace).with_context(|| {
        format!(
            "{} is not enabled: run `chapters init` first",
            env.workspace.display()
        )
    })?;
    if args.list {
        return list(&store, &args);
    }
    act(&env, &store, &args)
}

fn matches(store: &Store, c: &Candidate, args: &Args) -> Result<bool> {
    if let Some(s) = &args.session {
        if &c.root_session_id != s && c.session_id.as_deref() != Some(s.as_str()) {
            return Ok(false);
        }
    }
    if let Some(needle) = &args.grep {
        if c.kind == "session" {
            return Ok(false);
        }
        let path = store.dir().join(&c.path);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return Ok(text.to_lowercase().contains(&needle.to_lowercase()));
    }
    Ok(true)
}

fn list(store: &Store, args: &Args) -> Result<()> {
    let mut shown = Vec::new();
    for c in forget::candidates(store)? {
        if matches(store, &c, args)? {
            shown.push(c);
        }
    }
    if args.json {
        return super::print_json(&json!({ "candidates": shown }));
    }
    if shown.is_empty() {
        println!(
            "nothing to forget here (no matching session, chapter, plan or artifact in this store)"
        );
        return Ok(());
    }
    for c in &shown {
        let span = c
            .seq_range
            .map(|(lo, hi)| format!("seq {lo}–{hi}"))
            .unwrap_or_default();
        let what = match (c.kind, &c.title, &c.holds) {
            ("session", _, Some(h)) => format!(
                "{} chapter(s), {} plan(s), {} artifact(s)",
                h.get("chapter").copied().unwrap_or(0),
                h.get("plan").copied().unwrap_or(0),
                h.get("artifact").copied().unwrap_or(0)
            ),
            ("artifact", _, _) if !c.referenced_by.is_empty() => {
                format!("referenced by {}", c.referenced_by.join(", "))
            }
            (_, Some(t), _) => t.clone(),
            _ => String::new(),
        };
        println!(
            "{}  {:<8} {:<14} {what}  ({} bytes)",
            c.id, c.kind, span, c.bytes
        );
    }
    println!(
        "\nforget with: chapters forget ID… --by YOUR-NAME [--reason TEXT] (a session id takes its whole tree)"
    );
    Ok(())
}

fn act(env: &Env, store: &Store, args: &Args) -> Result<()> {
    let by = args.by.as_deref().unwrap_or_default().trim();
    if by.is_empty() {
        bail!("--by needs your name: forgetting is a person's act, and it is recorded as given");
    }
    let lock_timeout = Duration::from_millis(env.config.writer_lock_timeout_ms);
    // An archive or a sync in progress holds the writer lock: wait for it.
    let _lock = store.lock(lock_timeout)?;
    let packed = dsh_chapters::store::mirror::Packed::open(&env.workspace);
    let resolved = forget::resolve(
        store,
        &env.workspace,
        packed
            .as_ref()
            .map(|p| p as &dyn dsh_chapters::store::read::MirrorObjects),
        &env.identity.project_key,
        &env.harness_id,
        &args.ids,
    )?;
    let now = dsh_chapters::time::rfc3339_utc(super::now_ms());
    let redactor = ConfigRedactor::new(&env.config.redaction_patterns)?;
    if !resolved.items.is_empty() {
        // The act first: a crash after it never re-archives what it names, and running the
        // same forget again finishes the removal.
        let act = Act {
            v: FORGET_VERSION,
            act: "forget".into(),
            at: now.clone(),
            by: by.to_owned(),
            reason: args.reason.clone().filter(|r| !r.trim().is_empty()),
            harness_id: env.harness_id.clone(),
            ids: resolved
                .ids
                .iter()
                .filter(|i| !resolved.already.contains(i))
                .cloned()
                .collect(),
            items: resolved.items.clone(),
        };
        forget::append(store, &act, &redactor)?;
    }
    // Finish an earlier act of the same ids too (idempotent).
    let earlier: Vec<forget::Item> = forget::read(store.dir())?
        .items()
        .filter(|i| resolved.already.contains(&i.id()))
        .cloned()
        .collect();
    let mut items = resolved.items.clone();
    items.extend(earlier);
    let removed = forget::remove(
        store,
        &env.workspace,
        &env.identity.project_key,
        &items,
        &redactor,
    )?;

    // Derived files: the search table lists every folder again (dropping what is gone); the
    // store's topic index, when there is one, is rebuilt whole.
    let linked = link::read(store.dir())?.is_some();
    let mut notes = Vec::new();
    if let Err(e) = Table::invalidate(store.dir(), lock_timeout) {
        notes.push(format!(
            "the search cache could not be reset: {e}; delete {} and search again",
            store.dir().join(".search").display()
        ));
    }
    match Table::rescan(&env.workspace, linked, lock_timeout) {
        Ok((table, _)) => {
            if store.dir().join("index").is_dir() {
                if let Err(e) = build::update_store(&env.workspace, &table, true) {
                    notes.push(format!("the store's topic index was not rebuilt: {e}; run `chapters index rebuild`"));
                }
            }
        }
        Err(e) => notes.push(format!(
            "the search cache was not refreshed: {e}; run `chapters index rebuild`"
        )),
    }
    if linked {
        notes.push("the next `chapters sync` removes them from the pool's tip in a commit of its own naming you and the reason; the pool's history still holds them until it is rewritten (docs/purging.md)".into());
    }
    let ids: Vec<String> = items.iter().map(forget::Item::id).collect();
    if args.json {
        return super::print_json(&json!({
            "forgotten": items,
            "ids": ids,
            "by": by,
            "at": now,
            "removed": removed,
            "alreadyForgotten": resolved.already,
            "notes": notes,
        }));
    }
    println!(
        "forgot {} item(s), by {by}: {}",
        items.len(),
        ids.join(", ")
    );
    println!(
        "removed {} file(s) from the store and {} from the mirror; recorded in {}",
        removed.store_files,
        removed.mirror_files,
        forget::ledger_path(store.dir(), &env.harness_id)?.display()
    );
    for note in notes {
        println!("  note: {note}");
    }
    Ok(())
}

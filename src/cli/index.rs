//! `chapters index rebuild`: the repair path of the derived topic index (record §10.2).

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::json;

use dsh_chapters::catalog::table::Table;
use dsh_chapters::credentials;
use dsh_chapters::pool::link::{self, Upstream};
use dsh_chapters::pool::plan::Visibility;
use dsh_chapters::pool::sync::{self, SyncContext};
use dsh_chapters::store::Store;
use dsh_chapters::topics::build;

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Rebuild the index from the documents and curation facts: `<store>/index/` when not
    /// linked to a private pool; the pool's `index/` (pulled, rebuilt, committed) when linked.
    Rebuild(RebuildArgs),
}

#[derive(clap::Args)]
struct RebuildArgs {
    /// Print the result as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    match args.command {
        Command::Rebuild(a) => rebuild(workspace, a),
    }
}

fn rebuild(workspace: Option<&Path>, args: RebuildArgs) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let store = Store::open(&env.workspace).with_context(|| {
        format!(
            "{} is not enabled: run `chapters init` first",
            env.workspace.display()
        )
    })?;
    let lock_timeout = Duration::from_millis(env.config.writer_lock_timeout_ms);
    let record = link::read(store.dir())?;
    if let Some(record) = record.filter(|r| r.visibility == Visibility::Private) {
        let token = match &record.upstream {
            Upstream::Network { .. } => {
                credentials::load(&env.dsh_home, &env.identity.project_key)?
            }
            Upstream::Local { path } => {
                link::check_local_pool(path, &env.workspace)?;
                None
            }
        };
        let now_ms = super::now_ms();
        let now = dsh_chapters::time::rfc3339_utc(now_ms);
        let ctx = SyncContext {
            workspace: &env.workspace,
            store: &store,
            identity: &env.identity,
            harness_id: &env.harness_id,
            link: &record,
            token,
            now_secs: now_ms / 1000,
            now: &now,
            timeout: Duration::from_millis(env.config.sync_timeout_ms),
            mirror_recent_days: env.config.mirror_recent_days,
            lock_timeout,
            rebuild_index: true,
            vocabulary: None,
        };
        return match sync::sync(&ctx, false) {
            Ok(report) => {
                let index = report.published.get("index").copied().unwrap_or(0);
                if args.json {
                    super::print_json(
                        &json!({"base": "pool", "code": "ok", "changed": index, "report": report}),
                    )?;
                } else {
                    println!(
                        "rebuilt the pool's index ({}): {index} file(s) differed and were committed",
                        report.upstream
                    );
                    for note in &report.notes {
                        println!("  note: {note}");
                    }
                }
                Ok(())
            }
            Err(e) => {
                eprintln!("chapters: the pool's index was not rebuilt: {e}");
                Err(Reported.into())
            }
        };
    }
    let _lock = store.lock(lock_timeout)?;
    let (table, _) = Table::rescan(&env.workspace, false, lock_timeout)?;
    apply_store_vocabulary(&env, &store, &table);
    let written = build::update_store(&env.workspace, &table, true)?;
    if args.json {
        return super::print_json(&json!({"base": "store", "result": written}));
    }
    if written.documents == 0 && written.shards == 0 {
        bail!("nothing to index: the store holds no chapters yet — run `chapters archive` first");
    }
    println!(
        "rebuilt {}: {} shard(s) over {} document(s), {} file(s) rewritten, {} removed",
        store.dir().join("index").display(),
        written.shards,
        written.documents,
        written.written,
        written.removed
    );
    Ok(())
}

/// The vocabulary pass over this machine's store (not linked to a private pool: the pool's
/// is sync's), when config `vocabApply` says so: plugin facts appended. A writer's step —
/// `index rebuild` and `archive` run it under the store's writer lock; a search never does.
fn apply_store_vocabulary(env: &Env, store: &Store, table: &Table) {
    if !env.config.vocab_apply {
        return;
    }
    let redactor = match dsh_chapters::redact::Redactor::new(&env.config.redaction_patterns) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chapters: the vocabulary was not applied: {e}");
            return;
        }
    };
    let at = dsh_chapters::time::rfc3339_utc(super::now_ms());
    let Some(apply) = build::VocabApply::when_applied(&env.config, &redactor, &env.harness_id, &at)
    else {
        return;
    };
    if let Err(e) =
        build::apply_vocabulary(store, table, &env.identity.project_key, false, None, &apply)
    {
        eprintln!("chapters: the vocabulary was not applied: {e}");
    }
}

/// After an archive: the store's topic index (and vocabulary, when applied) follow the
/// store, unless the workspace is linked to a private pool (whose index sync keeps) or
/// another writer holds the store (the next archive or `index rebuild` does it).
pub(super) fn follow_store(env: &Env) {
    let Ok(store) = Store::open(&env.workspace) else {
        return;
    };
    let record = link::read(store.dir()).ok().flatten();
    if record
        .as_ref()
        .is_some_and(|r| r.visibility == Visibility::Private)
    {
        return;
    }
    let Ok(_lock) = store.lock(Duration::ZERO) else {
        return;
    };
    let lock_timeout = Duration::from_millis(env.config.writer_lock_timeout_ms);
    let table = match Table::refresh(&env.workspace, record.is_some(), lock_timeout) {
        Ok((table, _)) => table,
        Err(e) => {
            tracing::warn!(error = %e, "the store's topic index was not updated");
            return;
        }
    };
    apply_store_vocabulary(env, &store, &table);
    if let Err(e) = build::update_store(&env.workspace, &table, false) {
        tracing::warn!(error = %e, "could not update the store's topic index");
    }
}

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Result};

use dsh_chapters::credentials;
use dsh_chapters::pool::link::{self, Upstream};
use dsh_chapters::pool::sync::{self, SyncContext, SyncReport};
use dsh_chapters::store::Store;

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    /// Only bring the pool's files in; publish nothing.
    #[arg(long)]
    pull_only: bool,
    /// Print the report as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let store = Store::open(&env.workspace)?;
    let Some(record) = link::read(store.dir())? else {
        bail!("{} is not linked to a pool: run `chapters link <path|url> --visibility private|public` first", env.workspace.display());
    };
    let token = match &record.upstream {
        Upstream::Network { .. } => credentials::load(&env.dsh_home, &env.identity.project_key)?,
        // Checked again at every sync: a symlink may have moved since `link`.
        Upstream::Local { path } => {
            link::check_local_pool(path, &env.workspace)?;
            None
        }
    };
    let now_ms = super::now_ms();
    let now = dsh_chapters::time::rfc3339_utc(now_ms);
    let vocab = env
        .config
        .vocab_apply
        .then(|| dsh_chapters::redact::Redactor::new(&env.config.redaction_patterns))
        .transpose()?;
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
        lock_timeout: Duration::from_millis(env.config.writer_lock_timeout_ms),
        rebuild_index: false,
        vocabulary: vocab.as_ref().and_then(|redactor| {
            dsh_chapters::topics::build::VocabApply::when_applied(
                &env.config,
                redactor,
                &env.harness_id,
                &now,
            )
        }),
    };
    match sync::sync(&ctx, args.pull_only) {
        Ok(report) => {
            if args.json {
                super::print_json(
                    &serde_json::json!({"code": "ok", "report": report, "linkMigrated": env.link_migration}),
                )?;
            } else {
                print_text(&report);
            }
            for r in &report.refused {
                eprintln!(
                    "chapters: refused to overwrite {} in the pool: {}",
                    r.path, r.reason
                );
            }
            if report.refused.is_empty() {
                Ok(())
            } else {
                Err(Reported.into())
            }
        }
        Err(e) => {
            if args.json {
                super::print_json(&serde_json::json!({
                    "code": e.code,
                    "detail": e.detail,
                    "hint": e.code.hint(),
                    "report": e.report,
                    "linkMigrated": env.link_migration,
                }))?;
            }
            eprintln!("chapters: {e}");
            Err(Reported.into())
        }
    }
}

fn print_text(report: &SyncReport) {
    let published: u64 = report.published.values().sum();
    let parts: Vec<String> = report
        .published
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    if published == 0 {
        println!("{}: nothing new to publish", report.upstream);
    } else {
        println!("{}: published {}", report.upstream, parts.join(", "));
    }
    if report.received > 0 {
        println!(
            "  {} file(s) of the pool now readable in .dsh-knowledge/",
            report.received
        );
    }
    if let Some(head) = &report.pool_head {
        println!("  pool head {head}");
    }
    for note in &report.notes {
        println!("  note: {note}");
    }
}

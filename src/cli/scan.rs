//! `chapters scan [--pool] [--json]`: old leaks found with today's redaction rules (issue
//! #13.8) — counts and locations, never values, and the `chapters forget` id that removes
//! each. With `--pool`, every blob of the pool's history too; an unreachable pool is said
//! (exit 1) after the store's findings are printed.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use serde_json::json;

use dsh_chapters::credentials;
use dsh_chapters::git::{GitRepo, ObjectId};
use dsh_chapters::pool::link::{self, Upstream};
use dsh_chapters::pool::sync::POOL_REF;
use dsh_chapters::pool::transport::{self, Remote};
use dsh_chapters::redact::ConfigRedactor;
use dsh_chapters::scan::{self, Scanned};
use dsh_chapters::store::{Store, MIRROR_DIR};

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    /// Also scan every blob of the pool's history (`git rev-list --objects --all`).
    #[arg(long)]
    pool: bool,
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
    // Today's rules: the built-in ones and the configured patterns.
    let redactor = ConfigRedactor::new(&env.config.redaction_patterns)?;
    let stored = scan::scan_store(
        &store,
        &env.workspace,
        &env.identity.project_key,
        &env.harness_id,
        &redactor,
    )?;
    let mut pool: Option<Result<(String, Scanned), String>> = None;
    if args.pool {
        pool = Some(scan_pool(&env, &store, &redactor));
    }
    let unreachable = match &pool {
        Some(Err(detail)) => Some(detail.clone()),
        _ => None,
    };
    if args.json {
        let pool_json = match &pool {
            None => serde_json::Value::Null,
            Some(Ok((upstream, s))) => {
                json!({"reachable": true, "upstream": upstream, "result": s})
            }
            Some(Err(detail)) => json!({"reachable": false, "detail": detail}),
        };
        super::print_json(&json!({"store": stored, "pool": pool_json}))?;
    } else {
        print_scanned("store and mirror", &stored);
        if let Some(Ok((upstream, s))) = &pool {
            print_scanned(&format!("pool {upstream} (whole history)"), s);
        }
    }
    if let Some(detail) = unreachable {
        eprintln!(
            "chapters: the pool is unreachable ({detail}); scanned the store and the mirror only"
        );
        return Err(Reported.into());
    }
    Ok(())
}

fn print_scanned(what: &str, s: &Scanned) {
    println!(
        "{what}: {} file(s), {} byte(s) scanned with today's rules: {} finding(s)",
        s.scanned,
        s.bytes,
        s.total()
    );
    for f in &s.findings {
        let lines: Vec<String> = f.lines.iter().map(u64::to_string).collect();
        let mut line = format!(
            "  {}:{} {} ×{}",
            f.location,
            lines.join(","),
            f.rule,
            f.count
        );
        if let Some(blob) = &f.blob {
            line.push_str(&format!(" (blob {}", &blob[..12.min(blob.len())]));
            if f.at_tip == Some(false) {
                line.push_str(", history only");
            }
            line.push(')');
        }
        match (&f.forget_id, &f.remedy) {
            (Some(id), _) => line.push_str(&format!(" → chapters forget {id} --by NAME")),
            (None, Some(remedy)) => line.push_str(&format!(" → {remedy}")),
            (None, None) => {}
        }
        println!("{line}");
    }
}

/// Scan the pool's history: a local pool in place; a network pool fetched into the mirror
/// first. `Err` says why it could not be reached.
fn scan_pool(
    env: &Env,
    store: &Store,
    redactor: &dsh_chapters::redact::Redactor,
) -> std::result::Result<(String, Scanned), String> {
    let record = link::read(store.dir())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "this workspace is not linked to a pool (`chapters link`)".to_owned())?;
    let upstream = record.upstream.describe();
    let (repo, head) = match &record.upstream {
        Upstream::Local { path } => {
            let repo = GitRepo::open(path).map_err(|e| e.to_string())?;
            let head = repo.ref_target(POOL_REF).map_err(|e| e.to_string())?;
            (repo, head)
        }
        Upstream::Network { url } => {
            let token = credentials::load(&env.dsh_home, &env.identity.project_key)
                .map_err(|e| e.to_string())?;
            let mirror = GitRepo::init_or_open_mirror(&env.workspace.join(MIRROR_DIR))
                .map_err(|e| e.to_string())?;
            let head = transport::fetch(
                mirror.path(),
                &Remote {
                    url: url.clone(),
                    token,
                    user: record.user.clone(),
                },
                Duration::from_millis(env.config.sync_timeout_ms),
            )
            .map_err(|e| e.to_string())?
            .map(|hex| ObjectId::from_hex(hex.as_bytes()).map_err(|e| e.to_string()))
            .transpose()?;
            (mirror, head)
        }
    };
    let scanned = scan::scan_pool(
        &repo,
        head,
        store,
        &env.identity.project_key,
        &env.harness_id,
        redactor,
    )
    .map_err(|e| e.to_string())?;
    Ok((upstream, scanned))
}

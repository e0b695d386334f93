//! `chapters enrich run | report | model`: idle-time model enrichment (record §6, §12).

use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};

use dsh_chapters::credentials::{self, Secret};
use dsh_chapters::enrich::run::{self as batch, EnrichContext, EnrichReport, RunOptions};
use dsh_chapters::enrich::{http::Endpoint, KEY_NAME};
use dsh_chapters::store::Store;

use super::Env;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Annotate archived chapters not yet annotated by the configured model (one batch).
    Run {
        /// Most chapters this batch examines (default: `enrichmentBatchCap`).
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Re-annotate chapters this model already annotated.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// What enrichment has done and what it waits for.
    Report {
        #[arg(long)]
        json: bool,
    },
    /// Point enrichment at an OpenAI-compatible endpoint (written to this machine's home config).
    Model {
        /// Base URL, e.g. http://127.0.0.1:8080/v1
        #[arg(long, value_name = "URL")]
        endpoint: String,
        /// The model name sent with each request.
        #[arg(long, value_name = "NAME")]
        model: String,
        /// Read an API key from stdin; stored 0600 under the home, never printed.
        #[arg(long)]
        key_stdin: bool,
    },
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    match args.command {
        Sub::Run { limit, all, json } => run_batch(workspace, limit, all, json),
        Sub::Report { json } => report(workspace, json),
        Sub::Model {
            endpoint,
            model,
            key_stdin,
        } => set_model(workspace, &endpoint, &model, key_stdin),
    }
}

fn run_batch(workspace: Option<&Path>, limit: Option<u64>, all: bool, json: bool) -> Result<()> {
    dsh_chapters::enrich::run_in_background();
    let env = Env::resolve(workspace, None)?;
    let store = Store::open(&env.workspace)?;
    let key = credentials::load(&env.dsh_home, KEY_NAME)?;
    let ctx = EnrichContext {
        store: &store,
        workspace: &env.workspace,
        config: &env.config,
        project_key: &env.identity.project_key,
        harness: &env.harness_id,
        key: key.as_ref(),
        now_ms: super::now_ms(),
    };
    let report = batch::run(
        &ctx,
        RunOptions {
            limit,
            all,
            respect_backoff: false,
        },
    )?;
    if json {
        super::print_json(&report)?;
    } else {
        print_report(&report);
    }
    if report.failed + report.timeouts > 0 {
        // The chapters are intact; the batch did not do what was asked.
        return Err(super::Reported.into());
    }
    Ok(())
}

fn print_report(r: &EnrichReport) {
    println!(
        "enrichment via {} (model {}): {} waiting, {} examined",
        r.endpoint,
        if r.model.is_empty() {
            "endpoint default"
        } else {
            &r.model
        },
        r.queued,
        r.examined
    );
    for name in &r.annotated {
        println!("  annotated {name}");
    }
    for m in &r.rules_mined {
        println!(
            "  mined session rule {} from {} ({}{})",
            m.id,
            m.chapter,
            match m.label {
                dsh_chapters::rules::MinedLabel::Stated => "stated",
                dsh_chapters::rules::MinedLabel::Inferred => "inferred",
            },
            if m.review_only {
                ", review-only until approved"
            } else {
                ""
            }
        );
    }
    if r.unchanged > 0 {
        println!("  {} unchanged (same model, same answer)", r.unchanged);
    }
    for name in &r.invalid {
        println!("  {name}: invalid answer twice — its deterministic values stay");
    }
    if r.failed + r.timeouts > 0 {
        eprintln!(
            "chapters: the endpoint failed {} time(s) and timed out {} time(s); chapters keep their deterministic values. See `chapters enrich report`",
            r.failed, r.timeouts
        );
    }
    for note in &r.notes {
        println!("  note: {note}");
    }
}

fn report(workspace: Option<&Path>, json: bool) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let store = Store::open(&env.workspace)?;
    let status = batch::read_status(&store)?;
    let has_key = credentials::load(&env.dsh_home, KEY_NAME)?.is_some();
    if json {
        return super::print_json(&serde_json::json!({
            "endpoint": env.config.enrichment_endpoint,
            "model": env.config.enrichment_model,
            "enabled": env.config.enrichment_enabled,
            // What runs: the switch is on and an endpoint is set (`enabled` is the switch).
            "active": env.config.enrichment_enabled && env.config.enrichment_endpoint.is_some(),
            "apiKeyStored": has_key,
            "status": status,
        }));
    }
    match &env.config.enrichment_endpoint {
        Some(url) => println!(
            "endpoint {url} · model {} · {}{}",
            env.config
                .enrichment_model
                .as_deref()
                .unwrap_or("(endpoint default)"),
            if env.config.enrichment_enabled {
                "enabled"
            } else {
                "disabled on this machine"
            },
            if has_key { " · API key stored" } else { "" }
        ),
        None => println!(
            "enrichment is off: no endpoint (`chapters enrich model --endpoint URL --model NAME`)"
        ),
    }
    match status {
        None => println!("no enrichment batch has run in this workspace"),
        Some(s) => {
            println!(
                "annotated {} · unchanged {} · invalid {} · failed {} · timeouts {}",
                s.annotated, s.unchanged, s.invalid, s.failed, s.timeouts
            );
            if let Some(e) = &s.last_error {
                println!(
                    "last error ({}): {e}",
                    s.last_error_at.as_deref().unwrap_or("time unknown")
                );
            }
            if let Some(until) = s.backoff_until_ms {
                println!(
                    "automatic batches back off until {}",
                    dsh_chapters::time::rfc3339_utc(until)
                );
            }
        }
    }
    Ok(())
}

/// Write `enrichmentEndpoint` and `enrichmentModel` into the home config (other lines kept),
/// and the key, when given, beside the pool tokens.
fn set_model(workspace: Option<&Path>, endpoint: &str, model: &str, key_stdin: bool) -> Result<()> {
    Endpoint::parse(endpoint)?;
    if model.trim().is_empty() || model.contains(['\n', '\r']) {
        bail!("--model must be a non-empty, one-line model name");
    }
    let env = Env::resolve(workspace, None)?;
    let key = if key_stdin {
        let mut text = String::new();
        std::io::stdin()
            .take(64 * 1024)
            .read_to_string(&mut text)
            .context("cannot read the API key from stdin")?;
        Some(Secret::parse(&text)?)
    } else {
        None
    };
    let dir = dsh_chapters::home::ensure(&env.dsh_home).with_context(|| {
        format!(
            "cannot create {}",
            dsh_chapters::home::dir(&env.dsh_home).display()
        )
    })?;
    let path = dir.join("config.yml");
    let old = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut text: String = old
        .lines()
        .filter(|l| !l.starts_with("enrichmentEndpoint:") && !l.starts_with("enrichmentModel:"))
        .map(|l| format!("{l}\n"))
        .collect();
    let quote = |s: &str| serde_json::to_string(s).expect("a string always serializes");
    text.push_str(&format!("enrichmentEndpoint: {}\n", quote(endpoint)));
    text.push_str(&format!("enrichmentModel: {}\n", quote(model)));
    dsh_chapters::home::write_private(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    // A config the next command would refuse is put back at once.
    let env_vars = dsh_chapters::config::chapters_env();
    if let Err(e) = dsh_chapters::config::load(
        &env.dsh_home,
        &env.workspace,
        &env_vars,
        &Default::default(),
    ) {
        dsh_chapters::home::write_private(&path, old.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        bail!("the new settings would make the config invalid, so nothing was changed: {e}");
    }
    println!(
        "wrote enrichmentEndpoint and enrichmentModel to {}",
        path.display()
    );
    if let Some(key) = key {
        let stored = credentials::store(&env.dsh_home, KEY_NAME, &key)?;
        println!("stored the API key at {} (0600)", stored.display());
    }
    Ok(())
}

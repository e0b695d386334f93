use std::path::Path;

use anyhow::Result;

use dsh_chapters::status;

use super::Env;

#[derive(clap::Args)]
pub struct Args {
    /// Print the status as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let mut report = status::status(
        &env.workspace,
        &env.dsh_home,
        &env.config,
        &env.identity,
        &env.harness_id,
    )?;
    let files = dsh_chapters::config::load(
        &env.dsh_home,
        &env.workspace,
        &Default::default(),
        &Default::default(),
    )?;
    let from_env = dsh_chapters::config::chapters_env().remove("CHAPTERS_HARNESS_ID");
    report.harness_id_warning = dsh_chapters::identity::harness_id_disagreement(
        from_env.as_deref(),
        files.harness_id.as_deref(),
    );
    if args.json {
        let Some(migration) = &env.link_migration else {
            return super::print_json(&report);
        };
        let mut value = serde_json::to_value(&report)?;
        if let Some(fields) = value.as_object_mut() {
            fields.insert("linkMigrated".into(), serde_json::to_value(migration)?);
        }
        return super::print_json(&value);
    }
    let id = &report.identity;
    println!("workspace   {}", report.workspace.display());
    println!(
        "project     {} ({}: {})",
        id.project_key, id.project_key_source, id.origin
    );
    if id.project_key_source == "path-derived" {
        println!("            warning: path-derived key — differs on every machine; add a git remote or set projectKeyOverride");
    }
    println!("harness     {}", report.harness_id);
    if let Some(w) = &report.harness_id_warning {
        println!("            warning: {w}");
    }
    println!(
        "upstream    {}",
        report.upstream.as_deref().unwrap_or("none (not linked)")
    );
    println!(
        "mirror      {}{}",
        report.mirror.display(),
        if report.mirror_exists {
            ""
        } else {
            " (absent)"
        }
    );
    if let Some(w) = &report.identity_warning {
        println!("WARNING     {w}");
    }
    println!(
        "mode        {} (last sync: {}{})",
        report.mode,
        report.last_sync_code,
        report
            .last_sync_at
            .as_deref()
            .map(|a| format!(" at {a}"))
            .unwrap_or_default()
    );
    if let Some(hint) = &report.last_sync_hint {
        println!("            {hint}");
    }
    if let Some(p) = &report.pending_publish {
        let total: u64 = p.values().sum();
        let parts: Vec<String> = p.iter().map(|(k, n)| format!("{n} {k}")).collect();
        println!(
            "unpublished {total} file(s){}",
            if parts.is_empty() {
                String::new()
            } else {
                format!(": {}", parts.join(", "))
            }
        );
    }
    match &report.store {
        None => println!("store       not enabled — run `chapters init`"),
        Some(c) => println!(
            "store       {} session tree(s), {} chapter(s), {} plan(s), {} artifact(s), {} signed turn(s)",
            c.root_sessions, c.chapters, c.plans, c.artifacts, c.collection_lines
        ),
    }
    println!(
        "pending     {} completed turn(s) not yet archived",
        report.pending_turns
    );
    let d = &report.daemon;
    if d.running {
        println!(
            "daemon      running (pid {}, up {} s): {}{}{}",
            d.pid.unwrap_or_default(),
            d.uptime_secs.unwrap_or_default(),
            if d.follows_this_workspace {
                format!("follows {} session(s) here", d.sessions)
            } else {
                "does not follow this workspace".to_owned()
            },
            d.signing_p99_ms
                .map(|p| format!(", signing p99 {p:.1} ms"))
                .unwrap_or_default(),
            if d.errors > 0 {
                format!(", {} recent error(s) — `chapters daemon status`", d.errors)
            } else {
                String::new()
            }
        );
        for v in &d.vanished {
            println!("            {}", super::daemon::vanished_line(v));
        }
    } else {
        println!("daemon      {}", d.note.as_deref().unwrap_or("not running"));
    }
    match &report.enrichment {
        None => println!("enrichment  off (no endpoint)"),
        Some(e) => {
            let counts = e.batches.as_ref().map_or_else(
                || "no batch yet".to_owned(),
                |b| {
                    format!(
                        "annotated {}, invalid {}, failed {}, timeouts {}{}",
                        b.annotated,
                        b.invalid,
                        b.failed,
                        b.timeouts,
                        b.last_error
                            .as_ref()
                            .map(|err| format!(" — last error: {err}"))
                            .unwrap_or_default()
                    )
                },
            );
            println!(
                "enrichment  {} via {}: {counts}",
                if e.enabled { "on" } else { "disabled here" },
                e.endpoint
            );
        }
    }
    if let Some(d) = &report.documents {
        println!(
            "documents   {} in the store, {} from the pool, {} unreadable (as of the last search or sync)",
            d.store, d.pool, d.unreadable
        );
    }
    if let Some(v) = &report.vocabulary {
        println!(
            "vocabulary  {} merge candidate(s){}",
            v.candidates.len(),
            if v.apply {
                " (vocabApply: applied at the next search or sync)"
            } else {
                " (shadow: vocabApply is false, nothing written)"
            }
        );
        for c in &v.candidates {
            println!("  {} → {}: {}", c.from, c.to, c.reason);
        }
    }
    for s in &report.sessions {
        let flight = s
            .in_flight
            .map(|(lo, hi)| format!(", in flight seqs {lo} to {hi}"))
            .unwrap_or_default();
        println!(
            "  {}  v{}  {} completed, {} unarchived{flight}",
            s.session_id, s.generation, s.completed_turns, s.unarchived_turns
        );
        if let Some(e) = &s.error {
            println!("    error: {e}");
        }
    }
    Ok(())
}

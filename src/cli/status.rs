use std::fmt::Write as _;
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
    // The report holds the vocabulary's candidates (derived from redacted text) and session
    // errors, whose details may quote a damaged log line: shown only through the rules.
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        if let (Some(migration), Some(fields)) = (&env.link_migration, value.as_object_mut()) {
            fields.insert("linkMigrated".into(), serde_json::to_value(migration)?);
        }
        let text = serde_json::to_string_pretty(&value)?;
        super::print_answer(&dsh_chapters::redact::echoed_text(&format!("{text}\n")));
        return Ok(());
    }
    let mut out = String::new();
    let id = &report.identity;
    let _ = writeln!(out, "workspace   {}", report.workspace.display());
    let _ = writeln!(
        out,
        "project     {} ({}: {})",
        id.project_key, id.project_key_source, id.origin
    );
    if id.project_key_source == "path-derived" {
        let _ = writeln!(
        out,
        "            warning: path-derived key — differs on every machine; add a git remote or set projectKeyOverride");
    }
    let _ = writeln!(out, "harness     {}", report.harness_id);
    if let Some(w) = &report.harness_id_warning {
        let _ = writeln!(out, "            warning: {w}");
    }
    let _ = writeln!(
        out,
        "upstream    {}",
        report.upstream.as_deref().unwrap_or("none (not linked)")
    );
    let _ = writeln!(
        out,
        "mirror      {}{}",
        report.mirror.display(),
        if report.mirror_exists {
            ""
        } else {
            " (absent)"
        }
    );
    if let Some(w) = &report.identity_warning {
        let _ = writeln!(out, "WARNING     {w}");
    }
    let _ = writeln!(
        out,
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
        let _ = writeln!(out, "            {hint}");
    }
    if let Some(p) = &report.pending_publish {
        let total: u64 = p.values().sum();
        let parts: Vec<String> = p.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(
            out,
            "unpublished {total} file(s){}",
            if parts.is_empty() {
                String::new()
            } else {
                format!(": {}", parts.join(", "))
            }
        );
    }
    match &report.store {
        None => {
            let _ = writeln!(out, "store       not enabled — run `chapters init`");
        }
        Some(c) => {
            let _ = writeln!(
                out,
                "store       {} session tree(s), {} chapter(s), {} plan(s), {} artifact(s), {} signed turn(s)",
                c.root_sessions, c.chapters, c.plans, c.artifacts, c.collection_lines
            );
        }
    }
    let _ = writeln!(
        out,
        "pending     {} completed turn(s) not yet archived",
        report.pending_turns
    );
    let d = &report.daemon;
    if d.running {
        let _ = writeln!(
            out,
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
            let _ = writeln!(out, "            {}", super::daemon::vanished_line(v));
        }
    } else {
        let _ = writeln!(
            out,
            "daemon      {}",
            d.note.as_deref().unwrap_or("not running")
        );
    }
    match &report.enrichment {
        None => {
            let _ = writeln!(out, "enrichment  off (no endpoint)");
        }
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
            let _ = writeln!(
                out,
                "enrichment  {} via {}: {counts}",
                if e.enabled { "on" } else { "disabled here" },
                e.endpoint
            );
        }
    }
    if let Some(d) = &report.documents {
        let _ = writeln!(
        out,

            "documents   {} in the store, {} from the pool, {} unreadable (as of the last search or sync)",
            d.store, d.pool, d.unreadable
        );
    }
    if let Some(v) = &report.vocabulary {
        let _ = writeln!(
            out,
            "vocabulary  {} merge candidate(s){}",
            v.candidates.len(),
            if v.apply {
                " (vocabApply: applied at the next search or sync)"
            } else {
                " (shadow: vocabApply is false, nothing written)"
            }
        );
        for c in &v.candidates {
            let _ = writeln!(out, "  {} → {}: {}", c.from, c.to, c.reason);
        }
    }
    for s in &report.sessions {
        let flight = s
            .in_flight
            .map(|(lo, hi)| format!(", in flight seqs {lo} to {hi}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}  v{}  {} completed, {} unarchived{flight}",
            s.session_id, s.generation, s.completed_turns, s.unarchived_turns
        );
        if let Some(e) = &s.error {
            let _ = writeln!(out, "    error: {e}");
        }
    }
    super::print_answer(&dsh_chapters::redact::echoed_text(&out));
    Ok(())
}

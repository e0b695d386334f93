use std::io::IsTerminal;
use std::path::Path;

use anyhow::Result;

use dsh_chapters::archive::{self, ArchiveReport, Reason, SessionReport};

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    /// Archive only this session.
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Why this archive runs.
    #[arg(long, value_enum, default_value = "manual")]
    reason: Reason,
    /// Print the report as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let now = dsh_chapters::time::rfc3339_utc(super::now_ms());
    let ctx = env.archive_context(&now);
    let bar = if std::io::stderr().is_terminal() && !args.json {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
        Some(bar)
    } else {
        None
    };
    let progress = |session: &str| {
        if let Some(bar) = &bar {
            bar.set_message(format!("archiving {session}"));
        }
    };
    let report = archive::archive_workspace(&ctx, args.session.as_deref(), args.reason, &progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report?;
    if args.json {
        super::print_json(&report)?;
    } else {
        print_text(&report);
    }
    for failure in &report.failures {
        eprintln!(
            "chapters: {}: {}",
            failure.session_dir.display(),
            failure.error
        );
    }
    if report.failures.is_empty() {
        Ok(())
    } else {
        Err(Reported.into())
    }
}

/// One line per archived session: what was signed, written, screened and redacted.
pub fn summary_line(s: &SessionReport) -> String {
    let redactions: u64 = s.redactions.values().sum();
    format!(
        "{}: {} turn(s) signed, {} archived into {} chapter(s), {} plan(s), {} new artifact(s); {} host-injected message(s) omitted, {} credential(s) redacted",
        s.session_id,
        s.turns_signed,
        s.turns_archived,
        s.chapters.len(),
        s.plans.len(),
        s.artifacts_written,
        s.omitted_injections,
        redactions
    )
}

fn print_text(report: &ArchiveReport) {
    for note in &report.notes {
        println!("note: {note}");
    }
    if report.sessions.is_empty() && report.failures.is_empty() {
        println!("no sessions found for this workspace");
        return;
    }
    for s in &report.sessions {
        println!("{}", summary_line(s));
        for c in s.chapters.iter().chain(&s.plans) {
            println!("  .dsh-chapters/{}/chapters/{c}", s.root_session_id);
        }
        if s.damage.is_some() {
            // The damage itself is said once, on stderr with the failures.
            println!("  stopped at damage in the log (below); the turns before it are archived");
        } else if let Some((lo, hi)) = s.in_flight {
            println!("  turn in flight (seqs {lo} to {hi}) left for a later archive");
        }
        for note in &s.notes {
            println!("  note: {note}");
        }
    }
    if report.chapters_written() == 0 && report.failures.is_empty() {
        println!("nothing new to archive");
    }
}

use std::io::IsTerminal;
use std::path::Path;

use anyhow::Result;

use dsh_chapters::archive::{self, ArchiveReport, Reason, SessionReport};
use dsh_chapters::redact::echoed_text;

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
    let mut report = report?;
    hint_failures(&mut report);
    // A damaged log's message may quote the bad line's value (a credential pasted where a
    // number belonged): the report is shown only through the rules.
    if args.json {
        let text = serde_json::to_string_pretty(&report)?;
        super::print_answer(&echoed_text(&format!("{text}\n")));
    } else {
        super::print_answer(&echoed_text(&report_text(&report)));
    }
    say_failures(&report);
    if report.failures.is_empty() {
        Ok(())
    } else {
        Err(Reported.into())
    }
}

/// Each failure's hint, from its cause (`hint.rs`, the one place hints are written).
pub fn hint_failures(report: &mut ArchiveReport) {
    for failure in &mut report.failures {
        failure.hint = failure
            .cause
            .as_deref()
            .and_then(|cause| super::hint::hint_of(cause));
    }
}

/// Each failed session on stderr: which session, where its log is, what happened; then what
/// to do, each hint once. Through the echo rules: a damaged log's message may quote a value.
pub fn say_failures(report: &ArchiveReport) {
    let mut hints: Vec<&str> = Vec::new();
    for failure in &report.failures {
        eprint!(
            "{}",
            echoed_text(&format!(
                "chapters: {} (log in {}): {}\n",
                failure.session_id,
                failure.session_dir.display(),
                failure.error
            ))
            .get()
        );
        if let Some(h) = failure.hint.as_deref() {
            if !hints.contains(&h) {
                hints.push(h);
            }
        }
    }
    for h in hints {
        eprint!("{}", echoed_text(&format!("hint: {h}\n")).get());
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

fn report_text(report: &ArchiveReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if report.sessions.is_empty() && report.failures.is_empty() {
        let _ = writeln!(out, "no sessions found for this workspace");
        return out;
    }
    for s in &report.sessions {
        let _ = writeln!(out, "{}", summary_line(s));
        for c in s.chapters.iter().chain(s.plans.iter()) {
            let _ = writeln!(out, "  .dsh-chapters/{}/chapters/{c}", s.root_session_id);
        }
        if s.damage.is_some() {
            // The damage itself is said once, on stderr with the failures.
            let _ = writeln!(
                out,
                "  stopped at damage in the log (below); the turns before it are archived"
            );
        } else if let Some((lo, hi)) = s.in_flight {
            let _ = writeln!(
                out,
                "  turn in flight (seqs {lo} to {hi}) left for a later archive"
            );
        }
        for note in &s.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    if report.chapters_written() == 0 && report.failures.is_empty() {
        let _ = writeln!(out, "nothing new to archive");
    }
    out
}

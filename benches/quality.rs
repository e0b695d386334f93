//! Composition quality on sessions with labelled task boundaries (issue 18, point 5):
//! boundary precision / recall / F1, chapters whose topics name their task, stoplisted
//! topics, for a sweep of `mergeThreshold` (τ). Deterministic; no timing.
//!
//! 1. Generated sessions: `QUALITY_SEEDS=N` (default 200) sessions of `QUALITY_TURNS`
//!    (default 40) turns.
//! 2. The real Claude Code sessions labelled by hand in `tests/it/fixtures/labelled/`
//!    (`QUALITY_REAL_DIR` for another copy of them), read as the archive reads a quiet log;
//!    the two held-out sets (the five, and six from another repository) are printed apart
//!    and left out of the chosen-on total.

use std::path::{Path, PathBuf};

use dsh_chapters::quality::{self, measure_real, sweep, HandLabels, Quality};
use dsh_chapters::session::reader::{LogItem, ReaderOptions, ResumePoint};
use dsh_chapters::source::claude_code::ClaudeReader;
use dsh_chapters::source::EventSource;
use dsh_chapters::turn::TurnAssembler;

const TAUS: [f64; 9] = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5];
fn main() {
    let seeds: u64 = std::env::var("QUALITY_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let turns: usize = std::env::var("QUALITY_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let redactor = dsh_chapters::redact::built_in().expect("built-in rules compile");
    let results = sweep(0..seeds, turns, &TAUS, 8000, 8000, redactor);
    println!("{seeds} sessions x {turns} turns (chapterLimit 8000, toolResultArtifactTokens 8000)");
    table(&results);

    let dir = std::env::var_os("QUALITY_REAL_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/labelled"),
        PathBuf::from,
    );
    let mut all = vec![Quality::default(); TAUS.len()];
    let mut held_out = vec![Quality::default(); TAUS.len()];
    for (set, names) in [
        ("tuned-on", quality::REAL_TUNED),
        ("added", quality::REAL_ADDED),
        ("added after the signals", quality::REAL_LATER),
        ("added after the brief follow-up", quality::REAL_NEWEST),
        ("held out", quality::REAL_HELD_OUT),
        (
            "held out, another repository: entireio/git-sync",
            quality::REAL_OTHER_REPO,
        ),
    ] {
        let mut total = vec![Quality::default(); TAUS.len()];
        let mut turns_read = 0;
        for name in names {
            let (turns, workspace) = read_quiet(&dir.join(format!("{name}.jsonl.zst")));
            turns_read += turns.len();
            let text = std::fs::read_to_string(dir.join(format!("{name}.labels"))).expect("labels");
            let labels = HandLabels::parse(&text).expect("labels parse");
            let got = measure_real(&turns, &labels, &workspace, &TAUS, 8000, 8000, redactor);
            // The held-out sessions stay out of the chosen-on total.
            let chosen_on = if names == quality::REAL_HELD_OUT || names == quality::REAL_OTHER_REPO
            {
                &mut held_out
            } else {
                &mut all
            };
            for ((t, a), q) in total.iter_mut().zip(chosen_on.iter_mut()).zip(&got) {
                t.add(q);
                a.add(q);
            }
        }
        println!();
        println!(
            "{} real sessions labelled by hand ({set}), {turns_read} turns ({})",
            names.len(),
            dir.display()
        );
        table(&total);
    }
    let chosen_on = quality::REAL_TUNED.len()
        + quality::REAL_ADDED.len()
        + quality::REAL_LATER.len()
        + quality::REAL_NEWEST.len();
    println!();
    println!("all {chosen_on} real sessions signals were chosen on");
    table(&all);
    for (a, q) in all.iter_mut().zip(&held_out) {
        a.add(q);
    }
    println!();
    println!(
        "all {} real sessions, the held out included",
        chosen_on + quality::REAL_HELD_OUT.len() + quality::REAL_OTHER_REPO.len()
    );
    table(&all);
}

fn table(results: &[Quality]) {
    println!("| τ | chapters | true boundaries | precision | recall | F1 | of them `chapterLimit` (true) | F1 of the topic decisions | topics name the task | stopword topics | returns with `continues` | wrong `continues` |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (tau, q) in TAUS.iter().zip(results) {
        println!(
            "| {tau} | {} | {} | {:.3} | {:.3} | **{:.3}** | {} ({}) | {:.3} | {:.3} | {:.3} | {}/{} | {} |",
            q.chapters,
            q.true_boundaries,
            q.precision(),
            q.recall(),
            q.f1(),
            q.size_boundaries,
            q.size_hits,
            q.topic_f1(),
            q.topic_hit(),
            q.stopword_topic_fraction(),
            q.returns_named,
            q.returns,
            q.wrong_continues
        );
    }
}

/// A Claude Code fixture's completed turns and workspace, read as the archive reads a log
/// quiet past `idleArchiveMs` (unpacked first: Claude Code writes plain `.jsonl`).
fn read_quiet(packed: &Path) -> (Vec<dsh_chapters::turn::CompletedTurn>, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("session.jsonl");
    let file = std::fs::File::open(packed).expect("fixture");
    std::fs::write(&path, zstd::decode_all(file).expect("zstd")).expect("unpack");
    let mut reader = ClaudeReader::open(
        &path,
        ResumePoint::default(),
        ReaderOptions::default(),
        true,
    )
    .expect("open")
    .with_idle_gap(Some(600_000));
    let (mut turns, mut cwd, mut asm) = (Vec::new(), None, TurnAssembler::new());
    while let Some(item) = reader.next_item().expect("no damage in a fixture") {
        match item {
            LogItem::Event(e) => turns.extend(asm.push(e)),
            LogItem::Header(h) => cwd = cwd.or(h.cwd),
        }
    }
    (turns, cwd.unwrap_or_default())
}

//! Composition quality on generated sessions with labelled task boundaries (issue 18,
//! point 5): boundary precision / recall / F1, chapters whose topics name their task,
//! stoplisted topics, for a sweep of `mergeThreshold` (τ). Deterministic; no timing.
//!
//! `QUALITY_SEEDS=N` (default 200) sessions of `QUALITY_TURNS` (default 40) turns.

use dsh_chapters::quality::sweep;

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
    let taus = [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5];
    let results = sweep(0..seeds, turns, &taus, 8000, 8000, redactor);
    println!("{seeds} sessions x {turns} turns (chapterLimit 8000, toolResultArtifactTokens 8000)");
    println!("| τ | chapters | true boundaries | precision | recall | F1 | topics name the task | stopword topics | returns with `continues` | wrong `continues` |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (tau, q) in taus.iter().zip(&results) {
        println!(
            "| {tau} | {} | {} | {:.3} | {:.3} | **{:.3}** | {:.3} | {:.3} | {}/{} | {} |",
            q.chapters,
            q.true_boundaries,
            q.precision(),
            q.recall(),
            q.f1(),
            q.topic_hit(),
            q.stopword_topic_fraction(),
            q.returns_named,
            q.returns,
            q.wrong_continues
        );
    }
}

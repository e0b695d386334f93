//! Composition quality through the real binary (issue 18): a generated session with
//! labelled tasks archives into chapters that follow its tasks, and a chapter that returns
//! to an earlier task says which chapter it continues.

use dsh_chapters::compose::{compose, ComposeConfig};
use dsh_chapters::quality::{self, measure_real, sign_turns, HandLabels, Quality};
use dsh_chapters::session::reader::{LogItem, ReaderOptions, ResumePoint};
use dsh_chapters::source::claude_code::ClaudeReader;
use dsh_chapters::source::EventSource;
use dsh_chapters::testkit::labelled::labelled_session;
use dsh_chapters::turn::{CompletedTurn, TurnAssembler};

/// `idleArchiveMs`'s default.
const IDLE_ARCHIVE_MS: u64 = 600_000;

use crate::support::Sandbox;

const ID: &str = "session-77777777-7777-4777-8777-777777777777";

fn frontmatter(text: &str) -> serde_json::Value {
    serde_saphyr::from_str(dsh_chapters::render::frontmatter_text(text).expect("frontmatter"))
        .expect("yaml")
}

#[test]
fn returns_to_an_earlier_task_name_the_chapter_they_continue() {
    let sb = Sandbox::new();
    let session = labelled_session(3, 30, &sb.ws_str());
    let specs: Vec<_> = session.iter().map(|t| t.spec.clone()).collect();
    sb.write_session(ID, 4, true, &specs);
    sb.ok(&["init"]);
    sb.ok(&["archive"]);

    let dir = sb.store().join(ID).join("chapters");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("chapters")
        .map(|e| {
            let e = e.expect("entry");
            let name = e.file_name().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(e.path()).expect("read");
            (name, text)
        })
        .filter(|(n, _)| n.ends_with(".md") && !n.starts_with("plan-"))
        .collect();
    files.sort();
    // number → the task most of its turns belong to
    let mut task_of = std::collections::BTreeMap::new();
    let mut continues = Vec::new();
    for (name, text) in &files {
        let number: u64 = name[..3].parse().expect("NNN");
        let fm = frontmatter(text);
        let mut votes = std::collections::BTreeMap::new();
        for t in fm["turns"].as_array().expect("turns") {
            let turn = t.as_u64().expect("turn") as usize;
            *votes.entry(session[turn].task).or_insert(0) += 1;
        }
        let task = votes.iter().max_by_key(|(_, n)| **n).map(|(t, _)| *t);
        task_of.insert(number, task);
        if let Some(n) = fm["continues"].as_u64() {
            continues.push((number, n));
        }
        assert!(fm["topics"]
            .as_array()
            .expect("topics")
            .iter()
            .all(|t| { !dsh_chapters::signature::is_stopword(t.as_str().expect("topic")) }));
    }
    assert!(!continues.is_empty(), "a return says so: {files:?}");
    for (number, earlier) in continues {
        assert!(earlier < number);
        assert_eq!(
            task_of[&number], task_of[&earlier],
            "chapter {number} continues {earlier}: the same task"
        );
    }
}

/// The labelled fixtures; `QUALITY_REAL_DIR` points at another copy (the uncut files, to
/// measure what cutting long strings changed).
fn labelled_dir() -> std::path::PathBuf {
    std::env::var_os("QUALITY_REAL_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures/labelled"),
        std::path::PathBuf::from,
    )
}

/// The first words of a turn's first conversation message, on one line.
fn prompt_head(turn: &CompletedTurn) -> String {
    let text = turn
        .events
        .iter()
        .filter_map(|e| e.user_message())
        .filter(|m| m.source.kind == "user")
        .map(|m| m.text.as_str())
        .next()
        .unwrap_or("");
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(60)
        .collect()
}

/// A real session read through the seam as the archive reads it, with its labels and the
/// workspace its paths are relative to.
fn real_session(name: &str) -> (Vec<CompletedTurn>, HandLabels, String) {
    // Claude Code writes plain `.jsonl`: the fixture is unpacked to one before reading.
    let packed = labelled_dir().join(format!("{name}.jsonl.zst"));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join(format!("{name}.jsonl"));
    let bytes = zstd::decode_all(std::fs::File::open(&packed).expect("fixture")).expect("zstd");
    std::fs::write(&path, bytes).expect("unpack");
    // Read as the archive reads a quiet log (`source::open` once the file is older than
    // `idleArchiveMs`): the answered exchange at its end is a finished turn, whatever the
    // fixture file's mtime.
    let options = ReaderOptions::default();
    let mut reader = ClaudeReader::open(&path, ResumePoint::default(), options, true)
        .expect("open")
        .with_idle_gap(Some(IDLE_ARCHIVE_MS));
    let mut cwd = None;
    let mut asm = TurnAssembler::new();
    let mut turns = Vec::new();
    while let Some(item) = reader.next_item().expect("no damage in a fixture") {
        match item {
            LogItem::Event(e) => turns.extend(asm.push(e)),
            LogItem::Header(h) => cwd = cwd.or(h.cwd),
        }
    }
    let cwd = cwd.expect("a cwd");
    let text =
        std::fs::read_to_string(labelled_dir().join(format!("{name}.labels"))).expect("labels");
    let labels = HandLabels::parse(&text).expect("labels parse");
    (turns, labels, cwd)
}

/// The labels still name the turns the reader assembles: one per turn, each quoting the
/// start of its turn's prompt.
fn check_labels(name: &str, turns: &[CompletedTurn], labels: &HandLabels) {
    assert_eq!(labels.turns.len(), turns.len(), "{name}: a label per turn");
    for (i, ((_, quoted), turn)) in labels.turns.iter().zip(turns).enumerate() {
        assert!(
            prompt_head(turn).starts_with(quoted.as_str()),
            "{name} turn {}: labelled {quoted:?}, read {:?}",
            i + 1,
            prompt_head(turn)
        );
    }
}

/// Measure `names` at each τ of `taus`, printing what composition drew at the default τ
/// for a person to compare with the labels, and checking the figures are deterministic.
fn measure_sessions(names: &[&str], taus: &[f64]) -> Vec<Quality> {
    let redactor = dsh_chapters::redact::built_in().expect("built-in rules compile");
    let mut total = vec![Quality::default(); taus.len()];
    for name in names {
        let (turns, labels, ws) = real_session(name);
        check_labels(name, &turns, &labels);
        let got = measure_real(&turns, &labels, &ws, taus, 8000, 8000, redactor);
        let sigs = sign_turns(&turns, &ws, redactor, 8000);
        let cfg = ComposeConfig {
            merge_threshold: 0.25,
            chapter_limit: 8000,
        };
        let (lo, hi) = (
            sigs[0].seqs[0],
            *sigs.last().and_then(|s| s.seqs.last()).expect("seqs"),
        );
        let chapters = compose("q", &sigs, lo, hi, &cfg).expect("composes");
        eprintln!("== {name}");
        for c in &chapters {
            let members: Vec<String> = c
                .members
                .iter()
                .zip(&c.decisions)
                .map(|(m, d)| {
                    format!(
                        "{}{}:{:?}{:.2}",
                        m + 1,
                        labels.tasks[labels.turns[*m].0]
                            .0
                            .chars()
                            .next()
                            .unwrap_or('?'),
                        d.rule,
                        d.score
                    )
                })
                .collect();
            eprintln!("  [{}] topics {:?}", members.join(" "), c.topics);
        }
        print_wrong_boundaries(&turns, &labels, &chapters);
        for (tau, q) in taus.iter().zip(&got) {
            eprintln!(
                "  tau {tau}: chapters {} true {} predicted {} hits {} F1 {:.3} topic-hit {:.3}",
                q.chapters,
                q.true_boundaries,
                q.predicted_boundaries,
                q.hits,
                q.f1(),
                q.topic_hit()
            );
        }
        for (t, q) in total.iter_mut().zip(&got) {
            t.add(q);
        }
        assert_eq!(
            got,
            measure_real(&turns, &labels, &ws, taus, 8000, 8000, redactor),
            "deterministic"
        );
    }
    total
}

/// Every false opening and every missed boundary at the default τ, with the prompts of the
/// turn before and of the turn, the rule and the score: what to study before a new signal.
fn print_wrong_boundaries(
    turns: &[CompletedTurn],
    labels: &HandLabels,
    chapters: &[dsh_chapters::compose::ChapterSpan],
) {
    let mut opened = vec![None; turns.len()];
    for c in chapters.iter().skip(1) {
        if let (Some(&m), Some(d)) = (c.members.first(), c.decisions.first()) {
            opened[m] = Some((d.rule, d.score));
        }
    }
    let task = |i: usize| labels.turns[i].0;
    for i in 1..turns.len() {
        let truth = task(i) != task(i - 1);
        let what = match (truth, opened[i]) {
            (false, Some((rule, score))) => format!("false opening ({rule:?} {score:.2})"),
            (true, None) => "missed boundary".to_owned(),
            _ => continue,
        };
        eprintln!(
            "    turn {}: {what}\n      before: {:?}\n      turn:   {:?}",
            i + 1,
            prompt_head(&turns[i - 1]),
            prompt_head(&turns[i])
        );
    }
}

fn print_totals(set: &str, taus: &[f64], total: &[Quality]) {
    for (tau, q) in taus.iter().zip(total) {
        eprintln!(
            "{set}, tau {tau}: chapters {} true {} predicted {} hits {} P {:.3} R {:.3} F1 {:.3} topic-hit {:.3} stop {} size-splits {} (true {}) topic-F1 {:.3}",
            q.chapters, q.true_boundaries, q.predicted_boundaries, q.hits,
            q.precision(), q.recall(), q.f1(), q.topic_hit(), q.stopword_topics,
            q.size_boundaries, q.size_hits, q.topic_f1()
        );
    }
}

/// Issue 18, point 5(b): composition on real Claude Code sessions labelled by hand draws
/// the chapters a person would — boundary F1 at the default τ toward the goal (0.85), no
/// stopword topic — on the sessions it was tuned on, on the ones labelled after and on the
/// six held out from another repository (entireio/git-sync), and does so deterministically.
#[test]
fn real_labelled_sessions_meet_the_boundary_goal() {
    let taus = [0.15, 0.2, 0.25, 0.3, 0.35];
    let tuned = measure_sessions(quality::REAL_TUNED, &taus);
    let added = measure_sessions(quality::REAL_ADDED, &taus);
    let later = measure_sessions(quality::REAL_LATER, &taus);
    let newest = measure_sessions(quality::REAL_NEWEST, &taus);
    let held_out = measure_sessions(quality::REAL_HELD_OUT, &taus);
    let other_repo = measure_sessions(quality::REAL_OTHER_REPO, &taus);
    let mut all = tuned.clone();
    for (a, q) in all.iter_mut().zip(&added) {
        a.add(q);
    }
    let mut eleven = all.clone();
    for (a, q) in eleven.iter_mut().zip(&later) {
        a.add(q);
    }
    let mut fourteen = eleven.clone();
    for (a, q) in fourteen.iter_mut().zip(&newest) {
        a.add(q);
    }
    print_totals("tuned-on five", &taus, &tuned);
    print_totals("added three", &taus, &added);
    print_totals("all eight", &taus, &all);
    print_totals("added after the signals", &taus, &later);
    print_totals("all eleven", &taus, &eleven);
    print_totals("added after the brief follow-up", &taus, &newest);
    print_totals("all fourteen", &taus, &fourteen);
    let mut nineteen = fourteen.clone();
    for (a, q) in nineteen.iter_mut().zip(&held_out) {
        a.add(q);
    }
    print_totals("held out (h18d)", &taus, &held_out);
    print_totals("all nineteen", &taus, &nineteen);
    print_totals("held out, another repository (h18e)", &taus, &other_repo);
    // τ = 0.25, the default. Measured (docs/benchmarks.md, "Composition quality"): the five
    // 0.651, the three added 0.833, all eight 0.691, the three added after the signals
    // 0.250 (one true boundary, six false openings), all eleven 0.635, the three added
    // after the brief follow-up 0.286 (four true boundaries, one found; two false
    // openings), all fourteen 0.600, the five held out 0.167 (six true boundaries, two
    // found; sixteen false openings), all nineteen 0.489, the six held out from another
    // repository 0.567 (22 true boundaries, 17 found; 21 false openings) — the goal 0.85 is
    // not met.
    let (q_later, q_eleven) = (&later[2], &eleven[2]);
    assert_eq!(nineteen[2].stopword_topics, 0, "{:?}", nineteen[2]);
    assert_eq!(other_repo[2].stopword_topics, 0, "{:?}", other_repo[2]);
    assert_eq!(q_later.recall(), 1.0, "{q_later:?}");
    for (set, q, floor) in [
        ("the tuned-on five", &tuned[2], 0.65),
        ("the added three", &added[2], 0.83),
        ("all eight", &all[2], 0.69),
        ("the three added after the signals", q_later, 0.25),
        ("all eleven", q_eleven, 0.63),
        (
            "the three added after the brief follow-up",
            &newest[2],
            0.28,
        ),
        ("all fourteen", &fourteen[2], 0.59),
        ("the five held out", &held_out[2], 0.16),
        ("all nineteen", &nineteen[2], 0.48),
        (
            "the six held out from another repository",
            &other_repo[2],
            0.56,
        ),
    ] {
        assert!(
            q.f1() >= floor,
            "{set}: boundary F1 {:.3} below {floor}: {q:?}",
            q.f1()
        );
    }
}

//! Greedy sequential composition of signed turns into chapter spans (record §4.2–4.4),
//! with the bidirectional completeness guard. Pure. OWNER: compose helper.
//!
//! Each turn is scored against the open chapter as the best of three views — the
//! chapter's running union, its first member and its last member: the union catches a
//! chapter that has drifted gradually, first/last catch a turn that resumes the
//! chapter's opening or continues its latest step without being diluted by the union.
//!
//! `chapter_limit` is soft (measured on real sessions, issue 18): past it a chapter still
//! takes a turn that clearly continues it — scored at least [`OVERFLOW_SCORE`], or one whose
//! person named no task — up to [`OVERFLOW_FACTOR`] times the limit; a weaker on-topic turn
//! opens a new chapter (`SizeLimit`). Real turns are big (a median of ~1,500 estimated
//! tokens), so a hard limit cut most real tasks of more than four or five turns.
//!
//! A brief follow-up — the person's words hold at most [`BRIEF_TERMS`] terms, and it shares
//! something with the chapter — joins at a lower bar, [`BRIEF_FACTOR`] times τ
//! (`BriefFollowUp`): a person who opens a new task
//! says what it is, while a short question about the work at hand (`does this version
//! write to the v1 branch?`) shares little with the chapter and still continues it
//! (measured on the real labelled sessions, issue 18).
//!
//! A turn whose agent touched no path and ran no command — answered from the conversation
//! alone — after a chapter that did tool work discusses that work: below τ it still joins
//! (`Discussion`), size permitting. New work makes the agent read or run something; a
//! question about the chapter's work (`would this also have been an issue with …?`) does
//! not (measured on the real labelled sessions, issue 18: of the topic changes composition
//! drew inside one task, 6 of 17 were such turns, of the true ones none). A conversation
//! with no tool work at all still changes topic by its words.
//!
//! A turn whose agent ran `git commit` or `git push` closes its task: the turn after it
//! opens a new chapter (`AfterCommit`), whatever it shares with the chapter.
//!
//! A turn bigger than `chapter_limit` on its own still forms a chapter (it is finished
//! work, never dropped): it opens with `SizeLimit` when the chapter before would have
//! taken it on topic, `TopicChange` otherwise, and the turn after it opens anew the same way.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::signature::{fold_key, Signature};

#[derive(Debug, Clone, PartialEq)]
pub struct ComposeConfig {
    /// τ: merge when overlap ≥ this.
    pub merge_threshold: f64,
    /// Max chapter size in estimated tokens.
    pub chapter_limit: u64,
}

/// Which rule decided a turn's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// The first turn of the span opens the first chapter.
    Open,
    /// overlap ≥ τ, size under the limit.
    Overlap,
    /// Same primary path, size under the limit.
    PrimaryPath,
    /// The person's words carry at most [`NO_SIGNAL_TERMS`] term (`ok`, `yes please`, `it
    /// worked!`, `can you fix it?`, or no text at all), whatever the agent's tool calls then
    /// touched: the person named no new task, so the turn stays with the chapter (size
    /// permitting). A follow-up that only answers or approves shares few words with the
    /// turn before, but opens nothing. Also a turn after a chapter that names nothing at
    /// all (no path, command nor term): there is no task to change from.
    NoSignal,
    /// Below τ, but the person's words hold at most [`BRIEF_TERMS`] terms, the turn shares
    /// a path, command or term with the chapter and its score reaches [`BRIEF_FACTOR`]
    /// times τ: a brief follow-up on the chapter's work, size permitting.
    BriefFollowUp,
    /// Below τ, but the turn's agent touched no path and ran no command while the chapter
    /// holds a path or command: it answered from the conversation, a discussion of the
    /// chapter's work, size permitting.
    Discussion,
    /// Below τ and no primary match: a new chapter.
    TopicChange,
    /// Would exceed `chapterLimit` (and it is not a clear continuation, or the chapter
    /// would exceed [`OVERFLOW_FACTOR`] times it): a new chapter.
    SizeLimit,
    /// The turn before ran `git commit` or `git push`: its task is closed, a new chapter.
    AfterCommit,
    /// On topic with the chapter before it, which an earlier archive had already written:
    /// chapters are append-only, so the turn opens a new one.
    ArchiveBoundary,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub turn: u64,
    pub rule: Rule,
    pub score: f64,
}

/// One chapter to write: a contiguous seq range of whole turns.
#[derive(Debug, Clone, PartialEq)]
pub struct ChapterSpan {
    pub seq_lo: u64,
    pub seq_hi: u64,
    /// Indices into the input signatures.
    pub members: Vec<usize>,
    pub decisions: Vec<Decision>,
    /// Deterministic topics: the running signature's top terms/path stems.
    pub topics: Vec<String>,
    pub size: u64,
}

/// Seq ranges as a person reads them: `3 to 4, 7 to 9` (never Rust's `[(3, 4), (7, 9)]`).
fn seq_ranges(ranges: &[(u64, u64)]) -> String {
    ranges
        .iter()
        .map(|(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo} to {hi}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ComposeError {
    #[error("composition would drop completed seqs {} of session {session_id} (span seqs {span_lo} to {span_hi}); refusing to archive", seq_ranges(.missing))]
    Gap {
        session_id: String,
        span_lo: u64,
        span_hi: u64,
        missing: Vec<(u64, u64)>,
    },
    #[error("composition overlaps itself at seqs {} of session {session_id}; refusing to archive", seq_ranges(.overlap))]
    Overlap {
        session_id: String,
        overlap: Vec<(u64, u64)>,
    },
}

/// Topics recorded per chapter.
pub const MAX_TOPICS: usize = 6;
/// A turn whose person's words hold at most this many terms names no task
/// ([`Rule::NoSignal`]): one word (`fix it`, `docs?`) is an answer, not a request. Two
/// measured worse on generated sessions (an opening `Next task: X` can hold two).
pub const NO_SIGNAL_TERMS: usize = 1;
/// A turn whose person's words hold at most this many terms is brief: it joins at
/// [`BRIEF_FACTOR`] times τ ([`Rule::BriefFollowUp`]). Measured on the real labelled
/// sessions: of the topic changes composition drew inside one task, 8 of 20 had at most four
/// terms, of the true ones none; 3 and 4 draw the same real chapters, 4 merges generated
/// openings (`Can you look at X?`) into the task before (`docs/benchmarks.md`).
pub const BRIEF_TERMS: usize = 3;
/// The share of τ a brief turn's score must reach (0.15 at τ 0.25), sharing at least one
/// path, command or term with the chapter: below it even a brief turn names another task.
/// Measured: 0.4–0.6 draw the same chapters, 0.7 keeps fewer real follow-ups.
pub const BRIEF_FACTOR: f64 = 0.6;
/// Past `chapterLimit`, a turn scored at least this still joins: it clearly continues the
/// chapter (measured: 0.6 and 0.7 draw the same real chapters, 0.5 merges true
/// boundaries, 0.8 cuts more tasks).
pub const OVERFLOW_SCORE: f64 = 0.6;
/// The hard bound: no chapter of several turns grows past this many times `chapterLimit`.
pub const OVERFLOW_FACTOR: u64 = 3;
/// Command families that close a task when the agent runs them.
const CLOSING_COMMANDS: &[&str] = &["git commit", "git push"];
/// Below this many term topics, file stems of the chapter's top paths fill in.
const MIN_TERM_TOPICS: usize = 3;

/// Compose `sigs` (in seq order, one per completed turn) covering `[span_lo, span_hi]`.
/// The result's ranges must cover the span contiguously or an error names the seqs.
///
/// Signatures are placed by their seq range (input order does not matter; `members`
/// index the input and run in seq order). A signature with no seqs claims nothing and
/// is left out. Seqs no signature covers are absorbed into the chapter before them (the
/// first chapter for a hole before the first signature): a wider range, never a new
/// chapter. Signatures overlapping each other or the span's outside are refused.
pub fn compose(
    session_id: &str,
    sigs: &[Signature],
    span_lo: u64,
    span_hi: u64,
    cfg: &ComposeConfig,
) -> Result<Vec<ChapterSpan>, ComposeError> {
    let placed = place(session_id, sigs, span_lo, span_hi)?;
    // One greedy merge: the online form, fed the placed signatures in seq order.
    let mut online = Online::new(session_id, cfg.clone(), span_lo, Vec::new());
    let mut chapters: Vec<ChapterSpan> = Vec::new();
    for p in &placed {
        chapters.extend(online.push(sigs[p.index].clone())?);
    }
    chapters.extend(online.finish(span_hi)?);
    // The online form numbers members in push order; here they index the input.
    for c in &mut chapters {
        for m in &mut c.members {
            *m = placed[*m].index;
        }
    }
    let ranges: Vec<(u64, u64)> = chapters.iter().map(|c| (c.seq_lo, c.seq_hi)).collect();
    check_coverage(session_id, &ranges, span_lo, span_hi)?;
    Ok(chapters)
}

/// Why `next` opens a chapter after `prior` (the members of the chapter written before it,
/// by an earlier archive): the decision an uninterrupted composition of `prior` then
/// `next` records — so a chapter's recorded rule never depends on where an archive run
/// started (a re-run after a crash writes the same bytes) — or `ArchiveBoundary` when that
/// composition would have merged them. `None` without a prior chapter.
pub fn opening_decision(
    session_id: &str,
    prior: &[Signature],
    next: &Signature,
    cfg: &ComposeConfig,
) -> Option<Decision> {
    let lo = *prior.first()?.seqs.first()?;
    let hi = *next.seqs.last()?;
    let mut all = prior.to_vec();
    all.push(next.clone());
    let chapters = compose(session_id, &all, lo, hi, cfg).ok()?;
    let last = chapters.last()?;
    let decision = last.decisions.iter().find(|d| d.turn == next.turn)?.clone();
    let merged = last.members.len() > 1
        && matches!(
            decision.rule,
            Rule::Overlap
                | Rule::PrimaryPath
                | Rule::NoSignal
                | Rule::BriefFollowUp
                | Rule::Discussion
        );
    Some(if merged {
        Decision {
            rule: Rule::ArchiveBoundary,
            ..decision
        }
    } else {
        decision
    })
}

/// The rule that places a turn after the open chapter, and whether it joins it: not after
/// a commit, on topic (overlap ≥ τ, else the same primary path, else a turn whose person
/// named no task, a brief follow-up or a discussion) and the chapter with it under the
/// limit — or over it but within [`OVERFLOW_FACTOR`] times it for a turn that clearly
/// continues the chapter.
fn decide(
    cfg: &ComposeConfig,
    turn: u64,
    score: f64,
    incoming: Incoming,
    primary_matches: impl FnOnce() -> bool,
    size_with_it: u64,
) -> (Decision, bool) {
    let overlaps = score >= cfg.merge_threshold;
    let primary = !overlaps && primary_matches();
    let silent = incoming.no_signal || incoming.chapter_names_nothing;
    let brief =
        !overlaps && !primary && incoming.brief && score >= cfg.merge_threshold * BRIEF_FACTOR;
    let discussion = !overlaps && !primary && !silent && !brief && incoming.discussion;
    let on_topic = overlaps || primary || silent || brief || discussion;
    let clear = score >= OVERFLOW_SCORE || silent;
    let fits = size_with_it <= cfg.chapter_limit
        || (clear && size_with_it <= cfg.chapter_limit.saturating_mul(OVERFLOW_FACTOR));
    let rule = match (on_topic, fits) {
        _ if incoming.after_commit => Rule::AfterCommit,
        (true, true) if overlaps => Rule::Overlap,
        (true, true) if primary => Rule::PrimaryPath,
        (true, true) if silent => Rule::NoSignal,
        (true, true) if brief => Rule::BriefFollowUp,
        (true, true) => Rule::Discussion,
        (true, false) => Rule::SizeLimit,
        (false, _) => Rule::TopicChange,
    };
    let decision = Decision {
        turn,
        rule,
        score: round4(score),
    };
    (decision, on_topic && fits && !incoming.after_commit)
}

/// What [`decide`] knows of the incoming turn besides its score.
#[derive(Debug, Clone, Copy)]
struct Incoming {
    /// The person named no task ([`NO_SIGNAL_TERMS`]).
    no_signal: bool,
    /// The person's words are brief ([`BRIEF_TERMS`]) and the turn shares a path, command
    /// or term with the chapter.
    brief: bool,
    /// The open chapter's last turn ran a closing command ([`CLOSING_COMMANDS`]).
    after_commit: bool,
    /// The open chapter holds no path, command nor term (an empty prompt, a bare
    /// interrupted turn): there is no task to change from.
    chapter_names_nothing: bool,
    /// The turn's agent touched no path and ran no command, and the chapter holds a path or
    /// a command ([`Rule::Discussion`]).
    discussion: bool,
}

/// Whether `sig`'s agent committed or pushed: the task it worked on is closed.
fn closes_task(sig: &Signature) -> bool {
    sig.commands
        .iter()
        .any(|c| CLOSING_COMMANDS.contains(&c.as_str()))
}

/// The one greedy merge, one signature at a time, for an archive that signs, composes and
/// renders in one pass over the log: [`Online::push`] returns the chapter a turn closes
/// (the turn opens the next), [`Online::finish`] the last one, keeping only the open
/// chapter — memory is one chapter whatever the span. [`compose`] is this form fed a
/// whole span's signatures in seq order.
pub struct Online {
    session_id: String,
    cfg: ComposeConfig,
    span_lo: u64,
    /// The chapter written before the span (by an earlier archive), for the first
    /// chapter's opening decision; taken at the first push.
    prior: Option<Vec<Signature>>,
    open: Option<OpenChapter>,
    /// Signatures placed so far (members are numbered in push order).
    placed: usize,
    /// The highest seq claimed so far, to refuse overlaps as [`compose`] does.
    reach: Option<u64>,
}

struct OpenChapter {
    sigs: Vec<Signature>,
    members: Vec<usize>,
    decisions: Vec<Decision>,
    seq_lo: u64,
    seq_hi: u64,
    paths: BTreeSet<String>,
    commands: BTreeSet<String>,
    terms: BTreeSet<String>,
    /// The first and the last member's term keys ([`Features`]' `terms`), kept: every
    /// push scores against both.
    first_terms: BTreeSet<String>,
    last_terms: BTreeSet<String>,
    size: u64,
}

impl OpenChapter {
    /// `terms`: `sig`'s term keys (its [`Features`]' `terms`).
    fn open(
        sig: Signature,
        terms: BTreeSet<String>,
        index: usize,
        lo: u64,
        hi: u64,
        decision: Decision,
    ) -> Self {
        let mut c = OpenChapter {
            sigs: Vec::new(),
            members: Vec::new(),
            decisions: Vec::new(),
            seq_lo: lo,
            seq_hi: hi,
            paths: BTreeSet::new(),
            commands: BTreeSet::new(),
            terms: BTreeSet::new(),
            first_terms: terms.clone(),
            last_terms: BTreeSet::new(),
            size: 0,
        };
        c.add(sig, terms, index, hi, decision);
        c
    }

    /// `terms`: `sig`'s term keys (its [`Features`]' `terms`).
    fn add(
        &mut self,
        sig: Signature,
        terms: BTreeSet<String>,
        index: usize,
        hi: u64,
        decision: Decision,
    ) {
        self.paths.extend(sig.paths.iter().cloned());
        self.commands.extend(sig.commands.iter().cloned());
        self.terms.extend(terms.iter().cloned());
        self.last_terms = terms;
        self.size = self.size.saturating_add(sig.size);
        self.seq_hi = hi;
        self.members.push(index);
        self.decisions.push(decision);
        self.sigs.push(sig);
    }

    /// The best of the views: overlap with the running union, the first and the last
    /// member, and the share of `incoming` the union holds.
    fn score(&self, incoming: &Features<'_>) -> f64 {
        let paths: BTreeSet<&str> = self.paths.iter().map(String::as_str).collect();
        let commands: BTreeSet<&str> = self.commands.iter().map(String::as_str).collect();
        let first = Features::with_terms(&self.sigs[0], &self.first_terms);
        let last = Features::with_terms(
            self.sigs.last().expect("an open chapter has a member"),
            &self.last_terms,
        );
        score_views((&paths, &commands, &self.terms), &first, &last, incoming)
    }

    /// Whether `incoming` holds a path, command or term key the chapter holds: a brief turn
    /// that shares nothing is no follow-up (the score alone gives a turn of a few words a
    /// floor, [`containment`]'s `+ 1`).
    fn shares_any(&self, incoming: &Features<'_>) -> bool {
        incoming.paths.iter().any(|p| self.paths.contains(*p))
            || incoming.commands.iter().any(|c| self.commands.contains(*c))
            || incoming.terms.iter().any(|t| self.terms.contains(t))
    }

    /// Whether `incoming`'s primary path names the primary of the first or last member.
    fn primary_matches(&self, incoming: &Features<'_>) -> bool {
        let Some(theirs) = incoming.primary else {
            return false;
        };
        let first = &self.sigs[0];
        let last = self.sigs.last().expect("an open chapter has a member");
        [first, last]
            .iter()
            .filter_map(|s| s.paths.first())
            .any(|ours| same_file(ours, theirs))
    }

    fn close(self) -> ChapterSpan {
        let local: Vec<usize> = (0..self.sigs.len()).collect();
        ChapterSpan {
            seq_lo: self.seq_lo,
            seq_hi: self.seq_hi,
            topics: topics(&local, &self.sigs),
            members: self.members,
            decisions: self.decisions,
            size: self.size,
        }
    }
}

impl Online {
    /// Compose the span starting at `span_lo`; `prior` holds the signatures of the chapter
    /// an earlier archive wrote just before it (empty when none).
    pub fn new(session_id: &str, cfg: ComposeConfig, span_lo: u64, prior: Vec<Signature>) -> Self {
        Online {
            session_id: session_id.to_owned(),
            cfg,
            span_lo,
            prior: (!prior.is_empty()).then_some(prior),
            open: None,
            placed: 0,
            reach: None,
        }
    }

    /// Start the span at `span_lo` instead: before the first push only (a renumbered log's
    /// first new seq is learned from the log).
    pub fn restart_at(&mut self, span_lo: u64) {
        debug_assert!(
            self.placed == 0,
            "the span restarts before any turn is placed"
        );
        self.span_lo = span_lo;
    }

    /// Place the next completed turn's signature (seq order). Returns the chapter it
    /// closed, if it opens a new one. A signature with no seqs claims nothing and is left
    /// out; one that overlaps an earlier one or starts before the span is refused.
    pub fn push(&mut self, sig: Signature) -> Result<Option<ChapterSpan>, ComposeError> {
        let Some((lo, hi)) = seq_range(&sig) else {
            return Ok(None);
        };
        let mut bad = Vec::new();
        if lo < self.span_lo {
            bad.push((lo, hi.min(self.span_lo.saturating_sub(1))));
        }
        if let Some(r) = self.reach.filter(|&r| lo <= r) {
            bad.push((lo, hi.min(r)));
        }
        if !bad.is_empty() {
            return Err(ComposeError::Overlap {
                session_id: self.session_id.clone(),
                overlap: bad,
            });
        }
        self.reach = Some(self.reach.map_or(hi, |r| r.max(hi)));
        let index = self.placed;
        self.placed += 1;

        let Some(open) = self.open.as_mut() else {
            let opening = self
                .prior
                .take()
                .and_then(|prior| opening_decision(&self.session_id, &prior, &sig, &self.cfg))
                .unwrap_or(Decision {
                    turn: sig.turn,
                    rule: Rule::Open,
                    score: 0.0,
                });
            // A hole before the first signature belongs to the first chapter.
            let terms = term_keys(&sig);
            self.open = Some(OpenChapter::open(
                sig,
                terms,
                index,
                lo.min(self.span_lo),
                hi,
                opening,
            ));
            return Ok(None);
        };
        let incoming = Features::of(&sig);
        let score = open.score(&incoming);
        let after_commit = open.sigs.last().is_some_and(closes_task);
        let (decision, merge) = decide(
            &self.cfg,
            sig.turn,
            score,
            Incoming {
                no_signal: incoming.names_nothing,
                brief: incoming.brief && open.shares_any(&incoming),
                after_commit,
                chapter_names_nothing: open.paths.is_empty()
                    && open.commands.is_empty()
                    && open.terms.is_empty(),
                discussion: incoming.paths.is_empty()
                    && incoming.commands.is_empty()
                    && !(open.paths.is_empty() && open.commands.is_empty()),
            },
            || open.primary_matches(&incoming),
            open.size.saturating_add(incoming.size),
        );
        // Moved whole: its borrows of `sig` end here.
        let Features { terms, .. } = { incoming };
        let terms = terms.into_owned();
        if merge {
            open.add(sig, terms, index, hi, decision);
            return Ok(None);
        }
        let next = OpenChapter::open(sig, terms, index, lo, hi, decision);
        let mut closed = std::mem::replace(open, next);
        // A hole between two signatures belongs to the chapter before it.
        closed.seq_hi = closed.seq_hi.max(lo.saturating_sub(1));
        Ok(Some(closed.close()))
    }

    /// The last chapter, widened to `span_hi`; the span must be covered (else the error
    /// names the seqs, as [`compose`]'s guard does).
    pub fn finish(self, span_hi: u64) -> Result<Option<ChapterSpan>, ComposeError> {
        let Some(mut open) = self.open else {
            check_coverage(&self.session_id, &[], self.span_lo, span_hi)?;
            return Ok(None);
        };
        if self.reach.is_some_and(|r| r > span_hi) {
            return Err(ComposeError::Overlap {
                session_id: self.session_id,
                overlap: vec![(span_hi.saturating_add(1), self.reach.unwrap_or(span_hi))],
            });
        }
        open.seq_hi = open.seq_hi.max(span_hi);
        Ok(Some(open.close()))
    }
}

/// Topics two chapters must share for one to continue the other.
const CONTINUES_MIN_SHARED: usize = 2;

/// The earlier chapter `span` returns to: among `earlier` (number, topics) of the same
/// session tree, the latest that shares at least two of its topics (by folded key) — a
/// return to a task after another, or the rest of a task a size limit cut. `None` for the
/// chapter that opens a session (`Open`) and for one whose turns merged into nothing
/// earlier. Topics are compared as written (stored chapters keep theirs).
pub fn continues(span: &ChapterSpan, earlier: &EarlierTopics) -> Option<u32> {
    if span.decisions.first().is_none_or(|d| d.rule == Rule::Open) {
        return None;
    }
    let mine: BTreeSet<u32> = span
        .topics
        .iter()
        .filter_map(|t| earlier.topics.get(&fold_key(t)))
        .collect();
    // Latest first: the first that shares enough is the answer. Each of my topics lists
    // the chapters that have it in (number, push) order, in each of the index's two runs;
    // walking those lists together from their ends meets the chapters in the same order as
    // a walk over every chapter would, but only the chapters that share a topic at all. A
    // chapter is in one of a topic's two lists, so the lists ending in it count its topics.
    let runs = [earlier.merged.as_slice(), earlier.recent.as_slice()];
    let mut lists: Vec<&[Entry]> = mine
        .iter()
        .flat_map(|&topic| runs.map(|run| of_topic(run, topic)))
        .filter(|list| !list.is_empty())
        .collect();
    loop {
        let latest = lists
            .iter()
            .filter_map(|l| l.last())
            .map(|e| earlier.chapter(e))
            .max()?;
        let mut shared = 0;
        for list in &mut lists {
            if let Some((last, rest)) = list.split_last() {
                if earlier.chapter(last) == latest {
                    shared += 1;
                    *list = rest;
                }
            }
        }
        if shared >= CONTINUES_MIN_SHARED {
            return Some(latest.0);
        }
    }
}

/// One (topic, chapter) pair of [`EarlierTopics`]: the topic's index and the chapter's push
/// order (its number is `numbers[order]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    topic: u32,
    order: u32,
}

/// The entries of `topic` in a run sorted by topic.
fn of_topic(run: &[Entry], topic: u32) -> &[Entry] {
    let from = run.partition_point(|e| e.topic < topic);
    let to = from + run[from..].partition_point(|e| e.topic == topic);
    &run[from..to]
}

/// Entries [`EarlierTopics`] gathers before it merges them into its sorted run.
const RECENT_RUN: usize = 256;
/// Entries the merged run takes room for at its first merge (see `names::NameList` on why
/// what grows with the session reserves address space).
const MERGED_RESERVE: usize = crate::names::GROWING_RESERVE / std::mem::size_of::<Entry>();

/// The chapters of a session tree so far, by folded topic: for each topic, the chapters
/// that have it as (number, order pushed), sorted. A session of thousands of chapters asks
/// this once per new chapter, so folding every earlier chapter's topics each time (and
/// then comparing with every earlier chapter) made an archive quadratic; a topic's lists
/// hold only the chapters that share it.
///
/// It is what an archive holds that grows with the session, so it is flat: each distinct
/// topic once (in one text, [`TopicTable`]), each chapter's number once, and 8 bytes per (topic, chapter) in
/// two sorted runs — the merged one and the few pushed since — that are a topic's lists as
/// slices. A list per topic was thousands of small blocks, allocated and grown between the
/// renderer's large transient ones, which kept its heap from shrinking: measured, that
/// index cost ~0.8 MiB of peak RSS at 8,000 turns, 1.4 times its bytes.
#[derive(Debug, Default, Clone)]
pub struct EarlierTopics {
    /// Each folded topic's index.
    topics: TopicTable,
    /// Each chapter's number, by push order.
    numbers: Vec<u32>,
    /// Sorted by (topic, number, order).
    merged: Vec<Entry>,
    /// Sorted alike; merged into `merged` when it holds [`RECENT_RUN`] entries.
    recent: Vec<Entry>,
}

impl EarlierTopics {
    /// A chapter as the lists order it: (number, push order).
    fn chapter(&self, entry: &Entry) -> (u32, u32) {
        (self.numbers[entry.order as usize], entry.order)
    }

    fn sort_key(&self, entry: &Entry) -> (u32, u32, u32) {
        let (number, order) = self.chapter(entry);
        (entry.topic, number, order)
    }

    pub fn push(&mut self, number: u32, topics: &[String]) {
        let order = u32::try_from(self.numbers.len()).unwrap_or(u32::MAX);
        self.numbers.push(number);
        for topic in topics {
            let topic = self.topics.intern(&fold_key(topic));
            let entry = Entry { topic, order };
            let key = self.sort_key(&entry);
            // A topic twice (or two that fold alike) is one entry.
            if let Err(at) = self.recent.binary_search_by_key(&key, |e| self.sort_key(e)) {
                self.recent.insert(at, entry);
            }
        }
        if self.recent.len() >= RECENT_RUN {
            if self.merged.capacity() == 0 {
                self.merged.reserve(MERGED_RESERVE);
            }
            self.merged.append(&mut self.recent);
            let numbers = &self.numbers;
            self.merged
                .sort_unstable_by_key(|e| (e.topic, numbers[e.order as usize], e.order));
        }
    }
}

/// Each folded topic of [`EarlierTopics`] once, indexed in the order first seen: the texts
/// back to back in one string, the indices sorted by text for lookup. A map of boxed
/// strings was two small blocks per topic (7,582 topics at 8,000 turns of the bench) among
/// the renderer's large transient ones: three buffers instead cut the peak anonymous memory
/// at 8,000 turns by ~0.5 MiB. They grow by doubling: reserving `names::GROWING_RESERVE`
/// for each measured worse (+0.6 MiB — the blocks land in the thread's arena once glibc's
/// mmap threshold has risen, and push its transient blocks onto fresh pages).
#[derive(Debug, Default, Clone)]
struct TopicTable {
    text: String,
    /// Where each topic's text ends in `text`, by index.
    ends: Vec<usize>,
    /// The indices, sorted by their texts.
    sorted: Vec<u32>,
}

impl TopicTable {
    fn text(&self, topic: u32) -> &str {
        let i = topic as usize;
        let start = i.checked_sub(1).map_or(0, |before| self.ends[before]);
        &self.text[start..self.ends[i]]
    }

    /// Where `key` is in `sorted`, or where it would go.
    fn search(&self, key: &str) -> Result<usize, usize> {
        self.sorted.binary_search_by(|&t| self.text(t).cmp(key))
    }

    fn get(&self, key: &str) -> Option<u32> {
        self.search(key).ok().map(|at| self.sorted[at])
    }

    /// `key`'s index, given the next one if it is new.
    fn intern(&mut self, key: &str) -> u32 {
        match self.search(key) {
            Ok(at) => self.sorted[at],
            Err(at) => {
                let topic = u32::try_from(self.ends.len()).unwrap_or(u32::MAX);
                self.text.push_str(key);
                self.ends.push(self.text.len());
                self.sorted.insert(at, topic);
                topic
            }
        }
    }
}

/// The coverage guard on its own: `ranges` (sorted) must tile `[lo, hi]` exactly.
///
/// Unsorted input is sorted first (tiling is a property of the set). Reports every
/// overlap — ranges covering a seq twice, reaching outside `[lo, hi]`, or inverted
/// (`lo > hi`, which claims nothing coherent) — before gaps; an empty span (`lo > hi`)
/// is tiled by no ranges.
pub fn check_coverage(
    session_id: &str,
    ranges: &[(u64, u64)],
    lo: u64,
    hi: u64,
) -> Result<(), ComposeError> {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    let mut gaps = Vec::new();
    let mut overlaps = Vec::new();
    // u128 so that `hi + 1` and `b + 1` cannot overflow at u64::MAX.
    let end = u128::from(hi) + 1;
    let mut next = u128::from(lo);
    for &(a, b) in &sorted {
        if a > b {
            overlaps.push((a, b));
            continue;
        }
        let (a_wide, b_wide) = (u128::from(a), u128::from(b));
        if a_wide > next && next < end {
            gaps.push((narrow(next), narrow(a_wide.min(end) - 1)));
        }
        if a_wide < next {
            overlaps.push((a, narrow(b_wide.min(next - 1))));
        }
        if b_wide >= end {
            overlaps.push((narrow(a_wide.max(end)), b));
        }
        next = next.max(b_wide + 1);
    }
    if next < end {
        gaps.push((narrow(next), hi));
    }
    if !overlaps.is_empty() {
        overlaps.sort_unstable();
        overlaps.dedup();
        return Err(ComposeError::Overlap {
            session_id: session_id.to_owned(),
            overlap: overlaps,
        });
    }
    if !gaps.is_empty() {
        return Err(ComposeError::Gap {
            session_id: session_id.to_owned(),
            span_lo: lo,
            span_hi: hi,
            missing: gaps,
        });
    }
    Ok(())
}

/// Seq ranges inside `span` that none of its members' signatures covers: what the
/// composition absorbed without a signature (for a note in the chapter or a log line).
pub fn unsigned_ranges(span: &ChapterSpan, sigs: &[Signature]) -> Vec<(u64, u64)> {
    let mut covered: Vec<(u64, u64)> = span
        .members
        .iter()
        .filter_map(|&i| sigs.get(i).and_then(seq_range))
        .collect();
    covered.sort_unstable();
    let mut holes = Vec::new();
    let mut next = u128::from(span.seq_lo);
    let end = u128::from(span.seq_hi) + 1;
    for (a, b) in covered {
        if u128::from(a) > next {
            holes.push((narrow(next), a - 1));
        }
        next = next.max(u128::from(b) + 1);
    }
    if next < end {
        holes.push((narrow(next), span.seq_hi));
    }
    holes
}

/// A signature's place in the log.
#[derive(Debug, Clone, Copy)]
struct Placed {
    index: usize,
    lo: u64,
    hi: u64,
}

fn seq_range(sig: &Signature) -> Option<(u64, u64)> {
    Some((*sig.seqs.iter().min()?, *sig.seqs.iter().max()?))
}

/// Signatures in seq order, refusing any that overlap another or leave the span.
fn place(
    session_id: &str,
    sigs: &[Signature],
    span_lo: u64,
    span_hi: u64,
) -> Result<Vec<Placed>, ComposeError> {
    let mut placed: Vec<Placed> = sigs
        .iter()
        .enumerate()
        .filter_map(|(index, sig)| seq_range(sig).map(|(lo, hi)| Placed { index, lo, hi }))
        .collect();
    placed.sort_by_key(|p| (p.lo, p.hi, p.index));

    let mut bad = Vec::new();
    let mut reach: Option<u64> = None;
    for p in &placed {
        if p.lo < span_lo {
            bad.push((p.lo, p.hi.min(span_lo.saturating_sub(1))));
        }
        if p.hi > span_hi {
            bad.push((p.lo.max(span_hi.saturating_add(1)), p.hi));
        }
        if let Some(r) = reach.filter(|&r| p.lo <= r) {
            bad.push((p.lo, p.hi.min(r)));
        }
        reach = Some(reach.map_or(p.hi, |r| r.max(p.hi)));
    }
    if bad.is_empty() {
        return Ok(placed);
    }
    bad.sort_unstable();
    bad.dedup();
    Err(ComposeError::Overlap {
        session_id: session_id.to_owned(),
        overlap: bad,
    })
}

/// One signature's sets; terms by their folded key (`tokens` and `token` are one term).
struct Features<'a> {
    paths: BTreeSet<&'a str>,
    commands: BTreeSet<&'a str>,
    terms: Cow<'a, BTreeSet<String>>,
    /// `paths[0]`: the file the turn is about.
    primary: Option<&'a str>,
    size: u64,
    /// The person's words hold at most [`NO_SIGNAL_TERMS`] term (`signature.terms` is
    /// theirs alone): whatever the turn's tool calls touched, what the person said names
    /// no other task.
    names_nothing: bool,
    /// The person's words hold at most [`BRIEF_TERMS`] terms.
    brief: bool,
}

impl<'a> Features<'a> {
    fn of(sig: &'a Signature) -> Self {
        Self::with(sig, Cow::Owned(term_keys(sig)))
    }

    /// [`Features::of`] with `sig`'s term keys already made.
    fn with_terms(sig: &'a Signature, terms: &'a BTreeSet<String>) -> Self {
        Self::with(sig, Cow::Borrowed(terms))
    }

    fn with(sig: &'a Signature, terms: Cow<'a, BTreeSet<String>>) -> Self {
        let set = |v: &'a [String]| v.iter().map(String::as_str).collect();
        Self {
            paths: set(&sig.paths),
            commands: set(&sig.commands),
            terms,
            primary: sig.paths.first().map(String::as_str),
            size: sig.size,
            names_nothing: sig.terms.len() <= NO_SIGNAL_TERMS,
            brief: sig.terms.len() <= BRIEF_TERMS,
        }
    }

    fn sets(&self) -> Sets<'_> {
        (&self.paths, &self.commands, self.terms.as_ref())
    }
}

/// A signature's term keys: its terms folded, and the words its paths and commands carry.
fn term_keys(sig: &Signature) -> BTreeSet<String> {
    sig.terms
        .iter()
        .map(|t| fold_key(t))
        .chain(context_words(sig))
        .collect()
}

/// The words a turn's paths and commands carry, as term keys: each path's meaningful
/// directory and file-name words (`src/cache/lru.rs` → `cache`, `lru`), each command's
/// words after its program (`cargo bench -p cache` → `bench`, `cache`). Two turns of one
/// task that touch sibling files (`lru.rs`, `metrics.rs` under `cache/`) or run the same
/// package's tests share them where their paths differ.
fn context_words(sig: &Signature) -> impl Iterator<Item = String> + '_ {
    let from_paths = sig.paths.iter().flat_map(|p| {
        let dir = meaningful_dir(p);
        let stem = file_stem(p);
        dir.into_iter().chain(stem).flat_map(|w| {
            crate::signature::terms_of(&w)
                .map(|t| fold_key(&t))
                .collect::<Vec<_>>()
        })
    });
    let from_commands = sig.commands.iter().flat_map(|c| {
        let rest = c.split_once(' ').map_or("", |(_, rest)| rest);
        crate::signature::terms_of(rest)
            .map(|t| fold_key(&t))
            .collect::<Vec<_>>()
    });
    from_paths.chain(from_commands)
}

/// Paths, commands, terms.
type Sets<'s> = (
    &'s BTreeSet<&'s str>,
    &'s BTreeSet<&'s str>,
    &'s BTreeSet<String>,
);

/// Weighted overlap in [0, 1]: (2·|P∩| + |C∩| + |T∩|) / (2·|P∪| + |C∪| + |T∪|); a shared
/// file weighs double. 0 when both sides are empty.
fn overlap((pa, ca, ta): Sets<'_>, (pb, cb, tb): Sets<'_>) -> f64 {
    let (pi, pu) = inter_union(pa, pb);
    let (ci, cu) = inter_union(ca, cb);
    let (ti, tu) = inter_union(ta, tb);
    let denominator = 2 * pu + cu + tu;
    if denominator == 0 {
        return 0.0;
    }
    (2 * pi + ci + ti) as f64 / denominator as f64
}

/// How much of the incoming turn the chapter already holds, with the same weights:
/// (2·|P∩| + |C∩| + |T∩| + 1) / (2·|P| + |C| + |T| + 1) over the turn's own sets. The `+ 1`
/// is the benefit of the doubt a turn of one or two unknown words gets (`go on`, one new
/// term): a turn must *say* more that the chapter lacks than it shares to open a new one.
/// A chapter's union only grows, so this is the view that keeps a long task together.
fn containment((pa, ca, ta): Sets<'_>, (pb, cb, tb): Sets<'_>) -> f64 {
    let (pi, _) = inter_union(pa, pb);
    let (ci, _) = inter_union(ca, cb);
    let (ti, _) = inter_union(ta, tb);
    let own = 2 * pb.len() + cb.len() + tb.len();
    (2 * pi + ci + ti + 1) as f64 / (own + 1) as f64
}

fn inter_union<T: Ord>(a: &BTreeSet<T>, b: &BTreeSet<T>) -> (usize, usize) {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    let shared = small.iter().filter(|x| large.contains(*x)).count();
    (shared, a.len() + b.len() - shared)
}

/// Whether two primary paths name the same file: case-insensitive, ignoring a leading
/// `./`, a trailing `/` and one trailing extension (`src/render` = `SRC/Render.TS`,
/// `src/render.ts` ≠ `src/renderer.ts`).
pub fn same_file(a: &str, b: &str) -> bool {
    let (a, b) = (file_key(a), file_key(b));
    !a.is_empty() && a == b
}

fn file_key(path: &str) -> String {
    let p = path.trim_start_matches("./").trim_end_matches('/');
    let name_start = p.rfind('/').map_or(0, |i| i + 1);
    let without_ext = match p.rfind('.') {
        // A dot that starts the name (`.env`) is the name, not an extension.
        Some(dot) if dot > name_start => &p[..dot],
        _ => p,
    };
    without_ext.to_lowercase()
}

/// The lowercase file name without its extension; `None` when nothing is left.
fn file_stem(path: &str) -> Option<String> {
    let name = path
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let stem = match name.rfind('.') {
        Some(dot) if dot > 0 => &name[..dot],
        _ => name,
    };
    let stem = stem.trim_start_matches('.').to_lowercase();
    (!stem.is_empty()).then_some(stem)
}

/// The score of `incoming` against a chapter: the best of its overlap with the union, the
/// first and the last member, and the union's [`containment`] of it.
fn score_views(
    union: Sets<'_>,
    first: &Features<'_>,
    last: &Features<'_>,
    incoming: &Features<'_>,
) -> f64 {
    let theirs = incoming.sets();
    overlap(union, theirs)
        .max(overlap(first.sets(), theirs))
        .max(overlap(last.sets(), theirs))
        .max(containment(union, theirs))
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

fn narrow(x: u128) -> u64 {
    u64::try_from(x).expect("callers only narrow values bounded by a u64 range end")
}

/// Directory names that say where code lives, not what it is about: a path's topic
/// candidate is its deepest directory not among these (`src/auth/x.ts` → `auth`). Sorted.
const GENERIC_DIRS: &[&str] = &[
    "app",
    "apps",
    "bin",
    "cmd",
    "components",
    "crates",
    "docs",
    "internal",
    "lib",
    "libs",
    "packages",
    "pkg",
    "scripts",
    "services",
    "source",
    "sources",
    "src",
    "test",
    "tests",
    "web",
];

/// Where a topic candidate comes from; on equal weight the earlier kind wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    Term,
    Directory,
    Command,
}

/// The chapter's topics: candidates weighted by how many members carry them — the terms
/// (by folded key, shown as most members wrote them), the deepest meaningful directory of
/// each path (`src/auth/*` → `auth`), the program of each command family (`sqlx migrate`
/// → `sqlx`) and, when fewer than three topics come from those, file stems. Ties: terms
/// before directories before commands, then the best place a member's signature gave it (a
/// signature lists its terms most written first: `tokens` written twice before `check`
/// once), then alphabetical. No stopword, lowercase, at most six.
fn topics(members: &[usize], sigs: &[Signature]) -> Vec<String> {
    // key → (members carrying it, source, best place in a signature, surface → members
    // writing it)
    let mut cands: BTreeMap<String, (u64, Source, usize, BTreeMap<String, u64>)> = BTreeMap::new();
    for &m in members {
        let sig = &sigs[m];
        let mut mine: BTreeMap<String, (Source, usize, String)> = BTreeMap::new();
        let mut place = 0usize;
        let mut offer = |surface: String, source: Source| {
            place += 1;
            if surface.is_empty() || crate::signature::is_stopword(&surface) {
                return;
            }
            let key = fold_key(&surface);
            let slot = mine.entry(key).or_insert((source, place, surface.clone()));
            if source < slot.0 {
                *slot = (source, place.min(slot.1), surface);
            }
        };
        for t in &sig.terms {
            offer(t.to_lowercase(), Source::Term);
        }
        for p in &sig.paths {
            if let Some(dir) = meaningful_dir(p) {
                offer(dir, Source::Directory);
            }
        }
        for c in &sig.commands {
            if let Some(program) = c.split_whitespace().next() {
                if program.chars().count() >= 2
                    && program
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
                {
                    offer(program.to_lowercase(), Source::Command);
                }
            }
        }
        for (key, (source, place, surface)) in mine {
            let entry = cands
                .entry(key)
                .or_insert((0, source, place, BTreeMap::new()));
            entry.0 += 1;
            entry.1 = entry.1.min(source);
            entry.2 = entry.2.min(place);
            *entry.3.entry(surface).or_default() += 1;
        }
    }
    let mut ranked: Vec<(u64, Source, usize, String)> = cands
        .into_values()
        .map(|(weight, source, place, surfaces)| {
            // The spelling most members used; then the shortest, then alphabetical.
            let shown = surfaces
                .into_iter()
                .max_by(|a, b| {
                    a.1.cmp(&b.1)
                        .then(b.0.chars().count().cmp(&a.0.chars().count()))
                        .then(b.0.cmp(&a.0))
                })
                .map(|(s, _)| s)
                .unwrap_or_default();
            (weight, source, place, shown)
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
            .then(a.3.cmp(&b.3))
    });
    let mut topics: Vec<String> = ranked
        .into_iter()
        .take(MAX_TOPICS)
        .map(|(_, _, _, t)| t)
        .collect();
    if topics.len() >= MIN_TERM_TOPICS {
        return topics;
    }

    // Per path: how many members touch it, and when it was first touched.
    let mut path_rank: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    let mut touch = 0;
    for &m in members {
        let mut seen = BTreeSet::new();
        for p in &sigs[m].paths {
            if seen.insert(p.as_str()) {
                path_rank.entry(p.as_str()).or_insert((0, touch)).0 += 1;
                touch += 1;
            }
        }
    }
    let mut ranked_paths: Vec<(&str, (u64, usize))> = path_rank.into_iter().collect();
    ranked_paths.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
    for (path, _) in ranked_paths {
        if topics.len() >= MIN_TERM_TOPICS {
            break;
        }
        if let Some(stem) = file_stem(path) {
            if !topics.contains(&stem) {
                topics.push(stem);
            }
        }
    }
    topics
}

/// The deepest directory of `path` that is not generic (`src`, `lib`, …) nor hidden, as a
/// lowercase word; `None` for a file at the root or under generic directories only.
fn meaningful_dir(path: &str) -> Option<String> {
    let mut dirs: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    dirs.pop();
    dirs.into_iter().rev().map(str::to_lowercase).find(|d| {
        d.chars().count() >= 2
            && !d.starts_with('.')
            && d.chars().any(char::is_alphabetic)
            && d.chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
            && GENERIC_DIRS.binary_search(&d.as_str()).is_err()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::SIGNATURE_VERSION;

    const CFG: ComposeConfig = ComposeConfig {
        merge_threshold: 0.3,
        chapter_limit: 8000,
    };

    fn sig(
        turn: u64,
        lo: u64,
        hi: u64,
        paths: &[&str],
        commands: &[&str],
        terms: &[&str],
        size: u64,
    ) -> Signature {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Signature {
            v: SIGNATURE_VERSION,
            session_id: "s".into(),
            turn,
            seqs: (lo..=hi).collect(),
            paths: own(paths),
            commands: own(commands),
            terms: own(terms),
            size,
            by: "deterministic".into(),
            at: "2026-10-22T00:00:00Z".into(),
            reason: "completed".into(),
        }
    }

    fn ranges(chapters: &[ChapterSpan]) -> Vec<(u64, u64)> {
        chapters.iter().map(|c| (c.seq_lo, c.seq_hi)).collect()
    }

    fn rules(chapters: &[ChapterSpan]) -> Vec<Vec<Rule>> {
        chapters
            .iter()
            .map(|c| c.decisions.iter().map(|d| d.rule).collect())
            .collect()
    }

    fn features(s: &Signature) -> Features<'_> {
        Features::of(s)
    }

    #[test]
    fn score_formula() {
        let a = sig(1, 0, 0, &["a.rs", "b.rs"], &["cargo test"], &["x", "y"], 1);
        let b = sig(
            2,
            1,
            1,
            &["a.rs", "c.rs"],
            &["cargo test", "git diff"],
            &["y"],
            1,
        );
        // (2·1 + 1 + 1) / (2·3 + 2 + 2) = 4 / 10
        assert_eq!(overlap(features(&a).sets(), features(&b).sets()), 0.4);
        let empty = sig(3, 2, 2, &[], &[], &[], 1);
        assert_eq!(
            overlap(features(&empty).sets(), features(&empty).sets()),
            0.0
        );
        assert_eq!(round4(2.0 / 3.0), 0.6667);
    }

    #[test]
    fn primary_spelling_tolerance() {
        assert!(same_file("src/render", "src/render.ts"));
        assert!(same_file("src/render.ts", "SRC/Render.TS"));
        assert!(same_file("./src/render.ts", "src/render/"));
        assert!(!same_file("src/render.ts", "src/renderer.ts"));
        assert!(!same_file("src/render.test.ts", "src/render.ts"));
        assert!(!same_file(".env", ".envrc"));
        assert!(same_file(".env", ".ENV"));
        assert!(!same_file("", ""));
        assert!(!same_file("a.b/c", "a"));
    }

    #[test]
    fn r28_shared_primary_merges_below_tau() {
        let sigs: Vec<Signature> = (0..5u64)
            .map(|i| {
                let primary = [
                    "src/render.ts",
                    "src/render",
                    "SRC/render.ts",
                    "src/render.ts",
                    "src/render.TS",
                ][i as usize];
                let others: Vec<String> = (0..5).map(|j| format!("docs/t{i}/f{j}.md")).collect();
                let mut paths: Vec<&str> = vec![primary];
                paths.extend(others.iter().map(String::as_str));
                let term = format!("topic{i}");
                let mut s = sig(
                    i + 1,
                    i * 10,
                    i * 10 + 9,
                    &paths,
                    &[],
                    &[term.as_str()],
                    500,
                );
                s.terms.push(format!("extra{i}"));
                s
            })
            .collect();
        // Each pair shares at most one path in a union of ~10: far below τ.
        for w in sigs.windows(2) {
            assert!(overlap(features(&w[0]).sets(), features(&w[1]).sets()) < 0.1);
        }
        let chapters = compose("s", &sigs, 0, 49, &CFG).expect("composes");
        assert_eq!(ranges(&chapters), vec![(0, 49)]);
        assert_eq!(
            rules(&chapters),
            vec![vec![
                Rule::Open,
                Rule::PrimaryPath,
                Rule::PrimaryPath,
                Rule::PrimaryPath,
                Rule::PrimaryPath
            ]]
        );
        assert!(chapters[0].decisions[1..].iter().all(|d| d.score < 0.3));
        // Turn 4 spells the primary exactly as turn 1: one shared path in a union of 11
        // paths and 4 terms, 2/26 — the record's measured 0.077 — but the chapter holds a
        // quarter of what turn 4 says ((2·1 + 1) / (2·5 + 1 + 1)): the containment view.
        assert_eq!(chapters[0].decisions[3].score, 0.25);
    }

    #[test]
    fn overlap_wins_over_primary_when_both_hold() {
        let sigs = vec![
            sig(1, 0, 4, &["src/a.rs"], &["cargo test"], &["auth"], 10),
            sig(2, 5, 9, &["src/a.rs"], &["cargo test"], &["auth"], 10),
        ];
        let chapters = compose("s", &sigs, 0, 9, &CFG).expect("composes");
        assert_eq!(rules(&chapters), vec![vec![Rule::Open, Rule::Overlap]]);
        assert_eq!(chapters[0].decisions[1].score, 1.0);
    }

    #[test]
    fn continues_names_the_latest_earlier_chapter_sharing_two_topics() {
        let span = |rule: Rule, topics: &[&str]| ChapterSpan {
            seq_lo: 0,
            seq_hi: 0,
            members: vec![0],
            decisions: vec![Decision {
                turn: 1,
                rule,
                score: 0.0,
            }],
            topics: topics.iter().map(|t| t.to_string()).collect(),
            size: 1,
        };
        let own = |v: &[&str]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        let mut first_two = EarlierTopics::default();
        // Out of order on purpose: the latest by number wins, not the last pushed.
        first_two.push(2, &own(&["csv", "invoice"]));
        first_two.push(1, &own(&["auth", "refresh", "token"]));
        let mut earlier = first_two.clone();
        earlier.push(3, &own(&["auth", "tokens", "cookie"]));
        let back = span(Rule::TopicChange, &["token", "auth", "expiry"]);
        // Chapters 1 and 3 share two topics (`tokens` folds to `token`); the latest wins.
        assert_eq!(continues(&back, &earlier), Some(3));
        assert_eq!(continues(&back, &first_two), Some(1));
        // One shared topic is not a return; the session's opening chapter never continues.
        assert_eq!(
            continues(&span(Rule::TopicChange, &["csv", "ci"]), &earlier),
            None
        );
        assert_eq!(
            continues(&span(Rule::Open, &["auth", "token"]), &earlier),
            None
        );
    }

    #[test]
    fn the_topic_table_numbers_each_topic_once_in_the_order_first_seen() {
        // Enough topics that its buffers pass the few KiB they grow as any buffer does.
        let mut table = TopicTable::default();
        let key = |i: u64| format!("t{}", i.wrapping_mul(2654435761) % 100_003);
        for i in 0..5_000u64 {
            assert_eq!(table.intern(&key(i)), i as u32);
        }
        for i in (0..5_000u64).rev() {
            assert_eq!(table.intern(&key(i)), i as u32, "again");
            assert_eq!(table.get(&key(i)), Some(i as u32));
            assert_eq!(table.text(i as u32), key(i));
        }
        assert_eq!(table.get("t100003"), None);
        assert_eq!(table.get(""), None);
    }

    #[test]
    fn continues_by_topic_lists_agrees_with_comparing_every_earlier_chapter() {
        // The old way, kept here as the reference: every earlier chapter in (number, push)
        // order, latest first, the first sharing two folded topics.
        fn every_chapter(mine: &[String], earlier: &[(u32, Vec<String>)]) -> Option<u32> {
            let fold = |v: &[String]| v.iter().map(|t| fold_key(t)).collect::<BTreeSet<_>>();
            let mine = fold(mine);
            let mut order: Vec<(u32, usize)> = earlier
                .iter()
                .enumerate()
                .map(|(i, (n, _))| (*n, i))
                .collect();
            order.sort();
            order
                .iter()
                .rev()
                .find(|(_, i)| mine.intersection(&fold(&earlier[*i].1)).count() >= 2)
                .map(|(n, _)| *n)
        }
        let words = [
            "auth", "token", "tokens", "csv", "cookie", "jwt", "ci", "docs",
        ];
        let mut rng = 7u64;
        let mut next = |n: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
        for round in 0..240 {
            // Every fourth session is long enough that the index merges its runs
            // (`RECENT_RUN` entries) a few times, and holds entries in both.
            let (chapters, numbers) = if round % 4 == 0 {
                (RECENT_RUN as u64 / 2 + next(RECENT_RUN as u64), 400)
            } else {
                (next(12), 8)
            };
            let mut earlier = Vec::new();
            let mut topics = EarlierTopics::default();
            for _ in 0..chapters {
                // Numbers repeat and arrive out of order on purpose.
                let number = next(numbers) as u32 + 1;
                let own: Vec<String> = (0..next(4))
                    .map(|_| words[next(words.len() as u64) as usize].to_owned())
                    .collect();
                topics.push(number, &own);
                earlier.push((number, own));
            }
            let mine: Vec<String> = (0..next(5))
                .map(|_| words[next(words.len() as u64) as usize].to_owned())
                .collect();
            let span = ChapterSpan {
                seq_lo: 0,
                seq_hi: 0,
                members: vec![0],
                decisions: vec![Decision {
                    turn: 1,
                    rule: Rule::TopicChange,
                    score: 0.0,
                }],
                topics: mine.clone(),
                size: 1,
            };
            assert_eq!(
                continues(&span, &topics),
                every_chapter(&mine, &earlier),
                "{mine:?} after {earlier:?}"
            );
        }
    }

    #[test]
    fn topic_change_splits() {
        let sigs = vec![
            sig(
                1,
                0,
                4,
                &["src/auth.rs"],
                &["cargo test"],
                &["auth", "token"],
                10,
            ),
            sig(
                2,
                5,
                9,
                &["src/auth.rs", "src/jwt.rs"],
                &["cargo test"],
                &["auth", "jwt"],
                10,
            ),
            sig(
                3,
                10,
                14,
                &["docs/deploy.md"],
                &["helm install"],
                &["deploy", "cluster"],
                10,
            ),
        ];
        let chapters = compose("s", &sigs, 0, 14, &CFG).expect("composes");
        assert_eq!(ranges(&chapters), vec![(0, 9), (10, 14)]);
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open, Rule::Overlap], vec![Rule::TopicChange]]
        );
        // Nothing shared: only the containment's benefit of the doubt, 1 / (2·1 + 1 + 3 + 1)
        // (terms `deploy`, `cluster` and `install`, a word of its command).
        assert_eq!(chapters[1].decisions[0].score, 0.1429);
        assert_eq!(
            (chapters[0].members.clone(), chapters[1].members.clone()),
            (vec![0, 1], vec![2])
        );
        assert_eq!(chapters[0].size, 20);
    }

    #[test]
    fn a_turn_whose_person_names_nothing_stays_whatever_its_tools_touched() {
        let opening = sig(1, 0, 4, &["src/auth.rs"], &["cargo test"], &["auth"], 10);
        // `yes please`: no term of the person's, and the agent then works in files and
        // commands the chapter has not seen — nothing shared at all.
        let approval = sig(2, 5, 9, &["docs/deploy.md"], &["helm install"], &[], 10);
        // The same tool work asked for in words the chapter lacks opens a chapter.
        let request = sig(
            3,
            10,
            14,
            &["docs/deploy.md"],
            &["helm install"],
            &["deploy", "cluster"],
            10,
        );
        let chapters = compose("s", &[opening.clone(), approval], 0, 9, &CFG).expect("composes");
        assert_eq!(rules(&chapters), vec![vec![Rule::Open, Rule::NoSignal]]);
        assert!(chapters[0].decisions[1].score < CFG.merge_threshold);
        let chapters = compose("s", &[opening.clone(), request], 0, 14, &CFG).expect("composes");
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open], vec![Rule::TopicChange]]
        );
        // One word is no request either (`can you fix it?` → `fix`).
        let one_word = sig(
            2,
            5,
            9,
            &["docs/deploy.md"],
            &["helm install"],
            &["fix"],
            10,
        );
        assert_eq!(
            drawn(&[opening.clone(), one_word], 9),
            vec![vec![Rule::Open, Rule::NoSignal]]
        );
        // A silent turn may take the chapter past the limit, not past three times it.
        let big = sig(2, 5, 9, &["docs/deploy.md"], &[], &[], 9000);
        assert_eq!(
            drawn(&[opening.clone(), big], 9),
            vec![vec![Rule::Open, Rule::NoSignal]]
        );
        let huge = sig(2, 5, 9, &["docs/deploy.md"], &[], &[], 3 * 8000);
        assert_eq!(
            drawn(&[opening, huge], 9),
            vec![vec![Rule::Open], vec![Rule::SizeLimit]]
        );
    }

    /// The rules of each chapter `sigs` compose into over `0..=hi`.
    fn drawn(sigs: &[Signature], hi: u64) -> Vec<Vec<Rule>> {
        rules(&compose("s", sigs, 0, hi, &CFG).expect("composes"))
    }

    #[test]
    fn a_turn_answered_without_tools_discusses_the_chapter_and_new_work_opens() {
        let opening = sig(
            1,
            0,
            4,
            &["cli/strategy/shadow.go", "cli/strategy/migrate.go"],
            &["go test"],
            &["shadow", "branch", "rebase", "migration"],
            10,
        );
        // A question of five new words the agent answered from the conversation alone.
        let words = ["claude", "switching", "sessions", "issue", "worktrees"];
        let question = sig(2, 5, 9, &[], &[], &words, 10);
        let chapters = compose("s", &[opening.clone(), question], 0, 9, &CFG).expect("composes");
        assert!(chapters[0].decisions[1].score < CFG.merge_threshold);
        assert_eq!(rules(&chapters), vec![vec![Rule::Open, Rule::Discussion]]);
        // The same words with a file read or a command run are new work: a new chapter.
        let read = sig(2, 5, 9, &["cli/session/state.go"], &[], &words, 10);
        let ran = sig(2, 5, 9, &[], &["git worktree list"], &words, 10);
        for work in [read, ran] {
            assert_eq!(
                drawn(&[opening.clone(), work], 9),
                vec![vec![Rule::Open], vec![Rule::TopicChange]]
            );
        }
        // A conversation with no tool work changes topic by its words alone.
        let talk = sig(
            1,
            0,
            4,
            &[],
            &[],
            &["shadow", "branch", "rebase", "migration"],
            10,
        );
        assert_eq!(
            drawn(&[talk, sig(2, 5, 9, &[], &[], &words, 10)], 9),
            vec![vec![Rule::Open], vec![Rule::TopicChange]]
        );
        // Past the limit a discussion is no clear continuation: `chapterLimit` opens; and a
        // commit still closes the task before it.
        let long = sig(2, 5, 9, &[], &[], &words, 9000);
        assert_eq!(
            drawn(&[opening.clone(), long], 9),
            vec![vec![Rule::Open], vec![Rule::SizeLimit]]
        );
        let committed = sig(
            1,
            0,
            4,
            &["cli/strategy/shadow.go"],
            &["git commit"],
            &["shadow"],
            10,
        );
        assert_eq!(
            drawn(&[committed, sig(2, 5, 9, &[], &[], &words, 10)], 9),
            vec![vec![Rule::Open], vec![Rule::AfterCommit]]
        );
    }

    #[test]
    fn a_brief_follow_up_joins_at_a_lower_bar_and_a_request_does_not() {
        let opening = sig(
            1,
            0,
            4,
            &["scripts/migrate.sh"],
            &["git log"],
            &["migration", "script", "branch", "checkpoint"],
            10,
        );
        // A short question about the work at hand: two shared words among new files.
        let question = |terms: &[&str]| {
            sig(
                2,
                5,
                9,
                &["cli/paths.go", "cli/strategy.go", "cli/session.go"],
                &["grep"],
                terms,
                10,
            )
        };
        let brief = question(&["branch", "checkpoint", "write"]);
        let chapters = compose("s", &[opening.clone(), brief], 0, 9, &CFG).expect("composes");
        let score = chapters[0].decisions[1].score;
        assert!(
            (CFG.merge_threshold * BRIEF_FACTOR..CFG.merge_threshold).contains(&score),
            "{score}"
        );
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open, Rule::BriefFollowUp]]
        );
        // A request naming more (five terms) at a like score is another task.
        let request = question(&[
            "branch",
            "checkpoint",
            "migration",
            "clients",
            "configuration",
        ]);
        let chapters = compose("s", &[opening.clone(), request], 0, 9, &CFG).expect("composes");
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open], vec![Rule::TopicChange]]
        );
        let score = chapters[1].decisions[0].score;
        assert!(score >= CFG.merge_threshold * BRIEF_FACTOR, "{score}");
        // A brief turn sharing nothing opens a chapter.
        let elsewhere = question(&["linear", "ticket"]);
        assert_eq!(
            drawn(&[opening.clone(), elsewhere], 9),
            vec![vec![Rule::Open], vec![Rule::TopicChange]]
        );
        // Past the limit a brief follow-up is no clear continuation: `chapterLimit` opens.
        let big = sig(
            2,
            5,
            9,
            &["cli/paths.go", "cli/strategy.go", "cli/session.go"],
            &["grep"],
            &["branch", "checkpoint", "write"],
            9000,
        );
        assert_eq!(
            drawn(&[opening, big], 9),
            vec![vec![Rule::Open], vec![Rule::SizeLimit]]
        );
    }

    #[test]
    fn a_chapter_that_names_nothing_takes_the_next_turn() {
        // An empty first prompt (no path, command nor term): nothing to change from.
        let empty = sig(1, 0, 4, &[], &[], &[], 6);
        let request = sig(2, 5, 9, &["src/auth.rs"], &[], &["auth", "token"], 10);
        assert_eq!(
            drawn(&[empty, request.clone()], 9),
            vec![vec![Rule::Open, Rule::NoSignal]]
        );
        // A chapter that names something still opens on a change of task.
        let other = sig(1, 0, 4, &[], &[], &["csv"], 6);
        assert_eq!(
            drawn(&[other, request], 9),
            vec![vec![Rule::Open], vec![Rule::TopicChange]]
        );
    }

    #[test]
    fn a_commit_or_push_closes_the_chapter() {
        let work = |turn, lo, commands: &[&str]| {
            sig(
                turn,
                lo,
                lo + 4,
                &["src/auth.rs"],
                commands,
                &["auth", "token"],
                10,
            )
        };
        let committed = work(2, 5, &["cargo test", "git commit"]);
        let sigs = [work(1, 0, &[]), committed, work(3, 10, &[])];
        let chapters = compose("s", &sigs, 0, 14, &CFG).expect("composes");
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open, Rule::Overlap], vec![Rule::AfterCommit]]
        );
        assert_eq!(
            chapters[1].decisions[0].score, 1.0,
            "the same words: closed all the same"
        );
        let between = |middle| drawn(&[work(1, 0, &[]), middle, work(3, 10, &[])], 14).len();
        assert_eq!(between(work(2, 5, &["git push"])), 2);
        // Other git commands close nothing.
        assert_eq!(between(work(2, 5, &["git diff", "git status"])), 1);
    }

    #[test]
    fn size_limit_splits() {
        // Past the limit a turn only loosely on topic (τ ≤ score < OVERFLOW_SCORE) opens.
        const OWN: [[&str; 2]; 4] = [
            ["token", "cookie"],
            ["session", "expiry"],
            ["header", "bearer"],
            ["logout", "revoke"],
        ];
        // Each shares `auth` and says two words of its own: containment (1 + 1) / (3 + 1).
        let loose = |i: u64| {
            let [a, b] = OWN[i as usize];
            sig(i + 1, i * 5, i * 5 + 4, &[], &[], &["auth", a, b], 3000)
        };
        let sigs: Vec<Signature> = (0..4).map(loose).collect();
        let chapters = compose("s", &sigs, 0, 19, &CFG).expect("composes");
        assert_eq!(ranges(&chapters), vec![(0, 9), (10, 19)]);
        assert_eq!(
            rules(&chapters),
            vec![
                vec![Rule::Open, Rule::Overlap],
                vec![Rule::SizeLimit, Rule::Overlap]
            ]
        );
        assert!(chapters[1].decisions[0].score < OVERFLOW_SCORE);
        assert_eq!(chapters[0].size, 6000);
        // A clear continuation (the same file and words) goes on past the limit, up to
        // three times it.
        let sigs: Vec<Signature> = (0..10)
            .map(|i| sig(i + 1, i * 5, i * 5 + 4, &["src/a.rs"], &[], &["auth"], 3000))
            .collect();
        let chapters = compose("s", &sigs, 0, 49, &CFG).expect("composes");
        assert_eq!(
            chapters.iter().map(|c| c.size).collect::<Vec<_>>(),
            vec![24_000, 6000]
        );
        assert_eq!(chapters[1].decisions[0].rule, Rule::SizeLimit);
    }

    #[test]
    fn limit_is_inclusive() {
        let sigs = vec![
            sig(1, 0, 0, &["a.rs"], &[], &[], 4000),
            sig(2, 1, 1, &["a.rs"], &[], &[], 4000),
        ];
        let chapters = compose("s", &sigs, 0, 1, &CFG).expect("composes");
        assert_eq!(chapters.len(), 1);
    }

    #[test]
    fn oversized_turn_stands_alone() {
        let same = |turn, lo, size| sig(turn, lo, lo + 4, &["src/a.rs"], &[], &["auth"], size);
        // Past three times the limit (24,000) even a clear continuation stands alone.
        let sigs = vec![same(1, 0, 100), same(2, 5, 30_000), same(3, 10, 100)];
        let chapters = compose("s", &sigs, 0, 14, &CFG).expect("composes");
        assert_eq!(ranges(&chapters), vec![(0, 4), (5, 9), (10, 14)]);
        assert_eq!(
            rules(&chapters),
            vec![
                vec![Rule::Open],
                vec![Rule::SizeLimit],
                vec![Rule::SizeLimit]
            ]
        );
        assert_eq!(chapters[1].size, 30_000);

        let sigs = vec![
            sig(1, 0, 4, &["x.rs"], &[], &["alpha"], 100),
            sig(2, 5, 9, &["y.rs"], &[], &["beta", "gamma"], 20_000),
        ];
        let chapters = compose("s", &sigs, 0, 9, &CFG).expect("composes");
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open], vec![Rule::TopicChange]]
        );

        let alone =
            compose("s", &[sig(1, 0, 9, &[], &[], &[], u64::MAX)], 0, 9, &CFG).expect("composes");
        assert_eq!((ranges(&alone), alone[0].size), (vec![(0, 9)], u64::MAX));
    }

    #[test]
    fn scores_against_the_first_member_too() {
        let sigs = vec![
            sig(1, 0, 0, &["a.rs", "b.rs"], &[], &["alpha"], 1),
            // Same primary: joins although it shares little else.
            sig(
                2,
                1,
                1,
                &["a.rs", "c.rs", "d.rs", "e.rs", "f.rs"],
                &[],
                &[],
                1,
            ),
            // Returns to turn 1's second file and term: nothing shared with turn 2, diluted
            // in the union (3/15), 3/7 against the first member, and the union holds most
            // of it: (2·1 + 1 + 1) / (2·2 + 1 + 1) = 4/6.
            sig(3, 2, 2, &["b.rs", "x.rs"], &[], &["alpha"], 1),
        ];
        let chapters = compose("s", &sigs, 0, 2, &CFG).expect("composes");
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open, Rule::PrimaryPath, Rule::Overlap]]
        );
        assert_eq!(chapters[0].decisions[2].score, 0.6667);
    }

    #[test]
    fn topics_take_directories_commands_and_folded_terms_never_stopwords() {
        let sigs = vec![
            sig(
                1,
                0,
                0,
                &["src/auth/middleware.ts"],
                &["sqlx migrate", "cargo test"],
                &["tokens", "look", "expiry"],
                1,
            ),
            sig(
                2,
                1,
                1,
                &["src/auth/refresh.ts"],
                &["sqlx migrate"],
                &["token", "please"],
                1,
            ),
        ];
        let chapters = compose("s", &sigs, 0, 1, &CFG).expect("composes");
        // `token`/`tokens` are one topic, shown as the shorter of two equally used spellings;
        // `auth` from both paths' directory, `sqlx` from the command family; `look`,
        // `please` and `cargo` are stopwords.
        assert_eq!(chapters[0].topics, vec!["token", "auth", "sqlx", "expiry"]);
    }

    #[test]
    fn topics_terms_first_then_path_stems() {
        let sigs = vec![
            sig(1, 0, 0, &["src/Render.ts"], &[], &["render", "pipeline"], 1),
            sig(2, 1, 1, &["src/Render.ts", "src/.env"], &[], &["render"], 1),
        ];
        let chapters = compose("s", &sigs, 0, 1, &CFG).expect("composes");
        // Two term topics; the stems fill to three ("render" is already there).
        assert_eq!(chapters[0].topics, vec!["render", "pipeline", "env"]);

        let many: Vec<&str> = vec!["h", "g", "f", "e", "d", "c", "b", "a"];
        let sigs = vec![
            sig(1, 0, 0, &["x.rs"], &[], &many, 1),
            sig(2, 1, 1, &["x.rs"], &[], &["zeta", "h"], 1),
        ];
        let chapters = compose("s", &sigs, 0, 1, &CFG).expect("composes");
        // `h` in both turns; then by the place a signature gave each (most written first),
        // not the alphabet: `zeta` led the second turn's terms, `g` came second in the first.
        assert_eq!(chapters[0].topics, vec!["h", "zeta", "g", "f", "e", "d"]);

        let bare = compose(
            "s",
            &[sig(
                1,
                0,
                0,
                &["src/turn.rs", "lib/turn.ts", "Cargo.toml"],
                &[],
                &[],
                1,
            )],
            0,
            0,
            &CFG,
        )
        .expect("composes");
        assert_eq!(bare[0].topics, vec!["turn", "cargo"]);
    }

    #[test]
    fn holes_are_absorbed_into_the_previous_chapter() {
        let sigs = vec![
            sig(1, 2, 4, &["a.rs"], &[], &["alpha"], 1),
            // 5..=9: a completed turn whose signature was lost.
            sig(3, 10, 14, &["b.rs"], &[], &["beta", "gamma"], 1),
            sig(4, 15, 19, &["b.rs"], &[], &["beta", "gamma"], 1),
            // 20..=24: lost too, at the end of the span.
        ];
        let chapters = compose("s", &sigs, 0, 24, &CFG).expect("composes");
        assert_eq!(ranges(&chapters), vec![(0, 9), (10, 24)]);
        assert_eq!(
            rules(&chapters),
            vec![vec![Rule::Open], vec![Rule::TopicChange, Rule::Overlap]]
        );
        assert_eq!(unsigned_ranges(&chapters[0], &sigs), vec![(0, 1), (5, 9)]);
        assert_eq!(unsigned_ranges(&chapters[1], &sigs), vec![(20, 24)]);

        // A hole inside one chapter needs no widening and is reported the same way.
        let sigs = vec![
            sig(1, 0, 4, &["a.rs"], &[], &[], 1),
            sig(3, 10, 14, &["a.rs"], &[], &[], 1),
        ];
        let chapters = compose("s", &sigs, 0, 14, &CFG).expect("composes");
        assert_eq!(ranges(&chapters), vec![(0, 14)]);
        assert_eq!(unsigned_ranges(&chapters[0], &sigs), vec![(5, 9)]);
    }

    #[test]
    fn coverage_guard_names_gaps() {
        assert_eq!(check_coverage("s", &[(0, 4), (5, 9)], 0, 9), Ok(()));
        assert_eq!(check_coverage("s", &[(5, 9), (0, 4)], 0, 9), Ok(()));
        assert_eq!(
            check_coverage("s", &[(0, 4), (6, 8)], 0, 11),
            Err(ComposeError::Gap {
                session_id: "s".into(),
                span_lo: 0,
                span_hi: 11,
                missing: vec![(5, 5), (9, 11)]
            })
        );
        assert_eq!(
            check_coverage("s", &[(3, 9)], 0, 9),
            Err(ComposeError::Gap {
                session_id: "s".into(),
                span_lo: 0,
                span_hi: 9,
                missing: vec![(0, 2)]
            })
        );
        assert_eq!(
            check_coverage("s", &[], 7, 9),
            Err(ComposeError::Gap {
                session_id: "s".into(),
                span_lo: 7,
                span_hi: 9,
                missing: vec![(7, 9)]
            })
        );
        assert_eq!(check_coverage("s", &[], 10, 9), Ok(()));
        assert_eq!(
            check_coverage("s", &[(u64::MAX - 1, u64::MAX)], u64::MAX - 1, u64::MAX),
            Ok(())
        );
        let err = check_coverage("session-x", &[(0, 4), (6, 9)], 0, 9).expect_err("gap");
        assert!(
            err.to_string().contains("seqs 5 of session session-x")
                && !err.to_string().contains("[("),
            "{err}"
        );
    }

    #[test]
    fn coverage_guard_names_overlaps() {
        let overlap = |v: Vec<(u64, u64)>| {
            Err(ComposeError::Overlap {
                session_id: "s".into(),
                overlap: v,
            })
        };
        assert_eq!(
            check_coverage("s", &[(0, 5), (3, 9)], 0, 9),
            overlap(vec![(3, 5)])
        );
        assert_eq!(
            check_coverage("s", &[(0, 9), (0, 9)], 0, 9),
            overlap(vec![(0, 9)])
        );
        assert_eq!(
            check_coverage("s", &[(0, 12)], 2, 9),
            overlap(vec![(0, 1), (10, 12)])
        );
        assert_eq!(
            check_coverage("s", &[(0, 4), (9, 5)], 0, 9),
            overlap(vec![(9, 5)])
        );
        assert_eq!(check_coverage("s", &[(0, 0)], 10, 9), overlap(vec![(0, 0)]));
    }

    #[test]
    fn compose_refuses_overlapping_or_outside_signatures() {
        let a = sig(1, 0, 5, &[], &[], &[], 1);
        let b = sig(2, 3, 8, &[], &[], &[], 1);
        let err = compose("s", &[a.clone(), b], 0, 8, &CFG).expect_err("overlap");
        assert_eq!(
            err,
            ComposeError::Overlap {
                session_id: "s".into(),
                overlap: vec![(3, 5)]
            }
        );
        let err = compose("s", &[a.clone(), a.clone()], 0, 5, &CFG).expect_err("duplicate");
        assert_eq!(
            err,
            ComposeError::Overlap {
                session_id: "s".into(),
                overlap: vec![(0, 5)]
            }
        );
        let err = compose("s", std::slice::from_ref(&a), 2, 4, &CFG).expect_err("outside");
        assert_eq!(
            err,
            ComposeError::Overlap {
                session_id: "s".into(),
                overlap: vec![(0, 1), (5, 5)]
            }
        );
        let err = compose("s", &[a], 10, 9, &CFG).expect_err("outside an empty span");
        assert!(matches!(err, ComposeError::Overlap { .. }));
    }

    #[test]
    fn empty_inputs() {
        assert_eq!(compose("s", &[], 5, 4, &CFG), Ok(vec![]));
        assert_eq!(
            compose("s", &[], 0, 9, &CFG),
            Err(ComposeError::Gap {
                session_id: "s".into(),
                span_lo: 0,
                span_hi: 9,
                missing: vec![(0, 9)]
            })
        );
        // A signature without seqs claims nothing; the guard still sees the whole span.
        let empty = Signature {
            seqs: vec![],
            ..sig(1, 0, 0, &[], &[], &[], 1)
        };
        assert!(matches!(
            compose("s", std::slice::from_ref(&empty), 0, 9, &CFG),
            Err(ComposeError::Gap { .. })
        ));
        let chapters =
            compose("s", &[empty, sig(2, 0, 9, &[], &[], &[], 1)], 0, 9, &CFG).expect("composes");
        assert_eq!(chapters[0].members, vec![1]);
    }

    #[test]
    fn input_order_does_not_matter_and_members_index_the_input() {
        let sigs = vec![
            sig(2, 5, 9, &["b.rs"], &[], &[], 1),
            sig(1, 0, 4, &["b.rs"], &[], &[], 1),
        ];
        let chapters = compose("s", &sigs, 0, 9, &CFG).expect("composes");
        assert_eq!(chapters[0].members, vec![1, 0]);
        assert_eq!(
            chapters[0]
                .decisions
                .iter()
                .map(|d| d.turn)
                .collect::<Vec<_>>(),
            vec![1, 2]
        );
    }

    #[test]
    fn deterministic() {
        let sigs = generate(&mut XorShift(0x9e37_79b9_7f4a_7c15), 40).0;
        let hi = sigs
            .last()
            .map_or(0, |s| *s.seqs.last().expect("non-empty"));
        let first = compose("s", &sigs, 0, hi, &CFG);
        assert!(first.is_ok());
        assert_eq!(first, compose("s", &sigs, 0, hi, &CFG));
        assert_eq!(
            format!("{first:?}"),
            format!("{:?}", compose("s", &sigs, 0, hi, &CFG))
        );
    }

    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn pick<'a>(&mut self, pool: &[&'a str], max: u64) -> Vec<&'a str> {
            let k = self.below(max + 1);
            let mut out: Vec<&str> = (0..k)
                .map(|_| pool[self.below(pool.len() as u64) as usize])
                .collect();
            out.dedup();
            out
        }
    }

    /// `turns` consecutive turns from seq 0; some lose their signature. Returns the
    /// surviving signatures and the span's last seq.
    fn generate(rng: &mut XorShift, turns: u64) -> (Vec<Signature>, u64) {
        const PATHS: &[&str] = &[
            "src/a.rs",
            "src/b.rs",
            "src/a",
            "docs/x.md",
            "SRC/B.RS",
            "tests/t.rs",
            "c.ts",
        ];
        const COMMANDS: &[&str] = &["cargo test", "git diff", "npm test", "git commit"];
        const TERMS: &[&str] = &["auth", "render", "token", "deploy", "cache", "index"];
        let mut sigs = Vec::new();
        let mut seq = 0;
        for turn in 1..=turns {
            let len = 1 + rng.below(8);
            let (lo, hi) = (seq, seq + len - 1);
            seq += len;
            if rng.below(7) == 0 {
                continue;
            }
            let (p, c, t) = (
                rng.pick(PATHS, 4),
                rng.pick(COMMANDS, 2),
                rng.pick(TERMS, 3),
            );
            sigs.push(sig(turn, lo, hi, &p, &c, &t, rng.below(5000)));
        }
        (sigs, seq.saturating_sub(1))
    }

    #[test]
    fn property_chapters_tile_the_span_and_keep_members_in_order() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        for trial in 0..400 {
            let turns = rng.below(30);
            let (mut sigs, hi) = generate(&mut rng, turns);
            if trial % 3 == 0 {
                sigs.reverse();
            }
            let cfg = ComposeConfig {
                merge_threshold: [0.0, 0.3, 0.9, 1.1][rng.below(4) as usize],
                chapter_limit: [0, 3000, 8000, u64::MAX][rng.below(4) as usize],
            };
            let span_hi = if turns == 0 { 0 } else { hi };
            let span_lo = if turns == 0 { 1 } else { 0 };
            let result = compose("s", &sigs, span_lo, span_hi, &cfg);
            if sigs.is_empty() {
                if turns == 0 {
                    assert_eq!(result, Ok(vec![]));
                } else {
                    assert!(
                        matches!(result, Err(ComposeError::Gap { .. })),
                        "trial {trial}"
                    );
                }
                continue;
            }
            let chapters = result.unwrap_or_else(|e| panic!("trial {trial}: {e}"));
            assert_eq!(chapters[0].seq_lo, span_lo, "trial {trial}");
            assert_eq!(
                chapters.last().map(|c| c.seq_hi),
                Some(span_hi),
                "trial {trial}"
            );
            for w in chapters.windows(2) {
                assert_eq!(
                    w[0].seq_hi + 1,
                    w[1].seq_lo,
                    "trial {trial}: chapters must be contiguous"
                );
            }
            let mut expected: Vec<usize> = (0..sigs.len()).collect();
            expected.sort_by_key(|&i| sigs[i].seqs[0]);
            let members: Vec<usize> = chapters
                .iter()
                .flat_map(|c| c.members.iter().copied())
                .collect();
            assert_eq!(
                members, expected,
                "trial {trial}: every signature once, in seq order"
            );
            assert_eq!(chapters[0].decisions[0].rule, Rule::Open);
            for c in &chapters {
                assert_eq!(c.decisions.len(), c.members.len());
                assert!(c.topics.len() <= MAX_TOPICS);
                for &m in &c.members {
                    let s = &sigs[m];
                    assert!(c.seq_lo <= s.seqs[0] && *s.seqs.last().expect("seqs") <= c.seq_hi);
                }
                assert_eq!(c.size, c.members.iter().map(|&m| sigs[m].size).sum::<u64>());
                let fits = c.members.len() == 1
                    || c.size <= cfg.chapter_limit.saturating_mul(OVERFLOW_FACTOR);
                assert!(
                    fits,
                    "trial {trial}: only a lone turn may exceed three times the limit"
                );
                for d in &c.decisions[1..] {
                    assert!(matches!(
                        d.rule,
                        Rule::Overlap
                            | Rule::PrimaryPath
                            | Rule::NoSignal
                            | Rule::BriefFollowUp
                            | Rule::Discussion
                    ));
                }
            }
            for c in &chapters[1..] {
                assert!(matches!(
                    c.decisions[0].rule,
                    Rule::TopicChange | Rule::SizeLimit | Rule::AfterCommit
                ));
            }
        }
    }

    #[test]
    fn opening_decision_matches_an_uninterrupted_run() {
        let cfg = ComposeConfig {
            merge_threshold: 0.3,
            chapter_limit: 1000,
        };
        let a1 = sig(1, 0, 9, &["src/auth.rs"], &["cargo test"], &["auth"], 100);
        let a2 = sig(2, 10, 19, &["src/auth.rs"], &["cargo test"], &["auth"], 100);
        let b = sig(
            3,
            20,
            29,
            &["docs/csv.md"],
            &["make docs"],
            &["csv", "export"],
            100,
        );
        // Uninterrupted: b opens by a topic change after the auth chapter.
        let whole =
            compose("s", &[a1.clone(), a2.clone(), b.clone()], 0, 29, &cfg).expect("compose");
        let expected = whole[1].decisions[0].clone();
        assert_eq!(expected.rule, Rule::TopicChange);
        assert_eq!(
            opening_decision("s", &[a1.clone(), a2.clone()], &b, &cfg),
            Some(expected)
        );
        // On topic with a chapter an earlier archive already wrote: a boundary, said so.
        let a3 = sig(4, 20, 29, &["src/auth.rs"], &["cargo test"], &["auth"], 100);
        let d = opening_decision("s", &[a1, a2], &a3, &cfg).expect("decision");
        assert_eq!(d.rule, Rule::ArchiveBoundary);
        assert_eq!(opening_decision("s", &[], &b, &cfg), None);
    }

    /// The two entry points agree: [`Online`], fed the signatures one by one (with the
    /// hole-making gaps and a prior chapter), equals [`compose`] over all of them (plus
    /// [`opening_decision`] for the first chapter), in every field: a pseudo-random sweep
    /// over topics, paths, sizes and gaps.
    #[test]
    fn online_equals_compose() {
        let words = [
            "auth", "token", "csv", "header", "cache", "index", "parser", "retry",
        ];
        let files = [
            "src/auth.rs",
            "src/csv.rs",
            "SRC/Auth.ts",
            "src/cache.rs",
            "docs/x.md",
        ];
        let cmds = ["cargo test", "cargo build", "make", "git push"];
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for case in 0..300 {
            let mut sigs = Vec::new();
            let mut seq = next(3);
            let span_lo = 0;
            let turns = 1 + next(25);
            for turn in 0..turns {
                let len = 1 + next(6);
                let pick = |n: u64, pool: &[&'static str], r: &mut dyn FnMut(u64) -> u64| {
                    (0..n)
                        .map(|_| pool[r(pool.len() as u64) as usize])
                        .collect::<Vec<_>>()
                };
                let t = pick(next(4), &words, &mut next);
                let p = pick(next(3), &files, &mut next);
                let c = pick(next(2), &cmds, &mut next);
                let dedup = |v: Vec<&'static str>| {
                    let mut out: Vec<&'static str> = Vec::new();
                    for x in v {
                        if !out.contains(&x) {
                            out.push(x);
                        }
                    }
                    out
                };
                let (t, p, c) = (dedup(t), dedup(p), dedup(c));
                let size = 1 + next(300);
                sigs.push(sig(turn, seq, seq + len - 1, &p, &c, &t, size));
                seq += len + next(3); // sometimes a hole
            }
            let span_hi = seq + next(3);
            let cfg = ComposeConfig {
                merge_threshold: [0.2, 0.35, 0.5][(case % 3) as usize],
                chapter_limit: 200 + next(600),
            };
            // Sometimes the span starts after a prior chapter written earlier.
            let split = if case % 4 == 0 {
                (turns / 2) as usize
            } else {
                0
            };
            let (prior, rest) = sigs.split_at(split);
            let lo = rest.first().map_or(span_lo, |s| s.seqs[0]);
            let mut want = compose("s", rest, lo, span_hi, &cfg).unwrap();
            if let (Some(first), false) = (want.first_mut(), prior.is_empty()) {
                if let Some(d) = opening_decision("s", prior, &rest[0], &cfg) {
                    first.decisions[0] = d;
                }
            }
            let mut online = Online::new("s", cfg.clone(), lo, prior.to_vec());
            let mut got = Vec::new();
            for s in rest {
                got.extend(online.push(s.clone()).unwrap());
            }
            got.extend(online.finish(span_hi).unwrap());
            assert_eq!(got, want, "case {case}");
        }
    }

    #[test]
    fn online_refuses_what_compose_refuses() {
        let mut online = Online::new("s", CFG, 10, Vec::new());
        assert!(matches!(
            online.push(sig(0, 5, 12, &[], &[], &["a"], 1)),
            Err(ComposeError::Overlap { .. })
        ));
        online.push(sig(1, 10, 14, &[], &[], &["a"], 1)).unwrap();
        assert!(matches!(
            online.push(sig(2, 14, 16, &[], &[], &["a"], 1)),
            Err(ComposeError::Overlap { .. })
        ));
        let empty = Online::new("s", CFG, 3, Vec::new());
        assert!(matches!(empty.finish(9), Err(ComposeError::Gap { .. })));
        assert_eq!(
            Online::new("s", CFG, 3, Vec::new()).finish(2).unwrap(),
            None
        );
        let mut beyond = Online::new("s", CFG, 0, Vec::new());
        beyond.push(sig(0, 0, 9, &[], &[], &["a"], 1)).unwrap();
        assert!(matches!(
            beyond.finish(5),
            Err(ComposeError::Overlap { .. })
        ));
    }
}

//! When a workspace's archive and sync moments fire, given what happened and the clock.
//! Pure: the runtime feeds events and clock values (ms) in and acts on the decisions.
//!
//! Moments (README "Archive moments", record §5.1):
//! - compaction in a log → archive now (reason `compaction`), then a debounced push;
//! - a fork (a new session naming `parentSession`) → pull, archive the parent, push;
//! - a new session of a linked workspace → pull;
//! - idle: no append for `idleArchiveMs` while completed turns wait → archive (reason
//!   `idle`), then push at once;
//! - after any other archive → push when `syncDebounceMs` has passed since the first
//!   archive not yet pushed (archives inside the window coalesce into one push);
//! - enrichment (`EnrichClock`) → after chapters were written, on a push or after
//!   `enrichmentIdleMs` without an append, as `enrichmentTrigger` says.
//!
//! A failed sync backs off: the n-th failure in a row blocks syncs for
//! `syncDebounceMs × 2^(n-1)`, at most [`MAX_BACKOFF_MS`]; a success clears it.

use crate::config::EnrichmentTrigger;

/// The longest a run of sync failures blocks the next sync: one hour.
pub const MAX_BACKOFF_MS: u64 = 3_600_000;

/// The two tunables the moments depend on (the workspace's config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    pub idle_archive_ms: u64,
    pub sync_debounce_ms: u64,
}

/// What is due for one workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// No append for the idle time while completed turns wait.
    IdleArchive,
    /// The debounced push after archives.
    Push,
}

/// One workspace's clock state.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkspaceClock {
    last_append_ms: Option<i64>,
    /// A completed turn arrived that no archive has run over since.
    turns_waiting: bool,
    /// The debounced push's due time, set by the first archive after the last push.
    push_due_ms: Option<i64>,
    sync_failures: u32,
    sync_blocked_until_ms: Option<i64>,
}

fn add_ms(at: i64, ms: u64) -> i64 {
    at.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))
}

impl WorkspaceClock {
    /// A log of the workspace grew (or was first seen, with its modification time).
    pub fn on_append(&mut self, now_ms: i64) {
        self.last_append_ms = Some(self.last_append_ms.map_or(now_ms, |t| t.max(now_ms)));
    }

    /// A completed turn was read (whether this run signed it or found it signed).
    pub fn on_turn_completed(&mut self) {
        self.turns_waiting = true;
    }

    /// An archive of the workspace started: the turns it reads are covered by it.
    pub fn on_archive_started(&mut self) {
        self.turns_waiting = false;
    }

    /// An archive finished; `wrote` whether it wrote chapters. Schedules the debounced
    /// push (not moved by later archives: a steady stream still pushes every window).
    pub fn on_archive_done(&mut self, now_ms: i64, wrote: bool, timing: Timing) {
        if wrote && self.push_due_ms.is_none() {
            self.push_due_ms = Some(add_ms(now_ms, timing.sync_debounce_ms));
        }
    }

    /// A push was started: the pending push is taken.
    pub fn on_push_started(&mut self) {
        self.push_due_ms = None;
    }

    /// A sync (pull or push) finished.
    pub fn on_sync_result(&mut self, now_ms: i64, ok: bool, timing: Timing) {
        if ok {
            self.sync_failures = 0;
            self.sync_blocked_until_ms = None;
            return;
        }
        self.sync_failures = self.sync_failures.saturating_add(1);
        let shift = self.sync_failures.saturating_sub(1).min(32);
        let backoff = timing
            .sync_debounce_ms
            .max(1)
            .saturating_mul(1u64 << shift)
            .min(MAX_BACKOFF_MS);
        self.sync_blocked_until_ms = Some(add_ms(now_ms, backoff));
    }

    /// Whether a sync may start now (not inside a failure backoff).
    pub fn sync_allowed(&self, now_ms: i64) -> bool {
        self.sync_blocked_until_ms
            .is_none_or(|until| now_ms >= until)
    }

    pub fn sync_failures(&self) -> u32 {
        self.sync_failures
    }

    pub fn push_due_ms(&self) -> Option<i64> {
        self.push_due_ms
    }

    fn idle_at(&self, timing: Timing) -> Option<i64> {
        if !self.turns_waiting {
            return None;
        }
        self.last_append_ms
            .map(|t| add_ms(t, timing.idle_archive_ms))
    }

    fn push_at(&self) -> Option<i64> {
        let due = self.push_due_ms?;
        Some(due.max(self.sync_blocked_until_ms.unwrap_or(i64::MIN)))
    }

    /// What is due at `now_ms`. A push is due only for a linked workspace.
    pub fn due(&self, now_ms: i64, timing: Timing, linked: bool) -> Vec<Due> {
        let mut out = Vec::new();
        if self.idle_at(timing).is_some_and(|at| now_ms >= at) {
            out.push(Due::IdleArchive);
        }
        if linked && self.push_at().is_some_and(|at| now_ms >= at) {
            out.push(Due::Push);
        }
        out
    }

    /// The next time something may become due, for the runtime's sleep.
    pub fn next_deadline(&self, timing: Timing, linked: bool) -> Option<i64> {
        let push = if linked { self.push_at() } else { None };
        [self.idle_at(timing), push].into_iter().flatten().min()
    }
}

/// Which archive a newly seen session asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewSession {
    /// A fork of `parent`: pull (when linked), archive the parent, push (when linked).
    Fork { parent: String },
    /// A fresh session of a linked workspace: pull, so its first turn sees a current pool.
    Pull,
    /// Nothing to do (not linked).
    Nothing,
}

/// Decide what a session first seen while the daemon runs asks for. Sessions found at
/// start-up are not new: they were there before the daemon.
pub fn on_new_session(parent: Option<&str>, own_id: &str, linked: bool) -> NewSession {
    match parent {
        Some(p) if !p.is_empty() && p != own_id => NewSession::Fork {
            parent: p.to_owned(),
        },
        _ if linked => NewSession::Pull,
        _ => NewSession::Nothing,
    }
}

/// Whether an event of this type marks a compaction worth an archive: the compaction's
/// finalization (`compaction/end`), or its summary when a log has no end event — the
/// runtime coalesces both into one archive per batch read.
pub fn is_compaction(kind: &str) -> bool {
    matches!(kind, "compaction/end" | "compaction/summary")
}

/// Whether an event of any harness marks a compaction: DSH's compaction events, or the
/// summary another harness writes after compacting (a user message its reader gives the
/// compaction-summary source kind: Claude Code's `isCompactSummary` line, Codex's
/// `compacted` line).
pub fn is_compaction_event(event: &crate::session::Event) -> bool {
    is_compaction(&event.kind)
        || event
            .user_message()
            .is_some_and(|m| m.source.kind == crate::source::COMPACTION_SUMMARY)
}

/// When an idle-time enrichment batch is due for one workspace (record §6.2): never per
/// turn; after a push or after `enrichmentIdleMs` without an append, as `enrichmentTrigger`
/// says, and only when archives wrote chapters since the last batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EnrichClock {
    /// Chapters were written that no batch has looked at since.
    pending: bool,
    /// A push succeeded since those chapters were written.
    pushed: bool,
    last_append_ms: Option<i64>,
    /// The last batch backed off: nothing before this time.
    not_before_ms: Option<i64>,
}

impl EnrichClock {
    pub fn on_append(&mut self, now_ms: i64) {
        self.last_append_ms = Some(self.last_append_ms.map_or(now_ms, |t| t.max(now_ms)));
    }

    pub fn on_chapters_written(&mut self) {
        self.pending = true;
    }

    pub fn on_push_ok(&mut self) {
        if self.pending {
            self.pushed = true;
        }
    }

    pub fn on_batch_started(&mut self) {
        self.pending = false;
        self.pushed = false;
    }

    /// A batch ended; `more` when chapters still wait (the batch cap, or a stop), and
    /// `not_before_ms` when the endpoint is backing off.
    pub fn on_batch_done(&mut self, more: bool, not_before_ms: Option<i64>) {
        self.pending |= more;
        self.not_before_ms = not_before_ms;
    }

    /// When the next batch is due, if one is waiting; `None` for `manual`.
    pub fn due_at(&self, trigger: EnrichmentTrigger, idle_ms: u64) -> Option<i64> {
        if !self.pending || trigger == EnrichmentTrigger::Manual {
            return None;
        }
        let after_push =
            matches!(trigger, EnrichmentTrigger::Push | EnrichmentTrigger::Both) && self.pushed;
        let after_idle = matches!(trigger, EnrichmentTrigger::Idle | EnrichmentTrigger::Both)
            .then(|| add_ms(self.last_append_ms.unwrap_or(0), idle_ms));
        let at = match (after_push, after_idle) {
            (true, _) => i64::MIN,
            (false, Some(at)) => at,
            (false, None) => return None,
        };
        Some(at.max(self.not_before_ms.unwrap_or(i64::MIN)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing {
        idle_archive_ms: 1000,
        sync_debounce_ms: 300,
    };

    #[test]
    fn idle_fires_only_with_turns_waiting_and_after_quiet() {
        let mut c = WorkspaceClock::default();
        assert!(c.due(10_000, T, true).is_empty(), "nothing happened yet");
        c.on_append(100);
        assert!(c.due(5_000, T, true).is_empty(), "no completed turn waits");
        c.on_turn_completed();
        assert!(c.due(1_099, T, true).is_empty(), "not quiet long enough");
        assert_eq!(c.due(1_100, T, false), vec![Due::IdleArchive]);
        assert_eq!(c.next_deadline(T, false), Some(1_100));
        // A later append pushes the idle moment back.
        c.on_append(1_050);
        assert!(c.due(1_100, T, true).is_empty());
        assert_eq!(c.next_deadline(T, true), Some(2_050));
        // Once archived, the same quiet period does not fire again.
        c.on_archive_started();
        assert!(c.due(9_999, T, true).is_empty());
        assert_eq!(c.next_deadline(T, true), None);
    }

    #[test]
    fn an_older_modification_time_never_moves_the_clock_back() {
        let mut c = WorkspaceClock::default();
        c.on_append(5_000);
        c.on_append(1_000);
        c.on_turn_completed();
        assert_eq!(c.next_deadline(T, false), Some(6_000));
    }

    #[test]
    fn archives_inside_the_window_coalesce_into_one_push() {
        let mut c = WorkspaceClock::default();
        c.on_archive_done(1_000, true, T);
        c.on_archive_done(1_200, true, T);
        assert!(c.due(1_299, T, true).is_empty());
        assert_eq!(c.due(1_300, T, true), vec![Due::Push]);
        assert!(
            c.due(1_300, T, false).is_empty(),
            "not linked: never a push"
        );
        c.on_push_started();
        assert!(c.due(99_999, T, true).is_empty());
        // An archive that wrote nothing schedules nothing.
        c.on_archive_done(2_000, false, T);
        assert_eq!(c.push_due_ms(), None);
    }

    #[test]
    fn failures_back_off_exponentially_capped_and_success_clears() {
        let mut c = WorkspaceClock::default();
        c.on_sync_result(0, false, T);
        assert!(!c.sync_allowed(299));
        assert!(c.sync_allowed(300));
        c.on_sync_result(300, false, T);
        assert!(!c.sync_allowed(899), "second failure: 600 ms");
        assert!(c.sync_allowed(900));
        for _ in 0..100 {
            c.on_sync_result(0, false, T);
        }
        assert!(!c.sync_allowed(MAX_BACKOFF_MS as i64 - 1));
        assert!(c.sync_allowed(MAX_BACKOFF_MS as i64));
        assert_eq!(c.sync_failures(), 102);
        // A push due during the backoff waits for its end.
        c.on_archive_done(0, true, T);
        assert!(c.due(1_000, T, true).is_empty());
        assert_eq!(c.next_deadline(T, true), Some(MAX_BACKOFF_MS as i64));
        c.on_sync_result(10, true, T);
        assert!(c.sync_allowed(10));
        assert_eq!(c.sync_failures(), 0);
        assert_eq!(c.due(1_000, T, true), vec![Due::Push]);
    }

    #[test]
    fn zero_debounce_still_backs_off() {
        let t = Timing {
            idle_archive_ms: 1,
            sync_debounce_ms: 0,
        };
        let mut c = WorkspaceClock::default();
        c.on_sync_result(0, false, t);
        assert!(!c.sync_allowed(0));
        assert!(c.sync_allowed(1));
    }

    #[test]
    fn huge_clock_values_saturate() {
        let t = Timing {
            idle_archive_ms: u64::MAX,
            sync_debounce_ms: u64::MAX,
        };
        let mut c = WorkspaceClock::default();
        c.on_append(i64::MAX - 1);
        c.on_turn_completed();
        assert_eq!(c.next_deadline(t, true), Some(i64::MAX));
        c.on_archive_done(i64::MAX, true, t);
        assert_eq!(c.push_due_ms(), Some(i64::MAX));
    }

    #[test]
    fn new_sessions() {
        assert_eq!(
            on_new_session(Some("session-p"), "session-c", false),
            NewSession::Fork {
                parent: "session-p".into()
            }
        );
        assert_eq!(on_new_session(None, "s", true), NewSession::Pull);
        assert_eq!(on_new_session(None, "s", false), NewSession::Nothing);
        // A header naming itself or an empty parent is no fork.
        assert_eq!(on_new_session(Some("s"), "s", false), NewSession::Nothing);
        assert_eq!(on_new_session(Some(""), "s", true), NewSession::Pull);
    }

    #[test]
    fn compaction_kinds() {
        assert!(is_compaction("compaction/end"));
        assert!(is_compaction("compaction/summary"));
        assert!(!is_compaction("compaction/start"));
        assert!(!is_compaction("compaction/prune"));
        assert!(!is_compaction("turn/end"));
    }

    #[test]
    fn enrichment_waits_for_chapters_then_a_push_or_the_idle_time() {
        use crate::config::EnrichmentTrigger as T;
        let mut c = EnrichClock::default();
        c.on_append(1_000);
        assert_eq!(
            c.due_at(T::Both, 60_000),
            None,
            "nothing archived: nothing to enrich"
        );
        c.on_chapters_written();
        assert_eq!(c.due_at(T::Both, 60_000), Some(61_000));
        assert_eq!(
            c.due_at(T::Push, 60_000),
            None,
            "push mode waits for a push"
        );
        assert_eq!(c.due_at(T::Manual, 60_000), None);
        c.on_append(5_000);
        assert_eq!(
            c.due_at(T::Idle, 60_000),
            Some(65_000),
            "an append postpones it"
        );
        c.on_push_ok();
        assert_eq!(c.due_at(T::Push, 60_000), Some(i64::MIN));
        assert_eq!(c.due_at(T::Idle, 60_000), Some(65_000));
        c.on_batch_started();
        assert_eq!(c.due_at(T::Both, 60_000), None);
        // The cap left chapters, and the endpoint backs off until 200_000.
        c.on_batch_done(true, Some(200_000));
        assert_eq!(c.due_at(T::Both, 60_000), Some(200_000));
        c.on_batch_done(false, None);
        assert_eq!(
            c.due_at(T::Both, 60_000),
            Some(65_000),
            "still pending from before"
        );
    }
}

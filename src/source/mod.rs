//! The harness seam: where an agent's session logs live and how their bytes become the
//! normalized [`Event`](crate::session::Event)s the turn assembler takes.
//!
//! A harness is four things, each in its own folder here:
//! - **discovery**: where its logs live and how a session maps to a workspace;
//! - **a reader** ([`EventSource`]): bytes → one [`Header`] then events with ascending
//!   `seq` (`user/message` with a source kind, `assistant/message`, `tool/call`,
//!   `tool/result`, `turn/end`), streaming, bounded memory, resumable from a
//!   [`ResumePoint`];
//! - **its screen**: which of its user-role messages the host injected, said by the source
//!   kind the reader gives them (anything but `user` is screened by `injection`);
//! - **its tool vocabulary**: its tools' names and arguments mapped onto the shared one
//!   (`signature`: shell tools' `command`, path-named arguments).
//!
//! Everything after the seam (turn, signature, compose, render, redact, store, pool) is
//! shared and does not know which harness wrote the log. DSH's implementation delegates to
//! `session::…` (a later move may put those files under `source/dsh/`).

use std::path::Path;

use crate::session::reader::{LogItem, LogReader, ReadError, ReadNote, ReaderOptions, ResumePoint};
use crate::session::Header;

pub use discovery::{FollowCache, LogTree, TreeHarness};

pub mod claude_code;
pub mod codex;
pub mod discovery;
pub(crate) mod lines;

/// The source kind of a harness's compaction summary (Claude Code's `isCompactSummary`
/// line, Codex's `compacted` line): the harness's text, not the person's — screened as a
/// marked note, and the daemon's compaction moment (`daemon::triggers`).
pub const COMPACTION_SUMMARY: &str = "compact-checkpoint";

/// The source kind of another agent's words relayed to this one (a peer session's message,
/// a parent's task to its subagent): DSH's `agent-message`, form `relay` — conversation,
/// never the person's terms.
pub(crate) const RELAYED: &str = "agent-message";

/// The source kind of a delegate's report to the agent that delegated to it (a background
/// subagent's final message): DSH's `subagent-settled`, form `notice` — conversation by the
/// design's amendment of 2026-10-22, never the person's terms.
pub(crate) const DELEGATE_REPORT: &str = "subagent-settled";

/// The source kind of a teammate's message in an agent team (the lead's task to a member
/// among them): DSH's `team-message` — conversation, never the person's terms.
pub(crate) const TEAM_MESSAGE: &str = "team-message";

/// The `source` of a user-role message a reader writes: of `kind` (with the form DSH gives
/// that kind), or relayed ([`RELAYED`]) when `relayed`.
pub(crate) fn user_source(kind: &str, relayed: bool) -> serde_json::Value {
    match (relayed, kind) {
        (true, _) | (_, RELAYED) => serde_json::json!({"kind": RELAYED, "form": "relay"}),
        (_, DELEGATE_REPORT) => serde_json::json!({"kind": DELEGATE_REPORT, "form": "notice"}),
        _ => serde_json::json!({ "kind": kind }),
    }
}

/// The agents whose logs are archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Harness {
    Dsh,
    ClaudeCode,
    Codex,
}

impl Harness {
    /// The name frontmatter (`harness:`), search filters and notes use.
    pub fn name(self) -> &'static str {
        match self {
            Harness::Dsh => "dsh",
            Harness::ClaudeCode => "claude-code",
            Harness::Codex => "codex",
        }
    }

    /// The prefix of this harness's session ids in the store, so that they never collide
    /// with another harness's (DSH's ids are kept as they are).
    pub fn session_prefix(self) -> &'static str {
        match self {
            Harness::Dsh => "",
            Harness::ClaudeCode => "claude-code-",
            Harness::Codex => "codex-",
        }
    }

    /// The name a person reads in notes (`Claude Code`).
    pub fn title(self) -> &'static str {
        match self {
            Harness::Dsh => "DSH",
            Harness::ClaudeCode => "Claude Code",
            Harness::Codex => "Codex",
        }
    }

    /// Its discovery and reader, for a harness whose logs lie in trees of its own home;
    /// `None` for DSH (session directories keyed by workspace, `session::discover`).
    pub fn tree_harness(self) -> Option<&'static dyn TreeHarness> {
        tree_harnesses()
            .into_iter()
            .find(|imp| imp.harness() == self)
    }
}

/// A harness's reader: one header, then events in ascending `seq` order. After `Ok(None)`
/// or an error the source is done; a later one opens at [`EventSource::resume_point`].
pub trait EventSource {
    fn next_item(&mut self) -> Result<Option<LogItem>, ReadError>;
    /// Where a later reader should resume.
    fn resume_point(&self) -> ResumePoint;
    /// Non-fatal notes gathered so far.
    fn notes(&self) -> &[ReadNote];
}

impl EventSource for LogReader {
    fn next_item(&mut self) -> Result<Option<LogItem>, ReadError> {
        LogReader::next_item(self)
    }
    fn resume_point(&self) -> ResumePoint {
        LogReader::resume_point(self)
    }
    fn notes(&self) -> &[ReadNote] {
        LogReader::notes(self)
    }
}

/// How a source reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SourceOptions {
    pub reader: ReaderOptions,
    /// A log untouched this long (`idleArchiveMs`) is quiet: a harness whose logs have no
    /// turn-end record of their own ends an answered exchange at the log's end. `None`:
    /// never.
    pub quiet_after_ms: Option<u64>,
}

/// Whether `path` was last modified at least `after_ms` ago.
pub(crate) fn is_quiet(path: &Path, after_ms: Option<u64>) -> bool {
    let Some(after_ms) = after_ms else {
        return false;
    };
    let modified = std::fs::metadata(path).and_then(|m| m.modified());
    match modified.map(|m| m.elapsed()) {
        Ok(Ok(age)) => age.as_millis() >= u128::from(after_ms),
        _ => false,
    }
}

/// Open `harness`'s log at `path` for reading from `from`.
pub fn open(
    harness: Harness,
    path: &Path,
    from: ResumePoint,
    options: SourceOptions,
) -> Result<Box<dyn EventSource>, ReadError> {
    match harness.tree_harness() {
        Some(imp) => imp.open(path, from, options),
        None => Ok(Box::new(LogReader::open_with(path, from, options.reader)?)),
    }
}

/// Open a followed log of `harness`: `cache` keeps what one poll learnt for the next.
pub fn open_followed(
    harness: Harness,
    path: &Path,
    from: ResumePoint,
    options: SourceOptions,
    cache: &mut FollowCache,
) -> Result<Box<dyn EventSource>, ReadError> {
    match harness.tree_harness() {
        Some(imp) => imp.open_followed(path, from, options, cache),
        None => open(harness, path, from, options),
    }
}

/// The header of `harness`'s log at `path`, or `None` when the log has none yet.
pub fn read_header(
    harness: Harness,
    path: &Path,
    options: SourceOptions,
) -> Result<Option<Header>, ReadError> {
    let mut reader = open(harness, path, ResumePoint::default(), options)?;
    match reader.next_item()? {
        Some(LogItem::Header(h)) => Ok(Some(h)),
        _ => Ok(None),
    }
}

/// The harnesses whose logs lie in trees under a home of their own: every harness but
/// DSH. A new harness is a folder here and one line in this list.
pub fn tree_harnesses() -> [&'static dyn TreeHarness; 2] {
    [
        &claude_code::discovery::ClaudeCode,
        &codex::discovery::Codex,
    ]
}

/// The sessions of `workspace` written by the harnesses other than DSH (their cwd the
/// workspace or inside it, here or through the config's `pathMap`), each home found
/// from the environment (`CLAUDE_CONFIG_DIR` / `~/.claude`, `CODEX_HOME` / `~/.codex`),
/// and a note for each home that could not be listed; a harness its config switch
/// (`claudeCodeSessions`, `codexSessions`) turns off is not looked for.
pub fn other_harness_sessions(
    workspace: &str,
    config: &crate::config::Config,
) -> (
    Vec<(Harness, crate::session::discover::SessionLog)>,
    Vec<String>,
) {
    let mut found = Vec::new();
    let mut notes = Vec::new();
    for imp in tree_harnesses() {
        if !discovery::enabled(imp, config) {
            continue;
        }
        let Some(home) = imp.home_from_env() else {
            continue;
        };
        match imp.list_workspace_sessions(&home, workspace, &config.path_map) {
            Ok(logs) => found.extend(logs.into_iter().map(|l| (imp.harness(), l))),
            Err(e) => notes.push(format!(
                "{} sessions not listed: {e}",
                imp.harness().title()
            )),
        }
    }
    (found, notes)
}

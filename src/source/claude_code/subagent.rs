//! A subagent's work, folded into the parent turn's `Task` call.
//!
//! A `Task` (or `Agent`) call spawns a subagent whose lines are a sidechain: `isSidechain`,
//! the parent's `sessionId`, `agentId`. Where they live depends on the version:
//! - 2.1: `<sessionId>/subagents/agent-<agentId>.jsonl`, named by the call's result
//!   (`toolUseResult.agentId`);
//! - ≤ 2.0: `agent-<id>.jsonl` beside the session, found by the parent's `sessionId` and
//!   the call's prompt (the agent's first line);
//! - older files hold the sidechain lines in the session file itself.
//!
//! The subagent's tool calls and their results become events of the parent's turn, just
//! before the `Task` result (their call ids prefixed with the agent's, so they never
//! collide); a call with no result is left out. `agent-acompact-*` is the compaction
//! summarizer, not work: it is never folded (the summary reaches the chapter as a marked
//! note). Not a session of its own either way.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::line::{content_text, Block, Content, Line};
use super::screen;
use crate::source::lines::{Lines, Next};

/// The most subagent calls folded into one `Task` call (each is two events).
pub(crate) const MAX_FOLDED: usize = 1000;
/// Lines read, at most, to match a ≤ 2.0 agent file beside the session.
const HEAD_LINES: usize = 8;

/// One subagent call and, once seen, its result.
pub(crate) struct SideCall {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
    pub(crate) result: Option<(String, bool)>,
}

/// A subagent's calls, in the order it made them.
#[derive(Default)]
pub(crate) struct SideWork {
    calls: Vec<SideCall>,
    by_id: HashMap<String, usize>,
}

impl SideWork {
    /// Gather one sidechain line's calls and results (`prefix` names the agent).
    pub(crate) fn add(&mut self, line: Line, prefix: &str) {
        let Some(msg) = line.message else { return };
        let Some(Content::Blocks(blocks)) = msg.content else {
            return;
        };
        for b in blocks {
            match b.kind.as_deref() {
                Some("tool_use") | Some("server_tool_use") => {
                    if self.calls.len() >= MAX_FOLDED {
                        continue;
                    }
                    let id = format!("{prefix}/{}", b.id.unwrap_or_default());
                    let arguments = b.input.map_or_else(|| "{}".to_owned(), |v| v.to_string());
                    self.by_id.insert(id.clone(), self.calls.len());
                    self.calls.push(SideCall {
                        id,
                        name: b.name.unwrap_or_default(),
                        arguments,
                        result: None,
                    });
                }
                Some("tool_result") => self.answer(b, prefix),
                _ => {}
            }
        }
    }

    fn answer(&mut self, b: Block, prefix: &str) {
        let id = format!("{prefix}/{}", b.tool_use_id.unwrap_or_default());
        if let Some(&i) = self.by_id.get(&id) {
            let content = screen::screen_tool_output(content_text(b.content));
            self.calls[i].result = Some((content, b.is_error == Some(true)));
        }
    }

    /// The calls that have their result, in order.
    pub(crate) fn answered(self) -> impl Iterator<Item = SideCall> {
        self.calls.into_iter().filter(|c| c.result.is_some())
    }

    /// Add `other`'s calls after these.
    pub(crate) fn extend(&mut self, other: SideWork) {
        for c in other.calls {
            if self.calls.len() >= MAX_FOLDED {
                break;
            }
            self.by_id.insert(c.id.clone(), self.calls.len());
            self.calls.push(c);
        }
    }
}

/// Whether an agent id names the compaction summarizer.
pub(crate) fn is_summarizer(agent_id: &str) -> bool {
    agent_id.starts_with("acompact")
}

/// The transcript of the subagent a `Task` call spawned: by its id (2.1, then ≤ 2.0 beside
/// the session), else (≤ 2.0) the `agent-*.jsonl` beside the session whose first prompt is
/// the call's and whose `sessionId` is the parent's. `taken`: files already folded.
pub(crate) fn agent_file(
    session: &Path,
    agent_id: Option<&str>,
    session_id: Option<&str>,
    prompt: Option<&str>,
    taken: &[PathBuf],
) -> Option<PathBuf> {
    let dir = session.parent()?;
    let stem = session.file_stem()?.to_string_lossy().into_owned();
    if let Some(id) = agent_id {
        if is_summarizer(id) || id.contains(['/', '\\']) || id.contains("..") {
            return None;
        }
        let name = format!("agent-{id}.jsonl");
        for p in [
            dir.join(&stem).join("subagents").join(&name),
            dir.join(&name),
        ] {
            if p.is_file() && !taken.contains(&p) {
                return Some(p);
            }
        }
        return None;
    }
    let (session_id, prompt) = (session_id?, prompt?);
    let mut beside: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .is_some_and(|n| {
                    n.starts_with("agent-")
                        && !n.starts_with("agent-acompact")
                        && n.ends_with(".jsonl")
                })
        })
        .filter(|p| !taken.contains(p))
        .collect();
    beside.sort();
    beside
        .into_iter()
        .find(|p| first_prompt_is(p, session_id, prompt))
}

/// Whether the agent transcript at `path` belongs to `session_id` and opens with `prompt`.
fn first_prompt_is(path: &Path, session_id: &str, prompt: &str) -> bool {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Head {
        session_id: Option<String>,
        message: Option<HeadMessage>,
    }
    #[derive(Deserialize)]
    struct HeadMessage {
        content: Option<Value>,
    }
    use serde_json::Value;
    let Ok(file) = crate::session::reader::open_regular(path) else {
        return false;
    };
    for line in BufReader::new(file).split(b'\n').take(HEAD_LINES) {
        let Ok(line) = line else { return false };
        let Ok(head) = serde_json::from_slice::<Head>(&line) else {
            continue;
        };
        let Some(content) = head.message.and_then(|m| m.content) else {
            continue;
        };
        let text = match &content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n"),
            _ => continue,
        };
        return head.session_id.as_deref() == Some(session_id) && text.trim() == prompt.trim();
    }
    false
}

/// The calls of the subagent transcript at `path` (lines longer than `cap`, or of another
/// shape, skipped). An unreadable file is no work.
pub(crate) fn read_agent(path: &Path, cap: usize) -> SideWork {
    let mut work = SideWork::default();
    let prefix = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Ok(file) = crate::session::reader::open_regular(path) else {
        return work;
    };
    let mut lines = Lines::new(BufReader::with_capacity(64 * 1024, file), 0, cap);
    loop {
        match lines.next_line() {
            Ok(Next::Line { .. }) => {}
            Ok(Next::TooLong { .. }) => continue,
            Ok(Next::Torn { .. } | Next::End) | Err(_) => break,
        }
        if let Ok(line) = serde_json::from_slice::<Line>(lines.line()) {
            work.add(line, &prefix);
        }
    }
    work
}

//! The deterministic signature of one completed turn (record §4.1 with its amendments).
//! Pure. OWNER: compose helper.
//!
//! What feeds each field, and why:
//! - `terms`: only the human's own words (`source.kind == "user"`). Injected text —
//!   instruction files, skill catalogs, delegate reports — is host state or another
//!   agent's prose; letting it vote moved chapter boundaries (record §4.2, r28).
//! - `paths`: tool-call arguments declared as paths, path-looking shell arguments, paths
//!   in tool results, and unmistakable file names in the human's text (see `paths`).
//!   Ordered by first touch: `paths[0]` is the file the turn is about.
//! - `commands`: the command families (`cargo test`, `git diff`) of shell tool calls
//!   only; prose never yields a command.
//! - `size`: ceil(chars / 4) over the turn's conversation text, chars counted as Unicode
//!   scalar values: user messages archived as conversation (the human and delegate
//!   reports, `injection::is_conversation`, because they land in the chapter body),
//!   assistant text, tool-call arguments and tool-result content.

mod paths;
mod shell;
mod terms;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::injection::{is_conversation, is_human_authored, unscreened_text};
use crate::redact::{Redactable, Redacted};
use crate::session::event::MessageSource;
use crate::turn::CompletedTurn;
use paths::Strictness;
pub use paths::Workspace;
use shell::Dialect;
pub use terms::{fold_key, terms_of};

/// One collection line (`collections/<sessionId>.jsonl`), contract format plus `v`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signature {
    /// Line format version.
    pub v: u32,
    #[serde(rename = "sessionId")]
    pub session_id: String,
    pub turn: u64,
    pub seqs: Vec<u64>,
    pub paths: Vec<String>,
    pub commands: Vec<String>,
    pub terms: Vec<String>,
    pub size: u64,
    pub by: String,
    pub at: String,
    /// `reason.kind` of the turn's `turn/end`.
    pub reason: String,
}

pub const SIGNATURE_VERSION: u32 = 1;
/// Terms kept per turn (words of alphabetic scripts, joined identifiers).
pub const MAX_TERMS: usize = 8;
/// CJK terms kept per turn besides: a character bigram is half a word at best, and which
/// eight of a sentence's twenty bigrams survive a tie would be chance.
pub const MAX_CJK_TERMS: usize = 16;
/// Paths kept per turn, the first-touched first.
pub const MAX_PATHS: usize = 32;
/// Command families kept per turn.
pub const MAX_COMMANDS: usize = 16;
/// New paths one tool result may add: a directory listing or a grep over the tree
/// mentions many files without the turn touching them.
const MAX_PATHS_PER_RESULT: usize = 8;

/// Tool names whose `command`/`cmd` argument is a shell command. Sorted, lowercase.
const SHELL_TOOLS: &[&str] = &[
    "bash",
    "cmd",
    "command",
    "exec",
    "exec_command",
    "execute",
    "execute_command",
    "fish",
    "local_shell",
    "powershell",
    "pwsh",
    "run",
    "run_command",
    "run_shell_command",
    "run_terminal_cmd",
    "sh",
    "shell",
    "shell_command",
    "terminal",
    "zsh",
];

/// Argument keys whose string values are paths, compared lowercase without `_`/`-`
/// (`file_path`, `filePath`). Working directories (`cwd`, `workdir`) are deliberately
/// absent: where a tool ran is not what it touched. Sorted.
const PATH_KEYS: &[&str] = &[
    "absolutepath",
    "dir",
    "directory",
    "dirpath",
    "file",
    "filename",
    "filenames",
    "filepath",
    "filepaths",
    "files",
    "notebookpath",
    "path",
    "paths",
    "relativepath",
    "target",
    "targetfile",
    "targetpath",
];

/// Words that carry no topic (`config/stopwords.txt`, one a line, `#` comments): English
/// function words, code keywords, shell plumbing, web/path noise, and the conversational
/// filler and agent boilerplate found by measurement (see that file's header). Only words of
/// 3+ characters: shorter tokens never count. A word whose folded key (`fold_key`) is a
/// stopword's key is a stopword too (`looks`, `looking` as `look`).
const STOPWORDS_FILE: &str = include_str!("../config/stopwords.txt");

/// Hash sets: only membership is asked (every term, every CJK bigram, twice), and a
/// tree's lookup compared ~9 strings each time.
struct Stoplist {
    words: HashSet<&'static str>,
    keys: HashSet<String>,
}

fn stoplist() -> &'static Stoplist {
    static LIST: std::sync::OnceLock<Stoplist> = std::sync::OnceLock::new();
    LIST.get_or_init(|| {
        let words: HashSet<&'static str> = stopword_lines().collect();
        let keys = words.iter().map(|w| fold_key(w)).collect();
        Stoplist { words, keys }
    })
}

fn stopword_lines() -> impl Iterator<Item = &'static str> {
    STOPWORDS_FILE
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// What signing reads of one completed turn: the text of each event it looks at, with the
/// host-injected spans of user messages already left out (`injection::screen_spans`).
/// [`sign`] takes it only as `Redacted<TurnText>` (built by `Redactor::redact_all`), so
/// terms, paths and commands are derived from redacted text and a secret that a pattern
/// matches can never be lowercased, counted or cut into a signature first.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnText<'t> {
    turn: u64,
    /// The seqs of the turn's events: for DSH every seq from the first to the `turn/end`;
    /// a harness whose seqs are sparse (derived from line numbers) lists only its own.
    seqs: Vec<u64>,
    reason: String,
    items: Vec<Item<'t>>,
}

/// Each text borrowed from the turn where it can be: redaction copies only what it
/// changes, so a turn with no secret is signed without a copy of its texts.
#[derive(Debug, Clone, PartialEq)]
enum Item<'t> {
    User {
        text: Cow<'t, str>,
        source: MessageSource,
    },
    Assistant(Cow<'t, str>),
    Call {
        name: Cow<'t, str>,
        arguments: Cow<'t, str>,
    },
    Result(Cow<'t, str>),
}

impl<'t> TurnText<'t> {
    /// The texts of `turn` that signing reads (not yet redacted).
    pub fn of(turn: &'t CompletedTurn) -> TurnText<'t> {
        let items = turn
            .events
            .iter()
            .filter_map(|event| {
                if let Some(msg) = event.user_message() {
                    let text = if is_conversation(&msg.source) {
                        unscreened_text(&msg.text)
                    } else {
                        // Screened whole by the render; only its length is never read.
                        Cow::Borrowed("")
                    };
                    Some(Item::User {
                        text,
                        source: msg.source.clone(),
                    })
                } else if let Some(text) = event.assistant_text() {
                    Some(Item::Assistant(Cow::Borrowed(text)))
                } else if let Some(call) = event.tool_call() {
                    Some(Item::call(call))
                } else {
                    event
                        .tool_result()
                        .map(|result| Item::Result(Cow::Borrowed(&result.content)))
                }
            })
            .collect();
        TurnText {
            turn: turn.turn,
            seqs: turn.events.iter().map(|e| e.seq).collect(),
            reason: turn.reason.clone(),
            items,
        }
    }

    /// The tool calls of `turn` alone, all [`first_touch`] reads: a chapter's fallback name
    /// no longer redacts the turn's whole text (its tool output, most of it) to find them.
    pub fn calls_of(turn: &'t CompletedTurn) -> TurnText<'t> {
        TurnText {
            turn: turn.turn,
            seqs: Vec::new(),
            reason: String::new(),
            items: turn
                .events
                .iter()
                .filter_map(|event| event.tool_call())
                .map(Item::call)
                .collect(),
        }
    }
}

impl<'t> Item<'t> {
    fn call(call: &'t crate::session::event::ToolCall) -> Item<'t> {
        Item::Call {
            name: Cow::Borrowed(&call.name),
            arguments: Cow::Borrowed(&call.arguments),
        }
    }
}

impl Redactable for TurnText<'_> {
    fn map_text(self, f: &mut dyn FnMut(&str) -> String) -> Self {
        self.map_cow(&mut |text| Cow::Owned(f(&text)))
    }

    /// Each text handed on as it is held (borrowed from the turn, or this value's own).
    fn map_cow(mut self, f: &mut dyn for<'s> FnMut(Cow<'s, str>) -> Cow<'s, str>) -> Self {
        for item in &mut self.items {
            match item {
                Item::User { text, .. } | Item::Assistant(text) | Item::Result(text) => {
                    *text = f(std::mem::take(text));
                }
                Item::Call { name, arguments } => {
                    *name = f(std::mem::take(name));
                    *arguments = f(std::mem::take(arguments));
                }
            }
        }
        self
    }
}

/// Sign one turn from its redacted text. `workspace` is the absolute workspace root, used
/// to make paths repo-relative; `at` is the RFC 3339 time stamp to record.
/// Every tool result counts whole in `size`.
pub fn sign(
    turn: &Redacted<TurnText>,
    session_id: &str,
    workspace: &str,
    at: &str,
) -> Redacted<Signature> {
    sign_in(turn, session_id, &Workspace::new(workspace), at, u64::MAX)
}

/// What a tool result stored as an artifact leaves inline: its one reference line
/// (`**Tool result** `name` · `id` · seq N → artifact [`<sha256>.txt`](<link>) · N bytes ·
/// ~N tokens`), about this many characters: the hash twice (name and link, 64 each) and the
/// link's `../../../artifacts/<projectKey>/ab/` (a 36-character key) — 292 in the demo.
pub const ARTIFACT_STUB_CHARS: u64 = 290;

/// [`sign`] for a session seen through its workspace: the root's `pathMap` twins and the
/// session's cwd inside it (see [`Workspace::for_session`]). `size` counts what a chapter
/// holds inline: a tool result of `artifact_tokens` estimated tokens or more (the render's
/// `toolResultArtifactTokens`) becomes an artifact and counts as its reference line, so one
/// big log never pushes a task's next turn into a chapter of its own.
pub fn sign_in(
    turn: &Redacted<TurnText>,
    session_id: &str,
    ws: &Workspace,
    at: &str,
    artifact_tokens: u64,
) -> Redacted<Signature> {
    let with = SignWith {
        session_id: session_id.to_owned(),
        ws: ws.clone(),
        at: at.to_owned(),
        artifact_tokens,
    };
    turn.derive_with(&with, sign_turn)
}

/// What a signature records beside the turn's words: ids, where the workspace is, the time.
struct SignWith {
    session_id: String,
    ws: Workspace,
    at: String,
    artifact_tokens: u64,
}

impl crate::redact::Settings for SignWith {}

fn sign_turn(turn: &TurnText, with: &SignWith) -> Signature {
    let (session_id, ws, at, artifact_tokens) =
        (&with.session_id, &with.ws, &with.at, with.artifact_tokens);
    let mut paths = Bounded::new(MAX_PATHS);
    let mut commands = Bounded::new(MAX_COMMANDS);
    let mut term_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut chars: u64 = 0;

    for item in &turn.items {
        match item {
            Item::User { text, source } => {
                if is_conversation(source) {
                    chars += char_count(text);
                }
                if is_human_authored(source) {
                    count_terms(text, &mut term_counts);
                    paths::scan_text(text, ws, Strictness::AllowBare, |p| {
                        paths.insert(p);
                        !paths.is_full()
                    });
                }
            }
            Item::Assistant(text) => chars += char_count(text),
            Item::Call { name, arguments } => {
                chars += char_count(arguments);
                read_call(name, arguments, ws, &mut paths, &mut commands);
            }
            Item::Result(content) => {
                let whole = char_count(content);
                chars += if whole.div_ceil(4) >= artifact_tokens {
                    ARTIFACT_STUB_CHARS
                } else {
                    whole
                };
                let mut added = 0;
                paths::scan_text(content, ws, Strictness::NeedSlash, |p| {
                    if paths.insert(p) {
                        added += 1;
                    }
                    added < MAX_PATHS_PER_RESULT && !paths.is_full()
                });
            }
        }
    }

    Signature {
        v: SIGNATURE_VERSION,
        session_id: session_id.to_owned(),
        turn: turn.turn,
        seqs: turn.seqs.clone(),
        paths: paths.items,
        commands: commands.items,
        terms: top_terms(term_counts),
        size: chars.div_ceil(4),
        by: "deterministic".to_owned(),
        at: at.to_owned(),
        reason: turn.reason.clone(),
    }
}

/// The first path (its file name) or else the first command a turn's tool calls touch:
/// what a chapter's file name says when its title says nothing in ASCII. Read from the
/// redacted text, like everything signing derives.
pub fn first_touch(turn: &Redacted<TurnText>) -> Option<String> {
    let ws = Workspace::new("");
    for item in &turn.get().items {
        if let Item::Call { name, arguments } = item {
            let mut paths = Bounded::new(1);
            let mut commands = Bounded::new(1);
            read_call(name, arguments, &ws, &mut paths, &mut commands);
            let file = paths.items.first().and_then(|p| {
                p.trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .map(str::to_owned)
            });
            if let Some(hint) = file.or_else(|| commands.items.first().cloned()) {
                return Some(hint);
            }
        }
    }
    None
}

/// Whether a term is a stopword (exposed for the index's query side).
pub fn is_stopword(term: &str) -> bool {
    let list = stoplist();
    if list.words.contains(term) {
        return true;
    }
    // A word of fewer than four characters, none of which case or `_` folding changes,
    // is its own key (`fold_key` returns it as it is): looked up without building it.
    let own_key = term.chars().count() < 4
        && term
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || terms::is_cjk(c));
    if own_key {
        return list.keys.contains(term);
    }
    list.keys.contains(&fold_key(term))
}

/// Terms of redacted text: the words of a marker (`⟦redacted:credential sha256=…⟧`, an
/// omission) are ours, not the turn's, so the text between `⟦` and `⟧` is skipped; so is a
/// harness's image placeholder (`[Image #1]`).
fn count_terms(text: &str, counts: &mut BTreeMap<String, u64>) {
    let mut rest = text;
    loop {
        let (words, after) = match rest.split_once('⟦') {
            Some((words, marked)) => (words, marked.split_once('⟧').map(|(_, a)| a)),
            None => (rest, None),
        };
        for term in terms_of(&crate::session::attachment::without_placeholders(words)) {
            *counts.entry(term).or_default() += 1;
        }
        match after {
            Some(next) => rest = next,
            None => return,
        }
    }
}

/// The most frequent terms, spellings of one word counted together (`token`, `tokens`:
/// [`fold_key`]) and shown as the turn wrote it most; ties longest first, then
/// alphabetical by key. At most
/// [`MAX_TERMS`] words and [`MAX_CJK_TERMS`] CJK terms.
fn top_terms(counts: BTreeMap<String, u64>) -> Vec<String> {
    // key → (count of all spellings, the most written spelling and its count)
    let mut by_key: BTreeMap<String, (u64, String, u64)> = BTreeMap::new();
    for (surface, n) in counts {
        let slot = by_key
            .entry(fold_key(&surface))
            .or_insert((0, surface.clone(), 0));
        slot.0 += n;
        if n > slot.2 || (n == slot.2 && surface.len() < slot.1.len()) {
            slot.1 = surface;
            slot.2 = n;
        }
    }
    let mut ranked: Vec<(u64, String)> = by_key.into_values().map(|(n, s, _)| (n, s)).collect();
    // The map is alphabetical already; a stable sort by count, then by length (a longer
    // word is the more specific: `middleware` before `row`, a joined identifier before its
    // parts), keeps the remaining ties that way.
    ranked.sort_by_key(|(count, t)| {
        (
            std::cmp::Reverse(*count),
            std::cmp::Reverse(t.chars().count()),
        )
    });
    let (mut words, mut cjk) = (0, 0);
    ranked
        .into_iter()
        .filter(|(_, t)| {
            let budget = if t.chars().any(terms::is_cjk) {
                &mut cjk
            } else {
                &mut words
            };
            *budget += 1;
            *budget
                <= if t.chars().any(terms::is_cjk) {
                    MAX_CJK_TERMS
                } else {
                    MAX_TERMS
                }
        })
        .map(|(_, t)| t)
        .collect()
}

fn char_count(text: &str) -> u64 {
    text.chars().count() as u64
}

fn is_shell_tool(name: &str) -> bool {
    SHELL_TOOLS
        .binary_search(&name.to_ascii_lowercase().as_str())
        .is_ok()
}

fn is_path_key(key: &str) -> bool {
    let folded: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    PATH_KEYS.binary_search(&folded.as_str()).is_ok()
}

/// Paths (and, for shell tools, commands) of one tool call.
fn read_call(
    name: &str,
    arguments: &str,
    ws: &Workspace,
    paths: &mut Bounded,
    commands: &mut Bounded,
) {
    let parsed = match serde_json::from_str::<Value>(arguments) {
        // Some producers double-encode: the arguments are a JSON string holding JSON.
        Ok(Value::String(inner)) => serde_json::from_str::<Value>(&inner).ok(),
        other => other.ok(),
    };
    let Some(args) = parsed else {
        // Unreadable arguments: only mentions that would pass in tool output.
        paths::scan_text(arguments, ws, Strictness::NeedSlash, |p| {
            paths.insert(p);
            !paths.is_full()
        });
        return;
    };
    collect_declared_paths(&args, false, ws, paths);
    if !is_shell_tool(name) {
        return;
    }
    let dialect = Dialect::of_tool(name, ws.is_windows());
    let facts = match args.get("command").or_else(|| args.get("cmd")) {
        Some(Value::String(script)) => shell::read_script(script, dialect),
        Some(Value::Array(argv)) => {
            let words: Option<Vec<String>> =
                argv.iter().map(|w| w.as_str().map(str::to_owned)).collect();
            match words {
                Some(words) => shell::read_argv(&words),
                None => return,
            }
        }
        _ => return,
    };
    for word in &facts.path_words {
        if let Some(p) = paths::from_mention(word, ws, Strictness::AllowBare) {
            paths.insert(p);
        }
    }
    for command in facts.commands {
        commands.insert(command);
    }
}

/// String values under path keys, anywhere in the argument tree.
fn collect_declared_paths(
    value: &Value,
    under_path_key: bool,
    ws: &Workspace,
    paths: &mut Bounded,
) {
    match value {
        Value::String(s) if under_path_key => {
            if let Some(p) = paths::from_declared(s, ws) {
                paths.insert(p);
            }
        }
        Value::Array(items) => {
            for item in items {
                collect_declared_paths(item, under_path_key, ws, paths);
            }
        }
        Value::Object(map) => {
            for (key, v) in map {
                collect_declared_paths(v, is_path_key(key), ws, paths);
            }
        }
        _ => {}
    }
}

/// An insertion-ordered set with a cap: later items past the cap are dropped, so the
/// earliest (causally first) survive.
struct Bounded {
    items: Vec<String>,
    seen: BTreeSet<String>,
    cap: usize,
}

impl Bounded {
    fn new(cap: usize) -> Self {
        Self {
            items: Vec::new(),
            seen: BTreeSet::new(),
            cap,
        }
    }

    /// Adds a new item; true when it was added. A word holding a marker's bracket (a
    /// redacted secret, an omission) is a piece of our markup, never a path or command.
    fn insert(&mut self, item: String) -> bool {
        if self.is_full() || self.seen.contains(&item) || item.contains(['⟦', '⟧']) {
            return false;
        }
        self.seen.insert(item.clone());
        self.items.push(item);
        true
    }

    fn is_full(&self) -> bool {
        self.items.len() >= self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Event;
    use serde_json::json;

    const WS: &str = "/home/ana/proj";

    struct Log {
        events: Vec<Event>,
    }

    impl Log {
        fn new() -> Self {
            Self { events: Vec::new() }
        }

        fn push(&mut self, kind: &str, data: Value) -> &mut Self {
            let seq = self.events.len() as u64;
            self.events.push(Event::new(seq, kind, data));
            self
        }

        fn user(&mut self, kind: &str, text: &str) -> &mut Self {
            self.push(
                "user/message",
                json!({"role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": kind}}),
            )
        }

        fn relay(&mut self, text: &str) -> &mut Self {
            self.push(
                "user/message",
                json!({"role": "user", "content": [{"type": "text", "text": text}],
                       "source": {"kind": "agent-message", "form": "relay"}}),
            )
        }

        fn assistant(&mut self, text: &str) -> &mut Self {
            self.push("assistant/message", json!({"message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}))
        }

        fn call(&mut self, name: &str, args: Value) -> &mut Self {
            self.push(
                "tool/call",
                json!({"callId": "c", "name": name, "arguments": args.to_string()}),
            )
        }

        fn raw_call(&mut self, name: &str, raw: &str) -> &mut Self {
            self.push(
                "tool/call",
                json!({"callId": "c", "name": name, "arguments": raw}),
            )
        }

        fn result(&mut self, content: &str) -> &mut Self {
            self.push(
                "tool/result",
                json!({"message": {"role": "tool", "toolCallId": "c", "content": content}}),
            )
        }

        /// The turn so far, ended by a `turn/end`.
        fn end_turn(&mut self) -> CompletedTurn {
            self.push(
                "turn/end",
                json!({"turn": 3, "reason": {"kind": "completed"}}),
            );
            CompletedTurn {
                turn: 3,
                first_seq: 0,
                end_seq: self.events.len() as u64 - 1,
                reason: "completed".into(),
                events: self.events.clone(),
            }
        }

        fn sign(&mut self) -> Signature {
            let turn = self.end_turn();
            let redactor = crate::redact::built_in().expect("built-in rules compile");
            let text = redactor.redact_all(
                TurnText::of(&turn),
                &mut crate::redact::RedactionCounts::default(),
            );
            sign(&text, "session-1", WS, "2026-10-22T10:00:00Z").into_inner()
        }

        /// [`Log::sign`] with the render's artifact threshold.
        fn sign_with_artifacts(&mut self, artifact_tokens: u64) -> Signature {
            let whole = self.sign();
            self.events.pop();
            let turn = self.end_turn();
            let redactor = crate::redact::built_in().expect("built-in rules compile");
            let text = redactor.redact_all(
                TurnText::of(&turn),
                &mut crate::redact::RedactionCounts::default(),
            );
            let sig = sign_in(
                &text,
                "session-1",
                &Workspace::new(WS),
                "t",
                artifact_tokens,
            );
            assert_eq!(sig.paths, whole.paths, "only the size may differ");
            sig.into_inner()
        }
    }

    #[test]
    fn stoplist_is_sorted_unique_and_covers_the_three_kinds() {
        let words: Vec<&str> = stopword_lines().collect();
        assert!(
            words.windows(2).all(|w| w[0] < w[1]),
            "config/stopwords.txt must be sorted and unique"
        );
        assert!(words.len() >= 230, "{}", words.len());
        assert!(words.iter().all(|w| (w.len() >= 3
            && w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
            || (w.chars().count() == 2 && w.chars().all(terms::is_cjk))));
        for w in [
            "the", "which", "const", "function", "struct", "grep", "cargo", "mkdir",
        ] {
            assert!(is_stopword(w), "{w}");
        }
        for w in ["render", "auth", "middleware", "signature"] {
            assert!(!is_stopword(w), "{w}");
        }
        assert!(SHELL_TOOLS.windows(2).all(|w| w[0] < w[1]));
        assert!(PATH_KEYS.windows(2).all(|w| w[0] < w[1]));
    }

    /// Claude Code and Codex put `[Image #1]` where the person pasted an image: the
    /// harness's words, never a term (the image itself leaves a marker).
    #[test]
    fn an_image_placeholder_is_no_term() {
        let sig = Log::new()
            .user("user", "[Image #1] [Image #2] make the navbar blue")
            .sign();
        assert!(sig.terms.iter().any(|t| t == "navbar"), "{:?}", sig.terms);
        assert!(!sig.terms.iter().any(|t| t == "image"), "{:?}", sig.terms);
    }

    #[test]
    fn term_tokenizing_rules() {
        let got: Vec<String> =
            terms_of("Fix the JWT refresh_token flow: 2026 ab x12 abc123 ___ Añadir Überall")
                .collect();
        assert_eq!(
            got,
            vec![
                "jwt",
                "refresh",
                "token",
                "refresh_token",
                "flow",
                "x12",
                "abc123",
                "añadir",
                "überall"
            ]
        );
        let long = "a".repeat(29);
        assert_eq!(terms_of(&format!("{long} {}", "b".repeat(28))).count(), 1);
        assert_eq!(terms_of("").count(), 0);
    }

    #[test]
    fn the_turn_redacted_in_place_is_the_turn_redacted_text_by_text() {
        let turn = Log::new()
            .user("user", "Rotate AKIAIOSFODNN7EXAMPLE in src/main.rs")
            .assistant("done, nothing secret here")
            .call(
                "bash",
                json!({"command": "curl -H 'Authorization: Bearer ghp_0123456789abcdefghijABCDEFGHIJ012345' https://x"}),
            )
            .result("plain output")
            .end_turn();
        let redactor = crate::redact::built_in().expect("built-in rules compile");
        let mut by_text = crate::redact::RedactionCounts::default();
        let expected = TurnText::of(&turn)
            .map_text(&mut |text| redactor.redact(text, &mut by_text).into_inner());
        let mut in_place = crate::redact::RedactionCounts::default();
        let got = redactor.redact_all(TurnText::of(&turn), &mut in_place);
        assert_eq!(*got, expected);
        assert_eq!(in_place, by_text);
        assert_eq!(in_place.total(), 2, "{in_place:?}");
    }

    #[test]
    fn secrets_and_injected_spans_never_become_terms_paths_or_commands() {
        let sig = Log::new()
            .user(
                "user",
                "Rotate AKIAIOSFODNN7EXAMPLE now, then call https://api.example.com/v1?token=Hunter2Hunter2 \
                 and postgres://admin:Sup3rSecretPw@db.internal/app\n\
                 <system-reminder>kubernetes kubernetes kubernetes</system-reminder>\n\
                 rotate rotate",
            )
            .call(
                "bash",
                json!({"command": "curl -H 'Authorization: Bearer ghp_0123456789abcdefghijABCDEFGHIJ012345' https://x"}),
            )
            .result("see /home/ana/proj/src/ghp_0123456789abcdefghijABCDEFGHIJ012345.rs")
            .sign();
        let line = serde_json::to_string(&sig).unwrap().to_lowercase();
        for secret in [
            "akiaiosfodnn7example",
            "hunter2",
            "sup3rsecretpw",
            "ghp_0123456789",
            "kubernetes",
            "redacted",
            "credential",
        ] {
            assert!(!line.contains(secret), "{secret} in {line}");
        }
        assert_eq!(sig.terms[0], "rotate");
        assert_eq!(sig.commands, vec!["curl"]);
    }

    #[test]
    fn terms_come_only_from_the_human() {
        let instructions =
            "deployment deployment deployment kubernetes kubernetes helm charts ".repeat(50);
        let sig = Log::new()
            .user("agent-instructions", &instructions)
            .user("skill-catalog", "skills: deployment, kubernetes, terraform")
            .relay("Agent 7 sent a message: deployment docs written for kubernetes")
            .user("user", "Refactor the render pipeline so render runs once")
            .assistant("Rendering rendering rendering pipeline pipeline")
            .sign();
        assert_eq!(sig.terms, vec!["render", "pipeline", "refactor"]);
    }

    #[test]
    fn top_eight_terms_ties_longest_then_alphabetical() {
        let sig = Log::new()
            .user(
                "user",
                "zeta zeta yak xray wolf vole umbra tango sierra romeo quebec papa",
            )
            .sign();
        assert_eq!(
            sig.terms,
            vec!["zeta", "quebec", "sierra", "romeo", "tango", "umbra", "papa", "vole"]
        );
    }

    #[test]
    fn paths_are_repo_relative_and_in_causal_order() {
        let sig = Log::new()
            .user("user", "look at ./README.md please")
            .call(
                "read_file",
                json!({"file_path": "/home/ana/proj/src/main.rs"}),
            )
            .result("fn main() {}\n")
            .call(
                "bash",
                json!({"command": "cat ./src/x.rs && sed -n 1,5p src/a/../b.rs"}),
            )
            .result("error: src/file.rs:12:3: bad\nsee src/main.rs:1")
            .call(
                "edit",
                json!({"edits": [{"filePath": "src/lib.rs"}, {"filePath": "./src/x.rs"}]}),
            )
            .sign();
        assert_eq!(
            sig.paths,
            vec![
                "README.md",
                "src/main.rs",
                "src/x.rs",
                "src/b.rs",
                "src/file.rs",
                "src/lib.rs"
            ]
        );
    }

    #[test]
    fn slash_phrases_in_prose_are_not_paths() {
        let sig = Log::new()
            .user("user", "Should it be client/server and/or read/write? true/false on 10/22, input/output. See notes.md")
            .sign();
        assert_eq!(sig.paths, vec!["notes.md"]);
    }

    #[test]
    fn assistant_prose_and_injections_yield_no_paths() {
        let sig = Log::new()
            .user(
                "agent-instructions",
                "Always edit docs/guide.md and src/rules.ts",
            )
            .assistant("I will now edit src/other.rs")
            .sign();
        assert!(sig.paths.is_empty(), "{:?}", sig.paths);
    }

    #[test]
    fn working_directories_are_not_touches() {
        let sig = Log::new()
            .call(
                "bash",
                json!({"command": "ls", "cwd": "/home/ana/proj/src", "workdir": "docs"}),
            )
            .sign();
        assert!(sig.paths.is_empty(), "{:?}", sig.paths);
        assert_eq!(sig.commands, vec!["ls"]);
    }

    #[test]
    fn commands_come_only_from_shell_argv() {
        let sig = Log::new()
            .user("user", "please run cargo test and then git diff")
            .assistant("I'll run `cargo test` now")
            .call("read_file", json!({"path": "src/lib.rs", "command": "cargo build"}))
            .call(
                "Bash",
                json!({"command": "cd /home/ana/proj && RUST_LOG=1 sudo cargo test --lib -- --nocapture && git diff"}),
            )
            .call("exec_command", json!({"cmd": ["bash", "-lc", "npm run build | tee build.log"]}))
            .call("shell", json!({"command": "cargo test --lib"}))
            .sign();
        assert_eq!(
            sig.commands,
            vec!["cargo test", "git diff", "npm run build", "tee"]
        );
        assert_eq!(sig.paths, vec!["src/lib.rs", "build.log"]);
    }

    #[test]
    fn size_counts_conversation_chars() {
        // 5 + 3 + 16 (`{"command":"ls"}`) + 2 + 3 = 29 chars → 8 tokens; the instruction
        // file is not conversation.
        let sig = Log::new()
            .user("user", "héllo")
            .user("agent-instructions", &"x".repeat(1000))
            .relay("abc")
            .call("bash", json!({"command": "ls"}))
            .result("ok")
            .assistant("日本語")
            .sign();
        assert_eq!(sig.size, 8);
    }

    #[test]
    fn a_tool_result_stored_as_an_artifact_counts_as_its_reference_line() {
        let big = "log line\n".repeat(4_000); // 36,000 chars, ~9,000 tokens
        let sig = Log::new()
            .user("user", "run it")
            .call("bash", json!({"command": "make"}))
            .result(&big)
            .sign_with_artifacts(8_000);
        // 6 + 18 (`{"command":"make"}`) + the stub line, not the 36,000 chars.
        assert_eq!(sig.size, (6 + 18 + ARTIFACT_STUB_CHARS).div_ceil(4));
        // Under the threshold, or with no threshold, a result counts whole.
        let sig = Log::new()
            .user("user", "run it")
            .call("bash", json!({"command": "make"}))
            .result(&big)
            .sign_with_artifacts(10_000);
        assert_eq!(sig.size, (6 + 18 + 36_000u64).div_ceil(4));
    }

    #[test]
    fn record_fields_and_serde_shape() {
        let sig = Log::new()
            .user("user", "hello world")
            .assistant("hi")
            .sign();
        assert_eq!(sig.seqs, vec![0, 1, 2]);
        assert_eq!(
            (sig.v, sig.turn, sig.by.as_str(), sig.reason.as_str()),
            (SIGNATURE_VERSION, 3, "deterministic", "completed")
        );
        let line = serde_json::to_value(&sig).expect("serializes");
        let keys: Vec<&str> = line
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            vec![
                "at",
                "by",
                "commands",
                "paths",
                "reason",
                "seqs",
                "sessionId",
                "size",
                "terms",
                "turn",
                "v"
            ]
        );
        let back: Signature = serde_json::from_value(line).expect("round-trips");
        assert_eq!(back, sig);
    }

    /// A chapter's fallback name reads the tool calls alone: redacting only them finds the
    /// same first touch as the whole turn's text (a secret in a call redacted either way).
    #[test]
    fn first_touch_of_the_calls_alone_is_the_whole_turns() {
        let redactor = crate::redact::built_in().unwrap();
        let turns = [
            Log::new()
                .user("user", "fix src/a.rs")
                .result("see web/src/b.ts")
                .call("read_file", json!({"path": "src/c.rs"}))
                .end_turn(),
            Log::new()
                .assistant("running web/x.ts")
                .call("bash", json!({"command": "cargo test -p core"}))
                .end_turn(),
            Log::new()
                .call(
                    "bash",
                    json!({"command": "ghp_0123456789abcdefghijABCDEFGHIJ012345 deploy"}),
                )
                .end_turn(),
            Log::new()
                .user("user", "no call: src/d.rs")
                .result("src/e.rs")
                .end_turn(),
        ];
        let mut found = 0;
        for turn in &turns {
            let of = |text: TurnText| {
                first_touch(
                    &redactor.redact_all(text, &mut crate::redact::RedactionCounts::default()),
                )
            };
            let whole = of(TurnText::of(turn));
            assert_eq!(of(TurnText::calls_of(turn)), whole);
            found += usize::from(whole.is_some());
        }
        assert!(found >= 2, "{found}");
    }

    #[test]
    fn listings_and_floods_are_capped_first_touch_first() {
        let listing: String = (0..100).map(|i| format!("src/gen/f{i}.rs\n")).collect();
        let sig = Log::new()
            .call("read_file", json!({"path": "src/main.rs"}))
            .result(&listing)
            .sign();
        assert_eq!(sig.paths.len(), 1 + MAX_PATHS_PER_RESULT);
        assert_eq!(sig.paths[0], "src/main.rs");

        let mut log = Log::new();
        for i in 0..50 {
            log.call("read_file", json!({"path": format!("src/f{i}.rs")}));
        }
        let sig = log.sign();
        assert_eq!(sig.paths.len(), MAX_PATHS);
        assert_eq!(sig.paths[0], "src/f0.rs");
        assert_eq!(
            sig.paths[MAX_PATHS - 1],
            format!("src/f{}.rs", MAX_PATHS - 1)
        );
    }

    #[test]
    fn garbled_and_hostile_arguments() {
        let deep = "[".repeat(10_000);
        let sig = Log::new()
            .raw_call("bash", "{\"command\": \"cargo te")
            .raw_call(
                "read_file",
                "not json at all, mentions src/x.rs and main.rs",
            )
            .raw_call("read_file", &deep)
            .call("read_file", json!({"path": "src/enc.rs"}))
            .raw_call(
                "read_file",
                &serde_json::to_string(&json!({"path": "src/double.rs"}).to_string())
                    .expect("string"),
            )
            .call("bash", json!({"command": 42}))
            .call("bash", json!({"command": ["ls", 3]}))
            .result(&"a/".repeat(100_000))
            .user("user", &"word ".repeat(100_000))
            .sign();
        assert!(sig.commands.is_empty(), "{:?}", sig.commands);
        assert_eq!(sig.paths, vec!["src/x.rs", "src/enc.rs", "src/double.rs"]);
        assert_eq!(sig.terms, vec!["word"]);
    }

    #[test]
    fn empty_turn() {
        let sig = Log::new().sign();
        assert_eq!(sig.seqs, vec![0]);
        assert!(sig.paths.is_empty() && sig.commands.is_empty() && sig.terms.is_empty());
        assert_eq!(sig.size, 0);
    }
}

//! Recognizing and normalizing file paths. Every path leaves here repo-relative when it
//! is inside the workspace (`src/x.rs`, never `./src/x.rs` or `/ws/src/x.rs`), with `.`
//! and `..` segments collapsed, and without `:line:col`, anchors or wrapping punctuation.
//!
//! How sure a mention must be depends on where it came from:
//! - a tool argument under a path key (`file_path`, …) is a path by declaration;
//! - a shell argument or the human's prose must look like a file: a known extension or a
//!   well-known file name, a `./`/`../` prefix, or an absolute path inside the workspace;
//!   `and/or`, `client/server`, `10/22` are prose, not paths;
//! - tool result text additionally needs a `/` (a bare `main.rs` in output is too weak).
//!
//! Absolute paths outside the workspace (and `~/…`) are kept, as written, only when they
//! clearly name a file (known extension or well-known name): `/tmp/out.json` is a touch
//! worth recording, `/usr/bin` or `/dev/null` is not.

use crate::session::cwdkey::{map_path, normalize_abs, relative_to, AbsPath};

/// Longest mention considered: anything longer is data, not a path.
const MAX_PATH_BYTES: usize = 1024;

/// File extensions that make a token "clearly a file". Sorted, lowercase.
const KNOWN_EXTENSIONS: &[&str] = &[
    "bash", "c", "cc", "cfg", "cjs", "conf", "cpp", "cs", "css", "csv", "cts", "dart", "erl", "ex",
    "exs", "gif", "go", "gradle", "graphql", "h", "hpp", "hs", "html", "ini", "ipynb", "java",
    "jpeg", "jpg", "js", "json", "json5", "jsonl", "jsx", "kt", "kts", "lock", "log", "lua", "md",
    "mdx", "mjs", "ml", "mts", "nix", "pdf", "php", "png", "proto", "ps1", "py", "pyi", "rb", "rs",
    "sass", "scala", "scss", "sh", "sql", "svelte", "svg", "swift", "tf", "toml", "ts", "tsx",
    "txt", "vue", "xml", "yaml", "yml", "zig", "zsh",
];

/// An extension of at most 8 ASCII bytes as one number (big-endian, zero-padded): numbers
/// order as the strings do, and a probe compares two integers where a string comparison
/// calls `memcmp` (the path scan asks this of nearly every dotted token of tool output).
const fn extension_key(ext: &[u8]) -> u64 {
    let mut key = 0u64;
    let mut i = 0;
    while i < 8 {
        key <<= 8;
        if i < ext.len() {
            key |= ext[i] as u64;
        }
        i += 1;
    }
    key
}

/// [`KNOWN_EXTENSIONS`] as [`extension_key`]s, in the same (sorted) order.
const KNOWN_EXTENSION_KEYS: [u64; KNOWN_EXTENSIONS.len()] = {
    let mut keys = [0u64; KNOWN_EXTENSIONS.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = extension_key(KNOWN_EXTENSIONS[i].as_bytes());
        i += 1;
    }
    keys
};

/// Whether `ext` (any letter case) is a known extension.
fn is_known_extension(ext: &str) -> bool {
    let bytes = ext.as_bytes();
    // A NUL would read as padding; a non-ASCII byte is in no known extension.
    if bytes.len() > 8 || bytes.iter().any(|&b| b == 0 || !b.is_ascii()) {
        return false;
    }
    let mut lower = [0u8; 8];
    lower[..bytes.len()].copy_from_slice(bytes);
    lower.make_ascii_lowercase();
    KNOWN_EXTENSION_KEYS
        .binary_search(&extension_key(&lower[..bytes.len()]))
        .is_ok()
}

/// Extensionless names that are files wherever they appear. Sorted. Each starts with `.`
/// or an ASCII capital (what [`names_a_file`] checks before searching).
const WELL_KNOWN_FILES: &[&str] = &[
    ".bashrc",
    ".dockerignore",
    ".editorconfig",
    ".env",
    ".gitattributes",
    ".gitignore",
    ".gitmodules",
    ".npmrc",
    ".zshrc",
    "Dockerfile",
    "Gemfile",
    "Justfile",
    "Makefile",
    "Procfile",
    "Rakefile",
];

/// Library names spelled like files; in prose they name products.
const PRODUCT_NAMES: &[&str] = &[
    "chart.js",
    "d3.js",
    "express.js",
    "next.js",
    "node.js",
    "nuxt.js",
    "react.js",
    "three.js",
    "vue.js",
];

/// Characters that end a mention in running text.
fn is_text_delimiter(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | '`' | '(' | ')' | '<' | '>' | '{' | '}' | ',' | ';' | '|' | '='
    ) || c.is_whitespace()
}

/// [`is_text_delimiter`] of an ASCII byte, told without decoding a character (the scan
/// widens every mark of tool output to its token, byte by byte).
fn is_ascii_text_delimiter(b: u8) -> bool {
    matches!(
        b,
        b'"' | b'\'' | b'`' | b'(' | b')' | b'<' | b'>' | b'{' | b'}' | b',' | b';' | b'|' | b'='
    ) || matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ')
}

/// Where the token around the mark at `hit` starts: just past the nearest text delimiter
/// before it. ASCII is judged by byte; from the first other character on, by character
/// (some are whitespace: U+00A0, U+3000, …).
fn token_start(text: &str, hit: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = hit;
    while i > 0 {
        let b = bytes[i - 1];
        if !b.is_ascii() {
            // `i` is a character boundary: only ASCII bytes were passed.
            return text[..i]
                .char_indices()
                .rev()
                .find(|&(_, c)| is_text_delimiter(c))
                .map_or(0, |(j, c)| j + c.len_utf8());
        }
        if is_ascii_text_delimiter(b) {
            return i;
        }
        i -= 1;
    }
    0
}

/// Where the token around the mark at `hit` ends: at the next text delimiter, or the end.
fn token_end(text: &str, hit: usize) -> usize {
    let bytes = text.as_bytes();
    let mut i = hit;
    while i < bytes.len() {
        let b = bytes[i];
        if !b.is_ascii() {
            return text[i..]
                .char_indices()
                .find(|&(_, c)| is_text_delimiter(c))
                .map_or(text.len(), |(j, _)| i + j);
        }
        if is_ascii_text_delimiter(b) {
            return i;
        }
        i += 1;
    }
    text.len()
}

/// The token around the mark at `hit`: [`token_start`] to [`token_end`].
fn token_bounds(text: &str, hit: usize) -> (usize, usize) {
    (token_start(text, hit), token_end(text, hit))
}

/// Characters no path mention carries (globs, expansions, escapes).
fn is_foreign(c: char) -> bool {
    matches!(
        c,
        '*' | '?' | '$' | '`' | '\'' | '"' | '<' | '>' | '|' | '{' | '}'
    ) || c.is_control()
        || c.is_whitespace()
}

/// The absolute workspace root paths are made relative to, with its other names (the
/// `pathMap` twins: the same directory as a Windows machine or WSL names it), and the
/// session's cwd inside it (a monorepo's subdirectory), which relative paths start from.
#[derive(Debug, Clone)]
pub struct Workspace {
    /// The root first, then its twins; empty when unknown or not absolute.
    roots: Vec<AbsPath>,
    /// The session's cwd relative to the root (`svc/api`), `""` at the root.
    cwd_rel: String,
    /// The session ran on Windows (its cwd is a Windows path): a shell tool's command
    /// string is PowerShell unless the tool says otherwise.
    windows: bool,
}

impl Workspace {
    /// A workspace root alone (a session started at the root, on this machine's paths).
    pub fn new(workspace: &str) -> Self {
        Self {
            roots: normalize_abs(workspace).into_iter().collect(),
            cwd_rel: String::new(),
            windows: false,
        }
    }

    /// The workspace `root` as seen by a session whose header says `cwd`, with the
    /// `pathMap` pairs that name the root on other machines.
    pub fn for_session<'m>(
        root: &str,
        cwd: Option<&str>,
        path_map: impl IntoIterator<Item = (&'m String, &'m String)> + Clone,
    ) -> Self {
        let mut ws = Self::new(root);
        if let Some(first) = ws.roots.first().cloned() {
            ws.roots.extend(map_path(&first, path_map));
        }
        if let Some(cwd) = cwd.and_then(normalize_abs) {
            ws.windows = cwd.windows;
            if let Some(rel) = ws.roots.iter().find_map(|r| relative_to(&cwd, r)) {
                ws.cwd_rel = rel;
            }
        }
        ws
    }

    /// Whether the session ran on Windows.
    pub(super) fn is_windows(&self) -> bool {
        self.windows
    }

    /// The part of an absolute path inside the workspace; `Some("")` for the root.
    fn relative(&self, path: &AbsPath) -> Option<String> {
        self.roots.iter().find_map(|r| relative_to(path, r))
    }

    /// A path a person gives to find what touched it (search's `--path`): an absolute path
    /// inside the workspace — as this machine or a `pathMap` twin names it — made relative
    /// to the root, as signatures keep paths; any other path as given.
    pub fn as_signed(&self, path: &str) -> String {
        match normalize_abs(path).and_then(|abs| self.relative(&abs)) {
            Some(rel) if !rel.is_empty() => rel,
            _ => path.to_owned(),
        }
    }
}

/// How sure a text mention must look (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Strictness {
    /// Shell arguments and the human's prose: a bare `main.rs` counts.
    AllowBare,
    /// Tool result text: a relative file needs a `/`.
    NeedSlash,
}

/// A value declared a path by its argument key. `None` for the workspace root itself,
/// empty or garbled values, and absolute non-files outside the workspace.
pub(super) fn from_declared(value: &str, ws: &Workspace) -> Option<String> {
    let v = value.trim();
    if v.len() > MAX_PATH_BYTES || v.contains("://") || v.chars().any(char::is_control) {
        return None;
    }
    // A spaced value is a real path only when it has structure; otherwise it is prose.
    if v.contains(char::is_whitespace) && !v.contains(['/', '\\']) {
        return None;
    }
    finish(v, ws, |_| true)
}

/// One word or token of text, if it is a path mention under `strictness`.
pub(super) fn from_mention(token: &str, ws: &Workspace, strictness: Strictness) -> Option<String> {
    if token.len() > MAX_PATH_BYTES {
        return None;
    }
    judge_cleaned(clean_mention(token), ws, strictness)
}

/// [`from_mention`] of a token already through [`clean_mention`]: what it says depends on
/// the cleaned text alone (with the workspace and strictness), so a scan judges each
/// cleaned text once.
fn judge_cleaned(t: &str, ws: &Workspace, strictness: Strictness) -> Option<String> {
    if t.is_empty() || t.contains("://") || t.chars().any(is_foreign) {
        return None;
    }
    let has_slash = t.contains(['/', '\\']);
    if !has_slash && PRODUCT_NAMES.iter().any(|p| p.eq_ignore_ascii_case(t)) {
        return None;
    }
    let dotted = ["./", "../", ".\\", "..\\"]
        .iter()
        .any(|p| t.starts_with(p));
    if !dotted && surely_refused_relative(t, has_slash, strictness) {
        return None;
    }
    finish(t, ws, |relative| {
        dotted || (names_a_file(relative) && (has_slash || strictness == Strictness::AllowBare))
    })
}

/// Whether `finish` would surely refuse `token` (not `./`-dotted) as a relative mention,
/// told without building anything: most tokens around a `.` in prose and output are not
/// files. A token that may be absolute or `~`-rooted, or whose last segment collapsing
/// could change (``, `.`, `..`), is left to `finish`. Otherwise collapsing keeps the last
/// segment, so the collapsed path names a file exactly when that segment does.
fn surely_refused_relative(token: &str, has_slash: bool, strictness: Strictness) -> bool {
    let b = token.as_bytes();
    let maybe_rooted = matches!(b.first(), Some(b'/' | b'\\' | b'~'))
        || (b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':')
        || token.trim_start() != token;
    if maybe_rooted {
        return false;
    }
    if !has_slash && strictness == Strictness::NeedSlash {
        return true;
    }
    let last = token.rsplit(['/', '\\']).next().unwrap_or(token);
    if matches!(last, "" | "." | "..") {
        return false;
    }
    !names_a_file(last)
}

/// Every distinct path mention in `text`, in order of first appearance; `each` returns
/// false to stop.
pub(super) fn scan_text(
    text: &str,
    ws: &Workspace,
    strictness: Strictness,
    each: impl FnMut(String) -> bool,
) {
    // Under `NeedSlash` only a token holding a `/` or `\\` can pass (`from_mention`), so only
    // those are looked for: every hit inside a token widens to the same token, so the mentions found
    // are the same (a property test holds it to the scan of every mark).
    let slash_only = strictness == Strictness::NeedSlash;
    scan_marks(text, ws, strictness, slash_only, true, token_bounds, each)
}

/// How many of the last tokens judged a scan compares before hashing.
const RECENT: usize = 4;

/// [`scan_text`], looking for `/` and `\\` alone when `slash_only`, else for every `.`, `/`,
/// `\\` and `file`; `once` judges each cleaned token once (off: every occurrence, as the
/// tests' oracle); `bounds` widens a mark to its token ([`token_bounds`]; the tests' oracle
/// widens by character).
fn scan_marks(
    text: &str,
    ws: &Workspace,
    strictness: Strictness,
    slash_only: bool,
    once: bool,
    bounds: impl Fn(&str, usize) -> (usize, usize),
    mut each: impl FnMut(String) -> bool,
) {
    // Only tokens holding a `.`, a `/` or `file` can be mentions, so jump from one such
    // byte to the next and widen to the token around it, instead of splitting the whole
    // text (tool output is most of a session's bytes).
    let bytes = text.as_bytes();
    let file = memchr::memmem::Finder::new("file");
    // Tool output names the same few files on line after line (`src/x.rs:12: …`, then
    // `src/x.rs:40: …`): each cleaned token is judged once and its mention handed on once.
    let mut judged: std::collections::HashSet<&str> = std::collections::HashSet::new();
    // The last few tokens judged, compared before hashing: output lines alternate between
    // a few files. Each is in `judged` already.
    let mut recent: [Option<&str>; RECENT] = [None; RECENT];
    let mut next_recent = 0;
    let mut next_file = if slash_only { None } else { file.find(bytes) };
    let mut at = 0;
    while at < bytes.len() {
        if next_file.is_some_and(|f| f < at) {
            next_file = file.find(&bytes[at..]).map(|o| at + o);
        }
        let mark = if slash_only {
            memchr::memchr2(b'/', b'\\', &bytes[at..])
        } else {
            memchr::memchr3(b'.', b'/', b'\\', &bytes[at..])
        }
        .map(|o| at + o);
        let hit = match (mark, next_file) {
            (Some(m), Some(f)) => m.min(f),
            (Some(h), None) | (None, Some(h)) => h,
            (None, None) => break,
        };
        let (start, end) = bounds(text, hit);
        if end > start {
            let token = without_diff_prefix(text, start, &text[start..end]);
            if token.len() <= MAX_PATH_BYTES {
                let cleaned = clean_mention(token);
                let fresh = !once
                    || (!recent.contains(&Some(cleaned)) && {
                        recent[next_recent] = Some(cleaned);
                        next_recent = (next_recent + 1) % RECENT;
                        judged.insert(cleaned)
                    });
                if fresh {
                    if let Some(p) = judge_cleaned(cleaned, ws, strictness) {
                        if !each(p) {
                            return;
                        }
                    }
                }
            }
        }
        at = end.max(hit + 1);
    }
}

/// Strip wrapping punctuation, `#anchor`, and `:line[:col]` suffixes.
fn clean_mention(token: &str) -> &str {
    let mut t = token.trim_start_matches(['(', '[', '<', '\'', '"', '`', '@', '*']);
    // Byte searches: each of these ASCII characters is one byte in UTF-8, and a token of
    // tool output asks them of every line (`src/x.rs:12:`).
    if let Some(i) = memchr::memchr(b'#', t.as_bytes()) {
        t = &t[..i];
    }
    t = without_revision(t);
    t = without_grep_position(t);
    loop {
        let before = t.len();
        t = t.trim_end_matches([
            '.', ',', ':', ';', ')', ']', '>', '\'', '"', '`', '!', '?', '*',
        ]);
        if let Some(i) = memchr::memrchr(b':', t.as_bytes()) {
            let tail = &t.as_bytes()[i + 1..];
            if !tail.is_empty() && tail.iter().all(u8::is_ascii_digit) {
                t = &t[..i];
            }
        }
        if t.len() == before {
            return t;
        }
    }
}

/// `git show HEAD:src/x.rs`, `git show 8034f24:src/x.rs`: the path after a revision (`HEAD`,
/// `HEAD~2`, `HEAD^`, or 7–40 hex digits with a digit among them). A drive letter (`C:`) is
/// one character, so never a revision.
fn without_revision(t: &str) -> &str {
    let Some(colon) = memchr::memchr(b':', t.as_bytes()) else {
        return t;
    };
    past_revision(t, &t[..colon], &t[colon + 1..])
}

/// `rest` when `rev` (what came before `t`'s first `:`) is a revision, else `t`.
fn past_revision<'a>(t: &'a str, rev: &str, rest: &'a str) -> &'a str {
    let head = rev.strip_prefix("HEAD").is_some_and(|r| {
        r.bytes()
            .all(|b| b == b'~' || b == b'^' || b.is_ascii_digit())
    });
    let sha = (7..=40).contains(&rev.len())
        && rev.bytes().all(|b| b.is_ascii_hexdigit())
        && rev.bytes().any(|b| b.is_ascii_digit());
    if (head || sha) && !rest.is_empty() {
        rest
    } else {
        t
    }
}

/// `grep -n` and `grep -C` output glue a line number to the file: `x.rs:38:text`,
/// `x.rs:99-103`, `CLAUDE.md-45-text` (a context line). The file ends where a name with an
/// extension meets `:N` (then the end, `:` or `-`) or `-N-`.
fn without_grep_position(t: &str) -> &str {
    let bytes = t.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b != b':' && b != b'-' {
            continue;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .count();
        if digits == 0 {
            continue;
        }
        let after = bytes.get(i + 1 + digits).copied();
        let glued = match b {
            b':' => matches!(after, None | Some(b':') | Some(b'-')),
            _ => after == Some(b'-'),
        };
        if glued && ends_with_extension(&t[..i]) {
            return &t[..i];
        }
    }
    t
}

/// The last component of `head` has an extension: `.` then 1–10 ASCII letters or digits.
fn ends_with_extension(head: &str) -> bool {
    let name = head.rsplit(['/', '\\']).next().unwrap_or(head);
    name.rsplit_once('.').is_some_and(|(_, ext)| {
        (1..=10).contains(&ext.len()) && ext.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// A unified diff's header names the file with `a/` and `b/` in front (`diff --git a/x b/x`,
/// `--- a/x`, `+++ b/x`): the token at `start` of such a line, without that prefix.
fn without_diff_prefix<'a>(text: &str, start: usize, token: &'a str) -> &'a str {
    let Some(rest) = token
        .strip_prefix("a/")
        .or_else(|| token.strip_prefix("b/"))
    else {
        return token;
    };
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..start].trim_start();
    if line.starts_with("diff --git ") || line.starts_with("--- ") || line.starts_with("+++ ") {
        rest
    } else {
        token
    }
}

/// Collapse, make workspace paths relative, and apply `accept_relative` to relative
/// results; absolute/home paths outside the workspace must name a file. Windows paths
/// (`C:\\x\\y.rs`, `.\\y.rs`, `y\\z.rs`) come out with `/`; a relative path starts
/// from the session's cwd inside the workspace.
fn finish(path: &str, ws: &Workspace, accept_relative: impl Fn(&str) -> bool) -> Option<String> {
    let out = if let Some(abs) = normalize_abs(path) {
        match ws.relative(&abs) {
            Some(rel) => rel,
            None if names_a_file(&abs.text) => abs.text,
            None => return None,
        }
    } else {
        let collapsed = collapse(&path.replace('\\', "/"));
        if collapsed == "~" || collapsed.starts_with("~/") {
            if !names_a_file(&collapsed) {
                return None;
            }
            collapsed
        } else {
            if !accept_relative(&collapsed) {
                return None;
            }
            if ws.cwd_rel.is_empty() {
                collapsed
            } else {
                collapse(&format!("{}/{collapsed}", ws.cwd_rel))
            }
        }
    };
    (!out.is_empty() && out.chars().any(char::is_alphanumeric)).then_some(out)
}

/// `a/./b/../c//d/` → `a/c/d`; `./x` → `x`; leading `..` of a relative path is kept;
/// `..` above `/` is dropped.
fn collapse(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut segments: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if segments.last().is_some_and(|last| *last != "..") {
                    segments.pop();
                } else if !absolute {
                    segments.push("..");
                }
            }
            _ => segments.push(seg),
        }
    }
    let joined = segments.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Whether the last segment has a known extension (after a real stem) or is a well-known file.
pub(super) fn names_a_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let may_be_well_known = name
        .as_bytes()
        .first()
        .is_some_and(|&b| b == b'.' || b.is_ascii_uppercase());
    if may_be_well_known && WELL_KNOWN_FILES.binary_search(&name).is_ok() {
        return true;
    }
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return false;
    };
    is_known_extension(ext) && stem.chars().any(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> Workspace {
        Workspace::new("/home/ana/proj/")
    }

    fn mention(t: &str) -> Option<String> {
        from_mention(t, &ws(), Strictness::AllowBare)
    }

    fn scan(text: &str, strictness: Strictness) -> Vec<String> {
        let mut out = Vec::new();
        scan_text(text, &ws(), strictness, |p| {
            out.push(p);
            true
        });
        out
    }

    /// Shapes seen in real Claude Code sessions' tool output (the labelled fixtures): grep's
    /// line numbers and context lines, a revision before the path, a diff's `a/` and `b/`.
    #[test]
    fn grep_positions_revisions_and_diff_prefixes_are_not_part_of_the_path() {
        for (token, want) in [
            ("cmd/cli/clean.go:38:The", "cmd/cli/clean.go"),
            ("cmd/cli/temporary.go:99-103", "cmd/cli/temporary.go"),
            ("cmd/cli/store.go-19-", "cmd/cli/store.go"),
            (
                ".claude/skills/x/SKILL.md-12--",
                ".claude/skills/x/SKILL.md",
            ),
            ("docs/CLAUDE.md-45-mise", "docs/CLAUDE.md"),
            ("docs/CLAUDE.md:258:-", "docs/CLAUDE.md"),
            (
                "HEAD:cmd/cli/checkpoint_test.go",
                "cmd/cli/checkpoint_test.go",
            ),
            ("HEAD~2:src/a.rs", "src/a.rs"),
            ("8034f24:src/a.rs", "src/a.rs"),
            ("src/a.rs:12", "src/a.rs"),
            // Left alone: a name with digits after a dash, a word before a colon.
            ("src/v1-2/a.rs", "src/v1-2/a.rs"),
            ("src/release-2024-01.md", "src/release-2024-01.md"),
        ] {
            assert_eq!(mention(token).as_deref(), Some(want), "{token}");
        }
        // A drive letter is no revision (the workspace here is a Linux one).
        assert_eq!(
            mention("C:\\Users\\ana\\proj\\src\\x.rs:7").as_deref(),
            Some("C:/Users/ana/proj/src/x.rs")
        );
        let diff = "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1 +1 @@\n see a/b/c.rs\n";
        assert_eq!(
            scan(diff, Strictness::NeedSlash),
            // Each mention once: the four `src/lib.rs` are one.
            ["src/lib.rs", "a/b/c.rs"]
        );
    }

    #[test]
    fn lists_are_sorted_for_binary_search() {
        for list in [KNOWN_EXTENSIONS, WELL_KNOWN_FILES, PRODUCT_NAMES] {
            assert!(list.windows(2).all(|w| w[0] < w[1]), "{list:?}");
        }
        assert!(KNOWN_EXTENSION_KEYS.windows(2).all(|w| w[0] < w[1]));
        assert!(KNOWN_EXTENSIONS.iter().all(|e| e.len() <= 8
            && e.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())));
        assert!(WELL_KNOWN_FILES
            .iter()
            .all(|f| f.starts_with('.') || f.as_bytes()[0].is_ascii_uppercase()));
    }

    /// The extension lookup by number agrees with a search of the strings, in any case,
    /// on every known extension, its near misses and odd bytes.
    #[test]
    fn extension_keys_agree_with_the_string_list() {
        let by_string = |ext: &str| {
            ext.len() <= 8
                && KNOWN_EXTENSIONS
                    .binary_search(&ext.to_ascii_lowercase().as_str())
                    .is_ok()
        };
        let mut cases: Vec<String> = Vec::new();
        for e in KNOWN_EXTENSIONS {
            cases.push(e.to_string());
            cases.push(e.to_ascii_uppercase());
            cases.push(format!("{e}x"));
            cases.push(format!("{e}\0"));
            cases.push(e[..e.len() - 1].to_string());
        }
        cases.extend(
            [
                "",
                "RS",
                "Rs",
                "jsonl5",
                "abcdefghi",
                "tomlé",
                "é",
                "\0",
                "md\0\0",
            ]
            .map(str::to_owned),
        );
        for ext in &cases {
            assert_eq!(
                is_known_extension(ext),
                by_string(ext) && !ext.contains('\0'),
                "{ext:?}"
            );
        }
    }

    /// The scan before `NeedSlash` looked for `/` alone: every `.`, `/` and `file`.
    fn scan_every_mark(text: &str, strictness: Strictness) -> Vec<String> {
        let mut out = Vec::new();
        scan_marks(text, &ws(), strictness, false, true, token_bounds, |p| {
            out.push(p);
            true
        });
        out
    }

    /// [`clean_mention`] as it was written with `str` searches, before the byte searches.
    fn clean_mention_by_chars(token: &str) -> &str {
        fn without_revision(t: &str) -> &str {
            match t.split_once(':') {
                Some((rev, rest)) => past_revision(t, rev, rest),
                None => t,
            }
        }
        let mut t = token.trim_start_matches(['(', '[', '<', '\'', '"', '`', '@', '*']);
        if let Some(i) = t.find('#') {
            t = &t[..i];
        }
        t = without_revision(t);
        t = without_grep_position(t);
        loop {
            let before = t.len();
            t = t.trim_end_matches([
                '.', ',', ':', ';', ')', ']', '>', '\'', '"', '`', '!', '?', '*',
            ]);
            if let Some((head, tail)) = t.rsplit_once(':') {
                if !tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit()) {
                    t = head;
                }
            }
            if t.len() == before {
                return t;
            }
        }
    }

    #[test]
    fn cleaning_by_bytes_cleans_as_by_chars() {
        const PIECES: [&str; 14] = [
            "src/x.rs", ":", "12", "#", "HEAD", "~2", "8034f24", "é", "：", ".", "-", "(", "`", "a",
        ];
        let mut rng = 0x1234_5678_9ABC_DEF1_u64;
        for _ in 0..20_000 {
            let mut token = String::new();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let mut r = rng;
            for _ in 0..rng % 8 {
                token.push_str(PIECES[(r % PIECES.len() as u64) as usize]);
                r /= PIECES.len() as u64;
                if r == 0 {
                    r = rng.rotate_left(17);
                }
            }
            assert_eq!(
                clean_mention(&token),
                clean_mention_by_chars(&token),
                "{token:?}"
            );
        }
    }

    /// A xorshift generator from `seed`: the property tests' texts.
    fn xorshift(mut rng: u64) -> impl FnMut() -> u64 {
        move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        }
    }

    /// What the signer keeps of a scan: distinct mentions, first come, up to `cap`.
    fn kept(text: &str, strictness: Strictness, once: bool, cap: usize) -> Vec<String> {
        let slash_only = strictness == Strictness::NeedSlash;
        let mut out: Vec<String> = Vec::new();
        scan_marks(
            text,
            &ws(),
            strictness,
            slash_only,
            once,
            token_bounds,
            |p| {
                if !out.contains(&p) {
                    out.push(p);
                }
                out.len() < cap
            },
        );
        out
    }

    #[test]
    fn judging_each_cleaned_token_once_keeps_what_every_occurrence_kept() {
        const PIECES: [&str; 16] = [
            "src/x.rs",
            "./src/x.rs",
            "src/y.rs",
            "x.rs",
            ":12",
            ":40:",
            "#L3",
            " ",
            "\n",
            "(",
            ".",
            "/",
            "a/",
            "file",
            "\\",
            "é",
        ];
        let mut step = xorshift(0x2545_F491_4F6C_DD1D);
        let mut repeated = 0;
        for _ in 0..5_000 {
            let mut text = String::new();
            for _ in 0..step() % 60 {
                text.push_str(PIECES[(step() % PIECES.len() as u64) as usize]);
            }
            let cap = 1 + (step() % 6) as usize;
            for strictness in [Strictness::NeedSlash, Strictness::AllowBare] {
                let every = kept(&text, strictness, false, cap);
                assert_eq!(kept(&text, strictness, true, cap), every, "{text:?}");
                let mut all = Vec::new();
                scan_marks(&text, &ws(), strictness, false, false, token_bounds, |p| {
                    all.push(p);
                    true
                });
                repeated += usize::from(all.len() > every.len());
            }
        }
        // The texts repeat mentions, so the memo was put to work.
        assert!(repeated > 1_000, "{repeated}");
    }

    #[test]
    fn ascii_delimiters_by_byte_are_the_delimiters_by_char() {
        for b in 0..=0x7F_u8 {
            assert_eq!(
                is_ascii_text_delimiter(b),
                is_text_delimiter(char::from(b)),
                "{b:#04x}"
            );
        }
    }

    /// The token around `hit` as the scan widened it before: by character.
    fn token_bounds_by_chars(text: &str, hit: usize) -> (usize, usize) {
        let start = text[..hit]
            .char_indices()
            .rev()
            .find(|&(_, c)| is_text_delimiter(c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = text[hit..]
            .char_indices()
            .find(|&(_, c)| is_text_delimiter(c))
            .map_or(text.len(), |(i, _)| hit + i);
        (start, end)
    }

    /// The scan with tokens widened by character.
    fn scan_by_chars(text: &str, ws: &Workspace, strictness: Strictness) -> Vec<String> {
        let mut out = Vec::new();
        let slash_only = strictness == Strictness::NeedSlash;
        scan_marks(
            text,
            ws,
            strictness,
            slash_only,
            true,
            token_bounds_by_chars,
            |p| {
                out.push(p);
                true
            },
        );
        out
    }

    fn scan_in(text: &str, ws: &Workspace, strictness: Strictness) -> Vec<String> {
        let mut out = Vec::new();
        scan_text(text, ws, strictness, |p| {
            out.push(p);
            true
        });
        out
    }

    #[test]
    fn widening_by_byte_finds_what_widening_by_char_found_in_hostile_text() {
        // Windows paths, CJK and its full-width space, CRLF, NUL, other Unicode spaces
        // (delimiters only as characters), tokens recurring in a rotation longer than
        // the memo of the last few.
        const PIECES: [&str; 30] = [
            r"C:\Users\ana\src\proj\src\x.rs",
            r".\src\y.rs",
            r"src\z.rs",
            "src/a.rs",
            "src/b.rs",
            "web/c.tsx",
            "d/e.md",
            ":12:",
            ":7",
            " ",
            "\r\n",
            "\0",
            "\u{3000}",
            "\u{a0}",
            "\u{2028}",
            "\u{85}",
            "接口延迟",
            "修复/src/错误.rs",
            "é",
            "file",
            ".",
            "/",
            "\\",
            "\"",
            "(",
            "`",
            "\t",
            "\u{b}",
            "a/",
            "~/x.py",
        ];
        let workspaces = [ws(), windows_ws()];
        let mut step = xorshift(0x5DEE_CE66_D1CE_4E5B);
        for _ in 0..5_000 {
            let mut text = String::new();
            for _ in 0..step() % 80 {
                text.push_str(PIECES[(step() % PIECES.len() as u64) as usize]);
            }
            for ws in &workspaces {
                for strictness in [Strictness::NeedSlash, Strictness::AllowBare] {
                    assert_eq!(
                        scan_in(&text, ws, strictness),
                        scan_by_chars(&text, ws, strictness),
                        "{text:?}"
                    );
                }
            }
        }
        // 10,000 paths in one text, lines of grep output rotating through 10 files and then
        // each line a file of its own, CRLF line ends and an ideographic space before each.
        let mut text = String::new();
        for i in 0..10_000 {
            let file = if i < 5_000 { i % 10 } else { i };
            text.push_str(&format!("\u{3000}src\\m{file}\\x.rs:{i}: 内容 a/b\r\n"));
        }
        for ws in &workspaces {
            let found = scan_in(&text, ws, Strictness::NeedSlash);
            assert_eq!(found, scan_by_chars(&text, ws, Strictness::NeedSlash));
            assert_eq!(found.len(), 10 + 5_000);
        }
    }

    #[test]
    fn slash_only_scan_finds_what_every_mark_found() {
        const PIECES: [&str; 24] = [
            "/",
            ".",
            "file",
            " ",
            "\n",
            "\"",
            "(",
            ")",
            ",",
            ":12",
            "#L3",
            "src",
            "x.rs",
            "..",
            "~",
            "/home/ana/proj",
            "Makefile",
            "é",
            "\u{a0}",
            "\u{2003}",
            "*",
            "`",
            "a",
            "://",
        ];
        let mut rng = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..5_000 {
            let mut text = String::new();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            for _ in 0..rng % 40 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                text.push_str(PIECES[(rng % PIECES.len() as u64) as usize]);
            }
            for strictness in [Strictness::NeedSlash, Strictness::AllowBare] {
                assert_eq!(
                    scan(&text, strictness),
                    scan_every_mark(&text, strictness),
                    "{text:?}"
                );
            }
        }
    }

    /// `from_mention` without the allocation-free refusal: every token through `finish`.
    fn mention_through_finish(
        token: &str,
        ws: &Workspace,
        strictness: Strictness,
    ) -> Option<String> {
        if token.len() > MAX_PATH_BYTES {
            return None;
        }
        let t = clean_mention(token);
        if t.is_empty() || t.contains("://") || t.chars().any(is_foreign) {
            return None;
        }
        let has_slash = t.contains(['/', '\\']);
        if !has_slash && PRODUCT_NAMES.iter().any(|p| p.eq_ignore_ascii_case(t)) {
            return None;
        }
        let dotted = ["./", "../", ".\\", "..\\"]
            .iter()
            .any(|p| t.starts_with(p));
        finish(t, ws, |relative| {
            dotted || (names_a_file(relative) && (has_slash || strictness == Strictness::AllowBare))
        })
    }

    #[test]
    fn refusing_without_allocating_refuses_only_what_finish_refuses() {
        const PIECES: [&str; 22] = [
            "/", "\\", ".", "..", "~", "C:", "c:", "x", "src", "main.RS", "rs", "Makefile", "a.md",
            ".env", "é", "\u{a0}", "_", "-", ":3", "#a", ")", "\\\\?\\",
        ];
        let workspaces = [
            ws(),
            Workspace::for_session("/home/ana/proj", Some("/home/ana/proj/svc"), []),
            Workspace::for_session(r"C:\Users\ana\proj", Some(r"C:\Users\ana\proj\svc"), []),
        ];
        let mut rng = 0x2545_F491_4F6C_DD1D_u64;
        for _ in 0..20_000 {
            let mut token = String::new();
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            for _ in 0..1 + rng % 6 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                token.push_str(PIECES[(rng % PIECES.len() as u64) as usize]);
            }
            for ws in &workspaces {
                for strictness in [Strictness::NeedSlash, Strictness::AllowBare] {
                    assert_eq!(
                        from_mention(&token, ws, strictness),
                        mention_through_finish(&token, ws, strictness),
                        "{token:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn well_known_names_pass_the_scan_prefilter() {
        assert!(WELL_KNOWN_FILES
            .iter()
            .all(|n| n.contains('.') || n.contains("file")));
        let found = scan(
            "edit the Makefile, then the Dockerfile.",
            Strictness::AllowBare,
        );
        assert_eq!(found, vec!["Makefile", "Dockerfile"]);
    }

    #[test]
    fn repo_relative_normalization() {
        assert_eq!(
            mention("/home/ana/proj/src/main.rs").as_deref(),
            Some("src/main.rs")
        );
        assert_eq!(mention("./src/x.rs").as_deref(), Some("src/x.rs"));
        assert_eq!(mention("src/a/../b.rs").as_deref(), Some("src/b.rs"));
        assert_eq!(mention("src//./b.rs").as_deref(), Some("src/b.rs"));
        assert_eq!(mention("src/file.rs:12:3").as_deref(), Some("src/file.rs"));
        assert_eq!(mention("(src/file.rs:12),").as_deref(), Some("src/file.rs"));
        assert_eq!(mention("`src/lib.rs`.").as_deref(), Some("src/lib.rs"));
        assert_eq!(mention("**docs/a.md**").as_deref(), Some("docs/a.md"));
        assert_eq!(mention("@src/x.ts#L10-L20").as_deref(), Some("src/x.ts"));
        assert_eq!(
            mention("../sibling/x.rs").as_deref(),
            Some("../sibling/x.rs")
        );
        assert_eq!(mention("./configure").as_deref(), Some("configure"));
        assert_eq!(mention("/home/ana/proj/src").as_deref(), Some("src"));
        assert_eq!(mention("/home/ana/proj"), None);
        assert_eq!(mention("/home/ana/proj/"), None);
        assert_eq!(
            mention("/home/ana/project/x.rs").as_deref(),
            Some("/home/ana/project/x.rs")
        );
    }

    #[test]
    fn outside_the_workspace_only_clear_files() {
        assert_eq!(mention("/tmp/out.json").as_deref(), Some("/tmp/out.json"));
        assert_eq!(
            mention("/tmp/../etc/app.toml").as_deref(),
            Some("/etc/app.toml")
        );
        assert_eq!(mention("~/.zshrc").as_deref(), Some("~/.zshrc"));
        assert_eq!(mention("/usr/bin"), None);
        assert_eq!(mention("/dev/null"), None);
        assert_eq!(mention("~/src"), None);
    }

    #[test]
    fn slash_phrases_and_numbers_are_not_paths() {
        for t in [
            "and/or",
            "client/server",
            "read/write",
            "input/output",
            "true/false",
            "10/22",
            "10/22/2026",
            "w/o",
        ] {
            assert_eq!(mention(t), None, "{t}");
        }
        assert!(scan(
            "use it for read/write and/or client/server on 10/22",
            Strictness::AllowBare
        )
        .is_empty());
    }

    #[test]
    fn bare_files_need_allowance_and_a_real_extension() {
        assert_eq!(mention("main.rs").as_deref(), Some("main.rs"));
        assert_eq!(mention("Makefile").as_deref(), Some("Makefile"));
        assert_eq!(mention("README.MD").as_deref(), Some("README.MD"));
        assert_eq!(from_mention("main.rs", &ws(), Strictness::NeedSlash), None);
        for t in [
            "e.g.",
            "i.e",
            "v1.2.3",
            "example.com",
            "Node.js",
            "next.js",
            ".rs",
            "...",
            "..",
            ".",
            "foo.",
        ] {
            assert_eq!(mention(t), None, "{t}");
        }
    }

    #[test]
    fn urls_globs_and_garbage_are_refused() {
        for t in [
            "https://x.io/a.rs",
            "src/*.rs",
            "$HOME/x.rs",
            "{a,b}.rs",
            "src/\u{0}x.rs",
        ] {
            assert_eq!(mention(t), None, "{t:?}");
        }
        assert_eq!(mention(&format!("{}.rs", "a/".repeat(1000))), None);
    }

    #[test]
    fn declared_values() {
        let w = ws();
        assert_eq!(from_declared("src", &w).as_deref(), Some("src"));
        assert_eq!(from_declared("./src/", &w).as_deref(), Some("src"));
        assert_eq!(from_declared(".", &w), None);
        assert_eq!(from_declared("/home/ana/proj", &w), None);
        assert_eq!(
            from_declared("/home/ana/proj/My Notes/a.md", &w).as_deref(),
            Some("My Notes/a.md")
        );
        assert_eq!(from_declared("the main function", &w), None);
        assert_eq!(from_declared("/etc", &w), None);
        assert_eq!(from_declared("http://x/y.rs", &w), None);
    }

    #[test]
    fn result_text_scan() {
        let out = "error[E0308]: mismatched types\n  --> src/compose.rs:41:9\n   |\nnote: see ./build.rs and lib.rs\nwarning at /home/ana/proj/src/turn.rs:3: unused\n";
        assert_eq!(
            scan(out, Strictness::NeedSlash),
            vec!["src/compose.rs", "build.rs", "src/turn.rs"]
        );
    }

    #[test]
    fn relative_workspace_is_not_used_for_stripping() {
        let w = Workspace::new("proj");
        assert_eq!(
            from_mention("/abs/x.rs", &w, Strictness::AllowBare).as_deref(),
            Some("/abs/x.rs")
        );
        let root = Workspace::new("/");
        assert_eq!(
            from_mention("/src/x.rs", &root, Strictness::AllowBare).as_deref(),
            Some("src/x.rs")
        );
    }

    fn windows_ws() -> Workspace {
        let map: std::collections::BTreeMap<String, String> =
            [(r"C:\Users\ana\src".to_owned(), "/home/ana/src".to_owned())].into();
        Workspace::for_session("/home/ana/src/proj", Some(r"C:\Users\ana\src\proj"), &map)
    }

    #[test]
    fn windows_paths_come_out_repo_relative_with_slashes() {
        let w = windows_ws();
        let m = |t: &str| from_mention(t, &w, Strictness::AllowBare);
        for t in [
            r"C:\Users\ana\src\proj\src\x.rs",
            r"C:\\Users\\ana\\src\\proj\\src\\x.rs",
            r"c:\users\ANA\src\proj\src\x.rs",
            "C:/Users/ana/src/proj/src/x.rs",
            r".\src\x.rs",
            r".\\src\\x.rs",
            r"src\x.rs",
            r"src\\x.rs",
            "/home/ana/src/proj/src/x.rs",
            r#"@"C:\Users\ana\src\proj\src\x.rs""#,
        ] {
            assert_eq!(m(t).as_deref(), Some("src/x.rs"), "{t}");
        }
        assert_eq!(
            from_declared(r"C:\Users\ana\src\proj\docs", &w).as_deref(),
            Some("docs")
        );
        // Outside the workspace: kept only as a clear file, in `/` form.
        assert_eq!(m(r"D:\tmp\out.json").as_deref(), Some("D:/tmp/out.json"));
        assert_eq!(m(r"C:\Windows\System32"), None);
        // A sibling sharing a prefix is not inside.
        assert_eq!(
            m(r"C:\Users\ana\src\proj2\x.rs").as_deref(),
            Some("C:/Users/ana/src/proj2/x.rs")
        );
        let mut out = Vec::new();
        scan_text(
            "error: C:\\Users\\ana\\src\\proj\\src\\lib.rs:3:1 and .\\build.rs\r\n",
            &w,
            Strictness::NeedSlash,
            |p| {
                out.push(p);
                true
            },
        );
        assert_eq!(out, vec!["src/lib.rs", "build.rs"]);
    }

    #[test]
    fn a_subdirectory_cwd_prefixes_relative_paths() {
        let w = Workspace::for_session("/a/mono", Some("/a/mono/svc/api"), []);
        let m = |t: &str| from_mention(t, &w, Strictness::AllowBare);
        assert_eq!(m("src/x.rs").as_deref(), Some("svc/api/src/x.rs"));
        assert_eq!(m("../web/y.ts").as_deref(), Some("svc/web/y.ts"));
        assert_eq!(m("/a/mono/README.md").as_deref(), Some("README.md"));
        // A cwd outside the workspace (or a sibling with a shared prefix) changes nothing.
        let w = Workspace::for_session("/a/mono", Some("/a/mono2/svc"), []);
        assert_eq!(
            from_mention("src/x.rs", &w, Strictness::AllowBare).as_deref(),
            Some("src/x.rs")
        );
    }
}

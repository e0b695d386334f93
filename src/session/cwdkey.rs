//! The cwd key that names a workspace's directory under `$DSH_HOME/sessions/`, and the
//! escaping of session ids into directory names.
//!
//! Rules (spec `dsh-session-log.md`): every run of `/`, `\` or `:` becomes one `-`;
//! `[A-Za-z0-9._-]` is kept; any other character is written `~XXXX`, the four upper-case
//! hex digits of each of its UTF-16 code units (an astral character gives two escapes);
//! a leading `-` is stripped; the key is capped at 251 characters.
//!
//! Choices where the spec is silent:
//! - Exactly one leading `-` is stripped (the spec says "a leading `-`").
//! - The cap never cuts inside an escape, nor between the two escapes of one astral
//!   character: a character whose encoding does not fit entirely is dropped with the rest.
//! - Session ids keep only `[A-Za-z0-9_-]`; everything else, separators included, is
//!   escaped, so the mapping is injective and [`unescape_session_id`] can invert it. Ids are
//!   `session-<uuid>`, so neither the leading-`-` strip nor the cap applies to them.

/// The longest cwd key, in characters (all ASCII, so also bytes).
pub const MAX_CWD_KEY_LEN: usize = 251;

/// `/home/ana/src/widgets` → `home-ana-src-widgets` (the directory is `--<key>--`).
pub fn cwd_key(cwd: &str) -> String {
    // One piece per source character (or per separator run), so the cap can stop on a
    // piece boundary and never split an escape.
    let mut pieces: Vec<String> = Vec::new();
    let mut in_separator_run = false;
    for c in cwd.chars() {
        if matches!(c, '/' | '\\' | ':') {
            if !in_separator_run {
                pieces.push("-".to_owned());
            }
            in_separator_run = true;
            continue;
        }
        in_separator_run = false;
        pieces.push(if is_kept_in_cwd_key(c) {
            c.to_string()
        } else {
            escape_char(c)
        });
    }
    let skip = usize::from(pieces.first().is_some_and(|p| p == "-"));
    let mut key = String::new();
    for piece in pieces.iter().skip(skip) {
        if key.len() + piece.len() > MAX_CWD_KEY_LEN {
            break;
        }
        key.push_str(piece);
    }
    key
}

/// Escape a session id for its directory name (`.` is `~002E`).
pub fn escape_session_id(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for c in id.chars() {
        if is_kept_in_session_id(c) {
            out.push(c);
        } else {
            out.push_str(&escape_char(c));
        }
    }
    out
}

/// The session id a directory name stands for, or `None` when the name is not a
/// well-formed escaped id: a raw character that would have been escaped, a `~` not
/// followed by four hex digits, an escape of a character that is kept as is, or a lone
/// UTF-16 surrogate. Hex digits are accepted in either case.
pub fn unescape_session_id(name: &str) -> Option<String> {
    let mut units: Vec<u16> = Vec::with_capacity(name.len());
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'~' {
            let hex = name.get(i + 1..i + 5)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let unit = u16::from_str_radix(hex, 16).ok()?;
            // A kept character written as an escape is not what the escaper produces.
            if char::from_u32(u32::from(unit)).is_some_and(is_kept_in_session_id) {
                return None;
            }
            units.push(unit);
            i += 5;
        } else {
            let c = char::from(bytes[i]);
            if !bytes[i].is_ascii() || !is_kept_in_session_id(c) {
                return None;
            }
            units.push(u16::from(bytes[i]));
            i += 1;
        }
    }
    String::from_utf16(&units).ok()
}

/// An absolute path in one separator style: `/a/b` (POSIX), `C:/a/b` (a Windows drive,
/// the letter upper-cased) or `//server/share/a` (a Windows share); `.` and `..` collapsed,
/// no trailing `/`. Windows paths compare without regard to case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsPath {
    pub text: String,
    pub windows: bool,
}

/// `path` as an [`AbsPath`], whatever its separators (`C:\Users\ana`, `c:/users/ana`,
/// `\\srv\share`, `\\?\C:\x`, `/home/ana`); `None` for a relative or empty path.
pub fn normalize_abs(path: &str) -> Option<AbsPath> {
    let p = path.trim();
    let p = p
        .strip_prefix(r"\\?\")
        .or_else(|| p.strip_prefix("//?/"))
        .unwrap_or(p);
    let bytes = p.as_bytes();
    let drive = bytes.len() >= 2
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && (bytes.len() == 2 || bytes[2] == b'\\' || bytes[2] == b'/');
    let unc = p.starts_with(r"\\");
    // Neither a drive, nor UNC, nor rooted at `/` or `\\`: relative (told before copying).
    if !drive && !matches!(bytes.first(), Some(b'/' | b'\\')) {
        return None;
    }
    let slashed = p.replace('\\', "/");
    let (prefix, rest, windows) = if drive {
        let letter = char::from(bytes[0].to_ascii_uppercase());
        (format!("{letter}:"), &slashed[2..], true)
    } else if unc {
        (String::from("/"), &slashed[1..], true)
    } else if slashed.starts_with('/') {
        (String::new(), slashed.as_str(), false)
    } else {
        return None;
    };
    let mut segments: Vec<&str> = Vec::new();
    for seg in rest.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            _ => segments.push(seg),
        }
    }
    let text = format!("{prefix}/{}", segments.join("/"));
    let text = if text.len() > 1 && text.ends_with('/') && !text.ends_with(":/") {
        text.trim_end_matches('/').to_owned()
    } else {
        text
    };
    Some(AbsPath { text, windows })
}

/// The part of `path` under `root` (`""` for the root itself), compared segment by segment
/// (`/a/proj2` is not under `/a/proj`), without case for Windows paths.
pub fn relative_to(path: &AbsPath, root: &AbsPath) -> Option<String> {
    if path.windows != root.windows {
        return None;
    }
    let root_text = root.text.trim_end_matches('/');
    let head = path.text.get(..root_text.len())?;
    let same = if root.windows {
        head.eq_ignore_ascii_case(root_text)
    } else {
        head == root_text
    };
    if !same {
        return None;
    }
    let rest = &path.text[root_text.len()..];
    if rest.is_empty() {
        return Some(String::new());
    }
    rest.strip_prefix('/').map(str::to_owned)
}

/// `rest` (a `/`-separated relative path) under `root`.
pub fn join(root: &AbsPath, rest: &str) -> AbsPath {
    let text = if rest.is_empty() {
        root.text.clone()
    } else {
        format!("{}/{rest}", root.text.trim_end_matches('/'))
    };
    AbsPath {
        text,
        windows: root.windows,
    }
}

/// `path` translated through every `pathMap` pair, in both directions (a Windows path to
/// its Linux or Mac twin and back); the path itself not included. Pairs whose sides are not
/// absolute are skipped (config validation refuses them).
pub fn map_path<'m>(
    path: &AbsPath,
    path_map: impl IntoIterator<Item = (&'m String, &'m String)>,
) -> Vec<AbsPath> {
    let mut out: Vec<AbsPath> = Vec::new();
    for (a, b) in path_map {
        let (Some(a), Some(b)) = (normalize_abs(a), normalize_abs(b)) else {
            continue;
        };
        for (from, to) in [(&a, &b), (&b, &a)] {
            if let Some(rest) = relative_to(path, from) {
                let mapped = join(to, &rest);
                if mapped != *path && !out.contains(&mapped) {
                    out.push(mapped);
                }
            }
        }
    }
    out
}

/// A workspace's root and its `pathMap` twins: the directories a session's cwd may lie in
/// for the session to be the workspace's, whichever harness wrote it. Empty for a relative
/// or empty workspace path.
pub fn workspace_roots<'m>(
    workspace: &str,
    path_map: impl IntoIterator<Item = (&'m String, &'m String)>,
) -> Vec<AbsPath> {
    with_twins(workspace, path_map)
}

/// `path` normalized, then its `pathMap` twins; empty for a relative or empty path.
fn with_twins<'m>(
    path: &str,
    path_map: impl IntoIterator<Item = (&'m String, &'m String)>,
) -> Vec<AbsPath> {
    let Some(path) = normalize_abs(path) else {
        return Vec::new();
    };
    let twins = map_path(&path, path_map);
    let mut all = vec![path];
    all.extend(twins);
    all
}

/// Whether `cwd` — as written, or one of its `pathMap` twins — is one of `roots` or lies
/// inside one, segment by segment (a monorepo's package; another machine's path).
pub fn cwd_in_roots<'m>(
    cwd: &str,
    roots: &[AbsPath],
    path_map: impl IntoIterator<Item = (&'m String, &'m String)>,
) -> bool {
    with_twins(cwd, path_map)
        .iter()
        .any(|c| roots.iter().any(|r| relative_to(c, r).is_some()))
}

/// The directories a session's `cwd` may name on this machine: the cwd itself, then its
/// `pathMap` twins, each only when it is an absolute path here (a Windows path is not one on
/// Linux: it would resolve against the reader's own directory).
pub fn here_paths<'m>(
    cwd: &str,
    path_map: impl IntoIterator<Item = (&'m String, &'m String)>,
) -> Vec<String> {
    with_twins(cwd, path_map)
        .into_iter()
        .map(|p| p.text)
        .filter(|p| std::path::Path::new(p).is_absolute())
        .collect()
}

fn is_kept_in_cwd_key(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn is_kept_in_session_id(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-')
}

fn escape_char(c: char) -> String {
    let mut buf = [0u16; 2];
    c.encode_utf16(&mut buf)
        .iter()
        .map(|unit| format!("~{unit:04X}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_path() {
        assert_eq!(cwd_key("/home/ana/src/widgets"), "home-ana-src-widgets");
    }

    #[test]
    fn separator_runs_collapse() {
        assert_eq!(cwd_key("//srv///data/"), "srv-data-");
        assert_eq!(cwd_key("/a/:\\b"), "a-b");
    }

    #[test]
    fn windows_paths() {
        assert_eq!(cwd_key(r"C:\Users\ana\src"), "C-Users-ana-src");
        assert_eq!(cwd_key(r"\\server\share\x"), "server-share-x");
        assert_eq!(cwd_key("c:/work/proj"), "c-work-proj");
    }

    #[test]
    fn kept_characters() {
        assert_eq!(cwd_key("/a.b_c-d/E9"), "a.b_c-d-E9");
    }

    #[test]
    fn only_one_leading_dash_stripped() {
        assert_eq!(cwd_key("/-x"), "-x");
        assert_eq!(cwd_key("-x"), "x");
        assert_eq!(cwd_key("x"), "x");
        assert_eq!(cwd_key(""), "");
        assert_eq!(cwd_key("/"), "");
    }

    #[test]
    fn other_characters_escaped_upper_hex() {
        assert_eq!(cwd_key("/home/ana/my project"), "home-ana-my~0020project");
        assert_eq!(cwd_key("/tmp/é"), "tmp-~00E9");
        assert_eq!(cwd_key("/tmp/~x"), "tmp-~007Ex");
        assert_eq!(cwd_key("/srv/日本"), "srv-~65E5~672C");
    }

    #[test]
    fn astral_character_is_two_escapes() {
        // U+1F600 is the surrogate pair D83D DE00.
        assert_eq!(cwd_key("/x/😀"), "x-~D83D~DE00");
    }

    #[test]
    fn long_path_capped_at_251() {
        let long = format!("/{}", "a".repeat(400));
        let key = cwd_key(&long);
        assert_eq!(key.len(), MAX_CWD_KEY_LEN);
        assert!(key.chars().all(|c| c == 'a'));
    }

    #[test]
    fn cap_never_cuts_an_escape() {
        // 248 kept characters, then an escape of 5 that would end at 253: it is dropped.
        let path = format!("{}é", "b".repeat(248));
        assert_eq!(cwd_key(&path), "b".repeat(248));
        // 246 + 5 = 251 fits exactly.
        let path = format!("{}éz", "b".repeat(246));
        assert_eq!(cwd_key(&path), format!("{}~00E9", "b".repeat(246)));
    }

    #[test]
    fn cap_never_splits_a_surrogate_pair() {
        // 245 + 10 = 255 > 251: the astral character goes entirely, not half of it.
        let path = format!("{}😀", "c".repeat(245));
        assert_eq!(cwd_key(&path), "c".repeat(245));
        let path = format!("{}😀", "c".repeat(241));
        assert_eq!(cwd_key(&path), format!("{}~D83D~DE00", "c".repeat(241)));
    }

    #[test]
    fn cap_applies_after_the_strip() {
        let path = format!("/{}", "d".repeat(251));
        assert_eq!(cwd_key(&path), "d".repeat(251));
    }

    #[test]
    fn session_id_escaping() {
        let id = "session-0b5c2a4e-1f1a-4c59-9a2f-3f1d2b7e9c10";
        assert_eq!(escape_session_id(id), id);
        assert_eq!(escape_session_id("session-a.b"), "session-a~002Eb");
        assert_eq!(escape_session_id("a/b:c"), "a~002Fb~003Ac");
        assert_eq!(escape_session_id("s😀"), "s~D83D~DE00");
    }

    #[test]
    fn session_id_round_trip() {
        for id in [
            "session-0b5c2a4e-1f1a-4c59-9a2f-3f1d2b7e9c10",
            "session-a.b",
            "a/b\\c:d e~f",
            "日本😀.x",
            "",
        ] {
            assert_eq!(
                unescape_session_id(&escape_session_id(id)).as_deref(),
                Some(id)
            );
        }
    }

    #[test]
    fn unescape_accepts_lower_hex() {
        assert_eq!(unescape_session_id("a~002eb").as_deref(), Some("a.b"));
    }

    #[test]
    fn unescape_refuses_malformed_names() {
        for bad in [
            "session-a.b", // raw `.`
            "a~002",       // short escape
            "a~00G1",      // not hex
            "a~",          // escape at the end
            "~0041",       // escape of a kept character
            "~D83D",       // lone high surrogate
            "~DE00~D83D",  // surrogates in the wrong order
            "a b",         // raw space
            "é",           // raw non-ASCII
        ] {
            assert_eq!(unescape_session_id(bad), None, "{bad:?}");
        }
    }
    #[test]
    fn absolute_paths_in_every_style() {
        let n = |p: &str| normalize_abs(p).map(|a| (a.text, a.windows));
        assert_eq!(n("/home/ana/x/"), Some(("/home/ana/x".into(), false)));
        assert_eq!(
            n(r"C:\Users\ana\proj"),
            Some(("C:/Users/ana/proj".into(), true))
        );
        assert_eq!(
            n("c:/Users/ana/./a/../proj\\"),
            Some(("C:/Users/ana/proj".into(), true))
        );
        assert_eq!(n(r"\\srv\share\x"), Some(("//srv/share/x".into(), true)));
        assert_eq!(n(r"\\?\C:\x"), Some(("C:/x".into(), true)));
        assert_eq!(n("C:\\"), Some(("C:/".into(), true)));
        assert_eq!(n("/"), Some(("/".into(), false)));
        for rel in ["", "src/x.rs", r"src\x.rs", r".\x", "C:x"] {
            assert_eq!(n(rel), None, "{rel:?}");
        }
    }

    #[test]
    fn relative_to_respects_segments_and_windows_case() {
        let a = |p: &str| normalize_abs(p).expect("absolute");
        assert_eq!(
            relative_to(&a("/a/proj/x/y.rs"), &a("/a/proj")).as_deref(),
            Some("x/y.rs")
        );
        assert_eq!(
            relative_to(&a("/a/proj"), &a("/a/proj/")).as_deref(),
            Some("")
        );
        assert_eq!(relative_to(&a("/a/proj2/x"), &a("/a/proj")), None);
        assert_eq!(relative_to(&a("/A/proj/x"), &a("/a/proj")), None);
        assert_eq!(
            relative_to(&a(r"c:\users\ANA\proj\src\x.rs"), &a(r"C:\Users\ana\proj")).as_deref(),
            Some("src/x.rs")
        );
        assert_eq!(relative_to(&a("/x"), &a("/")).as_deref(), Some("x"));
        assert_eq!(relative_to(&a("C:/x"), &a("/")), None);
    }

    #[test]
    fn path_map_both_ways() {
        let map: std::collections::BTreeMap<String, String> = [
            (r"C:\Users\ana\src".to_owned(), "/home/ana/src".to_owned()),
            (
                "/mnt/c/Users/ana/src".to_owned(),
                "/home/ana/src".to_owned(),
            ),
        ]
        .into();
        let texts = |p: &str| -> Vec<String> {
            map_path(&normalize_abs(p).expect("absolute"), &map)
                .into_iter()
                .map(|a| a.text)
                .collect()
        };
        assert_eq!(texts(r"c:\users\ana\src\proj"), ["/home/ana/src/proj"]);
        assert_eq!(
            texts("/home/ana/src/proj"),
            ["/mnt/c/Users/ana/src/proj", "C:/Users/ana/src/proj"]
        );
        assert!(texts("/home/ana/srcx").is_empty());
    }

    #[test]
    fn a_cwd_belongs_to_the_roots_here_or_through_its_twins() {
        let map = std::collections::BTreeMap::from([(
            r"C:\Users\ana\src".to_owned(),
            "/home/ana/src".to_owned(),
        )]);
        let roots = workspace_roots("/home/ana/src/proj", &map);
        assert_eq!(roots.len(), 2, "{roots:?}");
        assert!(cwd_in_roots("/home/ana/src/proj/pkg", &roots, &map));
        assert!(cwd_in_roots(r"c:\users\ANA\src\proj\pkg", &roots, &map));
        assert!(!cwd_in_roots(r"C:\Users\ana\src\proj2", &roots, &map));
        assert!(!cwd_in_roots("/home/ana/src/proj2", &roots, &map));
        assert!(!cwd_in_roots("proj", &roots, &map));
        assert!(!cwd_in_roots("", &roots, &map));
        assert!(workspace_roots("relative/ws", &map).is_empty());
        // On this machine: the cwd, then its twins, only absolute paths here.
        assert_eq!(
            here_paths(r"C:\Users\ana\src\proj", &map),
            ["/home/ana/src/proj"]
        );
        assert_eq!(
            here_paths("/home/ana/src/proj/", &map),
            ["/home/ana/src/proj"]
        );
        assert!(here_paths("proj", &map).is_empty());
    }
}

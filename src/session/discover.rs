//! Finding a workspace's sessions and each session's highest-generation log.
//!
//! Layout: `$DSH_HOME/sessions/--<cwd-key>--/<escaped session id>/session[.vN].jsonl[.zstd]`.
//! Read-only: `session.lock` (the writer's flock) is never opened, taken or deleted, and
//! files that are not a log of some generation are ignored.

use std::io;
use std::path::{Path, PathBuf};

use super::cwdkey::{
    cwd_in_roots, cwd_key, escape_session_id, unescape_session_id, workspace_roots, AbsPath,
};
use super::reader::{LogItem, LogReader, ReaderOptions, ResumePoint};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLog {
    /// The session directory (full path).
    pub session_dir: PathBuf,
    /// The session id: the directory name unescaped, or the name as is when it is not a
    /// well-formed escaped id.
    pub session_id: String,
    /// The highest generation log file (`session.v4.jsonl.zstd` > … > `session.jsonl.zstd`).
    pub log: PathBuf,
    pub generation: u32,
    pub compressed: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error("cannot list {dir}: {source}; check that it exists and is readable")]
    Io {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The directory that holds the sessions that had no cwd.
pub const NO_CWD_DIR: &str = "_no-cwd";

/// `$DSH_HOME/sessions/--<cwd-key>--` for `workspace` (absolute path); an empty workspace
/// (a session without cwd) maps to `$DSH_HOME/sessions/_no-cwd`.
pub fn workspace_sessions_dir(dsh_home: &Path, workspace: &str) -> PathBuf {
    let sessions = dsh_home.join("sessions");
    if workspace.is_empty() {
        return sessions.join(NO_CWD_DIR);
    }
    sessions.join(format!("--{}--", cwd_key(workspace)))
}

/// The log file name of one generation: `session.jsonl` for 0, `session.vN.jsonl` after,
/// with `.zstd` appended when compressed.
pub fn log_file_name(generation: u32, compressed: bool) -> String {
    let base = if generation == 0 {
        "session.jsonl".to_owned()
    } else {
        format!("session.v{generation}.jsonl")
    };
    if compressed {
        format!("{base}.zstd")
    } else {
        base
    }
}

/// `$DSH_HOME/sessions/--<cwd-key>--/<escaped id>/session[.vN].jsonl[.zstd]`: where the
/// harness keeps a session's log (the demo and the test kit write there). Creates nothing:
/// the caller makes the directories.
pub fn session_log_path(
    dsh_home: &Path,
    workspace: &str,
    session_id: &str,
    version: u32,
    compressed: bool,
) -> PathBuf {
    workspace_sessions_dir(dsh_home, workspace)
        .join(escape_session_id(session_id))
        .join(log_file_name(version, compressed))
}

/// Parse a log file name back to `(generation, compressed)`; `None` for any other file.
/// `vN` must be canonical (`v1`, `v12`; not `v0`, `v01`), as the writer names them.
pub fn parse_log_file_name(name: &str) -> Option<(u32, bool)> {
    let (stem, compressed) = match name.strip_suffix(".zstd") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let middle = stem.strip_prefix("session.")?.strip_suffix("jsonl")?;
    if middle.is_empty() {
        return Some((0, compressed));
    }
    let digits = middle.strip_prefix('v')?.strip_suffix('.')?;
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let generation = digits.parse::<u32>().ok()?;
    Some((generation, compressed))
}

/// Every session of the workspace, sorted by directory; sessions without any log file are
/// skipped. A session belongs to the workspace when its cwd is the workspace or any
/// directory inside it (a monorepo's package), on this machine's paths or, through
/// `path_map`, another machine's (`C:\Users\ana\src\proj`). Found by name first: the
/// directories whose cwd key is the root's key (every session there belongs, as always) or
/// extends it by `-…`; only those are opened, and a session in an extending directory
/// belongs only when its header's cwd is inside the root, segment by segment (the key is
/// lossy: `/a/proj-x` and `/a/proj/x` share it, `/a/proj2` does not extend it).
pub fn list_workspace_sessions<'m>(
    dsh_home: &Path,
    workspace: &str,
    path_map: impl IntoIterator<Item = (&'m String, &'m String)> + Clone,
) -> Result<Vec<SessionLog>, DiscoverError> {
    let (sessions, unreadable) =
        list_workspace_sessions_and_unreadable(dsh_home, workspace, path_map)?;
    match unreadable.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(sessions),
    }
}

/// [`list_workspace_sessions`], with the session directories that cannot be read given
/// back beside the sessions instead of failing the list: an unreadable session fails only
/// itself.
pub fn list_workspace_sessions_and_unreadable<'m>(
    dsh_home: &Path,
    workspace: &str,
    path_map: impl IntoIterator<Item = (&'m String, &'m String)> + Clone,
) -> Result<SessionsAndUnreadable, DiscoverError> {
    let roots = workspace_roots(workspace, path_map.clone());
    if roots.is_empty() {
        return list_sessions_and_unreadable(dsh_home, workspace);
    }
    let keys = root_keys(&roots);
    let sessions_dir = dsh_home.join("sessions");
    let entries = match std::fs::read_dir(&sessions_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => {
            return Err(DiscoverError::Io {
                dir: sessions_dir,
                source,
            })
        }
    };
    let mut dirs: Vec<(PathBuf, bool)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DiscoverError::Io {
            dir: sessions_dir.clone(),
            source,
        })?;
        if let Some(exact) = key_relation(&entry.path(), &keys) {
            dirs.push((entry.path(), exact));
        }
    }
    dirs.sort();
    let mut out = Vec::new();
    let mut unreadable = Vec::new();
    for (dir, exact) in dirs {
        let (logs, bad) = list_sessions_in_and_unreadable(&dir)?;
        for log in logs {
            if exact || cwd_inside(&log.log, &roots, path_map.clone()) {
                out.push(log);
            }
        }
        // An unreadable session of a directory that may be a sibling's (an extending key)
        // cannot be told apart by its header: only the root's own directory reports them.
        if exact {
            unreadable.extend(bad);
        }
    }
    Ok((out, unreadable))
}

/// The cwd keys of a workspace root and its twins, each with whether it compares without
/// case (a Windows path).
pub fn root_keys(roots: &[AbsPath]) -> Vec<(String, bool)> {
    roots
        .iter()
        .map(|r| (cwd_key(&r.text), r.windows))
        .collect()
}

/// How a `--<key>--` directory relates to the workspace's keys: `Some(true)` for a root's
/// own key, `Some(false)` for a key that extends one by `-…` (a subdirectory's, or a
/// sibling's whose name goes on with `-`: the header decides), `None` otherwise.
pub fn key_relation(ws_dir: &Path, keys: &[(String, bool)]) -> Option<bool> {
    let name = ws_dir.file_name()?.to_str()?;
    let key = name.strip_prefix("--")?.strip_suffix("--")?;
    let mut found = None;
    for (root_key, fold) in keys {
        let eq = |a: &str, b: &str| {
            if *fold {
                a.eq_ignore_ascii_case(b)
            } else {
                a == b
            }
        };
        if eq(key, root_key) {
            return Some(true);
        }
        if key.len() > root_key.len()
            && key.is_char_boundary(root_key.len())
            && eq(&key[..root_key.len()], root_key)
            && (root_key.is_empty() || key.as_bytes()[root_key.len()] == b'-')
        {
            found = Some(false);
        }
    }
    found
}

/// Whether the log's header names a cwd inside one of `roots` (directly or through the map).
fn cwd_inside<'m>(
    log: &Path,
    roots: &[AbsPath],
    path_map: impl IntoIterator<Item = (&'m String, &'m String)>,
) -> bool {
    header_cwd(log).is_some_and(|cwd| cwd_in_roots(&cwd, roots, path_map))
}

/// The cwd a log's header records; `None` when it cannot be read (the archive reports an
/// unreadable log of its own workspace; here it only decides membership).
pub fn header_cwd(log: &Path) -> Option<String> {
    // Never open a FIFO or a device here: a read could block discovery.
    if !std::fs::metadata(log).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut reader =
        LogReader::open_with(log, ResumePoint::default(), ReaderOptions::default()).ok()?;
    match reader.next_item() {
        Ok(Some(LogItem::Header(h))) => h.cwd,
        _ => None,
    }
}

/// Every session of the workspace directory named by its exact cwd key, sorted by
/// directory name; sessions without any log file are skipped. A missing workspace
/// directory is an empty list.
pub fn list_sessions(dsh_home: &Path, workspace: &str) -> Result<Vec<SessionLog>, DiscoverError> {
    list_sessions_in(&workspace_sessions_dir(dsh_home, workspace))
}

/// [`list_sessions`], with every session directory that cannot be read given back beside
/// the sessions (directory, error) instead of failing the whole list: an unreadable
/// session fails only itself. An unreadable workspace directory is still an error.
pub fn list_sessions_and_unreadable(
    dsh_home: &Path,
    workspace: &str,
) -> Result<SessionsAndUnreadable, DiscoverError> {
    list_sessions_in_and_unreadable(&workspace_sessions_dir(dsh_home, workspace))
}

/// Sessions, and the session directories that could not be read (each with its error).
pub type SessionsAndUnreadable = (Vec<SessionLog>, Vec<(PathBuf, DiscoverError)>);

/// The sessions of one `--<key>--` directory, sorted by directory name; the first
/// unreadable session directory fails the list.
pub fn list_sessions_in(dir: &Path) -> Result<Vec<SessionLog>, DiscoverError> {
    let (sessions, unreadable) = list_sessions_in_and_unreadable(dir)?;
    match unreadable.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(sessions),
    }
}

/// [`list_sessions_in`], unreadable session directories given back beside the sessions.
pub fn list_sessions_in_and_unreadable(dir: &Path) -> Result<SessionsAndUnreadable, DiscoverError> {
    let dir = dir.to_path_buf();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(source) => return Err(DiscoverError::Io { dir, source }),
    };
    let mut session_dirs = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DiscoverError::Io {
            dir: dir.clone(),
            source,
        })?;
        let path = entry.path();
        // `metadata` follows symlinks: a linked session directory still counts.
        if std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            session_dirs.push(path);
        }
    }
    session_dirs.sort();
    let mut sessions = Vec::new();
    let mut unreadable = Vec::new();
    for session_dir in session_dirs {
        match highest_generation(&session_dir) {
            Ok(Some(log)) => sessions.push(log),
            Ok(None) => {}
            // Removed between the listing and now: it has no log any more.
            Err(DiscoverError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
            Err(e) => unreadable.push((session_dir, e)),
        }
    }
    Ok((sessions, unreadable))
}

/// The highest-generation log in one session directory, if any. When a generation exists
/// both compressed and plain, the compressed file wins.
pub fn highest_generation(session_dir: &Path) -> Result<Option<SessionLog>, DiscoverError> {
    let io_error = |source| DiscoverError::Io {
        dir: session_dir.to_path_buf(),
        source,
    };
    let mut best: Option<(u32, bool, PathBuf)> = None;
    for entry in std::fs::read_dir(session_dir).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let Some((generation, compressed)) = parse_log_file_name(&name) else {
            continue;
        };
        // A log name that is not a readable file is still the log: opening it reports the
        // problem by name instead of the session silently vanishing from the archive.
        let path = entry.path();
        let better = match &best {
            None => true,
            Some((g, c, _)) => (generation, compressed) > (*g, *c),
        };
        if better {
            best = Some((generation, compressed, path));
        }
    }
    let Some((generation, compressed, log)) = best else {
        return Ok(None);
    };
    let dir_name = session_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let session_id = unescape_session_id(&dir_name).unwrap_or(dir_name);
    Ok(Some(SessionLog {
        session_dir: session_dir.to_path_buf(),
        session_id,
        log,
        generation,
        compressed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, b"x").unwrap();
    }

    #[test]
    fn workspace_dir_name() {
        let home = Path::new("/h/.dsh");
        assert_eq!(
            workspace_sessions_dir(home, "/home/ana/src/widgets"),
            PathBuf::from("/h/.dsh/sessions/--home-ana-src-widgets--")
        );
        assert_eq!(
            workspace_sessions_dir(home, ""),
            PathBuf::from("/h/.dsh/sessions/_no-cwd")
        );
    }

    #[test]
    fn file_names_round_trip() {
        for g in [0, 1, 2, 3, 4, 17] {
            for c in [false, true] {
                assert_eq!(parse_log_file_name(&log_file_name(g, c)), Some((g, c)));
            }
        }
        assert_eq!(log_file_name(0, true), "session.jsonl.zstd");
        assert_eq!(log_file_name(3, false), "session.v3.jsonl");
    }

    #[test]
    fn unknown_names_ignored() {
        for name in [
            "session.lock",
            "session.v0.jsonl",
            "session.v01.jsonl",
            "session.v.jsonl",
            "session.vx.jsonl",
            "session.v1jsonl",
            "session.v1.jsonl.zst",
            "session.v1.jsonl.bak",
            "xsession.jsonl",
            "session.jsonl.zstd.tmp",
            "session.v99999999999.jsonl",
            "session.v-1.jsonl",
            "session.v+1.jsonl",
        ] {
            assert_eq!(parse_log_file_name(name), None, "{name}");
        }
    }

    #[test]
    fn highest_generation_wins_and_compressed_preferred() {
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path().join("session-a");
        touch(&s.join("session.lock"));
        touch(&s.join("session.jsonl.zstd"));
        touch(&s.join("session.v1.jsonl.zstd"));
        touch(&s.join("session.v3.jsonl"));
        touch(&s.join("session.v3.jsonl.zstd"));
        touch(&s.join("session.v2.jsonl"));
        touch(&s.join("notes.txt"));
        let log = highest_generation(&s).unwrap().unwrap();
        assert_eq!(log.generation, 3);
        assert!(log.compressed);
        assert_eq!(log.log, s.join("session.v3.jsonl.zstd"));
        assert_eq!(log.session_id, "session-a");
        // The lock is untouched.
        assert_eq!(fs::read(s.join("session.lock")).unwrap(), b"x");
    }

    #[test]
    fn plain_higher_generation_beats_compressed_lower() {
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path().join("s");
        touch(&s.join("session.v1.jsonl.zstd"));
        touch(&s.join("session.v10.jsonl"));
        let log = highest_generation(&s).unwrap().unwrap();
        assert_eq!((log.generation, log.compressed), (10, false));
    }

    #[test]
    fn a_directory_named_like_a_log_is_still_the_log() {
        // Not skipped: opening it fails by name, so the session never silently vanishes.
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path().join("s");
        fs::create_dir_all(s.join("session.v5.jsonl")).unwrap();
        touch(&s.join("session.jsonl"));
        let log = highest_generation(&s).unwrap().unwrap();
        assert_eq!(log.generation, 5);
    }

    #[test]
    fn list_sessions_sorted_skips_logless_and_unescapes() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        let ws = "/home/ana/src/widgets";
        let dir = workspace_sessions_dir(home, ws);
        touch(&dir.join("session-b").join("session.v2.jsonl.zstd"));
        touch(&dir.join("session-a~002E1").join("session.jsonl"));
        touch(&dir.join("session-c").join("session.lock"));
        touch(&dir.join("stray-file"));
        let sessions = list_sessions(home, ws).unwrap();
        let ids: Vec<_> = sessions.iter().map(|s| s.session_id.as_str()).collect();
        assert_eq!(ids, ["session-a.1", "session-b"]);
        assert_eq!(sessions[1].generation, 2);
        assert_eq!(sessions[0].session_dir, dir.join("session-a~002E1"));
    }

    #[test]
    fn missing_workspace_is_empty() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(list_sessions(tmp.path(), "/nowhere").unwrap().is_empty());
    }

    #[test]
    fn malformed_dir_name_kept_as_is() {
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path().join("odd.name");
        touch(&s.join("session.jsonl"));
        assert_eq!(
            highest_generation(&s).unwrap().unwrap().session_id,
            "odd.name"
        );
    }

    #[test]
    fn unreadable_session_dir_is_an_error() {
        let tmp = tempfile::tempdir().unwrap();
        let err = highest_generation(&tmp.path().join("absent")).unwrap_err();
        assert!(err.to_string().contains("absent"));
    }

    fn write_log(home: &Path, cwd: &str, id: &str) {
        use crate::testkit::writer::{session_log_path, LogWriter, SessionScript};
        let path = session_log_path(home, cwd, id, 4, true);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let header = SessionScript::new(4, 0).header(id, cwd, 0);
        LogWriter::create(&path, true, &header).unwrap();
    }

    #[test]
    fn a_workspace_owns_the_sessions_inside_it_and_only_those() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        write_log(home, "/a/proj", "s-root");
        write_log(home, "/a/proj/svc/api", "s-sub");
        // Shares the key `a-proj-x` with `/a/proj/x` but is a sibling: its header says so.
        write_log(home, "/a/proj-x", "s-dash-sibling");
        write_log(home, "/a/proj2", "s-prefix-sibling");
        write_log(home, "/a/proj/x", "s-x");
        let none: [(&String, &String); 0] = [];
        let ids = |ws: &str, map: &std::collections::BTreeMap<String, String>| -> Vec<String> {
            list_workspace_sessions(home, ws, map)
                .unwrap()
                .into_iter()
                .map(|s| s.session_id)
                .collect()
        };
        let empty = std::collections::BTreeMap::new();
        assert_eq!(ids("/a/proj", &empty), ["s-root", "s-sub", "s-x"]);
        assert_eq!(ids("/a/proj/svc", &empty), ["s-sub"]);
        assert_eq!(
            list_workspace_sessions(home, "/a/proj", none)
                .unwrap()
                .len(),
            3
        );
        // The exact directory keeps every session, as before (its cwd is the root's key).
        assert_eq!(ids("/a/proj-x", &empty), ["s-dash-sibling", "s-x"]);
    }

    #[test]
    fn a_windows_session_is_found_through_the_path_map() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        write_log(home, r"C:\Users\ana\src\proj", "s-win");
        write_log(home, r"c:\users\ana\src\proj\pkg", "s-win-sub");
        write_log(home, "/mnt/c/Users/ana/src/proj", "s-wsl");
        let map: std::collections::BTreeMap<String, String> = [
            (r"C:\Users\ana\src".to_owned(), "/home/ana/src".to_owned()),
            (
                "/mnt/c/Users/ana/src".to_owned(),
                "/home/ana/src".to_owned(),
            ),
        ]
        .into();
        let ids: Vec<String> = list_workspace_sessions(home, "/home/ana/src/proj", &map)
            .unwrap()
            .into_iter()
            .map(|s| s.session_id)
            .collect();
        assert_eq!(ids, ["s-win", "s-win-sub", "s-wsl"]);
        let empty = std::collections::BTreeMap::new();
        assert!(list_workspace_sessions(home, "/home/ana/src/proj", &empty)
            .unwrap()
            .is_empty());
    }
}

//! Discovery, the seam's first part, for the harnesses whose logs lie in trees under a home
//! of their own (every harness but DSH, whose session directories are keyed by workspace):
//! where a harness's logs live, which files are logs, the working directory a log names,
//! the session it was forked from, the file that holds a session after its own is gone, and
//! the moments only some harnesses have (a sweep that deletes old logs, logs no one appends
//! to). Each harness answers in its own folder; the daemon and the archive ask through
//! [`TreeHarness`] and never name one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::session::discover::{DiscoverError, SessionLog};
use crate::session::reader::{ReadError, ResumePoint};

use super::{EventSource, Harness, SourceOptions};

/// One tree of a harness's home that holds its logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogTree {
    pub harness: Harness,
    /// The harness's home (`~/.claude`, `~/.codex`): a change to it may create the tree.
    pub home: PathBuf,
    pub tree: PathBuf,
    /// Logs no one appends to any more (Codex's `archived_sessions/`): what they hold is
    /// archived at once.
    pub cold: bool,
}

impl LogTree {
    /// The tree `name` under a harness's `home`.
    pub fn under(harness: Harness, home: &Path, name: &str, cold: bool) -> LogTree {
        LogTree {
            harness,
            home: home.to_path_buf(),
            tree: home.join(name),
            cold,
        }
    }
}

/// What a follower keeps between polls of one log to read only what was appended; each
/// harness that keeps something stores its own type here.
#[derive(Default)]
pub struct FollowCache(Option<Box<dyn std::any::Any + Send>>);

impl FollowCache {
    /// The harness's cache, made empty at the first use (or when another type was kept).
    pub fn get_or_default<T: Default + Send + 'static>(&mut self) -> &mut T {
        if !self.0.as_ref().is_some_and(|c| c.is::<T>()) {
            self.0 = Some(Box::<T>::default());
        }
        self.0
            .as_mut()
            .and_then(|c| c.downcast_mut::<T>())
            .expect("the cache was just made of this type")
    }
}

impl std::fmt::Debug for FollowCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "FollowCache(kept)"
        } else {
            "FollowCache(empty)"
        })
    }
}

/// A harness whose logs lie in trees under its own home.
pub trait TreeHarness: Sync {
    fn harness(&self) -> Harness;
    /// Its home, from the environment (`CLAUDE_CONFIG_DIR` / `~/.claude`, …).
    fn home_from_env(&self) -> Option<PathBuf>;
    /// The config switch that turns its sessions on (`claudeCodeSessions`, …).
    fn switch(&self) -> &'static str;
    /// The trees of `home` that hold its logs.
    fn trees(&self, home: &Path) -> Vec<LogTree>;
    /// How many path components below its tree a log lies at most.
    fn max_depth(&self) -> usize;
    /// Whether `path` under `tree` is a session log the daemon follows (not a subagent's,
    /// not a file another one of the same session hides).
    fn is_log(&self, tree: &Path, path: &Path) -> bool;
    /// The first working directory the log's lines name.
    fn log_cwd(&self, path: &Path) -> Option<String>;
    /// The session the log was forked from, its own id unprefixed.
    fn fork_parent(&self, path: &Path) -> Option<String>;
    /// The file that holds session `id` (unprefixed) now that `gone` no longer does (a log
    /// recompressed or moved by its harness). `None` by default: a session stays in its file.
    fn successor(&self, _gone: &Path, _id: &str) -> Option<PathBuf> {
        None
    }
    /// Whether one session may move from file to file (so two files of one id are one
    /// session, not two).
    fn sessions_move(&self) -> bool {
        false
    }
    /// Whether no one appends to this log any more, wherever it lies (a recompressed file).
    fn is_sealed(&self, _path: &Path) -> bool {
        false
    }
    /// After how many days the harness deletes a log, as `home`'s settings say; `None`: never.
    fn sweep_days(&self, _home: &Path) -> Option<u64> {
        None
    }
    /// The file of `home` whose change may change [`TreeHarness::sweep_days`].
    fn settings_file(&self, _home: &Path) -> Option<PathBuf> {
        None
    }
    /// The sessions of `workspace` under `home`, sorted: those whose cwd is the workspace or
    /// inside it, here or through `path_map` (another machine's paths).
    fn list_workspace_sessions(
        &self,
        home: &Path,
        workspace: &str,
        path_map: &BTreeMap<String, String>,
    ) -> Result<Vec<SessionLog>, DiscoverError>;
    /// Its reader over the log at `path` from `from`.
    fn open(
        &self,
        path: &Path,
        from: ResumePoint,
        options: SourceOptions,
    ) -> Result<Box<dyn EventSource>, ReadError>;
    /// Its reader for a followed log: `cache` keeps what one poll learnt for the next.
    fn open_followed(
        &self,
        path: &Path,
        from: ResumePoint,
        options: SourceOptions,
        _cache: &mut FollowCache,
    ) -> Result<Box<dyn EventSource>, ReadError> {
        self.open(path, from, options)
    }
}

/// A harness's home: the environment variable `var` when set and not empty, else
/// `$HOME/<dot_dir>`.
pub(crate) fn home_from_env(var: &str, dot_dir: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(var).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(dot_dir))
}

/// Whether `config` turns `harness`'s sessions on.
pub fn enabled(harness: &dyn TreeHarness, config: &Config) -> bool {
    config.harness_on(harness.switch())
}

/// Every tree of every harness `config` turns on, each home found from the environment.
pub fn trees(config: &Config) -> Vec<LogTree> {
    super::tree_harnesses()
        .into_iter()
        .filter(|h| enabled(*h, config))
        .filter_map(|h| Some(h.trees(&h.home_from_env()?)))
        .flatten()
        .collect()
}

/// Whether a harness's logs are on this machine: any of its trees is there (a Codex home
/// may hold only `archived_sessions/`).
pub fn present(trees: &[LogTree], harness: Harness) -> bool {
    trees
        .iter()
        .any(|t| t.harness == harness && t.tree.is_dir())
}

/// The logs of `t`'s harness under `dir` (inside its tree), sorted.
pub fn collect_logs(t: &LogTree, dir: &Path, out: &mut Vec<PathBuf>) {
    let Some(imp) = t.harness.tree_harness() else {
        return;
    };
    collect(imp, &t.tree, dir, out);
}

fn collect(imp: &dyn TreeHarness, tree: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut found: Vec<(PathBuf, bool)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.path(), e.file_type().ok()?.is_dir())))
        .collect();
    found.sort();
    for (path, is_dir) in found {
        let depth = path
            .strip_prefix(tree)
            .map_or(usize::MAX, |r| r.components().count());
        if is_dir && depth < imp.max_depth() {
            collect(imp, tree, &path, out);
        } else if !is_dir && imp.is_log(tree, &path) {
            out.push(path);
        }
    }
}

/// The depth of `path` below `tree` and its file name, for a harness's `is_log`.
pub(crate) fn depth_and_name(tree: &Path, path: &Path) -> Option<(usize, String)> {
    let rel = path.strip_prefix(tree).ok()?;
    let name = path.file_name()?.to_string_lossy().into_owned();
    Some((rel.components().count(), name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_harness_with_only_its_archived_tree_is_present() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tree = |name: &str, cold: bool| LogTree::under(Harness::Codex, dir.path(), name, cold);
        let trees = [tree("sessions", false), tree("archived_sessions", true)];
        assert!(!present(&trees, Harness::Codex), "neither tree exists");
        std::fs::create_dir(dir.path().join("archived_sessions")).expect("mkdir");
        assert!(present(&trees, Harness::Codex), "the archived tree alone");
        assert!(!present(&trees, Harness::ClaudeCode), "another harness");
    }

    #[test]
    fn a_follow_cache_keeps_one_type_and_starts_anew_for_another() {
        let mut cache = FollowCache::default();
        *cache.get_or_default::<u32>() = 7;
        assert_eq!(*cache.get_or_default::<u32>(), 7, "kept between uses");
        assert_eq!(
            cache.get_or_default::<String>().as_str(),
            "",
            "another type starts empty"
        );
        assert_eq!(*cache.get_or_default::<u32>(), 0);
    }
}

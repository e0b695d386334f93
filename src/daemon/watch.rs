//! Watching `$DSH_HOME/sessions` recursively with `notify` (inotify on Linux). The watcher's
//! callback never blocks: it hands changed paths to the daemon through a bounded channel
//! (`try_send`), and when the channel is full it raises a flag that makes the daemon
//! rescan instead — nothing is lost, only coalesced.
//!
//! When watches cannot be added (the inotify limit), the daemon says so, naming the limit
//! (`/proc/sys/fs/inotify/max_user_watches`), and falls back to polling; `chapters daemon
//! status` shows it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

/// Where Linux keeps the per-user watch limit.
pub const INOTIFY_LIMIT_FILE: &str = "/proc/sys/fs/inotify/max_user_watches";

/// How the daemon learns of changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchMode {
    /// Kernel notifications.
    Notify,
    /// Periodic stat of every log; `reason` says why.
    Polling { reason: String },
}

/// Flags the watcher's callback raises for the daemon.
#[derive(Debug, Default)]
pub struct WatchFlags {
    /// Events were dropped (channel full, or the kernel queue overflowed): rescan.
    pub rescan: AtomicBool,
    /// A watch could not be added (the limit): switch to polling.
    pub limit_hit: AtomicBool,
}

/// The message for a watch-limit failure, naming the limit and what to do.
pub fn limit_message(detail: &str) -> String {
    format!(
        "cannot watch the session logs ({detail}): the inotify watch limit is reached; raise {INOTIFY_LIMIT_FILE} (e.g. `sysctl fs.inotify.max_user_watches=524288`). Polling instead"
    )
}

fn is_limit(e: &notify::Error) -> bool {
    matches!(e.kind, notify::ErrorKind::MaxFilesWatch)
        || matches!(&e.kind, notify::ErrorKind::Io(io) if io.raw_os_error() == Some(28))
}

pub struct Watch {
    watcher: Option<RecommendedWatcher>,
    pub mode: WatchMode,
    sessions: PathBuf,
    /// Whether `sessions` itself is watched (it may not exist yet: then its parent is).
    sessions_watched: bool,
    /// Other harnesses' homes (non-recursively) and trees (recursively) watched.
    watched: std::collections::BTreeSet<PathBuf>,
}

impl Watch {
    /// Start watching. `send` gets each batch of changed paths and returns false when the
    /// daemon's queue is full. `force_poll` skips the watcher (config `daemonWatch: poll`).
    pub fn start(
        dsh_home: &Path,
        flags: Arc<WatchFlags>,
        send: impl Fn(Vec<PathBuf>) -> bool + Send + 'static,
        force_poll: bool,
    ) -> Watch {
        let sessions = dsh_home.join("sessions");
        if force_poll {
            return Watch {
                watcher: None,
                mode: WatchMode::Polling {
                    reason: "configured (daemonWatch: poll)".into(),
                },
                sessions,
                sessions_watched: false,
                watched: Default::default(),
            };
        }
        let cb_flags = Arc::clone(&flags);
        let watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
                // Opens and closes without a write are the daemon's own reads: following
                // them would make every read trigger another.
                Ok(event) if matches!(event.kind, notify::EventKind::Access(_)) => {}
                Ok(event) => {
                    if event.need_rescan() {
                        cb_flags.rescan.store(true, Ordering::SeqCst);
                    }
                    if !event.paths.is_empty() && !send(event.paths) {
                        cb_flags.rescan.store(true, Ordering::SeqCst);
                    }
                }
                Err(e) if is_limit(&e) => cb_flags.limit_hit.store(true, Ordering::SeqCst),
                Err(e) => {
                    tracing::warn!(error = %e, "file watcher error; rescanning");
                    cb_flags.rescan.store(true, Ordering::SeqCst);
                }
            });
        let mut watch = match watcher {
            Ok(w) => Watch {
                watcher: Some(w),
                mode: WatchMode::Notify,
                sessions,
                sessions_watched: false,
                watched: Default::default(),
            },
            Err(e) => {
                return Watch {
                    watcher: None,
                    mode: WatchMode::Polling {
                        reason: if is_limit(&e) {
                            limit_message(&e.to_string())
                        } else {
                            format!("no file watcher ({e}); polling instead")
                        },
                    },
                    sessions,
                    sessions_watched: false,
                    watched: Default::default(),
                }
            }
        };
        // The home itself, so a `sessions` directory created later is noticed.
        if let Some(w) = watch.watcher.as_mut() {
            if dsh_home.is_dir() {
                if let Err(e) = w.watch(dsh_home, RecursiveMode::NonRecursive) {
                    tracing::warn!(error = %e, home = %dsh_home.display(), "cannot watch DSH_HOME");
                }
            }
        }
        watch.ensure_sessions_watched();
        watch
    }

    /// Watch `sessions` recursively once it exists. On the watch limit, switch to polling.
    pub fn ensure_sessions_watched(&mut self) {
        if self.sessions_watched || !self.sessions.is_dir() {
            return;
        }
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        match w.watch(&self.sessions, RecursiveMode::Recursive) {
            Ok(()) => self.sessions_watched = true,
            Err(e) if is_limit(&e) => self.fall_back(limit_message(&e.to_string())),
            Err(e) => self.fall_back(format!(
                "cannot watch {} ({e}); polling instead",
                self.sessions.display()
            )),
        }
    }

    /// Watch another harness's `tree` (Claude Code's `projects/`, Codex's `sessions/`)
    /// recursively once it exists, and its `home` non-recursively, so a tree created later
    /// is noticed. On the watch limit, switch to polling.
    pub fn ensure_tree_watched(&mut self, home: &Path, tree: &Path) {
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        if !self.watched.contains(home) && home.is_dir() {
            match w.watch(home, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.watched.insert(home.to_path_buf());
                }
                Err(e) => {
                    tracing::warn!(error = %e, home = %home.display(), "cannot watch a harness's home")
                }
            }
        }
        if self.watched.contains(tree) || !tree.is_dir() {
            return;
        }
        let Some(w) = self.watcher.as_mut() else {
            return;
        };
        match w.watch(tree, RecursiveMode::Recursive) {
            Ok(()) => {
                self.watched.insert(tree.to_path_buf());
            }
            Err(e) if is_limit(&e) => self.fall_back(limit_message(&e.to_string())),
            Err(e) => self.fall_back(format!(
                "cannot watch {} ({e}); polling instead",
                tree.display()
            )),
        }
    }

    /// A watched tree was removed: watch it again when it is back.
    pub fn forget_tree(&mut self, tree: &Path) {
        if self.watched.remove(tree) {
            if let Some(w) = self.watcher.as_mut() {
                let _ = w.unwatch(tree);
            }
        }
    }

    /// Drop the watcher and poll from now on.
    pub fn fall_back(&mut self, reason: String) {
        tracing::warn!("{reason}");
        self.watcher = None;
        self.watched.clear();
        self.mode = WatchMode::Polling { reason };
    }

    pub fn is_polling(&self) -> bool {
        matches!(self.mode, WatchMode::Polling { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_message_names_the_limit() {
        let m = limit_message("OS file watch limit reached.");
        assert!(
            m.contains(INOTIFY_LIMIT_FILE) && m.contains("Polling"),
            "{m}"
        );
        assert!(is_limit(&notify::Error::new(
            notify::ErrorKind::MaxFilesWatch
        )));
        assert!(is_limit(&notify::Error::io(
            std::io::Error::from_raw_os_error(28)
        )));
        assert!(!is_limit(&notify::Error::generic("other")));
    }

    #[test]
    fn changes_under_a_sessions_dir_created_later_arrive() {
        let dir = tempfile::tempdir().unwrap();
        let flags = Arc::new(WatchFlags::default());
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<PathBuf>>(64);
        let mut w = Watch::start(dir.path(), flags, move |p| tx.try_send(p).is_ok(), false);
        assert_eq!(w.mode, WatchMode::Notify);
        std::fs::create_dir_all(dir.path().join("sessions/--w--/s")).unwrap();
        // The home's watch reports `sessions`; the daemon then watches it.
        let first = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert!(first.iter().any(|p| p.ends_with("sessions")), "{first:?}");
        w.ensure_sessions_watched();
        let other = dir.path().join("sessions/--w--/s/other");
        std::fs::write(&other, b"x").unwrap();
        let target = dir.path().join("sessions/--w--/s/session.jsonl");
        // Drain what the write of `other` caused, then read it: a read is no event, so
        // the next event is the write of `target`.
        loop {
            let got = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
            if got.contains(&other) {
                break;
            }
        }
        while rx.try_recv().is_ok() {}
        std::thread::sleep(std::time::Duration::from_millis(50));
        while rx.try_recv().is_ok() {}
        assert_eq!(std::fs::read(&other).unwrap(), b"x");
        std::fs::write(&target, b"x").unwrap();
        let first = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(first, vec![target.clone()], "a read must not be reported");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let got = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
            if got.contains(&target) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no event for the log");
        }
    }

    #[test]
    fn a_full_queue_raises_the_rescan_flag_instead_of_blocking() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sessions")).unwrap();
        let flags = Arc::new(WatchFlags::default());
        // The daemon's queue is always full here: every hand-off is refused.
        let mut w = Watch::start(dir.path(), Arc::clone(&flags), |_| false, false);
        w.ensure_sessions_watched();
        std::fs::write(dir.path().join("sessions/log"), b"x").unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !flags.rescan.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < deadline, "no rescan flag");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn forced_polling() {
        let dir = tempfile::tempdir().unwrap();
        let w = Watch::start(dir.path(), Arc::default(), |_| true, true);
        assert!(w.is_polling());
    }
}

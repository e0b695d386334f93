//! The other harnesses' logs in the follower: Claude Code's and Codex's trees scanned and
//! watched, each log's workspace found from the `cwd` its lines carry, and the moments
//! only those logs have (Claude Code's sweep coming, a Codex rollout gone cold, a log
//! moved or vanished before it was archived). DSH's `--<key>--` directories stay in
//! [`super`].

use super::*;

/// A log this many days short of its harness's sweep (Claude Code's `cleanupPeriodDays`),
/// with signed turns no chapter covers, is archived at once instead of waiting for an idle
/// moment.
pub(super) const SWEEP_MARGIN_DAYS: u64 = 2;

impl Sessions {
    /// A workspace entry whose DSH session directory is gone but which follows other
    /// harnesses' logs: its DSH sessions are dropped, the entry stays.
    pub(super) fn keep_for_harnesses(&mut self, dir: &Path) -> bool {
        let Some(ws) = self.workspaces.get(dir) else {
            return false;
        };
        if !ws
            .sessions
            .values()
            .any(|s| s.follower.harness() != Harness::Dsh)
        {
            return false;
        }
        let dsh: Vec<PathBuf> = ws
            .sessions
            .iter()
            .filter(|(_, s)| s.follower.harness() == Harness::Dsh)
            .map(|(k, _)| k.clone())
            .collect();
        for session_dir in dsh {
            self.drop_session(dir, &session_dir, "its session directory was deleted");
        }
        true
    }

    /// The sweep days of `t`'s harness, from its settings in `t`'s home.
    pub(super) fn read_sweep_days(&mut self, t: &LogTree) {
        match t.harness.tree_harness().and_then(|h| h.sweep_days(&t.home)) {
            Some(days) => self.sweep_days.insert(t.harness, days),
            None => self.sweep_days.remove(&t.harness),
        };
    }

    /// A change under another harness's home: its tree (re)created, a directory made in
    /// it (Codex's `YYYY/MM/DD`, whose first rollout may land before the watch on it), a
    /// log written or removed, or the harness's settings changed.
    pub(super) fn on_harness_path(&mut self, t: &LogTree, path: &Path) {
        let Some(h) = t.harness.tree_harness() else {
            return;
        };
        if h.settings_file(&t.home).as_deref() == Some(path) {
            self.read_sweep_days(t);
            return;
        }
        if path == t.home || path == t.tree {
            if !t.tree.is_dir() {
                self.watch.forget_tree(&t.tree);
            }
            self.watch.ensure_tree_watched(&t.home, &t.tree);
            self.scan_harness_tree(t, false);
            return;
        }
        if !path.starts_with(&t.tree) {
            return;
        }
        if path.is_dir() {
            let mut files = Vec::new();
            discovery::collect_logs(t, path, &mut files);
            for f in files {
                self.harness_log(t.harness, &f, false);
            }
        } else if h.is_log(&t.tree, path) {
            self.harness_log(t.harness, path, false);
        }
    }

    /// Every log under one harness's tree; a followed log no longer there is polled (and
    /// so found gone). `retry`: logs not followed are looked at again (a workspace may
    /// have been enabled since).
    pub(super) fn scan_harness_tree(&mut self, t: &LogTree, retry: bool) {
        let mut files = Vec::new();
        discovery::collect_logs(t, &t.tree, &mut files);
        let present: BTreeSet<&PathBuf> = files.iter().collect();
        let missing: Vec<(PathBuf, Option<PathBuf>)> = self
            .harness_logs
            .iter()
            .filter(|(p, l)| {
                l.harness == t.harness && p.starts_with(&t.tree) && !present.contains(p)
            })
            .map(|(p, l)| (p.clone(), l.ws_dir.clone()))
            .collect();
        for (path, ws_dir) in missing {
            match ws_dir {
                Some(ws_dir) => self.poll_session(&ws_dir, &path),
                None => {
                    self.harness_logs.remove(&path);
                }
            }
        }
        for f in files {
            self.harness_log(t.harness, &f, retry);
        }
    }

    /// One log of another harness changed or was found: poll it when followed, else find
    /// its workspace (its `cwd`'s checkout) and follow it when that workspace is enabled.
    pub(super) fn harness_log(&mut self, harness: Harness, path: &Path, retry: bool) {
        let len = std::fs::metadata(path).ok().map(|m| m.len());
        if let Some(known) = self.harness_logs.get(path) {
            match known.ws_dir.clone() {
                Some(ws_dir) => {
                    let followed = self
                        .workspaces
                        .get(&ws_dir)
                        .is_some_and(|w| w.sessions.contains_key(path));
                    if followed {
                        self.poll_session(&ws_dir, path);
                        self.check_sweep(&ws_dir, path);
                        return;
                    }
                }
                None if !retry && known.len == len => return,
                None => {}
            }
        }
        if len.is_none() {
            self.harness_logs.remove(path);
            return;
        }
        match self.resolve_harness_log(harness, path) {
            Ok(ws_dir) => self.add_harness_session(&ws_dir, harness, path, len),
            Err(why) => {
                self.harness_logs.insert(
                    path.to_path_buf(),
                    HarnessLog {
                        harness,
                        ws_dir: None,
                        not_followed: Some(why),
                        len,
                    },
                );
            }
        }
    }

    /// The workspace entry that follows a log of `harness` at `path`: its `cwd` (the first
    /// a line carries) resolved to its checkout's top level, as `chapters archive` there
    /// finds it; or why none does.
    pub(super) fn resolve_harness_log(
        &mut self,
        harness: Harness,
        path: &Path,
    ) -> Result<PathBuf, String> {
        let cwd = harness
            .tree_harness()
            .and_then(|h| h.log_cwd(path))
            .ok_or_else(|| "no working directory in its lines yet".to_owned())?;
        // Another machine's cwd (a log copied from Windows or a Mac) resolves through its
        // `pathMap` twins here, as the archive and DSH's sessions do.
        let mut first_error = None;
        for candidate in crate::session::cwdkey::here_paths(&cwd, &self.config.path_map) {
            match checkout_of(Path::new(&candidate)) {
                Ok(root) => return self.ws_dir_for(&root),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        let e = first_error.unwrap_or_else(|| "no checkout".to_owned());
        Err(format!(
            "its working directory {cwd} is not here: {e} (a log copied from another machine: map that machine's directory to this one's in the home config's `pathMap`)"
        ))
    }

    /// Follow a log of another harness in the workspace entry `ws_dir`.
    pub(super) fn add_harness_session(
        &mut self,
        ws_dir: &Path,
        harness: Harness,
        path: &Path,
        len: Option<u64>,
    ) {
        let Some(ctx) = self.workspaces.get(ws_dir).and_then(|w| w.ctx.clone()) else {
            return;
        };
        let not_followed = |why: String| HarnessLog {
            harness,
            ws_dir: None,
            not_followed: Some(why),
            len,
        };
        let Some(h) = harness.tree_harness() else {
            return;
        };
        if !discovery::enabled(h, &ctx.config) {
            let key = h.switch();
            self.harness_logs.insert(
                path.to_path_buf(),
                not_followed(format!(
                    "turned off by `{key}: false` in the workspace's config"
                )),
            );
            return;
        }
        let log = discover::SessionLog {
            session_dir: path.parent().map(Path::to_path_buf).unwrap_or_default(),
            session_id: String::new(),
            log: path.to_path_buf(),
            generation: 0,
            compressed: false,
        };
        let saved = self.saved.get(&*path.to_string_lossy()).cloned();
        let options = SourceOptions {
            reader: ReaderOptions {
                max_line_bytes: usize::try_from(ctx.config.max_event_bytes).unwrap_or(usize::MAX),
            },
            quiet_after_ms: Some(ctx.config.idle_archive_ms),
        };
        let (follower, note) = match Follower::open_source(harness, log, saved.as_ref(), options) {
            Ok(opened) => opened,
            Err(follow::FollowError::NoHeader { .. }) => {
                self.harness_logs.insert(
                    path.to_path_buf(),
                    not_followed("no conversation line yet".into()),
                );
                return;
            }
            Err(e) => {
                let message = e.to_string();
                self.harness_logs
                    .insert(path.to_path_buf(), not_followed(message.clone()));
                if e.is_gone() {
                    return;
                }
                // A FIFO, a device or a socket is said once.
                let special = matches!(&e, follow::FollowError::Read(r) if r.is_special_file());
                if !special || self.skipped_logs.insert(path.to_path_buf()) {
                    self.error("session", message);
                }
                return;
            }
        };
        if let Some(note) = note {
            self.error("session", note);
        }
        let header = follower.header.clone();
        let last_write = mtime_ms(path).unwrap_or_else(now_ms);
        // This file holds the session now (a rollout recompressed, materialised plain
        // again, or moved): its other file is no longer followed, and was not lost.
        let elsewhere: Vec<PathBuf> = self
            .workspaces
            .get(ws_dir)
            .filter(|_| h.sessions_move())
            .map(|w| {
                w.sessions
                    .iter()
                    .filter(|(k, s)| k.as_path() != path && s.follower.header.id == header.id)
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        let mut moved = !elsewhere.is_empty();
        for other in elsewhere {
            self.forget_log(ws_dir, &other);
        }
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        if h.sessions_move() {
            let reported = ws.vanished.len();
            ws.vanished.retain(|v| v["sessionId"] != header.id.as_str());
            moved |= ws.vanished.len() != reported;
        }
        let mut cursor = LedgerCursor::default();
        let refreshed = signer::refresh(&ctx.store, &header.id, &header.id, &mut cursor);
        ws.sessions.insert(
            path.to_path_buf(),
            SessionEntry::new(follower, cursor, header.id.clone()),
        );
        self.events.push(Event::Found {
            ws_dir: ws_dir.to_path_buf(),
            at_ms: last_write,
        });
        self.harness_logs.insert(
            path.to_path_buf(),
            HarnessLog {
                harness,
                ws_dir: Some(ws_dir.to_path_buf()),
                not_followed: None,
                len: None,
            },
        );
        if let Err(e) = refreshed {
            self.session_error(ws_dir, path, e.to_string());
        }
        tracing::info!(session = %header.id, harness = harness.name(), log = %path.display(), "following a session");
        // A session that moved to this file is not new: no pull, no fork moment.
        if !moved && self.first_seen_is_new(path) {
            // A fork (Claude Code's `--fork-session` or `/branch`, Codex's fork) is the
            // fork moment: its parent's completed turns are archived now.
            let parent = h
                .fork_parent(path)
                .map(|p| format!("{}{p}", harness.session_prefix()));
            let parent_followed = parent.as_ref().is_some_and(|parent| {
                self.workspaces
                    .get(ws_dir)
                    .is_some_and(|w| w.sessions.values().any(|s| &s.follower.header.id == parent))
            });
            self.events.push(Event::NewSession {
                ws_dir: ws_dir.to_path_buf(),
                id: header.id.clone(),
                parent,
                parent_followed,
            });
        }
        self.poll_session(ws_dir, path);
        self.check_sweep(ws_dir, path);
        self.check_cold(ws_dir, path);
    }

    /// A log within [`SWEEP_MARGIN_DAYS`] of its harness's sweep (Claude Code's
    /// `cleanupPeriodDays`) with signed turns no chapter covers is archived now: its
    /// harness deletes it soon.
    pub(super) fn check_sweep(&mut self, ws_dir: &Path, key: &Path) {
        let Some(entry) = self
            .workspaces
            .get_mut(ws_dir)
            .and_then(|w| w.sessions.get_mut(key))
        else {
            return;
        };
        let Some(&cleanup_days) = self.sweep_days.get(&entry.follower.harness()) else {
            return;
        };
        if entry.sweep_queued {
            return;
        }
        let Ok(meta) = std::fs::metadata(key) else {
            return;
        };
        if entry.sweep_checked_len == Some(meta.len()) {
            return;
        }
        let Some(mtime) = mtime_ms(key) else {
            return;
        };
        let window_days = cleanup_days.saturating_sub(SWEEP_MARGIN_DAYS);
        let window_ms = i64::try_from(window_days)
            .unwrap_or(i64::MAX / DAY_MS)
            .saturating_mul(DAY_MS);
        if now_ms().saturating_sub(mtime) < window_ms {
            return;
        }
        entry.sweep_checked_len = Some(meta.len());
        tracing::debug!(log = %key.display(), cleanup_days, "a log nears its harness's sweep");
        self.archive_session_now(ws_dir, key, "sweep");
    }

    /// Archive the session of `key` at once (an idle archive of it, `moment` in `status`)
    /// when it has signed turns no chapter covers; once per followed log.
    pub(super) fn archive_session_now(&mut self, ws_dir: &Path, key: &Path, moment: &'static str) {
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        let Some(ctx) = ws.ctx.clone() else {
            return;
        };
        let Some(entry) = ws.sessions.get_mut(key) else {
            return;
        };
        if entry.sweep_queued {
            return;
        }
        let id = entry.follower.header.id.clone();
        let waiting = signer::signed_unarchived(&ctx.store, &entry.root, &id).unwrap_or(0);
        if waiting == 0 {
            return;
        }
        entry.sweep_queued = true;
        tracing::info!(session = %id, turns = waiting, moment, "archiving a session's turns no chapter covers now");
        self.queue_archive_moment(
            ws_dir,
            ArchiveAsk {
                moment,
                only: Some(id),
                push_after: true,
                ..ArchiveAsk::at(Reason::Idle)
            },
        );
    }

    /// A followed log is gone but another file holds its session now (Codex recompressed a
    /// rollout to `.jsonl.zst`, materialised it plain again, or moved it to
    /// `archived_sessions/`). That file is followed instead (what it holds and no chapter
    /// covers is archived at once, see [`Sessions::check_cold`]); nothing vanished. False
    /// when no file holds it.
    pub(super) fn log_moved(&mut self, ws_dir: &Path, key: &Path) -> bool {
        let Some(entry) = self
            .workspaces
            .get(ws_dir)
            .and_then(|w| w.sessions.get(key))
        else {
            return false;
        };
        let harness = entry.follower.harness();
        let Some(h) = harness.tree_harness() else {
            return false;
        };
        let id = entry
            .follower
            .header
            .id
            .trim_start_matches(harness.session_prefix())
            .to_owned();
        let Some(successor) = h.successor(key, &id) else {
            return false;
        };
        tracing::info!(log = %key.display(), now = %successor.display(), "a log moved or was recompressed; following it there");
        self.forget_log(ws_dir, key);
        self.harness_log(harness, &successor, false);
        true
    }

    /// Stop following `key` in `ws_dir`, reporting nothing (another file holds its session).
    pub(super) fn forget_log(&mut self, ws_dir: &Path, key: &Path) {
        self.harness_logs.remove(key);
        if let Some(ws) = self.workspaces.get_mut(ws_dir) {
            if ws.sessions.remove(key).is_some() {
                self.state_dirty = true;
            }
        }
    }

    /// A log no one appends to any more — sealed (a Codex rollout recompressed to
    /// `.jsonl.zst`) or in a cold tree (moved to Codex's `archived_sessions/`) — with signed
    /// turns no chapter covers is archived now: no turn end or idle moment will come from it.
    pub(super) fn check_cold(&mut self, ws_dir: &Path, key: &Path) {
        let Some(harness) = self
            .workspaces
            .get(ws_dir)
            .and_then(|w| w.sessions.get(key))
            .map(|e| e.follower.harness())
        else {
            return;
        };
        let Some(h) = harness.tree_harness() else {
            return;
        };
        let cold_tree = self
            .harness_trees
            .iter()
            .any(|t| t.harness == harness && t.cold && key.starts_with(&t.tree));
        if cold_tree || h.is_sealed(key) {
            self.archive_session_now(ws_dir, key, "compressed");
        }
    }

    /// A followed log of another harness is gone. Turns no chapter covers went with it:
    /// reported (`status`: "vanished before archived"), never as a corruption.
    pub(super) fn log_vanished(&mut self, ws_dir: &Path, key: &Path) {
        let at = crate::time::rfc3339_utc(now_ms());
        self.harness_logs.remove(key);
        let Some(ws) = self.workspaces.get_mut(ws_dir) else {
            return;
        };
        let Some(entry) = ws.sessions.remove(key) else {
            return;
        };
        self.state_dirty = true;
        let id = entry.follower.header.id.clone();
        let signed = ws
            .ctx
            .as_ref()
            .and_then(|c| signer::signed_unarchived(&c.store, &entry.root, &id).ok())
            .unwrap_or(0);
        let turns = signed + u64::from(entry.follower.in_flight().is_some());
        tracing::info!(session = %id, log = %key.display(), turns, "a log vanished");
        if turns > 0 {
            ws.vanished.push(json!({
                "at": at,
                "harness": entry.follower.harness().name(),
                "sessionId": id,
                "log": key,
                "turns": turns,
            }));
        }
    }
}

/// The checkout a session's `cwd` lies in, resolved as the CLI resolves `--workspace`; a cwd
/// deleted since (a monorepo's package, a removed folder) belongs to the checkout it lay in,
/// as `chapters archive` there finds its sessions by the path.
fn checkout_of(cwd: &Path) -> Result<PathBuf, String> {
    match identity::workspace_root(cwd) {
        Ok(root) => Ok(root),
        Err(e) => match cwd.ancestors().skip(1).find(|a| a.join(".git").exists()) {
            Some(checkout) => identity::workspace_root(checkout).map_err(|e| e.to_string()),
            None => Err(e.to_string()),
        },
    }
}

//! Following one live session log: a [`ResumePoint`] and the in-flight turn's events, so
//! each poll decodes only the frames appended since the last one (the log is never
//! re-read whole per append). Shell: opens the log.
//!
//! For a restart, [`Follower::saved`] gives an *anchor*: the frame boundary at or before
//! the first event of the in-flight turn, with that event's seq and the number of turns
//! completed before it. Resuming there re-reads at most the in-flight turn's frames; the
//! assembler skips the events before the anchor's seq that share its first frame.
//!
//! A log truncated or replaced under us (the saved offset is past its end, its file
//! identity changed, or its header names another session) is reported and followed again
//! from its start; signing stays exactly-once because the signer dedups against the
//! collection ledger, not against this state.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::session::discover::SessionLog;
use crate::session::reader::{LogItem, LogReader, ReadError, ReaderOptions, ResumePoint};
use crate::session::Header;
use crate::source::{Harness, SourceOptions};
use crate::turn::{CompletedTurn, TurnAssembler};

use super::triggers;

/// Where a restart resumes one log (persisted in the daemon's state file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Anchor {
    pub byte_offset: u64,
    /// The seq the reader expects at `byte_offset`.
    pub reader_next_seq: u64,
    /// The first seq the assembler accepts (the in-flight turn's first event).
    pub first_seq: u64,
    pub completed_before: u64,
}

/// One log's persisted follow state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SavedFollow {
    pub session_id: String,
    pub generation: u32,
    pub dev: u64,
    pub ino: u64,
    pub anchor: Anchor,
}

#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("session log {file} has no header yet")]
    NoHeader { file: PathBuf },
    #[error("cannot stat session log {file}: {source}")]
    Stat {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl FollowError {
    /// The log (or its directory) is gone: the session was deleted.
    pub fn is_gone(&self) -> bool {
        let kind = match self {
            FollowError::Read(ReadError::Io { source, .. }) => source.kind(),
            FollowError::Stat { source, .. } => source.kind(),
            _ => return false,
        };
        kind == std::io::ErrorKind::NotFound
    }
}

/// What one poll found.
#[derive(Debug, Default)]
pub struct Polled {
    /// Events were read.
    pub appended: bool,
    /// Turns completed by this poll.
    pub turns_completed: u64,
    /// A compaction marker was read (see [`triggers::is_compaction`]).
    pub compaction: bool,
    /// The log was truncated or replaced and is followed again from its start: why.
    pub reset: Option<String>,
}

/// The follow state of one session's log.
pub struct Follower {
    pub log: SessionLog,
    pub header: Header,
    options: ReaderOptions,
    dev: u64,
    ino: u64,
    resume: ResumePoint,
    assembler: TurnAssembler,
    anchor: Anchor,
    /// Events before this seq are the parent's (a seeded fork): never signed here.
    seed_end: u64,
    /// The length seen at the last poll: an unchanged file needs no read.
    last_len: Option<u64>,
    /// The harness that writes this log. DSH's reader resumes at any frame; the other
    /// harnesses' readers resume only at turn ends, so their in-flight turn is read again
    /// at each poll into a fresh assembler (a message still being written is read whole).
    harness: Harness,
    /// `idleArchiveMs`: a log of another harness quiet this long ends its answered turn.
    quiet_after_ms: Option<u64>,
    /// The in-flight turn of another harness's log, as the last poll left it.
    harness_in_flight: Option<(u64, u64)>,
    /// The highest seq seen (a compaction read again with the in-flight turn is not new).
    seen_hi: Option<u64>,
    /// What the harness's reader keeps between polls (Claude Code's first pass, extended by
    /// each poll with what was appended).
    follow_cache: crate::source::FollowCache,
}

fn file_id(path: &Path) -> Result<(u64, u64, u64), FollowError> {
    let meta = std::fs::metadata(path).map_err(|source| FollowError::Stat {
        file: path.to_path_buf(),
        source,
    })?;
    Ok((meta.dev(), meta.ino(), meta.len()))
}

/// Another harness's compressed log (a Codex `.jsonl.zst`): its resume offsets count
/// decoded bytes, not the file's.
fn is_compressed(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "zst")
}

fn read_header(path: &Path, options: ReaderOptions) -> Result<(Header, ResumePoint), FollowError> {
    let mut reader = LogReader::open_with(path, ResumePoint::default(), options)?;
    match reader.next_item()? {
        Some(LogItem::Header(h)) => Ok((h, reader.resume_point())),
        _ => Err(FollowError::NoHeader {
            file: path.to_path_buf(),
        }),
    }
}

fn start_anchor(after_header: ResumePoint) -> Anchor {
    Anchor {
        byte_offset: after_header.byte_offset,
        reader_next_seq: after_header.next_seq,
        first_seq: 0,
        completed_before: 0,
    }
}

impl Follower {
    /// Open a log: read its header and position after it, or at `saved` when it still
    /// describes this file (same session, generation and inode, not past its end).
    /// Returns the follower and, when `saved` was refused, why.
    pub fn open(
        log: SessionLog,
        saved: Option<&SavedFollow>,
        options: ReaderOptions,
    ) -> Result<(Follower, Option<String>), FollowError> {
        let (dev, ino, len) = file_id(&log.log)?;
        let (header, after_header) = read_header(&log.log, options)?;
        let mut note = None;
        let anchor = match saved {
            Some(s)
                if s.session_id == header.id
                    && s.generation == log.generation
                    && s.dev == dev
                    && s.ino == ino
                    && s.anchor.byte_offset <= len
                    && s.anchor.byte_offset >= after_header.byte_offset =>
            {
                s.anchor
            }
            Some(s) => {
                note = Some(format!(
                    "{}: the saved position (byte {}) no longer fits the log (replaced, truncated or migrated); following it again from its start",
                    log.log.display(),
                    s.anchor.byte_offset
                ));
                start_anchor(after_header)
            }
            None => start_anchor(after_header),
        };
        let seed_end = if header.is_seeded {
            header.seed_length.unwrap_or(0)
        } else {
            0
        };
        let follower = Follower::at(anchor, log, header, options, (dev, ino), Harness::Dsh);
        Ok((
            Follower {
                seed_end,
                ..follower
            },
            note,
        ))
    }

    /// Open a log of any harness (DSH's as [`Follower::open`]). Another harness's log has no
    /// header frame: its header is what its reader makes of the lines, and a log with no
    /// conversation line yet has none ([`FollowError::NoHeader`]).
    pub fn open_source(
        harness: Harness,
        log: SessionLog,
        saved: Option<&SavedFollow>,
        options: SourceOptions,
    ) -> Result<(Follower, Option<String>), FollowError> {
        if harness == Harness::Dsh {
            return Follower::open(log, saved, options.reader);
        }
        let (dev, ino, len) = file_id(&log.log)?;
        let header = crate::source::read_header(harness, &log.log, options)?.ok_or_else(|| {
            FollowError::NoHeader {
                file: log.log.clone(),
            }
        })?;
        let start = Anchor {
            byte_offset: 0,
            reader_next_seq: 0,
            first_seq: 0,
            completed_before: 0,
        };
        let mut note = None;
        let anchor = match saved {
            Some(s)
                if s.session_id == header.id
                    && s.dev == dev
                    && s.ino == ino
                    && (s.anchor.byte_offset <= len || is_compressed(&log.log)) =>
            {
                s.anchor
            }
            Some(s) => {
                note = Some(format!(
                    "{}: the saved position (byte {}) no longer fits the log (replaced or truncated); following it again from its start",
                    log.log.display(),
                    s.anchor.byte_offset
                ));
                start
            }
            None => start,
        };
        let follower = Follower::at(anchor, log, header, options.reader, (dev, ino), harness);
        Ok((
            Follower {
                quiet_after_ms: options.quiet_after_ms,
                ..follower
            },
            note,
        ))
    }

    /// A follower of `log` resuming at `anchor`: nothing read past it yet.
    fn at(
        anchor: Anchor,
        log: SessionLog,
        header: Header,
        options: ReaderOptions,
        (dev, ino): (u64, u64),
        harness: Harness,
    ) -> Follower {
        Follower {
            resume: ResumePoint {
                byte_offset: anchor.byte_offset,
                next_seq: anchor.reader_next_seq,
                header_seen: true,
            },
            assembler: TurnAssembler::starting_at(anchor.first_seq, anchor.completed_before),
            anchor,
            log,
            header,
            options,
            dev,
            ino,
            seed_end: 0,
            last_len: None,
            harness,
            quiet_after_ms: None,
            harness_in_flight: None,
            seen_hi: None,
            follow_cache: Default::default(),
        }
    }

    /// The harness that writes this log.
    pub fn harness(&self) -> Harness {
        self.harness
    }

    fn source_options(&self) -> SourceOptions {
        SourceOptions {
            reader: self.options,
            quiet_after_ms: self.quiet_after_ms,
        }
    }

    /// The state a restart resumes from.
    pub fn saved(&self) -> SavedFollow {
        SavedFollow {
            session_id: self.header.id.clone(),
            generation: self.log.generation,
            dev: self.dev,
            ino: self.ino,
            anchor: self.anchor,
        }
    }

    pub fn seed_end(&self) -> u64 {
        self.seed_end
    }

    /// The in-flight turn's seqs.
    pub fn in_flight(&self) -> Option<(u64, u64)> {
        if self.harness != Harness::Dsh {
            return self.harness_in_flight;
        }
        self.assembler.in_flight()
    }

    /// The turns completed before the resume point (read this run or before a restart).
    pub fn completed(&self) -> u64 {
        self.anchor.completed_before
    }

    /// The byte offset read up to (a frame boundary).
    pub fn offset(&self) -> u64 {
        self.resume.byte_offset
    }

    /// Decode what was appended since the last poll; `on_turn` gets each completed turn
    /// (seeded-prefix turns included: the caller decides what to sign). On a read error
    /// the position stays at the last whole frame, so a later poll retries from there.
    pub fn poll(&mut self, on_turn: &mut dyn FnMut(&CompletedTurn)) -> Result<Polled, FollowError> {
        self.poll_with(false, on_turn)
    }

    /// [`Follower::poll`]; `force` reads even an unchanged log (another harness's log gone
    /// quiet: its answered turn ends now).
    pub fn poll_with(
        &mut self,
        force: bool,
        on_turn: &mut dyn FnMut(&CompletedTurn),
    ) -> Result<Polled, FollowError> {
        let mut polled = Polled::default();
        let (dev, ino, len) = file_id(&self.log.log)?;
        // A `.zst`'s offsets count decoded bytes: only its identity says it was replaced.
        let shrank = len < self.resume.byte_offset && !is_compressed(&self.log.log);
        if (dev, ino) != (self.dev, self.ino) || shrank {
            let why = if (dev, ino) != (self.dev, self.ino) {
                "was replaced by another file"
            } else {
                "shrank below the position already read (truncated)"
            };
            let reason = format!(
                "session log {} {why}; following it again from its start (nothing signed or archived is touched)",
                self.log.log.display()
            );
            let saved_id = self.header.id.clone();
            let (fresh, _) =
                Follower::open_source(self.harness, self.log.clone(), None, self.source_options())?;
            *self = fresh;
            if self.header.id != saved_id {
                tracing::warn!(file = %self.log.log.display(), was = %saved_id, now = %self.header.id, "the log now holds another session");
            }
            polled.reset = Some(reason);
        } else if self.last_len == Some(len) && !force {
            return Ok(polled);
        }
        if self.harness != Harness::Dsh {
            return self.poll_source(len, polled, on_turn);
        }
        let mut reader = LogReader::open_with(&self.log.log, self.resume, self.options)?;
        let result = loop {
            let before = reader.resume_point();
            let item = match reader.next_item() {
                Ok(Some(item)) => item,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let LogItem::Event(event) = item else {
                continue;
            };
            polled.appended = true;
            if event.seq >= self.anchor.first_seq && self.assembler.in_flight().is_none() {
                // This event opens a turn: a restart resumes at the frame holding it.
                self.anchor = Anchor {
                    byte_offset: before.byte_offset,
                    reader_next_seq: before.next_seq,
                    first_seq: event.seq,
                    completed_before: self.assembler.completed(),
                };
            }
            if triggers::is_compaction(&event.kind) {
                polled.compaction = true;
            }
            if let Some(turn) = self.assembler.push(event) {
                polled.turns_completed += 1;
                on_turn(&turn);
            }
        };
        // Only whole frames were delivered up to the reader's resume point.
        let reached = reader.resume_point();
        if reached.byte_offset >= self.resume.byte_offset {
            self.resume = reached;
        }
        if self.assembler.in_flight().is_none() && result.is_ok() {
            self.anchor = Anchor {
                byte_offset: reached.byte_offset,
                reader_next_seq: reached.next_seq,
                first_seq: reached.next_seq,
                completed_before: self.assembler.completed(),
            };
        }
        match result {
            Ok(()) => {
                // A torn last frame keeps the file longer than what was read: poll again on
                // the next change even if the length then looks the same.
                self.last_len = (reached.byte_offset == len).then_some(len);
                Ok(polled)
            }
            Err(e) => {
                self.last_len = None;
                Err(e.into())
            }
        }
    }

    /// Another harness's log: read from the last turn end into a fresh assembler, so the
    /// in-flight turn is always read whole as it now stands.
    fn poll_source(
        &mut self,
        len: u64,
        mut polled: Polled,
        on_turn: &mut dyn FnMut(&CompletedTurn),
    ) -> Result<Polled, FollowError> {
        let grew = self.last_len != Some(len);
        let mut reader = crate::source::open_followed(
            self.harness,
            &self.log.log,
            self.resume,
            self.source_options(),
            &mut self.follow_cache,
        )?;
        let mut assembler =
            TurnAssembler::starting_at(self.resume.next_seq, self.anchor.completed_before);
        let result = loop {
            let item = match reader.next_item() {
                Ok(Some(item)) => item,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            let LogItem::Event(event) = item else {
                continue;
            };
            let fresh = self.seen_hi.is_none_or(|hi| event.seq > hi);
            if fresh {
                self.seen_hi = Some(event.seq);
                if triggers::is_compaction_event(&event) {
                    polled.compaction = true;
                }
            }
            if let Some(turn) = assembler.push(event) {
                polled.turns_completed += 1;
                on_turn(&turn);
            }
        };
        polled.appended = grew;
        let reached = reader.resume_point();
        if reached.byte_offset >= self.resume.byte_offset {
            self.resume = reached;
        }
        self.anchor = Anchor {
            byte_offset: self.resume.byte_offset,
            reader_next_seq: self.resume.next_seq,
            first_seq: self.resume.next_seq,
            completed_before: assembler.completed(),
        };
        self.harness_in_flight = assembler.in_flight();
        match result {
            Ok(()) => {
                self.last_len = Some(len);
                Ok(polled)
            }
            Err(e) => {
                self.last_len = None;
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::discover::highest_generation;
    use crate::testkit::writer::{LogWriter, SessionScript, TurnSpec};
    use std::io::Write;

    struct Live {
        _dir: tempfile::TempDir,
        path: PathBuf,
        writer: LogWriter,
        script: SessionScript,
    }

    fn live(edit: impl FnOnce(&mut Header)) -> Live {
        let dir = tempfile::tempdir().unwrap();
        let session_dir = dir.path().join("session-x");
        std::fs::create_dir_all(&session_dir).unwrap();
        let path = session_dir.join("session.v4.jsonl.zstd");
        let script = SessionScript::new(4, 1_000);
        let mut header = script.header("session-x", "/w", 1_000);
        edit(&mut header);
        let writer = LogWriter::create(&path, true, &header).unwrap();
        Live {
            _dir: dir,
            path,
            writer,
            script,
        }
    }

    fn log_of(path: &Path) -> SessionLog {
        highest_generation(path.parent().unwrap()).unwrap().unwrap()
    }

    fn turn(i: usize) -> TurnSpec {
        TurnSpec::new(&format!("do task number {i}"), &format!("done {i}"))
    }

    fn in_flight(i: usize) -> TurnSpec {
        let mut t = turn(i);
        t.end_reason = None;
        t
    }

    fn poll_ends(f: &mut Follower) -> (Vec<u64>, Polled) {
        let mut ends = Vec::new();
        let polled = f.poll(&mut |t| ends.push(t.end_seq)).unwrap();
        (ends, polled)
    }

    #[test]
    fn each_poll_reads_only_what_was_appended() {
        let mut l = live(|_| {});
        let (mut f, note) =
            Follower::open(log_of(&l.path), None, ReaderOptions::default()).unwrap();
        assert!(note.is_none());
        let (ends, polled) = poll_ends(&mut f);
        assert!(ends.is_empty() && !polled.appended);
        l.writer.append_turn(&mut l.script, &turn(0)).unwrap();
        let first_end = l.script.next_seq() - 1;
        let (ends, polled) = poll_ends(&mut f);
        assert_eq!(ends, vec![first_end]);
        assert!(polled.appended);
        // Nothing new: nothing read, nothing emitted again.
        let (ends, polled) = poll_ends(&mut f);
        assert!(ends.is_empty() && !polled.appended);
        // An in-flight turn is held, then completed by a later frame.
        let before_inflight = f.offset();
        l.writer.append_turn(&mut l.script, &in_flight(1)).unwrap();
        let (ends, _) = poll_ends(&mut f);
        assert!(ends.is_empty());
        assert!(f.in_flight().is_some());
        assert_eq!(f.saved().anchor.byte_offset, before_inflight);
        let end_seq = l.script.next_seq();
        l.writer
            .append_batch(&[serde_json::json!({"type":"turn/end","seq":end_seq,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}})])
            .unwrap();
        let (ends, _) = poll_ends(&mut f);
        assert_eq!(ends, vec![end_seq]);
        assert_eq!(f.in_flight(), None);
        assert_eq!(f.saved().anchor.byte_offset, f.offset());
    }

    #[test]
    fn a_restart_at_the_anchor_completes_the_in_flight_turn_once() {
        let mut l = live(|_| {});
        l.writer.append_turn(&mut l.script, &turn(0)).unwrap();
        l.writer.append_turn(&mut l.script, &in_flight(1)).unwrap();
        let (mut f, _) = Follower::open(log_of(&l.path), None, ReaderOptions::default()).unwrap();
        let (ends, _) = poll_ends(&mut f);
        assert_eq!(ends.len(), 1);
        let saved = f.saved();
        drop(f);
        let end_seq = l.script.next_seq();
        l.writer
            .append_batch(&[serde_json::json!({"type":"turn/end","seq":end_seq,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}})])
            .unwrap();
        let (mut f, note) =
            Follower::open(log_of(&l.path), Some(&saved), ReaderOptions::default()).unwrap();
        assert!(note.is_none());
        let mut turns = Vec::new();
        f.poll(&mut |t| turns.push((t.first_seq, t.end_seq, t.events.len())))
            .unwrap();
        assert_eq!(turns.len(), 1, "only the in-flight turn, completed");
        let (first, end, n) = turns[0];
        assert_eq!(end, end_seq);
        assert_eq!(n as u64, end - first + 1, "the whole turn, not a tail");
    }

    #[test]
    fn a_saved_state_that_does_not_fit_is_refused_with_a_note() {
        let mut l = live(|_| {});
        l.writer.append_turn(&mut l.script, &turn(0)).unwrap();
        let (f, _) = Follower::open(log_of(&l.path), None, ReaderOptions::default()).unwrap();
        let mut saved = f.saved();
        saved.anchor.byte_offset = 1 << 40;
        let (mut f, note) =
            Follower::open(log_of(&l.path), Some(&saved), ReaderOptions::default()).unwrap();
        assert!(note.unwrap().contains("no longer fits"));
        assert_eq!(poll_ends(&mut f).0.len(), 1, "read again from the start");
        let mut saved = f.saved();
        saved.session_id = "session-other".into();
        let (_, note) =
            Follower::open(log_of(&l.path), Some(&saved), ReaderOptions::default()).unwrap();
        assert!(note.is_some());
    }

    #[test]
    fn truncation_and_replacement_reset_from_the_start() {
        let mut l = live(|_| {});
        for i in 0..3 {
            l.writer.append_turn(&mut l.script, &turn(i)).unwrap();
        }
        let (mut f, _) = Follower::open(log_of(&l.path), None, ReaderOptions::default()).unwrap();
        assert_eq!(poll_ends(&mut f).0.len(), 3);
        // Truncate to the header and one turn's worth of bytes: shorter than read.
        let bytes = std::fs::read(&l.path).unwrap();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&l.path)
            .unwrap();
        file.set_len(bytes.len() as u64 / 2).unwrap();
        let mut got = Vec::new();
        let polled = f.poll(&mut |t| got.push(t.end_seq));
        let polled = match polled {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert!(polled.reset.unwrap().contains("truncated"));
        // Replaced by a new file under the same name: another inode.
        std::fs::remove_file(&l.path).unwrap();
        let mut script = SessionScript::new(4, 5);
        let header = script.header("session-x", "/w", 5);
        let mut w = LogWriter::create(&l.path, true, &header).unwrap();
        w.append_turn(&mut script, &turn(9)).unwrap();
        let mut got = Vec::new();
        let polled = f.poll(&mut |t| got.push(t.end_seq)).unwrap();
        assert!(polled.reset.unwrap().contains("replaced"));
        assert_eq!(got.len(), 1);
    }

    #[test]
    fn garbage_appended_is_an_error_and_the_position_stays() {
        let mut l = live(|_| {});
        l.writer.append_turn(&mut l.script, &turn(0)).unwrap();
        let (mut f, _) = Follower::open(log_of(&l.path), None, ReaderOptions::default()).unwrap();
        assert_eq!(poll_ends(&mut f).0.len(), 1);
        let at = f.offset();
        let mut raw = std::fs::OpenOptions::new()
            .append(true)
            .open(&l.path)
            .unwrap();
        raw.write_all(b"\x28\xb5\x2f\xfd garbage that is no frame at all")
            .unwrap();
        assert!(f.poll(&mut |_| {}).is_err());
        assert_eq!(f.offset(), at);
        assert!(
            f.poll(&mut |_| {}).is_err(),
            "still damaged, still reported"
        );
    }

    #[test]
    fn a_deleted_log_is_gone() {
        let mut l = live(|_| {});
        l.writer.append_turn(&mut l.script, &turn(0)).unwrap();
        let (mut f, _) = Follower::open(log_of(&l.path), None, ReaderOptions::default()).unwrap();
        std::fs::remove_dir_all(l.path.parent().unwrap()).unwrap();
        let err = f.poll(&mut |_| {}).unwrap_err();
        assert!(err.is_gone(), "{err}");
    }

    #[test]
    fn compaction_is_noticed_and_seeded_forks_know_their_prefix() {
        let mut l = live(|h| {
            h.parent_session = Some("session-p".into());
            h.is_seeded = true;
            h.seed_length = Some(3);
        });
        let (mut f, _) = Follower::open(log_of(&l.path), None, ReaderOptions::default()).unwrap();
        assert_eq!(f.seed_end(), 3);
        l.writer
            .append_batch(&[
                serde_json::json!({"type":"compaction/start","seq":0,"time":1,"data":{}}),
                serde_json::json!({"type":"compaction/end","seq":1,"time":1,"data":{}}),
            ])
            .unwrap();
        let (_, polled) = poll_ends(&mut f);
        assert!(polled.compaction);
    }

    /// A Claude Code transcript: one answer written over two lines sharing `message.id`
    /// is signed whole at its turn end, once; a restart at the saved anchor reads on.
    #[test]
    fn a_claude_code_turn_is_read_whole_and_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir
            .path()
            .join("0b0b0b0b-0000-4000-8000-000000000001.jsonl");
        let line = |n: u32, parent: Option<u32>, kind: &str, rest: serde_json::Value| {
            let mut v = serde_json::json!({
                "type": kind, "uuid": format!("u{n}"), "parentUuid": parent.map(|p| format!("u{p}")),
                "sessionId": "0b0b0b0b-0000-4000-8000-000000000001", "cwd": "/w",
                "timestamp": "2026-01-01T00:00:00.000Z",
            });
            if let (serde_json::Value::Object(o), serde_json::Value::Object(r)) = (&mut v, rest) {
                o.extend(r);
            }
            v.to_string() + "\n"
        };
        let append = |text: &str| {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap();
            f.write_all(text.as_bytes()).unwrap();
        };
        let answer = |n: u32, text: &str| {
            line(
                n,
                Some(n - 1),
                "assistant",
                serde_json::json!({"message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": text}]}}),
            )
        };
        append(&line(
            1,
            None,
            "user",
            serde_json::json!({"message": {"role": "user", "content": "explain the lexer"}}),
        ));
        append(&answer(2, "first half"));
        let log = SessionLog {
            session_dir: dir.path().to_path_buf(),
            session_id: String::new(),
            log: path.clone(),
            generation: 0,
            compressed: false,
        };
        let options = SourceOptions {
            reader: ReaderOptions::default(),
            quiet_after_ms: Some(600_000),
        };
        let (mut f, _) =
            Follower::open_source(Harness::ClaudeCode, log.clone(), None, options).unwrap();
        assert_eq!(
            f.header.id,
            "claude-code-0b0b0b0b-0000-4000-8000-000000000001"
        );
        let mut texts = Vec::new();
        let take = |f: &mut Follower| {
            let mut got = Vec::new();
            f.poll(&mut |t| {
                got.push(
                    t.events
                        .iter()
                        .filter_map(|e| e.assistant_text().map(str::to_owned))
                        .collect::<Vec<_>>()
                        .join("|"),
                )
            })
            .unwrap();
            got
        };
        assert!(take(&mut f).is_empty());
        assert!(f.in_flight().is_some());
        append(&answer(3, "second half"));
        assert!(take(&mut f).is_empty(), "no turn end yet");
        append(&line(
            4,
            Some(3),
            "system",
            serde_json::json!({"subtype": "turn_duration", "durationMs": 5}),
        ));
        texts.extend(take(&mut f));
        assert_eq!(texts.len(), 1, "{texts:?}");
        assert!(
            texts[0].contains("first half") && texts[0].contains("second half"),
            "the whole message: {texts:?}"
        );
        assert!(take(&mut f).is_empty(), "nothing twice");
        assert_eq!(f.in_flight(), None);
        // A restart at the saved anchor: the next turn only.
        let saved = f.saved();
        append(&line(
            5,
            Some(4),
            "user",
            serde_json::json!({"message": {"role": "user", "content": "and the parser"}}),
        ));
        let (mut g, note) =
            Follower::open_source(Harness::ClaudeCode, log, Some(&saved), options).unwrap();
        assert!(note.is_none());
        assert!(take(&mut g).is_empty());
        assert_eq!(g.completed(), 1);
        assert!(g.in_flight().is_some());
    }
}

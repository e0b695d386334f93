//! The log reader: multi-frame zstd or plain JSONL, streamed with bounded memory,
//! resumable from a saved byte offset. A torn last frame/line keeps every complete
//! record before it. Seq gaps/repeats are reported by file and seq.
//!
//! Memory is bounded whatever the log size: the file is read in 64 KiB chunks, zstd is
//! decoded in 64 KiB steps by the streaming decoder, and a line is held only up to
//! `max_line_bytes` (a longer one is refused as soon as it passes the cap, without reading
//! the rest). The zstd decoder's window is capped at 2^27 bytes (zstd's own default
//! limit); frames written with the usual levels need 2–8 MiB.
//!
//! zstd: before any line of a frame is delivered, the frame's block structure is walked
//! on disk ([`super::frames`]) to check that the whole frame is there. So a torn last frame
//! yields nothing, is noted as [`ReadNote::TornTail`], and the resume point stays at its
//! start. A frame's end also ends its last line when the writer left out the final `\n`.
//!
//! After `Ok(None)` or an error the reader is done; to follow a growing log, open a new
//! reader at [`LogReader::resume_point`].

use crate::regular_file::DIRECTORY;
use std::fs::File;
use std::path::{Path, PathBuf};

use super::event::{Event, Header};
use super::normalize::{parse_event_line_lenient, parse_header_lenient, EventLine, PackedRow};
use lines::{Ahead, AheadPiece, Batched, LineSource, Piece};

mod lines;

/// Where to resume reading. `byte_offset` is always at a frame boundary (zstd) or
/// just after a newline (plain), so re-opening there decodes cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ResumePoint {
    pub byte_offset: u64,
    /// The seq the next event must carry (0 before the first event).
    pub next_seq: u64,
    /// Whether the header line has been consumed.
    pub header_seen: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum LogItem {
    Header(Header),
    Event(Event),
}

/// A note about the log that is not fatal.
#[derive(Debug, Clone, PartialEq)]
pub enum ReadNote {
    /// The last frame or line was incomplete; it was skipped. `at` is its byte offset.
    TornTail { file: PathBuf, at: u64 },
    /// Lines held lone UTF-16 surrogate escapes (`"\ud83d"`, what JavaScript's
    /// `JSON.stringify` writes for a string cut in the middle of an emoji); each was read as
    /// U+FFFD and the lines were kept. One note per reader, counting all of them.
    LoneSurrogates {
        file: PathBuf,
        /// Lines with at least one replacement.
        lines: u64,
        /// Escapes replaced.
        replaced: u64,
        /// The seq of the first such line's event (or the seq after which it came).
        first_seq: Option<u64>,
    },
}

impl std::fmt::Display for ReadNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadNote::TornTail { file, at } => write!(
                f,
                "{}: torn last frame at byte {at} skipped (a write in progress or a crash); its records are read once complete",
                file.display()
            ),
            ReadNote::LoneSurrogates {
                file,
                lines,
                replaced,
                first_seq,
            } => {
                write!(
                    f,
                    "{}: {replaced} lone UTF-16 surrogate escape(s) in {lines} line(s)",
                    file.display()
                )?;
                if let Some(seq) = first_seq {
                    write!(f, " (the first at seq {seq})")?;
                }
                write!(
                    f,
                    " read as U+FFFD: the writer cut a string inside an emoji; the lines are kept"
                )
            }
        }
    }
}

/// `the line after seq 5`, or `the first event line` before any event.
fn line_after(after_seq: &Option<u64>) -> String {
    match after_seq {
        Some(seq) => format!("the line after seq {seq}"),
        None => "the first event line".to_owned(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read session log {file}: {source}; check that it exists and is readable")]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("session log {file}: corrupt zstd frame at byte {at}: {detail}; the log is damaged from there on — nothing after it was read")]
    CorruptFrame {
        file: PathBuf,
        at: u64,
        detail: String,
    },
    #[error("session log {file}: {} is not a valid event ({detail}); the log is damaged there", line_after(.after_seq))]
    BadLine {
        file: PathBuf,
        after_seq: Option<u64>,
        detail: String,
    },
    #[error("session log {file}: {} is longer than maxEventBytes ({limit} bytes); refusing to read it (raise maxEventBytes in the config to read it)", line_after(.after_seq))]
    LineTooLong {
        file: PathBuf,
        after_seq: Option<u64>,
        limit: usize,
    },
    #[error("session log {file}: {} is not valid UTF-8; the log is damaged there", line_after(.after_seq))]
    InvalidUtf8 {
        file: PathBuf,
        after_seq: Option<u64>,
    },
    #[error("session log {file} is {kind}, not a regular file; it is not read (a log is never a pipe, a device or a socket)")]
    NotARegularFile { file: PathBuf, kind: &'static str },
    #[error("session log {file}: seq gap — expected seq {expected}, found {found}")]
    SeqGap {
        file: PathBuf,
        expected: u64,
        found: u64,
    },
    #[error("session log {file}: seq {seq} repeated (expected {expected})")]
    SeqRepeat {
        file: PathBuf,
        seq: u64,
        expected: u64,
    },
    #[error("session log {file}: the first line is not a session header ({detail})")]
    BadHeader { file: PathBuf, detail: String },
}

impl ReadError {
    /// The log itself is damaged at a line or frame (not an I/O failure or a refused file):
    /// every complete record before the spot is good, and a later read may get past it.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            ReadError::CorruptFrame { .. }
                | ReadError::BadLine { .. }
                | ReadError::LineTooLong { .. }
                | ReadError::InvalidUtf8 { .. }
                | ReadError::SeqGap { .. }
                | ReadError::SeqRepeat { .. }
        )
    }

    /// A FIFO, a device or a socket where the log should be: never read, skipped with a
    /// note (a directory of that name is a failure, as any unreadable log).
    pub fn is_special_file(&self) -> bool {
        matches!(self, ReadError::NotARegularFile { kind, .. } if *kind != DIRECTORY)
    }

    /// The last good seq before the damage, when known.
    pub fn after_seq(&self) -> Option<u64> {
        match self {
            ReadError::BadLine { after_seq, .. }
            | ReadError::LineTooLong { after_seq, .. }
            | ReadError::InvalidUtf8 { after_seq, .. } => *after_seq,
            ReadError::SeqGap { expected, .. } | ReadError::SeqRepeat { expected, .. } => {
                expected.checked_sub(1)
            }
            _ => None,
        }
    }
}

/// Open a log for reading without ever blocking: `O_NONBLOCK` (a FIFO with no writer
/// would block `open` forever otherwise), then anything but a regular file — a FIFO, a
/// device (a symlink to `/dev/zero`), a socket — is refused by name.
pub(crate) fn open_regular(path: &Path) -> Result<File, ReadError> {
    crate::regular_file::open(path).map_err(|e| match e {
        crate::regular_file::NotOpened::NotRegular(kind) => ReadError::NotARegularFile {
            file: path.to_path_buf(),
            kind,
        },
        crate::regular_file::NotOpened::Io(source) => ReadError::Io {
            file: path.to_path_buf(),
            source,
        },
    })
}

/// The default cap on one line: 32 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 32 << 20;

/// The header of the DSH log at `path` (its first item): `Ok(None)` when the log holds no
/// header yet. The one header read shared by the archive, status and the rules' lineage.
pub fn read_header(path: &Path, options: ReaderOptions) -> Result<Option<Header>, ReadError> {
    let mut reader = LogReader::open_with(path, ResumePoint::default(), options)?;
    match reader.next_item()? {
        Some(LogItem::Header(h)) => Ok(Some(h)),
        _ => Ok(None),
    }
}

/// Reader settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// A longer line is refused with [`ReadError::LineTooLong`].
    pub max_line_bytes: usize,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// Streaming reader over one log file.
pub struct LogReader {
    lines: Lines,
    parse: Parse,
    done: bool,
}

/// Where the lines come from: read here, or decoded ahead on a thread of their own.
enum Lines {
    Here(LineSource),
    Ahead(Ahead),
}

/// The parsing half: lines → header and events, seqs checked, the resume point kept.
struct Parse {
    path: PathBuf,
    next_seq: u64,
    header_seen: bool,
    committed: ResumePoint,
    /// A packed chunk row being expanded, and the boundary to commit once it is.
    packed: Option<(PackedRow, Option<u64>)>,
    notes: Vec<ReadNote>,
}

impl LogReader {
    /// Open `path` (zstd if the name ends in `.zstd`, else plain) at `from`.
    pub fn open(path: &Path, from: ResumePoint) -> Result<Self, ReadError> {
        Self::open_with(path, from, ReaderOptions::default())
    }

    /// [`LogReader::open`] with explicit options.
    pub fn open_with(
        path: &Path,
        from: ResumePoint,
        options: ReaderOptions,
    ) -> Result<Self, ReadError> {
        Self::open_lines(path, from, options, false)
    }

    /// [`LogReader::open_with`], decoding on a thread of its own a few batches of lines
    /// ahead of parsing: for a one-pass read of a whole log (the archive's), on two cores
    /// as `zstd -dc | parse`. The items, resume points, notes and errors are the same.
    pub fn open_decoding_ahead(
        path: &Path,
        from: ResumePoint,
        options: ReaderOptions,
    ) -> Result<Self, ReadError> {
        Self::open_lines(path, from, options, true)
    }

    fn open_lines(
        path: &Path,
        from: ResumePoint,
        options: ReaderOptions,
        ahead: bool,
    ) -> Result<Self, ReadError> {
        let source = LineSource::open(path, from.byte_offset, options.max_line_bytes)?;
        let lines = if ahead {
            Lines::Ahead(Ahead::start(source)?)
        } else {
            Lines::Here(source)
        };
        Ok(Self::parsing(path, from, lines))
    }

    fn parsing(path: &Path, from: ResumePoint, lines: Lines) -> Self {
        LogReader {
            lines,
            parse: Parse {
                path: path.to_path_buf(),
                next_seq: from.next_seq,
                header_seen: from.header_seen,
                committed: from,
                packed: None,
                notes: Vec::new(),
            },
            done: false,
        }
    }

    /// Next header or event; `Ok(None)` at the end of complete data.
    pub fn next_item(&mut self) -> Result<Option<LogItem>, ReadError> {
        if self.done {
            return Ok(None);
        }
        let item = self.next_item_inner();
        if !matches!(item, Ok(Some(_))) {
            self.done = true;
        }
        item
    }

    /// Where a later reader should resume: just after the last item returned whose
    /// frame/line is complete and fully delivered.
    pub fn resume_point(&self) -> ResumePoint {
        self.parse.committed
    }

    /// Non-fatal notes gathered so far (torn tail).
    pub fn notes(&self) -> &[ReadNote] {
        &self.parse.notes
    }

    fn next_item_inner(&mut self) -> Result<Option<LogItem>, ReadError> {
        let parse = &mut self.parse;
        loop {
            if let Some(event) = parse.next_packed()? {
                return Ok(Some(LogItem::Event(event)));
            }
            if parse.packed.is_some() {
                continue;
            }
            // Only the parser knows which seq a line too long to read came after.
            let after = parse.after_seq();
            let placed = |e| match e {
                ReadError::LineTooLong { file, limit, .. } => ReadError::LineTooLong {
                    file,
                    after_seq: after,
                    limit,
                },
                e => e,
            };
            let item = match &mut self.lines {
                Lines::Here(source) => match source.next().map_err(placed)? {
                    None => return Ok(parse.end(source.torn())),
                    Some(Piece::Commit(at)) => {
                        parse.commit(at);
                        None
                    }
                    Some(Piece::Line { boundary }) => {
                        let item = parse.interpret(source.line(), boundary);
                        source.clear_line();
                        item?
                    }
                },
                Lines::Ahead(ahead) => match ahead.next(&parse.path).map_err(placed)? {
                    AheadPiece::End { torn } => return Ok(parse.end(torn)),
                    AheadPiece::Piece(Batched::Commit(at)) => {
                        parse.commit(at);
                        None
                    }
                    AheadPiece::Piece(Batched::Line { bytes, boundary }) => {
                        parse.interpret(ahead.line(bytes), boundary)?
                    }
                },
            };
            if let Some(item) = item {
                return Ok(Some(item));
            }
        }
    }

    #[cfg(test)]
    fn line_buf_capacity(&self) -> usize {
        match &self.lines {
            Lines::Here(source) => source.line_buf_capacity(),
            Lines::Ahead(_) => 0,
        }
    }

    #[cfg(test)]
    fn read_offset(&self) -> u64 {
        match &self.lines {
            Lines::Here(source) => source.read_offset(),
            Lines::Ahead(_) => 0,
        }
    }
}

impl Parse {
    /// The next event of a packed chunk row being expanded, if any.
    fn next_packed(&mut self) -> Result<Option<Event>, ReadError> {
        let Some((row, boundary)) = &mut self.packed else {
            return Ok(None);
        };
        let event = row.next_event();
        let boundary = *boundary;
        if row.is_exhausted() {
            self.packed = None;
        }
        if let Some(event) = &event {
            self.accept_seq(event.seq)?;
        }
        if self.packed.is_none() {
            if let Some(at) = boundary {
                self.commit(at);
            }
        }
        Ok(event)
    }

    /// The end of complete data: a torn last frame or line, if any, is noted.
    fn end(&mut self, torn: Option<u64>) -> Option<LogItem> {
        if let Some(at) = torn {
            self.notes.push(ReadNote::TornTail {
                file: self.path.clone(),
                at,
            });
        }
        None
    }

    /// Turn one complete line into an item. `boundary` is the resume offset reached once
    /// everything the line stands for has been delivered.
    fn interpret(
        &mut self,
        line: &[u8],
        boundary: Option<u64>,
    ) -> Result<Option<LogItem>, ReadError> {
        if line.iter().all(u8::is_ascii_whitespace) {
            if let Some(at) = boundary {
                self.commit(at);
            }
            return Ok(None);
        }
        let text = std::str::from_utf8(line).map_err(|_| ReadError::InvalidUtf8 {
            file: self.path.clone(),
            after_seq: self.after_seq(),
        })?;
        if !self.header_seen {
            // A log copied through a Windows editor may open with a byte order mark.
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            let header = parse_header_lenient(text).map_err(|detail| ReadError::BadHeader {
                file: self.path.clone(),
                detail,
            })?;
            self.header_seen = true;
            if let Some(at) = boundary {
                self.commit(at);
            }
            return Ok(Some(LogItem::Header(header)));
        }
        let (parsed, replaced) =
            parse_event_line_lenient(text).map_err(|detail| ReadError::BadLine {
                file: self.path.clone(),
                after_seq: self.after_seq(),
                detail,
            })?;
        if replaced > 0 {
            let seq = match &parsed {
                EventLine::Single(event) => Some(event.seq),
                EventLine::Packed(_) => self.after_seq(),
            };
            self.note_surrogates(replaced, seq);
        }
        match parsed {
            EventLine::Single(event) => {
                self.accept_seq(event.seq)?;
                if let Some(at) = boundary {
                    self.commit(at);
                }
                Ok(Some(LogItem::Event(event)))
            }
            EventLine::Packed(row) => {
                self.packed = Some((row, boundary));
                Ok(None)
            }
        }
    }

    /// Count a line's lone surrogate replacements in the reader's one note about them.
    fn note_surrogates(&mut self, replaced: u64, seq: Option<u64>) {
        for note in &mut self.notes {
            if let ReadNote::LoneSurrogates {
                lines,
                replaced: total,
                ..
            } = note
            {
                *lines += 1;
                *total += replaced;
                return;
            }
        }
        self.notes.push(ReadNote::LoneSurrogates {
            file: self.path.clone(),
            lines: 1,
            replaced,
            first_seq: seq,
        });
    }

    fn accept_seq(&mut self, seq: u64) -> Result<(), ReadError> {
        let expected = self.next_seq;
        if seq < expected {
            return Err(ReadError::SeqRepeat {
                file: self.path.clone(),
                seq,
                expected,
            });
        }
        if seq > expected {
            return Err(ReadError::SeqGap {
                file: self.path.clone(),
                expected,
                found: seq,
            });
        }
        self.next_seq = self.next_seq.saturating_add(1);
        Ok(())
    }

    fn commit(&mut self, byte_offset: u64) {
        self.committed = ResumePoint {
            byte_offset,
            next_seq: self.next_seq,
            header_seen: self.header_seen,
        };
    }

    fn after_seq(&self) -> Option<u64> {
        self.next_seq.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::lines::IO_CHUNK;
    use super::*;
    use crate::testkit::writer::{generate_session, LogWriter, SessionScript, TurnSpec};
    use serde_json::json;
    use std::io::Write;

    struct Outcome {
        items: Vec<LogItem>,
        error: Option<ReadError>,
        resume: ResumePoint,
        notes: Vec<ReadNote>,
    }

    impl Outcome {
        fn seqs(&self) -> Vec<u64> {
            self.items
                .iter()
                .filter_map(|i| match i {
                    LogItem::Event(e) => Some(e.seq),
                    LogItem::Header(_) => None,
                })
                .collect()
        }

        fn events(&self) -> Vec<Event> {
            self.items
                .iter()
                .filter_map(|i| match i {
                    LogItem::Event(e) => Some(e.clone()),
                    LogItem::Header(_) => None,
                })
                .collect()
        }
    }

    /// Read with `options`, and again decoding ahead on a thread of its own (the archive's
    /// way): both must give the same items, error, resume point and notes.
    fn read_with(path: &Path, from: ResumePoint, options: ReaderOptions) -> Outcome {
        let here = read_once(LogReader::open_with(path, from, options).unwrap());
        let ahead = read_once(LogReader::open_decoding_ahead(path, from, options).unwrap());
        assert_eq!(here.items, ahead.items);
        assert_eq!(
            here.error.as_ref().map(ToString::to_string),
            ahead.error.as_ref().map(ToString::to_string)
        );
        assert_eq!(here.resume, ahead.resume);
        assert_eq!(here.notes, ahead.notes);
        here
    }

    fn read_once(mut reader: LogReader) -> Outcome {
        let mut items = Vec::new();
        let error = loop {
            match reader.next_item() {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        // Done means done: no more items after the end or an error.
        assert!(matches!(reader.next_item(), Ok(None)));
        Outcome {
            items,
            error,
            resume: reader.resume_point(),
            notes: reader.notes().to_vec(),
        }
    }

    fn read(path: &Path, from: ResumePoint) -> Outcome {
        read_with(path, from, ReaderOptions::default())
    }

    fn header_json() -> String {
        r#"{"type":"session","version":3,"id":"session-t","createdAt":1,"cwd":"/w"}"#.to_owned()
    }

    fn ev(seq: u64, kind: &str) -> String {
        json!({"type": kind, "seq": seq, "time": 100 + seq, "data": {"turn": 0}}).to_string()
    }

    fn plain(lines: &[String]) -> Vec<u8> {
        lines
            .iter()
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect()
    }

    fn frame(lines: &[String]) -> Vec<u8> {
        zstd::bulk::compress(&plain(lines), 3).unwrap()
    }

    fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A zstd log: header frame, then one frame per batch of `sizes[i]` events.
    fn zstd_log(sizes: &[u64]) -> (Vec<u8>, Vec<u64>) {
        let mut bytes = frame(&[header_json()]);
        let mut ends = vec![bytes.len() as u64];
        let mut seq = 0;
        for &n in sizes {
            let lines: Vec<String> = (seq..seq + n).map(|s| ev(s, "turn/start")).collect();
            seq += n;
            bytes.extend(frame(&lines));
            ends.push(bytes.len() as u64);
        }
        (bytes, ends)
    }

    #[test]
    fn empty_file() {
        let tmp = tempfile::tempdir().unwrap();
        for name in ["session.jsonl", "session.jsonl.zstd"] {
            let out = read(&write_file(tmp.path(), name, b""), ResumePoint::default());
            assert!(out.items.is_empty() && out.error.is_none() && out.notes.is_empty());
            assert_eq!(out.resume, ResumePoint::default());
        }
    }

    #[test]
    fn only_a_header() {
        let tmp = tempfile::tempdir().unwrap();
        for (name, bytes) in [
            ("session.jsonl", plain(&[header_json()])),
            ("session.jsonl.zstd", frame(&[header_json()])),
        ] {
            let path = write_file(tmp.path(), name, &bytes);
            let out = read(&path, ResumePoint::default());
            assert!(out.error.is_none());
            assert!(
                matches!(&out.items[..], [LogItem::Header(h)] if h.id == "session-t" && h.version == 3)
            );
            assert_eq!(
                out.resume,
                ResumePoint {
                    byte_offset: bytes.len() as u64,
                    next_seq: 0,
                    header_seen: true
                }
            );
        }
    }

    #[test]
    fn header_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_file(tmp.path(), "session.jsonl", &plain(&[ev(0, "turn/start")]));
        assert!(matches!(
            read(&path, ResumePoint::default()).error,
            Some(ReadError::BadHeader { .. })
        ));
        let path = write_file(
            tmp.path(),
            "session.jsonl.zstd",
            &frame(&["garbage".to_owned()]),
        );
        assert!(matches!(
            read(&path, ResumePoint::default()).error,
            Some(ReadError::BadHeader { .. })
        ));
    }

    #[test]
    fn multi_frame_zstd_read_in_full() {
        let tmp = tempfile::tempdir().unwrap();
        let (bytes, ends) = zstd_log(&[3, 1, 5]);
        let path = write_file(tmp.path(), "session.v3.jsonl.zstd", &bytes);
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none() && out.notes.is_empty());
        assert_eq!(out.seqs(), (0..9).collect::<Vec<_>>());
        assert_eq!(
            out.resume,
            ResumePoint {
                byte_offset: *ends.last().unwrap(),
                next_seq: 9,
                header_seen: true
            }
        );
    }

    #[test]
    fn many_small_lines_across_batches_read_the_same_both_ways() {
        // More lines than a batch holds, in frames of every size, plain and compressed
        // (`read_with` reads each file both ways and holds them equal).
        let tmp = tempfile::tempdir().unwrap();
        let lines: Vec<String> = (0..5_000).map(|s| ev(s, "turn/start")).collect();
        let mut bytes = frame(&[header_json()]);
        let mut at = 0;
        for size in (1..).map(|i| i * 37 % 900 + 1) {
            let end = (at + size).min(lines.len());
            bytes.extend(frame(&lines[at..end]));
            at = end;
            if at == lines.len() {
                break;
            }
        }
        let zstd = write_file(tmp.path(), "session.v3.jsonl.zstd", &bytes);
        let mut all = vec![header_json()];
        all.extend(lines.iter().cloned());
        let plain_log = write_file(tmp.path(), "session.v3.jsonl", &plain(&all));
        for path in [zstd, plain_log] {
            let out = read(&path, ResumePoint::default());
            assert!(out.error.is_none() && out.notes.is_empty());
            assert_eq!(out.seqs(), (0..5_000).collect::<Vec<_>>());
            assert_eq!(
                out.resume.byte_offset,
                std::fs::metadata(&path).unwrap().len()
            );
        }
    }

    #[test]
    fn a_reader_decoding_ahead_dropped_midway_stops_its_thread() {
        // Many batches ahead of a reader that takes three items: dropping it joins the
        // decoding thread, which must notice and return (else this test never ends).
        let tmp = tempfile::tempdir().unwrap();
        let big = "x".repeat(100_000);
        let lines: Vec<String> = (0..100)
            .map(|s| json!({"type": "tool/result", "seq": s, "data": {"text": big}}).to_string())
            .collect();
        let mut bytes = frame(&[header_json()]);
        bytes.extend(frame(&lines));
        let path = write_file(tmp.path(), "session.v3.jsonl.zstd", &bytes);
        let mut reader =
            LogReader::open_decoding_ahead(&path, ResumePoint::default(), Default::default())
                .unwrap();
        for _ in 0..3 {
            assert!(reader.next_item().unwrap().is_some());
        }
        drop(reader);
    }

    #[test]
    fn large_frames_spanning_many_buffers() {
        // Lines longer than the 64 KiB steps and frames of several MB.
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = frame(&[header_json()]);
        let big = "x".repeat(200_000);
        let lines: Vec<String> = (0..30)
            .map(|s| {
                json!({"type": "tool/result", "seq": s, "data": {"text": format!("{s}{big}")}})
                    .to_string()
            })
            .collect();
        bytes.extend(frame(&lines));
        let path = write_file(tmp.path(), "session.v1.jsonl.zstd", &bytes);
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none());
        let events = out.events();
        assert_eq!(events.len(), 30);
        assert_eq!(
            events[29].data().unwrap()["text"].as_str().unwrap().len(),
            200_002
        );
    }

    #[test]
    fn resume_mid_log_gives_exactly_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let (bytes, ends) = zstd_log(&[2, 3, 1, 4]);
        let zpath = write_file(tmp.path(), "session.jsonl.zstd", &bytes);
        let lines: Vec<String> = std::iter::once(header_json())
            .chain((0..10).map(|s| ev(s, "x/y")))
            .collect();
        let ppath = write_file(tmp.path(), "session.jsonl", &plain(&lines));
        for path in [&zpath, &ppath] {
            for k in 0..=11u64 {
                let mut reader = LogReader::open(path, ResumePoint::default()).unwrap();
                for _ in 0..k {
                    reader.next_item().unwrap().unwrap();
                }
                let rp = reader.resume_point();
                if path == &zpath {
                    assert!(
                        ends.contains(&rp.byte_offset) || rp.byte_offset == 0,
                        "{rp:?}"
                    );
                }
                let rest = read(path, rp);
                assert!(rest.error.is_none());
                assert_eq!(
                    rest.seqs(),
                    (rp.next_seq..10).collect::<Vec<_>>(),
                    "k={k} {rp:?}"
                );
                // Never behind what was delivered by more than one frame.
                assert!(rp.next_seq + 4 >= k.saturating_sub(1));
            }
        }
    }

    #[test]
    fn resume_after_append_reads_only_new_events() {
        for compressed in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let path = tmp.path().join(if compressed {
                "session.v2.jsonl.zstd"
            } else {
                "session.v2.jsonl"
            });
            let mut script = SessionScript::new(2, 0);
            let mut writer =
                LogWriter::create(&path, compressed, &script.header("s", "/w", 0)).unwrap();
            writer.set_sync(false);
            let specs: Vec<TurnSpec> = generate_session(9, 6, 500, 2, "/w").collect();
            for spec in &specs[..3] {
                writer.append_turn(&mut script, spec).unwrap();
            }
            let first = read(&path, ResumePoint::default());
            assert!(first.error.is_none());
            let rp = first.resume;
            assert_eq!(rp.next_seq, script.next_seq());
            assert_eq!(rp.byte_offset, std::fs::metadata(&path).unwrap().len());

            let mut writer = LogWriter::open_append(&path, compressed).unwrap();
            writer.set_sync(false);
            for spec in &specs[3..] {
                writer.append_turn(&mut script, spec).unwrap();
            }
            // Wreck everything before the resume point: a resumed reader never looks there.
            let mut all = std::fs::read(&path).unwrap();
            all[..rp.byte_offset as usize].fill(0xAB);
            std::fs::write(&path, &all).unwrap();

            let rest = read(&path, rp);
            assert!(rest.error.is_none(), "{:?}", rest.error);
            assert!(rest.items.iter().all(|i| matches!(i, LogItem::Event(_))));
            assert_eq!(
                rest.seqs(),
                (rp.next_seq..script.next_seq()).collect::<Vec<_>>()
            );
            assert_eq!(
                rest.events()
                    .iter()
                    .filter(|e| e.kind == "turn/end")
                    .count(),
                3
            );
            assert_eq!(rest.resume.next_seq, script.next_seq());
        }
    }

    #[test]
    fn torn_last_frame_then_completed() {
        let tmp = tempfile::tempdir().unwrap();
        let (bytes, ends) = zstd_log(&[2, 3, 4]);
        let torn_at = ends[2];
        for cut in [
            torn_at + 1,
            torn_at + 5,
            (torn_at + ends[3]) / 2,
            ends[3] - 1,
        ] {
            let path = write_file(tmp.path(), "session.jsonl.zstd", &bytes[..cut as usize]);
            let out = read(&path, ResumePoint::default());
            assert!(out.error.is_none(), "{:?}", out.error);
            assert_eq!(out.seqs(), (0..5).collect::<Vec<_>>(), "cut {cut}");
            assert_eq!(
                out.notes,
                [ReadNote::TornTail {
                    file: path.clone(),
                    at: torn_at
                }]
            );
            assert_eq!(
                out.resume,
                ResumePoint {
                    byte_offset: torn_at,
                    next_seq: 5,
                    header_seen: true
                }
            );
            // The writer finishes the frame; the reader resumes at the torn frame's start.
            std::fs::write(&path, &bytes).unwrap();
            let rest = read(&path, out.resume);
            assert!(rest.error.is_none() && rest.notes.is_empty());
            assert_eq!(rest.seqs(), (5..9).collect::<Vec<_>>());
        }
    }

    #[test]
    fn torn_header_frame() {
        let tmp = tempfile::tempdir().unwrap();
        let bytes = frame(&[header_json()]);
        let path = write_file(tmp.path(), "session.jsonl.zstd", &bytes[..bytes.len() - 2]);
        let out = read(&path, ResumePoint::default());
        assert!(out.items.is_empty() && out.error.is_none());
        assert_eq!(out.notes.len(), 1);
        assert_eq!(out.resume, ResumePoint::default());
    }

    #[test]
    fn torn_last_plain_line_then_completed() {
        let tmp = tempfile::tempdir().unwrap();
        let full = plain(&[header_json(), ev(0, "a"), ev(1, "b")]);
        let line_start = plain(&[header_json(), ev(0, "a")]).len() as u64;
        let path = write_file(tmp.path(), "session.jsonl", &full[..full.len() - 1]);
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none());
        assert_eq!(out.seqs(), [0]);
        assert_eq!(
            out.notes,
            [ReadNote::TornTail {
                file: path.clone(),
                at: line_start
            }]
        );
        assert_eq!(
            out.resume,
            ResumePoint {
                byte_offset: line_start,
                next_seq: 1,
                header_seen: true
            }
        );
        std::fs::write(&path, &full).unwrap();
        let rest = read(&path, out.resume);
        assert_eq!(rest.seqs(), [1]);
        assert!(rest.notes.is_empty());
    }

    #[test]
    fn a_plain_log_opening_with_a_byte_order_mark_reads_its_header() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = b"\xef\xbb\xbf".to_vec();
        bytes.extend(plain(&[header_json(), ev(0, "a")]));
        let path = write_file(tmp.path(), "session.jsonl", &bytes);
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none(), "{:?}", out.error);
        assert_eq!(out.seqs(), [0]);
    }

    #[test]
    fn garbage_frame_is_corrupt_after_complete_records() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut bytes, ends) = zstd_log(&[2]);
        bytes.extend_from_slice(b"this is not a zstd frame at all\n");
        let path = write_file(tmp.path(), "session.jsonl.zstd", &bytes);
        let out = read(&path, ResumePoint::default());
        assert_eq!(out.seqs(), [0, 1]);
        assert!(matches!(out.error, Some(ReadError::CorruptFrame { at, .. }) if at == ends[1]));
        assert_eq!(out.resume.byte_offset, ends[1]);
    }

    #[test]
    fn damaged_block_content_is_corrupt() {
        let tmp = tempfile::tempdir().unwrap();
        let (mut bytes, ends) = zstd_log(&[2]);
        let lines: Vec<String> = (2..40).map(|s| ev(s, "step/start")).collect();
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_checksum(true).unwrap();
        enc.write_all(&plain(&lines)).unwrap();
        let mut damaged = enc.finish().unwrap();
        // Keep the frame header and block header; garble the compressed payload.
        let n = damaged.len();
        for b in &mut damaged[12..n - 4] {
            *b = b.wrapping_mul(31).wrapping_add(7);
        }
        bytes.extend(damaged);
        let path = write_file(tmp.path(), "session.jsonl.zstd", &bytes);
        let out = read(&path, ResumePoint::default());
        assert!(
            matches!(out.error, Some(ReadError::CorruptFrame { at, .. }) if at == ends[1]),
            "{:?}",
            out.error
        );
    }

    #[test]
    fn skippable_frame_is_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = frame(&[header_json(), ev(0, "a")]);
        bytes.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
        bytes.extend_from_slice(&4u32.to_le_bytes());
        bytes.extend_from_slice(b"meta");
        bytes.extend(frame(&[ev(1, "b")]));
        let path = write_file(tmp.path(), "session.jsonl.zstd", &bytes);
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none());
        assert_eq!(out.seqs(), [0, 1]);
    }

    #[test]
    fn frame_end_ends_an_unterminated_line() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = zstd::bulk::compress(header_json().as_bytes(), 3).unwrap();
        bytes.extend(
            zstd::bulk::compress(format!("{}\n{}", ev(0, "a"), ev(1, "b")).as_bytes(), 3).unwrap(),
        );
        bytes.extend(frame(&[ev(2, "c")]));
        let path = write_file(tmp.path(), "session.jsonl.zstd", &bytes);
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none(), "{:?}", out.error);
        assert_eq!(out.seqs(), [0, 1, 2]);
    }

    #[test]
    fn blank_lines_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let bytes = format!(
            "{}\n\n{}\r\n  \n{}\n",
            header_json(),
            ev(0, "a"),
            ev(1, "b")
        );
        let path = write_file(tmp.path(), "session.jsonl", bytes.as_bytes());
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none());
        assert_eq!(out.seqs(), [0, 1]);
        assert_eq!(out.resume.byte_offset, bytes.len() as u64);
    }

    #[test]
    fn garbled_line_names_the_seq_before_it() {
        let tmp = tempfile::tempdir().unwrap();
        let lines = [
            header_json(),
            ev(0, "a"),
            ev(1, "b"),
            r#"{"type":"c","seq":2,"da"#.to_owned(),
            ev(3, "d"),
        ];
        let p = write_file(tmp.path(), "session.jsonl", &plain(&lines));
        let z = write_file(tmp.path(), "session.jsonl.zstd", &frame(&lines));
        for path in [p, z] {
            let out = read(&path, ResumePoint::default());
            assert_eq!(out.seqs(), [0, 1]);
            assert!(
                matches!(
                    out.error,
                    Some(ReadError::BadLine {
                        after_seq: Some(1),
                        ..
                    })
                ),
                "{:?}",
                out.error
            );
        }
    }

    #[test]
    fn event_missing_seq_or_type_is_a_bad_line() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in [
            r#"{"type":"turn/start","data":{}}"#,
            r#"{"seq":0,"data":{}}"#,
        ] {
            let path = write_file(
                tmp.path(),
                "session.jsonl",
                &plain(&[header_json(), bad.to_owned()]),
            );
            let out = read(&path, ResumePoint::default());
            assert!(
                matches!(
                    out.error,
                    Some(ReadError::BadLine {
                        after_seq: None,
                        ..
                    })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn invalid_utf8() {
        let tmp = tempfile::tempdir().unwrap();
        let mut bytes = plain(&[header_json(), ev(0, "a")]);
        bytes.extend_from_slice(b"{\"type\":\"x\",\"seq\":1,\"data\":\"\xff\xfe\"}\n");
        let p = write_file(tmp.path(), "session.jsonl", &bytes);
        let z = write_file(
            tmp.path(),
            "session.jsonl.zstd",
            &zstd::bulk::compress(&bytes, 1).unwrap(),
        );
        for path in [p, z] {
            let out = read(&path, ResumePoint::default());
            assert_eq!(out.seqs(), [0]);
            assert!(matches!(
                out.error,
                Some(ReadError::InvalidUtf8 {
                    after_seq: Some(0),
                    ..
                })
            ));
        }
    }

    #[test]
    fn seq_gap_and_repeat() {
        let tmp = tempfile::tempdir().unwrap();
        let gap = write_file(
            tmp.path(),
            "gap.jsonl",
            &plain(&[header_json(), ev(0, "a"), ev(2, "b")]),
        );
        let out = read(&gap, ResumePoint::default());
        assert_eq!(out.seqs(), [0]);
        assert!(matches!(
            out.error,
            Some(ReadError::SeqGap {
                expected: 1,
                found: 2,
                ..
            })
        ));
        let rep = write_file(
            tmp.path(),
            "rep.jsonl",
            &plain(&[header_json(), ev(0, "a"), ev(1, "b"), ev(1, "c")]),
        );
        let out = read(&rep, ResumePoint::default());
        assert_eq!(out.seqs(), [0, 1]);
        assert!(matches!(
            out.error,
            Some(ReadError::SeqRepeat {
                seq: 1,
                expected: 2,
                ..
            })
        ));
        let late = write_file(
            tmp.path(),
            "late.jsonl",
            &plain(&[header_json(), ev(1, "a")]),
        );
        assert!(matches!(
            read(&late, ResumePoint::default()).error,
            Some(ReadError::SeqGap {
                expected: 0,
                found: 1,
                ..
            })
        ));
    }

    #[test]
    fn resumed_seq_checked_from_next_seq() {
        let tmp = tempfile::tempdir().unwrap();
        let head = plain(&[header_json(), ev(0, "a")]);
        let mut bytes = head.clone();
        bytes.extend(plain(&[ev(1, "b")]));
        let path = write_file(tmp.path(), "session.jsonl", &bytes);
        let from = ResumePoint {
            byte_offset: head.len() as u64,
            next_seq: 1,
            header_seen: true,
        };
        assert_eq!(read(&path, from).seqs(), [1]);
        let wrong = ResumePoint {
            next_seq: 5,
            ..from
        };
        assert!(matches!(
            read(&path, wrong).error,
            Some(ReadError::SeqRepeat {
                seq: 1,
                expected: 5,
                ..
            })
        ));
        let not_seen = ResumePoint {
            header_seen: false,
            ..from
        };
        assert!(matches!(
            read(&path, not_seen).error,
            Some(ReadError::BadHeader { .. })
        ));
    }

    #[test]
    fn resume_offset_past_end_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_file(tmp.path(), "session.jsonl", &plain(&[header_json()]));
        let from = ResumePoint {
            byte_offset: 10_000,
            next_seq: 3,
            header_seen: true,
        };
        assert!(matches!(
            LogReader::open(&path, from),
            Err(ReadError::Io { .. })
        ));
    }

    #[test]
    fn missing_file_is_io() {
        let tmp = tempfile::tempdir().unwrap();
        let err = LogReader::open(&tmp.path().join("nope.jsonl"), ResumePoint::default())
            .err()
            .unwrap();
        assert!(matches!(err, ReadError::Io { .. }));
        assert!(err.to_string().contains("nope.jsonl"));
    }

    #[test]
    fn unknown_event_type_carried() {
        let tmp = tempfile::tempdir().unwrap();
        let odd = r#"{"type":"team/mailbox/whatever","seq":1,"time":5,"data":{"x":[1,2]},"surfaceOp":{"op":"replace"}}"#;
        let path = write_file(
            tmp.path(),
            "session.jsonl",
            &plain(&[header_json(), ev(0, "a"), odd.to_owned(), ev(2, "b")]),
        );
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none());
        let events = out.events();
        assert_eq!(events[1].kind, "team/mailbox/whatever");
        assert_eq!(*events[1].data().unwrap(), json!({"x": [1, 2]}));
        assert_eq!(out.seqs(), [0, 1, 2]);
    }

    #[test]
    fn packed_rows_expanded_in_the_seq_numbering() {
        let tmp = tempfile::tempdir().unwrap();
        let row = r#"{"type":"reasoning-chunks","seq0":1,"time0":50,"data":{"turn":0,"step":0,"index":0,"dt":[1,2],"texts":["a","b","c"]}}"#;
        let lines = [header_json(), ev(0, "a"), row.to_owned(), ev(4, "b")];
        let path = write_file(tmp.path(), "session.v1.jsonl.zstd", &frame(&lines));
        let out = read(&path, ResumePoint::default());
        assert!(out.error.is_none(), "{:?}", out.error);
        assert_eq!(out.seqs(), [0, 1, 2, 3, 4]);
        let events = out.events();
        assert_eq!(events[3].kind, "assistant/chunk");
        assert_eq!(events[3].time, Some(53));
        assert_eq!(events[3].data().unwrap()["chunk"]["text"], "c");
        // A line after the row must continue at seq0 + n.
        let bad = [header_json(), ev(0, "a"), row.to_owned(), ev(3, "b")];
        let path = write_file(tmp.path(), "bad.jsonl", &plain(&bad));
        let out = read(&path, ResumePoint::default());
        assert_eq!(out.seqs(), [0, 1, 2, 3]);
        assert!(matches!(
            out.error,
            Some(ReadError::SeqRepeat {
                seq: 3,
                expected: 4,
                ..
            })
        ));
        // A row starting at the wrong seq is a gap.
        let gap = [header_json(), row.to_owned()];
        let path = write_file(tmp.path(), "gap.jsonl", &plain(&gap));
        assert!(matches!(
            read(&path, ResumePoint::default()).error,
            Some(ReadError::SeqGap {
                expected: 0,
                found: 1,
                ..
            })
        ));
    }

    #[test]
    fn resume_point_waits_for_a_packed_row_to_drain() {
        let tmp = tempfile::tempdir().unwrap();
        let row =
            r#"{"type":"text-chunks","seq0":0,"time0":0,"data":{"dt":[0],"texts":["a","b"]}}"#;
        let head = plain(&[header_json()]).len() as u64;
        let path = write_file(
            tmp.path(),
            "session.jsonl",
            &plain(&[header_json(), row.to_owned()]),
        );
        let mut reader = LogReader::open(&path, ResumePoint::default()).unwrap();
        reader.next_item().unwrap();
        reader.next_item().unwrap();
        assert_eq!(reader.resume_point().byte_offset, head);
        reader.next_item().unwrap();
        assert_eq!(reader.resume_point().next_seq, 2);
        assert!(reader.resume_point().byte_offset > head);
    }

    #[test]
    fn source_event_seq_pairs_expanded() {
        let tmp = tempfile::tempdir().unwrap();
        let msg = r#"{"type":"assistant/message","seq":6,"data":{},"sourceEventSeqs":[0,[2,5]]}"#;
        let mut lines = vec![header_json()];
        lines.extend((0..6).map(|s| ev(s, "assistant/chunk")));
        lines.push(msg.to_owned());
        let path = write_file(tmp.path(), "session.v2.jsonl", &plain(&lines));
        let out = read(&path, ResumePoint::default());
        assert_eq!(out.events()[6].source_event_seqs, Some(vec![0, 2, 3, 4, 5]));
    }

    /// A file of `prefix` then `total` bytes of `a` with no newline, written in 1 MB chunks.
    fn write_long_line(path: &Path, prefix: &[u8], total: usize, compressed: bool) {
        let file = std::fs::File::create(path).unwrap();
        let mut out: Box<dyn Write> = if compressed {
            let mut header = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
            header.write_all(prefix).unwrap();
            let mut file = file;
            file.write_all(&header.finish().unwrap()).unwrap();
            Box::new(
                zstd::stream::write::Encoder::new(file, 1)
                    .unwrap()
                    .auto_finish(),
            )
        } else {
            let mut file = file;
            file.write_all(prefix).unwrap();
            Box::new(file)
        };
        let chunk = vec![b'a'; 1 << 20];
        let mut left = total;
        while left > 0 {
            let n = left.min(chunk.len());
            out.write_all(&chunk[..n]).unwrap();
            left -= n;
        }
        out.flush().unwrap();
    }

    #[test]
    fn fifo_device_and_socket_refused_without_blocking() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo.jsonl.zstd");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        let zero = tmp.path().join("zero.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let socket = tmp.path().join("socket.jsonl");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        for (path, kind) in [
            (&fifo, "a FIFO"),
            (&zero, "a character device"),
            (&socket, "a socket"),
        ] {
            // A FIFO with no writer would block a plain open forever: this returns.
            let err = LogReader::open(path, ResumePoint::default())
                .err()
                .expect("refused");
            assert!(
                matches!(err, ReadError::NotARegularFile { kind: k, .. } if k.starts_with(kind)),
                "{err}"
            );
            let message = err.to_string();
            assert!(message.contains(kind) && message.contains("not a regular file"));
            assert!(!err.is_damage());
        }
    }

    #[test]
    fn lone_surrogates_read_as_replacement_and_counted() {
        let tmp = tempfile::tempdir().unwrap();
        // What `JSON.stringify` writes for a string cut inside an emoji: "\ud83d".
        let cut = r#"{"type":"user/message","seq":1,"data":{"id":"m","role":"user","content":[{"type":"text","text":"look \ud83d"}],"source":{"kind":"user"}}}"#;
        let low = r#"{"type":"session/title","seq":2,"data":{"title":"\ude00 and \ud83d\ude00"}}"#;
        for (name, bytes) in [
            (
                "s.jsonl",
                plain(&[header_json(), ev(0, "turn/start"), cut.into(), low.into()]),
            ),
            (
                "s.jsonl.zstd",
                frame(&[header_json(), ev(0, "turn/start"), cut.into(), low.into()]),
            ),
        ] {
            let out = read(
                &write_file(tmp.path(), name, &bytes),
                ResumePoint::default(),
            );
            assert!(out.error.is_none(), "{:?}", out.error);
            assert_eq!(out.seqs(), [0, 1, 2]);
            let events = out.events();
            assert_eq!(
                events[1].user_message().map(|m| m.text.as_str()),
                Some("look \u{fffd}")
            );
            assert_eq!(
                events[2].data().unwrap()["title"],
                json!("\u{fffd} and \u{1f600}")
            );
            assert_eq!(
                out.notes,
                [ReadNote::LoneSurrogates {
                    file: tmp.path().join(name),
                    lines: 2,
                    replaced: 2,
                    first_seq: Some(1),
                }]
            );
            let said = out.notes[0].to_string();
            assert!(
                said.contains("2 lone UTF-16 surrogate escape(s) in 2 line(s)"),
                "{said}"
            );
            assert!(
                said.contains("the first at seq 1") && said.contains("U+FFFD"),
                "{said}"
            );
        }
    }

    #[test]
    fn messages_show_no_rust_syntax() {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_file(
            tmp.path(),
            "s.jsonl",
            &plain(&[header_json(), ev(0, "a"), "{garbled".into(), ev(2, "b")]),
        );
        let err = read(&path, ResumePoint::default()).error.expect("damaged");
        let message = err.to_string();
        assert!(message.contains("the line after seq 0"), "{message}");
        assert!(
            !message.contains("Some(") && !message.contains("..="),
            "{message}"
        );
        assert!(err.is_damage());
        assert_eq!(err.after_seq(), Some(0));
        let first = write_file(
            tmp.path(),
            "f.jsonl",
            &plain(&[header_json(), "{garbled".into()]),
        );
        let message = read(&first, ResumePoint::default())
            .error
            .expect("damaged")
            .to_string();
        assert!(message.contains("the first event line"), "{message}");
        assert!(!message.contains("None"), "{message}");
    }

    #[test]
    fn overlong_lines_refused_with_bounded_memory() {
        const CAP: usize = 1 << 20;
        let tmp = tempfile::tempdir().unwrap();
        let prefix = format!("{}\n{}\n", header_json(), ev(0, "a"));
        for compressed in [false, true] {
            for total in [5_000_000, 100_000_000] {
                let path = tmp.path().join(if compressed {
                    "long.jsonl.zstd"
                } else {
                    "long.jsonl"
                });
                write_long_line(&path, prefix.as_bytes(), total, compressed);
                let mut reader = LogReader::open_with(
                    &path,
                    ResumePoint::default(),
                    ReaderOptions {
                        max_line_bytes: CAP,
                    },
                )
                .unwrap();
                assert!(matches!(reader.next_item(), Ok(Some(LogItem::Header(_)))));
                assert!(matches!(reader.next_item(), Ok(Some(LogItem::Event(_)))));
                let err = reader.next_item().unwrap_err();
                assert!(
                    matches!(
                        err,
                        ReadError::LineTooLong {
                            after_seq: Some(0),
                            limit: CAP,
                            ..
                        }
                    ),
                    "{err}"
                );
                assert!(
                    reader.line_buf_capacity() <= CAP + IO_CHUNK,
                    "{}",
                    reader.line_buf_capacity()
                );
                // Only a little past the cap was read, not the whole line.
                if !compressed {
                    assert!(reader.read_offset() <= (prefix.len() + CAP + IO_CHUNK) as u64);
                }
            }
        }
    }

    #[test]
    fn a_line_at_the_cap_is_accepted() {
        let tmp = tempfile::tempdir().unwrap();
        let line = json!({"type": "a", "seq": 0, "data": "x".repeat(500)}).to_string();
        assert!(line.len() > header_json().len());
        let path = write_file(
            tmp.path(),
            "session.jsonl",
            &plain(&[header_json(), line.clone()]),
        );
        let options = ReaderOptions {
            max_line_bytes: line.len(),
        };
        let out = read_with(&path, ResumePoint::default(), options);
        assert!(out.error.is_none());
        assert_eq!(out.seqs(), [0]);
        let options = ReaderOptions {
            max_line_bytes: line.len() - 1,
        };
        assert!(matches!(
            read_with(&path, ResumePoint::default(), options).error,
            Some(ReadError::LineTooLong { .. })
        ));
    }

    #[test]
    fn every_truncation_keeps_the_complete_frames() {
        let tmp = tempfile::tempdir().unwrap();
        let (bytes, ends) = zstd_log(&[2, 1, 3]);
        let path = tmp.path().join("session.jsonl.zstd");
        for cut in 0..=bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            let out = read(&path, ResumePoint::default());
            assert!(out.error.is_none(), "cut {cut}: {:?}", out.error);
            let complete = ends.iter().filter(|&&e| e <= cut as u64).count();
            let expected_events = [0u64, 0, 2, 3, 6][complete];
            assert_eq!(
                out.seqs(),
                (0..expected_events).collect::<Vec<_>>(),
                "cut {cut}"
            );
            assert_eq!(
                out.notes.is_empty(),
                ends.contains(&(cut as u64)) || cut == 0,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn flipped_bytes_never_panic() {
        // Any single damaged byte gives an error, a torn tail or (for bytes the format
        // does not check) a clean read, never a panic or a hang.
        let tmp = tempfile::tempdir().unwrap();
        let (zbytes, _) = zstd_log(&[2, 3]);
        let lines: Vec<String> = std::iter::once(header_json())
            .chain((0..5).map(|s| ev(s, "x")))
            .collect();
        let pbytes = plain(&lines);
        for (name, bytes) in [("session.jsonl.zstd", &zbytes), ("session.jsonl", &pbytes)] {
            let path = tmp.path().join(name);
            for i in 0..bytes.len() {
                for flip in [0x01u8, 0x80, 0xFF] {
                    let mut damaged = bytes.clone();
                    damaged[i] ^= flip;
                    std::fs::write(&path, &damaged).unwrap();
                    let out = read(&path, ResumePoint::default());
                    assert!(out.seqs().len() <= 5);
                }
            }
        }
    }

    #[test]
    fn tool_result_accessor_on_read_events() {
        // v0–v3 shape, v4 shape, and a v4 result with string content.
        let tmp = tempfile::tempdir().unwrap();
        let lines = [
            header_json(),
            json!({"type":"tool/result","seq":0,"data":{"turn":0,"step":0,"message":{"role":"user","source":{"kind":"tool","callId":"c1"},
                "content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"out"}],"isError":false}]}}}).to_string(),
            json!({"type":"tool/result","seq":1,"data":{"turn":0,"step":0,"message":{"role":"tool","toolCallId":"c2",
                "content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"isError":true}}}).to_string(),
            json!({"type":"tool/result","seq":2,"data":{"turn":0,"step":0,"message":{"role":"tool","toolCallId":"c3","content":"plain"}}}).to_string(),
            json!({"type":"tool/result","seq":3,"data":{"turn":0,"step":0,"message":{"role":"user","source":{"kind":"tool","callId":"c4"},
                "content":[{"type":"tool-result","content":"s","isError":true}]}}}).to_string(),
        ];
        let path = write_file(tmp.path(), "session.jsonl", &plain(&lines));
        let events = read(&path, ResumePoint::default()).events();
        let results: Vec<_> = events.iter().map(|e| e.tool_result().unwrap()).collect();
        assert_eq!(
            (
                results[0].call_id.as_str(),
                results[0].content.as_str(),
                results[0].is_error
            ),
            ("c1", "out", false)
        );
        assert_eq!(
            (
                results[1].call_id.as_str(),
                results[1].content.as_str(),
                results[1].is_error
            ),
            ("c2", "a\nb", true)
        );
        assert_eq!(
            (
                results[2].call_id.as_str(),
                results[2].content.as_str(),
                results[2].is_error
            ),
            ("c3", "plain", false)
        );
        assert_eq!(
            (
                results[3].call_id.as_str(),
                results[3].content.as_str(),
                results[3].is_error
            ),
            ("c4", "s", true)
        );
    }
}

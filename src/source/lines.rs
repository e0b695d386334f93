//! Newline-delimited lines with a cap, for the JSONL harnesses: a line longer than the cap
//! is skipped without being held, a last line without its `\n` is torn (a write in
//! progress) and is not consumed.

use std::io::{self, BufRead};

/// What the next line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// A complete line (without its `\n`) is in [`Lines::line`]; it started at `start`.
    Line { start: u64 },
    /// A complete line longer than the cap, skipped; it started at `start`.
    TooLong { start: u64 },
    /// The file ends inside a line that starts at `start`.
    Torn { start: u64 },
    /// The end of complete data.
    End,
}

pub(crate) struct Lines<R> {
    inner: R,
    /// Bytes consumed: the offset just past the last complete line.
    offset: u64,
    cap: usize,
    buf: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    /// Lines of `inner`, whose first byte is at `offset` of the file.
    pub(crate) fn new(inner: R, offset: u64, cap: usize) -> Self {
        Lines {
            inner,
            offset,
            cap,
            buf: Vec::new(),
        }
    }

    /// The offset just past the last complete line returned.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The last complete line returned by [`Lines::next_line`].
    pub(crate) fn line(&self) -> &[u8] {
        &self.buf
    }

    pub(crate) fn next_line(&mut self) -> io::Result<Next> {
        let start = self.offset;
        self.buf.clear();
        if self.buf.capacity() > (1 << 20) {
            self.buf.shrink_to(1 << 20);
        }
        let mut len: u64 = 0;
        let mut too_long = false;
        loop {
            let available = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(if len == 0 {
                    Next::End
                } else {
                    Next::Torn { start }
                });
            }
            let (piece, found) = match memchr(available) {
                Some(i) => (&available[..i], Some(i)),
                None => (available, None),
            };
            if !too_long {
                if self.buf.len() + piece.len() > self.cap {
                    too_long = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(piece);
                }
            }
            len += piece.len() as u64;
            match found {
                Some(i) => {
                    self.inner.consume(i + 1);
                    self.offset = start + len + 1;
                    // A file saved by a Windows editor or PowerShell's `Out-File` may open
                    // with a UTF-8 byte order mark: not part of the first line's JSON.
                    if start == 0 && self.buf.starts_with(BOM) {
                        self.buf.drain(..BOM.len());
                    }
                    return Ok(if too_long {
                        Next::TooLong { start }
                    } else {
                        Next::Line { start }
                    });
                }
                None => {
                    let n = piece.len();
                    self.inner.consume(n);
                }
            }
        }
    }
}

/// UTF-8's byte order mark.
const BOM: &[u8] = b"\xef\xbb\xbf";

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

/// Open `path` as decoded bytes from offset `from` of them: `.zst` through zstd (a resume
/// offset is then one into the decoded stream), anything else plain. A read error while
/// skipping into a `.zst` is its damage.
pub(crate) fn open_stream(
    path: &std::path::Path,
    from: u64,
) -> Result<Box<dyn BufRead>, crate::session::reader::ReadError> {
    use crate::session::reader::ReadError;
    use std::io::{BufReader, Read, Seek, SeekFrom};
    let io_err = |source| ReadError::Io {
        file: path.to_path_buf(),
        source,
    };
    let past_end = |len: u64| {
        io_err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("resume offset {from} is past the end of the log ({len} bytes, decoded): it was truncated or rewritten; read it again from the start"),
        ))
    };
    let mut file = crate::session::reader::open_regular(path)?;
    if path.extension().is_some_and(|e| e == "zst") {
        let decoder =
            zstd::stream::read::Decoder::with_buffer(BufReader::with_capacity(64 * 1024, file))
                .map_err(io_err)?;
        let mut stream: Box<dyn BufRead> = Box::new(BufReader::with_capacity(64 * 1024, decoder));
        let skipped = io::copy(&mut (&mut stream).take(from), &mut io::sink()).map_err(|e| {
            ReadError::CorruptFrame {
                file: path.to_path_buf(),
                at: 0,
                detail: e.to_string(),
            }
        })?;
        if skipped < from {
            return Err(past_end(skipped));
        }
        return Ok(stream);
    }
    let len = file.metadata().map_err(io_err)?.len();
    if from > len {
        return Err(past_end(len));
    }
    file.seek(SeekFrom::Start(from)).map_err(io_err)?;
    Ok(Box::new(BufReader::with_capacity(64 * 1024, file)))
}

/// What a JSONL harness reader has made and not handed out yet: the header, events (a turn
/// end carries the resume point it commits), then the damage it met or the end.
pub(crate) struct Outbox {
    header: Option<crate::session::Header>,
    queue: std::collections::VecDeque<(crate::session::Event, Option<ResumePoint>)>,
    committed: ResumePoint,
    notes: Vec<ReadNote>,
    failed: Option<ReadError>,
    done: bool,
}

use crate::session::reader::{LogItem, ReadError, ReadNote, ResumePoint};

impl Outbox {
    /// An outbox of a reader opened at `from`, handing out `header` first.
    pub(crate) fn new(header: Option<crate::session::Header>, from: ResumePoint) -> Self {
        Outbox {
            header,
            queue: std::collections::VecDeque::new(),
            committed: ResumePoint {
                header_seen: true,
                ..from
            },
            notes: Vec::new(),
            failed: None,
            done: false,
        }
    }

    /// An event of `kind` at `seq` with `data` (normalized DSH shape) and its time.
    pub(crate) fn push(
        &mut self,
        seq: u64,
        kind: &str,
        data: serde_json::Value,
        time: Option<i64>,
    ) {
        let mut ev = crate::session::Event::new(seq, kind, data);
        ev.time = time;
        self.queue.push_back((ev, None));
    }

    /// A `turn/end` at `seq`; once it is handed out a later reader may resume at `resume`.
    pub(crate) fn end_turn(&mut self, seq: u64, reason: &str, resume: ResumePoint) {
        let ev = crate::session::Event::new(
            seq,
            "turn/end",
            serde_json::json!({"reason": {"kind": reason}}),
        );
        self.queue.push_back((ev, Some(resume)));
    }

    /// Nothing is pending after a line: a later reader may resume at `resume`, once what is
    /// queued (a turn end at most) is handed out.
    pub(crate) fn commit_when_idle(&mut self, resume: ResumePoint) {
        match self.queue.back_mut() {
            Some((_, commit)) => *commit = Some(resume),
            None => self.committed = resume,
        }
    }

    pub(crate) fn note(&mut self, note: ReadNote) {
        self.notes.push(note);
    }

    /// No more lines: what is queued is the rest.
    pub(crate) fn finish(&mut self) {
        self.done = true;
    }

    /// Damage: said once every complete record before it is handed out.
    pub(crate) fn fail(&mut self, e: ReadError) {
        self.done = true;
        self.failed = Some(e);
    }

    /// The next thing to hand out, or `None` when the reader must read on.
    fn take(&mut self) -> Option<Result<Option<LogItem>, ReadError>> {
        if let Some(h) = self.header.take() {
            return Some(Ok(Some(LogItem::Header(h))));
        }
        if let Some((ev, commit)) = self.queue.pop_front() {
            if let Some(c) = commit {
                self.committed = c;
            }
            return Some(Ok(Some(LogItem::Event(ev))));
        }
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        self.done.then_some(Ok(None))
    }
}

/// A JSONL harness reader: one line (or the end) at a time into its [`Outbox`].
pub(crate) trait Step {
    fn outbox(&mut self) -> &mut Outbox;
    fn outbox_ref(&self) -> &Outbox;
    fn step(&mut self) -> Result<(), ReadError>;
}

/// Every [`Step`] reader is an [`EventSource`](crate::source::EventSource).
impl<S: Step> crate::source::EventSource for S {
    fn next_item(&mut self) -> Result<Option<LogItem>, ReadError> {
        loop {
            if let Some(out) = self.outbox().take() {
                return out;
            }
            if let Err(e) = self.step() {
                self.outbox().fail(e);
            }
        }
    }

    fn resume_point(&self) -> ResumePoint {
        self.outbox_ref().committed
    }

    fn notes(&self) -> &[ReadNote] {
        &self.outbox_ref().notes
    }
}

/// A harness's session header: its id namespaced, the log's cwd, start and version.
pub(crate) fn header(
    harness: crate::source::Harness,
    id: &str,
    cwd: Option<String>,
    created_at: Option<i64>,
    version: Option<String>,
) -> crate::session::Header {
    crate::session::Header {
        id: format!("{}{id}", harness.session_prefix()),
        created_at,
        cwd,
        origin: version,
        ..crate::session::Header::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_torn_tail_and_cap() {
        let data = b"ab\n\nlong-line\nxy";
        let mut l = Lines::new(&data[..], 0, 4);
        assert_eq!(l.next_line().unwrap(), Next::Line { start: 0 });
        assert_eq!(l.line(), b"ab");
        assert_eq!(l.next_line().unwrap(), Next::Line { start: 3 });
        assert_eq!(l.line(), b"");
        assert_eq!(l.next_line().unwrap(), Next::TooLong { start: 4 });
        assert_eq!(l.offset(), 14);
        assert_eq!(l.next_line().unwrap(), Next::Torn { start: 14 });
        assert_eq!(l.offset(), 14);
    }

    #[test]
    fn a_byte_order_mark_opening_the_file_is_not_part_of_its_first_line() {
        let data = b"\xef\xbb\xbf{\"a\":1}\n\xef\xbb\xbf{}\n";
        let mut l = Lines::new(&data[..], 0, 64);
        assert_eq!(l.next_line().unwrap(), Next::Line { start: 0 });
        assert_eq!(l.line(), b"{\"a\":1}");
        // Offsets stay the file's; a mark later in the file is the line's (not JSON).
        assert_eq!(l.next_line().unwrap(), Next::Line { start: 11 });
        assert_eq!(l.line(), b"\xef\xbb\xbf{}");
        // Resumed past the start, nothing is stripped.
        let mut resumed = Lines::new(&data[11..], 11, 64);
        assert_eq!(resumed.next_line().unwrap(), Next::Line { start: 11 });
        assert_eq!(resumed.line(), b"\xef\xbb\xbf{}");
    }
}

//! The byte half of the log reader: a log file's bytes → its lines, each with the resume
//! offset it reaches (zstd frames walked on disk before they are decoded, plain lines
//! split). [`super::LogReader`] parses what this yields.
//!
//! A [`LineSource`] runs on the reader's own thread, or — for a long one-pass read, the
//! archive's — on a thread of its own ([`Ahead`]), handing lines over in batches through a
//! bounded channel: decoding then runs beside parsing on a second core, as the two
//! processes of `zstd -dc | parse` do. Both yield the same pieces in the same order, so
//! what the reader makes of them is the same.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

use super::{open_regular, ReadError};
use crate::session::frames::{scan_frame, FrameScan};

/// Bytes read from the file, and decoded, per step.
pub(super) const IO_CHUNK: usize = 64 * 1024;
/// The largest zstd window accepted (2^27 = 128 MiB, zstd's default decoding limit).
const MAX_WINDOW_LOG: u32 = 27;
/// The frame scanner's buffer: frame and block headers of many small frames per read.
const SCAN_BUFFER: usize = 64 * 1024;
/// After a long line, the line buffer is given back down to this size.
const KEPT_LINE_CAPACITY: usize = 1 << 20;
/// A batch handed to the parsing thread is closed once it holds this many bytes of lines
/// (one channel hand-off per batch, not per line: a log has tens of thousands of lines).
const BATCH_BYTES: usize = 256 * 1024;
/// … or this many pieces (a log of tiny lines).
const BATCH_PIECES: usize = 1024;
/// Batches decoded ahead of the parser: memory stays a few batches whatever the log size.
const BATCHES_AHEAD: usize = 2;

/// What the source hands on next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Piece {
    /// A complete line (without its `\n`) is in hand. `boundary` is the resume offset
    /// reached once it is delivered (`None` when it is not the last line of its frame).
    Line { boundary: Option<u64> },
    /// No line, but the resume point moves here once everything before is delivered (a
    /// frame whose last line was handed on before its end was known, a skippable frame).
    Commit(u64),
}

/// A log file read into lines, with bounded memory (see [`super`]).
pub(super) struct LineSource {
    path: PathBuf,
    file: File,
    zstd: Option<ZstdState>,
    /// Raw file bytes; `in_buf[in_pos..in_len]` not yet consumed.
    in_buf: Vec<u8>,
    in_pos: usize,
    in_len: usize,
    /// File offset just past `in_buf[..in_len]`.
    read_offset: u64,
    /// Lines kept for a batch, then the line being assembled from `line_start` (never
    /// longer than `max_line_bytes`).
    line_buf: Vec<u8>,
    line_start: usize,
    max_line_bytes: usize,
    /// Where the last piece handed on left the resume point: a torn plain line starts there.
    last_boundary: u64,
    /// The log ends in a torn frame or line at this offset (known at the end).
    torn: Option<u64>,
}

struct ZstdState {
    decoder: Decoder<'static>,
    /// A second handle for walking frame headers ahead of the decoder.
    scanner: BufReader<File>,
    /// Where `scanner` stands, when known (each scan goes on from the last one's end).
    scanner_pos: Option<u64>,
    /// The file's length as last looked at: frames are scanned against it, and it is
    /// looked at again only when a scan reaches it (one `fstat` per end, not per frame).
    known_len: u64,
    /// Decoded bytes; `out_buf[out_pos..out_len]` not yet split into lines.
    out_buf: Vec<u8>,
    out_pos: usize,
    out_len: usize,
    frame: Option<Frame>,
}

/// The frame being decoded: complete on disk, ending at `end`.
struct Frame {
    start: u64,
    end: u64,
    /// The decoder reported the frame's end: `out_buf` holds its last bytes.
    decoded_all: bool,
}

/// Which buffer [`LineSource::append_to_line`] copies from.
#[derive(Clone, Copy)]
enum Source {
    Raw,
    Decoded,
}

impl LineSource {
    /// Open `path` (zstd if the name ends in `.zstd`, else plain) at `byte_offset`.
    pub(super) fn open(
        path: &Path,
        byte_offset: u64,
        max_line_bytes: usize,
    ) -> Result<Self, ReadError> {
        let io_err = |source| ReadError::Io {
            file: path.to_path_buf(),
            source,
        };
        let mut file = open_regular(path)?;
        let len = file.metadata().map_err(io_err)?.len();
        if byte_offset > len {
            return Err(io_err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "resume offset {byte_offset} is past the end of the file ({len} bytes): the log was truncated or replaced; read it again from the start"
                ),
            )));
        }
        file.seek(SeekFrom::Start(byte_offset)).map_err(io_err)?;
        let zstd = if path.extension().is_some_and(|e| e == "zstd") {
            let mut decoder = Decoder::new().map_err(io_err)?;
            decoder
                .set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG))
                .map_err(io_err)?;
            let scanner = BufReader::with_capacity(SCAN_BUFFER, open_regular(path)?);
            Some(ZstdState {
                decoder,
                scanner,
                scanner_pos: None,
                known_len: 0,
                out_buf: vec![0; IO_CHUNK],
                out_pos: 0,
                out_len: 0,
                frame: None,
            })
        } else {
            None
        };
        Ok(LineSource {
            path: path.to_path_buf(),
            file,
            zstd,
            in_buf: vec![0; IO_CHUNK],
            in_pos: 0,
            in_len: 0,
            read_offset: byte_offset,
            line_buf: Vec::new(),
            line_start: 0,
            max_line_bytes,
            last_boundary: byte_offset,
            torn: None,
        })
    }

    /// The next piece; `Ok(None)` at the end of complete data ([`LineSource::torn`] then
    /// says whether a torn frame or line was left). A line's bytes are [`LineSource::line`]
    /// until [`LineSource::clear_line`] or [`LineSource::keep_line`]. A line past the cap is
    /// [`ReadError::LineTooLong`] with no `after_seq`: only the parser knows it.
    pub(super) fn next(&mut self) -> Result<Option<Piece>, ReadError> {
        let piece = if self.zstd.is_some() {
            self.next_zstd_piece()?
        } else {
            self.next_plain_line()?
                .map(|at| Piece::Line { boundary: Some(at) })
        };
        match piece {
            Some(Piece::Line { boundary: Some(at) }) | Some(Piece::Commit(at)) => {
                self.last_boundary = at
            }
            _ => {}
        }
        Ok(piece)
    }

    /// The line just handed on.
    pub(super) fn line(&self) -> &[u8] {
        &self.line_buf[self.line_start..]
    }

    /// Done with the line just handed on: forget it (a long one's buffer is given back).
    pub(super) fn clear_line(&mut self) {
        self.line_buf.truncate(self.line_start);
        if self.line_start == 0 && self.line_buf.capacity() > KEPT_LINE_CAPACITY {
            self.line_buf.shrink_to(KEPT_LINE_CAPACITY);
        }
    }

    /// Keep the line just handed on in the buffer, after the lines kept before it: a batch.
    fn keep_line(&mut self) {
        self.line_start = self.line_buf.len();
    }

    /// The kept lines' bytes, the buffer starting afresh as `spare` (emptied).
    fn take_kept(&mut self, mut spare: Vec<u8>) -> Vec<u8> {
        spare.clear();
        if spare.capacity() > KEPT_LINE_CAPACITY.max(2 * BATCH_BYTES) {
            spare.shrink_to(BATCH_BYTES);
        }
        self.line_start = 0;
        std::mem::replace(&mut self.line_buf, spare)
    }

    /// Where the log's torn last frame or line starts, once [`LineSource::next`] ended.
    pub(super) fn torn(&self) -> Option<u64> {
        self.torn
    }

    fn io_error(&self, source: io::Error) -> ReadError {
        ReadError::Io {
            file: self.path.clone(),
            source,
        }
    }

    /// File offset of the next unconsumed raw byte.
    fn consumed_offset(&self) -> u64 {
        self.read_offset - (self.in_len - self.in_pos) as u64
    }

    /// Add to the line being assembled, refusing to pass the cap. Capacity never grows
    /// past the cap either (no doubling beyond it).
    fn append_to_line(
        &mut self,
        bytes_from: Source,
        start: usize,
        end: usize,
    ) -> Result<(), ReadError> {
        let add = end - start;
        let needed = self.line_buf.len() - self.line_start + add;
        if needed > self.max_line_bytes {
            return Err(ReadError::LineTooLong {
                file: self.path.clone(),
                after_seq: None,
                limit: self.max_line_bytes,
            });
        }
        if self.line_start + needed > self.line_buf.capacity() {
            let target = (self.line_start + needed)
                .max(self.line_buf.capacity() * 2)
                .min(self.line_start + self.max_line_bytes);
            self.line_buf.reserve_exact(target - self.line_buf.len());
        }
        let bytes = match bytes_from {
            Source::Raw => &self.in_buf[start..end],
            Source::Decoded => match &self.zstd {
                Some(z) => &z.out_buf[start..end],
                None => &[],
            },
        };
        self.line_buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Read more raw bytes (at most up to `limit` when given). Returns the count; 0 at EOF.
    fn fill(&mut self, limit: Option<u64>) -> Result<usize, ReadError> {
        let want = match limit {
            Some(end) => usize::try_from(end.saturating_sub(self.read_offset))
                .unwrap_or(usize::MAX)
                .min(IO_CHUNK),
            None => IO_CHUNK,
        };
        let n = loop {
            match self.file.read(&mut self.in_buf[..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io_error(e)),
            }
        };
        self.in_pos = 0;
        self.in_len = n;
        self.read_offset += n as u64;
        Ok(n)
    }

    /// The next plain line's boundary; `None` at the end of complete data.
    fn next_plain_line(&mut self) -> Result<Option<u64>, ReadError> {
        loop {
            if self.in_pos < self.in_len {
                let (start, len) = (self.in_pos, self.in_len);
                if let Some(i) = memchr::memchr(b'\n', &self.in_buf[start..len]) {
                    self.append_to_line(Source::Raw, start, start + i)?;
                    self.in_pos = start + i + 1;
                    return Ok(Some(self.consumed_offset()));
                }
                self.append_to_line(Source::Raw, start, len)?;
                self.in_pos = len;
            }
            if self.fill(None)? == 0 {
                if self.line_buf.len() > self.line_start {
                    // Every earlier line was handed on, so the torn line starts there.
                    self.torn = Some(self.last_boundary);
                    self.line_buf.truncate(self.line_start);
                }
                return Ok(None);
            }
        }
    }

    fn next_zstd_piece(&mut self) -> Result<Option<Piece>, ReadError> {
        loop {
            let (out_pos, out_len, frame_state) = match &self.zstd {
                Some(z) => (
                    z.out_pos,
                    z.out_len,
                    z.frame.as_ref().map(|f| (f.end, f.decoded_all)),
                ),
                None => return Ok(None),
            };
            if out_pos < out_len {
                let newline = self
                    .zstd
                    .as_ref()
                    .and_then(|z| memchr::memchr(b'\n', &z.out_buf[out_pos..out_len]));
                let taken_to = newline.map_or(out_len, |i| out_pos + i);
                self.append_to_line(Source::Decoded, out_pos, taken_to)?;
                let new_pos = newline.map_or(out_len, |_| taken_to + 1);
                let Some(z) = self.zstd.as_mut() else {
                    return Ok(None);
                };
                z.out_pos = new_pos;
                if newline.is_none() {
                    continue;
                }
                let boundary = match frame_state {
                    Some((end, true)) if new_pos == out_len => {
                        z.frame = None;
                        Some(end)
                    }
                    _ => None,
                };
                return Ok(Some(Piece::Line { boundary }));
            }
            match frame_state {
                Some((end, true)) => {
                    if let Some(z) = self.zstd.as_mut() {
                        z.frame = None;
                    }
                    if self.line_buf.len() > self.line_start {
                        // The writer left out the last `\n`: the frame's end ends the line.
                        return Ok(Some(Piece::Line {
                            boundary: Some(end),
                        }));
                    }
                    return Ok(Some(Piece::Commit(end)));
                }
                Some((_, false)) => self.decode_step()?,
                None => match self.start_frame()? {
                    FrameStart::Decoding => {}
                    FrameStart::Skipped(end) => return Ok(Some(Piece::Commit(end))),
                    FrameStart::End => return Ok(None),
                },
            }
        }
    }

    /// At a frame boundary: check the next frame is complete on disk and set up to decode
    /// it.
    fn start_frame(&mut self) -> Result<FrameStart, ReadError> {
        let at = self.consumed_offset();
        let path = self.path.clone();
        let Some(z) = self.zstd.as_mut() else {
            return Ok(FrameStart::End);
        };
        let io = |source| ReadError::Io {
            file: path.clone(),
            source,
        };
        let mut scanned =
            scan_frame(&mut z.scanner, at, z.known_len, &mut z.scanner_pos).map_err(io)?;
        if matches!(scanned, FrameScan::EndOfFile | FrameScan::Torn) {
            // The file as last looked at ends here: look again (it may have grown, or
            // shrunk), and read what is there afresh, not from the scanner's buffer.
            let len = z.scanner.get_ref().metadata().map_err(io)?.len();
            z.scanner_pos = None;
            if len != z.known_len {
                z.known_len = len;
                scanned = scan_frame(&mut z.scanner, at, len, &mut z.scanner_pos).map_err(io)?;
            }
        }
        match scanned {
            FrameScan::EndOfFile => Ok(FrameStart::End),
            FrameScan::Torn => {
                self.torn = Some(at);
                Ok(FrameStart::End)
            }
            FrameScan::Corrupt(detail) => Err(ReadError::CorruptFrame {
                file: path,
                at,
                detail,
            }),
            FrameScan::Complete {
                end,
                skippable: true,
            } => {
                self.file
                    .seek(SeekFrom::Start(end))
                    .map_err(|e| self.io_error(e))?;
                self.read_offset = end;
                self.in_pos = 0;
                self.in_len = 0;
                Ok(FrameStart::Skipped(end))
            }
            FrameScan::Complete {
                end,
                skippable: false,
            } => {
                z.decoder.reinit().map_err(|e| ReadError::CorruptFrame {
                    file: path,
                    at,
                    detail: e.to_string(),
                })?;
                z.frame = Some(Frame {
                    start: at,
                    end,
                    decoded_all: false,
                });
                Ok(FrameStart::Decoding)
            }
        }
    }

    /// Decode one step of the current frame into `out_buf`.
    fn decode_step(&mut self) -> Result<(), ReadError> {
        let Some((start, end)) = self
            .zstd
            .as_ref()
            .and_then(|z| z.frame.as_ref())
            .map(|f| (f.start, f.end))
        else {
            return Ok(());
        };
        if self.in_pos == self.in_len && self.read_offset < end && self.fill(Some(end))? == 0 {
            return Err(self.io_error(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the file shrank while the frame at byte {start} was being read"),
            )));
        }
        let path = self.path.clone();
        let corrupt = |detail: String| ReadError::CorruptFrame {
            file: path.clone(),
            at: start,
            detail,
        };
        let Some(z) = self.zstd.as_mut() else {
            return Ok(());
        };
        let mut input = InBuffer::around(&self.in_buf[self.in_pos..self.in_len]);
        let mut output = OutBuffer::around(&mut z.out_buf[..]);
        let hint = z
            .decoder
            .run(&mut input, &mut output)
            .map_err(|e| corrupt(format!("decoder: {e}")))?;
        let (consumed, produced) = (input.pos(), output.pos());
        z.out_pos = 0;
        z.out_len = produced;
        self.in_pos += consumed;
        let at = self.consumed_offset();
        let Some(z) = self.zstd.as_mut() else {
            return Ok(());
        };
        if hint == 0 {
            if at != end {
                return Err(corrupt(format!(
                    "the decoder ended the frame at byte {at}, its blocks end at {end}"
                )));
            }
            if let Some(frame) = z.frame.as_mut() {
                frame.decoded_all = true;
            }
        } else if at == end && consumed == 0 && produced == 0 {
            // All of the frame is in and the decoder can make no progress: it wants bytes
            // past the frame's end.
            return Err(corrupt(
                "the frame's data ends before the decoder is done".to_owned(),
            ));
        }
        Ok(())
    }

    #[cfg(test)]
    pub(super) fn line_buf_capacity(&self) -> usize {
        self.line_buf.capacity()
    }

    #[cfg(test)]
    pub(super) fn read_offset(&self) -> u64 {
        self.read_offset
    }
}

/// What [`LineSource::start_frame`] found at a frame boundary.
enum FrameStart {
    /// A complete frame, set up to decode.
    Decoding,
    /// A complete skippable frame, passed; it ends here.
    Skipped(u64),
    /// The end of complete data (a clean end, or a torn last frame noted in `torn`).
    End,
}

/// A piece of a batch: a line's bytes in the batch, or a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Batched {
    Line {
        bytes: Range<usize>,
        boundary: Option<u64>,
    },
    Commit(u64),
}

/// Lines decoded on the source's thread, in order.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    pieces: Vec<Batched>,
    /// The last batch: how the source ended (its torn offset, or its error).
    end: Option<Result<Option<u64>, ReadError>>,
}

/// A [`LineSource`] running on a thread of its own, a few batches ahead of the caller.
/// Dropping it stops the thread at its next hand-off.
pub(super) struct Ahead {
    from: Receiver<Batch>,
    /// Joined on drop, so no decoding outlives its reader.
    thread: Option<std::thread::JoinHandle<()>>,
    /// Emptied batches go back to the source thread (no allocation per batch).
    spares: SyncSender<Batch>,
    batch: Batch,
    next: usize,
    ended: bool,
}

/// What [`Ahead::next`] hands on: as [`LineSource::next`], a line's bytes given by range.
pub(super) enum AheadPiece {
    Piece(Batched),
    /// The end of complete data, and where a torn frame or line starts.
    End {
        torn: Option<u64>,
    },
}

impl Ahead {
    pub(super) fn start(source: LineSource) -> Result<Ahead, ReadError> {
        let (to_reader, from) = sync_channel(BATCHES_AHEAD);
        let (spares, from_reader) = sync_channel(BATCHES_AHEAD + 1);
        let path = source.path.clone();
        let thread = std::thread::Builder::new()
            .name("log-decode".into())
            .spawn(move || produce(source, &to_reader, &from_reader))
            .map_err(|source| ReadError::Io { file: path, source })?;
        Ok(Ahead {
            from,
            thread: Some(thread),
            spares,
            batch: Batch::default(),
            next: 0,
            ended: false,
        })
    }

    /// The next piece, or the end; an error of the source ends it too.
    pub(super) fn next(&mut self, path: &Path) -> Result<AheadPiece, ReadError> {
        loop {
            if let Some(piece) = self.batch.pieces.get(self.next) {
                self.next += 1;
                return Ok(AheadPiece::Piece(piece.clone()));
            }
            if let Some(end) = self.batch.end.take() {
                self.ended = true;
                return end.map(|torn| AheadPiece::End { torn });
            }
            if self.ended {
                return Ok(AheadPiece::End { torn: None });
            }
            let Ok(batch) = self.from.recv() else {
                self.ended = true;
                return Err(ReadError::Io {
                    file: path.to_path_buf(),
                    source: io::Error::other("the log's decoding thread stopped"),
                });
            };
            let used = std::mem::replace(&mut self.batch, batch);
            self.next = 0;
            let _ = self.spares.try_send(used);
        }
    }

    /// The bytes of a line [`Ahead::next`] handed on (until the next call).
    pub(super) fn line(&self, bytes: Range<usize>) -> &[u8] {
        &self.batch.bytes[bytes]
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        // Stop listening first: the source thread's next hand-off fails and it returns.
        let (_, closed) = sync_channel(0);
        drop(std::mem::replace(&mut self.from, closed));
        if let Some(thread) = self.thread.take() {
            // A panic there was already reported as the channel closing.
            let _ = thread.join();
        }
    }
}

/// The source thread: read pieces into batches and hand each on when full, then the end.
fn produce(mut source: LineSource, to_reader: &SyncSender<Batch>, spares: &Receiver<Batch>) {
    let mut pieces = Vec::new();
    let mut start = 0;
    loop {
        let end = match source.next() {
            Ok(Some(Piece::Line { boundary })) => {
                let end = source.line_buf.len();
                pieces.push(Batched::Line {
                    bytes: start..end,
                    boundary,
                });
                source.keep_line();
                start = end;
                None
            }
            Ok(Some(Piece::Commit(at))) => {
                pieces.push(Batched::Commit(at));
                None
            }
            Ok(None) => Some(Ok(source.torn())),
            Err(e) => Some(Err(e)),
        };
        let last = end.is_some();
        if last || start >= BATCH_BYTES || pieces.len() >= BATCH_PIECES {
            let spare = spares.try_recv().unwrap_or_default();
            let mut spare_pieces = spare.pieces;
            spare_pieces.clear();
            let batch = Batch {
                bytes: source.take_kept(spare.bytes),
                pieces: std::mem::replace(&mut pieces, spare_pieces),
                end,
            };
            start = 0;
            // The reader stopped listening (it failed or was dropped): stop too.
            if to_reader.send(batch).is_err() || last {
                return;
            }
        }
    }
}

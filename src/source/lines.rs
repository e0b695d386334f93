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

fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
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
}

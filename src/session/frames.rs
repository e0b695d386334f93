//! Walking the structure of one zstd frame (RFC 8878 §3.1) without decoding it, so the
//! reader knows a frame is complete on disk *before* it delivers any of its lines: a torn
//! last frame then yields nothing, and the resume point can stay at its start.
//!
//! Only headers are read (frame header, 3-byte block headers, skippable-frame size); block
//! contents are skipped by seeking within the scanner's buffer, so a log of many small
//! frames (one per event, as the harness writes them) costs one read per buffer of frames,
//! not a seek and a read per block.

use std::io::{self, BufReader, Read, Seek, SeekFrom};

const ZSTD_MAGIC: u32 = 0xFD2F_B528;
const SKIPPABLE_MAGIC_MASK: u32 = 0xFFFF_FFF0;
const SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
/// Block_Maximum_Size: no block may carry more than 128 KiB.
const MAX_BLOCK_SIZE: u64 = 128 * 1024;

/// What lies at one offset of a zstd log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrameScan {
    /// The offset is the end of the file: nothing more to read.
    EndOfFile,
    /// The file ends inside this frame.
    Torn,
    /// A complete frame ends at `end` (exclusive). `skippable` frames carry no data.
    Complete { end: u64, skippable: bool },
    /// Not a frame: bad magic or a reserved field set.
    Corrupt(String),
}

/// Scan the frame starting at `at`, given the file's current length `len` (bytes past
/// `len` are treated as absent even if the file grows meanwhile: a later read sees them).
/// `pos` is where `r` stands when known (as the last scan left it; `None` else): the scan
/// moves from there within the buffer, and leaves it where it stopped.
pub(crate) fn scan_frame<R: Read + Seek>(
    r: &mut BufReader<R>,
    at: u64,
    len: u64,
    pos: &mut Option<u64>,
) -> io::Result<FrameScan> {
    if at >= len {
        return Ok(FrameScan::EndOfFile);
    }
    let known = pos.take();
    let delta = known.and_then(|p| i64::try_from(at).ok()?.checked_sub(i64::try_from(p).ok()?));
    match delta {
        Some(delta) => r.seek_relative(delta)?,
        None => {
            r.seek(SeekFrom::Start(at))?;
        }
    }
    let mut cur = Cursor {
        r,
        pos: at,
        len,
        lost: false,
    };
    let scanned = scan_from(&mut cur)?;
    if !cur.lost {
        *pos = Some(cur.pos);
    }
    Ok(scanned)
}

fn scan_from<R: Read + Seek>(cur: &mut Cursor<'_, R>) -> io::Result<FrameScan> {
    let Some(magic) = cur.read::<4>()? else {
        return Ok(FrameScan::Torn);
    };
    let magic = u32::from_le_bytes(magic);
    if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC {
        let Some(size) = cur.read::<4>()? else {
            return Ok(FrameScan::Torn);
        };
        if !cur.skip(u64::from(u32::from_le_bytes(size)))? {
            return Ok(FrameScan::Torn);
        }
        return Ok(FrameScan::Complete {
            end: cur.pos,
            skippable: true,
        });
    }
    if magic != ZSTD_MAGIC {
        return Ok(FrameScan::Corrupt(format!(
            "bad magic number {magic:#010x}"
        )));
    }
    let Some([descriptor]) = cur.read::<1>()? else {
        return Ok(FrameScan::Torn);
    };
    if descriptor & 0x08 != 0 {
        return Ok(FrameScan::Corrupt(
            "reserved bit set in the frame header".to_owned(),
        ));
    }
    let single_segment = descriptor & 0x20 != 0;
    let has_checksum = descriptor & 0x04 != 0;
    let dictionary_id_len = [0u64, 1, 2, 4][usize::from(descriptor & 0x03)];
    let content_size_len = match descriptor >> 6 {
        0 => u64::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let window_descriptor_len = u64::from(!single_segment);
    if !cur.skip(window_descriptor_len + dictionary_id_len + content_size_len)? {
        return Ok(FrameScan::Torn);
    }
    loop {
        let Some(header) = cur.read::<3>()? else {
            return Ok(FrameScan::Torn);
        };
        let header = u32::from(header[0]) | u32::from(header[1]) << 8 | u32::from(header[2]) << 16;
        let last = header & 1 != 0;
        let block_type = (header >> 1) & 0x03;
        let block_size = u64::from(header >> 3);
        if block_size > MAX_BLOCK_SIZE {
            return Ok(FrameScan::Corrupt(format!(
                "block of {block_size} bytes exceeds 128 KiB"
            )));
        }
        let stored = match block_type {
            0 | 2 => block_size, // raw or compressed: the bytes follow
            1 => 1,              // RLE: one byte repeated block_size times
            _ => return Ok(FrameScan::Corrupt("reserved block type".to_owned())),
        };
        if !cur.skip(stored)? {
            return Ok(FrameScan::Torn);
        }
        if last {
            break;
        }
    }
    if has_checksum && !cur.skip(4)? {
        return Ok(FrameScan::Torn);
    }
    Ok(FrameScan::Complete {
        end: cur.pos,
        skippable: false,
    })
}

struct Cursor<'a, R> {
    r: &'a mut BufReader<R>,
    /// Where `r` stands (unless `lost`).
    pos: u64,
    len: u64,
    /// A read stopped short (the file shrank): where `r` stands is not known.
    lost: bool,
}

impl<R: Read + Seek> Cursor<'_, R> {
    /// `None` when the file (as of `len`) ends before `N` more bytes.
    fn read<const N: usize>(&mut self) -> io::Result<Option<[u8; N]>> {
        if self.len - self.pos < N as u64 {
            return Ok(None);
        }
        let mut buf = [0u8; N];
        match self.r.read_exact(&mut buf) {
            Ok(()) => {}
            // The file shrank under us: treat it like a torn tail.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.lost = true;
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        self.pos += N as u64;
        Ok(Some(buf))
    }

    /// `false` when the file (as of `len`) ends before `n` more bytes.
    fn skip(&mut self, n: u64) -> io::Result<bool> {
        if self.len - self.pos < n {
            return Ok(false);
        }
        let step = i64::try_from(n).map_err(|_| io::Error::other("skip beyond i64 range"))?;
        self.r.seek_relative(step)?;
        self.pos += n;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor as IoCursor;

    fn scan(bytes: &[u8], at: u64) -> FrameScan {
        let mut r = BufReader::with_capacity(64, IoCursor::new(bytes));
        scan_frame(&mut r, at, bytes.len() as u64, &mut None).unwrap()
    }

    fn frame(data: &[u8]) -> Vec<u8> {
        zstd::bulk::compress(data, 3).unwrap()
    }

    #[test]
    fn complete_frames_back_to_back() {
        let a = frame(b"{\"type\":\"session\"}\n");
        let b = frame(&vec![b'x'; 400_000]);
        let mut file = a.clone();
        file.extend_from_slice(&b);
        let total = file.len() as u64;
        assert_eq!(
            scan(&file, 0),
            FrameScan::Complete {
                end: a.len() as u64,
                skippable: false
            }
        );
        assert_eq!(
            scan(&file, a.len() as u64),
            FrameScan::Complete {
                end: total,
                skippable: false
            }
        );
        assert_eq!(scan(&file, total), FrameScan::EndOfFile);
    }

    #[test]
    fn streamed_frame_with_checksum_and_many_blocks() {
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
        enc.include_checksum(true).unwrap();
        let data: Vec<u8> = (0..1_000_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::io::Write::write_all(&mut enc, &data).unwrap();
        let bytes = enc.finish().unwrap();
        assert_eq!(
            scan(&bytes, 0),
            FrameScan::Complete {
                end: bytes.len() as u64,
                skippable: false
            }
        );
    }

    #[test]
    fn scans_that_go_on_from_where_the_last_stopped_agree_with_fresh_ones() {
        let mut file = Vec::new();
        let mut starts = Vec::new();
        for i in 0..40usize {
            starts.push(file.len() as u64);
            file.extend_from_slice(&frame(&vec![b'a' + (i % 26) as u8; 10 + i * 997]));
        }
        let len = file.len() as u64;
        // A small buffer: some frames start inside it, some past it.
        let mut r = BufReader::with_capacity(256, IoCursor::new(&file[..]));
        let mut pos = None;
        // Forward, then backwards and skipping about: each as a fresh scan says.
        let order = (0..starts.len()).chain([3, 1, 39, 0, 20, 20]);
        for i in order {
            let fresh = scan(&file, starts[i]);
            assert_eq!(scan_frame(&mut r, starts[i], len, &mut pos).unwrap(), fresh);
            let FrameScan::Complete { end, .. } = fresh else {
                panic!("frame {i}: {fresh:?}");
            };
            assert_eq!(pos, Some(end));
        }
        assert_eq!(
            scan_frame(&mut r, len, len, &mut pos).unwrap(),
            FrameScan::EndOfFile
        );
        // Told a shorter length (the file as it was), the last frame is torn.
        let cut = len - 2;
        assert_eq!(
            scan_frame(&mut r, starts[39], cut, &mut pos).unwrap(),
            FrameScan::Torn
        );
    }

    #[test]
    fn every_truncation_is_torn() {
        let bytes = frame(&vec![b'y'; 300_000]);
        for cut in 1..bytes.len() {
            assert_eq!(scan(&bytes[..cut], 0), FrameScan::Torn, "cut at {cut}");
        }
    }

    #[test]
    fn skippable_frame() {
        let mut bytes = 0x184D_2A53u32.to_le_bytes().to_vec();
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(b"abc");
        assert_eq!(
            scan(&bytes, 0),
            FrameScan::Complete {
                end: 11,
                skippable: true
            }
        );
        assert_eq!(scan(&bytes[..10], 0), FrameScan::Torn);
    }

    #[test]
    fn garbage_is_corrupt() {
        assert!(matches!(
            scan(b"{\"type\":\"session\"}\n", 0),
            FrameScan::Corrupt(_)
        ));
        let mut bad = frame(b"hello");
        bad[4] |= 0x08; // reserved bit
        assert!(matches!(scan(&bad, 0), FrameScan::Corrupt(_)));
    }

    #[test]
    fn reserved_block_type_is_corrupt() {
        // Magic, descriptor (single segment, 1-byte content size), size, then a block
        // header with type 3.
        let mut bytes = ZSTD_MAGIC.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0x20, 5]);
        bytes.extend_from_slice(&[0b0000_0111, 0, 0]);
        assert!(matches!(scan(&bytes, 0), FrameScan::Corrupt(_)));
    }
}

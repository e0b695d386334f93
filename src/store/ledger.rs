//! The one reader/appender of every JSONL ledger (collections, later curation facts):
//! a version on every line, a torn last line skipped with a note (and cut before the
//! next append), a corrupt middle line refused by name and never appended past,
//! byte-identical duplicate lines read once. OWNER: store helper.
//!
//! Appends are not serialized here: callers of a collection append hold the store's
//! collections lock (`store::lock::CollectionsLock`), so no other signer can slip a line
//! between the validating read and the append.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::redact::Redacted;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct LedgerRead {
    pub lines: Vec<serde_json::Value>,
    /// Set when the last line was torn (a killed write) and skipped.
    pub torn_tail: Option<String>,
    pub duplicates_skipped: u64,
    /// False when the file does not exist: absence is stated, never read as "zero lines".
    pub exists: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("{file}: line {line} is corrupt ({detail}); the ledger is damaged in the middle — refusing to read past or append to it. Restore the line from git or a backup")]
    CorruptLine {
        file: PathBuf,
        line: u64,
        detail: String,
    },
    #[error("{file}: line {line} has format version {version}, newer than this program reads ({known}); upgrade dsh-chapters")]
    UnknownVersion {
        file: PathBuf,
        line: u64,
        version: u64,
        known: u64,
    },
    #[error("refusing to append to {file}: {detail} (a bug in the caller; nothing was written)")]
    InvalidLine { file: PathBuf, detail: String },
    #[error("{file}: {source}")]
    Io {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file} is {kind}, not a regular file; a ledger is a file this program writes — move it aside")]
    NotARegularFile { file: PathBuf, kind: &'static str },
}

/// How the file ends, which decides what an append must do first.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tail {
    /// Empty, or the last byte is `\n`.
    Clean,
    /// A valid last line without its `\n` (e.g. a hand edit): terminate it, keep it.
    Unterminated,
    /// A last line that does not parse and has no `\n`: a killed write. Cut back to
    /// `committed_len` bytes, the end of the last whole line.
    Torn { committed_len: u64 },
}

struct Scan {
    read: LedgerRead,
    tail: Tail,
}

fn io_err(file: &Path, source: io::Error) -> LedgerError {
    LedgerError::Io {
        file: file.to_path_buf(),
        source,
    }
}

/// Say why a value about to be written is not a ledger line, if it is not one: checked as
/// the value it is, not by parsing back the text it is written as (the text of a JSON value
/// parses back to that value).
fn check_value(value: &serde_json::Value, known_version: u64) -> Result<(), LineFault> {
    version_of(value, known_version, Unversioned::Refused).map(|_| ())
}

/// What a line without `v` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unversioned {
    /// A bad line: every line this program writes carries its version.
    Refused,
    /// Version 0: a file the original TypeScript plugin wrote (its curation lines carry no
    /// version); the caller reads its shape.
    Plugin,
}

fn check_line_as(
    bytes: &[u8],
    known_version: u64,
    unversioned: Unversioned,
) -> Result<serde_json::Value, LineFault> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| LineFault::Bad(e.to_string()))?;
    version_of(&value, known_version, unversioned)?;
    Ok(value)
}

/// A line's format version, if it is a ledger line this program may read.
fn version_of(
    value: &serde_json::Value,
    known_version: u64,
    unversioned: Unversioned,
) -> Result<u64, LineFault> {
    let Some(object) = value.as_object() else {
        return Err(LineFault::Bad("not a JSON object".into()));
    };
    let version = match object.get("v") {
        None if unversioned == Unversioned::Plugin => 0,
        v => v
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| LineFault::Bad("no numeric format version `v`".into()))?,
    };
    if version > known_version {
        return Err(LineFault::TooNew(version));
    }
    Ok(version)
}

enum LineFault {
    Bad(String),
    TooNew(u64),
}

fn scan(path: &Path, known_version: u64) -> Result<Scan, LedgerError> {
    let Some(bytes) = read_bytes(path)? else {
        return Ok(Scan {
            read: LedgerRead::default(),
            tail: Tail::Clean,
        });
    };
    scan_bytes(path, &bytes, known_version, 0, Unversioned::Refused)
}

/// A ledger's bytes, `None` when there is no file. Anything but a regular file where a ledger
/// should be (a device behind a symlink would be read forever, a FIFO would block) is
/// refused by name.
fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, LedgerError> {
    use crate::regular_file::NotOpened;
    use std::io::Read as _;
    let mut file = match crate::regular_file::open(path) {
        Ok(file) => file,
        Err(NotOpened::Io(e)) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(NotOpened::Io(e)) => return Err(io_err(path, e)),
        Err(NotOpened::NotRegular(kind)) => {
            return Err(LedgerError::NotARegularFile {
                file: path.to_path_buf(),
                kind,
            })
        }
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| io_err(path, e))?;
    Ok(Some(bytes))
}

/// The rules of [`scan`] over `bytes`, the part of the file after `lines_before` lines
/// (line numbers in notes and errors count from the file's start).
fn scan_bytes(
    path: &Path,
    bytes: &[u8],
    known_version: u64,
    lines_before: u64,
    unversioned: Unversioned,
) -> Result<Scan, LedgerError> {
    let mut read = LedgerRead {
        exists: true,
        ..LedgerRead::default()
    };
    let mut tail = Tail::Clean;
    let mut seen: HashSet<&[u8]> = HashSet::new();
    let mut start = 0usize;
    let mut line_no = lines_before;
    while start < bytes.len() {
        line_no += 1;
        let (end, terminated) = match memchr::memchr(b'\n', &bytes[start..]) {
            Some(i) => (start + i, true),
            None => (bytes.len(), false),
        };
        let line = &bytes[start..end];
        let line_start = start;
        start = end + 1;
        // Blank lines hold no record, so skipping them buries nothing.
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if seen.contains(line) {
            read.duplicates_skipped += 1;
            continue;
        }
        match check_line_as(line, known_version, unversioned) {
            Ok(value) => {
                seen.insert(line);
                read.lines.push(value);
                if !terminated {
                    tail = Tail::Unterminated;
                }
            }
            Err(LineFault::TooNew(version)) => {
                return Err(LedgerError::UnknownVersion {
                    file: path.to_path_buf(),
                    line: line_no,
                    version,
                    known: known_version,
                });
            }
            Err(LineFault::Bad(detail)) if !terminated => {
                read.torn_tail = Some(format!(
                    "{}: the last line (line {line_no}, {} bytes, no final newline) does not parse ({detail}); it is a write that was killed and is skipped",
                    path.display(),
                    line.len()
                ));
                tail = Tail::Torn {
                    committed_len: line_start as u64,
                };
            }
            Err(LineFault::Bad(detail)) => {
                return Err(LedgerError::CorruptLine {
                    file: path.to_path_buf(),
                    line: line_no,
                    detail,
                });
            }
        }
    }
    Ok(Scan { read, tail })
}

/// Read a ledger. Every line must be a JSON object whose numeric `v` is at most
/// `known_version`. A missing file is an empty read with `exists == false`.
pub fn read(path: &Path, known_version: u64) -> Result<LedgerRead, LedgerError> {
    scan(path, known_version).map(|s| s.read)
}

/// [`read`] for a ledger another program may have written: a line without `v` is read as
/// version 0 (the original TypeScript plugin's curation lines carry none) and returned as it
/// is, for the caller to read its shape. Only for reading files of the pool; this program
/// never appends to them.
pub fn read_with_unversioned(path: &Path, known_version: u64) -> Result<LedgerRead, LedgerError> {
    let Some(bytes) = read_bytes(path)? else {
        return Ok(LedgerRead::default());
    };
    scan_bytes(path, &bytes, known_version, 0, Unversioned::Plugin).map(|s| s.read)
}

/// Append one line (the value must carry `v`): one `write` on an O_APPEND file, then fsync.
pub fn append(
    path: &Path,
    line: &Redacted<serde_json::Value>,
    known_version: u64,
) -> Result<(), LedgerError> {
    append_many(path, std::slice::from_ref(line), known_version)
}

/// Append several lines with one write and one fsync (the archive signs many turns at once).
/// Refuses a ledger that is corrupt in the middle; cuts a torn tail first — never buries a hole.
pub fn append_many(
    path: &Path,
    lines: &[Redacted<serde_json::Value>],
    known_version: u64,
) -> Result<(), LedgerError> {
    append_many_after(path, lines, known_version, None).map(drop)
}

/// [`append_many`] for a caller that serializes appenders (the store's collections lock)
/// and knows the ledger was whole at `whole_len` bytes — it wrote or validated them. When
/// the file still has exactly that length, the validating scan of every earlier line is
/// skipped, so an append costs the same at line 10 and at line 100,000; any other length
/// (someone else appended, a hand edit) takes the full scan. Returns the new length.
pub fn append_many_after<I>(
    path: &Path,
    lines: I,
    known_version: u64,
    whole_len: Option<u64>,
) -> Result<u64, LedgerError>
where
    I: IntoIterator,
    I::Item: std::borrow::Borrow<Redacted<serde_json::Value>>,
{
    // Lines may be made as they are written (the signer's batch): each is text before the
    // next exists, so a batch holds its JSON trees one at a time.
    let mut payload = Vec::new();
    for line in lines {
        let value = line.borrow().get();
        if let Err(fault) = check_value(value, known_version) {
            let detail = match fault {
                LineFault::Bad(d) => d,
                LineFault::TooNew(v) => format!("version {v} is newer than {known_version}"),
            };
            return Err(LedgerError::InvalidLine {
                file: path.to_path_buf(),
                detail,
            });
        }
        serde_json::to_writer(&mut payload, value).map_err(|e| LedgerError::InvalidLine {
            file: path.to_path_buf(),
            detail: e.to_string(),
        })?;
        payload.push(b'\n');
    }
    if payload.is_empty() {
        return fs::metadata(path).map_or(Ok(0), |m| Ok(m.len()));
    }

    let current_len = match fs::metadata(path) {
        Ok(m) => Some(m.len()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(path, e)),
    };
    let Scan {
        read: existing,
        tail,
    } = match whole_len {
        Some(len) if current_len == Some(len) => Scan {
            read: LedgerRead {
                exists: true,
                ..LedgerRead::default()
            },
            tail: Tail::Clean,
        },
        _ => scan(path, known_version)?,
    };
    match tail {
        Tail::Clean => {}
        Tail::Unterminated => payload.insert(0, b'\n'),
        Tail::Torn { committed_len } => {
            tracing::warn!(
                file = %path.display(),
                note = existing.torn_tail.as_deref().unwrap_or_default(),
                "cutting a torn last line before appending"
            );
            let file = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| io_err(path, e))?;
            file.set_len(committed_len)
                .and_then(|()| file.sync_data())
                .map_err(|e| io_err(path, e))?;
        }
    }

    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    file.write_all(&payload)
        .and_then(|()| file.sync_data())
        .map_err(|e| io_err(path, e))?;
    let new_len = file.metadata().map_err(|e| io_err(path, e))?.len();
    if !existing.exists {
        // A new file's directory entry must be durable too, or a crash could lose the file.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io_err(dir, e))?;
        }
    }
    Ok(new_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::{RedactionCounts, Redactor};
    use serde_json::json;

    fn redacted(value: serde_json::Value) -> Redacted<serde_json::Value> {
        Redactor::new(&[])
            .unwrap()
            .redact_json(&value, &mut RedactionCounts::default())
    }

    fn ledger(content: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.jsonl");
        fs::write(&p, content).unwrap();
        (dir, p)
    }

    #[test]
    fn another_programs_unversioned_lines_are_version_0_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("curation.jsonl");
        std::fs::write(
            &p,
            "{\"type\":\"topic-alias\",\"from\":\"a\",\"to\":\"b\",\"at\":\"t\"}\n{\"v\":1,\"n\":2}\n",
        )
        .unwrap();
        let got = read_with_unversioned(&p, 1).unwrap();
        assert_eq!(got.lines.len(), 2);
        assert!(got.lines[0].get("v").is_none());
        // The register's own reader still refuses it, by line.
        assert!(matches!(
            read(&p, 1),
            Err(LedgerError::CorruptLine { line: 1, .. })
        ));
        // A newer version is refused either way; a missing file is empty.
        std::fs::write(&p, "{\"v\":9}\n{\"v\":1}\n").unwrap();
        assert!(read_with_unversioned(&p, 1).is_err());
        assert!(
            !read_with_unversioned(&dir.path().join("none"), 1)
                .unwrap()
                .exists
        );
    }

    #[test]
    fn lines_made_as_they_are_written_land_as_a_slice_of_them_would() {
        let (_d1, a) = ledger(b"");
        let (_d2, b) = ledger(b"");
        let made = (1..=3).map(|n| redacted(json!({"v": 1, "n": n})));
        let kept: Vec<_> = (1..=3).map(|n| redacted(json!({"v": 1, "n": n}))).collect();
        append_many_after(&a, made, 1, None).unwrap();
        append_many_after(&b, &kept, 1, None).unwrap();
        assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap());
        assert_eq!(read(&a, 1).unwrap().lines.len(), 3);
        // Nothing to write: the length as it is, no file made.
        let none = a.with_extension("none");
        let empty: Vec<Redacted<serde_json::Value>> = Vec::new();
        assert_eq!(append_many_after(&none, empty, 1, None).unwrap(), 0);
        assert!(!none.exists());
        // A bad line made on the way is refused before anything is written.
        let bad = (0..2).map(|n| redacted(json!({"v": 9, "n": n})));
        assert!(append_many_after(&a, bad, 1, None).is_err());
        assert_eq!(read(&a, 1).unwrap().lines.len(), 3);
    }

    #[test]
    fn an_append_after_a_known_whole_length_skips_the_scan_only_at_that_length() {
        let (_dir, p) = ledger(b"");
        let len = append_many_after(&p, &[redacted(json!({"v": 1, "n": 1}))], 1, None).unwrap();
        assert_eq!(len, fs::metadata(&p).unwrap().len());
        let len =
            append_many_after(&p, &[redacted(json!({"v": 1, "n": 2}))], 1, Some(len)).unwrap();
        assert_eq!(read(&p, 1).unwrap().lines.len(), 2);
        // Another writer left a torn line: the length differs, so the scan runs and cuts it.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"v\":1,\"n\":").unwrap();
        append_many_after(&p, &[redacted(json!({"v": 1, "n": 3}))], 1, Some(len)).unwrap();
        let r = read(&p, 1).unwrap();
        assert_eq!(r.lines.len(), 3);
        assert!(r.torn_tail.is_none());
    }

    #[test]
    fn a_device_or_a_pipe_where_a_ledger_should_be_is_refused_by_name_never_read() {
        let dir = tempfile::tempdir().expect("tmp");
        let zero = dir.path().join("zero.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &zero).expect("symlink");
        // Read whole, `/dev/zero` never ends: refused before any byte.
        match read(&zero, 1) {
            Err(LedgerError::NotARegularFile { kind, .. }) => {
                assert_eq!(kind, "a character device")
            }
            other => panic!("read a device: {other:?}"),
        }
        assert!(append(&zero, &redacted(json!({"v": 1, "a": 1})), 1).is_err());
        let fifo = dir.path().join("fifo.jsonl");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .expect("mkfifo");
        // No writer: an open without O_NONBLOCK would wait forever.
        let err = read_with_unversioned(&fifo, 1).expect_err("a FIFO is no ledger");
        assert!(
            err.to_string()
                .contains("a FIFO (named pipe), not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn missing_file_is_an_empty_read_that_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let r = read(&dir.path().join("absent.jsonl"), 1).unwrap();
        assert!(!r.exists);
        assert!(r.lines.is_empty());
        let (_d, p) = ledger(b"");
        let r = read(&p, 1).unwrap();
        assert!(r.exists && r.lines.is_empty() && r.torn_tail.is_none());
    }

    #[test]
    fn append_then_read_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.jsonl");
        append(&p, &redacted(json!({"v": 1, "turn": 1, "text": "a\nb"})), 1).unwrap();
        append_many(
            &p,
            &[
                redacted(json!({"v": 1, "turn": 2})),
                redacted(json!({"v": 1, "turn": 3})),
            ],
            1,
        )
        .unwrap();
        append_many(&p, &[], 1).unwrap();
        let text = fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(text.ends_with('\n'));
        let r = read(&p, 1).unwrap();
        let turns: Vec<u64> = r
            .lines
            .iter()
            .map(|l| l["turn"].as_u64().unwrap())
            .collect();
        assert_eq!(turns, vec![1, 2, 3]);
        assert_eq!(r.lines[0]["text"], "a\nb");
    }

    #[test]
    fn torn_tail_is_skipped_with_a_note_and_cut_before_the_next_append() {
        let (_d, p) = ledger(b"{\"v\":1,\"turn\":1}\n{\"v\":1,\"tu");
        let r = read(&p, 1).unwrap();
        assert_eq!(r.lines.len(), 1);
        let note = r.torn_tail.expect("a torn tail is noted");
        assert!(
            note.contains("line 2") && note.contains("c.jsonl"),
            "{note}"
        );

        append(&p, &redacted(json!({"v": 1, "turn": 2})), 1).unwrap();
        // serde_json writes object keys sorted.
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            "{\"v\":1,\"turn\":1}\n{\"turn\":2,\"v\":1}\n"
        );
        let r = read(&p, 1).unwrap();
        assert!(r.torn_tail.is_none());
        assert_eq!(r.lines.len(), 2);
    }

    #[test]
    fn torn_first_and_only_line() {
        let (_d, p) = ledger(b"{\"v\":");
        let r = read(&p, 1).unwrap();
        assert!(r.exists && r.lines.is_empty() && r.torn_tail.is_some());
        append(&p, &redacted(json!({"v": 1})), 1).unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "{\"v\":1}\n");
    }

    #[test]
    fn corrupt_middle_is_refused_by_line_and_never_appended_past() {
        let original = b"{\"v\":1,\"a\":1}\ngarbage\n{\"v\":1,\"a\":2}\n".to_vec();
        let (_d, p) = ledger(&original);
        let err = read(&p, 1).unwrap_err();
        assert!(
            matches!(err, LedgerError::CorruptLine { line: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("c.jsonl"), "{err}");
        let err = append(&p, &redacted(json!({"v": 1})), 1).unwrap_err();
        assert!(
            matches!(err, LedgerError::CorruptLine { line: 2, .. }),
            "{err}"
        );
        assert_eq!(
            fs::read(&p).unwrap(),
            original,
            "the refused append changed nothing"
        );
    }

    #[test]
    fn bad_last_line_with_newline_is_corruption_not_a_torn_tail() {
        let (_d, p) = ledger(b"{\"v\":1}\n{\"v\":1,\n");
        assert!(matches!(
            read(&p, 1),
            Err(LedgerError::CorruptLine { line: 2, .. })
        ));
    }

    #[test]
    fn every_kind_of_bad_line_is_named() {
        for (bad, why) in [
            (&b"[1,2]"[..], "not a JSON object"),
            (b"{\"x\":1}", "no numeric"),
            (b"{\"v\":\"1\"}", "no numeric"),
            (b"{\"v\":-1}", "no numeric"),
            (b"\xff\xfe", ""),
            (b"\0\0\0\0", ""),
        ] {
            let mut content = bad.to_vec();
            content.extend_from_slice(b"\n{\"v\":1}\n");
            let (_d, p) = ledger(&content);
            match read(&p, 1) {
                Err(LedgerError::CorruptLine {
                    line: 1, detail, ..
                }) => assert!(detail.contains(why), "{detail}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn duplicate_lines_read_once() {
        let (_d, p) =
            ledger(b"{\"v\":1,\"a\":1}\n{\"v\":1,\"a\":2}\n{\"v\":1,\"a\":1}\n{\"v\":1,\"a\":1}\n");
        let r = read(&p, 1).unwrap();
        assert_eq!(r.lines.len(), 2);
        assert_eq!(r.duplicates_skipped, 2);
    }

    #[test]
    fn too_new_version_is_refused_on_read_and_append() {
        let (_d, p) = ledger(b"{\"v\":1}\n{\"v\":2}\n");
        let err = read(&p, 1).unwrap_err();
        assert!(
            matches!(
                err,
                LedgerError::UnknownVersion {
                    line: 2,
                    version: 2,
                    known: 1,
                    ..
                }
            ),
            "{err}"
        );
        assert!(read(&p, 2).is_ok());
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("n.jsonl");
        let err = append(&fresh, &redacted(json!({"v": 3})), 2).unwrap_err();
        assert!(matches!(err, LedgerError::InvalidLine { .. }), "{err}");
        let err = append(&fresh, &redacted(json!({"turn": 1})), 2).unwrap_err();
        assert!(matches!(err, LedgerError::InvalidLine { .. }), "{err}");
        assert!(!fresh.exists(), "nothing written for a refused line");
    }

    #[test]
    fn valid_unterminated_last_line_is_kept_and_terminated_on_append() {
        let (_d, p) = ledger(b"{\"v\":1,\"a\":1}");
        let r = read(&p, 1).unwrap();
        assert_eq!(r.lines.len(), 1);
        assert!(r.torn_tail.is_none());
        append(&p, &redacted(json!({"v": 1, "a": 2})), 1).unwrap();
        assert_eq!(
            fs::read_to_string(&p).unwrap(),
            "{\"v\":1,\"a\":1}\n{\"a\":2,\"v\":1}\n"
        );
    }

    #[test]
    fn blank_lines_and_crlf_are_tolerated() {
        let (_d, p) = ledger(b"{\"v\":1}\r\n\n  \n{\"v\":1,\"b\":2}\n");
        let r = read(&p, 1).unwrap();
        assert_eq!(r.lines.len(), 2);
    }

    #[test]
    fn huge_ledger_reads() {
        let mut content = Vec::new();
        for i in 0..20_000 {
            content.extend_from_slice(format!("{{\"v\":1,\"i\":{i}}}\n").as_bytes());
        }
        content.extend_from_slice(b"{\"v\":1,\"i\":");
        let (_d, p) = ledger(&content);
        let r = read(&p, 1).unwrap();
        assert_eq!(r.lines.len(), 20_000);
        assert!(r.torn_tail.is_some());
    }
}

//! The store's change journal, `<store>/.changes.jsonl`: every writer of a document the
//! search table indexes (the archive's chapters and plans, enrichment's re-annotation, rule
//! files, the pool mirror's copies of other machines' documents) appends one line naming the
//! folder and the files it wrote, so a table refresh reads what changed since its cursor
//! instead of statting every folder of the corpus.
//!
//! It is a ledger (`store::ledger`: versioned lines, a torn tail skipped, a corrupt middle
//! line refused by name and never appended past, each append fsynced). Its first line names
//! its *generation*; a reader's cursor is (generation, byte offset). Whenever the journal
//! cannot say what changed since a cursor — missing, started over (another generation),
//! shorter than the cursor, damaged — [`read_since`] says so and the reader rescans every
//! folder instead. That rescan is also what finds a document no journal line names (a
//! writer older than the journal, a folder copied in by hand): see `catalog::table`.
//!
//! Bounded: an append past [`MAX_BYTES`] starts the journal over (its reader then rescans,
//! which is cheaper than reading that much), the table starts it over at every full rescan
//! and compacts it once read. A failed append never fails the write it records: the journal
//! is removed instead, which its reader takes as "rescan".

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{atomic, ledger, StoreError};
use crate::redact::{RedactionCounts, Redactor};

pub const JOURNAL_FILE: &str = ".changes.jsonl";
/// Serializes appends and restarts (never held by a reader).
pub const JOURNAL_LOCK_FILE: &str = ".changes.lock";
pub const JOURNAL_VERSION: u64 = 1;
/// Past this size an append starts the journal over instead of growing it.
pub const MAX_BYTES: u64 = 256 * 1024;
/// The header line is read with a bounded buffer: a longer first line is not a header.
const MAX_HEADER_BYTES: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("change journal {path}: {source}; it is a cache of what changed — delete it and the next search rescans the store")]
    Io { path: PathBuf, source: io::Error },
}

fn io_err(path: &Path, source: io::Error) -> JournalError {
    JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a reader stopped: the journal's generation and the byte after the last line read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub generation: String,
    pub offset: u64,
}

/// One journal line: a folder (workspace-relative, as the search table names it) and the
/// files of it that were written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub folder: String,
    pub files: Vec<String>,
}

/// What the journal says about the time since a cursor.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// Every change since the cursor (in order; one may repeat), and the cursor to keep.
    Changes {
        changes: Vec<Change>,
        end: Cursor,
        /// Lines skipped (a torn tail, a line of another shape), said.
        notes: Vec<String>,
    },
    /// The journal cannot say: the reader must rescan every folder.
    Rescan { reason: String },
}

pub fn journal_path(store_dir: &Path) -> PathBuf {
    store_dir.join(JOURNAL_FILE)
}

/// Journal lines pass the built-in redactor like every ledger line (they hold file names,
/// which the writer already derived from redacted text: in practice a no-op).
fn redactor() -> Option<&'static Redactor> {
    crate::redact::built_in()
}

/// Held around an append or a restart.
fn lock_journal(store_dir: &Path) -> Result<super::lock::BlockingLock, JournalError> {
    super::lock::BlockingLock::acquire(&store_dir.join(JOURNAL_LOCK_FILE))
        .map_err(|e| JournalError::Store(StoreError::from(e)))
}

/// A generation name no earlier one of this file has (also the signed-roots hint's).
pub(crate) fn new_generation() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{ns:x}-{:x}-{:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn header_line(generation: &str) -> String {
    let mut line = json!({"v": JOURNAL_VERSION, "journal": generation}).to_string();
    line.push('\n');
    line
}

/// Record that `files` of `folder` were written (after they were). Never fails its writer:
/// when the line cannot be appended, the journal is removed (its reader then rescans) and
/// the failure is logged.
pub fn record(store_dir: &Path, folder: &str, files: &[&str]) {
    record_many(store_dir, &[(folder, files)]);
}

/// [`record`] for several folders at once: one append, one fsync.
pub fn record_many(store_dir: &Path, changes: &[(&str, &[&str])]) {
    if changes.is_empty() {
        return;
    }
    if let Err(e) = try_record(store_dir, changes) {
        super::atomic::drop_failed_hint(
            &journal_path(store_dir),
            &e,
            "could not append to the change journal; removed it, so the next search rescans the store",
            "could not append to the change journal nor remove it; the next periodic rescan finds the change",
        );
    }
}

fn try_record(store_dir: &Path, changes: &[(&str, &[&str])]) -> Result<(), JournalError> {
    let redactor = redactor().ok_or_else(|| {
        io_err(
            &journal_path(store_dir),
            io::Error::other("the built-in redactor did not compile"),
        )
    })?;
    let mut counts = RedactionCounts::default();
    let lines: Vec<_> = changes
        .iter()
        .map(|(folder, files)| {
            redactor.redact_json_owned(
                json!({"v": JOURNAL_VERSION, "folder": folder, "files": files}),
                &mut counts,
            )
        })
        .collect();
    let _lock = lock_journal(store_dir)?;
    let path = journal_path(store_dir);
    let len = match fs::metadata(&path) {
        Ok(m) => Some(m.len()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err(&path, e)),
    };
    if len.is_none_or(|l| l > MAX_BYTES) || read_header(&path).is_none() {
        // Absent, unread for long, or without a header: a new generation (its reader sees
        // another generation than its cursor's and rescans).
        start_over(&path, &[])?;
    }
    match ledger::append_many(&path, &lines, JOURNAL_VERSION) {
        Ok(()) => Ok(()),
        // A corrupt middle line is never appended past: the journal starts over instead.
        Err(
            ledger::LedgerError::CorruptLine { .. } | ledger::LedgerError::UnknownVersion { .. },
        ) => {
            start_over(&path, &[])?;
            ledger::append_many(&path, &lines, JOURNAL_VERSION)?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A new generation holding `carried` (whole lines of the old one) after its header.
fn start_over(path: &Path, carried: &[u8]) -> Result<Cursor, JournalError> {
    let generation = new_generation();
    let header = header_line(&generation);
    let mut bytes = header.clone().into_bytes();
    bytes.extend_from_slice(carried);
    atomic::write_atomic(path, &bytes)?;
    Ok(Cursor {
        generation,
        offset: header.len() as u64,
    })
}

/// Start the journal over (a full rescan is about to cover everything it said): returns the
/// cursor just after the new header.
pub fn restart(store_dir: &Path) -> Result<Cursor, JournalError> {
    let _lock = lock_journal(store_dir)?;
    start_over(&journal_path(store_dir), &[])
}

/// After a reader has read up to `read_to`: when the journal holds more than `threshold`
/// bytes, start it over with the lines appended since (none, usually), so it never grows
/// with what was already read. Returns the cursor that now marks the same point.
pub fn compact(store_dir: &Path, read_to: &Cursor, threshold: u64) -> Result<Cursor, JournalError> {
    let path = journal_path(store_dir);
    if fs::metadata(&path).map_or(true, |m| m.len() <= threshold) {
        return Ok(read_to.clone());
    }
    let _lock = lock_journal(store_dir)?;
    if read_header(&path).as_deref() != Some(read_to.generation.as_str()) {
        // Started over meanwhile: the reader's next read sees it.
        return Ok(read_to.clone());
    }
    let bytes = fs::read(&path).map_err(|e| io_err(&path, e))?;
    let Some(rest) = bytes.get(read_to.offset as usize..) else {
        return Ok(read_to.clone());
    };
    start_over(&path, rest)
}

/// The generation the journal's first line names, if it is a header.
fn read_header(path: &Path) -> Option<String> {
    let mut file = File::open(path).ok()?;
    let mut buf = vec![0u8; MAX_HEADER_BYTES];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
        if memchr::memchr(b'\n', &buf[..filled]).is_some() {
            break;
        }
    }
    let end = memchr::memchr(b'\n', &buf[..filled])?;
    let value: serde_json::Value = serde_json::from_slice(&buf[..end]).ok()?;
    if value.get("v").and_then(serde_json::Value::as_u64) != Some(JOURNAL_VERSION) {
        return None;
    }
    value
        .get("journal")
        .and_then(serde_json::Value::as_str)
        .map(str::to_owned)
}

/// The current generation and the end of its last whole line: where a reader that is about
/// to rescan everything starts its cursor. `None` when the journal has no usable header.
pub fn current(store_dir: &Path) -> Option<Cursor> {
    let path = journal_path(store_dir);
    let generation = read_header(&path)?;
    let tail = ledger::read_from(&path, 0, JOURNAL_VERSION).ok()?;
    Some(Cursor {
        generation,
        offset: tail.end,
    })
}

/// What changed since `cursor` (`None`: the reader has no cursor yet).
pub fn read_since(store_dir: &Path, cursor: Option<&Cursor>) -> Since {
    let rescan = |reason: String| Since::Rescan { reason };
    let path = journal_path(store_dir);
    let Some(cursor) = cursor else {
        return rescan("no journal cursor yet".into());
    };
    if !path.exists() {
        return rescan(format!("{} is missing", path.display()));
    }
    match read_header(&path) {
        None => return rescan(format!("{} has no journal header", path.display())),
        Some(g) if g != cursor.generation => {
            return rescan(format!(
                "{} was started over (generation {g}, the cursor is in {})",
                path.display(),
                cursor.generation
            ))
        }
        Some(_) => {}
    }
    let tail = match ledger::read_from(&path, cursor.offset, JOURNAL_VERSION) {
        Ok(t) => t,
        Err(e) => return rescan(e.to_string()),
    };
    let mut notes: Vec<String> = tail.torn_tail.into_iter().collect();
    let mut changes = Vec::new();
    for line in tail.lines {
        let folder = line.get("folder").and_then(serde_json::Value::as_str);
        let files = line.get("files").and_then(serde_json::Value::as_array);
        match (folder, files) {
            (Some(folder), Some(files)) => changes.push(Change {
                folder: folder.to_owned(),
                files: files
                    .iter()
                    .filter_map(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            }),
            _ if line.get("journal").is_some() => {}
            _ => notes.push(format!(
                "{}: a line that names no folder was skipped",
                path.display()
            )),
        }
    }
    Since::Changes {
        changes,
        end: Cursor {
            generation: cursor.generation.clone(),
            offset: tail.end,
        },
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn changes_of(since: Since) -> (Vec<Change>, Cursor) {
        match since {
            Since::Changes { changes, end, .. } => (changes, end),
            Since::Rescan { reason } => panic!("rescan: {reason}"),
        }
    }

    fn reason(since: Since) -> String {
        match since {
            Since::Rescan { reason } => reason,
            other => panic!("not a rescan: {other:?}"),
        }
    }

    #[test]
    fn a_reader_sees_what_was_recorded_since_its_cursor() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let start = restart(store).expect("restart");
        record(store, ".dsh-chapters/s1/chapters", &["001-a.md"]);
        record_many(
            store,
            &[
                (".dsh-chapters/s1/chapters", &["plan-001-a.md", "002-b.md"]),
                (".dsh-chapters/rules", &["r-1.md"]),
            ],
        );
        let (got, end) = changes_of(read_since(store, Some(&start)));
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].files, ["plan-001-a.md", "002-b.md"]);
        assert_eq!(got[2].folder, ".dsh-chapters/rules");
        let (none, same) = changes_of(read_since(store, Some(&end)));
        assert!(none.is_empty());
        assert_eq!(same, end);
        record(store, ".dsh-chapters/s2/chapters", &["001-c.md"]);
        let (next, _) = changes_of(read_since(store, Some(&end)));
        assert_eq!(next.len(), 1, "only what came after the cursor");
        assert_eq!(
            current(store).expect("current").generation,
            start.generation
        );
    }

    #[test]
    fn a_torn_tail_is_skipped_and_read_once_whole() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let start = restart(store).expect("restart");
        record(store, "f", &["a.md"]);
        let path = journal_path(store);
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        std::io::Write::write_all(&mut f, b"{\"v\":1,\"folder\":\"g\",\"fi").expect("tear");
        let since = read_since(store, Some(&start));
        let Since::Changes {
            changes,
            end,
            notes,
        } = since
        else {
            panic!("{since:?}");
        };
        assert_eq!(changes.len(), 1);
        assert!(notes[0].contains("line 3"), "{notes:?}");
        // The next append cuts the torn line; the reader resumes exactly there.
        record(store, "g", &["b.md"]);
        let (after, _) = changes_of(read_since(store, Some(&end)));
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].folder, "g");
    }

    #[test]
    fn a_corrupt_middle_line_is_refused_by_name_and_the_appender_starts_over() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let start = restart(store).expect("restart");
        record(store, "f", &["a.md"]);
        let path = journal_path(store);
        let mut text = fs::read_to_string(&path).expect("read");
        text.push_str("garbage\n");
        fs::write(&path, &text).expect("write");
        let why = reason(read_since(store, Some(&start)));
        assert!(
            why.contains("line 3 is corrupt") && why.contains(JOURNAL_FILE),
            "{why}"
        );
        // A writer never appends past it: the journal starts over, and the reader (whose
        // cursor is in the old generation) rescans.
        record(store, "g", &["b.md"]);
        let text = fs::read_to_string(&path).expect("read");
        assert!(!text.contains("garbage"), "{text}");
        assert!(reason(read_since(store, Some(&start))).contains("started over"));
        let now = current(store).expect("current");
        assert_ne!(now.generation, start.generation);
    }

    #[test]
    fn a_missing_journal_or_a_cursor_past_its_end_means_rescan() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        assert!(reason(read_since(store, None)).contains("no journal cursor"));
        let start = restart(store).expect("restart");
        fs::remove_file(journal_path(store)).expect("rm");
        assert!(reason(read_since(store, Some(&start))).contains("missing"));
        // A writer finding no journal starts a new one: still a rescan for the old cursor.
        record(store, "f", &["a.md"]);
        assert!(reason(read_since(store, Some(&start))).contains("started over"));
        let now = current(store).expect("current");
        let beyond = Cursor {
            offset: now.offset + 10,
            ..now.clone()
        };
        assert!(reason(read_since(store, Some(&beyond))).contains("past the end"));
        let inside = Cursor {
            offset: now.offset - 3,
            ..now
        };
        assert!(reason(read_since(store, Some(&inside))).contains("not at the end of a line"));
        // Cut shorter than the cursor (same generation): a rescan too.
        let path = journal_path(store);
        let text = fs::read(&path).expect("read");
        let header_end = memchr::memchr(b'\n', &text).expect("header") + 1;
        fs::write(&path, &text[..header_end]).expect("cut");
        let cut = current(store).expect("current");
        let old = Cursor {
            offset: cut.offset + 5,
            ..cut
        };
        assert!(reason(read_since(store, Some(&old))).contains("past the end"));
    }

    #[test]
    fn garbled_and_hostile_journals_mean_rescan_never_a_panic() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let start = restart(store).expect("restart");
        let path = journal_path(store);
        for bytes in [
            &b""[..],
            b"\xff\xfe\x00",
            b"{\"v\":1}\n",
            b"{\"v\":9,\"journal\":\"x\"}\n",
            &[b'x'; 10_000][..],
        ] {
            fs::write(&path, bytes).expect("write");
            assert!(matches!(
                read_since(store, Some(&start)),
                Since::Rescan { .. }
            ));
            // A writer recovers by starting over.
            record(store, "f", &["a.md"]);
            let now = current(store).expect("a usable journal again");
            assert_ne!(now.generation, start.generation);
        }
        // A line of another shape is skipped with a note; a huge file name is carried.
        let start = restart(store).expect("restart");
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        std::io::Write::write_all(&mut f, b"{\"v\":1,\"other\":true}\n").expect("append");
        let long = "x".repeat(100_000);
        record(store, "f", &[long.as_str()]);
        let Since::Changes { changes, notes, .. } = read_since(store, Some(&start)) else {
            panic!("changes");
        };
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].files[0].len(), 100_000);
        assert_eq!(notes.len(), 1);
    }

    #[test]
    fn an_unread_journal_is_bounded_and_compaction_keeps_the_unread_lines() {
        let dir = tempfile::tempdir().expect("tmp");
        let store = dir.path();
        let start = restart(store).expect("restart");
        let name = "n".repeat(1000);
        for _ in 0..(MAX_BYTES / 1000 + 10) {
            record(store, "f", &[name.as_str()]);
        }
        let len = fs::metadata(journal_path(store)).expect("meta").len();
        assert!(len <= MAX_BYTES + 2000, "{len}");
        assert!(reason(read_since(store, Some(&start))).contains("started over"));

        let start = restart(store).expect("restart");
        record(store, "f", &["a.md"]);
        let (_, read_to) = changes_of(read_since(store, Some(&start)));
        record(store, "g", &["b.md"]);
        let compacted = compact(store, &read_to, 0).expect("compact");
        assert_ne!(compacted.generation, read_to.generation);
        let (unread, _) = changes_of(read_since(store, Some(&compacted)));
        assert_eq!(unread.len(), 1, "the line appended after the read is kept");
        assert_eq!(unread[0].folder, "g");
        // Under the threshold nothing moves.
        assert_eq!(
            compact(store, &compacted, MAX_BYTES).expect("compact"),
            compacted
        );
    }
}

//! `<store>/.signed-roots`: which root sessions' signature ledgers were appended to, so a
//! sync lists the `collections/` of those roots only instead of every root's (issue #17
//! point 6: at 2,000 roots that was most of a +10 sync's `stat`s). The signer appends under
//! the collections lock, without a record in the store's catalog: a synced commit per signed
//! turn would double the signing latency.
//!
//! A hint, not a ledger: one line per append, written **before** the ledger append and
//! **not fsynced**. Why a lost line is harmless:
//! - A process crash loses nothing written (the page cache keeps it); a crash between the
//!   hint and the ledger append leaves a hint with nothing behind it (a root listed for
//!   nothing).
//! - Only a kernel crash or a power cut loses page-cache data, and both change the kernel's
//!   boot id (`/proc/sys/kernel/random/boot_id`): the reader's [`Cursor`] records it, and a
//!   cursor from another boot lists every root.
//! - Whatever else loses a line (a device pulled out while mounted, a signer of an older
//!   version that writes none): every root is listed again at least every
//!   [`LIST_ALL_EVERY_SECS`].
//! - A reader holds the collections lock while it reads the hint's end: every append named
//!   before that end is whole on disk, and every later one is named after it.
//!
//! Format: a header line `dsh-chapters signed-roots v1 <generation>`, then one root session
//! id a line. Anything else (a bad line, a torn tail, a missing header) makes the reader list
//! every root and start the file over. Bounded: past [`MAX_BYTES`] the signer starts it
//! over (a new generation: the next reader lists every root), and a reader that has read
//! past [`COMPACT_AT`] starts it over too.

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{atomic, lock::CollectionsLock, StoreError};
use crate::names::is_safe_component;

pub const SIGNED_FILE: &str = ".signed-roots";
const HEADER_PREFIX: &str = "dsh-chapters signed-roots v1 ";
/// Past this size the signer starts the file over (its reader then lists every root).
pub const MAX_BYTES: u64 = 256 * 1024;
/// A reader that has read past this size starts the file over (under the lock).
pub const COMPACT_AT: u64 = 64 * 1024;
/// However quiet the hint, a reader lists every root at least this often.
pub const LIST_ALL_EVERY_SECS: u64 = 600;
const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// Where a reader stopped: the boot it read in, the file's generation, the byte after the
/// last line read, and when it last listed every root (seconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub boot: String,
    pub generation: String,
    pub offset: u64,
    pub listed_all_at: u64,
}

/// What the hint says about the time since a cursor.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// The roots named since the cursor (every other root's ledgers are as the cursor's
    /// listing left them), and the cursor to keep once they are listed.
    Roots {
        roots: BTreeSet<String>,
        end: Cursor,
    },
    /// The hint cannot say: list every root's ledgers. `end` is the cursor to keep after
    /// that listing (`None`: none can be kept, e.g. no boot id on this system).
    ListAll { reason: String, end: Option<Cursor> },
}

pub fn signed_path(store_dir: &Path) -> PathBuf {
    store_dir.join(SIGNED_FILE)
}

/// The kernel's boot id, `None` where there is none to read (then every reader lists all).
fn boot_id() -> Option<String> {
    let id = fs::read_to_string(BOOT_ID).ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// A new generation holding `line` (if any) after its header; returns the generation and
/// the header's length. Unsynced like every hint write.
fn start_over(path: &Path, line: Option<&str>) -> Result<(String, u64), StoreError> {
    let generation = super::catalog::new_generation();
    let header = format!("{HEADER_PREFIX}{generation}\n");
    let mut bytes = header.clone().into_bytes();
    if let Some(line) = line {
        bytes.extend_from_slice(line.as_bytes());
    }
    atomic::write_atomic_unsynced(path, &bytes)?;
    Ok((generation, header.len() as u64))
}

/// Name `root` as about to have its ledger appended to: the caller holds the collections
/// lock and appends after this returns. Never fails its signer: when the line cannot be
/// written the file is removed (its reader then lists every root).
pub(crate) fn note(store_dir: &Path, root: &str, _held: &CollectionsLock) {
    let path = signed_path(store_dir);
    if let Err(e) = try_note(&path, root) {
        super::atomic::drop_failed_hint(
            &path,
            &e,
            "could not name a signed root; removed the hint, so the next sync lists every root's ledgers",
            "could not name a signed root nor remove the hint; a sync lists every root's ledgers within 10 minutes",
        );
    }
}

fn try_note(path: &Path, root: &str) -> Result<(), StoreError> {
    let line = format!("{root}\n");
    let io = |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    };
    let len = match fs::metadata(path) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => return Err(io(e)),
    };
    if len == 0 || len > MAX_BYTES {
        start_over(path, Some(&line))?;
        return Ok(());
    }
    let mut file = OpenOptions::new().append(true).open(path).map_err(io)?;
    file.write_all(line.as_bytes()).map_err(io)
}

/// What the hint says since `cursor` (`None`: the reader has none yet), read under the
/// collections lock (see the module doc). `now_secs`: the clock, for [`LIST_ALL_EVERY_SECS`].
pub fn read_since(
    store_dir: &Path,
    cursor: Option<&Cursor>,
    now_secs: u64,
    _held: &CollectionsLock,
) -> Since {
    read_since_in(store_dir, cursor, now_secs, boot_id())
}

fn read_since_in(
    store_dir: &Path,
    cursor: Option<&Cursor>,
    now_secs: u64,
    boot: Option<String>,
) -> Since {
    let path = signed_path(store_dir);
    let Some(boot) = boot else {
        return Since::ListAll {
            reason: format!("no boot id to read at {BOOT_ID}"),
            end: None,
        };
    };
    let bytes = match fs::read(&path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => {
            return Since::ListAll {
                reason: format!("{}: {e}", path.display()),
                end: None,
            }
        }
    };
    let parsed = bytes.as_deref().and_then(parse);
    // Listing every root from here: the cursor to keep afterwards starts at the file's end
    // (or at a new generation's header when the file cannot be read on from).
    let list_all = |reason: String| {
        let at = match &parsed {
            Some((generation, _, end)) if *end <= COMPACT_AT => Ok((generation.clone(), *end)),
            _ => start_over(&path, None),
        };
        Since::ListAll {
            reason,
            end: at.ok().map(|(generation, offset)| Cursor {
                boot: boot.clone(),
                generation,
                offset,
                listed_all_at: now_secs,
            }),
        }
    };
    let Some(cursor) = cursor else {
        return list_all("no cursor yet".into());
    };
    if cursor.boot != boot {
        return list_all(format!(
            "the cursor was kept in another boot ({}): a hint not yet on disk then may be lost",
            cursor.boot
        ));
    }
    if now_secs < cursor.listed_all_at || now_secs - cursor.listed_all_at >= LIST_ALL_EVERY_SECS {
        return list_all("every root's ledgers are listed every 10 minutes".into());
    }
    let Some((generation, roots_from, end)) = &parsed else {
        return list_all(format!("{} is missing or not a hint file", path.display()));
    };
    if *generation != cursor.generation {
        return list_all(format!("{} was started over", path.display()));
    }
    if cursor.offset > *end || cursor.offset < *roots_from {
        return list_all(format!(
            "{} is shorter than the cursor or the cursor is inside its header",
            path.display()
        ));
    }
    let bytes = bytes.as_deref().unwrap_or_default();
    let roots = bytes[cursor.offset as usize..*end as usize]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| std::str::from_utf8(l).ok())
        .map(str::to_owned)
        .collect();
    let (generation, offset) = if *end > COMPACT_AT {
        match start_over(&path, None) {
            Ok(at) => at,
            // The file read on as it is; a later signer or reader starts it over.
            Err(_) => (generation.clone(), *end),
        }
    } else {
        (generation.clone(), *end)
    };
    Since::Roots {
        roots,
        end: Cursor {
            boot,
            generation,
            offset,
            listed_all_at: cursor.listed_all_at,
        },
    }
}

/// The file's generation, where its root lines start and its length, if every line after
/// the header is a whole root id.
fn parse(bytes: &[u8]) -> Option<(String, u64, u64)> {
    let header_end = memchr::memchr(b'\n', bytes)?;
    let header = std::str::from_utf8(&bytes[..header_end]).ok()?;
    let generation = header.strip_prefix(HEADER_PREFIX)?;
    if generation.is_empty() || !bytes.ends_with(b"\n") {
        return None;
    }
    let body = &bytes[header_end + 1..];
    let whole = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .all(|l| std::str::from_utf8(l).is_ok_and(is_safe_component));
    whole.then(|| {
        (
            generation.to_owned(),
            header_end as u64 + 1,
            bytes.len() as u64,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOT: &str = "boot-a";

    fn read(dir: &Path, cursor: Option<&Cursor>, now: u64) -> Since {
        read_since_in(dir, cursor, now, Some(BOOT.into()))
    }

    fn roots_of(since: Since) -> (BTreeSet<String>, Cursor) {
        match since {
            Since::Roots { roots, end } => (roots, end),
            Since::ListAll { reason, .. } => panic!("expected roots, got: {reason}"),
        }
    }

    fn list_all_end(since: Since) -> Cursor {
        match since {
            Since::ListAll { end: Some(end), .. } => end,
            other => panic!("expected a listing of every root with a cursor: {other:?}"),
        }
    }

    fn note_in(dir: &Path, root: &str) {
        try_note(&signed_path(dir), root).expect("note");
    }

    /// What is named after a cursor is read back once; nothing else.
    #[test]
    fn roots_named_since_the_cursor_are_read_once() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path();
        let first = list_all_end(read(dir, None, 100));
        note_in(dir, "s1");
        note_in(dir, "s2");
        note_in(dir, "s1");
        let (roots, end) = roots_of(read(dir, Some(&first), 101));
        assert_eq!(roots, BTreeSet::from(["s1".to_owned(), "s2".to_owned()]));
        assert_eq!(end.listed_all_at, 100, "no full listing since the first");
        let (roots, end) = roots_of(read(dir, Some(&end), 102));
        assert!(roots.is_empty());
        note_in(dir, "s3");
        assert_eq!(
            roots_of(read(dir, Some(&end), 103)).0,
            BTreeSet::from(["s3".to_owned()])
        );
    }

    /// A cursor kept in another boot (a power cut may have lost un-fsynced lines) lists
    /// every root; so do a lost file, another generation, a bad line, a torn tail and an
    /// old full listing.
    #[test]
    fn whatever_the_hint_cannot_vouch_for_lists_every_root() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path();
        let path = signed_path(dir);
        let cursor = list_all_end(read(dir, None, 100));
        note_in(dir, "s1");
        let other_boot = read_since_in(dir, Some(&cursor), 101, Some("boot-b".into()));
        let fresh = list_all_end(other_boot);
        assert_eq!(fresh.boot, "boot-b");
        assert_eq!(fresh.listed_all_at, 101);
        // No boot id at all: list every root, keep no cursor.
        assert!(matches!(
            read_since_in(dir, Some(&cursor), 101, None),
            Since::ListAll { end: None, .. }
        ));
        // Ten minutes after the last full listing.
        list_all_end(read(dir, Some(&cursor), 100 + LIST_ALL_EVERY_SECS));
        // The clock went back.
        list_all_end(read(dir, Some(&cursor), 99));
        // A torn tail, then a bad line: started over, so the next cursor reads on.
        let good = fs::read(&path).expect("read");
        fs::write(&path, [&good[..], b"s2"].concat()).expect("tear");
        let after_torn = list_all_end(read(dir, Some(&cursor), 101));
        assert_ne!(after_torn.generation, cursor.generation);
        note_in(dir, "s4");
        assert_eq!(
            roots_of(read(dir, Some(&after_torn), 102)).0,
            BTreeSet::from(["s4".to_owned()])
        );
        fs::write(&path, [&good[..], b"../x\n"].concat()).expect("bad line");
        list_all_end(read(dir, Some(&cursor), 101));
        // Removed (a failed note removes it), or started over by a signer.
        let again = list_all_end(read(dir, None, 101));
        fs::remove_file(&path).expect("rm");
        list_all_end(read(dir, Some(&again), 102));
        let again = list_all_end(read(dir, None, 103));
        start_over(&path, Some("s5\n")).expect("start over");
        list_all_end(read(dir, Some(&again), 104));
    }

    /// A hint that cannot be written never fails its signer, and its reader, unable to read
    /// it, lists every root and keeps no cursor (here: a directory in the hint's place).
    #[test]
    fn a_hint_that_cannot_be_written_fails_no_signer_and_lists_every_root() {
        let tmp = tempfile::tempdir().expect("tmp");
        let store = crate::store::Store::init(tmp.path()).expect("store");
        fs::create_dir_all(signed_path(store.dir()).join("x")).expect("a directory in its place");
        let held = store.lock_collections().expect("lock");
        note(store.dir(), "s1", &held);
        assert!(try_note(&signed_path(store.dir()), "s1").is_err());
        assert!(matches!(
            read(store.dir(), None, 100),
            Since::ListAll { end: None, .. }
        ));
    }

    /// Past `MAX_BYTES` the signer starts over; past `COMPACT_AT` the reader does, and the
    /// cursor it returns reads on from the new generation.
    #[test]
    fn the_hint_stays_bounded() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path();
        let path = signed_path(dir);
        let cursor = list_all_end(read(dir, None, 100));
        let root = "session-0000000000000000000000000000000";
        while fs::metadata(&path).expect("meta").len() <= COMPACT_AT {
            note_in(dir, root);
        }
        let (roots, end) = roots_of(read(dir, Some(&cursor), 101));
        assert_eq!(roots.len(), 1);
        assert_ne!(end.generation, cursor.generation, "compacted");
        assert!(fs::metadata(&path).expect("meta").len() < 100);
        note_in(dir, "s2");
        assert_eq!(
            roots_of(read(dir, Some(&end), 102)).0,
            BTreeSet::from(["s2".to_owned()])
        );
        while fs::metadata(&path).expect("meta").len() <= MAX_BYTES {
            note_in(dir, root);
        }
        note_in(dir, "s3");
        assert!(
            fs::metadata(&path).expect("meta").len() < 200,
            "started over"
        );
        list_all_end(read(dir, Some(&end), 103));
    }
}

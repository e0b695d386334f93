//! Signing at `turn/end`: append the collection lines of freshly completed turns, redacted,
//! in one write and one fsync, under the store's short collections lock — never the writer
//! lock, so a running archive or sync never delays a signature. Shell.
//!
//! Exactly once, across the daemon, `chapters archive` and restarts: under the lock the
//! ledger's last signed `turn/end` seq is read, and only turns past it are appended (the
//! archive's pass 1 does the same under the same lock) — past its turn number instead when
//! the archive found the log renumbered since ([`After::Turn`], `session::renumber`). The last seq is cached with the
//! ledger's length; an unchanged length means nobody else appended, so the ledger is
//! re-read only after another writer touched it.

use std::path::Path;

use crate::redact::{Redacted, RedactionCounts, Redactor};
use crate::signature::Signature;
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("collections/{session_id}.jsonl line {line}: not a signature ({detail}); the ledger is damaged — restore it from a backup")]
    BadLine {
        session_id: String,
        line: usize,
        detail: String,
    },
}

/// How a signature is told fresh against the ledger's last line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum After {
    /// Its `turn/end` seq is past the last line's.
    #[default]
    Seq,
    /// Its turn number is past the last line's: the log was renumbered since that line
    /// was written (`session::renumber`), so its seqs name other events now.
    Turn,
}

/// What is known of one ledger: its length when last read, its last signed seq, and the
/// length at which this signer last left it whole (after its own append).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LedgerCursor {
    len: Option<u64>,
    signed_hi: Option<u64>,
    whole_len: Option<u64>,
}

impl LedgerCursor {
    /// The last signed `turn/end` seq as last seen (a hint; the lock holder re-checks).
    pub fn signed_hi(&self) -> Option<u64> {
        self.signed_hi
    }
}

fn ledger_len(path: &Path) -> Result<Option<u64>, StoreError> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// The last seq of each signature in a session's ledger, in ledger order.
fn signed_ends(store: &Store, root: &str, session_id: &str) -> Result<Vec<u64>, SignError> {
    let read = store.read_collection(root, session_id)?;
    let mut ends = Vec::with_capacity(read.lines.len());
    for (i, line) in read.lines.into_iter().enumerate() {
        let sig: Signature = serde_json::from_value(line).map_err(|e| SignError::BadLine {
            session_id: session_id.to_owned(),
            line: i + 1,
            detail: e.to_string(),
        })?;
        ends.extend(sig.seqs.last().copied());
    }
    Ok(ends)
}

/// The last line's `turn/end` seq: the ledger is appended in log order, so it is the
/// highest — except across a renumbered log, where the last line's numbering is the log's.
fn read_signed_hi(store: &Store, root: &str, session_id: &str) -> Result<Option<u64>, SignError> {
    Ok(signed_ends(store, root, session_id)?.last().copied())
}

/// The ledger's last line as a record of the log (`session::renumber::Anchor`): its turn
/// number and `turn/end` seq.
pub fn last_signed(
    store: &Store,
    root: &str,
    session_id: &str,
) -> Result<Option<crate::session::renumber::Anchor>, SignError> {
    let read = store.read_collection(root, session_id)?;
    let i = read.lines.len();
    let Some(line) = read.lines.into_iter().next_back() else {
        return Ok(None);
    };
    let sig: Signature = serde_json::from_value(line).map_err(|e| SignError::BadLine {
        session_id: session_id.to_owned(),
        line: i,
        detail: e.to_string(),
    })?;
    Ok(sig
        .seqs
        .last()
        .map(|&end_seq| crate::session::renumber::Anchor {
            turn: sig.turn,
            end_seq,
        }))
}

/// How many of a session's signed turns no chapter covers yet: signatures past the last
/// archived chapter of the session (what a vanished log takes with it, what the sweep
/// would take).
pub fn signed_unarchived(store: &Store, root: &str, session_id: &str) -> Result<u64, SignError> {
    let archived_hi = store
        .archived(root)?
        .iter()
        .filter(|d| d.kind == "chapter" && d.session_id == session_id)
        .map(|d| d.seq_hi)
        .max();
    let ends = signed_ends(store, root, session_id)?;
    Ok(ends
        .into_iter()
        .filter(|&end| archived_hi.is_none_or(|hi| end > hi))
        .count() as u64)
}

/// Bring `cursor` up to date without the lock (at start-up, to skip old turns cheaply).
pub fn refresh(
    store: &Store,
    root: &str,
    session_id: &str,
    cursor: &mut LedgerCursor,
) -> Result<(), SignError> {
    let path = store.collection_path(root, session_id)?;
    let len = ledger_len(&path)?;
    if len != cursor.len {
        cursor.signed_hi = read_signed_hi(store, root, session_id)?;
        cursor.len = len;
    }
    Ok(())
}

/// Append the signatures past the ledger's last one; returns how many were appended.
/// `sigs` must be in `turn/end` order.
pub fn sign(
    store: &Store,
    root: &str,
    session_id: &str,
    sigs: &[Redacted<Signature>],
    redactor: &Redactor,
    cursor: &mut LedgerCursor,
    after: After,
) -> Result<usize, SignError> {
    if sigs.is_empty() {
        return Ok(0);
    }
    let path = store.collection_path(root, session_id)?;
    let lock = store.lock_collections()?;
    // A session tree a person forgot (`chapters forget`) is never signed into again; the
    // forget took this lock while it removed the tree.
    if crate::store::forget::read(store.dir()).is_ok_and(|f| f.root_forgotten(root)) {
        return Ok(0);
    }
    let len = ledger_len(&path)?;
    if len != cursor.len {
        cursor.signed_hi = read_signed_hi(store, root, session_id)?;
        cursor.len = len;
    }
    let last_turn = match after {
        After::Seq => None,
        After::Turn => last_signed(store, root, session_id)?.map(|a| a.turn),
    };
    let fresh: Vec<&Redacted<Signature>> = sigs
        .iter()
        .filter(|s| match after {
            After::Seq => s
                .seqs
                .last()
                .is_some_and(|&end| cursor.signed_hi.is_none_or(|hi| end > hi)),
            After::Turn => !s.seqs.is_empty() && last_turn.is_none_or(|t| s.turn > t),
        })
        .collect();
    if fresh.is_empty() {
        return Ok(0);
    }
    let mut counts = RedactionCounts::default();
    // Made one at a time as the ledger writes them: a batch never holds every line's JSON
    // tree at once (a long turn's `seqs` make a tree of several KB).
    let lines = fresh.iter().map(|s| {
        let value =
            s.derive(|s| serde_json::to_value(s).expect("a Signature always serializes to JSON"));
        // Signed from redacted text; through the rules once more as the ledger line.
        redactor.redact_json_owned(value.into_inner(), &mut counts)
    });
    let new_len =
        store.append_collection_after(root, session_id, lines, cursor.whole_len, &lock)?;
    cursor.signed_hi = fresh.iter().rev().find_map(|s| s.seqs.last().copied());
    cursor.len = Some(new_len);
    cursor.whole_len = Some(new_len);
    Ok(fresh.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signature as the signer gets them: from redacted text (here, a raw one through
    /// the rules, so that the secret among its terms shows what reaches the ledger).
    fn sig(session: &str, lo: u64, hi: u64) -> Redacted<Signature> {
        let raw = serde_json::to_value(raw_sig(session, lo, hi)).unwrap();
        crate::redact::built_in()
            .unwrap()
            .redact_json(&raw, &mut RedactionCounts::default())
            .derive(|v| serde_json::from_value(v.clone()).unwrap())
    }

    fn raw_sig(session: &str, lo: u64, hi: u64) -> Signature {
        Signature {
            v: 1,
            session_id: session.into(),
            turn: hi,
            seqs: (lo..=hi).collect(),
            paths: vec![],
            commands: vec![],
            terms: vec!["AKIAABCDEFGHIJKLMNOP".into()],
            size: 1,
            by: "deterministic".into(),
            at: "2026-01-01T00:00:00Z".into(),
            reason: "completed".into(),
        }
    }

    fn ends(store: &Store) -> Vec<u64> {
        store
            .read_collection("r", "s")
            .unwrap()
            .lines
            .iter()
            .map(|l| {
                l["seqs"]
                    .as_array()
                    .unwrap()
                    .last()
                    .unwrap()
                    .as_u64()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn a_forgotten_session_tree_is_never_signed_into() {
        use crate::store::forget::{self, Act, Item};
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        let redactor = Redactor::new(&[]).unwrap();
        let act = Act {
            v: 1,
            act: "forget".into(),
            at: "2026-12-01T00:00:00Z".into(),
            by: "Ada".into(),
            reason: None,
            harness_id: "m".into(),
            ids: vec!["r".into()],
            items: vec![Item::Session {
                root: "r".into(),
                sessions: vec!["s".into()],
            }],
        };
        forget::append(&store, &act, &redactor).unwrap();
        let mut cursor = LedgerCursor::default();
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                &[sig("s", 0, 4)],
                &redactor,
                &mut cursor,
                After::Seq
            )
            .unwrap(),
            0
        );
        assert!(!store.read_collection("r", "s").unwrap().exists);
        // Another tree is signed as ever.
        assert_eq!(
            sign(
                &store,
                "r2",
                "s",
                &[sig("s", 0, 4)],
                &redactor,
                &mut cursor,
                After::Seq
            )
            .unwrap(),
            1
        );
    }

    #[test]
    fn signs_once_across_two_signers_with_their_own_cursors() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        let redactor = Redactor::new(&[]).unwrap();
        let (mut a, mut b) = (LedgerCursor::default(), LedgerCursor::default());
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                &[sig("s", 0, 4), sig("s", 5, 9)],
                &redactor,
                &mut a,
                After::Seq
            )
            .unwrap(),
            2
        );
        // The other signer read the log more slowly: it offers turns already signed.
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                &[sig("s", 0, 4)],
                &redactor,
                &mut b,
                After::Seq
            )
            .unwrap(),
            0
        );
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                &[sig("s", 5, 9), sig("s", 10, 12)],
                &redactor,
                &mut b,
                After::Seq
            )
            .unwrap(),
            1
        );
        // The first signer's cache is stale; the length tells it to re-read.
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                &[sig("s", 10, 12)],
                &redactor,
                &mut a,
                After::Seq
            )
            .unwrap(),
            0
        );
        assert_eq!(ends(&store), vec![4, 9, 12]);
        assert_eq!(a.signed_hi(), Some(12));
        // Redacted on the way in.
        let text = std::fs::read_to_string(store.collection_path("r", "s").unwrap()).unwrap();
        assert!(!text.contains("AKIAABCDEFGHIJKLMNOP"), "{text}");
        assert!(text.contains("redacted"), "{text}");
    }

    #[test]
    fn a_torn_tail_is_cut_and_its_turn_signed_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        let redactor = Redactor::new(&[]).unwrap();
        let mut c = LedgerCursor::default();
        sign(
            &store,
            "r",
            "s",
            &[sig("s", 0, 4)],
            &redactor,
            &mut c,
            After::Seq,
        )
        .unwrap();
        let path = store.collection_path("r", "s").unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut f, br#"{"v":1,"seqs":[5,6"#).unwrap();
        let mut fresh = LedgerCursor::default();
        refresh(&store, "r", "s", &mut fresh).unwrap();
        assert_eq!(fresh.signed_hi(), Some(4));
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                &[sig("s", 5, 6)],
                &redactor,
                &mut c,
                After::Seq
            )
            .unwrap(),
            1
        );
        assert_eq!(ends(&store), vec![4, 6]);
    }

    #[test]
    fn a_damaged_ledger_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::init(dir.path()).unwrap();
        let redactor = Redactor::new(&[]).unwrap();
        let path = store.collection_path("r", "s").unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "{\"v\":1,\"not\":\"a signature\"}\n").unwrap();
        let err = sign(
            &store,
            "r",
            "s",
            &[sig("s", 0, 1)],
            &redactor,
            &mut LedgerCursor::default(),
            After::Seq,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("collections/s.jsonl line 1"),
            "{err}"
        );
    }

    /// After a renumbering (`After::Turn`) a signature is fresh by its turn number: lower
    /// seqs than the ledger's last line do not keep a later turn out, and higher ones do
    /// not let an earlier turn in twice.
    #[test]
    fn after_a_renumbering_turn_numbers_tell_fresh_signatures() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::init(tmp.path()).unwrap();
        let redactor = Redactor::new(&[]).unwrap();
        let mut cursor = LedgerCursor::default();
        // Turns 10..=20 (numbered by their last seq) in the old numbering.
        sign(
            &store,
            "r",
            "s",
            &[sig("s", 10, 20)],
            &redactor,
            &mut cursor,
            After::Seq,
        )
        .unwrap();
        // The renumbered log: turn 20 now ends at 25 (already signed), turn 21 at 15.
        let again = sig_numbered("s", 21, 25, 20);
        let later = sig_numbered("s", 12, 15, 21);
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                std::slice::from_ref(&again),
                &redactor,
                &mut cursor,
                After::Turn
            )
            .unwrap(),
            0
        );
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                std::slice::from_ref(&later),
                &redactor,
                &mut cursor,
                After::Seq
            )
            .unwrap(),
            0,
            "by seq the later turn looks signed"
        );
        assert_eq!(
            sign(
                &store,
                "r",
                "s",
                &[again, later],
                &redactor,
                &mut cursor,
                After::Turn
            )
            .unwrap(),
            1
        );
        assert_eq!(ends(&store), vec![20, 15]);
        // From here the ledger's last line is in the log's numbering: seqs decide again.
        assert_eq!(cursor.signed_hi(), Some(15));
    }

    fn sig_numbered(session: &str, lo: u64, hi: u64, turn: u64) -> Redacted<Signature> {
        let mut raw = raw_sig(session, lo, hi);
        raw.turn = turn;
        let raw = serde_json::to_value(raw).unwrap();
        crate::redact::built_in()
            .unwrap()
            .redact_json(&raw, &mut RedactionCounts::default())
            .derive(|v| serde_json::from_value(v.clone()).unwrap())
    }
}

//! Where a log's completed turns stand against the last one recorded from it (the last
//! signature, the last chapter), when DSH may have renumbered the log since. Pure.
//!
//! DSH migrates a session to a new format generation by writing the successor beside the
//! old file, and some migrations renumber its events while keeping each turn's number:
//! v1 → v2 drops every `assistant/chunk` event (seqs shrink), v4 → v5 writes a `turn/end`
//! for each interrupted turn (seqs grow). A record's seqs then name other events of the new
//! file. The turn that ended at the record's seq with the record's turn number says the
//! numbering still holds; any sign of the contrary switches to turn numbers, which DSH
//! keeps unique and increasing within a log (a rolled-back turn becomes a new session).

/// The last turn recorded from a log: its number and the seq of its `turn/end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    pub turn: u64,
    pub end_seq: u64,
}

impl Anchor {
    /// The anchor a chapter gives: its highest seq and its last turn's number, and whether
    /// that number can be trusted (the chapter names its turns; older chapters do not).
    pub fn of_chapter(seq_hi: u64, last_turn: Option<u64>) -> (Anchor, bool) {
        let anchor = Anchor {
            turn: last_turn.unwrap_or(0),
            end_seq: seq_hi,
        };
        (anchor, last_turn.is_some())
    }
}

/// What the turns read so far say about the log's numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbering {
    /// Nothing seen yet that tells.
    Unknown,
    /// The anchor's turn ended at the anchor's seq: seqs still name what they named.
    Kept,
    /// The log was renumbered: turn numbers decide.
    Renumbered,
}

/// Decides, turn by turn in log order, which completed turns the anchor already covers.
#[derive(Debug, Clone)]
pub struct Covered {
    anchor: Option<Anchor>,
    /// Whether turn numbers can be trusted across renumbering (DSH's own logs); otherwise
    /// seqs alone decide, as before.
    by_turn: bool,
    numbering: Numbering,
}

impl Covered {
    /// Nothing recorded yet (`anchor` `None`) covers nothing.
    pub fn new(anchor: Option<Anchor>, by_turn: bool) -> Covered {
        Covered {
            anchor,
            by_turn,
            numbering: Numbering::Unknown,
        }
    }

    /// Whether the completed turn numbered `turn`, ending at `end_seq`, is at or before the
    /// anchor. Call it for each completed turn in log order.
    pub fn covers(&mut self, turn: u64, end_seq: u64) -> bool {
        let Some(anchor) = self.anchor else {
            return false;
        };
        if self.by_turn && self.numbering == Numbering::Unknown {
            self.numbering = if end_seq == anchor.end_seq && turn == anchor.turn {
                Numbering::Kept
            } else if turn >= anchor.turn || end_seq > anchor.end_seq {
                // Kept numbering would have ended the anchor's turn at the anchor's seq
                // before any later turn, and before any turn ending past that seq.
                Numbering::Renumbered
            } else {
                Numbering::Unknown
            };
        }
        match self.numbering {
            Numbering::Renumbered => turn <= anchor.turn,
            Numbering::Unknown | Numbering::Kept => end_seq <= anchor.end_seq,
        }
    }

    /// Whether the log was found renumbered since the anchor was recorded.
    pub fn renumbered(&self) -> bool {
        self.numbering == Numbering::Renumbered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(anchor: Option<Anchor>, by_turn: bool, turns: &[(u64, u64)]) -> (Vec<bool>, bool) {
        let mut c = Covered::new(anchor, by_turn);
        let covered = turns.iter().map(|&(t, e)| c.covers(t, e)).collect();
        (covered, c.renumbered())
    }

    const A: Option<Anchor> = Some(Anchor {
        turn: 3,
        end_seq: 30,
    });

    #[test]
    fn kept_numbering_decides_by_seq() {
        let turns = [(1, 10), (2, 20), (3, 30), (4, 40), (5, 50)];
        assert_eq!(
            run(A, true, &turns),
            (vec![true, true, true, false, false], false)
        );
    }

    #[test]
    fn shrunk_numbering_decides_by_turn() {
        // v1 → v2: the anchor's turn now ends at seq 18; turns 4 and 5 end below 30.
        let turns = [(1, 6), (2, 12), (3, 18), (4, 24), (5, 29)];
        assert_eq!(
            run(A, true, &turns),
            (vec![true, true, true, false, false], true)
        );
    }

    #[test]
    fn grown_numbering_decides_by_turn() {
        // v4 → v5: a `turn/end` added early; turns 2 and 3 now end past 30.
        let turns = [(1, 11), (2, 21), (3, 31), (4, 41)];
        assert_eq!(run(A, true, &turns), (vec![true, true, true, false], true));
        // v4 → v5 splits an interrupted turn out of the anchor's: it keeps its own, lower
        // number (the merged turn was signed under the later one's).
        let turns = [(1, 11), (2, 19), (3, 32), (4, 41)];
        assert_eq!(run(A, true, &turns), (vec![true, true, true, false], true));
    }

    #[test]
    fn a_missing_anchor_turn_is_renumbering_too() {
        let turns = [(1, 10), (2, 20), (4, 25), (5, 35)];
        assert_eq!(run(A, true, &turns), (vec![true, true, false, false], true));
    }

    #[test]
    fn without_trusted_turn_numbers_seqs_decide() {
        let turns = [(1, 6), (2, 12), (3, 18), (4, 24), (5, 35)];
        assert_eq!(
            run(A, false, &turns),
            (vec![true, true, true, true, false], false)
        );
        assert_eq!(run(None, true, &turns).0, vec![false; 5]);
    }
}

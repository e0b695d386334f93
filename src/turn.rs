//! Turn spans from events. A turn is the span from the event after the previous
//! `turn/end` (or the log's start) to its own `turn/end`, inclusive. A turn without its
//! `turn/end` is in flight and is never archived. Pure. OWNER: compose helper.

use crate::session::Event;

/// A finished turn: every event of its span, in seq order, ending with `turn/end`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedTurn {
    /// `data.turn` of the `turn/end` (or of `turn/start`); the ordinal when absent.
    pub turn: u64,
    pub first_seq: u64,
    pub end_seq: u64,
    /// `reason.kind` of the `turn/end`.
    pub reason: String,
    pub events: Vec<Event>,
}

/// Streams events into completed turns, holding only the in-flight turn's events.
#[derive(Debug, Default)]
pub struct TurnAssembler {
    _private: (),
}

impl TurnAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed one event; returns the turn it completes, if it is a `turn/end`.
    pub fn push(&mut self, event: Event) -> Option<CompletedTurn> {
        let _ = event;
        unimplemented!("compose helper pending")
    }

    /// Seqs of the in-flight turn (events after the last `turn/end`), if any.
    pub fn in_flight(&self) -> Option<(u64, u64)> {
        unimplemented!("compose helper pending")
    }
}

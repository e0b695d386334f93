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

/// The most events reserved for a turn before it starts.
const MAX_RESERVED_EVENTS: usize = 1024;

/// Streams events into completed turns, holding only the in-flight turn's events.
///
/// Turn numbering: `data.turn` of the `turn/end`; else `data.turn` of the span's last
/// `turn/start` carrying one; else the turn's ordinal in the log, counting from 1 (the
/// ordinal counts every completed turn, numbered or not, so it stays aligned with the log
/// when only some turns lack a number).
#[derive(Debug, Default)]
pub struct TurnAssembler {
    /// Events after the last `turn/end`, in seq order.
    buffer: Vec<Event>,
    /// Completed turns before the next one, for ordinal numbering.
    completed_before: u64,
    /// Lowest seq still accepted: the resume point, then one past the last event pushed.
    next_seq: u64,
}

impl TurnAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// An assembler resuming mid-log: `first_seq` is the first seq after the last
    /// archived `turn/end`, `completed_before` the number of turns completed before it
    /// (it only matters for turns whose events carry no turn number). Events below
    /// `first_seq` are ignored, so a caller may replay the log from its start.
    pub fn starting_at(first_seq: u64, completed_before: u64) -> Self {
        Self {
            buffer: Vec::new(),
            completed_before,
            next_seq: first_seq,
        }
    }

    /// Feed one event; returns the turn it completes, if it is a `turn/end`.
    ///
    /// Events must come in ascending seq order (the reader guarantees contiguity); an
    /// event at or below a seq already seen, or below the resume point, is a replay and
    /// is ignored rather than counted twice.
    pub fn push(&mut self, event: Event) -> Option<CompletedTurn> {
        if event.seq < self.next_seq {
            return None;
        }
        // A seq of u64::MAX cannot be followed by anything; saturating keeps it accepted once.
        self.next_seq = event.seq.saturating_add(1);
        let reason = event.turn_end_reason().map(str::to_owned);
        self.buffer.push(event);
        let reason = reason?;

        // The next turn's buffer starts at this one's size (capped: one huge turn must not
        // keep memory for all after it); growing it step by step was a large share of the
        // reader's allocations.
        let capacity = self.buffer.len().min(MAX_RESERVED_EVENTS);
        let events = std::mem::replace(&mut self.buffer, Vec::with_capacity(capacity));
        self.completed_before += 1;
        let ordinal = self.completed_before;
        let end = events.last().expect("the turn/end was just pushed");
        let turn = end
            .turn()
            .or_else(|| {
                events
                    .iter()
                    .rev()
                    .filter(|e| e.kind == "turn/start")
                    .find_map(Event::turn)
            })
            .unwrap_or(ordinal);
        Some(CompletedTurn {
            turn,
            first_seq: events[0].seq,
            end_seq: end.seq,
            reason,
            events,
        })
    }

    /// Seqs of the in-flight turn (events after the last `turn/end`), if any.
    pub fn in_flight(&self) -> Option<(u64, u64)> {
        Some((self.buffer.first()?.seq, self.buffer.last()?.seq))
    }

    /// Turns completed so far, counting those before the resume point.
    pub fn completed(&self) -> u64 {
        self.completed_before
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn ev(seq: u64, kind: &str, data: Value) -> Event {
        Event::new(seq, kind, data)
    }

    fn end(seq: u64, turn: Option<u64>, reason: &str) -> Event {
        let mut data = json!({ "reason": { "kind": reason } });
        if let Some(t) = turn {
            data["turn"] = json!(t);
        }
        ev(seq, "turn/end", data)
    }

    fn feed(asm: &mut TurnAssembler, events: Vec<Event>) -> Vec<CompletedTurn> {
        events.into_iter().filter_map(|e| asm.push(e)).collect()
    }

    #[test]
    fn pre_turn_events_belong_to_turn_one() {
        let mut asm = TurnAssembler::new();
        let turns = feed(
            &mut asm,
            vec![
                ev(0, "permission/preset", json!({})),
                ev(1, "sandbox/mode", json!({})),
                ev(2, "turn/start", json!({"turn": 1})),
                ev(3, "user/message", json!({})),
                end(4, Some(1), "completed"),
            ],
        );
        assert_eq!(turns.len(), 1);
        let t = &turns[0];
        assert_eq!((t.turn, t.first_seq, t.end_seq), (1, 0, 4));
        assert_eq!(
            t.events.iter().map(|e| e.seq).collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 4]
        );
        assert_eq!(t.reason, "completed");
        assert_eq!(asm.in_flight(), None);
    }

    #[test]
    fn trailing_in_flight_turn_is_never_emitted() {
        let mut asm = TurnAssembler::new();
        let turns = feed(
            &mut asm,
            vec![
                ev(0, "turn/start", json!({"turn": 1})),
                end(1, Some(1), "completed"),
                ev(2, "turn/start", json!({"turn": 2})),
                ev(3, "user/message", json!({})),
                ev(4, "assistant/message", json!({})),
            ],
        );
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].end_seq, 1);
        assert_eq!(asm.in_flight(), Some((2, 4)));
        assert_eq!(asm.completed(), 1);
    }

    #[test]
    fn aborted_and_error_turns_are_emitted_with_their_reason() {
        let mut asm = TurnAssembler::new();
        let turns = feed(
            &mut asm,
            vec![
                ev(0, "turn/start", json!({"turn": 1})),
                end(1, Some(1), "aborted"),
                ev(2, "turn/start", json!({"turn": 2})),
                ev(3, "assistant/attempt", json!({})),
                end(4, Some(2), "error"),
                // A turn/end with no reason at all still ends the turn.
                ev(5, "turn/end", json!({"turn": 3})),
            ],
        );
        let got: Vec<_> = turns.iter().map(|t| (t.turn, t.reason.as_str())).collect();
        assert_eq!(got, vec![(1, "aborted"), (2, "error"), (3, "unknown")]);
    }

    #[test]
    fn turn_number_falls_back_to_turn_start_then_ordinal() {
        let mut asm = TurnAssembler::new();
        let turns = feed(
            &mut asm,
            vec![
                ev(0, "turn/start", json!({"turn": 7})),
                end(1, None, "completed"),
                ev(2, "user/message", json!({})),
                end(3, None, "completed"),
                ev(4, "turn/start", json!({"turn": 9})),
                end(5, Some(12), "completed"),
            ],
        );
        let numbers: Vec<_> = turns.iter().map(|t| t.turn).collect();
        // Second turn has no number anywhere: its ordinal (2nd completed turn).
        assert_eq!(numbers, vec![7, 2, 12]);
    }

    #[test]
    fn starting_mid_log_ignores_earlier_events_and_keeps_ordinals() {
        let mut asm = TurnAssembler::starting_at(10, 4);
        assert_eq!(asm.in_flight(), None);
        let mut events = vec![ev(8, "user/message", json!({})), end(9, None, "completed")];
        events.extend([
            ev(10, "user/message", json!({})),
            end(11, None, "completed"),
        ]);
        let turns = feed(&mut asm, events);
        assert_eq!(turns.len(), 1);
        assert_eq!(
            (turns[0].turn, turns[0].first_seq, turns[0].end_seq),
            (5, 10, 11)
        );
    }

    #[test]
    fn replayed_events_are_not_counted_twice() {
        let mut asm = TurnAssembler::new();
        let mut turns = feed(
            &mut asm,
            vec![
                ev(0, "user/message", json!({})),
                end(1, Some(1), "completed"),
            ],
        );
        turns.extend(feed(
            &mut asm,
            vec![end(1, Some(1), "completed"), ev(0, "x", json!({}))],
        ));
        assert_eq!(turns.len(), 1);
        assert_eq!(asm.in_flight(), None);
    }

    #[test]
    fn a_bare_turn_end_is_a_one_event_turn() {
        let mut asm = TurnAssembler::new();
        let turns = feed(
            &mut asm,
            vec![end(0, Some(1), "completed"), end(1, Some(2), "completed")],
        );
        assert_eq!(turns.len(), 2);
        assert_eq!(
            (turns[1].first_seq, turns[1].end_seq, turns[1].events.len()),
            (1, 1, 1)
        );
    }

    #[test]
    fn many_turns_stream_with_bounded_buffer() {
        let mut asm = TurnAssembler::new();
        let mut seq = 0;
        let mut count = 0;
        for t in 1..=1000u64 {
            for _ in 0..5 {
                assert!(asm.push(ev(seq, "assistant/chunk", json!({}))).is_none());
                seq += 1;
            }
            let done = asm
                .push(end(seq, Some(t), "completed"))
                .expect("turn/end completes");
            assert_eq!(done.events.len(), 6);
            assert_eq!(done.turn, t);
            seq += 1;
            count += 1;
            assert!(asm.buffer.is_empty());
        }
        assert_eq!(count, 1000);
    }
}

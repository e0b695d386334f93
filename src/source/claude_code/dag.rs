//! The conversation DAG of one transcript (the reader's first pass, see [`super::reader`]):
//! every `uuid` line's node and where it stands against the current leaf's chain.
//!
//! Compact because a transcript holds one node a line and the whole DAG is needed to know
//! which lines a rewind or an edit abandoned: nodes in line order addressed by a dense `u32`
//! index (20 bytes each), one map from a uuid's key to its index, and each node's children
//! as first-child / next-sibling links inside the nodes — no list per parent. A child read
//! before its parent waits under the parent's key until the parent comes (or for ever: a
//! parent in another file).

use std::collections::HashMap;
use std::sync::Arc;

/// No node: a parent not in the DAG, the end of a child list.
const NONE: u32 = u32::MAX;

/// The last line index a node can name: node indices and lines are `u32`, `NONE` excluded.
pub(super) const MAX_LINE: u64 = NONE as u64 - 1;

/// Line `i` as a node's line, `None` past [`MAX_LINE`] (a transcript of 4 G lines, ~400 GB:
/// the reader refuses it by name rather than widen every node).
pub(super) fn node_line(i: u64) -> Option<u32> {
    u32::try_from(i).ok().filter(|&l| u64::from(l) <= MAX_LINE)
}

/// A node's place against the current leaf's chain (see [`Dag::classify`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum St {
    /// Not classified yet (appended since the last classification).
    New,
    /// On the chain of the current leaf.
    Chain,
    /// Off the chain, kept (a fragment whose parent is elsewhere, a tool result logged as
    /// a sibling, a cycle).
    Kept,
    /// On a branch that leaves the chain at a person's prompt: a rewind or an edit.
    Abandoned,
    /// On the path [`Dag::settle`] is walking up (met again: a cycle). Never left behind.
    Walking,
}

/// The DAG facts of one uuid. `state` and `prompt_like` fit in the 4-byte alignment's
/// padding: packing them in one byte would not make the node smaller.
#[derive(Clone, Debug, PartialEq)]
struct Node {
    /// The parent's index: `parentUuid`, or `logicalParentUuid` where that is null (a
    /// compaction boundary: the logical parent bridges the chain); `NONE` while the parent
    /// is not in the DAG.
    parent: u32,
    /// The first line that carried this uuid.
    line: u32,
    first_child: u32,
    next_sibling: u32,
    prompt_like: bool,
    state: St,
}

/// See the module doc.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Dag {
    /// In the order their lines came.
    nodes: Vec<Node>,
    /// A uuid's key → its node.
    index: HashMap<u64, u32>,
    /// A parent's key not in the DAG (yet) → the first of the children naming it (linked by
    /// `next_sibling`).
    waiting: HashMap<u64, u32>,
}

impl Dag {
    pub(super) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(super) fn contains(&self, key: u64) -> bool {
        self.index.contains_key(&key)
    }

    /// The state of `key`'s node and the first line that carried it.
    pub(super) fn get(&self, key: u64) -> Option<(St, u64)> {
        let n = &self.nodes[*self.index.get(&key)? as usize];
        Some((n.state, u64::from(n.line)))
    }

    /// Every node's state, in line order (tests compare a kept DAG with a fresh one).
    #[cfg(test)]
    pub(super) fn states(&self) -> impl Iterator<Item = (u64, St)> + '_ {
        self.nodes.iter().map(|n| (u64::from(n.line), n.state))
    }

    /// Add the node of `key` (not in the DAG: see [`Dag::contains`]), first carried by
    /// `line` (at most [`MAX_LINE`]). True when a node of a line before `older_than` named
    /// it as its parent: that older node's branch changes (classify again).
    pub(super) fn add(
        &mut self,
        key: u64,
        parent: Option<u64>,
        line: u32,
        prompt_like: bool,
        older_than: u64,
    ) -> bool {
        let me = u32::try_from(self.nodes.len()).expect("fewer nodes than lines ≤ MAX_LINE");
        let mut node = Node {
            parent: NONE,
            line,
            first_child: NONE,
            next_sibling: NONE,
            prompt_like,
            state: St::New,
        };
        if let Some(p) = parent {
            match self.index.get(&p) {
                Some(&pi) => {
                    node.parent = pi;
                    let pn = &mut self.nodes[pi as usize];
                    node.next_sibling = pn.first_child;
                    pn.first_child = me;
                }
                None if p == key => {
                    // Its own parent: a cycle of one.
                    node.parent = me;
                    node.first_child = me;
                }
                None => {
                    let first = self.waiting.entry(p).or_insert(NONE);
                    node.next_sibling = *first;
                    *first = me;
                }
            }
        }
        // The children read before it.
        let mut adopted = false;
        if let Some(first) = self.waiting.remove(&key) {
            let mut c = first;
            while c != NONE {
                let child = &mut self.nodes[c as usize];
                child.parent = me;
                adopted |= u64::from(child.line) < older_than;
                c = child.next_sibling;
            }
            // Behind its own children, if it is its own parent too.
            let mut last = first;
            while self.nodes[last as usize].next_sibling != NONE {
                last = self.nodes[last as usize].next_sibling;
            }
            self.nodes[last as usize].next_sibling = node.first_child;
            node.first_child = first;
        }
        self.nodes.push(node);
        self.index.insert(key, me);
        adopted
    }

    fn children(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
        let mut c = self.nodes[i as usize].first_child;
        std::iter::from_fn(move || {
            (c != NONE).then(|| {
                let this = c;
                c = self.nodes[c as usize].next_sibling;
                this
            })
        })
    }

    /// Every node's place against the chain of `leaf`, from scratch: the chain from the
    /// leaf up (a cycle or a missing parent ends it), then every other node by the branch it
    /// hangs on ([`Dag::settle`]).
    pub(super) fn classify(&mut self, leaf: Option<u64>) {
        for n in &mut self.nodes {
            n.state = St::New;
        }
        let mut cur = leaf
            .and_then(|k| self.index.get(&k).copied())
            .unwrap_or(NONE);
        while cur != NONE {
            let n = &mut self.nodes[cur as usize];
            if n.state != St::New {
                break; // a cycle
            }
            n.state = St::Chain;
            cur = n.parent;
        }
        let mut path = Vec::new();
        for i in 0..self.nodes.len() {
            if self.nodes[i].state == St::New {
                self.settle(i as u32, &mut path);
            }
        }
    }

    /// Classify `start` and the unclassified nodes above it: walk up to a classified node, a
    /// missing parent or a cycle; then from the top down, the child of a chain node decides
    /// its branch (abandoned when it is a person's prompt) and its descendants inherit it. A
    /// branch that reaches no chain node (a fragment whose parent is in another file, a
    /// cycle) is kept.
    fn settle(&mut self, start: u32, path: &mut Vec<u32>) {
        path.clear();
        let mut cur = start;
        let mut top = St::Kept;
        while cur != NONE {
            let n = &mut self.nodes[cur as usize];
            match n.state {
                St::New => {}
                St::Walking => break, // a cycle: kept
                done => {
                    top = done;
                    break;
                }
            }
            n.state = St::Walking;
            path.push(cur);
            cur = n.parent;
        }
        let mut inherited = top;
        for &i in path.iter().rev() {
            let n = &mut self.nodes[i as usize];
            n.state = match inherited {
                St::Chain if n.prompt_like => St::Abandoned,
                St::Chain | St::New | St::Walking => St::Kept,
                other => other,
            };
            inherited = n.state;
        }
    }

    /// Classify the nodes added since the DAG held `added_from` nodes when the new leaf
    /// descends from the old one: the chain grows by the nodes between them, the branches
    /// hanging off those nodes are classified again, and only the added nodes are walked.
    /// False, with the DAG left to [`Dag::classify`], when the leaf moved elsewhere (a
    /// rewind, an edit, the first leaf).
    pub(super) fn extend(
        &mut self,
        was_leaf: Option<u64>,
        leaf: Option<u64>,
        added_from: usize,
    ) -> bool {
        let (Some(old), Some(new)) = (was_leaf, leaf) else {
            return false;
        };
        let (Some(&old), Some(&new)) = (self.index.get(&old), self.index.get(&new)) else {
            return false;
        };
        if self.nodes[old as usize].state != St::Chain {
            return false;
        }
        // The new chain's part below the old leaf.
        let mut segment = Vec::new();
        let mut cur = new;
        while cur != old {
            if cur == NONE {
                return false; // a missing parent before the old leaf
            }
            let n = &self.nodes[cur as usize];
            if n.state == St::Chain || segment.len() > self.nodes.len() {
                return false; // back on the old chain above its leaf (a rewind), or a cycle
            }
            segment.push(cur);
            cur = n.parent;
        }
        // Old nodes that joined the chain (a `system` line under the old leaf): their other
        // branches hang off the chain now, each decided by its first node.
        for &i in &segment {
            self.nodes[i as usize].state = St::Chain;
        }
        let mut stack: Vec<(u32, St)> = Vec::new();
        for &i in &segment {
            for c in self.children(i) {
                let n = &self.nodes[c as usize];
                if n.state != St::Chain {
                    let s = if n.prompt_like {
                        St::Abandoned
                    } else {
                        St::Kept
                    };
                    stack.push((c, s));
                }
            }
        }
        let mut steps = 0usize;
        while let Some((i, s)) = stack.pop() {
            steps += 1;
            if steps > self.nodes.len() {
                return false; // cannot happen (a branch off the chain holds no cycle); start over
            }
            self.nodes[i as usize].state = s;
            for c in self.children(i) {
                if self.nodes[c as usize].state != St::Chain {
                    stack.push((c, s));
                }
            }
        }
        let mut path = Vec::new();
        for i in added_from..self.nodes.len() {
            if self.nodes[i].state == St::New {
                self.settle(i as u32, &mut path);
            }
        }
        true
    }
}

/// The DAG as the second pass reads it: the kept first pass's (a followed transcript), or,
/// when nothing keeps it, traded for each node's key, first line and state sorted by key
/// (16 bytes a node where the DAG takes about 45): the second pass then holds a third of it.
pub(super) enum Lookup {
    Shared(Arc<Dag>),
    Sorted(Box<[Entry]>),
}

/// What the second pass asks of a node.
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    key: u64,
    line: u32,
    state: St,
}

impl Lookup {
    /// The state of `key`'s node and the first line that carried it.
    pub(super) fn get(&self, key: u64) -> Option<(St, u64)> {
        match self {
            Lookup::Shared(dag) => dag.get(key),
            Lookup::Sorted(entries) => {
                let e = entries
                    .binary_search_by_key(&key, |e| e.key)
                    .ok()
                    .map(|i| entries[i])?;
                Some((e.state, u64::from(e.line)))
            }
        }
    }

    /// The sorted form, when no one else holds the DAG.
    pub(super) fn alone(self) -> Lookup {
        let Lookup::Shared(dag) = self else {
            return self;
        };
        match Arc::try_unwrap(dag) {
            Ok(dag) => Lookup::Sorted(dag.into_sorted()),
            Err(shared) => Lookup::Shared(shared),
        }
    }

    /// The DAG itself (tests compare a kept one with a fresh one).
    #[cfg(test)]
    pub(super) fn shared(&self) -> &Dag {
        match self {
            Lookup::Shared(dag) => dag,
            Lookup::Sorted(_) => panic!("a plan's DAG was traded"),
        }
    }
}

impl Dag {
    fn into_sorted(self) -> Box<[Entry]> {
        let mut entries = Vec::with_capacity(self.index.len());
        entries.extend(self.index.iter().map(|(&key, &i)| {
            let n = &self.nodes[i as usize];
            Entry {
                key,
                line: n.line,
                state: n.state,
            }
        }));
        // Freed before the sort, which needs no more.
        drop(self);
        entries.sort_unstable_by_key(|e| e.key);
        entries.into_boxed_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(d: &Dag) -> Vec<St> {
        d.states().map(|(_, s)| s).collect()
    }

    #[test]
    fn the_sorted_form_answers_as_the_dag() {
        let mut d = Dag::default();
        d.add(10, None, 0, true, 0);
        d.add(30, Some(10), 1, false, 0);
        d.add(20, Some(10), 3, true, 0);
        d.classify(Some(30));
        let keys = [10, 20, 30, 40];
        let want: Vec<_> = keys.iter().map(|&k| d.get(k)).collect();
        assert_eq!(want[1], Some((St::Abandoned, 3)));
        assert_eq!(want[3], None);
        let shared = Lookup::Shared(Arc::new(d));
        let other = match &shared {
            Lookup::Shared(d) => Arc::clone(d),
            Lookup::Sorted(_) => unreachable!(),
        };
        // Still held elsewhere: kept as it is.
        let shared = shared.alone();
        assert!(matches!(shared, Lookup::Shared(_)));
        drop(other);
        let sorted = shared.alone();
        assert!(matches!(sorted, Lookup::Sorted(_)));
        let got: Vec<_> = keys.iter().map(|&k| sorted.get(k)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn lines_past_32_bits_are_refused_not_wrapped() {
        assert_eq!(node_line(0), Some(0));
        assert_eq!(node_line(MAX_LINE), Some(u32::MAX - 1));
        assert_eq!(node_line(MAX_LINE + 1), None);
        assert_eq!(node_line(1 << 32), None);
        assert_eq!(node_line(u64::MAX), None);
    }

    #[test]
    fn a_late_parent_adopts_its_children_and_says_so_when_they_are_older() {
        let mut d = Dag::default();
        // 2's parent 1 comes later; 3 hangs under 2.
        assert!(!d.add(2, Some(1), 0, false, 0));
        assert!(!d.add(3, Some(2), 1, false, 0));
        // Read later than the child: an older node's branch changes.
        assert!(d.add(1, None, 2, false, 2));
        d.classify(Some(3));
        assert_eq!(states(&d), vec![St::Chain, St::Chain, St::Chain]);
        // A parent read in the same read as its child adopts nothing older.
        let mut d = Dag::default();
        assert!(!d.add(5, Some(4), 0, false, 0));
        assert!(!d.add(4, None, 1, false, 0));
    }

    #[test]
    fn cycles_and_missing_parents_are_kept_and_a_rewound_prompt_abandoned() {
        let mut d = Dag::default();
        d.add(1, None, 0, true, 0); // the first prompt
        d.add(2, Some(1), 1, false, 0); // its answer
        d.add(3, Some(2), 2, true, 0); // a prompt later rewound
        d.add(4, Some(3), 3, false, 0); // its answer: abandoned with it
        d.add(5, Some(2), 4, true, 0); // the prompt typed again
        d.add(6, Some(6), 5, false, 0); // its own parent
        d.add(7, Some(8), 6, false, 0); // a cycle of two
        d.add(8, Some(7), 7, false, 0);
        d.add(9, Some(99), 8, true, 0); // a parent in another file
        d.classify(Some(5));
        use St::*;
        assert_eq!(
            states(&d),
            vec![Chain, Chain, Abandoned, Abandoned, Chain, Kept, Kept, Kept, Kept]
        );
        // A leaf in a cycle: the chain is the cycle, walked once.
        d.classify(Some(8));
        assert_eq!(states(&d)[6..8], [Chain, Chain]);
    }

    #[test]
    fn an_extension_under_the_leaf_classifies_as_from_scratch() {
        let mut d = Dag::default();
        d.add(1, None, 0, true, 0);
        d.add(2, Some(1), 1, false, 0);
        d.classify(Some(2));
        let from = d.len();
        d.add(3, Some(2), 2, false, 0); // a `system` line under the leaf
        d.add(4, Some(2), 3, true, 0); // a prompt beside it, left behind
        d.add(5, Some(3), 4, true, 0); // the next prompt
        assert!(d.extend(Some(2), Some(5), from));
        let mut whole = d.clone();
        whole.classify(Some(5));
        assert_eq!(d, whole);
        assert_eq!(states(&d)[3], St::Abandoned);
        // A leaf above the old one (a rewind) is not an extension.
        assert!(!d.extend(Some(5), Some(2), d.len()));
    }
}

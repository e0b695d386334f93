//! A session's lineage: the session and its ancestors by the headers' `parentSession` edges
//! (the rules block governs a session by its lineage's session rules). The walk is pure;
//! [`lineage`] reads the workspace's log headers for it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::Serialize;

use super::discover::{self, DiscoverError};
use super::reader::{self, ReaderOptions};

/// Most sessions the ancestry walk expands before it stops and says so.
pub const LINEAGE_CAP: usize = 64;

/// A session and its ancestors, nearest first (the session itself first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lineage {
    pub sessions: Vec<String>,
    /// The walk stopped at [`LINEAGE_CAP`] with ancestors left: said, never silent.
    pub truncated: bool,
    /// The session has no log in this workspace: its ancestors are unknown here.
    pub unknown_session: bool,
}

impl Lineage {
    pub fn root(&self) -> &str {
        self.sessions.last().map(String::as_str).unwrap_or_default()
    }

    /// The line said inside the block (and by `rule active`) when the cap bit.
    pub fn note(&self) -> Option<String> {
        self.truncated.then(|| {
            format!(
                "LINEAGE TRUNCATED: the ancestry walk hit its cap of {LINEAGE_CAP} sessions; session rules of older ancestors are not included"
            )
        })
    }
}

/// Walk `parentSession` edges upward from `start` (pure). The only edge the DSH log format
/// records is the header's `parentSession` (there is no registry edge in the log), so that
/// is the walk. Only upward: a child's rules never govern the session that spawned it.
pub fn walk_ancestors(
    start: &str,
    parents: &BTreeMap<String, Option<String>>,
    cap: usize,
) -> Lineage {
    let mut sessions = vec![start.to_owned()];
    let mut seen: BTreeSet<String> = sessions.iter().cloned().collect();
    let mut current = start.to_owned();
    let mut truncated = false;
    while let Some(Some(parent)) = parents.get(&current) {
        if seen.contains(parent) {
            break;
        }
        if sessions.len() > cap {
            truncated = true;
            break;
        }
        seen.insert(parent.clone());
        sessions.push(parent.clone());
        current = parent.clone();
    }
    Lineage {
        unknown_session: !parents.contains_key(start),
        sessions,
        truncated,
    }
}

/// The lineage of `session` from the workspace's session logs (headers only; an unreadable
/// header contributes no edge rather than failing).
pub fn lineage(
    dsh_home: &Path,
    workspace: &Path,
    options: ReaderOptions,
    session: &str,
) -> Result<Lineage, DiscoverError> {
    let logs = discover::list_sessions(dsh_home, &workspace.to_string_lossy())?;
    let mut parents = BTreeMap::new();
    for log in logs {
        if let Ok(Some(header)) = reader::read_header(&log.log, options) {
            parents.insert(header.id, header.parent_session);
        }
    }
    Ok(walk_ancestors(session, &parents, LINEAGE_CAP))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parents(edges: &[(&str, Option<&str>)]) -> BTreeMap<String, Option<String>> {
        edges
            .iter()
            .map(|(a, b)| ((*a).to_owned(), b.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn the_walk_goes_up_only_and_survives_loops() {
        let p = parents(&[
            ("c", Some("b")),
            ("b", Some("a")),
            ("a", None),
            ("d", Some("c")),
        ]);
        let l = walk_ancestors("c", &p, LINEAGE_CAP);
        assert_eq!(l.sessions, vec!["c", "b", "a"]);
        assert!(!l.truncated && !l.unknown_session);
        assert_eq!(l.root(), "a");
        let looped = parents(&[("x", Some("y")), ("y", Some("x"))]);
        assert_eq!(
            walk_ancestors("x", &looped, LINEAGE_CAP).sessions,
            vec!["x", "y"]
        );
        let unknown = walk_ancestors("zzz", &p, LINEAGE_CAP);
        assert!(unknown.unknown_session);
        assert_eq!(unknown.sessions, vec!["zzz"]);
        // A parent we have no log of is still an ancestor (its rules may be here).
        let partial = parents(&[("k", Some("gone"))]);
        assert_eq!(
            walk_ancestors("k", &partial, LINEAGE_CAP).sessions,
            vec!["k", "gone"]
        );
    }

    #[test]
    fn the_walk_says_when_the_cap_bites() {
        let edges: Vec<(String, Option<String>)> = (0..200)
            .map(|i| (format!("s{i}"), Some(format!("s{}", i + 1))))
            .collect();
        let p: BTreeMap<String, Option<String>> = edges.into_iter().collect();
        let l = walk_ancestors("s0", &p, LINEAGE_CAP);
        assert!(l.truncated);
        assert_eq!(l.sessions.len(), LINEAGE_CAP + 1);
        assert!(l
            .note()
            .is_some_and(|n| n.starts_with("LINEAGE TRUNCATED:")));
    }
}

//! No import cycle between modules. This test reads the sources: every `crate::…` and
//! `super::…` path in `src/**/*.rs` (the library; `src/cli/` and `main.rs` are the binary,
//! above everything), outside comments and the `#[cfg(test)] mod tests` block, names the
//! module it reaches (the longest path that is a module file); a module and its own parent
//! or child are one unit (Rust lets a child use its parent's items). The graph is read at
//! every depth of the tree:
//!
//! - **top level** (`store`, `rules`, `index`, …): each module read as its top-level one;
//! - **depth 2** (a file module, or a folder's child: `store::read`, `enrich::http`,
//!   `source::claude_code`), and so on down to the deepest file (`source::claude_code::reader`:
//!   siblings inside one folder).
//!
//! The edges of the pair in [`ALLOWED_PAIRS`] are left out (by design, with its reason). At
//! every depth there is no cycle but the knots listed in [`KNOWN`] with their reasons; the
//! test fails when a module joins one, when a new knot forms, and when a listed one is broken
//! (then shorten the list).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Cycles at the module grain that are by design: `redact::Redacted::read_back` takes the
/// `store::read::ReadBack` proof that only the store's document reader makes, and that reader
/// returns `Redacted` values; moving either type would turn a compile-time guarantee into a
/// convention.
const ALLOWED_PAIRS: &[(&str, &str)] = &[("redact", "store::read")];

/// The knots left, each sorted by name (its depth is its modules'), with their reasons: none
/// (the last, Claude Code's reader ↔ its subagent folding, ended when the line and content
/// types both read got `source::claude_code::line`). A knot listed here is a debt to pay.
const KNOWN: &[&[&str]] = &[];

type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Every `.rs` file under `dir` (the errors test reads them too).
pub(crate) fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `store/read.rs` → [store, read]; `enrich/mod.rs` → [enrich].
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The code of a file without its comment lines and its test module (the shape test reads
/// it too).
pub(crate) fn code(text: &str) -> String {
    let mut text = text;
    if let Some(at) = text.find("#[cfg(test)]\nmod tests") {
        text = &text[..at];
    }
    // Comment lines emptied, not dropped: line numbers stay the file's.
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of a use tree starting at `s` (`a::b`, `{a, b::{c, d}}`, `a::*`).
fn tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let s_trim = s.trim_start();
    let skipped = s.len() - s_trim.len();
    if let Some(rest) = s_trim.strip_prefix('{') {
        let mut out = Vec::new();
        let mut at = 1;
        let mut rest = rest;
        loop {
            let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            at += rest.len() - trimmed.len();
            rest = trimmed;
            if rest.is_empty() {
                break;
            }
            if let Some(after) = rest.strip_prefix('}') {
                at += 1;
                let _ = after;
                break;
            }
            let (paths, used) = tree(rest);
            if used == 0 {
                // Something this reader does not know (`self`, `*`, `as x`): skip a char.
                at += 1;
                rest = &rest[rest.chars().next().map_or(1, char::len_utf8)..];
                continue;
            }
            out.extend(paths);
            at += used;
            rest = &rest[used..];
        }
        return (out, skipped + at);
    }
    let ident_len = s_trim.find(|c: char| !is_ident(c)).unwrap_or(s_trim.len());
    if ident_len == 0 {
        return (Vec::new(), 0);
    }
    let ident = s_trim[..ident_len].to_owned();
    let after = &s_trim[ident_len..];
    if let Some(next) = after.strip_prefix("::") {
        let (paths, used) = tree(next);
        let paths = if paths.is_empty() {
            vec![vec![ident]]
        } else {
            paths
                .into_iter()
                .map(|mut p| {
                    p.insert(0, ident.clone());
                    p
                })
                .collect()
        };
        return (paths, skipped + ident_len + 2 + used);
    }
    (vec![vec![ident]], skipped + ident_len)
}

/// The longest prefix of `path` that is a module.
fn owner(path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

/// The import graph between modules: a file module or a folder's child names a node.
fn graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    files.sort();
    let rels: Vec<PathBuf> = files
        .iter()
        .map(|f| f.strip_prefix(&root).expect("under src").to_path_buf())
        .filter(|r| {
            !(r == Path::new("lib.rs") || r == Path::new("main.rs") || r.starts_with("cli"))
        })
        .collect();
    let modules: BTreeSet<Vec<String>> = rels.iter().map(|r| module_of(r)).collect();
    let mut g = Graph::new();
    for rel in &rels {
        let me = module_of(rel);
        let node = |m: &[String]| m.join("::");
        let text = code(&std::fs::read_to_string(root.join(rel)).expect("read"));
        for (anchor, base) in [
            ("crate::", Vec::new()),
            ("super::", me[..me.len() - 1].to_vec()),
        ] {
            let mut from = 0;
            while let Some(at) = text[from..].find(anchor) {
                let start = from + at;
                from = start + anchor.len();
                // `xcrate::` is another name; `super::super::` is read from its first.
                if text[..start].ends_with(|c: char| is_ident(c) || c == ':') {
                    continue;
                }
                let line = text[..start].matches('\n').count() + 1;
                for path in tree(&text[from..]).0 {
                    let mut base = base.clone();
                    let mut path = path.as_slice();
                    while path.first().is_some_and(|p| p == "super") {
                        base.pop();
                        path = &path[1..];
                    }
                    let full: Vec<String> =
                        base.iter().cloned().chain(path.iter().cloned()).collect();
                    let Some(target) = owner(&full, &modules) else {
                        continue;
                    };
                    let (a, b) = (node(&me), node(&target));
                    // One unit: a module and its ancestors or descendants.
                    let related = a == b
                        || b.starts_with(&format!("{a}::"))
                        || a.starts_with(&format!("{b}::"));
                    if !related {
                        g.entry(a.clone())
                            .or_default()
                            .entry(b)
                            .or_default()
                            .insert(format!("{}:{line}", rel.display()));
                    }
                }
            }
        }
    }
    g
}

/// The strongly connected components of more than one node, each sorted.
fn knots(g: &Graph) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&String> = g.keys().chain(g.values().flat_map(|e| e.keys())).collect();
    let reach = |from: &String| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for next in g.get(&n).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in &nodes {
        let knot: Vec<String> = nodes
            .iter()
            .filter(|m| *m == n || (reaches[*n].contains(**m) && reaches[*m].contains(*n)))
            .map(|m| (*m).clone())
            .collect();
        if knot.len() > 1 && !out.contains(&knot) {
            out.push(knot);
        }
    }
    out
}

/// Each knot with the edges that close it, for the failure message.
fn describe(g: &Graph, knots: &[Vec<String>]) -> String {
    let mut s = String::new();
    for knot in knots {
        s.push_str(&format!("cycle among {}:\n", knot.join(", ")));
        for a in knot {
            for (b, at) in g.get(a).into_iter().flatten() {
                if knot.contains(b) {
                    let at: Vec<&String> = at.iter().take(3).collect();
                    s.push_str(&format!("  {a} -> {b} ({at:?})\n"));
                }
            }
        }
    }
    s
}

/// The module graph without the edges of [`ALLOWED_PAIRS`].
fn module_graph() -> Graph {
    let mut g = graph();
    for (a, b) in ALLOWED_PAIRS {
        for (x, y) in [(a, b), (b, a)] {
            if let Some(edges) = g.get_mut(*x) {
                edges.remove(*y);
            }
        }
    }
    g
}

/// The same graph with each module read as its ancestor at `depth` (at 1, `store::read` →
/// `store`); a module and its own parent or child stay one unit.
fn at_depth(g: &Graph, depth: usize) -> Graph {
    let cut = |m: &str| m.split("::").take(depth).collect::<Vec<_>>().join("::");
    let mut out = Graph::new();
    for (a, edges) in g {
        for (b, at) in edges {
            let (a, b) = (cut(a), cut(b));
            let related =
                a == b || b.starts_with(&format!("{a}::")) || a.starts_with(&format!("{b}::"));
            if !related {
                out.entry(a)
                    .or_default()
                    .entry(b)
                    .or_default()
                    .extend(at.iter().cloned());
            }
        }
    }
    out
}

/// The knots found at `depth` against the listed ones of that depth.
fn check_depth(g: &Graph, depth: usize) {
    let g = at_depth(g, depth);
    let found = knots(&g);
    let known: Vec<Vec<String>> = KNOWN
        .iter()
        .filter(|k| k.first().is_some_and(|m| m.split("::").count() == depth))
        .map(|k| k.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(
        found,
        known,
        "import cycles at depth {depth} changed — move the shared item to its owner (shorten KNOWN only when a listed knot is broken):\n{}",
        describe(&g, &found)
    );
}

#[test]
fn no_import_cycle_between_modules() {
    let g = module_graph();
    let deepest = g
        .keys()
        .chain(g.values().flat_map(|e| e.keys()))
        .map(|m| m.split("::").count())
        .max()
        .unwrap_or(1);
    assert!(deepest >= 3, "the graph reads nested folders");
    for depth in 2..=deepest {
        check_depth(&g, depth);
    }
}

#[test]
fn top_level_cycles_are_only_the_known_ones() {
    check_depth(&module_graph(), 1);
}

#[test]
fn the_reader_finds_the_paths_of_a_use_tree() {
    let (paths, _) = tree("{a::b, c::{d, e::f}, g}");
    let paths: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["a::b", "c::d", "c::e::f", "g"]);
    let (paths, _) = tree("store::read::Reader;");
    assert_eq!(paths, [vec!["store", "read", "Reader"]]);
}

#[test]
fn a_cycle_through_submodules_is_a_top_level_knot() {
    let mut g = Graph::new();
    let mut edge = |a: &str, b: &str, at: &str| {
        g.entry(a.to_owned())
            .or_default()
            .entry(b.to_owned())
            .or_default()
            .insert(at.to_owned());
    };
    edge("a::x", "b", "a/x.rs:1");
    edge("b", "a::y", "b.rs:2");
    assert!(
        knots(&g).is_empty(),
        "no cycle between the modules themselves"
    );
    let top = at_depth(&g, 1);
    assert_eq!(knots(&top), [vec!["a".to_owned(), "b".to_owned()]]);
    let said = describe(&top, &knots(&top));
    assert!(
        said.contains("a -> b") && said.contains("a/x.rs:1"),
        "{said}"
    );
}

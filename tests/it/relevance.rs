//! The relevance set (issue 16): ≥ 60 labelled queries (body words, error codes, file names,
//! commands, paraphrased tasks, Chinese) over a fixed corpus (`relevance/corpus.txt`), with
//! the chapters that answer each (`relevance/queries.tsv`). Checks the set is well-formed and
//! that the ranking's recall@5 is at least 0.9; prints recall@5 and MRR beside plain BM25
//! over the same text (no boosts) — the figures recorded in docs/benchmarks.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use dsh_chapters::catalog::score::{self, ScoreParams};
use dsh_chapters::search::{self, Request};

const CORPUS: &str = include_str!("relevance/corpus.txt");
const QUERIES: &str = include_str!("relevance/queries.tsv");
const PK: &str = "relevance-set";

struct Doc {
    id: String,
    text: String,
}

/// The corpus records rendered as stored chapters (frontmatter, then the conversation).
fn corpus() -> Vec<Doc> {
    let mut docs: Vec<Doc> = Vec::new();
    let mut head: Option<Vec<String>> = None;
    let mut lines: Vec<String> = Vec::new();
    let flush = |head: &Option<Vec<String>>, lines: &[String], docs: &mut Vec<Doc>| {
        let Some(h) = head else { return };
        let [id, date, title, summary, topics] = h.as_slice() else {
            panic!("a record head has five fields: {h:?}");
        };
        let mut body = format!("# {title}\n\n> {summary}\n\n");
        let mut seq = 0;
        for line in lines {
            if let Some(rest) = line.strip_prefix("**") {
                let (who, text) = rest.split_once("**").expect("**Who**");
                let fence = if who == "Tool call" { "json" } else { "text" };
                if seq > 0 {
                    body.push_str("```\n\n");
                }
                body.push_str(&format!(
                    "**{who}** · seq {seq}\n\n```{fence}\n{}\n",
                    text.trim()
                ));
                seq += 1;
            } else {
                body.push_str(line);
                body.push('\n');
            }
        }
        body.push_str("```\n");
        let topics: Vec<String> = topics.split(',').map(|t| t.trim().to_owned()).collect();
        let root = format!("session-{id}");
        docs.push(Doc {
            id: id.clone(),
            text: format!(
                "---\ntitle: \"{title}\"\nsummary: \"{summary}\"\nkind: chapter\nprojectKey: \"{PK}\"\nharnessId: rel\nsessionId: {root}\nrootSessionId: {root}\nseqRange: [0, {}]\ndate: \"{date}T10:00:00Z\"\ntopics: [{}]\n---\n{body}",
                seq.max(1) - 1,
                topics.join(", ")
            ),
        });
    };
    for line in CORPUS.lines() {
        if line.starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("=== ") {
            flush(&head, &lines, &mut docs);
            head = Some(rest.split(" | ").map(|s| s.trim().to_owned()).collect());
            lines.clear();
        } else {
            lines.push(line.to_owned());
        }
    }
    flush(&head, &lines, &mut docs);
    docs
}

/// (query, the ids that answer it, its kind).
fn queries() -> Vec<(String, BTreeSet<String>, String)> {
    QUERIES
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 3, "query <TAB> ids <TAB> kind: {l:?}");
            (
                f[0].to_owned(),
                f[1].split(',').map(str::to_owned).collect(),
                f[2].to_owned(),
            )
        })
        .collect()
}

fn write(ws: &Path, docs: &[Doc]) -> BTreeMap<String, String> {
    let mut by_path = BTreeMap::new();
    for d in docs {
        let rel = format!(".dsh-chapters/session-{}/chapters/001-{}.md", d.id, d.id);
        let p = ws.join(&rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, &d.text).expect("write");
        by_path.insert(rel, d.id.clone());
    }
    by_path
}

/// recall@5 and reciprocal rank of one ranking.
fn judge(ranked: &[String], want: &BTreeSet<String>) -> (f64, f64) {
    let top: BTreeSet<&String> = ranked.iter().take(5).collect();
    let recall = want.iter().filter(|w| top.contains(w)).count() as f64 / want.len() as f64;
    let rr = ranked
        .iter()
        .position(|id| want.contains(id))
        .map_or(0.0, |i| 1.0 / (i as f64 + 1.0));
    (recall, rr)
}

#[test]
fn the_labelled_set_is_well_formed_and_recall_at_5_holds() {
    let docs = corpus();
    let ids: BTreeSet<String> = docs.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids.len(), docs.len(), "ids are unique");
    assert!(docs.len() >= 30, "{}", docs.len());
    let qs = queries();
    assert!(qs.len() >= 60, "at least 60 queries: {}", qs.len());
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for (q, want, kind) in &qs {
        assert!(!want.is_empty(), "{q}");
        for w in want {
            assert!(ids.contains(w), "{q}: no chapter {w}");
        }
        *kinds.entry(kind.as_str()).or_default() += 1;
    }
    for kind in ["body", "code", "file", "command", "paraphrase", "chinese"] {
        assert!(
            kinds.get(kind).is_some_and(|n| *n >= 5),
            "{kind}: {kinds:?}"
        );
    }
    let unique: BTreeSet<&String> = qs.iter().map(|(q, _, _)| q).collect();
    assert_eq!(unique.len(), qs.len(), "each query once");

    let tmp = tempfile::tempdir().expect("tmp");
    let by_path = write(tmp.path(), &docs);
    let corpus = search::open(tmp.path(), PK, false, Duration::from_secs(30)).expect("open");
    assert_eq!(corpus.documents as usize, docs.len());
    let now = score::day_start(1_775_800_000_000);
    let params = ScoreParams::default();
    let (mut ours, mut plain) = ((0.0, 0.0), (0.0, 0.0));
    let mut misses = Vec::new();
    for (q, want, kind) in &qs {
        let req = Request::text(q, None);
        let answer = corpus
            .answer_packed(&req, &params, "rel", now, 1_000_000)
            .expect("search");
        let ranked: Vec<String> = answer
            .hits
            .iter()
            .map(|h| by_path[&h.doc.path].clone())
            .collect();
        let base: Vec<String> = corpus
            .plain_bm25(&req)
            .expect("bm25")
            .iter()
            .map(|p| by_path[p].clone())
            .collect();
        let (r, rr) = judge(&ranked, want);
        let (br, brr) = judge(&base, want);
        if std::env::var_os("RELEVANCE_VERBOSE").is_some() && rr < brr {
            eprintln!(
                "  below BM25: {kind} {q:?}: ours {:?} bm25 {:?}",
                &ranked[..ranked.len().min(3)],
                &base[..base.len().min(3)]
            );
        }
        if r < 1.0 {
            misses.push(format!(
                "{kind} {q:?}: want {want:?}, got {:?}",
                &ranked[..ranked.len().min(5)]
            ));
        }
        ours = (ours.0 + r, ours.1 + rr);
        plain = (plain.0 + br, plain.1 + brr);
    }
    let n = qs.len() as f64;
    let (recall, mrr) = (ours.0 / n, ours.1 / n);
    let (b_recall, b_mrr) = (plain.0 / n, plain.1 / n);
    eprintln!(
        "relevance over {} queries, {} chapters: ours recall@5 {recall:.3} MRR {mrr:.3}; plain BM25 recall@5 {b_recall:.3} MRR {b_mrr:.3}",
        qs.len(),
        docs.len()
    );
    for m in &misses {
        eprintln!("  short of full recall: {m}");
    }
    assert!(recall >= 0.9, "recall@5 {recall:.3} < 0.9: {misses:#?}");
    assert!(
        mrr + 1e-9 >= b_mrr,
        "MRR {mrr:.3} below plain BM25's {b_mrr:.3}"
    );
}

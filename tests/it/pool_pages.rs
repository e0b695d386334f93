//! Issue #17 point 4: a pool a person reads on a forge. The pool's `README.md` and
//! `index/README.md` are derived and rebuilt by a sync that publishes; every markdown file of
//! the pool is parsed with a CommonMark parser (pulldown-cmark) and every relative link in
//! the landing pages and the topic index resolves to a file of the pool's tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::pool::{git, session_id};
use crate::support::{link_private, two_task_turns, Sandbox};

/// The pool's tree at `main`, as files under `dir` (what a forge shows).
fn check_out(pool: &Path, dir: &Path) -> BTreeSet<String> {
    std::fs::create_dir_all(dir).expect("mkdir");
    let archive = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["archive", "--format=tar", "main"])
        .output()
        .expect("git archive");
    assert!(archive.status.success());
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("tar");
    use std::io::Write;
    tar.stdin
        .take()
        .expect("stdin")
        .write_all(&archive.stdout)
        .expect("feed tar");
    assert!(tar.wait().expect("tar").success());
    git(pool, &["ls-tree", "-r", "--name-only", "main"])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let Some(Ok(b)) = s.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16)) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).expect("utf8 link")
}

/// Every link destination of a markdown text, through a CommonMark parser.
fn links(text: &str) -> Vec<String> {
    use pulldown_cmark::{Event, Options, Parser, Tag};
    Parser::new_ext(text, Options::ENABLE_TABLES)
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .collect()
}

/// Relative links of `file` (a pool path) that name no file of the tree.
fn broken_links(root: &Path, file: &str, tree: &BTreeSet<String>) -> Vec<String> {
    let text = std::fs::read_to_string(root.join(file)).expect("read");
    let base = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for dest in links(&text) {
        if dest.contains("://") || dest.starts_with('#') || dest.starts_with("mailto:") {
            continue;
        }
        assert!(!dest.starts_with('/'), "{file}: absolute link {dest}");
        let path = percent_decode(dest.split('#').next().unwrap_or(&dest));
        let mut resolved = PathBuf::new();
        for c in base.join(&path).components() {
            match c {
                std::path::Component::ParentDir => {
                    assert!(resolved.pop(), "{file}: {dest} leaves the pool");
                }
                std::path::Component::Normal(n) => resolved.push(n),
                _ => {}
            }
        }
        let rel = resolved.to_string_lossy().into_owned();
        let is_dir = tree.iter().any(|t| t.starts_with(&format!("{rel}/")));
        if !tree.contains(&rel) && !is_dir {
            broken.push(format!("{dest} ({rel})"));
        }
    }
    broken
}

/// What a chapter's frontmatter names to link.
#[derive(serde::Deserialize)]
struct Links {
    #[serde(default)]
    artifacts: Vec<String>,
    #[serde(default)]
    plans: Vec<String>,
}

/// `a/b/../c` → `a/c`.
fn normalize(p: &Path) -> String {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out.to_string_lossy().into_owned()
}

#[test]
fn a_pool_has_landing_pages_whose_links_all_resolve() {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let a = Sandbox::machine("machine-a");
    let b = Sandbox::machine("machine-b");
    a.write_session(&session_id(1, 1), 4, true, &two_task_turns(&a.ws));
    // A longer session too: plans, artifacts, more topics.
    let turns: Vec<dsh_chapters::testkit::writer::TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(11, 30, 4_000, 4, &a.ws_str()).collect();
    a.write_session(&session_id(1, 2), 4, true, &turns);
    b.write_session(&session_id(2, 1), 4, true, &two_task_turns(&b.ws));
    for m in [&a, &b, &a] {
        link_private(m, &pool);
        m.ok(&["archive"]);
        m.ok(&["sync"]);
    }
    let dir = tmp.path().join("checkout");
    let tree = check_out(&pool, &dir);
    assert!(tree.contains("README.md"), "{tree:?}");
    assert!(tree.contains("index/README.md"), "{tree:?}");
    let readme = std::fs::read_to_string(dir.join("README.md")).expect("readme");
    // Both machines, the topics with counts, the newest chapters: all as links.
    for m in ["machine-a", "machine-b"] {
        assert!(readme.contains(&format!("`{m}`")), "{readme}");
    }
    let chapters_linked = links(&readme)
        .iter()
        .filter(|l| l.starts_with("chapters/") && l.ends_with(".md"))
        .count();
    let chapters_in_tree = tree
        .iter()
        .filter(|p| p.starts_with("chapters/") && p.ends_with(".md"))
        .count();
    assert_eq!(chapters_linked, chapters_in_tree.min(50), "{readme}");
    assert!(chapters_in_tree > 2, "both machines' chapters and plans");
    assert!(
        links(&readme).iter().any(|l| l.starts_with("index/")),
        "{readme}"
    );
    // Read as GitHub-flavoured Markdown, the machine list is a table.
    let tables = pulldown_cmark::Parser::new_ext(&readme, pulldown_cmark::Options::ENABLE_TABLES)
        .filter(|e| {
            matches!(
                e,
                pulldown_cmark::Event::Start(pulldown_cmark::Tag::Table(_))
            )
        })
        .count();
    assert_eq!(tables, 1, "{readme}");
    // Every markdown file of the pool (pages, index shards, chapters, plans, rules) parses,
    // and each of its relative links resolves to a file of the tree.
    let mut checked = 0;
    for file in tree.iter().filter(|p| p.ends_with(".md")) {
        let broken = broken_links(&dir, file, &tree);
        assert!(broken.is_empty(), "{file}: broken links {broken:?}");
        checked += 1;
    }
    assert!(checked > 10, "{checked} markdown files");
    // A chapter links each of its artifacts and plans (named in its frontmatter) where the
    // pool keeps them, not by a store path.
    let (mut artifacts_linked, mut plans_linked) = (0, 0);
    for file in tree
        .iter()
        .filter(|p| p.starts_with("chapters/") && p.ends_with(".md"))
    {
        let text = std::fs::read_to_string(dir.join(file)).expect("chapter");
        let Some(doc) = dsh_chapters::render::frontmatter_text(&text)
            .and_then(|y| serde_saphyr::from_str::<Links>(y).ok())
        else {
            continue;
        };
        let base = Path::new(file).parent().expect("folder");
        let targets: BTreeSet<String> = links(&text)
            .iter()
            .map(|l| normalize(&base.join(percent_decode(l))))
            .collect();
        for sha in &doc.artifacts {
            let want = tree
                .iter()
                .find(|p| p.starts_with("artifacts/") && p.ends_with(&format!("/{sha}.txt")))
                .unwrap_or_else(|| panic!("{file}: artifact {sha} not in the pool"));
            assert!(targets.contains(want), "{file} does not link {want}");
            artifacts_linked += 1;
        }
        for plan in &doc.plans {
            let want = normalize(&base.join(plan));
            assert!(
                targets.contains(&want),
                "{file} does not link its plan {want}"
            );
            plans_linked += 1;
        }
        assert!(
            !text.contains("`artifacts/"),
            "{file} names a store path of an artifact"
        );
    }
    assert!(
        artifacts_linked > 0 && plans_linked > 0,
        "{artifacts_linked} artifact and {plans_linked} plan links"
    );
    assert!(tree.iter().any(|p| p.starts_with("artifacts/")), "{tree:?}");
    // Kept up from the change, the pages agree with the tree: each topic's count is its
    // shard's, every shard is listed, and the newest list is the tree's newest documents.
    let pages = dsh_chapters::pool::readme::Pages::parse(&readme).expect("the page's data");
    let mut shards = BTreeSet::new();
    for file in tree.iter().filter_map(|p| p.strip_prefix("index/")) {
        let Some(topic) = dsh_chapters::topics::shard::topic_of_file(file) else {
            continue;
        };
        let text = std::fs::read_to_string(dir.join("index").join(file)).expect("shard");
        let header = text.lines().next().expect("header");
        if header.contains("merged into") {
            continue;
        }
        let n: u64 = header
            .strip_prefix(&format!("# {topic} — "))
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("count");
        assert_eq!(pages.topics.get(&topic), Some(&n), "{topic}: {header}");
        shards.insert(topic);
    }
    assert_eq!(
        pages.topics.keys().cloned().collect::<BTreeSet<_>>(),
        shards
    );
    let documents: BTreeSet<String> = tree
        .iter()
        .filter(|p| p.starts_with("chapters/") && p.ends_with(".md"))
        .cloned()
        .collect();
    assert!(documents.len() <= 50, "{}", documents.len());
    let listed: BTreeSet<String> = pages.newest.iter().map(|e| e.path.clone()).collect();
    assert_eq!(listed, documents);
    // A quiet round leaves the pages (and the pool) alone.
    let head = git(&pool, &["rev-parse", "main"]);
    a.ok(&["sync"]);
    b.ok(&["sync"]);
    assert_eq!(git(&pool, &["rev-parse", "main"]), head);
    // The mirror holds the pages too, for reading on this machine.
    assert!(a.ws.join(".dsh-knowledge/README.md").is_file());
    assert!(b.ws.join(".dsh-knowledge/index/README.md").is_file());
    // The pool's index names the input tree it describes: the next build, on any machine,
    // diffs it with the tree then.
    let manifest = git(&pool, &["show", "main:index/manifest.json"]);
    let chapters = git(&pool, &["rev-parse", "main:chapters"]);
    assert!(
        manifest.contains(&format!("\"chapters\": \"{}\"", chapters.trim())),
        "{manifest}"
    );
}

//! The derived index's files (PURE): shards, alias stubs and the manifest, as bytes.
//!
//! A shard lists every document of one canonical topic: a header line (topic, count, last
//! updated — the newest document's date, never the clock), then one list item per document,
//! `date | title | [file](relative link) | (kind)`, newest first, ties by path. A topic that
//! curation folded into another (`topic-alias`) keeps a stub naming where it went, so a
//! link to the old shard still leads somewhere and no file ever has to be deleted from the
//! pool. Every byte follows from the documents and the facts: no clock, no listing order.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::IndexDoc;
use crate::curation::Curation;
use crate::names::one_line;
use crate::redact::Redacted;

/// The manifest's format version.
pub const MANIFEST_VERSION: u32 = 3;
pub const MANIFEST_FILE: &str = "manifest.json";
pub const INDEX_DIR: &str = "index";

/// The shard file of a topic: the label with every byte outside `[a-z0-9_-]` written as
/// `%HH`, then `.md` — portable on every filesystem and forge, and one-to-one.
pub fn shard_file(topic: &str) -> String {
    let mut out = String::with_capacity(topic.len() + 3);
    // `con.md`, `aux.md`, … cannot be checked out on Windows: such a name's first letter
    // is written `%HH` too, so every clone of the pool works everywhere.
    let device = is_windows_device(topic);
    for (i, b) in topic.bytes().enumerate() {
        if device && i == 0 {
            out.push_str(&format!("%{b:02X}"));
        } else if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out.push_str(".md");
    out
}

fn is_windows_device(stem: &str) -> bool {
    matches!(stem, "con" | "prn" | "aux" | "nul")
        || (stem.len() == 4
            && (stem.starts_with("com") || stem.starts_with("lpt"))
            && stem.as_bytes()[3].is_ascii_digit())
}

/// The topic a shard file holds: the inverse of [`shard_file`]; `None` for a name
/// [`shard_file`] never produces (the manifest, a hand-added file).
pub fn topic_of_file(file: &str) -> Option<String> {
    let stem = file.strip_suffix(".md")?;
    let bytes = stem.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = stem.get(i + 1..i + 3)?;
            if hex.bytes().any(|h| h.is_ascii_lowercase()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    let topic = String::from_utf8(out).ok()?;
    (!topic.is_empty() && shard_file(&topic) == file).then_some(topic)
}

/// `YYYY-MM-DD`, or `-` for no (or an unreadable) date.
fn day(date: Option<&str>) -> String {
    crate::catalog::score::day_of(date)
}

/// The order of a shard's lines: newest first (undated last), then by path.
fn line_order(a: &IndexDoc, b: &IndexDoc) -> std::cmp::Ordering {
    let at = |d: &IndexDoc| d.date.as_deref().and_then(crate::time::parse_rfc3339_ms);
    at(b).cmp(&at(a)).then_with(|| a.path.cmp(&b.path))
}

/// One shard. `docs` are the documents whose canonical topics include `topic`, in any
/// order; `link_prefix` leads from the index directory to the base (`../`). The documents
/// are `Redacted` (read back through the search table): raw text cannot reach a shard.
pub fn render_shard(topic: &str, docs: &[&Redacted<IndexDoc>]) -> String {
    let mut docs: Vec<&IndexDoc> = docs.iter().map(|d| d.get()).collect();
    docs.sort_by(|a, b| line_order(a, b));
    docs.dedup_by(|a, b| a.path == b.path);
    let newest = docs
        .first()
        .map(|d| day(d.date.as_deref()))
        .unwrap_or_else(|| "-".into());
    let noun = if docs.len() == 1 {
        "document"
    } else {
        "documents"
    };
    let mut out = format!(
        "# {} — {} {noun}, last updated {newest}\n\n",
        one_line(topic).trim(),
        docs.len()
    );
    for d in docs {
        out.push_str(&doc_line(d, "../"));
    }
    out
}

/// Lines a topic's head page lists (the newest); a topic with more documents than this also
/// gets pages, and its head lists the pages instead of every document.
pub const HEAD_LINES: usize = 50;

/// Lines a page holds at most: a month's documents of a topic, oldest first, cut into pages of
/// this many (`2026-12.md`, `2026-12-2.md`, …), so a new document rewrites its month's last
/// page and the head, never the topic's whole history.
pub const PAGE_LINES: usize = 500;

/// The directory of a topic's pages, relative to the index directory: its shard's name
/// without `.md`.
pub fn pages_dir(topic: &str) -> String {
    let file = shard_file(topic);
    file.strip_suffix(".md").unwrap_or(&file).to_owned()
}

/// The topic whose pages directory holds `file` (`<dir>/<page>.md`), if it is one.
pub fn topic_of_page(file: &str) -> Option<String> {
    let (dir, page) = file.split_once('/')?;
    if page.contains('/') || !page.ends_with(".md") || page.len() <= 3 {
        return None;
    }
    topic_of_file(&format!("{dir}.md"))
}

/// A relative link target to a file of ours: `%` (in a shard's name) written `%25`, so the
/// link resolves to the file and not to its decoded name.
fn link_target(path: &str) -> String {
    path.replace('%', "%25")
}

fn doc_line(d: &IndexDoc, up: &str) -> String {
    let file = d.path.rsplit('/').next().unwrap_or(&d.path);
    format!(
        "- {} | {} | [{file}]({up}{}) | ({})\n",
        day(d.date.as_deref()),
        one_line(&d.title).trim(),
        d.path,
        one_line(&d.kind).trim()
    )
}

/// The month (`YYYY-MM`, or `undated`) a page file of a topic holds (`<dir>/<month>[-n].md`),
/// if the name is one [`render_topic`] writes.
pub fn month_of_page(file: &str) -> Option<String> {
    let (_, page) = file.rsplit_once('/')?;
    let stem = page.strip_suffix(".md")?;
    let month_len = if stem.starts_with("undated") {
        "undated".len()
    } else {
        let b = stem.as_bytes();
        let digits =
            |r: std::ops::Range<usize>| r.clone().all(|i| b.get(i).is_some_and(u8::is_ascii_digit));
        if !(digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7)) {
            return None;
        }
        7
    };
    let (month, rest) = stem.split_at(month_len);
    match rest.strip_prefix('-') {
        None if rest.is_empty() => Some(month.to_owned()),
        Some(n) if n.parse::<usize>().is_ok_and(|n| n >= 2) && !n.starts_with('0') => {
            Some(month.to_owned())
        }
        _ => None,
    }
}

/// The month (`YYYY-MM`, or `undated`) a document's lines fall in on a paged topic.
pub fn page_month(date: Option<&str>) -> String {
    let day = day(date);
    if day == "-" {
        "undated".to_owned()
    } else {
        day[..7].to_owned()
    }
}

fn month(d: &IndexDoc) -> String {
    page_month(d.date.as_deref())
}

/// A topic's files as [`render_topic_months`] renders them.
#[derive(Debug, Default)]
pub struct TopicFiles {
    /// File name (relative to the index directory) → bytes: the head page, and the pages of
    /// the months asked for (every page when none were named).
    pub files: BTreeMap<String, String>,
    /// Every page the topic has, rendered or not (empty when it is one shard).
    pub pages: BTreeSet<String>,
}

/// Every file of one topic: its head page (`<topic>.md`) and, past [`HEAD_LINES`] documents,
/// its pages (`<topic>/<month>[-n].md`). File name (relative to the index directory) → bytes.
pub fn render_topic(topic: &str, docs: &[&Redacted<IndexDoc>]) -> BTreeMap<String, String> {
    render_topic_months(topic, docs, None).files
}

/// [`render_topic`], rendering of the pages only those of `months` (`None`: all): the head
/// page is always rendered (it needs only the newest documents and each page's count), so
/// an update that knows which months its documents fall in renders the pages of the size
/// of the change, not the topic's history. The pages it renders have exactly the bytes
/// [`render_topic`] gives them; the caller keeps the others as they are.
pub fn render_topic_months(
    topic: &str,
    docs: &[&Redacted<IndexDoc>],
    months: Option<&BTreeSet<String>>,
) -> TopicFiles {
    let mut files = BTreeMap::new();
    let pages = render_topic_each(topic, docs, months, &mut |file, text| {
        files.insert(file, text);
        Ok::<(), std::convert::Infallible>(())
    });
    let pages = match pages {
        Ok(pages) => pages,
        Err(never) => match never {},
    };
    TopicFiles { files, pages }
}

/// [`render_topic_months`], each file handed to `emit` (file name, bytes) as it is rendered
/// — the pages, then the head page — instead of held until the topic is done: a topic of a
/// year's documents is never in memory as text. Returns every page the topic has.
pub fn render_topic_each<E>(
    topic: &str,
    docs: &[&Redacted<IndexDoc>],
    months: Option<&BTreeSet<String>>,
    emit: &mut dyn FnMut(String, String) -> Result<(), E>,
) -> Result<BTreeSet<String>, E> {
    let sorted = sorted_docs(docs.iter().map(|d| d.get()));
    let mut pages = BTreeSet::new();
    if sorted.len() <= HEAD_LINES {
        emit(shard_file(topic), render_shard(topic, docs))?;
        return Ok(pages);
    }
    let mut links: Vec<PageLink> = Vec::new();
    for (month, docs) in by_month(&sorted) {
        let render = months.is_none_or(|m| m.contains(&month));
        render_month(topic, &month, &docs, render, &mut links, &mut pages, emit)?;
    }
    emit(
        shard_file(topic),
        render_head(topic, sorted.len(), &sorted, links),
    )?;
    Ok(pages)
}

/// The pages a topic of `docs` has (file, month), as [`render_topic_each`] would name them,
/// without rendering any: empty for a topic of one shard.
pub fn topic_pages(topic: &str, docs: &[&Redacted<IndexDoc>]) -> Vec<(String, String)> {
    let sorted = sorted_docs(docs.iter().map(|d| d.get()));
    if sorted.len() <= HEAD_LINES {
        return Vec::new();
    }
    let dir = pages_dir(topic);
    by_month(&sorted)
        .into_iter()
        .flat_map(|(month, docs)| {
            let dir = &dir;
            (0..docs.len().div_ceil(PAGE_LINES))
                .map(move |i| (format!("{dir}/{}.md", page_name(&month, i)), month.clone()))
        })
        .collect()
}

/// Newest first (undated last), ties by path, one line per path: a topic's order.
fn sorted_docs<'a>(docs: impl Iterator<Item = &'a IndexDoc>) -> Vec<&'a IndexDoc> {
    let mut sorted: Vec<&IndexDoc> = docs.collect();
    // `line_order`, each date parsed once.
    sorted.sort_by_cached_key(|d| {
        let d: &IndexDoc = d;
        (
            std::cmp::Reverse(d.date.as_deref().and_then(crate::time::parse_rfc3339_ms)),
            d.path.clone(),
        )
    });
    sorted.dedup_by(|a, b| a.path == b.path);
    sorted
}

/// A topic's documents (in [`sorted_docs`] order) by month, each month oldest first, so a
/// month's earlier pages keep their bytes as it grows.
fn by_month<'a>(sorted: &[&'a IndexDoc]) -> BTreeMap<String, Vec<&'a IndexDoc>> {
    let mut by_month: BTreeMap<String, Vec<&IndexDoc>> = BTreeMap::new();
    for d in sorted.iter().rev() {
        by_month.entry(month(d)).or_default().push(*d);
    }
    by_month
}

/// One page as the head lists it: its month, its number in the month (0: the first), its
/// file and how many documents it lists.
type PageLink = (String, usize, String, usize);

fn page_name(month: &str, i: usize) -> String {
    if i == 0 {
        month.to_owned()
    } else {
        format!("{month}-{}", i + 1)
    }
}

/// The pages of one month (`docs` oldest first): listed in `links` and `pages`, and handed
/// to `emit` when `render`.
fn render_month<E>(
    topic: &str,
    month: &str,
    docs: &[&IndexDoc],
    render: bool,
    links: &mut Vec<PageLink>,
    pages: &mut BTreeSet<String>,
    emit: &mut dyn FnMut(String, String) -> Result<(), E>,
) -> Result<(), E> {
    let dir = pages_dir(topic);
    for (i, chunk) in docs.chunks(PAGE_LINES).enumerate() {
        let name = page_name(month, i);
        let file = format!("{dir}/{name}.md");
        pages.insert(file.clone());
        links.push((month.to_owned(), i, file.clone(), chunk.len()));
        if !render {
            continue;
        }
        let mut text = format!(
            "# {} — {name}: {} {}\n\n[All of {}](../{})\n\n",
            one_line(topic).trim(),
            chunk.len(),
            if chunk.len() == 1 {
                "document"
            } else {
                "documents"
            },
            one_line(topic).trim(),
            link_target(&shard_file(topic)),
        );
        for d in chunk.iter().rev() {
            text.push_str(&doc_line(d, "../../"));
        }
        emit(file, text)?;
    }
    Ok(())
}

/// The head page of a paged topic of `total` documents: the newest of `newest` (in
/// [`sorted_docs`] order) and every page of `links`.
fn render_head(topic: &str, total: usize, newest: &[&IndexDoc], links: Vec<PageLink>) -> String {
    let lines: Vec<String> = newest
        .iter()
        .take(HEAD_LINES)
        .map(|d| doc_line(d, "../"))
        .collect();
    let day = newest
        .first()
        .map(|d| day(d.date.as_deref()))
        .unwrap_or_else(|| "-".into());
    head_text(topic, total, &day, &lines, links)
}

fn head_text(
    topic: &str,
    total: usize,
    newest_day: &str,
    lines: &[String],
    mut links: Vec<PageLink>,
) -> String {
    let mut head = format!(
        "# {} — {total} documents, last updated {newest_day}\n\nThe {HEAD_LINES} newest; every document is on a page below.\n\n",
        one_line(topic).trim(),
    );
    for line in lines {
        head.push_str(line);
    }
    head.push_str("\n## Pages\n\n");
    // Undated last, then newest month first, a month's later pages first.
    links.sort_by(|a, b| {
        let undated = |m: &str| m == "undated";
        (undated(&a.0), &b.0, b.1).cmp(&(undated(&b.0), &a.0, a.1))
    });
    // Written in place: a head of a year's topic lists hundreds of pages, and it is rendered
    // twice an update (to verify the old one read back, and the new one).
    head.reserve(links.len() * (file_len(&links) + 32));
    for (month, i, file, n) in links {
        let noun = if n == 1 { "document" } else { "documents" };
        let target = link_target(&file);
        let written = if i == 0 {
            writeln!(head, "- [{month}]({target}) — {n} {noun}")
        } else {
            writeln!(head, "- [{month}-{}]({target}) — {n} {noun}", i + 1)
        };
        written.expect("writing into a String cannot fail");
    }
    head
}

/// The longest file name among `links`.
fn file_len(links: &[PageLink]) -> usize {
    links.iter().map(|l| l.2.len()).max().unwrap_or(0)
}

/// A paged topic's head page read back ([`parse_head`]): what an update needs of the pages
/// it does not render.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Every page the head lists: (month, number in the month) → documents.
    pub pages: BTreeMap<(String, usize), usize>,
    /// The documents its lines list, newest first.
    pub lines: Vec<HeadLine>,
}

/// One line of a head page read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadLine {
    /// The page month its date falls in (`YYYY-MM`, `undated`).
    pub month: String,
    /// `YYYY-MM-DD` (its literal date), `-` when undated.
    pub day: String,
    /// The document, relative to the base.
    pub path: String,
}

/// The head page [`render_topic`] writes for a paged topic, read back; `None` for any other
/// text (a topic of one page, a hand edit, another format): it must render again to the
/// same bytes from what was read, so nothing of it is guessed.
pub fn parse_head(topic: &str, text: &str) -> Option<Head> {
    let (top, pages_part) = text.split_once("\n## Pages\n\n")?;
    let title = format!("# {} — ", one_line(topic).trim());
    let (first, rest) = top.split_once('\n')?;
    let (total, newest_day) = first
        .strip_prefix(&title)?
        .split_once(" documents, last updated ")?;
    let total: usize = total.parse().ok()?;
    let intro = format!("\nThe {HEAD_LINES} newest; every document is on a page below.\n\n");
    let body = rest.strip_prefix(&intro)?;
    let mut lines = Vec::new();
    let mut raw = Vec::new();
    for line in body.split_inclusive('\n') {
        let day = line.strip_prefix("- ")?.split(" | ").next()?;
        let month = if day == "-" {
            "undated".to_owned()
        } else {
            month_of_page(&format!("x/{}.md", day.get(..7)?))?
        };
        let (_, link) = line.rsplit_once("](../")?;
        let (path, _) = link.split_once(") | (")?;
        lines.push(HeadLine {
            month,
            day: day.to_owned(),
            path: path.to_owned(),
        });
        raw.push(line.to_owned());
    }
    let dir = pages_dir(topic);
    let mut pages = BTreeMap::new();
    let mut links = Vec::new();
    for line in pages_part.lines() {
        let (name, _) = line.strip_prefix("- [")?.split_once("](")?;
        let (_, count) = line.rsplit_once(") — ")?;
        let n: usize = count.split(' ').next()?.parse().ok()?;
        let file = format!("{dir}/{name}.md");
        let month = month_of_page(&file)?;
        let i = match name.strip_prefix(month.as_str())?.strip_prefix('-') {
            Some(k) => k.parse::<usize>().ok()? - 1,
            None => 0,
        };
        pages.insert((month.clone(), i), n);
        links.push((month, i, file, n));
    }
    let paged = total > HEAD_LINES
        && lines.len() == HEAD_LINES
        && pages.values().sum::<usize>() == total
        && head_text(topic, total, newest_day, &raw, links) == text;
    paged.then_some(Head { pages, lines })
}

/// A paged topic after documents joined `months`, from its head page as the last build
/// wrote it (`old`): `month_docs` are the topic's documents in those months, `listed` the
/// documents `old` lists outside them (the newest of the others). The head and the pages of
/// `months` get the bytes [`render_topic`] gives them over all of the topic's documents —
/// while none left it and the other months are as `old` says — without reading the others.
/// `None` when what is given cannot say (fewer lines than a head lists).
pub fn update_paged_topic(
    topic: &str,
    old: &Head,
    months: &BTreeSet<String>,
    month_docs: &[&Redacted<IndexDoc>],
    listed: &[&Redacted<IndexDoc>],
) -> Option<TopicFiles> {
    let in_months = sorted_docs(
        month_docs
            .iter()
            .map(|d| d.get())
            .filter(|d| months.contains(&month(d))),
    );
    let mut out = TopicFiles::default();
    let mut links: Vec<PageLink> = Vec::new();
    let dir = pages_dir(topic);
    for ((m, i), n) in &old.pages {
        if !months.contains(m) {
            let file = format!("{dir}/{}.md", page_name(m, *i));
            out.pages.insert(file.clone());
            links.push((m.clone(), *i, file, *n));
        }
    }
    let files = &mut out.files;
    for (month, docs) in by_month(&in_months) {
        let rendered = render_month(
            topic,
            &month,
            &docs,
            true,
            &mut links,
            &mut out.pages,
            &mut |file, text| {
                files.insert(file, text);
                Ok::<(), std::convert::Infallible>(())
            },
        );
        if let Err(never) = rendered {
            match never {}
        }
    }
    let total: usize = links.iter().map(|l| l.3).sum();
    let newest = sorted_docs(
        in_months.iter().copied().chain(
            listed
                .iter()
                .map(|d| d.get())
                .filter(|d| !months.contains(&month(d))),
        ),
    );
    if total <= HEAD_LINES || newest.len() < HEAD_LINES {
        return None;
    }
    out.files
        .insert(shard_file(topic), render_head(topic, total, &newest, links));
    Some(out)
}

/// The stub left where a topic was folded into another.
pub fn render_stub(topic: &str, canonical: &str) -> String {
    format!(
        "# {} — merged into [{}]({})\n\nA `topic-alias` curation fact folds this topic into `{}`; its documents are listed there.\n",
        one_line(topic).trim(),
        one_line(canonical).trim(),
        link_target(&shard_file(canonical)),
        one_line(canonical).trim()
    )
}

/// The canonical topics of one document.
pub fn canonical_topics(doc: &IndexDoc, curation: &Curation) -> Vec<String> {
    curation.canonical_topics(doc.topics.iter().map(String::as_str))
}

/// Every alias source whose canonical label is another: each gets a stub.
pub fn stubs(curation: &Curation) -> BTreeMap<String, String> {
    curation
        .aliases()
        .keys()
        .filter_map(|from| {
            let to = curation.canonical(from).topic;
            (to != *from && !to.is_empty()).then(|| (from.clone(), to))
        })
        .collect()
}

/// The whole index but the manifest: file name → bytes. The repair path and the reference
/// the incremental build must equal. Every topic and line comes from `docs` (`Redacted`)
/// or the curation facts (read back from the store).
pub fn build_all(docs: &[Redacted<IndexDoc>], curation: &Curation) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let built = build_all_each(docs, curation, &mut |file, text| {
        files.insert(file, text);
        Ok::<(), std::convert::Infallible>(())
    });
    match built {
        Ok(()) => files,
        Err(never) => match never {},
    }
}

/// [`build_all`], each file handed to `emit` as it is rendered (a topic's files, topic by
/// topic, then the alias stubs, which replace a shard of the same name).
pub fn build_all_each<E>(
    docs: &[Redacted<IndexDoc>],
    curation: &Curation,
    emit: &mut dyn FnMut(String, String) -> Result<(), E>,
) -> Result<(), E> {
    let mut by_topic: BTreeMap<String, Vec<&Redacted<IndexDoc>>> = BTreeMap::new();
    for d in docs {
        for t in canonical_topics(d, curation) {
            by_topic.entry(t).or_default().push(d);
        }
    }
    let stubs = stubs(curation);
    for (t, ds) in &by_topic {
        // A stub takes the shard's name: the topic's head is not emitted first and then
        // replaced (its pages, in their own directory, are).
        let head = shard_file(t);
        render_topic_each(t, ds, None, &mut |file, text| {
            if file == head && stubs.contains_key(t) {
                return Ok(());
            }
            emit(file, text)
        })?;
    }
    for (from, to) in stubs {
        emit(shard_file(&from), render_stub(&from, &to))?;
    }
    Ok(())
}

/// `index/manifest.json`: what the last build processed — the document count, every curation
/// file's blob id, the effective aliases, and for the pool's index the ids of the input trees
/// it describes (so the next build diffs them with the trees then: the cost follows the
/// change, as unchanged subtrees share ids). A shard needs no record: its count is in its
/// header and its blob id in the tree that holds it. Deterministic bytes (sorted maps, no
/// clock), the same on every machine at the same pool state.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub v: u32,
    pub documents: u64,
    /// Curation file (relative to the base) → its git blob id when processed.
    pub curation: BTreeMap<String, String>,
    /// The effective aliases when built (alias source → canonical topic): a new fact's
    /// effect is the difference, found without re-reading a document.
    pub aliases: BTreeMap<String, String>,
    /// The pool's index only: input area at the pool's root (`chapters`, `rules`) → the id of
    /// its tree as the commit that carries this manifest leaves it (absent: no such tree).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
}

impl Manifest {
    pub fn render(&self) -> String {
        let mut text =
            serde_json::to_string_pretty(self).expect("a manifest is strings and numbers");
        text.push('\n');
        text
    }

    pub fn parse(text: &str) -> Option<Manifest> {
        serde_json::from_str::<Manifest>(text)
            .ok()
            .filter(|m| m.v == MANIFEST_VERSION)
    }
}

/// The effective alias map of a curation (source → canonical), as the manifest keeps it.
pub fn alias_map(curation: &Curation) -> BTreeMap<String, String> {
    curation
        .aliases()
        .keys()
        .map(|from| (from.clone(), curation.canonical(from).topic))
        .collect()
}

/// Raw labels whose canonical topic differs between two alias maps, with both canonicals:
/// the shards a new curation fact touches.
pub fn alias_changes(
    old: &BTreeMap<String, String>,
    new: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut touched = BTreeSet::new();
    let labels: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for label in labels {
        let before = old.get(label).unwrap_or(label);
        let after = new.get(label).unwrap_or(label);
        if before != after {
            touched.insert(label.clone());
            touched.insert(before.clone());
            touched.insert(after.clone());
        }
    }
    touched
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::curation::{Author, Fact, FactKind, SourcedFact};

    /// The pages trim a field (a title or topic padded by hand, or by another tool) after
    /// its control characters became spaces; the search's result lines do not.
    #[test]
    fn a_page_s_fields_are_trimmed_lines() {
        let d = doc(
            "s1/chapters/001-a.md",
            "\t Fix\nthe\u{7}middleware \r\n",
            None,
            &["auth"],
        );
        assert_eq!(
            doc_line(d.get(), "../"),
            "- - | Fix the middleware | [001-a.md](../s1/chapters/001-a.md) | (chapter)\n"
        );
        assert!(render_shard(" auth\n", &[&d]).starts_with("# auth — 1 document"));
        assert!(render_stub(" auth ", "\tjwt\n").starts_with("# auth — merged into [jwt]("));
    }

    fn doc(path: &str, title: &str, date: Option<&str>, topics: &[&str]) -> Redacted<IndexDoc> {
        let doc = IndexDoc {
            path: path.into(),
            title: title.into(),
            kind: "chapter".into(),
            date: date.map(str::to_owned),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
        };
        crate::redact::built_in()
            .unwrap()
            .redact_all(doc, &mut Default::default())
    }

    fn alias(from: &str, to: &str, author: Author, at: &str) -> SourcedFact {
        SourcedFact {
            harness: "m1".into(),
            line: 1,
            fact: Fact::new(
                FactKind::TopicAlias {
                    from: from.into(),
                    to: to.into(),
                },
                author,
                at,
            ),
        }
    }

    #[test]
    fn shard_file_names_are_portable_and_one_to_one() {
        assert_eq!(shard_file("auth"), "auth.md");
        assert_eq!(shard_file("csv-export_2"), "csv-export_2.md");
        assert_eq!(shard_file("a/b"), "a%2Fb.md");
        assert_eq!(shard_file("..x"), "%2E%2Ex.md");
        assert_eq!(shard_file("é"), "%C3%A9.md");
        assert_eq!(shard_file("manifest.json"), "manifest%2Ejson.md");
        assert_ne!(shard_file("a%2F"), shard_file("a/"));
        assert_eq!(shard_file("con"), "%63on.md");
        assert_eq!(shard_file("com1"), "%63om1.md");
        assert_eq!(shard_file("console"), "console.md");
        for topic in ["auth", "a/b", "é", "manifest.json", "x y", "con", "lpt9"] {
            assert_eq!(topic_of_file(&shard_file(topic)).as_deref(), Some(topic));
        }
        for junk in [
            "manifest.json",
            "a%2f.md",
            "A.md",
            "%zz.md",
            ".md",
            "a%2.md",
            "%FF.md",
        ] {
            assert_eq!(topic_of_file(junk), None, "{junk}");
        }
    }

    #[test]
    fn a_shard_lists_newest_first_with_relative_links() {
        let a = doc(
            "chapters/pk/s1/001-a.md",
            "Old | one",
            Some("2025-01-02T00:00:00Z"),
            &["auth"],
        );
        let b = doc(
            "chapters/pk/s2/001-b.md",
            "New\nline",
            Some("2025-03-04T00:00:00Z"),
            &["auth"],
        );
        let c = doc("chapters/pk/s0/001-c.md", "Undated", None, &["auth"]);
        let text = render_shard("auth", &[&a, &c, &b]);
        assert_eq!(
            text,
            "# auth — 3 documents, last updated 2025-03-04\n\n\
             - 2025-03-04 | New line | [001-b.md](../chapters/pk/s2/001-b.md) | (chapter)\n\
             - 2025-01-02 | Old | one | [001-a.md](../chapters/pk/s1/001-a.md) | (chapter)\n\
             - - | Undated | [001-c.md](../chapters/pk/s0/001-c.md) | (chapter)\n"
        );
        assert_eq!(
            render_shard("auth", &[&b, &c, &a]),
            text,
            "input order is irrelevant"
        );
        assert!(render_shard("x", &[&c]).starts_with("# x — 1 document, last updated -\n"));
    }

    fn month_docs(n: usize, month: u32, from: usize) -> Vec<Redacted<IndexDoc>> {
        (from..from + n)
            .map(|i| {
                doc(
                    &format!("s/chapters/{i:05}.md"),
                    &format!("T{i}"),
                    Some(&format!("2026-{month:02}-{:02}T00:00:00Z", i % 28 + 1)),
                    &["c++"],
                )
            })
            .collect()
    }

    #[test]
    fn a_big_topic_gets_a_small_head_and_pages_by_month_and_size() {
        let small = month_docs(HEAD_LINES, 1, 0);
        let files = render_topic("c++", &small.iter().collect::<Vec<_>>());
        assert_eq!(files.len(), 1, "no pages up to {HEAD_LINES} documents");

        let mut docs = month_docs(PAGE_LINES + 3, 1, 0);
        docs.extend(month_docs(7, 2, 10_000));
        let files = render_topic("c++", &docs.iter().collect::<Vec<_>>());
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "c%2B%2B.md",
                "c%2B%2B/2026-01-2.md",
                "c%2B%2B/2026-01.md",
                "c%2B%2B/2026-02.md"
            ]
        );
        let head = &files["c%2B%2B.md"];
        assert!(head.starts_with(&format!(
            "# c++ — {} documents, last updated 2026-02-",
            PAGE_LINES + 10
        )));
        assert_eq!(
            head.lines().filter(|l| l.contains("| (chapter)")).count(),
            HEAD_LINES
        );
        // An alias stub's link to a canonical topic whose file name holds `%` resolves too.
        assert!(render_stub("cpp", "c++").contains("](c%252B%252B.md)"));
        // Newest page first; `%` in a link is written `%25`.
        let pages: Vec<&str> = head
            .lines()
            .skip_while(|l| *l != "## Pages")
            .skip(2)
            .collect();
        assert_eq!(
            pages,
            [
                "- [2026-02](c%252B%252B/2026-02.md) — 7 documents",
                "- [2026-01-2](c%252B%252B/2026-01-2.md) — 3 documents",
                &format!("- [2026-01](c%252B%252B/2026-01.md) — {PAGE_LINES} documents"),
            ]
        );
        let page = &files["c%2B%2B/2026-01-2.md"];
        assert!(page.contains("[All of c++](../c%252B%252B.md)"));
        assert!(page.contains("](../../s/chapters/"));

        // One more document in February: the head and February's page change, January's
        // pages keep their bytes.
        docs.extend(month_docs(1, 2, 20_000));
        let next = render_topic("c++", &docs.iter().collect::<Vec<_>>());
        let changed: Vec<&str> = next
            .iter()
            .filter(|(f, t)| files.get(*f) != Some(*t))
            .map(|(f, _)| f.as_str())
            .collect();
        assert_eq!(changed, ["c%2B%2B.md", "c%2B%2B/2026-02.md"]);
        assert_eq!(topic_of_page("c%2B%2B/2026-02.md").as_deref(), Some("c++"));
        assert_eq!(topic_of_page("c%2B%2B.md"), None);
        assert_eq!(topic_of_page("manifest/ab.json"), None);
    }

    /// A paged topic: January past a page, `march` documents in March, one undated.
    fn paged_docs(march: usize) -> Vec<Redacted<IndexDoc>> {
        let mut docs = month_docs(PAGE_LINES + 3, 1, 0);
        docs.extend(month_docs(march, 3, 10_000));
        docs.push(doc("s/chapters/undated.md", "U", None, &["c++"]));
        docs
    }

    /// Every file `part` renders has the bytes of the whole render, and it names every page.
    fn assert_part_of(whole: &BTreeMap<String, String>, part: &TopicFiles) {
        for (file, text) in &part.files {
            assert_eq!(whole[file], *text, "{file}");
        }
        let pages: Vec<&String> = whole.keys().filter(|f| f.contains('/')).collect();
        assert_eq!(part.pages.iter().collect::<Vec<_>>(), pages);
    }

    #[test]
    fn a_topic_rendered_for_some_months_gives_those_pages_the_bytes_of_a_whole_render() {
        let mut docs = month_docs(PAGE_LINES + 3, 1, 0);
        docs.extend(month_docs(7, 2, 10_000));
        docs.push(doc("s/chapters/undated.md", "U", None, &["c++"]));
        let refs: Vec<_> = docs.iter().collect();
        let all = render_topic("c++", &refs);
        let months = BTreeSet::from(["2026-01".to_owned()]);
        let some = render_topic_months("c++", &refs, Some(&months));
        assert_eq!(
            some.files.keys().collect::<Vec<_>>(),
            ["c%2B%2B.md", "c%2B%2B/2026-01-2.md", "c%2B%2B/2026-01.md"]
        );
        assert_part_of(&all, &some);
        assert_eq!(render_topic_months("c++", &refs, None).files, all);
        let none = render_topic_months("c++", &refs, Some(&BTreeSet::new()));
        assert_eq!(none.files.keys().collect::<Vec<_>>(), ["c%2B%2B.md"]);
        // Every page's month is read back from its name; other names are not pages.
        for page in &some.pages {
            let month = month_of_page(page).expect("a page");
            assert!(["2026-01", "2026-02", "undated"].contains(&month.as_str()));
        }
        assert_eq!(month_of_page("x/undated-3.md").as_deref(), Some("undated"));
        for junk in [
            "x/2026-1.md",
            "x/2026-01-1.md",
            "x/2026-01-02.md",
            "x/2026-01-x.md",
            "x/notes.md",
            "x.md",
        ] {
            assert_eq!(month_of_page(junk), None, "{junk}");
        }
    }

    #[test]
    fn a_paged_head_reads_back_and_an_update_from_it_equals_a_whole_render() {
        let docs = paged_docs(70);
        let all = render_topic("c++", &docs.iter().collect::<Vec<_>>());
        let head = parse_head("c++", &all["c%2B%2B.md"]).expect("a paged head");
        assert_eq!(head.lines.len(), HEAD_LINES);
        assert_eq!(head.pages.values().sum::<usize>(), docs.len());
        assert_eq!(head.pages[&("2026-01".to_owned(), 1)], 3);
        assert_eq!(head.lines[0].month, "2026-03");
        assert!(head.lines[0].day.starts_with("2026-03-"));
        // Not a paged head of ours: a topic of one page, an edit, another topic's name.
        let small = render_topic("c++", &docs[..3].iter().collect::<Vec<_>>());
        assert_eq!(parse_head("c++", &small["c%2B%2B.md"]), None);
        let text = &all["c%2B%2B.md"];
        assert_eq!(parse_head("c++", &format!("{text}x\n")), None);
        assert_eq!(
            parse_head("c++", &text.replacen("— 3 documents", "— 4 documents", 1)),
            None
        );
        assert_eq!(parse_head("cpp", text), None);

        // Documents join March and February: the head and those months' pages, from the
        // old head, March's and February's documents and the lines listed outside them.
        let mut more = docs.clone();
        more.extend(month_docs(4, 3, 20_000));
        more.extend(month_docs(2, 2, 30_000));
        let whole = render_topic("c++", &more.iter().collect::<Vec<_>>());
        let months = BTreeSet::from(["2026-02".to_owned(), "2026-03".to_owned()]);
        let in_months: Vec<&Redacted<IndexDoc>> = more
            .iter()
            .filter(|d| months.contains(&month(d.get())))
            .collect();
        let listed: Vec<&Redacted<IndexDoc>> = more
            .iter()
            .filter(|d| head.lines.iter().any(|l| l.path == d.get().path))
            .collect();
        let updated =
            update_paged_topic("c++", &head, &months, &in_months, &listed).expect("an update");
        assert_eq!(
            updated.files.keys().collect::<Vec<_>>(),
            ["c%2B%2B.md", "c%2B%2B/2026-02.md", "c%2B%2B/2026-03.md"]
        );
        assert_part_of(&whole, &updated);
        // Without the lines listed outside those months it cannot say.
        assert!(update_paged_topic("c++", &head, &months, &in_months[..3], &[]).is_none());
    }

    /// Every relative link of a paged topic, parsed by a CommonMark parser and percent-decoded,
    /// names a file of the index or a document.
    #[test]
    fn every_link_of_a_paged_topic_resolves() {
        let docs = paged_docs(60);
        let files = render_topic("c++", &docs.iter().collect::<Vec<_>>());
        let mut tree: BTreeSet<String> = files.keys().map(|f| format!("index/{f}")).collect();
        tree.extend(docs.iter().map(|d| d.get().path.clone()));
        assert!(tree.contains("index/c%2B%2B/undated.md"), "{tree:?}");
        let decode = |s: &str| {
            let b = s.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'%' {
                    out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).expect("hex"));
                    i += 3;
                } else {
                    out.push(b[i]);
                    i += 1;
                }
            }
            String::from_utf8(out).expect("utf8")
        };
        let mut links = 0;
        for (file, text) in &files {
            let mut dir: Vec<String> = format!("index/{file}")
                .split('/')
                .map(str::to_owned)
                .collect();
            dir.pop();
            for event in pulldown_cmark::Parser::new(text) {
                let pulldown_cmark::Event::Start(pulldown_cmark::Tag::Link { dest_url, .. }) =
                    event
                else {
                    continue;
                };
                let mut at = dir.clone();
                for part in decode(&dest_url).split('/') {
                    if part == ".." {
                        assert!(at.pop().is_some(), "{file}: {dest_url} leaves the pool");
                    } else {
                        at.push(part.to_owned());
                    }
                }
                assert!(
                    tree.contains(&at.join("/")),
                    "{file}: {dest_url} → {}",
                    at.join("/")
                );
                links += 1;
            }
        }
        assert!(links > docs.len(), "{links}");
    }

    #[test]
    fn build_all_canonicalizes_and_leaves_stubs() {
        let docs = vec![
            doc(
                "p/1.md",
                "A",
                Some("2025-01-01T00:00:00Z"),
                &["auth", "csv"],
            ),
            doc(
                "p/2.md",
                "B",
                Some("2025-01-02T00:00:00Z"),
                &["authentication"],
            ),
        ];
        let none = build_all(&docs, &Curation::default());
        assert_eq!(
            none.keys().collect::<Vec<_>>(),
            ["auth.md", "authentication.md", "csv.md"]
        );
        let curation = Curation::fold([alias("auth", "authentication", Author::User, "1")]);
        let merged = build_all(&docs, &curation);
        assert!(merged["authentication.md"].starts_with("# authentication — 2 documents"));
        assert!(merged["auth.md"].contains("merged into [authentication](authentication.md)"));
        assert_eq!(merged["csv.md"], none["csv.md"]);
        // Documents in another order: the same bytes.
        let reversed: Vec<Redacted<IndexDoc>> = docs.iter().rev().cloned().collect();
        assert_eq!(build_all(&reversed, &curation), merged);
    }

    #[test]
    fn alias_changes_name_every_touched_topic() {
        let old: BTreeMap<String, String> = [("auth".to_string(), "authn".to_string())].into();
        let new: BTreeMap<String, String> = [
            ("auth".to_string(), "authentication".to_string()),
            ("login".to_string(), "authentication".to_string()),
        ]
        .into();
        let touched: Vec<String> = alias_changes(&old, &new).into_iter().collect();
        assert_eq!(touched, ["auth", "authentication", "authn", "login"]);
        assert!(alias_changes(&new, &new).is_empty());
    }

    #[test]
    fn manifest_round_trips_and_refuses_other_versions_and_garbage() {
        let mut m = Manifest {
            v: MANIFEST_VERSION,
            documents: 2,
            ..Manifest::default()
        };
        m.aliases.insert("auth".into(), "authentication".into());
        let store = m.render();
        assert!(
            !store.contains("inputs"),
            "the store's index records no trees"
        );
        m.inputs.insert("chapters".into(), "0".repeat(40));
        let text = m.render();
        assert_eq!(Manifest::parse(&text), Some(m.clone()));
        assert_eq!(m.render(), text, "deterministic bytes");
        assert_eq!(Manifest::parse(&store).map(|m| m.inputs.len()), Some(0));
        assert_eq!(Manifest::parse(&text.replace("\"v\": 3", "\"v\": 9")), None);
        // An index of the manifest parts: rebuilt.
        assert_eq!(Manifest::parse(&text.replace("\"v\": 3", "\"v\": 2")), None);
        assert_eq!(Manifest::parse(""), None);
        assert_eq!(Manifest::parse(&text[..text.len() / 2]), None);
        assert_eq!(Manifest::parse("{\"v\":2,\"documents\":\"x\"}"), None);
    }
}

//! The one reader of a document's frontmatter fields that the store's catalog and the
//! search table keep ([`Head`]). Fast for the shapes our writers produce
//! (`render::yaml::FrontmatterWriter`: one `key: value` line each, plain identifier-like
//! words or double-quoted strings, flow sequences and maps): a first sync reads every chapter
//! of the pool, and the archive every document it writes, and a YAML deserializer per
//! document was an eighth of the one and a tenth of the other. Anything outside those shapes
//! — a comment, a block sequence, an escape our writer never emits, a duplicate key, a plain
//! word YAML could read as a number, boolean or null — answers `None`, and the caller parses
//! with YAML ([`Head::parse_yaml`], or the table's own parse): the fast path gives the YAML
//! parse's values or nothing. Pure.

use std::collections::BTreeMap;

use serde::Deserialize;

// The writer's own list: a word it writes plain is one this reader reads plain.
use super::yaml::RESERVED_WORDS;

/// How deep flow collections nest in a value this reader skips (ours: two).
const MAX_DEPTH: usize = 8;

/// A frontmatter longer than this is counted unreadable rather than buffered.
pub const MAX_FRONTMATTER_BYTES: usize = 256 * 1024;

/// The frontmatter of a document's bytes (from its opening `---` line through its closing
/// one) and where the body starts, or why the bytes hold none a reader takes: empty, no
/// opening line, no closing one within [`MAX_FRONTMATTER_BYTES`], not UTF-8. The one rule of
/// what is a document at all: the search table counts the rest unreadable, and the store's
/// catalog records it so.
pub fn bounded_head(bytes: &[u8]) -> Result<(&str, usize), String> {
    if bytes.is_empty() {
        return Err("empty file".into());
    }
    if !bytes.starts_with(b"---\n") {
        return Err("no YAML frontmatter (the first line is not `---`)".into());
    }
    let window = &bytes[..bytes.len().min(MAX_FRONTMATTER_BYTES)];
    let end = memchr::memmem::find(&window[3..], b"\n---\n")
        .map(|i| i + 3 + 5)
        .ok_or_else(|| {
            format!("no closing `---` within the first {MAX_FRONTMATTER_BYTES} bytes")
        })?;
    let head =
        std::str::from_utf8(&window[..end]).map_err(|_| "frontmatter is not UTF-8".to_owned())?;
    Ok((head, end))
}

/// The frontmatter fields the catalog and the search table keep. `title` is required (a
/// document without one is not a chapter, plan or rule).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Head {
    pub title: String,
    pub summary: String,
    /// `None` when the frontmatter names no kind (the original plugin's chapters).
    pub kind: Option<String>,
    pub project_key: String,
    pub topics: Vec<String>,
    /// The labels a model gave that the vocabulary did not know (`topicsUnvetted`).
    pub topics_unvetted: Vec<String>,
    pub date: Option<String>,
    pub session_id: Option<String>,
    pub seq_range: Option<(u64, u64)>,
    pub id: Option<String>,
    /// The model that wrote the title: `generated.title.model` when `generated.title.by` is
    /// `model`.
    pub title_model: Option<String>,
}

impl Head {
    /// The YAML parse of `yaml` (the text between the `---` lines), for what [`read`] does
    /// not read: the values it would have given, or why there are none.
    pub fn parse_yaml(yaml: &str) -> Result<Head, String> {
        let raw: HeadYaml = serde_saphyr::from_str(yaml).map_err(|e| e.to_string())?;
        let title_model = match raw.generated.and_then(|mut g| g.remove("title")) {
            Some(Provenance::Fields(title)) => (title.get("by").map(String::as_str)
                == Some("model"))
            .then(|| title.get("model").cloned())
            .flatten(),
            _ => None,
        };
        Ok(Head {
            title: raw.title,
            summary: raw.summary,
            kind: raw.kind,
            project_key: raw.project_key,
            topics: raw.topics,
            topics_unvetted: raw.topics_unvetted,
            date: raw.date,
            session_id: raw.session_id,
            seq_range: raw.seq_range,
            id: raw.id,
            title_model,
        })
    }
}

/// [`Head`] as YAML spells it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeadYaml {
    title: String,
    #[serde(default)]
    summary: String,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    project_key: String,
    #[serde(default)]
    topics: Vec<String>,
    #[serde(default)]
    topics_unvetted: Vec<String>,
    #[serde(default)]
    date: Option<String>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    seq_range: Option<(u64, u64)>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    generated: Option<BTreeMap<String, Provenance>>,
}

/// One entry of `generated`: a chapter's per-field provenance (`{by, model, at, …}`), or
/// anything else (a rule's `by: deterministic`), which names no model.
#[derive(Deserialize)]
#[serde(untagged)]
enum Provenance {
    Fields(BTreeMap<String, String>),
    Other(serde::de::IgnoredAny),
}

/// The fields of `yaml` (the text between the `---` lines, each line ending in `\n`), or
/// `None` when it is not in the shapes this reader knows.
pub fn read(yaml: &str) -> Option<Head> {
    let mut head = Head::default();
    let mut has_title = false;
    let mut seen: Vec<&str> = Vec::with_capacity(24);
    let body = yaml.strip_suffix('\n')?;
    for line in body.split('\n') {
        let (key, value) = line.split_once(": ")?;
        if !is_key(key) || seen.contains(&key) {
            return None;
        }
        seen.push(key);
        let mut at = Cursor {
            text: value,
            pos: 0,
        };
        match key {
            "title" => {
                head.title = at.string()?;
                has_title = true;
            }
            "summary" => head.summary = at.string()?,
            "kind" => head.kind = Some(at.string()?),
            "projectKey" => head.project_key = at.string()?,
            "topics" => head.topics = at.strings()?,
            "topicsUnvetted" => head.topics_unvetted = at.strings()?,
            "date" => head.date = at.optional(Cursor::string)?,
            "sessionId" => head.session_id = at.optional(Cursor::string)?,
            "id" => head.id = at.optional(Cursor::string)?,
            "seqRange" => head.seq_range = at.optional(Cursor::pair)?,
            "generated" => head.title_model = at.generated()?,
            _ => at.skip(0)?,
        }
        if !at.done() {
            return None;
        }
    }
    has_title.then_some(head)
}

/// A key as our writers spell them: an ASCII letter, then letters, digits or `_`.
fn is_key(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn done(&self) -> bool {
        self.pos == self.text.len()
    }

    fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }

    fn eat(&mut self, s: &str) -> bool {
        let hit = self.rest().starts_with(s);
        if hit {
            self.pos += s.len();
        }
        hit
    }

    /// `null` (the whole value) or what `read` reads.
    fn optional<T>(&mut self, read: fn(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.rest() == "null" {
            self.pos = self.text.len();
            return Some(None);
        }
        read(self).map(Some)
    }

    /// A string: double-quoted, or plain as the writer writes it plain (an identifier-like
    /// word that no YAML reader takes for a number, boolean or null).
    fn string(&mut self) -> Option<String> {
        if self.rest().starts_with('"') {
            return self.quoted();
        }
        let word = self.plain_token(|b| b.is_ascii_alphanumeric() || b"_-./".contains(&b))?;
        let first = word.as_bytes()[0];
        if !(first.is_ascii_alphabetic() || first == b'_')
            || RESERVED_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
        {
            return None;
        }
        Some(word.to_owned())
    }

    /// `[s, s, …]` of strings, `, ` between them.
    fn strings(&mut self) -> Option<Vec<String>> {
        let mut items = Vec::new();
        self.seq(|at| {
            items.push(at.string()?);
            Some(())
        })?;
        Some(items)
    }

    /// `[a, b]` of unsigned decimal integers (no sign, no leading zero, no overflow).
    fn pair(&mut self) -> Option<(u64, u64)> {
        let mut items = Vec::with_capacity(2);
        self.seq(|at| {
            let digits = at.plain_token(|b| b.is_ascii_digit())?;
            if digits.len() > 1 && digits.starts_with('0') {
                return None;
            }
            items.push(digits.parse::<u64>().ok()?);
            Some(())
        })?;
        match items[..] {
            [a, b] => Some((a, b)),
            _ => None,
        }
    }

    /// A flow sequence, each item read by `item`.
    fn seq(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        if !self.eat("[") {
            return None;
        }
        if self.eat("]") {
            return Some(());
        }
        loop {
            item(self)?;
            if self.eat("]") {
                return Some(());
            }
            if !self.eat(", ") {
                return None;
            }
        }
    }

    /// `generated`'s flow map: the model of its `title` entry when that entry is a flow map
    /// of strings whose `by` is `model`; every other entry checked as [`Cursor::skip`] does.
    fn generated(&mut self) -> Option<Option<String>> {
        let mut model = None;
        self.map(0, |at, key| {
            if key != "title" || !at.rest().starts_with('{') {
                return at.skip(1);
            }
            let mut fields: Vec<(&str, String)> = Vec::new();
            at.map(1, |at, key| {
                fields.push((key, at.string()?));
                Some(())
            })?;
            let get = |k: &str| fields.iter().find(|(f, _)| *f == k).map(|(_, v)| v);
            if get("by").map(String::as_str) == Some("model") {
                model = get("model").cloned();
            }
            Some(())
        })?;
        Some(model)
    }

    /// A flow map (`{k: v, …}`, keys as [`is_key`] spells them, each once), each value read
    /// by `value` with its key.
    fn map(
        &mut self,
        depth: usize,
        mut value: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        if depth > MAX_DEPTH || !self.eat("{") {
            return None;
        }
        if self.eat("}") {
            return Some(());
        }
        let mut keys: Vec<&str> = Vec::new();
        loop {
            let (key, _) = self.rest().split_once(": ")?;
            if !is_key(key) || keys.contains(&key) {
                return None;
            }
            keys.push(key);
            self.pos += key.len() + 2;
            value(self, key)?;
            if self.eat("}") {
                return Some(());
            }
            if !self.eat(", ") {
                return None;
            }
        }
    }

    /// A value of a key the table does not keep: checked to be one YAML would read
    /// (quoted string, a plain word, a flow sequence or a flow map of those), not kept.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.rest().as_bytes().first()? {
            b'"' => self.quoted().map(|_| ()),
            b'[' => self.seq(|at| at.skip(depth + 1)),
            b'{' => self.map(depth, |at, _| at.skip(depth + 1)),
            _ => {
                // A number, a float's YAML spelling (`.inf`, `-0.5`) or a word.
                let word =
                    self.plain_token(|b| b.is_ascii_alphanumeric() || b"_-.+/".contains(&b))?;
                let first = word.as_bytes()[0];
                let lone_indicator = matches!(first, b'-' | b'.' | b'+') && word.len() < 2;
                (!lone_indicator && first != b'+').then_some(())
            }
        }
    }

    /// The longest non-empty run of bytes `allowed` takes, from here.
    fn plain_token(&mut self, allowed: impl Fn(u8) -> bool) -> Option<&'a str> {
        let rest = self.rest();
        let len = rest.bytes().take_while(|&b| allowed(b)).count();
        if len == 0 {
            return None;
        }
        self.pos += len;
        Some(&rest[..len])
    }

    /// A double-quoted string with the escapes the writer emits (`\"`, `\\`, `\n`, `\t`,
    /// `\r`, `\uXXXX`) and no raw character YAML could read otherwise (controls, line
    /// separators, byte-order marks).
    fn quoted(&mut self) -> Option<String> {
        if !self.eat("\"") {
            return None;
        }
        let rest = self.rest();
        // Room for the run up to the first quote or escape: all of it, most often.
        let mut out = String::with_capacity(
            rest.bytes()
                .position(|b| b == b'"' || b == b'\\')
                .unwrap_or(0),
        );
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Some(out);
                }
                '\\' => {
                    let (_, e) = chars.next()?;
                    out.push(match e {
                        '"' => '"',
                        '\\' => '\\',
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'u' => {
                            let mut code = 0u32;
                            for _ in 0..4 {
                                let (_, h) = chars.next()?;
                                code = code * 16 + h.to_digit(16)?;
                            }
                            char::from_u32(code)?
                        }
                        _ => return None,
                    });
                }
                c if c.is_control()
                    || matches!(
                        c,
                        '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                    ) =>
                {
                    return None;
                }
                c => out.push(c),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::yaml::{float, flow_map, flow_seq, scalar, FrontmatterWriter};

    /// Whether the fast reader read `yaml`; when it did, its values are the YAML parse's:
    /// the catalog's fallback ([`Head::parse_yaml`]) and the search table's own
    /// (`catalog::score::parse_meta`, through the conversion the table makes).
    fn agrees(yaml: &str) -> bool {
        match read(yaml) {
            Some(fast) => {
                assert_eq!(Ok(fast.clone()), Head::parse_yaml(yaml), "{yaml}");
                let table: Result<crate::catalog::score::DocMeta, String> =
                    serde_saphyr::from_str(yaml).map_err(|e| e.to_string());
                assert_eq!(Ok(fast.into()), table, "{yaml}");
                true
            }
            None => false,
        }
    }

    /// Strings a title, summary, topic or id may hold once redacted: the writer's hostile
    /// list and a few more.
    fn values() -> Vec<&'static str> {
        let mut v = crate::render::yaml::tests::HOSTILE.to_vec();
        v.extend(["session-1", "src/auth.rs", "tab\there\r", "\u{fffe}", "Yes"]);
        v
    }

    /// A chapter's frontmatter in `render_chapter`'s order, with `v` in every string field.
    fn chapter(v: &str, date: Option<&str>) -> String {
        let mut fm = FrontmatterWriter::new();
        fm.string("title", v)
            .string("summary", v)
            .string("kind", "chapter");
        match date {
            Some(d) => fm.string("date", d),
            None => fm.raw("date", "null"),
        };
        let composition = flow_seq(&[flow_map(&[
            ("turn", "3".to_owned()),
            ("rule", "topic-change".to_owned()),
            ("score", float(0.75)),
        ])]);
        fm.strings("topics", &[v, "auth"])
            .strings("topicsUnvetted", &[v])
            .uint("continues", 7)
            .uint("messages", 12)
            .uint("tokens", 3000)
            .strings("artifacts", &["0123abcd", "ff00"])
            .strings::<&str>("plans", &[])
            .string("projectKey", v)
            .string("harnessId", v)
            .string("sessionId", v)
            .string("rootSessionId", v)
            .uints("seqRange", &[0, 19])
            .uints("turns", &[1, 2, 3])
            .uint("omittedInjections", 0)
            .raw("composition", &composition)
            .string("sha256", "9f86d081884c7d65")
            .raw(
                "generated",
                &flow_map(&[
                    (
                        "title",
                        flow_map(&[
                            ("by", "model".to_owned()),
                            ("model", scalar(v)),
                            ("at", scalar("2026-12-03T10:00:00Z")),
                            ("previousBy", "deterministic".to_owned()),
                        ]),
                    ),
                    (
                        "summary",
                        flow_map(&[
                            ("by", "model".to_owned()),
                            ("model", scalar(v)),
                            ("at", scalar("2026-12-03T10:00:00Z")),
                        ]),
                    ),
                ]),
            );
        yaml_of(fm.finish())
    }

    /// A rule's frontmatter in `Rule::render`'s order.
    fn rule(v: &str) -> String {
        let mut fm = FrontmatterWriter::new();
        fm.string("title", v)
            .string("summary", v)
            .string("kind", "rule")
            .string("id", v)
            .string("scope", "project")
            .string("category", v)
            .string("status", "proposed")
            .string("projectKey", "pk")
            .string("sessionId", v)
            .uints("seqRange", &[4, 4])
            .string("derivedFrom", "human");
        yaml_of(fm.finish())
    }

    /// The text between the `---` lines, as `parse_head` hands it on.
    fn yaml_of(block: String) -> String {
        crate::render::frontmatter_text(&block)
            .expect("a block")
            .to_owned()
    }

    #[test]
    fn every_shape_our_writers_write_is_read_fast_and_as_yaml_reads_it() {
        for v in values() {
            for date in [None, Some("2026-01-01T10:00:00Z"), Some(v)] {
                let yaml = chapter(v, date);
                assert!(agrees(&yaml), "not read fast: {yaml}");
            }
            let yaml = rule(v);
            assert!(agrees(&yaml), "not read fast: {yaml}");
        }
        // What the bench's pool holds, and a document with the least a title.
        let bench = "title: \"Chapter 0\"\nkind: chapter\nsessionId: session-bench-0\nseqRange: [0, 9]\ndate: \"2026-01-01T10:00:00Z\"\ntopics: [refresh, area-0]\n";
        assert!(agrees(bench));
        assert!(agrees("title: t\n"));
        let meta = read(&chapter("plain", None)).expect("read");
        assert_eq!(
            (
                meta.kind.as_deref(),
                meta.seq_range,
                meta.date,
                meta.topics,
                meta.topics_unvetted,
                meta.title_model.as_deref()
            ),
            (
                Some("chapter"),
                Some((0, 19)),
                None,
                vec!["plain".to_owned(), "auth".to_owned()],
                vec!["plain".to_owned()],
                Some("plain")
            )
        );
    }

    /// The fields the catalog keeps (`kind`, `topicsUnvetted`, the title's model), read fast
    /// where the writer's shapes hold and through YAML where they do not, to the same values.
    #[test]
    fn the_catalogs_fields_are_read_fast_or_by_yaml_to_the_same_values() {
        let generated = |by: &str, model: &str| {
            format!("generated: {{title: {{by: {by}, model: {model}, at: \"2026-12-03T10:00:00Z\"}}, summary: {{by: deterministic}}}}\n")
        };
        let model_head = |title: &str, unvetted: &str| {
            format!(
                "title: {title}\nkind: chapter\ntopics: [a, \"认证\"]\ntopicsUnvetted: {unvetted}\n{}",
                generated("model", "\"qwen2.5:7b\"")
            )
        };
        // Read fast: quoted, plain and Chinese values, empty and flow lists.
        for (yaml, unvetted, model) in [
            (
                model_head("\"修复 登录\"", "[\"认证\"]"),
                vec!["认证"],
                Some("qwen2.5:7b"),
            ),
            (model_head("plain", "[]"), vec![], Some("qwen2.5:7b")),
            (
                format!(
                    "title: t\nkind: chapter\n{}",
                    generated("deterministic", "m")
                ),
                vec![],
                None,
            ),
            // A model titled it but names none; a rule's provenance is no map of fields.
            (
                "title: t\ngenerated: {title: {by: model}}\n".to_owned(),
                vec![],
                None,
            ),
            (
                "title: t\nkind: rule\ngenerated: {by: deterministic}\n".to_owned(),
                vec![],
                None,
            ),
        ] {
            let fast = read(&yaml).unwrap_or_else(|| panic!("not read fast: {yaml}"));
            assert!(agrees(&yaml));
            assert_eq!(fast.topics_unvetted, unvetted, "{yaml}");
            assert_eq!(fast.title_model.as_deref(), model, "{yaml}");
        }
        // Absent fields: no kind, no unvetted labels, no model.
        let bare = read("title: t\n").expect("read");
        assert_eq!(
            (bare.kind, bare.topics_unvetted, bare.title_model),
            (None, Vec::<String>::new(), None)
        );
        // Not the writer's shape (block lists, CRLF, a comment, a number for a model, a
        // hand-edited provenance): the YAML parse reads them.
        for (yaml, unvetted, model) in [
            (
                "title: t\nkind: chapter\ntopicsUnvetted:\n  - 认证\n  - b\ngenerated:\n  title: {by: model, model: m}\n",
                vec!["认证", "b"],
                Some("m"),
            ),
            (
                "title: t\r\nkind: chapter\r\ntopicsUnvetted: [x]\r\ngenerated: {title: {by: model, model: m}}\r\n",
                vec!["x"],
                Some("m"),
            ),
            (
                "title: t  # edited\ntopicsUnvetted: ['y']\ngenerated: {title: {by: 'model', model: \"m\"}}\n",
                vec!["y"],
                Some("m"),
            ),
            (
                "title: t\ngenerated: {title: {by: model, model: m, note: [1, 2]}}\n",
                vec![],
                None,
            ),
        ] {
            assert!(read(yaml).is_none(), "read fast: {yaml:?}");
            let slow = Head::parse_yaml(yaml).unwrap_or_else(|e| panic!("{yaml:?}: {e}"));
            assert_eq!(slow.topics_unvetted, unvetted, "{yaml:?}");
            assert_eq!(slow.title_model.as_deref(), model, "{yaml:?}");
        }
    }

    #[test]
    fn unusual_yaml_goes_to_the_yaml_parse() {
        for yaml in [
            "",
            "title: x",
            "title: x\ntitle: y\n",
            "title: x  # a comment\n",
            "tokens: 321  # chars/4 estimate\ntitle: x\n",
            "title: x\ntopics:\n  - a\n",
            "title: 'single'\n",
            "title: \"\\x41\"\n",
            "title: \"\\ud800\"\n",
            "title: \"tab\there\"\n",
            "title: 123\n",
            "title: true\n",
            "title: ~\n",
            "title: null\n",
            "title: &a x\n",
            "title: x\r\n",
            "title: x \n",
            "title:  x\n",
            "title: x\n\n",
            "# c\ntitle: x\n",
            "title: x\nseqRange: [007, 1]\n",
            "title: x\nseqRange: [18446744073709551616, 1]\n",
            "title: x\nseqRange: [1, 2, 3]\n",
            "title: x\nseqRange: [-1, 2]\n",
            "title: x\ntopics: [a,b]\n",
            "title: x\ntopics: [a, 7]\n",
            "title: x\nextra: {a: 1, a: 2}\n",
            "title: x\nextra: [[[[[[[[[[1]]]]]]]]]]\n",
            "title: x\nextra: +1\n",
            "title: x\nextra: -\n",
            "summary: no title\n",
            "? title\n: x\n",
            "\"title\": x\n",
        ] {
            assert!(read(yaml).is_none(), "read fast: {yaml:?}");
        }
    }

    #[test]
    fn a_frontmatter_changed_anywhere_is_read_as_yaml_reads_it_or_not_at_all() {
        let base = "title: \"Fix \\\"it\\\" \\u00e9\"\nsummary: s\nkind: chapter\ndate: null\ntopics: [a-b, \"c d\"]\ntopicsUnvetted: [a-b]\nseqRange: [3, 9]\nid: r1\ngenerated: {title: {by: model, model: \"m 1\"}, n: [1, .5, -2]}\n";
        assert!(agrees(base), "the base is read fast");
        let marks = [
            ' ', '"', '\\', ':', '#', '[', ']', '{', '}', ',', '-', '\n', '\t', '0', 'a', '\'',
            '&', '*', '!', '|', '>', '?', '%', '@', '`', '\r', '.', 'u', 'é',
        ];
        let (mut fast, mut cases) = (0, 0);
        let cuts: Vec<usize> = base.char_indices().map(|(i, _)| i).collect();
        for &at in &cuts {
            let next = base[at..].chars().next().map_or(0, char::len_utf8);
            let mut variants = vec![format!("{}{}", &base[..at], &base[at + next..])];
            for m in marks {
                variants.push(format!("{}{m}{}", &base[..at], &base[at..]));
                variants.push(format!("{}{m}{}", &base[..at], &base[at + next..]));
            }
            for v in variants {
                cases += 1;
                fast += usize::from(agrees(&v));
            }
        }
        // Most changes keep a shape the reader knows: the comparison is not vacuous.
        assert!(fast > cases / 10, "{fast} of {cases} read fast");
    }
}

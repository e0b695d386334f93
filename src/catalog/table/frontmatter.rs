//! A fast reader of the frontmatter fields the search table keeps ([`DocMeta`]), for the
//! shapes our writers produce (`render::yaml::FrontmatterWriter`: one `key: value` line each,
//! plain identifier-like words or double-quoted strings, flow sequences and maps). A first
//! sync reads every chapter of the pool: a YAML deserializer per document was an eighth of
//! it. Anything outside those shapes — a comment, a block sequence, an escape our writer
//! never emits, a duplicate key, a plain word YAML could read as a number, boolean or null —
//! answers `None`, and the caller parses with YAML as before: the fast path gives the YAML
//! parse's values or nothing. Pure.

use crate::catalog::score::DocMeta;
// The writer's own list: a word it writes plain is one this reader reads plain.
use crate::render::yaml::RESERVED_WORDS;

/// How deep flow collections nest in a value this reader skips (ours: two).
const MAX_DEPTH: usize = 8;

/// The fields of `yaml` (the text between the `---` lines, each line ending in `\n`), or
/// `None` when it is not in the shapes this reader knows.
pub(super) fn read(yaml: &str) -> Option<DocMeta> {
    let mut title = None;
    let mut summary = None;
    let mut kind = None;
    let mut project_key = None;
    let mut topics = None;
    let mut date = None;
    let mut session_id = None;
    let mut seq_range = None;
    let mut id = None;
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
            "title" => title = Some(at.string()?),
            "summary" => summary = Some(at.string()?),
            "kind" => kind = Some(at.string()?),
            "projectKey" => project_key = Some(at.string()?),
            "topics" => topics = Some(at.strings()?),
            "date" => date = Some(at.optional(Cursor::string)?),
            "sessionId" => session_id = Some(at.optional(Cursor::string)?),
            "id" => id = Some(at.optional(Cursor::string)?),
            "seqRange" => seq_range = Some(at.optional(Cursor::pair)?),
            _ => at.skip(0)?,
        }
        if !at.done() {
            return None;
        }
    }
    Some(DocMeta {
        title: title?,
        summary: summary.unwrap_or_default(),
        kind: kind.unwrap_or_else(crate::catalog::score::chapter_kind),
        project_key: project_key.unwrap_or_default(),
        topics: topics.unwrap_or_default(),
        date: date.flatten(),
        session_id: session_id.flatten(),
        seq_range: seq_range.flatten(),
        id: id.flatten(),
    })
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

    /// A value of a key the table does not keep: checked to be one YAML would read
    /// (quoted string, a plain word, a flow sequence or a flow map of those), not kept.
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.rest().as_bytes().first()? {
            b'"' => self.quoted().map(|_| ()),
            b'[' => self.seq(|at| at.skip(depth + 1)),
            b'{' => {
                self.pos += 1;
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
                    self.skip(depth + 1)?;
                    if self.eat("}") {
                        return Some(());
                    }
                    if !self.eat(", ") {
                        return None;
                    }
                }
            }
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

    /// The YAML parse the table used alone before: the fast reader's values must be its.
    fn by_yaml(yaml: &str) -> Result<DocMeta, String> {
        serde_saphyr::from_str(yaml).map_err(|e| e.to_string())
    }

    /// Whether the fast reader read `yaml`; when it did, its values are the YAML parse's.
    fn agrees(yaml: &str) -> bool {
        match read(yaml) {
            Some(fast) => {
                assert_eq!(Ok(fast), by_yaml(yaml), "{yaml}");
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
                    ("title", flow_map(&[("by", "deterministic".to_owned())])),
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
            (meta.kind.as_str(), meta.seq_range, meta.date, meta.topics),
            (
                "chapter",
                Some((0, 19)),
                None,
                vec!["plain".to_owned(), "auth".to_owned()]
            )
        );
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
        let base = "title: \"Fix \\\"it\\\" \\u00e9\"\nsummary: s\nkind: chapter\ndate: null\ntopics: [a-b, \"c d\"]\nseqRange: [3, 9]\nid: r1\ngenerated: {t: {by: x}, n: [1, .5, -2]}\n";
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

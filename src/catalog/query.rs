//! What a person types into `chapters search`, read (PURE): words, `"phrases"`, `prefix*`,
//! `-excluded` words; the FTS5 expression the search cache runs for it; CJK text cut into
//! overlapping bigrams; dates for `--since`/`--until`; the snippet shown under a match.
//!
//! Nothing typed reaches SQLite as syntax: every word is a run of letters, digits and `_`,
//! quoted in the expression, so `NEAR`, `:`, `*`, `"` and `-` typed as words are words (or
//! nothing), never an FTS syntax error.
//!
//! CJK is indexed as overlapping bigrams (`数据库连接` → `数据 据库 库连 连接`) rather than with
//! FTS5's trigram tokenizer: most Chinese words are two characters, which a trigram index
//! cannot find at all, and the trigram tokenizer would also turn every Latin word into
//! substrings (a far larger index, and BM25 over trigrams instead of words). A query word of
//! CJK text becomes the phrase of its bigrams, so a word is found inside a sentence.

/// The most query terms one search uses; the rest of a longer query is ignored (and said).
pub const MAX_TERMS: usize = 32;

/// One positive part of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// A word (lowercase).
    Word(String),
    /// `auth*`: any word starting with this.
    Prefix(String),
    /// `"refresh token"`: these words in a row.
    Phrase(Vec<String>),
}

impl Term {
    fn words(&self) -> &[String] {
        match self {
            Term::Word(w) | Term::Prefix(w) => std::slice::from_ref(w),
            Term::Phrase(ws) => ws,
        }
    }
}

/// A query, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub terms: Vec<Term>,
    /// `-draft`: documents containing this word anywhere are left out.
    pub excluded: Vec<String>,
    /// Terms beyond [`MAX_TERMS`] that were dropped.
    pub dropped: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Split a run of text into lowercase words (letters, digits, `_`).
fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !is_word_char(c))
        .filter(|w| !w.is_empty())
        .map(|w| w.chars().flat_map(char::to_lowercase).collect())
        .collect()
}

impl Parsed {
    /// Read a query. Unbalanced quotes close at the end; a lone `-` or `*` is nothing.
    pub fn parse(text: &str) -> Parsed {
        let mut out = Parsed::default();
        let chars: Vec<char> = text.chars().collect();
        let mut i = 0;
        let push = |out: &mut Parsed, term: Option<Term>, excluded: Option<String>| {
            if out.terms.len() + out.excluded.len() >= MAX_TERMS {
                out.dropped += 1;
                return;
            }
            if let Some(t) = term {
                if !out.terms.contains(&t) {
                    out.terms.push(t);
                }
            }
            if let Some(x) = excluded {
                if !out.excluded.contains(&x) {
                    out.excluded.push(x);
                }
            }
        };
        while i < chars.len() {
            let c = chars[i];
            if c == '"' {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && chars[end] != '"' {
                    end += 1;
                }
                let inner: String = chars[start..end].iter().collect();
                let words = words_of(&inner);
                match words.len() {
                    0 => {}
                    1 => push(&mut out, Some(Term::Word(words[0].clone())), None),
                    _ => push(&mut out, Some(Term::Phrase(words)), None),
                }
                i = end + 1;
                continue;
            }
            let at_start = i == 0 || chars[i - 1].is_whitespace();
            if c == '-' && at_start && chars.get(i + 1).is_some_and(|n| is_word_char(*n)) {
                let start = i + 1;
                let mut end = start;
                while end < chars.len() && !chars[end].is_whitespace() {
                    end += 1;
                }
                let raw: String = chars[start..end].iter().collect();
                for w in words_of(&raw) {
                    push(&mut out, None, Some(w));
                }
                i = end;
                continue;
            }
            if is_word_char(c) {
                let start = i;
                while i < chars.len() && is_word_char(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i]
                    .iter()
                    .flat_map(|c| c.to_lowercase())
                    .collect();
                let prefix = chars.get(i) == Some(&'*');
                if prefix {
                    i += 1;
                }
                // One letter or digit is no word to look for (a CJK character is).
                if word.chars().count() < 2 && !word.chars().any(is_cjk) {
                    continue;
                }
                let term = if prefix {
                    Term::Prefix(word)
                } else {
                    Term::Word(word)
                };
                push(&mut out, Some(term), None);
                continue;
            }
            i += 1;
        }
        out
    }

    /// Nothing to look for (only exclusions, or nothing at all).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The words the record's §8 scorer weighs (topic, title, summary, kind): every positive
    /// word of two or more characters, once, in order.
    pub fn scored_words(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in &self.terms {
            for w in t.words() {
                if w.chars().count() >= 2 && !out.contains(w) {
                    out.push(w.clone());
                }
            }
        }
        out
    }

    /// The FTS5 expression every positive term must match (AND), or `None` when there is
    /// no positive term.
    pub fn fts_match(&self) -> Option<String> {
        if self.terms.is_empty() {
            return None;
        }
        Some(self.fts_phrases().join(" AND "))
    }

    /// The FTS5 expression of each positive term, as [`Parsed::fts_match`] joins them: the
    /// phrases FTS5's BM25 sums over.
    pub fn fts_phrases(&self) -> Vec<String> {
        self.terms.iter().map(fts_term).collect()
    }

    /// The FTS5 expression of the whole query as one phrase (its words in a row), when it is
    /// two or more plain words, or `None`: a document holding it ranks first among those
    /// holding every word (`npm test` over `npm run test`).
    pub fn fts_whole_phrase(&self) -> Option<String> {
        if self.terms.len() < 2 || !self.terms.iter().all(|t| matches!(t, Term::Word(_))) {
            return None;
        }
        let words: Vec<String> = self.terms.iter().flat_map(|t| t.words().to_vec()).collect();
        Some(fts_term(&Term::Phrase(words)))
    }

    /// The FTS5 expression matching any positive term (OR), or `None`: what plain BM25
    /// ranks (the relevance baseline).
    pub fn fts_any(&self) -> Option<String> {
        if self.terms.is_empty() {
            return None;
        }
        let parts: Vec<String> = self.terms.iter().map(fts_term).collect();
        Some(parts.join(" OR "))
    }

    /// The FTS5 expression of the excluded words (any), or `None`.
    pub fn fts_excluded(&self) -> Option<String> {
        if self.excluded.is_empty() {
            return None;
        }
        let parts: Vec<String> = self
            .excluded
            .iter()
            .map(|w| fts_term(&Term::Word(w.clone())))
            .collect();
        Some(parts.join(" OR "))
    }

    /// The FTS5 expression of the terms a §8 field hit cannot stand for (phrases): a
    /// document the scorer found must also match these, or `None`.
    pub fn fts_required(&self) -> Option<String> {
        let parts: Vec<String> = self
            .terms
            .iter()
            .filter(|t| matches!(t, Term::Phrase(_)))
            .map(fts_term)
            .collect();
        (!parts.is_empty()).then(|| parts.join(" AND "))
    }

    /// What to look for in a body when cutting a snippet, best first: every word of the
    /// query in a row, then each term, longest first.
    pub fn needles(&self) -> Vec<String> {
        let all: Vec<String> = self.terms.iter().flat_map(|t| t.words().to_vec()).collect();
        let mut out: Vec<String> = self
            .terms
            .iter()
            .map(|t| match t {
                Term::Word(w) | Term::Prefix(w) => w.clone(),
                Term::Phrase(ws) => ws.join(" "),
            })
            .collect();
        out.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
        if all.len() > 1 {
            out.insert(0, all.join(" "));
        }
        out
    }
}

/// One term as an FTS5 string: quoted (its words are letters, digits and `_` only, so no
/// quote can be inside), CJK runs as bigram phrases, `*` after a prefix.
fn fts_term(t: &Term) -> String {
    let body = t
        .words()
        .iter()
        .map(|w| cjk_bigrams(w))
        .collect::<Vec<_>>()
        .join(" ");
    let quoted = format!("\"{}\"", body.trim().replace('"', "\"\""));
    match t {
        Term::Prefix(_) => format!("{quoted} *"),
        _ => quoted,
    }
}

/// Han, kana and Hangul: scripts written without spaces between words.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // Extensions B.. and compatibility supplement
}

/// Text with every run of CJK characters replaced by its overlapping bigrams, spaced
/// apart from the text around it (a run of one character stays as it is). Applied alike to
/// what is indexed and to a query word.
pub fn cjk_bigrams(text: &str) -> String {
    if !text.chars().any(is_cjk) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() * 2);
    let mut run: Vec<char> = Vec::new();
    let flush = |run: &mut Vec<char>, out: &mut String| {
        if run.is_empty() {
            return;
        }
        out.push(' ');
        if run.len() == 1 {
            out.push(run[0]);
        } else {
            for (n, pair) in run.windows(2).enumerate() {
                if n > 0 {
                    out.push(' ');
                }
                out.push(pair[0]);
                out.push(pair[1]);
            }
        }
        out.push(' ');
        run.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Milliseconds of `--since`/`--until`: `YYYY-MM-DD` (00:00 UTC), an RFC 3339 time, or
/// `Nd` / `Nh` / `Nw` before `now_ms`.
pub fn parse_when(text: &str, now_ms: i64) -> Option<i64> {
    let t = text.trim();
    if let Some(ms) = crate::time::parse_rfc3339_ms(t) {
        return Some(ms);
    }
    if t.len() == 10 {
        if let Some(ms) = crate::time::parse_rfc3339_ms(&format!("{t}T00:00:00Z")) {
            return Some(ms);
        }
    }
    let (num, unit) = t.split_at(t.len().checked_sub(1)?);
    let n: i64 = num.parse().ok().filter(|n| *n >= 0)?;
    let unit_ms: i64 = match unit {
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return None,
    };
    Some(now_ms.saturating_sub(n.saturating_mul(unit_ms)))
}

/// The most characters of a snippet.
pub const SNIPPET_CHARS: usize = 100;

/// A short piece of `body` around the first place the first of `needles` that occurs at all
/// occurs (case-folded), on one line, `…` where it was cut; `None` when no needle occurs.
pub fn snippet(body: &str, needles: &[String]) -> Option<String> {
    // Lowercase char by char so positions line up with the original characters.
    let chars: Vec<char> = body
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let mut best: Option<(usize, usize)> = None;
    for needle in needles {
        let n: Vec<char> = needle.chars().collect();
        if n.is_empty() || n.len() > lower.len() {
            continue;
        }
        if let Some(at) = lower.windows(n.len()).position(|w| w == n.as_slice()) {
            best = Some((at, n.len()));
            break;
        }
    }
    let (at, len) = best?;
    let before = 30usize;
    let start = at.saturating_sub(before);
    let end = (at + len + SNIPPET_CHARS.saturating_sub(before + len).max(10)).min(chars.len());
    let mut text = String::new();
    if start > 0 {
        text.push('…');
    }
    let mut last_space = false;
    for &c in &chars[start..end] {
        let space = c.is_whitespace();
        if !(space && last_space) {
            text.push(if space { ' ' } else { c });
        }
        last_space = space;
    }
    if end < chars.len() {
        text.push('…');
    }
    Some(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_whole_query_as_a_phrase_and_any_term() {
        assert_eq!(
            Parsed::parse("npm test").fts_whole_phrase().as_deref(),
            Some("\"npm test\"")
        );
        assert_eq!(Parsed::parse("npm").fts_whole_phrase(), None);
        assert_eq!(Parsed::parse("npm tes*").fts_whole_phrase(), None);
        assert_eq!(
            Parsed::parse("npm OR test").fts_any().as_deref(),
            Some("\"npm\" OR \"or\" OR \"test\"")
        );
    }

    use super::*;

    #[test]
    fn words_phrases_prefixes_and_exclusions() {
        let p = Parsed::parse(r#"Refresh "Refresh Token" auth* -draft npm"#);
        assert_eq!(
            p.terms,
            [
                Term::Word("refresh".into()),
                Term::Phrase(vec!["refresh".into(), "token".into()]),
                Term::Prefix("auth".into()),
                Term::Word("npm".into()),
            ]
        );
        assert_eq!(p.excluded, ["draft"]);
        assert_eq!(
            p.fts_match().expect("match"),
            r#""refresh" AND "refresh token" AND "auth" * AND "npm""#
        );
        assert_eq!(p.fts_excluded().expect("excluded"), r#""draft""#);
        assert_eq!(p.fts_required().expect("phrase"), r#""refresh token""#);
        assert_eq!(p.scored_words(), ["refresh", "token", "auth", "npm"]);
    }

    #[test]
    fn syntax_typed_as_words_is_never_syntax() {
        for text in [
            r#"""#,
            "-",
            "*",
            ":",
            "NEAR",
            r#"a"b"#,
            r#"title:x OR y NEAR(z) "unbalanced"#,
            "- * : ^ ( ) { }",
            "ab-cd",
        ] {
            let p = Parsed::parse(text);
            if let Some(m) = p.fts_match() {
                // Every part is a quoted string, optionally followed by ` *`, joined by AND.
                for part in m.split(" AND ") {
                    let part = part.strip_suffix(" *").unwrap_or(part);
                    assert!(
                        part.starts_with('"') && part.ends_with('"') && part.len() >= 2,
                        "{text:?} → {m}"
                    );
                    assert!(!part[1..part.len() - 1].contains('"'), "{text:?} → {m}");
                }
            }
        }
        assert!(Parsed::parse("-").is_empty());
        assert!(Parsed::parse("a ! b*").is_empty(), "one letter is no word");
        assert!(Parsed::parse("-draft").is_empty(), "exclusion alone");
        assert_eq!(
            Parsed::parse("NEAR").terms,
            [Term::Word("near".into())],
            "an operator typed is a word"
        );
        assert_eq!(
            Parsed::parse("ab-cd").terms,
            [Term::Word("ab".into()), Term::Word("cd".into())]
        );
        assert_eq!(
            Parsed::parse(r#""open phrase here"#).terms,
            [Term::Phrase(vec![
                "open".into(),
                "phrase".into(),
                "here".into()
            ])]
        );
    }

    #[test]
    fn a_huge_query_is_cut_to_the_term_limit() {
        let text = (0..10_000)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let p = Parsed::parse(&text);
        assert_eq!(p.terms.len(), MAX_TERMS);
        assert_eq!(p.dropped, 10_000 - MAX_TERMS);
    }

    #[test]
    fn cjk_runs_become_bigrams_alike_in_text_and_query() {
        assert_eq!(
            cjk_bigrams("修复数据库连接"),
            " 修复 复数 数据 据库 库连 连接 "
        );
        assert_eq!(cjk_bigrams("abc"), "abc");
        assert_eq!(cjk_bigrams("用"), " 用 ");
        assert_eq!(cjk_bigrams("run测试now"), "run 测试 now");
        let p = Parsed::parse("数据库");
        assert_eq!(p.fts_match().expect("m"), r#""数据 据库""#);
    }

    #[test]
    fn dates_and_relative_spans() {
        let now = crate::time::parse_rfc3339_ms("2026-01-10T12:00:00Z").expect("now");
        assert_eq!(
            parse_when("2026-01-03", now),
            crate::time::parse_rfc3339_ms("2026-01-03T00:00:00Z")
        );
        assert_eq!(parse_when("7d", now), Some(now - 7 * 86_400_000));
        assert_eq!(parse_when("2w", now), Some(now - 14 * 86_400_000));
        assert_eq!(parse_when("soon", now), None);
        assert_eq!(parse_when("-3d", now), None);
        assert_eq!(parse_when("", now), None);
    }

    #[test]
    fn snippet_is_one_line_around_the_first_match() {
        let body = "intro line\n\nThe linter said:\n  docs/a.md:3 MD013/line-length Line length\nmore text";
        let s = snippet(body, &["md013".into()]).expect("found");
        assert!(s.contains("MD013"), "{s}");
        assert!(!s.contains('\n'), "{s}");
        assert!(s.chars().count() <= SNIPPET_CHARS + 2, "{s}");
        assert_eq!(snippet(body, &["absent".into()]), None);
        let both = Parsed::parse("npm test").needles();
        assert_eq!(both[0], "npm test", "the words in a row first");
        let s = snippet("the tests ran. then: npm test passed", &both).expect("found");
        assert!(s.contains("npm test"), "{s}");
        let cjk = snippet("我们今天修复了数据库连接的问题", &["数据库".into()]).expect("cjk");
        assert!(cjk.contains("数据库"), "{cjk}");
    }
}

//! The topic terms of human text, for every script. Pure, no model, no dictionary:
//! one pass over the characters, bounded work per character.
//!
//! - The text is read in NFKC and lowercased, so `résumé` typed precomposed or with
//!   combining accents is one term, and full-width `ＡＰＩ` is `api`.
//! - **Alphabetic scripts** (Latin with its accents, Greek, Cyrillic, …): runs of letters,
//!   digits, `_` and combining marks; 3–28 characters, holding a letter, not a stopword.
//!   `résumé` stays `résumé` (an accent never splits a word).
//! - **Chinese characters** (also Japanese kanji): overlapping character bigrams of each
//!   run, the run first cut at function characters (`的`, `了`, `是`, `我`, …) and with
//!   function bigrams (`什么`, `可以`, …) left out. Written Chinese has no spaces, and a word
//!   is most often two characters: `连接池排队` yields `连接`, `接池`, `池排`, `排队`, and
//!   two turns about the same analysis share most of them. See `docs/architecture.md`
//!   ("Terms in every script") for why bigrams and not a segmenter's dictionary.
//! - **Katakana** runs of 2+ (Japanese loanwords: `データベース`) are one term each;
//!   **hiragana** is grammar (particles, endings) and separates.
//! - **Hangul**: each spaced word loses its trailing particle (`분석을` → `분석`), then
//!   yields its syllable bigrams (a two-syllable noun is itself).
//!
//! Bounds: a term is at most 28 characters; the caller counts terms per message.

use unicode_normalization::UnicodeNormalization;

/// Shortest and longest term of an alphabetic script, in characters.
const MIN_WORD_CHARS: usize = 3;
const MAX_WORD_CHARS: usize = 28;

/// Chinese function characters: a run of Han characters is cut at each (particles,
/// pronouns, copula, measure word). Only characters that rarely start or end a content
/// word of technical prose; `会` (会话), `能` (性能), `请` (请求), `对` (对象), `等` (等待)
/// are not among them. Sorted.
const HAN_BREAKS: &[char] = &[
    '一', '个', '么', '也', '了', '他', '们', '你', '吗', '吧', '呀', '呢', '和', '哪', '啊', '嘛',
    '在', '她', '它', '就', '很', '我', '把', '是', '的', '被', '让', '这', '那', '都',
];

/// Characters that, right after `一`, finish a function word with it rather than start a
/// content word: `看一下日志` is 看 + 一下 + 日志 (not `下日`), `一些配置`, `改一点代码`,
/// `一样`, `一直`.
const AFTER_YI_BREAKS: &[char] = &['下', '些', '点', '样', '直'];

/// Chinese bigrams that are function words: they carry no topic. Sorted.
const HAN_STOP_BIGRAMS: &[&str] = &[
    "不对", "为什", "之前", "之后", "任务", "参考", "可以", "因为", "如何", "如果", "已经", "应该",
    "所以", "时候", "比较", "然后", "看看", "知道", "继续", "觉得", "解释", "谢谢", "问题", "需要",
];

/// Korean particles and endings stripped from the end of a spaced word, longest first.
const HANGUL_SUFFIXES: &[&str] = &[
    "입니다",
    "습니다",
    "에서",
    "으로",
    "까지",
    "부터",
    "하고",
    "해서",
    "하는",
    "했다",
    "한다",
    "해줘",
    "주세요",
    "은",
    "는",
    "이",
    "가",
    "을",
    "를",
    "에",
    "의",
    "로",
    "와",
    "과",
    "도",
    "만",
    "요",
    "다",
];

/// What kind of character this is, for tokenizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Part of a word of an alphabetic script.
    Word,
    Han,
    Katakana,
    Hangul,
    /// Anything else, hiragana included: ends every run.
    Break,
}

fn class(c: char) -> Class {
    match c {
        '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{3134F}' => Class::Han,
        // `ー` (U+30FC) lengthens a katakana vowel; `・` (U+30FB) separates words.
        '\u{30FB}' => Class::Break,
        '\u{30A1}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}' => Class::Katakana,
        '\u{AC00}'..='\u{D7A3}' => Class::Hangul,
        '\u{3040}'..='\u{309F}' | '\u{1100}'..='\u{11FF}' | '\u{3130}'..='\u{318F}' => Class::Break,
        '_' => Class::Word,
        // Combining marks left after NFKC (a base letter with no precomposed form).
        '\u{0300}'..='\u{036F}' | '\u{1AB0}'..='\u{1AFF}' | '\u{1DC0}'..='\u{1DFF}' => Class::Word,
        c if c.is_alphanumeric() => Class::Word,
        _ => Class::Break,
    }
}

/// Longest identifier split into words (`refreshTokenMiddleware`), in characters; a longer
/// run is consumed whole and only its head is read.
const MAX_IDENT_CHARS: usize = 64;
/// An identifier of this many words or fewer also yields its joined form.
const MAX_JOINED_PARTS: usize = 3;

/// The topic terms of a text, in order of appearance, with repeats.
pub fn terms_of(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut chars = Nfkc::of(text).peekable();
    let mut pending: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    // One buffer for every run (a word each: the allocation was a share of signing).
    let mut run: Vec<char> = Vec::new();
    std::iter::from_fn(move || loop {
        if let Some(term) = pending.pop_front() {
            return Some(term);
        }
        let first = chars.next()?;
        let kind = class(first);
        if kind == Class::Break {
            continue;
        }
        run.clear();
        run.push(first);
        // A hyphen inside a word joins it (`refresh-token`); it never starts one.
        while let Some(c) =
            chars.next_if(|&c| class(c) == kind || (kind == Class::Word && c == '-'))
        {
            // A run longer than any term is still consumed; only its head is kept
            // for alphabetic words, and CJK runs are cut into bounded pieces anyway.
            if kind != Class::Word || run.len() < MAX_IDENT_CHARS {
                run.push(c);
            }
            if kind != Class::Word && run.len() >= 256 {
                break;
            }
        }
        match kind {
            Class::Word => identifier_terms(&run, &mut pending),
            Class::Han => han_terms(&run, &mut pending),
            Class::Katakana => {
                if (2..=MAX_WORD_CHARS).contains(&run.len()) && run.iter().any(|&c| c != 'ー') {
                    return Some(run.iter().collect());
                }
            }
            Class::Hangul => hangul_terms(&run, &mut pending),
            Class::Break => {}
        }
    })
}

/// The characters of `text` in NFKC: the text itself when it is already normalized (ASCII,
/// and most text: told by the quick check, one pass with no allocation), else normalized.
/// The same characters either way — NFKC of normalized text is that text.
enum Nfkc<'a> {
    Already(std::str::Chars<'a>),
    Normalizing(unicode_normalization::Recompositions<std::str::Chars<'a>>),
}

impl<'a> Nfkc<'a> {
    fn of(text: &'a str) -> Self {
        if text.is_ascii()
            || unicode_normalization::is_nfkc_quick(text.chars())
                == unicode_normalization::IsNormalized::Yes
        {
            Nfkc::Already(text.chars())
        } else {
            Nfkc::Normalizing(text.nfkc())
        }
    }
}

impl Iterator for Nfkc<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        match self {
            Nfkc::Already(chars) => chars.next(),
            Nfkc::Normalizing(chars) => chars.next(),
        }
    }
}

fn lower(run: &[char]) -> Vec<char> {
    run.iter().flat_map(|c| c.to_lowercase()).collect()
}

/// An identifier's words (`refreshToken`, `refresh_token`, `refresh-token`, `HTTPServer`
/// → `refresh`, `token` …), lowercase; then, for two or three words, the joined form
/// `refresh-token` — what the identifier names as a whole stays a term too.
fn identifier_terms(run: &[char], out: &mut std::collections::VecDeque<String>) {
    // Most words are one lowercase ASCII part: no split, no case to fold, nothing to join
    // (what the general path makes of them, without its copies).
    if run.iter().all(char::is_ascii_lowercase) {
        if let Some(word) = alphabetic_term(run) {
            out.push_back(word);
        }
        return;
    }
    let mut parts: Vec<Vec<char>> = Vec::new();
    for piece in run.split(|&c| c == '_' || c == '-') {
        let mut start = 0;
        for i in 1..piece.len() {
            let (prev, cur) = (piece[i - 1], piece[i]);
            let next_lower = piece.get(i + 1).is_some_and(|c| c.is_lowercase());
            // lower→Upper (`refreshToken`), or the last capital of an acronym before a
            // word (`HTTPServer` → `HTTP`, `Server`).
            let boundary = cur.is_uppercase()
                && (prev.is_lowercase()
                    || prev.is_ascii_digit()
                    || (prev.is_uppercase() && next_lower));
            if boundary {
                parts.push(lower(&piece[start..i]));
                start = i;
            }
        }
        if start < piece.len() {
            parts.push(lower(&piece[start..]));
        }
    }
    parts.retain(|p| !p.is_empty());
    let mut kept = 0;
    for part in &parts {
        // A part of an identifier that is mostly a value (`7c1f2e9a4b8d`) is no word.
        let digits = part.iter().filter(|c| c.is_ascii_digit()).count();
        if part.len() >= 8 && digits >= 3 {
            continue;
        }
        if let Some(word) = alphabetic_term(part) {
            out.push_back(word);
            kept += 1;
        }
    }
    let joinable = (2..=MAX_JOINED_PARTS).contains(&parts.len())
        && parts
            .iter()
            .all(|p| p.len() >= 2 && p.iter().any(|c| c.is_alphabetic()));
    if joinable && kept > 0 {
        // As written where a separator joins the words (`refresh_token`, `refresh-token`:
        // a rule added later still finds a value spelled so), `-` where only case does
        // (`refreshToken` → `refresh-token`); `fold_key` makes `_` and `-` one.
        let trimmed: Vec<char> = {
            let s: String = run.iter().collect();
            s.trim_matches(['-', '_']).chars().collect()
        };
        let joined: String = if trimmed.iter().any(|&c| c == '_' || c == '-') {
            lower(&trimmed).into_iter().collect()
        } else {
            parts
                .iter()
                .map(|p| p.iter().collect::<String>())
                .collect::<Vec<_>>()
                .join("-")
        };
        if joined.chars().count() <= MAX_WORD_CHARS {
            out.push_back(joined);
        }
    }
}

fn alphabetic_term(run: &[char]) -> Option<String> {
    if !(MIN_WORD_CHARS..=MAX_WORD_CHARS).contains(&run.len())
        || !run.iter().any(|c| c.is_alphabetic())
    {
        return None;
    }
    let word: String = run.iter().collect();
    (!super::is_stopword(&word)).then_some(word)
}

/// Whether a character is of a CJK script (a term holding one is a CJK term).
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(class(c), Class::Han | Class::Katakana | Class::Hangul)
}

/// A Han run's bigrams. Function characters cut the run, and so do function bigrams: the
/// bigram is left out and so are the two that straddle it (`然后跑` yields neither `然后`
/// nor `后跑`), as a function character would be.
fn han_terms(run: &[char], out: &mut std::collections::VecDeque<String>) {
    let breaks_at = |i: usize| {
        HAN_BREAKS.binary_search(&run[i]).is_ok()
            || (i > 0 && run[i - 1] == '一' && AFTER_YI_BREAKS.contains(&run[i]))
    };
    let mut start = 0;
    for end in (0..=run.len()).filter(|&i| i == run.len() || breaks_at(i)) {
        let piece = &run[start..end];
        start = end + 1;
        // Each bigram judged once, spelled on the stack.
        let stops: Vec<bool> = piece
            .windows(2)
            .map(|pair| {
                let mut buf = [0u8; 8];
                let n = pair[0].encode_utf8(&mut buf).len();
                let m = pair[1].encode_utf8(&mut buf[n..]).len();
                std::str::from_utf8(&buf[..n + m]).is_ok_and(|bigram| {
                    HAN_STOP_BIGRAMS.binary_search(&bigram).is_ok() || super::is_stopword(bigram)
                })
            })
            .collect();
        let stop_at = |i: usize| stops.get(i).copied().unwrap_or(false);
        for i in 0..piece.len().saturating_sub(1) {
            let touches_stop = stop_at(i) || (i > 0 && stop_at(i - 1)) || stop_at(i + 1);
            if !touches_stop {
                out.push_back(piece[i..i + 2].iter().collect());
            }
        }
    }
}

fn hangul_terms(run: &[char], out: &mut std::collections::VecDeque<String>) {
    let word: String = run.iter().collect();
    if HANGUL_SUFFIXES.contains(&word.as_str()) {
        return;
    }
    let stem = HANGUL_SUFFIXES
        .iter()
        .find_map(|s| {
            word.strip_suffix(s)
                .filter(|rest| rest.chars().count() >= 2)
        })
        .unwrap_or(&word);
    let syllables: Vec<char> = stem.chars().collect();
    for pair in syllables.windows(2) {
        out.push_back(pair.iter().collect());
    }
}

/// The key two spellings of one word share: plural and simple inflections folded
/// (`tokens` → `token`, `fixes`/`fixed`/`fixing` → `fix`, `caches`/`caching` → `cach`).
/// For comparing terms only; a topic shows a word as people wrote it.
pub fn fold_key(word: &str) -> String {
    let mut w = word.to_lowercase();
    if w.contains('_') {
        w = w.replace('_', "-");
    }
    if w.chars().count() < 4 || !w.ends_with(|c: char| c.is_ascii_lowercase()) {
        return w;
    }
    // Plurals and third persons.
    if let Some(stem) = w.strip_suffix("ies").filter(|s| s.len() >= 2) {
        w = format!("{stem}y");
    } else if w.ends_with("sses")
        || ["xes", "zes", "shes"].iter().any(|s| w.ends_with(s))
        || (w.ends_with("ches") && !ends_vowel_ches(&w))
    {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !["ss", "us", "is", "os"].iter().any(|s| w.ends_with(s)) {
        w.pop();
    }
    // Past tenses and gerunds: only when what is left still has a vowel.
    let has_vowel = |s: &str| s.chars().any(|c| "aeiouy".contains(c));
    if let Some(stem) = w.strip_suffix("ied").filter(|s| s.len() >= 2) {
        w = format!("{stem}y");
    } else if let Some(stem) = w
        .strip_suffix("ing")
        .or_else(|| w.strip_suffix("ed"))
        .filter(|s| s.len() >= 3 && has_vowel(s))
    {
        let mut stem = stem.to_owned();
        let b = stem.as_bytes();
        let n = b.len();
        // `stopped` → `stop`, `running` → `run`; not `ll`/`ss`/`zz` (`called`, `passed`).
        if n >= 4
            && b[n - 1] == b[n - 2]
            && b[n - 1].is_ascii_lowercase()
            && !b"aeiouylsz".contains(&b[n - 1])
        {
            stem.pop();
        }
        w = stem;
    }
    // A final silent e: `cache` and `caching` meet at `cach`.
    if w.len() >= 4 && w.ends_with('e') && !w.ends_with("ee") {
        w.pop();
    }
    w
}

/// `caches`, `niches`: a vowel before `ches` keeps its `e` (`cache` + `s`).
fn ends_vowel_ches(w: &str) -> bool {
    w.len() > 4 && "aeiou".contains(w.as_bytes()[w.len() - 5] as char)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        terms_of(text).collect()
    }

    #[test]
    fn tables_are_sorted() {
        assert!(HAN_BREAKS.windows(2).all(|w| w[0] < w[1]));
        assert!(HAN_STOP_BIGRAMS.windows(2).all(|w| w[0] < w[1]));
        assert!(HAN_STOP_BIGRAMS.iter().all(|b| b.chars().count() == 2));
    }

    #[test]
    fn accented_latin_letters_stay_in_the_word() {
        assert_eq!(
            terms("Refresh the résumé parser"),
            ["refresh", "résumé", "parser"]
        );
        // Decomposed accents compose; upper case folds.
        assert_eq!(
            terms("RE\u{301}SUME\u{301} Añadir Überall"),
            ["résumé", "añadir", "überall"]
        );
        assert!(!terms("résumé").contains(&"sum".to_owned()));
        assert_eq!(terms("Ошибка сериализации"), ["ошибка", "сериализации"]);
        // Full-width ASCII is ASCII.
        assert_eq!(terms("ＡＰＩ　ｒｅｄｉｓ"), ["api", "redis"]);
    }

    /// The quick path (text already in NFKC read as it is) gives the characters the
    /// normalizer gives, for normalized and unnormalized text alike.
    #[test]
    fn normalized_text_is_read_as_the_normalizer_reads_it() {
        for text in [
            "plain ascii words",
            "résumé précomposé",
            "RE\u{301}SUME\u{301} decomposed",
            "ＡＰＩ　ｒｅｄｉｓ full width",
            "调整连接池的排队延迟",
            "データベースの接続 ｶﾀｶﾅ",
            "데이터베이스 연결을",
            "ﬁle ligature, ² superscript, Ⅻ numeral",
            "\u{1100}\u{1161} conjoining jamo",
            "",
        ] {
            let quick: String = Nfkc::of(text).collect();
            let normalized: String = text.nfkc().collect();
            assert_eq!(quick, normalized, "{text}");
        }
        assert!(matches!(Nfkc::of("résumé"), Nfkc::Already(_)));
        assert!(matches!(Nfkc::of("ＡＰＩ"), Nfkc::Normalizing(_)));
    }

    #[test]
    fn chinese_yields_bigrams_cut_at_function_characters() {
        assert_eq!(
            terms("调整连接池的排队延迟"),
            ["调整", "整连", "连接", "接池", "排队", "队延", "延迟"]
        );
        // A function bigram cuts like a function character: `然后` and both bigrams
        // straddling it are left out; so are stoplisted bigrams (`分析`).
        assert_eq!(terms("重启然后监控"), ["重启", "监控"]);
        assert_eq!(terms("分析连接"), ["连接"]);
        // Function bigrams and single characters carry nothing.
        assert!(terms("我们可以吗？你觉得呢").is_empty());
        // `一下`, `一些`, `一点`: the character after `一` ends a function word.
        assert_eq!(terms("帮我查一下导出格式"), ["导出", "出格", "格式"]);
        assert_eq!(terms("改一点代码和一些配置"), ["代码", "配置"]);
        // Elsewhere they begin words as usual.
        assert_eq!(terms("下载"), ["下载"]);
        // Mixed with ASCII words.
        assert_eq!(terms("Redis缓存失效"), ["redis", "缓存", "存失", "失效"]);
    }

    #[test]
    fn japanese_kanji_bigrams_katakana_words_hiragana_separates() {
        assert_eq!(
            terms("データベースの接続遅延を調査してください"),
            ["データベース", "接続", "続遅", "遅延", "調査"]
        );
    }

    #[test]
    fn korean_words_lose_particles() {
        assert_eq!(
            terms("데이터베이스 연결을 분석해 주세요"),
            ["데이", "이터", "터베", "베이", "이스", "연결", "분석", "석해"]
        );
    }

    #[test]
    fn identifiers_split_and_keep_their_joined_form() {
        for (spelled, joined) in [
            ("refreshToken", "refresh-token"),
            ("refresh_token", "refresh_token"),
            ("refresh-token", "refresh-token"),
            ("RefreshToken", "refresh-token"),
        ] {
            assert_eq!(terms(spelled), ["refresh", "token", joined], "{spelled}");
            assert_eq!(fold_key(joined), "refresh-token");
        }
        // A value's part is no word; the joined form stays as written (a rule added later
        // still finds it in a signature).
        assert_eq!(
            terms("zqleak_7c1f2e9a4b8d6e3f0a1b"),
            ["zqleak", "zqleak_7c1f2e9a4b8d6e3f0a1b"]
        );
        assert_eq!(terms("JSONParser"), ["json", "parser", "json-parser"]);
        // Four words or more: the words only. A leading dash is a flag, not a join.
        assert_eq!(
            terms("parse_csv_invoice_rows"),
            ["parse", "csv", "invoice", "rows"]
        );
        assert_eq!(terms("--dry-run"), ["dry", "dry-run"]);
        assert_eq!(terms("résuméParser"), ["résumé", "parser", "résumé-parser"]);
    }

    #[test]
    fn inflections_fold_to_one_key() {
        for (a, b) in [
            ("token", "tokens"),
            ("fix", "fixes"),
            ("fix", "fixed"),
            ("fix", "fixing"),
            ("cache", "caches"),
            ("cache", "caching"),
            ("cache", "cached"),
            ("query", "queries"),
            ("retry", "retried"),
            ("patch", "patches"),
            ("stop", "stopped"),
            ("run", "running"),
            ("parse", "parsing"),
        ] {
            assert_eq!(fold_key(a), fold_key(b), "{a} / {b}");
        }
        for (a, b) in [("status", "stat"), ("class", "clas"), ("string", "str")] {
            assert_ne!(fold_key(a), fold_key(b), "{a} / {b}");
        }
        assert_eq!(fold_key("résumé"), "résumé");
        assert_eq!(fold_key("连接"), "连接");
    }

    #[test]
    fn bounded_on_long_runs() {
        let long = "数".repeat(10_000);
        let got = terms(&long);
        assert!(got.len() > 9_900 && got.len() < 10_000, "{}", got.len());
        assert!(got.iter().all(|t| t == "数数"));
        assert_eq!(terms(&"a".repeat(10_000)).len(), 0);
    }
}

//! A small YAML emitter for the frontmatter value kinds render writes: strings, unsigned
//! integers, floats, flow sequences and flow mappings, one key per line. Strings are
//! plain only when no YAML reading could take them for anything but that string;
//! everything else is double-quoted with every non-printable escaped, so any title parses
//! back to itself and no value can span lines (a `---` line can never appear inside). Pure.

/// A frontmatter block being written, `---` lines included.
pub(crate) struct FrontmatterWriter {
    out: String,
}

impl FrontmatterWriter {
    pub(crate) fn new() -> Self {
        Self {
            out: String::from("---\n"),
        }
    }

    /// `key: <value>` where `value` is already YAML (a scalar, flow sequence or mapping).
    pub(crate) fn raw(&mut self, key: &str, value: &str) -> &mut Self {
        self.out.push_str(key);
        self.out.push_str(": ");
        self.out.push_str(value);
        self.out.push('\n');
        self
    }

    pub(crate) fn string(&mut self, key: &str, value: &str) -> &mut Self {
        self.raw(key, &scalar(value))
    }

    pub(crate) fn uint(&mut self, key: &str, value: u64) -> &mut Self {
        self.raw(key, &value.to_string())
    }

    pub(crate) fn strings<S: AsRef<str>>(&mut self, key: &str, items: &[S]) -> &mut Self {
        let items: Vec<String> = items.iter().map(|s| scalar(s.as_ref())).collect();
        self.raw(key, &flow_seq(&items))
    }

    pub(crate) fn uints(&mut self, key: &str, items: &[u64]) -> &mut Self {
        let items: Vec<String> = items.iter().map(u64::to_string).collect();
        self.raw(key, &flow_seq(&items))
    }

    /// The block with its closing `---` line.
    pub(crate) fn finish(&mut self) -> String {
        let mut out = std::mem::take(&mut self.out);
        out.push_str("---\n");
        out
    }
}

/// `[a, b]` of items that are already YAML.
pub(crate) fn flow_seq(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

/// `{k: v, …}` of values that are already YAML; keys are fixed identifiers.
pub(crate) fn flow_map(pairs: &[(&str, String)]) -> String {
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// A float that parses back to itself: shortest round-trip digits, YAML spellings for
/// the non-finite values.
pub(crate) fn float(v: f64) -> String {
    if v.is_nan() {
        ".nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { ".inf" } else { "-.inf" }.into()
    } else {
        format!("{v:?}")
    }
}

/// Words YAML 1.1 or 1.2 readers turn into booleans or null when plain.
pub(crate) const RESERVED_WORDS: [&str; 11] = [
    "y", "n", "yes", "no", "true", "false", "on", "off", "null", "nan", "inf",
];

/// `s` as a YAML scalar: plain if it is an identifier-like word that cannot be read as a
/// number, boolean, null or indicator; double-quoted otherwise.
pub(crate) fn scalar(s: &str) -> String {
    let mut chars = s.chars();
    let plain = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !RESERVED_WORDS.iter().any(|w| w.eq_ignore_ascii_case(s));
    if plain {
        s.to_owned()
    } else {
        quoted(s)
    }
}

/// A double-quoted scalar. Escapes use the JSON subset of YAML's escapes; every character
/// outside YAML's printable set, and every one a YAML reader could take as a line break,
/// is written as `\uXXXX`.
fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn read_back(yaml_value: &str) -> String {
        let doc = format!("v: {yaml_value}\n");
        let map: std::collections::BTreeMap<String, String> =
            serde_saphyr::from_str(&doc).unwrap_or_else(|e| panic!("{doc:?}: {e}"));
        map["v"].clone()
    }

    /// Strings no reading may change (shared with the frontmatter reader's tests).
    pub(crate) const HOSTILE: [&str; 34] = [
        "",
        " ",
        "plain",
        "A: b",
        "a #comment",
        "#start",
        "- dash",
        "-",
        "* star",
        "& anchor",
        "*alias",
        "! tag",
        "% directive",
        "@at",
        "`tick",
        "---",
        "...",
        "line\nbreak",
        "tab\there",
        "quote \" and \\ backslash",
        "'single'",
        "yes",
        "No",
        "null",
        "~",
        "123",
        "1.5e3",
        "0x1F",
        ".inf",
        "2026-10-22",
        "[flow, seq]",
        "{flow: map}",
        "ünïcödé ⟦redacted:credential sha256=0123abcd⟧ 日本語 🎉",
        "ctl \u{0}\u{7}\u{1b}\u{7f}\u{85}\u{2028}\u{2029}\u{feff} end",
    ];

    #[test]
    fn hostile_strings_parse_back_to_themselves() {
        for s in HOSTILE {
            let y = scalar(s);
            assert!(!y.contains('\n'), "{s:?} spans lines as {y}");
            assert_eq!(read_back(&y), s, "{s:?} as {y}");
        }
    }

    #[test]
    fn hostile_strings_survive_flow_sequences() {
        let items: Vec<String> = HOSTILE.iter().map(|s| scalar(s)).collect();
        let doc = format!("v: {}\n", flow_seq(&items));
        let map: std::collections::BTreeMap<String, Vec<String>> =
            serde_saphyr::from_str(&doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
        assert_eq!(map["v"], HOSTILE);
    }

    #[test]
    fn plain_only_when_unambiguous() {
        assert_eq!(scalar("session-1"), "session-1");
        assert_eq!(scalar("src/auth.rs"), "src/auth.rs");
        assert_eq!(scalar("yes"), "\"yes\"");
        assert_eq!(scalar("1c3f-uuid"), "\"1c3f-uuid\"");
        assert_eq!(scalar("a b"), "\"a b\"");
    }

    #[test]
    fn floats_round_trip() {
        for v in [
            0.0,
            0.42,
            1.0,
            1e-7,
            1e300,
            -0.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let doc = format!("v: {}\n", float(v));
            let map: std::collections::BTreeMap<String, f64> =
                serde_saphyr::from_str(&doc).expect("parses");
            assert_eq!(map["v"], v, "{doc}");
        }
        let doc = format!("v: {}\n", float(f64::NAN));
        let map: std::collections::BTreeMap<String, f64> =
            serde_saphyr::from_str(&doc).expect("parses");
        assert!(map["v"].is_nan());
    }

    #[test]
    fn writer_emits_one_key_per_line_between_rules() {
        let text = FrontmatterWriter::new()
            .string("title", "A: b")
            .uint("n", 3)
            .uints("r", &[1, 2])
            .strings("t", &["x", "y z"])
            .raw("m", &flow_map(&[("by", scalar("deterministic"))]))
            .finish();
        assert_eq!(
            text,
            "---\ntitle: \"A: b\"\nn: 3\nr: [1, 2]\nt: [x, \"y z\"]\nm: {by: deterministic}\n---\n"
        );
    }
}

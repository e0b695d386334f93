//! The built-in rule table, and the shape checks a regex cannot express cheaply:
//! where an attempt starts relative to its keyword, PEM armour lines, key-material lines.
//!
//! Every built-in regex is written so that its match starts at a position derived from
//! what woke it (a keyword hit, or an `=` closing a label); that is what lets the scanner
//! run one short anchored attempt per hit instead of a search over the whole text.

/// Where a regex attempt starts, relative to what woke the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Anchor {
    /// Woken by a keyword; the match starts exactly at it.
    Keyword,
    /// Config extras: woken by a keyword; the match may start up to this many bytes before it.
    Before(usize),
    /// Woken by an `=` (not by keywords, whose common letters would slow the prefilter):
    /// `[?&]label=value` with a secret-bearing label; the attempt starts at the `?`/`&`.
    QueryLabel,
    /// Woken by an `=`: `password=`/`pwd=` in a connection string; the attempt starts at a
    /// `;` before the label when there is one, else at the label.
    ConnLabel,
    /// Woken by an `=`: `NAME=value` in an env file, a shell line or a CLI flag
    /// (`DB_PASSWORD=…`, `export API_TOKEN=…`, `--password=…`), the label standing alone
    /// (after a line start, a blank, a quote or `--`); the attempt starts at the label.
    AssignLabel,
    /// Woken by a `:`: `label: value` in YAML, JSON (`"password": "…"`, also with the quotes
    /// backslash-escaped inside a tool call's arguments) or an HTTP header (`X-Api-Key: …`),
    /// the label standing alone; the attempt starts at the label.
    ColonLabel,
    /// Woken by a `:` or an `=` closing `Authorization` in any letter case (`authorization:`,
    /// `AuThOrIzAtIoN:`, `Proxy-Authorization:`, `"authorization": …`); the attempt starts
    /// at its `a`. A case-insensitive keyword would cost the prefilter its vectorised
    /// search; the `:`/`=` pass already stops at every such byte.
    HeaderLabel,
}

/// A byte-level test at a keyword hit, run before the regex: a necessary condition of the
/// rule's match starting there, so it loses nothing, but costs a few byte reads where a
/// regex attempt costs a search setup. It is what keeps look-alikes cheap: `task-list`,
/// "bearer token", every ordinary URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Gate {
    Open,
    /// Not inside a longer word (the regex starts with an ASCII `\b`).
    WordStart,
    /// After the keyword (`bearer`, any case): blanks, then at least 16 token characters.
    BearerToken,
    /// An `@` in the authority that follows `://`.
    Userinfo,
}

/// Keywords searched without regard to ASCII letter case, by an automaton of their own.
pub(super) const CASE_FREE_KEYWORDS: &[&str] = &["bearer"];

/// A test on the secret text that the regex cannot express.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Check {
    Always,
    /// Random-looking: a digit, or both letter cases, or long. Keeps `sk-learn-compatible`
    /// and prose after "bearer" out.
    TokenLike,
    /// Not a template reference or an already-masked value (`${DB_PASSWORD}`, `****`).
    NotPlaceholder,
    /// An assigned value that is not a placeholder and not a bare lowercase identifier
    /// (`password=password`, `api_key=self.api_key` are code, not secrets).
    AssignedSecret,
    /// A `label: value` value: an assigned secret that is not all digits and looks random
    /// (a digit or a symbol, or 16 characters) — `password: String` and `token: 4096` are
    /// code and settings, not secrets.
    LabelledValue,
}

pub(super) struct BuiltinPattern {
    pub name: &'static str,
    pub keywords: &'static [&'static str],
    /// The secret is the first capture group that took part in the match; without groups,
    /// the whole match.
    pub regex: &'static str,
    pub anchor: Anchor,
    pub gate: Gate,
    /// Longest match considered, in bytes from the anchor. A longer token is cut here
    /// (only hostile input has one); it also bounds the work per keyword hit.
    pub reach: usize,
    pub check: Check,
}

pub(super) const PEM_RULE: &str = "pem_private_key";
/// Every PEM/PGP/SSH2 private-key armour line, BEGIN and END alike and in any letter case,
/// ends its label with the `Y` of `KEY` or the `K` of `BLOCK` right before its closing
/// dashes: the keywords are that one letter in both cases, then the dashes. The label
/// itself (`… PRIVATE KEY`, `BEGIN`/`END`) is then checked by hand, ASCII case aside.
pub(super) const PEM_KEYWORDS: &[&str] = &["Y----", "y----", "Y ----", "y ----", "K----", "k----"];
/// What every private-key armour label ends with (ASCII case aside), before ` BLOCK`.
const PEM_LABEL_TAIL: &[u8] = b"PRIVATE KEY";
pub(super) const PUTTY_RULE: &str = "putty_private_key";
pub(super) const PUTTY_KEYWORD: &str = "Private-Lines:";

/// How far after a BEGIN line its END may start, and how far an unterminated block's key
/// material is followed. A 4096-bit RSA key is ~3.3 KiB and a PGP secret key block with
/// subkeys ~10 KiB; 128 KiB is generous and keeps a stray BEGIN from reaching far.
pub(super) const PEM_LIMIT: usize = 128 * 1024;

/// Fewer base64 characters than this after a BEGIN line is a mention, not a key.
const MIN_KEY_MATERIAL: usize = 16;
/// Longest label walked back over (`x-amz-security-token` is 20).
const MAX_QUERY_LABEL: usize = 32;
/// What a query label must end with (ASCII case aside) to be worth a regex attempt.
const QUERY_LABEL_TAILS: &[&[u8]] = &[
    b"token",
    b"key",
    b"secret",
    b"password",
    b"passwd",
    b"pwd",
    b"sig",
    b"signature",
];
/// Longest `NAME=` label walked back over (with a leading `--`).
const MAX_ASSIGN_LABEL: usize = 64;
/// What an assignment's label must end with (ASCII case aside).
const ASSIGN_LABEL_TAILS: &[&[u8]] = &[
    b"password",
    b"passwd",
    b"secret",
    b"token",
    b"api_key",
    b"api-key",
    b"apikey",
    b"access_key",
    b"access-key",
    b"private_key",
    b"private-key",
    b"secret_key",
    b"secret-key",
    b"key_base",
    b"app_key",
    b"app-key",
    b"application_key",
    b"application-key",
];
/// What a `label:` must end with (ASCII case aside).
const COLON_LABEL_TAILS: &[&[u8]] = &[
    b"password",
    b"passwd",
    b"secret",
    b"token",
    b"api_key",
    b"api-key",
    b"apikey",
    b"access_key",
    b"access-key",
    b"private_key",
    b"private-key",
    b"secret_key",
    b"secret-key",
    b"app_key",
    b"app-key",
    b"application_key",
    b"application-key",
];
/// Longest PEM label walked back over (`SSH2 ENCRYPTED ` plus BEGIN/END).
const MAX_PEM_LABEL: usize = 48;

pub(super) const PATTERNS: &[BuiltinPattern] = &[
    BuiltinPattern {
        name: "aws_access_key_id",
        keywords: &["AKIA", "ASIA"],
        regex: r"((?:AKIA|ASIA)[0-9A-Z]{16})(?:[^0-9A-Za-z]|$)",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 32,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "aws_secret_access_key",
        keywords: &[
            "secret_access_key",
            "SECRET_ACCESS_KEY",
            "SecretAccessKey",
            "secretAccessKey",
        ],
        regex: r#"(?:secret_access_key|SECRET_ACCESS_KEY|SecretAccessKey|secretAccessKey)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 128,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "github_token",
        keywords: &["ghp_", "gho_", "ghs_", "ghu_", "ghr_"],
        regex: r"(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{16,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 512,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "github_pat",
        keywords: &["github_pat_"],
        regex: r"github_pat_[A-Za-z0-9_]{16,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 512,
        check: Check::Always,
    },
    BuiltinPattern {
        // OpenAI-shape, which Anthropic (`sk-ant-`) and OpenRouter (`sk-or-`) share.
        name: "openai_key",
        keywords: &["sk-"],
        regex: r"(?-u:\b)sk-[A-Za-z0-9_-]{16,}",
        anchor: Anchor::Keyword,
        gate: Gate::WordStart,
        reach: 512,
        check: Check::TokenLike,
    },
    BuiltinPattern {
        name: "stripe_key",
        keywords: &["sk_live_", "sk_test_", "rk_live_", "rk_test_"],
        regex: r"(?-u:\b)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
        anchor: Anchor::Keyword,
        gate: Gate::WordStart,
        reach: 512,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "stripe_webhook_secret",
        keywords: &["whsec_"],
        regex: r"whsec_[A-Za-z0-9+/=]{24,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 256,
        check: Check::Always,
    },
    BuiltinPattern {
        // Bot, user, app, config and refresh tokens (`xoxe.xoxp-1-…`); a digit follows the
        // dash in every real one, which keeps `xoxo-hugs` and `xoxb-your-bot-token` out.
        name: "slack_token",
        keywords: &["xox", "xapp-"],
        regex: r"(?:xox[abposre](?:\.xox[abposre])?|xapp)-[0-9][0-9A-Za-z-]{9,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 512,
        check: Check::Always,
    },
    BuiltinPattern {
        // The path is the secret; the host stays readable.
        name: "slack_webhook",
        keywords: &["hooks.slack.com/services/"],
        regex: r"hooks\.slack\.com/services/(T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+)",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 256,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "google_api_key",
        keywords: &["AIza"],
        regex: r"AIza[0-9A-Za-z_-]{35}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 64,
        check: Check::Always,
    },
    BuiltinPattern {
        // Personal, deploy, runner, pipeline-trigger and CI-job tokens.
        name: "gitlab_token",
        keywords: &["glpat-", "gldt-", "glrt-", "glptt-", "glcbt-"],
        regex: r"gl(?:pat|dt|rt|ptt|cbt)-[0-9A-Za-z_-]{20,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 256,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "npm_token",
        keywords: &["npm_"],
        regex: r"npm_[A-Za-z0-9]{36}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 64,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "pypi_token",
        keywords: &["pypi-AgEIcHlwaS5vcmc"],
        regex: r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 2048,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "huggingface_token",
        keywords: &["hf_"],
        regex: r"(?-u:\b)hf_[A-Za-z0-9]{34,}",
        anchor: Anchor::Keyword,
        gate: Gate::WordStart,
        reach: 128,
        check: Check::TokenLike,
    },
    BuiltinPattern {
        name: "sendgrid_key",
        keywords: &["SG."],
        regex: r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 128,
        check: Check::Always,
    },
    BuiltinPattern {
        // JWS compact form: base64url JSON header and payload (both start `eyJ`, i.e. `{"`),
        // and a signature. Not inside a longer word (a base64 blob that happens to hold
        // `eyJ`); minimum lengths keep `eyJ.eyJ.x`-like prose out; an unsigned token
        // (`alg: none`, empty signature) is not a credential and is left alone.
        name: "jwt",
        keywords: &["eyJ"],
        regex: r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}",
        anchor: Anchor::Keyword,
        gate: Gate::WordStart,
        reach: 16 * 1024,
        check: Check::Always,
    },
    BuiltinPattern {
        // RFC 6750 token68 after the word `bearer` in any letter case, with or without an
        // `Authorization:` header (`bEaReR eyJ…` pasted alone); the word stays. Its keyword
        // is searched without regard to case by an automaton of its own
        // (`CASE_FREE_KEYWORDS`): 64 spellings would overflow the others, and waking on a
        // shorter piece (`rer`, 8 spellings in the short automaton) halved that automaton's
        // speed (docs/benchmarks.md, Redaction).
        name: "bearer_token",
        keywords: &["bearer"],
        regex: r"(?i-u:bearer)(?:[ \t]|\\t)+([A-Za-z0-9._~+/-]{16,}=*)",
        anchor: Anchor::Keyword,
        gate: Gate::BearerToken,
        reach: 16 * 1024,
        check: Check::TokenLike,
    },
    BuiltinPattern {
        // `scheme://user:PASSWORD@host`, any scheme (and JSON-escaped `:\/\/`); the user may
        // be empty (`redis://:pw@host`); the password runs to the last `@` of the authority.
        name: "url_password",
        keywords: &["://", r":\/\/"],
        regex: r#":(?://|\\/\\/)[^\s/?#@:⟦⟧"'<>\\]*:([^\s/?#⟦⟧"'<>\\]+)@"#,
        anchor: Anchor::Keyword,
        gate: Gate::Userinfo,
        reach: 1024,
        check: Check::NotPlaceholder,
    },
    BuiltinPattern {
        // The label stays. Woken by `=`, so `access_token`, `X-Amz-Security-Token`… need
        // no keywords.
        name: "url_query_secret",
        keywords: &[],
        regex: r#"(?:[?&]|&amp;)(?i-u:(?:access|auth|refresh|id|session)?_?token|client_?secret|api[_-]?key|x-amz-signature|x-amz-security-token|key|secret|password|passwd|pwd|sig|signature)=([^&#\s"'<>⟦⟧\\]+)"#,
        anchor: Anchor::QueryLabel,
        gate: Gate::Open,
        reach: 4096,
        check: Check::NotPlaceholder,
    },
    BuiltinPattern {
        // ADO/JDBC style: `…;Password=x;` or `Pwd=x;`. A `;` before the label, or one right
        // after an unspaced value, tells a connection string from `password = getpass()`.
        name: "conn_string_password",
        keywords: &[],
        regex: r#";[ \t]*(?i-u:password|pwd)[ \t]*=[ \t]*([^;"'\s⟦⟧]+)|(?i-u:password|pwd)=([^;"'\s⟦⟧()]+);"#,
        anchor: Anchor::ConnLabel,
        gate: Gate::Open,
        reach: 512,
        check: Check::NotPlaceholder,
    },
    BuiltinPattern {
        // The label stays. Quoted values may hold blanks; bare ones run to a blank or quote.
        name: "assigned_secret",
        keywords: &[],
        // Unspaced (`NAME=value`, `--password=value`, `NAME=\"value\"` inside JSON-escaped
        // tool arguments) or spaced with a quoted value (`SECRET_KEY = '…'`); a spaced bare
        // value is code (`api_key = os.environ[…]`).
        regex: r#"(?:--?)?[A-Za-z0-9_.-]*(?i-u:password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|secret[_-]?key|key[_-]?base|app[_-]?key|application[_-]?key)(?:=(?:"([^"\n⟦⟧\\]+)"|'([^'\n⟦⟧\\]+)'|\\"([^"\n⟦⟧\\]+)\\"|([^\s"'`;,()\[\]{}<>⟦⟧\\]+))|[ \t]+=[ \t]*(?:"([^"\n⟦⟧\\]+)"|'([^'\n⟦⟧\\]+)'|\\"([^"\n⟦⟧\\]+)\\"))"#,
        anchor: Anchor::AssignLabel,
        gate: Gate::Open,
        reach: 1024,
        check: Check::AssignedSecret,
    },
    BuiltinPattern {
        name: "azure_storage_key",
        keywords: &["AccountKey=", "SharedAccessKey="],
        regex: r"(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,}={0,2})",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 512,
        check: Check::Always,
    },
    BuiltinPattern {
        // `label: value` in YAML, JSON (quotes possibly backslash-escaped) and HTTP headers;
        // kubeconfig `token:`, `"password": "…"`, `X-Api-Key: …`. The label stays. A bare
        // value must end at a blank, a comma, a closing bracket, a quote (a header inside
        // `curl -H "…"`) or an escaped newline, so
        // `token: Option<Token>` and `password: Optional[str]` are types, not values.
        name: "labelled_secret",
        keywords: &[],
        regex: r#"[A-Za-z0-9_.-]*(?i-u:password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|secret[_-]?key|app[_-]?key|application[_-]?key)(?:\\?["'])?[ \t]*:[ \t]*(?:\\?"([^"\n⟦⟧\\]+)\\?"|'([^'\n⟦⟧\\]+)'|([^\s"'`,;()\[\]{}<>⟦⟧\\]+)(?:[\s,;}\]\\"']|$))"#,
        anchor: Anchor::ColonLabel,
        gate: Gate::Open,
        reach: 1024,
        check: Check::LabelledValue,
    },
    BuiltinPattern {
        // `Authorization: Basic|Bearer|Token|… credentials` (also `Proxy-Authorization`, JSON
        // headers with plain or escaped quotes), the name and scheme in any letter case; the
        // header name and scheme stay.
        name: "authorization_header",
        keywords: &[],
        regex: r#"(?i-u:authorization)(?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?(?:(?i-u:basic|bearer|token|digest|negotiate|apikey|key|sso-key|ntlm)[ \t]+)?([A-Za-z0-9._~+/:-]{10,}=*)"#,
        anchor: Anchor::HeaderLabel,
        gate: Gate::Open,
        reach: 16 * 1024,
        check: Check::TokenLike,
    },
    BuiltinPattern {
        // `--password X` and `--db-password "X"` (the `=` form is `assigned_secret`'s).
        name: "password_flag",
        keywords: &["-passw"],
        regex: r#"-passw(?:or)?d[ \t]+(?:"([^"\n⟦⟧\\]+)"|'([^'\n⟦⟧\\]+)'|\\"([^"\n⟦⟧\\]+)\\"|([^\s"'`;|&<>⟦⟧\\-][^\s"'`;|&<>⟦⟧\\]*))"#,
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 512,
        check: Check::AssignedSecret,
    },
    BuiltinPattern {
        // MySQL's `-pSECRET` (no blank: `-p` alone prompts), on a `mysql…` command line.
        name: "mysql_password_flag",
        keywords: &["mysql"],
        regex: r#"mysql(?:dump|admin|check|import|sh)?[ \t][^\n|;&]*?[ \t]-p(?:'([^'\n⟦⟧\\]+)'|"([^"\n⟦⟧\\]+)"|\\"([^"\n⟦⟧\\]+)\\"|([^\s"'`;|&<>⟦⟧\\-][^\s"'`;|&<>⟦⟧\\]*))"#,
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 1024,
        check: Check::AssignedSecret,
    },
    BuiltinPattern {
        name: "shopify_token",
        keywords: &["shp"],
        regex: r"(?-u:\b)shp(?:at|ca|pa|ss)_[0-9a-fA-F]{32}(?-u:\b)",
        anchor: Anchor::Keyword,
        gate: Gate::WordStart,
        reach: 64,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "digitalocean_token",
        keywords: &["dop_v1_", "doo_v1_", "dor_v1_"],
        regex: r"do[opr]_v1_[0-9a-f]{64}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 128,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "dockerhub_token",
        keywords: &["dckr_"],
        regex: r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 128,
        check: Check::Always,
    },
    BuiltinPattern {
        name: "heroku_api_key",
        keywords: &["HRKU-"],
        regex: r"HRKU-[A-Za-z0-9_-]{40,}",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 128,
        check: Check::Always,
    },
    BuiltinPattern {
        // Private (`key-`) and public-validation (`pubkey-`) keys: 32 lowercase hex digits.
        name: "mailgun_key",
        keywords: &["key-"],
        regex: r"key-[0-9a-f]{32}(?-u:\b)",
        anchor: Anchor::Keyword,
        gate: Gate::Open,
        reach: 64,
        check: Check::Always,
    },
    BuiltinPattern {
        // Twilio API key (`SK…`) and account SID (`AC…`): two letters and 32 hex digits.
        name: "twilio_key",
        keywords: &["SK", "AC"],
        regex: r"(?-u:\b)(?:SK[0-9a-fA-F]{32}|AC[0-9a-f]{32})(?-u:\b)",
        anchor: Anchor::Keyword,
        gate: Gate::WordStart,
        reach: 64,
        check: Check::Always,
    },
];

/// The attempt start for a keyword hit at `start`, or `None` when the context already
/// rules the rule out.
pub(super) fn keyword_anchor(anchor: Anchor, text: &str, start: usize) -> Option<usize> {
    match anchor {
        Anchor::Keyword => Some(start),
        Anchor::Before(back) => Some(floor_char_boundary(text, start.saturating_sub(back))),
        Anchor::QueryLabel
        | Anchor::ConnLabel
        | Anchor::AssignLabel
        | Anchor::ColonLabel
        | Anchor::HeaderLabel => None,
    }
}

/// The label an `Anchor::HeaderLabel` rule wakes on, ASCII case aside.
const HEADER_LABEL: &[u8] = b"authorization";

/// The attempt start for a `:` or `=` at `at` that closes `Authorization` (any letter case,
/// its closing quote and blanks skipped), or `None`. A few byte reads for any other `:`.
pub(super) fn header_anchor(bytes: &[u8], at: usize) -> Option<usize> {
    let end = label_end_before(bytes, at);
    (end >= HEADER_LABEL.len()
        && bytes[end - 1].eq_ignore_ascii_case(&b'n')
        && ends_with_ignore_case(&bytes[..end], HEADER_LABEL))
    .then(|| end - HEADER_LABEL.len())
}

/// Whether the `:` at `colon` can close a label that the `:`-woken rule cares about: every
/// such label (`password`, `passwd`, `secret`, `token`, `…key`) ends in one of these letter
/// pairs, after the label's closing quote if any. Most `:` (`"seq":`, `https:`, `12:00`,
/// `"content":`) stop here at the cost of a few byte reads.
pub(super) fn may_close_colon_label(bytes: &[u8], colon: usize) -> bool {
    let end = label_end_before(bytes, colon);
    end >= 2
        && matches!(
            [
                bytes[end - 2].to_ascii_lowercase(),
                bytes[end - 1].to_ascii_lowercase()
            ],
            [b'r', b'd'] | [b'w', b'd'] | [b'e', b't'] | [b'e', b'n'] | [b'e', b'y']
        )
}

/// Where a label ends before the `:` or `=` at `at`: blanks, then a closing quote (possibly
/// backslash-escaped) are skipped.
fn label_end_before(bytes: &[u8], at: usize) -> usize {
    let mut end = skip_back_blanks(bytes, at);
    if end > 0 && matches!(bytes[end - 1], b'"' | b'\'') {
        end -= 1;
        if end > 0 && bytes[end - 1] == b'\\' {
            end -= 1;
        }
    }
    end
}

/// The attempt start for a `:` at `colon`, or `None` when the label before it is not a
/// secret's or does not stand alone.
pub(super) fn colon_anchor(text: &str, colon: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let label_end = label_end_before(bytes, colon);
    let floor = label_end.saturating_sub(MAX_ASSIGN_LABEL);
    let mut label_start = label_end;
    while label_start > floor
        && (is_label_byte(bytes[label_start - 1]) || bytes[label_start - 1] == b'.')
    {
        label_start -= 1;
    }
    let label = &bytes[label_start..label_end];
    let secret_bearing = COLON_LABEL_TAILS
        .iter()
        .any(|tail| ends_with_ignore_case(label, tail));
    let stands_alone = label_start == 0
        || matches!(
            bytes[label_start - 1],
            // `\` closes an escaped newline (`\npassword:`): the `n` joined the label.
            b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'{' | b'(' | b',' | b'\\'
        );
    (secret_bearing && stands_alone).then_some(label_start)
}

/// Whether the `=` at `equals` can close a label that an `=`-woken rule cares about: every
/// such label (`token`, `api_key`, `client_secret`, `password`, `pwd`, `sig`, `signature`…)
/// ends in one of these letters. Most `=` in code (`==`, `) =`, `count = 0`) stop here.
pub(super) fn may_close_secret_label(bytes: &[u8], equals: usize) -> bool {
    let label_end = skip_back_blanks(bytes, equals);
    label_end > 0
        && matches!(
            bytes[label_end - 1].to_ascii_lowercase(),
            b'n' | b'y' | b't' | b'd' | b'g' | b'e'
        )
}

/// The attempt start for an `=` at `equals`, or `None` when the label before it is not one
/// the rule cares about.
pub(super) fn equals_anchor(anchor: Anchor, text: &str, equals: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    match anchor {
        Anchor::Keyword | Anchor::Before(_) | Anchor::ColonLabel => None,
        Anchor::HeaderLabel => header_anchor(bytes, equals),
        Anchor::QueryLabel => {
            let floor = equals.saturating_sub(MAX_QUERY_LABEL);
            let mut label_start = equals;
            while label_start > floor && is_label_byte(bytes[label_start - 1]) {
                label_start -= 1;
            }
            let label = &bytes[label_start..equals];
            let secret_bearing = QUERY_LABEL_TAILS
                .iter()
                .any(|tail| ends_with_ignore_case(label, tail));
            let separator = label_start.checked_sub(1)?;
            if !secret_bearing {
                return None;
            }
            match bytes[separator] {
                b'?' | b'&' => Some(separator),
                // An HTML-escaped query: `…&amp;token=…`.
                b';' if bytes[..separator].ends_with(b"&amp") => Some(separator - 4),
                _ => None,
            }
        }
        Anchor::AssignLabel => {
            // `SECRET_KEY = '…'`: the label may stand a few blanks before its `=`.
            let label_end = skip_back_blanks(bytes, equals);
            let floor = label_end.saturating_sub(MAX_ASSIGN_LABEL);
            let mut label_start = label_end;
            while label_start > floor
                && (is_label_byte(bytes[label_start - 1]) || bytes[label_start - 1] == b'.')
            {
                label_start -= 1;
            }
            let label = &bytes[label_start..label_end];
            let secret_bearing = ASSIGN_LABEL_TAILS
                .iter()
                .any(|tail| ends_with_ignore_case(label, tail));
            let stands_alone = label_start == 0
                || matches!(
                    bytes[label_start - 1],
                    b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'`' | b'{' | b'(' | b',' | b'\\'
                );
            (secret_bearing && stands_alone).then_some(label_start)
        }
        Anchor::ConnLabel => {
            let label_end = skip_back_blanks(bytes, equals);
            let mut label_start = label_end;
            while label_start > 0
                && label_end - label_start < 8
                && bytes[label_start - 1].is_ascii_alphabetic()
            {
                label_start -= 1;
            }
            let label = &bytes[label_start..label_end];
            if !(label.eq_ignore_ascii_case(b"password") || label.eq_ignore_ascii_case(b"pwd")) {
                return None;
            }
            let before = skip_back_blanks(bytes, label_start);
            Some(if before > 0 && bytes[before - 1] == b';' {
                before - 1
            } else {
                label_start
            })
        }
    }
}

/// Whether `gate` lets a keyword hit at `start..end` through to the regex.
pub(super) fn gate_passes(gate: Gate, bytes: &[u8], start: usize, end: usize) -> bool {
    match gate {
        Gate::Open => true,
        Gate::WordStart => {
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_')
        }
        Gate::BearerToken => {
            // Blanks, a JSON-escaped tab (`\t`) among them.
            let mut blanks = 0;
            while blanks < 16 {
                match bytes.get(end + blanks..) {
                    Some([b' ' | b'\t', ..]) => blanks += 1,
                    Some([b'\\', b't', ..]) => blanks += 2,
                    _ => break,
                }
            }
            let token = bytes[end + blanks..]
                .iter()
                .take(16)
                .take_while(|&&b| is_token68(b))
                .count();
            blanks > 0 && token == 16
        }
        Gate::Userinfo => bytes[end..]
            .iter()
            .take(URL_AUTHORITY_SCAN)
            .find(|&&b| b == b'@' || is_authority_end(b))
            .is_some_and(|&b| b == b'@'),
    }
}

/// How far an authority is followed looking for its `@`, like the rule's reach.
const URL_AUTHORITY_SCAN: usize = 1024;

fn is_token68(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'+' | b'/' | b'-')
}

/// What ends a URL authority in the `url_password` regex (ASCII part of its class).
fn is_authority_end(b: u8) -> bool {
    b.is_ascii_whitespace() || matches!(b, b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'\\')
}

fn skip_back_blanks(bytes: &[u8], mut end: usize) -> usize {
    let floor = end.saturating_sub(16);
    while end > floor && matches!(bytes[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    end
}

fn ends_with_ignore_case(text: &[u8], tail: &[u8]) -> bool {
    text.len() >= tail.len() && text[text.len() - tail.len()..].eq_ignore_ascii_case(tail)
}

fn is_label_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Random-looking: holds a digit, or both letter cases, or is long.
pub(super) fn token_like(secret: &str) -> bool {
    let bytes = secret.as_bytes();
    bytes.len() >= 32
        || bytes.iter().any(u8::is_ascii_digit)
        || (bytes.iter().any(u8::is_ascii_uppercase) && bytes.iter().any(u8::is_ascii_lowercase))
}

/// A `label: value` worth hiding: an assigned secret, not all digits, and random-looking (a
/// digit or a symbol, or at least 16 characters).
pub(super) fn labelled_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    assigned_secret(value)
        && !bytes.iter().all(u8::is_ascii_digit)
        && (bytes.len() >= 16 || bytes.iter().any(|b| !b.is_ascii_alphabetic()))
}

/// A shape-matching token whose tail is one character repeated (`ghp_xxxx…`,
/// `AKIAXXXXXXXXXXXXXXXX`, `sk-…0000000000000000`): a mask, not a key.
pub(super) fn masked_tail(secret: &str) -> bool {
    let bytes = secret.as_bytes();
    bytes.len() >= 12 && {
        let tail = &bytes[bytes.len() - 12..];
        tail.iter().all(|b| b.eq_ignore_ascii_case(&tail[0]))
    }
}

/// An assigned value worth hiding: not a placeholder, and not a bare lowercase identifier or
/// dotted path (`password=password`, `token=self.token`), which is code.
pub(super) fn assigned_secret(value: &str) -> bool {
    let identifier = value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || matches!(b, b'_' | b'.'));
    !is_placeholder(value) && !identifier && value.len() >= 4
}

/// A template reference or an already-masked value; replacing it would hide no secret.
pub(super) fn is_placeholder(value: &str) -> bool {
    let masked = |c: char| matches!(c, '*' | '•' | 'x' | 'X');
    let all_masked = value.chars().count() >= 3 && value.chars().all(masked);
    let variable = value.strip_prefix('$').is_some_and(|rest| {
        (rest.starts_with('{') && rest.ends_with('}'))
            || !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    });
    let template = value.starts_with("{{") && value.ends_with("}}");
    let already_redacted = ["redacted", "[redacted]", "<redacted>"]
        .iter()
        .any(|word| value.eq_ignore_ascii_case(word));
    // `<password>`, `<your-api-key>`: a slot to fill in.
    let slot = value.starts_with('<') && value.ends_with('>');
    // The value names what belongs there: `password`, `changeme`, `YOUR_API_KEY`,
    // `your-token-here`, `example-secret`, `REPLACE_ME`.
    let wordy = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || matches!(b, b'_' | b'-' | b'.'));
    let lower = value.to_ascii_lowercase();
    let names_itself = wordy
        && (PLACEHOLDER_WORDS.contains(&lower.as_str())
            || lower.starts_with("your")
            || lower.contains("example")
            || lower.contains("placeholder")
            || lower.contains("replace")
            || lower.contains("changeme")
            || value.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'));
    all_masked || variable || template || already_redacted || slot || names_itself
}

/// Values that name the slot instead of filling it.
const PLACEHOLDER_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "secret",
    "token",
    "change-me",
    "change_me",
    "example",
    "dummy",
    "none",
    "null",
];

/// One PEM armour line: `-----BEGIN <label> PRIVATE KEY-----`, its END twin, the PGP
/// `… PRIVATE KEY BLOCK-----` and the SSH2 `---- BEGIN … PRIVATE KEY ----` forms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct PemLine {
    pub start: usize,
    pub end: usize,
    pub begin: bool,
    /// The label, e.g. `RSA PRIVATE KEY`; an END closes the BEGIN with the same label.
    pub label: std::ops::Range<usize>,
}

/// The armour line whose label ends at the letter at `hit` (where a [`PEM_KEYWORDS`] hit
/// starts), if it is one. Letter case is not looked at: `-----begin rsa private key-----`
/// and `-----BeGiN OpEnSsH PrIvAtE KeY-----` are armour lines too.
pub(super) fn pem_line(text: &str, hit: usize) -> Option<PemLine> {
    let bytes = text.as_bytes();
    let label_end = hit + 1;
    let key_end = if ends_with_ignore_case(&bytes[..label_end], b" BLOCK") {
        label_end - " BLOCK".len()
    } else {
        label_end
    };
    if !ends_with_ignore_case(&bytes[..key_end], PEM_LABEL_TAIL) {
        return None;
    }
    let key_start = key_end - PEM_LABEL_TAIL.len();
    let mut end = label_end;
    if bytes.get(end) == Some(&b' ') {
        end += 1;
    }
    let dashes_after = bytes[end..]
        .iter()
        .take(5)
        .take_while(|&&b| b == b'-')
        .count();
    if dashes_after < 4 {
        return None;
    }
    end += dashes_after;

    let floor = key_start.saturating_sub(MAX_PEM_LABEL);
    let mut words_start = key_start;
    while words_start > floor
        && matches!(bytes[words_start - 1], b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b' ')
    {
        words_start -= 1;
    }
    let dashes_end = words_start;
    if bytes.get(words_start) == Some(&b' ') {
        words_start += 1; // SSH2: `---- BEGIN`
    }
    let words = &bytes[words_start..key_start];
    let starts =
        |word: &[u8]| words.len() >= word.len() && words[..word.len()].eq_ignore_ascii_case(word);
    let (begin, label_start) = if starts(b"BEGIN ") {
        (true, words_start + "BEGIN ".len())
    } else if starts(b"END ") {
        (false, words_start + "END ".len())
    } else {
        return None;
    };
    let dashes_before = bytes[..dashes_end]
        .iter()
        .rev()
        .take(5)
        .take_while(|&&b| b == b'-')
        .count();
    if dashes_before < 4 {
        return None;
    }
    Some(PemLine {
        start: dashes_end - dashes_before,
        end,
        begin,
        label: label_start..label_end,
    })
}

/// The key material that follows `from`: lines of base64 (armour headers such as
/// `Proc-Type:` or `Version:` allowed before the body when `headers` is set), blank lines
/// between them, and lines split by real or JSON-escaped (`\n`) newlines. Stops at the first
/// other line, keeping a long base64 run that starts it (a key cut mid-line by a quote), and
/// at `limit`. Returns the span from the first to the last material byte, or `None` when
/// there are fewer than `MIN_KEY_MATERIAL` base64 characters — a mention, not a key.
pub(super) fn key_material(
    text: &str,
    from: usize,
    limit: usize,
    headers: bool,
) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let limit = limit.min(bytes.len());
    let mut pos = from;
    let mut first = None;
    let mut last_end = from;
    let mut material = 0usize;
    let mut in_body = !headers;
    while pos < limit {
        let mut line_end = pos;
        while line_end < limit && !is_line_break(bytes, line_end) {
            line_end += 1;
        }
        let (content_start, content_end) = trim_line(bytes, pos, line_end);
        let content = &bytes[content_start..content_end];
        if content.is_empty() {
            // A blank line may separate armour headers from the body.
        } else if content.iter().all(|&b| is_base64(b)) {
            first.get_or_insert(content_start);
            last_end = content_end;
            material += content.len();
            in_body = true;
        } else if !in_body && is_armour_header(content) {
            first.get_or_insert(content_start);
            last_end = content_end;
        } else {
            let run = content.iter().take_while(|&&b| is_base64(b)).count();
            if run >= MIN_KEY_MATERIAL {
                first.get_or_insert(content_start);
                last_end = content_start + run;
                material += run;
            }
            break;
        }
        pos = skip_line_break(bytes, line_end);
    }
    match first {
        Some(first) if material >= MIN_KEY_MATERIAL => Some((first, last_end)),
        _ => None,
    }
}

fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// A real newline, or a JSON-escaped one (`\n`, `\r`).
fn is_line_break(bytes: &[u8], i: usize) -> bool {
    match bytes[i] {
        b'\n' | b'\r' => true,
        b'\\' => matches!(bytes.get(i + 1), Some(b'n' | b'r')),
        _ => false,
    }
}

fn skip_line_break(bytes: &[u8], i: usize) -> usize {
    match bytes.get(i) {
        Some(b'\\') => i + 2,
        Some(_) => i + 1,
        None => i,
    }
}

/// Indentation and the stray backslashes of double-escaped newlines are not content.
fn trim_line(bytes: &[u8], mut start: usize, mut end: usize) -> (usize, usize) {
    let blank = |b: u8| matches!(b, b' ' | b'\t' | b'\\');
    while start < end && blank(bytes[start]) {
        start += 1;
    }
    while end > start && blank(bytes[end - 1]) {
        end -= 1;
    }
    (start, end)
}

/// `Name: value`, as in `Proc-Type: 4,ENCRYPTED` or `Comment: …`.
fn is_armour_header(content: &[u8]) -> bool {
    let name_len = content
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'-')
        .count();
    name_len > 0 && content[0].is_ascii_alphabetic() && content[name_len..].starts_with(b": ")
}

/// The largest char boundary at or before `i` (`i` may exceed the length).
pub(super) fn floor_char_boundary(text: &str, i: usize) -> usize {
    let mut i = i.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest char boundary strictly after `i`.
pub(super) fn next_char_boundary(text: &str, i: usize) -> usize {
    let mut i = i + 1;
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_at_most_sixty_four_so_the_prefilter_stays_vectorised() {
        // aho-corasick's packed (Teddy) searcher gives up above 64 patterns per automaton;
        // leave room for extras. (The keywords are split over two automata by length.)
        let unique: std::collections::BTreeSet<&str> = PATTERNS
            .iter()
            .flat_map(|p| p.keywords.iter().copied())
            .chain(PEM_KEYWORDS.iter().copied())
            .chain([PUTTY_KEYWORD])
            .collect();
        // Long and short today well under the limit (`bearer` has an automaton of its own);
        // label words (`password`, `token`, `authorization`) are found by the `=`/`:` pass.
        let short = unique
            .iter()
            .filter(|k| k.len() < super::super::SHORT_KEYWORD)
            .count();
        let long = unique.len() - short;
        assert!(
            short <= 56 && long <= 56,
            "{long} long and {short} short built-in keywords"
        );
    }

    #[test]
    fn every_keyword_is_non_empty_ascii() {
        for pattern in PATTERNS {
            for keyword in pattern.keywords {
                assert!(
                    !keyword.is_empty() && keyword.is_ascii(),
                    "{}: {keyword:?}",
                    pattern.name
                );
            }
        }
    }

    fn equals_at(text: &str) -> usize {
        text.find('=').unwrap()
    }

    #[test]
    fn query_anchor_walks_back_to_the_separator() {
        let text = "https://x.test/a?b=1&access_token=abc";
        let equals = text.rfind('=').unwrap();
        assert_eq!(
            equals_anchor(Anchor::QueryLabel, text, equals),
            Some(text.find('&').unwrap())
        );
        for text in [
            "sorted(xs, key=len)",
            "key=abc",
            "?page=2",
            "=x",
            "?=x",
            "?monkey_business=1",
        ] {
            assert_eq!(
                equals_anchor(Anchor::QueryLabel, text, equals_at(text)),
                None,
                "{text}"
            );
        }
        for text in ["?pwd=x", "?TOKEN=x", "&X-Amz-Signature=x", "?apiKey=x"] {
            assert_eq!(
                equals_anchor(Anchor::QueryLabel, text, equals_at(text)),
                Some(0),
                "{text}"
            );
        }
    }

    #[test]
    fn equals_prefilter_admits_every_label_tail() {
        for tail in QUERY_LABEL_TAILS
            .iter()
            .chain([&&b"PASSWORD"[..], &&b"Pwd"[..]])
        {
            let text = [b"?", *tail, b"=x"].concat();
            assert!(
                may_close_secret_label(&text, tail.len() + 1),
                "{}",
                String::from_utf8_lossy(tail)
            );
        }
        let spaced = b"Password = x;";
        assert!(may_close_secret_label(spaced, 9));
        for text in [&b"a == b"[..], b"(x) = 1", b"count0=1", b"=x"] {
            let equals = text.iter().position(|&b| b == b'=').unwrap();
            assert!(
                !may_close_secret_label(text, equals),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn conn_anchor_prefers_a_preceding_semicolon() {
        let text = "User Id=sa; Password = x;";
        let equals = text.rfind('=').unwrap();
        assert_eq!(
            equals_anchor(Anchor::ConnLabel, text, equals),
            Some(text.find(';').unwrap())
        );
        assert_eq!(equals_anchor(Anchor::ConnLabel, "Password=x;", 8), Some(0));
        assert_eq!(equals_anchor(Anchor::ConnLabel, "PWD=x;", 3), Some(0));
        for text in ["x = 1", "username=x;", "=x", "passwords=x;"] {
            assert_eq!(
                equals_anchor(Anchor::ConnLabel, text, equals_at(text)),
                None,
                "{text}"
            );
        }
    }

    #[test]
    fn gates_are_cheap_necessary_conditions() {
        fn at<'t>(text: &'t str, keyword: &str) -> (&'t [u8], usize, usize) {
            let start = text.find(keyword).unwrap();
            (text.as_bytes(), start, start + keyword.len())
        }
        let pass =
            |gate, (bytes, start, end): (&[u8], usize, usize)| gate_passes(gate, bytes, start, end);
        assert!(pass(Gate::WordStart, at("x sk-abc", "sk-")));
        assert!(pass(Gate::WordStart, at("sk-abc", "sk-")));
        assert!(!pass(Gate::WordStart, at("task-list", "sk-")));
        assert!(!pass(Gate::WordStart, at("my_sk-abc", "sk-")));
        assert!(pass(
            Gate::BearerToken,
            at("Bearer abcdefghijklmnop", "Bearer")
        ));
        assert!(pass(
            Gate::BearerToken,
            at("x bEaReR \tabcdefghijklmnop", "bEaReR")
        ));
        assert!(!pass(
            Gate::BearerToken,
            at("Bearer abcdefghijklmno", "Bearer")
        ));
        assert!(!pass(
            Gate::BearerToken,
            at("bearer token for you", "bearer")
        ));
        assert!(pass(
            Gate::BearerToken,
            at(r"BEARER\tabcdefghijklmnop", "BEARER")
        ));
        assert!(!pass(
            Gate::BearerToken,
            at("Bearerabcdefghijklmnopq", "Bearer")
        ));
        assert!(pass(Gate::Userinfo, at("https://u:p@h/", "://")));
        assert!(!pass(Gate::Userinfo, at("https://github.com/a@b", "://")));
        assert!(!pass(Gate::Userinfo, at("https://example.com", "://")));
        assert!(!pass(Gate::Userinfo, at(r"https:\/\/h.x\/a@b", r":\/\/")));
    }

    #[test]
    fn header_anchor_finds_authorization_in_any_case() {
        for text in [
            "Authorization: x",
            "authorization: x",
            "AUTHORIZATION:x",
            "AuThOrIzAtIoN : x",
            "Proxy-Authorization: x",
            "\"authorization\": x",
            r#"\"AUTHORIZATION\": x"#,
            "authorization=x",
        ] {
            let at = text.find([':', '=']).unwrap();
            let anchor = header_anchor(text.as_bytes(), at).unwrap_or_else(|| panic!("{text}"));
            assert!(
                text[anchor..]
                    .to_ascii_lowercase()
                    .starts_with("authorization"),
                "{text}"
            );
        }
        for text in [
            "version: 1",
            "session: x",
            "authorisation: x",
            "https://x",
            ": x",
            "n: x",
        ] {
            let at = text.find([':', '=']).unwrap();
            assert_eq!(header_anchor(text.as_bytes(), at), None, "{text}");
        }
    }

    #[test]
    fn keyword_anchors() {
        assert_eq!(keyword_anchor(Anchor::Keyword, "abc", 1), Some(1));
        assert_eq!(keyword_anchor(Anchor::Before(2), "é-x", 2), Some(0));
        assert_eq!(keyword_anchor(Anchor::QueryLabel, "?token=x", 1), None);
        assert_eq!(
            keyword_anchor(Anchor::HeaderLabel, "authorization: x", 0),
            None
        );
    }

    #[test]
    fn token_like_wants_randomness() {
        assert!(token_like("abcdefghijklmnop1"));
        assert!(token_like("abcdefghijklmnoP"));
        assert!(token_like(&"a".repeat(32)));
        assert!(!token_like("tokenization-related"));
    }

    #[test]
    fn placeholders_are_recognised() {
        for value in [
            "${DB_PASSWORD}",
            "$DB_PASSWORD",
            "{{ secret }}",
            "****",
            "xxxx",
            "REDACTED",
            "[redacted]",
        ] {
            assert!(is_placeholder(value), "{value}");
        }
        for value in ["hunter2", "$ecret", "x", "p4ss**", "{{unclosed"] {
            assert!(!is_placeholder(value), "{value}");
        }
    }

    #[test]
    fn pem_lines_of_every_form_parse() {
        for (line, begin, label) in [
            ("-----BEGIN RSA PRIVATE KEY-----", true, "RSA PRIVATE KEY"),
            ("-----END RSA PRIVATE KEY-----", false, "RSA PRIVATE KEY"),
            ("-----BEGIN PRIVATE KEY-----", true, "PRIVATE KEY"),
            (
                "-----BEGIN PGP PRIVATE KEY BLOCK-----",
                true,
                "PGP PRIVATE KEY BLOCK",
            ),
            (
                "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----",
                true,
                "SSH2 ENCRYPTED PRIVATE KEY",
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----",
                true,
                "OPENSSH PRIVATE KEY",
            ),
            ("-----begin rsa private key-----", true, "rsa private key"),
            ("-----end rsa private key-----", false, "rsa private key"),
            (
                "-----BeGiN OpEnSsH PrIvAtE KeY-----",
                true,
                "OpEnSsH PrIvAtE KeY",
            ),
            (
                "-----begin pgp private key block-----",
                true,
                "pgp private key block",
            ),
            (
                "---- begin ssh2 encrypted private key ----",
                true,
                "ssh2 encrypted private key",
            ),
        ] {
            let text = format!("x = \"{line}\\n");
            let hit = pem_hit(&text).unwrap_or_else(|| panic!("no keyword in {line}"));
            let parsed = pem_line(&text, hit).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(&text[parsed.start..parsed.end], line);
            assert_eq!(parsed.begin, begin);
            assert_eq!(&text[parsed.label], label);
        }
    }

    #[test]
    fn pem_look_alikes_are_not_armour() {
        for text in [
            "the PRIVATE KEY is",
            "BEGIN RSA PRIVATE KEY-----",
            "-----BEGIN RSA PRIVATE KEY",
            "--BEGIN RSA PRIVATE KEY-----",
            "-----START RSA PRIVATE KEY-----",
            "PRIVATE KEY",
            "-----BEGIN PRIVATE KEY--",
            "the private key-----",
            "-----BEGIN PUBLIC KEY-----",
            "-----begin certificate-----",
            "-----BEGIN PRIVATE KEYS-----",
            "my-----begin the key-----",
        ] {
            if let Some(hit) = pem_hit(text) {
                assert_eq!(pem_line(text, hit), None, "{text}");
            }
        }
    }

    /// Where the first PEM keyword starts in `text`, as the automaton would find it.
    fn pem_hit(text: &str) -> Option<usize> {
        PEM_KEYWORDS.iter().filter_map(|k| text.find(k)).min()
    }

    #[test]
    fn key_material_follows_base64_lines_and_stops_at_prose() {
        let body = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2\nAAAABBBBCCCC====\n";
        let text = format!("\n{body}\nThanks, that's the key.\n");
        let (first, end) = key_material(&text, 0, text.len(), true).unwrap();
        assert_eq!(&text[first..end], body.trim_end());
    }

    #[test]
    fn key_material_takes_armour_headers_then_body() {
        let text = "\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00FF\n\nMIIEowIBAAKCAQEA3Tz2mr7SZiAM\n";
        let (first, end) = key_material(text, 0, text.len(), true).unwrap();
        assert_eq!(&text[first..end], text.trim());
        // Without headers allowed, a header line ends the material before it starts.
        assert_eq!(key_material(text, 0, text.len(), false), None);
    }

    #[test]
    fn key_material_understands_escaped_newlines_and_cut_lines() {
        let text = r#"\nMIIEowIBAAKCAQEA3Tz2mr7SZiAM\nQUJDREVGR0hJSktMTU5PUFFS", "next": 1"#;
        let (first, end) = key_material(text, 0, text.len(), true).unwrap();
        assert_eq!(
            &text[first..end],
            r"MIIEowIBAAKCAQEA3Tz2mr7SZiAM\nQUJDREVGR0hJSktMTU5PUFFS"
        );
    }

    #[test]
    fn a_mention_is_not_key_material() {
        for text in ["\n\nThat is the header line.", "` headers", "\nabc\n", ""] {
            assert_eq!(key_material(text, 0, text.len(), true), None, "{text:?}");
        }
    }

    #[test]
    fn key_material_respects_the_limit() {
        let text = format!("\n{}", "A".repeat(1000));
        let (_, end) = key_material(&text, 0, 101, true).unwrap();
        assert_eq!(end, 101);
    }

    #[test]
    fn char_boundaries() {
        let text = "aé🔑b";
        assert_eq!(floor_char_boundary(text, 2), 1);
        assert_eq!(floor_char_boundary(text, 100), text.len());
        assert_eq!(next_char_boundary(text, 1), 3);
        assert_eq!(next_char_boundary(text, 3), 7);
    }
}

//! Redaction (record §9): the one chokepoint every byte bound for the store passes.
//! `Redacted<T>` can only be built here, so the store cannot be handed raw text.
//!
//! Credentials only, deterministic patterns only, everything else byte-identical. Each
//! secret becomes `⟦redacted:credential sha256=XXXXXXXX⟧` (first 8 hex digits of the
//! SHA-256 of its bytes), so the same secret always reads the same.
//!
//! How it runs, and why it is fast:
//! 1. Aho-corasick passes over the distinctive keywords (`AKIA`, `eyJ`, `://`, …), and one
//!    memchr pass over `=` and `:`, whose label (`?token=`, `;Password=`, `DB_PASSWORD=`,
//!    `"password":`, `token:`) is checked by hand — a `:` costs a look at the two letters
//!    before it (and its closing quote) unless they end a secret's label. The
//!    vectorised keyword search (Teddy) fingerprints each keyword's first bytes, so it
//!    degrades with many keywords, with short ones, and with common letters: label words
//!    such as `token` or `password` go to the `=` pass, and rules with 3-byte keywords
//!    (`sk-`, `eyJ`, `://`) get their own automaton. Text without a keyword costs those
//!    passes and a copy.
//!    Letter case: header names, schemes and armour lines are matched in any case
//!    (`AuThOrIzAtIoN: bEaReR …`, `-----begin rsa private key-----`) without a
//!    case-insensitive automaton (which aho-corasick cannot vectorise): `Authorization` is a
//!    label of the `:`/`=` pass, and PEM armour is found by the one letter before its
//!    closing dashes (`Y-----`, `y-----`, `K-----`…), its label then checked by hand.
//! 2. A hit only wakes the rules that own its keyword, and first meets a byte-level gate
//!    (not inside a word, an `@` after `://`, 16 token characters after `Bearer`) so that
//!    look-alikes cost a few byte reads. Each rule is its own regex, tried *anchored* at a
//!    position derived from the hit (the keyword itself, or the `?`/`&` before a query
//!    label) and bounded by the rule's reach, so an attempt ends where the shape stops
//!    matching. Hits of one rule closer than its reach form a cluster that is searched
//!    unanchored in windows of twice the reach, which keeps dense hostile input (a million
//!    `eyJ`) linear.
//! 3. PEM private keys are parsed, not regexed: the BEGIN line, then the END line with the
//!    same label if it starts within 128 KiB and before any other BEGIN. Without one
//!    (truncated output) the block runs over the key material that follows — base64 and
//!    armour-header lines, real or JSON-escaped newlines — and stops at the first other
//!    line or 128 KiB; a BEGIN followed by no key material is a mention and stays.
//! 4. Overlaps resolve by earliest start, then longest, then rule order.
//!
//! Limits (pattern redaction is a speed bump, not a guarantee, §9): a token longer than its
//! rule's reach (512 B for most tokens, 16 KiB for JWTs and bearer tokens, 4 KiB for query
//! values) is cut there, or missed when its shape needs an ending (`@`); a config extra's
//! match must start at most 256 bytes before one of its keywords and be at most ~4 KiB
//! long; an extra without keywords is searched over the whole text; an extra that matches the
//! empty string or every probe text is refused by name. Extras are never
//! applied inside an existing marker, and no built-in class admits the marker's brackets,
//! so redaction is idempotent.
//!
//! Placeholders stay: a labelled value that names the slot (`YOUR_API_KEY`, `<password>`,
//! `changeme`, `${DB_PASSWORD}`, `****`) and a token whose tail is one repeated character
//! (`ghp_xxxx…`). A value with a real key's exact shape is redacted even when it reads
//! `…EXAMPLE` (AWS's documentation keys): the bytes cannot tell it from a key.
//! Recall and precision are measured on the generated corpus in `tests/it/redaction_corpus/`
//! (gitleaks' default rule set as the reference list).
//! Pure. OWNER: redact helper.

mod rules;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};
use regex_automata::util::captures::Captures;
use regex_automata::{meta, Anchored, Input, PatternID};
use sha2::{Digest, Sha256};

use rules::{Anchor, Check, Gate, PemLine};

/// A value that has passed the chokepoint. Two ways in, both guarded: the rules
/// ([`Redactor::redact`], [`Redactor::redact_all`], [`Redactor::redact_json`]), and
/// [`Redacted::read_back`] — a value read from a file the store or a pool mirror holds,
/// which needs a [`crate::store::read::ReadBack`] that only the store's document reader
/// (`store::read::Reader`) makes. What is derived from a `Redacted` value stays one through
/// [`Redacted::derive`] / [`Redacted::derive_with`], whose functions can capture nothing.
///
/// Every writer of derived bytes takes one (docs/architecture.md, "Privacy is typed"), so
/// raw text cannot reach it:
///
/// ```compile_fail
/// // A shard writer takes `Redacted<IndexDoc>`; an `IndexDoc` built from a raw string is refused.
/// use dsh_chapters::topics::{shard, IndexDoc};
/// let raw = IndexDoc { path: "x.md".into(), title: "AKIAIOSFODNN7EXAMPLE".into(),
///     kind: "chapter".into(), date: None, topics: vec!["akiaiosfodnn7example".into()] };
/// shard::build_all(&[raw], &Default::default());
/// ```
///
/// ```compile_fail
/// // A rule file is written from a `Redacted<Rule>` only; a rule built from raw words is refused.
/// # fn f(store: &dsh_chapters::store::Store, ws: &std::path::Path) {
/// let raw = dsh_chapters::rules::Rule::project("pk", "style", "AKIAIOSFODNN7EXAMPLE").expect("a valid rule");
/// let _ = dsh_chapters::rules::store::write_rule(store, ws, raw);
/// # }
/// ```
///
/// ```compile_fail
/// // A curation fact is appended as a `Redacted<Fact>` only.
/// # fn f(store: &dsh_chapters::store::Store, fact: dsh_chapters::curation::Fact) {
/// let _ = dsh_chapters::curation::file::append(store, "m1", &fact);
/// # }
/// ```
///
/// ```compile_fail
/// // The continuation notice's rules block is the assembled block's text, not any string.
/// use dsh_chapters::rules::notice::{build, NoticeIntent};
/// let raw = String::from("## Rules\n\nAKIAIOSFODNN7EXAMPLE\n");
/// let _ = build("s", "s", NoticeIntent::Continue, &[], &raw);
/// ```
///
/// ```compile_fail
/// // A pool commit's message is a `Redacted<String>`; one formatted from raw text is refused.
/// # fn f(repo: &dsh_chapters::git::GitRepo, tree: dsh_chapters::git::ObjectId) {
/// let raw = format!("forgotten because of {}", "AKIAQ3EGUWZXJ4TPLM7N");
/// let _ = repo.write_commit(tree, &[], "dsh-chapters", "h1@dsh-chapters.local", 0, &raw);
/// # }
/// ```
///
/// ```compile_fail
/// // `topics/vocabulary.json` lists a `Redacted` topic set only (the index's documents').
/// let raw: std::collections::BTreeSet<String> = ["akiaq3eguwzxj4tplm7n".to_owned()].into();
/// let _ = dsh_chapters::topics::vocab::vocabulary_json(&raw, &Default::default());
/// ```
///
/// The same, typed (they compile):
///
/// ```no_run
/// # fn f(store: &dsh_chapters::store::Store, ws: &std::path::Path,
/// #      fact: dsh_chapters::curation::Fact, rules: &dsh_chapters::redact::Redactor) {
/// let rule = dsh_chapters::rules::Rule::project("pk", "style", "use tabs").expect("a valid rule");
/// let _ = dsh_chapters::rules::store::write_rule(store, ws, rule.redacted(rules).expect("redacted by the rules"));
/// let fact = dsh_chapters::curation::file::redacted(&fact, rules);
/// let _ = dsh_chapters::curation::file::append(store, "m1", &fact);
/// use dsh_chapters::rules::notice::{build, NoticeIntent};
/// let block = rules.redact("## Rules\n", &mut Default::default());
/// let _ = build("s", "s", NoticeIntent::Continue, &[], &block);
/// # }
/// # fn g(repo: &dsh_chapters::git::GitRepo, tree: dsh_chapters::git::ObjectId) {
/// let message = dsh_chapters::redact::echoed_text("forgotten by ana: pasted a key");
/// let _ = repo.write_commit(tree, &[], "dsh-chapters", "h1@dsh-chapters.local", 0, &message);
/// # }
/// ```
///
/// ```compile_fail
/// // Nor can a deriver smuggle raw text in: `derive` takes a plain `fn`, which captures nothing.
/// # fn f(doc: &dsh_chapters::redact::Redacted<String>) {
/// let raw = String::from("AKIAIOSFODNN7EXAMPLE");
/// let _ = doc.derive(|_| raw.clone());
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn get(&self) -> &T {
        &self.0
    }
    pub fn into_inner(self) -> T {
        self.0
    }

    /// A value read back from a file the store (`.dsh-chapters/`) or a pool mirror
    /// (`.dsh-knowledge/`) holds: those files are written only from `Redacted` values, so
    /// what is read from them is redacted. The proof comes only from `store::read`.
    pub fn read_back(value: T, _proof: &crate::store::read::ReadBack) -> Redacted<T> {
        Redacted(value)
    }

    /// What `f` computes from this value alone. `f` is a plain `fn`: it captures nothing,
    /// so the result holds nothing but what was derived from redacted text (and constants).
    pub fn derive<U>(&self, f: fn(&T) -> U) -> Redacted<U> {
        Redacted(f(&self.0))
    }

    /// What `f` computes from a [`Settings`] value alone (a commit message of counts): no
    /// conversation text goes in, so none comes out.
    pub fn of_settings<A: Settings + ?Sized>(with: &A, f: fn(&A) -> T) -> Redacted<T> {
        Redacted(f(with))
    }

    /// [`Redacted::derive`] with a parameter that holds no conversation text ([`Settings`]:
    /// where an index links to, the curation read back from the store).
    pub fn derive_with<A: Settings + ?Sized, U>(
        &self,
        with: &A,
        f: fn(&T, &A) -> U,
    ) -> Redacted<U> {
        Redacted(f(&self.0, with))
    }
}

impl<T> Redacted<T> {
    /// `other` folded into this value by `f`, a plain `fn` as in [`Redacted::derive`]: both
    /// are redacted, so is the result (a list that grows one redacted item at a time, kept
    /// in one block rather than a `Redacted` per item).
    pub fn absorb<U>(&mut self, other: &Redacted<U>, f: fn(&mut T, &U)) {
        f(&mut self.0, &other.0)
    }

    /// Two redacted values as one (an answer built from a read-back document and a query
    /// echoed through the rules).
    pub fn zip<U>(self, other: Redacted<U>) -> Redacted<(T, U)> {
        Redacted((self.0, other.0))
    }
}

/// Redacted items gathered: still redacted.
impl<T> FromIterator<Redacted<T>> for Redacted<Vec<T>> {
    fn from_iter<I: IntoIterator<Item = Redacted<T>>>(items: I) -> Self {
        Redacted(items.into_iter().map(|item| item.0).collect())
    }
}

impl<T> Redacted<Vec<T>> {
    /// One `Redacted` per item.
    pub fn into_items(self) -> Vec<Redacted<T>> {
        self.0.into_iter().map(Redacted).collect()
    }
}

impl<T> Redacted<Option<T>> {
    pub fn transpose(self) -> Option<Redacted<T>> {
        self.0.map(Redacted)
    }
}

impl<T, E> Redacted<Result<T, E>> {
    pub fn transpose(self) -> Result<Redacted<T>, E> {
        self.0.map(Redacted)
    }
}

/// Reading a redacted value is always fine; only building one is guarded.
impl<T> std::ops::Deref for Redacted<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// `text` as an answer may show it back to whoever typed it (a search query, a topic):
/// through the built-in rules, so a credential pasted into a query is not printed again.
pub fn echo(text: &str) -> String {
    match built_in() {
        Some(redactor) => redactor
            .redact(text, &mut RedactionCounts::default())
            .into_inner(),
        None => "(withheld)".to_owned(),
    }
}

/// [`echo`] as a `Redacted` value: a message that shows back what was asked (an error
/// naming an argument) reaches an answer only through the built-in rules.
pub fn echoed_text(text: &str) -> Redacted<String> {
    match built_in() {
        Some(redactor) => redactor.redact(text, &mut RedactionCounts::default()),
        None => Redacted("(withheld)".to_owned()),
    }
}

/// [`echo`] of every text of a value (a search's query and topic) as one `Redacted` value.
pub fn echoed<T: Redactable>(value: T) -> Redacted<T> {
    match built_in() {
        Some(redactor) => redactor.redact_all(value, &mut RedactionCounts::default()),
        None => Redacted(value.map_text(&mut |_| "(withheld)".to_owned())),
    }
}

/// A value that holds no conversation text, or only text read back from the store: a
/// parameter a deriver may combine with redacted text ([`Redacted::derive_with`]). Implement
/// it only for such types (never for `String`).
pub trait Settings {}

impl Redacted<String> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// A value made of conversation text: every string in it that came from a log, a person,
/// a tool or a model is rewritten by one function. Implemented beside the type (the
/// signer's `signature::TurnText`); only [`Redactor::redact_all`] calls it, so the only
/// way to a `Redacted<T>` is through the rules. An implementation must hand every such
/// string to `f` and keep nothing from the value it consumed.
pub trait Redactable: Sized {
    fn map_text(self, f: &mut dyn FnMut(&str) -> String) -> Self;
    /// [`Redactable::map_text`] handing `f` each string as it is held: a type that holds
    /// its strings as `Cow` (borrowed from what it was made of, like the signer's turn)
    /// overrides it, and a text with nothing to redact comes back as it was, not copied.
    fn map_cow(self, f: &mut dyn for<'s> FnMut(Cow<'s, str>) -> Cow<'s, str>) -> Self {
        self.map_text(&mut |text| f(Cow::Borrowed(text)).into_owned())
    }
}

/// Counts per rule name; never values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedactionCounts {
    pub by_rule: BTreeMap<String, u64>,
}

impl RedactionCounts {
    pub fn total(&self) -> u64 {
        self.by_rule.values().sum()
    }
    pub fn add(&mut self, other: &RedactionCounts) {
        for (k, v) in &other.by_rule {
            *self.by_rule.entry(k.clone()).or_insert(0) += v;
        }
    }
    fn bump(&mut self, rule: &str) {
        match self.by_rule.get_mut(rule) {
            Some(count) => *count += 1,
            None => {
                self.by_rule.insert(rule.to_owned(), 1);
            }
        }
    }
}

/// An extra pattern from config: a name, the prefilter keywords, and a regex whose
/// whole match (or its group named `secret`, when present) is the secret.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
pub struct ExtraPattern {
    pub name: String,
    #[serde(default)]
    pub keywords: Vec<String>,
    pub regex: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    #[error("redaction pattern {name:?} is not a valid regex: {detail}")]
    BadPattern { name: String, detail: String },
    #[error("redaction pattern {name:?} matches the empty string, so it would mark text where there is no secret; make it require at least one character of the secret (`+` rather than `*`)")]
    MatchesEmpty { name: String },
    #[error("redaction pattern {name:?} matches every text it was tried on (prose, code, digits, blanks), so it would replace whole messages; make it match only the secret's shape, e.g. after a fixed prefix")]
    MatchesEverything { name: String },
    #[error("redaction keywords could not be compiled into one prefilter ({count} keywords): {detail}; use fewer or shorter keywords in redaction.patterns")]
    Prefilter { count: usize, detail: String },
}

/// Everything a marker starts with; what follows is 8 hex digits and `⟧`.
pub const MARKER_PREFIX: &str = "⟦redacted:credential sha256=";
const MARKER_SUFFIX: &str = "⟧";

/// `⟦redacted:credential sha256=XXXXXXXX⟧` for a secret.
pub fn marker(secret: &[u8]) -> String {
    let mut out = String::with_capacity(MARKER_PREFIX.len() + 8 + MARKER_SUFFIX.len());
    push_marker(&mut out, secret);
    out
}

fn push_marker(out: &mut String, secret: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(secret);
    out.push_str(MARKER_PREFIX);
    for byte in &digest[..4] {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    out.push_str(MARKER_SUFFIX);
}

/// How far before its keyword an extra's match may start, and how long it may be.
const EXTRA_BEFORE: usize = 256;
const EXTRA_REACH: usize = 4096 + EXTRA_BEFORE;

/// The compiled rule set.
pub struct Redactor {
    rules: Vec<Rule>,
    /// Each rule's keywords live in exactly one group, so a rule sees its hits in order.
    keyword_groups: Vec<KeywordGroup>,
    /// Rules woken by `=` rather than by keywords.
    equals_rules: Vec<usize>,
    /// Rules woken by `:` (`password: …`, `"token": "…"`).
    colon_rules: Vec<usize>,
    /// Rules woken by a `:` or `=` closing `Authorization`, any letter case.
    header_rules: Vec<usize>,
    /// Extras without keywords: searched over the whole text.
    unfiltered: Vec<usize>,
}

/// One keyword automaton and the rules its keywords wake.
struct KeywordGroup {
    /// Longest first, so a keyword that extends another wins at the same start.
    keywords: Vec<String>,
    /// Per keyword: the rules it wakes, including those of every keyword it starts with
    /// (a shorter keyword at the same start is shadowed by the longer one).
    rules_by_keyword: Vec<Vec<usize>>,
    automaton: AhoCorasick,
}

/// Keywords shorter than this share one automaton; see the module comment.
const SHORT_KEYWORD: usize = 4;

impl KeywordGroup {
    /// `None` for an empty group. `case_free`: keywords match in any ASCII letter case.
    fn build(
        owners: &BTreeMap<String, Vec<usize>>,
        case_free: bool,
    ) -> Result<Option<Self>, RedactError> {
        if owners.is_empty() {
            return Ok(None);
        }
        let mut keywords: Vec<String> = owners.keys().cloned().collect();
        keywords.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        let rules_by_keyword = keywords
            .iter()
            .map(|keyword| {
                let mut woken: Vec<usize> = owners
                    .iter()
                    .filter(|(other, _)| keyword.starts_with(other.as_str()))
                    .flat_map(|(_, owned)| owned.iter().copied())
                    .collect();
                woken.sort_unstable();
                woken.dedup();
                woken
            })
            .collect();
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .ascii_case_insensitive(case_free)
            .build(&keywords)
            .map_err(|e| RedactError::Prefilter {
                count: keywords.len(),
                detail: e.to_string(),
            })?;
        Ok(Some(KeywordGroup {
            keywords,
            rules_by_keyword,
            automaton,
        }))
    }
}

struct Rule {
    name: String,
    matcher: Matcher,
}

enum Matcher {
    Pattern(PatternRule),
    PemBlock,
    PuttyPrivateLines,
}

struct PatternRule {
    regex: meta::Regex,
    secret: SecretGroup,
    anchor: Anchor,
    gate: Gate,
    reach: usize,
    check: Check,
    /// Config extras may match anything, including a marker; built-in classes cannot.
    from_config: bool,
}

#[derive(Clone, Copy)]
enum SecretGroup {
    /// Built-ins: the first group that took part, else the whole match.
    FirstParticipating,
    /// Extras: the group named `secret` (0 = the whole match).
    Index(usize),
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.rules.iter().map(|rule| rule.name.as_str()).collect();
        let keywords: Vec<usize> = self
            .keyword_groups
            .iter()
            .map(|group| group.keywords.len())
            .collect();
        f.debug_struct("Redactor")
            .field("rules", &names)
            .field("keywords_per_group", &keywords)
            .finish()
    }
}

/// The process's one redactor of built-in rules only, compiled on first use (~8 ms) and
/// shared by every writer that has no configured patterns (an archive of a workspace with
/// none). `None` only if the built-in rules failed to compile, which their
/// tests rule out.
pub fn built_in() -> Option<&'static Redactor> {
    static BUILT_IN: std::sync::OnceLock<Option<Redactor>> = std::sync::OnceLock::new();
    BUILT_IN.get_or_init(|| Redactor::new(&[]).ok()).as_ref()
}

/// A config's redactor: the shared [`built_in`] one when the config adds no pattern, else
/// one compiled with them.
pub enum ConfigRedactor {
    Shared(&'static Redactor),
    Own(Box<Redactor>),
}

impl std::ops::Deref for ConfigRedactor {
    type Target = Redactor;
    fn deref(&self) -> &Redactor {
        match self {
            ConfigRedactor::Shared(r) => r,
            ConfigRedactor::Own(r) => r,
        }
    }
}

impl ConfigRedactor {
    pub fn new(extra: &[ExtraPattern]) -> Result<ConfigRedactor, RedactError> {
        if extra.is_empty() {
            if let Some(shared) = built_in() {
                return Ok(ConfigRedactor::Shared(shared));
            }
        }
        Ok(ConfigRedactor::Own(Box::new(Redactor::new(extra)?)))
    }
}

impl Redactor {
    /// Whether configured patterns compile, without compiling the built-in rules (a config
    /// check, before any redactor is needed).
    pub fn check_extra(extra: &[ExtraPattern]) -> Result<(), RedactError> {
        for pattern in extra {
            compile_extra(pattern)?;
        }
        Ok(())
    }

    /// Built-in rules plus `extra` from config.
    pub fn new(extra: &[ExtraPattern]) -> Result<Self, RedactError> {
        let mut rules = Vec::new();
        let mut long_owners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut short_owners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut case_free_owners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut unfiltered = Vec::new();
        let mut equals_rules = Vec::new();
        let mut colon_rules = Vec::new();
        let mut header_rules = Vec::new();
        let mut own = |keywords: &[&str], rule: usize| {
            let owners = if keywords
                .iter()
                .all(|k| rules::CASE_FREE_KEYWORDS.contains(k))
            {
                &mut case_free_owners
            } else if keywords.iter().any(|k| k.len() < SHORT_KEYWORD) {
                &mut short_owners
            } else {
                &mut long_owners
            };
            for keyword in keywords {
                owners.entry((*keyword).to_owned()).or_default().push(rule);
            }
        };

        own(rules::PEM_KEYWORDS, rules.len());
        rules.push(Rule {
            name: rules::PEM_RULE.to_owned(),
            matcher: Matcher::PemBlock,
        });
        own(&[rules::PUTTY_KEYWORD], rules.len());
        rules.push(Rule {
            name: rules::PUTTY_RULE.to_owned(),
            matcher: Matcher::PuttyPrivateLines,
        });

        for pattern in rules::PATTERNS {
            let regex = compile(pattern.name, pattern.regex)?;
            if matches!(
                pattern.anchor,
                Anchor::QueryLabel | Anchor::ConnLabel | Anchor::AssignLabel
            ) {
                equals_rules.push(rules.len());
            }
            if pattern.anchor == Anchor::ColonLabel {
                colon_rules.push(rules.len());
            }
            if pattern.anchor == Anchor::HeaderLabel {
                equals_rules.push(rules.len());
                header_rules.push(rules.len());
            }
            own(pattern.keywords, rules.len());
            rules.push(Rule {
                name: pattern.name.to_owned(),
                matcher: Matcher::Pattern(PatternRule {
                    regex,
                    secret: SecretGroup::FirstParticipating,
                    anchor: pattern.anchor,
                    gate: pattern.gate,
                    reach: pattern.reach,
                    check: pattern.check,
                    from_config: false,
                }),
            });
        }

        for pattern in extra {
            let regex = compile_extra(pattern)?;
            let secret = regex
                .group_info()
                .to_index(PatternID::ZERO, "secret")
                .unwrap_or(0);
            let keywords: Vec<&str> = pattern
                .keywords
                .iter()
                .map(String::as_str)
                .filter(|k| !k.is_empty())
                .collect();
            if keywords.is_empty() {
                unfiltered.push(rules.len());
            }
            own(&keywords, rules.len());
            rules.push(Rule {
                name: pattern.name.clone(),
                matcher: Matcher::Pattern(PatternRule {
                    regex,
                    secret: SecretGroup::Index(secret),
                    anchor: Anchor::Before(EXTRA_BEFORE),
                    gate: Gate::Open,
                    reach: EXTRA_REACH,
                    check: Check::Always,
                    from_config: true,
                }),
            });
        }

        let keyword_groups = [
            KeywordGroup::build(&long_owners, false)?,
            KeywordGroup::build(&short_owners, false)?,
            KeywordGroup::build(&case_free_owners, true)?,
        ];
        Ok(Redactor {
            rules,
            keyword_groups: keyword_groups.into_iter().flatten().collect(),
            equals_rules,
            colon_rules,
            header_rules,
            unfiltered,
        })
    }

    /// The keyword automata's keywords, one list per automaton, longest first (for
    /// diagnostics and the benchmark; the `=`-labelled rules are woken by a scan for `=`).
    pub fn keyword_groups(&self) -> Vec<&[String]> {
        self.keyword_groups
            .iter()
            .map(|group| group.keywords.as_slice())
            .collect()
    }

    /// Where the rules find secrets in `text`, in order: (byte offset, rule name) — never
    /// the values (`chapters scan`: old leaks found with today's rules).
    pub fn locate(&self, text: &str) -> Vec<(usize, &str)> {
        self.find_secrets(text)
            .iter()
            .map(|s| (s.start, self.rules[s.rule].name.as_str()))
            .collect()
    }

    /// Redact text; counts are added to `counts`.
    pub fn redact(&self, text: &str, counts: &mut RedactionCounts) -> Redacted<String> {
        Redacted(self.redact_cow(Cow::Borrowed(text), counts).into_owned())
    }

    /// [`Redactor::redact`] of a string the caller owns: a text with no secret (nearly
    /// every one) is handed back as it is, not copied.
    pub fn redact_owned(&self, text: String, counts: &mut RedactionCounts) -> Redacted<String> {
        Redacted(self.redact_cow(Cow::Owned(text), counts).into_owned())
    }

    /// `text` through the rules; changed only where a rule matched (then a new string).
    fn redact_cow<'s>(&self, text: Cow<'s, str>, counts: &mut RedactionCounts) -> Cow<'s, str> {
        let secrets = self.find_secrets(&text);
        if secrets.is_empty() {
            return text;
        }
        Cow::Owned(self.rewrite(&text, &secrets, counts))
    }

    /// `text` with each of `secrets` (in order) replaced by its marker.
    fn rewrite(&self, text: &str, secrets: &[Secret], counts: &mut RedactionCounts) -> String {
        let mut out = String::with_capacity(text.len() + secrets.len() * MARKER_PREFIX.len());
        let mut copied = 0;
        for secret in secrets {
            out.push_str(&text[copied..secret.start]);
            push_marker(&mut out, &text.as_bytes()[secret.start..secret.end]);
            counts.bump(&self.rules[secret.rule].name);
            copied = secret.end;
        }
        out.push_str(&text[copied..]);
        out
    }

    /// Redact every text of a [`Redactable`] value: what derivers read (the signer's turn).
    pub fn redact_all<T: Redactable>(&self, value: T, counts: &mut RedactionCounts) -> Redacted<T> {
        Redacted(value.map_cow(&mut |text| self.redact_cow(text, counts)))
    }

    /// Redact every string inside a JSON value (keys kept), for ledger lines.
    pub fn redact_json(
        &self,
        value: &serde_json::Value,
        counts: &mut RedactionCounts,
    ) -> Redacted<serde_json::Value> {
        Redacted(self.redact_value(value, counts))
    }

    /// [`Redactor::redact_json`] of a value the caller owns: its strings are redacted where
    /// they are (the signer's ledger lines), not copied into a second tree.
    /// Walks with an explicit stack, as `redact_value` does.
    pub fn redact_json_owned(
        &self,
        mut value: serde_json::Value,
        counts: &mut RedactionCounts,
    ) -> Redacted<serde_json::Value> {
        use serde_json::Value;
        let mut stack: Vec<&mut Value> = vec![&mut value];
        while let Some(next) = stack.pop() {
            match next {
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => stack.extend(map.values_mut()),
                Value::String(text) => {
                    if let Cow::Owned(redacted) = self.redact_cow(Cow::Borrowed(text), counts) {
                        *text = redacted;
                    }
                }
                _ => {}
            }
        }
        Redacted(value)
    }

    /// Walks with an explicit stack: a value nested deeper than the call stack is still fine.
    fn redact_value(
        &self,
        root: &serde_json::Value,
        counts: &mut RedactionCounts,
    ) -> serde_json::Value {
        use serde_json::Value;
        let mut stack: Vec<JsonFrame<'_>> = Vec::new();
        let mut next = root;
        loop {
            let mut finished = match next {
                Value::Array(items) => {
                    stack.push(JsonFrame::Array {
                        items: items.iter(),
                        done: Vec::with_capacity(items.len()),
                    });
                    None
                }
                Value::Object(map) => {
                    stack.push(JsonFrame::Object {
                        entries: map.iter(),
                        done: serde_json::Map::new(),
                        key: None,
                    });
                    None
                }
                Value::String(text) => Some(Value::String(self.redact(text, counts).into_inner())),
                scalar => Some(scalar.clone()),
            };
            // Hand finished values to their parents until one has another child to visit.
            loop {
                let Some(frame) = stack.last_mut() else {
                    // The stack empties only when the root itself has finished.
                    return finished.unwrap_or_default();
                };
                if let Some(child) = frame.accept_then_next(finished.take()) {
                    next = child;
                    break;
                }
                finished = stack.pop().map(JsonFrame::into_value);
            }
        }
    }

    /// The secrets in `text`: sorted, non-overlapping, on char boundaries.
    fn find_secrets(&self, text: &str) -> Vec<Secret> {
        let mut scan = Scan::new(self, text);
        for group in &self.keyword_groups {
            let mut from = 0;
            while let Some(hit) = group
                .automaton
                .find(aho_corasick::Input::new(text).range(from..))
            {
                for &rule in &group.rules_by_keyword[hit.pattern().as_usize()] {
                    scan.on_hit(rule, hit.start(), hit.end());
                }
                // Restart one byte on, not after the hit, so a keyword overlapping this one is seen.
                from = hit.start() + 1;
            }
        }
        // One pass over `=` and `:`, whose labels are checked by hand (see the module comment).
        let bytes = text.as_bytes();
        for at in memchr::memchr2_iter(b'=', b':', bytes) {
            if bytes[at] == b'=' {
                if !rules::may_close_secret_label(bytes, at) {
                    continue;
                }
                for &rule in &self.equals_rules {
                    scan.on_equals(rule, at);
                }
            } else {
                if !self.header_rules.is_empty() {
                    if let Some(anchor) = rules::header_anchor(bytes, at) {
                        for &rule in &self.header_rules {
                            scan.on_colon(rule, anchor);
                        }
                    }
                }
                if !self.colon_rules.is_empty() && rules::may_close_colon_label(bytes, at) {
                    if let Some(anchor) = rules::colon_anchor(text, at) {
                        for &rule in &self.colon_rules {
                            scan.on_colon(rule, anchor);
                        }
                    }
                }
            }
        }
        for &rule in &self.unfiltered {
            if let Matcher::Pattern(pattern) = &self.rules[rule].matcher {
                scan.search(
                    rule,
                    pattern,
                    Cluster {
                        start: 0,
                        end: text.len(),
                        anchors: usize::MAX,
                    },
                );
            }
        }
        scan.finish()
    }
}

/// Texts a configured pattern is tried on: one that matches the empty string, or covers
/// every byte of each of these, would redact what is not a secret.
const EVERYTHING_PROBES: &[&str] = &[
    "The parser returns an error when the input is truncated.",
    "fn main() { println!(\"{}\", 1 + 2); }",
    "0123456789",
    " \t ",
    "日本語のテキスト 🔑",
    "-",
    "x",
];

/// A configured pattern, compiled and refused by name if it matches the empty string or
/// everything.
fn compile_extra(pattern: &ExtraPattern) -> Result<meta::Regex, RedactError> {
    let regex = compile(&pattern.name, &pattern.regex)?;
    let name = || pattern.name.clone();
    let mut covers_all = true;
    for probe in std::iter::once("").chain(EVERYTHING_PROBES.iter().copied()) {
        let mut covered = 0;
        for found in regex.find_iter(probe) {
            if found.is_empty() {
                return Err(RedactError::MatchesEmpty { name: name() });
            }
            if found.start() == covered {
                covered = found.end();
            }
        }
        if !probe.is_empty() && covered < probe.len() {
            covers_all = false;
        }
    }
    if covers_all {
        return Err(RedactError::MatchesEverything { name: name() });
    }
    Ok(regex)
}

fn compile(name: &str, pattern: &str) -> Result<meta::Regex, RedactError> {
    meta::Regex::new(pattern).map_err(|e| RedactError::BadPattern {
        name: name.to_owned(),
        detail: e.to_string(),
    })
}

enum JsonFrame<'v> {
    Array {
        items: std::slice::Iter<'v, serde_json::Value>,
        done: Vec<serde_json::Value>,
    },
    Object {
        entries: serde_json::map::Iter<'v>,
        done: serde_json::Map<String, serde_json::Value>,
        key: Option<&'v String>,
    },
}

impl<'v> JsonFrame<'v> {
    /// Store the child just finished (if any); return the next child to visit.
    fn accept_then_next(
        &mut self,
        finished: Option<serde_json::Value>,
    ) -> Option<&'v serde_json::Value> {
        match self {
            JsonFrame::Array { items, done } => {
                done.extend(finished);
                items.next()
            }
            JsonFrame::Object { entries, done, key } => {
                if let (Some(value), Some(name)) = (finished, key.take()) {
                    done.insert(name.clone(), value);
                }
                let (name, child) = entries.next()?;
                *key = Some(name);
                Some(child)
            }
        }
    }

    fn into_value(self) -> serde_json::Value {
        match self {
            JsonFrame::Array { done, .. } => serde_json::Value::Array(done),
            JsonFrame::Object { done, .. } => serde_json::Value::Object(done),
        }
    }
}

/// A secret's byte span and the rule that found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Secret {
    start: usize,
    end: usize,
    rule: usize,
}

/// Anchors of one rule closer together than its reach.
#[derive(Clone, Copy, Debug)]
struct Cluster {
    start: usize,
    end: usize,
    anchors: usize,
}

/// One call's state: per rule the open cluster, PEM's open BEGIN line, the secrets found.
struct Scan<'r, 't> {
    redactor: &'r Redactor,
    text: &'t str,
    clusters: Vec<Option<Cluster>>,
    captures: Vec<Option<Captures>>,
    pem_open: Option<PemLine>,
    /// Keyword hits before this lie inside a block already taken.
    pem_resume: usize,
    putty_resume: usize,
    found: Vec<Secret>,
}

impl<'r, 't> Scan<'r, 't> {
    fn new(redactor: &'r Redactor, text: &'t str) -> Self {
        Scan {
            redactor,
            text,
            clusters: Vec::new(),
            captures: Vec::new(),
            pem_open: None,
            pem_resume: 0,
            putty_resume: 0,
            found: Vec::new(),
        }
    }

    fn on_hit(&mut self, rule: usize, start: usize, end: usize) {
        let redactor = self.redactor;
        match &redactor.rules[rule].matcher {
            Matcher::Pattern(pattern) => {
                if !rules::gate_passes(pattern.gate, self.text.as_bytes(), start, end) {
                    return;
                }
                if let Some(anchor) = rules::keyword_anchor(pattern.anchor, self.text, start) {
                    self.add_anchor(rule, pattern, anchor);
                }
            }
            Matcher::PemBlock => self.on_pem_hit(rule, start),
            Matcher::PuttyPrivateLines => self.on_putty_hit(rule, end),
        }
    }

    fn on_equals(&mut self, rule: usize, equals: usize) {
        let redactor = self.redactor;
        if let Matcher::Pattern(pattern) = &redactor.rules[rule].matcher {
            if let Some(anchor) = rules::equals_anchor(pattern.anchor, self.text, equals) {
                self.add_anchor(rule, pattern, anchor);
            }
        }
    }

    fn on_colon(&mut self, rule: usize, anchor: usize) {
        let redactor = self.redactor;
        if let Matcher::Pattern(pattern) = &redactor.rules[rule].matcher {
            self.add_anchor(rule, pattern, anchor);
        }
    }

    fn add_anchor(&mut self, rule: usize, pattern: &PatternRule, anchor: usize) {
        if self.clusters.is_empty() {
            self.clusters = vec![None; self.redactor.rules.len()];
        }
        let reach = rules::floor_char_boundary(self.text, anchor.saturating_add(pattern.reach));
        match &mut self.clusters[rule] {
            Some(cluster) if anchor < cluster.end => {
                cluster.start = cluster.start.min(anchor);
                cluster.end = cluster.end.max(reach);
                cluster.anchors += 1;
            }
            slot => {
                let previous = slot.replace(Cluster {
                    start: anchor,
                    end: reach,
                    anchors: 1,
                });
                if let Some(previous) = previous {
                    self.search(rule, pattern, previous);
                }
            }
        }
    }

    /// Run a rule's regex over a cluster: one anchored attempt for a lone anchor, else
    /// unanchored searches across the cluster.
    fn search(&mut self, rule: usize, pattern: &PatternRule, cluster: Cluster) {
        if self.captures.is_empty() {
            self.captures = (0..self.redactor.rules.len()).map(|_| None).collect();
        }
        let captures = self.captures[rule].get_or_insert_with(|| pattern.regex.create_captures());
        let text = self.text;
        if cluster.anchors == 1 && !matches!(pattern.anchor, Anchor::Before(_)) {
            let input = Input::new(text)
                .span(cluster.start..cluster.end)
                .anchored(Anchored::Yes);
            pattern.regex.search_captures(&input, captures);
            if let Some(secret) = pattern.secret_span(text, captures) {
                self.found.push(Secret {
                    start: secret.0,
                    end: secret.1,
                    rule,
                });
            }
            return;
        }
        // Windows of twice the reach: no search runs far past where its match could end, so
        // a dense cluster costs linear time; a match longer than the reach may be cut.
        let mut from = cluster.start;
        while from < cluster.end {
            let window_end =
                rules::floor_char_boundary(text, from.saturating_add(2 * pattern.reach))
                    .min(cluster.end);
            pattern
                .regex
                .search_captures(&Input::new(text).span(from..window_end), captures);
            let Some(found) = captures.get_match() else {
                if window_end == cluster.end {
                    break;
                }
                // Nothing that fits starts before the last reach of this window; go on from there.
                from = rules::floor_char_boundary(text, window_end - pattern.reach)
                    .max(rules::next_char_boundary(text, from));
                continue;
            };
            from = match pattern.secret_span(text, captures) {
                Some(secret) if found.end() > found.start() => {
                    self.found.push(Secret {
                        start: secret.0,
                        end: secret.1,
                        rule,
                    });
                    found.end()
                }
                _ => rules::next_char_boundary(text, found.start()),
            };
        }
    }

    fn on_pem_hit(&mut self, rule: usize, hit: usize) {
        if hit < self.pem_resume {
            return;
        }
        let Some(line) = rules::pem_line(self.text, hit) else {
            return;
        };
        if let Some(open) = &self.pem_open {
            let in_reach = line.start <= open.end + rules::PEM_LIMIT;
            // Labels compare ASCII case aside: `-----end rsa private key-----` closes an
            // upper-case BEGIN.
            let closes = !line.begin
                && self.text[line.label.clone()]
                    .eq_ignore_ascii_case(&self.text[open.label.clone()]);
            if in_reach && closes {
                self.found.push(Secret {
                    start: open.start,
                    end: line.end,
                    rule,
                });
                self.pem_resume = line.end;
                self.pem_open = None;
                return;
            }
            if in_reach && !line.begin {
                return; // an END of another label: the block may still close
            }
            self.close_pem(rule);
        }
        if line.begin && line.start >= self.pem_resume {
            self.pem_open = Some(line);
        }
    }

    /// An open BEGIN without its END: redact it with the key material that follows, if any.
    fn close_pem(&mut self, rule: usize) {
        let Some(open) = self.pem_open.take() else {
            return;
        };
        if let Some((_, end)) =
            rules::key_material(self.text, open.end, open.end + rules::PEM_LIMIT, true)
        {
            self.found.push(Secret {
                start: open.start,
                end,
                rule,
            });
            self.pem_resume = end;
        }
    }

    /// `Private-Lines: N` in a PuTTY key file: the base64 lines after it are the key.
    fn on_putty_hit(&mut self, rule: usize, keyword_end: usize) {
        if keyword_end < self.putty_resume {
            return;
        }
        let bytes = self.text.as_bytes();
        let mut from = keyword_end;
        while from < bytes.len() && (bytes[from] == b' ' || bytes[from].is_ascii_digit()) {
            from += 1;
        }
        if let Some((start, end)) =
            rules::key_material(self.text, from, from + rules::PEM_LIMIT, false)
        {
            self.found.push(Secret { start, end, rule });
            self.putty_resume = end;
        }
    }

    /// Flush open state, drop extras inside existing markers, resolve overlaps.
    fn finish(mut self) -> Vec<Secret> {
        let redactor = self.redactor;
        for rule in 0..self.clusters.len() {
            if let (Some(cluster), Matcher::Pattern(pattern)) =
                (self.clusters[rule].take(), &redactor.rules[rule].matcher)
            {
                self.search(rule, pattern, cluster);
            }
        }
        if let Some(pem_rule) = redactor
            .rules
            .iter()
            .position(|rule| matches!(rule.matcher, Matcher::PemBlock))
        {
            self.close_pem(pem_rule);
        }
        let mut found = self.found;
        if found.is_empty() {
            return found;
        }
        let from_config = |secret: &Secret| match &redactor.rules[secret.rule].matcher {
            Matcher::Pattern(pattern) => pattern.from_config,
            _ => false,
        };
        if found.iter().any(from_config) {
            let markers = marker_spans(self.text);
            found.retain(|secret| {
                !from_config(secret)
                    || !markers
                        .iter()
                        .any(|&(start, end)| secret.start < end && start < secret.end)
            });
        }
        found.sort_unstable_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.end.cmp(&a.end))
                .then(a.rule.cmp(&b.rule))
        });
        let mut taken_until = 0;
        found.retain(|secret| {
            let free = secret.start >= taken_until;
            if free {
                taken_until = secret.end;
            }
            free
        });
        found
    }
}

impl PatternRule {
    /// The secret's span in a match just made, if there is one and it passes the check.
    fn secret_span(&self, text: &str, captures: &Captures) -> Option<(usize, usize)> {
        let span = match self.secret {
            SecretGroup::Index(index) => captures.get_group(index)?,
            SecretGroup::FirstParticipating => (1..captures.group_len())
                .find_map(|index| captures.get_group(index))
                .or_else(|| captures.get_group(0))?,
        };
        let secret = text
            .get(span.start..span.end)
            .filter(|secret| !secret.is_empty())?;
        let passes = match self.check {
            Check::Always => true,
            Check::TokenLike => rules::token_like(secret),
            Check::NotPlaceholder => !rules::is_placeholder(secret),
            Check::AssignedSecret => rules::assigned_secret(secret),
            Check::LabelledValue => rules::labelled_value(secret),
        } && (self.from_config || !rules::masked_tail(secret));
        passes.then_some((span.start, span.end))
    }
}

/// Spans of the markers already in `text`.
fn marker_spans(text: &str) -> Vec<(usize, usize)> {
    let longest = MARKER_PREFIX.len() + 8 + MARKER_SUFFIX.len();
    memchr::memmem::find_iter(text.as_bytes(), MARKER_PREFIX.as_bytes())
        .filter_map(|start| {
            let window = &text.as_bytes()[start..(start + longest).min(text.len())];
            let end = memchr::memmem::find(window, MARKER_SUFFIX.as_bytes())?;
            Some((start, start + end + MARKER_SUFFIX.len()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;

    fn redactor() -> &'static Redactor {
        static REDACTOR: OnceLock<Redactor> = OnceLock::new();
        REDACTOR.get_or_init(|| Redactor::new(&[]).unwrap())
    }

    fn run(text: &str) -> (String, RedactionCounts) {
        let mut counts = RedactionCounts::default();
        let out = redactor().redact(text, &mut counts).into_inner();
        (out, counts)
    }

    /// `text` with each secret replaced by its own marker, counted under `rule`.
    #[track_caller]
    fn assert_redacts(text: &str, secrets: &[&str], rule: &str) {
        let (out, counts) = run(text);
        let mut expected = text.to_owned();
        for secret in secrets {
            assert!(
                expected.contains(secret),
                "fixture: {secret:?} not in {text:?}"
            );
            expected = expected.replacen(secret, &marker(secret.as_bytes()), 1);
        }
        assert_eq!(out, expected, "input: {text:?}");
        assert_eq!(
            counts.by_rule.get(rule),
            Some(&(secrets.len() as u64)),
            "{counts:?} for {text:?}"
        );
        assert_eq!(
            counts.total(),
            secrets.len() as u64,
            "{counts:?} for {text:?}"
        );
    }

    #[track_caller]
    fn assert_untouched(text: &str) {
        let (out, counts) = run(text);
        assert_eq!(out, text);
        assert_eq!(counts.total(), 0, "{counts:?} for {text:?}");
    }

    /// Deterministic letters and digits, mixed case.
    fn token(len: usize, seed: u64) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(ALPHABET[(state % ALPHABET.len() as u64) as usize])
            })
            .collect()
    }

    const JWT: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
    const AWS_SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    #[test]
    fn redacting_an_owned_text_gives_what_redacting_a_borrowed_one_gives() {
        let texts = [
            String::new(),
            "plain words, nothing secret".to_owned(),
            format!("token {JWT} and key AKIAIOSFODNN7EXAMPLE in one line"),
            format!("aws_secret_access_key = {AWS_SECRET}\nnext line"),
        ];
        for text in texts {
            let mut borrowed = RedactionCounts::default();
            let mut owned = RedactionCounts::default();
            let expected = redactor().redact(&text, &mut borrowed).into_inner();
            let got = redactor()
                .redact_owned(text.clone(), &mut owned)
                .into_inner();
            assert_eq!(got, expected, "input: {text:?}");
            assert_eq!(owned, borrowed, "input: {text:?}");
        }
    }

    #[test]
    fn redacting_an_owned_json_value_gives_what_redacting_a_borrowed_one_gives() {
        let value = serde_json::json!({
            "v": 1,
            "AKIAIOSFODNN7EXAMPLE": "a key is kept as it is",
            "terms": ["plain", format!("token {JWT}"), ["AKIAIOSFODNN7EXAMPLE", 3, null]],
            "nested": {"deeper": {"secret": format!("aws_secret_access_key = {AWS_SECRET}")}},
            "flag": true
        });
        let mut borrowed = RedactionCounts::default();
        let mut owned = RedactionCounts::default();
        let expected = redactor().redact_json(&value, &mut borrowed).into_inner();
        let got = redactor()
            .redact_json_owned(value.clone(), &mut owned)
            .into_inner();
        assert_eq!(got, expected);
        assert_ne!(got, value, "the fixture holds secrets");
        assert_eq!(owned, borrowed);
    }

    // ---- marker ----

    #[test]
    fn marker_is_the_sha256_prefix() {
        // Published SHA-256 test vectors: "abc" → ba7816bf…, "" → e3b0c442….
        assert_eq!(marker(b"abc"), "⟦redacted:credential sha256=ba7816bf⟧");
        assert_eq!(marker(b""), "⟦redacted:credential sha256=e3b0c442⟧");
        assert!(marker(b"abc").starts_with(MARKER_PREFIX));
    }

    #[test]
    fn same_secret_same_marker_across_calls_and_redactors() {
        let text =
            "id AKIAIOSFODNN7EXAMPLE and again AKIAIOSFODNN7EXAMPLE, other AKIAIOSFODNN7EXAMPLF";
        let first = run(text).0;
        let second = Redactor::new(&[])
            .unwrap()
            .redact(text, &mut RedactionCounts::default())
            .into_inner();
        assert_eq!(first, second);
        let same = marker(b"AKIAIOSFODNN7EXAMPLE");
        let other = marker(b"AKIAIOSFODNN7EXAMPLF");
        assert_ne!(same, other);
        assert_eq!(first, format!("id {same} and again {same}, other {other}"));
    }

    // ---- rules: realistic samples and look-alikes ----

    #[test]
    fn aws_access_key_ids() {
        assert_redacts(
            "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n",
            &["AKIAIOSFODNN7EXAMPLE"],
            "aws_access_key_id",
        );
        assert_redacts(
            "\"AccessKeyId\": \"ASIAY34FZKBOKMUTVV7A\",",
            &["ASIAY34FZKBOKMUTVV7A"],
            "aws_access_key_id",
        );
        assert_redacts(
            "é🔑AKIAIOSFODNN7EXAMPLE✓",
            &["AKIAIOSFODNN7EXAMPLE"],
            "aws_access_key_id",
        );
        assert_untouched("AKIAIOSFODNN7EXAMPL is fifteen");
        assert_untouched("AKIAIOSFODNN7EXAMPLEX is seventeen");
        assert_untouched("akiaiosfodnn7example and AKIA alone");
    }

    #[test]
    fn aws_secret_access_keys_keep_their_label() {
        for text in [
            format!("[default]\naws_secret_access_key = {AWS_SECRET}\n"),
            format!("{{\"SecretAccessKey\": \"{AWS_SECRET}\", \"x\": 1}}"),
            format!("AWS_SECRET_ACCESS_KEY={AWS_SECRET}"),
            format!("secretAccessKey: '{AWS_SECRET}'"),
        ] {
            assert_redacts(&text, &[AWS_SECRET], "aws_secret_access_key");
        }
        assert_untouched(&format!("aws_secret_access_key = {}\n", &AWS_SECRET[..39]));
        assert_untouched(&format!("aws_secret_access_key = {AWS_SECRET}Z\n"));
        assert_untouched("secret_access_key is required; set it in ~/.aws/credentials");
    }

    #[test]
    fn github_tokens() {
        for prefix in ["ghp", "gho", "ghs", "ghu", "ghr"] {
            let secret = format!("{prefix}_{}", token(36, 1));
            assert_redacts(
                &format!("GITHUB_TOKEN={secret} git push"),
                &[&secret],
                "github_token",
            );
        }
        let pat = format!("github_pat_11ABCDEFG0{}_{}", token(22, 2), token(59, 3));
        assert_redacts(&format!("token: {pat}\n"), &[&pat], "github_pat");
        assert_untouched("ghp_short and ghx_A1b2C3d4E5f6G7h8I9j0K1 and github_pat_short");
    }

    #[test]
    fn openai_shape_keys() {
        let project = format!("sk-proj-{}_{}-{}", token(40, 4), token(30, 5), token(20, 6));
        let anthropic = format!("sk-ant-api03-{}-{}AA", token(40, 7), token(40, 8));
        let legacy = format!("sk-{}", token(48, 9));
        assert_redacts(
            &format!("OPENAI_API_KEY={project}\n"),
            &[&project],
            "openai_key",
        );
        assert_redacts(
            &format!("x-api-key: {anthropic}"),
            &[&anthropic],
            "openai_key",
        );
        assert_redacts(&format!("\"{legacy}\""), &[&legacy], "openai_key");
        assert_untouched("see the task-list-manager-component and disk-usage-report-generator");
        assert_untouched("pip install sk-learn-compat-helper; sk-short");
    }

    #[test]
    fn stripe_keys() {
        let live = format!("sk_live_51{}", token(40, 10));
        let restricted = format!("rk_test_{}", token(24, 11));
        let webhook = format!("whsec_{}", token(32, 12));
        assert_redacts(&format!("STRIPE_KEY={live}"), &[&live], "stripe_key");
        assert_redacts(
            &format!("key: {restricted}\n"),
            &[&restricted],
            "stripe_key",
        );
        assert_redacts(
            &format!("STRIPE_WEBHOOK_SECRET={webhook}"),
            &[&webhook],
            "stripe_webhook_secret",
        );
        assert_untouched("task_live_preview_component_v2 and sk_live_short and whsec_short");
    }

    #[test]
    fn slack_tokens_and_webhooks() {
        let bot = format!("xoxb-123456789012-1234567890123-{}", token(24, 13));
        let app = format!(
            "xapp-1-A0123456789-1234567890123-{}",
            token(64, 14).to_lowercase()
        );
        assert_redacts(&format!("SLACK_BOT_TOKEN={bot}"), &[&bot], "slack_token");
        assert_redacts(&format!("{app}\n"), &[&app], "slack_token");
        let path = format!("T0123ABCD/B0456EFGH/{}", token(24, 15));
        assert_redacts(
            &format!("curl -X POST https://hooks.slack.com/services/{path} -d @msg.json"),
            &[&path],
            "slack_webhook",
        );
        assert_untouched("xoxo-gossip and https://hooks.slack.com/services/ is the prefix");
    }

    #[test]
    fn google_gitlab_npm_pypi_huggingface_sendgrid() {
        let google = format!("AIza{}", token(35, 16));
        assert_redacts(&format!("?key={google}"), &[&google], "google_api_key");
        assert_untouched(&format!("AIza{} is short", token(34, 16)));

        for prefix in ["glpat", "gldt", "glrt", "glptt", "glcbt"] {
            let secret = format!("{prefix}-{}", token(20, 17));
            assert_redacts(
                &format!("GITLAB_TOKEN={secret}"),
                &[&secret],
                "gitlab_token",
            );
        }
        assert_untouched("glpat-short");

        let npm = format!("npm_{}", token(36, 18));
        assert_redacts(
            &format!("//registry.npmjs.org/:_authToken={npm}\n"),
            &[&npm],
            "npm_token",
        );
        assert_untouched("npm_config_cache=/tmp/npm");

        let pypi = format!("pypi-AgEIcHlwaS5vcmc{}", token(120, 19));
        assert_redacts(&format!("password = {pypi}\n"), &[&pypi], "pypi_token");
        assert_untouched("pypi-AgEIcHlwaS5vcmcShort");

        let hf = format!(
            "hf_{}",
            token(34, 20).replace(|c: char| c.is_ascii_digit(), "Q")
        );
        assert_redacts(&format!("HF_TOKEN={hf}"), &[&hf], "huggingface_token");
        assert_untouched("self.hf_model_name_for_the_tokenizer and hf_short");

        let sendgrid = format!("SG.{}.{}", token(22, 21), token(43, 22));
        assert_redacts(
            &format!("SENDGRID_API_KEY={sendgrid}"),
            &[&sendgrid],
            "sendgrid_key",
        );
        assert_untouched("SG.short.thing");
    }

    #[test]
    fn jwts() {
        assert_redacts(&format!("{{\"id_token\":\"{JWT}\"}}"), &[JWT], "jwt");
        assert_redacts(&format!("cookie: session={JWT}; Path=/"), &[JWT], "jwt");
        assert_untouched("a base64 JSON object starts with eyJ, as in eyJhbGciOi…");
        assert_untouched("eyJhbGciOiJub25lIn0.eyJzdWIiOiIxMjM0NTY3ODkwIn0.");
        assert_untouched(&format!("blob{JWT}"));
        assert_untouched("eyJ.eyJ.abc");
    }

    #[test]
    fn bearer_tokens_keep_the_word() {
        let secret = "abcdef0123456789abcdef";
        assert_redacts(
            &format!("Authorization: Bearer {secret}\r\n"),
            &[secret],
            "bearer_token",
        );
        assert_redacts(
            &format!("authorization: bearer {secret}"),
            &[secret],
            "bearer_token",
        );
        assert_redacts(
            &format!("AUTHORIZATION: BEARER\t{secret}"),
            &[secret],
            "bearer_token",
        );
        assert_untouched("use a Bearer token; bearer authentication; Bearer tokenization-related");
        assert_untouched("Bearer abcdef012345678");
    }

    #[test]
    fn a_jwt_bearer_token_is_one_secret() {
        let (out, counts) = run(&format!("-H 'Authorization: Bearer {JWT}'"));
        assert_eq!(
            out,
            format!("-H 'Authorization: Bearer {}'", marker(JWT.as_bytes()))
        );
        assert_eq!(counts.total(), 1);
    }

    #[test]
    fn url_passwords_only_the_password() {
        for (text, secret) in [
            (
                "postgres://admin:s3cr3t-P4ss@db.internal:5432/app",
                "s3cr3t-P4ss",
            ),
            ("DATABASE_URL=mysql://root:hunter2@127.0.0.1/db", "hunter2"),
            (
                "mongodb+srv://app:Zx9%40pw@cluster0.abcde.mongodb.net/?retryWrites=true",
                "Zx9%40pw",
            ),
            ("redis://:Zx9pw0rd@cache:6379/0", "Zx9pw0rd"),
            ("amqp://guest:gu3st!@rabbit//", "gu3st!"),
            (
                "git clone https://deploy:tok3n@example.com/repo.git",
                "tok3n",
            ),
            ("https://u:p@ss@host.example/", "p@ss"),
            (r#"{"url":"https:\/\/u:pw1234@h.example\/x"}"#, "pw1234"),
        ] {
            assert_redacts(text, &[secret], "url_password");
        }
        for text in [
            "https://user@host.example/x",
            "https://example.com:8080/path",
            "http://localhost:3000 and mail me@example.com",
            "ssh://git@github.com/org/repo",
            "postgres://user:${DB_PASSWORD}@host/db",
            "postgres://user:****@host/db",
            r#"{"a":"https://example.com:443","b":"x@y.z"}"#,
            "ftp://anonymous:@ftp.example.com/",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn url_query_secrets_keep_the_label() {
        for (text, secret) in [
            (
                "GET https://api.example.com/v1/items?token=abc123def456&page=2",
                "abc123def456",
            ),
            ("https://x.test/a?b=1&api_key=AbC123", "AbC123"),
            ("?access_token=ya29.a0AfH6SMB", "ya29.a0AfH6SMB"),
            ("&X-Amz-Signature=8f3a1c2b9d", "8f3a1c2b9d"),
            ("/v1?apiKey=xyz789", "xyz789"),
            ("login?user=bob&password=hunter2", "hunter2"),
            ("&client_secret=s3cr3t&grant_type=x", "s3cr3t"),
            ("?pwd=s3cr3t", "s3cr3t"),
            (
                "&X-Amz-Security-Token=FwoGZXIvYXdzEBYaD",
                "FwoGZXIvYXdzEBYaD",
            ),
        ] {
            assert_redacts(text, &[secret], "url_query_secret");
        }
        for text in [
            "sorted(xs, key=len)",
            "https://example.com/?keyword=rust",
            "https://example.com/?token=&x=1",
            "https://example.com/?token=${TOKEN}",
            "https://example.com/?page=2&sort=asc",
            "$ pwd\n/home/me",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn assigned_secrets_in_env_files_shells_and_flags() {
        for (text, secret) in [
            ("DB_PASSWORD=Sup3rS3cret!\nDB_HOST=db", "Sup3rS3cret!"),
            ("export GITHUB_API_TOKEN=a1b2c3d4e5f6", "a1b2c3d4e5f6"),
            ("mysql --password=p4ssw0rd -h db", "p4ssw0rd"),
            ("curl --api-key=Zx9Yw8Vu7T https://x", "Zx9Yw8Vu7T"),
            ("SECRET_KEY=\"with spaces 42\"", "with spaces 42"),
            ("env AWS_ACCESS_KEY=AbCdEfGhIjKl make", "AbCdEfGhIjKl"),
            ("{\"cmd\":\"run --token=T0ken-Value\"}", "T0ken-Value"),
        ] {
            assert_redacts(text, &[secret], "assigned_secret");
        }
        for text in [
            "login(user, password=password)",
            "client = Client(api_key=self.api_key)",
            "TOKEN=${GITHUB_TOKEN}",
            "PASSWORD=****",
            "x==y; token == expected",
            "MAX_TOKENS=4000",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn html_escaped_query_secrets() {
        assert_redacts(
            "<a href=\"https://x.test/cb?code=1&amp;access_token=ya29.AbC123xyz\">",
            &["ya29.AbC123xyz"],
            "url_query_secret",
        );
    }

    #[test]
    fn connection_string_passwords() {
        for (text, secret) in [
            ("Server=tcp:db.example.com,1433;Database=app;User Id=sa;Password=Sup3rS3cret!;Encrypt=true", "Sup3rS3cret!"),
            ("Data Source=db;Initial Catalog=x;User ID=u; Pwd = abc123", "abc123"),
            ("jdbc:sqlserver://db:1433;user=app;password=p4ssw0rd;", "p4ssw0rd"),
            ("PASSWORD=hunter2;Host=db", "hunter2"),
        ] {
            assert_redacts(text, &[secret], "conn_string_password");
        }
        for text in [
            "login(user, password=password)",
            "password = getpass()",
            "const password = readPassword();",
            "Password=${DB_PASSWORD};",
            "the password is stored in the vault",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn azure_storage_keys() {
        let key = format!("{}==", token(86, 23));
        let text = format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={key};EndpointSuffix=core.windows.net");
        assert_redacts(&text, &[&key], "azure_storage_key");
        assert_untouched("AccountKey=short;");
    }

    // ---- PEM ----

    fn pem_body(nl: &str) -> String {
        [
            token(64, 30),
            token(64, 31),
            token(64, 32),
            format!("{}==", token(20, 33)),
        ]
        .join(nl)
    }

    #[test]
    fn pem_blocks_of_every_kind_across_lines() {
        for nl in ["\n", "\r\n"] {
            for label in [
                "RSA PRIVATE KEY",
                "EC PRIVATE KEY",
                "DSA PRIVATE KEY",
                "OPENSSH PRIVATE KEY",
                "ENCRYPTED PRIVATE KEY",
                "PRIVATE KEY",
            ] {
                let block = format!(
                    "-----BEGIN {label}-----{nl}{}{nl}-----END {label}-----",
                    pem_body(nl)
                );
                assert_redacts(
                    &format!("here is the key:{nl}{block}{nl}and after{nl}"),
                    &[&block],
                    "pem_private_key",
                );
            }
            let encrypted = format!(
                "-----BEGIN RSA PRIVATE KEY-----{nl}Proc-Type: 4,ENCRYPTED{nl}DEK-Info: AES-128-CBC,00FF{nl}{nl}{}{nl}-----END RSA PRIVATE KEY-----",
                pem_body(nl)
            );
            assert_redacts(
                &format!("{encrypted}{nl}"),
                &[&encrypted],
                "pem_private_key",
            );
            let pgp = format!(
                "-----BEGIN PGP PRIVATE KEY BLOCK-----{nl}Version: GnuPG v2{nl}{nl}{}{nl}=AbCd{nl}-----END PGP PRIVATE KEY BLOCK-----",
                pem_body(nl)
            );
            assert_redacts(&format!("gpg output:{nl}{pgp}"), &[&pgp], "pem_private_key");
            let ssh2 = format!(
                "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----{nl}Comment: \"rsa-key-20240101\"{nl}{}{nl}---- END SSH2 ENCRYPTED PRIVATE KEY ----",
                pem_body(nl)
            );
            assert_redacts(&ssh2, &[&ssh2], "pem_private_key");
        }
    }

    #[test]
    fn pem_inside_a_json_string_with_escaped_newlines() {
        let block = format!(
            r"-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
            pem_body(r"\n")
        );
        let text = format!(
            r#"{{"type": "service_account", "private_key": "{block}\n", "client_email": "x@y.iam"}}"#
        );
        assert_redacts(&text, &[&block], "pem_private_key");
    }

    #[test]
    fn truncated_pem_runs_over_its_key_material_only() {
        let body = pem_body("\n");
        let text =
            format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n[output truncated]\nmore prose\n");
        let secret = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}");
        assert_redacts(&text, &[&secret], "pem_private_key");
        // Cut mid-line at the very end of the text.
        let text = format!(
            "cat id_rsa\n-----BEGIN OPENSSH PRIVATE KEY-----\n{}",
            token(50, 40)
        );
        let secret = &text["cat id_rsa\n".len()..];
        assert_redacts(&text, &[secret], "pem_private_key");
    }

    #[test]
    fn pem_with_another_labels_end_is_unterminated() {
        let body = pem_body("\n");
        let text =
            format!("-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END EC PRIVATE KEY-----\n");
        let secret = format!("-----BEGIN RSA PRIVATE KEY-----\n{body}");
        assert_redacts(&text, &[&secret], "pem_private_key");
    }

    #[test]
    fn two_pem_blocks_are_two_secrets() {
        let first = format!(
            "-----BEGIN EC PRIVATE KEY-----\n{}\n-----END EC PRIVATE KEY-----",
            pem_body("\n")
        );
        let second = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----",
            token(64, 50)
        );
        assert_redacts(
            &format!("{first}\n{second}\n"),
            &[&first, &second],
            "pem_private_key",
        );
    }

    #[test]
    fn pem_mentions_and_public_material_stay() {
        assert_untouched("Look for `-----BEGIN RSA PRIVATE KEY-----` at the top of the file.");
        assert_untouched("-----BEGIN RSA PRIVATE KEY-----\n\nThat is the header line.\n");
        assert_untouched(&format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----",
            pem_body("\n")
        ));
        assert_untouched(&format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----",
            pem_body("\n")
        ));
        assert_untouched("-----END RSA PRIVATE KEY-----\n");
    }

    #[test]
    fn putty_private_lines() {
        let private = [token(64, 60), token(64, 61), format!("{}=", token(30, 62))].join("\n");
        let text = format!(
            "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key\nPublic-Lines: 1\n{}\nPrivate-Lines: 3\n{private}\nPrivate-MAC: 0123abcd\n",
            token(64, 63)
        );
        assert_redacts(&text, &[&private], "putty_private_key");
    }

    #[test]
    fn labelled_values_in_json_yaml_and_headers() {
        let pw = "Tr0ub4dor&3x";
        for text in [
            format!("{{\"user\": \"app\", \"password\": \"{pw}\"}}"),
            format!("{{\\\"user\\\": \\\"app\\\", \\\"password\\\": \\\"{pw}\\\"}}"),
            format!("database:\n  password: {pw}\n  pool: 5"),
            format!("db:\\n  Password: '{pw}'\\n"),
            format!("curl -H \"X-Api-Key: {pw}\" https://x.test"),
            format!("users:\n- user:\n    token: {pw}\n"),
        ] {
            assert_redacts(&text, &[pw], "labelled_secret");
        }
        for text in [
            "pub password: String,",
            "password: Optional[str] = None",
            "token: Option<Token>,",
            "\"max_tokens\": 4096",
            "\"token\": 4096",
            "password: <PASSWORD>",
            "\"password\": \"********\"",
            "the password: it must be long",
            "password_hash: argon2id",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn authorization_headers_of_every_scheme() {
        let basic = "ZGVwbG95Omh1bnRlcjI=";
        for text in [
            format!("Authorization: Basic {basic}"),
            format!("authorization: basic {basic}"),
            format!("curl -H 'AUTHORIZATION: BASIC {basic}' https://r.test/"),
            format!("{{\\\"Authorization\\\": \\\"Basic {basic}\\\"}}"),
        ] {
            assert_redacts(&text, &[basic], "authorization_header");
        }
        let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b";
        assert_redacts(
            &format!("Authorization: Token {hex}"),
            &[hex],
            "authorization_header",
        );
        for text in [
            "Authorization: Bearer <token>",
            "Authorization: Bearer $TOKEN",
            "Authorization header is missing",
            "headers = {\"Authorization\": f\"Bearer {token}\"}",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn what_is_derived_from_redacted_text_stays_redacted() {
        let text = redactor().redact(
            "key AKIAIOSFODNN7EXAMPLE here",
            &mut RedactionCounts::default(),
        );
        let words: Redacted<Vec<String>> =
            text.derive(|t| t.split(' ').map(str::to_lowercase).collect());
        assert!(words.iter().all(|w| !w.contains("akia")), "{words:?}");
        let items = words.into_items();
        assert_eq!(items.len(), 4, "the marker holds a blank");
        assert_eq!(items[0].as_str(), "key");
        struct Upper;
        impl Settings for Upper {}
        let shouted = items[3].derive_with(&Upper, |w, _| w.to_uppercase());
        assert_eq!(shouted.as_str(), "HERE");
        let parsed: Redacted<Result<u32, String>> =
            items[0].derive(|w| w.parse::<u32>().map_err(|e| e.to_string()));
        assert!(parsed.transpose().is_err());
        assert_eq!(
            echo("?token=hunter2x"),
            format!("?token={}", marker(b"hunter2x"))
        );
        assert_eq!(echo("plain words"), "plain words");
    }

    #[test]
    fn authorization_headers_in_any_letter_case() {
        let secret = "abcdef0123456789abcdef";
        let basic = "ZGVwbG95Omh1bnRlcjI=";
        for (text, secret) in [
            (format!("AuThOrIzAtIoN: bEaReR {secret}"), secret),
            (format!("aUtHoRiZaTiOn: BeArEr {secret}\r\n"), secret),
            (format!("authorization: bearer {secret}"), secret),
            (format!("PROXY-AUTHORIZATION: Basic {basic}"), basic),
            (format!("Proxy-authorization: bAsIc {basic}"), basic),
            (format!("{{\"authorization\":\"Token {secret}\"}}"), secret),
            (
                format!("{{\\\"AuthoriZation\\\": \\\"BASIC {basic}\\\"}}"),
                basic,
            ),
            (
                format!("curl -H 'authorization: Basic {basic}' https://r.test/"),
                basic,
            ),
            (format!("AuthoriZation={secret}"), secret),
        ] {
            let (out, counts) = run(&text);
            assert_eq!(
                out,
                text.replacen(secret, &marker(secret.as_bytes()), 1),
                "{text}"
            );
            assert_eq!(counts.total(), 1, "{counts:?} for {text:?}");
        }
        for text in [
            "AuThOrIzAtIoN: bEaReR <token>",
            "authorization header is missing",
            "the AUTHORIZATION step: see below",
            "version: 1, session: abc, reason: none",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn pem_blocks_in_lower_and_mixed_case() {
        let body = pem_body("\n");
        for (begin, end) in [
            (
                "-----begin rsa private key-----",
                "-----end rsa private key-----",
            ),
            (
                "-----BeGiN RsA PrIvAtE KeY-----",
                "-----eNd rSa pRiVaTe kEy-----",
            ),
            (
                "-----begin openssh private key-----",
                "-----END OPENSSH PRIVATE KEY-----",
            ),
            ("-----begin private key-----", "-----end private key-----"),
            (
                "-----begin pgp private key block-----",
                "-----end pgp private key block-----",
            ),
            (
                "---- begin ssh2 encrypted private key ----",
                "---- end ssh2 encrypted private key ----",
            ),
        ] {
            let block = format!("{begin}\n{body}\n{end}");
            assert_redacts(&format!("key:\n{block}\nok"), &[&block], "pem_private_key");
            // Inside a JSON string, escaped newlines.
            let escaped = format!("{begin}\\n{}\\n{end}", pem_body("\\n"));
            assert_redacts(
                &format!("{{\"key\": \"{escaped}\"}}"),
                &[&escaped],
                "pem_private_key",
            );
        }
        // Without its END: the block runs over the key material.
        let open = format!("-----begin ec private key-----\n{body}");
        assert_redacts(
            &format!("{open}\n[truncated]\n"),
            &[&open],
            "pem_private_key",
        );
        assert_untouched("look for `-----begin rsa private key-----` at the top");
        assert_untouched(&format!(
            "-----begin public key-----\n{body}\n-----end public key-----"
        ));
        assert_untouched("a monkey----- and a block-----");
    }

    #[test]
    fn password_flags_spaced_and_mysql() {
        let pw = "S3cr3t-Pass";
        assert_redacts(
            &format!("login --password {pw} --region eu"),
            &[pw],
            "password_flag",
        );
        assert_redacts(
            &format!("login --db-password \"{pw}\""),
            &[pw],
            "password_flag",
        );
        assert_redacts(
            &format!("mysql -u root -p{pw} shop"),
            &[pw],
            "mysql_password_flag",
        );
        assert_redacts(
            &format!("mysqldump -uroot -p'{pw}' db > db.sql"),
            &[pw],
            "mysql_password_flag",
        );
        for text in [
            "mysql -u root -p",
            "mysql --protocol=tcp -u app -p shop",
            "--password-file /run/secrets/db",
            "--password \"$DB_PASS\"",
            "--password <password>",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn assignments_with_escaped_quotes_spaces_and_framework_names() {
        let value = "9b1c4e0f7a2d4c8e";
        for (text, rule) in [
            (format!("PASSWORD=\\\"{value}\\\""), "assigned_secret"),
            (format!("SECRET_KEY_BASE={value}"), "assigned_secret"),
            (format!("SECRET_KEY = '{value}'"), "assigned_secret"),
            (format!("DJANGO_SECRET_KEY=\"{value}\""), "assigned_secret"),
            (format!("DD_APP_KEY={value}"), "assigned_secret"),
        ] {
            assert_redacts(&text, &[value], rule);
        }
        for text in [
            "API_KEY=YOUR_API_KEY",
            "SECRET_KEY=change-me",
            "TOKEN=REPLACE_ME",
            "api_key = os.environ[\"API_KEY\"]",
            "password = request.POST.get('password')",
            "postgres://user:password@localhost/db",
        ] {
            assert_untouched(text);
        }
    }

    #[test]
    fn vendor_tokens_of_issue_13() {
        for (secret, rule) in [
            (format!("shpat_{}", "a1b2c3d4".repeat(4)), "shopify_token"),
            (
                format!("dop_v1_{}", "0123456789abcdef".repeat(4)),
                "digitalocean_token",
            ),
            (
                "dckr_pat_AbCdEfGhIjKlMnOpQrStUvWxY01".to_owned(),
                "dockerhub_token",
            ),
            (format!("HRKU-AA{}", "Ab3_".repeat(15)), "heroku_api_key"),
            (format!("key-{}", "0f1e2d3c".repeat(4)), "mailgun_key"),
            (format!("SK{}", "0f1e2d3c".repeat(4)), "twilio_key"),
            (format!("AC{}", "0f1e2d3c".repeat(4)), "twilio_key"),
            (
                "xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTAxMg".to_owned(),
                "slack_token",
            ),
        ] {
            assert_redacts(&format!("token {secret} here"), &[&secret], rule);
        }
        for text in [
            "xoxo-hugs-and-kisses",
            "xoxb-your-bot-token",
            "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "AKIAXXXXXXXXXXXXXXXX",
            "SKIP_PREFLIGHT_CHECK=true",
            "key-value-store",
        ] {
            assert_untouched(text);
        }
    }

    // ---- extras ----

    fn extra(name: &str, keywords: &[&str], regex: &str) -> ExtraPattern {
        ExtraPattern {
            name: name.to_owned(),
            keywords: keywords.iter().map(|k| (*k).to_owned()).collect(),
            regex: regex.to_owned(),
        }
    }

    fn run_with(extras: &[ExtraPattern], text: &str) -> (String, RedactionCounts) {
        let mut counts = RedactionCounts::default();
        let out = Redactor::new(extras)
            .unwrap()
            .redact(text, &mut counts)
            .into_inner();
        (out, counts)
    }

    #[test]
    fn extra_with_a_secret_group_replaces_only_the_group() {
        let extras = [extra(
            "acme_token",
            &["acme_token"],
            r"acme_token[ \t]*=[ \t]*(?P<secret>[a-z0-9]{12})",
        )];
        let (out, counts) = run_with(&extras, "acme_token = abcdef123456\n");
        assert_eq!(out, format!("acme_token = {}\n", marker(b"abcdef123456")));
        assert_eq!(counts.by_rule.get("acme_token"), Some(&1));
    }

    #[test]
    fn extra_without_a_group_replaces_the_whole_match() {
        let extras = [extra("internal_id", &["INT-"], r"INT-[0-9]{8}(?:[^0-9]|$)")];
        let (out, _) = run_with(&extras, "ticket INT-12345678 and INT-1234");
        assert_eq!(
            out,
            format!("ticket {}and INT-1234", marker(b"INT-12345678 "))
        );
    }

    #[test]
    fn extra_match_may_start_before_its_keyword() {
        let extras = [extra("zz", &["ZZTOP"], r"(?P<secret>[0-9]{6})-ZZTOP")];
        let (out, _) = run_with(&extras, "id 123456-ZZTOP end");
        assert_eq!(out, format!("id {}-ZZTOP end", marker(b"123456")));
    }

    #[test]
    fn extra_without_keywords_searches_everything() {
        let extras = [
            extra("codeword", &[], r"swordfish-[0-9]+"),
            extra("blank", &[""], r"marlin-[0-9]+"),
        ];
        let (out, counts) = run_with(&extras, "say swordfish-42 then marlin-7");
        assert_eq!(
            out,
            format!(
                "say {} then {}",
                marker(b"swordfish-42"),
                marker(b"marlin-7")
            )
        );
        assert_eq!(counts.total(), 2);
    }

    #[test]
    fn bad_extra_regex_is_refused_by_name() {
        let err = Redactor::new(&[extra("broken-rule", &["x"], "(unclosed")]).unwrap_err();
        match &err {
            RedactError::BadPattern { name, .. } => assert_eq!(name, "broken-rule"),
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("broken-rule"), "{err}");
        // The config check names the same pattern without compiling the built-in rules.
        let check = Redactor::check_extra(&[
            extra("fine", &["k"], "k=[a-z]+"),
            extra("broken-rule", &["x"], "(unclosed"),
        ])
        .unwrap_err();
        assert!(check.to_string().contains("broken-rule"), "{check}");
        assert!(Redactor::check_extra(&[extra("fine", &["k"], "k=[a-z]+")]).is_ok());
    }

    #[test]
    fn extras_matching_the_empty_string_or_everything_are_refused_by_name() {
        for regex in ["x*", "(?:token=)?", "\\b", "(?P<secret>[0-9]*)"] {
            let bad = [extra("greedy-one", &["x"], regex)];
            for err in [
                Redactor::check_extra(&bad).unwrap_err(),
                Redactor::new(&bad).unwrap_err(),
            ] {
                assert!(
                    matches!(&err, RedactError::MatchesEmpty { name } if name == "greedy-one"),
                    "{regex}: {err:?}"
                );
                assert!(err.to_string().contains("\"greedy-one\""), "{err}");
            }
        }
        for regex in [".+", "(?s).+", "[\\s\\S]", "[^⟦]+", "."] {
            let bad = [extra("takes-all", &[], regex)];
            let err = Redactor::check_extra(&bad).unwrap_err();
            assert!(
                matches!(&err, RedactError::MatchesEverything { name } if name == "takes-all"),
                "{regex}: {err:?}"
            );
            assert!(err.to_string().contains("\"takes-all\""), "{err}");
        }
        // Ordinary patterns, even broad ones, pass.
        for regex in ["myt_[A-Za-z0-9]{20,}", "[a-z]+", "\\w+", "[0-9]{6}"] {
            assert!(
                Redactor::check_extra(&[extra("fine", &[], regex)]).is_ok(),
                "{regex}"
            );
        }
    }

    #[test]
    fn a_config_without_patterns_shares_the_one_built_in_redactor() {
        let a = ConfigRedactor::new(&[]).unwrap();
        let b = ConfigRedactor::new(&[]).unwrap();
        assert!(std::ptr::eq(&*a, &*b));
        assert!(std::ptr::eq(&*a, built_in().unwrap()));
        let own =
            ConfigRedactor::new(&[extra("mine", &["zz"], "zz=(?P<secret>[0-9]{6})")]).unwrap();
        assert!(matches!(own, ConfigRedactor::Own(_)));
        let mut counts = RedactionCounts::default();
        let out = own.redact("zz=123456", &mut counts).into_inner();
        assert!(!out.contains("123456"), "{out}");
    }

    #[test]
    fn extras_never_rewrite_a_marker() {
        let extras = [extra(
            "hashes",
            &["sha256="],
            r"sha256=(?P<secret>[0-9a-f]{8})",
        )];
        let existing = marker(b"x");
        let (out, counts) = run_with(&extras, &format!("{existing} sha256=deadbeef"));
        assert_eq!(out, format!("{existing} sha256={}", marker(b"deadbeef")));
        assert_eq!(counts.total(), 1);
    }

    // ---- JSON ----

    #[test]
    fn redact_json_redacts_string_values_keeps_keys_and_numbers() {
        let value = serde_json::json!({
            "seq": 12,
            "ratio": 0.5,
            "ok": true,
            "none": null,
            "AKIAIOSFODNN7EXAMPLE": "key kept",
            "content": [{"text": "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"}, "plain", 7],
            "headers": {"Authorization": format!("Bearer {JWT}")},
        });
        let mut counts = RedactionCounts::default();
        let out = redactor().redact_json(&value, &mut counts).into_inner();
        let reparsed: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&out).unwrap()).unwrap();
        assert_eq!(reparsed, out);
        assert_eq!(out["seq"], 12);
        assert_eq!(out["ratio"], 0.5);
        assert_eq!(out["ok"], true);
        assert!(out["none"].is_null());
        assert_eq!(out["AKIAIOSFODNN7EXAMPLE"], "key kept");
        let akia = marker(b"AKIAIOSFODNN7EXAMPLE");
        assert_eq!(
            out["content"][0]["text"],
            format!("export AWS_ACCESS_KEY_ID={akia}")
        );
        assert_eq!(out["content"][1], "plain");
        assert_eq!(out["content"][2], 7);
        assert_eq!(
            out["headers"]["Authorization"],
            format!("Bearer {}", marker(JWT.as_bytes()))
        );
        assert_eq!(counts.total(), 2);
        assert_eq!(
            redactor()
                .redact_json(&serde_json::json!(5), &mut counts)
                .into_inner(),
            5
        );
    }

    #[test]
    fn redact_json_survives_nesting_deeper_than_the_call_stack() {
        // Built, walked and dropped on a thread with room for serde_json's recursive drop;
        // the redaction itself never recurses.
        let worker = std::thread::Builder::new().stack_size(256 << 20).spawn(|| {
            use serde_json::Value;
            let depth = 200_000;
            let mut value = serde_json::json!({"k": "AKIAIOSFODNN7EXAMPLE"});
            for i in 0..depth {
                // Not `json!`, which re-serialises an expression (quadratic here).
                value = if i % 2 == 0 {
                    Value::Array(vec![value])
                } else {
                    Value::Object(serde_json::Map::from_iter([("n".to_owned(), value)]))
                };
            }
            let mut counts = RedactionCounts::default();
            let out = redactor().redact_json(&value, &mut counts).into_inner();
            assert_eq!(counts.total(), 1);
            let mut inner = &out;
            for i in (0..depth).rev() {
                inner = if i % 2 == 0 { &inner[0] } else { &inner["n"] };
            }
            assert_eq!(inner["k"], marker(b"AKIAIOSFODNN7EXAMPLE"));
        });
        worker.unwrap().join().unwrap();
    }

    // ---- properties ----

    fn corpus() -> Vec<String> {
        let mut texts: Vec<String> = vec![
            "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE\n".into(),
            format!("aws_secret_access_key = {AWS_SECRET}"),
            format!("ghp_{} and github_pat_{}", token(36, 70), token(40, 71)),
            format!("sk-proj-{} sk-{}", token(60, 72), token(48, 73)),
            format!("sk_live_{} whsec_{}", token(30, 74), token(32, 75)),
            format!(
                "xoxb-1-{} https://hooks.slack.com/services/T1/B2/{}",
                token(30, 76),
                token(24, 77)
            ),
            format!(
                "AIza{} glpat-{} npm_{}",
                token(35, 78),
                token(20, 79),
                token(36, 80)
            ),
            format!("Authorization: Bearer {JWT}"),
            format!("Authorization: Bearer {}", token(40, 81)),
            "postgres://admin:s3cr3t@db/app https://u:p@ss@h/".into(),
            "https://api.example.com/v1?token=abc123&api_key=def456&password=hunter2".into(),
            "Server=db;User Id=sa;Password=Sup3r!;Pwd=x1;".into(),
            format!(
                "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
                pem_body("\n")
            ),
            format!(
                "-----BEGIN RSA PRIVATE KEY-----\n{}\n(truncated)",
                pem_body("\n")
            ),
            format!("https://u:ghp_{}@github.com/o/r", token(36, 82)),
            format!("?token=Bearer {}&x=AKIAIOSFODNN7EXAMPLE", token(30, 83)),
            format!("{}{}", marker(b"x"), "?token=abc"),
            format!("?token={}&password={};", marker(b"a"), marker(b"b")),
            format!(
                "https://u:{}@host Bearer {} Password={};",
                marker(b"c"),
                marker(b"d"),
                marker(b"e")
            ),
            "plain prose without anything to hide, but with = signs and :// and eyJ".into(),
        ];
        let joined = texts.join("\n");
        texts.push(joined);
        texts
    }

    #[test]
    fn redaction_is_idempotent() {
        for text in corpus() {
            let (once, _) = run(&text);
            let (twice, counts) = run(&once);
            assert_eq!(twice, once, "input: {text:?}");
            assert_eq!(counts.total(), 0, "{counts:?} on second pass of {text:?}");
        }
    }

    #[test]
    fn markers_alone_are_never_matched() {
        let m = marker(b"secret");
        for text in [
            m.clone(),
            format!("?token={m}"),
            format!("Bearer {m}"),
            format!("https://u:{m}@host"),
            format!("Password={m};"),
            format!("aws_secret_access_key = {m}"),
            format!("{m}{m}{m}"),
        ] {
            assert_untouched(&text);
        }
    }

    #[test]
    fn text_without_keywords_is_returned_byte_identical() {
        let prose =
            "Refactored the parser; tests pass. Next: wire the CLI flags and update the README.\n\
                     fn main() { let x = vec![1, 2, 3]; println!(\"{x:?}\"); }\n\
                     日本語のテキストと絵文字 🔑✓ — and tabs\there.\n";
        assert_untouched(prose);
        assert_untouched(&prose.repeat(1000));
        assert_untouched("");
    }

    #[test]
    fn counts_name_rules_never_values() {
        let (_, counts) = run("AKIAIOSFODNN7EXAMPLE ?token=hunter2");
        let debug = format!("{counts:?}");
        assert!(
            !debug.contains("AKIAIOSFODNN7EXAMPLE") && !debug.contains("hunter2"),
            "{debug}"
        );
        assert_eq!(
            counts.by_rule.keys().collect::<Vec<_>>(),
            ["aws_access_key_id", "url_query_secret"]
        );
        let mut total = RedactionCounts::default();
        total.add(&counts);
        total.add(&counts);
        assert_eq!(total.total(), 4);
    }

    #[test]
    fn overlaps_resolve_to_one_secret() {
        let ghp = format!("ghp_{}", token(36, 90));
        let (out, counts) = run(&format!("https://x-token:{ghp}@github.com/o/r"));
        assert_eq!(
            out,
            format!("https://x-token:{}@github.com/o/r", marker(ghp.as_bytes()))
        );
        assert_eq!(counts.total(), 1);
    }

    // ---- UTF-8 and hostile input ----

    #[test]
    fn windows_cut_at_char_boundaries() {
        // A value longer than the rule's reach, made of multibyte characters: cut, not split.
        let text = format!("?token={}", "é".repeat(3000));
        let (out, counts) = run(&text);
        assert!(
            out.starts_with("?token=⟦redacted:credential"),
            "{}",
            &out[..40]
        );
        assert_eq!(counts.total(), 1);
        for text in [
            "sk-é".repeat(5000),
            "eyJé".repeat(5000),
            "://é:é@".repeat(3000),
            "Bearer 🔑".repeat(3000),
        ] {
            let (out, _) = run(&text);
            assert_eq!(run(&out).0, out);
        }
    }

    #[test]
    fn hostile_inputs_finish() {
        // Each would be quadratic with per-hit searches to the end of a window; none is.
        assert_untouched(&"a".repeat(4 << 20));
        assert_untouched(&"eyJ".repeat(500_000));
        assert_untouched(&"-----BEGIN RSA PRIVATE KEY-----".repeat(50_000));
        assert_untouched(&"-----BEGIN RSA PRIVATE KEY-----\n".repeat(50_000));
        assert_untouched(&"key=".repeat(300_000));
        assert_untouched(&"://".repeat(300_000));
        assert_untouched(&"pwd ".repeat(300_000));
        for text in [
            "?token=".repeat(100_000),
            "sk-".repeat(300_000),
            "Bearer ".repeat(100_000),
            "ghp_".repeat(300_000),
        ] {
            let (out, _) = run(&text);
            assert!(out.len() <= text.len());
        }
        // The `:` pass and the new keyword rules, densely: they finish (output unchecked).
        for text in [
            "password: ".repeat(200_000),
            "\"token\": ".repeat(200_000),
            "mysql -p ".repeat(200_000),
            "Authorization: ".repeat(100_000),
            "--password ".repeat(200_000),
            "key-".repeat(300_000),
        ] {
            let _ = run(&text);
        }
        let unterminated = format!("-----BEGIN RSA PRIVATE KEY-----\n{}", "A".repeat(2 << 20));
        let (out, counts) = run(&unterminated);
        assert_eq!(counts.total(), 1);
        assert!(out.starts_with(MARKER_PREFIX));
        // The block stops 128 KiB after its BEGIN line; the rest is left as it was.
        let begin_line_end = unterminated.find('\n').unwrap();
        assert_eq!(
            out.len(),
            unterminated.len() - (begin_line_end + rules::PEM_LIMIT) + marker(b"").len()
        );
    }

    #[test]
    fn built_ins_compile_and_debug_names_rules() {
        let debug = format!("{:?}", redactor());
        assert!(
            debug.contains("pem_private_key") && debug.contains("url_password"),
            "{debug}"
        );
        let groups = redactor().keyword_groups();
        assert_eq!(groups.len(), 3);
        assert_eq!(groups[2], ["bearer".to_owned()]);
        assert!(
            groups[0].iter().all(|k| k.len() >= SHORT_KEYWORD),
            "{groups:?}"
        );
        assert!(groups[1].iter().any(|k| k == "eyJ"));
        assert!(groups.iter().all(|group| group.len() <= 64), "{groups:?}");
    }
}

//! Redaction throughput on one core: `Redactor::redact` against (b) the keyword prefilter
//! alone and (c) the original plugin's approach, one alternation of its eight patterns run
//! with `replace_all` over the whole text. Run: `cargo bench --bench redact`.
//!
//! The corpus is generated deterministically (own xorshift): session-like JSON lines, code,
//! tool output and prose, with URLs, `key=` arguments and look-alikes (`task-list`,
//! "bearer token", `?page=`), and one planted secret every ~20 KB. The main corpus has
//! about one look-alike word per 150 prose words; a stress corpus has one per 6. Hostile
//! inputs follow, for the linear-time claim.
//!
//! Then recall and precision on the redaction corpus of issue #13
//! (`tests/it/redaction_corpus/cases.rs`, the same bytes the test measures), beside gitleaks'
//! own on the same corpus written to files, per kind: gitleaks is taken from `PATH`, else
//! Debian trixie's package is downloaded (`apt-get download` with a private source list,
//! lists and cache under `target/gitleaks/`, nothing installed into the system) and
//! unpacked there with `dpkg-deb -x`. `REDACT_BENCH_NO_GITLEAKS=1` skips it;
//! `REDACT_BENCH_CORPUS_ONLY=1` runs only the corpus comparison. Never part of `cargo test`.

#[path = "../tests/it/redaction_corpus/cases.rs"]
mod cases;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use aho_corasick::{AhoCorasick, MatchKind};
use dsh_chapters::redact::{marker, RedactionCounts, Redactor, MARKER_PREFIX as MARKER_START};

const CORPUS_BYTES: usize = 64 << 20;
const SECRET_EVERY: usize = 20_000;
const RUNS: usize = 3;

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    fn token(&mut self, len: usize, alphabet: &[u8]) -> String {
        (0..len)
            .map(|_| char::from(alphabet[self.below(alphabet.len())]))
            .collect()
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const UPPER_DIGITS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

const WORDS: &[&str] = &[
    "the",
    "parser",
    "returns",
    "an",
    "error",
    "when",
    "input",
    "is",
    "truncated",
    "so",
    "we",
    "retry",
    "with",
    "a",
    "smaller",
    "window",
    "and",
    "then",
    "check",
    "tests",
    "pass",
    "count",
    "budget",
    "model",
    "context",
    "session",
    "chapter",
    "ledger",
    "append",
    "only",
    "file",
    "résumé",
    "naïve",
    "café",
    "🔑",
    "✓",
    "function",
    "module",
    "struct",
    "field",
    "value",
    "config",
    "build",
    "release",
    "cargo",
    "clippy",
    "warning",
    "fixed",
    "issue",
    "I",
    "will",
    "now",
    "run",
    "look",
    "at",
    "this",
    "that",
    "it",
    "to",
    "of",
    "in",
    "for",
];

/// Words that wake a rule, or nearly match one, without being a secret.
const LOOK_ALIKES: &[&str] = &[
    "task-list",
    "desk-lamp",
    "risk-free",
    "ask-user",
    "flask-login",
    "bearer",
    "Bearer",
    "token",
    "secret",
    "password",
    "key",
    "pwd",
    "eyJ",
    "AKIA",
    "ghp_x",
    "xoxo",
    "hf_model",
    "SG.",
    "npm_config",
    "PRIVATE KEY",
    "https://example.com",
    "?page=2",
    "key=len",
];

const CODE: &[&str] = &[
    "    let value = map.get(&key).cloned().unwrap_or_default();\n",
    "    items.sort_by_key(|item| item.seq);\n",
    "def load(path):\n    return sorted(entries, key=len)\n",
    "    const res = await fetch(`https://api.example.com/v1/items?page=${page}&limit=50`);\n",
    "    password = getpass.getpass(\"DB password: \")\n",
    "    if let Some(token) = tokens.next() { out.push(token); }\n",
    "    headers = {\"Accept\": \"application/json\", \"User-Agent\": \"cli/1.0\"}\n",
    "    url = \"https://github.com/org/repo/blob/main/src/lib.rs#L42\"\n",
    "    logger.info(\"connected to %s\", host)  # see https://docs.python.org/3/\n",
    "    return {\"key\": name, \"value\": data[\"value\"], \"ok\": True}\n",
    "    cfg.redaction.patterns.push(ExtraPattern { name, keywords, regex });\n",
    "    <a href=\"https://example.com/docs?lang=en&section=auth\">docs</a>\n",
];

const TOOL: &[&str] = &[
    "$ pwd\n/home/dev/project\n",
    "$ git log --oneline -3\n3f2a1c9 fix: window cut at char boundary\n9b8e7d6 feat: ledger append\n",
    "$ ls -la\n-rw-r--r-- 1 dev dev  4096 Jan  1 12:00 Cargo.toml\ndrwxr-xr-x 2 dev dev  4096 Jan  1 12:00 src\n",
    "| name | status |\n|------|--------|\n| parse | ok |\n| render | ok |\n",
    "error[E0502]: cannot borrow `self.items` as mutable because it is also borrowed as immutable\n",
    "Downloaded https://static.crates.io/crates/regex/regex-1.11.0.crate (253 KB)\n",
    "npm WARN deprecated inflight@1.0.6: This module is not supported\n",
    "test redact::tests::jwts ... ok\ntest redact::tests::bearer_tokens_keep_the_word ... ok\n",
];

fn prose(rng: &mut XorShift, words: usize, look_alike_every: usize) -> String {
    let mut out = String::new();
    for i in 0..words {
        if i > 0 {
            out.push(' ');
        }
        let word = if rng.below(look_alike_every) == 0 {
            rng.pick(LOOK_ALIKES)
        } else {
            rng.pick(WORDS)
        };
        out.push_str(word);
    }
    out.push('.');
    out
}

fn secret(rng: &mut XorShift) -> String {
    match rng.below(14) {
        0 => format!("AKIA{}", rng.token(16, UPPER_DIGITS)),
        1 => format!("ghp_{}", rng.token(36, ALNUM)),
        2 => format!("sk-proj-{}", rng.token(64, B64URL)),
        3 => format!(
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ{}.{}",
            rng.token(80, B64URL),
            rng.token(43, B64URL)
        ),
        4 => {
            let lines: Vec<String> = (0..25).map(|_| rng.token(64, B64)).collect();
            format!(
                "-----BEGIN RSA PRIVATE KEY-----\\n{}\\n-----END RSA PRIVATE KEY-----",
                lines.join("\\n")
            )
        }
        5 => format!(
            "postgres://app:{}@db.internal:5432/app",
            rng.token(20, ALNUM)
        ),
        6 => format!("Authorization: Bearer {}", rng.token(40, ALNUM)),
        7 => format!(
            "https://api.example.com/v2/export?format=csv&token={}",
            rng.token(32, ALNUM)
        ),
        8 => format!(
            "xoxb-{}-{}",
            rng.token(12, b"0123456789"),
            rng.token(24, ALNUM)
        ),
        9 => format!("sk_live_{}", rng.token(32, ALNUM)),
        10 => format!("AIza{}", rng.token(35, B64URL)),
        11 => format!(
            "Server=db;Database=app;User Id=sa;Password={};",
            rng.token(16, ALNUM)
        ),
        12 => format!("aws_secret_access_key = {}", rng.token(40, B64)),
        _ => format!("glpat-{}", rng.token(20, ALNUM)),
    }
}

/// Session-like text; returns it with the number of secrets planted.
fn corpus(bytes: usize, seed: u64, look_alike_every: usize) -> (String, usize) {
    let mut rng = XorShift(seed);
    let mut text = String::with_capacity(bytes + 4096);
    let mut planted = 0;
    let mut next_secret = SECRET_EVERY / 2;
    let mut seq = 0u64;
    while text.len() < bytes {
        seq += 1;
        let body = match rng.below(10) {
            0..=3 => {
                let words = 20 + rng.below(60);
                prose(&mut rng, words, look_alike_every)
            }
            4..=6 => {
                let lines = 1 + rng.below(6);
                (0..lines).map(|_| rng.pick(CODE)).collect::<String>()
            }
            _ => rng.pick(TOOL).to_owned(),
        };
        let mut body = body
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        if text.len() >= next_secret {
            body.push_str(" here: ");
            body.push_str(&secret(&mut rng));
            planted += 1;
            next_secret = text.len() + SECRET_EVERY / 2 + rng.below(SECRET_EVERY);
        }
        let role = rng.pick(&["user", "assistant", "tool"]);
        text.push_str(&format!(
            "{{\"seq\":{seq},\"ts\":\"2025-03-01T12:{:02}:{:02}Z\",\"role\":\"{role}\",\"content\":\"{body}\"}}\n",
            rng.below(60),
            rng.below(60)
        ));
    }
    (text, planted)
}

/// Best of `RUNS`; the closure's result is kept from the last run.
fn best<T>(mut run: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = black_box(run());
        best = best.min(start.elapsed());
        last = Some(out);
    }
    (best, last.expect("RUNS > 0"))
}

fn mib_per_s(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / took.as_secs_f64()
}

/// The original plugin's eight patterns as one alternation.
const ORIGINAL: &str = concat!(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    r"|AKIA[0-9A-Z]{16}",
    r"|(?:ghp|gho|ghs|ghu)_[A-Za-z0-9]{16,}",
    r"|github_pat_[A-Za-z0-9_]{16,}",
    r"|sk-[A-Za-z0-9_-]{16,}",
    r"|eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+",
    r"|Bearer [A-Za-z0-9._~+/=-]{16,}",
    r"|[?&](?:token|api[_-]?key|apikey|key|secret|password)=[^&\s]+",
);

fn main() {
    let redactor = Redactor::new(&[]).expect("built-in rules compile");
    if std::env::var_os("REDACT_BENCH_CORPUS_ONLY").is_some() {
        corpus_recall(&redactor);
        return;
    }
    let original = regex::Regex::new(ORIGINAL).expect("original patterns compile");
    let naive = |text: &str| {
        original
            .replace_all(text, |caps: &regex::Captures<'_>| {
                marker(caps[0].as_bytes())
            })
            .into_owned()
    };
    let ours = |text: &str| {
        let mut counts = RedactionCounts::default();
        let out = redactor.redact(text, &mut counts).into_inner();
        (out, counts)
    };

    let (text, planted) = corpus(CORPUS_BYTES, 0x5eed_cafe_f00d_d00d, 150);
    let len = text.len();
    let per_mib = |count: usize| count as f64 * 1048576.0 / len as f64;

    let groups = redactor.keyword_groups();
    let all: Vec<&String> = groups.iter().flat_map(|group| group.iter()).collect();
    let prefilter = AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(&all)
        .expect("keywords compile");
    let automata: Vec<AhoCorasick> = groups
        .iter()
        .map(|group| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(*group)
                .expect("keywords compile")
        })
        .collect();
    let equals = memchr::memchr_iter(b'=', text.as_bytes()).count();
    println!(
        "corpus: {:.1} MiB session-like text, {planted} planted secrets (one per ~{} KB); per MiB: {:.0} keyword hits, {:.0} '='",
        len as f64 / 1048576.0,
        SECRET_EVERY / 1000,
        per_mib(prefilter.find_iter(&text).count()),
        per_mib(equals),
    );

    let (ours_took, (out, counts)) = best(|| ours(&text));
    println!(
        "(a)  Redactor::redact        {:>6.0} MiB/s  {} redactions {:?}",
        mib_per_s(len, ours_took),
        counts.total(),
        counts.by_rule
    );

    let (only, hits) = best(|| prefilter.find_iter(&text).count());
    println!("(b)  prefilter only          {:>6.0} MiB/s  find_iter over all {} keywords in one automaton ({hits} hits)", mib_per_s(len, only), all.len());
    let (passes, hits) = best(|| {
        let keyword_hits: usize = automata
            .iter()
            .map(|automaton| automaton.find_iter(&text).count())
            .sum();
        keyword_hits + memchr::memchr_iter(b'=', text.as_bytes()).count()
    });
    println!(
        "(b') our prefilter passes     {:>6.0} MiB/s  automata of {:?} keywords + memchr '=' ({hits} hits)",
        mib_per_s(len, passes),
        groups.iter().map(|group| group.len()).collect::<Vec<_>>()
    );

    let (naive_took, naive_out) = best(|| naive(&text));
    println!(
        "(c)  original alternation    {:>6.0} MiB/s  {} redactions (its eight patterns, one regex, replace_all)",
        mib_per_s(len, naive_took),
        naive_out.matches(MARKER_START).count()
    );

    let (copy, _) = best(|| text.clone());
    let (scan, _) = best(|| memchr::memchr_iter(0x01, text.as_bytes()).count());
    println!(
        "     for scale: String clone {:>6.0} MiB/s, memchr scan {:.0} MiB/s",
        mib_per_s(len, copy),
        mib_per_s(len, scan)
    );
    println!(
        "side by side: Redactor::redact {:.0} MiB/s, String clone of the same bytes {:.0} MiB/s: ours/clone = {:.2} (goal: ours >= 300 MiB/s)",
        mib_per_s(len, ours_took),
        mib_per_s(len, copy),
        copy.as_secs_f64() / ours_took.as_secs_f64()
    );
    println!(
        "ratios (throughput): ours/prefilter = {:.2}, ours/our-prefilter-passes = {:.2}, ours/naive = {:.2}",
        only.as_secs_f64() / ours_took.as_secs_f64(),
        passes.as_secs_f64() / ours_took.as_secs_f64(),
        naive_took.as_secs_f64() / ours_took.as_secs_f64()
    );
    let mut again = RedactionCounts::default();
    let idempotent = redactor.redact(&out, &mut again).into_inner() == out && again.total() == 0;
    println!(
        "all planted secrets found: {}; idempotent on the corpus: {idempotent}",
        counts.total() as usize == planted
    );
    drop((out, naive_out));

    let (stress, _) = corpus(CORPUS_BYTES, 0xbad_5eed, 6);
    let (stress_ours, _) = best(|| ours(&stress));
    let (stress_naive, _) = best(|| naive(&stress));
    let stress_hits = prefilter.find_iter(&stress).count() as f64 * 1048576.0 / stress.len() as f64;
    println!(
        "stress corpus (look-alike every 6th prose word, {stress_hits:.0} keyword hits per MiB): ours {:.0} MiB/s, naive {:.0} MiB/s",
        mib_per_s(stress.len(), stress_ours),
        mib_per_s(stress.len(), stress_naive)
    );
    drop(stress);

    let plain: String = {
        let mut rng = XorShift(7);
        let mut plain = String::with_capacity(CORPUS_BYTES);
        while plain.len() < CORPUS_BYTES {
            plain.push_str(rng.pick(WORDS));
            plain.push(if rng.below(12) == 0 { '\n' } else { ' ' });
        }
        plain
    };
    let (quiet, _) = best(|| ours(&plain));
    let (quiet_passes, _) = best(|| {
        let keyword_hits: usize = automata
            .iter()
            .map(|automaton| automaton.find_iter(&plain).count())
            .sum();
        keyword_hits + memchr::memchr_iter(b'=', plain.as_bytes()).count()
    });
    let (quiet_copy, _) = best(|| plain.clone());
    println!(
        "no-keyword prose: ours {:.0} MiB/s (its prefilter passes {:.0} MiB/s, String clone {:.0} MiB/s)",
        mib_per_s(plain.len(), quiet),
        mib_per_s(plain.len(), quiet_passes),
        mib_per_s(plain.len(), quiet_copy)
    );
    drop(plain);

    println!("hostile inputs ({} MiB each, one run):", CORPUS_BYTES >> 20);
    for (name, unit) in [
        ("'a' × n", "a"),
        ("eyJ × n", "eyJ"),
        ("BEGIN without END", "-----BEGIN RSA PRIVATE KEY-----\n"),
        ("key= × n", "key="),
        ("?token= × n", "?token="),
        (":// × n", "://"),
        ("sk- × n", "sk-"),
        ("Bearer × n", "Bearer "),
        ("password: × n", "password: "),
        ("\"token\": × n", "\"token\": "),
        ("mysql -p × n", "mysql -p "),
    ] {
        let hostile = unit.repeat(CORPUS_BYTES / unit.len());
        let start = Instant::now();
        let (_, counts) = black_box(ours(&hostile));
        let took = start.elapsed();
        println!(
            "     {name:<20} {:>6.0} MiB/s  ({} redactions)",
            mib_per_s(hostile.len(), took),
            counts.total()
        );
    }
    corpus_recall(&redactor);
}

/// Per kind: (cases, hits).
type PerKind = BTreeMap<&'static str, (usize, usize)>;

/// Recall and look-alike rate on the issue-13 corpus: ours, then gitleaks' on the same
/// cases, overall and per kind, side by side.
fn corpus_recall(redactor: &Redactor) {
    let secrets = cases::secrets();
    let look_alikes = cases::look_alikes();
    let start = Instant::now();
    let mut ours_secrets = PerKind::new();
    for case in &secrets {
        let out = redactor
            .redact(&case.text, &mut RedactionCounts::default())
            .into_inner();
        let entry = ours_secrets.entry(case.kind).or_default();
        entry.0 += 1;
        entry.1 += usize::from(cases::survives(&case.secret, &out).is_none());
    }
    let mut ours_looks = PerKind::new();
    for look in &look_alikes {
        let out = redactor
            .redact(&look.text, &mut RedactionCounts::default())
            .into_inner();
        let entry = ours_looks.entry(look.kind).or_default();
        entry.0 += 1;
        entry.1 += usize::from(out != look.text);
    }
    let took = start.elapsed();
    println!(
        "corpus (issue #13): {} secrets over {} kinds, {} look-alikes over {} kinds",
        secrets.len(),
        ours_secrets.len(),
        look_alikes.len(),
        ours_looks.len()
    );
    let total = |per: &PerKind| per.values().fold((0, 0), |(c, h), (n, k)| (c + n, h + k));
    let line = |who: &str, secrets: &PerKind, looks: &PerKind| {
        let (cases, found) = total(secrets);
        let (n, touched) = total(looks);
        println!(
            "     {who:<9} recall {:.4} ({found}/{cases}), look-alikes touched {:.2} % ({touched}/{n})",
            found as f64 / cases as f64,
            touched as f64 * 100.0 / n as f64,
        );
    };
    line("ours:", &ours_secrets, &ours_looks);
    println!("     (ours in {:.1} ms)", took.as_secs_f64() * 1000.0);
    let theirs = if std::env::var_os("REDACT_BENCH_NO_GITLEAKS").is_some() {
        println!("     gitleaks: skipped (REDACT_BENCH_NO_GITLEAKS)");
        None
    } else {
        gitleaks().and_then(|(gitleaks, version)| {
            match run_gitleaks(&gitleaks, &secrets, &look_alikes) {
                Ok(per) => {
                    line(&format!("gitleaks {version}:"), &per.0, &per.1);
                    Some(per)
                }
                Err(why) => {
                    println!("     gitleaks: could not be run on the corpus: {why}");
                    None
                }
            }
        })
    };
    let rate = |per: &PerKind, kind: &str| {
        per.get(kind).map_or("—".to_owned(), |(n, hit)| {
            format!("{:.2} ({hit}/{n})", *hit as f64 / *n as f64)
        })
    };
    println!("recall per kind (secret redacted / found):");
    println!("     {:<34} {:>14} {:>14}", "kind", "ours", "gitleaks");
    for kind in ours_secrets.keys() {
        let gl = theirs.as_ref().map_or("—".to_owned(), |t| rate(&t.0, kind));
        println!("     {kind:<34} {:>14} {gl:>14}", rate(&ours_secrets, kind));
    }
    println!("look-alike rate per kind (touched / flagged; goal ≤ 1 % overall):");
    println!("     {:<34} {:>14} {:>14}", "kind", "ours", "gitleaks");
    for kind in ours_looks.keys() {
        let gl = theirs.as_ref().map_or("—".to_owned(), |t| rate(&t.1, kind));
        println!("     {kind:<34} {:>14} {gl:>14}", rate(&ours_looks, kind));
    }
}

/// The gitleaks program and its version: on `PATH`, else Debian trixie's package fetched
/// and unpacked under `target/gitleaks/` (bookworm has none; nothing is installed into the
/// system).
fn gitleaks() -> Option<(PathBuf, String)> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("gitleaks"))
            .find(|candidate| candidate.is_file())
    });
    let program = match on_path {
        Some(found) => found,
        None => match fetch_gitleaks() {
            Ok(path) => path,
            Err(why) => {
                println!("     gitleaks: not available ({why}); no comparison");
                return None;
            }
        },
    };
    // Debian's build prints no version; the package file names it.
    let fetched = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/gitleaks/version");
    let version = std::fs::read_to_string(&fetched)
        .ok()
        .filter(|_| program.starts_with(Path::new(env!("CARGO_MANIFEST_DIR")).join("target")))
        .unwrap_or_else(|| {
            Command::new(&program)
                .arg("version")
                .output()
                .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
                .unwrap_or_default()
        });
    Some((program, version))
}

/// `apt-get download gitleaks` from Debian trixie with a private source list, lists and
/// cache, then `dpkg-deb -x`: `target/gitleaks/root/usr/bin/gitleaks`.
fn fetch_gitleaks() -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/gitleaks");
    let program = dir.join("root/usr/bin/gitleaks");
    if program.is_file() {
        return Ok(program);
    }
    for sub in ["lists/partial", "cache/archives/partial", "deb"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
    }
    let sources = dir.join("sources.list");
    std::fs::write(
        &sources,
        "deb [trusted=yes] http://deb.debian.org/debian trixie main\n",
    )
    .map_err(|e| e.to_string())?;
    let options = [
        format!("Dir::Etc::SourceList={}", sources.display()),
        "Dir::Etc::SourceParts=/dev/null".to_owned(),
        format!("Dir::State::Lists={}", dir.join("lists").display()),
        format!("Dir::Cache={}", dir.join("cache").display()),
    ];
    let apt = |args: &[&str], cwd: &Path| {
        let mut cmd = Command::new("apt-get");
        cmd.arg("-q");
        for option in &options {
            cmd.arg("-o").arg(option);
        }
        cmd.args(args).current_dir(cwd);
        match cmd.output() {
            Ok(out) if out.status.success() => Ok(()),
            Ok(out) => Err(format!(
                "apt-get {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Err(format!("apt-get: {e}")),
        }
    };
    println!("     gitleaks: fetching Debian trixie's package (apt-get download, not installed)");
    apt(&["update"], &dir)?;
    apt(&["download", "gitleaks"], &dir.join("deb"))?;
    let deb = std::fs::read_dir(dir.join("deb"))
        .map_err(|e| e.to_string())?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .ok_or("apt-get download left no .deb")?;
    let unpacked = Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(dir.join("root"))
        .status()
        .map_err(|e| format!("dpkg-deb: {e}"))?;
    if !unpacked.success() || !program.is_file() {
        return Err(format!(
            "dpkg-deb -x {} gave no usr/bin/gitleaks",
            deb.display()
        ));
    }
    let name = deb
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let version = name.split('_').nth(1).unwrap_or("?").replace("%2b", "+");
    std::fs::write(dir.join("version"), format!("{version} (Debian trixie)"))
        .map_err(|e| e.to_string())?;
    Ok(program)
}

/// Writes one file per case, runs `gitleaks detect --no-git` (or `gitleaks dir` for newer
/// versions) with a JSON report, and counts a secret found when a finding in its file shares
/// an 8-character piece with it; a look-alike counts when any finding is in its file.
/// Returns (secrets, look-alikes) per kind.
fn run_gitleaks(
    gitleaks: &Path,
    secrets: &[cases::Case],
    look_alikes: &[cases::LookAlike],
) -> Result<(PerKind, PerKind), String> {
    let dir = std::env::temp_dir().join(format!("redact-bench-gitleaks-{}", std::process::id()));
    let files = dir.join("corpus");
    std::fs::create_dir_all(&files).map_err(|e| e.to_string())?;
    for (i, case) in secrets.iter().enumerate() {
        std::fs::write(files.join(format!("secret-{i:04}.txt")), &case.text)
            .map_err(|e| e.to_string())?;
    }
    for (i, look) in look_alikes.iter().enumerate() {
        std::fs::write(files.join(format!("look-{i:04}.txt")), &look.text)
            .map_err(|e| e.to_string())?;
    }
    let report = dir.join("report.json");
    let run = |args: &[&str]| {
        Command::new(gitleaks)
            .args(args)
            .args(["--report-format", "json", "--report-path"])
            .arg(&report)
            .args(["--no-banner", "--exit-code", "0"])
            .output()
    };
    let files_arg = files.to_string_lossy().into_owned();
    let mut out =
        run(&["detect", "--no-git", "--source", &files_arg]).map_err(|e| e.to_string())?;
    if !out.status.success() {
        out = run(&["dir", &files_arg]).map_err(|e| e.to_string())?;
    }
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let findings: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    let mut by_file: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for finding in findings.as_array().into_iter().flatten() {
        let file = finding["File"].as_str().unwrap_or_default();
        let name = Path::new(file)
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let secret = finding["Secret"].as_str().unwrap_or_default().to_owned();
        let matched = finding["Match"].as_str().unwrap_or_default().to_owned();
        by_file.entry(name).or_default().extend([secret, matched]);
    }
    let mut per_secret = PerKind::new();
    for (i, case) in secrets.iter().enumerate() {
        let hit = by_file
            .get(&format!("secret-{i:04}.txt"))
            .is_some_and(|reported| {
                reported
                    .iter()
                    .any(|text| cases::survives(&case.secret, text).is_some())
            });
        let entry = per_secret.entry(case.kind).or_default();
        entry.0 += 1;
        entry.1 += usize::from(hit);
    }
    let mut per_look = PerKind::new();
    for (i, look) in look_alikes.iter().enumerate() {
        let entry = per_look.entry(look.kind).or_default();
        entry.0 += 1;
        entry.1 += usize::from(by_file.contains_key(&format!("look-{i:04}.txt")));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok((per_secret, per_look))
}

//! Full-text search benchmark (issue 16), side by side in one run:
//! 1. build from scratch: the search table and the SQLite FTS5 cache over N chapters with
//!    realistic bodies (~4 KiB: a person's ask, tool calls with commands and file paths,
//!    compiler and test output with error codes, code read back, the assistant's answer),
//!    in a worker process that reports its peak RSS; the cache's size against the text's;
//! 2. the query path (the library door `search::open` + `answer_packed`, exactly what
//!    `chapters search` runs after reading its config) for a mix of queries — common words,
//!    rare error codes, file names, phrases, prefixes, a filter — p50/p99 and peak RSS in a
//!    fresh worker process; beside it `rg -l -i -F` for the same text over the same files
//!    (what a person would try instead);
//! 3. `+10 chapters` then the read path's update (table refresh + cache update, as the next
//!    search does it) at N vs 1,000 chapters, alternating (the machine is shared).
//!
//! The corpora are generated once into `target/bench-fulltext/` (files shaped exactly like
//! stored chapters, with their signature ledgers) and reused; the derived caches are
//! removed and rebuilt each run. Run: `cargo bench --bench fulltext` (release);
//! `FULLTEXT_BENCH_N` sets N (100,000), `FULLTEXT_BENCH_TRIALS` the +10 trials (7),
//! `FULLTEXT_BENCH_ROUNDS` the rounds of queries (10), `FULLTEXT_BENCH_VERBOSE=1` prints each
//! query's time and matches, `FULLTEXT_BENCH_ONLY=<query>` runs that one query alone (to
//! profile it).
//! `rg` is installed with apt when missing (its absence is said if that fails).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use dsh_chapters::catalog::query::Parsed;
use dsh_chapters::catalog::score::{self, ScoreParams};
use dsh_chapters::search;
use dsh_chapters::store::catalog;

const PK: &str = "0b6e7c42-1b1c-5c1e-9d34-bench0000016";
const PER_ROOT: usize = 100;
const LOCK: Duration = Duration::from_secs(60);
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "gu", "fe", "zo", "hi", "bra",
    "cle", "dro", "sta", "pli", "tru", "mon", "sel", "vin", "tor",
];
const COMMON: &[&str] = &[
    "refresh",
    "token",
    "middleware",
    "expiry",
    "header",
    "exporter",
    "parser",
    "cache",
    "retry",
    "timeout",
    "schema",
    "migration",
    "index",
    "config",
    "socket",
    "daemon",
    "deploy",
    "staging",
    "invoice",
    "billing",
    "render",
    "session",
    "ledger",
    "budget",
    "thread",
];

/// A small deterministic generator (no dependency): xorshift64*.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Skewed toward small indices (a word's frequency falls with its rank).
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((u * u * u) * n as f64) as usize
    }
}

/// The `i`th word of a synthetic vocabulary of ~13,000 words.
fn vocab_word(i: usize) -> String {
    let s = SYLLABLES.len();
    let mut w = String::new();
    w.push_str(SYLLABLES[i % s]);
    w.push_str(SYLLABLES[(i / s) % s]);
    if i >= s * s {
        w.push_str(SYLLABLES[(i / (s * s)) % s]);
    }
    w
}

fn words(rng: &mut Rng, k: usize) -> String {
    (0..k)
        .map(|_| {
            if rng.below(4) == 0 {
                COMMON[rng.below(COMMON.len())].to_owned()
            } else {
                vocab_word(rng.skewed(13_000))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn module(rng: &mut Rng) -> String {
    COMMON[rng.below(COMMON.len())].to_owned()
}

/// One chapter as the store keeps it (frontmatter, then the rendered conversation), ~4 KiB,
/// and the paths its signature names.
fn chapter(rng: &mut Rng, n: usize, root: &str, day_ms: i64) -> (String, Vec<String>) {
    let m = module(rng);
    let f = vocab_word(rng.skewed(3_000));
    let file = format!("src/{m}/{f}.rs");
    let other = format!("src/{}/{}.rs", module(rng), vocab_word(rng.skewed(3_000)));
    let code = format!("E0{:03}", 100 + rng.below(700));
    let title = format!("Fix the {} in {file}: {}", words(rng, 3), words(rng, 4));
    let summary = format!("{} — `cargo test -p {m}` passes.", words(rng, 12));
    let mut topics: Vec<String> = (0..5).map(|_| module(rng)).collect();
    topics.push(f.clone());
    topics.sort();
    topics.dedup();
    let date = dsh_chapters::time::rfc3339_utc(day_ms + (n as i64) * 60_000);
    let seq = (n % PER_ROOT) as u64 * 20;
    let mut body = format!("# {title}\n\n> {summary}\n\n");
    body.push_str(&format!(
        "**User** · seq {seq}\n\n```text\n{} in {file}? {}\n```\n\n",
        words(rng, 25),
        words(rng, 15)
    ));
    body.push_str(&format!(
        "**Assistant** · seq {}\n\n```text\n{}\n```\n\n",
        seq + 1,
        words(rng, 40)
    ));
    body.push_str(&format!(
        "**Tool call** `bash` · `call-{n}a` · seq {}\n\n```json\n{{\"command\":\"cargo test -p {m}\"}}\n```\n\n",
        seq + 2
    ));
    let mut out = String::new();
    for k in 0..6 {
        out.push_str(&format!(
            "error[{code}]: {} `{}`\n  --> {file}:{}:{}\n   |\n{} | {}\n\n",
            words(rng, 6),
            vocab_word(rng.skewed(13_000)),
            10 + k * 7,
            4 + k,
            10 + k * 7,
            words(rng, 8)
        ));
    }
    out.push_str(&format!(
        "test {m}::{f}::case_{:04} ... FAILED\ntest result: FAILED. {} passed; 1 failed\n",
        rng.below(10_000),
        rng.below(200)
    ));
    body.push_str(&format!(
        "**Tool result** `bash` · `call-{n}a` · seq {}\n\n```\n{out}```\n\n",
        seq + 3
    ));
    body.push_str(&format!(
        "**Tool call** `read_file` · `call-{n}b` · seq {}\n\n```json\n{{\"path\":\"{other}\"}}\n```\n\n",
        seq + 4
    ));
    let mut src = String::new();
    for _ in 0..8 {
        src.push_str(&format!(
            "pub fn {}_{}(x: &{}) -> Result<(), Error> {{ {} }}\n",
            vocab_word(rng.skewed(13_000)),
            vocab_word(rng.skewed(13_000)),
            COMMON[rng.below(COMMON.len())],
            words(rng, 5)
        ));
    }
    body.push_str(&format!(
        "**Tool result** `read_file` · `call-{n}b` · seq {}\n\n```\n{src}```\n\n",
        seq + 5
    ));
    body.push_str(&format!(
        "**Assistant** · seq {}\n\n```text\n{}\n```\n",
        seq + 6,
        words(rng, 70)
    ));
    let text = format!(
        "---\ntitle: \"{title}\"\nsummary: \"{summary}\"\nkind: chapter\nprojectKey: \"{PK}\"\nharnessId: bench\nsessionId: {root}\nrootSessionId: {root}\nseqRange: [{seq}, {}]\nturns: [{}]\ndate: \"{date}\"\nmessages: 4\ntokens: 1000\ntopics: [{}]\nartifacts: []\nplans: []\n---\n{body}",
        seq + 6,
        n % PER_ROOT,
        topics.join(", ")
    );
    (text, vec![file, other])
}

fn root_name(root: usize) -> String {
    format!("session-bench-{root:06}")
}

/// Write chapter `number` of `root`, and append its signature line to the root's ledger.
fn write_chapter(ws: &Path, root: usize, number: usize, text: &str, paths: &[String], seq: u64) {
    let r = root_name(root);
    let dir = ws.join(".dsh-chapters").join(&r);
    std::fs::create_dir_all(dir.join("chapters")).expect("mkdir");
    std::fs::create_dir_all(dir.join("collections")).expect("mkdir");
    std::fs::write(
        dir.join("chapters").join(format!("{number:03}-chapter.md")),
        text,
    )
    .expect("write");
    let line = serde_json::json!({
        "v": 1, "at": "2026-01-01T00:00:00Z", "by": "deterministic", "commands": [],
        "paths": paths, "reason": "completed", "seqs": (seq..seq + 7).collect::<Vec<u64>>(),
        "sessionId": r, "size": 1000, "terms": [], "turn": number,
    });
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("collections").join(format!("{r}.jsonl")))
        .expect("ledger");
    writeln!(f, "{line}").expect("append");
}

/// The cached corpus of `n` chapters (written once): its folder and its text's bytes.
fn corpus(n: usize) -> (PathBuf, u64) {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-fulltext")
        .join(format!("corpus-{n}"));
    let done = ws.join(".complete");
    if let Ok(bytes) = std::fs::read_to_string(&done) {
        if let Ok(b) = bytes.trim().parse() {
            return (ws, b);
        }
    }
    let _ = std::fs::remove_dir_all(&ws);
    eprintln!("generating {n} chapters into {} (once)…", ws.display());
    let t = Instant::now();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
    let mut bytes = 0u64;
    for i in 0..n {
        let root = i / PER_ROOT;
        let (text, paths) = chapter(&mut rng, i, &root_name(root), 1_760_000_000_000);
        bytes += text.len() as u64;
        write_chapter(
            &ws,
            root,
            i % PER_ROOT + 1,
            &text,
            &paths,
            (i % PER_ROOT) as u64 * 20,
        );
    }
    std::fs::write(&done, bytes.to_string()).expect("marker");
    eprintln!(
        "  {:.1} s, {:.1} MiB of chapter text",
        t.elapsed().as_secs_f64(),
        bytes as f64 / 1048576.0
    );
    (ws, bytes)
}

fn reset_derived(ws: &Path) {
    let _ = std::fs::remove_dir_all(ws.join(".dsh-chapters/.search"));
    let catalog = catalog::catalog_path(&ws.join(".dsh-chapters"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", catalog.display()));
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .map(|v| v.trim().replace(' ', ""))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The queries: (what a person types, the `rg -F` text for the same thing).
const QUERIES: &[(&str, &str)] = &[
    ("refresh token", "refresh token"),
    ("parser", "parser"),
    ("E0382", "E0382"),
    ("E0599 billing", "E0599"),
    ("kalo", "kalo"),
    ("\"cargo test\" deploy", "cargo test -p deploy"),
    ("middleware expiry timeout", "middleware"),
    ("brasu*", "brasu"),
    ("case_0042", "case_0042"),
    ("invoice -billing", "invoice"),
    ("socket daemon retry", "socket"),
    ("trukasta", "trukasta"),
];

/// This thread's time on a CPU so far, in ns (`/proc/thread-self/schedstat`; 0 where
/// there is none): a query's cost that other processes' load does not stretch, printed
/// beside its wall time.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Worker: the query path for every query `rounds` times in this fresh process.
fn query_worker(ws: &Path, rounds: usize) {
    let mut times = Vec::new();
    let mut total = 0usize;
    // One query alone (to profile it): its text exactly, and no `--path` query.
    let only = std::env::var("FULLTEXT_BENCH_ONLY").ok();
    for _ in 0..rounds {
        for (q, _) in QUERIES {
            if only.as_deref().is_some_and(|o| o != *q) {
                continue;
            }
            let cpu0 = cpu_ns();
            let t = Instant::now();
            let corpus = search::open(ws, PK, false, LOCK).expect("open");
            let opened = t.elapsed();
            let params = ScoreParams {
                curation: corpus.curation.clone(),
                core_rule_bonus: 0.15,
            };
            let now = score::day_start(1_770_000_000_000);
            let answer = corpus
                .answer_packed(&search::Request::text(q, None), &params, "bench", now, 400)
                .expect("search");
            times.push(t.elapsed());
            if std::env::var_os("FULLTEXT_BENCH_VERBOSE").is_some() {
                eprintln!(
                    "{q:>28}: open {:.2} ms, answer {:.2} ms, {} matches, cpu {:.2} ms",
                    opened.as_secs_f64() * 1e3,
                    (t.elapsed() - opened).as_secs_f64() * 1e3,
                    answer.total,
                    (cpu_ns() - cpu0) as f64 / 1e6
                );
            }
            total += answer.total;
        }
        if only.is_some() {
            continue;
        }
        // One filtered query too: a file the signature names.
        let t = Instant::now();
        let corpus = search::open(ws, PK, false, LOCK).expect("open");
        let req = search::Request {
            query: Parsed::parse("error"),
            filters: search::Narrowing {
                path: Some("src/parser/kalo.rs".into()),
                ..search::Narrowing::default()
            },
            ..search::Request::default()
        };
        let answer = corpus
            .answer_packed(&req, &ScoreParams::default(), "bench", 0, 400)
            .expect("search");
        times.push(t.elapsed());
        total += answer.total;
    }
    times.sort();
    let p = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "{:.2} {:.2} {:.2} {} {}",
        p(0.5).as_secs_f64() * 1e3,
        p(0.99).as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        peak_rss(),
        total / rounds
    );
}

/// Worker: build the table and the cache from scratch (one search's open).
fn build_worker(ws: &Path) {
    let t = Instant::now();
    let corpus = search::open(ws, PK, false, LOCK).expect("open");
    println!(
        "{:.1} {} {}",
        t.elapsed().as_secs_f64(),
        peak_rss(),
        corpus.documents
    );
}

fn run_worker(mode: &str, ws: &Path) -> Vec<String> {
    let exe = std::env::current_exe().expect("exe");
    let mut cmd = Command::new(exe);
    cmd.env("FULLTEXT_BENCH_WORKER", mode)
        .env("FULLTEXT_BENCH_WS", ws);
    if std::env::var_os("FULLTEXT_BENCH_VERBOSE").is_some() {
        // Each query's time, as the worker prints it.
        cmd.stderr(std::process::Stdio::inherit());
    }
    let out = cmd.output().expect("worker");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{mode} worker: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.split_whitespace().map(str::to_owned).collect()
}

fn cache_bytes(ws: &Path) -> u64 {
    ["fts.sqlite3", "fts.sqlite3-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(ws.join(".dsh-chapters/.search").join(f)).ok())
        .map(|m| m.len())
        .sum()
}

fn ensure_rg() -> bool {
    let ok = || {
        Command::new("rg")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ok() {
        return true;
    }
    eprintln!("rg missing: apt-get install -y ripgrep");
    let _ = Command::new("apt-get")
        .args(["install", "-y", "-q", "ripgrep"])
        .status();
    ok()
}

/// `rg -l -i -F` for each query's text over the chapters: median per query.
fn rg_median(ws: &Path) -> Option<Duration> {
    if !ensure_rg() {
        return None;
    }
    let mut times = Vec::new();
    for _ in 0..2 {
        for (_, text) in QUERIES {
            let t = Instant::now();
            let out = Command::new("rg")
                .args(["-l", "-i", "-F", "--no-messages", "-g", "*.md", "-e", text])
                .arg(ws.join(".dsh-chapters"))
                .output()
                .expect("rg");
            times.push(t.elapsed());
            assert!(out.status.code().is_some_and(|c| c <= 1));
        }
    }
    Some(median(times))
}

/// The read path after +10 chapters: the next search's open (table refresh + cache update).
struct Side {
    n: usize,
    ws: PathBuf,
    rng: Rng,
    times: Vec<Duration>,
}

const ADDED_ROOT: usize = 900_000;

impl Side {
    fn new(n: usize) -> Side {
        let (ws, _) = corpus(n);
        // Current before the trials.
        search::open(&ws, PK, false, LOCK).expect("open");
        Side {
            n,
            ws,
            rng: Rng(42),
            times: Vec::new(),
        }
    }

    fn trial(&mut self, trial: usize) {
        let root = ADDED_ROOT + trial;
        let mut names = Vec::new();
        for k in 0..10 {
            let (text, paths) = chapter(
                &mut self.rng,
                self.n + trial * 10 + k,
                &root_name(root),
                1_770_000_000_000,
            );
            write_chapter(&self.ws, root, k + 1, &text, &paths, k as u64 * 20);
            names.push(format!("{:03}-chapter.md", k + 1));
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        dsh_chapters::testkit::catalog::record(
            &self.ws.join(".dsh-chapters"),
            &[(
                &format!(".dsh-chapters/{}/chapters", root_name(root)),
                &refs,
            )],
        );
        let t = Instant::now();
        let corpus = search::open(&self.ws, PK, false, LOCK).expect("open");
        self.times.push(t.elapsed());
        assert!(corpus.documents as usize >= self.n + 10);
    }

    fn clean_up(&self) {
        for trial in 0..self.times.len() {
            let _ = std::fs::remove_dir_all(
                self.ws
                    .join(".dsh-chapters")
                    .join(root_name(ADDED_ROOT + trial)),
            );
        }
        // The removed folders are not recorded: the next run rebuilds its caches anyway.
        reset_derived(&self.ws);
    }
}

fn main() {
    if let (Ok(mode), Ok(ws)) = (
        std::env::var("FULLTEXT_BENCH_WORKER"),
        std::env::var("FULLTEXT_BENCH_WS"),
    ) {
        match mode.as_str() {
            "build" => build_worker(Path::new(&ws)),
            _ => query_worker(
                Path::new(&ws),
                std::env::var("FULLTEXT_BENCH_ROUNDS")
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .filter(|t| *t > 0)
                    .unwrap_or(10),
            ),
        }
        return;
    }
    let n: usize = std::env::var("FULLTEXT_BENCH_N")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(100_000);
    let trials: usize = std::env::var("FULLTEXT_BENCH_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(7);
    let (ws, text_bytes) = corpus(n);
    let (small_ws, _) = corpus(1_000);
    reset_derived(&ws);
    reset_derived(&small_ws);
    println!(
        "== full-text search over {n} chapters ({:.0} MiB of chapter text, {:.1} KiB each) ==",
        text_bytes as f64 / 1048576.0,
        text_bytes as f64 / n as f64 / 1024.0
    );
    let b = run_worker("build", &ws);
    let cache = cache_bytes(&ws);
    println!(
        "  build from scratch (table + FTS5 cache, one process): {} s, peak RSS {}, {} documents",
        b[0], b[1], b[2]
    );
    println!(
        "  cache size {:.1} MiB = {:.2}× the text (target ≤ 0.6)",
        cache as f64 / 1048576.0,
        cache as f64 / text_bytes as f64
    );
    let q = run_worker("query", &ws);
    println!(
        "  query path (library door: open + rank + snippets + packing), {} queries × {} rounds in a fresh process: p50 {} ms, p99 {} ms, max {} ms; peak RSS {}; {} matches per round",
        QUERIES.len() + 1,
        std::env::var("FULLTEXT_BENCH_ROUNDS").unwrap_or_else(|_| "10".into()),
        q[0], q[1], q[2], q[3], q[4]
    );
    match rg_median(&ws) {
        Some(t) => {
            let p50: f64 = q[0].parse().unwrap_or(f64::NAN);
            println!(
                "  baseline rg -l -i -F (same text, same files): median {:.1} ms per query → ours {:.1}× faster (target ≥ 20×)",
                t.as_secs_f64() * 1e3,
                t.as_secs_f64() * 1e3 / p50
            );
        }
        None => println!("  baseline: rg is not installed and could not be; no baseline figure"),
    }
    println!("== +10 chapters, then the next search's update: {n} vs 1,000 ==");
    let mut small = Side::new(1_000);
    let mut big = Side::new(n);
    for t in 0..trials {
        small.trial(t);
        big.trial(t);
    }
    small.clean_up();
    big.clean_up();
    let (ms, mb) = (median(small.times.clone()), median(big.times.clone()));
    println!(
        "  1,000: median {:.1} ms; {n}: median {:.1} ms; ratio {:.2} (target ≤ 1.5)",
        ms.as_secs_f64() * 1e3,
        mb.as_secs_f64() * 1e3,
        mb.as_secs_f64() / ms.as_secs_f64()
    );
    std::io::stdout().flush().expect("flush");
}

//! Index and search benchmark, side by side in one run:
//! 1. the index update after +10 chapters (table refresh + the touched shards + the
//!    manifest) in a store of 100,000 chapters vs one of 1,000 — the ratio should be ≤ 1.5;
//! 2. `chapters search` over the 100,000: p50 and p99 of the query path (door, table,
//!    ranking, the shown lines) in a worker process that reports its peak RSS, the whole
//!    CLI run a few times, and beside it `rg -c` for the same terms over the same files.
//!
//! The corpora are generated once into `target/bench-index/` and reused (100,000 files take
//! a while to write); each run first builds the table and the index from scratch (timed),
//! then alternates the +10-chapter trials between the two sizes (the machine is shared: both
//! sizes see the same load), and removes what it added at the end.
//!
//! The generated vocabulary grows with the corpus (N/20 topics, 5 per chapter, uniform), so
//! a topic shard holds ~100 lines at either size: the update rewrites the touched shards, so
//! its cost follows shard size — a topic carried by a fixed share of a growing corpus makes
//! its shard grow with it (see docs/benchmarks.md).
//!
//! The +10 chapters are written as the archive writes them: each file, then its record in
//! the store's catalog, so the update reads the catalog instead of listing every folder.
//!
//! Run: `cargo bench --bench index` (release); `INDEX_BENCH_UPDATE_ONLY=1` skips the search
//! section, `INDEX_BENCH_SEARCH_ONLY=1` the update section, `INDEX_BENCH_TRIALS=N` sets the
//! number of +10-chapter trials at each size (11), `INDEX_BENCH_VERBOSE=1` prints
//! the split of every update. `rg` is optional: its absence is said.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use dsh_chapters::catalog::score::{self, ScoreParams};
use dsh_chapters::catalog::table::Table;
use dsh_chapters::search;
use dsh_chapters::store::catalog;
use dsh_chapters::topics::build;

const PK: &str = "0b6e7c42-1b1c-5c1e-9d34-bench0000000";
const PER_ROOT: usize = 100;
const TOPICS_PER_CHAPTER: usize = 5;
const LOCK: Duration = Duration::from_secs(30);
const WORDS: &[&str] = &[
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
    "shard",
    "pool",
    "mirror",
    "sync",
    "archive",
    "chapter",
    "session",
    "render",
    "redact",
    "secret",
    "ledger",
    "config",
    "layer",
    "fold",
    "alias",
    "vocabulary",
    "search",
    "score",
    "recency",
    "budget",
    "packing",
    "fixture",
    "benchmark",
    "thread",
    "socket",
    "daemon",
    "notice",
    "rule",
    "approve",
    "revoke",
    "commit",
    "branch",
    "merge",
    "conflict",
    "diff",
    "patch",
    "review",
    "deploy",
    "staging",
    "logging",
    "metrics",
    "latency",
    "memory",
    "buffer",
    "stream",
    "frame",
    "decoder",
    "encoder",
    "unicode",
    "escape",
    "quote",
    "table",
    "column",
    "row",
    "query",
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
}

fn topic_name(i: usize) -> String {
    format!("{}-{i}", WORDS[i % WORDS.len()])
}

fn chapter_text(rng: &mut Rng, n: usize, vocab: usize, day_ms: i64) -> String {
    fn words(rng: &mut Rng, k: usize) -> String {
        (0..k)
            .map(|_| WORDS[rng.below(WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ")
    }
    let title = format!("Fix the {} ({n})", words(rng, 6));
    let summary = words(rng, 20);
    let kind = if n % 10 == 9 { "plan" } else { "chapter" };
    let mut topics: Vec<String> = (0..TOPICS_PER_CHAPTER)
        .map(|_| topic_name(rng.below(vocab)))
        .collect();
    topics.sort();
    topics.dedup();
    let date = dsh_chapters::time::rfc3339_utc(day_ms + (n as i64) * 60_000);
    let body = words(rng, 60);
    format!(
        "---\ntitle: \"{title}\"\nsummary: \"{summary}\"\nkind: {kind}\nprojectKey: \"{PK}\"\nharnessId: bench\nsessionId: s\nrootSessionId: s\nseqRange: [0, 1]\ndate: \"{date}\"\ntopics: [{}]\n---\n# {title}\n\n{body}\n",
        topics.join(", ")
    )
}

fn write_chapter(ws: &Path, root: usize, number: usize, text: &str) {
    let dir = ws
        .join(".dsh-chapters")
        .join(format!("session-bench-{root:06}"))
        .join("chapters");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join(format!("{number:03}-chapter.md")), text).expect("write");
}

/// An added chapter as the archive writes it: the file, then its record in the store's
/// catalog (`Store::write_document` does both; its documents must be redacted, which a
/// generated corpus needs no pass for).
fn archive_chapter(ws: &Path, root: usize, number: usize, text: &str) {
    write_chapter(ws, root, number, text);
    let name = format!("{number:03}-chapter.md");
    dsh_chapters::testkit::catalog::record(
        &ws.join(".dsh-chapters"),
        &[(
            &format!(".dsh-chapters/session-bench-{root:06}/chapters"),
            &[name.as_str()],
        )],
    );
}

/// The cached corpus of `n` chapters (written once).
fn corpus(n: usize) -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-index")
        .join(format!("corpus-{n}"));
    let done = ws.join(".complete");
    if done.is_file() {
        return ws;
    }
    let _ = std::fs::remove_dir_all(&ws);
    eprintln!("generating {n} chapters into {} (once)…", ws.display());
    let t = Instant::now();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ n as u64);
    let vocab = (n / 20).max(10);
    for i in 0..n {
        let text = chapter_text(&mut rng, i, vocab, 1_760_000_000_000);
        write_chapter(&ws, i / PER_ROOT, i % PER_ROOT + 1, &text);
    }
    std::fs::write(&done, "").expect("marker");
    eprintln!("  {:.1} s", t.elapsed().as_secs_f64());
    ws
}

fn reset_derived(ws: &Path) {
    let _ = std::fs::remove_dir_all(ws.join(".dsh-chapters/.search"));
    let _ = std::fs::remove_dir_all(ws.join(".dsh-chapters/index"));
    let catalog = catalog::catalog_path(&ws.join(".dsh-chapters"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", catalog.display()));
    }
}

fn update(ws: &Path, full: bool) -> (Duration, build::Written) {
    let t = Instant::now();
    let (table, refresh) = Table::refresh(ws, false, LOCK).expect("refresh");
    let refreshed = t.elapsed();
    let written = build::update_store(ws, &table, full).expect("update");
    if std::env::var_os("INDEX_BENCH_VERBOSE").is_some() {
        eprintln!(
            "    refresh {:.2} ms ({} folder(s) listed{}), index {:.2} ms ({} file(s) written)",
            refreshed.as_secs_f64() * 1e3,
            refresh.folders,
            refresh
                .rescan
                .as_deref()
                .map(|r| format!(", full rescan: {r}"))
                .unwrap_or_default(),
            (t.elapsed() - refreshed).as_secs_f64() * 1e3,
            written.written
        );
    }
    (t.elapsed(), written)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One corpus of the side-by-side update figure.
struct Side {
    n: usize,
    ws: PathBuf,
    rng: Rng,
    full: Duration,
    times: Vec<Duration>,
    touched: usize,
}

/// Where the +10 chapters of trial `t` go: a new session folder each time.
const ADDED_ROOT: usize = 900_000;

impl Side {
    /// The corpus of `n` chapters with its table and index built from scratch (timed).
    fn new(n: usize) -> Side {
        let ws = corpus(n);
        reset_derived(&ws);
        let (full, w) = update(&ws, false);
        assert!(w.full && w.documents as usize == n, "{w:?}");
        Side {
            n,
            ws,
            rng: Rng(42),
            full,
            times: Vec::new(),
            touched: 0,
        }
    }

    /// +10 chapters, then the timed update. The same +10 chapters at both sizes: topics
    /// drawn from the 50 both vocabularies hold (each such shard carries ~100 lines at either
    /// size), so the two updates touch the same shards and differ only by the corpus around
    /// them.
    fn trial(&mut self, trial: usize) {
        let vocab = 50;
        for k in 0..10 {
            let i = self.n + trial * 10 + k;
            let text = chapter_text(&mut self.rng, i, vocab, 1_770_000_000_000);
            archive_chapter(&self.ws, ADDED_ROOT + trial, k + 1, &text);
        }
        let (t, w) = update(&self.ws, false);
        assert!(!w.full);
        self.touched += w.touched;
        self.times.push(t);
    }

    fn clean_up(&self) {
        for trial in 0..self.times.len() {
            let _ = std::fs::remove_dir_all(self.ws.join(format!(
                ".dsh-chapters/session-bench-{:06}",
                ADDED_ROOT + trial
            )));
        }
    }

    fn report(&self, label: &str) {
        println!(
            "  {label}: full build {:>8.1} ms, update median {:>6.2} ms (min {:.2}, max {:.2}), {} shards touched",
            self.full.as_secs_f64() * 1e3,
            median(self.times.clone()).as_secs_f64() * 1e3,
            self.times.iter().min().expect("trials").as_secs_f64() * 1e3,
            self.times.iter().max().expect("trials").as_secs_f64() * 1e3,
            self.touched / self.times.len()
        );
    }
}

const QUERIES: &[&str] = &[
    "refresh token",
    "middleware expiry",
    "parser",
    "cache timeout retry",
    "schema migration",
    "shard",
    "fix",
    "unicode escape quote",
    "latency memory",
    "zebra",
    "plan",
    "deploy staging",
];

/// Worker: run the queries in this (fresh) process; print latencies and peak RSS.
fn worker(ws: &Path, rounds: usize) {
    let mut times = Vec::new();
    let mut total = 0usize;
    for _ in 0..rounds {
        for q in QUERIES {
            let t = Instant::now();
            let corpus = search::open(ws, PK, false, LOCK).expect("open");
            let opened = t.elapsed();
            let params = ScoreParams {
                curation: corpus.curation.clone(),
                core_rule_bonus: 0.15,
            };
            let now = score::day_start(1_770_000_000_000);
            // The whole query path, packed to a default budget (~400 tokens).
            let answer = corpus
                .answer_packed(&search::Request::text(q, None), &params, "bench", now, 400)
                .expect("search");
            times.push(t.elapsed());
            if std::env::var_os("INDEX_BENCH_VERBOSE").is_some() {
                eprintln!(
                    "{q:>22}: open {:.2} ms, query {:.2} ms, {} matches",
                    opened.as_secs_f64() * 1e3,
                    (t.elapsed() - opened).as_secs_f64() * 1e3,
                    answer.total
                );
            }
            total += answer.total;
        }
    }
    times.sort();
    let p = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    println!(
        "{:.2} {:.2} {:.2} {} {}",
        p(0.5).as_secs_f64() * 1e3,
        p(0.99).as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        hwm.replace(' ', ""),
        total / rounds
    );
}

fn rg_figures(ws: &Path) -> Option<Duration> {
    let version = Command::new("rg").arg("--version").output().ok()?;
    if !version.status.success() {
        return None;
    }
    let mut times = Vec::new();
    for q in QUERIES.iter().take(6) {
        let pattern = score::query_terms(q).join("|");
        let t = Instant::now();
        let out = Command::new("rg")
            .args(["-c", "-i", "--no-messages", "-e", &pattern])
            .arg(ws.join(".dsh-chapters"))
            .output()
            .expect("rg");
        times.push(t.elapsed());
        assert!(!out.stdout.is_empty());
    }
    Some(median(times))
}

fn main() {
    if let Ok(ws) = std::env::var("INDEX_BENCH_WORKER") {
        worker(Path::new(&ws), 20);
        return;
    }
    let trials = std::env::var("INDEX_BENCH_TRIALS")
        .ok()
        .and_then(|t| t.parse().ok())
        .filter(|t| *t > 0)
        .unwrap_or(11);
    let search_only = std::env::var_os("INDEX_BENCH_SEARCH_ONLY").is_some();
    if !search_only {
        update_section(trials);
    }
    if std::env::var_os("INDEX_BENCH_UPDATE_ONLY").is_none() {
        search_section();
    }
}

fn update_section(trials: usize) {
    println!("== index update after +10 chapters (table refresh + touched shards + manifest) ==");
    let mut small = Side::new(1_000);
    let mut big = Side::new(100_000);
    // The full builds leave ~100 MB to write back: flushed now, so the trials do not pay
    // for it (the big side's more).
    dsh_chapters::store::atomic::sync_filesystem(&big.ws).expect("syncfs");
    // Side by side: the trials alternate, so both sizes see the same machine (it is shared).
    for trial in 0..trials {
        small.trial(trial);
        big.trial(trial);
    }
    small.clean_up();
    big.clean_up();
    small.report("1,000 chapters  ");
    big.report("100,000 chapters");
    let paired: Vec<f64> = small
        .times
        .iter()
        .zip(&big.times)
        .map(|(s, b)| b.as_secs_f64() / s.as_secs_f64())
        .collect();
    let mut sorted = paired.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "  ratio 100,000 / 1,000: {:.2} (target ≤ 1.5); median of the {trials} paired trials {:.2}",
        median(big.times.clone()).as_secs_f64() / median(small.times.clone()).as_secs_f64(),
        sorted[sorted.len() / 2]
    );
}

fn search_section() {
    let ws = corpus(100_000);
    // The table and index are current after update_figures; warm the page cache once.
    update(&ws, false);
    println!(
        "== search over 100,000 chapters ({} queries × 20) ==",
        QUERIES.len()
    );
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new(exe)
        .env("INDEX_BENCH_WORKER", &ws)
        .output()
        .expect("worker");
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    if f.len() == 5 {
        println!(
            "  query path in-process: p50 {} ms, p99 {} ms, max {} ms; peak RSS {}; {} matches per round",
            f[0], f[1], f[2], f[3], f[4]
        );
    } else {
        println!(
            "  worker failed: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/chapters");
    if cli.is_file() {
        std::fs::create_dir_all(ws.join(".git")).expect("git dir");
        std::fs::write(
            ws.join(".git/config"),
            "[remote \"origin\"]\n\turl = https://example.com/bench/widgets.git\n",
        )
        .expect("cfg");
        let mut times = Vec::new();
        for q in QUERIES.iter().take(6) {
            let t = Instant::now();
            let out = Command::new(&cli)
                .args(["search", "--workspace"])
                .arg(&ws)
                .args(["--cross-project"])
                .args(q.split(' '))
                .env("DSH_HOME", ws.join(".bench-home"))
                .env("CHAPTERS_HARNESS_ID", "bench")
                .output()
                .expect("cli");
            times.push(t.elapsed());
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        println!(
            "  whole CLI run (process start, config, door, query, print): median {:.2} ms",
            median(times).as_secs_f64() * 1e3
        );
    } else {
        println!(
            "  (target/release/chapters not built: `cargo build --release` for the CLI figure)"
        );
    }
    match rg_figures(&ws) {
        Some(t) => println!(
            "  baseline rg -c -i (same terms, same 100,000 files): median {:.1} ms per query",
            t.as_secs_f64() * 1e3
        ),
        None => println!(
            "  baseline: rg is not installed (apt-get install ripgrep); no baseline figure"
        ),
    }
    std::io::stdout().flush().expect("flush");
}

//! `chapters status` benchmark (issue #19 point 7), side by side in one run: 10 vs 1,000
//! sessions, 100 vs 100,000 chapters, the path before the status cache (every log decoded,
//! every chapter's frontmatter read once per session, every collection line parsed — kept
//! here only, as `before`) and `status::status` as it is (`after`: the first call with no
//! cache, then the warm call that reads only what changed), plus the whole CLI
//! (`chapters status --json`, a process) once warm.
//!
//! The corpora are generated once into `target/bench-status/` and reused: per session count
//! a DSH home of that many logs (`STATUS_BENCH_TURNS` turns each, 200 by default: a short
//! human prompt, a reply and one tool call per turn, written by `testkit::writer`), and per
//! chapter count a store written directly (archiving 100,000 chapters would take hours):
//! chapter files with the archive's frontmatter, spread evenly over the sessions, one
//! collection ledger per session with one line per turn, two artifacts per session, and the
//! search table built over them (status reads document counts and vocabulary candidates
//! from it). The
//! store of each case is renamed into the workspace before its trials (a rename, so the
//! cases share the logs), and its status cache travels with it.
//!
//! Run: `cargo bench --bench status` (release). `STATUS_BENCH_TRIALS=N` (3) trials per case;
//! `STATUS_BENCH_FILL=1` fills the store's catalog first, so status counts documents from it;
//! the generated files stay in `target/bench-status/` (delete it when done: ~1 GB).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_chapters::config::Config;
use dsh_chapters::session::discover;
use dsh_chapters::session::reader::{LogItem, LogReader, ResumePoint};
use dsh_chapters::source::{Harness, SourceOptions};
use dsh_chapters::store::{Store, StoreCounts};
use dsh_chapters::testkit::writer::{session_log_path, LogWriter, SessionScript, TurnSpec};
use dsh_chapters::turn::TurnAssembler;

const SESSIONS: [usize; 2] = [10, 1_000];
const CHAPTERS: [usize; 2] = [100, 100_000];
const START_MS: i64 = 1_760_000_000_000;
const WORDS: &[&str] = &[
    "parser",
    "token",
    "cache",
    "retry",
    "schema",
    "index",
    "shard",
    "mirror",
    "sync",
    "ledger",
    "config",
    "alias",
    "search",
    "score",
    "budget",
    "socket",
    "daemon",
    "notice",
    "render",
    "redact",
    "secret",
    "export",
    "import",
    "deploy",
    "build",
    "test",
    "lint",
    "format",
    "queue",
    "worker",
    "timeout",
    "header",
    "cookie",
    "session",
    "login",
    "upload",
    "thumbnail",
    "report",
    "invoice",
    "payment",
];

fn base() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-status")
}

fn session_id(i: usize) -> String {
    format!("session-{i:08}-0000-4000-8000-000000000000")
}

fn turns() -> usize {
    std::env::var("STATUS_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// The workspace (and its DSH home) of `sessions` logs, generated once.
fn workspace(sessions: usize) -> (PathBuf, PathBuf) {
    let dir = base().join(format!("s{sessions}"));
    let (ws, home) = (dir.join("ws"), dir.join("home"));
    let done = dir.join(format!(".logs-{}", turns()));
    if done.is_file() {
        // The workspace is a checkout's top level of its own (else the CLI would take the
        // enclosing checkout, this repository, for the workspace).
        std::fs::create_dir_all(ws.join(".git")).expect(".git");
        return (ws, home);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&home).expect("home");
    // Only DSH's logs: the other harnesses' homes are not looked for.
    std::fs::create_dir_all(home.join("dsh-chapters")).expect("home config dir");
    std::fs::write(
        dsh_chapters::config::home_config_path(&home),
        "claudeCodeSessions: false\ncodexSessions: false\n",
    )
    .expect("home config");
    let t = Instant::now();
    eprintln!("generating {sessions} logs of {} turns (once)…", turns());
    let ws_str = ws.to_string_lossy().into_owned();
    for i in 0..sessions {
        let id = session_id(i);
        let path = session_log_path(&home, &ws_str, &id, 4, true);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        let mut script = SessionScript::new(4, START_MS + i as i64 * 1000);
        let header = script.header(&id, &ws_str, START_MS);
        let mut w = LogWriter::create(&path, true, &header).expect("log");
        w.set_sync(false);
        for t in 0..turns() {
            let spec = TurnSpec::new(
                &format!("Fix the parser test number {t} in session {i}"),
                &format!("Fixed it: the parser now reads case {t}."),
            );
            w.append_turn(&mut script, &spec).expect("turn");
        }
    }
    std::fs::create_dir_all(ws.join(".git")).expect(".git");
    std::fs::write(&done, "").expect("marker");
    eprintln!("  {:.1} s", t.elapsed().as_secs_f64());
    (ws, home)
}

/// The store of `chapters` chapters over `sessions` sessions, generated once beside the
/// workspace (`store-<chapters>`), moved in by [`Case::enter`].
fn store(sessions: usize, chapters: usize, ws: &Path, project_key: &str) -> PathBuf {
    let dir = base()
        .join(format!("s{sessions}"))
        .join(format!("store-{chapters}"));
    let done = base()
        .join(format!("s{sessions}"))
        .join(format!(".store-{chapters}"));
    if done.is_file() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(ws.join(".dsh-chapters"));
    let t = Instant::now();
    eprintln!("generating a store of {chapters} chapters over {sessions} sessions (once)…");
    let store = Store::init(ws).expect("init");
    let store_dir = store.dir().to_path_buf();
    let per = chapters.div_ceil(sessions);
    let mut written = 0;
    for i in 0..sessions {
        let id = session_id(i);
        let root = store_dir.join(&id);
        let ch_dir = root.join("chapters");
        std::fs::create_dir_all(&ch_dir).expect("chapters");
        for j in 0..per {
            if written == chapters {
                break;
            }
            written += 1;
            let (lo, hi) = (j as u64 * 8, j as u64 * 8 + 7);
            let date = dsh_chapters::time::rfc3339_utc(START_MS + j as i64 * 60_000);
            let (a, b) = (
                WORDS[(i * 7 + j) % WORDS.len()],
                WORDS[(j * 3) % WORDS.len()],
            );
            let topics = format!("{a}, {b}-{}", j % 50);
            let text = format!(
                "---\ntitle: \"Fix the {a} {b} ({j})\"\nsummary: \"The {a} reads case {j}.\"\nkind: chapter\nprojectKey: \"{project_key}\"\nharnessId: bench\nsessionId: {id}\nrootSessionId: {id}\nseqRange: [{lo}, {hi}]\ndate: \"{date}\"\ntopics: [{topics}]\n---\n# Fix the {a} {b} ({j})\n\nThe {a} reads case {j}.\n"
            );
            std::fs::write(ch_dir.join(format!("{:03}-fix-the-parser.md", j + 1)), text)
                .expect("chapter");
        }
        let coll = root.join("collections");
        std::fs::create_dir_all(&coll).expect("collections");
        let mut f = std::fs::File::create(coll.join(format!("{id}.jsonl"))).expect("ledger");
        for t in 0..turns() {
            writeln!(
                f,
                "{{\"v\":1,\"seqLo\":{},\"seqHi\":{},\"terms\":[\"parser\",\"test\"],\"paths\":[],\"commands\":[],\"size\":120}}",
                t * 4,
                t * 4 + 3
            )
            .expect("line");
        }
        for a in 0..2u8 {
            let sha = format!("{:02x}{}", a as usize * 16 + i % 16, "0".repeat(62));
            let adir = root.join("artifacts").join(&sha[..2]);
            std::fs::create_dir_all(&adir).expect("artifacts");
            std::fs::write(adir.join(format!("{sha}.txt")), "output\n").expect("artifact");
        }
    }
    // The search table, as the first search or sync builds it: status reads its counts and
    // the vocabulary's candidates from it.
    dsh_chapters::catalog::table::Table::refresh(ws, false, Duration::from_secs(60))
        .expect("table");
    std::fs::rename(&store_dir, &dir).expect("park the store");
    std::fs::write(&done, "").expect("marker");
    eprintln!("  {:.1} s", t.elapsed().as_secs_f64());
    dir
}

struct Case {
    sessions: usize,
    chapters: usize,
    ws: PathBuf,
    home: PathBuf,
    parked: PathBuf,
    config: Config,
    identity: dsh_chapters::identity::Identity,
    before: Vec<Duration>,
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    cli: Vec<Duration>,
}

impl Case {
    fn enter(&self) {
        std::fs::rename(&self.parked, self.ws.join(".dsh-chapters")).expect("store in");
    }
    fn leave(&self) {
        std::fs::rename(self.ws.join(".dsh-chapters"), &self.parked).expect("store out");
    }
}

/// What the path before the cache gave: every session's completed and unarchived turns, and
/// the store's counts.
type Before = (Vec<(String, u64, u64)>, Option<StoreCounts>);

/// The path before the status cache, as `status::status` read sessions and counts: the
/// header, then the whole log decoded through the turn assembler; each session's root's
/// chapters read (frontmatter) for its highest archived seq; `Store::counts` (every
/// collection line parsed). DSH logs only (the bench writes no other harness's).
fn before(ws: &Path, home: &Path, config: &Config) -> Before {
    let store = Store::open(ws).ok();
    let counts = store.as_ref().map(|s| s.counts().expect("counts"));
    let (logs, _) = discover::list_workspace_sessions_and_unreadable(
        home,
        &ws.to_string_lossy(),
        &config.path_map,
    )
    .expect("discover");
    let mut out = Vec::new();
    for log in logs {
        let mut r = LogReader::open(&log.log, ResumePoint::default()).expect("header");
        let Ok(Some(LogItem::Header(header))) = r.next_item() else {
            panic!("no header")
        };
        let opts = SourceOptions {
            reader: dsh_chapters::session::reader::ReaderOptions {
                max_line_bytes: config.max_event_bytes as usize,
            },
            quiet_after_ms: Some(config.idle_archive_ms),
        };
        let mut reader =
            dsh_chapters::source::open(Harness::Dsh, &log.log, ResumePoint::default(), opts)
                .expect("open");
        let mut asm = TurnAssembler::new();
        let mut ends = Vec::new();
        while let Some(item) = reader.next_item().expect("read") {
            if let LogItem::Event(e) = item {
                if let Some(turn) = asm.push(e) {
                    ends.push(turn.end_seq);
                }
            }
        }
        // Roots: the generated sessions have no parent, so each is its own.
        let hi = store.as_ref().and_then(|s| {
            s.archived(&header.id)
                .ok()?
                .into_iter()
                .filter(|d| d.kind == "chapter" && d.session_id == header.id)
                .map(|d| d.seq_hi)
                .max()
        });
        let unarchived = ends.iter().filter(|&&e| hi.is_none_or(|h| e > h)).count();
        out.push((header.id, ends.len() as u64, unarchived as u64));
    }
    (out, counts)
}

fn after(c: &Case) -> Before {
    let r = dsh_chapters::status::status(&c.ws, &c.home, &c.config, &c.identity, "bench")
        .expect("status");
    let sessions = r
        .sessions
        .iter()
        .map(|s| (s.session_id.clone(), s.completed_turns, s.unarchived_turns))
        .collect();
    (sessions, r.store)
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let out = f();
    (t.elapsed(), out)
}

fn median(v: &[Duration]) -> Duration {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let trials: usize = std::env::var("STATUS_BENCH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    // `STATUS_BENCH_FILL=1`: the store's catalog filled before the trials.
    let fill = std::env::var_os("STATUS_BENCH_FILL").is_some();
    let mut cases = Vec::new();
    for &sessions in &SESSIONS {
        let (ws, home) = workspace(sessions);
        for &chapters in &CHAPTERS {
            let env = BTreeMap::new();
            let config =
                dsh_chapters::config::load(&home, &ws, &env, &BTreeMap::new()).expect("config");
            let identity = dsh_chapters::identity::resolve(&ws, None).expect("identity");
            let parked = store(sessions, chapters, &ws, &identity.project_key);
            cases.push(Case {
                sessions,
                chapters,
                ws: ws.clone(),
                home: home.clone(),
                parked,
                config,
                identity,
                before: Vec::new(),
                cold: Vec::new(),
                warm: Vec::new(),
                cli: Vec::new(),
            });
        }
    }
    // Let every generated stamp settle (the cache trusts nothing changed in the last 2 s).
    std::thread::sleep(Duration::from_millis(2_100));
    for trial in 0..trials {
        for c in cases.iter_mut() {
            c.enter();
            if trial == 0 && fill {
                // The catalog filled (as enrichment's first batch fills it): status counts
                // documents from it instead of the search table.
                Store::open(&c.ws).expect("store").fill_catalog();
            }
            let cache = c.ws.join(".dsh-chapters/.status-cache.json");
            let _ = std::fs::remove_file(&cache);
            let (t_before, want) = timed(|| before(&c.ws, &c.home, &c.config));
            let (t_cold, cold) = timed(|| after(c));
            let (t_warm, warm) = timed(|| after(c));
            if trial == 0 {
                assert_eq!(cold, want, "the cache changed what status says");
                assert_eq!(warm, want, "the warm cache changed what status says");
            }
            let (t_cli, out) = timed(|| {
                Command::new(env!("CARGO_BIN_EXE_chapters"))
                    .args(["status", "--json"])
                    .current_dir(&c.ws)
                    .env("DSH_HOME", &c.home)
                    .env("CHAPTERS_HARNESS_ID", "bench")
                    .stderr(Stdio::inherit())
                    .output()
                    .expect("chapters status")
            });
            assert!(out.status.success());
            if trial == 0 {
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
                assert_eq!(v["statusCache"]["logsRead"], 0, "the CLI read a log again");
                eprintln!(
                    "{} sessions, {} chapters: documents {}",
                    c.sessions, c.chapters, v["documents"]
                );
            }
            c.before.push(t_before);
            c.cold.push(t_cold);
            c.warm.push(t_warm);
            c.cli.push(t_cli);
            c.leave();
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "status, {} turns per session, median of {trials} (load average: {})",
        turns(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "| sessions | chapters | before (decode all) | after, no cache | after, warm | warm / before | CLI warm (process) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for c in &cases {
        let (b, cold, warm, cli) = (
            median(&c.before),
            median(&c.cold),
            median(&c.warm),
            median(&c.cli),
        );
        println!(
            "| {} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.3}× | {:.1} ms |",
            c.sessions,
            c.chapters,
            ms(b),
            ms(cold),
            ms(warm),
            warm.as_secs_f64() / b.as_secs_f64(),
            ms(cli)
        );
    }
    let small = &cases[0];
    let big = &cases[cases.len() - 1];
    println!(
        "growth 10 sessions/100 chapters → 1,000/100,000: before {:.1}×, after (warm) {:.1}×",
        median(&big.before).as_secs_f64() / median(&small.before).as_secs_f64(),
        median(&big.warm).as_secs_f64() / median(&small.warm).as_secs_f64()
    );
}

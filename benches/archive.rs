//! Archive benchmark on a session in today's real DSH shape (`testkit::realshape`: format
//! v4, streams inside assistant messages, a large system prompt on every step, half the
//! tasks in Chinese, one zstd frame per event as the harness writes them, ~2.65×
//! compression). In ONE run, side by side on the same ≥ 50 MB log: `chapters archive` vs
//! `zstd -dc FILE > /dev/null` vs a decode-and-parse floor (`zstd -dc FILE | python3 -c
//! 'import sys,json; [json.loads(l) for l in sys.stdin]'`), with the ratios; the reading
//! stage alone (decode, parse, turns, signatures) timed in this process, and the disk's own
//! share: the same files (folders, names, sizes) created by plain writes and made durable by
//! one `syncfs` ("create ms"). Then the archive's peak RSS (`/usr/bin/time -f %M`: the
//! child's `wait4` rusage) and its peak anonymous memory ("anon": `RssAnon`, sampled every
//! 2 ms) at 500 / 2,000 / 8,000 turns of the same shape, and the terms a
//! human turn of the Chinese fixture (`realshape::ZH_TASK_TURNS`) yields. Beside the wall
//! times, the CPU time (user + system, from the same `wait4` rusage) of the floor's two
//! processes (`pcpu`) and of the archive (`acpu`): on a machine others load, wall time
//! is mostly waiting for a core, and the CPU ratio is the steadier figure.
//!
//! Peak RSS counts the binary's own mapped pages, ~half of it, and those depend on how the
//! file came into the page cache, not on the run: the same binary maps ~1 MiB more as a
//! fresh copy than as the linker wrote it. The anonymous peak is what the program's own
//! memory does; both growth figures (500 → 8,000 turns) are of the medians of the runs.
//!
//! Run: `cargo bench --bench archive` (needs `zstd`, `python3` and `/usr/bin/time`).
//! `ARCHIVE_BENCH_TURNS=2000` runs one size; `ARCHIVE_BENCH_KEEP=1` keeps the scratch trees
//! (printed) for profiling by hand; `ARCHIVE_BENCH_READER_ONLY=1` times only the reading
//! stage; `ARCHIVE_BENCH_REPEATS=N` sets the runs of every size (default 5 at 2,000, 3 else:
//! one run's peak moves by ~0.4 MiB with the threads' timing).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_chapters::session::reader::{LogItem, LogReader, ResumePoint};
use dsh_chapters::signature;
use dsh_chapters::testkit::realshape::{self, RealShapeScript, RealTurn, ZH_TASK_TURNS};
use dsh_chapters::testkit::writer::{session_log_path, LogWriter};
use dsh_chapters::turn::TurnAssembler;

/// Runs of the side-by-side size; the best of each side is compared (the machine is shared
/// and noisy). The other sizes run the archive a few times, for the median of its peaks.
const REPEATS: usize = 5;
const RSS_REPEATS: usize = 3;
/// Decompressed bytes per generated turn (system prompts, tool output, reasoning, answer
/// and its stream): 2,000 turns make a log of about 60 MB.
const BYTES_PER_TURN: usize = 24_000;
/// The system prompt every step repeats (real ones are several KB).
const SYSTEM_PROMPT_BYTES: usize = 3_000;
/// The size compared side by side, and the sizes whose peak RSS is read.
const SIDE_BY_SIDE: usize = 2_000;
const RSS_SIZES: [usize; 3] = [500, 2_000, 8_000];
/// The decode-and-parse floor: every line decoded and parsed as JSON, nothing else.
const PARSE_FLOOR: &str = "import sys,json\nfor l in sys.stdin: json.loads(l)";

const SESSION: &str = "session-bench-0000-4000-8000-000000000000";

struct Setup {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    log: PathBuf,
    decompressed: u64,
}

fn setup(turns: usize) -> Setup {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    let home = root.join("home");
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let ws_str = ws.to_string_lossy().into_owned();
    let log = session_log_path(&home, &ws_str, SESSION, 4, true);
    std::fs::create_dir_all(log.parent().expect("dir")).expect("mkdir");
    let header = RealShapeScript::new(4, 1_764_400_000_000).header(SESSION, &ws_str);
    realshape::write_session(&log, &header, turns, BYTES_PER_TURN, SYSTEM_PROMPT_BYTES, 1)
        .expect("write");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("zstd -dc '{}' | wc -c", log.display()))
        .output()
        .expect("zstd -dc | wc -c (is zstd installed?)");
    let decompressed = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a byte count");
    Setup {
        _tmp: tmp,
        home,
        ws,
        log,
        decompressed,
    }
}

fn chapters(s: &Setup, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chapters"));
    c.args(args)
        .current_dir(&s.ws)
        .env("DSH_HOME", &s.home)
        .env("CHAPTERS_HARNESS_ID", "bench");
    c.stdout(Stdio::null()).stderr(Stdio::inherit());
    c
}

/// A workspace never used before, with the same log: deleting the previous run's store
/// right before a timed run would make the filesystem's inode allocation scan the freshly
/// freed inodes (ext4 does), which no real archive pays.
fn fresh_workspace(s: &mut Setup, n: usize) {
    let ws = s.ws.with_file_name(format!("ws-{n}"));
    std::fs::create_dir_all(&ws).expect("ws");
    let log = session_log_path(&s.home, &ws.to_string_lossy(), SESSION, 4, true);
    std::fs::create_dir_all(log.parent().expect("dir")).expect("mkdir");
    std::fs::copy(&s.log, &log).expect("copy log");
    s.ws = ws;
    assert!(chapters(s, &["init"]).status().expect("init").success());
}

/// What [`measure`] read of one run.
struct Measured {
    wall: Duration,
    /// Peak RSS and peak anonymous memory, KiB (0 when it could not be read).
    rss: u64,
    anon: u64,
    /// User + system, its children included (`wait4`'s rusage).
    cpu: Duration,
}

/// `RssAnon` of `pid` in KiB, if it is still running.
fn rss_anon(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let value = status.lines().find_map(|l| l.strip_prefix("RssAnon:"))?;
    value.trim().trim_end_matches("kB").trim().parse().ok()
}

/// The process `/usr/bin/time` (pid `wrapper`) started, once it has.
fn timed_child(wrapper: u32) -> Option<u32> {
    let children =
        std::fs::read_to_string(format!("/proc/{wrapper}/task/{wrapper}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

/// Run `cmd`: its wall time, peak RSS, peak anonymous memory and CPU time.
fn measure(mut cmd: Command) -> Measured {
    let time = Path::new("/usr/bin/time");
    if time.exists() {
        let rss_file = tempfile::NamedTempFile::new().expect("tmp");
        let mut wrapped = Command::new(time);
        wrapped
            .arg("-f")
            .arg("%M %U %S")
            .arg("-o")
            .arg(rss_file.path())
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                wrapped.env(k, v);
            }
        }
        wrapped.stdout(Stdio::null());
        let start = Instant::now();
        let mut running = wrapped.spawn().expect("run");
        let (mut timed, mut anon) = (None, 0);
        let status = loop {
            if let Some(status) = running.try_wait().expect("wait") {
                break status;
            }
            timed = timed.or_else(|| timed_child(running.id()));
            if let Some(kib) = timed.and_then(rss_anon) {
                anon = anon.max(kib);
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let wall = start.elapsed();
        assert!(status.success(), "{cmd:?} failed");
        let report = std::fs::read_to_string(rss_file.path()).expect("rss");
        let mut fields = report.trim().lines().last().unwrap_or("").split(' ');
        let rss = fields.next().and_then(|f| f.parse().ok()).unwrap_or(0);
        let cpu: f64 = fields.filter_map(|f| f.parse::<f64>().ok()).sum();
        return Measured {
            wall,
            rss,
            anon,
            cpu: Duration::from_secs_f64(cpu),
        };
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let (mut rss, mut anon) = (0, 0);
    loop {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", child.id())) {
            if let Some(v) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                rss = rss.max(v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0));
            }
        }
        anon = anon.max(rss_anon(child.id()).unwrap_or(0));
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success());
            return Measured {
                wall: start.elapsed(),
                rss,
                anon,
                cpu: Duration::ZERO,
            };
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The median of `runs` (the upper one of an even count), 0 for none.
fn median(mut runs: Vec<u64>) -> u64 {
    runs.sort_unstable();
    runs.get(runs.len() / 2).copied().unwrap_or(0)
}

fn zstd_dc(log: &Path) -> Duration {
    let mut c = Command::new("zstd");
    c.arg("-dc").arg(log).stdout(Stdio::null());
    let start = Instant::now();
    assert!(c.status().expect("zstd").success());
    start.elapsed()
}

/// `zstd -dc FILE | python3 -c 'json.loads each line'`: decoding and parsing every line.
/// Its wall time and CPU time (both processes, user + system).
fn parse_floor(log: &Path) -> (Duration, Duration) {
    let mut c = Command::new("sh");
    c.arg("-c").arg(format!(
        "zstd -dc '{}' | python3 -c \"$(printf '{PARSE_FLOOR}')\"",
        log.display()
    ));
    let run = measure(c);
    (run.wall, run.cpu)
}

/// Terms each human turn of the Chinese fixture yields (its signature's `terms`).
fn chinese_terms_per_turn() -> Vec<usize> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let log = tmp.path().join("zh.jsonl.zstd");
    let mut script = RealShapeScript::new(4, 1_764_400_000_000);
    let header = script.header(SESSION, "/ws");
    let mut writer = LogWriter::create(&log, true, &header).expect("create log");
    for (i, text) in ZH_TASK_TURNS.iter().enumerate() {
        let spec = RealTurn::new(text, &format!("第{i}步：已分析。"));
        writer
            .append_batch(&script.turn_events(&spec))
            .expect("write log");
    }
    let mut reader = LogReader::open(&log, ResumePoint::default()).expect("open log");
    let mut assembler = TurnAssembler::new();
    let redactor = dsh_chapters::redact::built_in().expect("built-in rules compile");
    let mut out = Vec::new();
    while let Some(item) = reader.next_item().expect("read log") {
        let LogItem::Event(event) = item else {
            continue;
        };
        if let Some(turn) = assembler.push(event) {
            let text = redactor.redact_all(
                signature::TurnText::of(&turn),
                &mut dsh_chapters::redact::RedactionCounts::default(),
            );
            out.push(
                signature::sign(&text, SESSION, "/ws", "2026-01-01T00:00:00Z")
                    .terms
                    .len(),
            );
        }
    }
    out
}

/// Every file under `dir`, as (path relative to `dir`, length).
fn files_under(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir").flatten() {
            let path = entry.path();
            let meta = entry.metadata().expect("meta");
            if meta.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).expect("under dir").to_path_buf();
                out.push((rel, meta.len()));
            }
        }
    }
    out.sort();
    out
}

/// The disk's side of the comparison: create the files an archive wrote — same folders,
/// same names, same sizes — under `into` with plain `write`s, then make them durable with
/// one `syncfs` as the archive's group commit does (`sync -f`). Any program that writes that
/// many files durably pays this much; when it dwarfs `zstd -dc` (the filesystem still
/// writing back a mass deletion, or another process's data), so does the archive.
fn create_like(files: &[(PathBuf, u64)], into: &Path) -> Duration {
    let bytes = vec![b'x'; files.iter().map(|(_, n)| *n).max().unwrap_or(0) as usize];
    let start = Instant::now();
    for (rel, len) in files {
        let path = into.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&path, &bytes[..*len as usize]).expect("write");
    }
    let synced = Command::new("sync")
        .arg("-f")
        .arg(into)
        .status()
        .expect("sync -f");
    assert!(synced.success(), "sync -f {}", into.display());
    start.elapsed()
}

/// The archive's reading stage alone, in this process: decode, parse, assemble turns and
/// sign them (what bounds the archive's wall time), with no store. Returns the turns signed.
fn read_and_sign(log: &Path, ws: &str) -> usize {
    let mut reader = LogReader::open(log, ResumePoint::default()).expect("open log");
    let mut assembler = TurnAssembler::new();
    let mut signed = 0;
    while let Some(item) = reader.next_item().expect("read log") {
        let LogItem::Event(event) = item else {
            continue;
        };
        if let Some(turn) = assembler.push(event) {
            let redactor = dsh_chapters::redact::built_in().expect("built-in rules compile");
            let text = redactor.redact_all(
                signature::TurnText::of(&turn),
                &mut dsh_chapters::redact::RedactionCounts::default(),
            );
            std::hint::black_box(signature::sign(&text, SESSION, ws, "2026-01-01T00:00:00Z"));
            signed += 1;
        }
    }
    signed
}

fn main() {
    let terms = chinese_terms_per_turn();
    println!(
        "Chinese fixture: terms per human turn {terms:?} (mean {:.1}; was 0 before issue 14)",
        terms.iter().sum::<usize>() as f64 / terms.len().max(1) as f64
    );
    println!(
        "{:>6} {:>9} {:>9} {:>6} {:>10} {:>10} {:>11} {:>8} {:>8} {:>10} {:>10} {:>10} {:>7} {:>9} {:>9} {:>9} {:>8}",
        "turns",
        "MiB(dec)",
        "MiB(zst)",
        "ratio",
        "zstd ms",
        "parse ms",
        "archive ms",
        "/zstd",
        "/parse",
        "peak RSS",
        "anon",
        "reader ms",
        "files",
        "create ms",
        "pcpu ms",
        "acpu ms",
        "/pcpu"
    );
    let only: Option<usize> = std::env::var("ARCHIVE_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok());
    let reader_only = std::env::var_os("ARCHIVE_BENCH_READER_ONLY").is_some();
    // Every scratch tree lives until the end: ext4 without a journal scans the inodes freed
    // in the last ~30 s on each create, so deleting one size's stores right before the next
    // size's timed runs would charge them a cost no real archive pays. (For the same reason,
    // leave ~30 s between two runs of this bench.)
    let mut kept = Vec::new();
    let mut peaks = Vec::new();
    for turns in RSS_SIZES {
        if only.is_some_and(|n| n != turns) {
            continue;
        }
        let mut s = setup(turns);
        let zst = std::fs::metadata(&s.log).expect("meta").len();
        let repeats = std::env::var("ARCHIVE_BENCH_REPEATS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if turns == SIDE_BY_SIDE {
                REPEATS
            } else {
                RSS_REPEATS
            });
        let mut best_zstd = Duration::MAX;
        let mut best_parse = Duration::MAX;
        let mut best_archive = Duration::MAX;
        let mut best_reader = Duration::MAX;
        let (mut rss_runs, mut anon_runs) = (Vec::new(), Vec::new());
        let mut best_create = Duration::MAX;
        // CPU time (user + system) of the floor's two processes and of the archive.
        let mut best_parse_cpu = Duration::MAX;
        let mut best_archive_cpu = Duration::MAX;
        let mut written = Vec::new();
        let ws = s.ws.to_string_lossy().into_owned();
        for n in 0..repeats {
            let start = Instant::now();
            assert_eq!(read_and_sign(&s.log, &ws), turns);
            best_reader = best_reader.min(start.elapsed());
            if reader_only {
                continue;
            }
            best_zstd = best_zstd.min(zstd_dc(&s.log));
            let (parse_wall, parse_cpu) = parse_floor(&s.log);
            best_parse = best_parse.min(parse_wall);
            best_parse_cpu = best_parse_cpu.min(parse_cpu);
            fresh_workspace(&mut s, n);
            let run = measure(chapters(&s, &["archive"]));
            best_archive = best_archive.min(run.wall);
            best_archive_cpu = best_archive_cpu.min(run.cpu);
            rss_runs.push(run.rss);
            anon_runs.push(run.anon);
            written = files_under(&s.ws.join(".dsh-chapters"));
            let probe = s.ws.with_file_name(format!("create-{n}"));
            best_create = best_create.min(create_like(&written, &probe));
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (rss, anon) = (median(rss_runs), median(anon_runs));
        println!(
            "{:>6} {:>9.1} {:>9.1} {:>5.2}x {:>10.1} {:>10.1} {:>11.1} {:>7.2}x {:>7.2}x {:>6.1} MiB {:>6.1} MiB {:>10.1} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>7.2}x",
            turns,
            s.decompressed as f64 / 1048576.0,
            zst as f64 / 1048576.0,
            s.decompressed as f64 / zst as f64,
            ms(best_zstd),
            ms(best_parse),
            ms(best_archive),
            best_archive.as_secs_f64() / best_zstd.as_secs_f64(),
            best_archive.as_secs_f64() / best_parse.as_secs_f64(),
            rss as f64 / 1024.0,
            anon as f64 / 1024.0,
            ms(best_reader),
            written.len(),
            ms(best_create),
            ms(best_parse_cpu),
            ms(best_archive_cpu),
            best_archive_cpu.as_secs_f64() / best_parse_cpu.as_secs_f64()
        );
        peaks.push((turns, rss, anon));
        kept.push(s);
    }
    if let (Some(&(lo_turns, lo, lo_anon)), Some(&(hi_turns, hi, hi_anon))) =
        (peaks.first(), peaks.last())
    {
        let growth = |lo: u64, hi: u64| (hi as f64 / lo as f64 - 1.0) * 100.0;
        if lo_turns != hi_turns && lo > 0 {
            println!(
                "peak RSS {lo_turns} -> {hi_turns} turns (medians): {:+.1} % (goal: flat within 10 %)",
                growth(lo, hi)
            );
        }
        if lo_turns != hi_turns && lo_anon > 0 {
            println!(
                "peak anonymous memory {lo_turns} -> {hi_turns} turns (medians): {:.1} -> {:.1} MiB, {:+.1} %",
                lo_anon as f64 / 1024.0,
                hi_anon as f64 / 1024.0,
                growth(lo_anon, hi_anon)
            );
        }
    }
    if std::env::var_os("ARCHIVE_BENCH_KEEP").is_some() {
        for s in kept {
            eprintln!("kept: {}", s._tmp.keep().display());
        }
    }
}

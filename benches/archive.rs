//! Archive benchmark: `chapters archive` of a generated session vs `zstd -dc` of the same
//! file, side by side in one run, plus the archive's peak RSS at two log sizes, and the
//! reading stage alone (decode, parse, turns, signatures: what bounds the archive's wall
//! time) timed in this process, and the disk's own share: the same files (folders, names,
//! sizes) created by plain writes and made durable by one `syncfs` ("create ms"), so a run
//! whose archive is slow because the filesystem is says so beside its ratio.
//!
//! Run: `cargo bench --bench archive` (needs the `zstd` program; `/usr/bin/time` when
//! present measures peak RSS, otherwise /proc polling does).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_chapters::session::reader::{LogItem, LogReader, ResumePoint};
use dsh_chapters::session::writer::{
    generate_session, session_log_path, write_session, SessionScript,
};
use dsh_chapters::signature;
use dsh_chapters::turn::TurnAssembler;

/// Runs per size; the best of each side is compared (the machine is shared and noisy).
const REPEATS: usize = 7;

const SESSION: &str = "session-bench-0000-4000-8000-000000000000";

struct Setup {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    log: PathBuf,
    decompressed: u64,
}

fn setup(turns: usize, bytes_per_turn: usize) -> Setup {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    let home = root.join("home");
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let ws_str = ws.to_string_lossy().into_owned();
    let log = session_log_path(&home, &ws_str, SESSION, 4, true);
    std::fs::create_dir_all(log.parent().expect("dir")).expect("mkdir");
    let script = SessionScript::new(4, 1_764_400_000_000);
    let header = script.header(SESSION, &ws_str, 1_764_400_000_000);
    write_session(
        &log,
        true,
        &header,
        generate_session(1, turns, bytes_per_turn, 4, &ws_str),
        false,
    )
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

/// Wall time of `cmd`, and its peak RSS in KiB.
fn measure(mut cmd: Command) -> (Duration, u64) {
    let time = Path::new("/usr/bin/time");
    if time.exists() {
        let rss_file = tempfile::NamedTempFile::new().expect("tmp");
        let mut wrapped = Command::new(time);
        wrapped
            .arg("-f")
            .arg("%M")
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
        let status = wrapped.status().expect("run");
        let elapsed = start.elapsed();
        assert!(status.success(), "{cmd:?} failed");
        let rss = std::fs::read_to_string(rss_file.path())
            .expect("rss")
            .trim()
            .lines()
            .last()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0);
        return (elapsed, rss);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let mut peak = 0;
    loop {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", child.id())) {
            if let Some(v) = status.lines().find_map(|l| l.strip_prefix("VmHWM:")) {
                peak = peak.max(v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0));
            }
        }
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success());
            return (start.elapsed(), peak);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn zstd_dc(log: &Path) -> Duration {
    let mut c = Command::new("zstd");
    c.arg("-dc").arg(log).stdout(Stdio::null());
    let start = Instant::now();
    assert!(c.status().expect("zstd").success());
    start.elapsed()
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
    println!(
        "{:>6} {:>10} {:>10} {:>12} {:>12} {:>8} {:>10} {:>10} {:>7} {:>10}",
        "turns",
        "MiB(dec)",
        "MiB(zst)",
        "zstd -dc ms",
        "archive ms",
        "ratio",
        "peak RSS",
        "reader ms",
        "files",
        "create ms"
    );
    // ARCHIVE_BENCH_TURNS=2000 runs one size; ARCHIVE_BENCH_KEEP=1 keeps the scratch
    // home and workspaces (printed) for profiling by hand; ARCHIVE_BENCH_READER_ONLY=1
    // times only the reading stage.
    let only: Option<usize> = std::env::var("ARCHIVE_BENCH_TURNS")
        .ok()
        .and_then(|v| v.parse().ok());
    // Every scratch tree lives until the end: ext4 without a journal scans the inodes freed
    // in the last ~30 s on each create, so deleting one size's stores right before the next
    // size's timed runs would charge them a cost no real archive pays. (For the same reason,
    // leave ~30 s between two runs of this bench.)
    let mut kept = Vec::new();
    for (turns, per_turn) in [(500usize, 27_000usize), (2_000, 27_000)] {
        if only.is_some_and(|n| n != turns) {
            continue;
        }
        let mut s = setup(turns, per_turn);
        let zst = std::fs::metadata(&s.log).expect("meta").len();
        let mut best_zstd = Duration::MAX;
        let mut best_archive = Duration::MAX;
        let mut best_reader = Duration::MAX;
        let mut peak = 0;
        let mut best_create = Duration::MAX;
        let mut written = Vec::new();
        let ws = s.ws.to_string_lossy().into_owned();
        let reader_only = std::env::var_os("ARCHIVE_BENCH_READER_ONLY").is_some();
        for n in 0..REPEATS {
            let start = Instant::now();
            assert_eq!(read_and_sign(&s.log, &ws), turns);
            best_reader = best_reader.min(start.elapsed());
            if reader_only {
                continue;
            }
            best_zstd = best_zstd.min(zstd_dc(&s.log));
            fresh_workspace(&mut s, n);
            let (t, rss) = measure(chapters(&s, &["archive"]));
            best_archive = best_archive.min(t);
            peak = peak.max(rss);
            written = files_under(&s.ws.join(".dsh-chapters"));
            let probe = s.ws.with_file_name(format!("create-{n}"));
            best_create = best_create.min(create_like(&written, &probe));
        }
        println!(
            "{:>6} {:>10.1} {:>10.1} {:>12.1} {:>12.1} {:>7.2}x {:>7.1} MiB {:>10.1} {:>7} {:>10.1}",
            turns,
            s.decompressed as f64 / 1048576.0,
            zst as f64 / 1048576.0,
            best_zstd.as_secs_f64() * 1e3,
            best_archive.as_secs_f64() * 1e3,
            best_archive.as_secs_f64() / best_zstd.as_secs_f64(),
            peak as f64 / 1024.0,
            best_reader.as_secs_f64() * 1e3,
            written.len(),
            best_create.as_secs_f64() * 1e3
        );
        kept.push(s);
    }
    if std::env::var_os("ARCHIVE_BENCH_KEEP").is_some() {
        for s in kept {
            eprintln!("kept: {}", s._tmp.keep().display());
        }
    }
}

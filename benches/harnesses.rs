//! Harness benchmark: `chapters archive` of a ≥ 50 MB Claude Code transcript and of a
//! ≥ 50 MB Codex rollout vs `jq -c . FILE > /dev/null` of the same file (a parse floor a user
//! would recognise), side by side in one run, best of a few each; and the archive's peak RSS
//! at two sizes (flat: memory is bounded by the line count, never by the file's size).
//!
//! The files repeat the real fixtures (`tests/it/fixtures/{claude-code,codex}/`) with fresh
//! ids: every copy is one more completed turn.
//!
//! Run: `cargo bench --bench harnesses` (needs `jq`; peak RSS is read from /proc while the
//! archive runs). `HARNESS_BASELINE_BIN=PATH` archives the same files with an earlier
//! build's `chapters` too, beside this one (its time and peak RSS at both sizes).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const REPEATS: usize = 3;
const MB: usize = 1 << 20;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/fixtures")
}

struct Setup {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    ws: PathBuf,
    file: PathBuf,
    bytes: u64,
}

fn workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    let home = root.join("home");
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join(".git")).expect("ws");
    std::fs::write(
        ws.join(".git/config"),
        "[remote \"origin\"]\n\turl = https://github.com/example/bench.git\n",
    )
    .expect("git config");
    std::fs::create_dir_all(&home).expect("home");
    (tmp, home, ws)
}

fn quiet(path: &Path) {
    let day_ago = std::time::SystemTime::now() - Duration::from_secs(86_400);
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(day_ago))
        .expect("mtime");
}

/// A Claude Code transcript of at least `size` bytes: the compaction fixture's turn again
/// and again, each copy with fresh uuids chained to the one before and fresh message ids.
fn claude_code(size: usize) -> Setup {
    let (tmp, home, ws) = workspace();
    let ws_str = ws.to_string_lossy().into_owned();
    let text = std::fs::read_to_string(fixtures().join("claude-code/v2.1.39-compaction.jsonl"))
        .expect("fixture");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let sid = "0b0b0b0b-0000-4000-8000-00000000be11";
    let key: String = ws_str
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = home.join("claude/projects").join(key);
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join(format!("{sid}.jsonl"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&file).expect("create"));
    let (mut written, mut copy, mut counter) = (0usize, 0u64, 0u64);
    let mut prev: Option<String> = None;
    while written < size {
        for l in &lines {
            let mut l = l.clone();
            if l.get("uuid").is_some() {
                counter += 1;
                let u = format!("00000000-0000-4000-8000-{counter:012x}");
                l["uuid"] = u.clone().into();
                l["parentUuid"] = prev.clone().map_or(Value::Null, Value::from);
                prev = Some(u);
            }
            if l.get("cwd").is_some() {
                l["cwd"] = ws_str.clone().into();
            }
            l["sessionId"] = sid.into();
            if let Some(id) = l["message"]["id"].as_str().map(str::to_owned) {
                l["message"]["id"] = format!("{id}-{copy}").into();
            }
            let s = l.to_string();
            written += s.len() + 1;
            writeln!(out, "{s}").expect("write");
        }
        copy += 1;
    }
    out.flush().expect("flush");
    drop(out);
    quiet(&file);
    Setup {
        _tmp: tmp,
        home,
        ws,
        bytes: written as u64,
        file,
    }
}

/// A Codex rollout of at least `size` bytes: the long real task again and again.
fn codex(size: usize) -> Setup {
    let (tmp, home, ws) = workspace();
    let ws_str = ws.to_string_lossy().into_owned();
    let text = std::fs::read_to_string(
        fixtures()
            .join("codex/rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"),
    )
    .expect("fixture");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let dir = home.join("codex/sessions/2026/02/23");
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&file).expect("create"));
    let (mut written, mut copy) = (0usize, 0u64);
    while written < size {
        for l in &lines {
            if copy > 0 && l["type"] == "session_meta" {
                continue;
            }
            let mut l = l.clone();
            if l["payload"]["cwd"].is_string() {
                l["payload"]["cwd"] = ws_str.clone().into();
            }
            if let Some(id) = l["payload"]["call_id"].as_str().map(str::to_owned) {
                l["payload"]["call_id"] = format!("{id}-{copy}").into();
            }
            let s = l.to_string();
            written += s.len() + 1;
            writeln!(out, "{s}").expect("write");
        }
        copy += 1;
    }
    out.flush().expect("flush");
    drop(out);
    quiet(&file);
    Setup {
        _tmp: tmp,
        home,
        ws,
        bytes: written as u64,
        file,
    }
}

/// This build's `chapters`, or the baseline's.
fn chapters(bin: &Path, s: &Setup, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(args)
        .current_dir(&s.ws)
        .env("DSH_HOME", &s.home)
        .env("CLAUDE_CONFIG_DIR", s.home.join("claude"))
        .env("CODEX_HOME", s.home.join("codex"))
        .env("CHAPTERS_HARNESS_ID", "bench");
    c.stdout(Stdio::null()).stderr(Stdio::inherit());
    c
}

/// Wall time of `cmd`, and its peak RSS in KiB.
fn measure(mut cmd: Command) -> (Duration, u64) {
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
            assert!(status.success(), "{cmd:?} failed");
            return (start.elapsed(), peak);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn jq(file: &Path) -> Duration {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("jq -c . '{}' > /dev/null", file.display()))
        .stdout(Stdio::null());
    measure(c).0
}

fn ours() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_chapters"))
}

/// Best archive time by `bin` (a fresh store each run) and the largest peak RSS.
fn archive(bin: &Path, s: &Setup) -> (Duration, u64) {
    let mut best = Duration::MAX;
    let mut peak = 0;
    for _ in 0..REPEATS {
        let _ = std::fs::remove_dir_all(s.ws.join(".dsh-chapters"));
        let status = chapters(bin, s, &["init"]).status().expect("init");
        assert!(status.success());
        let (t, rss) = measure(chapters(bin, s, &["archive"]));
        best = best.min(t);
        peak = peak.max(rss);
    }
    (best, peak)
}

fn row(name: &str, s: &Setup) {
    let (ours, _) = archive(ours(), s);
    let floor = (0..REPEATS).map(|_| jq(&s.file)).min().expect("runs");
    let mb = s.bytes as f64 / MB as f64;
    println!(
        "{name}: {mb:.1} MB — archive {:.0} ms ({:.1} MB/s), jq -c . {:.0} ms ({:.1} MB/s), jq/archive = {:.2}",
        ours.as_secs_f64() * 1e3,
        mb / ours.as_secs_f64(),
        floor.as_secs_f64() * 1e3,
        mb / floor.as_secs_f64(),
        floor.as_secs_f64() / ours.as_secs_f64()
    );
}

/// Peak RSS at both sizes, this build's and the baseline's side by side (alternated).
fn rss(name: &str, small: &Setup, big: &Setup) {
    let baseline = std::env::var_os("HARNESS_BASELINE_BIN").map(PathBuf::from);
    let mut bins: Vec<(&str, &Path)> = vec![("", ours())];
    if let Some(b) = baseline.as_deref() {
        bins.push((" (baseline)", b));
    }
    let mut peaks = vec![(0, 0, Duration::ZERO); bins.len()];
    for (s, is_big) in [(small, false), (big, true)] {
        for ((_, bin), peak) in bins.iter().zip(&mut peaks) {
            let (t, rss) = archive(bin, s);
            if is_big {
                (peak.1, peak.2) = (rss, t);
            } else {
                peak.0 = rss;
            }
        }
    }
    for ((label, _), (at_small, at_big, t)) in bins.iter().zip(peaks) {
        println!(
            "{name} peak RSS{label}: {:.1} MB at {:.0} MB, {:.1} MB at {:.0} MB ({:+.1} %); archive {:.0} ms at {:.0} MB",
            at_small as f64 / 1024.0,
            small.bytes as f64 / MB as f64,
            at_big as f64 / 1024.0,
            big.bytes as f64 / MB as f64,
            (at_big as f64 / at_small as f64 - 1.0) * 100.0,
            t.as_secs_f64() * 1e3,
            big.bytes as f64 / MB as f64,
        );
    }
}

fn main() {
    let cc = claude_code(50 * MB);
    row("claude-code", &cc);
    let small = claude_code(25 * MB);
    rss("claude-code", &small, &cc);
    drop((cc, small));
    let cx = codex(50 * MB);
    row("codex", &cx);
    let small = codex(25 * MB);
    rss("codex", &small, &cx);
}

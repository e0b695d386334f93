//! Pool convergence at team size (issue #17 point 9), side by side in one run: 8 machines
//! archive and `chapters sync` on their own schedules to one local pool for a while, a
//! quarter of their syncs SIGKILLed at a random moment; then the faults stop and all 8 sync
//! at once, round after round, until every machine's documents are in the pool and in every
//! other machine's mirror. Run twice: as it is (a local pool's publishers take turns on its
//! publish lock, backoff with jitter for races left), and with the baseline
//! `CHAPTERS_SYNC_RETRY=backoff` (no queue: they race, backoff with jitter, as before).
//!
//! Figures: syncs that gave up `diverged` (% of the syncs not killed), the most attempts
//! one commit took, and the quiet rounds until convergence (goal ≤ 2, none giving up).
//!
//! Run: `cargo bench --bench pool_converge`; `POOL_CONVERGE_SECS` (default 120) is how
//! long each side's faulty phase lasts, `POOL_CONVERGE_MACHINES` (default 8) how many
//! machines. The scaled-down version is the test `pool_converge::` in `tests/it/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_chapters::testkit::writer::{generate_session, session_log_path, LogWriter, SessionScript};

const START_MS: i64 = 1_764_400_000_000;

struct Machine {
    _tmp: tempfile::TempDir,
    name: String,
    home: PathBuf,
    ws: PathBuf,
}

/// xorshift64*, seeded: the one source of randomness.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

fn machine(i: usize, pool: &Path, retry: Option<&str>) -> Machine {
    let tmp = tempfile::tempdir().expect("tmp");
    let base = std::fs::canonicalize(tmp.path()).expect("canonical");
    let ws = base.join("ws");
    std::fs::create_dir_all(ws.join(".git")).expect("ws");
    std::fs::write(
        ws.join(".git/config"),
        "[remote \"origin\"]\n\turl = https://example.com/bench/widgets.git\n",
    )
    .expect("cfg");
    let m = Machine {
        _tmp: tmp,
        name: format!("machine-{i}"),
        home: base.join("home"),
        ws,
    };
    let ok = chapters(
        &m,
        retry,
        &[
            "link",
            pool.to_str().expect("utf8"),
            "--visibility",
            "private",
        ],
    )
    .status()
    .expect("link")
    .success();
    assert!(ok, "link {}", m.name);
    m
}

fn chapters(m: &Machine, retry: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chapters"));
    c.args(args)
        .current_dir(&m.ws)
        .env("DSH_HOME", &m.home)
        .env("CHAPTERS_HARNESS_ID", &m.name)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(r) = retry {
        c.env("CHAPTERS_SYNC_RETRY", r);
    }
    c
}

/// New work: a session of its own, archived.
fn new_work(m: &Machine, i: usize, n: usize, retry: Option<&str>) {
    let ws = m.ws.to_string_lossy().into_owned();
    let session = format!("session-{i:08}-0000-4000-8000-{n:012}");
    let path = session_log_path(&m.home, &ws, &session, 4, true);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let mut script = SessionScript::new(4, START_MS);
    let header = script.header(&session, &ws, START_MS);
    let mut w = LogWriter::create(&path, true, &header).expect("log");
    for t in generate_session((i * 100_000 + n) as u64, 6, 3_000, 4, &ws) {
        w.append_turn(&mut script, &t).expect("turn");
    }
    drop(w);
    // An archive waits for the store's lock a sync holds; a timeout is retried next time.
    let _ = chapters(m, retry, &["archive"]).status();
}

#[derive(Default)]
struct Tally {
    syncs: u64,
    killed: u64,
    gave_up: u64,
    other_failures: u64,
    most_attempts: u64,
}

/// One sync, killed after `kill_after` if given: `None` when it died of the signal, else
/// its code and attempts.
fn sync(m: &Machine, retry: Option<&str>, kill_after: Option<u64>) -> Option<(String, u64)> {
    let child = chapters(m, retry, &["sync", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sync");
    let pid = child.id();
    let killer = kill_after.map(|ms| {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        })
    });
    let out = child.wait_with_output().expect("wait");
    if let Some(k) = killer {
        k.join().expect("killer");
    }
    out.status.code()?;
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    Some((
        j["code"].as_str().unwrap_or("?").to_owned(),
        j["report"]["attempts"].as_u64().unwrap_or(0),
    ))
}

fn count(t: &mut Tally, outcome: Option<(String, u64)>) {
    t.syncs += 1;
    match outcome {
        None => t.killed += 1,
        Some((code, attempts)) => {
            t.most_attempts = t.most_attempts.max(attempts);
            match code.as_str() {
                "ok" => {}
                "diverged" => t.gave_up += 1,
                _ => t.other_failures += 1,
            }
        }
    }
}

fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            walk(&p, root, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.insert(rel.to_string_lossy().into_owned(), p);
        }
    }
}

/// Whether every machine's documents are in the pool (same bytes) and in every other
/// machine's mirror.
fn converged(machines: &[Machine], pool: &Path, key: &str) -> bool {
    let tree = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["ls-tree", "-r", "main"])
        .output()
        .expect("git ls-tree");
    let in_pool: BTreeMap<String, String> = String::from_utf8_lossy(&tree.stdout)
        .lines()
        .filter_map(|l| {
            let (meta, path) = l.split_once('\t')?;
            Some((path.to_owned(), meta.split(' ').nth(2)?.to_owned()))
        })
        .collect();
    for (i, m) in machines.iter().enumerate() {
        let store = m.ws.join(".dsh-chapters");
        let mut files = BTreeMap::new();
        walk(&store, &store, &mut files);
        for (rel, path) in files {
            let Some((p, _)) = dsh_chapters::pool::plan::pool_path(key, &rel) else {
                continue;
            };
            let Ok(bytes) = std::fs::read(&path) else {
                return false;
            };
            let id = dsh_chapters::pool::plan::blob_id(&bytes);
            if in_pool.get(&p) != Some(&id) {
                return false;
            }
            for (j, o) in machines.iter().enumerate() {
                if j != i
                    && std::fs::read(o.ws.join(".dsh-knowledge").join(&p)).ok()
                        != Some(bytes.clone())
                {
                    return false;
                }
            }
        }
    }
    true
}

struct Side {
    faulty: Tally,
    quiet: Tally,
    rounds: Option<u32>,
    commits: u64,
}

fn side(machines_n: usize, secs: u64, retry: Option<&str>) -> Side {
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let machines: Vec<Machine> = (0..machines_n).map(|i| machine(i, &pool, retry)).collect();
    let end = Instant::now() + Duration::from_secs(secs);
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = machines
            .iter()
            .enumerate()
            .map(|(i, m)| {
                s.spawn(move || {
                    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (i as u64 + 1));
                    let mut t = Tally::default();
                    let mut n = 0;
                    while Instant::now() < end {
                        n += 1;
                        new_work(m, i, n, retry);
                        let kill = (rng.below(4) == 0).then(|| 20 + rng.below(2_000));
                        count(&mut t, sync(m, retry, kill));
                    }
                    t
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("machine"))
            .collect()
    });
    let mut faulty = Tally::default();
    for t in tallies {
        faulty.syncs += t.syncs;
        faulty.killed += t.killed;
        faulty.gave_up += t.gave_up;
        faulty.other_failures += t.other_failures;
        faulty.most_attempts = faulty.most_attempts.max(t.most_attempts);
    }
    // Quiet rounds: every machine syncs at once, until converged (at most 6 rounds).
    let key = {
        let out = chapters(&machines[0], retry, &["status", "--json"])
            .stdout(Stdio::piped())
            .output()
            .expect("status");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        v["identity"]["projectKey"]
            .as_str()
            .expect("key")
            .to_owned()
    };
    let mut quiet = Tally::default();
    let mut rounds = None;
    for r in 1..=6u32 {
        let outcomes: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = machines
                .iter()
                .map(|m| s.spawn(move || sync(m, retry, None)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("sync"))
                .collect()
        });
        for o in outcomes {
            count(&mut quiet, o);
        }
        if converged(&machines, &pool, &key) {
            rounds = Some(r);
            break;
        }
    }
    let commits = Command::new("git")
        .arg("--git-dir")
        .arg(&pool)
        .args(["rev-list", "--count", "main"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(0);
    let fsck = Command::new("git")
        .arg("--git-dir")
        .arg(&pool)
        .args(["fsck", "--strict"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(fsck, "git fsck --strict failed on the pool");
    Side {
        faulty,
        quiet,
        rounds,
        commits,
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn main() {
    let secs: u64 = std::env::var("POOL_CONVERGE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    let n: usize = std::env::var("POOL_CONVERGE_MACHINES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{n} machines, {secs} s of faulty syncs per side; load average at start: {}",
        load.trim()
    );
    let mut rows = Vec::new();
    for (name, retry) in [
        ("backoff + jitter, no queue (baseline)", Some("backoff")),
        ("publish queue + backoff", None),
    ] {
        let s = side(n, secs, retry);
        let finished = s.faulty.syncs - s.faulty.killed;
        println!("{name}");
        println!(
            "  faulty phase: {} syncs, {} killed, {} gave up diverged ({:.1} % of {finished} not killed), {} other failures, at most {} attempts",
            s.faulty.syncs,
            s.faulty.killed,
            s.faulty.gave_up,
            pct(s.faulty.gave_up, finished),
            s.faulty.other_failures,
            s.faulty.most_attempts
        );
        println!(
            "  quiet rounds: converged after {}, {} of {} syncs gave up, at most {} attempts; {} commits in the pool",
            s.rounds.map_or("more than 6".to_owned(), |r| r.to_string()),
            s.quiet.gave_up + s.quiet.other_failures,
            s.quiet.syncs,
            s.quiet.most_attempts,
            s.commits
        );
        rows.push(pct(s.faulty.gave_up, finished));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "gave up diverged: {:.1} % → {:.1} % (load average at end: {})",
        rows[0],
        rows[1],
        load.trim()
    );
}

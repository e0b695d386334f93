//! Issue #17 point 9, scaled down: several machines archive and sync concurrently to one
//! local pool while some of their syncs are SIGKILLed at random points (a timer, or a crash
//! point); then the faults stop and every machine syncs, all at once, for two rounds. After
//! those two rounds: every machine's documents are in the pool and in every other machine's
//! mirror, no sync of the quiet rounds gave up (`diverged` is retried with backoff and
//! jitter until it succeeds), no pool file was written by two machines, every head seen on
//! the way is an ancestor of the last, and `git fsck --strict` is clean.
//!
//! The full version (8 machines, minutes, figures beside the old retry) is `cargo bench
//! --bench pool_converge` (docs/benchmarks.md, "Pool publishing").

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::pool::{assert_fsck, git, session_id};
use crate::support::{link_private, Sandbox};

const MACHINES: usize = 8;
const FAULT_ROUNDS: usize = 3;

/// xorshift64*: the test's one source of randomness, seeded, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// How one sync of a round is disturbed.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    /// SIGKILL after this many ms (maybe after the sync finished: then it did not matter).
    KillAfter(u64),
    /// `CHAPTERS_CRASH_AT=<point>`: killed there by itself, if it gets there.
    CrashAt(&'static str),
}

/// What a sync ended with: its code (`None` when it died of a signal) and the pool's head
/// it reported.
struct Outcome {
    code: Option<String>,
    head: Option<String>,
    attempts: u64,
    /// What the sync printed, for a failure's message.
    printed: String,
}

fn sync(m: &Sandbox, fault: Fault) -> Outcome {
    let mut cmd = m.cmd(&["sync", "--json"]);
    if let Fault::CrashAt(point) = fault {
        cmd.env("CHAPTERS_CRASH_AT", point);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chapters sync");
    let pid = child.id();
    let killer = match fault {
        Fault::KillAfter(ms) => Some(std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            // The child is not reaped before this thread is joined, so the pid is still
            // the sync's (a zombie at worst, where the signal does nothing).
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        })),
        _ => None,
    };
    let out = child.wait_with_output().expect("wait for chapters sync");
    if let Some(k) = killer {
        k.join().expect("killer thread");
    }
    if out.status.code().is_none() {
        return Outcome {
            code: None,
            head: None,
            attempts: 0,
            printed: String::new(),
        };
    }
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: sync printed no JSON ({e}): {}{}",
            m.harness,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(j["code"].is_string(), "{}: sync printed {j}", m.harness);
    Outcome {
        code: j["code"].as_str().map(str::to_owned),
        head: j["report"]["poolHead"].as_str().map(str::to_owned),
        attempts: j["report"]["attempts"].as_u64().unwrap_or(0),
        printed: format!("{j} {}", String::from_utf8_lossy(&out.stderr)),
    }
}

/// New work on machine `i`: a session of its own (distinct seed, so no two machines write
/// the same artifact), archived.
pub(crate) fn new_work(m: &Sandbox, i: usize, n: usize) {
    let turns: Vec<dsh_chapters::testkit::writer::TurnSpec> =
        dsh_chapters::testkit::writer::generate_session(
            (i * 100 + n) as u64,
            6,
            3_000,
            4,
            &m.ws_str(),
        )
        .collect();
    m.write_session(&session_id(i, n), 4, true, &turns);
    m.ok(&["archive"]);
}

/// Every machine syncs at once, each with its fault; the outcomes in machine order.
fn round(machines: &[Sandbox], faults: &[Fault]) -> Vec<Outcome> {
    std::thread::scope(|s| {
        let handles: Vec<_> = machines
            .iter()
            .zip(faults)
            .map(|(m, f)| s.spawn(move || sync(m, *f)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("sync thread"))
            .collect()
    })
}

fn project_key(m: &Sandbox) -> String {
    m.json(&["status", "--json"])["identity"]["projectKey"]
        .as_str()
        .expect("projectKey")
        .to_owned()
}

/// `path → bytes` of what a machine's store publishes (its documents, as pool paths).
fn documents(m: &Sandbox, key: &str) -> BTreeMap<String, Vec<u8>> {
    m.snapshot()
        .into_iter()
        .filter_map(|(rel, bytes)| {
            dsh_chapters::pool::plan::pool_path(key, &rel).map(|(p, _)| (p, bytes))
        })
        .collect()
}

/// Pool path → the machines (commit author emails) whose commits added or changed it.
fn writers(pool: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let log = git(
        pool,
        &[
            "log",
            "--format=@%ae",
            "--name-only",
            "--no-renames",
            "main",
        ],
    );
    let mut by_path: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut author = String::new();
    for line in log.lines().filter(|l| !l.is_empty()) {
        match line.strip_prefix('@') {
            Some(a) => author = a.to_owned(),
            None => {
                by_path
                    .entry(line.to_owned())
                    .or_default()
                    .insert(author.clone());
            }
        }
    }
    by_path
}

#[test]
fn machines_syncing_at_once_through_kills_converge_within_two_quiet_rounds() {
    let seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().expect("tmp");
    let pool = tmp.path().join("pool.git");
    let machines: Vec<Sandbox> = (0..MACHINES)
        .map(|i| {
            let m = Sandbox::machine(&format!("machine-{i}"));
            link_private(&m, &pool);
            new_work(&m, i, 1);
            m
        })
        .collect();
    let mut heads: Vec<String> = Vec::new();
    // (killed, gave up, most attempts) over the fault rounds, printed for a reader.
    let (mut killed, mut gave_up, mut most) = (0, 0, 0);

    // Faults: every round each machine has new work, and all sync at once; some syncs are
    // killed by a timer, some at a crash point.
    for r in 0..FAULT_ROUNDS {
        std::thread::scope(|s| {
            for (i, m) in machines.iter().enumerate() {
                s.spawn(move || new_work(m, i, r + 2));
            }
        });
        let faults: Vec<Fault> = (0..MACHINES)
            .map(|_| match rng.below(6) {
                0 | 1 => Fault::KillAfter(50 + rng.below(1_500)),
                2 => Fault::CrashAt(if rng.below(2) == 0 {
                    "sync-after-push"
                } else {
                    "sync-after-materialize"
                }),
                _ => Fault::None,
            })
            .collect();
        for (m, o) in machines.iter().zip(round(&machines, &faults)) {
            // A sync may give up under faults (its store keeps everything); it may not
            // fail any other way.
            killed += usize::from(o.code.is_none());
            gave_up += usize::from(o.code.as_deref() == Some("diverged"));
            most = most.max(o.attempts);
            if let Some(code) = &o.code {
                assert!(
                    code == "ok" || code == "diverged",
                    "fault round {r} (seed {seed:#x}): {} ended {code}: {}",
                    m.harness,
                    o.printed
                );
            }
            heads.extend(o.head);
        }
        if let Ok(h) = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&pool)
            .args(["rev-parse", "--verify", "-q", "main"])
            .output()
        {
            heads.extend(
                Some(String::from_utf8_lossy(&h.stdout).trim().to_owned())
                    .filter(|h| !h.is_empty()),
            );
        }
    }

    eprintln!(
        "fault rounds: {} syncs, {killed} killed, {gave_up} gave up, at most {most} attempts",
        FAULT_ROUNDS * MACHINES
    );
    // The faults stop: two rounds of every machine syncing at once, none of which gives up.
    for r in 0..2 {
        let outcomes = round(&machines, &[Fault::None; MACHINES]);
        for (m, o) in machines.iter().zip(outcomes) {
            assert_eq!(
                o.code.as_deref(),
                Some("ok"),
                "quiet round {r} (seed {seed:#x}): {}'s sync did not succeed",
                m.harness
            );
            eprintln!(
                "quiet round {r}: {} took {} attempt(s)",
                m.harness, o.attempts
            );
            heads.extend(o.head);
        }
    }

    // Every machine's documents are in the pool, with its store's bytes, and in every
    // other machine's mirror.
    let key = project_key(&machines[0]);
    let own: Vec<BTreeMap<String, Vec<u8>>> = machines.iter().map(|m| documents(m, &key)).collect();
    for (i, docs) in own.iter().enumerate() {
        assert!(!docs.is_empty(), "machine-{i} archived nothing");
        for (p, bytes) in docs {
            let id = git(&pool, &["rev-parse", &format!("main:{p}")]);
            assert_eq!(
                id.trim(),
                dsh_chapters::pool::plan::blob_id(bytes),
                "machine-{i}'s {p} in the pool"
            );
            for (j, m) in machines.iter().enumerate().filter(|(j, _)| *j != i) {
                let mirrored = crate::pool::mirror_bytes(m, p)
                    .unwrap_or_else(|| panic!("machine-{i}'s {p} not in machine-{j}'s mirror"));
                assert!(
                    &mirrored == bytes,
                    "machine-{i}'s {p} differs in machine-{j}'s mirror"
                );
            }
        }
    }

    // No document was written by two machines (derived pages — index, README — are
    // everyone's by design).
    for (p, by) in writers(&pool) {
        let document = [
            "chapters/",
            "artifacts/",
            "collections/",
            "rules/",
            "edits/",
            "forget/",
        ]
        .iter()
        .any(|d| p.starts_with(d));
        assert!(!document || by.len() == 1, "{p} was written by {by:?}");
    }

    // The pool only moved forward: every head seen is an ancestor of the last.
    let last = git(&pool, &["rev-parse", "main"]).trim().to_owned();
    for h in &heads {
        let ok = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&pool)
            .args(["merge-base", "--is-ancestor", h, &last])
            .status()
            .expect("git merge-base")
            .success();
        assert!(
            ok,
            "{h}, a head seen on the way, is not an ancestor of {last}"
        );
    }
    assert_fsck(&pool);
}

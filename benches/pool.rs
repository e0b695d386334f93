//! Pool benchmark, side by side in one run:
//! 1. publishing 1,000 new chapters with their artifacts to a local-path pool
//!    (`chapters sync`) vs native git (`git add -A`, `git commit`, `git push` of the same
//!    files into a bare repository);
//! 2. publishing +10 chapters into a pool of 10,000 vs a pool of 100;
//! 3. `chapters scan --pool` over a pool of 10,000 chapters (+10,000 artifacts, ten commits)
//!    vs `git rev-list --objects --all | git cat-file --batch` over the same pool.
//!
//! 4. a year's scale (`POOL_BENCH=scale`, size by `POOL_SCALE=10000`): a pool built by 100
//!    publishes of chapters with topics and dates (one topic on every chapter, so its index
//!    shard is the biggest), then `git count-objects -v`, `git clone --no-local` of the pool vs
//!    of the same pool after `git gc --aggressive`, +10 chapters at that size vs at 100, and the
//!    pool's size on disk per chapter; then a new machine joins the big pool: its first
//!    `chapters sync` (time, peak RSS through `/usr/bin/time`, bytes and files written into
//!    its `.dsh-knowledge/`) beside `git clone --no-local` of the same pool. `POOL_GC=plain`
//!    uses `git gc` instead of `git gc --aggressive` as the clone's baseline (at 100,000
//!    chapters the aggressive one takes too long on a shared machine). `POOL_BASELINE_BIN=PATH`
//!    measures an earlier build's `chapters` beside this one in the same run (the +10 on pools
//!    it builds itself, a first sync into the same big pool); `POOL_PROFILE` runs one more +10
//!    and one more first sync under a profiler (see `profile_plus10`).
//!
//! 5. a new machine's first sync alone (`POOL_BENCH=first`, see `first_sync_bench`): this
//!    build beside `POOL_BASELINE_BIN`'s, alternated, on one pool that `POOL_KEEP=DIR` keeps
//!    for later runs.
//!
//! 6. +10 chapters alone (`POOL_BENCH=plus10`, see `plus10_bench`): at 100 and at
//!    `POOL_SCALE`, this build beside `POOL_BASELINE_BIN`'s, alternated round by round, on a
//!    big machine `POOL_KEEP=DIR` keeps (building it takes minutes; the fourth's +10 builds
//!    its pools each run). Each chapter's turns are signed into its session's ledger first,
//!    as the daemon does, so a sync has real `collections/` to list.
//!
//! 7. what a sync publishes, this build vs `POOL_BASELINE_BIN`'s (`POOL_BENCH=same`, see
//!    `same_bench`): the same +10s on two copies of one machine, the pools' trees compared.
//!
//! Run: `cargo bench --bench pool` (needs the `git` program for the baselines);
//! `POOL_BENCH=scan cargo bench --bench pool` runs only the third, `POOL_BENCH=scale` the
//! fourth, `POOL_BENCH=first` the fifth, `POOL_BENCH=plus10` the sixth, `POOL_BENCH=same` the
//! seventh.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Machine {
    /// Removed on drop; `None` for a machine kept across runs (`POOL_KEEP`).
    _tmp: Option<tempfile::TempDir>,
    harness: &'static str,
    home: PathBuf,
    ws: PathBuf,
    pool: PathBuf,
    store: PathBuf,
}

/// Chapters per session: real pools spread chapters over many sessions (the pool's
/// `chapters/<pk>/<session>/` directories), so the benchmark does too.
const PER_SESSION: usize = 50;

fn session(i: usize) -> String {
    format!("session-bench-0000-4000-8000-{:012}", i / PER_SESSION)
}

fn machine() -> Machine {
    machine_on(None, "bench")
}

/// A machine of the bench's project linked to `pool` (a new pool of its own when `None`).
fn machine_on(pool: Option<&Path>, harness: &'static str) -> Machine {
    let tmp = tempfile::tempdir().expect("tmp");
    let base = std::fs::canonicalize(tmp.path()).expect("canonical");
    let m = machine_in(&base, pool, harness, Some(tmp));
    link(&m);
    m
}

/// `chapters link` of `m` to its pool, private.
fn link(m: &Machine) {
    run(chapters(
        m,
        &[
            "link",
            m.pool.to_str().expect("utf8"),
            "--visibility",
            "private",
        ],
    ));
}

/// The machine whose files are under `base` (not linked here).
fn machine_in(
    base: &Path,
    pool: Option<&Path>,
    harness: &'static str,
    tmp: Option<tempfile::TempDir>,
) -> Machine {
    let home = base.join("home");
    let ws = base.join("ws");
    std::fs::create_dir_all(ws.join(".git")).expect("ws");
    std::fs::write(
        ws.join(".git/config"),
        "[remote \"origin\"]\n\turl = https://example.com/bench/widgets.git\n",
    )
    .expect("cfg");
    let pool = pool.map_or_else(|| base.join("pool.git"), Path::to_path_buf);
    Machine {
        harness,
        home,
        store: ws.join(".dsh-chapters"),
        ws,
        pool,
        _tmp: tmp,
    }
}

fn chapters(m: &Machine, args: &[&str]) -> Command {
    chapters_of(Path::new(env!("CARGO_BIN_EXE_chapters")), m, args)
}

/// `chapters` run from the binary `bin` (this build's, or `POOL_BASELINE_BIN`'s).
fn chapters_of(bin: &Path, m: &Machine, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(args)
        .current_dir(&m.ws)
        .env("DSH_HOME", &m.home)
        .env("CHAPTERS_HARNESS_ID", m.harness);
    c.stdout(Stdio::null());
    c
}

fn run(mut c: Command) -> Duration {
    let start = Instant::now();
    let st = c.status().expect("run");
    assert!(st.success(), "{c:?}");
    start.elapsed()
}

/// A chapter of ~4 KB and an artifact of ~8 KB, like the archive writes them.
fn chapter_text(i: usize) -> String {
    let root = session(i);
    let mut s = format!("---\ntitle: \"Chapter {i}\"\nkind: chapter\nsessionId: {root}\nrootSessionId: {root}\nseqRange: [{}, {}]\n---\n# Chapter {i}\n\n", i * 10, i * 10 + 9);
    while s.len() < 4096 {
        s.push_str(&format!("**User** · seq {i}\n\nFix the refresh middleware, step {i}, and run the tests again.\n\n"));
    }
    s
}

fn artifact_text(i: usize) -> String {
    (0..200)
        .map(|l| format!("build output {i:06} line {l:04} ok\n"))
        .collect()
}

/// Write chapters `from..to` (and one artifact each) into the store; returns their pool paths.
fn write_chapters(m: &Machine, key: &str, from: usize, to: usize) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for i in from..to {
        let root = m.store.join(session(i));
        let chapters = root.join("chapters");
        std::fs::create_dir_all(&chapters).expect("mkdir");
        let name = format!("{:03}-chapter-{i}.md", i % PER_SESSION + 1);
        let text = chapter_text(i);
        std::fs::write(chapters.join(&name), &text).expect("write");
        out.push((format!("chapters/{key}/{}/{name}", session(i)), text));
        let art = artifact_text(i);
        let sha = dsh_chapters::names::sha256_hex(art.as_bytes());
        let dir = root.join("artifacts").join(&sha[..2]);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(format!("{sha}.txt")), &art).expect("write");
        out.push((format!("artifacts/{key}/{}/{sha}.txt", &sha[..2]), art));
    }
    out
}

fn project_key(m: &Machine) -> String {
    let out = chapters(m, &["status", "--json"])
        .stdout(Stdio::piped())
        .output()
        .expect("status");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    v["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned()
}

/// Native git: the same files committed in a work tree and pushed into a bare repo.
fn native_git(files: &[(String, String)]) -> Duration {
    let tmp = tempfile::tempdir().expect("tmp");
    let work = tmp.path().join("work");
    let bare = tmp.path().join("bare.git");
    let git = |dir: &Path, args: &[&str]| {
        let st = Command::new("git")
            .current_dir(dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("git");
        assert!(st.success(), "git {args:?}");
    };
    std::fs::create_dir_all(&work).expect("mkdir");
    git(tmp.path(), &["init", "-q", "--bare", "bare.git"]);
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["config", "user.email", "b@b"]);
    git(&work, &["config", "user.name", "b"]);
    for (p, text) in files {
        let path = work.join(p);
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let start = Instant::now();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "publish"]);
    git(&work, &["push", "-q", bare.to_str().expect("utf8"), "main"]);
    start.elapsed()
}

fn best<F: FnMut() -> Duration>(n: usize, mut f: F) -> Duration {
    (0..n).map(|_| f()).min().expect("n > 0")
}

/// The baseline of the scan: every object of the pool's history read by git itself.
fn native_rev_list_cat_file(pool: &Path) -> Duration {
    let start = Instant::now();
    let mut list = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["rev-list", "--objects", "--all"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("rev-list");
    let cat = Command::new("git")
        .arg("--git-dir")
        .arg(pool)
        .args(["cat-file", "--batch"])
        .stdin(list.stdout.take().expect("pipe"))
        .stdout(Stdio::null())
        .status()
        .expect("cat-file");
    assert!(cat.success() && list.wait().expect("wait").success());
    start.elapsed()
}

fn scan_bench() {
    let m = machine();
    let key = project_key(&m);
    for batch in 0..10 {
        write_chapters(&m, &key, batch * 1000, (batch + 1) * 1000);
        run(chapters(&m, &["sync"]));
    }
    // Warm both once (the page cache holds the pool for each alike).
    run(chapters(&m, &["scan", "--pool", "--json"]));
    native_rev_list_cat_file(&m.pool);
    let (mut whole, mut store, mut native) = (Duration::MAX, Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        whole = whole.min(run(chapters(&m, &["scan", "--pool", "--json"])));
        store = store.min(run(chapters(&m, &["scan", "--json"])));
        native = native.min(native_rev_list_cat_file(&m.pool));
    }
    let pool_only = whole.saturating_sub(store);
    println!("scan with today's rules, pool of 10,000 chapters + 10,000 artifacts (10 commits)");
    println!(
        "  chapters scan --pool      {:>8.1} ms (store + mirror + pool history)",
        whole.as_secs_f64() * 1e3
    );
    println!(
        "  chapters scan (store)     {:>8.1} ms",
        store.as_secs_f64() * 1e3
    );
    println!(
        "  the pool's share          {:>8.1} ms",
        pool_only.as_secs_f64() * 1e3
    );
    println!(
        "  git rev-list | cat-file   {:>8.1} ms",
        native.as_secs_f64() * 1e3
    );
    println!(
        "  ratio (scan --pool / git) {:>8.2}x; pool's share / git {:.2}x",
        whole.as_secs_f64() / native.as_secs_f64(),
        pool_only.as_secs_f64() / native.as_secs_f64()
    );
}

fn main() {
    if std::env::var("POOL_BENCH").as_deref() == Ok("scan") {
        scan_bench();
        return;
    }
    if std::env::var("POOL_BENCH").as_deref() == Ok("scale") {
        scale_bench();
        return;
    }
    if std::env::var("POOL_BENCH").as_deref() == Ok("first") {
        first_sync_bench();
        return;
    }
    if std::env::var("POOL_BENCH").as_deref() == Ok("plus10") {
        plus10_bench();
        return;
    }
    if std::env::var("POOL_BENCH").as_deref() == Ok("same") {
        same_bench();
        return;
    }
    // 1. 1,000 new chapters (+1,000 artifacts) into an empty pool vs native git.
    let mut ours = Duration::MAX;
    let mut native = Duration::MAX;
    for _ in 0..3 {
        let m = machine();
        let key = project_key(&m);
        let files = write_chapters(&m, &key, 0, 1000);
        ours = ours.min(run(chapters(&m, &["sync"])));
        native = native.min(native_git(&files));
    }
    println!("publish 1,000 chapters + 1,000 artifacts to a local pool");
    println!("  chapters sync   {:>8.1} ms", ours.as_secs_f64() * 1e3);
    println!(
        "  git add/commit/push {:>8.1} ms",
        native.as_secs_f64() * 1e3
    );
    println!(
        "  ratio           {:>8.2}x (goal ≤ 1.0)",
        ours.as_secs_f64() / native.as_secs_f64()
    );

    // 2. +10 chapters into a pool of 10,000 vs of 100.
    let mut times = Vec::new();
    for size in [100usize, 10_000] {
        let m = machine();
        let key = project_key(&m);
        write_chapters(&m, &key, 0, size);
        run(chapters(&m, &["sync"]));
        let mut next = size;
        let t = best(5, || {
            write_chapters(&m, &key, next, next + 10);
            next += 10;
            run(chapters(&m, &["sync"]))
        });
        times.push((size, t));
    }
    println!("publish +10 chapters (+10 artifacts) into an existing pool");
    for (size, t) in &times {
        println!("  pool of {:>6}   {:>8.1} ms", size, t.as_secs_f64() * 1e3);
    }
    println!(
        "  ratio 10,000/100 {:>7.2}x (goal ≤ 1.5)",
        times[1].1.as_secs_f64() / times[0].1.as_secs_f64()
    );

    // 3. the leak scan over the whole history of a pool of 10,000 chapters.
    scan_bench();
}

/// A chapter with topics and a date: one topic (`refresh`) on every chapter, one of 20 others,
/// 1,000 chapters a month from January 2026.
fn dated_chapter_text(i: usize) -> String {
    let root = session(i);
    let (year, month, day) = (2026 + i / 12_000, (i / 1000) % 12 + 1, (i % 1000) / 40 + 1);
    let mut s = format!(
        "---\ntitle: \"Chapter {i}\"\nkind: chapter\nsessionId: {root}\nrootSessionId: {root}\nseqRange: [{}, {}]\ndate: \"{year}-{month:02}-{day:02}T10:00:00Z\"\ntopics: [refresh, area-{}]\n---\n# Chapter {i}\n\n",
        i * 10,
        i * 10 + 9,
        i % 20
    );
    // Varied text, so the chapter compresses like a real one rather than to nothing.
    let mut x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    while s.len() < 4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("**User** · seq {i}\n\nFix the refresh middleware near {x:016x}, step {}, and run the tests again.\n\n", x % 1000));
    }
    s
}

/// Writes chapters `from..to` into the store and records them in the store's catalog, as
/// the archive does (without a record the search table — and so the topic index — would not
/// see them before its periodic rescan). Each chapter's turns are signed first into its
/// session's `collections/` ledger through the signer, as the daemon does (a real root has
/// one; a sync lists it).
fn write_dated(m: &Machine, from: usize, to: usize) {
    sign_dated(m, from, to);
    let mut by_folder: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for i in from..to {
        let chapters = m.store.join(session(i)).join("chapters");
        std::fs::create_dir_all(&chapters).expect("mkdir");
        let name = format!("{:03}-chapter-{i}.md", i % PER_SESSION + 1);
        std::fs::write(chapters.join(&name), dated_chapter_text(i)).expect("write");
        by_folder
            .entry(format!(".dsh-chapters/{}/chapters", session(i)))
            .or_default()
            .push(name);
    }
    let names: Vec<(String, Vec<&str>)> = by_folder
        .iter()
        .map(|(folder, names)| (folder.clone(), names.iter().map(String::as_str).collect()))
        .collect();
    let changes: Vec<(&str, &[&str])> = names
        .iter()
        .map(|(folder, names)| (folder.as_str(), names.as_slice()))
        .collect();
    dsh_chapters::testkit::catalog::record(&m.store, &changes);
    // A baseline binary older than the store's catalog (`POOL_BASELINE_BIN`) learns of them
    // from the change journal it kept: a line per folder in its format, when it has one.
    let journal = m.store.join(".changes.jsonl");
    if journal.is_file() {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&journal)
            .expect("journal");
        for (folder, names) in &changes {
            let line = serde_json::json!({"v": 1, "folder": folder, "files": names});
            writeln!(f, "{line}").expect("journal line");
        }
    }
}

/// One signature line per chapter `from..to` (its ten seqs, a few terms and paths), appended
/// by `signer::sign` to the ledger of the chapter's session, one batch per session.
fn sign_dated(m: &Machine, from: usize, to: usize) {
    use dsh_chapters::signature::{Signature, SIGNATURE_VERSION};
    let store = dsh_chapters::store::Store::open(&m.ws).expect("store");
    let redactor = dsh_chapters::redact::built_in().expect("built-in rules");
    let mut by_session: std::collections::BTreeMap<String, Vec<_>> = Default::default();
    for i in from..to {
        let root = session(i);
        let raw = Signature {
            v: SIGNATURE_VERSION,
            session_id: root.clone(),
            turn: (i * 10 + 9) as u64,
            seqs: (i * 10..i * 10 + 10).map(|s| s as u64).collect(),
            paths: vec![
                format!("src/refresh/middleware_{}.rs", i % 20),
                "tests/refresh.rs".into(),
            ],
            commands: vec!["cargo".into(), "git".into()],
            terms: vec![
                "refresh".into(),
                "middleware".into(),
                format!("area{}", i % 20),
            ],
            size: 4096,
            by: "deterministic".into(),
            at: "2026-01-01T10:00:00Z".into(),
            reason: "completed".into(),
        };
        let value = serde_json::to_value(&raw).expect("signature json");
        let sig = redactor
            .redact_json(&value, &mut Default::default())
            .derive(|v| serde_json::from_value::<Signature>(v.clone()).expect("signature"));
        by_session.entry(root).or_default().push(sig);
    }
    for (root, sigs) in by_session {
        let mut cursor = dsh_chapters::signer::LedgerCursor::default();
        dsh_chapters::signer::sign(
            &store,
            &root,
            &root,
            &sigs,
            redactor,
            &mut cursor,
            dsh_chapters::signer::After::Seq,
        )
        .expect("sign");
    }
}

fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(dir)
        .args(args)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn count_objects(pool: &Path) -> std::collections::BTreeMap<String, u64> {
    git_out(pool, &["count-objects", "-v"])
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(": ")?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

fn du_bytes(path: &Path) -> u64 {
    let out = Command::new("du")
        .args(["-sb"])
        .arg(path)
        .output()
        .expect("du");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `git clone --bare --no-local` (objects through pack negotiation, as over a network).
fn clone_time(pool: &Path) -> Duration {
    let tmp = tempfile::tempdir().expect("tmp");
    let start = Instant::now();
    let st = Command::new("git")
        .args(["clone", "-q", "--bare", "--no-local"])
        .arg(pool)
        .arg(tmp.path().join("c.git"))
        .status()
        .expect("clone");
    assert!(st.success());
    start.elapsed()
}

/// Publish chapters `0..n` from `m` by `publishes` syncs of `bin`; returns the time taken.
fn build_pool(bin: &Path, m: &Machine, n: usize, publishes: usize) -> Duration {
    let batch = (n / publishes).max(1);
    let built = Instant::now();
    let mut at = 0;
    while at < n {
        write_dated(m, at, (at + batch).min(n));
        at += batch;
        run(chapters_of(bin, m, &["sync"]));
    }
    built.elapsed()
}

/// A number from the environment, else `default`.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `POOL_BENCH=plus10`: +10 chapters synced at 100 and at `POOL_SCALE` chapters,
/// `POOL_ROUNDS` rounds (default 5), each build (this one, `POOL_BASELINE_BIN`'s) on a small
/// pool of its own and on the one big machine, the builds' order alternated round by round;
/// every round's ratio printed, then the median of each. `POOL_KEEP=DIR` keeps the big
/// machine (and its pool) and reuses it, relinked to `DIR/pool.git`; the next chapter number
/// is kept in `DIR/plus10-next`. Each machine's first +10 is a warm-up, not timed.
/// `POOL_KEEP_BASELINE=DIR2` (a copy of the same kept machine): the baseline publishes into
/// that big machine instead of sharing `POOL_KEEP`'s — builds that pack differently (a roll-up
/// policy) would otherwise pack each other's publishes.
fn plus10_bench() {
    let (size, rounds) = (env_usize("POOL_SCALE", 10_000), env_usize("POOL_ROUNDS", 5));
    let ours_bin = PathBuf::from(env!("CARGO_BIN_EXE_chapters"));
    let mut bins = vec![("this build", ours_bin.clone())];
    if let Some(bin) = std::env::var_os("POOL_BASELINE_BIN") {
        bins.push(("baseline", PathBuf::from(bin)));
    }
    let keep = std::env::var_os("POOL_KEEP").map(PathBuf::from);
    let big = match &keep {
        Some(dir) if dir.join("pool.git").exists() => {
            let dir = std::fs::canonicalize(dir).expect("canonical");
            println!("reusing the machine kept in {}", dir.display());
            let m = machine_in(&dir, None, "bench", None);
            // A copied machine still names the pool it was copied from: this one is its.
            link(&m);
            m
        }
        _ => {
            let m = match &keep {
                Some(dir) => {
                    std::fs::create_dir_all(dir).expect("keep dir");
                    let dir = std::fs::canonicalize(dir).expect("canonical");
                    machine_in(&dir, None, "bench", None)
                }
                None => machine_on(None, "bench"),
            };
            if keep.is_some() {
                link(&m);
            }
            let built = build_pool(&ours_bin, &m, size, 100);
            println!(
                "pool of {size} chapters built in {:.1} s",
                built.as_secs_f64()
            );
            m
        }
    };
    let next_file = keep.as_ref().map(|d| d.join("plus10-next"));
    let next_in = |file: Option<&PathBuf>| -> usize {
        file.and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(size)
    };
    let mut next_big = next_in(next_file.as_ref());
    // The baseline's own copy of the kept machine, when given.
    let mut base_big = std::env::var_os("POOL_KEEP_BASELINE").map(|dir| {
        let dir = std::fs::canonicalize(dir).expect("POOL_KEEP_BASELINE: a kept machine");
        println!(
            "the baseline publishes into the machine kept in {}",
            dir.display()
        );
        let m = machine_in(&dir, None, "bench", None);
        link(&m);
        let file = dir.join("plus10-next");
        let next = next_in(Some(&file));
        (m, next, file)
    });
    // Wall time, and the CPU time (user + system, git children included) of the sync.
    let plus10_cpu = |bin: &Path, m: &Machine, next: &mut usize| {
        write_dated(m, *next, *next + 10);
        *next += 10;
        let before = children_cpu_ms();
        let wall = run(chapters_of(bin, m, &["sync"]));
        (wall, children_cpu_ms() - before)
    };
    let plus10 = |bin: &Path, m: &Machine, next: &mut usize| plus10_cpu(bin, m, next).0;
    let mut small = Vec::new();
    for (_, bin) in &bins {
        let m = machine();
        build_pool(bin, &m, 100, 10);
        let mut next = 100;
        plus10(bin, &m, &mut next);
        small.push((m, next));
    }
    plus10(&ours_bin, &big, &mut next_big);
    if let (Some((m, next, _)), Some((_, bin))) = (&mut base_big, bins.get(1)) {
        plus10(bin, m, next);
    }
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "+10 chapters at 100 and at {size}; load average {}",
        load().trim()
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); bins.len()];
    let mut cpu: Vec<(Vec<f64>, Vec<f64>)> = vec![Default::default(); bins.len()];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..bins.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (name, bin) = &bins[i];
            let (m, next) = &mut small[i];
            let (at_small, cpu_small) = plus10_cpu(bin, m, next);
            let (at_big, cpu_big) = match &mut base_big {
                Some((m, next, _)) if i == 1 => plus10_cpu(bin, m, next),
                _ => plus10_cpu(bin, &big, &mut next_big),
            };
            let ratio = at_big.as_secs_f64() / at_small.as_secs_f64();
            ratios[i].push(ratio);
            cpu[i].0.push(cpu_small);
            cpu[i].1.push(cpu_big);
            println!(
                "  round {round}, {name:<10} at 100 {:>7.1} ms, at {size} {:>7.1} ms, ratio {ratio:.2}x (CPU {cpu_small:.0} / {cpu_big:.0} ms)",
                ms(at_small),
                ms(at_big)
            );
        }
    }
    for ((name, _), (small_cpu, big_cpu)) in bins.iter().zip(&mut cpu) {
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (s, b) = (median(small_cpu), median(big_cpu));
        println!(
            "  {name:<10} CPU (user + system, git included) median at 100 {s:.0} ms, at {size} {b:.0} ms: {:.2}x",
            b / s
        );
    }
    // With `POOL_PROFILE`: three (`POOL_PROFILE_RUNS`) more +10 at the big size, profiled
    // (`{n}`: size + 0..3), alternated with the baseline's on its own machine when it has one
    // (`{n}`: `base-…`).
    for k in 0..env_usize("POOL_PROFILE_RUNS", 3) {
        profile_plus10(&ours_bin, &big, &(size + k).to_string(), &mut next_big);
        if let (Some((m, next, _)), Some((_, bin))) = (&mut base_big, bins.get(1)) {
            profile_plus10(bin, m, &format!("base-{}", size + k), next);
        }
    }
    if let Some(f) = &next_file {
        std::fs::write(f, next_big.to_string()).expect("plus10-next");
    }
    if let Some((_, next, f)) = &base_big {
        std::fs::write(f, next.to_string()).expect("plus10-next");
    }
    for ((name, _), mut r) in bins.iter().zip(ratios) {
        r.sort_by(f64::total_cmp);
        println!(
            "  {name:<10} ratios {} — median {:.2}x (goal ≤ 1.5)",
            r.iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" "),
            r[r.len() / 2]
        );
    }
    println!("load average {}", load().trim());
}

/// `POOL_BENCH=same`: what a sync publishes is the baseline's. A machine of `POOL_SCALE`
/// chapters (default 2,000) built by `POOL_BASELINE_BIN`'s build, copied twice; then the
/// same +10 chapters (with their signatures) `POOL_ROUNDS` times (default 4) on each copy,
/// synced by this build on one and by the baseline on the other, and the two pools' trees
/// compared path by path (`README.md` with its publish times masked: it carries the
/// machine's last publish time; `POOL_SAME_IGNORE` names paths a format change makes differ,
/// e.g. `index/manifest` against a baseline before the index's manifest version 3).
fn same_bench() {
    let size = env_usize("POOL_SCALE", 2_000);
    let rounds = env_usize("POOL_ROUNDS", 4);
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_chapters"));
    let base = PathBuf::from(std::env::var_os("POOL_BASELINE_BIN").expect("POOL_BASELINE_BIN"));
    let tmp = tempfile::tempdir().expect("tmp");
    let root = std::fs::canonicalize(tmp.path()).expect("canonical");
    let first = machine_in(&root.join("built"), None, "bench", None);
    link(&first);
    build_pool(&base, &first, size, 10);
    let copies: Vec<(PathBuf, Machine)> = [("ours", &ours), ("base", &base)]
        .iter()
        .map(|(name, bin)| {
            let dir = root.join(name);
            let st = Command::new("cp")
                .arg("-a")
                .arg(root.join("built"))
                .arg(&dir)
                .status()
                .expect("cp");
            assert!(st.success());
            let m = machine_in(&dir, None, "bench", None);
            link(&m);
            ((*bin).clone(), m)
        })
        .collect();
    let mut next = size;
    for _ in 0..rounds {
        for (bin, m) in &copies {
            write_dated(m, next, next + 10);
            run(chapters_of(bin, m, &["sync"]));
        }
        next += 10;
    }
    let tree = |m: &Machine| -> std::collections::BTreeMap<String, String> {
        git_out(&m.pool, &["ls-tree", "-r", "main"])
            .lines()
            .filter_map(|l| {
                let (meta, path) = l.split_once('\t')?;
                Some((path.to_owned(), meta.rsplit(' ').next()?.to_owned()))
            })
            .collect()
    };
    // `POOL_SAME_IGNORE=index/manifest,…`: paths (prefixes) a format change since the
    // baseline makes differ on purpose, left out of both comparisons and said.
    let ignore: Vec<String> = std::env::var("POOL_SAME_IGNORE")
        .unwrap_or_default()
        .split(',')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    if !ignore.is_empty() {
        println!("left out of the comparison (a format change since the baseline): {ignore:?}");
    }
    let ignored = |p: &str| ignore.iter().any(|i| p.starts_with(i.as_str()));
    let (a, b) = (tree(&copies[0].1), tree(&copies[1].1));
    let differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|p| !ignored(p) && a.get(*p) != b.get(*p))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // The machine table's publish times (`| `bench` | <time> |`), masked wherever they occur.
    let masked = |m: &Machine| {
        let text = git_out(&m.pool, &["show", "main:README.md"]);
        let times: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("| `bench` | "))
            .filter_map(|l| l.strip_suffix(" |"))
            .map(str::to_owned)
            .collect();
        assert!(!times.is_empty(), "a machine table");
        times
            .iter()
            .fold(text, |t, time| t.replace(time.as_str(), "<time>"))
    };
    let readme_same = masked(&copies[0].1) == masked(&copies[1].1);
    println!(
        "{} paths in each pool after {rounds} × +10 from {size}; differing: {:?}; README.md the same but for its publish times: {readme_same}",
        a.len(),
        differ
    );
    let identical = differ.iter().all(|p| p.as_str() == "README.md") && readme_same;
    println!(
        "what the pools hold: {}",
        if identical { "identical" } else { "DIFFERENT" }
    );
    // What each machine's sync wrote into its mirror (`.dsh-knowledge/`, its git directory
    // and dot files such as `index/.built`, which names its own commit, left out): the same
    // files with the same bytes, `README.md` but for its publish times.
    let mirror = |m: &Machine| {
        let dir = m.ws.join(".dsh-knowledge");
        let mut files = std::collections::BTreeMap::new();
        let mut todo = vec![dir.clone()];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).expect("mirror dir").flatten() {
                if e.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                let path = e.path();
                if path.is_dir() {
                    todo.push(path);
                } else {
                    let rel = path.strip_prefix(&dir).expect("inside");
                    let bytes = std::fs::read(&path).expect("mirror file");
                    files.insert(rel.to_string_lossy().into_owned(), bytes);
                }
            }
        }
        files
    };
    let (a, b) = (mirror(&copies[0].1), mirror(&copies[1].1));
    let mirror_differ: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|p| p.as_str() != "README.md" && !ignored(p) && a.get(*p) != b.get(*p))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    println!(
        "{} files in each mirror (dot files aside); differing but README.md: {mirror_differ:?}; README.md in both: {}",
        a.len(),
        a.contains_key("README.md") && b.contains_key("README.md")
    );
    assert!(mirror_differ.is_empty(), "the mirrors differ");
    assert!(identical);
}

/// The CPU time (user + system, ms) of this process's waited-for children and theirs
/// (`/proc/self/stat`'s `cutime` + `cstime`, in 10 ms ticks); 0 where unreadable.
fn children_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command's closing parenthesis: state is field 3, cutime 16.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<f64> = rest
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0.0))
        .collect();
    let ticks = fields.get(13).copied().unwrap_or(0.0) + fields.get(14).copied().unwrap_or(0.0);
    ticks * 10.0
}

/// `POOL_BENCH=first`: a new machine's first sync into a pool of `POOL_SCALE` chapters (built
/// like the fourth's by 100 publishes of this build), this build beside `POOL_BASELINE_BIN`'s,
/// alternated, `POOL_ROUNDS` times (default 2), then a `git clone --no-local` of the pool.
/// `POOL_KEEP=DIR` keeps the publishing machine (and its pool) in `DIR` and reuses it when
/// `DIR` holds one already (building 100,000 chapters takes minutes).
fn first_sync_bench() {
    let (size, rounds) = (env_usize("POOL_SCALE", 10_000), env_usize("POOL_ROUNDS", 2));
    let ours_bin = PathBuf::from(env!("CARGO_BIN_EXE_chapters"));
    let baseline_bin = std::env::var_os("POOL_BASELINE_BIN").map(PathBuf::from);
    let m = match std::env::var_os("POOL_KEEP").map(PathBuf::from) {
        Some(dir) if dir.join("pool.git").exists() => {
            println!("reusing the pool kept in {}", dir.display());
            machine_in(&dir, None, "bench", None)
        }
        Some(dir) => {
            std::fs::create_dir_all(&dir).expect("keep dir");
            let dir = std::fs::canonicalize(&dir).expect("canonical");
            let m = machine_in(&dir, None, "bench", None);
            link(&m);
            let built = build_pool(&ours_bin, &m, size, 100);
            println!(
                "pool of {size} chapters built in {:.1} s, kept in {}",
                built.as_secs_f64(),
                dir.display()
            );
            m
        }
        None => {
            let m = machine();
            build_pool(&ours_bin, &m, size, 100);
            m
        }
    };
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("a new machine's first sync into the pool of {size} chapters");
    for round in 0..rounds {
        let mut bins = vec![("this build", &ours_bin)];
        if let Some(bin) = &baseline_bin {
            bins.push(("baseline", bin));
        }
        if round % 2 == 1 {
            bins.reverse();
        }
        for (name, bin) in bins {
            let newcomer = machine_on(Some(&m.pool), "newcomer");
            let (time, rss) = measure(chapters_of(bin, &newcomer, &["sync"]));
            let knowledge = newcomer.ws.join(".dsh-knowledge");
            println!(
                "  round {round}, {name:<10} {:>9.1} ms, peak RSS {:>6.1} MiB, wrote {:.1} MiB in {} files",
                time.as_secs_f64() * 1e3,
                mib(rss),
                du_bytes(&knowledge) as f64 / (1 << 20) as f64,
                count_files(&knowledge)
            );
        }
    }
    let clone_dir = tempfile::tempdir().expect("tmp");
    let (clone, clone_rss) = measure({
        let mut c = Command::new("git");
        c.args(["clone", "-q", "--bare", "--no-local"])
            .arg(&m.pool)
            .arg(clone_dir.path().join("c.git"));
        c
    });
    println!(
        "  git clone --no-local   {:>9.1} ms, peak RSS {:>6.1} MiB",
        clone.as_secs_f64() * 1e3,
        mib(clone_rss)
    );
}

fn scale_bench() {
    let size = env_usize("POOL_SCALE", 10_000);
    let publishes = 100;
    let ours_bin = PathBuf::from(env!("CARGO_BIN_EXE_chapters"));
    // `POOL_BASELINE_BIN`: an earlier build's `chapters`, measured beside this one in the same
    // run (its own pools for the +10, the same big pool for a first sync).
    let baseline_bin = std::env::var_os("POOL_BASELINE_BIN").map(PathBuf::from);
    let mut plus10 = Vec::new();
    let mut plus10_baseline = Vec::new();
    let mut big = None;
    for n in [100usize, size] {
        for bin in std::iter::once(&ours_bin).chain(baseline_bin.as_ref()) {
            let m = machine();
            let built = build_pool(bin, &m, n, publishes);
            let mut next = n;
            let t = best(5, || {
                write_dated(&m, next, next + 10);
                next += 10;
                run(chapters_of(bin, &m, &["sync"]))
            });
            if bin != &ours_bin {
                plus10_baseline.push((n, t, built));
                continue;
            }
            plus10.push((n, t));
            profile_plus10(bin, &m, &n.to_string(), &mut next);
            if n == size {
                big = Some((m, built));
            }
        }
    }
    let (m, built) = big.expect("the big pool");
    let ours = count_objects(&m.pool);
    let ours_du = du_bytes(&m.pool);
    let largest_index = largest_file(&m.ws.join(".dsh-knowledge").join("index"));
    let gc = tempfile::tempdir().expect("tmp");
    let gc_pool = gc.path().join("gc.git");
    let st = Command::new("cp")
        .args(["-a"])
        .arg(&m.pool)
        .arg(&gc_pool)
        .status()
        .expect("cp");
    assert!(st.success());
    let plain_gc = std::env::var("POOL_GC").as_deref() == Ok("plain");
    let gc_name = if plain_gc { "gc" } else { "gc --aggressive" };
    let gc_start = Instant::now();
    if plain_gc {
        git_out(&gc_pool, &["gc", "-q", "--prune=now"]);
    } else {
        git_out(&gc_pool, &["gc", "-q", "--aggressive", "--prune=now"]);
    }
    let gc_time = gc_start.elapsed();
    let theirs = count_objects(&gc_pool);
    let theirs_du = du_bytes(&gc_pool);
    clone_time(&m.pool);
    clone_time(&gc_pool);
    let (mut clone_ours, mut clone_gc) = (Duration::MAX, Duration::MAX);
    for _ in 0..3 {
        clone_ours = clone_ours.min(clone_time(&m.pool));
        clone_gc = clone_gc.min(clone_time(&gc_pool));
    }
    // A new machine joins the big pool: its first sync, beside a clone of the pool.
    let newcomer = machine_on(Some(&m.pool), "newcomer");
    let (first_sync, first_rss) = measure(chapters(&newcomer, &["sync"]));
    let knowledge = newcomer.ws.join(".dsh-knowledge");
    let (first_bytes, first_files) = (du_bytes(&knowledge), count_files(&knowledge));
    let first_blocks = du_kib(&knowledge);
    let first_baseline = baseline_bin.as_ref().map(|bin| {
        let other = machine_on(Some(&m.pool), "newcomer-baseline");
        measure(chapters_of(bin, &other, &["sync"]))
    });
    let clone_dir = tempfile::tempdir().expect("tmp");
    let (clone_plain, clone_rss) = measure({
        let mut c = Command::new("git");
        c.args(["clone", "-q", "--bare", "--no-local"])
            .arg(&m.pool)
            .arg(clone_dir.path().join("c.git"));
        c
    });
    drop(clone_dir);
    profile_first_sync(&m.pool);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let chapters_in = (size + 50) as f64;
    println!(
        "a year's scale: a pool of {size} chapters built by {publishes} publishes in {:.1} s",
        built.as_secs_f64()
    );
    println!(
        "  git count-objects -v   ours: loose {} ({} KiB), packs {} ({} KiB)",
        ours["count"], ours["size"], ours["packs"], ours["size-pack"]
    );
    println!(
        "         after {gc_name}: loose {} ({} KiB), packs {} ({} KiB) (gc took {:.1} s)",
        theirs["count"],
        theirs["size"],
        theirs["packs"],
        theirs["size-pack"],
        gc_time.as_secs_f64()
    );
    println!(
        "  git clone --no-local   ours {:>8.1} ms, after gc {:>8.1} ms, ratio {:.2}x (goal ≤ 1.2)",
        ms(clone_ours),
        ms(clone_gc),
        clone_ours.as_secs_f64() / clone_gc.as_secs_f64()
    );
    println!(
        "  +10 chapters           at 100 {:>8.1} ms, at {size} {:>8.1} ms, ratio {:.2}x (goal ≤ 1.5)",
        ms(plus10[0].1),
        ms(plus10[1].1),
        plus10[1].1.as_secs_f64() / plus10[0].1.as_secs_f64()
    );
    if let [(_, small, _), (_, large, built_large)] = plus10_baseline.as_slice() {
        println!(
            "         baseline build  at 100 {:>8.1} ms, at {size} {:>8.1} ms, ratio {:.2}x (its pool built in {:.1} s)",
            ms(*small),
            ms(*large),
            large.as_secs_f64() / small.as_secs_f64(),
            built_large.as_secs_f64()
        );
    }
    println!(
        "  pool on disk           ours {:.0} B/chapter ({:.1} MiB), after gc {:.0} B/chapter; at 1 M chapters ≈ {:.2} GiB vs {:.2} GiB",
        ours_du as f64 / chapters_in,
        ours_du as f64 / (1 << 20) as f64,
        theirs_du as f64 / chapters_in,
        ours_du as f64 / chapters_in * 1e6 / (1u64 << 30) as f64,
        theirs_du as f64 / chapters_in * 1e6 / (1u64 << 30) as f64,
    );
    println!(
        "  largest index file     {} ({} bytes)",
        largest_index.0, largest_index.1
    );
    println!(
        "  a new machine's first sync {:>8.1} ms, peak RSS {:.1} MiB, wrote {:.1} MiB ({:.1} MiB on disk) in {} files into .dsh-knowledge/",
        ms(first_sync),
        first_rss as f64 / 1024.0,
        first_bytes as f64 / (1 << 20) as f64,
        first_blocks as f64 / 1024.0,
        first_files
    );
    if let Some((time, rss)) = first_baseline {
        println!(
            "         baseline build's first sync {:>8.1} ms, peak RSS {:.1} MiB",
            ms(time),
            rss as f64 / 1024.0
        );
    }
    println!(
        "         git clone --no-local of the pool {:>8.1} ms, peak RSS {:.1} MiB; ratio {:.2}x time; pool packed {:.1} MiB",
        ms(clone_plain),
        clone_rss as f64 / 1024.0,
        first_sync.as_secs_f64() / clone_plain.as_secs_f64(),
        ours_du as f64 / (1 << 20) as f64
    );
    println!(
        "         at 1 M chapters ≈ {:.1} s, {:.2} GiB written into .dsh-knowledge/ per machine (linear)",
        first_sync.as_secs_f64() * 1e6 / chapters_in,
        first_blocks as f64 * 1024.0 / chapters_in * 1e6 / (1u64 << 30) as f64
    );
}

/// `POOL_PROFILE="perf record -g -o /tmp/p-{n}.data --"` (or `strace -c -f -o …`): one more
/// +10 sync into the pool of `n` chapters run under that command (`{n}` replaced), to see
/// where a +10 sync spends its time. Not timed.
fn profile_plus10(bin: &Path, m: &Machine, tag: &str, next: &mut usize) {
    if std::env::var_os("POOL_PROFILE").is_none() {
        return;
    }
    write_dated(m, *next, *next + 10);
    *next += 10;
    profiled_sync(bin, m, tag);
}

/// With `POOL_PROFILE` (see [`profile_plus10`]): another new machine's first sync into
/// `pool`, run under that command (`{n}` replaced by `first`). Not timed.
fn profile_first_sync(pool: &Path) {
    if std::env::var_os("POOL_PROFILE").is_some() {
        let ours = Path::new(env!("CARGO_BIN_EXE_chapters"));
        profiled_sync(ours, &machine_on(Some(pool), "profiled"), "first");
    }
}

/// `chapters sync` on `m` under the `POOL_PROFILE` command, `{n}` replaced by `tag`.
fn profiled_sync(bin: &Path, m: &Machine, tag: &str) {
    let wrap = std::env::var("POOL_PROFILE").expect("POOL_PROFILE is set");
    let words: Vec<String> = wrap
        .split_whitespace()
        .map(|w| w.replace("{n}", tag))
        .collect();
    let (program, args) = words.split_first().expect("POOL_PROFILE names a command");
    let sync = chapters_of(bin, m, &["sync"]);
    let mut c = Command::new(program);
    c.args(args).arg(sync.get_program()).args(sync.get_args());
    c.current_dir(&m.ws)
        .env("DSH_HOME", &m.home)
        .env("CHAPTERS_HARNESS_ID", m.harness)
        .stdout(Stdio::null());
    run(c);
}

/// Wall time of `cmd` and its peak RSS in KiB (`/usr/bin/time -f %M`: the largest process
/// of its tree, git children included; 0 when `/usr/bin/time` is missing).
fn measure(cmd: Command) -> (Duration, u64) {
    let time = Path::new("/usr/bin/time");
    let rss_file = tempfile::NamedTempFile::new().expect("tmp");
    let mut wrapped = if time.exists() {
        let mut w = Command::new(time);
        w.arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(rss_file.path())
            .arg(cmd.get_program());
        w
    } else {
        Command::new(cmd.get_program())
    };
    wrapped.args(cmd.get_args());
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
        .ok()
        .and_then(|t| t.trim().lines().last().and_then(|l| l.trim().parse().ok()))
        .unwrap_or(0);
    (elapsed, rss)
}

/// Files under `dir`.
fn count_files(dir: &Path) -> u64 {
    let mut n = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(_) => n += 1,
                Err(_) => {}
            }
        }
    }
    n
}

/// Disk usage of `path` in KiB (blocks, as `du -sk`).
fn du_kib(path: &Path) -> u64 {
    let out = Command::new("du")
        .args(["-sk"])
        .arg(path)
        .output()
        .expect("du");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The largest file under `dir` (relative name, bytes).
fn largest_file(dir: &Path) -> (String, u64) {
    let mut best = (String::new(), 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(meta) = e.metadata() {
                if meta.len() > best.1 {
                    let rel = p.strip_prefix(dir).unwrap_or(&p).display().to_string();
                    best = (rel, meta.len());
                }
            }
        }
    }
    best
}

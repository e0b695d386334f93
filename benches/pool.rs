//! Pool benchmark, side by side in one run:
//! 1. publishing 1,000 new chapters with their artifacts to a local-path pool
//!    (`chapters sync`) vs native git (`git add -A`, `git commit`, `git push` of the same
//!    files into a bare repository);
//! 2. publishing +10 chapters into a pool of 10,000 vs a pool of 100;
//! 3. `chapters scan --pool` over a pool of 10,000 chapters (+10,000 artifacts, ten commits)
//!    vs `git rev-list --objects --all | git cat-file --batch` over the same pool.
//!
//! Run: `cargo bench --bench pool` (needs the `git` program for the baselines);
//! `POOL_BENCH=scan cargo bench --bench pool` runs only the third.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Machine {
    _tmp: tempfile::TempDir,
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
    let tmp = tempfile::tempdir().expect("tmp");
    let base = std::fs::canonicalize(tmp.path()).expect("canonical");
    let home = base.join("home");
    let ws = base.join("ws");
    std::fs::create_dir_all(ws.join(".git")).expect("ws");
    std::fs::write(
        ws.join(".git/config"),
        "[remote \"origin\"]\n\turl = https://example.com/bench/widgets.git\n",
    )
    .expect("cfg");
    let pool = base.join("pool.git");
    let m = Machine {
        home,
        store: ws.join(".dsh-chapters"),
        ws,
        pool,
        _tmp: tmp,
    };
    run(chapters(
        &m,
        &[
            "link",
            m.pool.to_str().expect("utf8"),
            "--visibility",
            "private",
        ],
    ));
    m
}

fn chapters(m: &Machine, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_chapters"));
    c.args(args)
        .current_dir(&m.ws)
        .env("DSH_HOME", &m.home)
        .env("CHAPTERS_HARNESS_ID", "bench");
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
        let sha = dsh_chapters::render::sha256_hex(art.as_bytes());
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

//! Local doors stay local (#13.10): the daemon's home, socket and files are owner-only
//! whatever the umask, another local user cannot reach them, slow or idle clients cannot
//! lock the control socket out, and `daemon status` never advises killing a healthy daemon.
//! The real binary, the real daemon, real sockets; another user through `setpriv`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_chapters::daemon::control::{Client, Request, MAX_CONNECTIONS};

use crate::support::Sandbox;

const WAIT: Duration = Duration::from_secs(30);
const NOBODY: &str = "65534";

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn socket(sb: &Sandbox) -> PathBuf {
    sb.home.join("dsh-chapters/daemon.sock")
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `chapters ARGS` in the sandbox under a umask of 0.
fn umask0(sb: &Sandbox, args: &[&str]) -> Command {
    // The sandbox's command, for its environment and directory only.
    let cmd = sb.cmd(&[]);
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg("umask 0 && exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_chapters"))
        .args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh.current_dir(cmd.get_current_dir().expect("cwd"));
    sh
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({:?}):\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `chapters ARGS` as the user `nobody`, with the sandbox's DSH_HOME.
fn as_nobody(sb: &Sandbox, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ])
        .arg(env!("CARGO_BIN_EXE_chapters"))
        .args(args)
        .current_dir("/")
        .env("DSH_HOME", &sb.home)
        .output()
        .expect("setpriv")
}

struct Daemon(Child);

impl Daemon {
    fn alive(&mut self) -> bool {
        self.0.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_daemon(mut cmd: Command, sb: &Sandbox) -> Daemon {
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the daemon");
    let d = Daemon(child);
    wait_for("the daemon's socket", || {
        Client::connect(&socket(sb), Duration::from_secs(5)).is_ok()
    });
    d
}

fn status_pid(sb: &Sandbox) -> u64 {
    let mut c = Client::connect(&socket(sb), Duration::from_secs(10)).expect("connect");
    c.request(Request::Status, &socket(sb)).expect("status")["pid"]
        .as_u64()
        .expect("pid")
}

/// Every entry under `dir` with its mode, the directory itself first.
fn modes(dir: &Path) -> Vec<(PathBuf, u32, bool)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let meta = std::fs::symlink_metadata(&d).expect("stat");
        out.push((d.clone(), meta.permissions().mode() & 0o7777, meta.is_dir()));
        if meta.is_dir() {
            for entry in std::fs::read_dir(&d).expect("list") {
                todo.push(entry.expect("entry").path());
            }
        }
    }
    out
}

#[test]
fn the_daemons_home_is_owner_only_under_umask_0_and_closed_to_other_users() {
    let sb = Sandbox::new();
    // Everything above the home is open to others, so only our own modes keep them out.
    let root = sb.home.parent().expect("sandbox root");
    for dir in [root, sb.home.as_path()] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    // A credential and the home config, written under umask 0 too.
    let token = root.join("token");
    std::fs::write(&token, "tok-for-doors-1234\n").expect("token");
    ok(
        umask0(
            &sb,
            &[
                "link",
                "https://git.example.com/team/pool.git",
                "--visibility",
                "private",
                "--token-file",
                token.to_str().expect("utf8"),
            ],
        )
        .output()
        .expect("link"),
        "link",
    );
    ok(
        umask0(
            &sb,
            &[
                "enrich",
                "model",
                "--endpoint",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
            ],
        )
        .output()
        .expect("enrich model"),
        "enrich model",
    );
    let mut d = start_daemon(umask0(&sb, &["daemon", "--foreground"]), &sb);
    let pid = status_pid(&sb);

    if as_root() {
        // Another local user can neither stop the daemon nor read its status…
        let out = as_nobody(&sb, &["daemon", "stop"]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("stopped"), "{text}");
        let out = as_nobody(&sb, &["daemon", "status", "--json"]);
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("\"pid\""),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // …nor reach the socket itself.
        let out = Command::new("setpriv")
            .args([
                &format!("--reuid={NOBODY}"),
                &format!("--regid={NOBODY}"),
                "--clear-groups",
                "python3",
                "-c",
                "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{\"v\":1,\"request\":\"stop\"}\\n'); print(s.recv(4096))",
            ])
            .arg(socket(&sb))
            .output()
            .expect("python3 as nobody");
        assert!(!out.status.success(), "another user reached the socket");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The daemon runs on, untouched.
        assert!(d.alive());
        assert_eq!(status_pid(&sb), pid);
    } else {
        eprintln!("not root: the other-user half of this test needs setpriv as root");
    }

    let sock_mode = std::fs::metadata(socket(&sb))
        .expect("socket")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(sock_mode, 0o600, "the control socket");

    // Stopped by its owner: the state is saved, and every file it left is owner-only.
    ok(sb.cmd(&["daemon", "stop"]).output().expect("stop"), "stop");
    let home = sb.home.join("dsh-chapters");
    let all = modes(&home);
    for want in [
        "daemon.pid",
        "daemon-state.json",
        "logs/daemon.log",
        "config.yml",
        "credentials",
    ] {
        assert!(
            all.iter().any(|(p, _, _)| p.ends_with(want)),
            "{want} missing: {all:?}"
        );
    }
    for (path, mode, is_dir) in &all {
        let want = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(*mode, want, "{} has mode {mode:o}", path.display());
    }
}

/// A client that connected, read the hello, and then sends a request line a byte at a
/// time (one a second) — or nothing at all — until told to stop.
fn slow_client(sb: &Sandbox, trickle: bool, stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let mut s = UnixStream::connect(socket(sb)).expect("connect");
    let mut hello = String::new();
    BufReader::new(s.try_clone().expect("clone"))
        .read_line(&mut hello)
        .expect("hello");
    assert!(hello.contains("dsh-chapters-daemon"), "{hello}");
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let line = b"{\"v\":1,\"request\":\"status\"}";
        let mut i = 0;
        while !stop.load(Ordering::SeqCst) {
            if trickle && s.write_all(&line[i % line.len()..][..1]).is_err() {
                return;
            }
            i += 1;
            std::thread::sleep(Duration::from_secs(1));
        }
    })
}

#[test]
fn slow_and_idle_clients_cannot_lock_out_the_daemons_socket() {
    let sb = Sandbox::new();
    let mut d = start_daemon(sb.cmd(&["daemon", "--foreground"]), &sb);
    let stop = Arc::new(AtomicBool::new(false));
    // Every slot taken, and more: clients trickling a byte a second, and idle ones.
    let slow: Vec<_> = (0..MAX_CONNECTIONS + 4)
        .map(|i| slow_client(&sb, i % 3 != 2, &stop))
        .collect();
    // While they hang, a normal client is served…
    let mut c = Client::connect(&socket(&sb), Duration::from_secs(10)).expect("connect");
    let status = c.request(Request::Status, &socket(&sb)).expect("status");
    assert!(status["pid"].is_u64(), "{status}");
    // …and so is the command a person types, which never advises killing it.
    let out = sb.run(&["daemon", "status"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("daemon pid"), "{text}");
    assert!(!text.contains("kill"), "{text}");
    assert!(d.alive());
    stop.store(true, Ordering::SeqCst);
    for t in slow {
        t.join().expect("slow client");
    }
}

// ---- #13.5: no credentials in the project tree ----------------------------------------

const SECRET: &str = "s3cret-d00rs-t0ken-4711";

/// Every file under `dir` whose bytes hold `needle` (case-insensitively), by path.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let needle = needle.to_ascii_lowercase();
    let mut hits = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                todo.push(path);
            } else if meta.is_file() {
                let bytes = std::fs::read(&path).unwrap_or_default();
                if String::from_utf8_lossy(&bytes)
                    .to_ascii_lowercase()
                    .contains(&needle)
                {
                    hits.push(path);
                }
            }
        }
    }
    hits
}

fn both(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_url_with_a_credential_is_refused_masked_and_nothing_is_written() {
    let sb = Sandbox::new();
    let token_file = sb.home.parent().expect("root").join("token");
    std::fs::write(&token_file, "good-token\n").expect("token");
    let user_token = "s3cretD00rsT0ken4711abcdefghijklmnop";
    let ghp = format!("ghp_{}", "A1b2C3d4".repeat(4));
    let cases = [
        (
            format!("https://ana:{SECRET}@git.example.com/team/pool.git"),
            SECRET,
        ),
        (
            format!("https://{user_token}@git.example.com/team/pool.git"),
            user_token,
        ),
        (
            format!("https://{ghp}@github.com/team/pool.git"),
            ghp.as_str(),
        ),
        (
            format!("https://git.example.com/team/pool.git?access_token={SECRET}"),
            SECRET,
        ),
        (
            format!("https://gitlab.example.com/team/pool.git?private_token={SECRET}&x=1"),
            SECRET,
        ),
        (
            format!("http://127.0.0.1:9/pool.git?token={SECRET}"),
            SECRET,
        ),
    ];
    for (url, secret) in &cases {
        for extra in [
            vec![],
            vec!["--token-file", token_file.to_str().expect("utf8")],
            vec!["--json"],
        ] {
            let mut args = vec!["link", url.as_str(), "--visibility", "private"];
            args.extend(extra.iter().copied());
            let out = sb.run(&args);
            let text = both(&out);
            assert_eq!(out.status.code(), Some(1), "{url}: {text}");
            assert!(!text.contains(secret), "the secret was echoed: {text}");
            assert!(text.contains("***"), "not echoed masked: {text}");
            assert!(
                text.contains("--token-file") && text.contains("--token-stdin"),
                "no way out named: {text}"
            );
        }
        // Without the mandatory flag (a usage error): still never echoed.
        let out = sb.run(&["link", url.as_str()]);
        assert_eq!(out.status.code(), Some(2), "{}", both(&out));
        assert!(!both(&out).contains(secret), "{}", both(&out));
    }
    assert!(!sb.store().exists(), "nothing written in the project tree");
    assert!(
        !sb.home.join("dsh-chapters/credentials").exists(),
        "no credential stored"
    );
    assert!(files_holding(&sb.ws, SECRET).is_empty());
}

#[test]
fn a_link_holding_a_credential_is_migrated_by_the_next_command() {
    let tmp = tempfile::tempdir().expect("tmp");
    let forge = tmp.path().join("forge");
    std::fs::create_dir_all(&forge).expect("forge");
    assert!(Command::new("git")
        .args(["init", "--bare", "-q"])
        .arg(forge.join("pool.git"))
        .status()
        .expect("git")
        .success());
    let server = crate::githttp::GitHttpServer::start(&forge, Some(SECRET));
    let url = server.url("pool.git");
    let m = Sandbox::machine("doors-m1");
    m.write_session(
        "session-0000d005-0000-4000-8000-000000000001",
        4,
        true,
        &crate::support::two_task_turns(&m.ws),
    );
    // Linked as an older version (or a hand edit) left it: the token inside the URL.
    m.ok(&["init"]);
    let with_secret = url.replacen("http://", &format!("http://x-access-token:{SECRET}@"), 1);
    std::fs::write(
        m.store().join("pool.json"),
        serde_json::to_string_pretty(&serde_json::json!({
            "v": 1,
            "upstream": {"kind": "network", "url": with_secret},
            "visibility": "private",
            "linkedAt": "2026-11-29T00:00:00.000Z",
            "linkedBy": "doors-m1",
        }))
        .expect("json"),
    )
    .expect("pool.json");

    // The next command that reads it moves the secret and says so, in --json too.
    let out = m.run(&["status", "--json"]);
    assert!(out.status.success(), "{}", both(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("note") && stderr.contains("***"),
        "{stderr}"
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(status["linkMigrated"]["moved"], true, "{status}");
    // The user name stays (it is no secret), the password goes.
    let clean = with_secret.replacen(&format!(":{SECRET}"), "", 1);
    assert_eq!(status["linkMigrated"]["url"], clean.as_str());
    assert!(!both(&out).contains(SECRET), "{}", both(&out));
    let key = status["identity"]["projectKey"]
        .as_str()
        .expect("key")
        .to_owned();
    let cred = m.home.join("dsh-chapters/credentials").join(&key);
    assert_eq!(
        std::fs::read_to_string(&cred).expect("credential").trim(),
        SECRET
    );
    assert_eq!(
        std::fs::metadata(&cred).expect("cred").permissions().mode() & 0o777,
        0o600
    );
    assert!(files_holding(&m.ws, SECRET).is_empty(), "left in the tree");

    // Once: the next command has nothing to move.
    let again = m.json(&["link", "--json"]);
    assert!(again["linkMigrated"].is_null(), "{again}");
    assert_eq!(again["tokenStored"], true);
    assert_eq!(again["upstream"]["url"], clean.as_str());

    // The moved token is the one sync uses: the pool is reached and written.
    m.ok(&["archive"]);
    let outputs = [
        m.run(&["sync"]),
        m.run(&["sync", "--json"]),
        m.run(&["status"]),
        m.run(&["link"]),
    ];
    for out in &outputs {
        assert!(out.status.success(), "{}", both(out));
        assert!(!both(out).contains(SECRET), "{}", both(out));
    }
    let listed = Command::new("git")
        .args(["ls-tree", "-r", "--name-only", "main"])
        .current_dir(forge.join("pool.git"))
        .output()
        .expect("git");
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("chapters/"),
        "nothing published"
    );
    // A failing sync (the token revoked) names no secret either.
    server.set_token(Some("another-token".into()));
    let out = m.run(&["sync"]);
    assert!(!out.status.success());
    assert!(!both(&out).contains(SECRET), "{}", both(&out));
    assert!(files_holding(&m.ws, SECRET).is_empty(), "left in the tree");
}

// ---- #13.6: the pool is never the project ----------------------------------------------

fn git_init(dir: &Path, bare: bool) {
    let mut cmd = Command::new("git");
    cmd.args(["init", "-q"]);
    if bare {
        cmd.arg("--bare");
    }
    assert!(cmd.arg(dir).status().expect("git").success());
}

#[test]
fn link_refuses_the_project_its_repository_and_any_checkout() {
    let sb = Sandbox::new();
    let root = sb.home.parent().expect("root").to_path_buf();
    git_init(&sb.ws, false);
    std::fs::create_dir_all(sb.ws.join("src")).expect("src");
    let other = root.join("other");
    git_init(&other, false);
    std::os::unix::fs::symlink(&sb.ws, root.join("alias")).expect("symlink");
    std::fs::create_dir_all(root.join("full")).expect("full");
    std::fs::write(root.join("full/notes.txt"), "x").expect("file");
    let refused = [
        (".".to_owned(), "inside the workspace"),
        (".git".to_owned(), "own git repository"),
        ("src/pool".to_owned(), "inside the workspace"),
        ("src/../../ws/pool".to_owned(), "inside the workspace"),
        (
            format!("file://{}", sb.ws.display()),
            "inside the workspace",
        ),
        (
            root.join("alias/pool").display().to_string(),
            "inside the workspace",
        ),
        (root.display().to_string(), "holds the workspace"),
        (other.display().to_string(), "work tree"),
        (other.join(".git").display().to_string(), "work tree"),
        (
            root.join("full").display().to_string(),
            "not a bare git repository",
        ),
    ];
    for (target, why) in &refused {
        let out = sb.run(&["link", target, "--visibility", "private"]);
        let text = both(&out);
        assert_eq!(out.status.code(), Some(1), "{target}: {text}");
        assert!(text.contains(why), "{target}: {text}");
        assert!(
            text.contains("bare repository") && text.contains("outside the project"),
            "{target}: no way out named: {text}"
        );
    }
    // Nothing written: no store, nothing committed into either checkout.
    assert!(!sb.store().exists());
    for repo in [&sb.ws, &other] {
        let log = Command::new("git")
            .args(["rev-parse", "--verify", "-q", "HEAD"])
            .current_dir(repo)
            .output()
            .expect("git");
        assert!(
            !log.status.success(),
            "a commit appeared in {}",
            repo.display()
        );
    }
    // A bare repository, an empty directory or a new path outside the project is taken.
    let bare = root.join("pool.git");
    git_init(&bare, true);
    std::fs::create_dir_all(root.join("empty")).expect("empty");
    for target in [bare, root.join("empty"), root.join("new/pool")] {
        sb.ok(&[
            "link",
            target.to_str().expect("utf8"),
            "--visibility",
            "private",
        ]);
    }
    // Syncs to a pool it created itself, again and again.
    sb.ok(&["sync"]);
    sb.ok(&["sync"]);
    // A symlink linked while it pointed outside, turned to point into the project later:
    // the next sync refuses, and writes nothing into the project.
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::os::unix::fs::symlink(&outside, root.join("moving")).expect("symlink");
    sb.ok(&[
        "link",
        root.join("moving/pool").to_str().expect("utf8"),
        "--visibility",
        "private",
    ]);
    std::fs::remove_file(root.join("moving")).expect("unlink");
    std::os::unix::fs::symlink(sb.ws.join("src"), root.join("moving")).expect("symlink");
    let out = sb.run(&["sync"]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(
        both(&out).contains("inside the workspace"),
        "{}",
        both(&out)
    );
    assert!(!sb.ws.join("src/pool").exists());
}

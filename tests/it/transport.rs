//! `pool::transport` against real git over real HTTP on loopback (`githttp`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use dsh_chapters::credentials::Secret;
use dsh_chapters::pool::transport::{self, FailureCode, Remote, TransportError, TRACKING_REF};

use crate::githttp::{closed_port_url, GitHttpServer, SilentServer, WebPageServer};

const TOKEN: &str = "tok-5f3a9c-right";
const WRONG: &str = "tok-77e1d0-wrong";
/// Generous: no test asserts on time; this only bounds a hang.
const PATIENCE: Duration = Duration::from_secs(120);

/// The git program for test setup, isolated from the user's config.
fn git(git_dir: &Path, args: &[&str], stdin: Option<&[u8]>) -> String {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_AUTHOR_DATE", "1764400000 +0000")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_DATE", "1764400000 +0000")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run git");
    if let Some(bytes) = stdin {
        use std::io::Write;
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(bytes).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn bare(path: &Path) -> PathBuf {
    let out = Command::new("git")
        .args(["init", "--quiet", "--bare"])
        .arg(path)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    path.to_path_buf()
}

/// A commit holding one file with `content`, on top of `parent`.
fn commit(git_dir: &Path, parent: Option<&str>, content: &[u8]) -> String {
    let blob = git(git_dir, &["hash-object", "-w", "--stdin"], Some(content));
    let tree = git(
        git_dir,
        &["mktree"],
        Some(format!("100644 blob {blob}\tnote.md\n").as_bytes()),
    );
    let mut args = vec!["commit-tree", tree.as_str(), "-m", "chapters"];
    if let Some(p) = parent {
        args.extend(["-p", p]);
    }
    git(git_dir, &args, None)
}

fn served_head(root: &Path) -> Option<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(root.join("pool.git"))
        .args(["rev-parse", "--verify", "--quiet", "refs/heads/main"])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap().trim().to_owned())
}

fn remote(url: String, token: Option<&str>) -> Remote {
    Remote {
        url,
        token: token.map(|t| Secret::parse(t).unwrap()),
        user: None,
    }
}

/// A served empty `pool.git` and two local "machines".
struct Fixture {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    a: PathBuf,
    b: PathBuf,
    server: GitHttpServer,
}

impl Fixture {
    fn new(token: Option<&str>) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("served");
        std::fs::create_dir_all(&root).unwrap();
        bare(&root.join("pool.git"));
        let a = bare(&tmp.path().join("a.git"));
        let b = bare(&tmp.path().join("b.git"));
        let server = GitHttpServer::start(&root, token);
        Fixture {
            _tmp: tmp,
            root,
            a,
            b,
            server,
        }
    }

    fn remote(&self, token: Option<&str>) -> Remote {
        remote(self.server.url("pool.git"), token)
    }
}

/// Neither Display nor Debug nor the fields show `secret`.
fn assert_hidden(err: &TransportError, secret: &str) {
    for shown in [
        err.to_string(),
        format!("{err:?}"),
        err.detail.clone(),
        err.url.clone(),
    ] {
        assert!(!shown.contains(secret), "the token leaked: {shown}");
    }
}

#[test]
fn push_then_fetch_with_the_right_token() {
    let f = Fixture::new(Some(TOKEN));
    let r = f.remote(Some(TOKEN));
    // A credential helper in the mirror's own config must not see (or store) the token.
    let leak = f.a.parent().unwrap().join("stored-credentials");
    git(
        &f.a,
        &[
            "config",
            "credential.helper",
            &format!("store --file {}", leak.display()),
        ],
        None,
    );

    assert_eq!(
        transport::fetch(&f.a, &r, PATIENCE).unwrap(),
        None,
        "an empty pool has no head"
    );
    let c1 = commit(&f.a, None, b"first chapter\n");
    transport::push(&f.a, &r, &c1, PATIENCE).unwrap();
    assert_eq!(served_head(&f.root).as_deref(), Some(c1.as_str()));
    let log = git(
        &f.root.join("pool.git"),
        &["log", "--format=%H", "main"],
        None,
    );
    assert_eq!(log, c1);
    assert!(
        !leak.exists(),
        "the token reached a credential helper from the mirror's config"
    );
    assert!(
        f.server.unauthorized() > 0,
        "the server asked for credentials"
    );

    // Pushing what the pool already has is fine.
    transport::push(&f.a, &r, &c1, PATIENCE).unwrap();

    // The other machine fetches it: the head, the tracking ref and the objects.
    assert_eq!(
        transport::fetch(&f.b, &r, PATIENCE).unwrap().as_deref(),
        Some(c1.as_str())
    );
    assert_eq!(git(&f.b, &["rev-parse", TRACKING_REF], None), c1);
    assert_eq!(
        git(&f.b, &["cat-file", "-p", &format!("{c1}:note.md")], None),
        "first chapter"
    );

    // A fast-forward on top.
    let c2 = commit(&f.b, Some(&c1), b"second chapter\n");
    transport::push(&f.b, &r, &c2, PATIENCE).unwrap();
    assert_eq!(
        transport::fetch(&f.a, &r, PATIENCE).unwrap().as_deref(),
        Some(c2.as_str())
    );
    assert_eq!(served_head(&f.root).as_deref(), Some(c2.as_str()));
}

#[test]
fn a_large_push_arrives_chunked() {
    let f = Fixture::new(Some(TOKEN));
    let r = f.remote(Some(TOKEN));
    // Incompressible bytes, over git's 1 MiB post buffer, so the pack is sent chunked.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let big: Vec<u8> = (0..3 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let c = commit(&f.a, None, &big);
    transport::push(&f.a, &r, &c, PATIENCE).unwrap();
    assert!(
        f.server.chunked_requests() > 0,
        "the push body was not chunked"
    );
    assert_eq!(served_head(&f.root).as_deref(), Some(c.as_str()));
    assert_eq!(
        transport::fetch(&f.b, &r, PATIENCE).unwrap().as_deref(),
        Some(c.as_str())
    );
}

#[test]
fn a_wrong_or_missing_token_is_auth() {
    let f = Fixture::new(Some(TOKEN));
    let c = commit(&f.a, None, b"x\n");
    for r in [f.remote(Some(WRONG)), f.remote(None)] {
        let err = transport::fetch(&f.a, &r, PATIENCE).unwrap_err();
        assert_eq!(err.code, FailureCode::Auth, "{err}");
        assert_hidden(&err, WRONG);
        let err = transport::push(&f.a, &r, &c, PATIENCE).unwrap_err();
        assert_eq!(err.code, FailureCode::Auth, "{err}");
        assert_hidden(&err, WRONG);
    }
    assert_eq!(served_head(&f.root), None, "nothing was pushed");
}

/// A forge that checks the user name as well as the token: the user comes from the URL
/// (`http://ana@host/…`) or from `link --user`; without either, `x-access-token` is sent,
/// refused, and the error names it.
#[test]
fn the_token_goes_with_the_users_name() {
    let f = Fixture::new(Some(TOKEN));
    f.server.set_user(Some("ana"));
    let c = commit(&f.a, None, b"x\n");

    let plain = f.remote(Some(TOKEN));
    let err = transport::push(&f.a, &plain, &c, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Auth, "{err}");
    assert!(
        err.to_string().contains("sent as user \"x-access-token\""),
        "{err}"
    );
    assert!(err.to_string().contains("--user NAME"), "{err}");
    assert_hidden(&err, TOKEN);

    let in_url = remote(
        f.remote(None).url.replacen("http://", "http://ana@", 1),
        Some(TOKEN),
    );
    assert_eq!(in_url.token_user(), "ana");
    transport::push(&f.a, &in_url, &c, PATIENCE).unwrap();
    assert_eq!(served_head(&f.root).as_deref(), Some(c.as_str()));

    let named = Remote {
        user: Some("ana".to_owned()),
        ..f.remote(Some(TOKEN))
    };
    assert_eq!(
        transport::fetch(&f.b, &named, PATIENCE).unwrap().as_deref(),
        Some(c.as_str())
    );
    // A user name is data, never shell: it reaches git's helper through the environment.
    let odd = Remote {
        user: Some("a'b$(touch pwned)\"".to_owned()),
        ..f.remote(Some(TOKEN))
    };
    let err = transport::fetch(&f.b, &odd, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Auth, "{err}");
    assert!(!Path::new("pwned").exists());
}

#[test]
fn a_token_revoked_mid_run_is_auth() {
    let f = Fixture::new(Some(TOKEN));
    let r = f.remote(Some(TOKEN));
    let c1 = commit(&f.a, None, b"one\n");
    transport::push(&f.a, &r, &c1, PATIENCE).unwrap();
    f.server.set_token(Some("tok-rotated-elsewhere".into()));
    let c2 = commit(&f.a, Some(&c1), b"two\n");
    let err = transport::push(&f.a, &r, &c2, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Auth, "{err}");
    assert_hidden(&err, TOKEN);
    let err = transport::fetch(&f.b, &r, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Auth, "{err}");
    assert_eq!(served_head(&f.root).as_deref(), Some(c1.as_str()));
}

#[test]
fn nothing_listening_is_network() {
    let tmp = tempfile::tempdir().unwrap();
    let local = bare(&tmp.path().join("a.git"));
    let c = commit(&local, None, b"x\n");
    let r = remote(closed_port_url("pool.git"), Some(TOKEN));
    let err = transport::fetch(&local, &r, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Network, "{err}");
    let err = transport::push(&local, &r, &c, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Network, "{err}");
    assert_hidden(&err, TOKEN);
}

#[test]
fn a_web_page_answering_for_the_pool_is_not_git() {
    // A login page where the repository should be: git's fallback to its dumb protocol
    // reads no refs and cannot push; the push says what answered.
    let page = WebPageServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let local = bare(&tmp.path().join("a.git"));
    let c = commit(&local, None, b"x\n");
    let r = remote(page.url("pool.git"), Some(TOKEN));
    let err = transport::push(&local, &r, &c, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::NotGit, "{err}");
    assert!(
        err.code.hint().contains("not a git server"),
        "{}",
        err.code.hint()
    );
    assert_hidden(&err, TOKEN);
}

#[test]
fn an_unknown_repository_is_not_found() {
    let f = Fixture::new(Some(TOKEN));
    let r = remote(f.server.url("nope.git"), Some(TOKEN));
    let err = transport::fetch(&f.a, &r, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::NotFound, "{err}");
    let c = commit(&f.a, None, b"x\n");
    let err = transport::push(&f.a, &r, &c, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::NotFound, "{err}");
}

#[test]
fn a_non_fast_forward_is_diverged_and_changes_nothing() {
    let f = Fixture::new(Some(TOKEN));
    let r = f.remote(Some(TOKEN));
    let a1 = commit(&f.a, None, b"from a\n");
    transport::push(&f.a, &r, &a1, PATIENCE).unwrap();

    // b never saw a1: git says "fetch first".
    let b1 = commit(&f.b, None, b"from b\n");
    let err = transport::push(&f.b, &r, &b1, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Diverged, "{err}");
    assert!(err.detail.contains("fetch first"), "{}", err.detail);
    assert_eq!(served_head(&f.root).as_deref(), Some(a1.as_str()));

    // b has a1 now, and b1 is still not on top of it: "non-fast-forward".
    assert_eq!(
        transport::fetch(&f.b, &r, PATIENCE).unwrap().as_deref(),
        Some(a1.as_str())
    );
    let err = transport::push(&f.b, &r, &b1, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Diverged, "{err}");
    assert!(err.detail.contains("non-fast-forward"), "{}", err.detail);
    assert_eq!(served_head(&f.root).as_deref(), Some(a1.as_str()));

    // Rebuilt on top, it goes through.
    let b2 = commit(&f.b, Some(&a1), b"from b, on top\n");
    transport::push(&f.b, &r, &b2, PATIENCE).unwrap();
    assert_eq!(served_head(&f.root).as_deref(), Some(b2.as_str()));
}

/// Every process's command line containing `needle`, read from /proc.
fn command_lines_with(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|line| line.contains(needle))
        .collect()
}

#[test]
fn a_server_that_never_answers_is_timeout_and_argv_never_holds_the_token() {
    let silent = SilentServer::start();
    let tmp = tempfile::tempdir().unwrap();
    let local = bare(&tmp.path().join("a.git"));
    let c = commit(&local, None, b"x\n");
    let url = silent.url("pool.git");
    let r = remote(url.clone(), Some(TOKEN));

    // While git hangs on the silent server, look at every command line on the machine.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (done, url) = (std::sync::Arc::clone(&done), url.clone());
        std::thread::spawn(move || {
            let (mut seen_git, mut leaked) = (Vec::new(), Vec::new());
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                seen_git.extend(command_lines_with(&url));
                leaked.extend(command_lines_with(TOKEN));
                std::thread::sleep(Duration::from_millis(20));
            }
            (seen_git, leaked)
        })
    };
    let fetched = transport::fetch(&local, &r, Duration::from_secs(2));
    let pushed = transport::push(&local, &r, &c, Duration::from_secs(2));
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let (seen_git, leaked) = watcher.join().unwrap();
    let leaked: std::collections::BTreeSet<String> =
        leaked.iter().map(|l| l.replace(TOKEN, "<TOKEN>")).collect();
    assert!(
        leaked.is_empty(),
        "the token was on a command line: {leaked:?}"
    );

    let err = fetched.unwrap_err();
    assert_eq!(err.code, FailureCode::Timeout, "{err}");
    let err = pushed.unwrap_err();
    assert_eq!(err.code, FailureCode::Timeout, "{err}");
    assert_hidden(&err, TOKEN);
    assert!(silent.connections() > 0, "git did connect");
    assert!(!seen_git.is_empty(), "the watcher saw git's command line");
}

#[test]
fn the_token_is_scrubbed_from_what_the_remote_prints() {
    let f = Fixture::new(Some(TOKEN));
    // A hostile (or careless) remote echoes the token back in its messages.
    let hook = f.root.join("pool.git/hooks/pre-receive");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\necho \"leak: {TOKEN}\" >&2\nexit 1\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let c = commit(&f.a, None, b"x\n");
    let err = transport::push(&f.a, &f.remote(Some(TOKEN)), &c, PATIENCE).unwrap_err();
    assert_eq!(err.code, FailureCode::Other, "a remote rejection: {err}");
    assert!(err.detail.contains("leak: ***"), "{}", err.detail);
    assert_hidden(&err, TOKEN);
    assert_eq!(served_head(&f.root), None);
}

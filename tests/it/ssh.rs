//! SSH pools end to end: a real `sshd` on loopback (Debian's openssh-server; `.ci/run`
//! installs it) with a throwaway host key and client key, reached through the user's own
//! `~/.ssh/config` host alias — what a person with an ssh forge account has.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::support::{two_task_turns, Sandbox};

const SSHD: &str = "/usr/sbin/sshd";

struct Sshd {
    child: Child,
    /// A HOME whose `.ssh/config` names the server as `poolhost`.
    home: PathBuf,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn keygen(path: &Path) {
    run(Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "throwaway", "-f"])
        .arg(path));
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn start_sshd(dir: &Path) -> Sshd {
    assert!(
        Path::new(SSHD).exists(),
        "{SSHD} is missing: apt-get install openssh-server (.ci/run does)"
    );
    // sshd's privilege separation directory.
    std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
    keygen(&dir.join("host_key"));
    keygen(&dir.join("id"));
    std::fs::copy(dir.join("id.pub"), dir.join("authorized_keys")).expect("authorized_keys");
    let port = free_port();
    let config = dir.join("sshd_config");
    std::fs::write(
        &config,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\n",
            d = dir.display()
        ),
    )
    .expect("sshd_config");
    let child = Command::new(SSHD)
        .args(["-D", "-e", "-f"])
        .arg(&config)
        .stderr(std::fs::File::create(dir.join("sshd.log")).expect("log"))
        .spawn()
        .expect("start sshd");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".ssh")).expect(".ssh");
    let user = String::from_utf8(
        Command::new("id")
            .arg("-un")
            .output()
            .expect("id -un")
            .stdout,
    )
    .expect("utf-8")
    .trim()
    .to_owned();
    std::fs::write(
        home.join(".ssh/config"),
        format!(
            "Host poolhost\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {d}/id\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n",
            d = dir.display()
        ),
    )
    .expect("ssh config");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "sshd did not start: {}",
            std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Sshd { child, home }
}

/// ssh reads `~/.ssh/config` from the account's passwd entry, not `$HOME`, so the test
/// (which must not touch the real one) names its config file the way a person with an
/// unusual setup would: `GIT_SSH_COMMAND`, which the transport passes on untouched.
fn with_ssh_config(cmd: &mut Command, home: &Path) {
    cmd.env("HOME", home).env(
        "GIT_SSH_COMMAND",
        format!("ssh -F {}/.ssh/config -o BatchMode=yes", home.display()),
    );
}

fn ok_with_home(sb: &Sandbox, home: &Path, args: &[&str]) -> String {
    let mut cmd = sb.cmd(args);
    with_ssh_config(&mut cmd, home);
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "chapters {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn two_machines_share_a_pool_over_ssh_through_the_users_ssh_config() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = std::fs::canonicalize(tmp.path()).expect("canon");
    let sshd = start_sshd(&dir);
    let pool = dir.join("pool.git");
    run(Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(&pool));
    let url = format!("poolhost:{}", pool.display());

    let a = Sandbox::machine("ssh-a");
    ok_with_home(&a, &sshd.home, &["init"]);
    a.write_session(
        "session-55555555-5555-4555-8555-555555555555",
        4,
        true,
        &two_task_turns(&a.ws),
    );
    ok_with_home(&a, &sshd.home, &["archive"]);
    ok_with_home(&a, &sshd.home, &["link", &url, "--visibility", "private"]);
    let report: serde_json::Value =
        serde_json::from_str(&ok_with_home(&a, &sshd.home, &["sync", "--json"])).expect("json");
    assert_eq!(report["code"], "ok", "{report}");
    let files = String::from_utf8(
        Command::new("git")
            .arg("--git-dir")
            .arg(&pool)
            .args(["ls-tree", "-r", "--name-only", "main"])
            .output()
            .expect("git")
            .stdout,
    )
    .expect("utf-8");
    assert!(files.lines().any(|l| l.starts_with("chapters/")), "{files}");

    let b = Sandbox::machine("ssh-b");
    ok_with_home(&b, &sshd.home, &["init"]);
    ok_with_home(&b, &sshd.home, &["link", &url, "--visibility", "private"]);
    ok_with_home(&b, &sshd.home, &["sync"]);
    // In its files or its packed objects (`pool::mirror`).
    assert!(
        !crate::pool::mirror_documents(&b, "chapters/").is_empty(),
        "machine b's mirror holds a's chapters"
    );

    // Without the user's ssh config the alias means nothing: a network failure, said so,
    // and the archive is untouched.
    let empty_home = dir.join("nobody");
    std::fs::create_dir_all(&empty_home).expect("home");
    let out = a
        .cmd(&["sync", "--json"])
        .env("HOME", &empty_home)
        .output()
        .expect("run");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_ne!(report["code"], "ok", "{report}");
}

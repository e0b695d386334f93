//! Network transport for the pool: fetch and push over https/http/ssh/git by running the
//! `git` program (gix cannot push). Local-path pools belong to the gix layer; a local path
//! would work here too (the `file` transport is allowed), it is just not what this is for.
//!
//! Every run is sealed off from the user's and the host's git setup, because a credential
//! helper or askpass program configured there could store or show the token:
//! - the environment is cleared and only a short list is passed on (`PATH`, `HOME`, CA
//!   bundles, proxies — not for loopback —, the ssh agent and `GIT_SSH[_COMMAND]`);
//! - `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`, and env-only config
//!   (`GIT_CONFIG_COUNT`/`_KEY_n`/`_VALUE_n`) that clears `credential.helper` and
//!   `core.askPass` (also any set in the mirror's own config), disables hooks and sets
//!   `http.lowSpeedLimit/Time` so a stalled transfer ends;
//! - `GIT_TERMINAL_PROMPT=0`, stdin is `/dev/null`, and ssh runs with `BatchMode=yes`
//!   unless the user set `GIT_SSH_COMMAND`/`GIT_SSH`, so nothing ever waits for a human.
//!
//! ssh URLs use the user's own ssh setup (`~/.ssh/config`, the agent; `HOME` is kept) and
//! never get the token. What git config would have added for ssh (`core.sshCommand`,
//! `url.*.insteadOf` in `~/.gitconfig`) is not read; `GIT_SSH_COMMAND` in the environment is.
//!
//! The token reaches git in exactly one way: an env-only credential helper — a shell
//! snippet that prints `$DSH_CHAPTERS_GIT_TOKEN` — with that variable set in the child's
//! environment only. It is never on argv (not in the URL, not in `-c`), never in a config
//! value, and it is scrubbed from anything git prints before that reaches an error.
//! When git rejects the credential it calls the helper with `erase`, which touches a
//! marker file; that is the most precise "the token was refused" signal git offers.
//!
//! Each run gets a hard deadline: git is started as its own process group, polled, and
//! when the deadline passes the whole group (git and its `git-remote-https`/ssh children)
//! is killed with SIGKILL and reaped.
//!
//! **git's output is parsed here and only here**: `push --porcelain` status lines and the
//! stderr of a failed run are turned into a [`FailureCode`]. Callers branch on the code,
//! never on message text (a network error's message once contained "diverge").

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::credentials::Secret;

/// Where `fetch` puts the remote's `main`.
pub const TRACKING_REF: &str = "refs/remotes/pool/main";
/// The one branch a pool has.
pub const REMOTE_BRANCH: &str = "refs/heads/main";

/// The user name sent with a token when neither the link (`--user`) nor the URL
/// (`https://ana@host/…`) names one; GitHub's convention, and most forges accept any.
pub const DEFAULT_TOKEN_USER: &str = "x-access-token";
const TOKEN_ENV: &str = "DSH_CHAPTERS_GIT_TOKEN";
const USER_ENV: &str = "DSH_CHAPTERS_GIT_USER";
const REJECTED_ENV: &str = "DSH_CHAPTERS_GIT_REJECTED";
const REJECTED_MARK: &str = "credential-rejected";
/// Transports git may use; `ext::` and friends could run commands named by a URL.
const ALLOWED_PROTOCOLS: &str = "http:https:ssh:git:file";
/// A transfer slower than this many bytes per second …
const LOW_SPEED_LIMIT: &str = "1000";
/// … for this many seconds is abandoned by git itself (the hard deadline is the backstop).
const LOW_SPEED_TIME: &str = "30";
/// Passed on from our environment: what git needs to run, find CAs and reach ssh keys.
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "GIT_EXEC_PATH",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
];
/// Passed on too, except for loopback URLs (a proxy must not see a local test forge).
const PROXY_ENV: &[&str] = &[
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
];
/// Longest error detail kept (its tail: git says what went wrong last).
const MAX_DETAIL: usize = 4000;
/// Most of git's stdout/stderr read back (its tail).
const MAX_OUTPUT: u64 = 1 << 20;
const MAX_POLL: Duration = Duration::from_millis(50);

/// Why a transfer failed, for machines: the sync loop and `chapters status` branch on it.
/// The strings (`network`, `auth`, `not-found`, `diverged`, `timeout`, `other`) are stable:
/// they appear in status JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureCode {
    /// Unreachable: DNS, connection refused or reset, no route, a 5xx from the forge.
    Network,
    /// The token (or ssh key) was refused: 401/403, revoked, missing.
    Auth,
    /// No repository at that URL.
    NotFound,
    /// The pool moved on: the push was not a fast-forward.
    Diverged,
    /// No answer within the deadline (or the transfer stalled).
    Timeout,
    /// A web server answered, not git: a forge's login page, a proxy's page, a URL that is
    /// not a repository's. git then falls back to its "dumb" protocol, which reads nothing
    /// and cannot push.
    NotGit,
    /// Anything else; the detail says what.
    Other,
}

impl FailureCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::Network => "network",
            FailureCode::Auth => "auth",
            FailureCode::NotFound => "not-found",
            FailureCode::Diverged => "diverged",
            FailureCode::Timeout => "timeout",
            FailureCode::NotGit => "not-git",
            FailureCode::Other => "other",
        }
    }

    /// What the user can do about it.
    pub fn hint(self) -> &'static str {
        match self {
            FailureCode::Network => "The pool is unreachable; the store keeps working locally and sync retries later",
            FailureCode::Auth => "The pool refused the credentials (token revoked, expired or without access to this repository): link again with a valid token (`chapters link URL --visibility … --token-stdin`)",
            FailureCode::NotFound => "No repository answers at that URL: check the URL, or create the repository at the forge",
            FailureCode::Diverged => "The pool moved on since the last fetch: fetch, then publish again",
            FailureCode::Timeout => "The pool did not answer in time; sync retries later",
            FailureCode::NotGit => "A web server answered at that URL, not a git server (a login page, a proxy, or a URL that is not the repository's clone URL): check it with `git ls-remote URL`, then `chapters link` the repository's clone URL",
            FailureCode::Other => "See git's message above",
        }
    }
}

impl fmt::Display for FailureCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Fetch,
    Push,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Fetch => "fetch from",
            Operation::Push => "push to",
        })
    }
}

/// A failed fetch or push. `detail` is git's own message (or ours), with the token
/// replaced by `***` wherever it appeared — every error is built by one function that
/// scrubs it —; `url` never carries a password.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{operation} {url} failed ({code}): {}. {}", .detail.trim_end_matches('.'), .code.hint())]
pub struct TransportError {
    pub code: FailureCode,
    pub detail: String,
    pub operation: Operation,
    pub url: String,
}

/// A network pool: its URL and, for http(s), the token and the user it is sent as (ssh
/// uses the user's own setup).
#[derive(Debug, Clone)]
pub struct Remote {
    pub url: String,
    pub token: Option<Secret>,
    /// The user given at `link --user`; `None`: the URL's user, else [`DEFAULT_TOKEN_USER`].
    pub user: Option<String>,
}

impl Remote {
    /// The user name the token is sent with.
    pub fn token_user(&self) -> &str {
        if let Some(user) = self.user.as_deref().filter(|u| !u.is_empty()) {
            return user;
        }
        match userinfo(&self.url) {
            Some(info) if !info.is_empty() && !info.contains(':') => info,
            _ => DEFAULT_TOKEN_USER,
        }
    }
}

/// The warning for a token sent over plain `http://` to a host that is not loopback: basic
/// auth crosses the network in clear.
pub fn clear_text_warning(url: &str, has_token: bool) -> Option<String> {
    let plain_http = split_scheme(url).is_some_and(|(s, _)| s.eq_ignore_ascii_case("http"));
    (has_token && plain_http && !is_loopback(url)).then(|| {
        format!(
            "{} is plain http: the token is sent in clear (basic auth) to a host that is not this machine; use https",
            display_url(url)
        )
    })
}

/// Fetch `refs/heads/main` of the remote into `git_dir`'s `refs/remotes/pool/main`; returns
/// the remote head (None for an empty remote, and then the tracking ref is removed).
pub fn fetch(
    git_dir: &Path,
    remote: &Remote,
    timeout: Duration,
) -> Result<Option<String>, TransportError> {
    let fail = |code, detail| failure(Operation::Fetch, remote, code, detail);
    check_url(&remote.url).map_err(|detail| fail(FailureCode::Other, detail))?;
    let deadline = Instant::now() + timeout;
    let scratch = Scratch::new().map_err(|detail| fail(FailureCode::Other, detail))?;
    let refspec = format!("+{REMOTE_BRANCH}:{TRACKING_REF}");
    let cmd = command_for(
        git_dir,
        remote,
        scratch.path(),
        &["fetch", "--no-tags", &remote.url, &refspec],
    );
    let done = scratch
        .run(cmd, deadline, timeout)
        .map_err(|(code, detail)| fail(code, detail))?;
    if !done.status.success() {
        if done
            .stderr
            .to_ascii_lowercase()
            .contains(&format!("couldn't find remote ref {REMOTE_BRANCH}"))
        {
            // An empty pool (or one without main): forget a stale head so the tracking
            // ref always says what the last fetch saw.
            let cmd = local_command(git_dir, &["update-ref", "-d", TRACKING_REF]);
            let removed = scratch
                .run(cmd, deadline, timeout)
                .map_err(|(code, detail)| fail(code, detail))?;
            if !removed.status.success() {
                return Err(fail(FailureCode::Other, removed.stderr));
            }
            return Ok(None);
        }
        let code = classify(&done.stderr, done.credential_rejected);
        return Err(fail(code, done.stderr));
    }
    let cmd = local_command(git_dir, &["rev-parse", "--verify", "--quiet", TRACKING_REF]);
    let head = scratch
        .run(cmd, deadline, timeout)
        .map_err(|(code, detail)| fail(code, detail))?;
    let oid = head.stdout.trim();
    if !head.status.success() || !is_hex_oid(oid) {
        return Err(fail(
            FailureCode::Other,
            format!(
                "the fetch succeeded but {TRACKING_REF} could not be read: {}",
                head.stderr.trim()
            ),
        ));
    }
    Ok(Some(oid.to_owned()))
}

/// Push `commit` to the remote's `refs/heads/main`, fast-forward only (never --force); a
/// rejected non-fast-forward is `Diverged`. Pushing what the remote already has is `Ok`.
pub fn push(
    git_dir: &Path,
    remote: &Remote,
    commit: &str,
    timeout: Duration,
) -> Result<(), TransportError> {
    let fail = |code, detail| failure(Operation::Push, remote, code, detail);
    check_url(&remote.url).map_err(|detail| fail(FailureCode::Other, detail))?;
    if !is_hex_oid(commit) {
        return Err(fail(
            FailureCode::Other,
            format!("{commit:?} is not a full hexadecimal commit id; refusing to push it"),
        ));
    }
    let deadline = Instant::now() + timeout;
    let scratch = Scratch::new().map_err(|detail| fail(FailureCode::Other, detail))?;
    let refspec = format!("{commit}:{REMOTE_BRANCH}");
    let cmd = command_for(
        git_dir,
        remote,
        scratch.path(),
        &["push", "--porcelain", "--no-verify", &remote.url, &refspec],
    );
    let done = scratch
        .run(cmd, deadline, timeout)
        .map_err(|(code, detail)| fail(code, detail))?;
    match porcelain_status(&done.stdout, REMOTE_BRANCH) {
        Some(RefStatus::Updated) => Ok(()),
        Some(RefStatus::Rejected { summary }) => Err(fail(
            FailureCode::Diverged,
            format!("{summary}\n{}", done.stderr),
        )),
        Some(RefStatus::Refused { summary }) => Err(fail(
            FailureCode::Other,
            format!("{summary}\n{}", done.stderr),
        )),
        None if done.status.success() => Ok(()),
        None => {
            let code = classify(&done.stderr, done.credential_rejected);
            Err(fail(code, done.stderr))
        }
    }
}

/// Whether a URL is loopback (`http://127.0.0.1…`, `http://localhost…`, `http://[::1]…`,
/// https alike) — tokens are mandatory for network pools except loopback. Anything odd
/// (another scheme, `127.1`, `foo.localhost`, a backslash in the authority) is not.
pub fn is_loopback(url: &str) -> bool {
    let Some((scheme, rest)) = split_scheme(url) else {
        return false;
    };
    if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority
        .chars()
        .any(|c| c == '\\' || c.is_whitespace() || c.is_control())
    {
        return false;
    }
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let port_ok = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if let Some(bracketed) = host_port.strip_prefix('[') {
        let Some((host, after)) = bracketed.split_once(']') else {
            return false;
        };
        let port_fine = after.is_empty() || after.strip_prefix(':').is_some_and(port_ok);
        return port_fine
            && host.parse::<Ipv6Addr>().is_ok_and(|ip| {
                ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            });
    }
    let (host, port) = host_port.split_once(':').unwrap_or((host_port, ""));
    if !port_ok(port) {
        return false;
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `s` names a network git remote: `http(s)://`, `ssh://` (also `git+ssh://`,
/// `ssh+git://`), `git://`, or scp-like `[user@]host:path` (git's rule: a colon before any
/// slash). Local paths, `file://` and other schemes are not; write `./a:b` for a local
/// directory whose name holds a colon.
pub fn is_network_url(s: &str) -> bool {
    if s.is_empty() || s.starts_with('-') || s.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return false;
    }
    if let Some((scheme, rest)) = split_scheme(s) {
        let known = ["http", "https", "ssh", "git", "git+ssh", "ssh+git"]
            .iter()
            .any(|k| scheme.eq_ignore_ascii_case(k));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        return known && !authority.is_empty();
    }
    // scp-like: a host (bracketed when it holds colons) then `:` then a path.
    let (host, path) = if let Some(bracketed) = s.strip_prefix('[') {
        match bracketed.split_once("]:") {
            Some((host, path)) => (host, path),
            None => return false,
        }
    } else {
        match s.split_once(':') {
            Some((host, path)) => (host, path),
            None => return false,
        }
    };
    let user_host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    !user_host.is_empty() && !host.contains('/') && !path.is_empty()
}

/// The `git` command for `args` against `git_dir` and `remote`, sealed as the module
/// documentation says. `scratch` is a private directory for the credential-rejected
/// marker. Public so tests can see that argv never carries the token.
pub fn command_for(git_dir: &Path, remote: &Remote, scratch: &Path, args: &[&str]) -> Command {
    let mut cmd = base_command(git_dir, args);
    if !is_loopback(&remote.url) {
        pass_env(&mut cmd, PROXY_ENV);
    }
    if is_ssh(&remote.url)
        && std::env::var_os("GIT_SSH_COMMAND").is_none()
        && std::env::var_os("GIT_SSH").is_none()
    {
        cmd.env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes");
    }
    let mut config = base_config();
    if let Some(token) = remote.token.as_ref().filter(|_| uses_token(&remote.url)) {
        config.push(("credential.helper", credential_helper()));
        cmd.env(TOKEN_ENV, token.expose());
        cmd.env(USER_ENV, remote.token_user());
        cmd.env(REJECTED_ENV, scratch.join(REJECTED_MARK));
    }
    set_config(&mut cmd, &config);
    cmd
}

/// A git command that touches only `git_dir` (no remote, no credentials).
pub(crate) fn local_command(git_dir: &Path, args: &[&str]) -> Command {
    let mut cmd = base_command(git_dir, args);
    set_config(&mut cmd, &base_config());
    cmd
}

fn base_command(git_dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("--git-dir").arg(git_dir).args(args);
    cmd.env_clear();
    pass_env(&mut cmd, PASSED_ENV);
    cmd.env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS);
    cmd.stdin(Stdio::null());
    // Its own process group, so the deadline can kill git's helpers along with it.
    cmd.process_group(0);
    cmd
}

/// Cleared first: an empty `credential.helper` resets the list, dropping any helper from
/// the mirror's own config too.
fn base_config() -> Vec<(&'static str, String)> {
    vec![
        ("credential.helper", String::new()),
        ("core.askPass", String::new()),
        ("core.hooksPath", "/dev/null".to_owned()),
        ("http.lowSpeedLimit", LOW_SPEED_LIMIT.to_owned()),
        ("http.lowSpeedTime", LOW_SPEED_TIME.to_owned()),
    ]
}

/// A credential helper (run by git through the shell) that reads git's request — so git
/// never writes into a closed pipe —, answers `get` with the token from the environment,
/// and marks `erase`, which is git saying "the server refused it". It names the variables;
/// neither the token nor the user (which could hold shell syntax) appears in config.
fn credential_helper() -> String {
    format!(
        "!f() {{ cat >/dev/null; case \"$1\" in get) printf 'username=%s\\npassword=%s\\n' \"${USER_ENV}\" \"${TOKEN_ENV}\" ;; erase) : > \"${REJECTED_ENV}\" ;; esac; }}; f"
    )
}

fn set_config(cmd: &mut Command, config: &[(&str, String)]) {
    cmd.env("GIT_CONFIG_COUNT", config.len().to_string());
    for (i, (key, value)) in config.iter().enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key);
        cmd.env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
}

fn pass_env(cmd: &mut Command, names: &[&str]) {
    for name in names {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
}

/// `scheme` and what follows `://`, when `url` has a syntactically valid scheme.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

fn uses_token(url: &str) -> bool {
    split_scheme(url)
        .is_some_and(|(s, _)| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"))
}

/// Whether git reaches `url` over ssh: `ssh://`, `git+ssh://`, `ssh+git://`, or scp-like
/// `[user@]host:path`.
pub fn is_ssh(url: &str) -> bool {
    match split_scheme(url) {
        Some((s, _)) => ["ssh", "git+ssh", "ssh+git"]
            .iter()
            .any(|k| s.eq_ignore_ascii_case(k)),
        None => is_network_url(url),
    }
}

/// The userinfo of a `scheme://` URL, if any.
fn userinfo(url: &str) -> Option<&str> {
    let (_, rest) = split_scheme(url)?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.rsplit_once('@').map(|(info, _)| info)
}

/// The URL as it may be shown: a password in the userinfo becomes `***`.
fn display_url(url: &str) -> String {
    match userinfo(url).and_then(|info| info.split_once(':').map(|(user, _)| (info, user))) {
        Some((info, user)) => url.replacen(info, &format!("{user}:***"), 1),
        None => url.to_owned(),
    }
}

/// Refuse what must never reach git's argv or could be read as an option.
fn check_url(url: &str) -> Result<(), String> {
    if url.is_empty() || url.starts_with('-') || url.chars().any(|c| c.is_control()) {
        return Err(format!("{:?} is not a usable remote URL", display_url(url)));
    }
    if userinfo(url).is_some_and(|info| info.contains(':')) {
        return Err("the URL carries a password, which would put it on a command line; remove it from the URL and pass the token with --token-file or --token-stdin".to_owned());
    }
    Ok(())
}

fn is_hex_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn failure(
    operation: Operation,
    remote: &Remote,
    code: FailureCode,
    detail: String,
) -> TransportError {
    let mut detail = scrub(&detail, remote.token.as_ref());
    if code == FailureCode::Auth && remote.token.is_some() && uses_token(&remote.url) {
        // Name whom the forge refused: a token good for another user name fails alike.
        detail = format!(
            "{} (the token was sent as user {:?}; name another with `chapters link URL --user NAME`)",
            detail.trim_end_matches('.'),
            remote.token_user()
        );
    }
    TransportError {
        code,
        detail,
        operation,
        url: display_url(&remote.url),
    }
}

/// `text` with every occurrence of the token (as is, and percent-encoded) replaced by
/// `***`, trimmed, and cut to its last [`MAX_DETAIL`] bytes — cut after scrubbing, so a
/// cut can never leave part of the token behind.
fn scrub(text: &str, token: Option<&Secret>) -> String {
    let mut out = text.trim().to_owned();
    if let Some(token) = token.map(Secret::expose).filter(|t| !t.is_empty()) {
        out = out.replace(token, "***");
        for encoded in [percent_encode(token, false), percent_encode(token, true)] {
            if encoded != token {
                out = out.replace(&encoded, "***");
            }
        }
    }
    if out.len() > MAX_DETAIL {
        let mut cut = out.len() - MAX_DETAIL;
        while !out.is_char_boundary(cut) {
            cut += 1;
        }
        out = format!("…{}", &out[cut..]);
    }
    out
}

fn percent_encode(s: &str, lower: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else if lower {
            out.push_str(&format!("%{b:02x}"));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The failure code of a failed git run, from its stderr (English: we run with `LC_ALL=C`)
/// and whether git told the credential helper the token was refused. Order matters: an
/// auth failure often ends with a generic "could not read from remote" line.
fn classify(stderr: &str, credential_rejected: bool) -> FailureCode {
    let text = stderr.to_ascii_lowercase();
    let any = |patterns: &[&str]| patterns.iter().any(|p| text.contains(p));
    if credential_rejected
        || any(&[
            "authentication failed",
            "returned error: 401",
            "returned error: 403",
            "http 401",
            "http 403",
            "could not read username",
            "could not read password",
            "permission denied (publickey",
            "permission denied (password",
        ])
    {
        return FailureCode::Auth;
    }
    if any(&[
        "returned error: 404",
        "http 404",
        "repository not found",
        "does not appear to be a git repository",
        "no such repository",
    ]) || (text.contains("repository '") && text.contains("' not found"))
    {
        return FailureCode::NotFound;
    }
    if any(&["operation too slow", "operation timed out"]) {
        return FailureCode::Timeout;
    }
    if any(&[
        "could not resolve host",
        "could not resolve proxy",
        "connection refused",
        "failed to connect",
        "couldn't connect to server",
        "connection timed out",
        "network is unreachable",
        "no route to host",
        "connection reset",
        "empty reply from server",
        "recv failure",
        "send failure",
        "remote end hung up unexpectedly",
        "unexpected disconnect",
        "rpc failed",
        "returned error: 5",
        "ssl_connect",
        "gnutls_handshake",
        "tls connect error",
    ]) {
        return FailureCode::Network;
    }
    if text.contains("[rejected]") {
        return FailureCode::Diverged;
    }
    // git fell back to the dumb HTTP protocol: the server did not speak smart HTTP.
    if any(&[
        "git-http-push failed",
        "dumb http transport does not support",
        "not valid: is this a git repository",
    ]) {
        return FailureCode::NotGit;
    }
    FailureCode::Other
}

/// What `git push --porcelain` reported for one destination ref.
#[derive(Debug, PartialEq, Eq)]
enum RefStatus {
    /// Created, fast-forwarded or already up to date.
    Updated,
    /// Refused by our side's fast-forward check (`[rejected] (fetch first)` or
    /// `(non-fast-forward)`).
    Rejected { summary: String },
    /// Refused by the remote (`[remote rejected]`, `[remote failure]`) or not sent.
    Refused { summary: String },
}

/// Find `dst`'s line in porcelain output: `<flag>\t<src>:<dst>\t<summary>`.
fn porcelain_status(stdout: &str, dst: &str) -> Option<RefStatus> {
    stdout.lines().find_map(|line| {
        let mut parts = line.splitn(3, '\t');
        let flag = parts.next()?;
        let refs = parts.next()?;
        let summary = parts.next().unwrap_or("").trim().to_owned();
        if refs.rsplit_once(':')?.1 != dst {
            return None;
        }
        Some(match flag {
            " " | "+" | "*" | "=" | "-" => RefStatus::Updated,
            "!" if summary.starts_with("[rejected]") => RefStatus::Rejected { summary },
            _ => RefStatus::Refused { summary },
        })
    })
}

/// A finished git run: its exit status and (the tail of) what it printed.
struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    credential_rejected: bool,
}

/// A private temp directory (0700) for one operation: git's stdout and stderr go to files
/// here — no pipe to drain, so a killed git's orphans can never block us — and the
/// credential helper's marker.
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Result<Scratch, String> {
        tempfile::Builder::new()
            .prefix("dsh-chapters-git.")
            .tempdir()
            .map(Scratch)
            .map_err(|e| format!("could not create a private temp directory for git: {e}"))
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    /// Run `cmd` until it exits or `deadline` passes (then kill its process group).
    fn run(
        &self,
        mut cmd: Command,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<Finished, (FailureCode, String)> {
        let io_failure = |what: &str, e: io::Error| (FailureCode::Other, format!("{what}: {e}"));
        let out_path = self.path().join("stdout");
        let err_path = self.path().join("stderr");
        let stdout = File::create(&out_path)
            .map_err(|e| io_failure("could not create a temp file for git's output", e))?;
        let stderr = File::create(&err_path)
            .map_err(|e| io_failure("could not create a temp file for git's output", e))?;
        cmd.stdout(stdout).stderr(stderr);
        let mut child = cmd.spawn().map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                (FailureCode::Other, "the git program was not found on PATH; install git to sync with a network pool".to_owned())
            } else {
                io_failure("could not start git", e)
            }
        })?;
        let status = match wait_until(&mut child, deadline) {
            Ok(Some(status)) => status,
            Ok(None) => {
                let said = read_tail(&err_path).unwrap_or_default();
                return Err((
                    FailureCode::Timeout,
                    format!(
                        "no answer within {} s; git was stopped\n{said}",
                        timeout.as_secs_f32()
                    ),
                ));
            }
            Err(e) => return Err(io_failure("could not wait for git", e)),
        };
        let read =
            |p: &Path| read_tail(p).map_err(|e| io_failure("could not read git's output", e));
        Ok(Finished {
            status,
            stdout: read(&out_path)?,
            stderr: read(&err_path)?,
            credential_rejected: self.path().join(REJECTED_MARK).exists(),
        })
    }
}

/// Wait for `child` until it exits (`Some(status)`) or `deadline` passes: then SIGKILL its
/// process group, reap it, and return `None`. The wait sleeps on the child's pidfd, so its
/// exit is seen at once (a poll by sleeps saw a 31 ms git only after 62 ms); where the kernel
/// has no pidfd (before Linux 5.3) it falls back to sleeps of up to [`MAX_POLL`].
fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<Option<ExitStatus>> {
    let pid = rustix::process::Pid::from_child(child);
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok();
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        let now = Instant::now();
        if now >= deadline {
            kill_group(child);
            child.wait()?;
            return Ok(None);
        }
        let left = deadline - now;
        // Woken at the latest every hour: a deadline days away needs no exact timespec.
        let timeout = rustix::event::Timespec::try_from(left.min(Duration::from_secs(3600)));
        match (&pidfd, timeout) {
            (Some(fd), Ok(timeout)) => {
                let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
                match rustix::event::poll(&mut fds, Some(&timeout)) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            _ => {
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(MAX_POLL);
            }
        }
    }
}

fn kill_group(child: &mut Child) {
    let pgid = rustix::process::Pid::from_child(child);
    if rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL).is_err() {
        // The group is gone already, or never formed; make sure of the child itself.
        let _ = child.kill();
    }
}

/// The file's text, at most its last [`MAX_OUTPUT`] bytes, lossily decoded.
fn read_tail(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    if len > MAX_OUTPUT {
        file.seek(SeekFrom::Start(len - MAX_OUTPUT))?;
    }
    let mut bytes = Vec::new();
    file.take(MAX_OUTPUT).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "ghp_S3cr3t/Tok+en=";

    #[test]
    fn a_child_is_waited_for_until_it_exits_and_stopped_at_its_deadline() {
        let far = Instant::now() + Duration::from_secs(60);
        let mut quick = Command::new("sh");
        quick.args(["-c", "sleep 0.05; exit 3"]).process_group(0);
        let mut child = quick.spawn().expect("sh runs");
        let status = wait_until(&mut child, far).expect("waits");
        assert_eq!(status.and_then(|s| s.code()), Some(3));

        let mut slow = Command::new("sleep");
        slow.arg("30").process_group(0);
        let mut child = slow.spawn().expect("sleep runs");
        let started = Instant::now();
        let status = wait_until(&mut child, started + Duration::from_millis(100)).expect("waits");
        assert!(
            status.is_none(),
            "a child past its deadline is stopped: {status:?}"
        );
        // Reaped: nothing is left to wait for.
        assert!(child.try_wait().expect("reaped").is_some());
    }

    #[test]
    fn the_token_user_comes_from_the_link_then_the_url_then_the_default() {
        let mut r = remote("https://ana@git.example.com/p.git");
        assert_eq!(r.token_user(), "ana");
        r.user = Some("bob".into());
        assert_eq!(r.token_user(), "bob");
        assert_eq!(
            remote("https://git.example.com/p.git").token_user(),
            "x-access-token"
        );
        assert_eq!(
            remote("https://a:b@git.example.com/p.git").token_user(),
            "x-access-token"
        );
    }

    #[test]
    fn a_token_over_plain_http_to_another_host_is_warned_about() {
        assert!(clear_text_warning("http://git.example.com/p.git", true).is_some());
        assert!(clear_text_warning("HTTP://git.example.com/p.git", true).is_some());
        assert!(clear_text_warning("http://git.example.com/p.git", false).is_none());
        assert!(clear_text_warning("https://git.example.com/p.git", true).is_none());
        assert!(clear_text_warning("http://127.0.0.1:9/p.git", true).is_none());
        assert!(clear_text_warning("ssh://git.example.com/p.git", true).is_none());
    }

    fn remote(url: &str) -> Remote {
        Remote {
            url: url.to_owned(),
            token: Some(Secret::parse(TOKEN).unwrap()),
            user: None,
        }
    }

    fn envs(cmd: &Command) -> Vec<(String, Option<String>)> {
        cmd.get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect()
    }

    #[test]
    fn failure_codes_have_stable_strings() {
        let all = [
            (FailureCode::Network, "network"),
            (FailureCode::Auth, "auth"),
            (FailureCode::NotFound, "not-found"),
            (FailureCode::Diverged, "diverged"),
            (FailureCode::Timeout, "timeout"),
            (FailureCode::Other, "other"),
        ];
        for (code, s) in all {
            assert_eq!(code.to_string(), s);
            assert_eq!(serde_json::to_value(code).unwrap(), s);
            assert_eq!(
                serde_json::from_value::<FailureCode>(s.into()).unwrap(),
                code
            );
        }
        assert!(serde_json::from_value::<FailureCode>("not_found".into()).is_err());
    }

    #[test]
    fn argv_never_carries_the_token() {
        let scratch = Path::new("/tmp/scratch");
        for url in [
            "https://forge.example/o/pool.git",
            "http://127.0.0.1:8080/pool.git",
            "git@forge.example:o/pool.git",
        ] {
            let cmd = command_for(
                Path::new("/m/.git"),
                &remote(url),
                scratch,
                &["push", "--porcelain", url, "x:y"],
            );
            let mut argv = vec![cmd.get_program().to_os_string()];
            argv.extend(cmd.get_args().map(|a| a.to_os_string()));
            for arg in &argv {
                let arg = arg.to_string_lossy();
                assert!(!arg.contains(TOKEN) && !arg.contains("S3cr3t"), "{arg}");
            }
            for (k, v) in envs(&cmd) {
                let v = v.unwrap_or_default();
                if k == TOKEN_ENV {
                    assert_eq!(v, TOKEN);
                } else {
                    assert!(!v.contains("S3cr3t"), "{k}={v}");
                }
            }
            // Prompts off, user config out, credential helpers reset before ours.
            let env = envs(&cmd);
            let get = |name: &str| {
                env.iter()
                    .find(|(k, _)| k == name)
                    .and_then(|(_, v)| v.clone())
            };
            assert_eq!(get("GIT_TERMINAL_PROMPT").as_deref(), Some("0"));
            assert_eq!(get("GIT_CONFIG_GLOBAL").as_deref(), Some("/dev/null"));
            assert_eq!(get("GIT_CONFIG_NOSYSTEM").as_deref(), Some("1"));
            assert_eq!(
                get("GIT_CONFIG_KEY_0").as_deref(),
                Some("credential.helper")
            );
            assert_eq!(get("GIT_CONFIG_VALUE_0").as_deref(), Some(""));
            let has_token = get(TOKEN_ENV).is_some();
            assert_eq!(
                has_token,
                url.starts_with("http"),
                "ssh never gets the token: {url}"
            );
        }
    }

    #[test]
    fn classify_real_git_messages() {
        let cases: &[(&str, bool, FailureCode)] = &[
            ("fatal: Authentication failed for 'https://forge.example/o/p.git/'", false, FailureCode::Auth),
            ("remote: Invalid username or token.\nfatal: unable to access 'x': The requested URL returned error: 403", false, FailureCode::Auth),
            ("fatal: could not read Username for 'https://forge.example': terminal prompts disabled", false, FailureCode::Auth),
            ("git@forge.example: Permission denied (publickey).\nfatal: Could not read from remote repository.", false, FailureCode::Auth),
            ("error: RPC failed; HTTP 401 curl 22 The requested URL returned error: 401", false, FailureCode::Auth),
            ("fatal: the remote end hung up unexpectedly", true, FailureCode::Auth),
            ("remote: Repository not found.\nfatal: repository 'https://forge.example/o/nope.git/' not found", false, FailureCode::NotFound),
            ("fatal: unable to access 'x': The requested URL returned error: 404", false, FailureCode::NotFound),
            ("ERROR: Repository not found.\nfatal: Could not read from remote repository.", false, FailureCode::NotFound),
            ("fatal: '/srv/x' does not appear to be a git repository", false, FailureCode::NotFound),
            ("fatal: unable to access 'x': Could not resolve host: nowhere.invalid", false, FailureCode::Network),
            ("fatal: unable to access 'x': Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server", false, FailureCode::Network),
            ("ssh: connect to host forge.example port 22: Connection refused", false, FailureCode::Network),
            ("ssh: Could not resolve hostname nowhere: Name or service not known", false, FailureCode::Network),
            ("error: RPC failed; curl 56 Recv failure: Connection reset by peer", false, FailureCode::Network),
            ("fatal: unable to access 'x': The requested URL returned error: 502", false, FailureCode::Network),
            ("fatal: unable to access 'x': Operation too slow. Less than 1000 bytes/sec transferred the last 30 seconds", false, FailureCode::Timeout),
            (" ! [rejected]        abc -> main (fetch first)\nerror: failed to push some refs", false, FailureCode::Diverged),
            // A web page answered (a login page): git's dumb protocol cannot push.
            ("error: Cannot access URL http://127.0.0.1:1/p.git/, return code 22\nfatal: git-http-push failed\nerror: failed to push some refs to 'http://127.0.0.1:1/p.git'", false, FailureCode::NotGit),
            ("fatal: https://forge.example/login/info/refs not valid: is this a git repository?", false, FailureCode::NotGit),
            // A message that merely mentions divergence is not a divergence.
            ("fatal: histories diverge: weird server message", false, FailureCode::Other),
            ("fatal: not a git repository: '/m/.git'", false, FailureCode::Other),
            ("", false, FailureCode::Other),
            ("\u{0}\u{ff}garbage\n\n\n", false, FailureCode::Other),
        ];
        for (stderr, rejected, want) in cases {
            assert_eq!(classify(stderr, *rejected), *want, "{stderr:?}");
        }
        assert_eq!(classify(&"x".repeat(1 << 20), false), FailureCode::Other);
    }

    #[test]
    fn porcelain_lines() {
        let out = "To http://127.0.0.1:1/pool.git\n!\tabc:refs/heads/main\t[rejected] (fetch first)\nDone\n";
        assert_eq!(
            porcelain_status(out, REMOTE_BRANCH),
            Some(RefStatus::Rejected {
                summary: "[rejected] (fetch first)".into()
            })
        );
        let out = "To x\n!\tabc:refs/heads/main\t[rejected] (non-fast-forward)\nDone\n";
        assert!(matches!(
            porcelain_status(out, REMOTE_BRANCH),
            Some(RefStatus::Rejected { .. })
        ));
        let out =
            "To x\n!\tabc:refs/heads/main\t[remote rejected] (pre-receive hook declined)\nDone\n";
        assert!(matches!(
            porcelain_status(out, REMOTE_BRANCH),
            Some(RefStatus::Refused { .. })
        ));
        let out = "To x\n*\tabc:refs/heads/main\t[new branch]\nDone\n";
        assert_eq!(
            porcelain_status(out, REMOTE_BRANCH),
            Some(RefStatus::Updated)
        );
        let out = "To x\n \tabc:refs/heads/main\t1111111..2222222\nDone\n";
        assert_eq!(
            porcelain_status(out, REMOTE_BRANCH),
            Some(RefStatus::Updated)
        );
        let out = "To x\n=\tabc:refs/heads/main\t[up to date]\nDone\n";
        assert_eq!(
            porcelain_status(out, REMOTE_BRANCH),
            Some(RefStatus::Updated)
        );
        // Another ref's line, truncated or garbled lines: not ours.
        for out in [
            "",
            "To x\n!\tabc:refs/heads/other\t[rejected] (fetch first)\n",
            "!\tabc",
            "!\tno-colon\t[rejected]",
            "\t\t\t",
            "!\tabc:refs/heads/main-not\t[rejected]",
        ] {
            assert_eq!(porcelain_status(out, REMOTE_BRANCH), None, "{out:?}");
        }
    }

    #[test]
    fn scrub_removes_the_token_before_cutting() {
        let secret = Secret::parse(TOKEN).unwrap();
        let text = format!(
            "remote: {TOKEN} and https://u:{}@h/ and {}",
            percent_encode(TOKEN, false),
            percent_encode(TOKEN, true)
        );
        let out = scrub(&text, Some(&secret));
        assert!(!out.contains("S3cr3t"), "{out}");
        assert_eq!(out.matches("***").count(), 3, "{out}");
        // A token straddling the cut is replaced first, never half-kept.
        let long = format!(
            "{}{TOKEN}{}",
            "a".repeat(10_000),
            "b".repeat(MAX_DETAIL - 3)
        );
        let out = scrub(&long, Some(&secret));
        assert!(out.starts_with("…"), "cut");
        assert!(
            !out.contains("S3cr3t") && !out.contains("Tok"),
            "{}",
            &out[..40]
        );
        // Multi-byte text cut on a char boundary.
        let wide = "é".repeat(MAX_DETAIL);
        assert!(scrub(&wide, None).len() <= MAX_DETAIL + "…".len());
    }

    #[test]
    fn errors_never_show_the_token_or_a_url_password() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = remote("https://user:hunter2@forge.example/o/p.git");
        let err = fetch(dir.path(), &r, Duration::from_secs(5)).unwrap_err();
        assert_eq!(err.code, FailureCode::Other);
        for shown in [err.to_string(), format!("{err:?}")] {
            assert!(
                !shown.contains("hunter2") && !shown.contains("S3cr3t"),
                "{shown}"
            );
        }
        assert!(err.url.contains("user:***@"), "{}", err.url);
        r.url = "--upload-pack=evil".into();
        assert_eq!(
            push(dir.path(), &r, &"a".repeat(40), Duration::from_secs(5))
                .unwrap_err()
                .code,
            FailureCode::Other
        );
        r.url = "https://forge.example/o/p.git".into();
        let err = push(dir.path(), &r, "HEAD", Duration::from_secs(5)).unwrap_err();
        assert_eq!(err.code, FailureCode::Other);
        assert!(format!("{r:?}").contains("***") && !format!("{r:?}").contains("S3cr3t"));
        let err = failure(
            Operation::Push,
            &r,
            FailureCode::Auth,
            format!("echoed {TOKEN}"),
        );
        assert!(!err.to_string().contains("S3cr3t") && !format!("{err:?}").contains("S3cr3t"));
        assert!(
            err.to_string()
                .starts_with("push to https://forge.example/o/p.git failed (auth): echoed *** (the token was sent as user \"x-access-token\""),
            "{err}"
        );
    }

    #[test]
    fn loopback_table() {
        let yes = [
            "http://127.0.0.1:8080/pool.git",
            "http://127.0.0.1/pool.git",
            "https://127.5.6.7/x",
            "http://localhost:3000/x.git",
            "HTTP://LOCALHOST/x",
            "http://localhost./x",
            "http://[::1]:9000/x",
            "http://[::1]/x",
            "http://[::ffff:127.0.0.1]/x",
            "http://user@127.0.0.1/x",
            "http://127.0.0.1",
            "http://localhost?x",
        ];
        let no = [
            "https://forge.example/o/p.git",
            "http://127.0.0.1.evil.example/x",
            "http://localhost@evil.example/x",
            "http://evil.example#@127.0.0.1/",
            "http://evil.example\\@127.0.0.1/",
            "http://foo.localhost/x",
            "http://127.1/x",
            "http://0.0.0.0/x",
            "http://[::2]/x",
            "http://[::1/x",
            "http://[::1]x/x",
            "http://127.0.0.1:80a/x",
            "ssh://localhost/x",
            "git@localhost:x.git",
            "/srv/pool.git",
            "file:///srv/pool.git",
            "treedx+http://127.0.0.1/x",
            "",
            "http://",
            "://127.0.0.1",
            "http://lo calhost/",
        ];
        for url in yes {
            assert!(is_loopback(url), "{url}");
        }
        for url in no {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn network_url_table() {
        let yes = [
            "https://github.com/o/p.git",
            "http://127.0.0.1:1/p.git",
            "ssh://git@host:2222/o/p.git",
            "git+ssh://host/p",
            "git://host/p.git",
            "git@github.com:o/p.git",
            "host:path/p.git",
            "[::1]:p.git",
            "user@[::1]:p.git",
        ];
        let no = [
            "/srv/pool.git",
            "./a:b",
            "pool",
            "../pool",
            "file:///srv/pool.git",
            "treedx+https://svc/repo",
            "ftp://host/p",
            "https://",
            "git@host:",
            ":path",
            "@:path",
            "-oProxyCommand=evil:x",
            "host:path with space",
            "",
            "[::1]p",
        ];
        for url in yes {
            assert!(is_network_url(url), "{url}");
        }
        for url in no {
            assert!(!is_network_url(url), "{url}");
        }
    }

    #[test]
    fn deadline_kills_the_whole_process_group() {
        let scratch = Scratch::new().unwrap();
        let pid_file = scratch.path().join("grandchild");
        // Retry with a longer deadline until the shell got to start its child before it.
        let mut allowed = Duration::from_millis(200);
        let pid = loop {
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg(format!(
                    "sleep 300 & echo $! > {}; wait",
                    pid_file.display()
                ))
                .process_group(0);
            let got = scratch.run(cmd, Instant::now() + allowed, allowed);
            assert!(
                matches!(got, Err((FailureCode::Timeout, _))),
                "{:?}",
                got.err()
            );
            match std::fs::read_to_string(&pid_file) {
                Ok(pid) if !pid.trim().is_empty() => break pid,
                _ => allowed *= 2,
            }
        };
        let stat = format!("/proc/{}/stat", pid.trim());
        // SIGKILL was sent to the group; give it ample time to land (a survivor sleeps 300 s).
        let patience = Instant::now() + Duration::from_secs(60);
        loop {
            match std::fs::read_to_string(&stat) {
                Err(_) => break,
                Ok(s) if s.rsplit(')').next().unwrap().trim_start().starts_with('Z') => break,
                Ok(s) => {
                    assert!(
                        Instant::now() < patience,
                        "the grandchild survived the deadline: {s}"
                    );
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    #[test]
    fn a_quick_command_finishes_with_its_output() {
        let scratch = Scratch::new().unwrap();
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg("echo out; echo err >&2; exit 3");
        let done = scratch
            .run(
                cmd,
                Instant::now() + Duration::from_secs(60),
                Duration::from_secs(60),
            )
            .ok()
            .unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout, "out\n");
        assert_eq!(done.stderr, "err\n");
        assert!(!done.credential_rejected);
    }
}

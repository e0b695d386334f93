//! The link: which pool this workspace publishes to, and under which declared regime.
//! Kept in `<store>/pool.json` (atomic writes); the token, when there is one, lives only
//! under the DSH home (`crate::credentials`), never in the project tree.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::Visibility;
use super::transport;
use crate::store::atomic;

pub const LINK_FILE: &str = "pool.json";
pub const LINK_VERSION: u32 = 1;

/// Where the pool is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Upstream {
    /// A directory: a bare repository, created on first sync when absent. No git program,
    /// no credentials.
    Local { path: PathBuf },
    /// A network git URL (https, http on loopback, ssh).
    Network { url: String },
}

impl Upstream {
    pub fn describe(&self) -> String {
        match self {
            Upstream::Local { path } => path.display().to_string(),
            // Never the secret a hand-edited or older `pool.json` may still hold.
            Upstream::Network { url } => match find_url_secrets(url) {
                Some(found) => found.masked,
                None => url.clone(),
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkRecord {
    pub v: u32,
    pub upstream: Upstream,
    pub visibility: Visibility,
    pub linked_at: String,
    pub linked_by: String,
    /// The user name an https token is sent as (`link --user`); absent: the URL's user,
    /// else `x-access-token`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The pool this link adopted, recorded by the first good sync after `link` and kept
    /// up by every good sync after it. While it is set, a pool that is missing, empty or
    /// whose history lost `head` is refused (`pool-missing` / `pool-replaced`), never
    /// re-created nor adopted: only `chapters link` (which writes a record without it)
    /// adopts a pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolIdentity>,
}

/// What a good sync saw of the pool (`pool.json`'s `pool`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolIdentity {
    /// `GitRepo::root_fingerprint` of the pool's first commit: its author line and message,
    /// which a history rewrite (`git filter-repo`, `git filter-branch`) keeps and a pool
    /// created anew does not.
    pub root: String,
    /// The pool's head at the end of this machine's last good sync: every later head
    /// descends from it, unless the history was rewritten or the pool replaced.
    pub head: String,
    pub recorded_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is damaged ({detail}); link the pool again with `chapters link <pool> --visibility …`")]
    Damaged { path: PathBuf, detail: String },
    #[error("{url} is a network pool: a token is required (--token-file F or --token-stdin); only loopback pools may go without")]
    TokenRequired { url: String },
    #[error("{url} is an ssh URL: it uses your own ssh setup, so no token is taken; drop --token-file/--token-stdin")]
    TokenForSsh { url: String },
    #[error("{path} is a symbolic link that cannot be followed ({source}): give the pool's real directory, or repair the link")]
    BadSymlink {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is a file, not a directory that can hold a pool: give a directory (an absent or empty one becomes a bare repository on first sync) or a git URL")]
    NotADirectory { path: PathBuf },
    #[error("{url} has a query or a fragment, which git cannot use in a repository's URL (it adds its own path and query after it); nothing was written: link the repository's URL alone, {repository}")]
    QueryInUrl { url: String, repository: String },
    #[error("{masked} carries a credential ({what}) inside the URL; refused, nothing was written: the link is kept in the project tree, where a credential must never be")]
    SecretInUrl { masked: String, what: String },
    #[error("{path} is inside the workspace {workspace}: the pool is never the project; give a bare repository, or an empty or new directory, outside the project")]
    InsideWorkspace { path: PathBuf, workspace: PathBuf },
    #[error("{path} holds the workspace {workspace}: the pool is never the project; give a bare repository, or an empty or new directory, outside the project")]
    HoldsWorkspace { path: PathBuf, workspace: PathBuf },
    #[error("{path} is the workspace's own git repository ({repo}): the pool is never the project; give a bare repository, or an empty or new directory, outside the project")]
    OwnRepository { path: PathBuf, repo: PathBuf },
    #[error("{path} is a repository with a work tree ({why}): sync would commit conversation into someone's checkout; give a bare repository (`git init --bare`), or an empty or new directory, outside the project")]
    WorkTree { path: PathBuf, why: &'static str },
    #[error("{path} holds files and is not a bare git repository: give a bare repository, or an empty or new directory, outside the project")]
    NotEmpty { path: PathBuf },
    #[error("moving the credential out of {path}: {source}")]
    Credential {
        path: PathBuf,
        #[source]
        source: crate::credentials::CredentialError,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

pub fn link_path(store_dir: &Path) -> PathBuf {
    store_dir.join(LINK_FILE)
}

/// Whether `workspace` is linked to a pool (its store holds a readable link): what the
/// doors hand `rules::store::assemble`.
pub fn is_linked(workspace: &Path) -> Result<bool, LinkError> {
    Ok(read(&workspace.join(crate::store::STORE_DIR))?.is_some())
}

/// The link, or `None` when the workspace is not linked.
pub fn read(store_dir: &Path) -> Result<Option<LinkRecord>, LinkError> {
    let path = link_path(store_dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(LinkError::Io { path, source }),
    };
    let record: LinkRecord = serde_json::from_slice(&bytes).map_err(|e| LinkError::Damaged {
        path: path.clone(),
        detail: e.to_string(),
    })?;
    if record.v > LINK_VERSION {
        return Err(LinkError::Damaged {
            path,
            detail: format!(
                "format version {} is newer than this program reads ({LINK_VERSION})",
                record.v
            ),
        });
    }
    Ok(Some(record))
}

/// Remove the link (`chapters unlink`): `Ok(false)` when there was none. Durable: the
/// directory is synced after the file goes.
pub fn remove(store_dir: &Path) -> Result<bool, LinkError> {
    let path = link_path(store_dir);
    match std::fs::remove_file(&path) {
        Ok(()) => {
            atomic::sync_dir(store_dir)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(LinkError::Io { path, source }),
    }
}

/// Why `user` cannot be the user name a token is sent as, if it cannot.
pub fn check_token_user(user: &str) -> Result<(), String> {
    if user.is_empty()
        || user
            .chars()
            .any(|c| c.is_control() || matches!(c, ':' | '@' | '/'))
    {
        return Err(format!(
            "{user:?} is not a usable user name: give the forge account's name (no `:`, `@`, `/` or control characters)"
        ));
    }
    Ok(())
}

pub fn write(store_dir: &Path, record: &LinkRecord) -> Result<(), LinkError> {
    let text = serde_json::to_string_pretty(record).expect("a LinkRecord always serializes");
    atomic::write_atomic(&link_path(store_dir), format!("{text}\n").as_bytes())?;
    Ok(())
}

/// What a network URL carries that must not be kept in the project tree: a password or a
/// token in the userinfo, a token in the query or fragment (`access_token=`,
/// `private_token=`, `token=`, `…_secret=`, `sig=` …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlSecrets {
    /// The URL without them: what the link keeps.
    pub clean: String,
    /// The URL with each replaced by `***`: what may be shown.
    pub masked: String,
    /// The values, percent-decoded, in the order found (a userinfo password first).
    pub secrets: Vec<String>,
    /// Where they were, for a person: `"a password in the userinfo"`, ….
    pub what: Vec<&'static str>,
}

/// Prefixes of tokens issued by forges and services (a user name never starts so).
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "glptt-",
    "glrt-",
    "gloas-",
    "glcbt-",
    "xoxb-",
    "xoxp-",
    "sk-",
    "hf_",
    "npm_",
    "pypi-",
    "dckr_pat_",
    "atatt",
];

/// Whether a userinfo name (no password) is a token rather than the user name the token
/// is sent as: a known token prefix, or 30 characters and more of letters, digits and `_`
/// only, mixing letters and digits (or 40 hex digits). A user name such as `ana`,
/// `x-access-token` or `gitlab+deploy-token-12` is kept.
fn looks_like_token(user: &str) -> bool {
    let lower = user.to_ascii_lowercase();
    if TOKEN_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    user.len() >= 30
        && user.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && user.bytes().any(|b| b.is_ascii_digit())
        && user.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Whether a query or fragment parameter's name says its value is a credential.
fn is_secret_param(name: &str) -> bool {
    let key = percent_decode(name).to_ascii_lowercase().replace('-', "_");
    matches!(
        key.as_str(),
        "sig" | "signature" | "pwd" | "pass" | "auth" | "key" | "code" | "sas" | "credential"
    ) || [
        "token",
        "secret",
        "password",
        "passwd",
        "apikey",
        "api_key",
        "signature",
    ]
    .iter()
    .any(|w| key.contains(w))
        || key.ends_with("_key")
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(h * 16 + l).expect("two hex digits fit a byte"));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `params` (`a=1&b=2`) with secret values cut out (`clean`) and masked (`masked`).
fn split_params(
    params: &str,
    found: &mut Vec<String>,
    what: &mut Vec<&'static str>,
    label: &'static str,
) -> (String, String) {
    let mut clean = Vec::new();
    let mut masked = Vec::new();
    for pair in params.split('&') {
        match pair.split_once('=') {
            Some((name, value)) if !value.is_empty() && is_secret_param(name) => {
                found.push(percent_decode(value));
                what.push(label);
                masked.push(format!("{name}=***"));
            }
            _ => {
                clean.push(pair);
                masked.push(pair.to_owned());
            }
        }
    }
    (clean.join("&"), masked.join("&"))
}

/// The credentials a `scheme://` URL carries, or `None` when it carries none.
pub fn find_url_secrets(url: &str) -> Option<UrlSecrets> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let mut secrets = Vec::new();
    let mut what = Vec::new();
    let (clean_auth, masked_auth) = match authority.rsplit_once('@') {
        None => (authority.to_owned(), authority.to_owned()),
        Some((info, host)) => {
            let (user, pass) = match info.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (info, None),
            };
            let user_secret = looks_like_token(&percent_decode(user));
            let pass_secret = pass.is_some_and(|p| !p.is_empty());
            if pass_secret {
                secrets.push(percent_decode(pass.unwrap_or_default()));
                what.push("a password in the userinfo");
            }
            if user_secret {
                secrets.push(percent_decode(user));
                what.push("a token as the user name");
            }
            let shown_user = if user_secret { "***" } else { user };
            let masked = match (pass_secret, pass) {
                (true, _) => format!("{shown_user}:***@{host}"),
                (false, Some(p)) => format!("{shown_user}:{p}@{host}"),
                (false, None) => format!("{shown_user}@{host}"),
            };
            let clean = if user_secret || user.is_empty() {
                host.to_owned()
            } else {
                format!("{user}@{host}")
            };
            (clean, masked)
        }
    };
    // The path, then `?query`, then `#fragment`.
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (before_fragment, None),
    };
    let mut clean = format!("{scheme}://{clean_auth}{path}");
    let mut masked = format!("{scheme}://{masked_auth}{path}");
    for (sep, part, label) in [
        ('?', query, "a token in the query"),
        ('#', fragment, "a token in the fragment"),
    ] {
        let Some(part) = part else { continue };
        let (c, m) = split_params(part, &mut secrets, &mut what, label);
        if !c.is_empty() {
            clean.push(sep);
            clean.push_str(&c);
        }
        masked.push(sep);
        masked.push_str(&m);
    }
    if secrets.is_empty() {
        return None;
    }
    what.dedup();
    Some(UrlSecrets {
        clean,
        masked,
        secrets,
        what,
    })
}

/// Refuse a URL that carries a credential, echoing it masked. Besides the URL's structure
/// (userinfo, query, fragment), the built-in credential rules read it whole, so a token in
/// the path is refused too.
pub fn refuse_url_secrets(url: &str) -> Result<(), LinkError> {
    let found = find_url_secrets(url);
    let shown = found.as_ref().map_or(url, |f| f.masked.as_str());
    let mut what: Vec<&str> = found.as_ref().map(|f| f.what.clone()).unwrap_or_default();
    let mut masked = shown.to_owned();
    if let Some(redactor) = crate::redact::built_in() {
        let mut counts = crate::redact::RedactionCounts::default();
        let redacted = redactor.redact(shown, &mut counts);
        if counts.total() > 0 {
            masked = redacted.as_str().to_owned();
            what.push("a credential the built-in rules recognize");
        }
    }
    if what.is_empty() {
        return Ok(());
    }
    Err(LinkError::SecretInUrl {
        masked,
        what: what.join(", "),
    })
}

/// What [`migrate_secret`] did to a `pool.json` that held a credential in its URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// The old URL, masked.
    pub was: String,
    /// The URL kept now.
    pub url: String,
    /// Where the credential now lives (`credentials/<projectKey>`, 0600).
    #[serde(serialize_with = "crate::names::path_text")]
    pub credentials: PathBuf,
    /// `false` when a token was already stored for this project: it was kept, and the
    /// URL's credential dropped (revoke it at the forge: it sat in the project tree).
    pub moved: bool,
}

impl Migration {
    /// The note a person reads (never the credential).
    pub fn note(&self) -> String {
        let done = if self.moved {
            format!("moved it to {} (0600)", self.credentials.display())
        } else {
            format!(
                "dropped it, keeping the token already stored in {}",
                self.credentials.display()
            )
        };
        format!(
            "the pool URL in pool.json carried a credential ({}); {done} and rewrote the URL as {}. It sat in the project tree: consider revoking it at the forge",
            self.was, self.url
        )
    }
}

/// Move a credential out of an existing link's URL: the first one found goes to the
/// credentials file (unless a token is stored already), then `pool.json` is rewritten with
/// the URL without any (in that order, so a crash between leaves it in both places and
/// the next run finishes the move). `None` when there was nothing to move.
pub fn migrate_secret(
    store_dir: &Path,
    dsh_home: &Path,
    project_key: &str,
) -> Result<Option<Migration>, LinkError> {
    let Some(mut record) = read(store_dir)? else {
        return Ok(None);
    };
    let Upstream::Network { url } = &record.upstream else {
        return Ok(None);
    };
    let Some(found) = find_url_secrets(url) else {
        return Ok(None);
    };
    let path = link_path(store_dir);
    let cred_err = |source| LinkError::Credential {
        path: path.clone(),
        source,
    };
    let credentials =
        crate::credentials::credential_path(dsh_home, project_key).map_err(cred_err)?;
    let stored = crate::credentials::load(dsh_home, project_key).map_err(cred_err)?;
    let moved = match (&stored, found.secrets.first()) {
        (None, Some(secret)) => match crate::credentials::Secret::parse(secret) {
            Ok(token) => {
                crate::credentials::store(dsh_home, project_key, &token).map_err(cred_err)?;
                true
            }
            // Not a usable token (whitespace inside): dropped, as a stored one would be.
            Err(_) => false,
        },
        _ => false,
    };
    let migration = Migration {
        was: found.masked.clone(),
        url: found.clean.clone(),
        credentials,
        moved,
    };
    record.upstream = Upstream::Network { url: found.clean };
    write(store_dir, &record)?;
    Ok(Some(migration))
}

/// Where a local pool really is: the longest existing ancestor resolved (symlinks, `..`),
/// the rest (not there yet) normalized as `mkdir -p` would walk it.
fn resolve_physical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::Prefix(_) | Component::RootDir => out.push(part.as_os_str()),
            Component::CurDir => {}
            // `out` is physical up to here (resolved below), so going up is exact.
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if let Ok(real) = std::fs::canonicalize(&out) {
                    out = real;
                }
            }
        }
    }
    out
}

/// The workspace's own git directories: `.git` (a directory, or the file of a linked
/// worktree pointing elsewhere) and the common directory it shares.
fn own_git_dirs(workspace: &Path) -> Vec<PathBuf> {
    let dot_git = workspace.join(".git");
    let mut dirs = Vec::new();
    let git_dir = if dot_git.is_dir() {
        Some(dot_git)
    } else {
        std::fs::read_to_string(&dot_git).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("gitdir:"))
                .map(|d| workspace.join(d.trim()))
        })
    };
    if let Some(git_dir) = git_dir {
        if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
            dirs.push(resolve_physical(&git_dir.join(common.trim())));
        }
        dirs.push(resolve_physical(&git_dir));
    }
    dirs
}

/// Whether a git `config` file says `bare = true` in its `[core]` section.
fn config_says_bare(config: &str) -> bool {
    let mut in_core = false;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_core = line
                .trim_start_matches('[')
                .trim()
                .to_ascii_lowercase()
                .starts_with("core");
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if in_core && k.trim().eq_ignore_ascii_case("bare") {
                return matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "true" | "yes" | "on" | "1"
                );
            }
        }
    }
    false
}

/// The pool is never the project: refuse a local pool inside the workspace (or holding
/// it), the workspace's own repository, any repository with a work tree, and a directory
/// holding anything but a bare repository. Symlinks and `..` are resolved first.
pub fn check_local_pool(path: &Path, workspace: &Path) -> Result<(), LinkError> {
    // A symbolic link that loops, or points at nothing: no pool can live there (the sync
    // would later call it "not a git repository").
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        if let Err(source) = std::fs::metadata(path) {
            return Err(LinkError::BadSymlink {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    let real = resolve_physical(path);
    let ws = resolve_physical(workspace);
    for repo in own_git_dirs(&ws) {
        if real.starts_with(&repo) {
            return Err(LinkError::OwnRepository {
                path: path.to_path_buf(),
                repo,
            });
        }
    }
    if real.starts_with(&ws) {
        return Err(LinkError::InsideWorkspace {
            path: path.to_path_buf(),
            workspace: ws,
        });
    }
    if ws.starts_with(&real) {
        return Err(LinkError::HoldsWorkspace {
            path: path.to_path_buf(),
            workspace: ws,
        });
    }
    if !real.is_dir() {
        return Ok(());
    }
    let work_tree = |why| LinkError::WorkTree {
        path: path.to_path_buf(),
        why,
    };
    if std::fs::symlink_metadata(real.join(".git")).is_ok() {
        return Err(work_tree("it has a .git"));
    }
    let is_git_dir = real.join("HEAD").is_file() && real.join("objects").is_dir();
    if is_git_dir {
        if real.join("commondir").exists() || real.join("gitdir").exists() {
            return Err(work_tree("it is a linked worktree's git directory"));
        }
        let config = std::fs::read_to_string(real.join("config")).unwrap_or_default();
        if real.file_name().is_some_and(|n| n == ".git") || !config_says_bare(&config) {
            return Err(work_tree("it is the git directory of a checkout"));
        }
        return Ok(());
    }
    let empty = std::fs::read_dir(&real)
        .map(|mut entries| entries.next().is_none())
        .unwrap_or(false);
    if !empty {
        return Err(LinkError::NotEmpty {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Classify what the user typed: a network URL, or a local path made absolute against
/// `cwd` (a relative pool path would mean something else from every directory).
pub fn parse_upstream(target: &str, cwd: &Path) -> Result<Upstream, LinkError> {
    if transport::is_network_url(target) {
        // git adds its own path and query after a repository's URL (`…/info/refs?service=`),
        // so a query or a fragment would send every request somewhere else.
        if let Some(at) = target.find(['?', '#']) {
            return Err(LinkError::QueryInUrl {
                url: target.to_owned(),
                repository: target[..at].to_owned(),
            });
        }
        return Ok(Upstream::Network {
            url: target.to_owned(),
        });
    }
    let raw = target.strip_prefix("file://").unwrap_or(target);
    let path = if Path::new(raw).is_absolute() {
        PathBuf::from(raw)
    } else {
        cwd.join(raw)
    };
    if path.exists() && !path.is_dir() {
        return Err(LinkError::NotADirectory { path });
    }
    Ok(Upstream::Local { path })
}

/// Whether this upstream needs a token: network pools do, except loopback and ssh.
pub fn token_rule(upstream: &Upstream, have_token: bool) -> Result<(), LinkError> {
    match upstream {
        Upstream::Local { .. } => Ok(()),
        Upstream::Network { url } => {
            // `ssh://`, `git+ssh://`, and scp-like `[user@]host:path` — an alias from the
            // user's `~/.ssh/config` has no user part.
            if transport::is_ssh(url) {
                return if have_token {
                    Err(LinkError::TokenForSsh { url: url.clone() })
                } else {
                    Ok(())
                };
            }
            if have_token || transport::is_loopback(url) {
                Ok(())
            } else {
                Err(LinkError::TokenRequired { url: url.clone() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_kinds() {
        let cwd = Path::new("/home/ana/ws");
        assert_eq!(
            parse_upstream("../pool", cwd).expect("local"),
            Upstream::Local {
                path: PathBuf::from("/home/ana/ws/../pool")
            }
        );
        assert_eq!(
            parse_upstream("https://git.example.com/team/pool.git", cwd).expect("net"),
            Upstream::Network {
                url: "https://git.example.com/team/pool.git".into()
            }
        );
        assert!(matches!(
            parse_upstream("git@github.com:team/pool.git", cwd),
            Ok(Upstream::Network { .. })
        ));
        // git appends its own path and query: a network URL with either is refused, and the
        // message gives the URL without it; a local path may hold the characters.
        for url in [
            "https://git.example.com/pool.git?ref=main",
            "https://git.example.com/pool.git#main",
            "ssh://git.example.com/pool.git?x",
        ] {
            let e = parse_upstream(url, cwd).expect_err(url);
            assert!(matches!(e, LinkError::QueryInUrl { .. }), "{e}");
            assert!(
                e.to_string()
                    .ends_with("alone, https://git.example.com/pool.git")
                    || url.starts_with("ssh"),
                "{e}"
            );
        }
        assert!(matches!(
            parse_upstream("/srv/pools/a?b#c", cwd),
            Ok(Upstream::Local { .. })
        ));
    }

    #[test]
    fn tokens_are_required_except_loopback_and_ssh() {
        let net = |u: &str| Upstream::Network { url: u.into() };
        assert!(matches!(
            token_rule(&net("https://git.example.com/p.git"), false),
            Err(LinkError::TokenRequired { .. })
        ));
        assert!(token_rule(&net("https://git.example.com/p.git"), true).is_ok());
        assert!(token_rule(&net("http://127.0.0.1:8080/p.git"), false).is_ok());
        assert!(token_rule(&net("git@github.com:t/p.git"), false).is_ok());
        assert!(token_rule(&net("poolhost:/srv/pool.git"), false).is_ok());
        assert!(token_rule(&net("git+ssh://h/p.git"), false).is_ok());
        assert!(matches!(
            token_rule(&net("ssh://git@h/t/p.git"), true),
            Err(LinkError::TokenForSsh { .. })
        ));
        assert!(token_rule(&Upstream::Local { path: "/p".into() }, false).is_ok());
    }

    #[test]
    fn credentials_in_urls_are_found_masked_and_cut_out() {
        let cases: &[(&str, &str, &str, &[&str])] = &[
            (
                "https://ana:hunter2-pw@git.example.com/team/pool.git",
                "https://ana@git.example.com/team/pool.git",
                "https://ana:***@git.example.com/team/pool.git",
                &["hunter2-pw"],
            ),
            (
                "https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/t/p.git",
                "https://github.com/t/p.git",
                "https://***@github.com/t/p.git",
                &["ghp_abcdefghijklmnopqrstuvwxyz0123456789"],
            ),
            (
                "https://oauth2:glpat-AbCdEf123456@gitlab.com/t/p.git",
                "https://oauth2@gitlab.com/t/p.git",
                "https://oauth2:***@gitlab.com/t/p.git",
                &["glpat-AbCdEf123456"],
            ),
            (
                "https://h.example/p.git?private_token=s3cr3t&ref=main",
                "https://h.example/p.git?ref=main",
                "https://h.example/p.git?private_token=***&ref=main",
                &["s3cr3t"],
            ),
            (
                "https://h.example/p.git?Access_Token=a%2Fb#token=fr4gval",
                "https://h.example/p.git",
                "https://h.example/p.git?Access_Token=***#token=***",
                &["a/b", "fr4gval"],
            ),
            (
                "http://u:p%40ss@127.0.0.1:8080/p.git?token=t1",
                "http://u@127.0.0.1:8080/p.git",
                "http://u:***@127.0.0.1:8080/p.git?token=***",
                &["p@ss", "t1"],
            ),
            (
                "ssh://git:pw@h.example/p.git",
                "ssh://git@h.example/p.git",
                "ssh://git:***@h.example/p.git",
                &["pw"],
            ),
        ];
        for (url, clean, masked, secrets) in cases {
            let found = find_url_secrets(url).unwrap_or_else(|| panic!("{url}"));
            assert_eq!(found.clean, *clean, "{url}");
            assert_eq!(found.masked, *masked, "{url}");
            assert_eq!(found.secrets, *secrets, "{url}");
            let err = refuse_url_secrets(url).unwrap_err().to_string();
            for secret in *secrets {
                assert!(!err.contains(secret), "{err}");
            }
            assert!(err.contains(masked), "{err}");
            assert!(find_url_secrets(clean).is_none(), "{clean}");
        }
        for fine in [
            "https://git.example.com/team/pool.git",
            "https://ana@git.example.com/p.git",
            "https://gitlab+deploy-token-1234567@gitlab.com/t/p.git",
            "ssh://git@github.com/t/p.git",
            "http://127.0.0.1:8080/p.git?ref=main",
            "https://h.example/p.git?token=",
        ] {
            assert_eq!(find_url_secrets(fine), None, "{fine}");
            assert!(refuse_url_secrets(fine).is_ok(), "{fine}");
        }
        // Shown masked by every description of the link.
        let up = Upstream::Network {
            url: "https://u:pw-123@h/p.git".into(),
        };
        assert_eq!(up.describe(), "https://u:***@h/p.git");
    }

    #[test]
    fn a_stored_link_with_a_credential_is_migrated_once() {
        let tmp = tempfile::tempdir().expect("tmp");
        let (store, home) = (tmp.path().join("store"), tmp.path().join("home"));
        std::fs::create_dir_all(&store).expect("store");
        let mut rec = LinkRecord {
            v: 1,
            upstream: Upstream::Network {
                url: "https://u:tok-9f8e7d@h.example/p.git?x=1".into(),
            },
            visibility: Visibility::Private,
            linked_at: "2026-11-29T00:00:00.000Z".into(),
            linked_by: "m1".into(),
            user: None,
            pool: None,
        };
        write(&store, &rec).expect("write");
        let m = migrate_secret(&store, &home, "key-1")
            .expect("migrate")
            .expect("something moved");
        assert!(m.moved);
        assert_eq!(m.url, "https://u@h.example/p.git?x=1");
        assert!(!m.note().contains("tok-9f8e7d"), "{}", m.note());
        let stored = crate::credentials::load(&home, "key-1")
            .expect("load")
            .expect("stored");
        assert_eq!(stored.expose(), "tok-9f8e7d");
        let text = std::fs::read_to_string(link_path(&store)).expect("read");
        assert!(!text.contains("tok-9f8e7d"), "{text}");
        assert_eq!(migrate_secret(&store, &home, "key-1").expect("again"), None);
        // A token already stored wins; the URL's is dropped, never stored over it.
        rec.upstream = Upstream::Network {
            url: "https://h.example/p.git?access_token=other".into(),
        };
        write(&store, &rec).expect("write");
        let m = migrate_secret(&store, &home, "key-1")
            .expect("m")
            .expect("some");
        assert!(!m.moved);
        let stored = crate::credentials::load(&home, "key-1").expect("l");
        assert_eq!(stored.expect("kept").expose(), "tok-9f8e7d");
    }

    #[test]
    fn the_pool_is_never_the_project() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().expect("tmp");
        let root = std::fs::canonicalize(tmp.path()).expect("canon");
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join(".git/objects")).expect("ws");
        std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").expect("head");
        std::fs::create_dir_all(ws.join("src")).expect("src");
        let refused = |p: &Path| check_local_pool(p, &ws).expect_err(&p.display().to_string());
        assert!(matches!(refused(&ws), LinkError::InsideWorkspace { .. }));
        assert!(matches!(
            refused(&ws.join(".git")),
            LinkError::OwnRepository { .. }
        ));
        assert!(matches!(
            refused(&ws.join("src/../pool")),
            LinkError::InsideWorkspace { .. }
        ));
        assert!(matches!(
            refused(&ws.join("new/deeper/pool")),
            LinkError::InsideWorkspace { .. }
        ));
        assert!(matches!(refused(&root), LinkError::HoldsWorkspace { .. }));
        // `..` and symlinks resolved before deciding.
        symlink(&ws, root.join("alias")).expect("symlink");
        assert!(matches!(
            refused(&root.join("alias/pool")),
            LinkError::InsideWorkspace { .. }
        ));
        std::fs::create_dir_all(root.join("out")).expect("out");
        assert!(check_local_pool(&root.join("out/../ws/../out/pool"), &ws).is_ok());
        assert!(matches!(
            refused(&root.join("out/../ws/pool")),
            LinkError::InsideWorkspace { .. }
        ));
        // Another checkout, its git directory, a linked worktree's, a full directory.
        let other = root.join("other");
        std::fs::create_dir_all(other.join(".git/objects")).expect("other");
        std::fs::write(other.join(".git/HEAD"), "x").expect("head");
        std::fs::write(other.join(".git/config"), "[core]\n\tbare = false\n").expect("cfg");
        assert!(matches!(refused(&other), LinkError::WorkTree { .. }));
        assert!(matches!(
            refused(&other.join(".git")),
            LinkError::WorkTree { .. }
        ));
        std::fs::write(root.join("out/file"), "x").expect("file");
        assert!(matches!(
            refused(&root.join("out")),
            LinkError::NotEmpty { .. }
        ));
        // A bare repository, an empty directory and a new path are fine.
        let bare = root.join("pool.git");
        std::fs::create_dir_all(bare.join("objects")).expect("bare");
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").expect("head");
        std::fs::write(bare.join("config"), "[core]\n\tbare = true\n").expect("cfg");
        assert!(check_local_pool(&bare, &ws).is_ok());
        std::fs::create_dir_all(root.join("empty")).expect("empty");
        assert!(check_local_pool(&root.join("empty"), &ws).is_ok());
        assert!(check_local_pool(&root.join("new/pool"), &ws).is_ok());
        // A symbolic link that loops or points at nothing: refused (a first sync would
        // have replaced a dangling one with a directory of its own).
        std::os::unix::fs::symlink(root.join("loop-b"), root.join("loop-a")).expect("a");
        std::os::unix::fs::symlink(root.join("loop-a"), root.join("loop-b")).expect("b");
        std::os::unix::fs::symlink(root.join("gone"), root.join("dangling")).expect("d");
        for link in ["loop-a", "dangling"] {
            let e = refused(&root.join(link));
            assert!(matches!(e, LinkError::BadSymlink { .. }), "{e}");
        }
        // A link to a good place is fine.
        std::os::unix::fs::symlink(&bare, root.join("to-bare")).expect("to bare");
        assert!(check_local_pool(&root.join("to-bare"), &ws).is_ok());
        // A linked worktree: its own repository lives outside it.
        let wt = root.join("wt");
        std::fs::create_dir_all(&wt).expect("wt");
        std::fs::create_dir_all(ws.join(".git/worktrees/wt")).expect("admin");
        std::fs::write(ws.join(".git/worktrees/wt/commondir"), "../..\n").expect("common");
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", ws.join(".git/worktrees/wt").display()),
        )
        .expect("dotgit");
        assert!(matches!(
            check_local_pool(&ws.join(".git"), &wt),
            Err(LinkError::OwnRepository { .. })
        ));
    }

    #[test]
    fn round_trip_and_damage() {
        let tmp = tempfile::tempdir().expect("tmp");
        assert_eq!(read(tmp.path()).expect("absent"), None);
        let rec = LinkRecord {
            v: 1,
            upstream: Upstream::Local {
                path: "/pool".into(),
            },
            visibility: Visibility::Private,
            linked_at: "2026-11-29T00:00:00.000Z".into(),
            linked_by: "m1".into(),
            user: None,
            pool: None,
        };
        write(tmp.path(), &rec).expect("write");
        assert_eq!(read(tmp.path()).expect("read"), Some(rec));
        std::fs::write(link_path(tmp.path()), b"{not json").expect("garble");
        assert!(matches!(read(tmp.path()), Err(LinkError::Damaged { .. })));
    }
}

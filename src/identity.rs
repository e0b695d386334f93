//! Project identity (record §2.3, contract "Project identity"): projectKey = UUIDv5 over the
//! canonical remote, read from `.git/config` without the git program; override; path-derived
//! fallback flagged. Also the harness id and the workspace root. OWNER: store helper.
//!
//! [`canonical_remote`], [`uuid_v5`], [`parse_git_config_remote`] and [`choose_harness_id`]
//! are pure; [`read_git_origin`], [`resolve`], [`workspace_root`] and [`host_name`] are the
//! thin readers around them.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

/// The namespace every project key is derived in: the bytes of
/// `6ba7b811-9dad-11d1-80b4-00c04fd430c8`.
///
/// The record names NAMESPACE_OID, but the original TypeScript plugin shipped these bytes,
/// which are RFC 4122's URL namespace (OID is `…812…`), under that name, and every existing
/// pool is keyed with them. Keeping them is the contract: the original and this program must
/// give one project one key.
pub const PROJECT_NAMESPACE: [u8; 16] = [
    0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8,
];

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is a file but holds no `gitdir: <path>` line; the checkout is damaged — repair it, or set `projectKeyOverride`")]
    BadGitPointer { path: PathBuf },
    #[error("harness id {id:?} (from {origin}) is not a safe name: use letters, digits, `.`, `_` and `-`, not starting with `.` or `-`; set `harnessId` or CHAPTERS_HARNESS_ID")]
    UnsafeHarnessId { id: String, origin: String },
}

/// Where a project key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeySource {
    Override,
    Remote,
    PathDerived,
}

impl KeySource {
    /// The name shown by `status` and written to `project.yml`.
    pub fn as_str(self) -> &'static str {
        match self {
            KeySource::Override => "override",
            KeySource::Remote => "remote",
            KeySource::PathDerived => "path-derived",
        }
    }
}

/// The resolved project identity.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Identity {
    pub project_key: String,
    pub source: KeySource,
    /// Human-readable: `config <file>:<line>`, `remote origin <url> in <.git/config>`, `path <abs>`.
    pub origin: String,
    /// The canonical remote or the absolute path the key derives from (for an override:
    /// what would have been used without it).
    pub canonical: String,
}

impl Identity {
    /// A short human name for the project: the last segment of `canonical`, slugged.
    pub fn slug(&self) -> String {
        let last = self
            .canonical
            .rsplit('/')
            .find(|s| !s.is_empty())
            .unwrap_or_default();
        let slug = crate::render::slug(last);
        if slug.is_empty() {
            "project".into()
        } else {
            slug
        }
    }
}

/// RFC 4122 §4.3 name-based UUID, version 5 (SHA-1), lowercase and hyphenated.
pub fn uuid_v5(namespace: &[u8; 16], name: &[u8]) -> String {
    let digest = crate::names::sha1(&[namespace, name]);
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

static SCHEME: LazyLock<Regex> = LazyLock::new(|| compile(r"^(?:https?|ssh|git|file)://"));
static LEADING_SLASHES: LazyLock<Regex> = LazyLock::new(|| compile(r"^/+"));
static CREDENTIALS: LazyLock<Regex> = LazyLock::new(|| compile(r"^[^@/]*:[^@/]*@"));
static USER_HOST_PATH: LazyLock<Regex> =
    LazyLock::new(|| compile(r"^([a-z0-9._-]+)@([a-z0-9.-]+)[:/](.+)$"));
static HOST_COLON_PATH: LazyLock<Regex> = LazyLock::new(|| compile(r"^([a-z0-9.-]+):(.+)$"));
static TRAILING_SLASHES: LazyLock<Regex> = LazyLock::new(|| compile(r"/+$"));
static DOT_GIT: LazyLock<Regex> = LazyLock::new(|| compile(r"\.git$"));

fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a constant pattern compiles")
}

/// The canonical form of a remote URL (record §2.3), step for step as the original computes
/// it, so both programs derive one key from one remote:
///
/// 1. trim, lowercase;
/// 2. strip a scheme `https://`, `http://`, `ssh://`, `git://`, `file://`, then leading `/`
///    (so `file:///srv/r.git` and `/srv/r.git` agree);
/// 3. strip `user:pass@` (credentials must not fork identity);
/// 4. `user@host:path` and `user@host/path` → `host/path`; `host:path` → `host/path` — a port
///    is therefore kept as a path segment (`ssh://git@h:22/o/r` → `h/22/o/r`): still a
///    distinct key per port, and the original's form;
/// 5. strip trailing `/`, then one trailing `.git`.
///
/// The host is always kept: two hosts with the same path are different projects.
pub fn canonical_remote(url: &str) -> String {
    let s = url.trim().to_lowercase();
    let s = SCHEME.replace(&s, "");
    let s = LEADING_SLASHES.replace(&s, "");
    let s = CREDENTIALS.replace(&s, "");
    let s = USER_HOST_PATH.replace(&s, "$2/$3");
    let s = HOST_COLON_PATH.replace(&s, "$1/$2");
    let s = TRAILING_SLASHES.replace(&s, "");
    DOT_GIT.replace(&s, "").into_owned()
}

/// The project key of a remote URL.
pub fn project_key_for_remote(url: &str) -> String {
    uuid_v5(&PROJECT_NAMESPACE, canonical_remote(url).as_bytes())
}

/// A remote read from a git config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitRemote {
    pub name: String,
    pub url: String,
}

/// Which section a config line belongs to: (lowercased name, case-kept subsection).
type Section = (String, Option<String>);

/// Parse `[section]`, `[section "sub"]` or the old `[section.sub]` at the start of `line`;
/// returns the section and the rest of the line after `]`.
fn parse_section_header(line: &str) -> Option<(Section, &str)> {
    let inner = line.strip_prefix('[')?;
    let name_end = inner.find(|c: char| c.is_whitespace() || c == '"' || c == ']')?;
    let name = &inner[..name_end];
    let mut rest = inner[name_end..].trim_start();
    let subsection = if let Some(quoted) = rest.strip_prefix('"') {
        let mut sub = String::new();
        let mut chars = quoted.char_indices();
        let mut closed_at = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => sub.extend(chars.next().map(|(_, n)| n)),
                '"' => {
                    closed_at = Some(i + 1);
                    break;
                }
                _ => sub.push(c),
            }
        }
        rest = quoted[closed_at?..].trim_start();
        Some(sub)
    } else {
        None
    };
    let after = rest.strip_prefix(']')?;
    let section = match (subsection, name.split_once('.')) {
        (Some(sub), _) => (name.to_ascii_lowercase(), Some(sub)),
        // The deprecated dotted form lowercases its subsection, as git does.
        (None, Some((base, sub))) => (base.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())),
        (None, None) => (name.to_ascii_lowercase(), None),
    };
    Some((section, after))
}

/// Parse a value after `=` the way git does: quotes group, `\` escapes, `#`/`;` outside
/// quotes start a comment, a trailing `\` continues onto the next line, runs of blanks
/// outside quotes are kept inside the value and dropped at its ends.
fn parse_value<'a>(first: &'a str, more: &mut impl Iterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut pending_spaces = 0usize;
    let mut in_quotes = false;
    let mut line = first;
    'lines: loop {
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => in_quotes = !in_quotes,
                '\\' => match chars.next() {
                    None => {
                        line = more.next().unwrap_or_default();
                        continue 'lines;
                    }
                    Some(escaped) => {
                        out.extend(std::iter::repeat_n(
                            ' ',
                            std::mem::take(&mut pending_spaces),
                        ));
                        out.push(match escaped {
                            'n' => '\n',
                            't' => '\t',
                            'b' => '\u{8}',
                            other => other,
                        });
                    }
                },
                '#' | ';' if !in_quotes => break 'lines,
                c if c.is_whitespace() && !in_quotes => {
                    if !out.is_empty() {
                        pending_spaces += 1;
                    }
                }
                c => {
                    out.extend(std::iter::repeat_n(
                        ' ',
                        std::mem::take(&mut pending_spaces),
                    ));
                    out.push(c);
                }
            }
        }
        break;
    }
    out
}

/// The remote a project's identity derives from: `origin`'s first `url`, else the first
/// remote's (in file order). Pure; `include`/`includeIf` and `insteadOf` rewriting are not
/// followed (the key derives from the URL as written).
pub fn parse_git_config_remote(text: &str) -> Option<GitRemote> {
    let mut section: Option<Section> = None;
    let mut first: Option<GitRemote> = None;
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut line = raw.trim_start();
        if line.starts_with('[') {
            let Some((header, rest)) = parse_section_header(line) else {
                section = None;
                continue;
            };
            section = Some(header);
            line = rest.trim_start();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let key_end = line
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(line.len());
        let (key, rest) = line.split_at(key_end);
        let Some(value_text) = rest.trim_start().strip_prefix('=') else {
            continue;
        };
        let value = parse_value(value_text, &mut lines);
        let Some((name, Some(remote))) = &section else {
            continue;
        };
        if name != "remote" || !key.eq_ignore_ascii_case("url") || value.is_empty() {
            continue;
        }
        if remote == "origin" {
            return Some(GitRemote {
                name: remote.clone(),
                url: value,
            });
        }
        if first.is_none() {
            first = Some(GitRemote {
                name: remote.clone(),
                url: value,
            });
        }
    }
    first
}

/// Where the git config of the checkout at `workspace` lives: `.git/config`, or for a
/// worktree or submodule (`.git` is a `gitdir:` file) the config of its common dir.
/// `Ok(None)` when `workspace` holds no `.git`.
fn git_config_path(workspace: &Path) -> Result<Option<PathBuf>, IdentityError> {
    let dot_git = workspace.join(".git");
    let meta = match fs::metadata(&dot_git) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(IdentityError::Io {
                path: dot_git,
                source,
            })
        }
    };
    let git_dir = if meta.is_dir() {
        dot_git
    } else {
        let text = read_text(&dot_git)?;
        let target = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("gitdir:").map(str::trim))
            .filter(|t| !t.is_empty())
            .ok_or_else(|| IdentityError::BadGitPointer {
                path: dot_git.clone(),
            })?;
        workspace.join(target)
    };
    // A linked worktree's own dir has no config; its `commondir` names the shared one.
    let commondir = git_dir.join("commondir");
    let common = match fs::read_to_string(&commondir) {
        Ok(text) => git_dir.join(text.trim()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => git_dir,
        Err(source) => {
            return Err(IdentityError::Io {
                path: commondir,
                source,
            })
        }
    };
    Ok(Some(common.join("config")))
}

fn read_text(path: &Path) -> Result<String, IdentityError> {
    fs::read_to_string(path).map_err(|source| IdentityError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The remote of the checkout at `workspace` and the config file it was read from, without
/// the git program. `Ok(None)` when there is no `.git`, no config, or no remote with a url.
pub fn read_git_origin(workspace: &Path) -> Result<Option<(GitRemote, PathBuf)>, IdentityError> {
    let Some(config) = git_config_path(workspace)? else {
        return Ok(None);
    };
    let text = match fs::read_to_string(&config) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(IdentityError::Io {
                path: config,
                source,
            })
        }
    };
    Ok(parse_git_config_remote(&text).map(|remote| (remote, config)))
}

/// Resolve the project identity: override > remote > path-derived (UUIDv5 over the
/// absolute path string). `workspace` is the checkout's top level ([`workspace_root`]);
/// `override_key` is `(key, where it was set)`, e.g. `config <file>:<line>`.
pub fn resolve(
    workspace: &Path,
    override_key: Option<(&str, &str)>,
) -> Result<Identity, IdentityError> {
    let derived = match read_git_origin(workspace)? {
        Some((remote, config)) => {
            let canonical = canonical_remote(&remote.url);
            Identity {
                project_key: uuid_v5(&PROJECT_NAMESPACE, canonical.as_bytes()),
                source: KeySource::Remote,
                origin: format!(
                    "remote {} {} in {}",
                    remote.name,
                    remote.url,
                    config.display()
                ),
                canonical,
            }
        }
        None => {
            let absolute = std::path::absolute(workspace).map_err(|source| IdentityError::Io {
                path: workspace.to_path_buf(),
                source,
            })?;
            let path = absolute.to_string_lossy().into_owned();
            Identity {
                project_key: uuid_v5(&PROJECT_NAMESPACE, path.as_bytes()),
                source: KeySource::PathDerived,
                origin: format!("path {path}"),
                canonical: path,
            }
        }
    };
    Ok(match override_key {
        Some((key, origin)) => Identity {
            project_key: key.to_string(),
            source: KeySource::Override,
            origin: origin.to_string(),
            canonical: derived.canonical,
        },
        None => derived,
    })
}

/// The workspace a directory belongs to: the nearest enclosing directory holding `.git`
/// (a checkout's top level), else the directory itself; canonicalized.
pub fn workspace_root(dir: &Path) -> Result<PathBuf, IdentityError> {
    let canonical = fs::canonicalize(dir).map_err(|source| IdentityError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(canonical
        .ancestors()
        .find(|a| fs::symlink_metadata(a.join(".git")).is_ok())
        .unwrap_or(&canonical)
        .to_path_buf())
}

/// Whether `id` may be a harness id: it names a directory in the pool and the local part of
/// a commit author address, so letters, digits, `.`, `_`, `-` only, not leading `.`/`-`.
pub fn is_valid_harness_id(id: &str) -> bool {
    crate::names::is_safe_component(id)
        && !id.starts_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// env `CHAPTERS_HARNESS_ID` > config `harnessId` > the host name. Pure: the caller reads them.
pub fn choose_harness_id(
    env: Option<&str>,
    config: Option<&str>,
    host: &str,
) -> Result<String, IdentityError> {
    let (id, origin) = match (env, config) {
        (Some(v), _) => (v, "env CHAPTERS_HARNESS_ID"),
        (None, Some(v)) => (v, "config harnessId"),
        (None, None) => (host, "the host name"),
    };
    if is_valid_harness_id(id) {
        Ok(id.to_string())
    } else {
        Err(IdentityError::UnsafeHarnessId {
            id: id.to_string(),
            origin: origin.into(),
        })
    }
}

/// The warning when the environment names this machine otherwise than its config files: the
/// shell then speaks as one machine while the daemon and an editor-launched `chapters mcp`
/// (which read only the files) speak as another.
pub fn harness_id_disagreement(env: Option<&str>, files: Option<&str>) -> Option<String> {
    match (env, files) {
        (Some(e), Some(f)) if e != f => Some(format!(
            "CHAPTERS_HARNESS_ID is {e:?} but the config says harnessId {f:?}: the daemon and `chapters mcp` use {f:?}, so this shell archives as another machine — unset CHAPTERS_HARNESS_ID, or set harnessId to {e:?} in the config"
        )),
        _ => None,
    }
}

/// [`choose_harness_id`] with the host name read only when it is needed.
pub fn harness_id(
    config_value: Option<&str>,
    env_value: Option<&str>,
) -> Result<String, IdentityError> {
    match (env_value, config_value) {
        (None, None) => choose_harness_id(None, None, &host_name()),
        _ => choose_harness_id(env_value, config_value, ""),
    }
}

/// The host name: `/proc/sys/kernel/hostname`, else `/etc/hostname`, else `localhost`.
pub fn host_name() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v5_known_vectors() {
        // RFC 4122 DNS namespace and "python.org": the vector from Python's uuid docs.
        let dns = [
            0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4,
            0x30, 0xc8,
        ];
        assert_eq!(
            uuid_v5(&dns, b"python.org"),
            "886313e1-3b8a-5372-9b90-0c9aee199e5d"
        );
        // Expected values from `python3 -c "import uuid; print(uuid.uuid5(uuid.NAMESPACE_URL, NAME))"`.
        assert_eq!(
            uuid_v5(&PROJECT_NAMESPACE, b"https://example.com"),
            "4fd35a71-71ef-5a55-a9d9-aa75c889a6d0"
        );
        assert_eq!(
            uuid_v5(&PROJECT_NAMESPACE, b"github.com/org/repo"),
            "570721c2-f7fa-57ac-8d5d-c16a6acf1978"
        );
        assert_eq!(
            uuid_v5(&PROJECT_NAMESPACE, b""),
            "1b4db7eb-4057-5ddf-91e0-36dec72071f5"
        );
        assert_eq!(
            project_key_for_remote("git@github.com:Org/Repo.git"),
            "570721c2-f7fa-57ac-8d5d-c16a6acf1978"
        );
    }

    #[test]
    fn canonical_remote_table() {
        for (url, want) in [
            ("https://github.com/org/repo.git", "github.com/org/repo"),
            (
                "https://user:pass@GitHub.com/Org/Repo.git",
                "github.com/org/repo",
            ),
            ("https://user@github.com/org/repo", "github.com/org/repo"),
            ("http://github.com/org/repo", "github.com/org/repo"),
            (
                "ssh://git@host.example:22/org/repo.git",
                "host.example/22/org/repo",
            ),
            ("ssh://git@github.com/org/repo.git", "github.com/org/repo"),
            ("git@github.com:Org/Repo.git", "github.com/org/repo"),
            ("github.com:org/repo", "github.com/org/repo"),
            ("git://github.com/org/repo", "github.com/org/repo"),
            ("https://github.com/org/repo/", "github.com/org/repo"),
            ("https://github.com/org/repo.git///", "github.com/org/repo"),
            (
                "https://github.com/org/repo.git.git",
                "github.com/org/repo.git",
            ),
            ("file:///srv/git/Repo.git", "srv/git/repo"),
            ("/srv/git/repo.git", "srv/git/repo"),
            ("HTTPS://GITHUB.COM/ORG/REPO", "github.com/org/repo"),
            ("  https://github.com/org/repo  ", "github.com/org/repo"),
            ("https://gitlab.com/org/repo", "gitlab.com/org/repo"),
            ("https://host:8443/org/repo", "host/8443/org/repo"),
            ("", ""),
            ("::::", "::::"),
        ] {
            assert_eq!(canonical_remote(url), want, "{url}");
        }
        // Hostile input does not panic and stays one line.
        let long = format!("https://{}/repo.git", "a".repeat(100_000));
        assert_eq!(canonical_remote(&long).len(), 100_000 + 5);
    }

    #[test]
    fn git_config_origin_wins_else_first_remote() {
        let text = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://github.com/up/repo.git\n[remote \"origin\"]\n\turl = git@github.com:me/repo.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n";
        assert_eq!(
            parse_git_config_remote(text),
            Some(GitRemote {
                name: "origin".into(),
                url: "git@github.com:me/repo.git".into()
            })
        );
        let text = "[remote \"upstream\"]\n url = https://a/x\n url = https://b/x\n[remote \"fork\"]\n url = https://c/x\n";
        assert_eq!(
            parse_git_config_remote(text),
            Some(GitRemote {
                name: "upstream".into(),
                url: "https://a/x".into()
            })
        );
        assert_eq!(parse_git_config_remote("[core]\n\tbare = false\n"), None);
        assert_eq!(parse_git_config_remote(""), None);
        // `url` outside a remote section does not count.
        assert_eq!(
            parse_git_config_remote(
                "[url \"https://x/\"]\n\tinsteadOf = gh:\n[branch \"main\"]\n url = nope\n"
            ),
            None
        );
    }

    #[test]
    fn git_config_syntax() {
        let text = "# comment\n; another\n[Remote \"origin\"] # trailing comment\n\tURL = \"https://host/org/re;po.git\" ; comment\n";
        assert_eq!(
            parse_git_config_remote(text).unwrap().url,
            "https://host/org/re;po.git"
        );
        // Subsections are case-sensitive: `Origin` is not `origin`, but still a remote.
        let text =
            "[remote \"Origin\"]\n url = https://a/x\n[remote \"origin\"]\n url = https://b/x\n";
        assert_eq!(parse_git_config_remote(text).unwrap().url, "https://b/x");
        // Deprecated dotted form, inline comment, continuation, escapes.
        assert_eq!(
            parse_git_config_remote("[remote.origin]\nurl=https://a/x # c\n")
                .unwrap()
                .url,
            "https://a/x"
        );
        assert_eq!(
            parse_git_config_remote("[remote \"o\"]\nurl = https://a/\\\nx\n")
                .unwrap()
                .url,
            "https://a/x"
        );
        assert_eq!(
            parse_git_config_remote("[remote \"o\"]\nurl = \"a\\\"b\"\n")
                .unwrap()
                .url,
            "a\"b"
        );
        assert_eq!(
            parse_git_config_remote("[remote \"o\\\"q\"]\nurl = u\n")
                .unwrap()
                .name,
            "o\"q"
        );
        assert_eq!(
            parse_git_config_remote("[remote \"origin\"] url = inline\n")
                .unwrap()
                .url,
            "inline"
        );
        // Broken headers and keys without values are skipped, not guessed at.
        assert_eq!(
            parse_git_config_remote("[remote \"origin\"\nurl = x\n"),
            None
        );
        assert_eq!(
            parse_git_config_remote("[remote \"origin\"]\nurl\nurl =\n"),
            None
        );
        // Garbage does not panic.
        for junk in [
            "[",
            "[\"",
            "[a \"",
            "\\",
            "[remote \"o\"]\nurl = \\",
            "\u{0}\u{ffff}=\"",
            "[r \"\\",
        ] {
            let _ = parse_git_config_remote(junk);
        }
    }

    #[test]
    fn read_git_origin_from_dir_and_worktree_pointer() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        fs::write(
            main.join(".git/config"),
            "[remote \"origin\"]\n\turl = https://github.com/org/repo.git\n",
        )
        .unwrap();
        let (remote, config) = read_git_origin(&main).unwrap().unwrap();
        assert_eq!(remote.url, "https://github.com/org/repo.git");
        assert_eq!(config, main.join(".git/config"));

        // A linked worktree: `.git` is a file pointing at `<main>/.git/worktrees/wt`,
        // whose `commondir` leads back to the main git dir.
        let wt = dir.path().join("wt");
        fs::create_dir_all(&wt).unwrap();
        fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let (remote, _) = read_git_origin(&wt).unwrap().unwrap();
        assert_eq!(remote.url, "https://github.com/org/repo.git");
        let id = resolve(&wt, None).unwrap();
        assert_eq!(id.source, KeySource::Remote);
        assert_eq!(id.project_key, "570721c2-f7fa-57ac-8d5d-c16a6acf1978");
        assert!(
            id.origin
                .starts_with("remote origin https://github.com/org/repo.git in "),
            "{}",
            id.origin
        );

        // A submodule-style relative pointer without commondir.
        let sub = dir.path().join("sub");
        fs::create_dir_all(&sub).unwrap();
        fs::create_dir_all(dir.path().join("modules/sub")).unwrap();
        fs::write(sub.join(".git"), "gitdir: ../modules/sub\n").unwrap();
        fs::write(
            dir.path().join("modules/sub/config"),
            "[remote \"origin\"]\nurl = git@host:a/b.git\n",
        )
        .unwrap();
        assert_eq!(
            read_git_origin(&sub).unwrap().unwrap().0.url,
            "git@host:a/b.git"
        );

        let broken = dir.path().join("broken");
        fs::create_dir_all(&broken).unwrap();
        fs::write(broken.join(".git"), "nonsense\n").unwrap();
        assert!(matches!(
            read_git_origin(&broken),
            Err(IdentityError::BadGitPointer { .. })
        ));
    }

    #[test]
    fn resolve_falls_back_to_the_path_and_honours_override() {
        let dir = tempfile::tempdir().unwrap();
        let id = resolve(dir.path(), None).unwrap();
        let path = dir.path().to_string_lossy().into_owned();
        assert_eq!(id.source, KeySource::PathDerived);
        assert_eq!(id.project_key, uuid_v5(&PROJECT_NAMESPACE, path.as_bytes()));
        assert_eq!(id.origin, format!("path {path}"));

        // A .git without any remote is path-derived too.
        fs::create_dir_all(dir.path().join(".git")).unwrap();
        fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        assert_eq!(
            resolve(dir.path(), None).unwrap().source,
            KeySource::PathDerived
        );

        let id = resolve(dir.path(), Some(("my-key", "config /x/config.yml:3"))).unwrap();
        assert_eq!(
            (id.project_key.as_str(), id.source),
            ("my-key", KeySource::Override)
        );
        assert_eq!(id.origin, "config /x/config.yml:3");
        assert_eq!(id.canonical, path);
        assert_eq!(
            serde_json::to_value(KeySource::PathDerived).unwrap(),
            "path-derived"
        );
        assert_eq!(
            serde_json::to_value(KeySource::Override).unwrap(),
            "override"
        );
    }

    #[test]
    fn workspace_root_walks_up_to_the_checkout() {
        let dir = tempfile::tempdir().unwrap();
        let top = fs::canonicalize(dir.path()).unwrap();
        let deep = top.join("a/b");
        fs::create_dir_all(&deep).unwrap();
        // Without a .git anywhere below the temp dir the answer is the dir itself — unless
        // the temp dir sits inside a checkout, which the test cannot rule out; so assert
        // only after creating one.
        fs::create_dir_all(top.join(".git")).unwrap();
        assert_eq!(workspace_root(&deep).unwrap(), top);
        assert_eq!(workspace_root(&top).unwrap(), top);
        fs::write(deep.join(".git"), "gitdir: x").unwrap();
        assert_eq!(workspace_root(&deep).unwrap(), deep);
        assert!(matches!(
            workspace_root(&top.join("absent")),
            Err(IdentityError::Io { .. })
        ));
    }

    #[test]
    fn a_harness_id_the_environment_and_the_files_disagree_on_is_said() {
        assert_eq!(harness_id_disagreement(None, Some("a")), None);
        assert_eq!(harness_id_disagreement(Some("a"), None), None);
        assert_eq!(harness_id_disagreement(Some("a"), Some("a")), None);
        let w = harness_id_disagreement(Some("b"), Some("a")).unwrap();
        assert!(w.contains("\"b\"") && w.contains("harnessId \"a\""), "{w}");
    }

    #[test]
    fn harness_id_precedence_and_validation() {
        assert_eq!(
            choose_harness_id(Some("env-a"), Some("cfg"), "host").unwrap(),
            "env-a"
        );
        assert_eq!(choose_harness_id(None, Some("cfg"), "host").unwrap(), "cfg");
        assert_eq!(
            choose_harness_id(None, None, "box.example.com").unwrap(),
            "box.example.com"
        );
        for bad in ["", "../x", "a/b", ".hidden", "-x", "a b", "a@b", "é"] {
            let err = choose_harness_id(Some(bad), None, "host").unwrap_err();
            assert!(err.to_string().contains("CHAPTERS_HARNESS_ID"), "{err}");
        }
        assert!(choose_harness_id(None, None, "bad host").is_err());
        assert_eq!(harness_id(Some("cfg"), Some("env-b")).unwrap(), "env-b");
        assert_eq!(harness_id(Some("cfg"), None).unwrap(), "cfg");
    }

    #[test]
    fn slug_of_identity() {
        let mut id = Identity {
            project_key: "k".into(),
            source: KeySource::Remote,
            origin: String::new(),
            canonical: "github.com/org/My_Repo".into(),
        };
        assert_eq!(id.slug(), "my-repo");
        id.canonical = "/".into();
        assert_eq!(id.slug(), "project");
    }
}

//! The link: which pool this workspace publishes to, and under which declared regime.
//! Kept in `<store>/pool.json` (atomic writes); the token, when there is one, lives only
//! under the DSH home (`pool::credentials`), never in the project tree.

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
            Upstream::Network { url } => url.clone(),
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
    #[error("{path} is a file, not a directory that can hold a pool: give a directory (an absent or empty one becomes a bare repository on first sync) or a git URL")]
    NotADirectory { path: PathBuf },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

pub fn link_path(store_dir: &Path) -> PathBuf {
    store_dir.join(LINK_FILE)
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

pub fn write(store_dir: &Path, record: &LinkRecord) -> Result<(), LinkError> {
    let text = serde_json::to_string_pretty(record).expect("a LinkRecord always serializes");
    atomic::write_atomic(&link_path(store_dir), format!("{text}\n").as_bytes())?;
    Ok(())
}

/// Classify what the user typed: a network URL, or a local path made absolute against
/// `cwd` (a relative pool path would mean something else from every directory).
pub fn parse_upstream(target: &str, cwd: &Path) -> Result<Upstream, LinkError> {
    if transport::is_network_url(target) {
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
        };
        write(tmp.path(), &rec).expect("write");
        assert_eq!(read(tmp.path()).expect("read"), Some(rec));
        std::fs::write(link_path(tmp.path()), b"{not json").expect("garble");
        assert!(matches!(read(tmp.path()), Err(LinkError::Damaged { .. })));
    }
}

//! One resolution of environment, config and identity, shared by the CLI (every command and
//! `chapters mcp`) and the daemon (each workspace it follows, at start and on reload): the
//! DSH home from `DSH_HOME` / `HOME`, the `CHAPTERS_*` layer, the layered config, the
//! project identity (with `projectKeyOverride`), the harness id, and a credential in the
//! link's URL moved out of the project tree. A shell module; each door says the migration's
//! note its own way (stderr, the daemon's log).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{self, Config, ConfigError};
use crate::identity::{self, Identity, IdentityError};
use crate::pool::link::{self, LinkError, Migration};
use crate::store::STORE_DIR;

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "neither DSH_HOME nor HOME is set: set DSH_HOME to the harness's home (usually ~/.dsh)"
    )]
    NoHome,
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error(transparent)]
    Link(#[from] LinkError),
}

/// The DSH home: `$DSH_HOME`, else `$HOME/.dsh`. Read as `OsString`s: a path that is not
/// UTF-8 is a path like any other, never a panic.
pub fn dsh_home() -> Result<PathBuf, ResolveError> {
    if let Some(h) = std::env::var_os("DSH_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or(ResolveError::NoHome)?;
    Ok(PathBuf::from(home).join(".dsh"))
}

/// What every door resolves for a workspace before it acts on it.
#[derive(Debug)]
pub struct Resolved {
    pub config: Config,
    pub identity: Identity,
    pub harness_id: String,
    /// A credential found in `pool.json`'s URL and moved out by this resolution (#13.5).
    pub link_migration: Option<Migration>,
}

/// Resolve `workspace` (a checkout's top level, [`identity::workspace_root`]) under
/// `dsh_home` with `env` (the `CHAPTERS_*` layer, [`config::chapters_env`]): config
/// (defaults < home < workspace < env), identity (`projectKeyOverride` > remote > path),
/// the harness id (`CHAPTERS_HARNESS_ID` is the config's env layer, already folded in), then
/// the link's credential migration.
pub fn workspace(
    workspace: &Path,
    dsh_home: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Resolved, ResolveError> {
    let config = config::load(dsh_home, workspace, env, &BTreeMap::new())?;
    let override_origin = config
        .origin_of("projectKeyOverride")
        .unwrap_or("config")
        .to_owned();
    let override_key = config
        .project_key_override
        .as_deref()
        .map(|k| (k, override_origin.as_str()));
    let identity = identity::resolve(workspace, override_key)?;
    let harness_id = identity::harness_id(config.harness_id.as_deref(), None)?;
    let link_migration =
        link::migrate_secret(&workspace.join(STORE_DIR), dsh_home, &identity.project_key)?;
    Ok(Resolved {
        config,
        identity,
        harness_id,
        link_migration,
    })
}

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use dsh_chapters::credentials::{self, Secret};
use dsh_chapters::pool::link::{self, LinkRecord, Upstream};
use dsh_chapters::pool::plan::Visibility;
use dsh_chapters::pool::transport;
use dsh_chapters::store::{Store, MIRROR_DIR};

use super::Env;

#[derive(clap::Args)]
pub struct Args {
    /// The pool: a local directory (a bare repository is created on first sync) or a git URL.
    /// Without it, show the current link.
    #[arg(requires = "visibility")]
    pool: Option<String>,
    /// The pool's regime, declared (never looked up): `private`, or `public` — then nothing
    /// derived from conversation is ever published to it. Mandatory with a pool.
    #[arg(long, value_enum, requires = "pool")]
    visibility: Option<Visibility>,
    /// Read the network pool's token from this file.
    #[arg(long, value_name = "FILE", conflicts_with = "token_stdin")]
    token_file: Option<PathBuf>,
    /// Read the network pool's token from standard input.
    #[arg(long)]
    token_stdin: bool,
    /// The forge user an https token is sent as (default: the URL's user, else
    /// `x-access-token`).
    #[arg(long, value_name = "NAME", requires = "pool")]
    user: Option<String>,
    /// Print the link as one JSON document.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct UnlinkArgs {
    /// Print the result as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let Some(target) = args.pool.as_deref() else {
        return show(&env, args.json);
    };
    // Checked before anything is read or written, and never echoed unmasked.
    if let Err(e) = link::refuse_url_secrets(target) {
        let clean = link::find_url_secrets(target)
            .map_or_else(|| "<the URL without it>".to_owned(), |found| found.clean);
        let visibility = args.visibility.map_or("private|public", Visibility::as_str);
        bail!(
            "{e}. Give the URL without it and the token apart, stored 0600 under {} and never in the project tree:\n  chapters link {clean} --visibility {visibility} --token-file FILE\n  (or `--token-stdin` to pipe it in); a user name that is not a token may stay in the URL (the token is sent as that user)",
            credentials::credentials_dir(&env.dsh_home).display()
        );
    }
    let Some(visibility) = args.visibility else {
        bail!("--visibility private|public is mandatory: declare whether {target} may hold conversation (private) or not (public)");
    };
    let token = read_token(&args)?;
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let upstream = link::parse_upstream(target, &cwd)?;
    link::token_rule(&upstream, token.is_some())?;
    if let Upstream::Local { path } = &upstream {
        link::check_local_pool(path, &env.workspace)?;
    }
    if let Upstream::Local { .. } = upstream {
        if token.is_some() {
            bail!("{target} is a local path: it needs no token; drop --token-file/--token-stdin");
        }
    }
    let mut warnings = Vec::new();
    if let Some(user) = &args.user {
        match &upstream {
            Upstream::Network { url } if !transport::is_ssh(url) => {
                link::check_token_user(user).map_err(anyhow::Error::msg)?;
            }
            _ => bail!("--user names the user an https token is sent as; {target} takes no token (a local path, or ssh with your own setup): drop --user"),
        }
    }
    if let Upstream::Network { url } = &upstream {
        warnings.extend(transport::clear_text_warning(url, token.is_some()));
    }
    for w in &warnings {
        eprintln!("chapters: warning: {w}");
    }
    // Linking enables the workspace, as `init` does.
    let store = match Store::open(&env.workspace) {
        Ok(s) => s,
        Err(_) => Store::init(&env.workspace)?,
    };
    let now = dsh_chapters::time::rfc3339_utc(super::now_ms());
    store.write_project_yml(&env.identity, &env.harness_id, &now)?;
    if let Some(token) = &token {
        credentials::store(&env.dsh_home, &env.identity.project_key, token)?;
    } else {
        // A link without a token must not keep an older pool's token around.
        credentials::delete(&env.dsh_home, &env.identity.project_key)?;
    }
    let record = LinkRecord {
        v: link::LINK_VERSION,
        upstream,
        visibility,
        linked_at: now,
        linked_by: env.harness_id.clone(),
        user: args.user.clone(),
        // Linking is the one act that adopts a pool: the next sync records it.
        pool: None,
    };
    link::write(store.dir(), &record)?;
    // This machine's name in the pool must not depend on which shell runs the next sync.
    let saved = env.persist_harness_id()?;
    if args.json {
        return super::print_json(&serde_json::json!({
            "upstream": record.upstream,
            "visibility": record.visibility,
            "tokenStored": token.is_some(),
            "mirror": env.workspace.join(MIRROR_DIR).to_string_lossy(),
            "harnessIdSaved": saved.is_some(),
            "linkMigrated": env.link_migration,
            "user": record.user,
            "warnings": warnings,
        }));
    }
    println!(
        "linked {} to {} ({})",
        env.workspace.display(),
        record.upstream.describe(),
        visibility.as_str()
    );
    if token.is_some() {
        println!(
            "  token stored 0600 under {}",
            credentials::credentials_dir(&env.dsh_home).display()
        );
    }
    if let Some(user) = &record.user {
        println!("  the token is sent as user {user:?}");
    }
    if visibility == Visibility::Public {
        println!("  declared public: chapters, plans, artifacts and collections will never be published there");
    }
    if let Some(note) = saved {
        println!("  {note}");
    }
    println!("  run `chapters sync` to publish");
    Ok(())
}

fn read_token(args: &Args) -> Result<Option<Secret>> {
    let raw = if let Some(file) = &args.token_file {
        Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the token file {}", file.display()))?,
        )
    } else if args.token_stdin {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the token from standard input")?;
        Some(s)
    } else {
        None
    };
    raw.map(|r| Secret::parse(&r))
        .transpose()
        .map_err(Into::into)
}

/// `chapters unlink`: the workspace is no longer linked — `pool.json` and this project's
/// token go; the store, and the mirror's copies of other machines' documents, stay.
pub fn unlink(workspace: Option<&Path>, args: UnlinkArgs) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let store = Store::open(&env.workspace)?;
    let removed = link::remove(store.dir())?;
    let token_removed = credentials::delete(&env.dsh_home, &env.identity.project_key)?;
    if args.json {
        return super::print_json(&serde_json::json!({
            "unlinked": removed,
            "tokenRemoved": token_removed,
            "store": store.dir().to_string_lossy(),
        }));
    }
    if removed {
        println!("unlinked {}", env.workspace.display());
        if token_removed {
            println!("  the pool's token was removed");
        }
        println!(
            "  the store is kept; {} keeps what was mirrored (delete it when you no longer need it)",
            env.workspace.join(MIRROR_DIR).display()
        );
    } else {
        println!("{} was not linked: nothing to do", env.workspace.display());
    }
    Ok(())
}

fn show(env: &Env, json: bool) -> Result<()> {
    let record = match Store::open(&env.workspace) {
        Ok(store) => link::read(store.dir())?,
        Err(_) => None,
    };
    let token = credentials::load(&env.dsh_home, &env.identity.project_key)?.is_some();
    let mirror = env.workspace.join(MIRROR_DIR);
    if json {
        return super::print_json(&serde_json::json!({
            "upstream": record.as_ref().map(|r| &r.upstream),
            "visibility": record.as_ref().map(|r| r.visibility),
            "tokenStored": token,
            "mirror": mirror.to_string_lossy(),
            "mirrorExists": mirror.join(".git").is_dir(),
            "projectKey": env.identity.project_key,
            "projectKeySource": env.identity.source.as_str(),
            "origin": env.identity.origin,
            "harnessId": env.harness_id,
            "linkMigrated": env.link_migration,
        }));
    }
    match &record {
        None => println!("upstream    none — link one with `chapters link <path|url> --visibility private|public`"),
        Some(r) => println!(
            "upstream    {} ({}, linked {} by {}){}",
            r.upstream.describe(),
            r.visibility.as_str(),
            r.linked_at,
            r.linked_by,
            if token { ", token stored" } else { "" }
        ),
    }
    println!(
        "mirror      {}{}",
        mirror.display(),
        if mirror.join(".git").is_dir() {
            ""
        } else {
            " (not yet created)"
        }
    );
    println!(
        "project     {} ({}: {})",
        env.identity.project_key,
        env.identity.source.as_str(),
        env.identity.origin
    );
    println!("harness     {}", env.harness_id);
    Ok(())
}

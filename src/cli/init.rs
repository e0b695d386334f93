use std::path::Path;

use anyhow::Result;

use dsh_chapters::store::Store;

use super::Env;

#[derive(clap::Args)]
pub struct Args {
    /// Print the result as one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(workspace: Option<&Path>, args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let store = Store::init(&env.workspace)?;
    let now = dsh_chapters::time::rfc3339_utc(super::now_ms());
    store.write_project_yml(&env.identity, &env.harness_id, &now)?;
    let saved = env.persist_harness_id()?;
    if args.json {
        return super::print_json(&serde_json::json!({
            "workspace": env.workspace.to_string_lossy(),
            "store": store.dir().to_string_lossy(),
            "projectKey": env.identity.project_key,
            "projectKeySource": env.identity.source.as_str(),
            "harnessId": env.harness_id,
            "harnessIdSaved": saved.is_some(),
        }));
    }
    println!("enabled {}", env.workspace.display());
    println!("  store    {}", store.dir().display());
    println!(
        "  project  {} ({}: {})",
        env.identity.project_key,
        env.identity.source.as_str(),
        env.identity.origin
    );
    println!("  ignored  .dsh-chapters/ and .dsh-knowledge/ added to .gitignore");
    println!("  harness  {}", env.harness_id);
    if let Some(note) = saved {
        println!("  note     {note}");
    }
    Ok(())
}

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use dsh_chapters::archive::{self, Reason};
use dsh_chapters::demo;
use dsh_chapters::store::Store;

use super::{Env, Reported};

#[derive(clap::Args)]
pub struct Args {
    /// Where to put the scratch home and workspace (default: a new directory under the
    /// system's temp dir). Must not exist yet or be empty.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Lines of the first chapter to show.
    #[arg(long, default_value_t = 40)]
    show: usize,
}

pub fn run(args: Args) -> Result<()> {
    let root = match args.dir {
        Some(d) => d,
        None => std::env::temp_dir().join(format!(
            "chapters-demo-{}-{}",
            std::process::id(),
            super::now_ms()
        )),
    };
    if root.exists()
        && std::fs::read_dir(&root)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        anyhow::bail!(
            "{} already exists and is not empty; give --dir a new directory",
            root.display()
        );
    }
    let setup = demo::prepare(&root)
        .with_context(|| format!("cannot write the demo into {}", root.display()))?;
    println!("wrote a DSH session log: {}", setup.log.display());

    let env = Env::resolve(Some(&setup.workspace), Some(setup.dsh_home.clone()))?;
    let store = Store::init(&env.workspace)?;
    let now = dsh_chapters::time::rfc3339_utc(super::now_ms());
    store.write_project_yml(&env.identity, &env.harness_id, &now)?;
    println!(
        "enabled the workspace {} (project {} from {})",
        env.workspace.display(),
        env.identity.project_key,
        env.identity.source.as_str()
    );
    let ctx = env.archive_context(&now);
    let mut report = archive::archive_workspace(&ctx, None, Reason::Manual, &|_| {})?;
    super::archive::hint_failures(&mut report);
    super::archive::say_failures(&report);
    if !report.failures.is_empty() {
        return Err(Reported.into());
    }
    for s in &report.sessions {
        println!("archived {}", super::archive::summary_line(s));
        if let Some((lo, hi)) = s.in_flight {
            println!("  turn in flight at seqs {lo} to {hi} left for a later archive");
        }
    }
    println!("\nthe store ({}):", store.dir().display());
    list_files(store.dir(), store.dir())?;
    if let Some(first) = report
        .sessions
        .first()
        .and_then(|s| s.chapters.first().map(|c| (s, c)))
    {
        let path = store
            .dir()
            .join(&first.0.root_session_id)
            .join("chapters")
            .join(first.1);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        println!("\n── {} (first {} lines) ──", first.1, args.show);
        for line in text.lines().take(args.show) {
            println!("{line}");
        }
    }
    // Finding it again: the same door and scorer as `chapters search`.
    let query = "refresh token expiry";
    let corpus = dsh_chapters::search::open(
        &env.workspace,
        &env.identity.project_key,
        false,
        std::time::Duration::from_millis(env.config.writer_lock_timeout_ms),
    )?;
    let params = dsh_chapters::catalog::score::ScoreParams {
        curation: corpus.curation.clone(),
        core_rule_bonus: env.config.rules_core_bonus,
    };
    let found = corpus.answer_packed(
        &dsh_chapters::search::Request::text(query, None),
        &params,
        &env.harness_id,
        dsh_chapters::catalog::score::day_start(super::now_ms()),
        200,
    )?;
    println!("\nchapters search {query:?} (best first, packed to 200 tokens):");
    for line in &found.lines[..found.packed.shown] {
        println!("  {line}");
    }
    println!(
        "\nrun it again to see that nothing new is written: chapters archive --workspace {}",
        env.workspace.display()
    );
    println!(
        "search it yourself: chapters search \"csv header\" --workspace {}",
        env.workspace.display()
    );
    println!("(with DSH_HOME={})", env.dsh_home.display());
    Ok(())
}

fn list_files(base: &Path, dir: &Path) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let name = e.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            list_files(base, &path)?;
        } else {
            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
            let rel = path.strip_prefix(base).unwrap_or(&path);
            println!("  {:>8}  {}", size, rel.display());
        }
    }
    Ok(())
}

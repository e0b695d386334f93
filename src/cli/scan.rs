//! `chapters scan`: placeholder, filled below.
use anyhow::Result;
use std::path::Path;

#[derive(clap::Args)]
pub struct Args {
    /// Also scan every blob of the pool's history.
    #[arg(long)]
    pool: bool,
    /// Print one JSON document.
    #[arg(long)]
    json: bool,
}

pub fn run(_workspace: Option<&Path>, _args: Args) -> Result<()> {
    Ok(())
}

//! `chapters mcp`: serve the Model Context Protocol on stdio until the client closes it.
//! Started without a usable workspace (an editor launching it from `/`), it still serves
//! the protocol — it says why on stderr and in every tool's answer, naming `--workspace`.

use std::path::Path;

use anyhow::{Context, Result};

use dsh_chapters::mcp::{self, McpContext, Workspace};

use super::Env;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(workspace: Option<&Path>, _args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None);
    let ws = match &env {
        Ok(env) => match mcp::unusable_reason(&env.workspace) {
            None => Workspace::Ready(McpContext {
                workspace: &env.workspace,
                dsh_home: &env.dsh_home,
                config: &env.config,
                identity: &env.identity,
                harness_id: &env.harness_id,
                now_ms: &super::now_ms,
            }),
            Some(reason) => Workspace::Unusable(reason),
        },
        Err(e) => Workspace::Unusable(mcp::unopened_reason(&format!("{e:#}"))),
    };
    if let Workspace::Unusable(reason) = &ws {
        eprintln!("chapters mcp: {reason}");
    }
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    mcp::serve(&ws, stdin, stdout).context("the MCP connection on stdio failed")
}

//! `chapters mcp`: serve the Model Context Protocol on stdio until the client closes it.

use std::path::Path;

use anyhow::{Context, Result};

use dsh_chapters::mcp::{self, McpContext};

use super::Env;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(workspace: Option<&Path>, _args: Args) -> Result<()> {
    let env = Env::resolve(workspace, None)?;
    let ctx = McpContext {
        workspace: &env.workspace,
        dsh_home: &env.dsh_home,
        config: &env.config,
        identity: &env.identity,
        harness_id: &env.harness_id,
        now_ms: &super::now_ms,
    };
    let stdin = std::io::stdin().lock();
    let stdout = std::io::stdout().lock();
    mcp::serve(&ctx, stdin, stdout).context("the MCP connection on stdio failed")
}

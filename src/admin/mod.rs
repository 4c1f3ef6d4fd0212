//! CLI.

#[derive(clap::Parser, Debug)]
pub struct Cli {}

pub async fn run(_cli: Cli) -> anyhow::Result<()> {
    Ok(())
}

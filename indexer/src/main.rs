//! `gantry-indexer`: parse the config, install telemetry and the shutdown signal, run.

use clap::Parser;
use gantry_indexer::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    gantry_runtime::install(config.instance.metrics_addr)?;
    gantry_indexer::run(config, gantry_runtime::shutdown_on_signal()).await
}

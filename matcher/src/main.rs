//! `gantry-matcher`: parse the config, install telemetry and the shutdown signal, run.

use clap::Parser;
use gantry_matcher::MatcherConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = MatcherConfig::parse();
    gantry_runtime::install(config.common.instance.metrics_addr)?;
    gantry_matcher::run_matcher(config, gantry_runtime::shutdown_on_signal()).await
}

//! `gantry-matcher`: parse the config, install telemetry and the shutdown signal, run.

use clap::Parser;
use gantry_matcher::{MatcherConfig, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = MatcherConfig::parse();
    telemetry::install(config.common.metrics_addr)?;
    gantry_matcher::run_matcher(config, telemetry::shutdown_on_signal()).await
}

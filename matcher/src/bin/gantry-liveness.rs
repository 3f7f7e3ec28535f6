//! `gantry-liveness`: parse the config, install telemetry and the shutdown signal, run.

use clap::Parser;
use gantry_matcher::LivenessConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = LivenessConfig::parse();
    gantry_runtime::install(config.common.instance.metrics_addr)?;
    gantry_matcher::run_liveness(config, gantry_runtime::shutdown_on_signal()).await
}

//! `gantry-liveness`: parse the config, install telemetry and the shutdown signal, run.

use clap::Parser;
use gantry_matcher::{LivenessConfig, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = LivenessConfig::parse();
    telemetry::install(config.common.metrics_addr)?;
    gantry_matcher::run_liveness(config, telemetry::shutdown_on_signal()).await
}

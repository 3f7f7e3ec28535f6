//! `gantry-liveness`: parse the config, install telemetry and the shutdown signal, run the
//! keeper beside the metrics listener under one supervisor.

use clap::Parser;
use gantry_matcher::LivenessConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = LivenessConfig::parse();
    let metrics_addr = config.common.instance.metrics_addr;
    gantry_runtime::serve("keeper", metrics_addr, |shutdown| {
        gantry_matcher::run_liveness(config, shutdown)
    })
    .await
}

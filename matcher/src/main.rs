//! `gantry-matcher`: parse the config, install telemetry and the shutdown signal, run the
//! matcher beside the metrics listener under one supervisor.

use clap::Parser;
use gantry_matcher::MatcherConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = MatcherConfig::parse();
    let metrics_addr = config.common.instance.metrics_addr;
    gantry_runtime::serve("matcher", metrics_addr, |shutdown| {
        gantry_matcher::run_matcher(config, shutdown)
    })
    .await
}

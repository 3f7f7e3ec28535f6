//! `gantry-auth`: parse the config, install telemetry and the shutdown signal, answer the
//! auth callout beside the metrics listener under one supervisor.

use clap::Parser;
use gantry_auth::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let metrics_addr = config.instance.metrics_addr;
    gantry_runtime::serve("auth", metrics_addr, |shutdown| {
        gantry_auth::run(config, shutdown)
    })
    .await
}

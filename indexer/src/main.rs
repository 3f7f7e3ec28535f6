//! `gantry-indexer`: parse the config, install telemetry and the shutdown signal, run the
//! indexer beside the metrics listener under one supervisor.

use clap::Parser;
use gantry_indexer::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let metrics_addr = config.instance.metrics_addr;
    gantry_runtime::serve("indexer", metrics_addr, |shutdown| {
        gantry_indexer::run(config, shutdown)
    })
    .await
}

//! `gantry-indexer`: parse the config, install telemetry and the shutdown signal, run the
//! indexer beside the metrics listener under one supervisor.

use clap::Parser;
use gantry_indexer::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    if config.repair {
        gantry_runtime::install_logs();
        let repaired = gantry_indexer::repair::repair(&config).await?;
        println!("{}", repaired.describe());
        return Ok(());
    }
    let metrics_addr = config.instance.metrics_addr;
    gantry_runtime::serve("indexer", metrics_addr, |shutdown| {
        gantry_indexer::run(config, shutdown)
    })
    .await
}

//! `gantry-indexer`: parse the config, install telemetry and the shutdown signal, run the
//! indexer beside the metrics listener under one supervisor.

use clap::Parser;
use gantry_indexer::Config;
use gantry_runtime::tasks::Supervisor;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let tasks = Supervisor::new(gantry_runtime::shutdown_on_signal());
    gantry_runtime::install(config.instance.metrics_addr, &tasks)?;
    let shutdown = tasks.shutdown().clone();
    tasks.spawn_critical("indexer", gantry_indexer::run(config, shutdown));
    tasks.wait().await
}

//! `gantry-matcher`: parse the config, install telemetry and the shutdown signal, run the
//! matcher beside the metrics listener under one supervisor.

use clap::Parser;
use gantry_matcher::MatcherConfig;
use gantry_runtime::tasks::Supervisor;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = MatcherConfig::parse();
    let tasks = Supervisor::new(gantry_runtime::shutdown_on_signal());
    gantry_runtime::install(config.common.instance.metrics_addr, &tasks)?;
    let shutdown = tasks.shutdown().clone();
    tasks.spawn_critical("matcher", gantry_matcher::run_matcher(config, shutdown));
    tasks.wait().await
}

//! `gantry-matcher`: parse the config, install telemetry and the shutdown signal, run.

use clap::Parser;
use gantry_matcher::MatcherConfig;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let config = MatcherConfig::parse();
    if let Some(addr) = config.common.metrics_addr {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()?;
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(signal(shutdown.clone()));
    gantry_matcher::run_matcher(config, shutdown).await
}

/// Fires `shutdown` on SIGINT or SIGTERM.
async fn signal(shutdown: CancellationToken) {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("installing the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
    shutdown.cancel();
}

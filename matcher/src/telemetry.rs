//! The binaries' shared start-up: logs, the Prometheus listener, the shutdown signal.

use std::net::SocketAddr;

use tokio_util::sync::CancellationToken;

/// Installs the log subscriber (`RUST_LOG`, default info) and, when `metrics_addr` is set,
/// the Prometheus listener serving `/metrics` there.
pub fn install(metrics_addr: Option<SocketAddr>) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    if let Some(addr) = metrics_addr {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()?;
    }
    Ok(())
}

/// A token fired by SIGINT or SIGTERM.
pub fn shutdown_on_signal() -> CancellationToken {
    let shutdown = CancellationToken::new();
    let fired = shutdown.clone();
    tokio::spawn(async move {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down");
        fired.cancel();
    });
    shutdown
}

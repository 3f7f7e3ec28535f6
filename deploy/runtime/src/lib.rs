//! The IO glue every Gantry service links (`gantry-indexer`, `gantry-matcher`,
//! `gantry-liveness`, `gantry-worker`, `gantry-api`), and no business rules: logs to stderr
//! filtered by `RUST_LOG` (default `info`), Prometheus metrics, one cancellation token that
//! SIGINT or SIGTERM fires for a graceful shutdown, and
//!
//! - [`args`]: the flags every service shares (chain, NATS, signing key, instance), declared
//!   once;
//! - [`backoff`]: the one retry policy (backon), cancellable;
//! - [`nats`]: connecting with a URL's credentials, waiting for another service's stream,
//!   putting an object into a bucket the writer may not read;
//! - [`chain_stream`]: reading a chain's stream in order, decoded, and reporting a reader
//!   stalled on a damaged block (log, metrics, readiness);
//! - [`health`]: the listener on the metrics address: `/metrics`, `/healthz`, `/readyz`;
//! - [`lease`]: a leader lease in a KV bucket;
//! - [`keys`]: the job key's exchange between a node and the job's submitter (design 19);
//! - [`market`]: a job's terms and state read back from the chain's logs;
//! - [`sse`]: the events of a Server-Sent-Events body (the API's live feeds);
//! - [`tasks`]: the service's tasks under one supervisor (a critical one that ends stops
//!   the rest).
//!
//! ```text
//!   main: shutdown_on_signal() ──▶ CancellationToken ──▶ tasks::Supervisor ◀── install(): logs, /metrics task
//!                                                              └── spawn_critical(run(config, token))
//!   service ──nats::connect──▶ NATS ──ChainStreamReader──▶ (seq, ChainMessage) ──▶ BlockAssembler (protocol)
//! ```

pub mod args;
pub mod backoff;
pub mod chain_stream;
pub mod health;
pub mod keys;
pub mod lease;
pub mod market;
pub mod metrics;
pub mod nats;
pub mod objects;
pub mod sse;
pub mod tasks;
pub mod tx;

use std::net::SocketAddr;

use metrics_exporter_prometheus::{BuildError, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

use crate::tasks::Supervisor;

/// Why telemetry could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("metrics: {0}")]
    Metrics(#[from] BuildError),
    #[error("listening for metrics on {addr}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Installs the log subscriber: `RUST_LOG` filters, `info` when unset; colours only on a
/// terminal (a log file or a collector gets plain text).
pub fn install_logs() {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_ansi(std::io::stdout().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
}

/// Installs the log subscriber and, when `metrics_addr` is set, the Prometheus recorder
/// and its listener there (`/metrics`, `/healthz`, `/readyz`: see [`health`]), bound now
/// and run as a critical task of `tasks` until shutdown. Call it inside the Tokio runtime.
pub fn install(metrics_addr: Option<SocketAddr>, tasks: &Supervisor) -> Result<(), TelemetryError> {
    install_logs();
    let Some(addr) = metrics_addr else {
        return Ok(());
    };
    let listen = |source| TelemetryError::Listen { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(listen)?;
    listener.set_nonblocking(true).map_err(listen)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(listen)?;
    let recorder = PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    ::metrics::set_global_recorder(recorder).map_err(BuildError::from)?;
    let shutdown = tasks.shutdown().clone();
    tasks.spawn_critical("serving metrics", async move {
        let upkeep = async {
            let mut every = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                every.tick().await;
                handle.run_upkeep();
            }
        };
        tokio::select! {
            served = health::serve(listener, handle.clone(), shutdown) => served,
            () = upkeep => Ok(()),
        }
    });
    Ok(())
}

/// Installs the log subscriber and a Prometheus recorder whose text the service serves
/// itself (the API's `/metrics`).
pub fn install_with_recorder() -> Result<PrometheusHandle, TelemetryError> {
    install_logs();
    Ok(PrometheusBuilder::new().install_recorder()?)
}

/// A token fired by SIGINT or SIGTERM (logged as "shutting down"). Call it inside the
/// Tokio runtime.
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

/// A service's `main`: telemetry and the shutdown signal installed, then `run` (named
/// `name` in its error) beside the metrics listener under one supervisor, until either
/// ends or a signal arrives.
pub async fn serve<F, E>(
    name: &'static str,
    metrics_addr: Option<SocketAddr>,
    run: impl FnOnce(CancellationToken) -> F,
) -> anyhow::Result<()>
where
    F: std::future::Future<Output = Result<(), E>> + Send + 'static,
    E: Into<anyhow::Error> + Send + 'static,
{
    let tasks = Supervisor::new(shutdown_on_signal());
    install(metrics_addr, &tasks)?;
    tasks.spawn_critical(name, run(tasks.shutdown().clone()));
    tasks.wait().await
}

/// The name of this instance in logs and leases: `configured`, else the host name and the
/// process id (unique among the replicas of a service).
pub fn instance_id(configured: Option<&str>) -> String {
    configured.map_or_else(
        || {
            let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
            format!("{}-{}", host.trim(), std::process::id())
        },
        str::to_owned,
    )
}

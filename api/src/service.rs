//! The API as one service: the chain projection, the reports consumer and the HTTP server
//! sharing one live feed, started from a [`Config`] and stopped by one token. The binary,
//! the tests and the benchmarks all start it here.

use std::net::SocketAddr;

use anyhow::Context;
use gantry_runtime::tasks::Supervisor;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::http::{AppState, HttpConfig, router};
use crate::live::Live;
use crate::project::{self, Progress};
use crate::store::Store;

/// A running API.
#[derive(Debug)]
pub struct Api {
    /// Where it serves HTTP.
    pub local_addr: SocketAddr,
    /// How far the chain projection has got.
    pub progress: watch::Receiver<Progress>,
    /// The stream sequence of the last worker report stored.
    pub reports: watch::Receiver<u64>,
    tasks: Supervisor,
}

/// Serves until `shutdown` fires or a projection fails.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    start(config, shutdown).await?.wait().await
}

/// Opens the database, connects to NATS, binds `config.listen` and starts the three tasks.
pub async fn start(config: Config, shutdown: CancellationToken) -> anyhow::Result<Api> {
    let cors = config.cors()?;
    let store = Store::open(&config.database_url)
        .await
        .context("opening the database")?
        .with_document_cache(config.document_cache_mb.saturating_mul(1 << 20));
    let js =
        async_nats::jetstream::new(gantry_runtime::nats::connect(&config.nats_url, true).await?);
    let (progress_tx, progress) = watch::channel(Progress::default());
    let (reports_tx, reports) = watch::channel(0);
    let live = Live::closing_on(shutdown.clone());
    // A projection that stops stops the whole service (to be restarted) rather than serve
    // an ever staler view.
    let tasks = Supervisor::new(shutdown.clone());
    tasks.spawn_critical(
        "projecting worker reports",
        crate::reports::run(
            js.clone(),
            config.chain_id,
            store.clone(),
            reports_tx,
            progress.clone(),
            live.clone(),
            shutdown.clone(),
        ),
    );
    tasks.spawn_critical(
        "projecting the chain stream",
        project::run(
            js.clone(),
            config.chain_id,
            store.clone(),
            progress_tx,
            live.clone(),
            shutdown.clone(),
        ),
    );
    let mut state = AppState {
        max_lag: config.max_lag,
        token: gantry_protocol::api::TokenInfo {
            symbol: config.token_symbol.clone(),
            decimals: config.token_decimals,
        },
        network: config.network(),
        ..AppState::new(store, progress.clone(), live)
    }
    .with_nats(js, config.chain_id);
    if let Some(metrics) = config.metrics.clone() {
        state = state.with_metrics(metrics);
    }
    let app = router(
        state,
        HttpConfig {
            request_timeout: config.request_timeout(),
            cors,
        },
    );
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("listening on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    tracing::info!(listen = %local_addr, "serving the API");
    tasks.spawn_critical(
        "serving HTTP",
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .into_future(),
    );
    Ok(Api {
        local_addr,
        progress,
        reports,
        tasks,
    })
}

impl Api {
    /// `http://<address>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// Waits for the end: at shutdown, or when any of its tasks stops (the first error).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.tasks.wait().await
    }
}

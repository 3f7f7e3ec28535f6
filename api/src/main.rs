//! `gantry-api`: projects the chain stream into SQL and serves the read-only HTTP API
//! (see the library docs).
//!
//! ```text
//! gantry-api --chain-id 31337 --nats-url nats://127.0.0.1:4222 \
//!            --database-url sqlite://gantry-api.db --listen 127.0.0.1:8080
//! ```

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use axum::http::HeaderValue;
use clap::Parser;
use gantry_api::http::{AppState, HttpConfig, router};
use gantry_api::live::Live;
use gantry_api::project::{self, Progress};
use gantry_api::store::Store;
use tower_http::cors::{AllowOrigin, CorsLayer};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Gantry's read-only API: the chain stream projected into SQL"
)]
struct Cli {
    #[arg(long, env = "GANTRY_CHAIN_ID")]
    chain_id: u64,
    #[arg(long, env = "GANTRY_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    nats_url: String,
    /// `sqlite://<file>` (created when missing) or `postgres://…`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://gantry-api.db")]
    database_url: String,
    #[arg(long, env = "GANTRY_API_LISTEN", default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// Origins allowed by CORS (repeat the flag); none: same origin only. `*` allows any.
    #[arg(
        long = "cors-origin",
        env = "GANTRY_API_CORS_ORIGINS",
        value_delimiter = ','
    )]
    cors_origins: Vec<String>,
    #[arg(long, env = "GANTRY_API_REQUEST_TIMEOUT_MS", default_value_t = 10_000)]
    request_timeout_ms: u64,
    /// `/readyz` fails while the projection trails the chain stream by more messages.
    #[arg(long, env = "GANTRY_API_MAX_LAG", default_value_t = gantry_api::http::DEFAULT_MAX_LAG)]
    max_lag: u64,
    /// The payment token's symbol, as the dashboard shows amounts (`GET /v1/token`).
    #[arg(long, env = "GANTRY_TOKEN_SYMBOL", default_value = "gUSD")]
    token_symbol: String,
    /// The payment token's decimals (`decimals()` of the ERC-20).
    #[arg(long, env = "GANTRY_TOKEN_DECIMALS", default_value_t = 6,
        value_parser = clap::value_parser!(u8).range(0..=36))]
    token_decimals: u8,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let metrics = gantry_runtime::install_with_recorder()?;
    let shutdown = gantry_runtime::shutdown_on_signal();
    let store = Store::open(&cli.database_url).await?;
    let address = gantry_protocol::nats::NatsAddress::parse(&cli.nats_url);
    let nats = address
        .connect_options()
        .connect(&address.servers)
        .await
        .with_context(|| format!("connecting to NATS at {}", address.servers))?;
    let js = async_nats::jetstream::new(nats);
    let (progress_tx, progress) = tokio::sync::watch::channel(Progress::default());
    let (reports_tx, _reports_rx) = tokio::sync::watch::channel(0);
    let live = Live::closing_on(shutdown.clone());
    let reports = tokio::spawn(gantry_api::reports::run(
        js.clone(),
        cli.chain_id,
        store.clone(),
        reports_tx,
        live.clone(),
        shutdown.clone(),
    ));
    let projection = tokio::spawn(project::run(
        js.clone(),
        cli.chain_id,
        store.clone(),
        progress_tx,
        live.clone(),
        shutdown.clone(),
    ));
    let cors = match cli.cors_origins.as_slice() {
        [] => CorsLayer::new(),
        [any] if any == "*" => CorsLayer::permissive(),
        origins => CorsLayer::new().allow_origin(AllowOrigin::list(
            origins
                .iter()
                .map(|o| HeaderValue::from_str(o))
                .collect::<Result<Vec<_>, _>>()?,
        )),
    };
    let state = AppState {
        max_lag: cli.max_lag,
        token: gantry_protocol::api::TokenInfo {
            symbol: cli.token_symbol.clone(),
            decimals: cli.token_decimals,
        },
        ..AppState::new(store, progress, live)
    }
    .with_nats(js, cli.chain_id)
    .with_metrics(metrics);
    let app = router(
        state,
        HttpConfig {
            request_timeout: Duration::from_millis(cli.request_timeout_ms),
            cors,
        },
    );
    let listener = tokio::net::TcpListener::bind(cli.listen).await?;
    tracing::info!(listen = %cli.listen, "serving the API");
    let serve_shutdown = shutdown.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { serve_shutdown.cancelled().await })
            .await
    });
    // A projection that fails stops the process (to be restarted) rather than serve an
    // ever staler view.
    let projected = tokio::select! {
        projected = projection => projected?,
        reported = reports => reported?,
    };
    shutdown.cancel();
    server.await??;
    projected?;
    Ok(())
}

//! `gantry-api`'s configuration: flags with environment fallbacks, parsed into domain
//! types at start-up.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::HeaderValue;
use clap::Parser;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::http::DEFAULT_MAX_LAG;

/// [`crate::store::DEFAULT_DOCUMENT_CACHE`] in mebibytes.
pub const DEFAULT_DOCUMENT_CACHE_MB: u64 = crate::store::DEFAULT_DOCUMENT_CACHE >> 20;

#[derive(Debug, Clone, Parser)]
#[command(
    version,
    about = "Gantry's read-only API: the chain stream projected into SQL"
)]
pub struct Config {
    /// The chain whose stream to project.
    #[arg(long, env = "GANTRY_CHAIN_ID")]
    pub chain_id: u64,
    /// NATS servers, optionally with the API's credentials (`nats://user:pass@host:port`).
    #[arg(long, env = "GANTRY_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// `sqlite://<file>` (created when missing) or `postgres://…`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://gantry-api.db")]
    pub database_url: String,
    /// Where to serve HTTP (port 0: any free port).
    #[arg(long, env = "GANTRY_API_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Origins allowed by CORS (repeat the flag); none: same origin only. `*` allows any.
    #[arg(
        long = "cors-origin",
        env = "GANTRY_API_CORS_ORIGINS",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,
    /// Longest time one request may take, milliseconds.
    #[arg(long, env = "GANTRY_API_REQUEST_TIMEOUT_MS", default_value_t = 10_000)]
    pub request_timeout_ms: u64,
    /// `/readyz` fails while the projection trails the chain stream by more messages.
    #[arg(long, env = "GANTRY_API_MAX_LAG", default_value_t = DEFAULT_MAX_LAG)]
    pub max_lag: u64,
    /// Mebibytes of jobs' documents (`GET /v1/jobs/{id}`) kept ready in memory, forgotten
    /// as their jobs change (0: none; each read builds the document in the database).
    #[arg(long, env = "GANTRY_API_DOCUMENT_CACHE_MB", default_value_t = DEFAULT_DOCUMENT_CACHE_MB)]
    pub document_cache_mb: u64,
    /// The payment token's symbol, as the dashboard shows amounts (`GET /v1/token`).
    #[arg(long, env = "GANTRY_TOKEN_SYMBOL", default_value = "gUSD")]
    pub token_symbol: String,
    /// The payment token's decimals (`decimals()` of the ERC-20).
    #[arg(long, env = "GANTRY_TOKEN_DECIMALS", default_value_t = 6,
        value_parser = clap::value_parser!(u8).range(0..=36))]
    pub token_decimals: u8,
    /// The market's address, for the web app's transactions (`GET /v1/network`).
    #[arg(long, env = "GANTRY_MARKET")]
    pub market: Option<alloy::primitives::Address>,
    /// The payment token's address (`GET /v1/network`).
    #[arg(long, env = "GANTRY_TOKEN")]
    pub token: Option<alloy::primitives::Address>,
    /// The block the market was deployed in (`GET /v1/network`).
    #[arg(long, env = "GANTRY_START_BLOCK", default_value_t = 0)]
    pub start_block: u64,
    /// A JSON-RPC URL of the chain that users' wallets may add (`GET /v1/network`).
    #[arg(long, env = "GANTRY_PUBLIC_RPC_URL")]
    pub public_rpc_url: Option<String>,
    /// The NATS URL workers join, for the worker config the web app prints (`GET
    /// /v1/network`; no credentials: workers join by the handshake).
    #[arg(long, env = "GANTRY_PUBLIC_NATS_URL")]
    pub public_nats_url: Option<String>,
    /// The Prometheus recorder whose text `/metrics` serves (set by the binary, which
    /// installs it; none: `/metrics` answers 404).
    #[arg(skip)]
    pub metrics: Option<PrometheusHandle>,
}

/// A flag whose value cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("--{flag}: {reason}")]
pub struct ConfigError {
    pub flag: &'static str,
    pub reason: String,
}

impl Config {
    /// The API of chain `chain_id` on NATS `nats_url` and database `database_url`, on a
    /// free loopback port, with the defaults of every other flag.
    pub fn local(chain_id: u64, nats_url: &str, database_url: &str) -> Self {
        Self {
            chain_id,
            nats_url: nats_url.to_owned(),
            database_url: database_url.to_owned(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            cors_origins: Vec::new(),
            request_timeout_ms: 10_000,
            max_lag: DEFAULT_MAX_LAG,
            document_cache_mb: DEFAULT_DOCUMENT_CACHE_MB,
            token_symbol: "gUSD".into(),
            token_decimals: 6,
            market: None,
            token: None,
            start_block: 0,
            public_rpc_url: None,
            public_nats_url: None,
            metrics: None,
        }
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    /// The CORS policy `--cors-origin` asks for.
    pub fn cors(&self) -> Result<CorsLayer, ConfigError> {
        Ok(match self.cors_origins.as_slice() {
            [] => CorsLayer::new(),
            [any] if any == "*" => CorsLayer::permissive(),
            origins => CorsLayer::new().allow_origin(AllowOrigin::list(
                origins
                    .iter()
                    .map(|o| {
                        HeaderValue::from_str(o).map_err(|e| ConfigError {
                            flag: "cors-origin",
                            reason: format!("{o:?}: {e}"),
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            )),
        })
    }

    /// What `GET /v1/network` answers.
    pub fn network(&self) -> gantry_protocol::api::NetworkInfo {
        gantry_protocol::api::NetworkInfo {
            chain_id: self.chain_id,
            market: self.market.map(|a| a.to_checksum(None)),
            token: self.token.map(|a| a.to_checksum(None)),
            start_block: self.start_block,
            rpc_url: self.public_rpc_url.clone(),
            nats_url: self.public_nats_url.clone(),
            token_symbol: self.token_symbol.clone(),
            token_decimals: self.token_decimals,
        }
    }
}

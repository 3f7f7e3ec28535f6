//! What the API's tests share: the API as the binary runs it, on the kit's `TestNet`.

use std::time::Duration;

use gantry_api::project::Progress;
use gantry_protocol::api::TokenInfo;
use gantry_testkit::accounts::SUBMITTER;
use gantry_testkit::{JobPost, TestNet};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

/// A SQLite database in `dir`.
pub(crate) fn sqlite(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("api.db").display())
}

/// Posts an H100 job with `bounty` as the lifecycle's submitter (funded and approved):
/// one block of new events.
pub(crate) async fn post_job(chain: &TestNet, bounty: u64) {
    let job = JobPost {
        bounty,
        ..JobPost::default()
    };
    chain.post_job(SUBMITTER, job).await;
}

/// The API as `gantry-api` runs it (`gantry_api::start`) on a free port.
pub(crate) struct Api {
    pub(crate) base: String,
    pub(crate) progress: tokio::sync::watch::Receiver<Progress>,
    reports: tokio::sync::watch::Receiver<u64>,
    running: gantry_api::Api,
}

impl Api {
    /// Serves `database_url`, with the process-wide metrics `handle` if given; stops
    /// with `stop`.
    pub(crate) async fn start(
        chain: &TestNet,
        database_url: &str,
        stop: &CancellationToken,
        metrics: Option<PrometheusHandle>,
    ) -> Self {
        Self::start_with_token(chain, database_url, stop, metrics, TokenInfo::default()).await
    }

    /// The same, naming the payment token `token` (`GET /v1/token`).
    pub(crate) async fn start_with_token(
        chain: &TestNet,
        database_url: &str,
        stop: &CancellationToken,
        metrics: Option<PrometheusHandle>,
        token: TokenInfo,
    ) -> Self {
        let config = gantry_api::Config {
            request_timeout_ms: 5_000,
            token_symbol: token.symbol,
            token_decimals: token.decimals,
            metrics,
            ..gantry_api::Config::local(
                chain.devnet.deployment.chain_id,
                &chain.nats().url(),
                database_url,
            )
        };
        let running = gantry_api::start(config, stop.clone())
            .await
            .expect("the API starts");
        Self {
            base: running.base_url(),
            progress: running.progress.clone(),
            reports: running.reports.clone(),
            running,
        }
    }

    /// Waits until the projection has applied the chain's head and the reports consumer
    /// the worker reports up to stream sequence `reported`.
    pub(crate) async fn caught_up(&self, chain: &TestNet, reported: u64) {
        let head = alloy::providers::Provider::get_block_number(&chain.devnet.admin)
            .await
            .unwrap();
        let (mut progress, mut reports) = (self.progress.clone(), self.reports.clone());
        tokio::time::timeout(Duration::from_secs(60), async {
            progress.wait_for(|p| p.block >= head).await.unwrap();
            reports.wait_for(|seq| *seq >= reported).await.unwrap();
        })
        .await
        .expect("the API projects the chain and the worker reports");
    }

    pub(crate) async fn stopped(self) {
        tokio::time::timeout(Duration::from_secs(10), self.running.wait())
            .await
            .expect("the API stops")
            .expect("the API ran without error");
    }
}

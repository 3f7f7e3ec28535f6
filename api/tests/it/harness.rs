//! What the API's tests share: the API as the binary runs it, and ways to feed it.

use std::time::Duration;

use alloy::primitives::aliases::{U40, U96};
use gantry_api::http::{AppState, HttpConfig, router};
use gantry_api::live::Live;
use gantry_api::project::{self, Progress};
use gantry_api::store::Store;
use gantry_devnet::{confirm_receipt, scenario};
use gantry_protocol::api::TokenInfo;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::jobs;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use crate::projection::Chain;

/// A SQLite database in `dir`.
pub(crate) fn sqlite(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("api.db").display())
}

/// Creates the workers' stream, as a worker does.
pub(crate) async fn jobs_stream(js: &async_nats::jetstream::Context, chain_id: u64) {
    js.create_stream(async_nats::jetstream::stream::Config {
        name: jobs::jobs_stream_name(chain_id),
        subjects: vec![jobs::jobs_stream_subjects(chain_id)],
        ..Default::default()
    })
    .await
    .unwrap();
}

/// Publishes and returns the stream sequence.
pub(crate) async fn publish(
    js: &async_nats::jetstream::Context,
    subject: String,
    payload: Vec<u8>,
) -> u64 {
    js.publish(subject, payload.into())
        .await
        .unwrap()
        .await
        .unwrap()
        .sequence
}

/// Posts a job with `bounty` as the lifecycle's submitter (account 3, funded and
/// approved): one block of new events.
pub(crate) async fn post_job(chain: &Chain, bounty: u64) {
    let market = JobMarket::new(chain.devnet.deployment.market, chain.devnet.provider(3));
    confirm_receipt(
        "postJob",
        market
            .postJob(
                scenario::h100_requirements(),
                U96::from(bounty),
                U40::from(4_000_000_000u64),
                scenario::example_spec().into(),
            )
            .send()
            .await,
    )
    .await
    .unwrap();
}

/// The API as `gantry-api` runs it — the chain projection, the reports consumer and the
/// HTTP server sharing one live feed — on a free port.
pub(crate) struct Api {
    pub(crate) base: String,
    pub(crate) progress: tokio::sync::watch::Receiver<Progress>,
    reports: tokio::sync::watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Api {
    /// Serves `database_url`, with the process-wide metrics `handle` if given; stops
    /// with `stop`.
    pub(crate) async fn start(
        chain: &Chain,
        js: &async_nats::jetstream::Context,
        database_url: &str,
        stop: &CancellationToken,
        metrics: Option<PrometheusHandle>,
    ) -> Self {
        Self::start_with_token(chain, js, database_url, stop, metrics, TokenInfo::default()).await
    }

    /// The same, naming the payment token `token` (`GET /v1/token`).
    pub(crate) async fn start_with_token(
        chain: &Chain,
        js: &async_nats::jetstream::Context,
        database_url: &str,
        stop: &CancellationToken,
        metrics: Option<PrometheusHandle>,
        token: TokenInfo,
    ) -> Self {
        let chain_id = chain.devnet.deployment.chain_id;
        let store = Store::open(database_url).await.unwrap();
        let live = Live::closing_on(stop.clone());
        let (progress_tx, progress) = tokio::sync::watch::channel(Progress::default());
        let (reports_tx, reports) = tokio::sync::watch::channel(0);
        let projection = tokio::spawn({
            let run = project::run(
                js.clone(),
                chain_id,
                store.clone(),
                progress_tx,
                live.clone(),
                stop.clone(),
            );
            async move { run.await.expect("the projection runs") }
        });
        let reporter = tokio::spawn({
            let run = gantry_api::reports::run(
                js.clone(),
                chain_id,
                store.clone(),
                reports_tx,
                live.clone(),
                stop.clone(),
            );
            async move { run.await.expect("the reports consumer runs") }
        });
        let mut state = AppState {
            token,
            ..AppState::new(store, progress.clone(), live)
        }
        .with_nats(js.clone(), chain_id);
        if let Some(handle) = metrics {
            state = state.with_metrics(handle);
        }
        let app = router(
            state,
            HttpConfig {
                request_timeout: Duration::from_secs(5),
                cors: tower_http::cors::CorsLayer::new(),
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = stop.clone();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
                .unwrap();
        });
        Self {
            base,
            progress,
            reports,
            tasks: vec![projection, reporter, server],
        }
    }

    /// Waits until the projection has applied the chain's head and the reports consumer
    /// the worker reports up to stream sequence `reported`.
    pub(crate) async fn caught_up(&self, chain: &Chain, reported: u64) {
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
        for task in self.tasks {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("the API stops")
                .unwrap();
        }
    }
}

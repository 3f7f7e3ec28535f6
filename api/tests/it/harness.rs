//! What the API's tests share: the market activity they project (the kit's scripted
//! lifecycle and disputes on a second node), and the API as the binary runs it, on the
//! kit's `TestNet`.

use std::time::Duration;

use alloy::primitives::{B256, U256};
use gantry_api::project::Progress;
use gantry_protocol::api::TokenInfo;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::jobs::{LogLine, LogStream};
use gantry_testkit::accounts::{NODES, SUBMITTER};
use gantry_testkit::{GUSD, JobPost, TestNet, confirm_receipt, scenario};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

/// Paid: assigned, submitted, accepted (the lifecycle's).
pub(crate) const JOB_PAID: u64 = 1;
/// Cancelled while open: its bounty credited back.
pub(crate) const JOB_CANCELLED: u64 = 2;
/// Claimed by node 1 and given back ("image not found"): node 1 barred, charged by the
/// time it held the job; open again.
pub(crate) const JOB_REJECTED: u64 = 3;
/// Disputed by the submitter and left open: bond and node 2's exposure held.
pub(crate) const JOB_DISPUTED: u64 = 4;
/// Disputed and decided for the submitter: bounty and bond credited back, node 2's
/// exposure slashed, its stake below the minimum (the market marks it inactive).
pub(crate) const JOB_DISPUTE_LOST: u64 = 5;
/// The lifecycle's node: paid once, withdrew its earnings, exiting.
pub(crate) const NODE_EXITING: u64 = 1;
/// The node of the disputes, registered with the minimum stake.
pub(crate) const NODE_DISPUTED: u64 = 2;
/// Deposited by the submitter before posting the disputed jobs.
pub(crate) const DEPOSIT: u64 = 5 * GUSD;

/// Waits until the indexer has put the chain's head block into the chain stream. A
/// worker reports on an assignment only after the stream brought it (and the API holds a
/// report it cannot place only until its projection has read the stream as far as it
/// then reached): tests that write reports by hand wait for this first.
pub(crate) async fn indexed(chain: &TestNet) {
    let head = alloy::providers::Provider::get_block_number(&chain.devnet.admin)
        .await
        .unwrap();
    let js = chain.jetstream().await;
    let commit = gantry_protocol::names::block_commit(chain.chain_id(), head);
    let stream = gantry_protocol::names::stream_name(chain.chain_id());
    chain
        .wait_until("the indexer has the head block", || async {
            match js.get_stream(&stream).await {
                Ok(stream) => stream
                    .get_last_raw_message_by_subject(&commit)
                    .await
                    .is_ok(),
                Err(_) => false,
            }
        })
        .await;
}

/// A chain and NATS with the indexer running, after the scripted lifecycle and
/// [`disputes`]. The challenge window and the arbiter's time are an hour, so that a slow
/// machine cannot close them mid-script.
pub(crate) async fn chain_with_market() -> TestNet {
    let chain = TestNet::builder()
        .deploy_params(|mut params| {
            params.market.challengeWindow = 3_600;
            params.market.disputePeriod = 3_600;
            params
        })
        .indexer()
        .start()
        .await
        .expect("the test net starts");
    scenario::lifecycle(&chain.devnet)
        .await
        .expect("the scripted lifecycle");
    disputes(&chain).await;
    chain
}

/// A line a worker printed to stdout on `job_id`'s `attempt`.
pub(crate) fn stdout_line(
    job_id: u64,
    attempt: u8,
    line: impl Into<String>,
    at_ms: u64,
) -> LogLine {
    LogLine {
        v: 1,
        job_id,
        attempt,
        stream: LogStream::Stdout,
        line: line.into(),
        at_ms,
    }
}

/// Now, unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Registers an H100 node served by `operator` itself, staking the minimum; its id.
pub(crate) async fn register_h100(chain: &TestNet, operator: usize) -> u64 {
    chain
        .register_node(
            operator,
            chain.address(operator),
            scenario::h100_node(),
            100 * GUSD,
        )
        .await
}

/// After the lifecycle: node 2 (served by its operator, `NODES[1]`, staking the minimum)
/// runs jobs 4 and 5 to a result, the submitter (having deposited [`DEPOSIT`]) disputes
/// both, and the arbiter decides job 5 for the submitter. The last three blocks are the
/// two disputes and the decision.
async fn disputes(chain: &TestNet) {
    let operator = NODES[1];
    let node = register_h100(chain, operator).await;
    assert_eq!(node, NODE_DISPUTED);
    confirm_receipt(
        "deposit",
        chain
            .market(SUBMITTER)
            .deposit(U256::from(DEPOSIT))
            .send()
            .await,
    )
    .await
    .unwrap();
    post_job(chain, 20 * GUSD).await;
    post_job(chain, 50 * GUSD).await;
    // Providers count their account's nonces: each is made after the last transaction
    // its account sent through another.
    // The admin is the dev network's matcher and arbiter; its calls go through the kit's
    // own provider for it, which the kit mints with later.
    let admin = JobMarket::new(chain.deployment().market, chain.devnet.admin.clone());
    let agent = chain.market(operator);
    for job_id in [JOB_DISPUTED, JOB_DISPUTE_LOST] {
        let job = chain.job(job_id).await;
        let assign = admin.assign(job_id, node, job.terms.pack(), job.state.pack());
        confirm_receipt("assign", assign.send().await)
            .await
            .unwrap();
        let state = chain.job(job_id).await.state.pack();
        let submit = agent.submitResult(job_id, state, B256::repeat_byte(9), "ipfs://r".into());
        confirm_receipt("submitResult", submit.send().await)
            .await
            .unwrap();
    }
    let submitter = chain.market(SUBMITTER);
    for job_id in [JOB_DISPUTED, JOB_DISPUTE_LOST] {
        let job = chain.job(job_id).await;
        let dispute = submitter.dispute(job_id, job.terms.pack(), job.state.pack());
        confirm_receipt("dispute", dispute.send().await)
            .await
            .unwrap();
    }
    let job = chain.job(JOB_DISPUTE_LOST).await;
    let resolve = admin.resolve(JOB_DISPUTE_LOST, job.terms.pack(), job.state.pack(), false);
    confirm_receipt("resolve", resolve.send().await)
        .await
        .unwrap();
}

/// A SQLite database in `dir`.
pub(crate) fn sqlite(dir: &std::path::Path) -> String {
    format!("sqlite://{}", dir.join("api.db").display())
}

/// Posts an H100 job with `bounty` as the lifecycle's submitter (funded and approved):
/// one block of new events. Returns its id.
pub(crate) async fn post_job(chain: &TestNet, bounty: u64) -> u64 {
    let job = JobPost {
        bounty,
        ..JobPost::default()
    };
    chain.post_job(SUBMITTER, job).await
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
            market: Some(chain.devnet.deployment.market),
            token: Some(chain.devnet.deployment.token),
            start_block: chain.devnet.deployment.start_block,
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

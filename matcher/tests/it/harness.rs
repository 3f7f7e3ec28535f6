//! A dev chain, nats-server and an indexer, with matcher and liveness processes on top,
//! and helpers to drive the market and wait for what the services do.

use std::future::Future;
use std::time::Duration;

use alloy::primitives::{Address, B256, U256, aliases::U40, aliases::U96};
use alloy::providers::DynProvider;
use async_nats::jetstream;
use futures::StreamExt;
use gantry_devnet::{DeployParams, Devnet, NatsServer, confirm_receipt};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::names;
use tokio_util::sync::CancellationToken;

pub(crate) const GUSD: u64 = 1_000_000;

/// Accounts: 0 admin (and a matcher), 1–4 node operators and agents, 5 submitter,
/// 8 liveness, 9 a second matcher.
pub(crate) const SUBMITTER: usize = 5;
pub(crate) const KEEPER: usize = 8;
pub(crate) const SECOND_MATCHER: usize = 9;

pub(crate) struct Net {
    pub(crate) devnet: Devnet,
    pub(crate) nats: NatsServer,
    indexer: CancellationToken,
}

impl Drop for Net {
    fn drop(&mut self) {
        self.indexer.cancel();
    }
}

impl Net {
    /// Chain, NATS and a running indexer; account 9 may assign too.
    pub(crate) async fn start(configure: impl FnOnce(DeployParams) -> DeployParams) -> Self {
        let devnet = Devnet::start_with(configure).await.expect("devnet starts");
        let nats = NatsServer::start().expect("nats-server starts");
        let d = devnet.deployment;
        let market = JobMarket::new(d.market, devnet.admin.clone());
        let role = market.MATCHER_ROLE().call().await.unwrap();
        let second = devnet.anvil.addresses()[SECOND_MATCHER];
        confirm_receipt("grantRole", market.grantRole(role, second).send().await)
            .await
            .unwrap();
        let config = gantry_indexer::Config::local(
            devnet.anvil.endpoint_url(),
            d.chain_id,
            d.market,
            d.registry,
            d.start_block,
            nats.url(),
        );
        let indexer = CancellationToken::new();
        tokio::spawn(gantry_indexer::run(config, indexer.clone()));
        Self {
            devnet,
            nats,
            indexer,
        }
    }

    pub(crate) fn chain_id(&self) -> u64 {
        self.devnet.deployment.chain_id
    }

    pub(crate) fn address(&self, account: usize) -> Address {
        self.devnet.anvil.addresses()[account]
    }

    pub(crate) fn market(&self, account: usize) -> JobMarket::JobMarketInstance<DynProvider> {
        JobMarket::new(self.devnet.deployment.market, self.devnet.provider(account))
    }

    pub(crate) fn registry(
        &self,
        account: usize,
    ) -> NodeRegistry::NodeRegistryInstance<DynProvider> {
        NodeRegistry::new(
            self.devnet.deployment.registry,
            self.devnet.provider(account),
        )
    }

    /// Registers a node operated by `account`, which is also its agent, with 500 gUSD stake.
    pub(crate) async fn register_node(
        &self,
        account: usize,
        capabilities: NodeRegistry::NodeCapabilities,
    ) -> u64 {
        let operator = self.address(account);
        self.devnet
            .fund(
                account,
                self.devnet.deployment.registry,
                U256::from(10_000 * GUSD),
            )
            .await
            .unwrap();
        let registry = self.registry(account);
        let receipt = confirm_receipt(
            "register",
            registry
                .register(
                    operator,
                    capabilities,
                    "ipfs://node".into(),
                    U96::from(500 * GUSD),
                )
                .send()
                .await,
        )
        .await
        .unwrap();
        let registered = receipt
            .decoded_log::<NodeRegistry::NodeRegistered>()
            .expect("NodeRegistered");
        registered.nodeId
    }

    /// Funds the submitter and lets the market take its tokens.
    pub(crate) async fn fund_submitter(&self) {
        let market = self.devnet.deployment.market;
        self.devnet
            .fund(SUBMITTER, market, U256::from(1_000_000 * GUSD))
            .await
            .unwrap();
    }

    /// Posts a job of 50 gUSD from the submitter; returns its id.
    pub(crate) async fn post_job(
        &self,
        requirements: JobMarket::JobRequirements,
        deadline: u64,
    ) -> u64 {
        let receipt = confirm_receipt(
            "postJob",
            self.market(SUBMITTER)
                .postJob(
                    requirements,
                    U96::from(50 * GUSD),
                    U40::from(deadline),
                    gantry_devnet::scenario::example_spec().into(),
                )
                .send()
                .await,
        )
        .await
        .unwrap();
        receipt
            .decoded_log::<JobMarket::JobPosted>()
            .expect("JobPosted")
            .jobId
    }

    pub(crate) async fn job(&self, job: u64) -> JobMarket::JobInfo {
        self.market(0).getJob(job).call().await.unwrap()
    }

    pub(crate) async fn node(&self, node: u64) -> NodeRegistry::NodeInfo {
        self.registry(0).getNode(node).call().await.unwrap()
    }

    /// Chain time of the newest block.
    pub(crate) async fn now(&self) -> u64 {
        self.devnet.now().await.unwrap()
    }

    /// Moves chain time forward and mines a block there.
    pub(crate) async fn advance(&self, seconds: u64) {
        self.devnet.advance(seconds).await.unwrap();
    }

    /// Waits until `condition` holds, checking again whenever the stream gets a message.
    pub(crate) async fn wait_until<F, Fut>(&self, what: &str, mut condition: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let client = async_nats::connect(self.nats.url()).await.unwrap();
        let mut messages = client
            .subscribe(names::stream_subjects(self.chain_id()))
            .await
            .unwrap();
        let reached = async {
            loop {
                if condition().await {
                    return;
                }
                messages.next().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(90), reached)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
    }

    /// Waits until job `job` has `status`.
    pub(crate) async fn wait_for_status(&self, job: u64, status: u8) {
        self.wait_until(&format!("job {job} has status {status}"), || async move {
            self.job(job).await.status as u8 == status
        })
        .await;
    }

    pub(crate) async fn jetstream(&self) -> jetstream::Context {
        jetstream::new(async_nats::connect(self.nats.url()).await.unwrap())
    }

    /// The matcher's explanation of why `job` waits, once there is one.
    pub(crate) async fn wait_for_explanation(
        &self,
        job: u64,
    ) -> gantry_protocol::pending::PendingExplanation {
        let js = self.jetstream().await;
        let bucket = names::pending_bucket(self.chain_id());
        let found = async {
            loop {
                if let Ok(store) = js.get_key_value(&bucket).await {
                    let mut watch = store.watch(job.to_string()).await.unwrap();
                    if let Some(value) = store.get(job.to_string()).await.unwrap() {
                        return serde_json::from_slice(&value).unwrap();
                    }
                    while let Some(entry) = watch.next().await {
                        let entry = entry.unwrap();
                        if !entry.value.is_empty() {
                            return serde_json::from_slice(&entry.value).unwrap();
                        }
                    }
                }
                // The bucket appears when the matcher starts: wait for the stream to move.
                self.wait_for_any_message().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(90), found)
            .await
            .unwrap_or_else(|_| panic!("no explanation of job {job}"))
    }

    async fn wait_for_any_message(&self) {
        let client = async_nats::connect(self.nats.url()).await.unwrap();
        let mut messages = client.subscribe(">").await.unwrap();
        messages.next().await;
    }

    /// The `gantry-matcher` binary, signing as `account`.
    pub(crate) fn spawn_matcher(&self, account: usize, extra: &[&str]) -> Service {
        let mut command = self.service_command(env!("CARGO_BIN_EXE_gantry-matcher"), account);
        command
            .args(["--claim-ttl-ms", "2000"])
            .args(["--revert-backoff-ms", "1000"])
            .args(extra);
        Service::spawn(command)
    }

    /// The `gantry-liveness` binary, signing as `account`.
    pub(crate) fn spawn_liveness(&self, account: usize, instance: &str) -> Service {
        let mut command = self.service_command(env!("CARGO_BIN_EXE_gantry-liveness"), account);
        command
            .args(["--lease-ttl-ms", "1000"])
            .args(["--instance-id", instance]);
        Service::spawn(command)
    }

    fn service_command(&self, binary: &str, account: usize) -> std::process::Command {
        let d = self.devnet.deployment;
        let key = B256::from_slice(&self.devnet.anvil.keys()[account].to_bytes());
        let mut command = std::process::Command::new(binary);
        command
            .args(["--rpc-url", self.devnet.anvil.endpoint_url().as_str()])
            .args(["--chain-id", &d.chain_id.to_string()])
            .args(["--market", &d.market.to_string()])
            .args(["--registry", &d.registry.to_string()])
            .args(["--nats-url", &self.nats.url()])
            .args(["--receipt-poll-ms", "20"])
            .env("GANTRY_PRIVATE_KEY", key.to_string())
            .env("RUST_LOG", "gantry_matcher=info,warn")
            .stdout(std::process::Stdio::null());
        command
    }
}

/// A service process, SIGKILLed on drop.
pub(crate) struct Service(std::process::Child);

impl Service {
    fn spawn(mut command: std::process::Command) -> Self {
        Self(command.spawn().expect("service binary starts"))
    }

    pub(crate) fn kill(mut self) {
        self.0.kill().expect("SIGKILL");
        self.0.wait().expect("reaped");
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Capabilities of a node with `gpus` GPUs of `model` with `vram_gib` each, at `price`
/// gUSD per GPU-hour, taking `slots` jobs at once.
pub(crate) fn node(
    model: &str,
    gpus: u16,
    vram_gib: u32,
    price: u64,
    slots: u8,
) -> NodeRegistry::NodeCapabilities {
    NodeRegistry::NodeCapabilities {
        gpuModel: B256::right_padding_from(model.as_bytes()),
        gpuCount: gpus,
        vramMiB: vram_gib * 1024,
        cpuCores: 32,
        ramMiB: 256 * 1024,
        pricePerGpuHour: U96::from(price * GUSD),
        maxConcurrentJobs: slots,
    }
}

/// Requirements: one GPU of `model` ("" for any) with `vram_gib`, at most 5 gUSD/GPU-hour,
/// running at most `max_runtime` seconds.
pub(crate) fn needs(model: &str, vram_gib: u32, max_runtime: u32) -> JobMarket::JobRequirements {
    JobMarket::JobRequirements {
        gpuModel: if model.is_empty() {
            B256::ZERO
        } else {
            B256::right_padding_from(model.as_bytes())
        },
        minGpuCount: 1,
        minVramMiB: vram_gib * 1024,
        minCpuCores: 4,
        minRamMiB: 16 * 1024,
        maxPricePerGpuHour: U96::from(5 * GUSD),
        maxRuntime: max_runtime,
        priority: 5,
    }
}

/// Job statuses as the chain reports them (`getJob(..).status`).
pub(crate) mod status {
    use gantry_protocol::status::JobStatus;

    pub(crate) const OPEN: u8 = JobStatus::Open as u8;
    pub(crate) const ASSIGNED: u8 = JobStatus::Assigned as u8;
    pub(crate) const COMPLETED: u8 = JobStatus::Completed as u8;
    pub(crate) const EXPIRED: u8 = JobStatus::Expired as u8;
}

/// Waits for a transaction's successful receipt.
pub(crate) async fn confirm<N: alloy::network::Network>(
    sent: Result<alloy::providers::PendingTransactionBuilder<N>, alloy::contract::Error>,
) {
    confirm_receipt("transaction", sent).await.unwrap();
}

impl Net {
    /// The instance id holding the keeper lease, once one does.
    pub(crate) async fn keeper_leader(&self) -> String {
        let js = self.jetstream().await;
        let found = async {
            loop {
                if let Ok(store) = js.get_key_value("gantry_liveness_lease").await {
                    let key = format!("chain-{}", self.chain_id());
                    let mut watch = store.watch(&key).await.unwrap();
                    if let Some(value) = store.get(&key).await.unwrap() {
                        return String::from_utf8(value.to_vec()).unwrap();
                    }
                    while let Some(entry) = watch.next().await {
                        let entry = entry.unwrap();
                        if !entry.value.is_empty() {
                            return String::from_utf8(entry.value.to_vec()).unwrap();
                        }
                    }
                }
                self.wait_for_any_message().await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), found)
            .await
            .expect("a keeper takes the lease")
    }
}

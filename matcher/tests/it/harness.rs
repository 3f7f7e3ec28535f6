//! The kit's `TestNet` (a chain, nats-server and an indexer; [`SECOND_MATCHER`] may
//! assign too) with matcher and liveness processes on top, and waits for what the
//! services write into KV.

use std::time::Duration;

use alloy::primitives::{B256, aliases::U96};
use alloy::providers::Provider;
use alloy::rpc::types::{Filter, Log};
use alloy::sol_types::SolEvent;
use futures::StreamExt;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::names;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{SECOND_MATCHER, SUBMITTER};
use gantry_testkit::{DeployParams, GUSD, JobPost, TestNet, confirm_receipt};

gantry_testkit::harness! {
    pub(crate) struct Net
}

impl Net {
    /// Chain, NATS and a running indexer; waits give up after 90 s.
    pub(crate) async fn start(
        configure: impl FnOnce(DeployParams) -> DeployParams + Send + 'static,
    ) -> Self {
        let net = TestNet::builder()
            .deploy_params(configure)
            .indexer()
            .matcher_role(SECOND_MATCHER)
            .patience(Duration::from_secs(90))
            .start()
            .await
            .expect("the test net starts");
        Self(net)
    }

    /// Chain and NATS only: the test writes the chain stream itself.
    pub(crate) async fn without_indexer() -> Self {
        let net = TestNet::builder()
            .nats()
            .patience(Duration::from_secs(90))
            .start()
            .await
            .expect("the test net starts");
        Self(net)
    }

    /// Posts a job of 50 gUSD from the submitter; returns its id.
    pub(crate) async fn post(
        &self,
        requirements: JobMarket::JobRequirements,
        deadline: u64,
    ) -> u64 {
        let job = JobPost {
            requirements,
            deadline,
            ..JobPost::default()
        };
        self.post_job(SUBMITTER, job).await
    }

    /// Posts ten B200 jobs no node can take yet (a day's deadline) and waits until the
    /// matchers hold a claim on each; returns their ids.
    pub(crate) async fn post_ten_waiting_for_a_b200(&self) -> Vec<u64> {
        let deadline = self.now().await + 86_400;
        let mut jobs = Vec::new();
        for _ in 0..10 {
            jobs.push(self.post(needs("NVIDIA-B200", 80, 3_600), deadline).await);
        }
        self.wait_for_claims(10).await;
        jobs
    }

    /// Every log of event `E` the market emitted, oldest first.
    pub(crate) async fn market_logs<E: SolEvent>(&self) -> Vec<Log> {
        let filter = Filter::new()
            .address(self.devnet.deployment.market)
            .event_signature(E::SIGNATURE_HASH)
            .from_block(0);
        self.devnet.admin.get_logs(&filter).await.unwrap()
    }

    /// Waits until every job of `jobs` is assigned, and asserts each went to `node`.
    pub(crate) async fn wait_all_assigned_to(&self, jobs: &[u64], node: u64) {
        for job in jobs {
            self.wait_for_status(*job, JobStatus::Assigned).await;
            assert_eq!(self.job(*job).await.state.node_id, node, "job {job}");
        }
    }

    /// Waits until the matchers hold `count` claims (unacknowledged open jobs).
    pub(crate) async fn wait_for_claims(&self, count: usize) {
        let js = self.jetstream().await;
        let consumer_name = names::matcher_consumer(self.chain_id());
        self.wait_until(&format!("the matchers hold {count} claims"), || {
            let js = js.clone();
            let consumer_name = consumer_name.clone();
            let chain_id = self.chain_id();
            async move {
                let Ok(stream) = js.get_stream(names::stream_name(chain_id)).await else {
                    return false;
                };
                let Ok(mut consumer) = stream
                    .get_consumer::<async_nats::jetstream::consumer::pull::Config>(&consumer_name)
                    .await
                else {
                    return false;
                };
                consumer
                    .info()
                    .await
                    .is_ok_and(|info| info.num_ack_pending == count)
            }
        })
        .await;
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

    async fn wait_for_any_message(&self) {
        let client = async_nats::connect(self.nats().url()).await.unwrap();
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
        self.spawn_liveness_with(account, instance, &[])
    }

    /// The same, with `extra` flags.
    pub(crate) fn spawn_liveness_with(
        &self,
        account: usize,
        instance: &str,
        extra: &[&str],
    ) -> Service {
        let mut command = self.service_command(env!("CARGO_BIN_EXE_gantry-liveness"), account);
        command
            .args(["--lease-ttl-ms", "1000"])
            .args(["--instance-id", instance])
            .args(extra);
        Service::spawn(command)
    }

    fn service_command(&self, binary: &str, account: usize) -> std::process::Command {
        let d = self.deployment();
        let mut command = std::process::Command::new(binary);
        command
            .args(["--rpc-url", self.devnet.anvil.endpoint_url().as_str()])
            .args(["--chain-id", &d.chain_id.to_string()])
            .args(["--market", &d.market.to_string()])
            .args(["--registry", &d.registry.to_string()])
            .args(["--nats-url", &self.nats().url()])
            .args(["--receipt-poll-ms", "20"])
            .env("GANTRY_PRIVATE_KEY", self.devnet.private_key(account))
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

    /// Panics if the process has exited.
    pub(crate) fn assert_running(&mut self) {
        if let Some(status) = self.0.try_wait().expect("the process is there") {
            panic!("the service exited ({status})");
        }
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
        engines: gantry_protocol::eligibility::Engines::ALL.0,
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
        engine: gantry_protocol::spec::Engine::Docker.code(),
    }
}

/// Waits for a transaction's successful receipt.
pub(crate) async fn confirm<N: alloy::network::Network>(
    sent: Result<alloy::providers::PendingTransactionBuilder<N>, alloy::contract::Error>,
) {
    confirm_receipt("transaction", sent).await.unwrap();
}

//! The whole network a worker lives in: anvil, nats-server, dockerd, an indexer, a matcher
//! and a liveness keeper (in-process), with `gantry-worker` processes on top.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use alloy::primitives::{Address, B256, U256, aliases::U40, aliases::U96};
use alloy::providers::DynProvider;
use async_nats::jetstream;
use bollard::query_parameters::ListContainersOptions;
use clap::Parser;
use futures::StreamExt;
use gantry_devnet::{DeployParams, Devnet, Dockerd, NatsServer, confirm_receipt};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::names;
use gantry_protocol::spec::JobSpec;
use tokio_util::sync::CancellationToken;

pub(crate) const GUSD: u64 = 1_000_000;
pub(crate) const IMAGE: &str = "gantry-test/busybox:1";
/// Accounts: 0 admin (mints), 1–4 worker agents, 5 submitter, 8 liveness keeper,
/// 9 matcher.
pub(crate) const SUBMITTER: usize = 5;
const KEEPER: usize = 8;
const MATCHER: usize = 9;
/// Longest any step of a test may take.
const PATIENCE: Duration = Duration::from_secs(120);

/// Job statuses as the chain reports them (`getJob(..).status`).
pub(crate) mod status {
    use gantry_protocol::status::JobStatus;

    pub(crate) const ASSIGNED: u8 = JobStatus::Assigned as u8;
    pub(crate) const SUBMITTED: u8 = JobStatus::Submitted as u8;
    pub(crate) const COMPLETED: u8 = JobStatus::Completed as u8;
    pub(crate) const FAILED: u8 = JobStatus::Failed as u8;
}

pub(crate) struct Net {
    pub(crate) devnet: Devnet,
    pub(crate) nats: NatsServer,
    pub(crate) dockerd: Dockerd,
    pub(crate) docker: bollard::Docker,
    services: CancellationToken,
    indexer: gantry_indexer::Config,
    dir: tempfile::TempDir,
}

/// Which services [`Net::start_with`] runs beside the chain, NATS and Docker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Services {
    pub(crate) indexer: bool,
    pub(crate) matcher: bool,
}

impl Services {
    pub(crate) const ALL: Self = Self {
        indexer: true,
        matcher: true,
    };
    /// Claim mode needs no matcher.
    pub(crate) const NO_MATCHER: Self = Self {
        indexer: true,
        matcher: false,
    };
}

impl Drop for Net {
    fn drop(&mut self) {
        self.services.cancel();
    }
}

impl Net {
    /// Chain, NATS, Docker with the test image, indexer, matcher and keeper.
    pub(crate) async fn start(configure: impl FnOnce(DeployParams) -> DeployParams) -> Self {
        Self::start_with(configure, Services::ALL).await
    }

    /// The same, with the keeper and the chosen `services`.
    pub(crate) async fn start_with(
        configure: impl FnOnce(DeployParams) -> DeployParams,
        services_to_run: Services,
    ) -> Self {
        let devnet = Devnet::start_with(configure).await.expect("devnet starts");
        let nats = NatsServer::start().expect("nats-server starts");
        let dockerd = Dockerd::start().expect("dockerd starts");
        let docker = dockerd.client().await.expect("docker client");
        gantry_devnet::import_busybox(&docker, IMAGE)
            .await
            .expect("the test image imports");
        let d = devnet.deployment;
        let market = JobMarket::new(d.market, devnet.admin.clone());
        let role = market.MATCHER_ROLE().call().await.unwrap();
        let matcher = devnet.anvil.addresses()[MATCHER];
        confirm_receipt("grantRole", market.grantRole(role, matcher).send().await)
            .await
            .unwrap();
        let services = CancellationToken::new();
        let indexer = gantry_indexer::Config::local(
            devnet.anvil.endpoint_url(),
            d.chain_id,
            d.market,
            d.registry,
            d.start_block,
            nats.url(),
        );
        if services_to_run.indexer {
            tokio::spawn(gantry_indexer::run(indexer.clone(), services.clone()));
        }
        let common = |account: usize| {
            let key = B256::from_slice(&devnet.anvil.keys()[account].to_bytes());
            vec![
                "service".to_string(),
                "--rpc-url".into(),
                devnet.anvil.endpoint_url().to_string(),
                "--chain-id".into(),
                d.chain_id.to_string(),
                "--market".into(),
                d.market.to_string(),
                "--registry".into(),
                d.registry.to_string(),
                "--nats-url".into(),
                nats.url(),
                "--receipt-poll-ms".into(),
                "20".into(),
                "--private-key".into(),
                key.to_string(),
            ]
        };
        let matcher =
            gantry_matcher::MatcherConfig::try_parse_from(common(MATCHER)).expect("matcher args");
        let mut keeper_args = common(KEEPER);
        keeper_args.extend(["--lease-ttl-ms".into(), "1000".into()]);
        let keeper =
            gantry_matcher::LivenessConfig::try_parse_from(keeper_args).expect("keeper args");
        if services_to_run.matcher {
            tokio::spawn(gantry_matcher::run_matcher(matcher, services.clone()));
        }
        tokio::spawn(gantry_matcher::run_liveness(keeper, services.clone()));
        Self {
            devnet,
            nats,
            dockerd,
            docker,
            services,
            indexer,
            dir: tempfile::tempdir().expect("a temp dir"),
        }
    }

    /// Starts the indexer of a network started without it.
    pub(crate) fn start_indexer(&self) {
        tokio::spawn(gantry_indexer::run(
            self.indexer.clone(),
            self.services.clone(),
        ));
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

    pub(crate) fn registry(&self) -> NodeRegistry::NodeRegistryInstance<DynProvider> {
        NodeRegistry::new(self.devnet.deployment.registry, self.devnet.provider(0))
    }

    pub(crate) async fn jetstream(&self) -> jetstream::Context {
        jetstream::new(async_nats::connect(self.nats.url()).await.unwrap())
    }

    /// The worker's config file for agent `account`, with `extra` TOML in `[jobs]`.
    fn worker_config(&self, account: usize, extra_jobs: &str, metrics: SocketAddr) -> PathBuf {
        let d = self.devnet.deployment;
        let root = self.dir.path().join(format!("worker-{account}"));
        std::fs::create_dir_all(&root).unwrap();
        let path = root.join("worker.toml");
        let text = format!(
            r#"
rpc_url = "{rpc}"
chain_id = {chain}
nats_url = "{nats}"
market = "{market}"
registry = "{registry}"
token = "{token}"
docker_socket = "{socket}"
cache_dir = "{root}/cache"
work_dir = "{root}/work"
metrics_addr = "{metrics}"

[node]
price_per_gpu_hour = "{price}"
stake = "{stake}"

[jobs]
{jobs}
"#,
            rpc = self.devnet.anvil.endpoint_url(),
            chain = d.chain_id,
            nats = self.nats.url(),
            market = d.market,
            registry = d.registry,
            token = d.token,
            socket = self.dockerd.socket().display(),
            root = root.display(),
            price = GUSD,
            // Five times the minimum: one slash leaves the node eligible.
            stake = 500 * GUSD,
            jobs = jobs_section(extra_jobs),
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Starts `gantry-worker` as agent `account` (funded for its stake); returns once it
    /// takes work, with its node id.
    pub(crate) async fn spawn_worker(&self, account: usize, extra_jobs: &str) -> RunningWorker {
        let worker = self.spawn_registered(account, extra_jobs).await;
        self.taking_work(&worker).await;
        worker
    }

    /// Starts `gantry-worker` as agent `account` (funded for its stake); returns once its
    /// node is registered, with the node id.
    pub(crate) async fn spawn_registered(&self, account: usize, extra_jobs: &str) -> RunningWorker {
        let agent = self.address(account);
        self.devnet
            .mint(agent, U256::from(10_000 * GUSD))
            .await
            .unwrap();
        let metrics = SocketAddr::from((
            [127, 0, 0, 1],
            gantry_devnet::network::free_port().expect("a free port"),
        ));
        let config = self.worker_config(account, extra_jobs, metrics);
        let key = B256::from_slice(&self.devnet.anvil.keys()[account].to_bytes());
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_gantry-worker"))
            .arg("--config")
            .arg(&config)
            .env("GANTRY_AGENT_KEY", key.to_string())
            .env(
                "RUST_LOG",
                std::env::var("WORKER_LOG").unwrap_or_else(|_| "gantry_worker=info,warn".into()),
            )
            .spawn()
            .expect("gantry-worker starts");
        let mut worker = RunningWorker {
            child,
            node_id: 0,
            metrics,
        };
        self.wait_until("the worker registers its node", || async {
            self.node_of(agent).await.is_some()
        })
        .await;
        worker.node_id = self.node_of(agent).await.expect("registered");
        worker
    }

    /// Waits until `worker` takes work: its assignment consumer exists.
    pub(crate) async fn taking_work(&self, worker: &RunningWorker) {
        let consumer = gantry_protocol::names::worker_consumer(self.chain_id(), worker.node_id);
        let js = self.jetstream().await;
        self.wait_until("the worker takes work", || {
            let js = js.clone();
            let consumer = consumer.clone();
            async move {
                match js.get_stream(names::stream_name(self.chain_id())).await {
                    Ok(stream) => stream.consumer_info(&consumer).await.is_ok(),
                    Err(_) => false,
                }
            }
        })
        .await;
    }

    /// The node registered with agent `agent`, if any.
    pub(crate) async fn node_of(&self, agent: Address) -> Option<u64> {
        let logs = self
            .registry()
            .NodeRegistered_filter()
            .topic3(agent.into_word())
            .from_block(0)
            .query()
            .await
            .ok()?;
        logs.last().map(|(event, _)| event.nodeId)
    }

    pub(crate) async fn fund_submitter(&self) {
        let market = self.devnet.deployment.market;
        self.devnet
            .fund(SUBMITTER, market, U256::from(1_000_000 * GUSD))
            .await
            .unwrap();
    }

    /// Posts `spec` bytes (50 gUSD, an hour to the deadline); returns the job id.
    pub(crate) async fn post_raw(
        &self,
        requirements: JobMarket::JobRequirements,
        spec: Vec<u8>,
    ) -> u64 {
        let deadline = self.now().await + 3_600;
        let receipt = confirm_receipt(
            "postJob",
            self.market(SUBMITTER)
                .postJob(
                    requirements,
                    U96::from(50 * GUSD),
                    U40::from(deadline),
                    spec.into(),
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

    pub(crate) async fn post(
        &self,
        requirements: JobMarket::JobRequirements,
        spec: &JobSpec,
    ) -> u64 {
        self.post_raw(requirements, spec.to_vec()).await
    }

    pub(crate) async fn job(&self, job: u64) -> JobMarket::JobInfo {
        self.market(0).getJob(job).call().await.unwrap()
    }

    pub(crate) async fn now(&self) -> u64 {
        self.devnet.now().await.unwrap()
    }

    /// Moves chain time forward and mines a block there.
    pub(crate) async fn advance(&self, seconds: u64) {
        self.devnet.advance(seconds).await.unwrap();
    }

    /// Waits until `condition` holds, checking again whenever any NATS message flows
    /// (chain events, progress, logs, object uploads).
    pub(crate) async fn wait_until<F, Fut>(&self, what: &str, mut condition: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let client = async_nats::connect(self.nats.url()).await.unwrap();
        let mut messages = client.subscribe(">").await.unwrap();
        let reached = async {
            loop {
                if condition().await {
                    return;
                }
                messages.next().await;
            }
        };
        tokio::time::timeout(PATIENCE, reached)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting until {what}"));
    }

    pub(crate) async fn wait_for_status(&self, job: u64, status: u8) {
        self.wait_until(&format!("job {job} has status {status}"), || async move {
            self.job(job).await.status == status
        })
        .await;
    }

    /// The reasons given in `JobRejected` events, by job.
    pub(crate) async fn rejections(&self) -> HashMap<u64, String> {
        self.market(0)
            .JobRejected_filter()
            .from_block(0)
            .query()
            .await
            .unwrap()
            .into_iter()
            .map(|(event, _)| (event.jobId, event.reason))
            .collect()
    }

    /// Names of every container on the engine, running or not.
    pub(crate) async fn containers(&self) -> Vec<String> {
        self.docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                ..Default::default()
            }))
            .await
            .unwrap()
            .into_iter()
            .flat_map(|c| c.names.unwrap_or_default())
            .collect()
    }

    /// Waits until no container is left on the engine.
    pub(crate) async fn wait_for_no_containers(&self) {
        let waited = async {
            let mut events = self
                .docker
                .events(None::<bollard::query_parameters::EventsOptions>);
            loop {
                if self.containers().await.is_empty() {
                    return;
                }
                events.next().await;
            }
        };
        tokio::time::timeout(PATIENCE, waited)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "containers left: {:?}",
                    futures::executor::block_on(self.containers())
                )
            });
    }

    /// Puts `bytes` into the test's input bucket; returns the `nats://` URI.
    pub(crate) async fn put_input(&self, name: &str, bytes: &[u8]) -> String {
        let js = self.jetstream().await;
        let store = match js.get_object_store("inputs").await {
            Ok(store) => store,
            Err(_) => js
                .create_object_store(jetstream::object_store::Config {
                    bucket: "inputs".into(),
                    ..Default::default()
                })
                .await
                .unwrap(),
        };
        store.put(name, &mut &bytes[..]).await.unwrap();
        format!("nats://inputs/{name}")
    }

    /// Downloads a `nats://bucket/key` object.
    pub(crate) async fn download(&self, uri: &str) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let (bucket, key) = uri
            .strip_prefix("nats://")
            .and_then(|rest| rest.split_once('/'))
            .expect("a nats:// URI");
        let store = self
            .jetstream()
            .await
            .get_object_store(bucket)
            .await
            .unwrap();
        let mut object = store.get(key).await.unwrap();
        let mut bytes = Vec::new();
        object.read_to_end(&mut bytes).await.unwrap();
        bytes
    }
}

/// A `gantry-worker` process, SIGKILLed on drop.
pub(crate) struct RunningWorker {
    child: std::process::Child,
    pub(crate) node_id: u64,
    /// Its Prometheus listener.
    metrics: SocketAddr,
}

impl RunningWorker {
    /// The value of gauge or counter `name` (without labels) on its `/metrics`, if shown.
    pub(crate) async fn metric(&self, name: &str) -> Option<f64> {
        let text = reqwest::get(format!("http://{}/metrics", self.metrics))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines().find_map(|line| {
            let (metric, value) = line.split_once(' ')?;
            (metric == name)
                .then(|| value.trim().parse().ok())
                .flatten()
        })
    }

    /// SIGKILL: no clean-up of its own.
    pub(crate) fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    /// SIGTERM, and waits for a clean exit.
    pub(crate) fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        self.child.wait().expect("exits")
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The test workers' `[jobs]` settings, with the keys in `extra` replacing the defaults.
fn jobs_section(extra: &str) -> String {
    let defaults = [
        "max_concurrent = 4",
        "heartbeat_interval = \"1s\"",
        "progress_report_interval = \"100ms\"",
        "checkpoint_interval = \"200ms\"",
        "default_cpu_threads = 1",
        "pids_limit = 64",
    ];
    let overridden = |line: &&str| {
        let key = line.split('=').next().unwrap_or_default().trim();
        extra
            .lines()
            .any(|l| l.split('=').next().unwrap_or_default().trim() == key)
    };
    let mut lines: Vec<&str> = defaults
        .iter()
        .filter(|l| !overridden(l))
        .copied()
        .collect();
    lines.extend(extra.lines());
    lines.join("\n")
}

/// A CPU job: no GPU, `ram_mib` of memory, one core, at most 5 gUSD per GPU-hour.
pub(crate) fn cpu_job(ram_mib: u32) -> JobMarket::JobRequirements {
    JobMarket::JobRequirements {
        gpuModel: B256::ZERO,
        minGpuCount: 0,
        minVramMiB: 0,
        minCpuCores: 1,
        minRamMiB: ram_mib,
        maxPricePerGpuHour: U96::from(5 * GUSD),
        maxRuntime: 600,
        priority: 5,
    }
}

/// A spec running `script` with the busybox shell in the test image.
pub(crate) fn shell(script: &str, timeout_secs: u64) -> JobSpec {
    JobSpec {
        version: 1,
        kind: Default::default(),
        image: IMAGE.into(),
        command: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: Default::default(),
        inputs: vec![],
        outputs: Default::default(),
        resources: Default::default(),
        timeout_secs,
    }
}

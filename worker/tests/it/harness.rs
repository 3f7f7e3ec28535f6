//! The whole network a worker lives in, the kit's `TestNet`: anvil, nats-server, a
//! private dockerd with the test image, an indexer, a matcher ([`SECOND_MATCHER`]) and a
//! liveness keeper ([`KEEPER`]) in this process, with `gantry-worker` processes on top;
//! and what the tests read back of a job: its result's files, its failure report, what
//! its node was charged and when.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;

use alloy::primitives::{Address, B256, U256, aliases::U96};
use alloy::providers::Provider;
use alloy::rpc::types::Log;
use async_nats::jetstream;
use bollard::query_parameters::ListContainersOptions;
use futures::StreamExt;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::names;
use gantry_protocol::spec::JobSpec;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, KEEPER, MATCHER, SECOND_MATCHER, SUBMITTER};
use gantry_testkit::{DeployParams, GUSD, JobPost, PATIENCE, TestNet};

use crate::scripts::{last_of_job, of_job, of_node};

/// What a test worker stakes: five times the minimum, so one slash leaves it eligible.
pub(crate) const STAKE: u64 = 500 * GUSD;
/// One full slash of [`STAKE`] at the dev parameters (10%): what a reclaim costs.
pub(crate) const FULL_SLASH: u64 = STAKE / 10;

pub(crate) const IMAGE: &str = "gantry-test/busybox:1";

gantry_testkit::harness! {
    pub(crate) struct Net
}

/// Which services [`Net::start_with`] runs beside the chain, NATS, Docker and the keeper.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Services {
    pub(crate) indexer: bool,
    pub(crate) matcher: bool,
    pub(crate) keeper: bool,
}

impl Services {
    pub(crate) const ALL: Self = Self {
        indexer: true,
        matcher: true,
        keeper: true,
    };
    /// Claim mode needs no matcher.
    pub(crate) const NO_MATCHER: Self = Self {
        indexer: true,
        matcher: false,
        keeper: true,
    };
    /// Nobody reclaims a job past its attempt: the worker alone decides what to do.
    pub(crate) const NO_KEEPER: Self = Self {
        indexer: true,
        matcher: true,
        keeper: false,
    };
}

impl Net {
    /// Chain, NATS, Docker with the test image, indexer, matcher and keeper.
    pub(crate) async fn start(
        configure: impl FnOnce(DeployParams) -> DeployParams + Send + 'static,
    ) -> Self {
        Self::start_with(configure, Services::ALL).await
    }

    /// The same, with the keeper and the chosen `services` (an indexer left out can be
    /// started later with `start_indexer`).
    pub(crate) async fn start_with(
        configure: impl FnOnce(DeployParams) -> DeployParams + Send + 'static,
        services: Services,
    ) -> Self {
        let mut net = TestNet::builder()
            .deploy_params(configure)
            .image(IMAGE)
            .matcher_role(SECOND_MATCHER);
        if services.keeper {
            net = net.keeper(KEEPER);
        }
        net = match services.indexer {
            true => net.indexer(),
            false => net.indexer_later(),
        };
        if services.matcher {
            net = net.matcher(SECOND_MATCHER);
        }
        Self(net.start().await.expect("the test net starts"))
    }

    /// Chain, NATS as in production (the users `nats_auth` renders, none for any node, and
    /// the auth service answering the callout with credentials lasting `ttl_secs`), the
    /// indexer, matcher and keeper as their own users; no Docker: workers join by the
    /// handshake alone, for WASM jobs.
    pub(crate) async fn start_handshake(
        configure: impl FnOnce(DeployParams) -> DeployParams + Send + 'static,
        ttl_secs: u64,
    ) -> Self {
        let net = TestNet::builder()
            .deploy_params(configure)
            .handshake(ttl_secs)
            .matcher_role(SECOND_MATCHER)
            .keeper(KEEPER)
            .indexer()
            .matcher(SECOND_MATCHER);
        Self(net.start().await.expect("the test net starts"))
    }

    /// The worker's config file for agent `account`, with `extra` TOML in `[jobs]`.
    fn worker_config_file(&self, account: usize, extra_jobs: &str, metrics: SocketAddr) -> PathBuf {
        let root = self.dir().join(format!("worker-{account}"));
        std::fs::create_dir_all(&root).unwrap();
        let path = root.join("worker.toml");
        let text = format!(
            r#"{connections}metrics_addr = "{metrics}"

[node]
price_per_gpu_hour = "{price}"
stake = "{stake}"

[jobs]
{jobs}
"#,
            connections = self.worker_config(&root),
            price = GUSD,
            stake = STAKE,
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
        let mut worker = self.spawn_process(account, extra_jobs).await;
        self.wait_until("the worker registers its node", || async {
            self.node_of(agent).await.is_some()
        })
        .await;
        worker.node_id = self.node_of(agent).await.expect("registered");
        worker
    }

    /// Starts `gantry-worker` as agent `account` (funded for its stake) and returns at
    /// once; its `node_id` is 0 until the caller reads it.
    pub(crate) async fn spawn_process(&self, account: usize, extra_jobs: &str) -> RunningWorker {
        let agent = self.address(account);
        self.devnet
            .mint(agent, U256::from(10_000 * GUSD))
            .await
            .unwrap();
        let metrics = SocketAddr::from((
            [127, 0, 0, 1],
            gantry_testkit::free_port().expect("a free port"),
        ));
        let config = self.worker_config_file(account, extra_jobs, metrics);
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_gantry-worker"))
            .arg("--config")
            .arg(&config)
            .env("GANTRY_AGENT_KEY", self.devnet.private_key(account))
            .env(
                "RUST_LOG",
                std::env::var("WORKER_LOG").unwrap_or_else(|_| "gantry_worker=info,warn".into()),
            )
            .spawn()
            .expect("gantry-worker starts");
        RunningWorker {
            child,
            node_id: 0,
            metrics,
        }
    }

    /// Waits until `worker` takes work: its assignment consumer exists.
    pub(crate) async fn taking_work(&self, worker: &RunningWorker) {
        let consumer = names::worker_consumer(self.chain_id(), worker.node_id);
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
            .registry(ADMIN)
            .NodeRegistered_filter()
            .topic3(agent.into_word())
            .from_block(0)
            .query()
            .await
            .ok()?;
        logs.last().map(|(event, _)| event.nodeId)
    }

    /// Posts `spec` bytes from the submitter (50 gUSD, an hour to the deadline); returns
    /// the job id.
    pub(crate) async fn post_raw(
        &self,
        requirements: JobMarket::JobRequirements,
        spec: Vec<u8>,
    ) -> u64 {
        let job = JobPost {
            requirements,
            deadline: self.now().await + 3_600,
            spec,
            ..JobPost::default()
        };
        self.post_job(SUBMITTER, job).await
    }

    pub(crate) async fn post(
        &self,
        requirements: JobMarket::JobRequirements,
        spec: &JobSpec,
    ) -> u64 {
        self.post_raw(requirements, spec.to_vec()).await
    }

    /// The last `ResultSubmitted` event of job `job`.
    pub(crate) async fn submitted_result(&self, job: u64) -> JobMarket::ResultSubmitted {
        last_of_job(self.market(ADMIN).ResultSubmitted_filter(), job)
            .await
            .0
    }

    /// The reasons given in `JobRejected` events, by job.
    pub(crate) async fn rejections(&self) -> HashMap<u64, String> {
        self.market(ADMIN)
            .JobRejected_filter()
            .from_block(0)
            .query()
            .await
            .unwrap()
            .into_iter()
            .map(|(event, _)| (event.jobId, event.reason))
            .collect()
    }

    /// Job `job`'s terms and state as the market holds them. Anvil can answer a block
    /// number before that block's logs (under load): a fold the market's hash disowns is
    /// read again, at once, a few times before it counts as wrong.
    pub(crate) async fn job(&self, job: u64) -> gantry_protocol::market::Job {
        use gantry_runtime::market::{ReadJobError, read_job};
        let d = self.deployment();
        let mut tries = 0;
        loop {
            match read_job(&self.devnet.admin, d.market, d.start_block, job).await {
                Ok(read) => return read,
                Err(ReadJobError::Mismatch { .. }) if tries < 5 => tries += 1,
                Err(e) => panic!("reading job {job}: {e}"),
            }
        }
    }

    /// Waits until job `job` has `status` (read as [`Net::job`] does).
    pub(crate) async fn wait_for_status(&self, job: u64, status: JobStatus) {
        self.wait_until(
            &format!("job {job} is {}", status.as_str()),
            || async move { self.job(job).await.state.status == status },
        )
        .await;
    }

    /// Assigns job `job` to node `node` as the matcher (the admin), with the job's current
    /// terms and state; returns the block it was mined in.
    pub(crate) async fn assign(&self, job: u64, node: u64) -> u64 {
        let current = self.job(job).await;
        let receipt = gantry_testkit::confirm_receipt(
            "assign",
            self.market(MATCHER)
                .assign(job, node, current.terms.pack(), current.state.pack())
                .send()
                .await,
        )
        .await
        .unwrap();
        assert!(
            receipt.decoded_log::<JobMarket::JobAssigned>().is_some(),
            "JobAssigned"
        );
        receipt.block_number.expect("mined")
    }

    /// The timestamp of the block `log` is in.
    pub(crate) async fn block_time(&self, log: &Log) -> u64 {
        let number = log.block_number.expect("a mined log");
        self.devnet
            .admin
            .get_block_by_number(number.into())
            .await
            .unwrap()
            .expect("the block")
            .header
            .timestamp
    }

    /// Every `NodeSlashed` of node `node`: what it was charged or slashed, by job.
    pub(crate) async fn slashes(&self, node: u64) -> Vec<JobMarket::NodeSlashed> {
        of_node(self.market(ADMIN).NodeSlashed_filter(), node)
            .await
            .into_iter()
            .map(|(event, _)| event)
            .collect()
    }

    /// The last time node `node` was marked inactive: by whom, and the log.
    pub(crate) async fn marked_inactive(&self, node: u64) -> (JobMarket::NodeMarkedInactive, Log) {
        of_node(self.market(ADMIN).NodeMarkedInactive_filter(), node)
            .await
            .pop()
            .expect("NodeMarkedInactive")
    }

    /// Waits until job `job` is given back, then reads how node `node` did it.
    pub(crate) async fn given_back(&self, job: u64, node: u64) -> Rejection {
        self.wait_until(&format!("job {job} is given back"), || async {
            self.rejections().await.contains_key(&job)
        })
        .await;
        self.rejection(job, node).await
    }

    /// How node `node` gave job `job` back: the reason, the seconds it held the job (from
    /// the assignment on chain to the reject's block) and what it was charged for it.
    pub(crate) async fn rejection(&self, job: u64, node: u64) -> Rejection {
        let market = self.market(ADMIN);
        let rejected = of_job(market.JobRejected_filter(), job).await;
        let (event, log) = rejected
            .iter()
            .rev()
            .find(|(event, _)| event.nodeId == node)
            .unwrap_or_else(|| panic!("node {node} never rejected job {job}"));
        let rejected_at = self.block_time(log).await;
        let assigned = of_job(market.JobAssigned_filter(), job).await;
        let (assignment, _) = assigned
            .iter()
            .rev()
            .find(|(event, assigned)| {
                event.nodeId == node && assigned.block_number <= log.block_number
            })
            .expect("the assignment before the reject");
        let max_runtime = u64::from(self.job(job).await.terms.requirements.max_runtime);
        let assigned_at = assignment.until.to::<u64>() - max_runtime;
        let charge = self
            .slashes(node)
            .await
            .iter()
            .filter(|slash| slash.jobId == job)
            .map(|slash| slash.amount.to::<u64>())
            .sum();
        Rejection {
            reason: event.reason.clone(),
            held_secs: rejected_at - assigned_at,
            max_runtime,
            charge,
        }
    }

    /// The files of the result submitted for job `job` (its last `ResultSubmitted`), by
    /// path in the tar.
    pub(crate) async fn result_files(&self, job: u64) -> BTreeMap<String, Vec<u8>> {
        let event = self.submitted_result(job).await;
        let tar = self.download(&event.resultURI).await;
        assert_eq!(
            event.resultHash.0,
            <[u8; 32]>::from(<sha2::Sha256 as sha2::Digest>::digest(&tar)),
            "the result hash on chain is the SHA-256 of the uploaded tar"
        );
        tar_files(&tar)
    }

    /// The failure report in job `job`'s submitted result, if it failed by itself.
    pub(crate) async fn failure_report(&self, job: u64) -> Option<serde_json::Value> {
        let files = self.result_files(job).await;
        let report = files.get(gantry_worker::job::FAILURE_FILE)?;
        Some(serde_json::from_slice(report).expect("the failure report is JSON"))
    }

    /// Names of every container on the engine, running or not.
    pub(crate) async fn containers(&self) -> Vec<String> {
        self.docker()
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

    /// Waits until no container is left on the engine, looking again on each of its
    /// events.
    pub(crate) async fn wait_for_no_containers(&self) {
        let waited = async {
            let mut events = self
                .docker()
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

    /// Puts `bytes` into the chain's inputs bucket (the one bucket besides results that
    /// `nats://` inputs may name); returns the `nats://` URI.
    pub(crate) async fn put_input(&self, name: &str, bytes: &[u8]) -> String {
        let js = self.jetstream().await;
        let bucket = names::inputs_bucket(self.chain_id());
        let store = match js.get_object_store(&bucket).await {
            Ok(store) => store,
            Err(_) => js
                .create_object_store(jetstream::object_store::Config {
                    bucket: bucket.clone(),
                    ..Default::default()
                })
                .await
                .unwrap(),
        };
        store.put(name, &mut &bytes[..]).await.unwrap();
        format!("nats://{bucket}/{name}")
    }

    /// Verified job `job`'s agreed outcome (its tar), once a paid seat uploaded it under
    /// its own id after the decision.
    pub(crate) async fn verified_result(&self, job: u64) -> Vec<u8> {
        let bucket = names::results_bucket(self.chain_id());
        let key = names::verified_result_key(job);
        let paid = || async {
            gantry_runtime::market::read_paid_replicas(
                &self.devnet.admin,
                self.devnet.deployment.market,
                self.devnet.deployment.start_block,
                job,
            )
            .await
            .unwrap()
        };
        let found = std::sync::Mutex::new(None);
        self.wait_until("the verified result uploaded", || async {
            for node in paid().await {
                if let Some(tar) = self.scoped_object(&bucket, node, &key).await {
                    *found.lock().unwrap() = Some(tar);
                    return true;
                }
            }
            false
        })
        .await;
        found.into_inner().unwrap().expect("the verified result")
    }

    /// Node `node`'s checkpoint of `job`, whole and checked against its metadata.
    pub(crate) async fn checkpoint_of(&self, node: u64, job: u64) -> Option<Vec<u8>> {
        let bucket = names::checkpoints_bucket(self.chain_id());
        self.scoped_object(&bucket, node, &job.to_string()).await
    }

    /// Node `node`'s object `key` of the node-scoped `bucket`, whole and checked against
    /// its metadata.
    pub(crate) async fn scoped_object(
        &self,
        bucket: &str,
        node: u64,
        key: &str,
    ) -> Option<Vec<u8>> {
        let js = self.jetstream().await;
        let object = gantry_runtime::objects::get(&js, bucket, node, key)
            .await
            .unwrap()?;
        let chunks: Vec<_> = object.bytes(u64::MAX).collect().await;
        Some(
            chunks
                .into_iter()
                .map(|chunk| chunk.expect("the checkpoint's bytes"))
                .flat_map(|chunk| chunk.to_vec())
                .collect(),
        )
    }

    /// Downloads a `nats://bucket/key` object (`nats://bucket/node/key` in a node-scoped
    /// bucket).
    pub(crate) async fn download(&self, uri: &str) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let (bucket, key) = uri
            .strip_prefix("nats://")
            .and_then(|rest| rest.split_once('/'))
            .expect("a nats:// URI");
        if names::is_node_scoped(bucket) {
            let (node, key) = key.split_once('/').expect("nats://<bucket>/<node>/<key>");
            return self
                .scoped_object(bucket, node.parse().expect("a node id"), key)
                .await
                .unwrap_or_else(|| panic!("{uri} is there"));
        }
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

/// A job given back by a node (see [`Net::rejection`]).
#[derive(Debug)]
pub(crate) struct Rejection {
    pub(crate) reason: String,
    /// From the assignment on chain to the reject's block.
    pub(crate) held_secs: u64,
    pub(crate) max_runtime: u64,
    /// Base units taken from the node's stake for it.
    pub(crate) charge: u64,
}

impl Rejection {
    /// Asserts the job was given back within `secs` of its assignment, for nothing within
    /// the market's grace (`REJECT_GRACE`, at most a tenth of the runtime) and at most the
    /// share of one full slash that the time held is of the job's runtime after it: a
    /// small fraction of what a reclaim would have cost.
    pub(crate) fn assert_at_once(&self, secs: u64) {
        assert!(
            self.held_secs <= secs,
            "given back {} s after the assignment, not at once: {self:?}",
            self.held_secs
        );
        if self.held_secs <= (self.max_runtime / 10).min(30) {
            assert_eq!(self.charge, 0, "free within the grace: {self:?}");
        }
        assert!(
            self.charge <= FULL_SLASH * self.held_secs / self.max_runtime + 1,
            "charged more than its time held: {self:?}"
        );
        assert!(
            self.charge < FULL_SLASH / 5,
            "a reject at once costs a fraction of a slash: {self:?}"
        );
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
    /// The port of its Prometheus listener (on 127.0.0.1).
    pub(crate) fn metrics_port(&self) -> u16 {
        self.metrics.port()
    }

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

    /// SIGSTOP: the process is frozen where it is (no heartbeat, nothing sent) until
    /// [`Self::resume`].
    pub(crate) fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT after [`Self::pause`].
    pub(crate) fn resume(&self) {
        self.signal("-CONT");
    }

    /// The text `/readyz` answers, with whether it is ready (200).
    pub(crate) async fn readyz(&self) -> Option<(bool, String)> {
        let response = reqwest::get(format!("http://{}/readyz", self.metrics))
            .await
            .ok()?;
        let ready = response.status().is_success();
        Some((ready, response.text().await.ok()?))
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// SIGKILL: no clean-up of its own.
    pub(crate) fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    /// SIGTERM, and waits for a clean exit.
    pub(crate) fn stop(self) -> std::process::ExitStatus {
        self.terminate();
        self.wait()
    }

    /// SIGTERM: the worker starts draining (see [`Self::wait`]).
    pub(crate) fn terminate(&self) {
        let pid = self.child.id().to_string();
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
    }

    /// Waits for the process to exit.
    pub(crate) fn wait(mut self) -> std::process::ExitStatus {
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
        // A job's disk: 16 MiB of result, 16 of checkpoint and 8 of scratch.
        "max_output_bytes = 16777216",
        "scratch_bytes = 8388608",
        "max_log_bytes = 1048576",
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

/// A node an operator registers for a worker's key: one core, 1 GiB, 1 gUSD per GPU-hour,
/// one job at a time (less than the test machine has).
pub(crate) fn small_node() -> NodeRegistry::NodeCapabilities {
    NodeRegistry::NodeCapabilities {
        gpuModel: B256::ZERO,
        gpuCount: 0,
        vramMiB: 0,
        cpuCores: 1,
        ramMiB: 1024,
        pricePerGpuHour: U96::from(GUSD),
        maxConcurrentJobs: 1,
        engines: gantry_protocol::eligibility::Engines::ALL.0,
    }
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
        engine: gantry_protocol::spec::Engine::Docker.code(),
    }
}

/// A WASM job: [`cpu_job`] on the WASM engine.
pub(crate) fn wasm_job(ram_mib: u32) -> JobMarket::JobRequirements {
    JobMarket::JobRequirements {
        engine: gantry_protocol::spec::Engine::Wasm.code(),
        ..cpu_job(ram_mib)
    }
}

/// A spec running `script` with the busybox shell in the test image.
pub(crate) fn shell(script: &str, timeout_secs: u64) -> JobSpec {
    JobSpec {
        encryption: None,
        version: 1,
        kind: Default::default(),
        image: IMAGE.into(),
        command: vec!["/bin/sh".into(), "-c".into(), script.into()],
        env: Default::default(),
        inputs: vec![],
        outputs: Default::default(),
        resources: Default::default(),
        timeout_secs,
        engine: gantry_protocol::spec::Engine::Docker,
        wasm: None,
    }
}

/// The files of a result tar, by path.
pub(crate) fn tar_files(tar: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(tar).entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.header().entry_type().is_file() {
            let name = entry.path().unwrap().display().to_string();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            files.insert(name, bytes);
        }
    }
    files
}

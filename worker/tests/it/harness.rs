//! The whole network a worker lives in, the kit's `TestNet`: anvil, nats-server, a
//! private dockerd with the test image, an indexer, a matcher ([`SECOND_MATCHER`]) and a
//! liveness keeper ([`KEEPER`]) in this process, with `gantry-worker` processes on top.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use alloy::primitives::{Address, B256, U256, aliases::U96};
use async_nats::jetstream;
use bollard::query_parameters::ListContainersOptions;
use futures::StreamExt;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::names;
use gantry_protocol::spec::JobSpec;
use gantry_testkit::accounts::{ADMIN, KEEPER, SECOND_MATCHER, SUBMITTER};
use gantry_testkit::{DeployParams, GUSD, JobPost, PATIENCE, TestNet};

pub(crate) const IMAGE: &str = "gantry-test/busybox:1";

pub(crate) struct Net(TestNet);

impl Deref for Net {
    type Target = TestNet;

    fn deref(&self) -> &TestNet {
        &self.0
    }
}

impl DerefMut for Net {
    fn deref_mut(&mut self) -> &mut TestNet {
        &mut self.0
    }
}

/// Which services [`Net::start_with`] runs beside the chain, NATS, Docker and the keeper.
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
            .matcher_role(SECOND_MATCHER)
            .keeper(KEEPER);
        net = match services.indexer {
            true => net.indexer(),
            false => net.indexer_later(),
        };
        if services.matcher {
            net = net.matcher(SECOND_MATCHER);
        }
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
        let submitted = self
            .market(ADMIN)
            .ResultSubmitted_filter()
            .topic1(U256::from(job))
            .from_block(0)
            .query()
            .await
            .unwrap();
        let (event, _) = submitted.last().expect("ResultSubmitted");
        event.clone()
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

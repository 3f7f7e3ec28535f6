//! The whole local network as a library: what `gantry-devnet up` (`make dev`) runs, and
//! what the end-to-end tests start. Anvil with the contracts and every account funded,
//! nats-server (JetStream), a Docker engine (the host's, else a private dockerd) with the
//! demo image built, the demo dataset over HTTP, then the services as processes:
//! gantry-indexer, gantry-matcher, gantry-liveness, gantry-api and the workers, each of
//! the first three once or as replicas (a standby indexer, a second matcher and keeper).
//! Each process logs to `<run dir>/logs/<label>.log`; a service can be killed, stopped,
//! continued and started again by its label (the chaos suite does), appending to its log.
//!
//! ```text
//!   Network::start ──▶ anvil + contracts ─┐
//!                      nats-server ───────┼──▶ indexer, matcher (MATCHER), liveness (KEEPER),
//!                      docker + demo image┘    [replicas: indexer-2, matcher-2 (SECOND_MATCHER),
//!                                              liveness-2 (OTHER)], api (SQLite), workers (NODES)
//!   Network::stop  ──▶ SIGTERM to each service, SIGKILL after 10 s; anvil, NATS, dockerd
//!                      stop when dropped
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use alloy::node_bindings::Anvil;
use alloy::primitives::U256;
use anyhow::Context;
use bollard::{API_DEFAULT_VERSION, Docker};
use gantry_testkit::accounts::{KEEPER, MATCHER, NODES, OTHER, SECOND_MATCHER};
use gantry_testkit::{DeployParams, Devnet, Dockerd, NatsServer, Tools, free_port, worker_config};

use crate::demo::{self, DatasetServer};

/// The host's Docker engine, used when it answers; else a private dockerd.
pub const HOST_DOCKER_SOCKET: &str = "/var/run/docker.sock";
/// How long the services get between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Where the network listens and what it runs.
#[derive(Debug, Clone)]
pub struct NetworkConfig {
    /// Anvil's JSON-RPC port; 0 picks a free one.
    pub anvil_port: u16,
    /// Time between blocks; zero mines a block per transaction.
    pub block_time: Duration,
    /// NATS port; 0 picks a free one.
    pub nats_port: u16,
    /// The API's port; 0 picks a free one.
    pub api_port: u16,
    /// Metrics ports of the indexer, matcher, liveness and first worker (the next workers
    /// take the next ports); `None`: free ones.
    pub metrics_base: Option<u16>,
    /// Workers to start, 0 to 4; worker `i`'s agent is anvil account `NODES[i]`. With none,
    /// no Docker engine is started (the scale bench simulates its nodes).
    pub workers: usize,
    /// Indexers, matchers and keepers each, 1 or 2: the second indexer is a standby, the
    /// second matcher signs as `SECOND_MATCHER` (granted the role), the second keeper as
    /// `OTHER`. Replicas take free metrics ports.
    pub replicas: usize,
    /// Jobs each worker runs at once.
    pub jobs_per_worker: u32,
    /// A job's output limit and its scratch room, bytes each: every job slot's disk space
    /// (output, checkpoint and scratch) is three times this, reserved while its worker runs.
    pub job_disk_bytes: u64,
    /// The market's challenge window, seconds (the dev default: 30).
    pub challenge_window: u32,
    /// The registry's heartbeat timeout, seconds (the dev default: 60); workers beat six
    /// times per timeout.
    pub heartbeat_timeout: u32,
    /// Where logs, configs, the API's database and the deployment go.
    pub run_dir: PathBuf,
    /// Where the service binaries are (`target/<profile>`).
    pub bin_dir: PathBuf,
    /// The matchers' and keepers' `--snapshot-every`; `None`: their default.
    pub snapshot_every: Option<u64>,
    /// Anvil's block gas limit; `None`: anvil's default (30M).
    pub gas_limit: Option<u64>,
}

impl NetworkConfig {
    /// `make dev`'s: anvil on 8545 (a block a second), NATS on 4222, the API on 8080,
    /// metrics on 9101–9104, one worker, `.devnet/`, binaries beside the running one.
    pub fn dev() -> anyhow::Result<Self> {
        Ok(Self {
            anvil_port: 8545,
            block_time: Duration::from_secs(1),
            nats_port: 4222,
            api_port: 8080,
            metrics_base: Some(9101),
            workers: 1,
            replicas: 1,
            jobs_per_worker: 2,
            job_disk_bytes: 256 << 20,
            snapshot_every: None,
            gas_limit: None,
            challenge_window: 30,
            heartbeat_timeout: 60,
            run_dir: PathBuf::from(".devnet"),
            bin_dir: bin_dir()?,
        })
    }

    /// For tests: free ports everywhere, a block per transaction, `workers` workers, the
    /// run directory `run_dir`.
    pub fn ephemeral(run_dir: &Path, workers: usize) -> anyhow::Result<Self> {
        Ok(Self {
            anvil_port: 0,
            block_time: Duration::ZERO,
            nats_port: 0,
            api_port: 0,
            metrics_base: None,
            workers,
            replicas: 1,
            jobs_per_worker: 2,
            job_disk_bytes: 256 << 20,
            snapshot_every: None,
            gas_limit: None,
            challenge_window: 30,
            heartbeat_timeout: 60,
            run_dir: run_dir.to_owned(),
            bin_dir: bin_dir()?,
        })
    }
}

/// The directory of the service binaries: the running executable's, or its parent for a
/// test binary (`target/<profile>/deps`).
pub fn bin_dir() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe.parent().context("the executable has no directory")?;
    Ok(if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir).to_owned()
    } else {
        dir.to_owned()
    })
}

/// A running network; every process stops when it drops (see [`Network::stop`] for the
/// graceful way).
#[derive(Debug)]
pub struct Network {
    // Declared before the engine: the services (workers) stop before a private dockerd.
    services: Vec<Service>,
    pub devnet: Devnet,
    pub nats: NatsServer,
    pub dataset: DatasetServer,
    /// `None` when the network runs no worker.
    engine: Option<Engine>,
    pub run_dir: PathBuf,
    /// The API's base URL, e.g. `http://127.0.0.1:8080`.
    pub api_url: String,
    /// The worker configs, in worker order.
    pub worker_configs: Vec<PathBuf>,
    config: NetworkConfig,
}

impl Network {
    /// Starts everything and returns once every service runs and the API answers.
    pub async fn start(config: NetworkConfig) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (0..=NODES.len()).contains(&config.workers),
            "0 to {} workers",
            NODES.len()
        );
        anyhow::ensure!((1..=2).contains(&config.replicas), "1 or 2 replicas");
        for name in [
            "gantry-indexer",
            "gantry-matcher",
            "gantry-liveness",
            "gantry-worker",
            "gantry-api",
        ] {
            let binary = config.bin_dir.join(name);
            anyhow::ensure!(
                binary.exists(),
                "{} is not built: `cargo build --workspace` (make dev and make test do it)",
                binary.display()
            );
        }
        let run_dir = std::path::absolute(&config.run_dir)?;
        std::fs::create_dir_all(run_dir.join("logs"))?;
        // The engine (dockerd start-up, image build) gets ready while the chain deploys.
        let engine = async {
            match config.workers {
                0 => Ok(None),
                _ => Engine::start().await.map(Some),
            }
        };
        let (devnet, engine) = tokio::try_join!(start_chain(&config), engine)?;
        std::fs::write(
            run_dir.join("deployment.json"),
            serde_json::to_string_pretty(&devnet.deployment)? + "\n",
        )?;
        let nats = if config.nats_port == 0 {
            NatsServer::start()
        } else {
            NatsServer::start_on(config.nats_port)
        }
        .with_context(|| format!("starting nats-server (port {})", config.nats_port))?;
        let dataset = DatasetServer::start()
            .await
            .context("serving the demo dataset")?;
        let api_port = match config.api_port {
            0 => free_port()?,
            port => port,
        };
        let metrics = |index: u16| -> anyhow::Result<u16> {
            Ok(match config.metrics_base {
                Some(base) => base + index,
                None => free_port()?,
            })
        };
        let mut network = Self {
            services: Vec::new(),
            devnet,
            nats,
            dataset,
            engine,
            run_dir,
            api_url: format!("http://127.0.0.1:{api_port}"),
            worker_configs: Vec::new(),
            config: config.clone(),
        };
        for (index, (name, signer)) in [
            ("gantry-indexer", None),
            ("gantry-matcher", Some(MATCHER)),
            ("gantry-liveness", Some(KEEPER)),
        ]
        .into_iter()
        .enumerate()
        {
            let service = network.spawn_service(name, name, metrics(index as u16)?, signer)?;
            network.services.push(service);
        }
        if config.replicas == 2 {
            let second = network.devnet.address(SECOND_MATCHER);
            network
                .devnet
                .grant_matcher_role(second)
                .await
                .context("granting the second matcher its role")?;
            for (name, signer) in [
                ("gantry-indexer", None),
                ("gantry-matcher", Some(SECOND_MATCHER)),
                ("gantry-liveness", Some(OTHER)),
            ] {
                let label = format!("{name}-2");
                let service = network.spawn_service(name, &label, free_port()?, signer)?;
                network.services.push(service);
            }
        }
        let api = network.spawn_api(api_port)?;
        network.services.push(api);
        for worker in 0..config.workers {
            let port = metrics(3 + worker as u16)?;
            let service = network.spawn_worker(worker, port)?;
            network.services.push(service);
        }
        network.api_ready().await?;
        Ok(network)
    }

    /// What runs where, for people.
    pub fn summary(&self) -> String {
        let d = &self.devnet.deployment;
        let mut lines = vec![
            "gantry dev network is up".to_owned(),
            format!("  rpc              {}", self.devnet.anvil.endpoint()),
            format!("  chain id         {}", d.chain_id),
            format!("  GantryTestToken  {}", d.token),
            format!(
                "  JobMarket        {} (its node calls too: NodeRegistry is served there)",
                d.market
            ),
            format!(
                "  admin/matcher/arbiter/pauser  {}",
                self.devnet.anvil.addresses()[0]
            ),
            "  each of anvil's 10 accounts holds 1,000,000 gUSD".to_owned(),
            format!(
                "  nats             {} (stream {})",
                self.nats.url(),
                gantry_protocol::names::stream_name(d.chain_id)
            ),
            format!(
                "  docker engine    {}",
                self.engine
                    .as_ref()
                    .map_or("none (no workers)".to_owned(), Engine::describe)
            ),
            format!("  demo image       {}", demo::DEMO_IMAGE),
            format!("  demo dataset     {}", self.dataset.url()),
        ];
        for service in &self.services {
            lines.push(format!(
                "  {:<16} pid {}, metrics on http://127.0.0.1:{}/metrics",
                service.label,
                service.child.id().unwrap_or_default(),
                service.metrics_port
            ));
        }
        lines.push(format!(
            "  run directory    {} (logs/, deployment.json, api.db, worker-N/)",
            self.run_dir.display()
        ));
        lines.push(format!(
            "  web app          {}/  (the dashboard; #/submit posts a job, #/operate runs a \
             node; API under /v1, /openapi.json)",
            self.api_url
        ));
        let account = gantry_testkit::accounts::SUBMITTER;
        lines.push(format!(
            "  to try it        add the network (RPC {}, chain id {}) to your wallet and import \
             the dev account {} (private key {}: a well-known anvil key, never for real money)",
            self.devnet.anvil.endpoint(),
            d.chain_id,
            self.devnet.address(account),
            self.devnet.private_key(account)
        ));
        lines.join("\n")
    }

    /// Waits until one of the services exits and says which and how.
    pub async fn first_exit(&mut self) -> String {
        let waits = self.services.iter_mut().map(|service| {
            Box::pin(async move {
                match service.child.wait().await {
                    Ok(status) => format!("{} exited: {status}", service.label),
                    Err(e) => format!("{}: {e}", service.label),
                }
            })
        });
        futures::future::select_all(waits).await.0
    }

    /// Kills worker `index` (0-based) with SIGKILL, as a crash would; its reaper then
    /// removes its containers.
    pub async fn kill_worker(&mut self, index: usize) -> anyhow::Result<()> {
        self.kill(&worker_label(index)).await
    }

    /// The labels of the services, in start order (e.g. `gantry-indexer-2`,
    /// `gantry-worker-1`).
    pub fn labels(&self) -> Vec<String> {
        self.services.iter().map(|s| s.label.clone()).collect()
    }

    /// SIGKILLs service `label`, as a crash would, and reaps it (a killed worker's reaper
    /// then unmounts its jobs' spaces and removes its containers).
    pub async fn kill(&mut self, label: &str) -> anyhow::Result<()> {
        let service = self.service(label)?;
        service.child.kill().await?;
        Ok(())
    }

    /// Starts service `label` again as it was first started (same arguments, the same
    /// database, config and work folder), if it is not running; its log goes on.
    pub fn restart(&mut self, label: &str) -> anyhow::Result<()> {
        let log = self.log(label);
        let service = self.service(label)?;
        if service.child.try_wait()?.is_none() {
            return Ok(());
        }
        service.child = service.spawn.start(&log, true)?;
        Ok(())
    }

    /// Sends `signal` (e.g. `STOP`, `CONT`) to service `label`.
    pub async fn signal(&mut self, label: &str, signal: &str) -> anyhow::Result<()> {
        let service = self.service(label)?;
        let pid = service
            .child
            .id()
            .with_context(|| format!("{label} is not running"))?;
        let status = tokio::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(pid.to_string())
            .status()
            .await?;
        anyhow::ensure!(status.success(), "kill -{signal} {pid} ({label}): {status}");
        Ok(())
    }

    /// SIGTERM to service `label` (it shuts down gracefully), SIGKILL if it still runs
    /// after 10 s; waits for it to exit.
    pub async fn terminate(&mut self, label: &str) -> anyhow::Result<()> {
        let service = self.service(label)?;
        if let Some(pid) = service.child.id() {
            tokio::process::Command::new("kill")
                .arg(pid.to_string())
                .status()
                .await?;
        }
        if tokio::time::timeout(STOP_GRACE, service.child.wait())
            .await
            .is_err()
        {
            tracing::warn!(service = label, "still running after SIGTERM; killed");
            service.child.kill().await?;
        }
        Ok(())
    }

    fn service(&mut self, label: &str) -> anyhow::Result<&mut Service> {
        self.services
            .iter_mut()
            .find(|s| s.label == label)
            .with_context(|| format!("no service {label}"))
    }

    /// Where the service binaries (and `gantry`) are.
    pub fn bin_dir(&self) -> &Path {
        &self.config.bin_dir
    }

    /// The Docker engine's socket the workers use; `None` when the network runs no worker.
    pub fn docker_socket(&self) -> Option<&Path> {
        self.engine.as_ref().map(|engine| engine.socket.as_path())
    }

    /// Each service's label and metrics endpoint (`http://127.0.0.1:<port>/metrics`).
    pub fn metrics_endpoints(&self) -> Vec<(String, String)> {
        self.services
            .iter()
            .map(|s| {
                (
                    s.label.clone(),
                    format!("http://127.0.0.1:{}/metrics", s.metrics_port),
                )
            })
            .collect()
    }

    /// The process id of every process of the network (anvil, nats-server and each
    /// service by its label) that runs, for CPU accounting in benchmarks.
    pub fn pids(&self) -> Vec<(String, u32)> {
        let mut pids = vec![
            ("anvil".to_owned(), self.devnet.anvil.child().id()),
            ("nats-server".to_owned(), self.nats.pid()),
        ];
        pids.extend(
            self.services
                .iter()
                .filter_map(|s| Some((s.label.clone(), s.child.id()?))),
        );
        pids
    }

    /// The log file of a service, e.g. `gantry-worker-1`.
    pub fn log(&self, label: &str) -> PathBuf {
        self.run_dir.join("logs").join(format!("{label}.log"))
    }

    /// SIGTERM to every service (each shuts down gracefully: a worker gives back its jobs
    /// and removes its containers), then SIGKILL to those still running after 10 s; then
    /// anvil, NATS and a private dockerd stop.
    pub async fn stop(mut self) {
        for service in &self.services {
            if let Some(pid) = service.child.id() {
                let _ = tokio::process::Command::new("kill")
                    .arg(pid.to_string())
                    .status()
                    .await;
            }
        }
        let deadline = tokio::time::Instant::now() + STOP_GRACE;
        for service in &mut self.services {
            if tokio::time::timeout_at(deadline, service.child.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    service = service.label,
                    "still running after SIGTERM; killed"
                );
                let _ = service.child.kill().await;
            }
        }
    }

    /// Waits until the API answers `/healthz` (it starts in well under a second).
    async fn api_ready(&mut self) -> anyhow::Result<()> {
        let http = reqwest::Client::new();
        let url = format!("{}/healthz", self.api_url);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if http
                .get(&url)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(());
            }
            for service in &mut self.services {
                if let Some(status) = service.child.try_wait()? {
                    anyhow::bail!(
                        "{} exited during start-up ({status}); see {}",
                        service.label,
                        self.run_dir
                            .join("logs")
                            .join(format!("{}.log", service.label))
                            .display()
                    );
                }
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "the API did not answer {url} within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts `spawn` as service `label`, logging to `logs/<label>.log` (a new log).
    fn start_service(
        &self,
        label: &str,
        metrics_port: u16,
        spawn: Spawn,
    ) -> anyhow::Result<Service> {
        let child = spawn
            .start(&self.log(label), false)
            .with_context(|| format!("starting {label}"))?;
        Ok(Service {
            label: label.to_owned(),
            metrics_port,
            spawn,
            child,
        })
    }

    /// Starts a chain service with the dev chain's contracts, NATS, its metrics address,
    /// and (for those that send transactions) the private key of anvil account `signer`.
    fn spawn_service(
        &self,
        name: &'static str,
        label: &str,
        metrics_port: u16,
        signer: Option<usize>,
    ) -> anyhow::Result<Service> {
        let d = &self.devnet.deployment;
        let mut spawn = Spawn::new(self.config.bin_dir.join(name))
            .args(["--rpc-url", self.devnet.anvil.endpoint_url().as_str()])
            .args(["--chain-id", &d.chain_id.to_string()])
            .args(["--market", &d.market.to_string()])
            .args(["--registry", &d.registry.to_string()])
            .args(["--nats-url", &self.nats.url()])
            .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")]);
        if name == "gantry-indexer" {
            let poll = indexer_poll(self.config.block_time);
            spawn = spawn
                .args(["--start-block", &d.start_block.to_string()])
                .args(["--poll-ms", &poll.as_millis().to_string()]);
        }
        if let (Some(every), "gantry-matcher" | "gantry-liveness") =
            (self.config.snapshot_every, name)
        {
            spawn = spawn.args(["--snapshot-every", &every.to_string()]);
        }
        if let Some(account) = signer {
            spawn = spawn.env("GANTRY_PRIVATE_KEY", self.devnet.private_key(account));
        }
        self.start_service(label, metrics_port, spawn)
    }

    /// Starts `gantry-api` on `port`, projecting into a fresh SQLite file (the chain is new
    /// on every start, so is its projection); its metrics are on the same port.
    fn spawn_api(&self, port: u16) -> anyhow::Result<Service> {
        let name = "gantry-api";
        let database = self.run_dir.join("api.db");
        for suffix in ["", "-wal", "-shm"] {
            let mut path = database.clone().into_os_string();
            path.push(suffix);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("removing {}", database.display()));
                }
                _ => {}
            }
        }
        let spawn = Spawn::new(self.config.bin_dir.join(name))
            .args(["--chain-id", &self.devnet.deployment.chain_id.to_string()])
            .args(["--nats-url", &self.nats.url()])
            .args([
                "--database-url",
                &format!("sqlite://{}", database.display()),
            ])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--market", &self.devnet.deployment.market.to_string()])
            .args(["--token", &self.devnet.deployment.token.to_string()])
            .args([
                "--start-block",
                &self.devnet.deployment.start_block.to_string(),
            ])
            .args(["--public-rpc-url", &self.devnet.anvil.endpoint()])
            .args(["--public-nats-url", &self.nats.url()]);
        self.start_service(name, port, spawn)
    }

    /// Starts worker `index` with its config file, as the agent of its anvil account; it
    /// registers and stakes its node itself.
    fn spawn_worker(&mut self, index: usize, metrics_port: u16) -> anyhow::Result<Service> {
        let label = worker_label(index);
        let config = self
            .write_worker_config(
                &self.run_dir.join(format!("worker-{}", index + 1)),
                metrics_port,
            )
            .with_context(|| format!("writing the config of {label}"))?;
        let spawn = Spawn::new(self.config.bin_dir.join("gantry-worker"))
            .args([OsString::from("--config"), config.clone().into_os_string()])
            .env("GANTRY_AGENT_KEY", self.devnet.private_key(NODES[index]));
        let service = self.start_service(&label, metrics_port, spawn)?;
        self.worker_configs.push(config);
        Ok(service)
    }

    /// Writes a worker's config file into `dir` (its cache and work folders beside it)
    /// and returns its path. The work folder starts empty: the chain, and so every job
    /// id, is new.
    fn write_worker_config(&self, dir: &Path, metrics_port: u16) -> anyhow::Result<PathBuf> {
        // The worker empties its work directory itself on start, unmounting the disk
        // spaces of jobs a killed worker left there first.
        std::fs::create_dir_all(dir)?;
        let socket = self
            .docker_socket()
            .context("a worker needs a Docker engine")?;
        let config = format!(
            r#"# Written by the dev network for this worker; rewritten on every start.
{connections}metrics_addr = "127.0.0.1:{metrics_port}"

[node]
price_per_gpu_hour = "1000000"

[jobs]
max_concurrent = {max_concurrent}
heartbeat_interval = "{heartbeat}s"
progress_report_interval = "1s"
checkpoint_interval = "2s"
# A job's disk: its result, a checkpoint and scratch room (reserved per job slot).
max_output_bytes = {disk}
scratch_bytes = {disk}
"#,
            connections = worker_config(&self.devnet, &self.nats.url(), socket, dir),
            heartbeat = (self.config.heartbeat_timeout / 6).max(1),
            max_concurrent = self.config.jobs_per_worker,
            disk = self.config.job_disk_bytes,
        );
        let path = dir.join("worker.toml");
        std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

fn worker_label(index: usize) -> String {
    format!("gantry-worker-{}", index + 1)
}

/// How often the indexer asks this network's anvil for a new head once caught up: twice a
/// block (a block's events reach the services half a block after it, on average, at most),
/// between 50 and 500 ms (the indexer's default, for a remote RPC node); 50 ms when a block
/// is mined per transaction. Anvil is on this machine: a poll is one cheap request.
fn indexer_poll(block_time: Duration) -> Duration {
    match block_time.is_zero() {
        true => Duration::from_millis(50),
        false => (block_time / 2).clamp(Duration::from_millis(50), Duration::from_millis(500)),
    }
}

/// Starts anvil, deploys the market with the configured windows and gives each of
/// anvil's accounts 1,000,000 gUSD (a worker's agent stakes the registry's minimum from
/// it).
async fn start_chain(config: &NetworkConfig) -> anyhow::Result<Devnet> {
    let (port, block_time) = (config.anvil_port, config.block_time);
    let mut anvil = Anvil::at(Tools::locate().anvil()?);
    if port != 0 {
        anvil = anvil.port(port);
    }
    if !block_time.is_zero() {
        anvil = anvil.block_time_f64(block_time.as_secs_f64());
    }
    if let Some(gas_limit) = config.gas_limit {
        anvil = anvil.args(["--gas-limit".to_owned(), gas_limit.to_string()]);
    }
    let anvil = anvil
        .try_spawn()
        .with_context(|| format!("starting anvil (port {port})"))?;
    let devnet = Devnet::deploy_on(anvil, |mut params: DeployParams| {
        params.market.challengeWindow = config.challenge_window;
        params.market.heartbeatTimeout = config.heartbeat_timeout;
        params
    })
    .await
    .context("deploying the market")?;
    let million = U256::from(1_000_000_000_000u64);
    for account in devnet.anvil.addresses() {
        devnet
            .mint(*account, million)
            .await
            .context("funding dev accounts")?;
    }
    Ok(devnet)
}

/// A service process; killed on drop.
#[derive(Debug)]
struct Service {
    label: String,
    metrics_port: u16,
    /// How it was started, to start it again.
    spawn: Spawn,
    child: tokio::process::Child,
}

/// A service's program, arguments and environment (beside `RUST_LOG`).
#[derive(Debug, Clone)]
struct Spawn {
    program: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(String, String)>,
}

impl Spawn {
    fn new(program: PathBuf) -> Self {
        Self {
            program,
            args: Vec::new(),
            envs: Vec::new(),
        }
    }

    fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    fn env(mut self, name: &str, value: String) -> Self {
        self.envs.push((name.to_owned(), value));
        self
    }

    /// Starts the process, its stdout and stderr into `log`: a new file, or appended to
    /// when `append` (a restart).
    fn start(&self, log: &Path, append: bool) -> anyhow::Result<tokio::process::Child> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let mut command = tokio::process::Command::new(&self.program);
        command
            .args(&self.args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .kill_on_drop(true);
        command
            .spawn()
            .with_context(|| format!("starting {}", self.program.display()))
    }
}

/// The Docker engine the workers run jobs on, with the demo image built.
#[derive(Debug)]
struct Engine {
    socket: PathBuf,
    /// The private dockerd, when the host has no engine; stopped on drop.
    private: Option<Dockerd>,
}

impl Engine {
    /// The host's engine if it answers a ping, else a private dockerd.
    async fn start() -> anyhow::Result<Self> {
        let host_socket = Path::new(HOST_DOCKER_SOCKET);
        let (engine, docker) = match connect(host_socket).await {
            Ok(docker) => {
                let engine = Self {
                    socket: host_socket.to_owned(),
                    private: None,
                };
                (engine, docker)
            }
            Err(e) => {
                tracing::info!(
                    error = format!("{e:#}"),
                    "no docker engine on {HOST_DOCKER_SOCKET}; starting a private dockerd"
                );
                let dockerd = tokio::task::spawn_blocking(Dockerd::start)
                    .await?
                    .context("starting a private dockerd")?;
                let docker = dockerd.client().await?;
                let engine = Self {
                    socket: dockerd.socket().to_owned(),
                    private: Some(dockerd),
                };
                (engine, docker)
            }
        };
        demo::build_image(&docker).await?;
        Ok(engine)
    }

    fn describe(&self) -> String {
        match self.private {
            None => format!("{} (the host's)", self.socket.display()),
            Some(_) => format!(
                "{} (a private dockerd, stopped on exit)",
                self.socket.display()
            ),
        }
    }
}

/// A client on the engine at `socket`, once it answers a ping.
async fn connect(socket: &Path) -> anyhow::Result<Docker> {
    let path = socket.to_str().context("the socket path is not UTF-8")?;
    let docker = Docker::connect_with_unix(path, 120, API_DEFAULT_VERSION)?;
    let ping = async {
        let docker = docker.negotiate_version().await?;
        docker.ping().await?;
        anyhow::Ok(docker)
    };
    tokio::time::timeout(Duration::from_secs(5), ping)
        .await
        .context("no answer within 5 s")?
}

/// Transactions in the chain's blocks `blocks` (the benches' count of what a run sent:
/// a block can hold many), 16 blocks asked at once.
pub async fn transactions_in(
    chain: &alloy::providers::DynProvider,
    blocks: std::ops::RangeInclusive<u64>,
) -> anyhow::Result<u64> {
    use alloy::providers::Provider;
    use futures::StreamExt;

    let counts = futures::stream::iter(blocks)
        .map(|number| async move {
            chain
                .get_block_transaction_count_by_number(number.into())
                .await
                .map(Option::unwrap_or_default)
        })
        .buffered(16)
        .collect::<Vec<_>>()
        .await;
    Ok(counts.into_iter().sum::<Result<u64, _>>()?)
}

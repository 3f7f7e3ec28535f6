//! `gantry-devnet`: the local network (`make dev`) and the contract artifacts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use alloy::network::EthereumWallet;
use alloy::node_bindings::Anvil;
use alloy::primitives::{B256, U256, utils::parse_units};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;
use anyhow::Context;
use bollard::{API_DEFAULT_VERSION, Docker};
use clap::{Parser, Subcommand};
use gantry_devnet::{
    DeployParams, Devnet, Dockerd, NatsServer, Tools, check_artifacts, deploy, import_busybox,
    write_artifacts,
};
use url::Url;

/// The host's Docker engine, used when it answers; else `up` starts a private dockerd.
const HOST_DOCKER_SOCKET: &str = "/var/run/docker.sock";
/// The image the dev network's demo jobs run (a busybox userland, imported at start-up).
const DEMO_IMAGE: &str = "gantry/busybox:dev";
/// Anvil account whose key the worker's agent signs with.
const WORKER_AGENT: usize = 1;
const INDEXER_METRICS: u16 = 9101;
const MATCHER_METRICS: u16 = 9102;
const LIVENESS_METRICS: u16 = 9103;
const WORKER_METRICS: u16 = 9104;
/// How long the services get between SIGTERM and SIGKILL when `up` stops.
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once at start-up")]
enum Command {
    /// Starts anvil, deploys the test token, registry and market, funds the dev accounts,
    /// starts nats-server, the indexer, the matcher, the liveness keeper, a worker (on
    /// the host's Docker engine, else a private dockerd, with the demo busybox image) and
    /// the API with its dashboard, prints where everything is and runs until Ctrl-C.
    Up {
        /// Port of anvil's JSON-RPC server.
        #[arg(long, env = "GANTRY_DEVNET_PORT", default_value_t = 8545)]
        port: u16,
        /// Seconds between blocks; 0 mines a block per transaction.
        #[arg(long, env = "GANTRY_DEVNET_BLOCK_TIME", default_value_t = 1)]
        block_time: u64,
        /// Where to write the deployment (addresses, chain id, start block) as JSON.
        #[arg(
            long,
            env = "GANTRY_DEVNET_OUT",
            default_value = ".devnet/deployment.json"
        )]
        out: PathBuf,
        /// Port of the NATS server (JetStream) the indexer publishes to.
        #[arg(long, env = "GANTRY_DEVNET_NATS_PORT", default_value_t = 4222)]
        nats_port: u16,
        /// Port of the API and its dashboard.
        #[arg(long, env = "GANTRY_DEVNET_API_PORT", default_value_t = 8080)]
        api_port: u16,
    },
    /// Deploys to a running chain, signing with `GANTRY_DEPLOYER_KEY`, and prints the addresses.
    Deploy {
        /// JSON-RPC endpoint of the chain.
        #[arg(long, env = "GANTRY_RPC_URL")]
        rpc_url: Url,
        /// Hex private key of the deployer, who becomes admin, matcher, arbiter and pauser.
        #[arg(long, env = "GANTRY_DEPLOYER_KEY", hide_env_values = true)]
        private_key: PrivateKeySigner,
    },
    /// Rebuilds the contracts and rewrites contracts/protocol/artifacts.
    Artifacts,
    /// Fails when contracts/protocol/artifacts differ from a fresh build.
    CheckArtifacts,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    match Cli::parse().command {
        Command::Up {
            port,
            block_time,
            out,
            nats_port,
            api_port,
        } => up(port, block_time, out, nats_port, api_port).await,
        Command::Deploy {
            rpc_url,
            private_key,
        } => {
            let admin = private_key.address();
            let provider = ProviderBuilder::new()
                .wallet(EthereumWallet::from(private_key))
                .connect_http(rpc_url)
                .erased();
            let deployment = deploy(&provider, admin, DeployParams::dev(admin))
                .await
                .context("deploying")?;
            println!("{}", serde_json::to_string_pretty(&deployment)?);
            Ok(())
        }
        Command::Artifacts => {
            for path in write_artifacts(&Tools::locate()).context("writing artifacts")? {
                println!("wrote {}", path.display());
            }
            Ok(())
        }
        Command::CheckArtifacts => {
            check_artifacts(&Tools::locate())?;
            println!("artifacts match a fresh build");
            Ok(())
        }
    }
}

async fn up(
    port: u16,
    block_time: u64,
    out: PathBuf,
    nats_port: u16,
    api_port: u16,
) -> anyhow::Result<()> {
    // Listening from the start, so that a signal during start-up also stops what has started.
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    // The engine (dockerd start-up, image import) gets ready while the blocks are mined.
    let (devnet, engine) = tokio::select! {
        started = async { tokio::try_join!(start_chain(port, block_time), Engine::start()) } => started?,
        signal = &mut shutdown => {
            println!("stopping during start-up");
            return signal.map_err(anyhow::Error::from);
        }
    };
    let admin = devnet.anvil.addresses()[0];

    let run_dir = match out.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&run_dir)?;
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&devnet.deployment)? + "\n",
    )?;

    let d = &devnet.deployment;
    let nats = NatsServer::start_on(nats_port)
        .with_context(|| format!("starting nats-server on port {nats_port}"))?;
    // The admin holds MATCHER; the keeper's calls need no role (account 8 pays for them).
    let mut services = vec![
        spawn_service("gantry-indexer", &devnet, &nats, INDEXER_METRICS, None)?,
        spawn_service("gantry-matcher", &devnet, &nats, MATCHER_METRICS, Some(0))?,
        spawn_service("gantry-liveness", &devnet, &nats, LIVENESS_METRICS, Some(8))?,
    ];
    let worker_config = write_worker_config(&run_dir.join("worker"), &devnet, &nats, &engine)
        .context("writing the worker's config")?;
    services.push(spawn_worker(&worker_config, &devnet)?);
    services.push(spawn_api(&run_dir, &devnet, &nats, api_port)?);

    println!("gantry dev network is up");
    println!("  rpc              {}", devnet.anvil.endpoint());
    println!("  chain id         {}", d.chain_id);
    println!("  GantryTestToken  {}", d.token);
    println!("  NodeRegistry     {}", d.registry);
    println!("  JobMarket        {}", d.market);
    println!("  start block      {}", d.start_block);
    println!("  admin/matcher/arbiter/pauser  {admin}");
    println!("  each of anvil's 10 accounts holds 1,000,000 gUSD");
    println!(
        "  nats             {} (stream {})",
        nats.url(),
        gantry_protocol::subjects::stream_name(d.chain_id)
    );
    println!("  docker engine    {}", engine.describe());
    println!("  demo image       {DEMO_IMAGE}");
    for service in &services {
        println!(
            "  {:<15}  pid {}, metrics on http://127.0.0.1:{}/metrics",
            service.name,
            service.child.id().unwrap_or_default(),
            service.metrics_port
        );
    }
    println!(
        "  worker           node of account {WORKER_AGENT}, config {}",
        worker_config.display()
    );
    println!("  deployment written to {}", out.display());
    println!("  dashboard        http://127.0.0.1:{api_port}/  (API under /v1, /openapi.json)");
    println!("press Ctrl-C to stop");
    let outcome = tokio::select! {
        signal = &mut shutdown => signal.map_err(anyhow::Error::from),
        exited = first_exit(&mut services) => Err(anyhow::anyhow!(exited)),
    };
    println!("stopping");
    stop_services(&mut services).await;
    // Only now, with the worker gone, may a private dockerd stop (when `engine` drops).
    drop(engine);
    outcome
}

/// Starts anvil on `port`, deploys the market and gives each of anvil's accounts
/// 1,000,000 gUSD (the worker's agent stakes the registry's 100 gUSD minimum from it).
async fn start_chain(port: u16, block_time: u64) -> anyhow::Result<Devnet> {
    let mut anvil = Anvil::at(Tools::locate().anvil()?).port(port);
    if block_time > 0 {
        anvil = anvil.block_time(block_time);
    }
    let anvil = anvil
        .try_spawn()
        .with_context(|| format!("starting anvil on port {port}"))?;
    let devnet = Devnet::deploy_on(anvil, |params| params)
        .await
        .context("deploying the market")?;
    let million: U256 = parse_units("1000000", 6)?.into();
    for account in devnet.anvil.addresses() {
        devnet
            .mint(*account, million)
            .await
            .context("funding dev accounts")?;
    }
    Ok(devnet)
}

/// The Docker engine the worker runs jobs on, with the demo image imported.
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
                println!(
                    "no docker engine on {HOST_DOCKER_SOCKET} ({e:#}); starting a private dockerd"
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
        import_busybox(&docker, DEMO_IMAGE)
            .await
            .with_context(|| format!("importing {DEMO_IMAGE}"))?;
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

/// Writes the worker's config file into `dir` (its cache and work folders beside it) and
/// returns the file's path. The work folder starts empty: the chain, and so every job id,
/// is new.
fn write_worker_config(
    dir: &Path,
    devnet: &Devnet,
    nats: &NatsServer,
    engine: &Engine,
) -> anyhow::Result<PathBuf> {
    let dir = std::path::absolute(dir)?;
    let work_dir = dir.join("work");
    if work_dir.exists() {
        std::fs::remove_dir_all(&work_dir)
            .with_context(|| format!("emptying {}", work_dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    let d = &devnet.deployment;
    let config = format!(
        r#"# Written by `gantry-devnet up` for its worker; rewritten on every start.
rpc_url = {rpc_url}
chain_id = {chain_id}
nats_url = {nats_url}
market = "{market}"
registry = "{registry}"
token = "{token}"
docker_socket = {docker_socket}
cache_dir = {cache_dir}
work_dir = {work_dir}
metrics_addr = "127.0.0.1:{WORKER_METRICS}"

[node]
price_per_gpu_hour = "1000000"

[jobs]
max_concurrent = 2
heartbeat_interval = "10s"
progress_report_interval = "1s"
checkpoint_interval = "30s"
"#,
        rpc_url = toml_string(devnet.anvil.endpoint_url().as_str()),
        chain_id = d.chain_id,
        nats_url = toml_string(&nats.url()),
        market = d.market,
        registry = d.registry,
        token = d.token,
        docker_socket = toml_path(&engine.socket)?,
        cache_dir = toml_path(&dir.join("cache"))?,
        work_dir = toml_path(&work_dir)?,
    );
    let path = dir.join("worker.toml");
    std::fs::write(&path, config).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// A TOML basic string: a JSON string is one (the same quotes and escapes), and the
/// devnet has no TOML writer.
fn toml_string(value: &str) -> String {
    serde_json::to_string(value).expect("a string serializes")
}

fn toml_path(path: &Path) -> anyhow::Result<String> {
    let text = path
        .to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))?;
    Ok(toml_string(text))
}

/// A service binary `up` started; killed on drop, should `up` fail before stopping it.
struct Service {
    name: &'static str,
    metrics_port: u16,
    child: tokio::process::Child,
}

/// Starts a service binary built beside this one with the dev chain's contracts, NATS,
/// the service's metrics address, and (for those that send transactions) the private key
/// of anvil account `signer` in its environment.
fn spawn_service(
    name: &'static str,
    devnet: &Devnet,
    nats: &NatsServer,
    metrics_port: u16,
    signer: Option<usize>,
) -> anyhow::Result<Service> {
    let d = &devnet.deployment;
    let mut command = service_command(name)?;
    command
        .args(["--rpc-url", devnet.anvil.endpoint_url().as_str()])
        .args(["--chain-id", &d.chain_id.to_string()])
        .args(["--market", &d.market.to_string()])
        .args(["--registry", &d.registry.to_string()])
        .args(["--nats-url", &nats.url()])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")]);
    if name == "gantry-indexer" {
        command.args(["--start-block", &d.start_block.to_string()]);
    }
    if let Some(account) = signer {
        command.env("GANTRY_PRIVATE_KEY", private_key(devnet, account));
    }
    let child = command
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    Ok(Service {
        name,
        metrics_port,
        child,
    })
}

/// Starts `gantry-worker` with its config file, as the agent of anvil account
/// [`WORKER_AGENT`]; it registers and stakes its node itself.
fn spawn_worker(config: &Path, devnet: &Devnet) -> anyhow::Result<Service> {
    let name = "gantry-worker";
    let child = service_command(name)?
        .arg("--config")
        .arg(config)
        .env("GANTRY_AGENT_KEY", private_key(devnet, WORKER_AGENT))
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    Ok(Service {
        name,
        metrics_port: WORKER_METRICS,
        child,
    })
}

/// Starts `gantry-api` on `port`, projecting into a fresh SQLite file in `run_dir` (the
/// chain is new on every start, so is its projection); its metrics are on the same port.
fn spawn_api(
    run_dir: &Path,
    devnet: &Devnet,
    nats: &NatsServer,
    port: u16,
) -> anyhow::Result<Service> {
    let name = "gantry-api";
    let database = run_dir.join("api.db");
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
    let child = service_command(name)?
        .args(["--chain-id", &devnet.deployment.chain_id.to_string()])
        .args(["--nats-url", &nats.url()])
        .arg("--database-url")
        .arg(format!("sqlite://{}", database.display()))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    Ok(Service {
        name,
        metrics_port: port,
        child,
    })
}

/// A command for the service binary `name`, built beside this one.
fn service_command(name: &str) -> anyhow::Result<tokio::process::Command> {
    let binary = std::env::current_exe()?.with_file_name(name);
    anyhow::ensure!(
        binary.exists(),
        "{} not built: run `make dev` (it builds every service)",
        binary.display()
    );
    let mut command = tokio::process::Command::new(binary);
    command.kill_on_drop(true);
    Ok(command)
}

/// The hex private key of anvil account `account`.
fn private_key(devnet: &Devnet, account: usize) -> String {
    B256::from_slice(&devnet.anvil.keys()[account].to_bytes()).to_string()
}

/// Waits until one of the services exits and says which and how.
async fn first_exit(services: &mut [Service]) -> String {
    let waits = services.iter_mut().map(|service| {
        Box::pin(async move {
            match service.child.wait().await {
                Ok(status) => format!("{} exited: {status}", service.name),
                Err(e) => format!("{}: {e}", service.name),
            }
        })
    });
    futures::future::select_all(waits).await.0
}

/// SIGTERM to every service (each shuts down gracefully: the worker removes its
/// containers), then SIGKILL to those still running after [`STOP_GRACE`].
async fn stop_services(services: &mut [Service]) {
    for service in services.iter() {
        if let Some(pid) = service.child.id() {
            let _ = tokio::process::Command::new("kill")
                .arg(pid.to_string())
                .status()
                .await;
        }
    }
    let deadline = tokio::time::Instant::now() + STOP_GRACE;
    for service in services.iter_mut() {
        if tokio::time::timeout_at(deadline, service.child.wait())
            .await
            .is_err()
        {
            println!(
                "{} still running {STOP_GRACE:?} after SIGTERM; killing it",
                service.name
            );
            let _ = service.child.kill().await;
        }
    }
}

/// Resolves on SIGINT or SIGTERM; anvil and nats-server stop when they drop.
async fn shutdown_signal() -> std::io::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result,
        _ = terminate.recv() => Ok(()),
    }
}

//! `gantry-devnet`: the local network (`make dev`) and the contract artifacts.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Parser, Subcommand};
use gantry_devnet::accounts::SUBMITTER;
use gantry_devnet::chaos::{self, ChaosConfig};
use gantry_devnet::network::{Network, NetworkConfig};
use gantry_devnet::{Tools, check_artifacts, demo, write_artifacts};
use gantry_protocol::spec::Engine;

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
    /// the host's Docker engine, else a private dockerd, with the demo image built) and
    /// the API with its dashboard, prints where everything is, runs the demo job to its
    /// payout, then runs until Ctrl-C.
    Up {
        /// Port of anvil's JSON-RPC server.
        #[arg(long, env = "GANTRY_DEVNET_PORT", default_value_t = 8545)]
        port: u16,
        /// Seconds between blocks, e.g. `1` or `0.25`; 0 mines a block per transaction.
        #[arg(long, env = "GANTRY_DEVNET_BLOCK_TIME", default_value = "1", value_parser = parse_seconds)]
        block_time: std::time::Duration,
        /// Where the logs (`logs/`), the deployment (`deployment.json`: addresses, chain id,
        /// start block), the API's database and the workers' folders go.
        #[arg(long, env = "GANTRY_DEVNET_RUN_DIR", default_value = ".devnet")]
        run_dir: PathBuf,
        /// Port of the NATS server (JetStream) the indexer publishes to.
        #[arg(long, env = "GANTRY_DEVNET_NATS_PORT", default_value_t = 4222)]
        nats_port: u16,
        /// Port of the API and its dashboard.
        #[arg(long, env = "GANTRY_DEVNET_API_PORT", default_value_t = 8080)]
        api_port: u16,
        /// Stop everything once the demo job is paid (for scripts and CI).
        #[arg(long)]
        exit_after_demo: bool,
        /// The demo job's engine: docker (a container training a model) or wasm (a
        /// WebAssembly module summarising the dataset, deterministically).
        #[arg(long, default_value = "docker")]
        engine: Engine,
    },
    /// Prints the NATS accounts, users and permissions of one chain (`auth.conf`, which
    /// deploy/nats/nats-server.conf and cluster.conf include), rendered from the protocol's
    /// names. Workers need no user: they join through the auth callout (gantry-auth).
    NatsAuth {
        /// The chain.
        chain_id: u64,
        /// Nodes whose workers also get a password user (`worker-<id>`), and whose buckets
        /// of sealed results the reader may read.
        nodes: Vec<u64>,
    },
    /// Prints a new auth callout issuer: the seed for gantry-auth
    /// (`GANTRY_AUTH_ISSUER_SEED`) and its public key for the NATS servers
    /// (`GANTRY_NATS_CALLOUT_ISSUER`), as `.env` lines.
    NatsIssuer,
    /// The chaos suite: the whole network with replicas, jobs through the CLI and raw
    /// transactions, seeded faults (kills, stops, nats-server restarts, reorgs), then
    /// judged against the chain. Prints each run's faults, findings and a JSON line; fails
    /// when a run finds anything.
    Chaos {
        /// The first seed (default: from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Consecutive seeds to run from the first.
        #[arg(long, default_value_t = 1)]
        seeds: u64,
        /// The short run of `make test` (16 jobs, a minute of faults) instead of the full
        /// one (200 jobs, three minutes).
        #[arg(long)]
        short: bool,
        /// Where each run's network keeps its logs: `<dir>/seed-<seed>/`.
        #[arg(long, default_value = ".chaos")]
        run_dir: PathBuf,
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
            run_dir,
            nats_port,
            api_port,
            exit_after_demo,
            engine,
        } => {
            let config = NetworkConfig {
                anvil_port: port,
                block_time,
                nats_port,
                api_port,
                run_dir,
                ..NetworkConfig::dev()?
            };
            up(config, exit_after_demo, engine).await
        }
        Command::NatsAuth { chain_id, nodes } => {
            print!("{}", gantry_protocol::nats_auth::render(chain_id, &nodes));
            Ok(())
        }
        Command::NatsIssuer => {
            let issuer = nkeys::KeyPair::new_account();
            println!(
                "GANTRY_AUTH_ISSUER_SEED={}",
                issuer.seed().context("a new key pair has its seed")?
            );
            println!(
                "{}={}",
                gantry_protocol::nats_auth::CALLOUT_ISSUER_ENV,
                issuer.public_key()
            );
            Ok(())
        }
        Command::Chaos {
            seed,
            seeds,
            short,
            run_dir,
        } => chaos(seed, seeds, short, &run_dir).await,
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

async fn up(config: NetworkConfig, exit_after_demo: bool, engine: Engine) -> anyhow::Result<()> {
    // Listening from the start, so that a signal during start-up also stops what has started.
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    println!(
        "starting the dev network in {} (logs in logs/)",
        config.run_dir.display()
    );
    let mut network = tokio::select! {
        started = Network::start(config) => started?,
        signal = &mut shutdown => {
            println!("stopping during start-up");
            return signal.map_err(anyhow::Error::from);
        }
    };
    println!("{}", network.summary());

    // The demo job, followed to its payout.
    let spec = network.dataset.spec(engine);
    let job = demo::post(&network.devnet, SUBMITTER, &spec)
        .await
        .context("posting the demo job")?;
    match engine {
        Engine::Docker => println!(
            "demo: job {job} trains a linear model on {} ({} epochs; bounty 5 gUSD)",
            network.dataset.url(),
            demo::EPOCHS
        ),
        Engine::Wasm => println!(
            "demo: job {job} runs {} (WASM, deterministic) on {} (bounty 5 gUSD)",
            network.dataset.module_url(),
            network.dataset.url(),
        ),
    }
    let api = network.api_url.clone();
    let followed = tokio::select! {
        outcome = demo::follow(&api, job, |line| println!("demo: {line}")) => outcome,
        signal = &mut shutdown => {
            println!("stopping");
            network.stop().await;
            return signal.map_err(anyhow::Error::from);
        }
        exited = network.first_exit() => Err(anyhow::anyhow!(exited)),
    };
    let outcome = match followed {
        Ok(outcome) if outcome.status == "completed" => Ok(()),
        Ok(outcome) => Err(anyhow::anyhow!("the demo job ended {}", outcome.status)),
        Err(e) => Err(e.context("following the demo job")),
    };
    if exit_after_demo || outcome.is_err() {
        println!("stopping");
        network.stop().await;
        return outcome;
    }
    println!(
        "the network keeps running: dashboard {}/ — press Ctrl-C to stop",
        network.api_url
    );
    let outcome = tokio::select! {
        signal = &mut shutdown => signal.map_err(anyhow::Error::from),
        exited = network.first_exit() => Err(anyhow::anyhow!(exited)),
    };
    println!("stopping");
    network.stop().await;
    outcome
}

/// Runs `seeds` chaos runs from `seed`; fails when one finds anything.
async fn chaos(seed: Option<u64>, seeds: u64, short: bool, run_dir: &Path) -> anyhow::Result<()> {
    let first = match seed {
        Some(seed) => seed,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs(),
    };
    let mut failed = Vec::new();
    for seed in first..first + seeds {
        let dir = std::path::absolute(run_dir)?.join(format!("seed-{seed}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
        }
        let config = if short {
            ChaosConfig::short(seed, &dir)
        } else {
            ChaosConfig::full(seed, &dir)
        };
        // A signal drops the run, and with it the network (its processes are killed on drop).
        let report = tokio::select! {
            report = chaos::run(&config) => report?,
            signal = shutdown_signal() => {
                println!("stopped by a signal during seed {seed}");
                return signal.map_err(anyhow::Error::from);
            }
        };
        println!("{}", report.json());
        if !report.passed() {
            println!("seed {seed} FAILED (logs in {})", dir.display());
            failed.push(seed);
        }
    }
    anyhow::ensure!(
        failed.is_empty(),
        "chaos found faults with seeds {failed:?}"
    );
    println!("{seeds} seeds from {first} passed");
    Ok(())
}

/// Resolves on SIGINT or SIGTERM; anvil and nats-server stop when they drop.
async fn shutdown_signal() -> std::io::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result,
        _ = terminate.recv() => Ok(()),
    }
}

/// Seconds as a decimal (`1`, `0.25`), for `--block-time`: anvil mines at most a block a
/// millisecond.
fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    let seconds: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(seconds == 0.0 || (0.001..=3_600.0).contains(&seconds)) {
        return Err(format!(
            "{text} s: give 0 (a block per transaction) or 0.001 to 3600"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(seconds))
}

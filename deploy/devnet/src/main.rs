//! `gantry-devnet`: the local network (`make dev`) and the contract artifacts.

use std::path::PathBuf;

use alloy::network::EthereumWallet;
use alloy::node_bindings::Anvil;
use alloy::primitives::{U256, utils::parse_units};
use alloy::providers::{Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;
use anyhow::Context;
use clap::{Parser, Subcommand};
use gantry_devnet::{
    DeployParams, Devnet, NatsServer, Tools, check_artifacts, deploy, write_artifacts,
};
use url::Url;

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
    /// starts nats-server, the indexer, the matcher and the liveness keeper, prints where
    /// everything is and runs until Ctrl-C.
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
        } => up(port, block_time, out, nats_port).await,
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

async fn up(port: u16, block_time: u64, out: PathBuf, nats_port: u16) -> anyhow::Result<()> {
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
    let admin = devnet.anvil.addresses()[0];

    let thousand: U256 = parse_units("1000000", 6)?.into();
    for account in devnet.anvil.addresses() {
        devnet
            .mint(*account, thousand)
            .await
            .context("funding dev accounts")?;
    }

    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(
        &out,
        serde_json::to_string_pretty(&devnet.deployment)? + "\n",
    )?;

    let d = &devnet.deployment;
    let nats = NatsServer::start_on(nats_port)
        .with_context(|| format!("starting nats-server on port {nats_port}"))?;
    let indexer = spawn_service("gantry-indexer", &devnet, &nats, 9101, None)?;
    // The admin holds MATCHER; the keeper's calls need no role (account 8 pays for them).
    let matcher = spawn_service("gantry-matcher", &devnet, &nats, 9102, Some(0))?;
    let liveness = spawn_service("gantry-liveness", &devnet, &nats, 9103, Some(8))?;

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
    for (name, child, port) in [
        ("gantry-indexer ", &indexer, 9101),
        ("gantry-matcher ", &matcher, 9102),
        ("gantry-liveness", &liveness, 9103),
    ] {
        println!(
            "  {name}  pid {}, metrics on http://127.0.0.1:{port}/metrics",
            child.id().unwrap_or_default()
        );
    }
    println!("  deployment written to {}", out.display());
    println!("press Ctrl-C to stop");
    let outcome = tokio::select! {
        signal = shutdown_signal() => signal.map_err(anyhow::Error::from),
        status = wait_child(indexer) => Err(anyhow::anyhow!("gantry-indexer exited: {status}")),
        status = wait_child(matcher) => Err(anyhow::anyhow!("gantry-matcher exited: {status}")),
        status = wait_child(liveness) => Err(anyhow::anyhow!("gantry-liveness exited: {status}")),
    };
    println!("stopping");
    outcome
}

/// Starts a service binary built beside this one with the dev chain's contracts, NATS,
/// the service's metrics address, and (for those that send transactions) the private key
/// of anvil account `signer` in its environment.
fn spawn_service(
    name: &str,
    devnet: &Devnet,
    nats: &NatsServer,
    metrics_port: u16,
    signer: Option<usize>,
) -> anyhow::Result<tokio::process::Child> {
    let binary = std::env::current_exe()?.with_file_name(name);
    anyhow::ensure!(
        binary.exists(),
        "{} not built: run `make dev` (it builds every service)",
        binary.display()
    );
    let d = &devnet.deployment;
    let mut command = tokio::process::Command::new(&binary);
    command
        .args(["--rpc-url", devnet.anvil.endpoint_url().as_str()])
        .args(["--chain-id", &d.chain_id.to_string()])
        .args(["--market", &d.market.to_string()])
        .args(["--registry", &d.registry.to_string()])
        .args(["--nats-url", &nats.url()])
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
        .kill_on_drop(true);
    if name == "gantry-indexer" {
        command.args(["--start-block", &d.start_block.to_string()]);
    }
    if let Some(account) = signer {
        let key = alloy::primitives::B256::from_slice(&devnet.anvil.keys()[account].to_bytes());
        command.env("GANTRY_PRIVATE_KEY", key.to_string());
    }
    command
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

async fn wait_child(mut child: tokio::process::Child) -> String {
    match child.wait().await {
        Ok(status) => status.to_string(),
        Err(e) => e.to_string(),
    }
}

/// Resolves on SIGINT or SIGTERM; anvil stops when `devnet` drops.
async fn shutdown_signal() -> std::io::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result,
        _ = terminate.recv() => Ok(()),
    }
}

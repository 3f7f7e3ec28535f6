//! Start-up: everything the node needs before it takes work, in order. Local directories
//! (emptied, and checked to give jobs their fixed-size disk spaces) and the hardware
//! inventory; the chain and the node's registration; Docker, with the
//! containers a previous run left removed; NATS, waiting for the indexer's chain stream;
//! the jobs stream and the results and checkpoints object stores; the input fetcher.

use std::sync::Arc;

use alloy::primitives::aliases::U96;
use alloy::signers::local::PrivateKeySigner;
use async_nats::jetstream;
use gantry_protocol::bindings::NodeRegistry;
use gantry_protocol::eligibility::Engines;
use gantry_protocol::{names, storage};
use tokio_util::sync::CancellationToken;

use crate::admit::NodeLimits;
use crate::chain::{Chain, ServedNode};
use crate::config::Config;
use crate::docker::Executor;
use crate::error::WorkerError;
use crate::fault::Failure;
use crate::fetch::{FetchConfig, Fetcher, S3Settings};
use crate::inventory::{GpuMonitor, Inventory};
use crate::job::{Ctx, GpuPool};
use crate::service::Hooks;
use crate::wasm::WasmEngine;
use crate::{metrics, space};
use gantry_protocol::spec::Engine;

/// The node, up: what every job shares, and its capabilities as the chain holds them
/// (what jobs are checked against; `maxConcurrentJobs` among them).
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) capabilities: NodeRegistry::NodeCapabilities,
}

/// Brings the node up; `None` when `shutdown` fires while it waits for the chain stream.
pub(crate) async fn start(
    config: &Config,
    signer: PrivateKeySigner,
    shutdown: &CancellationToken,
    hooks: &mut Hooks,
) -> Result<Option<Node>, WorkerError> {
    create_dirs(config).await?;
    let inventory = Inventory::detect(&config.work_dir);
    inventory.log();
    let chain = Arc::new(connect_chain(config, signer.clone()).await?);
    let detected = capabilities(config, &inventory);
    // A node registered with exactly the minimum would be made Inactive by its first
    // slash: the default leaves room.
    let stake = match config.node.stake {
        Some(stake) => stake,
        None => default_stake(chain.min_stake().await?),
    };
    let ServedNode {
        node_id,
        capabilities,
    } = chain
        .ensure_node(
            config.node.node_id,
            detected.clone(),
            Some(stake),
            &config.node.metadata_uri,
        )
        .await?;
    tracing::info!(
        node_id,
        agent = %chain.agent(),
        max_concurrent_jobs = capabilities.maxConcurrentJobs,
        "serving node"
    );
    if let Some(tx) = hooks.node_id.take() {
        let _ = tx.send(node_id);
    }
    let executor = match config.jobs.engines.contains(&Engine::Docker) {
        true => Some(start_docker(config, node_id).await?),
        false => None,
    };
    let wasm = match config.jobs.engines.contains(&Engine::Wasm) {
        true => Some(WasmEngine::new().map_err(WorkerError::Node)?),
        false => None,
    };
    let nats = connect_nats(config, node_id, signer, &inventory, detected.engines).await?;
    let js = jetstream::new(nats.clone());
    let Some(chain_stream) = wait_for_chain_stream(&js, config.chain_id, shutdown).await else {
        return Ok(None);
    };
    let stores = Stores::open(&nats, &js, config).await?;
    // The bucket of sealed results: written under the node's id (never read) by the
    // refereed jobs it provides. The network's auth service makes it where workers may
    // not; without it the node gives refereed jobs back, free.
    let sealed_results = config.jobs.engines.contains(&Engine::Wasm)
        && match gantry_runtime::objects::open(
            &js,
            &names::sealed_bucket(config.chain_id),
            config.nats_replicas,
        )
        .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %e, "no bucket of sealed results: this node gives refereed jobs back");
                false
            }
        };
    let fetcher = Fetcher::new(fetch_config(config), Some(js.clone()))
        .map_err(|e| WorkerError::Node(Failure::from(&e)))?;
    // Each slot's disk space, made now, before the first job arrives.
    let slots = config
        .jobs
        .max_concurrent
        .min(capabilities.maxConcurrentJobs)
        .max(1);
    let spaces = space::SpacePool::new(
        &config.work_dir,
        config.jobs.space_room(),
        usize::from(slots),
    );
    spaces.fill();
    let ctx = Ctx {
        chain_id: config.chain_id,
        node_id,
        chain,
        executor,
        wasm,
        fetcher,
        nats,
        chain_stream,
        jobs_js: stores.jobs_js,
        results: stores.results,
        checkpoints: stores.checkpoints,
        keys: tokio::sync::OnceCell::new(),
        nats_replicas: config.nats_replicas,
        settings: config.jobs.clone(),
        test: config.test.clone(),
        limits: NodeLimits {
            gpus: detected.gpuCount,
            cpu_cores: inventory.cpu_cores,
            ram_mib: inventory.ram_mib,
        },
        gpus: std::sync::Mutex::new(GpuPool::new(inventory.gpus.clone())),
        monitor: GpuMonitor::new(),
        work_dir: config.work_dir.clone(),
        spaces,
        sealed_results,
        started: hooks.started.take(),
    };
    Ok(Some(Node {
        ctx: Arc::new(ctx),
        capabilities,
    }))
}

/// The work and cache directories; the work directory is the worker's alone, emptied of
/// what a previous run left, and able to give jobs their fixed-size spaces.
async fn create_dirs(config: &Config) -> Result<(), WorkerError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(&config.work_dir)?;
    std::fs::create_dir_all(&config.cache_dir)?;
    std::fs::set_permissions(&config.work_dir, std::fs::Permissions::from_mode(0o700))?;
    space::clear(&config.work_dir).await?;
    space::probe(&config.work_dir)
        .await
        .map_err(WorkerError::Node)?;
    Ok(())
}

async fn connect_chain(config: &Config, signer: PrivateKeySigner) -> Result<Chain, WorkerError> {
    let chain = Chain::connect(
        config.rpc_url.clone(),
        config.chain_id,
        config.market,
        config.registry,
        config.token,
        config.start_block,
        signer,
    )
    .await?;
    Ok(chain)
}

/// What the node registers: this machine's hardware and the provider's price and limit.
fn capabilities(config: &Config, inventory: &Inventory) -> NodeRegistry::NodeCapabilities {
    NodeRegistry::NodeCapabilities {
        gpuModel: inventory.gpu_model(),
        gpuCount: u16::try_from(inventory.gpus.len()).unwrap_or(u16::MAX),
        vramMiB: inventory.min_vram_mib(),
        cpuCores: inventory.cpu_cores,
        ramMiB: inventory.ram_mib,
        pricePerGpuHour: U96::saturating_from(config.node.price_per_gpu_hour),
        maxConcurrentJobs: config.jobs.max_concurrent,
        engines: config.jobs.engines.iter().copied().collect::<Engines>().0
            | if config.jobs.verified_docker {
                Engines::DETERMINISTIC_DOCKER.0
            } else {
                0
            },
    }
}

/// The Docker engine, with the node's containers left by an earlier run removed.
async fn start_docker(config: &Config, node_id: u64) -> Result<Executor, WorkerError> {
    let executor = Executor::connect(&config.docker_socket, node_id)
        .await
        .map_err(WorkerError::Node)?;
    executor
        .remove_leftovers()
        .await
        .map_err(WorkerError::Node)?;
    Ok(executor)
}

/// Connects to NATS, retrying in the background while the servers are down (a worker
/// started during a NATS outage waits for it rather than exits). Without credentials in
/// `nats_url`, by the handshake: each connection sends a token signed by the agent key
/// now, with the node's manifest (its engines, GPUs and newest cached inputs).
async fn connect_nats(
    config: &Config,
    node_id: u64,
    signer: PrivateKeySigner,
    inventory: &Inventory,
    engines: u8,
) -> Result<async_nats::Client, WorkerError> {
    use gantry_protocol::handshake::{Gpu, Manifest};
    let (chain_id, market) = (config.chain_id, config.market);
    let gpus: Vec<Gpu> = inventory
        .gpus
        .iter()
        .map(|gpu| Gpu {
            model: gpu.name.clone(),
            vram_mib: gpu.vram_mib,
        })
        .collect();
    let cache_dir = config.cache_dir.clone();
    let token = move || {
        let manifest = Manifest {
            engines,
            gpus: gpus.clone(),
            cached_inputs: crate::fetch::newest_cached(
                &cache_dir,
                gantry_protocol::handshake::MAX_CACHED_INPUTS,
            ),
            worker: env!("CARGO_PKG_VERSION").to_owned(),
        };
        gantry_runtime::nats::handshake_token(&signer, chain_id, market, node_id, &manifest)
    };
    gantry_runtime::nats::connect_node(&config.nats_url, node_id, token)
        .await
        .map_err(|e| WorkerError::nats(format!("connecting to {}", e.servers), e.source))
}

/// The chain stream, once it exists: the indexer creates it and may start after this
/// worker. `None` when `shutdown` fires first.
async fn wait_for_chain_stream(
    js: &jetstream::Context,
    chain_id: u64,
    shutdown: &CancellationToken,
) -> Option<jetstream::stream::Stream> {
    let stream_name = names::stream_name(chain_id);
    let stream = gantry_runtime::nats::wait_for_stream(
        js,
        &stream_name,
        shutdown,
        metrics::waiting_for_chain_stream,
    )
    .await?;
    metrics::waiting_for_chain_stream(false);
    Some(stream)
}

/// Where the worker writes: the jobs stream (completion reports) and the two object
/// stores, each created when missing.
struct Stores {
    jobs_js: jetstream::Context,
    results: String,
    checkpoints: String,
}

impl Stores {
    async fn open(
        nats: &async_nats::Client,
        js: &jetstream::Context,
        config: &Config,
    ) -> Result<Self, WorkerError> {
        let jobs_js = jetstream::new(nats.clone());
        jobs_js
            .get_or_create_stream(storage::jobs_stream(config.chain_id, config.nats_replicas))
            .await
            .map_err(|e| WorkerError::nats("the jobs stream", e))?;
        let results = names::results_bucket(config.chain_id);
        gantry_runtime::objects::open(js, &results, config.nats_replicas)
            .await
            .map_err(|e| WorkerError::nats("the results bucket", e))?;
        let checkpoints = names::checkpoints_bucket(config.chain_id);
        gantry_runtime::objects::open(js, &checkpoints, config.nats_replicas)
            .await
            .map_err(|e| WorkerError::nats("the checkpoints bucket", e))?;
        Ok(Self {
            jobs_js,
            results,
            checkpoints,
        })
    }
}

/// The fetcher's settings, from the worker's config.
fn fetch_config(config: &Config) -> FetchConfig {
    FetchConfig {
        cache_dir: config.cache_dir.clone(),
        ipfs_gateway: config.ipfs_gateway.clone(),
        local_root: config.local_inputs_root.clone(),
        default_max_bytes: config.jobs.max_input_bytes,
        s3: config.s3.as_ref().map(|s3| S3Settings {
            endpoint: s3.endpoint.clone(),
            region: s3.region.clone(),
            access_key_id: s3.access_key_id.clone().unwrap_or_default(),
            secret_access_key: s3.secret_access_key.clone().unwrap_or_default(),
            allow_http: s3.endpoint.as_ref().is_some_and(|u| u.scheme() == "http"),
        }),
        attempts: 3,
        allow_hosts: config.allow_input_hosts.clone(),
        chain_id: config.chain_id,
    }
}

/// How many times the market's minimum a node stakes by default: twice, so that it
/// stays at or above the minimum through six full slashes at the dev parameters' 10%
/// (`0.9^6 ≈ 0.53`) and the reject charges between them; a node slashed below the
/// minimum takes no new jobs until its operator tops it up (`gantry node topup`).
pub(crate) const DEFAULT_STAKE_MULTIPLE: u64 = 2;

/// The stake a node registers with when the config names none.
pub(crate) fn default_stake(min_stake: alloy::primitives::U256) -> alloy::primitives::U256 {
    min_stake.saturating_mul(alloy::primitives::U256::from(DEFAULT_STAKE_MULTIPLE))
}

#[cfg(test)]
mod tests {
    use alloy::primitives::U256;

    #[test]
    fn the_default_stake_leaves_room_for_slashes_above_the_minimum() {
        let min = U256::from(100_000_000u64);
        let stake = super::default_stake(min);
        assert_eq!(stake, U256::from(200_000_000u64));
        // Six full slashes of 10% leave it at or above the minimum.
        let left = (0..6).fold(stake, |s, _| s - s / U256::from(10));
        assert!(left >= min, "{left}");
        assert_eq!(super::default_stake(U256::MAX), U256::MAX);
    }
}

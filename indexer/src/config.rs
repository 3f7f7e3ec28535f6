//! Configuration: flags, each with an environment variable.

use std::net::SocketAddr;
use std::time::Duration;

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::Address;
use url::Url;

/// `gantry-indexer`: publishes the Gantry contracts' events of one chain into JetStream.
#[derive(Debug, Clone, clap::Parser)]
#[command(version, about)]
pub struct Config {
    /// JSON-RPC endpoint of the chain.
    #[arg(long, env = "GANTRY_RPC_URL")]
    pub rpc_url: Url,
    /// Chain id the RPC endpoint must report; the indexer refuses to index another chain.
    #[arg(long, env = "GANTRY_CHAIN_ID")]
    pub chain_id: u64,
    /// Address of the JobMarket contract.
    #[arg(long, env = "GANTRY_MARKET")]
    pub market: Address,
    /// Address of the NodeRegistry contract.
    #[arg(long, env = "GANTRY_REGISTRY")]
    pub registry: Address,
    /// First block to index when the stream is empty (the deployment block).
    #[arg(long, env = "GANTRY_START_BLOCK", default_value_t = 0)]
    pub start_block: u64,
    /// NATS server URL.
    #[arg(long, env = "GANTRY_NATS_URL", default_value = "nats://127.0.0.1:4222")]
    pub nats_url: String,
    /// Replicas of the chain stream and the lease bucket when this indexer creates them:
    /// 1 on a single server, 3 on a three-node cluster.
    #[arg(long, env = "GANTRY_NATS_REPLICAS", default_value = "1", value_parser = gantry_protocol::storage::parse_replicas)]
    pub nats_replicas: usize,
    /// Blocks to wait behind the head before indexing a block (0 on a dev chain).
    #[arg(long, env = "GANTRY_CONFIRMATIONS", default_value_t = 0)]
    pub confirmations: u64,
    /// Block tag whose advance is published as the finality watermark.
    #[arg(long, env = "GANTRY_FINALITY_TAG", value_enum, default_value_t = FinalityTag::Finalized)]
    pub finality_tag: FinalityTag,
    /// Recent blocks remembered to detect and unwind reorgs; deeper reorgs stop the indexer.
    #[arg(long, env = "GANTRY_REORG_WINDOW", default_value_t = 128)]
    pub reorg_window: usize,
    /// Smallest `eth_getLogs` range, blocks.
    #[arg(long, env = "GANTRY_MIN_RANGE", default_value_t = 1)]
    pub min_range: u64,
    /// Largest `eth_getLogs` range, blocks.
    #[arg(long, env = "GANTRY_MAX_RANGE", default_value_t = 10_000)]
    pub max_range: u64,
    /// Range the backfill starts with; it halves on refusals and doubles while logs are sparse.
    #[arg(long, env = "GANTRY_INITIAL_RANGE", default_value_t = 1_000)]
    pub initial_range: u64,
    /// Publishes awaiting their acknowledgement at most.
    #[arg(long, env = "GANTRY_MAX_IN_FLIGHT", default_value_t = 2_048)]
    pub max_in_flight: usize,
    /// Pause between head polls once caught up, milliseconds.
    #[arg(long, env = "GANTRY_POLL_MS", default_value_t = 500)]
    pub poll_ms: u64,
    /// Time to live of the writer lease, milliseconds; a standby takes over this long
    /// after the leader dies.
    #[arg(long, env = "GANTRY_LEASE_TTL_MS", default_value_t = 3_000)]
    pub lease_ttl_ms: u64,
    /// Name of this instance in the lease (default: host name and process id).
    #[arg(long, env = "GANTRY_INSTANCE_ID")]
    pub instance_id: Option<String>,
    /// Address to serve Prometheus metrics on (`/metrics`); none when unset.
    #[arg(long, env = "GANTRY_METRICS_ADDR")]
    pub metrics_addr: Option<SocketAddr>,
}

/// Which block tag marks finality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FinalityTag {
    Finalized,
    Safe,
    /// No watermark (a chain without such tags).
    None,
}

impl FinalityTag {
    pub fn tag(self) -> Option<BlockNumberOrTag> {
        match self {
            Self::Finalized => Some(BlockNumberOrTag::Finalized),
            Self::Safe => Some(BlockNumberOrTag::Safe),
            Self::None => None,
        }
    }
}

impl Config {
    /// An indexer for a chain on this machine (anvil in tests, benchmarks and the dev
    /// network's harnesses): no confirmations, no finality tag, polled every 10 ms.
    pub fn local(
        rpc_url: Url,
        chain_id: u64,
        market: Address,
        registry: Address,
        start_block: u64,
        nats_url: String,
    ) -> Self {
        Self {
            rpc_url,
            chain_id,
            market,
            registry,
            start_block,
            nats_url,
            nats_replicas: 1,
            confirmations: 0,
            finality_tag: FinalityTag::None,
            reorg_window: 64,
            min_range: 1,
            max_range: 10_000,
            initial_range: 100,
            max_in_flight: 512,
            poll_ms: 10,
            lease_ttl_ms: 1_500,
            instance_id: None,
            metrics_addr: None,
        }
    }

    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_ms)
    }

    pub fn lease_ttl(&self) -> Duration {
        Duration::from_millis(self.lease_ttl_ms)
    }

    pub fn instance_id(&self) -> String {
        gantry_runtime::instance_id(self.instance_id.as_deref())
    }

    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.min_range == 0 || self.min_range > self.max_range {
            return Err("--min-range must be at least 1 and at most --max-range".into());
        }
        if self.reorg_window == 0 {
            return Err("--reorg-window must be at least 1".into());
        }
        if self.lease_ttl_ms < 300 {
            return Err("--lease-ttl-ms must be at least 300".into());
        }
        Ok(())
    }
}

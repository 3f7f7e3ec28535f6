//! Configuration: flags, each with an environment variable.

use std::time::Duration;

use alloy::eips::BlockNumberOrTag;
use gantry_runtime::args::{ChainArgs, InstanceArgs, NatsArgs, parse_millis};

/// `gantry-indexer`: publishes the Gantry contracts' events of one chain into JetStream.
#[derive(Debug, Clone, clap::Parser)]
#[command(version, about)]
pub struct Config {
    #[command(flatten)]
    pub chain: ChainArgs,
    /// First block to index when the stream is empty (the deployment block).
    #[arg(long, env = "GANTRY_START_BLOCK", default_value_t = 0)]
    pub start_block: u64,
    #[command(flatten)]
    pub nats: NatsArgs,
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
    /// Work fetched ahead of what is being published: `eth_getLogs` ranges in a backfill,
    /// blocks near the head. 0 fetches each only once the one before is published.
    #[arg(long, env = "GANTRY_PREFETCH", default_value_t = 2)]
    pub prefetch: usize,
    /// Messages in one atomic batch at most (1 to 1000, the server's default
    /// `max_batch_size`); a block with more events is cut into several batches.
    #[arg(long, env = "GANTRY_MAX_BATCH", default_value_t = crate::stream::MAX_BATCH)]
    pub max_batch: usize,
    /// Pause between head polls once caught up, milliseconds.
    #[arg(long = "poll-ms", env = "GANTRY_POLL_MS", default_value = "500", value_parser = parse_millis)]
    pub poll: Duration,
    /// Time to live of the writer lease, milliseconds; a standby takes over this long
    /// after the leader dies.
    #[arg(long = "lease-ttl-ms", env = "GANTRY_LEASE_TTL_MS", default_value = "3000", value_parser = parse_millis)]
    pub lease_ttl: Duration,
    /// Instead of following: find the first block the stream's readers cannot assemble,
    /// publish it and the later blocks again whole from the chain, and exit (see
    /// `repair`). Takes the writer lease: stop the indexers first.
    #[arg(long)]
    pub repair: bool,
    #[command(flatten)]
    pub instance: InstanceArgs,
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
    pub fn local(chain: ChainArgs, start_block: u64, nats_url: String) -> Self {
        Self {
            chain,
            start_block,
            nats: NatsArgs::local(nats_url),
            confirmations: 0,
            finality_tag: FinalityTag::None,
            reorg_window: 64,
            min_range: 1,
            max_range: 10_000,
            initial_range: 100,
            prefetch: 2,
            max_batch: crate::stream::MAX_BATCH,
            poll: Duration::from_millis(10),
            lease_ttl: Duration::from_millis(1_500),
            repair: false,
            instance: InstanceArgs::default(),
        }
    }

    pub fn instance_id(&self) -> String {
        self.instance.instance_id()
    }

    /// Checks what clap cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.min_range == 0 || self.min_range > self.max_range {
            return Err("--min-range must be at least 1 and at most --max-range".into());
        }
        if !(1..=crate::stream::MAX_BATCH).contains(&self.max_batch) {
            return Err(format!(
                "--max-batch must be 1 to {}",
                crate::stream::MAX_BATCH
            ));
        }
        if self.reorg_window == 0 {
            return Err("--reorg-window must be at least 1".into());
        }
        if self.lease_ttl < Duration::from_millis(300) {
            return Err("--lease-ttl-ms must be at least 300".into());
        }
        Ok(())
    }
}

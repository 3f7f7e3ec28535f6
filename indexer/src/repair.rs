//! Repairing a damaged stream (`gantry-indexer --repair`). A stream written before atomic
//! batches, or by a writer that lost messages some other way, can hold a commit whose
//! events are not all right before it: every reader stalls at that block, says which on
//! its metrics and `/readyz`, and keeps its last good state. The repair finds that block
//! as a reader does (folding the stream through a `BlockAssembler`), checks that the chain
//! still holds the stream's blocks from there to the tail, and publishes them again whole
//! from the chain — each block with events, in order, its events and commit in one atomic
//! batch, and the tail block's commit last so that the indexer resumes where it was. That
//! is what a stalled reader takes as the repair (`gantry_protocol::chain_stream`: "published
//! again whole, in order"); a reader that applied those blocks already refuses them as
//! repeated, without a stall.
//!
//! ```text
//!  stream ──fold──▶ stall {missing, through} ──chain: logs missing..=tail, headers──▶
//!         prepare_block ×N ──Publisher (fenced on the tail, writer lease held)──▶ stream
//! ```
//!
//! It runs with the writer lease, so no indexer appends meanwhile (stop the indexers, or
//! it gives up after three lease TTLs). It refuses, changing nothing, when the chain no
//! longer holds the stream's last good block or its tail block (a reorganisation since:
//! run the indexer, which retracts them, then repair), or when the stream ends inside a
//! block (run the indexer once to finish it).

use std::collections::BTreeMap;

use alloy::primitives::B256;
use alloy::rpc::types::Log;
use anyhow::Context;
use gantry_protocol::chain_stream::{BlockAssembler, Stall};
use gantry_protocol::events::Contracts;
use tokio_util::sync::CancellationToken;

use crate::chain::Chain;
use crate::config::Config;
use crate::follower::prepare_block;
use crate::stream::ChainStream;

/// What a repair did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repaired {
    /// Every block of the stream assembles: nothing to do.
    Whole,
    /// The stall it found, and the blocks published again (their numbers) with how many
    /// events, after stream sequence `after`.
    Republished {
        stall: Stall,
        blocks: Vec<u64>,
        events: usize,
        after: u64,
    },
}

impl Repaired {
    /// A sentence for the operator.
    pub fn describe(&self) -> String {
        match self {
            Self::Whole => "the stream is whole: every block assembles; nothing to repair".into(),
            Self::Republished {
                stall,
                blocks,
                events,
                after,
            } => format!(
                "the stream was damaged at block {} ({}); published again whole from the chain                  after sequence {after}: {} blocks ({}..={}), {events} events",
                stall.missing,
                stall.damage,
                blocks.len(),
                blocks.first().copied().unwrap_or_default(),
                blocks.last().copied().unwrap_or_default(),
            ),
        }
    }
}

/// Finds the first block readers cannot assemble and publishes it and the later blocks
/// again whole from the chain (see the module's documentation).
pub async fn repair(config: &Config) -> anyhow::Result<Repaired> {
    config.validate().map_err(anyhow::Error::msg)?;
    let chain = Chain::connect(
        config.chain.rpc_url.clone(),
        vec![config.chain.market, config.chain.registry],
    );
    let chain_id = chain.chain_id().await?;
    anyhow::ensure!(
        chain_id == config.chain.chain_id,
        "the RPC endpoint serves chain {chain_id}, not the configured chain {}",
        config.chain.chain_id
    );
    let contracts = Contracts {
        market: config.chain.market,
        registry: config.chain.registry,
    };
    let client = gantry_runtime::nats::connect(&config.nats.nats_url, false).await?;
    let js = async_nats::jetstream::new(client);

    let waited = CancellationToken::new();
    let give_up = {
        let waited = waited.clone();
        let patience = config.lease_ttl * 3;
        tokio::spawn(async move {
            tokio::time::sleep(patience).await;
            waited.cancel();
        })
    };
    let lease = crate::acquire_lease(&js, config, chain_id, &config.instance_id(), &waited).await;
    give_up.abort();
    let mut lease =
        lease?.context("another indexer holds the writer lease: stop the indexers, then repair")?;
    let outcome = repair_under_lease(&chain, &js, chain_id, config, contracts).await;
    lease.release().await;
    outcome
}

async fn repair_under_lease(
    chain: &Chain,
    js: &async_nats::jetstream::Context,
    chain_id: u64,
    config: &Config,
    contracts: Contracts,
) -> anyhow::Result<Repaired> {
    let stream = ChainStream::open(js.clone(), chain_id, config.nats.nats_replicas).await?;
    let tail = stream.tail().await?;
    if let Some((block, events)) = tail.partial {
        anyhow::bail!(
            "the stream ends inside block {} ({events} of its events, no commit): run the \
             indexer once to finish or retract it, then repair",
            block.number
        );
    }
    let mut assembler = BlockAssembler::new();
    for (_, message) in stream.read_through(tail.last_sequence).await? {
        if let Some(message) = message {
            // Refusals are what the fold is for: the stall says what they left.
            let _ = assembler.push(message);
        }
    }
    let Some(stall) = assembler.stall() else {
        return Ok(Repaired::Whole);
    };
    let (tail_block, _) = tail.last_commit.context("a stalled stream has a commit")?;

    // The chain must still hold the last good block and the tail block: the blocks
    // between are then the chain's, as the stream's readers will take them.
    if let Some(good) = assembler.applied()
        && let Some(hash) = good.hash
    {
        ensure_canonical(chain, good.number, hash, "its last good block").await?;
    }
    ensure_canonical(chain, tail_block.number, tail_block.hash, "its tail block").await?;

    let logs = chain.logs(stall.missing, tail_block.number).await?;
    let mut by_block: BTreeMap<u64, (B256, Vec<Log>)> = BTreeMap::new();
    for log in logs {
        let (Some(number), Some(hash)) = (log.block_number, log.block_hash) else {
            anyhow::bail!("the chain answered a log without its block");
        };
        by_block
            .entry(number)
            .or_insert((hash, Vec::new()))
            .1
            .push(log);
    }
    // The damaged block first, events or not (the readers wait for it by number), and
    // the tail block last: the indexer resumes from it.
    if let std::collections::btree_map::Entry::Vacant(entry) = by_block.entry(stall.missing) {
        let header = chain
            .header_by_number(stall.missing)
            .await?
            .with_context(|| format!("block {} is not on the chain", stall.missing))?;
        entry.insert((header.hash, Vec::new()));
    }
    by_block
        .entry(tail_block.number)
        .or_insert((tail_block.hash, Vec::new()));
    let mut publisher = stream.publisher(tail.last_sequence, config.max_batch);
    let mut blocks = Vec::new();
    let mut events = 0;
    for (number, (hash, logs)) in by_block {
        let header = chain
            .header_by_hash(hash)
            .await?
            .with_context(|| format!("block {number} ({hash}) is gone from the chain"))?;
        let prepared = prepare_block(chain_id, &contracts, &header, &logs, 0)?;
        publisher.append(prepared.into_messages()).await?;
        blocks.push(number);
        events += logs.len();
    }
    tracing::info!(
        missing = stall.missing,
        through = stall.through,
        damage = %stall.damage,
        blocks = blocks.len(),
        events,
        "stream repaired"
    );
    Ok(Repaired::Republished {
        stall,
        blocks,
        events,
        after: tail.last_sequence,
    })
}

/// Fails unless the chain's block `number` is `hash`.
async fn ensure_canonical(
    chain: &Chain,
    number: u64,
    hash: B256,
    what: &str,
) -> anyhow::Result<()> {
    let canonical = chain.header_by_number(number).await?.map(|h| h.hash);
    anyhow::ensure!(
        canonical == Some(hash),
        "the chain no longer holds the stream's {what} {number} ({hash}; the chain has {canonical:?}): \
         run the indexer, which retracts it, then repair"
    );
    Ok(())
}

//! `gantry-indexer`: the Gantry contracts' events of one chain, published into that
//! chain's JetStream stream exactly once, in chain order, resumable and reorg-safe.
//!
//! ```text
//!      eth_getLogs (adaptive ranges) / per block near the head, fetched ahead (--prefetch)
//!  chain ──────────────────────────────────────────▶ follower ──▶ Publisher ──▶ GANTRY_<chain>
//!                                                     ▲  window (reorgs)   atomic batches,
//!                                                     │                    one at a time
//!                                                     └────── tail (resume) ─────┘
//!  KV gantry_indexer_lease: one writer per chain; each batch's Nats-Expected-Last-Sequence
//!  fences the rest, a deposed writer's late batch included
//! ```
//!
//! The stream is the checkpoint: on start and after any error the follower reads the
//! stream's tail (its last message, and what is at or below it) and resumes there. A
//! block's events and its commit are one atomic batch, so a commit is only ever stored
//! right after its own events.
//! [`window`] is the pure reorg logic; [`chain`] and [`stream`] are the only modules that
//! do IO.

pub mod chain;
pub mod config;
pub mod error;
pub mod follower;
pub mod metrics;
pub mod repair;
pub mod stream;
pub mod window;

use anyhow::Context;
use gantry_protocol::events::Contracts;
use gantry_protocol::{names, storage};
use gantry_runtime::backoff::Backoff;
use gantry_runtime::lease::KvLease;
use tokio_util::sync::CancellationToken;

pub use config::Config;
use follower::Settings;

/// Runs the indexer until `shutdown` fires; returns an error only when it cannot go on
/// (wrong chain, a reorg deeper than the window, a corrupt stream). It spawns no task of
/// its own (the writer lease is renewed in the same task), so its caller's supervisor
/// (`main`'s, beside the metrics listener) covers all of it.
pub async fn run(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate().map_err(anyhow::Error::msg)?;
    let chain = chain::Chain::connect(
        config.chain.rpc_url.clone(),
        vec![config.chain.market, config.chain.registry],
    );
    let contracts = Contracts {
        market: config.chain.market,
        registry: config.chain.registry,
    };
    let settings = Settings {
        start_block: config.start_block,
        confirmations: config.confirmations,
        finality: config.finality_tag.tag(),
        reorg_window: config.reorg_window,
        min_range: config.min_range,
        max_range: config.max_range,
        initial_range: config.initial_range,
        prefetch: config.prefetch,
        max_batch: config.max_batch,
        poll_interval: config.poll,
    };

    let mut backoff = Backoff::default();
    let chain_id = loop {
        match chain.chain_id().await {
            Ok(id) => break id,
            Err(e) => {
                tracing::warn!(error = %e, "waiting for the chain");
                if !backoff.wait(&shutdown).await {
                    return Ok(());
                }
            }
        }
    };
    anyhow::ensure!(
        chain_id == config.chain.chain_id,
        "the RPC endpoint serves chain {chain_id}, not the configured chain {}",
        config.chain.chain_id
    );

    let client = gantry_runtime::nats::connect(&config.nats.nats_url, true).await?;
    let js = async_nats::jetstream::new(client);
    let owner = config.instance_id();

    while !shutdown.is_cancelled() {
        metrics::leader(false);
        let lease = match acquire_lease(&js, &config, chain_id, &owner, &shutdown).await {
            Ok(Some(lease)) => lease,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "acquiring the writer lease");
                if !backoff.wait(&shutdown).await {
                    break;
                }
                continue;
            }
        };
        tracing::info!(chain_id, owner, "writer lease acquired");
        metrics::leader(true);
        // The lease is renewed beside the follower, in this task: one that is lost stops
        // the follower; a follower that stops ends the renewal.
        let leading = shutdown.child_token();
        let following = async {
            let outcome = lead(
                &chain,
                &js,
                chain_id,
                config.nats.nats_replicas,
                contracts,
                &settings,
                &leading,
            )
            .await;
            leading.cancel();
            outcome
        };
        let (outcome, lease) = tokio::join!(following, keep_lease(lease, &leading));
        if let Some(mut lease) = lease {
            lease.release().await;
        }
        outcome?;
    }
    metrics::leader(false);
    Ok(())
}

/// Publishes while this instance leads; returns when `leading` is cancelled (shutdown or
/// lease lost) or on a fatal error.
async fn lead(
    chain: &chain::Chain,
    js: &async_nats::jetstream::Context,
    chain_id: u64,
    replicas: usize,
    contracts: Contracts,
    settings: &Settings,
    leading: &CancellationToken,
) -> anyhow::Result<()> {
    let mut backoff = Backoff::default();
    while !leading.is_cancelled() {
        let result = match stream::ChainStream::open(js.clone(), chain_id, replicas).await {
            Ok(stream) => follower::follow(chain, &stream, contracts, settings, leading).await,
            Err(e) => Err(e.into()),
        };
        match result {
            Ok(()) => backoff.reset(),
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "following interrupted; resuming from the stream tail");
                if !backoff.wait(leading).await {
                    break;
                }
            }
            Err(e) => return Err(e).context("indexer stopped"),
        }
    }
    Ok(())
}

/// Waits until this instance holds the writer lease of `chain_id`; `None` at shutdown.
pub(crate) async fn acquire_lease(
    js: &async_nats::jetstream::Context,
    config: &Config,
    chain_id: u64,
    owner: &str,
    shutdown: &CancellationToken,
) -> Result<Option<KvLease>, gantry_runtime::nats::NatsError> {
    let bucket = storage::lease_bucket(
        names::INDEXER_LEASE_BUCKET,
        config.lease_ttl,
        config.nats.nats_replicas,
    );
    let mut lease =
        KvLease::open(js, bucket, format!("chain-{chain_id}"), owner.to_owned()).await?;
    Ok(lease.acquire(shutdown).await?.then_some(lease))
}

/// Renews the lease until `leading` is cancelled; cancels `leading` when the lease is
/// lost. Returns the lease if it is still held, for release.
///
/// A renewal not answered within a third of the TTL counts as lost: the follower stops at
/// most two thirds of the TTL after sending the last renewal that succeeded, before the
/// entry can expire and a standby take over. A leader cut off from NATS so stops on its
/// own instead of learning it was deposed when it reconnects.
async fn keep_lease(mut lease: KvLease, leading: &CancellationToken) -> Option<KvLease> {
    loop {
        tokio::select! {
            () = leading.cancelled() => return Some(lease),
            () = tokio::time::sleep(lease.renew_every()) => {}
        }
        let error = match tokio::time::timeout(lease.renew_every(), lease.renew()).await {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e.to_string(),
            Err(_) => "renewal not answered in time".to_owned(),
        };
        tracing::warn!(error, "writer lease lost; standing by");
        leading.cancel();
        return None;
    }
}

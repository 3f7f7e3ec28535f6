//! `gantry-matcher` and `gantry-liveness`: stateless services that consume the chain
//! stream and submit transactions — assignments; markInactive, reclaim, expire, finalize.
//!
//! ```text
//!  GANTRY_<chain> ──ordered consumer──▶ feed ──▶ project::Projection ──▶ View
//!     │                                                                 │
//!     └─ durable consumer (JobPosted, JobRequeued) ─▶ work::Held claims │
//!                                                                       ▼
//!   matcher:  incremental::IncrementalPlanner.plan(view, changes) ──▶ sender (assign txs) ──▶ chain
//!             decide::explain ──▶ KV gantry_<chain>_pending (why a job waits)
//!   liveness: lease (KV) ──▶ liveness::Keeper.next(view) ──▶ sender (keeper txs) ──▶ chain
//! ```
//!
//! Neither keeps state of its own but its view: on start each reads back its last
//! [`snapshot`] of the view (or none) and replays the chain stream after it, then follows
//! it. [`decide`], [`incremental`], [`round`] (the matcher's books and one planning round)
//! and [`liveness`] are the pure cores; [`feed`], [`work`],
//! [`lease`] and [`sender`] do the IO; [`matcher_service`] and [`liveness_service`] are
//! the loops that join them.

pub mod config;
pub mod decide;
pub mod error;
pub mod feed;
pub mod incremental;
pub mod lease;
pub mod liveness;
pub mod liveness_service;
pub mod matcher_service;
pub mod metrics;
pub mod project;
pub mod round;
pub mod sender;
pub mod snapshot;
pub mod view;
pub mod work;

use alloy::signers::local::PrivateKeySigner;
use anyhow::Context as _;
use async_nats::jetstream;
use gantry_runtime::backoff::Backoff;
use tokio_util::sync::CancellationToken;

pub use config::{LivenessConfig, MatcherConfig};
pub use liveness_service::run as run_liveness;
pub use matcher_service::run as run_matcher;

use config::Common;
use sender::{Sender, SenderConfig, Sending};

/// What both services open before their loops: NATS, the sender (once the chain
/// answers) and the chain-stream feed.
struct Started {
    js: jetstream::Context,
    sender: Sender,
    sending: Sending,
    feed: feed::Feed,
    /// The view as the snapshot left it, or empty (the feed then starts from the first
    /// message).
    projection: project::Projection,
    snapshots: snapshot::Snapshotter,
}

/// Connects, starts the sender and opens the feed (reported as `service`); `None` when
/// `cancel` fired first.
async fn start(
    common: &Common,
    service: &'static str,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<Started>> {
    // Specs are validated as they are projected: the grammar compiles now, not on the
    // first job (a stall there delays every plan behind it).
    gantry_protocol::spec::JobSpec::prepare_validator();
    let signer = common.signer()?;
    let client = gantry_runtime::nats::connect(&common.nats.nats_url, true).await?;
    let js = jetstream::new(client);
    let Some((sender, sending)) = start_sender(common, signer.clone(), cancel).await? else {
        return Ok(None);
    };
    let identity = snapshot::Identity {
        service,
        chain_id: common.chain.chain_id,
        market: common.chain.market,
        registry: common.chain.registry,
        signer: signer.address(),
    };
    let restored = if common.snapshot_every > 0 {
        snapshot::restore(&js, &identity).await
    } else {
        None
    };
    let (projection, after) = match restored {
        Some(restored) => (
            restored.projection,
            (
                restored.position.sequence,
                Some(restored.position.commit_sequence),
            ),
        ),
        None => (project::Projection::default(), (0, None)),
    };
    let Some(feed) = feed::Feed::open(&js, common.chain.chain_id, service, after, cancel).await?
    else {
        return Ok(None);
    };
    let snapshots = snapshot::Snapshotter::new(
        js.clone(),
        identity,
        signer,
        common.nats.nats_replicas,
        common.snapshot_every,
        after.0,
    );
    Ok(Some(Started {
        js,
        sender,
        sending,
        feed,
        projection,
        snapshots,
    }))
}

/// Starts the sender once the chain answers (its loop to be run by the caller); `None`
/// when `cancel` fired first.
async fn start_sender(
    common: &Common,
    signer: PrivateKeySigner,
    cancel: &CancellationToken,
) -> anyhow::Result<Option<(Sender, Sending)>> {
    let config = SenderConfig {
        rpc_url: common.chain.rpc_url.clone(),
        chain_id: common.chain.chain_id,
        market: common.chain.market,
        registry: common.chain.registry,
        signer,
        max_pending: common.max_pending_txs,
        replace_after: common.replace_after,
        poll: common.receipt_poll,
        stuck_after: common.stuck_after,
    };
    let mut backoff = Backoff::default();
    loop {
        match sender::start(config.clone()).await {
            Ok(started) => return Ok(Some(started)),
            Err(e) if e.is_retryable() => {
                tracing::warn!(error = %e, "waiting for the chain");
                if !backoff.wait(cancel).await {
                    return Ok(None);
                }
            }
            Err(e) => return Err(e).context("starting the sender"),
        }
    }
}

//! `gantry-liveness`'s loop: follow the stream into the view; while holding the keeper
//! lease, send each due action once.

use std::convert::Infallible;
use std::time::Duration;

use anyhow::Context as _;
use gantry_runtime::tasks::Supervisor;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::LivenessConfig;
use crate::feed::Feed;
use crate::liveness::Keeper;
use crate::project::Applied;
use crate::project::Projection;
use crate::sender::{Call, Outcome, Sender};
use crate::view::JobView;
use crate::{connect, lease, metrics, start_sender};

/// Runs the keeper until `shutdown` fires. Every replica follows the stream, so a standby
/// that takes the lease acts at once. The keeping loop, the sender and the lease run under
/// one supervisor: any of them failing stops the others, and its error is the keeper's.
pub async fn run(config: LivenessConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate().map_err(anyhow::Error::msg)?;
    let signer = config.common.signer()?;
    let chain_id = config.common.chain.chain_id;
    let js = connect(&config.common).await?;
    let Some((sender, sending)) = start_sender(&config.common, signer, &shutdown).await? else {
        return Ok(());
    };
    let Some(feed) = Feed::open(&js, chain_id, &shutdown).await? else {
        return Ok(());
    };
    let tasks = Supervisor::new(shutdown.child_token());
    // The sender and the lease stop once the loop has: the lease is not given up while
    // this replica may still act on it.
    let helpers = tasks.shutdown().child_token();
    let stop = helpers.clone();
    tasks.spawn_critical("sending transactions", async move {
        sending.run(stop).await;
        Ok::<(), Infallible>(())
    });
    let (leading_tx, leading) = watch::channel(false);
    tasks.spawn_critical(
        "holding the keeper lease",
        lease::hold(
            js,
            chain_id,
            config.common.instance_id(),
            config.lease_ttl,
            config.common.nats.nats_replicas,
            leading_tx,
            helpers.clone(),
        ),
    );
    let stop = tasks.shutdown().clone();
    tasks.spawn_critical("keeping", async move {
        let outcome = keep(feed, sender, leading, &stop).await;
        helpers.cancel();
        outcome
    });
    tasks.wait().await
}

/// Follows the stream into the view and, while `leading`, sends what is due, until
/// `shutdown` fires.
async fn keep(
    mut feed: Feed,
    mut sender: Sender,
    mut leading: watch::Receiver<bool>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut projection = Projection::default();
    let mut keeper = Keeper::default();
    let mut retry = tokio::time::interval(Duration::from_secs(1));
    let mut dirty = false;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            message = feed.next() => {
                let Some(first) = message else {
                    anyhow::bail!("the chain stream consumer ended");
                };
                let mut next = Some(first);
                while let Some(message) = next {
                    match message {
                        Err(e) => tracing::warn!(error = %e, "reading the chain stream"),
                        Ok(message) => {
                            let applied = feed
                                .apply(&mut projection, message)
                                .context("projecting the chain stream")?;
                            dirty |= applied == Applied::Changed;
                        }
                    }
                    next = feed.next_ready();
                }
                metrics::view_block("liveness", projection.view().block);
            }
            changed = leading.changed() => {
                if changed.is_err() {
                    // The lease task ended: it failed (its error is the keeper's), or
                    // shutdown is under way.
                    shutdown.cancelled().await;
                    return Ok(());
                }
                // A new tenure starts from scratch: what the last leader sent may not have
                // landed.
                keeper = Keeper::default();
                dirty = true;
            }
            Some(report) = sender.reports.recv() => {
                let Call::Keep(action, _) = report.call else { continue };
                match report.outcome {
                    Outcome::Confirmed { block } => {
                        tracing::info!(action = ?action, block, tx = %report.tx_hash, "keeper action confirmed");
                    }
                    Outcome::Reverted { block } => {
                        // The chain moved on between the view and the block (a heartbeat, a
                        // result); the condition is not acted on again while it lasts.
                        tracing::info!(action = ?action, block, tx = %report.tx_hash, "keeper action reverted");
                    }
                    Outcome::Dropped => {
                        tracing::warn!(action = ?action, "keeper action dropped; it will be retried");
                        keeper.forget(&action);
                        dirty = true;
                    }
                }
            }
            _ = retry.tick() => {}
        }
        if dirty && feed.caught_up() && *leading.borrow() {
            dirty = false;
            let view = projection.view();
            for action in keeper.next(view) {
                let with = action
                    .job()
                    .and_then(|job| view.jobs.get(&job))
                    .map(JobView::market);
                if sender.try_send(Call::Keep(action, with)) {
                    metrics::keeper_actions(action.kind());
                    tracing::info!(action = ?action, now = view.now, "keeper action due");
                } else {
                    keeper.forget(&action);
                    dirty = true;
                }
            }
        }
    }
}

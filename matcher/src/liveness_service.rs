//! `gantry-liveness`'s loop: follow the stream into the view; while holding the keeper
//! lease, send each due action once.

use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::LivenessConfig;
use crate::feed::Feed;
use crate::liveness::Keeper;
use crate::project::Applied;
use crate::project::Projection;
use crate::sender::{Call, Outcome};
use crate::{connect, lease, metrics, start_sender};

/// Runs the keeper until `shutdown` fires. Every replica follows the stream, so a standby
/// that takes the lease acts at once.
pub async fn run(config: LivenessConfig, shutdown: CancellationToken) -> anyhow::Result<()> {
    config.validate().map_err(anyhow::Error::msg)?;
    let signer = config.common.signer()?;
    let chain_id = config.common.chain.chain_id;
    let js = connect(&config.common).await?;
    let tasks = shutdown.child_token();
    let Some((mut sender, sender_task)) = start_sender(&config.common, signer, &tasks).await?
    else {
        return Ok(());
    };
    let Some(mut feed) = Feed::open(&js, chain_id, &shutdown).await? else {
        return Ok(());
    };
    let (leading_tx, mut leading) = watch::channel(false);
    let lease_task = tokio::spawn(lease::hold(
        js.clone(),
        chain_id,
        config.common.instance_id(),
        config.lease_ttl,
        config.common.nats.nats_replicas,
        leading_tx,
        tasks.clone(),
    ));

    let mut projection = Projection::default();
    let mut keeper = Keeper::default();
    let mut retry = tokio::time::interval(Duration::from_secs(1));
    let mut dirty = false;
    let outcome: anyhow::Result<()> = 'follow: loop {
        tokio::select! {
            () = shutdown.cancelled() => break Ok(()),
            message = feed.next() => {
                let Some(first) = message else {
                    break Err(anyhow::anyhow!("the chain stream consumer ended"));
                };
                let mut next = Some(first);
                while let Some(message) = next {
                    match message {
                        Err(e) => tracing::warn!(error = %e, "reading the chain stream"),
                        Ok(message) => match feed.apply(&mut projection, message) {
                            Ok(applied) => dirty |= applied == Applied::Changed,
                            Err(e) => break 'follow Err(e).context("projecting the chain stream"),
                        },
                    }
                    next = feed.next_ready();
                }
                metrics::view_block("liveness", projection.view().block);
            }
            changed = leading.changed() => {
                if changed.is_err() {
                    break Err(anyhow::anyhow!("the lease task ended"));
                }
                // A new tenure starts from scratch: what the last leader sent may not have
                // landed.
                keeper = Keeper::default();
                dirty = true;
            }
            Some(report) = sender.reports.recv() => {
                let Call::Keep(action) = report.call else { continue };
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
            for action in keeper.next(projection.view()) {
                if sender.try_send(Call::Keep(action)) {
                    metrics::keeper_actions(action.kind());
                    tracing::info!(action = ?action, now = projection.view().now, "keeper action due");
                } else {
                    keeper.forget(&action);
                    dirty = true;
                }
            }
        }
    };
    tasks.cancel();
    sender_task.await.context("sender task")?;
    lease_task
        .await
        .context("lease task")?
        .context("keeper lease")?;
    outcome
}

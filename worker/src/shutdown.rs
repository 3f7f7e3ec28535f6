//! The graceful shutdown, in this order: no new work; running jobs get the grace period;
//! then they are stopped, checkpointed and parked; the node goes offline (heartbeats stop,
//! it is marked inactive); only then are the parked jobs given back, so that they are not
//! assigned straight back here; last the health check stops and NATS is flushed.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::assignments::Running;
use crate::health::HEALTH_INTERVAL;
use crate::job::{Ctx, StopReason};

/// The tasks beside the jobs, as the drain stops them.
#[derive(Debug)]
pub(crate) struct Background {
    /// Stops the heartbeat and the health check.
    pub(crate) heartbeats_done: CancellationToken,
    pub(crate) heartbeat: JoinHandle<()>,
    pub(crate) health: JoinHandle<()>,
    pub(crate) claimer: Option<JoinHandle<()>>,
}

/// Drains the node once the assignment loop stopped taking work.
pub(crate) async fn drain(ctx: &Ctx, running: &Running, background: Background, grace: Duration) {
    tracing::info!(running = running.len(), grace = ?grace, "stopping: finishing running jobs");
    if let Some(claimer) = background.claimer {
        claimer.abort();
    }
    let finished = tokio::time::timeout(grace, running.wait()).await.is_ok();
    if !finished {
        // Each job stops its container, uploads its last checkpoint, and waits to be
        // given back until the node is offline.
        tracing::info!(
            running = running.len(),
            "grace period over: stopping and checkpointing"
        );
        running.stop_all(StopReason::Shutdown).await;
        wait_until_parked(ctx, running).await;
    }
    go_offline(ctx, background.heartbeats_done, background.heartbeat).await;
    running.wait().await;
    let _ = background.health.await;
    let _ = ctx.nats.flush().await;
    tracing::info!("stopped");
}

/// Waits until every job still running is parked (stopped, waiting to be given back).
async fn wait_until_parked(ctx: &Ctx, running: &Running) {
    while ctx.parked.load(Ordering::SeqCst) < running.len() {
        tokio::select! {
            () = running.ended() => {}
            () = ctx.parked_changed.notified() => {}
            () = tokio::time::sleep(HEALTH_INTERVAL) => {}
        }
    }
}

/// Heartbeats stop and the node is marked inactive, so the matcher sends no more work
/// here and what is given back next is not assigned straight back; then the parked jobs
/// are released.
async fn go_offline(ctx: &Ctx, heartbeats_done: CancellationToken, heartbeat: JoinHandle<()>) {
    heartbeats_done.cancel();
    let _ = heartbeat.await;
    match ctx.chain.mark_inactive(ctx.node_id).await {
        Ok(()) => tracing::info!(node_id = ctx.node_id, "node marked inactive"),
        Err(e) => {
            tracing::warn!(node_id = ctx.node_id, error = %e, "could not mark the node inactive")
        }
    }
    ctx.offline.cancel();
}

//! The graceful shutdown, in this order:
//!
//! 1. nothing new starts: the assignment loop goes on taking assignments, and gives each
//!    back at once (claim mode stops);
//! 2. running jobs get the grace period to finish and submit;
//! 3. the others are stopped, checkpointed and given back (`reject`) while the node is
//!    still active: a reject is refused once the node was marked inactive during the
//!    attempt, and its charge (a share of one slash, growing with the time held) is
//!    small this early;
//! 4. the node goes offline: heartbeats stop and its agent marks it inactive, so the
//!    matcher sends no more work (a heartbeat at the next start reactivates it);
//! 5. the assignment loop stops, the health check stops and NATS is flushed.
//!
//! An assignment mined after the last one the loop saw and before `markInactive` is left
//! to the keeper, which reclaims it with the slash: the window is one message's way
//! through the indexer.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::assignments::Running;
use crate::error::WorkerError;
use crate::job::{Ctx, StopReason};

/// The tasks beside the jobs, as the drain stops them.
#[derive(Debug)]
pub(crate) struct Background {
    /// Stops the heartbeat and the health check.
    pub(crate) heartbeats_done: CancellationToken,
    pub(crate) heartbeat: JoinHandle<()>,
    pub(crate) health: JoinHandle<()>,
    pub(crate) claimer: Option<JoinHandle<()>>,
    /// The assignment loop, and what stops it.
    pub(crate) assignments: JoinHandle<Result<(), WorkerError>>,
    pub(crate) close_assignments: CancellationToken,
}

/// Drains the node once shutdown fired (the assignment loop gives new work back).
pub(crate) async fn drain(
    ctx: &Ctx,
    running: &Running,
    background: Background,
    grace: Duration,
) -> Result<(), WorkerError> {
    tracing::info!(running = running.len(), grace = ?grace, "stopping: finishing running jobs");
    if let Some(claimer) = background.claimer {
        claimer.abort();
    }
    let finished = tokio::time::timeout(grace, running.wait()).await.is_ok();
    if !finished {
        // Each job stops its container, uploads its last checkpoint and gives itself back.
        tracing::info!(
            running = running.len(),
            "grace period over: stopping, checkpointing and giving back"
        );
        running.stop_all(StopReason::Shutdown).await;
        running.wait().await;
    }
    go_offline(ctx, background.heartbeats_done, background.heartbeat).await;
    background.close_assignments.cancel();
    let assignments = background.assignments.await;
    // What the loop took last was given back (or, arrived after `markInactive`, is the
    // keeper's now).
    running.wait().await;
    let _ = background.health.await;
    let _ = ctx.nats.flush().await;
    tracing::info!("stopped");
    match assignments {
        Ok(result) => result,
        Err(e) => {
            tracing::error!(error = %e, "the assignment loop panicked");
            Ok(())
        }
    }
}

/// Heartbeats stop and the node's agent marks it inactive, so the matcher sends no more
/// work here.
async fn go_offline(ctx: &Ctx, heartbeats_done: CancellationToken, heartbeat: JoinHandle<()>) {
    heartbeats_done.cancel();
    let _ = heartbeat.await;
    match ctx.chain.mark_inactive(ctx.node_id).await {
        Ok(()) => tracing::info!(node_id = ctx.node_id, "node marked inactive"),
        Err(e) => {
            tracing::warn!(node_id = ctx.node_id, error = %e, "could not mark the node inactive")
        }
    }
}

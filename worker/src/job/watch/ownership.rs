//! The check that a running job is still assigned here: every heartbeat interval (at most
//! every 2 s) the chain is asked; when it says no (reclaimed, expired, or the assignment
//! was reorganised away) the job is stopped as lost and nothing is sent for it.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::super::{Assignment, Ctx, Stop, StopReason};
use super::ticker;

/// Longest time between two checks that a running job is still assigned here.
const OWNERSHIP_CHECK: Duration = Duration::from_secs(2);

/// Stops a running job that the chain no longer has assigned to this attempt.
pub(super) struct OwnershipGuard<'a> {
    ctx: &'a Ctx,
    assignment: Assignment,
    stop: Stop,
}

impl<'a> OwnershipGuard<'a> {
    pub(super) fn new(ctx: &'a Ctx, assignment: Assignment, stop: Stop) -> Self {
        Self {
            ctx,
            assignment,
            stop,
        }
    }

    /// Checks every interval until `done` fires.
    pub(super) async fn run(self, done: &CancellationToken) {
        let interval = self.ctx.settings.heartbeat_interval.min(OWNERSHIP_CHECK);
        let mut tick = ticker(interval);
        loop {
            tokio::select! {
                _ = tick.tick() => self.check().await,
                () = done.cancelled() => break,
            }
        }
    }

    async fn check(&self) {
        match self.ctx.chain.job(self.assignment.job_id).await {
            Ok(info)
                if !self.ctx.is_ours(&info, self.assignment.attempt)
                    && self.stop.reason().is_none() =>
            {
                tracing::warn!(
                    status = info.status,
                    "the job is no longer assigned here; stopping it"
                );
                self.stop.stop(StopReason::Lost);
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "ownership check"),
        }
    }
}

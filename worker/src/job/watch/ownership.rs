//! The check that a running job is still this attempt's and still has time: every
//! heartbeat interval (at most every 2 s) the market's hash of the job is compared with
//! the held state's. They differ once anyone else moved the job on (a reclaim) or the
//! assignment was reorganised away: the job is stopped as lost and nothing is sent for
//! it. The chain's time is checked against the job's stop too, since it can jump ahead
//! of this machine's timers (a node catching up, a test moving the clock).

use std::time::{Duration, SystemTime};

use alloy::primitives::B256;
use tokio_util::sync::CancellationToken;

use super::super::clock::{self, Clock};
use super::super::{Ctx, Held, Stop, StopReason};
use super::ticker;

/// Longest time between two checks that a running job is still assigned here.
const OWNERSHIP_CHECK: Duration = Duration::from_secs(2);

/// Stops a running job that the chain moved on, or whose time is up on chain.
pub(super) struct OwnershipGuard<'a> {
    ctx: &'a Ctx,
    job_id: u64,
    /// The hash the market stores while the job is this attempt's, unchanged.
    expected: B256,
    clock: Clock,
    stop: Stop,
}

impl<'a> OwnershipGuard<'a> {
    pub(super) fn new(ctx: &'a Ctx, held: &Held, clock: Clock, stop: Stop) -> Self {
        Self {
            ctx,
            job_id: held.job_id(),
            expected: held.job.state.hash(),
            clock,
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
        if self.stop.reason().is_some() {
            return;
        }
        match self.ctx.chain.job_hash(self.job_id).await {
            Ok(stored) if stored != self.expected => {
                tracing::warn!(%stored, "the job is no longer assigned here; stopping it");
                self.stop.stop(StopReason::Lost);
                return;
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "ownership check"),
        }
        match self.ctx.chain.now().await {
            Ok(newest)
                if self
                    .clock
                    .is_up(clock::chain_now(newest, SystemTime::now())) =>
            {
                tracing::info!("the job's time is up on chain; stopping it");
                self.stop.stop(StopReason::Deadline);
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "the chain's time"),
        }
    }
}

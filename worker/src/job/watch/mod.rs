//! Everything that runs beside a job's container, each concern on its own:
//!
//! ```text
//!   container output ──▶ logs::LogForwarder ──▶ gantry.jobs.<chain>.logs.<job>   (rate-limited)
//!                              │ ##gantry lines
//!                              ▼
//!                        progress::ProgressReporter ──▶ …progress.<job>  (with gpu::GpuSampler)
//!   checkpoint::CheckpointTicker: /checkpoints ──▶ the checkpoints bucket, when it changed
//!   ownership::OwnershipGuard:   jobHash ≠ the held state's ──▶ Stop(Lost);
//!                                the chain's time past the job's stop ──▶ Stop(Deadline)
//! ```
//!
//! They are joined in [`Watch::run`] and end once the container is gone and its output
//! forwarded.

mod checkpoint;
mod gpu;
mod logs;
mod ownership;
mod progress;

use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

pub(super) use self::gpu::Telemetry;
pub use self::progress::eta;
use super::clock::Clock;
use super::dirs::JobDirs;
use super::{Ctx, Held, Stop};
use crate::docker::OutputLine;

/// Progress lines waiting for the reporter.
const PROGRESS_QUEUE: usize = 64;

/// The watchers of one running job.
pub(super) struct Watch<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) held: &'a Held,
    pub(super) clock: Clock,
    pub(super) dirs: &'a JobDirs,
    pub(super) gpu_indices: Vec<u32>,
    pub(super) stop: Stop,
    /// Cancelled once the container is gone.
    pub(super) running: CancellationToken,
    /// Whom its checkpoints are encrypted to (none: in the clear).
    pub(super) seal: Vec<gantry_protocol::encryption::AgeRecipient>,
}

impl Watch<'_> {
    /// Forwards `lines` and runs the other watchers until the container is gone and its
    /// output forwarded; returns the GPU utilisation seen meanwhile.
    pub(super) async fn run(self, lines: mpsc::Receiver<OutputLine>) -> Telemetry {
        let ctx = self.ctx;
        // The container is gone and every line it printed was read.
        let done = CancellationToken::new();
        let (progress_tx, progress_rx) = mpsc::channel(PROGRESS_QUEUE);
        let forward_logs = async {
            logs::LogForwarder::new(ctx, self.held, !self.seal.is_empty())
                .run(lines, progress_tx)
                .await;
            self.running.cancelled().await;
            done.cancel();
        };
        let sampler = gpu::GpuSampler::new(&ctx.monitor, self.gpu_indices);
        // Progress estimates count the job's own time, from the assignment to its stop.
        let limit = Duration::from_secs(self.clock.stop_by - self.clock.assigned_at);
        let reporter = progress::ProgressReporter::new(ctx, self.held, limit, sampler);
        let checkpoints = checkpoint::CheckpointTicker::new(ctx, self.held, self.dirs, &self.seal);
        let ownership = ownership::OwnershipGuard::new(ctx, self.held, self.clock, self.stop);
        let ((), telemetry, (), ()) = tokio::join!(
            forward_logs,
            reporter.run(progress_rx, &done),
            checkpoints.run(&done),
            ownership.run(&done),
        );
        let _ = ctx.nats.flush().await;
        telemetry
    }
}

/// Ticks every `period`, the first time one period from now; a late tick delays the next.
/// Publishes `message` on `subject` as JSON, best effort: a lost line or update is only
/// logged (`what` names it).
async fn publish_json(
    nats: &async_nats::Client,
    subject: &str,
    message: &impl serde::Serialize,
    what: &str,
) {
    let payload = serde_json::to_vec(message).expect("job messages serialize");
    if let Err(e) = nats.publish(subject.to_owned(), payload.into()).await {
        tracing::debug!(error = %e, "{what} not published");
    }
}

fn ticker(period: Duration) -> Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.reset();
    tick
}

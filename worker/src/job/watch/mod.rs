//! Everything that runs beside a job's container, each concern on its own:
//!
//! ```text
//!   container output ──▶ logs::LogForwarder ──▶ gantry.jobs.<chain>.logs.<job>   (rate-limited)
//!                              │ ##gantry lines
//!                              ▼
//!                        progress::ProgressReporter ──▶ …progress.<job>  (with gpu::GpuSampler)
//!   checkpoint::CheckpointTicker: /checkpoints ──▶ the checkpoints bucket, when it changed
//!   ownership::OwnershipGuard:   getJob; not ours any more ──▶ Stop(Lost)
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
use super::dirs::JobDirs;
use super::{Assignment, Ctx, Stop};
use crate::docker::OutputLine;

/// Progress lines waiting for the reporter.
const PROGRESS_QUEUE: usize = 64;

/// The watchers of one running job.
pub(super) struct Watch<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) assignment: Assignment,
    pub(super) timeout: Duration,
    pub(super) dirs: &'a JobDirs,
    pub(super) gpu_indices: Vec<u32>,
    pub(super) stop: Stop,
    /// Cancelled once the container is gone.
    pub(super) running: CancellationToken,
}

impl Watch<'_> {
    /// Forwards `lines` and runs the other watchers until the container is gone and its
    /// output forwarded; returns the GPU utilisation seen meanwhile.
    pub(super) async fn run(self, lines: mpsc::Receiver<OutputLine>) -> Telemetry {
        let ctx = self.ctx;
        let job_id = self.assignment.job_id;
        // The container is gone and every line it printed was read.
        let done = CancellationToken::new();
        let (progress_tx, progress_rx) = mpsc::channel(PROGRESS_QUEUE);
        let forward_logs = async {
            logs::LogForwarder::new(ctx, self.assignment)
                .run(lines, progress_tx)
                .await;
            self.running.cancelled().await;
            done.cancel();
        };
        let sampler = gpu::GpuSampler::new(&ctx.monitor, self.gpu_indices);
        let reporter = progress::ProgressReporter::new(ctx, self.assignment, self.timeout, sampler);
        let checkpoints = checkpoint::CheckpointTicker::new(ctx, job_id, self.dirs);
        let ownership = ownership::OwnershipGuard::new(ctx, self.assignment, self.stop);
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
fn ticker(period: Duration) -> Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    tick.reset();
    tick
}

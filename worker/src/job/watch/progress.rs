//! Progress reports: the latest `##gantry` progress the job printed, merged, with a GPU
//! sample, published every `progress_report_interval` when something changed or was
//! sampled, and once more at the end when the job printed progress since.

use std::time::{Duration, Instant};

use gantry_protocol::jobs::{self, JOBS_VERSION, ProgressLine, ProgressUpdate};
use gantry_protocol::names;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::super::{Ctx, Held, now_ms};
use super::gpu::{GpuSampler, Telemetry};
use super::ticker;
use crate::inventory::GpuSample;

/// Publishes a running job's progress.
pub(super) struct ProgressReporter<'a> {
    ctx: &'a Ctx,
    job_id: u64,
    attempt: u8,
    /// The job's time, from its assignment to its stop: the ETA's bound.
    timeout: Duration,
    subject: String,
    sampler: GpuSampler<'a>,
    started: Instant,
    progress: ProgressLine,
    /// Progress was printed since the last report.
    changed: bool,
}

impl<'a> ProgressReporter<'a> {
    pub(super) fn new(
        ctx: &'a Ctx,
        held: &Held,
        timeout: Duration,
        sampler: GpuSampler<'a>,
    ) -> Self {
        Self {
            ctx,
            job_id: held.job_id(),
            attempt: held.attempt,
            timeout,
            subject: names::progress_subject(ctx.chain_id, ctx.node_id, held.job_id()),
            sampler,
            started: Instant::now(),
            progress: ProgressLine::default(),
            changed: false,
        }
    }

    /// Reports until `lines` is closed and `done` fired; returns the GPU samples' summary.
    pub(super) async fn run(
        mut self,
        mut lines: mpsc::Receiver<ProgressLine>,
        done: &CancellationToken,
    ) -> Telemetry {
        let mut tick = ticker(self.ctx.settings.progress_report_interval);
        let mut lines_open = true;
        loop {
            tokio::select! {
                line = lines.recv(), if lines_open => match line {
                    Some(line) => {
                        merge(&mut self.progress, line);
                        self.changed = true;
                    }
                    None => lines_open = false,
                },
                _ = tick.tick() => self.report().await,
                () = done.cancelled(), if !lines_open => break,
            }
        }
        self.report_last().await;
        self.sampler.into_telemetry()
    }

    /// A report with a fresh GPU sample, when there is one or progress changed.
    async fn report(&mut self) {
        let sample = self.sampler.sample();
        let elapsed = self.started.elapsed();
        let eta = eta(self.progress.progress, elapsed, self.timeout);
        if self.changed || sample.is_some() {
            self.publish(self.update(sample, elapsed, eta)).await;
            self.changed = false;
        }
    }

    /// The last progress the job printed, when not reported yet.
    async fn report_last(&self) {
        if self.changed {
            self.publish(self.update(None, self.started.elapsed(), None))
                .await;
        }
    }

    fn update(
        &self,
        sample: Option<GpuSample>,
        elapsed: Duration,
        eta_secs: Option<u64>,
    ) -> ProgressUpdate {
        ProgressUpdate {
            v: JOBS_VERSION,
            job_id: self.job_id,
            node_id: self.ctx.node_id,
            attempt: self.attempt,
            progress: self.progress.progress,
            epoch: self.progress.epoch,
            epochs: self.progress.epochs,
            metrics: self.progress.metrics.clone(),
            gpu_utilization: sample.map(|s| s.utilization),
            gpu_memory_used_mib: sample.map(|s| s.memory_used_mib),
            elapsed_secs: elapsed.as_secs(),
            eta_secs,
            at_ms: now_ms(),
        }
    }

    async fn publish(&self, update: ProgressUpdate) {
        super::publish_json(&self.ctx.nats, &self.subject, &update, "progress").await;
    }
}

/// A later progress line updates what it names and keeps the rest.
fn merge(into: &mut ProgressLine, line: ProgressLine) {
    into.progress = line.progress.or(into.progress);
    into.epoch = line.epoch.or(into.epoch);
    into.epochs = line.epochs.or(into.epochs);
    into.metrics.extend(line.metrics);
    while into.metrics.len() > jobs::MAX_METRICS {
        into.metrics.pop_last();
    }
}

/// Time left at the observed pace, bounded by what remains of the timeout.
pub fn eta(progress: Option<f64>, elapsed: Duration, timeout: Duration) -> Option<u64> {
    let progress = progress.filter(|p| *p > 0.0)?;
    let total = elapsed.as_secs_f64() / progress;
    let left = (total - elapsed.as_secs_f64()).max(0.0);
    let cap = timeout.saturating_sub(elapsed).as_secs_f64();
    Some(left.min(cap).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eta_follows_the_pace_and_the_timeout() {
        let hour = Duration::from_secs(3600);
        assert_eq!(eta(None, Duration::from_secs(10), hour), None);
        assert_eq!(eta(Some(0.0), Duration::from_secs(10), hour), None);
        assert_eq!(eta(Some(0.25), Duration::from_secs(10), hour), Some(30));
        assert_eq!(
            eta(
                Some(0.01),
                Duration::from_secs(100),
                Duration::from_secs(200)
            ),
            Some(100)
        );
        assert_eq!(eta(Some(1.0), Duration::from_secs(10), hour), Some(0));
    }

    #[test]
    fn later_progress_lines_update_what_they_name() {
        let mut progress =
            ProgressLine::parse(r#"##gantry {"epoch":1,"epochs":5,"metrics":{"loss":0.9}}"#)
                .unwrap();
        merge(
            &mut progress,
            ProgressLine::parse(r#"##gantry {"progress":0.4,"metrics":{"acc":0.5}}"#).unwrap(),
        );
        assert_eq!(progress.progress, Some(0.4));
        assert_eq!((progress.epoch, progress.epochs), (Some(1), Some(5)));
        assert_eq!(progress.metrics.len(), 2);
    }
}

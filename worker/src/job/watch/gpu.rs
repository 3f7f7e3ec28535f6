//! GPU sampling for a running job: each sample goes to the progress report and the
//! `gantry_worker_gpu_utilization` gauge, and is summed for the completion report.

use crate::inventory::{GpuMonitor, GpuSample};
use crate::metrics;

/// Samples the GPUs a job runs on.
pub(super) struct GpuSampler<'a> {
    monitor: &'a GpuMonitor,
    indices: Vec<u32>,
    telemetry: Telemetry,
}

impl<'a> GpuSampler<'a> {
    pub(super) fn new(monitor: &'a GpuMonitor, indices: Vec<u32>) -> Self {
        Self {
            monitor,
            indices,
            telemetry: Telemetry::default(),
        }
    }

    /// A sample now; `None` without NVML or GPUs.
    pub(super) fn sample(&mut self) -> Option<GpuSample> {
        let sample = self.monitor.sample(&self.indices)?;
        self.telemetry.add(sample.utilization);
        metrics::gpu_utilization(sample.utilization);
        Some(sample)
    }

    pub(super) fn into_telemetry(self) -> Telemetry {
        self.telemetry
    }
}

/// GPU utilisation samples over a run.
#[derive(Debug, Default, Clone)]
pub(in crate::job) struct Telemetry {
    sum: f64,
    count: u64,
}

impl Telemetry {
    fn add(&mut self, utilization: f64) {
        self.sum += utilization;
        self.count += 1;
    }

    pub(in crate::job) fn average(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

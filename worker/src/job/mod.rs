//! One assignment, from the stream message to the on-chain answer:
//! Received → Validate → Download → Execute → Upload → Report.
//!
//! ```text
//!   run.rs     getJob: ours? ──▶ stages.rs: validate ──▶ download (dirs, inputs, checkpoint,
//!              image) ──▶ run_container, watch/ beside it ──▶ upload_result
//!   report.rs  ──▶ submit (submitResult), or after a failure give_up (reject / abandon);
//!              then the completion report
//! ```
//!
//! Before acting the chain is asked whether the job really is assigned to this node in
//! this attempt (the stream is a view; the chain decides). While the job runs the same
//! question is asked every 2 s (or heartbeat interval if shorter); when the answer turns to
//! no (reclaimed, expired, or the assignment was reorganised away) the container is
//! stopped and nothing is sent.

mod dirs;
mod report;
mod run;
mod stages;
mod watch;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::B256;
use async_nats::jetstream;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::event_name;
use gantry_protocol::names;
use gantry_protocol::spec::JobSpec;
use gantry_protocol::status::JobStatus;
use gantry_runtime::backoff::{self, Retryable as _};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use self::watch::eta;
use crate::admit::NodeLimits;
use crate::chain::{Chain, ChainError};
use crate::config::Jobs;
use crate::docker::Executor;
use crate::fault::{Failure, FaultClass};
use crate::fetch::Fetcher;
use crate::inventory::{Gpu, GpuMonitor};

/// How often a step whose failure is transient is tried in all, the first pause (doubled
/// after each try), and the longest (never reached: 250, 500, 1000 ms).
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// What every job shares.
pub struct Ctx {
    pub chain_id: u64,
    pub node_id: u64,
    pub chain: Arc<Chain>,
    pub executor: Executor,
    pub fetcher: Fetcher,
    pub nats: async_nats::Client,
    pub chain_stream: jetstream::stream::Stream,
    pub jobs_js: jetstream::Context,
    pub results: jetstream::object_store::ObjectStore,
    pub checkpoints: jetstream::object_store::ObjectStore,
    pub settings: Jobs,
    pub limits: NodeLimits,
    pub gpus: Mutex<GpuPool>,
    pub monitor: GpuMonitor,
    pub work_dir: PathBuf,
    /// Fired once the node is offline at shutdown: only then are stopped jobs given back,
    /// so that they are not assigned straight back here.
    pub offline: CancellationToken,
    /// Jobs stopped for shutdown that wait for `offline` to give themselves back.
    pub parked: std::sync::atomic::AtomicUsize,
    pub parked_changed: tokio::sync::Notify,
    /// Notified when a job's container is running, with the time since its assignment
    /// message arrived (for tests and the start benchmark).
    pub started: Option<mpsc::UnboundedSender<(u64, Duration)>>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("chain_id", &self.chain_id)
            .field("node_id", &self.node_id)
            .finish_non_exhaustive()
    }
}

/// The node's GPUs and which are free.
#[derive(Debug)]
pub struct GpuPool {
    free: Vec<Gpu>,
}

impl GpuPool {
    pub fn new(gpus: Vec<Gpu>) -> Self {
        Self { free: gpus }
    }

    /// Takes `count` GPUs (lowest indices first), or none when fewer are free.
    pub fn take(&mut self, count: u16) -> Option<Vec<Gpu>> {
        let count = usize::from(count);
        if count > self.free.len() {
            return None;
        }
        self.free.sort_by_key(|g| g.index);
        Some(self.free.drain(..count).collect())
    }

    pub fn give_back(&mut self, gpus: Vec<Gpu>) {
        self.free.extend(gpus);
    }
}

/// An assignment as it arrived from the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    pub job_id: u64,
    pub attempt: u8,
    pub received: Instant,
}

/// Why a running job is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StopReason {
    /// The worker is shutting down: checkpoint and give the job back.
    Shutdown = 1,
    /// The chain no longer has the job assigned to this attempt: drop it.
    Lost = 2,
}

/// How a job ended on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The chain does not have this job assigned to us (already settled, reorged away).
    NotOurs,
    Submitted {
        result_hash: B256,
    },
    /// A job fault, rejected on-chain.
    Rejected(Failure),
    /// A node fault, given back on-chain.
    Abandoned(Failure),
    /// Given back on-chain because the worker is shutting down.
    Released,
    /// Taken away while running (reclaimed, expired, reorganised away).
    Lost,
    /// The answer could not be sent (the chain refused or stayed unreachable).
    Unreported(Failure),
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::NotOurs => "not_ours",
            Self::Submitted { .. } => "submitted",
            Self::Rejected(_) => "rejected",
            Self::Abandoned(_) => "abandoned",
            Self::Released => "released",
            Self::Lost => "lost",
            Self::Unreported(_) => "unreported",
        }
    }

    /// The node fault behind it, if any: the worker stops taking work until healthy.
    pub fn node_fault(&self) -> Option<&Failure> {
        match self {
            Self::Abandoned(f) | Self::Unreported(f) if f.class == FaultClass::Node => Some(f),
            _ => None,
        }
    }
}

/// A stop signal with its reason (the first one wins).
#[derive(Debug, Clone, Default)]
pub struct Stop {
    token: CancellationToken,
    reason: Arc<AtomicU8>,
}

impl Stop {
    pub fn stop(&self, reason: StopReason) {
        let _ = self
            .reason
            .compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst);
        self.token.cancel();
    }

    pub fn reason(&self) -> Option<StopReason> {
        match self.reason.load(Ordering::SeqCst) {
            1 => Some(StopReason::Shutdown),
            2 => Some(StopReason::Lost),
            _ => None,
        }
    }
}

impl Ctx {
    fn is_ours(&self, info: &JobMarket::JobInfo, attempt: u8) -> bool {
        JobStatus::try_from(info.status) == Ok(JobStatus::Assigned)
            && info.nodeId == self.node_id
            && info.attempts == attempt
    }

    async fn job_info(&self, job_id: u64) -> Result<JobMarket::JobInfo, Failure> {
        retry("getJob", || async {
            self.chain
                .job(job_id)
                .await
                .map_err(|e| Failure::transient(e.to_string()))
        })
        .await
    }

    /// The spec bytes posted with the job, read from the chain stream and checked against
    /// the hash the chain holds.
    pub(crate) async fn spec_bytes(
        &self,
        job_id: u64,
        spec_hash: B256,
    ) -> Result<Vec<u8>, Failure> {
        let subject = names::event(
            self.chain_id,
            event_name::<JobMarket::JobPosted>(),
            &job_id.to_string(),
        );
        let message = retry("read the spec", || async {
            self.chain_stream
                .get_last_raw_message_by_subject(&subject)
                .await
                .map_err(|e| Failure::transient(format!("{subject}: {e}")))
        })
        .await?;
        let envelope: EventEnvelope = serde_json::from_slice(&message.payload)
            .map_err(|e| Failure::node(format!("{subject}: {e}")))?;
        let posted: JobMarket::JobPosted = serde_json::from_value(envelope.event.data)
            .map_err(|e| Failure::node(format!("{subject}: {e}")))?;
        if JobSpec::hash_bytes(&posted.spec) != spec_hash {
            return Err(Failure::transient(
                "the stream's spec does not match the chain's hash yet",
            ));
        }
        Ok(posted.spec.to_vec())
    }
}

/// Retries a step while its failure is transient; a failure that persists is the node's.
async fn retry<T, F, Fut>(what: &str, step: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let mut attempt = 0;
    let outcome = step
        .retry(backoff::attempts(ATTEMPTS, FIRST_BACKOFF, MAX_BACKOFF))
        .when(Failure::is_retryable)
        .notify(|failure, _| {
            attempt += 1;
            tracing::warn!(step = what, attempt, error = %failure, "retrying");
        })
        .await;
    match outcome {
        Err(failure) if failure.is_retryable() => {
            Err(Failure::node(format!("{what}: {}", failure.reason)))
        }
        other => other,
    }
}

/// An unreachable chain is retried (and, persisting, is the node's problem); a refused
/// transaction is final and nothing the node could fix, so it does not mark it unhealthy.
fn chain_failure(error: ChainError) -> Failure {
    if error.is_retryable() {
        Failure::transient(error.to_string())
    } else {
        Failure::job(error.to_string())
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_are_taken_whole_lowest_first() {
        let gpu = |index| Gpu {
            index,
            uuid: format!("GPU-{index}"),
            name: "NVIDIA H100".into(),
            vram_mib: 81_559,
        };
        let mut pool = GpuPool::new(vec![gpu(2), gpu(0), gpu(1)]);
        assert_eq!(pool.take(4), None);
        let two = pool.take(2).unwrap();
        assert_eq!(two.iter().map(|g| g.index).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(pool.take(2), None);
        pool.give_back(two);
        assert_eq!(pool.take(3).unwrap().len(), 3);
        assert_eq!(pool.take(0), Some(vec![]));
    }
}

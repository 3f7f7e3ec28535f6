//! One assignment, from the stream message to the on-chain answer:
//! Received → Check → Validate → Download → Execute → Upload → Answer.
//!
//! ```text
//!   mod.rs     check: read_job (terms + state, checked against jobHash): ours, this attempt?
//!   run.rs     ──▶ stages.rs: validate ──▶ clock.rs: stop_by ──▶ download (dirs, inputs,
//!              checkpoint, image) ──▶ run_container, watch/ beside it ──▶ upload_result
//!   report.rs  ──▶ submitResult (the result, or the failure report of a job that failed by
//!              itself), or reject (a job that cannot start, a node fault, a shutdown, no
//!              free slot); then the completion report
//! ```
//!
//! Before acting the chain is asked whether the job really is assigned to this node in
//! this attempt (the stream is a view; the chain decides): the job is read as its terms and
//! state, which the worker then keeps current (its own calls' events are folded back in)
//! and passes to every call. While the job runs, the market's hash of it is compared with
//! the held state's every 2 s (or heartbeat interval if shorter); when they differ
//! (reclaimed, or the assignment was reorganised away) the container is stopped and
//! nothing is sent.
//!
//! The job's clock ([`clock`]) is the chain's: it runs from the assignment, for the spec's
//! `timeoutSecs`, and ends `answer_margin` before the attempt does at the latest. Whatever
//! the job does within it is the job's affair: a job that runs into its limit, exits
//! non-zero or writes too much is answered with a failure report as its result (the node
//! did the work and is paid); only a job that cannot even start is rejected, at once.

pub mod clock;
mod dirs;
mod provide;
mod report;
mod run;
pub mod seat;
pub(crate) mod stages;
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
use gantry_protocol::market::Job;
use gantry_protocol::names;
use gantry_protocol::spec::JobSpec;
use gantry_protocol::status::JobStatus;
use gantry_runtime::backoff::{self, Retryable as _};
use gantry_runtime::market::ReadJobError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use self::seat::SeatTime;
pub use self::stages::{FAILED_OUTPUTS_DIR, FAILURE_FILE, FailureReport};
pub use self::watch::eta;
use crate::admit::NodeLimits;
use crate::chain::{Chain, ChainError};
use crate::config::Jobs;
use crate::docker::Executor;
use crate::fault::{Failure, FaultClass};
use crate::fetch::Fetcher;
use crate::inventory::{Gpu, GpuMonitor};
use crate::space::SpacePool;
use crate::wasm::WasmEngine;

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
    /// The Docker engine, when the node runs Docker jobs.
    pub executor: Option<Executor>,
    /// The WASM engine, when the node runs WASM jobs.
    pub wasm: Option<WasmEngine>,
    pub fetcher: Fetcher,
    pub nats: async_nats::Client,
    pub chain_stream: jetstream::stream::Stream,
    pub jobs_js: jetstream::Context,
    /// The node-scoped bucket of results (`gantry_runtime::objects`), on `jobs_js`.
    pub results: String,
    /// The node-scoped bucket of checkpoints (`gantry_runtime::objects`), on `jobs_js`.
    pub checkpoints: String,
    /// The job-key exchange (`gantry_runtime::keys`), opened when a job first needs it.
    pub keys: tokio::sync::OnceCell<async_nats::jetstream::kv::Store>,
    /// Replicas of what the worker makes where it may (`nats_replicas`).
    pub nats_replicas: usize,
    pub settings: Jobs,
    /// Test hooks (debug builds only).
    pub test: crate::config::TestHooks,
    pub limits: NodeLimits,
    pub gpus: Mutex<GpuPool>,
    pub monitor: GpuMonitor,
    pub work_dir: PathBuf,
    /// The job slots' disk spaces.
    pub spaces: Arc<SpacePool>,
    /// The node's bucket of sealed results is there: it can provide refereed jobs.
    pub sealed_results: bool,
    /// Notified when a job's container is running, with the time since its assignment
    /// message arrived and its steps (for tests and the start benchmarks).
    pub started: Option<mpsc::UnboundedSender<Started>>,
}

/// A job running: how long after its assignment's message, and where that time went.
#[derive(Debug, Clone)]
pub struct Started {
    pub job_id: u64,
    /// From the assignment's message to the container or module running.
    pub since: Duration,
    /// Each step's time in order (check, spec, space, download, start), then the
    /// download's parts (`download.inputs`, `.checkpoint`, `.runnable`), which overlap,
    /// each from the download's start.
    pub steps: Vec<(&'static str, Duration)>,
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

/// An assignment as it arrived from the stream (`JobAssigned`). The attempt's end
/// (`until`) names the attempt together with the job id: a job given back and assigned
/// here again (after a reorg) is another attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    pub job_id: u64,
    /// Chain time by which the attempt must be answered.
    pub until: u64,
    /// The block the assignment was mined in: the chain is read at it or later.
    pub block: u64,
    pub received: Instant,
    /// Whether this node was handed the assignment before (a redelivery): its earlier run
    /// of the attempt was lost to the worker or the chain, never to the job.
    pub redelivered: bool,
}

/// An assignment the chain confirmed: the job's terms and current state (kept current
/// with the worker's own calls), and the attempt's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub assignment: Assignment,
    /// 1 for the job's first attempt: every earlier attempt ended with its node barred
    /// (a reject or a reclaim), so it is the job's barred count plus one.
    pub attempt: u8,
    pub job: Job,
}

impl Held {
    pub fn job_id(&self) -> u64 {
        self.assignment.job_id
    }
}

/// Why a running job is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StopReason {
    /// The worker is shutting down: checkpoint and give the job back.
    Shutdown = 1,
    /// The chain no longer has the job assigned to this attempt: drop it.
    Lost = 2,
    /// The job's clock ran out (chain time moved past its stop): the job's own limit.
    Deadline = 3,
}

/// Why the worker gives a job back (`reject`) instead of answering it. Each is sent at
/// once, while the charge (a share of one slash, growing with the time the job was held)
/// is small.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GiveBack {
    /// The job cannot start for its own reasons (spec, requirements, image, inputs).
    Job(Failure),
    /// The node could not run it (engine down, disk full, a step that kept failing): the
    /// node takes no work until healthy.
    Node(Failure),
    /// The node runs as many jobs as it takes at once already.
    OverCapacity { capacity: usize },
    /// The node is unhealthy and starts nothing.
    Unhealthy(String),
    /// The worker is shutting down.
    ShuttingDown,
    /// The job's clock ran out before it could start, and its assignment reached the
    /// worker only after that (the worker was down or behind): the node's lateness.
    NoTimeLeft,
    /// The job's clock ran out on a run again: this node had run the attempt before and
    /// lost that run (the worker died, or its answer never reached the chain), so the job
    /// did not get its time here through its own doing.
    RunAgainOutOfTime,
}

impl GiveBack {
    /// A failure of a stage before the job started: the job's or the node's (a transient
    /// failure has been retried already and, persisting, is the node's).
    pub fn from_failure(failure: Failure) -> Self {
        match failure.class {
            FaultClass::Job => Self::Job(failure),
            FaultClass::Node | FaultClass::Transient => Self::Node(Failure::node(failure.reason)),
        }
    }

    /// The reason sent on-chain with the reject (at most [`crate::fault::MAX_REASON`]
    /// bytes).
    pub fn reason(&self) -> String {
        let reason = match self {
            Self::Job(f) => f.reason.clone(),
            Self::Node(f) => format!("node fault: {}", f.reason),
            Self::OverCapacity { capacity } => {
                format!("over capacity: the node runs {capacity} job(s) at once")
            }
            Self::Unhealthy(why) => format!("node unhealthy: {why}"),
            Self::ShuttingDown => "the node is shutting down".into(),
            Self::NoTimeLeft => "no time left to run the job before its attempt ends".into(),
            Self::RunAgainOutOfTime => {
                "node fault: its first run of the job was lost, and the run again ran out of the job's time".into()
            }
        };
        crate::fault::bounded(reason)
    }

    /// The metric label of the outcome.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Job(_) => "rejected",
            Self::Node(_) => "node_fault",
            Self::OverCapacity { .. } => "over_capacity",
            Self::Unhealthy(_) => "unhealthy",
            Self::ShuttingDown => "released",
            Self::NoTimeLeft | Self::RunAgainOutOfTime => "late",
        }
    }
}

/// How a job ended on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The chain does not have this job assigned to us (already settled, reorged away).
    NotOurs,
    Submitted {
        result_hash: B256,
    },
    /// The job failed by itself while it ran (its own timeout, a non-zero exit, out of
    /// memory, too much output): its failure report was submitted as the result.
    Failed {
        result_hash: B256,
        failure: Failure,
    },
    /// Given back on-chain with `reject`.
    GivenBack(GiveBack),
    /// Taken away while running (reclaimed, reorganised away).
    Lost,
    /// The answer could not be sent (the chain refused or stayed unreachable).
    Unreported(Failure),
    /// The attempt is over on chain (its `until` passed, or the job is no longer this
    /// attempt's) with no answer of ours: nothing can be sent for it any more, so it is
    /// dropped, never run again (a keeper reclaims it).
    Expired,
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Self::NotOurs => "not_ours",
            Self::Submitted { .. } => "submitted",
            Self::Failed { .. } => "failed",
            Self::GivenBack(why) => why.label(),
            Self::Lost => "lost",
            Self::Unreported(_) => "unreported",
            Self::Expired => "expired",
        }
    }

    /// The node fault behind it, if any: the worker stops taking work until healthy.
    pub fn node_fault(&self) -> Option<&Failure> {
        match self {
            Self::GivenBack(GiveBack::Node(f)) => Some(f),
            Self::Unreported(f) if f.class == FaultClass::Node => Some(f),
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
            3 => Some(StopReason::Deadline),
            _ => None,
        }
    }

    /// Completes once the job is asked to stop.
    pub async fn stopped(&self) {
        self.token.cancelled().await;
    }
}

impl Ctx {
    /// The assignment, if the chain has it: the job Assigned to this node in this very
    /// attempt, and the node still served by this agent. `None` for a stale message (the
    /// job moved on, the assignment was reorganised away, the node's agent changed).
    pub async fn check(&self, assignment: Assignment) -> Result<Option<Held>, Failure> {
        let job_id = assignment.job_id;
        // An RPC node behind the indexer would show the job before its assignment, and a
        // job of ours would be taken for someone else's.
        retry("wait for the assignment's block", || async {
            let head = self.chain.block_number().await.map_err(chain_failure)?;
            if head < assignment.block {
                return Err(Failure::transient(format!(
                    "the RPC node is at block {head}, behind the assignment's {}",
                    assignment.block
                )));
            }
            Ok(())
        })
        .await?;
        // The job and the node, at once.
        let job = retry("read the job", || async {
            match self.chain.read_job(job_id).await {
                Ok(job) => Ok(Some(job)),
                // Its posting is not on this branch of the chain any more.
                Err(ChainError::ReadJob(ReadJobError::NotPosted(_))) => Ok(None),
                Err(e) => Err(chain_failure(e)),
            }
        });
        let node = retry("read the node", || async {
            self.chain.node(self.node_id).await.map_err(chain_failure)
        });
        let (job, node) = tokio::join!(job, node);
        let Some(job) = job? else {
            return Ok(None);
        };
        if !self.is_ours(&job, assignment.until) {
            return Ok(None);
        }
        let node = node?;
        if node.agent != self.chain.agent() {
            // Only the node's agent may answer: this worker cannot even give it back.
            tracing::error!(
                node_id = self.node_id,
                agent = %node.agent,
                "the node's agent is no longer this worker's key: leaving the job to it"
            );
            return Ok(None);
        }
        Ok(Some(Held {
            assignment,
            attempt: job.state.barred.saturating_add(1),
            job,
        }))
    }

    /// Whether the attempt of `assignment` is over on chain: the job no longer Assigned to
    /// this node in it, or the chain's time at or past its `until` (where the market
    /// refuses every answer). An unreachable chain is an error: the caller asks again
    /// later.
    pub async fn attempt_over(&self, assignment: Assignment) -> Result<bool, Failure> {
        let job = retry("read the job", || async {
            match self.chain.read_job(assignment.job_id).await {
                Ok(job) => Ok(Some(job)),
                Err(ChainError::ReadJob(ReadJobError::NotPosted(_))) => Ok(None),
                Err(e) => Err(chain_failure(e)),
            }
        })
        .await?;
        let Some(job) = job else {
            return Ok(true);
        };
        if !self.is_ours(&job, assignment.until) {
            return Ok(true);
        }
        self.past(assignment.until).await
    }

    /// Whether the chain's time is at or past `until` (the market refuses every answer of
    /// an attempt from then on).
    pub async fn past(&self, until: u64) -> Result<bool, Failure> {
        Ok(self.chain_now().await? >= until)
    }

    /// Whether `job` is Assigned to this node in the attempt ending at `until`.
    fn is_ours(&self, job: &Job, until: u64) -> bool {
        job.state.status == JobStatus::Assigned
            && job.state.node_id == self.node_id
            && job.state.until == until
    }

    /// The chain's time as best this machine can tell ([`clock::chain_now`]).
    pub(crate) async fn chain_now(&self) -> Result<u64, Failure> {
        let newest = retry("read the chain's time", || async {
            self.chain.now().await.map_err(chain_failure)
        })
        .await?;
        Ok(clock::chain_now(newest, SystemTime::now()))
    }

    /// The spec bytes posted with the job, read from the chain stream and checked against
    /// the hash in the job's terms.
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
impl Ctx {
    /// Puts a packed file as this node's object `key` of the results bucket.
    pub(crate) async fn put_result(
        &self,
        key: &str,
        packed: &crate::archive::Packed,
    ) -> Result<(), Failure> {
        let file = tokio::fs::File::open(&packed.path)
            .await
            .map_err(|e| crate::archive::local(&packed.path, e))?;
        gantry_runtime::objects::put(
            &self.jobs_js,
            &self.results,
            self.node_id,
            key,
            Default::default(),
            file,
        )
        .await
        .map_err(|e| Failure::transient(format!("upload {key}: {e}")))?;
        crate::metrics::object_bytes("out", packed.size);
        Ok(())
    }
}

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
    fn a_transaction_the_chain_never_decided_on_is_sent_again_not_blamed_on_the_job() {
        let tx = alloy::primitives::B256::repeat_byte(1);
        for error in [
            ChainError::Dropped {
                call: "submitResult",
                tx,
            },
            ChainError::NotMined {
                call: "submitResult",
                tx,
            },
        ] {
            let failure = chain_failure(error);
            assert_eq!(failure.class, FaultClass::Transient, "{failure}");
        }
        let refused = ChainError::Reverted {
            call: "submitResult",
            reason: "job 4 is completed".into(),
        };
        assert_eq!(chain_failure(refused).class, FaultClass::Job);
    }

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

    #[test]
    fn a_give_back_names_its_reason_and_only_a_node_fault_marks_the_node() {
        let node = GiveBack::from_failure(Failure::transient("rpc down"));
        assert_eq!(node, GiveBack::Node(Failure::node("rpc down")));
        assert_eq!(
            Outcome::GivenBack(node).node_fault(),
            Some(&Failure::node("rpc down"))
        );
        let job = GiveBack::from_failure(Failure::job("invalid spec: no image"));
        assert_eq!(job.reason(), "invalid spec: no image");
        assert_eq!(Outcome::GivenBack(job).node_fault(), None);
        let long = GiveBack::Unhealthy("docker engine unreachable: ".repeat(20));
        assert!(
            long.reason().len() <= crate::fault::MAX_REASON,
            "fits the market's texts"
        );
        for (give_back, says) in [
            (GiveBack::OverCapacity { capacity: 2 }, "over capacity"),
            (GiveBack::Unhealthy("disk full".into()), "disk full"),
            (GiveBack::ShuttingDown, "shutting down"),
            (GiveBack::NoTimeLeft, "no time left"),
            (GiveBack::RunAgainOutOfTime, "first run of the job was lost"),
        ] {
            assert!(give_back.reason().contains(says), "{give_back:?}");
            assert_eq!(Outcome::GivenBack(give_back).node_fault(), None);
        }
    }
}

//! One assignment, from the stream message to the on-chain answer:
//! Received → Validate → Download → Execute → Upload → Report.
//!
//! Before acting the chain is asked whether the job really is assigned to this node in
//! this attempt (the stream is a view; the chain decides). While the job runs the same
//! question is asked every 2 s (or heartbeat interval if shorter); when the answer turns to no (reclaimed,
//! expired, or the assignment was reorganised away) the container is stopped and nothing
//! is sent.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::B256;
use async_nats::jetstream;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::event_name;
use gantry_protocol::jobs::{
    self, CompletionReport, CompletionStatus, JOBS_VERSION, LogLine, ProgressLine, ProgressUpdate,
};
use gantry_protocol::names;
use gantry_protocol::spec::{INPUTS_DIR, JobSpec};
use gantry_protocol::status::JobStatus;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::admit::{Admitted, NodeLimits, admit};
use crate::chain::Chain;
use crate::config::Jobs;
use crate::docker::{Executor, JOB_LABEL, NODE_LABEL, OutputLine, RunPlan};
use crate::fault::{Failure, FaultClass};
use crate::fetch::Fetcher;
use crate::inventory::{Gpu, GpuMonitor};
use crate::store;

/// Log lines a job may send per second on average, and in a burst.
const LOG_RATE: f64 = 200.0;
const LOG_BURST: f64 = 2_000.0;
/// How often an unfinished transient step is retried, and the first pause.
const RETRIES: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How long a stopped job may take to exit after SIGTERM (to write a last checkpoint).
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Longest time between two checks that a running job is still assigned here.
const OWNERSHIP_CHECK: Duration = Duration::from_secs(2);

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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Retries a step while its failure is transient; a failure that persists is the node's.
async fn retry<T, F, Fut>(what: &str, mut step: F) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=RETRIES {
        match step().await {
            Err(f) if f.class == FaultClass::Transient && attempt < RETRIES => {
                tracing::warn!(step = what, attempt, error = %f, "retrying");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            Err(f) if f.class == FaultClass::Transient => {
                return Err(Failure::node(format!("{what}: {}", f.reason)));
            }
            other => return other,
        }
    }
    unreachable!("the last attempt returns")
}

impl Ctx {
    fn is_ours(&self, info: &JobMarket::JobInfo, attempt: u8) -> bool {
        JobStatus::try_from(info.status as u8) == Ok(JobStatus::Assigned)
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

    /// Runs one assignment to its end and answers on-chain.
    pub async fn run(&self, assignment: Assignment, stop: Stop) -> Outcome {
        let job_id = assignment.job_id;
        let info = match self.job_info(job_id).await {
            Ok(info) => info,
            Err(f) => return Outcome::Unreported(f),
        };
        if !self.is_ours(&info, assignment.attempt) {
            return Outcome::NotOurs;
        }
        let started = Instant::now();
        let dir = self
            .work_dir
            .join(format!("{job_id}-{}", assignment.attempt));
        let mut gpus_held = Vec::new();
        let result = self
            .execute(assignment, &info, &dir, &stop, &mut gpus_held)
            .await;
        self.gpus
            .lock()
            .expect("the pool lock is never poisoned")
            .give_back(gpus_held);
        let outcome = match result {
            Ok(Executed::Done {
                hash,
                uri,
                size,
                report,
            }) => {
                match retry("submitResult", || async {
                    self.chain
                        .submit_result(job_id, hash, uri.clone())
                        .await
                        .map_err(chain_failure)
                })
                .await
                {
                    Ok(()) => {
                        self.report(report.finish(
                            CompletionStatus::Submitted,
                            Some((hash, uri, size)),
                            None,
                        ))
                        .await;
                        Outcome::Submitted { result_hash: hash }
                    }
                    Err(f) => Outcome::Unreported(f),
                }
            }
            Ok(Executed::Lost) => Outcome::Lost,
            Err((failure, report)) => {
                self.give_up(job_id, assignment.attempt, failure, report, &stop)
                    .await
            }
        };
        if let Err(e) = tokio::fs::remove_dir_all(&dir).await
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(job_id, dir = %dir.display(), error = %e, "could not remove the job's directory");
        }
        metrics::histogram!("gantry_worker_job_seconds", "outcome" => outcome.label())
            .record(started.elapsed().as_secs_f64());
        outcome
    }

    /// Rejects (job fault) or abandons (node fault, shutdown) after a failure.
    async fn give_up(
        &self,
        job_id: u64,
        attempt: u8,
        failure: Failure,
        report: Report,
        stop: &Stop,
    ) -> Outcome {
        // Taken away meanwhile: nothing to answer.
        match self.chain.job(job_id).await {
            Ok(info) if !self.is_ours(&info, attempt) => return Outcome::Lost,
            _ => {}
        }
        let shutting_down = stop.reason() == Some(StopReason::Shutdown);
        if failure.class == FaultClass::Job && !shutting_down {
            tracing::warn!(job_id, reason = %failure.reason, "rejecting the job");
            let sent = retry("reject", || async {
                self.chain
                    .reject(job_id, failure.reason.clone())
                    .await
                    .map_err(chain_failure)
            })
            .await;
            self.report(report.finish(CompletionStatus::JobFault, None, Some(&failure)))
                .await;
            return match sent {
                Ok(()) => Outcome::Rejected(failure),
                Err(f) => Outcome::Unreported(f),
            };
        }
        if shutting_down {
            self.parked.fetch_add(1, Ordering::SeqCst);
            self.parked_changed.notify_waiters();
            self.offline.cancelled().await;
        }
        tracing::warn!(job_id, reason = %failure.reason, "giving the job back");
        let sent = retry("abandon", || async {
            self.chain.abandon(job_id).await.map_err(chain_failure)
        })
        .await;
        self.report(report.finish(CompletionStatus::NodeFault, None, Some(&failure)))
            .await;
        let given_back = match sent {
            Ok(()) => Ok(()),
            // A keeper may reclaim it first (the node is inactive once the worker shuts
            // down): the job is back on the market all the same, at the same slash.
            Err(f) => match self.chain.job(job_id).await {
                Ok(info) if !self.is_ours(&info, attempt) => {
                    tracing::info!(job_id, "the job was reclaimed before the abandon landed");
                    Ok(())
                }
                _ => Err(f),
            },
        };
        match given_back {
            Ok(()) if shutting_down => Outcome::Released,
            Ok(()) => Outcome::Abandoned(failure),
            Err(f) => Outcome::Unreported(Failure {
                class: failure.class,
                reason: format!("{}; abandon failed: {}", failure.reason, f.reason),
            }),
        }
    }

    async fn report(&self, report: CompletionReport) {
        let subject = names::completion_subject(self.chain_id, report.job_id);
        let payload = serde_json::to_vec(&report).expect("reports serialize");
        let published = retry("publish the completion report", || async {
            self.jobs_js
                .publish(subject.clone(), payload.clone().into())
                .await
                .map_err(|e| Failure::transient(e.to_string()))?
                .await
                .map_err(|e| Failure::transient(e.to_string()))
        })
        .await;
        if let Err(f) = published {
            tracing::warn!(job_id = report.job_id, error = %f, "completion report not published");
        }
    }

    async fn execute(
        &self,
        assignment: Assignment,
        info: &JobMarket::JobInfo,
        dir: &Path,
        stop: &Stop,
        gpus_held: &mut Vec<Gpu>,
    ) -> Result<Executed, (Failure, Report)> {
        let job_id = assignment.job_id;
        let mut report = Report::new(self.node_id, job_id, assignment.attempt);
        let fail = |f: Failure, r: &Report| Err((f, r.clone()));

        // Validate.
        let spec_bytes = match self.spec_bytes(job_id, info.specHash).await {
            Ok(bytes) => bytes,
            Err(f) => return fail(f, &report),
        };
        let admitted = match admit(
            &spec_bytes,
            &info.requirements,
            &self.limits,
            &self.settings,
        ) {
            Ok(admitted) => admitted,
            Err(f) => return fail(f, &report),
        };
        let Some(gpus) = self
            .gpus
            .lock()
            .expect("the pool lock is never poisoned")
            .take(admitted.gpus)
        else {
            return fail(
                Failure::node(format!("no {} free GPUs on this node", admitted.gpus)),
                &report,
            );
        };
        *gpus_held = gpus.clone();

        // Download inputs, restore the latest checkpoint.
        let stage = Instant::now();
        let dirs = match JobDirs::create(dir).await {
            Ok(dirs) => dirs,
            Err(f) => return fail(f, &report),
        };
        if let Err(f) = self.stage_inputs(&admitted.spec, &dirs).await {
            return fail(f, &report);
        }
        let restored = match self.restore_checkpoint(job_id, &dirs).await {
            Ok(restored) => restored,
            Err(f) => return fail(f, &report),
        };
        let image_user =
            match retry("image", || self.executor.ensure_image(&admitted.spec.image)).await {
                Ok(user) => user,
                Err(f) => return fail(f, &report),
            };
        record_stage("download", stage);

        // Execute.
        let stage = Instant::now();
        let plan = self.plan(assignment, &admitted, &dirs, image_user, &gpus, restored);
        let (lines_tx, lines_rx) = mpsc::channel(1024);
        let running = CancellationToken::new();
        let watchers = self.watch(
            assignment,
            &admitted,
            &dirs,
            gpus.iter().map(|g| g.index).collect(),
            lines_rx,
            stop.clone(),
            running.clone(),
        );
        let run = self.executor.run(
            &plan,
            admitted.timeout,
            stop.token.clone(),
            // Shutting down, the job gets time to write a checkpoint; a job that is no
            // longer ours is killed at once.
            || match stop.reason() {
                Some(StopReason::Lost) => Duration::ZERO,
                _ => STOP_GRACE,
            },
            lines_tx,
            |elapsed_since_created| {
                let since = assignment.received.elapsed();
                tracing::info!(job_id, ?since, ?elapsed_since_created, "container running");
                metrics::histogram!("gantry_worker_start_seconds").record(since.as_secs_f64());
                if let Some(started) = &self.started {
                    let _ = started.send((job_id, since));
                }
            },
        );
        // The watchers run beside the container and end once it is gone.
        let run = async {
            let ran = run.await;
            running.cancel();
            ran
        };
        let (ran, telemetry) = tokio::join!(run, watchers);
        let telemetry = telemetry.unwrap_or_default();
        report.compute_secs = stage.elapsed().as_secs();
        report.gpu_secs = stage.elapsed().as_secs() * gpus.len() as u64;
        report.avg_gpu_utilization = telemetry.average();
        record_stage("execute", stage);
        let outcome = match ran {
            Ok(outcome) => outcome,
            Err(f) => return fail(f, &report),
        };
        match stop.reason() {
            Some(StopReason::Lost) => return Ok(Executed::Lost),
            Some(StopReason::Shutdown) => {
                // Keep what the job saved so the next node resumes from it.
                let _ = self.upload_checkpoint(job_id, &dirs, &mut None).await;
                return fail(Failure::node("the worker is shutting down"), &report);
            }
            None => {}
        }
        if let Some(f) = outcome.failure(admitted.memory_bytes, admitted.timeout) {
            return fail(f, &report);
        }

        // Upload.
        let stage = Instant::now();
        let result_dir = dirs.outputs.join(
            admitted
                .spec
                .outputs
                .path
                .trim_start_matches(gantry_protocol::spec::OUTPUTS_DIR)
                .trim_start_matches('/'),
        );
        if !result_dir.is_dir() {
            return fail(
                Failure::job(format!("{} was not created", admitted.spec.outputs.path)),
                &report,
            );
        }
        let tar_path = dirs.root.join("result.tar");
        let limit = admitted.output_limit;
        let packed =
            match tokio::task::spawn_blocking(move || store::pack(&result_dir, &tar_path, limit))
                .await
            {
                Ok(Ok(packed)) => packed,
                Ok(Err(f)) => return fail(f, &report),
                Err(e) => return fail(Failure::node(format!("packing the result: {e}")), &report),
            };
        let key = format!("{job_id}-{}", assignment.attempt);
        if let Err(f) = retry("upload the result", || {
            store::upload(&self.results, &key, &packed)
        })
        .await
        {
            return fail(f, &report);
        }
        record_stage("upload", stage);
        Ok(Executed::Done {
            hash: B256::from(packed.sha256),
            uri: format!("nats://{}/{key}", names::results_bucket(self.chain_id)),
            size: packed.size,
            report,
        })
    }

    fn plan(
        &self,
        assignment: Assignment,
        admitted: &Admitted,
        dirs: &JobDirs,
        image_user: Option<String>,
        gpus: &[Gpu],
        restored: bool,
    ) -> RunPlan {
        let spec = &admitted.spec;
        let mut env: Vec<(String, String)> = spec.env.clone().into_iter().collect();
        env.extend([
            ("GANTRY_JOB_ID".into(), assignment.job_id.to_string()),
            ("GANTRY_ATTEMPT".into(), assignment.attempt.to_string()),
            ("GANTRY_RESUMED".into(), u8::from(restored).to_string()),
            (
                "GANTRY_GPU_MEMORY_PERCENT".into(),
                admitted.gpu_memory_percent.to_string(),
            ),
            (
                "GANTRY_CPU_THREADS".into(),
                admitted.cpu_threads.to_string(),
            ),
            ("OMP_NUM_THREADS".into(), admitted.cpu_threads.to_string()),
        ]);
        RunPlan {
            name: format!(
                "gantry-{}-{}-{}",
                self.chain_id, assignment.job_id, assignment.attempt
            ),
            image: spec.image.clone(),
            command: spec.command.clone(),
            env,
            image_user,
            inputs_dir: dirs.inputs.clone(),
            outputs_dir: dirs.outputs.clone(),
            checkpoints_dir: dirs.checkpoints.clone(),
            memory_bytes: admitted.memory_bytes,
            cpu_threads: admitted.cpu_threads,
            pids_limit: self.settings.pids_limit,
            gpu_uuids: gpus.iter().map(|g| g.uuid.clone()).collect(),
            labels: vec![
                (NODE_LABEL.into(), self.node_id.to_string()),
                (JOB_LABEL.into(), assignment.job_id.to_string()),
            ],
        }
    }

    async fn stage_inputs(&self, spec: &JobSpec, dirs: &JobDirs) -> Result<(), Failure> {
        for input in &spec.inputs {
            // The fetcher retried transient errors already. An input that stays
            // unreachable is refused as the job's: a dead host in a spec must not get
            // providers slashed.
            let fetched = self
                .fetcher
                .fetch(input)
                .await
                .map_err(|e| match e.class() {
                    FaultClass::Node => Failure::node(e.to_string()),
                    FaultClass::Job | FaultClass::Transient => Failure::job(e.to_string()),
                })?;
            let relative = input
                .path
                .strip_prefix(INPUTS_DIR)
                .unwrap_or(&input.path)
                .trim_start_matches('/');
            let target = dirs.inputs.join(relative);
            if let Some(parent) = target.parent() {
                tokio::fs::create_dir_all(parent)
                    .await
                    .map_err(|e| Failure::node(format!("inputs: {e}")))?;
            }
            // A hard link shares the cached bytes; the mount is read-only.
            if tokio::fs::hard_link(&fetched.path, &target).await.is_err() {
                tokio::fs::copy(&fetched.path, &target)
                    .await
                    .map_err(|e| Failure::node(format!("inputs: {e}")))?;
            }
        }
        Ok(())
    }

    async fn restore_checkpoint(&self, job_id: u64, dirs: &JobDirs) -> Result<bool, Failure> {
        let tar_path = dirs.root.join("restore.tar");
        let key = job_id.to_string();
        let limit = self.settings.max_output_bytes;
        let found = retry("download the checkpoint", || {
            store::download(&self.checkpoints, &key, &tar_path, limit)
        })
        .await?;
        if !found {
            return Ok(false);
        }
        let into = dirs.checkpoints.clone();
        let from = tar_path.clone();
        tokio::task::spawn_blocking(move || store::unpack(&from, &into))
            .await
            .map_err(|e| Failure::node(format!("restoring the checkpoint: {e}")))??;
        let _ = tokio::fs::remove_file(&tar_path).await;
        make_writable(&dirs.checkpoints).await?;
        tracing::info!(job_id, "restored the latest checkpoint");
        Ok(true)
    }

    /// Packs `/checkpoints` and uploads it when it changed since `last`.
    async fn upload_checkpoint(
        &self,
        job_id: u64,
        dirs: &JobDirs,
        last: &mut Option<[u8; 32]>,
    ) -> Result<(), Failure> {
        let is_empty = std::fs::read_dir(&dirs.checkpoints)
            .map(|mut d| d.next().is_none())
            .unwrap_or(true);
        if is_empty {
            return Ok(());
        }
        let from = dirs.checkpoints.clone();
        let into = dirs.root.join("checkpoint.tar");
        let limit = self.settings.max_output_bytes;
        let packed = tokio::task::spawn_blocking(move || store::pack(&from, &into, limit))
            .await
            .map_err(|e| Failure::node(format!("packing the checkpoint: {e}")))??;
        if *last != Some(packed.sha256) {
            store::upload(&self.checkpoints, &job_id.to_string(), &packed).await?;
            *last = Some(packed.sha256);
            metrics::counter!("gantry_worker_checkpoints_total").increment(1);
            tracing::debug!(job_id, bytes = packed.size, "checkpoint uploaded");
        }
        let _ = tokio::fs::remove_file(&packed.path).await;
        Ok(())
    }

    /// Everything that runs beside the container: logs and progress to NATS, checkpoint
    /// uploads, and the check that the job is still ours. Ends when `running` is cancelled.
    #[allow(clippy::too_many_arguments)]
    fn watch<'a>(
        &'a self,
        assignment: Assignment,
        admitted: &Admitted,
        dirs: &'a JobDirs,
        gpu_indices: Vec<u32>,
        mut lines: mpsc::Receiver<OutputLine>,
        stop: Stop,
        running: CancellationToken,
    ) -> impl std::future::Future<Output = Result<Telemetry, ()>> + 'a {
        let job_id = assignment.job_id;
        let timeout = admitted.timeout;
        async move {
            let started = Instant::now();
            let mut progress = ProgressLine::default();
            let mut changed = false;
            let mut telemetry = Telemetry::default();
            let mut tokens = LOG_BURST;
            let mut refilled = Instant::now();
            let mut dropped = 0u64;
            let mut last_checkpoint = None;
            let mut report_tick = tokio::time::interval(self.settings.progress_report_interval);
            let mut checkpoint_tick = tokio::time::interval(self.settings.checkpoint_interval);
            let mut ownership_tick =
                tokio::time::interval(self.settings.heartbeat_interval.min(OWNERSHIP_CHECK));
            for tick in [&mut report_tick, &mut checkpoint_tick, &mut ownership_tick] {
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.reset();
            }
            let logs_subject = names::logs_subject(self.chain_id, job_id);
            let progress_subject = names::progress_subject(self.chain_id, job_id);
            let mut lines_open = true;
            loop {
                tokio::select! {
                    line = lines.recv(), if lines_open => {
                        let Some(line) = line else {
                            lines_open = false;
                            continue;
                        };
                        if let Some(parsed) = ProgressLine::parse(&line.line) {
                            merge(&mut progress, parsed);
                            changed = true;
                        }
                        tokens = (tokens + refilled.elapsed().as_secs_f64() * LOG_RATE).min(LOG_BURST);
                        refilled = Instant::now();
                        if tokens < 1.0 {
                            dropped += 1;
                            continue;
                        }
                        tokens -= 1.0;
                        let mut text = line.line;
                        if dropped > 0 {
                            text = format!("[gantry: {dropped} lines dropped over the log rate limit] {text}");
                            metrics::counter!("gantry_worker_log_lines_dropped_total").increment(dropped);
                            dropped = 0;
                        }
                        let message = LogLine {
                            v: JOBS_VERSION,
                            job_id,
                            attempt: assignment.attempt,
                            stream: line.stream,
                            line: text,
                            at_ms: now_ms(),
                        };
                        let payload = serde_json::to_vec(&message).expect("log lines serialize");
                        if let Err(e) = self.nats.publish(logs_subject.clone(), payload.into()).await {
                            tracing::debug!(job_id, error = %e, "log line not published");
                        }
                    }
                    _ = report_tick.tick() => {
                        let sample = self.monitor.sample(&gpu_indices);
                        if let Some(sample) = sample {
                            telemetry.add(sample.utilization);
                            metrics::gauge!("gantry_worker_gpu_utilization").set(sample.utilization);
                        }
                        let elapsed = started.elapsed();
                        let update = ProgressUpdate {
                            v: JOBS_VERSION,
                            job_id,
                            node_id: self.node_id,
                            attempt: assignment.attempt,
                            progress: progress.progress,
                            epoch: progress.epoch,
                            epochs: progress.epochs,
                            metrics: progress.metrics.clone(),
                            gpu_utilization: sample.map(|s| s.utilization),
                            gpu_memory_used_mib: sample.map(|s| s.memory_used_mib),
                            elapsed_secs: elapsed.as_secs(),
                            eta_secs: eta(progress.progress, elapsed, timeout),
                            at_ms: now_ms(),
                        };
                        if changed || sample.is_some() {
                            let payload = serde_json::to_vec(&update).expect("updates serialize");
                            if let Err(e) = self.nats.publish(progress_subject.clone(), payload.into()).await {
                                tracing::debug!(job_id, error = %e, "progress not published");
                            }
                            changed = false;
                        }
                    }
                    _ = checkpoint_tick.tick() => {
                        if let Err(f) = self.upload_checkpoint(job_id, dirs, &mut last_checkpoint).await {
                            tracing::warn!(job_id, error = %f, "checkpoint not uploaded");
                        }
                    }
                    _ = ownership_tick.tick() => {
                        match self.chain.job(job_id).await {
                            Ok(info) if !self.is_ours(&info, assignment.attempt) && stop.reason().is_none() => {
                                tracing::warn!(job_id, status = info.status, "the job is no longer assigned here; stopping it");
                                stop.stop(StopReason::Lost);
                            }
                            Ok(_) => {}
                            Err(e) => tracing::debug!(job_id, error = %e, "ownership check"),
                        }
                    }
                    () = running.cancelled(), if !lines_open => break,
                }
            }
            // The last progress the job printed.
            if changed {
                let update = ProgressUpdate {
                    v: JOBS_VERSION,
                    job_id,
                    node_id: self.node_id,
                    attempt: assignment.attempt,
                    progress: progress.progress,
                    epoch: progress.epoch,
                    epochs: progress.epochs,
                    metrics: progress.metrics.clone(),
                    gpu_utilization: None,
                    gpu_memory_used_mib: None,
                    elapsed_secs: started.elapsed().as_secs(),
                    eta_secs: None,
                    at_ms: now_ms(),
                };
                let payload = serde_json::to_vec(&update).expect("updates serialize");
                let _ = self.nats.publish(progress_subject, payload.into()).await;
            }
            let _ = self.nats.flush().await;
            Ok(telemetry)
        }
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

fn record_stage(stage: &'static str, since: Instant) {
    metrics::histogram!("gantry_worker_stage_seconds", "stage" => stage)
        .record(since.elapsed().as_secs_f64());
}

/// An unreachable chain is retried (and, persisting, is the node's problem); a refused
/// transaction is final and nothing the node could fix, so it does not mark it unhealthy.
fn chain_failure(error: crate::chain::ChainError) -> Failure {
    if error.is_transient() {
        Failure::transient(error.to_string())
    } else {
        Failure::job(error.to_string())
    }
}

/// GPU utilisation samples over a run.
#[derive(Debug, Default, Clone)]
struct Telemetry {
    sum: f64,
    count: u64,
}

impl Telemetry {
    fn add(&mut self, utilization: f64) {
        self.sum += utilization;
        self.count += 1;
    }

    fn average(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

enum Executed {
    Done {
        hash: B256,
        uri: String,
        size: u64,
        report: Report,
    },
    Lost,
}

/// The completion report as it fills in.
#[derive(Debug, Clone)]
struct Report {
    node_id: u64,
    job_id: u64,
    attempt: u8,
    compute_secs: u64,
    gpu_secs: u64,
    avg_gpu_utilization: Option<f64>,
}

impl Report {
    fn new(node_id: u64, job_id: u64, attempt: u8) -> Self {
        Self {
            node_id,
            job_id,
            attempt,
            compute_secs: 0,
            gpu_secs: 0,
            avg_gpu_utilization: None,
        }
    }

    fn finish(
        self,
        status: CompletionStatus,
        result: Option<(B256, String, u64)>,
        failure: Option<&Failure>,
    ) -> CompletionReport {
        let (result_hash, result_uri, output_bytes) = match result {
            Some((hash, uri, size)) => (Some(hash), Some(uri), Some(size)),
            None => (None, None, None),
        };
        CompletionReport {
            v: JOBS_VERSION,
            job_id: self.job_id,
            node_id: self.node_id,
            attempt: self.attempt,
            status,
            result_hash,
            result_uri,
            output_bytes,
            compute_secs: self.compute_secs,
            gpu_secs: self.gpu_secs,
            avg_gpu_utilization: self.avg_gpu_utilization,
            error: failure.map(|f| f.reason.clone()),
            at_ms: now_ms(),
        }
    }
}

/// A job's directories on the host.
#[derive(Debug)]
struct JobDirs {
    root: PathBuf,
    inputs: PathBuf,
    outputs: PathBuf,
    checkpoints: PathBuf,
}

impl JobDirs {
    /// Fresh directories; the writable ones are open to the container's user, whoever it
    /// is (the work directory above them is the worker's alone).
    async fn create(root: &Path) -> Result<Self, Failure> {
        let _ = tokio::fs::remove_dir_all(root).await;
        let dirs = Self {
            root: root.to_owned(),
            inputs: root.join("inputs"),
            outputs: root.join("outputs"),
            checkpoints: root.join("checkpoints"),
        };
        for dir in [&dirs.inputs, &dirs.outputs, &dirs.checkpoints] {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        }
        make_writable(&dirs.outputs).await?;
        make_writable(&dirs.checkpoints).await?;
        Ok(dirs)
    }
}

async fn make_writable(dir: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        tokio::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
            .await
            .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        let mut entries = tokio::fs::read_dir(&dir)
            .await
            .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        while let Ok(Some(entry)) = entries.next_entry().await {
            let kind = entry
                .file_type()
                .await
                .map_err(|e| Failure::node(e.to_string()))?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                tokio::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o666))
                    .await
                    .map_err(|e| Failure::node(format!("work dir: {e}")))?;
            }
        }
    }
    Ok(())
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

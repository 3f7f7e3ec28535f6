//! The stages of a job on this node, in order: validate (spec and admission, GPUs),
//! download (directories, inputs, the latest checkpoint, the image), run the container
//! with its watchers beside it, upload the result.

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use alloy::primitives::B256;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::names;
use gantry_protocol::spec::{INPUTS_DIR, JobSpec, OUTPUTS_DIR};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::dirs::{JobDirs, make_writable};
use super::report::{Report, Uploaded};
use super::watch::Watch;
use super::{Assignment, Ctx, GpuPool, Stop, StopReason, retry};
use crate::admit::{Admitted, admit};
use crate::docker::{JOB_LABEL, NODE_LABEL, RunOutcome, RunPlan};
use crate::fault::{Failure, FaultClass};
use crate::inventory::Gpu;
use crate::{archive, metrics, objects};

/// How long a stopped job may take to exit after SIGTERM (to write a last checkpoint).
const STOP_GRACE: Duration = Duration::from_secs(10);

/// How the stages ended, when no failure ended them.
pub(super) enum Executed {
    /// The result is uploaded: submit it.
    Done(Uploaded),
    /// The job was taken away while it ran: nothing to answer.
    Lost,
}

/// What the download stage leaves for the container.
struct Downloaded {
    dirs: JobDirs,
    /// Whether a checkpoint was restored into `dirs.checkpoints`.
    restored: bool,
    /// The image's configured user, if any.
    image_user: Option<String>,
}

/// GPUs taken from the node's pool for one job; given back when dropped.
struct GpuLease<'a> {
    pool: &'a Mutex<GpuPool>,
    gpus: Vec<Gpu>,
}

impl Drop for GpuLease<'_> {
    fn drop(&mut self) {
        self.pool
            .lock()
            .expect("the pool lock is never poisoned")
            .give_back(std::mem::take(&mut self.gpus));
    }
}

impl Ctx {
    /// Runs the stages; a failure of any ends them (the report keeps what was measured).
    pub(super) async fn execute(
        &self,
        assignment: Assignment,
        info: &JobMarket::JobInfo,
        dir: &Path,
        stop: &Stop,
        report: &mut Report,
    ) -> Result<Executed, Failure> {
        let admitted = self.validate(assignment.job_id, info).await?;
        let gpus = self.take_gpus(admitted.gpus)?;
        let downloaded = self.download(assignment.job_id, &admitted, dir).await?;
        let exit = self
            .run_container(assignment, &admitted, &downloaded, &gpus.gpus, stop, report)
            .await?;
        match stop.reason() {
            Some(StopReason::Lost) => return Ok(Executed::Lost),
            Some(StopReason::Shutdown) => {
                // Keep what the job saved so the next node resumes from it.
                let _ = self
                    .upload_checkpoint(assignment.job_id, &downloaded.dirs, &mut None)
                    .await;
                return Err(Failure::node("the worker is shutting down"));
            }
            None => {}
        }
        if let Some(f) = exit.failure(admitted.memory_bytes, admitted.timeout) {
            return Err(f);
        }
        self.upload_result(assignment, &admitted, &downloaded.dirs)
            .await
            .map(Executed::Done)
    }

    /// The spec, checked against the chain's hash, the protocol and this node.
    async fn validate(&self, job_id: u64, info: &JobMarket::JobInfo) -> Result<Admitted, Failure> {
        let spec_bytes = self.spec_bytes(job_id, info.specHash).await?;
        admit(
            &spec_bytes,
            &info.requirements,
            &self.limits,
            &self.settings,
        )
    }

    fn take_gpus(&self, count: u16) -> Result<GpuLease<'_>, Failure> {
        let gpus = self
            .gpus
            .lock()
            .expect("the pool lock is never poisoned")
            .take(count)
            .ok_or_else(|| Failure::node(format!("no {count} free GPUs on this node")))?;
        Ok(GpuLease {
            pool: &self.gpus,
            gpus,
        })
    }

    /// Fresh directories, the inputs, the latest checkpoint and the image.
    async fn download(
        &self,
        job_id: u64,
        admitted: &Admitted,
        dir: &Path,
    ) -> Result<Downloaded, Failure> {
        let started = Instant::now();
        let dirs = JobDirs::create(dir).await?;
        self.stage_inputs(&admitted.spec, &dirs).await?;
        let restored = self.restore_checkpoint(job_id, &dirs).await?;
        let image_user =
            retry("image", || self.executor.ensure_image(&admitted.spec.image)).await?;
        metrics::stage_seconds("download", started.elapsed());
        Ok(Downloaded {
            dirs,
            restored,
            image_user,
        })
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
            objects::download(&self.checkpoints, &key, &tar_path, limit)
        })
        .await?;
        if !found {
            return Ok(false);
        }
        let into = dirs.checkpoints.clone();
        let from = tar_path.clone();
        tokio::task::spawn_blocking(move || archive::unpack(&from, &into))
            .await
            .map_err(|e| Failure::node(format!("restoring the checkpoint: {e}")))??;
        let _ = tokio::fs::remove_file(&tar_path).await;
        make_writable(&dirs.checkpoints).await?;
        tracing::info!("restored the latest checkpoint");
        Ok(true)
    }

    /// Runs the container to its end with the watchers beside it; the report gets the
    /// compute time and the GPU utilisation whatever the run's result.
    async fn run_container(
        &self,
        assignment: Assignment,
        admitted: &Admitted,
        downloaded: &Downloaded,
        gpus: &[Gpu],
        stop: &Stop,
        report: &mut Report,
    ) -> Result<RunOutcome, Failure> {
        let started = Instant::now();
        let plan = self.plan(assignment, admitted, downloaded, gpus);
        let (lines_tx, lines_rx) = mpsc::channel(1024);
        let running = CancellationToken::new();
        let watch = Watch {
            ctx: self,
            assignment,
            timeout: admitted.timeout,
            dirs: &downloaded.dirs,
            gpu_indices: gpus.iter().map(|g| g.index).collect(),
            stop: stop.clone(),
            running: running.clone(),
        };
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
            |since_created| self.container_running(assignment, since_created),
        );
        // The watchers run beside the container and end once it is gone.
        let run = async {
            let ran = run.await;
            running.cancel();
            ran
        };
        let (ran, telemetry) = tokio::join!(run, watch.run(lines_rx));
        report.compute_secs = started.elapsed().as_secs();
        report.gpu_secs = started.elapsed().as_secs() * gpus.len() as u64;
        report.avg_gpu_utilization = telemetry.average();
        metrics::stage_seconds("execute", started.elapsed());
        ran
    }

    fn container_running(&self, assignment: Assignment, elapsed_since_created: Duration) {
        let since = assignment.received.elapsed();
        tracing::info!(?since, ?elapsed_since_created, "container running");
        metrics::start_seconds(since);
        if let Some(started) = &self.started {
            let _ = started.send((assignment.job_id, since));
        }
    }

    fn plan(
        &self,
        assignment: Assignment,
        admitted: &Admitted,
        downloaded: &Downloaded,
        gpus: &[Gpu],
    ) -> RunPlan {
        let spec = &admitted.spec;
        let mut env: Vec<(String, String)> = spec.env.clone().into_iter().collect();
        env.extend([
            ("GANTRY_JOB_ID".into(), assignment.job_id.to_string()),
            ("GANTRY_ATTEMPT".into(), assignment.attempt.to_string()),
            (
                "GANTRY_RESUMED".into(),
                u8::from(downloaded.restored).to_string(),
            ),
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
        let dirs = &downloaded.dirs;
        RunPlan {
            name: format!(
                "gantry-{}-{}-{}",
                self.chain_id, assignment.job_id, assignment.attempt
            ),
            image: spec.image.clone(),
            command: spec.command.clone(),
            env,
            image_user: downloaded.image_user.clone(),
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

    /// Packs the outputs directory the spec names and uploads it to the results bucket.
    async fn upload_result(
        &self,
        assignment: Assignment,
        admitted: &Admitted,
        dirs: &JobDirs,
    ) -> Result<Uploaded, Failure> {
        let started = Instant::now();
        let result_dir = dirs.outputs.join(
            admitted
                .spec
                .outputs
                .path
                .trim_start_matches(OUTPUTS_DIR)
                .trim_start_matches('/'),
        );
        let is_dir = tokio::fs::metadata(&result_dir)
            .await
            .is_ok_and(|m| m.is_dir());
        if !is_dir {
            return Err(Failure::job(format!(
                "{} was not created",
                admitted.spec.outputs.path
            )));
        }
        let tar_path = dirs.root.join("result.tar");
        let limit = admitted.output_limit;
        let packed =
            tokio::task::spawn_blocking(move || archive::pack(&result_dir, &tar_path, limit))
                .await
                .map_err(|e| Failure::node(format!("packing the result: {e}")))??;
        let key = format!("{}-{}", assignment.job_id, assignment.attempt);
        retry("upload the result", || {
            objects::upload(&self.results, &key, &packed)
        })
        .await?;
        metrics::stage_seconds("upload", started.elapsed());
        Ok(Uploaded {
            hash: B256::from(packed.sha256),
            uri: format!("nats://{}/{key}", names::results_bucket(self.chain_id)),
            size: packed.size,
        })
    }
}

//! The stages of a job on this node, in order: validate (spec and admission, the job's
//! clock, GPUs), download (directories, inputs, the latest checkpoint, the image or the
//! WASM module), run the container or the module with its watchers beside it, upload the
//! result, or the failure report of a job that failed by itself.
//!
//! Everything from the download on runs on the job's clock: a job whose inputs are still
//! downloading when its time is up has run into its own limit as much as one whose
//! container is still running, and both are answered with a failure report.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use alloy::primitives::B256;
use gantry_protocol::encryption::{self, AgeIdentity, AgeRecipient};
use gantry_protocol::names;
use gantry_protocol::spec::{Engine, INPUTS_DIR, JobSpec, OUTPUTS_DIR};
use serde::Serialize;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::clock::{Clock, Late};
use super::dirs::{JobDirs, make_writable};
use super::report::{Report, Uploaded};
use super::watch::Watch;
use super::{Ctx, GiveBack, GpuPool, Held, Stop, StopReason, retry};
use crate::admit::{Admitted, admit};
use crate::docker::{Ending, Executor, JOB_LABEL, NODE_LABEL, RunOutcome, RunPlan};
use crate::fault::{Failure, FaultClass};
use crate::inventory::Gpu;
use crate::wasm::{Determinism, MAX_MODULE_BYTES, WasmEngine, WasmPlan};
use crate::{archive, metrics};

/// How long a job stopped for a shutdown may take to exit after SIGTERM (to write a last
/// checkpoint), at most: never past its own stop.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// The file at the root of a failed job's result tar that says why it failed.
pub const FAILURE_FILE: &str = "gantry-failure.json";
/// Where a failed job's outputs, as it left them, go in its result tar.
pub const FAILED_OUTPUTS_DIR: &str = "outputs";
/// Room for the failure report in a failed job's result tar, bytes, beside its outputs.
const REPORT_ROOM: u64 = 64 << 10;
/// The least a node waits for a job key: a run again after a restart asks anew, with its
/// new identity, and the submitter answers in moments.
const MIN_KEY_WAIT: Duration = Duration::from_secs(5);
/// How long before the end of the market's reject grace a give-back must be sent to be
/// mined within it (at most half the grace): past that, a proven job fault found before
/// the start is answered with the failure report (paid), not a reject the node would pay
/// for.
const REJECT_MARGIN: u64 = 10;

/// The job key, awaited by whichever part of the download needs it first (design 19, §3).
type KeyFuture<'a> =
    futures::future::Shared<futures::future::BoxFuture<'a, Result<Option<AgeIdentity>, Failure>>>;

/// How the stages ended, when the job is not given back.
pub(super) enum Executed {
    /// The result is uploaded: submit it.
    Done(Uploaded),
    /// The job failed by itself (its own time limit, a non-zero exit, out of memory, too
    /// much output): its failure report is uploaded as the result; submit it.
    Failed(Uploaded, Failure),
    /// The job was taken away while it ran: nothing to answer.
    Lost,
}

/// What the download stage leaves for the container.
struct Downloaded {
    /// Whether a checkpoint was restored into `dirs.checkpoints`.
    restored: bool,
    /// The image's configured user, if any.
    image_user: Option<String>,
    /// A WASM job's module, fetched and checked.
    module: Option<std::path::PathBuf>,
}

/// One job on its way through the stages: what every stage after admission reads.
#[derive(Clone, Copy)]
struct Job<'a> {
    held: &'a Held,
    admitted: &'a Admitted,
    dirs: &'a JobDirs,
    clock: Clock,
    /// `clock.stop_by` on this machine's timers.
    deadline: Instant,
    /// How long from now the node waits for the job key, if it needs one: until
    /// [`encryption::KEY_WAIT_SECS`] after the assignment (within the reject grace).
    key_wait: Duration,
    /// Until when a give-back is free (the reject grace less [`REJECT_MARGIN`]), on this
    /// machine's timers.
    free_by: Instant,
    stop: &'a Stop,
    steps: &'a Steps,
}

/// How long each step from the assignment's message to the job running took: logged when
/// it runs and handed to the start hook (where a start's time goes, for the start
/// benchmarks). The steps in order, then the download's parts, which overlap.
#[derive(Debug)]
pub(super) struct Steps(Mutex<(std::time::Instant, Vec<(&'static str, Duration)>)>);

impl Steps {
    pub(super) fn since(began: std::time::Instant) -> Self {
        Self(Mutex::new((began, Vec::new())))
    }

    /// The step `name` ended now.
    fn end(&self, name: &'static str) {
        let mut steps = self.0.lock().expect("never poisoned");
        let now = std::time::Instant::now();
        let took = now - steps.0;
        steps.0 = now;
        steps.1.push((name, took));
    }

    /// A part of a step took `took`.
    fn part(&self, name: &'static str, took: Duration) {
        self.0.lock().expect("never poisoned").1.push((name, took));
    }

    fn list(&self) -> Vec<(&'static str, Duration)> {
        self.0.lock().expect("never poisoned").1.clone()
    }
}

/// How the part of the stages that holds the node's room for the job ended.
enum Ran {
    /// The container ran and is gone.
    Exited(RunOutcome),
    /// The job's time ran out while its inputs were still downloading.
    InputsLate,
    /// The job could not start by its own fault (an input failing its hash, or not
    /// decrypting, after a long download), found past the free reject grace: answered
    /// with its failure report, paid, as a job that failed by itself.
    Refused(Failure),
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

/// A failed job's report, `gantry-failure.json` in its result tar (fields in camelCase).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureReport<'a> {
    pub v: u16,
    pub job_id: u64,
    pub node_id: u64,
    pub attempt: u8,
    /// Why it failed, as in the completion report: "timeout: …", "exited with code 3", …
    pub reason: &'a str,
    /// The container's exit code, when it ran and exited.
    pub exit_code: Option<i64>,
    /// Whether it was stopped at its time limit.
    pub timed_out: bool,
    pub oom_killed: bool,
    /// Seconds of the job's clock used, from the assignment on chain to its stop.
    pub ran_secs: u64,
    /// What its files took of its disk space (`/outputs`, `/checkpoints`, `/tmp`) when it
    /// ended, and that space's size, bytes.
    pub disk_bytes: Option<u64>,
    pub disk_limit_bytes: u64,
    /// Whether its outputs are in the tar under `outputs/`: `included`, `none` (it wrote
    /// none) or `overLimit` (more than the output limit: left out).
    pub outputs: &'a str,
}

impl Ctx {
    /// Runs the stages. `Err` gives the job back: it could not start (the job's fault or
    /// the node's), or the worker is shutting down.
    pub(super) async fn execute(
        &self,
        held: &Held,
        dir: &Path,
        stop: &Stop,
        report: &mut Report,
        slot: OwnedSemaphorePermit,
    ) -> Result<Executed, GiveBack> {
        // From the message through the chain's check and the wait for the job's task.
        let steps = Steps::since(held.assignment.received);
        steps.end("check");
        // The spec (from the stream) and the chain's time (from the chain) at once.
        let (admitted, now) = tokio::join!(self.validate(held), self.chain_now());
        let admitted = admitted.map_err(GiveBack::from_failure)?;
        let now = now.map_err(GiveBack::from_failure)?;
        steps.end("spec");
        let clock = Clock::of(
            &held.job,
            admitted.spec.timeout_secs,
            self.settings.answer_margin,
        )
        .expect("a held job is assigned");
        let late = clock.late_start(now, held.assignment.received.elapsed());
        if late == Some(Late::NodesTime) {
            return Err(GiveBack::NoTimeLeft);
        }
        // The job's stop on this machine's timers; the ownership guard also watches the
        // chain's time while the container runs, in case it jumps.
        let deadline = Instant::now() + clock.left(now);
        tracing::info!(
            stop_by = clock.stop_by,
            until = clock.until,
            left = ?clock.left(now),
            "the job's clock"
        );
        let dirs = JobDirs::create(dir, &self.spaces)
            .await
            .map_err(GiveBack::from_failure)?;
        steps.end("space");
        let key_wait = Duration::from_secs(
            (clock.assigned_at + encryption::KEY_WAIT_SECS).saturating_sub(now),
        );
        let max_runtime = u64::from(held.job.terms.requirements.max_runtime);
        let grace = (max_runtime / 10).min(30);
        let free_by = Instant::now()
            + Duration::from_secs(
                (clock.assigned_at + grace - REJECT_MARGIN.min(grace / 2)).saturating_sub(now),
            );
        let job = Job {
            held,
            admitted: &admitted,
            dirs: &dirs,
            clock,
            deadline,
            key_wait,
            free_by,
            stop,
            steps: &steps,
        };
        // On a run again the job's time running out is the node's doing (its first run
        // here was lost): given back, never answered with a "timeout" the submitter pays.
        let rerun = held.assignment.redelivered;
        if late == Some(Late::JobsTime) {
            if rerun {
                return Err(GiveBack::RunAgainOutOfTime);
            }
            let failure = Failure::job(format!(
                "timeout: the job's time limit, {} s after its assignment, passed before it could start",
                clock.stop_by - clock.assigned_at
            ));
            drop(slot);
            return self.answer_failure(&job, failure, None).await;
        }
        // The slot and the GPUs are free again from here: the container is gone.
        let exit = match self.download_and_run(&job, report, slot).await? {
            Ran::Exited(exit) => exit,
            Ran::Refused(failure) => return self.answer_failure(&job, failure, None).await,
            Ran::InputsLate if rerun => return Err(GiveBack::RunAgainOutOfTime),
            Ran::InputsLate => {
                let failure = Failure::job(format!(
                    "timeout: the inputs were not ready by the job's time limit, {} s after its assignment",
                    clock.stop_by - clock.assigned_at
                ));
                return self.answer_failure(&job, failure, None).await;
            }
        };
        // The container is gone: an encrypted input's plaintext goes now, not when the
        // answer is final (the key went with the download).
        if admitted.spec.needs_job_key()
            && let Err(failure) = clear_dir(&dirs.inputs).await
        {
            tracing::warn!(error = %failure, "the decrypted inputs stay until the job's directory goes");
        }
        // A stop that came after the container had exited by itself changes nothing but
        // for a lost job, which is not ours to answer whatever it did.
        let timed_out = match stop.reason() {
            Some(StopReason::Lost) => return Ok(Executed::Lost),
            Some(StopReason::Shutdown) if exit.stopped => {
                // Keep what the job saved so the next node resumes from it.
                let seal = checkpoint_seal(&admitted.spec);
                let _ = self.upload_checkpoint(held, &dirs, &seal, &mut None).await;
                return Err(GiveBack::ShuttingDown);
            }
            Some(StopReason::Deadline) if exit.stopped => true,
            _ => exit.timed_out,
        };
        let exit = RunOutcome { timed_out, ..exit };
        if rerun && timed_out {
            // What it saved goes to the next node.
            let seal = checkpoint_seal(&admitted.spec);
            let _ = self.upload_checkpoint(held, &dirs, &seal, &mut None).await;
            return Err(GiveBack::RunAgainOutOfTime);
        }
        let limit = Duration::from_secs(clock.stop_by - clock.assigned_at);
        if let Some(failure) = exit.failure(admitted.memory_bytes, limit) {
            let failure = disk_limit(&dirs, failure);
            return self.answer_failure(&job, failure, Some(&exit)).await;
        }
        match self.upload_result(held, &admitted, &dirs).await {
            Ok(uploaded) => Ok(Executed::Done(uploaded)),
            // Too much output, or none where the spec said: the job's doing.
            Err(f) if f.class == FaultClass::Job => self.answer_failure(&job, f, Some(&exit)).await,
            Err(f) => Err(GiveBack::from_failure(f)),
        }
    }

    /// The part of the stages that holds the node's room for the job (`slot`, its GPUs):
    /// the download and the container, both on the job's clock.
    async fn download_and_run(
        &self,
        job: &Job<'_>,
        report: &mut Report,
        slot: OwnedSemaphorePermit,
    ) -> Result<Ran, GiveBack> {
        let _slot = slot;
        let gpus = self.take_gpus(job.admitted.gpus).map_err(GiveBack::Node)?;
        let downloading = tokio::time::timeout_at(
            job.deadline,
            self.download(job.held, job.admitted, job.dirs, job.steps, job.key_wait),
        );
        let downloaded = tokio::select! {
            downloaded = downloading => match downloaded {
                Ok(Ok(downloaded)) => downloaded,
                Ok(Err(f)) if f.proven && Instant::now() > job.free_by => {
                    return Ok(Ran::Refused(f));
                }
                Ok(Err(f)) => return Err(GiveBack::from_failure(f)),
                Err(_) => return Ok(Ran::InputsLate),
            },
            () = job.stop.stopped() => return Err(GiveBack::ShuttingDown),
        };
        let exit = self
            .run_container(job, &downloaded, &gpus.gpus, report)
            .await
            .map_err(GiveBack::from_failure)?;
        Ok(Ran::Exited(exit))
    }

    /// The spec, checked against the hash in the job's terms, the protocol and this node.
    async fn validate(&self, held: &Held) -> Result<Admitted, Failure> {
        let terms = &held.job.terms;
        // A verified job is never answered as a tier-none one (the market refuses it): a
        // refereed one is provided by `provide`, and seats never come as assignments.
        if terms.verification.is_verified() {
            return Err(Failure::job(
                "a verified job is not answered by the tier-none pipeline: given back at once",
            ));
        }
        let spec_bytes = self.spec_bytes(held.job_id(), terms.spec_hash).await?;
        let admitted = admit(
            &spec_bytes,
            &terms.requirements,
            &self.limits,
            &self.settings,
        )?;
        if admitted.spec.needs_job_key()
            && u64::from(terms.requirements.max_runtime) < encryption::MIN_ENCRYPTED_RUNTIME_SECS
        {
            // Its reject grace is a tenth of the runtime: too short to wait for the key
            // and still give the job back free.
            return Err(Failure::job(format!(
                "a job with encrypted inputs needs a maxRuntime of at least {} s",
                encryption::MIN_ENCRYPTED_RUNTIME_SECS
            )));
        }
        Ok(admitted)
    }

    /// The job key, when the job needs it: its encrypted inputs (without the key the job
    /// cannot start: the submitter's fault, given back free within the reject grace), or
    /// an earlier attempt's checkpoint to restore (without the key the job starts from
    /// scratch). Asked for in the keys bucket, waited for `wait`.
    async fn job_key(
        &self,
        held: &Held,
        spec: &JobSpec,
        wait: Duration,
    ) -> Result<Option<AgeIdentity>, Failure> {
        let Some(encryption) = &spec.encryption else {
            return Ok(None);
        };
        let needed = spec.needs_job_key();
        if !needed && (held.attempt <= 1 || encryption.job_key.is_none()) {
            return Ok(None);
        }
        let without = |failure: Failure| {
            if needed {
                return Err(failure);
            }
            tracing::warn!(reason = %failure.reason, "no job key: the job starts from scratch");
            Ok(None)
        };
        let opened = self
            .keys
            .get_or_try_init(|| {
                gantry_runtime::keys::open(&self.jobs_js, self.chain_id, self.nats_replicas)
            })
            .await;
        let store = match opened {
            Ok(store) => store,
            Err(e) => return without(Failure::node(format!("the keys bucket: {e}"))),
        };
        let wait = wait.max(MIN_KEY_WAIT);
        let at = gantry_runtime::keys::Attempt {
            chain_id: self.chain_id,
            market: self.chain.market_address(),
            job: held.job_id(),
            attempt: held.attempt,
            node: self.node_id,
            submitter: held.job.terms.submitter,
        };
        let started = std::time::Instant::now();
        let obtained = gantry_runtime::keys::obtain(store, &at, |d| self.chain.sign(d), wait).await;
        metrics::stage_seconds("job_key", started.elapsed());
        match obtained {
            Ok(key) if encryption.job_key.as_deref() == Some(&key.to_public().to_string()) => {
                tracing::info!(took = ?started.elapsed(), "the job key was released to this node");
                Ok(Some(key))
            }
            Ok(_) => without(Failure::job(
                "the key the submitter released is not the spec's job key",
            )),
            Err(gantry_runtime::keys::ObtainError::NotReleased(_)) => {
                without(Failure::job(format!(
                    "the submitter did not release the job key within {} s of the assignment",
                    encryption::KEY_WAIT_SECS
                )))
            }
            Err(e) => without(Failure::node(e.to_string())),
        }
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

    /// The inputs, the latest checkpoint and the image or the module, at once (each into
    /// its own place). The first to fail ends the download, with its own fault class.
    async fn download(
        &self,
        held: &Held,
        admitted: &Admitted,
        dirs: &JobDirs,
        steps: &Steps,
        key_wait: Duration,
    ) -> Result<Downloaded, Failure> {
        use futures::FutureExt as _;
        let started = std::time::Instant::now();
        // The key is asked for at once and waited for beside the downloads; what it opens
        // waits for it. It lives in memory only, and goes with this stage.
        let job_key: KeyFuture<'_> = self
            .job_key(held, &admitted.spec, key_wait)
            .boxed()
            .shared();
        let (key, restore_key) = (job_key.clone(), job_key.clone());
        let inputs = async {
            let staged = self.stage_inputs(&admitted.spec, dirs, Some(key)).await;
            steps.part("download.inputs", started.elapsed());
            staged
        };
        let checkpoint = async {
            let sealed = admitted.spec.encryption.is_some();
            let restored = if held.attempt <= 1 {
                Ok(false)
            } else {
                let key = restore_key.await?;
                self.restore_checkpoint(held, dirs, sealed, key.as_ref())
                    .await
            };
            steps.part("download.checkpoint", started.elapsed());
            restored
        };
        let runnable = async {
            let got = match admitted.spec.engine {
                Engine::Docker => {
                    let docker = self.docker()?;
                    let user = retry("image", || docker.ensure_image(&admitted.spec.image)).await?;
                    (user, None)
                }
                Engine::Wasm => (None, Some(self.fetch_module(&admitted.spec).await?)),
            };
            steps.part("download.runnable", started.elapsed());
            Ok::<_, Failure>(got)
        };
        // Driven from the start, so the request goes out now, and a key that never comes
        // ends the download at once.
        let asked = async { job_key.await.map(drop) };
        let ((), restored, (image_user, module), ()) =
            tokio::try_join!(inputs, checkpoint, runnable, asked)?;
        steps.end("download");
        metrics::stage_seconds("download", started.elapsed());
        Ok(Downloaded {
            restored,
            image_user,
            module,
        })
    }

    pub(super) fn docker(&self) -> Result<&Executor, Failure> {
        self.executor
            .as_ref()
            .ok_or_else(|| Failure::job("this node does not run Docker jobs"))
    }

    pub(super) fn wasm(&self) -> Result<&WasmEngine, Failure> {
        self.wasm
            .as_ref()
            .ok_or_else(|| Failure::job("this node does not run WASM jobs"))
    }

    /// A WASM job's module, through the fetcher and its content-addressed cache (the
    /// spec's hash is required and checked).
    pub(super) async fn fetch_module(&self, spec: &JobSpec) -> Result<std::path::PathBuf, Failure> {
        let wasm = spec
            .wasm
            .as_ref()
            .ok_or_else(|| Failure::job("invalid spec: a WASM job names its module"))?;
        let mut input = wasm.module.as_input();
        input.max_bytes = Some(
            input
                .max_bytes
                .unwrap_or(MAX_MODULE_BYTES)
                .min(MAX_MODULE_BYTES),
        );
        let fetched = self
            .fetcher
            .fetch(&input)
            .await
            .map_err(|e| match e.class() {
                FaultClass::Node => Failure::node(e.to_string()),
                FaultClass::Job | FaultClass::Transient => Failure::job(format!("the module: {e}")),
            })?;
        Ok(fetched.path)
    }

    /// Each input into the job's inputs directory: a hard link to the cached bytes, or,
    /// for an encrypted input, its plaintext decrypted with `job_key` (the ciphertext is
    /// what the cache keeps and the spec's hash names).
    pub(super) async fn stage_inputs(
        &self,
        spec: &JobSpec,
        dirs: &JobDirs,
        job_key: Option<KeyFuture<'_>>,
    ) -> Result<(), Failure> {
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
                    _ if matches!(e, crate::fetch::FetchError::HashMismatch { .. }) => {
                        Failure::proven(e.to_string())
                    }
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
            if input.encrypted {
                let key = match &job_key {
                    Some(key) => key.clone().await?,
                    None => None,
                }
                .ok_or_else(|| Failure::job("an encrypted input, and no job key"))?;
                let (from, into) = (fetched.path.clone(), target.clone());
                let opened =
                    tokio::task::spawn_blocking(move || archive::open_sealed(&key, &from, &into))
                        .await
                        .map_err(|e| Failure::node(format!("inputs: {e}")))?;
                if let Err(e) = opened {
                    return Err(match e {
                        archive::SealError::Io(e)
                        | archive::SealError::Crypto(encryption::CryptoError::Write(e)) => {
                            Failure::node(format!("inputs: {e}"))
                        }
                        archive::SealError::Crypto(e) => Failure::proven(format!(
                            "input {} does not decrypt with the job key: {e}",
                            input.path
                        )),
                    });
                }
                continue;
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

    /// Restores the newest checkpoint an earlier attempt's node left that its agent signed
    /// for an attempt it held (design 19, §2), trying each earlier attempt's node from the
    /// last; one that is not (tampered, forged, another's, not a tar, not there in time)
    /// is skipped with a warning, and with none the job starts from scratch. Nothing a
    /// checkpoint holds makes this a fault of the job or the node. `true` when one was
    /// restored.
    /// An encrypted job's (`sealed`) checkpoints are decrypted with the job key; without
    /// the key none is restored.
    async fn restore_checkpoint(
        &self,
        held: &Held,
        dirs: &JobDirs,
        sealed: bool,
        job_key: Option<&AgeIdentity>,
    ) -> Result<bool, Failure> {
        if held.attempt <= 1 {
            return Ok(false);
        }
        if sealed && job_key.is_none() {
            return Ok(false);
        }
        let job_id = held.job_id();
        let holders = match retry("read the job's attempts", || async {
            self.chain
                .assignments(job_id)
                .await
                .map_err(|e| Failure::transient(e.to_string()))
        })
        .await
        {
            Ok(holders) => holders,
            Err(failure) => {
                tracing::warn!(error = %failure, "the job's earlier attempts unread: starting from scratch");
                return Ok(false);
            }
        };
        let earlier = &holders[..holders.len().min(usize::from(held.attempt - 1))];
        let mut tried = Vec::new();
        for node in earlier.iter().rev() {
            if tried.contains(node) {
                continue;
            }
            tried.push(*node);
            let attempts: Vec<u8> = earlier
                .iter()
                .enumerate()
                .filter(|(_, n)| *n == node)
                .filter_map(|(i, _)| u8::try_from(i + 1).ok())
                .collect();
            match self
                .restore_from(job_id, *node, attempts, dirs, job_key)
                .await
            {
                Ok(Some(attempt)) => {
                    tracing::info!(from_node = node, attempt, "restored the latest checkpoint");
                    return Ok(true);
                }
                Ok(None) => {}
                Err(reason) => {
                    metrics::checkpoint_refused(reason);
                    tracing::warn!(from_node = node, reason, "a checkpoint not restored");
                    clear_dir(&dirs.checkpoints).await?;
                }
            }
        }
        Ok(false)
    }

    /// Node `node`'s checkpoint of `job_id`, restored into `/checkpoints` if its agent
    /// signed it for one of `attempts`: the attempt it was taken in; `None` when the node
    /// left none; else why not (and `/checkpoints` may hold part of it).
    async fn restore_from(
        &self,
        job_id: u64,
        node: u64,
        attempts: Vec<u8>,
        dirs: &JobDirs,
        job_key: Option<&AgeIdentity>,
    ) -> Result<Option<u8>, &'static str> {
        use gantry_protocol::checkpoint::{Holder, check};
        use gantry_runtime::objects::GetError;
        let key = job_id.to_string();
        let limit = self.settings.max_output_bytes;
        let found = retry("read a checkpoint", || async {
            match gantry_runtime::objects::get(&self.jobs_js, &self.checkpoints, node, &key).await {
                Err(GetError::Nats(e)) => Err(Failure::transient(e.to_string())),
                other => Ok(other),
            }
        })
        .await;
        let object = match found {
            Ok(Ok(Some(object))) => object,
            Ok(Ok(None)) => return Ok(None),
            Ok(Err(_)) => return Err("foreign"),
            Err(_) => return Err("unavailable"),
        };
        if object.info.size as u64 > limit {
            return Err("too_large");
        }
        // The signature first: nothing unsigned is downloaded.
        let sha256 = object.sha256().ok_or("unsigned")?;
        let agent = retry("read the checkpoint's node", || async {
            self.chain
                .node(node)
                .await
                .map_err(|e| Failure::transient(e.to_string()))
        })
        .await
        .map_err(|_| "unavailable")?
        .agent;
        let attempt = check(
            self.chain_id,
            self.chain.market_address(),
            job_id,
            &object.info.metadata,
            sha256.into(),
            &Holder { agent, attempts },
        )
        .map_err(|refused| refused.reason())?;
        let tar_path = dirs.root.join("restore.tar");
        let downloaded = download_object(object, &tar_path, limit).await;
        if let Err(error) = downloaded {
            let _ = tokio::fs::remove_file(&tar_path).await;
            tracing::warn!(%error, "the checkpoint's bytes");
            return Err("damaged");
        }
        if let Some(key) = job_key {
            let (key, from, into) = (
                key.clone(),
                tar_path.clone(),
                dirs.root.join("restore.plain"),
            );
            let opened = tokio::task::spawn_blocking(move || {
                archive::open_sealed(&key, &from, &into)?;
                std::fs::rename(&into, &from).map_err(archive::SealError::Io)
            })
            .await;
            if !matches!(opened, Ok(Ok(()))) {
                let _ = tokio::fs::remove_file(&tar_path).await;
                let _ = tokio::fs::remove_file(dirs.root.join("restore.plain")).await;
                return Err("undecryptable");
            }
        }
        let into = dirs.checkpoints.clone();
        let from = tar_path.clone();
        let unpacked = tokio::task::spawn_blocking(move || archive::unpack(&from, &into)).await;
        let _ = tokio::fs::remove_file(&tar_path).await;
        match unpacked {
            Ok(Ok(())) => {}
            Ok(Err(failure)) => {
                tracing::warn!(error = %failure, "the checkpoint does not unpack");
                return Err("not_a_tar");
            }
            Err(_) => return Err("not_a_tar"),
        }
        make_writable(&dirs.checkpoints)
            .await
            .map_err(|_| "not_a_tar")?;
        Ok(Some(attempt))
    }

    /// Runs the container to its end (at the job's deadline at the latest) with the
    /// watchers beside it; the report gets the compute time and the GPU utilisation
    /// whatever the run's result.
    async fn run_container(
        &self,
        job: &Job<'_>,
        downloaded: &Downloaded,
        gpus: &[Gpu],
        report: &mut Report,
    ) -> Result<RunOutcome, Failure> {
        let Job {
            held,
            admitted,
            dirs,
            clock,
            deadline,
            stop,
            steps,
            ..
        } = *job;
        let started = std::time::Instant::now();
        let (lines_tx, lines_rx) = mpsc::channel(1024);
        let running = CancellationToken::new();
        let watch = Watch {
            ctx: self,
            held,
            clock,
            dirs,
            gpu_indices: gpus.iter().map(|g| g.index).collect(),
            stop: stop.clone(),
            running: running.clone(),
            seal: checkpoint_seal(&admitted.spec),
        };
        let ending = Ending {
            timeout: deadline.saturating_duration_since(Instant::now()),
            stop: stop.token.clone(),
            // Shutting down, the job gets time to write a checkpoint (never past its own
            // stop); a job that is no longer ours, or out of time, is killed at once.
            grace: || match stop.reason() {
                Some(StopReason::Shutdown) => deadline
                    .saturating_duration_since(Instant::now())
                    .min(STOP_GRACE),
                _ => Duration::ZERO,
            },
        };
        let on_running = |since_created| self.container_running(held, steps, since_created);
        let run = async {
            match &downloaded.module {
                Some(module) => {
                    let plan = self.wasm_plan(held, admitted, dirs, downloaded, module);
                    self.wasm()?.run(&plan, ending, lines_tx, on_running).await
                }
                None => {
                    let plan = self.plan(held, admitted, dirs, downloaded, gpus);
                    self.docker()?
                        .run(&plan, ending, lines_tx, on_running)
                        .await
                }
            }
        };
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

    fn container_running(&self, held: &Held, steps: &Steps, elapsed_since_created: Duration) {
        let since = held.assignment.received.elapsed();
        steps.end("start");
        let steps = steps.list();
        tracing::info!(?since, ?elapsed_since_created, ?steps, "container running");
        metrics::start_seconds(since);
        if let Some(started) = &self.started {
            let _ = started.send(super::Started {
                job_id: held.job_id(),
                since,
                steps,
            });
        }
    }

    fn plan(
        &self,
        held: &Held,
        admitted: &Admitted,
        dirs: &JobDirs,
        downloaded: &Downloaded,
        gpus: &[Gpu],
    ) -> RunPlan {
        let spec = &admitted.spec;
        let mut env: Vec<(String, String)> = spec.env.clone().into_iter().collect();
        env.extend([
            ("GANTRY_JOB_ID".into(), held.job_id().to_string()),
            ("GANTRY_ATTEMPT".into(), held.attempt.to_string()),
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
        RunPlan {
            // The attempt's end names it: a job assigned here again after a reorg gets
            // a container of its own.
            name: format!(
                "gantry-{}-{}-{}",
                self.chain_id,
                held.job_id(),
                held.assignment.until
            ),
            image: spec.image.clone(),
            command: spec.command.clone(),
            env,
            image_user: downloaded.image_user.clone(),
            inputs_dir: dirs.inputs.clone(),
            outputs_dir: dirs.outputs.clone(),
            checkpoints_dir: dirs.checkpoints.clone(),
            tmp_dir: dirs.tmp.clone(),
            memory_bytes: admitted.memory_bytes,
            cpu_threads: admitted.cpu_threads,
            pids_limit: self.settings.pids_limit,
            max_log_bytes: self.settings.max_log_bytes,
            gpu_uuids: gpus.iter().map(|g| g.uuid.clone()).collect(),
            labels: vec![
                (NODE_LABEL.into(), self.node_id.to_string()),
                (JOB_LABEL.into(), held.job_id().to_string()),
            ],
            deterministic: false,
        }
    }

    /// How a WASM job's module runs: the container's directories and limits; its
    /// arguments are the spec's command. A deterministic run sees the spec's environment
    /// only (nothing of this job, node or attempt).
    fn wasm_plan(
        &self,
        held: &Held,
        admitted: &Admitted,
        dirs: &JobDirs,
        downloaded: &Downloaded,
        module: &Path,
    ) -> WasmPlan {
        let spec = &admitted.spec;
        let wasm = spec
            .wasm
            .as_ref()
            .expect("a WASM job's spec names its module");
        let mut env: Vec<(String, String)> = spec.env.clone().into_iter().collect();
        if !wasm.deterministic {
            env.extend([
                ("GANTRY_JOB_ID".into(), held.job_id().to_string()),
                ("GANTRY_ATTEMPT".into(), held.attempt.to_string()),
                (
                    "GANTRY_RESUMED".into(),
                    u8::from(downloaded.restored).to_string(),
                ),
            ]);
        }
        WasmPlan {
            module_path: module.to_path_buf(),
            sha256: wasm.module.sha256.to_ascii_lowercase(),
            entry: wasm.entry().to_owned(),
            args: spec.command.clone(),
            env,
            inputs_dir: dirs.inputs.clone(),
            outputs_dir: dirs.outputs.clone(),
            checkpoints_dir: dirs.checkpoints.clone(),
            tmp_dir: dirs.tmp.clone(),
            memory_bytes: u64::try_from(admitted.memory_bytes).unwrap_or(0),
            max_log_bytes: self.settings.max_log_bytes,
            write_limit: None,
            deterministic: wasm
                .deterministic
                .then(|| Determinism::of(&held.job.terms.spec_hash.0, spec.timeout_secs)),
        }
    }

    /// Packs the outputs directory the spec names and uploads it to the results bucket.
    async fn upload_result(
        &self,
        held: &Held,
        admitted: &Admitted,
        dirs: &JobDirs,
    ) -> Result<Uploaded, Failure> {
        let result_dir = result_dir(admitted, dirs);
        let is_dir = tokio::fs::metadata(&result_dir)
            .await
            .is_ok_and(|m| m.is_dir());
        if !is_dir {
            return Err(Failure::job(format!(
                "{} was not created",
                admitted.spec.outputs.path
            )));
        }
        self.pack_and_upload(
            held,
            &admitted.spec,
            result_dir,
            dirs.root.join("result.tar"),
            admitted.output_limit,
        )
        .await
    }

    /// Packs and uploads the failure report of a job that failed by itself, with its
    /// outputs as it left them when they fit the output limit: the answer to a job that
    /// ran into its own limit is a result too, so the node is paid for the time it gave.
    async fn answer_failure(
        &self,
        job: &Job<'_>,
        failure: Failure,
        exit: Option<&RunOutcome>,
    ) -> Result<Executed, GiveBack> {
        let Job {
            held,
            admitted,
            dirs,
            clock,
            ..
        } = *job;
        tracing::warn!(reason = %failure.reason, "the job failed by itself; answering with its failure report");
        let ran_secs = match self.chain_now().await {
            Ok(now) => clock.ran(now),
            Err(_) => clock.stop_by - clock.assigned_at,
        };
        let outputs = result_dir(admitted, dirs);
        let has_outputs = tokio::fs::metadata(&outputs)
            .await
            .is_ok_and(|m| m.is_dir());
        let node =
            |e: std::io::Error| GiveBack::Node(Failure::node(format!("failure report: {e}")));
        // The report is written beside the job's space, not in it: the job may have
        // filled that.
        let report_file = dirs.root.join(FAILURE_FILE);
        let write_report = |outputs: &str| {
            let report = FailureReport {
                v: 1,
                job_id: held.job_id(),
                node_id: self.node_id,
                attempt: held.attempt,
                reason: &failure.reason,
                exit_code: exit.filter(|e| !e.timed_out).map(|e| e.exit_code),
                // Without an exit: it never ran (its time ran out first, or it was refused).
                timed_out: exit.map_or(!failure.proven, |e| e.timed_out),
                oom_killed: exit.is_some_and(|e| e.oom_killed),
                ran_secs,
                disk_bytes: dirs.space.used().ok(),
                disk_limit_bytes: dirs.space.room(),
                outputs,
            };
            serde_json::to_vec_pretty(&report).expect("reports serialize")
        };
        let tar = dirs.root.join("failure.tar");
        let included = if has_outputs { "included" } else { "none" };
        tokio::fs::write(&report_file, write_report(included))
            .await
            .map_err(node)?;
        let mut parts = vec![(FAILURE_FILE, report_file.clone())];
        if has_outputs {
            parts.push((FAILED_OUTPUTS_DIR, outputs));
        }
        // The outputs within the job's limit, and room for the report besides.
        let limit = admitted.output_limit.saturating_add(REPORT_ROOM);
        let spec = &admitted.spec;
        let uploaded = match self
            .pack_and_upload(held, spec, parts, tar.clone(), limit)
            .await
        {
            Err(f) if f.class == FaultClass::Job && has_outputs => {
                // Too much output: the report alone.
                tokio::fs::write(&report_file, write_report("overLimit"))
                    .await
                    .map_err(node)?;
                let report = vec![(FAILURE_FILE, report_file)];
                self.pack_and_upload(held, spec, report, tar, REPORT_ROOM)
                    .await
            }
            other => other,
        };
        match uploaded {
            Ok(uploaded) => Ok(Executed::Failed(uploaded, failure)),
            Err(f) => Err(GiveBack::Node(Failure::node(format!(
                "the failure report: {}",
                f.reason
            )))),
        }
    }

    /// Packs `what` (at most `limit` bytes) and uploads it as the attempt's result: an
    /// encrypted job's encrypted to its submitter, the chain committing to the plaintext's
    /// hash and the URI carrying the ciphertext's (design 19, §3).
    async fn pack_and_upload(
        &self,
        held: &Held,
        spec: &JobSpec,
        what: impl Into<archive::Contents>,
        tar: std::path::PathBuf,
        limit: u64,
    ) -> Result<Uploaded, Failure> {
        let started = std::time::Instant::now();
        let what = what.into();
        let plain = tar.clone();
        let packed = tokio::task::spawn_blocking(move || archive::pack(what, &plain, limit))
            .await
            .map_err(|e| Failure::node(format!("packing the result: {e}")))??;
        let key = format!("{}-{}", held.job_id(), held.attempt);
        let uri = names::result_uri(self.chain_id, self.node_id, &key);
        let Some(encryption) = &spec.encryption else {
            retry("upload the result", || self.put_result(&key, &packed)).await?;
            metrics::stage_seconds("upload", started.elapsed());
            return Ok(Uploaded {
                hash: B256::from(packed.sha256),
                uri,
                size: packed.size,
            });
        };
        let to = vec![
            encryption::recipient(&encryption.recipient)
                .map_err(|e| Failure::job(format!("encryption.recipient: {e}")))?,
        ];
        let sealed = seal(to, &packed, tar.with_extension("tar.age")).await?;
        let _ = tokio::fs::remove_file(&packed.path).await;
        retry("upload the result", || self.put_result(&key, &sealed)).await?;
        let _ = tokio::fs::remove_file(&sealed.path).await;
        metrics::stage_seconds("upload", started.elapsed());
        Ok(Uploaded {
            hash: B256::from(packed.sha256),
            uri: encryption::with_ciphertext(&uri, B256::from(sealed.sha256)),
            size: sealed.size,
        })
    }
}

/// Whom an encrypted job's checkpoints are encrypted to: its submitter and its job key
/// (released to each attempt's node); none for a job in the clear.
pub(super) fn checkpoint_seal(spec: &JobSpec) -> Vec<AgeRecipient> {
    spec.encryption
        .as_ref()
        .map(gantry_protocol::spec::Encryption::recipients)
        .unwrap_or_default()
}

/// `packed` encrypted to `to` into `into`: the ciphertext's size and hash.
pub(super) async fn seal(
    to: Vec<AgeRecipient>,
    packed: &archive::Packed,
    into: std::path::PathBuf,
) -> Result<archive::Packed, Failure> {
    let from = packed.path.clone();
    tokio::task::spawn_blocking(move || archive::seal(&to, &from, &into))
        .await
        .map_err(|e| Failure::node(format!("encrypting: {e}")))?
        .map_err(|e| Failure::node(format!("encrypting: {e}")))
}

/// A failed run's reason, saying so when the job had written its space full: what it
/// exited with was most likely its reaction to the kernel's "no space left on device".
fn disk_limit(dirs: &JobDirs, failure: Failure) -> Failure {
    if !dirs.space.is_full() {
        return failure;
    }
    Failure::job(format!(
        "disk limit: the job filled its {} MiB of /outputs, /checkpoints and /tmp ({})",
        dirs.space.room() >> 20,
        failure.reason
    ))
}

/// Where the job's result is: the spec's outputs path under the job's outputs directory.
fn result_dir(admitted: &Admitted, dirs: &JobDirs) -> std::path::PathBuf {
    dirs.outputs.join(
        admitted
            .spec
            .outputs
            .path
            .trim_start_matches(OUTPUTS_DIR)
            .trim_start_matches('/'),
    )
}

/// Empties `dir` (a checkpoint that was refused after it began to unpack).
async fn clear_dir(dir: &std::path::Path) -> Result<(), Failure> {
    let mut entries = tokio::fs::read_dir(dir)
        .await
        .map_err(|e| Failure::node(format!("clearing {}: {e}", dir.display())))?;
    while let Ok(Some(entry)) = entries.next_entry().await {
        let path = entry.path();
        let removed = match entry.file_type().await {
            Ok(kind) if kind.is_dir() => tokio::fs::remove_dir_all(&path).await,
            _ => tokio::fs::remove_file(&path).await,
        };
        removed.map_err(|e| Failure::node(format!("clearing {}: {e}", path.display())))?;
    }
    Ok(())
}

/// Writes `object`'s bytes to `into`, at most `limit`; their SHA-256 (the object's size
/// and digest checked).
async fn download_object(
    object: gantry_runtime::objects::Object,
    into: &std::path::Path,
    limit: u64,
) -> std::io::Result<alloy::primitives::B256> {
    use futures::StreamExt as _;
    use sha2::Digest as _;
    use tokio::io::AsyncWriteExt as _;
    let mut file = tokio::fs::File::create(into).await?;
    let mut sha = sha2::Sha256::new();
    let mut bytes = std::pin::pin!(object.bytes(limit));
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk?;
        sha.update(&chunk);
        file.write_all(&chunk).await?;
    }
    file.flush().await?;
    metrics::object_bytes("in", file.metadata().await?.len());
    Ok(alloy::primitives::B256::from(<[u8; 32]>::from(
        sha.finalize(),
    )))
}

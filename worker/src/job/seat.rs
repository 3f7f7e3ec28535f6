//! A verified job's seat run on this node (design 18, §1 and §6): the spec admitted as
//! deterministic WASM, or as a CPU Docker job deterministic by its submitter's word on a
//! node that opted into the deterministic sandbox; its inputs (and module or image)
//! fetched as an assignment's; run on the deterministic engine or in the sandbox; and its
//! outcome packed as a canonical tar: `/outputs` as the run left it and `.gantry/outcome`
//! (`v1 exit <code>`, `v1 trap <reason>` or, for a container, `v1 timeout`). The tar's
//! SHA-256 is the digest the seat seals. Nothing is published: no logs, no progress, no
//! result (a seat's outputs are withheld until the decision).

use std::path::{Path, PathBuf};
use std::time::Duration;

use alloy::primitives::B256;
use gantry_protocol::market::Job;
use gantry_protocol::spec::{
    Engine, VERIFIED_DOCKER_MEMORY_MIB, VERIFIED_DOCKER_PIDS_LIMIT, VERIFIED_MAX_LOG_BYTES,
    VERIFIED_NODE_FUEL_RATE,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Ctx;
use super::dirs::JobDirs;
use crate::admit::{Admitted, admit};
use crate::archive;
use crate::docker::{Ending, JOB_LABEL, NODE_LABEL, RunOutcome, RunPlan};
use crate::fault::{Failure, FaultClass};
use crate::seats::{SealRecord, os_random};
use crate::wasm::{Determinism, WasmPlan};

/// Where a verified outcome records how the run ended, inside its tar.
pub const OUTCOME_FILE: &str = ".gantry/outcome";
/// How long a verified Docker seat's admission waits for its image at most: it must
/// decline within the market's reject grace to go free, and a registry the submitter runs
/// could trickle the bytes to chosen nodes. A node serving large images pulls them ahead.
pub const SEAT_IMAGE_PULL: Duration = Duration::from_secs(10);
/// The market's `REJECT_GRACE`: a verified run given back this long after it was seated
/// (or assigned) goes free.
pub const REJECT_GRACE_SECS: u64 = 30;
/// Kept from the grace for the give-back's transaction to be mined.
pub const DECLINE_MARGIN_SECS: u64 = 8;

/// A verified run's time, by the chain's clock: seated (or assigned) at, from which the
/// reject grace runs, and the moment it must stop by.
#[derive(Debug, Clone, Copy)]
pub struct SeatTime {
    pub seated_at: u64,
    pub stop_by: u64,
}

/// A seat's run: its canonical tar (kept for the upload after the decision) and digest.
#[derive(Debug, Clone)]
pub struct SeatRun {
    pub digest: B256,
    pub tar: PathBuf,
}

impl Ctx {
    /// Whether this node takes verified seats: it runs WASM, or Docker in the
    /// deterministic sandbox (its pool membership's rule, `Engines::verifiable`).
    pub fn serves_seats(&self) -> bool {
        self.wasm.is_some() || (self.executor.is_some() && self.settings.verified_docker)
    }

    /// Whether this node takes a verified run of `job` (a seat's, a referee's or a
    /// refereed provider's), before anything is staged: what the job asks (deterministic
    /// WASM, or Docker on a node that opted in, within the verified profile; a run that
    /// fits its seat, an output this node can keep, a reveal window this node's wait for
    /// finality fits twice) and what the node is (WASM: a build for the deterministic
    /// target, at least the verified speed, the module compiled and linked; Docker: the
    /// image present or pulled). `Err`, of the job's class: declined, free within the
    /// grace, the node healthy; transient: the chain did not answer.
    ///
    /// `seated_at`: the chain time the seat was drawn or the job assigned, from which the
    /// grace runs (a Docker image is fetched only within what is left of it); `None` when
    /// nothing is held yet (claim mode asking before it claims).
    pub async fn admit_verified(
        &self,
        job_id: u64,
        job: &Job,
        seated_at: Option<u64>,
    ) -> Result<Admitted, Failure> {
        let spec_bytes = self.spec_bytes(job_id, job.terms.spec_hash).await?;
        let mut admitted = admit(
            &spec_bytes,
            &job.terms.requirements,
            &self.limits,
            &self.settings,
        )?;
        let spec = &admitted.spec;
        if spec.encryption.is_some() {
            // Seats compare results and a referee re-runs them: an encrypted job's payloads
            // are no one's but its node's (the CLI refuses to post it).
            return Err(Failure::job(
                "an encrypted job cannot be verified: given back",
            ));
        }
        match spec.engine {
            Engine::Wasm if !spec.wasm.as_ref().is_some_and(|w| w.deterministic) => {
                return Err(Failure::job(
                    "a verified WASM job runs in deterministic mode only: given back",
                ));
            }
            Engine::Docker if !self.settings.verified_docker => {
                return Err(Failure::job(
                    "this node does not take verified Docker seats (jobs.verified_docker): \
                     given back",
                ));
            }
            Engine::Wasm if !cfg!(target_arch = "x86_64") => {
                return Err(Failure::job(
                    "verified runs are compiled for x86_64 (their code must be the same on \
                     every node): this build declines them",
                ));
            }
            _ => {}
        }
        // The fit rule (design 18, §1): a job whose fuel no conforming node finishes in a
        // seat's run is declined by every node, free; and a node slower than the
        // conforming ones declines every seat, free. So the wall clock never decides a
        // verified WASM result, and an honest node never holds a seat it cannot finish.
        // A container's run is its own timeout, within the seat.
        spec.verified_fit(u64::from(job.terms.requirements.max_runtime))
            .map_err(|why| Failure::job(format!("{why}: given back")))?;
        // What the run may write, the spec's or the protocol's, never the node's: a node
        // that cannot keep that much (the run's writes, then the outcome's tar) declines.
        let written = spec.verified_output_bytes();
        if written > self.settings.max_output_bytes
            || written.saturating_mul(2) > self.settings.space_room()
        {
            return Err(Failure::job(format!(
                "this node keeps at most {} bytes of output in a {}-byte space; the job may \
                 write {written}: given back",
                self.settings.max_output_bytes,
                self.settings.space_room()
            )));
        }
        // The reveal window must hold this node's wait for finality twice over (design
        // 18, G1): it reveals only once the reveal phase is final, and a window shorter
        // than that wait would make an honest node miss its reveal and be slashed.
        let interval = self
            .chain
            .block_interval()
            .await
            .map_err(|e| Failure::transient(e.to_string()))?;
        let wait = self
            .settings
            .finality_depth
            .max(1)
            .saturating_mul(interval)
            .saturating_mul(2);
        let window = u64::from(job.terms.verification.reveal_window);
        if window < wait {
            return Err(Failure::job(format!(
                "the job's reveal window ({window} s) is shorter than twice this node's wait \
                 for finality ({} blocks of ~{interval} s): given back",
                self.settings.finality_depth.max(1)
            )));
        }
        if spec.engine == Engine::Docker {
            // The job's memory, never the node's default: where a run runs out of memory
            // is part of its result.
            let memory_mib = match job.terms.requirements.min_ram_mib {
                0 => VERIFIED_DOCKER_MEMORY_MIB,
                mib => mib,
            };
            if memory_mib > self.limits.ram_mib {
                return Err(Failure::job(format!(
                    "needs {memory_mib} MiB of memory; this node has {}: given back",
                    self.limits.ram_mib
                )));
            }
            admitted.memory_bytes = i64::from(memory_mib) << 20;
            // The image, here before the run (pulled by its digest: the same bytes on
            // every node), within the grace; one that cannot be had by then is declined.
            let docker = self.docker()?;
            let budget = match seated_at {
                Some(at) => {
                    let by = at + REJECT_GRACE_SECS - DECLINE_MARGIN_SECS;
                    let left = by.saturating_sub(self.chain_now().await?);
                    SEAT_IMAGE_PULL.min(Duration::from_secs(left))
                }
                None => SEAT_IMAGE_PULL,
            };
            tokio::time::timeout(budget, docker.ensure_image(&admitted.spec.image))
                .await
                .map_err(|_| {
                    Failure::job(format!(
                        "the image did not arrive within {} s (a node fetches a verified \
                         seat's image within the reject grace; pull large images ahead): \
                         given back",
                        budget.as_secs()
                    ))
                })??;
            return Ok(admitted);
        }
        let wasm_spec = spec
            .wasm
            .as_ref()
            .expect("checked deterministic WASM above");
        let engine = self.wasm()?;
        let rate = engine.verified_rate().await?;
        if rate < VERIFIED_NODE_FUEL_RATE {
            // Declined, not failed: the node stays healthy for every other job.
            return Err(Failure::job(format!(
                "this node runs {} M of fuel a second, below the {} M a verified seat \
                 counts on: it declines verified seats",
                rate / 1_000_000,
                VERIFIED_NODE_FUEL_RATE / 1_000_000
            )));
        }
        // The module, compiled and linked (kept for the run): what it could fail at is
        // found before anything else is staged.
        let module = self.fetch_module(spec).await?;
        engine
            .check(&WasmPlan {
                module_path: module,
                sha256: wasm_spec.module.sha256.to_ascii_lowercase(),
                entry: wasm_spec.entry().to_owned(),
                args: Vec::new(),
                env: Vec::new(),
                inputs_dir: PathBuf::new(),
                outputs_dir: PathBuf::new(),
                checkpoints_dir: PathBuf::new(),
                tmp_dir: PathBuf::new(),
                memory_bytes: 0,
                max_log_bytes: 0,
                write_limit: None,
                deterministic: Some(Determinism::of(&job.terms.spec_hash.0, spec.timeout_secs)),
            })
            .await?;
        Ok(admitted)
    }

    /// Runs `job` (verified) for a seat in `dir`, admitted within the grace from
    /// `time.seated_at` and stopping by chain time `time.stop_by` (or when `stop` fires);
    /// the tar is moved to `keep`. `Err` of the job's class: the spec
    /// is not one a seat runs (given back, free); of the node's: this node could not run
    /// it.
    pub async fn run_seat(
        &self,
        job_id: u64,
        job: &Job,
        dir: &Path,
        keep: &Path,
        time: SeatTime,
        stop: CancellationToken,
    ) -> Result<SeatRun, Failure> {
        let SeatTime { seated_at, stop_by } = time;
        let admitted = self.admit_verified(job_id, job, Some(seated_at)).await?;
        let written = admitted.spec.verified_output_bytes();
        let dirs = JobDirs::create(dir, &self.spaces).await?;
        let outcome = match admitted.spec.engine {
            Engine::Wasm => {
                self.run_wasm_seat(job_id, job, &admitted, &dirs, stop_by, &stop)
                    .await?
            }
            Engine::Docker => {
                self.run_docker_seat(job_id, &admitted, &dirs, stop_by, &stop)
                    .await?
            }
        };
        if stop.is_cancelled() {
            return Err(Failure::node("the worker is stopping"));
        }
        let tar = dirs.root.join("verified.tar");
        let own = dirs.root.join("outcome");
        let packed = match pack_outcome(Some(&dirs.outputs), &own, &outcome, &tar, written).await {
            // A container writes to its disk, not through counted calls, and may leave
            // there what cannot be packed: more than its output limit (on every node
            // alike), or files the worker cannot read. Its outcome alone then says so, so
            // that the seat still commits (silence is slashed; parting is not).
            // A WASM run's writes are counted, but not the tar's framing nor what it
            // creates: past the limit is the job's doing on every node alike, sealed too
            // (a seat that gave it back now, after its run, would be charged).
            Err(e) if admitted.spec.engine == Engine::Docker || e.class == FaultClass::Job => {
                let why = match e.class {
                    FaultClass::Job => "output-limit",
                    _ => "output-unreadable",
                };
                tracing::info!(job_id, reason = %e, "the outputs could not be packed: sealed as {why}");
                pack_outcome(None, &own, &format!("v1 trap {why}\n"), &tar, written).await?
            }
            packed => packed?,
        };
        if let Some(parent) = keep.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| Failure::node(format!("keeping the outcome: {e}")))?;
        }
        tokio::fs::rename(&tar, keep)
            .await
            .map_err(|e| Failure::node(format!("keeping the outcome: {e}")))?;
        Ok(SeatRun {
            digest: B256::from(packed.sha256),
            tar: keep.to_owned(),
        })
    }

    /// A deterministic WASM seat's run: its outcome line.
    async fn run_wasm_seat(
        &self,
        job_id: u64,
        job: &Job,
        admitted: &Admitted,
        dirs: &JobDirs,
        stop_by: u64,
        stop: &CancellationToken,
    ) -> Result<String, Failure> {
        let spec = &admitted.spec;
        let wasm_spec = spec.wasm.as_ref().expect("admitted as deterministic WASM");
        let engine = self.wasm()?;
        // The module (fetched and compiled by the admission: from the cache now).
        let module = self.fetch_module(spec).await?;
        let plan = WasmPlan {
            module_path: module,
            sha256: wasm_spec.module.sha256.to_ascii_lowercase(),
            entry: wasm_spec.entry().to_owned(),
            args: spec.command.clone(),
            env: spec.env.clone().into_iter().collect(),
            inputs_dir: dirs.inputs.clone(),
            outputs_dir: dirs.outputs.clone(),
            checkpoints_dir: dirs.checkpoints.clone(),
            tmp_dir: dirs.tmp.clone(),
            memory_bytes: u64::try_from(admitted.memory_bytes).unwrap_or(0),
            // The protocol's, never the node's: a node's log limit must not decide a result.
            max_log_bytes: VERIFIED_MAX_LOG_BYTES,
            // Nor its disk: asking to write more than the spec's output ends the run alike
            // on every node, long before a node's space could fill.
            write_limit: Some(spec.verified_output_bytes()),
            deterministic: Some(Determinism::of(&job.terms.spec_hash.0, spec.timeout_secs)),
        };
        if let Some(outcome) = self.stage_verified_inputs(job_id, spec, dirs).await? {
            return Ok(outcome);
        }
        let ran = drained(
            |lines, ending| engine.run(&plan, ending, lines, |_| {}),
            self,
            stop_by,
            stop,
        )
        .await?;
        if ran.timed_out && !stop.is_cancelled() {
            // Fuel decides a deterministic run's end; the wall clock stopping it means
            // this node is too slow for the job: not a result any node would agree on.
            return Err(Failure::node(
                "the run reached the seat's time before its fuel: this node is too slow for it",
            ));
        }
        Ok(outcome_line(&ran))
    }

    /// A verified Docker seat's run in the deterministic sandbox (design 18, §1): the
    /// spec's environment only, a fixed host name, one CPU, the job's memory and the
    /// protocol's process and log limits, no GPU, no network; its outcome line. A run the
    /// clock stops (its own timeout, or the seat's end on a slow node) is `v1 timeout`:
    /// committed like any result, since on a Docker job a seat apart from the quorum is
    /// not slashed, and one that says nothing is.
    async fn run_docker_seat(
        &self,
        job_id: u64,
        admitted: &Admitted,
        dirs: &JobDirs,
        stop_by: u64,
        stop: &CancellationToken,
    ) -> Result<String, Failure> {
        let spec = &admitted.spec;
        let docker = self.docker()?;
        // Here since the admission: only its configured user is read.
        let image_user = tokio::time::timeout(SEAT_IMAGE_PULL, docker.ensure_image(&spec.image))
            .await
            .map_err(|_| Failure::node("the image admitted is gone"))??;
        if let Some(outcome) = self.stage_verified_inputs(job_id, spec, dirs).await? {
            return Ok(outcome);
        }
        let plan = RunPlan {
            // Seats of one job on nodes sharing a Docker engine each get their own.
            name: format!(
                "gantry-{}-{job_id}-seat-{}-{stop_by}",
                self.chain_id, self.node_id
            ),
            image: spec.image.clone(),
            command: spec.command.clone(),
            env: spec.env.clone().into_iter().collect(),
            image_user,
            inputs_dir: dirs.inputs.clone(),
            outputs_dir: dirs.outputs.clone(),
            checkpoints_dir: dirs.checkpoints.clone(),
            tmp_dir: dirs.tmp.clone(),
            memory_bytes: admitted.memory_bytes,
            cpu_threads: 1,
            pids_limit: VERIFIED_DOCKER_PIDS_LIMIT,
            max_log_bytes: VERIFIED_MAX_LOG_BYTES,
            gpu_uuids: Vec::new(),
            labels: vec![
                (NODE_LABEL.into(), self.node_id.to_string()),
                (JOB_LABEL.into(), job_id.to_string()),
            ],
            deterministic: true,
        };
        let own = Duration::from_secs(spec.timeout_secs);
        let ran = match drained(
            |lines, mut ending| {
                ending.timeout = ending.timeout.min(own);
                docker.run(&plan, ending, lines, |_| {})
            },
            self,
            stop_by,
            stop,
        )
        .await
        {
            Ok(ran) => ran,
            // The engine refused the container as the job made it (no such command or
            // user), or failed it: sealed as its result. Parting costs a Docker seat
            // nothing, while a seat given back after the grace is charged.
            Err(e) => {
                let why = match e.class {
                    FaultClass::Job => "container-refused",
                    _ => "container-failed",
                };
                tracing::info!(job_id, reason = %e, "the container did not run: sealed as {why}");
                return Ok(format!("v1 trap {why}\n"));
            }
        };
        Ok(if ran.timed_out {
            "v1 timeout\n".to_owned()
        } else {
            outcome_line(&ran)
        })
    }

    /// Stages a verified run's inputs; `Some(outcome)` when they cannot be had for the
    /// job's own reason (a hash that does not match, an object missing or over its
    /// declared size: the same on every node, which fetches the same bytes from the same
    /// bucket), sealed as the run's result rather than given back after the grace.
    async fn stage_verified_inputs(
        &self,
        job_id: u64,
        spec: &gantry_protocol::spec::JobSpec,
        dirs: &JobDirs,
    ) -> Result<Option<String>, Failure> {
        match self.stage_inputs(spec, dirs, None).await {
            Ok(()) => Ok(None),
            Err(e) if e.class == FaultClass::Job => {
                tracing::info!(job_id, reason = %e, "the inputs could not be had: sealed as input-refused");
                Ok(Some("v1 trap input-refused\n".to_owned()))
            }
            Err(e) => Err(e),
        }
    }

    /// The seal record of `run`, the outcome of seat `seat` of `job_id` (or of its
    /// provider's, `PROVIDER_SEAT`): 32 bytes of OS randomness as its salt, not yet saved,
    /// committed or revealed.
    pub fn seal(&self, job_id: u64, seat: u8, mut run: SeatRun) -> Result<SealRecord, Failure> {
        if self.test.corrupt_digest {
            // The test hook's liar: a digest no honest node computes.
            run.digest = alloy::primitives::keccak256(run.digest);
        }
        let salt = os_random()?;
        let seal = gantry_protocol::market::seal(
            self.chain_id,
            self.chain.market_address(),
            job_id,
            seat,
            self.node_id,
            run.digest,
            salt,
        );
        Ok(SealRecord {
            job: job_id,
            seat,
            digest: run.digest,
            salt,
            seal,
            tar: run.tar,
            committed: false,
            revealed: false,
            put: false,
        })
    }
}

/// Runs `run` with its output lines drained (a seat publishes nothing before the
/// decision) and an ending at chain time `stop_by` or when `stop` fires. The seat's time
/// counts from its draw: what the fetch took is gone.
async fn drained<F, Fut>(
    run: F,
    ctx: &Ctx,
    stop_by: u64,
    stop: &CancellationToken,
) -> Result<RunOutcome, Failure>
where
    F: FnOnce(mpsc::Sender<crate::docker::OutputLine>, Ending<fn() -> Duration>) -> Fut,
    Fut: std::future::Future<Output = Result<RunOutcome, Failure>>,
{
    let (lines, mut drain) = mpsc::channel(64);
    let drainer = tokio::spawn(async move { while drain.recv().await.is_some() {} });
    let timeout = Duration::from_secs(stop_by.saturating_sub(ctx.chain_now().await?));
    let ending: Ending<fn() -> Duration> = Ending {
        timeout,
        stop: stop.clone(),
        grace: || Duration::ZERO,
    };
    let ran = run(lines, ending).await;
    drainer.abort();
    ran
}

/// How a run ended, as its outcome entry says it.
fn outcome_line(ran: &RunOutcome) -> String {
    if ran.flooded.is_some() {
        "v1 trap log-limit\n".to_owned()
    } else if ran.oom_killed {
        "v1 trap out-of-memory\n".to_owned()
    } else if let Some(reason) = &ran.reason {
        format!("v1 trap {reason}\n")
    } else {
        format!("v1 exit {}\n", ran.exit_code)
    }
}

/// Packs `outputs` (none: nothing of them) with the outcome entry `.gantry/outcome`
/// holding `outcome` into `tar`, at most `limit` bytes. The entry is written in `own`, a
/// directory of the worker's, never into the outputs: what the job left under `.gantry`
/// (a file, a fifo, a link to a host file) is not read, followed or packed.
async fn pack_outcome(
    outputs: Option<&Path>,
    own: &Path,
    outcome: &str,
    tar: &Path,
    limit: u64,
) -> Result<archive::Packed, Failure> {
    let gantry = own.join(".gantry");
    let _ = tokio::fs::remove_dir_all(own).await;
    tokio::fs::create_dir_all(&gantry)
        .await
        .map_err(|e| Failure::node(format!("the outcome: {e}")))?;
    tokio::fs::write(gantry.join("outcome"), outcome)
        .await
        .map_err(|e| Failure::node(format!("the outcome: {e}")))?;
    let contents = match outputs {
        Some(dir) => archive::Contents::Overlaid {
            dir: dir.to_owned(),
            name: ".gantry",
            own: gantry,
        },
        None => archive::Contents::Parts(vec![(".gantry", gantry)]),
    };
    let into = tar.to_owned();
    tokio::task::spawn_blocking(move || archive::pack(contents, &into, limit))
        .await
        .map_err(|e| Failure::node(format!("packing the outcome: {e}")))?
}

//! A verified job's seat run on this node (design 18, §1 and §6): the spec admitted as
//! deterministic WASM only, its inputs and module fetched as an assignment's, the module
//! run on the deterministic engine, and its outcome packed as a canonical tar: `/outputs`
//! as the module left it and `.gantry/outcome` (`v1 exit <code>` or `v1 trap <reason>`).
//! The tar's SHA-256 is the digest the seat seals. Nothing is published: no logs, no
//! progress, no result (a seat's outputs are withheld until the decision).

use std::path::{Path, PathBuf};
use std::time::Duration;

use alloy::primitives::B256;
use gantry_protocol::market::Job;
use gantry_protocol::spec::{VERIFIED_MAX_LOG_BYTES, VERIFIED_NODE_FUEL_RATE};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Ctx;
use super::dirs::JobDirs;
use crate::admit::{Admitted, admit};
use crate::archive;
use crate::docker::Ending;
use crate::fault::Failure;
use crate::seats::{SealRecord, os_random};
use crate::wasm::{Determinism, WasmPlan};

/// Where a verified outcome records how the run ended, inside its tar.
pub const OUTCOME_FILE: &str = ".gantry/outcome";

/// A seat's run: its canonical tar (kept for the upload after the decision) and digest.
#[derive(Debug, Clone)]
pub struct SeatRun {
    pub digest: B256,
    pub tar: PathBuf,
}

impl Ctx {
    /// Whether this node takes a verified run of `job` (a seat's, a referee's or a
    /// refereed provider's), before anything is staged: what the job asks (deterministic
    /// WASM within the verified profile, a run that fits its seat, an output this node can
    /// keep, a reveal window this node's wait for finality fits twice) and what the node is
    /// (a build for the deterministic target, at least the verified speed, the module
    /// compiled and linked). `Err`, of the job's class: declined, free within the grace,
    /// the node healthy; transient: the chain did not answer.
    pub async fn admit_verified(&self, job_id: u64, job: &Job) -> Result<Admitted, Failure> {
        let spec_bytes = self.spec_bytes(job_id, job.terms.spec_hash).await?;
        let admitted = admit(
            &spec_bytes,
            &job.terms.requirements,
            &self.limits,
            &self.settings,
        )?;
        let spec = &admitted.spec;
        let wasm_spec = spec
            .wasm
            .as_ref()
            .filter(|w| w.deterministic)
            .ok_or_else(|| {
                Failure::job("a verified seat runs deterministic WASM only: given back")
            })?;
        if !cfg!(target_arch = "x86_64") {
            return Err(Failure::job(
                "verified runs are compiled for x86_64 (their code must be the same on every \
                 node): this build declines them",
            ));
        }
        // The fit rule (design 18, §1): a job whose fuel no conforming node finishes in a
        // seat's run is declined by every node, free; and a node slower than the
        // conforming ones declines every seat, free. So the wall clock never decides a
        // verified result, and an honest node never holds a seat it cannot finish.
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

    /// Runs `job` (verified, deterministic WASM) for a seat in `dir`, stopping by chain
    /// time `stop_by` (or when `stop` fires); the tar is moved to `keep`. `Err` of the job's class: the spec is not one a seat
    /// runs (given back, free); of the node's: this node could not run it.
    pub async fn run_seat(
        &self,
        job_id: u64,
        job: &Job,
        dir: &Path,
        keep: &Path,
        stop_by: u64,
        stop: CancellationToken,
    ) -> Result<SeatRun, Failure> {
        let admitted = self.admit_verified(job_id, job).await?;
        let spec = &admitted.spec;
        let wasm_spec = spec.wasm.as_ref().expect("admitted as deterministic WASM");
        let written = spec.verified_output_bytes();
        let engine = self.wasm()?;
        let dirs = JobDirs::create(dir, &self.spaces).await?;
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
            write_limit: Some(written),
            deterministic: Some(Determinism::of(&job.terms.spec_hash.0, spec.timeout_secs)),
        };
        self.stage_inputs(spec, &dirs).await?;
        // Its output lines go nowhere: a seat publishes nothing before the decision.
        let (lines, mut drained) = mpsc::channel(64);
        let drain = tokio::spawn(async move { while drained.recv().await.is_some() {} });
        // The seat's time counts from its draw: what the fetch took is gone.
        let timeout = Duration::from_secs(stop_by.saturating_sub(self.chain_now().await?));
        let ending = Ending {
            timeout,
            stop: stop.clone(),
            grace: || Duration::ZERO,
        };
        let ran = engine.run(&plan, ending, lines, |_| {}).await;
        drain.abort();
        let ran = ran?;
        if stop.is_cancelled() {
            return Err(Failure::node("the worker is stopping"));
        }
        if ran.timed_out {
            // Fuel decides a deterministic run's end; the wall clock stopping it means
            // this node is too slow for the job: not a result any node would agree on.
            return Err(Failure::node(
                "the run reached the seat's time before its fuel: this node is too slow for it",
            ));
        }
        let outcome = if ran.flooded.is_some() {
            "v1 trap log-limit\n".to_owned()
        } else if ran.oom_killed {
            "v1 trap out-of-memory\n".to_owned()
        } else if let Some(reason) = &ran.reason {
            format!("v1 trap {reason}\n")
        } else {
            format!("v1 exit {}\n", ran.exit_code)
        };
        let outcome_path = dirs.outputs.join(OUTCOME_FILE);
        if let Some(parent) = outcome_path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| Failure::node(format!("the outcome: {e}")))?;
        }
        tokio::fs::write(&outcome_path, outcome)
            .await
            .map_err(|e| Failure::node(format!("the outcome: {e}")))?;
        let tar = dirs.root.join("verified.tar");
        let (outputs, into, limit) = (dirs.outputs.clone(), tar.clone(), written);
        let packed = tokio::task::spawn_blocking(move || archive::pack(outputs, &into, limit))
            .await
            .map_err(|e| Failure::node(format!("packing the outcome: {e}")))??;
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

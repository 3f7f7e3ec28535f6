//! The worker against real components: anvil, nats-server, dockerd, the indexer, the
//! matcher and the liveness keeper; the worker runs as its binary.
//!
//! The engine is a private dockerd with a busybox image imported for the test; after each
//! test no container is left. The point throughout: an honest provider is never slashed
//! for what a job or its submitter did.
//!
//! - `pipeline`: a job reads a `nats://` input, prints progress and logs, writes an
//!   output, and the chain's result hash equals the SHA-256 of the uploaded tar;
//!   progress, logs and completion arrive on NATS, and the node's earnings grow by the
//!   bounty less the fee after finalize, its stake untouched.
//! - `clock`: a job sleeping past its own `timeoutSecs` (5 s of a 600 s attempt) is
//!   stopped at that limit from its assignment, answered with its failure report (with
//!   what it wrote before) before `until`, and paid after the challenge window; no
//!   `NodeSlashed` for the node.
//! - `hostile`: jobs written to get the provider slashed (memory hog, fork bomb, endless
//!   loop, a timeout as long as the whole runtime, network attempt, oversized output, no
//!   output, writing its disk full through /outputs or /tmp, printing without end, an
//!   input trickled slower than the job's time) are each answered in time with a failure
//!   report and paid; those that cannot start (input hash mismatch, missing image,
//!   invalid spec, an image reference Docker refuses, a NUL in the env, a runtime within
//!   the answer margin) are rejected at once for a small charge; nothing is ever
//!   reclaimed, a healthy job beside them completes, and the node still takes work (a
//!   spec of exactly the size limit).
//! - `engine`: the clean-up when the node recovers from a fault removes the containers an
//!   outage left, never a running job's.
//! - `capacity`: a node registered for one job at a time (its worker's config says four)
//!   is assigned a second while the first runs: the second is given back at once for a
//!   free (within the reject grace), the first finishes undisturbed.
//! - `resume`: a worker SIGKILLed mid-job (its container removed by the reaper, the job
//!   reclaimed with a full slash: the node's own fault) and one stopped with SIGTERM (the
//!   job checkpointed and given back with `reject` while the node is active, for a small
//!   charge, then the node marked inactive by its agent): in both the job resumes on a
//!   second worker from its last checkpoint.
//! - `checkpoint`: a checkpoint tampered with where it is kept (other bytes under the
//!   first node's signed metadata) is refused at restore: the job starts again from
//!   scratch on the second node, which is not slashed
//!   (`checkpoint_a_tampered_checkpoint_is_refused_and_the_job_starts_again_unslashed`).
//! - `shutdown`: SIGTERM with a running job that can finish: an assignment arriving
//!   during the drain is given back at once, the running job finishes and is submitted,
//!   and only then is the node marked inactive by its agent.
//! - `outage`: the Docker engine stopped mid-job: the job given back at once (no
//!   reclaim), a job assigned while the engine is down given back at once too, the node
//!   healthy again when the engine is back; both jobs run on a second node, the first
//!   from its checkpoint.
//! - `reorg`: an assignment reorganised away with `anvil_reorg` while its job runs: the
//!   container stopped (the market's hash no longer the held state's), nothing sent, the
//!   job run again when assigned again.
//! - `claim`: claim mode with no matcher, and a busy node in claim mode claiming the next
//!   job only once its slot frees.
//! - `start`: a worker started before the indexer waits for the chain stream, then takes
//!   work.
//! - `liveness`: a worker frozen with SIGSTOP past the heartbeat timeout (the keeper
//!   marks its node inactive) brings the node back to Active by itself once resumed, and
//!   says why its node takes no work (`gantry_worker_not_taking_work{reason}`, `/readyz`
//!   503) once it is exiting; an attempt over on chain unanswered (frozen past `until`,
//!   no keeper, the answer refused) is acknowledged and dropped, never run again.
//! - `operator`: a node registered by its operator for the worker's key (with its
//!   consent) is served as registered.
//! - `wasm`: on workers without a Docker engine (`engines = ["wasm"]`), the demo module
//!   reads its input, prints progress and writes its result, whose SHA-256 is the one on
//!   chain; a module that traps is answered with its failure report (no slash) and the
//!   worker takes the next job; a deterministic job run by two nodes gives the same
//!   result (fixed clocks, seeded randomness), and run free another; a refereed job a
//!   matcher places on the node is given back at once and free (`rejectRefereed`: this
//!   worker does not serve verified jobs yet); a replicated 3/2 job on three workers of
//!   three operators with the keeper: each runs its seat, commits and reveals, all three
//!   are paid (`verification_replicated_3_2_on_three_workers_pays_all_three`); with one
//!   worker lying (the `[test] corrupt_digest` hook) the two honest ones are paid and the
//!   liar slashed its seat stake (`verification_a_lying_worker_is_slashed_and_the_job_still_completes`).
//!   A worker killed after its commit and started again still reveals from its seal record
//!   (`verification_a_worker_restarted_after_its_commit_still_reveals`).
//! - `handshake`: NATS as in production (no user for any node, the auth service answering
//!   the callout): a worker joins with its agent key alone and runs a WASM job to its
//!   submission; its manifest is kept where the matcher reads it.
//! - `encrypted` (design 19, §3): a job with an encrypted input and an encrypted result:
//!   both are ciphertext in the store, the worker gets the job key from the submitter's
//!   key server after its assignment, the submitter decrypts the result and both hashes
//!   check, no plaintext is left on the node; a key never released (a stranger's forged
//!   one skipped) gets the job given back free within the grace; an encrypted job's
//!   checkpoints are ciphertext and resume on the next node once the key is released to it.
//! - `inventory`: `gantry-worker inventory` prints what the node would register and
//!   samples GPU telemetry; on this machine, without NVML, it says why there are no GPUs.

mod capacity;
mod checkpoint;
mod claim;
mod clock;
mod docker_seats;
mod encrypted;
mod engine;
mod handshake;
mod harness;
mod hostile;
mod inventory;
mod liveness;
mod operator;
mod outage;
mod pipeline;
mod reorg;
mod resume;
mod scripts;
mod shutdown;
mod start;
mod wasm;

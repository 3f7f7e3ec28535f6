//! The worker against real components: anvil, nats-server, dockerd, the indexer, the
//! matcher and the liveness keeper; the worker runs as its binary.
//!
//! The engine is a private dockerd with a busybox image imported for the test; after each
//! test no container is left.
//!
//! - `pipeline`: a job reads a `nats://` input, prints progress and logs, writes an
//!   output, and the chain's result hash equals the SHA-256 of the uploaded tar;
//!   progress, logs and completion arrive on NATS, and the operator is credited after
//!   finalize.
//! - `hostile`: eight hostile or broken jobs (memory hog, fork bomb, endless loop, network
//!   attempt, oversized output, input hash mismatch, missing image, invalid spec), each
//!   rejected with its reason, the node never slashed and still taking work.
//! - `resume`: a worker SIGKILLed mid-job (its container removed by the reaper, the job
//!   reclaimed, the node slashed) and one stopped with SIGTERM (the job given back with
//!   `abandon`, or reclaimed by the keeper if it saw the node go inactive first): in both
//!   the job resumes on a second worker from its last checkpoint.
//! - `outage`: the Docker engine stopped mid-job: the job given back at once, no work
//!   taken while the engine is down, the job run again from its checkpoint when it is
//!   back (attempt 2).
//! - `reorg`: an assignment reorganised away with `anvil_reorg` while its job runs: the
//!   container stopped, nothing sent, the job run again when assigned again.
//! - `claim`: claim mode with no matcher, and a busy node in claim mode claiming the next
//!   job only once its slot frees.
//! - `start`: a worker started before the indexer waits for the chain stream, then takes
//!   work.
//! - `operator`: a node registered by its operator for the worker's key is served as
//!   registered.

mod claim;
mod harness;
mod hostile;
mod operator;
mod outage;
mod pipeline;
mod reorg;
mod resume;
mod scripts;
mod start;

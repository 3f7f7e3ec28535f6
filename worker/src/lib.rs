//! `gantry-worker`: the provider's agent. Pulls its node's assignments from the stream,
//! checks each on-chain (the job's terms and state, folded from the market's logs and
//! checked against the hash it stores), downloads inputs, runs the job's container
//! through the Docker API on the job's own clock, uploads results and submits the result
//! hash on-chain, passing the job's terms and current state to every call.
//!
//! ```text
//!   service::run ──▶ node::start ──▶ health: heartbeats, engine and disk checks
//!        │                           claim (auto_accept): JobPosted/JobRequeued ──▶ claim
//!        ▼
//!   assignments: gantry.<chain>.ev.JobAssigned.<node> ──▶ one task per assignment ──▶ shutdown::drain
//!        │  read_job: ours? ──▶ admission: a free slot, healthy, not draining? else reject at once
//!        ▼
//!   job: admit ──▶ clock: stop_by ──▶ fetch inputs ──▶ restore checkpoint (objects, archive)
//!     ──▶ docker run (sandbox), job::watch beside it: logs, progress, GPU, checkpoints,
//!         ownership (jobHash, the chain's time)
//!     ──▶ archive::pack + gantry_runtime::objects::put (under the node's id) ──▶ submitResult ──▶ completion report
//!         (the result, or the failure report of a job that failed by itself;
//!          reject for a job that cannot start)
//! ```
//!
//! Pure cores: [`admit`], [`sandbox`] (the container a job gets), [`fault`], [`archive`]
//! (tars, files only), [`job::clock`] (when a job stops), the admission of an assignment
//! (`assignments::admission`). IO: [`chain`], [`fetch`], [`docker::Executor`],
//! [`objects`], [`job`] (one assignment), [`service`] (the process: start-up in `node`,
//! the assignment loop in `assignments`, claim mode in `claim`, heartbeat and health in
//! `health`, the drain in `shutdown`). [`config`], [`error`] and [`metrics`] as in every
//! crate.

pub mod admit;
pub mod archive;
mod assignments;
pub mod chain;
mod claim;
pub mod config;
pub mod docker;
pub mod error;
pub mod fault;
pub mod fetch;
mod health;
pub mod inventory;
pub mod job;
pub mod metrics;
mod node;
pub mod sandbox;
pub mod seats;
pub mod service;
mod shutdown;
pub mod space;
pub mod wasm;

//! `gantry-worker`: the provider's agent. Pulls its node's assignments from the stream,
//! checks each on-chain, downloads inputs, runs the job's container through the Docker API,
//! uploads results and submits the result hash on-chain.
//!
//! ```text
//!   service::run ──▶ node::start ──▶ health: heartbeats, engine and disk checks
//!        │                           claim (auto_accept): JobPosted/JobRequeued ──▶ claim
//!        ▼
//!   assignments: gantry.<chain>.ev.JobAssigned.<node> ──▶ one task per job ──▶ shutdown::drain
//!        ▼
//!   job: getJob ──▶ admit ──▶ fetch inputs ──▶ restore checkpoint (objects, archive)
//!     ──▶ docker run (sandbox), job::watch beside it: logs, progress, GPU, checkpoints, ownership
//!     ──▶ archive::pack + objects::upload ──▶ submitResult ──▶ completion report
//!                                              (or reject / abandon)
//! ```
//!
//! Pure cores: [`admit`], [`sandbox`] (the container a job gets), [`fault`], [`archive`]
//! (tars, files only). IO: [`chain`], [`fetch`], [`docker::Executor`], [`objects`],
//! [`job`] (one assignment), [`service`] (the process: start-up in `node`, the assignment
//! loop in `assignments`, claim mode in `claim`, heartbeat and health in `health`, the
//! drain in `shutdown`). [`config`], [`error`] and [`metrics`] as in every crate.

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
pub mod objects;
pub mod sandbox;
pub mod service;
mod shutdown;

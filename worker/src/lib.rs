//! `gantry-worker`: the provider's agent. Pulls its node's assignments from the stream,
//! downloads inputs, runs the job's container through the Docker API, uploads results and
//! submits the result hash on-chain.
//!
//! ```text
//!   gantry.<chain>.ev.JobAssigned.<node> ──▶ fetch inputs ──▶ docker run ──▶ submitResult
//! ```
//!
//! In progress: [`config`] (the provider's config file) and [`inventory`] (NVML, CPU, RAM,
//! disk) are built; the rest follows.

pub mod admit;
pub mod chain;
pub mod config;
pub mod docker;
pub mod fault;
pub mod fetch;
pub mod inventory;
pub mod job;
pub mod service;
pub mod store;

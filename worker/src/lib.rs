//! `gantry-worker`: the provider's agent. Pulls its node's assignments from the stream,
//! checks each on-chain, downloads inputs, runs the job's container through the Docker API,
//! uploads results and submits the result hash on-chain.
//!
//! ```text
//!   gantry.<chain>.ev.JobAssigned.<node> ──▶ getJob ──▶ admit ──▶ fetch inputs
//!     ──▶ restore checkpoint ──▶ docker run (logs, progress, checkpoints) ──▶ tar + upload
//!     ──▶ submitResult ──▶ completion report          (or reject / abandon)
//! ```
//!
//! Pure cores: [`admit`], [`docker::container_body`], [`fault`]. IO: [`chain`], [`fetch`],
//! [`docker::Executor`], [`store`], [`job`] (one assignment), [`service`] (the process).

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

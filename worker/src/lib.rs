//! `gantry-worker`: the provider's agent. Pulls its node's assignments from the stream,
//! downloads inputs, runs the job's container through the Docker API, uploads results and
//! submits the result hash on-chain.
//!
//! ```text
//!   gantry.<chain>.ev.JobAssigned.<node> ──▶ fetch inputs ──▶ docker run ──▶ submitResult
//! ```
//!
//! Not built yet: a later issue fills this crate.

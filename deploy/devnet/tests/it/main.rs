//! Integration tests against real anvil, forge and nats-server, installed by
//! `deploy/setup.sh` (the fixtures' own tests are gantry-testkit's).
//!
//! - `lifecycle`: one job's whole life on a real chain (permit post, assign, submit,
//!   finalize, withdraw), every event decoded as consumers will.
//! - `artifacts`: the artifact freshness check: the committed artifacts equal a fresh
//!   `forge` build.
//! - `eligibility`: the matcher's rule (`gantry_matcher::decide::violations`: the job's
//!   bars, the node's status, then `gantry_protocol::eligibility`'s mirror of
//!   `_checkEligible`) agrees with the deployed contract's `assign` (simulated with
//!   `eth_call`) on every pair of a random set of nodes (some exiting or inactive) and
//!   jobs (some given back, their node barred), down to the first check that fails.
//! - `nats_config`: the production NATS files in `deploy/nats/`, run by a real
//!   nats-server with the permissions `gantry_protocol::nats_auth` renders; what they
//!   allow and refuse is described under "Tested here" in
//!   `deploy/README.md`.
//! - `handshake`: the same config with the auth service on a real chain, as an attacker
//!   tries it: only a registered node's agent is let in, once per token, to its own
//!   node's consumers, inbox and bucket; its access renews until the node exits.

mod artifacts;
mod eligibility;
mod handshake;
mod lifecycle;
mod nats_config;

//! Integration tests against real anvil, forge, dockerd and PostgreSQL, installed by
//! `deploy/setup.sh`.
//!
//! - `lifecycle`: one job's whole life on a real chain (permit post, assign, submit,
//!   finalize, withdraw), every event decoded as consumers will.
//! - `artifacts`: the artifact freshness check: the committed artifacts equal a fresh
//!   `forge` build.
//! - `eligibility`: `gantry_protocol::eligibility` agrees with the deployed contract's
//!   `assign` (simulated with `eth_call`) on every pair of a random set of nodes and jobs,
//!   down to the first check that fails.
//! - `nats_config`: the production NATS files in `deploy/nats/`, run by a real
//!   nats-server; what they allow and refuse is described under "Tested here" in
//!   `deploy/README.md`.
//! - `docker`: a private dockerd answers on its socket and stops on drop.
//! - `images`: the busybox job image imports once and runs a locked-down job (no network,
//!   an unprivileged user, a read-only root file system with a tmpfs `/tmp`).
//! - `postgres`: two private PostgreSQL clusters answer on their own ports and stop on
//!   drop.

mod artifacts;
mod eligibility;
mod lifecycle;
mod nats_config;

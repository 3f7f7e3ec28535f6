//! The local Gantry network and the tooling around the contracts.
//!
//! ```text
//!   .tools/bin/forge ──build──▶ contracts/out ──extract──▶ contracts/protocol/artifacts (committed)
//!   gantry-testkit fixtures ──▶ network::Network: anvil + contracts, nats-server, docker,
//!                               the services as binaries ──▶ the demo job, followed over SSE
//! ```
//!
//! `gantry-devnet up` (what `make dev` runs) starts the whole local network through
//! [`network::Network`] and runs the [`demo`] job to its payout; the end-to-end tests start
//! the same network. `gantry-devnet artifacts` regenerates the committed artifacts after a
//! contract change. [`sse`] reads the API's live feeds.
//! The fixtures it runs on (anvil with the market, nats-server, dockerd, the busybox
//! image, the dev accounts) live in `gantry-testkit`, which the tests of every crate use;
//! those this crate's binary needs are re-exported here.

mod artifacts;
pub mod chaos;
pub mod cpu;
pub mod demo;
pub mod network;
pub mod sse;

pub use artifacts::{
    ARTIFACT_CONTRACTS, check_artifacts, committed_dir, extract_artifact, forge_build,
    write_artifacts,
};
pub use gantry_testkit::{
    DeployParams, Deployment, Devnet, DevnetError, Dockerd, NatsServer, Tools, accounts, deploy,
    workspace_root,
};

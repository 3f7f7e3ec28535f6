//! The local Gantry network and the tooling around the contracts.
//!
//! ```text
//!   .tools/bin/forge ──build──▶ contracts/out ──extract──▶ contracts/protocol/artifacts (committed)
//!   .tools/bin/anvil ──spawn──▶ chain ◀──deploy── GantryTestToken, NodeRegistry, JobMarket
//! ```
//!
//! `gantry-devnet up` (what `make dev` runs) starts the whole local network through
//! [`network::Network`] and runs the [`demo`] job to its payout; the end-to-end tests start
//! the same network. `gantry-devnet artifacts` regenerates the committed artifacts after a
//! contract change. [`sse`] reads the API's live feeds.
//! Tests of every crate use [`Devnet::start`] to get a fresh chain with the market
//! deployed, [`NatsServer::start`] for a JetStream server and [`Postgres::start`] for a
//! private PostgreSQL cluster with a database `gantry`, each on a free port, and
//! [`Dockerd::start`] for a private Docker engine, all stopped on drop. [`import_busybox`]
//! builds the test job image (a static busybox userland) in such an engine, since no
//! registry is reachable.

mod artifacts;
pub mod demo;
mod deploy;
mod docker;
mod error;
mod images;
mod nats;
pub mod nats_cluster;
pub mod network;
mod postgres;
pub mod scenario;
pub mod sse;
mod tools;

pub use artifacts::{
    ARTIFACT_CONTRACTS, check_artifacts, committed_dir, extract_artifact, forge_build,
    write_artifacts,
};
pub use deploy::{DeployParams, Deployment, Devnet, confirm_receipt, deploy};
pub use docker::Dockerd;
pub use error::{DevnetError, ImageError};
pub use images::{BUSYBOX_PATH, image_exists, import_busybox};
pub use nats::NatsServer;
pub use postgres::Postgres;
pub use tools::{Tools, workspace_root};

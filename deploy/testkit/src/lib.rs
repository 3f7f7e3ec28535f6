//! Gantry's test kit: the real things the tests and benches of every crate run against,
//! each started on a free port and stopped on drop, and one way to put them together.
//! A dev-dependency only (and the fixtures under `gantry-devnet up`).
//!
//! ```text
//!   TestNet::builder().deploy_params(f).indexer().matcher(a).keeper(k).image(tag).postgres()
//!         │ .start().await
//!         ▼
//!   TestNet ── devnet: Devnet (anvil + GantryTestToken, NodeRegistry, JobMarket)
//!           ── NatsServer ── gantry_indexer / gantry_matcher / gantry_liveness in-process
//!           ── Dockerd + busybox image ── Postgres
//!           ── chain helpers (fund, register_node, post_job, job, node, now, advance)
//!           ── wait_until / wait_for_status: checked again on every NATS message
//! ```
//!
//! - [`TestNet`]: what a test asks for, with helpers that panic with a sentence.
//! - [`accounts`]: the one numbering of anvil's dev accounts.
//! - The fixtures on their own: [`Devnet`] (anvil with the market, [`deploy`] for any
//!   chain), [`NatsServer`], [`nats_cluster`] (the production NATS files, one server or
//!   three), [`Dockerd`], [`Postgres`], [`import_busybox`] (the job image, built in memory
//!   since no registry is reachable), [`Tools`] (what `deploy/setup.sh` installs).
//! - [`scenario`]: scripted market activity; [`wait_until`]: waiting woken by events.
//! - [`hand_stream`]: a chain stream written by hand (no indexer), damage included.

pub mod accounts;
mod deploy;
mod docker;
mod error;
pub mod hand_stream;
mod images;
mod market;
mod nats;
pub mod nats_cluster;
mod postgres;
pub mod scenario;
mod testnet;
mod tools;
mod wait;
mod worker_config;

pub use deploy::{DeployParams, Devnet, confirm_receipt, deploy, send_as_worker};
pub use docker::Dockerd;
pub use error::{DevnetError, ImageError};
pub use gantry_protocol::deployment::Deployment;
pub use images::{BUSYBOX_PATH, image_exists, import_busybox};
pub use market::{FAR_DEADLINE, JobPost};
pub use nats::NatsServer;
pub use postgres::Postgres;
pub use testnet::{TestNet, TestNetBuilder};
pub use tools::{Tools, free_port, workspace_root};
pub use wait::{PATIENCE, wait_until};
pub use worker_config::worker_config;

/// One gUSD, the test token, in its base units (6 decimals).
pub const GUSD: u64 = 1_000_000;

/// A crate's test harness: `struct Name(TestNet)`, dereferencing to the test net, so the
/// crate adds its own steps as methods and keeps every `TestNet` step.
#[macro_export]
macro_rules! harness {
    ($(#[$meta:meta])* $vis:vis struct $name:ident) => {
        $(#[$meta])*
        $vis struct $name($crate::TestNet);

        impl ::std::ops::Deref for $name {
            type Target = $crate::TestNet;

            fn deref(&self) -> &$crate::TestNet {
                &self.0
            }
        }

        impl ::std::ops::DerefMut for $name {
            fn deref_mut(&mut self) -> &mut $crate::TestNet {
                &mut self.0
            }
        }
    };
}

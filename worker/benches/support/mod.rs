//! What the start benchmarks share: a worker in the bench's own process, with a hook on
//! its job running, and the percentiles they print.

use std::path::Path;
use std::time::Duration;

use alloy::primitives::U256;
use gantry_testkit::accounts::NODES;
use gantry_testkit::{GUSD, TestNet};
use gantry_worker::config::Config;
use gantry_worker::service::{self, Hooks};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

/// The `p` percentile of `samples`, milliseconds.
pub(crate) fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index].as_secs_f64() * 1e3
}

/// A worker of `NODES[0]`, rooted at `dir`, with `jobs` (TOML lines) in its `[jobs]`
/// table, running one job at a time; returns once its node is registered, with the
/// token that stops it and each job's `(job id, assignment → running)`.
pub(crate) async fn spawn_worker(
    net: &TestNet,
    dir: &Path,
    jobs: &str,
) -> (CancellationToken, UnboundedReceiver<(u64, Duration)>) {
    let agent = NODES[0];
    net.devnet
        .mint(net.address(agent), U256::from(10_000 * GUSD))
        .await
        .unwrap();
    let config = Config::from_toml(&format!(
        "{connections}\n[jobs]\n{jobs}\nmax_concurrent = 1\nheartbeat_interval = \"5s\"\n",
        connections = net.worker_config(dir),
    ))
    .unwrap();
    let signer = config
        .agent_signer(Some(&net.devnet.private_key(agent)))
        .unwrap();
    let (started_tx, started) = tokio::sync::mpsc::unbounded_channel();
    let (node_tx, node_rx) = tokio::sync::oneshot::channel();
    let hooks = Hooks {
        started: Some(started_tx),
        node_id: Some(node_tx),
    };
    let services = net.shutdown();
    tokio::spawn(service::run(config, signer, services.clone(), hooks));
    node_rx.await.expect("the worker registers");
    (services, started)
}

//! What the start benchmarks share: a worker in the bench's own process, with a hook on
//! its job running, and the percentiles they print.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use alloy::primitives::U256;
use gantry_testkit::accounts::NODES;
use gantry_testkit::{GUSD, TestNet};
use gantry_worker::config::Config;
use gantry_worker::job::Started;
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
/// token that stops it and each job's start (assignment → running, and its steps).
pub(crate) async fn spawn_worker(
    net: &TestNet,
    dir: &Path,
    jobs: &str,
) -> (CancellationToken, UnboundedReceiver<Started>) {
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

/// Each start step's samples, to print where a start's time goes.
#[derive(Default)]
pub(crate) struct Steps(BTreeMap<&'static str, Vec<Duration>>, Vec<&'static str>);

impl Steps {
    pub(crate) fn add(&mut self, started: &Started) {
        for (name, took) in &started.steps {
            if !self.1.contains(name) {
                self.1.push(name);
            }
            self.0.entry(name).or_default().push(*took);
        }
    }

    /// Prints each step's p50, in the order the steps came, and returns them (ms).
    pub(crate) fn print(&mut self) -> serde_json::Value {
        let mut figures = serde_json::Map::new();
        println!("where the start's time goes (p50 of each step, ms):");
        for name in &self.1 {
            let p50 = percentile(self.0.get_mut(name).expect("sampled"), 0.5);
            println!("  {name:<22} {p50:8.3}");
            figures.insert(
                (*name).to_owned(),
                serde_json::json!((p50 * 1000.0).round() / 1000.0),
            );
        }
        figures.into()
    }
}

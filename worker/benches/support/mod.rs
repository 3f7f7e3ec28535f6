//! What the start benchmarks share: a worker in the bench's own process, with a hook on
//! its job running; the runs, each job alternating with one run of the bench's bare
//! baseline; and the figures they print.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use alloy::primitives::U256;
use futures::StreamExt;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::spec::JobSpec;
use gantry_testkit::accounts::{NODES, SUBMITTER};
use gantry_testkit::{GUSD, JobPost, TestNet};
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

/// What a start bench measured, warm-up left out: the worker's starts, the baseline's,
/// and the worker's steps.
pub(crate) struct Measured {
    pub(crate) worker: Vec<Duration>,
    pub(crate) bare: Vec<Duration>,
    pub(crate) steps: Steps,
}

/// Posts `runs` + 1 jobs of `spec` one at a time (the next once the worker reported the
/// last, so its one slot is free) and after each takes one run of `bare` (given the run's
/// number), interleaved so that both see the same machine load; the first of each is a
/// warm-up. `decimals` are the per-run line's, for the worker and the baseline.
pub(crate) async fn alternate<F, Fut>(
    net: &TestNet,
    started: &mut UnboundedReceiver<Started>,
    (requirements, spec): (&JobMarket::JobRequirements, &JobSpec),
    runs: usize,
    decimals: (usize, usize),
    mut bare: F,
) -> Measured
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Duration>,
{
    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let mut done = client
        .subscribe(format!("gantry.jobs.{}.done.>", net.chain_id()))
        .await
        .unwrap();
    let mut measured = Measured {
        worker: Vec::new(),
        bare: Vec::new(),
        steps: Steps::default(),
    };
    for run in 0..=runs {
        let deadline = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3_600;
        let job = JobPost {
            requirements: requirements.clone(),
            bounty: GUSD,
            deadline,
            spec: spec.to_vec(),
        };
        let job = net.post_job(SUBMITTER, job).await;
        let started_job = tokio::time::timeout(Duration::from_secs(60), started.recv())
            .await
            .expect("the job starts")
            .unwrap();
        assert_eq!(started_job.job_id, job);
        // The slot frees once the job is reported.
        tokio::time::timeout(Duration::from_secs(60), done.next())
            .await
            .expect("the job is reported")
            .unwrap();
        let bare = bare(run).await;
        if run > 0 {
            let (worker_decimals, bare_decimals) = decimals;
            println!(
                "run {run}: worker {:.worker_decimals$} ms, bare {:.bare_decimals$} ms",
                started_job.since.as_secs_f64() * 1e3,
                bare.as_secs_f64() * 1e3
            );
            measured.worker.push(started_job.since);
            measured.steps.add(&started_job);
            measured.bare.push(bare);
        }
    }
    measured
}

/// Prints the bench's summary and its JSON line `{"bench":name,"p50_ms","bare_p50_ms",
/// "ratio","steps_p50_ms"}`; `what` heads the worker's and the baseline's lines,
/// `decimals` their rounding.
pub(crate) fn report(
    name: &str,
    mut measured: Measured,
    runs: usize,
    what: (&str, &str),
    decimals: (usize, usize),
) {
    let steps = measured.steps.print();
    let p50 = percentile(&mut measured.worker, 0.5);
    let p99 = percentile(&mut measured.worker, 0.99);
    let bare_p50 = percentile(&mut measured.bare, 0.5);
    let (worker_decimals, bare_decimals) = decimals;
    println!(
        "{} p50 {p50:.worker_decimals$} ms, p99 {p99:.worker_decimals$} ms over {runs} jobs",
        what.0
    );
    println!("{} p50 {bare_p50:.bare_decimals$} ms", what.1);
    let round = |x: f64, decimals: usize| {
        let scale = 10f64.powi(decimals as i32);
        (x * scale).round() / scale
    };
    println!(
        "{}",
        serde_json::json!({
            "bench": name,
            "p50_ms": round(p50, decimals.0),
            "bare_p50_ms": round(bare_p50, decimals.1),
            "ratio": round(p50 / bare_p50, 2),
            "steps_p50_ms": steps,
        })
    );
}

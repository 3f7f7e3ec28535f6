//! `cargo bench -p gantry-worker --bench start`: the time from an assignment message
//! arriving at the worker to its job's container running, against a bare bollard
//! create + start of the same image and command, measured in the same run on the same
//! engine. The worker's path adds: the on-chain check (`getJob`), the spec read from the
//! stream, admission, the job directories, the checkpoint lookup, the image check and
//! the attach.
//!
//! Prints per-run figures and a final JSON line:
//! `{"bench":"assign_to_running","p50_ms":..,"bare_p50_ms":..,"ratio":..}` (goal ≤ 1.2).
//!
//! The bare runs use the same container settings as the worker (read-only root, limits,
//! mounts), and alternate with the worker's runs, so that the ratio is the worker's own
//! overhead under the same engine and machine load.

use std::time::{Duration, Instant};

use alloy::primitives::{B256, U256, aliases::U40, aliases::U96};
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions};
use clap::Parser;
use futures::StreamExt;
use gantry_devnet::{Devnet, Dockerd, NatsServer, confirm_receipt};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::spec::JobSpec;
use gantry_worker::config::Config;
use gantry_worker::docker::{RunPlan, container_body};
use gantry_worker::service::{self, Hooks};
use tokio_util::sync::CancellationToken;

const RUNS: usize = 25;
const IMAGE: &str = "gantry-bench/busybox:1";
const GUSD: u64 = 1_000_000;
const COMMAND: [&str; 3] = ["/bin/sh", "-c", "true"];

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index].as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let devnet = Devnet::start().await.expect("devnet");
    let nats = NatsServer::start().expect("nats");
    let dockerd = Dockerd::start().expect("dockerd");
    let docker = dockerd.client().await.expect("docker");
    gantry_devnet::import_busybox(&docker, IMAGE)
        .await
        .expect("image");
    let d = devnet.deployment;
    let services = CancellationToken::new();

    // Indexer and matcher in this process; the matcher signs as account 9.
    let market = JobMarket::new(d.market, devnet.admin.clone());
    let role = market.MATCHER_ROLE().call().await.unwrap();
    let matcher_account = devnet.anvil.addresses()[9];
    confirm_receipt(
        "grantRole",
        market.grantRole(role, matcher_account).send().await,
    )
    .await
    .unwrap();
    let indexer = gantry_indexer::Config::local(
        devnet.anvil.endpoint_url(),
        d.chain_id,
        d.market,
        d.registry,
        d.start_block,
        nats.url(),
    );
    tokio::spawn(gantry_indexer::run(indexer, services.clone()));
    let key = |account: usize| B256::from_slice(&devnet.anvil.keys()[account].to_bytes());
    let matcher = gantry_matcher::MatcherConfig::try_parse_from([
        "matcher".to_string(),
        "--rpc-url".into(),
        devnet.anvil.endpoint_url().to_string(),
        "--chain-id".into(),
        d.chain_id.to_string(),
        "--market".into(),
        d.market.to_string(),
        "--registry".into(),
        d.registry.to_string(),
        "--nats-url".into(),
        nats.url(),
        "--receipt-poll-ms".into(),
        "10".into(),
        "--private-key".into(),
        key(9).to_string(),
    ])
    .unwrap();
    tokio::spawn(gantry_matcher::run_matcher(matcher, services.clone()));

    // The worker, in this process, with a hook on "container running".
    let dir = tempfile::tempdir().unwrap();
    devnet
        .mint(devnet.anvil.addresses()[1], U256::from(10_000 * GUSD))
        .await
        .unwrap();
    let config = Config::from_toml(&format!(
        r#"
rpc_url = "{rpc}"
chain_id = {chain}
nats_url = "{nats}"
market = "{market}"
registry = "{registry}"
token = "{token}"
docker_socket = "{socket}"
cache_dir = "{root}/cache"
work_dir = "{root}/work"
[jobs]
max_concurrent = 1
heartbeat_interval = "5s"
"#,
        rpc = devnet.anvil.endpoint_url(),
        chain = d.chain_id,
        nats = nats.url(),
        market = d.market,
        registry = d.registry,
        token = d.token,
        socket = dockerd.socket().display(),
        root = dir.path().display(),
    ))
    .unwrap();
    let signer = config.agent_signer(Some(&key(1).to_string())).unwrap();
    let (started_tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let (node_tx, node_rx) = tokio::sync::oneshot::channel();
    let hooks = Hooks {
        started: Some(started_tx),
        node_id: Some(node_tx),
    };
    tokio::spawn(service::run(config, signer, services.clone(), hooks));
    node_rx.await.expect("the worker registers");

    // The submitter.
    devnet
        .fund(5, d.market, U256::from(1_000_000 * GUSD))
        .await
        .unwrap();
    let market = JobMarket::new(d.market, devnet.provider(5));
    let spec = JobSpec {
        version: 1,
        kind: Default::default(),
        image: IMAGE.into(),
        command: COMMAND.iter().map(|s| s.to_string()).collect(),
        env: Default::default(),
        inputs: vec![],
        outputs: Default::default(),
        resources: Default::default(),
        timeout_secs: 60,
    };
    let requirements = JobMarket::JobRequirements {
        gpuModel: B256::ZERO,
        minGpuCount: 0,
        minVramMiB: 0,
        minCpuCores: 1,
        minRamMiB: 64,
        maxPricePerGpuHour: U96::from(5 * GUSD),
        maxRuntime: 600,
        priority: 5,
    };

    // The worker's path: one job at a time (one slot), after a warm-up.
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut done = client
        .subscribe(format!("gantry.jobs.{}.done.*", d.chain_id))
        .await
        .unwrap();
    let mut worker_samples = Vec::new();
    let mut bare_samples = Vec::new();
    let bare_dirs = tempfile::tempdir().unwrap();
    for sub in ["inputs", "outputs", "checkpoints"] {
        std::fs::create_dir(bare_dirs.path().join(sub)).unwrap();
    }
    for run in 0..=RUNS {
        let deadline = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 3_600;
        let posted = confirm_receipt(
            "postJob",
            market
                .postJob(
                    requirements.clone(),
                    U96::from(GUSD),
                    U40::from(deadline),
                    spec.to_vec().into(),
                )
                .send()
                .await,
        )
        .await
        .unwrap();
        let job = posted.decoded_log::<JobMarket::JobPosted>().unwrap().jobId;
        let (started_job, since) = tokio::time::timeout(Duration::from_secs(60), started.recv())
            .await
            .expect("the container starts")
            .unwrap();
        assert_eq!(started_job, job);
        // The slot frees once the job is reported.
        tokio::time::timeout(Duration::from_secs(60), done.next())
            .await
            .expect("the job is reported")
            .unwrap();
        // The baseline, interleaved so both see the same engine and machine load.
        let bare = bare_create_start(&docker, run, bare_dirs.path()).await;
        if run > 0 {
            println!(
                "run {run}: worker {:.1} ms, bare {:.1} ms",
                since.as_secs_f64() * 1e3,
                bare.as_secs_f64() * 1e3
            );
            worker_samples.push(since);
            bare_samples.push(bare);
        }
    }

    services.cancel();

    let p50 = percentile(&mut worker_samples, 0.5);
    let p99 = percentile(&mut worker_samples, 0.99);
    let bare_p50 = percentile(&mut bare_samples, 0.5);
    println!("assignment → running: p50 {p50:.1} ms, p99 {p99:.1} ms over {RUNS} jobs");
    println!("bare create+start:    p50 {bare_p50:.1} ms");
    println!(
        "{}",
        serde_json::json!({
            "bench": "assign_to_running",
            "p50_ms": (p50 * 10.0).round() / 10.0,
            "bare_p50_ms": (bare_p50 * 10.0).round() / 10.0,
            "ratio": ((p50 / bare_p50) * 100.0).round() / 100.0,
        })
    );
}

/// Creates and starts a container of the bench image with the same sandbox settings the
/// worker uses (so the difference is the worker's own path, not the container's
/// configuration); returns how long create + start took. Removed after it exits.
async fn bare_create_start(
    docker: &bollard::Docker,
    run: usize,
    dirs: &std::path::Path,
) -> Duration {
    let name = format!("bench-bare-{run}");
    let plan = RunPlan {
        name: name.clone(),
        image: IMAGE.into(),
        command: COMMAND.iter().map(|s| s.to_string()).collect(),
        env: vec![],
        image_user: None,
        inputs_dir: dirs.join("inputs"),
        outputs_dir: dirs.join("outputs"),
        checkpoints_dir: dirs.join("checkpoints"),
        memory_bytes: 64 << 20,
        cpu_threads: 1,
        pids_limit: 1024,
        gpu_uuids: vec![],
        labels: vec![],
    };
    let began = Instant::now();
    docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.clone()),
                ..Default::default()
            }),
            container_body(&plan),
        )
        .await
        .unwrap();
    docker
        .start_container(
            &name,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .unwrap();
    let took = began.elapsed();
    let _ = docker
        .wait_container(
            &name,
            None::<bollard::query_parameters::WaitContainerOptions>,
        )
        .next()
        .await;
    docker
        .remove_container(
            &name,
            Some(RemoveContainerOptions {
                force: true,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
    took
}

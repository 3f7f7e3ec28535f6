//! `cargo bench -p gantry-worker --bench start`: the time from an assignment message
//! arriving at the worker to its job's container running, against a bare bollard
//! create + start of the same image and command, measured in the same run on the same
//! engine. The worker's path adds: the on-chain check (the job's logs folded into its
//! terms and state and checked against `jobHash`, the node's agent), the spec read from
//! the stream, admission, the job's clock, the job directories, the checkpoint lookup,
//! the image check and the attach.
//!
//! Prints per-run figures and a final JSON line:
//! `{"bench":"assign_to_running","p50_ms":..,"bare_p50_ms":..,"ratio":..}` (goal ≤ 1.2).
//!
//! The bare runs use the same container settings as the worker (read-only root, limits,
//! mounts), and alternate with the worker's runs, so that the ratio is the worker's own
//! overhead under the same engine and machine load.

use std::time::{Duration, Instant};

use alloy::primitives::{B256, aliases::U96};
use bollard::query_parameters::{CreateContainerOptions, RemoveContainerOptions};
use futures::StreamExt;
use gantry_matcher::config::{Common, MatcherConfig};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::spec::JobSpec;
use gantry_testkit::accounts::SECOND_MATCHER;
use gantry_testkit::{GUSD, TestNet};
use gantry_worker::docker::{RunPlan, container_body};

const RUNS: usize = 25;
const IMAGE: &str = "gantry-bench/busybox:1";
const COMMAND: [&str; 3] = ["/bin/sh", "-c", "true"];

mod support;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // The indexer and the matcher in this process; the matcher signs as SECOND_MATCHER
    // and polls for receipts every 10 ms.
    let net = TestNet::builder()
        .image(IMAGE)
        .indexer()
        .matcher(SECOND_MATCHER)
        .matcher_config(|config| MatcherConfig {
            common: Common {
                receipt_poll: std::time::Duration::from_millis(10),
                ..config.common
            },
            ..config
        })
        .start()
        .await
        .expect("the test net starts");
    let docker = net.docker();

    // The worker, in this process, with a hook on "container running".
    let dir = tempfile::tempdir().unwrap();
    let (services, mut started) = support::spawn_worker(&net, dir.path(), "").await;

    // The submitter.
    net.fund_submitter().await;
    let spec = JobSpec {
        encryption: None,
        version: 1,
        kind: Default::default(),
        image: IMAGE.into(),
        command: COMMAND.iter().map(|s| s.to_string()).collect(),
        env: Default::default(),
        inputs: vec![],
        outputs: Default::default(),
        resources: Default::default(),
        timeout_secs: 60,
        engine: gantry_protocol::spec::Engine::Docker,
        wasm: None,
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
        engine: gantry_protocol::spec::Engine::Docker.code(),
    };

    // The worker's path: one job at a time (one slot), after a warm-up, each followed by
    // the baseline, so both see the same engine and machine load.
    let bare_dirs = tempfile::tempdir().unwrap();
    for sub in ["inputs", "outputs", "checkpoints"] {
        std::fs::create_dir(bare_dirs.path().join(sub)).unwrap();
    }
    let measured = support::alternate(
        &net,
        &mut started,
        (&requirements, &spec),
        RUNS,
        (1, 1),
        |run| bare_create_start(docker, run, bare_dirs.path()),
    )
    .await;
    services.cancel();
    support::report(
        "assign_to_running",
        measured,
        RUNS,
        ("assignment → running:", "bare create+start:   "),
        (1, 1),
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
        tmp_dir: dirs.join("tmp"),
        memory_bytes: 64 << 20,
        cpu_threads: 1,
        pids_limit: 1024,
        max_log_bytes: 1 << 20,
        gpu_uuids: vec![],
        labels: vec![],
        deterministic: false,
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

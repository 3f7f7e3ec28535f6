//! The dashboard in a real headless Chromium (`tests/dashboard/dashboard.mjs`, driven by
//! playwright-core) against the API serving a projection of a real chain: the jobs show,
//! then a job posted on chain and a worker's progress report and log line arrive on the
//! open pages without a reload; both sides of the market show their money (a dispute's
//! bond, exposure and deadline, refunds and where the slashes went, a reject's charge,
//! each attempt with its node, outcome, whose fault, why and its slash to the treasury; a
//! node's earnings, fees owed, locked stake and slashes with their jobs; the submitter's
//! credits). What a new user would find untrue is asserted not to be: a CPU-only node and
//! job (posted for any price) say so, every event field in the timelines is in words,
//! a long worker report wraps within the page, a lost dispute's refund names the stake
//! the node lost.

use gantry_protocol::names;
use std::process::Stdio;
use std::time::Duration;

use alloy::primitives::B256;
use alloy::primitives::aliases::U96;
use gantry_protocol::api::TokenInfo;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::Engines;
use gantry_protocol::jobs::{CompletionReport, CompletionStatus, ProgressUpdate};
use gantry_protocol::spec::Engine;
use gantry_testkit::accounts::{NODES, SUBMITTER};
use gantry_testkit::{GUSD, JobPost, TestNet, confirm_receipt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::harness::{
    Api, JOB_REJECTED, NODE_DISPUTED, chain_with_market, indexed, now_ms, register_h100, sqlite,
    stdout_line,
};

/// Job 3, rejected in the lifecycle and requeued, runs its second attempt on node 3.
const RUNNING_JOB: u64 = JOB_REJECTED;
const ATTEMPT: u8 = 2;
const NODE: u64 = NODE_DISPUTED + 1;
const EPOCHS: u32 = 10;
/// The lifecycle's node, which gave job 3 back.
const REJECTING_NODE: u64 = 1;
/// A node without GPUs, registered after node 3.
const CPU_NODE: u64 = NODE + 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_jobs_and_follows_them_live_in_chromium() {
    let chain = chain_with_market().await;
    run_job_3_on_a_third_node(&chain).await;
    register_a_cpu_node(&chain).await;
    indexed(&chain).await;
    chain.create_jobs_stream().await;
    report_the_reject_at_length(&chain).await;
    let mut reported = 0;
    for epoch in 1..=4 {
        reported = publish_epoch(&chain, epoch).await;
    }

    let stop = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    // Not the dev token's 6 decimals and symbol: amounts must show as `/v1/token` says
    // (`tests/dashboard/dashboard.mjs` expects 50 gUSD base units as `0.05 kUSD`).
    let token = TokenInfo {
        symbol: "kUSD".into(),
        decimals: 9,
    };
    let api = Api::start_with_token(&chain, &sqlite(dir.path()), &stop, None, token).await;
    api.caught_up(&chain, reported).await;

    let shots = concat!(env!("CARGO_TARGET_TMPDIR"), "/dashboard");
    std::fs::create_dir_all(shots).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/dashboard/dashboard.mjs");
    let submitter = format!("{:#x}", chain.address(SUBMITTER));
    let mut browser = tokio::process::Command::new("node")
        .args([script, &api.base, shots, &submitter])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("running node (deploy/setup.sh installs it)");
    let mut stderr = browser.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        stderr.read_to_string(&mut text).await.map(|_| text)
    });
    let mut stdout = BufReader::new(browser.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            said.push(line.clone());
            if line == "READY" {
                return true;
            }
        }
        false
    })
    .await;
    if ready != Ok(true) {
        let _ = browser.kill().await;
        panic!(
            "the page did not show the jobs ({}): {said:?}\n{}",
            if ready.is_err() {
                "timed out"
            } else {
                "the script ended"
            },
            errors.await.unwrap().unwrap()
        );
    }

    // Changes while the pages are open: a new job on chain (CPU only, at any price), a
    // worker's report.
    chain.post_job(SUBMITTER, cpu_job_at_any_price()).await;
    publish_epoch(&chain, 7).await;

    let status = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            said.push(line);
        }
        browser.wait().await.unwrap()
    })
    .await
    .expect("the browser script finishes");
    let errors = errors.await.unwrap().unwrap();
    assert!(status.success(), "{said:?}\n{errors}");
    assert_eq!(said, ["READY", "LIVE", "PAGES", "OK"], "{errors}");
    for shot in [
        "jobs.png",
        "job.png",
        "dispute.png",
        "nodes.png",
        "node.png",
        "account.png",
        "network.png",
        "dispute-lost.png",
        "cpu-job.png",
        "cpu-node.png",
    ] {
        assert!(
            std::fs::metadata(format!("{shots}/{shot}")).unwrap().len() > 10_000,
            "{shot}"
        );
    }
    stop.cancel();
    api.stopped().await;
}

/// Registers node 3 (served by its operator, `NODES[2]`) and has the matcher assign job 3
/// to it.
async fn run_job_3_on_a_third_node(chain: &TestNet) {
    let operator = NODES[2];
    assert_eq!(register_h100(chain, operator).await, NODE);
    let job = chain.job(RUNNING_JOB).await;
    // The kit's own provider for the admin (the matcher), which mints for the next node's
    // stake: one count of its nonces.
    let matcher = JobMarket::new(chain.deployment().market, chain.devnet.admin.clone());
    let assign = matcher.assign(RUNNING_JOB, NODE, job.terms.pack(), job.state.pack());
    confirm_receipt("assign", assign.send().await)
        .await
        .unwrap();
}

/// Registers node 4 (served by its operator, `NODES[3]`): CPU only, no GPU.
async fn register_a_cpu_node(chain: &TestNet) {
    let operator = NODES[3];
    let cpu_only = NodeRegistry::NodeCapabilities {
        gpuModel: B256::ZERO,
        gpuCount: 0,
        vramMiB: 0,
        cpuCores: 16,
        ramMiB: 32_768,
        pricePerGpuHour: U96::from(GUSD),
        maxConcurrentJobs: 1,
        engines: Engines::ALL.0,
    };
    let id = chain
        .register_node(operator, chain.address(operator), cpu_only, 100 * GUSD)
        .await;
    assert_eq!(id, CPU_NODE);
}

/// Job 6: no GPU, for any price (what `gantry submit` posts without `--gpu` or
/// `--max-price`).
fn cpu_job_at_any_price() -> JobPost {
    JobPost {
        requirements: JobMarket::JobRequirements {
            gpuModel: B256::ZERO,
            minGpuCount: 0,
            minVramMiB: 0,
            minCpuCores: 2,
            minRamMiB: 4_096,
            maxPricePerGpuHour: U96::MAX,
            maxRuntime: 600,
            priority: 5,
            engine: Engine::Docker.code(),
        },
        bounty: 20 * GUSD,
        ..JobPost::default()
    }
}

/// Node 1's worker's report of job 3's first attempt, which it gave back: the registry's
/// answer at length, one long word in it (the page must wrap it, not widen).
async fn report_the_reject_at_length(chain: &TestNet) {
    let daemon = "Error response from daemon: manifest for ghcr.io/acme/train@sha256:\
                  9f2c4e1b7a0d3c5e8f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e not found: \
                  manifest unknown: requested access to the resource is denied; ";
    let error = format!(
        "image not found: {}https://ghcr.io/v2/acme/train/manifests/{}",
        daemon.repeat(12),
        "9f2c4e1b7a0d3c5e".repeat(16)
    );
    let report = CompletionReport {
        v: 1,
        job_id: RUNNING_JOB,
        node_id: REJECTING_NODE,
        attempt: 1,
        status: CompletionStatus::JobFault,
        result_hash: None,
        result_uri: None,
        output_bytes: None,
        compute_secs: 4,
        gpu_secs: 0,
        avg_gpu_utilization: None,
        error: Some(error),
        at_ms: now_ms(),
    };
    let subject = names::completion_subject(chain.chain_id(), report.node_id, RUNNING_JOB);
    chain
        .publish(subject, serde_json::to_vec(&report).unwrap())
        .await;
}

/// What job 3's worker reports at the end of `epoch`: progress, loss, GPU figures and a
/// log line. Returns the stream sequence of the last message.
async fn publish_epoch(chain: &TestNet, epoch: u32) -> u64 {
    let chain_id = chain.chain_id();
    let at_ms = now_ms();
    let loss = 2.0 / (1.0 + f64::from(epoch) * 0.3);
    let line = stdout_line(
        RUNNING_JOB,
        ATTEMPT,
        format!("epoch {epoch}/{EPOCHS} loss {loss:.2}"),
        at_ms,
    );
    let update = ProgressUpdate {
        v: 1,
        job_id: RUNNING_JOB,
        node_id: NODE,
        attempt: ATTEMPT,
        progress: Some(f64::from(epoch) / f64::from(EPOCHS)),
        epoch: Some(epoch),
        epochs: Some(EPOCHS),
        metrics: [("loss".to_string(), loss)].into(),
        gpu_utilization: Some(80.0 + f64::from(epoch)),
        gpu_memory_used_mib: Some(60_000),
        elapsed_secs: u64::from(epoch) * 60,
        eta_secs: Some(u64::from(EPOCHS - epoch) * 60),
        at_ms,
    };
    let mut last = 0;
    for (subject, payload) in [
        (
            names::logs_subject(chain_id, NODE, RUNNING_JOB),
            serde_json::to_vec(&line).unwrap(),
        ),
        (
            names::progress_subject(chain_id, NODE, RUNNING_JOB),
            serde_json::to_vec(&update).unwrap(),
        ),
    ] {
        last = chain.publish(subject, payload).await;
    }
    last
}

//! `cargo bench -p gantry-devnet --bench e2e` (part of `make bench`): jobs per second
//! sustained from post to paid on the dev network — 1,000 small jobs (a container that
//! writes one file), 4 workers, every service as its release binary (built by
//! `make bench`), a 1 s challenge window.
//!
//! Baseline, in the same run on the same engine: the bare container work — bollard
//! create, start, wait and remove of the same image and command, as many at once as the
//! workers run — so that the ratio shows what the chain, the matcher, the keeper and the
//! workers' pipeline cost on top of the containers.
//!
//! `-- wasm` (`e2e_wasm_throughput`): the same 1,000 jobs on the WASM engine — the dev
//! network's WASM demo job (`deploy/demo/summary.wat` summarising the demo dataset,
//! deterministically) — where no container is in the way: what is measured is the
//! protocol itself (chain, indexer, matcher, keeper, the workers' pipeline), with 8 jobs at
//! once per worker (16 MiB job disks), on a chain of 100 ms blocks (the Docker run's mines
//! a block per transaction). No baseline: the module's own run is a few milliseconds.
//! Both print where the time goes: the chain's transactions per job, the services' own
//! timings from their metrics, and each process's CPU per job.

use std::time::{Duration, Instant};

use alloy::primitives::U256;
use alloy::primitives::aliases::{U40, U96};
use alloy::providers::Provider as _;
use anyhow::Context as _;
use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder, WaitContainerOptions,
};
use futures::StreamExt;
use gantry_devnet::cpu::Cpu;
use gantry_devnet::demo;
use gantry_devnet::network::{Network, NetworkConfig, transactions_in};
use gantry_devnet::sse::EventStream;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::spec::{Engine, JobKind, JobSpec, OutputSpec, Resources, SPEC_VERSION};
use gantry_testkit::accounts::SUBMITTER;

const JOBS: usize = 1_000;
const WORKERS: usize = 4;
const JOBS_PER_WORKER: u32 = 2;
/// Jobs each worker runs at once on the WASM engine.
const WASM_JOBS_PER_WORKER: u32 = 8;
/// The WASM run's chain: a block every 100 ms, as a fast L2 makes them. Mined a block per
/// transaction (the Docker run's chain), every service pays for each transaction as for a
/// block — anvil's state root, the indexer's fetch and commit, the API's transaction, the
/// matcher's round — and the whole network spent 72 ms of CPU a job for 20-25 jobs/s;
/// with blocks that carry 15 transactions each, 24 ms for 59 (deploy/BENCHMARKS.md).
const WASM_BLOCK_TIME: Duration = Duration::from_millis(100);
const BASELINE_RUNS: usize = 200;
/// postJob transactions sent and not yet answered by the node, at most.
const POSTS_IN_FLIGHT: usize = 16;
/// How often the run asks the API how many jobs are paid, at most.
const STATS_EVERY: Duration = Duration::from_millis(250);
const COMMAND: &str = "echo done > /outputs/result.txt";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let wasm = std::env::args().any(|arg| arg == "wasm");
    // A WASM job takes a few milliseconds of one core and writes a few bytes: its nodes
    // run more at once, each slot with a small disk (the dev network's 768 MiB per slot
    // would reserve 25 GB for 32 slots).
    let (jobs_per_worker, job_disk_bytes, block_time) = match wasm {
        true => (WASM_JOBS_PER_WORKER, 16 << 20, WASM_BLOCK_TIME),
        false => (JOBS_PER_WORKER, 256 << 20, Duration::ZERO),
    };
    let config = NetworkConfig {
        workers: WORKERS,
        jobs_per_worker,
        job_disk_bytes,
        block_time,
        challenge_window: 1,
        ..NetworkConfig::ephemeral(dir.path(), WORKERS)?
    };
    println!("starting the dev network: {WORKERS} workers × {jobs_per_worker} jobs at once");
    let network = Network::start(config).await?;
    let mut feed = EventStream::open(&format!("{}/v1/events", network.api_url)).await?;
    while count(&network, "/v1/nodes?status=active&limit=200").await? < WORKERS {
        next_block_or_node(&mut feed).await?;
    }

    // Post every job first (one submitter, transactions pipelined), then wait for the
    // last payout.
    let d = network.devnet.deployment;
    network
        .devnet
        .fund(SUBMITTER, d.market, U256::from(1_000_000_000_000u64))
        .await?;
    let market = JobMarket::new(d.market, network.devnet.provider(SUBMITTER));
    let docker_spec = JobSpec {
        encryption: None,
        version: SPEC_VERSION,
        kind: JobKind::Inference,
        image: demo::BASE_IMAGE.into(),
        command: vec!["sh".into(), "-c".into(), COMMAND.into()],
        env: Default::default(),
        inputs: vec![],
        outputs: OutputSpec {
            path: "/outputs".into(),
            max_bytes: None,
        },
        resources: Resources::default(),
        timeout_secs: 60,
        engine: Engine::Docker,
        wasm: None,
    };
    let spec = match wasm {
        true => network.dataset.spec(Engine::Wasm),
        false => docker_spec,
    };
    let requirements = demo::requirements_for(&spec);
    let spec = serde_json::to_vec(&spec)?;
    let deadline = U40::from(network.devnet.now().await? + 3_600);
    let post = || {
        market.postJob(
            requirements.clone(),
            U96::from(1_000_000u64),
            deadline,
            spec.clone().into(),
        )
    };
    // As a submitter with many jobs would post them: nonces counted here, the gas and fees
    // estimated once, up to POSTS_IN_FLIGHT sends at once (none waits for the one before).
    let provider = network.devnet.provider(SUBMITTER);
    let first_nonce = provider
        .get_transaction_count(network.devnet.address(SUBMITTER))
        .await?;
    let gas = post().estimate_gas().await? * 3 / 2;
    let fees = provider.estimate_eip1559_fees().await?;
    let first_block = provider.get_block_number().await?;
    let cpu_before = Cpu::read(&network, Some("this bench"));
    let start = Instant::now();
    let sent = futures::stream::iter(0..JOBS as u64)
        .map(|i| {
            let call = post()
                .nonce(first_nonce + i)
                .gas(gas)
                .max_fee_per_gas(fees.max_fee_per_gas * 2)
                .max_priority_fee_per_gas(fees.max_priority_fee_per_gas);
            async move { call.send().await }
        })
        .buffered(POSTS_IN_FLIGHT)
        .collect::<Vec<_>>()
        .await;
    // One run hung here for ten minutes after its first posting (not understood yet): a
    // posting not mined within a minute ends the run, naming its nonce.
    for (i, sent) in sent.into_iter().enumerate() {
        let receipt = sent?
            .with_timeout(Some(Duration::from_secs(60)))
            .get_receipt()
            .await
            .with_context(|| format!("the posting with nonce {}", first_nonce + i as u64))?;
        anyhow::ensure!(receipt.status(), "a postJob reverted");
    }
    let posted = start.elapsed();
    println!("posted {JOBS} jobs in {:.1} s", posted.as_secs_f64());
    let mut completed = 0;
    // Asked at most four times a second: asked on every block, the API's answers took a
    // share of the two cores the network under test runs on.
    let mut asked = Instant::now();
    while completed < JOBS {
        next_block_or_node(&mut feed).await?;
        // Every block is still answered, a little later: the last payout is never missed
        // until some later block.
        tokio::time::sleep(STATS_EVERY.saturating_sub(asked.elapsed())).await;
        asked = Instant::now();
        let stats: serde_json::Value = reqwest::get(format!("{}/v1/stats", network.api_url))
            .await?
            .json()
            .await?;
        completed = stats["jobsByStatus"]["completed"].as_u64().unwrap_or(0) as usize;
        let failed = stats["jobsByStatus"]["failed"].as_u64().unwrap_or(0);
        anyhow::ensure!(failed == 0, "{failed} jobs failed: {stats}");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = Cpu::read(&network, Some("this bench")).since(&cpu_before);
    let jobs_per_s = JOBS as f64 / elapsed;
    println!("{JOBS} jobs posted and paid in {elapsed:.1} s: {jobs_per_s:.1} jobs/s");
    // Where the machine's cores went: each process's CPU per job over the same time (the
    // workers summed as one line, and each of them).
    let mut cpu_ms: serde_json::Map<String, serde_json::Value> = Default::default();
    let total: f64 = cpu.iter().map(|(_, seconds)| seconds).sum();
    println!(
        "CPU per job from the first posting to the last payout: {:.1} ms in all ({:.0} % of \
         the machine's {} cores)",
        total * 1e3 / JOBS as f64,
        total / elapsed / available_cores() * 100.0,
        available_cores(),
    );
    for (label, seconds) in &cpu {
        let ms = seconds * 1e3 / JOBS as f64;
        println!(
            "  {label:<20} {ms:6.1} ms  ({:4.1} % of a core)",
            seconds / elapsed * 100.0
        );
        cpu_ms.insert(label.clone(), serde_json::json!(round(ms)));
    }
    let head = network
        .devnet
        .provider(SUBMITTER)
        .get_block_number()
        .await?;
    // Automining puts the transactions that arrive together into one block: count both.
    let blocks = head - first_block;
    let chain = network.devnet.provider(SUBMITTER);
    let transactions = transactions_in(&chain, first_block + 1..=head).await?;
    println!(
        "the chain: {transactions} transactions in {blocks} blocks ({:.2} per job, {:.0}/s)",
        transactions as f64 / JOBS as f64,
        transactions as f64 / elapsed
    );
    let where_time_goes = time_by_service(&network).await?;
    if wasm {
        network.stop().await;
        println!(
            "{}",
            serde_json::json!({
                "bench": "e2e_wasm_throughput",
                "jobs": JOBS,
                "jobs_per_s": round(jobs_per_s),
                "workers": WORKERS,
                "jobs_per_worker": jobs_per_worker,
                "block_ms": block_time.as_millis(),
                "post_s": round(posted.as_secs_f64()),
                "transactions": transactions,
                "blocks": blocks,
                "mean_ms": where_time_goes,
                "cpu_ms_per_job": cpu_ms,
            })
        );
        return Ok(());
    }

    let docker = Docker::connect_with_unix(
        network
            .docker_socket()
            .context("the network runs no Docker engine")?
            .to_str()
            .context("a UTF-8 socket path")?,
        120,
        bollard::API_DEFAULT_VERSION,
    )?;
    let baseline = bare_runs_per_s(&docker, WORKERS * JOBS_PER_WORKER as usize).await?;
    println!(
        "baseline: bare create/start/wait/remove, {} at once: {baseline:.1} runs/s",
        WORKERS * JOBS_PER_WORKER as usize
    );
    network.stop().await;
    println!(
        "{}",
        serde_json::json!({
            "bench": "e2e_throughput",
            "jobs": JOBS,
            "jobs_per_s": round(jobs_per_s),
            "workers": WORKERS,
            "post_s": round(posted.as_secs_f64()),
            "transactions": transactions,
            "blocks": blocks,
            "mean_ms": where_time_goes,
            "cpu_ms_per_job": cpu_ms,
            "bare_runs_per_s": round(baseline),
            "ratio": round(jobs_per_s / baseline),
        })
    );
    Ok(())
}

fn available_cores() -> f64 {
    std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64)
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The histograms of the services' own timings, as the mean of each (ms) over every
/// service of a kind: printed, and returned for the JSON line.
///
/// - `gantry_matcher_event_to_assign_seconds`: a job's event seen by the matcher → its
///   assignment mined;
/// - `gantry_worker_start_seconds`: the assignment's message at the worker → the job
///   running (the chain's check, the spec, the space, the download);
/// - `gantry_worker_stage_seconds{stage}`: `download`, `execute` (the run), `upload`;
/// - `gantry_worker_job_seconds{outcome="submitted"}`: the job's task at the worker, to
///   its answer mined.
async fn time_by_service(network: &Network) -> anyhow::Result<serde_json::Value> {
    const WANTED: [&str; 4] = [
        "gantry_matcher_event_to_assign_seconds",
        "gantry_worker_start_seconds",
        "gantry_worker_stage_seconds",
        "gantry_worker_job_seconds",
    ];
    // (metric with its labels) → (sum, count), over every service.
    let mut sums: std::collections::BTreeMap<String, (f64, f64)> = Default::default();
    for (_, url) in network.metrics_endpoints() {
        let Ok(response) = reqwest::get(&url).await else {
            continue;
        };
        for line in response.text().await?.lines() {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            for (suffix, index) in [("_sum", 0), ("_count", 1)] {
                let Some(base) = name.strip_suffix(suffix) else {
                    continue;
                };
                if WANTED.contains(&base) {
                    let key = match labels.trim_end_matches('}') {
                        "" => base.to_owned(),
                        labels => format!("{base}{{{labels}}}"),
                    };
                    let entry = sums.entry(key).or_default();
                    if index == 0 {
                        entry.0 += value;
                    } else {
                        entry.1 += value;
                    }
                }
            }
        }
    }
    let mut means = serde_json::Map::new();
    println!("where the time goes (mean per job, over every service of a kind):");
    for (series, (sum, count)) in sums {
        if count > 0.0 {
            let mean_ms = sum / count * 1e3;
            println!("  {series:<72} {mean_ms:9.1} ms  ({count} samples)");
            means.insert(series, serde_json::json!(round(mean_ms)));
        }
    }
    Ok(means.into())
}

/// Items on a page of the API's list at `path`.
async fn count(network: &Network, path: &str) -> anyhow::Result<usize> {
    let page: serde_json::Value = reqwest::get(format!("{}{path}", network.api_url))
        .await?
        .json()
        .await?;
    Ok(page["items"].as_array().map_or(0, Vec::len))
}

/// Waits for the next block (or node change, or lag notice) on the API's feed.
async fn next_block_or_node(feed: &mut EventStream) -> anyhow::Result<()> {
    let wait = async {
        loop {
            let event = feed
                .next()
                .await?
                .ok_or_else(|| anyhow::anyhow!("the feed ended"))?;
            if matches!(event.event.as_str(), "block" | "node" | "lagged") {
                return anyhow::Ok(());
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(120), wait)
        .await
        .map_err(|_| anyhow::anyhow!("nothing happened for 120 s"))?
}

/// Containers of the same image and command run to completion per second, `parallel` at
/// once.
async fn bare_runs_per_s(docker: &Docker, parallel: usize) -> anyhow::Result<f64> {
    let start = Instant::now();
    let runs = futures::stream::iter(0..BASELINE_RUNS)
        .map(|i| async move {
            let name = format!("gantry-bench-bare-{i}");
            let body = ContainerCreateBody {
                image: Some(demo::BASE_IMAGE.into()),
                cmd: Some(vec!["sh".into(), "-c".into(), COMMAND.into()]),
                host_config: Some(HostConfig {
                    network_mode: Some("none".into()),
                    tmpfs: Some([("/outputs".to_string(), String::new())].into()),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let options = CreateContainerOptionsBuilder::new().name(&name).build();
            docker.create_container(Some(options), body).await?;
            docker
                .start_container(
                    &name,
                    None::<bollard::query_parameters::StartContainerOptions>,
                )
                .await?;
            let mut wait = docker.wait_container(&name, None::<WaitContainerOptions>);
            while let Some(status) = wait.next().await {
                status?;
            }
            let remove = RemoveContainerOptionsBuilder::new().force(true).build();
            docker.remove_container(&name, Some(remove)).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(parallel)
        .collect::<Vec<_>>()
        .await;
    for run in runs {
        run?;
    }
    Ok(BASELINE_RUNS as f64 / start.elapsed().as_secs_f64())
}

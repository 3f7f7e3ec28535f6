//! The demo job `make dev` runs end to end: a linear model trained by gradient descent
//! (`deploy/demo/train.sh`, busybox awk) on a CSV the dev network serves over HTTP, with
//! its SHA-256 in the spec. It prints a progress line per epoch with the loss, writes a
//! checkpoint per epoch and the model as its result. With `--engine wasm` the job is a
//! WASM module instead (`deploy/demo/summary.wat`, served beside the dataset): it
//! summarises the same CSV (lines, bytes, FNV-1a) into `/outputs/summary.json`,
//! deterministically.
//!
//! ```text
//!   deploy/demo/{Dockerfile,train.sh} ──build (Docker API, FROM gantry/busybox:dev)──▶ gantry/demo:dev
//!   dataset() ──DatasetServer (HTTP)──▶ worker's input cache ──▶ /inputs/data.csv
//!   post() ──JobPosted──▶ matcher ──▶ worker ──▶ result ──▶ keeper finalizes ──▶ paid
//!   follow() ◀──SSE /v1/events?job=<id>── gantry-api
//! ```

use std::io;

use alloy::primitives::aliases::U96;
use alloy::primitives::{B256, U256};
use anyhow::Context;
use bollard::Docker;
use bollard::query_parameters::BuildImageOptionsBuilder;
use futures::StreamExt;
use gantry_protocol::api::{JobRow, LiveEventName};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::spec::{
    Engine, InputSpec, JobKind, JobSpec, ModuleSpec, OutputSpec, Resources, SPEC_VERSION, WasmSpec,
};
use gantry_protocol::status::JobStatus;
use gantry_testkit::{Devnet, JobPost, import_busybox};
use sha2::{Digest, Sha256};

use crate::sse::EventStream;

/// The base image, imported from the host's busybox.
pub const BASE_IMAGE: &str = "gantry/busybox:dev";
/// The demo job's image, built from `deploy/demo/`.
pub const DEMO_IMAGE: &str = "gantry/demo:dev";
/// Where [`DatasetServer`] serves [`dataset`].
pub const DATASET_PATH: &str = "/datasets/linear.csv";
/// Where [`DatasetServer`] serves the WASM demo's module, [`WASM_MODULE`].
pub const MODULE_PATH: &str = "/modules/summary.wat";
/// The WASM demo's module: WebAssembly text, which the worker assembles.
pub const WASM_MODULE: &str = include_str!("../../demo/summary.wat");
/// The demo job's bounty: 5 gUSD.
pub const BOUNTY: u64 = 5_000_000;
/// Epochs the demo trains for.
pub const EPOCHS: u32 = 30;

const DOCKERFILE: &str = include_str!("../../demo/Dockerfile");
const TRAINER: &str = include_str!("../../demo/train.sh");
const GUSD: u128 = 1_000_000;

/// Builds [`DEMO_IMAGE`] in `docker` (importing [`BASE_IMAGE`] first), like
/// `docker build -t gantry/demo:dev deploy/demo`.
pub async fn build_image(docker: &Docker) -> anyhow::Result<()> {
    import_busybox(docker, BASE_IMAGE)
        .await
        .with_context(|| format!("importing {BASE_IMAGE}"))?;
    let context = build_context().context("packing the build context")?;
    let options = BuildImageOptionsBuilder::new()
        .dockerfile("Dockerfile")
        .t(DEMO_IMAGE)
        .rm(true)
        .forcerm(true)
        .build();
    let mut build = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    while let Some(step) = build.next().await {
        let step = step.with_context(|| format!("building {DEMO_IMAGE}"))?;
        if let Some(error) = step.error_detail.and_then(|e| e.message) {
            anyhow::bail!("building {DEMO_IMAGE}: {error}");
        }
    }
    Ok(())
}

/// The build context: `deploy/demo/` as a tar.
fn build_context() -> io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, body, mode) in [
        ("Dockerfile", DOCKERFILE, 0o644),
        ("train.sh", TRAINER, 0o755),
    ] {
        let mut header = tar::Header::new_ustar();
        header.set_size(body.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, path, body.as_bytes())?;
    }
    tar.into_inner()
}

/// The training data, `x1,x2,y` with y = 3·x1 − 2·x2 + 0.5 + noise in ±0.05, for x1 and
/// x2 uniform in −1..1: 1,000 rows, the same bytes every time.
pub fn dataset() -> Vec<u8> {
    // A 64-bit LCG (Knuth's MMIX constants): deterministic, good enough for demo data.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    };
    let mut csv = String::from("x1,x2,y\n");
    for _ in 0..1_000 {
        let (x1, x2, noise) = (uniform(), uniform(), uniform() * 0.05);
        let y = 3.0 * x1 - 2.0 * x2 + 0.5 + noise;
        csv.push_str(&format!("{x1:.4},{x2:.4},{y:.4}\n"));
    }
    csv.into_bytes()
}

/// Serves [`dataset`] at [`DATASET_PATH`] and [`WASM_MODULE`] at [`MODULE_PATH`] on a free
/// loopback port until dropped.
#[derive(Debug)]
pub struct DatasetServer {
    url: String,
    sha256: String,
    module_url: String,
    task: tokio::task::JoinHandle<()>,
}

impl DatasetServer {
    pub async fn start() -> io::Result<Self> {
        let data = dataset();
        let sha256 = format!("{:x}", Sha256::digest(&data));
        let app = axum::Router::new()
            .route(
                DATASET_PATH,
                axum::routing::get(move || {
                    let data = data.clone();
                    async move { ([("content-type", "text/csv")], data) }
                }),
            )
            .route(
                MODULE_PATH,
                axum::routing::get(|| async { ([("content-type", "text/plain")], WASM_MODULE) }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "the dataset server stopped");
            }
        });
        Ok(Self {
            url: format!("http://{address}{DATASET_PATH}"),
            sha256,
            module_url: format!("http://{address}{MODULE_PATH}"),
            task,
        })
    }

    /// The dataset's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its hex SHA-256.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The WASM demo module's URL.
    pub fn module_url(&self) -> &str {
        &self.module_url
    }

    /// The demo job's spec on `engine`, with this server's dataset (and module).
    pub fn spec(&self, engine: Engine) -> JobSpec {
        match engine {
            Engine::Docker => spec(self.url(), self.sha256()),
            Engine::Wasm => wasm_spec(self.url(), self.sha256(), self.module_url()),
        }
    }
}

impl Drop for DatasetServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The demo job's spec: the image, the dataset at `dataset_url` as `/inputs/data.csv`
/// (checked against `sha256`), the model in `/outputs`.
pub fn spec(dataset_url: &str, sha256: &str) -> JobSpec {
    JobSpec {
        encryption: None,
        version: SPEC_VERSION,
        kind: JobKind::Training,
        image: DEMO_IMAGE.into(),
        command: vec!["sh".into(), "/app/train.sh".into()],
        env: [("EPOCHS".to_string(), EPOCHS.to_string())].into(),
        inputs: vec![InputSpec {
            encrypted: false,
            uri: dataset_url.into(),
            sha256: Some(sha256.into()),
            path: "/inputs/data.csv".into(),
            max_bytes: Some(1 << 20),
        }],
        outputs: OutputSpec {
            path: "/outputs".into(),
            max_bytes: Some(1 << 20),
        },
        resources: Resources {
            cpu_threads: Some(1),
            gpu_memory_percent: None,
        },
        timeout_secs: 300,
        engine: gantry_protocol::spec::Engine::Docker,
        wasm: None,
    }
}

/// The WASM demo job's spec: [`WASM_MODULE`] from `module_url`, the dataset at
/// `dataset_url` as `/inputs/data.csv`, its summary in `/outputs`; deterministic, so every
/// node computes the same result hash.
pub fn wasm_spec(dataset_url: &str, sha256: &str, module_url: &str) -> JobSpec {
    let docker = spec(dataset_url, sha256);
    JobSpec {
        image: String::new(),
        command: vec![],
        env: Default::default(),
        resources: Resources::default(),
        timeout_secs: 60,
        engine: Engine::Wasm,
        wasm: Some(WasmSpec {
            module: ModuleSpec {
                uri: module_url.into(),
                sha256: format!("{:x}", Sha256::digest(WASM_MODULE.as_bytes())),
                max_bytes: None,
            },
            entry: None,
            memory_mib: Some(16),
            deterministic: true,
        }),
        ..docker
    }
}

/// What the demo job asks of a node: any, even without a GPU (the dev machine has none),
/// that runs the spec's engine.
pub fn requirements_for(spec: &JobSpec) -> JobMarket::JobRequirements {
    JobMarket::JobRequirements {
        engine: spec.engine.code(),
        ..requirements()
    }
}

/// What the Docker demo job asks of a node: any, even without a GPU (the dev machine has
/// none).
pub fn requirements() -> JobMarket::JobRequirements {
    JobMarket::JobRequirements {
        gpuModel: B256::ZERO,
        minGpuCount: 0,
        minVramMiB: 0,
        minCpuCores: 1,
        minRamMiB: 256,
        maxPricePerGpuHour: U96::from(2 * GUSD),
        maxRuntime: 600,
        priority: 5,
        engine: gantry_protocol::spec::Engine::Docker.code(),
    }
}

/// Posts the demo job as anvil account `submitter` (funded and approved for the market
/// first); returns its id.
pub async fn post(devnet: &Devnet, submitter: usize, spec: &JobSpec) -> anyhow::Result<u64> {
    devnet
        .fund(
            submitter,
            devnet.deployment.market,
            U256::from(1_000 * GUSD),
        )
        .await?;
    let job = JobPost {
        requirements: requirements_for(spec),
        bounty: BOUNTY,
        deadline: devnet.now().await? + 3_600,
        spec: serde_json::to_vec(spec)?,
    };
    Ok(devnet.post_job(submitter, job).await?)
}

/// How a followed job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub job_id: u64,
    /// `completed`, `failed`, `cancelled` or `expired`.
    pub status: String,
    pub node_id: Option<u64>,
    pub payout: Option<String>,
    pub result_hash: Option<String>,
    pub result_uri: Option<String>,
}

/// Follows job `job_id` through the API at `api` (its live feed, and its rows when the
/// feed says to refetch) until it settles, telling `say` each step: assignment, each
/// epoch's loss, the result, the payout.
pub async fn follow(
    api: &str,
    job_id: u64,
    mut say: impl FnMut(String),
) -> anyhow::Result<Outcome> {
    let mut feed = EventStream::open(&format!("{api}/v1/events?job={job_id}")).await?;
    let http = reqwest::Client::new();
    let mut last_status: Option<JobStatus> = None;
    let mut last_epoch = None;
    let mut row = fetch(&http, api, job_id).await?;
    loop {
        if let Some(job) = row.take() {
            if Some(job.status) != last_status {
                say(describe(&job));
                last_status = Some(job.status);
            }
            if job.status.is_settled() {
                return Ok(Outcome {
                    job_id,
                    status: job.status.as_str().to_owned(),
                    node_id: job.node_id,
                    payout: job.payout,
                    result_hash: job.result_hash,
                    result_uri: job.result_uri,
                });
            }
        }
        let Some(event) = feed.next().await? else {
            anyhow::bail!("the API closed its event stream");
        };
        let name = LiveEventName::parse(&event.event);
        let data: serde_json::Value = match name {
            Some(LiveEventName::Job | LiveEventName::Progress) => {
                serde_json::from_str(&event.data)?
            }
            Some(LiveEventName::Lagged | LiveEventName::Reorg) => {
                row = fetch(&http, api, job_id).await?;
                continue;
            }
            _ => continue,
        };
        if data["jobId"].as_u64() != Some(job_id) {
            continue;
        }
        if name == Some(LiveEventName::Job) {
            row = Some(serde_json::from_value(data)?);
        } else if data["epoch"].as_u64() != last_epoch {
            last_epoch = data["epoch"].as_u64();
            say(format!(
                "job {job_id}: epoch {}/{} loss {} ({}% done)",
                data["epoch"],
                data["epochs"],
                data["metrics"]["loss"],
                (data["progress"].as_f64().unwrap_or(0.0) * 100.0).round()
            ));
        }
    }
}

/// The job's row, `None` while the API has not projected it yet.
async fn fetch(http: &reqwest::Client, api: &str, job_id: u64) -> anyhow::Result<Option<JobRow>> {
    let response = http.get(format!("{api}/v1/jobs/{job_id}")).send().await?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    Ok(Some(response.error_for_status()?.json().await?))
}

/// A step of the job's life, for people.
fn describe(job: &JobRow) -> String {
    let id = job.job_id;
    let node = job.node_id.map_or("?".into(), |n| n.to_string());
    let until = job.until.map_or("?".into(), |t| t.to_string());
    match job.status {
        JobStatus::Open if job.attempts == 0 => format!("job {id}: posted, waiting for a node"),
        JobStatus::Open => format!(
            "job {id}: back in the queue after attempt {} ({}; barred nodes: {:?})",
            job.attempts,
            job.reason.as_deref().unwrap_or("no reason given"),
            job.barred_nodes
        ),
        JobStatus::Assigned => format!(
            "job {id}: assigned to node {node} (attempt {}; it answers by chain time {until})",
            job.attempts
        ),
        JobStatus::Submitted => format!(
            "job {id}: result {} at {}; paid once the challenge window ends (chain time {until})",
            job.result_hash.as_deref().unwrap_or("?"),
            job.result_uri.as_deref().unwrap_or("?"),
        ),
        JobStatus::Disputed => format!(
            "job {id}: disputed (bond {}); the arbiter decides by chain time {until}",
            gusd(job.dispute.as_ref().map(|d| d.bond.as_str()))
        ),
        JobStatus::Completed => format!(
            "job {id}: completed — {} paid to node {node}'s earnings (fee {})",
            gusd(job.payout.as_deref()),
            gusd(job.fee.as_deref())
        ),
        other => format!(
            "job {id}: {other} — {} refunded to the submitter's credits ({})",
            gusd(job.refund.as_deref()),
            job.reason.as_deref().unwrap_or("no reason given")
        ),
    }
}

/// Base units as gUSD, e.g. `4.875 gUSD`.
fn gusd(amount: Option<&str>) -> String {
    let Some(units) = amount.and_then(|a| a.parse::<u128>().ok()) else {
        return "? gUSD".into();
    };
    let fraction = format!("{:06}", units % GUSD);
    let fraction = fraction.trim_end_matches('0');
    if fraction.is_empty() {
        format!("{} gUSD", units / GUSD)
    } else {
        format!("{}.{fraction} gUSD", units / GUSD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dataset_is_the_same_every_time_and_fits_the_model() {
        let data = dataset();
        assert_eq!(data, dataset());
        let text = String::from_utf8(data).unwrap();
        let rows: Vec<Vec<f64>> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
            .collect();
        assert_eq!(rows.len(), 1_000);
        for row in &rows {
            let residual = row[2] - (3.0 * row[0] - 2.0 * row[1] + 0.5);
            assert!(residual.abs() <= 0.051, "{row:?}");
        }
    }

    #[test]
    fn each_step_reads_from_the_v2_row() {
        let row = |status: JobStatus| JobRow {
            job_id: 1,
            status,
            attempts: 1,
            node_id: Some(3),
            until: Some(1_800_000_030),
            result_hash: Some("0xab".into()),
            result_uri: Some("nats://b/1-1".into()),
            payout: Some("4875000".into()),
            fee: Some("125000".into()),
            refund: Some("5000000".into()),
            ..JobRow::default()
        };
        for (status, expected) in [
            (
                JobStatus::Assigned,
                "job 1: assigned to node 3 (attempt 1; it answers by chain time 1800000030)",
            ),
            (
                JobStatus::Submitted,
                "job 1: result 0xab at nats://b/1-1; paid once the challenge window ends (chain time 1800000030)",
            ),
            (
                JobStatus::Completed,
                "job 1: completed — 4.875 gUSD paid to node 3's earnings (fee 0.125 gUSD)",
            ),
            (
                JobStatus::Expired,
                "job 1: expired — 5 gUSD refunded to the submitter's credits (no reason given)",
            ),
        ] {
            assert_eq!(describe(&row(status)), expected);
        }
    }

    #[test]
    fn the_spec_is_valid_and_amounts_print_as_gusd() {
        let sha256 = format!("{:x}", Sha256::digest(dataset()));
        spec("http://127.0.0.1:1/datasets/linear.csv", &sha256)
            .validate()
            .unwrap();
        assert_eq!(gusd(Some("4875000")), "4.875 gUSD");
        assert_eq!(gusd(Some("5000000")), "5 gUSD");
        assert_eq!(gusd(None), "? gUSD");
    }
}
